//! `quantenergy measure --server-cmd … --model-file …` and `--server URL`: the server path's
//! arguments (`measure` turns them into the server crate's typed `ServerRun`).

use anyhow::{bail, Context, Result};
use clap::Args;
use report::Precision;
use server::{Api, ServedModel};
use std::path::PathBuf;
use std::time::Duration;

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
    /// A model file per arm. With --server-cmd: a .gguf file, a .safetensors file or a Hugging
    /// Face directory, its precision read from the file; name it as PRECISION=PATH where the
    /// file cannot say (e.g. an AWQ directory: INT4=/models/x-awq). Without it, our engines
    /// decode one .gguf file per precision of one model (each arm loads the file that declares
    /// its precision), e.g. --model-file m-F16.gguf --model-file m-Q4_0.gguf.
    #[arg(long = "model-file", value_parser = parse_model_file, conflicts_with_all = ["synthetic", "model", "server"])]
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
    #[arg(long, value_parser = parse_params_b)]
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

pub fn secs(s: f64, what: &str) -> Result<Duration> {
    Duration::try_from_secs_f64(s)
        .with_context(|| format!("{what}: {s} is not a duration in seconds"))
}

/// Each --model-file read: its precision (named or from the file), size and parameters.
pub fn served_models(files: &[ModelFileArg]) -> Result<Vec<ServedModel>> {
    let mut models: Vec<ServedModel> = Vec::new();
    for f in files {
        let info = modelfile::inspect(&f.path)?;
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

/// A model size in billions of parameters: positive, at most [`report::MAX_PARAMS_B`] (what the
/// reports' schema accepts; a larger figure would write a report `validate` refuses).
pub fn parse_params_b(s: &str) -> Result<f64, String> {
    let x: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of billions of parameters"))?;
    if x.is_finite() && x > 0.0 && x <= report::MAX_PARAMS_B {
        Ok(x)
    } else {
        Err(format!(
            "{x} is not a model size: a positive number of billions, at most {}",
            report::MAX_PARAMS_B
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
