//! The same card and model size on different software — the software moves ΔE as much as the card
//! does, so it is shown side by side, never averaged away: one column per measurement
//! session — each session is one stack — with every format's ΔE vs the FP16 arm of that session,
//! its 95 % interval, the absolute energy per token and the run count. Nothing is pooled across
//! sessions: a column's Δ always divides by its own FP16 row.

use crate::estimate::same_size;
use crate::{Anchor, Dataset};
use report::Precision;

/// One format of one stack.
#[derive(Debug, Clone, PartialEq)]
pub struct StackCell {
    /// The format, as the comparison names it (`Q4_0` for llama.cpp's `GGUF-Q4_0` too).
    pub format: String,
    /// Energy per generated token, mJ.
    pub energy_mj: f64,
    /// ΔE vs this session's FP16 arm, %; `None` for the FP16 arm itself.
    pub delta_pct: Option<f64>,
    /// 95 % interval of `delta_pct` (n ≥ 2 each; [`Anchor::delta_halfwidth_pct`]: paired where the row has its runs' ΔE spread).
    pub interval: Option<(f64, f64)>,
    /// Independent runs behind the figure.
    pub n: Option<u32>,
    /// Run-to-run CV of the energy, %.
    pub cv_pct: Option<f64>,
    /// Throughput, tok/s, where published.
    pub throughput_tok_s: Option<f64>,
}

/// One stack of one measurement session at the chosen size.
#[derive(Debug, Clone, PartialEq)]
pub struct StackColumn {
    /// Short name for a legend: the engine and its version (`candle-graph 0.11.1`).
    pub label: String,
    /// The full stack text of the rows.
    pub stack: String,
    /// The session the rows belong to.
    pub session: String,
    /// The model name as measured.
    pub model: String,
    /// Its formats, FP16 first, then in [`format_rank`] order.
    pub cells: Vec<StackCell>,
}

impl StackColumn {
    /// The cell of `format`, if this stack measured it.
    pub fn cell(&self, format: &str) -> Option<&StackCell> {
        self.cells.iter().find(|c| c.format == format)
    }
}

/// Every stack measured on `gpu` at one model size.
#[derive(Debug, Clone, PartialEq)]
pub struct StackComparison {
    /// The card.
    pub gpu: String,
    /// The model size, B parameters.
    pub params_b: f64,
    /// Every format any column has, FP16 first.
    pub formats: Vec<String>,
    /// One column per session, in the dataset's order.
    pub columns: Vec<StackColumn>,
}

impl StackComparison {
    /// The largest spread of ΔE between two stacks for one format: (format, low, high) in
    /// percentage points — the figure a visitor should take away.
    pub fn widest_disagreement(&self) -> Option<(String, f64, f64)> {
        widest_spread(self.formats.iter().map(String::as_str), |f| {
            self.columns
                .iter()
                .filter_map(|c| c.cell(f)?.delta_pct)
                .collect()
        })
    }
}

/// Of `formats`, the one whose ΔE differs most between the stacks that measured it (at least
/// two): (format, low, high). `deltas` gives every stack's ΔE of a format.
pub fn widest_spread<'a>(
    formats: impl IntoIterator<Item = &'a str>,
    deltas: impl Fn(&str) -> Vec<f64>,
) -> Option<(String, f64, f64)> {
    formats
        .into_iter()
        .filter_map(|f| {
            let ds = deltas(f);
            if ds.len() < 2 {
                return None;
            }
            let lo = ds.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = ds.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            Some((f.to_string(), lo, hi))
        })
        .max_by(|a, b| (a.2 - a.1).total_cmp(&(b.2 - b.1)))
}

/// A format's name across stacks: llama.cpp's `GGUF-F16` / `GGUF-Q4_0` are FP16 / Q4_0; other
/// precisions keep their label (variants included: a different file is a different format).
pub fn format_name(a: &Anchor) -> String {
    match (a.precision, &a.precision_variant) {
        (Precision::GgufF16, None) => Precision::Fp16.as_str().into(),
        (Precision::GgufQ4_0, None) => Precision::Q4_0.as_str().into(),
        _ => a.precision_label(),
    }
}

/// Sort key of a format: FP16, BF16, 8-bit, then 4-bit formats, then the rest by name.
pub fn format_rank(format: &str) -> (u8, String) {
    let r = match format {
        "FP16" => 0,
        "BF16" => 1,
        "INT8" | "Q8_0" => 2,
        "Q6_K" => 3,
        "Q5_K" => 4,
        "NF4" => 5,
        "Q4_K" => 6,
        "Q4_0" => 7,
        _ => 9,
    };
    (r, format.to_string())
}

/// The engine part of a stack text, for a legend: `candle-graph 0.11.1 GGUF/cuBLAS kernels, CUDA
/// 13.0, …` → `candle-graph 0.11.1`; `transformers + bitsandbytes (…)` stays whole up to the `(`.
pub fn stack_label(stack: &str) -> String {
    let head = stack.split([',', '(']).next().unwrap_or(stack).trim();
    head.strip_suffix(" GGUF/cuBLAS kernels")
        .unwrap_or(head)
        .to_string()
}

/// A batch-1 row with an energy: what the comparison can show.
fn usable(a: &Anchor) -> bool {
    a.batch == 1 && a.energy_mj.is_some_and(f64::is_finite)
}

/// The model sizes of `gpu` that at least two sessions measured at batch 1, smallest first.
pub fn shared_sizes(ds: &Dataset, gpu: &str) -> Vec<f64> {
    let mut sizes: Vec<(f64, Vec<&str>)> = Vec::new();
    for a in ds.anchors.iter().filter(|a| a.gpu == gpu && usable(a)) {
        match sizes.iter_mut().find(|(n, _)| same_size(*n, a.params_b)) {
            Some((_, sessions)) if !sessions.contains(&a.session.as_str()) => {
                sessions.push(&a.session)
            }
            Some(_) => {}
            None => sizes.push((a.params_b, vec![&a.session])),
        }
    }
    let mut out: Vec<f64> = sizes
        .into_iter()
        .filter(|(_, s)| s.len() >= 2)
        .map(|(n, _)| n)
        .collect();
    out.sort_by(f64::total_cmp);
    out
}

/// Every session's batch-1 rows of `gpu` at `params_b` (the same size as `estimate::same_size`
/// reads it: anchors round what models.csv counts), one column each. A session
/// that measured several rows of one format (repeats published separately) keeps the first.
pub fn compare_stacks(ds: &Dataset, gpu: &str, params_b: f64) -> StackComparison {
    let mut columns: Vec<StackColumn> = Vec::new();
    let rows = ds
        .anchors
        .iter()
        .filter(|a| a.gpu == gpu && usable(a) && same_size(a.params_b, params_b));
    for a in rows {
        // A column is one session of one stack (a session that ran two engines is two columns).
        let col = match columns
            .iter()
            .position(|c| c.session == a.session && c.stack == a.stack)
        {
            Some(i) => &mut columns[i],
            None => {
                columns.push(StackColumn {
                    label: stack_label(&a.stack),
                    stack: a.stack.clone(),
                    session: a.session.clone(),
                    model: a.model.clone(),
                    cells: Vec::new(),
                });
                columns.last_mut().expect("just pushed")
            }
        };
        let format = format_name(a);
        if col.cell(&format).is_some() {
            continue;
        }
        let is_fp16 = format == Precision::Fp16.as_str();
        let fp16 = ds.fp16_row_of(a).or_else(|| {
            // llama.cpp's baseline row is GGUF-F16, which fp16_row_of does not take for FP16.
            ds.anchors.iter().find(|o| {
                o.gpu == a.gpu
                    && o.session == a.session
                    && o.model == a.model
                    && o.batch == 1
                    && format_name(o) == Precision::Fp16.as_str()
            })
        });
        let delta = if is_fp16 { None } else { a.delta_pct() };
        let interval = fp16.filter(|_| !is_fp16).and_then(|f| a.delta_interval(f));
        col.cells.push(StackCell {
            format,
            energy_mj: a.energy_mj.unwrap_or(f64::NAN),
            delta_pct: delta,
            interval,
            n: a.n,
            cv_pct: a.cv_pct,
            throughput_tok_s: a.throughput_tok_s,
        });
    }
    let mut formats: Vec<String> = Vec::new();
    for c in &mut columns {
        c.cells.sort_by_key(|x| format_rank(&x.format));
        for x in &c.cells {
            if !formats.contains(&x.format) {
                formats.push(x.format.clone());
            }
        }
    }
    formats.sort_by_key(|f| format_rank(f));
    StackComparison {
        gpu: gpu.to_string(),
        params_b,
        formats,
        columns,
    }
}

/// `−38.6 % [−40.1, −37.1]` (the interval when there is one).
fn delta_text(c: &StackCell) -> String {
    let pct = |x: f64| crate::verdict::signed_pct(x, 1);
    match (c.delta_pct, c.interval) {
        (None, _) => "baseline".into(),
        (Some(d), Some((lo, hi))) => format!("{} [{}, {}]", pct(d), pct(lo), pct(hi)),
        (Some(d), None) => pct(d),
    }
}

/// The comparison as a Markdown table for `docs/MEASUREMENTS.md`: a row per format, a column per
/// stack (label, session, model), each cell ΔE with its interval, energy per token and n.
pub fn markdown(c: &StackComparison) -> String {
    let mut out = format!(
        "{} · {} B — ΔE vs each stack's own FP16 [95 % interval] · mJ/token · n\n\n| format |",
        c.gpu, c.params_b
    );
    for col in &c.columns {
        out.push_str(&format!(
            " {} ({}, {}) |",
            col.label, col.session, col.model
        ));
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(c.columns.len()));
    out.push('\n');
    for f in &c.formats {
        out.push_str(&format!("| {f} |"));
        for col in &c.columns {
            match col.cell(f) {
                Some(x) => out.push_str(&format!(
                    " {} · {:.0} · n = {} |",
                    delta_text(x),
                    x.energy_mj,
                    x.n.map(|n| n.to_string()).unwrap_or_else(|| "?".into())
                )),
                None => out.push_str(" — |"),
            }
        }
        out.push('\n');
    }
    if let Some((f, lo, hi)) = c.widest_disagreement() {
        out.push_str(&format!(
            "\nWidest disagreement between stacks: {f}, ΔE from {} to {} ({:.1} points).\n",
            crate::verdict::signed_pct(lo, 1),
            crate::verdict::signed_pct(hi, 1),
            hi - lo
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "gpu,gpu_arch,model,params_b,precision,batch_size,energy_per_token_mj,fp16_energy_per_token_mj,vs_fp16_energy_pct,throughput_tok_s,avg_power_w,n,cv_pct,power_accounting,stack,session,source,default_curve,curve_note\n";

    fn ds(rows: &str) -> Dataset {
        Dataset::parse(
            &format!("{HEAD}{rows}"),
            "name,architecture,vram_gb,memory_bandwidth_gbs,fp16_dense_tflops,tdp_w,note\n",
        )
        .expect("test CSV")
    }

    const TWO_STACKS: &str = "\
H200,hopper,Qwen2-7B,7.616,FP16,1,2434.2,2434.2,0,207,504,3,1.0,gross,\"candle-graph 0.11.1 GGUF/cuBLAS kernels, CUDA 13.0, synthetic weights\",graph,us,0,
H200,hopper,Qwen2-7B,7.616,Q4_K,1,1494.4,2434.2,-38.6,330,494,3,1.0,gross,\"candle-graph 0.11.1 GGUF/cuBLAS kernels, CUDA 13.0, synthetic weights\",graph,us,0,
H200,hopper,Qwen2-7B,7.616,Q4_0,1,1312.5,2434.2,-46.1,368,483,3,1.0,gross,\"candle-graph 0.11.1 GGUF/cuBLAS kernels, CUDA 13.0, synthetic weights\",graph,us,0,
H200,hopper,Qwen2-7B,7.616,FP16,1,3062,3062,0,108,330,6,8.0,gross,\"candle 0.11.1 GGUF/cuBLAS kernels, CUDA 13.0, synthetic weights\",eager,us,0,
H200,hopper,Qwen2-7B,7.616,Q4_K,1,2152,3062,-29.7,129,280,3,9.0,gross,\"candle 0.11.1 GGUF/cuBLAS kernels, CUDA 13.0, synthetic weights\",eager,us,0,
H200,hopper,Qwen2-0.5B,0.494,FP16,1,283.5,283.5,0,864,245,3,1.0,gross,\"candle-graph 0.11.1 GGUF/cuBLAS kernels, CUDA 13.0, synthetic weights\",graph,us,0,
H200,hopper,Llama-3.1-8B,8.03,GGUF-F16,1,4980,4980,0,55,273,5,,gross,\"llama.cpp GGUF (decode-only, NVML counter)\",lcpp,them,0,
H200,hopper,Llama-3.1-8B,8.03,GGUF-Q4_0,1,1899,4980,-61.9,156,296,5,,gross,\"llama.cpp GGUF (decode-only, NVML counter)\",lcpp,them,0,
";

    #[test]
    fn two_stacks_at_one_size_are_two_columns_with_their_own_deltas() {
        let d = ds(TWO_STACKS);
        let c = compare_stacks(&d, "H200", 7.616);
        assert_eq!(c.formats, ["FP16", "Q4_K", "Q4_0"]);
        let labels: Vec<&str> = c.columns.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(labels, ["candle-graph 0.11.1", "candle 0.11.1"]);
        let graph = &c.columns[0];
        let q4k = graph.cell("Q4_K").unwrap();
        // Recomputed from the energies, never the published percentage column.
        assert!((q4k.delta_pct.unwrap() - (1494.4 / 2434.2 - 1.0) * 100.0).abs() < 1e-9);
        // n = 3 and CV 1 % on both arms: t(2) · (E/F) · √(1/3 + 1/3) ≈ 4.303 · 0.614 · 0.816.
        let (lo, hi) = q4k.interval.unwrap();
        let h = 4.303 * (1494.4 / 2434.2) * (2.0f64 / 3.0).sqrt();
        assert!(((hi - lo) / 2.0 - h).abs() < 0.01, "{lo} … {hi}");
        assert_eq!(graph.cell("FP16").unwrap().delta_pct, None);
        assert!(
            c.columns[1].cell("Q4_0").is_none(),
            "eager measured no Q4_0 here"
        );
        let (f, lo, hi) = c.widest_disagreement().unwrap();
        assert_eq!(f, "Q4_K");
        assert!(
            (hi - lo - ((2152.0 / 3062.0 - 1.0) * 100.0 - (1494.4 / 2434.2 - 1.0) * 100.0)).abs()
                < 1e-9
        );
    }

    #[test]
    fn the_markdown_table_has_a_column_per_stack_and_a_dash_where_one_did_not_measure() {
        let d = ds(TWO_STACKS);
        let md = markdown(&compare_stacks(&d, "H200", 7.616));
        let lines: Vec<&str> = md.lines().collect();
        assert!(lines[0].starts_with("H200 · 7.616 B"), "{md}");
        assert_eq!(
            lines[2],
            "| format | candle-graph 0.11.1 (graph, Qwen2-7B) | candle 0.11.1 (eager, Qwen2-7B) |"
        );
        assert_eq!(
            lines[4],
            "| FP16 | baseline · 2434 · n = 3 | baseline · 3062 · n = 6 |"
        );
        assert!(lines[6].starts_with("| Q4_0 | −46.1 % ["), "{}", lines[6]);
        assert!(lines[6].ends_with("| — |"), "{}", lines[6]);
        assert!(
            md.contains("Widest disagreement between stacks: Q4_K"),
            "{md}"
        );
    }

    #[test]
    fn llama_cpp_formats_line_up_with_the_others_and_sizes_need_two_sessions() {
        let d = ds(TWO_STACKS);
        let c = compare_stacks(&d, "H200", 8.03);
        assert_eq!(c.formats, ["FP16", "Q4_0"]);
        assert_eq!(c.columns[0].label, "llama.cpp GGUF");
        let q = c.columns[0].cell("Q4_0").unwrap();
        assert!((q.delta_pct.unwrap() - (1899.0 / 4980.0 - 1.0) * 100.0).abs() < 1e-9);
        assert_eq!(
            q.interval, None,
            "no CV published: no interval, never a made-up one"
        );
        // 0.5 B and 8 B have one session each; 7.6 B has two.
        assert_eq!(shared_sizes(&d, "H200"), [7.616]);
        assert!(shared_sizes(&d, "RTX 4090").is_empty());
        assert_eq!(c.widest_disagreement(), None);
    }

    #[test]
    fn the_embedded_data_compares_without_panicking_on_every_card_and_size() {
        let d = Dataset::embedded();
        for g in &d.gpus {
            for n in shared_sizes(d, &g.name) {
                let c = compare_stacks(d, &g.name, n);
                assert!(c.columns.len() >= 2, "{} {n}", g.name);
                for col in &c.columns {
                    assert!(col.cells.iter().all(|x| x.energy_mj.is_finite()));
                }
            }
        }
    }
}
