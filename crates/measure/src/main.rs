//! `quantenergy` — the command-line edge of quantenergy. Thin: every number comes from the
//! `report` and `analysis` crates, the same code the page runs in the browser.

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use std::io::Read;
use std::process::ExitCode;

mod commands;

#[derive(Parser, Debug)]
#[command(
    name = "quantenergy",
    version,
    about = "Does quantizing this model on this GPU save energy, or cost more?"
)]
struct Cli {
    /// More logging (-v info, -vv debug). RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Validate energy.json reports (schema + semantic checks). Exit 0 all valid, 1 any invalid,
    /// 2 unreadable or not JSON. `-` reads standard input.
    Validate {
        #[arg(required = true)]
        files: Vec<String>,
    },
    /// Estimate ΔE% vs FP16 for a model from the published dataset (never a measurement).
    Estimate(commands::EstimateArgs),
    /// The fitted crossover table per architecture and precision.
    Crossover {
        #[arg(long)]
        arch: Option<String>,
        #[arg(long)]
        precision: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Measure decode energy per token on an NVIDIA GPU (NVML counter + power trace, candle
    /// decode). Without a GPU: a dataset estimate, labelled as such.
    Measure(measure::session::MeasureArgs),
    /// Measure what the power-trace thread costs: one loaded model, alternating windows with the
    /// sampler on and off (seeded order per pair); paired throughput loss with a 95 % interval.
    Overhead {
        #[command(flatten)]
        args: measure::session::MeasureArgs,
        /// Pairs of windows (one on, one off each); `--iterations` decode calls per window.
        #[arg(long, default_value_t = 10)]
        pairs: usize,
    },
    /// Run a sweep plan (TOML): every repeat in its own process, resumable, aggregate CSV.
    Sweep {
        plan: std::path::PathBuf,
        /// Write reports here instead of the plan's `out`.
        #[arg(long)]
        out: Option<std::path::PathBuf>,
        /// Run at most this many pending jobs, then stop (rerun to resume).
        #[arg(long)]
        limit: Option<usize>,
        /// Start no new job after this many seconds.
        #[arg(long)]
        time_budget_s: Option<f64>,
        /// List the pending jobs only.
        #[arg(long)]
        dry_run: bool,
        /// Run only the jobs whose name contains this (repeatable), e.g. `--only _r3 --only BF16`.
        #[arg(long)]
        only: Vec<String>,
    },
    /// Aggregate a directory of measured reports into data/anchors.csv rows (mean, n, CV).
    Aggregate {
        dir: std::path::PathBuf,
        #[arg(long)]
        session: String,
        #[arg(
            long,
            default_value = "candle 0.11.1 GGUF/cuBLAS kernels, CUDA 13.0, synthetic weights"
        )]
        stack: String,
        #[arg(
            long,
            default_value = "quantenergy data/measurements (this repository)"
        )]
        source: String,
        /// Print the full per-configuration table (both energies, tok/s, power, CV, ΔE) as
        /// Markdown for docs/MEASUREMENTS.md instead of anchors.csv rows.
        #[arg(long)]
        markdown: bool,
    },
    /// Print what NVML sees: name, architecture, counter support, power fields, update periods.
    Probe {
        #[arg(long, default_value_t = 0)]
        device: u32,
    },
    /// Search precision × batch × context on a card for the best configuration under budgets:
    /// optimum, alternatives, energy↔latency Pareto frontier (every figure tagged with its source).
    Optimize(commands::OptimizeArgs),
    /// Print the overlay link for a report, or decode one with --decode.
    Share {
        /// A report file (or - for stdin).
        file: Option<String>,
        /// Decode an overlay link (or bare payload) instead.
        #[arg(long, conflicts_with = "file")]
        decode: Option<String>,
        /// Base URL of the page.
        #[arg(long, default_value = commands::DEFAULT_PAGE_URL)]
        base_url: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let level = match cli.verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level)),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = match cli.command {
        Command::Validate { files } => commands::validate(&files),
        Command::Estimate(args) => commands::estimate(&args).map(|_| ExitCode::SUCCESS),
        Command::Crossover {
            arch,
            precision,
            json,
        } => commands::crossover(arch.as_deref(), precision.as_deref(), json)
            .map(|_| ExitCode::SUCCESS),
        Command::Measure(args) => commands::measure(&args),
        Command::Overhead { args, pairs } => commands::overhead(&args, pairs),
        Command::Sweep {
            plan,
            out,
            limit,
            time_budget_s,
            dry_run,
            only,
        } => measure::sweep::run_sweep(
            &plan,
            &measure::sweep::SweepOptions {
                out,
                limit,
                time_budget_s,
                dry_run,
                only,
            },
        )
        .map(|_| ExitCode::SUCCESS),
        Command::Probe { device } => commands::probe(device),
        Command::Aggregate {
            dir,
            session,
            stack,
            source,
            markdown,
        } => commands::aggregate(&dir, &session, &stack, &source, markdown)
            .map(|_| ExitCode::SUCCESS),
        Command::Optimize(args) => commands::optimize(&args).map(|_| ExitCode::SUCCESS),
        Command::Share {
            file,
            decode,
            base_url,
        } => commands::share(file.as_deref(), decode.as_deref(), &base_url)
            .map(|_| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Read a file, or standard input for `-`.
pub(crate) fn read_input(path: &str) -> Result<String> {
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
