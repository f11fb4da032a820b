//! The example reports validate; every bad input of `tests/bad_reports/` is rejected with an
//! error naming what is wrong, without panicking.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use report::{validate_bytes, validate_str, validate_value, Report, Validation};
use serde_json::{json, Value};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn examples() -> Vec<(String, String)> {
    let dir = repo_root().join("data/examples");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

fn no_panic(f: impl FnOnce() -> Validation) -> Validation {
    catch_unwind(AssertUnwindSafe(f)).expect("validation panicked")
}

#[test]
fn every_example_validates_without_errors() {
    let ex = examples();
    let names: Vec<&str> = ex.iter().map(|(n, _)| n.as_str()).collect();
    for want in [
        "upstream-measured-illustrative.json",
        "upstream-no-gpu.json",
        "measured.json",
        "interpolated.json",
        "extrapolated.json",
        "unavailable.json",
    ] {
        assert!(names.contains(&want), "{want} missing from data/examples");
    }
    for (name, text) in &ex {
        let v = no_panic(|| validate_str(text));
        assert!(v.errors.is_empty(), "{name}: {:#?}", v.errors);
        assert!(v.is_valid(), "{name}");
        // The example files show every block without a warning, apart from the honest
        // "illustrative" flags on the two examples labelled measured.
        for w in &v.warnings {
            assert_eq!(w.path, "$.measurement_source", "{name}: {w}");
        }
    }
}

#[test]
fn examples_round_trip_and_agree_with_their_basis() {
    for (name, text) in examples() {
        let input: Value = serde_json::from_str(&text).unwrap();
        let r: Report = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_value(&r).unwrap(), input, "{name}");
        let expected_basis = match name.as_str() {
            "upstream-no-gpu.json" | "interpolated.json" => "interpolated",
            "extrapolated.json" => "extrapolated",
            "unavailable.json" => "unavailable",
            _ => "measured",
        };
        assert_eq!(r.results.basis.as_str(), expected_basis, "{name}");
    }
}

#[test]
fn our_measured_example_has_every_new_block() {
    let text = std::fs::read_to_string(repo_root().join("data/examples/measured.json")).unwrap();
    let r: Report = serde_json::from_str(&text).unwrap();
    assert_eq!(r.schema_version, report::SCHEMA_VERSION);
    assert!(r.stack.is_some() && r.energy.is_some() && r.protocol.is_some());
    assert!(r.environment.is_some() && r.weights.is_some());
    let d = r.recomputed_delta_pct().unwrap();
    assert!(
        (d - r.results.vs_fp16_energy_pct.unwrap()).abs() < 0.01,
        "{d}"
    );
}

struct Case {
    file: String,
    expected: String,
}

fn manifest() -> Vec<Case> {
    let path = repo_root().join("tests/bad_reports/expected.tsv");
    let text = std::fs::read_to_string(&path).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .skip(1) // header
        .map(|l| {
            let (file, expected) = l
                .split_once('\t')
                .unwrap_or_else(|| panic!("bad manifest line {l:?}"));
            Case {
                file: file.to_string(),
                expected: expected.to_string(),
            }
        })
        .collect()
}

fn assert_rejected(name: &str, v: &Validation, expected: &str) {
    assert!(!v.is_valid(), "{name}: accepted");
    assert!(
        v.errors
            .iter()
            .any(|e| e.path.contains(expected) || e.message.contains(expected)),
        "{name}: no error mentions {expected:?}: {:#?}",
        v.errors
    );
    for e in &v.errors {
        assert!(e.path.starts_with('$'), "{name}: path {e}");
        assert!(
            e.message.contains("expected"),
            "{name}: message does not say what was expected: {e}"
        );
    }
}

#[test]
fn every_bad_report_is_rejected_with_the_expected_error() {
    let cases = manifest();
    assert!(cases.len() >= 24, "only {} cases", cases.len());
    let dir = repo_root().join("tests/bad_reports");
    for c in &cases {
        let bytes = std::fs::read(dir.join(&c.file)).unwrap_or_else(|e| panic!("{}: {e}", c.file));
        let v = no_panic(|| validate_bytes(&bytes));
        assert_rejected(&c.file, &v, &c.expected);
        // The &str entry point agrees whenever the bytes are text.
        if let Ok(text) = std::str::from_utf8(&bytes) {
            assert_eq!(no_panic(|| validate_str(text)), v, "{}", c.file);
        }
    }
    // Every file in the folder is listed.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name == "expected.tsv" || name.ends_with(".md") {
            continue;
        }
        assert!(
            cases.iter().any(|c| c.file == name),
            "{name} is not in expected.tsv"
        );
    }
}

fn base() -> Value {
    serde_json::from_str(include_str!("../../../data/examples/measured.json")).unwrap()
}

#[test]
fn generated_bad_inputs() {
    // A 5 MB string: under the 8 MiB input limit, over the per-string limit.
    let mut v = base();
    v["workload"]["model_name"] = json!("x".repeat(5_000_000));
    let text = serde_json::to_string(&v).unwrap();
    assert_rejected(
        "5 MB string",
        &no_panic(|| validate_str(&text)),
        "$.workload.model_name",
    );
    assert_rejected(
        "5 MB string value",
        &no_panic(|| validate_value(&v)),
        "$.workload.model_name",
    );

    // A 9 MiB file.
    let mut v = base();
    v["padding"] = json!(vec!["y".repeat(60_000); 160]);
    let text = serde_json::to_string(&v).unwrap();
    assert!(text.len() > report::MAX_INPUT_BYTES);
    assert_rejected("9 MiB", &no_panic(|| validate_str(&text)), "at most 8 MiB");
    assert_rejected(
        "9 MiB value",
        &no_panic(|| validate_value(&v)),
        "larger than 8 MiB",
    );

    // Deep nesting, as objects, and as a value built in memory.
    let deep = format!("{}1{}", "{\"a\":".repeat(10_000), "}".repeat(10_000));
    assert_rejected(
        "10 000 {",
        &no_panic(|| validate_str(&deep)),
        "nested more than 64",
    );
    let mut v = base();
    let mut inner = json!(0);
    for _ in 0..70 {
        inner = json!([inner]);
    }
    v["deep"] = inner;
    assert_rejected("deep value", &no_panic(|| validate_value(&v)), "$.deep");

    // Nesting inside a string is just text.
    let mut v = base();
    v["results"]["note"] = json!("[".repeat(10_000));
    let text = serde_json::to_string(&v).unwrap();
    assert!(no_panic(|| validate_str(&text)).is_valid());
}

#[test]
fn duplicated_keys_take_the_last_value() {
    let text = include_str!("../../../data/examples/upstream-no-gpu.json").replacen(
        "\"scenario\": \"SingleStream\",",
        "\"scenario\": \"Batch\", \"scenario\": \"SingleStream\",",
        1,
    );
    let v = validate_str(&text);
    assert!(v.is_valid(), "{:?}", v.errors);
    assert_eq!(v.report.unwrap().scenario, "SingleStream");
}

#[test]
fn inconsistent_delta_is_a_warning_naming_both_numbers() {
    let mut v = base();
    v["results"]["vs_fp16_energy_pct"] = json!(-12.0);
    let out = no_panic(|| validate_value(&v));
    assert!(out.is_valid(), "{:?}", out.errors);
    let w = out
        .warnings
        .iter()
        .find(|w| w.path == "$.results.vs_fp16_energy_pct")
        .expect("a delta warning");
    assert!(w.message.contains("-12"), "{w}");
    // The other number is the one the base report's own energies give.
    let e = v["results"]["energy_per_token_mj"].as_f64().unwrap();
    let f = v["results"]["fp16_energy_per_token_mj"].as_f64().unwrap();
    let recomputed = format!("{:.2}", (e - f) / f * 100.0);
    assert!(w.message.contains(&recomputed), "{recomputed} in {w}");
}

#[test]
fn every_prefix_of_a_report_is_handled() {
    let text = include_str!("../../../data/examples/upstream-no-gpu.json");
    for end in (0..text.trim_end().len()).filter(|&i| text.is_char_boundary(i)) {
        let v = no_panic(|| validate_str(&text[..end]));
        assert!(!v.is_valid(), "prefix {end} accepted");
        assert!(!v.errors.is_empty());
    }
}
