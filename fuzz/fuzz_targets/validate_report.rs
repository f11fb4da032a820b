//! `report::validate_str` (the CLI's and the meter's path: guards, JSON parse, JSON Schema, typed
//! parse, semantic checks) and `report::validate_bytes` on arbitrary input, beside the page's
//! typed-only path (no JSON Schema: typed parse + semantic checks; `report` is built here with
//! `schema` on, as the meter needs it, so that path is rebuilt from the same public pieces).
//!
//! Asserts besides "no panic":
//! * `validate_bytes` on UTF-8 bytes gives exactly `validate_str`'s verdict;
//! * a valid report is also valid on the typed-only path (the schema only adds checks);
//! * a valid report serializes, re-validates valid, and reads back as the same report;
//! * a report the typed-only path accepts serializes and is accepted again, and its share point
//!   encodes to a link that decodes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use report::{semantic_checks, share, validate_bytes, validate_str, Report};

/// The page's path: JSON parse, typed parse, semantic errors (none for a drawable report).
fn typed_only(text: &str) -> Option<(Report, usize)> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    if !v.is_object() {
        return None;
    }
    let r: Report = serde_json::from_value(v).ok()?;
    let (errors, _warnings) = semantic_checks(&r);
    Some((r, errors.len()))
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let full = validate_str(&text);
    let from_bytes = validate_bytes(data);
    if std::str::from_utf8(data).is_ok() {
        assert_eq!(from_bytes, full, "validate_bytes and validate_str disagree");
    }

    if full.is_valid() {
        let r = full.report.as_ref().expect("valid means a typed report");
        let typed = typed_only(&text).expect("a schema-valid report parses typed");
        assert_eq!(
            typed.1, 0,
            "valid with the schema, semantic errors without it"
        );
        assert_eq!(&typed.0, r);
        let json = serde_json::to_string(r).expect("a report serializes");
        let again = validate_str(&json);
        assert!(
            again.is_valid(),
            "a valid report re-serialized is not valid: {:?}\n{json}",
            again.errors
        );
        assert_eq!(
            again.report.as_ref(),
            Some(r),
            "round trip changed the report"
        );
    }

    if let Some((r, 0)) = typed_only(&text) {
        let json = serde_json::to_string(&r).expect("a report serializes");
        let (r2, errors) = typed_only(&json).expect("a re-serialized report parses typed");
        assert_eq!(
            errors, 0,
            "re-serialized report has semantic errors\n{json}"
        );
        assert_eq!(r2, r);
        let p = share::from_report(&r);
        let link = share::link("https://example.org/", &p);
        let back = share::decode_link(&link).expect("a report's own share link decodes");
        assert_eq!(back, p);
    }
});
