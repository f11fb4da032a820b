//! `quantenergy engine-check`: the graph decode engine against the eager one on the same synthetic
//! weights, with no energy metering (the comparison itself is `engine::check`).

use anyhow::{Context, Result};
use clap::Args;
use engine::check::{self, CheckOptions};
use report::Precision;
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
pub struct EngineCheckArgs {
    /// Synthetic weights at a real architecture's shapes (see data/models.csv).
    #[arg(long, required_unless_present = "ops")]
    pub synthetic: Option<String>,
    /// Precision(s), comma-separated.
    #[arg(long, value_delimiter = ',', required_unless_present = "ops")]
    pub precision: Vec<Precision>,
    /// Instead of the engines: every op of the graph engine on the device against its CPU
    /// reference, every dtype, odd shapes (`engine::opcheck`). Exit 1 when any differs.
    #[arg(long, conflicts_with_all = ["synthetic", "precision"])]
    pub ops: bool,
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Prompt tokens per sequence: the KV cache's depth when the timed decode starts (the
    /// prefill and the decode are timed apart).
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
    /// Leave out the eager engine (its tokens, teacher-forced logits and timing): the graph's
    /// replay is still compared with its kernels run op by op. For long prompts, where the eager
    /// engine's reference takes minutes.
    #[arg(long)]
    pub graph_only: bool,
    /// Also write the results as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Run on the CPU when there is no CUDA device: a real model's shape decodes there at a few
    /// tokens a second, minutes per precision (without this flag it is refused).
    #[arg(long)]
    pub allow_cpu: bool,
}

impl EngineCheckArgs {
    pub fn options(&self) -> CheckOptions {
        CheckOptions {
            synthetic: self.synthetic.clone().unwrap_or_default(),
            precisions: self.precision.clone(),
            batch: self.batch,
            prompt_len: self.prompt_len,
            tokens: self.tokens,
            timing_runs: self.timing_runs,
            seed: self.seed,
            device: self.device,
            graph_only: self.graph_only,
        }
    }
}

/// Print one line per precision as it is compared; exit 0 when every precision's greedy tokens
/// agree (with the eager engine, and the replay with its kernels op by op), 1 otherwise.
pub fn run(args: &EngineCheckArgs) -> Result<u8> {
    if args.ops {
        return run_ops(args);
    }
    let on_cpu = engine::Device::cuda_if_available(args.device)
        .context("opening the device")?
        .is_cpu();
    if on_cpu && !args.allow_cpu {
        anyhow::bail!(
            "no CUDA device (or a binary without `cuda`): on the CPU {} decodes at a few tokens a \
             second, minutes per precision with no output meanwhile; pass --allow-cpu to run it \
             anyway, or run it on a GPU machine (scripts/build-cuda.sh)",
            args.synthetic.as_deref().unwrap_or("the model")
        );
    }
    if on_cpu {
        eprintln!("note: no CUDA device: the CPU decodes both engines (minutes per precision)");
    }
    let results = check::run(&args.options(), |r| println!("{}", r.summary()))?;
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&results).context("serializing the results")?;
        meter::files::write_atomic(path, json.as_bytes())?;
    }
    Ok(if results.iter().all(|r| r.agrees()) {
        0
    } else {
        1
    })
}

/// `--ops`: one line per op, case and dtype as it is checked; exit 0 when every one agrees.
fn run_ops(args: &EngineCheckArgs) -> Result<u8> {
    let dev = engine::Device::cuda_if_available(args.device).context("opening the device")?;
    if dev.is_cpu() {
        eprintln!(
            "note: no CUDA device (or a binary without `cuda`): the CPU is compared with itself"
        );
    }
    let results = engine::opcheck::run(&dev, engine::opcheck::Scope::Full, &mut |c| {
        println!("{}", c.line())
    })?;
    let failed = results.iter().filter(|c| !c.ok()).count();
    println!("{} checks, {failed} outside their tolerance", results.len());
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&results).context("serializing the results")?;
        meter::files::write_atomic(path, json.as_bytes())?;
    }
    Ok(if failed == 0 { 0 } else { 1 })
}
