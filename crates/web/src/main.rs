//! The page's entry point: mounts [`web::App`] and exports two timing hooks for the
//! performance notes and the end-to-end tests (`window.wasmBindings.qe_bench_*`).

#[cfg(target_arch = "wasm32")]
use wasm_bindgen::prelude::*;

fn main() {
    console_error_panic_hook::set_once();
    // The same module serves as the report-checking Web Worker (`assets/worker.js` starts it there):
    // no window means worker, so it answers requests instead of mounting the page. Validation thus
    // never blocks the page, at no extra download (the browser already has this module).
    if web_sys::window().is_none() {
        web::validate::run_worker();
        return;
    }
    web::provide_page_data();
    leptos::mount::mount_to(web::util::app_root(), web::App).forget();
}

/// Milliseconds to refit every class with `extra` synthetic user points (mean of `reps` runs).
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen]
pub fn qe_bench_refit(extra: u32, reps: u32) -> f64 {
    web::bench::refit_ms(extra, reps)
}

/// Milliseconds to redraw the overlay chart with `points` overlaid points (mean of `reps`).
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen]
pub fn qe_bench_redraw(points: u32, reps: u32) -> f64 {
    web::bench::redraw_ms(points, reps)
}
