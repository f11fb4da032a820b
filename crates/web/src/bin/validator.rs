//! The optional validator Web Worker (`web::validate` with the `worker` feature): the same checks
//! off the main thread, and the place for the JSON-Schema pass (`--features schema`). The default
//! page does not use it; see docs/ARCHITECTURE.md for how to put it back in `index.html`.

fn main() {
    console_error_panic_hook::set_once();
    web::validate::run_worker();
}
