//! silu(gate)·up from the fused gate|up projection ([`SwiGlu`]). Kernel: `kernels/swiglu.cu`.

use super::common::*;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{bail, CpuStorage, CustomOp1, Layout};
use candle_core::{Result, Shape};

/// silu(gate)·up from a contiguous (.., 2·I) gate|up tensor → (.., I) of its dtype. silu's steps
/// are rounded to the dtype as candle's CPU op rounds them, so F16/BF16 match the eager model.
pub struct SwiGlu {
    /// Also write the output's Q8_1 blocks after it (flat output, see [`q8`](crate::ops::q8)).
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

#[cfg(feature = "cuda")]
pub(crate) mod cuda {
    use super::*;
    use crate::ops::common::gpu::*;
    use candle_core::backend::BackendStorage;
    use candle_core::cuda_backend::cudarc::driver::{LaunchConfig, PushKernelArg};
    use candle_core::cuda_backend::WrapErr;
    use candle_core::{CudaStorage, Layout, Result, Shape};

    pub fn swiglu(s: &CudaStorage, l: &Layout, q8: bool) -> Result<(CudaStorage, Shape)> {
        let (rows, i, shape) = swiglu_dims(l)?;
        let dev = s.device.clone();
        let (out, q8, shape) = alloc_out(&dev, s.dtype(), rows * i, (rows * i, i), q8, shape)?;
        let f = crate::kernel_func!(dev, &format!("swiglu_{}", code(s.dtype())?))?;
        let (op, sp) = (ptr(&out, 0)?, ptr(s, l.start_offset())?);
        let (r32, i32_) = (rows as u32, i as u32);
        let mut b = f.builder();
        b.arg(&op).arg(&sp).arg(&r32).arg(&i32_).arg(&q8);
        // SAFETY: one thread per output element; reads its gate and up elements (a warp writes
        // one Q8_1 block).
        unsafe { b.launch(LaunchConfig::for_num_elems((rows * i) as u32)) }.w()?;
        Ok((out, shape))
    }
}
