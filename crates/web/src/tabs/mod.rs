//! One module per tab, plus the pieces they share (palette slots, tags, copy buttons).

pub mod data;
pub mod model;
pub mod run;
pub mod tested;

use leptos::prelude::*;

use crate::chart::Col;

/// Colour slot of a precision (CSS variables, colour-blind-safe palette, see `assets/style.css`).
pub fn prec_col(precision: &str) -> Col {
    let p = precision.to_ascii_uppercase();
    if p == "NF4" {
        "--c-nf4"
    } else if p == "INT8" {
        "--c-int8"
    } else if p.starts_with("INT8") {
        "--c-int8p"
    } else if p.starts_with("GGUF") || p.starts_with('Q') {
        "--c-gguf"
    } else if p == "FP16" {
        "--c-fp16"
    } else {
        "--c-other"
    }
}

/// Colour slot of a basis; the same four colours everywhere on the page.
pub fn basis_col(basis: &str) -> Col {
    match basis {
        "measured" => "--b-measured",
        "interpolated" => "--b-interpolated",
        "extrapolated" => "--b-extrapolated",
        _ => "--b-unavailable",
    }
}

/// Sort key of precisions for display.
pub fn prec_rank(p: &str) -> usize {
    ["FP16", "NF4", "INT8", "INT8-pure"]
        .iter()
        .position(|x| x.eq_ignore_ascii_case(p))
        .unwrap_or(9)
}

/// A basis tag: "measured" / "interpolated" / "extrapolated" / "unavailable", coloured.
#[component]
pub fn BasisTag(#[prop(into)] basis: Signal<String>) -> impl IntoView {
    view! {
        <span class=move || format!("tag basis basis-{}", basis.get())>
            <span class="dot" aria-hidden="true"></span>
            {move || basis.get()}
        </span>
    }
}

/// An `n` chip: "n = 2 · CV 1.5 %" (replication, as the source counts it).
#[component]
pub fn NChip(n: Option<u32>, cv: Option<f64>) -> impl IntoView {
    let n_txt = n
        .map(|n| format!("n = {n}"))
        .unwrap_or_else(|| "n = ?".into());
    let cv_txt = cv.map(|c| format!(" · CV {c:.1} %")).unwrap_or_default();
    let replicated = n.unwrap_or(1) >= 2;
    view! {
        <span
            class="chip"
            class:replicated=replicated
            title=if replicated {
                "repeated measurement: filled marker"
            } else {
                "single measurement: hollow marker"
            }
        >
            {n_txt}
            {cv_txt}
        </span>
    }
}

/// A button that copies `text` and says so for two seconds.
#[component]
pub fn CopyButton(
    #[prop(into)] text: Signal<String>,
    #[prop(into)] label: String,
    #[prop(optional, into)] id: Option<String>,
) -> impl IntoView {
    let state = RwSignal::new(0u8); // 0 idle, 1 copied, 2 failed
    let label2 = label.clone();
    view! {
        <button
            class="btn"
            id=id
            on:click=move |_| {
                let t = text.get_untracked();
                leptos::task::spawn_local(async move {
                    let ok = crate::util::copy_text(t).await;
                    state.set(if ok { 1 } else { 2 });
                    set_timeout(move || state.set(0), std::time::Duration::from_secs(2));
                });
            }
        >
            {move || match state.get() {
                1 => "Copied ✓".to_string(),
                2 => "Copy failed — select the text".to_string(),
                _ => label2.clone(),
            }}
        </button>
    }
}
