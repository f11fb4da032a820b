//! The page's entry point: mounts [`web::App`] and exports two timing hooks for the
//! performance notes and the end-to-end tests (`window.wasmBindings.qe_bench_*`).

use wasm_bindgen::prelude::*;

fn main() {
    console_error_panic_hook::set_once();
    leptos::mount::mount_to_body(web::App);
}

/// Milliseconds to refit every class with `extra` synthetic user points (mean of `reps` runs).
#[wasm_bindgen]
pub fn qe_bench_refit(extra: u32, reps: u32) -> f64 {
    web::bench::refit_ms(extra, reps)
}

/// Milliseconds to redraw the overlay chart with `points` overlaid points (mean of `reps`).
#[wasm_bindgen]
pub fn qe_bench_redraw(points: u32, reps: u32) -> f64 {
    web::bench::redraw_ms(points, reps)
}
