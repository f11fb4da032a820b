//! Where a report's ΔE sits against the published crossover curve of its class: the one
//! computation behind the page's overlay (Run it yourself) and `quantenergy compare`.
//!
//! A report becomes a [`Subject`] (its overlay point plus the stack engine and batch size the
//! point format has no room for); [`place`] finds its curve and compares. The curve of a subject
//! is the fitted class of its architecture and precision ([`crate::curves`]), provided that
//!
//! * the report is single-stream decode (batch 1, or batch unknown, as in an overlay link): every
//!   default curve is fitted on batch-1 anchors only;
//! * when the report names `stack.engine`, the class's anchors were measured with that engine
//!   ([`Anchor::engines`](crate::Anchor::engines), read out of an anchor's `stack` text once:
//!   `candle 0.11.1 …` is `candle`, `transformers + bitsandbytes (…)` is `transformers` and
//!   `bitsandbytes`). Engines are never pooled: where several engines have a curve for the class
//!   (Hopper: candle-graph, candle, llama.cpp) a report is placed on its own engine's, and a
//!   `llama.cpp` BF16 report has no curve (only the candle engines measured BF16). A report that
//!   names no engine (upstream ecocompute-energy reports, overlay links) is compared with the
//!   curve [`find_class`](crate::curves::find_class) prefers, whatever its stack.
//!
//! The comparison is made only for a `measured` report with a size and a ΔE: the curve's
//! prediction at that size, the 95 % band ([`Fit::band`](crate::fit::Fit::band)), inside or
//! outside it, and the residual in units of the σ the band is built from
//! ([`Fit::band_sigma`](crate::fit::Fit::band_sigma)). An estimate (interpolated, extrapolated,
//! unavailable) is never compared: it was read off a curve in the first place.
//!
//! Note what the band is: the uncertainty of the fitted *curve* (plus the extrapolation term
//! outside the anchors' range), not the spread of single runs around it. A single run (n = 1)
//! can sit outside it when the class's anchors scatter run to run; that is what the σ says.

use crate::class::ClassId;
use crate::curves::{find_class, find_class_on, preference, CurveClass};
// How a report's `stack.engine` is keyed is part of this module's API (`quantenergy compare`).
pub use crate::engine::engine_key;
use crate::verdict::signed_pct;
use report::share::SharePoint;
use report::{Arch, Basis, Precision, Report};
use serde::{Deserialize, Serialize, Serializer};
use std::fmt;

/// What [`place`] needs of a report: its overlay point (the same numbers the page draws and an
/// overlay link carries) plus the two facts a link cannot carry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Subject {
    /// Model name.
    pub model: String,
    /// Card name as the report writes it.
    pub gpu: String,
    /// Architecture as the report names it, or as derived from the GPU name (lower case).
    pub arch: String,
    /// Precision as the report writes it.
    pub precision: String,
    /// Model size, B parameters (`workload.params_b`, else guessed from the model name).
    pub params_b: Option<f64>,
    /// ΔE vs FP16, %, recomputed from the report's two energies where it has both.
    pub delta_pct: Option<f64>,
    /// `measured`, `interpolated`, `extrapolated` or `unavailable`.
    pub basis: String,
    /// `stack.engine`, when the report names one.
    pub engine: Option<String>,
    /// `workload.batch_size`; `None` for an overlay link, which does not carry it.
    pub batch_size: Option<u32>,
}

impl Subject {
    /// The subject of an overlay point (a link): no engine, no batch size.
    pub fn from_share_point(p: &SharePoint) -> Subject {
        Subject {
            model: p.model.clone(),
            gpu: p.gpu.clone(),
            arch: p.arch.trim().to_ascii_lowercase(),
            precision: p.precision.trim().to_string(),
            params_b: p.params_b.filter(|x| x.is_finite() && *x > 0.0),
            delta_pct: p.vs_fp16_pct.filter(|x| x.is_finite()),
            basis: p.basis.trim().to_ascii_lowercase(),
            engine: None,
            batch_size: None,
        }
    }

    /// The subject of a report: its overlay point ([`report::share::from_report`], the numbers
    /// the page draws, rounded as a link rounds them) plus `stack.engine` and the batch size.
    pub fn from_report(r: &Report) -> Subject {
        let engine = r
            .stack
            .as_ref()
            .and_then(|s| s.engine.as_deref())
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(str::to_string);
        Subject {
            engine,
            batch_size: Some(r.workload.batch_size),
            ..Subject::from_share_point(&report::share::from_report(r))
        }
    }

    /// The architecture and precision as typed values, when both are known.
    pub fn class(&self) -> Option<ClassId> {
        let arch = self.arch.parse::<Arch>().ok()?;
        let precision = self.precision.parse::<Precision>().ok()?;
        Some(ClassId { arch, precision })
    }

    fn is_measured(&self) -> bool {
        self.basis == Basis::Measured.as_str()
    }
}

/// The engines behind a class's anchors, in first-seen order ([`CurveClass::stack_engines`]).
pub fn class_engines(class: &CurveClass) -> Vec<String> {
    class.stack_engines.clone()
}

/// Why a subject has no curve.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NoCurve {
    /// The architecture is none of the known classes (or the report names none).
    UnknownArch {
        /// As written.
        arch: String,
    },
    /// The precision is none of the schema's.
    UnknownPrecision {
        /// As written.
        precision: String,
    },
    /// An FP16 report: the baseline itself, ΔE = 0 by definition.
    Baseline,
    /// Batch > 1: the curves are single-stream decode.
    Batch {
        /// The report's batch size.
        batch_size: u32,
    },
    /// No curve has been published for this architecture and precision.
    NoClass {
        /// The class asked for.
        class: ClassId,
        /// The precisions that do have a curve on this architecture, engine by engine.
        available: Vec<EngineCurves>,
    },
    /// The class exists but was measured with other engines than the report's.
    Stack {
        /// The class of the architecture and precision.
        class: ClassId,
        /// The report's engine ([`engine_key`]).
        engine: String,
        /// One entry per published curve of the class, in [`crate::curves::ENGINE_PREFERENCE`]
        /// order: the engines behind its anchors, joined by ` + ` (`transformers + bitsandbytes`).
        curve_engines: Vec<String>,
    },
}

/// The precisions one engine has curves for on an architecture.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EngineCurves {
    /// The engine, as classes are keyed ([`crate::curve_engine`]).
    pub engine: String,
    /// Its precisions, in the schema's order.
    pub precisions: Vec<Precision>,
}

/// The curves of `arch`, engine by engine in [`crate::curves::ENGINE_PREFERENCE`] order.
pub fn engine_curves(classes: &[CurveClass], arch: Arch) -> Vec<EngineCurves> {
    crate::curves::arch_engines(classes, arch)
        .into_iter()
        .map(|engine| {
            let mut precisions: Vec<Precision> = classes
                .iter()
                .filter(|c| c.arch == arch && c.engine == engine)
                .map(|c| c.precision)
                .collect();
            precisions.sort();
            precisions.dedup();
            EngineCurves { engine, precisions }
        })
        .collect()
}

/// `BF16, Q8_0`.
fn precision_list(v: &[Precision]) -> String {
    v.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(", ")
}

impl fmt::Display for NoCurve {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoCurve::UnknownArch { arch } if arch.is_empty() => write!(
                f,
                "no curve: the report names no architecture and its GPU name gives none"
            ),
            NoCurve::UnknownArch { arch } => write!(
                f,
                "no curve: architecture {arch:?} is none of turing, ampere, ada, hopper, blackwell, volta"
            ),
            NoCurve::UnknownPrecision { precision } => {
                write!(f, "no curve: precision {precision:?} is not a known format")
            }
            NoCurve::Baseline => write!(
                f,
                "no curve: FP16 is the baseline every ΔE is measured against (ΔE = 0 by definition)"
            ),
            NoCurve::Batch { batch_size } => write!(
                f,
                "no curve at batch {batch_size}: the published curves are single-stream decode (batch 1)"
            ),
            NoCurve::NoClass { class, available } if available.is_empty() => write!(
                f,
                "no {class} curve: no {} curve has been published",
                class.arch
            ),
            // One engine: its precisions; several: each engine's, so none reads as repeated.
            NoCurve::NoClass { class, available } if available.len() == 1 => write!(
                f,
                "no {class} curve: the published {} curves are {}",
                class.arch,
                precision_list(&available[0].precisions)
            ),
            NoCurve::NoClass { class, available } => write!(
                f,
                "no {class} curve: the published {} curves are {}",
                class.arch,
                available
                    .iter()
                    .map(|e| format!("{}: {}", e.engine, precision_list(&e.precisions)))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            NoCurve::Stack {
                class,
                engine,
                curve_engines,
            } if curve_engines.len() == 1 => write!(
                f,
                "no {class} curve for stack {engine}: the published {class} curve was measured with {}",
                curve_engines[0]
            ),
            NoCurve::Stack {
                class,
                engine,
                curve_engines,
            } => write!(
                f,
                "no {class} curve for stack {engine}: the published {class} curves were measured with {}",
                curve_engines.join(", ")
            ),
        }
    }
}

/// A measured ΔE against its class's curve at its size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// The report's ΔE vs FP16, %.
    pub measured_pct: f64,
    /// The curve's ΔE at the report's size, %.
    pub predicted_pct: f64,
    /// The curve's 95 % band at that size, % (low, high).
    pub band_pct: (f64, f64),
    /// The σ the band is built from, points (the band is ±1.96 σ).
    pub sigma_pct: f64,
    /// Measured − predicted, points.
    pub residual_pct: f64,
    /// Residual ÷ σ; `None` when the band has zero width.
    pub sigmas: Option<f64>,
    /// The measured ΔE lies within the band (ends included).
    pub inside: bool,
    /// The size lies outside the class's anchor range (the band carries the extrapolation term).
    pub extrapolated: bool,
    /// The class's anchor sizes, B (smallest, largest).
    pub anchor_range_b: (f64, f64),
}

/// Compare `delta` at size `n` with `class`'s curve.
pub fn compare_with(class: &CurveClass, n: f64, delta: f64) -> Comparison {
    let fit = &class.fit;
    let predicted = fit.predict(n);
    let band = fit.band(n);
    let sigma = fit.band_sigma(n);
    let residual = delta - predicted;
    Comparison {
        measured_pct: delta,
        predicted_pct: predicted,
        band_pct: band,
        sigma_pct: sigma,
        residual_pct: residual,
        sigmas: (sigma > 0.0).then(|| residual / sigma),
        inside: band.0 <= delta && delta <= band.1,
        extrapolated: fit.log_distance_outside(n) > 0.0,
        anchor_range_b: (fit.n_min, fit.n_max),
    }
}

/// What [`place`] concluded.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Measured, and within the curve's 95 % band.
    Inside(Comparison),
    /// Measured, and outside the curve's 95 % band.
    Outside(Comparison),
    /// Not a measurement (an estimate): never compared.
    NotMeasured,
    /// No ΔE: the report has no FP16 figure.
    NoDelta,
    /// No model size: no `params_b` and none in the model name.
    NoSize,
    /// No curve to compare with ([`Placement::curve`] says why).
    NoCurve,
}

impl Outcome {
    /// `inside`, `outside`, `not_measured`, `no_delta`, `no_size`, `no_curve`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Inside(_) => "inside",
            Outcome::Outside(_) => "outside",
            Outcome::NotMeasured => "not_measured",
            Outcome::NoDelta => "no_delta",
            Outcome::NoSize => "no_size",
            Outcome::NoCurve => "no_curve",
        }
    }

    /// The comparison, for inside and outside.
    pub fn comparison(&self) -> Option<&Comparison> {
        match self {
            Outcome::Inside(c) | Outcome::Outside(c) => Some(c),
            _ => None,
        }
    }
}

/// Where a subject sits: its curve (or why it has none) and the outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    /// What was placed.
    pub subject: Subject,
    /// The class whose curve the subject belongs to (whatever its basis: the page draws an
    /// estimate on it too), or why there is none.
    pub curve: Result<ClassId, NoCurve>,
    /// The engines behind that curve's anchors (empty without a curve).
    pub curve_engines: Vec<String>,
    /// The outcome: a comparison only for a measured subject with a size, a ΔE and a curve.
    pub outcome: Outcome,
}

/// Find the curve of `subject` among `classes` (the rules of the module docs).
pub fn find_curve<'c>(
    subject: &Subject,
    classes: &'c [CurveClass],
) -> Result<&'c CurveClass, NoCurve> {
    let arch = subject
        .arch
        .parse::<Arch>()
        .map_err(|_| NoCurve::UnknownArch {
            arch: subject.arch.clone(),
        })?;
    let precision =
        subject
            .precision
            .parse::<Precision>()
            .map_err(|_| NoCurve::UnknownPrecision {
                precision: subject.precision.clone(),
            })?;
    if precision == Precision::Fp16 {
        return Err(NoCurve::Baseline);
    }
    if let Some(b) = subject.batch_size.filter(|b| *b != 1) {
        return Err(NoCurve::Batch { batch_size: b });
    }
    let class = ClassId { arch, precision };
    let Some(preferred) = find_class(classes, arch, precision) else {
        return Err(NoCurve::NoClass {
            class,
            available: engine_curves(classes, arch),
        });
    };
    let Some(engine) = subject.engine.as_deref().map(engine_key) else {
        return Ok(preferred);
    };
    let mut curves: Vec<&CurveClass> = classes
        .iter()
        .filter(|c| c.arch == arch && c.precision == precision)
        .collect();
    curves.sort_by_key(|c| preference(&c.engine));
    // The report's own engine's curve: engines are never compared across. A secondary engine of
    // a stack (`bitsandbytes` of `transformers + bitsandbytes`) finds its stack's curve.
    curves
        .iter()
        .find(|c| c.engine == engine)
        .or_else(|| curves.iter().find(|c| class_engines(c).contains(&engine)))
        .copied()
        .ok_or_else(|| NoCurve::Stack {
            class,
            engine,
            curve_engines: curves
                .iter()
                .map(|c| class_engines(c).join(" + "))
                .collect(),
        })
}

/// Place `subject` against `classes` (the page and the CLI pass [`crate::default_classes`]).
pub fn place(subject: &Subject, classes: &[CurveClass]) -> Placement {
    let found = find_curve(subject, classes);
    let curve_engines = found.as_ref().map(|c| class_engines(c)).unwrap_or_default();
    let outcome = if !subject.is_measured() {
        Outcome::NotMeasured
    } else {
        match (subject.delta_pct, subject.params_b, &found) {
            (None, _, _) => Outcome::NoDelta,
            (_, None, _) => Outcome::NoSize,
            (_, _, Err(_)) => Outcome::NoCurve,
            (Some(d), Some(n), Ok(c)) => {
                let cmp = compare_with(c, n, d);
                if cmp.inside {
                    Outcome::Inside(cmp)
                } else {
                    Outcome::Outside(cmp)
                }
            }
        }
    };
    Placement {
        subject: subject.clone(),
        curve: found.map(|c| c.id()),
        curve_engines,
        outcome,
    }
}

/// [`place`] for a report.
pub fn place_report(r: &Report, classes: &[CurveClass]) -> Placement {
    place(&Subject::from_report(r), classes)
}

impl Placement {
    /// Whether the subject can be drawn at all: it has a size and a ΔE.
    pub fn drawable(&self) -> bool {
        self.subject.params_b.is_some() && self.subject.delta_pct.is_some()
    }

    /// The class of the curve the subject was placed on, among `classes`: of its architecture and
    /// precision *and* engine (Hopper has three engines' curves of one class id).
    pub fn curve_class<'c>(&self, classes: &'c [CurveClass]) -> Option<&'c CurveClass> {
        let id = self.curve.as_ref().ok()?;
        let engine = self.curve_engines.first()?;
        find_class_on(classes, id.arch, id.precision, engine)
    }

    /// The class a measured point may join in a refit (the page's "include my points"): its own
    /// curve's class, or — when no curve has been published for its architecture and precision —
    /// a new class of its own. `None` for an estimate, a point without size or ΔE, and a point
    /// whose curve was refused for its stack or batch (engines and batch sizes are never pooled).
    pub fn joins_class(&self) -> Option<ClassId> {
        if !self.subject.is_measured() || !self.drawable() {
            return None;
        }
        match &self.curve {
            Ok(c) => Some(*c),
            Err(NoCurve::NoClass { class, .. }) => Some(*class),
            Err(_) => None,
        }
    }

    /// One line: the comparison, or why there is none (never a number for an estimate).
    pub fn summary(&self) -> String {
        let s = &self.subject;
        match &self.outcome {
            Outcome::Inside(c) | Outcome::Outside(c) => {
                let class = self
                    .curve
                    .as_ref()
                    .map(|c| c.to_string())
                    .unwrap_or_default();
                let n = s.params_b.unwrap_or(f64::NAN);
                format!(
                    "{} the {class} band: measured {} vs curve {} at {} (95 % band {} to {}{}), {}",
                    if c.inside { "inside" } else { "OUTSIDE" },
                    signed_pct(c.measured_pct, 1),
                    signed_pct(c.predicted_pct, 1),
                    size_label(n),
                    signed_pct(c.band_pct.0, 1),
                    signed_pct(c.band_pct.1, 1),
                    if c.extrapolated {
                        format!(
                            ", outside the anchors' sizes {}–{}",
                            size_label(c.anchor_range_b.0),
                            size_label(c.anchor_range_b.1)
                        )
                    } else {
                        String::new()
                    },
                    sigmas_label(c.sigmas)
                )
            }
            Outcome::NotMeasured => format!(
                "not measured (basis {}): an estimate is not compared with the curve",
                if s.basis.is_empty() { "?" } else { &s.basis }
            ),
            Outcome::NoDelta => "no ΔE: the report has no FP16 energy to compare with \
                                 (results.fp16_energy_per_token_mj), so nothing is compared"
                .into(),
            Outcome::NoSize => "no model size: workload.params_b is missing and the model name \
                                gives none, so nothing is compared"
                .into(),
            Outcome::NoCurve => match &self.curve {
                Err(why) => why.to_string(),
                Ok(_) => "no curve".into(),
            },
        }
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.summary())
    }
}

/// `1.54 B`, `7 B`, `0.49 B`.
pub fn size_label(n: f64) -> String {
    if (n - n.round()).abs() < 1e-9 {
        format!("{n:.0} B")
    } else {
        format!("{n:.2} B")
    }
}

/// `+0.4 σ`, `−3.1 σ`, or `σ = 0` for a band of zero width.
pub fn sigmas_label(sigmas: Option<f64>) -> String {
    match sigmas {
        Some(z) => {
            let s = format!("{:.1}", z.abs());
            if s == "0.0" {
                "0.0 σ".into()
            } else if z < 0.0 {
                format!("−{s} σ")
            } else {
                format!("+{s} σ")
            }
        }
        None => "σ = 0 (a band of zero width)".into(),
    }
}

/// The flat JSON shape of a placement (`quantenergy compare --json`).
#[derive(Serialize)]
struct PlacementJson<'a> {
    model: &'a str,
    gpu: &'a str,
    arch: &'a str,
    precision: &'a str,
    params_b: Option<f64>,
    batch_size: Option<u32>,
    engine: Option<&'a str>,
    basis: &'a str,
    outcome: &'static str,
    /// The class of the curve, or null.
    curve: Option<ClassId>,
    curve_engines: &'a [String],
    /// Why there is no curve, or null.
    no_curve: Option<&'a NoCurve>,
    /// Only for a measured subject (never the number of an estimate).
    measured_delta_pct: Option<f64>,
    comparison: Option<&'a Comparison>,
    summary: String,
}

impl Serialize for Placement {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let sub = &self.subject;
        PlacementJson {
            model: &sub.model,
            gpu: &sub.gpu,
            arch: &sub.arch,
            precision: &sub.precision,
            params_b: sub.params_b,
            batch_size: sub.batch_size,
            engine: sub.engine.as_deref(),
            basis: &sub.basis,
            outcome: self.outcome.as_str(),
            curve: self.curve.as_ref().ok().copied(),
            curve_engines: &self.curve_engines,
            no_curve: self.curve.as_ref().err(),
            measured_delta_pct: sub.delta_pct.filter(|_| sub.is_measured()),
            comparison: self.outcome.comparison(),
            summary: self.summary(),
        }
        .serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::curves::{default_classes, fit_classes};
    use crate::dataset::Dataset;
    use crate::engine::stack_engines;
    use crate::fit::BAND_Z;

    fn subject(arch: &str, precision: &str, n: f64, delta: f64) -> Subject {
        Subject {
            model: "test".into(),
            gpu: "GPU".into(),
            arch: arch.into(),
            precision: precision.into(),
            params_b: Some(n),
            delta_pct: Some(delta),
            basis: "measured".into(),
            engine: None,
            batch_size: Some(1),
        }
    }

    fn class(arch: Arch, p: Precision) -> &'static CurveClass {
        find_class(default_classes(), arch, p).unwrap()
    }

    #[test]
    fn stack_texts_name_their_engines() {
        assert_eq!(
            stack_engines("candle 0.11.1 GGUF/cuBLAS kernels, CUDA 13.0, synthetic weights"),
            vec!["candle"]
        );
        assert_eq!(
            stack_engines("transformers + bitsandbytes (ecocompute-mlcube container pins: bitsandbytes 0.43.3)"),
            vec!["transformers", "bitsandbytes"]
        );
        assert_eq!(
            stack_engines("llama.cpp GGUF (decode-only E(576)-E(64), NVML counter)"),
            vec!["llama.cpp"]
        );
        assert_eq!(
            stack_engines("candle-graph 0.11.1 GGUF/cuBLAS kernels, CUDA 13.0, synthetic weights"),
            vec!["candle-graph"]
        );
        assert_eq!(
            stack_engines("llama.cpp b0-unknown, server started by the meter, /v1/completions, CUDA 13.0, synthetic weights"),
            vec!["llama.cpp"]
        );
        assert_eq!(engine_key(" Candle-Graph "), "candle-graph");
        // Each Hopper Q4_K curve is one engine's (the H200 campaign's three sessions).
        for e in ["candle-graph", "candle", "llama.cpp"] {
            let c = find_class_on(default_classes(), Arch::Hopper, Precision::Q4K, e).unwrap();
            assert_eq!(class_engines(c), vec![e]);
        }
        assert_eq!(
            class_engines(class(Arch::Ada, Precision::Nf4)),
            vec!["transformers", "bitsandbytes"]
        );
    }

    fn close(got: f64, want: f64, tol: f64) -> bool {
        (got - want).abs() <= tol
    }

    /// Worked numbers on the Blackwell NF4 curve (4 anchors, RTX 5090, 1.1–7 B): A = 45.8273,
    /// S = 104.4224, N* = 6.0749, so at 1.5 B the curve reads 45.8273 − 104.4224 · 1.5/7.5749
    /// = +25.15 %; inside the anchors' range the band is the parameter uncertainty alone,
    /// σ = 2.363, band ±1.96 σ = 20.52 … 29.78 %. A report of +26.0 % is +0.85 points off:
    /// +0.36 σ, inside.
    #[test]
    fn a_report_on_its_curve_is_inside_the_band() {
        let c = class(Arch::Blackwell, Precision::Nf4);
        let pl = place(&subject("blackwell", "NF4", 1.5, 26.0), default_classes());
        let Outcome::Inside(cmp) = &pl.outcome else {
            panic!("{pl:?}")
        };
        assert_eq!(pl.curve, Ok(c.id()));
        assert!(close(cmp.predicted_pct, 25.149, 0.01), "{cmp:?}");
        assert!(close(cmp.sigma_pct, 2.363, 0.01), "{cmp:?}");
        assert!(close(cmp.band_pct.0, 20.518, 0.01), "{cmp:?}");
        assert!(close(cmp.band_pct.1, 29.780, 0.01), "{cmp:?}");
        assert!(close(cmp.residual_pct, 0.851, 0.01), "{cmp:?}");
        assert!(close(cmp.sigmas.unwrap(), 0.360, 0.005), "{cmp:?}");
        // Exactly: the band is ±1.96 σ and the σ distance is the residual over that σ.
        let (lo, hi) = cmp.band_pct;
        assert!(((hi - lo) / 2.0 - BAND_Z * cmp.sigma_pct).abs() < 1e-9);
        assert!((cmp.sigmas.unwrap() - cmp.residual_pct / cmp.sigma_pct).abs() < 1e-12);
        assert!(!cmp.extrapolated);
        assert_eq!(cmp.anchor_range_b, (1.1, 7.0));
        assert_eq!(
            pl.summary(),
            "inside the blackwell NF4 band: measured +26.0 % vs curve +25.1 % at 1.50 B \
             (95 % band +20.5 % to +29.8 %), +0.4 σ"
        );
        assert_eq!(pl.joins_class(), Some(c.id()));
    }

    /// Ada NF4 (9 anchors, RTX 4090/4090D, 0.5–7 B) at 7 B: the curve says −20.47 %, σ = 7.278,
    /// band −34.74 … −6.20 %. A report of +60 % is 80.47 points above: +11.06 σ, outside.
    #[test]
    fn a_report_far_from_its_curve_is_outside_with_its_sigma_distance() {
        let pl = place(&subject("ada", "NF4", 7.0, 60.0), default_classes());
        let Outcome::Outside(cmp) = &pl.outcome else {
            panic!("{pl:?}")
        };
        assert!(close(cmp.predicted_pct, -20.470, 0.01), "{cmp:?}");
        assert!(close(cmp.sigma_pct, 7.278, 0.01), "{cmp:?}");
        assert!(close(cmp.band_pct.0, -34.735, 0.01), "{cmp:?}");
        assert!(close(cmp.band_pct.1, -6.205, 0.01), "{cmp:?}");
        assert!(close(cmp.sigmas.unwrap(), 11.06, 0.01), "{cmp:?}");
        assert!(!cmp.inside);
        assert_eq!(
            pl.summary(),
            "OUTSIDE the ada NF4 band: measured +60.0 % vs curve −20.5 % at 7 B \
             (95 % band −34.7 % to −6.2 %), +11.1 σ"
        );
        // As far below the curve: the same distance, negative.
        let below = place(
            &subject("ada", "NF4", 7.0, 2.0 * cmp.predicted_pct - 60.0),
            default_classes(),
        );
        let z2 = below.outcome.comparison().unwrap().sigmas.unwrap();
        assert!((z2 + cmp.sigmas.unwrap()).abs() < 1e-9, "{z2}");
        // Just inside the band's edge is inside; just past it is not.
        let edge = |d: f64| place(&subject("ada", "NF4", 7.0, d), default_classes()).outcome;
        assert!(matches!(edge(cmp.band_pct.1 - 1e-6), Outcome::Inside(_)));
        assert!(matches!(edge(cmp.band_pct.1 + 1e-6), Outcome::Outside(_)));
    }

    #[test]
    fn outside_the_anchor_range_the_band_widens_and_says_so() {
        let c = class(Arch::Blackwell, Precision::Nf4);
        // 30 B, past the 7 B anchor: σ_extrap = (2.80 + 4)·ln(30/7)·1.2 = 11.88 joins the
        // curve's 2.87, σ = 12.22.
        let far = 30.0;
        let pl = place(
            &subject("blackwell", "NF4", far, c.fit.predict(far)),
            default_classes(),
        );
        let cmp = pl.outcome.comparison().unwrap();
        assert!(cmp.extrapolated);
        assert!(cmp.sigma_pct > c.fit.band_sigma(c.fit.n_max));
        assert!(close(cmp.sigma_pct, 12.22, 0.01), "{cmp:?}");
        assert!(
            pl.summary()
                .contains("outside the anchors' sizes 1.10 B–7 B"),
            "{}",
            pl.summary()
        );
    }

    #[test]
    fn an_arch_without_a_curve_says_which_curves_exist() {
        let pl = place(&subject("volta", "NF4", 7.0, -10.0), default_classes());
        assert_eq!(pl.outcome, Outcome::NoCurve);
        assert_eq!(
            pl.summary(),
            "no volta NF4 curve: no volta curve has been published"
        );
        // Several engines: each engine's precisions once (llama.cpp measured no BF16).
        let pl = place(&subject("hopper", "NF4", 7.0, -10.0), default_classes());
        assert_eq!(
            pl.summary(),
            "no hopper NF4 curve: the published hopper curves are candle-graph: BF16, Q8_0, Q4_K, Q4_0; \
             candle: BF16, Q8_0, Q4_K, Q4_0; llama.cpp: Q8_0, Q4_K, Q4_0"
        );
        let Err(NoCurve::NoClass { available, .. }) = &pl.curve else {
            panic!("{pl:?}")
        };
        for e in available {
            let mut once = e.precisions.clone();
            once.dedup();
            assert_eq!(once, e.precisions, "{} repeats a precision", e.engine);
        }
        // One engine: its precisions, unlabelled.
        assert_eq!(
            place(&subject("ada", "Q4_K", 7.0, -10.0), default_classes()).summary(),
            "no ada Q4_K curve: the published ada curves are NF4, INT8"
        );
        // A measured point of a class without a curve opens its own in a refit.
        assert_eq!(
            pl.joins_class(),
            Some(ClassId {
                arch: Arch::Hopper,
                precision: Precision::Nf4
            })
        );
        let pl = place(&subject("kepler", "NF4", 7.0, -10.0), default_classes());
        assert!(
            pl.summary().contains("\"kepler\" is none of"),
            "{}",
            pl.summary()
        );
        let pl = place(&subject("ada", "FP16", 7.0, 0.0), default_classes());
        assert_eq!(pl.curve, Err(NoCurve::Baseline));
    }

    /// Engines are never compared across: where several engines have a curve, a report is placed
    /// on its own engine's.
    #[test]
    fn a_report_is_placed_on_its_own_engines_curve() {
        let classes = default_classes();
        let subject = |engine: &str| Subject {
            model: "Qwen2-7B".into(),
            gpu: "H200".into(),
            arch: "hopper".into(),
            precision: "Q4_K".into(),
            params_b: Some(7.6),
            delta_pct: Some(-30.0),
            basis: "measured".into(),
            engine: Some(engine.into()),
            batch_size: Some(1),
        };
        for e in ["candle-graph", "candle", "llama.cpp"] {
            assert_eq!(find_curve(&subject(e), classes).unwrap().engine, e);
        }
        // The curves differ, so a report placed on another engine's would read differently.
        let at = |e: &str| {
            find_class_on(classes, Arch::Hopper, Precision::Q4K, e)
                .unwrap()
                .fit
                .predict(7.6)
        };
        assert!((at("candle") - at("candle-graph")).abs() > 1.0);
        // An engine with no curve of its own is refused, naming every curve's engine.
        match find_curve(&subject("vllm"), classes) {
            Err(NoCurve::Stack { curve_engines, .. }) => {
                assert_eq!(curve_engines, ["candle-graph", "candle", "llama.cpp"])
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_stack_other_than_the_curves_has_no_curve() {
        // llama.cpp measured no BF16: its BF16 report has no curve, though two engines have one.
        let mut s = subject("hopper", "BF16", 7.6156, -4.0);
        s.engine = Some("llama.cpp".into());
        let pl = place(&s, default_classes());
        assert_eq!(pl.outcome, Outcome::NoCurve);
        assert_eq!(
            pl.summary(),
            "no hopper BF16 curve for stack llama.cpp: the published hopper BF16 curves were measured with candle-graph, candle"
        );
        assert_eq!(pl.joins_class(), None, "engines are never pooled");
        // A curve's own engine, in any case, is compared — on its own curve.
        for (engine, key) in [("Candle", "candle"), ("candle-graph", "candle-graph")] {
            s.engine = Some(engine.into());
            let pl = place(&s, default_classes());
            assert!(pl.outcome.comparison().is_some(), "{engine}");
            assert_eq!(pl.curve_engines, [key]);
        }
        let mut q = subject("hopper", "Q4_0", 1.5437, -50.0);
        q.engine = Some("llama.cpp".into());
        assert_eq!(place(&q, default_classes()).curve_engines, ["llama.cpp"]);
        // So is an upstream report on its bitsandbytes curve, named either way.
        let mut a = subject("ada", "NF4", 7.0, -20.0);
        for e in ["transformers", "bitsandbytes"] {
            a.engine = Some(e.into());
            assert!(place(&a, default_classes()).curve.is_ok(), "{e}");
        }
        // A class of one curve says so in the singular.
        a.engine = Some("candle".into());
        assert_eq!(
            place(&a, default_classes()).summary(),
            "no ada NF4 curve for stack candle: the published ada NF4 curve was measured with transformers + bitsandbytes"
        );
    }

    #[test]
    fn batch_above_one_has_no_batch_1_curve() {
        let mut s = subject("hopper", "Q4_K", 1.5437, 30.0);
        s.batch_size = Some(64);
        let pl = place(&s, default_classes());
        assert_eq!(pl.curve, Err(NoCurve::Batch { batch_size: 64 }));
        assert!(pl.summary().starts_with("no curve at batch 64"));
        // Every default curve is fitted on batch-1 anchors only.
        assert!(Dataset::embedded()
            .anchors
            .iter()
            .filter(|a| a.default_curve)
            .all(|a| a.batch == 1));
    }

    #[test]
    fn an_estimate_is_never_compared_and_never_gives_a_number() {
        for basis in ["interpolated", "extrapolated", "unavailable"] {
            let mut s = subject("ada", "NF4", 7.0, 60.0);
            s.basis = basis.into();
            let pl = place(&s, default_classes());
            assert_eq!(pl.outcome, Outcome::NotMeasured);
            // The page still draws it on its class's curve.
            assert_eq!(
                pl.curve.as_ref().map(|c| c.to_string()).as_deref(),
                Ok("ada NF4")
            );
            let line = pl.summary();
            assert_eq!(
                line,
                format!("not measured (basis {basis}): an estimate is not compared with the curve")
            );
            assert!(!line.chars().any(|c| c.is_ascii_digit()), "{line}");
            let json = serde_json::to_value(&pl).unwrap();
            assert_eq!(json["outcome"], "not_measured");
            assert!(json["measured_delta_pct"].is_null());
            assert!(json["comparison"].is_null());
            assert_eq!(pl.joins_class(), None);
        }
    }

    #[test]
    fn no_delta_and_no_size_are_said() {
        let mut s = subject("ada", "NF4", 7.0, 1.0);
        s.delta_pct = None;
        assert_eq!(place(&s, default_classes()).outcome, Outcome::NoDelta);
        let mut s = subject("ada", "NF4", 7.0, 1.0);
        s.params_b = None;
        let pl = place(&s, default_classes());
        assert_eq!(pl.outcome, Outcome::NoSize);
        assert!(!pl.drawable());
    }

    #[test]
    fn a_committed_h200_report_sits_on_the_hopper_curve() {
        let text = include_str!("../../../data/measurements/h200/raw/qwen2-7b_b1_r1_Q4_K.json");
        let r = report::validate_str(text).report.unwrap();
        let s = Subject::from_report(&r);
        assert_eq!(s.engine.as_deref(), Some("candle"));
        assert_eq!(s.batch_size, Some(1));
        let pl = place_report(&r, default_classes());
        assert_eq!(
            pl.curve.as_ref().map(|c| c.to_string()).as_deref(),
            Ok("hopper Q4_K")
        );
        let cmp = pl
            .outcome
            .comparison()
            .expect("measured, sized, on a curve");
        assert_eq!(cmp.measured_pct, -28.62);
        let json = serde_json::to_value(&pl).unwrap();
        assert_eq!(json["curve"], "hopper Q4_K");
        assert_eq!(json["curve_engines"][0], "candle");
        // The curve to draw it on is the eager engine's, not the class's preferred (candle-graph).
        let drawn = pl.curve_class(default_classes()).unwrap();
        assert_eq!(drawn.engine, "candle");
        assert_eq!(
            cmp.predicted_pct,
            drawn.fit.predict(pl.subject.params_b.unwrap())
        );
        assert_eq!(json["comparison"]["band_pct"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn a_link_has_no_engine_and_no_batch() {
        let p = SharePoint {
            model: "m".into(),
            params_b: Some(1.1),
            arch: " ADA ".into(),
            precision: "nf4".into(),
            vs_fp16_pct: Some(12.5),
            basis: "measured".into(),
            gpu: "RTX 4090".into(),
            source: None,
        };
        let s = Subject::from_share_point(&p);
        assert_eq!((s.engine.clone(), s.batch_size), (None, None));
        assert_eq!(s.arch, "ada");
        let pl = place(&s, default_classes());
        assert_eq!(pl.curve.map(|c| c.to_string()).as_deref(), Ok("ada NF4"));
    }

    #[test]
    fn placing_against_refitted_classes_uses_them() {
        let refit = fit_classes(Dataset::embedded(), &[]);
        let s = subject("turing", "NF4", 3.0, 0.0);
        assert_eq!(place(&s, &refit), place(&s, default_classes()));
    }
}
