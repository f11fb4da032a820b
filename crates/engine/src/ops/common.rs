//! What the ops share: float storages read and written as f32 with the dtype's rounding, layout
//! checks, the CPU output with its Q8_1 blocks, and on the GPU the device addresses, allocations
//! and launch shapes.

use candle_core::backend::BackendStorage;
use candle_core::{bail, CpuStorage, DType, Layout, Result, Shape};

/// The start offset of a contiguous layout with `n` elements, or an error naming `what`.
pub(super) fn contiguous(l: &Layout, n: usize, what: &str) -> Result<usize> {
    if !l.is_contiguous() {
        bail!("{what} must be contiguous")
    }
    if l.shape().elem_count() != n {
        bail!("{what}: {:?} does not hold {n} elements", l.shape())
    }
    Ok(l.start_offset())
}

/// Element `i` of a float storage, as f32.
pub(super) fn get(s: &CpuStorage, i: usize) -> f32 {
    match s {
        CpuStorage::F32(v) => v[i],
        CpuStorage::F16(v) => v[i].to_f32(),
        CpuStorage::BF16(v) => v[i].to_f32(),
        _ => f32::NAN, // float_dtype() refuses the others first.
    }
}

/// Store `x` (rounded to the storage's dtype) at `i`.
pub(super) fn put(s: &mut CpuStorage, i: usize, x: f32) {
    match s {
        CpuStorage::F32(v) => v[i] = x,
        CpuStorage::F16(v) => v[i] = half::f16::from_f32(x),
        CpuStorage::BF16(v) => v[i] = half::bf16::from_f32(x),
        _ => {}
    }
}

/// `x` rounded to `dt` (mirrors an intermediate the eager model stores in that dtype).
pub(super) fn round_to(dt: DType, x: f32) -> f32 {
    match dt {
        DType::F16 => half::f16::from_f32(x).to_f32(),
        DType::BF16 => half::bf16::from_f32(x).to_f32(),
        _ => x,
    }
}

pub(super) fn float_dtype(s: &CpuStorage, what: &str) -> Result<DType> {
    match s.dtype() {
        dt @ (DType::F32 | DType::F16 | DType::BF16) => Ok(dt),
        dt => bail!("{what} must be F32, F16 or BF16, not {dt:?}"),
    }
}

/// A zeroed storage of `n` elements of `dt`.
pub(super) fn zeros(dt: DType, n: usize) -> CpuStorage {
    match dt {
        DType::F16 => CpuStorage::F16(vec![half::f16::ZERO; n]),
        DType::BF16 => CpuStorage::BF16(vec![half::bf16::ZERO; n]),
        _ => CpuStorage::F32(vec![0.0; n]),
    }
}

/// Whether `n` values in units of `unit` (a row, a head: what one warp group of a kernel writes)
/// make whole Q8_1 blocks that never straddle two units: the kernels write a block from one warp.
pub(super) fn q8_units(n: usize, unit: usize) -> Result<()> {
    if unit == 0 || !unit.is_multiple_of(super::q8::QK) || !n.is_multiple_of(unit) {
        bail!("Q8_1 blocks: units of {unit} values (of {n}) are not whole blocks of 32")
    }
    Ok(())
}

/// An op's CPU output, with the Q8_1 blocks of `out[from..from + n]` appended when `q8` (then
/// flat: F32 values, then the blocks' words); as it is with `shape` otherwise. `unit`: see
/// [`q8_units`].
pub(super) fn with_q8(
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

/// A dtype's name in kernel names (`<family>_<a>[_<c>]`, [`crate::kernels::launch::DTYPES`]).
pub(crate) fn code(dt: DType) -> Result<&'static str> {
    Ok(match dt {
        DType::F32 => "f32",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        dt => candle_core::bail!("fused kernels take F32, F16 or BF16, not {dt:?}"),
    })
}

#[cfg(feature = "cuda")]
pub(crate) mod gpu {
    use candle_core::backend::BackendStorage;
    use candle_core::cuda_backend::cudarc::driver::{DevicePtr, LaunchConfig};
    use candle_core::cuda_backend::{CudaDevice, CudaStorageSlice};
    use candle_core::{bail, CudaStorage, DType, Result, Shape};

    /// The device address of element `off` of a storage. The kernels take untyped pointers (one
    /// launcher per op, whatever the dtypes); the engine runs on one stream with event tracking
    /// off, so the dropped sync guard records nothing.
    pub(crate) fn ptr(s: &CudaStorage, off: usize) -> Result<u64> {
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
    pub(crate) fn alloc(dev: &CudaDevice, dt: DType, n: usize) -> Result<CudaStorage> {
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
    pub(crate) fn alloc_out(
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
        let len = keep + crate::ops::q8::words(n);
        let out = alloc(dev, dt, len)?;
        let q = ptr(&out, keep)?;
        Ok((out, q, Shape::from(len)))
    }

    pub(crate) fn cfg(grid: (u32, u32), block: u32) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (grid.0, grid.1, 1),
            block_dim: (block, 1, 1),
            shared_mem_bytes: 0,
        }
    }
}
