//! An estimate as an `energy.json` report (basis interpolated / extrapolated / unavailable — never
//! measured: nothing here touched a GPU).

use crate::estimate::Estimate;
use report::Report;
use serde_json::json;

/// Build a schema-valid report for an estimate. `gpu` is the card name to put in
/// `system_under_test.gpu` (the estimate itself only knows the architecture).
pub fn estimate_report(e: &Estimate, gpu: &str, model_name: &str) -> Report {
    let r = |v: Option<f64>, dp: i32| v.map(|x| (x * 10f64.powi(dp)).round() / 10f64.powi(dp));
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
    let value = json!({
        "schema_version": report::SCHEMA_VERSION,
        "benchmark": "quantenergy-estimate",
        "certified_benchmark_result": false,
        "scenario": if e.input.batch <= 1 { "SingleStream" } else { "Offline" },
        "system_under_test": {
            "gpu": gpu,
            "gpu_arch": e.input.arch,
            "accelerator_count": 1
        },
        "workload": {
            "model_name": model_name,
            "params_b": e.input.params_b,
            "precision": e.input.precision,
            "batch_size": e.input.batch.max(1),
            "context_length": e.input.context
        },
        "measurement": {
            "method": "reference estimate from published dataset (no on-device measurement)",
            "sample_rate_hz": 0
        },
        "measurement_source": "quantenergy embedded dataset (no on-device measurement)",
        "results": {
            "energy_per_token_mj": r(e.energy_mj, 2),
            "fp16_energy_per_token_mj": r(e.fp16_energy_mj, 2),
            "vs_fp16_energy_pct": r(e.delta_pct, 2),
            "basis": e.basis.as_str(),
            "note": note
        },
        "estimate": {
            "class": e.class,
            "borrowed_from": e.borrowed_from,
            "ci95_low_pct": r(e.ci_low, 2),
            "ci95_high_pct": r(e.ci_high, 2),
            "sigma_pct": r(e.sigma, 2),
            "confidence": e.confidence.as_str(),
            "class_points": e.class_points,
            "batch_context_factor": r(Some(e.batch_context_factor), 4)
        }
    });
    serde_json::from_value(value).expect("the estimate report is built from typed fields")
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
                    arch: arch.into(),
                    params_b: n,
                    precision: p.into(),
                    batch: 1,
                    context: 2048,
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
