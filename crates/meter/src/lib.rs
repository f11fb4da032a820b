//! The quantenergy instrument: it measures decode energy per token on an NVIDIA GPU and writes the
//! `energy.json` reports the page reads. Hardware sits behind traits with fakes, so everything but
//! the NVML calls is tested on a machine without a GPU. What decodes plugs in through
//! [`decoder::Decoder`]: the candle engines (crate `engine`) and served models (crate `server`).
//!
//! | module | what it holds | feature |
//! |---|---|---|
//! | [`meter`] | the [`meter::EnergyMeter`] trait, a scripted fake, clocks, host CPU readings | – |
//! | `nvml_meter` | the NVML implementation of the meter, and `probe` | `nvml` |
//! | [`multi_meter`] | several cards metered as one (`--gpu 0,1`) | – |
//! | [`sampler`] | the power-trace thread and its trapezoid integral | – |
//! | [`decoder`] | the [`decoder::Decoder`] / [`decoder::DecoderFactory`] traits, [`decoder::EngineKind`], a fake | – |
//! | [`served`] | what a served arm tells the report (who served it, its streamed latency) | – |
//! | [`protocol`] | idle reference, pre-flight, counterbalanced arm order, cooldown, one metered window per arm, perplexity | – |
//! | [`overhead`] | the trace-thread A/B (paired windows, 95 % interval) | – |
//! | [`roofline`] | re-export of `analysis::weight_reads`: the bytes of weights a decode step reads, and their share of the card's memory bandwidth | – |
//! | [`run_report`] | a protocol outcome → a typed, validated `report::Report` | – |
//! | [`fallback`] | no GPU: the labelled dataset estimate per arm, or a report with no figure | – |
//! | [`scheduler`] | the Slurm job around a run; `CUDA_VISIBLE_DEVICES` resolved to cards by UUID | – |
//! | [`interrupt`] | SIGINT/SIGTERM/SIGHUP: kill started servers, remove a temp file, die of the signal | – |
//! | [`files`] | atomic writes, safe file names, digests, time stamps | – |
//! | [`testing`] | what tests of the meter's users share: a wall-clock meter, the simulated H200 | – |
//! | [`error`] | the library's [`Error`] | – |
//! | [`causes`] | [`causes::chain`]: an error with its causes on one line | – |
//!
//! Errors are typed: [`decoder::DecodeError`] from decoders (a backend's own error boxed inside),
//! [`meter::MeterError`] from the meter, [`protocol::ArmFailure`] / [`protocol::ScoreError`] for
//! an arm (or its perplexity score) that has no figure, [`protocol::ProtocolError`] /
//! [`overhead::OverheadError`] for a run that cannot start, and [`Error`] for the rest.

#![warn(missing_docs)]

/// This meter's build as reports name it (`stack.meter_build`): version and commit (build.rs).
pub const METER_BUILD: &str = env!("QE_METER_BUILD");

pub mod causes;
pub mod decoder;
pub mod error;
pub mod fallback;
pub mod files;
pub mod interrupt;
pub mod meter;
pub mod multi_meter;
#[cfg(feature = "nvml")]
pub mod nvml_meter;
pub mod overhead;
pub mod prompts;
pub mod protocol;
/// The weight-read arithmetic lives in `analysis` (pure); the meter fills it from what it loaded.
pub use analysis::weight_reads as roofline;
pub mod run_report;
pub mod sampler;
pub mod scheduler;
pub mod served;
pub mod testing;

pub use error::{Error, Result};
