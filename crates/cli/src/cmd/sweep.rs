//! `quantenergy sweep plan.toml`: every repeat in its own process (a fresh CUDA context per
//! repeat), resumable (a job whose reports exist is skipped), and an `aggregate.csv` at the end.
//! `--emit slurm` writes the plan as a Slurm job array instead; each array task comes back here
//! with `--task N` and runs that one job.
//!
//! A job has three outcomes and one non-outcome. It measured (its reports), it ran without a GPU
//! (its labelled estimates), or it failed: its process died or exited non-zero without writing
//! a report, and the sweep writes `<stem>.failed.json` with the reason — a record, never a hole
//! and never a figure. Interrupted (Ctrl-C, SIGTERM, `scancel`), it leaves nothing, so the next
//! run or resubmission starts exactly there.

use anyhow::{bail, Context, Result};
use campaign::aggregate::aggregate_csv;
use campaign::plan::{jobs, parse_plan, Job, JobModel, JobState, JobTarget, MeasureJob};
use campaign::slurm::{sbatch_script, ArrayScript, SlurmOptions};
use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Which jobs of a plan to run, and where.
#[derive(Args, Debug)]
pub struct SweepArgs {
    /// The plan (TOML).
    pub plan: PathBuf,
    /// Write reports here instead of the plan's `out` (with `--emit slurm`: the results
    /// directory every node shares).
    #[arg(long, alias = "results")]
    pub out: Option<PathBuf>,
    /// Run at most this many pending jobs, then stop (rerun to resume).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Start no new job after this many seconds.
    #[arg(long)]
    pub time_budget_s: Option<f64>,
    /// List the jobs and where each stands; run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Run only the jobs whose name contains this (repeatable), e.g. `--only _r3 --only BF16`.
    #[arg(long)]
    pub only: Vec<String>,
    /// Run failed jobs again (their `.failed.json` is replaced by what the new run writes; with
    /// `--emit slurm`, every task of the script does).
    #[arg(long)]
    pub retry_failed: bool,
    /// Run jobs again whose reports are only the no-GPU estimate (a node without a GPU ran them).
    #[arg(long)]
    pub retry_estimated: bool,
    /// Write the plan as a job array for this scheduler (printed to stdout) instead of running it.
    #[arg(long, value_enum)]
    pub emit: Option<Scheduler>,
    /// Slurm partition.
    #[arg(long, requires = "emit")]
    pub partition: Option<String>,
    /// Slurm account.
    #[arg(long, requires = "emit")]
    pub account: Option<String>,
    /// Time limit per array task, in Slurm's syntax (`30:00`).
    #[arg(long, requires = "emit")]
    pub time: Option<String>,
    /// GPUs per array task (0 for the no-GPU path).
    #[arg(long, default_value_t = 1, requires = "emit")]
    pub gpus_per_task: u32,
    /// At most this many array tasks at once.
    #[arg(long, requires = "emit")]
    pub max_parallel: Option<usize>,
    /// The command each array task runs (default: this binary's path; a site wrapper or a
    /// container launcher around it works too).
    #[arg(long, requires = "emit")]
    pub exe: Option<String>,
    /// Run only job number N of the plan (0-based; what an array task does).
    #[arg(long, conflicts_with_all = ["emit", "limit", "only", "time_budget_s"])]
    pub task: Option<usize>,
    /// With `--task`: the plan's SHA-256 when the array was emitted (a changed plan is refused).
    #[arg(long, requires = "task")]
    pub plan_sha256: Option<String>,
}

/// A scheduler a sweep can be emitted for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scheduler {
    /// An sbatch script with one array task per job.
    Slurm,
}

/// The plan, its jobs and where their reports go.
struct Loaded {
    plan_path: PathBuf,
    out: PathBuf,
    jobs: Vec<Job>,
    /// Runs whose arm order is only partly counterbalanced (`plan::order_balance_notes`).
    order_notes: Vec<String>,
}

fn load(opts: &SweepArgs) -> Result<Loaded> {
    let plan_path = std::path::absolute(&opts.plan)
        .with_context(|| format!("resolving {}", opts.plan.display()))?;
    let text = meter::files::read_text_limited(&plan_path, meter::files::TEXT_INPUT_LIMIT)?;
    let mut plan = parse_plan(&text).with_context(|| opts.plan.display().to_string())?;
    let base = plan_path.parent().unwrap_or(Path::new("."));
    // Model files beside the plan, named as the plan was (a relative plan gives relative paths):
    // the server command and model id a report records then hold no machine's checkout path.
    plan.resolve_paths(opts.plan.parent().unwrap_or(Path::new("")));
    let out = std::path::absolute(opts.out.clone().unwrap_or_else(|| base.join(&plan.out)))?;
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let jobs = jobs(&plan, &out);
    Ok(Loaded {
        plan_path,
        out,
        jobs,
        order_notes: campaign::plan::order_balance_notes(&plan),
    })
}

impl SweepArgs {
    /// Whether a job in `state` is to run.
    fn runs(&self, state: &JobState) -> bool {
        match state {
            JobState::Pending => true,
            JobState::Failed(_) => self.retry_failed,
            JobState::Estimated => self.retry_estimated,
            JobState::Measured => false,
        }
    }
}

fn state_words(s: &JobState) -> String {
    match s {
        JobState::Pending => "pending".into(),
        JobState::Measured => "done (measured)".into(),
        JobState::Estimated => "done (no-GPU estimate only)".into(),
        JobState::Failed(why) => format!("failed: {why}"),
    }
}

/// `sweep`: run the plan here, run one job of it (`--task`), or emit it for a scheduler.
pub fn run(opts: &SweepArgs) -> Result<u8> {
    let l = load(opts)?;
    if let Some(n) = opts.task {
        return run_task(opts, &l, n);
    }
    if let Some(Scheduler::Slurm) = opts.emit {
        return emit_slurm(opts, &l);
    }
    run_here(opts, &l)
}

/// The whole plan on this machine, job after job.
fn run_here(opts: &SweepArgs, l: &Loaded) -> Result<u8> {
    let states: Vec<JobState> = l.jobs.iter().map(Job::state).collect();
    let pending: Vec<&Job> = l
        .jobs
        .iter()
        .zip(&states)
        .filter(|(j, s)| {
            opts.runs(s)
                && (opts.only.is_empty() || opts.only.iter().any(|o| j.stem.contains(o.as_str())))
        })
        .map(|(j, _)| j)
        .collect();
    let failed = states
        .iter()
        .filter(|s| matches!(s, JobState::Failed(_)))
        .count();
    let done = states
        .iter()
        .filter(|s| matches!(s, JobState::Measured | JobState::Estimated))
        .count();
    // With --only, the jobs left out are neither "to run" nor "done": say how many.
    let left_out = states
        .iter()
        .filter(|s| matches!(s, JobState::Pending))
        .count()
        .saturating_sub(pending.len());
    println!(
        "{} jobs in the plan, {} to run, {done} done, {failed} failed before{}",
        l.jobs.len(),
        pending.len(),
        if left_out > 0 && !opts.only.is_empty() {
            format!(", {left_out} pending but not selected by --only")
        } else {
            String::new()
        }
    );
    if !pending.is_empty() {
        for note in &l.order_notes {
            println!("  arm order: {note}");
        }
    }
    if opts.dry_run {
        for (i, (j, s)) in l.jobs.iter().zip(&states).enumerate() {
            println!("  {i:>4} {:<40} {}", j.stem, state_words(s));
        }
        return Ok(0);
    }
    let exe = job_exe()?;
    let bar = indicatif::ProgressBar::new(pending.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    let t0 = std::time::Instant::now();
    let mut failures = Vec::new();
    meter::interrupt::install_stop_flag();
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
        match run_job(&exe, job)? {
            JobEnd::Done => {}
            JobEnd::Failed(why) => {
                bar.println(format!("FAILED {}: {why}", job.stem));
                failures.push(job.stem.clone());
            }
            JobEnd::Interrupted(sig) => {
                bar.abandon();
                eprintln!(
                    "interrupted during {} (signal {sig}): it left no report; run the sweep again to resume there",
                    job.stem
                );
                return Ok(128 + sig as u8);
            }
        }
        bar.inc(1);
    }
    bar.finish();
    write_aggregate(&l.out)?;
    if !failures.is_empty() {
        bail!(
            "{} job(s) failed (see their .failed.json): {}",
            failures.len(),
            failures.join(", ")
        );
    }
    Ok(0)
}

/// `aggregate.csv` of the results folder; a sweep with nothing new leaves the (often committed)
/// file as it is, mtime included.
fn write_aggregate(out: &Path) -> Result<()> {
    let csv = aggregate_csv(out)?;
    let path = out.join("aggregate.csv");
    if std::fs::read(&path).is_ok_and(|old| old == csv.as_bytes()) {
        println!("{} unchanged", path.display());
    } else {
        meter::files::write_atomic(&path, csv.as_bytes())?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// One job of the plan, as a Slurm array task runs it.
fn run_task(opts: &SweepArgs, l: &Loaded, n: usize) -> Result<u8> {
    if let Some(want) = &opts.plan_sha256 {
        let (have, _) = meter::files::sha256_file(&l.plan_path)?;
        if !have.eq_ignore_ascii_case(want) {
            bail!(
                "{} changed since the array was emitted (sha256 {have}, the script expects {want}): \
                 its job numbers may name other jobs now; emit the script again",
                l.plan_path.display()
            );
        }
    }
    let Some(job) = l.jobs.get(n) else {
        bail!(
            "task {n}: the plan has {} jobs (0 to {})",
            l.jobs.len(),
            l.jobs.len().saturating_sub(1)
        );
    };
    let state = job.state();
    if opts.dry_run || !opts.runs(&state) {
        println!("task {n} ({}): {}", job.stem, state_words(&state));
        return Ok(0);
    }
    println!("task {n}: running {}", job.stem);
    meter::interrupt::install_stop_flag();
    match run_job(&job_exe()?, job)? {
        JobEnd::Done => Ok(0),
        JobEnd::Failed(why) => {
            eprintln!("task {n} ({}) failed: {why}", job.stem);
            Ok(1)
        }
        JobEnd::Interrupted(sig) => {
            eprintln!(
                "task {n} ({}) interrupted by signal {sig}: no report written",
                job.stem
            );
            Ok(128 + sig as u8)
        }
    }
}

/// The sbatch script on stdout, or with `--dry-run` what the array would do.
fn emit_slurm(opts: &SweepArgs, l: &Loaded) -> Result<u8> {
    if opts.dry_run {
        let states: Vec<JobState> = l.jobs.iter().map(Job::state).collect();
        let to_run = states.iter().filter(|s| opts.runs(s)).count();
        println!(
            "the array has {} tasks: {to_run} would run, {} would exit at once (done)",
            l.jobs.len(),
            l.jobs.len() - to_run
        );
        for (i, (j, s)) in l.jobs.iter().zip(&states).enumerate() {
            let verb = if opts.runs(s) { "would run" } else { "skips" };
            println!("  task {i:>4}: {verb:<9} {:<40} {}", j.stem, state_words(s));
        }
        return Ok(0);
    }
    let (sha, _) = meter::files::sha256_file(&l.plan_path)?;
    let exe = match &opts.exe {
        Some(e) => e.clone(),
        None => std::env::current_exe()?.display().to_string(),
    };
    std::fs::create_dir_all(l.out.join("slurm-logs"))?;
    let slurm = SlurmOptions {
        partition: opts.partition.clone(),
        account: opts.account.clone(),
        time: opts.time.clone(),
        gpus_per_task: opts.gpus_per_task,
        max_parallel: opts.max_parallel,
        retry_failed: opts.retry_failed,
        retry_estimated: opts.retry_estimated,
    };
    let script = sbatch_script(&ArrayScript {
        plan: &l.plan_path,
        plan_sha256: &sha,
        results: &l.out,
        exe: &exe,
        jobs: l.jobs.len(),
        opts: &slurm,
    })
    .map_err(anyhow::Error::msg)?;
    print!("{script}");
    Ok(0)
}

/// What a job's process came to.
enum JobEnd {
    /// It wrote its reports (measured or estimated).
    Done,
    /// It failed; its failed reports say why.
    Failed(String),
    /// This sweep was told to stop (the signal): nothing was written.
    Interrupted(i32),
}

/// The arguments of a job's `quantenergy measure` process: the one place a typed job becomes
/// argv (the round-trip test below parses them back with the CLI's own parser).
pub fn measure_args(m: &MeasureJob) -> Vec<String> {
    let mut a: Vec<String> = vec!["measure".into()];
    let batch_flag = match &m.target {
        JobTarget::Engine {
            model,
            precisions,
            baseline,
            engine,
        } => {
            match model {
                JobModel::Synthetic(s) => a.extend(["--synthetic".into(), s.clone()]),
                JobModel::Path(p) => a.extend(["--model".into(), p.display().to_string()]),
            }
            let list: Vec<&str> = precisions.iter().map(|p| p.as_str()).collect();
            a.extend([
                "--precision".into(),
                list.join(","),
                "--baseline".into(),
                baseline.as_str().into(),
                "--engine".into(),
                engine.as_str().into(),
            ]);
            "--batch"
        }
        JobTarget::Server {
            command,
            api,
            model_files,
        } => {
            a.extend(["--server-cmd".into(), command.clone()]);
            if let Some(api) = api {
                a.extend(["--api".into(), api.as_str().into()]);
            }
            for (p, f) in model_files {
                let t = campaign::plan::gguf_type_name(*p);
                a.extend(["--model-file".into(), format!("{t}={}", f.display())]);
            }
            "--concurrency"
        }
    };
    a.extend([
        batch_flag.into(),
        m.batch.to_string(),
        "--tokens".into(),
        m.tokens.to_string(),
        "--iterations".into(),
        m.iterations.to_string(),
        "--warmup".into(),
        m.warmup.to_string(),
        "--seed".into(),
        m.seed.to_string(),
        "--cooldown-max-s".into(),
        m.cooldown_max_s.to_string(),
        "--sample-hz".into(),
        m.sample_hz.to_string(),
        "--out".into(),
        m.out.display().to_string(),
        "--name".into(),
        m.name.clone(),
    ]);
    if let Some(d) = m.context {
        a.extend(["--context".into(), d.to_string()]);
    }
    if let Some(card) = &m.card {
        a.extend(["--gpu".into(), card.clone()]);
    }
    a.extend([
        "--order-seed".into(),
        m.order_seed.to_string(),
        "--order-repeat".into(),
        m.order_repeat.to_string(),
    ]);
    if let Some(s) = &m.session {
        a.extend(["--session".into(), s.clone()]);
    }
    a
}

/// The command a job runs: `QUANTENERGY_EXE` (a Slurm array sets it to what was emitted), else
/// this binary.
fn job_exe() -> Result<PathBuf> {
    match std::env::var_os("QUANTENERGY_EXE") {
        Some(e) if !e.is_empty() => Ok(PathBuf::from(e)),
        _ => Ok(std::env::current_exe()?),
    }
}

/// How many of the child's last stderr lines a failed report quotes.
const TAIL_LINES: usize = 8;

/// Run one job in its own process; stderr passes through and its tail is kept for the reason.
fn run_job(exe: &Path, job: &Job) -> Result<JobEnd> {
    use std::io::BufRead;
    let mut child = std::process::Command::new(exe)
        .args(measure_args(&job.measure))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", exe.display()))?;
    let stderr = child.stderr.take().expect("piped");
    let tail = std::thread::spawn(move || {
        let mut last: std::collections::VecDeque<String> = Default::default();
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(|l| l.ok())
        {
            eprintln!("{line}");
            if last.len() == TAIL_LINES {
                last.pop_front();
            }
            // The report keeps plain text: a child's coloured log lines lose their escapes.
            last.push_back(meter::causes::plain_text(&line));
        }
        last.into_iter().collect::<Vec<_>>().join(" | ")
    });
    let mut forwarded = 0;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        let sig = meter::interrupt::stop_requested();
        if sig != 0 && forwarded != sig {
            // A terminal's Ctrl-C reaches the child too; a `kill` or `scancel` of this process
            // alone may not: pass it on, then wait for the child to end.
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(child.id() as libc::pid_t, sig) };
            forwarded = sig;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let tail = tail.join().unwrap_or_default();
    // Told to stop — this sweep, or the job's process alone (a `kill` of it): an interruption, not
    // a failure of the job, so nothing is written and the next run starts with it.
    let stop = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];
    let sig = match (meter::interrupt::stop_requested(), status_signal(&status)) {
        (0, Some(s)) if stop.contains(&s) => s,
        (s, _) => s,
    };
    if sig != 0 {
        return Ok(JobEnd::Interrupted(sig));
    }
    let missing = job.unwritten();
    if status.success() && missing == 0 {
        for p in &job.expected {
            let _ = std::fs::remove_file(campaign::plan::with_kind(p, ".failed"));
        }
        return Ok(JobEnd::Done);
    }
    let why = match (status.code(), status_signal(&status)) {
        (Some(0), _) => format!("the process exited 0 but did not write {missing} of its reports"),
        (Some(c), _) => format!("exit status {c}: {tail}"),
        (None, Some(s)) => format!("killed by signal {s}{}: {tail}", signal_hint(s)),
        (None, None) => format!("ended without a status: {tail}"),
    };
    for (path, mut rep) in job.failed_reports(&why) {
        meter::files::write_report(&path, &mut rep)?;
    }
    Ok(JobEnd::Failed(why))
}

fn status_signal(s: &std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    s.signal()
}

fn signal_hint(sig: i32) -> &'static str {
    match sig {
        libc::SIGKILL => " (SIGKILL: the out-of-memory killer or the scheduler's time limit?)",
        libc::SIGSEGV => " (SIGSEGV)",
        libc::SIGABRT => " (SIGABRT)",
        _ => "",
    }
}

#[cfg(test)]
mod job_args_tests {
    use super::*;
    use crate::cmd::measure::MeasureArgs;
    use clap::Parser;
    use report::Precision;

    fn parse(m: &MeasureJob) -> MeasureArgs {
        let argv = std::iter::once("quantenergy".to_string()).chain(measure_args(m));
        match crate::Cli::try_parse_from(argv) {
            Ok(crate::Cli {
                command: crate::Command::Measure(a),
                ..
            }) => *a,
            Ok(other) => panic!("not a measure command: {other:?}"),
            Err(e) => panic!("clap refused the job's arguments: {e}"),
        }
    }

    fn job(target: JobTarget) -> MeasureJob {
        MeasureJob {
            target,
            batch: 8,
            tokens: 128,
            iterations: 7,
            warmup: 3,
            seed: 2003,
            cooldown_max_s: 45.5,
            sample_hz: 40.0,
            out: "/r/raw dir".into(),
            name: "qwen2-7b_b8_r3".into(),
            card: Some("H200".into()),
            order_seed: 2000,
            order_repeat: 3,
            session: Some("h200-2026-12".into()),
            context: Some(4096),
        }
    }

    /// What the protocol settings of a job say, the CLI reads back.
    fn same_protocol(m: &MeasureJob, a: &MeasureArgs) {
        assert_eq!(
            (a.batch, a.tokens, a.iterations, a.warmup, a.seed),
            (m.batch, m.tokens, m.iterations, m.warmup, m.seed)
        );
        assert_eq!(
            (a.cooldown_max_s, a.sample_hz),
            (m.cooldown_max_s, m.sample_hz)
        );
        assert_eq!((&a.out, a.name.as_deref()), (&m.out, Some(m.name.as_str())));
        assert_eq!(a.gpu.as_ref().and_then(|g| g.card()), m.card);
        assert_eq!(
            (a.order_seed, a.order_repeat),
            (Some(m.order_seed), Some(m.order_repeat as u64))
        );
        assert_eq!(a.session, m.session);
        assert_eq!(a.context.first().copied(), m.context);
    }

    #[test]
    fn an_engine_job_round_trips_through_the_cli_parser() {
        let p = |s: &str| s.parse::<Precision>().unwrap();
        for model in [
            JobModel::Synthetic("qwen2-7b".into()),
            JobModel::Path("/models/q 7b.gguf".into()),
        ] {
            let m = job(JobTarget::Engine {
                model: model.clone(),
                precisions: vec![p("Q8_0"), p("Q4_K")],
                baseline: p("BF16"),
                engine: meter::decoder::EngineKind::Graph,
            });
            let a = parse(&m);
            same_protocol(&m, &a);
            match model {
                JobModel::Synthetic(s) => assert_eq!(a.synthetic, Some(s)),
                JobModel::Path(path) => assert_eq!(a.model, Some(path)),
            }
            assert_eq!(a.precision, [p("Q8_0"), p("Q4_K")]);
            assert_eq!(a.baseline.0, Some(p("BF16")));
            assert_eq!(a.engine, meter::decoder::EngineKind::Graph);
            assert!(!a.server.is_server());
        }
    }

    #[test]
    fn a_server_job_round_trips_through_the_cli_parser() {
        let p = |s: &str| s.parse::<Precision>().unwrap();
        let files = vec![
            (p("F16"), PathBuf::from("/g/qwen2-7b-F16.gguf")),
            (p("Q4_K"), PathBuf::from("/g/qwen2-7b-Q4_K.gguf")),
        ];
        // A plan never gives a server job a context.
        let m = MeasureJob {
            context: None,
            ..job(JobTarget::Server {
                command: "llama-server -m {model} --port {port} -np 8".into(),
                api: Some(meter::served::Api::Llama),
                model_files: files.clone(),
            })
        };
        let a = parse(&m);
        same_protocol(&m, &a);
        assert_eq!(
            a.server.server_cmd.as_deref(),
            Some("llama-server -m {model} --port {port} -np 8")
        );
        assert_eq!(a.server.api, meter::served::Api::Llama);
        let got: Vec<(Option<Precision>, PathBuf)> = a
            .server
            .model_files
            .iter()
            .map(|f| (f.precision, f.path.clone()))
            .collect();
        let want: Vec<(Option<Precision>, PathBuf)> =
            files.into_iter().map(|(p, f)| (Some(p), f)).collect();
        assert_eq!(got, want);
        assert!(a.precision.is_empty());
    }
}
