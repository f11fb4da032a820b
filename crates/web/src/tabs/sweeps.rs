//! The card's measured batch sweeps (Optimize tab): per model and session, energy per 1M tokens
//! of FP16 and each swept format at every batch, and ΔE vs the FP16 row of the same batch. The
//! tables and sentences come from `analysis::sweeps`; this file only lays them out.
//!
//! Static markup from the embedded data, written as one escaped HTML string: as `view!` trees the
//! tables cost 8.7 KB gz of the full module (the whole app is over its 700 KB budget), as a string
//! well under 2 KB.

use analysis::sweeps::{below_target, card_sweeps, Sweep, SweepCell};
use analysis::Dataset;
use leptos::prelude::*;

use crate::chart::surface::esc;
use crate::util::base_model;
use crate::util::{delta_bar, num, per_million, size_b};

/// Every batch sweep measured on the card `gpu` names: one card, or nothing when it has none.
pub fn batch_sweeps(gpu: RwSignal<String>) -> impl IntoView {
    move || {
        let g = gpu.get();
        let sweeps = card_sweeps(Dataset::embedded(), &g);
        (!sweeps.is_empty()).then(|| {
            let html = format!(
                "<h2 class=\"card-title\">Measured on the {}: what batching does to ΔE</h2><p class=\"sub\">One \
                 table per model and session: energy per 1M generated tokens of FP16 and of each format swept, at \
                 every batch measured, and ΔE vs the FP16 arm measured alongside it at that batch (± its 95 % \
                 interval from the spread of each run's own ΔE, since every run measures both arms; where the FP16 row pools more runs than that arm, ΔE \
                 can differ from the two energies shown by a point or two). The optimizer's batch term for this card's own stacks is read off \
                 these rows; a saving at batch 1 is not a saving at every batch.</p>{}",
                esc(&g),
                sweeps.iter().map(sweep_html).collect::<String>()
            );
            view! { <div class="card" id="batch-sweeps" inner_html=html></div> }
        })
    }
}

fn sweep_html(s: &Sweep) -> String {
    // One ΔE scale per table, so its bars compare at a glance.
    let scale = s
        .batches
        .iter()
        .flat_map(|&b| s.formats.iter().filter_map(move |f| s.cell(b, f)))
        .filter_map(|c| c.delta_pct)
        .fold(10.0, |m: f64, d| m.max(d.abs()));
    let mut h = String::with_capacity(4096);
    let size = size_b((s.params_b * 10.0).round() / 10.0);
    for part in [
        "<div class=\"sweep\"><p class=\"sweep-head\"><span class=\"stack-name\">",
        &esc(&analysis::stacks::stack_label(&s.stack)),
        "</span> <span class=\"session-name\">",
        &esc(base_model(&s.model)),
        " · ",
        &size,
        " · session ",
        &esc(&s.session),
        "</span></p>",
    ] {
        h.push_str(part);
    }
    for t in s.formats.iter().filter_map(|f| s.summary(f)) {
        h.push_str("<p class=\"sweep-lede\">");
        h.push_str(&esc(&t));
        h.push_str("</p>");
    }
    h.push_str(
        "<p class=\"fine sweep-units\">Energy per 1M generated tokens · throughput summed over the \
         batch · ΔE ± its 95 % interval, points · n ≥ 3 runs a row unless marked</p>",
    );
    if s.is_server() {
        h.push_str(
            "<p class=\"fine\">A server's batch is the number of concurrent request streams sent \
             to it: it batches them itself.</p>",
        );
    }
    h.push_str(
        "<div class=\"table-scroll\" tabindex=\"0\" role=\"region\" aria-label=\"Batch sweep of ",
    );
    h.push_str(&esc(&s.model));
    h.push_str(" (scrolls sideways)\"><table class=\"facts sweep-table\"><thead><tr><th>");
    h.push_str(s.batch_word());
    h.push_str("</th><th class=\"num\">FP16</th>");
    for f in &s.formats {
        let f = esc(f);
        for part in ["<th class=\"num\">", &f, "</th><th>", &f, " vs FP16</th>"] {
            h.push_str(part);
        }
    }
    h.push_str("</tr></thead><tbody>");
    for &b in &s.batches {
        h.push_str("<tr><th scope=\"row\">");
        h.push_str(&b.to_string());
        h.push_str("</th>");
        energy_cell(&mut h, s.cell(b, "FP16"));
        for f in &s.formats {
            let c = s.cell(b, f);
            energy_cell(&mut h, c);
            h.push_str("<td class=\"delta-cell\">");
            if let Some(c) = c.filter(|c| c.delta_pct.is_some()) {
                delta_bar(&mut h, c, scale);
            }
            h.push_str("</td>");
        }
        h.push_str("</tr>");
    }
    h.push_str("</tbody></table></div></div>");
    h
}

/// Energy per 1M tokens with the batch's summed throughput under it (and the runs behind it
/// where fewer than the campaign's 3); a dash where not measured.
fn energy_cell(h: &mut String, c: Option<SweepCell>) {
    h.push_str("<td class=\"num\">");
    match c {
        Some(c) => {
            h.push_str(&per_million(c.energy_mj).0);
            if let Some(t) = c.tok_s {
                h.push_str("<span class=\"sub\">");
                h.push_str(&num(t, 0));
                h.push_str(" tok/s");
                h.push_str(&esc(&below_target(c.n)));
                h.push_str("</span>");
            }
        }
        None => h.push('—'),
    }
    h.push_str("</td>");
}

/// The card's context runs (Optimize tab): per model and stack, ΔE of the decode at each depth
/// measured beside the optimizer's context model and its error, and the prefill's energy per prompt
/// token. Rendered at build time from the same embedded rows (`crate::context_card`, put into
/// `index.html` by the pre-render hook): this module only shows the card's `<template>`, which
/// keeps the analysis and markup out of the page's wasm.
pub fn context_runs(gpu: RwSignal<String>) -> impl IntoView {
    crate::context_card::shown(
        Signal::derive(move || crate::context_card::template_id(&gpu.get(), None)),
        "context-runs",
    )
}
