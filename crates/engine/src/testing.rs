//! What the engines' tests share (unit tests here, integration tests under `tests/`, the CLI's
//! engine-check tests, the device op checks of [`crate::opcheck`]): a tiny model shape with real
//! structure, seeded inputs, the attention cases' shape, and the relative difference two tensors
//! are compared by.

use crate::ops::AttnDims;
use analysis::ModelShape;
use candle_core::{DType, Device, Tensor};

/// A tiny model with real structure (GQA, biases for qwen2, block-size-compatible widths).
pub fn tiny(family: &str) -> ModelShape {
    let mut s = ModelShape {
        name: format!("tiny-{family}"),
        family: family.into(),
        params_b: 0.0,
        layers: 2,
        hidden: 256,
        heads: 4,
        kv_heads: 2,
        head_dim: 64,
        intermediate: 512,
        vocab: 512,
        tied_embeddings: family == "qwen2",
        rope_theta: 10000.0,
        rms_eps: 1e-6,
        max_position: 512,
        source: "test".into(),
    };
    s.params_b = s.param_count() as f64 / 1e9;
    s
}

/// max |a − b| / max |a| over two tensors of one shape (logits here, fused ops' outputs in
/// `fused_tests`).
pub fn rel_diff(a: &Tensor, b: &Tensor) -> f32 {
    let a = a.to_dtype(DType::F32).unwrap();
    let b = b.to_dtype(DType::F32).unwrap();
    assert_eq!(a.dims(), b.dims());
    let d = (&a - &b)
        .unwrap()
        .abs()
        .unwrap()
        .max_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    let m = a
        .abs()
        .unwrap()
        .max_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    assert!(m.is_finite() && m > 0.0, "logits {m}");
    d / m
}

/// Seeded uniform values in [-1, 1) as an F32 tensor on the CPU.
pub fn rand(shape: &[usize], seed: u64) -> candle_core::Result<Tensor> {
    let n: usize = shape.iter().product();
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let v: Vec<f32> = (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    Tensor::from_vec(v, shape, &Device::Cpu)
}

/// One shape of the attention checks: (batch, heads, kv heads, head width, cache positions,
/// position, interleaved rotary).
pub type AttnCase = (usize, usize, usize, usize, usize, usize, bool);

/// The attention ops' dimensions of case `c`, with or without the q|k|v bias.
pub fn attn_dims(c: AttnCase, bias: bool) -> AttnDims {
    let (batch, heads, kv_heads, head_dim, ctx, _, interleaved) = c;
    AttnDims {
        batch,
        heads,
        kv_heads,
        head_dim,
        ctx,
        bias,
        interleaved,
    }
}
