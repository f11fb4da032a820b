//! Crossover classes: one fitted curve per (architecture, precision, engine) on the default-curve
//! anchors. Rows of different engines are never pooled into one fit (the same card and
//! model give different answers on different software); where one (architecture, precision) has
//! curves of several engines, [`find_class`] picks by [`ENGINE_PREFERENCE`] and
//! [`find_class_on`] asks for one.

use crate::class::{borrow_order, ClassId};
use crate::dataset::{Anchor, Dataset};
use crate::engine::{is_candle_stack, StackEngines};
use crate::fit::{fit_curve, loo_mae, Fit, Point};
use report::{Arch, Precision};
use serde::Serialize;

/// Cap on savings, S_cap (upstream: NF4 75, INT8 50). 4-bit formats share NF4's, 8-bit INT8's.
pub fn s_cap(precision: Precision) -> f64 {
    if precision.is_8bit() {
        50.0
    } else {
        75.0
    }
}

/// Where a class point comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PointOrigin {
    /// An embedded anchor of `data/anchors.csv`.
    Dataset,
    /// A point the user added in the page (a dropped report).
    User,
}

/// Which engine's curve [`find_class`] returns when one (architecture, precision) has several:
/// the published bitsandbytes curves, then our meter's CUDA-graph engine over its eager one (the
/// engine that decodes as fast as deployed engines), then llama.cpp; others after, by name.
pub const ENGINE_PREFERENCE: [&str; 4] = ["transformers", "candle-graph", "candle", "llama.cpp"];

/// Sort key of an engine: its place in [`ENGINE_PREFERENCE`], others after by name.
pub(crate) fn preference(engine: &str) -> (usize, String) {
    let i = ENGINE_PREFERENCE
        .iter()
        .position(|e| *e == engine)
        .unwrap_or(ENGINE_PREFERENCE.len());
    (i, engine.to_string())
}

/// A user point that joins the class of its architecture and precision in [`fit_classes`].
#[derive(Debug, Clone, PartialEq)]
pub struct ExtraPoint {
    /// Architecture class the point joins.
    pub arch: Arch,
    /// Precision class the point joins.
    pub precision: Precision,
    /// The engine of the class it joins (its own stack's); `None`: the class [`find_class`]
    /// picks for its architecture and precision.
    pub engine: Option<String>,
    /// The point and where it came from.
    pub point: ClassPoint,
}

/// A point that feeds a class fit, with where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassPoint {
    /// Size (B) and ΔE (%) as the fit sees them.
    pub point: Point,
    /// Card the point was measured on.
    pub gpu: String,
    /// Model name.
    pub model: String,
    /// Independent runs behind the point, if published.
    pub n: Option<u32>,
    /// Run-to-run CV of the energy, %, if published.
    pub cv_pct: Option<f64>,
    /// Where the figure was published.
    pub source: String,
    /// `dataset` for embedded anchors, `user` for points a user added in the page.
    pub origin: PointOrigin,
}

/// One fitted (architecture, precision, engine) class: the crossover curve, its points and
/// provenance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CurveClass {
    /// Architecture class.
    pub arch: Arch,
    /// Precision.
    pub precision: Precision,
    /// The engine every point was measured with ([`Anchor::engine`] of their rows).
    pub engine: String,
    /// The fit with its band.
    pub fit: Fit,
    /// Size (B) above which the fit saves energy, if it crosses zero.
    pub crossover_b: Option<f64>,
    /// Leave-one-out mean absolute error, points (classes with ≥ 4 points).
    pub loo_mae: Option<f64>,
    /// Cap on savings used by the fit ([`s_cap`]).
    pub s_cap: f64,
    /// The points behind the fit.
    pub points: Vec<ClassPoint>,
    /// Distinct cards and stacks behind the points (a crossover is a property of card + stack).
    pub gpus: Vec<String>,
    /// Software stacks behind the points.
    pub stacks: Vec<String>,
    /// Every engine those stacks name, in first-seen order ([`Anchor::engines`] of the rows:
    /// `transformers`, `bitsandbytes`).
    pub stack_engines: Vec<String>,
}

impl CurveClass {
    /// Whether the class comes from our candle meter (the H200 campaign).
    pub fn is_candle(&self) -> bool {
        self.stacks.iter().any(|s| is_candle_stack(s))
    }

    /// The class's architecture and precision.
    pub fn id(&self) -> ClassId {
        ClassId {
            arch: self.arch,
            precision: self.precision,
        }
    }

    /// `ada NF4`.
    pub fn label(&self) -> String {
        self.id().to_string()
    }
    /// Anchor sizes in the class, sorted and deduplicated.
    pub fn sizes(&self) -> Vec<f64> {
        let mut v: Vec<f64> = self.points.iter().map(|p| p.point.n).collect();
        v.sort_by(f64::total_cmp);
        v.dedup();
        v
    }
}

/// The points of one (architecture, precision, engine) class before fitting.
#[derive(Debug, Clone, PartialEq)]
pub struct PointGroup {
    /// Architecture class.
    pub arch: Arch,
    /// Precision.
    pub precision: Precision,
    /// The engine of its rows.
    pub engine: String,
    /// The points, in first-seen order.
    pub points: Vec<ClassPoint>,
    /// Software stacks behind the points.
    pub stacks: Vec<String>,
    /// Every engine those stacks name, in first-seen order.
    pub stack_engines: Vec<String>,
}

impl PointGroup {
    /// Note `stack` and the `engines` it names, once each.
    fn add_stack(&mut self, stack: &str, engines: &StackEngines) {
        if !self.stacks.iter().any(|s| s == stack) {
            self.stacks.push(stack.to_string());
        }
        for e in engines.all() {
            if !self.stack_engines.contains(e) {
                self.stack_engines.push(e.clone());
            }
        }
    }
}

/// The stack a class opened by a user point (no anchor of its own) lists.
const USER_STACK: &str = "user-supplied";

fn group_mut<'g>(
    groups: &'g mut Vec<PointGroup>,
    arch: Arch,
    precision: Precision,
    engine: &str,
) -> &'g mut PointGroup {
    match groups
        .iter()
        .position(|g| g.arch == arch && g.precision == precision && g.engine == engine)
    {
        Some(i) => &mut groups[i],
        None => {
            groups.push(PointGroup {
                arch,
                precision,
                engine: engine.to_string(),
                points: Vec::new(),
                stacks: Vec::new(),
                stack_engines: Vec::new(),
            });
            groups.last_mut().expect("just pushed")
        }
    }
}

/// Points of the default curves, grouped by (arch, precision, engine), in first-seen order.
pub fn default_points(ds: &Dataset) -> Vec<PointGroup> {
    let mut groups: Vec<PointGroup> = Vec::new();
    for a in ds.anchors.iter().filter(|a| a.default_curve) {
        let Some(point) = anchor_point(a) else {
            continue;
        };
        let g = group_mut(&mut groups, a.arch, a.precision, a.engine());
        g.points.push(ClassPoint {
            point,
            gpu: a.gpu.clone(),
            model: a.model.clone(),
            n: a.n,
            cv_pct: a.cv_pct,
            source: a.source.clone(),
            origin: PointOrigin::Dataset,
        });
        g.add_stack(&a.stack, &a.engines);
    }
    groups
}

fn anchor_point(a: &Anchor) -> Option<Point> {
    Some(Point {
        n: a.params_b,
        delta: a.delta_pct()?,
    })
}

/// Fit every class of the default curves, plus `extra` user points that join their class (or
/// open a new one).
pub fn fit_classes(ds: &Dataset, extra: &[ExtraPoint]) -> Vec<CurveClass> {
    let mut groups = default_points(ds);
    for e in extra {
        // Without an engine of its own, the point joins the class `find_class` would pick.
        let engine = e.engine.clone().unwrap_or_else(|| {
            groups
                .iter()
                .filter(|g| g.arch == e.arch && g.precision == e.precision)
                .map(|g| g.engine.clone())
                .min_by_key(|x| preference(x))
                .unwrap_or_else(|| USER_STACK.into())
        });
        let g = group_mut(&mut groups, e.arch, e.precision, &engine);
        if g.points.is_empty() {
            g.add_stack(USER_STACK, &StackEngines::parse(USER_STACK));
        }
        g.points.push(e.point.clone());
    }
    groups.into_iter().filter_map(fit_group).collect()
}

fn fit_group(g: PointGroup) -> Option<CurveClass> {
    let cap = s_cap(g.precision);
    let pts: Vec<Point> = g.points.iter().map(|p| p.point).collect();
    let fit = fit_curve(&pts, cap).ok()?;
    let mut gpus: Vec<String> = Vec::new();
    for p in &g.points {
        if !gpus.contains(&p.gpu) {
            gpus.push(p.gpu.clone());
        }
    }
    Some(CurveClass {
        crossover_b: fit.crossover_b(),
        loo_mae: loo_mae(&pts, cap),
        arch: g.arch,
        precision: g.precision,
        engine: g.engine,
        fit,
        s_cap: cap,
        points: g.points,
        gpus,
        stacks: g.stacks,
        stack_engines: g.stack_engines,
    })
}

/// The default classes of the embedded dataset (fitted once per process).
pub fn default_classes() -> &'static [CurveClass] {
    static CLASSES: std::sync::OnceLock<Vec<CurveClass>> = std::sync::OnceLock::new();
    CLASSES.get_or_init(|| fit_classes(Dataset::embedded(), &[]))
}

/// The class of `arch` and `precision`, if it has a fit; of several engines', the first in
/// [`ENGINE_PREFERENCE`].
pub fn find_class(classes: &[CurveClass], arch: Arch, precision: Precision) -> Option<&CurveClass> {
    classes
        .iter()
        .filter(|c| c.arch == arch && c.precision == precision)
        .min_by_key(|c| preference(&c.engine))
}

/// The class of `arch` and `precision` measured with `engine` (as [`crate::curve_engine`] names
/// it).
pub fn find_class_on<'c>(
    classes: &'c [CurveClass],
    arch: Arch,
    precision: Precision,
    engine: &str,
) -> Option<&'c CurveClass> {
    classes
        .iter()
        .find(|c| c.arch == arch && c.precision == precision && c.engine == engine)
}

/// The engines with a curve of any precision on `arch`, in [`ENGINE_PREFERENCE`] order (what a
/// stack picker offers; the first is the one an estimate without an engine uses for FP16).
pub fn arch_engines(classes: &[CurveClass], arch: Arch) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for c in classes.iter().filter(|c| c.arch == arch) {
        if !v.contains(&c.engine) {
            v.push(c.engine.clone());
        }
    }
    v.sort_by_key(|e| preference(e));
    v
}

/// The engine an estimate or search on `arch` assumes when none is asked for: the preferred one
/// with curves on `arch`, else on the first architecture `arch` borrows from that has any.
pub fn default_engine(classes: &[CurveClass], arch: Arch) -> Option<String> {
    std::iter::once(&arch)
        .chain(borrow_order(arch))
        .find_map(|a| arch_engines(classes, *a).into_iter().next())
}

/// The engines with a curve for `arch` and `precision`, the one [`find_class`] picks first.
pub fn class_engines_of(classes: &[CurveClass], arch: Arch, precision: Precision) -> Vec<String> {
    let mut v: Vec<String> = classes
        .iter()
        .filter(|c| c.arch == arch && c.precision == precision)
        .map(|c| c.engine.clone())
        .collect();
    v.sort_by_key(|e| preference(e));
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::curve_engine;

    fn class(arch: &str, p: &str) -> CurveClass {
        find_class(default_classes(), arch.parse().unwrap(), p.parse().unwrap())
            .unwrap()
            .clone()
    }

    fn close(got: f64, want: f64, rel: f64) -> bool {
        (got - want).abs() <= rel * want.abs().max(1e-9)
    }

    /// DESIGN.md §3 upstream table, reproduced from the same 29 anchors.
    #[test]
    fn reproduces_upstream_ada_nf4() {
        let c = class("ada", "NF4");
        assert_eq!(c.points.len(), 9);
        let f = &c.fit;
        assert!(close(f.a, 54.2295, 0.01), "A {}", f.a);
        assert!(close(f.s, 131.0936, 0.01), "S {}", f.s);
        assert!(close(f.n_star, 5.2846, 0.01), "N* {}", f.n_star);
        assert!(close(f.resid_rms, 11.48, 0.01), "resid {}", f.resid_rms);
        assert!(
            close(c.crossover_b.unwrap(), 3.728, 0.01),
            "crossover {:?}",
            c.crossover_b
        );
        assert!(
            close(c.loo_mae.unwrap(), 16.12, 0.01),
            "LOO {:?}",
            c.loo_mae
        );
    }

    #[test]
    fn reproduces_upstream_ada_int8() {
        let c = class("ada", "INT8");
        assert_eq!(c.points.len(), 6);
        let f = &c.fit;
        assert!(close(f.a, 291.8945, 0.01), "A {}", f.a);
        assert!(close(f.s, 274.5289, 0.01), "S {}", f.s);
        assert!(close(f.n_star, 1.4423, 0.01), "N* {}", f.n_star);
        assert!(close(f.resid_rms, 26.59, 0.01), "resid {}", f.resid_rms);
        // S < A: INT8 never crosses zero on Ada.
        assert_eq!(c.crossover_b, None);
        assert!(
            close(c.loo_mae.unwrap(), 47.46, 0.01),
            "LOO {:?}",
            c.loo_mae
        );
        assert!(
            f.at_bound.contains(&crate::fit::FitParam::A),
            "A sits on max ΔE + 50: {:?}",
            f.at_bound
        );
    }

    #[test]
    fn reproduces_upstream_blackwell_and_turing_nf4() {
        let b = class("blackwell", "NF4");
        assert!(close(b.fit.a, 45.8272, 0.01), "A {}", b.fit.a);
        assert!(close(b.fit.s, 104.4224, 0.01), "S {}", b.fit.s);
        assert!(close(b.fit.n_star, 6.0749, 0.01), "N* {}", b.fit.n_star);
        assert!(
            close(b.fit.resid_rms, 2.80, 0.01),
            "resid {}",
            b.fit.resid_rms
        );
        assert!(close(b.crossover_b.unwrap(), 4.751, 0.01));
        assert!(close(b.loo_mae.unwrap(), 4.85, 0.01), "LOO {:?}", b.loo_mae);
        let t = class("turing", "NF4");
        assert!(close(t.fit.a, 7.925, 0.01), "A {}", t.fit.a);
        assert!(close(t.fit.s, 79.5646, 0.01), "S {}", t.fit.s);
        assert!(close(t.fit.n_star, 19.2186, 0.01), "N* {}", t.fit.n_star);
        assert!(
            close(t.fit.resid_rms, 1.32, 0.01),
            "resid {}",
            t.fit.resid_rms
        );
        assert!(close(t.crossover_b.unwrap(), 2.126, 0.01));
        assert!(close(t.loo_mae.unwrap(), 5.26, 0.01), "LOO {:?}", t.loo_mae);
    }

    #[test]
    fn ampere_classes_have_three_points_and_no_loo() {
        for p in ["NF4", "INT8"] {
            let c = class("ampere", p);
            assert_eq!(c.points.len(), 3);
            assert_eq!(c.loo_mae, None);
        }
        // 6 upstream classes; the rest are the H200 campaign's.
        let upstream = default_classes()
            .iter()
            .filter(|c| c.arch != Arch::Hopper)
            .count();
        assert_eq!(upstream, 6);
    }

    #[test]
    fn hopper_classes_come_from_our_h200_campaign() {
        // Each engine's precisions next to their own F16 arm, one batch-1 point per shape measured:
        // eager candle and candle-graph at Qwen2 0.5B/1.5B/3B/7B and TinyLlama-1.1B, the GGUF
        // formats (and the graph engine's BF16) also at Qwen2.5-14B; llama.cpp at 0.5B, TinyLlama,
        // 1.5B, 3B and 7B, GGUF formats only.
        // (engine, how its stack text starts, points per precision)
        type Plan<'a> = (&'a str, &'a str, &'a [(&'a str, usize)]);
        let plan: [Plan; 3] = [
            (
                "candle",
                "candle 0.11.1",
                &[("BF16", 5), ("Q8_0", 6), ("Q4_K", 6), ("Q4_0", 6)],
            ),
            (
                "candle-graph",
                "candle-graph 0.11.1",
                &[("BF16", 6), ("Q8_0", 6), ("Q4_K", 6), ("Q4_0", 6)],
            ),
            (
                "llama.cpp",
                "llama.cpp ",
                &[("Q8_0", 6), ("Q4_K", 6), ("Q4_0", 6)],
            ),
        ];
        for (engine, stack, shapes) in plan {
            for &(p, n) in shapes {
                let c = find_class_on(default_classes(), Arch::Hopper, p.parse().unwrap(), engine)
                    .unwrap_or_else(|| panic!("{engine} {p}"));
                assert_eq!(
                    c.points.len(),
                    n,
                    "{engine} {p}: one batch-1 point per measured shape"
                );
                assert_eq!(c.gpus, vec!["H200".to_string()]);
                assert!(
                    c.stacks.iter().all(|s| s.starts_with(stack)),
                    "{:?}",
                    c.stacks
                );
                // Leave-one-out needs ≥ 4 points (as on Ampere).
                assert_eq!(c.loo_mae.is_some(), n >= 4, "{engine} {p}");
            }
        }
        assert!(find_class_on(
            default_classes(),
            Arch::Hopper,
            Precision::Bf16,
            "llama.cpp"
        )
        .is_none());
        assert_eq!(
            arch_engines(default_classes(), Arch::Hopper),
            ["candle-graph", "candle", "llama.cpp"]
        );
    }

    /// Engines are never pooled: another engine's default-curve rows at the same architecture and
    /// precision make a class of their own — never pooled with the first's — and `find_class`
    /// prefers the graph engine. The embedded data has three engines' Hopper rows; without the two
    /// added ones the eager fit is the same.
    #[test]
    fn two_engines_make_two_classes_and_never_pool() {
        let eager_only = crate::test_data::eager_only();
        let before = fit_classes(&eager_only, &[]);
        let before_q4k = find_class(&before, Arch::Hopper, Precision::Q4K).unwrap();
        assert_eq!(before_q4k.engine, "candle");
        assert_eq!(arch_engines(&before, Arch::Hopper), ["candle"]);
        let classes = default_classes();
        let rows = |engine: &str| {
            Dataset::embedded()
                .anchors
                .iter()
                .filter(|a| {
                    a.default_curve && a.arch == Arch::Hopper && a.precision == Precision::Q4K
                })
                .filter(|a| curve_engine(&a.stack) == engine)
                .count()
        };
        for e in ["candle", "candle-graph", "llama.cpp"] {
            let c = find_class_on(classes, Arch::Hopper, Precision::Q4K, e).unwrap();
            assert_eq!(
                c.points.len(),
                rows(e),
                "{e}: its own rows, no other engine's"
            );
            assert!(
                c.stacks.iter().all(|s| curve_engine(s) == e),
                "{:?}",
                c.stacks
            );
        }
        let eager = find_class_on(classes, Arch::Hopper, Precision::Q4K, "candle").unwrap();
        assert_eq!(eager.fit, before_q4k.fit, "the eager fit did not move");
        assert_eq!(eager.points, before_q4k.points);
        assert_eq!(
            find_class(classes, Arch::Hopper, Precision::Q4K)
                .unwrap()
                .engine,
            "candle-graph"
        );
        assert_eq!(
            class_engines_of(classes, Arch::Hopper, Precision::Q4K),
            ["candle-graph", "candle", "llama.cpp"]
        );
        // Every upstream class is one engine's: the bitsandbytes rows are `transformers`.
        assert_eq!(class("ada", "NF4").engine, "transformers");
    }

    #[test]
    fn user_points_join_their_class_and_move_the_fit() {
        let ds = Dataset::embedded();
        let extra = vec![ExtraPoint {
            arch: Arch::Ada,
            precision: Precision::Nf4,
            engine: None,
            point: ClassPoint {
                point: Point {
                    n: 14.0,
                    delta: -40.0,
                },
                gpu: "RTX 4090".into(),
                model: "mine".into(),
                n: Some(1),
                cv_pct: None,
                source: "user".into(),
                origin: PointOrigin::User,
            },
        }];
        let with = fit_classes(ds, &extra);
        let c = find_class(&with, Arch::Ada, Precision::Nf4).unwrap();
        assert_eq!(c.points.len(), 10);
        assert_ne!(c.crossover_b, class("ada", "NF4").crossover_b);
    }
}
