//! Cheap checks that run before anything expensive sees the input: size, nesting depth, string
//! length, NaN/Infinity tokens, and JSON-path formatting shared by the other modules.

use serde_json::Value;

use crate::Issue;

/// Largest input accepted (bytes of JSON text).
pub const MAX_INPUT_BYTES: usize = 8 * 1024 * 1024;
/// Deepest nesting of arrays/objects accepted. A report needs 5.
pub const MAX_DEPTH: usize = 64;
/// Longest single string (or key) accepted, in bytes. Notes are a few hundred bytes.
pub const MAX_STRING_BYTES: usize = 64 * 1024;

/// What the byte scanner found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Scan {
    /// Byte offset where the nesting first went deeper than [`MAX_DEPTH`].
    pub too_deep_at: Option<usize>,
    /// Byte offset and spelling of the first bare `NaN` / `Infinity` outside strings.
    pub non_finite_at: Option<(usize, &'static str)>,
}

/// One pass over the bytes, aware of strings and escapes, no allocation. Stops at the first
/// place where the nesting is too deep, so 10 000 `[` cost nothing.
pub(crate) fn scan(text: &str) -> Scan {
    let b = text.as_bytes();
    let mut out = Scan::default();
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if in_string {
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_string = false;
            }
        } else {
            match c {
                b'"' => in_string = true,
                b'[' | b'{' => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        out.too_deep_at = Some(i);
                        return out;
                    }
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                b'N' if out.non_finite_at.is_none() && b[i..].starts_with(b"NaN") => {
                    out.non_finite_at = Some((i, "NaN"));
                }
                b'I' if out.non_finite_at.is_none() && b[i..].starts_with(b"Infinity") => {
                    let (at, word) = if i > 0 && b[i - 1] == b'-' {
                        (i - 1, "-Infinity")
                    } else {
                        (i, "Infinity")
                    };
                    out.non_finite_at = Some((at, word));
                }
                _ => {}
            }
        }
        i += 1;
    }
    out
}

/// 1-based line and column (in characters) of a byte offset.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.bytes().filter(|&c| c == b'\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |p| p + 1);
    let col = before[line_start..].chars().count() + 1;
    (line, col)
}

/// One step of a JSON path.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

/// Append `.key` (or `["odd key"]`) to a `$`-rooted path.
pub(crate) fn push_key(path: &mut String, key: &str) {
    if !key.is_empty()
        && key.len() <= 64
        && key
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
    {
        path.push('.');
        path.push_str(key);
    } else {
        let shown: String = key.chars().take(64).collect();
        path.push('[');
        path.push_str(&serde_json::to_string(&shown).unwrap_or_default());
        path.push(']');
    }
}

pub(crate) fn push_index(path: &mut String, i: usize) {
    path.push('[');
    path.push_str(&i.to_string());
    path.push(']');
}

pub(crate) fn path_string(segs: &[Seg<'_>]) -> String {
    let mut p = String::from("$");
    for s in segs {
        match *s {
            Seg::Key(k) => push_key(&mut p, k),
            Seg::Index(i) => push_index(&mut p, i),
        }
    }
    p
}

/// Walk a parsed value without recursion: depth, string/key length, and a rough size (so a
/// `Value` built in memory gets the same limits as text). At most `limit` issues.
pub(crate) fn walk_limits(root: &Value, limit: usize) -> Vec<Issue> {
    let mut issues = Vec::new();
    let mut size: usize = 0;
    let mut size_reported = false;
    // (value, depth of its path, the step that led to it)
    let mut stack: Vec<(&Value, usize, Option<Seg<'_>>)> = vec![(root, 0, None)];
    let mut path: Vec<Seg<'_>> = Vec::new();
    while let Some((v, d, seg)) = stack.pop() {
        path.truncate(d.saturating_sub(1));
        if let Some(s) = seg {
            path.push(s);
        }
        size = size.saturating_add(8);
        let nesting = d + usize::from(v.is_array() || v.is_object());
        if nesting > MAX_DEPTH {
            issues.push(Issue::new(
                path_string(&path),
                format!("nested more than {MAX_DEPTH} levels deep; expected a flat report (a report needs about 5 levels)"),
            ));
            return issues;
        }
        match v {
            Value::String(s) => {
                size = size.saturating_add(s.len());
                if s.len() > MAX_STRING_BYTES {
                    issues.push(Issue::new(
                        path_string(&path),
                        format!(
                            "string of {} bytes; expected at most {} KiB per string",
                            s.len(),
                            MAX_STRING_BYTES / 1024
                        ),
                    ));
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate().rev() {
                    stack.push((x, d + 1, Some(Seg::Index(i))));
                }
            }
            Value::Object(m) => {
                let children: Vec<_> = m.iter().collect();
                for (k, x) in children.into_iter().rev() {
                    size = size.saturating_add(k.len());
                    if k.len() > MAX_STRING_BYTES {
                        issues.push(Issue::new(
                            path_string(&path),
                            format!(
                                "a key of {} bytes; expected keys of at most {} KiB",
                                k.len(),
                                MAX_STRING_BYTES / 1024
                            ),
                        ));
                    } else {
                        stack.push((x, d + 1, Some(Seg::Key(k))));
                    }
                }
            }
            _ => {}
        }
        if size > MAX_INPUT_BYTES && !size_reported {
            size_reported = true;
            issues.push(Issue::new(
                "$",
                format!(
                    "the report is larger than {} MiB; expected a single report of a few KiB",
                    MAX_INPUT_BYTES / (1024 * 1024)
                ),
            ));
        }
        if issues.len() >= limit {
            break;
        }
    }
    issues
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scanner_counts_depth_outside_strings_only() {
        let deep = "[".repeat(10_000);
        assert_eq!(scan(&deep).too_deep_at, Some(MAX_DEPTH));
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert_eq!(scan(&ok).too_deep_at, None);
        let in_string = format!("{{\"a\": \"{}\"}}", "[".repeat(10_000));
        assert_eq!(scan(&in_string), Scan::default());
        // An escaped quote does not end the string.
        let tricky = format!("{{\"a\": \"\\\"{}\"}}", "{".repeat(100));
        assert_eq!(scan(&tricky).too_deep_at, None);
    }

    #[test]
    fn scanner_finds_non_finite_tokens() {
        assert_eq!(scan("{\"a\": NaN}").non_finite_at, Some((6, "NaN")));
        assert_eq!(
            scan("{\"a\": -Infinity}").non_finite_at,
            Some((6, "-Infinity"))
        );
        assert_eq!(scan("{\"a\": \"NaN Infinity\"}").non_finite_at, None);
    }

    #[test]
    fn line_and_column() {
        let t = "{\n  \"a\": NaN\n}";
        assert_eq!(line_col(t, t.find("NaN").unwrap()), (2, 8));
        assert_eq!(line_col("é{", 2), (1, 2));
    }

    #[test]
    fn paths() {
        assert_eq!(
            path_string(&[Seg::Key("protocol"), Seg::Key("arms"), Seg::Index(2)]),
            "$.protocol.arms[2]"
        );
        assert_eq!(path_string(&[Seg::Key("a b")]), "$[\"a b\"]");
        assert_eq!(path_string(&[]), "$");
    }

    #[test]
    fn walk_reports_long_strings_with_their_path() {
        let v = serde_json::json!({"workload": {"model_name": "x".repeat(MAX_STRING_BYTES + 1)}});
        let issues = walk_limits(&v, 10);
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].path, "$.workload.model_name");
        let v = serde_json::json!({"a": [1, {"b": "c"}]});
        assert!(walk_limits(&v, 10).is_empty());
    }

    #[test]
    fn walk_limits_depth_of_values_built_in_memory() {
        let mut v = serde_json::json!(1);
        for _ in 0..(MAX_DEPTH + 1) {
            v = Value::Array(vec![v]);
        }
        let issues = walk_limits(&v, 10);
        assert_eq!(issues.len(), 1);
        assert!(issues[0].message.contains("nested more than"));
    }
}
