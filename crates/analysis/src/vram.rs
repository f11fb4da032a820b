//! Weight formats at their true storage cost, and the VRAM a decode configuration needs.
//!
//! Bytes are counted from the model's real shapes (`ModelShape`), not from a nominal size, so a
//! "7B" Qwen2 (7.616 B parameters, untied 152k-vocab embeddings) costs what it really costs.

use crate::shapes::ModelShape;
use crate::tag::Tagged;
use serde::Serialize;

/// The runtime that executes a format; launch overhead and calibration are per stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stack {
    /// Hugging Face transformers (+ bitsandbytes for NF4 / INT8), eager decode.
    Transformers,
    /// llama.cpp with GGUF files.
    LlamaCpp,
    /// candle (this project's meter): F16 cuBLAS and GGUF quantized matmuls, eager decode.
    Candle,
    /// The meter's CUDA-graph engine (`candle-graph`): candle's weights and kernels, each decode
    /// step one graph launch. Its own stack because its step time is not the eager engine's
    /// launch floor (7B F16 decodes at ≈ 61 % of the H200's HBM roofline), so it is calibrated
    /// on its own rows.
    CandleGraph,
}

/// How one precision stores a model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WeightFormat {
    /// Name as the dataset writes it (`FP16`, `NF4`, `GGUF-Q4_0`, …).
    pub name: &'static str,
    /// The runtime that stores and runs it.
    pub stack: Stack,
    /// Bits per parameter of the per-layer linear weights, scales included.
    pub linear_bits: f64,
    /// Extra bytes per output row of every linear layer (LLM.int8()'s fp32 row scales).
    pub row_scale_bytes: f64,
    /// Bits per parameter of the token embedding and of the (untied) output head.
    pub embedding_bits: f64,
    /// Bits per parameter of the untied output head.
    pub head_bits: f64,
    /// Whether a dequantized fp16 copy of one weight matrix is needed as scratch while decoding.
    pub dequant_scratch: bool,
    /// Why the bit counts are what they are.
    pub storage_note: &'static str,
}

/// NF4: 4-bit codes + one fp32 absmax per 64 weights = 4 + 32/64 bits.
pub const NF4_BITS: f64 = 4.0 + 32.0 / 64.0;
/// NF4 with double quantization: absmax as 8-bit per 64 weights + one fp32 per 256 blocks.
pub const NF4_DQ_BITS: f64 = 4.0 + 8.0 / 64.0 + 32.0 / (64.0 * 256.0);
/// GGUF block formats: bytes per block / weights per block.
pub const Q8_0_BITS: f64 = 34.0 * 8.0 / 32.0;
/// GGUF Q4_0: 18 bytes per 32 weights.
pub const Q4_0_BITS: f64 = 18.0 * 8.0 / 32.0;
/// GGUF Q4_K: 144 bytes per 256 weights.
pub const Q4_K_BITS: f64 = 144.0 * 8.0 / 256.0;
/// GGUF Q6_K: 210 bytes per 256 weights.
pub const Q6_K_BITS: f64 = 210.0 * 8.0 / 256.0;

const fn bnb(
    name: &'static str,
    bits: f64,
    row_scale_bytes: f64,
    note: &'static str,
) -> WeightFormat {
    WeightFormat {
        name,
        stack: Stack::Transformers,
        linear_bits: bits,
        row_scale_bytes,
        // bitsandbytes only replaces nn.Linear inside the blocks; embeddings, lm_head and norms stay fp16.
        embedding_bits: 16.0,
        head_bits: 16.0,
        dequant_scratch: bits < 16.0,
        storage_note: note,
    }
}

const fn gguf(name: &'static str, bits: f64, head_bits: f64, note: &'static str) -> WeightFormat {
    WeightFormat {
        name,
        stack: Stack::LlamaCpp,
        linear_bits: bits,
        row_scale_bytes: 0.0,
        // llama.cpp quantizes token_embd too; output.weight gets Q6_K in 4-bit files.
        embedding_bits: bits,
        head_bits,
        dequant_scratch: false,
        storage_note: note,
    }
}

/// candle keeps GGUF weights as blocks but dequantizes the token embedding to F32 at load. Both of
/// the meter's engines load the same weights (`stack` says which one runs them).
const fn candle(stack: Stack, name: &'static str, bits: f64, note: &'static str) -> WeightFormat {
    WeightFormat {
        name,
        stack,
        linear_bits: bits,
        row_scale_bytes: 0.0,
        embedding_bits: if bits < 16.0 { 32.0 } else { 16.0 },
        head_bits: bits,
        dequant_scratch: false,
        storage_note: note,
    }
}

/// Every format the tool knows the storage cost of.
pub fn formats() -> &'static [WeightFormat] {
    static F: [WeightFormat; 21] = [
        bnb("FP16", 16.0, 0.0, "16 bits everywhere"),
        bnb("BF16", 16.0, 0.0, "16 bits everywhere"),
        bnb(
            "NF4",
            NF4_BITS,
            0.0,
            "4-bit codes + fp32 absmax per 64 = 4.5 bits (no double quant: upstream container default)",
        ),
        bnb(
            "NF4-DQ",
            NF4_DQ_BITS,
            0.0,
            "4-bit codes + 8-bit absmax per 64 + fp32 per 256 blocks ≈ 4.127 bits",
        ),
        bnb("INT8", 8.0, 4.0, "LLM.int8(): 8 bits + one fp32 scale per output row"),
        bnb("INT8-pure", 8.0, 4.0, "LLM.int8() threshold 0: 8 bits + one fp32 scale per output row"),
        gguf("GGUF-F16", 16.0, 16.0, "16 bits everywhere"),
        gguf("GGUF-Q8_0", Q8_0_BITS, Q8_0_BITS, "34 bytes per 32 weights = 8.5 bits"),
        gguf("GGUF-Q6_K", Q6_K_BITS, Q6_K_BITS, "210 bytes per 256 weights = 6.5625 bits"),
        gguf("GGUF-Q4_K", Q4_K_BITS, Q6_K_BITS, "144 bytes per 256 weights = 4.5 bits; output Q6_K"),
        gguf("GGUF-Q4_0", Q4_0_BITS, Q6_K_BITS, "18 bytes per 32 weights = 4.5 bits; output Q6_K"),
        candle(Stack::Candle, "candle-F16", 16.0, "candle F16: 16 bits everywhere"),
        candle(Stack::Candle, "candle-BF16", 16.0, "candle BF16: 16 bits everywhere"),
        candle(Stack::Candle, "candle-Q8_0", Q8_0_BITS, "candle GGUF Q8_0 = 8.5 bits; embedding dequantized to F32"),
        candle(Stack::Candle, "candle-Q4_K", Q4_K_BITS, "candle GGUF Q4_K = 4.5 bits; embedding dequantized to F32"),
        candle(Stack::Candle, "candle-Q4_0", Q4_0_BITS, "candle GGUF Q4_0 = 4.5 bits; embedding dequantized to F32"),
        candle(Stack::CandleGraph, "candle-graph-F16", 16.0, "candle F16: 16 bits everywhere"),
        candle(Stack::CandleGraph, "candle-graph-BF16", 16.0, "candle BF16: 16 bits everywhere"),
        candle(Stack::CandleGraph, "candle-graph-Q8_0", Q8_0_BITS, "candle GGUF Q8_0 = 8.5 bits; embedding dequantized to F32"),
        candle(Stack::CandleGraph, "candle-graph-Q4_K", Q4_K_BITS, "candle GGUF Q4_K = 4.5 bits; embedding dequantized to F32"),
        candle(Stack::CandleGraph, "candle-graph-Q4_0", Q4_0_BITS, "candle GGUF Q4_0 = 4.5 bits; embedding dequantized to F32"),
    ];
    &F
}

/// The format of a precision on a software stack (an anchor's `stack` text, or an engine name as
/// [`crate::curve_engine`] spells it): our meter's engines (`candle`, `candle-graph`) map
/// FP16/BF16/Q8_0/Q4_K/Q4_0 to their own formats, llama.cpp reads FP16 as `GGUF-F16`, anything
/// else goes to [`find_format`].
pub fn find_format_on(name: &str, stack: &str) -> Option<&'static WeightFormat> {
    let engine = crate::engine::curve_engine(stack);
    let fp16 = name.eq_ignore_ascii_case("FP16");
    let own = match engine.as_str() {
        "candle" | "candle-graph" => {
            let n = if fp16 { "F16" } else { name };
            let want = format!("{engine}-{n}");
            formats()
                .iter()
                .find(|f| f.name.eq_ignore_ascii_case(&want))
        }
        "llama.cpp" if fp16 => find_format("GGUF-F16"),
        _ => None,
    };
    own.or_else(|| find_format(name))
}

/// A format by name; `Q4_0` finds `GGUF-Q4_0`, a file variant finds its base format.
pub fn find_format(name: &str) -> Option<&'static WeightFormat> {
    let want = name.trim().to_ascii_uppercase();
    let exact = |n: &str| formats().iter().find(|f| f.name.eq_ignore_ascii_case(n));
    exact(&want)
        .or_else(|| exact(&format!("GGUF-{want}")))
        .or_else(|| {
            formats()
                .iter()
                .filter(|f| {
                    f.stack == Stack::LlamaCpp && want.starts_with(&f.name.to_ascii_uppercase())
                })
                .max_by_key(|f| f.name.len())
        })
}

/// Parameter groups of a shape that formats store differently.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParamSplit {
    /// Parameters of the per-layer linear weights.
    pub linear: f64,
    /// Parameters of the token embedding.
    pub embedding: f64,
    /// Untied output head (0 when tied to the embedding).
    pub head: f64,
    /// Norms, biases: always kept at 16 bits here.
    pub other: f64,
    /// Output rows of all linear layers (for per-row scales).
    pub linear_rows: f64,
}

/// Split a shape's parameters into the groups formats store differently.
pub fn param_split(s: &ModelShape) -> ParamSplit {
    let (h, q, kv) = (
        s.hidden as f64,
        (s.heads * s.head_dim) as f64,
        (s.kv_heads * s.head_dim) as f64,
    );
    let linear = s.linear_params() as f64;
    let embedding = s.vocab as f64 * h;
    let head = if s.tied_embeddings { 0.0 } else { embedding };
    ParamSplit {
        linear,
        embedding,
        head,
        other: s.param_count() as f64 - linear - embedding - head,
        // q, k, v, o, gate, up, down: output widths q + 2kv + h + 2·inter + h.
        linear_rows: s.layers as f64 * (q + 2.0 * kv + 2.0 * h + 2.0 * s.intermediate as f64),
    }
}

/// Bytes of the weights in `fmt`, scales included.
pub fn weight_bytes(s: &ModelShape, fmt: &WeightFormat) -> f64 {
    let p = param_split(s);
    p.linear * fmt.linear_bits / 8.0
        + p.linear_rows * fmt.row_scale_bytes
        + p.embedding * fmt.embedding_bits / 8.0
        + p.head * fmt.head_bits / 8.0
        + p.other * 2.0
}

/// Weights of a model of `params_b` billion parameters stored as `precision`, in GB (1e9 bytes),
/// scales included: the shape interpolated from the size ([`crate::shapes::shape_for_params`]) at
/// the format's true bits ([`weight_bytes`]). `None` for a format the tool does not know or a size
/// that is not a positive number.
pub fn weights_gb(params_b: f64, precision: &str) -> Option<f64> {
    if !(params_b.is_finite() && params_b > 0.0) {
        return None;
    }
    let fmt = find_format(precision)?;
    Some(weight_bytes(&crate::shapes::shape_for_params(params_b), fmt) / 1e9)
}

/// KV cache elements are fp16 in both stacks' defaults.
pub const KV_BYTES_PER_ELEM: f64 = 2.0;
/// CUDA context + cuBLAS workspace, reserved before any tensor (typical 0.3–0.6 GB).
pub const CUDA_CONTEXT_BYTES: f64 = 0.5e9;
/// PyTorch caching-allocator slack on top of live tensors (fragmentation, rounding).
pub const ALLOCATOR_SLACK: f64 = 0.05;

/// KV cache: 2 · layers · kv_heads · head_dim · context · batch · bytes (grouped-query attention).
pub fn kv_cache_bytes(s: &ModelShape, batch: u32, context: u32) -> f64 {
    s.kv_bytes_per_token(KV_BYTES_PER_ELEM) * context as f64 * batch as f64
}

/// Peak transient activations. The prefill of a `context`-token prompt holds one layer's working
/// set (residual, normed input, q/k/v/attn-out ≈ 4·hidden, gate+up 2·intermediate, fp16) per token
/// — attention itself is fused (SDPA), so no context² buffer; plus fp32 logits of the last position
/// only; plus, for dequantizing formats, one fp16 copy of the largest weight matrix.
pub fn activation_bytes(s: &ModelShape, fmt: &WeightFormat, batch: u32, context: u32) -> f64 {
    let tokens = batch as f64 * context as f64;
    let working = tokens * (4.0 * s.hidden as f64 + 2.0 * s.intermediate as f64) * 2.0;
    let logits = batch as f64 * s.vocab as f64 * 4.0;
    let widest = (s.heads * s.head_dim).max(s.intermediate) as f64;
    let scratch = if fmt.dequant_scratch {
        s.hidden as f64 * widest * 2.0
    } else {
        0.0
    };
    working + logits + scratch
}

/// VRAM of one configuration, in GB (1e9 bytes), each part tagged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VramBreakdown {
    /// The weights, scales included.
    pub weights_gb: Tagged<f64>,
    /// The KV cache (fp16, grouped-query).
    pub kv_cache_gb: Tagged<f64>,
    /// Prefill activations.
    pub activations_gb: Tagged<f64>,
    /// CUDA context + allocator slack.
    pub overhead_gb: Tagged<f64>,
    /// Everything, with CUDA context and allocator slack.
    pub total_gb: Tagged<f64>,
}

/// VRAM of `s` in `fmt` at `batch` and `context`.
pub fn vram(s: &ModelShape, fmt: &WeightFormat, batch: u32, context: u32) -> VramBreakdown {
    let w = weight_bytes(s, fmt);
    let kv = kv_cache_bytes(s, batch, context);
    let act = activation_bytes(s, fmt, batch, context);
    let overhead = CUDA_CONTEXT_BYTES + ALLOCATOR_SLACK * (w + kv + act);
    VramBreakdown {
        weights_gb: Tagged::computed(w / 1e9),
        kv_cache_gb: Tagged::computed(kv / 1e9),
        activations_gb: Tagged::modelled(act / 1e9),
        overhead_gb: Tagged::modelled(overhead / 1e9),
        total_gb: Tagged::modelled((w + kv + act + overhead) / 1e9),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shapes::find_shape;

    fn qwen7() -> &'static ModelShape {
        find_shape("Qwen2-7B").unwrap()
    }

    #[test]
    fn bits_per_weight_match_the_formats() {
        assert_eq!(NF4_BITS, 4.5);
        assert!((NF4_DQ_BITS - 4.126_953_125).abs() < 1e-12);
        assert_eq!(Q8_0_BITS, 8.5);
        assert_eq!(Q4_0_BITS, 4.5);
        assert_eq!(Q4_K_BITS, 4.5);
        assert_eq!(Q6_K_BITS, 6.5625);
        assert_eq!(find_format("q4_0").unwrap().name, "GGUF-Q4_0");
        assert_eq!(
            find_format("GGUF-Q4_0-mlperf-client-file").unwrap().name,
            "GGUF-Q4_0"
        );
        assert_eq!(find_format("int8-pure").unwrap().name, "INT8-pure");
        assert!(find_format("FP8").is_none());
    }

    #[test]
    fn qwen2_7b_parameter_split_by_hand() {
        // per layer: 3584² (q) + 2·3584·512 (k, v) + 3584² (o) + 3·3584·18944 (mlp) = 233 046 016
        let p = param_split(qwen7());
        assert_eq!(p.linear, 28.0 * 233_046_016.0);
        assert_eq!(p.embedding, 152_064.0 * 3584.0);
        assert_eq!(p.head, p.embedding); // untied
                                         // biases (3584 + 2·512) + 2 norms per layer, + final norm
        assert_eq!(p.other, 28.0 * (4608.0 + 7168.0) + 3584.0);
    }

    #[test]
    fn kv_cache_of_qwen2_7b_at_4k_by_hand() {
        // 2 · 28 layers · 4 kv heads · 128 · 4096 tokens · 1 sequence · 2 bytes = 234 881 024 B
        assert_eq!(kv_cache_bytes(qwen7(), 1, 4096), 234_881_024.0);
        // batch 8 is 8× that; 28 full heads would be 7× more (the upstream GQA flaw).
        assert_eq!(kv_cache_bytes(qwen7(), 8, 4096), 8.0 * 234_881_024.0);
    }

    #[test]
    fn vram_of_qwen2_7b_nf4_by_hand() {
        let nf4 = find_format("NF4").unwrap();
        // weights: 6 525 288 448 linear · 4.5/8 = 3 670 474 752
        //        + (2 · 544 997 376 embedding/head + 333 312 other) · 2 = 2 180 656 128
        assert_eq!(weight_bytes(qwen7(), nf4), 5_851_130_880.0);
        // activations at batch 1, ctx 4096: 4096 · (4·3584 + 2·18944) · 2 = 427 819 008
        //   + logits 152 064 · 4 = 608 256 + dequant scratch 3584 · 18944 · 2 = 135 790 592
        assert_eq!(activation_bytes(qwen7(), nf4, 1, 4096), 564_217_856.0);
        // total: (5 851 130 880 + 234 881 024 + 564 217 856) · 1.05 + 0.5e9 = 7 482 741 248
        let v = vram(qwen7(), nf4, 1, 4096);
        assert!(
            (v.total_gb.value - 7.482_741_248).abs() < 1e-9,
            "{}",
            v.total_gb.value
        );
        assert_eq!(v.weights_gb.tag, crate::tag::Tag::Computed);
        assert_eq!(v.total_gb.tag, crate::tag::Tag::Modelled);
    }

    #[test]
    fn int8_adds_fp32_row_scales_and_fp16_is_two_bytes_per_param() {
        let s = qwen7();
        let fp16 = weight_bytes(s, find_format("FP16").unwrap());
        assert_eq!(fp16, 2.0 * s.param_count() as f64);
        let int8 = weight_bytes(s, find_format("INT8").unwrap());
        // rows per layer: 3584 + 2·512 + 2·3584 + 2·18944 = 49 664 → 28 · 49 664 · 4 B
        let rows = 28.0 * 49_664.0 * 4.0;
        assert_eq!(
            int8,
            6_525_288_448.0 + rows + (2.0 * 544_997_376.0 + 333_312.0) * 2.0
        );
    }

    #[test]
    fn weights_gb_follows_the_format_and_refuses_what_it_cannot_count() {
        let fp16 = weights_gb(7.0, "FP16").unwrap();
        let shape = crate::shapes::shape_for_params(7.0);
        assert_eq!(fp16, 2.0 * shape.param_count() as f64 / 1e9);
        let nf4 = weights_gb(7.0, "nf4").unwrap();
        let int8 = weights_gb(7.0, "INT8").unwrap();
        let q4k = weights_gb(7.0, "Q4_K").unwrap();
        assert!(nf4 < int8 && int8 < fp16, "{nf4} {int8} {fp16}");
        // 4.5-bit linear weights, fp16 embeddings (NF4) vs quantized embeddings (GGUF)
        assert!(q4k < nf4 && nf4 > fp16 * 4.5 / 16.0);
        assert!(weights_gb(7.0, "FP8").is_none());
        assert!(weights_gb(0.0, "FP16").is_none());
        assert!(weights_gb(f64::NAN, "FP16").is_none());
    }

    #[test]
    fn nf4_double_quant_is_smaller_and_gguf_quantizes_embeddings() {
        let s = qwen7();
        let nf4 = weight_bytes(s, find_format("NF4").unwrap());
        let dq = weight_bytes(s, find_format("NF4-DQ").unwrap());
        assert!(dq < nf4);
        let q4 = weight_bytes(s, find_format("GGUF-Q4_0").unwrap());
        assert!(
            q4 < nf4,
            "GGUF also quantizes the 1.09 B embedding/head parameters"
        );
    }
}
