//! The static-cache forward against candle's eager models, on the CPU.

use super::*;
use crate::eager::{prompt_ids, CandleDecoder, CandleFactory, WeightSource};
use crate::ops::kv::{self as ops, AddU32};
use crate::testing::rel_diff;
use crate::testing::tiny;
use candle_core::{DType, Device, Tensor, D};
use meter::decoder::{Decoder, EngineKind};
use report::Precision;

/// A precision from its name (test shorthand).
fn prec(s: &str) -> Precision {
    s.parse().unwrap()
}

fn factory(family: &str, seed: u64) -> CandleFactory {
    CandleFactory::new(
        WeightSource::Synthetic {
            shape: tiny(family),
            seed,
        },
        Device::Cpu,
    )
    .unwrap()
}

fn tokens(t: &Tensor) -> Vec<u32> {
    t.flatten_all().unwrap().to_vec1::<u32>().unwrap()
}

/// Tolerance on max |Δlogit| / max |logit| per precision. F32 and GGUF (F32 activations) differ
/// only by summation order; F16/BF16 activations round every op, and the static forward's
/// attention runs its matmuls at other shapes (grouped rows, the whole cache) than the eager
/// one's (repeated KV, the filled prefix).
///
/// GGUF: the fused decode ops compute attention, SwiGLU and the norms in one F32 pass (other
/// summation orders than the eager ops), and the quantized matmuls quantize their input to 8-bit
/// blocks: an F32 rounding difference can flip one input's rounding there, a step of 1/127 of
/// the block's largest value (≈ 8e-3 relative). Seen: 1.6e-3 (qwen2 Q4_0); allowed: 4e-3, half
/// such a step. A position off by one gives ≥ 1e-2 on these tiny models (tested below).
fn tolerance(p: &str) -> f32 {
    match p {
        "F16" => 5e-3,
        "BF16" => 3e-2,
        "F32" => 1e-5,
        _ => 4e-3,
    }
}

/// Eager vs static, batch `b`, prompt of 4, `steps` greedy steps; returns the worst relative
/// logit difference. Asserts the greedy tokens are identical at every step.
fn compare(family: &str, p: &str, batch: usize, steps: usize) -> f32 {
    compare_skewed(family, p, batch, steps, 0, false)
}

/// [`compare`] with the static engine's position moved `skew` ahead after the prefill (a wrong
/// rotary position and cache row: the tolerances must catch it); tokens are checked only when
/// `skew` is 0.
///
/// `q8`: the static engine's quantized projections read the fused ops' Q8_1 blocks (the GPU's
/// path, here through the CPU reference of [`crate::ops::q8::QMatVec`]); teacher-forced like a skew,
/// tokens unchecked.
///
/// GGUF arms cache K/V in F32 on the CPU, as the eager models do (the GPU's F16 cache is checked
/// against it in `the_f16_cache_holds_the_f32_caches_values_rounded`).
fn compare_skewed(family: &str, p: &str, batch: usize, steps: usize, skew: u32, q8: bool) -> f32 {
    let mut f = factory(family, 21);
    let mut eager: CandleDecoder = f.load_candle(prec(p)).unwrap();
    let mut g = GraphFactory {
        inner: factory(family, 21),
    }
    .load_graph(prec(p))
    .unwrap();
    g.model.q8_on_cpu = q8;
    assert_eq!(g.model.q8_applies(batch), q8, "{family} {p}");
    let prompt_len = 4;
    let ids = prompt_ids(batch, prompt_len, eager_vocab(family));
    let prompt = Tensor::from_vec(ids, (batch, prompt_len), &Device::Cpu).unwrap();
    g.ensure_state(batch, prompt_len + steps + 1).unwrap();
    eager.clear();
    let mut cache = None;
    // The eager engine prefills batch 1 in one forward and batch > 1 one position at a time
    // (as CandleDecoder::generate does); the static one always in one forward.
    let mut el = if batch == 1 {
        eager.forward(&prompt, 0, &mut cache).unwrap()
    } else {
        let mut last = None;
        for i in 0..prompt_len {
            let col = prompt.narrow(1, i, 1).unwrap().contiguous().unwrap();
            last = Some(eager.forward(&col, i, &mut cache).unwrap());
        }
        last.unwrap()
    };
    let sl = g.prefill(&prompt).unwrap();
    let mut worst = rel_diff(&el, &sl);
    if skew > 0 {
        g.set_pos(prompt_len as u32 + skew).unwrap();
    }
    for step in 0..steps {
        let next = el.argmax_keepdim(D::Minus1).unwrap();
        let st = g.state.as_ref().unwrap();
        if skew > 0 || q8 {
            // Feed the eager engine's token so only the position (or the activations'
            // quantization, which can flip a near-tie) differs.
            g.set_tokens(&tokens(&next)).unwrap();
        } else {
            assert_eq!(
                tokens(&next),
                tokens(&st.tok),
                "{family} {p} b{batch}: greedy token differs before step {step}"
            );
        }
        el = eager.forward(&next, prompt_len + step, &mut cache).unwrap();
        let sl = g.step_eager().unwrap();
        worst = worst.max(rel_diff(&el, &sl));
    }
    if skew == 0 && !q8 {
        let next = el.argmax_keepdim(D::Minus1).unwrap();
        assert_eq!(tokens(&next), tokens(&g.state.as_ref().unwrap().tok));
    }
    worst
}

fn eager_vocab(family: &str) -> usize {
    tiny(family).vocab
}

#[test]
fn static_forward_matches_eager_logits_and_greedy_tokens_for_20_steps() {
    let mut report = Vec::new();
    for family in ["qwen2", "llama"] {
        for p in ["F32", "F16", "BF16", "Q8_0", "Q4_K", "Q4_0"] {
            let worst = compare(family, p, 1, 20);
            report.push(format!("{family} {p}: {worst:.2e}"));
            assert!(
                worst <= tolerance(p),
                "{family} {p}: max relative logit difference {worst:e} > {:e}",
                tolerance(p)
            );
        }
    }
    eprintln!("static vs eager, batch 1, worst relative logit difference: {report:?}");
}

/// Tolerance of the [`q8`](crate::ops::q8) path against the eager models on the CPU: the GGUF
/// tolerance, but for Q8_0. There the eager model's quantized matmuls quantize their activations
/// their own way (candle's CPU kernels) where the blocks path uses ggml's Q8_1 as the GPU does: two
/// 8-bit roundings of the same values, each as far from the exact product as the other (measured per
/// projection on these models: 0.6–1 % of the largest output for both), so the logits differ by
/// about one such rounding. Seen: 1.4e-2 (qwen2), 2.1e-2 (llama); Q4_0 ≤ 3.1e-3, Q4_K ≤ 2.6e-4. A
/// projection fed another row's blocks is off by far more (tested in `q8`); a wrong position is
/// caught by the Q4_0 rows here and by `a_wrong_decode_position_fails_the_tolerances`.
fn q8_cpu_tolerance(p: &str) -> f32 {
    if p == "Q8_0" {
        3e-2
    } else {
        tolerance(p)
    }
}

/// The GPU's GGUF decode path — projections fed the Q8_1 blocks the norms, attention and SwiGLU
/// wrote — against the eager models, teacher-forced with the eager tokens for 20 steps at batch 1
/// and 12 at batch 3: logits within [`q8_cpu_tolerance`] (tokens unchecked: on the GPU both
/// engines quantize to Q8_1, and `engine-check` compares their greedy tokens there).
#[test]
fn q8_blocks_path_matches_eager_logits() {
    let mut report = Vec::new();
    for family in ["qwen2", "llama"] {
        for p in ["Q8_0", "Q4_K", "Q4_0"] {
            for (batch, steps) in [(1, 20), (3, 12)] {
                let worst = compare_skewed(family, p, batch, steps, 0, true);
                report.push(format!("{family} {p} b{batch}: {worst:.2e}"));
                let tol = q8_cpu_tolerance(p);
                assert!(worst <= tol, "{family} {p} b{batch}: {worst:e} > {tol:e}");
            }
        }
    }
    eprintln!("q8 blocks path vs eager, worst relative logit difference: {report:?}");
}

/// The tolerances catch a real bug: a decode position one too far (wrong rotation, a gap in the
/// cache) puts the logits outside them. Not Q4_K: the synthetic Q4_K tiny models' logits do not
/// depend on attention at all (the skew changes nothing), so they cannot show it.
#[test]
fn a_wrong_decode_position_fails_the_tolerances() {
    let mut seen = Vec::new();
    for family in ["qwen2", "llama"] {
        for p in ["F32", "F16", "BF16", "Q8_0", "Q4_0"] {
            let worst = compare_skewed(family, p, 1, 3, 1, false);
            seen.push(format!("{family} {p}: {worst:.2e}"));
            assert!(worst > 2.0 * tolerance(p), "{family} {p}: {worst:e}");
        }
    }
    eprintln!("skewed by one position, worst relative logit difference: {seen:?}");
}

#[test]
fn static_forward_matches_eager_at_batch_3() {
    for family in ["qwen2", "llama"] {
        for p in ["F32", "Q4_0"] {
            let worst = compare(family, p, 3, 12);
            assert!(worst <= tolerance(p), "{family} {p} b3: {worst:e}");
        }
    }
}

/// The prefill in one forward, one position at a time (through the static step) and in chunks of
/// 3 agree, so the causal mask of a multi-position forward, and of a chunk that attends to the
/// cache's first positions only, is right.
#[test]
fn prefill_in_one_forward_equals_prefill_position_by_position_and_in_chunks() {
    for family in ["qwen2", "llama"] {
        for p in ["F32", "Q8_0"] {
            let load = |chunk| {
                let mut g = GraphFactory {
                    inner: factory(family, 5),
                }
                .load_graph(prec(p))
                .unwrap();
                g.prefill_chunk = chunk;
                g.ensure_state(2, 16).unwrap();
                g
            };
            let mut all = [load(PREFILL_CHUNK), load(1), load(3)];
            let ids = prompt_ids(2, 7, tiny(family).vocab);
            let prompt = Tensor::from_vec(ids, (2, 7), &Device::Cpu).unwrap();
            let l: Vec<Tensor> = all
                .iter_mut()
                .map(|g| g.prefill(&prompt).unwrap())
                .collect();
            for (i, li) in l.iter().enumerate().skip(1) {
                assert!(rel_diff(&l[0], li) < 1e-5, "{family} {p} prefill {i}");
            }
            for _ in 0..5 {
                let l: Vec<Tensor> = all.iter_mut().map(|g| g.step_eager().unwrap()).collect();
                for (i, li) in l.iter().enumerate().skip(1) {
                    assert!(rel_diff(&l[0], li) < 1e-5, "{family} {p} step {i}");
                }
            }
        }
    }
}

/// GGUF arms on the GPU cache K/V in F16 (as llama.cpp's attention reads them). The cache's writers round what the F32
/// cache would hold: layer 0's rows (computed before any attention reads the cache) are the F32
/// cache's rows rounded to F16, exactly, after the same prefill and after a decode step fed the
/// same token — the prefill's write and the fused step's. Deeper layers read the rounded cache.
#[test]
fn the_f16_cache_holds_the_f32_caches_values_rounded() {
    let rows = |g: &GraphDecoder, layer: usize, upto: usize| -> Vec<f32> {
        let (k, v) = &g.state.as_ref().unwrap().kv[layer];
        let take = |t: &Tensor| {
            t.narrow(2, 0, upto)
                .unwrap()
                .to_dtype(DType::F32)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
        };
        [take(k), take(v)].concat()
    };
    let round = |v: Vec<f32>| -> Vec<f32> {
        v.into_iter()
            .map(|x| half::f16::from_f32(x).to_f32())
            .collect()
    };
    for family in ["qwen2", "llama"] {
        for p in ["Q8_0", "Q4_0"] {
            let load = |f16_cache| {
                let mut g = GraphFactory {
                    inner: factory(family, 9),
                }
                .load_graph(prec(p))
                .unwrap();
                g.model.f16_cache = f16_cache;
                g.ensure_state(1, 12).unwrap();
                g
            };
            let (mut half, mut full) = (load(true), load(false));
            assert_eq!(half.model.cache_dtype(), DType::F16);
            assert_eq!(full.model.cache_dtype(), DType::F32);
            assert!(
                half.kernel().contains("KV cache (F16)"),
                "{}",
                half.kernel()
            );
            let ids = prompt_ids(1, 5, tiny(family).vocab);
            let prompt = Tensor::from_vec(ids, (1, 5), &Device::Cpu).unwrap();
            half.prefill(&prompt).unwrap();
            full.prefill(&prompt).unwrap();
            let same = |h: Vec<f32>, f: Vec<f32>| {
                assert!(f.iter().any(|&x| x != 0.0), "{family} {p}: an empty cache");
                h.len() == f.len() && h == round(f)
            };
            assert!(
                same(rows(&half, 0, 5), rows(&full, 0, 5)),
                "{family} {p}: prefill"
            );
            // Deeper layers' rows differ by more than a rounding: they read the rounded cache.
            let deeper = rows(&half, 1, 5) != round(rows(&full, 1, 5));
            assert!(
                deeper,
                "{family} {p}: layer 1 would not show the cache's dtype"
            );
            half.set_tokens(&[3]).unwrap();
            full.set_tokens(&[3]).unwrap();
            half.step_eager().unwrap();
            full.step_eager().unwrap();
            let (h, f) = (rows(&half, 0, 6), rows(&full, 0, 6));
            assert!(same(h, f), "{family} {p}: layer 0 after a decode step");
        }
    }
}

/// The F16 prefill attention of GGUF arms with the F16 cache (`QE_PREFILL_F16_ATTN`, on the GPU):
/// the scale folded into q, scores and probabilities in F16. Its prefill logits stay within
/// F16's rounding of the F32 attention's over the same cache (seen ≤ 1.2e-2 on these tiny random
/// models, whose logits move 1.5e-2 with the cache's rounding alone), and a scale applied twice
/// (or not at all) is far outside that.
#[test]
fn the_f16_prefill_attention_stays_within_f16_rounding_of_the_f32_one() {
    for family in ["qwen2", "llama"] {
        for p in ["Q8_0", "Q4_0"] {
            let logits = |f16_scores: bool| {
                let mut g = GraphFactory {
                    inner: factory(family, 13),
                }
                .load_graph(prec(p))
                .unwrap();
                g.model.f16_cache = true;
                g.model.f16_scores = f16_scores;
                assert_eq!(g.model.prefill_scores_in_f16(), f16_scores);
                assert_eq!(g.kernel().contains("prefill scores in F16"), f16_scores);
                g.ensure_state(2, 12).unwrap();
                let ids = prompt_ids(2, 9, tiny(family).vocab);
                g.prefill(&Tensor::from_vec(ids, (2, 9), &Device::Cpu).unwrap())
                    .unwrap()
            };
            let d = rel_diff(&logits(false), &logits(true));
            assert!(d <= 3e-2, "{family} {p}: {d:e}");
            eprintln!("{family} {p}: F16 vs F32 prefill attention {d:.2e}");
        }
    }
}

/// What a decode step reads and writes are device tensors of the state (the model's device),
/// the step takes no host argument, and repeating a generation repeats its tokens exactly — the
/// eager engine's greedy tokens.
#[test]
fn decode_state_lives_on_the_device_and_repeated_generations_repeat_the_eager_tokens() {
    for (family, p) in [("qwen2", "F16"), ("llama", "Q4_K")] {
        let mut g = GraphFactory {
            inner: factory(family, 3),
        }
        .load_graph(prec(p))
        .unwrap();
        // Through the Decoder trait, as the protocol calls it: twice, same state.
        assert_eq!(g.generate(1, 4, 12).unwrap(), 12);
        let st = g.state.as_ref().unwrap();
        assert_eq!((st.batch, st.ctx), (1, 16));
        for t in st.tensors() {
            assert!(t.device().same_device(&g.model.device));
        }
        assert_eq!(st.pos.dtype(), DType::U32);
        assert_eq!(st.tok.dtype(), DType::U32);
        // pos after prompt 4 + 11 steps.
        assert_eq!(st.pos.to_vec1::<u32>().unwrap(), vec![15]);
        let trajectory = |g: &mut GraphDecoder| -> Vec<u32> {
            let prompt =
                Tensor::from_vec(prompt_ids(1, 4, tiny(family).vocab), (1, 4), &Device::Cpu)
                    .unwrap();
            g.prefill(&prompt).unwrap();
            let mut out = tokens(&g.state.as_ref().unwrap().tok);
            for _ in 1..12 {
                g.step().unwrap();
                out.extend(tokens(&g.state.as_ref().unwrap().tok));
            }
            out
        };
        let first = trajectory(&mut g);
        let second = trajectory(&mut g);
        assert_eq!(first, second, "{family} {p}");
        // The eager engine's greedy tokens.
        let mut f = factory(family, 3);
        let mut e = f.load_candle(prec(p)).unwrap();
        let prompt =
            Tensor::from_vec(prompt_ids(1, 4, tiny(family).vocab), (1, 4), &Device::Cpu).unwrap();
        let mut cache = None;
        let mut next = e
            .forward(&prompt, 0, &mut cache)
            .unwrap()
            .argmax_keepdim(D::Minus1)
            .unwrap();
        let mut want = tokens(&next);
        for pos in 4..15 {
            next = e
                .forward(&next, pos, &mut cache)
                .unwrap()
                .argmax_keepdim(D::Minus1)
                .unwrap();
            want.extend(tokens(&next));
        }
        assert_eq!(first, want, "{family} {p}");
    }
}

#[test]
fn graph_engine_scores_the_same_perplexity_as_the_eager_engine() {
    for family in ["qwen2", "llama"] {
        let ids: Vec<u32> = (0..20u32).map(|i| i * 37 % 512).collect();
        let a = factory(family, 9)
            .load_candle(prec("F32"))
            .unwrap()
            .nll(&ids)
            .unwrap();
        let mut g = GraphFactory {
            inner: factory(family, 9),
        }
        .load_graph(prec("F32"))
        .unwrap();
        let b = g.nll(&ids).unwrap();
        assert!((a - b).abs() / a < 1e-5, "{family}: eager {a} vs graph {b}");
        // Decoding after scoring (a new state) still works.
        assert_eq!(g.generate(2, 3, 4).unwrap(), 8);
        assert!(g.kernel().contains("static KV cache"), "{}", g.kernel());
    }
}

#[test]
fn kv_write_and_add_u32_work_in_place_on_the_cpu() {
    let dev = Device::Cpu;
    let cache = Tensor::zeros((1, 2, 5, 3), DType::F32, &dev).unwrap();
    let new = Tensor::arange(1f32, 13f32, &dev)
        .unwrap()
        .reshape((1, 2, 2, 3))
        .unwrap();
    let pos = Tensor::new(&[2u32], &dev).unwrap();
    cache.inplace_op3(&new, &pos, &ops::KvWrite).unwrap();
    let rows = cache.squeeze(0).unwrap().to_vec3::<f32>().unwrap();
    assert_eq!(rows[0][1], vec![0.0; 3]);
    assert_eq!(rows[0][2], vec![1.0, 2.0, 3.0]);
    assert_eq!(rows[0][3], vec![4.0, 5.0, 6.0]);
    assert_eq!(rows[1][2], vec![7.0, 8.0, 9.0]);
    assert_eq!(rows[1][4], vec![0.0; 3]);
    pos.inplace_op1(&AddU32(3)).unwrap();
    assert_eq!(pos.to_vec1::<u32>().unwrap(), vec![5]);
    // Past the end of the cache: refused on the CPU (the CUDA kernel skips the write).
    assert!(cache.inplace_op3(&new, &pos, &ops::KvWrite).is_err());
}

#[test]
fn engine_names_keep_the_stacks_apart() {
    assert_eq!(EngineKind::default(), EngineKind::Graph);
    assert_eq!(EngineKind::Graph.stack_name(), "candle-graph");
    assert_eq!(EngineKind::Eager.stack_name(), "candle");
    let mut f = crate::factory(EngineKind::Eager, factory("qwen2", 1));
    assert!(!f.load(prec("F32")).unwrap().kernel().contains("static"));
    let mut f = crate::factory(EngineKind::Graph, factory("qwen2", 1));
    assert!(f
        .load(prec("F32"))
        .unwrap()
        .kernel()
        .contains("static KV cache"));
}

/// A decode at a depth needs a prefill that reached it and a cache that holds its steps; each
/// call rewinds, so the position ends at depth + steps whatever came before.
#[test]
fn decode_at_a_depth_rewinds_and_refuses_what_it_cannot_do() {
    let mut g = GraphFactory {
        inner: factory("qwen2", 3),
    }
    .load_graph(prec("F32"))
    .unwrap();
    assert!(g.decode_from(4, 2).is_err(), "no prefill yet");
    g.prefill_fresh(1, 6, 10).unwrap();
    let pos = |g: &GraphDecoder| g.state.as_ref().unwrap().pos.to_vec1::<u32>().unwrap()[0];
    assert_eq!(pos(&g), 6);
    for _ in 0..2 {
        assert_eq!(g.decode_from(6, 3).unwrap(), 3);
        assert_eq!(pos(&g), 9);
    }
    assert!(g.decode_from(7, 1).is_err(), "past the prefill");
    assert!(g.decode_from(6, 5).is_err(), "past the cache");
    assert!(g.decode_from(6, 0).is_err(), "no step");
}
