//! Measurement campaigns: what to measure and what was measured, never the measuring itself.
//!
//! | module | what it holds |
//! |---|---|
//! | [`plan`] | sweep plans (`plan.toml`) → one typed [`plan::Job`] per repeat, resumable from the files it left |
//! | [`slurm`] | a sweep plan as a Slurm job array (`sweep --emit slurm`) |
//! | [`aggregate`] | per-report CSV, the aggregation of a results directory into `data/anchors.csv` rows, the campaign targets |
//! | [`error`] | the crate's [`Error`] |
//!
//! A job says what one `quantenergy measure` process measures; the CLI alone turns it into that
//! process's arguments.

#![warn(missing_docs)]

pub mod aggregate;
pub mod error;
pub mod plan;
pub mod slurm;

pub use error::{Error, Result};
