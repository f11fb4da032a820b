//! The meter's error type for its fallible public functions (reports, files, the overhead A/B)
//! ([`crate::causes::chain`] renders any of them with its causes).
//!
//! Convention: an error's `Display` says what failed (naming the path, the field, the run …) and
//! its cause stays reachable through [`std::error::Error::source`], so a caller that prints the
//! whole chain (`anyhow`'s `{:#}` in the CLI, or [`crate::causes::chain`]) reads
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
    /// A path to read names something other than a regular file (a FIFO, a device, a folder):
    /// reading it could block forever or never end.
    #[error("{}: not a regular file ({kind})", path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What it is instead.
        kind: &'static str,
    },
    /// A file to read is larger than its reader accepts.
    #[error("{}: larger than {limit} bytes", path.display())]
    TooLarge {
        /// The path.
        path: PathBuf,
        /// The most bytes accepted.
        limit: u64,
    },
    /// A text file holds bytes that are not UTF-8.
    #[error("{}: not UTF-8 text (invalid byte at offset {offset})", path.display())]
    NotUtf8 {
        /// The path.
        path: PathBuf,
        /// The first invalid byte.
        offset: usize,
    },
    /// A path to write to that names no file.
    #[error("{} has no file name", .0.display())]
    NoFileName(PathBuf),
    /// Serializing a report or a result to JSON failed.
    #[error("serializing JSON")]
    Json(#[from] serde_json::Error),
    /// A report the meter built fails its own schema or semantic validation (a bug: such a
    /// report is never written).
    #[error("internal error: the report we built does not validate:\n  {}", .0.join("\n  "))]
    InvalidReport(Vec<String>),
    /// `overhead` was asked for other than exactly one precision.
    #[error("overhead measures one precision at a time (got {0:?})")]
    OverheadPrecisions(Vec<report::Precision>),
    /// `overhead` was asked to score perplexity.
    #[error("overhead times decode windows only; --perplexity belongs to `quantenergy measure`")]
    OverheadPerplexity,
    /// `overhead` found no GPU meter (there is nothing to estimate instead).
    #[error("the trace overhead can only be measured on a GPU")]
    OverheadNeedsGpu(#[source] MeterError),
    /// The decoder failed (loading a model, reading its shape, opening the device …).
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::causes::chain;

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
        // A backend's decode error keeps its path and cause through the library's error.
        let e = Error::from(DecodeError::backend(Error::io(
            "reading",
            "/m/config.json",
            std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied"),
        )));
        assert_eq!(chain(&e), "reading /m/config.json: denied");
    }
}
