//! Serde types of the report contract (`data/energy.schema.json`).
//!
//! Every struct keeps the fields it does not know in an `extra` map (`#[serde(flatten)]`), so an
//! upstream report survives a parse → serialize round trip with nothing lost. Two normalisations
//! do happen: an optional field written as `null` comes back absent (the schema treats the two the
//! same), and an integer written where the contract has a float (`"params_b": 3`) comes back as
//! `3.0`.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::arch::{arch_from_gpu_name, Arch};
use crate::params::guess_params_b;
use crate::precision::Precision;

/// Unknown fields of one JSON object, kept in their original order.
pub type Extra = Map<String, Value>;

/// A required field whose value may be `null` (`"energy_per_token_mj": null`): serde's default for
/// `Option` would silently accept a missing field, this does not.
fn nullable<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d)
}

/// One energy report (`energy.json`), upstream `ecocompute-energy/1.0`, `/1.1` or ours
/// `quantenergy/1.2`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Report {
    pub schema_version: String,
    pub benchmark: String,
    /// `SingleStream` or `Offline` (checked by the schema and by [`crate::semantic_checks`]).
    pub scenario: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp_utc: Option<String>,
    pub system_under_test: SystemUnderTest,
    pub workload: Workload,
    pub measurement: Measurement,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measurement_source: Option<String>,
    pub results: Results,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<Quality>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<Stack>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy: Option<Energy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<Environment>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<Weights>,
    /// Every other top-level field (`software`, `provenance`, `notice`, …), kept as is.
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct SystemUnderTest {
    /// Card name as NVML reports it, e.g. `NVIDIA H200`.
    pub gpu: String,
    /// Architecture class, lower case (`hopper`); see [`Arch`].
    pub gpu_arch: String,
    pub accelerator_count: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Workload {
    pub model_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params_b: Option<f64>,
    /// `FP16`, `NF4`, `INT8`, `BF16`, `Q4_0`, … (see the schema's enum). Kept as text so that
    /// an unknown value is reported by the semantic checks at `$.workload.precision` next to
    /// the report's other problems; read it typed with [`Workload::parsed_precision`].
    pub precision: String,
    pub batch_size: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_length: Option<u32>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Measurement {
    pub method: String,
    pub sample_rate_hz: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_run: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<u64>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Results {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_energy_joules: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_generated: Option<u64>,
    /// mJ per generated token (== J per 1k tokens). Required, may be `null`.
    #[serde(deserialize_with = "nullable")]
    pub energy_per_token_mj: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp16_energy_per_token_mj: Option<f64>,
    /// Signed % vs FP16 as the report states it (negative = saves). Prefer
    /// [`Report::recomputed_delta_pct`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_fp16_energy_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_power_watts: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_tokens_per_s: Option<f64>,
    pub basis: Basis,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Where a figure comes from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Basis {
    Measured,
    Interpolated,
    Extrapolated,
    Unavailable,
}

impl Basis {
    pub const ALL: [Basis; 4] = [
        Basis::Measured,
        Basis::Interpolated,
        Basis::Extrapolated,
        Basis::Unavailable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Basis::Measured => "measured",
            Basis::Interpolated => "interpolated",
            Basis::Extrapolated => "extrapolated",
            Basis::Unavailable => "unavailable",
        }
    }
}

impl std::fmt::Display for Basis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `"guessed".parse::<Basis>()` fails with this.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown basis {0:?}: expected one of measured, interpolated, extrapolated, unavailable")]
pub struct ParseBasisError(pub String);

impl std::str::FromStr for Basis {
    type Err = ParseBasisError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Basis::ALL
            .into_iter()
            .find(|b| b.as_str() == s)
            .ok_or_else(|| ParseBasisError(s.to_string()))
    }
}

/// Perplexity probe (upstream schema 1.1). Numbers are kept as the report states them.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Quality {
    pub metric: String,
    /// `measured` or `unavailable`.
    pub basis: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp16_value: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_vs_fp16_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_nll: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_evaluated: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq_len: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corpus: Option<Corpus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Corpus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[cfg(test)]
impl Quality {
    /// A consistent perplexity block for tests: 10.5 vs FP16 10 (+5 %) over 511 tokens.
    pub(crate) fn sample() -> Self {
        Quality {
            metric: "perplexity".into(),
            basis: "measured".into(),
            value: Some(10.5),
            fp16_value: Some(10.0),
            delta_vs_fp16_pct: Some(5.0),
            tokens_evaluated: Some(511),
            corpus: Some(Corpus {
                name: Some("data/perplexity/us-founding-texts.txt".into()),
                sha256: Some(
                    "bce67aa074bf612d6ab80958cda9720bdfc2e5c9500203eed73882323c4266ad".into(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}

/// quantenergy/1.2: the software stack that ran the model.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Stack {
    /// `candle`, `transformers`, `llama.cpp`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_version: Option<String>,
    /// e.g. `candle GGUF q4_0 matmul`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// quantenergy/1.2: counter and trace energies side by side, sampling quality, idle power.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Energy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter_joules: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_joules: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter_over_trace_ratio: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_sample_rate_hz: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achieved_sample_rate_hz: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_reads: Option<u64>,
    /// Reported, never subtracted from the results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_power_watts: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_seconds: Option<f64>,
    /// `counter` or `trace`: which figure the results use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_iteration: Option<Vec<IterationEnergy>>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct IterationEnergy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter_joules: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_joules: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// quantenergy/1.2: the protocol actually used.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Protocol {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_iteration: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm_order: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooldown: Option<Cooldown>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arms: Option<Vec<Arm>>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Cooldown {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_power_watts: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_temp_c: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub converged: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Arm {
    pub precision: String,
    pub status: ArmStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum ArmStatus {
    Ok,
    Failed,
}

/// quantenergy/1.2: the device as NVML saw it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Environment {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_uuid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_limit_watts: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_mhz: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_clock_mhz: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_start_c: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_end_c: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_power_watts: Option<f64>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// quantenergy/1.2: which weights ran.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Weights {
    pub kind: WeightsKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<WeightFile>>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum WeightsKind {
    /// Real checkpoint files (path / hub id + sha256).
    Real,
    /// Random weights in a real architecture's shapes: a real measurement of a real-shaped model.
    Synthetic,
}

impl WeightsKind {
    pub fn as_str(self) -> &'static str {
        match self {
            WeightsKind::Real => "real",
            WeightsKind::Synthetic => "synthetic",
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct WeightFile {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl Workload {
    /// `precision` as the schema spells it, or `None` when it is not one of the schema's values
    /// (the semantic checks report that at `$.workload.precision`).
    pub fn parsed_precision(&self) -> Option<Precision> {
        Precision::from_schema(&self.precision)
    }
}

impl Report {
    /// `(energy − fp16) / fp16 × 100` from this report's own two energies, when both are finite
    /// and the FP16 energy is positive. This is the delta the page plots.
    pub fn recomputed_delta_pct(&self) -> Option<f64> {
        let e = self.results.energy_per_token_mj.filter(|x| x.is_finite())?;
        let f = self
            .results
            .fp16_energy_per_token_mj
            .filter(|x| x.is_finite() && *x > 0.0)?;
        let d = (e - f) / f * 100.0;
        d.is_finite().then_some(d)
    }

    /// The delta to show: recomputed when possible, else the stated `vs_fp16_energy_pct`.
    pub fn delta_pct(&self) -> Option<f64> {
        self.recomputed_delta_pct()
            .or(self.results.vs_fp16_energy_pct.filter(|x| x.is_finite()))
    }

    /// `workload.params_b` when it is a positive finite number, else the size guessed from the
    /// model name ([`guess_params_b`]).
    pub fn effective_params_b(&self) -> Option<f64> {
        self.workload
            .params_b
            .filter(|x| x.is_finite() && *x > 0.0)
            .or_else(|| guess_params_b(&self.workload.model_name))
    }

    /// `system_under_test.gpu_arch` when it names a known architecture (any case), else the
    /// architecture derived from the GPU name.
    pub fn effective_arch(&self) -> Option<Arch> {
        self.system_under_test
            .gpu_arch
            .parse::<Arch>()
            .ok()
            .or_else(|| arch_from_gpu_name(&self.system_under_test.gpu))
    }

    /// Serialize as pretty JSON (never fails for values built by this crate).
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}
