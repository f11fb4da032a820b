//! No GPU to measure: the dataset estimate for each arm, labelled as such with the reason, or a
//! report that says there is no figure. Shared by the candle path and the server path.

use crate::error::Result;
use crate::files::{report_path, utc_now, write_report};
use crate::protocol::ProtocolConfig;
use report::Precision;
use std::path::{Path, PathBuf};

/// What `measure` produced.
pub struct MeasureResult {
    /// The reports written, with their paths.
    pub reports: Vec<(PathBuf, report::Report)>,
    /// Whether any report was measured (false: all are the labelled no-GPU estimate).
    pub measured: bool,
}

/// Where the estimates go and what they are of.
pub struct EstimateTarget<'a> {
    /// Output directory.
    pub out: &'a Path,
    /// The card to estimate for (`--card`); `None`: no figure at all.
    pub card: Option<&'a str>,
    /// The model's name.
    pub model_name: &'a str,
    /// Each arm: its precision and the model's size, billions of parameters.
    pub arms: &'a [(Precision, f64)],
    /// The run's `--name` (a sweep job's stem), as for its measured reports.
    pub name: Option<&'a str>,
    /// Added to the default stem (`_server` for the server path).
    pub suffix: &'a str,
}

/// Write one labelled estimate per arm (`<stem>.estimate.json`): the embedded dataset's estimate
/// for the named card, or a report with no figure when no card is named. `reason` says why
/// nothing was measured and goes into every report.
pub fn estimate_reports(
    t: &EstimateTarget,
    cfg: &ProtocolConfig,
    reason: &str,
) -> Result<MeasureResult> {
    tracing::warn!("no measurement possible: {reason}");
    let mut reports = Vec::new();
    for &(p, params_b) in t.arms {
        let mut rep = estimate_report(t.card, t.model_name, (p, params_b), cfg, reason);
        let path = report_path(
            t.out,
            t.name,
            t.arms.len() > 1,
            (t.model_name, p, cfg.batch),
            t.suffix,
            ".estimate",
        );
        write_report(&path, &mut rep)?;
        reports.push((path, rep));
    }
    Ok(MeasureResult {
        reports,
        measured: false,
    })
}

/// One arm's labelled estimate, in memory: the embedded dataset's for `card`, or a report with
/// no figure when no card is named (or its architecture is unknown). `reason` says why nothing
/// was measured.
pub fn estimate_report(
    card: Option<&str>,
    model_name: &str,
    (p, params_b): (report::Precision, f64),
    cfg: &ProtocolConfig,
    reason: &str,
) -> report::Report {
    let gpu = card.unwrap_or("no GPU detected").to_string();
    let mut rep = match card.and_then(report::arch_from_gpu_name) {
        // Its figures are the requests' end to end, each prompt's prefill included: the
        // estimator models the decode alone, so there is nothing to estimate.
        _ if cfg.prompts.is_some() => {
            let mut rep = no_card_report(&gpu, model_name, params_b, p, cfg);
            rep.measurement.method = "none: nothing was run".into();
            rep.results.note = Some(
                "No estimate: a prompt-set run's energy per output token includes every prompt's \
                 prefill, which the estimator does not model."
                    .into(),
            );
            rep
        }
        Some(arch) => {
            let input = analysis::EstimateInput {
                arch,
                params_b,
                precision: p,
                batch: cfg.batch as u32,
                context: (cfg.prompt_tokens() + cfg.tokens) as u32,
                engine: None,
            };
            let e = input.estimate_embedded();
            analysis::estimate_report(&e, &gpu, model_name)
        }
        None => no_card_report(&gpu, model_name, params_b, p, cfg),
    };
    let note = rep.results.note.take().unwrap_or_default();
    rep.results.note = Some(format!("Not measured: {reason}. {note}"));
    if let Some(set) = &cfg.prompts {
        rep.workload.prompt_set = Some(set.report_ref());
        rep.workload.context_length = Some(cfg.capacity() as u32);
    }
    // A sweep's session labels every report its jobs write, estimates too (aggregate counts
    // and skips them per session).
    if let Some(s) = &cfg.session {
        rep.protocol.get_or_insert_with(Default::default).session = Some(s.clone());
    }
    rep.measurement_source = Some(format!(
        "quantenergy embedded dataset (no on-device measurement: {reason})"
    ));
    if cfg.perplexity.is_some() {
        rep.quality = Some(report::Quality {
            metric: "perplexity".into(),
            basis: "unavailable".into(),
            error: Some(format!("not scored: nothing was run ({reason})")),
            ..Default::default()
        });
    }
    rep
}

/// No GPU and no card named to estimate for: a report that says so, with no figure.
pub fn no_card_report(
    gpu: &str,
    model_name: &str,
    params_b: f64,
    precision: report::Precision,
    cfg: &ProtocolConfig,
) -> report::Report {
    let mut rep = unmeasured_report(
        gpu,
        model_name,
        Some(params_b),
        precision,
        (cfg.batch, cfg.prompt_tokens() + cfg.tokens),
    );
    rep.benchmark = "quantenergy-estimate".into();
    rep.measurement.method = "none: no GPU to measure and no card named to estimate for".into();
    rep.results.note = Some(
        "No estimate: pass --gpu NAME (e.g. --gpu \"RTX 4090\") to estimate for a card.".into(),
    );
    rep
}

/// A report with no figure (basis `unavailable`) for `model` at `precision`, `(batch,
/// context)`: the skeleton of the no-card report and of a failed sweep job's report.
pub fn unmeasured_report(
    gpu: &str,
    model_name: &str,
    params_b: Option<f64>,
    precision: report::Precision,
    (batch, context): (usize, usize),
) -> report::Report {
    report::Report {
        schema_version: report::SCHEMA_VERSION.into(),
        benchmark: "quantenergy-estimate".into(),
        scenario: if batch <= 1 {
            "SingleStream"
        } else {
            "Offline"
        }
        .into(),
        timestamp_utc: Some(utc_now()),
        system_under_test: report::SystemUnderTest {
            gpu: gpu.into(),
            gpu_arch: "unknown".into(),
            accelerator_count: 1,
            host: None,
            extra: Default::default(),
        },
        workload: report::Workload {
            model_name: model_name.into(),
            params_b,
            precision: precision.as_str().into(),
            batch_size: batch as u32,
            context_length: Some(context as u32),
            context_depth: None,
            prompt_set: None,
            extra: Default::default(),
        },
        measurement: report::Measurement {
            method: "none".into(),
            sample_rate_hz: 0,
            tokens_per_run: None,
            iterations: None,
            warmup: None,
            extra: Default::default(),
        },
        measurement_source: None,
        results: report::Results {
            total_energy_joules: None,
            tokens_generated: None,
            energy_per_token_mj: None,
            fp16_energy_per_token_mj: None,
            vs_fp16_energy_pct: None,
            avg_power_watts: None,
            throughput_tokens_per_s: None,
            basis: report::Basis::Unavailable,
            note: None,
            prefill: None,
            requests: None,
            extra: Default::default(),
        },
        quality: None,
        stack: None,
        energy: None,
        protocol: None,
        environment: None,
        weights: None,
        validity: None,
        extra: Default::default(),
    }
}
