//! quantenergy's science, shared by the page (wasm) and the meter (native). Pure: no I/O.
//!
//! * [`dataset`] — the embedded `data/` files.
//! * [`fit`] — the bounded crossover fit with its uncertainty band and leave-one-out error.
//! * [`curves`] — one fit per (architecture, precision) class.
//! * [`estimate`] — a user's model: ΔE% with CI, basis, confidence, absolute energy.

#![warn(missing_docs)]

pub mod curves;
pub mod dataset;
pub mod estimate;
pub mod fit;
pub mod shapes;
pub mod stats;
mod to_report;
pub mod verdict;

pub use curves::{default_classes, find_class, fit_classes, ClassPoint, CurveClass};
pub use dataset::{Anchor, Dataset, Gpu};
pub use estimate::{estimate, ClassId, Confidence, Estimate, EstimateInput};
pub use fit::{fit_curve, Fit, Point};
pub use shapes::{find_shape, shape_for_params, shapes, ModelShape};
pub use to_report::estimate_report;

pub mod batch;
pub mod optimize;
pub mod pareto;
pub mod roofline;
pub mod tag;
pub mod vram;

pub use batch::{batch_curve, BatchCurve};
pub use optimize::{
    optimize, optimize_with, Budgets, Candidate, Objective, OptimizeError, OptimizeRequest,
    OptimizeResult,
};
pub use pareto::pareto_front;
pub use roofline::{
    latency_calibration, throughput_calibration_table, CalibrationRow, LatencyCalibration,
};
pub use tag::{Tag, Tagged};
pub use vram::{find_format, vram, weights_gb, VramBreakdown, WeightFormat};
