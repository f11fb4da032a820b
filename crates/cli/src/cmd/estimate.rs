//! `quantenergy estimate`: ΔE% vs FP16 for a model from the published dataset — never a
//! measurement.

use analysis::{estimate_report, EstimateInput};
use anyhow::{anyhow, bail, Result};
use clap::Args;
use report::{Arch, Precision};

#[derive(Args, Debug)]
pub struct EstimateArgs {
    /// GPU architecture (turing, ampere, ada, hopper, blackwell). Derived from --gpu when absent.
    #[arg(long)]
    pub arch: Option<Arch>,
    /// GPU card name (e.g. "RTX 4090", "H200"); used for the label and to derive --arch.
    #[arg(long)]
    pub gpu: Option<String>,
    /// Model size in billions of parameters.
    #[arg(long)]
    pub params_b: f64,
    /// Precision: NF4, INT8 (bitsandbytes classes) or FP16.
    #[arg(long)]
    pub precision: Precision,
    #[arg(long, default_value_t = 1)]
    pub batch: u32,
    #[arg(long, default_value_t = 2048)]
    pub context: u32,
    /// Model name for the report.
    #[arg(long)]
    pub model: Option<String>,
    /// The engine (stack) to estimate for: transformers, candle, candle-graph or llama.cpp. By
    /// default the preferred engine with a curve; an asked engine is never swapped for another.
    #[arg(long, value_parser = super::optimize::parse_engine)]
    pub engine: Option<String>,
    /// Print a schema-valid energy.json report instead of the summary.
    #[arg(long)]
    pub json: bool,
}

/// The estimate the arguments ask for, its input checked here (no output).
pub fn estimate_of(a: &EstimateArgs) -> Result<analysis::Estimate> {
    let arch = match (&a.arch, &a.gpu) {
        (Some(arch), _) => *arch,
        (None, Some(gpu)) => report::arch_from_gpu_name(gpu)
            .ok_or_else(|| anyhow!("cannot tell the architecture of {gpu:?}: pass --arch"))?,
        (None, None) => bail!("pass --arch or --gpu"),
    };
    if !(a.params_b.is_finite() && a.params_b > 0.0 && a.params_b <= report::MAX_PARAMS_B) {
        bail!(
            "--params-b must be a positive number of billions, at most {}, got {}",
            report::MAX_PARAMS_B,
            a.params_b
        );
    }
    let input = EstimateInput {
        arch,
        params_b: a.params_b,
        precision: a.precision,
        batch: a.batch.max(1),
        context: a.context.max(1),
        engine: a.engine.clone(),
    };
    Ok(input.estimate_embedded())
}

/// The label and model name the estimate's report carries.
pub fn labels(a: &EstimateArgs, arch: Arch) -> (String, String) {
    let gpu = a.gpu.clone().unwrap_or_else(|| format!("({arch} class)"));
    let model = a
        .model
        .clone()
        .unwrap_or_else(|| format!("{}B model", a.params_b));
    (gpu, model)
}

/// Print the estimate (or, with `--json`, a schema-valid report of it).
pub fn run(a: &EstimateArgs) -> Result<()> {
    let e = estimate_of(a)?;
    let input = &e.input;
    let arch = input.arch;
    let (gpu, model) = labels(a, arch);
    if a.json {
        let rep = estimate_report(&e, &gpu, &model);
        println!("{}", serde_json::to_string_pretty(&rep)?);
        return Ok(());
    }
    println!(
        "{} on {arch}, {} B, batch {}, context {}",
        input.precision, a.params_b, input.batch, input.context
    );
    match (e.delta_pct, e.ci_low, e.ci_high) {
        (Some(d), Some(lo), Some(hi)) => {
            println!("  ΔE vs FP16   {d:+.1} %  (95 % CI {lo:+.1} … {hi:+.1} %)");
            println!("  verdict      {}", e.verdict());
        }
        _ => println!("  ΔE vs FP16   unavailable"),
    }
    println!(
        "  basis        {}   confidence {}",
        e.basis.as_str(),
        e.confidence.as_str()
    );
    if let Some(engine) = &e.curve_engine {
        println!("  stack        {engine}");
    }
    if let Some(c) = &e.class {
        println!(
            "  curve        {c} ({} anchors{})",
            e.class_points,
            e.borrowed_from
                .as_ref()
                .map(|b| format!(", borrowed from {b}"))
                .unwrap_or_default()
        );
    }
    if let (Some(f), Some(en)) = (e.fp16_energy_mj, e.energy_mj) {
        println!(
            "  energy       {en:.0} mJ/token = {:.3} kWh per 1M tokens (FP16 {f:.0} mJ/token)",
            en / 3600.0
        );
    }
    for n in &e.notes {
        println!("  note         {n}");
    }
    Ok(())
}
