//! Optimize: a card, a model (a named shape or a size), an objective, optional budgets and an
//! optional fixed context → `analysis::optimize`'s recommendation as tagged tiles, the
//! alternatives with Δ vs the optimum, the energy ↔ latency Pareto chart and table, and — when
//! nothing meets the budgets — the least-violating configuration with what it breaks and by how
//! much. Every figure is `analysis`'s; this module only lays them out.

use leptos::prelude::*;

use analysis::optimize::{Alternative, Budget, Candidate, OptimizeResult, Violation, CONTEXTS};
use analysis::roofline::Bound;
use analysis::{optimize, shapes, Budgets, Dataset, Objective, OptimizeRequest, Tag, Tagged};

use super::{other_stack, prec_col, tag_chip, TagLegend};
use crate::chart::{Chart, Line, Mark, Shape, Spec};
use crate::url::{parse_f64, parse_u32, Query};
use crate::util::{num, pct, per_million, size_b};

/// Default card and model of the tab.
const DEFAULT_GPU: &str = "RTX 4090";
const DEFAULT_MODEL: &str = "Qwen2-7B";

#[derive(Clone, Copy)]
pub struct OptimizeState {
    pub gpu: RwSignal<String>,
    /// A named shape from data/models.csv, or empty: the size below.
    pub model: RwSignal<String>,
    pub params_b: RwSignal<f64>,
    pub objective: RwSignal<Objective>,
    pub max_ms: RwSignal<Option<f64>>,
    pub max_vram: RwSignal<Option<f64>>,
    pub min_tps: RwSignal<Option<f64>>,
    pub max_j: RwSignal<Option<f64>>,
    pub context: RwSignal<Option<u32>>,
    /// One software stack to search (`stack=` in the link); `None`: every stack of the card.
    pub engine: RwSignal<Option<String>>,
}

pub fn objective_label(o: Objective) -> &'static str {
    match o {
        Objective::MinEnergy => "Minimize energy",
        Objective::MinLatency => "Minimize latency",
        Objective::MaxThroughput => "Maximize throughput",
        Objective::MinVram => "Minimize VRAM",
    }
}

impl OptimizeState {
    pub fn from_query(q: &Query, active: bool) -> OptimizeState {
        let g = |k: &str| q.get(k).filter(|_| active);
        let gpu = g("gpu")
            .and_then(|x| Dataset::embedded().gpu(x).map(|g| g.name.clone()))
            .unwrap_or_else(|| DEFAULT_GPU.into());
        let params = parse_f64(g("params"), 0.05, 2000.0);
        let model = match g("model") {
            Some(m) => analysis::find_shape(m)
                .map(|s| s.name.clone())
                .unwrap_or_default(),
            None if params.is_some() => String::new(),
            None => DEFAULT_MODEL.into(),
        };
        let budget = |k: &str| parse_f64(g(k), 1e-6, 1e9);
        OptimizeState {
            gpu: RwSignal::new(gpu),
            model: RwSignal::new(model),
            params_b: RwSignal::new(params.unwrap_or(7.0)),
            objective: RwSignal::new(
                g("objective")
                    .and_then(Objective::parse)
                    .unwrap_or(Objective::MinEnergy),
            ),
            max_ms: RwSignal::new(budget("max_ms")),
            max_vram: RwSignal::new(budget("max_vram")),
            min_tps: RwSignal::new(budget("min_tps")),
            max_j: RwSignal::new(budget("max_j")),
            context: RwSignal::new(parse_u32(g("ctx"), 1, 1_048_576)),
            engine: RwSignal::new(g("stack").map(str::to_string)),
        }
    }

    pub fn write_query(&self, q: &mut Query) {
        q.push("gpu", self.gpu.get());
        let m = self.model.get();
        if m.is_empty() {
            q.push("params", format!("{}", self.params_b.get()));
        } else {
            q.push("model", m);
        }
        q.push("objective", self.objective.get().as_str());
        for (k, v) in [
            ("max_ms", self.max_ms.get()),
            ("max_vram", self.max_vram.get()),
            ("min_tps", self.min_tps.get()),
            ("max_j", self.max_j.get()),
        ] {
            if let Some(v) = v {
                q.push(k, format!("{v}"));
            }
        }
        if let Some(c) = self.context.get() {
            q.push("ctx", c.to_string());
        }
        if let Some(e) = self.stack() {
            q.push("stack", e);
        }
    }

    fn arch(&self) -> report::Arch {
        Dataset::embedded()
            .gpu(&self.gpu.get())
            .map(|g| g.arch)
            .unwrap_or(report::Arch::Ada)
    }

    /// The stack pinned, when the card has it (a link's unknown stack searches every one).
    fn stack(&self) -> Option<String> {
        super::stack_on(self.engine.get(), self.arch())
    }

    pub fn request(&self) -> OptimizeRequest {
        let m = self.model.get();
        OptimizeRequest {
            gpu: self.gpu.get(),
            params_b: m.is_empty().then(|| self.params_b.get()),
            model: (!m.is_empty()).then_some(m),
            objective: self.objective.get(),
            budgets: Budgets {
                max_latency_ms: self.max_ms.get(),
                max_vram_gb: self.max_vram.get(),
                min_tok_s: self.min_tps.get(),
                max_j_per_1k: self.max_j.get(),
            },
            context: self.context.get(),
            engine: self.stack(),
        }
    }
}

/// A figure with a sensible number of digits for its size.
fn fig(v: f64) -> String {
    let a = v.abs();
    let dp = if a >= 100.0 {
        0
    } else if a >= 10.0 {
        1
    } else {
        2
    };
    num(v, dp)
}

fn bound_label(b: Bound) -> &'static str {
    match b {
        Bound::Launch => "launch-bound",
        Bound::Memory => "memory-bound",
        Bound::Compute => "compute-bound",
        Bound::Engine => "engine-bound",
    }
}

fn config(c: &Candidate) -> String {
    format!(
        "{} · {} · batch {} · ctx {}",
        c.engine, c.precision, c.batch, c.context
    )
}

fn tip(c: &Candidate, role: &str) -> String {
    format!(
        "{}\n{role}\n{} J/1k tokens ({})\n{} ms/token ({}, {})\n{} tok/s · {} GB VRAM",
        config(c),
        fig(c.energy_mj_per_token.value),
        c.energy_mj_per_token.tag.as_str(),
        fig(c.latency_ms_per_token.value),
        c.latency_ms_per_token.tag.as_str(),
        bound_label(c.bound.value),
        fig(c.throughput_tok_s.value),
        fig(c.vram.total_gb.value),
    )
}

/// The Pareto chart: every feasible configuration faint, the frontier as a line with markers, ★
/// the choice. x = energy per 1k tokens (log), y = latency per token.
pub fn pareto_spec(r: &OptimizeResult) -> Spec {
    let mut spec = Spec {
        x_label: "energy (J per 1k tokens, log scale) — left is better".into(),
        y_label: "latency (ms/token, log scale) — lower is better".into(),
        y_plain: true,
        ..Spec::default()
    };
    let pts = |cs: &[&Candidate]| -> Vec<(f64, f64)> {
        cs.iter()
            .map(|c| (c.energy_mj_per_token.value, c.latency_ms_per_token.value))
            .collect()
    };
    let front: Vec<&Candidate> = r.pareto.iter().collect();
    let cloud: Vec<&Candidate> = r.feasible_configs.iter().collect();
    let all = pts(&cloud);
    let fp = pts(&front);
    let (mut x0, mut x1) = (f64::INFINITY, 0.0f64);
    for (x, _) in all.iter().chain(fp.iter()) {
        x0 = x0.min(*x);
        x1 = x1.max(*x);
    }
    if !x0.is_finite() || x1 <= 0.0 {
        spec.x_range = (1.0, 10.0);
        spec.y_range = (0.0, 1.0);
        return spec;
    }
    if x1 / x0 < 2.0 {
        let mid = (x0 * x1).sqrt();
        x0 = mid / 1.45;
        x1 = mid * 1.45;
    }
    spec.x_range = (x0 / 1.15, x1 * 1.15);
    spec.x_ticks = crate::chart::nice_ticks(spec.x_range.0, spec.x_range.1, 0, true);
    // y: log scale (batch 1 and batch 64 differ by orders of magnitude); every point fits.
    let (mut y0, mut y1) = (f64::INFINITY, 0.0f64);
    for (_, y) in all.iter().chain(fp.iter()) {
        y0 = y0.min(*y);
        y1 = y1.max(*y);
    }
    if y1 / y0 < 2.0 {
        let mid = (y0 * y1).sqrt();
        y0 = mid / 1.45;
        y1 = mid * 1.45;
    }
    spec.y_log = true;
    spec.y_range = (y0 / 1.2, y1 * 1.2);
    for c in &cloud {
        spec.bg_marks.push(Mark {
            x: c.energy_mj_per_token.value,
            y: c.latency_ms_per_token.value,
            col: "--c-cloud",
            filled: false,
            shape: Shape::Circle,
            r: 3.0,
            ring: false,
            err: None,
            tip: tip(c, "feasible configuration"),
        });
    }
    let mut line = fp.clone();
    crate::util::sort_by_key(&mut line, |p| p.0);
    spec.lines.push(Line {
        col: "--c-front",
        pts: line,
        width: 2.0,
        alpha: 0.9,
        dash: true,
    });
    for c in &front {
        spec.marks.push(Mark {
            x: c.energy_mj_per_token.value,
            y: c.latency_ms_per_token.value,
            col: "--c-front",
            filled: true,
            shape: Shape::Circle,
            r: 5.0,
            ring: false,
            err: None,
            tip: tip(c, "on the Pareto frontier"),
        });
    }
    if let Some(o) = &r.optimum {
        spec.marks.push(Mark {
            x: o.energy_mj_per_token.value,
            y: o.latency_ms_per_token.value,
            col: "--c-star",
            filled: true,
            shape: Shape::Star,
            r: 6.0,
            ring: false,
            err: None,
            tip: tip(o, "★ recommended"),
        });
    }
    spec
}

fn tile(k: &'static str, v: String, sub: String, t: Tag) -> impl IntoView {
    view! {
        <div class="stat">
            <span class="k">{k}</span>
            <span class="v">{v}</span>
            <span class="sub">{sub}</span>
            {tag_chip(t)}
        </div>
    }
}

/// The tiles of one configuration.
fn tiles(c: &Candidate, card_vram: f64) -> impl IntoView {
    let e = c.energy_mj_per_token;
    let (m1, kwh) = per_million(e.value);
    view! {
        <div class="stats tiles">
            {tile("Precision", c.precision.to_string(), format!("ΔE {} vs FP16 at batch 1", pct(c.delta_vs_fp16_pct.value, 1)), c.delta_vs_fp16_pct.tag)}
            {tile("Batch", c.batch.to_string(), format!("energy × {} vs batch 1", num(c.batch_factor.value, 3)), c.batch_factor.tag)}
            {tile("Context", format!("{} tokens", c.context), format!("energy × {} vs 512 tokens", num(c.context_factor.value, 2)), c.context_factor.tag)}
            {tile("Energy per 1k tokens", format!("{} J", fig(e.value)), format!("FP16 batch 1: {} J ({})", fig(c.fp16_energy_mj_per_token.value), c.fp16_energy_mj_per_token.tag.as_str()), e.tag)}
            {tile("Energy per 1M tokens", m1, kwh, e.tag)}
            {tile("Latency", format!("{} ms/token", fig(c.latency_ms_per_token.value)), format!("per sequence · {}", bound_label(c.bound.value)), c.latency_ms_per_token.tag)}
            {tile("Throughput", format!("{} tok/s", fig(c.throughput_tok_s.value)), format!("summed over {} sequence{}", c.batch, if c.batch == 1 { "" } else { "s" }), c.throughput_tok_s.tag)}
            {tile("VRAM", format!("{} GB", fig(c.vram.total_gb.value)), format!("weights {} GB ({}) · card {} GB", fig(c.vram.weights_gb.value), c.vram.weights_gb.tag.as_str(), num(card_vram, 0)), c.vram.total_gb.tag)}
        </div>
    }
}

/// A table cell: value with a small tag dot (the legend explains the colours).
fn cell(v: Tagged<f64>) -> impl IntoView {
    view! {
        <td class="num">
            {fig(v.value)}
            <span class=format!("tdot t-{}", v.tag.as_str()) title=v.tag.as_str()></span>
            <span class="sr">{format!(" ({})", v.tag.as_str())}</span>
        </td>
    }
}

/// Δ vs the optimum, coloured: `lower_better` says which sign is good.
fn delta_cell(d: f64, lower_better: bool) -> impl IntoView {
    let cls = if d.abs() < 0.5 {
        "num delta"
    } else if (d < 0.0) == lower_better {
        "num delta good"
    } else {
        "num delta bad"
    };
    view! { <td class=cls>{pct(d, 0)}</td> }
}

fn budget_label(b: Budget) -> &'static str {
    match b {
        Budget::MaxLatencyMs => "latency budget",
        Budget::MaxVramGb => "VRAM budget",
        Budget::MinTokS => "throughput floor",
        Budget::MaxJPer1k => "energy budget",
        Budget::CardVramGb => "the card's memory",
    }
}

fn violation_text(v: &Violation) -> String {
    let unit = match v.budget {
        Budget::MaxLatencyMs => "ms/token",
        Budget::MinTokS => "tok/s",
        Budget::MaxJPer1k => "J/1k tokens",
        Budget::MaxVramGb | Budget::CardVramGb => "GB",
    };
    let verb = if v.budget == Budget::MinTokS {
        "short of"
    } else {
        "over"
    };
    // The limit as the reader typed it; the excess is analysis's.
    format!(
        "breaks {}: {} {unit} ({}) vs limit {} {unit} — {} % {verb} it",
        budget_label(v.budget),
        fig(v.value.value),
        v.value.tag.as_str(),
        v.limit,
        fig(v.excess_pct),
    )
}

fn budget_input(
    id: &'static str,
    label: &'static str,
    sig: RwSignal<Option<f64>>,
) -> impl IntoView {
    view! {
        <label>
            <span>{label}</span>
            <input
                id=id
                type="number"
                min="0"
                step="any"
                inputmode="decimal"
                placeholder="no limit"
                prop:value=move || sig.get().map(|v| v.to_string()).unwrap_or_default()
                on:change=move |ev| {
                    let t = event_target_value(&ev);
                    sig.set(t.trim().parse::<f64>().ok().filter(|v| v.is_finite() && *v > 0.0));
                }
            />
        </label>
    }
}

#[component]
pub fn OptimizeTab() -> impl IntoView {
    let st = expect_context::<crate::AppState>().optimize;
    let result = Memo::new(move |_| optimize(&st.request()).map_err(|e| e.to_string()));
    let card_vram = move || {
        Dataset::embedded()
            .gpu(&st.gpu.get())
            .map(|g| g.vram_gb)
            .unwrap_or(0.0)
    };

    view! {
        <section class="tab-optimize">
            <OptimizeInputs/>
            {move || match result.get() {
                Err(e) => view! {
                    <div class="card callout bad-callout" role="alert" id="opt-error">
                        <p class="callout-title">"The optimizer cannot answer this"</p>
                        <p>{e}</p>
                    </div>
                }
                .into_any(),
                Ok(r) => result_view(r, card_vram()).into_any(),
            }}
            {super::sweeps::batch_sweeps(st.gpu)}
            {super::sweeps::context_runs(st.gpu)}
        </section>
    }
}

/// The inputs card: card, model, objective, context, stack and the optional budgets.
#[component]
fn OptimizeInputs() -> impl IntoView {
    let st = expect_context::<crate::AppState>().optimize;
    let stack_note = move || {
        let gpu = st.gpu.get();
        if super::curve_engines_on(st.arch()).len() > 1 {
            return None; // the stack picker and the recommendation say which stack
        }
        Dataset::embedded()
            .anchors
            .iter()
            .filter(|a| a.gpu == gpu && a.default_curve)
            .find_map(|a| other_stack(&a.stack))
    };
    view! {
        <div class="card inputs">
            <h2 class="card-title">"Optimize a deployment"</h2>
            <p class="sub">
                "From “does it save energy?” to “what should I run?”: every precision × batch × context on your card, filtered by your budgets, ranked by your objective. "
                "Energy stays anchored on measurements; latency and throughput are a roofline model; VRAM is counted from the model's shapes. Every figure says which."
            </p>
            <div class="grid-inputs">
                {card_and_model_inputs(st)}
                {objective_and_context_inputs(st)}
                <super::StackSelect id="opt-stack" arch=Signal::derive(move || st.arch()) engine=st.engine every="Every stack, side by side"/>
            </div>
            <h3 class="inputs-sub">"Budgets (optional)"</h3>
            <div class="grid-inputs budgets">
                {budget_input("opt-max-ms", "Max ms/token", st.max_ms)}
                {budget_input("opt-max-vram", "Max VRAM (GB)", st.max_vram)}
                {budget_input("opt-min-tps", "Min tok/s (whole batch)", st.min_tps)}
                {budget_input("opt-max-j", "Max J per 1k tokens", st.max_j)}
            </div>
            {move || stack_note().map(|n| view! { <p class="fine"><span class="tag warn">{n}</span></p> })}
        </div>
    }
}

/// The GPU card, model and size pickers (the size is the named model's when one is picked).
fn card_and_model_inputs(st: OptimizeState) -> impl IntoView {
    view! {
        <label>
            <span>"GPU card"</span>
            <select id="opt-gpu" on:change=move |ev| st.gpu.set(event_target_value(&ev)) prop:value=move || st.gpu.get()>
                {Dataset::embedded()
                    .gpus
                    .iter()
                    .map(|g| view! { <option value=g.name.clone()>{format!("{} · {} · {} GB", g.name, g.arch, num(g.vram_gb, 0))}</option> })
                    .collect_view()}
            </select>
        </label>
        <label>
            <span>"Model"</span>
            <select id="opt-model" on:change=move |ev| st.model.set(event_target_value(&ev)) prop:value=move || st.model.get()>
                <option value="">"By size (B parameters) →"</option>
                {shapes()
                    .iter()
                    .map(|s| view! { <option value=s.name.clone()>{format!("{} ({})", s.name, size_b(s.params_b))}</option> })
                    .collect_view()}
            </select>
        </label>
        <label>
            <span>"Size (B parameters)"</span>
            <input
                id="opt-params"
                type="number"
                min="0.05"
                max="2000"
                step="0.1"
                inputmode="decimal"
                prop:disabled=move || !st.model.get().is_empty()
                prop:value=move || {
                    let m = st.model.get();
                    analysis::find_shape(&m)
                        .map(|s| s.params_b)
                        .unwrap_or_else(|| st.params_b.get())
                        .to_string()
                }
                on:change=move |ev| {
                    if let Some(v) = crate::util::parse_params_b(&event_target_value(&ev)) {
                        st.params_b.set(v);
                    }
                }
            />
        </label>
    }
}

/// The objective and context pickers (no context: every one of [`CONTEXTS`] is searched).
fn objective_and_context_inputs(st: OptimizeState) -> impl IntoView {
    view! {
        <label>
            <span>"Objective"</span>
            <select
                id="opt-objective"
                on:change=move |ev| {
                    if let Some(o) = Objective::parse(&event_target_value(&ev)) {
                        st.objective.set(o);
                    }
                }
                prop:value=move || st.objective.get().as_str()
            >
                {Objective::ALL.iter().map(|o| view! { <option value=o.as_str()>{objective_label(*o)}</option> }).collect_view()}
            </select>
        </label>
        <label>
            <span>"Context (tokens)"</span>
            <select
                id="opt-context"
                on:change=move |ev| st.context.set(event_target_value(&ev).parse().ok())
                prop:value=move || st.context.get().map(|c| c.to_string()).unwrap_or_default()
            >
                <option value="">"Search 512 … 32 768"</option>
                {CONTEXTS.iter().map(|c| view! { <option value=c.to_string()>{c.to_string()}</option> }).collect_view()}
            </select>
        </label>
    }
}

/// The alternatives table: each with its Δ vs the optimum.
fn alternatives_card(alternatives: &[Alternative]) -> impl IntoView {
    view! {
        <div class="card">
            <h2 class="card-title">"Alternatives"</h2>
            <p class="sub">"The best of each other precision, then the runners-up; Δ is relative to the recommendation (green = better on that axis)."</p>
            <div class="table-scroll" tabindex="0" role="region" aria-label="Alternatives (scrolls sideways)">
                <table class="facts wide opt-table" id="alt-table">
                    <thead>
                        <tr>
                            <th>"configuration"</th><th class="num">"J / 1k tok"</th><th class="num">"Δ energy"</th>
                            <th class="num">"ms / token"</th><th class="num">"Δ latency"</th>
                            <th class="num">"tok/s"</th><th class="num">"Δ tok/s"</th>
                            <th class="num">"VRAM GB"</th><th class="num">"Δ VRAM"</th><th>"why listed"</th>
                        </tr>
                    </thead>
                    <tbody>
                        {alternatives.iter().map(|a| {
                            let c = &a.candidate;
                            let d = &a.vs_optimum;
                            view! {
                                <tr>
                                    <td>{config(c)}</td>
                                    {cell(c.energy_mj_per_token)}
                                    {delta_cell(d.energy_pct.value, true)}
                                    {cell(c.latency_ms_per_token)}
                                    {delta_cell(d.latency_pct.value, true)}
                                    {cell(c.throughput_tok_s)}
                                    {delta_cell(d.throughput_pct.value, false)}
                                    {cell(c.vram.total_gb)}
                                    {delta_cell(d.vram_pct.value, true)}
                                    <td class="why">{a.why.clone()}</td>
                                </tr>
                            }
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
        </div>
    }
}

/// The Pareto card: the chart of every feasible configuration and the frontier's table.
fn pareto_card(r: &OptimizeResult, spec: Spec) -> impl IntoView {
    let n_front = r.pareto.len();
    let optimum = r.optimum.clone();
    view! {
        <div class="card" id="pareto-card" data-points=n_front.to_string()>
            <h2 class="card-title">"Energy ↔ latency: the Pareto frontier"</h2>
            <p class="sub">
                {format!("{n_front} configuration{} where nothing else is both lower-energy and lower-latency. ", if n_front == 1 { "" } else { "s" })}
                "Down-left is better. Faint circles: every feasible configuration; ★: the recommendation."
            </p>
            <Chart spec=Signal::derive(move || spec.clone()) id="pareto-canvas" label="Pareto chart: energy per 1k tokens against latency per token for every feasible configuration, the frontier and the recommendation"/>
            <ul class="legend">
                <li><span class="glyph" style:color="var(--c-cloud)">"○"</span>"feasible configuration"</li>
                <li><span class="glyph" style:color="var(--c-front)">"●"</span>"Pareto frontier (dashed line)"</li>
                <li><span class="glyph" style:color="var(--c-star)">"★"</span>"recommended"</li>
            </ul>
            <div class="table-scroll" tabindex="0" role="region" aria-label="Pareto frontier (scrolls sideways)">
                <table class="facts wide opt-table" id="pareto-table" data-points=n_front.to_string()>
                    <thead>
                        <tr><th>"configuration"</th><th class="num">"J / 1k tok"</th><th class="num">"ms / token"</th><th class="num">"tok/s"</th><th class="num">"VRAM GB"</th><th>"bound"</th></tr>
                    </thead>
                    <tbody>
                        {r.pareto.iter().map(|c| {
                            let chosen = optimum.as_ref() == Some(c);
                            view! {
                                <tr class:chosen=chosen>
                                    <td>{if chosen { format!("★ {}", config(c)) } else { config(c) }}</td>
                                    {cell(c.energy_mj_per_token)}
                                    {cell(c.latency_ms_per_token)}
                                    {cell(c.throughput_tok_s)}
                                    {cell(c.vram.total_gb)}
                                    <td>{bound_label(c.bound.value)}</td>
                                </tr>
                            }
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
        </div>
    }
}

fn result_view(r: OptimizeResult, card_vram: f64) -> impl IntoView {
    let obj = objective_label(r.request.objective);
    let counts = format!(
        "{} configurations searched ({}{} × 7 batches × {}): {} feasible, {} over the card's VRAM, {} over your budgets",
        r.counts.evaluated,
        if r.engines.len() > 1 { format!("{} stacks × ", r.engines.len()) } else { String::new() },
        r.precisions.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(" / "),
        if r.request.context.is_some() { "1 context".to_string() } else { format!("{} contexts", CONTEXTS.len()) },
        r.counts.feasible,
        r.counts.over_vram,
        r.counts.over_budget
    );
    let model_line = format!(
        "{} on {} ({}, {} GB) · {} B parameters counted from the shape ({}), {} layers, {} KV heads",
        r.model.name,
        r.gpu.name,
        r.gpu.arch,
        num(r.gpu.vram_gb.value, 0),
        num(r.model.shape_params_b.value, 2),
        r.model.shape_tag.as_str(),
        r.model.layers,
        r.model.kv_heads
    );
    let quality = format!(
        "Model quality: throughput vs measured runs RMS error {} % (median {} %) over {}; batch curve RMS {} % on {}.",
        num(r.quality.throughput_rms_error_pct, 0),
        num(r.quality.throughput_median_abs_error_pct, 0),
        r.quality.throughput_scope,
        num(r.quality.batch_rms_error_pct, 1),
        r.quality.batch_calibrated_on
    );
    let notes = r.notes.clone();
    // A winner the data cannot separate from the runner-up is said next to the recommendation.
    let tie = r.tie.clone();
    let n_front = r.pareto.len();
    let spec = pareto_spec(&r);
    let searched = if r.engines.len() > 1 {
        format!(" (stacks searched: {})", r.engines.join(", "))
    } else {
        String::new()
    };
    // Whether the recommendation's engine has a batch sweep on this card (shown below the result).
    let swept_here = r.optimum.as_ref().is_some_and(|o| {
        analysis::sweeps::card_sweeps(Dataset::embedded(), &r.gpu.name)
            .iter()
            .any(|s| s.engine == o.engine)
    });
    let main = match (&r.optimum, &r.least_violating) {
        (Some(o), _) => view! {
            <div class="card result" id="opt-recommendation">
                <h2 class="card-title">"Recommended configuration"</h2>
                <p class="headline" id="opt-choice">
                    <span class="swatch" style:background=format!("var({})", prec_col(o.precision.as_str()))></span>
                    {config(o)}
                </p>
                <p class="sub">{format!("Objective: {obj} · best of the feasible configurations under your budgets")}</p>
                <p class="sub" id="opt-stack-used">{format!("Assumes the {} stack: the FP16 energy, ΔE curves and latency floors measured on it{searched}; how batching scales on it: {}", o.engine, if swept_here { "its measured batch sweep below, and How these figures are made" } else { "see How these figures are made" })}</p>
                {tie.map(|t| view! { <p class="tag warn tie-note" id="opt-tie">{format!("Not a clear winner: {t}.")}</p> })}
                {tiles(o, card_vram)}
                <TagLegend/>
            </div>
        }
        .into_any(),
        (None, Some(lv)) => view! {
            <div class="card callout bad-callout" role="alert" id="least-violating">
                <p class="callout-title">"No configuration meets your budgets"</p>
                <p class="sub">"The configuration that breaks them least (smallest summed excess) is below, with each budget it breaks and by how much. Loosen those budgets, or pick a larger card."</p>
                <p class="headline">{format!("Closest: {}", config(&lv.candidate))}</p>
                <ul class="violations">
                    {lv.violations.iter().map(|v| view! { <li>{violation_text(v)}</li> }).collect_view()}
                </ul>
                {tiles(&lv.candidate, card_vram)}
                <TagLegend/>
            </div>
        }
        .into_any(),
        (None, None) => view! {
            <div class="card callout" role="alert"><p>"Nothing was evaluated."</p></div>
        }
        .into_any(),
    };
    let alts = (!r.alternatives.is_empty()).then(|| alternatives_card(&r.alternatives));
    let front = (n_front > 0).then(|| pareto_card(&r, spec));
    view! {
        <p class="fine opt-model-line">{model_line}</p>
        {main}
        {alts}
        {front}
        <div class="card">
            <details id="opt-notes">
                <summary>"How these figures are made"</summary>
                <p class="fine">{counts}</p>
                <p class="fine">{quality}</p>
                <ul class="notes">{notes.into_iter().map(|n| view! { <li>{n}</li> }).collect_view()}</ul>
            </details>
        </div>
    }
}
