//! The engines' error type: why a model could not be loaded, decoded or scored. It reaches the
//! protocol boxed inside [`meter::decoder::DecodeError::Backend`], its words and causes intact.

use meter::decoder::DecodeError;
use report::Precision;
use std::path::PathBuf;

/// Why a candle engine could not load a model, decode, synchronize, tokenize or score. Its
/// `Display` names what failed (the path, the field, the precision); the cause, where there is
/// one, is its [`std::error::Error::source`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A third-party loader (candle's GGUF or safetensors reader) panicked on this input.
    #[error("{source_name}: the model loader failed on this file (it panicked: {message})")]
    LoaderPanic {
        /// The file or directory being loaded.
        source_name: String,
        /// The panic's message.
        message: String,
    },
    /// The engine does not run this precision.
    #[error(
        "unsupported precision {0}: the candle engine runs FP32, FP16, BF16, Q8_0, Q4_0, Q4_K, Q5_K or Q6_K"
    )]
    UnsupportedPrecision(Precision),
    /// The engine has no model for this family.
    #[error("unsupported model family {0:?} (llama, qwen2)")]
    UnsupportedFamily(String),
    /// A model file or directory could not be opened, read or written; `action` is what was
    /// being done ("opening", "reading", "writing", "creating").
    #[error("{action} {}", path.display())]
    Io {
        /// What was being done to the file (e.g. "read").
        action: &'static str,
        /// The file concerned.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A Hugging Face directory without weights.
    #[error("{}: no *.safetensors files", .0.display())]
    NoSafetensors(PathBuf),
    /// `config.json` is not JSON.
    #[error("{}: not JSON", path.display())]
    ConfigJson {
        /// The config file that did not parse.
        path: PathBuf,
        /// The JSON parse error.
        #[source]
        source: serde_json::Error,
    },
    /// `config.json` lacks a field the shape needs (or it is not an integer).
    #[error("{}: missing integer `{field}`", path.display())]
    ConfigField {
        /// The `config.json` concerned.
        path: PathBuf,
        /// The missing field.
        field: String,
    },
    /// `config.json` names a `model_type` the engine does not run.
    #[error("{}: model_type {model_type:?} is not supported (llama, mistral, qwen2)", path.display())]
    UnsupportedModelType {
        /// The `config.json` concerned.
        path: PathBuf,
        /// The `model_type` it names.
        model_type: String,
    },
    /// A file that should be GGUF cannot be parsed as GGUF.
    #[error("{}: not a GGUF file", path.display())]
    NotGguf {
        /// The weights file concerned.
        path: PathBuf,
        /// The loader's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A GGUF file lacks a metadata key or tensor the shape needs.
    #[error("{}: missing {key}", path.display())]
    GgufMissing {
        /// The GGUF file concerned.
        path: PathBuf,
        /// The missing metadata key or tensor name.
        key: String,
    },
    /// A GGUF file of an architecture the engine does not run.
    #[error("{}: GGUF architecture {arch:?} is not supported (llama, qwen2)", path.display())]
    UnsupportedGgufArchitecture {
        /// The GGUF file concerned.
        path: PathBuf,
        /// The architecture it names.
        arch: String,
    },
    /// A GGUF file holds one precision (its `general.file_type`); another was asked for.
    /// `found` describes what the file holds.
    #[error(
        "{} is not a {requested} file ({}): a GGUF file is one precision",
        path.display(),
        found.as_deref().unwrap_or("no 2-D weights")
    )]
    WrongQuantization {
        /// The weights file concerned.
        path: PathBuf,
        /// The weight type found in the file, if any.
        found: Option<String>,
        /// The precision that was requested.
        requested: Precision,
    },
    /// A set of GGUF files holds no file of an arm's precision.
    #[error("no {requested} file among the model's GGUF files: {files}")]
    NoGgufOfPrecision {
        /// The precision that was requested.
        requested: Precision,
        /// Each file and what it holds.
        files: String,
    },
    /// A GGUF weight source was given no file.
    #[error("no GGUF file given")]
    NoGgufFiles,
    /// The files of one GGUF weight source are of different model shapes.
    #[error("{} and {} are different models (their shapes differ): one model, one file per precision", first.display(), other.display())]
    GgufShapesDiffer {
        /// The first file.
        first: PathBuf,
        /// The file whose shape differs.
        other: PathBuf,
    },
    /// Perplexity needs the model's tokenizer and there is none.
    #[error(
        "no tokenizer at {}: perplexity needs the model's tokenizer.json{}",
        path.display(),
        match embedded {
            Some(why) => format!(" beside the GGUF file, and the GGUF's own tokenizer cannot be used: {why}"),
            None => String::new(),
        }
    )]
    NoTokenizer {
        /// Where the tokenizer.json was looked for.
        path: PathBuf,
        /// Beside a GGUF file: why the tokenizer in its metadata cannot be used.
        embedded: Option<String>,
    },
    /// The tokenizer failed; `action` is what it was doing ("loading", "configuring",
    /// "tokenizing with").
    #[error("{action} {}", path.display())]
    Tokenizer {
        /// What was being done (e.g. "load").
        action: &'static str,
        /// The tokenizer file concerned.
        path: PathBuf,
        /// The tokenizer library's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A GGUF file (or in-memory GGUF) lacks a metadata key the graph engine needs.
    #[error("GGUF metadata {0} missing")]
    GgufMetadata(String),
    /// The graph engine was asked to decode before it had a decode state (a bug).
    #[error("graph engine: no decode state")]
    NoDecodeState,
    /// A decode state longer than the model's rotary table.
    #[error("context {ctx} exceeds the model's rotary table ({max} positions)")]
    ContextTooLong {
        /// Prompt + new tokens asked for.
        ctx: usize,
        /// Positions the rotary table holds.
        max: usize,
    },
    /// A forward fed a batch other than its decode state's.
    #[error("batch {fed} fed to a state of batch {state}")]
    BatchMismatch {
        /// The batch fed.
        fed: usize,
        /// The batch the state was made for.
        state: usize,
    },
    /// A prefill was given no prompt tokens (the first token comes from the prompt's last).
    #[error("a prefill needs at least one prompt token")]
    EmptyPrompt,
    /// A prefill chunk or a decode would write past the decode state's cache.
    #[error("positions up to {end} do not fit the cache's {ctx}")]
    PastCache {
        /// The last position written + 1.
        end: usize,
        /// The cache's positions.
        ctx: usize,
    },
    /// A CUDA graph call of the graph engine failed; `action` is the call ("begin_capture",
    /// "end_capture", "graph upload", "CUDA graph launch"), `detail` the driver's error.
    #[error("{action}: {detail}")]
    CudaGraph {
        /// The call that failed.
        action: &'static str,
        /// The driver's error.
        detail: String,
    },
    /// candle itself failed (a tensor op, a CUDA call, a safetensors or GGUF read …).
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
    /// `--synthetic NAME` names no known architecture (data/models.csv).
    #[error("unknown architecture {name:?} for --synthetic; known: {}", known.join(", "))]
    UnknownArchitecture {
        /// The name given.
        name: String,
        /// The architectures that are known.
        known: Vec<String>,
    },
    /// The binary cannot decode on the GPU it would meter.
    #[error(
        "this binary was built without the `cuda` feature: the decoder would run on the CPU while \
         NVML metered an idle GPU (build with scripts/build-cuda.sh)"
    )]
    NoCuda,
    /// The decoder's protocol-level error (no new token asked, too few tokens to score …).
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

impl From<Error> for DecodeError {
    /// The meter's own variants come back out as themselves; the rest are boxed.
    fn from(e: Error) -> Self {
        match e {
            Error::Decode(d) => d,
            other => DecodeError::backend(other),
        }
    }
}

/// `Result` with the engines' [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
