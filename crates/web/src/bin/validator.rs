//! The validator Web Worker: `report::validate_str` with the JSON-Schema pass (built by trunk with
//! `--features schema`; see `index.html`). Loaded by the page on the first dropped report.

fn main() {
    console_error_panic_hook::set_once();
    web::validate::run_worker();
}
