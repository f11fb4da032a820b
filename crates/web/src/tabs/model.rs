//! Your model: size, card (→ architecture), precision, batch and context → ΔE with its 95 % CI,
//! basis and confidence tags, absolute energy per 1M tokens, weights, verdict; the class's fitted
//! curve with its uncertainty band along the whole curve, the anchors and your point; the fit's
//! parameters, crossover and leave-one-out error; the estimate as a schema-valid energy.json.

use leptos::prelude::*;
use wasm_bindgen::JsCast;

use analysis::{
    default_classes, estimate, find_class, CurveClass, Dataset, Estimate, EstimateInput,
};

use super::{basis_col, prec_col, BasisTag, CopyButton};
use crate::chart::layers::{anchor_marks, class_layers};
use crate::chart::{Chart, Mark, Shape, Spec};
use crate::url::{parse_f64, parse_u32, Query};
use crate::util::{num, pct, per_million, size_b};
use report::{Arch, Precision};

/// Precisions offered on every card; classes of the card's architecture (or one it borrows from)
/// add theirs (the GGUF formats of the hopper class), see [`precisions_for`].
pub const PRECISIONS: [Precision; 3] = [Precision::Nf4, Precision::Int8, Precision::Fp16];

/// The precision picker's options for an architecture: the base three, then every precision with
/// a fitted class on this architecture or on one its estimate borrows from.
pub fn precisions_for(arch: Arch) -> Vec<Precision> {
    let mut v: Vec<Precision> = PRECISIONS.to_vec();
    let archs: Vec<Arch> = std::iter::once(arch)
        .chain(analysis::class::borrow_order(arch).iter().copied())
        .collect();
    for c in default_classes().iter().filter(|c| archs.contains(&c.arch)) {
        if !v.contains(&c.precision) {
            v.push(c.precision);
        }
    }
    v
}
pub const BATCHES: [u32; 7] = [1, 2, 4, 8, 16, 32, 64];
pub const CONTEXTS: [u32; 6] = [512, 1024, 2048, 4096, 8192, 16384];

#[derive(Clone, Copy)]
pub struct ModelState {
    pub params_b: RwSignal<f64>,
    pub gpu: RwSignal<CardChoice>,
    pub precision: RwSignal<Precision>,
    pub batch: RwSignal<u32>,
    pub context: RwSignal<u32>,
    pub name: RwSignal<String>,
    /// The software stack asked for (`stack=` in the link); `None`: the card's default one.
    pub engine: RwSignal<Option<String>>,
}

impl ModelState {
    pub fn from_query(q: &Query, active: bool) -> ModelState {
        let g = |k: &str| q.get(k).filter(|_| active);
        let gpu = g("gpu")
            .and_then(CardChoice::parse)
            .unwrap_or_else(|| CardChoice::Card("RTX 4090".into()));
        let precision = g("p")
            .and_then(|p| p.parse::<Precision>().ok())
            .filter(|p| {
                PRECISIONS.contains(p) || default_classes().iter().any(|c| c.precision == *p)
            })
            .unwrap_or(Precision::Nf4);
        ModelState {
            params_b: RwSignal::new(parse_f64(g("n"), 0.05, 2000.0).unwrap_or(7.0)),
            gpu: RwSignal::new(gpu),
            precision: RwSignal::new(precision),
            batch: RwSignal::new(parse_u32(g("b"), 1, 1024).unwrap_or(1)),
            context: RwSignal::new(parse_u32(g("ctx"), 128, 1_048_576).unwrap_or(2048)),
            name: RwSignal::new(
                g("name")
                    .map(|s| s.chars().take(80).collect())
                    .unwrap_or_else(|| "my-model".into()),
            ),
            engine: RwSignal::new(g("stack").map(str::to_string)),
        }
    }

    pub fn write_query(&self, q: &mut Query) {
        q.push("n", format!("{}", self.params_b.get()));
        q.push("gpu", self.gpu.get().label());
        q.push("p", self.precision.get().as_str());
        q.push("b", self.batch.get().to_string());
        q.push("ctx", self.context.get().to_string());
        let name = self.name.get();
        if name != "my-model" {
            q.push("name", name);
        }
        if let Some(e) = self.stack() {
            q.push("stack", e);
        }
    }

    /// The stack asked for, when the card's architecture has it; a link's unknown stack, or one
    /// the picked card lacks, falls back to the default.
    pub fn stack(&self) -> Option<String> {
        super::stack_on(self.engine.get(), self.arch())
    }

    pub fn arch(&self) -> Arch {
        self.gpu.get().arch()
    }

    pub fn estimate(&self) -> Estimate {
        estimate(
            Dataset::embedded(),
            default_classes(),
            &EstimateInput {
                arch: self.arch(),
                params_b: self.params_b.get(),
                precision: self.precision.get(),
                batch: self.batch.get(),
                context: self.context.get(),
                engine: self.stack(),
            },
        )
    }
}

/// The card picked on Your model: one of `data/gpus.csv`, or another card chosen by its
/// architecture ("Other Ampere card").
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CardChoice {
    /// A card of the catalog, by its catalog name.
    Card(String),
    /// A card not in the catalog, by architecture.
    Other(Arch),
}

impl CardChoice {
    /// A catalog card (any spelling `Dataset::gpu` accepts) or an "Other … card" label.
    pub fn parse(text: &str) -> Option<CardChoice> {
        Dataset::embedded()
            .gpu(text)
            .map(|g| CardChoice::Card(g.name.clone()))
            .or_else(|| {
                let word = text.trim().strip_prefix("Other ")?.strip_suffix(" card")?;
                word.parse().ok().map(CardChoice::Other)
            })
    }

    /// The picker's value and the URL's `gpu=`: the card name, or "Other Ampere card".
    pub fn label(&self) -> String {
        match self {
            CardChoice::Card(name) => name.clone(),
            CardChoice::Other(a) => {
                let s = a.as_str();
                format!("Other {}{} card", s[..1].to_ascii_uppercase(), &s[1..])
            }
        }
    }

    /// The architecture whose curves apply.
    pub fn arch(&self) -> Arch {
        match self {
            CardChoice::Card(name) => Dataset::embedded().gpu(name).map_or(Arch::Ada, |g| g.arch),
            CardChoice::Other(a) => *a,
        }
    }

    /// The catalog entry, for a catalog card.
    pub fn gpu(&self) -> Option<&'static analysis::Gpu> {
        match self {
            CardChoice::Card(name) => Dataset::embedded().gpu(name),
            CardChoice::Other(_) => None,
        }
    }
}

/// The class an estimate used (its own architecture's or the borrowed one).
pub fn used_class(e: &Estimate) -> Option<&'static CurveClass> {
    let arch = e.borrowed_from.unwrap_or(e.input.arch);
    match e.curve_engine.as_deref() {
        // The very class of the estimate: where several engines have curves, its engine's.
        Some(engine) => analysis::find_class_on(default_classes(), arch, e.input.precision, engine),
        None => find_class(default_classes(), arch, e.input.precision),
    }
}

fn model_spec(e: &Estimate) -> Spec {
    let mut spec = Spec {
        x_label: "model size (B parameters, log scale)".into(),
        y_label: "ΔE vs FP16 (%)".into(),
        shade: true,
        ..Spec::default()
    };
    let n = e.input.params_b;
    let x0 = (n / 2.0).clamp(0.1, 0.3);
    let x1 = (n * 2.0).clamp(30.0, 200.0);
    spec.x_range = (x0, x1);
    if let Some(c) = used_class(e) {
        let col = prec_col(c.precision.as_str());
        class_layers(c, &mut spec, (x0, x1), col, false, "");
        anchor_marks(c, &mut spec, col);
    }
    if let Some(d) = e.delta_pct {
        spec.marks.push(Mark {
            x: n,
            y: d,
            col: basis_col(e.basis.as_str()),
            filled: true,
            shape: Shape::Diamond,
            r: 6.5,
            ring: true,
            err: e.ci_low.zip(e.ci_high),
            tip: format!(
                "your model · {}\n{} on {}\nΔE {} ({})\n95 % CI {} to {}\nconfidence {}",
                size_b(n),
                e.input.precision,
                e.input.arch,
                pct(d, 1),
                e.basis.as_str(),
                pct(e.ci_low.unwrap_or(f64::NAN), 1),
                pct(e.ci_high.unwrap_or(f64::NAN), 1),
                e.confidence.as_str()
            ),
        });
    }
    spec.fit_y(40.0);
    // Keep a far-extrapolated band from flattening the picture.
    let (lo, hi) = spec.y_range;
    spec.y_range = (lo.max(-100.0), hi.min(400.0));
    spec
}

#[component]
pub fn ClassFacts(#[prop(into)] class: Signal<Option<&'static CurveClass>>) -> impl IntoView {
    move || {
        class.get().map(|c| {
            let f = &c.fit;
            let bound = |name: analysis::fit::FitParam| {
                if f.at_bound.contains(&name) {
                    " (on its bound)"
                } else {
                    ""
                }
            };
            view! {
                <table class="facts">
                    <caption>{format!("Fit of the {} {} class ({} curve)", c.arch, c.precision, c.engine)}</caption>
                    <tbody>
                        <tr><th scope="row">"Model"</th><td>"ΔE(N) = A − S·x/(1+x), x = N/N*"</td></tr>
                        <tr><th scope="row">"A (small-model penalty)"</th><td>{format!("{}{}", num(f.a, 2), bound(analysis::fit::FitParam::A))}</td></tr>
                        <tr><th scope="row">"S (saving scale)"</th><td>{format!("{}{}", num(f.s, 2), bound(analysis::fit::FitParam::S))}</td></tr>
                        <tr><th scope="row">"N* (B)"</th><td>{format!("{}{}{}", num(f.n_star, 3), bound(analysis::fit::FitParam::NStar), if f.n_star_fixed { " (fixed at the median size: < 3 points)" } else { "" })}</td></tr>
                        <tr><th scope="row">"Crossover"</th><td>{c.crossover_b.map(|x| format!("{} — quantization saves above this size", size_b((x * 1000.0).round() / 1000.0))).unwrap_or_else(|| if f.predict(f.n_min) < 0.0 { "none: the fit saves at every size".into() } else { "none: the fit costs more at every size".into() })}</td></tr>
                        <tr><th scope="row">"RMS residual"</th><td>{format!("{} points", num(f.resid_rms, 2))}</td></tr>
                        <tr><th scope="row">"Leave-one-out MAE"</th><td>{c.loo_mae.map(|m| format!("{} points", num(m, 2))).unwrap_or_else(|| "— (needs ≥ 4 anchors)".into())}</td></tr>
                        <tr><th scope="row">"Anchors"</th><td>{format!("{} measured points, {}–{}", c.points.len(), size_b(f.n_min), size_b(f.n_max))}</td></tr>
                        <tr><th scope="row">"Cards"</th><td>{c.gpus.join(", ")}</td></tr>
                        <tr><th scope="row">"Stacks"</th><td class="small">{c.stacks.join("; ")}</td></tr>
                    </tbody>
                </table>
            }
        })
    }
}

#[component]
pub fn ModelTab() -> impl IntoView {
    let st = expect_context::<crate::AppState>().model;
    let est = Memo::new(move |_| st.estimate());
    view! {
        <section class="tab-model">
            <ModelInputs/>
            <EstimateCard est=est/>
            <CurveCard est=est/>
            <ReportJsonCard/>
        </section>
    }
}

/// Size, card, precision, batch, context and name: every input of the tab.
#[component]
fn ModelInputs() -> impl IntoView {
    let st = expect_context::<crate::AppState>().model;
    view! {
            <div class="card inputs">
                <h2 class="card-title">"Your model"</h2>
                <div class="grid-inputs">
                    <label>
                        <span>"Size (B parameters)"</span>
                        <input
                            id="params-input"
                            type="number"
                            min="0.05"
                            max="2000"
                            step="0.1"
                            inputmode="decimal"
                            prop:value=move || st.params_b.get().to_string()
                            on:change=move |ev| {
                                if let Some(v) = crate::util::parse_params_b(&event_target_value(&ev)) {
                                    st.params_b.set(v);
                                }
                            }
                        />
                    </label>
                    <label>
                        <span>"GPU (sets the architecture)"</span>
                        <select id="model-gpu" on:change=move |ev| { if let Some(c) = CardChoice::parse(&event_target_value(&ev)) { st.gpu.set(c) } } prop:value=move || st.gpu.get().label()>
                            {Dataset::embedded()
                                .gpus
                                .iter()
                                .map(|g| view! { <option value=g.name.clone()>{format!("{} · {}", g.name, g.arch)}</option> })
                                .collect_view()}
                            <optgroup label="Another card, by architecture">
                                {report::Arch::ALL
                                    .iter()
                                    .map(|a| {
                                        let l = CardChoice::Other(*a).label();
                                        view! { <option value=l.clone()>{l.clone()}</option> }
                                    })
                                    .collect_view()}
                            </optgroup>
                        </select>
                    </label>
                    <label>
                        <span>"Precision"</span>
                        <select id="precision-select" on:change=move |ev| { if let Ok(p) = event_target_value(&ev).parse() { st.precision.set(p) } } prop:value=move || st.precision.get().as_str()>
                            {move || {
                                let mut ps = precisions_for(st.arch());
                                let cur = st.precision.get();
                                if !ps.contains(&cur) {
                                    ps.push(cur);
                                }
                                ps.into_iter()
                                    .map(|p| {
                                        let label = if p.is_gguf() { format!("{p} (GGUF)") } else { p.to_string() };
                                        let sel = p == cur;
                                        view! { <option value=p.as_str() selected=sel>{label}</option> }
                                    })
                                    .collect_view()
                            }}
                        </select>
                    </label>
                    <super::StackSelect id="stack-select" arch=Signal::derive(move || st.arch()) engine=st.engine/>
                    <label>
                        <span>"Batch size"</span>
                        <select id="batch-select" on:change=move |ev| st.batch.set(event_target_value(&ev).parse().unwrap_or(1)) prop:value=move || st.batch.get().to_string()>
                            {BATCHES.iter().map(|b| view! { <option value=b.to_string()>{b.to_string()}</option> }).collect_view()}
                        </select>
                    </label>
                    <label>
                        <span>"Context (tokens)"</span>
                        <select id="context-select" on:change=move |ev| st.context.set(event_target_value(&ev).parse().unwrap_or(2048)) prop:value=move || st.context.get().to_string()>
                            {CONTEXTS.iter().map(|c| view! { <option value=c.to_string()>{c.to_string()}</option> }).collect_view()}
                        </select>
                    </label>
                    <label>
                        <span>"Model name (for the report)"</span>
                        <input
                            type="text"
                            maxlength="80"
                            prop:value=move || st.name.get()
                            on:change=move |ev| st.name.set(event_target_value(&ev).chars().take(80).collect())
                        />
                    </label>
                </div>
            </div>
    }
}

/// The verdict, ΔE with its interval, energy, weights, tags and notes.
#[component]
fn EstimateCard(est: Memo<Estimate>) -> impl IntoView {
    let st = expect_context::<crate::AppState>().model;
    let gpu_info = Memo::new(move |_| st.gpu.get().gpu().cloned());
    {
        move || {
            let e = est.get();
            let verdict = e.verdict();
            let cls = match e
                .delta_pct
                .map(|d| analysis::verdict::direction(d, e.interval()))
            {
                Some(analysis::verdict::Direction::Saves) => "headline good",
                Some(analysis::verdict::Direction::Costs) => "headline bad",
                _ => "headline",
            };
            let basis = e.basis.as_str().to_string();
            let (energy, kwh) = e
                .energy_mj
                .map(per_million)
                .unwrap_or(("—".into(), String::new()));
            let (fp16e, _) = e
                .fp16_energy_mj
                .map(per_million)
                .unwrap_or(("—".into(), String::new()));
            // True bytes of the format (scales, fp16 embeddings) from analysis's VRAM model.
            let weights = analysis::weights_gb(e.input.params_b, e.input.precision.as_str());
            let vram = gpu_info.get().map(|g| g.vram_gb);
            let stack =
                used_class(&e).and_then(|c| c.stacks.iter().find_map(|s| super::other_stack(s)));
            view! {
                <div class="card result" id="model-result">
                    <p class=cls id="model-verdict">{verdict}</p>
                    <div class="stats">
                        <div class="stat">
                            <span class="k">"ΔE vs FP16"</span>
                            <span class="v" id="model-delta">{e.delta_pct.map(|d| pct(d, 1)).unwrap_or_else(|| "—".into())}</span>
                            <span class="sub">{match (e.ci_low, e.ci_high) {
                                (Some(l), Some(h)) => format!("95 % CI {} to {}", pct(l, 1), pct(h, 1)),
                                _ => "no interval".into(),
                            }}</span>
                        </div>
                        <div class="stat">
                            <span class="k">"Energy per 1M tokens"</span>
                            <span class="v">{energy}</span>
                            <span class="sub">{format!("{kwh} · FP16 {fp16e}")}</span>
                        </div>
                        <div class="stat">
                            <span class="k">"Weights"</span>
                            <span class="v" id="model-weights">{weights.map(|w| format!("{w:.1} GB")).unwrap_or_else(|| "—".into())}</span>
                            <span class="sub">{match (weights, vram) {
                                (Some(w), Some(v)) if w > v => format!("does not fit in {v:.0} GB"),
                                (Some(_), Some(v)) => format!("of {v:.0} GB VRAM (weights only, scales included)"),
                                _ => "weights only, scales included".into(),
                            }}</span>
                        </div>
                    </div>
                    <div class="tags">
                        <BasisTag basis=basis/>
                        <span class=format!("tag conf conf-{}", e.confidence.as_str())>{format!("confidence: {}", e.confidence.as_str())}</span>
                        {e.class.map(|c| view! { <span class="tag">{format!("class {c} · {} curve · {} anchors", e.curve_engine.as_deref().unwrap_or("?"), e.class_points)}</span> })}
                        {e.borrowed_from.map(|b| view! { <span class="tag warn">{format!("borrowed from {b}")}</span> })}
                        {stack.map(|s| view! { <span class="tag warn" id="model-stack">{s}</span> })}
                    </div>
                    <ul class="notes">
                        {e.notes.iter().map(|n| view! { <li>{n.clone()}</li> }).collect_view()}
                    </ul>
                </div>
            }
        }
    }
}

/// The class's fitted curve with its band, the anchors, your point, and the fit's parameters.
#[component]
fn CurveCard(est: Memo<Estimate>) -> impl IntoView {
    let st = expect_context::<crate::AppState>().model;
    let spec = Signal::derive(move || model_spec(&est.get()));
    let class = Signal::derive(move || used_class(&est.get()));
    view! {
            <div class="card">
                <h2 class="card-title">"The fitted curve behind the estimate"</h2>
                <p class="sub">
                    "Line: the class's fit. Shaded: its 95 % band along the whole curve (parameter uncertainty inside the measured range, widening with the distance outside it). "
                    "Circles: the measured anchors (filled n ≥ 2, hollow n = 1). Diamond: your model with its 95 % CI, coloured by basis."
                </p>
                <Chart spec=spec id="model-canvas" label="Fitted crossover curve with uncertainty band, measured anchors and your model's estimate"/>
                <ul class="legend">
                    <li><span class="glyph" style:color=move || format!("var({})", prec_col(st.precision.get().as_str()))>"━"</span>"fitted curve · band 95 %"</li>
                    <li><span class="glyph" style:color=move || format!("var({})", prec_col(st.precision.get().as_str()))>"●"</span>"anchor n ≥ 2"</li>
                    <li class="faded"><span class="glyph" style:color=move || format!("var({})", prec_col(st.precision.get().as_str()))>"○"</span>"anchor n = 1"</li>
                    <li><span class="glyph" style:color=move || format!("var({})", basis_col(est.get().basis.as_str()))>"◆"</span>{move || format!("your model ({})", est.get().basis.as_str())}</li>
                </ul>
                {move || (est.get().batch_context_factor < 1.0).then(|| view! {
                    <p class="fine">"The curve is for batch 1 and a 2 048-token context; your point includes the batch/context factor, which only shrinks savings."</p>
                })}
                <ClassFacts class=class/>
            </div>
    }
}

/// The estimate as energy.json, written by the worker module when the reader opens it (the page's
/// first load stays small: the worker holds the report serializer).
#[component]
fn ReportJsonCard() -> impl IntoView {
    let st = expect_context::<crate::AppState>().model;
    let json_open = RwSignal::new(false);
    let report_json = RwSignal::new(String::new());
    Effect::new(move |_| {
        if !json_open.get() {
            return;
        }
        let req = crate::validate::EstimateReq {
            arch: st.arch(),
            params_b: st.params_b.get(),
            precision: st.precision.get(),
            batch: st.batch.get(),
            context: st.context.get(),
            gpu: st.gpu.get().label(),
            name: st.name.get(),
        };
        report_json.set("writing…".into());
        crate::validate::estimate_json(&req, move |j| report_json.set(j));
    });
    view! {
            <div class="card">
                <h2 class="card-title">"This estimate as energy.json"</h2>
                <p class="sub">"Schema-valid, basis never “measured”: nothing here touched a GPU."</p>
                <details id="report-details" on:toggle=move |ev: web_sys::Event| {
                    let open = ev
                        .target()
                        .and_then(|t| t.dyn_into::<web_sys::HtmlDetailsElement>().ok())
                        .map(|d| d.open())
                        .unwrap_or(false);
                    json_open.set(open);
                }>
                    <summary>"Show the report JSON"</summary>
                    <div class="actions"><CopyButton text=report_json label="Copy JSON" id="copy-json"/></div>
                    <pre class="code" id="report-json">{move || report_json.get()}</pre>
                </details>
            </div>
    }
}
