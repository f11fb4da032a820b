//! `quantenergy measure` and `quantenergy overhead`: the arguments, parsed once into the meter's
//! typed options, and thin printers of what the meter wrote.

pub mod options;

use super::gpu::GpuSel;
use anyhow::{bail, Result};
use clap::Args;
use meter::decoder::EngineKind;
use meter::fallback::MeasureResult;
use meter::prompts::PromptSet;
use meter::protocol::{ArmOrder, CooldownConfig, PerplexityConfig, ProtocolConfig};
pub use options::{MeasureOptions, ModelSpec};
use report::Precision;
use server::run::ServerRun;
use server::{Launch, ServerOptions};
use std::path::PathBuf;

/// The baseline arm: a precision, or none (`--baseline none`: no Δ is reported).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Baseline(pub Option<Precision>);

fn parse_baseline(s: &str) -> Result<Baseline, report::ParsePrecisionError> {
    if s.trim().eq_ignore_ascii_case("none") {
        Ok(Baseline(None))
    } else {
        s.parse().map(|p| Baseline(Some(p)))
    }
}

/// How a user names a run on the command line.
#[derive(Args, Debug, Clone)]
pub struct MeasureArgs {
    /// A local Hugging Face model directory (config.json + *.safetensors) or a .gguf file.
    #[arg(
        long,
        conflicts_with = "synthetic",
        required_unless_present_any = ["synthetic", "server_cmd", "server", "model_files"]
    )]
    pub model: Option<PathBuf>,
    /// Seeded random weights at a real architecture's exact shapes (see data/models.csv), e.g.
    /// qwen2-0.5b, tinyllama-1.1b, qwen2-7b.
    #[arg(long)]
    pub synthetic: Option<String>,
    /// Precision(s) to measure, comma-separated: F16, BF16, F32, Q8_0, Q4_K, Q4_0, Q5_K, Q6_K.
    /// With --model-file the precisions come from the files (or name a subset of them).
    #[arg(
        long,
        value_delimiter = ',',
        required_unless_present_any = ["server_cmd", "model_files"],
        conflicts_with = "server_cmd"
    )]
    pub precision: Vec<Precision>,
    /// The baseline arm measured in the same run ("none" to skip; then no Δ is reported).
    #[arg(long, default_value = "F16", value_parser = parse_baseline)]
    pub baseline: Baseline,
    /// GPU index (NVML and CUDA) of the candle path.
    #[arg(long, default_value_t = 0)]
    pub device: u32,
    /// Tokens generated per iteration (1 to 1 048 576).
    #[arg(long, default_value_t = 256, value_parser = count::<1, { 1 << 20 }>)]
    pub tokens: usize,
    /// Timed iterations per arm (1 to 100 000).
    #[arg(long, default_value_t = 10, value_parser = count::<1, 100_000>)]
    pub iterations: usize,
    /// Untimed warm-up iterations per arm (0 to 10 000).
    #[arg(long, default_value_t = 2, value_parser = count::<0, 10_000>)]
    pub warmup: usize,
    /// Sequences decoded at once; on the server path, concurrent streams (1 to 4096).
    #[arg(long, visible_alias = "concurrency", default_value_t = 1, value_parser = count::<1, 4096>)]
    pub batch: usize,
    /// Prompt tokens per sequence (0 to 1 048 576; 0 is fed as 1).
    #[arg(long, default_value_t = 16, value_parser = count::<0, { 1 << 20 }>)]
    pub prompt_len: usize,
    /// Seed for the prompt, synthetic weights and (without `--order-seed`) the arm order.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Counterbalance the arm order over a configuration's repeats (a sweep passes it): a shuffle
    /// seeded by this labels the arms, and `--order-repeat` picks the row of a Williams design, so
    /// that over a full cycle (as many repeats as arms; twice that for an odd count) each arm runs
    /// once in every position and after every other. Without it each run's order is a shuffle
    /// seeded by `--seed`.
    #[arg(long)]
    pub order_seed: Option<u64>,
    /// The repeat, from 1: the row of `--order-seed`'s design this run takes.
    #[arg(long, requires = "order_seed", value_parser = clap::value_parser!(u64).range(1..))]
    pub order_repeat: Option<u64>,
    /// Power-trace sampling rate.
    #[arg(long, default_value_t = 50.0)]
    pub sample_hz: f64,
    /// Turn the power-trace thread off (to measure its overhead).
    #[arg(long)]
    pub no_trace: bool,
    /// Longest cooldown wait before each arm, seconds.
    #[arg(long, default_value_t = 240.0)]
    pub cooldown_max_s: f64,
    /// Output directory for the reports.
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
    /// Output file name stem (default: derived from model, precision, batch): a plain name, so
    /// the reports land in `--out` and nowhere else.
    #[arg(long, value_parser = parse_stem)]
    pub name: Option<String>,
    /// GPUs to decode on and meter, numbered as CUDA sees them (0 = the first one
    /// `CUDA_VISIBLE_DEVICES` leaves: under Slurm, the job's own card; NVML meters it by UUID),
    /// comma-separated (`0,1`: a server spread over two cards, counters summed); or, without a
    /// GPU, the card name to estimate for (e.g. "RTX 4090").
    #[arg(long, value_parser = super::gpu::parse_gpu)]
    pub gpu: Option<super::gpu::GpuSel>,
    #[command(flatten)]
    pub server: super::serve::ServerArgs,
    /// After each arm's energy window, score teacher-forced perplexity on the fixed public-domain
    /// text in data/perplexity/ (the report's `quality` block: value and Δ vs the FP16 arm).
    #[arg(long)]
    pub perplexity: bool,
    /// Most corpus tokens to score per arm (at least 2: one prediction).
    #[arg(long, default_value_t = 512, requires = "perplexity", value_parser = clap::value_parser!(u64).range(2..))]
    pub ppl_tokens: u64,
    /// Tokens per scoring window (each window a fresh sequence; at least 2).
    #[arg(long, default_value_t = 256, requires = "perplexity", value_parser = clap::value_parser!(u64).range(2..))]
    pub ppl_seq_len: u64,
    /// Decode engine: `graph` (static KV cache, each decode step replayed as one CUDA graph) or
    /// `eager` (candle_transformers' models, op by op). The report's `stack.engine` says which
    /// ("candle-graph" or "candle"), so the two are never pooled.
    #[arg(long, default_value = "graph", value_parser = parse_engine())]
    pub engine: EngineKind,
    /// Context runs: tokens already in the KV cache when the timed decode starts, comma-separated
    /// (e.g. `1024,4096,16384`: one run per depth, `_c<depth>` in its reports' names). Each
    /// arm's prefill and decode are then measured apart, in windows of their own of at least
    /// `--min-window-s` (the report's figures are the decode's at that depth, the prefill's in
    /// `results.prefill`). Replaces `--prompt-len`. The graph engine, or a server through
    /// `--api llama`: its decode requests reuse the prompt an untimed request left in its cache,
    /// and an answer that evaluated the prompt again fails the arm.
    #[arg(long, value_delimiter = ',', value_parser = count::<1, { 1 << 20 }>)]
    pub context: Vec<usize>,
    /// A prompt set (e.g. `data/prompts/prompt-set-v1.json`): its requests served one after
    /// another, each a fresh prefill of its prompt and then its output tokens, as one stream of a
    /// deployment. The report's figures are the requests' end to end (energy per output token,
    /// per request); every prompt's prefill, back to back, has its own window (`results.prefill`).
    /// Replaces `--prompt-len` and `--tokens`; the graph engine, or a server through `--api llama`.
    #[arg(long, value_parser = parse_prompt_set, conflicts_with_all = ["context", "prompt_len", "tokens"])]
    pub prompts: Option<PromptSet>,
    /// The shortest energy window, s (the H200's energy counter moves in ≈ 100 ms steps, so a
    /// 2.5 s window can be off by several percent): iterations are added, as the last warm-up's
    /// time says, until each window lasts this long. Reports under 5 s are flagged short_window.
    #[arg(long, default_value_t = 5.0, value_parser = window_seconds)]
    pub min_window_s: f64,
    /// The measurement session this run belongs to (`protocol.session`; a sweep passes its
    /// plan's): `aggregate` never pools runs of different sessions.
    #[arg(long, value_parser = parse_session)]
    pub session: Option<String>,
    /// With --server-cmd or --server: start each arm's server (or reach the running one), stream
    /// one request of 8 tokens, stop it, and say what answered. No energy is read and no report
    /// is written: a check of the command line, e.g. on a laptop before a GPU run.
    #[arg(long)]
    pub dry_run: bool,
}

/// `--session`: a plain label, as a plan's `session`.
/// A count in MIN..=MAX: the bounds keep every product the protocol and the reports form of
/// tokens, iterations and batch (≤ 2⁵⁰) far inside u64, and refuse a batch of 0 at the edge
/// instead of a report that silently says 1.
pub(crate) fn count<const MIN: usize, const MAX: usize>(s: &str) -> Result<usize, String> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a whole number"))?;
    if (MIN..=MAX).contains(&n) {
        Ok(n)
    } else {
        Err(format!("{n} is outside {MIN}..={MAX}"))
    }
}

/// `--prompts`: the file read and checked here, once; its errors name the file and the field.
fn parse_prompt_set(s: &str) -> Result<PromptSet, String> {
    let bytes = std::fs::read(s).map_err(|e| format!("{s}: {e}"))?;
    PromptSet::parse(&bytes).map_err(|e| format!("{s}: {e}"))
}

/// `--min-window-s`: 0 (no stretching) to an hour.
fn window_seconds(s: &str) -> Result<f64, String> {
    let x: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if (0.0..=3600.0).contains(&x) {
        Ok(x)
    } else {
        Err(format!("{x} is outside 0..=3600 s"))
    }
}

fn parse_stem(s: &str) -> Result<String, String> {
    if s.is_empty()
        || s == "."
        || s == ".."
        || s.contains(['/', '\\'])
        || s.chars().any(char::is_control)
    {
        Err(format!(
            "{s:?} is not a plain file name (no folders: the reports go in --out)"
        ))
    } else {
        Ok(s.to_string())
    }
}

fn parse_session(s: &str) -> Result<String, String> {
    if campaign::plan::is_session_label(s) {
        Ok(s.to_string())
    } else {
        Err("use letters, digits, `.`, `-` and `_` only".into())
    }
}

/// `--engine`: `graph` or `eager` (clap lists them on a wrong value).
fn parse_engine() -> impl clap::builder::TypedValueParser<Value = EngineKind> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(EngineKind::ALL.map(EngineKind::as_str))
        .try_map(|s| s.parse::<EngineKind>())
}

impl MeasureArgs {
    /// The meter's options: the protocol and the model, parsed once here.
    pub fn options(&self) -> MeasureOptions {
        MeasureOptions {
            model: match (&self.synthetic, &self.model) {
                (Some(name), _) => ModelSpec::Synthetic(name.clone()),
                (None, Some(path)) => ModelSpec::Path(path.clone()),
                (None, None) if !self.server.model_files.is_empty() => ModelSpec::GgufFiles(
                    self.server
                        .model_files
                        .iter()
                        .map(|f| f.path.clone())
                        .collect(),
                ),
                // clap requires one of the two.
                (None, None) => ModelSpec::Synthetic(String::new()),
            },
            protocol: self.protocol(),
            device: self.device,
            out: self.out.clone(),
            name: self.name.clone(),
            card: self.gpu.as_ref().and_then(super::gpu::GpuSel::card),
            engine: self.engine,
        }
    }

    /// The protocol as the arguments set it (the server path sets its arms from the files).
    pub fn protocol(&self) -> ProtocolConfig {
        ProtocolConfig {
            precisions: self.precision.clone(),
            baseline: self.baseline.0,
            tokens: self.tokens,
            iterations: self.iterations,
            warmup: self.warmup,
            batch: self.batch,
            prompt_len: self.prompt_len,
            seed: self.seed,
            sample_hz: self.sample_hz,
            trace: !self.no_trace,
            cooldown: CooldownConfig {
                max_s: self.cooldown_max_s,
                ..CooldownConfig::default()
            },
            perplexity: self.perplexity.then(|| {
                PerplexityConfig::embedded(self.ppl_tokens as usize, self.ppl_seq_len as usize)
            }),
            session: self.session.clone(),
            order: match self.order_seed {
                Some(seed) => ArmOrder::Balanced {
                    seed,
                    repeat: self.order_repeat.unwrap_or(1) as usize,
                },
                None => ArmOrder::Seeded,
            },
            min_window_s: self.min_window_s,
            prompts: self.prompts.clone(),
            ..ProtocolConfig::default()
        }
    }
}

/// Measure every requested arm (plus the baseline) and print what was written.
pub fn run(args: &MeasureArgs) -> Result<u8> {
    // Told to stop mid-run: kill started servers, drop a half-written file, die of the signal.
    meter::interrupt::install();
    if args.dry_run {
        return dry_run(args);
    }
    let res = if args.server.is_server() {
        let run = server_run(args)?;
        per_depth(&args.context, run.name.clone(), |depth, name| {
            let mut r = run.clone();
            r.protocol.context = depth;
            r.name = name;
            Ok(server::run::run_served(&r, &server_gpus(args))?)
        })?
    } else {
        if (!args.context.is_empty() || args.prompts.is_some()) && args.engine == EngineKind::Eager
        {
            anyhow::bail!(
                "--context and --prompts need the graph engine: the eager engine cannot decode \
                 at a fixed depth without its prefill"
            );
        }
        let mut opts = args.options();
        if !args.server.model_files.is_empty() && opts.protocol.precisions.is_empty() {
            opts.protocol.precisions = super::serve::served_models(&args.server.model_files)?
                .iter()
                .map(|m| m.precision)
                .collect();
        }
        match args.gpu.as_ref().map(super::gpu::GpuSel::single_index) {
            Some(Err(e)) => anyhow::bail!(e),
            Some(Ok(Some(i))) => opts.device = i,
            _ => {}
        }
        per_depth(&args.context, opts.name.clone(), |depth, name| {
            let mut o = opts.clone();
            o.protocol.context = depth;
            o.name = name;
            run_engine(&o)
        })?
    };
    print_results(&res)
}

/// One run of `measure_at` per context depth, each its own protocol (idle reference, cooldowns,
/// arm order), its reports named `<name>_c<depth>` when there are several depths; one run at
/// the protocol's prompt length when there are none.
fn per_depth(
    depths: &[usize],
    name: Option<String>,
    mut measure_at: impl FnMut(Option<usize>, Option<String>) -> Result<MeasureResult>,
) -> Result<MeasureResult> {
    if depths.is_empty() {
        return measure_at(None, name);
    }
    let mut all = MeasureResult {
        reports: Vec::new(),
        measured: false,
    };
    for &depth in depths {
        let named = match &name {
            Some(n) if depths.len() > 1 => Some(format!("{n}_c{depth}")),
            n => n.clone(),
        };
        let r = measure_at(Some(depth), named)?;
        all.measured |= r.measured;
        all.reports.extend(r.reports);
    }
    Ok(all)
}

/// Decode on our candle engine (the `gpu` feature's build).
#[cfg(feature = "gpu")]
fn run_engine(opts: &MeasureOptions) -> Result<MeasureResult> {
    crate::session::run_measure(opts)
}

/// This build has no engine of ours: say where one is, never estimate as if it were measured.
#[cfg(not(feature = "gpu"))]
fn run_engine(_: &MeasureOptions) -> Result<MeasureResult> {
    bail!(
        "this build of quantenergy (the Python wheel's) measures servers only: --server-cmd \
         \"llama-server -m {{model}} --port {{port}}\" --model-file PREC=FILE, or --server URL. \
         Our candle engines (--model, --synthetic) are in the CUDA build (scripts/build-cuda.sh)"
    )
}

/// What was written, its figures, a share link each, and the first report as Markdown.
pub fn print_results(res: &meter::fallback::MeasureResult) -> Result<u8> {
    for (path, rep) in &res.reports {
        println!(
            "wrote {} (basis: {})",
            path.display(),
            rep.results.basis.as_str()
        );
        match (
            rep.results.energy_per_token_mj,
            rep.results.vs_fp16_energy_pct,
        ) {
            (Some(e), Some(d)) => println!("  {:.1} mJ/token, {d:+.2} % vs FP16", e),
            (Some(e), None) => println!("  {:.1} mJ/token (no Δ vs FP16)", e),
            _ => println!(
                "  no energy figure: {}",
                rep.results.note.clone().unwrap_or_default()
            ),
        }
        if let Some(stack) = rep
            .stack
            .as_ref()
            .filter(|s| s.serving.is_some())
            .and(report::stack_summary(rep))
        {
            println!("  {stack}");
        }
        println!(
            "  share: {}",
            report::share::link(
                super::share::DEFAULT_PAGE_URL,
                &report::share::from_report(rep)
            )
        );
    }
    // A submission is a measured point: an estimate gets no Markdown (its link overlays it).
    if let Some((_, rep)) = res.reports.first().filter(|_| res.measured) {
        println!(
            "\nMarkdown for a submission issue:\n\n{}",
            report::to_markdown(rep)
        );
    }
    if !res.measured {
        eprintln!("note: nothing was measured on a GPU; the reports above are dataset estimates (basis ≠ measured).");
    }
    Ok(0)
}

/// The trace-thread A/B on one loaded model; prints every window and the paired verdict.
#[cfg(feature = "gpu")]
pub fn overhead(args: &MeasureArgs, pairs: usize) -> Result<u8> {
    meter::interrupt::install();
    let (path, res) = crate::session::run_overhead(&args.options(), pairs)?;
    println!("wrote {}", path.display());
    for w in &res.windows {
        println!(
            "  pair {:>2} trace {:<3} {:>8.1} tok/s {:>8.2} mJ/token{}{}",
            w.pair,
            if w.trace_on { "on" } else { "off" },
            w.tok_s(),
            w.mj_per_token(),
            w.host
                .map(|h| format!(
                    "  steal {:.2} %, {:.2} cores",
                    h.steal_pct, h.process_cpu_cores
                ))
                .unwrap_or_default(),
            w.achieved_hz
                .map(|h| format!("  ({h:.1} Hz)"))
                .unwrap_or_default()
        );
    }
    match &res.summary {
        Some(s) => println!(
            "trace on {:.1} tok/s, off {:.1} tok/s: overhead {:+.3} % (95 % CI {:+.3} … {:+.3} %, n = {} pairs) \
             vs target < {} %: {:?}",
            s.tok_s_on, s.tok_s_off, s.overhead_pct, s.ci95_pct.0, s.ci95_pct.1, s.pairs, s.target_pct, s.verdict
        ),
        None => println!("fewer than two complete pairs: no comparison"),
    }
    Ok(0)
}

/// Tokens the dry run asks each server for: enough to see a stream, too few to cost time.
const DRY_RUN_TOKENS: usize = 8;

/// `measure --dry-run`: each server started, asked once, stopped; exit 1 when one did not answer.
fn dry_run(args: &MeasureArgs) -> Result<u8> {
    if !args.server.is_server() {
        bail!(
            "--dry-run checks a server command (--server-cmd or --server); our engines' runs \
             are checked by `quantenergy engine-check`"
        );
    }
    let arms = server::run::dry_run_served(&server_run(args)?, DRY_RUN_TOKENS)?;
    let mut failed = 0;
    for a in &arms {
        match &a.outcome {
            Ok(r) => println!(
                "{}: {} {} answered {} tokens (first after {:.0} ms, all in {:.0} ms){}",
                a.precision,
                r.engine,
                r.engine_version
                    .as_deref()
                    .unwrap_or("(version not reported)"),
                r.tokens,
                r.ttft_s * 1e3,
                r.total_s * 1e3,
                r.ready_s
                    .map(|s| format!("; ready {s:.1} s after start, stopped"))
                    .unwrap_or_default()
            ),
            Err(e) => {
                failed += 1;
                println!("{}: no answer: {e}", a.precision);
            }
        }
    }
    println!(
        "dry run: {} of {} arm(s) answered; no energy was read and no report written",
        arms.len() - failed,
        arms.len()
    );
    Ok(u8::from(failed > 0))
}

/// The typed server run for `args`.
pub fn server_run(args: &MeasureArgs) -> Result<ServerRun> {
    let s = &args.server;
    let launch = match (&s.server_cmd, &s.server) {
        (Some(cmd), _) => Launch::Start {
            command: cmd.clone(),
            models: super::serve::served_models(&s.model_files)?,
            log_dir: args.out.join("server-logs"),
        },
        (None, Some(url)) => {
            let [precision] = args.precision.as_slice() else {
                bail!(
                    "--server measures one model: give exactly one --precision (got {:?})",
                    args.precision
                );
            };
            Launch::External {
                url: url.clone(),
                precision: *precision,
            }
        }
        (None, None) => bail!("neither --server-cmd nor --server"),
    };
    if args.perplexity {
        bail!("--perplexity needs the model's logits: it is not scored on the server path");
    }
    Ok(ServerRun {
        server: ServerOptions {
            launch,
            api: s.api,
            served_model: s.served_model.clone(),
            ready_timeout: super::serve::secs(s.ready_timeout_s, "--ready-timeout-s")?,
            request_timeout: super::serve::secs(s.request_timeout_s, "--request-timeout-s")?,
            stall_timeout: super::serve::secs(s.stall_timeout_s, "--stall-timeout-s")?,
            seed: args.seed,
        },
        protocol: args.protocol(),
        out: args.out.clone(),
        name: args.name.clone(),
        card: args.gpu.as_ref().and_then(GpuSel::card),
        params_b: s.params_b,
        model_name: s.served_model.clone(),
    })
}

/// The GPUs a server run meters: `--gpu`'s list, else `--device`.
fn server_gpus(args: &MeasureArgs) -> Vec<u32> {
    match &args.gpu {
        Some(GpuSel::Indices(v)) => v.clone(),
        _ => vec![args.device],
    }
}
