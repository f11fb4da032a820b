//! Fused ops of the decode step (issue 13), each one kernel on the GPU, with a CPU implementation
//! the tests compare with the candle ops it replaces:
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
//! * [`SwiGlu`] — silu(gate)·up from the fused gate|up matmul's output;
//! * [`AddRmsNorm`] — residual add and the following RMSNorm: one output (2, ..) holding the sum
//!   and the normed sum;
//! * with `q8`, the norm, attention and SwiGLU also append the Q8_1 blocks of what the next
//!   quantized projection reads ([`super::q8`]), so it needs no quantize kernel of its own;
//! * [`Gemv`] — a float projection at one row (batch 1): a warp per output row streaming the
//!   weight in 16-byte loads, F32 accumulation. Opt-in (`QE_GEMV=1`, [`GEMV`]): on the H200 it
//!   was faster than cuBLAS's GEMM only at 7 B, and drew more power there (see [`GEMV`]).
//!
//! A layer's cache is one flat tensor in the cache dtype, `[K (b, nkv, ctx, hd) | V (same) | qkv
//! bias ((nh + 2·nkv)·hd), if any]` (see [`AttnDims`]), so the bias travels with the target.
//!
//! The CUDA kernels are compiled once per process with NVRTC (no headers: halves are moved as
//! 16-bit words and converted by PTX `cvt` or bit shifts) and loaded through candle's
//! custom-module cache, so they run on candle's stream and are captured with the rest of the step.

use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{bail, CpuStorage, CustomOp1, CustomOp2, CustomOp3, DType, InplaceOp3, Layout};
use candle_core::{Result, Shape};

/// Shapes of the fused attention ops, fixed by the model and the decode state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttnDims {
    /// Sequences.
    pub batch: usize,
    /// Query heads.
    pub heads: usize,
    /// KV heads (divides `heads`).
    pub kv_heads: usize,
    /// Head width (even, ≤ 256).
    pub head_dim: usize,
    /// Positions the cache holds.
    pub ctx: usize,
    /// Whether the layer buffer ends with the q|k|v bias.
    pub bias: bool,
    /// Interleaved rotary (pairs 2i, 2i+1; GGUF llama) instead of halves (i, i + hd/2).
    pub interleaved: bool,
}

impl AttnDims {
    /// Width of one q|k|v row.
    pub fn qkv_width(&self) -> usize {
        (self.heads + 2 * self.kv_heads) * self.head_dim
    }
    /// Elements of one of K, V.
    pub fn cache_len(&self) -> usize {
        self.batch * self.kv_heads * self.ctx * self.head_dim
    }
    /// Elements of a layer buffer.
    pub fn buf_len(&self) -> usize {
        2 * self.cache_len() + if self.bias { self.qkv_width() } else { 0 }
    }
    /// Where the bias starts in a layer buffer.
    fn bias_off(&self) -> usize {
        2 * self.cache_len()
    }
    fn check(&self) -> Result<()> {
        let hd = self.head_dim;
        if hd == 0 || !hd.is_multiple_of(2) || hd > 256 || self.kv_heads == 0 {
            bail!("fused attention: head_dim {hd} must be even and ≤ 256")
        }
        if !self.heads.is_multiple_of(self.kv_heads) {
            bail!(
                "fused attention: {} heads over {} KV heads",
                self.heads,
                self.kv_heads
            )
        }
        Ok(())
    }
}

/// The start offset of a contiguous layout with `n` elements, or an error naming `what`.
fn contiguous(l: &Layout, n: usize, what: &str) -> Result<usize> {
    if !l.is_contiguous() {
        bail!("{what} must be contiguous")
    }
    if l.shape().elem_count() != n {
        bail!("{what}: {:?} does not hold {n} elements", l.shape())
    }
    Ok(l.start_offset())
}

/// Element `i` of a float storage, as f32.
fn get(s: &CpuStorage, i: usize) -> f32 {
    match s {
        CpuStorage::F32(v) => v[i],
        CpuStorage::F16(v) => v[i].to_f32(),
        CpuStorage::BF16(v) => v[i].to_f32(),
        _ => f32::NAN, // float_dtype() refuses the others first.
    }
}

/// Store `x` (rounded to the storage's dtype) at `i`.
fn put(s: &mut CpuStorage, i: usize, x: f32) {
    match s {
        CpuStorage::F32(v) => v[i] = x,
        CpuStorage::F16(v) => v[i] = half::f16::from_f32(x),
        CpuStorage::BF16(v) => v[i] = half::bf16::from_f32(x),
        _ => {}
    }
}

/// `x` rounded to `dt` (mirrors an intermediate the eager model stores in that dtype).
fn round_to(dt: DType, x: f32) -> f32 {
    match dt {
        DType::F16 => half::f16::from_f32(x).to_f32(),
        DType::BF16 => half::bf16::from_f32(x).to_f32(),
        _ => x,
    }
}

fn float_dtype(s: &CpuStorage, what: &str) -> Result<DType> {
    match s.dtype() {
        dt @ (DType::F32 | DType::F16 | DType::BF16) => Ok(dt),
        dt => bail!("{what} must be F32, F16 or BF16, not {dt:?}"),
    }
}

/// A zeroed storage of `n` elements of `dt`.
fn zeros(dt: DType, n: usize) -> CpuStorage {
    match dt {
        DType::F16 => CpuStorage::F16(vec![half::f16::ZERO; n]),
        DType::BF16 => CpuStorage::BF16(vec![half::bf16::ZERO; n]),
        _ => CpuStorage::F32(vec![0.0; n]),
    }
}

/// Whether `n` values in units of `unit` (a row, a head: what one warp group of a kernel writes)
/// make whole Q8_1 blocks that never straddle two units: the kernels write a block from one warp.
fn q8_units(n: usize, unit: usize) -> Result<()> {
    if unit == 0 || !unit.is_multiple_of(super::q8::QK) || !n.is_multiple_of(unit) {
        bail!("Q8_1 blocks: units of {unit} values (of {n}) are not whole blocks of 32")
    }
    Ok(())
}

/// An op's CPU output, with the Q8_1 blocks of `out[from..from + n]` appended when `q8` (then
/// flat: F32 values, then the blocks' words); as it is with `shape` otherwise. `unit`: see
/// [`q8_units`].
fn with_q8(
    out: CpuStorage,
    (from, n, unit): (usize, usize, usize),
    q8: bool,
    shape: impl Into<Shape>,
) -> Result<(CpuStorage, Shape)> {
    if !q8 {
        return Ok((out, shape.into()));
    }
    let CpuStorage::F32(mut v) = out else {
        bail!("Q8_1 blocks are written from F32 activations only")
    };
    q8_units(n, unit)?;
    let words = super::q8::encode(&v[from..from + n]);
    v.extend_from_slice(&words);
    let len = v.len();
    Ok((CpuStorage::F32(v), Shape::from(len)))
}

/// The step row (hd + 1 F32: cos, sin, position bits) and the position.
fn step_row<'a>(
    s: &'a CpuStorage,
    l: &Layout,
    hd: usize,
    ctx: usize,
) -> Result<(&'a [f32], usize)> {
    let o = contiguous(l, hd + 1, "the rotary step row")?;
    let CpuStorage::F32(v) = s else {
        bail!("the rotary step row must be F32")
    };
    let row = &v[o..o + hd + 1];
    let pos = row[hd].to_bits() as usize;
    if pos >= ctx {
        bail!("position {pos} past the cache's {ctx}")
    }
    Ok((row, pos))
}

/// Element `d` of a rotated head row `x` (cos, sin from the step row), as candle's rope / rope_i
/// compute it in the activations' dtype `dt`: each product and the sum rounded to it.
fn rotated(x: &[f32], d: usize, step: &[f32], interleaved: bool, dt: DType) -> f32 {
    let half = x.len() / 2;
    let r = |v: f32| round_to(dt, v);
    if interleaved {
        let j = d / 2;
        let (c, s) = (step[j], step[half + j]);
        if d.is_multiple_of(2) {
            r(r(x[d] * c) - r(x[d + 1] * s))
        } else {
            r(r(x[d - 1] * s) + r(x[d] * c))
        }
    } else if d < half {
        r(r(x[d] * step[d]) - r(x[d + half] * step[half + d]))
    } else {
        let j = d - half;
        r(r(x[j] * step[half + j]) + r(x[d] * step[j]))
    }
}

/// Fill `row` (hd) with head `col / hd` of sequence `bi`'s q|k|v row plus its bias (the sum
/// rounded to the activations' dtype, as the eager linear layer stores it).
fn head_row(
    row: &mut [f32],
    qkv: (&CpuStorage, usize),
    buf: (&CpuStorage, usize),
    d: &AttnDims,
    bi: usize,
    col: usize,
) {
    for (e, r) in row.iter_mut().enumerate() {
        let b = if d.bias {
            get(buf.0, buf.1 + d.bias_off() + col + e)
        } else {
            0.0
        };
        *r = round_to(
            qkv.0.dtype(),
            get(qkv.0, qkv.1 + bi * d.qkv_width() + col + e) + b,
        );
    }
}

/// The rotary row and position of the step: `[cos[pos] | sin[pos] | pos bits]` from a table
/// (rows, hd) `[cos | sin]` in F32 and the (1,) u32 position.
pub struct RopeStep;

impl CustomOp2 for RopeStep {
    fn name(&self) -> &'static str {
        "rope-step"
    }

    fn cpu_fwd(
        &self,
        t: &CpuStorage,
        tl: &Layout,
        p: &CpuStorage,
        pl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (rows, hd) = tl.shape().dims2()?;
        let to = contiguous(tl, rows * hd, "the rotary table")?;
        let (CpuStorage::F32(t), CpuStorage::U32(p)) = (t, p) else {
            bail!("rope-step: the table must be F32 and the position u32")
        };
        let pos = p[pl.start_offset()];
        if pos as usize >= rows {
            bail!("rope-step: position {pos} past the table's {rows} rows")
        }
        let mut out = t[to + pos as usize * hd..to + (pos as usize + 1) * hd].to_vec();
        out.push(f32::from_bits(pos));
        Ok((CpuStorage::F32(out), Shape::from(hd + 1)))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        t: &CudaStorage,
        tl: &Layout,
        p: &CudaStorage,
        pl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        cuda::rope_step(t, tl, p, pl)
    }
}

/// Bias add and rotary of the new K row, K and V written into a layer buffer (the target) at
/// the step's position; q|k|v (b, 1, qkv_width) and the step row are the inputs.
pub struct RopeKv(pub AttnDims);

impl InplaceOp3 for RopeKv {
    fn name(&self) -> &'static str {
        "rope-kv"
    }

    fn cpu_fwd(
        &self,
        buf: &mut CpuStorage,
        bl: &Layout,
        qkv: &CpuStorage,
        ql: &Layout,
        step: &CpuStorage,
        sl: &Layout,
    ) -> Result<()> {
        let d = &self.0;
        d.check()?;
        let hd = d.head_dim;
        let bo = contiguous(bl, d.buf_len(), "rope-kv: the layer buffer")?;
        let qo = contiguous(ql, d.batch * d.qkv_width(), "rope-kv: q|k|v")?;
        float_dtype(buf, "rope-kv: the layer buffer")?;
        let dt = float_dtype(qkv, "rope-kv: q|k|v")?;
        let (st, pos) = step_row(step, sl, hd, d.ctx)?;
        let mut row = vec![0f32; hd];
        for bi in 0..d.batch {
            for which in 0..2 {
                for kvh in 0..d.kv_heads {
                    let col = (d.heads + which * d.kv_heads + kvh) * hd;
                    head_row(&mut row, (qkv, qo), (buf, bo), d, bi, col);
                    let dst =
                        bo + which * d.cache_len() + ((bi * d.kv_heads + kvh) * d.ctx + pos) * hd;
                    for e in 0..hd {
                        let x = if which == 0 {
                            rotated(&row, e, st, d.interleaved, dt)
                        } else {
                            row[e]
                        };
                        put(buf, dst + e, x);
                    }
                }
            }
        }
        Ok(())
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        buf: &mut CudaStorage,
        bl: &Layout,
        qkv: &CudaStorage,
        ql: &Layout,
        step: &CudaStorage,
        sl: &Layout,
    ) -> Result<()> {
        cuda::rope_kv(&self.0, buf, bl, qkv, ql, step, sl)
    }
}

/// Attention of one query position per sequence over the layer buffer's positions 0..=pos:
/// inputs q|k|v (b, 1, qkv_width), the layer buffer, the step row; output (b, 1, nh·hd) in
/// q|k|v's dtype. `scale` multiplies the scores (1/√hd).
pub struct DecodeAttn {
    /// Shapes.
    pub dims: AttnDims,
    /// Score scale.
    pub scale: f32,
    /// Also write the output's Q8_1 blocks after it (see [`q8`](super::q8)); the output is then
    /// flat.
    pub q8: bool,
    /// Also do [`RopeKv`]'s work (GPU only): the kernel computes the position's K and V rows,
    /// attends to them, and writes them into the layer buffer — an input, which the op then
    /// changes (the buffer is the decode state's; nothing else reads it within the op). One
    /// launch per layer less. The CPU op refuses it: there [`RopeKv`] runs first.
    pub fold_kv: bool,
    /// Split each head's positions over several blocks (GPU only, opt-in: see [`AttnSplit`]);
    /// `None`: one 1024-thread block per head. The CPU op computes the same attention either way.
    pub split: Option<AttnSplit>,
}

/// Split attention ("flash-decoding"): `splits` blocks per (head, sequence) each attend to a share
/// of the positions; the last to finish combines the shares (an atomic count per head in
/// `counters`, which every launch leaves at zero). Opt-in (`QE_ATTN_SPLIT=1`, [`ATTN_SPLIT`]): on
/// the H200 at ≤ 272 positions it was 1–5 % slower than the one-block kernel at every shape
/// (issue 13), whose 12 or 28 blocks leave most of the card's 132 SMs idle only at long contexts.
#[derive(Clone)]
pub struct AttnSplit {
    /// Blocks per (head, sequence), ≥ 2.
    pub splits: usize,
    /// (batch · heads) u32 zeros on the device, kept by the decode state.
    pub counters: candle_core::Tensor,
}

impl AttnSplit {
    /// Blocks per head for `heads · batch` heads over a `ctx`-position cache: about 256 blocks in
    /// all (two per SM of an H100/H200), at least 32 positions a block, at most 32 blocks a head.
    pub fn splits_for(heads: usize, batch: usize, ctx: usize) -> usize {
        let by_sm = (256 / (heads * batch).max(1)).max(1);
        ctx.div_ceil(32).min(by_sm).clamp(1, 32)
    }
}

/// Whether the GPU's decode attention splits its positions over blocks (`QE_ATTN_SPLIT=1`; off).
pub static ATTN_SPLIT: super::Switch = super::Switch::new("QE_ATTN_SPLIT", false);

/// Threads of an add + norm block (`QE_NORM_THREADS`: 128 to 1024, a floor: a row of more than
/// 8 values a thread gets width / 8 threads, up to 1024, so it stays in registers). The kernel
/// is a latency-bound single block per row: fewer threads mean cheaper barriers but fewer loads
/// in flight, which only the card can weigh. On the H200 (issue 13) 512 beat 1024 by 2.5 % of a
/// whole Qwen2-1.5B Q4_0 step and 0.7 % at 7 B F16; 256 was no better than 1024. (Fewer than 1024
/// threads for the one-block attention lost 1–14 %.)
pub static NORM_THREADS: super::Knob =
    super::Knob::new("QE_NORM_THREADS", 512, &[128, 256, 512, 1024]);

impl CustomOp3 for DecodeAttn {
    fn name(&self) -> &'static str {
        "decode-attn"
    }

    fn cpu_fwd(
        &self,
        qkv: &CpuStorage,
        ql: &Layout,
        buf: &CpuStorage,
        bl: &Layout,
        step: &CpuStorage,
        sl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let d = &self.dims;
        d.check()?;
        if self.fold_kv {
            bail!("decode-attn: the CPU op does not write the cache (run RopeKv first)")
        }
        let hd = d.head_dim;
        let bo = contiguous(bl, d.buf_len(), "decode-attn: the layer buffer")?;
        let qo = contiguous(ql, d.batch * d.qkv_width(), "decode-attn: q|k|v")?;
        let dt = float_dtype(qkv, "decode-attn: q|k|v")?;
        float_dtype(buf, "decode-attn: the layer buffer")?;
        let (st, pos) = step_row(step, sl, hd, d.ctx)?;
        let g = d.heads / d.kv_heads;
        let mut out = zeros(dt, d.batch * d.heads * hd);
        let (mut row, mut q, mut sc) = (vec![0f32; hd], vec![0f32; hd], vec![0f32; d.ctx]);
        let mut acc = vec![0f32; hd];
        for bi in 0..d.batch {
            for h in 0..d.heads {
                head_row(&mut row, (qkv, qo), (buf, bo), d, bi, h * hd);
                for (e, qe) in q.iter_mut().enumerate() {
                    *qe = rotated(&row, e, st, d.interleaved, dt);
                }
                let kb = bo + ((bi * d.kv_heads + h / g) * d.ctx) * hd;
                let vb = kb + d.cache_len();
                let mut m = f32::NEG_INFINITY;
                for (t, s) in sc[..=pos].iter_mut().enumerate() {
                    let dot: f32 = (0..hd).map(|e| q[e] * get(buf, kb + t * hd + e)).sum();
                    *s = dot * self.scale;
                    m = m.max(*s);
                }
                let mut l = 0f32;
                for s in &mut sc[..=pos] {
                    *s = (*s - m).exp();
                    l += *s;
                }
                acc.fill(0.0);
                for (t, p) in sc[..=pos].iter().enumerate() {
                    for (e, a) in acc.iter_mut().enumerate() {
                        *a += p * get(buf, vb + t * hd + e);
                    }
                }
                for (e, a) in acc.iter().enumerate() {
                    put(&mut out, (bi * d.heads + h) * hd + e, a / l);
                }
            }
        }
        let n = d.batch * d.heads * hd;
        with_q8(out, (0, n, hd), self.q8, (d.batch, 1, d.heads * hd))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        qkv: &CudaStorage,
        ql: &Layout,
        buf: &CudaStorage,
        bl: &Layout,
        step: &CudaStorage,
        sl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        cuda::decode_attn(self, qkv, ql, buf, bl, step, sl)
    }
}

/// silu(gate)·up from a contiguous (.., 2·I) gate|up tensor → (.., I) of its dtype. silu's steps
/// are rounded to the dtype as candle's CPU op rounds them, so F16/BF16 match the eager model.
pub struct SwiGlu {
    /// Also write the output's Q8_1 blocks after it (flat output, see [`q8`](super::q8)).
    pub q8: bool,
}

/// (rows, I) of a gate|up layout, and the output shape.
fn swiglu_dims(l: &Layout) -> Result<(usize, usize, Shape)> {
    let dims = l.shape().dims();
    let w = *dims.last().unwrap_or(&0);
    if w == 0 || !w.is_multiple_of(2) || !l.is_contiguous() {
        bail!(
            "swiglu: gate|up {:?} must be contiguous with an even last dim",
            l.shape()
        )
    }
    let mut out = dims.to_vec();
    *out.last_mut().unwrap_or(&mut 0) = w / 2;
    Ok((l.shape().elem_count() / w, w / 2, Shape::from(out)))
}

impl CustomOp1 for SwiGlu {
    fn name(&self) -> &'static str {
        "swiglu"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let (rows, i, shape) = swiglu_dims(l)?;
        let dt = float_dtype(s, "swiglu")?;
        let o = l.start_offset();
        let mut out = zeros(dt, rows * i);
        for r in 0..rows {
            for j in 0..i {
                let g = get(s, o + r * 2 * i + j);
                let u = get(s, o + r * 2 * i + i + j);
                // silu as candle's CPU op computes it in the dtype: exp, 1 + e, g / (..)
                // each rounded; then the product rounded.
                let e = round_to(dt, (-g).exp());
                let silu = round_to(dt, g / round_to(dt, 1.0 + e));
                put(&mut out, r * i + j, silu * u);
            }
        }
        with_q8(out, (0, rows * i, i), self.q8, shape)
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> Result<(CudaStorage, Shape)> {
        cuda::swiglu(s, l, self.q8)
    }
}

/// `x · wᵀ` for one row `x` (.., K) and a weight `w` (N, K), both F16 or both BF16 and
/// contiguous, K a multiple of 8 (the kernel's 16-byte loads): output (.., N) in their dtype,
/// accumulated in F32 and rounded once.
pub struct Gemv;

/// Whether the graph engine's float projections at one row use [`Gemv`] (`QE_GEMV=1`; off). On the
/// H200 it was 1.0 % and 2.4 % faster than cuBLAS's GEMM at Qwen2-7B F16 and 2–6 % slower at 0.5–1.5 B;
/// the one 7 B arm metered with it drew 602 W where the cuBLAS arm of the session before drew 523 W
/// (another card): +13 % energy per token for +2 % speed. Until one card has metered both, the
/// meter's default stays cuBLAS, whose energy is what deployed F16 engines spend (issue 13).
pub static GEMV: super::Switch = super::Switch::new("QE_GEMV", false);

/// (N, K, output shape) of a one-row matvec of x (dtype `xd`) and w (`wd`).
fn gemv_dims(xl: &Layout, wl: &Layout, xd: DType, wd: DType) -> Result<(usize, usize, Shape)> {
    if wd != xd || !matches!(xd, DType::F16 | DType::BF16) {
        bail!("gemv: x and w must both be F16 or both BF16, not {xd:?} and {wd:?}")
    }
    let (n, k) = wl.shape().dims2()?;
    if xl.shape().elem_count() != k || xl.dims().last() != Some(&k) || !k.is_multiple_of(8) {
        bail!(
            "gemv: one row {:?} against a weight {:?} (K a multiple of 8)",
            xl.shape(),
            wl.shape()
        )
    }
    if !xl.is_contiguous() || !wl.is_contiguous() {
        bail!("gemv: inputs must be contiguous")
    }
    let mut out = xl.dims().to_vec();
    *out.last_mut().unwrap_or(&mut 0) = n;
    Ok((n, k, Shape::from(out)))
}

impl CustomOp2 for Gemv {
    fn name(&self) -> &'static str {
        "gemv"
    }

    fn cpu_fwd(
        &self,
        x: &CpuStorage,
        xl: &Layout,
        w: &CpuStorage,
        wl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (n, k, shape) = gemv_dims(xl, wl, x.dtype(), w.dtype())?;
        let dt = x.dtype();
        let (xo, wo) = (xl.start_offset(), wl.start_offset());
        let mut out = zeros(dt, n);
        for r in 0..n {
            let acc: f32 = (0..k)
                .map(|e| get(x, xo + e) * get(w, wo + r * k + e))
                .sum();
            put(&mut out, r, acc);
        }
        Ok((out, shape))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        x: &CudaStorage,
        xl: &Layout,
        w: &CudaStorage,
        wl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        cuda::gemv(x, xl, w, wl)
    }
}

/// `x = a + r` (rounded to the dtype, as the eager model stores the residual) and
/// `rms_norm(x)·w`, from a, r (.., h) and w (h), all one dtype and contiguous; output (2, ..):
/// `[0]` the sum, `[1]` the normed sum.
pub struct AddRmsNorm {
    /// The norm's ε.
    pub eps: f32,
    /// Also write the normed sum's Q8_1 blocks after both (flat output, see [`q8`](super::q8)).
    pub q8: bool,
}

/// (rows, h, output shape) of an add-norm.
fn add_norm_dims(al: &Layout, rl: &Layout, wl: &Layout) -> Result<(usize, usize, Shape)> {
    let h = wl.shape().elem_count();
    if al.shape() != rl.shape() || al.dims().last() != Some(&h) || h == 0 {
        bail!(
            "add-rms-norm: {:?} + {:?}, weight {:?}",
            al.shape(),
            rl.shape(),
            wl.shape()
        )
    }
    if !al.is_contiguous() || !rl.is_contiguous() || !wl.is_contiguous() {
        bail!("add-rms-norm: inputs must be contiguous")
    }
    let mut out = vec![2];
    out.extend_from_slice(al.dims());
    Ok((al.shape().elem_count() / h, h, Shape::from(out)))
}

impl CustomOp3 for AddRmsNorm {
    fn name(&self) -> &'static str {
        "add-rms-norm"
    }

    fn cpu_fwd(
        &self,
        a: &CpuStorage,
        al: &Layout,
        r: &CpuStorage,
        rl: &Layout,
        w: &CpuStorage,
        wl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (rows, h, shape) = add_norm_dims(al, rl, wl)?;
        let dt = float_dtype(a, "add-rms-norm")?;
        if r.dtype() != dt || w.dtype() != dt {
            bail!("add-rms-norm: inputs of several dtypes")
        }
        let (ao, ro, wo) = (al.start_offset(), rl.start_offset(), wl.start_offset());
        let n = rows * h;
        let mut out = zeros(dt, 2 * n);
        let mut x = vec![0f32; h];
        for row in 0..rows {
            for (e, xe) in x.iter_mut().enumerate() {
                let i = row * h + e;
                *xe = round_to(dt, get(a, ao + i) + get(r, ro + i));
            }
            // As candle_nn's CPU rms_norm: the root rounded to the dtype, x / root rounded.
            let ss: f32 = x.iter().map(|v| v * v).sum();
            let root = round_to(dt, (ss / h as f32 + self.eps).sqrt());
            for (e, xe) in x.iter().enumerate() {
                put(&mut out, row * h + e, *xe);
                put(
                    &mut out,
                    n + row * h + e,
                    round_to(dt, xe / root) * get(w, wo + e),
                );
            }
        }
        with_q8(out, (n, n, h), self.q8, shape)
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        a: &CudaStorage,
        al: &Layout,
        r: &CudaStorage,
        rl: &Layout,
        w: &CudaStorage,
        wl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        cuda::add_rms_norm(self, a, al, r, rl, w, wl)
    }
}

/// The CUDA source of the fused kernels, templated on the dtypes (0 F32, 1 F16, 2 BF16); the
/// `extern "C"` instantiations are appended by [`kernel_source`].
const SRC: &str = r#"
#define NT 1024
#define CH 1024
#define NEG_INF (-__int_as_float(0x7f800000))
__device__ __forceinline__ float h2f(unsigned short h) {
    float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ unsigned short f2h(float f) {
    unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
__device__ __forceinline__ float b2f(unsigned short b) {
    return __uint_as_float(((unsigned int)b) << 16);
}
__device__ __forceinline__ unsigned short f2b(float f) {
    unsigned int u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}
template <int T> __device__ __forceinline__ float ld(const void* p, unsigned long long i) {
    if (T == 0) return ((const float*)p)[i];
    if (T == 1) return h2f(((const unsigned short*)p)[i]);
    return b2f(((const unsigned short*)p)[i]);
}
template <int T> __device__ __forceinline__ void st(void* p, unsigned long long i, float v) {
    if (T == 0) ((float*)p)[i] = v;
    else if (T == 1) ((unsigned short*)p)[i] = f2h(v);
    else ((unsigned short*)p)[i] = f2b(v);
}
template <int T> __device__ __forceinline__ float rnd(float v) {
    if (T == 1) return h2f(f2h(v));
    if (T == 2) return b2f(f2b(v));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
// One Q8_1 block (ggml's block_q8_1: half2 {d, sum}, 32 int8) of the 32 values a warp holds, lane
// i value i, block `blk` of `q8`: what candle's quantize_q8_1 kernel writes from the same F32 values
// (same reductions, same division), so the MMVQ matmul reading it sees the bytes it would have.
__device__ __forceinline__ void q8_put(void* q8, unsigned long long blk, float x) {
    float amax = warp_max(fabsf(x)), sum = warp_sum(x);
    float d = amax / 127.0f;
    int q = amax == 0.0f ? 0 : (int)roundf(x / d);
    unsigned char* b = (unsigned char*)q8 + blk * 36ull;
    ((signed char*)b)[4 + (threadIdx.x & 31)] = (signed char)q;
    if ((threadIdx.x & 31) == 0) {
        ((unsigned short*)b)[0] = f2h(d);
        ((unsigned short*)b)[1] = f2h(sum);
    }
}
// Block-wide sum / max of blockDim.x (a multiple of 32, ≤ 1024) threads; every thread gets it.
__device__ float block_sum(float v, float* red) {
    unsigned int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0) red[w] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : 0.0f;
    v = warp_sum(v);
    __syncthreads();
    return v;
}
__device__ float block_max(float v, float* red) {
    unsigned int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    if (lane == 0) red[w] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : NEG_INF;
    v = warp_max(v);
    __syncthreads();
    return v;
}
// Element d of a head row x (bias added, rounded to A as the eager linear stores it).
template <int A, int C> __device__ float head_elem(const void* qkv, const void* buf,
        unsigned long long row, unsigned long long brow, int bias, unsigned int d) {
    if (!bias) return ld<A>(qkv, row + d);
    return rnd<A>(ld<A>(qkv, row + d) + ld<C>(buf, brow + d));
}
// Element d of that row rotated by the step row (cos | sin) as candle's rope / rope_i do in A:
// each product and the sum rounded to A.
template <int A, int C> __device__ float rotated(const void* qkv, const void* buf,
        unsigned long long row, unsigned long long brow, int bias, const float* step,
        unsigned int hd, unsigned int d, int inter) {
    unsigned int half = hd / 2;
    if (inter) {
        unsigned int j = d / 2;
        float c = step[j], s = step[half + j];
        if ((d & 1) == 0)
            return rnd<A>(rnd<A>(head_elem<A, C>(qkv, buf, row, brow, bias, d) * c)
                        - rnd<A>(head_elem<A, C>(qkv, buf, row, brow, bias, d + 1) * s));
        return rnd<A>(rnd<A>(head_elem<A, C>(qkv, buf, row, brow, bias, d - 1) * s)
                    + rnd<A>(head_elem<A, C>(qkv, buf, row, brow, bias, d) * c));
    }
    if (d < half)
        return rnd<A>(rnd<A>(head_elem<A, C>(qkv, buf, row, brow, bias, d) * step[d])
                    - rnd<A>(head_elem<A, C>(qkv, buf, row, brow, bias, d + half) * step[half + d]));
    unsigned int j = d - half;
    return rnd<A>(rnd<A>(head_elem<A, C>(qkv, buf, row, brow, bias, j) * step[half + j])
                + rnd<A>(head_elem<A, C>(qkv, buf, row, brow, bias, d) * step[j]));
}
extern "C" __global__ void rope_step(const float* table, const unsigned int* pos, float* out,
        unsigned int hd, unsigned int rows) {
    unsigned int i = threadIdx.x, p = pos[0];
    if (p >= rows) p = rows - 1;
    if (i < hd) out[i] = table[(unsigned long long)p * hd + i];
    else if (i == hd) out[i] = __uint_as_float(pos[0]);
}
// One thread per (sequence, K or V, KV head, element).
template <int A, int C> __device__ void rope_kv(void* buf, const void* qkv, const float* step,
        unsigned int b, unsigned int nh, unsigned int nkv, unsigned int hd, unsigned int ctx,
        int bias, int inter) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= b * 2 * nkv * hd) return;
    unsigned int d = i % hd, r = i / hd, kvh = r % nkv;
    r /= nkv;
    unsigned int which = r % 2, bi = r / 2;
    unsigned int pos = __float_as_uint(step[hd]);
    if (pos >= ctx) return;
    unsigned long long cache = (unsigned long long)b * nkv * ctx * hd;
    unsigned long long nq = (unsigned long long)(nh + 2 * nkv) * hd;
    unsigned long long col = (unsigned long long)(nh + which * nkv + kvh) * hd;
    unsigned long long row = bi * nq + col, brow = 2 * cache + col;
    float x = which == 0 ? rotated<A, C>(qkv, buf, row, brow, bias, step, hd, d, inter)
                         : head_elem<A, C>(qkv, buf, row, brow, bias, d);
    st<C>(buf, which * cache + (((unsigned long long)bi * nkv + kvh) * ctx + pos) * hd + d, x);
}
// One block of NT threads per (query head, sequence); positions in chunks of CH with an online
// softmax, so any context fits in fixed shared memory.
// What a decode-attention block knows of its head: where its KV rows are, its position, and the
// row that is its own (kn, vn in shared memory) with `fold`, or none (0xffffffff).
struct AttnHead {
    unsigned long long kb, vb;
    unsigned int pos, len, own;
};
// The block's q row (rotated) into qs and, with `fold`, its KV head's new K and V rows into kn, vn
// as rope_kv would store them; `writer` blocks also write those rows to the cache (one block per
// KV head: no block of the launch reads that row from memory, the next step's launch does). Ends
// with a barrier.
template <int A, int C> __device__ __forceinline__ AttnHead attn_head(const void* qkv, void* buf, const float* step,
        unsigned int b, unsigned int nh, unsigned int nkv, unsigned int hd, unsigned int ctx,
        int bias, int inter, int fold, bool writer, float* qs, float* kn, float* vn) {
    unsigned int h = blockIdx.x, bi = blockIdx.y, tid = threadIdx.x;
    AttnHead a;
    a.pos = __float_as_uint(step[hd]);
    a.len = a.pos + 1 < ctx ? a.pos + 1 : ctx;
    a.own = fold && a.pos < ctx ? a.pos : 0xffffffffu;
    unsigned long long cache = (unsigned long long)b * nkv * ctx * hd;
    unsigned long long nq = (unsigned long long)(nh + 2 * nkv) * hd;
    unsigned int kvh = h / (nh / nkv);
    a.kb = ((unsigned long long)bi * nkv + kvh) * ctx * hd;
    a.vb = cache + a.kb;
    if (tid < hd) {
        qs[tid] = rotated<A, C>(qkv, buf, bi * nq + (unsigned long long)h * hd,
                                2 * cache + (unsigned long long)h * hd, bias, step, hd, tid, inter);
        if (a.own != 0xffffffffu) {
            unsigned long long kc = (unsigned long long)(nh + kvh) * hd;
            unsigned long long vc = (unsigned long long)(nh + nkv + kvh) * hd;
            float k = rnd<C>(rotated<A, C>(qkv, buf, bi * nq + kc, 2 * cache + kc, bias, step,
                                           hd, tid, inter));
            float v = rnd<C>(head_elem<A, C>(qkv, buf, bi * nq + vc, 2 * cache + vc, bias, tid));
            kn[tid] = k;
            vn[tid] = v;
            if (writer && h % (nh / nkv) == 0) {
                st<C>(buf, a.kb + (unsigned long long)a.pos * hd + tid, k);
                st<C>(buf, a.vb + (unsigned long long)a.pos * hd + tid, v);
            }
        }
    }
    __syncthreads();
    return a;
}
// Softmax attention of qs over positions [t_begin, t_end) of the head's KV rows (own row from
// kn, vn), in chunks of CH with an online softmax: the running max m, sum l, and this thread's
// unnormalized ·V partial acc (thread = row group g of blockDim / hd, element d). A warp per
// position, four positions at a time, and eight ·V rows in flight: the step is latency-bound (a
// few hundred rows per head), so independent loads in flight are what makes it fast.
template <int C> __device__ __forceinline__ void attend(const void* buf, const AttnHead& a, unsigned int t_begin,
        unsigned int t_end, unsigned int hd, float scale, const float* qs, const float* kn,
        const float* vn, float* sc, float* red, float& m, float& l, float& acc) {
    unsigned int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
    unsigned int groups = blockDim.x / hd, g = tid / hd, d = tid % hd;
    m = NEG_INF;
    l = 0.0f;
    acc = 0.0f;
    for (unsigned int c0 = t_begin; c0 < t_end; c0 += CH) {
        unsigned int n = t_end - c0 < CH ? t_end - c0 : CH;
        for (unsigned int t0 = warp; t0 < n; t0 += 4 * nw) {
            float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            // The four rows' loads of one element are independent, so they issue together.
            const float* kr[4];
            unsigned long long ko[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                unsigned int t = t0 + u * nw;
                // Past the chunk: kn, a throwaway read, never the row being written.
                kr[u] = t >= n || c0 + t == a.own ? kn : nullptr;
                ko[u] = a.kb + (unsigned long long)(c0 + t) * hd;
            }
            for (unsigned int e = lane; e < hd; e += 32) {
                float q = qs[e];
#pragma unroll
                for (int u = 0; u < 4; u++) s[u] += q * (kr[u] ? kr[u][e] : ld<C>(buf, ko[u] + e));
            }
#pragma unroll
            for (int u = 0; u < 4; u++) {
                float v = warp_sum(s[u]);
                unsigned int t = t0 + u * nw;
                if (lane == 0 && t < n) sc[t] = v * scale;
            }
        }
        __syncthreads();
        float mx = NEG_INF;
        for (unsigned int t = tid; t < n; t += blockDim.x) mx = fmaxf(mx, sc[t]);
        float mn = fmaxf(m, block_max(mx, red));
        float sum = 0.0f;
        for (unsigned int t = tid; t < n; t += blockDim.x) {
            float p = expf(sc[t] - mn);
            sc[t] = p;
            sum += p;
        }
        sum = block_sum(sum, red);
        float alpha = expf(m - mn);
        l = l * alpha + sum;
        acc *= alpha;
        if (g < groups) {
            float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
            float a4 = 0.0f, a5 = 0.0f, a6 = 0.0f, a7 = 0.0f;
            unsigned long long vd = a.vb + (unsigned long long)c0 * hd + d;
            // The block's own row (fold) comes from vn, in its place in the sum.
            unsigned int mine = a.own - c0 < n ? a.own - c0 : 0xffffffffu;
            unsigned int t = g;
#define VROW(r) (sc[r] * ((r) == mine ? vn[d] : ld<C>(buf, vd + (unsigned long long)(r) * hd)))
            for (; t + 7 * groups < n; t += 8 * groups) {
                a0 += VROW(t);
                a1 += VROW(t + groups);
                a2 += VROW(t + 2 * groups);
                a3 += VROW(t + 3 * groups);
                a4 += VROW(t + 4 * groups);
                a5 += VROW(t + 5 * groups);
                a6 += VROW(t + 6 * groups);
                a7 += VROW(t + 7 * groups);
            }
            for (; t < n; t += groups) a0 += VROW(t);
#undef VROW
            acc += ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
        }
        m = mn;
        __syncthreads();
    }
}
// The head's row: the row groups' partials summed into element tid (< hd) of `pacc`'s first row.
__device__ __forceinline__ float attn_row(float acc, unsigned int hd, float* pacc) {
    unsigned int tid = threadIdx.x, groups = blockDim.x / hd, g = tid / hd;
    pacc[tid] = g < groups ? acc : 0.0f;
    __syncthreads();
    float o = 0.0f;
    if (tid < hd)
        for (unsigned int j = 0; j < groups; j++) o += pacc[j * hd + tid];
    return o;
}
// Output element tid (< hd, whole warps) of the head: stored, and its Q8_1 block with q8.
template <int A> __device__ __forceinline__ void attn_out(void* out, void* q8, unsigned int nh, unsigned int hd,
                                          float v) {
    unsigned long long i = ((unsigned long long)blockIdx.y * nh + blockIdx.x) * hd + threadIdx.x;
    st<A>(out, i, v);
    if (q8) q8_put(q8, i / 32, rnd<A>(v));
}
// One block of NT threads per (query head, sequence) over all positions 0..=pos.
template <int A, int C> __device__ void decode_attn(void* out, const void* qkv, void* buf,
        const float* step, unsigned int b, unsigned int nh, unsigned int nkv, unsigned int hd,
        unsigned int ctx, int bias, int inter, float scale, void* q8, int fold) {
    __shared__ float qs[256], kn[256], vn[256], sc[CH], red[32], part[NT];
    AttnHead a = attn_head<A, C>(qkv, buf, step, b, nh, nkv, hd, ctx, bias, inter, fold, true,
                                 qs, kn, vn);
    float m, l, acc;
    attend<C>(buf, a, 0, a.len, hd, scale, qs, kn, vn, sc, red, m, l, acc);
    float o = attn_row(acc, hd, part);
    if (threadIdx.x < hd) attn_out<A>(out, q8, nh, hd, o / l);
}
// Split attention ("flash-decoding", opt-in: QE_ATTN_SPLIT=1): grid (heads, sequences, splits),
// NS threads a block. Block `sp` attends to its share of positions 0..=pos, writes its running max,
// sum and unnormalized ·V row to `part`, and the last block of its head to finish (an atomic count,
// left at 0 again for the next launch) combines the shares into the output — one launch, and
// heads × splits blocks instead of one 1024-thread block per head (12 or 28 of 132 SMs).
#define NS 256
template <int A, int C> __device__ void decode_attn_split(void* out, const void* qkv, void* buf,
        const float* step, unsigned int b, unsigned int nh, unsigned int nkv, unsigned int hd,
        unsigned int ctx, int bias, int inter, float scale, void* q8, int fold,
        unsigned int splits, float* part, unsigned int* cnt) {
    __shared__ float qs[256], kn[256], vn[256], sc[CH], red[32], pacc[NS];
    __shared__ unsigned int last;
    unsigned int h = blockIdx.x, bi = blockIdx.y, sp = blockIdx.z, tid = threadIdx.x;
    // Split 0 writes the group's new K/V row.
    AttnHead a = attn_head<A, C>(qkv, buf, step, b, nh, nkv, hd, ctx, bias, inter, fold, sp == 0,
                                 qs, kn, vn);
    // This block's positions: [t_begin, t_end), possibly none.
    unsigned int per = (a.len + splits - 1) / splits;
    unsigned int t_begin = sp * per < a.len ? sp * per : a.len;
    unsigned int t_end = t_begin + per < a.len ? t_begin + per : a.len;
    float m, l, acc;
    attend<C>(buf, a, t_begin, t_end, hd, scale, qs, kn, vn, sc, red, m, l, acc);
    float o = attn_row(acc, hd, pacc);
    // This block's share: [max, sum, ·V row (hd)] at part[((bi · nh + h) · splits + sp) · (hd + 2)].
    unsigned long long hb = ((unsigned long long)bi * nh + h) * splits * (hd + 2);
    float* share = part + hb + (unsigned long long)sp * (hd + 2);
    if (tid < hd) share[2 + tid] = o;
    if (tid == 0) {
        share[0] = m;
        share[1] = l;
    }
    // Publish the share, then count it; the block that counts last reads every share.
    __threadfence();
    __syncthreads();
    if (tid == 0) last = atomicAdd(cnt + bi * nh + h, 1u) == splits - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    const volatile float* all = part + hb;
    if (tid < hd) {
        float mm = NEG_INF;
        for (unsigned int j = 0; j < splits; j++) mm = fmaxf(mm, all[j * (hd + 2)]);
        float ll = 0.0f, oo = 0.0f;
        for (unsigned int j = 0; j < splits; j++) {
            float lj = all[j * (hd + 2) + 1];
            if (lj > 0.0f) {
                float w = expf(all[j * (hd + 2)] - mm);
                ll += lj * w;
                oo += all[j * (hd + 2) + 2 + tid] * w;
            }
        }
        attn_out<A>(out, q8, nh, hd, oo / ll);
    }
    if (tid == 0) cnt[bi * nh + h] = 0;
}
template <int A> __device__ void swiglu(void* out, const void* gu, unsigned int rows,
        unsigned int inter, void* q8) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    // Whole warps return here when q8 is asked for (rows · inter is then a multiple of 32).
    if (i >= rows * inter) return;
    unsigned long long r = i / inter, j = i % inter;
    float g = ld<A>(gu, r * 2 * inter + j), u = ld<A>(gu, r * 2 * inter + inter + j);
    // silu rounded as candle's ops store its steps in A, then the product.
    float silu = rnd<A>(g / rnd<A>(1.0f + rnd<A>(expf(-g))));
    st<A>(out, i, silu * u);
    if (q8) q8_put(q8, i / 32, rnd<A>(silu * u));
}
// One block per row (blockDim.x threads, at most NT). Rows up to NR · blockDim.x wide are read
// once, every load issued before the first store (in flight together: a single block is
// latency-bound), and kept in registers; wider rows take a second pass over the inputs.
#define NR 8
template <int A> __device__ void add_rms_norm(void* out, const void* a, const void* r,
        const void* w, unsigned int rows, unsigned int h, float eps, void* q8) {
    __shared__ float red[32];
    unsigned long long row = blockIdx.x, n = (unsigned long long)rows * h, o = row * h;
    const unsigned int nt = blockDim.x;
    float ss = 0.0f;
    if (h <= NR * nt) {
        float xs[NR], ws[NR];
#pragma unroll
        for (int j = 0; j < NR; j++) {
            unsigned int e = threadIdx.x + j * nt;
            xs[j] = e < h ? ld<A>(a, o + e) + ld<A>(r, o + e) : 0.0f;
            ws[j] = e < h ? ld<A>(w, e) : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < NR; j++) {
            unsigned int e = threadIdx.x + j * nt;
            xs[j] = rnd<A>(xs[j]);
            if (e < h) st<A>(out, o + e, xs[j]);
            ss += xs[j] * xs[j];
        }
        float inv = rsqrtf(block_sum(ss, red) / (float)h + eps);
#pragma unroll
        for (int j = 0; j < NR; j++) {
            unsigned int e = threadIdx.x + j * nt;
            // Whole warps: with q8, h is a multiple of 32.
            if (e < h) {
                st<A>(out, n + o + e, xs[j] * inv * ws[j]);
                if (q8) q8_put(q8, (o + e) / 32, rnd<A>(xs[j] * inv * ws[j]));
            }
        }
        return;
    }
    for (unsigned int e = threadIdx.x; e < h; e += nt) {
        float x = rnd<A>(ld<A>(a, o + e) + ld<A>(r, o + e));
        st<A>(out, o + e, x);
        ss += x * x;
    }
    float inv = rsqrtf(block_sum(ss, red) / (float)h + eps);
    for (unsigned int e = threadIdx.x; e < h; e += nt) {
        float x = rnd<A>(ld<A>(a, o + e) + ld<A>(r, o + e));
        st<A>(out, n + o + e, x * inv * ld<A>(w, e));
        if (q8) q8_put(q8, (o + e) / 32, rnd<A>(x * inv * ld<A>(w, e)));
    }
}
// One warp per output row of w (n, k) · x (k): 16-byte non-coherent loads of 8 elements of the row
// and of x per lane and step, F32 accumulation, one rounding. T: 1 = F16, 2 = BF16.
__device__ __forceinline__ void ld4(const void* p, unsigned int& a, unsigned int& b,
                                    unsigned int& c, unsigned int& d) {
    asm("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "l"(p));
}
template <int T> __device__ __forceinline__ float lo16(unsigned int v) {
    return T == 1 ? h2f((unsigned short)(v & 0xffffu)) : b2f((unsigned short)(v & 0xffffu));
}
template <int T> __device__ __forceinline__ float hi16(unsigned int v) {
    return T == 1 ? h2f((unsigned short)(v >> 16)) : b2f((unsigned short)(v >> 16));
}
template <int T> __device__ void gemv(void* out, const void* w, const void* x, unsigned int n,
                                      unsigned int k) {
    const unsigned int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const unsigned int lane = threadIdx.x & 31u;
    if (row >= n) return;
    const unsigned short* wr = (const unsigned short*)w + (unsigned long long)row * k;
    const unsigned short* xv = (const unsigned short*)x;
    float acc = 0.f;
    #pragma unroll 4
    for (unsigned int i = lane * 8u; i < k; i += 256u) {
        unsigned int a[4], b[4];
        ld4(wr + i, a[0], a[1], a[2], a[3]);
        ld4(xv + i, b[0], b[1], b[2], b[3]);
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            acc += lo16<T>(a[j]) * lo16<T>(b[j]);
            acc += hi16<T>(a[j]) * hi16<T>(b[j]);
        }
    }
    acc = warp_sum(acc);
    if (lane == 0) st<T>(out, row, acc);
}
"#;

/// Names of the float dtypes in kernel names, with their template codes.
const DTYPES: [(&str, u8); 3] = [("f32", 0), ("f16", 1), ("bf16", 2)];

/// [`SRC`] with an `extern "C"` instantiation per dtype (pair). The kernels launched with up to
/// NT (1024) threads say so (`__launch_bounds__(NT, 1)`, so at most 64 registers a thread): the
/// norm with its row in registers took 66 without it, and its launch failed on the H200.
pub fn kernel_source() -> String {
    let mut s = SRC.to_string();
    for (a, ac) in DTYPES {
        for (c, cc) in DTYPES {
            s.push_str(&format!(
                "extern \"C\" __global__ void rope_kv_{a}_{c}(void* buf, const void* qkv, \
                 const float* step, unsigned int b, unsigned int nh, unsigned int nkv, \
                 unsigned int hd, unsigned int ctx, int bias, int inter) {{ \
                 rope_kv<{ac}, {cc}>(buf, qkv, step, b, nh, nkv, hd, ctx, bias, inter); }}\n\
                 extern \"C\" __global__ void __launch_bounds__(NT, 1) decode_attn_{a}_{c}(\
                 void* out, const void* qkv, \
                 const void* buf, const float* step, unsigned int b, unsigned int nh, \
                 unsigned int nkv, unsigned int hd, unsigned int ctx, int bias, int inter, \
                 float scale, void* q8, int fold) {{ decode_attn<{ac}, {cc}>(out, qkv, \
                 (void*)buf, step, b, nh, nkv, hd, ctx, bias, inter, scale, q8, fold); }}\n\
                 extern \"C\" __global__ void __launch_bounds__(NS, 1) decode_attn_split_{a}_{c}(\
                 void* out, const void* qkv, const void* buf, const float* step, unsigned int b, \
                 unsigned int nh, unsigned int nkv, unsigned int hd, unsigned int ctx, int bias, \
                 int inter, float scale, void* q8, int fold, unsigned int splits, float* part, \
                 unsigned int* cnt) {{ decode_attn_split<{ac}, {cc}>(out, qkv, (void*)buf, step, \
                 b, nh, nkv, hd, ctx, bias, inter, scale, q8, fold, splits, part, cnt); }}\n"
            ));
        }
        s.push_str(&format!(
            "extern \"C\" __global__ void swiglu_{a}(void* out, const void* gu, \
             unsigned int rows, unsigned int inter, void* q8) {{ \
             swiglu<{ac}>(out, gu, rows, inter, q8); }}\n\
             extern \"C\" __global__ void __launch_bounds__(NT, 1) add_rms_norm_{a}(void* out, \
             const void* a, \
             const void* r, const void* w, unsigned int rows, unsigned int h, float eps, \
             void* q8) {{ add_rms_norm<{ac}>(out, a, r, w, rows, h, eps, q8); }}\n"
        ));
        if ac != 0 {
            s.push_str(&format!(
                "extern \"C\" __global__ void gemv_{a}(void* out, const void* w, const void* x, \
                 unsigned int n, unsigned int k) {{ gemv<{ac}>(out, w, x, n, k); }}\n"
            ));
        }
    }
    s
}

#[cfg(feature = "cuda")]
mod cuda {
    use super::{
        add_norm_dims, contiguous, gemv_dims, swiglu_dims, AddRmsNorm, AttnDims, DecodeAttn,
    };
    use candle_core::backend::BackendStorage;
    use candle_core::cuda_backend::cudarc::driver::{DevicePtr, LaunchConfig, PushKernelArg};
    use candle_core::cuda_backend::{CudaDevice, CudaStorageSlice, WrapErr};
    use candle_core::{bail, CudaStorage, DType, Layout, Result, Shape};
    use std::sync::OnceLock;

    const MODULE: &str = "quantenergy_fused";
    /// Threads of the per-head and per-row kernels (the source's NT): a whole SM's worth, since
    /// these kernels have one block per head or row and are latency-bound.
    const NT: u32 = 1024;
    /// Values of a norm row each thread keeps in registers (the source's NR).
    const NR: usize = 8;
    /// Threads of a split-attention block (the source's NS).
    const NS: u32 = 256;

    /// The PTX of the fused kernels, compiled once per process by NVRTC.
    fn ptx() -> Result<&'static str> {
        static PTX: OnceLock<std::result::Result<String, String>> = OnceLock::new();
        match PTX.get_or_init(|| {
            candle_core::cuda_backend::cudarc::nvrtc::compile_ptx(super::kernel_source())
                .map(|p| p.to_src())
                .map_err(|e| format!("{e:?}"))
        }) {
            Ok(p) => Ok(p.as_str()),
            Err(e) => bail!("NVRTC could not compile the fused kernels: {e}"),
        }
    }

    fn code(dt: DType) -> Result<&'static str> {
        Ok(match dt {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            dt => bail!("fused kernels take F32, F16 or BF16, not {dt:?}"),
        })
    }

    /// The device address of element `off` of a storage. The kernels take untyped pointers (one
    /// launcher per op, whatever the dtypes); the engine runs on one stream with event tracking
    /// off, so the dropped sync guard records nothing.
    fn ptr(s: &CudaStorage, off: usize) -> Result<u64> {
        let stream = s.device.cuda_stream();
        let (p, size) = match &s.slice {
            CudaStorageSlice::F32(v) => (v.device_ptr(&stream).0, 4),
            CudaStorageSlice::F16(v) => (v.device_ptr(&stream).0, 2),
            CudaStorageSlice::BF16(v) => (v.device_ptr(&stream).0, 2),
            CudaStorageSlice::U32(v) => (v.device_ptr(&stream).0, 4),
            _ => bail!("fused kernels: unsupported storage dtype {:?}", s.dtype()),
        };
        Ok(p + (off * size) as u64)
    }

    /// A new uninitialised storage of `n` elements of `dt` on `dev`.
    fn alloc(dev: &CudaDevice, dt: DType, n: usize) -> Result<CudaStorage> {
        // SAFETY: every element is written by the kernel that fills it before it is read.
        Ok(unsafe {
            match dt {
                DType::F32 => CudaStorage::wrap_cuda_slice(dev.alloc::<f32>(n)?, dev.clone()),
                DType::F16 => CudaStorage::wrap_cuda_slice(dev.alloc::<half::f16>(n)?, dev.clone()),
                DType::BF16 => {
                    CudaStorage::wrap_cuda_slice(dev.alloc::<half::bf16>(n)?, dev.clone())
                }
                dt => bail!("fused kernels: no output of {dt:?}"),
            }
        })
    }

    /// An output of `n` values of `dt`, with room for their Q8_1 blocks after them when `q8`
    /// (F32 only): (storage, address of the blocks or 0, shape: `shape`, or flat with blocks).
    fn alloc_out(
        dev: &CudaDevice,
        dt: DType,
        keep: usize,
        (n, unit): (usize, usize),
        q8: bool,
        shape: Shape,
    ) -> Result<(CudaStorage, u64, Shape)> {
        if !q8 {
            return Ok((alloc(dev, dt, keep)?, 0, shape));
        }
        if dt != DType::F32 {
            bail!("Q8_1 blocks are written from F32 activations, not {dt:?}")
        }
        super::q8_units(n, unit)?;
        let len = keep + crate::engine::q8::words(n);
        let out = alloc(dev, dt, len)?;
        let q = ptr(&out, keep)?;
        Ok((out, q, Shape::from(len)))
    }

    fn cfg(grid: (u32, u32), block: u32) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (grid.0, grid.1, 1),
            block_dim: (block, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    pub fn rope_step(
        t: &CudaStorage,
        tl: &Layout,
        p: &CudaStorage,
        pl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let (rows, hd) = tl.shape().dims2()?;
        let to = contiguous(tl, rows * hd, "the rotary table")?;
        if t.dtype() != DType::F32 || p.dtype() != DType::U32 || hd + 1 > 1024 {
            bail!("rope-step: an F32 table (≤ 1023 wide) and a u32 position")
        }
        let dev = t.device.clone();
        let out = alloc(&dev, DType::F32, hd + 1)?;
        let f = dev.get_or_load_custom_func("rope_step", MODULE, ptx()?)?;
        let (tp, pp, op) = (ptr(t, to)?, ptr(p, pl.start_offset())?, ptr(&out, 0)?);
        let (hd32, rows32) = (hd as u32, rows as u32);
        let mut b = f.builder();
        b.arg(&tp).arg(&pp).arg(&op).arg(&hd32).arg(&rows32);
        // SAFETY: reads one table row (position clamped to the table), writes hd + 1 floats.
        unsafe { b.launch(cfg((1, 1), hd as u32 + 1)) }.w()?;
        Ok((out, Shape::from(hd + 1)))
    }

    /// (b, nh, nkv, hd, ctx, bias, interleaved) as kernel arguments.
    fn dim_args(d: &AttnDims) -> [u32; 7] {
        [
            d.batch as u32,
            d.heads as u32,
            d.kv_heads as u32,
            d.head_dim as u32,
            d.ctx as u32,
            d.bias as u32,
            d.interleaved as u32,
        ]
    }

    pub fn rope_kv(
        d: &AttnDims,
        buf: &mut CudaStorage,
        bl: &Layout,
        qkv: &CudaStorage,
        ql: &Layout,
        step: &CudaStorage,
        sl: &Layout,
    ) -> Result<()> {
        d.check()?;
        let bo = contiguous(bl, d.buf_len(), "rope-kv: the layer buffer")?;
        let qo = contiguous(ql, d.batch * d.qkv_width(), "rope-kv: q|k|v")?;
        let so = contiguous(sl, d.head_dim + 1, "rope-kv: the step row")?;
        let name = format!("rope_kv_{}_{}", code(qkv.dtype())?, code(buf.dtype())?);
        let dev = buf.device.clone();
        let f = dev.get_or_load_custom_func(&name, MODULE, ptx()?)?;
        let (bp, qp, sp) = (ptr(buf, bo)?, ptr(qkv, qo)?, ptr(step, so)?);
        let a = dim_args(d);
        let mut b = f.builder();
        b.arg(&bp).arg(&qp).arg(&sp);
        for x in &a {
            b.arg(x);
        }
        let n = (d.batch * 2 * d.kv_heads * d.head_dim) as u32;
        // SAFETY: writes one K and one V row per (sequence, KV head) inside the cache (position
        // checked against ctx); reads q|k|v rows and the bias within their sizes.
        unsafe { b.launch(LaunchConfig::for_num_elems(n)) }.w()?;
        Ok(())
    }

    /// A split attention's extra arguments: the shares' scratch (kept alive by the caller until
    /// the launch), its address, the counters' address, and the block count per head.
    fn split_args(
        d: &AttnDims,
        split: &super::AttnSplit,
        dev: &CudaDevice,
    ) -> Result<(CudaStorage, u64, u64, u32)> {
        let splits = split.splits;
        let heads = d.batch * d.heads;
        if splits < 2 || split.counters.elem_count() != heads {
            bail!(
                "split attention: {splits} splits, {} counters for {heads} heads",
                split.counters.elem_count()
            )
        }
        let part = alloc(dev, DType::F32, heads * splits * (d.head_dim + 2))?;
        let pp = ptr(&part, 0)?;
        let (cs, cl) = split.counters.storage_and_layout();
        let candle_core::Storage::Cuda(c) = &*cs else {
            bail!("split attention: the counters are not on the GPU")
        };
        if c.dtype() != DType::U32 || !cl.is_contiguous() {
            bail!(
                "split attention: contiguous u32 counters, not {:?}",
                c.dtype()
            )
        }
        let cp = ptr(c, cl.start_offset())?;
        Ok((part, pp, cp, splits as u32))
    }

    pub fn decode_attn(
        op: &DecodeAttn,
        qkv: &CudaStorage,
        ql: &Layout,
        buf: &CudaStorage,
        bl: &Layout,
        step: &CudaStorage,
        sl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let d = &op.dims;
        d.check()?;
        let bo = contiguous(bl, d.buf_len(), "decode-attn: the layer buffer")?;
        let qo = contiguous(ql, d.batch * d.qkv_width(), "decode-attn: q|k|v")?;
        let so = contiguous(sl, d.head_dim + 1, "decode-attn: the step row")?;
        let kernel = if op.split.is_some() {
            "decode_attn_split"
        } else {
            "decode_attn"
        };
        let name = format!("{kernel}_{}_{}", code(qkv.dtype())?, code(buf.dtype())?);
        let dev = buf.device.clone();
        let n = d.batch * d.heads * d.head_dim;
        let shape = Shape::from((d.batch, 1, d.heads * d.head_dim));
        let (out, q8, shape) = alloc_out(&dev, qkv.dtype(), n, (n, d.head_dim), op.q8, shape)?;
        let f = dev.get_or_load_custom_func(&name, MODULE, ptx()?)?;
        let (op_, qp, bp, sp) = (ptr(&out, 0)?, ptr(qkv, qo)?, ptr(buf, bo)?, ptr(step, so)?);
        let a = dim_args(d);
        let mut b = f.builder();
        b.arg(&op_).arg(&qp).arg(&bp).arg(&sp);
        for x in &a {
            b.arg(x);
        }
        let fold = i32::from(op.fold_kv);
        b.arg(&op.scale).arg(&q8).arg(&fold);
        let split = op
            .split
            .as_ref()
            .map(|s| split_args(d, s, &dev))
            .transpose()?;
        let launch = match &split {
            Some((_part, pp, cp, splits)) => {
                b.arg(splits).arg(pp).arg(cp);
                LaunchConfig {
                    grid_dim: (d.heads as u32, d.batch as u32, *splits),
                    block_dim: (NS, 1, 1),
                    shared_mem_bytes: 0,
                }
            }
            None => cfg((d.heads as u32, d.batch as u32), NT),
        };
        // SAFETY: one block per (head, sequence) reads its q row and KV head's first pos + 1
        // rows (clamped to ctx) and writes its head's hd outputs (and their hd / 32 Q8_1 blocks);
        // with fold_kv the first head of each KV group also writes that head's K and V row at
        // pos (< ctx) inside the buffer, a row no block of this launch reads from memory. Split:
        // each of a head's blocks does so over its share of the positions, writes its share
        // (hd + 2 floats) into the scratch sized for every block, and counts it in its head's
        // counter; the last one reads the shares, writes the outputs and zeroes the counter (the
        // decode state's, used by nothing else).
        unsafe { b.launch(launch) }.w()?;
        drop(split);
        Ok((out, shape))
    }

    pub fn swiglu(s: &CudaStorage, l: &Layout, q8: bool) -> Result<(CudaStorage, Shape)> {
        let (rows, i, shape) = swiglu_dims(l)?;
        let dev = s.device.clone();
        let (out, q8, shape) = alloc_out(&dev, s.dtype(), rows * i, (rows * i, i), q8, shape)?;
        let f =
            dev.get_or_load_custom_func(&format!("swiglu_{}", code(s.dtype())?), MODULE, ptx()?)?;
        let (op, sp) = (ptr(&out, 0)?, ptr(s, l.start_offset())?);
        let (r32, i32_) = (rows as u32, i as u32);
        let mut b = f.builder();
        b.arg(&op).arg(&sp).arg(&r32).arg(&i32_).arg(&q8);
        // SAFETY: one thread per output element; reads its gate and up elements (a warp writes
        // one Q8_1 block).
        unsafe { b.launch(LaunchConfig::for_num_elems((rows * i) as u32)) }.w()?;
        Ok((out, shape))
    }

    pub fn gemv(
        x: &CudaStorage,
        xl: &Layout,
        w: &CudaStorage,
        wl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let (n, k, shape) = gemv_dims(xl, wl, x.dtype(), w.dtype())?;
        let dt = x.dtype();
        // 16-byte loads: both rows must start on a 16-byte boundary (K % 8 == 0 keeps w's rows so).
        if !xl.start_offset().is_multiple_of(8) || !wl.start_offset().is_multiple_of(8) {
            bail!("gemv: x and w must start 16-byte aligned")
        }
        let dev = x.device.clone();
        let out = alloc(&dev, dt, n)?;
        let f = dev.get_or_load_custom_func(&format!("gemv_{}", code(dt)?), MODULE, ptx()?)?;
        let (op, wp, xp) = (
            ptr(&out, 0)?,
            ptr(w, wl.start_offset())?,
            ptr(x, xl.start_offset())?,
        );
        let (n32, k32) = (n as u32, k as u32);
        let mut b = f.builder();
        b.arg(&op).arg(&wp).arg(&xp).arg(&n32).arg(&k32);
        // SAFETY: one warp per output row (8 rows a block of 256) reads its w row and x, and
        // writes its one output; rows past n return at once.
        unsafe { b.launch(cfg((n.div_ceil(8) as u32, 1), 256)) }.w()?;
        Ok((out, shape))
    }

    pub fn add_rms_norm(
        norm: &AddRmsNorm,
        a: &CudaStorage,
        al: &Layout,
        r: &CudaStorage,
        rl: &Layout,
        w: &CudaStorage,
        wl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let (rows, h, shape) = add_norm_dims(al, rl, wl)?;
        let dt = a.dtype();
        if r.dtype() != dt || w.dtype() != dt {
            bail!("add-rms-norm: inputs of several dtypes")
        }
        let dev = a.device.clone();
        let n = rows * h;
        let (out, q8, shape) = alloc_out(&dev, dt, 2 * n, (n, h), norm.q8, shape)?;
        let f =
            dev.get_or_load_custom_func(&format!("add_rms_norm_{}", code(dt)?), MODULE, ptx()?)?;
        let (op, ap) = (ptr(&out, 0)?, ptr(a, al.start_offset())?);
        let (rp, wp) = (ptr(r, rl.start_offset())?, ptr(w, wl.start_offset())?);
        let (r32, h32) = (rows as u32, h as u32);
        let mut b = f.builder();
        b.arg(&op)
            .arg(&ap)
            .arg(&rp)
            .arg(&wp)
            .arg(&r32)
            .arg(&h32)
            .arg(&norm.eps)
            .arg(&q8);
        // SAFETY: one block per row reads its a, r rows and w, writes its sum and normed rows
        // (and the normed rows' Q8_1 blocks), with at most NT threads (its launch bounds).
        let threads = super::NORM_THREADS
            .get()
            .max(h.div_ceil(NR).next_multiple_of(32) as u32);
        unsafe { b.launch(cfg((rows as u32, 1), threads.min(NT))) }.w()?;
        Ok((out, shape))
    }
}
