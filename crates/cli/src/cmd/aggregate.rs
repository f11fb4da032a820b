//! `quantenergy aggregate`: a directory of measured reports → `data/anchors.csv` rows (mean, n,
//! CV, judged against the campaign targets) or the campaign's Markdown table.

use anyhow::{bail, Result};
use clap::Args;
use meter::campaign::{
    aggregate_anchors, anchors_csv, markdown_table, CampaignTargets, Provenance,
};
use std::path::PathBuf;

/// A campaign's directory and the provenance its rows get.
#[derive(Args, Debug)]
pub struct AggregateArgs {
    /// Directory of reports.
    pub dir: PathBuf,
    /// The session name of the rows (rows of different sessions are never pooled).
    #[arg(long)]
    pub session: String,
    /// The software stack of the rows.
    #[arg(
        long,
        default_value = "candle 0.11.1 GGUF/cuBLAS kernels, CUDA 13.0, synthetic weights"
    )]
    pub stack: String,
    /// Where the numbers come from.
    #[arg(
        long,
        default_value = "quantenergy data/measurements (this repository)"
    )]
    pub source: String,
    /// Print the full per-configuration table (both energies, tok/s, power, CV, ΔE) as
    /// Markdown for docs/MEASUREMENTS.md instead of anchors.csv rows.
    #[arg(long)]
    pub markdown: bool,
}

/// Print the rows (or the table).
pub fn run(a: &AggregateArgs) -> Result<()> {
    let rows = aggregate_anchors(&a.dir)?;
    if rows.is_empty() {
        bail!(
            "{}: no measured reports with a baseline arm",
            a.dir.display()
        );
    }
    let targets = CampaignTargets::default();
    if a.markdown {
        print!("{}", markdown_table(&rows, &targets));
        return Ok(());
    }
    let prov = Provenance {
        stack: a.stack.clone(),
        session: a.session.clone(),
        source: a.source.clone(),
    };
    print!("{}", anchors_csv(&rows, &prov, &targets)?);
    Ok(())
}
