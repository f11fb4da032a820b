//! The graph engine's custom ops, one file per kernel family, each a candle op with its CPU
//! reference (what the tests hold the CUDA result against, and what runs without a GPU) beside
//! its CUDA launcher. The kernels are `crates/engine/kernels/*.cu`, loaded by [`crate::kernels`].
//!
//! * [`RopeStep`] — once per step: the rotary row of the device position and the position itself,
//!   packed into one small F32 tensor (`[cos (hd/2) | sin (hd/2) | pos as u32 bits]`), so the
//!   per-layer ops need only two inputs besides their target (candle's in-place ops take two);
//! * [`RopeKv`] — per layer: bias add, rotary of K, and K, V written into the layer's cache at the
//!   position (replaces 3 bias adds, 3 transposes, 2 rotaries, 2 casts, 2 KV writes);
//! * [`DecodeAttn`] — per layer, one query position: bias + rotary of q, q·Kᵀ over positions
//!   0..=pos (the length comes from the device, so no mask), scale, softmax, ·V, grouped-query,
//!   F32 throughout, output (b, 1, nh·hd) in the activations' dtype; on the GPU it also does
//!   [`RopeKv`]'s work (`fold_kv`), so a layer's attention is one launch;
//! * [`CausalSoftmax`] — the prefill's attention scores scaled, masked by position and softmaxed
//!   in one pass (candle's ops wrote the scores three more times);
//! * [`SwiGlu`] — silu(gate)·up from the fused gate|up matmul's output;
//! * [`ArgMax`] — greedy sampling: the next token from the logits, a block per row;
//! * [`AddRmsNorm`] — residual add and the following RMSNorm: one output (2, ..) holding the sum
//!   and the normed sum;
//! * with `q8`, the norm, attention and SwiGLU also append the Q8_1 blocks of what the next
//!   quantized projection reads ([`q8`]), so it needs no quantize kernel of its own;
//! * [`Gemv`] — a float projection at one row (batch 1): a warp per output row streaming the
//!   weight in 16-byte loads, F32 accumulation. Opt-in (`QE_GEMV=1`, [`GEMV`]): on the H200 it
//!   was faster than cuBLAS's GEMM only at 7 B, and drew more power there (see [`GEMV`]).
//!
//! A layer's cache is one flat tensor in the cache dtype, `[K (b, nkv, ctx, hd) | V (same) | qkv
//! bias ((nh + 2·nkv)·hd), if any]` (see [`AttnDims`]), so the bias travels with the target.

pub mod argmax;
pub mod attention;
mod common;
pub mod gemv;
pub mod kv;
pub mod norm;
pub mod q8;
pub mod rope;
pub mod softmax;
pub mod swiglu;
#[cfg(test)]
mod tests;

pub use argmax::ArgMax;
pub use attention::{AttnSplit, DecodeAttn, ATTN_ONE_BLOCK, ATTN_SPLIT_FROM};
pub use gemv::{Gemv, GEMV};
pub use norm::{AddRmsNorm, NORM_THREADS};
pub use rope::{AttnDims, RopeKv, RopeStep};
pub use softmax::CausalSoftmax;
pub use swiglu::SwiGlu;
