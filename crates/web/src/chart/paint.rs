//! The data layers, painted on a [`Surface`] (the canvas, or SVG at build time) with the frame's
//! coordinate mapping, in z-order: log-y grid, savings/penalty shading, bands, vertical lines,
//! lines, marks.

use super::frame::Style;
use super::surface::{Align, Baseline, Ink, Surface};
use super::{tick_label, Band, Hit, Line, Mark, Shape, Theme, VLine};

/// The plot area and how to reach it: context, theme, data → device-pixel mapping, edges.
pub struct Plot<'a, S: Surface + ?Sized> {
    /// Where to paint.
    pub ctx: &'a S,
    /// Resolved colours.
    pub th: &'a Theme,
    /// Data (x, y) → device pixels.
    pub px: &'a dyn Fn(f64, f64) -> (f64, f64),
    /// Sizes and font.
    pub style: &'a Style,
    /// Plot-area edges, device pixels.
    pub left: f64,
    /// Top edge.
    pub top: f64,
    /// Right edge.
    pub right: f64,
    /// Bottom edge.
    pub bottom: f64,
}

impl<S: Surface + ?Sized> Plot<'_, S> {
    fn s(&self, v: f64) -> f64 {
        self.style.s(v)
    }

    /// Grid lines and labels of a log y axis (plotters' own y ticks are linear).
    pub fn log_y_grid(&self, keys: &[f64], x0: f64) {
        let (ctx, th) = (self.ctx, self.th);
        ctx.set_font(&format!(
            "{}px {}",
            self.s(self.style.label_px),
            self.style.font
        ));
        ctx.set_align(Align::Right);
        ctx.set_baseline(Baseline::Middle);
        for k in keys {
            let (_, y) = (self.px)(x0, *k);
            ctx.set_stroke(th.grid, 1.0);
            ctx.set_line_width(self.s(1.0));
            ctx.begin_path();
            ctx.move_to(self.left, y.round() + 0.5);
            ctx.line_to(self.right, y.round() + 0.5);
            ctx.stroke();
            ctx.set_fill(th.muted, 1.0);
            ctx.fill_text(&tick_label(*k), self.left - self.s(6.0), y);
        }
    }

    /// The penalty (above zero) and savings (below) halves, the dashed zero line and the two
    /// corner labels.
    pub fn shade(&self, x0: f64) {
        let (ctx, th) = (self.ctx, self.th);
        let (left, top, right, bottom) = (self.left, self.top, self.right, self.bottom);
        let label_px = self.style.label_px;
        let (_, zy) = (self.px)(x0, 0.0);
        ctx.set_fill(th.bad, 0.07);
        ctx.fill_rect(left, top, right - left, zy - top);
        ctx.set_fill(th.good, 0.08);
        ctx.fill_rect(left, zy, right - left, bottom - zy);
        ctx.set_stroke(th.fg, 0.55);
        ctx.set_line_width(self.s(1.2));
        ctx.set_dash(&[self.s(5.0), self.s(4.0)]);
        ctx.begin_path();
        ctx.move_to(left, zy);
        ctx.line_to(right, zy);
        ctx.stroke();
        ctx.set_dash(&[]);
        // Labels in the plot's left corners, on a card-coloured plate so data stays readable.
        ctx.set_font(&format!("600 {}px {}", self.s(label_px), self.style.font));
        ctx.set_align(Align::Left);
        self.plate(
            "↑ costs more than FP16",
            left + self.s(8.0),
            top + self.s(label_px + 6.0),
            th.bad,
        );
        self.plate(
            "↓ saves energy vs FP16",
            left + self.s(8.0),
            bottom - self.s(8.0),
            th.good,
        );
    }

    /// Text on a card-coloured plate.
    fn plate(&self, text: &str, x: f64, y: f64, col: Ink) {
        let ctx = self.ctx;
        let label_px = self.style.label_px;
        let w = ctx.measure_text(text);
        ctx.set_fill(self.th.bg, 0.82);
        ctx.fill_rect(
            x - self.s(4.0),
            y - self.s(label_px + 1.0),
            w + self.s(8.0),
            self.s(label_px + 7.0),
        );
        ctx.set_fill(col, 1.0);
        ctx.fill_text(text, x, y);
    }

    /// Shaded bands between their low and high edges.
    pub fn bands(&self, bands: &[Band]) {
        let (ctx, px) = (self.ctx, self.px);
        for b in bands {
            if b.pts.len() < 2 {
                continue;
            }
            let c = Ink::Var(b.col);
            ctx.set_fill(c, 0.18);
            ctx.begin_path();
            let (sx, sy) = px(b.pts[0].0, b.pts[0].2);
            ctx.move_to(sx, sy);
            for p in &b.pts[1..] {
                let (x, y) = px(p.0, p.2);
                ctx.line_to(x, y);
            }
            for p in b.pts.iter().rev() {
                let (x, y) = px(p.0, p.1);
                ctx.line_to(x, y);
            }
            ctx.close_path();
            ctx.fill();
        }
    }

    /// Dotted vertical lines with their labels, one label row per line.
    pub fn vlines(&self, vlines: &[VLine], x0: f64, x1: f64) {
        let ctx = self.ctx;
        let label_px = self.style.label_px;
        for (vi, v) in vlines.iter().enumerate() {
            if v.x < x0 || v.x > x1 {
                continue;
            }
            let c = Ink::Var(v.col);
            let (x, _) = (self.px)(v.x, 0.0);
            ctx.set_stroke(c, 0.8);
            ctx.set_line_width(self.s(1.0));
            ctx.set_dash(&[self.s(2.0), self.s(3.0)]);
            ctx.begin_path();
            ctx.move_to(x, self.top);
            ctx.line_to(x, self.bottom);
            ctx.stroke();
            ctx.set_dash(&[]);
            ctx.set_font(&format!("600 {}px {}", self.s(label_px), self.style.font));
            ctx.set_fill(c, 1.0);
            let right_half = x > (self.left + self.right) / 2.0;
            ctx.set_align(if right_half {
                Align::Right
            } else {
                Align::Left
            });
            let dx = if right_half {
                -self.s(5.0)
            } else {
                self.s(5.0)
            };
            // Below the corner label ("costs more than FP16"), one row per vertical line.
            let row = (vi as f64 + 1.0) * (label_px + 7.0);
            ctx.fill_text(&v.label, x + dx, self.top + self.s(label_px + 4.0 + row));
        }
    }

    /// Polylines (solid or dashed).
    pub fn lines(&self, lines: &[Line]) {
        let (ctx, px) = (self.ctx, self.px);
        for l in lines {
            if l.pts.len() < 2 {
                continue;
            }
            let c = Ink::Var(l.col);
            ctx.set_stroke(c, l.alpha);
            ctx.set_line_width(self.s(l.width));
            ctx.set_round_join();
            if l.dash {
                ctx.set_dash(&[self.s(6.0), self.s(4.0)]);
            }
            ctx.begin_path();
            let (sx, sy) = px(l.pts[0].0, l.pts[0].1);
            ctx.move_to(sx, sy);
            for p in &l.pts[1..] {
                let (x, y) = px(p.0, p.1);
                ctx.line_to(x, y);
            }
            ctx.stroke();
            ctx.set_dash(&[]);
        }
    }

    /// Every mark that has finite coordinates, with its hit.
    pub fn marks(&self, marks: &[Mark]) -> Vec<Hit> {
        let mut hits = Vec::with_capacity(marks.len());
        for m in marks {
            if let Some(h) = self.mark(m) {
                hits.push(h);
            }
        }
        hits
    }

    /// One marker (with its error bar and ring); its hit in CSS px.
    fn mark(&self, m: &Mark) -> Option<Hit> {
        let (ctx, px, th, dpr) = (self.ctx, self.px, self.th, self.style.dpr);
        let s = |v: f64| self.style.s(v);
        if !(m.x.is_finite() && m.y.is_finite()) {
            return None;
        }
        let c = Ink::Var(m.col);
        let (x, y) = px(m.x, m.y);
        if let Some((lo, hi)) = m.err {
            let (_, ylo) = px(m.x, lo);
            let (_, yhi) = px(m.x, hi);
            ctx.set_stroke(c, 0.9);
            ctx.set_line_width(s(2.0));
            ctx.begin_path();
            ctx.move_to(x, ylo);
            ctx.line_to(x, yhi);
            ctx.move_to(x - s(6.0), ylo);
            ctx.line_to(x + s(6.0), ylo);
            ctx.move_to(x - s(6.0), yhi);
            ctx.line_to(x + s(6.0), yhi);
            ctx.stroke();
        }
        let r = s(m.r);
        ctx.begin_path();
        match m.shape {
            Shape::Circle => {
                ctx.circle(x, y, r);
            }
            Shape::Square => ctx.rect(x - r * 0.9, y - r * 0.9, r * 1.8, r * 1.8),
            Shape::Triangle => {
                ctx.move_to(x, y - r * 1.15);
                ctx.line_to(x + r * 1.05, y + r * 0.8);
                ctx.line_to(x - r * 1.05, y + r * 0.8);
                ctx.close_path();
            }
            Shape::Star => {
                for i in 0..10 {
                    let a = std::f64::consts::PI * (i as f64 / 5.0 - 0.5);
                    let rr = if i % 2 == 0 { r * 1.6 } else { r * 0.7 };
                    let (sx, sy) = (x + rr * a.cos(), y + rr * a.sin());
                    if i == 0 {
                        ctx.move_to(sx, sy);
                    } else {
                        ctx.line_to(sx, sy);
                    }
                }
                ctx.close_path();
            }
            Shape::Diamond => {
                ctx.move_to(x, y - r * 1.2);
                ctx.line_to(x + r * 1.2, y);
                ctx.line_to(x, y + r * 1.2);
                ctx.line_to(x - r * 1.2, y);
                ctx.close_path();
            }
        }
        if m.filled {
            ctx.set_fill(c, 1.0);
            ctx.fill();
            ctx.set_stroke(th.bg, 0.9);
            ctx.set_line_width(s(1.0));
            ctx.stroke();
        } else {
            ctx.set_fill(th.bg, 1.0);
            ctx.fill();
            ctx.set_stroke(c, 1.0);
            ctx.set_line_width(s(2.0));
            ctx.stroke();
        }
        if m.ring {
            ctx.begin_path();
            ctx.circle(x, y, r + s(5.0));
            ctx.set_stroke(th.fg, 0.9);
            ctx.set_line_width(s(1.5));
            ctx.stroke();
        }
        Some(Hit {
            x: x / dpr,
            y: y / dpr,
            tip: m.tip.clone(),
        })
    }
}
