//! Report validation off the main thread.
//!
//! The full check (JSON Schema + typed parse + semantic checks) runs in a Web Worker: a second
//! wasm module (`quantenergy-validator`, built with `report/schema`) that is fetched only when a
//! user first drops or pastes a report, so the page's first load carries no `regex`. Requests are
//! queued until the worker says it is ready. If the worker cannot start (no worker file, blocked),
//! the page validates in the main thread with `report`'s typed + semantic checks (same verdict on
//! every bad report the project tests, plainer messages for type errors) and says so.

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

/// What a validation returns (also the worker's wire format, as JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checked {
    pub errors: Vec<Finding>,
    pub warnings: Vec<Finding>,
    pub report: Option<report::Report>,
    /// `schema` when the JSON-Schema pass ran, `typed` for the main-thread fallback.
    pub engine: String,
}

impl Checked {
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty() && self.report.is_some()
    }
}

/// Run `report::validate_str` here (whatever features this module was built with).
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
    Checked {
        errors: conv(v.errors),
        warnings: conv(v.warnings),
        report: v.report,
        engine: if cfg!(feature = "schema") {
            "schema".into()
        } else {
            "typed".into()
        },
    }
}

/// A file too large to read: refused from its size alone, before any byte is read.
pub fn too_big(bytes: f64) -> Checked {
    Checked {
        errors: vec![Finding {
            path: "$".into(),
            message: format!(
                "the file is {:.1} MB; expected at most {} MiB for one report (not read)",
                bytes / 1e6,
                report::MAX_INPUT_BYTES / (1024 * 1024)
            ),
        }],
        warnings: Vec::new(),
        report: None,
        engine: "size".into(),
    }
}

type Callback = Box<dyn FnOnce(Checked)>;

#[derive(Default)]
struct Client {
    worker: Option<web_sys::Worker>,
    ready: bool,
    failed: bool,
    next_id: u32,
    queue: Vec<(u32, String)>,
    pending: HashMap<u32, (String, Callback)>,
}

thread_local! {
    static CLIENT: Rc<RefCell<Client>> = Rc::new(RefCell::new(Client::default()));
    static FORCE_MAIN_THREAD: RefCell<bool> = const { RefCell::new(false) };
}

/// Tests: validate in the main thread (no worker file is served by the test runner).
pub fn force_main_thread() {
    FORCE_MAIN_THREAD.with(|f| *f.borrow_mut() = true);
}

/// Name of the worker's loader script, next to the page (resolved against `<base href>`).
const WORKER_URL: &str = "./quantenergy-validator_loader.js";

fn fail_over(client: &Rc<RefCell<Client>>) {
    let pending: Vec<(String, Callback)> = {
        let mut c = client.borrow_mut();
        c.failed = true;
        if let Some(w) = c.worker.take() {
            w.terminate();
        }
        c.queue.clear();
        c.pending.drain().map(|(_, v)| v).collect()
    };
    for (text, cb) in pending {
        cb(check_here(&text));
    }
}

fn start(client: &Rc<RefCell<Client>>) -> Result<(), JsValue> {
    let opts = web_sys::WorkerOptions::new();
    opts.set_type(web_sys::WorkerType::Classic);
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
                    for (id, t) in queue {
                        let _ = w.post_message(&js_sys::Array::of2(&id.into(), &t.into()));
                    }
                }
                return;
            }
            // "<id>\n<json>"
            let Some((id, json)) = text.split_once('\n') else {
                return;
            };
            let Ok(id) = id.parse::<u32>() else { return };
            let entry = c2.borrow_mut().pending.remove(&id);
            if let Some((input, cb)) = entry {
                match serde_json::from_str::<Checked>(json) {
                    Ok(checked) => cb(checked),
                    Err(_) => cb(check_here(&input)),
                }
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
    // A worker that never says ready (blocked script, old browser) must not hold reports hostage.
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
        std::time::Duration::from_secs(15),
    );
    Ok(())
}

/// Validate `text`; `done` is called exactly once, later (never synchronously inside this call,
/// so callers may hold signals' write guards freely).
pub fn validate(text: String, done: impl FnOnce(Checked) + 'static) {
    let forced = FORCE_MAIN_THREAD.with(|f| *f.borrow());
    CLIENT.with(|client| {
        if forced || client.borrow().failed {
            leptos::task::spawn_local(async move { done(check_here(&text)) });
            return;
        }
        if client.borrow().worker.is_none() && start(client).is_err() {
            client.borrow_mut().failed = true;
            leptos::task::spawn_local(async move { done(check_here(&text)) });
            return;
        }
        let mut c = client.borrow_mut();
        c.next_id += 1;
        let id = c.next_id;
        c.pending.insert(id, (text.clone(), Box::new(done)));
        if c.ready {
            if let Some(w) = &c.worker {
                let _ = w.post_message(&js_sys::Array::of2(&id.into(), &text.into()));
            }
        } else {
            c.queue.push((id, text));
        }
    });
}

/// The worker side: answer `[id, text]` messages with `"<id>\n<Checked as JSON>"`.
pub fn run_worker() {
    let scope: web_sys::DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    let reply_to = scope.clone();
    let on_message =
        Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |ev: web_sys::MessageEvent| {
            let arr = js_sys::Array::from(&ev.data());
            let id = arr.get(0).as_f64().unwrap_or(0.0) as u32;
            let text = arr.get(1).as_string().unwrap_or_default();
            let checked = check_here(&text);
            let json = serde_json::to_string(&checked).unwrap_or_else(|_| "null".into());
            let _ = reply_to.post_message(&format!("{id}\n{json}").into());
        });
    scope.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    on_message.forget();
    let _ = scope.post_message(&"ready".into());
}
