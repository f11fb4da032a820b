//! Data & method: the embedded dataset as CSV and JSON downloads, every class's fit, and how the
//! numbers were measured (scope stated in our own words).

use leptos::prelude::*;

use analysis::{dataset::anchors_csv, default_classes, Dataset};

use crate::util::{self, num, pct, size_b};

/// The Data & method tab, whole: one static page read top to bottom (downloads, fits, method),
/// its sections sharing the download handler and the notice. Kept in one function on purpose:
/// each component split off costs the page's wasm its own rendering code, and the whole app sits
/// at its 750 KB gzip budget with under 100 bytes to spare (docs/MEASUREMENTS.md, page budgets).
#[component]
pub fn DataTab() -> impl IntoView {
    let ds = Dataset::embedded();
    let notice = RwSignal::new(String::new());
    let dl = move |name: &'static str, mime: &'static str, content: String| {
        move |_| {
            notice.set(match util::download(name, mime, &content) {
                Ok(()) => format!("{name} saved."),
                Err(_) => format!("{name} could not be saved by this browser."),
            })
        }
    };
    let csv_click = dl(
        "quantenergy-anchors.csv",
        "text/csv",
        anchors_csv().to_string(),
    );
    // The JSON (rows + fits) is written by the worker module, which holds the serializers.
    let json_click = move |_| {
        notice.set("preparing quantenergy-dataset.json…".into());
        crate::validate::dataset_json(move |json| {
            notice.set(
                match util::download("quantenergy-dataset.json", "application/json", &json) {
                    Ok(()) => "quantenergy-dataset.json saved.".into(),
                    Err(_) => "quantenergy-dataset.json could not be saved by this browser.".into(),
                },
            )
        });
    };
    let n_rows = ds.anchors.len();
    let n_repl = ds.anchors.iter().filter(|a| a.replicated()).count();
    let n_cards = {
        let mut v: Vec<&str> = ds.anchors.iter().map(|a| a.gpu.as_str()).collect();
        crate::util::sort_by_key(&mut v, |x| *x);
        v.dedup();
        v.len()
    };

    view! {
        <section class="tab-data">
            <div class="card">
                <h2 class="card-title">"Download the data"</h2>
                <p class="sub">
                    {format!(
                        "{n_rows} published configurations on {n_cards} cards ({n_repl} repeated, n ≥ 2), and {} rows of context runs (checks, on Optimize). ",
                        ds.context.len()
                    )}
                    "The same bytes the page and the command-line meter embed."
                </p>
                <div class="actions">
                    <button class="btn primary" id="dl-csv" on:click=csv_click>"Download CSV"</button>
                    <button class="btn" id="dl-json" on:click=json_click>"Download JSON (with fits)"</button>
                </div>
                <p class="fine" role="status">{move || notice.get()}</p>
            </div>

            <div class="card prose" id="how-we-measure">
                <h2 class="card-title">"How we measure"</h2>
                <p><strong>"What is counted."</strong>" Energy drawn by the GPU package as NVML reports it: the card's own sensor, not the wall. CPU, DRAM, power-supply losses, cooling and the data centre's overhead are outside the number, and so is any carbon figure."</p>
                <p><strong>"What is run."</strong>" One request at a time (single-stream decode, batch 1 unless a row says otherwise), a fixed prompt, greedy decoding and a fixed number of new tokens. The quantized arm and its FP16 baseline are measured in the same session, and ΔE is recomputed from those two energies — a published percentage is never copied."</p>
                <p><strong>"How sure."</strong>" Each point states its n: how many times it was measured, counted the way its source counts. n = 1 points are single observations (hollow markers) and are never presented as a distribution. Curves carry a 95 % band and their leave-one-out error."</p>
                <p><strong>"What it applies to."</strong>" A crossover is a property of a card together with its software stack (driver, CUDA, torch, bitsandbytes or another engine). The same card on another stack moved the NF4 crossover from about 5 B to under 2 B. Compare deltas within a session; absolute energies drift between sessions."</p>
                <p><strong>"Labels."</strong>" Every figure says whether it was "<span class="tag basis basis-measured"><span class="dot"></span>"measured"</span>", "<span class="tag basis basis-interpolated"><span class="dot"></span>"interpolated"</span>" or "<span class="tag basis basis-extrapolated"><span class="dot"></span>"extrapolated"</span>" from the curves, or is "<span class="tag basis basis-unavailable"><span class="dot"></span>"unavailable"</span>". An estimate is never labelled measured."</p>
            </div>

            <div class="card">
                <h2 class="card-title">"Fitted classes"</h2>
                <p class="sub">"One crossover fit per architecture, precision and software stack: a class is a property of the card and the stack, and two stacks' rows are never pooled. The hopper classes come from our own H200 runs on synthetic-weight model shapes with three stacks — candle's eager engine, its CUDA-graph engine and llama.cpp's llama-server — not from transformers + bitsandbytes, so compare their deltas with the NF4/INT8 classes as different stacks."</p>
                <div class="table-scroll" tabindex="0" role="region" aria-label="Fitted classes (scrolls sideways)">
                    <table class="facts wide" id="classes-table">
                        <thead>
                            <tr><th>"class"</th><th>"anchors"</th><th>"A"</th><th>"S"</th><th>"N* (B)"</th><th>"crossover"</th><th>"RMS"</th><th>"LOO MAE"</th><th>"cards"</th><th>"stack"</th></tr>
                        </thead>
                        <tbody>
                            {default_classes().iter().map(|c| view! {
                                <tr>
                                    <td>{c.label()}</td>
                                    <td>{c.points.len()}</td>
                                    <td>{num(c.fit.a, 1)}</td>
                                    <td>{num(c.fit.s, 1)}</td>
                                    <td>{num(c.fit.n_star, 2)}</td>
                                    <td>{c.crossover_b.map(|x| size_b((x * 100.0).round() / 100.0)).unwrap_or_else(|| "none".into())}</td>
                                    <td>{num(c.fit.resid_rms, 1)}</td>
                                    <td>{c.loo_mae.map(|m| num(m, 1)).unwrap_or_else(|| "—".into())}</td>
                                    <td>{c.gpus.join(", ")}</td>
                                    <td class="stack-cell">
                                        {match c.stacks.iter().find_map(|s| super::other_stack(s)) {
                                            Some(note) => view! { <span class="tag warn" title=c.stacks.join("; ")>{note}</span> }.into_any(),
                                            None => view! { <span class="small">"transformers + bitsandbytes"</span> }.into_any(),
                                        }}
                                    </td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                </div>
            </div>

            <AllRows/>
        </section>
    }
}

/// Every row of the dataset, in a collapsed table.
#[component]
fn AllRows() -> impl IntoView {
    let ds = Dataset::embedded();
    let n_rows = ds.anchors.len();
    view! {
        <div class="card">
            <details>
                <summary>{format!("All {n_rows} rows")}</summary>
                <div class="table-scroll" tabindex="0" role="region" aria-label="All anchor rows (scrolls sideways)">
                    <table class="facts wide">
                        <thead><tr><th>"card"</th><th>"model"</th><th>"size"</th><th>"precision"</th><th>"batch"</th><th>"mJ/token"</th><th>"FP16 mJ/token"</th><th>"ΔE"</th><th>"n"</th><th>"CV"</th><th>"session"</th></tr></thead>
                        <tbody>
                            {ds.anchors.iter().map(|a| view! {
                                <tr>
                                    <td>{a.gpu.clone()}</td>
                                    <td>{a.model.clone()}</td>
                                    <td>{size_b(a.params_b)}</td>
                                    <td>{a.precision_label()}</td>
                                    <td>{a.batch}</td>
                                    <td>{a.energy_mj.map(|e| num(e, 1)).unwrap_or_else(|| "—".into())}</td>
                                    <td>{a.fp16_energy_mj.map(|e| num(e, 1)).unwrap_or_else(|| "—".into())}</td>
                                    <td>{a.delta_pct().map(|d| pct(d, 1)).unwrap_or_else(|| "—".into())}</td>
                                    <td>{a.n.map(|n| n.to_string()).unwrap_or_else(|| "?".into())}</td>
                                    <td>{a.cv_pct.map(|c| format!("{c:.1} %")).unwrap_or_else(|| "—".into())}</td>
                                    <td>{a.session.clone()}</td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                </div>
            </details>
        </div>
    }
}
