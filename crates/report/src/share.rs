//! The overlay share link of the upstream container (`--share`):
//! `?tab=run&overlay=` + base64url (no padding) of compact JSON
//! `{"m":model,"N":params_b (4 dp),"a":gpu_arch,"p":precision,"e":vs_fp16 (2 dp),"b":basis,"g":gpu}`
//! with an optional `s` (source). Links made upstream open here and ours open there.
//!
//! Every decoded field is hostile text: the payload is bounded ([`MAX_PAYLOAD_CHARS`]), strings
//! are capped ([`MAX_FIELD_CHARS`]), numbers must be finite, `b` must be one of the four bases.
//! Unknown keys are ignored.

use crate::params::MAX_PARAMS_B;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{Map, Value};

use crate::types::{Basis, Report};

/// Longest payload [`decode`] looks at (base64 characters).
pub const MAX_PAYLOAD_CHARS: usize = 4096;
/// Longest string field accepted, in characters.
pub const MAX_FIELD_CHARS: usize = 200;
/// [`encode`] also keeps each string's JSON form under this many bytes, so that any encoded
/// point (six strings) stays under [`MAX_PAYLOAD_CHARS`].
const MAX_FIELD_JSON_BYTES: usize = 480;
/// Deltas beyond ±this are not percentages anyone measured.
const MAX_ABS_DELTA_PCT: f64 = 1e6;

/// One point of an overlay. (Serde with the long field names, for in-app messages such as the page's
/// validator worker; the link itself uses the compact `{m,N,a,p,e,b,g,s}` form of [`encode`].)
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SharePoint {
    /// `m`
    pub model: String,
    /// `N`, billions of parameters, 4 decimals.
    pub params_b: Option<f64>,
    /// `a`, architecture class as written by the report (`hopper`). Text, as a link may carry
    /// anything: the page parses it into [`crate::Arch`] where it places the point.
    pub arch: String,
    /// `p`, the precision as written (parsed into [`crate::Precision`] where the point is placed).
    pub precision: String,
    /// `e`, signed % vs FP16, 2 decimals.
    pub vs_fp16_pct: Option<f64>,
    /// `b`: measured, interpolated, extrapolated or unavailable.
    pub basis: String,
    /// `g`
    pub gpu: String,
    /// `s`, optional.
    pub source: Option<String>,
}

/// Why a payload was refused. Messages name the key and say what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShareError {
    /// No payload at all.
    #[error("the link has no overlay payload; expected `overlay=` followed by base64url text")]
    Empty,
    #[error("the overlay payload is {0} characters long; expected at most {MAX_PAYLOAD_CHARS}")]
    /// Over [`MAX_PAYLOAD_CHARS`] characters (the length).
    TooLong(usize),
    #[error("the overlay payload is not base64url text ({0}); expected only A–Z a–z 0–9 - _")]
    /// Not base64url (the decoder's message).
    Base64(String),
    #[error(
        "the overlay payload does not decode to UTF-8 text; expected base64url of compact JSON"
    )]
    /// Decodes to bytes that are not UTF-8.
    Utf8,
    #[error("the overlay payload is not valid JSON ({0}); expected a JSON object")]
    /// Decodes to text that is not JSON (the parser's message).
    Json(String),
    #[error("the overlay payload is not a JSON object; expected {{\"m\":…,\"a\":…}}")]
    /// Decodes to JSON that is not an object.
    NotObject,
    #[error("overlay key `{0}` is missing; expected {1}")]
    /// A required key is missing (the key, what was expected).
    Missing(&'static str, &'static str),
    #[error("overlay key `{0}` has the wrong type; expected {1}")]
    /// A key has the wrong JSON type (the key, what was expected).
    WrongType(&'static str, &'static str),
    #[error("overlay key `{0}` is {1} characters long; expected at most {MAX_FIELD_CHARS}")]
    /// A text value is over [`MAX_FIELD_CHARS`] characters (the key, the length).
    FieldTooLong(&'static str, usize),
    #[error("overlay key `{0}` is out of range; expected {1}")]
    /// A number is outside its range (the key, the range).
    OutOfRange(&'static str, &'static str),
    #[error("overlay key `b` is {0:?}; expected one of measured, interpolated, extrapolated, unavailable")]
    /// `b` is not one of the four bases (the value).
    BadBasis(String),
}

fn round_to(x: f64, decimals: i32) -> f64 {
    let f = 10f64.powi(decimals);
    let r = (x * f).round() / f;
    if r == 0.0 {
        0.0 // no "-0"
    } else {
        r
    }
}

/// Cut `s` to at most [`MAX_FIELD_CHARS`] characters and [`MAX_FIELD_JSON_BYTES`] bytes of JSON.
fn cap(s: &str) -> String {
    let mut out = String::new();
    let mut json_bytes = 2; // the quotes
    for (n, c) in s.chars().enumerate() {
        let cost = match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        };
        if n >= MAX_FIELD_CHARS || json_bytes + cost > MAX_FIELD_JSON_BYTES {
            break;
        }
        json_bytes += cost;
        out.push(c);
    }
    out
}

impl SharePoint {
    /// What survives an [`encode`] → [`decode`] round trip: strings capped, `N` rounded to 4 and
    /// `e` to 2 decimals, non-finite or out-of-range numbers dropped.
    pub fn normalized(&self) -> SharePoint {
        SharePoint {
            model: cap(&self.model),
            params_b: self
                .params_b
                .filter(|x| x.is_finite())
                .map(|x| round_to(x, 4))
                .filter(|x| *x > 0.0 && *x <= MAX_PARAMS_B),
            arch: cap(&self.arch),
            precision: cap(&self.precision),
            vs_fp16_pct: self
                .vs_fp16_pct
                .filter(|x| x.is_finite())
                .map(|x| round_to(x, 2))
                .filter(|x| x.abs() <= MAX_ABS_DELTA_PCT),
            basis: cap(&self.basis),
            gpu: cap(&self.gpu),
            source: self.source.as_deref().map(cap),
        }
    }
}

/// The base64url payload (no padding) for one point. Strings are capped and numbers rounded as
/// in [`SharePoint::normalized`]; an absent number is written as `null`.
pub fn encode(p: &SharePoint) -> String {
    let n = p.normalized();
    let mut m = Map::new();
    m.insert("m".into(), Value::String(n.model));
    m.insert("N".into(), n.params_b.map_or(Value::Null, Value::from));
    m.insert("a".into(), Value::String(n.arch));
    m.insert("p".into(), Value::String(n.precision));
    m.insert("e".into(), n.vs_fp16_pct.map_or(Value::Null, Value::from));
    m.insert("b".into(), Value::String(n.basis));
    m.insert("g".into(), Value::String(n.gpu));
    if let Some(s) = n.source {
        m.insert("s".into(), Value::String(s));
    }
    let json = serde_json::to_string(&Value::Object(m)).unwrap_or_default();
    URL_SAFE_NO_PAD.encode(json.as_bytes())
}

fn string_field(
    m: &Map<String, Value>,
    key: &'static str,
    what: &'static str,
) -> Result<Option<String>, ShareError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            let n = s.chars().count();
            if n > MAX_FIELD_CHARS {
                Err(ShareError::FieldTooLong(key, n))
            } else {
                Ok(Some(s.clone()))
            }
        }
        Some(_) => Err(ShareError::WrongType(key, what)),
    }
}

fn required(
    m: &Map<String, Value>,
    key: &'static str,
    what: &'static str,
) -> Result<String, ShareError> {
    string_field(m, key, what)?.ok_or(ShareError::Missing(key, what))
}

fn number_field(
    m: &Map<String, Value>,
    key: &'static str,
    what: &'static str,
) -> Result<Option<f64>, ShareError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(x) if x.is_finite() => Ok(Some(x)),
            _ => Err(ShareError::OutOfRange(key, what)),
        },
        Some(_) => Err(ShareError::WrongType(key, what)),
    }
}

/// Decode a payload (base64url or standard base64, padded or not; surrounding white space
/// ignored). `m`, `a`, `p`, `b`, `g` are required strings; `N` and `e` may be missing or null.
pub fn decode(payload: &str) -> Result<SharePoint, ShareError> {
    let n = payload.chars().count();
    if n > MAX_PAYLOAD_CHARS {
        return Err(ShareError::TooLong(n));
    }
    let trimmed = payload.trim();
    if trimmed.is_empty() {
        return Err(ShareError::Empty);
    }
    let normal: String = trimmed
        .trim_end_matches('=')
        .chars()
        .map(|c| match c {
            '+' => '-',
            '/' => '_',
            c => c,
        })
        .collect();
    let bytes = URL_SAFE_NO_PAD
        .decode(normal.as_bytes())
        .map_err(|e| ShareError::Base64(e.to_string()))?;
    let text = String::from_utf8(bytes).map_err(|_| ShareError::Utf8)?;
    let v: Value = serde_json::from_str(&text).map_err(|e| ShareError::Json(e.to_string()))?;
    let Value::Object(m) = v else {
        return Err(ShareError::NotObject);
    };

    let basis = required(
        &m,
        "b",
        "one of measured, interpolated, extrapolated, unavailable",
    )?;
    if basis.parse::<Basis>().is_err() {
        return Err(ShareError::BadBasis(crate::describe::shorten(&basis, 40)));
    }
    const N_WHAT: &str = "a positive number of billions of parameters, or null";
    let params_b = number_field(&m, "N", N_WHAT)?;
    if params_b.is_some_and(|x| x <= 0.0 || x > MAX_PARAMS_B) {
        return Err(ShareError::OutOfRange("N", N_WHAT));
    }
    const E_WHAT: &str = "a signed percentage vs FP16 (within ±1000000), or null";
    let vs_fp16_pct = number_field(&m, "e", E_WHAT)?;
    if vs_fp16_pct.is_some_and(|x| x.abs() > MAX_ABS_DELTA_PCT) {
        return Err(ShareError::OutOfRange("e", E_WHAT));
    }
    Ok(SharePoint {
        model: required(&m, "m", "the model name as a string")?,
        params_b,
        arch: required(&m, "a", "the GPU architecture as a string (e.g. hopper)")?,
        precision: required(&m, "p", "the precision as a string (e.g. NF4)")?,
        vs_fp16_pct,
        basis,
        gpu: required(&m, "g", "the GPU name as a string")?,
        source: string_field(&m, "s", "the measurement source as a string")?,
    })
}

/// The point a report contributes to an overlay: its size (or the name guess), its architecture
/// (or the one derived from the GPU name), and the recomputed delta when the report allows it.
pub fn from_report(r: &Report) -> SharePoint {
    SharePoint {
        model: r.workload.model_name.clone(),
        params_b: r.effective_params_b(),
        arch: r
            .effective_arch()
            .map(|a| a.as_str().to_string())
            .unwrap_or_else(|| r.system_under_test.gpu_arch.clone()),
        precision: r.workload.precision.clone(),
        vs_fp16_pct: r.delta_pct(),
        basis: r.results.basis.as_str().to_string(),
        gpu: r.system_under_test.gpu.clone(),
        source: r.measurement_source.clone(),
    }
    .normalized()
}

/// `base_url` + `?tab=run&overlay=` + payload (`&` instead of `?` when the URL already has a
/// query; any `#fragment` of `base_url` is dropped).
pub fn link(base_url: &str, p: &SharePoint) -> String {
    let base = base_url.split('#').next().unwrap_or("");
    let joiner = if base.contains('?') {
        if base.ends_with('?') || base.ends_with('&') {
            ""
        } else {
            "&"
        }
    } else {
        "?"
    };
    format!("{base}{joiner}tab=run&overlay={}", encode(p))
}

/// Undo the percent-encoding a browser or chat client may add to a payload (`%3D`, `%2B`, …).
fn percent_decode(s: &str) -> String {
    fn hex(c: u8) -> Option<u8> {
        (c as char).to_digit(16).map(|d| d as u8)
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push(h * 16 + l);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The payload inside a full link (`…?tab=run&overlay=PAYLOAD&…`, also after a `#`), or the
/// input itself when it is a bare payload. Percent-encoding is undone. Returns an empty string
/// for a URL without an `overlay` parameter ([`decode`] then reports [`ShareError::Empty`]).
pub fn payload_from_link(link_or_payload: &str) -> String {
    let s = link_or_payload.trim();
    // Parameters may follow `?` or `#` (hash routing); look at every `key=value` piece.
    let is_url = s.contains("://") || s.contains('?') || s.contains('#') || s.contains('&');
    if !is_url {
        return percent_decode(s);
    }
    let mut found: Option<&str> = None;
    for part in s.split(['?', '&', '#']) {
        if let Some(v) = part.strip_prefix("overlay=") {
            found = Some(v);
        }
    }
    found.map(percent_decode).unwrap_or_default()
}

/// [`payload_from_link`] then [`decode`].
pub fn decode_link(link_or_payload: &str) -> Result<SharePoint, ShareError> {
    if link_or_payload.len() > 4 * MAX_PAYLOAD_CHARS {
        return Err(ShareError::TooLong(link_or_payload.chars().count()));
    }
    decode(&payload_from_link(link_or_payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point() -> SharePoint {
        SharePoint {
            model: "Qwen/Qwen2.5-3B-Instruct".into(),
            params_b: Some(3.0),
            arch: "blackwell".into(),
            precision: "NF4".into(),
            vs_fp16_pct: Some(11.304907),
            basis: "measured".into(),
            gpu: "RTX 5090".into(),
            source: None,
        }
    }

    #[test]
    fn payload_is_the_upstream_compact_json() {
        let payload = encode(&point());
        let json = String::from_utf8(URL_SAFE_NO_PAD.decode(&payload).unwrap()).unwrap();
        assert_eq!(
            json,
            r#"{"m":"Qwen/Qwen2.5-3B-Instruct","N":3.0,"a":"blackwell","p":"NF4","e":11.3,"b":"measured","g":"RTX 5090"}"#
        );
        assert!(!payload.contains('='));
        let back = decode(&payload).unwrap();
        assert_eq!(back, point().normalized());
        assert_eq!(back.vs_fp16_pct, Some(11.3));
    }

    #[test]
    fn accepts_what_python_would_write() {
        // Python: base64.urlsafe_b64encode(json.dumps(d, separators=(",", ":")).encode()) keeps
        // the padding; standard b64encode uses + and /.
        let json = r#"{"m":"TinyLlama/TinyLlama-1.1B-Chat-v1.0","N":1.1,"a":"blackwell","p":"NF4","e":29.82,"b":"interpolated","g":"RTX 5090","s":"ecocompute-dataset (no local GPU)","zz":[1]}"#;
        let std = base64::engine::general_purpose::STANDARD.encode(json);
        let p = decode(&std).unwrap();
        assert_eq!(p.params_b, Some(1.1));
        assert_eq!(
            p.source.as_deref(),
            Some("ecocompute-dataset (no local GPU)")
        );
        let padded = base64::engine::general_purpose::URL_SAFE.encode(json);
        assert_eq!(decode(&padded).unwrap(), p);
        let url = format!("https://quantenergy.tech/?tab=run&overlay={padded}");
        assert_eq!(decode_link(&url).unwrap(), p);
        let escaped = url
            .replace('=', "%3D")
            .replacen("overlay%3D", "overlay=", 1);
        assert_eq!(decode_link(&escaped).unwrap(), p);
    }

    #[test]
    fn errors_name_the_key() {
        let enc = |j: &str| URL_SAFE_NO_PAD.encode(j);
        let e = decode(&enc(r#"{"m":"x","a":"ada","p":"NF4","b":"measured"}"#)).unwrap_err();
        assert_eq!(e, ShareError::Missing("g", "the GPU name as a string"));
        assert!(e.to_string().contains("`g`"));
        let e = decode(&enc(
            r#"{"m":"x","a":"ada","p":"NF4","b":"guessed","g":"x"}"#,
        ))
        .unwrap_err();
        assert!(matches!(e, ShareError::BadBasis(_)));
        let e = decode(&enc(
            r#"{"m":1,"a":"ada","p":"NF4","b":"measured","g":"x"}"#,
        ))
        .unwrap_err();
        assert_eq!(e, ShareError::WrongType("m", "the model name as a string"));
        let e = decode(&enc(
            r#"{"m":"x","N":-1,"a":"ada","p":"NF4","b":"measured","g":"x"}"#,
        ))
        .unwrap_err();
        assert!(matches!(e, ShareError::OutOfRange("N", _)));
        let e = decode(&enc(
            r#"{"m":"x","N":1e999,"a":"a","p":"p","b":"measured","g":"x"}"#,
        ))
        .unwrap_err();
        assert!(matches!(e, ShareError::Json(_)), "{e:?}");
        let long = "x".repeat(201);
        let e = decode(&enc(&format!(
            r#"{{"m":"{long}","a":"ada","p":"NF4","b":"measured","g":"x"}}"#
        )))
        .unwrap_err();
        assert_eq!(e, ShareError::FieldTooLong("m", 201));
        assert_eq!(decode(&enc("[]")).unwrap_err(), ShareError::NotObject);
        assert!(matches!(decode("!!!").unwrap_err(), ShareError::Base64(_)));
        assert_eq!(decode("").unwrap_err(), ShareError::Empty);
        assert_eq!(
            decode(&"A".repeat(MAX_PAYLOAD_CHARS + 1)).unwrap_err(),
            ShareError::TooLong(MAX_PAYLOAD_CHARS + 1)
        );
        assert_eq!(
            decode_link("https://x.org/?tab=run").unwrap_err(),
            ShareError::Empty
        );
    }

    #[test]
    fn links() {
        let l = link("https://example.org/qe/", &point());
        assert!(l.starts_with("https://example.org/qe/?tab=run&overlay="));
        assert_eq!(decode_link(&l).unwrap(), point().normalized());
        let l = link("https://example.org/?lang=en#top", &point());
        assert!(l.starts_with("https://example.org/?lang=en&tab=run&overlay="));
        assert_eq!(payload_from_link(" abc_- "), "abc_-");
        assert_eq!(
            payload_from_link("https://x/#/run?overlay=QUJD&x=1"),
            "QUJD"
        );
    }

    #[test]
    fn report_to_point() {
        let r: Report = serde_json::from_str(include_str!(
            "../../../data/examples/upstream-measured-illustrative.json"
        ))
        .unwrap();
        let p = from_report(&r);
        assert_eq!(p.vs_fp16_pct, Some(11.3)); // recomputed 11.3049 → 2 dp
        assert_eq!(p.arch, "blackwell");
        assert_eq!(p.params_b, Some(3.0));
        assert_eq!(decode(&encode(&p)).unwrap(), p);
    }

    #[test]
    fn worst_case_strings_stay_under_the_payload_limit() {
        let hostile: String = "\u{1}".repeat(500);
        let wide: String = "😀".repeat(500);
        let p = SharePoint {
            model: hostile.clone(),
            params_b: Some(1e300),
            arch: wide.clone(),
            precision: hostile.clone(),
            vs_fp16_pct: Some(f64::NAN),
            basis: wide.clone(),
            gpu: hostile,
            source: Some(wide),
        };
        let enc = encode(&p);
        assert!(enc.len() <= MAX_PAYLOAD_CHARS, "{}", enc.len());
        // Decodes up to the basis check (the basis is junk).
        assert!(matches!(decode(&enc).unwrap_err(), ShareError::BadBasis(_)));
    }
}
