//! `quantenergy stacks [DIR…]`: one card and model size on every stack measured, side by side —
//! a column per session, each format's ΔE against that session's own FP16 with its
//! interval, energy per token and n, as Markdown for `docs/MEASUREMENTS.md`. The rows are the
//! embedded `data/anchors.csv` plus the measured reports of each DIR (aggregated as `aggregate`
//! does, never pooled across sessions), so a campaign in progress can be set beside the published
//! rows before it becomes anchors.

use analysis::dataset::{ANCHORS_CSV, GPUS_CSV};
use analysis::stacks::{compare_stacks, markdown, shared_sizes};
use analysis::Dataset;
use anyhow::{bail, Context, Result};
use campaign::aggregate::{aggregate_anchors, anchors_csv, CampaignTargets, Provenance};
use clap::Args;
use std::path::PathBuf;

/// What to set side by side.
#[derive(Args, Debug)]
pub struct StacksArgs {
    /// Directories of measured reports (a campaign's raw/) whose sessions join the comparison.
    pub dirs: Vec<PathBuf>,
    /// The card, as the rows name it.
    #[arg(long, default_value = "H200")]
    pub gpu: String,
    /// One model size, B parameters: the nearest size at least two sessions measured (default:
    /// every such size).
    #[arg(long)]
    pub size: Option<f64>,
    /// Leave the embedded data/anchors.csv out: compare the directories only.
    #[arg(long)]
    pub no_anchors: bool,
}

/// The rows: the embedded anchors (unless left out) and each directory's aggregated reports. A
/// directory's session that the anchors already hold is taken from the anchors.
fn rows(a: &StacksArgs) -> Result<Dataset> {
    let header = ANCHORS_CSV.lines().next().unwrap_or_default();
    let mut text = if a.no_anchors {
        format!("{header}\n")
    } else {
        ANCHORS_CSV.to_string()
    };
    let published = Dataset::embedded();
    for dir in &a.dirs {
        let agg = aggregate_anchors(dir, true)?;
        let mut fresh = agg.rows;
        if !a.no_anchors {
            fresh.retain(|r| {
                let s = r.session.as_deref().unwrap_or_default();
                !published.anchors.iter().any(|x| x.session == s)
            });
        }
        let prov = Provenance {
            stack: None,
            session: None,
            source: format!("{} (not yet in data/anchors.csv)", dir.display()),
            not_curve: None,
        };
        text.push_str(&anchors_csv(&fresh, &prov, &CampaignTargets::default())?);
    }
    Dataset::parse(&text, GPUS_CSV).context("the aggregated rows do not parse as anchors")
}

/// Print a table per size.
pub fn run(a: &StacksArgs) -> Result<()> {
    let ds = rows(a)?;
    let shared = shared_sizes(&ds, &a.gpu);
    let sizes = match a.size {
        // `--size 7.6` means the measured 7.616: the nearest size two sessions measured.
        Some(n) => shared
            .iter()
            .copied()
            .min_by(|x, y| (x - n).abs().total_cmp(&(y - n).abs()))
            .into_iter()
            .collect(),
        None => shared,
    };
    if sizes.is_empty() {
        bail!(
            "no model size of {} was measured by two sessions (give report directories, or another --gpu)",
            a.gpu
        );
    }
    for n in sizes {
        let c = compare_stacks(&ds, &a.gpu, n);
        if c.columns.is_empty() {
            bail!("{} has no batch-1 row at {n} B", a.gpu);
        }
        println!("{}", markdown(&c));
    }
    Ok(())
}
