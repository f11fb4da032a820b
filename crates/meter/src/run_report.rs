//! Turn a protocol [`Outcome`] into an `energy.json` report, and write it atomically.

use crate::error::{Error, Result};
use crate::protocol::{
    ArmFailure, ArmMeasurement, CooldownResult, Outcome, PerplexityConfig, PerplexityScore,
    ProtocolConfig,
};
use report::{Precision, Report};

/// What the report says about the weights.
#[derive(Debug, Clone)]
pub enum WeightsInfo {
    /// Synthetic weights generated from a seed.
    Synthetic {
        /// The synthetic architecture name.
        architecture: String,
        /// The seed the weights were generated from.
        seed: u64,
        /// Quantized arms are the float arms' weights, quantized (`quantize_synthetic_floats`),
        /// rather than their own random blocks: only then is a perplexity Δ between arms a Δ.
        quantized_from_float: bool,
    },
    /// Real weights read from disk.
    Real {
        /// The model path.
        path: String,
        /// Each weight file: (name, SHA-256 hex, size in bytes).
        files: Vec<(String, String, u64)>,
    },
}

/// What a report needs beyond the protocol outcome.
#[derive(Debug, Clone)]
pub struct RunContext {
    /// The model's name.
    pub model_name: String,
    /// Parameter count, billions.
    pub params_b: f64,
    /// Where the weights came from.
    pub weights: WeightsInfo,
    /// The report's `stack.engine`: [`crate::engine::Engine::stack_name`] for the candle engines ("candle" for
    /// eager, "candle-graph" for the graph engine, [`crate::engine`]). A served arm names its
    /// server instead (what the server said it is).
    pub engine: String,
    /// The decode engine's version.
    pub engine_version: String,
    /// When the run started, UTC.
    pub timestamp_utc: String,
    /// The host's name.
    pub host: String,
}

fn r(v: f64, dp: i32) -> f64 {
    let m = 10f64.powi(dp);
    (v * m).round() / m
}

fn cooldown_block(c: &CooldownResult) -> report::Cooldown {
    report::Cooldown {
        target_power_watts: Some(r(c.target_power_w, 2)),
        target_temp_c: c.target_temp_c.is_finite().then(|| r(c.target_temp_c, 1)),
        converged: Some(c.converged),
        seconds: Some(r(c.seconds, 2)),
        extra: Default::default(),
    }
}

/// `counter / trace` when the trace integrated to a positive energy.
fn counter_over_trace(a: &ArmMeasurement) -> Option<f64> {
    a.trace_j()
        .filter(|t| *t > 0.0)
        .map(|t| r(a.counter_j / t, 4))
}

/// `v` to `digits` significant digits (a small fraction keeps its figure instead of rounding to
/// a silent zero).
fn sig(v: f64, digits: i32) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    r(v, digits - 1 - v.abs().log10().floor() as i32)
}

/// An arm's roofline figures: the bytes of weights read per generated token and
/// their share of the card's memory bandwidth at the arm's throughput. The fraction is omitted
/// when the card is unknown, and — with a note saying so — when it exceeds what the report's
/// checks accept (the weights would have been served from cache, not memory).
fn roofline_figures(
    a: &ArmMeasurement,
    batch: usize,
    bandwidth_gbs: Option<f64>,
) -> (Option<u64>, Option<f64>, Option<String>) {
    let Some(wb) = a.weight_bytes else {
        return (None, None, None);
    };
    let per_token = wb.per_token(batch);
    let bytes = Some(per_token.round() as u64).filter(|b| *b > 0);
    let fraction = bandwidth_gbs
        .and_then(|bw| crate::roofline::roofline_fraction(per_token, a.tok_s(), bw))
        .map(|f| sig(f, 4));
    match fraction {
        Some(f) if f > report::MAX_ROOFLINE_FRACTION => (
            bytes,
            None,
            Some(format!(
                "hbm_roofline_fraction omitted: {per_token:.0} B of weights per token at {:.1} tok/s would be {f}× the card's {} GB/s (datasheet), more than {} — weights read from cache, not memory",
                a.tok_s(),
                bandwidth_gbs.unwrap_or(f64::NAN),
                report::MAX_ROOFLINE_FRACTION
            )),
        ),
        f => (bytes, f, None),
    }
}

/// One arm of the run as the report's `protocol.arms[]` entry; `batch` and the card's memory
/// bandwidth (GB/s, `None` for a card the catalog lacks) give its roofline figures.
fn arm_entry(
    precision: Precision,
    m: &Result<ArmMeasurement, ArmFailure>,
    batch: usize,
    bandwidth_gbs: Option<f64>,
) -> report::Arm {
    let a = match m {
        Err(e) => return report::Arm::failed(precision.as_str(), e.to_string()),
        Ok(a) => a,
    };
    let trace = a.trace.as_ref();
    let (weight_bytes_per_token, hbm_roofline_fraction, roofline_note) =
        roofline_figures(a, batch, bandwidth_gbs);
    report::Arm {
        weight_bytes_per_token,
        hbm_roofline_fraction,
        energy_per_token_mj: Some(r(a.mj_per_token(), 3)),
        trace_energy_per_token_mj: a.trace_mj_per_token().map(|v| r(v, 3)),
        counter_joules: Some(r(a.counter_j, 3)),
        trace_joules: a.trace_j().map(|v| r(v, 3)),
        counter_over_trace_ratio: counter_over_trace(a),
        throughput_tokens_per_s: Some(r(a.tok_s(), 3)),
        avg_power_watts: Some(r(a.avg_power_w(), 2)),
        window_seconds: Some(r(a.window_s, 4)),
        tokens_generated: Some(a.tokens_generated),
        samples: trace.map(|t| t.samples.len() as u64),
        failed_reads: trace.map(|t| t.failed_reads),
        achieved_sample_rate_hz: trace.map(|t| r(t.achieved_hz, 2)),
        iteration_seconds: Some(a.iteration_s.iter().map(|t| r(*t, 5)).collect()),
        iteration_time_cv_pct: a.iteration_cv_pct().map(|v| r(v, 3)),
        load_seconds: Some(r(a.load_s, 3)),
        host_cpu_steal_pct: a.host.map(|h| r(h.steal_pct, 3)),
        process_cpu_cores: a.host.map(|h| r(h.process_cpu_cores, 3)),
        gpu_busy_pct: a.activity.gpu_busy_pct.map(|v| r(v.clamp(0.0, 100.0), 2)),
        power_throttle_pct: a
            .activity
            .power_throttle_pct
            .map(|v| r(v.clamp(0.0, 100.0), 3)),
        thermal_throttle_pct: a
            .activity
            .thermal_throttle_pct
            .map(|v| r(v.clamp(0.0, 100.0), 3)),
        kernel: Some(a.kernel.clone()),
        notes: Some(a.notes.iter().cloned().chain(roofline_note).collect()),
        cooldown: Some(cooldown_block(&a.cooldown)),
        temperature_start_c: a.temp_start_c,
        temperature_end_c: a.temp_end_c,
        latency: a.served.as_ref().and_then(|s| s.latency.clone()),
        perplexity: a.perplexity.as_ref().map(|p| match p {
            Ok(s) => report::ArmPerplexity {
                value: Some(r(s.perplexity(), 4)),
                mean_nll: Some(r(s.mean_nll, 6)),
                tokens_evaluated: Some(s.tokens_evaluated as u64),
                ..Default::default()
            },
            Err(e) => report::ArmPerplexity {
                error: Some(e.to_string()),
                ..Default::default()
            },
        }),
        ..report::Arm::ok(precision.as_str())
    }
}

/// An arm's perplexity score, or why there is none (the text the report gives).
fn arm_score(m: &Result<ArmMeasurement, ArmFailure>) -> Result<PerplexityScore, String> {
    match m {
        Ok(a) => match &a.perplexity {
            Some(Ok(s)) => Ok(s.clone()),
            Some(Err(e)) => Err(e.to_string()),
            None => Err("not scored".into()),
        },
        Err(e) => Err(format!("the arm failed ({e})")),
    }
}

/// The quality block's note: what was scored, how, and what a synthetic Δ can mean.
fn quality_note(
    p: &PerplexityConfig,
    how: Option<&str>,
    synthetic: bool,
    requested: &Result<ArmMeasurement, ArmFailure>,
) -> String {
    let sha256 = p.sha256();
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
    note
}

/// The report's `quality` block: the requested arm's perplexity and its Δ vs the FP16 arm of the
/// same run. `measured` only when the requested arm was scored; Δ only when both were.
fn quality_block(
    cfg: &ProtocolConfig,
    out: &Outcome,
    precision: Precision,
    requested: &Result<ArmMeasurement, ArmFailure>,
    baseline: Option<&Result<ArmMeasurement, ArmFailure>>,
    weights: &WeightsInfo,
) -> Option<report::Quality> {
    let (p, tokens) = cfg.perplexity.as_ref().zip(out.perplexity.as_ref())?;
    let how = tokens.as_ref().ok().map(|t| t.how.clone());
    let mut base = baseline.map(arm_score);
    // Synthetic quantized arms normally draw their own random blocks: a different model from the
    // FP16 arm, so no Δ unless they were quantized from the float arms' weights.
    let synthetic = matches!(weights, WeightsInfo::Synthetic { .. });
    let independent = matches!(
        weights,
        WeightsInfo::Synthetic {
            quantized_from_float: false,
            ..
        }
    ) && !precision.is_float();
    if independent && base.is_some() {
        base = Some(Err(
            "the quantized arm's synthetic weights were drawn independently of the \
                         FP16 arm's, so their perplexities are not comparable"
                .into(),
        ));
    }
    let common = report::Quality {
        metric: "perplexity".into(),
        corpus: Some(report::Corpus {
            name: Some(p.corpus_name.clone()),
            bytes: Some(p.text.len() as i64),
            sha256: Some(p.sha256()),
            ..Default::default()
        }),
        seq_len: Some(p.seq_len as i64),
        max_tokens: Some(p.max_tokens as i64),
        note: Some(quality_note(p, how.as_deref(), synthetic, requested)),
        tokenization: how,
        ..Default::default()
    };
    Some(match arm_score(requested) {
        Err(e) => report::Quality {
            basis: "unavailable".into(),
            error: Some(e),
            ..common
        },
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
            report::Quality {
                basis: "measured".into(),
                value: Some(r(s.perplexity(), 4)),
                fp16_value: fp16,
                delta_vs_fp16_pct: delta,
                mean_nll: Some(r(s.mean_nll, 6)),
                tokens_evaluated: Some(s.tokens_evaluated as i64),
                windows: Some(s.windows as i64),
                delta_note,
                ..common
            }
        }
    })
}

/// The results note: which arms were measured, what failed, idle power, cooldown.
fn results_note(
    out: &Outcome,
    precision: Precision,
    requested: &Result<ArmMeasurement, ArmFailure>,
    baseline: Option<&Result<ArmMeasurement, ArmFailure>>,
) -> String {
    let base_ok = baseline.is_some_and(|b| b.is_ok());
    let mut notes = Vec::new();
    match (requested, baseline) {
        (Ok(_), Some(Ok(_))) => notes.push(format!(
            "Both arms measured in this run, in the order {}.",
            out.arm_order.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(" → ")
        )),
        (Ok(_), Some(Err(e))) => notes.push(format!(
            "The FP16 baseline arm failed ({e}); this arm's energy is measured, but no Δ vs FP16 is reported."
        )),
        (Ok(_), None) => notes.push("No baseline arm was run: no Δ vs FP16.".into()),
        (Err(e), _) => notes.push(format!(
            "The {} arm failed ({e}): no energy is reported for it{}.",
            precision,
            if base_ok { "; the FP16 arm's figure is kept as fp16_energy_per_token_mj" } else { "" }
        )),
    }
    notes.push(format!(
        "Idle power {:.1} W was measured before loading and is reported, not subtracted.",
        out.idle_power_w
    ));
    if let Some(w) = out.loaded_idle_power_w {
        notes.push(format!(
            "Each arm holds a GPU context of its own (a server): the cooldowns aim at the idle \
             power with the first arm loaded, {w:.1} W."
        ));
    }
    if let Ok(a) = requested {
        if let Some(gaps) = a.trace.as_ref().and_then(trace_gaps) {
            notes.push(gaps);
        }
        if !a.cooldown.converged {
            notes.push(format!(
                "Cooldown did not converge within {:.0} s (power {:?} W, target ≤ {:.1} W).",
                a.cooldown.seconds, a.cooldown.power_w, a.cooldown.target_power_w
            ));
        }
    }
    notes.join(" ")
}

/// Share of failed power reads above which a trace is said to have gaps.
pub const TRACE_GAP_SHARE: f64 = 0.05;

/// A note when the power trace has gaps (more than [`TRACE_GAP_SHARE`] of its reads failed, or
/// none succeeded): the counter figure stands, the trace's cross-check is weaker or absent.
fn trace_gaps(t: &crate::sampler::Trace) -> Option<String> {
    let reads = t.samples.len() as u64 + t.failed_reads;
    if reads == 0 || (t.failed_reads as f64) / (reads as f64) <= TRACE_GAP_SHARE {
        return None;
    }
    Some(if t.samples.is_empty() {
        format!(
            "Every power-trace read failed ({} reads): the energy is the counter's alone, without its cross-check.",
            t.failed_reads
        )
    } else {
        format!(
            "The power trace has gaps: {} of {reads} reads failed ({:.0} %); the energy is the counter's, the trace cross-check is weaker.",
            t.failed_reads,
            t.failed_reads as f64 / reads as f64 * 100.0
        )
    })
}

/// The report's `weights` block.
fn weights_block(w: &WeightsInfo) -> report::Weights {
    match w {
        WeightsInfo::Synthetic {
            architecture,
            seed,
            quantized_from_float,
        } => report::Weights {
            kind: report::WeightsKind::Synthetic,
            architecture: Some(architecture.clone()),
            seed: Some(*seed),
            quantized_from_float: Some(*quantized_from_float),
            note: Some(if *quantized_from_float {
                "seeded random weights at the architecture's exact shapes, the quantized arms quantized from the float arms' weights: a real measurement of a real-shaped model, not of a trained model"
            } else {
                "seeded random weights at the architecture's exact shapes (quantized arms draw their own random blocks): a real measurement of a real-shaped model, not of a trained model"
            }.into()),
            path: None,
            hub_id: None,
            files: None,
            extra: Default::default(),
        },
        WeightsInfo::Real { path, files } => report::Weights {
            kind: report::WeightsKind::Real,
            path: Some(path.clone()),
            files: Some(
                files
                    .iter()
                    .map(|(name, sha256, bytes)| report::WeightFile {
                        name: name.clone(),
                        sha256: Some(sha256.clone()),
                        bytes: Some(*bytes),
                        extra: Default::default(),
                    })
                    .collect(),
            ),
            architecture: None,
            seed: None,
            quantized_from_float: None,
            note: None,
            hub_id: None,
            extra: Default::default(),
        },
    }
}

/// The report's `energy` block: counter and trace side by side, sampling quality, idle power.
fn energy_block(
    cfg: &ProtocolConfig,
    out: &Outcome,
    ok: Option<&ArmMeasurement>,
) -> report::Energy {
    let trace = ok.and_then(|a| a.trace.as_ref());
    report::Energy {
        source: Some("counter".into()),
        counter_joules: ok.map(|a| r(a.counter_j, 3)),
        trace_joules: ok.and_then(|a| a.trace_j()).map(|v| r(v, 3)),
        counter_over_trace_ratio: ok.and_then(counter_over_trace),
        requested_sample_rate_hz: Some(cfg.sample_hz),
        achieved_sample_rate_hz: trace.map(|t| r(t.achieved_hz, 2)),
        samples: trace.map(|t| t.samples.len() as u64),
        failed_reads: trace.map(|t| t.failed_reads),
        idle_power_watts: Some(r(out.idle_power_w, 2)),
        window_seconds: ok.map(|a| r(a.window_s, 4)),
        counter_update_ms: out.counter_update_s.map(|s| r(s * 1000.0, 1)),
        ..Default::default()
    }
}

/// The report's `protocol` block: what was actually run, every arm with its figures.
fn protocol_block(
    cfg: &ProtocolConfig,
    out: &Outcome,
    ok: Option<&ArmMeasurement>,
) -> report::Protocol {
    report::Protocol {
        warmup: Some(cfg.warmup as u32),
        iterations: Some(ok.map_or(cfg.iterations, |a| a.iteration_s.len()) as u32),
        tokens_per_iteration: Some(cfg.tokens as u32),
        arm_order: Some(
            out.arm_order
                .iter()
                .map(|p| p.as_str().to_string())
                .collect(),
        ),
        seed: Some(cfg.seed),
        session: cfg.session.clone(),
        cooldown: ok.map(|a| cooldown_block(&a.cooldown)),
        preflight: Some(report::Preflight {
            free_vram_bytes: Some(out.free_vram_bytes),
            required_vram_bytes: Some(out.required_vram_bytes),
            max_fraction: Some(cfg.vram_fraction),
            extra: Default::default(),
        }),
        arms: Some(
            out.arms
                .iter()
                .map(|a| {
                    let bandwidth = crate::roofline::card_bandwidth_gbs(&out.device.name);
                    arm_entry(a.precision, &a.outcome, cfg.batch, bandwidth)
                })
                .collect(),
        ),
        extra: Default::default(),
    }
}

/// The report's `stack` block: the candle engine of the run, or the server that answered the
/// arm (its own name and version, and how it was driven).
fn stack_block(
    ctx: &RunContext,
    out: &Outcome,
    ok: Option<&ArmMeasurement>,
    cfg: &ProtocolConfig,
) -> report::Stack {
    let served = ok.and_then(|a| a.served.as_ref());
    report::Stack {
        engine: Some(served.map_or(ctx.engine.clone(), |s| s.engine.clone())),
        engine_version: match served {
            Some(s) => s.engine_version.clone(),
            None => Some(ctx.engine_version.clone()),
        },
        kernel: Some(ok.map(|a| a.kernel.clone()).unwrap_or_default()),
        cuda: out.device.cuda.clone(),
        driver: out.device.driver.clone(),
        serving: served.map(|s| report::Serving {
            mode: s.mode,
            api: Some(s.api.path().into()),
            command: s.command.clone(),
            concurrency: Some(cfg.batch as u32),
            model_id: s.model_id.clone(),
            identified_by: Some(s.identified_by.clone()),
            extra: Default::default(),
        }),
        meter_build: Some(crate::METER_BUILD.into()),
        extra: Default::default(),
    }
}

/// The report's `environment` block: the device as NVML saw it.
fn environment_block(out: &Outcome, ok: Option<&ArmMeasurement>) -> report::Environment {
    let d = &out.device;
    report::Environment {
        gpu_uuid: d.uuid.clone(),
        gpu_name: Some(d.name.clone()),
        driver: d.driver.clone(),
        cuda: d.cuda.clone(),
        power_limit_watts: d.power_limit_w,
        sm_clock_mhz: d.sm_clock_mhz.map(f64::from),
        mem_clock_mhz: d.mem_clock_mhz.map(f64::from),
        temperature_start_c: ok.and_then(|a| a.temp_start_c),
        temperature_end_c: ok.and_then(|a| a.temp_end_c),
        idle_power_watts: Some(r(out.idle_power_w, 2)),
        idle_temperature_c: out.idle_temp_c,
        // Filled in when the report is written (`scheduler::stamp`): they describe the process.
        visible_devices: None,
        slurm: None,
        gpus: (d.cards.len() > 1).then(|| {
            d.cards
                .iter()
                .map(|c| report::GpuRef {
                    index: c.index,
                    name: Some(c.name.clone()),
                    uuid: c.uuid.clone(),
                    extra: Default::default(),
                })
                .collect()
        }),
        extra: Default::default(),
    }
}

/// Build the report for the requested arm. Δ vs FP16 is `measured` only when both arms succeeded
/// in this run; a failed arm keeps the other's figures and says why. The report is validated
/// (schema + semantic checks) before it is returned: the meter never writes one that fails.
pub fn build_report(
    cfg: &ProtocolConfig,
    out: &Outcome,
    ctx: &RunContext,
    precision: Precision,
) -> Result<Report> {
    let requested = out
        .arm(precision)
        .map(|a| a.outcome.clone())
        .unwrap_or(Err(ArmFailure::NotRun));
    let baseline = cfg
        .baseline
        .as_ref()
        .and_then(|b| out.arm(*b))
        .map(|a| a.outcome.clone());
    let ok = requested.as_ref().ok();
    let base_ok = baseline.as_ref().and_then(|b| b.as_ref().ok());
    let energy = ok.map(|a| a.mj_per_token());
    let fp16 = base_ok.map(|a| a.mj_per_token());
    let delta = match (energy, fp16) {
        (Some(e), Some(f)) if f > 0.0 => Some(r((e - f) / f * 100.0, 3)),
        _ => None,
    };
    let gpu_arch = out
        .device
        .arch
        .or_else(|| report::arch_from_gpu_name(&out.device.name))
        .map_or("unknown", |a| a.as_str())
        .to_string();
    let report = Report {
        schema_version: report::SCHEMA_VERSION.into(),
        benchmark: "quantenergy-decode-energy".into(),
        scenario: if cfg.batch <= 1 {
            "SingleStream"
        } else {
            "Offline"
        }
        .into(),
        timestamp_utc: Some(ctx.timestamp_utc.clone()),
        system_under_test: report::SystemUnderTest {
            gpu: out.device.name.clone(),
            gpu_arch,
            accelerator_count: out.device.cards.len().max(1) as u32,
            host: Some(ctx.host.clone()),
            extra: Default::default(),
        },
        workload: workload_block(cfg, ctx, precision),
        measurement: measurement_block(cfg, ok),
        measurement_source: Some("on-device NVML measurement (quantenergy measure)".into()),
        results: report::Results {
            total_energy_joules: ok.map(|a| r(a.counter_j, 3)),
            tokens_generated: ok.map(|a| a.tokens_generated),
            energy_per_token_mj: energy.map(|v| r(v, 3)),
            fp16_energy_per_token_mj: fp16.map(|v| r(v, 3)),
            vs_fp16_energy_pct: delta,
            avg_power_watts: ok.map(|a| r(a.avg_power_w(), 2)),
            throughput_tokens_per_s: ok.map(|a| r(a.tok_s(), 3)),
            basis: if ok.is_some() {
                report::Basis::Measured
            } else {
                report::Basis::Unavailable
            },
            note: Some(results_note(out, precision, &requested, baseline.as_ref())),
            prefill: ok.and_then(|a| prefill_block(a, base_ok)),
            requests: ok.and_then(requests_block),
            extra: Default::default(),
        },
        quality: quality_block(
            cfg,
            out,
            precision,
            &requested,
            baseline.as_ref(),
            &ctx.weights,
        ),
        stack: Some(stack_block(ctx, out, ok, cfg)),
        energy: Some(energy_block(cfg, out, ok)),
        protocol: Some(protocol_block(cfg, out, ok)),
        environment: Some(environment_block(out, ok)),
        weights: Some(weights_block(&ctx.weights)),
        validity: None,
        extra: extra([("certified_benchmark_result", false.into())]),
    };
    let report = Report {
        validity: Some(report::validity::assess(&report)),
        ..report
    };
    let text = serde_json::to_string(&report)?;
    let v = report::validate_str(&text);
    if !v.errors.is_empty() {
        return Err(Error::InvalidReport(
            v.errors
                .iter()
                .map(|e| format!("{}: {}", e.path, e.message))
                .collect(),
        ));
    }
    Ok(report)
}

/// What ran: the model, the arm, batch and context (a context run's depth beside them).
fn workload_block(
    cfg: &ProtocolConfig,
    ctx: &RunContext,
    precision: Precision,
) -> report::Workload {
    report::Workload {
        model_name: ctx.model_name.clone(),
        params_b: Some(r(ctx.params_b, 4)),
        precision: precision.as_str().into(),
        batch_size: cfg.batch as u32,
        context_length: Some(cfg.capacity() as u32),
        context_depth: cfg.context.map(|d| d as u32),
        prompt_set: cfg.prompts.as_ref().map(|set| set.report_ref()),
        // A prompt set's prompts have their own lengths (`prompt_set`).
        extra: match cfg.prompts {
            Some(_) => Default::default(),
            None => extra([("prompt_tokens", cfg.prompt_tokens().into())]),
        },
    }
}

/// How the run measured: the window, the trace, the iterations (a context run's actual count,
/// after the windows were stretched to `min_window_s`).
fn measurement_block(cfg: &ProtocolConfig, ok: Option<&ArmMeasurement>) -> report::Measurement {
    report::Measurement {
        method: format!(
            "NVML energy counter (total_energy_consumption) over one device-synchronized window around all timed iterations; {} trace at {} Hz as cross-check{}",
            if cfg.trace { "POWER_INSTANT" } else { "no" }, cfg.sample_hz,
            workload_method(cfg)
        ) + &format!("; iterations are added until each window lasts at least {} s", cfg.min_window_s),
        sample_rate_hz: cfg.sample_hz.round() as i64,
        tokens_per_run: Some(
            cfg.prompts
                .as_ref()
                .map_or(cfg.tokens as u64, |set| set.output_tokens()),
        ),
        // Iterations are added until the window lasts min_window_s.
        iterations: Some(ok.map_or(cfg.iterations, |a| a.iteration_s.len()) as u64),
        warmup: Some(cfg.warmup as u64),
        extra: extra([(
            "iterations_note",
            "Decode iterations within one run, not independent trials: a single report is n=1 however high this is.".into(),
        )]),
    }
}

/// What a context or prompt-set run's windows hold, for `measurement.method`.
fn workload_method(cfg: &ProtocolConfig) -> String {
    match (&cfg.prompts, cfg.context) {
        (Some(set), _) => format!(
            "; prompt-set run ({}, {} requests): each iteration is one pass over the set, every request a fresh prefill of its prompt and then its output tokens, so the window's energy is the requests' end to end; every prompt's prefill, back to back, has its own window (results.prefill)",
            set.name,
            set.prompts.len()
        ),
        (None, Some(d)) => format!(
            "; context run: the decode window holds decodes of {} tokens at depth {d}, each rewound there, and opens after an untimed prefill; the prefill has its own window (results.prefill)",
            cfg.tokens
        ),
        (None, None) => String::new(),
    }
}

/// A prompt-set arm's requests: their counts, energy per request, and the decode's share per
/// output token (the window less its prompt tokens at the prefill window's rate).
fn requests_block(a: &ArmMeasurement) -> Option<report::Requests> {
    let q = a.requests.as_ref()?;
    let p = a.prefill.as_ref()?;
    let prefill_j = p.mj_per_prompt_token() * q.prompt_tokens as f64 / 1000.0;
    let decode = (a.counter_j - prefill_j) * 1000.0 / a.tokens_generated.max(1) as f64;
    Some(report::Requests {
        requests: q.requests as u64,
        passes: q.passes as u64,
        energy_per_request_joules: sig(a.counter_j / q.requests.max(1) as f64, 4),
        prompt_tokens: q.prompt_tokens,
        decode_energy_per_token_mj: (decode > 0.0).then(|| sig(decode, 4)),
        time_to_first_token_p90_ms: r(q.ttft_p90_s * 1e3, 3),
        extra: Default::default(),
    })
}

/// A context arm's prefill figures, beside the FP16 arm's of the same run.
fn prefill_block(a: &ArmMeasurement, base: Option<&ArmMeasurement>) -> Option<report::Prefill> {
    let p = a.prefill.as_ref()?;
    let e = p.mj_per_prompt_token();
    let fp16 = base
        .and_then(|b| b.prefill.as_ref())
        .map(|b| b.mj_per_prompt_token());
    Some(report::Prefill {
        energy_per_prompt_token_mj: sig(e, 4),
        prompt_tokens: p.prompt_tokens,
        prefills: p.prefills as u64,
        window_seconds: r(p.window_s, 3),
        counter_joules: r(p.counter_j, 3),
        trace_joules: p.trace_j.map(|j| r(j, 3)),
        time_to_first_token_ms: r(p.ttft_s * 1e3, 3),
        fp16_energy_per_prompt_token_mj: fp16.map(|f| sig(f, 4)),
        vs_fp16_energy_pct: fp16.filter(|f| *f > 0.0).map(|f| r((e - f) / f * 100.0, 3)),
        extra: Default::default(),
    })
}

/// An `extra` map from fields the typed blocks do not name.
fn extra<const N: usize>(fields: [(&str, serde_json::Value); N]) -> report::Extra {
    fields
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

/// The model a synthetic GGUF's name stands for: `Qwen2-0.5B` of `synthetic Qwen2-0.5B Q4_K seed 0`
/// (reports written before the meter named synthetic files by their shape still carry that name).
pub fn synthetic_model_of(name: &str) -> Option<&str> {
    WeightsInfo::from_synthetic_name(name)?;
    name.strip_prefix("synthetic ")?.split_whitespace().next()
}

/// A real model's name from its files' names, the same on every engine and on the server path: their common stem without a trailing separator
/// (`SmolLM2-135M-Instruct-F16.gguf`, `…-Q4_0.gguf` → `SmolLM2-135M-Instruct`), else the first stem.
pub fn model_name_of(paths: &[std::path::PathBuf]) -> String {
    let stems: Vec<String> = paths
        .iter()
        .map(|p| {
            p.file_stem()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect();
    let Some(first) = stems.first() else {
        return String::new();
    };
    if stems.len() == 1 {
        return first.clone();
    }
    let mut n = first.len();
    for s in &stems[1..] {
        n = n.min(
            first
                .char_indices()
                .zip(s.chars())
                .take_while(|((_, a), b)| a == b)
                .map(|((i, a), _)| i + a.len_utf8())
                .last()
                .unwrap_or(0),
        );
    }
    let common = first[..n].trim_end_matches(['-', '_', '.', ' ']);
    if common.is_empty() {
        first.clone()
    } else {
        common.to_string()
    }
}

impl WeightsInfo {
    /// Our synthetic GGUF writers name a file `synthetic <architecture> <type> seed <n>`; such a
    /// file's reports say synthetic weights, never real ones.
    pub fn from_synthetic_name(name: &str) -> Option<WeightsInfo> {
        let rest = name.strip_prefix("synthetic ")?;
        let words: Vec<&str> = rest.split_whitespace().collect();
        let seed_at = words.iter().position(|w| *w == "seed")?;
        Some(WeightsInfo::Synthetic {
            architecture: words.first()?.to_string(),
            seed: words.get(seed_at + 1)?.parse().ok()?,
            quantized_from_float: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gguf_sets_name_is_its_files_common_stem() {
        let set = |names: &[&str]| -> Vec<std::path::PathBuf> {
            names
                .iter()
                .map(|n| std::path::Path::new("/m").join(n))
                .collect()
        };
        let smol = set(&[
            "SmolLM2-135M-Instruct-F16.gguf",
            "SmolLM2-135M-Instruct-Q8_0.gguf",
            "SmolLM2-135M-Instruct-Q4_K.gguf",
        ]);
        assert_eq!(model_name_of(&smol), "SmolLM2-135M-Instruct");
        assert_eq!(model_name_of(&set(&["a.gguf", "b.gguf"])), "a");
        assert_eq!(model_name_of(&set(&["x-F16.gguf"])), "x-F16");
    }

    #[test]
    fn synthetic_names_are_read_back() {
        match WeightsInfo::from_synthetic_name("synthetic qwen2-0.5b Q4_K seed 7") {
            Some(WeightsInfo::Synthetic {
                architecture, seed, ..
            }) => {
                assert_eq!((architecture.as_str(), seed), ("qwen2-0.5b", 7));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            synthetic_model_of("synthetic Qwen2-0.5B F16 seed 0"),
            Some("Qwen2-0.5B")
        );
        assert_eq!(synthetic_model_of("synthetic qwen2 seed x"), None);
        assert!(WeightsInfo::from_synthetic_name("Qwen2 0.5B Instruct").is_none());
        assert!(WeightsInfo::from_synthetic_name("synthetic qwen2 seed x").is_none());
    }
}
