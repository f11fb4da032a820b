//! `quantenergy sweep plan.toml`: every repeat in its own process (a fresh CUDA context per
//! repeat), resumable (a job whose reports exist is skipped), and an `aggregate.csv` at the end.

use anyhow::{bail, Context, Result};
use clap::Args;
use meter::campaign::aggregate_csv;
use meter::plan::{jobs, parse_plan, Job};
use std::path::{Path, PathBuf};

/// Which jobs of a plan to run, and where.
#[derive(Args, Debug)]
pub struct SweepArgs {
    /// The plan (TOML).
    pub plan: PathBuf,
    /// Write reports here instead of the plan's `out`.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Run at most this many pending jobs, then stop (rerun to resume).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Start no new job after this many seconds.
    #[arg(long)]
    pub time_budget_s: Option<f64>,
    /// List the pending jobs only.
    #[arg(long)]
    pub dry_run: bool,
    /// Run only the jobs whose name contains this (repeatable), e.g. `--only _r3 --only BF16`.
    #[arg(long)]
    pub only: Vec<String>,
}

/// Run the plan's pending jobs, each in its own process of this binary, then write
/// `aggregate.csv`.
pub fn run(plan_path: &Path, opts: &SweepArgs) -> Result<()> {
    let text = std::fs::read_to_string(plan_path)
        .with_context(|| format!("reading {}", plan_path.display()))?;
    let plan = parse_plan(&text)?;
    let base = plan_path.parent().unwrap_or(Path::new("."));
    let out = opts.out.clone().unwrap_or_else(|| base.join(&plan.out));
    std::fs::create_dir_all(&out)?;
    let all = jobs(&plan, &out);
    let pending: Vec<&Job> = all
        .iter()
        .filter(|j| !j.expected.iter().all(|p| p.exists()))
        .filter(|j| opts.only.is_empty() || opts.only.iter().any(|o| j.stem.contains(o.as_str())))
        .collect();
    println!(
        "{} jobs in the plan, {} already done, {} pending",
        all.len(),
        all.len() - pending.len(),
        pending.len()
    );
    if opts.dry_run {
        for j in &pending {
            println!("  would run: quantenergy {}", j.args.join(" "));
        }
        return Ok(());
    }
    let exe = std::env::current_exe()?;
    let bar = indicatif::ProgressBar::new(pending.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    let t0 = std::time::Instant::now();
    let mut failures = Vec::new();
    for (i, job) in pending.iter().enumerate() {
        if opts.limit.is_some_and(|l| i >= l)
            || opts
                .time_budget_s
                .is_some_and(|b| t0.elapsed().as_secs_f64() > b)
        {
            bar.println(format!(
                "stopping: limit reached after {i} jobs; rerun to resume"
            ));
            break;
        }
        bar.set_message(job.stem.clone());
        let status = std::process::Command::new(&exe).args(&job.args).status()?;
        if !status.success() {
            failures.push(format!("{} (exit {status})", job.stem));
            bar.println(format!("FAILED {}: exit {status}", job.stem));
        }
        bar.inc(1);
    }
    bar.finish();
    let csv = aggregate_csv(&out)?;
    meter::files::write_atomic(&out.join("aggregate.csv"), csv.as_bytes())?;
    println!("wrote {}", out.join("aggregate.csv").display());
    if !failures.is_empty() {
        bail!("{} job(s) failed: {}", failures.len(), failures.join(", "));
    }
    Ok(())
}
