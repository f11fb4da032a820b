//! Where the data layers are painted: a small, canvas-shaped drawing surface with two
//! implementations, so one painting code ([`super::paint`]) serves both the interactive chart and
//! the pre-rendered one:
//!
//! * the browser's `CanvasRenderingContext2d` (the page, in wasm);
//! * [`SvgSurface`], which writes the same calls as SVG elements (the build-time pre-render, and
//!   tests on the host).
//!
//! Colours are [`Ink`]s: a palette slot (a CSS custom property) or a concrete colour. The canvas
//! resolves a slot against the current theme at draw time; SVG keeps `var(--slot)`, so the
//! pre-rendered chart follows light and dark mode without JavaScript.

use plotters::prelude::RGBColor;
use std::cell::RefCell;
use std::fmt::Write;

/// A colour: a palette slot (CSS custom property, e.g. `--c-nf4`) or a concrete colour.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Ink {
    /// `var(--name)`: resolved by the canvas at draw time, kept as is in SVG.
    Var(&'static str),
    /// A concrete colour.
    Rgb(RGBColor),
}

/// Horizontal anchor of text.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Align {
    Left,
    Right,
}

/// Vertical anchor of text.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Baseline {
    Alphabetic,
    Middle,
}

/// The drawing calls the data layers make (a subset of the canvas 2-D API, in device pixels).
pub trait Surface {
    fn set_fill(&self, ink: Ink, alpha: f64);
    fn set_stroke(&self, ink: Ink, alpha: f64);
    fn set_line_width(&self, w: f64);
    /// Dash pattern (on, off, …); empty = solid.
    fn set_dash(&self, pattern: &[f64]);
    /// Round line joins (lines); the default is miter.
    fn set_round_join(&self);
    /// A CSS font shorthand, e.g. `600 12px system-ui, sans-serif`.
    fn set_font(&self, font: &str);
    fn set_align(&self, a: Align);
    fn set_baseline(&self, b: Baseline);
    fn begin_path(&self);
    fn move_to(&self, x: f64, y: f64);
    fn line_to(&self, x: f64, y: f64);
    /// A whole circle as a closed sub-path.
    fn circle(&self, x: f64, y: f64, r: f64);
    fn rect(&self, x: f64, y: f64, w: f64, h: f64);
    fn close_path(&self);
    fn fill(&self);
    fn stroke(&self);
    fn fill_rect(&self, x: f64, y: f64, w: f64, h: f64);
    fn fill_text(&self, text: &str, x: f64, y: f64);
    /// Width of `text` in the current font, device pixels.
    fn measure_text(&self, text: &str) -> f64;
    /// Clip what follows to a rectangle until [`Surface::unclip`].
    fn clip_rect(&self, x: f64, y: f64, w: f64, h: f64);
    fn unclip(&self);
}

/// `#rrggbb` of a colour.
pub fn hex(c: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

/// Pen state of the SVG surface.
#[derive(Clone)]
struct Pen {
    fill: (Ink, f64),
    stroke: (Ink, f64),
    width: f64,
    dash: Vec<f64>,
    round: bool,
    font: String,
    align: Align,
    baseline: Baseline,
}

struct SvgState {
    pen: Pen,
    path: String,
    out: String,
    clips: usize,
    open_clip: bool,
    /// The last element is a fill of the current path: a stroke of the same path joins it (one
    /// element, painted fill then stroke as the canvas does).
    just_filled: bool,
}

/// Writes surface calls as SVG elements (no `<svg>` wrapper: see [`super::svg`]).
pub struct SvgSurface {
    /// Prefix of clip-path ids: unique per chart in one document.
    id: String,
    st: RefCell<SvgState>,
}

/// A CSS colour value.
fn css(ink: Ink) -> String {
    match ink {
        Ink::Var(v) => format!("var({v})"),
        Ink::Rgb(c) => hex(c),
    }
}

/// Text and attribute escaping.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Numbers in SVG output: two decimals at most, no trailing zeros.
fn n(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// `;fill-opacity:a` (or stroke-), nothing when opaque.
fn opacity(what: &str, a: f64) -> String {
    if a >= 1.0 {
        String::new()
    } else {
        format!(";{what}-opacity:{}", n(a))
    }
}

/// Pixel size of a CSS font shorthand (`… 12px family`), 12 when absent.
fn font_px(font: &str) -> f64 {
    font.split_whitespace()
        .find_map(|t| t.strip_suffix("px").and_then(|v| v.parse().ok()))
        .unwrap_or(12.0)
}

impl SvgSurface {
    pub fn new(id: &str) -> SvgSurface {
        SvgSurface {
            id: id.to_string(),
            st: RefCell::new(SvgState {
                pen: Pen {
                    fill: (Ink::Rgb(RGBColor(0, 0, 0)), 1.0),
                    stroke: (Ink::Rgb(RGBColor(0, 0, 0)), 1.0),
                    width: 1.0,
                    dash: Vec::new(),
                    round: false,
                    font: "12px sans-serif".into(),
                    align: Align::Left,
                    baseline: Baseline::Alphabetic,
                },
                path: String::new(),
                out: String::new(),
                clips: 0,
                open_clip: false,
                just_filled: false,
            }),
        }
    }

    /// The elements written so far.
    pub fn finish(self) -> String {
        let mut st = self.st.into_inner();
        if st.open_clip {
            st.out.push_str("</g>");
        }
        st.out
    }

    fn fill_style(p: &Pen) -> String {
        format!("fill:{}{}", css(p.fill.0), opacity("fill", p.fill.1))
    }
}

impl Surface for SvgSurface {
    fn set_fill(&self, ink: Ink, alpha: f64) {
        self.st.borrow_mut().pen.fill = (ink, alpha);
    }
    fn set_stroke(&self, ink: Ink, alpha: f64) {
        self.st.borrow_mut().pen.stroke = (ink, alpha);
    }
    fn set_line_width(&self, w: f64) {
        self.st.borrow_mut().pen.width = w;
    }
    fn set_dash(&self, pattern: &[f64]) {
        self.st.borrow_mut().pen.dash = pattern.to_vec();
    }
    fn set_round_join(&self) {
        self.st.borrow_mut().pen.round = true;
    }
    fn set_font(&self, font: &str) {
        self.st.borrow_mut().pen.font = font.to_string();
    }
    fn set_align(&self, a: Align) {
        self.st.borrow_mut().pen.align = a;
    }
    fn set_baseline(&self, b: Baseline) {
        self.st.borrow_mut().pen.baseline = b;
    }
    fn begin_path(&self) {
        let mut st = self.st.borrow_mut();
        st.path.clear();
        st.just_filled = false;
    }
    fn move_to(&self, x: f64, y: f64) {
        let _ = write!(self.st.borrow_mut().path, "M{} {}", n(x), n(y));
    }
    fn line_to(&self, x: f64, y: f64) {
        let _ = write!(self.st.borrow_mut().path, "L{} {}", n(x), n(y));
    }
    fn circle(&self, x: f64, y: f64, r: f64) {
        let (a, b, rr) = (n(x + r), n(x - r), n(r));
        let y = n(y);
        let _ = write!(
            self.st.borrow_mut().path,
            "M{a} {y}A{rr} {rr} 0 1 0 {b} {y}A{rr} {rr} 0 1 0 {a} {y}Z"
        );
    }
    fn rect(&self, x: f64, y: f64, w: f64, h: f64) {
        let _ = write!(
            self.st.borrow_mut().path,
            "M{} {}h{}v{}h{}Z",
            n(x),
            n(y),
            n(w),
            n(h),
            n(-w)
        );
    }
    fn close_path(&self) {
        self.st.borrow_mut().path.push('Z');
    }
    fn fill(&self) {
        let mut st = self.st.borrow_mut();
        if st.path.is_empty() {
            return;
        }
        let el = format!(
            "<path d=\"{}\" style=\"{}\"/>",
            st.path,
            Self::fill_style(&st.pen)
        );
        st.just_filled = true;
        st.out.push_str(&el);
    }
    fn stroke(&self) {
        let mut st = self.st.borrow_mut();
        if st.path.is_empty() {
            return;
        }
        let p = &st.pen;
        let mut style = format!(
            "stroke:{}{};stroke-width:{}",
            css(p.stroke.0),
            opacity("stroke", p.stroke.1),
            n(p.width)
        );
        if !p.dash.is_empty() {
            let d: Vec<String> = p.dash.iter().map(|v| n(*v)).collect();
            let _ = write!(style, ";stroke-dasharray:{}", d.join(" "));
        }
        if p.round {
            style.push_str(";stroke-linejoin:round");
        }
        if std::mem::take(&mut st.just_filled) {
            // Fill and stroke of one path: one element (its `"/>` is the last 3 bytes).
            let end = st.out.len() - 3;
            st.out.insert_str(end, &format!(";{style}"));
        } else {
            let el = format!("<path d=\"{}\" style=\"fill:none;{style}\"/>", st.path);
            st.out.push_str(&el);
        }
    }
    fn fill_rect(&self, x: f64, y: f64, w: f64, h: f64) {
        let mut st = self.st.borrow_mut();
        st.just_filled = false;
        let el = format!(
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" style=\"{}\"/>",
            n(x),
            n(y),
            n(w.max(0.0)),
            n(h.max(0.0)),
            Self::fill_style(&st.pen)
        );
        st.out.push_str(&el);
    }
    fn fill_text(&self, text: &str, x: f64, y: f64) {
        let mut st = self.st.borrow_mut();
        st.just_filled = false;
        let p = &st.pen;
        let anchor = match p.align {
            Align::Left => "",
            Align::Right => " text-anchor=\"end\"",
        };
        let base = match p.baseline {
            Baseline::Alphabetic => "",
            Baseline::Middle => " dominant-baseline=\"central\"",
        };
        let el = format!(
            "<text x=\"{}\" y=\"{}\"{anchor}{base} style=\"font:{};{}\">{}</text>",
            n(x),
            n(y),
            esc(&p.font),
            Self::fill_style(p),
            esc(text)
        );
        st.out.push_str(&el);
    }
    fn measure_text(&self, text: &str) -> f64 {
        // No font metrics at build time: an average glyph of system-ui is ≈ 0.55 em.
        font_px(&self.st.borrow().pen.font) * 0.55 * text.chars().count() as f64
    }
    fn clip_rect(&self, x: f64, y: f64, w: f64, h: f64) {
        let mut st = self.st.borrow_mut();
        st.just_filled = false;
        st.clips += 1;
        let id = format!("{}-clip{}", self.id, st.clips);
        let el = format!(
            "<clipPath id=\"{id}\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/></clipPath><g clip-path=\"url(#{id})\">",
            n(x),
            n(y),
            n(w),
            n(h)
        );
        st.out.push_str(&el);
        st.open_clip = true;
    }
    fn unclip(&self) {
        let mut st = self.st.borrow_mut();
        st.just_filled = false;
        if st.open_clip {
            st.out.push_str("</g>");
            st.open_clip = false;
        }
    }
}

/// The page's canvas: every call maps onto the 2-D context; palette slots are resolved against
/// the theme of the moment.
#[cfg(target_arch = "wasm32")]
mod canvas {
    use super::{super::css_color, super::rgba, Align, Baseline, Ink, Surface};
    use web_sys::CanvasRenderingContext2d;

    fn color(ink: Ink, alpha: f64) -> String {
        match ink {
            Ink::Var(v) => rgba(css_color(v), alpha),
            Ink::Rgb(c) => rgba(c, alpha),
        }
    }

    impl Surface for CanvasRenderingContext2d {
        fn set_fill(&self, ink: Ink, alpha: f64) {
            self.set_fill_style_str(&color(ink, alpha));
        }
        fn set_stroke(&self, ink: Ink, alpha: f64) {
            self.set_stroke_style_str(&color(ink, alpha));
        }
        fn set_line_width(&self, w: f64) {
            CanvasRenderingContext2d::set_line_width(self, w);
        }
        fn set_dash(&self, pattern: &[f64]) {
            let a = js_sys::Array::new();
            for v in pattern {
                a.push(&(*v).into());
            }
            let _ = self.set_line_dash(&a);
        }
        fn set_round_join(&self) {
            self.set_line_join("round");
        }
        fn set_font(&self, font: &str) {
            CanvasRenderingContext2d::set_font(self, font);
        }
        fn set_align(&self, a: Align) {
            self.set_text_align(match a {
                Align::Left => "left",
                Align::Right => "right",
            });
        }
        fn set_baseline(&self, b: Baseline) {
            self.set_text_baseline(match b {
                Baseline::Alphabetic => "alphabetic",
                Baseline::Middle => "middle",
            });
        }
        fn begin_path(&self) {
            CanvasRenderingContext2d::begin_path(self);
        }
        fn move_to(&self, x: f64, y: f64) {
            CanvasRenderingContext2d::move_to(self, x, y);
        }
        fn line_to(&self, x: f64, y: f64) {
            CanvasRenderingContext2d::line_to(self, x, y);
        }
        fn circle(&self, x: f64, y: f64, r: f64) {
            CanvasRenderingContext2d::move_to(self, x + r, y);
            let _ = self.arc(x, y, r, 0.0, std::f64::consts::TAU);
        }
        fn rect(&self, x: f64, y: f64, w: f64, h: f64) {
            CanvasRenderingContext2d::rect(self, x, y, w, h);
        }
        fn close_path(&self) {
            CanvasRenderingContext2d::close_path(self);
        }
        fn fill(&self) {
            CanvasRenderingContext2d::fill(self);
        }
        fn stroke(&self) {
            CanvasRenderingContext2d::stroke(self);
        }
        fn fill_rect(&self, x: f64, y: f64, w: f64, h: f64) {
            CanvasRenderingContext2d::fill_rect(self, x, y, w, h);
        }
        fn fill_text(&self, text: &str, x: f64, y: f64) {
            let _ = CanvasRenderingContext2d::fill_text(self, text, x, y);
        }
        fn measure_text(&self, text: &str) -> f64 {
            CanvasRenderingContext2d::measure_text(self, text)
                .map(|m| m.width())
                .unwrap_or(0.0)
        }
        fn clip_rect(&self, x: f64, y: f64, w: f64, h: f64) {
            self.save();
            CanvasRenderingContext2d::begin_path(self);
            CanvasRenderingContext2d::rect(self, x, y, w, h);
            self.clip();
        }
        fn unclip(&self) {
            self.restore();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_surface_writes_paths_text_and_clips() {
        let s = SvgSurface::new("t");
        s.clip_rect(0.0, 0.0, 100.0, 50.0);
        s.set_fill(Ink::Var("--c-nf4"), 0.5);
        s.begin_path();
        s.move_to(1.0, 2.0);
        s.line_to(3.25, 4.0);
        s.close_path();
        s.fill();
        s.set_stroke(Ink::Rgb(RGBColor(255, 0, 16)), 1.0);
        s.set_dash(&[6.0, 4.0]);
        s.stroke();
        s.set_font("600 12px system-ui");
        s.set_align(Align::Right);
        s.fill_text("a < b & c", 10.0, 20.0);
        s.unclip();
        let out = s.finish();
        assert!(out.contains("<clipPath id=\"t-clip1\">"), "{out}");
        // Fill then stroke of one path is one element, as the canvas paints it.
        assert!(out.contains(
            "d=\"M1 2L3.25 4Z\" style=\"fill:var(--c-nf4);fill-opacity:0.5;stroke:#ff0010;stroke-width:1;stroke-dasharray:6 4\"/>"
        ), "{out}");
        assert_eq!(out.matches("<path").count(), 1);
        assert!(out.contains("text-anchor=\"end\""));
        assert!(out.contains(">a &lt; b &amp; c</text>"));
        assert_eq!(out.matches("<g ").count(), out.matches("</g>").count());
    }

    #[test]
    fn measured_text_grows_with_font_and_length() {
        let s = SvgSurface::new("t");
        s.set_font("12px x");
        let a = s.measure_text("abcd");
        s.set_font("600 24px x");
        assert!((s.measure_text("abcd") - 2.0 * a).abs() < 1e-9);
        assert!(s.measure_text("abcdabcd") > s.measure_text("abcd"));
    }
}
