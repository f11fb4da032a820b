//! `quantenergy probe`: what NVML sees.

use anyhow::Result;
use std::process::ExitCode;

/// Print the device's NVML facts; exit 1 when there is no meter.
pub fn run(device: u32) -> Result<ExitCode> {
    match meter::nvml_meter::probe(device) {
        Ok(lines) => {
            for l in lines {
                println!("{l}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            // The error says "no GPU meter available: <why>" itself.
            println!("{e}");
            Ok(ExitCode::from(1))
        }
    }
}
