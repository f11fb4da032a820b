//! The library's error type for its fallible public functions (sessions, reports, plans,
//! campaigns, files), and [`chain`], which renders any error with its causes.
//!
//! Convention: an error's `Display` says what failed (naming the path, the field, the run …) and
//! its cause stays reachable through [`std::error::Error::source`], so a caller that prints the
//! whole chain (`anyhow`'s `{:#}` in the CLI, or [`chain`] here) reads
//! `opening /x/model.gguf: No such file or directory (os error 2)`.

use crate::decoder::DecodeError;
use crate::meter::MeterError;
use crate::overhead::OverheadError;
use crate::protocol::ProtocolError;
use std::path::PathBuf;

/// What a meter library call failed on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file-system call failed; `action` is what was being done to `path` ("opening",
    /// "reading", "creating", "writing", "renaming to").
    #[error("{action} {}", path.display())]
    Io {
        /// What was being done to the file (e.g. "write").
        action: &'static str,
        /// The file concerned.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A path to write to that names no file.
    #[error("{} has no file name", .0.display())]
    NoFileName(PathBuf),
    /// `plan.toml` is not a valid plan (TOML syntax, unknown or mistyped keys).
    #[error("plan.toml")]
    PlanToml(#[source] toml::de::Error),
    /// A `[[run]]` of a plan (numbered from 1) names no model, or both kinds.
    #[error("plan.toml: run {run}: give exactly one of `synthetic` or `model`")]
    PlanModel {
        /// The run's number, from 1.
        run: usize,
    },
    /// A plan's `card` is not a card name.
    #[error("plan.toml: card {0:?}: name a card (e.g. \"H200\"), not GPU numbers")]
    PlanCard(String),
    /// A plan's `session` is not a plain label.
    #[error("plan.toml: session {0:?}: use letters, digits, `.`, `-` and `_` only")]
    PlanSession(String),
    /// A `[[run]]` of a plan (numbered from 1) lists no precision.
    #[error("plan.toml: run {run}: `precisions` is empty")]
    PlanPrecisions {
        /// The run's number, from 1.
        run: usize,
    },
    /// A `[[run]]` of a plan (numbered from 1) is a server run that cannot run as written.
    #[error("plan.toml: run {run}: {why}")]
    PlanServer {
        /// The run's number, from 1.
        run: usize,
        /// What is wrong with it.
        why: String,
    },
    /// Serializing a report or a result to JSON failed.
    #[error("serializing JSON")]
    Json(#[from] serde_json::Error),
    /// Writing CSV rows failed.
    #[error("writing CSV")]
    Csv(#[from] csv::Error),
    /// The CSV writer produced bytes that are not UTF-8.
    #[error("the CSV output is not UTF-8")]
    CsvUtf8(#[from] std::string::FromUtf8Error),
    /// A report the meter built fails its own schema or semantic validation (a bug: such a
    /// report is never written).
    #[error("internal error: the report we built does not validate:\n  {}", .0.join("\n  "))]
    InvalidReport(Vec<String>),
    /// `--synthetic NAME` names no known architecture (data/models.csv).
    #[error("unknown architecture {name:?} for --synthetic; known: {}", known.join(", "))]
    UnknownArchitecture {
        /// The name given.
        name: String,
        /// The architectures that are known.
        known: Vec<String>,
    },
    /// `--model PATH` is neither a directory nor a `.gguf` file.
    #[error("{}: expected a model directory or a .gguf file", .0.display())]
    NotAModel(PathBuf),
    /// The binary cannot decode on the GPU it would meter.
    #[error(
        "this binary was built without the `cuda` feature: the decoder would run on the CPU while \
         NVML metered an idle GPU (build with scripts/build-cuda.sh)"
    )]
    NoCuda,
    /// `overhead` was asked for other than exactly one precision.
    #[error("overhead measures one precision at a time (got {0:?})")]
    OverheadPrecisions(Vec<report::Precision>),
    /// `overhead` was asked to score perplexity.
    #[error("overhead times decode windows only; --perplexity belongs to `quantenergy measure`")]
    OverheadPerplexity,
    /// `overhead` found no GPU meter (there is nothing to estimate instead).
    #[error("the trace overhead can only be measured on a GPU")]
    OverheadNeedsGpu(#[source] MeterError),
    /// An external server's size was not given (`--params-b`).
    #[error(
        "an external server's model size is unknown: pass --params-b (billions of parameters)"
    )]
    ServerParamsUnknown,
    /// A model file given to a server run could not be inspected.
    #[error(transparent)]
    ModelFile(#[from] crate::model_file::ModelFileError),
    /// A server arm could not be set up.
    #[error(transparent)]
    Server(#[from] crate::server::ServerError),
    /// The decode engine failed (loading a model, reading its shape, opening the device …).
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The meter failed.
    #[error(transparent)]
    Meter(#[from] MeterError),
    /// The measurement protocol refused or aborted the run.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// The trace-overhead A/B failed.
    #[error(transparent)]
    Overhead(#[from] OverheadError),
}

impl Error {
    /// An I/O error on `path` while doing `action`.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// `Result` with the meter's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error and its causes on one line, joined by `": "` as `anyhow` prints them with `{:#}`: the
/// text reports keep when an error becomes a string (a failed arm, a failed score). A cause whose
/// text the message already ends with is not repeated (some errors print their cause themselves).
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !text.is_empty() && !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_joins_causes_once() {
        let e = Error::io(
            "opening",
            "/x/y.gguf",
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
        );
        assert_eq!(e.to_string(), "opening /x/y.gguf");
        assert_eq!(chain(&e), "opening /x/y.gguf: no such file");
        // A transparent wrapper adds nothing; a cause follows its context.
        let e = Error::Meter(MeterError::Lost("gone".into()));
        assert_eq!(chain(&e), "the GPU disappeared: gone");
        let e = Error::OverheadNeedsGpu(MeterError::Unavailable("no driver".into()));
        assert_eq!(
            chain(&e),
            "the trace overhead can only be measured on a GPU: no GPU meter available: no driver"
        );
        // A decode error keeps its path and cause through the library's error.
        let e = Error::from(DecodeError::Io {
            action: "reading",
            path: "/m/config.json".into(),
            source: std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied"),
        });
        assert_eq!(chain(&e), "reading /m/config.json: denied");
    }

    /// An error that prints its cause in its own message and also exposes it as its source (as
    /// `MeterError::Nvml` does).
    #[derive(Debug, thiserror::Error)]
    #[error("NVML: {0}")]
    struct PrintsItsCause(#[from] std::io::Error);

    #[test]
    fn chain_does_not_repeat_a_cause_the_message_already_ends_with() {
        let e = PrintsItsCause(std::io::Error::other("GPU is lost"));
        assert_eq!(chain(&e), "NVML: GPU is lost");
    }
}
