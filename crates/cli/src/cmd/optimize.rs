//! `quantenergy optimize`: precision × batch × context on a card, under budgets.

use analysis::optimize::{Candidate, OptimizeRequest, OptimizeResult};
use analysis::{Objective, Tag, Tagged};
use anyhow::{anyhow, Result};
use clap::Args;

#[derive(Args, Debug)]
pub struct OptimizeArgs {
    /// GPU card name as in data/gpus.csv or as NVML names it (e.g. "RTX 4090", "NVIDIA H200").
    #[arg(long, required_unless_present = "calibration")]
    pub gpu: Option<String>,
    /// Model size in billions of parameters (taken from --model when absent).
    #[arg(long)]
    pub params_b: Option<f64>,
    /// A named architecture from data/models.csv (real layer/head shapes), e.g. qwen2-7b.
    #[arg(long)]
    pub model: Option<String>,
    /// min-energy, min-latency, max-throughput or min-vram.
    #[arg(long, default_value = "min-energy", value_parser = parse_objective)]
    pub objective: Objective,
    /// Budget: most milliseconds per generated token (per sequence).
    #[arg(long)]
    pub max_latency_ms: Option<f64>,
    /// Budget: most VRAM in GB (1e9 bytes).
    #[arg(long)]
    pub max_vram_gb: Option<f64>,
    /// Budget: fewest tokens per second (summed over the batch).
    #[arg(long)]
    pub min_tok_s: Option<f64>,
    /// Budget: most joules per 1000 generated tokens (= mJ per token).
    #[arg(long)]
    pub max_j_per_1k: Option<f64>,
    /// Fix the context length (tokens) instead of searching 512 … 32768.
    #[arg(long)]
    pub context: Option<u32>,
    /// Search only this engine's stack (transformers, candle, candle-graph, llama.cpp); by default
    /// every engine with curves on the card's architecture, each on its own measurements.
    #[arg(long, value_parser = parse_engine)]
    pub engine: Option<String>,
    /// Print the full result as JSON.
    #[arg(long)]
    pub json: bool,
    /// Print the throughput calibration (every published tok/s vs the model) and the batch fit.
    #[arg(long)]
    pub calibration: bool,
}

/// `--objective`, parsed once here.
fn parse_objective(s: &str) -> Result<Objective, String> {
    Objective::parse(s).ok_or_else(|| {
        format!("unknown objective {s:?}: use min-energy, min-latency, max-throughput or min-vram")
    })
}

/// `--engine`, parsed once here: the engine key of a stack text, as the dataset's curves name it.
pub fn parse_engine(s: &str) -> Result<String, String> {
    let e = analysis::curve_engine(s);
    if e.is_empty() {
        Err("empty engine: use transformers, candle, candle-graph or llama.cpp".into())
    } else {
        Ok(e)
    }
}

/// The short tag printed beside a figure.
fn tag(t: Tag) -> &'static str {
    match t {
        Tag::Measured => "meas",
        Tag::Computed => "comp",
        Tag::Interpolated => "interp",
        Tag::Extrapolated => "extrap",
        Tag::Modelled => "model",
    }
}
/// A figure with its tag.
fn cell(v: Tagged<f64>, digits: usize) -> String {
    format!("{:.*} {:<6}", digits, v.value, tag(v.tag))
}
/// One candidate as a table row; led by its engine when the search had several.
fn row(c: &Candidate, several: bool, extra: &str) -> String {
    let engine = if several {
        format!("{:<13}", c.engine)
    } else {
        String::new()
    };
    format!(
        "{engine}{:<6} {:>5} {:>6}  {:>18} {:>15} {:>16} {:>15}  {:<7} {}",
        c.precision,
        c.batch,
        c.context,
        cell(c.energy_mj_per_token, 1),
        cell(c.latency_ms_per_token, 2),
        cell(c.throughput_tok_s, 1),
        cell(c.vram.total_gb, 2),
        format!("{:?}", c.bound.value).to_lowercase(),
        extra
    )
}
/// The table's header row.
fn header(several: bool) -> String {
    let engine = if several {
        format!("{:<13}", "engine")
    } else {
        String::new()
    };
    format!(
        "{engine}{:<6} {:>5} {:>6}  {:>18} {:>15} {:>16} {:>15}  {:<7}",
        "prec", "batch", "ctx", "J/1k tokens", "ms/token", "tok/s", "VRAM GB", "bound"
    )
}

/// Print the recommendation, alternatives and Pareto frontier (or the calibration).
pub fn run(a: &OptimizeArgs) -> Result<()> {
    if a.calibration {
        return print_calibration(a.json);
    }
    let r = analysis::optimize(&a.request()).map_err(|e| anyhow!("{e}"))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(());
    }
    print_result(&r, a.objective);
    Ok(())
}

impl OptimizeArgs {
    /// The search the arguments ask for (the optimizer checks its numbers).
    pub fn request(&self) -> OptimizeRequest {
        let a = self;
        OptimizeRequest {
            gpu: a.gpu.clone().unwrap_or_default(),
            params_b: a.params_b,
            model: a.model.clone(),
            objective: a.objective,
            budgets: analysis::Budgets {
                max_latency_ms: a.max_latency_ms,
                max_vram_gb: a.max_vram_gb,
                min_tok_s: a.min_tok_s,
                max_j_per_1k: a.max_j_per_1k,
            },
            context: a.context,
            engine: a.engine.clone(),
        }
    }
}

/// The human-readable result: header, recommendation, alternatives, frontier, quality notes.
fn print_result(r: &OptimizeResult, objective: Objective) {
    let several = r.engines.len() > 1;
    let header = header(several);
    println!(
        "{} ({}, {} GB) · {} ({:.2} B params, {} layers, {} KV heads) · objective {}",
        r.gpu.name,
        r.gpu.arch,
        r.gpu.vram_gb.value,
        r.model.name,
        r.model.shape_params_b.value,
        r.model.layers,
        r.model.kv_heads,
        objective.as_str()
    );
    println!(
        "searched {} configurations ({} engine × {} precisions × batch × context): {} feasible, {} over VRAM, {} over budget",
        r.counts.evaluated, r.engines.join("/"), r.precisions.iter().map(|p| p.as_str()).collect::<Vec<_>>().join("/"), r.counts.feasible, r.counts.over_vram, r.counts.over_budget
    );
    println!("tags: meas = measured, comp = computed, interp = interpolated, extrap = extrapolated, model = modelled");
    println!();
    match &r.optimum {
        Some(o) => {
            println!("RECOMMENDED (stack: {})", o.engine);
            println!("  {header}");
            println!("  {}", row(o, several, ""));
            println!(
                "  energy = FP16 {:.0} mJ ({}) × (1 {:+.1} % ΔE, {}) × batch {:.3} × context {:.3}",
                o.fp16_energy_mj_per_token.value,
                tag(o.fp16_energy_mj_per_token.tag),
                o.delta_vs_fp16_pct.value,
                tag(o.delta_vs_fp16_pct.tag),
                o.batch_factor.value,
                o.context_factor.value
            );
            println!(
                "  VRAM = weights {:.2} + KV {:.2} + activations {:.2} + overhead {:.2} GB",
                o.vram.weights_gb.value,
                o.vram.kv_cache_gb.value,
                o.vram.activations_gb.value,
                o.vram.overhead_gb.value
            );
            if let Some(t) = &r.tie {
                println!("  NOT A CLEAR WINNER: {t}");
            }
            println!();
            println!("ALTERNATIVES (Δ vs recommended: energy / latency / throughput / VRAM)");
            println!("  {header}");
            for alt in &r.alternatives {
                let d = &alt.vs_optimum;
                let extra = format!(
                    "{:+.0}% / {:+.0}% / {:+.0}% / {:+.0}%  {}",
                    d.energy_pct.value,
                    d.latency_pct.value,
                    d.throughput_pct.value,
                    d.vram_pct.value,
                    alt.why
                );
                println!("  {}", row(&alt.candidate, several, &extra));
            }
            println!();
            println!(
                "PARETO FRONTIER (energy ↔ latency, {} points)",
                r.pareto.len()
            );
            println!("  {header}");
            for c in &r.pareto {
                println!("  {}", row(c, several, ""));
            }
        }
        None => {
            println!("NO CONFIGURATION MEETS THE BUDGETS. Least violating:");
            if let Some(lv) = &r.least_violating {
                println!("  {header}");
                println!("  {}", row(&lv.candidate, several, ""));
                for v in &lv.violations {
                    println!("  breaks {}: {}", v.budget, v.message);
                }
            }
        }
    }
    println!();
    println!(
        "model quality: throughput error vs measured runs RMS {:.0} % (median {:.0} %) over {}; batch curve RMS {:.1} % (upstream form {:.0} %)",
        r.quality.throughput_rms_error_pct,
        r.quality.throughput_median_abs_error_pct,
        r.quality.throughput_scope,
        r.quality.batch_rms_error_pct,
        r.quality.batch_upstream_rms_error_pct
    );
    for n in &r.notes {
        println!("  note: {n}");
    }
}

/// The throughput calibration (every published tok/s vs the model) and the batch fit.
fn print_calibration(json: bool) -> Result<()> {
    let cal = analysis::latency_calibration();
    let b = analysis::batch_curve();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "throughput": cal, "batch": b }))?
        );
        return Ok(());
    }
    println!("Throughput: measured vs modelled ({})", cal.method);
    for p in &cal.precisions {
        let ceiling = p
            .kernel_ceiling_gbs
            .map(|c| {
                let archs: Vec<&str> = p.kernel_ceiling_archs.iter().map(|a| a.as_str()).collect();
                format!(", kernel ceiling {c:.0} GB/s on {}", archs.join("/"))
            })
            .unwrap_or_default();
        println!(
            "  {:<10} launch {:.3} ms/layer, bandwidth eff. {:.2}{ceiling}: {} (n = {})",
            p.precision, p.launch_ms_per_layer, p.bandwidth_efficiency, p.bandwidth_source, p.rows
        );
    }
    for c in &cal.cards {
        println!(
            "  card {:<10} launch factor ×{:.3} (n = {})",
            c.gpu, c.factor, c.rows
        );
    }
    for c in &cal.batch_corrections {
        let at: Vec<String> = [2u32, 4, 8, 16, 32, 64]
            .iter()
            .map(|&b| format!("b{b} ×{:.2}", c.at(b)))
            .collect();
        // The stack as the JSON output names it (kebab-case).
        let stack = serde_json::to_string(&c.stack)?;
        println!(
            "  {} {} batch step correction (measured / modelled vs batch 1, its own sweep, {} rows): {}",
            stack.trim_matches('"'),
            c.precision,
            c.points.len() - 1,
            at.join(", ")
        );
    }
    println!("| gpu | model | precision | batch | session | measured tok/s | modelled tok/s | error % | pooled tok/s | pooled error % | bound | in fit | note |");
    println!("|---|---|---|---:|---|---:|---:|---:|---:|---:|---|---|---|");
    for r in &cal.rows {
        println!(
            "| {} | {} | {} | {} | {} | {:.2} | {:.2} | {:+.1} | {:.2} | {:+.1} | {} | {} | {} |",
            r.gpu,
            r.model,
            r.precision,
            r.batch,
            r.session,
            r.measured_tok_s,
            r.modelled_tok_s,
            r.error_pct,
            r.pooled_tok_s,
            r.pooled_error_pct,
            format!("{:?}", r.bound).to_lowercase(),
            if r.used_in_fit { "yes" } else { "no" },
            r.note
        );
    }
    println!(
        "Fitted rows: RMS error {:.1} %, median |error| {:.1} % with card factors; pooled (card factor 1, a card without data): RMS {:.1} %, median {:.1} %",
        cal.rms_error_pct, cal.median_abs_error_pct, cal.pooled_rms_error_pct, cal.pooled_median_abs_error_pct
    );
    println!();
    println!(
        "Batch: e(b)/e(1) = c + (1 − c)/b^k, c = {:.4}, k = {:.4} — {}",
        b.c, b.k, b.calibrated_on
    );
    println!("| batch | measured | fitted | error % | upstream 0.65+0.35/b | upstream error % |");
    println!("|---:|---:|---:|---:|---:|---:|");
    for p in &b.points {
        println!(
            "| {} | {:.4} | {:.4} | {:+.1} | {:.4} | {:+.1} |",
            p.batch,
            p.measured_ratio,
            p.fitted_ratio,
            p.error_pct,
            p.upstream_ratio,
            p.upstream_error_pct
        );
    }
    println!(
        "RMS error {:.1} % (max {:.1} %); upstream form {:.1} %",
        b.rms_error_pct, b.max_error_pct, b.upstream_rms_error_pct
    );
    println!("Out-of-sample check (A800 quick test, 128 new tokens):");
    for c in &b.checks {
        println!(
            "  {:<10} BS {:>2}: measured {:.3}, fitted {:.3} ({:+.1} %)",
            c.precision, c.batch, c.measured_ratio, c.fitted_ratio, c.error_pct
        );
    }
    Ok(())
}
