//! Component tests in headless Chromium (wasm-bindgen-test): mount the app at a URL, change an
//! input, read the DOM. `leptos::task::tick().await` lets effects run before reading.

#![cfg(target_arch = "wasm32")]

use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_test::wasm_bindgen_test as test;
use wasm_bindgen_test::wasm_bindgen_test_configure;

wasm_bindgen_test_configure!(run_in_browser);

const ILLUSTRATIVE: &str =
    include_str!("../../../data/examples/upstream-measured-illustrative.json");
const NO_GPU: &str = include_str!("../../../data/examples/upstream-no-gpu.json");

fn doc() -> web_sys::Document {
    web_sys::window().unwrap().document().unwrap()
}

struct Mounted {
    root: web_sys::HtmlElement,
    _handle: leptos::mount::UnmountHandle<leptos::tachys::view::any_view::AnyViewState>,
}

impl Drop for Mounted {
    fn drop(&mut self) {
        self.root.remove();
    }
}

/// Mount the app with `search` as the page's query string.
fn mount(search: &str) -> Mounted {
    web::validate::force_main_thread();
    let w = web_sys::window().unwrap();
    let path = w.location().pathname().unwrap();
    w.history()
        .unwrap()
        .replace_state_with_url(
            &wasm_bindgen::JsValue::NULL,
            "",
            Some(&format!("{path}{search}")),
        )
        .unwrap();
    let root: web_sys::HtmlElement = doc().create_element("div").unwrap().unchecked_into();
    root.style().set_property("width", "900px").unwrap();
    doc().body().unwrap().append_child(&root).unwrap();
    let handle = leptos::mount::mount_to(root.clone(), || web::App().into_any());
    Mounted {
        root,
        _handle: handle,
    }
}

async fn sleep(ms: i32) {
    let p = js_sys::Promise::new(&mut |resolve, _| {
        web_sys::window()
            .unwrap()
            .set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms)
            .unwrap();
    });
    wasm_bindgen_futures::JsFuture::from(p).await.unwrap();
}

/// Let effects and spawned tasks run.
async fn settle() {
    for _ in 0..3 {
        leptos::task::tick().await;
        sleep(10).await;
    }
}

fn q(root: &web_sys::HtmlElement, sel: &str) -> web_sys::Element {
    root.query_selector(sel)
        .unwrap()
        .unwrap_or_else(|| panic!("no element matches {sel}"))
}

fn text(root: &web_sys::HtmlElement) -> String {
    root.text_content().unwrap_or_default()
}

fn set_and_fire(el: &web_sys::Element, value: &str, event: &str) {
    if let Some(s) = el.dyn_ref::<web_sys::HtmlSelectElement>() {
        s.set_value(value);
    } else if let Some(i) = el.dyn_ref::<web_sys::HtmlInputElement>() {
        i.set_value(value);
    } else if let Some(t) = el.dyn_ref::<web_sys::HtmlTextAreaElement>() {
        t.set_value(value);
    }
    el.dispatch_event(&web_sys::Event::new(event).unwrap())
        .unwrap();
}

#[test]
async fn tested_tab_shows_bars_verdicts_and_follows_the_model_picker() {
    let m = mount("?tab=tested&gpu=RTX%204090&model=Qwen2-7B");
    settle().await;
    let t = text(&m.root);
    assert!(t.contains("Energy per 1 million generated tokens"), "{t}");
    // July 2026: NF4 3911.8 vs FP16 5467.9 mJ/token → −28.5 %.
    assert!(t.contains("NF4 saves 28 % here"), "{t}");
    assert!(t.contains("n = 1"));
    set_and_fire(&q(&m.root, "#model-select"), "Qwen2-0.5B", "change");
    settle().await;
    let t = text(&m.root);
    assert!(t.contains("NF4 costs 36 % more here"), "{t}");
    assert!(web_sys::window()
        .unwrap()
        .location()
        .search()
        .unwrap()
        .contains("model=Qwen2-0.5B"));
    let canvas = q(&m.root, "#crossover-canvas");
    assert_eq!(canvas.get_attribute("data-painted").as_deref(), Some("1"));
}

#[test]
async fn tested_tab_claims_no_direction_inside_the_run_to_run_spread() {
    // H200 Qwen2-1.5B, eager candle: BF16 −3.6 % (n = 3), whose runs' own ΔE spread (paired
    // interval −38 % to +31 %) holds zero; Q4_K −21.3 % (n = 4) is well outside its own. The
    // graph engine's BF16, −2.6 % in a ±2 point interval, is a saving.
    let m = mount("?tab=tested&gpu=H200&model=Qwen2-1.5B");
    settle().await;
    let t = text(&m.root);
    assert!(
        t.contains("BF16: −3.6 % here, within the spread of its runs' own ΔE"),
        "{t}"
    );
    assert!(t.contains("Q4_K saves 21 % here"), "{t}");
    assert!(t.contains("BF16 saves 3 % here"), "{t}");
    assert!(
        t.contains("pts"),
        "the ± half-width is printed under the Δ: {t}"
    );
}

#[test]
async fn optimize_tab_says_when_the_winner_is_not_resolved() {
    // H200 Qwen2-7B on the eager candle stack (pinned: `stack=`), min energy: BF16 leads by the
    // −4.2 % measured at this size, whose run-to-run interval spans zero.
    let m =
        mount("?tab=optimize&gpu=H200&model=Qwen2-7B&objective=min-energy&ctx=512&stack=candle");
    settle().await;
    let tie = q(&m.root, "#opt-tie").text_content().unwrap();
    assert!(
        tie.contains("Not a clear winner") && tie.contains("BF16 leads FP16"),
        "{tie}"
    );
    // RTX 4090 at 14 B: NF4's lead is clear, no such line.
    let m = mount("?tab=optimize&gpu=RTX%204090&params=14&objective=min-energy&ctx=512");
    settle().await;
    assert!(
        m.root.query_selector("#opt-tie").unwrap().is_none(),
        "{}",
        text(&m.root)
    );
}

#[test]
async fn model_tab_estimates_and_reacts_to_size() {
    let m = mount("?tab=model&n=7&gpu=RTX%204090&p=NF4&b=1&ctx=2048");
    settle().await;
    let verdict = q(&m.root, "#model-verdict").text_content().unwrap();
    assert!(verdict.contains("saves"), "{verdict}");
    let t = text(&m.root);
    assert!(
        t.contains("interpolated") || t.contains("extrapolated"),
        "{t}"
    );
    assert!(t.contains("Leave-one-out MAE"));
    set_and_fire(&q(&m.root, "#params-input"), "0.5", "change");
    settle().await;
    let verdict = q(&m.root, "#model-verdict").text_content().unwrap();
    assert!(verdict.contains("costs"), "{verdict}");
    // The report JSON is schema-valid and never says measured.
    let details = q(&m.root, "#report-details").unchecked_into::<web_sys::HtmlDetailsElement>();
    details.set_open(true);
    details
        .dispatch_event(&web_sys::Event::new("toggle").unwrap())
        .unwrap();
    settle().await;
    let json = q(&m.root, "#report-json").text_content().unwrap();
    let v = report::validate_str(&json);
    assert!(v.errors.is_empty(), "{:?}", v.errors);
    assert_ne!(v.report.unwrap().results.basis, report::Basis::Measured);
}

#[test]
async fn run_tab_stacks_pasted_reports_and_lists_their_basis() {
    let m = mount("?tab=run");
    settle().await;
    for text in [ILLUSTRATIVE, NO_GPU] {
        set_and_fire(&q(&m.root, "#paste-box"), text, "input");
        settle().await;
        q(&m.root, "#paste-check")
            .unchecked_into::<web_sys::HtmlElement>()
            .click();
        settle().await;
    }
    settle().await;
    let entries = m.root.query_selector_all("#entries > li").unwrap();
    assert_eq!(entries.length(), 2);
    let t = text(&m.root);
    assert!(t.contains("measured") && t.contains("interpolated"), "{t}");
    assert!(t.contains("drawn on the blackwell NF4 curve"), "{t}");
    // The illustrative report's stated 11.3 % disagrees with its energies: warned next to it.
    assert!(t.contains("⚠"), "{t}");
    let canvas = q(&m.root, "#overlay-canvas");
    // 4 blackwell anchors + 2 points.
    assert_eq!(canvas.get_attribute("data-marks").as_deref(), Some("6"));
    // Include in the fit: the illustrative report is the one measured point.
    set_and_fire(&q(&m.root, "#include-fit"), "", "change");
    let cb = q(&m.root, "#include-fit").unchecked_into::<web_sys::HtmlInputElement>();
    cb.set_checked(true);
    cb.dispatch_event(&web_sys::Event::new("change").unwrap())
        .unwrap();
    settle().await;
    assert!(
        text(&m.root).contains("How the crossover moves"),
        "{}",
        text(&m.root)
    );
    q(&m.root, "#clear-all")
        .unchecked_into::<web_sys::HtmlElement>()
        .click();
    settle().await;
    assert_eq!(
        m.root.query_selector_all("#entries > li").unwrap().length(),
        0
    );
}

#[test]
async fn run_tab_places_reports_with_the_function_quantenergy_compare_runs() {
    // An eager-candle H200 report sits on the hopper Q4_K curve of its engine, the graph engine's
    // report of the same shape on the graph engine's (engines are never pooled), and the same
    // report named as another engine's (none has a hopper curve) is drawn alone. The card shows
    // the line `analysis::compare` writes, the one `quantenergy compare` prints for the same file.
    const EAGER: &str =
        include_str!("../../../data/measurements/h200/raw/qwen2-7b_b1_r1_Q4_K.json");
    const GRAPH: &str = include_str!(
        "../../../data/measurements/h200/engine/sitting-2026-11-30/qwen2-7b_graph_Q4_K.json"
    );
    let other = GRAPH.replace("\"engine\": \"candle-graph\"", "\"engine\": \"vllm\"");
    assert_ne!(other, GRAPH);
    let m = mount("?tab=run");
    settle().await;
    for text in [EAGER, GRAPH, other.as_str()] {
        set_and_fire(&q(&m.root, "#paste-box"), text, "input");
        settle().await;
        q(&m.root, "#paste-check")
            .unchecked_into::<web_sys::HtmlElement>()
            .click();
        settle().await;
    }
    settle().await;
    let t = text(&m.root);
    for (text, engine) in [(EAGER, "candle"), (GRAPH, "candle-graph")] {
        let r = report::validate_str(text).report.unwrap();
        let pl = analysis::compare::place_report(&r, analysis::default_classes());
        assert_eq!(pl.curve_engines, [engine]);
        let line = format!(
            "drawn on the hopper Q4_K curve of {engine}; {}",
            pl.summary()
        );
        assert!(t.contains(&line), "{line:?} not in {t}");
    }
    assert!(
        t.contains("drawn alone: no hopper Q4_K curve for stack vllm"),
        "{t}"
    );
}

#[test]
async fn a_report_with_a_perplexity_check_shows_it_on_its_card() {
    // The upstream illustrative report carries a quality block (schema 1.1): 11.43 vs 11.29.
    let m = mount("?tab=run");
    settle().await;
    set_and_fire(&q(&m.root, "#paste-box"), ILLUSTRATIVE, "input");
    q(&m.root, "#paste-check")
        .unchecked_into::<web_sys::HtmlElement>()
        .click();
    settle().await;
    let line = q(&m.root, "#entries .quality").text_content().unwrap();
    assert!(
        line.contains("perplexity 11.43 vs FP16 11.29 (+1.21 %)")
            && line.contains("corpus eval_text.txt"),
        "{line}"
    );
    // A report without one shows no such line.
    q(&m.root, "#clear-all")
        .unchecked_into::<web_sys::HtmlElement>()
        .click();
    set_and_fire(&q(&m.root, "#paste-box"), NO_GPU, "input");
    q(&m.root, "#paste-check")
        .unchecked_into::<web_sys::HtmlElement>()
        .click();
    settle().await;
    assert_eq!(
        m.root.query_selector_all("#entries > li").unwrap().length(),
        1
    );
    assert!(m
        .root
        .query_selector("#entries .quality")
        .unwrap()
        .is_none());
}

#[test]
async fn malformed_report_names_the_field() {
    let m = mount("?tab=run");
    settle().await;
    let bad = NO_GPU.replace("\"basis\": \"interpolated\"", "\"basis\": \"guessed\"");
    set_and_fire(&q(&m.root, "#paste-box"), &bad, "input");
    q(&m.root, "#paste-check")
        .unchecked_into::<web_sys::HtmlElement>()
        .click();
    settle().await;
    let t = text(&m.root);
    assert!(t.contains("$.results.basis"), "{t}");
    assert!(t.contains("not drawn"), "{t}");
}

#[test]
async fn overlay_links_draw_and_hostile_text_stays_text() {
    let p = report::share::SharePoint {
        model: "<img src=x onerror=alert(1)><script>alert(2)</script>".into(),
        params_b: Some(1.1),
        arch: "ada".into(),
        precision: "NF4".into(),
        vs_fp16_pct: Some(12.5),
        basis: "measured".into(),
        gpu: "RTX 4090".into(),
        source: None,
    };
    let payload = report::share::encode(&p);
    let m = mount(&format!("?tab=run&overlay={payload}"));
    settle().await;
    let t = text(&m.root);
    assert!(t.contains("<img src=x onerror=alert(1)>"), "{t}");
    assert!(m.root.query_selector("img").unwrap().is_none());
    assert!(m.root.query_selector("script").unwrap().is_none());
    assert!(t.contains("drawn on the ada NF4 curve"), "{t}");
    // A malformed payload shows a message, not a blank page.
    drop(m);
    let m = mount("?tab=run&overlay=%%%not-base64");
    settle().await;
    let t = text(&m.root);
    assert!(t.contains("cannot be read"), "{t}");
    assert!(t.contains("Run it yourself"));
}

#[test]
async fn unknown_tab_falls_back_with_a_notice() {
    let m = mount("?tab=nonsense");
    settle().await;
    let t = text(&m.root);
    assert!(t.contains("does not have"), "{t}");
    assert!(t.contains("Energy per 1 million generated tokens"));
}

#[test]
async fn data_tab_offers_downloads_and_method() {
    let m = mount("?tab=data");
    settle().await;
    let t = text(&m.root);
    assert!(
        t.contains("Download CSV") && t.contains("How we measure"),
        "{t}"
    );
    assert!(t.contains("GPU package"));
    let rows = m
        .root
        .query_selector_all("#classes-table tbody tr")
        .unwrap();
    assert_eq!(rows.length() as usize, analysis::default_classes().len());
    // The hopper classes say they come from another stack.
    let table = q(&m.root, "#classes-table").text_content().unwrap();
    assert!(table.contains("hopper Q4_K"), "{table}");
    assert!(table.contains("different stack: candle GGUF"), "{table}");
}

#[test]
fn number_formats() {
    use web::util::{pct, per_million, size_b};
    assert_eq!(pct(11.66, 1), "+11.7 %");
    assert_eq!(pct(-28.46, 0), "−28 %");
    assert_eq!(pct(0.0, 1), "0.0 %");
    assert_eq!(size_b(7.0), "7 B");
    assert_eq!(size_b(1.1), "1.1 B");
    assert_eq!(size_b(0.5), "0.5 B");
    // 1 mJ per token × 10⁶ tokens = 1 kJ.
    assert_eq!(
        per_million(3382.6),
        ("3.38 MJ".to_string(), "0.94 kWh".to_string())
    );
}

#[test]
async fn model_tab_accepts_a_card_by_architecture_and_says_when_a_curve_is_borrowed() {
    let m = mount("?tab=model&n=7&gpu=Other%20Hopper%20card&p=NF4");
    settle().await;
    let sel = q(&m.root, "#model-gpu").unchecked_into::<web_sys::HtmlSelectElement>();
    assert_eq!(sel.value(), "Other Hopper card");
    let t = text(&m.root);
    assert!(t.contains("borrowed from ampere"), "{t}");
    assert!(t.contains("extrapolated"), "{t}");
    assert!(t.contains("confidence: low"), "{t}");
}

fn optimum_config(gpu: &str, model: &str, o: analysis::Objective, ctx: Option<u32>) -> String {
    let r = analysis::optimize(&analysis::OptimizeRequest {
        gpu: gpu.into(),
        params_b: None,
        model: Some(model.into()),
        objective: o,
        budgets: analysis::Budgets::default(),
        context: ctx,
        engine: None,
    })
    .unwrap();
    let c = r.optimum.unwrap();
    format!("{} · batch {} · ctx {}", c.precision, c.batch, c.context)
}

#[test]
async fn optimize_tab_recommends_tags_every_tile_and_follows_the_objective() {
    let m = mount("?tab=optimize&gpu=H200&model=Qwen2-1.5B&objective=min-energy&ctx=2048");
    settle().await;
    let choice = q(&m.root, "#opt-choice").text_content().unwrap();
    let want = optimum_config(
        "H200",
        "Qwen2-1.5B",
        analysis::Objective::MinEnergy,
        Some(2048),
    );
    assert!(choice.contains(&want), "{choice} vs {want}");
    // 8 tiles, each with its provenance chip, and the legend of the five tags.
    let tiles = m
        .root
        .query_selector_all("#opt-recommendation .tiles .stat")
        .unwrap();
    assert_eq!(tiles.length(), 8);
    assert_eq!(
        m.root
            .query_selector_all("#opt-recommendation .tiles .stat .tchip")
            .unwrap()
            .length(),
        8
    );
    let t = text(&m.root);
    for tag in [
        "measured",
        "computed",
        "interpolated",
        "extrapolated",
        "modelled",
    ] {
        assert!(t.contains(tag), "legend lacks {tag}");
    }
    assert!(t.contains("Alternatives") && t.contains("Δ energy"), "{t}");
    let front: usize = q(&m.root, "#pareto-table")
        .get_attribute("data-points")
        .unwrap()
        .parse()
        .unwrap();
    assert!(front >= 3, "{front}");
    assert_eq!(
        m.root
            .query_selector_all("#pareto-table tbody tr")
            .unwrap()
            .length() as usize,
        front
    );
    assert_eq!(
        q(&m.root, "#pareto-canvas")
            .get_attribute("data-painted")
            .as_deref(),
        Some("1")
    );
    // The H200 has three stacks: all are searched, and the recommendation names the one it assumes.
    let used = q(&m.root, "#opt-stack-used").text_content().unwrap();
    assert!(
        used.starts_with("Assumes the ")
            && used.contains("stacks searched: candle-graph, candle, llama.cpp"),
        "{used}"
    );
    let choice = q(&m.root, "#opt-choice").text_content().unwrap();
    assert!(
        ["candle-graph · ", "candle · ", "llama.cpp · "]
            .iter()
            .any(|e| choice.starts_with(e)),
        "{choice}"
    );

    set_and_fire(&q(&m.root, "#opt-objective"), "min-latency", "change");
    settle().await;
    let choice = q(&m.root, "#opt-choice").text_content().unwrap();
    let want = optimum_config(
        "H200",
        "Qwen2-1.5B",
        analysis::Objective::MinLatency,
        Some(2048),
    );
    assert!(choice.contains(&want), "{choice} vs {want}");
    let search = web_sys::window().unwrap().location().search().unwrap();
    assert!(search.contains("objective=min-latency"), "{search}");
    assert!(search.contains("tab=optimize"), "{search}");
}

#[test]
async fn optimize_tab_names_the_budget_the_closest_configuration_breaks() {
    let m = mount("?tab=optimize&gpu=RTX%204090&model=Qwen2-7B&max_ms=1");
    settle().await;
    let callout = q(&m.root, "#least-violating").text_content().unwrap();
    assert!(
        callout.contains("No configuration meets your budgets"),
        "{callout}"
    );
    assert!(callout.contains("breaks latency budget"), "{callout}");
    assert!(callout.contains("% over it"), "{callout}");
    assert!(m
        .root
        .query_selector("#opt-recommendation")
        .unwrap()
        .is_none());
    // Lifting the budget brings the recommendation back.
    set_and_fire(&q(&m.root, "#opt-max-ms"), "", "change");
    settle().await;
    assert!(m
        .root
        .query_selector("#opt-recommendation")
        .unwrap()
        .is_some());
}

#[test]
async fn model_tab_offers_the_hopper_gguf_classes_with_their_own_curve() {
    let m = mount("?tab=model&n=7&gpu=H200&p=Q4_K");
    settle().await;
    let sel = q(&m.root, "#precision-select").unchecked_into::<web_sys::HtmlSelectElement>();
    assert_eq!(sel.value(), "Q4_K");
    let opts: Vec<String> = (0..sel.length())
        .filter_map(|i| sel.item(i))
        .filter_map(|o| o.get_attribute("value"))
        .collect();
    for p in ["NF4", "INT8", "FP16", "Q8_0", "Q4_K", "Q4_0"] {
        assert!(opts.iter().any(|o| o == p), "{opts:?}");
    }
    let t = text(&m.root);
    assert!(!t.contains("borrowed from"), "{t}");
    assert!(t.contains("Fit of the hopper Q4_K class"), "{t}");
    assert!(t.contains("candle GGUF"), "{t}");
    // Weights from analysis's VRAM model (true bytes of the format).
    let w = q(&m.root, "#model-weights").text_content().unwrap();
    let want = format!("{:.1} GB", analysis::weights_gb(7.0, "Q4_K").unwrap());
    assert_eq!(w, want);
    // An ada card has no GGUF class: the picker keeps the base three (+ the current choice).
    set_and_fire(&q(&m.root, "#precision-select"), "NF4", "change");
    set_and_fire(&q(&m.root, "#model-gpu"), "RTX 4090", "change");
    settle().await;
    let sel = q(&m.root, "#precision-select").unchecked_into::<web_sys::HtmlSelectElement>();
    assert_eq!(sel.length(), 3);
}

#[test]
fn log_ticks_are_1_2_5_per_decade_and_dense_on_narrow_ranges() {
    assert_eq!(
        web::chart::nice_ticks(1.0, 100.0, 0, true),
        vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]
    );
    // 8.7–10.6 ms holds only "10" among 1-2-5 values: every integer multiple instead.
    let t = web::chart::nice_ticks(7.5, 11.5, 0, true);
    assert_eq!(t, vec![8.0, 9.0, 10.0]);
}

#[test]
fn typed_model_sizes_are_accepted_only_when_sane() {
    assert_eq!(web::util::parse_params_b(" 7 "), Some(7.0));
    assert_eq!(web::util::parse_params_b("0.5"), Some(0.5));
    for bad in ["", "seven", "-1", "0", "NaN", "inf", "1e9"] {
        assert_eq!(web::util::parse_params_b(bad), None, "{bad}");
    }
}
