//! `quantenergy probe`: what NVML sees.

use anyhow::Result;

/// Print the device's NVML facts; exit 1 when there is no meter.
pub fn run(device: u32) -> Result<u8> {
    match meter::nvml_meter::probe(device) {
        Ok(lines) => {
            for l in lines {
                println!("{l}");
            }
            Ok(0)
        }
        Err(e) => {
            // The error says "no GPU meter available: <why>" itself.
            println!("{e}");
            Ok(1)
        }
    }
}
