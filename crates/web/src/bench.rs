//! Timing hooks (exported by the page binary as `qe_bench_refit` / `qe_bench_redraw`): the
//! end-to-end tests call them in headless Chromium and print the numbers for the performance
//! notes.

use analysis::compare::Subject;
use analysis::curves::{ExtraPoint, PointOrigin};
use analysis::{ClassPoint, Point};
use report::{Arch, Precision};

use crate::tabs::run::NamedPoint;
use report::share::SharePoint;
use wasm_bindgen::JsCast;

use crate::util;

fn synthetic_points(k: u32) -> Vec<ExtraPoint> {
    (0..k)
        .map(|i| {
            let n = 0.5 * 1.07f64.powi(i as i32 % 60);
            ExtraPoint {
                arch: if i % 2 == 0 {
                    Arch::Ada
                } else {
                    Arch::Blackwell
                },
                precision: Precision::Nf4,
                engine: None,
                point: ClassPoint {
                    point: Point {
                        n,
                        delta: 40.0 - 10.0 * n.ln() + (i % 7) as f64,
                    },
                    gpu: "bench".into(),
                    model: format!("bench-{i}"),
                    n: Some(1),
                    cv_pct: None,
                    source: "bench".into(),
                    origin: PointOrigin::User,
                },
            }
        })
        .collect()
}

/// Mean ms to refit every class with `extra` user points.
pub fn refit_ms(extra: u32, reps: u32) -> f64 {
    let pts = synthetic_points(extra);
    let reps = reps.max(1);
    let t0 = util::now_ms();
    for _ in 0..reps {
        let c = crate::tabs::run::refit(&pts).classes;
        std::hint::black_box(c);
    }
    (util::now_ms() - t0) / reps as f64
}

/// Mean ms to build and draw the overlay chart with `points` overlaid points, on an 800×400 CSS
/// px canvas at the page's devicePixelRatio.
pub fn redraw_ms(points: u32, reps: u32) -> f64 {
    let doc = util::window().document().expect("document");
    let canvas: web_sys::HtmlCanvasElement = doc
        .create_element("canvas")
        .expect("canvas")
        .dyn_into()
        .expect("canvas element");
    let _ = canvas.set_attribute(
        "style",
        "width:800px;height:400px;position:absolute;left:-9999px",
    );
    let body = doc.body().expect("body");
    let _ = body.append_child(&canvas);
    let pts: Vec<NamedPoint> = (0..points)
        .map(|i| {
            let n = 0.4 * 1.01f64.powi(i as i32 % 500);
            NamedPoint {
                subject: Subject::from_share_point(&SharePoint {
                    model: format!("bench-{i}"),
                    params_b: Some(n),
                    arch: "ada".into(),
                    precision: "NF4".into(),
                    vs_fp16_pct: Some(50.0 - 12.0 * n.ln() + (i % 13) as f64),
                    basis: ["measured", "interpolated", "extrapolated"][i as usize % 3].into(),
                    gpu: "RTX 4090".into(),
                    source: None,
                }),
                name: format!("bench {i}"),
            }
        })
        .collect();
    let reps = reps.max(1);
    let t0 = util::now_ms();
    for _ in 0..reps {
        let spec = crate::tabs::run::overlay_spec(&pts, None);
        let hits = crate::chart::draw(&canvas, &spec);
        std::hint::black_box(hits);
    }
    let ms = (util::now_ms() - t0) / reps as f64;
    let _ = body.remove_child(&canvas);
    ms
}
