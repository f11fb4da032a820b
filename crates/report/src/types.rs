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
    /// `$.schema_version`: Free string: "quantenergy/1.2" for reports written by this project, "ecocompute-energy/1.0" or "/1.1" for upstream reports.
    pub schema_version: String,
    /// `$.benchmark`.
    pub benchmark: String,
    /// `SingleStream` or `Offline` (checked by the schema and by [`crate::semantic_checks`]).
    pub scenario: String,
    /// `$.timestamp_utc`: ISO 8601 time in UTC, e.g. 2026-11-30T12:00:00Z.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp_utc: Option<String>,
    /// `$.system_under_test`.
    pub system_under_test: SystemUnderTest,
    /// `$.workload`.
    pub workload: Workload,
    /// `$.measurement`.
    pub measurement: Measurement,
    /// `$.measurement_source`: Where the figures come from, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measurement_source: Option<String>,
    /// `$.results`.
    pub results: Results,
    /// `$.quality`: Optional (schema 1.1+). Perplexity of this run's model on a fixed text, scored after the power sampler stopped so it does not enter the energy figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<Quality>,
    /// `$.stack`: quantenergy/1.2. The software stack that ran the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<Stack>,
    /// `$.energy`: quantenergy/1.2. How the energy figure was obtained: the NVML energy counter and the integrated power trace side by side, sampling quality, and idle power.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy: Option<Energy>,
    /// `$.protocol`: quantenergy/1.2. The protocol actually used for this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
    /// `$.environment`: quantenergy/1.2. The device as NVML saw it during the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<Environment>,
    /// `$.weights`: quantenergy/1.2. Which weights ran. real: files identified by path or hub id and sha256. synthetic: random weights of a real architecture's shapes (a real measurement ….
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<Weights>,
    /// `$.validity`: quantenergy/1.2. Whether the energy windows can be trusted, as reason codes
    /// ([`crate::validity::assess`] of this report's own fields).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validity: Option<crate::validity::Validity>,
    /// Every other top-level field (`software`, `provenance`, `notice`, …), kept as is.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `$.system_under_test`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct SystemUnderTest {
    /// Card name as NVML reports it, e.g. `NVIDIA H200`.
    pub gpu: String,
    /// Architecture class, lower case (`hopper`); see [`Arch`].
    pub gpu_arch: String,
    /// `$.system_under_test.accelerator_count`.
    pub accelerator_count: u32,
    /// `$.system_under_test.host`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Every other field of this object, kept as is.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `$.workload`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Workload {
    /// `$.workload.model_name`.
    pub model_name: String,
    /// `$.workload.params_b`: Model size in billions of parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params_b: Option<f64>,
    /// `FP16`, `NF4`, `INT8`, `BF16`, `Q4_0`, … (see the schema's enum). Kept as text so that
    /// an unknown value is reported by the semantic checks at `$.workload.precision` next to
    /// the report's other problems; read it typed with [`Workload::parsed_precision`].
    pub precision: String,
    /// `$.workload.batch_size`.
    pub batch_size: u32,
    /// `$.workload.context_length`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_length: Option<u32>,
    /// `$.workload.context_depth`: a context run's tokens in the KV cache when the timed decode
    /// starts (its figures are then the decode's at that depth, the prefill's in
    /// `results.prefill`). Absent: each timed iteration was a whole generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_depth: Option<u32>,
    /// `$.workload.prompt_set`: a prompt-set run's requests (its figures are then the
    /// requests', end to end, the prefill's in `results.prefill`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_set: Option<PromptSetRef>,
    /// Every other field of this object, kept as is.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `$.workload.prompt_set`: which prompt set a run served, one pass of it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct PromptSetRef {
    /// The set's name.
    pub name: String,
    /// SHA-256 of the set's file: runs compare only over the same set.
    pub sha256: String,
    /// Requests in one pass.
    pub prompts: u32,
    /// Prompt tokens of one pass (per sequence).
    pub prompt_tokens: u64,
    /// Output tokens of one pass (per sequence).
    pub output_tokens: u64,
    /// The tokenizer the lengths are counted in.
    pub token_counts: String,
    /// Every other field of this object, kept as is.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `$.measurement`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Measurement {
    /// `$.measurement.method`.
    pub method: String,
    /// `$.measurement.sample_rate_hz`: Requested power sampling rate.
    pub sample_rate_hz: i64,
    /// `$.measurement.tokens_per_run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_run: Option<u64>,
    /// `$.measurement.iterations`: Decode iterations within this run; NOT a count of independent trials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u64>,
    /// `$.measurement.warmup`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<u64>,
    /// Every other field of this object, kept as is.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `$.results`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Results {
    /// `$.results.total_energy_joules`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_energy_joules: Option<f64>,
    /// `$.results.tokens_generated`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_generated: Option<u64>,
    /// mJ per generated token (== J per 1k tokens). Required, may be `null`.
    #[serde(deserialize_with = "nullable")]
    pub energy_per_token_mj: Option<f64>,
    /// `$.results.fp16_energy_per_token_mj`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp16_energy_per_token_mj: Option<f64>,
    /// Signed % vs FP16 as the report states it (negative = saves). Prefer
    /// [`Report::recomputed_delta_pct`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_fp16_energy_pct: Option<f64>,
    /// `$.results.avg_power_watts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_power_watts: Option<f64>,
    /// `$.results.throughput_tokens_per_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_tokens_per_s: Option<f64>,
    /// `$.results.basis`.
    pub basis: Basis,
    /// `$.results.note`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// `$.results.prefill`: a context run's prefill, measured in a window of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill: Option<Prefill>,
    /// `$.results.requests`: a prompt-set run's window of whole requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<Requests>,
    /// Every other field of this object, kept as is.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `$.results.requests`: a prompt-set run's whole requests (each a fresh prefill, then its output
/// tokens), whose window the other results describe end to end.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Requests {
    /// Requests served in the window.
    pub requests: u64,
    /// Passes over the set in the window.
    pub passes: u64,
    /// Counter energy per request, J.
    pub energy_per_request_joules: f64,
    /// Prompt tokens prefilled in the window.
    pub prompt_tokens: u64,
    /// The decode's share, mJ per output token: the window's energy less its prompt tokens at
    /// the prefill window's energy per prompt token. Derived from two windows, not measured
    /// alone; `None` where that difference is not positive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_energy_per_token_mj: Option<f64>,
    /// The 90th percentile of the prefill window's times to the first token, ms.
    pub time_to_first_token_p90_ms: f64,
    /// Every other field of this object, kept as is.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `$.results.prefill`: a context run's prefill window — prefills of the context's prompt back
/// to back between synchronizations, apart from the decode window the other results describe.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Prefill {
    /// Counter energy per prompt token, mJ.
    pub energy_per_prompt_token_mj: f64,
    /// Prompt tokens fed in the window (prefills · batch · depth).
    pub prompt_tokens: u64,
    /// Prefills in the window.
    pub prefills: u64,
    /// The window's length, s.
    pub window_seconds: f64,
    /// The energy counter over the window, J.
    pub counter_joules: f64,
    /// The power trace's integral over the window, J.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_joules: Option<f64>,
    /// Median time of one prefill: the time to the first token, ms.
    pub time_to_first_token_ms: f64,
    /// The FP16 arm's energy per prompt token in the same run, mJ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp16_energy_per_prompt_token_mj: Option<f64>,
    /// Signed % vs that FP16 prefill (negative = saves).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_fp16_energy_pct: Option<f64>,
    /// Every other field of this object, kept as is.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Where a figure comes from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Basis {
    /// Measured on the device this report names.
    Measured,
    /// Read off a fitted curve inside its measured range.
    Interpolated,
    /// Read off a curve outside its measured range, or off another architecture's curve.
    Extrapolated,
    /// No figure (a failed arm, no curve): never a zero.
    Unavailable,
}

impl Basis {
    /// Every basis, strongest first.
    pub const ALL: [Basis; 4] = [
        Basis::Measured,
        Basis::Interpolated,
        Basis::Extrapolated,
        Basis::Unavailable,
    ];

    /// The report's spelling (`measured`, …).
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
    /// `$.quality.metric`.
    pub metric: String,
    /// `measured` or `unavailable`.
    pub basis: String,
    /// `$.quality.value`: Perplexity on this corpus with this tokenizer; NOT comparable with published WikiText numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// `$.quality.fp16_value`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp16_value: Option<f64>,
    /// `$.quality.delta_vs_fp16_pct`: Signed % vs the FP16 baseline measured in the same run; positive = quantization made the model worse.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_vs_fp16_pct: Option<f64>,
    /// `$.quality.mean_nll`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_nll: Option<f64>,
    /// `$.quality.tokens_evaluated`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_evaluated: Option<i64>,
    /// `$.quality.windows`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<i64>,
    /// `$.quality.seq_len`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq_len: Option<i64>,
    /// `$.quality.corpus`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corpus: Option<Corpus>,
    /// `$.quality.error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `$.quality.note`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Most corpus tokens scored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<i64>,
    /// How the corpus was tokenized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenization: Option<String>,
    /// Why no Δ vs FP16 is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_note: Option<String>,
    /// Every other field of this object, kept as is.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `$.quality.corpus`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Corpus {
    /// `$.quality.corpus.name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `$.quality.corpus.bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<i64>,
    /// `$.quality.corpus.sha256`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Every other field of this object, kept as is.
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
    /// `$.stack.engine_version`: e.g. 0.11.1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_version: Option<String>,
    /// e.g. `candle GGUF q4_0 matmul`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// `$.stack.cuda`: CUDA toolkit version the engine was built with, e.g. 13.0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
    /// `$.stack.driver`: NVIDIA driver version, e.g. 580.159.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// `$.stack.serving`: set when the meter drove an inference server over HTTP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<Serving>,
    /// `$.stack.meter_build`: the quantenergy build that measured (version and commit, e.g.
    /// `0.1.0+bb201cc5f0a1`, `-dirty…` from a tree with changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meter_build: Option<String>,
    /// Every other field of this object, kept as is.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `started`: the meter started and stopped the server; `external`: someone else did.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ServingMode {
    /// The meter started the server for the arm (its command, load time and flags are known).
    Started,
    /// A server someone else started: its flags, other clients and load are unknown.
    External,
}

impl ServingMode {
    /// In words, as reports and tables say it.
    pub fn words(self) -> &'static str {
        match self {
            ServingMode::Started => "server started by the meter",
            ServingMode::External => "external server",
        }
    }
}

/// quantenergy/1.2 `$.stack.serving`: how the meter drove an inference server.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Serving {
    /// Who started the server.
    pub mode: ServingMode,
    /// The endpoint driven, e.g. `/v1/completions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// The server command line (started servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Concurrent streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// The model name the server answered with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_id: Option<String>,
    /// Where engine and version came from, e.g. `GET /props build_info`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identified_by: Option<String>,
    /// Every other field of this object, kept as is.
    #[serde(flatten)]
    pub extra: Extra,
}

/// How a server arm's output tokens were counted.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TokenCount {
    /// The server's usage fields, cross-checked against the streamed chunks.
    Usage,
    /// Streamed tokens (the server reported no usage).
    Stream,
}

/// quantenergy/1.2 `$.protocol.arms[].latency`: streamed latency of a server arm over its timed
/// iterations, and how its tokens were counted.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Latency {
    /// Requests in the timed iterations.
    pub requests: u64,
    /// Streamed chunks that carried output.
    pub streamed_chunks: u64,
    /// Output tokens from the server's usage fields (`None`: it reported none).
    #[serde(default)]
    pub usage_tokens: Option<u64>,
    /// Where the token count came from.
    pub counted_from: TokenCount,
    /// Time to first token, median, ms.
    pub ttft_ms_p50: f64,
    /// Time to first token, 90th percentile, ms.
    pub ttft_ms_p90: f64,
    /// Time to first token, mean, ms.
    pub ttft_ms_mean: f64,
    /// Gap between streamed chunks, median, ms.
    pub itl_ms_p50: f64,
    /// Gap between streamed chunks, 90th percentile, ms.
    pub itl_ms_p90: f64,
    /// Gap between streamed chunks, 99th percentile, ms.
    pub itl_ms_p99: f64,
    /// Time per output token after the first, mean over requests, ms.
    pub tpot_ms_mean: f64,
    /// Every other field of this object, kept as is.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `$.environment.slurm`: the Slurm job, array task, node and partition that made a report
/// (from the `SLURM_*` variables of the job's environment).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Slurm {
    /// `SLURM_JOB_ID`.
    pub job_id: String,
    /// `SLURM_ARRAY_JOB_ID`: the array this task belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_job_id: Option<String>,
    /// `SLURM_ARRAY_TASK_ID`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_task_id: Option<u32>,
    /// `SLURMD_NODENAME`: the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// `SLURM_JOB_PARTITION`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// `SLURM_CLUSTER_NAME`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// `SLURM_JOB_GPUS` / `SLURM_STEP_GPUS`: the GPUs Slurm bound, as it numbers them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<String>,
    /// Every other field of this object, kept as is.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One card of `$.environment.gpus`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct GpuRef {
    /// NVML index.
    pub index: u32,
    /// Card name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Card UUID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// Every other field of this object, kept as is.
    #[serde(flatten)]
    pub extra: Extra,
}

/// quantenergy/1.2: counter and trace energies side by side, sampling quality, idle power.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Energy {
    /// `$.energy.counter_joules`: Energy over the measured window from the NVML total-energy counter (difference of the readings at the window edges).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter_joules: Option<f64>,
    /// `$.energy.trace_joules`: Trapezoid integral of the sampled instantaneous power over the same window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_joules: Option<f64>,
    /// `$.energy.counter_over_trace_ratio`: counter_joules / trace_joules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter_over_trace_ratio: Option<f64>,
    /// `$.energy.requested_sample_rate_hz`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_sample_rate_hz: Option<f64>,
    /// `$.energy.achieved_sample_rate_hz`: samples / window_seconds actually achieved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achieved_sample_rate_hz: Option<f64>,
    /// `$.energy.samples`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<u64>,
    /// `$.energy.failed_reads`: Power reads that failed or were dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_reads: Option<u64>,
    /// Reported, never subtracted from the results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_power_watts: Option<f64>,
    /// `$.energy.window_seconds`: Length of the measured window (all timed iterations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_seconds: Option<f64>,
    /// How often the card's energy counter moved while idle (median interval between changes),
    /// ms: what a window's two counter reads can be off by, one period of energy each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter_update_ms: Option<f64>,
    /// `counter` or `trace`: which figure the results use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// `$.energy.per_iteration`: Optional per-iteration breakdown of the measured window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_iteration: Option<Vec<IterationEnergy>>,
    /// Every other field of this object, kept as is.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `$.energy.per_iteration[]`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct IterationEnergy {
    /// `$.energy.per_iteration[].index`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
    /// `$.energy.per_iteration[].counter_joules`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter_joules: Option<f64>,
    /// `$.energy.per_iteration[].trace_joules`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_joules: Option<f64>,
    /// `$.energy.per_iteration[].seconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// `$.energy.per_iteration[].tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Every other field of this object, kept as is.
    #[serde(flatten)]
    pub extra: Extra,
}

/// quantenergy/1.2: the protocol actually used.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Protocol {
    /// `$.protocol.warmup`: Untimed warmup generations before each arm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<u32>,
    /// `$.protocol.iterations`: Timed generations integrated into one total (not independent trials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u32>,
    /// `$.protocol.tokens_per_iteration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_iteration: Option<u32>,
    /// `$.protocol.arm_order`: Precisions in the order they actually ran, e.g. ["Q4_0", "FP16"].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm_order: Option<Vec<String>>,
    /// `$.protocol.seed`: Seed of the arm-order shuffle (and of synthetic weights unless weights.seed says otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// `$.protocol.cooldown`: Cooldown before each arm: wait until power and temperature are back near idle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooldown: Option<Cooldown>,
    /// `$.protocol.arms`: Every arm of the run and whether it succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arms: Option<Vec<Arm>>,
    /// The pre-flight memory check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preflight: Option<Preflight>,
    /// `$.protocol.session`: the measurement session (a sweep plan's `session`); `aggregate`
    /// never pools runs of different sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Every other field of this object, kept as is.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `$.protocol.cooldown`: Cooldown before each arm: wait until power and temperature are back near idle.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Cooldown {
    /// `$.protocol.cooldown.target_power_watts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_power_watts: Option<f64>,
    /// `$.protocol.cooldown.target_temp_c`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_temp_c: Option<f64>,
    /// `$.protocol.cooldown.converged`: False when the time limit ran out before the targets were reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub converged: Option<bool>,
    /// `$.protocol.cooldown.seconds`: Time spent cooling down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// Every other field of this object, kept as is.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One arm of a run (quantenergy/1.2 `protocol.arms[]`): its status and, when it succeeded, its
/// own figures, so a campaign can aggregate every arm of every run without re-measuring.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Arm {
    /// The arm's precision (schema spelling, e.g. `FP16`, `Q4_K`).
    pub precision: String,
    /// Whether the arm produced figures.
    pub status: ArmStatus,
    /// Why the arm failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Counter energy per generated token, mJ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_per_token_mj: Option<f64>,
    /// The power trace's integral per generated token, mJ (cross-check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_energy_per_token_mj: Option<f64>,
    /// Energy counter over the timed window, J.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter_joules: Option<f64>,
    /// Trapezoid integral of the power trace over the same window, J.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_joules: Option<f64>,
    /// `counter_joules / trace_joules`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter_over_trace_ratio: Option<f64>,
    /// Generated tokens per second over the window (summed over the batch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_tokens_per_s: Option<f64>,
    /// Bytes of weights a decode step reads, per generated token (the step's bytes ÷ the batch;
    /// exact at batch 1): every weight tensor as the engine holds it, the token-embedding table
    /// one row per sequence unless the LM head reads the whole of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_bytes_per_token: Option<u64>,
    /// `weight_bytes_per_token × throughput_tokens_per_s ÷` the card's memory bandwidth: the
    /// share of the HBM roofline the weight reads alone reach. Absent when the card is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hbm_roofline_fraction: Option<f64>,
    /// Counter energy ÷ window seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_power_watts: Option<f64>,
    /// Length of the one synchronized window around the timed iterations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_seconds: Option<f64>,
    /// Tokens generated in the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_generated: Option<u64>,
    /// Power-trace samples in the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<u64>,
    /// Power reads that failed in the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_reads: Option<u64>,
    /// Achieved power-trace rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achieved_sample_rate_hz: Option<f64>,
    /// Seconds of each timed iteration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration_seconds: Option<Vec<f64>>,
    /// Coefficient of variation of the iteration times, %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration_time_cv_pct: Option<f64>,
    /// Seconds to load the arm's model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_seconds: Option<f64>,
    /// Hypervisor steal over the window, % of the host's CPU time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cpu_steal_pct: Option<f64>,
    /// CPU cores the process used over the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_cpu_cores: Option<f64>,
    /// Mean NVML GPU utilisation over the window, %: the share of time a kernel ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_busy_pct: Option<f64>,
    /// Share of the window a power limit held the clocks down (NVML violation time), %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_throttle_pct: Option<f64>,
    /// Share of the window a thermal limit held the clocks down (NVML violation time), %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thermal_throttle_pct: Option<f64>,
    /// What ran the matmuls (e.g. `candle Q4_K mmvq`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// What the engine had to say about this arm (e.g. per-tensor format fallbacks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<Vec<String>>,
    /// The cooldown before this arm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooldown: Option<Cooldown>,
    /// GPU temperature when the window opened, °C.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_start_c: Option<f64>,
    /// GPU temperature when the window closed, °C.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_end_c: Option<f64>,
    /// This arm's perplexity, when the run scored it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perplexity: Option<ArmPerplexity>,
    /// Streamed latency (server arms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
    /// Every other field of this object, kept as is.
    #[serde(flatten)]
    pub extra: Extra,
}

impl Arm {
    /// A failed arm with its reason (no figures).
    pub fn failed(precision: impl Into<String>, error: impl Into<String>) -> Arm {
        Arm {
            precision: precision.into(),
            status: ArmStatus::Failed,
            error: Some(error.into()),
            ..Arm::ok(String::new())
        }
    }

    /// A succeeded arm with no figures yet (fill them in with struct update syntax).
    pub fn ok(precision: impl Into<String>) -> Arm {
        Arm {
            precision: precision.into(),
            status: ArmStatus::Ok,
            error: None,
            energy_per_token_mj: None,
            trace_energy_per_token_mj: None,
            counter_joules: None,
            trace_joules: None,
            counter_over_trace_ratio: None,
            throughput_tokens_per_s: None,
            weight_bytes_per_token: None,
            hbm_roofline_fraction: None,
            avg_power_watts: None,
            window_seconds: None,
            tokens_generated: None,
            samples: None,
            failed_reads: None,
            achieved_sample_rate_hz: None,
            iteration_seconds: None,
            iteration_time_cv_pct: None,
            load_seconds: None,
            host_cpu_steal_pct: None,
            process_cpu_cores: None,
            gpu_busy_pct: None,
            power_throttle_pct: None,
            thermal_throttle_pct: None,
            kernel: None,
            notes: None,
            cooldown: None,
            temperature_start_c: None,
            temperature_end_c: None,
            perplexity: None,
            latency: None,
            extra: Extra::new(),
        }
    }
}

/// An arm's perplexity: the score, or why it could not be scored.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct ArmPerplexity {
    /// exp(mean NLL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// Mean negative log-likelihood per predicted token (nats).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_nll: Option<f64>,
    /// Predicted tokens scored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_evaluated: Option<u64>,
    /// Why the arm was not scored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Every other field of this object, kept as is.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `$.protocol.arms[].status`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum ArmStatus {
    /// The arm ran and its window closed.
    Ok,
    /// The arm failed (see `error`); it yields no figure.
    Failed,
}

/// The pre-flight check: the largest arm's memory need against the free VRAM.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Preflight {
    /// Free VRAM before loading, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_vram_bytes: Option<u64>,
    /// What the largest arm needs, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_vram_bytes: Option<u64>,
    /// The share of free VRAM a run may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_fraction: Option<f64>,
    /// Every other field of this object, kept as is.
    #[serde(flatten)]
    pub extra: Extra,
}

/// quantenergy/1.2: the device as NVML saw it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Environment {
    /// `$.environment.gpu_uuid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_uuid: Option<String>,
    /// `$.environment.gpu_name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_name: Option<String>,
    /// `$.environment.driver`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// `$.environment.cuda`: CUDA version the driver supports, e.g. 13.0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
    /// `$.environment.power_limit_watts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_limit_watts: Option<f64>,
    /// `$.environment.sm_clock_mhz`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_mhz: Option<f64>,
    /// `$.environment.mem_clock_mhz`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_clock_mhz: Option<f64>,
    /// `$.environment.temperature_start_c`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_start_c: Option<f64>,
    /// `$.environment.temperature_end_c`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_end_c: Option<f64>,
    /// `$.environment.idle_power_watts`: Idle power of the card; reported, not subtracted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_power_watts: Option<f64>,
    /// GPU temperature at the idle reference, °C.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_temperature_c: Option<f64>,
    /// Every card whose counter was summed (multi-GPU server runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<Vec<GpuRef>>,
    /// `$.environment.visible_devices`: `CUDA_VISIBLE_DEVICES` as the process saw it (a
    /// scheduler's GPU binding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visible_devices: Option<String>,
    /// `$.environment.slurm`: where a Slurm job ran the measurement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<Slurm>,
    /// Every other field of this object, kept as is.
    #[serde(flatten)]
    pub extra: Extra,
}

/// quantenergy/1.2: which weights ran.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Weights {
    /// `$.weights.kind`.
    pub kind: WeightsKind,
    /// `$.weights.architecture`: e.g. qwen2; the shapes used for synthetic weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    /// `$.weights.seed`: Seed of synthetic weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// `$.weights.path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// `$.weights.hub_id`: e.g. Qwen/Qwen2-0.5B.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub_id: Option<String>,
    /// `$.weights.files`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<WeightFile>>,
    /// Synthetic quantized arms were quantized from the float arms' weights (same model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantized_from_float: Option<bool>,
    /// What the weights are, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Every other field of this object, kept as is.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `$.weights.kind`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum WeightsKind {
    /// Real checkpoint files (path / hub id + sha256).
    Real,
    /// Random weights in a real architecture's shapes: a real measurement of a real-shaped model.
    Synthetic,
}

impl WeightsKind {
    /// The report's spelling (`real`, `synthetic`).
    pub fn as_str(self) -> &'static str {
        match self {
            WeightsKind::Real => "real",
            WeightsKind::Synthetic => "synthetic",
        }
    }
}

/// `$.weights.files[]`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct WeightFile {
    /// `$.weights.files[].name`.
    pub name: String,
    /// `$.weights.files[].sha256`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// `$.weights.files[].bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Every other field of this object, kept as is.
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
            .filter(|x| x.is_finite() && *x > 0.0 && *x <= crate::params::MAX_PARAMS_B)
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
