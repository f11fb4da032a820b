//! One module per tab, plus the pieces they share (palette slots, tags, copy buttons).

// The landing build (`--features landing`, the page's first module) carries Tested models only.
#[cfg(not(feature = "landing"))]
pub mod data;
#[cfg(not(feature = "landing"))]
pub mod model;
#[cfg(not(feature = "landing"))]
pub mod optimize;
#[cfg(not(feature = "landing"))]
pub mod run;
#[cfg(not(feature = "landing"))]
pub mod sweeps;
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
    } else if p.ends_with("Q8_0") {
        "--c-q8"
    } else if p.ends_with("Q4_K") {
        "--c-q4k"
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
    [
        "FP16",
        "BF16",
        "NF4",
        "INT8",
        "INT8-pure",
        "Q8_0",
        "Q4_K",
        "Q4_0",
    ]
    .iter()
    .position(|x| x.eq_ignore_ascii_case(p))
    .unwrap_or(9)
}

/// When a session's or class's software stack is not transformers + bitsandbytes, a short label
/// that says so (its crossovers are not comparable with the NF4/INT8 rows).
pub fn other_stack(stack: &str) -> Option<String> {
    if stack.contains("bitsandbytes") {
        None
    } else if analysis::engine::is_candle_stack(stack) {
        let weights = match analysis::engine::weights_of(stack) {
            Some(report::WeightsKind::Real) => "a real model's weights",
            _ => "synthetic-weight shapes",
        };
        Some(format!(
            "different stack: candle GGUF kernels on {weights}, not bitsandbytes NF4/INT8"
        ))
    } else {
        let short = analysis::stacks::stack_label(stack);
        Some(format!("different stack: {short}, not bitsandbytes"))
    }
}

/// A provenance chip of an optimizer figure: measured / computed / interpolated / extrapolated /
/// modelled, coloured (same colours as the legend, [`TagLegend`]).
pub fn tag_chip(t: analysis::Tag) -> impl IntoView {
    view! {
        <span class=format!("tchip t-{}", t.as_str()) title=tag_meaning(t)>
            {t.as_str()}
        </span>
    }
}

pub fn tag_meaning(t: analysis::Tag) -> &'static str {
    use analysis::Tag;
    match t {
        Tag::Measured => "read off a published measurement",
        Tag::Computed => "exact arithmetic: shapes, bytes, datasheets",
        Tag::Interpolated => "inside the measured range of a fit",
        Tag::Extrapolated => "outside it, or borrowed from another architecture, size or format",
        Tag::Modelled => "a calibrated physical model (roofline, batch, context)",
    }
}

/// The legend of the provenance chips.
#[component]
pub fn TagLegend() -> impl IntoView {
    use analysis::Tag;
    view! {
        <dl class="tag-legend" aria-label="What the chips mean">
            {[Tag::Measured, Tag::Computed, Tag::Interpolated, Tag::Extrapolated, Tag::Modelled]
                .into_iter()
                .map(|t| view! {
                    <div>
                        <dt>{tag_chip(t)}</dt>
                        <dd>{tag_meaning(t)}</dd>
                    </div>
                })
                .collect_view()}
        </dl>
    }
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
pub fn NChip(
    n: Option<u32>,
    cv: Option<f64>,
    /// Physical cards behind the runs, where the row says (in the chip's title; the bar says it).
    cards: Option<u32>,
) -> impl IntoView {
    let n_txt = n
        .map(|n| format!("n = {n}"))
        .unwrap_or_else(|| "n = ?".into());
    let cv_txt = cv.map(|c| format!(" · CV {c:.1} %")).unwrap_or_default();
    let replicated = n.unwrap_or(1) >= 2;
    let kind = if replicated {
        "repeated measurement: filled marker"
    } else {
        "single measurement: hollow marker"
    };
    let title = match cards {
        Some(1) => format!("{kind}; every run on one physical card"),
        Some(c) => format!("{kind}; runs on {c} physical cards of this model"),
        None => kind.to_string(),
    };
    view! {
        <span
            class="chip"
            class:replicated=replicated
            title=title
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

/// A labelled checkbox bound to a boolean signal (the charts' display toggles).
#[leptos::component]
pub fn Toggle(
    id: &'static str,
    checked: leptos::prelude::RwSignal<bool>,
    label: &'static str,
) -> impl leptos::IntoView {
    use leptos::prelude::*;
    view! {
        <label class="check">
            <input
                type="checkbox"
                id=id
                checked=checked.get_untracked()
                prop:checked=move || checked.get()
                on:change=move |ev| checked.set(event_target_checked(&ev))
            />
            {label}
        </label>
    }
}

#[cfg(not(feature = "landing"))]
/// The software stacks with curves on `arch`, the default first (several only on the H200 today:
/// candle-graph, candle, llama.cpp).
pub fn curve_engines_on(arch: report::Arch) -> Vec<String> {
    analysis::arch_engines(analysis::default_classes(), arch)
}

#[cfg(not(feature = "landing"))]
/// The stack asked for, when `arch` has it: a link's unknown stack, or one the picked card lacks,
/// is not asked for.
pub fn stack_on(engine: Option<String>, arch: report::Arch) -> Option<String> {
    engine.filter(|e| curve_engines_on(arch).contains(e))
}

#[cfg(not(feature = "landing"))]
/// The stack picker, shown only where the card's architecture has curves of several stacks: an
/// estimate or a recommendation is one stack's, and this says which. With `every`, its first
/// option (value "", `None`) searches every stack side by side; else `None` is the default stack.
#[component]
pub fn StackSelect(
    id: &'static str,
    #[prop(into)] arch: Signal<report::Arch>,
    engine: RwSignal<Option<String>>,
    #[prop(optional)] every: Option<&'static str>,
) -> impl IntoView {
    move || {
        let engines = curve_engines_on(arch.get());
        (engines.len() > 1).then(|| {
            let cur = engine.get().filter(|e| engines.contains(e));
            let on = move |ev: web_sys::Event| {
                let v = event_target_value(&ev);
                engine.set((!v.is_empty()).then_some(v));
            };
            let first = every.map(|label| view! { <option value="" selected=cur.is_none()>{label}</option> });
            let default = engines[0].clone();
            view! {
                <label>
                    <span>"Software stack"</span>
                    <select id=id on:change=on>
                        {first}
                        {engines
                            .into_iter()
                            .map(|e| {
                                let sel = cur.as_ref().map_or(every.is_none() && e == default, |c| *c == e);
                                let label = if every.is_none() && e == default { format!("{e} (default)") } else { e.clone() };
                                view! { <option value=e selected=sel>{label}</option> }
                            })
                            .collect_view()}
                    </select>
                </label>
            }
        })
    }
}
