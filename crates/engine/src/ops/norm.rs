//! Residual add and the RMSNorm after it ([`AddRmsNorm`]). Kernel: `kernels/norm.cu`.

use super::common::*;
use candle_core::backend::BackendStorage;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{bail, CpuStorage, CustomOp3, Layout};
use candle_core::{Result, Shape};

/// Threads of an add + norm block (`QE_NORM_THREADS`: 128 to 1024, a floor: a row of more than
/// 8 values a thread gets width / 8 threads, up to 1024, so it stays in registers). The kernel
/// is a latency-bound single block per row: fewer threads mean cheaper barriers but fewer loads
/// in flight, which only the card can weigh. On the H200, 512 beat 1024 by 2.5 % of a
/// whole Qwen2-1.5B Q4_0 step and 0.7 % at 7 B F16; 256 was no better than 1024. (Fewer than 1024
/// threads for the one-block attention lost 1–14 %.)
pub static NORM_THREADS: crate::switch::Knob =
    crate::switch::Knob::new("QE_NORM_THREADS", 512, &[128, 256, 512, 1024]);

/// `x = a + r` (rounded to the dtype, as the eager model stores the residual) and
/// `rms_norm(x)·w`, from a, r (.., h) and w (h), all one dtype and contiguous; output (2, ..):
/// `[0]` the sum, `[1]` the normed sum.
pub struct AddRmsNorm {
    /// The norm's ε.
    pub eps: f32,
    /// Also write the normed sum's Q8_1 blocks after both (flat output, see [`q8`](crate::ops::q8)).
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

#[cfg(feature = "cuda")]
pub(crate) mod cuda {
    use super::*;
    use crate::kernels::launch::{NR, NT};
    use crate::ops::common::gpu::*;
    use candle_core::backend::BackendStorage;
    use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
    use candle_core::cuda_backend::WrapErr;
    use candle_core::{bail, CudaStorage, Layout, Result, Shape};

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
        let f = crate::kernel_func!(dev, &format!("add_rms_norm_{}", code(dt)?))?;
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
            .max(h.div_ceil(NR as usize).next_multiple_of(32) as u32);
        unsafe { b.launch(cfg((rows as u32, 1), threads.min(NT))) }.w()?;
        Ok((out, shape))
    }
}
