//! The chart's frame, drawn by plotters: log-x axis with key ticks, y mesh with signed-percent
//! labels, axis titles.

use plotters::coord::combinators::{BindKeyPoints, WithKeyPoints};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::{tick_label, Spec, Theme, X_TICKS};

/// Sizes shared by the frame and the data layers.
pub struct Style {
    /// devicePixelRatio (≥ 1).
    pub dpr: f64,
    /// A canvas narrower than 520 CSS px: fewer ticks, smaller margins.
    pub narrow: bool,
    /// Tick-label size, CSS px.
    pub label_px: f64,
    /// The font family of every label.
    pub font: &'static str,
    /// Factor on the frame's text sizes: plotters' SVG backend writes `size / 1.24` as the font
    /// size where the canvas backend writes `size` px; 1.24 makes both the same.
    pub text_scale: f64,
}

impl Style {
    /// A CSS length in device pixels.
    pub fn s(&self, v: f64) -> f64 {
        (v * self.dpr).round()
    }
    fn si(&self, v: f64) -> u32 {
        (v * self.dpr).round() as u32
    }
}

/// The x coordinate: log scale with key points.
type XCoord = WithKeyPoints<LogCoord<f64>>;

/// Build the chart on `root` and draw its mesh; `ty` maps a y value onto the (linear) axis.
pub fn build<'a, DB: DrawingBackend>(
    root: &'a DrawingArea<DB, Shift>,
    spec: &Spec,
    st: &Style,
    th: &Theme,
    y_log: bool,
    ty: impl Fn(f64) -> f64,
) -> Option<ChartContext<'a, DB, Cartesian2d<XCoord, RangedCoordf64>>> {
    let (x0, x1) = spec.x_range;
    let (y0, y1) = spec.y_range;
    let keys: Vec<f64> = if spec.x_ticks.is_empty() {
        X_TICKS
            .iter()
            .copied()
            .filter(|x| *x >= x0 * 0.999 && *x <= x1 * 1.001)
            .filter(|x| !st.narrow || ![0.2, 1.5, 14.0, 20.0, 70.0].contains(x))
            .collect()
    } else {
        spec.x_ticks.clone()
    };
    let mut chart = ChartBuilder::on(root)
        .margin_top(st.si(14.0))
        .margin_right(st.si(if st.narrow { 10.0 } else { 18.0 }))
        .margin_bottom(st.si(6.0))
        .margin_left(st.si(6.0))
        .x_label_area_size(st.si(44.0))
        .y_label_area_size(st.si(if st.narrow { 62.0 } else { 78.0 }))
        .build_cartesian_2d((x0..x1).log_scale().with_key_points(keys), ty(y0)..ty(y1))
        .ok()?;
    let (muted, fg) = (th.rgb(th.muted), th.rgb(th.fg));
    let label_style =
        TextStyle::from((st.font, st.s(st.label_px) * st.text_scale).into_font()).color(&muted);
    let desc_style =
        TextStyle::from((st.font, st.s(st.label_px + 1.0) * st.text_scale).into_font()).color(&fg);
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
        } else if st.narrow {
            6
        } else {
            8
        })
        .label_style(label_style)
        .axis_desc_style(desc_style)
        .bold_line_style(th.rgb(th.grid).stroke_width(st.si(1.0)))
        .light_line_style(TRANSPARENT)
        .axis_style(th.rgb(th.grid).stroke_width(st.si(1.0)))
        .draw()
        .ok()?;
    Some(chart)
}
