//! The Optimize tab's "ΔE along the context" card, rendered once at build time: the measured
//! context runs (`data/anchors.csv` rows with a `context_depth`) of each card, per model and stack,
//! beside what the optimizer's context model gives at each depth ([`analysis::context`]). The
//! pre-render hook puts one `<template>` per card, and one per card and model for the Tested tab,
//! into `index.html`; the page shows them (`tabs::sweeps::context_runs`). Static data, static markup: nothing of it is computed in the
//! browser, which keeps it out of the page's wasm budget.

/// The `<template>` element holding a card's markup (`qe-context-H200`), or only one model's
/// series on that card (`qe-context-H200-Qwen2-1-5B`, the model as the Tested tab names it).
pub fn template_id(gpu: &str, model: Option<&str>) -> String {
    let name = match model {
        Some(m) => format!("{gpu}-{m}"),
        None => gpu.to_string(),
    };
    let slug: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("qe-context-{slug}")
}

/// The `<template>` whose id `template` gives, as a card with the DOM id `id`; nothing where the
/// page holds no such template (a card or model without context runs). In the landing module too:
/// the Tested tab shows its model's card.
pub fn shown(template: leptos::prelude::Signal<String>, id: &'static str) -> impl leptos::IntoView {
    use leptos::prelude::*;
    // One concrete closure for both tabs: a generic one would be rendered twice into the wasm.
    move || {
        // The pre-render has no document: the page's module shows the template once it runs.
        if cfg!(not(target_arch = "wasm32")) {
            return None;
        }
        let html = document().get_element_by_id(&template.get())?.inner_html();
        (!html.is_empty()).then(|| view! { <div class="card" id=id inner_html=html></div> })
    }
}

#[cfg(not(target_arch = "wasm32"))]
pub use markup::templates;

#[cfg(not(target_arch = "wasm32"))]
mod markup {
    use analysis::context::{context_series, ContextSeries};
    use analysis::sweeps::SweepCell;
    use analysis::Dataset;

    use crate::chart::surface::esc;
    use crate::util::{base_model, delta_bar, num, pct};

    /// What a card's context runs measure, and how to read their rows.
    const LEDE: &str = "Decode energy per output token once the depth's tokens are in the KV cache \
        (the prefill has its own window): ΔE vs the same runs' FP16 arm ± its paired 95 % interval, \
        beside the optimizer's context model at that depth and its error (model − measured). These \
        rows check the model, never fit it; a first row marked anchor is the stack's short-prompt \
        row (16 prompt tokens), which the model is fitted to.";

    /// Every card's context card as a `<template>`, and each of its models' series alone (the
    /// Tested tab's card), from `anchors` (the text of `data/anchors.csv`).
    pub fn templates(anchors: &str) -> String {
        let ds = &Dataset::parse(anchors, analysis::dataset::GPUS_CSV)
            .expect("data/anchors.csv is checked by tests");
        let all = context_series(ds, analysis::default_classes());
        let mut out = String::new();
        let mut done: Vec<&str> = Vec::new();
        for gpu in all.iter().map(|s| s.gpu.as_str()) {
            if done.contains(&gpu) {
                continue;
            }
            done.push(gpu);
            let name = ds.gpu(gpu).map_or(gpu, |g| g.name.as_str());
            let on_card: Vec<&ContextSeries> = all.iter().filter(|s| s.gpu == gpu).collect();
            let tables: String = on_card.iter().map(|s| series_html(s)).collect();
            out.push_str(&template(
                &super::template_id(name, None),
                &format!("Measured on the {}: ΔE along the context", esc(name)),
                &tables,
            ));
            let mut models: Vec<&str> = Vec::new();
            for m in on_card.iter().map(|s| base_model(&s.model)) {
                if models.contains(&m) {
                    continue;
                }
                models.push(m);
                let tables: String = on_card
                    .iter()
                    .filter(|s| base_model(&s.model) == m)
                    .map(|s| series_html(s))
                    .collect();
                out.push_str(&template(
                    &super::template_id(name, Some(m)),
                    &format!(
                        "{} on the {}: ΔE along the context, measured",
                        esc(m),
                        esc(name)
                    ),
                    &tables,
                ));
            }
        }
        out
    }

    fn template(id: &str, title: &str, tables: &str) -> String {
        format!(
            "<template id=\"{id}\"><h2 class=\"card-title\">{title}</h2><p class=\"sub\">{LEDE}</p>\
             {tables}</template>"
        )
    }

    fn series_html(s: &ContextSeries) -> String {
        let scale = s
            .points
            .iter()
            .fold(10.0, |m: f64, p| m.max(p.measured_pct.abs()));
        // The short label drops the server's flags; a quantized KV cache is what sets this stack
        // apart from the plain server's, so it stays in the name.
        let kv = s.stack.split(", ").find(|p| p.starts_with("KV cache"));
        let mut h = format!(
            "<div class=\"sweep\"><p class=\"sweep-head\"><span class=\"stack-name\">{}{}</span> \
             <span class=\"session-name\">{} · {} vs FP16</span></p>",
            esc(&analysis::stacks::stack_label(&s.stack)),
            kv.map_or(String::new(), |k| format!(", {}", esc(k))),
            esc(base_model(&s.model)),
            s.precision
        );
        if let Some(e) = s.max_error_pct() {
            h.push_str(&format!(
                "<p class=\"sweep-lede\">The context model is off by at most {} points at the depths \
                 measured here.</p>",
                num(e, 1)
            ));
        }
        if kv.is_some() {
            h.push_str(
                "<p class=\"fine\">The model reads an F16 KV cache: it knows nothing of this stack's \
                 quantized one.</p>",
            );
        }
        h.push_str(
            "<div class=\"table-scroll\" tabindex=\"0\" role=\"region\" aria-label=\"Context runs \
             (scrolls sideways)\"><table class=\"facts sweep-table\"><thead><tr><th>depth</th>\
             <th class=\"num\">runs</th><th>measured ΔE</th><th class=\"num\">model</th>\
             <th class=\"num\">error, points</th>\
             <th class=\"num\">prefill mJ / prompt token</th></tr></thead><tbody>",
        );
        for p in &s.points {
            h.push_str("<tr><th scope=\"row\">");
            h.push_str(&p.depth.map_or("16 (anchor)".into(), |d| d.to_string()));
            h.push_str("</th><td class=\"num\">");
            h.push_str(&p.n.map_or("—".into(), |n| n.to_string()));
            h.push_str("</td><td class=\"delta-cell\">");
            let cell = SweepCell {
                energy_mj: 0.0,
                tok_s: None,
                n: p.n,
                delta_pct: Some(p.measured_pct),
                interval: p
                    .halfwidth_pct
                    .map(|w| (p.measured_pct - w, p.measured_pct + w)),
                single_run: p.n.is_none_or(|n| n < 2),
            };
            delta_bar(&mut h, cell, scale);
            let model = p.modelled_pct.map_or("—".into(), |m| pct(m, 1));
            let error = match (p.depth, p.error_pct()) {
                (None, _) => "fitted".into(),
                (_, Some(e)) if e > 0.0 => format!("+{}", num(e, 1)),
                (_, Some(e)) => num(e, 1),
                _ => "—".into(),
            };
            let prefill = match (p.prefill_mj, p.prefill_delta_pct()) {
                (Some((q, f)), Some(d)) => format!(
                    "{} vs {}<span class=\"sub\">{}</span>",
                    num(q, 1),
                    num(f, 1),
                    pct(d, 0)
                ),
                _ => "—".into(),
            };
            h.push_str(&format!(
                "</td><td class=\"num\">{model}</td><td class=\"num\">{error}</td>\
                 <td class=\"num\">{prefill}</td></tr>"
            ));
        }
        h.push_str("</tbody></table></div></div>");
        h
    }
}
