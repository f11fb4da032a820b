//! `quantenergy.Campaign`: the meter's whole protocol over the user's Python code — idle
//! reference, cooldowns, counterbalanced arms, warm-ups, windows of at least `min_window_s`, the
//! FP16 arm as baseline — through `meter::protocol::run` and `run_report::build_report`, the code
//! `quantenergy measure` runs; the reports are the CLI's, written atomically.

use meter::decoder::{DecodeError, Decoder, DecoderFactory};
use meter::files::{hostname, report_path, utc_now, write_report};
use meter::meter::RealClock;
use meter::protocol::{ArmOrder, CooldownConfig, ProtocolConfig};
use meter::run_report::{build_report, RunContext, WeightsInfo};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use report::Precision;
use std::path::PathBuf;
use std::sync::Arc;

/// A Python exception raised inside an arm, kept in words for the report and the caller.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct PythonError(String);

fn py_err(py: Python<'_>, e: PyErr) -> DecodeError {
    let tb = e
        .traceback(py)
        .and_then(|t| t.format().ok())
        .unwrap_or_default();
    DecodeError::backend(PythonError(format!(
        "{e}{}",
        if tb.is_empty() {
            String::new()
        } else {
            format!("\n{tb}")
        }
    )))
}

/// The arms: `load(precision)` returns an object with `generate(batch, prompt_len, new_tokens)`
/// (the tokens it generated: batch × new_tokens) and, optionally, `synchronize()`, a `kernel`
/// string and `weight_bytes_per_step` (the bytes of weights one decode step reads, as the arm
/// holds them: the report's roofline share comes from it, and is left out without it).
struct PyFactory {
    load: Py<PyAny>,
    weight_bytes: std::collections::HashMap<Precision, u64>,
}

struct PyArm {
    arm: Py<PyAny>,
    kernel: String,
}

impl DecoderFactory for PyFactory {
    fn load(&mut self, precision: Precision) -> Result<Box<dyn Decoder>, DecodeError> {
        Python::attach(|py| {
            let arm = self
                .load
                .call1(py, (precision.as_str(),))
                .map_err(|e| py_err(py, e))?;
            let kernel = arm
                .getattr(py, "kernel")
                .and_then(|k| k.extract::<String>(py))
                .unwrap_or_else(|_| "the caller's Python code".into());
            match arm.getattr(py, "weight_bytes_per_step") {
                Ok(b) => {
                    let bytes = b
                        .extract::<u64>(py)
                        .ok()
                        .filter(|b| *b > 0)
                        .ok_or_else(|| {
                            DecodeError::backend(PythonError(
                                "weight_bytes_per_step: a positive integer of bytes".into(),
                            ))
                        })?;
                    self.weight_bytes.insert(precision, bytes);
                }
                Err(_) => {
                    self.weight_bytes.remove(&precision);
                }
            }
            Ok(Box::new(PyArm { arm, kernel }) as Box<dyn Decoder>)
        })
    }

    fn required_bytes(&self, _: Precision, _: usize, _: usize) -> u64 {
        0 // the caller's code loads its own weights: no VRAM check can be made for it
    }

    fn tokenize(&self, _: &str) -> Result<(Vec<u32>, String), DecodeError> {
        Err(DecodeError::backend(PythonError(
            "a Campaign scores no perplexity (the caller's model has no tokenizer here)".into(),
        )))
    }

    fn decode_weight_bytes(
        &self,
        precision: Precision,
    ) -> Option<meter::roofline::DecodeWeightBytes> {
        self.weight_bytes
            .get(&precision)
            .map(|&per_step| meter::roofline::DecodeWeightBytes {
                per_step,
                per_sequence: 0,
            })
    }
}

impl Decoder for PyArm {
    fn generate(
        &mut self,
        batch: usize,
        prompt_len: usize,
        new_tokens: usize,
    ) -> Result<usize, DecodeError> {
        Python::attach(|py| {
            self.arm
                .call_method1(py, "generate", (batch, prompt_len, new_tokens))
                .and_then(|n| n.extract::<usize>(py))
                .map_err(|e| py_err(py, e))
        })
    }

    fn synchronize(&mut self) -> Result<(), DecodeError> {
        Python::attach(|py| match self.arm.getattr(py, "synchronize") {
            Ok(f) => f.call0(py).map(|_| ()).map_err(|e| py_err(py, e)),
            Err(_) => Ok(()), // no method: `generate` returns with the device idle
        })
    }

    fn kernel(&self) -> String {
        self.kernel.clone()
    }

    fn nll(&mut self, _: &[u32]) -> Result<f64, DecodeError> {
        Err(DecodeError::backend(PythonError(
            "a Campaign scores no perplexity".into(),
        )))
    }
}

/// A measurement campaign over Python arms; `run(load, out)` writes one `energy.json` per arm.
#[pyclass(unsendable)]
pub struct Campaign {
    cfg: ProtocolConfig,
    model: String,
    params_b: f64,
    stack: String,
    stack_version: String,
    gpus: Option<Vec<u32>>,
    fake: bool,
    synthetic_seed: Option<u64>,
}

#[pymethods]
impl Campaign {
    #[new]
    #[pyo3(signature = (model, params_b, precisions, stack, stack_version="", tokens=256, warmup=2,
        iterations=10, batch=1, prompt_len=16, order="balanced", repeat=1, seed=0, min_window_s=5.0,
        cooldown_max_s=60.0, session=None, gpus=None, fake=false, synthetic_seed=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        model: String,
        params_b: f64,
        precisions: Vec<String>,
        stack: String,
        stack_version: &str,
        tokens: usize,
        warmup: usize,
        iterations: usize,
        batch: usize,
        prompt_len: usize,
        order: &str,
        repeat: usize,
        seed: u64,
        min_window_s: f64,
        cooldown_max_s: f64,
        session: Option<String>,
        gpus: Option<Vec<u32>>,
        fake: bool,
        synthetic_seed: Option<u64>,
    ) -> PyResult<Campaign> {
        let precisions: Vec<Precision> = precisions
            .iter()
            .map(|p| {
                p.parse::<Precision>()
                    .map_err(|e| PyValueError::new_err(format!("precisions: {e}")))
            })
            .collect::<PyResult<_>>()?;
        if precisions.is_empty() {
            return Err(PyValueError::new_err("precisions: name at least one"));
        }
        if !(params_b.is_finite() && params_b > 0.0 && params_b <= report::MAX_PARAMS_B) {
            return Err(PyValueError::new_err(format!(
                "params_b: a positive number of billions, got {params_b}"
            )));
        }
        for (name, v, max) in [
            ("tokens", tokens, 1 << 20),
            ("iterations", iterations, 100_000),
            ("batch", batch, 4096),
        ] {
            if v == 0 || v > max {
                return Err(PyValueError::new_err(format!(
                    "{name}: 1 to {max}, got {v}"
                )));
            }
        }
        if !(0.0..=3600.0).contains(&min_window_s) || !(0.0..=3600.0).contains(&cooldown_max_s) {
            return Err(PyValueError::new_err(
                "min_window_s and cooldown_max_s: 0 to 3600 s",
            ));
        }
        let order = match order {
            "balanced" => ArmOrder::Balanced {
                seed,
                repeat: repeat.max(1),
            },
            "seeded" => ArmOrder::Seeded,
            other => {
                return Err(PyValueError::new_err(format!(
                    "order: balanced or seeded, got {other:?}"
                )))
            }
        };
        let baseline = [Precision::Fp16, Precision::Bf16]
            .into_iter()
            .find(|b| precisions.contains(b));
        Ok(Campaign {
            cfg: ProtocolConfig {
                precisions,
                baseline,
                tokens,
                iterations,
                warmup,
                batch,
                prompt_len,
                seed,
                cooldown: CooldownConfig {
                    max_s: cooldown_max_s,
                    ..CooldownConfig::default()
                },
                session,
                order,
                min_window_s,
                ..ProtocolConfig::default()
            },
            model,
            params_b,
            stack,
            stack_version: stack_version.to_string(),
            gpus,
            fake,
            synthetic_seed,
        })
    }

    /// Run every arm (`load(precision)` each) and write the reports under `out`; returns their
    /// paths. A failing arm is recorded as failed in the reports, as the CLI records it.
    #[pyo3(signature = (load, out=PathBuf::from("reports"), name=None))]
    fn run(&self, load: Py<PyAny>, out: PathBuf, name: Option<String>) -> PyResult<Vec<String>> {
        let (mut meter, _) = crate::open_meter(self.gpus.clone(), self.fake)?;
        let mut factory = PyFactory {
            load,
            weight_bytes: Default::default(),
        };
        let outcome = meter::protocol::run(
            &self.cfg,
            meter.as_mut(),
            &mut factory,
            Arc::new(RealClock::default()),
        )
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        std::fs::create_dir_all(&out)
            .map_err(|e| PyRuntimeError::new_err(format!("{}: {e}", out.display())))?;
        let ctx = RunContext {
            model_name: self.model.clone(),
            params_b: self.params_b,
            // The reports say which weights these are: seeded random ones at the model's shapes
            // (`synthetic_seed`), else the caller's real checkpoint.
            weights: match self.synthetic_seed {
                Some(seed) => WeightsInfo::Synthetic {
                    architecture: self.model.clone(),
                    seed,
                    quantized_from_float: false,
                },
                None => WeightsInfo::Real {
                    path: "loaded by the caller's Python code".into(),
                    files: Vec::new(),
                },
            },
            engine: self.stack.clone(),
            engine_version: self.stack_version.clone(),
            timestamp_utc: utc_now(),
            host: hostname(),
        };
        let mut written = Vec::new();
        for &p in &self.cfg.precisions {
            let mut rep = build_report(&self.cfg, &outcome, &ctx, p)
                .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
            let path = report_path(
                &out,
                name.as_deref(),
                self.cfg.precisions.len() > 1,
                (&self.model, p, self.cfg.batch),
                "",
                "",
            );
            write_report(&path, &mut rep).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
            written.push(path.display().to_string());
        }
        Ok(written)
    }
}
