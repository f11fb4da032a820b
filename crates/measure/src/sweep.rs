//! `quantenergy sweep plan.toml`: many configurations, each repeat in its own process (a fresh
//! CUDA context and allocator per repeat, so repeats are independent), resumable (a job whose
//! reports exist is skipped), with an aggregate CSV of every report in the output directory.

use analysis::stats::mean;
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// Output directory, relative to the plan file.
    pub out: PathBuf,
    #[serde(default)]
    pub defaults: Defaults,
    #[serde(rename = "run")]
    pub runs: Vec<RunSpec>,
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    #[serde(default = "d_tokens")]
    pub tokens: usize,
    #[serde(default = "d_iterations")]
    pub iterations: usize,
    #[serde(default = "d_warmup")]
    pub warmup: usize,
    #[serde(default = "d_baseline")]
    pub baseline: String,
    #[serde(default = "d_repeats")]
    pub repeats: usize,
    #[serde(default = "d_cooldown")]
    pub cooldown_max_s: f64,
    #[serde(default = "d_hz")]
    pub sample_hz: f64,
}

fn d_tokens() -> usize {
    256
}
fn d_iterations() -> usize {
    10
}
fn d_warmup() -> usize {
    2
}
fn d_baseline() -> String {
    "F16".into()
}
fn d_repeats() -> usize {
    3
}
fn d_cooldown() -> f64 {
    60.0
}
fn d_hz() -> f64 {
    50.0
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            tokens: d_tokens(),
            iterations: d_iterations(),
            warmup: d_warmup(),
            baseline: d_baseline(),
            repeats: d_repeats(),
            cooldown_max_s: d_cooldown(),
            sample_hz: d_hz(),
        }
    }
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    pub synthetic: Option<String>,
    pub model: Option<PathBuf>,
    pub precisions: Vec<String>,
    #[serde(default = "one_batch")]
    pub batch: Vec<usize>,
    pub repeats: Option<usize>,
    pub tokens: Option<usize>,
    pub iterations: Option<usize>,
    pub baseline: Option<String>,
}

fn one_batch() -> Vec<usize> {
    vec![1]
}

/// One process to start.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub args: Vec<String>,
    pub stem: String,
    pub expected: Vec<PathBuf>,
}

pub fn parse_plan(text: &str) -> Result<Plan> {
    let plan: Plan = toml::from_str(text).context("plan.toml")?;
    for (i, r) in plan.runs.iter().enumerate() {
        if r.synthetic.is_some() == r.model.is_some() {
            bail!(
                "plan.toml: run {}: give exactly one of `synthetic` or `model`",
                i + 1
            );
        }
        if r.precisions.is_empty() {
            bail!("plan.toml: run {}: `precisions` is empty", i + 1);
        }
    }
    Ok(plan)
}

/// The plan's processes, breadth first: repeat 1 of every configuration, then repeat 2, … — so a
/// campaign cut short by its time budget still covers every configuration.
pub fn jobs(plan: &Plan, out: &Path) -> Vec<Job> {
    let d = &plan.defaults;
    let max_repeats = plan
        .runs
        .iter()
        .map(|r| r.repeats.unwrap_or(d.repeats))
        .max()
        .unwrap_or(0);
    let mut jobs = Vec::new();
    for rep in 1..=max_repeats {
        for (i, r) in plan.runs.iter().enumerate() {
            if rep > r.repeats.unwrap_or(d.repeats) {
                continue;
            }
            for &b in &r.batch {
                // A different seed per configuration and repeat, so arm orders differ across the
                // campaign (the first H200 session used the repeat number alone: one order per repeat).
                let seed = i as u64 * 1000 + rep as u64;
                jobs.push(job(d, r, b, rep, seed, out));
            }
        }
    }
    jobs
}

fn job(d: &Defaults, r: &RunSpec, b: usize, rep: usize, seed: u64, out: &Path) -> Job {
    let name = r.synthetic.clone().unwrap_or_else(|| {
        r.model
            .as_ref()
            .map(|m| m.display().to_string())
            .unwrap_or_default()
    });
    // Every report file is `<shape>_b<batch>_r<repeat>_<precision>.json`: a one-precision run
    // carries its precision in the stem, a several-precision run gets it appended per report.
    let mut stem = format!("{}_b{b}_r{rep}", crate::session::safe_name(&name));
    if let [p] = r.precisions.as_slice() {
        stem = format!("{stem}_{}", crate::run_report::report_precision(p));
    }
    let mut args = vec!["measure".to_string()];
    match (&r.synthetic, &r.model) {
        (Some(s), _) => args.extend(["--synthetic".into(), s.clone()]),
        (_, Some(m)) => args.extend(["--model".into(), m.display().to_string()]),
        _ => unreachable!("checked by parse_plan"),
    }
    args.extend([
        "--precision".into(),
        r.precisions.join(","),
        "--baseline".into(),
        r.baseline.clone().unwrap_or_else(|| d.baseline.clone()),
        "--batch".into(),
        b.to_string(),
        "--tokens".into(),
        r.tokens.unwrap_or(d.tokens).to_string(),
        "--iterations".into(),
        r.iterations.unwrap_or(d.iterations).to_string(),
        "--warmup".into(),
        d.warmup.to_string(),
        "--seed".into(),
        seed.to_string(),
        "--cooldown-max-s".into(),
        d.cooldown_max_s.to_string(),
        "--sample-hz".into(),
        d.sample_hz.to_string(),
        "--out".into(),
        out.display().to_string(),
        "--name".into(),
        stem.clone(),
    ]);
    let expected = r
        .precisions
        .iter()
        .map(|p| {
            if r.precisions.len() == 1 {
                out.join(format!("{stem}.json"))
            } else {
                out.join(format!(
                    "{stem}_{}.json",
                    crate::run_report::report_precision(p)
                ))
            }
        })
        .collect();
    Job {
        args,
        stem,
        expected,
    }
}

/// One row per report in `dir`, for spreadsheets and for the aggregation into anchors.
pub fn aggregate_csv(dir: &Path) -> Result<String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut out = String::from(
        "file,model,params_b,precision,batch,seed,basis,energy_mj_counter,energy_mj_trace,counter_over_trace,fp16_energy_mj,vs_fp16_pct,tok_s,avg_power_w,idle_power_w,achieved_hz,samples,failed_reads,window_s,cooldown_converged,arm_order\n",
    );
    for f in files {
        let text = std::fs::read_to_string(&f)?;
        let v: serde_json::Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(_) => continue,
        };
        let g = |path: &[&str]| -> String {
            let mut cur = &v;
            for k in path {
                match cur.get(*k) {
                    Some(x) => cur = x,
                    None => return String::new(),
                }
            }
            match cur {
                serde_json::Value::Null => String::new(),
                serde_json::Value::String(s) => s.replace(',', ";"),
                serde_json::Value::Array(a) => a
                    .iter()
                    .map(|x| x.as_str().unwrap_or_default().to_string())
                    .collect::<Vec<_>>()
                    .join(">"),
                other => other.to_string(),
            }
        };
        let per_token_trace = {
            let tj = v.pointer("/energy/trace_joules").and_then(|x| x.as_f64());
            let n = v
                .pointer("/results/tokens_generated")
                .and_then(|x| x.as_f64());
            match (tj, n) {
                (Some(t), Some(n)) if n > 0.0 => format!("{:.3}", t * 1000.0 / n),
                _ => String::new(),
            }
        };
        let row = [
            f.file_name().unwrap().to_string_lossy().into_owned(),
            g(&["workload", "model_name"]),
            g(&["workload", "params_b"]),
            g(&["workload", "precision"]),
            g(&["workload", "batch_size"]),
            g(&["protocol", "seed"]),
            g(&["results", "basis"]),
            g(&["results", "energy_per_token_mj"]),
            per_token_trace,
            g(&["energy", "counter_over_trace_ratio"]),
            g(&["results", "fp16_energy_per_token_mj"]),
            g(&["results", "vs_fp16_energy_pct"]),
            g(&["results", "throughput_tokens_per_s"]),
            g(&["results", "avg_power_watts"]),
            g(&["energy", "idle_power_watts"]),
            g(&["energy", "achieved_sample_rate_hz"]),
            g(&["energy", "samples"]),
            g(&["energy", "failed_reads"]),
            g(&["energy", "window_seconds"]),
            g(&["protocol", "cooldown", "converged"]),
            g(&["protocol", "arm_order"]),
        ];
        out.push_str(&row.join(","));
        out.push('\n');
    }
    Ok(out)
}

pub struct SweepOptions {
    /// Write reports here instead of the plan's `out`.
    pub out: Option<PathBuf>,
    pub limit: Option<usize>,
    pub time_budget_s: Option<f64>,
    pub dry_run: bool,
    /// Run only jobs whose stem contains one of these strings (e.g. `_r3`, `BF16`).
    pub only: Vec<String>,
}

pub fn run_sweep(plan_path: &Path, opts: &SweepOptions) -> Result<()> {
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
    crate::run_report::write_atomic(&out.join("aggregate.csv"), csv.as_bytes())?;
    println!("wrote {}", out.join("aggregate.csv").display());
    if !failures.is_empty() {
        bail!("{} job(s) failed: {}", failures.len(), failures.join(", "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = r#"
out = "raw"
[defaults]
repeats = 2
[[run]]
synthetic = "qwen2-0.5b"
precisions = ["Q8_0", "Q4_0"]
[[run]]
synthetic = "qwen2-1.5b"
precisions = ["Q4_K"]
batch = [1, 4]
repeats = 1
"#;

    #[test]
    fn plan_expands_into_one_process_per_repeat() {
        let plan = parse_plan(PLAN).unwrap();
        let js = jobs(&plan, Path::new("/o"));
        assert_eq!(js.len(), 2 + 2);
        // Breadth first: every configuration's first repeat before any second repeat.
        let stems: Vec<&str> = js.iter().map(|j| j.stem.as_str()).collect();
        assert_eq!(
            stems,
            [
                "qwen2-0.5b_b1_r1",
                "qwen2-1.5b_b1_r1_Q4_K",
                "qwen2-1.5b_b4_r1_Q4_K",
                "qwen2-0.5b_b1_r2"
            ]
        );
        assert_eq!(
            js[0].expected,
            vec![
                PathBuf::from("/o/qwen2-0.5b_b1_r1_Q8_0.json"),
                PathBuf::from("/o/qwen2-0.5b_b1_r1_Q4_0.json")
            ]
        );
        assert!(js[0]
            .args
            .windows(2)
            .any(|w| w == ["--precision", "Q8_0,Q4_0"]));
        assert!(js[3].args.windows(2).any(|w| w == ["--seed", "2"]));
        assert_eq!(
            js[2].expected,
            vec![PathBuf::from("/o/qwen2-1.5b_b4_r1_Q4_K.json")]
        );
    }

    #[test]
    fn bad_plans_say_what_is_wrong() {
        let e = parse_plan("out = \"x\"\n[[run]]\nprecisions = [\"Q4_0\"]\n").unwrap_err();
        assert!(format!("{e:#}").contains("exactly one of"));
        let e =
            parse_plan("out = \"x\"\n[[run]]\nsynthetic = \"a\"\nprecisions = []\n").unwrap_err();
        assert!(format!("{e:#}").contains("empty"));
        let e = parse_plan(
            "out = \"x\"\nbogus = 1\n[[run]]\nsynthetic = \"a\"\nprecisions = [\"F16\"]\n",
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("bogus"), "{e:#}");
    }
}

/// One aggregated configuration of a campaign, in `data/anchors.csv` form.
#[derive(Debug, Clone, PartialEq)]
pub struct AnchorRow {
    pub gpu: String,
    pub arch: String,
    pub model: String,
    pub params_b: f64,
    pub precision: String,
    pub batch: u64,
    pub energy_mj: f64,
    pub fp16_mj: f64,
    pub tok_s: f64,
    pub power_w: f64,
    pub n: usize,
    /// Distinct GPUs (by UUID) the runs were made on: run-to-run spread includes card-to-card.
    pub cards: usize,
    pub cv_pct: f64,
    /// Mean of the runs' power-trace energies (the counter is the primary figure).
    pub trace_mj: Option<f64>,
    pub counter_over_trace: Option<f64>,
}

impl AnchorRow {
    /// ΔE vs the mean FP16 arm of the same runs, in % (0 for the FP16 row itself).
    pub fn delta_pct(&self) -> f64 {
        (self.energy_mj - self.fp16_mj) / self.fp16_mj * 100.0
    }
}

/// Aggregate the measured reports of a directory: one row per (model, precision, batch) with the
/// mean over independent runs, n and CV; the FP16 baseline of each row is the mean of the F16 arms
/// of the same runs (each run counted once however many reports it wrote).
pub fn aggregate_anchors(dir: &Path) -> Result<Vec<AnchorRow>> {
    /// (model, precision, batch)
    type Key = (String, String, u64);
    /// One arm of one run.
    struct Arm {
        key: Key,
        run: String,
        card: String,
        energy: f64,
        tok_s: f64,
        power: f64,
        ratio: Option<f64>,
        trace: Option<f64>,
    }
    let mut arms: Vec<Arm> = Vec::new();
    let mut meta: Vec<(String, (String, String, f64))> = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    for f in files {
        let v = report::validate_str(&std::fs::read_to_string(&f)?);
        let Some(rep) = v.report.filter(|_| v.errors.is_empty()) else {
            continue;
        };
        let value = serde_json::to_value(&rep)?;
        let model = rep.workload.model_name.replace(" (synthetic weights)", "");
        let run_id = format!(
            "{}|{}|{}",
            model,
            rep.timestamp_utc.clone().unwrap_or_default(),
            value
                .pointer("/protocol/seed")
                .map(|s| s.to_string())
                .unwrap_or_default()
        );
        let card = value
            .pointer("/environment/gpu_uuid")
            .and_then(|u| u.as_str())
            .unwrap_or_default()
            .to_string();
        let batch = rep.workload.batch_size as u64;
        if !meta.iter().any(|(m, _)| *m == model) {
            meta.push((
                model.clone(),
                (
                    rep.system_under_test.gpu.clone(),
                    rep.system_under_test.gpu_arch.clone(),
                    rep.workload.params_b.unwrap_or(0.0),
                ),
            ));
        }
        for arm in value
            .pointer("/protocol/arms")
            .and_then(|a| a.as_array())
            .into_iter()
            .flatten()
        {
            if arm.get("status").and_then(|s| s.as_str()) != Some("ok") {
                continue;
            }
            let p = arm["precision"].as_str().unwrap_or_default().to_string();
            let key = (model.clone(), p, batch);
            if arms.iter().any(|a| a.key == key && a.run == run_id) {
                continue; // the same arm seen again through another report of the same run
            }
            let g = |k: &str| arm.get(k).and_then(|x| x.as_f64());
            if let (Some(energy), Some(tok_s), Some(power)) = (
                g("energy_per_token_mj"),
                g("throughput_tokens_per_s"),
                g("avg_power_watts"),
            ) {
                arms.push(Arm {
                    key,
                    run: run_id.clone(),
                    card: card.clone(),
                    energy,
                    tok_s,
                    power,
                    ratio: g("counter_over_trace_ratio"),
                    trace: g("trace_energy_per_token_mj"),
                });
            }
        }
    }
    let mut keys: Vec<Key> = Vec::new();
    for a in &arms {
        if !keys.contains(&a.key) {
            keys.push(a.key.clone());
        }
    }
    let mut rows = Vec::new();
    for key in keys {
        let these: Vec<&Arm> = arms.iter().filter(|a| a.key == key).collect();
        let runs: Vec<&String> = these.iter().map(|a| &a.run).collect();
        let fp16: Vec<f64> = arms
            .iter()
            .filter(|a| {
                a.key.0 == key.0 && a.key.1 == "FP16" && a.key.2 == key.2 && runs.contains(&&a.run)
            })
            .map(|a| a.energy)
            .collect();
        if fp16.is_empty() {
            continue;
        }
        let e: Vec<f64> = these.iter().map(|a| a.energy).collect();
        let mut cards: Vec<&str> = these.iter().map(|a| a.card.as_str()).collect();
        cards.sort_unstable();
        cards.dedup();
        // Both only when every run has one: a mean over some runs would not match the counter's.
        let all = |x: Vec<Option<f64>>| -> Option<f64> {
            x.iter()
                .copied()
                .collect::<Option<Vec<f64>>>()
                .filter(|v| !v.is_empty())
                .map(|v| mean(&v))
        };
        let (gpu, arch, params_b) = meta
            .iter()
            .find(|(m, _)| *m == key.0)
            .map(|(_, x)| x.clone())
            .unwrap_or_default();
        rows.push(AnchorRow {
            gpu,
            arch,
            model: key.0.clone(),
            params_b,
            precision: key.1.clone(),
            batch: key.2,
            energy_mj: mean(&e),
            fp16_mj: mean(&fp16),
            tok_s: mean(&these.iter().map(|a| a.tok_s).collect::<Vec<_>>()),
            power_w: mean(&these.iter().map(|a| a.power).collect::<Vec<_>>()),
            n: e.len(),
            cards: cards.len(),
            cv_pct: crate::protocol::cv_pct(&e).unwrap_or(f64::NAN),
            trace_mj: all(these.iter().map(|a| a.trace).collect()),
            counter_over_trace: all(these.iter().map(|a| a.ratio).collect()),
        });
    }
    Ok(rows)
}
