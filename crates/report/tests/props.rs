//! Property tests: the share codec and the validator never panic on hostile input, and the
//! share codec round-trips.

use base64::Engine as _;
use proptest::prelude::*;
use report::share::{decode, decode_link, encode, link, SharePoint, MAX_PAYLOAD_CHARS};
use report::{to_markdown, validate_bytes, validate_str, Report};

fn finite() -> impl Strategy<Value = f64> {
    prop_oneof![
        -1e6f64..1e6,
        0.0f64..1000.0,
        Just(0.0),
        (-1e12f64..1e12),
        any::<f64>().prop_filter("finite", |x| x.is_finite()),
    ]
}

fn basis() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("measured".to_string()),
        Just("interpolated".to_string()),
        Just("extrapolated".to_string()),
        Just("unavailable".to_string()),
    ]
}

fn point() -> impl Strategy<Value = SharePoint> {
    (
        (
            any::<String>(),
            proptest::option::of(finite()),
            any::<String>(),
        ),
        (any::<String>(), proptest::option::of(finite()), basis()),
        (any::<String>(), proptest::option::of(any::<String>())),
    )
        .prop_map(
            |((model, params_b, arch), (precision, e, basis), (gpu, source))| SharePoint {
                model,
                params_b,
                arch,
                precision,
                vs_fp16_pct: e,
                basis,
                gpu,
                source,
            },
        )
}

fn ascii_point() -> impl Strategy<Value = SharePoint> {
    let s = "[ -~]{0,200}";
    (
        (s, proptest::option::of(0.0001f64..10_000.0), s),
        (s, proptest::option::of(-1000.0f64..1000.0), basis()),
        (s, proptest::option::of(s)),
    )
        .prop_map(
            |((model, params_b, arch), (precision, e, basis), (gpu, source))| SharePoint {
                model,
                params_b,
                arch,
                precision,
                vs_fp16_pct: e,
                basis,
                gpu,
                source,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn decode_never_panics_on_strings(s in any::<String>()) {
        let _ = decode(&s);
        let _ = decode_link(&s);
    }

    #[test]
    fn decode_never_panics_on_base64_of_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&bytes);
        let _ = decode(&payload);
    }

    #[test]
    fn decode_never_panics_on_json_like_payloads(
        m in any::<String>(), n in any::<f64>(), b in any::<String>(), junk in "[\\[\\]{}\":,0-9a-zA-Z.eE+-]{0,300}"
    ) {
        for json in [
            format!("{{\"m\":{},\"N\":{},\"a\":\"x\",\"p\":\"y\",\"b\":{},\"g\":\"z\"}}",
                serde_json::to_string(&m).unwrap(), n, serde_json::to_string(&b).unwrap()),
            junk.clone(),
        ] {
            let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json.as_bytes());
            let _ = decode(&payload);
        }
    }

    #[test]
    fn encode_decode_round_trips(p in point()) {
        let payload = encode(&p);
        prop_assert!(payload.len() <= MAX_PAYLOAD_CHARS, "{} chars", payload.len());
        let back = decode(&payload).expect("an encoded point decodes");
        prop_assert_eq!(&back, &p.normalized());
        // Rounding: N to 4 and e to 2 decimals.
        if let (Some(a), Some(b)) = (p.params_b, back.params_b) {
            prop_assert!((a - b).abs() <= 0.00005 + 1e-12 * a.abs());
        }
        if let (Some(a), Some(b)) = (p.vs_fp16_pct, back.vs_fp16_pct) {
            prop_assert!((a - b).abs() <= 0.005 + 1e-12 * a.abs());
        }
        // Idempotent: a decoded point encodes to the same payload.
        prop_assert_eq!(encode(&back), payload);
    }

    #[test]
    fn plain_points_round_trip_exactly_but_for_rounding(p in ascii_point()) {
        let back = decode(&encode(&p)).unwrap();
        prop_assert_eq!(&back.model, &p.model);
        prop_assert_eq!(&back.gpu, &p.gpu);
        prop_assert_eq!(&back.source, &p.source);
        let l = link("https://example.org/", &p);
        prop_assert_eq!(decode_link(&l).unwrap(), back);
    }

    #[test]
    fn validate_never_panics_on_strings(s in any::<String>()) {
        let v = validate_str(&s);
        let object_like = s.trim_start().starts_with('{');
        prop_assert!(!v.is_valid() || object_like, "accepted {:?}", s);
    }

    #[test]
    fn validate_never_panics_on_bytes(b in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = validate_bytes(&b);
    }

    #[test]
    fn validate_and_markdown_survive_hostile_fields(
        model in any::<String>(), gpu in any::<String>(), arch in any::<String>(),
        precision in any::<String>(), params in proptest::option::of(any::<f64>()),
        e in proptest::option::of(any::<f64>()), f in proptest::option::of(any::<f64>()),
    ) {
        let mut r: Report = serde_json::from_str(include_str!("../../../data/examples/measured.json")).unwrap();
        r.workload.model_name = model;
        r.system_under_test.gpu = gpu;
        r.system_under_test.gpu_arch = arch;
        r.workload.precision = precision;
        r.workload.params_b = params;
        r.results.energy_per_token_mj = e;
        r.results.fp16_energy_per_token_mj = f;
        let _ = report::semantic_checks(&r);
        let _ = report::share::from_report(&r);
        let md = to_markdown(&r);
        for row in md.lines().filter(|l| l.starts_with("| ")) {
            let bytes = row.as_bytes();
            let mut pipes = 0;
            let mut i = 0;
            while i < bytes.len() {
                if bytes[i] == b'\\' { i += 2; continue; }
                if bytes[i] == b'|' { pipes += 1; }
                i += 1;
            }
            prop_assert_eq!(pipes, 3, "{}", row);
        }
        let text = serde_json::to_string(&r).unwrap();
        let _ = validate_str(&text);
    }
}
