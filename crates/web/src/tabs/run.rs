//! Run it yourself: how to run the meter; a drop zone, file picker and paste box that stack
//! several `energy.json` reports (or overlay links); each report validated locally with errors by
//! JSON path and warnings next to its point; valid points drawn on the fitted curve of their
//! class, coloured by basis, each placed against that curve's band by `analysis::compare::place`
//! (the function behind `quantenergy compare`); Markdown for a submission and a share link per
//! point; and a toggle that refits the curves with your measured points as extra anchors.

use leptos::prelude::*;
use wasm_bindgen::JsCast;

use analysis::class::ClassId;
use analysis::compare::{place, Outcome, Placement, Subject};
use analysis::curves::{ExtraPoint, PointOrigin};
use analysis::{
    default_classes, find_class_on, fit_classes, ClassPoint, CurveClass, Dataset, Point,
};
use report::share::{self, SharePoint};
use report::{Arch, Precision};

use super::{basis_col, prec_col, BasisTag, CopyButton};
use crate::chart::layers::{anchor_marks, class_layers};
use crate::chart::{Chart, Mark, Shape, Spec};
use crate::url::Query;
use crate::util::{self, pct, size_b};
use crate::validate::{self, Checked};

#[derive(Clone, Debug, PartialEq)]
pub enum Origin {
    File,
    Paste,
    Link,
}

#[derive(Clone, Debug, PartialEq)]
pub enum EntryState {
    Checking,
    Report(Box<Checked>),
    Link(Result<SharePoint, String>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub id: u32,
    pub name: String,
    pub origin: Origin,
    pub state: EntryState,
}

impl Entry {
    /// The overlay point, when the entry is valid.
    pub fn point(&self) -> Option<SharePoint> {
        match &self.state {
            EntryState::Report(c) if c.valid => c.point.clone(),
            EntryState::Link(Ok(p)) => Some(p.clone()),
            _ => None,
        }
    }

    /// What `analysis::compare::place` places, when the entry is valid: a report's point with its
    /// stack engine and batch size, a link's point without them.
    pub fn subject(&self) -> Option<Subject> {
        match &self.state {
            EntryState::Report(c) if c.valid => c
                .subject
                .clone()
                .or_else(|| c.point.as_ref().map(Subject::from_share_point)),
            EntryState::Link(Ok(p)) => Some(Subject::from_share_point(p)),
            _ => None,
        }
    }
}

/// Where a subject goes: its class's published curve, or why there is none, and the comparison
/// (`analysis::compare::place`, the function `quantenergy compare` runs).
pub fn placement(subject: &Subject) -> Placement {
    place(subject, default_classes())
}

#[derive(Clone, Copy)]
pub struct RunState {
    pub entries: RwSignal<Vec<Entry>>,
    pub include_fit: RwSignal<bool>,
    pub next_id: RwSignal<u32>,
    pub dragging: RwSignal<bool>,
}

impl RunState {
    pub fn from_query(q: &Query) -> RunState {
        let mut entries = Vec::new();
        for (i, payload) in q.get_all("overlay").into_iter().enumerate() {
            let decoded = share::decode_link(payload).map_err(|e| e.to_string());
            entries.push(Entry {
                id: i as u32 + 1,
                name: format!("overlay link {}", i + 1),
                origin: Origin::Link,
                state: EntryState::Link(decoded),
            });
        }
        let n = entries.len() as u32;
        RunState {
            entries: RwSignal::new(entries),
            include_fit: RwSignal::new(q.get("fit") == Some("1")),
            next_id: RwSignal::new(n + 1),
            dragging: RwSignal::new(false),
        }
    }

    pub fn write_query(&self, q: &mut Query) {
        self.entries.with(|es| {
            for e in es {
                if let Some(p) = e.point() {
                    q.push("overlay", share::encode(&p));
                }
            }
        });
        if self.include_fit.get() {
            q.push("fit", "1");
        }
    }

    fn take_id(&self) -> u32 {
        let id = self.next_id.get_untracked();
        self.next_id.set(id + 1);
        id
    }

    fn set_state(&self, id: u32, state: EntryState) {
        self.entries.update(|es| {
            if let Some(e) = es.iter_mut().find(|e| e.id == id) {
                e.state = state;
            }
        });
    }

    /// Add report text (a file's contents or a paste) and validate it.
    pub fn add_text(&self, name: String, origin: Origin, text: String) {
        let id = self.take_id();
        self.entries.update(|es| {
            es.push(Entry {
                id,
                name,
                origin,
                state: EntryState::Checking,
            })
        });
        let me = *self;
        validate::validate(text, move |c| {
            me.set_state(id, EntryState::Report(Box::new(c)))
        });
    }

    /// Add a pasted overlay link (or bare payload).
    pub fn add_link(&self, text: &str) {
        let id = self.take_id();
        let decoded = share::decode_link(text).map_err(|e| e.to_string());
        self.entries.update(|es| {
            es.push(Entry {
                id,
                name: "pasted link".into(),
                origin: Origin::Link,
                state: EntryState::Link(decoded),
            })
        });
    }

    /// Add a dropped or picked file: refused by size before any byte is read.
    pub fn add_file(&self, file: web_sys::File) {
        let name: String = file.name().chars().take(120).collect();
        let size = file.size();
        if size > report::MAX_INPUT_BYTES as f64 {
            let id = self.take_id();
            self.entries.update(|es| {
                es.push(Entry {
                    id,
                    name,
                    origin: Origin::File,
                    state: EntryState::Report(Box::new(Checked::too_big(size))),
                })
            });
            return;
        }
        let me = *self;
        leptos::task::spawn_local(async move {
            let f = gloo_file::File::from(file);
            match gloo_file::futures::read_as_text(&f).await {
                Ok(text) => me.add_text(name, Origin::File, text),
                Err(e) => {
                    let id = me.take_id();
                    let c = Checked::unreadable(e.to_string());
                    me.entries.update(|es| {
                        es.push(Entry {
                            id,
                            name,
                            origin: Origin::File,
                            state: EntryState::Report(Box::new(c)),
                        })
                    });
                }
            }
        });
    }

    pub fn add_files(&self, files: &web_sys::FileList) {
        for i in 0..files.length() {
            if let Some(f) = files.get(i) {
                self.add_file(f);
            }
        }
    }

    /// The user's measured points as extra anchors: each joins the class `Placement::joins_class`
    /// names (its curve's, or a new one where no curve of its architecture and precision exists;
    /// never one measured with another engine or at another batch size).
    pub fn extra_anchors(&self) -> Vec<ExtraPoint> {
        self.entries.with(|es| {
            es.iter()
                .filter_map(|e| {
                    let s = e.subject()?;
                    let class = placement(&s).joins_class()?;
                    Some(ExtraPoint {
                        arch: class.arch,
                        precision: class.precision,
                        // Its own engine's class, as `compare` placed it (never another's).
                        engine: s.engine.as_deref().map(analysis::compare::engine_key),
                        point: ClassPoint {
                            point: Point {
                                n: s.params_b?,
                                delta: s.delta_pct?,
                            },
                            gpu: s.gpu.clone(),
                            model: s.model.clone(),
                            n: Some(1),
                            cv_pct: None,
                            source: format!("your report: {}", e.name),
                            origin: PointOrigin::User,
                        },
                    })
                })
                .collect()
        })
    }
}

/// Refit every class with `extra`, timing it.
pub fn refit(extra: &[ExtraPoint]) -> Refit {
    let t0 = util::now_ms();
    let classes = fit_classes(Dataset::embedded(), extra);
    let ms = util::now_ms() - t0;
    Refit {
        classes,
        added: extra.len(),
        ms,
    }
}

/// A valid point of one entry, with the entry's name.
#[derive(Clone, Debug, PartialEq)]
pub struct NamedPoint {
    /// The point with its stack engine and batch size (where known).
    pub subject: Subject,
    /// The entry it came from (file name, "pasted JSON", "overlay link 1").
    pub name: String,
}

/// Spec of the overlay chart: every class that has a point, its curve and band, the dataset
/// anchors (muted), your points coloured by basis, and — with the toggle — the refitted curve.
pub fn overlay_spec(points: &[NamedPoint], refitted: Option<&[CurveClass]>) -> Spec {
    let mut spec = Spec {
        x_label: "model size (B parameters, log scale)".into(),
        y_label: "ΔE vs FP16 (%)".into(),
        shade: true,
        ..Spec::default()
    };
    // A curve is a class *and* an engine: a report is drawn on the curve it was placed on, its
    // own engine's (Hopper Q4_K has three), never the class's preferred one.
    let mut keys: Vec<(ClassId, String)> = Vec::new();
    let placed: Vec<(&NamedPoint, Placement)> = points
        .iter()
        .map(|np| (np, placement(&np.subject)))
        .filter(|(_, pl)| pl.drawable())
        .collect();
    for (_, pl) in &placed {
        if let Some(c) = pl.curve_class(default_classes()) {
            let k = (c.id(), c.engine.clone());
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    if keys.is_empty() && placed.is_empty() {
        keys.push((
            ClassId {
                arch: Arch::Ada,
                precision: Precision::Nf4,
            },
            "transformers".into(),
        ));
    }
    let (mut x0, mut x1) = (0.3f64, 30.0f64);
    for n in placed.iter().filter_map(|(_, pl)| pl.subject.params_b) {
        x0 = x0.min(n / 1.5);
        x1 = x1.max(n * 1.5);
    }
    spec.x_range = (x0.max(0.05), x1.min(1000.0));
    let xr = spec.x_range;
    for (k, engine) in keys.iter().take(4) {
        if let Some(c) = find_class_on(default_classes(), k.arch, k.precision, engine) {
            let tag = if keys.iter().filter(|(o, _)| o == k).count() > 1 {
                format!("{k} {engine} ")
            } else if keys.len() > 1 {
                format!("{k} ")
            } else {
                String::new()
            };
            class_layers(
                c,
                &mut spec,
                xr,
                prec_col(k.precision.as_str()),
                false,
                &tag,
            );
            anchor_marks(c, &mut spec, "--muted");
            if let Some(rc) = refitted.and_then(|r| find_class_on(r, k.arch, k.precision, engine)) {
                if rc.points.len() != c.points.len() {
                    let before_bands = spec.bands.len();
                    class_layers(rc, &mut spec, xr, "--fg", true, &format!("{tag}refit "));
                    spec.bands.truncate(before_bands); // the refit shows as a dashed line only
                }
            }
        }
    }
    for (np, pl) in placed {
        let (p, name) = (&pl.subject, &np.name);
        let (Some(n), Some(d)) = (p.params_b, p.delta_pct) else {
            continue;
        };
        spec.marks.push(Mark {
            x: n,
            y: d,
            col: basis_col(&p.basis),
            filled: true,
            shape: Shape::Diamond,
            r: 6.0,
            ring: false,
            err: None,
            tip: format!(
                "{} · {}\n{} ({}) · {}\nΔE {} vs FP16 ({})\nfrom: {}",
                p.model,
                size_b(n),
                p.gpu,
                p.arch,
                p.precision,
                pct(d, 1),
                p.basis,
                name
            ),
        });
    }
    spec.fit_y(40.0);
    let (lo, hi) = spec.y_range;
    spec.y_range = (lo.max(-120.0), hi.min(1000.0));
    spec
}

const COMMANDS: [(&str, &str); 6] = [
    (
        "Measure (synthetic weights in a real model's shapes; needs an NVIDIA GPU and the CUDA toolkit)",
        "cargo run --release -p cli --features cuda -- measure --synthetic qwen2-0.5b --precision Q4_K",
    ),
    (
        "Your own weights, with a quality check (Δ perplexity vs the FP16 arm on a fixed text)",
        "quantenergy measure --model ./Qwen2-1.5B --precision Q4_K --perplexity",
    ),
    (
        "The server you deploy (llama.cpp here; vLLM, SGLang, TGI alike): one server per file, the F16 file is the baseline",
        "quantenergy measure --server-cmd \"llama-server -m {model} --port {port} -ngl 999\" --model-file F16=qwen2-7b-f16.gguf --model-file Q4_K=qwen2-7b-q4_k.gguf",
    ),
    (
        "Where do your reports sit against the published curve of their card and stack?",
        "quantenergy compare *.json",
    ),
    (
        "Validate the report it wrote",
        "quantenergy validate energy.json",
    ),
    (
        "No GPU? Estimate from the published curves (never labelled measured)",
        "quantenergy estimate --gpu \"RTX 4090\" --params-b 7 --precision NF4",
    ),
];

/// The refit behind the "include my points" toggle.
#[derive(Clone, Debug, PartialEq)]
pub struct Refit {
    /// Every class, refitted with the user's measured points.
    pub classes: Vec<CurveClass>,
    /// How many points joined.
    pub added: usize,
    /// How long the refit took in this browser, ms.
    pub ms: f64,
}

#[component]
pub fn RunTab() -> impl IntoView {
    let st = expect_context::<crate::AppState>().run;
    let points = Memo::new(move |_| {
        st.entries.with(|es| {
            es.iter()
                .filter_map(|e| {
                    e.subject().map(|subject| NamedPoint {
                        subject,
                        name: e.name.clone(),
                    })
                })
                .collect::<Vec<_>>()
        })
    });
    let refitted = Memo::new(move |_| st.include_fit.get().then(|| refit(&st.extra_anchors())));
    // The timing goes out as a side effect of the refit, not from inside the memo.
    Effect::new(move |_| {
        if let Some(ms) = refitted.with(|r| r.as_ref().map(|r| r.ms)) {
            util::publish_metric("refitMs", ms);
        }
    });
    let spec = Signal::derive(move || {
        let pts = points.get();
        refitted.with(|r| overlay_spec(&pts, r.as_ref().map(|r| r.classes.as_slice())))
    });

    view! {
        <section class="tab-run">
            <CommandList/>
            <div class="card">
                <h2 class="card-title">"2 · Check your reports here"</h2>
                <p class="sub">"Drop one or several energy.json files (upstream ecocompute-energy/1.x reports work too), pick them, or paste JSON or an overlay link. Everything stays in this tab."</p>
                <DropZone/>
                <PasteBox/>
                <ReportCards/>
            </div>
            <OverlayCard spec=spec refitted=refitted/>
        </section>
    }
}

/// Step 1: the meter's commands, each with a copy button.
#[component]
fn CommandList() -> impl IntoView {
    view! {
        <div class="card">
            <h2 class="card-title">"1 · Run the meter"</h2>
            <p class="sub">
                "The meter samples GPU-package power through NVML during real decoding and writes an "
                <code>"energy.json"</code>
                " with the same fields this page reads. Without a GPU it still writes a report, labelled interpolated or extrapolated — never measured."
            </p>
            {COMMANDS
                .iter()
                .map(|(what, cmd)| {
                    let cmd_s = cmd.to_string();
                    view! {
                        <div class="cmd">
                            <span class="cmd-what">{*what}</span>
                            <div class="cmd-row">
                                <pre class="code"><code>{*cmd}</code></pre>
                                <CopyButton text=Signal::derive(move || cmd_s.clone()) label="Copy"/>
                            </div>
                        </div>
                    }
                })
                .collect_view()}
        </div>
    }
}

/// The drop zone and file picker: every file becomes an entry.
#[component]
fn DropZone() -> impl IntoView {
    let st = expect_context::<crate::AppState>().run;
    let on_drop = move |ev: web_sys::DragEvent| {
        ev.prevent_default();
        st.dragging.set(false);
        if let Some(files) = ev.data_transfer().and_then(|dt| dt.files()) {
            st.add_files(&files);
        }
    };
    let on_pick = move |ev: web_sys::Event| {
        let Some(input) = ev
            .target()
            .and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok())
        else {
            return;
        };
        if let Some(files) = input.files() {
            st.add_files(&files);
        }
        input.set_value("");
    };
    view! {
        <div
            class="dropzone"
            id="dropzone"
            class:dragging=move || st.dragging.get()
            on:dragover=move |ev: web_sys::DragEvent| {
                ev.prevent_default();
                st.dragging.set(true);
            }
            on:dragleave=move |_| st.dragging.set(false)
            on:drop=on_drop
        >
            <p class="drop-title">"Drop energy.json files here"</p>
            <label class="file-label">
                <span>"or choose files"</span>
                <input id="file-input" type="file" multiple accept=".json,application/json" on:change=on_pick/>
            </label>
        </div>
    }
}

/// The paste box (a report or an overlay link) with its check and clear-all buttons.
#[component]
fn PasteBox() -> impl IntoView {
    let st = expect_context::<crate::AppState>().run;
    let paste = RwSignal::new(String::new());
    let on_paste_check = move |_| {
        let text = paste.get_untracked();
        let t = text.trim();
        if t.is_empty() {
            return;
        }
        if t.starts_with(['\u{7b}', '\u{5b}']) {
            // An opening brace or bracket: JSON (written as escapes so no brace literal stands here)
            st.add_text("pasted JSON".into(), Origin::Paste, text);
        } else {
            st.add_link(t);
        }
        paste.set(String::new());
    };
    view! {
        <label class="paste">
            <span>"…or paste a report or an overlay link"</span>
            <textarea
                id="paste-box"
                rows="4"
                spellcheck="false"
                placeholder="{ \"schema_version\": … }  or  https://…?tab=run&overlay=…"
                prop:value=move || paste.get()
                on:input=move |ev| paste.set(event_target_value(&ev))
            ></textarea>
        </label>
        <div class="actions">
            <button class="btn primary" id="paste-check" on:click=on_paste_check>"Check pasted text"</button>
            <button
                class="btn"
                id="clear-all"
                on:click=move |_| st.entries.set(Vec::new())
                disabled=move || st.entries.with(|e| e.is_empty())
            >
                "Clear all"
            </button>
        </div>
    }
}

/// One card per entry, in the order they were added.
#[component]
fn ReportCards() -> impl IntoView {
    let st = expect_context::<crate::AppState>().run;
    view! {
        <ul class="entries" id="entries">
            <For
                each=move || st.entries.get()
                key=|e| (e.id, matches!(e.state, EntryState::Checking))
                children=move |e| view! { <EntryCard e=e/> }
            />
        </ul>
    }
}

/// Step 3: the overlay chart, its legend and the refit toggle.
#[component]
fn OverlayCard(spec: Signal<Spec>, refitted: Memo<Option<Refit>>) -> impl IntoView {
    let st = expect_context::<crate::AppState>().run;
    view! {
        <div class="card">
            <h2 class="card-title">"3 · Your points on the fitted curves"</h2>
            <p class="sub">
                "Each valid report is drawn at (size, ΔE recomputed from its energies) on the fitted curve of its architecture and precision — of its stack too, where the report names its engine — coloured by basis; its card says whether a measured point is inside the curve's 95 % band (the same check as quantenergy compare). Grey circles: the published anchors."
            </p>
            <div class="chart-controls">
                <super::Toggle id="include-fit" checked=st.include_fit label="Include my measured points in the fit"/>
            </div>
            <Chart spec=spec id="overlay-canvas" label="Your reports drawn on the fitted crossover curves"/>
            <ul class="legend">
                {report::Basis::ALL
                    .iter()
                    .map(|b| view! {
                        <li><span class="glyph" style:color=format!("var({})", basis_col(b.as_str()))>"◆"</span>{b.as_str()}</li>
                    })
                    .collect_view()}
                <li><span class="glyph" style:color="var(--muted)">"●"</span>"published anchors"</li>
                <Show when=move || st.include_fit.get()>
                    <li><span class="glyph" style:color="var(--fg)">"┅"</span>"refit with your measured points"</li>
                </Show>
            </ul>
            <Show when=move || refitted.with(|r| r.is_some())>
                <CrossoverMoves refitted=Signal::derive(move || refitted.get())/>
            </Show>
        </div>
    }
}

/// One row of the "how the crossover moves" table.
struct MoveRow {
    class: String,
    published: String,
    with_yours: String,
    users: usize,
}

#[component]
fn CrossoverMoves(refitted: Signal<Option<Refit>>) -> impl IntoView {
    move || {
        refitted.get().map(|r| {
            let fmt = |x: Option<f64>| {
                x.map(|v| size_b((v * 100.0).round() / 100.0))
                    .unwrap_or_else(|| "none".into())
            };
            let rows: Vec<MoveRow> = r
                .classes
                .iter()
                .filter(|c| c.points.iter().any(|p| p.origin == PointOrigin::User))
                .map(|c| MoveRow {
                    class: c.label(),
                    published: find_class_on(default_classes(), c.arch, c.precision, &c.engine)
                        .map(|b| fmt(b.crossover_b))
                        .unwrap_or_else(|| "no curve".into()),
                    with_yours: fmt(c.crossover_b),
                    users: c
                        .points
                        .iter()
                        .filter(|p| p.origin == PointOrigin::User)
                        .count(),
                })
                .collect();
            let ms = r.ms;
            view! {
                <div class="moves" id="crossover-moves">
                    {if r.added == 0 {
                        view! { <p class="fine">"None of your points is a measured one yet: interpolated, extrapolated and unavailable points never join a fit."</p> }.into_any()
                    } else {
                        view! {
                            <table class="facts">
                                <caption>"How the crossover moves with your points"</caption>
                                <thead><tr><th>"class"</th><th>"published"</th><th>"with yours"</th><th>"your points"</th></tr></thead>
                                <tbody>
                                    {rows.into_iter().map(|m| view! { <tr><td>{m.class}</td><td>{m.published}</td><td>{m.with_yours}</td><td>{m.users}</td></tr> }).collect_view()}
                                </tbody>
                            </table>
                        }.into_any()
                    }}
                    <p class="fine">{format!("All classes refitted in {ms:.1} ms in this browser.")}</p>
                </div>
            }
        })
    }
}

#[component]
fn EntryCard(e: Entry) -> impl IntoView {
    let st = expect_context::<crate::AppState>().run;
    let id = e.id;
    let remove = move |_| st.entries.update(|es| es.retain(|x| x.id != id));
    let origin = match e.origin {
        Origin::File => "file",
        Origin::Paste => "pasted",
        Origin::Link => "link",
    };
    let point = e.point();
    let subject = e.subject();
    let body = match &e.state {
        EntryState::Checking => view! { <p class="checking">"Checking…"</p> }.into_any(),
        EntryState::Link(Err(msg)) => view! {
            <div class="errors" role="alert">
                <p class="bad">"This overlay link cannot be read, so nothing is drawn."</p>
                <ul><li><code>"overlay"</code>" "{msg.clone()}</li></ul>
            </div>
        }
        .into_any(),
        EntryState::Link(Ok(_)) => {
            view! { <PointSummary p=point.clone() subject=subject.clone() warnings=Vec::new()/> }
                .into_any()
        }
        EntryState::Report(c) => {
            let c = (**c).clone();
            let engine = match c.engine.as_str() {
                "schema" => "checked against the JSON Schema, types and semantics",
                "typed" => "checked for types and semantics (without the JSON-Schema pass)",
                "none" => "not checked",
                _ => "refused before reading",
            };
            if c.valid {
                let md = c.markdown.clone().unwrap_or_default();
                let warnings = c.warnings.clone();
                view! {
                    <PointSummary p=point.clone() subject=subject.clone() warnings=warnings/>
                    {c.stack.clone().map(|s| view! { <p class="fine stack-line">"Stack: "{s}</p> })}
                    {c.quality.clone().map(|q| view! { <p class="fine quality">"Quality (perplexity): "{q}</p> })}
                    {c.validity.clone().map(|v| view! {
                        <div class="validity" data-validity=v.status.clone()>
                            <p class="fine">"Validity: "{v.headline.clone()}</p>
                            {(!v.lines.is_empty()).then(|| view! {
                                <ul class="warnings">{v.lines.iter().map(|l| view! { <li>{l.clone()}</li> }).collect_view()}</ul>
                            })}
                        </div>
                    })}
                    <details class="md">
                        <summary>"Markdown for a submission"</summary>
                        <div class="actions"><CopyButton text=Signal::derive({ let md = md.clone(); move || md.clone() }) label="Copy Markdown"/></div>
                        <pre class="code">{md}</pre>
                    </details>
                    <p class="fine">{engine}</p>
                }
                .into_any()
            } else {
                view! {
                    <div class="errors" role="alert">
                        <p class="bad">{format!("{} error{} — not drawn", c.errors.len(), if c.errors.len() == 1 { "" } else { "s" })}</p>
                        <ul>
                            {c.errors.iter().map(|i| view! { <li><code>{i.path.clone()}</code>" "{i.message.clone()}</li> }).collect_view()}
                        </ul>
                    </div>
                    {(!c.warnings.is_empty()).then(|| view! {
                        <ul class="warnings">
                            {c.warnings.iter().map(|i| view! { <li>"⚠ "<code>{i.path.clone()}</code>" "{i.message.clone()}</li> }).collect_view()}
                        </ul>
                    })}
                    <p class="fine">{engine}</p>
                }
                .into_any()
            }
        }
    };
    let share_link = point.as_ref().map(|p| share::link(&util::base_url(), p));
    view! {
        <li class="entry" data-entry-id=id.to_string()>
            <div class="entry-head">
                <span class="entry-name">{e.name.clone()}</span>
                <span class="tag">{origin}</span>
                <button class="btn small" on:click=remove aria-label=format!("Remove {}", e.name)>"Remove"</button>
            </div>
            {body}
            {share_link.map(|l| {
                let l2 = l.clone();
                view! {
                    <div class="share">
                        <label>
                            <span>"Share link for this point"</span>
                            <input type="text" readonly prop:value=l.clone() class="share-link"/>
                        </label>
                        <CopyButton text=Signal::derive(move || l2.clone()) label="Copy link"/>
                    </div>
                }
            })}
        </li>
    }
}

#[component]
fn PointSummary(
    p: Option<SharePoint>,
    subject: Option<Subject>,
    warnings: Vec<validate::Finding>,
) -> impl IntoView {
    let Some(p) = p else {
        return view! { <p class="fine">"No point to draw."</p> }.into_any();
    };
    let subject = subject.unwrap_or_else(|| Subject::from_share_point(&p));
    let where_ = where_line(&placement(&subject));
    let basis = p.basis.clone();
    view! {
        <div class="point">
            <p class="point-line">
                <strong>{p.model.clone()}</strong>
                {format!(" · {} · {} · {} · ", p.gpu, p.arch, p.precision)}
                {p.params_b.map(size_b).unwrap_or_else(|| "size ?".into())}
                " · ΔE "
                <strong>{p.vs_fp16_pct.map(|d| pct(d, 1)).unwrap_or_else(|| "—".into())}</strong>
                " "
                <BasisTag basis=basis/>
            </p>
            <p class="fine">{where_}</p>
            {(!warnings.is_empty()).then(|| view! {
                <ul class="warnings">
                    {warnings.iter().map(|i| view! { <li>"⚠ "<code>{i.path.clone()}</code>" "{i.message.clone()}</li> }).collect_view()}
                </ul>
            })}
        </div>
    }
    .into_any()
}

/// The card's line under a point: which curve it is drawn on (or why it is drawn alone, or not
/// at all), then what `analysis::compare` concluded.
pub fn where_line(pl: &Placement) -> String {
    if !pl.drawable() {
        return match pl.outcome {
            Outcome::NoDelta | Outcome::NoSize => format!("not drawn: {}", pl.summary()),
            _ if pl.subject.delta_pct.is_none() => {
                format!(
                    "not drawn: the report has no ΔE (no FP16 figure); {}",
                    pl.summary()
                )
            }
            _ => format!(
                "not drawn: the report has no model size (params_b); {}",
                pl.summary()
            ),
        };
    }
    match (&pl.curve, &pl.outcome) {
        // Where a card has curves of several stacks, say whose curve it is.
        (Ok(class), _) => match pl.curve_engines.first() {
            Some(engine) => format!("drawn on the {class} curve of {engine}; {}", pl.summary()),
            None => format!("drawn on the {class} curve; {}", pl.summary()),
        },
        (Err(why), Outcome::NoCurve) => format!("drawn alone: {why}"),
        (Err(why), _) => format!("drawn alone: {why}; {}", pl.summary()),
    }
}
