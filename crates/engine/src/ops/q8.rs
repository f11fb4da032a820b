//! Quantized projections fed with Q8_1 activations that the previous fused op already wrote
//! (the 1.5 B GGUF step spent ≈ 0.2 ms of its 1.6 ms in candle's separate
//! activation → Q8_1 kernel, launched before each of the four quantized matmuls of a layer).
//!
//! candle's GGUF matvec (`fast_mmvq`) quantizes its F32 input into ggml's `block_q8_1` (32 int8
//! values, their scale `d = max|x| / 127` and their sum, both as halves) and then runs the MMVQ
//! kernel on those blocks. [`AddRmsNorm`](super::AddRmsNorm),
//! [`DecodeAttn`](super::DecodeAttn) and [`SwiGlu`](super::SwiGlu) can append the
//! same blocks of their output (`q8: true`: the same reductions and division, so the same bytes),
//! and [`QMatVec`] runs candle's MMVQ kernel on them directly: one launch per projection instead
//! of two, and no scratch buffer. The blocks travel in an F32 tensor's words, 9 per block.
//!
//! On the CPU [`QMatVec`] is the reference: the dequantized weight times the dequantized blocks.

use candle_core::backend::BackendStorage;
use candle_core::quantized::{GgmlDType, QTensor};
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{bail, CpuStorage, CustomOp1, Device, Layout, Result, Shape};
use std::sync::Arc;

/// Values per Q8_1 block.
pub const QK: usize = 32;
/// F32 words per Q8_1 block (36 bytes: half2 {d, sum}, 32 int8).
const WORDS: usize = 9;

/// F32 words holding the Q8_1 blocks of `n` values (`n` a multiple of [`QK`]).
pub fn words(n: usize) -> usize {
    n / QK * WORDS
}

/// The Q8_1 blocks of `x` (whole blocks), as F32 words: what the fused kernels write. The sum
/// is taken in a warp's butterfly order, as on the GPU.
pub fn encode(x: &[f32]) -> Vec<f32> {
    let mut out = Vec::with_capacity(words(x.len()));
    for blk in x.chunks_exact(QK) {
        let amax = blk.iter().fold(0f32, |m, v| m.max(v.abs()));
        let mut s: Vec<f32> = blk.to_vec();
        for o in [16, 8, 4, 2, 1] {
            s = (0..QK).map(|i| s[i] + s[i ^ o]).collect();
        }
        let d = amax / 127.0;
        let mut bytes = [0u8; 36];
        bytes[..2].copy_from_slice(&half::f16::from_f32(d).to_le_bytes());
        bytes[2..4].copy_from_slice(&half::f16::from_f32(s[0]).to_le_bytes());
        for (b, v) in bytes[4..].iter_mut().zip(blk) {
            // roundf: halves away from zero, as f32::round.
            let q = if amax == 0.0 {
                0
            } else {
                (v / d).round() as i8
            };
            *b = q as u8;
        }
        out.extend(
            bytes
                .chunks_exact(4)
                .map(|w| f32::from_le_bytes([w[0], w[1], w[2], w[3]])),
        );
    }
    out
}

/// The values Q8_1 words stand for (`d · q` per element).
pub fn decode(words: &[f32]) -> Vec<f32> {
    let mut out = Vec::with_capacity(words.len() / WORDS * QK);
    for blk in words.chunks_exact(WORDS) {
        let bytes: Vec<u8> = blk.iter().flat_map(|w| w.to_le_bytes()).collect();
        let d = half::f16::from_le_bytes([bytes[0], bytes[1]]).to_f32();
        out.extend(bytes[4..].iter().map(|&q| d * (q as i8) as f32));
    }
    out
}

/// Whether candle's MMVQ kernels take weights of this type.
pub fn supported(dt: GgmlDType) -> bool {
    matches!(
        dt,
        GgmlDType::Q4_0
            | GgmlDType::Q4_1
            | GgmlDType::Q5_0
            | GgmlDType::Q5_1
            | GgmlDType::Q8_0
            | GgmlDType::Q2K
            | GgmlDType::Q3K
            | GgmlDType::Q4K
            | GgmlDType::Q5K
            | GgmlDType::Q6K
    )
}

/// `x · wᵀ` for `rows` (1–8) rows of activations given as their Q8_1 blocks (an F32 tensor of
/// `rows · words(K)` words) and a quantized weight `w` (N, K): output (rows, N) F32.
pub struct QMatVec {
    /// The weight, (N, K), on the blocks' device.
    pub w: Arc<QTensor>,
    /// Activation rows.
    pub rows: usize,
}

impl QMatVec {
    /// (N, K) after checking the blocks' layout.
    fn dims(&self, l: &Layout) -> Result<(usize, usize)> {
        let (n, k) = self.w.shape().dims2()?;
        if !k.is_multiple_of(QK) || !supported(self.w.dtype()) {
            bail!("q8 matvec: a {:?} weight of width {k}", self.w.dtype())
        }
        if !(1..=8).contains(&self.rows) {
            bail!("q8 matvec: {} rows (1 to 8)", self.rows)
        }
        if !l.is_contiguous() || l.shape().elem_count() != self.rows * words(k) {
            bail!(
                "q8 matvec: {:?} is not {} rows of {k} values' Q8_1 blocks",
                l.shape(),
                self.rows
            )
        }
        Ok((n, k))
    }
}

impl CustomOp1 for QMatVec {
    fn name(&self) -> &'static str {
        "q8-matvec"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let (n, k) = self.dims(l)?;
        let CpuStorage::F32(v) = s else {
            bail!(
                "q8 matvec: the blocks travel as F32 words, not {:?}",
                s.dtype()
            )
        };
        let o = l.start_offset();
        let x = decode(&v[o..o + self.rows * words(k)]);
        let w = self.w.dequantize(&Device::Cpu)?.to_vec2::<f32>()?;
        let mut out = vec![0f32; self.rows * n];
        for (r, xr) in x.chunks_exact(k).enumerate() {
            for (i, wi) in w.iter().enumerate() {
                out[r * n + i] = wi.iter().zip(xr).map(|(a, b)| a * b).sum();
            }
        }
        Ok((CpuStorage::F32(out), Shape::from((self.rows, n))))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> Result<(CudaStorage, Shape)> {
        use candle_core::cuda_backend::cudarc::driver::DevicePtr;
        use candle_core::cuda_backend::CudaStorageSlice;
        use candle_kernels::ffi;
        use std::ffi::c_void;
        let (n, k) = self.dims(l)?;
        let dev = s.device.clone();
        let stream = dev.cuda_stream();
        let CudaStorageSlice::F32(v) = &s.slice else {
            bail!(
                "q8 matvec: the blocks travel as F32 words, not {:?}",
                s.dtype()
            )
        };
        let y = v.device_ptr(&stream).0 + (l.start_offset() * 4) as u64;
        // SAFETY: the kernel writes every one of the rows · N outputs.
        let out = unsafe { dev.alloc::<f32>(self.rows * n)? };
        let dst = out.device_ptr(&stream).0;
        let launch = match self.w.dtype() {
            GgmlDType::Q4_0 => ffi::launch_mmvq_gguf_q4_0_f32_plain,
            GgmlDType::Q4_1 => ffi::launch_mmvq_gguf_q4_1_f32_plain,
            GgmlDType::Q5_0 => ffi::launch_mmvq_gguf_q5_0_f32_plain,
            GgmlDType::Q5_1 => ffi::launch_mmvq_gguf_q5_1_f32_plain,
            GgmlDType::Q8_0 => ffi::launch_mmvq_gguf_q8_0_f32_plain,
            GgmlDType::Q2K => ffi::launch_mmvq_gguf_q2_k_f32_plain,
            GgmlDType::Q3K => ffi::launch_mmvq_gguf_q3_k_f32_plain,
            GgmlDType::Q4K => ffi::launch_mmvq_gguf_q4_k_f32_plain,
            GgmlDType::Q5K => ffi::launch_mmvq_gguf_q5_k_f32_plain,
            GgmlDType::Q6K => ffi::launch_mmvq_gguf_q6_k_f32_plain,
            dt => bail!("q8 matvec: no MMVQ kernel for {dt:?}"),
        };
        let w = self.w.device_ptr()? as *const c_void;
        // SAFETY: as candle's fast_mmvq launches it, on candle's stream: w holds N rows of K
        // values, y `rows` rows of K / 32 blocks (stride K / 32), dst rows × N.
        unsafe {
            launch(
                w,
                y as *const c_void,
                dst as *mut c_void,
                k as i32,
                n as i32,
                (k / QK) as i32,
                n as i32,
                self.rows as i32,
                stream.cu_stream() as *mut c_void,
            )
        };
        Ok((
            CudaStorage::wrap_cuda_slice(out, dev.clone()),
            Shape::from((self.rows, n)),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::QMatMul;
    use candle_core::{Module, Tensor};

    fn f16_bits(words: &[f32], half_index: usize) -> f32 {
        let b = words[half_index / 2].to_le_bytes();
        let o = (half_index % 2) * 2;
        half::f16::from_le_bytes([b[o], b[o + 1]]).to_f32()
    }

    fn qs(words: &[f32]) -> Vec<i8> {
        words[1..9]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .map(|b| b as i8)
            .collect()
    }

    #[test]
    fn a_block_is_its_scale_sum_and_rounded_quotients() {
        let mut x = [0f32; 32];
        (x[0], x[1], x[2], x[31]) = (1.27, -0.635, 0.3175, 0.004);
        let w = encode(&x);
        assert_eq!(w.len(), 9);
        // d = max|x| / 127 = 0.01 and the sum 0.9565, both as halves.
        assert_eq!(f16_bits(&w, 0), half::f16::from_f32(0.01).to_f32());
        assert_eq!(f16_bits(&w, 1), half::f16::from_f32(0.9565).to_f32());
        // -63.5 rounds away from zero (roundf), 0.4 to 0.
        let q = qs(&w);
        assert_eq!((q[0], q[1], q[2], q[3], q[31]), (127, -64, 32, 0, 0));
        // An all-zero block: scale 0, no division by it.
        let z = encode(&[0.0; 32]);
        assert!(z.iter().all(|v| v.to_bits() == 0));
        assert_eq!(decode(&z), vec![0.0; 32]);
    }

    #[test]
    fn decoding_gives_each_value_within_half_a_step() {
        let x: Vec<f32> = (0..256)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        let y = decode(&encode(&x));
        for (blk, dblk) in x.chunks(32).zip(y.chunks(32)) {
            let amax = blk.iter().fold(0f32, |m, v| m.max(v.abs()));
            for (a, b) in blk.iter().zip(dblk) {
                // half a step of amax / 127, plus the half-precision scale's error on 127 steps.
                assert!((a - b).abs() <= amax / 254.0 + amax * 1e-3, "{a} vs {b}");
            }
        }
    }

    /// The CPU reference of the matvec against candle's quantized matmul (which quantizes the
    /// activations its own way): close, for a legacy and a K-quant type; activations taken from
    /// the wrong row are far off; shapes it cannot take are refused.
    #[test]
    fn matvec_on_blocks_matches_candles_quantized_matmul() {
        let dev = Device::Cpu;
        for (dt, k) in [
            (GgmlDType::Q4_0, 64),
            (GgmlDType::Q8_0, 64),
            (GgmlDType::Q8_0, 256),
            (GgmlDType::Q4_0, 512),
            (GgmlDType::Q4K, 256),
        ] {
            for rows in [1usize, 3] {
                let n = 24;
                let wf: Vec<f32> = (0..n * k)
                    .map(|i| ((i * 7919 % 263) as f32 / 131.0) - 1.0)
                    .collect();
                let wf = Tensor::from_vec(wf, (n, k), &dev).unwrap();
                let w = Arc::new(QTensor::quantize(&wf, dt).unwrap());
                let xv: Vec<f32> = (0..rows * k)
                    .map(|i| ((i * 104729 % 97) as f32 / 48.0) - 1.0)
                    .collect();
                let x = Tensor::from_vec(xv.clone(), (rows, k), &dev).unwrap();
                let want = QMatMul::from_arc(w.clone()).unwrap().forward(&x).unwrap();
                let op = QMatVec { w: w.clone(), rows };
                let blocks = Tensor::new(encode(&xv), &dev).unwrap();
                let got = blocks.apply_op1_no_bwd(&op).unwrap();
                assert_eq!(got.dims(), [rows, n]);
                let d = crate::testing::rel_diff(&want, &got);
                // Q4_0, Q8_0: candle's CPU kernels quantize the activations to the same 32-value
                // blocks (seen ≤ 1.1e-6); Q4_K's quantize them per 256 values (seen 3.6e-3).
                let tol = if dt == GgmlDType::Q4K { 1e-2 } else { 1e-5 };
                assert!(d < tol, "{dt:?} rows {rows}: {d:e}");
                // Row 0's blocks moved to the end: every row reads its neighbour's activations.
                let mut shifted = xv[k..].to_vec();
                shifted.extend_from_slice(&xv[..k]);
                let wrong = Tensor::new(encode(&shifted), &dev)
                    .unwrap()
                    .apply_op1_no_bwd(&op)
                    .unwrap();
                let d = crate::testing::rel_diff(&want, &wrong);
                assert!(rows == 1 || d > 0.2, "{dt:?}: a shifted row gives {d:e}");
            }
        }
        let w = Arc::new(
            QTensor::quantize(
                &Tensor::zeros((8, 32), candle_core::DType::F32, &dev).unwrap(),
                GgmlDType::Q8_0,
            )
            .unwrap(),
        );
        let blocks = Tensor::zeros(9 * 9, candle_core::DType::F32, &dev).unwrap();
        assert!(blocks
            .apply_op1_no_bwd(&QMatVec {
                w: w.clone(),
                rows: 9
            })
            .is_err());
        assert!(blocks.apply_op1_no_bwd(&QMatVec { w, rows: 2 }).is_err());
    }
}
