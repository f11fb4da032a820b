//! Sweep plans (`plan.toml`): many configurations, each repeat one process to start (a fresh CUDA
//! context and allocator per repeat, so repeats are independent); a job whose reports exist is
//! done, so a sweep resumes where it stopped.

use crate::error::{Error, Result};
use report::Precision;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// A sweep plan, as read from `plan.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// Output directory, relative to the plan file.
    pub out: PathBuf,
    /// The measurement session every report of the plan belongs to (`protocol.session`):
    /// `aggregate` never pools sessions. A plain label (letters, digits, `.`, `-`, `_`).
    #[serde(default)]
    pub session: Option<String>,
    /// Settings that apply to every run unless it overrides them.
    #[serde(default)]
    pub defaults: Defaults,
    /// The runs to make.
    #[serde(rename = "run")]
    pub runs: Vec<RunSpec>,
}

/// Plan-wide defaults for each run.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    /// Tokens generated per iteration.
    #[serde(default = "d_tokens")]
    pub tokens: usize,
    /// Timed iterations per arm.
    #[serde(default = "d_iterations")]
    pub iterations: usize,
    /// Untimed warm-up iterations per arm.
    #[serde(default = "d_warmup")]
    pub warmup: usize,
    /// The precision the others are compared against.
    #[serde(default = "d_baseline")]
    pub baseline: Precision,
    /// How many times each run is repeated.
    #[serde(default = "d_repeats")]
    pub repeats: usize,
    /// Longest cooldown wait between arms, s (finite, ≥ 0).
    #[serde(default = "d_cooldown", deserialize_with = "non_negative")]
    pub cooldown_max_s: f64,
    /// Power-trace sample rate, Hz (finite, > 0).
    #[serde(default = "d_hz", deserialize_with = "positive")]
    pub sample_hz: f64,
    /// Decode engine of every run. Plans default to `eager`, the engine of the first H200
    /// campaign: runs are only appended to a plan, and one plan's rows must stay one stack.
    #[serde(default = "d_engine")]
    pub engine: meter::decoder::EngineKind,
    /// The card the plan is for (e.g. "H200"): a job that lands where NVML sees no GPU writes
    /// the labelled dataset estimate for this card (else a report with no figure).
    #[serde(default)]
    pub card: Option<String>,
}

// TOML spells `nan` and `inf`, which every job would pass on as `--sample-hz NaN` (the
// `sweep_plan` fuzz target asserts that an accepted plan's rate and cooldown are usable).
// Refused here, the error names the line and column.
fn positive<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    let x = f64::deserialize(d)?;
    if x.is_finite() && x > 0.0 {
        Ok(x)
    } else {
        Err(serde::de::Error::custom(format!(
            "expected a finite number > 0, found {x}"
        )))
    }
}

fn non_negative<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    let x = f64::deserialize(d)?;
    if x.is_finite() && x >= 0.0 {
        Ok(x)
    } else {
        Err(serde::de::Error::custom(format!(
            "expected a finite number ≥ 0, found {x}"
        )))
    }
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
fn d_baseline() -> Precision {
    Precision::Fp16
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
fn d_engine() -> meter::decoder::EngineKind {
    meter::decoder::EngineKind::Eager
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
            engine: d_engine(),
            card: None,
        }
    }
}

/// One run of the plan: a model and the precisions and batch sizes to measure.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// A synthetic architecture name (instead of `model`).
    pub synthetic: Option<String>,
    /// Path to real model weights (instead of `synthetic`).
    pub model: Option<PathBuf>,
    /// Precisions to measure, one arm each.
    pub precisions: Vec<Precision>,
    /// Batch sizes to measure, one job each.
    #[serde(default = "one_batch")]
    pub batch: Vec<usize>,
    /// Repeats for this run (overrides the default).
    pub repeats: Option<usize>,
    /// Tokens per iteration (overrides the default).
    pub tokens: Option<usize>,
    /// Timed iterations per arm (overrides the default).
    pub iterations: Option<usize>,
    /// Baseline precision (overrides the default).
    pub baseline: Option<Precision>,
    /// Measure an inference server the meter starts itself instead of the candle engine (the
    /// server path's `--server-cmd`; the meter fills `{model}` and `{port}` per arm), e.g.
    /// `"llama-server -m {model} --port {port} -ngl 999 -np {concurrency}"`. `batch` is then the number of
    /// concurrent streams (the plan fills `{concurrency}` in the command with it), and every arm —
    /// the baseline's too — is one model file and one report.
    pub server_cmd: Option<String>,
    /// With `server_cmd`: each arm's model file, `{name}` (the run's `synthetic`) and
    /// `{precision}` (its GGUF type name: `F16`, `Q8_0`, `Q4_K` …) filled in; a relative path is
    /// relative to the plan's directory (see [`Plan::resolve_paths`]).
    pub model_files: Option<String>,
    /// With `server_cmd`: the API to drive (`completions`, `chat` or `llama`; the meter's default
    /// when absent).
    pub api: Option<String>,
    /// Context runs (graph engine): tokens already in the KV cache when the timed decode starts,
    /// one job per depth (`measure --context`; prefill and decode measured apart). Absent: each
    /// timed iteration is a whole generation after a 16-token prompt.
    pub context: Option<Vec<usize>>,
}

impl RunSpec {
    /// Whether the run measures a server (`server_cmd`) rather than the candle engine.
    pub fn is_server(&self) -> bool {
        self.server_cmd.is_some()
    }

    /// The run's name: its synthetic shape, else its model path.
    fn name(&self) -> String {
        self.synthetic.clone().unwrap_or_else(|| {
            self.model
                .as_ref()
                .map(|m| m.display().to_string())
                .unwrap_or_default()
        })
    }

    /// Every arm a job of this run measures: the baseline first, then the other precisions.
    fn arms(&self, d: &Defaults) -> Vec<Precision> {
        let mut arms = vec![self.baseline.unwrap_or(d.baseline)];
        for p in &self.precisions {
            if !arms.contains(p) {
                arms.push(*p);
            }
        }
        arms
    }
}

fn one_batch() -> Vec<usize> {
    vec![1]
}

/// One process to start.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// What its process measures (the CLI turns it into that process's arguments).
    pub measure: MeasureJob,
    /// The file stem of its reports.
    pub stem: String,
    /// Report files the job writes when it measures; see [`Job::state`] for the others.
    pub expected: Vec<PathBuf>,
    /// What it measures, for the failed report when the process leaves none.
    pub what: JobWhat,
}

/// What one `quantenergy measure` process of a sweep measures, typed: the CLI alone turns it into
/// that process's arguments (and back, in its round-trip test).
#[derive(Debug, Clone, PartialEq)]
pub struct MeasureJob {
    /// What decodes: our engine on a model, or a server.
    pub target: JobTarget,
    /// Sequences per iteration (`--batch`), or concurrent streams on the server path
    /// (`--concurrency`).
    pub batch: usize,
    /// Tokens generated per iteration.
    pub tokens: usize,
    /// Timed iterations per arm.
    pub iterations: usize,
    /// Untimed warm-up iterations per arm.
    pub warmup: usize,
    /// Seed of the prompt and of synthetic weights.
    pub seed: u64,
    /// Longest cooldown wait between arms, s.
    pub cooldown_max_s: f64,
    /// Power-trace sample rate, Hz.
    pub sample_hz: f64,
    /// Where the reports go.
    pub out: PathBuf,
    /// The reports' file stem.
    pub name: String,
    /// The card the plan is for (the no-GPU estimate's card).
    pub card: Option<String>,
    /// The configuration's arm-order design (its counterbalancing seed).
    pub order_seed: u64,
    /// The repeat: the design's row.
    pub order_repeat: usize,
    /// The plan's measurement session.
    pub session: Option<String>,
    /// A context run's depth (`--context`).
    pub context: Option<usize>,
}

/// What a job's process decodes.
#[derive(Debug, Clone, PartialEq)]
pub enum JobTarget {
    /// quantenergy's own engine.
    Engine {
        /// A synthetic shape's name, or a model's path.
        model: JobModel,
        /// One arm each.
        precisions: Vec<Precision>,
        /// The precision the others are compared against.
        baseline: Precision,
        /// Which of our engines.
        engine: meter::decoder::EngineKind,
    },
    /// A server started per arm by `command` (`{model}` and `{port}` filled per arm).
    Server {
        /// The server's command template.
        command: String,
        /// The HTTP API driven, where the plan names one.
        api: Option<meter::served::Api>,
        /// One model file per arm, the baseline first.
        model_files: Vec<(Precision, PathBuf)>,
    },
}

/// The model of an engine job.
#[derive(Debug, Clone, PartialEq)]
pub enum JobModel {
    /// Seeded random weights at a known shape.
    Synthetic(String),
    /// Real weights: a Hugging Face directory or a GGUF file.
    Path(PathBuf),
}

/// What a job measures.
#[derive(Debug, Clone, PartialEq)]
pub struct JobWhat {
    /// The model as the plan names it (a synthetic shape or a path).
    pub model: String,
    /// Its size, billions of parameters, where the plan's shape says it.
    pub params_b: Option<f64>,
    /// One report per precision, in the order of `expected`.
    pub precisions: Vec<Precision>,
    /// Batch size.
    pub batch: usize,
    /// Prompt + generated tokens.
    pub context: usize,
    /// The plan's session.
    pub session: Option<String>,
}

/// Where a job stands, from the files in its output directory.
#[derive(Debug, Clone, PartialEq)]
pub enum JobState {
    /// Some report is missing: the job runs (again).
    Pending,
    /// Every report was measured.
    Measured,
    /// Every report is there, some only as the labelled no-GPU estimate.
    Estimated,
    /// The process failed and left failed reports; the first one's reason.
    Failed(String),
}

/// `x.json` → `x<kind>.json` (`.estimate`, `.failed`).
pub fn with_kind(path: &Path, kind: &str) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.strip_suffix(".json").unwrap_or(&name);
    path.with_file_name(format!("{stem}{kind}.json"))
}

/// A report file the meter wrote: a regular file itself. A link planted where a report goes
/// is not one (the job runs, and its report replaces the link instead of writing through it).
fn is_report_file(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_file())
}

/// Whether the job's process wrote this expected report: measured, or as the no-GPU estimate.
pub fn is_written(report: &Path) -> bool {
    is_report_file(report) || is_report_file(&with_kind(report, ".estimate"))
}

impl Job {
    /// How many of its reports the job's process has not written.
    pub fn unwritten(&self) -> usize {
        self.expected.iter().filter(|p| !is_written(p)).count()
    }

    /// Where the job stands: every expected report measured, estimated (no GPU where it ran) or
    /// failed, or pending. A failed report counts as an outcome (the job is not re-run unless
    /// asked), an interrupted job left nothing and is pending.
    pub fn state(&self) -> JobState {
        let mut estimated = false;
        let mut failed = None;
        for p in &self.expected {
            if is_report_file(p) {
                continue;
            }
            if is_report_file(&with_kind(p, ".estimate")) {
                estimated = true;
                continue;
            }
            let f = with_kind(p, ".failed");
            if is_report_file(&f) {
                failed.get_or_insert_with(|| failed_reason(&f));
                continue;
            }
            return JobState::Pending;
        }
        match (failed, estimated) {
            (Some(why), _) => JobState::Failed(why),
            (None, true) => JobState::Estimated,
            (None, false) => JobState::Measured,
        }
    }

    /// The failed report of each expected report the process did not write: basis
    /// `unavailable`, its one arm failed with `reason` — a record, never a figure.
    pub fn failed_reports(&self, reason: &str) -> Vec<(PathBuf, report::Report)> {
        let w = &self.what;
        self.expected
            .iter()
            .zip(&w.precisions)
            .filter(|(p, _)| !is_written(p))
            .map(|(p, &precision)| {
                let mut rep = meter::fallback::unmeasured_report(
                    "not measured: the job failed",
                    &w.model,
                    w.params_b,
                    precision,
                    (w.batch, w.context),
                );
                rep.benchmark = "quantenergy-decode-energy".into();
                rep.measurement.method =
                    "none: the sweep job failed before it wrote a report".into();
                rep.results.note = Some(format!("Job {} failed: {reason}", self.stem));
                rep.protocol = Some(report::Protocol {
                    session: w.session.clone(),
                    arms: Some(vec![report::Arm::failed(precision.as_str(), reason)]),
                    ..Default::default()
                });
                (with_kind(p, ".failed"), rep)
            })
            .collect()
    }
}

/// The reason a failed report gives (its first arm's error), or what is wrong with the file.
fn failed_reason(path: &Path) -> String {
    let text = match meter::files::read_text_limited(path, meter::files::TEXT_INPUT_LIMIT) {
        Ok(t) => t,
        Err(e) => return meter::causes::chain(&e),
    };
    let v = report::validate_str(&text);
    v.report
        .and_then(|r| r.protocol?.arms?.into_iter().next()?.error)
        .unwrap_or_else(|| format!("{}: not a failed report of ours", path.display()))
}

/// A session label: letters, digits, `.`, `-` and `_`, not empty (it names files and rows).
pub fn is_session_label(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// Parse and check a plan: every run names exactly one model and at least one precision.
pub fn parse_plan(text: &str) -> Result<Plan> {
    let plan: Plan = toml::from_str(text).map_err(Error::PlanToml)?;
    if let Some(s) = plan.session.as_ref().filter(|s| !is_session_label(s)) {
        return Err(Error::PlanSession(s.clone()));
    }
    if let Some(c) = &plan.defaults.card {
        // A card that starts with `-` would reach the job's command line as a flag.
        if c.trim().is_empty()
            || c.trim_start().starts_with('-')
            || c.chars().all(|c| c.is_ascii_digit() || c == ',')
            || c.chars().any(char::is_control)
        {
            return Err(Error::PlanCard(c.clone()));
        }
    }
    for (i, r) in plan.runs.iter().enumerate() {
        if r.synthetic.is_some() == r.model.is_some() {
            return Err(Error::PlanModel { run: i + 1 });
        }
        if r.precisions.is_empty() {
            return Err(Error::PlanPrecisions { run: i + 1 });
        }
        check_server_run(r).map_err(|why| Error::PlanServer { run: i + 1, why })?;
        check_context(r, &plan.defaults).map_err(|why| Error::PlanServer { run: i + 1, why })?;
    }
    check_counts(&plan)?;
    if plan.out.is_absolute()
        || plan.out.components().any(|c| {
            !matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        })
    {
        return Err(Error::PlanOut(plan.out.clone()));
    }
    Ok(plan)
}

/// The most repeats of one run: each is a process that measures every arm (minutes on a GPU).
pub const MAX_REPEATS: usize = 1_000;
/// The most batch sizes one run may list.
pub const MAX_BATCH_SIZES: usize = 64;
/// The most jobs a plan may expand to.
pub const MAX_JOBS: u64 = 100_000;

/// Every count a job is built from is ≥ 1 (a warm-up of 0 is fine), so that no accepted plan
/// starts a process that measures nothing or fails only once the sweep is under way; and the
/// plan's size is bounded before anything is expanded.
fn check_counts(plan: &Plan) -> Result<()> {
    check_nonzero(plan)?;
    let too_big = |where_: String, field, value: u64, max: u64, why| Error::PlanTooBig {
        where_,
        field,
        value,
        max,
        why,
    };
    let d = &plan.defaults;
    if d.repeats > MAX_REPEATS {
        return Err(too_big(
            "defaults".into(),
            "repeats",
            d.repeats as u64,
            MAX_REPEATS as u64,
            "each repeat is a process that measures every arm",
        ));
    }
    let mut jobs: u64 = 0;
    for (i, r) in plan.runs.iter().enumerate() {
        let run = format!("run {}", i + 1);
        let repeats = r.repeats.unwrap_or(d.repeats);
        if repeats > MAX_REPEATS {
            return Err(too_big(
                run,
                "repeats",
                repeats as u64,
                MAX_REPEATS as u64,
                "each repeat is a process that measures every arm",
            ));
        }
        if r.batch.len() > MAX_BATCH_SIZES {
            return Err(too_big(
                run,
                "batch",
                r.batch.len() as u64,
                MAX_BATCH_SIZES as u64,
                "list the batch sizes to measure, not a range of every size",
            ));
        }
        let depths = r.context.as_ref().map_or(1, |c| c.len().max(1));
        let run_jobs = (r.batch.len() as u64)
            .saturating_mul(depths as u64)
            .saturating_mul(repeats as u64);
        jobs = jobs.saturating_add(run_jobs);
    }
    if jobs > MAX_JOBS {
        return Err(too_big(
            "the plan".into(),
            "jobs",
            jobs,
            MAX_JOBS,
            "split it into plans a sweep can finish",
        ));
    }
    Ok(())
}

fn check_nonzero(plan: &Plan) -> Result<()> {
    let zero = |where_: &str, field| Error::PlanCount {
        where_: where_.to_string(),
        field,
        why: "must be at least 1",
    };
    let d = &plan.defaults;
    for (field, v) in [
        ("tokens", d.tokens),
        ("iterations", d.iterations),
        ("repeats", d.repeats),
    ] {
        if v == 0 {
            return Err(zero("defaults", field));
        }
    }
    for (i, r) in plan.runs.iter().enumerate() {
        let run = format!("run {}", i + 1);
        for (field, v) in [
            ("tokens", r.tokens),
            ("iterations", r.iterations),
            ("repeats", r.repeats),
        ] {
            if v == Some(0) {
                return Err(zero(&run, field));
            }
        }
        if r.batch.is_empty() {
            return Err(Error::PlanCount {
                where_: run,
                field: "batch",
                why: "is empty: list at least one batch size",
            });
        }
        if r.batch.contains(&0) {
            return Err(zero(&run, "batch"));
        }
    }
    Ok(())
}

/// A context run is an engine run on the graph engine with depths of at least 1.
fn check_context(r: &RunSpec, d: &Defaults) -> std::result::Result<(), String> {
    let Some(c) = &r.context else { return Ok(()) };
    if r.is_server() {
        return Err("`context` measures our engine's prefill and decode apart; a server run times whole requests".into());
    }
    if d.engine != meter::decoder::EngineKind::Graph {
        return Err("`context` needs `engine = \"graph\"` in [defaults]".into());
    }
    if c.is_empty() || c.iter().any(|&x| x == 0 || x > 1 << 20) {
        return Err(format!("context {c:?}: list depths from 1 to 1048576"));
    }
    Ok(())
}

/// A server run names its model files by a template that says which precision is which, and a
/// server command that serves `{model}`; the server keys belong to server runs only.
fn check_server_run(r: &RunSpec) -> std::result::Result<(), String> {
    let Some(cmd) = &r.server_cmd else {
        return match (&r.model_files, &r.api) {
            (None, None) => Ok(()),
            _ => Err("`model_files` and `api` need `server_cmd`".into()),
        };
    };
    if !cmd.contains("{model}") {
        return Err(format!(
            "server_cmd {cmd:?} has no {{model}}: every arm would serve the same model"
        ));
    }
    if r.model.is_some() {
        return Err("a server run names its shape with `synthetic` and its files with `model_files`, not `model`".into());
    }
    match &r.model_files {
        Some(t) if t.contains("{precision}") => {}
        Some(t) => {
            return Err(format!(
                "model_files {t:?} has no {{precision}}: one file per arm"
            ))
        }
        None => {
            return Err(
                "`server_cmd` needs `model_files` (e.g. \"gguf/{name}-{precision}.gguf\")".into(),
            )
        }
    }
    if let Some(a) = &r.api {
        a.parse::<meter::served::Api>()?;
    }
    Ok(())
}

/// A precision as GGUF files and llama.cpp name their tensor type (`F16`, not `FP16`).
pub fn gguf_type_name(p: Precision) -> &'static str {
    match p {
        Precision::Fp16 => "F16",
        Precision::Fp32 => "F32",
        other => other.as_str(),
    }
}

impl Plan {
    /// Make every run's relative `model_files` template relative to `dir` (the plan's directory),
    /// so a plan runs the same from any working directory.
    pub fn resolve_paths(&mut self, dir: &Path) {
        for r in &mut self.runs {
            if let Some(t) = r
                .model_files
                .as_mut()
                .filter(|t| Path::new(t.as_str()).is_relative())
            {
                *t = dir.join(&*t).display().to_string();
            }
        }
    }
}

/// One line per run whose repeats are not a whole number of arm-order cycles
/// ([`meter::protocol::ArmOrder::Balanced`]): its order is then only partly counterbalanced. A
/// sweep prints them, so that a plan cut to 3 repeats of 4 arms says so before it runs.
pub fn order_balance_notes(plan: &Plan) -> Vec<String> {
    let d = &plan.defaults;
    plan.runs
        .iter()
        .filter_map(|r| {
            let arms = r.arms(d).len();
            let cycle = meter::protocol::ArmOrder::cycle(arms);
            let repeats = r.repeats.unwrap_or(d.repeats);
            (arms > 1 && repeats % cycle != 0).then(|| {
                format!(
                    "{}: {arms} arms over {repeats} repeats; their order is balanced (every arm \
                     equally often in every position and after every other) over whole cycles of \
                     {cycle} repeats, so only partly here",
                    r.name()
                )
            })
        })
        .collect()
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
                // A different seed per configuration and repeat, not the repeat number alone
                // (prompt and weights draw on it). The arm order is counterbalanced instead of
                // drawn per run: row `rep` of the configuration's Williams design.
                let seed = i as u64 * 1000 + rep as u64;
                let depths: Vec<Option<usize>> = match &r.context {
                    Some(c) => c.iter().copied().map(Some).collect(),
                    None => vec![None],
                };
                for depth in depths {
                    let mut j = match &r.server_cmd {
                        Some(cmd) => server_job(d, r, cmd, (b, rep, seed), out),
                        None => job(d, r, (b, depth), rep, seed, out),
                    };
                    j.measure.order_seed = i as u64 * 1000;
                    j.measure.order_repeat = rep;
                    if let Some(s) = &plan.session {
                        j.measure.session = Some(s.clone());
                        j.what.session = Some(s.clone());
                    }
                    jobs.push(j);
                }
            }
        }
    }
    jobs
}

fn job(
    d: &Defaults,
    r: &RunSpec,
    (b, depth): (usize, Option<usize>),
    rep: usize,
    seed: u64,
    out: &Path,
) -> Job {
    let name = r.name();
    // Every report file is `<shape>_b<batch>[_c<depth>]_r<repeat>_<precision>.json`: a
    // one-precision run carries its precision in the stem, a several-precision run gets it
    // appended per report.
    let c = depth.map(|d| format!("_c{d}")).unwrap_or_default();
    let mut stem = format!("{}_b{b}{c}_r{rep}", meter::files::safe_name(&name));
    if let [p] = r.precisions.as_slice() {
        stem = format!("{stem}_{}", p.as_str());
    }
    let model = match (&r.synthetic, &r.model) {
        (Some(s), _) => JobModel::Synthetic(s.clone()),
        (_, Some(m)) => JobModel::Path(m.clone()),
        _ => unreachable!("checked by parse_plan"),
    };
    let target = JobTarget::Engine {
        model,
        precisions: r.precisions.clone(),
        baseline: r.baseline.unwrap_or(d.baseline),
        engine: d.engine,
    };
    let mut measure = measure_job(d, r, target, (b, seed), out, &stem);
    measure.context = depth;
    let expected = expected_reports(out, &stem, &r.precisions);
    let what = JobWhat {
        params_b: r.synthetic.as_deref().and_then(shape_params_b),
        model: name,
        precisions: r.precisions.clone(),
        batch: b,
        context: r.tokens.unwrap_or(d.tokens) + depth.unwrap_or(16),
        session: None,
    };
    Job {
        measure,
        stem,
        expected,
        what,
    }
}

/// The job of one process: its target and the plan's protocol settings, where its reports go and,
/// where the plan names one, the card. The arm order is set by [`jobs`].
fn measure_job(
    d: &Defaults,
    r: &RunSpec,
    target: JobTarget,
    (batch, seed): (usize, u64),
    out: &Path,
    stem: &str,
) -> MeasureJob {
    MeasureJob {
        target,
        batch,
        tokens: r.tokens.unwrap_or(d.tokens),
        iterations: r.iterations.unwrap_or(d.iterations),
        warmup: d.warmup,
        seed,
        cooldown_max_s: d.cooldown_max_s,
        sample_hz: d.sample_hz,
        out: out.to_path_buf(),
        name: stem.into(),
        card: d.card.clone(),
        order_seed: 0,
        order_repeat: 1,
        session: None,
        context: None,
    }
}

/// One report per precision: `<stem>.json` for one, `<stem>_<PRECISION>.json` for several.
fn expected_reports(out: &Path, stem: &str, precisions: &[Precision]) -> Vec<PathBuf> {
    precisions
        .iter()
        .map(|p| match precisions.len() {
            1 => out.join(format!("{stem}.json")),
            _ => out.join(format!("{stem}_{}.json", p.as_str())),
        })
        .collect()
}

/// A synthetic shape's size, billions of parameters to four decimals (as reports carry it).
fn shape_params_b(name: &str) -> Option<f64> {
    analysis::find_shape(name).map(|s| (s.param_count() as f64 / 1e5).round() / 1e4)
}

/// A server run's process: `measure --server-cmd` with one `--model-file` per arm (the baseline
/// first), `b` concurrent streams, a report per arm (`<stem>_<PRECISION>.json`).
fn server_job(
    d: &Defaults,
    r: &RunSpec,
    cmd: &str,
    (b, rep, seed): (usize, usize, u64),
    out: &Path,
) -> Job {
    let name = r.synthetic.clone().unwrap_or_default();
    let stem = format!("{}_server_b{b}_r{rep}", meter::files::safe_name(&name));
    let arms = r.arms(d);
    let template = r.model_files.as_deref().unwrap_or_default();
    // `{concurrency}` is the plan's to fill (llama-server's `-np` slots); `{model}` and `{port}`
    // are the meter's, per arm.
    let cmd = cmd.replace("{concurrency}", &b.to_string());
    let model_files = arms
        .iter()
        .map(|p| {
            let file = template
                .replace("{name}", &name)
                .replace("{precision}", gguf_type_name(*p));
            (*p, PathBuf::from(file))
        })
        .collect();
    let api = r
        .api
        .as_deref()
        .map(|a| a.parse().expect("checked by parse_plan"));
    let target = JobTarget::Server {
        command: cmd,
        api,
        model_files,
    };
    let measure = measure_job(d, r, target, (b, seed), out, &stem);
    let expected = expected_reports(out, &stem, &arms);
    let what = JobWhat {
        params_b: shape_params_b(&name),
        model: name,
        precisions: arms,
        batch: b,
        context: r.tokens.unwrap_or(d.tokens) + 16,
        session: None,
    };
    Job {
        measure,
        stem,
        expected,
        what,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Precision {
        s.parse().unwrap()
    }

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
    fn a_plan_can_ask_for_the_graph_engine() {
        let d: Defaults = toml::from_str("engine = \"graph\"").unwrap();
        assert_eq!(d.engine, meter::decoder::EngineKind::Graph);
        assert_eq!(
            Defaults::default().engine,
            meter::decoder::EngineKind::Eager
        );
        assert!(toml::from_str::<Defaults>("engine = \"turbo\"").is_err());
    }

    /// TOML's `nan` / `inf` and non-positive rates are refused with the line they are on, not
    /// passed on to every job (a fuzz finding).
    #[test]
    fn a_plan_refuses_unusable_rates_and_cooldowns() {
        for bad in [
            "sample_hz = nan",
            "sample_hz = inf",
            "sample_hz = 0",
            "sample_hz = -50",
            "cooldown_max_s = -inf",
            "cooldown_max_s = nan",
            "cooldown_max_s = -1",
        ] {
            let text = PLAN.replace("[defaults]\n", &format!("[defaults]\n{bad}\n"));
            let err = parse_plan(&text).unwrap_err();
            let msg = meter::causes::chain(&err);
            assert!(msg.contains("expected a finite number"), "{bad}: {msg}");
            assert!(msg.contains("line 4"), "{bad}: {msg}");
        }
        let ok = PLAN.replace(
            "[defaults]\n",
            "[defaults]\ncooldown_max_s = 0\nsample_hz = 10\n",
        );
        let d = parse_plan(&ok).unwrap().defaults;
        assert_eq!((d.cooldown_max_s, d.sample_hz), (0.0, 10.0));
    }

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
        let JobTarget::Engine {
            precisions, engine, ..
        } = &js[0].measure.target
        else {
            panic!("{:?}", js[0].measure)
        };
        assert_eq!(precisions, &[p("Q8_0"), p("Q4_0")]);
        assert_eq!(js[3].measure.seed, 2);
        // The arm order is the configuration's design (order seed 0 for the first run spec), its
        // row the repeat.
        assert_eq!(js[0].measure.order_seed, 0);
        assert_eq!(js[3].measure.order_repeat, 2);
        assert_eq!(js[2].measure.order_seed, 1000);
        // A plan without `engine` keeps the campaign's eager engine.
        assert_eq!(*engine, meter::decoder::EngineKind::Eager);
        assert_eq!(
            js[2].expected,
            vec![PathBuf::from("/o/qwen2-1.5b_b4_r1_Q4_K.json")]
        );
    }

    const SERVER_PLAN: &str = r#"
out = "raw"
session = "h200-llama"
[defaults]
repeats = 2
[[run]]
synthetic = "qwen2-7b"
precisions = ["Q8_0", "Q4_K"]
batch = [1, 8]
server_cmd = "llama-server -m {model} --port {port} -ngl 999 -c 16384 -np {concurrency}"
model_files = "gguf/{name}-{precision}.gguf"
api = "llama"
"#;

    /// The llama-server plan's shape: 4 arms (3 formats and F16) over 3 repeats is a partial
    /// cycle and says so; 2 arms over 2 repeats is a whole one.
    #[test]
    fn plans_say_where_the_arm_order_is_only_partly_balanced() {
        let three = SERVER_PLAN
            .replace("repeats = 2", "repeats = 3")
            .replace(r#"["Q8_0", "Q4_K"]"#, r#"["F16", "Q8_0", "Q4_K", "Q4_0"]"#);
        let notes = order_balance_notes(&parse_plan(&three).unwrap());
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with("qwen2-7b: 4 arms over 3 repeats"),
            "{notes:?}"
        );
        assert!(notes[0].contains("cycles of 4 repeats"), "{notes:?}");
        let two = SERVER_PLAN.replace(r#"["Q8_0", "Q4_K"]"#, r#"["F16", "Q4_K"]"#);
        assert!(order_balance_notes(&parse_plan(&two).unwrap()).is_empty());
    }

    #[test]
    fn a_server_run_is_one_measure_server_cmd_per_concurrency_and_repeat() {
        let mut plan = parse_plan(SERVER_PLAN).unwrap();
        plan.resolve_paths(Path::new("/plans/h200"));
        let js = jobs(&plan, Path::new("/o"));
        let stems: Vec<&str> = js.iter().map(|j| j.stem.as_str()).collect();
        assert_eq!(
            stems,
            [
                "qwen2-7b_server_b1_r1",
                "qwen2-7b_server_b8_r1",
                "qwen2-7b_server_b1_r2",
                "qwen2-7b_server_b8_r2"
            ]
        );
        let j = &js[1];
        let JobTarget::Server {
            command,
            api,
            model_files,
        } = &j.measure.target
        else {
            panic!("{:?}", j.measure)
        };
        assert_eq!(
            command,
            "llama-server -m {model} --port {port} -ngl 999 -c 16384 -np 8"
        );
        assert_eq!(*api, Some(meter::served::Api::Llama));
        assert_eq!(j.measure.batch, 8);
        assert_eq!(j.measure.session.as_deref(), Some("h200-llama"));
        // The baseline is an arm like any other: its own file, first, and its own report.
        let files: Vec<(Precision, &Path)> =
            model_files.iter().map(|(p, f)| (*p, f.as_path())).collect();
        assert_eq!(
            files,
            [
                (p("F16"), Path::new("/plans/h200/gguf/qwen2-7b-F16.gguf")),
                (p("Q8_0"), Path::new("/plans/h200/gguf/qwen2-7b-Q8_0.gguf")),
                (p("Q4_K"), Path::new("/plans/h200/gguf/qwen2-7b-Q4_K.gguf"))
            ]
        );
        assert_eq!(
            j.expected,
            ["FP16", "Q8_0", "Q4_K"]
                .map(|p| PathBuf::from(format!("/o/qwen2-7b_server_b8_r1_{p}.json")))
        );
        assert_eq!(j.what.precisions.len(), 3);
        assert_eq!((j.what.batch, j.what.params_b), (8, Some(7.6156)));
        // Every arm the process did not write gets its failed report.
        assert_eq!(j.failed_reports("server died").len(), 3);
    }

    #[test]
    fn a_server_run_that_cannot_run_is_refused_with_its_reason() {
        let cases = [
            (
                "model_files = \"gguf/{name}-{precision}.gguf\"\n",
                "",
                "needs `model_files`",
            ),
            (
                "gguf/{name}-{precision}.gguf",
                "gguf/{name}.gguf",
                "no {precision}",
            ),
            ("-m {model}", "-m x.gguf", "no {model}"),
            ("api = \"llama\"", "api = \"grpc\"", "unknown API"),
        ];
        for (from, to, want) in cases {
            let e = parse_plan(&SERVER_PLAN.replace(from, to)).unwrap_err();
            assert!(matches!(e, Error::PlanServer { run: 1, .. }), "{to}: {e}");
            assert!(e.to_string().contains(want), "{to}: {e}");
        }
        let candle_with_files = PLAN.replace(
            "precisions = [\"Q4_K\"]",
            "precisions = [\"Q4_K\"]\nmodel_files = \"x-{precision}.gguf\"",
        );
        let e = parse_plan(&candle_with_files).unwrap_err();
        assert_eq!(
            e.to_string(),
            "run 2: `model_files` and `api` need `server_cmd`"
        );
        // An absolute template stays as written.
        let mut plan = parse_plan(&SERVER_PLAN.replace("\"gguf/", "\"/data/gguf/")).unwrap();
        plan.resolve_paths(Path::new("/plans"));
        assert_eq!(
            plan.runs[0].model_files.as_deref(),
            Some("/data/gguf/{name}-{precision}.gguf")
        );
    }

    #[test]
    fn bad_plans_say_what_is_wrong() {
        use meter::causes::chain;
        let e = parse_plan("out = \"x\"\n[[run]]\nprecisions = [\"Q4_0\"]\n").unwrap_err();
        assert!(chain(&e).contains("exactly one of"));
        assert_eq!(
            e.to_string(),
            "run 1: give exactly one of `synthetic` or `model`"
        );
        let e =
            parse_plan("out = \"x\"\n[[run]]\nsynthetic = \"a\"\nprecisions = []\n").unwrap_err();
        assert!(chain(&e).contains("empty"));
        let e = parse_plan(
            "out = \"x\"\nbogus = 1\n[[run]]\nsynthetic = \"a\"\nprecisions = [\"F16\"]\n",
        )
        .unwrap_err();
        let text = chain(&e);
        assert!(text.starts_with("") && text.contains("bogus"), "{text}");
    }

    #[test]
    fn a_context_plan_makes_one_graph_job_per_depth_named_by_it() {
        let text = "out = \"raw\"\n[defaults]\nengine = \"graph\"\nrepeats = 1\n[[run]]\nsynthetic = \"qwen2-1.5b\"\nprecisions = [\"Q4_0\"]\ncontext = [1024, 4096]\n";
        let plan = parse_plan(text).unwrap();
        let js = jobs(&plan, Path::new("/o"));
        let got: Vec<(Option<usize>, &str)> = js
            .iter()
            .map(|j| (j.measure.context, j.stem.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (Some(1024), "qwen2-1.5b_b1_c1024_r1_Q4_0"),
                (Some(4096), "qwen2-1.5b_b1_c4096_r1_Q4_0")
            ]
        );
        assert_eq!(js[1].measure.name, js[1].stem);
        assert_eq!(js[1].what.context, 4096 + 256);
        // The eager engine, a server run, or a depth of 0 cannot.
        for bad in [
            text.replace("engine = \"graph\"\n", ""),
            text.replace("[1024, 4096]", "[0]"),
            text.replace("[1024, 4096]", "[]"),
        ] {
            assert!(parse_plan(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_plan_cannot_write_outside_its_folder() {
        for out in ["/tmp/x", "../x", "raw/../../x"] {
            let text =
                format!("out = {out:?}\n[[run]]\nsynthetic = \"a\"\nprecisions = [\"F16\"]\n");
            let e = parse_plan(&text).unwrap_err();
            assert!(
                e.to_string().contains("inside the plan's folder"),
                "{out}: {e}"
            );
        }
        let ok = "out = \"./raw/h200\"\n[[run]]\nsynthetic = \"a\"\nprecisions = [\"F16\"]\n";
        assert!(parse_plan(ok).is_ok());
    }

    /// A plan's size is bounded before it is expanded: 10¹² repeats, 200 batch sizes or a plan of
    /// more than 100 000 jobs are refused at once, naming the key and the bound.
    #[test]
    fn oversized_plans_are_refused_before_they_are_expanded() {
        let run = |extra: &str| {
            format!("out = \"x\"\n[[run]]\nsynthetic = \"a\"\nprecisions = [\"F16\"]\n{extra}")
        };
        let batches: Vec<String> = (1..=200).map(|b| b.to_string()).collect();
        let many_runs: String = (0..200)
            .map(|_| "[[run]]\nsynthetic = \"a\"\nprecisions = [\"F16\"]\nrepeats = 1000\n")
            .collect();
        let cases = [
            (
                run("repeats = 1000000000000\n"),
                "run 1: `repeats` 1000000000000 is over 1000",
            ),
            (
                run("").replace("[[run]]", "[defaults]\nrepeats = 5000\n[[run]]"),
                "defaults: `repeats` 5000 is over 1000",
            ),
            (
                run(&format!("batch = [{}]\n", batches.join(","))),
                "run 1: `batch` 200 is over 64",
            ),
            (
                format!("out = \"x\"\n{many_runs}"),
                "the plan: `jobs` 200000 is over 100000",
            ),
        ];
        for (text, want) in cases {
            let t0 = std::time::Instant::now();
            let e = parse_plan(&text).unwrap_err().to_string();
            assert!(e.starts_with(want), "{e}");
            assert!(
                t0.elapsed().as_secs_f64() < 1.0,
                "{want}: took {:?}",
                t0.elapsed()
            );
        }
        assert!(parse_plan(&run("repeats = 1000\n")).is_ok());
    }

    #[test]
    fn zero_counts_and_empty_batches_are_refused_naming_the_key() {
        let run = "out = \"x\"\n[[run]]\nsynthetic = \"a\"\nprecisions = [\"F16\"]\n";
        let cases = [
            (
                "[defaults]\ntokens = 0\n",
                "defaults: `tokens` must be at least 1",
            ),
            (
                "[defaults]\nrepeats = 0\n",
                "defaults: `repeats` must be at least 1",
            ),
            ("iterations = 0\n", "run 1: `iterations` must be at least 1"),
            ("batch = [1, 0]\n", "run 1: `batch` must be at least 1"),
            (
                "batch = []\n",
                "run 1: `batch` is empty: list at least one batch size",
            ),
        ];
        for (extra, want) in cases {
            let text = format!("{run}{extra}");
            let e = parse_plan(&text).unwrap_err();
            assert_eq!(e.to_string(), want, "{text}");
        }
        assert!(parse_plan(&format!("{run}[defaults]\nwarmup = 0\n")).is_ok());
    }

    #[test]
    fn a_plan_session_and_card_reach_every_job_and_odd_ones_are_refused() {
        let text = PLAN
            .replace("out = \"raw\"", "out = \"raw\"\nsession = \"h200-2026-12\"")
            .replace("[defaults]\n", "[defaults]\ncard = \"H200\"\n");
        let plan = parse_plan(&text).unwrap();
        for j in jobs(&plan, Path::new("/o")) {
            assert_eq!(j.measure.session.as_deref(), Some("h200-2026-12"));
            assert_eq!(j.measure.card.as_deref(), Some("H200"));
            assert_eq!(j.what.session.as_deref(), Some("h200-2026-12"));
        }
        for bad in ["", "a b", "x/../y", "s\\t"] {
            let t = PLAN.replace(
                "out = \"raw\"",
                &format!("out = \"raw\"\nsession = \"{bad}\""),
            );
            let e = parse_plan(&t).unwrap_err();
            assert!(matches!(e, Error::PlanSession(_)), "{bad:?}: {e}");
        }
        for bad in ["0", "0,1", " ", "--out=/tmp/x"] {
            let t = PLAN.replace("[defaults]\n", &format!("[defaults]\ncard = \"{bad}\"\n"));
            assert!(
                matches!(parse_plan(&t).unwrap_err(), Error::PlanCard(_)),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_job_stands_where_its_files_say() {
        let dir = std::env::temp_dir().join(format!("qe-plan-state-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let plan = parse_plan(PLAN).unwrap();
        let job = jobs(&plan, &dir).remove(0); // two reports: Q8_0 and Q4_0
        assert_eq!(job.state(), JobState::Pending);
        let [q8, q4] = [&job.expected[0], &job.expected[1]];
        std::fs::write(q8, "{}").unwrap();
        assert_eq!(
            job.state(),
            JobState::Pending,
            "one report of two is not done"
        );
        std::fs::write(with_kind(q4, ".estimate"), "{}").unwrap();
        assert_eq!(job.state(), JobState::Estimated);
        std::fs::remove_file(with_kind(q4, ".estimate")).unwrap();
        // The process died: a failed report for the one it did not write, with the reason.
        let failed = job.failed_reports("exit status 137: out of memory");
        assert_eq!(failed.len(), 1);
        let (path, rep) = &failed[0];
        assert_eq!(path, &with_kind(q4, ".failed"));
        let text = serde_json::to_string(rep).unwrap();
        let v = report::validate_str(&text);
        assert!(v.errors.is_empty(), "{:?}", v.errors);
        assert_eq!(rep.results.basis, report::Basis::Unavailable);
        assert_eq!(rep.results.energy_per_token_mj, None, "never a figure");
        assert_eq!(rep.workload.precision, "Q4_0");
        assert_eq!(rep.workload.params_b, Some(0.494));
        std::fs::write(path, text).unwrap();
        assert_eq!(
            job.state(),
            JobState::Failed("exit status 137: out of memory".into())
        );
        std::fs::write(path, "garbage").unwrap();
        match job.state() {
            JobState::Failed(why) => assert!(why.contains("not a failed report"), "{why}"),
            s => panic!("{s:?}"),
        }
        std::fs::write(q4, "{}").unwrap();
        assert_eq!(job.state(), JobState::Measured);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
