//! Report validation, the estimate's energy.json and the dataset download: `report`'s guards,
//! typed parse and semantic checks, the Markdown and the overlay point.
//!
//! Where it runs: in the page as built by trunk (`--features inline,worker`), in a Web Worker that
//! is the full page module itself (`assets/worker.js` starts it; `main` sees no window and calls
//! [`run_worker`]), so a large report never blocks the page and nothing extra is downloaded.
//! Requests are queued until the worker says it is ready; if it cannot start, the same code answers
//! in this thread (`inline`). Without `worker` (component tests) everything runs in this thread.
//! A file over 8 MiB is refused from `File.size` before a byte is read. The JSON-Schema pass
//! (`schema`) stays off: it would add `regex` and put the whole app over its 700 KB budget.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use serde::{Deserialize, Serialize};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

/// One finding, as shown on the page.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub path: String,
    pub message: String,
}

/// An overlay point on the wire between the worker and the page.
pub use report::share::SharePoint as PointWire;

/// What a validation returns (also the worker's reply, as JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checked {
    pub errors: Vec<Finding>,
    pub warnings: Vec<Finding>,
    /// No errors and a typed report.
    pub valid: bool,
    /// The point the report contributes to an overlay (size, architecture, recomputed ΔE, …).
    pub point: Option<PointWire>,
    /// The same point with the report's stack engine and batch size: what
    /// `analysis::compare::place` places (an overlay link carries neither).
    #[serde(default)]
    pub subject: Option<analysis::compare::Subject>,
    /// Markdown for a submission (valid reports only).
    pub markdown: Option<String>,
    /// The report's perplexity check in one line, where it has one (valid reports only).
    #[serde(default)]
    pub quality: Option<String>,
    /// The software stack that ran it, in one line (engine, version, server, latency).
    #[serde(default)]
    pub stack: Option<String>,
    /// A measured report's windows against the validity rules (`report::validity::assess`): the
    /// verdict and a line per flag (valid measured reports only).
    #[serde(default)]
    pub validity: Option<ValidityLines>,
    /// `schema` when the JSON-Schema pass ran, `typed` for typed + semantic checks only,
    /// `size`/`read`/`none` when the text was never checked.
    pub engine: String,
}

impl Checked {
    fn refused(path: &str, message: String, engine: &str) -> Checked {
        Checked {
            errors: vec![Finding {
                path: path.into(),
                message,
            }],
            warnings: Vec::new(),
            valid: false,
            point: None,
            subject: None,
            markdown: None,
            quality: None,
            stack: None,
            validity: None,
            engine: engine.into(),
        }
    }

    /// A file too large to read: refused from its size alone, before any byte is read.
    pub fn too_big(bytes: f64) -> Checked {
        Checked::refused(
            "$",
            format!(
                "the file is {:.1} MB; expected at most {} MiB for one report (it was not read)",
                bytes / 1e6,
                report::MAX_INPUT_BYTES / (1024 * 1024)
            ),
            "size",
        )
    }

    pub fn unreadable(why: String) -> Checked {
        Checked::refused(
            "$",
            format!("the file could not be read as text ({why}); expected a UTF-8 JSON file"),
            "read",
        )
    }
}

/// A report's validity as the card shows it (`report::validity`'s own words).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValidityLines {
    /// `valid`, `flagged` or `unknown`.
    pub status: String,
    /// The verdict in one sentence.
    pub headline: String,
    /// One line per flag, and one naming the rules the report's fields cannot check.
    pub lines: Vec<String>,
}

impl ValidityLines {
    fn of(v: &report::validity::Validity) -> ValidityLines {
        ValidityLines {
            status: v.status.as_str().into(),
            headline: v.headline(),
            lines: v.lines(),
        }
    }
}

/// The estimate whose energy.json is wanted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EstimateReq {
    pub arch: report::Arch,
    pub params_b: f64,
    pub precision: report::Precision,
    pub batch: u32,
    pub context: u32,
    pub gpu: String,
    pub name: String,
}

/// `report::validate_str` in this module, with the overlay point and the Markdown.
pub fn check_here(text: &str) -> Checked {
    let v = report::validate_str(text);
    let conv = |v: Vec<report::Issue>| {
        v.into_iter()
            .map(|i| Finding {
                path: i.path,
                message: i.message,
            })
            .collect()
    };
    let valid = v.is_valid();
    // The curves are fitted to decodes: a prompt set's end-to-end ΔE is another quantity, so
    // such a report has no point (its Markdown's Workload row says what its figures are).
    let drawn = valid
        && v.report
            .as_ref()
            .is_some_and(|r| r.workload.prompt_set.is_none());
    let point = v
        .report
        .as_ref()
        .filter(|_| drawn)
        .map(report::share::from_report);
    let subject = v
        .report
        .as_ref()
        .filter(|_| drawn)
        .map(analysis::compare::Subject::from_report);

    let markdown = v.report.as_ref().filter(|_| valid).map(report::to_markdown);
    let quality = v
        .report
        .as_ref()
        .filter(|_| valid)
        .and_then(|r| r.quality.as_ref())
        .map(report::quality_line);
    let stack = v
        .report
        .as_ref()
        .filter(|_| valid)
        .and_then(report::stack_summary);
    let validity = v
        .report
        .as_ref()
        .filter(|r| valid && r.results.basis == report::Basis::Measured)
        .map(|r| ValidityLines::of(&report::validity::assess(r)));
    Checked {
        errors: conv(v.errors),
        warnings: conv(v.warnings),
        valid,
        point,
        subject,
        markdown,
        quality,
        stack,
        validity,
        engine: if cfg!(feature = "schema") {
            "schema".into()
        } else {
            "typed".into()
        },
    }
}

/// The pretty energy.json of an estimate (never labelled measured).
pub fn estimate_json_here(req: &EstimateReq) -> String {
    let e = analysis::EstimateInput {
        arch: req.arch,
        params_b: req.params_b,
        precision: req.precision,
        batch: req.batch,
        context: req.context,
        engine: None,
    }
    .estimate_embedded();
    analysis::estimate_report(&e, &req.gpu, &req.name).to_json_pretty()
}

/// One anchors row as the dataset JSON writes it.
fn row_json(a: &analysis::Anchor) -> serde_json::Value {
    let mut o = serde_json::to_value(a).unwrap_or_default();
    if let Some(m) = o.as_object_mut() {
        // The CSV's spelling, variant included (`GGUF-Q4_0-mlperf-client-file`).
        m.insert("precision".into(), a.precision_label().into());
        m.remove("precision_variant");
        m.insert(
            "delta_pct_recomputed".into(),
            serde_json::json!(a.delta_pct().map(|d| (d * 100.0).round() / 100.0)),
        );
    }
    o
}

/// The embedded dataset as JSON: every row with its recomputed ΔE, the fitted classes, the cards.
pub fn dataset_json_here() -> String {
    let ds = analysis::Dataset::embedded();
    let mut anchors: Vec<serde_json::Value> = Vec::new();
    // The context runs' rows too (their `context_depth` says which they are); two plain loops,
    // as an iterator chain cost 3 KB of the page's wasm.
    for a in &ds.anchors {
        anchors.push(row_json(a));
    }
    for a in &ds.context {
        anchors.push(row_json(a));
    }
    let v = serde_json::json!({
        "description": "quantenergy embedded dataset: published measured configurations (anchors) and the fitted crossover classes. delta_pct_recomputed is (energy − fp16)/fp16 × 100 from each row's own two energies.",
        "anchors": anchors,
        "classes": analysis::default_classes(),
        "gpus": ds.gpus,
    });
    serde_json::to_string_pretty(&v).unwrap_or_default()
}

/// Serve one request: `v` validates report text, `e` writes an estimate's energy.json, `d` the
/// dataset as JSON.
pub fn handle(kind: &str, payload: &str) -> String {
    match kind {
        "v" => serde_json::to_string(&check_here(payload)).unwrap_or_default(),
        "e" => match serde_json::from_str::<EstimateReq>(payload) {
            Ok(req) => estimate_json_here(&req),
            Err(e) => format!("{{\"error\": \"bad estimate request: {e}\"}}"),
        },
        "d" => dataset_json_here(),
        _ => String::new(),
    }
}

type Callback = Box<dyn FnOnce(Option<String>)>;

#[derive(Default)]
struct Client {
    worker: Option<web_sys::Worker>,
    ready: bool,
    failed: bool,
    next_id: u32,
    queue: Vec<(u32, &'static str, String)>,
    pending: HashMap<u32, (&'static str, String, Callback)>,
}

thread_local! {
    static CLIENT: Rc<RefCell<Client>> = Rc::new(RefCell::new(Client::default()));
    static FORCE_MAIN_THREAD: RefCell<bool> = const { RefCell::new(false) };
}

/// Tests: answer in this thread (the test runner serves no worker file). Needs `inline`.
pub fn force_main_thread() {
    FORCE_MAIN_THREAD.with(|f| *f.borrow_mut() = true);
}

/// The worker's script, next to the page (resolved against `<base href>`): a module worker that
/// starts this same wasm module, which then runs [`run_worker`].
const WORKER_URL: &str = "./worker.js";

/// Answer without a worker: the same code in this thread with `inline`, else `None`.
fn answer_here(kind: &'static str, payload: String, cb: Callback) {
    leptos::task::spawn_local(async move {
        #[cfg(feature = "inline")]
        cb(Some(handle(kind, &payload)));
        #[cfg(not(feature = "inline"))]
        {
            let _ = (kind, payload);
            cb(None);
        }
    });
}

fn fail_over(client: &Rc<RefCell<Client>>) {
    let pending: Vec<(&'static str, String, Callback)> = {
        let mut c = client.borrow_mut();
        c.failed = true;
        if let Some(w) = c.worker.take() {
            w.terminate();
        }
        c.queue.clear();
        c.pending.drain().map(|(_, v)| v).collect()
    };
    for (kind, payload, cb) in pending {
        answer_here(kind, payload, cb);
    }
}

fn post(w: &web_sys::Worker, id: u32, kind: &str, payload: &str) {
    let msg = js_sys::Array::of3(&id.into(), &kind.into(), &payload.into());
    let _ = w.post_message(&msg);
}

fn start(client: &Rc<RefCell<Client>>) -> Result<(), JsValue> {
    let opts = web_sys::WorkerOptions::new();
    opts.set_type(web_sys::WorkerType::Module);
    let worker = web_sys::Worker::new_with_options(WORKER_URL, &opts)?;
    let c2 = client.clone();
    let on_message =
        Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |ev: web_sys::MessageEvent| {
            let Some(text) = ev.data().as_string() else {
                return;
            };
            if text == "ready" {
                let (worker, queue) = {
                    let mut c = c2.borrow_mut();
                    c.ready = true;
                    (c.worker.clone(), std::mem::take(&mut c.queue))
                };
                if let Some(w) = worker {
                    // The worker has no index.html to read the data from: it comes first.
                    post(&w, 0, "a", analysis::dataset::anchors_csv());
                    for (id, kind, t) in queue {
                        post(&w, id, kind, &t);
                    }
                }
                return;
            }
            let Some((id, reply)) = text.split_once('\n') else {
                return;
            };
            let Ok(id) = id.parse::<u32>() else { return };
            let entry = c2.borrow_mut().pending.remove(&id);
            if let Some((_, _, cb)) = entry {
                cb(Some(reply.to_string()));
            }
        });
    worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    on_message.forget();
    let c3 = client.clone();
    let on_error = Closure::<dyn FnMut(web_sys::Event)>::new(move |ev: web_sys::Event| {
        ev.prevent_default();
        fail_over(&c3);
    });
    worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
    on_error.forget();
    client.borrow_mut().worker = Some(worker);
    // A worker that never says ready (blocked script, old browser) must not hold requests hostage.
    let c4 = client.clone();
    leptos::prelude::set_timeout(
        move || {
            let stuck = {
                let c = c4.borrow();
                !c.ready && !c.failed
            };
            if stuck {
                fail_over(&c4);
            }
        },
        std::time::Duration::from_secs(20),
    );
    Ok(())
}

/// Send one request; `done` is called exactly once, later (never inside this call).
fn request(kind: &'static str, payload: String, done: Callback) {
    // Without the `worker` feature (the page as built by trunk: the full module is itself fetched
    // only when a tab needs it) everything is answered in this thread.
    let forced = FORCE_MAIN_THREAD.with(|f| *f.borrow()) || !cfg!(feature = "worker");
    CLIENT.with(|client| {
        if forced || client.borrow().failed {
            answer_here(kind, payload, done);
            return;
        }
        if client.borrow().worker.is_none() && start(client).is_err() {
            client.borrow_mut().failed = true;
            answer_here(kind, payload, done);
            return;
        }
        let mut c = client.borrow_mut();
        c.next_id += 1;
        let id = c.next_id;
        if c.ready {
            if let Some(w) = &c.worker {
                post(w, id, kind, &payload);
            }
        } else {
            c.queue.push((id, kind, payload.clone()));
        }
        c.pending.insert(id, (kind, payload, done));
    });
}

/// Validate report text.
pub fn validate(text: String, done: impl FnOnce(Checked) + 'static) {
    request(
        "v",
        text,
        Box::new(move |reply| {
            let checked = reply
                .and_then(|r| serde_json::from_str::<Checked>(&r).ok())
                .unwrap_or_else(|| {
                    Checked::refused(
                        "$",
                        "the report checker could not start in this browser (Web Workers blocked?); nothing was checked".into(),
                        "none",
                    )
                });
            done(checked)
        }),
    );
}

/// The energy.json of an estimate.
pub fn estimate_json(req: &EstimateReq, done: impl FnOnce(String) + 'static) {
    let payload = serde_json::to_string(req).unwrap_or_default();
    request(
        "e",
        payload,
        Box::new(move |reply| {
            done(
                reply.unwrap_or_else(|| {
                    "// the report writer could not start in this browser".into()
                }),
            )
        }),
    );
}

/// The dataset as JSON (for the download button).
pub fn dataset_json(done: impl FnOnce(String) + 'static) {
    request(
        "d",
        String::new(),
        Box::new(move |reply| done(reply.unwrap_or_default())),
    );
}

/// The page's `data/anchors.csv`, sent to the worker before any request (`page-anchors`).
#[cfg(feature = "page-anchors")]
fn provide_data(text: String) {
    analysis::dataset::provide_anchors_csv(text);
}

/// This build embeds the file: the page's copy is the same bytes.
#[cfg(not(feature = "page-anchors"))]
fn provide_data(_: String) {}

/// The worker side: answer `[id, kind, payload]` with `"<id>\n<reply>"`; `[0, "a", csv]`, the
/// page's first message, is the data.
pub fn run_worker() {
    let scope: web_sys::DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    let reply_to = scope.clone();
    let on_message =
        Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |ev: web_sys::MessageEvent| {
            let arr = js_sys::Array::from(&ev.data());
            let id = arr.get(0).as_f64().unwrap_or(0.0) as u32;
            let kind = arr.get(1).as_string().unwrap_or_default();
            let payload = arr.get(2).as_string().unwrap_or_default();
            if kind == "a" {
                provide_data(payload);
                return;
            }
            let reply = handle(&kind, &payload);
            let _ = reply_to.post_message(&format!("{id}\n{reply}").into());
        });
    scope.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    on_message.forget();
    let _ = scope.post_message(&"ready".into());
}
