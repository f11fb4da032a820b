//! The landing module: the hero and Tested models (built with `--features landing`). It paints the
//! first chart from ≈ 220 KB gz instead of the full page's ≈ 450 KB; opening any other tab makes
//! `assets/boot.js` fetch the full module, call [`qe_unmount`] and start it on the same URL.

use std::cell::RefCell;
use wasm_bindgen::prelude::*;

thread_local! {
    static MOUNTED: RefCell<Option<leptos::mount::UnmountHandle<leptos::tachys::view::any_view::AnyViewState>>> =
        const { RefCell::new(None) };
}

/// Instantiation only: `assets/boot.js` runs the start in steps, each its own task
/// ([`qe_prepare`], [`qe_mount`], then the first chart's draw), so none blocks input for long.
fn main() {
    console_error_panic_hook::set_once();
}

/// Start step 2: parse the embedded data.
#[wasm_bindgen]
pub fn qe_prepare() {
    web::prepare();
}

/// Start step 3: mount the page beside the pre-render.
#[wasm_bindgen]
pub fn qe_mount() {
    let root = web::util::app_root();
    let handle = leptos::mount::mount_to(root, || leptos::prelude::IntoAny::into_any(web::App()));
    MOUNTED.with(|m| *m.borrow_mut() = Some(handle));
}

/// Remove the landing page from the DOM (the full module takes over).
#[wasm_bindgen]
pub fn qe_unmount() {
    MOUNTED.with(|m| drop(m.borrow_mut().take()));
}
