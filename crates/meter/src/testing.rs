//! What tests of the meter's users share (the server path, the CLI, the engines): a meter that
//! integrates a constant power over real time — a real server runs on the wall clock, not on a
//! fake one — and the device the simulated meters say they are. A documented test hook, never
//! used by a measurement.

use crate::meter::{DeviceInfo, EnergyMeter, MeterError, PowerProbe};
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
