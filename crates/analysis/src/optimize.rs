//! The optimizer: every (precision × batch × context) on one card, filtered by the user's budgets,
//! ranked by an objective; the optimum, alternatives, the energy↔latency Pareto frontier, and — when
//! nothing is feasible — the configuration that breaks the budgets least.
//!
//! Where the card's architecture has curves of several engines (the H200: eager candle, the
//! CUDA-graph engine, llama.cpp), the engine is one more dimension: engine × precision × batch ×
//! context. Each engine brings its own FP16 baseline, ΔE classes, batch curves and latency
//! calibration, and every [`Candidate`] names its engine — a recommendation is one stack's, never
//! a mix (the same card and model differ by tens of percent in FP16 energy between engines).
//!
//! Upstream's mechanism (DESIGN.md §3) with its flaws fixed:
//! * VRAM counts true bytes per format and the KV cache with grouped-query attention ([`crate::vram`](mod@crate::vram)).
//! * Latency is a roofline with a calibrated per-precision launch floor that carries the
//!   dequantization cost ([`crate::roofline`]).
//! * Energy stays anchored on measurements: FP16 baseline × (1 + ΔE%) from the class fit, × a batch
//!   curve calibrated on the A800 sweep ([`crate::batch`]), × a context term from the roofline.

use crate::batch::{batch_curve, engine_batch_curves, swept_class, BatchCurve, StackBatchCurve};
use crate::class::borrow_order;
use crate::curves::{arch_engines, default_classes, default_engine, preference, CurveClass};
use crate::dataset::{Dataset, Gpu};
use crate::estimate::{estimate, EstimateInput};
use crate::pareto::pareto_front;
use crate::roofline::{calibrate_latency, latency_calibration, Bound, LatencyCalibration};
use crate::shapes::{find_shape, shape_for_params, shapes, ModelShape};
use crate::tag::{Tag, Tagged};
use crate::vram::{find_format_on, vram, VramBreakdown, WeightFormat};
use report::{Arch, Precision};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

/// Batch sizes searched.
pub const BATCHES: [u32; 7] = [1, 2, 4, 8, 16, 32, 64];
/// Context lengths searched (tokens).
pub const CONTEXTS: [u32; 7] = [512, 1024, 2048, 4096, 8192, 16384, 32768];
/// Context at which the energy anchors were measured (short prompt + 256 new tokens; the batch
/// sweep used 256 + 256). Energy is scaled by the modelled step-time ratio against this context;
/// using upstream's 2048 would treat 512–2048 as free.
pub const ENERGY_REFERENCE_CONTEXT: u32 = 512;
/// Alternatives returned besides the optimum (at least 3 when the grid has them).
pub const MIN_ALTERNATIVES: usize = 4;
/// Most alternatives returned.
pub const MAX_ALTERNATIVES: usize = 6;

/// What the search ranks by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Objective {
    /// Least energy per token.
    MinEnergy,
    /// Shortest time per token of one sequence.
    MinLatency,
    /// Most tokens per second over the batch.
    MaxThroughput,
    /// Least VRAM.
    MinVram,
}

impl Objective {
    /// Every objective.
    pub const ALL: [Objective; 4] = [
        Objective::MinEnergy,
        Objective::MinLatency,
        Objective::MaxThroughput,
        Objective::MinVram,
    ];

    /// The CLI's spelling (`min-energy`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Objective::MinEnergy => "min-energy",
            Objective::MinLatency => "min-latency",
            Objective::MaxThroughput => "max-throughput",
            Objective::MinVram => "min-vram",
        }
    }

    /// Case-insensitive, `_` or `-`.
    pub fn parse(s: &str) -> Option<Objective> {
        let want = s.trim().to_ascii_lowercase().replace('_', "-");
        Objective::ALL.into_iter().find(|o| o.as_str() == want)
    }

    /// Smaller is better.
    fn key(self, c: &Candidate) -> f64 {
        match self {
            Objective::MinEnergy => c.energy_mj_per_token.value,
            Objective::MinLatency => c.latency_ms_per_token.value,
            Objective::MaxThroughput => -c.throughput_tok_s.value,
            Objective::MinVram => c.vram.total_gb.value,
        }
    }
}

/// Optional limits; `None` = no limit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Budgets {
    /// Time per token of one sequence, ms.
    pub max_latency_ms: Option<f64>,
    /// VRAM, GB.
    pub max_vram_gb: Option<f64>,
    /// Throughput floor, tok/s.
    pub min_tok_s: Option<f64>,
    /// J per 1k tokens = mJ per token.
    pub max_j_per_1k: Option<f64>,
}

/// What to search: a card, a model, an objective and budgets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OptimizeRequest {
    /// Card name as in gpus.csv or as NVML reports it.
    pub gpu: String,
    /// Model size in billions; taken from the named model when absent.
    pub params_b: Option<f64>,
    /// A named architecture from models.csv (real shapes); else a shape is interpolated from the size.
    pub model: Option<String>,
    /// What to rank by.
    pub objective: Objective,
    /// Limits a configuration must meet.
    #[serde(default)]
    pub budgets: Budgets,
    /// Fix the context length instead of searching the grid.
    pub context: Option<u32>,
    /// Search only this engine's stack (as [`crate::curve_engine`] names it: `candle-graph`, …);
    /// `None`: every engine with curves on the card's architecture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
}

/// Why a request cannot be searched.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum OptimizeError {
    /// The card is not in gpus.csv (the name, the known names).
    #[error("unknown GPU {0:?}; known: {1}")]
    UnknownGpu(String, String),
    /// The model is not in models.csv (the name, the known names).
    #[error("unknown model {0:?}; known: {1}")]
    UnknownModel(String, String),
    /// A size that is not a positive number up to report::MAX_PARAMS_B.
    #[error("params_b must be a positive number of billions, at most 100000 (got {0})")]
    BadSize(f64),
    /// Neither a size nor a model.
    #[error("pass a model size (params_b) or a named model")]
    NoSize,
    /// A context of 0 tokens.
    #[error("context must be ≥ 1 token")]
    BadContext,
    /// No FP16 baseline on this architecture or one it borrows from.
    #[error("no FP16 energy baseline for {0} or a sibling architecture")]
    NoBaseline(Arch),
    /// The engine asked for has no curve on this architecture or one it borrows from.
    #[error("no curves measured with {engine} on {arch} or a sibling architecture; engines there: {known}")]
    NoEngine {
        /// The engine asked for.
        engine: String,
        /// The card's architecture.
        arch: Arch,
        /// The engines that do have curves there.
        known: String,
    },
}

/// A limit a configuration can break: the user's four budgets and the card's own VRAM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Budget {
    /// The card's datasheet VRAM (always applies).
    CardVramGb,
    /// [`Budgets::max_vram_gb`].
    MaxVramGb,
    /// [`Budgets::max_latency_ms`].
    MaxLatencyMs,
    /// [`Budgets::min_tok_s`].
    MinTokS,
    /// [`Budgets::max_j_per_1k`].
    MaxJPer1k,
}

impl Budget {
    /// Every budget, in the order [`violations`] checks them.
    pub const ALL: [Budget; 5] = [
        Budget::CardVramGb,
        Budget::MaxVramGb,
        Budget::MaxLatencyMs,
        Budget::MinTokS,
        Budget::MaxJPer1k,
    ];

    /// The field name (`max_latency_ms`, `card_vram_gb`, …), as the JSON writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Budget::CardVramGb => "card_vram_gb",
            Budget::MaxVramGb => "max_vram_gb",
            Budget::MaxLatencyMs => "max_latency_ms",
            Budget::MinTokS => "min_tok_s",
            Budget::MaxJPer1k => "max_j_per_1k",
        }
    }
}

impl std::fmt::Display for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// Minimum energy only: the winner's lead over the best configuration of another precision is
/// inside the uncertainty of their ΔE vs FP16, so the data do not rank the two.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tie {
    /// The optimum's precision.
    pub leader: Precision,
    /// The optimum's engine.
    pub leader_engine: String,
    /// The precision of the best configuration of another precision (or engine).
    pub runner_up: Precision,
    /// The runner-up's engine.
    pub runner_up_engine: String,
    /// How much more energy per token the runner-up's best configuration uses, %.
    pub lead_pct: f64,
    /// The larger 95 % half-width of the two precisions' ΔE vs FP16, points.
    pub uncertainty_pts: f64,
    /// The sentence the page and the CLI print.
    pub message: String,
}

impl std::fmt::Display for Tie {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// One evaluated configuration. `engine`, `precision`, `batch` and `context` are the choice
/// itself; every figure carries its provenance tag.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    /// The engine (stack) whose measurements every figure rests on: its FP16 baseline, ΔE class,
    /// batch curve and latency calibration.
    pub engine: String,
    /// The precision chosen.
    pub precision: Precision,
    /// Batch size.
    pub batch: u32,
    /// Context length, tokens.
    pub context: u32,
    /// mJ per generated token = J per 1k tokens.
    pub energy_mj_per_token: Tagged<f64>,
    /// FP16 at batch 1, reference context (the anchor baseline).
    pub fp16_energy_mj_per_token: Tagged<f64>,
    /// ΔE% of this precision vs FP16 from the class fit, batch 1.
    pub delta_vs_fp16_pct: Tagged<f64>,
    /// Energy per token at this batch relative to batch 1.
    pub batch_factor: Tagged<f64>,
    /// Energy per token at this context relative to the reference context.
    pub context_factor: Tagged<f64>,
    /// Time between two tokens of one sequence (one decode step), ms.
    pub latency_ms_per_token: Tagged<f64>,
    /// Tokens per second summed over the batch.
    pub throughput_tok_s: Tagged<f64>,
    /// What limits the step in the model.
    pub bound: Tagged<Bound>,
    /// What it needs in memory.
    pub vram: VramBreakdown,
    /// Whether that fits the card.
    pub fits_vram: Tagged<bool>,
}

/// Relative change of an alternative vs the optimum, % (positive = larger).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Deltas {
    /// Energy per token.
    pub energy_pct: Tagged<f64>,
    /// Latency per token.
    pub latency_pct: Tagged<f64>,
    /// Throughput.
    pub throughput_pct: Tagged<f64>,
    /// VRAM.
    pub vram_pct: Tagged<f64>,
}

/// A configuration listed next to the optimum.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alternative {
    /// The configuration.
    pub candidate: Candidate,
    /// How it compares with the optimum.
    pub vs_optimum: Deltas,
    /// Why it is listed (e.g. "best NF4").
    pub why: String,
}

/// One budget a configuration breaks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Violation {
    /// Which budget.
    pub budget: Budget,
    /// The limit.
    pub limit: f64,
    /// The configuration's value.
    pub value: Tagged<f64>,
    /// How far past the limit, % of the limit.
    pub excess_pct: f64,
    /// The breach in words, with both figures.
    pub message: String,
}

/// The configuration that breaks the budgets least, when none meets them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeastViolating {
    /// The configuration.
    pub candidate: Candidate,
    /// Every budget it breaks.
    pub violations: Vec<Violation>,
    /// Sum of the relative excesses, % (what is minimised).
    pub total_excess_pct: f64,
}

/// The card the search ran on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuSummary {
    /// Card name.
    pub name: String,
    /// Architecture class.
    pub arch: Arch,
    /// Memory, GB.
    pub vram_gb: Tagged<f64>,
    /// Memory bandwidth, GB/s.
    pub bandwidth_gbs: Tagged<f64>,
    /// Dense FP16 TFLOPS.
    pub fp16_tflops: Tagged<f64>,
    /// Launch-floor factor of this card's published runs (1 = typical host; no published data).
    pub launch_factor: Tagged<f64>,
}

/// The model shape the search used.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelSummary {
    /// Shape name (a models.csv row, or interpolated).
    pub name: String,
    /// Size used for the energy curves.
    pub params_b: Tagged<f64>,
    /// Parameters counted from the shape.
    pub shape_params_b: Tagged<f64>,
    /// Transformer layers.
    pub layers: usize,
    /// Key/value heads.
    pub kv_heads: usize,
    /// Head dimension.
    pub head_dim: usize,
    /// Whether the shape is a real config or interpolated.
    pub shape_tag: Tag,
}

/// How many configurations the search saw and why they were dropped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchCounts {
    /// Configurations evaluated.
    pub evaluated: usize,
    /// Over the card's VRAM.
    pub over_vram: usize,
    /// Over the user's budgets (and within VRAM).
    pub over_budget: usize,
    /// Within every limit.
    pub feasible: usize,
}

/// The calibrations behind the figures, with their fit quality.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelQuality {
    /// Batch curve c.
    pub batch_c: f64,
    /// Batch curve k.
    pub batch_k: f64,
    /// Batch curve RMS error over the sweep, %.
    pub batch_rms_error_pct: f64,
    /// Upstream factor's RMS error, %.
    pub batch_upstream_rms_error_pct: f64,
    /// What the batch curve was fitted on.
    pub batch_calibrated_on: &'static str,
    /// RMS throughput error to expect on this card: over its own measured rows where it has
    /// some (published, or our campaigns' on every stack), pooled over every card otherwise.
    pub throughput_rms_error_pct: f64,
    /// Median |throughput error| to expect on this card, %.
    pub throughput_median_abs_error_pct: f64,
    /// What those two figures are over, in words (`this card's 94 measured rows`).
    pub throughput_scope: String,
}

/// Everything one search found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OptimizeResult {
    /// The request.
    pub request: OptimizeRequest,
    /// The card.
    pub gpu: GpuSummary,
    /// The model shape.
    pub model: ModelSummary,
    /// Engines searched, preferred first; every candidate names its own.
    pub engines: Vec<String>,
    /// Precisions searched over all engines (FP16 first).
    pub precisions: Vec<Precision>,
    /// Whether any configuration meets every limit.
    pub feasible: bool,
    /// The best feasible configuration.
    pub optimum: Option<Candidate>,
    /// Alternatives to the optimum.
    pub alternatives: Vec<Alternative>,
    /// Non-dominated on (energy, latency) among feasible candidates, by increasing latency.
    pub pareto: Vec<Candidate>,
    /// Every feasible candidate, best first by the objective (what the page draws as the cloud
    /// behind the frontier). Not serialized: the JSON stays the summary above.
    #[serde(skip)]
    pub feasible_configs: Vec<Candidate>,
    /// When nothing is feasible: the configuration that breaks the budgets least.
    pub least_violating: Option<LeastViolating>,
    /// Search counts.
    pub counts: SearchCounts,
    /// Calibrations behind the figures.
    pub quality: ModelQuality,
    /// Minimum energy only: the winner's lead over the best other precision is inside the
    /// uncertainty of their ΔE vs FP16, so the data do not rank them.
    pub tie: Option<Tie>,
    /// How the figures were made, in words.
    pub notes: Vec<String>,
}

/// Energy inputs of one engine and precision at batch 1 (they do not depend on batch or context).
#[derive(Debug, Clone)]
struct PrecisionEnergy {
    engine: String,
    precision: Precision,
    fmt: &'static WeightFormat,
    fp16: Tagged<f64>,
    delta: Tagged<f64>,
    /// Half-width of the ΔE estimate's 95 % interval, points (`None` for FP16 itself).
    delta_halfwidth: Option<f64>,
    note: Option<String>,
}

/// Provenance of `engine`'s FP16 baseline at `params_b` on `arch`.
fn fp16_tag(ds: &Dataset, arch: Arch, engine: &str, params_b: f64) -> Tag {
    let sizes: Vec<f64> = ds
        .anchors
        .iter()
        .filter(|a| {
            a.default_curve && a.arch == arch && a.fp16_energy_mj.is_some() && a.engine() == engine
        })
        .map(|a| a.params_b)
        .collect();
    let (lo, hi) = sizes
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &n| {
            (l.min(n), h.max(n))
        });
    if sizes
        .iter()
        .any(|&n| crate::estimate::same_size(n, params_b))
    {
        Tag::Measured
    } else if params_b >= lo && params_b <= hi {
        Tag::Interpolated
    } else {
        Tag::Extrapolated // includes a borrowed baseline (no sizes on this architecture)
    }
}

/// The engines searched on `arch`: the pinned one (which must have curves there or on an
/// architecture `arch` borrows from), else every engine with curves of its own on `arch`, else the
/// one [`default_engine`] borrows. Another engine is never mixed in: an architecture with its own
/// candle curves searches no borrowed bitsandbytes class.
fn searched_engines(
    classes: &[CurveClass],
    arch: Arch,
    pinned: Option<&str>,
) -> Result<Vec<String>, OptimizeError> {
    let own = arch_engines(classes, arch);
    let Some(e) = pinned else {
        return Ok(if own.is_empty() {
            default_engine(classes, arch).into_iter().collect()
        } else {
            own
        });
    };
    let lent = borrow_order(arch)
        .iter()
        .any(|b| arch_engines(classes, *b).iter().any(|x| x == e));
    if own.iter().any(|x| x == e) || lent {
        Ok(vec![e.to_string()])
    } else {
        Err(OptimizeError::NoEngine {
            engine: e.to_string(),
            arch,
            known: searched_engines(classes, arch, None)?.join(", "),
        })
    }
}

/// Precisions with an `engine` curve for this architecture or one it borrows from, FP16 first.
fn searchable_precisions(classes: &[CurveClass], arch: Arch, engine: &str) -> Vec<Precision> {
    let mut out = vec![Precision::Fp16];
    for a in std::iter::once(&arch).chain(borrow_order(arch)) {
        for c in classes
            .iter()
            .filter(|c| c.arch == *a && c.engine == engine)
        {
            if !out.contains(&c.precision) && find_format_on(c.precision.as_str(), engine).is_some()
            {
                out.push(c.precision);
            }
        }
    }
    out
}

fn precision_energy(
    ds: &Dataset,
    classes: &[CurveClass],
    arch: Arch,
    params_b: f64,
    precision: Precision,
    engine: &str,
) -> Option<PrecisionEnergy> {
    // Batch 1 and context 2048 make upstream's savings-shrink factor exactly 1: batch and context
    // are applied below by the calibrated terms instead.
    let input = EstimateInput {
        arch,
        params_b,
        precision,
        batch: 1,
        context: 2048,
        engine: Some(engine.to_string()),
    };
    let e = estimate(ds, classes, &input);
    let (fp16, delta) = (e.fp16_energy_mj?, e.delta_pct?);
    let fp16_arch_tag = fp16_tag(ds, arch, engine, params_b);
    let delta_tag = if precision == Precision::Fp16 {
        Tag::Computed
    } else if e.points_at_size > 0 && e.borrowed_from.is_none() {
        Tag::Measured
    } else {
        Tag::from(e.basis)
    };
    Some(PrecisionEnergy {
        engine: engine.to_string(),
        precision,
        fmt: find_format_on(precision.as_str(), engine)?,
        fp16: Tagged::new(fp16, fp16_arch_tag),
        delta: Tagged::new(delta, delta_tag),
        delta_halfwidth: e
            .interval()
            .filter(|_| precision != Precision::Fp16)
            .map(|(lo, hi)| (hi - lo) / 2.0),
        note: e.borrowed_from.map(|b| {
            format!("{precision} ({engine}) on {arch}: ΔE curve borrowed from {b} (extrapolated)")
        }),
    })
}

/// Every engine's energy inputs, engine by engine (preferred first). An engine without an FP16
/// baseline is left out, and said so; the search fails only when no engine has one.
fn search_energies(
    ds: &Dataset,
    classes: &[CurveClass],
    arch: Arch,
    params_b: f64,
    pinned: Option<&str>,
    notes: &mut Vec<String>,
) -> Result<Vec<PrecisionEnergy>, OptimizeError> {
    let mut out = Vec::new();
    for engine in searched_engines(classes, arch, pinned)? {
        let own: Vec<PrecisionEnergy> = searchable_precisions(classes, arch, &engine)
            .into_iter()
            .filter_map(|p| precision_energy(ds, classes, arch, params_b, p, &engine))
            .collect();
        if own.iter().any(|e| e.precision == Precision::Fp16) {
            out.extend(own);
        } else {
            notes.push(format!(
                "{engine} left out: no FP16 baseline measured with it on {arch} or a sibling architecture"
            ));
        }
    }
    if out.is_empty() {
        return Err(OptimizeError::NoBaseline(arch));
    }
    notes.extend(out.iter().filter_map(|e| e.note.clone()));
    Ok(out)
}

/// Everything the grid needs that does not change from cell to cell.
struct Setup<'a> {
    gpu: &'a Gpu,
    shape: ModelShape,
    cal: &'a LatencyCalibration,
    batch: &'a BatchCurve,
    /// Our own engines' per-precision batch curves (each engine's own sweep, never pooled).
    engine_batch: Vec<StackBatchCurve>,
    /// The context runs measured on this card at this model's size ([`Dataset::context`]).
    measured_context: Vec<&'a crate::dataset::Anchor>,
}

impl Setup<'_> {
    /// Every candidate of the grid: each precision's energy × [`BATCHES`] × the context asked
    /// for (or every one of [`CONTEXTS`]), in that order.
    fn grid(&self, energies: &[PrecisionEnergy], context: Option<u32>) -> Vec<Candidate> {
        let contexts: Vec<u32> = context.map_or(CONTEXTS.to_vec(), |c| vec![c]);
        let mut all: Vec<Candidate> =
            Vec::with_capacity(energies.len() * BATCHES.len() * contexts.len());
        for pe in energies {
            for &b in &BATCHES {
                all.extend(contexts.iter().map(|&c| self.candidate(pe, b, c)));
            }
        }
        all
    }

    /// The calibrated step, with the engine's measured batch correction where it has a sweep.
    fn step_ms(&self, pe: &PrecisionEnergy, batch: u32, context: u32) -> (f64, Bound) {
        let s = self
            .cal
            .step(self.gpu, &self.shape, pe.fmt, pe.precision, batch, context);
        (s.step_ms, s.bound)
    }

    /// The engine's own batch curve for `precision`: FP16's for the 16-bit float formats, which
    /// run the same GEMMs; Q4_K's for every quantized GGUF format — the one measured. `None` where
    /// the engine has no sweep of its own (transformers: the A800 sweep's curve is its own).
    fn engine_curve(&self, engine: &str, precision: Precision) -> Option<&StackBatchCurve> {
        let want = swept_class(precision);
        self.engine_batch
            .iter()
            .find(|c| c.engine == engine && c.precision == want)
    }

    /// Energy per token at `batch` relative to batch 1: the engine's own sweep where it has one
    /// ([`Setup::engine_curve`]: measured batches, log-log between them, the fit beyond), else the
    /// A800 sweep's fitted curve. Interpolated only for the swept precision at a swept size; a
    /// format that borrows another's sweep (BF16 FP16's, Q4_0 Q4_K's) is extrapolated.
    fn batch_factor(&self, engine: &str, precision: Precision, batch: u32) -> Tagged<f64> {
        match self.engine_curve(engine, precision) {
            Some(c) => Tagged::new(
                c.factor(batch),
                c.factor_tag(batch, self.shape.params_b, precision),
            ),
            None if batch <= 1 => Tagged::new(self.batch.factor(batch), Tag::Computed),
            None => Tagged::new(self.batch.factor(batch), Tag::Modelled),
        }
    }

    /// The context run measured at batch 1 for this engine and precision at `context` (its depth +
    /// the 256 tokens it decodes, within 10 %), the one of most runs; its FP16 row of the same runs.
    fn measured_at(
        &self,
        pe: &PrecisionEnergy,
        batch: u32,
        context: u32,
    ) -> Option<(&crate::dataset::Anchor, &crate::dataset::Anchor)> {
        if batch != 1 {
            return None;
        }
        let near = |a: &crate::dataset::Anchor| {
            let at = f64::from(a.context_depth.unwrap_or(0) + crate::context::DECODE_TOKENS);
            (f64::from(context) - at).abs() <= 0.1 * at
        };
        let row = self
            .measured_context
            .iter()
            .filter(|a| a.precision == pe.precision && a.engine() == pe.engine && near(a))
            .max_by_key(|a| a.n.unwrap_or(0))?;
        let fp16 = self
            .measured_context
            .iter()
            .find(|o| o.is_fp16_beside(row))?;
        Some((row, fp16))
    }

    fn candidate(&self, pe: &PrecisionEnergy, batch: u32, context: u32) -> Candidate {
        let mut c = self.modelled_candidate(pe, batch, context);
        if let Some((row, fp16)) = self.measured_at(pe, batch, context) {
            if let (Some(e), Some(f), Some(d)) = (row.energy_mj, fp16.energy_mj, row.delta_pct()) {
                // Measured at this depth, FP16 in the same runs: the energy is the row's.
                c.energy_mj_per_token = Tagged::new(e, Tag::Measured);
                c.fp16_energy_mj_per_token = Tagged::new(f, Tag::Measured);
                c.delta_vs_fp16_pct = Tagged::new(d, Tag::Measured);
                c.context_factor = Tagged::new(1.0, Tag::Measured);
            }
        }
        c
    }

    fn modelled_candidate(&self, pe: &PrecisionEnergy, batch: u32, context: u32) -> Candidate {
        let (step, bound) = self.step_ms(pe, batch, context);
        let (ref_step, _) = self.step_ms(pe, batch, ENERGY_REFERENCE_CONTEXT);
        // Energy per token ∝ step time at fixed power: longer KV reads cost proportionally more.
        // Shorter-than-reference contexts are not credited (the anchors were measured there).
        let ctx_factor = (step / ref_step).max(1.0);
        let b_factor = self.batch_factor(&pe.engine, pe.precision, batch);
        let base_tag = pe.fp16.tag.weakest(pe.delta.tag);
        let energy_tag = if batch == 1 && ctx_factor == 1.0 {
            base_tag
        } else {
            base_tag.weakest(Tag::Modelled)
        };
        let energy = pe.fp16.value * (1.0 + pe.delta.value / 100.0) * b_factor.value * ctx_factor;
        let v = vram(&self.shape, pe.fmt, batch, context);
        let fits = v.total_gb.value <= self.gpu.vram_gb;
        Candidate {
            engine: pe.engine.clone(),
            precision: pe.precision,
            batch,
            context,
            energy_mj_per_token: Tagged::new(energy, energy_tag),
            fp16_energy_mj_per_token: pe.fp16,
            delta_vs_fp16_pct: pe.delta,
            batch_factor: b_factor,
            context_factor: Tagged::new(ctx_factor, Tag::Modelled),
            latency_ms_per_token: Tagged::modelled(step),
            throughput_tok_s: Tagged::modelled(batch as f64 / step * 1e3),
            bound: Tagged::modelled(bound),
            vram: v,
            fits_vram: Tagged::modelled(fits),
        }
    }
}

fn excess(
    budget: Budget,
    limit: f64,
    value: Tagged<f64>,
    over: f64,
    unit: &str,
    verb: &str,
) -> Option<Violation> {
    (over > 0.0).then(|| Violation {
        budget,
        limit,
        value,
        excess_pct: over / limit * 100.0,
        message: format!(
            "{verb} {:.4} {unit} vs limit {limit} {unit} ({:+.1} %)",
            value.value,
            over / limit * 100.0
        ),
    })
}

/// The budgets (and the card's VRAM) that `c` breaks, with how far.
pub fn violations(c: &Candidate, b: &Budgets, card_vram_gb: f64) -> Vec<Violation> {
    let vram = c.vram.total_gb;
    let lat = c.latency_ms_per_token;
    let tput = c.throughput_tok_s;
    let energy = c.energy_mj_per_token;
    [
        excess(
            Budget::CardVramGb,
            card_vram_gb,
            vram,
            vram.value - card_vram_gb,
            "GB",
            "needs",
        ),
        b.max_vram_gb
            .and_then(|l| excess(Budget::MaxVramGb, l, vram, vram.value - l, "GB", "needs")),
        b.max_latency_ms.and_then(|l| {
            excess(
                Budget::MaxLatencyMs,
                l,
                lat,
                lat.value - l,
                "ms/token",
                "takes",
            )
        }),
        b.min_tok_s
            .and_then(|l| excess(Budget::MinTokS, l, tput, l - tput.value, "tok/s", "gives")),
        b.max_j_per_1k.and_then(|l| {
            excess(
                Budget::MaxJPer1k,
                l,
                energy,
                energy.value - l,
                "J/1k tokens",
                "uses",
            )
        }),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Objective first; then energy, latency, VRAM and the config itself, so ties are deterministic.
fn rank(objective: Objective, a: &Candidate, b: &Candidate) -> Ordering {
    objective
        .key(a)
        .total_cmp(&objective.key(b))
        .then(
            a.energy_mj_per_token
                .value
                .total_cmp(&b.energy_mj_per_token.value),
        )
        .then(
            a.latency_ms_per_token
                .value
                .total_cmp(&b.latency_ms_per_token.value),
        )
        .then(a.vram.total_gb.value.total_cmp(&b.vram.total_gb.value))
        // By spelling, not declaration order, so ties rank as they always did.
        .then(a.precision.as_str().cmp(b.precision.as_str()))
        .then(preference(&a.engine).cmp(&preference(&b.engine)))
        .then(a.batch.cmp(&b.batch))
        .then(a.context.cmp(&b.context))
}

fn rel_pct(v: Tagged<f64>, base: Tagged<f64>) -> Tagged<f64> {
    Tagged::new(
        (v.value - base.value) / base.value * 100.0,
        v.tag.weakest(base.tag),
    )
}

fn deltas(c: &Candidate, o: &Candidate) -> Deltas {
    Deltas {
        energy_pct: rel_pct(c.energy_mj_per_token, o.energy_mj_per_token),
        latency_pct: rel_pct(c.latency_ms_per_token, o.latency_ms_per_token),
        throughput_pct: rel_pct(c.throughput_tok_s, o.throughput_tok_s),
        vram_pct: rel_pct(c.vram.total_gb, o.vram.total_gb),
    }
}

/// A configuration's choice in words: its precision, and its engine when the search had several.
fn choice_label(c: &Candidate, several_engines: bool) -> String {
    if several_engines {
        format!("{} on {}", c.precision, c.engine)
    } else {
        c.precision.to_string()
    }
}

fn same_choice(a: &Candidate, b: &Candidate) -> bool {
    a.engine == b.engine && a.precision == b.precision
}

/// Best of every other (engine, precision) first, then the next-ranked configurations with an
/// (engine, precision, batch) not listed yet, until there are enough.
fn alternatives(
    ranked: &[&Candidate],
    objective: Objective,
    several_engines: bool,
) -> Vec<Alternative> {
    let Some(opt) = ranked.first() else {
        return Vec::new();
    };
    let mut picked: Vec<(&Candidate, String)> = Vec::new();
    for c in ranked.iter().skip(1) {
        if !same_choice(c, opt) && !picked.iter().any(|(p, _)| same_choice(p, c)) {
            picked.push((
                c,
                format!(
                    "best {} for {}",
                    choice_label(c, several_engines),
                    objective.as_str()
                ),
            ));
        }
    }
    for c in ranked.iter().skip(1) {
        if picked.len() >= MIN_ALTERNATIVES {
            break;
        }
        let seen = |p: &Candidate| same_choice(p, c) && p.batch == c.batch;
        if !seen(opt) && !picked.iter().any(|(p, _)| seen(p)) {
            picked.push((c, format!("runner-up for {}", objective.as_str())));
        }
    }
    picked.truncate(MAX_ALTERNATIVES);
    picked.sort_by(|a, b| rank(objective, a.0, b.0));
    picked
        .into_iter()
        .map(|(c, why)| Alternative {
            candidate: c.clone(),
            vs_optimum: deltas(c, opt),
            why,
        })
        .collect()
}

fn least_violating(all: &[Candidate], b: &Budgets, card_vram_gb: f64) -> Option<LeastViolating> {
    all.iter()
        .map(|c| {
            let v = violations(c, b, card_vram_gb);
            let total: f64 = v.iter().map(|x| x.excess_pct).sum();
            (c, v, total)
        })
        .min_by(|a, b| {
            a.2.total_cmp(&b.2).then(
                a.0.energy_mj_per_token
                    .value
                    .total_cmp(&b.0.energy_mj_per_token.value),
            )
        })
        .map(|(c, violations, total)| LeastViolating {
            candidate: c.clone(),
            violations,
            total_excess_pct: total,
        })
}

fn resolve_shape(req: &OptimizeRequest) -> Result<(ModelShape, Tag, f64), OptimizeError> {
    if let Some(p) = req.params_b {
        // Above report::MAX_PARAMS_B a size is a typo, and the shape model's counts would overflow.
        if !(p.is_finite() && p > 0.0 && p <= report::MAX_PARAMS_B) {
            return Err(OptimizeError::BadSize(p));
        }
    }
    match (&req.model, req.params_b) {
        (Some(name), p) => {
            let s = find_shape(name).ok_or_else(|| {
                OptimizeError::UnknownModel(
                    name.clone(),
                    shapes()
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                )
            })?;
            Ok((s.clone(), Tag::Computed, p.unwrap_or(s.params_b)))
        }
        (None, Some(p)) => {
            let (lo, hi) = shapes().iter().fold((f64::INFINITY, 0.0f64), |(l, h), s| {
                (l.min(s.params_b), h.max(s.params_b))
            });
            let tag = if p >= lo && p <= hi {
                Tag::Interpolated
            } else {
                Tag::Extrapolated
            };
            Ok((shape_for_params(p), tag, p))
        }
        (None, None) => Err(OptimizeError::NoSize),
    }
}

fn gpu_summary(gpu: &Gpu, cal: &LatencyCalibration) -> GpuSummary {
    let factor = cal.card_factor(&gpu.name);
    GpuSummary {
        name: gpu.name.clone(),
        arch: gpu.arch,
        vram_gb: Tagged::computed(gpu.vram_gb),
        bandwidth_gbs: Tagged::computed(gpu.bandwidth_gbs),
        fp16_tflops: Tagged::computed(gpu.fp16_tflops),
        launch_factor: Tagged::new(
            factor,
            if cal.cards.iter().any(|c| c.gpu == gpu.name) {
                Tag::Interpolated
            } else {
                Tag::Modelled
            },
        ),
    }
}

fn model_quality(gpu: &Gpu, cal: &LatencyCalibration, b: &BatchCurve) -> ModelQuality {
    // A card's own rows say what to expect on it: the H200's are our three stacks' runs, which
    // the pooled all-card figure (dominated by other cards' transformers rows) misdescribes.
    let here: Vec<f64> = cal
        .rows
        .iter()
        .filter(|r| r.used_in_fit && r.gpu == gpu.name)
        .map(|r| r.error_pct)
        .collect();
    if !here.is_empty() {
        return ModelQuality {
            batch_c: b.c,
            batch_k: b.k,
            batch_rms_error_pct: b.rms_error_pct,
            batch_upstream_rms_error_pct: b.upstream_rms_error_pct,
            batch_calibrated_on: b.calibrated_on,
            throughput_rms_error_pct: crate::roofline::rms_pct(&here),
            throughput_median_abs_error_pct: crate::roofline::median_abs_pct(&here),
            throughput_scope: format!("this card's {} measured rows", here.len()),
        };
    }
    let own = cal.cards.iter().any(|c| c.gpu == gpu.name);
    ModelQuality {
        batch_c: b.c,
        batch_k: b.k,
        batch_rms_error_pct: b.rms_error_pct,
        batch_upstream_rms_error_pct: b.upstream_rms_error_pct,
        batch_calibrated_on: b.calibrated_on,
        throughput_rms_error_pct: if own {
            cal.rms_error_pct
        } else {
            cal.pooled_rms_error_pct
        },
        throughput_median_abs_error_pct: if own {
            cal.median_abs_error_pct
        } else {
            cal.pooled_median_abs_error_pct
        },
        throughput_scope: "every card's rows, pooled: no measured runs on this card".into(),
    }
}

fn standing_notes() -> Vec<String> {
    vec![
        "energy: FP16 baseline from the anchors (log-log between sizes) × (1 + ΔE%/100) from the class fit at batch 1".into(),
        "batch: e(b)/e(1) = c + (1 − c)/b^k calibrated on one INT8-pure A800 sweep and applied to every precision; \
         our own engines (candle, candle-graph, llama.cpp) use the F16 and Q4_K ratios of their own sweep where they \
         have one (F16's for BF16, Q4_K's for every GGUF format; log-log between the measured batches, the fit only \
         beyond them), never another engine's"
            .into(),
        format!(
            "context: energy scaled by the modelled step-time ratio vs {ENERGY_REFERENCE_CONTEXT} tokens (the anchors' \
             short-prompt + 256-token runs), at the same batch; ≥ 1"
        ),
        "latency: max(launch floor, (weights + batch·KV)/bandwidth, FLOPs/compute) per decode step; launch floor \
         calibrated per precision and stack on measured throughputs (published rows; candle, candle-graph and \
         llama.cpp rows from our H200 runs, each engine on its own); at batch > 1 an engine with a batch sweep of \
         its own has that step × its measured batch correction (measured over modelled, relative to batch 1; \
         'engine-bound' where it is > 1.25)"
            .into(),
        "VRAM: true bytes per format + GQA KV cache (fp16) + prefill activations + 0.5 GB CUDA context + 5 % allocator \
         slack; a card's datasheet GB (1e9 bytes) is the hard limit"
            .into(),
    ]
}

/// Search the grid on the embedded dataset and default curves.
pub fn optimize(req: &OptimizeRequest) -> Result<OptimizeResult, OptimizeError> {
    optimize_with(Dataset::embedded(), default_classes(), req)
}

/// Search the grid on a given dataset and classes (see [`optimize`]).
pub fn optimize_with(
    ds: &Dataset,
    classes: &[CurveClass],
    req: &OptimizeRequest,
) -> Result<OptimizeResult, OptimizeError> {
    let gpu = find_gpu(ds, &req.gpu)?;
    if req.context == Some(0) {
        return Err(OptimizeError::BadContext);
    }
    let (shape, shape_tag, params_b) = resolve_shape(req)?;
    let mut notes = standing_notes();
    let energies = search_energies(
        ds,
        classes,
        gpu.arch,
        params_b,
        req.engine.as_deref(),
        &mut notes,
    )?;
    // Another dataset (tests, a page with user rows) calibrates its own latency model: its engines'
    // rows are what the step times must come from.
    let own_cal;
    let cal = if std::ptr::eq(ds, Dataset::embedded()) {
        latency_calibration()
    } else {
        own_cal = calibrate_latency(ds);
        &own_cal
    };
    let setup = Setup {
        gpu,
        shape: shape.clone(),
        cal,
        batch: batch_curve(),
        engine_batch: engine_batch_curves(ds),
        measured_context: ds
            .context
            .iter()
            .filter(|a| {
                ds.gpu(&a.gpu).is_some_and(|g| std::ptr::eq(g, gpu))
                    && crate::estimate::same_size(a.params_b, shape.params_b)
            })
            .collect(),
    };
    let engines = distinct_engines(&energies);
    notes.extend(engine_notes(&setup, &engines));
    let all = setup.grid(&energies, req.context);
    if let Some(c) = all
        .iter()
        .find(|c| c.context_factor.tag == Tag::Measured && c.context != 0)
    {
        notes.push(format!(
            "context: at {} tokens on this card the batch-1 energies of the formats measured there (context runs: \
             decode after the depth's tokens were cached, FP16 in the same runs) are measured, not modelled",
            c.context
        ));
    }
    let feasible = feasible_ranked(&all, req, gpu.vram_gb);
    let least = if feasible.is_empty() {
        least_violating(&all, &req.budgets, gpu.vram_gb)
    } else {
        None
    };
    let several = engines.len() > 1;
    let tie = (req.objective == Objective::MinEnergy)
        .then(|| energy_tie(&feasible, &energies, several))
        .flatten();
    notes.extend(outcome_notes(
        classes,
        req,
        gpu.arch,
        feasible.first().copied(),
        &shape,
        shape_tag,
    ));
    Ok(OptimizeResult {
        request: req.clone(),
        gpu: gpu_summary(gpu, setup.cal),
        model: model_summary(&shape, shape_tag, params_b),
        precisions: distinct_precisions(&energies),
        engines,
        feasible: !feasible.is_empty(),
        optimum: feasible.first().map(|c| (*c).clone()),
        alternatives: alternatives(&feasible, req.objective, several),
        pareto: distinct_pareto(&feasible),
        feasible_configs: feasible.iter().map(|c| (*c).clone()).collect(),
        least_violating: least,
        tie,
        counts: SearchCounts::of(&all, feasible.len()),
        quality: model_quality(gpu, setup.cal, setup.batch),
        notes,
    })
}

/// The card named `name` in the dataset's catalog, else an error listing the catalog.
fn find_gpu<'d>(ds: &'d Dataset, name: &str) -> Result<&'d Gpu, OptimizeError> {
    ds.gpu(name).ok_or_else(|| {
        OptimizeError::UnknownGpu(
            name.to_string(),
            ds.gpus
                .iter()
                .map(|g| g.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        )
    })
}

/// The candidates within every budget and the card's VRAM, best first by `req`'s objective.
fn feasible_ranked<'c>(
    all: &'c [Candidate],
    req: &OptimizeRequest,
    vram_gb: f64,
) -> Vec<&'c Candidate> {
    let mut feasible: Vec<&Candidate> = all
        .iter()
        .filter(|c| violations(c, &req.budgets, vram_gb).is_empty())
        .collect();
    feasible.sort_by(|a, b| rank(req.objective, a, b));
    feasible
}

/// The energy↔latency Pareto front of the (ranked) feasible candidates, one per point.
fn distinct_pareto(feasible: &[&Candidate]) -> Vec<Candidate> {
    let points: Vec<(f64, f64)> = feasible
        .iter()
        .map(|c| (c.latency_ms_per_token.value, c.energy_mj_per_token.value))
        .collect();
    let mut pareto: Vec<Candidate> = pareto_front(&points)
        .into_iter()
        .map(|i| feasible[i].clone())
        .collect();
    // Configurations that tie on both axes (e.g. a longer context that costs nothing while launch-bound)
    // add no choice: keep the first, which the ranking already prefers.
    pareto.dedup_by(|b, a| {
        a.latency_ms_per_token.value == b.latency_ms_per_token.value
            && a.energy_mj_per_token.value == b.energy_mj_per_token.value
    });
    pareto
}

/// What the result rests on: the stack of the recommendation (`optimum`), a searched context, a
/// shape scaled to the size.
fn outcome_notes(
    classes: &[CurveClass],
    req: &OptimizeRequest,
    arch: Arch,
    optimum: Option<&Candidate>,
    shape: &ModelShape,
    shape_tag: Tag,
) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(o) = optimum {
        notes.push(format!(
            "the recommendation assumes the {} stack{}: its figures are that engine's measurements",
            o.engine,
            stack_text(classes, arch, &o.engine)
                .map(|t| format!(" ({t})"))
                .unwrap_or_default()
        ));
    }
    if req.context.is_none() {
        notes.push("context was searched too: pass a fixed context for your workload to compare like with like".into());
    }
    if shape_tag != Tag::Computed {
        notes.push(format!(
            "shape: {} (no architecture given: layers scaled to the size)",
            shape.name
        ));
    }
    notes
}

/// The model as the search saw it: its size, and the shape its step times were computed on.
fn model_summary(shape: &ModelShape, shape_tag: Tag, params_b: f64) -> ModelSummary {
    ModelSummary {
        name: shape.name.clone(),
        params_b: Tagged::computed(params_b),
        shape_params_b: Tagged::new(shape.param_count() as f64 / 1e9, shape_tag),
        layers: shape.layers,
        kv_heads: shape.kv_heads,
        head_dim: shape.head_dim,
        shape_tag,
    }
}

impl SearchCounts {
    /// The counts of `all` the candidates evaluated, `feasible` of them within every limit.
    fn of(all: &[Candidate], feasible: usize) -> SearchCounts {
        let over_vram = all.iter().filter(|c| !c.fits_vram.value).count();
        SearchCounts {
            evaluated: all.len(),
            over_vram,
            over_budget: all.len() - over_vram - feasible,
            feasible,
        }
    }
}

/// The engines of `energies`, in search order.
fn distinct_engines(energies: &[PrecisionEnergy]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for e in energies {
        if !v.contains(&e.engine) {
            v.push(e.engine.clone());
        }
    }
    v
}

/// The precisions of `energies` over all engines, FP16 first.
fn distinct_precisions(energies: &[PrecisionEnergy]) -> Vec<Precision> {
    let mut v: Vec<Precision> = vec![Precision::Fp16];
    for e in energies {
        if !v.contains(&e.precision) {
            v.push(e.precision);
        }
    }
    v
}

/// The stack text of `engine`'s curves on `arch` (or a lender), as the dataset writes it.
fn stack_text<'c>(classes: &'c [CurveClass], arch: Arch, engine: &str) -> Option<&'c str> {
    std::iter::once(&arch)
        .chain(borrow_order(arch))
        .find_map(|a| classes.iter().find(|c| c.arch == *a && c.engine == engine))
        .and_then(|c| c.stacks.first())
        .map(String::as_str)
}

/// Which engines were searched, and which of them has no batch sweep of its own.
fn engine_notes(setup: &Setup, engines: &[String]) -> Vec<String> {
    let mut notes = vec![if engines.len() > 1 {
        format!(
            "engines searched: {} — each with its own FP16 baseline, ΔE curves, batch curves and latency \
             calibration, never pooled; every configuration names its engine",
            engines.join(", ")
        )
    } else {
        format!(
            "stack: {} — every figure is that engine's",
            engines.join(", ")
        )
    }];
    for e in engines {
        let own = setup.engine_batch.iter().any(|c| &c.engine == e);
        if !own && e != crate::batch::TRANSFORMERS {
            notes.push(format!(
                "{e}: no batch sweep of its own yet — at batch > 1 the A800 curve stands in for its energy \
                 and its step is the roofline's, uncorrected"
            ));
        }
    }
    notes
}

/// When the energy winner's lead over the best configuration of another precision (or engine) is
/// smaller than the uncertainty of their ΔE vs FP16, say so: the ranking between them is not
/// resolved by the data.
fn energy_tie(
    feasible: &[&Candidate],
    energies: &[PrecisionEnergy],
    several_engines: bool,
) -> Option<Tie> {
    let best = feasible.first()?;
    let other = feasible.iter().find(|c| !same_choice(c, best))?;
    let half = |c: &Candidate| {
        energies
            .iter()
            .find(|e| e.engine == c.engine && e.precision == c.precision)
            .and_then(|e| e.delta_halfwidth)
            .unwrap_or(0.0)
    };
    let lead_pct = (other.energy_mj_per_token.value / best.energy_mj_per_token.value - 1.0) * 100.0;
    let uncertainty = half(best).max(half(other));
    (lead_pct < uncertainty).then(|| Tie {
        leader: best.precision,
        leader_engine: best.engine.clone(),
        runner_up: other.precision,
        runner_up_engine: other.engine.clone(),
        lead_pct,
        uncertainty_pts: uncertainty,
        message: format!(
            "{} leads {} by {lead_pct:.1} % in modelled energy, inside the ±{uncertainty:.1}-point \
             uncertainty of their ΔE vs FP16 — the data do not rank them; choose on VRAM or latency",
            choice_label(best, several_engines),
            choice_label(other, several_engines)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pareto::dominates;

    fn req(gpu: &str, params_b: f64, objective: Objective) -> OptimizeRequest {
        OptimizeRequest {
            gpu: gpu.into(),
            params_b: Some(params_b),
            model: None,
            objective,
            budgets: Budgets::default(),
            context: None,
            engine: None,
        }
    }

    #[test]
    fn model_quality_is_read_off_the_cards_own_rows_where_it_has_some() {
        let cal = crate::roofline::calibrate_latency(Dataset::embedded());
        let errors = |gpu: &str| -> Vec<f64> {
            cal.rows
                .iter()
                .filter(|r| r.used_in_fit && r.gpu == gpu)
                .map(|r| r.error_pct)
                .collect()
        };
        // The H200: our three stacks' runs, not the all-card pool.
        let h200 = errors("H200");
        assert!(h200.len() >= 40, "{} H200 rows", h200.len());
        let q = optimize(&req("H200", 7.0, Objective::MinEnergy))
            .unwrap()
            .quality;
        assert_eq!(
            q.throughput_scope,
            format!("this card's {} measured rows", h200.len())
        );
        let rms = (h200.iter().map(|e| e * e).sum::<f64>() / h200.len() as f64).sqrt();
        assert!((q.throughput_rms_error_pct - rms).abs() < 1e-9);
        assert_ne!(q.throughput_rms_error_pct, cal.pooled_rms_error_pct);
        // A card with no row at all says that its figure is the pool's.
        assert!(errors("B200").is_empty());
        let b200 = optimize(&req("B200", 7.0, Objective::MinEnergy))
            .unwrap()
            .quality;
        assert!(
            b200.throughput_scope.contains("pooled"),
            "{}",
            b200.throughput_scope
        );
        assert_eq!(b200.throughput_rms_error_pct, cal.pooled_rms_error_pct);
    }

    #[test]
    fn searches_the_full_grid_for_the_class() {
        let r = optimize(&req("RTX 4090", 7.0, Objective::MinEnergy)).unwrap();
        assert_eq!(
            r.precisions,
            [Precision::Fp16, Precision::Nf4, Precision::Int8]
        );
        assert_eq!(r.counts.evaluated, 3 * 7 * 7);
        assert!(r.feasible);
        assert!(r.alternatives.len() >= 3);
        assert_eq!(r.feasible_configs.len(), r.counts.feasible);
        assert_eq!(r.feasible_configs.first(), r.optimum.as_ref());
        assert!(r.pareto.iter().all(|p| r.feasible_configs.contains(p)));
        assert!(
            r.counts.over_vram > 0,
            "batch 64 × 32k context of a 7B cannot fit 24 GB"
        );
        let opt = r.optimum.unwrap();
        // every feasible config is no better than the optimum
        for a in &r.alternatives {
            assert!(a.candidate.energy_mj_per_token.value >= opt.energy_mj_per_token.value);
            assert!(a.vs_optimum.energy_pct.value >= 0.0);
        }
    }

    #[test]
    fn each_objective_picks_its_extreme() {
        for o in Objective::ALL {
            let r = optimize(&req("A800", 7.0, o)).unwrap();
            let opt = r.optimum.as_ref().unwrap();
            let best = |f: fn(&Candidate) -> f64| {
                r.pareto
                    .iter()
                    .chain(r.alternatives.iter().map(|a| &a.candidate))
                    .map(f)
                    .fold(f64::INFINITY, f64::min)
            };
            match o {
                Objective::MinEnergy => {
                    assert!(opt.energy_mj_per_token.value <= best(|c| c.energy_mj_per_token.value))
                }
                Objective::MinLatency => assert!(
                    opt.latency_ms_per_token.value <= best(|c| c.latency_ms_per_token.value)
                ),
                Objective::MaxThroughput => {
                    assert!(-opt.throughput_tok_s.value <= best(|c| -c.throughput_tok_s.value))
                }
                Objective::MinVram => {
                    assert!(opt.vram.total_gb.value <= best(|c| c.vram.total_gb.value));
                    assert_eq!((opt.batch, opt.context), (1, 512));
                }
            }
            assert_eq!(Objective::parse(o.as_str()), Some(o));
        }
    }

    #[test]
    fn pareto_members_are_feasible_and_mutually_non_dominated() {
        let r = optimize(&req("RTX 5090", 3.0, Objective::MinEnergy)).unwrap();
        assert!(!r.pareto.is_empty());
        let pts: Vec<(f64, f64)> = r
            .pareto
            .iter()
            .map(|c| (c.energy_mj_per_token.value, c.latency_ms_per_token.value))
            .collect();
        for a in &pts {
            assert!(!pts.iter().any(|b| dominates(*b, *a)));
        }
        assert!(r.pareto.iter().all(|c| c.fits_vram.value));
        assert!(r
            .pareto
            .windows(2)
            .all(|w| w[0].latency_ms_per_token.value <= w[1].latency_ms_per_token.value));
    }

    #[test]
    fn budgets_filter_and_are_respected() {
        let mut q = req("RTX 4090", 7.0, Objective::MinEnergy);
        q.budgets = Budgets {
            max_latency_ms: Some(60.0),
            max_vram_gb: Some(12.0),
            min_tok_s: Some(20.0),
            max_j_per_1k: None,
        };
        let r = optimize(&q).unwrap();
        assert!(r.feasible);
        for c in r.pareto.iter().chain(r.optimum.iter()) {
            assert!(
                c.latency_ms_per_token.value <= 60.0
                    && c.vram.total_gb.value <= 12.0
                    && c.throughput_tok_s.value >= 20.0
            );
        }
        assert!(r.counts.over_budget > 0);
    }

    #[test]
    fn impossible_budgets_give_the_least_violating_config_with_reasons() {
        let mut q = req("RTX 4090", 7.0, Objective::MinEnergy);
        q.budgets.max_latency_ms = Some(1.0);
        let r = optimize(&q).unwrap();
        assert!(!r.feasible && r.optimum.is_none() && r.pareto.is_empty());
        let lv = r.least_violating.unwrap();
        assert_eq!(lv.violations.len(), 1);
        let v = &lv.violations[0];
        assert_eq!(v.budget, Budget::MaxLatencyMs);
        assert!(v.excess_pct > 100.0 && v.message.contains("ms/token"));
        // least violating = the fastest configuration
        assert!((v.value.value - lv.candidate.latency_ms_per_token.value).abs() < 1e-12);
    }

    #[test]
    fn a_model_too_big_for_the_card_names_the_card_vram() {
        let r = optimize(&req("T4", 70.0, Objective::MinEnergy)).unwrap();
        assert!(!r.feasible);
        let lv = r.least_violating.unwrap();
        assert!(lv.violations.iter().any(|v| v.budget == Budget::CardVramGb));
        assert!(
            lv.candidate.precision == Precision::Nf4,
            "smallest format breaks the card least: {}",
            lv.candidate.precision
        );
    }

    #[test]
    fn every_figure_is_tagged_in_json() {
        let r = optimize(&req("RTX 4090", 7.0, Objective::MinEnergy)).unwrap();
        let j = serde_json::to_value(r.optimum.as_ref().unwrap()).unwrap();
        for (k, v) in j.as_object().unwrap() {
            if ["engine", "precision", "batch", "context"].contains(&k.as_str()) {
                continue;
            }
            let tagged = |v: &serde_json::Value| v.get("tag").is_some() && v.get("value").is_some();
            if k == "vram" {
                assert!(v.as_object().unwrap().values().all(tagged), "{k}");
            } else {
                assert!(tagged(v), "{k} is not tagged: {v}");
            }
        }
    }

    #[test]
    fn energy_is_anchored_at_batch_one_and_modelled_beyond() {
        let mut q = req("RTX 4090", 7.0, Objective::MinEnergy);
        q.context = Some(512);
        let r = optimize(&q).unwrap();
        let all: Vec<&Candidate> = r
            .pareto
            .iter()
            .chain(r.alternatives.iter().map(|a| &a.candidate))
            .collect();
        let ds = Dataset::embedded();
        let fp16 = crate::estimate::fp16_baseline_mj(ds, Arch::Ada, "transformers", 7.0).unwrap();
        for c in all {
            let want = c.fp16_energy_mj_per_token.value
                * (1.0 + c.delta_vs_fp16_pct.value / 100.0)
                * batch_curve().factor(c.batch)
                * c.context_factor.value;
            assert!((c.energy_mj_per_token.value - want).abs() < 1e-9);
            assert!((c.fp16_energy_mj_per_token.value - fp16).abs() < 1e-9);
            assert_eq!(
                c.fp16_energy_mj_per_token.tag,
                Tag::Measured,
                "RTX 4090 FP16 anchors exist at 7 B"
            );
            if c.batch > 1 {
                assert_eq!(c.energy_mj_per_token.tag, Tag::Modelled);
            }
        }
    }

    /// Where a context run was measured on the card (H200, Qwen2-1.5B, the graph engine, depth
    /// 4 096), the candidate at that context is the measured row, FP16 of the same runs, tagged
    /// measured; a context nobody measured stays modelled.
    #[test]
    fn a_measured_context_point_replaces_the_model_there() {
        let mut q = req("H200", 1.5, Objective::MinEnergy);
        q.model = Some("Qwen2-1.5B".into());
        q.params_b = None;
        q.engine = Some("candle-graph".into());
        q.context = Some(4096);
        let r = optimize(&q).unwrap();
        let all: Vec<&Candidate> = r
            .optimum
            .iter()
            .chain(r.alternatives.iter().map(|a| &a.candidate))
            .chain(r.pareto.iter())
            .collect();
        let q4 = all
            .iter()
            .find(|c| c.precision == Precision::Q4_0 && c.batch == 1)
            .expect("Q4_0 at batch 1 among the results");
        // The three-run row of session 22: 508.27 vs 728.27 mJ, ΔE −30.21 %.
        assert_eq!(q4.energy_mj_per_token.tag, Tag::Measured);
        assert!(
            (q4.energy_mj_per_token.value - 508.27).abs() < 1e-9,
            "{q4:?}"
        );
        assert!((q4.fp16_energy_mj_per_token.value - 728.27).abs() < 1e-9);
        assert!((q4.delta_vs_fp16_pct.value - -30.2087).abs() < 1e-3);
        assert!(r
            .notes
            .iter()
            .any(|n| n.contains("at 4096 tokens on this card")));
        q.context = Some(8192);
        let r = optimize(&q).unwrap();
        assert!(r
            .pareto
            .iter()
            .all(|c| c.context_factor.tag == Tag::Modelled));
        assert!(!r
            .notes
            .iter()
            .any(|n| n.contains("on this card the batch-1 energies")));
    }

    #[test]
    fn long_context_costs_energy_once_kv_reads_dominate() {
        let mut q = req("RTX 4090", 7.0, Objective::MinEnergy);
        q.model = Some("Qwen2-7B".into());
        q.context = Some(32768);
        let r = optimize(&q).unwrap();
        let c = r.optimum.unwrap();
        assert!(c.context_factor.value >= 1.0);
        let short = optimize(&OptimizeRequest {
            context: Some(512),
            ..q.clone()
        })
        .unwrap()
        .optimum
        .unwrap();
        assert!(c.energy_mj_per_token.value >= short.energy_mj_per_token.value);
    }

    #[test]
    fn candle_bf16_batches_like_f16_not_like_the_gguf_formats() {
        // BF16 and F16 run the same cuBLAS GEMMs: at batch 64 BF16 keeps its batch-1 ratio to FP16
        // (≈ −3.5 %, the hopper BF16 fit), instead of inheriting Q4_K's +30 % batch penalty. The
        // eager engine is the one with a batch sweep of its own.
        let mut q = req("H200", 7.0, Objective::MinEnergy);
        q.model = Some("qwen2-7b".into());
        q.engine = Some("candle".into());
        let r = optimize(&q).unwrap();
        let at = |p: &str, b: u32| {
            r.feasible_configs
                .iter()
                .filter(|c| c.precision.as_str() == p && c.batch == b)
                .map(|c| c.energy_mj_per_token.value)
                .fold(f64::INFINITY, f64::min)
        };
        let (bf1, f1) = (at("BF16", 1), at("FP16", 1));
        let (bf64, f64_) = (at("BF16", 64), at("FP16", 64));
        assert!(
            bf1.is_finite() && bf64.is_finite(),
            "BF16 configurations searched"
        );
        let r1 = bf1 / f1;
        let r64 = bf64 / f64_;
        assert!(
            (r64 - r1).abs() < 0.01,
            "BF16/FP16 at batch 1 {r1:.3}, at 64 {r64:.3}"
        );
        // Q4_K does pay the measured batch penalty.
        assert!(at("Q4_K", 64) / f64_ > at("Q4_K", 1) / f1 + 0.1);
        // BF16 "wins" by its −3.5 % batch-1 fit, whose interval spans zero: the result says it is a tie.
        assert_eq!(r.optimum.as_ref().unwrap().precision, Precision::Bf16);
        assert!(
            r.tie
                .as_ref()
                .is_some_and(|t| t.message.starts_with("BF16 leads FP16")
                    && t.leader == Precision::Bf16
                    && t.runner_up == Precision::Fp16),
            "{:?}",
            r.tie
        );
        // A clear winner gets no such note (RTX 4090, 14 B: NF4 saves ≈ 40 %).
        let clear = optimize(&req("RTX 4090", 14.0, Objective::MinEnergy)).unwrap();
        assert!(clear.tie.is_none(), "{:?}", clear.tie);
    }

    #[test]
    fn named_models_use_real_shapes_and_bad_input_is_refused() {
        let mut q = req("H200", 7.0, Objective::MinLatency);
        q.model = Some("qwen2-7b".into());
        let r = optimize(&q).unwrap();
        assert_eq!(r.model.name, "Qwen2-7B");
        assert_eq!(r.model.shape_tag, Tag::Computed);
        // The H200 has its own classes: no borrowed bitsandbytes curve is mixed in, and the modelled
        // batch-1 latency is each engine's own: the eager engine's measured launch floor (≈ 10
        // ms/token for 28 layers, not a memory-bound 1 ms), the graph engine's measured step.
        assert!(
            r.notes.iter().all(|n| !n.contains("borrowed")),
            "{:?}",
            r.notes
        );
        let b1 = optimize(&OptimizeRequest {
            objective: Objective::MinEnergy,
            budgets: Budgets::default(),
            context: Some(512),
            ..q.clone()
        })
        .unwrap();
        let one = |e: &str, p: Precision| {
            b1.feasible_configs
                .iter()
                .find(|c| c.engine == e && c.precision == p && c.batch == 1)
                .map(|c| c.latency_ms_per_token.value)
                .unwrap_or_else(|| panic!("batch 1 fits a 7B on an H200: {e} {p}"))
        };
        for p in [Precision::Fp16, Precision::Q4_0] {
            assert!(
                one("candle", p) > 5.0,
                "candle batch-1 step {} ms",
                one("candle", p)
            );
            let measured = crate::test_data::row(
                Dataset::embedded(),
                "candle-graph",
                "Qwen2-7B [candle-graph]",
                p,
                1,
            );
            let ms = 1e3 / measured.throughput_tok_s.unwrap();
            let got = one("candle-graph", p);
            assert!(
                (got / ms - 1.0).abs() < 0.10,
                "candle-graph {p}: {got} vs {ms} ms"
            );
        }
        // An architecture without data of its own still borrows (and says so).
        let mut h100_like = req("A100 80GB", 7.0, Objective::MinEnergy);
        h100_like.model = Some("qwen2-7b".into());
        assert!(optimize(&h100_like).is_ok());
        q.model = Some("gpt-9".into());
        assert!(matches!(optimize(&q), Err(OptimizeError::UnknownModel(..))));
        assert!(matches!(
            optimize(&req("Voodoo", 7.0, Objective::MinEnergy)),
            Err(OptimizeError::UnknownGpu(..))
        ));
        assert!(matches!(
            optimize(&req("T4", -1.0, Objective::MinEnergy)),
            Err(OptimizeError::BadSize(_))
        ));
    }

    /// With two engines on the H200 the search is engine × precision × batch × context: every
    /// candidate is one engine's — its baseline, ΔE, batch curve and step time — and pinning an
    /// engine gives exactly that engine's search.
    #[test]
    fn two_engines_are_searched_side_by_side_and_never_mixed() {
        use crate::curves::fit_classes;
        use crate::test_data::with_graph_engine;
        let ds = with_graph_engine();
        let classes = fit_classes(&ds, &[]);
        let mut q = req("H200", 7.0, Objective::MinEnergy);
        (q.params_b, q.model, q.context) = (None, Some("qwen2-7b".into()), Some(512));
        let r = optimize_with(&ds, &classes, &q).unwrap();
        assert_eq!(r.engines, ["candle-graph", "candle"]);
        let at = |e: &str, p: Precision, b: u32| feasible_config(&r, e, p, b);
        for e in ["candle-graph", "candle"] {
            assert_figures_are_the_engines_own(&ds, &r, e);
        }
        assert!(
            at("candle-graph", Precision::Fp16, 1)
                .latency_ms_per_token
                .value
                * 1.5
                < at("candle", Precision::Fp16, 1).latency_ms_per_token.value
        );
        // The graph engine has no BF16 curve: no graph BF16 configuration, the eager one stays.
        assert!(!r
            .feasible_configs
            .iter()
            .any(|c| c.engine == "candle-graph" && c.precision == Precision::Bf16));
        at("candle", Precision::Bf16, 1);
        let opt = r.optimum.as_ref().unwrap();
        assert!(r
            .notes
            .iter()
            .any(|n| n.starts_with("engines searched: candle-graph, candle")));
        assert!(
            r.notes
                .iter()
                .any(|n| n.contains(&format!("recommendation assumes the {} stack", opt.engine))),
            "{:?}",
            r.notes
        );
        assert!(r
            .alternatives
            .iter()
            .any(|a| a.candidate.engine != opt.engine
                && a.why.contains(&format!(" on {}", a.candidate.engine))));
        assert_a_pinned_engine_is_searched_alone(&ds, &classes, q);
    }

    /// The feasible configuration of engine `e`, precision `p` and batch `b` in `r`.
    fn feasible_config(r: &OptimizeResult, e: &str, p: Precision, b: u32) -> Candidate {
        r.feasible_configs
            .iter()
            .find(|c| c.engine == e && c.precision == p && c.batch == b)
            .unwrap_or_else(|| panic!("{e} {p} b{b}"))
            .clone()
    }

    /// Engine `e`'s Qwen2-7B figures in `r` are those of its own rows of `ds`: FP16 baseline,
    /// ΔE, batch factor and step time.
    fn assert_figures_are_the_engines_own(ds: &Dataset, r: &OptimizeResult, e: &str) {
        use crate::batch::engine_batch_curves;
        use crate::test_data::row;
        let at = |e: &str, p: Precision, b: u32| feasible_config(r, e, p, b);
        let sweeps = engine_batch_curves(ds);
        // By hand from the engine's own Qwen2-7B rows.
        let f16 = row(ds, e, "Qwen2-7B", Precision::Fp16, 1);
        let q4k = row(ds, e, "Qwen2-7B", Precision::Q4K, 1);
        let f = f16.energy_mj.unwrap();
        let c = at(e, Precision::Fp16, 1);
        assert!(
            (c.fp16_energy_mj_per_token.value - f).abs() < 1e-9,
            "{e}: {} vs {f}",
            c.fp16_energy_mj_per_token.value
        );
        assert!((c.energy_mj_per_token.value - f).abs() < 1e-9, "{e}");
        let d = at(e, Precision::Q4K, 1).delta_vs_fp16_pct.value;
        assert!((d - q4k.delta_pct().unwrap()).abs() < 1e-9, "{e}: {d}");
        let own = sweeps
            .iter()
            .find(|s| s.engine == e && s.precision == Precision::Fp16)
            .unwrap();
        assert_eq!(
            at(e, Precision::Fp16, 64).batch_factor.value,
            own.factor(64)
        );
        // The step time is the engine's own: the measured one at batch 1, within the model's error.
        let measured = 1e3 / f16.throughput_tok_s.unwrap();
        let modelled = c.latency_ms_per_token.value;
        assert!(
            (modelled / measured - 1.0).abs() < 0.25,
            "{e}: {modelled} vs {measured} ms"
        );
    }

    /// `q` (no engine) on the two-engine `ds`, pinned to the eager engine, is exactly the search
    /// of the eager-only dataset; pinned to an engine without curves on the card, it is refused.
    fn assert_a_pinned_engine_is_searched_alone(
        ds: &Dataset,
        classes: &[CurveClass],
        mut q: OptimizeRequest,
    ) {
        use crate::curves::fit_classes;
        // Pinned to the eager engine: exactly the search of the eager-only dataset.
        q.engine = Some("candle".into());
        let pinned = optimize_with(ds, classes, &q).unwrap();
        assert_eq!(pinned.engines, ["candle"]);
        q.engine = None;
        let eager_ds = crate::test_data::eager_only();
        let before = optimize_with(&eager_ds, &fit_classes(&eager_ds, &[]), &q).unwrap();
        assert_eq!(before.engines, ["candle"]);
        assert_eq!(pinned.feasible_configs, before.feasible_configs);
        assert_eq!(
            (&pinned.optimum, &pinned.tie),
            (&before.optimum, &before.tie)
        );
        // An engine without curves on the card is refused, naming the ones there are.
        q.engine = Some("llama.cpp".into());
        match optimize_with(ds, classes, &q) {
            Err(OptimizeError::NoEngine { engine, known, .. }) => {
                assert_eq!(
                    (engine.as_str(), known.as_str()),
                    ("llama.cpp", "candle-graph, candle")
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn one_engine_archs_name_their_engine_and_search_as_before() {
        let r = optimize(&req("RTX 4090", 7.0, Objective::MinEnergy)).unwrap();
        assert_eq!(r.engines, ["transformers"]);
        assert!(r
            .feasible_configs
            .iter()
            .all(|c| c.engine == "transformers"));
        assert!(r.notes.iter().any(|n| n.starts_with("stack: transformers")));
        // The H200 before its other engines' sessions: the eager engine alone.
        let eager_ds = crate::test_data::eager_only();
        let classes = crate::curves::fit_classes(&eager_ds, &[]);
        let h =
            optimize_with(&eager_ds, &classes, &req("H200", 7.0, Objective::MinEnergy)).unwrap();
        assert_eq!(h.engines, ["candle"]);
        assert!(h.notes.iter().any(|n| n.starts_with("stack: candle")));
    }

    /// The embedded H200 rows are three engines': all are searched, each candidate on its own
    /// engine's FP16 baseline.
    #[test]
    fn the_h200_searches_its_three_engines() {
        let r = optimize(&req("H200", 7.6156, Objective::MinEnergy)).unwrap();
        assert_eq!(r.engines, ["candle-graph", "candle", "llama.cpp"]);
        let ds = Dataset::embedded();
        for e in &r.engines {
            let want = crate::estimate::fp16_baseline_mj(ds, Arch::Hopper, e, 7.6156).unwrap();
            let own: Vec<&Candidate> = r
                .feasible_configs
                .iter()
                .filter(|c| &c.engine == e)
                .collect();
            assert!(!own.is_empty(), "{e}");
            assert!(own
                .iter()
                .all(|c| (c.fp16_energy_mj_per_token.value - want).abs() < 1e-9));
        }
        // llama.cpp was measured at Qwen2-7B's and Qwen2.5-14B's sizes (7.6156 and 14.77 B), not
        // beyond: the first two baselines are measurements, a 30 B one extrapolated, and each says so.
        let llama_tag = |params_b: f64| {
            let r = optimize(&req("H200", params_b, Objective::MinEnergy)).unwrap();
            let l = r.feasible_configs.iter().find(|c| c.engine == "llama.cpp");
            l.unwrap().fp16_energy_mj_per_token.tag
        };
        assert_eq!(llama_tag(7.6156), Tag::Measured);
        assert_eq!(llama_tag(14.77), Tag::Measured);
        assert_eq!(llama_tag(30.0), Tag::Extrapolated);
    }

    /// At batch 64 the graph engine's Qwen2-7B Q4_K decodes at 4 590 tok/s (n = 3), a quarter of
    /// what the roofline alone says: the optimizer's figure must be the measured one's, not the
    /// roofline's, and its energy the measured batch ratio.
    #[test]
    fn graph_engine_batch_throughput_is_the_measured_one_not_the_rooflines() {
        let ds = Dataset::embedded();
        let mut q = req("H200", 7.0, Objective::MinEnergy);
        (q.params_b, q.model, q.context) = (None, Some("qwen2-7b".into()), Some(160));
        q.engine = Some("candle-graph".into());
        let r = optimize(&q).unwrap();
        let row = |p: Precision, b: u32| {
            ds.anchors
                .iter()
                .find(|a| a.model == "Qwen2-7B [candle-graph]" && a.precision == p && a.batch == b)
                .unwrap_or_else(|| panic!("{p} b{b}"))
        };
        for (p, b) in [
            (Precision::Q4K, 64),
            (Precision::Q4K, 4),
            (Precision::Fp16, 64),
        ] {
            let c = r
                .feasible_configs
                .iter()
                .find(|c| c.precision == p && c.batch == b)
                .unwrap_or_else(|| panic!("{p} b{b}"));
            let measured = row(p, b).throughput_tok_s.unwrap();
            let modelled = c.throughput_tok_s.value;
            assert!(
                (modelled / measured - 1.0).abs() < 0.15,
                "{p} b{b}: {modelled} vs measured {measured} tok/s"
            );
            // Energy: the 7B row at batch 1 × the measured ratio (geometric mean with 1.5B's).
            let e = c.energy_mj_per_token.value;
            let m = row(p, b).energy_mj.unwrap();
            assert!(
                (e / m - 1.0).abs() < 0.15,
                "{p} b{b}: {e} vs measured {m} mJ"
            );
        }
        let at64 = |r: &OptimizeResult, p: Precision| {
            r.feasible_configs
                .iter()
                .find(|c| c.precision == p && c.batch == 64)
                .unwrap_or_else(|| panic!("{p} b64"))
                .clone()
        };
        let q4k64 = at64(&r, Precision::Q4K);
        assert_eq!(q4k64.bound.value, Bound::Engine);
        assert_eq!(q4k64.batch_factor.tag, Tag::Interpolated);
        // Q4_0 borrows Q4_K's sweep: same factor, but extrapolated.
        let q40 = at64(&r, Precision::Q4_0);
        assert_eq!(q40.batch_factor.value, q4k64.batch_factor.value);
        assert_eq!(q40.batch_factor.tag, Tag::Extrapolated);
        // 14 B is past the swept sizes (1.5 B and 7.6 B): extrapolated too.
        q.model = Some("qwen2.5-14b".into());
        let c14 = at64(&optimize(&q).unwrap(), Precision::Q4K);
        assert_eq!(c14.batch_factor.tag, Tag::Extrapolated);
    }
}
