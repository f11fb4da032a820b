//! Charts: plotters draws the frame (log-x axis, y mesh, axis titles) on a `CanvasBackend`; the data
//! layer (bands, lines, markers, error bars) is drawn on the same 2-D context with the chart's own
//! coordinate mapping, so dashes, alpha and hollow markers stay crisp. The canvas is sized by
//! `devicePixelRatio`; every length below is in CSS pixels and scaled at draw time.
//!
//! Tooltips are an HTML `<div>` with text only, positioned over the nearest drawn point (mouse) or
//! the point selected with the arrow keys (keyboard focus on the canvas).

use leptos::prelude::*;
use plotters::coord::combinators::BindKeyPoints;
use plotters::prelude::*;
use plotters_canvas::CanvasBackend;
use wasm_bindgen::JsCast;
use web_sys::CanvasRenderingContext2d;

use crate::util;

/// A colour slot: the name of a CSS custom property holding `#rrggbb` (so dark and light themes
/// and the HTML legends share one palette).
pub type Col = &'static str;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shape {
    Circle,
    Square,
    Triangle,
    Diamond,
    /// The optimizer's choice (not in [`Shape::ALL`], which cycles through series).
    Star,
}

impl Shape {
    pub const ALL: [Shape; 4] = [
        Shape::Circle,
        Shape::Square,
        Shape::Triangle,
        Shape::Diamond,
    ];
    pub fn glyph(self, filled: bool) -> &'static str {
        match (self, filled) {
            (Shape::Circle, true) => "●",
            (Shape::Circle, false) => "○",
            (Shape::Square, true) => "■",
            (Shape::Square, false) => "□",
            (Shape::Triangle, true) => "▲",
            (Shape::Triangle, false) => "△",
            (Shape::Diamond, true) => "◆",
            (Shape::Diamond, false) => "◇",
            (Shape::Star, true) => "★",
            (Shape::Star, false) => "☆",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Band {
    pub col: Col,
    /// (x, low, high), sorted by x.
    pub pts: Vec<(f64, f64, f64)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub col: Col,
    pub pts: Vec<(f64, f64)>,
    pub width: f64,
    pub alpha: f64,
    pub dash: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct VLine {
    pub x: f64,
    pub col: Col,
    pub label: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Mark {
    pub x: f64,
    pub y: f64,
    pub col: Col,
    pub filled: bool,
    pub shape: Shape,
    /// Radius in CSS px.
    pub r: f64,
    /// Draw a highlight ring (the selected model / the user's point).
    pub ring: bool,
    /// Vertical error bar (low, high) in y units.
    pub err: Option<(f64, f64)>,
    /// Tooltip text (plain text, lines separated by `\n`).
    pub tip: String,
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct Spec {
    pub x_label: String,
    pub y_label: String,
    pub x_range: (f64, f64),
    pub y_range: (f64, f64),
    /// Shade penalty (above 0) and savings (below 0) and label them.
    pub shade: bool,
    pub bands: Vec<Band>,
    pub lines: Vec<Line>,
    pub vlines: Vec<VLine>,
    pub marks: Vec<Mark>,
    /// Faint context points drawn first (under lines and marks); their tooltips come after the
    /// main marks' in hover ties and keyboard order.
    pub bg_marks: Vec<Mark>,
    /// x-axis key points (log scale); empty = the model-size ticks.
    pub x_ticks: Vec<f64>,
    /// y labels as plain numbers instead of signed percentages.
    pub y_plain: bool,
    /// Log-scale y axis (1-2-5 ticks; `y_range` must be positive).
    pub y_log: bool,
}

impl Spec {
    /// A y range that holds every mark, error bar and line, 0 included, with some headroom.
    pub fn fit_y(&mut self, min_span: f64) {
        let mut lo: f64 = 0.0;
        let mut hi: f64 = 0.0;
        let mut take = |y: f64| {
            if y.is_finite() {
                lo = lo.min(y);
                hi = hi.max(y);
            }
        };
        for m in &self.marks {
            take(m.y);
            if let Some((a, b)) = m.err {
                take(a);
                take(b);
            }
        }
        for l in &self.lines {
            for p in &l.pts {
                take(p.1);
            }
        }
        for b in &self.bands {
            for p in &b.pts {
                take(p.1);
                take(p.2);
            }
        }
        let span = (hi - lo).max(min_span);
        let pad = span * 0.08;
        self.y_range = (lo - pad, hi + pad);
    }
}

/// Resolved colours of the current theme.
struct Theme {
    fg: RGBColor,
    muted: RGBColor,
    grid: RGBColor,
    bg: RGBColor,
    good: RGBColor,
    bad: RGBColor,
}

fn parse_hex(s: &str) -> Option<RGBColor> {
    let s = s.trim().trim_start_matches('#');
    if s.len() != 6 {
        return None;
    }
    let v = u32::from_str_radix(s, 16).ok()?;
    Some(RGBColor((v >> 16) as u8, (v >> 8) as u8, v as u8))
}

/// Colour of a CSS custom property on `<html>` (falls back to mid grey).
pub fn css_color(var: &str) -> RGBColor {
    let w = util::window();
    w.document()
        .and_then(|d| d.document_element())
        .and_then(|el| w.get_computed_style(&el).ok().flatten())
        .and_then(|st| st.get_property_value(var).ok())
        .and_then(|v| parse_hex(&v))
        .unwrap_or(RGBColor(128, 128, 128))
}

fn theme() -> Theme {
    Theme {
        fg: css_color("--fg"),
        muted: css_color("--muted"),
        grid: css_color("--grid"),
        bg: css_color("--card"),
        good: css_color("--good"),
        bad: css_color("--bad"),
    }
}

fn rgba(c: RGBColor, a: f64) -> String {
    format!("rgba({},{},{},{a})", c.0, c.1, c.2)
}

/// A drawn point in CSS pixels relative to the canvas, with its tooltip.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    pub x: f64,
    pub y: f64,
    pub tip: String,
}

const X_TICKS: [f64; 17] = [
    0.1, 0.2, 0.3, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 7.0, 10.0, 14.0, 20.0, 30.0, 50.0, 70.0, 100.0,
];

fn tick_label(x: f64) -> String {
    let s = if x.abs() < 0.95 && x != 0.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.1}")
    };
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Round-numbered ticks covering `lo..hi`: about `n` linear steps of 1/2/5 × 10^k, or the 1-2-5
/// values of each decade on a log axis.
pub fn nice_ticks(lo: f64, hi: f64, n: usize, log: bool) -> Vec<f64> {
    let mut out = Vec::new();
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo {
        return out;
    }
    if log {
        // 1-2-5 per decade; a range narrower than that (e.g. 8–11 ms) gets every integer multiple,
        // so the axis never shows a single lonely label.
        for mults in [
            &[1.0, 2.0, 5.0][..],
            &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0][..],
        ] {
            out.clear();
            let mut p = 10f64.powf(lo.max(1e-12).log10().floor());
            while p <= hi * 1.001 {
                for m in mults {
                    let t = p * m;
                    if t >= lo * 0.999 && t <= hi * 1.001 {
                        out.push(t);
                    }
                }
                p *= 10.0;
            }
            if out.len() >= 3 {
                break;
            }
        }
        return out;
    }
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut t = (lo / step).ceil() * step;
    while t <= hi + step * 1e-9 {
        out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    out
}

/// Draw `spec` on `canvas` (sized to its CSS box × devicePixelRatio). Returns the hit list.
pub fn draw(canvas: &web_sys::HtmlCanvasElement, spec: &Spec) -> Option<Vec<Hit>> {
    let w = util::window();
    let dpr = w.device_pixel_ratio().max(1.0);
    let rect = canvas.get_bounding_client_rect();
    let (css_w, css_h) = (rect.width().max(200.0), rect.height().max(160.0));
    canvas.set_width((css_w * dpr).round() as u32);
    canvas.set_height((css_h * dpr).round() as u32);
    let narrow = css_w < 520.0;
    let s = |v: f64| (v * dpr).round();
    let si = |v: f64| (v * dpr).round() as u32;
    let th = theme();
    let ctx: CanvasRenderingContext2d = canvas.get_context("2d").ok()??.dyn_into().ok()?;

    let backend = CanvasBackend::with_canvas_object(canvas.clone())?;
    let root = backend.into_drawing_area();
    root.fill(&th.bg).ok()?;

    let (x0, x1) = spec.x_range;
    let (y0, y1) = spec.y_range;
    // The y axis is linear in `ty(y)`: identity, or ln for a log axis (ticks keep data values).
    let y_log = spec.y_log && y0 > 0.0;
    let ty = move |y: f64| if y_log { y.max(1e-12).ln() } else { y };
    // A log y axis gets its grid and labels drawn below (plotters' own y ticks are linear).
    let y_keys: Vec<f64> = if y_log {
        nice_ticks(y0, y1, 0, true)
    } else {
        Vec::new()
    };
    let keys: Vec<f64> = if spec.x_ticks.is_empty() {
        X_TICKS
            .iter()
            .copied()
            .filter(|x| *x >= x0 * 0.999 && *x <= x1 * 1.001)
            .filter(|x| !narrow || ![0.2, 1.5, 14.0, 20.0, 70.0].contains(x))
            .collect()
    } else {
        spec.x_ticks.clone()
    };
    let font = "system-ui, sans-serif";
    let label_px = if narrow { 11.0 } else { 12.0 };
    let mut chart = ChartBuilder::on(&root)
        .margin_top(si(14.0))
        .margin_right(si(if narrow { 10.0 } else { 18.0 }))
        .margin_bottom(si(6.0))
        .margin_left(si(6.0))
        .x_label_area_size(si(44.0))
        .y_label_area_size(si(if narrow { 62.0 } else { 78.0 }))
        .build_cartesian_2d((x0..x1).log_scale().with_key_points(keys), ty(y0)..ty(y1))
        .ok()?;
    let label_style = TextStyle::from((font, s(label_px)).into_font()).color(&th.muted);
    let desc_style = TextStyle::from((font, s(label_px + 1.0)).into_font()).color(&th.fg);
    let y_plain = spec.y_plain;
    let y_fmt = |y: &f64| {
        let v = if y.abs() < 1e-9 { 0.0 } else { *y };
        if y_plain {
            return tick_label(v);
        }
        let t = format!("{v:.0}");
        if v > 0.0 {
            format!("+{t}%")
        } else {
            format!("{}%", t.replacen('-', "−", 1))
        }
    };
    chart
        .configure_mesh()
        .x_desc(spec.x_label.as_str())
        .y_desc(spec.y_label.as_str())
        .x_label_formatter(&|x: &f64| tick_label(*x))
        .y_label_formatter(&y_fmt)
        .y_labels(if y_log {
            0
        } else if narrow {
            6
        } else {
            8
        })
        .label_style(label_style)
        .axis_desc_style(desc_style)
        .bold_line_style(th.grid.stroke_width(si(1.0)))
        .light_line_style(TRANSPARENT)
        .axis_style(th.grid.stroke_width(si(1.0)))
        .draw()
        .ok()?;

    let px = |x: f64, y: f64| {
        let (a, b) = chart.backend_coord(&(x.clamp(x0, x1), ty(y)));
        (a as f64, b as f64)
    };
    let (left, top) = px(x0, y1);
    let (right, bottom) = px(x1, y0);
    if !y_keys.is_empty() {
        ctx.set_font(&format!("{}px {font}", s(label_px)));
        ctx.set_text_align("right");
        ctx.set_text_baseline("middle");
        for k in &y_keys {
            let (_, y) = px(x0, *k);
            ctx.set_stroke_style_str(&rgba(th.grid, 1.0));
            ctx.set_line_width(s(1.0));
            ctx.begin_path();
            ctx.move_to(left, y.round() + 0.5);
            ctx.line_to(right, y.round() + 0.5);
            ctx.stroke();
            ctx.set_fill_style_str(&rgba(th.muted, 1.0));
            let _ = ctx.fill_text(&tick_label(*k), left - s(6.0), y);
        }
    }
    ctx.save();
    // plotters leaves its last text baseline / alignment on the context.
    ctx.set_text_baseline("alphabetic");
    ctx.begin_path();
    ctx.rect(left, top, right - left, bottom - top);
    ctx.clip();

    if spec.shade && y0 < 0.0 && y1 > 0.0 {
        let (_, zy) = px(x0, 0.0);
        ctx.set_fill_style_str(&rgba(th.bad, 0.07));
        ctx.fill_rect(left, top, right - left, zy - top);
        ctx.set_fill_style_str(&rgba(th.good, 0.08));
        ctx.fill_rect(left, zy, right - left, bottom - zy);
        ctx.set_stroke_style_str(&rgba(th.fg, 0.55));
        ctx.set_line_width(s(1.2));
        let dash = js_sys::Array::of2(&s(5.0).into(), &s(4.0).into());
        let _ = ctx.set_line_dash(&dash);
        ctx.begin_path();
        ctx.move_to(left, zy);
        ctx.line_to(right, zy);
        ctx.stroke();
        let _ = ctx.set_line_dash(&js_sys::Array::new());
        // Labels in the plot's left corners, on a card-coloured plate so data stays readable.
        ctx.set_font(&format!("600 {}px {font}", s(label_px)));
        ctx.set_text_align("left");
        let plate = |ctx: &CanvasRenderingContext2d, text: &str, x: f64, y: f64, col: RGBColor| {
            let w = ctx.measure_text(text).map(|m| m.width()).unwrap_or(0.0);
            ctx.set_fill_style_str(&rgba(th.bg, 0.82));
            ctx.fill_rect(
                x - s(4.0),
                y - s(label_px + 1.0),
                w + s(8.0),
                s(label_px + 7.0),
            );
            ctx.set_fill_style_str(&rgba(col, 1.0));
            let _ = ctx.fill_text(text, x, y);
        };
        plate(
            &ctx,
            "↑ costs more than FP16",
            left + s(8.0),
            top + s(label_px + 6.0),
            th.bad,
        );
        plate(
            &ctx,
            "↓ saves energy vs FP16",
            left + s(8.0),
            bottom - s(8.0),
            th.good,
        );
    }

    for b in &spec.bands {
        if b.pts.len() < 2 {
            continue;
        }
        let c = css_color(b.col);
        ctx.set_fill_style_str(&rgba(c, 0.18));
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

    for (vi, v) in spec.vlines.iter().enumerate() {
        if v.x < x0 || v.x > x1 {
            continue;
        }
        let c = css_color(v.col);
        let (x, _) = px(v.x, 0.0);
        ctx.set_stroke_style_str(&rgba(c, 0.8));
        ctx.set_line_width(s(1.0));
        let dash = js_sys::Array::of2(&s(2.0).into(), &s(3.0).into());
        let _ = ctx.set_line_dash(&dash);
        ctx.begin_path();
        ctx.move_to(x, top);
        ctx.line_to(x, bottom);
        ctx.stroke();
        let _ = ctx.set_line_dash(&js_sys::Array::new());
        ctx.set_font(&format!("600 {}px {font}", s(label_px)));
        ctx.set_fill_style_str(&rgba(c, 1.0));
        let right_half = x > (left + right) / 2.0;
        ctx.set_text_align(if right_half { "right" } else { "left" });
        let dx = if right_half { -s(5.0) } else { s(5.0) };
        // Below the corner label ("costs more than FP16"), one row per vertical line.
        let row = (vi as f64 + 1.0) * (label_px + 7.0);
        let _ = ctx.fill_text(&v.label, x + dx, top + s(label_px + 4.0 + row));
    }

    let mut bg_hits = Vec::with_capacity(spec.bg_marks.len());
    for m in &spec.bg_marks {
        if let Some(h) = draw_mark(&ctx, &px, m, &th, s, dpr) {
            bg_hits.push(h);
        }
    }

    for l in &spec.lines {
        if l.pts.len() < 2 {
            continue;
        }
        let c = css_color(l.col);
        ctx.set_stroke_style_str(&rgba(c, l.alpha));
        ctx.set_line_width(s(l.width));
        ctx.set_line_join("round");
        if l.dash {
            let dash = js_sys::Array::of2(&s(6.0).into(), &s(4.0).into());
            let _ = ctx.set_line_dash(&dash);
        }
        ctx.begin_path();
        let (sx, sy) = px(l.pts[0].0, l.pts[0].1);
        ctx.move_to(sx, sy);
        for p in &l.pts[1..] {
            let (x, y) = px(p.0, p.1);
            ctx.line_to(x, y);
        }
        ctx.stroke();
        let _ = ctx.set_line_dash(&js_sys::Array::new());
    }

    let mut hits = Vec::with_capacity(spec.marks.len() + bg_hits.len());
    for m in &spec.marks {
        if let Some(h) = draw_mark(&ctx, &px, m, &th, s, dpr) {
            hits.push(h);
        }
    }
    hits.extend(bg_hits);
    ctx.restore();
    Some(hits)
}

/// One marker (with its error bar and ring); its hit in CSS px.
fn draw_mark(
    ctx: &CanvasRenderingContext2d,
    px: &dyn Fn(f64, f64) -> (f64, f64),
    m: &Mark,
    th: &Theme,
    s: impl Fn(f64) -> f64,
    dpr: f64,
) -> Option<Hit> {
    if !(m.x.is_finite() && m.y.is_finite()) {
        return None;
    }
    let c = css_color(m.col);
    let (x, y) = px(m.x, m.y);
    if let Some((lo, hi)) = m.err {
        let (_, ylo) = px(m.x, lo);
        let (_, yhi) = px(m.x, hi);
        ctx.set_stroke_style_str(&rgba(c, 0.9));
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
            let _ = ctx.arc(x, y, r, 0.0, std::f64::consts::TAU);
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
        ctx.set_fill_style_str(&rgba(c, 1.0));
        ctx.fill();
        ctx.set_stroke_style_str(&rgba(th.bg, 0.9));
        ctx.set_line_width(s(1.0));
        ctx.stroke();
    } else {
        ctx.set_fill_style_str(&rgba(th.bg, 1.0));
        ctx.fill();
        ctx.set_stroke_style_str(&rgba(c, 1.0));
        ctx.set_line_width(s(2.0));
        ctx.stroke();
    }
    if m.ring {
        ctx.begin_path();
        let _ = ctx.arc(x, y, r + s(5.0), 0.0, std::f64::consts::TAU);
        ctx.set_stroke_style_str(&rgba(th.fg, 0.9));
        ctx.set_line_width(s(1.5));
        ctx.stroke();
    }
    Some(Hit {
        x: x / dpr,
        y: y / dpr,
        tip: m.tip.clone(),
    })
}

/// Index of the hit nearest to (x, y) within `radius` CSS px.
pub fn nearest(hits: &[Hit], x: f64, y: f64, radius: f64) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, h) in hits.iter().enumerate() {
        let d = (h.x - x).powi(2) + (h.y - y).powi(2);
        if d <= radius * radius && best.is_none_or(|(_, bd)| d < bd) {
            best = Some((i, d));
        }
    }
    best.map(|(i, _)| i)
}

/// A chart: canvas + text tooltip. Redraws when `spec` or the global redraw tick changes.
#[component]
pub fn Chart(
    /// What to draw.
    #[prop(into)]
    spec: Signal<Spec>,
    /// Accessible name of the canvas.
    #[prop(into)]
    label: String,
    /// `id` of the canvas (tests and CSS look for it).
    id: &'static str,
) -> impl IntoView {
    let canvas_ref = NodeRef::<leptos::html::Canvas>::new();
    let hits = StoredValue::new(Vec::<Hit>::new());
    let tip = RwSignal::new(None::<(f64, f64, String)>);
    let focus_idx = StoredValue::new(None::<usize>);
    let redraw = crate::redraw_tick();

    Effect::new(move |_| {
        let spec = spec.get();
        redraw.track();
        let Some(canvas) = canvas_ref.get() else {
            return;
        };
        let t0 = util::now_ms();
        if let Some(h) = draw(&canvas, &spec) {
            hits.set_value(h);
            let _ = canvas.set_attribute("data-painted", "1");
            let _ = canvas.set_attribute("data-marks", &spec.marks.len().to_string());
            let ms = util::now_ms() - t0;
            let _ = canvas.set_attribute("data-draw-ms", &format!("{ms:.2}"));
            crate::note_first_paint();
        }
        tip.set(None);
    });

    let show = move |i: usize| {
        hits.with_value(|h| {
            if let Some(hit) = h.get(i) {
                tip.set(Some((hit.x, hit.y, hit.tip.clone())));
            }
        })
    };
    let on_move = move |ev: web_sys::MouseEvent| {
        let x = ev.offset_x() as f64;
        let y = ev.offset_y() as f64;
        match hits.with_value(|h| nearest(h, x, y, 14.0)) {
            Some(i) => {
                focus_idx.set_value(Some(i));
                show(i)
            }
            None => tip.set(None),
        }
    };
    let on_key = move |ev: web_sys::KeyboardEvent| {
        let n = hits.with_value(|h| h.len());
        if n == 0 {
            return;
        }
        let cur = focus_idx.get_value();
        let next = match ev.key().as_str() {
            "ArrowRight" | "ArrowDown" => Some(cur.map_or(0, |i| (i + 1) % n)),
            "ArrowLeft" | "ArrowUp" => Some(cur.map_or(n - 1, |i| (i + n - 1) % n)),
            "Escape" => {
                tip.set(None);
                None
            }
            _ => return,
        };
        ev.prevent_default();
        focus_idx.set_value(next);
        if let Some(i) = next {
            show(i);
        }
    };
    let on_focus = move |_| {
        if hits.with_value(|h| !h.is_empty()) {
            let i = focus_idx.get_value().unwrap_or(0);
            focus_idx.set_value(Some(i));
            show(i);
        }
    };

    view! {
        <div class="chart-wrap">
            <canvas
                id=id
                node_ref=canvas_ref
                tabindex="0"
                role="img"
                aria-label=label
                on:mousemove=on_move
                on:mouseleave=move |_| tip.set(None)
                on:keydown=on_key
                on:focus=on_focus
                on:blur=move |_| tip.set(None)
            ></canvas>
            <div
                class="tooltip"
                role="status"
                aria-live="polite"
                class:hidden=move || tip.with(|t| t.is_none())
                class:tip-left=move || tip.with(|t| t.as_ref().is_some_and(|t| t.0 < 150.0))
                class:tip-right=move || {
                    let w = canvas_ref.get().map(|c| c.client_width() as f64).unwrap_or(1e9);
                    tip.with(|t| t.as_ref().is_some_and(|t| t.0 >= 150.0 && t.0 > w - 150.0))
                }
                class:tip-below=move || tip.with(|t| t.as_ref().is_some_and(|t| t.1 < 130.0))
                style:left=move || tip.with(|t| t.as_ref().map(|t| format!("{}px", t.0)).unwrap_or_default())
                style:top=move || tip.with(|t| t.as_ref().map(|t| format!("{}px", t.1)).unwrap_or_default())
            >
                {move || tip.with(|t| t.as_ref().map(|t| t.2.clone()).unwrap_or_default())}
            </div>
        </div>
    }
}
