//! What `measure`, `sweep` and `overhead` ask of a measurement, typed, as the CLI parses it
//! ([`super::MeasureArgs::options`]) and the session runs it (`crate::session`).

use meter::decoder::EngineKind;
use meter::protocol::ProtocolConfig;
use std::path::PathBuf;

/// Which model a run decodes, as the user named it (resolved by [`MeasureOptions::source`]).
#[derive(Debug, Clone, PartialEq)]
pub enum ModelSpec {
    /// Seeded random weights at a named architecture's exact shapes (data/models.csv).
    Synthetic(String),
    /// A local Hugging Face directory or a `.gguf` file.
    Path(PathBuf),
    /// One `.gguf` file per precision of one model (`--model-file`): each arm decodes its own.
    GgufFiles(Vec<PathBuf>),
}

/// Everything `measure` and `overhead` need besides the hardware: typed, parsed by the CLI.
#[derive(Debug, Clone)]
// Read by the engine path, which the servers-only (`meter`) build leaves out.
#[cfg_attr(not(feature = "gpu"), allow(dead_code))]
pub struct MeasureOptions {
    /// The model to decode.
    pub model: ModelSpec,
    /// Arms, tokens, iterations, cooldown, perplexity … (the seed also seeds synthetic weights).
    pub protocol: ProtocolConfig,
    /// The CUDA device to decode on and meter (0: the first one `CUDA_VISIBLE_DEVICES` leaves
    /// visible); NVML meters the same card, found by UUID.
    pub device: u32,
    /// Output directory for the reports.
    pub out: PathBuf,
    /// Output file name stem (default: derived from model, precision, batch).
    pub name: Option<String>,
    /// Card name to use for the no-GPU estimate (e.g. "RTX 4090").
    pub card: Option<String>,
    /// Decode engine: graph (static KV cache, one CUDA graph per token) or eager (candle's
    /// models op by op). The report's `stack.engine` says which, so the two are never pooled.
    pub engine: EngineKind,
}
