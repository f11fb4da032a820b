//! Same card, same model size, different software (issue 15): every stack measured at the picked
//! model's size, side by side — ΔE vs FP16 per format, each stack against its own FP16 with its
//! 95 % interval, and the energy per token of every format on one axis. The numbers are
//! `analysis::stacks`; this module only lays them out (two tables of bars: readable without the
//! chart, and by a screen reader cell by cell).

use analysis::stacks::{compare_stacks, StackCell, StackColumn, StackComparison};
use analysis::Dataset;
use leptos::prelude::*;

use crate::util::{pct, size_b};

/// The comparison for the picked card and model's size, when at least two different stacks
/// measured it (sessions of one stack are the session blocks' business).
pub fn comparison_for(gpu: &str, model: &str) -> Option<StackComparison> {
    let ds = Dataset::embedded();
    let size = ds
        .anchors
        .iter()
        .find(|a| a.gpu == gpu && a.model == model)?
        .params_b;
    let c = compare_stacks(ds, gpu, size);
    let mut labels: Vec<&str> = c.columns.iter().map(|s| s.label.as_str()).collect();
    labels.dedup();
    (labels.len() >= 2).then_some(c)
}

/// The stack's colour slot (CSS variables `--stk-0` …, colour-blind safe, both themes).
fn stack_col(i: usize) -> String {
    format!("var(--stk-{})", i % 4)
}

/// The sentence a visitor should take away: the widest disagreement between stacks.
pub fn headline(c: &StackComparison) -> Option<String> {
    let (f, lo, hi) = c.widest_disagreement()?;
    let at = |d: f64| {
        c.columns
            .iter()
            .find(|s| s.cell(&f).and_then(|x| x.delta_pct) == Some(d))
            .map(|s| s.label.clone())
            .unwrap_or_default()
    };
    let amount = |d: f64| format!("{:.0} %", d.abs());
    let second = match (lo < 0.0, hi < 0.0) {
        (true, true) => format!("only {}", amount(hi)),
        (true, false) => format!("costs {}", amount(hi)),
        _ => amount(hi),
    };
    let first = if lo < 0.0 { "saves" } else { "costs" };
    Some(format!(
        "{f} {first} {} with {} but {second} with {}: {:.0} points apart on the same card and model size, from software alone.",
        amount(lo),
        at(lo),
        at(hi),
        hi - lo
    ))
}

/// The ΔE axis: every Δ and interval end, and zero, with a little room.
fn delta_range(c: &StackComparison) -> (f64, f64) {
    let mut lo: f64 = 0.0;
    let mut hi: f64 = 0.0;
    for x in c.columns.iter().flat_map(|s| &s.cells) {
        for v in x
            .delta_pct
            .into_iter()
            .chain(x.interval.map(|i| i.0))
            .chain(x.interval.map(|i| i.1))
        {
            lo = lo.min(v);
            hi = hi.max(v);
        }
    }
    let pad = (hi - lo).max(1.0) * 0.06;
    (lo - pad, hi + pad)
}

fn pos(v: f64, (lo, hi): (f64, f64)) -> f64 {
    ((v - lo) / (hi - lo) * 100.0).clamp(0.0, 100.0)
}

/// One ΔE cell: a bar from zero, the interval's whisker, the value.
fn delta_cell(x: Option<&StackCell>, i: usize, range: (f64, f64)) -> AnyView {
    let Some(d) = x.and_then(|x| x.delta_pct) else {
        return view! { <td class="stk-none">"not measured"</td> }.into_any();
    };
    let x = x.expect("a delta has a cell");
    let (z, v) = (pos(0.0, range), pos(d, range));
    let (left, width) = (z.min(v), (v - z).abs().max(0.4));
    let whisker = x.interval.map(|(a, b)| {
        let (a, b) = (pos(a, range), pos(b, range));
        view! { <span class="stk-ci" style:left=format!("{a:.2}%") style:width=format!("{:.2}%", b - a)></span> }
    });
    let half = x
        .interval
        .map(|(a, b)| format!(" ±{:.1}", (b - a) / 2.0))
        .unwrap_or_default();
    let n =
        x.n.map(|n| format!("n = {n}"))
            .unwrap_or_else(|| "n = ?".into());
    let cls = if d < 0.0 {
        "stk-val good"
    } else {
        "stk-val bad"
    };
    view! {
        <td>
            <span class="stk-track" aria-hidden="true">
                <span class="stk-zero" style:left=format!("{z:.2}%")></span>
                <span class="stk-bar" style:left=format!("{left:.2}%") style:width=format!("{width:.2}%") style:background=stack_col(i)></span>
                {whisker}
            </span>
            <span class=cls>{pct(d, 1)}{half}</span>
            <span class="stk-n">{n}</span>
        </td>
    }
    .into_any()
}

/// One energy cell: a bar from zero on the table's one axis, the value in mJ/token.
fn energy_cell(x: Option<&StackCell>, i: usize, max_e: f64) -> AnyView {
    let Some(x) = x else {
        return view! { <td class="stk-none">"not measured"</td> }.into_any();
    };
    let w = (x.energy_mj / max_e * 100.0).clamp(0.4, 100.0);
    view! {
        <td>
            <span class="stk-track" aria-hidden="true">
                <span class="stk-bar" style:left="0%" style:width=format!("{w:.2}%") style:background=stack_col(i)></span>
            </span>
            <span class="stk-val">{format!("{:.0} mJ", x.energy_mj)}</span>
        </td>
    }
    .into_any()
}

fn head_cells(cols: &[StackColumn]) -> impl IntoView {
    cols.iter()
        .enumerate()
        .map(|(i, s)| {
            view! {
                <th scope="col">
                    <span class="swatch" style:background=stack_col(i)></span>
                    {s.label.clone()}
                    <span class="sub">{format!("session {}", s.session)}</span>
                </th>
            }
        })
        .collect_view()
}

/// The comparison: headline, the ΔE table and the energy table.
#[component]
pub fn StacksView(c: StackComparison) -> impl IntoView {
    let range = delta_range(&c);
    let max_e = c
        .columns
        .iter()
        .flat_map(|s| &s.cells)
        .map(|x| x.energy_mj)
        .fold(1e-9, f64::max);
    let quantized: Vec<String> = c.formats.iter().filter(|f| *f != "FP16").cloned().collect();
    let title = format!("{} · {}", c.gpu, size_b((c.params_b * 10.0).round() / 10.0));
    view! {
        <div class="stacks" id="stacks-view">
            <p class="stk-headline">{headline(&c)}</p>
            <div class="table-scroll" tabindex="0" role="region" aria-label="ΔE vs FP16 per format and stack">
                <table class="stk">
                    <caption>{format!("{title}: ΔE vs FP16 (%), each stack against its own FP16, 95 % interval")}</caption>
                    <thead><tr><th scope="col">"Format"</th>{head_cells(&c.columns)}</tr></thead>
                    <tbody>
                        {quantized
                            .iter()
                            .map(|f| view! {
                                <tr>
                                    <th scope="row">{f.clone()}</th>
                                    {c.columns.iter().enumerate().map(|(i, s)| delta_cell(s.cell(f), i, range)).collect_view()}
                                </tr>
                            })
                            .collect_view()}
                    </tbody>
                </table>
            </div>
            <div class="table-scroll" tabindex="0" role="region" aria-label="Energy per token per format and stack">
                <table class="stk">
                    <caption>{format!("{title}: energy per generated token (mJ), one axis for every stack")}</caption>
                    <thead><tr><th scope="col">"Format"</th>{head_cells(&c.columns)}</tr></thead>
                    <tbody>
                        {c.formats
                            .iter()
                            .map(|f| view! {
                                <tr>
                                    <th scope="row">{f.clone()}</th>
                                    {c.columns.iter().enumerate().map(|(i, s)| energy_cell(s.cell(f), i, max_e)).collect_view()}
                                </tr>
                            })
                            .collect_view()}
                    </tbody>
                </table>
            </div>
        </div>
    }
}

/// The Tested tab's card: shown when the picked card and model's size was measured on two stacks.
#[component]
pub fn StacksCard() -> impl IntoView {
    let st = expect_context::<crate::AppState>().tested;
    move || {
        comparison_for(&st.gpu.get(), &st.model.get()).map(|c| {
            view! {
                <div class="card" id="stacks-card">
                    <h2 class="card-title">"Same card, same size, different software"</h2>
                    <p class="sub">
                        "Every stack measured on this card at this model size. Each ΔE is against the FP16 arm of its own stack and session: stacks are compared, never pooled."
                    </p>
                    <StacksView c=c/>
                    <p class="fine">
                        "Bars: GPU-package energy (NVML), single-stream decode, batch 1. Intervals from each row's run-to-run spread (none for a single run)."
                    </p>
                </div>
            }
        })
    }
}
