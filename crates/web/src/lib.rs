//! The quantenergy page: a Leptos CSR app on top of `report` (the energy.json contract) and
//! `analysis` (the science). Every figure on screen comes from those two crates; this crate only
//! lays them out, draws them and keeps the view in the URL.
//!
//! * [`App`] — hero, tab bar, the router ([`TabBody`]) and the footer.
//! * [`url`] — query-string state (every tab and its inputs has a permalink).
//! * [`chart`] — plotters-canvas charts with HTML text tooltips.
//! * [`tabs`] — one module per tab.
//! * [`validate`] — report validation in a Web Worker (second wasm module), main-thread fallback.

// A host build of the whole page (`cargo test --workspace`: leptos' `ssr` views of every tab)
// nests view types deeper than the compiler's default query depth of 128.
#![recursion_limit = "256"]

// The timing hooks draw on a real canvas (`chart::draw`): the page module only.
#[cfg(all(target_arch = "wasm32", not(feature = "landing")))]
pub mod bench;
pub mod chart;
pub mod context_card;
#[cfg(not(target_arch = "wasm32"))]
pub mod prerender;
pub mod tabs;
pub mod url;
pub mod util;
#[cfg(not(feature = "landing"))]
pub mod validate;

use leptos::prelude::*;
use std::cell::Cell;
use url::{Query, Tab};

/// The shared state of the page: one signal per input of every tab.
#[derive(Clone, Copy)]
pub struct AppState {
    pub tab: RwSignal<Tab>,
    pub tested: tabs::tested::TestedState,
    #[cfg(not(feature = "landing"))]
    pub model: tabs::model::ModelState,
    #[cfg(not(feature = "landing"))]
    pub optimize: tabs::optimize::OptimizeState,
    #[cfg(not(feature = "landing"))]
    pub run: tabs::run::RunState,
    /// A message about the link the page was opened with (unknown tab, malformed overlay, …).
    pub link_notice: RwSignal<Vec<String>>,
}

impl AppState {
    pub fn from_query(q: &Query) -> AppState {
        let mut notices = Vec::new();
        let tab = match q.get("tab") {
            None => Tab::Tested,
            Some(s) => Tab::from_slug(s).unwrap_or_else(|| {
                notices.push(format!(
                    "This link asks for a tab called “{}”, which this page does not have; showing Tested models.",
                    s.chars().take(40).collect::<String>()
                ));
                Tab::Tested
            }),
        };
        AppState {
            tab: RwSignal::new(tab),
            tested: tabs::tested::TestedState::from_query(q, tab == Tab::Tested),
            #[cfg(not(feature = "landing"))]
            model: tabs::model::ModelState::from_query(q, tab == Tab::Model),
            #[cfg(not(feature = "landing"))]
            optimize: tabs::optimize::OptimizeState::from_query(q, tab == Tab::Optimize),
            #[cfg(not(feature = "landing"))]
            run: tabs::run::RunState::from_query(q),
            link_notice: RwSignal::new(notices),
        }
    }

    /// The query string of what is on screen: the tab and that tab's inputs.
    pub fn to_query(&self) -> Query {
        let mut q = Query::default();
        let tab = self.tab.get();
        q.push("tab", tab.slug());
        match tab {
            Tab::Tested => self.tested.write_query(&mut q),
            #[cfg(not(feature = "landing"))]
            Tab::Model => self.model.write_query(&mut q),
            #[cfg(not(feature = "landing"))]
            Tab::Optimize => self.optimize.write_query(&mut q),
            #[cfg(not(feature = "landing"))]
            Tab::Run => self.run.write_query(&mut q),
            // The landing build has no other tab's inputs: its other tabs hand over to the full
            // page, which reads them from this query string.
            _ => {}
        }
        q
    }
}

thread_local! {
    static FIRST_PAINT_DONE: Cell<bool> = const { Cell::new(false) };
}

/// The id of `index.html`'s data block: `data/anchors.csv` as text, written by the pre-render, read
/// by both page modules ([`provide_page_data`]) so the page downloads it once.
pub const DATA_BLOCK_ID: &str = "qe-anchors";

/// Hand the page's `data/anchors.csv` (the data block in `index.html`) to `analysis` before the
/// first use (`page-anchors` builds; the worker gets it from the page in a message instead).
#[cfg(all(target_arch = "wasm32", feature = "page-anchors"))]
pub fn provide_page_data() {
    let text = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.get_element_by_id(DATA_BLOCK_ID))
        .map(|e| e.inner_html())
        .unwrap_or_default();
    analysis::dataset::provide_anchors_csv(text);
}

/// Nothing to hand over: this build embeds the file.
#[cfg(not(all(target_arch = "wasm32", feature = "page-anchors")))]
pub fn provide_page_data() {}

/// Parse the embedded data ahead of the mount: the landing's start step 2, a task of its own
/// (`assets/boot.js`), so that no one step of the start blocks input for long.
pub fn prepare() {
    provide_page_data();
    let _ = analysis::Dataset::embedded();
}

/// The steps of the page's first mount, one task each: a signal that counts 1, 2, … `steps`, one
/// step per task, so the cards of the first view mount in short tasks (`Show when=step ≥ k`). On
/// later mounts (the page is up) and in the build-time pre-render it starts at `steps`.
pub fn start_steps(steps: u8) -> ReadSignal<u8> {
    let first = cfg!(target_arch = "wasm32") && !first_paint_done();
    let (step, set_step) = signal(if first { 1 } else { steps });
    fn next(set_step: WriteSignal<u8>, steps: u8) {
        set_timeout(
            move || {
                let Some(s) = set_step.try_update(|s| {
                    *s += 1;
                    *s
                }) else {
                    return; // unmounted meanwhile
                };
                if s < steps {
                    next(set_step, steps);
                }
            },
            std::time::Duration::ZERO,
        );
    }
    if first && steps > 1 {
        next(set_step, steps);
    }
    step
}

/// Whether a chart has painted yet (the first one draws in a task of its own).
pub fn first_paint_done() -> bool {
    FIRST_PAINT_DONE.with(Cell::get)
}

/// Called by every chart after a paint; the first one records `window.qe.firstChartMs` and
/// removes the pre-rendered landing, which the page now covers (same layout, so nothing moves).
pub fn note_first_paint() {
    if !FIRST_PAINT_DONE.with(|c| c.replace(true)) {
        util::mark("qe:first-chart");
        util::publish_metric("firstChartMs", util::now_ms());
        // The take-over (the pre-render's removal, the page's reveal and their relayout) is a
        // task of its own after the chart's: the chart is already drawn when the page shows.
        set_timeout(util::settle_prerender, std::time::Duration::ZERO);
    }
}

/// A counter bumped on window resize and on a light/dark switch: charts redraw when it moves.
pub fn redraw_tick() -> RwSignal<u32> {
    use_context::<RedrawTick>()
        .map(|r| r.0)
        .unwrap_or_else(|| RwSignal::new(0))
}

#[derive(Clone, Copy)]
struct RedrawTick(RwSignal<u32>);

#[cfg(not(target_arch = "wasm32"))]
fn watch_environment(_: RwSignal<u32>) {}

#[cfg(target_arch = "wasm32")]
fn watch_environment(tick: RwSignal<u32>) {
    use wasm_bindgen::prelude::*;
    use wasm_bindgen::JsCast;
    let w = util::window();
    // `try_update`: after the landing build hands the page over, its listeners may still fire.
    let on_resize = Closure::<dyn FnMut()>::new(move || {
        tick.try_update(|t| *t += 1);
    });
    let _ = w.add_event_listener_with_callback("resize", on_resize.as_ref().unchecked_ref());
    on_resize.forget();
    if let Ok(Some(mql)) = w.match_media("(prefers-color-scheme: dark)") {
        let on_change = Closure::<dyn FnMut()>::new(move || {
            tick.try_update(|t| *t += 1);
        });
        mql.set_onchange(Some(on_change.as_ref().unchecked_ref()));
        on_change.forget();
    }
}

/// The page, in the browser: its state from the address bar, kept in step with it.
#[component]
pub fn App() -> impl IntoView {
    let state = AppState::from_query(&url::current_query());
    let tick = RwSignal::new(0u32);
    watch_environment(tick);

    // Keep the address bar in step with the view.
    Effect::new(move |_| {
        let q = state.to_query();
        url::replace_query(&q);
    });

    view! { <Page state=state tick=tick/> }
}

/// The page for a given state: what [`App`] shows, and what [`prerender`] writes at build time
/// for the default view (no browser involved).
#[component]
pub fn Page(state: AppState, tick: RwSignal<u32>) -> impl IntoView {
    provide_context(state);
    provide_context(RedrawTick(tick));

    view! {
        {static_head()}
        <nav class="tabs" aria-label="Sections">
            {Tab::ALL
                .iter()
                .map(|&t| {
                    let selected = move || state.tab.get() == t;
                    view! {
                        <a
                            id=format!("tab-{}", t.slug())
                            href=format!("?tab={}", t.slug())
                            class="tab"
                            class:active=selected
                            aria-current=move || selected().then_some("page")
                            on:click=move |ev: web_sys::MouseEvent| {
                                if !(ev.ctrl_key() || ev.meta_key() || ev.shift_key()) {
                                    ev.prevent_default();
                                    state.tab.set(t);
                                }
                            }
                        >
                            {t.label()}
                        </a>
                    }
                })
                .collect_view()}
        </nav>
        <Show when=move || state.link_notice.with(|n| !n.is_empty())>
            <div class="notice" role="alert">
                {move || {
                    state.link_notice.get().into_iter().map(|n| view! { <p>{n}</p> }).collect_view()
                }}
                <button class="btn small" on:click=move |_| state.link_notice.set(Vec::new())>
                    "Dismiss"
                </button>
            </div>
        </Show>
        <main id="main" aria-labelledby=move || format!("tab-{}", state.tab.get().slug())>
            <TabBody/>
        </main>
        <Footer/>
    }
}

/// The router: one arm per tab. Add a tab here (and in [`url::Tab`]).
#[cfg(not(feature = "landing"))]
#[component]
pub fn TabBody() -> impl IntoView {
    let state = expect_context::<AppState>();
    move || match state.tab.get() {
        Tab::Tested => tabs::tested::TestedTab().into_any(),
        Tab::Model => tabs::model::ModelTab().into_any(),
        Tab::Optimize => tabs::optimize::OptimizeTab().into_any(),
        Tab::Run => tabs::run::RunTab().into_any(),
        Tab::Data => tabs::data::DataTab().into_any(),
    }
}

/// The landing build's router: Tested models is here; any other tab hands the page over to the
/// full module (fetched then, see `assets/boot.js`), which opens on the same URL.
#[cfg(feature = "landing")]
#[component]
pub fn TabBody() -> impl IntoView {
    let state = expect_context::<AppState>();
    move || match state.tab.get() {
        Tab::Tested => tabs::tested::TestedTab().into_any(),
        other => {
            let failed = hand_over(other.slug());
            view! {
                <p class="boot" role="status">
                    {if failed {
                        "This part of the page could not be loaded; reload to try again."
                    } else {
                        "Loading this tab…"
                    }}
                </p>
            }
            .into_any()
        }
    }
}

/// Ask `boot.js` to load the full page for `tab`; `true` when it cannot (no loader).
#[cfg(feature = "landing")]
pub(crate) fn hand_over(tab: &str) -> bool {
    use wasm_bindgen::JsCast;
    let w = util::window();
    let Some(f) = js_sys::Reflect::get(&w, &"qeLoadFull".into())
        .ok()
        .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
    else {
        return true;
    };
    f.call1(&w, &tab.into()).is_err()
}

/// The skip link and the hero: static text from the data, the same for every view, so they exist
/// only in the pre-render (`crate::prerender`) and stay when the page takes over
/// (`util::settle_prerender`), on every link. The page modules do not carry them: a re-rendered
/// lede would be a second, late largest paint, and the code would cost both modules.
#[cfg(not(target_arch = "wasm32"))]
fn static_head() -> impl IntoView {
    view! {
        <a class="skip" href="#main">"Skip to content"</a>
        <Hero/>
    }
}

#[cfg(target_arch = "wasm32")]
fn static_head() -> impl IntoView {}

#[cfg(not(target_arch = "wasm32"))]
#[component]
fn Hero() -> impl IntoView {
    let classes = analysis::default_classes();
    // One card per headline class: where the fitted curve crosses zero, or that it never does
    // inside the measured range.
    let card =
        |label: &str, arch: report::Arch, precision: report::Precision, engine: Option<&str>| {
            let c = match engine {
                Some(e) => analysis::find_class_on(classes, arch, precision, e)?,
                None => analysis::find_class(classes, arch, precision)?,
            };
            let verdict = match c.crossover_b {
                Some(x) if x >= c.fit.n_min => {
                    format!(
                        "{precision} pays off above ≈ {}",
                        util::size_b((x * 100.0).round() / 100.0)
                    )
                }
                _ if c.fit.predict(c.fit.n_min) < 0.0 => {
                    format!("{precision} saves at every size measured")
                }
                _ => format!("{precision} costs at every size measured"),
            };
            let basis = if c.engine != "transformers" {
                format!("{} · our runs · fit of {} points", c.engine, c.points.len())
            } else {
                format!("fit of {} measured points", c.points.len())
            };
            Some((label.to_string(), verdict, basis))
        };
    use report::{Arch, Precision};
    let summary = [
        ("Ada (RTX 4090)", Arch::Ada, Precision::Nf4, None),
        (
            "Blackwell (RTX 5090)",
            Arch::Blackwell,
            Precision::Nf4,
            None,
        ),
        ("Turing (T4)", Arch::Turing, Precision::Nf4, None),
        (
            "Hopper (H200), candle-graph",
            Arch::Hopper,
            Precision::Q4K,
            Some("candle-graph"),
        ),
        (
            "Hopper (H200), llama.cpp",
            Arch::Hopper,
            Precision::Q4K,
            Some("llama.cpp"),
        ),
    ]
    .iter()
    .filter_map(|(label, arch, p, e)| card(label, *arch, *p, *e))
    .collect::<Vec<_>>();
    let stacks = hopper_stacks_sentence().unwrap_or_default();
    let batching = hopper_batch_sentence().unwrap_or_default();
    view! {
        <header class="hero">
            <div class="brand">
                <span class="logo" aria-hidden="true">"⚡"</span>
                <span class="name">"quantenergy"</span>
            </div>
            <h1>"Does quantizing your model save energy on your GPU?"</h1>
            <p class="lede">
                "Often not. On the cards measured so far, 4-bit NF4 "
                <strong>"costs"</strong>
                " energy on small models and "
                <strong>"saves"</strong>
                " it only above a crossover size; LLM.int8() with its default threshold cost more at every size measured. "
                {stacks}
                {batching}
                "Every number here is measured GPU-package energy, or says plainly that it is not."
            </p>
            <ul class="crossovers" aria-label="Crossover sizes per class">
                {summary
                    .into_iter()
                    .map(|(label, verdict, n)| {
                        view! {
                            <li>
                                <span class="k">{label}</span>
                                <span class="v">{verdict}</span>
                                <span class="n">{n}</span>
                            </li>
                        }
                    })
                    .collect_view()}
            </ul>
        </header>
    }
}

/// The lede's sentence on software stacks, re-derived from the H200 rows at build time: at the
/// size the most stacks measured, what each says of Q4_K (or of the format they disagree on most).
#[cfg(not(target_arch = "wasm32"))]
fn hopper_stacks_sentence() -> Option<String> {
    let ds = analysis::Dataset::embedded();
    let sizes = analysis::stacks::shared_sizes(ds, "H200");
    let cmp = sizes
        .iter()
        .map(|n| analysis::stacks::compare_stacks(ds, "H200", *n))
        .max_by(|a, b| {
            (a.columns.len(), a.params_b)
                .partial_cmp(&(b.columns.len(), b.params_b))
                .unwrap_or(std::cmp::Ordering::Equal)
        })?;
    let shared = |f: &str| {
        cmp.columns
            .iter()
            .filter(|c| c.cell(f).and_then(|x| x.delta_pct).is_some())
            .count()
    };
    let format = if shared("Q4_K") >= 2 {
        "Q4_K".to_string()
    } else {
        cmp.widest_disagreement()?.0
    };
    let says: Vec<String> = cmp
        .columns
        .iter()
        .filter_map(|c| {
            Some(format!(
                "{} with {}",
                util::pct(c.cell(&format)?.delta_pct?, 0),
                analysis::curve_engine(&c.stack)
            ))
        })
        .collect();
    Some(format!(
        "The software stack matters as much as the card: on one H200 (our own runs), {format} at {} changes energy per token by {}. ",
        util::size_b(cmp.params_b),
        says.join(", ")
    ))
}

/// The lede's sentence on batching, re-derived from the H200 batch sweeps at build time: the
/// largest model of the preferred engine whose sweep turns a saving at batch 1 into a cost.
#[cfg(not(target_arch = "wasm32"))]
fn hopper_batch_sentence() -> Option<String> {
    let sweeps = analysis::sweeps::card_sweeps(analysis::Dataset::embedded(), "H200");
    let engine = sweeps.first()?.engine.clone();
    let (s, said) = sweeps
        .iter()
        .rev()
        .filter(|s| s.engine == engine)
        .filter_map(|s| {
            let said = s.formats.iter().find_map(|f| s.flip(f))?;
            Some((s, said))
        })
        .next()?;
    Some(format!(
        "And batching can flip the answer: with {engine} at {}, {said}. ",
        util::size_b((s.params_b * 10.0).round() / 10.0)
    ))
}

#[component]
fn Footer() -> impl IntoView {
    view! {
        <footer class="foot">
            <p>
                "quantenergy · static page, no backend: nothing you drop or paste leaves this tab. "
                "Scope: GPU-package power (NVML), single-stream decode, batch 1 unless stated. "
                "Data re-compiled from the public EcoCompute / quantenergy.tech datasets; deltas recomputed from the energies."
            </p>
        </footer>
    }
}
