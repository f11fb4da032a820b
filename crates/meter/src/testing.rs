//! What tests of the meter's users share (the server path, the CLI, the engines): a meter that
//! integrates a constant power over real time — a real server runs on the wall clock, not on a
//! fake one — the device the simulated meters say they are, and a short protocol with its run
//! context for the protocol's tests (the meter's own against a fake decoder, the engine's with
//! a real one). A documented test hook, never used by a measurement.

use crate::decoder::EngineKind;
use crate::meter::{DeviceInfo, EnergyMeter, MeterError, PowerProbe};
use crate::protocol::{CooldownConfig, ProtocolConfig};
use crate::run_report::{RunContext, WeightsInfo};
use report::Precision;
use std::time::Instant;

/// The simulated board power, W.
pub const WATTS: f64 = 100.0;

/// Constant power over real time: energy = W × elapsed since creation (+1 mJ, so a window
/// opened at once never reads a stuck counter).
pub struct WallMeter(Instant);

impl Default for WallMeter {
    fn default() -> Self {
        WallMeter::new()
    }
}

impl WallMeter {
    /// A meter whose counter starts now.
    pub fn new() -> WallMeter {
        WallMeter(Instant::now())
    }
}

/// What the simulated meters say they are: an H200 with an energy counter.
pub fn simulated_h200() -> DeviceInfo {
    DeviceInfo {
        name: "NVIDIA H200 (simulated meter)".into(),
        arch: Some(report::Arch::Hopper),
        energy_counter: true,
        ..Default::default()
    }
}

impl EnergyMeter for WallMeter {
    fn info(&mut self) -> Result<DeviceInfo, MeterError> {
        Ok(simulated_h200())
    }
    fn energy_mj(&mut self) -> Result<u64, MeterError> {
        Ok((self.0.elapsed().as_secs_f64() * WATTS * 1000.0) as u64 + 1)
    }
    fn power_w(&mut self) -> Result<f64, MeterError> {
        Ok(WATTS)
    }
    fn temperature_c(&mut self) -> Result<f64, MeterError> {
        Ok(40.0)
    }
    fn free_memory_bytes(&mut self) -> Result<u64, MeterError> {
        Ok(80 << 30)
    }
    fn power_probe(&self) -> PowerProbe {
        Box::new(|| Ok(WATTS))
    }
}

/// A precision from its name; panics on a name that is none.
pub fn precision(name: &str) -> Precision {
    name.parse().unwrap()
}

/// A short protocol: `precisions` against an F16 baseline, 20 tokens × 3 iterations after one
/// warm-up, 3 idle reads, a 500 Hz trace, and a cooldown of at most 30 s polled every second.
pub fn short_protocol(precisions: &[&str]) -> ProtocolConfig {
    ProtocolConfig {
        precisions: precisions.iter().map(|s| precision(s)).collect(),
        baseline: Some(precision("F16")),
        tokens: 20,
        iterations: 3,
        warmup: 1,
        idle_reads: 3,
        sample_hz: 500.0,
        cooldown: CooldownConfig {
            max_s: 30.0,
            poll_s: 1.0,
            ..CooldownConfig::default()
        },
        // Exact iteration counts: tests of the window stretching set their own minimum.
        min_window_s: 0.0,
        ..ProtocolConfig::default()
    }
}

/// The run context of a test report: a 0.5 B model "tiny" on synthetic Qwen2-0.5B weights (seed
/// 1), decoded by the eager engine on host "test" at a fixed time.
pub fn synthetic_context() -> RunContext {
    RunContext {
        model_name: "tiny".into(),
        params_b: 0.5,
        weights: WeightsInfo::Synthetic {
            architecture: "Qwen2-0.5B".into(),
            seed: 1,
            quantized_from_float: false,
        },
        engine: EngineKind::Eager.stack_name().into(),
        engine_version: "test".into(),
        timestamp_utc: "2026-11-30T00:00:00Z".into(),
        host: "test".into(),
    }
}
