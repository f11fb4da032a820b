//! Decode-step time: a roofline (bytes over bandwidth, FLOPs over compute) with a per-step launch
//! floor, calibrated against every measured throughput in the dataset.
//!
//! Why a floor: in the published transformers/bitsandbytes runs the GPU is almost never the limit.
//! Decode is bound by per-layer kernel launches and Python dispatch (≈ 0.5–2 ms per layer), which is
//! why a 7B model on an RTX 5090 decodes as fast as a 1.5B one with the same 28 layers. Dequantizing
//! formats launch more kernels per layer (NF4 ≈ 1.2×, LLM.int8() ≈ 3.7× FP16), which is the
//! dequantization cost upstream ignored. The floor and the roofline overlap (launches are
//! asynchronous), so the step takes the larger of the two, not their sum.

use crate::batch::{batch_sweep, log_log_inside, per_batch_geo_mean, swept_class};
use crate::dataset::{Dataset, Gpu};
use crate::shapes::{shape_for_params, shapes, ModelShape};
use crate::tag::Tag;
use crate::vram::{
    find_format_on, kv_cache_bytes, param_split, vram, weight_bytes, Stack, WeightFormat,
};
use report::{Arch, Precision};
use serde::Serialize;
use std::sync::OnceLock;

/// Upstream's achievable fractions of datasheet bandwidth and dense FP16 compute.
pub const DEFAULT_BANDWIDTH_EFFICIENCY: f64 = 0.70;
/// Share of dense FP16 TFLOPS reached by decode GEMMs.
pub const DEFAULT_COMPUTE_EFFICIENCY: f64 = 0.30;
/// Mean KV length while decoding the published runs: short prompt + 256 new tokens (anchors),
/// 256 in + 256 new (batch sweep).
pub const ANCHOR_DECODE_CONTEXT: u32 = 160;
/// Context of the A800 batch sweep's rows (prompt + half the new tokens).
pub const SWEEP_DECODE_CONTEXT: u32 = 384;

/// Constants of the step model for one (precision, card).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Efficiency {
    /// Share of memory bandwidth reached.
    pub bandwidth: f64,
    /// Share of dense FP16 TFLOPS reached.
    pub compute: f64,
    /// Launch floor per layer, ms.
    pub launch_ms_per_layer: f64,
}

/// What limits a decode step in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Bound {
    /// Kernel-launch / dispatch floor.
    Launch,
    /// Weights + KV reads over bandwidth.
    Memory,
    /// FLOPs over tensor throughput.
    Compute,
    /// Longer than all three: the engine's measured batch step is well above the roofline (its
    /// batched kernels, not the card, set the pace; see [`BatchStepCorrection`]).
    Engine,
}

/// One modelled decode step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StepTime {
    /// Launch-floor time, ms.
    pub launch_ms: f64,
    /// Memory time, ms.
    pub memory_ms: f64,
    /// Compute time, ms.
    pub compute_ms: f64,
    /// max of the three: one decode step, one token for each sequence of the batch.
    pub step_ms: f64,
    /// Which of the three is the largest.
    pub bound: Bound,
}

/// Bytes read per decode step: all weights once + every sequence's KV cache.
pub fn bytes_per_step(s: &ModelShape, fmt: &WeightFormat, batch: u32, context: u32) -> f64 {
    weight_bytes(s, fmt) + kv_cache_bytes(s, batch, context)
}

/// FLOPs per decode step: 2 per weight of the linear layers and the output head per sequence, plus
/// attention (QKᵀ and AV: 2 · 2 · q_dim · context per layer per sequence).
pub fn flops_per_step(s: &ModelShape, batch: u32, context: u32) -> f64 {
    let p = param_split(s);
    let matmul = 2.0 * (p.linear + p.embedding);
    let attention = 4.0 * s.layers as f64 * (s.heads * s.head_dim) as f64 * context as f64;
    batch as f64 * (matmul + attention)
}

/// The modelled decode step of `shape` in `fmt` on `gpu` at `batch` and `context`.
pub fn roofline_step(
    gpu: &Gpu,
    s: &ModelShape,
    fmt: &WeightFormat,
    batch: u32,
    context: u32,
    eff: &Efficiency,
) -> StepTime {
    let launch_ms = s.layers as f64 * eff.launch_ms_per_layer;
    let memory_ms =
        bytes_per_step(s, fmt, batch, context) / (gpu.bandwidth_gbs * 1e9 * eff.bandwidth) * 1e3;
    let compute_ms =
        flops_per_step(s, batch, context) / (gpu.fp16_tflops * 1e12 * eff.compute) * 1e3;
    let (step_ms, bound) = if launch_ms >= memory_ms && launch_ms >= compute_ms {
        (launch_ms, Bound::Launch)
    } else if memory_ms >= compute_ms {
        (memory_ms, Bound::Memory)
    } else {
        (compute_ms, Bound::Compute)
    };
    StepTime {
        launch_ms,
        memory_ms,
        compute_ms,
        step_ms,
        bound,
    }
}

/// The real shape behind a dataset model name (`Yi-1.5-6B-Chat` → `Yi-1.5-6B`): the longest shape
/// name that prefixes it; otherwise a shape interpolated from the size.
pub fn shape_for_model_name(model: &str, params_b: f64) -> (ModelShape, Tag) {
    let m = model.to_ascii_lowercase();
    shapes()
        .iter()
        .filter(|s| m.starts_with(&s.name.to_ascii_lowercase()))
        .max_by_key(|s| s.name.len())
        .map(|s| (s.clone(), Tag::Computed))
        .unwrap_or_else(|| (shape_for_params(params_b), Tag::Interpolated))
}

/// One published throughput, as the calibration sees it.
#[derive(Debug, Clone)]
struct Observation {
    gpu: Gpu,
    model: String,
    shape: ModelShape,
    shape_tag: Tag,
    params_b: f64,
    precision: Precision,
    precision_variant: Option<String>,
    fmt: &'static WeightFormat,
    batch: u32,
    context: u32,
    session: String,
    measured_tok_s: f64,
}

impl Observation {
    fn measured_step_ms(&self) -> f64 {
        self.batch as f64 / self.measured_tok_s * 1e3
    }
    fn fits(&self) -> bool {
        vram(&self.shape, self.fmt, self.batch, self.context)
            .total_gb
            .value
            <= self.gpu.vram_gb
    }
}

fn observations(ds: &Dataset) -> Vec<Observation> {
    // Each row is modelled on its own stack: our candle rows (H200 campaign) get candle formats and
    // their own launch floors, never the transformers or llama.cpp constants.
    let from_anchors = ds.anchors.iter().filter(|a| !a.check).filter_map(|a| {
        Some((
            a.gpu.clone(),
            a.model.clone(),
            a.params_b,
            (a.precision, a.precision_variant.clone()),
            a.batch,
            ANCHOR_DECODE_CONTEXT,
            a.session.clone(),
            a.throughput_tok_s?,
            a.stack.clone(),
        ))
    });
    let from_sweep = batch_sweep().iter().map(|p| {
        (
            p.gpu.clone(),
            p.model.clone(),
            p.params_b,
            (p.precision, None),
            p.batch,
            SWEEP_DECODE_CONTEXT,
            "a800-batch-sweep-2026-02-15".to_string(),
            p.throughput_tok_s,
            "transformers + bitsandbytes".to_string(),
        )
    });
    from_anchors
        .chain(from_sweep)
        .filter_map(
            |(
                gpu,
                model,
                params_b,
                (precision, variant),
                batch,
                context,
                session,
                tok_s,
                stack,
            )| {
                let (shape, shape_tag) = shape_for_model_name(&model, params_b);
                let label = match &variant {
                    Some(v) => format!("{precision}-{v}"),
                    None => precision.to_string(),
                };
                Some(Observation {
                    gpu: ds.gpu(&gpu)?.clone(),
                    fmt: find_format_on(&label, &stack)?,
                    model,
                    shape,
                    shape_tag,
                    params_b,
                    precision,
                    precision_variant: variant,
                    batch,
                    context,
                    session,
                    measured_tok_s: tok_s,
                })
            },
        )
        .collect()
}

/// Calibrated constants of one weight format.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PrecisionCalibration {
    /// The [`WeightFormat::name`] calibrated (`FP16`, `NF4`, `candle-Q4_K`), or `GGUF` for the
    /// pooled llama.cpp formats: a storage format, not a [`Precision`].
    pub precision: String,
    /// The stack the format runs on.
    pub stack: Stack,
    /// Launch floor per layer on a card with factor 1, ms.
    pub launch_ms_per_layer: f64,
    /// Share of memory bandwidth reached.
    pub bandwidth_efficiency: f64,
    /// The rate (GB/s of weights and cache) the format's kernels stream at most, whatever the
    /// card's bandwidth: on a card where `bandwidth_efficiency` × bandwidth is above it, the kernels
    /// and not the memory set the pace. `None` where no row shows one.
    pub kernel_ceiling_gbs: Option<f64>,
    /// The architectures whose rows the ceiling binds, the only ones it is applied to: a kernel's
    /// rate depends on the card's SMs and clocks, so an H200's is not carried to an A100 or a B200.
    pub kernel_ceiling_archs: Vec<Arch>,
    /// Where the bandwidth efficiency comes from.
    pub bandwidth_source: String,
    /// Rows of this precision used in the fit.
    pub rows: usize,
}

/// Host + software-stack factor of one card (its launch floors relative to the pooled ones).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CardFactor {
    /// Card name.
    pub gpu: String,
    /// Its launch floors relative to the pooled ones.
    pub factor: f64,
    /// Rows behind the factor.
    pub rows: usize,
}

/// Measured vs modelled throughput of one published row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CalibrationRow {
    /// Card name.
    pub gpu: String,
    /// Model name.
    pub model: String,
    /// Shape used (a real config, or interpolated from the size).
    pub shape: String,
    /// Whether the shape is a real config or interpolated.
    pub shape_tag: Tag,
    /// Model size, B.
    pub params_b: f64,
    /// Precision.
    pub precision: Precision,
    /// The variant the dataset names after the precision (see [`crate::Anchor::precision_label`]).
    pub precision_variant: Option<String>,
    /// Batch size.
    pub batch: u32,
    /// Measurement session.
    pub session: String,
    /// Measured throughput, tok/s.
    pub measured_tok_s: f64,
    /// With the card's own factor (in-sample for cards with data).
    pub modelled_tok_s: f64,
    /// Error of `modelled_tok_s`, %.
    pub error_pct: f64,
    /// With card factor 1: what a card without published throughputs gets.
    pub pooled_tok_s: f64,
    /// Error of `pooled_tok_s`, %.
    pub pooled_error_pct: f64,
    /// What limits the step in the model.
    pub bound: Bound,
    /// Whether the row fed the launch-floor fit.
    pub used_in_fit: bool,
    /// Why a row was or was not used.
    pub note: String,
}

/// How much longer one of our engines' measured decode step is at batch > 1 than the roofline says,
/// relative to the same model's batch-1 row: `(measured_b / modelled_b) / (measured_1 / modelled_1)`.
/// The roofline assumes batching is free until bandwidth or compute binds; candle's batched GGUF
/// matmuls are not (the graph engine's 7B Q4_K at batch 64 runs at a quarter of the modelled
/// throughput), so the optimizer multiplies its step by this where the engine has a sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchStepCorrection {
    /// The engine's stack.
    pub stack: Stack,
    /// The precision swept (FP16 and Q4_K on the H200; BF16 borrows FP16's, the other GGUF
    /// formats Q4_K's, at lookup).
    pub precision: Precision,
    /// (batch, correction) of every swept row, (1, 1) first.
    pub points: Vec<(f64, f64)>,
}

impl BatchStepCorrection {
    /// The correction at `batch`: the swept rows' geometric mean where that batch ran, log-log
    /// between swept batches, the last swept batch's past them.
    pub fn at(&self, batch: u32) -> f64 {
        let b = batch.max(1) as f64;
        log_log_inside(&self.points, b)
            .or_else(|| per_batch_geo_mean(&self.points).last().map(|p| p.1))
            .unwrap_or(1.0)
    }
}

/// The fitted latency model: constants per format and card, and its error on every published row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencyCalibration {
    /// Constants per weight format.
    pub precisions: Vec<PrecisionCalibration>,
    /// Our engines' measured batch corrections to the step ([`BatchStepCorrection`]).
    pub batch_corrections: Vec<BatchStepCorrection>,
    /// Launch factors per card.
    pub cards: Vec<CardFactor>,
    /// Every published row against the model.
    pub rows: Vec<CalibrationRow>,
    /// RMS of error_pct / pooled_error_pct over the rows used in the fit.
    pub rms_error_pct: f64,
    /// RMS error with card factor 1, %.
    pub pooled_rms_error_pct: f64,
    /// Median |error| over the same rows (robust to the T4 outliers).
    pub median_abs_error_pct: f64,
    /// Median |error| with card factor 1, %.
    pub pooled_median_abs_error_pct: f64,
    /// The step formula, in words.
    pub method: &'static str,
}

impl CalibrationRow {
    /// The precision as the dataset writes it, variant included.
    pub fn precision_label(&self) -> String {
        match &self.precision_variant {
            Some(v) => format!("{}-{v}", self.precision),
            None => self.precision.to_string(),
        }
    }
}

impl LatencyCalibration {
    fn precision(&self, name: &str) -> Option<&PrecisionCalibration> {
        self.precisions
            .iter()
            .find(|p| p.precision.eq_ignore_ascii_case(name))
    }

    /// The measured batch correction of `stack` for `precision` at `batch` (1 where the engine has
    /// no sweep): FP16's for BF16, Q4_K's for every other GGUF format, as for the energy curves.
    pub fn batch_correction(&self, stack: Stack, precision: Precision, batch: u32) -> f64 {
        let class = swept_class(precision);
        self.batch_corrections
            .iter()
            .find(|c| c.stack == stack && c.precision == class)
            .map_or(1.0, |c| c.at(batch))
    }

    /// The decode step of `fmt` at `batch` and `context`: the roofline with this calibration's
    /// constants, times the engine's measured batch correction. Where the correction makes the step
    /// longer than any roofline term by more than a quarter, the step is [`Bound::Engine`].
    pub fn step(
        &self,
        gpu: &Gpu,
        s: &ModelShape,
        fmt: &WeightFormat,
        precision: Precision,
        batch: u32,
        context: u32,
    ) -> StepTime {
        let mut step = roofline_step(gpu, s, fmt, batch, context, &self.efficiency(gpu, fmt));
        let k = self.batch_correction(fmt.stack, precision, batch);
        step.step_ms *= k;
        if k > 1.25 {
            step.bound = Bound::Engine;
        }
        step
    }

    /// Host/stack factor of a card; 1 for cards without published throughputs.
    pub fn card_factor(&self, gpu: &str) -> f64 {
        self.cards
            .iter()
            .find(|c| c.gpu == gpu)
            .map_or(1.0, |c| c.factor)
    }

    /// Step-model constants for a format on a card. Formats without rows borrow a sibling's of
    /// the same stack (BF16 → FP16, NF4-DQ → NF4, any GGUF → the pooled llama.cpp constants).
    pub fn efficiency(&self, gpu: &Gpu, fmt: &WeightFormat) -> Efficiency {
        let card = if fmt.stack == Stack::Transformers {
            self.card_factor(&gpu.name)
        } else {
            1.0
        };
        self.scaled_efficiency(gpu, fmt, card)
    }

    /// [`Self::efficiency`] with the launch floors scaled by `card` (1: the pooled constants).
    fn scaled_efficiency(&self, gpu: &Gpu, fmt: &WeightFormat, card: f64) -> Efficiency {
        let bf16_sibling = fmt.name.strip_suffix("BF16").map(|s| format!("{s}F16"));
        let sibling = match fmt.name {
            "BF16" => "FP16",
            "NF4-DQ" => "NF4",
            n if n.starts_with("GGUF") => "GGUF",
            _ => bf16_sibling.as_deref().unwrap_or(fmt.name),
        };
        let p = self.precision(fmt.name).or_else(|| self.precision(sibling));
        Efficiency {
            bandwidth: p.map_or(DEFAULT_BANDWIDTH_EFFICIENCY, |p| {
                let ceiling = p
                    .kernel_ceiling_gbs
                    .filter(|_| p.kernel_ceiling_archs.contains(&gpu.arch));
                reached_efficiency(p.bandwidth_efficiency, ceiling, gpu.bandwidth_gbs)
            }),
            compute: DEFAULT_COMPUTE_EFFICIENCY,
            launch_ms_per_layer: p.map_or(0.0, |p| p.launch_ms_per_layer) * card,
        }
    }
}

/// The share of a card's bandwidth (GB/s) a format reaches: its efficiency, or less where its
/// kernels' ceiling is below that share of the bandwidth.
fn reached_efficiency(eff: f64, ceiling_gbs: Option<f64>, bandwidth_gbs: f64) -> f64 {
    match ceiling_gbs {
        Some(c) if bandwidth_gbs > 0.0 => eff.min(c / bandwidth_gbs),
        _ => eff,
    }
}

fn default_efficiency(launch: f64) -> Efficiency {
    Efficiency {
        bandwidth: DEFAULT_BANDWIDTH_EFFICIENCY,
        compute: DEFAULT_COMPUTE_EFFICIENCY,
        launch_ms_per_layer: launch,
    }
}

/// A transformers row feeds the launch fit when the model fits the card and the roofline alone
/// (at upstream efficiencies) is faster than measured, i.e. only the floor can explain it.
fn feeds_launch_fit(o: &Observation) -> bool {
    o.fmt.stack == Stack::Transformers
        && o.fits()
        && roofline_step(
            &o.gpu,
            &o.shape,
            o.fmt,
            o.batch,
            o.context,
            &default_efficiency(0.0),
        )
        .step_ms
            < o.measured_step_ms()
}

fn geo_mean(v: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x.ln(), n + 1));
    if n == 0 {
        f64::NAN
    } else {
        (s / n as f64).exp()
    }
}

fn distinct<T: PartialEq + Clone>(v: impl Iterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for x in v {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

/// Named multiplicative factors (precision → launch ms/layer, or card → factor).
type Factors = Vec<(String, f64)>;

fn factor(v: &[(String, f64)], k: &str) -> f64 {
    v.iter().find(|(n, _)| n == k).map_or(1.0, |x| x.1)
}

/// log(step / layers) = log(launch[precision]) + log(card[gpu]): alternating geometric means
/// (a two-way fit in log space), card factors normalised to a geometric mean of 1 over cards so a
/// card without data gets the typical host.
fn fit_launch(obs: &[&Observation]) -> (Factors, Factors) {
    let per_layer = |o: &Observation| o.measured_step_ms() / o.shape.layers as f64;
    let mut launch: Factors = distinct(obs.iter().map(|o| o.fmt.name.to_string()))
        .into_iter()
        .map(|p| (p, 1.0))
        .collect();
    let mut card: Factors = distinct(obs.iter().map(|o| o.gpu.name.clone()))
        .into_iter()
        .map(|c| (c, 1.0))
        .collect();
    for _ in 0..200 {
        for (p, val) in launch.iter_mut() {
            *val = geo_mean(
                obs.iter()
                    .filter(|o| o.fmt.name == p)
                    .map(|o| per_layer(o) / factor(&card, &o.gpu.name)),
            );
        }
        for (name, val) in card.iter_mut() {
            *val = geo_mean(
                obs.iter()
                    .filter(|o| o.gpu.name == *name)
                    .map(|o| per_layer(o) / factor(&launch, o.fmt.name)),
            );
        }
        let g = geo_mean(card.iter().map(|c| c.1));
        card.iter_mut().for_each(|c| c.1 /= g);
        launch.iter_mut().for_each(|l| l.1 *= g);
    }
    (launch, card)
}

/// The tightest lower bound the data puts on a precision's bandwidth efficiency: had it been lower,
/// the roofline alone would be slower than a measured row.
fn bandwidth_lower_bound(obs: &[&Observation], precision: &str) -> f64 {
    let full = Efficiency {
        bandwidth: 1.0,
        compute: 1.0,
        launch_ms_per_layer: 0.0,
    };
    obs.iter()
        .filter(|o| o.fmt.name == precision && o.fits())
        .map(|o| {
            roofline_step(&o.gpu, &o.shape, o.fmt, o.batch, o.context, &full).memory_ms
                / o.measured_step_ms()
        })
        .fold(0.0, f64::max)
}

/// RMS of errors in %, NaN for none.
pub fn rms_pct(v: &[f64]) -> f64 {
    rms(v.iter().copied())
}

/// Median |error| in %, NaN for none.
pub fn median_abs_pct(v: &[f64]) -> f64 {
    median_abs(v.iter().copied())
}

fn pct(pred: f64, meas: f64) -> f64 {
    (pred - meas) / meas * 100.0
}

fn rms(v: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x * x, n + 1));
    if n == 0 {
        f64::NAN
    } else {
        (s / n as f64).sqrt()
    }
}

fn median_abs(v: impl Iterator<Item = f64>) -> f64 {
    let mut a: Vec<f64> = v.map(f64::abs).collect();
    a.sort_by(f64::total_cmp);
    match a.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => a[n / 2],
        n => (a[n / 2 - 1] + a[n / 2]) / 2.0,
    }
}

fn row_note(o: &Observation, used: bool, batch_correction: f64) -> String {
    let mut notes = Vec::new();
    if batch_correction != 1.0 {
        notes.push(format!(
            "roofline × {batch_correction:.2}: the engine's measured batch-{} step correction (its own sweep, in-sample)",
            o.batch
        ));
    }
    if !o.fits() {
        notes.push(format!(
            "exceeds the card's {} GB in the VRAM model: the measured run probably offloaded layers to the CPU; not fitted",
            o.gpu.vram_gb
        ));
    } else if !used && o.fmt.stack == Stack::Transformers {
        notes.push("roofline slower than measured: not used for the launch floor".to_string());
    }
    if o.shape_tag != Tag::Computed {
        notes.push(format!(
            "no config for {} in models.csv: shape interpolated from {} B",
            o.model, o.params_b
        ));
    }
    notes.join("; ")
}

/// Fit the latency model on the dataset's throughputs (see the module docs).
pub fn calibrate_latency(ds: &Dataset) -> LatencyCalibration {
    let obs = observations(ds);
    let launch_rows: Vec<&Observation> = obs.iter().filter(|o| feeds_launch_fit(o)).collect();
    let (launch, cards) = fit_launch(&launch_rows);
    let all: Vec<&Observation> = obs.iter().collect();
    let mut precisions: Vec<PrecisionCalibration> = launch
        .iter()
        .map(|(p, l)| PrecisionCalibration {
            precision: p.clone(),
            stack: Stack::Transformers,
            launch_ms_per_layer: *l,
            bandwidth_efficiency: DEFAULT_BANDWIDTH_EFFICIENCY,
            kernel_ceiling_gbs: None,
            kernel_ceiling_archs: Vec::new(),
            bandwidth_source: format!(
                "upstream 0.70, not identifiable: every measured {p} row is launch-bound (the data only says ≥ {:.2})",
                bandwidth_lower_bound(&all, p)
            ),
            rows: launch_rows.iter().filter(|o| o.fmt.name == p).count(),
        })
        .collect();
    let (gguf, gguf_rows) = llamacpp_calibrations(&obs);
    precisions.extend(gguf);
    let (candle, candle_rows) = candle_calibrations(&obs);
    precisions.extend(candle);
    let (graph, graph_rows) = candle_graph_calibrations(&obs);
    precisions.extend(graph);
    let cards: Vec<CardFactor> = cards
        .into_iter()
        .map(|(gpu, factor)| CardFactor {
            rows: launch_rows.iter().filter(|o| o.gpu.name == gpu).count(),
            gpu,
            factor,
        })
        .collect();
    let mut cal = LatencyCalibration {
        precisions,
        batch_corrections: Vec::new(),
        cards,
        rows: Vec::new(),
        rms_error_pct: 0.0,
        pooled_rms_error_pct: 0.0,
        median_abs_error_pct: 0.0,
        pooled_median_abs_error_pct: 0.0,
        method: "step = max(layers · launch[precision] · card[gpu], (weights + batch·KV)/(bandwidth · eff), \
                 FLOPs/(FP16 TFLOPS · 0.30)); launch and card factors fitted in log space on transformers rows \
                 (two-way geometric means), card factors normalised to geometric mean 1; llama.cpp: a floor and a \
                 kernel ceiling per format (bytes/min(bandwidth · eff, ceiling), the ceiling only on the \
                 architectures whose rows bind it) and one bandwidth efficiency; candle-graph: floor and bandwidth efficiency per format; \
                 candle (eager): launch floors per format",
    };
    cal.batch_corrections = batch_step_corrections(&cal, &obs);
    cal.rows = obs
        .iter()
        .map(|o| {
            let used = [&launch_rows, &gguf_rows, &candle_rows, &graph_rows]
                .iter()
                .any(|rows| rows.iter().any(|r| std::ptr::eq(*r, o)));
            calibration_row(&cal, o, used)
        })
        .collect();
    summarize_errors(&mut cal);
    cal
}

/// The eager candle engine's constants, one per format, and the rows behind them. Its batch-1
/// rows are launch-bound by orders of magnitude (0.5B F16 needs ~0.2 ms of HBM traffic per token
/// on an H200, candle takes ~7 ms), so each format's floor is the geometric mean of measured step
/// time per layer over its batch-1 rows.
fn candle_calibrations(obs: &[Observation]) -> (Vec<PrecisionCalibration>, Vec<&Observation>) {
    let rows: Vec<&Observation> = obs
        .iter()
        .filter(|o| o.fmt.stack == Stack::Candle && o.batch == 1 && o.fits())
        .collect();
    let cals = distinct(rows.iter().map(|o| o.fmt.name))
        .into_iter()
        .map(|name| {
            let own: Vec<&&Observation> = rows.iter().filter(|o| o.fmt.name == name).collect();
            PrecisionCalibration {
                precision: name.to_string(),
                stack: Stack::Candle,
                launch_ms_per_layer: geo_mean(
                    own.iter()
                        .map(|o| o.measured_step_ms() / o.shape.layers as f64),
                ),
                bandwidth_efficiency: DEFAULT_BANDWIDTH_EFFICIENCY,
                kernel_ceiling_gbs: None,
                kernel_ceiling_archs: Vec::new(),
                bandwidth_source:
                    "upstream 0.70, not identifiable: candle batch-1 decode is launch-bound"
                        .to_string(),
                rows: own.len(),
            }
        })
        .collect();
    (cals, rows)
}

/// llama.cpp's constants, one per GGUF format plus `GGUF` pooled over all of them (for formats
/// without rows), and the rows behind them. Not bandwidth alone: large models are bandwidth-bound
/// (Llama-3.1-8B on the RTX 4090, at 72–87 % of its bandwidth), but small ones sit on a floor (the
/// H200 server's 0.5–3B rows decode at 1.3–3.4 ms/token, 2.6× (3B F16) to 25× (0.5B Q4_0) their
/// HBM roofline), and on the H200 the quantized kernels stream far below its bandwidth even at 7B
/// (Q4_0 at ≈ 1.3 TB/s, 27 % of 4.8): one efficiency could not hold both cards (it missed the
/// H200's 7B Q4 rows by +65 %). So each format has a floor and a kernel ceiling (GB/s, applied only
/// to the architectures whose rows bind it), and one efficiency is shared by every format (Q8_0 and
/// Q4_K have H200 rows only, which pin a ceiling but not an efficiency of their own).
fn llamacpp_calibrations(obs: &[Observation]) -> (Vec<PrecisionCalibration>, Vec<&Observation>) {
    let rows: Vec<&Observation> = obs
        .iter()
        // Batch-1 rows: a concurrency sweep's rows are the batch correction's, never the floors'.
        .filter(|o| o.fmt.stack == Stack::LlamaCpp && o.batch == 1 && o.fits())
        .collect();
    if rows.is_empty() {
        return (Vec::new(), rows);
    }
    let total = rows.len();
    let cal = |fit: &KeyFit, bw: f64, n: usize| PrecisionCalibration {
        precision: fit.key.clone(),
        stack: Stack::LlamaCpp,
        launch_ms_per_layer: fit.floor,
        bandwidth_efficiency: bw,
        kernel_ceiling_gbs: fit.ceiling_gbs,
        kernel_ceiling_archs: fit.ceiling_archs.clone(),
        bandwidth_source: format!(
            "one efficiency for every GGUF format, fitted on all {total} llama.cpp rows with each \
             format's floor and kernel ceiling (log least squares of max(layers · floor, \
             bytes/min(bandwidth · eff, ceiling))); this floor and ceiling from its {n} rows"
        ),
        rows: n,
    };
    let (fits, bw) = fit_floors_and_bandwidth(&rows, |o| o.fmt.name, true);
    let mut cals: Vec<PrecisionCalibration> = fits
        .iter()
        .map(|f| {
            let n = rows.iter().filter(|o| o.fmt.name == f.key).count();
            cal(f, bw, n)
        })
        .collect();
    let (pooled, pooled_bw) = fit_floors_and_bandwidth(&rows, |_| "GGUF", true);
    cals.push(cal(&pooled[0], pooled_bw, rows.len()));
    (cals, rows)
}

/// The CUDA-graph engine's constants, one per format, and the rows behind them. Not the eager
/// engine's floors: one graph launch per token removes most of the launch cost, so large models
/// are bandwidth-bound (7B F16 at ≈ 61 % of the H200's HBM roofline) while small ones still sit
/// on a (much lower) floor. Both are fitted on the format's batch-1 rows ([`fit_floors_and_bandwidth`]).
fn candle_graph_calibrations(
    obs: &[Observation],
) -> (Vec<PrecisionCalibration>, Vec<&Observation>) {
    let rows: Vec<&Observation> = obs
        .iter()
        .filter(|o| o.fmt.stack == Stack::CandleGraph && o.batch == 1 && o.fits())
        .collect();
    let cals = distinct(rows.iter().map(|o| o.fmt.name))
        .into_iter()
        .map(|name| {
            let own: Vec<&Observation> =
                rows.iter().copied().filter(|o| o.fmt.name == name).collect();
            let (fits, bw) = fit_floors_and_bandwidth(&own, |o| o.fmt.name, false);
            PrecisionCalibration {
                precision: name.to_string(),
                stack: Stack::CandleGraph,
                launch_ms_per_layer: fits[0].floor,
                bandwidth_efficiency: bw,
                kernel_ceiling_gbs: None,
                kernel_ceiling_archs: Vec::new(),
                bandwidth_source: format!(
                    "fitted with the floor on {} candle-graph batch-1 rows (log least squares of \
                     max(layers · floor, bytes/(bandwidth · eff)); an unidentified eff stays nearest 0.70)",
                    own.len()
                ),
                rows: own.len(),
            }
        })
        .collect();
    (cals, rows)
}

/// One key's constants from [`fit_floors_and_bandwidth`].
struct KeyFit {
    key: String,
    /// Launch floor per layer, ms.
    floor: f64,
    /// Kernel ceiling, GB/s (`None`: no row binds one, or not fitted).
    ceiling_gbs: Option<f64>,
    /// The architectures of the rows the ceiling binds.
    ceiling_archs: Vec<Arch>,
}

/// Launch floors per layer (ms), one per `key` of the rows, and one bandwidth efficiency shared by
/// them, minimising the squared log error of `max(layers · floor, bytes/(bandwidth · eff), compute)`
/// against the measured steps: a grid of eff 0.05–1.00 by 0.01 and floors 10⁻⁴–1 ms by 2.3 %. For
/// a given eff each key's floor is fitted alone (its rows' cost is separate). Where the rows do not
/// pin a parameter (every row on the floor, or none), the cost is flat in it: eff then stays
/// nearest upstream's 0.70 and a floor at its smallest value. With `ceilings`, each key also gets
/// a kernel ceiling (the memory term becomes bytes/min(bandwidth · eff, ceiling)), 100 GB/s–20 TB/s
/// ([`best_ceiling`]), fitted with its floor by coordinate descent; one no row binds stays `None`.
fn fit_floors_and_bandwidth<'o>(
    rows: &[&'o Observation],
    key: impl Fn(&'o Observation) -> &'o str,
    ceilings: bool,
) -> (Vec<KeyFit>, f64) {
    let full_bandwidth = Efficiency {
        bandwidth: 1.0,
        compute: DEFAULT_COMPUTE_EFFICIENCY,
        launch_ms_per_layer: 0.0,
    };
    // Per key, per row: memory time at 100 % bandwidth, compute time, ln(measured step), layers,
    // the card's bandwidth (GB/s).
    let keys = distinct(rows.iter().map(|o| key(o)));
    let pre: Vec<Vec<FitRow>> = keys
        .iter()
        .map(|k| {
            rows.iter()
                .filter(|o| key(o) == *k)
                .map(|o| {
                    let s =
                        roofline_step(&o.gpu, &o.shape, o.fmt, o.batch, o.context, &full_bandwidth);
                    FitRow {
                        memory_ms: s.memory_ms,
                        compute_ms: s.compute_ms,
                        ln_measured: o.measured_step_ms().ln(),
                        layers: o.shape.layers as f64,
                        bandwidth_gbs: o.gpu.bandwidth_gbs,
                        arch: o.gpu.arch,
                    }
                })
                .collect()
        })
        .collect();
    let mut effs: Vec<f64> = (5..=100).map(|i| i as f64 / 100.0).collect();
    effs.sort_by(|a, b| {
        (a - DEFAULT_BANDWIDTH_EFFICIENCY)
            .abs()
            .total_cmp(&(b - DEFAULT_BANDWIDTH_EFFICIENCY).abs())
    });
    let floors: Vec<f64> = (0..=400)
        .map(|i| 10f64.powf(-4.0 + i as f64 / 100.0))
        .collect();
    let mut best = (f64::INFINITY, Vec::new(), DEFAULT_BANDWIDTH_EFFICIENCY);
    for &eff in &effs {
        let per_key: Vec<(f64, f64, Option<f64>)> = pre
            .iter()
            .map(|r| best_floor_and_ceiling(r, eff, &floors, ceilings))
            .collect();
        let c: f64 = per_key.iter().map(|x| x.0).sum();
        if c < best.0 - 1e-12 {
            best = (c, per_key, eff);
        }
    }
    let eff = best.2;
    let fits = keys
        .into_iter()
        .zip(best.1)
        .zip(&pre)
        .map(|((k, (_, floor, ceiling_gbs)), rows)| {
            // Where the ceiling is under the card's eff × bandwidth, it, not the memory, is the pace.
            let binds = |r: &&FitRow| ceiling_gbs.is_some_and(|c| c < eff * r.bandwidth_gbs);
            let mut ceiling_archs: Vec<Arch> = Vec::new();
            for r in rows.iter().filter(binds) {
                if !ceiling_archs.contains(&r.arch) {
                    ceiling_archs.push(r.arch);
                }
            }
            KeyFit {
                key: k.to_string(),
                floor,
                ceiling_gbs: ceiling_gbs.filter(|_| !ceiling_archs.is_empty()),
                ceiling_archs,
            }
        })
        .collect();
    (fits, eff)
}

/// One row as [`fit_floors_and_bandwidth`] sees it.
struct FitRow {
    memory_ms: f64,
    compute_ms: f64,
    ln_measured: f64,
    layers: f64,
    bandwidth_gbs: f64,
    arch: Arch,
}

fn fit_cost(rows: &[FitRow], floor: f64, eff: f64, ceiling: Option<f64>) -> f64 {
    rows.iter()
        .map(|r| {
            let reached = reached_efficiency(eff, ceiling, r.bandwidth_gbs);
            let step = (r.layers * floor)
                .max(r.memory_ms / reached)
                .max(r.compute_ms);
            (step.ln() - r.ln_measured).powi(2)
        })
        .sum()
}

/// Index and value of the smallest cost; the first of equals (a flat cost keeps the first).
fn argmin(costs: impl Iterator<Item = f64>) -> (usize, f64) {
    costs.enumerate().fold((0, f64::INFINITY), |best, (i, c)| {
        if c < best.1 - 1e-12 {
            (i, c)
        } else {
            best
        }
    })
}

/// One key's (cost, floor, ceiling) at a given eff: the floor alone, then (with `ceilings`) floor
/// and ceiling alternately until the ceiling stays put.
fn best_floor_and_ceiling(
    rows: &[FitRow],
    eff: f64,
    floors: &[f64],
    ceilings: bool,
) -> (f64, f64, Option<f64>) {
    let (mut ceiling, mut floor, mut cost) = (None, floors[0], f64::INFINITY);
    // The whole floor grid first; after a ceiling moved, ±40 steps (×2.5 either way) around the
    // floor it had: the ceiling moves the floor little, and the full grid each time cost 2× the fit.
    let mut window = 0..floors.len();
    for _ in 0..6 {
        let (fi, fc) = argmin(
            floors[window.clone()]
                .iter()
                .map(|&f| fit_cost(rows, f, eff, ceiling)),
        );
        let fi = fi + window.start;
        (floor, cost) = (floors[fi], fc);
        window = fi.saturating_sub(40)..(fi + 41).min(floors.len());
        if !ceilings {
            break;
        }
        // Only a strictly better ceiling moves it (the grid need not hold the current one).
        let (c, cc) = best_ceiling(rows, floor, eff);
        if c == ceiling || cc >= fc - 1e-12 {
            break;
        }
        (ceiling, cost) = (c, cc);
    }
    (cost, floor, ceiling)
}

/// The kernel ceiling (GB/s, 100 GB/s–20 TB/s) that best fits `rows` at a floor and eff: none
/// first, then a coarse grid from the top by 12 %, refined by 1.2 % around its best. Only a strict
/// improvement moves it, so a ceiling no row binds (flat cost) stays `None`. Coarse-to-fine: the
/// fit runs for every eff on the grid, and a fine grid alone tripled the calibration's time.
fn best_ceiling(rows: &[FitRow], floor: f64, eff: f64) -> (Option<f64>, f64) {
    let at = |log10: f64| Some(10f64.powf(log10));
    let coarse: Vec<Option<f64>> = std::iter::once(None)
        .chain((0..=46).rev().map(|i| at(2.0 + i as f64 * 0.05)))
        .collect();
    let (ci, cc) = argmin(coarse.iter().map(|&c| fit_cost(rows, floor, eff, c)));
    let Some(centre) = coarse[ci] else {
        return (None, cc);
    };
    let fine: Vec<Option<f64>> = std::iter::once(Some(centre))
        .chain((-9..=9).map(|i| at(centre.log10() + i as f64 * 0.005)))
        .filter(|c| c.is_some_and(|c| (1e2..=2e4).contains(&c)))
        .collect();
    let (fi, fc) = argmin(fine.iter().map(|&c| fit_cost(rows, floor, eff, c)));
    (fine[fi], fc.min(cc))
}

/// Our engines' batch corrections ([`BatchStepCorrection`]) from their swept rows: each row at
/// batch > 1 against the row of the same model, session and format at batch 1.
fn batch_step_corrections(
    cal: &LatencyCalibration,
    obs: &[Observation],
) -> Vec<BatchStepCorrection> {
    let modelled = |o: &Observation| {
        let eff = cal.efficiency(&o.gpu, o.fmt);
        roofline_step(&o.gpu, &o.shape, o.fmt, o.batch, o.context, &eff).step_ms
    };
    let mut out: Vec<BatchStepCorrection> = Vec::new();
    for o in obs
        .iter()
        .filter(|o| o.batch > 1 && o.fmt.stack != Stack::Transformers && o.fits())
    {
        let Some(base) = obs.iter().find(|b| {
            b.batch == 1 && b.model == o.model && b.session == o.session && b.fmt.name == o.fmt.name
        }) else {
            continue;
        };
        let k = (o.measured_step_ms() / modelled(o)) / (base.measured_step_ms() / modelled(base));
        if !k.is_finite() {
            continue;
        }
        // Keyed by the swept precision itself, as the energy curves are (`engine_batch_curves`):
        // a format without a sweep of its own borrows one at lookup (`batch_correction`).
        let class = o.precision;
        match out
            .iter_mut()
            .find(|c| c.stack == o.fmt.stack && c.precision == class)
        {
            Some(c) => c.points.push((o.batch as f64, k)),
            None => out.push(BatchStepCorrection {
                stack: o.fmt.stack,
                precision: class,
                points: vec![(1.0, 1.0), (o.batch as f64, k)],
            }),
        }
    }
    out
}

/// One observation against the calibrated model: with its card's factor and pooled.
fn calibration_row(cal: &LatencyCalibration, o: &Observation, used: bool) -> CalibrationRow {
    let pooled_eff = cal.scaled_efficiency(&o.gpu, o.fmt, 1.0);
    let k = cal.batch_correction(o.fmt.stack, o.precision, o.batch);
    let step = cal.step(&o.gpu, &o.shape, o.fmt, o.precision, o.batch, o.context);
    let pooled = roofline_step(&o.gpu, &o.shape, o.fmt, o.batch, o.context, &pooled_eff);
    let modelled = o.batch as f64 / step.step_ms * 1e3;
    let pooled_tok_s = o.batch as f64 / (pooled.step_ms * k) * 1e3;
    CalibrationRow {
        gpu: o.gpu.name.clone(),
        model: o.model.clone(),
        shape: o.shape.name.clone(),
        shape_tag: o.shape_tag,
        params_b: o.params_b,
        precision: o.precision,
        precision_variant: o.precision_variant.clone(),
        batch: o.batch,
        session: o.session.clone(),
        measured_tok_s: o.measured_tok_s,
        modelled_tok_s: modelled,
        error_pct: pct(modelled, o.measured_tok_s),
        pooled_tok_s,
        pooled_error_pct: pct(pooled_tok_s, o.measured_tok_s),
        bound: step.bound,
        used_in_fit: used,
        note: row_note(o, used, k),
    }
}

/// RMS and median errors over the rows that fed the fit, with the card factors and pooled.
fn summarize_errors(cal: &mut LatencyCalibration) {
    cal.rms_error_pct = rms(cal
        .rows
        .iter()
        .filter(|r| r.used_in_fit)
        .map(|r| r.error_pct));
    cal.pooled_rms_error_pct = rms(cal
        .rows
        .iter()
        .filter(|r| r.used_in_fit)
        .map(|r| r.pooled_error_pct));
    cal.median_abs_error_pct = median_abs(
        cal.rows
            .iter()
            .filter(|r| r.used_in_fit)
            .map(|r| r.error_pct),
    );
    cal.pooled_median_abs_error_pct = median_abs(
        cal.rows
            .iter()
            .filter(|r| r.used_in_fit)
            .map(|r| r.pooled_error_pct),
    );
}

/// The calibration on the embedded data (once per process).
pub fn latency_calibration() -> &'static LatencyCalibration {
    static C: OnceLock<LatencyCalibration> = OnceLock::new();
    C.get_or_init(|| calibrate_latency(Dataset::embedded()))
}

/// Every measured throughput in the dataset (anchors with `throughput_tok_s`, plus the batch sweep)
/// against the modelled one.
pub fn throughput_calibration_table() -> Vec<CalibrationRow> {
    latency_calibration().rows.clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shapes::find_shape;
    use crate::vram::find_format;

    fn gpu(name: &str) -> Gpu {
        Dataset::embedded().gpu(name).unwrap().clone()
    }

    #[test]
    fn roofline_step_of_qwen2_7b_fp16_on_rtx4090_by_hand() {
        let s = find_shape("Qwen2-7B").unwrap();
        let fp16 = find_format("FP16").unwrap();
        let eff = Efficiency {
            bandwidth: 0.70,
            compute: 0.30,
            launch_ms_per_layer: 0.5,
        };
        let t = roofline_step(&gpu("RTX 4090"), s, fp16, 1, 4096, &eff);
        // bytes: 7 615 616 512 params · 2 + KV 234 881 024 = 15 466 114 048
        // memory: 15 466 114 048 / (1008e9 · 0.70) = 21.9191 ms
        assert!((t.memory_ms - 15_466_114_048.0 / (1008e9 * 0.70) * 1e3).abs() < 1e-9);
        assert!((t.memory_ms - 21.9191).abs() < 1e-3, "{}", t.memory_ms);
        // FLOPs: 2 · (6 525 288 448 + 544 997 376) + 4 · 28 · 3584 · 4096 = 15 784 738 816
        // compute: 15 784 738 816 / (165.2e12 · 0.30) = 0.31850 ms
        assert_eq!(flops_per_step(s, 1, 4096), 15_784_738_816.0);
        assert!((t.compute_ms - 0.318_496).abs() < 1e-5, "{}", t.compute_ms);
        // launch: 28 layers · 0.5 ms = 14 ms < 21.92 → memory-bound
        assert_eq!(t.launch_ms, 14.0);
        assert_eq!(t.bound, Bound::Memory);
        assert_eq!(t.step_ms, t.memory_ms);
    }

    #[test]
    fn launch_floor_binds_for_small_models() {
        let s = find_shape("Qwen2-0.5B").unwrap();
        let eff = Efficiency {
            bandwidth: 0.70,
            compute: 0.30,
            launch_ms_per_layer: 0.5,
        };
        let t = roofline_step(
            &gpu("RTX 5090"),
            s,
            find_format("FP16").unwrap(),
            1,
            512,
            &eff,
        );
        assert_eq!(t.bound, Bound::Launch);
        assert_eq!(t.step_ms, 24.0 * 0.5);
    }

    #[test]
    fn dataset_names_map_to_real_shapes() {
        assert_eq!(
            shape_for_model_name("Yi-1.5-6B-Chat", 6.0).0.name,
            "Yi-1.5-6B"
        );
        assert_eq!(
            shape_for_model_name("Mistral-7B-Instruct-v0.3", 7.0).0.name,
            "Mistral-7B"
        );
        assert_eq!(
            shape_for_model_name("Qwen2.5-3B-Instruct", 3.0).0.name,
            "Qwen2.5-3B"
        );
        assert_eq!(
            shape_for_model_name("TinyLlama-1.1B-intermediate-step-1431k-3T", 1.1)
                .0
                .name,
            "TinyLlama-1.1B"
        );
        let (phi, tag) = shape_for_model_name("Phi-3-mini-4k-instruct", 3.8);
        assert_eq!(tag, Tag::Interpolated);
        assert!(phi.name.contains("interpolated"));
    }

    #[test]
    fn calibration_covers_every_measured_throughput() {
        let ds = Dataset::embedded();
        // Every measured throughput but the rows that check the method (never fitted).
        let with_tput = ds
            .anchors
            .iter()
            .filter(|a| a.throughput_tok_s.is_some() && !a.check)
            .count();
        assert!(ds
            .anchors
            .iter()
            .any(|a| a.check && a.throughput_tok_s.is_some()));
        let table = throughput_calibration_table();
        assert_eq!(table.len(), with_tput + batch_sweep().len());
        assert!(table
            .iter()
            .all(|r| r.modelled_tok_s.is_finite() && r.modelled_tok_s > 0.0));
        // quantized formats are slower than FP16 per layer (the dequantization cost)
        let cal = latency_calibration();
        let l = |p: &str| cal.precision(p).unwrap().launch_ms_per_layer;
        assert!(l("NF4") > l("FP16") && l("INT8") > l("INT8-pure") && l("INT8-pure") > l("FP16"));
        // the T4 7B FP16 row cannot fit 16 GB: kept in the table, left out of the fit
        let t4 = table
            .iter()
            .find(|r| r.gpu == "T4" && r.model == "Qwen2-7B" && r.precision == Precision::Fp16)
            .unwrap();
        assert!(!t4.used_in_fit && t4.note.contains("offloaded"));
        assert!(cal.rms_error_pct < 40.0, "rms {}", cal.rms_error_pct);
        // llama.cpp: the RTX 4090's 8B rows are bandwidth-bound, the H200 server's 0.5–3B rows sit
        // on a floor and its 7B rows on the kernels' ceiling; one model fits all three (a
        // bandwidth-only fit missed them by −80 % and +320 %, one without ceilings the H200's 7B
        // Q4 rows by +65 %). Its concurrency rows feed the batch correction, not the fit.
        let session = |s: &'static str| table.iter().filter(move |r| r.session == s);
        for r in session("rtx4090-llamacpp-2026-09-03")
            .chain(session("h200-llama-server-2026-12").filter(|r| r.batch == 1))
        {
            assert!(r.used_in_fit && r.error_pct.abs() < 25.0, "{r:?}");
        }
        assert!(session("h200-llama-server-2026-12")
            .filter(|r| r.batch > 1)
            .all(|r| !r.used_in_fit && r.bound == Bound::Engine));
        assert!(session("rtx4090-llamacpp-2026-09-03").all(|r| r.bound == Bound::Memory));
        assert!(session("h200-llama-server-2026-12").any(|r| r.bound == Bound::Launch));
        let (h200, rtx4090) = (gpu("H200"), gpu("RTX 4090"));
        for p in ["GGUF-F16", "GGUF-Q8_0", "GGUF-Q4_K", "GGUF-Q4_0", "GGUF"] {
            let g = cal.precision(p).unwrap_or_else(|| panic!("{p}"));
            assert_eq!(g.stack, Stack::LlamaCpp);
            assert!(
                g.bandwidth_efficiency > 0.5,
                "{p}: {}",
                g.bandwidth_efficiency
            );
            // The ceiling binds on the H200 (4.8 TB/s), not on the 4090 (1.0 TB/s), so it is the
            // Hopper cards' only: an A800 or a B200 keeps the shared efficiency.
            let c = g
                .kernel_ceiling_gbs
                .unwrap_or_else(|| panic!("{p}: no ceiling"));
            assert!(
                c > rtx4090.bandwidth_gbs && c < h200.bandwidth_gbs,
                "{p}: {c}"
            );
            assert_eq!(g.kernel_ceiling_archs, [Arch::Hopper], "{p}");
            // Through the format itself, or for the pooled constants a GGUF format without rows.
            let f = find_format_on(p.strip_prefix("GGUF-").unwrap_or("Q6_K"), "llama.cpp")
                .unwrap_or_else(|| panic!("{p}: no format"));
            let used = cal
                .precision(f.name)
                .map_or("GGUF", |u| u.precision.as_str());
            assert_eq!(used, p, "{} is calibrated by {used}", f.name);
            let reached = |card: &str| cal.efficiency(&gpu(card), f).bandwidth;
            assert!(
                (reached("H200") - c / h200.bandwidth_gbs).abs() < 1e-12,
                "{p}"
            );
            for card in ["RTX 4090", "A800", "B200"] {
                assert_eq!(reached(card), g.bandwidth_efficiency, "{p} on {card}");
            }
        }
    }

    #[test]
    fn print_calibration_table() {
        // `cargo test -p analysis print_calibration_table -- --nocapture` prints the table.
        let cal = latency_calibration();
        for p in &cal.precisions {
            println!(
                "{:<10} launch {:.3} ms/layer  bw {:.2} ceiling {:?} GB/s ({}), n = {}",
                p.precision,
                p.launch_ms_per_layer,
                p.bandwidth_efficiency,
                p.kernel_ceiling_gbs,
                p.bandwidth_source,
                p.rows
            );
        }
        for c in &cal.cards {
            println!("card {:<10} ×{:.3} (n = {})", c.gpu, c.factor, c.rows);
        }
        println!("| gpu | model | precision | batch | session | measured tok/s | modelled tok/s | error % | pooled tok/s | pooled error % | bound | fit | note |");
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
        for r in &cal.rows {
            println!(
                "| {} | {} | {} | {} | {} | {:.2} | {:.2} | {:+.1} | {:.2} | {:+.1} | {:?} | {} | {} |",
                r.gpu, r.model, r.precision_label(), r.batch, r.session, r.measured_tok_s, r.modelled_tok_s, r.error_pct,
                r.pooled_tok_s, r.pooled_error_pct, r.bound, if r.used_in_fit { "yes" } else { "no" }, r.note
            );
        }
        println!(
            "fitted rows: RMS error {:.1} % (median |error| {:.1} %) with card factors; pooled (card factor 1): RMS {:.1} %, median {:.1} %",
            cal.rms_error_pct, cal.median_abs_error_pct, cal.pooled_rms_error_pct, cal.pooled_median_abs_error_pct
        );
    }

    /// The graph engine's step times are its own: not the eager engine's launch floors (which it
    /// must leave as they were), and recovered from rows made by a known step model.
    #[test]
    fn the_graph_engine_gets_its_own_calibration() {
        use crate::test_data::{
            with_graph_engine, GRAPH_BANDWIDTH, GRAPH_FLOOR_MS_PER_LAYER, GRAPH_STACK,
        };
        let ds = with_graph_engine();
        let cal = calibrate_latency(&ds);
        let base = latency_calibration();
        for name in [
            "candle-F16",
            "candle-BF16",
            "candle-Q8_0",
            "candle-Q4_K",
            "candle-Q4_0",
        ] {
            assert_eq!(cal.precision(name), base.precision(name), "{name} moved");
        }
        for name in [
            "candle-graph-F16",
            "candle-graph-Q8_0",
            "candle-graph-Q4_K",
            "candle-graph-Q4_0",
        ] {
            let g = cal.precision(name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(g.stack, Stack::CandleGraph);
            assert!(g.rows >= 5, "{name}: {} rows", g.rows);
            let floor = g.launch_ms_per_layer;
            assert!(
                (floor / GRAPH_FLOOR_MS_PER_LAYER - 1.0).abs() < 0.03,
                "{name} floor {floor}"
            );
            assert!(
                (g.bandwidth_efficiency - GRAPH_BANDWIDTH).abs() < 0.015,
                "{name} bw {}",
                g.bandwidth_efficiency
            );
        }
        // 7B F16: the eager engine is launch-bound, the graph engine memory-bound.
        let gpu = gpu("H200");
        let s = find_shape("Qwen2-7B").unwrap();
        let step = |stack: &str| {
            let f = find_format_on("FP16", stack).unwrap();
            roofline_step(
                &gpu,
                s,
                f,
                1,
                ANCHOR_DECODE_CONTEXT,
                &cal.efficiency(&gpu, f),
            )
        };
        assert_eq!(step("candle").bound, Bound::Launch);
        assert_eq!(step(GRAPH_STACK).bound, Bound::Memory);
        assert!(step(GRAPH_STACK).step_ms * 1.5 < step("candle").step_ms);
    }

    /// The graph engine's batched step, by hand from its own sweep: per swept model,
    /// (measured step at b / modelled at b) over (measured at 1 / modelled at 1), then the geometric
    /// mean of the two models. Q4_K at batch 64 runs ≈ 4× the roofline; F16 at batch 4 on it.
    #[test]
    fn graph_batch_step_correction_is_measured_over_modelled_relative_to_batch_one() {
        let ds = Dataset::embedded();
        let cal = calibrate_latency(ds);
        let gpu = gpu("H200");
        let tok_s = |model: &str, p: Precision, b: u32| {
            ds.anchors
                .iter()
                .find(|a| {
                    a.model == format!("{model} [candle-graph]") && a.precision == p && a.batch == b
                })
                .and_then(|a| a.throughput_tok_s)
                .unwrap_or_else(|| panic!("{model} {p} b{b}"))
        };
        for (p, label) in [(Precision::Q4K, "Q4_K"), (Precision::Fp16, "FP16")] {
            let f = find_format_on(label, "candle-graph").unwrap();
            for b in [4u32, 16, 64] {
                let logs: Vec<f64> = ["Qwen2-1.5B", "Qwen2-7B"]
                    .iter()
                    .map(|m| {
                        let s = find_shape(m).unwrap();
                        let eff = cal.efficiency(&gpu, f);
                        let model = |b: u32| {
                            roofline_step(&gpu, s, f, b, ANCHOR_DECODE_CONTEXT, &eff).step_ms
                        };
                        let measured = |b: u32| b as f64 / tok_s(m, p, b) * 1e3;
                        ((measured(b) / model(b)) / (measured(1) / model(1))).ln()
                    })
                    .collect();
                let want = (logs.iter().sum::<f64>() / 2.0).exp();
                let got = cal.batch_correction(Stack::CandleGraph, p, b);
                assert!((got - want).abs() < 1e-9, "{label} b{b}: {got} vs {want}");
            }
        }
        let k = |p, b| cal.batch_correction(Stack::CandleGraph, p, b);
        assert!(k(Precision::Q4K, 64) > 3.0, "{}", k(Precision::Q4K, 64));
        assert!((k(Precision::Fp16, 4) - 1.0).abs() < 0.1);
        // BF16 takes FP16's, Q4_0 takes Q4_K's; batch 1 and engines without a sweep get none.
        assert_eq!(k(Precision::Bf16, 16), k(Precision::Fp16, 16));
        assert_eq!(k(Precision::Q4_0, 16), k(Precision::Q4K, 16));
        assert_eq!(k(Precision::Q4K, 1), 1.0);
        // llama-server's own concurrency sweep (8 / 32 streams at 7B): measured over modelled.
        let l = |p, b| cal.batch_correction(Stack::LlamaCpp, p, b);
        assert!(l(Precision::Q4K, 32) > l(Precision::Fp16, 32) && l(Precision::Fp16, 8) > 1.5);
        assert_eq!(l(Precision::Q4K, 1), 1.0);
        assert_eq!(
            cal.batch_correction(Stack::Transformers, Precision::Fp16, 64),
            1.0
        );
        // The corrected step is the roofline's times k, and the bound says the engine sets the pace.
        let f = find_format_on("Q4_K", "candle-graph").unwrap();
        let s = find_shape("Qwen2-7B").unwrap();
        let plain = roofline_step(&gpu, s, f, 64, 512, &cal.efficiency(&gpu, f));
        let step = cal.step(&gpu, s, f, Precision::Q4K, 64, 512);
        assert!((step.step_ms / plain.step_ms - k(Precision::Q4K, 64)).abs() < 1e-12);
        assert_eq!(step.bound, Bound::Engine);
        assert_eq!(
            cal.step(&gpu, s, f, Precision::Q4K, 1, 512),
            roofline_step(&gpu, s, f, 1, 512, &cal.efficiency(&gpu, f))
        );
    }
}
