//! `quantenergy measure` and `quantenergy sweep`: wire the CLI arguments to the meter, the decode
//! engine and the protocol; fall back to a clearly labelled dataset estimate when no GPU can be
//! measured.

use crate::candle_decoder::{CandleFactory, WeightSource, CANDLE_VERSION};
use crate::meter::{EnergyMeter, RealClock};
use crate::nvml_meter::NvmlMeter;
use crate::protocol::{self, CooldownConfig, PerplexityConfig, ProtocolConfig};
use crate::run_report::{build_report, report_precision, write_atomic, RunContext, WeightsInfo};
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use sha2::Digest;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Args, Debug, Clone)]
pub struct MeasureArgs {
    /// A local Hugging Face model directory (config.json + *.safetensors) or a .gguf file.
    #[arg(
        long,
        conflicts_with = "synthetic",
        required_unless_present = "synthetic"
    )]
    pub model: Option<PathBuf>,
    /// Seeded random weights at a real architecture's exact shapes (see data/models.csv), e.g.
    /// qwen2-0.5b, tinyllama-1.1b, qwen2-7b.
    #[arg(long)]
    pub synthetic: Option<String>,
    /// Precision(s) to measure, comma-separated: F16, BF16, F32, Q8_0, Q4_K, Q4_0, Q5_K, Q6_K.
    #[arg(long, value_delimiter = ',', required = true)]
    pub precision: Vec<String>,
    /// The baseline arm measured in the same run ("none" to skip; then no Δ is reported).
    #[arg(long, default_value = "F16")]
    pub baseline: String,
    /// GPU index (NVML and CUDA).
    #[arg(long, default_value_t = 0)]
    pub device: u32,
    #[arg(long, default_value_t = 256)]
    pub tokens: usize,
    #[arg(long, default_value_t = 10)]
    pub iterations: usize,
    #[arg(long, default_value_t = 2)]
    pub warmup: usize,
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    #[arg(long, default_value_t = 16)]
    pub prompt_len: usize,
    /// Seed for the arm order and synthetic weights.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Power-trace sampling rate.
    #[arg(long, default_value_t = 50.0)]
    pub sample_hz: f64,
    /// Turn the power-trace thread off (to measure its overhead).
    #[arg(long)]
    pub no_trace: bool,
    /// Longest cooldown wait before each arm, seconds.
    #[arg(long, default_value_t = 240.0)]
    pub cooldown_max_s: f64,
    /// Output directory for the reports.
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
    /// Output file name stem (default: derived from model, precision, batch).
    #[arg(long)]
    pub name: Option<String>,
    /// Card name to use for the no-GPU estimate (e.g. "RTX 4090").
    #[arg(long)]
    pub gpu: Option<String>,
    /// After each arm's energy window, score teacher-forced perplexity on the fixed public-domain
    /// text in data/perplexity/ (the report's `quality` block: value and Δ vs the FP16 arm).
    #[arg(long)]
    pub perplexity: bool,
    /// Most corpus tokens to score per arm (at least 2: one prediction).
    #[arg(long, default_value_t = 512, requires = "perplexity", value_parser = clap::value_parser!(u64).range(2..))]
    pub ppl_tokens: u64,
    /// Tokens per scoring window (each window a fresh sequence; at least 2).
    #[arg(long, default_value_t = 256, requires = "perplexity", value_parser = clap::value_parser!(u64).range(2..))]
    pub ppl_seq_len: u64,
}

impl MeasureArgs {
    pub fn protocol(&self) -> ProtocolConfig {
        ProtocolConfig {
            precisions: self
                .precision
                .iter()
                .map(|p| p.trim().to_ascii_uppercase())
                .collect(),
            baseline: (!self.baseline.eq_ignore_ascii_case("none"))
                .then(|| self.baseline.to_ascii_uppercase()),
            tokens: self.tokens,
            iterations: self.iterations,
            warmup: self.warmup,
            batch: self.batch,
            prompt_len: self.prompt_len,
            seed: self.seed,
            sample_hz: self.sample_hz,
            trace: !self.no_trace,
            cooldown: CooldownConfig {
                max_s: self.cooldown_max_s,
                ..CooldownConfig::default()
            },
            perplexity: self.perplexity.then(|| {
                PerplexityConfig::embedded(self.ppl_tokens as usize, self.ppl_seq_len as usize)
            }),
            ..ProtocolConfig::default()
        }
    }

    pub fn source(&self) -> Result<WeightSource> {
        if let Some(name) = &self.synthetic {
            let shape = analysis::find_shape(name).ok_or_else(|| {
                let known: Vec<&str> = analysis::shapes().iter().map(|s| s.name.as_str()).collect();
                anyhow!(
                    "unknown architecture {name:?} for --synthetic; known: {}",
                    known.join(", ")
                )
            })?;
            return Ok(WeightSource::Synthetic {
                shape: shape.clone(),
                seed: self.seed,
            });
        }
        let path = self
            .model
            .clone()
            .ok_or_else(|| anyhow!("pass --model PATH or --synthetic NAME"))?;
        if path.is_dir() {
            Ok(WeightSource::HfDir(path))
        } else if path.extension().is_some_and(|e| e == "gguf") {
            Ok(WeightSource::Gguf(path))
        } else {
            bail!(
                "{}: expected a model directory or a .gguf file",
                path.display()
            )
        }
    }
}

/// A file-name-safe form of user text: ASCII letters, digits, `.` and `-` kept, the rest `_` (no
/// path separators can survive).
pub fn safe_name(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn file_stem(model: &str, precision: &str, batch: usize) -> String {
    format!(
        "{}_{}_b{batch}",
        safe_name(model),
        report_precision(precision)
    )
}

pub fn sha256_file(path: &Path) -> Result<(String, u64)> {
    let mut f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut h = sha2::Sha256::new();
    let n = std::io::copy(&mut f, &mut h)?;
    Ok((format!("{:x}", h.finalize()), n))
}

/// The model's name and what the report says of its weights; `quantized_from_float` is the
/// factory's `quantize_synthetic_floats` for this run.
fn weights_info(
    source: &WeightSource,
    quantized_from_float: bool,
) -> Result<(String, WeightsInfo)> {
    Ok(match source {
        WeightSource::Synthetic { shape, seed } => (
            format!("{} (synthetic weights)", shape.name),
            WeightsInfo::Synthetic {
                architecture: shape.name.clone(),
                seed: *seed,
                quantized_from_float,
            },
        ),
        WeightSource::HfDir(dir) => {
            let mut files = Vec::new();
            let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.extension().is_some_and(|x| x == "safetensors")
                        || p.file_name()
                            .is_some_and(|n| n == "config.json" || n == "tokenizer.json")
                })
                .collect();
            entries.sort();
            for p in entries {
                let (h, n) = sha256_file(&p)?;
                files.push((p.file_name().unwrap().to_string_lossy().into_owned(), h, n));
            }
            (
                dir.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                WeightsInfo::Real {
                    path: dir.display().to_string(),
                    files,
                },
            )
        }
        WeightSource::Gguf(p) => {
            let (h, n) = sha256_file(p)?;
            (
                p.file_stem()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                WeightsInfo::Real {
                    path: p.display().to_string(),
                    files: vec![(p.file_name().unwrap().to_string_lossy().into_owned(), h, n)],
                },
            )
        }
    })
}

fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    // Civil date from days since 1970 (Howard Hinnant's algorithm), to avoid a date crate.
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// What `measure` produced.
pub struct MeasureResult {
    pub reports: Vec<(PathBuf, report::Report)>,
    pub measured: bool,
}

/// The device the decoder runs on: CUDA when built with it, else nothing we may measure.
fn decode_device(index: u32) -> Result<candle_core::Device> {
    if cfg!(feature = "cuda") {
        Ok(candle_core::Device::new_cuda(index as usize)?)
    } else {
        bail!(
            "this binary was built without the `cuda` feature: the decoder would run on the CPU while \
             NVML metered an idle GPU (build with scripts/build-cuda.sh)"
        )
    }
}

pub fn run_measure(args: &MeasureArgs) -> Result<MeasureResult> {
    let cfg = args.protocol();
    let source = args.source()?;
    let meter = NvmlMeter::open(args.device).map_err(|e| e.to_string());
    let device = match &meter {
        Ok(_) => decode_device(args.device).map_err(|e| format!("{e:#}")),
        Err(e) => Err(e.clone()),
    };
    match (meter, device) {
        (Ok(mut meter), Ok(device)) => measure_on_gpu(args, &cfg, source, &mut meter, device),
        (Err(reason), _) | (_, Err(reason)) => fallback(args, &cfg, &source, &reason),
    }
}

/// Run the protocol on a real meter and device, write one report per requested precision.
pub fn measure_on_gpu(
    args: &MeasureArgs,
    cfg: &ProtocolConfig,
    source: WeightSource,
    meter: &mut dyn EnergyMeter,
    device: candle_core::Device,
) -> Result<MeasureResult> {
    // A perplexity Δ needs the quantized arms to be the float arms' weights, quantized.
    let quantize_floats = cfg.perplexity.is_some();
    let (model_name, weights) = weights_info(&source, quantize_floats)?;
    let mut factory = CandleFactory::new(source, device)?;
    factory.quantize_synthetic_floats = quantize_floats;
    let params_b = factory.shape().param_count() as f64 / 1e9;
    let clock = Arc::new(RealClock::default());
    let outcome = protocol::run(cfg, meter, &mut factory, clock)?;
    let ctx = RunContext {
        model_name: model_name.clone(),
        params_b,
        weights,
        engine_version: CANDLE_VERSION.into(),
        timestamp_utc: utc_now(),
        host: hostname(),
    };
    write_reports(args, cfg, &outcome, &ctx, &model_name)
}

pub fn write_reports(
    args: &MeasureArgs,
    cfg: &ProtocolConfig,
    outcome: &protocol::Outcome,
    ctx: &RunContext,
    model_name: &str,
) -> Result<MeasureResult> {
    let mut reports = Vec::new();
    let mut measured = false;
    for p in &cfg.precisions {
        let rep = build_report(cfg, outcome, ctx, p)?;
        measured |= rep.results.basis == report::Basis::Measured;
        let stem = match &args.name {
            Some(n) if cfg.precisions.len() == 1 => n.clone(),
            Some(n) => format!("{n}_{}", report_precision(p)),
            None => file_stem(
                model_name.split(' ').next().unwrap_or(model_name),
                p,
                cfg.batch,
            ),
        };
        let path = args.out.join(format!("{stem}.json"));
        write_atomic(&path, serde_json::to_string_pretty(&rep)?.as_bytes())?;
        reports.push((path, rep));
    }
    Ok(MeasureResult { reports, measured })
}

/// `quantenergy overhead`: the trace-thread A/B on a real GPU (no fallback: there is nothing to
/// estimate). Writes `<out>/<name>.json` atomically and returns the result.
pub fn run_overhead(
    args: &MeasureArgs,
    pairs: usize,
) -> Result<(PathBuf, crate::overhead::OverheadResult)> {
    let [precision] = args.precision.as_slice() else {
        bail!(
            "overhead measures one precision at a time (got {:?})",
            args.precision
        );
    };
    if args.perplexity {
        bail!("overhead times decode windows only; --perplexity belongs to `quantenergy measure`");
    }
    let cfg = crate::overhead::OverheadConfig {
        precision: precision.trim().to_ascii_uppercase(),
        pairs,
        iterations: args.iterations,
        tokens: args.tokens,
        batch: args.batch,
        prompt_len: args.prompt_len,
        warmup: args.warmup,
        sample_hz: args.sample_hz,
        seed: args.seed,
    };
    let source = args.source()?;
    let (model_name, _) = weights_info(&source, false)?;
    let mut meter = NvmlMeter::open(args.device)
        .map_err(|e| anyhow!("{e}: the trace overhead can only be measured on a GPU"))?;
    let device = decode_device(args.device)?;
    let mut factory = CandleFactory::new(source, device)?;
    let result = crate::overhead::run(
        &cfg,
        &mut meter,
        &mut factory,
        Arc::new(RealClock::default()),
    )?;
    let stem = args.name.clone().unwrap_or_else(|| {
        format!(
            "{}_overhead",
            file_stem(
                model_name.split(' ').next().unwrap_or(&model_name),
                &cfg.precision,
                cfg.batch
            )
        )
    });
    let path = args.out.join(format!("{stem}.json"));
    let body = serde_json::json!({
        "kind": "quantenergy trace-overhead A/B",
        "model": model_name,
        "timestamp_utc": utc_now(),
        "host": hostname(),
        "engine": CANDLE_VERSION,
        "result": result,
    });
    write_atomic(&path, serde_json::to_string_pretty(&body)?.as_bytes())?;
    Ok((path, result))
}

fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// No GPU we may measure: the dataset estimate, labelled as such, with the reason.
fn fallback(
    args: &MeasureArgs,
    cfg: &ProtocolConfig,
    source: &WeightSource,
    reason: &str,
) -> Result<MeasureResult> {
    tracing::warn!("no measurement possible: {reason}");
    let (params_b, model_name) = match source {
        WeightSource::Synthetic { shape, .. } => (shape.params_b, shape.name.clone()),
        WeightSource::HfDir(d) => {
            let s = crate::candle_decoder::shape_from_hf_config(d)?;
            (s.params_b, s.name)
        }
        WeightSource::Gguf(p) => {
            let s = crate::candle_decoder::shape_from_gguf(p)?;
            (s.params_b, s.name)
        }
    };
    let gpu = args.gpu.clone().unwrap_or_else(|| "no GPU detected".into());
    let arch = args
        .gpu
        .as_deref()
        .and_then(report::arch_from_gpu_name)
        .map(|a| a.as_str().to_string())
        .unwrap_or_else(|| "unknown".into());
    let ds = analysis::Dataset::embedded();
    let mut reports = Vec::new();
    for p in &cfg.precisions {
        let input = analysis::EstimateInput {
            arch: arch.clone(),
            params_b,
            precision: report_precision(p),
            batch: cfg.batch as u32,
            context: (cfg.prompt_len + cfg.tokens) as u32,
        };
        let e = analysis::estimate(ds, analysis::default_classes(), &input);
        let mut rep = analysis::estimate_report(&e, &gpu, &model_name);
        let note = rep.results.note.take().unwrap_or_default();
        rep.results.note = Some(format!("Not measured: {reason}. {note}"));
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
        let stem = file_stem(&model_name, p, cfg.batch);
        let path = args.out.join(format!("{stem}.estimate.json"));
        write_atomic(&path, serde_json::to_string_pretty(&rep)?.as_bytes())?;
        reports.push((path, rep));
    }
    Ok(MeasureResult {
        reports,
        measured: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_now_is_iso8601() {
        let s = utc_now();
        assert_eq!(s.len(), 20, "{s}");
        assert!(s.starts_with("20") && s.ends_with('Z'));
    }

    #[test]
    fn file_stems_are_safe() {
        assert_eq!(file_stem("Qwen2-0.5B", "F16", 1), "Qwen2-0.5B_FP16_b1");
        assert_eq!(
            file_stem("../../etc/x y", "Q4_K", 4),
            ".._.._etc_x_y_Q4_K_b4"
        );
    }
}
