//! The loaded candle model and its eager decode loop (candle_transformers' own KV caches).

use super::*;

pub(crate) enum Model {
    Qwen2(qwen2::ModelForCausalLM),
    Llama(llama::Llama, llama::Config, DType),
    QQwen2(quantized_qwen2::ModelWeights),
    QLlama(quantized_llama::ModelWeights),
}

pub(crate) struct Loaded {
    pub(crate) model: Model,
    pub(crate) kernel: String,
    pub(crate) notes: Vec<String>,
}

/// A loaded candle model with its tokenizer, decoding on the GPU.
pub struct CandleDecoder {
    pub(crate) model: Loaded,
    pub(crate) device: Device,
    pub(crate) vocab: usize,
    pub(crate) precision: Precision,
}

impl CandleDecoder {
    pub(crate) fn forward(
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

    pub(crate) fn clear(&mut self) {
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

impl CandleDecoder {
    /// [`Decoder::generate`] in the engine's own error.
    pub fn decode(&mut self, batch: usize, prompt_len: usize, new_tokens: usize) -> Result<usize> {
        if new_tokens == 0 {
            return Err(DecodeError::NoNewTokens.into());
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

    /// [`Decoder::synchronize`] in the engine's own error.
    pub fn sync(&mut self) -> Result<()> {
        self.device.synchronize()?;
        Ok(())
    }

    /// [`Decoder::nll`] in the engine's own error.
    pub fn score(&mut self, ids: &[u32]) -> Result<f64> {
        if ids.len() < 2 {
            return Err(DecodeError::TooFewTokens(ids.len()).into());
        }
        if let Some(&id) = ids.iter().find(|&&t| t as usize >= self.vocab) {
            return Err(DecodeError::TokenOutOfVocabulary {
                id,
                vocab: self.vocab,
            }
            .into());
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

impl Decoder for CandleDecoder {
    fn generate(
        &mut self,
        batch: usize,
        prompt_len: usize,
        new_tokens: usize,
    ) -> Result<usize, DecodeError> {
        Ok(self.decode(batch, prompt_len, new_tokens)?)
    }

    fn synchronize(&mut self) -> Result<(), DecodeError> {
        Ok(self.sync()?)
    }

    fn kernel(&self) -> String {
        format!(
            "candle {CANDLE_VERSION} {} {}",
            engine_name(self.precision),
            self.model.kernel
        )
    }

    fn notes(&self) -> Vec<String> {
        self.model.notes.clone()
    }

    fn nll(&mut self, ids: &[u32]) -> Result<f64, DecodeError> {
        Ok(self.score(ids)?)
    }
}

/// ln p(token) under the first row of `logits` (b, vocab), in F32 whatever the model's dtype.
pub(crate) fn log_prob(logits: &Tensor, token: u32) -> Result<f64> {
    let logp = candle_nn::ops::log_softmax(&logits.to_dtype(DType::F32)?, D::Minus1)?;
    Ok(f64::from(
        logp.get(0)?.get(token as usize)?.to_scalar::<f32>()?,
    ))
}

pub(crate) fn float_model(shape: &ModelShape, vb: VarBuilder) -> Result<Loaded> {
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
        f => return Err(crate::Error::UnsupportedFamily(f.to_string())),
    };
    Ok(Loaded {
        model,
        kernel,
        notes: Vec::new(),
    })
}

pub(crate) fn quant_model<R: std::io::Read + std::io::Seek>(
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
        f => return Err(crate::Error::UnsupportedFamily(f.to_string())),
    };
    Ok(Loaded {
        model,
        kernel: kernel.to_string(),
        notes: Vec::new(),
    })
}

#[cfg(test)]
pub(crate) fn quant_model_from_bytes(
    shape: &ModelShape,
    bytes: Vec<u8>,
    dev: &Device,
) -> Result<Loaded> {
    let mut cur = Cursor::new(bytes);
    let ct = gguf_file::Content::read(&mut cur)?;
    quant_model(shape, ct, &mut cur, dev)
}

/// The candle Qwen2 configuration for a model shape.
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

/// The candle Llama configuration for a model shape.
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
        max_position_embeddings: s.max_position.min(crate::eager::SYNTHETIC_MAX_POSITIONS),
        tie_word_embeddings: s.tied_embeddings,
    }
}
