//! An estimate as an `energy.json` report (basis interpolated / extrapolated / unavailable — never
//! measured: nothing here touched a GPU).

use crate::class::ClassId;
use crate::estimate::Estimate;
use report::{Arch, Extra, Measurement, Report, Results, SystemUnderTest, Workload};
use serde::Serialize;
use serde_json::Value;

/// Build a schema-valid report for an estimate. `gpu` is the card name to put in
/// `system_under_test.gpu` (the estimate itself only knows the architecture).
pub fn estimate_report(e: &Estimate, gpu: &str, model_name: &str) -> Report {
    let mut note = match (&e.class, e.delta_pct) {
        (Some(class), Some(_)) => format!(
            "Dataset-derived estimate from the {class} crossover curve ({} anchors), not an on-device measurement. 95% CI {:+.1}% to {:+.1}%, confidence {}.",
            e.class_points,
            e.ci_low.unwrap_or(f64::NAN),
            e.ci_high.unwrap_or(f64::NAN),
            e.confidence.as_str()
        ),
        _ => "No estimate: no published curve covers this architecture and precision.".to_string(),
    };
    for n in &e.notes {
        note.push(' ');
        note.push_str(n);
        note.push('.');
    }
    let mut extra = Extra::new();
    extra.insert("certified_benchmark_result".into(), Value::Bool(false));
    let mut estimate = Extra::new();
    estimate.insert("estimate".into(), estimate_block(e));
    Report {
        schema_version: report::SCHEMA_VERSION.to_string(),
        benchmark: "quantenergy-estimate".into(),
        scenario: if e.input.batch <= 1 {
            "SingleStream"
        } else {
            "Offline"
        }
        .into(),
        timestamp_utc: None,
        system_under_test: SystemUnderTest {
            gpu: gpu.to_string(),
            gpu_arch: e.input.arch.as_str().to_string(),
            accelerator_count: 1,
            host: None,
            extra: Extra::new(),
        },
        workload: Workload {
            model_name: model_name.to_string(),
            params_b: Some(e.input.params_b).filter(|x| x.is_finite()),
            precision: e.input.precision.as_str().to_string(),
            batch_size: e.input.batch.max(1),
            context_length: Some(e.input.context),
            context_depth: None,
            prompt_set: None,
            extra: Extra::new(),
        },
        measurement: Measurement {
            method: "reference estimate from published dataset (no on-device measurement)".into(),
            sample_rate_hz: 0,
            tokens_per_run: None,
            iterations: None,
            warmup: None,
            extra: Extra::new(),
        },
        measurement_source: Some("quantenergy embedded dataset (no on-device measurement)".into()),
        results: Results {
            total_energy_joules: None,
            tokens_generated: None,
            energy_per_token_mj: round(e.energy_mj, 2),
            fp16_energy_per_token_mj: round(e.fp16_energy_mj, 2),
            vs_fp16_energy_pct: round(e.delta_pct, 2),
            avg_power_watts: None,
            throughput_tokens_per_s: None,
            basis: e.basis,
            note: Some(note),
            prefill: None,
            requests: None,
            extra: Extra::new(),
        },
        quality: None,
        stack: None,
        energy: None,
        protocol: None,
        environment: None,
        weights: None,
        validity: None,
        extra: extra.into_iter().chain(estimate).collect(),
    }
}

/// `x` rounded to `dp` decimals (a non-finite value is dropped, as JSON cannot hold it).
fn round(v: Option<f64>, dp: i32) -> Option<f64> {
    v.map(|x| (x * 10f64.powi(dp)).round() / 10f64.powi(dp))
        .filter(|x| x.is_finite())
}

/// The `estimate` extension block: the class, its interval and confidence.
fn estimate_block(e: &Estimate) -> Value {
    #[derive(Serialize)]
    struct Block {
        class: Option<ClassId>,
        borrowed_from: Option<Arch>,
        ci95_low_pct: Option<f64>,
        ci95_high_pct: Option<f64>,
        sigma_pct: Option<f64>,
        confidence: &'static str,
        class_points: usize,
        batch_context_factor: Option<f64>,
    }
    serde_json::to_value(Block {
        class: e.class,
        borrowed_from: e.borrowed_from,
        ci95_low_pct: round(e.ci_low, 2),
        ci95_high_pct: round(e.ci_high, 2),
        sigma_pct: round(e.sigma, 2),
        confidence: e.confidence.as_str(),
        class_points: e.class_points,
        batch_context_factor: round(Some(e.batch_context_factor), 4),
    })
    .unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{default_classes, estimate, Dataset, EstimateInput};

    #[test]
    fn estimate_reports_validate_and_never_say_measured() {
        for (arch, n, p) in [
            ("ada", 3.0, "NF4"),
            ("hopper", 7.0, "INT8"),
            ("ada", 7.0, "Q4_K"),
            ("turing", 7.0, "FP16"),
        ] {
            let e = estimate(
                Dataset::embedded(),
                default_classes(),
                &EstimateInput {
                    arch: arch.parse().unwrap(),
                    params_b: n,
                    precision: p.parse().unwrap(),
                    batch: 1,
                    context: 2048,
                    engine: None,
                },
            );
            let rep = estimate_report(&e, "RTX 4090", "my-model");
            let text = serde_json::to_string(&rep).unwrap();
            let v = report::validate_str(&text);
            assert!(v.errors.is_empty(), "{arch} {p}: {:?}", v.errors);
            assert_ne!(rep.results.basis, report::Basis::Measured);
        }
    }
}
