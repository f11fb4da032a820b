//! Small browser helpers: number formatting, clipboard, downloads, timing. No formulas live here:
//! every figure shown comes from `analysis` or `report`.

use analysis::sweeps::SweepCell;
use analysis::verdict::Direction;
use wasm_bindgen::{JsCast, JsValue};

pub use analysis::verdict::signed_pct as pct;

/// The model a row measures, without the engine a campaign appends to its name
/// (`Qwen2-7B [llama.cpp]` measures Qwen2-7B): one pick shows every stack's session of a model.
pub fn base_model(name: &str) -> &str {
    match name.rfind(" [") {
        Some(i) if name.ends_with(']') => &name[..i],
        _ => name,
    }
}

/// A plain number with a typographic minus.
pub fn num(x: f64, dp: usize) -> String {
    let s = format!("{:.*}", dp, x);
    s.replacen('-', "−", 1)
}

/// A 95 % half-width in points as `±4`, or `±0.4` where it rounds to under one point.
pub fn plus_minus(half: f64) -> String {
    format!("±{}", num(half, if half < 0.95 { 1 } else { 0 }))
}

/// Energy per generated token (mJ) as energy per one million tokens: `3.38 MJ (0.94 kWh)`.
/// 1 mJ/token × 10⁶ tokens = 1 kJ.
pub fn per_million(mj_per_token: f64) -> (String, String) {
    let kj = mj_per_token; // kJ per 1M tokens
    let main = if kj >= 1000.0 {
        format!("{:.2} MJ", kj / 1000.0)
    } else {
        format!("{kj:.0} kJ")
    };
    let kwh = kj / 3600.0;
    (main, format!("{kwh:.2} kWh"))
}

/// Model size: `0.5 B`, `7 B`, `1.1 B`.
pub fn size_b(n: f64) -> String {
    if (n - n.round()).abs() < 1e-9 {
        format!("{n:.0} B")
    } else if n < 1.0 {
        format!("{n:.2} B").replace(".50 B", ".5 B")
    } else {
        let s = format!("{n:.2}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        format!("{s} B")
    }
}

pub fn window() -> web_sys::Window {
    web_sys::window().expect("a browser window")
}

/// Milliseconds since page start (`performance.now()`).
pub fn now_ms() -> f64 {
    window().performance().map(|p| p.now()).unwrap_or(0.0)
}

/// A `performance.mark` (the start-up steps, read by `scripts/perf/main-thread.mjs`).
pub fn mark(name: &str) {
    if let Some(p) = window().performance() {
        let _ = p.mark(name);
    }
}

/// Copy text to the clipboard; resolves to whether it worked. The Clipboard API only exists in
/// secure contexts (https, localhost): elsewhere this answers `false` instead of throwing.
pub async fn copy_text(text: String) -> bool {
    let nav = window().navigator();
    let has_clipboard = js_sys::Reflect::get(&nav, &JsValue::from_str("clipboard"))
        .map(|c| c.is_object())
        .unwrap_or(false);
    if !has_clipboard {
        return false;
    }
    let clip = nav.clipboard();
    wasm_bindgen_futures::JsFuture::from(clip.write_text(&text))
        .await
        .is_ok()
}

/// Offer `content` as a file download (a `blob:` URL clicked programmatically, then revoked).
pub fn download(name: &str, mime: &str, content: &str) -> Result<(), JsValue> {
    let parts = js_sys::Array::of1(&JsValue::from_str(content));
    let opts = web_sys::BlobPropertyBag::new();
    opts.set_type(mime);
    let blob = web_sys::Blob::new_with_str_sequence_and_options(&parts, &opts)?;
    let url = web_sys::Url::create_object_url_with_blob(&blob)?;
    let doc = window().document().ok_or("no document")?;
    let a: web_sys::HtmlAnchorElement = doc.create_element("a")?.dyn_into()?;
    a.set_href(&url);
    a.set_download(name);
    a.click();
    web_sys::Url::revoke_object_url(&url)?;
    Ok(())
}

/// The page URL without query and fragment (works under a sub-path such as `/quantenergy/`).
pub fn base_url() -> String {
    let loc = window().location();
    let origin = loc.origin().unwrap_or_default();
    let path = loc.pathname().unwrap_or_else(|_| "/".into());
    format!("{origin}{path}")
}

/// The full current URL (the permalink of what is on screen).
pub fn current_url() -> String {
    window().location().href().unwrap_or_default()
}

/// Hand the pre-rendered landing (`#prerender`, see `crate::prerender`) over to the page, which
/// now covers it: `assets/boot.js`'s `qeSettle` removes all of it but its skip link and hero (which
/// only the pre-render has, see `static_head` in lib.rs) and drops `qe-pre`,
/// which kept `#app` invisible. Same layout, so nothing moves. (In JavaScript: the DOM calls it
/// needs would cost the page modules a kilobyte of bindings.)
pub fn settle_prerender() {
    use wasm_bindgen::JsCast;
    let w = window();
    if let Some(f) = js_sys::Reflect::get(&w, &"qeSettle".into())
        .ok()
        .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
    {
        let _ = f.call0(&w);
    }
}

/// Where the page mounts: `#app` (beside the pre-rendered landing), or `<body>` without one.
pub fn app_root() -> web_sys::HtmlElement {
    use wasm_bindgen::JsCast;
    let doc = window().document().expect("a document");
    doc.get_element_by_id("app")
        .and_then(|e| e.dyn_into::<web_sys::HtmlElement>().ok())
        .or_else(|| doc.body())
        .expect("a <body>")
}

/// Publish a number for the end-to-end tests and the performance notes (`window.qe.<key>`).
pub fn publish_metric(key: &str, value: f64) {
    let w = window();
    let qe = js_sys::Reflect::get(&w, &"qe".into())
        .ok()
        .filter(|v| v.is_object())
        .unwrap_or_else(|| {
            let o: JsValue = js_sys::Object::new().into();
            let _ = js_sys::Reflect::set(&w, &"qe".into(), &o);
            o
        });
    let _ = js_sys::Reflect::set(&qe, &key.into(), &value.into());
}

/// Stable insertion sort by a key. The page sorts a handful of short lists; one tiny sort per
/// call site instead of the standard library's driftsort (which is monomorphized at every call
/// site and cost the page module ~35 KB).
pub fn sort_by_key<T, K: PartialOrd>(v: &mut [T], key: impl Fn(&T) -> K) {
    for i in 1..v.len() {
        let mut j = i;
        while j > 0 && key(&v[j - 1]) > key(&v[j]) {
            v.swap(j - 1, j);
            j -= 1;
        }
    }
}

/// A model size typed by a user, in billions of parameters: finite, > 0 and ≤ 2000, else `None`
/// (the input keeps its last good value).
pub fn parse_params_b(text: &str) -> Option<f64> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0 && *v <= 2000.0)
}

/// A diverging bar around FP16 (left: saves, right: costs more) and the signed ΔE with its interval.
pub fn delta_bar(h: &mut String, c: SweepCell, scale: f64) {
    let (d, interval) = (c.delta_pct.unwrap_or(0.0), c.interval);
    let (fill, text) = match c.direction() {
        Direction::Saves => ("good-bg", "delta good"),
        Direction::Costs => ("bad-bg", "delta bad"),
        Direction::Neutral => ("neutral-bg", "delta"),
    };
    let side = if d < 0.0 { "right" } else { "left" };
    let width = num((d.abs() / scale).min(1.0) * 50.0, 1);
    for part in [
        "<span class=\"dbar\" aria-hidden=\"true\"><span class=\"dbar-fill ",
        fill,
        "\" style=\"",
        side,
        ":50%;width:",
        &width,
        "%\"></span></span><span class=\"",
        text,
        "\">",
        &pct(d, 1),
    ] {
        h.push_str(part);
    }
    if let Some((lo, hi)) = interval {
        h.push_str("<span class=\"sub inline\"> ");
        h.push_str(&plus_minus((hi - lo) / 2.0));
        h.push_str("</span>");
    } else if c.single_run {
        h.push_str("<span class=\"sub inline\"> one run: no interval</span>");
    }
    h.push_str("</span>");
}
