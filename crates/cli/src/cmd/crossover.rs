//! `quantenergy crossover`: the fitted crossover table per architecture, precision and engine (an
//! architecture measured with several engines has a curve of each, never pooled).

use analysis::default_classes;
use anyhow::{bail, Result};
use report::{Arch, Precision};

/// Print the classes matching the filters, as a table or JSON.
pub fn run(arch: Option<Arch>, precision: Option<Precision>, json: bool) -> Result<()> {
    let classes: Vec<_> = default_classes()
        .iter()
        .filter(|c| arch.is_none_or(|a| c.arch == a))
        .filter(|c| precision.is_none_or(|p| c.precision == p))
        .collect();
    if classes.is_empty() {
        let known: Vec<String> = default_classes().iter().map(|c| c.label()).collect();
        bail!(
            "no fitted class matches; known classes: {}",
            known.join(", ")
        );
    }
    if json {
        let rows: Vec<_> = classes
            .iter()
            .map(|c| {
                serde_json::json!({
                    "arch": c.arch, "precision": c.precision, "engine": c.engine,
                    "A": c.fit.a, "S": c.fit.s, "N_star": c.fit.n_star,
                    "N_star_fixed": c.fit.n_star_fixed,
                    "resid_rms": c.fit.resid_rms, "crossover_b": c.crossover_b,
                    "loo_mae": c.loo_mae, "anchors": c.points.len(),
                    "at_bound": c.fit.at_bound, "range_b": [c.fit.n_min, c.fit.n_max],
                    "gpus": c.gpus, "stacks": c.stacks,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!(
        "{:<16} {:<13} {:>9} {:>9} {:>8} {:>7} {:>10} {:>8} {:>4}  notes",
        "class", "engine", "A", "S", "N*", "resid", "crossover", "LOO MAE", "n"
    );
    for c in classes {
        let mut notes = Vec::new();
        if !c.fit.at_bound.is_empty() {
            notes.push(format!(
                "on bound: {}",
                c.fit
                    .at_bound
                    .iter()
                    .map(|p| p.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        if c.fit.n_star_fixed {
            notes.push("N* fixed (median)".into());
        }
        notes.push(format!("cards: {}", c.gpus.join("+")));
        println!(
            "{:<16} {:<13} {:>9.4} {:>9.4} {:>8.4} {:>7.2} {:>10} {:>8} {:>4}  {}",
            c.label(),
            c.engine,
            c.fit.a,
            c.fit.s,
            c.fit.n_star,
            c.fit.resid_rms,
            c.crossover_b
                .map(|x| format!("{x:.3} B"))
                .unwrap_or_else(|| "–".into()),
            c.loo_mae
                .map(|x| format!("{x:.2}"))
                .unwrap_or_else(|| "–".into()),
            c.points.len(),
            notes.join("; ")
        );
    }
    Ok(())
}
