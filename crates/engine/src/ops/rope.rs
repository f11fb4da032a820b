//! Rotary embedding of the decode step: [`RopeStep`] (once per step, the rotary row and the
//! position on the device) and [`RopeKv`] (per layer: bias, rotary of K, K and V written into the
//! cache at the position). Kernels: `kernels/rope.cu`; [`AttnDims`] and the rotary helpers are the
//! attention's too.

use super::common::*;
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{bail, CpuStorage, CustomOp2, DType, InplaceOp3, Layout};
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
    pub(super) fn bias_off(&self) -> usize {
        2 * self.cache_len()
    }
    pub(super) fn check(&self) -> Result<()> {
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

/// The step row (hd + 1 F32: cos, sin, position bits) and the position.
pub(super) fn step_row<'a>(
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
pub(super) fn rotated(x: &[f32], d: usize, step: &[f32], interleaved: bool, dt: DType) -> f32 {
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
pub(super) fn head_row(
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

#[cfg(feature = "cuda")]
pub(crate) mod cuda {
    use super::*;
    use crate::ops::common::gpu::*;
    use candle_core::backend::BackendStorage;
    use candle_core::cuda_backend::cudarc::driver::{LaunchConfig, PushKernelArg};
    use candle_core::cuda_backend::WrapErr;
    use candle_core::{bail, CudaStorage, DType, Layout, Result, Shape};

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
        let f = crate::kernel_func!(dev, "rope_step")?;
        let (tp, pp, op) = (ptr(t, to)?, ptr(p, pl.start_offset())?, ptr(&out, 0)?);
        let (hd32, rows32) = (hd as u32, rows as u32);
        let mut b = f.builder();
        b.arg(&tp).arg(&pp).arg(&op).arg(&hd32).arg(&rows32);
        // SAFETY: reads one table row (position clamped to the table), writes hd + 1 floats.
        unsafe { b.launch(cfg((1, 1), hd as u32 + 1)) }.w()?;
        Ok((out, Shape::from(hd + 1)))
    }

    /// (b, nh, nkv, hd, ctx, bias, interleaved) as kernel arguments.
    pub(crate) fn dim_args(d: &AttnDims) -> [u32; 7] {
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
        let f = crate::kernel_func!(dev, &name)?;
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
}
