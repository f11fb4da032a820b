//! Words for "expected …, found …" messages.

use serde_json::Value;

#[cfg(any(feature = "schema", test))]
fn type_name(t: &str) -> &str {
    match t {
        "integer" => "an integer",
        "number" => "a number",
        "string" => "a string",
        "object" => "an object",
        "array" => "an array",
        "boolean" => "true or false",
        "null" => "null",
        other => other,
    }
}

/// What a schema fragment accepts, in words: `an integer ≥ 1`, `a number ≥ 0 or null`,
/// `one of "measured", "interpolated", …`.
#[cfg(any(feature = "schema", test))]
pub(crate) fn describe_schema(s: &Value) -> String {
    if let Some(values) = s.get("enum").and_then(Value::as_array) {
        let shown: Vec<String> = values.iter().take(20).map(Value::to_string).collect();
        return format!("one of {}", shown.join(", "));
    }
    if let Some(c) = s.get("const") {
        return c.to_string();
    }
    if let Some(p) = s.get("pattern").and_then(Value::as_str) {
        return format!("a string matching {p}");
    }
    let types: Vec<&str> = match s.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if types.is_empty() {
        return "a value".to_string();
    }
    let min = s.get("minimum").and_then(|m| m.as_f64()).map(fmt_num);
    let max = s.get("maximum").and_then(|m| m.as_f64()).map(fmt_num);
    types
        .iter()
        .map(|t| {
            let mut d = type_name(t).to_string();
            if matches!(*t, "integer" | "number") {
                if let Some(m) = &min {
                    d.push_str(&format!(" ≥ {m}"));
                }
                if let Some(m) = &max {
                    d.push_str(&format!(" ≤ {m}"));
                }
            }
            d
        })
        .collect::<Vec<_>>()
        .join(" or ")
}

/// Shortest readable form of a number (`0`, `1.5`, `-3`).
pub(crate) fn fmt_num(x: f64) -> String {
    if x.is_finite() && x == x.trunc() && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

/// The first `max` characters of `s`, with `…` when cut.
pub(crate) fn shorten(s: &str, max: usize) -> String {
    let mut it = s.chars();
    let head: String = it.by_ref().take(max).collect();
    if it.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}

/// A JSON value in words: `the string "one"`, `the number -3`, `an array`.
pub(crate) fn describe_value(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!(
            "the string {}",
            serde_json::to_string(&shorten(s, 60)).unwrap_or_default()
        ),
        Value::Array(_) => "an array".to_string(),
        Value::Object(_) => "an object".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schema_words() {
        assert_eq!(
            describe_schema(&json!({"type": "integer", "minimum": 1})),
            "an integer ≥ 1"
        );
        assert_eq!(
            describe_schema(&json!({"type": ["number", "null"], "minimum": 0})),
            "a number ≥ 0 or null"
        );
        assert_eq!(
            describe_schema(&json!({"type": "string", "enum": ["a", "b"]})),
            "one of \"a\", \"b\""
        );
        assert_eq!(describe_schema(&json!({})), "a value");
    }

    #[test]
    fn value_words() {
        assert_eq!(describe_value(&json!("one")), "the string \"one\"");
        assert_eq!(describe_value(&json!(-3)), "the number -3");
        assert_eq!(describe_value(&json!([1])), "an array");
        assert_eq!(shorten("abcdef", 3), "abc…");
        assert_eq!(fmt_num(2.0), "2");
        assert_eq!(fmt_num(2.5), "2.5");
    }
}
