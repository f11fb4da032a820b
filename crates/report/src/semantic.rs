//! Checks the schema cannot express: a delta that disagrees with its own energies, a "measured"
//! figure that was not measured, silent zeros, sizes and architectures the page cannot place.
//!
//! These also repeat the schema's enum / minimum checks on the typed report, so the verdict does
//! not depend on the `schema` feature (the pipeline drops a repeat when the schema already
//! reported the same path).

use crate::arch::{arch_from_gpu_name, Arch};
use crate::describe::{fmt_num, shorten};
use crate::params::{guess_params_b, MAX_PARAMS_B};
use crate::precision::Precision;
use crate::types::{ArmStatus, Basis, Report, WeightsKind};
use crate::Issue;

/// Values of `scenario` the schema accepts.
pub const SCENARIOS: [&str; 2] = ["SingleStream", "Offline"];

/// A stated delta may differ from the recomputed one by this many percentage points.
pub const DELTA_TOLERANCE_PCT: f64 = 0.5;

/// Phrases (lower case) in `measurement_source`, `measurement.method` or `results.note` that say
/// the figure was not measured on the device.
const NOT_MEASURED_HINTS: [&str; 9] = [
    "no local gpu",
    "no on-device",
    "reference estimate",
    "dataset",
    "illustrative",
    "synthetic values",
    "not a real measurement",
    "not from a real run",
    "not a fresh on-device",
];

/// `+11.3` / `-0.42`: a signed number as written, for messages.
fn signed(x: f64) -> String {
    if x >= 0.0 {
        format!("+{}", fmt_num(x))
    } else {
        fmt_num(x)
    }
}

struct Out {
    errors: Vec<Issue>,
    warnings: Vec<Issue>,
}

impl Out {
    fn error(&mut self, path: &str, msg: impl Into<String>) {
        self.errors.push(Issue::new(path, msg));
    }
    fn warn(&mut self, path: &str, msg: impl Into<String>) {
        self.warnings.push(Issue::new(path, msg));
    }

    /// A non-negative finite number (or absent).
    fn non_negative(&mut self, path: &str, v: Option<f64>) {
        match v {
            Some(x) if !x.is_finite() => self.error(
                path,
                format!("{x} is not a finite number; expected a number ≥ 0 or null (NaN/Infinity are not JSON numbers)"),
            ),
            Some(x) if x < 0.0 => self.error(
                path,
                format!("{} is negative; expected a number ≥ 0 or null", fmt_num(x)),
            ),
            _ => {}
        }
    }
}

/// Semantic checks of a typed report: `(errors, warnings)`. Every message says what was expected.
pub fn semantic_checks(r: &Report) -> (Vec<Issue>, Vec<Issue>) {
    let mut o = Out {
        errors: Vec::new(),
        warnings: Vec::new(),
    };
    check_labels(r, &mut o);
    check_results(r, &mut o);
    check_delta(r, &mut o);
    check_provenance(r, &mut o);
    check_params(r, &mut o);
    check_arch(r, &mut o);
    check_blocks(r, &mut o);
    check_quality(r, &mut o);
    check_validity(r, &mut o);
    check_prompt_set(r, &mut o);
    (o.errors, o.warnings)
}

/// A prompt-set run's blocks agree: no context depth beside the set, and a measured one has its
/// prefill window and its requests, whose count is whole passes over the set.
fn check_prompt_set(r: &Report, o: &mut Out) {
    let Some(set) = &r.workload.prompt_set else {
        if r.results.requests.is_some() {
            o.error(
                "$.results.requests",
                "present without $.workload.prompt_set; expected both or neither",
            );
        }
        return;
    };
    if r.workload.context_depth.is_some() {
        o.error(
            "$.workload.context_depth",
            "present beside $.workload.prompt_set; a run serves a prompt set or decodes at one depth, not both",
        );
    }
    if r.results.basis != Basis::Measured {
        return;
    }
    if r.results.prefill.is_none() {
        o.error(
            "$.results.prefill",
            "missing; a measured prompt-set run has its prefill window",
        );
    }
    match &r.results.requests {
        None => o.error(
            "$.results.requests",
            "missing; a measured prompt-set run has its requests' window",
        ),
        Some(q) if q.requests != q.passes * u64::from(set.prompts) => o.error(
            "$.results.requests.requests",
            format!(
                "{} is not {} passes × {} prompts; expected whole passes over the set",
                q.requests, q.passes, set.prompts
            ),
        ),
        Some(_) => {}
    }
}

/// A `validity` block must be what the report's own fields give: a hand-edited "valid" over a
/// 2 s window is an error, not a trusted figure.
fn check_validity(r: &Report, o: &mut Out) {
    let Some(stated) = &r.validity else { return };
    let derived = crate::validity::assess(r);
    if *stated != derived {
        let said = |v: &crate::validity::Validity| {
            let codes: Vec<&str> = v.flags.iter().map(|f| f.code.code()).collect();
            format!("{:?} [{}]", v.status, codes.join(", ")).to_lowercase()
        };
        o.error(
            "$.validity",
            format!(
                "says {}, but the report's own fields give {}; expected the block `quantenergy validate --write-validity` writes",
                said(stated),
                said(&derived)
            ),
        );
    }
}

/// The perplexity block: figures consistent with each other, and a corpus to compare by.
fn check_quality(r: &Report, o: &mut Out) {
    let Some(q) = &r.quality else { return };
    for (name, v) in [
        ("value", q.value),
        ("fp16_value", q.fp16_value),
        ("mean_nll", q.mean_nll),
    ] {
        o.non_negative(&format!("$.quality.{name}"), v);
    }
    if q.basis == "measured" && q.value.is_none() {
        o.warn(
            "$.quality.value",
            "absent while basis is \"measured\"; expected the perplexity, or basis \"unavailable\" with an error",
        );
    }
    if let Some(v) = q.value.filter(|v| v.is_finite() && *v < 1.0) {
        o.warn(
            "$.quality.value",
            format!(
                "{}: a perplexity is at least 1; expected a value ≥ 1",
                fmt_num(v)
            ),
        );
    }
    if let (Some(v), Some(f), Some(d)) = (q.value, q.fp16_value, q.delta_vs_fp16_pct) {
        let recomputed = (v / f - 1.0) * 100.0;
        // Perplexity Δs are small (0.01–5 %), so the energy Δ's 0.5-point tolerance would let a
        // flipped sign through; allow only for rounding of the two values.
        let tolerance = 0.05 + 1e-3 * d.abs();
        if f > 0.0 && recomputed.is_finite() && d.is_finite() && (recomputed - d).abs() > tolerance
        {
            o.warn(
                "$.quality.delta_vs_fp16_pct",
                format!(
                    "{}, but value / fp16_value gives {}; expected them to agree",
                    signed(d),
                    signed(recomputed)
                ),
            );
        }
    }
    if let Some(h) = q
        .corpus
        .as_ref()
        .and_then(|c| c.sha256.as_deref())
        .filter(|h| !is_sha256(h))
    {
        o.error(
            "$.quality.corpus.sha256",
            format!(
                "{:?} is not a SHA-256; expected 64 hexadecimal digits",
                shorten(h, 70)
            ),
        );
    }
    if q.delta_vs_fp16_pct.is_some() && q.corpus.as_ref().and_then(|c| c.sha256.as_ref()).is_none()
    {
        o.warn(
            "$.quality.corpus",
            "a Δ perplexity without the corpus's sha256; expected it — only runs on the same text can be compared",
        );
    }
}

fn check_labels(r: &Report, o: &mut Out) {
    if !SCENARIOS.contains(&r.scenario.as_str()) {
        o.error(
            "$.scenario",
            format!(
                "{:?} is not a scenario; expected \"SingleStream\" or \"Offline\"",
                shorten(&r.scenario, 60)
            ),
        );
    }
    if Precision::from_schema(&r.workload.precision).is_none() {
        o.error(
            "$.workload.precision",
            format!(
                "{:?} is not a known precision; expected one of {}",
                shorten(&r.workload.precision, 60),
                Precision::ALL.map(Precision::as_str).join(", ")
            ),
        );
    }
    if r.workload.batch_size == 0 {
        o.error("$.workload.batch_size", "0; expected an integer ≥ 1");
    }
    if r.system_under_test.accelerator_count == 0 {
        o.error(
            "$.system_under_test.accelerator_count",
            "0; expected an integer ≥ 1",
        );
    }
    let v = r.schema_version.as_str();
    if !(v.starts_with("ecocompute-energy/") || v.starts_with("quantenergy/")) {
        o.warn(
            "$.schema_version",
            format!(
                "{:?} is not a version this page knows; expected \"quantenergy/1.2\" or \"ecocompute-energy/1.x\" (read as if it were one)",
                shorten(v, 60)
            ),
        );
    }
}

fn check_results(r: &Report, o: &mut Out) {
    let res = &r.results;
    o.non_negative("$.results.total_energy_joules", res.total_energy_joules);
    o.non_negative("$.results.energy_per_token_mj", res.energy_per_token_mj);
    o.non_negative(
        "$.results.fp16_energy_per_token_mj",
        res.fp16_energy_per_token_mj,
    );
    o.non_negative("$.results.avg_power_watts", res.avg_power_watts);
    o.non_negative(
        "$.results.throughput_tokens_per_s",
        res.throughput_tokens_per_s,
    );
    if let Some(d) = res.vs_fp16_energy_pct.filter(|d| !d.is_finite()) {
        o.error(
            "$.results.vs_fp16_energy_pct",
            format!("{d} is not a finite number; expected a signed percentage or null"),
        );
    }
    let measured = res.basis == Basis::Measured;
    match res.energy_per_token_mj {
        None if measured => o.error(
            "$.results.energy_per_token_mj",
            "null, but basis is \"measured\"; expected the measured mJ per token (or a basis of \"unavailable\")",
        ),
        Some(0.0) if measured => o.error(
            "$.results.energy_per_token_mj",
            "0 with basis \"measured\": a silent zero; expected a positive energy per token (or null with basis \"unavailable\")",
        ),
        Some(0.0) => o.warn(
            "$.results.energy_per_token_mj",
            "0; expected a positive energy per token or null — the page will not plot a zero",
        ),
        Some(_) if res.basis == Basis::Unavailable => o.warn(
            "$.results.basis",
            "\"unavailable\" but an energy per token is given; expected null energies with this basis — the page will not plot it",
        ),
        _ => {}
    }
    if res.fp16_energy_per_token_mj == Some(0.0) {
        o.error(
            "$.results.fp16_energy_per_token_mj",
            "0 cannot be a baseline; expected a positive FP16 energy per token or null",
        );
    }
    // total / tokens must give the per-token figure (J / tokens × 1000 = mJ per token).
    if let (Some(total), Some(tokens), Some(e)) = (
        res.total_energy_joules,
        res.tokens_generated,
        res.energy_per_token_mj,
    ) {
        if tokens > 0 && total.is_finite() && e.is_finite() && e > 0.0 {
            let implied = total / tokens as f64 * 1000.0;
            if (implied - e).abs() / e > 0.01 {
                o.warn(
                    "$.results.energy_per_token_mj",
                    format!(
                        "{} mJ/token, but total_energy_joules / tokens_generated gives {:.2} mJ/token ({} J / {tokens} tokens); expected them to agree within 1 %",
                        fmt_num(e),
                        implied,
                        fmt_num(total)
                    ),
                );
            }
        }
    }
    // power / throughput must give the per-token figure for gross energies.
    if let (Some(p), Some(t), Some(e)) = (
        res.avg_power_watts,
        res.throughput_tokens_per_s,
        res.energy_per_token_mj,
    ) {
        if p.is_finite() && t.is_finite() && t > 0.0 && e.is_finite() && e > 0.0 {
            let implied = p / t * 1000.0;
            if (implied - e).abs() / e > 0.05 {
                o.warn(
                    "$.results.energy_per_token_mj",
                    format!(
                        "{} mJ/token, but avg_power_watts / throughput_tokens_per_s gives {:.1} mJ/token ({} W / {} tok/s); expected them to agree within 5 % (was idle power subtracted? it must not be)",
                        fmt_num(e),
                        implied,
                        fmt_num(p),
                        fmt_num(t)
                    ),
                );
            }
        }
    }
}

fn check_delta(r: &Report, o: &mut Out) {
    let res = &r.results;
    let stated = res.vs_fp16_energy_pct.filter(|d| d.is_finite());
    let recomputed = r.recomputed_delta_pct();
    match (stated, recomputed) {
        (Some(s), Some(c)) if (s - c).abs() > DELTA_TOLERANCE_PCT => {
            let e = res.energy_per_token_mj.unwrap_or(f64::NAN);
            let f = res.fp16_energy_per_token_mj.unwrap_or(f64::NAN);
            o.warn(
                "$.results.vs_fp16_energy_pct",
                format!(
                    "reported {} %, but the energies give {:+.2} % (({} − {}) / {} × 100); expected them to agree within {} points — the page uses the recomputed value",
                    signed(s),
                    c,
                    fmt_num(e),
                    fmt_num(f),
                    fmt_num(f),
                    DELTA_TOLERANCE_PCT
                ),
            );
        }
        (Some(s), None) if r.workload.precision != "FP16" => o.warn(
            "$.results.vs_fp16_energy_pct",
            format!(
                "reported {} % cannot be checked: expected both energy_per_token_mj and a positive fp16_energy_per_token_mj in the same report — the page shows it as unverified",
                signed(s)
            ),
        ),
        _ => {}
    }
    if r.workload.precision == "FP16" {
        if let Some(d) = r.delta_pct().filter(|d| d.abs() > DELTA_TOLERANCE_PCT) {
            o.warn(
                "$.results.vs_fp16_energy_pct",
                format!(
                    "an FP16 report {:+.2} % away from FP16; expected 0 (the FP16 arm is its own baseline)",
                    d
                ),
            );
        }
    }
}

fn check_provenance(r: &Report, o: &mut Out) {
    if r.results.basis != Basis::Measured {
        return;
    }
    let fields = [
        ("$.measurement_source", r.measurement_source.as_deref()),
        ("$.measurement.method", Some(r.measurement.method.as_str())),
        ("$.results.note", r.results.note.as_deref()),
    ];
    for (path, text) in fields {
        let Some(text) = text else { continue };
        let lower = text.to_lowercase();
        if let Some(hint) = NOT_MEASURED_HINTS.iter().find(|h| lower.contains(*h)) {
            o.warn(
                path,
                format!(
                    "says {:?} ({}), yet basis is \"measured\"; expected \"measured\" only for a fresh on-device measurement — treat these figures as not measured",
                    hint,
                    shorten(text, 80)
                ),
            );
            return;
        }
    }
}

fn check_params(r: &Report, o: &mut Out) {
    match r.workload.params_b {
        Some(p) if p.is_finite() && p > MAX_PARAMS_B => {
            o.error(
                "$.workload.params_b",
                format!(
                    "{} is not a model size; expected at most {} billions",
                    fmt_num(p),
                    fmt_num(MAX_PARAMS_B)
                ),
            );
            return;
        }
        Some(p) if !p.is_finite() || p < 0.0 => {
            o.error(
                "$.workload.params_b",
                format!(
                    "{} is not a model size; expected a positive number of billions or null",
                    fmt_num(p)
                ),
            );
            return;
        }
        Some(p) if p > 0.0 => return,
        _ => {}
    }
    let what = if r.workload.params_b == Some(0.0) {
        "is 0"
    } else {
        "is missing"
    };
    let name = shorten(&r.workload.model_name, 80);
    match guess_params_b(&r.workload.model_name) {
        Some(g) => o.warn(
            "$.workload.params_b",
            format!(
                "{what}; expected the model size in billions — the page will place this point using the model-name size guess: {} B from {name:?}",
                fmt_num(g)
            ),
        ),
        None => o.warn(
            "$.workload.params_b",
            format!(
                "{what}; expected the model size in billions — no size can be guessed from the model name {name:?}, so the page cannot place this point on a curve"
            ),
        ),
    }
}

fn check_arch(r: &Report, o: &mut Out) {
    let sut = &r.system_under_test;
    let stated = sut.gpu_arch.as_str();
    let from_name = arch_from_gpu_name(&sut.gpu);
    match stated.parse::<Arch>() {
        Ok(a) => {
            if a.as_str() != stated {
                o.warn(
                    "$.system_under_test.gpu_arch",
                    format!(
                        "{:?} will be read as {:?}; expected the lower-case class name",
                        shorten(stated, 40),
                        a.as_str()
                    ),
                );
            }
            if let Some(n) = from_name.filter(|n| *n != a) {
                o.warn(
                    "$.system_under_test.gpu_arch",
                    format!(
                        "{:?}, but the GPU name {:?} suggests {}; expected the two to agree — the page uses gpu_arch",
                        a.as_str(),
                        shorten(&sut.gpu, 60),
                        n
                    ),
                );
            }
        }
        Err(_) => match from_name {
            Some(n) => o.warn(
                "$.system_under_test.gpu_arch",
                format!(
                    "{:?} is not a known architecture (expected one of turing, ampere, ada, hopper, blackwell, volta); it will be treated as {n}, derived from the GPU name {:?}",
                    shorten(stated, 40),
                    shorten(&sut.gpu, 60)
                ),
            ),
            None => o.warn(
                "$.system_under_test.gpu_arch",
                format!(
                    "{:?} is not a known architecture (expected one of turing, ampere, ada, hopper, blackwell, volta) and none can be derived from the GPU name {:?}; this point cannot be placed on any curve",
                    shorten(stated, 40),
                    shorten(&sut.gpu, 60)
                ),
            ),
        },
    }
}

fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|c| c.is_ascii_hexdigit())
}

fn check_blocks(r: &Report, o: &mut Out) {
    if let Some(e) = &r.energy {
        check_energy(e, o);
    }
    if let Some(p) = &r.protocol {
        check_protocol(r, p, o);
    }
    if let Some(w) = &r.weights {
        check_weights(w, o);
    }
}

/// The energy block: negative figures, counter vs trace, achieved sampling rate, window length.
fn check_energy(e: &crate::Energy, o: &mut Out) {
    for (name, v) in [
        ("counter_joules", e.counter_joules),
        ("trace_joules", e.trace_joules),
        ("counter_over_trace_ratio", e.counter_over_trace_ratio),
        ("requested_sample_rate_hz", e.requested_sample_rate_hz),
        ("achieved_sample_rate_hz", e.achieved_sample_rate_hz),
        ("idle_power_watts", e.idle_power_watts),
        ("window_seconds", e.window_seconds),
    ] {
        o.non_negative(&format!("$.energy.{name}"), v);
    }
    if let (Some(c), Some(t), Some(ratio)) =
        (e.counter_joules, e.trace_joules, e.counter_over_trace_ratio)
    {
        if t > 0.0 && c.is_finite() && ratio.is_finite() && (c / t - ratio).abs() > 0.01 {
            o.warn(
                "$.energy.counter_over_trace_ratio",
                format!(
                    "{}, but counter_joules / trace_joules = {:.4}; expected them to agree",
                    fmt_num(ratio),
                    c / t
                ),
            );
        }
    }
    if let (Some(req), Some(got)) = (e.requested_sample_rate_hz, e.achieved_sample_rate_hz) {
        if req > 0.0 && got.is_finite() && got < 0.8 * req {
            o.warn(
                "$.energy.achieved_sample_rate_hz",
                format!(
                    "{} Hz achieved of {} Hz requested; expected at least 80 % — the power trace is coarse",
                    fmt_num(got),
                    fmt_num(req)
                ),
            );
        }
    }
    if let Some(w) = e.window_seconds.filter(|w| w.is_finite() && *w < 5.0) {
        o.warn(
            "$.energy.window_seconds",
            format!(
                "a {} s window; expected at least ~5 s — shorter windows are noisy",
                fmt_num(w)
            ),
        );
    }
}

/// Largest credible `hbm_roofline_fraction`: the weight reads alone cannot outrun the card's
/// memory bandwidth by more than measurement slack (and L2 hits on a small model).
pub const MAX_ROOFLINE_FRACTION: f64 = 1.2;

/// An arm's roofline figures: bytes that are not a silent zero, a fraction that is a
/// finite share of the bandwidth in (0, [`MAX_ROOFLINE_FRACTION`]].
fn check_arm_roofline(i: usize, arm: &crate::Arm, o: &mut Out) {
    if arm.weight_bytes_per_token == Some(0) {
        o.error(
            &format!("$.protocol.arms[{i}].weight_bytes_per_token"),
            "0: a decode step reads its weights; expected the bytes read per token (≥ 1), or the field omitted when unknown",
        );
    }
    let path = format!("$.protocol.arms[{i}].hbm_roofline_fraction");
    match arm.hbm_roofline_fraction {
        Some(f) if !f.is_finite() => o.error(
            &path,
            format!("{f} is not a finite number; expected a fraction in (0, {MAX_ROOFLINE_FRACTION}] of the card's memory bandwidth, or the field omitted"),
        ),
        Some(f) if f <= 0.0 => o.error(
            &path,
            format!(
                "{}: expected a fraction > 0 of the card's memory bandwidth (≤ {MAX_ROOFLINE_FRACTION}), or the field omitted when the card is unknown — never a zero",
                fmt_num(f)
            ),
        ),
        Some(f) if f > MAX_ROOFLINE_FRACTION => o.error(
            &path,
            format!(
                "{}: the weight reads would exceed the card's memory bandwidth {}×; expected at most {MAX_ROOFLINE_FRACTION} (check weight_bytes_per_token, the throughput and the card)",
                fmt_num(f),
                fmt_num(f)
            ),
        ),
        _ => {}
    }
}

/// The protocol block: failed arms behind measured figures, cooldown that did not converge,
/// roofline figures out of range.
fn check_protocol(r: &Report, p: &crate::Protocol, o: &mut Out) {
    if let Some(arms) = &p.arms {
        for (i, arm) in arms.iter().enumerate() {
            check_arm_roofline(i, arm, o);
            if arm.status != ArmStatus::Failed || r.results.basis != Basis::Measured {
                continue;
            }
            if arm.precision == r.workload.precision {
                o.error(
                    &format!("$.protocol.arms[{i}].status"),
                    format!(
                        "the {} arm failed, yet results.basis is \"measured\"; expected basis \"unavailable\" and null energies for a failed arm",
                        shorten(&arm.precision, 20)
                    ),
                );
            } else if arm.precision == "FP16" && r.results.fp16_energy_per_token_mj.is_some() {
                o.error(
                    "$.results.fp16_energy_per_token_mj",
                    format!(
                        "the FP16 arm failed (protocol.arms[{i}]), yet an FP16 energy is given; expected null fp16_energy_per_token_mj and vs_fp16_energy_pct"
                    ),
                );
            }
        }
    }
    if let Some(c) = &p.cooldown {
        if c.converged == Some(false) {
            o.warn(
                "$.protocol.cooldown.converged",
                "false: the card had not cooled to its targets when the arm started; expected true — arms may not be comparable",
            );
        }
    }
}

/// The weights block: file hashes, real weights without a path or hub id, synthetic weights
/// without an architecture.
fn check_weights(w: &crate::Weights, o: &mut Out) {
    let files = w.files.as_deref().unwrap_or(&[]);
    for (i, f) in files.iter().enumerate() {
        if let Some(h) = f.sha256.as_deref().filter(|h| !is_sha256(h)) {
            o.error(
                &format!("$.weights.files[{i}].sha256"),
                format!(
                    "{:?} is not a SHA-256; expected 64 hexadecimal digits",
                    shorten(h, 70)
                ),
            );
        }
    }
    match w.kind {
        WeightsKind::Real => {
            if files.iter().all(|f| f.sha256.is_none()) {
                o.warn(
                    "$.weights.files",
                    "real weights without any sha256; expected the sha256 of each weight file so the run can be reproduced",
                );
            }
            if w.path.is_none() && w.hub_id.is_none() {
                o.warn(
                    "$.weights",
                    "real weights without path or hub_id; expected one of them",
                );
            }
        }
        WeightsKind::Synthetic => {
            if w.architecture.is_none() {
                o.warn(
                    "$.weights.architecture",
                    "synthetic weights without an architecture; expected the architecture whose shapes were used (e.g. qwen2)",
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn illustrative() -> Report {
        serde_json::from_str(include_str!(
            "../../../data/examples/upstream-measured-illustrative.json"
        ))
        .unwrap()
    }

    fn no_gpu() -> Report {
        serde_json::from_str(include_str!("../../../data/examples/upstream-no-gpu.json")).unwrap()
    }

    fn paths(v: &[Issue]) -> Vec<&str> {
        v.iter().map(|i| i.path.as_str()).collect()
    }

    #[test]
    fn quality_figures_must_agree_and_name_their_corpus() {
        let mut r = illustrative();
        r.quality = Some(crate::Quality::sample());
        let (e, w) = semantic_checks(&r);
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(paths(&w), ["$.measurement_source"], "{w:?}");

        let q = r.quality.as_mut().unwrap();
        q.delta_vs_fp16_pct = Some(-5.0); // the sign flipped: 10.5 vs 10 is +5 %
        q.corpus = Some(crate::Corpus {
            sha256: Some("not-a-hash".into()),
            ..Default::default()
        });
        let (e, w) = semantic_checks(&r);
        assert_eq!(paths(&e), ["$.quality.corpus.sha256"], "{e:?}");
        assert!(paths(&w).contains(&"$.quality.delta_vs_fp16_pct"), "{w:?}");
        // A small Δ with its sign flipped is caught too (the energy Δ's 0.5-point tolerance would
        // not): 10.02 vs 10 is +0.2 %.
        let q = r.quality.as_mut().unwrap();
        q.corpus = None;
        q.value = Some(10.02);
        q.delta_vs_fp16_pct = Some(-0.2);
        let (_, w) = semantic_checks(&r);
        assert!(paths(&w).contains(&"$.quality.delta_vs_fp16_pct"), "{w:?}");
        let q = r.quality.as_mut().unwrap();
        q.delta_vs_fp16_pct = Some(0.2);
        let (_, w) = semantic_checks(&r);
        assert!(!paths(&w).contains(&"$.quality.delta_vs_fp16_pct"), "{w:?}");
        let q = r.quality.as_mut().unwrap();
        q.value = None;
        let (_, w) = semantic_checks(&r);
        assert!(paths(&w).contains(&"$.quality.value"), "{w:?}");
        assert!(paths(&w).contains(&"$.quality.corpus"), "{w:?}");
        let q = r.quality.as_mut().unwrap();
        q.value = Some(0.5);
        q.delta_vs_fp16_pct = None;
        let (_, w) = semantic_checks(&r);
        assert!(
            w.iter()
                .any(|i| i.path == "$.quality.value" && i.message.contains("at least 1")),
            "{w:?}"
        );
    }

    #[test]
    fn upstream_examples_have_no_errors() {
        let (e, w) = semantic_checks(&illustrative());
        assert!(e.is_empty(), "{e:?}");
        // The illustrative report says basis "measured" but is synthetic: a warning, not an error.
        assert_eq!(paths(&w), ["$.measurement_source"], "{w:?}");
        assert!(w[0].message.contains("illustrative"));

        let (e, w) = semantic_checks(&no_gpu());
        assert!(e.is_empty(), "{e:?}");
        assert!(w.is_empty(), "{w:?}");
    }

    #[test]
    fn worked_delta_within_tolerance() {
        // (3765.0 − 3382.6) / 3382.6 × 100 = 11.3049…, reported 11.3 → no delta warning.
        let r = illustrative();
        let d = r.recomputed_delta_pct().unwrap();
        assert!((d - 11.304907).abs() < 1e-5, "{d}");
        let (_, w) = semantic_checks(&r);
        assert!(!paths(&w).contains(&"$.results.vs_fp16_energy_pct"));
        // No-GPU: (2153.68 − 1659) / 1659 × 100 = 29.8179…, reported 29.8.
        let d = no_gpu().recomputed_delta_pct().unwrap();
        assert!((d - 29.817962).abs() < 1e-5, "{d}");
    }

    #[test]
    fn delta_disagreement_warns_with_both_numbers() {
        // Upstream's Qwen2.5-3B NF4 case: +10.1 % stated, the energies give +0.8 %.
        let mut r = illustrative();
        r.results.energy_per_token_mj = Some(3409.66);
        r.results.vs_fp16_energy_pct = Some(10.1);
        r.results.total_energy_joules = None;
        r.results.avg_power_watts = None;
        let (e, w) = semantic_checks(&r);
        assert!(e.is_empty(), "{e:?}");
        let m = &w
            .iter()
            .find(|i| i.path == "$.results.vs_fp16_energy_pct")
            .unwrap()
            .message;
        assert!(m.contains("reported +10.1 %"), "{m}");
        assert!(m.contains("+0.80 %"), "{m}");
        assert!(m.contains("recomputed"), "{m}");
        // Exactly at the tolerance is fine, just beyond it is not.
        r.results.vs_fp16_energy_pct = Some(r.recomputed_delta_pct().unwrap() + 0.49);
        assert!(!paths(&semantic_checks(&r).1).contains(&"$.results.vs_fp16_energy_pct"));
        r.results.vs_fp16_energy_pct = Some(r.recomputed_delta_pct().unwrap() - 0.51);
        assert!(paths(&semantic_checks(&r).1).contains(&"$.results.vs_fp16_energy_pct"));
    }

    #[test]
    fn unverifiable_delta_warns() {
        let mut r = no_gpu();
        r.results.fp16_energy_per_token_mj = None;
        let (e, w) = semantic_checks(&r);
        assert!(e.is_empty());
        assert!(w[0].message.contains("cannot be checked"), "{w:?}");
    }

    #[test]
    fn measured_without_energy_is_an_error() {
        let mut r = illustrative();
        r.results.energy_per_token_mj = None;
        let (e, _) = semantic_checks(&r);
        assert_eq!(paths(&e), ["$.results.energy_per_token_mj"]);
        assert!(e[0].message.contains("expected"));
    }

    #[test]
    fn silent_zero_and_negative_and_non_finite() {
        let mut r = illustrative();
        r.results.energy_per_token_mj = Some(0.0);
        let (e, _) = semantic_checks(&r);
        assert!(e[0].message.contains("silent zero"), "{e:?}");

        r.results.energy_per_token_mj = Some(-5.0);
        let (e, _) = semantic_checks(&r);
        assert_eq!(e[0].path, "$.results.energy_per_token_mj");
        assert!(e[0].message.contains("negative"));

        let mut r = illustrative();
        r.results.avg_power_watts = Some(f64::NAN);
        r.results.vs_fp16_energy_pct = Some(f64::INFINITY);
        let (e, _) = semantic_checks(&r);
        assert_eq!(
            paths(&e),
            ["$.results.avg_power_watts", "$.results.vs_fp16_energy_pct"]
        );

        // A zero that is not claimed as measured is only a warning.
        let mut r = no_gpu();
        r.results.energy_per_token_mj = Some(0.0);
        r.results.vs_fp16_energy_pct = Some(-100.0);
        let (e, w) = semantic_checks(&r);
        assert!(e.is_empty(), "{e:?}");
        assert!(paths(&w).contains(&"$.results.energy_per_token_mj"));
    }

    #[test]
    fn labels_outside_the_enums() {
        let mut r = no_gpu();
        r.scenario = "Batch".into();
        r.workload.precision = "FP4".into();
        let (e, _) = semantic_checks(&r);
        assert_eq!(paths(&e), ["$.scenario", "$.workload.precision"]);
        assert!(e[0]
            .message
            .contains("expected \"SingleStream\" or \"Offline\""));
        assert!(e[1].message.contains("Q4_K"));
    }

    #[test]
    fn an_absurd_model_size_is_an_error_naming_the_field() {
        let mut r = no_gpu();
        r.workload.params_b = Some(1e300);
        let (e, _) = semantic_checks(&r);
        assert_eq!(paths(&e), ["$.workload.params_b"]);
        assert!(
            e[0].message.contains("at most 100000 billions"),
            "{}",
            e[0].message
        );
        r.workload.params_b = Some(70.0);
        assert!(semantic_checks(&r).0.is_empty());
    }

    #[test]
    fn missing_params_uses_the_name_guess() {
        let mut r = no_gpu();
        r.workload.params_b = None;
        let (e, w) = semantic_checks(&r);
        assert!(e.is_empty());
        assert_eq!(paths(&w), ["$.workload.params_b"]);
        assert!(w[0].message.contains("1.1 B"), "{}", w[0].message);
        assert!(w[0].message.contains("model-name size guess"));
        assert_eq!(r.effective_params_b(), Some(1.1));

        r.workload.model_name = "mystery-model".into();
        let (_, w) = semantic_checks(&r);
        assert!(w[0].message.contains("cannot place"), "{}", w[0].message);
        assert_eq!(r.effective_params_b(), None);
    }

    #[test]
    fn unknown_arch_is_derived_or_unplaceable() {
        let mut r = no_gpu();
        r.system_under_test.gpu = "NVIDIA H200".into();
        r.system_under_test.gpu_arch = "sm90".into();
        let (e, w) = semantic_checks(&r);
        assert!(e.is_empty());
        assert!(
            w[0].message
                .contains("will be treated as hopper, derived from the GPU name"),
            "{}",
            w[0].message
        );
        assert_eq!(r.effective_arch(), Some(Arch::Hopper));

        r.system_under_test.gpu = "Radeon".into();
        let (e, w) = semantic_checks(&r);
        assert!(e.is_empty());
        assert!(w[0].message.contains("cannot be placed on any curve"));
        assert_eq!(r.effective_arch(), None);

        r.system_under_test.gpu = "NVIDIA H200".into();
        r.system_under_test.gpu_arch = "Ampere".into();
        let (_, w) = semantic_checks(&r);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].message.contains("lower-case"));
        assert!(w[1].message.contains("suggests hopper"));
    }

    #[test]
    fn failed_arm_cannot_be_measured() {
        use crate::types::{Arm, Protocol};
        let mut r = illustrative();
        r.protocol = Some(Protocol {
            arms: Some(vec![Arm::failed("NF4", "CUDA OOM"), Arm::ok("FP16")]),
            ..Default::default()
        });
        let (e, _) = semantic_checks(&r);
        assert_eq!(paths(&e), ["$.protocol.arms[0].status"]);
    }

    #[test]
    fn roofline_fraction_must_be_a_credible_share() {
        use crate::types::{Arm, Protocol};
        let arm = |bytes: Option<u64>, f: Option<f64>| Arm {
            weight_bytes_per_token: bytes,
            hbm_roofline_fraction: f,
            ..Arm::ok("FP16")
        };
        let mut r = illustrative();
        r.protocol = Some(Protocol {
            arms: Some(vec![
                arm(Some(988_065_536), Some(0.62)),
                arm(Some(988_065_536), None),
                arm(None, None),
                arm(Some(1), Some(MAX_ROOFLINE_FRACTION)),
            ]),
            ..Default::default()
        });
        assert!(semantic_checks(&r).0.is_empty());
        r.protocol = Some(Protocol {
            arms: Some(vec![
                arm(Some(0), Some(0.5)),
                arm(Some(10), Some(0.0)),
                arm(Some(10), Some(1.3)),
                arm(Some(10), Some(f64::NAN)),
                arm(Some(10), Some(-0.1)),
            ]),
            ..Default::default()
        });
        let (e, _) = semantic_checks(&r);
        assert_eq!(
            paths(&e),
            [
                "$.protocol.arms[0].weight_bytes_per_token",
                "$.protocol.arms[1].hbm_roofline_fraction",
                "$.protocol.arms[2].hbm_roofline_fraction",
                "$.protocol.arms[3].hbm_roofline_fraction",
                "$.protocol.arms[4].hbm_roofline_fraction",
            ]
        );
        assert!(e[1].message.contains("never a zero"), "{}", e[1].message);
        assert!(e[2].message.contains("at most 1.2"), "{}", e[2].message);
        assert!(
            e[3].message.contains("not a finite number"),
            "{}",
            e[3].message
        );
    }

    #[test]
    fn total_and_power_cross_checks() {
        let mut r = illustrative();
        r.results.total_energy_joules = Some(5000.0);
        r.results.avg_power_watts = Some(300.0);
        let (e, w) = semantic_checks(&r);
        assert!(e.is_empty());
        let msgs: Vec<&str> = w.iter().map(|i| i.message.as_str()).collect();
        assert!(msgs
            .iter()
            .any(|m| m.contains("total_energy_joules / tokens_generated")));
        assert!(msgs
            .iter()
            .any(|m| m.contains("avg_power_watts / throughput")));
    }
}
