//! Turn a protocol [`Outcome`] into an `energy.json` report, and write it atomically.

use crate::candle_decoder::{parse_precision, Precision};
use crate::protocol::{ArmMeasurement, Outcome, ProtocolConfig};
use anyhow::{bail, Context, Result};
use report::Report;
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;

/// What the report says about the weights.
#[derive(Debug, Clone)]
pub enum WeightsInfo {
    Synthetic {
        architecture: String,
        seed: u64,
        /// Quantized arms are the float arms' weights, quantized (`quantize_synthetic_floats`),
        /// rather than their own random blocks: only then is a perplexity Δ between arms a Δ.
        quantized_from_float: bool,
    },
    Real {
        path: String,
        files: Vec<(String, String, u64)>,
    },
}

#[derive(Debug, Clone)]
pub struct RunContext {
    pub model_name: String,
    pub params_b: f64,
    pub weights: WeightsInfo,
    pub engine_version: String,
    pub timestamp_utc: String,
    pub host: String,
}

/// Our report's precision name for an engine precision (`F16` → `FP16`).
pub fn report_precision(p: &str) -> String {
    match p.to_ascii_uppercase().as_str() {
        "F16" => "FP16".into(),
        "F32" => "FP32".into(),
        other => other.to_string(),
    }
}

fn r(v: f64, dp: i32) -> f64 {
    let m = 10f64.powi(dp);
    (v * m).round() / m
}

fn arm_json(precision: &str, m: &Result<ArmMeasurement, String>) -> Value {
    match m {
        Err(e) => json!({"precision": report_precision(precision), "status": "failed", "error": e}),
        Ok(a) => {
            let trace = a.trace.as_ref();
            json!({
                "precision": report_precision(precision),
                "status": "ok",
                "energy_per_token_mj": r(a.mj_per_token(), 3),
                "trace_energy_per_token_mj": a.trace_mj_per_token().map(|v| r(v, 3)),
                "counter_joules": r(a.counter_j, 3),
                "trace_joules": a.trace_j().map(|v| r(v, 3)),
                "counter_over_trace_ratio": a.trace_j().filter(|t| *t > 0.0).map(|t| r(a.counter_j / t, 4)),
                "throughput_tokens_per_s": r(a.tok_s(), 3),
                "avg_power_watts": r(a.avg_power_w(), 2),
                "window_seconds": r(a.window_s, 4),
                "tokens_generated": a.tokens_generated,
                "samples": trace.map(|t| t.samples.len()),
                "failed_reads": trace.map(|t| t.failed_reads),
                "achieved_sample_rate_hz": trace.map(|t| r(t.achieved_hz, 2)),
                "iteration_seconds": a.iteration_s.iter().map(|t| r(*t, 5)).collect::<Vec<_>>(),
                "iteration_time_cv_pct": a.iteration_cv_pct().map(|v| r(v, 3)),
                "load_seconds": r(a.load_s, 3),
                "host_cpu_steal_pct": a.host.map(|h| r(h.steal_pct, 3)),
                "process_cpu_cores": a.host.map(|h| r(h.process_cpu_cores, 3)),
                "kernel": a.kernel,
                "notes": a.notes,
                "cooldown": {
                    "target_power_watts": r(a.cooldown.target_power_w, 2),
                    "target_temp_c": if a.cooldown.target_temp_c.is_finite() { Some(r(a.cooldown.target_temp_c, 1)) } else { None },
                    "converged": a.cooldown.converged,
                    "seconds": r(a.cooldown.seconds, 2),
                },
                "temperature_start_c": a.temp_start_c,
                "temperature_end_c": a.temp_end_c,
                "perplexity": a.perplexity.as_ref().map(|p| match p {
                    Ok(s) => json!({"value": r(s.perplexity(), 4), "mean_nll": r(s.mean_nll, 6), "tokens_evaluated": s.tokens_evaluated}),
                    Err(e) => json!({"error": e}),
                }),
            })
        }
    }
}

/// The report's `quality` block: the requested arm's perplexity and its Δ vs the FP16 arm of the
/// same run. `measured` only when the requested arm was scored; Δ only when both were.
fn quality_json(
    cfg: &ProtocolConfig,
    out: &Outcome,
    precision: &str,
    requested: &Result<ArmMeasurement, String>,
    baseline: Option<&Result<ArmMeasurement, String>>,
    weights: &WeightsInfo,
) -> Option<Value> {
    let (p, tokens) = cfg.perplexity.as_ref().zip(out.perplexity.as_ref())?;
    let sha256 = p.sha256();
    let how = tokens.as_ref().ok().map(|t| t.how.as_str());
    let score = |m: &Result<ArmMeasurement, String>| match m {
        Ok(a) => a
            .perplexity
            .clone()
            .unwrap_or_else(|| Err("not scored".into())),
        Err(e) => Err(format!("the arm failed ({e})")),
    };
    let mine = score(requested);
    let mut base = baseline.map(score);
    // Synthetic quantized arms normally draw their own random blocks: a different model from the
    // FP16 arm, so no Δ unless they were quantized from the float arms' weights.
    let synthetic = matches!(weights, WeightsInfo::Synthetic { .. });
    let independent = matches!(
        weights,
        WeightsInfo::Synthetic {
            quantized_from_float: false,
            ..
        }
    ) && !matches!(parse_precision(precision), Ok(Precision::Float(_)));
    if independent && base.is_some() {
        base = Some(Err(
            "the quantized arm's synthetic weights were drawn independently of the \
                         FP16 arm's, so their perplexities are not comparable"
                .into(),
        ));
    }
    let corpus = json!({"name": p.corpus_name, "bytes": p.text.len(), "sha256": sha256});
    let mut note = format!(
        "Teacher-forced perplexity on {} (sha256 {}…), tokenized as {}, in windows of {} tokens, \
         scored after the energy window closed. Not comparable with published WikiText figures.",
        p.corpus_name,
        &sha256[..12],
        how.unwrap_or("—"),
        p.seq_len
    );
    if synthetic {
        note.push_str(
            " Synthetic weights: random weights predict nothing (perplexity near the vocabulary \
             size), so the value means nothing by itself; a Δ vs FP16 measures only the numerical \
             error of this precision on the same weights: its size, not its sign (noise can lower \
             the perplexity of a model that predicts nothing).",
        );
    }
    // What the arm itself had to say (e.g. tensors that fell back to Q8_0) belongs next to its Δ.
    if let Some(a) = requested.as_ref().ok().filter(|a| !a.notes.is_empty()) {
        note.push_str(&format!(" This arm: {}", a.notes.join("; ")));
    }
    Some(match mine {
        Err(e) => json!({
            "metric": "perplexity", "basis": "unavailable", "error": e,
            "corpus": corpus, "seq_len": p.seq_len, "max_tokens": p.max_tokens,
            "tokenization": how, "note": note
        }),
        Ok(s) => {
            let (fp16, delta, delta_note) = match &base {
                // ppl_q / ppl_b − 1 from the NLL difference: finite even where either
                // perplexity alone would be huge.
                Some(Ok(b)) => (
                    Some(r(b.perplexity(), 4)),
                    Some(r(((s.mean_nll - b.mean_nll).exp() - 1.0) * 100.0, 3)),
                    None,
                ),
                Some(Err(e)) => (None, None, Some(format!("no Δ vs FP16: {e}"))),
                None => (
                    None,
                    None,
                    Some("no Δ: no baseline arm was run".to_string()),
                ),
            };
            json!({
                "metric": "perplexity", "basis": "measured",
                "value": r(s.perplexity(), 4), "fp16_value": fp16, "delta_vs_fp16_pct": delta,
                "mean_nll": r(s.mean_nll, 6), "tokens_evaluated": s.tokens_evaluated,
                "windows": s.windows, "seq_len": p.seq_len, "max_tokens": p.max_tokens,
                "tokenization": how, "corpus": corpus,
                "delta_note": delta_note, "note": note
            })
        }
    })
}

/// Build the report for the requested arm. Δ vs FP16 is `measured` only when both arms succeeded
/// in this run; a failed arm keeps the other's figures and says why.
pub fn build_report(
    cfg: &ProtocolConfig,
    out: &Outcome,
    ctx: &RunContext,
    precision: &str,
) -> Result<Report> {
    let requested = out
        .arm(precision)
        .map(|a| a.outcome.clone())
        .unwrap_or_else(|| Err("not run".into()));
    let baseline = cfg
        .baseline
        .as_ref()
        .and_then(|b| out.arm(b))
        .map(|a| a.outcome.clone());
    let ok = requested.as_ref().ok();
    let base_ok = baseline.as_ref().and_then(|b| b.as_ref().ok());

    let energy = ok.map(|a| a.mj_per_token());
    let fp16 = base_ok.map(|a| a.mj_per_token());
    let delta = match (energy, fp16) {
        (Some(e), Some(f)) if f > 0.0 => Some(r((e - f) / f * 100.0, 3)),
        _ => None,
    };
    let mut notes = Vec::new();
    match (&requested, &baseline) {
        (Ok(_), Some(Ok(_))) => notes.push(format!(
            "Both arms measured in this run, in the order {}.",
            out.arm_order.iter().map(|p| report_precision(p)).collect::<Vec<_>>().join(" → ")
        )),
        (Ok(_), Some(Err(e))) => notes.push(format!(
            "The FP16 baseline arm failed ({e}); this arm's energy is measured, but no Δ vs FP16 is reported."
        )),
        (Ok(_), None) => notes.push("No baseline arm was run: no Δ vs FP16.".into()),
        (Err(e), _) => notes.push(format!(
            "The {} arm failed ({e}): no energy is reported for it{}.",
            report_precision(precision),
            if base_ok.is_some() { "; the FP16 arm's figure is kept as fp16_energy_per_token_mj" } else { "" }
        )),
    }
    notes.push(format!(
        "Idle power {:.1} W was measured before loading and is reported, not subtracted.",
        out.idle_power_w
    ));
    if let Some(a) = ok {
        if !a.cooldown.converged {
            notes.push(format!(
                "Cooldown did not converge within {:.0} s (power {:?} W, target ≤ {:.1} W).",
                a.cooldown.seconds, a.cooldown.power_w, a.cooldown.target_power_w
            ));
        }
    }
    let basis = if ok.is_some() {
        "measured"
    } else {
        "unavailable"
    };
    let trace = ok.and_then(|a| a.trace.as_ref());
    let weights = match &ctx.weights {
        WeightsInfo::Synthetic {
            architecture,
            seed,
            quantized_from_float,
        } => json!({
            "kind": "synthetic", "architecture": architecture, "seed": seed,
            "quantized_from_float": quantized_from_float,
            "note": if *quantized_from_float {
                "seeded random weights at the architecture's exact shapes, the quantized arms quantized from the float arms' weights: a real measurement of a real-shaped model, not of a trained model"
            } else {
                "seeded random weights at the architecture's exact shapes (quantized arms draw their own random blocks): a real measurement of a real-shaped model, not of a trained model"
            }
        }),
        WeightsInfo::Real { path, files } => json!({
            "kind": "real", "path": path,
            "files": files.iter().map(|(n, h, b)| json!({"name": n, "sha256": h, "bytes": b})).collect::<Vec<_>>()
        }),
    };
    let gpu_arch = out
        .device
        .arch
        .clone()
        .or_else(|| report::arch_from_gpu_name(&out.device.name).map(|a| a.as_str().to_string()))
        .unwrap_or_else(|| "unknown".into());
    let value = json!({
        "schema_version": report::SCHEMA_VERSION,
        "benchmark": "quantenergy-decode-energy",
        "certified_benchmark_result": false,
        "scenario": if cfg.batch <= 1 { "SingleStream" } else { "Offline" },
        "timestamp_utc": ctx.timestamp_utc,
        "system_under_test": {
            "gpu": out.device.name, "gpu_arch": gpu_arch, "accelerator_count": 1, "host": ctx.host
        },
        "workload": {
            "model_name": ctx.model_name,
            "params_b": r(ctx.params_b, 4),
            "precision": report_precision(precision),
            "batch_size": cfg.batch,
            "context_length": cfg.prompt_len + cfg.tokens,
            "prompt_tokens": cfg.prompt_len
        },
        "measurement": {
            "method": format!(
                "NVML energy counter (total_energy_consumption) over one device-synchronized window around all timed iterations; {} trace at {} Hz as cross-check",
                if cfg.trace { "POWER_INSTANT" } else { "no" }, cfg.sample_hz
            ),
            "sample_rate_hz": cfg.sample_hz.round() as i64,
            "tokens_per_run": cfg.tokens,
            "iterations": cfg.iterations,
            "warmup": cfg.warmup,
            "iterations_note": "Decode iterations within one run, not independent trials: a single report is n=1 however high this is."
        },
        "measurement_source": "on-device NVML measurement (quantenergy measure)",
        "results": {
            "total_energy_joules": ok.map(|a| r(a.counter_j, 3)),
            "tokens_generated": ok.map(|a| a.tokens_generated),
            "energy_per_token_mj": energy.map(|v| r(v, 3)),
            "fp16_energy_per_token_mj": fp16.map(|v| r(v, 3)),
            "vs_fp16_energy_pct": delta,
            "avg_power_watts": ok.map(|a| r(a.avg_power_w(), 2)),
            "throughput_tokens_per_s": ok.map(|a| r(a.tok_s(), 3)),
            "basis": basis,
            "note": notes.join(" ")
        },
        "stack": {
            "engine": "candle",
            "engine_version": ctx.engine_version,
            "kernel": ok.map(|a| a.kernel.clone()).unwrap_or_default(),
            "cuda": out.device.cuda,
            "driver": out.device.driver
        },
        "energy": {
            "source": "counter",
            "counter_joules": ok.map(|a| r(a.counter_j, 3)),
            "trace_joules": ok.and_then(|a| a.trace_j()).map(|v| r(v, 3)),
            "counter_over_trace_ratio": ok.and_then(|a| a.trace_j().filter(|t| *t > 0.0).map(|t| r(a.counter_j / t, 4))),
            "requested_sample_rate_hz": cfg.sample_hz,
            "achieved_sample_rate_hz": trace.map(|t| r(t.achieved_hz, 2)),
            "samples": trace.map(|t| t.samples.len()),
            "failed_reads": trace.map(|t| t.failed_reads),
            "idle_power_watts": r(out.idle_power_w, 2),
            "window_seconds": ok.map(|a| r(a.window_s, 4))
        },
        "protocol": {
            "warmup": cfg.warmup,
            "iterations": cfg.iterations,
            "tokens_per_iteration": cfg.tokens,
            "arm_order": out.arm_order.iter().map(|p| report_precision(p)).collect::<Vec<_>>(),
            "seed": cfg.seed,
            "cooldown": ok.map(|a| json!({
                "target_power_watts": r(a.cooldown.target_power_w, 2),
                "target_temp_c": if a.cooldown.target_temp_c.is_finite() { Some(r(a.cooldown.target_temp_c, 1)) } else { None },
                "converged": a.cooldown.converged,
                "seconds": r(a.cooldown.seconds, 2)
            })),
            "preflight": {
                "free_vram_bytes": out.free_vram_bytes,
                "required_vram_bytes": out.required_vram_bytes,
                "max_fraction": cfg.vram_fraction
            },
            "arms": out.arms.iter().map(|a| arm_json(&a.precision, &a.outcome)).collect::<Vec<_>>()
        },
        "environment": {
            "gpu_uuid": out.device.uuid,
            "gpu_name": out.device.name,
            "driver": out.device.driver,
            "cuda": out.device.cuda,
            "power_limit_watts": out.device.power_limit_w,
            "sm_clock_mhz": out.device.sm_clock_mhz,
            "mem_clock_mhz": out.device.mem_clock_mhz,
            "temperature_start_c": ok.and_then(|a| a.temp_start_c),
            "temperature_end_c": ok.and_then(|a| a.temp_end_c),
            "idle_power_watts": r(out.idle_power_w, 2),
            "idle_temperature_c": out.idle_temp_c
        },
        "weights": weights,
        "quality": quality_json(
            cfg,
            out,
            precision,
            &requested,
            baseline.as_ref(),
            &ctx.weights
        )
    });
    let value = strip_nulls(value);
    let report: Report = serde_json::from_value(value.clone()).context("building the report")?;
    let text = serde_json::to_string(&value)?;
    let v = report::validate_str(&text);
    if !v.errors.is_empty() {
        let msgs: Vec<String> = v
            .errors
            .iter()
            .map(|e| format!("{}: {}", e.path, e.message))
            .collect();
        bail!(
            "internal error: the report we built does not validate:\n  {}",
            msgs.join("\n  ")
        );
    }
    Ok(report)
}

/// Drop `null` members of optional blocks so the report stays small and schema-clean (the
/// `results` figures keep explicit nulls: an absent number must read as absent, not as zero).
fn strip_nulls(v: Value) -> Value {
    fn strip(v: Value, keep: bool) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.into_iter()
                    .filter(|(_, x)| keep || !x.is_null())
                    .map(|(k, x)| {
                        let keep_child = k == "results";
                        (k, strip(x, keep_child))
                    })
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.into_iter().map(|x| strip(x, false)).collect()),
            other => other,
        }
    }
    strip(v, false)
}

/// Write `contents` to `path` atomically: a temporary file in the same directory, fsync, rename.
/// A crash leaves either the old file or the new one, never half of one.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let name = path
        .file_name()
        .with_context(|| format!("{} has no file name", path.display()))?
        .to_string_lossy();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| -> Result<()> {
        let mut f =
            std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        f.write_all(contents)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
