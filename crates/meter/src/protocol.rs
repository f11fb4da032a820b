//! The measurement protocol (DESIGN.md §4): idle reference, pre-flight memory check, arms in a
//! seeded random order, warmups, cooldown, one meter window around the timed iterations, model
//! freed between arms. Hardware-free: it talks only to [`EnergyMeter`], [`DecoderFactory`] and
//! [`Clock`], so every branch is tested with fakes.

use crate::causes::chain;
use crate::decoder::{DecodeError, DecoderFactory};
use crate::meter::{Clock, DeviceInfo, EnergyMeter, HostWindow, MeterError};
use crate::sampler::{Sampler, Trace};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use report::Precision;
use std::sync::Arc;

/// How to wait for the GPU to cool down before each arm.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CooldownConfig {
    /// Wait until power ≤ idle + this many W…
    pub power_margin_w: f64,
    /// …and temperature ≤ idle + this many °C…
    pub temp_margin_c: f64,
    /// …but no longer than this (then `converged = false` is recorded).
    pub max_s: f64,
    /// Interval between power/temperature polls, s.
    pub poll_s: f64,
}

impl Default for CooldownConfig {
    fn default() -> Self {
        CooldownConfig {
            power_margin_w: 6.0,
            temp_margin_c: 5.0,
            max_s: 240.0,
            poll_s: 1.0,
        }
    }
}

/// The measurement protocol's settings for one run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ProtocolConfig {
    /// The arms to measure besides the baseline (one report each).
    pub precisions: Vec<Precision>,
    /// The FP16-class baseline arm (F16 for candle). `None` measures only the requested arm.
    pub baseline: Option<Precision>,
    /// Tokens generated per iteration.
    pub tokens: usize,
    /// Timed iterations per arm.
    pub iterations: usize,
    /// Untimed warm-up iterations per arm.
    pub warmup: usize,
    /// Sequences decoded at once.
    pub batch: usize,
    /// Prompt length, tokens.
    pub prompt_len: usize,
    /// Seed for the prompt, synthetic weights and (with [`ArmOrder::Seeded`]) the arm order.
    pub seed: u64,
    /// Power-trace sample rate, Hz.
    pub sample_hz: f64,
    /// Run the power-trace thread (off only to measure its overhead).
    pub trace: bool,
    /// The cooldown before each arm.
    pub cooldown: CooldownConfig,
    /// Power reads taken for the idle reference.
    pub idle_reads: usize,
    /// Refuse to start when the largest arm needs more than this share of free VRAM.
    pub vram_fraction: f64,
    /// Score each arm's perplexity on a fixed text after its meter window closed.
    pub perplexity: Option<PerplexityConfig>,
    /// The measurement session the run belongs to (a sweep plan's `session`), recorded in every
    /// report so that `aggregate` never pools sessions.
    pub session: Option<String>,
    /// How the run's arms are ordered.
    pub order: ArmOrder,
    /// A context run: the tokens already in the KV cache when the timed decode starts (the
    /// prompt then; `prompt_len` is not used). Each arm then measures two windows apart: a
    /// prefill window (prefills of that prompt back to back) and a decode window that starts
    /// after one untimed prefill (decodes of `tokens` steps, each rewound to this depth). The
    /// report's figures are the decode window's; the prefill's are beside them. `None`: each
    /// timed iteration is a whole generation (prefill of `prompt_len`, then the decode), as in
    /// every report before.
    pub context: Option<usize>,
    /// The shortest window, s (the H200's energy counter moves in ≈ 100 ms steps, so a 2.5 s
    /// window can be off by several percent). Each window gets `iterations`, or as many more as
    /// the last timed warm-up says it takes to last this long (none without a warm-up).
    pub min_window_s: f64,
    /// A prompt-set run: the set's requests served one after another (a fresh prefill of each
    /// prompt, then its output tokens), as a server with one stream serves them. Each arm
    /// measures a prefill window (every prompt's prefill, back to back) and a window of whole
    /// requests; the report's figures are the requests' (end to end, per output token), the
    /// prefill's beside them. Replaces `prompt_len` and `tokens`; never with `context`.
    pub prompts: Option<crate::prompts::PromptSet>,
}

impl ProtocolConfig {
    /// The prompt each sequence is fed: the context depth, else `prompt_len`.
    pub fn prompt_tokens(&self) -> usize {
        self.context.unwrap_or(self.prompt_len)
    }

    /// The KV cache a sequence needs: the prompt and the tokens after it, or a prompt set's
    /// longest request.
    pub fn capacity(&self) -> usize {
        match &self.prompts {
            Some(set) => set.capacity(),
            None => self.prompt_tokens() + self.tokens,
        }
    }
}

/// The order of a run's arms. Drawn at random per run, a few repeats can all put the same arm
/// first (the H200's three seeded llama-server streams repeats all ran Q4_K first): a sweep
/// counterbalances instead.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub enum ArmOrder {
    /// A shuffle seeded by the protocol's `seed`: each run its own order.
    #[default]
    Seeded,
    /// Counterbalanced over a configuration's repeats: one shuffle seeded by `seed` (the same for
    /// every repeat) relabels the arms, and repeat r takes row r of a Williams design over them.
    /// Over a full cycle (as many repeats as arms, twice that for an odd number of arms) every arm
    /// runs once in every position and follows every other arm equally often, so neither a first
    /// arm's cold card nor the heat an arm leaves to the next one favours a format. A plan whose
    /// repeats are not a whole cycle is balanced only as far as it goes (3 repeats of 4 arms: three
    /// arms lead once each, one never; of 2 arms: one leads twice).
    Balanced {
        /// The configuration's order seed.
        seed: u64,
        /// The repeat, from 1.
        repeat: usize,
    },
}

impl ArmOrder {
    /// `arms` put in this order (`run_seed` for [`ArmOrder::Seeded`]).
    pub fn apply(self, arms: &mut [Precision], run_seed: u64) {
        let seed = match self {
            ArmOrder::Seeded => run_seed,
            ArmOrder::Balanced { seed, .. } => seed,
        };
        arms.shuffle(&mut rand::rngs::StdRng::seed_from_u64(seed));
        if let ArmOrder::Balanced { repeat, .. } = self {
            let base = arms.to_vec();
            for (slot, i) in arms
                .iter_mut()
                .zip(williams_row(base.len(), repeat.saturating_sub(1)))
            {
                *slot = base[i];
            }
        }
    }

    /// The repeats that make one balanced cycle of `arms` arms (see [`ArmOrder::Balanced`]).
    pub fn cycle(arms: usize) -> usize {
        if arms.is_multiple_of(2) {
            arms
        } else {
            2 * arms
        }
    }
}

/// Row `r` of a Williams design over `n` treatments: the first row is 0, 1, n−1, 2, n−2, …, row r
/// adds r (mod n); for odd n the rows from n on are the first n mirrored.
fn williams_row(n: usize, r: usize) -> Vec<usize> {
    if n == 0 {
        return Vec::new();
    }
    let r = r % ArmOrder::cycle(n);
    // First row at k: ⌈k / 2⌉ for odd k, n − k / 2 for even k (n ≡ 0 at k = 0).
    let mut row: Vec<usize> = (0..n)
        .map(|k| if k % 2 == 1 { k.div_ceil(2) } else { n - k / 2 })
        .map(|x| (x + r) % n)
        .collect();
    if r >= n {
        row.reverse();
    }
    row
}

/// The quality check: teacher-forced perplexity on a fixed text, scored after the energy window
/// (so it never enters the energy figure), in windows of `seq_len` tokens, at most `max_tokens`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PerplexityConfig {
    /// Name of the corpus (its path in the repository).
    pub corpus_name: String,
    /// The corpus text.
    pub text: String,
    /// Most tokens scored.
    pub max_tokens: usize,
    /// Tokens per scoring window.
    pub seq_len: usize,
}

impl PerplexityConfig {
    /// The corpus shipped in `data/perplexity/` (public domain), named by its SHA-256.
    pub fn embedded(max_tokens: usize, seq_len: usize) -> Self {
        PerplexityConfig {
            corpus_name: EMBEDDED_CORPUS_NAME.into(),
            text: EMBEDDED_CORPUS.into(),
            max_tokens,
            seq_len,
        }
    }
    /// SHA-256 of the corpus text, hex.
    pub fn sha256(&self) -> String {
        use sha2::Digest;
        sha2::Sha256::digest(self.text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// Name of the embedded perplexity corpus.
pub const EMBEDDED_CORPUS_NAME: &str = "data/perplexity/us-founding-texts.txt";
/// The embedded perplexity corpus text.
pub const EMBEDDED_CORPUS: &str = include_str!("../../../data/perplexity/us-founding-texts.txt");

/// One arm's perplexity score.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PerplexityScore {
    /// Mean negative log-likelihood, nats per predicted token.
    pub mean_nll: f64,
    /// Tokens scored.
    pub tokens_evaluated: usize,
    /// Windows scored.
    pub windows: usize,
}

impl PerplexityScore {
    /// Perplexity: exp of the mean NLL.
    pub fn perplexity(&self) -> f64 {
        self.mean_nll.exp()
    }
}

/// The corpus as token ids (at most `max_tokens`), shared by every arm of a run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Tokenized {
    /// The token ids.
    pub ids: Vec<u32>,
    /// How the ids were made (the model's tokenizer file, or byte ids).
    pub how: String,
}

impl Default for ProtocolConfig {
    fn default() -> Self {
        ProtocolConfig {
            precisions: vec![Precision::Q4K],
            baseline: Some(Precision::Fp16),
            tokens: 256,
            iterations: 10,
            warmup: 2,
            batch: 1,
            prompt_len: 16,
            seed: 0,
            sample_hz: 50.0,
            trace: true,
            cooldown: CooldownConfig::default(),
            idle_reads: 30,
            vram_fraction: 0.95,
            perplexity: None,
            session: None,
            order: ArmOrder::Seeded,
            context: None,
            min_window_s: 5.0,
            prompts: None,
        }
    }
}

/// How a cooldown ended.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CooldownResult {
    /// The power it waited to fall to, W.
    pub target_power_w: f64,
    /// The temperature it waited to fall to, °C.
    pub target_temp_c: f64,
    /// Whether both targets were reached before the limit.
    pub converged: bool,
    /// Time spent waiting, s.
    pub seconds: f64,
    /// Last power read, W.
    pub power_w: Option<f64>,
    /// Last temperature read, °C.
    pub temp_c: Option<f64>,
}

/// What one arm measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ArmMeasurement {
    /// Tokens generated in the metered window.
    pub tokens_generated: u64,
    /// Metered window length, s.
    pub window_s: f64,
    /// Energy from the hardware counter, J.
    pub counter_j: f64,
    /// The power trace over the window, if it ran.
    pub trace: Option<Trace>,
    /// Duration of each timed iteration, s.
    pub iteration_s: Vec<f64>,
    /// The cooldown before this arm.
    pub cooldown: CooldownResult,
    /// GPU temperature at the window's start, °C.
    pub temp_start_c: Option<f64>,
    /// GPU temperature at the window's end, °C.
    pub temp_end_c: Option<f64>,
    /// The decode kernel used.
    pub kernel: String,
    /// Remarks to carry into the report.
    pub notes: Vec<String>,
    /// Model load time, s.
    pub load_s: f64,
    /// Hypervisor steal and this process's CPU use during the window (where `/proc` is readable).
    pub host: Option<HostWindow>,
    /// Perplexity scored after the window closed (`None` when not asked for).
    pub perplexity: Option<Result<PerplexityScore, ScoreError>>,
    /// Server arms: who served the model and the streamed latency of the timed iterations.
    pub served: Option<crate::served::Served>,
    /// The bytes of weights a decode step of this arm reads, where the engine can say.
    pub weight_bytes: Option<crate::roofline::DecodeWeightBytes>,
    /// A context run's prefill window (the fields above are then its decode window's), or a
    /// prompt-set run's (the fields above are then its requests').
    pub prefill: Option<PrefillWindow>,
    /// A prompt-set run's window of whole requests, besides what the fields above say of it.
    pub requests: Option<RequestsWindow>,
    /// How the GPU spent the (decode) window: busy share, throttling.
    pub activity: crate::meter::WindowActivity,
}

/// A context run's prefill window: prefills of the context's prompt, back to back, between
/// synchronizations.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PrefillWindow {
    /// Prefills in the window.
    pub prefills: usize,
    /// Prompt tokens fed (prefills · batch · depth).
    pub prompt_tokens: u64,
    /// Window length, s.
    pub window_s: f64,
    /// Energy from the hardware counter, J.
    pub counter_j: f64,
    /// The power trace's integral over the window, J, if the trace ran.
    pub trace_j: Option<f64>,
    /// Median time of one prefill (the time to the first token), s.
    pub ttft_s: f64,
}

/// A prompt-set run's window of whole requests (each a fresh prefill, then its output tokens):
/// what the counts behind its energy are.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RequestsWindow {
    /// Passes over the set in the window.
    pub passes: usize,
    /// Requests served (passes · prompts; each of `batch` sequences).
    pub requests: usize,
    /// Prompt tokens prefilled in the window (passes · the set's prompt tokens · batch).
    pub prompt_tokens: u64,
    /// The 90th percentile of the prefill window's times to the first token, s.
    pub ttft_p90_s: f64,
}

impl PrefillWindow {
    /// The window `pw` of prefills whose times to the first token are `ttft` (sorted here, for
    /// the median and the percentiles read from it after), `prompt_tokens` fed in all.
    fn of(ttft: &mut [f64], prompt_tokens: u64, pw: &Metered) -> PrefillWindow {
        ttft.sort_by(f64::total_cmp);
        PrefillWindow {
            prefills: ttft.len(),
            prompt_tokens,
            window_s: pw.seconds,
            counter_j: pw.counter_j,
            trace_j: pw.trace.as_ref().and_then(Trace::energy_j),
            ttft_s: ttft[ttft.len() / 2],
        }
    }

    /// Counter energy per prompt token, mJ.
    pub fn mj_per_prompt_token(&self) -> f64 {
        self.counter_j * 1000.0 / self.prompt_tokens as f64
    }
}

impl ArmMeasurement {
    /// Energy per token from the counter, mJ.
    pub fn mj_per_token(&self) -> f64 {
        self.counter_j * 1000.0 / self.tokens_generated as f64
    }
    /// Energy from the power trace's integral, J.
    pub fn trace_j(&self) -> Option<f64> {
        self.trace.as_ref().and_then(Trace::energy_j)
    }
    /// Energy per token from the power trace, mJ.
    pub fn trace_mj_per_token(&self) -> Option<f64> {
        self.trace_j()
            .map(|j| j * 1000.0 / self.tokens_generated as f64)
    }
    /// Throughput, tokens/s.
    pub fn tok_s(&self) -> f64 {
        self.tokens_generated as f64 / self.window_s
    }
    /// Mean power over the window from the counter, W.
    pub fn avg_power_w(&self) -> f64 {
        self.counter_j / self.window_s
    }
    /// Per-iteration energy is not separable with one window; the spread of iteration times is
    /// the repeatability figure we have inside one run.
    pub fn iteration_cv_pct(&self) -> Option<f64> {
        cv_pct(&self.iteration_s)
    }
}

pub use analysis::stats::cv_pct;

/// One arm's result: a measurement or why there is none.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ArmResult {
    /// The arm's precision.
    pub precision: Precision,
    /// The measurement, or why the arm has no figure.
    pub outcome: Result<ArmMeasurement, ArmFailure>,
}

/// Why an arm has no measurement. Its `Display` is the text the report's `protocol.arms[].error`
/// and notes carry. The underlying errors are kept as their rendered text (with their causes, see
/// [`crate::causes::chain`]), so an outcome stays `Clone`, comparable and serializable.
#[derive(Debug, Clone, PartialEq, serde::Serialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ArmFailure {
    /// The decoder could not load the arm's model.
    #[error("load {precision}: {error}")]
    Load {
        /// The arm's precision.
        precision: Precision,
        /// The rendered error chain.
        error: String,
    },
    /// A warmup or timed generation failed.
    #[error("decode {precision}: {error}")]
    Decode {
        /// The arm's precision.
        precision: Precision,
        /// The rendered error chain.
        error: String,
    },
    /// Waiting for the device to finish its queued work failed.
    #[error("synchronize: {error}")]
    Synchronize {
        /// The rendered error chain.
        error: String,
    },
    /// A meter read failed (the GPU is still there): the window means nothing.
    #[error("meter: {error}")]
    MeterRead {
        /// The rendered error chain.
        error: String,
    },
    /// The GPU went away during this arm: the run ends here.
    #[error("meter: {error}")]
    GpuLost {
        /// The rendered error chain.
        error: String,
    },
    /// The energy counter did not move during the window (never reported as a zero).
    #[error(
        "the energy counter did not move during a {seconds:.2} s window ({start_mj} mJ → {end_mj} mJ); refusing to report a zero"
    )]
    CounterStuck {
        /// Window length, s.
        seconds: f64,
        /// Counter reading at the start, mJ.
        start_mj: u64,
        /// Counter reading at the end, mJ.
        end_mj: u64,
    },
    /// The energy counter went backwards during the window (a driver reload or a counter reset):
    /// the difference means nothing.
    #[error(
        "the energy counter went backwards during a {seconds:.2} s window ({start_mj} mJ → {end_mj} mJ: a driver reload or a counter reset); no figure"
    )]
    CounterBackwards {
        /// Window length, s.
        seconds: f64,
        /// Counter reading at the start, mJ.
        start_mj: u64,
        /// Counter reading at the end, mJ.
        end_mj: u64,
    },
    /// Not run: the GPU disappeared during an earlier arm of the run.
    #[error("not run: the GPU disappeared during an earlier arm")]
    NotRunGpuLost,
    /// Not run at all (the run has no arm of this precision).
    #[error("not run")]
    NotRun,
}

impl ArmFailure {
    /// The GPU is gone: the run's remaining arms cannot run.
    pub fn is_gpu_lost(&self) -> bool {
        matches!(self, ArmFailure::GpuLost { .. })
    }
}

impl From<MeterError> for ArmFailure {
    fn from(e: MeterError) -> Self {
        let error = e.to_string();
        if e.is_lost() {
            ArmFailure::GpuLost { error }
        } else {
            ArmFailure::MeterRead { error }
        }
    }
}

impl From<WindowError> for ArmFailure {
    fn from(e: WindowError) -> Self {
        match e {
            // A meter error keeps telling a lost GPU from a failed read (see `run`).
            WindowError::Meter(m) => m.into(),
            WindowError::CounterStuck(seconds, start_mj, end_mj) => ArmFailure::CounterStuck {
                seconds,
                start_mj,
                end_mj,
            },
            WindowError::CounterBackwards(seconds, start_mj, end_mj) => {
                ArmFailure::CounterBackwards {
                    seconds,
                    start_mj,
                    end_mj,
                }
            }
        }
    }
}

/// Why an arm has no perplexity score (its energy figure stands regardless). Like
/// [`ArmFailure`], a decoder's error is kept as its rendered text.
#[derive(Debug, Clone, PartialEq, serde::Serialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ScoreError {
    /// The decoder could not tokenize the corpus (every arm of the run says so).
    #[error("tokenizing the corpus: {error}")]
    Tokenize {
        /// The rendered error chain.
        error: String,
    },
    /// The corpus gave fewer than 2 tokens.
    #[error("the corpus gave {0} token(s); at least 2 are needed")]
    TooFewTokens(usize),
    /// The decoder failed while scoring a window.
    #[error("scoring: {error}")]
    Scoring {
        /// The rendered error chain.
        error: String,
    },
    /// No window had 2 tokens to score.
    #[error("nothing to score: the corpus is shorter than 2 tokens")]
    NothingToScore,
    /// The mean NLL is not finite, negative, or too large to exponentiate.
    #[error("the model's mean NLL came out as {0} nats: not a usable perplexity")]
    Unusable(f64),
}

/// What a protocol run produced.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Outcome {
    /// The device measured.
    pub device: DeviceInfo,
    /// How often its energy counter moved while idle, s ([`counter_update_period`]).
    pub counter_update_s: Option<f64>,
    /// Idle reference power, W.
    pub idle_power_w: f64,
    /// Idle temperature, °C.
    pub idle_temp_c: Option<f64>,
    /// Idle power with the first arm loaded, W, where each arm holds a GPU context of its own
    /// (a server): the cooldowns' reference instead of `idle_power_w`.
    pub loaded_idle_power_w: Option<f64>,
    /// The seeded order the arms ran in.
    pub arm_order: Vec<Precision>,
    /// Each arm's result.
    pub arms: Vec<ArmResult>,
    /// Free device memory before the run, bytes.
    pub free_vram_bytes: u64,
    /// Device memory the largest arm needs, bytes.
    pub required_vram_bytes: u64,
    /// The perplexity corpus's tokens, or why there are none (then every arm's score says so).
    pub perplexity: Option<Result<Tokenized, ScoreError>>,
}

impl Outcome {
    /// The result of the arm at `precision`, if it ran.
    pub fn arm(&self, precision: Precision) -> Option<&ArmResult> {
        self.arms.iter().find(|a| a.precision == precision)
    }
}

/// Why a protocol run cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// The meter failed.
    #[error(transparent)]
    Meter(#[from] MeterError),
    #[error(
        "pre-flight: the {precision} arm needs {need_gb:.2} GB (weights + KV + overhead) but only {limit_gb:.2} GB \
         ({pct:.0} % of {free_gb:.2} GB free VRAM) may be used — nothing was loaded"
    )]
    /// An arm's weights do not fit in the allowed device memory.
    DoesNotFit {
        /// The arm's precision.
        precision: Precision,
        /// Memory it needs, GB.
        need_gb: f64,
        /// Memory it may use, GB.
        limit_gb: f64,
        /// Free device memory, GB.
        free_gb: f64,
        /// The allowed fraction of free memory, %.
        pct: f64,
    },
    /// The device has no energy counter (its name).
    #[error("the energy counter is not supported on this GPU ({0}); refusing to report a figure")]
    NoCounter(String),
}

/// How often the energy counter moves, s: the median interval between changes of reads 2 ms
/// apart over at most 1.5 s of idle (six changes suffice). `None` when it moved fewer than three
/// times. A window's two reads can each lag the truth by up to one period of energy.
pub fn counter_update_period(meter: &mut dyn EnergyMeter, clock: &dyn Clock) -> Option<f64> {
    let start = clock.now_s();
    let mut last = meter.energy_mj().ok()?;
    let mut changes = Vec::new();
    while clock.now_s() - start < 1.5 && changes.len() < 7 {
        clock.sleep_s(0.002);
        let now = meter.energy_mj().ok()?;
        if now != last {
            changes.push(clock.now_s());
            last = now;
        }
    }
    let mut gaps: Vec<f64> = changes.windows(2).map(|w| w[1] - w[0]).collect();
    if gaps.len() < 2 {
        return None;
    }
    gaps.sort_by(f64::total_cmp);
    Some(gaps[gaps.len() / 2])
}

/// Minimum of `n` power reads (upstream's idle reference), read ~20 ms apart.
fn idle_power(meter: &mut dyn EnergyMeter, clock: &dyn Clock, n: usize) -> Result<f64, MeterError> {
    let mut best = f64::INFINITY;
    let mut last_err = None;
    for _ in 0..n.max(1) {
        match meter.power_w() {
            Ok(w) => best = best.min(w),
            Err(e) if e.is_lost() => return Err(e),
            Err(e) => last_err = Some(e),
        }
        clock.sleep_s(0.02);
    }
    if best.is_finite() {
        Ok(best)
    } else {
        Err(last_err.unwrap_or(MeterError::Read("no idle power read succeeded".into())))
    }
}

/// Wait until power and temperature are back near idle (bounded).
pub fn cool_down(
    meter: &mut dyn EnergyMeter,
    clock: &dyn Clock,
    idle_w: f64,
    idle_c: Option<f64>,
    cfg: &CooldownConfig,
) -> Result<CooldownResult, MeterError> {
    let target_power_w = idle_w + cfg.power_margin_w;
    let target_temp_c = idle_c
        .map(|c| c + cfg.temp_margin_c)
        .unwrap_or(f64::INFINITY);
    let start = clock.now_s();
    loop {
        let p = meter.power_w().ok();
        let t = meter.temperature_c().ok();
        let power_ok = p.is_some_and(|p| p <= target_power_w);
        let temp_ok = t.is_none_or(|t| t <= target_temp_c);
        let waited = clock.now_s() - start;
        if (power_ok && temp_ok) || waited >= cfg.max_s {
            return Ok(CooldownResult {
                target_power_w,
                target_temp_c,
                converged: power_ok && temp_ok,
                seconds: waited,
                power_w: p,
                temp_c: t,
            });
        }
        clock.sleep_s(cfg.poll_s);
    }
}

/// Run the whole protocol. A failing arm is recorded and the other arm still runs; meter errors
/// before any arm (no GPU, GPU lost during the idle reference) abort the run.
pub fn run(
    cfg: &ProtocolConfig,
    meter: &mut dyn EnergyMeter,
    decoders: &mut dyn DecoderFactory,
    clock: Arc<dyn Clock>,
) -> Result<Outcome, ProtocolError> {
    let device = meter.info()?;
    if !device.energy_counter {
        return Err(ProtocolError::NoCounter(device.name));
    }
    let mut arms: Vec<Precision> = Vec::new();
    for p in cfg.precisions.iter().chain(cfg.baseline.iter()) {
        if !arms.contains(p) {
            arms.push(*p);
        }
    }
    // Pre-flight before anything is loaded.
    let free = meter.free_memory_bytes()?;
    let context = cfg.capacity();
    let limit = free as f64 * cfg.vram_fraction;
    let mut required = 0u64;
    for a in &arms {
        let need = decoders.required_bytes(*a, cfg.batch, context);
        required = required.max(need);
        if need as f64 > limit {
            return Err(ProtocolError::DoesNotFit {
                precision: *a,
                need_gb: need as f64 / 1e9,
                limit_gb: limit / 1e9,
                free_gb: free as f64 / 1e9,
                pct: cfg.vram_fraction * 100.0,
            });
        }
    }
    let perplexity = cfg.perplexity.as_ref().map(|p| {
        let (mut ids, how) = decoders
            .tokenize(&p.text)
            .map_err(|e| ScoreError::Tokenize { error: chain(&e) })?;
        ids.truncate(p.max_tokens);
        if ids.len() < 2 {
            return Err(ScoreError::TooFewTokens(ids.len()));
        }
        Ok(Tokenized { ids, how })
    });
    let counter_update_s = counter_update_period(meter, clock.as_ref());
    let idle_w = idle_power(meter, clock.as_ref(), cfg.idle_reads)?;
    let idle_c = meter.temperature_c().ok();
    cfg.order.apply(&mut arms, cfg.seed);
    tracing::info!(?arms, idle_w, "arm order");

    let mut results = Vec::new();
    let mut loaded_idle = None;
    for precision in &arms {
        let outcome = run_arm(
            cfg,
            *precision,
            meter,
            decoders,
            clock.clone(),
            Idle {
                before_load: (idle_w, idle_c),
                loaded: &mut loaded_idle,
            },
            cfg.perplexity
                .as_ref()
                .zip(perplexity.as_ref())
                .map(|(p, t)| (t, p.seq_len)),
        );
        if let Err(e) = &outcome {
            tracing::warn!(%precision, error = %e, "arm failed");
        }
        let lost = outcome.as_ref().is_err_and(ArmFailure::is_gpu_lost);
        results.push(ArmResult {
            precision: *precision,
            outcome,
        });
        if lost {
            // The GPU is gone: the remaining arms cannot run; say so for each.
            for rest in arms.iter().skip(results.len()) {
                results.push(ArmResult {
                    precision: *rest,
                    outcome: Err(ArmFailure::NotRunGpuLost),
                });
            }
            break;
        }
    }
    Ok(Outcome {
        device,
        counter_update_s,
        idle_power_w: idle_w,
        idle_temp_c: idle_c,
        loaded_idle_power_w: loaded_idle,
        arm_order: arms,
        arms: results,
        free_vram_bytes: free,
        required_vram_bytes: required,
        perplexity,
    })
}

/// Teacher-forced NLL over consecutive windows of the ids (each window a fresh sequence). A
/// non-finite or negative total is an error, never a figure.
pub fn score_perplexity(
    dec: &mut dyn crate::decoder::Decoder,
    ids: &[u32],
    seq_len: usize,
) -> Result<PerplexityScore, ScoreError> {
    let mut nll = 0.0;
    let mut predicted = 0usize;
    let mut windows = 0usize;
    for w in ids.chunks(seq_len.max(2)).filter(|w| w.len() >= 2) {
        nll += dec
            .nll(w)
            .map_err(|e| ScoreError::Scoring { error: chain(&e) })?;
        predicted += w.len() - 1;
        windows += 1;
    }
    if predicted == 0 {
        return Err(ScoreError::NothingToScore);
    }
    let mean_nll = nll / predicted as f64;
    if !mean_nll.is_finite() || mean_nll < 0.0 || !mean_nll.exp().is_finite() {
        return Err(ScoreError::Unusable(mean_nll));
    }
    Ok(PerplexityScore {
        mean_nll,
        tokens_evaluated: predicted,
        windows,
    })
}

/// A decoder's synchronize failure as an arm failure.
fn sync_failure(e: DecodeError) -> ArmFailure {
    ArmFailure::Synchronize { error: chain(&e) }
}

/// The idle references of a run: before anything was loaded, and (for decoders whose arms hold
/// a GPU context of their own) with the first arm loaded, read once by that arm.
struct Idle<'a> {
    before_load: (f64, Option<f64>),
    /// Power only: the temperature target stays the context-free idle's.
    loaded: &'a mut Option<f64>,
}

fn run_arm(
    cfg: &ProtocolConfig,
    precision: Precision,
    meter: &mut dyn EnergyMeter,
    decoders: &mut dyn DecoderFactory,
    clock: Arc<dyn Clock>,
    idle: Idle,
    perplexity: Option<(&Result<Tokenized, ScoreError>, usize)>,
) -> Result<ArmMeasurement, ArmFailure> {
    let t_load = clock.now_s();
    let mut dec = decoders.load(precision).map_err(|e| ArmFailure::Load {
        precision,
        error: chain(&e),
    })?;
    let load_s = clock.now_s() - t_load;
    let weight_bytes = decoders.decode_weight_bytes(precision);
    if decoders.arms_hold_their_own_context() && idle.loaded.is_none() {
        // Read before any decode of the run: the card is as cool as for the first reference.
        let w = idle_power(meter, clock.as_ref(), cfg.idle_reads)?;
        *idle.loaded = Some(w.max(idle.before_load.0));
    }
    let arm = Arm {
        cfg,
        precision,
        clock: &clock,
        idle: match idle.loaded {
            Some(w) => (*w, idle.before_load.1),
            None => idle.before_load,
        },
    };
    let w = match (&cfg.prompts, cfg.context) {
        (Some(set), _) => arm.prompt_set_windows(meter, &mut dec, set)?,
        (None, Some(depth)) => arm.context_windows(meter, &mut dec, depth)?,
        (None, None) => arm.generation_window(meter, &mut dec)?,
    };
    // After the windows closed: the energy figures never include this.
    let perplexity = perplexity.map(|(tokens, seq_len)| match tokens {
        Ok(t) => score_perplexity(dec.as_mut(), &t.ids, seq_len),
        Err(e) => Err(e.clone()),
    });
    let kernel = dec.kernel();
    let notes = dec.notes();
    let served = dec.served();
    drop(dec); // free the model before the next arm
    Ok(ArmMeasurement {
        tokens_generated: w.tokens,
        window_s: w.window.seconds,
        counter_j: w.window.counter_j,
        trace: w.window.trace,
        iteration_s: w.iteration_s,
        cooldown: w.cooldown,
        temp_start_c: w.temp_start_c,
        temp_end_c: w.temp_end_c,
        kernel,
        notes,
        load_s,
        host: w.window.host,
        activity: w.window.activity,
        perplexity,
        served,
        weight_bytes,
        prefill: w.prefill,
        requests: w.requests,
    })
}

/// One arm's protocol settings, for its windows.
struct Arm<'a> {
    cfg: &'a ProtocolConfig,
    precision: Precision,
    clock: &'a Arc<dyn Clock>,
    idle: (f64, Option<f64>),
}

/// What an arm's timed windows measured: the decode window (the only one of a whole-generation
/// run) and a context run's prefill window.
struct Windows {
    tokens: u64,
    iteration_s: Vec<f64>,
    window: Metered,
    cooldown: CooldownResult,
    temp_start_c: Option<f64>,
    temp_end_c: Option<f64>,
    prefill: Option<PrefillWindow>,
    requests: Option<RequestsWindow>,
}

type Dec = Box<dyn crate::decoder::Decoder>;

impl Arm<'_> {
    fn failed(&self, e: DecodeError) -> ArmFailure {
        ArmFailure::Decode {
            precision: self.precision,
            error: chain(&e),
        }
    }

    /// One prefill of `len` tokens into a fresh cache of `capacity`, timed on a synchronized
    /// device: the time to the first token, s.
    fn timed_prefill(&self, dec: &mut Dec, len: usize, capacity: usize) -> Result<f64, ArmFailure> {
        let t = self.clock.now_s();
        dec.prefill_prompt(self.cfg.batch, len, capacity)
            .map_err(|e| self.failed(e))?;
        dec.synchronize().map_err(sync_failure)?;
        Ok(self.clock.now_s() - t)
    }

    fn cool_down(&self, meter: &mut dyn EnergyMeter) -> Result<CooldownResult, ArmFailure> {
        let (w, c) = self.idle;
        Ok(cool_down(
            meter,
            self.clock.as_ref(),
            w,
            c,
            &self.cfg.cooldown,
        )?)
    }

    /// Warm-ups, the cooldown, then one window around all timed iterations, each a whole
    /// generation, opened and closed on a synchronized device.
    fn generation_window(
        &self,
        meter: &mut dyn EnergyMeter,
        dec: &mut Dec,
    ) -> Result<Windows, ArmFailure> {
        let cfg = self.cfg;
        let clock = self.clock;
        let decode = |dec: &mut Dec| {
            dec.generate(cfg.batch, cfg.prompt_len, cfg.tokens)
                .map_err(|e| self.failed(e))
        };
        // The last warm-up, timed on a synchronized device, sizes the window.
        let mut once_s = f64::NAN;
        for _ in 0..cfg.warmup {
            dec.synchronize().map_err(sync_failure)?;
            let t = clock.now_s();
            decode(dec)?;
            dec.synchronize().map_err(sync_failure)?;
            once_s = clock.now_s() - t;
        }
        dec.synchronize().map_err(sync_failure)?;
        dec.reset_latency();
        let iterations = iterations_for(cfg.min_window_s, once_s, cfg.iterations);
        let cooldown = self.cool_down(meter)?;
        let temp_start_c = meter.temperature_c().ok();
        let ((tokens, iteration_s), window) =
            metered_window(meter, clock, cfg.trace.then_some(cfg.sample_hz), || {
                timed(clock, iterations, cfg.min_window_s, || {
                    let n = decode(dec)? as u64;
                    dec.synchronize().map_err(sync_failure)?;
                    Ok(n)
                })
            })?;
        Ok(Windows {
            tokens,
            iteration_s,
            window,
            cooldown,
            temp_start_c,
            temp_end_c: meter.temperature_c().ok(),
            prefill: None,
            requests: None,
        })
    }

    /// A context arm: warm-ups (a prefill and a decode at `depth` each; the last one's times size
    /// the windows), the cooldown, the prefill window, then the decode window, which opens after
    /// one untimed prefill.
    fn context_windows(
        &self,
        meter: &mut dyn EnergyMeter,
        dec: &mut Dec,
        depth: usize,
    ) -> Result<Windows, ArmFailure> {
        let cfg = self.cfg;
        let clock = self.clock;
        let capacity = depth + cfg.tokens;
        let prefill = |dec: &mut Dec| self.timed_prefill(dec, depth, capacity);
        let decode = |dec: &mut Dec| -> Result<u64, ArmFailure> {
            let n = dec
                .decode_at(depth, cfg.tokens)
                .map_err(|e| self.failed(e))?;
            dec.synchronize().map_err(sync_failure)?;
            Ok(n as u64)
        };
        // At least two warm-ups: the first prefill also compiles kernels and sets up libraries
        // (3 s against 0.3 s on the H200), and the last one's times size the windows.
        let (mut prefill_s, mut decode_s) = (0.0, 0.0);
        for _ in 0..cfg.warmup.max(2) {
            prefill_s = prefill(dec)?;
            decode_s = timed(clock, 1, 0.0, || decode(dec))?.1[0];
        }
        dec.reset_latency();
        let prefills = iterations_for(cfg.min_window_s, prefill_s, cfg.iterations);
        let decodes = iterations_for(cfg.min_window_s, decode_s, cfg.iterations);
        let cooldown = self.cool_down(meter)?;
        let trace_hz = cfg.trace.then_some(cfg.sample_hz);
        let (mut ttft, pw) = metered_window(meter, clock, trace_hz, || {
            let mut ttft = Vec::with_capacity(prefills);
            while ttft.len() < prefills || more_needed(&ttft, cfg.min_window_s) {
                ttft.push(prefill(dec)?);
            }
            Ok::<_, ArmFailure>(ttft)
        })?;
        let prompt_tokens = (ttft.len() * cfg.batch * depth) as u64;
        prefill(dec)?;
        let temp_start_c = meter.temperature_c().ok();
        let ((tokens, iteration_s), window) = metered_window(meter, clock, trace_hz, || {
            timed(clock, decodes, cfg.min_window_s, || decode(dec))
        })?;
        Ok(Windows {
            tokens,
            iteration_s,
            window,
            cooldown,
            temp_start_c,
            temp_end_c: meter.temperature_c().ok(),
            prefill: Some(PrefillWindow::of(&mut ttft, prompt_tokens, &pw)),
            requests: None,
        })
    }

    /// A prompt-set arm: warm-up passes over the set (the last one's time sizes the windows), the
    /// cooldown, the prefill window (every prompt's prefill, back to back, as many passes as fill
    /// it), then the window of whole requests (each prompt prefilled afresh, then decoded from
    /// its own depth for its output tokens), in the set's order. One cache of the set's capacity
    /// serves every request, as a server's context window does.
    fn prompt_set_windows(
        &self,
        meter: &mut dyn EnergyMeter,
        dec: &mut Dec,
        set: &crate::prompts::PromptSet,
    ) -> Result<Windows, ArmFailure> {
        let cfg = self.cfg;
        let clock = self.clock;
        let capacity = set.capacity();
        let prefill = |dec: &mut Dec, len: usize| self.timed_prefill(dec, len, capacity);
        let prefills = |dec: &mut Dec, ttft: &mut Vec<f64>| -> Result<(), ArmFailure> {
            for p in &set.prompts {
                ttft.push(prefill(dec, p.prompt_tokens as usize)?);
            }
            Ok(())
        };
        let pass = |dec: &mut Dec| -> Result<u64, ArmFailure> {
            let mut n = 0;
            for p in &set.prompts {
                let depth = p.prompt_tokens as usize;
                dec.prefill_prompt(cfg.batch, depth, capacity)
                    .map_err(|e| self.failed(e))?;
                n += dec
                    .decode_at(depth, p.output_tokens as usize)
                    .map_err(|e| self.failed(e))? as u64;
            }
            dec.synchronize().map_err(sync_failure)?;
            Ok(n)
        };
        let mut once_s = f64::NAN;
        for _ in 0..cfg.warmup.max(1) {
            once_s = timed(clock, 1, 0.0, || pass(dec))?.1[0];
        }
        dec.reset_latency();
        let passes = iterations_for(cfg.min_window_s, once_s, cfg.iterations);
        let cooldown = self.cool_down(meter)?;
        let trace_hz = cfg.trace.then_some(cfg.sample_hz);
        let (mut ttft, pw) = metered_window(meter, clock, trace_hz, || {
            let mut ttft = Vec::with_capacity(set.prompts.len());
            while ttft.is_empty() || more_needed(&ttft, cfg.min_window_s) {
                prefills(dec, &mut ttft)?;
            }
            Ok::<_, ArmFailure>(ttft)
        })?;
        let prefill_passes = ttft.len() / set.prompts.len();
        let temp_start_c = meter.temperature_c().ok();
        let ((tokens, iteration_s), window) = metered_window(meter, clock, trace_hz, || {
            timed(clock, passes, cfg.min_window_s, || pass(dec))
        })?;
        let batch = cfg.batch as u64;
        let done = iteration_s.len();
        let prefill = PrefillWindow::of(
            &mut ttft,
            prefill_passes as u64 * set.prompt_tokens() * batch,
            &pw,
        );
        Ok(Windows {
            tokens,
            iteration_s,
            window,
            cooldown,
            temp_start_c,
            temp_end_c: meter.temperature_c().ok(),
            prefill: Some(prefill),
            requests: Some(RequestsWindow {
                passes: done,
                requests: done * set.prompts.len(),
                prompt_tokens: done as u64 * set.prompt_tokens() * batch,
                ttft_p90_s: ttft[(ttft.len() * 9).div_ceil(10).max(1) - 1],
            }),
        })
    }
}

/// At least `n` iterations of `once` (each ending on a synchronized device and returning its
/// tokens), and more while they add up to less than `min_s`: the last warm-up that sized `n` can
/// run a little faster or slower than the timed iterations (on the H200, windows sized for 5 s
/// lasted 4.6–5.0 s). Each timed: the tokens in all and every iteration's seconds.
fn timed(
    clock: &Arc<dyn Clock>,
    n: usize,
    min_s: f64,
    mut once: impl FnMut() -> Result<u64, ArmFailure>,
) -> Result<(u64, Vec<f64>), ArmFailure> {
    let (mut tokens, mut seconds) = (0u64, Vec::with_capacity(n));
    while seconds.len() < n || more_needed(&seconds, min_s) {
        let t = clock.now_s();
        tokens += once()?;
        seconds.push(clock.now_s() - t);
    }
    Ok((tokens, seconds))
}

/// Whether iterations of these seconds still fall short of `min_s` (bounded at
/// [`MAX_WINDOW_ITERATIONS`], and never for a clock that does not move).
fn more_needed(seconds: &[f64], min_s: f64) -> bool {
    let sum: f64 = seconds.iter().sum();
    seconds.len() < MAX_WINDOW_ITERATIONS && sum > 0.0 && sum < min_s
}

/// The most iterations one window may hold.
const MAX_WINDOW_ITERATIONS: usize = 100_000;

/// How many iterations of `once_s` seconds make a window of at least `min_s`: `at_least`, or
/// more (at most 100 000).
fn iterations_for(min_s: f64, once_s: f64, at_least: usize) -> usize {
    let at_least = at_least.max(1);
    if once_s.is_nan() || once_s <= 0.0 || !min_s.is_finite() {
        return at_least;
    }
    ((min_s / once_s).ceil() as usize).clamp(at_least, MAX_WINDOW_ITERATIONS)
}

/// What one energy-counter window measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Metered {
    /// Window length, s.
    pub seconds: f64,
    /// From the hardware counter (the primary figure).
    pub counter_j: f64,
    /// The power trace over the window, if it ran.
    pub trace: Option<Trace>,
    /// Host CPU usage over the window, if readable.
    pub host: Option<HostWindow>,
    /// How the GPU spent the window (busy share, throttling), where the meter can say.
    pub activity: crate::meter::WindowActivity,
}

/// Why a window yields no figure although its body succeeded.
#[derive(Debug, thiserror::Error)]
pub enum WindowError {
    /// The meter failed.
    #[error("meter: {0}")]
    Meter(#[from] MeterError),
    #[error(
        "the energy counter did not move during a {0:.2} s window ({1} mJ → {2} mJ); refusing to report a zero"
    )]
    /// The counter did not move: (window s, start mJ, end mJ).
    CounterStuck(f64, u64, u64),
    /// The counter went backwards: (window s, start mJ, end mJ).
    #[error(
        "the energy counter went backwards during a {0:.2} s window ({1} mJ → {2} mJ); no figure"
    )]
    CounterBackwards(f64, u64, u64),
}

/// An energy-counter window that is open: the counter read at its start, the power trace
/// running. [`OpenWindow::close`] reads the end; [`metered_window`] is the two around a body, and
/// the Python module's `with meter.window():` opens and closes one around the user's code.
pub struct OpenWindow {
    sampler: Option<Sampler>,
    e0: u64,
    host0: Option<crate::meter::HostCpu>,
    t0: f64,
}

impl OpenWindow {
    /// Start the trace at `trace_hz` (when asked), read the counter and mark the GPU's activity.
    pub fn open(
        meter: &mut dyn EnergyMeter,
        clock: &Arc<dyn Clock>,
        trace_hz: Option<f64>,
    ) -> Result<OpenWindow, WindowError> {
        let sampler = trace_hz.map(|hz| Sampler::start(meter.power_probe(), clock.clone(), hz));
        let e0 = match meter.energy_mj() {
            Ok(e) => e,
            Err(e) => {
                sampler.map(Sampler::finish);
                return Err(WindowError::Meter(e));
            }
        };
        meter.begin_activity();
        Ok(OpenWindow {
            sampler,
            e0,
            host0: clock.host_cpu(),
            t0: clock.now_s(),
        })
    }

    /// Close the window: read the counter, stop the trace (always), and refuse a counter that
    /// did not move or went backwards — never a zero.
    pub fn close(
        self,
        meter: &mut dyn EnergyMeter,
        clock: &Arc<dyn Clock>,
    ) -> Result<Metered, WindowError> {
        let (sampler, e0) = (self.sampler, self.e0);
        let seconds = clock.now_s() - self.t0;
        let host1 = clock.host_cpu();
        let e1 = meter.energy_mj();
        let activity = meter.end_activity(seconds);
        let trace = sampler.map(Sampler::finish);
        let e1 = e1.map_err(WindowError::Meter)?;
        if e1 < e0 {
            return Err(WindowError::CounterBackwards(seconds, e0, e1));
        }
        if e1 == e0 {
            return Err(WindowError::CounterStuck(seconds, e0, e1));
        }
        Ok(Metered {
            seconds,
            counter_j: (e1 - e0) as f64 / 1000.0,
            trace,
            host: self
                .host0
                .zip(host1)
                .and_then(|(a, b)| HostWindow::between(a, b, seconds)),
            activity,
        })
    }
}

/// One energy-counter window around `body` (which must leave the device synchronized): the power
/// trace at `trace_hz` when asked, the counter read at both edges, the host CPU accounting. The
/// measurement protocol and the trace-overhead A/B both measure through this. A failing body wins
/// over a meter error at the close (the window then means nothing), and a counter that did not move
/// is an error, never a zero. The sampler thread is always stopped.
pub fn metered_window<T, E: From<WindowError>>(
    meter: &mut dyn EnergyMeter,
    clock: &Arc<dyn Clock>,
    trace_hz: Option<f64>,
    body: impl FnOnce() -> Result<T, E>,
) -> Result<(T, Metered), E> {
    let window = OpenWindow::open(meter, clock, trace_hz)?;
    let out = body();
    let metered = window.close(meter, clock);
    let value = out?;
    Ok((value, metered?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::seq::SliceRandom;
    use rand::SeedableRng;

    /// Over one cycle every arm takes every position once (twice for an odd count) and follows
    /// every other arm equally often; the order seed, not the repeat, picks the labels.
    #[test]
    fn rotated_orders_are_a_williams_design_over_the_repeats() {
        let all = [
            Precision::Fp16,
            Precision::Bf16,
            Precision::Q8_0,
            Precision::Q4K,
            Precision::Q4_0,
        ];
        for n in 2..=5 {
            let arms = &all[..n];
            let order = |repeat: usize| {
                let mut a = arms.to_vec();
                ArmOrder::Balanced { seed: 6000, repeat }.apply(&mut a, repeat as u64);
                a
            };
            let cycle = ArmOrder::cycle(n);
            let orders: Vec<Vec<Precision>> = (1..=cycle).map(order).collect();
            let per_arm = cycle / n;
            for pos in 0..n {
                for p in arms {
                    let k = orders.iter().filter(|o| o[pos] == *p).count();
                    assert_eq!(k, per_arm, "n = {n}: {p} at position {pos} in {orders:?}");
                }
            }
            // Ordered neighbours (a, b): n(n−1) pairs, each cycle·(n−1)/(n(n−1)) = cycle/n times.
            for a in arms {
                for b in arms.iter().filter(|b| *b != a) {
                    let k = orders
                        .iter()
                        .filter(|o| o.windows(2).any(|w| w[0] == *a && w[1] == *b))
                        .count();
                    assert_eq!(k, per_arm, "n = {n}: {a} then {b} in {orders:?}");
                }
            }
            assert_eq!(order(cycle + 1), order(1), "n = {n}: the cycle repeats");
        }
        // Two arms alternate: one first in repeat 1, the other in repeat 2.
        let first = |repeat: usize| {
            let mut a = [Precision::Fp16, Precision::Q4K];
            ArmOrder::Balanced { seed: 6000, repeat }.apply(&mut a, 0);
            a[0]
        };
        assert_ne!(first(1), first(2));
        assert_eq!(first(1), first(3));
    }

    /// Without a sweep the order is the run seed's shuffle, as every earlier report recorded it.
    #[test]
    fn seeded_order_is_the_run_seeds_shuffle() {
        let mut a = [
            Precision::Fp16,
            Precision::Q8_0,
            Precision::Q4K,
            Precision::Q4_0,
        ];
        let mut b = a;
        ArmOrder::Seeded.apply(&mut a, 4001);
        b.shuffle(&mut rand::rngs::StdRng::seed_from_u64(4001));
        assert_eq!(a, b);
    }
}
