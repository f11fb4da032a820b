//! The fused ops' CPU implementations against the candle ops they replace.

use super::kv::KvWrite;
use super::*;
use crate::testing::{attn_dims, AttnCase};
use candle_core::{DType, Device, IndexOp, Tensor, D};

/// [`crate::testing::rand`]: seeded uniform values in [-1, 1) as an F32 tensor.
fn rand(shape: &[usize], seed: u64) -> Tensor {
    crate::testing::rand(shape, seed).unwrap()
}

/// max |a − b| / max |b|: [`crate::testing::rel_diff`] with `b` the reference.
fn rel(a: &Tensor, b: &Tensor) -> f32 {
    crate::testing::rel_diff(b, a)
}

/// Tolerance of a fused op's output vs the same composition in F32 from the same (rounded)
/// inputs: the fused op computes in F32 and rounds once, so the difference is that rounding
/// (half an ulp: 2⁻¹¹ F16, 2⁻⁸ BF16, relative to the largest value, ×4 for values that pass
/// through a rounded intermediate) or F32 summation order.
fn tol(dt: DType) -> f32 {
    match dt {
        DType::F16 => 2e-3,
        DType::BF16 => 1.6e-2,
        _ => 1e-5,
    }
}

/// `t`'s values rounded to `dt`, in F32.
fn round_to(t: Tensor, dt: DType) -> Tensor {
    t.to_dtype(dt).unwrap().to_dtype(DType::F32).unwrap()
}

/// The inputs of one attention case (F32), rounded to their dtypes so the reference and the op
/// see the same values.
struct AttnInputs {
    qkv: Tensor,
    bias: Tensor,
    old_k: Tensor,
    old_v: Tensor,
    cos: Tensor,
    sin: Tensor,
    /// The position, as the ops take it.
    pos: Tensor,
}

impl AttnInputs {
    fn new(c: AttnCase, act: DType, cache: DType, seed: u64) -> AttnInputs {
        let (b, _, nkv, hd, ctx, pos, _) = c;
        let nq = attn_dims(c, false).qkv_width();
        let angles = rand(&[ctx, hd / 2], seed + 4).affine(3.0, 0.0).unwrap();
        AttnInputs {
            qkv: round_to(rand(&[b, 1, nq], seed), act),
            bias: round_to(rand(&[nq], seed + 1), cache),
            old_k: round_to(rand(&[b, nkv, ctx, hd], seed + 2), cache),
            old_v: round_to(rand(&[b, nkv, ctx, hd], seed + 3), cache),
            cos: angles.cos().unwrap(),
            sin: angles.sin().unwrap(),
            pos: Tensor::new(&[pos as u32], &Device::Cpu).unwrap(),
        }
    }
}

/// The fused ops: RopeKv into the layer buffer (K cache, V cache, bias) in `cache`, then
/// DecodeAttn; (the buffer, the attention's output in `act`).
fn fused_attention(x: &AttnInputs, dims: AttnDims, act: DType, cache: DType) -> (Tensor, Tensor) {
    let mut parts = vec![
        x.old_k.flatten_all().unwrap(),
        x.old_v.flatten_all().unwrap(),
    ];
    if dims.bias {
        parts.push(x.bias.clone());
    }
    let buf = Tensor::cat(&parts, 0).unwrap().to_dtype(cache).unwrap();
    let table = Tensor::cat(&[&x.cos, &x.sin], 1).unwrap();
    let step = table.apply_op2_no_bwd(&x.pos, &RopeStep).unwrap();
    let q_in = x.qkv.to_dtype(act).unwrap();
    buf.inplace_op3(&q_in, &step, &RopeKv(dims)).unwrap();
    let op = DecodeAttn {
        dims,
        scale: 1.0 / (dims.head_dim as f32).sqrt(),
        q8: false,
        fold_kv: false,
        split: None,
    };
    let out = q_in.apply_op3_no_bwd(&buf, &step, &op).unwrap();
    (buf, out)
}

/// Candle's composition in F32 up to the cache write: bias add, rope / rope_i, KvWrite; (the
/// rotated queries, the K and V caches with the new rows as the cache stores them).
fn reference_cache(x: &AttnInputs, c: AttnCase, cache: DType, bias: bool) -> [Tensor; 3] {
    let (b, nh, nkv, hd, _, pos, interleaved) = c;
    let qkv = if bias {
        x.qkv.broadcast_add(&x.bias).unwrap()
    } else {
        x.qkv.clone()
    };
    let heads = |from: usize, n: usize| {
        qkv.narrow(D::Minus1, from * hd, n * hd)
            .unwrap()
            .reshape((b, 1, n, hd))
            .unwrap()
            .transpose(1, 2)
            .unwrap()
            .contiguous()
            .unwrap()
    };
    let (q, k, v) = (heads(0, nh), heads(nh, nkv), heads(nh + nkv, nkv));
    let (c1, s1) = (
        x.cos.i(pos..pos + 1).unwrap(),
        x.sin.i(pos..pos + 1).unwrap(),
    );
    let rope = |t: &Tensor| {
        if interleaved {
            candle_nn::rotary_emb::rope_i(t, &c1, &s1).unwrap()
        } else {
            candle_nn::rotary_emb::rope(t, &c1, &s1).unwrap()
        }
    };
    let (q, k) = (rope(&q), rope(&k));
    let (kc, vc) = (x.old_k.copy().unwrap(), x.old_v.copy().unwrap());
    kc.inplace_op3(&k, &x.pos, &KvWrite).unwrap();
    vc.inplace_op3(&v, &x.pos, &KvWrite).unwrap();
    [q, round_to(kc, cache), round_to(vc, cache)]
}

/// Candle's attention in F32 over the caches' first `pos + 1` rows: repeated KV heads, matmul,
/// scale, softmax, matmul; `[b, 1, heads × head dim]`.
fn reference_attention(q: &Tensor, kc: &Tensor, vc: &Tensor, c: AttnCase) -> Tensor {
    let (b, nh, nkv, hd, _, pos, _) = c;
    let g = nh / nkv;
    let rep = |t: &Tensor| {
        let t = t.narrow(2, 0, pos + 1).unwrap();
        Tensor::cat(&vec![&t; g], 2)
            .unwrap()
            .reshape((b, nkv * g, pos + 1, hd))
            .unwrap()
    };
    // Query head h uses KV head h / g: repeat each KV head g times, adjacent.
    let (kr, vr) = (rep(kc), rep(vc));
    let att = (q.matmul(&kr.t().unwrap()).unwrap() / (hd as f64).sqrt()).unwrap();
    let att = candle_nn::ops::softmax_last_dim(&att).unwrap();
    att.matmul(&vr)
        .unwrap()
        .transpose(1, 2)
        .unwrap()
        .reshape((b, 1, nh * hd))
        .unwrap()
}

/// RopeKv then DecodeAttn against candle's composition (bias add, rope / rope_i, KvWrite, repeated
/// KV heads, matmul, scale, masked softmax, matmul) computed in F32 from the same inputs.
fn attention_case(c: AttnCase, act: DType, cache: DType, bias: bool, seed: u64) {
    let (b, nh, nkv, hd, ctx, ..) = c;
    let dims = attn_dims(c, bias);
    let x = AttnInputs::new(c, act, cache, seed);
    let (buf, out) = fused_attention(&x, dims, act, cache);
    assert_eq!((out.dims(), out.dtype()), (&[b, 1, nh * hd][..], act));

    let [q, kc, vc] = reference_cache(&x, c, cache, bias);
    let n = dims.cache_len();
    let got_k = buf
        .narrow(0, 0, n)
        .unwrap()
        .reshape((b, nkv, ctx, hd))
        .unwrap();
    let got_v = buf
        .narrow(0, n, n)
        .unwrap()
        .reshape((b, nkv, ctx, hd))
        .unwrap();
    // K, V pass through the activations' dtype (the bias add and rotary round to it, as the
    // eager ops do) before the cache's.
    let t = 2.0 * tol(act).max(tol(cache));
    assert!(
        rel(&got_k, &kc) <= t,
        "K {c:?} {act:?}/{cache:?}: {}",
        rel(&got_k, &kc)
    );
    assert!(
        rel(&got_v, &vc) <= t,
        "V {c:?} {act:?}/{cache:?}: {}",
        rel(&got_v, &vc)
    );
    let want = reference_attention(&q, &kc, &vc, c);
    let r = rel(&out, &want);
    assert!(
        r <= tol(act) * 2.0,
        "attention {c:?} {act:?}/{cache:?} bias {bias}: {r:e}"
    );
}

#[test]
fn rope_kv_and_decode_attention_match_candle_ops() {
    let cases: [AttnCase; 6] = [
        (1, 4, 4, 8, 5, 0, false),
        (1, 4, 4, 8, 5, 4, false),
        (3, 6, 2, 16, 9, 5, false),
        (2, 8, 2, 64, 300, 299, false),
        (2, 4, 1, 32, 7, 3, true),
        (1, 14, 2, 64, 40, 17, true),
    ];
    let mut seed = 1;
    for c in cases {
        for (act, cache) in [
            (DType::F32, DType::F32),
            (DType::F16, DType::F16),
            (DType::BF16, DType::BF16),
            (DType::F16, DType::F32),
        ] {
            for bias in [false, true] {
                attention_case(c, act, cache, bias, seed);
                seed += 5;
            }
        }
    }
}

#[test]
fn rope_step_and_kv_write_refuse_a_position_past_the_cache() {
    let table = rand(&[4, 8], 1);
    let pos = Tensor::new(&[4u32], &Device::Cpu).unwrap();
    assert!(table.apply_op2_no_bwd(&pos, &RopeStep).is_err());
    let pos = Tensor::new(&[3u32], &Device::Cpu).unwrap();
    let step = table
        .apply_op2_no_bwd(&pos, &RopeStep)
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    assert_eq!(
        &step[..8],
        &table.i(3).unwrap().to_vec1::<f32>().unwrap()[..]
    );
    assert_eq!(step[8].to_bits(), 3);
    // A cache of 3 positions cannot take position 3.
    let dims = AttnDims {
        batch: 1,
        heads: 2,
        kv_heads: 1,
        head_dim: 8,
        ctx: 3,
        bias: false,
        interleaved: false,
    };
    let buf = Tensor::zeros(dims.buf_len(), DType::F32, &Device::Cpu).unwrap();
    let qkv = rand(&[1, 1, dims.qkv_width()], 2);
    let step = Tensor::from_vec(step, 9, &Device::Cpu).unwrap();
    assert!(buf.inplace_op3(&qkv, &step, &RopeKv(dims)).is_err());
}

#[test]
fn swiglu_and_add_rms_norm_match_candle_ops() {
    for dt in [DType::F32, DType::F16, DType::BF16] {
        for (rows, w) in [(1, 8), (3, 96), (2, 896)] {
            let gu = rand(&[rows, 1, 2 * w], 7)
                .affine(4.0, 0.0)
                .unwrap()
                .to_dtype(dt)
                .unwrap();
            let got = gu.apply_op1_no_bwd(&SwiGlu { q8: false }).unwrap();
            let want = (gu.narrow(D::Minus1, 0, w).unwrap().silu().unwrap()
                * gu.narrow(D::Minus1, w, w).unwrap())
            .unwrap();
            assert_eq!(got.dtype(), dt);
            assert!(
                rel(&got, &want) <= tol(dt),
                "swiglu {dt:?} {rows}×{w}: {}",
                rel(&got, &want)
            );

            let a = rand(&[rows, 1, w], 8).to_dtype(dt).unwrap();
            let r = rand(&[rows, 1, w], 9)
                .affine(5.0, 0.0)
                .unwrap()
                .to_dtype(dt)
                .unwrap();
            let nw = rand(&[w], 10).to_dtype(dt).unwrap();
            let y = a
                .apply_op3_no_bwd(
                    &r,
                    &nw,
                    &AddRmsNorm {
                        eps: 1e-6,
                        q8: false,
                    },
                )
                .unwrap();
            assert_eq!(y.dims(), &[2, rows, 1, w]);
            let sum = (&a + &r).unwrap();
            assert_eq!(rel(&y.i(0).unwrap(), &sum), 0.0, "sum {dt:?}");
            let want = candle_nn::ops::rms_norm(&sum, &nw, 1e-6).unwrap();
            let d = rel(&y.i(1).unwrap(), &want);
            assert!(d <= tol(dt), "rms {dt:?} {rows}×{w}: {d:e}");
        }
    }
}

/// [`Gemv`] at one row: the F32 matmul of the same rounded inputs, rounded once (F32 summation
/// order aside), in both 16-bit dtypes and for a (1, 1, K) decode activation; shapes the kernel
/// cannot take are refused, not miscomputed.
#[test]
fn gemv_matches_the_f32_matmul_and_refuses_what_it_cannot_do() {
    let (n, k) = (40, 96);
    for dt in [DType::F16, DType::BF16] {
        let w = rand(&[n, k], 7).to_dtype(dt).unwrap();
        let x = rand(&[1, 1, k], 8).to_dtype(dt).unwrap();
        let got = x.apply_op2_no_bwd(&w, &Gemv).unwrap();
        assert_eq!(got.dims(), [1, 1, n]);
        assert_eq!(got.dtype(), dt);
        let f32 = |t: &Tensor| t.to_dtype(DType::F32).unwrap();
        let want = f32(&x)
            .reshape((1, k))
            .unwrap()
            .matmul(&f32(&w).t().unwrap())
            .unwrap()
            .reshape((1, 1, n))
            .unwrap();
        assert!(
            rel(&f32(&got), &want) <= tol(dt),
            "{dt:?}: {}",
            rel(&f32(&got), &want)
        );
        // A wrong row breaks it by far more than the tolerance.
        let shifted = x
            .roll(1, D::Minus1)
            .unwrap()
            .apply_op2_no_bwd(&w, &Gemv)
            .unwrap();
        assert!(rel(&f32(&shifted), &want) > 20.0 * tol(dt));
    }
    let w = rand(&[n, k], 7).to_dtype(DType::F16).unwrap();
    let two_rows = rand(&[2, k], 8).to_dtype(DType::F16).unwrap();
    assert!(two_rows.apply_op2_no_bwd(&w, &Gemv).is_err());
    let odd = rand(&[4, 12], 9).to_dtype(DType::F16).unwrap();
    let odd_x = rand(&[1, 12], 9).to_dtype(DType::F16).unwrap();
    assert!(
        odd_x.apply_op2_no_bwd(&odd, &Gemv).is_err(),
        "K not a multiple of 8"
    );
    let f32_w = rand(&[n, k], 7);
    assert!(
        rand(&[1, k], 8).apply_op2_no_bwd(&f32_w, &Gemv).is_err(),
        "F32 is cuBLAS's"
    );
}

/// With `q8`, AddRmsNorm, SwiGlu and DecodeAttn return their usual values (bit for bit) and then
/// the Q8_1 blocks of the values a projection reads next (the normed sum, the product, the heads).
#[test]
fn fused_ops_append_the_q8_1_blocks_of_what_the_next_projection_reads() {
    let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let check = |plain: &Tensor, with: &Tensor, from: usize, n: usize, what: &str| {
        let (p, w) = (flat(plain), flat(with));
        assert_eq!(w.len(), p.len() + super::q8::words(n), "{what}");
        assert_eq!(&w[..p.len()], &p[..], "{what}: values");
        let want = super::q8::encode(&p[from..from + n]);
        assert!(
            want.iter()
                .zip(&w[p.len()..])
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{what}: blocks"
        );
    };
    let (rows, w) = (2, 96);
    let gu = rand(&[rows, 1, 2 * w], 7).affine(4.0, 0.0).unwrap();
    let plain = gu.apply_op1_no_bwd(&SwiGlu { q8: false }).unwrap();
    let with = gu.apply_op1_no_bwd(&SwiGlu { q8: true }).unwrap();
    check(&plain, &with, 0, rows * w, "swiglu");

    let (a, r, nw) = (
        rand(&[rows, 1, w], 8),
        rand(&[rows, 1, w], 9),
        rand(&[w], 10),
    );
    let norm = |q8| {
        a.apply_op3_no_bwd(&r, &nw, &AddRmsNorm { eps: 1e-6, q8 })
            .unwrap()
    };
    check(
        &norm(false),
        &norm(true),
        rows * w,
        rows * w,
        "add-rms-norm",
    );

    let dims = AttnDims {
        batch: 2,
        heads: 4,
        kv_heads: 2,
        head_dim: 32,
        ctx: 6,
        bias: false,
        interleaved: false,
    };
    let buf = rand(&[dims.buf_len()], 11);
    let qkv = rand(&[2, 1, dims.qkv_width()], 12);
    let mut step = vec![1f32; 33];
    step[32] = f32::from_bits(3);
    let step = Tensor::from_vec(step, 33, &Device::Cpu).unwrap();
    let attn = |q8| {
        let op = DecodeAttn {
            dims,
            scale: 0.2,
            q8,
            fold_kv: false,
            split: None,
        };
        qkv.apply_op3_no_bwd(&buf, &step, &op).unwrap()
    };
    // The CPU op does not write the cache: asked to, it refuses instead of attending to stale rows.
    let fold = DecodeAttn {
        dims,
        scale: 0.2,
        q8: false,
        fold_kv: true,
        split: None,
    };
    assert!(qkv.apply_op3_no_bwd(&buf, &step, &fold).is_err());
    check(&attn(false), &attn(true), 0, 2 * 4 * 32, "decode-attn");
    // Blocks that would straddle two rows are refused, though 2 × 48 values are 3 blocks.
    let (a48, r48, w48) = (
        rand(&[2, 1, 48], 14),
        rand(&[2, 1, 48], 15),
        rand(&[48], 16),
    );
    let op = AddRmsNorm {
        eps: 1e-6,
        q8: true,
    };
    assert!(a48.apply_op3_no_bwd(&r48, &w48, &op).is_err());
    // 16-bit activations have no Q8_1 form here (the GGUF path runs in F32).
    let h = rand(&[1, 1, 2 * w], 13).to_dtype(DType::F16).unwrap();
    assert!(h.apply_op1_no_bwd(&SwiGlu { q8: true }).is_err());
}

/// How many blocks a split attention gives each KV head: about 132 blocks in all, at least 32
/// positions a block (worked numbers for the shapes the H200 runs).
#[test]
fn split_attention_divides_kv_heads_by_cache_and_card() {
    // Qwen2-1.5B (2 KV heads) and 7B (4) at the 272 positions of the short protocol: 272 / 32.
    assert_eq!(AttnSplit::splits_for(2, 1, 272), 9);
    assert_eq!(AttnSplit::splits_for(4, 1, 272), 9);
    // 4 096 + 256 positions: the card's 132 SMs bound it, 66 × 2 and 33 × 4 blocks.
    assert_eq!(AttnSplit::splits_for(2, 1, 4352), 66);
    assert_eq!(AttnSplit::splits_for(4, 1, 4352), 33);
    // A short cache is one block per group; many sequences share the card.
    assert_eq!(AttnSplit::splits_for(2, 1, 20), 1);
    assert_eq!(AttnSplit::splits_for(2, 8, 4352), 9);
    assert_eq!(AttnSplit::splits_for(4, 8, 4352), 5);
    assert_eq!(AttnSplit::splits_for(1, 1, 1 << 20), 132);
}

/// The split kernel's shapes: head widths 64/128/256, at most 8 query heads per KV head.
#[test]
fn split_attention_covers_the_gqa_shapes_it_was_written_for() {
    let dims = |heads, kv_heads, head_dim| AttnDims {
        batch: 1,
        heads,
        kv_heads,
        head_dim,
        ctx: 16,
        bias: false,
        interleaved: false,
    };
    assert!(AttnSplit::covers(&dims(12, 2, 128)));
    assert!(AttnSplit::covers(&dims(28, 4, 128)));
    assert!(AttnSplit::covers(&dims(9, 3, 64)));
    assert!(AttnSplit::covers(&dims(8, 8, 256)));
    assert!(!AttnSplit::covers(&dims(16, 1, 64)));
    assert!(!AttnSplit::covers(&dims(32, 32, 80)));
    assert!(!AttnSplit::covers(&dims(6, 4, 64)));
}

/// Which decode-attention kernel the GPU launches: the tensor-core split kernel only where it
/// was asked for and the cache is 16-bit, and every name it picks is one the module exports.
#[test]
fn decode_attention_picks_its_kernel_by_split_and_cache() {
    use crate::ops::attention::kernel_name;
    let split = |tensor_cores| AttnSplit {
        splits: 33,
        counters: Tensor::zeros(28, DType::U32, &Device::Cpu).unwrap(),
        tensor_cores,
    };
    let (mma, cuda_cores) = (split(true), split(false));
    for (act, cache, s, want) in [
        (
            DType::F32,
            DType::F16,
            Some(&mma),
            "decode_attn_mma128_f32_f16",
        ),
        (
            DType::BF16,
            DType::BF16,
            Some(&mma),
            "decode_attn_mma128_bf16_bf16",
        ),
        (
            DType::F32,
            DType::F32,
            Some(&mma),
            "decode_attn_split128_f32_f32",
        ),
        (
            DType::F32,
            DType::F16,
            Some(&cuda_cores),
            "decode_attn_split128_f32_f16",
        ),
        (DType::F16, DType::F16, None, "decode_attn_f16_f16"),
    ] {
        assert_eq!(kernel_name(128, act, cache, s).unwrap(), want);
    }
    assert!(kernel_name(128, DType::U8, DType::F16, None).is_err());
    let names = crate::kernels::launch::kernel_names();
    for hd in [64, 128, 256] {
        for act in [DType::F32, DType::F16, DType::BF16] {
            for cache in [DType::F32, DType::F16, DType::BF16] {
                for s in [Some(&mma), Some(&cuda_cores), None] {
                    let n = kernel_name(hd, act, cache, s).unwrap();
                    assert!(names.contains(&n), "{n} is not exported");
                }
            }
        }
    }
}

/// The prefill's fused softmax against candle's scale, additive mask and softmax (what the
/// static forward ran before), for chunks at the start and after earlier chunks, and a row whose
/// query sees every key; hidden keys are exactly 0 and each row sums to 1.
#[test]
fn causal_softmax_matches_scale_mask_and_softmax() {
    for (queries, keys, pos) in [(1usize, 1usize, 0u32), (3, 5, 2), (4, 9, 0), (5, 40, 30)] {
        for dt in [DType::F32, DType::F16, DType::BF16] {
            let att = round_to((rand(&[2, queries, keys], keys as u64) * 30.0).unwrap(), dt);
            let p = Tensor::new(&[pos], &Device::Cpu).unwrap();
            let op = CausalSoftmax {
                queries,
                scale: 0.125,
            };
            let got = att.to_dtype(dt).unwrap().apply_op2_no_bwd(&p, &op).unwrap();
            let got = got.to_dtype(DType::F32).unwrap();
            let scaled = round_to((&att * 0.125).unwrap(), dt);
            let mask: Vec<f32> = (0..queries * keys)
                .map(|ij| {
                    let (i, j) = (ij / keys, ij % keys);
                    if j as u32 <= pos + i as u32 {
                        0.0
                    } else {
                        f32::NEG_INFINITY
                    }
                })
                .collect();
            let mask = Tensor::from_vec(mask, (queries, keys), &Device::Cpu).unwrap();
            let want = candle_nn::ops::softmax_last_dim(&scaled.broadcast_add(&mask).unwrap());
            let want = want.unwrap();
            let case = format!("{dt:?} q{queries} k{keys} pos{pos}");
            assert!(rel(&got, &want) <= tol(dt), "{case}: {}", rel(&got, &want));
            let rows = got.sum(D::Minus1).unwrap().flatten_all().unwrap();
            for s in rows.to_vec1::<f32>().unwrap() {
                assert!(
                    (s - 1.0).abs() <= 4.0 * tol(dt),
                    "{case}: a row sums to {s}"
                );
            }
            let hidden: Vec<f32> = got
                .i((.., 0, (pos as usize + 1).min(keys)..))
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap();
            assert!(
                hidden.iter().all(|&x| x == 0.0),
                "{case}: a hidden key weighs {hidden:?}"
            );
        }
    }
    let bad = CausalSoftmax {
        queries: 2,
        scale: 1.0,
    };
    let att = Tensor::zeros((3, 4), DType::F32, &Device::Cpu).unwrap();
    let p = Tensor::new(&[0u32], &Device::Cpu).unwrap();
    let e = att.apply_op2_no_bwd(&p, &bad).unwrap_err().to_string();
    assert!(e.contains("multiple of 2 queries"), "{e}");
}

/// ArgMax on the CPU: candle's argmax wherever the maximum is unique, in every float dtype and
/// per row; ties go to the lowest index, NaN never wins, and a row of no number gives 0.
#[test]
fn argmax_picks_the_first_largest_value_of_each_row() {
    for dt in [DType::F32, DType::F16, DType::BF16] {
        let x = rand(&[3, 1000], 7).to_dtype(dt).unwrap();
        let got = x.apply_op1_no_bwd(&ArgMax).unwrap();
        let want = x.argmax_keepdim(D::Minus1).unwrap();
        assert_eq!(got.dims(), &[3, 1]);
        assert_eq!(
            got.to_vec2::<u32>().unwrap(),
            want.to_vec2::<u32>().unwrap(),
            "{dt:?}"
        );
    }
    let nan = f32::NAN;
    let rows = [
        (vec![1.0, 5.0, 2.0, 5.0], 1),
        (vec![nan, -3.0, nan, -1.0], 3),
        (vec![nan, nan], 0),
        (vec![f32::NEG_INFINITY; 3], 0),
        (vec![f32::NEG_INFINITY, f32::INFINITY, f32::INFINITY], 1),
    ];
    for (row, want) in rows {
        let n = row.len();
        let t = Tensor::from_vec(row.clone(), (1, n), &Device::Cpu).unwrap();
        let got = t
            .apply_op1_no_bwd(&ArgMax)
            .unwrap()
            .to_vec2::<u32>()
            .unwrap();
        assert_eq!(got, vec![vec![want]], "{row:?}");
    }
    let err = Tensor::zeros((2, 0), DType::F32, &Device::Cpu)
        .unwrap()
        .apply_op1_no_bwd(&ArgMax)
        .unwrap_err();
    assert!(err.to_string().contains("argmax"), "{err}");
}
