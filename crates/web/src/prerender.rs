//! The landing view rendered at build time, so a visitor reads the verdicts and sees the first
//! chart before the wasm arrives (and without JavaScript at all).
//!
//! The same components as the page ([`crate::Page`] with the state of a link without a query)
//! are rendered to HTML by Leptos on the host; [`crate::chart::Chart`] renders its chart to SVG
//! through the same drawing code as the canvas. Nothing is copied by hand, so the pre-render
//! cannot disagree with the page built from the same `data/` (the e2e suite checks it does not).
//!
//! [`inject`] puts the markup into the staged `index.html` (trunk's post_build hook runs
//! `src/bin/prerender.rs`). In the browser, `assets/boot.js` and the page take over:
//! `assets/gate.js` hides the pre-render before the first paint when the link asks for another
//! view, and the page removes it when its own first chart is painted (same layout: no shift).

use crate::url::{form_encode, Query};
use crate::{AppState, Page};
use leptos::prelude::*;
use leptos::tachys::view::RenderHtml;

/// Where the markup goes: an empty element in `index.html`.
pub const SLOT: &str = r#"<div id="prerender"></div>"#;
/// Where the default view's query string goes (read by `assets/gate.js`).
pub const QUERY_SLOT: &str = r#"<meta name="qe-default-view" content="">"#;
/// Where the context cards' `<template>`s go ([`crate::context_card`]).
pub const CONTEXT_SLOT: &str = r#"<template id="qe-context"></template>"#;
/// Where `data/anchors.csv` goes, as text both page modules read ([`crate::DATA_BLOCK_ID`]).
pub const DATA_SLOT: &str = r#"<script type="text/plain" id="qe-anchors"></script>"#;
/// `data/anchors.csv`, for the pre-render itself and the page's data block.
pub const ANCHORS_FILE: &str = include_str!("../../../data/anchors.csv");

/// The pre-render reads the same file as the page (its `landing` features embed none).
fn provide_data() {
    #[cfg(feature = "page-anchors")]
    analysis::dataset::provide_anchors_csv(ANCHORS_FILE.to_string());
}

/// The state of a visitor who opens the bare URL.
fn default_state() -> AppState {
    AppState::from_query(&Query::default())
}

/// Runs `f` in a fresh reactive owner, outside any tracking: a render reads each signal once, so
/// Leptos's debug warning about untracked reads does not apply.
fn render<T>(f: impl FnOnce() -> T) -> T {
    provide_data();
    let _zone = leptos::reactive::diagnostics::SpecialNonReactiveZone::enter();
    Owner::new().with(f)
}

/// The landing view as HTML.
pub fn landing_markup() -> String {
    render(|| {
        let state = default_state();
        let tick = RwSignal::new(0u32);
        view! { <Page state=state tick=tick/> }.to_html()
    })
}

/// The query string the page writes into the address bar for the default view (the page keeps
/// the address bar in step with the view, so a reload of the landing arrives with it).
pub fn default_query() -> String {
    render(|| {
        let q = default_state().to_query();
        let pairs: Vec<String> =
            q.0.iter()
                .map(|(k, v)| format!("{}={}", form_encode(k), form_encode(v)))
                .collect();
        format!("?{}", pairs.join("&"))
    })
}

/// Why a page could not take the pre-render.
#[derive(Debug, PartialEq)]
pub enum InjectError {
    /// A slot is missing or appears more than once.
    Slot { slot: &'static str, found: usize },
}

impl std::fmt::Display for InjectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InjectError::Slot { slot, found } => write!(
                f,
                "index.html must contain `{slot}` exactly once (found {found} times)"
            ),
        }
    }
}

impl std::error::Error for InjectError {}

fn fill(page: &str, slot: &'static str, with: &str) -> Result<String, InjectError> {
    let found = page.matches(slot).count();
    if found != 1 {
        return Err(InjectError::Slot { slot, found });
    }
    Ok(page.replacen(slot, with, 1))
}

/// `page` without what only its source needs: HTML comments, and the `data-trunk` link trunk leaves
/// behind when it injects no scripts (≈ 430 B gz of the 700 KB whole-app budget).
fn strip_build_notes(page: &str) -> String {
    let mut out = String::with_capacity(page.len());
    let mut rest = page;
    while let Some(i) = rest.find("<!--") {
        out.push_str(&rest[..i]);
        match rest[i..].find("-->") {
            Some(j) => rest = &rest[i + j + 3..],
            None => {
                rest = &rest[i..];
                break;
            }
        }
    }
    out.push_str(rest);
    out.lines()
        .filter(|l| !l.trim_start().starts_with("<link data-trunk "))
        .filter(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect::<Vec<_>>()
        .join("\n")
}

/// `index_html` with the landing markup in [`SLOT`], the default query in [`QUERY_SLOT`], the
/// context cards in [`CONTEXT_SLOT`] and `data/anchors.csv` in [`DATA_SLOT`].
pub fn inject(index_html: &str, markup: &str, query: &str) -> Result<String, InjectError> {
    let index_html = &strip_build_notes(index_html);
    // Leptos marks text-node boundaries with `<!>` for hydration; this page is not hydrated.
    let markup = &markup.replace("<!>", "");
    let note = r#"<noscript><p class="nojs-note">This is a snapshot of the default view, built with the data it shows. Picking a card or model, the estimate for your model, the optimizer and the report checker need JavaScript.</p></noscript>"#;
    let page = fill(
        index_html,
        SLOT,
        &format!(r#"<div id="prerender">{note}{markup}</div>"#),
    )?;
    let page = fill(
        &page,
        QUERY_SLOT,
        &format!(
            r#"<meta name="qe-default-view" content="{}">"#,
            crate::chart::surface::esc(query)
        ),
    )?;
    let page = fill(
        &page,
        CONTEXT_SLOT,
        &crate::context_card::templates(ANCHORS_FILE),
    )?;
    // Raw text inside <script>: only a closing tag could end it early.
    if ANCHORS_FILE.to_ascii_lowercase().contains("</script") {
        return Err(InjectError::Slot {
            slot: DATA_SLOT,
            found: 0,
        });
    }
    fill(
        &page,
        DATA_SLOT,
        &format!(r#"<script type="text/plain" id="qe-anchors">{ANCHORS_FILE}</script>"#),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_landing_has_the_hero_the_verdicts_and_a_chart() {
        let html = landing_markup();
        assert!(html.contains("Does quantizing your model save energy on your GPU?"));
        assert!(html.contains(r#"class="crossovers""#));
        assert!(
            html.contains(r#"class="verdict"#),
            "no verdict in the pre-render"
        );
        // The chart is SVG, wide and narrow, with axis titles and the zero-line labels.
        assert_eq!(
            html.matches("<svg").count(),
            2,
            "one wide and one narrow chart"
        );
        assert!(html.contains("chart-svg wide") && html.contains("chart-svg narrow"));
        assert!(html.contains("saves energy vs FP16"));
        assert!(html.contains("<path"), "no data drawn");
        // Pickers show the default card and model without script.
        assert!(html.contains(r#"selected"#));
        assert!(!html.contains("<canvas"), "a canvas cannot be pre-rendered");
    }

    #[test]
    fn the_default_query_names_the_tab_card_and_model() {
        let q = default_query();
        assert!(q.starts_with("?tab=tested&gpu="), "{q}");
        assert!(q.contains("&model="), "{q}");
        assert!(!q.contains(' '), "{q}");
    }

    #[test]
    fn form_encoding_matches_url_search_params() {
        assert_eq!(form_encode("RTX 4090"), "RTX+4090");
        assert_eq!(form_encode("Qwen2.5-7B/Q4_K·x"), "Qwen2.5-7B%2FQ4_K%C2%B7x");
    }

    #[test]
    fn injection_needs_each_slot_exactly_once() {
        let page = format!("<head>{QUERY_SLOT}</head><body>{SLOT}{CONTEXT_SLOT}{DATA_SLOT}</body>");
        let out = inject(&page, "<p>hi</p>", "?a=1&b=2").unwrap();
        assert!(out.contains(r#"<div id="prerender"><noscript>"#));
        // The embedded H200 context runs, as the card's template.
        assert!(out.contains(r#"<template id="qe-context-H200"><h2"#));
        // And the one model measured there along the context, alone (the Tested tab's card); the
        // ids are the page's: the card's name and the model as the Tested tab's picker names it.
        let one = r#"<template id="qe-context-H200-Qwen2-1-5B"><h2 class="card-title">Qwen2-1.5B on the H200"#;
        assert!(out.contains(one));
        assert_eq!(
            crate::context_card::template_id("H200", Some("Qwen2-1.5B")),
            "qe-context-H200-Qwen2-1-5B"
        );
        assert!(!out.contains(CONTEXT_SLOT));
        // The data block: the anchors file, once, as raw text.
        assert!(out.contains(&format!(r#"id="qe-anchors">{ANCHORS_FILE}</script>"#)));
        assert!(out.contains("<p>hi</p></div>"));
        assert!(out.contains(r#"content="?a=1&amp;b=2""#));
        assert_eq!(
            inject("<body></body>", "", ""),
            Err(InjectError::Slot {
                slot: SLOT,
                found: 0
            })
        );
        let noted = format!(
            "<!-- a note\n over lines -->\n  <link data-trunk rel=\"rust\" href=\"x\">\n{page}"
        );
        let out = inject(&noted, "<p>a<!>b</p>", "").unwrap();
        assert!(
            !out.contains("<!--") && !out.contains("data-trunk") && !out.contains("<!>"),
            "{out}"
        );
        assert!(out.contains("<p>ab</p>"));
        let twice = format!("{page}{SLOT}");
        assert!(matches!(
            inject(&twice, "", ""),
            Err(InjectError::Slot { found: 2, .. })
        ));
    }
}
