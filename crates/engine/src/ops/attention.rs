//! Decode attention for one query position over the layer's cache ([`DecodeAttn`]): split over
//! blocks, one block per KV head's query group ([`AttnSplit`]), or one block per query head for
//! the shapes the split kernel does not cover. Kernels: `kernels/attention.cu`.

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
    /// Split each KV group's positions over several blocks (GPU only, see [`AttnSplit`]; shapes
    /// it does not cover fall back to the one-block kernel); `None`: one 1024-thread block per
    /// query head. The CPU op computes the same attention either way.
    pub split: Option<AttnSplit>,
}

/// Split attention ("flash-decoding"): `splits` blocks per (KV head, sequence), each attending to
/// a share of the positions for all the query heads of the KV head's group, so a K/V row is read
/// once per group, not once per query head; the last block to finish combines the shares (an
/// atomic count per group in `counters`, which every launch leaves at zero). The GPU's default:
/// at long contexts the one-block kernel leaves most SMs idle and reads every row g times.
#[derive(Clone)]
pub struct AttnSplit {
    /// Blocks per (KV head, sequence), 1..=[`AttnSplit::MAX_SPLITS`].
    pub splits: usize,
    /// (batch · heads) u32 zeros on the device, kept by the decode state.
    pub counters: candle_core::Tensor,
    /// Run the shares' products on tensor cores (`kernels/attention_mma.cu`) where the cache is
    /// F16 or BF16; other caches keep the CUDA-core kernel. Only for a device that has them
    /// ([`crate::kernels::arch::has_tensor_cores`]): the kernels are empty for older targets.
    pub tensor_cores: bool,
}

impl AttnSplit {
    /// Blocks the split kernel aims at: one per SM of an H100/H200 (132); its blocks hold 144
    /// registers a thread, so one block fits an SM.
    pub const TARGET_BLOCKS: usize = 132;
    /// Fewest positions a block attends to: below this the combine costs more than the split
    /// saves.
    pub const MIN_POSITIONS: usize = 32;
    /// Most blocks per group (the combine's weights fit its shared memory).
    pub const MAX_SPLITS: usize = 256;
    /// Most query heads per KV head the kernel serves (a warp each in its softmax).
    pub const MAX_GROUP: usize = 8;

    /// Blocks per KV head for `kv_heads · batch` groups over a `ctx`-position cache: about
    /// [`Self::TARGET_BLOCKS`] in all, at least [`Self::MIN_POSITIONS`] positions a block.
    /// [`ATTN_TARGET_BLOCKS`] and [`ATTN_MIN_POSITIONS`] replace the two for an A/B on the card.
    pub fn splits_for(kv_heads: usize, batch: usize, ctx: usize) -> usize {
        let by_sm = (ATTN_TARGET_BLOCKS.get() as usize).div_ceil((kv_heads * batch).max(1));
        ctx.div_ceil(ATTN_MIN_POSITIONS.get() as usize)
            .min(by_sm)
            .clamp(1, Self::MAX_SPLITS)
    }

    /// Whether the GPU's attention over `d` splits: a shape the kernel covers, a cache of at
    /// least [`ATTN_SPLIT_FROM`] positions, not [`ATTN_ONE_BLOCK`].
    pub fn pays(d: &AttnDims) -> bool {
        Self::covers(d) && d.ctx >= ATTN_SPLIT_FROM.get() as usize && !ATTN_ONE_BLOCK.on()
    }

    /// Whether the engine's split attention on `dev` runs on tensor cores: [`ATTN_MMA`] on, and a
    /// device that has them ([`crate::kernels::arch::has_tensor_cores`]).
    pub fn tensor_cores_for(dev: &candle_core::Device) -> Result<bool> {
        Ok(ATTN_MMA.get() != 0 && crate::kernels::arch::has_tensor_cores(dev)?)
    }

    /// Whether the split kernel covers a shape: head width 64, 128 or 256 (a row is hd / 8
    /// lanes of 8 elements), at most [`Self::MAX_GROUP`] query heads per KV head.
    pub fn covers(d: &AttnDims) -> bool {
        matches!(d.head_dim, 64 | 128 | 256)
            && d.kv_heads > 0
            && d.heads.is_multiple_of(d.kv_heads)
            && d.heads / d.kv_heads <= Self::MAX_GROUP
    }
}

/// Smallest cache (positions) the GPU splits attention over: below it the one-block kernel is
/// faster (`QE_ATTN_SPLIT_FROM`, 512; 0 splits every cache, for the A/B that sets it). On the
/// H200 at 272 positions (16 + 256) the split kernel was 3–5 % slower at Qwen2-1.5B, at 1 280
/// and more it was faster (docs/MEASUREMENTS.md).
pub static ATTN_SPLIT_FROM: crate::switch::Knob =
    crate::switch::Knob::new("QE_ATTN_SPLIT_FROM", 512, &[0, 256, 512, 768, 1024, 2048]);

/// Blocks the split kernel aims at (`QE_ATTN_TARGET_BLOCKS`; [`AttnSplit::TARGET_BLOCKS`]), for
/// tuning on the card.
pub static ATTN_TARGET_BLOCKS: crate::switch::Knob = crate::switch::Knob::new(
    "QE_ATTN_TARGET_BLOCKS",
    AttnSplit::TARGET_BLOCKS as u32,
    &[33, 66, 132, 264],
);

/// Fewest positions a split block attends to (`QE_ATTN_MIN_POSITIONS`;
/// [`AttnSplit::MIN_POSITIONS`]), for tuning on the card (16: one tile a block for the
/// tensor-core kernel, whose warps take 16 positions each).
pub static ATTN_MIN_POSITIONS: crate::switch::Knob = crate::switch::Knob::new(
    "QE_ATTN_MIN_POSITIONS",
    AttnSplit::MIN_POSITIONS as u32,
    &[16, 32, 64, 128, 256, 512],
);

/// Passes of row slots in a split block's chunk (`QE_ATTN_U`, 6): more keeps more rows in flight
/// and more registers. Compiled into the kernels ([`crate::kernels::source`]), for tuning on the card.
pub static ATTN_PASSES: crate::switch::Knob = crate::switch::Knob::new("QE_ATTN_U", 6, &[4, 6, 8]);

/// Split blocks an SM holds (`QE_ATTN_BLOCKS_PER_SM`, 1): 2 caps the kernel at 128 registers a
/// thread so that one block's loads overlap another's arithmetic; pair it with
/// `QE_ATTN_TARGET_BLOCKS=264`. Compiled into the kernels, for tuning on the card.
pub static ATTN_BLOCKS_PER_SM: crate::switch::Knob =
    crate::switch::Knob::new("QE_ATTN_BLOCKS_PER_SM", 1, &[1, 2]);

/// Whether a split block loads its next chunk's rows while it works on this one
/// (`QE_ATTN_PREFETCH`, 0): a long share's memory wait then overlaps its arithmetic. Compiled into
/// the kernels, for the A/B on the card (7 B's 16 k decode, where the attention moves the cache at
/// ≈ 1.1 TB/s, half of llama.cpp's rate).
pub static ATTN_PREFETCH: crate::switch::Knob =
    crate::switch::Knob::new("QE_ATTN_PREFETCH", 0, &[0, 1]);

/// Whether a split block converts each K and V row from the cache's type once for its whole
/// query group (`QE_ATTN_HOIST`, 0), not once a head: the same sums in the same order, a sixth
/// of the conversions. Compiled into the kernels, for the A/B on the card.
pub static ATTN_HOIST: crate::switch::Knob = crate::switch::Knob::new("QE_ATTN_HOIST", 0, &[0, 1]);

/// Whether the engine's split attention runs on tensor cores (`QE_ATTN_MMA`, 0): the scores and
/// ·V sums as mma.sync products, q and the weights split into high and low halves so that no
/// rounding is added. For the A/B on the card against the CUDA-core kernel, whose 7 B decode at
/// 16 k moves the cache at ≈ 1.1 TB/s where llama.cpp's tensor-core kernel moves it at ≈ 2.5.
pub static ATTN_MMA: crate::switch::Knob = crate::switch::Knob::new("QE_ATTN_MMA", 0, &[0, 1]);

/// Force the one-block-per-query-head kernel on the GPU (`QE_ATTN_ONE_BLOCK=1`), to compare it
/// with the split kernel; off.
pub static ATTN_ONE_BLOCK: crate::switch::Switch =
    crate::switch::Switch::new("QE_ATTN_ONE_BLOCK", false);

/// The kernel the GPU launches for activations `act` over a `cache` layer buffer: with a split
/// (of a shape [`AttnSplit::covers`]), the tensor-core kernel where it was asked for and the cache
/// is F16 or BF16, else the CUDA-core one; without, the one-block kernel.
pub fn kernel_name(
    head_dim: usize,
    act: candle_core::DType,
    cache: candle_core::DType,
    split: Option<&AttnSplit>,
) -> Result<String> {
    use candle_core::DType;
    let (a, c) = (super::common::code(act)?, super::common::code(cache)?);
    Ok(match split {
        Some(s) if s.tensor_cores && matches!(cache, DType::F16 | DType::BF16) => {
            format!("decode_attn_mma{head_dim}_{a}_{c}")
        }
        Some(_) => format!("decode_attn_split{head_dim}_{a}_{c}"),
        None => format!("decode_attn_{a}_{c}"),
    })
}

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
    use crate::kernels::launch::{NS, NT};
    use crate::ops::common::gpu::*;
    use crate::ops::rope::cuda::dim_args;
    use candle_core::backend::BackendStorage;
    use candle_core::cuda_backend::cudarc::driver::{LaunchConfig, PushKernelArg};
    use candle_core::cuda_backend::{CudaDevice, WrapErr};
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
        if !(1..=super::AttnSplit::MAX_SPLITS).contains(&splits)
            || split.counters.elem_count() != heads
        {
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
        let dev = buf.device.clone();
        let (qp, bp, sp) = (ptr(qkv, qo)?, ptr(buf, bo)?, ptr(step, so)?);
        // The split kernel loads the cache 16 bytes at a time.
        let split = op
            .split
            .as_ref()
            .filter(|_| super::AttnSplit::covers(d) && bp % 16 == 0);
        let name = kernel_name(d.head_dim, qkv.dtype(), buf.dtype(), split)?;
        let n = d.batch * d.heads * d.head_dim;
        let shape = Shape::from((d.batch, 1, d.heads * d.head_dim));
        let (out, q8, shape) = alloc_out(&dev, qkv.dtype(), n, (n, d.head_dim), op.q8, shape)?;
        let f = crate::kernel_func!(dev, &name)?;
        let op_ = ptr(&out, 0)?;
        let a = dim_args(d);
        let mut b = f.builder();
        b.arg(&op_).arg(&qp).arg(&bp).arg(&sp);
        for x in &a {
            b.arg(x);
        }
        let fold = i32::from(op.fold_kv);
        b.arg(&op.scale).arg(&q8).arg(&fold);
        let split = split.map(|s| split_args(d, s, &dev)).transpose()?;
        let launch = match &split {
            Some((_part, pp, cp, splits)) => {
                b.arg(splits).arg(pp).arg(cp);
                LaunchConfig {
                    grid_dim: (d.kv_heads as u32, d.batch as u32, *splits),
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
        // each of a (KV head, sequence)'s blocks reads the group's q rows and its share of the
        // positions (16-byte loads: the buffer is 16-byte aligned, hd a multiple of 8), writes
        // one share (hd + 2 floats) per query head of the group into the scratch sized for every
        // block and head, and counts them in the group's first head's counter; the last one
        // reads the shares, writes the group's outputs and zeroes the counter (the decode
        // state's, used by nothing else). Only split 0 writes the folded K/V row. The tensor-core
        // split kernel reads and writes the same (past its share a warp reads the share's last
        // row again, with weight 0).
        unsafe { b.launch(launch) }.w()?;
        drop(split);
        Ok((out, shape))
    }
}
