//! One module per subcommand: its arguments (clap) and a thin printer over `report`, `analysis`
//! and `meter`. The GPU subcommands (measure, overhead, engine-check, sweep, probe) need the `gpu` feature.

pub mod aggregate;
pub mod compare;
pub mod crossover;
#[cfg(feature = "gpu")]
pub mod engine_check;
pub mod estimate;
#[cfg(feature = "gpu")]
pub mod gpu;
#[cfg(feature = "gpu")]
pub mod measure;
pub mod optimize;
#[cfg(feature = "gpu")]
pub mod probe;
#[cfg(feature = "gpu")]
pub mod serve;
pub mod share;
pub mod stacks;
#[cfg(feature = "gpu")]
pub mod sweep;
pub mod sweeps;
pub mod validate;

use anyhow::{bail, Context, Result};
use std::io::Read;

/// Read a file, or standard input for `-`, as UTF-8 text.
pub fn read_input(path: &str) -> Result<String> {
    let mut bytes = Vec::new();
    if path == "-" {
        std::io::stdin()
            .read_to_end(&mut bytes)
            .context("reading standard input")?;
    } else {
        bytes = std::fs::read(path).with_context(|| format!("reading {path}"))?;
    }
    match String::from_utf8(bytes) {
        Ok(s) => Ok(s),
        Err(e) => bail!(
            "{path}: not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ),
    }
}
