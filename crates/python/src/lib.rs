//! `quantenergy._native`: what the Python package is built on. Thin, like the CLI: every figure
//! comes from `report`, `analysis` and `meter`, the code the CLI and the page run.
//!
//! - [`cli`]: the whole command line (`cli::run`), for the wheel's `quantenergy` console script;
//! - [`validate`], [`estimate`], [`compare`]: JSON text the Python layer turns into dataclasses;
//! - [`Meter`]: an energy window around the caller's code (`meter::protocol::OpenWindow`, the
//!   window every CLI measurement uses), on NVML, or on the documented test meter
//!   (`meter::testing::WallMeter`: 100 W over real time) when asked for by `fake=True`.

use meter::meter::{Clock, EnergyMeter, RealClock};
use meter::protocol::{Metered, OpenWindow};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::sync::Arc;

mod campaign;

/// Run the command line (`argv[0]` is the program name) and return its exit status.
#[pyfunction]
#[pyo3(name = "cli")]
fn run_cli(py: Python<'_>, argv: Vec<String>) -> u8 {
    // A measurement can run for minutes: let other Python threads run meanwhile.
    py.detach(|| ::cli::run(argv))
}

/// Validate a report's text: `{"valid", "errors": [{"path", "message"}], "warnings", "validity"}`.
#[pyfunction]
fn validate(text: &str) -> PyResult<String> {
    let v = report::validate_str(text);
    let issues = |list: &[report::Issue]| -> Vec<serde_json::Value> {
        list.iter()
            .map(|i| serde_json::json!({"path": i.path, "message": i.message}))
            .collect()
    };
    let validity = v
        .report
        .as_ref()
        .filter(|_| v.errors.is_empty())
        .map(report::validity::assess);
    to_json(&serde_json::json!({
        "valid": v.is_valid(),
        "errors": issues(&v.errors),
        "warnings": issues(&v.warnings),
        "validity": validity,
    }))
}

/// ΔE vs FP16 from the published dataset (never a measurement): the `analysis::Estimate` as JSON.
#[pyfunction]
#[pyo3(signature = (params_b, precision, gpu=None, arch=None, batch=1, context=2048, engine=None))]
fn estimate(
    params_b: f64,
    precision: &str,
    gpu: Option<&str>,
    arch: Option<&str>,
    batch: u32,
    context: u32,
    engine: Option<String>,
) -> PyResult<String> {
    let precision: report::Precision = precision.parse().map_err(value_error)?;
    let arch = match (arch, gpu) {
        (Some(a), _) => a.parse::<report::Arch>().map_err(value_error)?,
        (None, Some(g)) => report::arch_from_gpu_name(g).ok_or_else(|| {
            PyValueError::new_err(format!("cannot tell the architecture of {g:?}: pass arch="))
        })?,
        (None, None) => return Err(PyValueError::new_err("pass gpu= or arch=")),
    };
    if !(params_b.is_finite() && params_b > 0.0 && params_b <= report::MAX_PARAMS_B) {
        return Err(PyValueError::new_err(format!(
            "params_b must be a positive number of billions up to {}, got {params_b}",
            report::MAX_PARAMS_B
        )));
    }
    let input = analysis::EstimateInput {
        arch,
        params_b,
        precision,
        batch: batch.max(1),
        context: context.max(1),
        engine,
    };
    let e = input.estimate_embedded();
    let verdict = e.verdict();
    let mut v = serde_json::to_value(&e).map_err(runtime_error)?;
    v["verdict"] = verdict.into();
    to_json(&v)
}

/// Where a report's measured ΔE sits against its class's curve (`quantenergy compare`): the
/// placement as JSON; a report that does not validate raises, naming its first error.
#[pyfunction]
#[pyo3(signature = (text, any_stack=false))]
fn compare(text: &str, any_stack: bool) -> PyResult<String> {
    let v = report::validate_str(text);
    let Some(rep) = v.report.as_ref().filter(|_| v.errors.is_empty()) else {
        let first = v
            .errors
            .first()
            .map(|i| format!("{}: {}", i.path, i.message))
            .unwrap_or_else(|| "not a report".into());
        return Err(PyValueError::new_err(format!("invalid report: {first}")));
    };
    to_json(&::cli::cmd::compare::place_one(rep, any_stack))
}

/// An energy meter: NVML on the GPUs named (their counters summed), or the test meter.
#[pyclass(unsendable)]
struct Meter {
    meter: Box<dyn EnergyMeter>,
    clock: Arc<dyn Clock>,
    open: Option<OpenWindow>,
    trace_hz: Option<f64>,
    device: String,
    /// How often the card's energy counter moves, ms, measured once when the meter opens.
    counter_update_ms: Option<f64>,
}

#[pymethods]
impl Meter {
    /// `gpus`: CUDA-visible indices (default: the first); `fake`: the test meter (100 W over real
    /// time, no GPU); `trace_hz`: the power trace's rate (0 turns it off).
    #[new]
    #[pyo3(signature = (gpus=None, fake=false, trace_hz=50.0))]
    fn new(gpus: Option<Vec<u32>>, fake: bool, trace_hz: f64) -> PyResult<Meter> {
        let (mut meter, device) = open_meter(gpus, fake)?;
        let clock: Arc<dyn Clock> = Arc::new(RealClock::default());
        let counter_update_ms =
            meter::protocol::counter_update_period(meter.as_mut(), clock.as_ref())
                .map(|s| s * 1000.0);
        Ok(Meter {
            meter,
            clock,
            open: None,
            trace_hz: (trace_hz > 0.0).then_some(trace_hz),
            device,
            counter_update_ms,
        })
    }

    /// The card's name, as the meter reads it.
    #[getter]
    fn device(&self) -> String {
        self.device.clone()
    }

    /// Open a window: read the counter, start the trace. One window at a time.
    fn begin(&mut self) -> PyResult<()> {
        if self.open.is_some() {
            return Err(PyRuntimeError::new_err("a window is already open"));
        }
        let w = OpenWindow::open(self.meter.as_mut(), &self.clock, self.trace_hz)
            .map_err(runtime_error)?;
        self.open = Some(w);
        Ok(())
    }

    /// Close the window: its figures as JSON (joules, seconds, tokens, mJ per token, trace,
    /// counter ÷ trace, GPU busy and throttling, validity flags in words).
    #[pyo3(signature = (tokens=None))]
    fn end(&mut self, tokens: Option<u64>) -> PyResult<String> {
        let w = self
            .open
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("no window is open"))?;
        let m = w
            .close(self.meter.as_mut(), &self.clock)
            .map_err(runtime_error)?;
        to_json(&window_json(&m, tokens, self.counter_update_ms))
    }
}

/// NVML on `gpus` (CUDA-visible indices; several: counters summed, as `measure --server-cmd`
/// meters them), or the documented test meter, with the card's name; a card without an energy
/// counter is refused.
fn open_meter(gpus: Option<Vec<u32>>, fake: bool) -> PyResult<(Box<dyn EnergyMeter>, String)> {
    let mut meter: Box<dyn EnergyMeter> = if fake {
        Box::new(meter::testing::WallMeter::new())
    } else {
        let mut meters: Vec<(u32, Box<dyn EnergyMeter + Send>)> = Vec::new();
        for g in gpus.unwrap_or_else(|| vec![0]) {
            let m = meter::nvml_meter::NvmlMeter::open_visible(g).map_err(runtime_error)?;
            meters.push((m.nvml_index(), Box::new(m)));
        }
        Box::new(meter::multi_meter::SumMeter::new(meters).map_err(runtime_error)?)
    };
    let info = meter.info().map_err(runtime_error)?;
    if !info.energy_counter {
        return Err(PyRuntimeError::new_err(format!(
            "{} has no energy counter: this meter never reports a figure it did not read",
            info.name
        )));
    }
    Ok((meter, info.name))
}

/// A closed window's figures, judged by `report::validity`'s rules for one window (no cooldown
/// ran before it, so that rule stays unchecked).
fn window_json(
    m: &Metered,
    tokens: Option<u64>,
    counter_update_ms: Option<f64>,
) -> serde_json::Value {
    let trace_j = m.trace.as_ref().and_then(|t| t.energy_j());
    let ratio = trace_j.filter(|t| *t > 0.0).map(|t| m.counter_j / t);
    let validity = report::validity::assess_window(
        &report::validity::Window {
            arm: None,
            seconds: Some(m.seconds),
            counter_over_trace: ratio,
            converged: None,
            gpu_busy_pct: m.activity.gpu_busy_pct,
            power_throttle_pct: m.activity.power_throttle_pct,
            thermal_throttle_pct: m.activity.thermal_throttle_pct,
        },
        counter_update_ms,
    );
    let flags: Vec<String> = validity
        .flags
        .iter()
        .map(|f| format!("{}: {}", f.code.code(), f.detail))
        .collect();
    let unchecked: Vec<&str> = validity
        .unknown
        .iter()
        .filter(|c| **c != report::validity::Check::Cooldown)
        .map(|c| c.rule())
        .collect();
    serde_json::json!({
        "joules": m.counter_j,
        "seconds": m.seconds,
        "tokens": tokens,
        "mj_per_token": tokens.filter(|n| *n > 0).map(|n| m.counter_j * 1000.0 / n as f64),
        "trace_joules": trace_j,
        "counter_over_trace": ratio,
        "trace_samples": m.trace.as_ref().map(|t| t.samples.len()),
        "gpu_busy_pct": m.activity.gpu_busy_pct,
        "power_throttle_pct": m.activity.power_throttle_pct,
        "thermal_throttle_pct": m.activity.thermal_throttle_pct,
        "counter_update_ms": counter_update_ms,
        "flags": flags,
        "unchecked": unchecked,
    })
}

fn to_json<T: serde::Serialize>(v: &T) -> PyResult<String> {
    serde_json::to_string(v).map_err(runtime_error)
}

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn runtime_error(e: impl std::fmt::Display) -> PyErr {
    PyRuntimeError::new_err(e.to_string())
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run_cli, m)?)?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(estimate, m)?)?;
    m.add_function(wrap_pyfunction!(compare, m)?)?;
    m.add_class::<Meter>()?;
    m.add_class::<campaign::Campaign>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
