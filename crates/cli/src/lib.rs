//! `quantenergy` — the command-line edge of quantenergy. Thin: every number comes from the
//! `report`, `analysis` and `meter` crates, the first two the same code the page runs in the
//! browser. One module per subcommand under `cmd/`. A library so that the Python wheel's console
//! script runs this same [`run`] (crates/python); `main.rs` is its one call.

use clap::{Parser, Subcommand};
use std::ffi::OsString;

pub mod cmd;
#[cfg(feature = "gpu")]
mod session;

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
    ///
    /// Each valid report's validity (window ≥ 5 s, counter update period, cooldown, counter vs
    /// trace, GPU busy, throttling) is printed with its reason codes, as derived from its fields.
    Validate {
        #[arg(required = true)]
        files: Vec<String>,
        /// Write each report's `validity` block, derived from its own fields, into the file
        /// (replaced whole; a report with other errors is left as it is).
        #[arg(long)]
        write_validity: bool,
    },
    /// Place reports against the published crossover curve of their class (the page's overlay).
    ///
    /// For each report: the curve of its architecture, precision and — where the report names one
    /// in stack.engine — its software stack, at its model size: the curve's ΔE, the 95 % band,
    /// inside or outside, and residual ÷ the band's σ. Or why there is no curve (no class, another
    /// stack, batch > 1), or that the report is not compared: an estimate (basis interpolated,
    /// extrapolated or unavailable) or a report without an FP16 figure.
    ///
    /// Exit codes: 0 every report placed inside its band or explained; 1 any measured report
    /// outside its band (use it as a regression check); 2 any file unreadable, not JSON or invalid
    /// (with `validate`'s messages naming the field).
    Compare(cmd::compare::CompareArgs),
    /// Estimate ΔE% vs FP16 for a model from the published dataset (never a measurement).
    Estimate(cmd::estimate::EstimateArgs),
    /// The fitted crossover table per architecture, precision and engine.
    Crossover {
        /// Only this architecture (turing, ampere, ada, hopper, blackwell, volta).
        #[arg(long)]
        arch: Option<report::Arch>,
        /// Only this precision (e.g. NF4, INT8, Q4_K).
        #[arg(long)]
        precision: Option<report::Precision>,
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Measure decode energy per token on an NVIDIA GPU (NVML counter + power trace, candle
    /// decode). Without a GPU: a dataset estimate, labelled as such.
    #[cfg(feature = "meter")]
    Measure(Box<cmd::measure::MeasureArgs>),
    /// Measure what the power-trace thread costs: one loaded model, alternating windows with the
    /// sampler on and off (seeded order per pair); paired throughput loss with a 95 % interval.
    #[cfg(feature = "gpu")]
    Overhead {
        #[command(flatten)]
        args: Box<cmd::measure::MeasureArgs>,
        /// Pairs of windows (one on, one off each); `--iterations` decode calls per window.
        #[arg(long, default_value_t = 10)]
        pairs: usize,
    },
    /// Compare the graph decode engine with the eager one on the same synthetic weights (no
    /// energy metering): greedy tokens position by position, and each engine's decode tok/s.
    #[cfg(feature = "gpu")]
    EngineCheck(cmd::engine_check::EngineCheckArgs),
    /// Run a sweep plan (TOML): every repeat in its own process, resumable, aggregate CSV.
    #[cfg(feature = "meter")]
    Sweep(cmd::sweep::SweepArgs),
    /// Aggregate a directory of measured reports into data/anchors.csv rows (mean, n, CV).
    Aggregate(cmd::aggregate::AggregateArgs),
    /// One card and model size on every stack measured, side by side (Markdown): the published
    /// rows and the measured reports of DIRs, never pooled across sessions.
    Stacks(cmd::stacks::StacksArgs),
    /// A card's measured batch sweeps (Markdown): energy and tok/s at every batch, ΔE vs the same
    /// batch's FP16 with its interval, and where batching turns a saving into a cost.
    Sweeps(cmd::sweeps::SweepsArgs),
    /// Print what NVML sees: name, architecture, counter support, power fields, update periods.
    #[cfg(feature = "meter")]
    Probe {
        #[arg(long, default_value_t = 0)]
        device: u32,
    },
    /// Search precision × batch × context on a card for the best configuration under budgets:
    /// optimum, alternatives, energy↔latency Pareto frontier (every figure tagged with its source).
    Optimize(cmd::optimize::OptimizeArgs),
    /// Print the overlay link for a report, or decode one with --decode.
    Share {
        /// A report file (or - for stdin).
        file: Option<String>,
        /// Decode an overlay link (or bare payload) instead: the link itself, `-` to read it from
        /// stdin, or `@FILE` to read it from a file (long links do not fit on a command line).
        #[arg(long, conflicts_with = "file")]
        decode: Option<String>,
        /// Base URL of the page.
        #[arg(long, default_value = cmd::share::DEFAULT_PAGE_URL)]
        base_url: String,
    },
}

/// Run the command line `args` (the program name first) and return its exit status: 0 done, 1 a
/// finding (validate, compare, a failed sweep job), 2 an error; 128 + N for a sweep stopped by
/// signal N.
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    // `quantenergy compare … | head` must end quietly when the reader goes away, as Unix tools
    // do, not panic in println!: restore SIGPIPE's default action (Rust ignores it at start-up).
    #[cfg(unix)]
    // SAFETY: called first, before any thread exists; SIG_DFL is always a valid disposition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // CUDA numbers devices fastest-first unless told otherwise, NVML by PCI bus: make both count
    // the same way, before anything starts CUDA, so the card the meter reads is the card the
    // decoder (or a server it starts, which inherits this) runs on.
    if std::env::var_os("CUDA_DEVICE_ORDER").is_none() {
        std::env::set_var("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
    }
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version print to stdout and succeed; a usage error is status 2.
            let _ = e.print();
            return u8::from(e.use_stderr()) * 2;
        }
    };
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
        .with_ansi(colour_on_stderr())
        // A second run in one process (the Python module's) keeps the first subscriber.
        .try_init()
        .ok();
    let ok = |r: anyhow::Result<()>| r.map(|_| 0);
    let result = match cli.command {
        Command::Validate {
            files,
            write_validity,
        } => cmd::validate::validate(&files, write_validity),
        Command::Compare(args) => cmd::compare::run(&args),
        Command::Estimate(args) => ok(cmd::estimate::run(&args)),
        Command::Crossover {
            arch,
            precision,
            json,
        } => ok(cmd::crossover::run(arch, precision, json)),
        #[cfg(feature = "meter")]
        Command::Measure(args) => cmd::measure::run(&args),
        #[cfg(feature = "gpu")]
        Command::Overhead { args, pairs } => cmd::measure::overhead(&args, pairs),
        #[cfg(feature = "gpu")]
        Command::EngineCheck(args) => cmd::engine_check::run(&args),
        #[cfg(feature = "meter")]
        Command::Sweep(args) => cmd::sweep::run(&args),
        #[cfg(feature = "meter")]
        Command::Probe { device } => cmd::probe::run(device),
        Command::Aggregate(args) => ok(cmd::aggregate::run(&args)),
        Command::Stacks(args) => ok(cmd::stacks::run(&args)),
        Command::Sweeps(args) => ok(cmd::sweeps::run(&args)),
        Command::Optimize(args) => ok(cmd::optimize::run(&args)),
        Command::Share {
            file,
            decode,
            base_url,
        } => ok(cmd::share::run(
            file.as_deref(),
            decode.as_deref(),
            &base_url,
        )),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            2
        }
    }
}

/// Colour codes only for a person at a terminal: never into a file, a pipe or a CI log, and never
/// where `NO_COLOR` is set (no-color.org).
fn colour_on_stderr() -> bool {
    use std::io::IsTerminal;
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stderr().is_terminal()
}
