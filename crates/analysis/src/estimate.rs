//! Point estimate for a user's model: ΔE% vs FP16 with a 95 % interval, basis and confidence, and
//! absolute energy from the FP16 baseline (upstream mechanism, DESIGN.md §3).

use crate::class::{borrow_order, ClassId};
use crate::curves::{default_engine, find_class, find_class_on, s_cap, CurveClass};
use crate::dataset::Dataset;
use crate::fit::SIGMA_FLOOR;
use report::{Arch, Basis, Precision};
use serde::Serialize;

/// Extra σ (points) when a class is borrowed from another architecture.
pub const BORROWED_SIGMA: f64 = 10.0;

/// What to estimate: a model size and precision on an architecture, at a batch and context.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EstimateInput {
    /// Architecture class of the card.
    pub arch: Arch,
    /// Model size, B parameters.
    pub params_b: f64,
    /// Precision to estimate.
    pub precision: Precision,
    /// Batch size.
    pub batch: u32,
    /// Context length, tokens.
    pub context: u32,
    /// The engine (stack) to estimate for, as [`crate::curve_engine`] names it (`candle-graph`, …);
    /// `None`: the preferred one ([`find_class`] for a quantized precision, [`default_engine`]
    /// for FP16). An asked engine is never swapped for another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
}

impl EstimateInput {
    /// [`estimate`] against the embedded measurements and the default curve classes: what the
    /// CLI, the meter's no-GPU fallback, the Python module and the page's report download ask.
    pub fn estimate_embedded(&self) -> Estimate {
        estimate(Dataset::embedded(), crate::curves::default_classes(), self)
    }
}

/// How sure an estimate is, from its interval width, the anchors' n and borrowing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    /// 95 % interval narrower than 12 points.
    High,
    /// Narrower than 22 points, or resting on n = 1 anchors.
    Medium,
    /// Wider, or borrowed from another architecture.
    Low,
}

impl Confidence {
    /// `high`, `medium`, `low`.
    pub fn as_str(self) -> &'static str {
        match self {
            Confidence::High => "high",
            Confidence::Medium => "medium",
            Confidence::Low => "low",
        }
    }
}

/// An estimate of ΔE vs FP16 for one model, with its interval, basis and reasons.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    /// What was asked.
    pub input: EstimateInput,
    /// Interpolated, extrapolated or unavailable — never measured.
    pub basis: Basis,
    /// ΔE% vs FP16 after the batch/context factor; `None` when unavailable.
    pub delta_pct: Option<f64>,
    /// Low end of the 95 % interval, %.
    pub ci_low: Option<f64>,
    /// High end of the 95 % interval, %.
    pub ci_high: Option<f64>,
    /// σ of the estimate, points.
    pub sigma: Option<f64>,
    /// Confidence label.
    pub confidence: Confidence,
    /// The class used, e.g. `ada NF4`.
    pub class: Option<ClassId>,
    /// The engine the estimate is for (`transformers`, `candle`, `candle-graph`, …): its curve's,
    /// and its FP16 baseline's too — an estimate is one stack's, never a mix. For FP16, and for an
    /// estimate without a curve, the engine of the FP16 baseline.
    pub curve_engine: Option<String>,
    /// The architecture whose curve was borrowed, when this one has none.
    pub borrowed_from: Option<Arch>,
    /// Anchors in the class and how many stand exactly at this size.
    pub class_points: usize,
    /// Anchors of the class at exactly this size.
    pub points_at_size: usize,
    /// Batch/context factor applied to savings (1 = none).
    pub batch_context_factor: f64,
    /// FP16 energy per token at this size, mJ.
    pub fp16_energy_mj: Option<f64>,
    /// Estimated energy per token, mJ.
    pub energy_mj: Option<f64>,
    /// Plain-language reasons for the basis and confidence.
    pub notes: Vec<String>,
}

impl Estimate {
    /// This estimate with `other`'s input (tests compare estimates asked in different words).
    #[cfg(test)]
    fn with_input_of(mut self, other: &Estimate) -> Estimate {
        self.input = other.input.clone();
        self
    }

    /// The 95 % interval.
    pub fn interval(&self) -> Option<(f64, f64)> {
        self.ci_low.zip(self.ci_high)
    }

    /// The 95 % interval contains zero: the data do not say which way this goes.
    pub fn ci_spans_zero(&self) -> bool {
        crate::verdict::spans_zero(self.interval())
    }

    /// The plain-language verdict (no direction when the interval spans zero).
    pub fn verdict(&self) -> String {
        match self.delta_pct {
            None => "no estimate: no curve covers this precision".into(),
            Some(d) => crate::verdict::verdict(
                self.input.precision.as_str(),
                d,
                self.interval(),
                "estimate's uncertainty",
            ),
        }
    }
}

/// Upstream batch/context factor: `1/(1+(b−1)/8) · 1/(1+max(0, log2(ctx/2048))·0.12)`; it only
/// shrinks savings (negative Δ), never penalties.
pub fn batch_context_factor(batch: u32, context: u32) -> f64 {
    let b = batch.max(1) as f64;
    let ctx = context.max(1) as f64;
    1.0 / (1.0 + (b - 1.0) / 8.0) / (1.0 + (ctx / 2048.0).log2().max(0.0) * 0.12)
}

fn shrink_savings(v: f64, f: f64) -> f64 {
    if v < 0.0 {
        v * f
    } else {
        v
    }
}

/// FP16 energy per token (mJ) for an architecture and engine at `params_b`, by log-log
/// interpolation between the FP16 baselines paired with default-curve anchors measured with that
/// engine ([`crate::Anchor::engine`]: engines differ by tens of percent at the same card and
/// size, so they are never pooled). One value per card·session·size, then
/// averaged per size, so a card is not counted twice as upstream's pooling did). Outside the range
/// the nearest segment's slope extends it.
///
/// Where the session has its own batch-1 FP16 row for that card and size, that row is the value:
/// in a campaign each quantized row pairs with the F16 arms of its own runs only, while the FP16
/// row pools every run (H200 1.5B: n = 7 instead of the 3 runs of whichever row came first).
pub fn fp16_baseline_mj(ds: &Dataset, arch: Arch, engine: &str, params_b: f64) -> Option<f64> {
    let mut seen: Vec<(String, String, f64, f64)> = Vec::new();
    for a in ds
        .anchors
        .iter()
        .filter(|a| a.default_curve && a.arch == arch && a.engine() == engine)
    {
        let Some(f) = ds
            .fp16_row_of(a)
            .and_then(|o| o.energy_mj)
            .or(a.fp16_energy_mj)
        else {
            continue;
        };
        if !seen
            .iter()
            .any(|(g, s, n, _)| *g == a.gpu && *s == a.session && *n == a.params_b)
        {
            seen.push((a.gpu.clone(), a.session.clone(), a.params_b, f));
        }
    }
    let mut sizes: Vec<(f64, f64)> = Vec::new();
    for (_, _, n, _) in &seen {
        if sizes.iter().any(|(m, _)| same_size(*m, *n)) {
            continue;
        }
        let vals: Vec<f64> = seen
            .iter()
            .filter(|s| same_size(s.2, *n))
            .map(|s| s.3)
            .collect();
        sizes.push((*n, vals.iter().sum::<f64>() / vals.len() as f64));
    }
    sizes.sort_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((_, v)) = sizes.iter().find(|(n, _)| same_size(*n, params_b)) {
        return Some(*v); // a measured size reads its measurement, not a neighbour's slope
    }
    loglog_interp(&sizes, params_b)
}

/// Two sizes name the same model to 0.1 %: anchors.csv rounds sizes (1.5437 B) that models.csv
/// counts exactly from the shapes.
pub fn same_size(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-3 * a.abs().max(b.abs())
}

/// Log-log linear interpolation through sorted (x, y) pairs; extrapolates with the end slopes.
pub fn loglog_interp(xy: &[(f64, f64)], x: f64) -> Option<f64> {
    if xy.is_empty() || x <= 0.0 {
        return None;
    }
    if xy.len() == 1 {
        return Some(xy[0].1);
    }
    let i = match xy.iter().position(|(xi, _)| *xi >= x) {
        Some(0) => 0,
        Some(i) => i - 1,
        None => xy.len() - 2,
    };
    let (x0, y0) = xy[i];
    let (x1, y1) = xy[i + 1];
    let t = (x.ln() - x0.ln()) / (x1.ln() - x0.ln());
    Some((y0.ln() + t * (y1.ln() - y0.ln())).exp())
}

/// The FP16 baseline of `engine` at `params_b`: on `arch`, else on the first architecture it
/// borrows from that has one (same engine), with that architecture.
pub fn fp16_baseline_on(
    ds: &Dataset,
    arch: Arch,
    engine: &str,
    params_b: f64,
) -> Option<(f64, Arch)> {
    std::iter::once(&arch)
        .chain(borrow_order(arch))
        .find_map(|a| fp16_baseline_mj(ds, *a, engine, params_b).map(|f| (f, *a)))
}

/// Estimate ΔE vs FP16 for `input` from `classes` (see the module docs for the rules). The class,
/// its FP16 baseline and `curve_engine` are one engine's: the asked one, else the class
/// [`find_class`] prefers (FP16: [`default_engine`]).
pub fn estimate(ds: &Dataset, classes: &[CurveClass], input: &EstimateInput) -> Estimate {
    let arch = input.arch;
    let mut out = Estimate {
        input: input.clone(),
        basis: Basis::Unavailable,
        delta_pct: None,
        ci_low: None,
        ci_high: None,
        sigma: None,
        confidence: Confidence::Low,
        class: None,
        curve_engine: None,
        borrowed_from: None,
        class_points: 0,
        points_at_size: 0,
        batch_context_factor: batch_context_factor(input.batch, input.context),
        fp16_energy_mj: None,
        energy_mj: None,
        notes: Vec::new(),
    };
    // The optimizer's bound too (`resolve_shape`): above it a size is a typo, not a model.
    if !(input.params_b.is_finite()
        && input.params_b > 0.0
        && input.params_b <= report::MAX_PARAMS_B)
    {
        out.notes.push(format!(
            "params_b must be a positive number of billions, at most {}",
            report::MAX_PARAMS_B
        ));
        return out;
    }
    let asked = input.engine.as_deref();
    let picked = (input.precision != Precision::Fp16)
        .then(|| pick_class(classes, arch, input.precision, asked))
        .flatten();
    out.curve_engine = match picked {
        Some((c, _)) => Some(c.engine.clone()),
        None => asked
            .map(str::to_string)
            .or_else(|| default_engine(classes, arch)),
    };
    if let Some(engine) = &out.curve_engine {
        if let Some((f, from)) = fp16_baseline_on(ds, arch, engine, input.params_b) {
            out.fp16_energy_mj = Some(f);
            if from != arch {
                out.notes.push(format!(
                    "no {engine} FP16 baseline on {arch}: {from}'s is used for the absolute energy"
                ));
            }
        }
    }
    if input.precision == Precision::Fp16 {
        if let (Some(e), None) = (asked, out.fp16_energy_mj) {
            out.notes.push(format!(
                "no FP16 baseline measured with {e} on {arch} or a sibling architecture"
            ));
            return out;
        }
        return fp16_itself(out);
    }
    match picked {
        Some((class, borrowed)) => from_class(out, class, borrowed),
        None => {
            out.notes.push(match asked {
                Some(e) => format!(
                    "no {} curve measured with {e} on {arch} or a sibling architecture \
                     (an estimate never switches engine)",
                    input.precision
                ),
                None => format!(
                    "no published curve for {} on {arch} or a sibling architecture",
                    input.precision
                ),
            });
            out
        }
    }
}

/// High / medium / low by the interval's `width`; capped at medium when the estimate rests on
/// n = 1 anchors only (those at size `n` when `at_size`, else the whole class), low when borrowed.
fn confidence_of(
    width: f64,
    class: &CurveClass,
    n: f64,
    at_size: bool,
    borrowed: Option<Arch>,
    notes: &mut Vec<String>,
) -> Confidence {
    let mut confidence = if width < 12.0 {
        Confidence::High
    } else if width < 22.0 {
        Confidence::Medium
    } else {
        Confidence::Low
    };
    let single = class
        .points
        .iter()
        .filter(|p| !at_size || same_size(p.point.n, n))
        .all(|p| p.n.unwrap_or(1) <= 1);
    if single && confidence == Confidence::High {
        confidence = Confidence::Medium;
        notes.push("rests on single (n = 1) measurements: confidence capped at medium".into());
    }
    if borrowed.is_some() {
        confidence = Confidence::Low;
    }
    confidence
}

/// FP16 against itself: ΔE = 0 by definition.
fn fp16_itself(mut out: Estimate) -> Estimate {
    out.basis = Basis::Interpolated;
    out.delta_pct = Some(0.0);
    out.ci_low = Some(0.0);
    out.ci_high = Some(0.0);
    out.sigma = Some(0.0);
    out.energy_mj = out.fp16_energy_mj;
    out.confidence = Confidence::Medium;
    out.notes
        .push("FP16 is the baseline: ΔE = 0 by definition".into());
    out
}

/// The class of `arch` and `precision` (of `engine` when given, else the preferred one), else the
/// first one a sibling architecture lends (with the lender) — of the same engine when given.
fn pick_class<'c>(
    classes: &'c [CurveClass],
    arch: Arch,
    precision: Precision,
    engine: Option<&str>,
) -> Option<(&'c CurveClass, Option<Arch>)> {
    let find = |a: Arch| match engine {
        Some(e) => find_class_on(classes, a, precision, e),
        None => find_class(classes, a, precision),
    };
    match find(arch) {
        Some(c) => Some((c, None)),
        None => borrow_order(arch)
            .iter()
            .find_map(|b| find(*b))
            .map(|c| (c, Some(c.arch))),
    }
}

/// The estimate read off `class` (its own, or `borrowed` from that architecture): the anchor
/// mean at a measured size, else the curve; the interval, basis, confidence and the reasons.
fn from_class(mut out: Estimate, class: &CurveClass, borrowed: Option<Arch>) -> Estimate {
    let input = out.input.clone();
    let (arch, factor, fp16) = (input.arch, out.batch_context_factor, out.fp16_energy_mj);
    let mut notes = std::mem::take(&mut out.notes);
    let fit = &class.fit;
    let cap = s_cap(input.precision);
    let n = input.params_b;
    let base = fit.resid_rms.max(SIGMA_FLOOR);
    let at_size: Vec<f64> = class
        .points
        .iter()
        .filter(|p| same_size(p.point.n, n))
        .map(|p| p.point.delta)
        .collect();
    let dd = fit.log_distance_outside(n);
    let borrowed_sigma = if borrowed.is_some() {
        BORROWED_SIGMA
    } else {
        0.0
    };
    let (raw, sigma) = if !at_size.is_empty() && borrowed.is_none() {
        let mean = at_size.iter().sum::<f64>() / at_size.len() as f64;
        let spread = at_size.iter().copied().fold(f64::NEG_INFINITY, f64::max)
            - at_size.iter().copied().fold(f64::INFINITY, f64::min);
        notes.push(format!(
            "{} measured anchor(s) at {n} B: their mean is used",
            at_size.len()
        ));
        // Upstream took max(base/2, spread/2): an estimate read off one anchor was then twice as
        // sure as the curve a hair away from it. σ here is continuous with the curve's.
        (mean, base.max(spread / 2.0))
    } else {
        let s = (base * base + ((base + 4.0) * dd * 1.2).powi(2) + borrowed_sigma.powi(2)).sqrt();
        (fit.predict(n).max(-cap), s)
    };
    let lo = (raw - 1.96 * sigma).max(-cap);
    let hi = raw + 1.96 * sigma;
    let (delta, lo, hi) = (
        shrink_savings(raw, factor),
        shrink_savings(lo, factor),
        shrink_savings(hi, factor),
    );
    if factor < 1.0 && raw < 0.0 {
        notes.push(format!(
            "batch {} / context {} shrink the savings by ×{factor:.2} (upstream factor, modelled)",
            input.batch, input.context
        ));
    }

    let basis = if borrowed.is_some() || dd > 0.0 {
        Basis::Extrapolated
    } else {
        Basis::Interpolated
    };
    if dd > 0.0 {
        notes.push(format!(
            "{n} B is outside the class's measured range {}–{} B: extrapolated",
            fit.n_min, fit.n_max
        ));
    }
    if let Some(b) = &borrowed {
        notes.push(format!(
            "no {} data on {arch}: the {b} curve is borrowed (+{BORROWED_SIGMA} points σ)",
            input.precision
        ));
    }
    let confidence = confidence_of(hi - lo, class, n, !at_size.is_empty(), borrowed, &mut notes);

    out.basis = basis;
    out.delta_pct = Some(delta);
    out.ci_low = Some(lo);
    out.ci_high = Some(hi);
    out.sigma = Some(sigma);
    out.confidence = confidence;
    out.class = Some(class.id());
    out.curve_engine = Some(class.engine.clone());
    out.borrowed_from = borrowed;
    out.class_points = class.points.len();
    out.points_at_size = at_size.len();
    out.energy_mj = fp16.map(|f| f * (1.0 + delta / 100.0));
    out.notes = notes;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::curves::default_classes;

    #[test]
    fn an_estimate_names_the_engine_of_its_curve() {
        assert_eq!(
            est("ada", 7.0, "NF4").curve_engine.as_deref(),
            Some("transformers")
        );
        // Hopper has three engines' curves: without one asked, the preferred (candle-graph).
        assert_eq!(
            est("hopper", 7.0, "Q4_K").curve_engine.as_deref(),
            Some("candle-graph")
        );
        for e in ["candle-graph", "candle", "llama.cpp"] {
            let got = est_on("hopper", 7.0, "Q4_K", Some(e));
            assert_eq!(got.curve_engine.as_deref(), Some(e));
            assert!(got.delta_pct.is_some(), "{e}");
        }
    }

    fn est(arch: &str, n: f64, p: &str) -> Estimate {
        est_on(arch, n, p, None)
    }

    fn est_on(arch: &str, n: f64, p: &str, engine: Option<&str>) -> Estimate {
        estimate(
            Dataset::embedded(),
            default_classes(),
            &EstimateInput {
                arch: arch.parse().unwrap(),
                params_b: n,
                precision: p.parse().unwrap(),
                batch: 1,
                context: 2048,
                engine: engine.map(str::to_string),
            },
        )
    }

    #[test]
    fn verdicts_do_not_claim_a_direction_the_interval_cannot_support() {
        // Ada NF4 at 0.5 B: the whole interval is a penalty.
        let small = est("ada", 0.5, "NF4");
        assert!(
            !small.ci_spans_zero(),
            "{:?}",
            (small.ci_low, small.ci_high)
        );
        assert!(small.verdict().contains("costs"), "{}", small.verdict());
        // Near the crossover (3.73 B) the interval straddles zero: no direction is claimed.
        let at = est("ada", 3.0, "NF4");
        assert!(at.ci_spans_zero(), "{:?}", (at.ci_low, at.ci_high));
        let v = at.verdict();
        assert!(
            v.contains("no clear difference") && v.contains("spans zero"),
            "{v}"
        );
        // 7 B: the whole interval is a saving.
        let big = est("ada", 7.0, "NF4");
        assert!(big.verdict().contains("saves"), "{}", big.verdict());
    }

    #[test]
    fn factor_matches_worked_numbers() {
        assert_eq!(batch_context_factor(1, 2048), 1.0);
        assert!((batch_context_factor(9, 2048) - 0.5).abs() < 1e-12);
        // ctx 8192: log2(4) = 2 → 1/(1.24)
        assert!((batch_context_factor(1, 8192) - 1.0 / 1.24).abs() < 1e-12);
        assert_eq!(batch_context_factor(1, 512), 1.0);
    }

    #[test]
    fn loglog_interp_is_exact_on_power_laws() {
        let xy = [(1.0, 100.0), (4.0, 400.0), (16.0, 1600.0)];
        assert!((loglog_interp(&xy, 2.0).unwrap() - 200.0).abs() < 1e-9);
        assert!((loglog_interp(&xy, 64.0).unwrap() - 6400.0).abs() < 1e-6);
        assert!((loglog_interp(&xy, 0.5).unwrap() - 50.0).abs() < 1e-9);
    }

    #[test]
    fn ada_nf4_inside_the_range_is_interpolated() {
        let e = est("ada", 2.0, "NF4");
        assert_eq!(e.basis, Basis::Interpolated);
        let c = find_class(default_classes(), Arch::Ada, Precision::Nf4).unwrap();
        let want = c.fit.predict(2.0);
        assert!((e.delta_pct.unwrap() - want).abs() < 1e-9);
        // σ = max(resid, 2) inside the range: 11.48 → CI half-width 1.96·11.48
        let half = (e.ci_high.unwrap() - e.ci_low.unwrap()) / 2.0;
        assert!((half - 1.96 * c.fit.resid_rms).abs() < 1e-6, "{half}");
        assert_eq!(e.confidence, Confidence::Low); // width ≈ 45 points
        assert!(e.energy_mj.unwrap() > e.fp16_energy_mj.unwrap()); // NF4 costs at 2 B on Ada
    }

    #[test]
    fn at_an_anchor_size_the_anchor_mean_is_used() {
        let e = est("turing", 3.0, "NF4");
        assert_eq!(e.points_at_size, 1);
        let ds = Dataset::embedded();
        let anchor = ds
            .anchors
            .iter()
            .find(|a| a.default_curve && a.arch == Arch::Turing && a.params_b == 3.0)
            .unwrap();
        assert!((e.delta_pct.unwrap() - anchor.delta_pct().unwrap()).abs() < 1e-9);
    }

    #[test]
    fn outside_the_range_is_extrapolated_and_wider() {
        let inside = est("ada", 3.0, "NF4");
        let far = est("ada", 70.0, "NF4");
        assert_eq!(far.basis, Basis::Extrapolated);
        assert!(far.sigma.unwrap() > inside.sigma.unwrap());
        // Savings never exceed S_cap.
        assert!(far.ci_low.unwrap() >= -75.0);
    }

    #[test]
    fn hopper_borrows_ampere_with_low_confidence() {
        let e = est("hopper", 7.0, "NF4");
        assert_eq!(e.borrowed_from, Some(Arch::Ampere));
        assert_eq!(e.basis, Basis::Extrapolated);
        assert_eq!(e.confidence, Confidence::Low);
    }

    #[test]
    fn unknown_precision_is_unavailable_not_zero() {
        // No curve for Q6_K on Ada or a sibling (the typed input cannot name an unknown format).
        let e = est("ada", 7.0, "Q6_K");
        assert_eq!(e.basis, Basis::Unavailable);
        assert_eq!(e.delta_pct, None);
        assert_eq!(e.energy_mj, None);
        assert!(e.verdict().contains("no estimate"));
    }

    #[test]
    fn a_size_past_any_model_gets_no_estimate_and_says_why() {
        let i = EstimateInput {
            arch: Arch::Hopper,
            params_b: 1e12,
            precision: Precision::Q4_0,
            batch: 1,
            context: 2048,
            engine: None,
        };
        let e = estimate(Dataset::embedded(), default_classes(), &i);
        assert_eq!(e.delta_pct, None);
        assert!(
            e.notes.iter().any(|n| n.contains("at most 100000")),
            "{:?}",
            e.notes
        );
    }

    #[test]
    fn batch_shrinks_savings_only() {
        let mut i = EstimateInput {
            arch: Arch::Turing,
            params_b: 7.0,
            precision: Precision::Nf4,
            batch: 1,
            context: 2048,
            engine: None,
        };
        let b1 = estimate(Dataset::embedded(), default_classes(), &i);
        i.batch = 9;
        let b9 = estimate(Dataset::embedded(), default_classes(), &i);
        assert!(b1.delta_pct.unwrap() < 0.0);
        assert!((b9.delta_pct.unwrap() - b1.delta_pct.unwrap() * 0.5).abs() < 1e-9);
    }

    fn row<'a>(ds: &'a Dataset, gpu: &str, model: &str, p: &str) -> &'a crate::dataset::Anchor {
        ds.anchors
            .iter()
            .find(|a| a.gpu == gpu && a.model == model && a.precision.as_str() == p && a.batch == 1)
            .unwrap_or_else(|| panic!("{gpu} {model} {p}"))
    }

    #[test]
    fn a_measured_size_takes_its_sessions_pooled_fp16_row() {
        let ds = Dataset::embedded();
        let fp16 = row(ds, "H200", "Qwen2-1.5B", "FP16");
        let bf16 = row(ds, "H200", "Qwen2-1.5B", "BF16");
        // The BF16 row pairs with the F16 arms of its own 3 runs; the FP16 row pools all 7.
        assert!(fp16.n.unwrap_or(0) > bf16.n.unwrap_or(0));
        assert_ne!(bf16.fp16_energy_mj, fp16.energy_mj);
        let got = fp16_baseline_mj(ds, Arch::Hopper, "candle", fp16.params_b).unwrap();
        assert!((got - fp16.energy_mj.unwrap()).abs() < 1e-9, "{got}");
    }

    #[test]
    fn a_size_counted_from_the_shapes_reads_the_rounded_anchor() {
        let ds = Dataset::embedded();
        let fp16 = row(ds, "H200", "Qwen2-1.5B", "FP16");
        // models.csv counts 1.54371… B; anchors.csv says 1.5437.
        let counted = fp16.params_b * (1.0 + 2e-5);
        assert_eq!(
            fp16_baseline_mj(ds, Arch::Hopper, "candle", counted),
            fp16.energy_mj
        );
        assert!(same_size(fp16.params_b, counted));
        assert!(
            !same_size(1.5, 1.5437),
            "Qwen2-1.5B is not a 1.5 B model to 0.1 %"
        );
    }

    #[test]
    fn an_estimate_at_a_counted_size_uses_the_points_measured_there() {
        let ds = Dataset::embedded();
        let at = |n: f64| est("hopper", n, "Q4_K");
        let anchor = row(ds, "H200", "Qwen2-1.5B", "Q4_K").params_b;
        let (exact, counted) = (at(anchor), at(anchor * (1.0 + 2e-5)));
        assert_eq!(exact.points_at_size, 1);
        assert_eq!(counted.points_at_size, exact.points_at_size);
        assert_eq!(counted.ci_low, exact.ci_low);
        assert_eq!(counted.ci_high, exact.ci_high);
        assert_eq!(
            at(1.5).points_at_size,
            0,
            "1.5 B is not the 1.5437 B anchor"
        );
    }

    #[test]
    fn an_estimate_at_a_measured_size_is_no_surer_than_the_curve_beside_it() {
        // H200 Qwen2-7B BF16, eager candle: −4.2 % measured there. Read off that anchor, the
        // estimate must not be surer than the fitted curve 1 % away — whose interval spans zero.
        // The same holds on the graph engine's own BF16 curve.
        let ds = Dataset::embedded();
        let bf16 = row(ds, "H200", "Qwen2-7B", "BF16");
        for engine in ["candle", "candle-graph"] {
            let at = |n: f64| est_on("hopper", n, "BF16", Some(engine));
            let (on, beside) = (at(bf16.params_b), at(bf16.params_b * 0.99));
            assert_eq!(
                (on.points_at_size, beside.points_at_size),
                (1, 0),
                "{engine}"
            );
            let hw = |e: &Estimate| e.interval().map(|(lo, hi)| (hi - lo) / 2.0).unwrap();
            assert!(
                hw(&on) >= hw(&beside) * 0.999,
                "{engine}: ±{} vs ±{}",
                hw(&on),
                hw(&beside)
            );
            if engine == "candle" {
                assert!(on.ci_spans_zero() && beside.ci_spans_zero());
            }
        }
    }

    #[test]
    fn between_measured_sizes_it_interpolates_in_log_log() {
        let ds = Dataset::embedded();
        let lo = row(ds, "H200", "Qwen2.5-3B", "FP16");
        let hi = row(ds, "H200", "Qwen2-7B", "FP16");
        let n = (lo.params_b * hi.params_b).sqrt(); // the log-midpoint
        let want = (lo.energy_mj.unwrap() * hi.energy_mj.unwrap()).sqrt();
        let got = fp16_baseline_mj(ds, Arch::Hopper, "candle", n).unwrap();
        assert!((got - want).abs() / want < 1e-9, "{got} vs {want}");
    }

    /// The product rule: with three engines on the H200 (eager candle, candle-graph,
    /// llama.cpp), an estimate is one engine's — its class, its FP16 baseline, its name — never a mix.
    mod two_engines {
        use super::*;
        use crate::curves::{arch_engines, find_class_on, fit_classes};
        use crate::test_data::{eager_only, row, with_graph_engine};

        fn on(ds: &Dataset, n: f64, p: Precision, engine: Option<&str>) -> Estimate {
            estimate(
                ds,
                &fit_classes(ds, &[]),
                &EstimateInput {
                    arch: Arch::Hopper,
                    params_b: n,
                    precision: p,
                    batch: 1,
                    context: 2048,
                    engine: engine.map(str::to_string),
                },
            )
        }

        fn close(got: Option<f64>, want: f64) -> bool {
            got.is_some_and(|g| (g - want).abs() <= 1e-9 * want.abs().max(1.0))
        }

        const GRAPH_7B: &str = "Qwen2-7B [candle-graph]";

        #[test]
        fn an_asked_engine_uses_only_its_rows_and_its_own_fp16_baseline() {
            let ds = Dataset::embedded();
            let fp16 = row(ds, "candle-graph", GRAPH_7B, Precision::Fp16, 1);
            let q4k = row(ds, "candle-graph", GRAPH_7B, Precision::Q4K, 1);
            let e = on(ds, q4k.params_b, Precision::Q4K, Some("candle-graph"));
            assert_eq!(e.curve_engine.as_deref(), Some("candle-graph"));
            assert_eq!((e.points_at_size, e.borrowed_from), (1, None));
            // By hand from the graph rows: ΔE = (E − F)/F of its Q4_K row, the baseline its FP16 row.
            let (f, eq) = (fp16.energy_mj.unwrap(), q4k.energy_mj.unwrap());
            let delta = (eq - q4k.fp16_energy_mj.unwrap()) / q4k.fp16_energy_mj.unwrap() * 100.0;
            assert!(close(e.fp16_energy_mj, f), "{:?} vs {f}", e.fp16_energy_mj);
            assert!(close(e.delta_pct, delta), "{:?} vs {delta}", e.delta_pct);
            assert!(close(e.energy_mj, f * (1.0 + delta / 100.0)));
            let eager = row(ds, "candle", "Qwen2-7B", Precision::Fp16, 1);
            assert!(
                (f - eager.energy_mj.unwrap()).abs() > 100.0,
                "the engines differ"
            );
            // The class behind it holds graph points only.
            let c = find_class_on(
                &fit_classes(ds, &[]),
                Arch::Hopper,
                Precision::Q4K,
                "candle-graph",
            )
            .unwrap()
            .clone();
            assert_eq!(e.class_points, c.points.len());
            assert_eq!(c.stacks, std::slice::from_ref(&q4k.stack));
            // Between sizes the baseline interpolates the graph's own FP16 rows only.
            let lo = row(
                ds,
                "candle-graph",
                "Qwen2.5-3B [candle-graph]",
                Precision::Fp16,
                1,
            );
            let n = (lo.params_b * fp16.params_b).sqrt();
            let want = (lo.energy_mj.unwrap() * f).sqrt();
            let mid = on(ds, n, Precision::Q4K, Some("candle-graph"));
            assert!(
                close(mid.fp16_energy_mj, want),
                "{:?} vs {want}",
                mid.fp16_energy_mj
            );
            assert!(close(
                fp16_baseline_mj(ds, Arch::Hopper, "candle-graph", n),
                want
            ));
            // llama.cpp at its own measured size: its own FP16 row.
            let lf = row(
                ds,
                "llama.cpp",
                "Qwen2-1.5B [llama.cpp]",
                Precision::Fp16,
                1,
            );
            let l = on(ds, lf.params_b, Precision::Q4K, Some("llama.cpp"));
            assert!(close(l.fp16_energy_mj, lf.energy_mj.unwrap()));
        }

        #[test]
        fn without_an_engine_the_preferred_one_is_used_with_its_own_baseline() {
            let ds = Dataset::embedded();
            let classes = fit_classes(ds, &[]);
            assert_eq!(
                arch_engines(&classes, Arch::Hopper),
                ["candle-graph", "candle", "llama.cpp"]
            );
            let eager_ds = eager_only();
            assert_eq!(
                arch_engines(&fit_classes(&eager_ds, &[]), Arch::Hopper),
                ["candle"]
            );
            assert_eq!(arch_engines(default_classes(), Arch::Ada), ["transformers"]);
            let graph_f = row(ds, "candle-graph", GRAPH_7B, Precision::Fp16, 1)
                .energy_mj
                .unwrap();
            let eager_f = row(ds, "candle", "Qwen2-7B", Precision::Fp16, 1)
                .energy_mj
                .unwrap();
            let n = row(ds, "candle", "Qwen2-7B", Precision::Fp16, 1).params_b;
            // Q4_K: candle-graph is preferred, and so is its baseline — not the eager one, not the
            // mean of the two that pooling every H200 session would give.
            let q = on(ds, n, Precision::Q4K, None);
            assert_eq!(q.curve_engine.as_deref(), Some("candle-graph"));
            assert!(close(q.fp16_energy_mj, graph_f));
            assert!(!close(q.fp16_energy_mj, (graph_f + eager_f) / 2.0));
            assert_eq!(
                q,
                on(ds, n, Precision::Q4K, Some("candle-graph")).with_input_of(&q)
            );
            // FP16 itself: the preferred engine's baseline, named.
            let f = on(ds, n, Precision::Fp16, None);
            assert_eq!(f.curve_engine.as_deref(), Some("candle-graph"));
            assert!(close(f.energy_mj, graph_f) && f.delta_pct == Some(0.0));
            let fe = on(ds, n, Precision::Fp16, Some("candle"));
            assert!(close(fe.energy_mj, eager_f));
            // The eager engine asked for: exactly the estimate of the eager-only dataset.
            let eager = on(ds, n, Precision::Q4K, Some("candle"));
            let before = on(&eager_ds, n, Precision::Q4K, None);
            assert_eq!(eager, before.with_input_of(&eager));
            assert!(close(eager.fp16_energy_mj, eager_f));
            // Every real engine measured every GGUF format, so where the preferred engine lacks one
            // is shown on the fixture whose graph engine has no BF16: the next engine's curve, with
            // that engine's baseline.
            let fx = with_graph_engine();
            let b = on(&fx, n, Precision::Bf16, None);
            assert_eq!(b.curve_engine.as_deref(), Some("candle"));
            assert!(close(b.fp16_energy_mj, eager_f));
        }

        #[test]
        fn an_engine_without_the_precision_is_unavailable_and_says_which() {
            // llama.cpp measured no BF16 on the H200; both candle engines did.
            let ds = Dataset::embedded();
            let n = row(
                ds,
                "llama.cpp",
                "Qwen2-1.5B [llama.cpp]",
                Precision::Fp16,
                1,
            )
            .params_b;
            let e = on(ds, n, Precision::Bf16, Some("llama.cpp"));
            assert_eq!(e.basis, Basis::Unavailable);
            assert_eq!((e.delta_pct, e.energy_mj, e.class), (None, None, None));
            assert_eq!(e.borrowed_from, None, "no other engine's BF16 stands in");
            assert_eq!(e.curve_engine.as_deref(), Some("llama.cpp"));
            assert!(
                e.notes
                    .iter()
                    .any(|n| n.contains("BF16") && n.contains("llama.cpp")),
                "{:?}",
                e.notes
            );
            assert!(on(ds, n, Precision::Bf16, Some("candle-graph"))
                .delta_pct
                .is_some());
            // An engine with no rows at all: not even FP16.
            let v = on(ds, 7.0, Precision::Fp16, Some("vllm"));
            assert_eq!((v.basis, v.energy_mj), (Basis::Unavailable, None));
            assert!(v.notes.iter().any(|n| n.contains("vllm")), "{:?}", v.notes);
            // Nor does an asked engine borrow another engine's class from a sibling architecture.
            let nf4 = on(ds, 7.0, Precision::Nf4, Some("candle"));
            assert_eq!((nf4.basis, nf4.borrowed_from), (Basis::Unavailable, None));
        }
    }
}
