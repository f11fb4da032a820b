//! A float projection at one row ([`Gemv`], opt-in with `QE_GEMV=1`). Kernel:
//! `kernels/gemv.cu`.

use super::common::*;
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{bail, CpuStorage, CustomOp2, DType, Layout};
use candle_core::{Result, Shape};

/// `x · wᵀ` for one row `x` (.., K) and a weight `w` (N, K), both F16 or both BF16 and
/// contiguous, K a multiple of 8 (the kernel's 16-byte loads): output (.., N) in their dtype,
/// accumulated in F32 and rounded once.
pub struct Gemv;

/// Whether the graph engine's float projections at one row use [`Gemv`] (`QE_GEMV=1`; off). On the
/// H200 it was 1.0 % and 2.4 % faster than cuBLAS's GEMM at Qwen2-7B F16 and 2–6 % slower at
/// 0.5–1.5 B; the one 7 B arm metered with it drew 602 W where a cuBLAS arm metered on another
/// card drew 523 W: +13 % energy per token for +2 % speed. Until one card has metered both, the
/// meter's default stays cuBLAS, whose energy is what deployed F16 engines spend.
pub static GEMV: crate::switch::Switch = crate::switch::Switch::new("QE_GEMV", false);

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

#[cfg(feature = "cuda")]
pub(crate) mod cuda {
    use super::*;
    use crate::ops::common::gpu::*;
    use candle_core::backend::BackendStorage;
    use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
    use candle_core::cuda_backend::WrapErr;
    use candle_core::{bail, CudaStorage, Layout, Result, Shape};

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
        let f = crate::kernel_func!(dev, &format!("gemv_{}", code(dt)?))?;
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
}
