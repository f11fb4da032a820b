//! A campaign's results: one row per report (`aggregate.csv`), and the aggregation of a
//! directory of measured reports into `data/anchors.csv` rows with the rules that judge each row.

use crate::error::{Error, Result};
use analysis::stats::mean;
use report::{Arch, Precision};
use std::path::{Path, PathBuf};

/// The `*.json` files of a directory, sorted by name.
fn json_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::io("reading", dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        // A FIFO or device named *.json would block or never end: only regular files.
        .filter(|p| meter::files::is_regular_file(p))
        .collect();
    files.sort();
    Ok(files)
}

/// What an in-memory CSV writer wrote, as text.
fn csv_text(w: csv::Writer<Vec<u8>>) -> Result<String> {
    let bytes = w
        .into_inner()
        .map_err(|e| csv::Error::from(e.into_error()))?;
    Ok(String::from_utf8(bytes)?)
}

/// The valid reports of a directory (an invalid or unreadable file is skipped: it never
/// contributes a figure), with their file names.
fn valid_reports(dir: &Path) -> Result<Vec<(String, report::Report)>> {
    Ok(read_reports(dir)?.0)
}

/// The valid reports of a directory, and how many files were not valid reports.
fn read_reports(dir: &Path) -> Result<(Vec<(String, report::Report)>, usize)> {
    let mut out = Vec::new();
    let mut invalid = 0;
    for f in json_files(dir)? {
        let Ok(text) = meter::files::read_text_limited(&f, meter::files::TEXT_INPUT_LIMIT) else {
            invalid += 1;
            continue;
        };
        let v = report::validate_str(&text);
        if let Some(rep) = v.report.filter(|_| v.errors.is_empty()) {
            let name = f
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            out.push((name, rep));
        } else {
            invalid += 1;
        }
    }
    Ok((out, invalid))
}

/// One line of `aggregate.csv`: one report of a campaign, for spreadsheets.
#[derive(Debug, serde::Serialize)]
pub struct ReportCsvRow {
    /// Report file name.
    pub file: String,
    /// `workload.model_name`.
    pub model: String,
    /// `workload.params_b`.
    pub params_b: Option<f64>,
    /// `workload.precision`.
    pub precision: Option<Precision>,
    /// `workload.batch_size`.
    pub batch: u32,
    /// `workload.context_depth` (a context run's depth).
    pub context_depth: Option<u32>,
    /// `protocol.seed`.
    pub seed: Option<u64>,
    /// `results.basis`.
    pub basis: report::Basis,
    /// Counter energy per token, mJ.
    pub energy_mj_counter: Option<f64>,
    /// Trace energy per token, mJ (trace joules ÷ tokens).
    #[serde(serialize_with = "dp3")]
    pub energy_mj_trace: Option<f64>,
    /// `energy.counter_over_trace_ratio`.
    pub counter_over_trace: Option<f64>,
    /// The same run's FP16 arm, mJ per token.
    pub fp16_energy_mj: Option<f64>,
    /// ΔE vs FP16 as the report states it, %.
    pub vs_fp16_pct: Option<f64>,
    /// Tokens per second.
    pub tok_s: Option<f64>,
    /// Average power over the window, W.
    pub avg_power_w: Option<f64>,
    /// Idle power before loading, W.
    pub idle_power_w: Option<f64>,
    /// Achieved power-trace rate, Hz.
    pub achieved_hz: Option<f64>,
    /// Power-trace samples.
    pub samples: Option<u64>,
    /// Failed power reads.
    pub failed_reads: Option<u64>,
    /// Window length, s.
    pub window_s: Option<f64>,
    /// Whether the requested arm's cooldown converged.
    pub cooldown_converged: Option<bool>,
    /// Arm order, `A>B`.
    pub arm_order: String,
}

fn dp3<S: serde::Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(x) => s.serialize_str(&format!("{x:.3}")),
        None => s.serialize_none(),
    }
}

impl ReportCsvRow {
    /// The row of one report.
    pub fn of(file: String, rep: &report::Report) -> ReportCsvRow {
        let energy = rep.energy.as_ref();
        let protocol = rep.protocol.as_ref();
        let per_token_trace = match (
            energy.and_then(|e| e.trace_joules),
            rep.results.tokens_generated,
        ) {
            (Some(t), Some(n)) if n > 0 => Some(t * 1000.0 / n as f64),
            _ => None,
        };
        ReportCsvRow {
            file,
            model: rep.workload.model_name.clone(),
            params_b: rep.workload.params_b,
            precision: rep.workload.parsed_precision(),
            batch: rep.workload.batch_size,
            context_depth: rep.workload.context_depth,
            seed: protocol.and_then(|p| p.seed),
            basis: rep.results.basis,
            energy_mj_counter: rep.results.energy_per_token_mj,
            energy_mj_trace: per_token_trace,
            counter_over_trace: energy.and_then(|e| e.counter_over_trace_ratio),
            fp16_energy_mj: rep.results.fp16_energy_per_token_mj,
            vs_fp16_pct: rep.results.vs_fp16_energy_pct,
            tok_s: rep.results.throughput_tokens_per_s,
            avg_power_w: rep.results.avg_power_watts,
            idle_power_w: energy.and_then(|e| e.idle_power_watts),
            achieved_hz: energy.and_then(|e| e.achieved_sample_rate_hz),
            samples: energy.and_then(|e| e.samples),
            failed_reads: energy.and_then(|e| e.failed_reads),
            window_s: energy.and_then(|e| e.window_seconds),
            cooldown_converged: protocol.and_then(|p| p.cooldown.as_ref()?.converged),
            arm_order: protocol
                .and_then(|p| p.arm_order.as_ref())
                .map(|o| o.join(">"))
                .unwrap_or_default(),
        }
    }
}

/// `aggregate.csv`: one row per valid report in `dir` (with a header).
pub fn aggregate_csv(dir: &Path) -> Result<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for (file, rep) in valid_reports(dir)? {
        w.serialize(ReportCsvRow::of(file, &rep))?;
    }
    csv_text(w)
}

/// One aggregated configuration of a campaign: the mean over independent runs of one (model,
/// precision, batch), with the same runs' FP16 arms as its baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct AnchorRow {
    /// Card name as the reports give it.
    pub gpu: String,
    /// Architecture class.
    pub arch: Arch,
    /// Model name, without the synthetic-weights suffix.
    pub model: String,
    /// Size, billions of parameters.
    pub params_b: f64,
    /// Precision.
    pub precision: Precision,
    /// Batch size.
    pub batch: u64,
    /// A context run's depth: tokens in the KV cache when the timed decode starts (`None`: the
    /// protocol's short prompt).
    pub context_depth: Option<u32>,
    /// A prompt-set run's set (name and the start of its SHA-256): the energies are then whole
    /// requests' per output token, each prompt's prefill included. Such rows never become
    /// anchors lines ([`Aggregation::prompt_set_rows`]).
    pub prompt_set: Option<String>,
    /// Mean counter energy per token, mJ.
    pub energy_mj: f64,
    /// Mean of the same runs' FP16 arms, mJ per token.
    pub fp16_mj: f64,
    /// Mean tokens per second.
    pub tok_s: f64,
    /// Mean average power, W.
    pub power_w: f64,
    /// Independent runs behind the row.
    pub n: usize,
    /// Distinct GPUs (by UUID) the runs were made on: run-to-run spread includes card-to-card.
    pub cards: usize,
    /// Distinct nodes (the Slurm node, else the host) the runs were made on.
    pub nodes: usize,
    /// The measurement session the reports name (`protocol.session`), if they name one.
    pub session: Option<String>,
    /// The software stack, as the reports describe it ([`stack_label`]).
    pub stack: String,
    /// Run-to-run coefficient of variation of the energy, % (NaN with n = 1).
    pub cv_pct: f64,
    /// Standard deviation over runs of each run's own ΔE vs its FP16 arm, in percentage points:
    /// the arms of a run share its card, process and hour, so this is the spread the ΔE interval
    /// needs (`None` for FP16 rows, with n < 2, or when a run lacks its FP16 arm). The interval is
    /// centred on [`AnchorRow::delta_pct`], the ratio of the mean energies, not on the mean of the
    /// runs' own ΔE; the two differ by well under the half-width (≤ 0.8 points in our rows).
    pub paired_delta_sd_pct: Option<f64>,
    /// Mean of the runs' power-trace energies (the counter is the primary figure).
    pub trace_mj: Option<f64>,
    /// Mean counter ÷ trace ratio over the runs.
    pub counter_over_trace: Option<f64>,
    /// The largest iteration-time CV of one run's arm, % (how steady decoding was inside a run;
    /// `None` when a run does not say).
    pub iteration_cv_max_pct: Option<f64>,
    /// Validity reason codes raised on the pooled windows, each with the runs it was raised in
    /// (only when flagged arms were asked to be pooled).
    pub flags: Vec<(String, usize)>,
    /// Mean perplexity of the arm over its runs, where every run scored it (same text, same
    /// tokenizer: comparable within a model only).
    pub perplexity: Option<f64>,
    /// A context run's prefill energy per prompt token, mJ: the mean over the runs, when every
    /// run's report of this arm carries `results.prefill`.
    pub prefill_mj: Option<f64>,
}

impl AnchorRow {
    /// ΔE vs the mean FP16 arm of the same runs, in % (0 for the FP16 row itself).
    pub fn delta_pct(&self) -> f64 {
        (self.energy_mj - self.fp16_mj) / self.fp16_mj * 100.0
    }

    /// The FP16 baseline row of its runs.
    pub fn is_fp16(&self) -> bool {
        self.precision == Precision::Fp16
    }

    /// Curves are batch-1 single-stream; FP16 and batch-sweep rows feed the absolute energy and
    /// the optimizer's batch term only.
    pub fn feeds_curve(&self) -> bool {
        !self.is_fp16() && self.batch == 1 && self.context_depth.is_none()
    }
}

/// The campaign's targets for one anchors row: n ≥ 3 independent runs, run-to-run
/// CV below 2 %, counter and trace within 2 %. Every row is judged; a miss carries its reason.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CampaignTargets {
    /// Fewest independent runs.
    pub min_runs: usize,
    /// Largest run-to-run CV, %.
    pub max_cv_pct: f64,
    /// Largest |counter ÷ trace − 1|.
    pub max_counter_trace_gap: f64,
}

impl Default for CampaignTargets {
    fn default() -> Self {
        CampaignTargets {
            min_runs: analysis::dataset::TARGET_RUNS as usize,
            max_cv_pct: 2.0,
            max_counter_trace_gap: 0.02,
        }
    }
}

impl CampaignTargets {
    /// Whether the row's CV meets the target.
    pub fn cv_met(&self, r: &AnchorRow) -> bool {
        r.cv_pct.is_finite() && r.cv_pct < self.max_cv_pct
    }

    /// The row's `curve_note`: what the row is, and its verdict against every target, with the
    /// reason next to each miss. `gpu` is the card's catalog name.
    pub fn note(&self, r: &AnchorRow, gpu: &str) -> String {
        let mut note = match (r.is_fp16(), r.batch) {
            (true, 1) => format!(
                "FP16 baseline (dE = 0 by definition); used for absolute energy; n = {} runs",
                r.n
            ),
            (true, b) => format!(
                "FP16 baseline of the {gpu} batch sweep (batch {b}), n = {}: feeds the optimizer's batch term",
                r.n
            ),
            (false, 1) => format!(
                "{gpu} {} campaign, n = {} independent runs",
                r.stack.split_whitespace().next().unwrap_or("candle"),
                r.n
            ),
            (false, b) => format!(
                "{gpu} batch sweep (batch {b}), n = {}: feeds the optimizer's batch term, not the batch-1 curves",
                r.n
            ),
        };
        if r.n < self.min_runs {
            note.push_str(&format!(" (below the n >= {} target)", self.min_runs));
        }
        if !r.cv_pct.is_finite() {
            note.push_str("; CV undefined (n = 1)");
        } else if self.cv_met(r) {
            note.push_str(&format!(
                "; CV {:.1} % meets the {} % target",
                r.cv_pct, self.max_cv_pct
            ));
        } else {
            note.push_str(&format!(
                "; CV {:.1} % is above the {} % target ({}; see docs/MEASUREMENTS.md)",
                r.cv_pct,
                self.max_cv_pct,
                cv_miss_reason(r)
            ));
        }
        if let Some(x) = r.counter_over_trace {
            if (x - 1.0).abs() > self.max_counter_trace_gap {
                note.push_str(&format!(
                    "; counter/trace {x:.3} differs by more than {:.0} %",
                    self.max_counter_trace_gap * 100.0
                ));
            }
        }
        if !r.flags.is_empty() {
            let said: Vec<String> = r
                .flags
                .iter()
                .map(|(code, k)| format!("{code} in {k} of {} runs", r.n))
                .collect();
            note.push_str(&format!(
                "; validity flags (pooled anyway): {}",
                said.join(", ")
            ));
        }
        note
    }
}

/// Why a row's run-to-run CV misses the target, as far as its runs show it. The eager candle
/// engine is launch-bound (its iterations vary by 4-15 % within a run); for other engines each
/// run's own iteration CV says whether the spread is inside runs or between them.
fn cv_miss_reason(r: &AnchorRow) -> String {
    let cards = if r.cards > 1 {
        format!(
            "; its runs are on {} cards, whose differences are part of the spread",
            r.cards
        )
    } else {
        String::new()
    };
    if r.stack.starts_with("candle ") {
        return format!(
            "iteration times of one loaded model vary, CV typically 4-15 %, with no hypervisor \
             steal: decode at batch {} is launch-bound{cards}",
            r.batch
        );
    }
    match r.iteration_cv_max_pct {
        Some(i) if i < 1.0 => format!(
            "each run decodes steadily, iteration CV at most {i:.2} %: the spread is between \
             runs, each a new process{cards}"
        ),
        Some(i) => format!("iteration times vary within a run too, CV up to {i:.1} %{cards}"),
        None => format!("the runs do not report their iteration CV{cards}"),
    }
}

/// One line of `data/anchors.csv`, in its column order.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AnchorsCsvRow {
    /// Card (catalog name).
    pub gpu: String,
    /// Architecture class.
    pub gpu_arch: Arch,
    /// Model.
    pub model: String,
    /// Size, billions of parameters.
    pub params_b: f64,
    /// Precision.
    pub precision: Precision,
    /// Batch size.
    pub batch_size: u64,
    /// mJ per token.
    #[serde(serialize_with = "dp2")]
    pub energy_per_token_mj: f64,
    /// The same runs' FP16 mJ per token.
    #[serde(serialize_with = "dp2")]
    pub fp16_energy_per_token_mj: f64,
    /// ΔE vs FP16, % (0 for the FP16 row).
    #[serde(serialize_with = "dp2")]
    pub vs_fp16_energy_pct: f64,
    /// Tokens per second.
    #[serde(serialize_with = "dp2")]
    pub throughput_tok_s: f64,
    /// Average power, W.
    #[serde(serialize_with = "dp1")]
    pub avg_power_w: f64,
    /// Independent runs.
    pub n: usize,
    /// Run-to-run CV, % (empty with n = 1).
    #[serde(serialize_with = "dp2_opt")]
    pub cv_pct: Option<f64>,
    /// Run-to-run SD of the paired ΔE vs FP16, percentage points (empty when not defined), to 3
    /// significant figures: a tight row's SD of 0.03 must not lose a third of itself to rounding.
    #[serde(serialize_with = "sig3_opt")]
    pub vs_fp16_sd_pct: Option<f64>,
    /// `gross`: idle power is not subtracted.
    pub power_accounting: &'static str,
    /// The software stack.
    pub stack: String,
    /// The measurement session (rows of different sessions are never pooled).
    pub session: String,
    /// Where the numbers come from.
    pub source: String,
    /// 1 when the row feeds a default batch-1 curve.
    pub default_curve: u8,
    /// Physical cards (distinct GPU UUIDs) the row's runs were made on.
    pub cards: usize,
    /// Mean perplexity over the runs, where every run scored it (empty otherwise).
    #[serde(serialize_with = "dp3_opt")]
    pub perplexity: Option<f64>,
    /// `check` for rows that check the method (`--not-curve`) and for context runs: shown, never
    /// fitted; empty for a campaign's rows.
    pub role: &'static str,
    /// A context run's depth (tokens in the KV cache when the timed decode starts); empty for the
    /// protocol's short prompt.
    pub context_depth: Option<u32>,
    /// A context run's prefill energy per prompt token, mJ (the mean over runs that all measured
    /// it; empty otherwise).
    #[serde(serialize_with = "dp3_opt")]
    pub prefill_mj_per_prompt_token: Option<f64>,
    /// What the row is and how it meets the campaign targets. Last: the page's landing module
    /// embeds the file without it.
    pub curve_note: String,
}

fn dp1<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{v:.1}"))
}
fn dp2<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{v:.2}"))
}
fn sig3_opt<S: serde::Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(x) if *x > 0.0 => {
            let decimals = (2 - x.log10().floor() as i32).max(2) as usize;
            s.serialize_str(&format!("{x:.decimals$}"))
        }
        Some(x) => s.serialize_str(&format!("{x:.2}")),
        None => s.serialize_str(""),
    }
}
fn dp3_opt<S: serde::Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&v.map(|x| format!("{x:.3}")).unwrap_or_default())
}
fn dp2_opt<S: serde::Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&v.map(|x| format!("{x:.2}")).unwrap_or_default())
}

/// Where a campaign's rows come from, for the anchors' provenance columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Provenance {
    /// The software stack's label, replacing the one derived from the reports ([`stack_label`]);
    /// refused when the rows hold several stacks.
    pub stack: Option<String>,
    /// The session of rows whose reports name none; refused when it contradicts theirs.
    pub session: Option<String>,
    /// The source description.
    pub source: String,
    /// Why the rows check the method rather than anchor the default curves (a real model
    /// beside its synthetic twin): then no row feeds a curve, and each note says why.
    pub not_curve: Option<String>,
}

impl Provenance {
    /// Check that these labels can be given to `rows` without pooling or relabelling anything
    /// that differs: one `--stack` label for one stack only, a `--session` that agrees with the
    /// sessions the reports name, and a session for every row.
    pub fn check(&self, rows: &[AnchorRow]) -> std::result::Result<(), String> {
        let mut stacks: Vec<&str> = rows.iter().map(|r| r.stack.as_str()).collect();
        stacks.sort_unstable();
        stacks.dedup();
        if self.stack.is_some() && stacks.len() > 1 {
            return Err(format!(
                "the reports hold {} stacks ({}): one --stack label cannot describe them;                  leave --stack out (each row is labelled with its own) or aggregate each stack's reports apart",
                stacks.len(),
                stacks.join("; ")
            ));
        }
        for r in rows {
            match (&r.session, &self.session) {
                (None, None) => {
                    return Err(format!(
                        "{} {}: its reports name no session (protocol.session): pass --session",
                        r.model, r.precision
                    ))
                }
                (Some(have), Some(want)) if have != want => {
                    return Err(format!(
                        "{} {}: its reports belong to session {have:?}, not {want:?}: sessions are \
                         never relabelled or pooled (leave --session out)",
                        r.model, r.precision
                    ))
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl AnchorsCsvRow {
    /// The anchors line of an aggregated row, judged against `targets`.
    pub fn of(r: &AnchorRow, prov: &Provenance, targets: &CampaignTargets) -> AnchorsCsvRow {
        let gpu = analysis::Dataset::embedded()
            .gpu(&r.gpu)
            .map(|g| g.name.clone())
            .unwrap_or_else(|| r.gpu.clone());
        AnchorsCsvRow {
            gpu_arch: r.arch,
            model: r.model.clone(),
            params_b: r.params_b,
            precision: r.precision,
            batch_size: r.batch,
            energy_per_token_mj: r.energy_mj,
            fp16_energy_per_token_mj: r.fp16_mj,
            vs_fp16_energy_pct: if r.is_fp16() { 0.0 } else { r.delta_pct() },
            throughput_tok_s: r.tok_s,
            avg_power_w: r.power_w,
            n: r.n,
            cv_pct: r.cv_pct.is_finite().then_some(r.cv_pct),
            vs_fp16_sd_pct: r.paired_delta_sd_pct,
            power_accounting: "gross",
            stack: prov.stack.clone().unwrap_or_else(|| r.stack.clone()),
            session: r
                .session
                .clone()
                .or_else(|| prov.session.clone())
                .unwrap_or_default(),
            source: prov.source.clone(),
            default_curve: u8::from(r.feeds_curve() && prov.not_curve.is_none()),
            context_depth: r.context_depth,
            prefill_mj_per_prompt_token: r.prefill_mj,
            cards: r.cards,
            perplexity: r.perplexity,
            role: if prov.not_curve.is_some() || r.context_depth.is_some() {
                "check"
            } else {
                ""
            },
            curve_note: match (&prov.not_curve, r.context_depth) {
                (Some(why), _) => format!("not a curve anchor: {why}; {}", targets.note(r, &gpu)),
                (None, Some(d)) => format!(
                    "not a curve anchor: a context run at depth {d} checks the context model; {}",
                    targets.note(r, &gpu)
                ),
                (None, None) => targets.note(r, &gpu),
            },
            gpu,
        }
    }
}

/// `data/anchors.csv` lines (no header: they are appended to the file) for a campaign's rows.
pub fn anchors_csv(
    rows: &[AnchorRow],
    prov: &Provenance,
    targets: &CampaignTargets,
) -> Result<String> {
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    for r in rows {
        w.serialize(AnchorsCsvRow::of(r, prov, targets))?;
    }
    csv_text(w)
}

/// The campaign's full table for docs/MEASUREMENTS.md: one line per configuration, both energies,
/// throughput, power, run-to-run CV against the target (and over how many cards) and ΔE vs the
/// same runs' FP16 arms.
pub fn markdown_table(rows: &[AnchorRow], targets: &CampaignTargets) -> String {
    use std::fmt::Write;
    let mut rows: Vec<&AnchorRow> = rows.iter().collect();
    rows.sort_by(|a, b| {
        a.batch
            .cmp(&b.batch)
            .then(a.params_b.total_cmp(&b.params_b))
            .then_with(|| a.model.cmp(&b.model))
            .then(a.precision.display_rank().cmp(&b.precision.display_rank()))
    });
    let mut out = format!(
        "| model | params B | batch | precision | n | cards | nodes | mJ/tok counter | mJ/tok trace | counter/trace | tok/s | avg W | CV % (target < {}) | ΔE vs FP16 % [95 %, paired] |\n\
         |---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        targets.max_cv_pct
    );
    let f = |x: Option<f64>, d: usize| x.map_or("–".to_string(), |v| format!("{v:.d$}"));
    for r in rows {
        let cv = if r.cv_pct.is_finite() {
            format!(
                "{:.1}{}",
                r.cv_pct,
                if targets.cv_met(r) { " ✓" } else { "" }
            )
        } else {
            "–".to_string()
        };
        let delta = if r.is_fp16() {
            "–".to_string()
        } else {
            let d = r.delta_pct();
            match r
                .paired_delta_sd_pct
                .and_then(|sd| analysis::stats::paired_halfwidth(sd, r.n))
            {
                Some(h) => format!("{d:+.1} [{:+.1}, {:+.1}]", d - h, d + h),
                None => format!("{d:+.1}"),
            }
        };
        let model = match (&r.prompt_set, r.context_depth) {
            (Some(set), _) => format!("{} (prompt set {set}, end to end)", r.model),
            (None, Some(d)) => format!("{} (context {d})", r.model),
            (None, None) => r.model.clone(),
        };
        let _ = writeln!(
            out,
            "| {} | {:.2} | {} | {} | {} | {} | {} | {:.1} | {} | {} | {:.1} | {:.1} | {} | {} |",
            model,
            r.params_b,
            r.batch,
            r.precision,
            r.n,
            r.cards,
            r.nodes,
            r.energy_mj,
            f(r.trace_mj, 1),
            f(r.counter_over_trace, 4),
            r.tok_s,
            r.power_w,
            cv,
            delta
        );
    }
    out
}

/// One succeeded arm of one run, as aggregation reads it.
struct RunArm {
    key: ConfigKey,
    run: String,
    card: String,
    node: String,
    energy: f64,
    tok_s: f64,
    power: f64,
    ratio: Option<f64>,
    trace: Option<f64>,
    iteration_cv: Option<f64>,
    perplexity: Option<f64>,
    /// The prefill's mJ per prompt token, from the report of this arm itself (a report's
    /// `results.prefill` is its own arm's).
    prefill: Option<f64>,
    /// The meter build that measured it (`stack.meter_build`; absent in older reports).
    build: Option<String>,
    /// The validity reason codes raised on this arm's window (`report::validity`).
    flags: Vec<&'static str>,
}

/// What makes a configuration: session, stack, model, precision, batch. Runs of different
/// sessions or stacks are never pooled.
#[derive(Debug, Clone, PartialEq)]
struct ConfigKey {
    session: Option<String>,
    stack: String,
    model: String,
    precision: Precision,
    batch: u64,
    /// A context run's depth (`workload.context_depth`): decodes at different depths are different
    /// configurations. `None`: the protocol's short prompt.
    context: Option<u32>,
    /// A prompt-set run's set, as its name and the start of its SHA-256: only runs over the same
    /// file pool.
    prompt_set: Option<String>,
}

/// Card, architecture and size of a model, from the first report that names it.
#[derive(Debug, Clone, Default)]
struct ModelMeta {
    gpu: String,
    arch: Option<Arch>,
    params_b: f64,
}

/// The model row a report pools into: its model name, without the synthetic-weights label, and —
/// engines are never pooled — for a stack other than the eager candle one, its engine in
/// brackets (`qwen2-0.5b [candle-graph]`).
fn pooled_model(rep: &report::Report) -> String {
    let name = &rep.workload.model_name;
    let model = match meter::run_report::synthetic_model_of(name) {
        Some(shape) => shape.to_string(),
        None => name.replace(" (synthetic weights)", ""),
    };
    match rep.stack.as_ref().and_then(|s| s.engine.as_deref()) {
        None | Some("candle") => model,
        Some(other) => format!("{model} [{other}]"),
    }
}

/// The software stack a report was measured with, in words: engine and version (with the
/// kernels, for candle), how a server was driven, the CUDA version and the kind of weights —
/// `candle 0.11.1 GGUF/cuBLAS kernels, CUDA 13.0, synthetic weights`. Runs are pooled only
/// within one stack.
pub fn stack_label(rep: &report::Report) -> String {
    let s = rep.stack.as_ref();
    let engine = s
        .and_then(|s| s.engine.as_deref())
        .unwrap_or("unknown engine");
    let mut head = match s.and_then(|s| s.engine_version.as_deref()) {
        Some(v) if !v.is_empty() => format!("{engine} {v}"),
        _ => engine.to_string(),
    };
    if engine.starts_with("candle") {
        head.push_str(" GGUF/cuBLAS kernels");
    }
    let mut parts = vec![head];
    if let Some(v) = s.and_then(|s| s.serving.as_ref()) {
        let mode = v.mode.words();
        parts.push(match &v.api {
            Some(api) => format!("{mode}, {api}"),
            None => mode.to_string(),
        });
        if let Some(kv) = v.command.as_deref().and_then(kv_cache_of) {
            parts.push(kv);
        }
    }
    if let Some(c) = s.and_then(|s| s.cuda.as_deref()) {
        parts.push(format!("CUDA {c}"));
    }
    if let Some(w) = &rep.weights {
        parts.push(format!("{} weights", w.kind.as_str()));
    }
    parts.join(", ")
}

/// The KV cache type a llama.cpp server command line asks for (`-ctk`/`--cache-type-k`,
/// `-ctv`/`--cache-type-v`), in words, when it asks for one: a quantized cache is another stack,
/// whose rows must never pool with the default cache's.
fn kv_cache_of(command: &str) -> Option<String> {
    let words: Vec<&str> = command.split_whitespace().collect();
    let after = |flags: [&str; 2]| {
        words
            .windows(2)
            .find(|w| flags.contains(&w[0]))
            .map(|w| w[1])
    };
    match (
        after(["-ctk", "--cache-type-k"]),
        after(["-ctv", "--cache-type-v"]),
    ) {
        (None, None) => None,
        (Some(k), Some(v)) if k == v => Some(format!("KV cache {k}")),
        (k, v) => Some(format!(
            "KV cache K {} / V {}",
            k.unwrap_or("f16"),
            v.unwrap_or("f16")
        )),
    }
}

/// What a report is to aggregation: a measured run (measured, or a run whose own arm failed while
/// its other arms were measured), an estimate (interpolated, extrapolated, the no-GPU path's), or
/// a failed job. Only measured runs contribute figures.
fn kind_of(rep: &report::Report) -> ReportKind {
    match rep.results.basis {
        report::Basis::Measured => ReportKind::MeasuredRun,
        report::Basis::Unavailable if rep.energy.is_some() => ReportKind::MeasuredRun,
        // No energy block: a failed job's record (it has the failed arm), or a no-card estimate.
        report::Basis::Unavailable if rep.protocol.is_some() => ReportKind::Failed,
        _ => ReportKind::Estimate,
    }
}

/// What a report is to aggregation.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ReportKind {
    /// Its run's arms were measured (its own arm may have failed).
    MeasuredRun,
    /// A dataset estimate or a report with no figure: never pooled.
    Estimate,
    /// A sweep job that failed before writing a report.
    Failed,
}

/// The succeeded arms of one report's run (each run counted once however many reports it wrote).
fn run_arms(rep: &report::Report, arms: &mut Vec<RunArm>, include_flagged: bool) -> usize {
    let validity = report::validity::assess(rep);
    let mut left_out = 0;
    let model = pooled_model(rep);
    let session = rep.protocol.as_ref().and_then(|p| p.session.clone());
    let stack = stack_label(rep);
    let env = rep.environment.as_ref();
    let node = env
        .and_then(|e| e.slurm.as_ref()?.node.clone())
        .or_else(|| rep.system_under_test.host.clone())
        .unwrap_or_default();
    let seed = rep.protocol.as_ref().and_then(|p| p.seed);
    let run = format!(
        "{}|{}|{}",
        model,
        rep.timestamp_utc.clone().unwrap_or_default(),
        seed.map(|s| s.to_string()).unwrap_or_default()
    );
    let card = rep
        .environment
        .as_ref()
        .and_then(|e| e.gpu_uuid.clone())
        .unwrap_or_default();
    let batch = u64::from(rep.workload.batch_size);
    let run_arms = rep.protocol.as_ref().and_then(|p| p.arms.as_ref());
    for arm in run_arms.into_iter().flatten() {
        if arm.status != report::ArmStatus::Ok {
            continue;
        }
        // Reports are validated, but an arm's precision is free text there: one we cannot name
        // cannot be pooled with anything.
        let Ok(precision) = arm.precision.parse::<Precision>() else {
            continue;
        };
        let key = ConfigKey {
            session: session.clone(),
            stack: stack.clone(),
            model: model.clone(),
            precision,
            batch,
            context: rep.workload.context_depth,
            prompt_set: rep
                .workload
                .prompt_set
                .as_ref()
                .map(|p| format!("{} ({})", p.name, p.sha256.get(..12).unwrap_or(&p.sha256))),
        };
        let own_prefill = (arm.precision == rep.workload.precision)
            .then(|| {
                rep.results
                    .prefill
                    .as_ref()
                    .map(|p| p.energy_per_prompt_token_mj)
            })
            .flatten();
        if let Some(seen) = arms.iter_mut().find(|a| a.key == key && a.run == run) {
            // The same arm seen again through another report of the same run: only that
            // report holds its prefill.
            seen.prefill = seen.prefill.or(own_prefill);
            continue;
        }
        let mut flags: Vec<&'static str> = validity
            .flags
            .iter()
            .filter(|f| f.arm.as_deref().is_none_or(|a| a == arm.precision))
            .map(|f| f.code.code())
            .collect();
        flags.dedup();
        if !flags.is_empty() && !include_flagged {
            left_out += 1;
            continue;
        }
        if let (Some(energy), Some(tok_s), Some(power)) = (
            arm.energy_per_token_mj,
            arm.throughput_tokens_per_s,
            arm.avg_power_watts,
        ) {
            arms.push(RunArm {
                key,
                run: run.clone(),
                card: card.clone(),
                node: node.clone(),
                energy,
                tok_s,
                power,
                ratio: arm.counter_over_trace_ratio,
                trace: arm.trace_energy_per_token_mj,
                iteration_cv: arm.iteration_time_cv_pct,
                perplexity: arm.perplexity.as_ref().and_then(|p| p.value),
                prefill: own_prefill,
                build: rep.stack.as_ref().and_then(|s| s.meter_build.clone()),
                flags,
            });
        }
    }
    left_out
}

/// What `aggregate_anchors` made of a directory.
#[derive(Debug, Clone)]
pub struct Aggregation {
    /// One row per (session, stack, model, precision, batch).
    pub rows: Vec<AnchorRow>,
    /// Valid reports read.
    pub reports: usize,
    /// Of those, estimates (never pooled into a measured row).
    pub estimates: usize,
    /// Of those, failed jobs' reports (no figure).
    pub failed: usize,
    /// Files that are not valid reports (skipped).
    pub invalid: usize,
    /// Measured arms left out because their window's validity is flagged.
    pub flagged_left_out: usize,
    /// Measured prompt-set reports. Their runs pool into [`Aggregation::prompt_set_rows`], never
    /// into `rows`: their figures are whole requests' (each prompt's prefill included), where
    /// every anchors row holds a decode's.
    pub prompt_sets: usize,
    /// The prompt-set runs' rows, one per (session, stack, model, precision, batch, set): for the
    /// Markdown table, never for anchors lines.
    pub prompt_set_rows: Vec<AnchorRow>,
}

/// Aggregate the measured reports of a directory: one row per (session, stack, model,
/// precision, batch) with the mean over independent runs, n, CV, and the cards and nodes behind
/// it; the FP16 baseline of each row is the mean of the F16 arms of the same runs. Reports that
/// are not measured never contribute a figure.
pub fn aggregate_anchors(dir: &Path, include_flagged: bool) -> Result<Aggregation> {
    let mut flagged_left_out = 0;
    let mut arms: Vec<RunArm> = Vec::new();
    let mut meta: Vec<(String, ModelMeta)> = Vec::new();
    let (reports, invalid) = read_reports(dir)?;
    let (mut estimates, mut failed, mut prompt_sets) = (0, 0, 0);
    for (_, rep) in &reports {
        match kind_of(rep) {
            ReportKind::MeasuredRun => {
                prompt_sets += usize::from(rep.workload.prompt_set.is_some())
            }
            ReportKind::Estimate => {
                estimates += 1;
                continue;
            }
            ReportKind::Failed => {
                failed += 1;
                continue;
            }
        }
        let model = pooled_model(rep);
        if !meta.iter().any(|(m, _)| *m == model) {
            meta.push((
                model,
                ModelMeta {
                    gpu: rep.system_under_test.gpu.clone(),
                    arch: rep.effective_arch(),
                    params_b: rep.workload.params_b.unwrap_or(0.0),
                },
            ));
        }
        flagged_left_out += run_arms(rep, &mut arms, include_flagged);
    }
    let mut keys: Vec<ConfigKey> = Vec::new();
    for a in &arms {
        if !keys.contains(&a.key) {
            keys.push(a.key.clone());
        }
    }
    for key in &keys {
        check_one_build(key, &arms)?;
    }
    let (prompt_set_rows, rows): (Vec<AnchorRow>, Vec<AnchorRow>) = keys
        .into_iter()
        .filter_map(|key| row_of(&key, &arms, &meta))
        .partition(|r| r.prompt_set.is_some());
    Ok(Aggregation {
        rows,
        prompt_set_rows,
        reports: reports.len(),
        estimates,
        failed,
        invalid,
        flagged_left_out,
        prompt_sets,
    })
}

/// The runs of one configuration were measured by one meter build (where their reports name it):
/// two builds are two engines, however alike their labels.
fn check_one_build(key: &ConfigKey, arms: &[RunArm]) -> Result<()> {
    let mut builds: Vec<&str> = arms
        .iter()
        .filter(|a| a.key == *key)
        .filter_map(|a| a.build.as_deref())
        .collect();
    builds.sort_unstable();
    builds.dedup();
    if builds.len() > 1 {
        return Err(Error::MixedBuilds {
            config: format!("{} {} ({})", key.model, key.precision, key.stack),
            builds: builds.join(", "),
        });
    }
    Ok(())
}

/// The aggregated row of one configuration; `None` when none of its runs has an FP16 arm.
fn row_of(key: &ConfigKey, arms: &[RunArm], meta: &[(String, ModelMeta)]) -> Option<AnchorRow> {
    let these: Vec<&RunArm> = arms.iter().filter(|a| a.key == *key).collect();
    let runs: Vec<&String> = these.iter().map(|a| &a.run).collect();
    let fp16_arms: Vec<&RunArm> = arms
        .iter()
        .filter(|a| {
            a.key.model == key.model
                && a.key.session == key.session
                && a.key.stack == key.stack
                && a.key.precision == Precision::Fp16
                && a.key.batch == key.batch
                && a.key.context == key.context
                && runs.contains(&&a.run)
        })
        .collect();
    if fp16_arms.is_empty() {
        return None;
    }
    let fp16: Vec<f64> = fp16_arms.iter().map(|a| a.energy).collect();
    let e: Vec<f64> = these.iter().map(|a| a.energy).collect();
    let distinct = |f: fn(&RunArm) -> &str| {
        let mut v: Vec<&str> = these.iter().map(|a| f(a)).collect();
        v.sort_unstable();
        v.dedup();
        v.len()
    };
    // Both only when every run has one: a mean over some runs would not match the counter's.
    let all = |x: Vec<Option<f64>>| -> Option<f64> {
        x.iter()
            .copied()
            .collect::<Option<Vec<f64>>>()
            .filter(|v| !v.is_empty())
            .map(|v| mean(&v))
    };
    let m = meta
        .iter()
        .find(|(m, _)| *m == key.model)
        .map(|(_, x)| x.clone())
        .unwrap_or_default();
    Some(AnchorRow {
        gpu: m.gpu,
        arch: m.arch?,
        model: key.model.clone(),
        params_b: m.params_b,
        precision: key.precision,
        batch: key.batch,
        context_depth: key.context,
        prompt_set: key.prompt_set.clone(),
        energy_mj: mean(&e),
        fp16_mj: mean(&fp16),
        tok_s: mean(&these.iter().map(|a| a.tok_s).collect::<Vec<_>>()),
        power_w: mean(&these.iter().map(|a| a.power).collect::<Vec<_>>()),
        n: e.len(),
        cards: distinct(|a| a.card.as_str()),
        nodes: distinct(|a| a.node.as_str()),
        session: key.session.clone(),
        stack: key.stack.clone(),
        cv_pct: analysis::stats::cv_pct(&e).unwrap_or(f64::NAN),
        paired_delta_sd_pct: paired_delta_sd_pct(key, &these, &fp16_arms),
        trace_mj: all(these.iter().map(|a| a.trace).collect()),
        counter_over_trace: all(these.iter().map(|a| a.ratio).collect()),
        iteration_cv_max_pct: these
            .iter()
            .map(|a| a.iteration_cv)
            .collect::<Option<Vec<f64>>>()
            .and_then(|v| v.into_iter().reduce(f64::max)),
        perplexity: all(these.iter().map(|a| a.perplexity).collect()),
        prefill_mj: all(these.iter().map(|a| a.prefill).collect()),
        flags: {
            let mut codes: Vec<(String, usize)> = Vec::new();
            for code in these.iter().flat_map(|a| a.flags.iter()) {
                match codes.iter_mut().find(|(c, _)| c == code) {
                    Some(c) => c.1 += 1,
                    None => codes.push((code.to_string(), 1)),
                }
            }
            codes
        },
    })
}

/// The SD over runs of each run's ΔE vs the FP16 arm of the same run, in percentage points;
/// `None` for the FP16 row, below two runs, or when a run has no FP16 arm (then no pairing).
fn paired_delta_sd_pct(key: &ConfigKey, these: &[&RunArm], fp16: &[&RunArm]) -> Option<f64> {
    if key.precision == Precision::Fp16 || these.len() < 2 {
        return None;
    }
    let deltas: Vec<f64> = these
        .iter()
        .map(|a| {
            let f = fp16.iter().find(|f| f.run == a.run)?;
            (f.energy > 0.0).then(|| (a.energy / f.energy - 1.0) * 100.0)
        })
        .collect::<Option<_>>()?;
    analysis::stats::sample_sd(&deltas)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// A committed H200 report (Qwen2-7B Q4_K with its FP16 arm), as JSON to edit.
    fn committed() -> Value {
        serde_json::from_str(include_str!(
            "../../../data/measurements/h200/raw/qwen2-7b_b1_r1_Q4_K.json"
        ))
        .unwrap()
    }

    /// A run of the committed report: its own time stamp (so its own run), session, node, engine.
    fn run(i: u32, session: Option<&str>, node: &str, engine: &str) -> Value {
        run_of(committed(), i, session, node, engine)
    }

    /// `v` made run `i` (as [`run`] does to the committed Q4_K report).
    fn run_of(mut v: Value, i: u32, session: Option<&str>, node: &str, engine: &str) -> Value {
        v["timestamp_utc"] = json!(format!("2026-12-01T00:00:{i:02}Z"));
        v["stack"]["engine"] = json!(engine);
        v["environment"]["slurm"] = json!({"job_id": format!("{i}"), "node": node});
        if let Some(s) = session {
            v["protocol"]["session"] = json!(s);
        }
        v
    }

    fn dir_of(tag: &str, reports: &[Value]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("qe-campaign-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (i, r) in reports.iter().enumerate() {
            std::fs::write(dir.join(format!("r{i}.json")), r.to_string()).unwrap();
        }
        dir
    }

    fn q4k(rows: &[AnchorRow]) -> Vec<&AnchorRow> {
        rows.iter()
            .filter(|r| r.precision == Precision::Q4K)
            .collect()
    }

    #[test]
    fn runs_of_one_session_and_stack_pool_and_count_their_nodes() {
        let dir = dir_of(
            "pool",
            &[
                run(1, Some("s1"), "node-a", "candle"),
                run(2, Some("s1"), "node-b", "candle"),
                run(3, Some("s1"), "node-b", "candle"),
            ],
        );
        let agg = aggregate_anchors(&dir, true).unwrap();
        let rows = q4k(&agg.rows);
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!((rows[0].n, rows[0].nodes, rows[0].cards), (3, 2, 1));
        assert_eq!(rows[0].session.as_deref(), Some("s1"));
        assert_eq!(
            rows[0].stack,
            "candle 0.11.1 GGUF/cuBLAS kernels, CUDA 13.0, synthetic weights"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Runs of one configuration measured by two meter builds are refused, naming both; one build
    /// (or reports that name none) pools.
    #[test]
    fn runs_of_two_meter_builds_never_pool() {
        let built = |i: u32, b: &str| {
            let mut v = run(i, Some("s1"), "node-a", "candle");
            v["stack"]["meter_build"] = json!(b);
            v
        };
        let dir = dir_of("builds", &[built(1, "0.1.0+aaa"), built(2, "0.1.0+bbb")]);
        let e = aggregate_anchors(&dir, true).unwrap_err().to_string();
        assert!(e.contains("0.1.0+aaa, 0.1.0+bbb"), "{e}");
        let same = dir_of("one-build", &[built(1, "0.1.0+aaa"), built(2, "0.1.0+aaa")]);
        assert_eq!(q4k(&aggregate_anchors(&same, true).unwrap().rows)[0].n, 2);
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&same);
    }

    /// A server started with a quantized KV cache is its own stack, named in the label.
    #[test]
    fn a_quantized_kv_cache_is_named_in_the_stack() {
        let cmd = "llama-server -m m.gguf -ngl 999 -fa on";
        assert_eq!(kv_cache_of(cmd), None);
        assert_eq!(
            kv_cache_of(&format!("{cmd} -ctk q8_0 -ctv q8_0")).as_deref(),
            Some("KV cache q8_0")
        );
        assert_eq!(
            kv_cache_of(&format!("{cmd} --cache-type-k q4_0")).as_deref(),
            Some("KV cache K q4_0 / V f16")
        );
    }

    /// Runs at different context depths are different configurations, each with the FP16 arm
    /// of its own depth; the markdown table names the depth. Their anchors lines carry the depth
    /// and the prefill (mean over the runs, from each arm's own report), are checks (role
    /// `check`, never a default curve), and parse into the dataset's context rows, not its
    /// anchors.
    #[test]
    fn context_runs_are_kept_apart_by_depth_and_written_as_check_rows() {
        let at = |i: u32, depth: Option<u32>| {
            let mut v = run(i, Some("s1"), "node-a", "candle");
            if let Some(d) = depth {
                v["workload"]["context_depth"] = json!(d);
                v["results"]["prefill"] = json!({
                    "energy_per_prompt_token_mj": 10.0 + f64::from(i),
                    "prompt_tokens": 40 * d, "prefills": 40, "window_seconds": 5.1,
                    "counter_joules": 0.04 * f64::from(d) * (10.0 + f64::from(i)),
                    "time_to_first_token_ms": 120.0
                });
            }
            v
        };
        let dir = dir_of(
            "context",
            &[
                at(1, Some(1024)),
                at(2, Some(4096)),
                at(3, Some(4096)),
                at(4, None),
            ],
        );
        let agg = aggregate_anchors(&dir, true).unwrap();
        let rows = q4k(&agg.rows);
        let depths: Vec<(Option<u32>, usize, Option<f64>)> = rows
            .iter()
            .map(|r| (r.context_depth, r.n, r.prefill_mj))
            .collect();
        assert_eq!(depths.len(), 3, "{depths:?}");
        // 4096: runs 2 and 3, prefills 12 and 13 mJ.
        for want in [
            (Some(1024), 1, Some(11.0)),
            (Some(4096), 2, Some(12.5)),
            (None, 1, None),
        ] {
            assert!(depths.contains(&want), "{want:?} in {depths:?}");
        }
        let targets = CampaignTargets::default();
        assert!(markdown_table(&agg.rows, &targets).contains("(context 4096)"));
        let prov = Provenance {
            stack: None,
            session: None,
            source: "test".into(),
            not_curve: None,
        };
        let lines = anchors_csv(&agg.rows, &prov, &targets).unwrap();
        let header = analysis::dataset::ANCHORS_CSV.lines().next().unwrap();
        let ds =
            analysis::Dataset::parse(&format!("{header}\n{lines}"), analysis::dataset::GPUS_CSV)
                .unwrap();
        let with_depth = agg
            .rows
            .iter()
            .filter(|r| r.context_depth.is_some())
            .count();
        assert_eq!(
            (ds.context.len(), ds.anchors.len()),
            (with_depth, agg.rows.len() - with_depth)
        );
        assert!(with_depth >= 4, "{with_depth}");
        for c in &ds.context {
            assert!(c.check && !c.default_curve, "{c:?}");
            assert!(
                c.curve_note.contains("context run at depth"),
                "{}",
                c.curve_note
            );
        }
        let deep = ds
            .context
            .iter()
            .find(|c| c.context_depth == Some(4096) && c.precision == Precision::Q4K)
            .unwrap();
        assert_eq!((deep.n, deep.prefill_mj), (Some(2), Some(12.5)));
        assert!(ds
            .anchors
            .iter()
            .all(|a| a.context_depth.is_none() && !a.check));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A card or hour that makes every arm of a run dearer (here ±10 %) is run-to-run spread
    /// (CV) but cancels in that run's own ΔE: the row carries the SD of those paired ΔE.
    #[test]
    fn the_delta_spread_is_over_each_runs_own_fp16_arm() {
        let scaled = |i: u32, all: f64, q4k: f64| {
            let mut v = run(i, Some("s1"), "node-a", "candle");
            for arm in v["protocol"]["arms"].as_array_mut().unwrap() {
                let f = if arm["precision"] == "Q4_K" {
                    all * q4k
                } else {
                    all
                };
                let e = arm["energy_per_token_mj"].as_f64().unwrap();
                arm["energy_per_token_mj"] = json!(e * f);
            }
            v
        };
        let dir = dir_of(
            "paired",
            &[
                scaled(1, 1.0, 1.0),
                scaled(2, 1.1, 1.0),
                scaled(3, 0.9, 1.02),
            ],
        );
        let agg = aggregate_anchors(&dir, true).unwrap();
        let (q, f) = (
            q4k(&agg.rows)[0],
            agg.rows.iter().find(|r| r.is_fp16()).unwrap(),
        );
        // The committed run: Q4_K 2296.639, FP16 3217.65 mJ/token.
        let d = (2296.639 / 3217.65 - 1.0) * 100.0;
        let d3 = (2296.639 * 1.02 / 3217.65 - 1.0) * 100.0;
        let want = analysis::stats::sample_sd(&[d, d, d3]).unwrap();
        assert!((q.paired_delta_sd_pct.unwrap() - want).abs() < 1e-9);
        assert!(
            q.cv_pct > 9.0 && want < 1.0,
            "CV {} vs paired SD {want}",
            q.cv_pct
        );
        assert_eq!(f.paired_delta_sd_pct, None, "FP16 has no ΔE");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Pairing is per run: a run whose Q4_K arm failed adds to FP16's n, not to Q4_K's SD; a run
    /// whose FP16 arm failed leaves Q4_K with no pairing, hence no SD (the row keeps the unpaired
    /// interval) rather than one over fewer runs than its n.
    #[test]
    fn the_delta_spread_pairs_only_arms_of_the_same_run() {
        // The same run's Q8_0 report, whose own arm ran: it lists the failed arm with the others.
        let failing = |i: u32, precision: &str| {
            let q8: Value = serde_json::from_str(include_str!(
                "../../../data/measurements/h200/raw/qwen2-7b_b1_r1_Q8_0.json"
            ))
            .unwrap();
            let mut v = run_of(q8, i, Some("s1"), "node-a", "candle");
            for arm in v["protocol"]["arms"].as_array_mut().unwrap() {
                if arm["precision"] == precision {
                    arm["status"] = json!("failed");
                    arm["error"] = json!("out of memory");
                }
            }
            if precision == "FP16" {
                v["results"]["fp16_energy_per_token_mj"] = Value::Null;
                v["results"]["vs_fp16_energy_pct"] = Value::Null;
            }
            v
        };
        let plain = |i: u32| run(i, Some("s1"), "node-a", "candle");
        let dir = dir_of("pairing", &[plain(1), plain(2), failing(3, "Q4_K")]);
        let agg = aggregate_anchors(&dir, true).unwrap();
        let (q, f) = (
            q4k(&agg.rows)[0],
            agg.rows.iter().find(|r| r.is_fp16()).unwrap(),
        );
        assert_eq!((q.n, f.n), (2, 3), "FP16 pools the run whose Q4_K failed");
        // Runs 1 and 2 are the same report: their own ΔE agree exactly.
        assert!(q.paired_delta_sd_pct.unwrap().abs() < 1e-9);
        let _ = std::fs::remove_dir_all(&dir);

        let dir = dir_of("unpaired", &[plain(1), plain(2), failing(3, "FP16")]);
        let agg = aggregate_anchors(&dir, true).unwrap();
        let q = q4k(&agg.rows)[0];
        assert_eq!(q.n, 3);
        assert_eq!(
            q.paired_delta_sd_pct, None,
            "run 3 has no FP16 arm to pair with"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn sessions_and_stacks_are_never_pooled() {
        let dir = dir_of(
            "apart",
            &[
                run(1, Some("s1"), "n", "candle"),
                run(2, Some("s2"), "n", "candle"),
                run(3, Some("s1"), "n", "llama.cpp"),
            ],
        );
        let agg = aggregate_anchors(&dir, true).unwrap();
        let rows = q4k(&agg.rows);
        assert_eq!(rows.len(), 3, "{rows:?}");
        assert!(rows.iter().all(|r| r.n == 1));
        let llama = rows
            .iter()
            .find(|r| r.stack.starts_with("llama.cpp"))
            .unwrap();
        assert_eq!(llama.model, "Qwen2-7B [llama.cpp]");
        // Every row keeps its own FP16 baseline: the same run's.
        for r in &agg.rows {
            assert!(r.fp16_mj > 0.0);
        }
        // One --stack label over two stacks, or a --session that contradicts the reports: refused.
        let prov = |stack: Option<&str>, session: Option<&str>| Provenance {
            stack: stack.map(str::to_string),
            session: session.map(str::to_string),
            source: "test".into(),
            not_curve: None,
        };
        let e = prov(Some("one label"), None).check(&agg.rows).unwrap_err();
        assert!(e.contains("2 stacks"), "{e}");
        let e = prov(None, Some("s1")).check(&agg.rows).unwrap_err();
        assert!(
            e.contains("\"s2\"") && e.contains("never relabelled"),
            "{e}"
        );
        assert!(prov(None, None).check(&agg.rows).is_ok());
        let csv = anchors_csv(&agg.rows, &prov(None, None), &CampaignTargets::default()).unwrap();
        assert!(csv.lines().any(|l| l.contains(",s2,")), "{csv}");
        assert!(
            csv.lines().any(|l| l.contains("llama.cpp campaign")),
            "{csv}"
        );
        // Rows that check the method feed no curve, and say why first.
        let check = Provenance {
            not_curve: Some("a real model beside its synthetic twin".into()),
            ..prov(None, None)
        };
        let csv = anchors_csv(&agg.rows, &check, &CampaignTargets::default()).unwrap();
        let rows: Vec<AnchorsCsvRow> = agg
            .rows
            .iter()
            .map(|r| AnchorsCsvRow::of(r, &check, &CampaignTargets::default()))
            .collect();
        assert!(
            rows.iter()
                .all(|r| r.default_curve == 0 && r.role == "check"),
            "{csv}"
        );
        assert!(rows.iter().all(|r| r
            .curve_note
            .starts_with("not a curve anchor: a real model beside its synthetic twin; ")));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn reports_without_a_session_need_one_from_the_command_line() {
        let dir = dir_of("nosession", &[run(1, None, "n", "candle")]);
        let agg = aggregate_anchors(&dir, true).unwrap();
        let none = Provenance {
            stack: None,
            session: None,
            source: "t".into(),
            not_curve: None,
        };
        assert!(none
            .check(&agg.rows)
            .unwrap_err()
            .contains("pass --session"));
        let given = Provenance {
            session: Some("h200-2026-11-30".into()),
            ..none
        };
        assert!(given.check(&agg.rows).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn prompt_set_runs_pool_apart_from_decodes() {
        let mut served = run(3, Some("s1"), "n", "candle");
        served["workload"]["prompt_set"] = json!({"name": "set", "sha256": "ab".repeat(32),
            "prompts": 2, "prompt_tokens": 500, "output_tokens": 30, "token_counts": "Qwen2"});
        served["results"]["prefill"] = json!({"energy_per_prompt_token_mj": 3.0, "prompt_tokens": 500,
            "prefills": 2, "window_seconds": 5.0, "counter_joules": 1.5, "time_to_first_token_ms": 20.0});
        served["results"]["requests"] = json!({"requests": 4, "passes": 2,
            "energy_per_request_joules": 9.0, "prompt_tokens": 1000, "time_to_first_token_p90_ms": 30.0});
        let dir = dir_of(
            "prompt-sets",
            &[
                run(1, Some("s1"), "n", "candle"),
                run(2, Some("s1"), "n", "candle"),
                served,
            ],
        );
        let agg = aggregate_anchors(&dir, true).unwrap();
        assert_eq!((agg.prompt_sets, agg.invalid), (1, 0), "{agg:?}");
        assert_eq!(q4k(&agg.rows)[0].n, 2);
        // The prompt-set run is a row of its own, for the table only.
        let set = q4k(&agg.prompt_set_rows);
        assert_eq!((set.len(), set[0].n), (1, 1));
        assert_eq!(set[0].prompt_set.as_deref(), Some("set (abababababab)"));
        let table = markdown_table(&agg.prompt_set_rows, &CampaignTargets::default());
        assert!(
            table.contains("(prompt set set (abababababab), end to end)"),
            "{table}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn estimates_and_failed_jobs_never_contribute_a_figure() {
        let mut estimate = run(1, Some("s1"), "n", "candle");
        estimate["results"]["basis"] = json!("interpolated");
        let failed_job = crate::plan::with_kind(Path::new("x.json"), ".failed");
        assert_eq!(failed_job, Path::new("x.failed.json"));
        let mut failed = meter::fallback::unmeasured_report(
            "unknown",
            "Qwen2-7B",
            Some(7.6),
            Precision::Q4K,
            (1, 272),
        );
        failed.protocol = Some(report::Protocol {
            arms: Some(vec![report::Arm::failed("Q4_K", "exit status 1")]),
            ..Default::default()
        });
        let dir = dir_of(
            "estimates",
            &[
                estimate,
                serde_json::to_value(&failed).unwrap(),
                json!({"not": "a report"}),
            ],
        );
        let agg = aggregate_anchors(&dir, true).unwrap();
        assert!(agg.rows.is_empty(), "{:?}", agg.rows);
        assert_eq!(agg.failed, 1);
        // The re-labelled committed report is either read as an estimate or refused as
        // inconsistent; either way it is not pooled.
        assert_eq!(agg.estimates + agg.invalid, 2, "{agg:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
