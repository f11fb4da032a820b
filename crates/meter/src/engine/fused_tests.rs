//! The fused ops' CPU implementations against the candle ops they replace.

use super::fused::*;
use super::ops::KvWrite;
use candle_core::{DType, Device, IndexOp, Tensor, D};

#[test]
fn fused_kernel_source_instantiates_every_dtype() {
    let src = kernel_source();
    for name in [
        "rope_step",
        "rope_kv_f16_f32",
        "decode_attn_bf16_bf16",
        "swiglu_f32",
        "add_rms_norm_f16",
    ] {
        assert!(src.contains(&format!("void {name}(")), "{name}");
    }
    // For checking the source with nvcc (no GPU needed): QE_DUMP_FUSED_KERNELS=path.cu.
    if let Some(p) = std::env::var_os("QE_DUMP_FUSED_KERNELS") {
        std::fs::write(p, src).unwrap();
    }
}
