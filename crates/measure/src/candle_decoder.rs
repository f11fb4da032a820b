//! The candle decode engine: Llama and Qwen2 families, F32/F16/BF16 through candle's float models
//! and GGUF formats (Q8_0, Q4_K, Q4_0, Q5_K, Q6_K) through its quantized models. Weights come
//! from a local Hugging Face directory, a GGUF file, or seeded random values at a real
//! architecture's exact shapes (`--synthetic`).

use crate::decoder::{Decoder, DecoderFactory};
use analysis::ModelShape;
use anyhow::{anyhow, bail, Context, Result};
use candle_core::quantized::{ggml_file::qtensor_from_ggml, gguf_file, GgmlDType, QTensor};
use candle_core::{DType, Device, Tensor, D};
use candle_nn::VarBuilder;
use candle_transformers::models::{llama, quantized_llama, quantized_qwen2, qwen2};
use rand::{RngCore, SeedableRng};
use std::collections::HashMap;
use std::io::Cursor;
use std::path::PathBuf;

pub const CANDLE_VERSION: &str = "0.11.1";

/// Where the weights come from.
#[derive(Debug, Clone)]
pub enum WeightSource {
    Synthetic { shape: ModelShape, seed: u64 },
    HfDir(PathBuf),
    Gguf(PathBuf),
}

/// Precisions this engine runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    Float(DType),
    Quant(GgmlDType),
}

pub fn parse_precision(p: &str) -> Result<Precision> {
    Ok(match p.to_ascii_uppercase().as_str() {
        "F32" | "FP32" => Precision::Float(DType::F32),
        "F16" | "FP16" => Precision::Float(DType::F16),
        "BF16" => Precision::Float(DType::BF16),
        "Q8_0" => Precision::Quant(GgmlDType::Q8_0),
        "Q4_0" => Precision::Quant(GgmlDType::Q4_0),
        "Q4_K" => Precision::Quant(GgmlDType::Q4K),
        "Q5_K" => Precision::Quant(GgmlDType::Q5K),
        "Q6_K" => Precision::Quant(GgmlDType::Q6K),
        other => bail!("unsupported precision {other:?}: expected F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K or Q6_K"),
    })
}

/// Bytes per parameter of a precision, including block scales.
pub fn bytes_per_param(p: Precision) -> f64 {
    match p {
        Precision::Float(DType::F32) => 4.0,
        Precision::Float(_) => 2.0,
        Precision::Quant(q) => q.type_size() as f64 / q.block_size() as f64,
    }
}

pub struct CandleFactory {
    pub source: WeightSource,
    pub device: Device,
    shape: ModelShape,
    /// Synthetic quantized arms: quantize the float arms' seeded weights (slower to load) instead
    /// of drawing independent random blocks. Perplexity needs it: a Δ vs FP16 only means
    /// something between the same weights. The decode work is the same either way, but power can
    /// depend on the values, so campaign sweeps keep random blocks (a sweep plan cannot ask for
    /// perplexity); the report's `weights.quantized_from_float` says which a run used.
    pub quantize_synthetic_floats: bool,
}

impl CandleFactory {
    pub fn new(source: WeightSource, device: Device) -> Result<Self> {
        let shape = match &source {
            WeightSource::Synthetic { shape, .. } => shape.clone(),
            WeightSource::HfDir(dir) => shape_from_hf_config(dir)?,
            WeightSource::Gguf(path) => shape_from_gguf(path)?,
        };
        Ok(CandleFactory {
            source,
            device,
            shape,
            quantize_synthetic_floats: false,
        })
    }

    pub fn shape(&self) -> &ModelShape {
        &self.shape
    }

    fn load_candle(&mut self, precision: &str) -> Result<CandleDecoder> {
        let p = parse_precision(precision)?;
        let shape = self.shape.clone();
        let dev = self.device.clone();
        let t0 = std::time::Instant::now();
        let model = match (&self.source, p) {
            (WeightSource::Synthetic { seed, .. }, Precision::Float(dt)) => {
                let tensors = if self.quantize_synthetic_floats {
                    // Drawn on the CPU from our own seeded generator, so the quantized arms can
                    // start from bit-identical values whatever the device's RNG does.
                    synthetic_float_tensors(&shape, *seed, &Device::Cpu)?
                        .into_iter()
                        .map(|(n, t)| Ok((n, t.to_device(&dev)?)))
                        .collect::<Result<HashMap<_, _>>>()?
                } else {
                    synthetic_float_tensors(&shape, *seed, &dev)?
                };
                float_model(&shape, VarBuilder::from_tensors(tensors, dt, &dev))?
            }
            (WeightSource::Synthetic { seed, .. }, Precision::Quant(q))
                if self.quantize_synthetic_floats =>
            {
                // The same values the float arms get (see above).
                let tensors = synthetic_float_tensors(&shape, *seed, &Device::Cpu)?;
                let (gguf, mut notes) = quantize_hf_tensors(tensors, &shape, q)?;
                notes.push(format!(
                    "quantized in memory from the float arms' seeded synthetic weights (seed {seed})"
                ));
                let mut m = quant_model_from_bytes(&shape, gguf, &dev)?;
                m.notes = notes;
                m
            }
            (WeightSource::Synthetic { seed, .. }, Precision::Quant(q)) => {
                let (gguf, notes) = synthetic_gguf(&shape, q, *seed)?;
                let mut m = quant_model_from_bytes(&shape, gguf, &dev)?;
                m.notes = notes;
                m
            }
            (WeightSource::HfDir(dir), Precision::Float(dt)) => {
                let files = safetensor_files(dir)?;
                // SAFETY: the files are memory-mapped read-only for the lifetime of the model.
                let vb = unsafe { VarBuilder::from_mmaped_safetensors(&files, dt, &dev)? };
                float_model(&shape, vb)?
            }
            (WeightSource::HfDir(dir), Precision::Quant(q)) => {
                let (gguf, notes) = quantize_hf_dir(dir, &shape, q)?;
                let mut m = quant_model_from_bytes(&shape, gguf, &dev)?;
                m.notes = notes;
                m
            }
            (WeightSource::Gguf(path), Precision::Quant(q)) => {
                let mut f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
                let ct = gguf_file::Content::read(&mut f).map_err(|e| anyhow!("{}: {e}", path.display()))?;
                let found = dominant_type(&ct);
                let mut m = quant_model(&shape, ct, &mut f, &dev)?;
                if found != Some(q) {
                    bail!(
                        "{} holds {:?} weights, not {precision}: a GGUF file is one quantization",
                        path.display(),
                        found
                    );
                }
                m.notes.push(format!("weights from GGUF file {}", path.display()));
                m
            }
            (WeightSource::Gguf(path), Precision::Float(_)) => bail!(
                "{} is a quantized GGUF file; the {precision} arm needs float weights (a Hugging Face directory)",
                path.display()
            ),
        };
        tracing::info!(
            precision,
            seconds = t0.elapsed().as_secs_f64(),
            "model loaded"
        );
        Ok(CandleDecoder {
            model,
            device: dev,
            vocab: shape.vocab,
            precision: precision.to_string(),
        })
    }
}

impl DecoderFactory for CandleFactory {
    fn load(&mut self, precision: &str) -> Result<Box<dyn Decoder>> {
        Ok(Box::new(self.load_candle(precision)?))
    }

    fn required_bytes(&self, precision: &str, batch: usize, context: usize) -> u64 {
        let Ok(p) = parse_precision(precision) else {
            return 0;
        };
        required_bytes(&self.shape, p, batch, context)
    }

    fn tokenize(&self, text: &str) -> Result<(Vec<u32>, String)> {
        let file = match &self.source {
            WeightSource::Synthetic { .. } => {
                // Random weights have no tokenizer and no language: byte ids are as good as any
                // text, and only the Δ between arms (the quantization's numerical error) means
                // anything.
                let v = self.shape.vocab.max(1) as u32;
                return Ok((
                    text.bytes().map(|b| u32::from(b) % v).collect(),
                    "UTF-8 byte ids (synthetic weights have no tokenizer)".into(),
                ));
            }
            WeightSource::HfDir(dir) => dir.join("tokenizer.json"),
            WeightSource::Gguf(path) => path.with_file_name("tokenizer.json"),
        };
        if !file.is_file() {
            bail!(
                "no tokenizer at {}: perplexity needs the model's tokenizer.json{}",
                file.display(),
                if matches!(self.source, WeightSource::Gguf(_)) {
                    " beside the GGUF file"
                } else {
                    ""
                }
            );
        }
        let mut tok = tokenizers::Tokenizer::from_file(&file)
            .map_err(|e| anyhow!("{}: {e}", file.display()))?;
        // The corpus is scored as it is: no pad tokens, no cut at the tokenizer's max length.
        tok.with_padding(None);
        tok.with_truncation(None)
            .map_err(|e| anyhow!("{}: {e}", file.display()))?;
        let enc = tok
            .encode(text, false)
            .map_err(|e| anyhow!("tokenizing with {}: {e}", file.display()))?;
        Ok((
            enc.get_ids().to_vec(),
            format!("tokenizer.json ({})", file.display()),
        ))
    }
}

/// Weights + KV cache + dequantized embedding (quantized models keep it in F32) + logits +
/// runtime overhead (CUDA context, cuBLAS workspace, allocator slack: 1.5 GB measured-ish).
pub fn required_bytes(shape: &ModelShape, p: Precision, batch: usize, context: usize) -> u64 {
    let params = shape.param_count() as f64;
    let emb = (shape.vocab * shape.hidden) as f64;
    let (weights, kv_elem, extra) = match p {
        Precision::Float(dt) => (params * bytes_per_param(p), dt.size_in_bytes() as f64, 0.0),
        Precision::Quant(_) => (
            shape.linear_params() as f64 * bytes_per_param(p) + emb * 1.0625,
            4.0,
            emb * 4.0,
        ),
    };
    let kv = shape.kv_bytes_per_token(kv_elem) * (context * batch) as f64;
    let logits = (batch * shape.vocab) as f64 * 4.0 * 4.0;
    (weights + kv + extra + logits + 1.5e9) as u64
}

enum Model {
    Qwen2(qwen2::ModelForCausalLM),
    Llama(llama::Llama, llama::Config, DType),
    QQwen2(quantized_qwen2::ModelWeights),
    QLlama(quantized_llama::ModelWeights),
}

struct Loaded {
    model: Model,
    kernel: String,
    notes: Vec<String>,
}

pub struct CandleDecoder {
    model: Loaded,
    device: Device,
    vocab: usize,
    precision: String,
}

impl CandleDecoder {
    fn forward(
        &mut self,
        x: &Tensor,
        pos: usize,
        cache: &mut Option<llama::Cache>,
    ) -> Result<Tensor> {
        let logits = match &mut self.model.model {
            Model::Qwen2(m) => m.forward(x, pos)?,
            Model::Llama(m, cfg, dt) => {
                if cache.is_none() {
                    *cache = Some(llama::Cache::new(true, *dt, cfg, &self.device)?);
                }
                m.forward(x, pos, cache.as_mut().expect("just set"))?
            }
            Model::QQwen2(m) => m.forward(x, pos)?,
            Model::QLlama(m) => m.forward(x, pos)?,
        };
        // (b, vocab) or (b, 1, vocab) → the last position's logits (b, vocab).
        Ok(if logits.rank() == 3 {
            logits.squeeze(1)?
        } else {
            logits
        })
    }

    /// Greedy next token (b, 1), kept on the device.
    fn next_token(
        &mut self,
        x: &Tensor,
        pos: usize,
        cache: &mut Option<llama::Cache>,
    ) -> Result<Tensor> {
        Ok(self.forward(x, pos, cache)?.argmax_keepdim(D::Minus1)?)
    }

    fn clear(&mut self) {
        match &mut self.model.model {
            Model::Qwen2(m) => m.clear_kv_cache(),
            Model::Llama(..) => {} // a fresh Cache per generation
            Model::QQwen2(m) => m.clear_kv_cache(),
            Model::QLlama(m) => m.clear_kv_cache(),
        }
    }
}

/// Fixed prompt token ids (no tokenizer needed for decode energy; the same ids every run).
pub fn prompt_ids(batch: usize, len: usize, vocab: usize) -> Vec<u32> {
    (0..batch * len)
        .map(|i| ((i as u64 * 7919 + 13) % (vocab as u64).max(1)) as u32)
        .collect()
}

impl Decoder for CandleDecoder {
    fn generate(&mut self, batch: usize, prompt_len: usize, new_tokens: usize) -> Result<usize> {
        if new_tokens == 0 {
            bail!("new_tokens must be ≥ 1");
        }
        self.clear();
        let mut cache = None;
        let prompt_len = prompt_len.max(1);
        let ids = prompt_ids(batch, prompt_len, self.vocab);
        let prompt = Tensor::from_vec(ids, (batch, prompt_len), &self.device)?;
        // Like HF generate with min_new_tokens = max_new_tokens: the prefill yields the first
        // token, then new_tokens − 1 single-token steps. Greedy, never stops early.
        // candle's quantized models slice the last position of a multi-token batch into a
        // non-contiguous tensor, so with batch > 1 the prompt is fed one position at a time (in
        // every arm alike, so the arms do identical work).
        let mut next = if batch == 1 {
            self.next_token(&prompt, 0, &mut cache)?
        } else {
            let mut last = None;
            for i in 0..prompt_len {
                last =
                    Some(self.next_token(&prompt.narrow(1, i, 1)?.contiguous()?, i, &mut cache)?);
            }
            last.expect("prompt_len ≥ 1")
        };
        for pos in prompt_len..prompt_len + new_tokens - 1 {
            next = self.next_token(&next.to_dtype(DType::U32)?, pos, &mut cache)?;
        }
        // Keep the last token alive until here so the work cannot be elided.
        drop(next);
        Ok(batch * new_tokens)
    }

    fn synchronize(&mut self) -> Result<()> {
        self.device.synchronize()?;
        Ok(())
    }

    fn kernel(&self) -> String {
        format!(
            "candle {CANDLE_VERSION} {} {}",
            self.precision, self.model.kernel
        )
    }

    fn notes(&self) -> Vec<String> {
        self.model.notes.clone()
    }

    fn nll(&mut self, ids: &[u32]) -> Result<f64> {
        if ids.len() < 2 {
            bail!("perplexity needs at least 2 tokens, got {}", ids.len());
        }
        if let Some(bad) = ids.iter().find(|&&t| t as usize >= self.vocab) {
            bail!(
                "token id {bad} is outside the model's vocabulary of {}",
                self.vocab
            );
        }
        self.clear();
        let mut cache = None;
        let mut sum = 0.0f64;
        // candle's models return only the last position's logits, so the text is fed one token
        // at a time through the KV cache: the same logits a full-sequence pass would give.
        for (pos, pair) in ids.windows(2).enumerate() {
            let x = Tensor::new(&[[pair[0]]], &self.device)?;
            sum -= log_prob(&self.forward(&x, pos, &mut cache)?, pair[1])?;
        }
        Ok(sum)
    }
}

/// ln p(token) under the first row of `logits` (b, vocab), in F32 whatever the model's dtype.
fn log_prob(logits: &Tensor, token: u32) -> Result<f64> {
    let logp = candle_nn::ops::log_softmax(&logits.to_dtype(DType::F32)?, D::Minus1)?;
    Ok(f64::from(
        logp.get(0)?.get(token as usize)?.to_scalar::<f32>()?,
    ))
}

fn float_model(shape: &ModelShape, vb: VarBuilder) -> Result<Loaded> {
    let dt = vb.dtype();
    let kernel = if vb.device().is_cuda() {
        "cuBLAS GEMM"
    } else {
        "CPU gemm"
    }
    .to_string();
    let model = match shape.family.as_str() {
        "qwen2" => Model::Qwen2(qwen2::ModelForCausalLM::new(&qwen2_config(shape), vb)?),
        "llama" => {
            let cfg = llama_config(shape);
            Model::Llama(llama::Llama::load(vb, &cfg)?, cfg, dt)
        }
        f => bail!("unsupported model family {f:?} (llama, qwen2)"),
    };
    Ok(Loaded {
        model,
        kernel,
        notes: Vec::new(),
    })
}

fn quant_model<R: std::io::Read + std::io::Seek>(
    shape: &ModelShape,
    ct: gguf_file::Content,
    reader: &mut R,
    dev: &Device,
) -> Result<Loaded> {
    let kernel = if dev.is_cuda() {
        "GGUF quantized matmul (candle CUDA kernels)"
    } else {
        "GGUF quantized matmul (CPU)"
    };
    let model = match shape.family.as_str() {
        "qwen2" => Model::QQwen2(quantized_qwen2::ModelWeights::from_gguf(ct, reader, dev)?),
        "llama" => Model::QLlama(quantized_llama::ModelWeights::from_gguf(ct, reader, dev)?),
        f => bail!("unsupported model family {f:?} (llama, qwen2)"),
    };
    Ok(Loaded {
        model,
        kernel: kernel.to_string(),
        notes: Vec::new(),
    })
}

fn quant_model_from_bytes(shape: &ModelShape, bytes: Vec<u8>, dev: &Device) -> Result<Loaded> {
    let mut cur = Cursor::new(bytes);
    let ct = gguf_file::Content::read(&mut cur)?;
    quant_model(shape, ct, &mut cur, dev)
}

pub fn qwen2_config(s: &ModelShape) -> qwen2::Config {
    qwen2::Config {
        vocab_size: s.vocab,
        hidden_size: s.hidden,
        intermediate_size: s.intermediate,
        num_hidden_layers: s.layers,
        num_attention_heads: s.heads,
        num_key_value_heads: s.kv_heads,
        max_position_embeddings: s.max_position,
        sliding_window: s.max_position,
        max_window_layers: s.layers,
        tie_word_embeddings: s.tied_embeddings,
        rope_theta: s.rope_theta,
        rms_norm_eps: s.rms_eps,
        use_sliding_window: false,
        hidden_act: candle_nn::Activation::Silu,
    }
}

pub fn llama_config(s: &ModelShape) -> llama::Config {
    llama::Config {
        hidden_size: s.hidden,
        intermediate_size: s.intermediate,
        vocab_size: s.vocab,
        num_hidden_layers: s.layers,
        num_attention_heads: s.heads,
        num_key_value_heads: s.kv_heads,
        use_flash_attn: false,
        rms_norm_eps: s.rms_eps,
        rope_theta: s.rope_theta as f32,
        bos_token_id: None,
        eos_token_id: None,
        rope_scaling: None,
        max_position_embeddings: s.max_position.min(8192),
        tie_word_embeddings: s.tied_embeddings,
    }
}

/// Hugging Face tensor names and shapes (out, in) of a model.
fn hf_tensor_shapes(s: &ModelShape) -> Vec<(String, Vec<usize>)> {
    let (h, q, kv) = (s.hidden, s.heads * s.head_dim, s.kv_heads * s.head_dim);
    let mut v = vec![("model.embed_tokens.weight".to_string(), vec![s.vocab, h])];
    for l in 0..s.layers {
        let p = format!("model.layers.{l}");
        v.push((format!("{p}.self_attn.q_proj.weight"), vec![q, h]));
        v.push((format!("{p}.self_attn.k_proj.weight"), vec![kv, h]));
        v.push((format!("{p}.self_attn.v_proj.weight"), vec![kv, h]));
        v.push((format!("{p}.self_attn.o_proj.weight"), vec![h, q]));
        if s.family == "qwen2" {
            v.push((format!("{p}.self_attn.q_proj.bias"), vec![q]));
            v.push((format!("{p}.self_attn.k_proj.bias"), vec![kv]));
            v.push((format!("{p}.self_attn.v_proj.bias"), vec![kv]));
        }
        v.push((format!("{p}.mlp.gate_proj.weight"), vec![s.intermediate, h]));
        v.push((format!("{p}.mlp.up_proj.weight"), vec![s.intermediate, h]));
        v.push((format!("{p}.mlp.down_proj.weight"), vec![h, s.intermediate]));
        v.push((format!("{p}.input_layernorm.weight"), vec![h]));
        v.push((format!("{p}.post_attention_layernorm.weight"), vec![h]));
    }
    v.push(("model.norm.weight".to_string(), vec![h]));
    if !s.tied_embeddings {
        v.push(("lm_head.weight".to_string(), vec![s.vocab, h]));
    }
    v
}

/// Seeded random float weights at the model's exact shapes (N(0, 0.02); norms = 1). Generated in
/// F32 on the device (candle's CUDA randn rejects F16) and cast by the VarBuilder.
fn synthetic_float_tensors(
    s: &ModelShape,
    seed: u64,
    dev: &Device,
) -> Result<HashMap<String, Tensor>> {
    // The CPU backend cannot be seeded: draw there from our own seeded generator instead.
    let mut cpu_rng = rand::rngs::StdRng::seed_from_u64(seed);
    if !dev.is_cpu() {
        dev.set_seed(seed)?;
    }
    let mut out = HashMap::new();
    for (name, dims) in hf_tensor_shapes(s) {
        let t = if name.ends_with("norm.weight") {
            Tensor::ones(dims, DType::F32, dev)?
        } else if name.ends_with(".bias") {
            Tensor::zeros(dims, DType::F32, dev)?
        } else if dev.is_cpu() {
            let n: usize = dims.iter().product();
            // Box–Muller, N(0, 0.02).
            let vals: Vec<f32> = (0..n)
                .map(|_| {
                    let u1 = (cpu_rng.next_u32() as f64 + 1.0) / (u32::MAX as f64 + 2.0);
                    let u2 = cpu_rng.next_u32() as f64 / u32::MAX as f64;
                    ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos() * 0.02) as f32
                })
                .collect();
            Tensor::from_vec(vals, dims, dev)?
        } else {
            Tensor::randn(0f32, 0.02, dims, dev)?
        };
        out.insert(name, t);
    }
    Ok(out)
}

/// GGUF name of a Hugging Face tensor name.
fn gguf_name(hf: &str) -> String {
    if hf == "model.embed_tokens.weight" {
        return "token_embd.weight".into();
    }
    if hf == "model.norm.weight" {
        return "output_norm.weight".into();
    }
    if hf == "lm_head.weight" {
        return "output.weight".into();
    }
    let rest = hf.strip_prefix("model.layers.").unwrap_or(hf);
    let (layer, tail) = rest.split_once('.').unwrap_or(("0", rest));
    let tail = tail
        .replace("self_attn.q_proj", "attn_q")
        .replace("self_attn.k_proj", "attn_k")
        .replace("self_attn.v_proj", "attn_v")
        .replace("self_attn.o_proj", "attn_output")
        .replace("mlp.gate_proj", "ffn_gate")
        .replace("mlp.up_proj", "ffn_up")
        .replace("mlp.down_proj", "ffn_down")
        .replace("input_layernorm", "attn_norm")
        .replace("post_attention_layernorm", "ffn_norm");
    format!("blk.{layer}.{tail}")
}

/// The format a 2-D weight gets: the requested one when its input dimension is a multiple of the
/// block size, else Q8_0 (block 32), as llama.cpp falls back per tensor. Returned with a note.
fn format_for(q: GgmlDType, dims: &[usize]) -> GgmlDType {
    let input = *dims.last().unwrap_or(&0);
    if input.is_multiple_of(q.block_size()) {
        q
    } else {
        GgmlDType::Q8_0
    }
}

/// Random but valid quantized blocks: random quant bytes, small fixed scales (so activations stay
/// finite through every layer).
fn random_blocks(q: GgmlDType, elems: usize, rng: &mut impl RngCore) -> Vec<u8> {
    let blocks = elems / q.block_size();
    let bs = q.type_size();
    let mut data = vec![0u8; blocks * bs];
    rng.fill_bytes(&mut data);
    let f16 = |v: f32| half::f16::from_f32(v).to_le_bytes();
    for b in data.chunks_exact_mut(bs) {
        match q {
            GgmlDType::Q4_0 => b[0..2].copy_from_slice(&f16(0.005)),
            GgmlDType::Q8_0 => b[0..2].copy_from_slice(&f16(0.0003)),
            GgmlDType::Q4K | GgmlDType::Q5K => {
                b[0..2].copy_from_slice(&f16(1e-4));
                b[2..4].copy_from_slice(&f16(1e-4));
            }
            GgmlDType::Q6K => {
                let n = b.len();
                b[n - 2..].copy_from_slice(&f16(5e-6));
            }
            _ => {}
        }
    }
    data
}

fn gguf_metadata(s: &ModelShape) -> Vec<(String, gguf_file::Value)> {
    use gguf_file::Value as V;
    let a = s.family.as_str();
    vec![
        ("general.architecture".into(), V::String(a.into())),
        (format!("{a}.attention.head_count"), V::U32(s.heads as u32)),
        (
            format!("{a}.attention.head_count_kv"),
            V::U32(s.kv_heads as u32),
        ),
        (format!("{a}.embedding_length"), V::U32(s.hidden as u32)),
        (
            format!("{a}.context_length"),
            V::U32(s.max_position.min(8192) as u32),
        ),
        (format!("{a}.block_count"), V::U32(s.layers as u32)),
        (
            format!("{a}.feed_forward_length"),
            V::U32(s.intermediate as u32),
        ),
        (
            format!("{a}.rope.dimension_count"),
            V::U32(s.head_dim as u32),
        ),
        (
            format!("{a}.attention.layer_norm_rms_epsilon"),
            V::F32(s.rms_eps as f32),
        ),
        (format!("{a}.rope.freq_base"), V::F32(s.rope_theta as f32)),
    ]
}

fn write_gguf(s: &ModelShape, tensors: &[(String, QTensor)]) -> Result<Vec<u8>> {
    let md = gguf_metadata(s);
    let md_refs: Vec<(&str, &gguf_file::Value)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let t_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut cur = Cursor::new(Vec::new());
    gguf_file::write(&mut cur, &md_refs, &t_refs)?;
    Ok(cur.into_inner())
}

fn fallback_note(fallbacks: &[String], q: GgmlDType) -> Vec<String> {
    if fallbacks.is_empty() {
        return Vec::new();
    }
    vec![format!(
        "{} tensor(s) kept at Q8_0 instead of {q:?} (input dimension not a multiple of {}), e.g. {}",
        fallbacks.len(),
        q.block_size(),
        fallbacks.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
    )]
}

/// A synthetic quantized model as an in-memory GGUF file, generated in parallel.
fn synthetic_gguf(s: &ModelShape, q: GgmlDType, seed: u64) -> Result<(Vec<u8>, Vec<String>)> {
    let specs = hf_tensor_shapes(s);
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .min(16);
    let chunk = specs.len().div_ceil(threads);
    let results: Vec<Result<Vec<(String, QTensor, bool)>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = specs
            .chunks(chunk.max(1))
            .enumerate()
            .map(|(ci, part)| {
                scope.spawn(move || -> Result<Vec<(String, QTensor, bool)>> {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(
                        seed ^ (ci as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                    );
                    let mut out = Vec::new();
                    for (name, dims) in part {
                        let gname = gguf_name(name);
                        let elems: usize = dims.iter().product();
                        let (qt, fell_back) = if dims.len() == 1 {
                            let vals: Vec<f32> = if name.ends_with(".bias") {
                                vec![0.0; elems]
                            } else {
                                vec![1.0; elems]
                            };
                            let t = Tensor::from_vec(vals, dims.clone(), &Device::Cpu)?;
                            (QTensor::quantize(&t, GgmlDType::F32)?, false)
                        } else {
                            let f = format_for(q, dims);
                            let raw = random_blocks(f, elems, &mut rng);
                            (
                                qtensor_from_ggml(f, &raw, dims.clone(), &Device::Cpu)?,
                                f != q,
                            )
                        };
                        out.push((gname, qt, fell_back));
                    }
                    Ok(out)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("generator thread panicked"))
            .collect()
    });
    let mut tensors = Vec::new();
    let mut fallbacks = Vec::new();
    for r in results {
        for (name, t, fb) in r? {
            if fb {
                fallbacks.push(name.clone());
            }
            tensors.push((name, t));
        }
    }
    let notes = fallback_note(&fallbacks, q);
    Ok((write_gguf(s, &tensors)?, notes))
}

fn safetensor_files(dir: &std::path::Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    files.sort();
    if files.is_empty() {
        bail!("{}: no *.safetensors files", dir.display());
    }
    Ok(files)
}

/// llama.cpp's q/k row permutation for Llama (its GGUF rope is interleaved; HF's is not).
fn permute_qk(t: &Tensor, heads: usize) -> Result<Tensor> {
    let (out, inp) = t.dims2()?;
    Ok(t.reshape((heads, 2, out / heads / 2, inp))?
        .transpose(1, 2)?
        .reshape((out, inp))?)
}

/// Quantize a Hugging Face checkpoint in memory (parallel per tensor).
fn quantize_hf_dir(
    dir: &std::path::Path,
    s: &ModelShape,
    q: GgmlDType,
) -> Result<(Vec<u8>, Vec<String>)> {
    let mut all = Vec::new();
    for f in safetensor_files(dir)? {
        let ts = candle_core::safetensors::load(&f, &Device::Cpu)?;
        all.extend(ts);
    }
    let (gguf, mut notes) = quantize_hf_tensors(all, s, q)?;
    notes.push(format!("quantized in memory from {}", dir.display()));
    Ok((gguf, notes))
}

/// Quantize Hugging Face-named float tensors (on the CPU) into an in-memory GGUF file.
fn quantize_hf_tensors(
    all: impl IntoIterator<Item = (String, Tensor)>,
    s: &ModelShape,
    q: GgmlDType,
) -> Result<(Vec<u8>, Vec<String>)> {
    let mut work = Vec::new();
    for (name, t) in all {
        let mut t = t.to_device(&Device::Cpu)?.to_dtype(DType::F32)?;
        if s.family == "llama" && name.ends_with("self_attn.q_proj.weight") {
            t = permute_qk(&t, s.heads)?;
        } else if s.family == "llama" && name.ends_with("self_attn.k_proj.weight") {
            t = permute_qk(&t, s.kv_heads)?;
        }
        work.push((name, t));
    }
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .min(16);
    let chunk = work.len().div_ceil(threads).max(1);
    let results: Vec<Result<Vec<(String, QTensor, bool)>>> = std::thread::scope(|scope| {
        let hs: Vec<_> = work
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || -> Result<Vec<(String, QTensor, bool)>> {
                    part.iter()
                        .map(|(name, t)| {
                            let dims = t.dims().to_vec();
                            let f = if dims.len() == 1 {
                                GgmlDType::F32
                            } else {
                                format_for(q, &dims)
                            };
                            Ok((
                                gguf_name(name),
                                QTensor::quantize(t, f)?,
                                dims.len() > 1 && f != q,
                            ))
                        })
                        .collect()
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("quantizer thread panicked"))
            .collect()
    });
    let mut tensors = Vec::new();
    let mut fallbacks = Vec::new();
    for r in results {
        for (n, t, fb) in r? {
            if fb {
                fallbacks.push(n.clone());
            }
            tensors.push((n, t));
        }
    }
    let notes = fallback_note(&fallbacks, q);
    Ok((write_gguf(s, &tensors)?, notes))
}

/// Read a shape from a Hugging Face config.json.
pub fn shape_from_hf_config(dir: &std::path::Path) -> Result<ModelShape> {
    let path = dir.join("config.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
    let get = |k: &str| -> Result<usize> {
        v.get(k)
            .and_then(|x| x.as_u64())
            .map(|x| x as usize)
            .ok_or_else(|| anyhow!("{}: missing integer `{k}`", path.display()))
    };
    let model_type = v
        .get("model_type")
        .and_then(|x| x.as_str())
        .unwrap_or("llama");
    let family = match model_type {
        "qwen2" => "qwen2",
        "llama" | "mistral" => "llama",
        other => bail!(
            "{}: model_type {other:?} is not supported (llama, mistral, qwen2)",
            path.display()
        ),
    };
    let heads = get("num_attention_heads")?;
    let hidden = get("hidden_size")?;
    let mut s = ModelShape {
        name: dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        family: family.into(),
        params_b: 0.0,
        layers: get("num_hidden_layers")?,
        hidden,
        heads,
        kv_heads: get("num_key_value_heads").unwrap_or(heads),
        head_dim: v
            .get("head_dim")
            .and_then(|x| x.as_u64())
            .map(|x| x as usize)
            .unwrap_or(hidden / heads),
        intermediate: get("intermediate_size")?,
        vocab: get("vocab_size")?,
        tied_embeddings: v
            .get("tie_word_embeddings")
            .and_then(|x| x.as_bool())
            .unwrap_or(false),
        rope_theta: v
            .get("rope_theta")
            .and_then(|x| x.as_f64())
            .unwrap_or(10000.0),
        rms_eps: v
            .get("rms_norm_eps")
            .and_then(|x| x.as_f64())
            .unwrap_or(1e-6),
        max_position: get("max_position_embeddings").unwrap_or(4096),
        source: path.display().to_string(),
    };
    s.params_b = s.param_count() as f64 / 1e9;
    Ok(s)
}

fn dominant_type(ct: &gguf_file::Content) -> Option<GgmlDType> {
    let mut counts: Vec<(GgmlDType, u64)> = Vec::new();
    for (name, info) in &ct.tensor_infos {
        if !name.starts_with("blk.") || !name.ends_with(".weight") || info.shape.rank() != 2 {
            continue;
        }
        let n = info.shape.elem_count() as u64;
        match counts.iter_mut().find(|(d, _)| *d == info.ggml_dtype) {
            Some(c) => c.1 += n,
            None => counts.push((info.ggml_dtype, n)),
        }
    }
    counts.into_iter().max_by_key(|c| c.1).map(|c| c.0)
}

/// Read a shape from a GGUF file's metadata.
pub fn shape_from_gguf(path: &std::path::Path) -> Result<ModelShape> {
    let mut f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let ct = gguf_file::Content::read(&mut f)
        .map_err(|e| anyhow!("{}: not a GGUF file: {e}", path.display()))?;
    let arch = ct
        .metadata
        .get("general.architecture")
        .and_then(|v| v.to_string().ok())
        .cloned()
        .ok_or_else(|| anyhow!("{}: no general.architecture", path.display()))?;
    let family = match arch.as_str() {
        "qwen2" => "qwen2",
        "llama" => "llama",
        other => bail!(
            "{}: GGUF architecture {other:?} is not supported (llama, qwen2)",
            path.display()
        ),
    };
    let u = |k: &str| -> Result<usize> {
        ct.metadata
            .get(&format!("{arch}.{k}"))
            .and_then(|v| v.to_u32().ok())
            .map(|x| x as usize)
            .ok_or_else(|| anyhow!("{}: missing {arch}.{k}", path.display()))
    };
    let vocab = ct
        .tensor_infos
        .get("token_embd.weight")
        .map(|i| i.shape.dims()[0])
        .ok_or_else(|| anyhow!("{}: no token_embd.weight", path.display()))?;
    let heads = u("attention.head_count")?;
    let hidden = u("embedding_length")?;
    let mut s = ModelShape {
        name: path
            .file_stem()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        family: family.into(),
        params_b: 0.0,
        layers: u("block_count")?,
        hidden,
        heads,
        kv_heads: u("attention.head_count_kv").unwrap_or(heads),
        head_dim: hidden / heads,
        intermediate: u("feed_forward_length").unwrap_or(hidden * 4),
        vocab,
        tied_embeddings: !ct.tensor_infos.contains_key("output.weight"),
        rope_theta: ct
            .metadata
            .get(&format!("{arch}.rope.freq_base"))
            .and_then(|v| v.to_f32().ok())
            .unwrap_or(10000.0) as f64,
        rms_eps: 1e-6,
        max_position: u("context_length").unwrap_or(4096),
        source: path.display().to_string(),
    };
    s.params_b = s.param_count() as f64 / 1e9;
    Ok(s)
}

/// Write a synthetic model as a GGUF file (used by tests and by `--write-gguf`).
pub fn write_synthetic_gguf(
    shape: &ModelShape,
    q: GgmlDType,
    seed: u64,
    path: &std::path::Path,
) -> Result<()> {
    let (bytes, _) = synthetic_gguf(shape, q, seed)?;
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

/// Write a synthetic model as a Hugging Face directory (config.json + model.safetensors).
pub fn write_synthetic_hf_dir(shape: &ModelShape, seed: u64, dir: &std::path::Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let tensors = synthetic_float_tensors(shape, seed, &Device::Cpu)?;
    candle_core::safetensors::save(&tensors, dir.join("model.safetensors"))?;
    let config = serde_json::json!({
        "model_type": shape.family,
        "hidden_size": shape.hidden,
        "intermediate_size": shape.intermediate,
        "num_hidden_layers": shape.layers,
        "num_attention_heads": shape.heads,
        "num_key_value_heads": shape.kv_heads,
        "vocab_size": shape.vocab,
        "max_position_embeddings": shape.max_position,
        "rope_theta": shape.rope_theta,
        "rms_norm_eps": shape.rms_eps,
        "tie_word_embeddings": shape.tied_embeddings,
    });
    std::fs::write(
        dir.join("config.json"),
        serde_json::to_string_pretty(&config)?,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny model with real structure (GQA, biases for qwen2, block-size-compatible widths).
    pub fn tiny(family: &str) -> ModelShape {
        let mut s = ModelShape {
            name: format!("tiny-{family}"),
            family: family.into(),
            params_b: 0.0,
            layers: 2,
            hidden: 256,
            heads: 4,
            kv_heads: 2,
            head_dim: 64,
            intermediate: 512,
            vocab: 512,
            tied_embeddings: family == "qwen2",
            rope_theta: 10000.0,
            rms_eps: 1e-6,
            max_position: 512,
            source: "test".into(),
        };
        s.params_b = s.param_count() as f64 / 1e9;
        s
    }

    #[test]
    fn every_precision_decodes_exactly_the_requested_tokens_on_cpu() {
        for family in ["qwen2", "llama"] {
            let mut f = CandleFactory::new(
                WeightSource::Synthetic {
                    shape: tiny(family),
                    seed: 7,
                },
                Device::Cpu,
            )
            .unwrap();
            for p in ["F32", "BF16", "F16", "Q8_0", "Q4_0", "Q4_K"] {
                let mut d = f.load(p).unwrap_or_else(|e| panic!("{family} {p}: {e:#}"));
                assert_eq!(d.generate(2, 4, 5).unwrap(), 10, "{family} {p}");
                // A second generation starts from a clean cache.
                assert_eq!(d.generate(1, 4, 3).unwrap(), 3);
                d.synchronize().unwrap();
                assert!(d.kernel().contains(p));
            }
        }
    }

    #[test]
    fn odd_widths_fall_back_to_q8_0_and_say_so() {
        let mut s = tiny("qwen2");
        s.hidden = 96; // 96 % 256 ≠ 0, 96 % 32 = 0
        s.heads = 2;
        s.kv_heads = 1;
        s.head_dim = 48;
        s.intermediate = 256;
        let mut f =
            CandleFactory::new(WeightSource::Synthetic { shape: s, seed: 1 }, Device::Cpu).unwrap();
        let d = f.load("Q4_K").unwrap();
        assert!(
            d.notes().iter().any(|n| n.contains("Q8_0")),
            "{:?}",
            d.notes()
        );
    }

    #[test]
    fn hf_dir_and_gguf_file_sources_load() {
        let dir = std::env::temp_dir().join(format!("qe-hf-{}", std::process::id()));
        let shape = tiny("llama");
        write_synthetic_hf_dir(&shape, 3, &dir).unwrap();
        let mut f = CandleFactory::new(WeightSource::HfDir(dir.clone()), Device::Cpu).unwrap();
        assert_eq!(f.shape().layers, 2);
        assert_eq!(f.load("F32").unwrap().generate(1, 3, 2).unwrap(), 2);
        assert_eq!(f.load("Q8_0").unwrap().generate(1, 3, 2).unwrap(), 2);

        let gguf = dir.join("tiny.gguf");
        write_synthetic_gguf(&tiny("qwen2"), GgmlDType::Q4_0, 5, &gguf).unwrap();
        let mut g = CandleFactory::new(WeightSource::Gguf(gguf), Device::Cpu).unwrap();
        assert_eq!(g.shape().family, "qwen2");
        assert_eq!(g.load("Q4_0").unwrap().generate(1, 3, 2).unwrap(), 2);
        let wrong = g.load("Q8_0").err().unwrap().to_string();
        assert!(wrong.contains("one quantization"), "{wrong}");
        assert!(g
            .load("F16")
            .err()
            .unwrap()
            .to_string()
            .contains("float weights"));
        std::fs::remove_dir_all(&dir).ok();
    }

    /// Reference NLL without the KV cache: for each position, prefill the whole prefix at once.
    fn nll_by_prefill(d: &mut CandleDecoder, ids: &[u32]) -> f64 {
        let mut sum = 0.0;
        for t in 1..ids.len() {
            d.clear();
            let x = Tensor::new(&ids[..t], &d.device)
                .unwrap()
                .unsqueeze(0)
                .unwrap();
            let logits = d.forward(&x, 0, &mut None).unwrap();
            sum -= log_prob(&logits, ids[t]).unwrap();
        }
        sum
    }

    #[test]
    fn perplexity_through_the_kv_cache_equals_prefilling_every_prefix() {
        for family in ["qwen2", "llama"] {
            let shape = tiny(family);
            let mut f =
                CandleFactory::new(WeightSource::Synthetic { shape, seed: 11 }, Device::Cpu)
                    .unwrap();
            let (ids, how) = f.tokenize("Four score and seven years ago").unwrap();
            assert!(how.contains("byte ids"), "{how}");
            assert_eq!(ids.len(), 30);
            let mut d = f.load_candle("F32").unwrap();
            let cached = d.nll(&ids).unwrap();
            let reference = nll_by_prefill(&mut d, &ids);
            assert!(cached.is_finite() && cached > 0.0, "{family}: {cached}");
            assert!(
                (cached - reference).abs() / reference < 1e-4,
                "{family}: cached {cached} vs prefill {reference}"
            );
            // A second score starts from a clean cache.
            assert_eq!(d.nll(&ids).unwrap(), cached, "{family}");
            // Quantizing the same weights moves the NLL, Q8_0 less than Q4_0; independent random
            // blocks (the energy runs' default) are a different model altogether.
            f.quantize_synthetic_floats = true;
            let mut q8 = f.load_candle("Q8_0").unwrap();
            assert!(q8
                .model
                .notes
                .iter()
                .any(|n| n.contains("float arms' seeded")));
            let d8 = (q8.nll(&ids).unwrap() - cached).abs();
            let d4 = (f.load_candle("Q4_0").unwrap().nll(&ids).unwrap() - cached).abs();
            assert!(
                d8 > 0.0 && d8 < d4,
                "{family}: |ΔNLL| Q8_0 {d8} vs Q4_0 {d4}"
            );
            f.quantize_synthetic_floats = false;
            let mut ind = f.load_candle("Q8_0").unwrap();
            assert!(ind
                .model
                .notes
                .iter()
                .all(|n| !n.contains("float arms' seeded")));
            let di = (ind.nll(&ids).unwrap() - cached).abs();
            assert!(di > d8, "{family}: independent {di} vs same-weights {d8}");
        }
    }

    #[test]
    fn hf_to_gguf_conversion_keeps_the_model() {
        for family in ["llama", "qwen2"] {
            let shape = tiny(family);
            let mut tensors = synthetic_float_tensors(&shape, 5, &Device::Cpu).unwrap();
            // Peaky attention, so a wrong q/k row order (llama's rope pairing) would show.
            for (n, t) in tensors.iter_mut() {
                if n.ends_with("q_proj.weight") || n.ends_with("k_proj.weight") {
                    *t = (t.clone() * 30.0).unwrap();
                }
            }
            let vb = VarBuilder::from_tensors(tensors.clone(), DType::F32, &Device::Cpu);
            let float = float_model(&shape, vb).unwrap();
            // F32 "quantization": the GGUF path with no rounding at all.
            let (gguf, _) = quantize_hf_tensors(tensors, &shape, GgmlDType::F32).unwrap();
            let quant = quant_model_from_bytes(&shape, gguf, &Device::Cpu).unwrap();
            let decoder = |model| CandleDecoder {
                model,
                device: Device::Cpu,
                vocab: shape.vocab,
                precision: "F32".into(),
            };
            let ids: Vec<u32> = (0..24u32).map(|i| i * 37 % shape.vocab as u32).collect();
            let a = decoder(float).nll(&ids).unwrap();
            let b = decoder(quant).nll(&ids).unwrap();
            assert!((a - b).abs() / a < 1e-5, "{family}: float {a} vs GGUF {b}");
        }
    }

    #[test]
    fn perplexity_refuses_what_it_cannot_score() {
        let mut f = CandleFactory::new(
            WeightSource::Synthetic {
                shape: tiny("qwen2"),
                seed: 1,
            },
            Device::Cpu,
        )
        .unwrap();
        let mut d = f.load("F32").unwrap();
        assert!(d.nll(&[5]).unwrap_err().to_string().contains("at least 2"));
        let e = d.nll(&[1, 512]).unwrap_err().to_string();
        assert!(e.contains("outside the model's vocabulary"), "{e}");
    }

    #[test]
    fn real_sources_tokenize_with_their_tokenizer_json() {
        use tokenizers::models::wordlevel::WordLevel;
        let dir = std::env::temp_dir().join(format!("qe-tok-{}", std::process::id()));
        let shape = tiny("llama");
        write_synthetic_hf_dir(&shape, 3, &dir).unwrap();
        let f = CandleFactory::new(WeightSource::HfDir(dir.clone()), Device::Cpu).unwrap();
        // Weights without a tokenizer.json: a clear refusal, not byte ids.
        let e = f.tokenize("we the people").unwrap_err().to_string();
        assert!(e.contains("tokenizer.json"), "{e}");
        let vocab: std::collections::HashMap<String, u32> =
            [("[UNK]", 0), ("we", 7), ("the", 8), ("people", 9)]
                .into_iter()
                .map(|(w, i)| (w.to_string(), i))
                .collect();
        let model = WordLevel::builder()
            .vocab(vocab.into_iter().collect())
            .unk_token("[UNK]".into())
            .build()
            .unwrap();
        let mut tok = tokenizers::Tokenizer::new(model);
        tok.with_pre_tokenizer(Some(tokenizers::pre_tokenizers::whitespace::Whitespace {}));
        tok.save(dir.join("tokenizer.json"), false).unwrap();
        let (ids, how) = f.tokenize("we the people of").unwrap();
        assert_eq!(ids, vec![7, 8, 9, 0]);
        assert!(how.starts_with("tokenizer.json"), "{how}");
        let mut f = f;
        assert!(f.load("F32").unwrap().nll(&ids).unwrap().is_finite());

        let gguf = dir.join("sub").join("tiny.gguf");
        std::fs::create_dir_all(gguf.parent().unwrap()).unwrap();
        write_synthetic_gguf(&shape, GgmlDType::Q8_0, 5, &gguf).unwrap();
        let g = CandleFactory::new(WeightSource::Gguf(gguf), Device::Cpu).unwrap();
        let e = g.tokenize("we").unwrap_err().to_string();
        assert!(e.contains("beside the GGUF file"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn required_bytes_by_hand() {
        let s = analysis::find_shape("qwen2-0.5b").unwrap();
        // F16, batch 1, 272 tokens: 0.494e9·2 + KV 2·24·2·64·2 B·272 + logits + 1.5e9
        let b = required_bytes(s, Precision::Float(DType::F16), 1, 272) as f64;
        let want = s.param_count() as f64 * 2.0 + 12288.0 * 272.0 + 151936.0 * 16.0 + 1.5e9;
        assert!((b - want).abs() < 2.0, "{b} vs {want}");
        assert!(bytes_per_param(Precision::Quant(GgmlDType::Q4_0)) == 18.0 / 32.0);
    }
}
