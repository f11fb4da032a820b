//! The quantenergy report contract (`energy.json`): serde types, schema + semantic validation,
//! the overlay share-link codec and a Markdown rendering for submissions.
//!
//! No I/O, no clocks, no threads: compiles for the host and for `wasm32-unknown-unknown`.
//! Feature `schema` (default) adds JSON-Schema validation with `jsonschema-valid` (which pulls in
//! `regex`); without it the typed parse and the semantic checks still give the same verdict on
//! every case in `tests/bad_reports/`, with plainer messages for type errors.
//!
//! Modules (the public items are re-exported at the crate root, except [`share`]):
//!
//! * `types` — the serde model of the report ([`Report`] and its blocks, [`Basis`]).
//! * `precision` — [`Precision`], the schema's `workload.precision` values.
//! * `arch` — [`Arch`] and the GPU-name → architecture rule ([`arch_from_gpu_name`]).
//! * `guard` — size, nesting and NaN guards on the raw text, before any parse.
//! * `schema` — JSON-Schema validation (feature `schema`), with messages rewritten per node.
//! * `semantic` — the checks the schema cannot express ([`semantic_checks`]).
//! * `describe` — how a JSON value is named in a message (`the string "one"`).
//! * `params` — a model size guessed from its name ([`guess_params_b`]).
//! * `markdown` — the submission block ([`to_markdown`]).
//! * [`share`] — the overlay share-link codec.
//!
//! ```
//! let v = report::validate_str(include_str!("../../../data/examples/upstream-no-gpu.json"));
//! assert!(v.is_valid());
//! let r = v.report.unwrap();
//! assert_eq!(r.results.basis, report::Basis::Interpolated);
//! ```

#![warn(missing_docs)]

mod arch;
mod describe;
mod guard;
mod markdown;
mod params;
mod precision;
#[cfg(feature = "schema")]
mod schema;
mod semantic;
pub mod share;
mod types;
pub mod validity;

use serde::Serialize;
use serde_json::Value;

pub use arch::{arch_from_gpu_name, Arch, ParseArchError};
pub use guard::{MAX_DEPTH, MAX_INPUT_BYTES, MAX_STRING_BYTES};
pub use markdown::{quality_line, stack_summary, to_markdown, workload_summary};
pub use params::{guess_params_b, MAX_PARAMS_B};
pub use precision::{ParsePrecisionError, Precision};
#[cfg(feature = "schema")]
pub use schema::{schema_errors, schema_value};
pub use semantic::{semantic_checks, DELTA_TOLERANCE_PCT, MAX_ROOFLINE_FRACTION, SCENARIOS};
pub use types::{
    Arm, ArmPerplexity, ArmStatus, Basis, Cooldown, Corpus, Energy, Environment, Extra, GpuRef,
    IterationEnergy, Latency, Measurement, ParseBasisError, Prefill, Preflight, PromptSetRef,
    Protocol, Quality, Report, Requests, Results, Serving, ServingMode, Slurm, Stack,
    SystemUnderTest, TokenCount, WeightFile, Weights, WeightsKind, Workload,
};

/// The report schema (draft-07), a superset of upstream ecocompute-energy/1.0 and /1.1.
pub const SCHEMA_JSON: &str = include_str!("../../../data/energy.schema.json");
/// `schema_version` written by this project.
pub const SCHEMA_VERSION: &str = "quantenergy/1.2";

/// One finding. `path` is a JSON path rooted at `$` in dotted form
/// (`$.results.energy_per_token_mj`, `$.protocol.arms[1].status`); problems with the text as a
/// whole use `$`. `message` says what was found and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Issue {
    /// Where: `$`, `$.workload.precision`, `$.protocol.arms[1].status`.
    pub path: String,
    /// What was found and what was expected.
    pub message: String,
}

impl Issue {
    /// An issue at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Issue {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Issue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// The verdict on one input.
#[derive(Debug, Clone, PartialEq)]
pub struct Validation {
    /// The typed report whenever the typed parse succeeded — also when `errors` is not empty,
    /// so a page can still show what it read. Plot it only when [`Validation::is_valid`].
    pub report: Option<Report>,
    /// Problems that make the report unusable (it is not drawn).
    pub errors: Vec<Issue>,
    /// Problems worth saying that do not stop the report from being used.
    pub warnings: Vec<Issue>,
}

impl Validation {
    /// No errors and a typed report (warnings allowed).
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty() && self.report.is_some()
    }

    fn rejected(path: &str, message: String) -> Self {
        Validation {
            report: None,
            errors: vec![Issue::new(path, message)],
            warnings: Vec::new(),
        }
    }
}

/// Validate raw bytes (a dropped file): UTF-8 check, then [`validate_str`].
pub fn validate_bytes(bytes: &[u8]) -> Validation {
    if bytes.len() > MAX_INPUT_BYTES {
        return too_big(bytes.len());
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => validate_str(text),
        Err(e) => {
            let at = e.valid_up_to();
            // Line/column of the bad byte, counted on the valid prefix.
            let prefix = std::str::from_utf8(&bytes[..at]).unwrap_or_default();
            let (line, col) = guard::line_col(prefix, at);
            Validation::rejected(
                "$",
                format!(
                    "not UTF-8 text: invalid byte 0x{:02X} at byte {at} (line {line}, column {col}); expected a UTF-8 JSON file (is this a binary file?)",
                    bytes[at]
                ),
            )
        }
    }
}

fn too_big(len: usize) -> Validation {
    Validation::rejected(
        "$",
        format!(
            "input is {len} bytes; expected at most {} MiB for one report",
            MAX_INPUT_BYTES / (1024 * 1024)
        ),
    )
}

/// Full pipeline on JSON text: size and depth guards (before any parser sees the text), JSON
/// parse (errors name line and column), then [`validate_value`].
pub fn validate_str(text: &str) -> Validation {
    if text.len() > MAX_INPUT_BYTES {
        return too_big(text.len());
    }
    if text.starts_with('\u{FEFF}') {
        return Validation::rejected(
            "$",
            "the text starts with a byte-order mark (U+FEFF); expected plain UTF-8 JSON starting with `{` — save the file as UTF-8 without BOM".to_string(),
        );
    }
    if text.trim().is_empty() {
        return Validation::rejected(
            "$",
            "the input is empty; expected a JSON object (an energy report)".to_string(),
        );
    }
    let scan = guard::scan(text);
    if let Some(at) = scan.too_deep_at {
        let (line, col) = guard::line_col(text, at);
        return Validation::rejected(
            "$",
            format!(
                "nested more than {MAX_DEPTH} levels deep at line {line}, column {col}; expected a flat report (a report needs about 5 levels)"
            ),
        );
    }
    match serde_json::from_str::<Value>(text) {
        Ok(v) => validate_value(&v),
        Err(e) => {
            if let Some((at, word)) = scan.non_finite_at {
                let (line, col) = guard::line_col(text, at);
                return Validation::rejected(
                    "$",
                    format!(
                        "{word} at line {line}, column {col}: NaN/Infinity are not JSON numbers; expected a finite number, or null for a missing value"
                    ),
                );
            }
            Validation::rejected("$", parse_error_message(&e))
        }
    }
}

fn parse_error_message(e: &serde_json::Error) -> String {
    let full = e.to_string();
    // serde_json appends " at line L column C"; say it our way.
    let inner = match full.rfind(" at line ") {
        Some(p) => &full[..p],
        None => full.as_str(),
    };
    let (line, col) = (e.line(), e.column());
    match e.classify() {
        serde_json::error::Category::Eof => format!(
            "not valid JSON: the text ends too early at line {line}, column {col} (truncated file?); expected a complete JSON object ({inner})"
        ),
        _ => format!(
            "not valid JSON at line {line}, column {col}: {inner}; expected a JSON object (an energy report)"
        ),
    }
}

/// Validate an already parsed value: guards, object check, JSON Schema (feature `schema`),
/// typed parse, semantic checks.
pub fn validate_value(v: &Value) -> Validation {
    let guard_issues = guard::walk_limits(v, 10);
    if !guard_issues.is_empty() {
        return Validation {
            report: None,
            errors: guard_issues,
            warnings: Vec::new(),
        };
    }
    if !v.is_object() {
        return Validation::rejected(
            "$",
            format!(
                "expected a JSON object (an energy report), found {}",
                describe::describe_value(v)
            ),
        );
    }

    #[cfg(feature = "schema")]
    let mut errors = schema::schema_errors(v);
    #[cfg(not(feature = "schema"))]
    let mut errors: Vec<Issue> = Vec::new();

    let report = match serde_path_to_error::deserialize::<_, Report>(v) {
        Ok(r) => Some(r),
        Err(e) => {
            // The schema already explains most typed failures; add ours only when it did not.
            if errors.is_empty() {
                errors.push(typed_error(&e));
            }
            None
        }
    };
    let mut warnings = Vec::new();
    if let Some(r) = &report {
        let (sem_errors, sem_warnings) = semantic_checks(r);
        for issue in sem_errors {
            if !errors.iter().any(|e| e.path == issue.path) {
                errors.push(issue);
            }
        }
        warnings = sem_warnings;
    }
    Validation {
        report,
        errors,
        warnings,
    }
}

/// A serde error with the path where it happened.
fn typed_error(e: &serde_path_to_error::Error<serde_json::Error>) -> Issue {
    use serde_path_to_error::Segment;
    let mut path = String::from("$");
    for seg in e.path().iter() {
        match seg {
            Segment::Seq { index } => guard::push_index(&mut path, *index),
            Segment::Map { key } => guard::push_key(&mut path, key),
            Segment::Enum { .. } => {}
            Segment::Unknown => path.push_str(".?"),
        }
    }
    let msg = e.inner().to_string();
    if let Some(field) = msg
        .strip_prefix("missing field `")
        .and_then(|m| m.strip_suffix('`'))
    {
        guard::push_key(&mut path, field);
        return Issue::new(
            path,
            format!("missing required field `{field}`; expected it to be present (see data/energy.schema.json)"),
        );
    }
    let msg = msg
        .replace(
            "expected u32",
            "expected an integer ≥ 0 (at most 4294967295)",
        )
        .replace("expected u64", "expected an integer ≥ 0")
        .replace("expected i64", "expected an integer")
        .replace("expected f64", "expected a number");
    let msg = match msg.find(", expected struct ") {
        Some(p) => format!("{}, expected an object", &msg[..p]),
        None => msg,
    };
    Issue::new(path, msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ILLUSTRATIVE: &str =
        include_str!("../../../data/examples/upstream-measured-illustrative.json");
    const NO_GPU: &str = include_str!("../../../data/examples/upstream-no-gpu.json");

    #[test]
    fn upstream_examples_round_trip_unchanged() {
        for text in [ILLUSTRATIVE, NO_GPU] {
            let input: Value = serde_json::from_str(text).unwrap();
            let r: Report = serde_json::from_str(text).unwrap();
            let output = serde_json::to_value(&r).unwrap();
            assert_eq!(input, output);
            // And the text form parses back to the same report.
            let again: Report = serde_json::from_str(&r.to_json_pretty()).unwrap();
            assert_eq!(again, r);
        }
    }

    #[test]
    fn upstream_examples_validate() {
        let v = validate_str(ILLUSTRATIVE);
        assert!(v.is_valid(), "{:?}", v.errors);
        assert_eq!(v.warnings.len(), 1, "{:?}", v.warnings);
        let v = validate_str(NO_GPU);
        assert!(v.is_valid(), "{:?}", v.errors);
        assert!(v.warnings.is_empty(), "{:?}", v.warnings);
    }

    #[test]
    fn unknown_fields_kept_at_every_level() {
        let mut v: Value = serde_json::from_str(NO_GPU).unwrap();
        v["x_top"] = serde_json::json!({"a": [1, 2]});
        v["results"]["x_res"] = serde_json::json!("kept");
        v["system_under_test"]["x_sut"] = serde_json::json!(1.5);
        v["stack"] = serde_json::json!({"engine": "candle", "x_stack": true});
        let r: Report = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(r.results.extra["x_res"], "kept");
        assert_eq!(serde_json::to_value(&r).unwrap(), v);
    }

    #[test]
    fn parse_errors_name_line_and_column() {
        let v = validate_str("{\n  \"a\": 1,\n  \"b\" 2\n}");
        assert!(!v.is_valid());
        assert!(
            v.errors[0].message.contains("line 3, column 7"),
            "{}",
            v.errors[0]
        );
        let v = validate_str(&NO_GPU[..200]);
        assert!(
            v.errors[0].message.contains("ends too early"),
            "{}",
            v.errors[0]
        );
    }

    #[test]
    fn non_finite_tokens_are_named() {
        let text = NO_GPU.replace("2153.68", "NaN");
        let v = validate_str(&text);
        assert!(
            v.errors[0]
                .message
                .contains("NaN/Infinity are not JSON numbers"),
            "{}",
            v.errors[0]
        );
        assert!(
            v.errors[0].message.contains("line 38, column 28"),
            "{}",
            v.errors[0]
        );
        let v = validate_str(&NO_GPU.replace("2153.68", "-Infinity"));
        assert!(v.errors[0].message.starts_with("-Infinity at line"));
        // Inside a string the word is harmless.
        let v = validate_str(&NO_GPU.replace("(no local GPU)", "NaN Infinity"));
        assert!(v.is_valid(), "{:?}", v.errors);
    }

    #[test]
    fn guards_run_before_parsing() {
        let v = validate_str(&"[".repeat(10_000));
        assert!(v.errors[0].message.contains("nested more than 64"));
        let big = " ".repeat(MAX_INPUT_BYTES + 1);
        assert!(validate_str(&big).errors[0]
            .message
            .contains("at most 8 MiB"));
        assert!(validate_bytes(b"\xEF\xBB\xBF{}").errors[0]
            .message
            .contains("byte-order mark"));
        assert!(validate_bytes(b"{\"a\":\xff}").errors[0]
            .message
            .contains("not UTF-8"));
        assert!(validate_str("  \n").errors[0].message.contains("empty"));
    }

    #[test]
    fn not_an_object() {
        for text in ["[]", "\"report\"", "3", "null"] {
            let v = validate_str(text);
            assert_eq!(v.errors.len(), 1);
            assert!(v.errors[0].message.starts_with("expected a JSON object"));
        }
    }

    #[test]
    fn typed_errors_have_paths() {
        // Straight through serde, as happens with the `schema` feature off.
        let mut v: Value = serde_json::from_str(NO_GPU).unwrap();
        v["workload"]["batch_size"] = serde_json::json!("one");
        let e = serde_path_to_error::deserialize::<_, Report>(&v).unwrap_err();
        let i = typed_error(&e);
        assert_eq!(i.path, "$.workload.batch_size");
        assert!(i.message.contains("expected an integer ≥ 0"), "{i}");

        let mut v: Value = serde_json::from_str(NO_GPU).unwrap();
        v["results"]
            .as_object_mut()
            .unwrap()
            .remove("energy_per_token_mj");
        let e = serde_path_to_error::deserialize::<_, Report>(&v).unwrap_err();
        let i = typed_error(&e);
        assert_eq!(i.path, "$.results.energy_per_token_mj");
        assert!(i.message.contains("missing required field"));

        let mut v: Value = serde_json::from_str(NO_GPU).unwrap();
        v["results"]["basis"] = serde_json::json!("guessed");
        let e = serde_path_to_error::deserialize::<_, Report>(&v).unwrap_err();
        let i = typed_error(&e);
        assert_eq!(i.path, "$.results.basis");
        assert!(i.message.contains("expected one of"), "{i}");
    }

    #[test]
    fn null_energy_is_accepted_when_unavailable() {
        let text = NO_GPU
            .replace(
                "\"energy_per_token_mj\": 2153.68",
                "\"energy_per_token_mj\": null",
            )
            .replace("\"fp16_energy_per_token_mj\": 1659.0,", "")
            .replace("\"vs_fp16_energy_pct\": 29.8,", "")
            .replace("\"interpolated\"", "\"unavailable\"");
        let v = validate_str(&text);
        assert!(v.is_valid(), "{:?}", v.errors);
        assert_eq!(v.report.unwrap().results.energy_per_token_mj, None);
    }

    #[test]
    fn schema_version_and_constants() {
        assert_eq!(SCHEMA_VERSION, "quantenergy/1.2");
        let s: Value = serde_json::from_str(SCHEMA_JSON).unwrap();
        assert_eq!(s["$schema"], "http://json-schema.org/draft-07/schema#");
        let enum_: Vec<&str> = s["properties"]["workload"]["properties"]["precision"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap())
            .collect();
        assert_eq!(enum_, Precision::ALL.map(Precision::as_str));
        assert!(!SCHEMA_JSON.contains("\"additionalProperties\": false"));
    }
}
