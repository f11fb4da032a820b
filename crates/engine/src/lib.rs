//! quantenergy's decode engines on candle, behind the meter's [`meter::decoder::Decoder`] trait.
//!
//! | module | what it holds |
//! |---|---|
//! | [`eager`] | the eager engine: candle_transformers' Llama and Qwen2 models op by op (F32/F16/BF16, GGUF Q8_0/Q4_0/Q4_K/Q5_K/Q6_K); weights from a Hugging Face directory, a GGUF file or seeded random values (`--synthetic`) |
//! | [`graph`] | the graph engine: a static-KV-cache forward whose decode step reads and writes only device tensors, captured once into a CUDA graph and replayed for every token |
//! | [`ops`] | the graph engine's custom ops, one file per kernel family, each with its CPU reference beside its CUDA launcher |
//! | [`kernels`] | the CUDA sources (`kernels/*.cu`) and the one NVRTC loader |
//! | [`check`] | `engine-check`: graph vs eager tokens and speed on one device |
//! | [`opcheck`] | `engine-check --ops`: every op on the device against its CPU reference, every dtype, odd shapes |
//! | [`switch`] | every `QE_*` setting: [`switch::Switch`] and [`switch::Knob`] |
//! | [`testing`] | the tiny model shapes the engines' tests share |
//! | [`error`] | the crate's [`Error`] |
//!
//! On the CPU (tests, or a binary without `cuda`) the graph engine's step runs op by op: the
//! static-cache forward is what is tested against the eager models, the capture is what the GPU
//! adds. The `cuda` feature compiles the kernels' launchers and candle's CUDA backend.

#![warn(missing_docs)]

pub mod check;
pub mod eager;
pub mod error;
pub mod graph;
pub mod kernels;
pub mod opcheck;
pub mod ops;
pub mod switch;
pub mod testing;

pub use candle_core::Device;
pub use error::{Error, Result};

use meter::decoder::{DecoderFactory, EngineKind};

/// A factory for the engine `kind` over `inner`'s weights (the graph engine reuses the eager
/// engine's loaders).
pub fn factory(kind: EngineKind, inner: eager::CandleFactory) -> Box<dyn DecoderFactory> {
    match kind {
        EngineKind::Graph => Box::new(graph::GraphFactory { inner }),
        EngineKind::Eager => Box::new(inner),
    }
}

/// The device the engines decode on for a metered run: CUDA card `index` when built with `cuda`,
/// else [`Error::NoCuda`] — never the CPU while NVML meters an idle GPU.
pub fn cuda_device(index: u32) -> Result<Device> {
    if cfg!(feature = "cuda") {
        Ok(Device::new_cuda(index as usize)?)
    } else {
        Err(Error::NoCuda)
    }
}
