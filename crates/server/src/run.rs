//! A server run end to end: arms from the model files, the protocol over the card(s), one report
//! per arm (each naming its own file and the server that answered), or the labelled estimate
//! when there is no GPU to read.

use super::{Launch, ServerFactory, ServerOptions};
use crate::{Result, ServerError};
use meter::decoder::Decoder;
use meter::fallback::{estimate_reports, EstimateTarget, MeasureResult};
use meter::files::{hostname, report_path, sha256_file, utc_now, write_report};
use meter::meter::{Clock, EnergyMeter};
use meter::protocol::{self, ProtocolConfig};
use meter::run_report::{self, build_report, RunContext, WeightsInfo};
use report::Precision;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A server measurement as the CLI asked for it.
#[derive(Debug, Clone)]
pub struct ServerRun {
    /// How to reach the server(s), and how to drive them.
    pub server: ServerOptions,
    /// Tokens, iterations, warm-ups, concurrency (`batch`), cooldown, seed. Its `precisions` and
    /// `baseline` are set from the arms by [`ServerRun::arm_protocol`].
    pub protocol: ProtocolConfig,
    /// Output directory.
    pub out: PathBuf,
    /// Output file name stem (default: from the model and precision).
    pub name: Option<String>,
    /// The card to estimate for when there is no GPU.
    pub card: Option<String>,
    /// Parameters, billions, for an external server (a started one reads them from its file).
    pub params_b: Option<f64>,
    /// Model name for an external server's reports.
    pub model_name: Option<String>,
}

impl ServerRun {
    /// The protocol with every arm requested and the FP16-class arm (F16, else BF16) as the
    /// baseline, so each report carries its Δ against the float file served in the same run.
    pub fn arm_protocol(&self, arms: &[Precision]) -> ProtocolConfig {
        let baseline = [Precision::Fp16, Precision::Bf16]
            .into_iter()
            .find(|b| arms.contains(b));
        ProtocolConfig {
            precisions: arms.to_vec(),
            baseline,
            perplexity: None,
            ..self.protocol.clone()
        }
    }

    /// A context or prompt-set run needs llama.cpp's /completion
    /// ([`ServerError::ContextNeedsLlamaApi`]): refused before any server is started or asked,
    /// and before any estimate is written.
    fn check_api(&self) -> Result<()> {
        let phases = self.protocol.context.is_some() || self.protocol.prompts.is_some();
        if phases && self.server.api != crate::Api::Llama {
            return Err(ServerError::ContextNeedsLlamaApi(
                self.server.api.path().into(),
            ));
        }
        Ok(())
    }

    /// Each arm's precision, model name, size (billions) and weights, in the order given.
    fn arms(&self) -> Result<Vec<(Precision, String, f64, WeightsInfo)>> {
        self.check_api()?;
        match &self.server.launch {
            Launch::Start { models, .. } => {
                // Real files are named as our engines name them (their common stem), so one
                // model's rows pair across stacks; a GGUF's own general.name is often a
                // training-run label.
                let paths: Vec<PathBuf> = models.iter().map(|m| m.path.clone()).collect();
                let real_name = run_report::model_name_of(&paths);
                models
                    .iter()
                    .map(|m| {
                        let (h, n) = sha256_file(&m.path)?;
                        let file = m
                            .path
                            .file_name()
                            .map(|f| f.to_string_lossy().into_owned())
                            .unwrap_or_default();
                        let name = m.info.name.clone().unwrap_or_else(|| stem_of(&m.path));
                        let synthetic = WeightsInfo::from_synthetic_name(&name).is_some();
                        let weights =
                            WeightsInfo::from_synthetic_name(&name).unwrap_or(WeightsInfo::Real {
                                path: m.path.display().to_string(),
                                files: vec![(file, h, n)],
                            });
                        // A synthetic file stands for its shape, named as the candle engine names it:
                        // every arm of a run is then one model, whatever type its file has.
                        let name = match run_report::synthetic_model_of(&name) {
                            Some(model) => format!("{model} (synthetic weights)"),
                            None if synthetic => name,
                            None => real_name.clone(),
                        };
                        Ok((m.precision, name, m.info.params as f64 / 1e9, weights))
                    })
                    .collect()
            }
            Launch::External { url, precision } => {
                let params_b = self.params_b.ok_or(ServerError::ParamsUnknown)?;
                let name = self
                    .model_name
                    .clone()
                    .unwrap_or_else(|| "served model".into());
                Ok(vec![(
                    *precision,
                    name,
                    params_b,
                    WeightsInfo::Real {
                        path: format!("served by {url} (the files are the server's)"),
                        files: Vec::new(),
                    },
                )])
            }
        }
    }
}

fn stem_of(p: &Path) -> String {
    p.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into())
}

/// Run the protocol over the server arms on `meter` and write one report per arm.
pub fn measure_served(
    run: &ServerRun,
    meter: &mut dyn EnergyMeter,
    clock: Arc<dyn Clock>,
) -> Result<MeasureResult> {
    let arms = run.arms()?;
    let precisions: Vec<Precision> = arms.iter().map(|a| a.0).collect();
    let cfg = run.arm_protocol(&precisions);
    let mut factory = ServerFactory::new(run.server.clone());
    let outcome = protocol::run(&cfg, meter, &mut factory, clock).map_err(meter::Error::from)?;
    let timestamp = utc_now();
    let mut reports = Vec::new();
    let mut measured = false;
    for (precision, model_name, params_b, weights) in arms {
        let ctx = RunContext {
            model_name: model_name.clone(),
            params_b,
            weights,
            engine: "server".into(),
            engine_version: String::new(),
            timestamp_utc: timestamp.clone(),
            host: hostname(),
        };
        let mut rep = build_report(&cfg, &outcome, &ctx, precision)?;
        measured |= rep.results.basis == report::Basis::Measured;
        let path = report_path(
            &run.out,
            run.name.as_deref(),
            precisions.len() > 1,
            (&model_name, precision, cfg.batch),
            "_server",
            "",
        );
        write_report(&path, &mut rep)?;
        reports.push((path, rep));
    }
    Ok(MeasureResult { reports, measured })
}

/// No GPU to read: the labelled estimate for every arm, with the reason. A server someone else
/// started is asked first whether it answers at all: a wrong URL is an error, not an estimate
/// that looks like a run.
pub fn estimate_served(run: &ServerRun, reason: &str) -> Result<MeasureResult> {
    run.check_api()?;
    if let crate::Launch::External { url, .. } = &run.server.launch {
        let timeout = std::time::Duration::from_secs(5);
        crate::client::Client::new(url, timeout, timeout)?.get("/v1/models", timeout)?;
    }
    let arms = run.arms()?;
    let model_name = arms.first().map(|a| a.1.clone()).unwrap_or_default();
    let sizes: Vec<(Precision, f64)> = arms.iter().map(|a| (a.0, a.2)).collect();
    let cfg = run.arm_protocol(&sizes.iter().map(|a| a.0).collect::<Vec<_>>());
    estimate_reports(
        &EstimateTarget {
            out: &run.out,
            card: run.card.as_deref(),
            model_name: &model_name,
            arms: &sizes,
            name: run.name.as_deref(),
            suffix: "_server",
        },
        &cfg,
        reason,
    )
    .map_err(ServerError::from)
}

/// `measure --server-cmd` / `--server` on this machine: the NVML meters of `gpus` summed, or
/// the labelled estimate when NVML cannot read them.
#[cfg(feature = "nvml")]
pub fn run_served(run: &ServerRun, gpus: &[u32]) -> Result<MeasureResult> {
    use meter::meter::RealClock;
    use meter::multi_meter::SumMeter;
    use meter::nvml_meter::NvmlMeter;
    let mut meters: Vec<(u32, Box<dyn EnergyMeter + Send>)> = Vec::new();
    for &g in gpus {
        match NvmlMeter::open_visible(g) {
            Ok(m) => meters.push((m.nvml_index(), Box::new(m))),
            Err(e) => return estimate_served(run, &e.to_string()),
        }
    }
    let mut meter = SumMeter::new(meters).map_err(meter::Error::from)?;
    measure_served(run, &mut meter, Arc::new(RealClock::default()))
}

/// What `measure --dry-run` found for one server arm.
#[derive(Debug, Clone)]
pub struct DryRunArm {
    /// The arm.
    pub precision: Precision,
    /// The answer, or why there was none (the server's last words where it died).
    pub outcome: std::result::Result<DryRunAnswer, String>,
}

/// One request's answer in a dry run.
#[derive(Debug, Clone)]
pub struct DryRunAnswer {
    /// Start → ready, s (`None`: a server someone else started).
    pub ready_s: Option<f64>,
    /// The engine and version the server named.
    pub engine: String,
    /// Its version, where it gave one.
    pub engine_version: Option<String>,
    /// Output tokens of the one request.
    pub tokens: u64,
    /// Request sent → first output, s.
    pub ttft_s: f64,
    /// Request sent → stream closed, s.
    pub total_s: f64,
}

/// `measure --server-cmd … --dry-run` (or `--server URL --dry-run`): start each arm's server
/// (or reach the running one), stream one request of `tokens` new tokens, stop it. No meter is
/// read and no report is written: a way to check a command line on a laptop before a GPU run.
/// Every arm is tried, a failing one does not stop the others.
pub fn dry_run_served(run: &ServerRun, tokens: usize) -> Result<Vec<DryRunArm>> {
    let factory = ServerFactory::new(run.server.clone());
    let mut out = Vec::new();
    for precision in factory.precisions() {
        let outcome = factory
            .attach(precision)
            .map_err(|e| e.to_string())
            .and_then(|mut d| {
                d.generate(1, run.protocol.prompt_len, tokens)
                    .map_err(|e| e.to_string())?;
                let rec = d.records.last().ok_or("the server answered nothing")?;
                Ok(DryRunAnswer {
                    ready_s: d.ready_s,
                    engine: d.identity.engine.clone(),
                    engine_version: d.identity.version.clone(),
                    tokens: rec.tokens,
                    ttft_s: rec.ttft_s,
                    total_s: rec.total_s,
                })
                // `d` drops here: a started server is stopped before the next arm starts.
            });
        out.push(DryRunArm { precision, outcome });
    }
    Ok(out)
}
