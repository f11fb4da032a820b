//! The campaign's error type: plans that cannot run as written, results that cannot be read or
//! aggregated.

use std::path::PathBuf;

/// What a campaign call failed on. Plan errors name the plan's run (numbered from 1) and what is
/// wrong with it; the caller, who knows the file, names it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `plan.toml` is not a valid plan (TOML syntax, unknown or mistyped keys).
    #[error("not a valid plan")]
    PlanToml(#[source] toml::de::Error),
    /// A `[[run]]` of a plan (numbered from 1) names no model, or both kinds.
    #[error("run {run}: give exactly one of `synthetic` or `model`")]
    PlanModel {
        /// The run's number, from 1.
        run: usize,
    },
    /// A plan's `out` leaves the plan's folder (absolute, or `..`): plans travel between people
    /// and into batch jobs, and must not write where their owner did not ask.
    #[error("out {0:?}: give a folder inside the plan's folder (no absolute path, no `..`); `sweep --out` chooses another")]
    PlanOut(std::path::PathBuf),
    /// A plan's `card` is not a card name.
    #[error("card {0:?}: name a card (e.g. \"H200\"), not GPU numbers or a flag")]
    PlanCard(String),
    /// A plan's `session` is not a plain label.
    #[error("session {0:?}: use letters, digits, `.`, `-` and `_` only")]
    PlanSession(String),
    /// A `[[run]]` of a plan (numbered from 1) lists no precision.
    #[error("run {run}: `precisions` is empty")]
    PlanPrecisions {
        /// The run's number, from 1.
        run: usize,
    },
    /// A count of a plan (tokens, iterations, repeats, a batch size) is zero, or a run's `batch`
    /// list is empty: the sweep would start processes that measure nothing.
    #[error("{where_}: `{field}` {why}")]
    PlanCount {
        /// "defaults" or "run N" (numbered from 1).
        where_: String,
        /// The key.
        field: &'static str,
        /// What is wrong with its value.
        why: &'static str,
    },
    /// A plan expands to more jobs than a sweep may start, or a run repeats more often than any
    /// campaign does: refused before anything is expanded (a typo's 10¹² repeats used to grow
    /// memory until it ran out).
    #[error("{where_}: `{field}` {value} is over {max}: {why}")]
    PlanTooBig {
        /// "defaults", "run N" or "the plan".
        where_: String,
        /// The key, or "jobs" for the whole plan.
        field: &'static str,
        /// The value found (saturated at u64::MAX).
        value: u64,
        /// The bound.
        max: u64,
        /// Why the bound is there.
        why: &'static str,
    },
    /// A `[[run]]` of a plan (numbered from 1) is a server run that cannot run as written.
    #[error("run {run}: {why}")]
    PlanServer {
        /// The run's number, from 1.
        run: usize,
        /// What is wrong with it.
        why: String,
    },
    /// The runs of one configuration were measured by different meter builds.
    #[error(
        "{config}: its runs were measured by different meter builds ({builds}): they are not one \
         configuration; aggregate each build's reports apart"
    )]
    MixedBuilds {
        /// The configuration: model, precision and stack.
        config: String,
        /// The builds, comma-separated.
        builds: String,
    },
    /// Serializing a result to JSON failed.
    #[error("serializing JSON")]
    Json(#[from] serde_json::Error),
    /// Writing CSV rows failed.
    #[error("writing CSV")]
    Csv(#[from] csv::Error),
    /// The CSV writer produced bytes that are not UTF-8.
    #[error("the CSV output is not UTF-8")]
    CsvUtf8(#[from] std::string::FromUtf8Error),
    /// The meter failed (writing a report), or a file-system call did ([`Error::io`]).
    #[error(transparent)]
    Meter(#[from] meter::Error),
}

impl Error {
    /// An I/O error on `path` while doing `action`: the meter's [`meter::Error::Io`], which
    /// names the same things.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Meter(meter::Error::io(action, path, source))
    }
}

/// `Result` with the campaign's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
