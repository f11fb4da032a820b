//! Spec layers shared by the tabs that draw a fitted class: its curve with the 95 % band and
//! crossover marker, and its measured anchors.

use analysis::CurveClass;

use super::{Band, Line, Mark, Shape, Spec, VLine};
use crate::util::{pct, size_b};

/// Curve + band over the whole x range, anchors, crossover marker.
pub fn class_layers(
    c: &CurveClass,
    spec: &mut Spec,
    x_range: (f64, f64),
    col: &'static str,
    dash: bool,
    tag: &str,
) {
    let (x0, x1) = x_range;
    let steps = 160;
    let xs: Vec<f64> = (0..=steps)
        .map(|i| (x0.ln() + (x1.ln() - x0.ln()) * i as f64 / steps as f64).exp())
        .collect();
    spec.bands.push(Band {
        col,
        pts: xs
            .iter()
            .map(|&x| {
                let (lo, hi) = c.fit.band(x);
                // Savings are capped at S_cap (the estimate's rule); keep the band in view.
                (x, lo.max(-c.s_cap), hi)
            })
            .collect(),
    });
    spec.lines.push(Line {
        col,
        pts: xs.iter().map(|&x| (x, c.fit.predict(x))).collect(),
        width: 2.5,
        alpha: 1.0,
        dash,
    });
    if let Some(cx) = c.crossover_b {
        spec.vlines.push(VLine {
            x: cx,
            col,
            label: format!("{tag}crossover ≈ {}", size_b((cx * 100.0).round() / 100.0)),
        });
    }
}

pub fn anchor_marks(c: &CurveClass, spec: &mut Spec, col: &'static str) {
    for p in &c.points {
        spec.marks.push(Mark {
            x: p.point.n,
            y: p.point.delta,
            col,
            filled: p.n.unwrap_or(1) >= 2,
            shape: Shape::Circle,
            r: 4.5,
            ring: false,
            err: None,
            tip: format!(
                "{} · {}\n{} · {} {} anchor\nΔE {} vs FP16 (measured)\nn = {}{}\nsource: {}",
                p.model,
                size_b(p.point.n),
                p.gpu,
                c.arch,
                c.precision,
                pct(p.point.delta, 1),
                p.n.map(|n| n.to_string()).unwrap_or_else(|| "?".into()),
                p.cv_pct
                    .map(|c| format!(" · CV {c:.1} %"))
                    .unwrap_or_default(),
                p.source
            ),
        });
    }
}
