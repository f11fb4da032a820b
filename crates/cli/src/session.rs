//! `quantenergy measure` and `quantenergy sweep`: wire the CLI arguments to the meter, the decode
//! engine and the protocol; fall back to a clearly labelled dataset estimate when no GPU can be
//! measured.

use crate::cmd::measure::options::{MeasureOptions, ModelSpec};
use anyhow::{anyhow, Context, Result};
use engine::eager::{CandleFactory, WeightSource, CANDLE_VERSION};
use meter::files::{
    file_stem, hostname, report_path, sha256_file, utc_now, write_atomic, write_report,
};
use meter::meter::{EnergyMeter, RealClock};
use meter::nvml_meter::NvmlMeter;
use meter::protocol::{self, ProtocolConfig};
use meter::run_report::{build_report, RunContext, WeightsInfo};
use meter::Error;
use std::path::PathBuf;
use std::sync::Arc;

impl MeasureOptions {
    /// Resolve the model spec into a weight source (a synthetic name must be a known shape; a
    /// path must be a directory or a `.gguf` file).
    pub fn source(&self) -> Result<WeightSource> {
        match &self.model {
            ModelSpec::Synthetic(name) => {
                let shape = analysis::find_shape(name).ok_or_else(|| {
                    engine::Error::UnknownArchitecture {
                        name: name.clone(),
                        known: analysis::shapes().iter().map(|s| s.name.clone()).collect(),
                    }
                })?;
                Ok(WeightSource::Synthetic {
                    shape: shape.clone(),
                    seed: self.protocol.seed,
                })
            }
            ModelSpec::GgufFiles(paths) => {
                for path in paths {
                    if !path.is_file() {
                        return Err(anyhow!("{}: no such file", path.display()));
                    }
                    if path.extension().is_none_or(|e| e != "gguf") {
                        return Err(anyhow!(
                            "{}: our engines read one .gguf file per arm (other formats: \
                             --server-cmd, or --model DIR)",
                            path.display()
                        ));
                    }
                }
                Ok(WeightSource::Gguf(paths.clone()))
            }
            ModelSpec::Path(path) if path.is_dir() => Ok(WeightSource::HfDir(path.clone())),
            ModelSpec::Path(path) if path.extension().is_some_and(|e| e == "gguf") => {
                Ok(WeightSource::Gguf(vec![path.clone()]))
            }
            ModelSpec::Path(path) if !path.exists() => {
                Err(anyhow!("{}: no such file or folder", path.display()))
            }
            ModelSpec::Path(path) => Err(anyhow!(
                "{}: expected a model directory or a .gguf file",
                path.display()
            )),
        }
    }
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
            let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
                .with_context(|| format!("reading {}", dir.display()))?
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
        WeightSource::Gguf(paths) => {
            let mut files = Vec::new();
            for p in paths {
                let (h, n) = sha256_file(p)?;
                files.push((file_name(p), h, n));
            }
            let folder = match paths.as_slice() {
                [one] => one.display().to_string(),
                _ => common_folder(paths),
            };
            (
                meter::run_report::model_name_of(paths),
                WeightsInfo::Real {
                    path: folder,
                    files,
                },
            )
        }
    })
}

fn file_name(p: &std::path::Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The folder all the files sit in, or "" where they sit in several.
fn common_folder(paths: &[PathBuf]) -> String {
    let parent = |p: &PathBuf| p.parent().map(|d| d.display().to_string());
    let first = paths.first().and_then(parent);
    if paths.iter().all(|p| parent(p) == first) {
        first.unwrap_or_default()
    } else {
        String::new()
    }
}

pub use meter::fallback::MeasureResult;

/// Run `measure` end to end and write its reports.
pub fn run_measure(opts: &MeasureOptions) -> Result<MeasureResult> {
    let cfg = &opts.protocol;
    let source = opts.source()?;
    let meter = NvmlMeter::open_visible(opts.device).map_err(|e| e.to_string());
    let device = match &meter {
        Ok(_) => engine::cuda_device(opts.device).map_err(|e| format!("{e:#}")),
        Err(e) => Err(e.clone()),
    };
    match (meter, device) {
        (Ok(mut meter), Ok(device)) => measure_on_gpu(opts, cfg, source, &mut meter, device),
        (Err(reason), _) | (_, Err(reason)) => fallback(opts, cfg, &source, &reason),
    }
}

/// Run the protocol on a real meter and device, write one report per requested precision.
pub fn measure_on_gpu(
    opts: &MeasureOptions,
    cfg: &ProtocolConfig,
    source: WeightSource,
    meter: &mut dyn EnergyMeter,
    device: engine::Device,
) -> Result<MeasureResult> {
    // A perplexity Δ needs the quantized arms to be the float arms' weights, quantized.
    let quantize_floats = cfg.perplexity.is_some();
    let (model_name, weights) = weights_info(&source, quantize_floats)?;
    let mut factory = CandleFactory::new(source, device)?;
    factory.quantize_synthetic_floats = quantize_floats;
    let params_b = factory.shape().param_count() as f64 / 1e9;
    let mut factory = engine::factory(opts.engine, factory);
    let clock = Arc::new(RealClock::default());
    let outcome = protocol::run(cfg, meter, factory.as_mut(), clock).map_err(Error::from)?;
    let ctx = RunContext {
        model_name: model_name.clone(),
        params_b,
        weights,
        engine: opts.engine.stack_name().into(),
        engine_version: CANDLE_VERSION.into(),
        timestamp_utc: utc_now(),
        host: hostname(),
    };
    write_reports(opts, cfg, &outcome, &ctx, &model_name)
}

/// Build one report per precision from `outcome` and write each atomically under `opts.out`.
pub fn write_reports(
    opts: &MeasureOptions,
    cfg: &ProtocolConfig,
    outcome: &protocol::Outcome,
    ctx: &RunContext,
    model_name: &str,
) -> Result<MeasureResult> {
    let mut reports = Vec::new();
    let mut measured = false;
    let (name, suffix) = context_names(opts, cfg);
    for &p in &cfg.precisions {
        let mut rep = build_report(cfg, outcome, ctx, p)?;
        measured |= rep.results.basis == report::Basis::Measured;
        let path = report_path(
            &opts.out,
            name.as_deref(),
            cfg.precisions.len() > 1,
            (model_name, p, cfg.batch),
            &suffix,
            "",
        );
        write_report(&path, &mut rep)?;
        reports.push((path, rep));
    }
    Ok(MeasureResult { reports, measured })
}

/// A context run's default file stem carries its depth (`_c<depth>`), a prompt-set run's
/// `_prompts`; a named run keeps its name (`measure` appends the depth itself when one
/// `--context` list names several).
fn context_names(opts: &MeasureOptions, cfg: &ProtocolConfig) -> (Option<String>, String) {
    let suffix = match (&cfg.prompts, cfg.context) {
        (Some(_), _) => "_prompts".to_string(),
        (None, Some(d)) => format!("_c{d}"),
        (None, None) => String::new(),
    };
    (opts.name.clone(), suffix)
}

/// `quantenergy overhead`: the trace-thread A/B on a real GPU (no fallback: there is nothing to
/// estimate). Writes `<out>/<name>.json` atomically and returns the result.
pub fn run_overhead(
    opts: &MeasureOptions,
    pairs: usize,
) -> Result<(PathBuf, meter::overhead::OverheadResult)> {
    let p = &opts.protocol;
    let [precision] = p.precisions.as_slice() else {
        return Err(Error::OverheadPrecisions(p.precisions.clone()).into());
    };
    if p.perplexity.is_some() {
        return Err(Error::OverheadPerplexity.into());
    }
    let cfg = meter::overhead::OverheadConfig {
        precision: *precision,
        pairs,
        iterations: p.iterations,
        tokens: p.tokens,
        batch: p.batch,
        prompt_len: p.prompt_len,
        warmup: p.warmup,
        sample_hz: p.sample_hz,
        seed: p.seed,
    };
    let source = opts.source()?;
    let (model_name, _) = weights_info(&source, false)?;
    let mut meter = NvmlMeter::open_visible(opts.device).map_err(Error::OverheadNeedsGpu)?;
    let device = engine::cuda_device(opts.device)?;
    let mut factory = engine::factory(opts.engine, CandleFactory::new(source, device)?);
    let result = meter::overhead::run(
        &cfg,
        &mut meter,
        factory.as_mut(),
        Arc::new(RealClock::default()),
    )
    .map_err(Error::from)?;
    let stem = opts.name.clone().unwrap_or_else(|| {
        format!(
            "{}_overhead",
            file_stem(
                model_name.split(' ').next().unwrap_or(&model_name),
                cfg.precision,
                cfg.batch
            )
        )
    });
    let path = opts.out.join(format!("{stem}.json"));
    let body = OverheadFile {
        kind: "quantenergy trace-overhead A/B",
        model: &model_name,
        timestamp_utc: utc_now(),
        host: hostname(),
        engine: CANDLE_VERSION,
        stack_engine: opts.engine.stack_name(),
        result: &result,
    };
    write_atomic(&path, serde_json::to_string_pretty(&body)?.as_bytes())?;
    Ok((path, result))
}

/// The file `quantenergy overhead` writes (not an energy report: an A/B of the meter itself).
#[derive(serde::Serialize)]
struct OverheadFile<'a> {
    kind: &'static str,
    model: &'a str,
    timestamp_utc: String,
    host: String,
    engine: &'static str,
    stack_engine: &'static str,
    result: &'a meter::overhead::OverheadResult,
}

/// No GPU we may measure: the dataset estimate, labelled as such, with the reason.
fn fallback(
    opts: &MeasureOptions,
    cfg: &ProtocolConfig,
    source: &WeightSource,
    reason: &str,
) -> Result<MeasureResult> {
    let (params_b, model_name) = match source {
        WeightSource::Synthetic { shape, .. } => (shape.params_b, shape.name.clone()),
        WeightSource::HfDir(d) => {
            let s = engine::eager::shape_from_hf_config(d)?;
            (s.params_b, s.name)
        }
        WeightSource::Gguf(paths) => {
            let first = paths.first().context("no GGUF file given")?;
            let s = engine::eager::shape_from_gguf(first)?;
            (s.params_b, s.name)
        }
    };
    let arms: Vec<_> = cfg.precisions.iter().map(|&p| (p, params_b)).collect();
    let (name, suffix) = context_names(opts, cfg);
    meter::fallback::estimate_reports(
        &meter::fallback::EstimateTarget {
            out: &opts.out,
            card: opts.card.as_deref(),
            model_name: &model_name,
            arms: &arms,
            name: name.as_deref(),
            suffix: &suffix,
        },
        cfg,
        reason,
    )
    .map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gguf_sets_folder_is_its_files_common_folder() {
        let set = |names: &[&str]| -> Vec<PathBuf> {
            names.iter().map(|n| PathBuf::from("/m").join(n)).collect()
        };
        let smol = set(&[
            "SmolLM2-135M-Instruct-F16.gguf",
            "SmolLM2-135M-Instruct-Q8_0.gguf",
            "SmolLM2-135M-Instruct-Q4_K.gguf",
        ]);
        assert_eq!(common_folder(&smol), "/m");
        let apart = vec![PathBuf::from("/a/m.gguf"), PathBuf::from("/b/m.gguf")];
        assert_eq!(common_folder(&apart), "");
    }
}
