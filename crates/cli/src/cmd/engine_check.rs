//! `quantenergy engine-check`: the graph decode engine against the eager one on the same synthetic
//! weights, with no energy metering (the comparison itself is `meter::engine::check`).

use anyhow::{Context, Result};
use clap::Args;
use meter::engine::check::{self, CheckOptions};
use report::Precision;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Debug, Clone)]
pub struct EngineCheckArgs {
    /// Synthetic weights at a real architecture's shapes (see data/models.csv).
    #[arg(long)]
    pub synthetic: String,
    /// Precision(s), comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    pub precision: Vec<Precision>,
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    #[arg(long, default_value_t = 16)]
    pub prompt_len: usize,
    /// Generated tokens per sequence (compared, and per timed generation).
    #[arg(long, default_value_t = 256)]
    pub tokens: usize,
    /// Timed generations per engine (after 2 untimed ones).
    #[arg(long, default_value_t = 3)]
    pub timing_runs: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// CUDA device index (the CPU when the binary has no CUDA).
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Also write the results as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

impl EngineCheckArgs {
    pub fn options(&self) -> CheckOptions {
        CheckOptions {
            synthetic: self.synthetic.clone(),
            precisions: self.precision.clone(),
            batch: self.batch,
            prompt_len: self.prompt_len,
            tokens: self.tokens,
            timing_runs: self.timing_runs,
            seed: self.seed,
            device: self.device,
        }
    }
}

/// Print one line per precision as it is compared; exit 0 when every precision's greedy tokens
/// are identical, 1 otherwise.
pub fn run(args: &EngineCheckArgs) -> Result<ExitCode> {
    let results = check::run(&args.options(), |r| println!("{}", r.summary()))?;
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&results).context("serializing the results")?;
        meter::files::write_atomic(path, json.as_bytes())?;
    }
    Ok(if results.iter().all(|r| r.identical) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
