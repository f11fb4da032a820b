//! The measurement protocol with a real decoder: the eager candle engine on the CPU under the
//! meter's fake meter (the protocol's own tests, against a fake decoder, are the meter's).

use engine::eager::{CandleFactory, WeightSource};
use meter::meter::{FakeClock, FakeMeter};
use meter::protocol::{self, PerplexityConfig};
use meter::run_report::{build_report, RunContext, WeightsInfo};
use meter::testing::{precision as p, short_protocol, synthetic_context};
use std::sync::Arc;

/// Power: 300 W while "decoding".
fn meter() -> FakeMeter {
    FakeMeter::new(|_| 300.0)
}

/// Qwen2-0.5B's family and head geometry with two layers and a small vocabulary, so the tests
/// are quick.
fn tiny_qwen2() -> analysis::ModelShape {
    let mut shape = analysis::find_shape("qwen2-0.5b").unwrap().clone();
    shape.layers = 2;
    shape.vocab = 1024;
    shape.hidden = 256;
    shape.heads = 4;
    shape.kv_heads = 2;
    shape.head_dim = 64;
    shape.intermediate = 512;
    shape
}

/// The protocol over `f` under the fake meter `m`. Real time passes on the CPU; the fake counter
/// only moves with virtual time, so a thread advances it to stand in for the GPU drawing power.
fn run_ticking(
    c: &protocol::ProtocolConfig,
    m: &FakeMeter,
    f: &mut dyn meter::decoder::DecoderFactory,
) -> protocol::Outcome {
    let mut mm = m.clone();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (m2, s2) = (m.clone(), stop.clone());
    let ticker = std::thread::spawn(move || {
        while !s2.load(std::sync::atomic::Ordering::Relaxed) {
            m2.advance(0.001);
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    });
    let out = protocol::run(c, &mut mm, f, Arc::new(FakeClock(m.clone())));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    ticker.join().unwrap();
    out.unwrap()
}

#[test]
fn real_candle_decode_on_cpu_under_the_fake_meter() {
    let shape = tiny_qwen2();
    let m = meter();
    let mut f = CandleFactory::new(
        WeightSource::Synthetic { shape, seed: 3 },
        candle_core::Device::Cpu,
    )
    .unwrap();
    // Perplexity on the same weights: the quantized arm is the F32 arm's weights, quantized.
    f.quantize_synthetic_floats = true;
    let mut c = short_protocol(&["Q4_0"]);
    c.baseline = Some(p("F32"));
    c.tokens = 4;
    c.iterations = 2;
    c.perplexity = Some(PerplexityConfig::embedded(40, 20));
    let out = run_ticking(&c, &m, &mut f);
    for a in &out.arms {
        let r = a
            .outcome
            .as_ref()
            .unwrap_or_else(|e| panic!("{}: {e}", a.precision));
        assert_eq!(r.tokens_generated, 8);
        assert!(r.kernel.contains("candle"));
    }
    let same_weights = RunContext {
        weights: WeightsInfo::Synthetic {
            architecture: "tiny".into(),
            seed: 3,
            quantized_from_float: true,
        },
        ..synthetic_context()
    };
    let rep = build_report(&c, &out, &same_weights, p("Q4_0")).unwrap();
    // A typed field of `report::Weights` (no longer in `extra`), and in the JSON as before.
    assert_eq!(
        rep.weights.as_ref().unwrap().quantized_from_float,
        Some(true)
    );
    assert_eq!(
        serde_json::to_value(&rep)
            .unwrap()
            .pointer("/weights/quantized_from_float"),
        Some(&serde_json::json!(true))
    );
    let v = report::validate_str(&serde_json::to_string(&rep).unwrap());
    assert!(v.errors.is_empty(), "{:?}", v.errors);
    // Synthetic weights, but the same ones in both arms: a Δ, with both perplexities.
    let q = rep.quality.unwrap();
    assert_eq!(q.basis, "measured");
    assert_eq!((q.tokens_evaluated, q.windows), (Some(38), Some(2)));
    let (v, f, d) = (
        q.value.unwrap(),
        q.fp16_value.unwrap(),
        q.delta_vs_fp16_pct.unwrap(),
    );
    assert!(
        d != 0.0 && ((v / f - 1.0) * 100.0 - d).abs() < 0.01,
        "{v} {f} {d}"
    );
}

/// A context run through the graph engine on the CPU: the prefill of the context and the decode
/// at that depth run in windows of their own, the decode rewound to the depth each iteration
/// (tokens per iteration × iterations, never the prefill's), and the report validates.
#[test]
fn graph_engine_context_run_on_cpu_under_the_fake_meter() {
    let shape = tiny_qwen2();
    let m = meter();
    let inner = CandleFactory::new(
        WeightSource::Synthetic { shape, seed: 3 },
        candle_core::Device::Cpu,
    )
    .unwrap();
    let mut f = engine::factory(meter::decoder::EngineKind::Graph, inner);
    let mut c = short_protocol(&["Q4_0"]);
    c.baseline = Some(p("F32"));
    c.tokens = 4;
    c.iterations = 2;
    c.context = Some(24);
    // Virtual time only moves with the ticker: a short minimum keeps the test quick.
    c.min_window_s = 0.0;
    let out = run_ticking(&c, &m, f.as_mut());
    for a in &out.arms {
        let r = a
            .outcome
            .as_ref()
            .unwrap_or_else(|e| panic!("{}: {e}", a.precision));
        // 2 decodes of 4 tokens at depth 24: the prefill's tokens are not counted.
        assert_eq!(r.tokens_generated, 8, "{}", a.precision);
        let pre = r.prefill.as_ref().expect("a prefill window");
        assert_eq!((pre.prefills, pre.prompt_tokens), (2, 48));
        assert!(pre.counter_j > 0.0 && pre.ttft_s > 0.0, "{pre:?}");
    }
    let rep = build_report(&c, &out, &synthetic_context(), p("Q4_0")).unwrap();
    assert_eq!(rep.workload.context_depth, Some(24));
    assert!(rep.results.prefill.is_some());
    let v = report::validate_str(&serde_json::to_string(&rep).unwrap());
    assert!(v.errors.is_empty(), "{:?}", v.errors);
}

/// A prompt-set run through the graph engine on the CPU: each pass serves both requests (a fresh
/// prefill of 24 or 40 tokens in one cache of 43, then 4 or 3 tokens from that depth), the
/// prefills also alone in their own window, and the report validates with its requests.
#[test]
fn graph_engine_prompt_set_run_on_cpu_under_the_fake_meter() {
    let shape = tiny_qwen2();
    let m = meter();
    let inner = CandleFactory::new(
        WeightSource::Synthetic { shape, seed: 3 },
        candle_core::Device::Cpu,
    )
    .unwrap();
    let mut f = engine::factory(meter::decoder::EngineKind::Graph, inner);
    let set = meter::prompts::PromptSet::parse(
        br#"{"name": "tiny", "license": "CC0-1.0", "token_counts": "none", "prompts": [
            {"id": "a", "kind": "chat", "prompt_tokens": 24, "output_tokens": 4, "text": ""},
            {"id": "b", "kind": "rag", "prompt_tokens": 40, "output_tokens": 3, "text": ""}]}"#,
    )
    .unwrap();
    let mut c = short_protocol(&["Q4_0"]);
    c.baseline = Some(p("F32"));
    c.iterations = 2;
    c.prompts = Some(set);
    c.min_window_s = 0.0;
    let out = run_ticking(&c, &m, f.as_mut());
    for a in &out.arms {
        let r = a
            .outcome
            .as_ref()
            .unwrap_or_else(|e| panic!("{}: {e}", a.precision));
        // 2 passes of 4 + 3 tokens; their prefills are not counted as output.
        assert_eq!(r.tokens_generated, 14, "{}", a.precision);
        let q = r.requests.as_ref().expect("a requests window");
        assert_eq!((q.passes, q.requests, q.prompt_tokens), (2, 4, 128));
        let pre = r.prefill.as_ref().expect("a prefill window");
        assert_eq!((pre.prefills, pre.prompt_tokens), (2, 64));
    }
    let rep = build_report(&c, &out, &synthetic_context(), p("Q4_0")).unwrap();
    assert_eq!(rep.workload.context_length, Some(43));
    assert_eq!(rep.results.requests.as_ref().unwrap().requests, 4);
    let v = report::validate_str(&serde_json::to_string(&rep).unwrap());
    assert!(v.errors.is_empty(), "{:?}", v.errors);
}
