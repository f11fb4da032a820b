//! In-place device ops the static decode step needs, with a CPU and a CUDA implementation:
//!
//! * [`KvWrite`] — write `s` new K or V rows into a preallocated cache at the position held in a
//!   device `u32` tensor (no host value: the same launch is right at every step);
//! * [`AddU32`] — add a constant to a device `u32` tensor in place (the position counter).
//!
//! The CUDA kernels are `crates/engine/kernels/kv.cu` (raw 16- or 32-bit words, any dtype),
//! loaded by [`crate::kernels`], so they launch on candle's stream and are captured into the CUDA
//! graph with everything else.

use candle_core::{bail, CpuStorage, CudaStorage, InplaceOp1, InplaceOp3, Layout, Result};

/// `cache[.., pos + j, ..] = new[.., j, ..]` for a cache (b, h, ctx, d) and new rows (b, h, s, d),
/// both contiguous and of one dtype; `pos` a (1,) u32 tensor.
pub struct KvWrite;

/// Shapes of a KV write: (rows = b·h, s, ctx, d).
fn kv_dims(cache: &Layout, new: &Layout) -> Result<(usize, usize, usize, usize)> {
    let (b, h, ctx, d) = cache.shape().dims4()?;
    let (b2, h2, s, d2) = new.shape().dims4()?;
    if (b, h, d) != (b2, h2, d2) {
        bail!(
            "kv-write: cache {:?} and new rows {:?} disagree",
            cache.shape(),
            new.shape()
        )
    }
    if !cache.is_contiguous() || !new.is_contiguous() {
        bail!("kv-write: cache and new rows must be contiguous")
    }
    Ok((b * h, s, ctx, d))
}

fn cpu_write<T: Copy>(
    cache: &mut [T],
    co: usize,
    new: &[T],
    no: usize,
    (rows, s, ctx, d): (usize, usize, usize, usize),
    pos: usize,
) -> Result<()> {
    if pos + s > ctx {
        bail!("kv-write: position {pos} + {s} rows past the cache's {ctx}")
    }
    for r in 0..rows {
        for j in 0..s {
            let dst = co + (r * ctx + pos + j) * d;
            let src = no + (r * s + j) * d;
            cache[dst..dst + d].copy_from_slice(&new[src..src + d]);
        }
    }
    Ok(())
}

/// The first position a u32 tensor holds, on the CPU (a chunk's positions start there).
pub(super) fn cpu_pos(pos: &CpuStorage, l: &Layout) -> Result<usize> {
    match pos {
        CpuStorage::U32(v) if l.shape().elem_count() > 0 => Ok(v[l.start_offset()] as usize),
        _ => bail!("the position must be u32"),
    }
}

impl InplaceOp3 for KvWrite {
    fn name(&self) -> &'static str {
        "kv-write"
    }

    fn cpu_fwd(
        &self,
        cache: &mut CpuStorage,
        cl: &Layout,
        new: &CpuStorage,
        nl: &Layout,
        pos: &CpuStorage,
        pl: &Layout,
    ) -> Result<()> {
        let dims = kv_dims(cl, nl)?;
        let p = cpu_pos(pos, pl)?;
        let (co, no) = (cl.start_offset(), nl.start_offset());
        match (cache, new) {
            (CpuStorage::F32(c), CpuStorage::F32(n)) => cpu_write(c, co, n, no, dims, p),
            (CpuStorage::F16(c), CpuStorage::F16(n)) => cpu_write(c, co, n, no, dims, p),
            (CpuStorage::BF16(c), CpuStorage::BF16(n)) => cpu_write(c, co, n, no, dims, p),
            _ => bail!("kv-write: cache and new rows must be one of F32, F16, BF16, alike"),
        }
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        cache: &mut CudaStorage,
        cl: &Layout,
        new: &CudaStorage,
        nl: &Layout,
        pos: &CudaStorage,
        pl: &Layout,
    ) -> Result<()> {
        cuda::kv_write(cache, cl, new, nl, pos, pl)
    }

    #[cfg(not(feature = "cuda"))]
    fn cuda_fwd(
        &self,
        _: &mut CudaStorage,
        _: &Layout,
        _: &CudaStorage,
        _: &Layout,
        _: &CudaStorage,
        _: &Layout,
    ) -> Result<()> {
        bail!("kv-write: built without the `cuda` feature")
    }
}

/// `x += n` in place for a u32 tensor (every element).
pub struct AddU32(pub u32);

impl InplaceOp1 for AddU32 {
    fn name(&self) -> &'static str {
        "add-u32"
    }

    fn cpu_fwd(&self, s: &mut CpuStorage, l: &Layout) -> Result<()> {
        let CpuStorage::U32(v) = s else {
            bail!("add-u32 needs a u32 tensor")
        };
        if !l.is_contiguous() {
            bail!("add-u32 needs a contiguous tensor")
        }
        let o = l.start_offset();
        for x in &mut v[o..o + l.shape().elem_count()] {
            *x = x.wrapping_add(self.0);
        }
        Ok(())
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &mut CudaStorage, l: &Layout) -> Result<()> {
        cuda::add_u32(s, l, self.0)
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    use super::kv_dims;
    use candle_core::cuda_backend::cudarc::driver::{LaunchConfig, PushKernelArg};
    use candle_core::cuda_backend::{CudaStorageSlice, WrapErr};
    use candle_core::{bail, CudaStorage, Layout, Result};

    pub fn kv_write(
        cache: &mut CudaStorage,
        cl: &Layout,
        new: &CudaStorage,
        nl: &Layout,
        pos: &CudaStorage,
        pl: &Layout,
    ) -> Result<()> {
        let (rows, s, ctx, d) = kv_dims(cl, nl)?;
        let n = (rows * s * d) as u32;
        let cfg = LaunchConfig::for_num_elems(n);
        let dev = cache.device.clone();
        let p = pos.as_cuda_slice::<u32>()?.slice(pl.start_offset()..);
        let (co, no) = (cl.start_offset(), nl.start_offset());
        let (rows, s, ctx, d) = (rows as u32, s as u32, ctx as u32, d as u32);
        macro_rules! launch {
            ($c:expr, $n:expr, $name:expr) => {{
                let f = crate::kernel_func!(dev, $name)?;
                let mut c = $c.slice_mut(co..);
                let nn = $n.slice(no..);
                let mut b = f.builder();
                b.arg(&mut c);
                b.arg(&nn);
                b.arg(&p);
                b.arg(&rows);
                b.arg(&s);
                b.arg(&ctx);
                b.arg(&d);
                // SAFETY: the kernel writes only inside the cache (bounds checked against ctx)
                // and reads `rows·s·d` source elements, the new rows' size.
                unsafe { b.launch(cfg) }.w()?;
            }};
        }
        match (&mut cache.slice, &new.slice) {
            (CudaStorageSlice::F32(c), CudaStorageSlice::F32(n)) => launch!(c, n, "kv_write_u32"),
            (CudaStorageSlice::F16(c), CudaStorageSlice::F16(n)) => launch!(c, n, "kv_write_u16"),
            (CudaStorageSlice::BF16(c), CudaStorageSlice::BF16(n)) => {
                launch!(c, n, "kv_write_u16")
            }
            _ => bail!("kv-write: cache and new rows must be one of F32, F16, BF16, alike"),
        }
        Ok(())
    }

    pub fn add_u32(s: &mut CudaStorage, l: &Layout, n: u32) -> Result<()> {
        if !l.is_contiguous() {
            bail!("add-u32 needs a contiguous tensor")
        }
        let len = l.shape().elem_count() as u32;
        let dev = s.device.clone();
        let f = crate::kernel_func!(dev, "add_u32")?;
        let mut x = s.as_cuda_slice_mut::<u32>()?.slice_mut(l.start_offset()..);
        let mut b = f.builder();
        b.arg(&mut x);
        b.arg(&n);
        b.arg(&len);
        // SAFETY: writes `len` u32 from the tensor's start, its own elements.
        unsafe { b.launch(LaunchConfig::for_num_elems(len)) }.w()?;
        Ok(())
    }
}
