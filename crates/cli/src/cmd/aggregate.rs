//! `quantenergy aggregate`: a directory of measured reports — one box's or the merged results
//! of many nodes and cards — → `data/anchors.csv` rows (mean, n, CV, judged against the
//! campaign targets) or the campaign's Markdown table. Rows are grouped by session, stack,
//! model, precision and batch; different sessions or stacks are never pooled, and a report that
//! is not a measurement never contributes a figure.

use anyhow::{bail, Result};
use campaign::aggregate::{
    aggregate_anchors, anchors_csv, markdown_table, CampaignTargets, Provenance,
};
use clap::Args;
use std::path::PathBuf;

/// A campaign's directory and the provenance its rows get.
#[derive(Args, Debug)]
pub struct AggregateArgs {
    /// Directory of reports.
    pub dir: PathBuf,
    /// The session of rows whose reports name none (a sweep plan's `session` is recorded in
    /// every report; a different one here is refused).
    #[arg(long)]
    pub session: Option<String>,
    /// The stack label of the rows (default: each row's own, from its reports, e.g. "candle
    /// 0.11.1 GGUF/cuBLAS kernels, CUDA 13.0, synthetic weights"); refused over several stacks.
    #[arg(long)]
    pub stack: Option<String>,
    /// Where the numbers come from.
    #[arg(
        long,
        default_value = "quantenergy data/measurements (this repository)"
    )]
    pub source: String,
    /// Print the full per-configuration table (both energies, tok/s, power, CV, cards, nodes,
    /// ΔE) as Markdown for docs/MEASUREMENTS.md instead of anchors.csv rows.
    #[arg(long)]
    pub markdown: bool,
    /// Pool arms whose window's validity is flagged (short window, cooldown not converged,
    /// counter vs trace apart, host-bound, throttled); each row's note then names the flags.
    /// By default they are left out, and counted.
    #[arg(long)]
    pub include_flagged: bool,
    /// The rows check the method, they do not anchor the default curves (e.g. "a real model
    /// beside its synthetic twin"): default_curve is 0 and each note starts with this reason.
    #[arg(long, value_name = "REASON")]
    pub not_curve: Option<String>,
}

/// Print the rows (or the table).
pub fn run(a: &AggregateArgs) -> Result<()> {
    let agg = aggregate_anchors(&a.dir, a.include_flagged)?;
    if agg.rows.is_empty() && agg.prompt_set_rows.is_empty() {
        bail!(
            "{}: no measured run with a baseline arm to pool: {} valid report(s) — {} estimate(s), \
             which are never pooled into a measured row, {} failed, {} prompt-set report(s) \
             (tabled apart by --markdown) — {} flagged arm(s) left \
             out (--include-flagged pools them) and {} file(s) that are not valid reports",
            a.dir.display(),
            agg.reports,
            agg.estimates,
            agg.failed,
            agg.prompt_sets,
            agg.flagged_left_out,
            agg.invalid
        );
    }
    if agg.flagged_left_out > 0 {
        eprintln!(
            "note: left out {} measured arm(s) whose window's validity is flagged \
             (quantenergy validate says why; --include-flagged pools them, named in each row's note)",
            agg.flagged_left_out
        );
    }
    if agg.prompt_sets > 0 && !a.markdown {
        eprintln!(
            "note: {} prompt-set report(s) pooled into {} row(s) that never become anchors lines \
             (their energy per output token is whole requests', each prompt's prefill included): \
             --markdown tables them",
            agg.prompt_sets,
            agg.prompt_set_rows.len()
        );
    }
    if agg.estimates + agg.failed + agg.invalid > 0 {
        eprintln!(
            "note: left out {} estimate(s), {} failed report(s) and {} invalid file(s)",
            agg.estimates, agg.failed, agg.invalid
        );
    }
    let targets = CampaignTargets::default();
    if a.markdown {
        if !agg.rows.is_empty() {
            print!("{}", markdown_table(&agg.rows, &targets));
        }
        if !agg.prompt_set_rows.is_empty() {
            print!(
                "\nPrompt-set runs (energy per output token of whole requests, each prompt's \
                 prefill included):\n\n{}",
                markdown_table(&agg.prompt_set_rows, &targets)
            );
        }
        return Ok(());
    }
    if agg.rows.is_empty() {
        bail!(
            "{}: only prompt-set runs, which never become anchors lines: --markdown tables them",
            a.dir.display()
        );
    }
    let prov = Provenance {
        stack: a.stack.clone(),
        session: a.session.clone(),
        source: a.source.clone(),
        not_curve: a.not_curve.clone(),
    };
    prov.check(&agg.rows).map_err(anyhow::Error::msg)?;
    print!("{}", anchors_csv(&agg.rows, &prov, &targets)?);
    Ok(())
}
