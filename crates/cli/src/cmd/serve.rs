//! `quantenergy measure --server-cmd … --model-file …` and `--server URL`: the server path's
//! arguments, parsed once into the meter's typed [`ServerRun`].

use super::measure::MeasureArgs;
use anyhow::{bail, Context, Result};
use clap::Args;
use meter::fallback::MeasureResult;
use meter::model_file;
use meter::server::run::ServerRun;
use meter::server::{Api, Launch, ServedModel, ServerOptions};
use report::Precision;
use std::path::PathBuf;
use std::time::Duration;

/// `--gpu`: NVML indices to meter (`0,1`), or a card name to estimate for (`"RTX 4090"`).
#[derive(Debug, Clone, PartialEq)]
pub enum GpuSel {
    /// GPU indices.
    Indices(Vec<u32>),
    /// A card name (no-GPU estimates).
    Card(String),
}

impl GpuSel {
    /// The card name, if this names one.
    pub fn card(&self) -> Option<String> {
        match self {
            GpuSel::Card(c) => Some(c.clone()),
            GpuSel::Indices(_) => None,
        }
    }
    /// One GPU index for the candle path (which decodes on one card).
    pub fn single_index(&self) -> Result<Option<u32>, String> {
        match self {
            GpuSel::Indices(v) if v.len() == 1 => Ok(Some(v[0])),
            GpuSel::Indices(v) => Err(format!(
                "--gpu {v:?}: the candle engine decodes on one GPU; several GPUs are for --server-cmd / --server"
            )),
            GpuSel::Card(_) => Ok(None),
        }
    }
}

/// `0,1,…` (all integers) → indices; anything else → a card name.
pub fn parse_gpu(s: &str) -> Result<GpuSel, String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if parts
        .iter()
        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    {
        let idx: Vec<u32> = parts
            .iter()
            .map(|p| p.parse::<u32>().map_err(|e| format!("GPU index {p}: {e}")))
            .collect::<Result<_, _>>()?;
        let mut uniq = idx.clone();
        uniq.sort_unstable();
        uniq.dedup();
        if uniq.len() != idx.len() {
            return Err(format!("GPU index listed twice in {s:?}"));
        }
        return Ok(GpuSel::Indices(idx));
    }
    if s.trim().is_empty() {
        return Err("empty --gpu".into());
    }
    Ok(GpuSel::Card(s.trim().to_string()))
}

/// `--model-file [PRECISION=]PATH`.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelFileArg {
    /// The precision the user named, if any (else read from the file).
    pub precision: Option<Precision>,
    /// The file or directory.
    pub path: PathBuf,
}

fn parse_model_file(s: &str) -> Result<ModelFileArg, String> {
    if let Some((p, path)) = s.split_once('=') {
        if let Ok(p) = p.parse::<Precision>() {
            return Ok(ModelFileArg {
                precision: Some(p),
                path: path.into(),
            });
        }
    }
    Ok(ModelFileArg {
        precision: None,
        path: s.into(),
    })
}

fn parse_api() -> impl clap::builder::TypedValueParser<Value = Api> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(Api::ALL.map(Api::as_str))
        .try_map(|s| s.parse::<Api>())
}

/// The server path's arguments (flattened into `measure`).
#[derive(Args, Debug, Clone)]
pub struct ServerArgs {
    /// Measure an inference server the meter starts itself, once per --model-file arm, e.g.
    /// "llama-server -m {model} --port {port} -ngl 999" or "vllm serve {model} --port {port}".
    /// {model} and {port} are filled in per arm; arms run in the protocol's seeded order with
    /// cooldown and the idle reference, the F16 file is the baseline.
    #[arg(long, conflicts_with_all = ["synthetic", "model", "server"], requires = "model_files")]
    pub server_cmd: Option<String>,
    /// A model served by --server-cmd, one per arm: a .gguf file, a .safetensors file or a Hugging
    /// Face directory. The precision is read from the file; name it as PRECISION=PATH where the
    /// file cannot say (e.g. an AWQ directory: INT4=/models/x-awq).
    #[arg(long = "model-file", value_parser = parse_model_file, requires = "server_cmd")]
    pub model_files: Vec<ModelFileArg>,
    /// Measure a server someone else started (one arm, labelled external): its base URL, e.g.
    /// http://127.0.0.1:11434. Needs --precision (one) and --params-b.
    #[arg(long, conflicts_with_all = ["synthetic", "model"])]
    pub server: Option<String>,
    /// The API to drive: completions (/v1/completions), chat (/v1/chat/completions) or llama
    /// (llama.cpp's /completion).
    #[arg(long, default_value = "completions", value_parser = parse_api())]
    pub api: Api,
    /// The `model` field of OpenAI requests (default: the first id the server lists on /v1/models).
    #[arg(long)]
    pub served_model: Option<String>,
    /// Size of an external server's model, billions of parameters.
    #[arg(long)]
    pub params_b: Option<f64>,
    /// Longest wait for a started server to answer /health, seconds.
    #[arg(long, default_value_t = 600.0)]
    pub ready_timeout_s: f64,
    /// Longest one request may take, seconds.
    #[arg(long, default_value_t = 600.0)]
    pub request_timeout_s: f64,
    /// Longest the stream may stay silent, seconds.
    #[arg(long, default_value_t = 120.0)]
    pub stall_timeout_s: f64,
}

impl ServerArgs {
    /// Whether this is a server run.
    pub fn is_server(&self) -> bool {
        self.server_cmd.is_some() || self.server.is_some()
    }
}

fn secs(s: f64, what: &str) -> Result<Duration> {
    Duration::try_from_secs_f64(s)
        .with_context(|| format!("{what}: {s} is not a duration in seconds"))
}

/// Each --model-file read: its precision (named or from the file), size and parameters.
fn served_models(files: &[ModelFileArg]) -> Result<Vec<ServedModel>> {
    let mut models: Vec<ServedModel> = Vec::new();
    for f in files {
        let info = model_file::inspect(&f.path)?;
        let precision = match (f.precision, info.precision) {
            (Some(p), _) | (None, Some(p)) => p,
            (None, None) => bail!(
                "{}: cannot tell its precision from the file (weights: {}); name it as PRECISION=PATH",
                f.path.display(),
                info.weight_types.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>().join(", ")
            ),
        };
        if let Some(other) = models.iter().find(|m| m.precision == precision) {
            bail!(
                "{} and {} are both {precision}: one file per precision (one arm each)",
                other.path.display(),
                f.path.display()
            );
        }
        models.push(ServedModel {
            precision,
            path: f.path.clone(),
            info,
        });
    }
    Ok(models)
}

/// The typed server run for `args`.
pub fn server_run(args: &MeasureArgs) -> Result<ServerRun> {
    let s = &args.server;
    let launch = match (&s.server_cmd, &s.server) {
        (Some(cmd), _) => Launch::Start {
            command: cmd.clone(),
            models: served_models(&s.model_files)?,
            log_dir: args.out.join("server-logs"),
        },
        (None, Some(url)) => {
            let [precision] = args.precision.as_slice() else {
                bail!(
                    "--server measures one model: give exactly one --precision (got {:?})",
                    args.precision
                );
            };
            Launch::External {
                url: url.clone(),
                precision: *precision,
            }
        }
        (None, None) => bail!("neither --server-cmd nor --server"),
    };
    if args.perplexity {
        bail!("--perplexity needs the model's logits: it is not scored on the server path");
    }
    Ok(ServerRun {
        server: ServerOptions {
            launch,
            api: s.api,
            served_model: s.served_model.clone(),
            ready_timeout: secs(s.ready_timeout_s, "--ready-timeout-s")?,
            request_timeout: secs(s.request_timeout_s, "--request-timeout-s")?,
            stall_timeout: secs(s.stall_timeout_s, "--stall-timeout-s")?,
            seed: args.seed,
        },
        protocol: args.protocol(),
        out: args.out.clone(),
        name: args.name.clone(),
        card: args.gpu.as_ref().and_then(GpuSel::card),
        params_b: s.params_b,
        model_name: s.served_model.clone(),
    })
}

/// Run the server path on the GPUs of `--gpu` (default 0).
pub fn run(args: &MeasureArgs) -> Result<MeasureResult> {
    let run = server_run(args)?;
    let gpus = match &args.gpu {
        Some(GpuSel::Indices(v)) => v.clone(),
        _ => vec![args.device],
    };
    Ok(meter::server::run::run_served(&run, &gpus)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_is_indices_or_a_card() {
        assert_eq!(parse_gpu("0,1").unwrap(), GpuSel::Indices(vec![0, 1]));
        assert_eq!(parse_gpu("3").unwrap(), GpuSel::Indices(vec![3]));
        assert_eq!(
            parse_gpu("RTX 4090").unwrap(),
            GpuSel::Card("RTX 4090".into())
        );
        assert!(parse_gpu("0,0").unwrap_err().contains("twice"));
        assert!(parse_gpu(" ").is_err());
        assert!(GpuSel::Indices(vec![0, 1])
            .single_index()
            .unwrap_err()
            .contains("one GPU"));
        assert_eq!(GpuSel::Indices(vec![2]).single_index(), Ok(Some(2)));
    }

    #[test]
    fn model_files_name_their_precision_or_not() {
        let a = parse_model_file("Q4_K=/m/a.gguf").unwrap();
        assert_eq!(
            (a.precision, a.path),
            (Some(Precision::Q4K), PathBuf::from("/m/a.gguf"))
        );
        let b = parse_model_file("/m/x=y.gguf").unwrap();
        assert_eq!((b.precision, b.path), (None, PathBuf::from("/m/x=y.gguf")));
    }
}
