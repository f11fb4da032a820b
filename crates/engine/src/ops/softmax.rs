//! The prefill's causal softmax ([`CausalSoftmax`]): scores scaled, masked by position and
//! softmaxed in one kernel. Kernel: `kernels/softmax.cu`.

use super::common::*;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{bail, CpuStorage, CustomOp2, Layout};
use candle_core::{Result, Shape};

/// Softmax over the last dim of contiguous attention scores (.., queries, keys), each scaled by
/// `scale` (rounded to the scores' dtype, as the eager models store the scaled scores) with key j
/// hidden from query i unless j ≤ pos + i; `pos` is a (1,) u32 tensor (the chunk's first
/// position, on the device). The rows' leading dims are (batch, KV head, query head of the group):
/// a row's query is its index modulo `queries`. Output: the probabilities, in the scores' dtype;
/// hidden keys are 0.
pub struct CausalSoftmax {
    /// Queries of the chunk (the scores' second-to-last dim before grouping).
    pub queries: usize,
    /// Score scale (1/√hd).
    pub scale: f32,
}

/// (rows, keys) of a scores layout.
fn softmax_dims(l: &Layout, queries: usize) -> Result<(usize, usize)> {
    let keys = *l.shape().dims().last().unwrap_or(&0);
    let rows = l.shape().elem_count() / keys.max(1);
    if keys == 0 || queries == 0 || !rows.is_multiple_of(queries) || !l.is_contiguous() {
        bail!(
            "causal-softmax: scores {:?} must be contiguous rows of keys, a multiple of {queries} queries",
            l.shape()
        )
    }
    Ok((rows, keys))
}

impl CustomOp2 for CausalSoftmax {
    fn name(&self) -> &'static str {
        "causal-softmax"
    }

    fn cpu_fwd(
        &self,
        s: &CpuStorage,
        l: &Layout,
        pos: &CpuStorage,
        pl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (rows, keys) = softmax_dims(l, self.queries)?;
        let dt = float_dtype(s, "causal-softmax: the scores")?;
        let p = super::kv::cpu_pos(pos, pl)?;
        let o = l.start_offset();
        let mut out = zeros(dt, rows * keys);
        let mut row = vec![0f32; keys];
        for r in 0..rows {
            let seen = (p + r % self.queries + 1).min(keys);
            for (j, x) in row[..seen].iter_mut().enumerate() {
                *x = round_to(dt, get(s, o + r * keys + j) * self.scale);
            }
            let m = row[..seen].iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
            let l: f32 = row[..seen].iter().map(|x| (x - m).exp()).sum();
            for (j, x) in row[..seen].iter().enumerate() {
                put(&mut out, r * keys + j, (x - m).exp() / l);
            }
        }
        Ok((out, l.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &CudaStorage,
        l: &Layout,
        pos: &CudaStorage,
        pl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        cuda::causal_softmax(self, s, l, pos, pl)
    }
}

#[cfg(feature = "cuda")]
pub(crate) mod cuda {
    use super::*;
    use crate::kernels::launch::NS;
    use crate::ops::common::gpu::*;
    use candle_core::backend::BackendStorage;
    use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
    use candle_core::cuda_backend::WrapErr;
    use candle_core::DType;

    pub fn causal_softmax(
        op: &CausalSoftmax,
        s: &CudaStorage,
        l: &Layout,
        pos: &CudaStorage,
        pl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let (rows, keys) = softmax_dims(l, op.queries)?;
        if pos.dtype() != DType::U32 || pl.shape().elem_count() != 1 {
            bail!("causal-softmax: the position must be one u32")
        }
        let dev = s.device.clone();
        let out = alloc(&dev, s.dtype(), rows * keys)?;
        let f = crate::kernel_func!(dev, &format!("causal_softmax_{}", code(s.dtype())?))?;
        let (op_, sp, pp) = (
            ptr(&out, 0)?,
            ptr(s, l.start_offset())?,
            ptr(pos, pl.start_offset())?,
        );
        let (q, k) = (op.queries as u32, keys as u32);
        let mut b = f.builder();
        b.arg(&op_).arg(&sp).arg(&pp).arg(&q).arg(&k).arg(&op.scale);
        // SAFETY: one block per row reads its row's first min(pos + i + 1, keys) scores and
        // writes its row's keys outputs.
        unsafe { b.launch(cfg((rows as u32, 1), NS)) }.w()?;
        Ok((out, l.shape().clone()))
    }
}
