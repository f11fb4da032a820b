//! Decode attention for one query position over the layer's cache ([`DecodeAttn`]): one block
//! per head, or split over blocks ([`AttnSplit`], `QE_ATTN_SPLIT=1`). Kernels:
//! `kernels/attention.cu`.

use super::common::*;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{bail, CpuStorage, CustomOp3, Layout};
use candle_core::{Result, Shape};

use super::rope::*;

/// Attention of one query position per sequence over the layer buffer's positions 0..=pos:
/// inputs q|k|v (b, 1, qkv_width), the layer buffer, the step row; output (b, 1, nh·hd) in
/// q|k|v's dtype. `scale` multiplies the scores (1/√hd).
pub struct DecodeAttn {
    /// Shapes.
    pub dims: AttnDims,
    /// Score scale.
    pub scale: f32,
    /// Also write the output's Q8_1 blocks after it (see [`q8`](crate::ops::q8)); the output is then
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
/// the H200 at ≤ 272 positions it was 1–5 % slower than the one-block kernel at every shape,
/// whose 12 or 28 blocks leave most of the card's 132 SMs idle only at long contexts.
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
pub static ATTN_SPLIT: crate::switch::Switch = crate::switch::Switch::new("QE_ATTN_SPLIT", false);

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

#[cfg(feature = "cuda")]
pub(crate) mod cuda {
    use super::*;
    use crate::kernels::launch::{NR, NS, NT};
    use crate::ops::common::gpu::*;
    use crate::ops::rope::cuda::dim_args;
    use candle_core::backend::BackendStorage;
    use candle_core::cuda_backend::cudarc::driver::{DevicePtr, LaunchConfig, PushKernelArg};
    use candle_core::cuda_backend::{CudaDevice, CudaStorageSlice, WrapErr};
    use candle_core::{bail, CudaStorage, DType, Layout, Result, Shape};

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
        let f = crate::kernel_func!(dev, &name)?;
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
}
