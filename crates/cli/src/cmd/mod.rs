//! One module per subcommand: its arguments (clap) and a thin printer over `report`, `analysis`
//! and `meter`. measure, sweep and probe need the `meter` feature
//! (servers only) or `gpu` (our engines too); overhead and engine-check need `gpu`.

pub mod aggregate;
pub mod compare;
pub mod crossover;
#[cfg(feature = "gpu")]
pub mod engine_check;
pub mod estimate;
#[cfg(feature = "meter")]
pub mod gpu;
#[cfg(feature = "meter")]
pub mod measure;
pub mod optimize;
#[cfg(feature = "meter")]
pub mod probe;
#[cfg(feature = "meter")]
pub mod serve;
pub mod share;
pub mod stacks;
#[cfg(feature = "meter")]
pub mod sweep;
pub mod sweeps;
pub mod validate;

use anyhow::{bail, Context, Result};
use std::io::Read;

/// Read a file, or standard input for `-`, as UTF-8 text: a regular file of at most
/// [`meter::files::TEXT_INPUT_LIMIT`] bytes (a FIFO or a device is refused before it is opened).
pub fn read_input(path: &str) -> Result<String> {
    let limit = meter::files::TEXT_INPUT_LIMIT;
    if path != "-" {
        return Ok(meter::files::read_text_limited(
            std::path::Path::new(path),
            limit,
        )?);
    }
    let mut bytes = Vec::new();
    std::io::stdin()
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .context("reading standard input")?;
    if bytes.len() as u64 > limit {
        bail!("standard input: larger than {limit} bytes");
    }
    match String::from_utf8(bytes) {
        Ok(s) => Ok(s),
        Err(e) => bail!(
            "standard input: not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ),
    }
}
