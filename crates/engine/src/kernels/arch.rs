//! Which code a device runs: NVRTC's target for its compute capability, and whether it has the
//! tensor-core instructions the split attention's mma kernels use. Beside [`super::launch`], not
//! in the loader, so that the ops that choose a kernel do not import the module that compiles them.

/// NVRTC's target for a device of compute capability (major, minor): its own virtual
/// architecture.
pub fn target((major, minor): (i32, i32)) -> String {
    format!("compute_{major}{minor}")
}

/// Whether a device of compute capability (major, minor) has the tensor-core instructions the
/// split attention's mma kernels use (mma.sync m16n8k16 with F16 and BF16: sm_80).
pub fn tensor_cores((major, _): (i32, i32)) -> bool {
    major >= 8
}

/// A CUDA device's compute capability, (major, minor).
#[cfg(feature = "cuda")]
pub fn compute_capability(
    dev: &candle_core::cuda_backend::CudaDevice,
) -> candle_core::Result<(i32, i32)> {
    match dev.cuda_stream().context().compute_capability() {
        Ok(cc) => Ok(cc),
        Err(e) => candle_core::bail!("the device's compute capability: {e:?}"),
    }
}

/// Whether `dev` runs the tensor-core kernels: a GPU of sm_80 or newer.
pub fn has_tensor_cores(dev: &candle_core::Device) -> candle_core::Result<bool> {
    #[cfg(feature = "cuda")]
    if let candle_core::Device::Cuda(d) = dev {
        return Ok(tensor_cores(compute_capability(d)?));
    }
    let _ = dev;
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NVRTC compiles for the device's own virtual architecture; tensor cores from sm_80 (an
    /// H200 is 9.0, an A100 8.0, a T4 7.5).
    #[test]
    fn the_target_is_the_devices_own_architecture() {
        assert_eq!(target((9, 0)), "compute_90");
        assert_eq!(target((8, 6)), "compute_86");
        assert_eq!(target((12, 0)), "compute_120");
        assert!(tensor_cores((9, 0)) && tensor_cores((8, 0)) && tensor_cores((12, 1)));
        assert!(!tensor_cores((7, 5)) && !tensor_cores((7, 0)));
        assert!(!has_tensor_cores(&candle_core::Device::Cpu).unwrap());
    }
}
