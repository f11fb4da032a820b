//! Batch dependence of energy per token, calibrated on the one published batch sweep
//! (`data/batch_sweep.csv`: A800, Mistral-7B, INT8-pure, BS 1–64, 10 runs each).
//!
//! Form: `e(b)/e(1) = c + (1 − c)/b^k` — a fixed share `c` that scales with tokens and a share that
//! is amortized over the batch. Fitted by least squares on *relative* error (large batches have
//! small ratios; absolute least squares would ignore them). Upstream used `0.65 + 0.35/b`, which at
//! BS 64 predicts 0.655 where the sweep measured 0.043.

use crate::dataset::{Anchor, Dataset};
use crate::tag::Tag;
use report::Precision;
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// The A800 batch sweep (`data/batch_sweep.csv`), embedded.
pub const BATCH_SWEEP_CSV: &str = include_str!("../../../data/batch_sweep.csv");

/// One row of the sweep (the columns this crate uses).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// Batch size.
    #[serde(rename = "batch_size")]
    pub batch: u32,
    /// Mean energy per generated token, mJ.
    #[serde(rename = "energy_per_token_mj_mean")]
    pub energy_mj: f64,
    /// Standard deviation of the energy over the runs, mJ.
    #[serde(rename = "energy_per_token_mj_sd")]
    pub energy_sd_mj: f64,
    /// Mean throughput summed over the batch, tok/s.
    #[serde(rename = "throughput_tok_s_mean")]
    pub throughput_tok_s: f64,
    /// Mean GPU power, W.
    #[serde(rename = "avg_power_w_mean")]
    pub avg_power_w: f64,
    /// Card name.
    pub gpu: String,
    /// Model name.
    pub model: String,
    /// Model size, B parameters.
    pub params_b: f64,
    /// Precision of the sweep.
    pub precision: Precision,
}

/// Parse the sweep CSV; the error names the row.
pub fn parse_sweep(text: &str) -> Result<Vec<SweepPoint>, String> {
    csv::Reader::from_reader(text.as_bytes())
        .deserialize()
        .enumerate()
        .map(|(i, r)| r.map_err(|e| format!("batch_sweep.csv: row {}: {e}", i + 2)))
        .collect()
}

/// The embedded sweep, sorted by batch.
pub fn batch_sweep() -> &'static [SweepPoint] {
    static S: OnceLock<Vec<SweepPoint>> = OnceLock::new();
    S.get_or_init(|| {
        let mut v = parse_sweep(BATCH_SWEEP_CSV).expect("data/batch_sweep.csv is checked by tests");
        v.sort_by_key(|p| p.batch);
        v
    })
}

/// Upstream's fixed batch factor.
pub fn upstream_batch_factor(batch: u32) -> f64 {
    0.65 + 0.35 / batch.max(1) as f64
}

/// One sweep point against the fit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchFitPoint {
    /// Batch size.
    pub batch: u32,
    /// Energy per token at this batch / at batch 1, measured.
    pub measured_ratio: f64,
    /// The same ratio from the fitted curve.
    pub fitted_ratio: f64,
    /// Fit error, % of the measured ratio.
    pub error_pct: f64,
    /// The ratio upstream's `0.65 + 0.35/b` gives.
    pub upstream_ratio: f64,
    /// Upstream's error, %.
    pub upstream_error_pct: f64,
}

/// An out-of-sample check on other measured batch pairs (A800 quick test, three precisions).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchCheck {
    /// Precision of the pair.
    pub precision: Precision,
    /// Batch size of the batched row.
    pub batch: u32,
    /// Energy ratio vs batch 1, measured.
    pub measured_ratio: f64,
    /// The ratio the fitted curve gives.
    pub fitted_ratio: f64,
    /// Fit error, % of the measured ratio.
    pub error_pct: f64,
}

/// The fitted batch curve `e(b)/e(1) = c + (1 − c)/b^k`, its errors and checks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchCurve {
    /// Share of energy per token that does not amortize over the batch.
    pub c: f64,
    /// How fast the rest amortizes.
    pub k: f64,
    /// RMS and max relative error of the fit over the sweep, %.
    pub rms_error_pct: f64,
    /// Largest relative error over the sweep, %.
    pub max_error_pct: f64,
    /// RMS relative error of upstream's fixed factor, %.
    pub upstream_rms_error_pct: f64,
    /// Every sweep point against the fit.
    pub points: Vec<BatchFitPoint>,
    /// Out-of-sample checks on other measured batch pairs.
    pub checks: Vec<BatchCheck>,
    /// What the curve was fitted on, in words.
    pub calibrated_on: &'static str,
}

impl BatchCurve {
    /// Energy per token at `batch` relative to batch 1.
    pub fn factor(&self, batch: u32) -> f64 {
        batch_ratio(self.c, self.k, batch.max(1) as f64)
    }
}

fn batch_ratio(c: f64, k: f64, b: f64) -> f64 {
    c + (1.0 - c) / b.powf(k)
}

/// Best `c` in [0, 1] for a fixed `k` (the model is linear in `c`), weighted by 1/ratio².
fn best_c(points: &[(f64, f64)], k: f64) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for &(b, r) in points {
        let u = b.powf(-k);
        let w = 1.0 / (r * r);
        num += w * (r - u) * (1.0 - u);
        den += w * (1.0 - u) * (1.0 - u);
    }
    if den > 0.0 {
        (num / den).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

fn rel_sse(points: &[(f64, f64)], c: f64, k: f64) -> f64 {
    points
        .iter()
        .map(|&(b, r)| ((batch_ratio(c, k, b) - r) / r).powi(2))
        .sum()
}

/// Least-squares (c, k) on relative error: dense scan of k ∈ [0.05, 3], then golden-section polish.
pub fn fit_batch_ratio(points: &[(f64, f64)]) -> (f64, f64) {
    let cost = |k: f64| rel_sse(points, best_c(points, k), k);
    let k0 = (0..=590)
        .map(|i| 0.05 + i as f64 * 0.005)
        .min_by(|a, b| cost(*a).total_cmp(&cost(*b)))
        .unwrap_or(1.0);
    let (mut lo, mut hi) = ((k0 - 0.005).max(0.05), (k0 + 0.005).min(3.0));
    let g = (5f64.sqrt() - 1.0) / 2.0;
    for _ in 0..60 {
        let (a, b) = (hi - g * (hi - lo), lo + g * (hi - lo));
        if cost(a) < cost(b) {
            hi = b;
        } else {
            lo = a;
        }
    }
    let k = (lo + hi) / 2.0;
    (best_c(points, k), k)
}

fn pct(pred: f64, meas: f64) -> f64 {
    (pred - meas) / meas * 100.0
}

fn rms(v: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x * x, n + 1));
    if n == 0 {
        0.0
    } else {
        (s / n as f64).sqrt()
    }
}

/// Fit the sweep and check the fit against the A800 quick-test batch pairs of `ds`.
pub fn calibrate_batch_curve(sweep: &[SweepPoint], ds: &Dataset) -> BatchCurve {
    let e1 = sweep
        .iter()
        .find(|p| p.batch == 1)
        .map(|p| p.energy_mj)
        .unwrap_or(f64::NAN);
    let ratios: Vec<(f64, f64)> = sweep
        .iter()
        .map(|p| (p.batch as f64, p.energy_mj / e1))
        .collect();
    let (c, k) = fit_batch_ratio(&ratios);
    let points: Vec<BatchFitPoint> = sweep
        .iter()
        .zip(&ratios)
        .map(|(p, &(_, r))| {
            let fitted = batch_ratio(c, k, p.batch as f64);
            let up = upstream_batch_factor(p.batch);
            BatchFitPoint {
                batch: p.batch,
                measured_ratio: r,
                fitted_ratio: fitted,
                error_pct: pct(fitted, r),
                upstream_ratio: up,
                upstream_error_pct: pct(up, r),
            }
        })
        .collect();
    BatchCurve {
        c,
        k,
        rms_error_pct: rms(points.iter().map(|p| p.error_pct)),
        max_error_pct: points.iter().map(|p| p.error_pct.abs()).fold(0.0, f64::max),
        upstream_rms_error_pct: rms(points.iter().map(|p| p.upstream_error_pct)),
        checks: batch_checks(ds, c, k),
        points,
        calibrated_on:
            "one A800 sweep: Mistral-7B-Instruct-v0.2, INT8-pure, BS 1–64, 256 in + 256 new \
                        tokens, 10 runs per BS; applied to every precision",
    }
}

/// Energy ratios batch b / batch 1 within each (gpu, session, model, precision) of the anchors.
fn batch_checks(ds: &Dataset, c: f64, k: f64) -> Vec<BatchCheck> {
    let mut out = Vec::new();
    // Out-of-sample checks on the published transformers rows (our own engines' batch sweeps get
    // curves of their own, `engine_batch_curves`, checked in docs/MEASUREMENTS.md).
    for a in ds
        .anchors
        .iter()
        .filter(|a| a.batch > 1 && a.engine() == TRANSFORMERS)
    {
        let Some(e) = a.energy_mj else { continue };
        let base = ds.anchors.iter().find(|o| {
            o.batch == 1
                && o.gpu == a.gpu
                && o.session == a.session
                && o.model == a.model
                && o.precision == a.precision
        });
        let Some(e1) = base.and_then(|o| o.energy_mj) else {
            continue;
        };
        let fitted = batch_ratio(c, k, a.batch as f64);
        out.push(BatchCheck {
            precision: a.precision,
            batch: a.batch,
            measured_ratio: e / e1,
            fitted_ratio: fitted,
            error_pct: pct(fitted, e / e1),
        });
    }
    out
}

/// The curve calibrated on the embedded sweep (once per process).
pub fn batch_curve() -> &'static BatchCurve {
    static C: OnceLock<BatchCurve> = OnceLock::new();
    C.get_or_init(|| calibrate_batch_curve(batch_sweep(), Dataset::embedded()))
}

/// The engine whose batch dependence is the A800 sweep's ([`batch_curve`]): its rows at batch > 1
/// are that curve's out-of-sample checks, not a curve of their own.
pub(crate) const TRANSFORMERS: &str = "transformers";

/// Batch curve of one precision on one engine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StackBatchCurve {
    /// The engine whose sweep it was fitted on ([`crate::Anchor::engine`]: `candle`, `candle-graph`, …).
    pub engine: String,
    /// Precision of the curve (FP16 or Q4_K on the H200).
    pub precision: Precision,
    /// Share that does not amortize over the batch.
    pub c: f64,
    /// How fast the rest amortizes.
    pub k: f64,
    /// (batch, measured ratio to batch 1) behind the fit.
    pub points: Vec<(f64, f64)>,
    /// Smallest and largest model swept, B parameters: another size borrows the curve.
    pub swept_b: (f64, f64),
}

impl StackBatchCurve {
    /// Energy per token at `batch` relative to batch 1: the measured ratio where the sweep ran that
    /// batch (geometric mean over its models), log-log between two measured batches, and the fitted
    /// `c + (1 − c)/b^k` only beyond the sweep, scaled to meet the last measured batch. The
    /// two-parameter form cannot follow a kernel switch:
    /// the graph engine's Q4_K costs 0.49× its batch-1 energy at batch 4 but 0.10× at 16, where the
    /// fit says 0.32× and 0.11×.
    pub fn factor(&self, batch: u32) -> f64 {
        let b = batch.max(1) as f64;
        log_log_inside(&self.points, b).unwrap_or_else(|| {
            // Past the sweep the fit's shape, continued from the last measured batch (no jump).
            match per_batch_geo_mean(&self.points).last() {
                Some(&(x, r)) if b > x => {
                    r * batch_ratio(self.c, self.k, b) / batch_ratio(self.c, self.k, x)
                }
                _ => batch_ratio(self.c, self.k, b),
            }
        })
    }

    /// Where `factor(batch)` comes from for `precision` at a model of `params_b`: batch 1 is the
    /// reference itself; a batch the sweep ran, or one between two it ran, is interpolated for the
    /// swept precision at a model within the swept sizes; past the sweep's batches or sizes, or for
    /// a precision that borrows this sweep (BF16 FP16's, Q4_0 Q4_K's), it is extrapolated.
    pub fn factor_tag(&self, batch: u32, params_b: f64, precision: Precision) -> Tag {
        let last = per_batch_geo_mean(&self.points).last().map_or(1.0, |p| p.0);
        let (lo, hi) = self.swept_b;
        // The shapes' own counts and the rows' rounded sizes differ in the third digit.
        let inside = params_b >= lo * 0.99 && params_b <= hi * 1.01;
        match batch {
            0 | 1 => Tag::Computed,
            b if b as f64 <= last && inside && precision == self.precision => Tag::Interpolated,
            _ => Tag::Extrapolated,
        }
    }
}

/// The precision whose sweep stands for `precision` on our engines: FP16 for the 16-bit float
/// formats (the same GEMMs), Q4_K for every GGUF format (the one quantized format swept).
pub(crate) fn swept_class(precision: Precision) -> Precision {
    if matches!(precision, Precision::Fp16 | Precision::Bf16) {
        Precision::Fp16
    } else {
        Precision::Q4K
    }
}

/// (batch, geometric mean of the values measured there) per distinct batch, ascending; points with
/// a non-positive or non-finite value are dropped.
pub(crate) fn per_batch_geo_mean(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64, usize)> = Vec::new();
    for &(b, r) in points.iter().filter(|p| p.1 > 0.0 && p.1.is_finite()) {
        match out.iter_mut().find(|o| o.0 == b) {
            Some(o) => (o.1, o.2) = (o.1 + r.ln(), o.2 + 1),
            None => out.push((b, r.ln(), 1)),
        }
    }
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out.into_iter()
        .map(|(b, s, n)| (b, (s / n as f64).exp()))
        .collect()
}

/// The value at batch `b` from measured (batch, value) points: their geometric mean where `b` was
/// measured, log-log between the two measured batches around it, `None` outside the measured range.
pub(crate) fn log_log_inside(points: &[(f64, f64)], b: f64) -> Option<f64> {
    let measured = per_batch_geo_mean(points);
    let (first, last) = (measured.first()?.0, measured.last()?.0);
    if b < first || b > last {
        return None;
    }
    crate::estimate::loglog_interp(&measured, b)
}

/// Per-(engine, precision) batch curves fitted on our own batch sweeps: rows of
/// `data/anchors.csv` at batch > 1 of every engine but transformers, each over the row of the same
/// engine, session, model and precision at batch 1. Engines are never pooled: the eager candle
/// engine is launch-bound at batch 1, so batching amortizes far more of its energy than it does
/// for the CUDA-graph engine or llama.cpp. On the H200 eager engine the quantized matmuls gain
/// less from batching than cuBLAS F16 (Q4_K +30 % vs F16 at batch 64), which the single A800
/// INT8-pure curve cannot show.
pub fn engine_batch_curves(ds: &Dataset) -> Vec<StackBatchCurve> {
    let own = |a: &&Anchor| a.energy_mj.is_some() && a.engine() != TRANSFORMERS;
    let mut out: Vec<StackBatchCurve> = Vec::new();
    for a in ds.anchors.iter().filter(own).filter(|a| a.batch > 1) {
        let engine = a.engine();
        let Some(base) = ds
            .anchors
            .iter()
            .filter(own)
            .find(|o| {
                o.batch == 1
                    && o.model == a.model
                    && o.precision == a.precision
                    && o.session == a.session
                    && o.engine() == engine
            })
            .and_then(|o| o.energy_mj)
        else {
            continue;
        };
        let ratio = a.energy_mj.unwrap_or(f64::NAN) / base;
        match out
            .iter_mut()
            .find(|c| c.engine == engine && c.precision == a.precision)
        {
            Some(c) => {
                c.points.push((a.batch as f64, ratio));
                c.swept_b = (c.swept_b.0.min(a.params_b), c.swept_b.1.max(a.params_b));
            }
            None => out.push(StackBatchCurve {
                engine: engine.to_string(),
                precision: a.precision,
                c: 0.0,
                k: 1.0,
                points: vec![(1.0, 1.0), (a.batch as f64, ratio)],
                swept_b: (a.params_b, a.params_b),
            }),
        }
    }
    for c in &mut out {
        let (cc, k) = fit_batch_ratio(&c.points);
        c.c = cc;
        c.k = k;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_is_embedded_with_seven_batches() {
        let s = batch_sweep();
        assert_eq!(
            s.iter().map(|p| p.batch).collect::<Vec<_>>(),
            [1, 2, 4, 8, 16, 32, 64]
        );
        assert_eq!(s[0].energy_mj, 6907.42);
        assert!(s
            .iter()
            .all(|p| p.precision == Precision::Int8Pure && p.gpu == "A800"));
    }

    #[test]
    fn fit_recovers_exact_parameters() {
        let pts: Vec<(f64, f64)> = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
            .iter()
            .map(|&b| (b, batch_ratio(0.04, 0.9, b)))
            .collect();
        let (c, k) = fit_batch_ratio(&pts);
        assert!((c - 0.04).abs() < 1e-6 && (k - 0.9).abs() < 1e-6, "{c} {k}");
    }

    #[test]
    fn calibrated_curve_beats_upstream_and_is_one_at_batch_one() {
        let b = batch_curve();
        assert!((b.factor(1) - 1.0).abs() < 1e-12);
        assert!(b.c > 0.0 && b.c < 0.1, "c {}", b.c);
        assert!(b.k > 0.7 && b.k < 1.2, "k {}", b.k);
        assert!(b.rms_error_pct < 20.0, "rms {}", b.rms_error_pct);
        assert!(
            b.upstream_rms_error_pct > 300.0,
            "upstream rms {}",
            b.upstream_rms_error_pct
        );
        // monotone: more batch, less energy per token
        assert!((1..64).all(|x| b.factor(x + 1) < b.factor(x)));
        // six A800 quick-test pairs (FP16, INT8, INT8-pure × BS 4, 8)
        assert_eq!(b.checks.len(), 6);
    }

    #[test]
    fn engine_curves_come_from_the_h200_sweeps_and_show_quantized_batching_worse() {
        let all = engine_batch_curves(Dataset::embedded());
        let mut engines: Vec<&str> = all.iter().map(|c| c.engine.as_str()).collect();
        engines.dedup();
        assert_eq!(
            engines,
            ["candle", "candle-graph", "llama.cpp"],
            "the three swept engines"
        );
        // llama-server's concurrency sweep (1 / 8 / 32 streams, 7 B): its curve is the measured
        // ratios (n = 3), e.g. FP16 494.2 / 3288.9 mJ = 0.150 at 8 streams, Q4_K 506.6 / 1590.1 = 0.319:
        // batching helps FP16 twice as much, as on candle.
        let llama = |p: Precision| {
            all.iter()
                .find(|c| c.engine == "llama.cpp" && c.precision == p)
                .unwrap_or_else(|| panic!("llama.cpp {p}"))
        };
        let (lf, lq) = (llama(Precision::Fp16), llama(Precision::Q4K));
        assert_eq!(lf.points.len(), 3, "streams 1, 8, 32");
        assert!(
            (lf.factor(8) - 494.22 / 3288.85).abs() < 0.002,
            "{}",
            lf.factor(8)
        );
        assert!(
            (lq.factor(8) - 506.61 / 1590.11).abs() < 0.002,
            "{}",
            lq.factor(8)
        );
        assert!(lq.factor(32) > lf.factor(32));
        let curves: Vec<&StackBatchCurve> = all.iter().filter(|c| c.engine == "candle").collect();
        let f16 = curves
            .iter()
            .find(|c| c.precision == Precision::Fp16)
            .expect("FP16 batch rows");
        let q4k = curves
            .iter()
            .find(|c| c.precision == Precision::Q4K)
            .expect("Q4_K batch rows");
        assert_eq!(f16.points.len(), 4, "batch 1, 4, 16, 64");
        assert!((f16.factor(1) - 1.0).abs() < 1e-12);
        // Measured (n = 3 at each batch): FP16 49.97 / 1684.5 mJ = 0.030 at batch 64; Q4_K 65.3 / 1362.8 = 0.048.
        assert!(f16.factor(64) < q4k.factor(64));
        for (b, r) in &f16.points {
            assert!(
                (f16.factor(*b as u32) - r).abs() / r < 0.35,
                "F16 b{b}: fit {} vs {r}",
                f16.factor(*b as u32)
            );
        }
    }

    /// Two engines' sweeps of the same card, models and precisions: a curve each, never pooled.
    #[test]
    fn batch_curves_are_fitted_per_engine() {
        use crate::test_data::{with_graph_engine, GRAPH_BATCH_PENALTY};
        let ds = with_graph_engine();
        let curves = engine_batch_curves(&ds);
        let eager_only = engine_batch_curves(Dataset::embedded());
        let find = |v: &[StackBatchCurve], e: &str, p: Precision| {
            v.iter()
                .find(|c| c.engine == e && c.precision == p)
                .cloned()
                .unwrap_or_else(|| panic!("{e} {p}"))
        };
        assert_eq!(curves.len(), 4, "(candle, candle-graph) × (FP16, Q4_K)");
        for p in [Precision::Fp16, Precision::Q4K] {
            let eager = find(&curves, "candle", p);
            let graph = find(&curves, "candle-graph", p);
            assert_eq!(
                eager,
                find(&eager_only, "candle", p),
                "graph rows left it alone"
            );
            assert_eq!(
                graph.points.len(),
                eager.points.len(),
                "no eager point in it"
            );
            // By hand: each graph ratio is its own rows' — the eager ratio × the penalty.
            for ((bg, rg), (be, re)) in graph.points.iter().zip(&eager.points) {
                let want = if *bg > 1.0 {
                    re * GRAPH_BATCH_PENALTY
                } else {
                    1.0
                };
                assert_eq!(bg, be);
                assert!((rg - want).abs() < 1e-9 * want, "{p} b{bg}: {rg} vs {want}");
            }
            assert!(graph.factor(64) > eager.factor(64) * 1.2, "{p}");
        }
    }

    #[test]
    fn measured_batches_are_read_off_and_interpolated_log_log_the_fit_only_beyond() {
        let c = StackBatchCurve {
            engine: "e".into(),
            precision: Precision::Q4K,
            c: 0.02,
            k: 0.9,
            points: vec![(1.0, 1.0), (4.0, 0.4), (16.0, 0.1), (4.0, 0.625)],
            swept_b: (1.5, 7.6),
        };
        // Batch 4 twice (two models): their geometric mean, sqrt(0.4 · 0.625) = 0.5.
        assert!((c.factor(4) - 0.5).abs() < 1e-12, "{}", c.factor(4));
        // Batch 8 is half-way between 4 and 16 in log b: sqrt(0.5 · 0.1).
        assert!((c.factor(8) - (0.05f64).sqrt()).abs() < 1e-12);
        // Batch 2 is half-way between 1 and 4 in log b: sqrt(1 · 0.5).
        assert!((c.factor(2) - (0.5f64).sqrt()).abs() < 1e-12);
        assert!((c.factor(1) - 1.0).abs() < 1e-12);
        // Past the sweep: the fit's shape from the last measured batch on, no jump at 16.
        let want = 0.1 * batch_ratio(0.02, 0.9, 64.0) / batch_ratio(0.02, 0.9, 16.0);
        assert!((c.factor(64) - want).abs() < 1e-12, "{}", c.factor(64));
        assert!(c.factor(17) < c.factor(16) && (c.factor(16) - 0.1).abs() < 1e-12);
        assert_eq!(
            [1, 4, 8, 16, 64].map(|b| c.factor_tag(b, 3.0, Precision::Q4K)),
            [
                Tag::Computed,
                Tag::Interpolated,
                Tag::Interpolated,
                Tag::Interpolated,
                Tag::Extrapolated
            ]
        );
        // A model outside the swept sizes borrows the curve: extrapolated at every batch > 1.
        assert_eq!(c.factor_tag(4, 14.8, Precision::Q4K), Tag::Extrapolated);
        assert_eq!(c.factor_tag(4, 0.5, Precision::Q4K), Tag::Extrapolated);
        assert_eq!(c.factor_tag(1, 14.8, Precision::Q4K), Tag::Computed);
        // Q4_0 borrows Q4_K's sweep: extrapolated even at a swept batch and size.
        assert_eq!(c.factor_tag(4, 3.0, Precision::Q4_0), Tag::Extrapolated);
        assert_eq!(log_log_inside(&c.points, 0.5), None);
        assert_eq!(log_log_inside(&[(1.0, f64::NAN), (2.0, -1.0)], 1.0), None);
    }

    /// The graph engine's Q4_K costs about half its batch-1 energy per token at batch 4 but a tenth
    /// at batch 16: the two-parameter fit smooths that over by a third; the curve must not.
    #[test]
    fn graph_q4k_curve_keeps_the_measured_batch_four_step() {
        let ds = Dataset::embedded();
        let curves = engine_batch_curves(ds);
        let curve = |p: Precision| {
            curves
                .iter()
                .find(|c| c.engine == "candle-graph" && c.precision == p)
                .unwrap_or_else(|| panic!("graph {p} sweep"))
        };
        let (q4k, f16) = (curve(Precision::Q4K), curve(Precision::Fp16));
        // By hand from the anchors: each swept model's batch-b row over its batch-1 row, then the
        // geometric mean over the models.
        let energy = |model: &str, p: Precision, b: u32| {
            ds.anchors
                .iter()
                .find(|a| {
                    a.model == model
                        && a.precision == p
                        && a.batch == b
                        && a.session == "h200-candle-graph-2026-12"
                })
                .and_then(|a| a.energy_mj)
                .unwrap_or_else(|| panic!("{model} {p} b{b}"))
        };
        for (c, p) in [(q4k, Precision::Q4K), (f16, Precision::Fp16)] {
            for b in [4, 16, 64] {
                let logs: Vec<f64> = ["Qwen2-1.5B [candle-graph]", "Qwen2-7B [candle-graph]"]
                    .iter()
                    .map(|m| (energy(m, p, b) / energy(m, p, 1)).ln())
                    .collect();
                let want = (logs.iter().sum::<f64>() / logs.len() as f64).exp();
                assert!(
                    (c.factor(b) - want).abs() < 1e-12,
                    "{p} b{b}: {} vs {want}",
                    c.factor(b)
                );
            }
        }
        assert!(q4k.factor(4) > 0.45, "Q4_K b4 {}", q4k.factor(4));
        assert!(q4k.factor(4) > batch_ratio(q4k.c, q4k.k, 4.0) * 1.3);
        assert!(q4k.factor(8) < q4k.factor(4) && q4k.factor(8) > q4k.factor(16));
        // Batching amortizes F16 more than Q4_K on this engine too.
        assert!(f16.factor(64) < q4k.factor(64));
    }
}
