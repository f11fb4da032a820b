//! URL state: the tab and its inputs live in the query string, so every view has a permalink.
//!
//! `?tab=tested&gpu=RTX%204090&model=Qwen2-7B`, `?tab=model&n=7&gpu=RTX%204090&p=NF4&b=1&ctx=2048`,
//! `?tab=run&overlay=<b64url>&overlay=<b64url>&fit=1` (upstream container links carry one overlay),
//! `?tab=optimize&gpu=H200&model=Qwen2-1.5B&objective=min-energy&max_ms=40&ctx=2048`, `?tab=data`. Unknown or malformed values fall back to defaults and are reported, never fatal.

use web_sys::UrlSearchParams;

/// The tabs, in display order. To add a tab: a variant here, its slug/label, a module in `tabs/`
/// and one arm in `lib.rs::TabBody`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tab {
    Tested,
    Model,
    Optimize,
    Run,
    Data,
}

impl Tab {
    pub const ALL: [Tab; 5] = [Tab::Tested, Tab::Model, Tab::Optimize, Tab::Run, Tab::Data];

    pub fn slug(self) -> &'static str {
        match self {
            Tab::Tested => "tested",
            Tab::Model => "model",
            Tab::Optimize => "optimize",
            Tab::Run => "run",
            Tab::Data => "data",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Tab::Tested => "Tested models",
            Tab::Model => "Your model",
            Tab::Optimize => "Optimize",
            Tab::Run => "Run it yourself",
            Tab::Data => "Data & method",
        }
    }

    /// Upstream slugs are accepted too (`yours`, `model`, `container`).
    pub fn from_slug(s: &str) -> Option<Tab> {
        match s.trim().to_ascii_lowercase().as_str() {
            "tested" | "tested-models" | "home" | "" => Some(Tab::Tested),
            "model" | "yours" | "your-model" | "estimate" => Some(Tab::Model),
            "optimize" | "optimizer" | "optimise" | "constraints" => Some(Tab::Optimize),
            "run" | "container" | "run-it-yourself" => Some(Tab::Run),
            "data" | "method" | "methodology" => Some(Tab::Data),
            _ => None,
        }
    }
}

/// `application/x-www-form-urlencoded`, as the browser's `URLSearchParams` writes it, without a
/// browser: the build-time pre-render and the links both modules write.
pub fn form_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'*' | b'-' | b'.' | b'_' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The query string as ordered key/value pairs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Query(pub Vec<(String, String)>);

impl Query {
    pub fn parse(search: &str) -> Query {
        let Ok(p) = UrlSearchParams::new_with_str(search) else {
            return Query::default();
        };
        let mut out = Vec::new();
        let it = js_sys::try_iter(&p).ok().flatten();
        if let Some(it) = it {
            for entry in it.flatten() {
                let arr = js_sys::Array::from(&entry);
                let k = arr.get(0).as_string().unwrap_or_default();
                let v = arr.get(1).as_string().unwrap_or_default();
                out.push((k, v));
            }
        }
        Query(out)
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn get_all(&self, key: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    pub fn push(&mut self, key: &str, value: impl Into<String>) {
        self.0.push((key.to_string(), value.into()));
    }

    /// `?a=1&b=2` (percent-encoded by the browser's own `URLSearchParams`).
    pub fn to_search(&self) -> String {
        let Ok(p) = UrlSearchParams::new() else {
            return String::new();
        };
        for (k, v) in &self.0 {
            p.append(k, v);
        }
        let s: String = p.to_string().into();
        if s.is_empty() {
            s
        } else {
            format!("?{s}")
        }
    }
}

/// A number from the query, within bounds; `None` when absent or unusable.
pub fn parse_f64(v: Option<&str>, lo: f64, hi: f64) -> Option<f64> {
    v?.trim()
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x >= lo && *x <= hi)
}

pub fn parse_u32(v: Option<&str>, lo: u32, hi: u32) -> Option<u32> {
    v?.trim()
        .parse::<u32>()
        .ok()
        .filter(|x| *x >= lo && *x <= hi)
}

/// Replace the address bar's query without a navigation.
pub fn replace_query(q: &Query) {
    let w = crate::util::window();
    let loc = w.location();
    let path = loc.pathname().unwrap_or_else(|_| "/".into());
    let url = format!("{path}{}", q.to_search());
    let current = format!("{path}{}", loc.search().unwrap_or_default());
    if url != current {
        if let Ok(h) = w.history() {
            let _ = h.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&url));
        }
    }
}

pub fn current_query() -> Query {
    Query::parse(
        &crate::util::window()
            .location()
            .search()
            .unwrap_or_default(),
    )
}
