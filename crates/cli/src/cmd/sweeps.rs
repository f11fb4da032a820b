//! `quantenergy sweeps`: a card's measured batch sweeps as Markdown — per model and session, energy
//! per token and throughput at every batch, ΔE vs the same batch's FP16 with its interval, and where
//! batching turns a saving into a cost (`analysis::sweeps`, the tables the page's Optimize tab shows).

use analysis::sweeps::{card_sweeps, markdown};
use analysis::Dataset;
use anyhow::{bail, Result};
use clap::Args;

/// Which card.
#[derive(Args, Debug)]
pub struct SweepsArgs {
    /// The card, as the rows name it.
    #[arg(long, default_value = "H200")]
    pub gpu: String,
}

/// Print every sweep of the card.
pub fn run(a: &SweepsArgs) -> Result<()> {
    let sweeps = card_sweeps(Dataset::embedded(), &a.gpu);
    if sweeps.is_empty() {
        bail!(
            "{} has no energy row at batch > 1 in data/anchors.csv",
            a.gpu
        );
    }
    for s in &sweeps {
        println!("{}", markdown(s));
    }
    Ok(())
}
