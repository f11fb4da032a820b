//! Charts: plotters draws the frame (log-x axis, y mesh, axis titles) on a `CanvasBackend`; the data
//! layer (bands, lines, markers, error bars) is drawn on the same 2-D context with the chart's own
//! coordinate mapping, so dashes, alpha and hollow markers stay crisp. The canvas is sized by
//! `devicePixelRatio`; every length below is in CSS pixels and scaled at draw time.
//!
//! Tooltips are an HTML `<div>` with text only, positioned over the nearest drawn point (mouse) or
//! the point selected with the arrow keys (keyboard focus on the canvas).

use leptos::prelude::*;
use plotters::prelude::*;

#[cfg(target_arch = "wasm32")]
use crate::util;

mod frame;
pub mod layers;
mod paint;
pub mod surface;

#[cfg(not(target_arch = "wasm32"))]
use surface::SvgSurface;
use surface::{Ink, Surface};

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

/// The theme's colours. The canvas resolves them from CSS at draw time; the pre-rendered SVG keeps
/// them as palette slots (`var(--fg)`, …) so it follows light and dark mode by itself.
pub struct Theme {
    fg: Ink,
    muted: Ink,
    grid: Ink,
    bg: Ink,
    good: Ink,
    bad: Ink,
}

/// The palette slots the frame (drawn by plotters, which takes concrete colours) uses, with the
/// stand-in colour each gets in SVG output; [`svg`] maps them back to their slots with CSS.
const FRAME_SLOTS: [(&str, RGBColor); 4] = [
    ("--fg", RGBColor(1, 1, 1)),
    ("--muted", RGBColor(2, 2, 2)),
    ("--grid", RGBColor(3, 3, 3)),
    ("--card", RGBColor(4, 4, 4)),
];

impl Theme {
    /// Every colour as its palette slot (SVG).
    pub fn slots() -> Theme {
        Theme {
            fg: Ink::Var("--fg"),
            muted: Ink::Var("--muted"),
            grid: Ink::Var("--grid"),
            bg: Ink::Var("--card"),
            good: Ink::Var("--good"),
            bad: Ink::Var("--bad"),
        }
    }

    /// A concrete colour for plotters: the colour itself, or a slot's stand-in.
    pub(crate) fn rgb(&self, ink: Ink) -> RGBColor {
        match ink {
            Ink::Rgb(c) => c,
            Ink::Var(v) => FRAME_SLOTS
                .iter()
                .find(|(name, _)| *name == v)
                .map(|(_, c)| *c)
                .unwrap_or(RGBColor(128, 128, 128)),
        }
    }
}

#[cfg(target_arch = "wasm32")]
fn parse_hex(s: &str) -> Option<RGBColor> {
    let s = s.trim().trim_start_matches('#');
    if s.len() != 6 {
        return None;
    }
    let v = u32::from_str_radix(s, 16).ok()?;
    Some(RGBColor((v >> 16) as u8, (v >> 8) as u8, v as u8))
}

/// Colour of a CSS custom property on `<html>` (falls back to mid grey).
#[cfg(target_arch = "wasm32")]
pub fn css_color(var: &str) -> RGBColor {
    let w = util::window();
    w.document()
        .and_then(|d| d.document_element())
        .and_then(|el| w.get_computed_style(&el).ok().flatten())
        .and_then(|st| st.get_property_value(var).ok())
        .and_then(|v| parse_hex(&v))
        .unwrap_or(RGBColor(128, 128, 128))
}

/// The current theme, resolved from CSS.
#[cfg(target_arch = "wasm32")]
fn theme() -> Theme {
    let c = |v| Ink::Rgb(css_color(v));
    Theme {
        fg: c("--fg"),
        muted: c("--muted"),
        grid: c("--grid"),
        bg: c("--card"),
        good: c("--good"),
        bad: c("--bad"),
    }
}

#[cfg(target_arch = "wasm32")]
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
#[cfg(target_arch = "wasm32")]
pub fn draw(canvas: &web_sys::HtmlCanvasElement, spec: &Spec) -> Option<Vec<Hit>> {
    use plotters_canvas::CanvasBackend;
    use wasm_bindgen::JsCast;
    let w = util::window();
    let dpr = w.device_pixel_ratio().max(1.0);
    let rect = canvas.get_bounding_client_rect();
    let (css_w, css_h) = (rect.width().max(200.0), rect.height().max(160.0));
    canvas.set_width((css_w * dpr).round() as u32);
    canvas.set_height((css_h * dpr).round() as u32);
    let ctx: web_sys::CanvasRenderingContext2d = canvas.get_context("2d").ok()??.dyn_into().ok()?;
    let backend = CanvasBackend::with_canvas_object(canvas.clone())?;
    let root = backend.into_drawing_area();
    let hits = draw_on(&root, &ctx, spec, &style_for(dpr, css_w, 1.0), &theme())?;
    // plotters leaves its last text baseline / alignment on the context.
    ctx.set_text_baseline("alphabetic");
    Some(hits)
}

/// Sizes and font of a chart `css_w` CSS pixels wide.
fn style_for(dpr: f64, css_w: f64, text_scale: f64) -> frame::Style {
    let narrow = css_w < 520.0;
    frame::Style {
        dpr,
        narrow,
        label_px: if narrow { 11.0 } else { 12.0 },
        font: "system-ui, sans-serif",
        text_scale,
    }
}

/// The chart, on any plotters backend (the frame) and [`Surface`] (the data layers) that cover
/// the same pixels: the canvas in the page, SVG at build time. One drawing code for both.
///
/// plotters draws the frame ([`frame`]); the data layers are painted in z-order by [`paint`]:
/// shading, bands, vertical lines, background marks, lines, marks. Returns the hit list.
pub fn draw_on<DB: DrawingBackend, S: Surface>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    sf: &S,
    spec: &Spec,
    style: &frame::Style,
    th: &Theme,
) -> Option<Vec<Hit>> {
    root.fill(&th.rgb(th.bg)).ok()?;
    let (x0, x1) = spec.x_range;
    let (y0, y1) = spec.y_range;
    // The y axis is linear in `ty(y)`: identity, or ln for a log axis (ticks keep data values).
    let y_log = spec.y_log && y0 > 0.0;
    let ty = move |y: f64| if y_log { y.max(1e-12).ln() } else { y };
    let chart = frame::build(root, spec, style, th, y_log, ty)?;
    let px = |x: f64, y: f64| {
        let (a, b) = chart.backend_coord(&(x.clamp(x0, x1), ty(y)));
        (a as f64, b as f64)
    };
    let (left, top) = px(x0, y1);
    let (right, bottom) = px(x1, y0);
    let plot = paint::Plot {
        ctx: sf,
        th,
        px: &px,
        style,
        left,
        top,
        right,
        bottom,
    };
    if y_log {
        plot.log_y_grid(&nice_ticks(y0, y1, 0, true), x0);
    }
    sf.set_baseline(surface::Baseline::Alphabetic);
    sf.clip_rect(left, top, right - left, bottom - top);
    if spec.shade && y0 < 0.0 && y1 > 0.0 {
        plot.shade(x0);
    }
    plot.bands(&spec.bands);
    plot.vlines(&spec.vlines, x0, x1);
    let bg_hits = plot.marks(&spec.bg_marks);
    plot.lines(&spec.lines);
    let mut hits = plot.marks(&spec.marks);
    hits.extend(bg_hits);
    sf.unclip();
    Some(hits)
}

/// `spec` as a standalone SVG of `w × h` CSS pixels, from the same [`draw_on`] as the canvas
/// (plotters' SVG backend for the frame, [`SvgSurface`] for the data layers). Colours stay
/// palette slots, so the SVG follows the page's light/dark theme; `id` keeps its clip ids unique.
#[cfg(not(target_arch = "wasm32"))]
pub fn svg(spec: &Spec, (w, h): (u32, u32), id: &str, class: &str, label: &str) -> Option<String> {
    use plotters::backend::SVGBackend;
    let mut frame_svg = String::new();
    let sf = SvgSurface::new(id);
    {
        let root = SVGBackend::with_string(&mut frame_svg, (w, h)).into_drawing_area();
        draw_on(
            &root,
            &sf,
            spec,
            &style_for(1.0, w as f64, 1.24),
            &Theme::slots(),
        )?;
        root.present().ok()?;
    }
    // plotters writes `<svg …>frame</svg>`: keep the frame, put our head and the layers around it.
    let body_start = frame_svg.find('>')? + 1;
    let body_end = frame_svg.rfind("</svg>")?;
    // plotters writes one element per line with a redundant `opacity="1"`: the page ships this.
    let frame_body = frame_svg[body_start..body_end]
        .replace(" opacity=\"1\"", "")
        .replace(" font-family=\"system-ui, sans-serif\"", "") // .chart-svg's CSS sets it
        .replace('\n', "");
    let slot_css: String = FRAME_SLOTS
        .iter()
        .map(|(var, c)| {
            let h = surface::hex(*c);
            format!("#{id} [fill=\"{h}\"]{{fill:var({var})}}#{id} [stroke=\"{h}\"]{{stroke:var({var})}}")
        })
        .collect();
    Some(format!(
        // Inline in HTML: no xmlns needed; the default preserveAspectRatio (xMidYMid meet) applies.
        "<svg id=\"{id}\" class=\"{class}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\"><style>{slot_css}</style>{}{}</svg>",
        surface::esc(label),
        frame_body,
        sf.finish()
    ))
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

/// CSS size of the pre-rendered chart on a wide screen (the canvas's box in a 1080 px column) and on
/// a phone (≤ 640 px, where the canvas is 320 px high).
pub const PRERENDER_WIDE: (u32, u32) = (994, 420);
pub const PRERENDER_NARROW: (u32, u32) = (340, 320);

/// A chart: canvas + text tooltip. Redraws when `spec` or the global redraw tick changes.
/// Built natively (the pre-render), the same drawing as SVG instead: [`prerendered_chart`].
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
    #[cfg(not(target_arch = "wasm32"))]
    return prerendered_chart(&spec.get_untracked(), &label, id);
    #[cfg(target_arch = "wasm32")]
    canvas_chart(spec, label, id)
}

/// The pre-render's chart: `spec` as SVG, one per layout (CSS shows the one that fits).
#[cfg(not(target_arch = "wasm32"))]
fn prerendered_chart(spec: &Spec, label: &str, id: &'static str) -> impl IntoView {
    let one = |size, suffix: &str| {
        svg(
            spec,
            size,
            &format!("{id}-{suffix}"),
            &format!("chart-svg {suffix}"),
            label,
        )
        .unwrap_or_default()
    };
    let both = one(PRERENDER_WIDE, "wide") + &one(PRERENDER_NARROW, "narrow");
    view! { <div class="chart-wrap prerendered" data-chart=id inner_html=both></div> }
}

/// The page's chart: a canvas painted by [`draw`], with keyboard and mouse tooltips.
#[cfg(target_arch = "wasm32")]
fn canvas_chart(spec: Signal<Spec>, label: String, id: &'static str) -> impl IntoView {
    let canvas_ref = NodeRef::<leptos::html::Canvas>::new();
    let tips = Tips::new();
    paint_on_change(canvas_ref, spec, tips);
    view! {
        <div class="chart-wrap">
            <canvas
                id=id
                node_ref=canvas_ref
                tabindex="0"
                role="img"
                aria-label=label
                on:mousemove=move |ev| tips.on_move(ev)
                on:mouseleave=move |_| tips.hide()
                on:keydown=move |ev| tips.on_key(ev)
                on:focus=move |_| tips.on_focus()
                on:blur=move |_| tips.hide()
            ></canvas>
            {tooltip(tips.tip, canvas_ref)}
        </div>
    }
}

/// A canvas chart's tooltip state: the hit targets of the last paint, the tip on screen (x, y in
/// CSS px, text) and the mark the keyboard is on.
#[cfg(target_arch = "wasm32")]
#[derive(Clone, Copy)]
struct Tips {
    hits: StoredValue<Vec<Hit>>,
    tip: RwSignal<Option<(f64, f64, String)>>,
    focus_idx: StoredValue<Option<usize>>,
}

#[cfg(target_arch = "wasm32")]
impl Tips {
    fn new() -> Tips {
        Tips {
            hits: StoredValue::new(Vec::<Hit>::new()),
            tip: RwSignal::new(None::<(f64, f64, String)>),
            focus_idx: StoredValue::new(None::<usize>),
        }
    }

    /// Show the tip of hit `i`.
    fn show(self, i: usize) {
        self.hits.with_value(|h| {
            if let Some(hit) = h.get(i) {
                self.tip.set(Some((hit.x, hit.y, hit.tip.clone())));
            }
        })
    }

    fn hide(self) {
        self.tip.set(None);
    }

    /// The mouse moved: the tip of the nearest mark within 14 px, else none.
    fn on_move(self, ev: web_sys::MouseEvent) {
        let x = ev.offset_x() as f64;
        let y = ev.offset_y() as f64;
        match self.hits.with_value(|h| nearest(h, x, y, 14.0)) {
            Some(i) => {
                self.focus_idx.set_value(Some(i));
                self.show(i)
            }
            None => self.tip.set(None),
        }
    }

    /// The arrow keys step through the marks (wrapping around), Escape hides the tip.
    fn on_key(self, ev: web_sys::KeyboardEvent) {
        let n = self.hits.with_value(|h| h.len());
        if n == 0 {
            return;
        }
        let cur = self.focus_idx.get_value();
        let next = match ev.key().as_str() {
            "ArrowRight" | "ArrowDown" => Some(cur.map_or(0, |i| (i + 1) % n)),
            "ArrowLeft" | "ArrowUp" => Some(cur.map_or(n - 1, |i| (i + n - 1) % n)),
            "Escape" => {
                self.tip.set(None);
                None
            }
            _ => return,
        };
        ev.prevent_default();
        self.focus_idx.set_value(next);
        if let Some(i) = next {
            self.show(i);
        }
    }

    /// Focus on the canvas shows the tip of the mark the keyboard was on (the first one at first).
    fn on_focus(self) {
        if self.hits.with_value(|h| !h.is_empty()) {
            let i = self.focus_idx.get_value().unwrap_or(0);
            self.focus_idx.set_value(Some(i));
            self.show(i);
        }
    }
}

/// Paint `spec` on the canvas whenever it or the global redraw tick changes: the marks' hit
/// targets go to `tips`, and the canvas's `data-` attributes say what was painted and how fast.
#[cfg(target_arch = "wasm32")]
fn paint_on_change(canvas_ref: NodeRef<leptos::html::Canvas>, spec: Signal<Spec>, tips: Tips) {
    let Tips { hits, tip, .. } = tips;
    let redraw = crate::redraw_tick();
    Effect::new(move |_| {
        let spec = spec.get();
        redraw.track();
        let Some(canvas) = canvas_ref.get() else {
            return;
        };
        // `try_`: a deferred draw may find the chart unmounted (the landing handed over).
        let paint = move || {
            if !canvas.is_connected() {
                return;
            }
            let t0 = util::now_ms();
            if let Some(h) = draw(&canvas, &spec) {
                let _ = hits.try_set_value(h);
                let _ = canvas.set_attribute("data-painted", "1");
                let _ = canvas.set_attribute("data-marks", &spec.marks.len().to_string());
                let ms = util::now_ms() - t0;
                let _ = canvas.set_attribute("data-draw-ms", &format!("{ms:.2}"));
                crate::note_first_paint();
            }
            tip.try_set(None);
        };
        // The page's first chart draws in a task of its own, after the mount's: the start stays
        // in short tasks (the pre-render is on screen meanwhile). Later draws follow their input.
        if crate::first_paint_done() {
            paint();
        } else {
            set_timeout(paint, std::time::Duration::ZERO);
        }
    });
}

/// The tooltip over the canvas: the tip's text at its point, flipped to stay inside the canvas
/// near its left, right and top edges.
#[cfg(target_arch = "wasm32")]
fn tooltip(
    tip: RwSignal<Option<(f64, f64, String)>>,
    canvas_ref: NodeRef<leptos::html::Canvas>,
) -> impl IntoView {
    view! {
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
    }
}
