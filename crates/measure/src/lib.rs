//! The meter behind `quantenergy measure`: energy hardware behind [`meter::EnergyMeter`] (NVML,
//! or a scripted fake), decode engines behind [`decoder::Decoder`] (candle, or a fake), and the
//! protocol that drives both ([`protocol`]). Everything but the NVML and CUDA calls is tested on a
//! machine without a GPU.

pub mod candle_decoder;
pub mod decoder;
pub mod meter;
pub mod nvml_meter;
pub mod overhead;
pub mod protocol;
pub mod run_report;
pub mod sampler;
pub mod session;
pub mod sweep;
