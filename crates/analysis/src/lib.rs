//! quantenergy's science, shared by the page (wasm) and the meter (native). Pure: no I/O.
//!
//! Precision and architecture are [`report::Precision`] and [`report::Arch`] everywhere.
//!
//! * [`class`] — what names a crossover class ([`ClassId`]) and which architectures lend theirs.
//! * [`engine`] — which engine a software stack's text names, read once per dataset row.
//! * [`dataset`] — the embedded `data/` files (anchors, card catalog).
//! * [`stats`] — the Student-t table and small statistics.
//! * [`fit`] — the bounded crossover fit with its uncertainty band and leave-one-out error.
//! * [`curves`] — one fit per (architecture, precision) class, user points joining their class.
//! * [`estimate`](mod@estimate) — a user's model: ΔE% with CI, basis, confidence, absolute energy.
//! * [`verdict`] — the plain-language verdict on a ΔE and its interval.
//! * [`compare`](mod@compare) — where a report's measured ΔE sits against its class's curve (the
//!   page's overlay and `quantenergy compare`).
//! * `to_report` — an estimate as a schema-valid `energy.json` ([`estimate_report`]).
//! * [`shapes`](mod@shapes) — real transformer shapes (`data/models.csv`).
//! * [`vram`](mod@vram) — weight formats at their true storage cost, and the VRAM a configuration needs.
//! * [`roofline`] — decode-step time with calibrated launch floors.
//! * [`weight_reads`] — the bytes of weights a measured decode step read, and their share of the
//!   card's memory bandwidth (every meter arm reports it).
//! * [`batch`] — energy per token vs batch size, calibrated on the batch sweeps.
//! * [`pareto`] — the energy↔latency Pareto frontier.
//! * [`stacks`] — one card and model size on different software, side by side (never pooled).
//! * [`synthetic`] — what synthetic-weight rows may be off by: a real model beside its twin.
//! * [`tag`] — provenance tags (measured … modelled) on every optimizer figure.
//! * [`optimize`](mod@optimize) — the optimizer: precision × batch × context under budgets.

#![warn(missing_docs)]

pub mod class;
pub mod compare;
pub mod curves;
pub mod dataset;
pub mod engine;
pub mod estimate;
pub mod fit;
pub mod shapes;
pub mod stats;
mod to_report;
pub mod verdict;

pub use class::ClassId;
pub use compare::{place, place_report, Comparison, NoCurve, Outcome, Placement, Subject};
pub use curves::{
    arch_engines, default_classes, default_engine, find_class, find_class_on, fit_classes,
    ClassPoint, CurveClass, ExtraPoint, PointOrigin,
};
pub use dataset::{Anchor, Dataset, Gpu};
pub use engine::{curve_engine, StackEngines};
pub use estimate::{estimate, Confidence, Estimate, EstimateInput};
pub use fit::{fit_curve, Fit, FitParam, Point};
pub use shapes::{find_shape, shape_for_params, shapes, ModelShape};
pub use to_report::estimate_report;

pub mod batch;
pub mod context;
pub mod optimize;
pub mod pareto;
pub mod roofline;
pub mod stacks;
pub mod sweeps;
pub mod synthetic;
pub mod tag;
#[cfg(test)]
mod test_data;
pub mod vram;
pub mod weight_reads;

pub use batch::{batch_curve, BatchCurve};
pub use optimize::{
    optimize, optimize_with, Budget, Budgets, Candidate, Objective, OptimizeError, OptimizeRequest,
    OptimizeResult, Tie,
};
pub use pareto::pareto_front;
pub use roofline::{
    latency_calibration, throughput_calibration_table, CalibrationRow, LatencyCalibration,
};
pub use tag::{Tag, Tagged};
pub use vram::{find_format, vram, weights_gb, VramBreakdown, WeightFormat};
