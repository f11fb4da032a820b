//! The quantenergy instrument, as a library: it measures decode energy per token on an NVIDIA GPU
//! and writes the `energy.json` reports the page reads. Hardware sits behind traits with fakes,
//! so everything but the NVML and CUDA calls is tested on a machine without a GPU.
//!
//! | module | what it holds | feature |
//! |---|---|---|
//! | [`meter`] | the [`meter::EnergyMeter`] trait, a scripted fake, clocks, host CPU readings | – |
//! | `nvml_meter` | the NVML implementation of the meter, and `probe` | `nvml` |
//! | [`sampler`] | the power-trace thread and its trapezoid integral | – |
//! | [`decoder`] | the [`decoder::Decoder`] / [`decoder::DecoderFactory`] traits and a fake | – |
//! | `candle` | the candle decode engine: loaders (HF, GGUF, synthetic) and decode loop | `candle` |
//! | [`engine`] | which engine a run uses ([`engine::Engine`]); the graph engine (static KV cache, one CUDA graph per token) and `engine-check` | `candle` (the enum: –) |
//! | [`protocol`] | idle reference, pre-flight, seeded arm order, cooldown, one metered window per arm | – |
//! | [`overhead`] | the trace-thread A/B (paired windows, 95 % interval) | – |
//! | [`roofline`] | re-export of `analysis::weight_reads`: the bytes of weights a decode step reads, and their share of the card's memory bandwidth | – |
//! | [`run_report`] | a protocol outcome → a typed, validated `report::Report` | – |
//! | [`plan`] | sweep plans (`plan.toml`) → one job per repeat, resumable | – |
//! | [`campaign`] | per-report CSV, aggregation into anchors rows, the campaign targets | – |
//! | `session` | `measure` / `overhead` end to end on a GPU, or the labelled no-GPU estimate | `nvml` + `candle` |
//! | [`server`] | `measure --server-cmd` / `--server`: a served model as a decoder (start, drive over HTTP, stop), its reports | – (NVML meters: `nvml`) |
//! | [`multi_meter`] | several cards metered as one (`--gpu 0,1`) | – |
//! | [`model_file`] | GGUF / safetensors headers: precision, parameters, size, without loading weights | – |
//! | [`slurm`] | a sweep plan as a Slurm job array (`sweep --emit slurm`) | – |
//! | [`scheduler`] | the Slurm job around a run; `CUDA_VISIBLE_DEVICES` resolved to cards by UUID | – |
//! | [`fallback`] | no GPU: the labelled dataset estimate per arm | – |
//! | [`interrupt`] | SIGINT/SIGTERM/SIGHUP: kill started servers, remove a temp file, die of the signal | – |
//! | [`files`] | atomic writes, safe file names, digests, time stamps | – |
//! | [`error`] | the library's [`Error`], and [`error::chain`] to render an error with its causes | – |
//!
//! Errors are typed: [`decoder::DecodeError`] from the decode engines, [`meter::MeterError`] from
//! the meter, [`protocol::ArmFailure`] / [`protocol::ScoreError`] for an arm (or its perplexity
//! score) that has no figure, [`protocol::ProtocolError`] / [`overhead::OverheadError`] for a run
//! that cannot start, and [`Error`] for everything else the library's public functions do.

#![warn(missing_docs)]

pub mod campaign;
#[cfg(feature = "candle")]
pub mod candle;
pub mod decoder;
pub mod engine;
pub mod error;
pub mod fallback;
pub mod files;
pub mod interrupt;
pub mod meter;
pub mod model_file;
pub mod multi_meter;
#[cfg(feature = "nvml")]
pub mod nvml_meter;
pub mod overhead;
pub mod plan;
pub mod protocol;
/// The weight-read arithmetic lives in `analysis` (pure); the meter fills it from what it loaded.
pub use analysis::weight_reads as roofline;
pub mod run_report;
pub mod sampler;
pub mod scheduler;
pub mod server;
#[cfg(all(feature = "nvml", feature = "candle"))]
pub mod session;
pub mod slurm;

pub use error::{Error, Result};
