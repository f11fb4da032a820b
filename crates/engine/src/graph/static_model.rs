//! A static-KV-cache forward for the Qwen2 and Llama families, written with candle ops over the
//! same weights the eager engine loads (float `VarBuilder` tensors or GGUF `QMatMul`s).
//!
//! Unlike candle_transformers' models, nothing in a decode step depends on a host value that
//! changes from step to step: the KV cache is preallocated to the context length, the position
//! lives in a device tensor (`u32`, shape `(1,)`), the rotary rows are gathered on the device by
//! that position, the new K/V rows are written in place at it ([`crate::ops::kv::KvWrite`]), and
//! attention runs over the whole cache with a mask computed on the device (`arange(ctx) ≤ pos`).
//! Every shape of a step is fixed by (batch, context), so the step can be captured into a CUDA
//! graph and replayed.
//!
//! Each family/format mirrors the candle model it replaces op for op (dtype of the rotary tables,
//! where attention is computed in F32, how the scale is applied, rope vs interleaved rope_i), so
//! the logits match the eager engine's to rounding (tests in `super::tests`).

use crate::eager::ArmWeights;
use crate::ops::kv::KvWrite;
use crate::ops::q8::{self, QMatVec};
use crate::ops::{
    AddRmsNorm, AttnDims, AttnSplit, CausalSoftmax, DecodeAttn, Gemv, RopeKv, RopeStep, SwiGlu,
    GEMV,
};
use analysis::ModelShape;
use candle_core::quantized::{ggml_file, gguf_file, QMatMul, QTensor};
use candle_core::{DType, Device, IndexOp, Module, Tensor, D};
use candle_nn::{Embedding, Linear, VarBuilder};

/// The static forward's results fail with a [`DecodeError`] (candle's errors convert with `?`).
type Result<T, E = crate::Error> = std::result::Result<T, E>;

/// Which candle model this forward mirrors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// candle_transformers::models::qwen2 (float weights).
    FloatQwen2,
    /// candle_transformers::models::llama (float weights).
    FloatLlama,
    /// candle_transformers::models::quantized_qwen2 (GGUF).
    QuantQwen2,
    /// candle_transformers::models::quantized_llama (GGUF).
    QuantLlama,
}

enum Lin {
    Float(Linear),
    Quant {
        w: QMatMul,
        b: Option<Tensor>,
    },
    /// Projections that could not be fused (GGUF tensors of different types), concatenated
    /// along the output after their matmuls.
    Parts(Vec<Lin>),
}

impl Lin {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        // On the GPU only: the CPU op is the tests' reference, a loop, not a fast path.
        self.forward_with(x, GEMV.on() && x.device().is_cuda())
    }

    /// The width of the projection's input (K).
    fn in_width(&self) -> Result<usize> {
        Ok(match self {
            Lin::Float(l) => l.weight().dim(1)?,
            Lin::Quant { w, .. } => match w {
                QMatMul::QTensor(t) => t.shape().dims2()?.1,
                QMatMul::Tensor(t) | QMatMul::TensorF16(t) => t.dim(1)?,
            },
            Lin::Parts(p) => p.first().map_or(Ok(0), |l| l.in_width())?,
        })
    }

    /// The projection of `x` from `blocks`, the Q8_1 blocks of `x` a fused op wrote (see
    /// [`q8`]), where it is one quantized weight that candle's MMVQ kernels take and has no bias;
    /// else the projection of `x`.
    fn forward_q8(&self, x: &Tensor, blocks: Option<&Tensor>) -> Result<Tensor> {
        match (self, blocks) {
            (
                Lin::Quant {
                    w: QMatMul::QTensor(w),
                    b: None,
                },
                Some(blocks),
            ) if q8::supported(w.dtype()) => {
                let k = x.dim(D::Minus1)?;
                let rows = x.elem_count() / k;
                let y = blocks.apply_op1_no_bwd(&QMatVec { w: w.clone(), rows })?;
                let mut dims = x.dims().to_vec();
                *dims.last_mut().unwrap_or(&mut 0) = y.dim(1)?;
                Ok(y.reshape(dims)?)
            }
            // Parts of one input (q|k|v or gate|up of mixed GGUF types): each reads the blocks.
            (Lin::Parts(parts), Some(_)) => {
                let ys = parts
                    .iter()
                    .map(|p| p.forward_q8(x, blocks))
                    .collect::<Result<Vec<_>>>()?;
                Ok(Tensor::cat(&ys, D::Minus1)?)
            }
            _ => self.forward(x),
        }
    }

    /// The projection, with [`Gemv`] where `gemv` and [`gemv_applies`] allow it.
    fn forward_with(&self, x: &Tensor, gemv: bool) -> Result<Tensor> {
        Ok(match self {
            Lin::Float(l) if gemv && gemv_applies(l, x)? => {
                x.contiguous()?.apply_op2_no_bwd(l.weight(), &Gemv)?
            }
            Lin::Float(l) => l.forward(x)?,
            Lin::Quant { w, b } => {
                let y = match w {
                    QMatMul::QTensor(t) if dequantizes(x)? => {
                        QMatMul::TensorF16(t.dequantize_f16(x.device())?).forward(x)?
                    }
                    _ => w.forward(x)?,
                };
                match b {
                    Some(b) => y.broadcast_add(b)?,
                    None => y,
                }
            }
            Lin::Parts(parts) => {
                let ys = parts
                    .iter()
                    .map(|p| p.forward_with(x, gemv))
                    .collect::<Result<Vec<_>>>()?;
                Tensor::cat(&ys, D::Minus1)?
            }
        })
    }
}

/// Whether a quantized projection of `x` dequantizes its weight to F16 for one cuBLAS GEMM
/// (on tensor cores) instead of candle's MMQ kernels: on the GPU, from [`PREFILL_DEQUANT_ROWS`]
/// rows (a prefill chunk). MMQ's small tiles ran a 4 096-token Qwen2-1.5B Q4_0 prefill at 12.7 k
/// tok/s on the H200 where the F16 weights' GEMM ran 19.1 k; the dequantized copy lives for one
/// matmul. The activations are rounded to F16, not quantized to Q8_1 as MMQ does.
fn dequantizes(x: &Tensor) -> Result<bool> {
    let rows = x.elem_count() / x.dim(D::Minus1)?.max(1);
    let from = PREFILL_DEQUANT_ROWS.get() as usize;
    Ok(x.device().is_cuda() && from > 0 && rows >= from)
}

/// Fewest rows from which a quantized projection on the GPU runs as a dequantized F16 GEMM
/// (`QE_PREFILL_DEQUANT_ROWS`, 64; 0 never: candle's MMQ kernels at every size, for the A/B).
pub static PREFILL_DEQUANT_ROWS: crate::switch::Knob = crate::switch::Knob::new(
    "QE_PREFILL_DEQUANT_ROWS",
    64,
    &[0, 16, 32, 64, 128, 256, 512],
);

/// Whether [`Gemv`] can replace the projection's GEMM (when opted in: `QE_GEMV=1`): one F16/BF16
/// row, no bias, K a multiple of 8, and both starting 16-byte aligned (what the kernel refuses
/// falls back to the GEMM instead of failing the step).
fn gemv_applies(l: &Linear, x: &Tensor) -> Result<bool> {
    let w = l.weight();
    let (_, k) = w.dims2()?;
    // A non-contiguous x is copied to a fresh, aligned buffer first.
    let x_aligned = !x.is_contiguous() || x.layout().start_offset().is_multiple_of(8);
    Ok(l.bias().is_none()
        && x.elem_count() == k
        && x.dims().last() == Some(&k)
        && k.is_multiple_of(8)
        && w.is_contiguous()
        && w.layout().start_offset().is_multiple_of(8)
        && x_aligned
        && matches!(x.dtype(), DType::F16 | DType::BF16)
        && l.weight().dtype() == x.dtype())
}

/// Quantized projections as one: their rows concatenated byte-wise when they share one GGML
/// type (a row is whole blocks, independent of the others), else kept apart ([`Lin::Parts`]).
fn fuse_quant(parts: Vec<QTensor>, dev: &Device) -> Result<Lin> {
    let dt = parts[0].dtype();
    let cols = parts[0].shape().dims2()?.1;
    let mut same = true;
    for p in &parts {
        same &= p.dtype() == dt && p.shape().dims2()?.1 == cols;
    }
    let to_dev = |p: &QTensor| -> Result<QTensor> {
        Ok(ggml_file::qtensor_from_ggml(
            p.dtype(),
            &p.data()?,
            p.shape().dims().to_vec(),
            dev,
        )?)
    };
    if !same {
        let lins = parts
            .iter()
            .map(|p| {
                Ok(Lin::Quant {
                    w: QMatMul::from_qtensor(to_dev(p)?)?,
                    b: None,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        return Ok(Lin::Parts(lins));
    }
    let mut rows = 0;
    let mut bytes = Vec::new();
    for p in &parts {
        rows += p.shape().dims2()?.0;
        bytes.extend_from_slice(&p.data()?);
    }
    let w = ggml_file::qtensor_from_ggml(dt, &bytes, vec![rows, cols], dev)?;
    Ok(Lin::Quant {
        w: QMatMul::from_qtensor(w)?,
        b: None,
    })
}

struct Norm {
    w: Tensor,
    eps: f32,
}

impl Norm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(candle_nn::ops::rms_norm(x, &self.w, self.eps)?)
    }
}

/// One decoder layer, its projections fused at load: q|k|v (no bias: the bias is added by the
/// op that consumes the matmul's output) and gate|up.
struct Layer {
    qkv: Lin,
    /// The q|k|v bias ((nh + 2·nkv)·hd), Qwen2.
    qkv_bias: Option<Tensor>,
    o: Lin,
    gate_up: Lin,
    down: Lin,
    ln1: Norm,
    ln2: Norm,
}

/// The device-side state of one decode: the preallocated caches, the position, the token buffer
/// and the constants the mask is computed from. All are device tensors; the step reads and writes
/// them in place.
pub struct DecodeState {
    /// Sequences.
    pub batch: usize,
    /// Positions the cache holds (prompt + new tokens).
    pub ctx: usize,
    /// (batch, 1) u32: the tokens fed to the next step (overwritten in place by its argmax).
    pub tok: Tensor,
    /// (1,) u32: the position of the next token (incremented in place by each step).
    pub pos: Tensor,
    /// Per layer (K, V), each (batch, kv_heads, ctx, head_dim) in the cache dtype: views of
    /// the layer's buffer in `bufs`.
    pub kv: Vec<(Tensor, Tensor)>,
    /// Per layer `[K | V | q|k|v bias]`, flat, in the cache dtype (see [`AttnDims`]).
    pub bufs: Vec<Tensor>,
    /// The fused ops' shapes.
    pub dims: AttnDims,
    /// How the GPU's split decode attention divides each KV head's positions.
    pub attn_split: AttnSplit,
}

impl DecodeState {
    /// Every tensor the state holds (tests check they live on the model's device).
    pub fn tensors(&self) -> Vec<&Tensor> {
        let mut v = vec![&self.tok, &self.pos];
        for (k, vv) in &self.kv {
            v.push(k);
            v.push(vv);
        }
        v.extend(&self.bufs);
        v.push(&self.attn_split.counters);
        v
    }
}

/// A Qwen2 or Llama model whose forward reads and writes a preallocated KV cache at a device-side
/// position.
pub struct StaticModel {
    /// Which family's numerics it mirrors.
    pub kind: Kind,
    embed: Embedding,
    layers: Vec<Layer>,
    norm: Norm,
    lm_head: Lin,
    /// Rotary tables (rows, head_dim / 2), in the dtype the mirrored model uses.
    cos: Tensor,
    sin: Tensor,
    /// `[cos | sin]` (rows, head_dim) in F32 (exact: every table value is an F32, F16 or BF16),
    /// for [`RopeStep`].
    cos_sin: Tensor,
    /// Decode steps (s = 1) run the fused ops (else the op-by-op path prefill uses). Off when
    /// the shapes do not fit them, or with `QE_GRAPH_UNFUSED` set (A/B on the GPU).
    pub fused: bool,
    /// Take the [`q8`] path on the CPU too (tests: its CPU reference against the eager models).
    pub(crate) q8_on_cpu: bool,
    /// GGUF arms cache K/V in F16 (see [`Self::cache_dtype`]): on the GPU; on the CPU only when a
    /// test asks.
    pub(crate) f16_cache: bool,
    /// With the F16 cache, the prefill's scores in F16 ([`PREFILL_F16_ATTN`], read at load).
    pub(crate) f16_scores: bool,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    /// Vocabulary size, tokens.
    pub vocab: usize,
    /// Activations' dtype (the float weights' dtype, F32 for GGUF).
    dtype: DType,
    /// Where the weights live.
    pub device: Device,
}

/// Rotary tables exactly as candle_transformers' qwen2.rs builds them (in the model dtype).
fn rope_float_qwen2(s: &ModelShape, dt: DType, dev: &Device) -> Result<(Tensor, Tensor)> {
    let dim = s.hidden / s.heads;
    let max = s.max_position;
    let inv: Vec<f32> = (0..dim)
        .step_by(2)
        .map(|i| 1f32 / s.rope_theta.powf(i as f64 / dim as f64) as f32)
        .collect();
    let n = inv.len();
    let inv = Tensor::from_vec(inv, (1, n), dev)?.to_dtype(dt)?;
    let t = Tensor::arange(0u32, max as u32, dev)?
        .to_dtype(dt)?
        .reshape((max, 1))?;
    let freqs = t.matmul(&inv)?;
    Ok((freqs.cos()?, freqs.sin()?))
}

/// Rotary tables as llama.rs builds them (F32, cast to the model dtype).
fn rope_float_llama(s: &ModelShape, dt: DType, dev: &Device) -> Result<(Tensor, Tensor)> {
    let dim = s.hidden / s.heads;
    let max = s.max_position.min(crate::eager::SYNTHETIC_MAX_POSITIONS);
    let theta = s.rope_theta as f32;
    let th: Vec<f32> = (0..dim)
        .step_by(2)
        .map(|i| 1f32 / theta.powf(i as f32 / dim as f32))
        .collect();
    let n = th.len();
    let th = Tensor::new(th, dev)?;
    let idx = Tensor::arange(0, max as u32, dev)?
        .to_dtype(DType::F32)?
        .reshape((max, 1))?
        .matmul(&th.reshape((1, n))?)?;
    Ok((idx.cos()?.to_dtype(dt)?, idx.sin()?.to_dtype(dt)?))
}

/// Rotary tables as quantized_qwen2.rs / quantized_llama.rs build them (F32).
fn rope_quant(dim: usize, base: f32, rows: usize, dev: &Device) -> Result<(Tensor, Tensor)> {
    let th: Vec<f32> = (0..dim)
        .step_by(2)
        .map(|i| 1f32 / base.powf(i as f32 / dim as f32))
        .collect();
    let th = Tensor::new(th.as_slice(), dev)?;
    let idx = Tensor::arange(0, rows as u32, dev)?
        .to_dtype(DType::F32)?
        .reshape((rows, 1))?
        .matmul(&th.reshape((1, th.elem_count()))?)?;
    Ok((idx.cos()?, idx.sin()?))
}

/// What a GGUF's metadata gives the quantized forward: the attention's geometry, the norms'
/// epsilon and the rotary tables (as quantized_qwen2.rs / quantized_llama.rs build them).
struct GgufMeta {
    nh: usize,
    nkv: usize,
    h: usize,
    hd: usize,
    eps: f32,
    rope: (Tensor, Tensor),
}

fn gguf_meta(ct: &gguf_file::Content, arch: &str, kind: Kind, dev: &Device) -> Result<GgufMeta> {
    let md = |k: &str| ct.metadata.get(&format!("{arch}.{k}"));
    let u = |k: &str| -> Result<usize> {
        Ok(md(k)
            .ok_or_else(|| crate::Error::GgufMetadata(format!("{arch}.{k}")))?
            .to_u32()? as usize)
    };
    let nh = u("attention.head_count")?;
    let nkv = u("attention.head_count_kv")?;
    let h = u("embedding_length")?;
    let eps = md("attention.layer_norm_rms_epsilon")
        .ok_or_else(|| {
            crate::Error::GgufMetadata(format!("{arch}.attention.layer_norm_rms_epsilon"))
        })?
        .to_f32()?;
    let base = md("rope.freq_base")
        .and_then(|v| v.to_f32().ok())
        .unwrap_or(10000f32);
    let hd = h / nh;
    let rope = if kind == Kind::QuantQwen2 {
        rope_quant(hd, base, u("context_length")?, dev)?
    } else {
        // quantized_llama.rs: rope.dimension_count, MAX_SEQ_LEN rows.
        rope_quant(
            u("rope.dimension_count")?,
            base,
            candle_transformers::models::quantized_llama::MAX_SEQ_LEN,
            dev,
        )?
    };
    Ok(GgufMeta {
        nh,
        nkv,
        h,
        hd,
        eps,
        rope,
    })
}

/// Layer `l` (`blk.{l}.…`) of a GGUF: QKV and gate/up fused, Qwen2's QKV bias dequantized.
fn gguf_layer<R: std::io::Read + std::io::Seek>(
    ct: &gguf_file::Content,
    r: &mut R,
    l: usize,
    kind: Kind,
    eps: f32,
    dev: &Device,
) -> Result<Layer> {
    let p = format!("blk.{l}");
    // Projections to fuse are read to the host first (their bytes are concatenated).
    let mut host = |names: &[&str]| -> Result<Vec<QTensor>> {
        names
            .iter()
            .map(|n| Ok(ct.tensor(r, &format!("{p}.{n}.weight"), &Device::Cpu)?))
            .collect()
    };
    let qkv = fuse_quant(host(&["attn_q", "attn_k", "attn_v"])?, dev)?;
    let gate_up = fuse_quant(host(&["ffn_gate", "ffn_up"])?, dev)?;
    let mut t = |name: String| ct.tensor(r, &name, dev);
    let qkv_bias = if kind == Kind::QuantQwen2 {
        let b = ["attn_q", "attn_k", "attn_v"]
            .iter()
            .map(|n| Ok(t(format!("{p}.{n}.bias"))?.dequantize(dev)?))
            .collect::<Result<Vec<_>>>()?;
        Some(Tensor::cat(&b, 0)?)
    } else {
        None
    };
    let mut lin = |n: &str| -> Result<Lin> {
        Ok(Lin::Quant {
            w: QMatMul::from_qtensor(t(format!("{p}.{n}.weight"))?)?,
            b: None,
        })
    };
    let (o, down) = (lin("attn_output")?, lin("ffn_down")?);
    let mut norm = |n: &str| -> Result<Norm> {
        Ok(Norm {
            w: t(format!("{p}.{n}.weight"))?.dequantize(dev)?,
            eps,
        })
    };
    Ok(Layer {
        qkv,
        qkv_bias,
        o,
        gate_up,
        down,
        ln1: norm("attn_norm")?,
        ln2: norm("ffn_norm")?,
    })
}

impl StaticModel {
    /// The model from its parts; the fused decode path is on when the shapes fit its ops.
    #[allow(clippy::too_many_arguments)]
    fn new(
        kind: Kind,
        embed: Embedding,
        layers: Vec<Layer>,
        norm: Norm,
        lm_head: Lin,
        (cos, sin): (Tensor, Tensor),
        (heads, kv_heads, head_dim): (usize, usize, usize),
        vocab: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Self> {
        let cos_sin = Tensor::cat(&[&cos, &sin], 1)?.to_dtype(DType::F32)?;
        // The fused ops rotate the whole head (rope.dimension_count = head_dim), and attention
        // keeps a head in one block of 256 threads.
        let fused = !layers.is_empty()
            && cos_sin.dim(1)? == head_dim
            && head_dim.is_multiple_of(2)
            && head_dim <= 256
            && heads.is_multiple_of(kv_heads)
            && !UNFUSED.on();
        Ok(StaticModel {
            kind,
            embed,
            layers,
            norm,
            lm_head,
            cos,
            sin,
            cos_sin,
            fused,
            q8_on_cpu: false,
            f16_cache: device.is_cuda(),
            f16_scores: PREFILL_F16_ATTN.on(),
            heads,
            kv_heads,
            head_dim,
            vocab,
            dtype,
            device: device.clone(),
        })
    }

    pub(crate) fn load(
        shape: &ModelShape,
        weights: ArmWeights,
        dev: &Device,
    ) -> Result<(Self, Vec<String>)> {
        match weights {
            ArmWeights::Float { vb, notes } => Ok((Self::load_float(shape, vb, dev)?, notes)),
            ArmWeights::Gguf {
                content,
                mut reader,
                notes,
            } => Ok((Self::load_gguf(shape, content, &mut reader, dev)?, notes)),
        }
    }

    fn load_float(s: &ModelShape, vb: VarBuilder<'static>, dev: &Device) -> Result<Self> {
        let dt = vb.dtype();
        let (h, nh, nkv) = (s.hidden, s.heads, s.kv_heads);
        let hd = h / nh;
        let kind = match s.family.as_str() {
            "qwen2" => Kind::FloatQwen2,
            "llama" => Kind::FloatLlama,
            f => return Err(crate::Error::UnsupportedFamily(f.to_string())),
        };
        let bias = kind == Kind::FloatQwen2;
        let lin = |i: usize, o: usize, b: bool, vb: VarBuilder| -> Result<Lin> {
            Ok(Lin::Float(if b {
                candle_nn::linear(i, o, vb)?
            } else {
                candle_nn::linear_no_bias(i, o, vb)?
            }))
        };
        // Projections fused along the output dim (one matmul each); their biases likewise.
        let fused =
            |vb: &VarBuilder, parts: &[(&str, usize)], b: bool| -> Result<(Lin, Option<Tensor>)> {
                let mut ws = Vec::new();
                let mut bs = Vec::new();
                for (name, o) in parts {
                    ws.push(vb.pp(name).get((*o, h), "weight")?);
                    if b {
                        bs.push(vb.pp(name).get(*o, "bias")?);
                    }
                }
                let bias = if b { Some(Tensor::cat(&bs, 0)?) } else { None };
                Ok((Lin::Float(Linear::new(Tensor::cat(&ws, 0)?, None)), bias))
            };
        let vm = vb.pp("model");
        let embed = candle_nn::embedding(s.vocab, h, vm.pp("embed_tokens"))?;
        let norm_of = |vb: VarBuilder| -> Result<Norm> {
            Ok(Norm {
                w: vb.get(h, "weight")?,
                eps: s.rms_eps as f32,
            })
        };
        let mut layers = Vec::with_capacity(s.layers);
        for l in 0..s.layers {
            let v = vm.pp(format!("layers.{l}"));
            let a = v.pp("self_attn");
            let m = v.pp("mlp");
            let qkv = [
                ("q_proj", nh * hd),
                ("k_proj", nkv * hd),
                ("v_proj", nkv * hd),
            ];
            let (qkv, qkv_bias) = fused(&a, &qkv, bias)?;
            let gu = [("gate_proj", s.intermediate), ("up_proj", s.intermediate)];
            layers.push(Layer {
                qkv,
                qkv_bias,
                o: lin(nh * hd, h, false, a.pp("o_proj"))?,
                gate_up: fused(&m, &gu, false)?.0,
                down: lin(s.intermediate, h, false, m.pp("down_proj"))?,
                ln1: norm_of(v.pp("input_layernorm"))?,
                ln2: norm_of(v.pp("post_attention_layernorm"))?,
            });
        }
        let norm = norm_of(vm.pp("norm"))?;
        // qwen2.rs ties when the checkpoint has no lm_head; llama.rs follows the config.
        let tied = match kind {
            Kind::FloatQwen2 => !vb.contains_tensor("lm_head.weight"),
            _ => s.tied_embeddings,
        };
        let lm_head = if tied {
            Lin::Float(Linear::new(embed.embeddings().clone(), None))
        } else {
            lin(h, s.vocab, false, vb.pp("lm_head"))?
        };
        let (cos, sin) = match kind {
            Kind::FloatQwen2 => rope_float_qwen2(s, dt, dev)?,
            _ => rope_float_llama(s, dt, dev)?,
        };
        StaticModel::new(
            kind,
            embed,
            layers,
            norm,
            lm_head,
            (cos, sin),
            (nh, nkv, hd),
            s.vocab,
            dt,
            dev,
        )
    }

    fn load_gguf<R: std::io::Read + std::io::Seek>(
        s: &ModelShape,
        ct: gguf_file::Content,
        r: &mut R,
        dev: &Device,
    ) -> Result<Self> {
        let arch = match s.family.as_str() {
            "qwen2" => "qwen2",
            "llama" => "llama",
            f => return Err(crate::Error::UnsupportedFamily(f.to_string())),
        };
        let kind = if arch == "qwen2" {
            Kind::QuantQwen2
        } else {
            Kind::QuantLlama
        };
        let GgufMeta {
            nh,
            nkv,
            h,
            hd,
            eps,
            rope,
        } = gguf_meta(&ct, arch, kind, dev)?;
        let mut t = |name: &str| ct.tensor(r, name, dev);
        let q = |t: QTensor| -> Result<QMatMul> { Ok(QMatMul::from_qtensor(t)?) };
        let embed_q = t("token_embd.weight")?;
        let embed = Embedding::new(embed_q.dequantize(dev)?, h);
        let norm = Norm {
            w: t("output_norm.weight")?.dequantize(dev)?,
            eps,
        };
        let lm_head = if ct.tensor_infos.contains_key("output.weight") {
            q(t("output.weight")?)?
        } else {
            q(embed_q)?
        };
        let layers = (0..s.layers)
            .map(|l| gguf_layer(&ct, r, l, kind, eps, dev))
            .collect::<Result<Vec<_>>>()?;
        let lm_head = Lin::Quant {
            w: lm_head,
            b: None,
        };
        StaticModel::new(
            kind,
            embed,
            layers,
            norm,
            lm_head,
            rope,
            (nh, nkv, hd),
            s.vocab,
            DType::F32,
            dev,
        )
    }

    /// Rows of the rotary tables: the longest context this model can decode.
    pub fn max_context(&self) -> usize {
        self.cos.dim(0).unwrap_or(0)
    }

    /// The dtype attention (scores, softmax, mask) runs in: llama.rs casts to F32.
    fn att_dtype(&self) -> DType {
        match self.kind {
            Kind::FloatLlama => DType::F32,
            _ => self.dtype,
        }
    }

    /// The KV cache's dtype: what attention reads. Float arms: the attention dtype (llama.rs
    /// caches in the model dtype and casts the whole cache to F32 in every step; caching the F32
    /// cast instead holds the same values). GGUF arms on the GPU: F16, as llama.cpp's attention
    /// reads it, where candle's quantized models keep F32: every decode step reads the whole
    /// cache, and at 4 k positions Qwen2-1.5B's F32 cache was a fifth of a Q4_0 step's bytes. On
    /// the CPU, where the graph engine is held to the eager models' logits and llama.cpp's
    /// perplexity, GGUF arms keep the eager models' F32 cache: on SmolLM2 Q8_0 the F16 cache's
    /// roundings moved the mean NLL from 0.32 % to 0.75 % of llama.cpp's (each flips 8-bit
    /// activation roundings downstream), past the check's 0.5 %.
    pub fn cache_dtype(&self) -> DType {
        match self.kind {
            Kind::QuantQwen2 | Kind::QuantLlama if self.f16_cache => DType::F16,
            _ => self.att_dtype(),
        }
    }

    /// The GPU's attention numerics on any device, so a check on the CPU can hold them against
    /// the CPU's: GGUF arms' F16 cache, and the prefill's scores in F16 or not (what
    /// [`PREFILL_F16_ATTN`] picks). Before the first decode state, which takes the cache's dtype.
    pub fn set_cache_numerics(&mut self, f16_cache: bool, f16_scores: bool) {
        self.f16_cache = f16_cache;
        self.f16_scores = f16_scores;
    }

    /// Whether the prefill's attention scores are F16 (tensor cores) where the arm's own
    /// attention dtype is F32: a GGUF arm with the F16 cache and [`PREFILL_F16_ATTN`] on.
    pub fn prefill_scores_in_f16(&self) -> bool {
        self.cache_dtype() == DType::F16 && self.dtype == DType::F32 && self.f16_scores
    }

    /// Preallocate a decode state for `batch` sequences of up to `ctx` positions.
    pub fn new_state(&self, batch: usize, ctx: usize) -> Result<DecodeState> {
        if ctx > self.max_context() {
            return Err(crate::Error::ContextTooLong {
                ctx,
                max: self.max_context(),
            });
        }
        let dev = &self.device;
        let cd = self.cache_dtype();
        let dims = AttnDims {
            batch,
            heads: self.heads,
            kv_heads: self.kv_heads,
            head_dim: self.head_dim,
            ctx,
            bias: self.layers.first().is_some_and(|l| l.qkv_bias.is_some()),
            interleaved: self.kind == Kind::QuantLlama,
        };
        let n = dims.cache_len();
        let shape = (batch, self.kv_heads, ctx, self.head_dim);
        let mut bufs = Vec::with_capacity(self.layers.len());
        let mut kv = Vec::with_capacity(self.layers.len());
        for layer in &self.layers {
            let z = Tensor::zeros(2 * n, cd, dev)?;
            let buf = match &layer.qkv_bias {
                Some(b) => Tensor::cat(&[&z, &b.to_dtype(cd)?], 0)?,
                None => z,
            };
            kv.push((
                buf.narrow(0, 0, n)?.reshape(shape)?,
                buf.narrow(0, n, n)?.reshape(shape)?,
            ));
            bufs.push(buf);
        }
        Ok(DecodeState {
            batch,
            ctx,
            tok: Tensor::zeros((batch, 1), DType::U32, dev)?,
            pos: Tensor::zeros(1, DType::U32, dev)?,
            kv,
            bufs,
            dims,
            attn_split: AttnSplit {
                splits: AttnSplit::splits_for(self.kv_heads, batch, ctx),
                counters: Tensor::zeros(batch * self.heads, DType::U32, dev)?,
                tensor_cores: AttnSplit::tensor_cores_for(dev)?,
            },
        })
    }

    /// Logits (batch, vocab) of the last of `ids` (batch, s), fed at positions pos..pos+s where
    /// pos is `st.pos` (on the device); writes their K/V into the cache in place. Does not move
    /// `st.pos` (the caller does, in place). With s = 1 every shape is fixed by the state.
    pub fn forward(&self, ids: &Tensor, st: &DecodeState) -> Result<Tensor> {
        self.forward_at(ids, st, None)
    }

    /// [`Self::forward`] of a prefill chunk whose first position, `start`, the host knows: its
    /// attention reads only the cache's first `start + s` positions (the rest are masked anyway),
    /// so a long prompt's chunks cost what they attend to, not the whole cache each.
    pub fn forward_chunk(&self, ids: &Tensor, st: &DecodeState, start: usize) -> Result<Tensor> {
        let visible = start + ids.dim(1)?;
        if visible > st.ctx {
            return Err(crate::Error::PastCache {
                end: visible,
                ctx: st.ctx,
            });
        }
        self.forward_at(ids, st, Some(visible))
    }

    fn forward_at(&self, ids: &Tensor, st: &DecodeState, visible: Option<usize>) -> Result<Tensor> {
        let (b, s) = ids.dims2()?;
        if b != st.batch {
            return Err(crate::Error::BatchMismatch {
                fed: b,
                state: st.batch,
            });
        }
        if s == 1 && self.fused {
            return self.forward_fused(ids, st, self.q8_applies(b));
        }
        // Positions of this chunk, on the device.
        let p = if s == 1 {
            st.pos.clone()
        } else {
            st.pos
                .broadcast_add(&Tensor::arange(0u32, s as u32, &self.device)?)?
        };
        let cos = self.cos.index_select(&p, 0)?;
        let sin = self.sin.index_select(&p, 0)?;
        // Keys: the cache, or its first `visible` positions (query i sees key j iff j ≤ pos + i).
        let keys = visible.unwrap_or(st.ctx);
        let mut x = self.embed.forward(ids)?;
        for (layer, (kc, vc)) in self.layers.iter().zip(&st.kv) {
            let residual = &x;
            let h = layer.ln1.forward(&x)?;
            let a = self.attention(layer, &h, (&cos, &sin), (kc, vc), (&st.pos, &p), keys)?;
            let x1 = (a + residual)?;
            let h = layer.ln2.forward(&x1)?;
            let gu = layer.gate_up.forward(&h)?;
            let i = gu.dim(D::Minus1)? / 2;
            let g = gu.narrow(D::Minus1, 0, i)?.silu()?;
            let u = gu.narrow(D::Minus1, i, i)?;
            let m = layer.down.forward(&(g * u)?)?;
            x = (m + &x1)?;
        }
        let x = self.norm.forward(&x)?;
        self.head(&x, s)
    }

    /// Whether a decode step of `batch` sequences feeds its quantized projections the Q8_1 blocks
    /// the fused ops write ([`q8`]): on the GPU, for GGUF arms (F32 activations) of up to 8
    /// sequences whose widths are whole blocks; not with `QE_Q8=0` (A/B on the GPU).
    pub fn q8_applies(&self, batch: usize) -> bool {
        (self.device.is_cuda() || self.q8_on_cpu) && Q8.on() && self.q8_fits(batch)
    }

    /// Whether this model's decode steps take the [`q8`] path at batch 1 (what a report's kernel
    /// label says): on the GPU, switched on, the fused step, and shapes that fit.
    pub fn q8_in_use(&self) -> bool {
        self.fused && self.q8_applies(1)
    }

    /// [`Self::q8_applies`] but the device and the switch.
    fn q8_fits(&self, batch: usize) -> bool {
        let whole = |w: usize| w > 0 && w.is_multiple_of(q8::QK);
        // The blocks of a norm row, an MLP row and (from its own warps) an attention head.
        let mlp = self.layers.first().and_then(|l| l.down.in_width().ok());
        matches!(self.kind, Kind::QuantQwen2 | Kind::QuantLlama)
            && self.dtype == DType::F32
            && (1..=8).contains(&batch)
            && whole(self.norm.w.elem_count())
            && whole(self.head_dim)
            && mlp.is_some_and(whole)
    }

    /// The decode step (s = 1) through the fused ops: per layer q|k|v matmul, [`RopeKv`],
    /// [`DecodeAttn`], o matmul, [`AddRmsNorm`], gate|up matmul, [`SwiGlu`], down matmul, and
    /// the next [`AddRmsNorm`] (the next layer's input norm, or the final one). With `use_q8`
    /// the norms, attention and SwiGLU also write their output's Q8_1 blocks, which the
    /// quantized projections read instead of quantizing their input again.
    fn forward_fused(&self, ids: &Tensor, st: &DecodeState, use_q8: bool) -> Result<Tensor> {
        let step = self.cos_sin.apply_op2_no_bwd(&st.pos, &RopeStep)?;
        let attn = DecodeAttn {
            dims: st.dims,
            scale: (1f64 / (self.head_dim as f64).sqrt()) as f32,
            q8: use_q8,
            fold_kv: self.device.is_cuda() && FOLD_KV.on(),
            split: (self.device.is_cuda() && AttnSplit::pays(&st.dims))
                .then(|| st.attn_split.clone()),
        };
        let add_norm = |a: &Tensor, r: &Tensor, n: &Norm| -> Result<(Tensor, Tensor, Blocks)> {
            let y = a.apply_op3_no_bwd(
                r,
                &n.w,
                &AddRmsNorm {
                    eps: n.eps,
                    q8: use_q8,
                },
            )?;
            if !use_q8 {
                return Ok((y.i(0)?, y.i(1)?, None));
            }
            let len = a.elem_count();
            let (h, blocks) = split_blocks(&y.narrow(0, len, y.dim(0)? - len)?, a.dims())?;
            Ok((y.narrow(0, 0, len)?.reshape(a.dims())?, h, blocks))
        };
        let mut x = self.embed.forward(ids)?;
        let mut h = self.layers[0].ln1.forward(&x)?;
        let mut hq: Blocks = None;
        for (i, (layer, buf)) in self.layers.iter().zip(&st.bufs).enumerate() {
            let qkv = layer.qkv.forward_q8(&h, hq.as_ref())?;
            if !attn.fold_kv {
                buf.inplace_op3(&qkv, &step, &RopeKv(st.dims))?;
            }
            let a = qkv.apply_op3_no_bwd(buf, &step, &attn)?;
            let (a, aq) = blocks_of(a, use_q8, &[st.batch, 1, self.heads * self.head_dim])?;
            let a = layer.o.forward_q8(&a, aq.as_ref())?;
            let (x1, h1, h1q) = add_norm(&a, &x, &layer.ln2)?;
            let gu = layer.gate_up.forward_q8(&h1, h1q.as_ref())?;
            let mut g_dims = gu.dims().to_vec();
            *g_dims.last_mut().unwrap_or(&mut 0) /= 2;
            let g = gu.apply_op1_no_bwd(&SwiGlu { q8: use_q8 })?;
            let (g, gq) = blocks_of(g, use_q8, &g_dims)?;
            let m = layer.down.forward_q8(&g, gq.as_ref())?;
            let next = self.layers.get(i + 1).map_or(&self.norm, |l| &l.ln1);
            (x, h, hq) = add_norm(&m, &x1, next)?;
        }
        self.head(&h, 1)
    }

    /// Logits (batch, vocab) of the last of `s` normed positions `x` (batch, s, hidden), as
    /// each mirrored model takes them.
    fn head(&self, x: &Tensor, s: usize) -> Result<Tensor> {
        Ok(match self.kind {
            Kind::FloatQwen2 => {
                // qwen2.rs: narrow to the last position, lm_head → (b, 1, vocab).
                let l = self.lm_head.forward(&x.narrow(1, s - 1, 1)?)?;
                l.squeeze(1)?
            }
            Kind::FloatLlama => {
                let x = x.i((.., s - 1, ..))?.contiguous()?;
                self.lm_head.forward(&x)?.to_dtype(DType::F32)?
            }
            Kind::QuantQwen2 | Kind::QuantLlama => {
                let x = x.i((.., s - 1, ..))?.contiguous()?;
                self.lm_head.forward(&x)?
            }
        })
    }

    /// Attention of `x`'s s positions (the first at device position `pos`, all of them at `p`)
    /// over the cache's first `keys` positions, after writing their K/V rows into it. The
    /// scores are computed in the cache dtype (on tensor cores for F16/BF16 caches) and scaled,
    /// masked and softmaxed in one pass ([`CausalSoftmax`]).
    fn attention(
        &self,
        layer: &Layer,
        x: &Tensor,
        (cos, sin): (&Tensor, &Tensor),
        (kc, vc): (&Tensor, &Tensor),
        (pos, p): (&Tensor, &Tensor),
        keys: usize,
    ) -> Result<Tensor> {
        let (b, s, _) = x.dims3()?;
        let (nh, nkv, hd) = (self.heads, self.kv_heads, self.head_dim);
        let qkv = layer.qkv.forward(x)?;
        let qkv = match &layer.qkv_bias {
            Some(b) => qkv.broadcast_add(b)?,
            None => qkv,
        };
        let q = qkv.narrow(D::Minus1, 0, nh * hd)?;
        let k = qkv.narrow(D::Minus1, nh * hd, nkv * hd)?;
        let v = qkv.narrow(D::Minus1, (nh + nkv) * hd, nkv * hd)?;
        let q = q.reshape((b, s, nh, hd))?.transpose(1, 2)?.contiguous()?;
        let k = k.reshape((b, s, nkv, hd))?.transpose(1, 2)?.contiguous()?;
        let v = v.reshape((b, s, nkv, hd))?.transpose(1, 2)?.contiguous()?;
        let (q, k) = if self.kind == Kind::QuantLlama {
            // GGUF llama rows are permuted for the interleaved rotation.
            (
                candle_nn::rotary_emb::rope_i(&q, cos, sin)?,
                candle_nn::rotary_emb::rope_i(&k, cos, sin)?,
            )
        } else {
            (
                candle_nn::rotary_emb::rope(&q, cos, sin)?,
                candle_nn::rotary_emb::rope(&k, cos, sin)?,
            )
        };
        let cd = self.cache_dtype();
        // New rows into the cache at the device-side position, in place.
        kc.inplace_op3(&k.to_dtype(cd)?, p, &KvWrite)?;
        vc.inplace_op3(&v.to_dtype(cd)?, p, &KvWrite)?;
        // Grouped-query attention without repeating the cache: the g = nh / nkv query heads that
        // share a KV head become g·s rows of one matmul against it.
        let g = nh / nkv;
        let scale = 1f64 / (hd as f64).sqrt();
        // GGUF arms' F16 cache (unless `QE_PREFILL_F16_ATTN=0`): scores on tensor cores in F16, the
        // scale folded into q first (in F32) so the scores' F16 rounding stays small; else the
        // attention dtype (F32 for GGUF: the eager models' numerics).
        let (ad, q, score_scale) = if self.prefill_scores_in_f16() {
            (DType::F16, (q * scale)?.to_dtype(DType::F16)?, 1f32)
        } else {
            let ad = self.att_dtype();
            (ad, q.to_dtype(ad)?, scale as f32)
        };
        let q = q.reshape((b, nkv, g * s, hd))?;
        let (kc, vc) = if keys < kc.dim(2)? {
            (
                kc.narrow(2, 0, keys)?.contiguous()?,
                vc.narrow(2, 0, keys)?.contiguous()?,
            )
        } else {
            (kc.clone(), vc.clone())
        };
        let (kc, vc) = (kc.to_dtype(ad)?, vc.to_dtype(ad)?);
        let att = q.matmul(&kc.t()?)?;
        // qwen2.rs multiplies by 1/√hd, the others divide by √hd: candle does both as a multiply.
        let att = att.apply_op2_no_bwd(
            pos,
            &CausalSoftmax {
                queries: s,
                scale: score_scale,
            },
        )?;
        let y = att.matmul(&vc)?; // (b, nkv, g·s, hd)
        let y = y
            .reshape((b, nh, s, hd))?
            .transpose(1, 2)?
            .reshape((b, s, nh * hd))?
            .to_dtype(self.dtype)?;
        layer.o.forward(&y)
    }
}

/// A fused op's Q8_1 blocks of its output, when it wrote them.
type Blocks = Option<Tensor>;

/// A flat fused-op output — `dims`' values, then their Q8_1 blocks — split into the values
/// (shaped `dims`) and the blocks.
fn split_blocks(y: &Tensor, dims: &[usize]) -> Result<(Tensor, Blocks)> {
    let n: usize = dims.iter().product();
    let values = y.narrow(0, 0, n)?.reshape(dims)?;
    Ok((values, Some(y.narrow(0, n, q8::words(n))?)))
}

/// [`split_blocks`] of an op's output when it wrote blocks (`q8`), else the output as it is.
fn blocks_of(y: Tensor, q8: bool, dims: &[usize]) -> Result<(Tensor, Blocks)> {
    if q8 {
        split_blocks(&y, dims)
    } else {
        Ok((y, None))
    }
}

/// Whether the step runs candle's ops instead of the fused ones (`QE_GRAPH_UNFUSED=1`; off), to
/// time the fused kernels against what they replace on the GPU.
pub static UNFUSED: crate::switch::Switch = crate::switch::Switch::new("QE_GRAPH_UNFUSED", false);

/// Whether GGUF arms with the F16 cache compute the prefill's attention in F16 on tensor cores
/// (`QE_PREFILL_F16_ATTN`; on: `0` keeps the F32 scores of the eager models). At 16 k prompt
/// tokens on the H200 the F32 attention left the 4-bit arms' prefill at 0.45–0.51× llama.cpp's,
/// the F16 one at 0.86–1.03×; on SmolLM2's real weights the F16 scores move the next-token
/// distribution by about as much as the F16 cache does (`real_model.rs`).
pub static PREFILL_F16_ATTN: crate::switch::Switch =
    crate::switch::Switch::new("QE_PREFILL_F16_ATTN", true);

/// Whether the GPU's decode attention writes the K/V cache itself ([`DecodeAttn::fold_kv`];
/// `QE_FOLD_KV=0` turns it off).
pub static FOLD_KV: crate::switch::Switch = crate::switch::Switch::new("QE_FOLD_KV", true);

/// Whether quantized projections may read fused ops' Q8_1 blocks (`QE_Q8=0` turns it off).
pub static Q8: crate::switch::Switch = crate::switch::Switch::new("QE_Q8", true);

/// Greedy argmax of `logits` (batch, vocab) → (batch, 1) u32, on the device ([`ArgMax`]).
pub fn argmax(logits: &Tensor) -> Result<Tensor> {
    Ok(logits.contiguous()?.apply_op1_no_bwd(&crate::ops::ArgMax)?)
}

#[cfg(test)]
mod gemv_tests {
    use super::*;

    /// With the matvec on, a float projection at one row gives the GEMM's output within the
    /// dtype's rounding; two rows, a bias or F32 keep the GEMM.
    #[test]
    fn float_projections_take_the_matvec_only_where_it_applies() {
        let dev = Device::Cpu;
        let w = Tensor::randn(0f32, 0.1, (24, 64), &dev).unwrap();
        let linear = |dt: DType, bias: bool| {
            let b = bias.then(|| Tensor::zeros(24, dt, &dev).unwrap());
            Linear::new(w.to_dtype(dt).unwrap(), b)
        };
        let x = |rows: usize, dt: DType| {
            Tensor::randn(0f32, 1.0, (rows, 1, 64), &dev)
                .unwrap()
                .to_dtype(dt)
                .unwrap()
        };
        let plain = linear(DType::F16, false);
        assert!(gemv_applies(&plain, &x(1, DType::F16)).unwrap());
        assert!(!gemv_applies(&plain, &x(2, DType::F16)).unwrap());
        let biased = linear(DType::F16, true);
        assert!(!gemv_applies(&biased, &x(1, DType::F16)).unwrap());
        assert!(!gemv_applies(&linear(DType::F32, false), &x(1, DType::F32)).unwrap());
        // The decode path's x is the second half of the fused norm's (2, ..) output: an offset view.
        let pair = x(2, DType::F16).reshape((2, 1, 1, 64)).unwrap();
        let second = pair.i(1).unwrap();
        assert!(second.layout().start_offset() == 64 && gemv_applies(&plain, &second).unwrap());
        // K 56 (a multiple of 8) but x starting 4 elements in: 8 bytes, not 16-byte aligned.
        let misaligned = x(1, DType::F16)
            .flatten_all()
            .unwrap()
            .narrow(0, 4, 56)
            .unwrap();
        let w56 = w.narrow(1, 0, 56).unwrap().contiguous().unwrap();
        let narrow = Linear::new(w56.to_dtype(DType::F16).unwrap(), None);
        assert!(misaligned.is_contiguous() && misaligned.layout().start_offset() == 4);
        assert!(!gemv_applies(&narrow, &misaligned).unwrap());
        let moved = misaligned.affine(1.0, 0.0).unwrap(); // a new buffer, offset 0
        assert!(gemv_applies(&narrow, &moved).unwrap());
        for (dt, xs) in [
            (DType::F16, x(1, DType::F16)),
            (DType::BF16, x(1, DType::BF16)),
            (DType::F16, second),
        ] {
            let l = Lin::Float(linear(dt, false));
            let f32 = |t: Tensor| t.to_dtype(DType::F32).unwrap();
            let on = f32(l.forward_with(&xs, true).unwrap());
            let off = f32(l.forward_with(&xs, false).unwrap());
            assert_eq!(on.dims(), off.dims());
            let diff = (on - &off).unwrap().abs().unwrap().max_all().unwrap();
            let scale = off.abs().unwrap().max_all().unwrap();
            let (d, m) = (
                diff.to_scalar::<f32>().unwrap(),
                scale.to_scalar::<f32>().unwrap(),
            );
            let tol = if dt == DType::F16 { 4e-3 } else { 3e-2 };
            assert!(d <= tol * m, "{dt:?}: {d} vs max {m}");
        }
    }
}
