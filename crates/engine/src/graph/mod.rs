//! The graph engine (`--engine graph`): a static-KV-cache forward ([`static_model`]) whose
//! decode step reads and writes only device tensors, captured once into a CUDA graph and
//! replayed for every token. The eager engine ([`crate::eager`]) runs candle's own models op by
//! op and is launch-bound at batch 1; this one launches one graph per token.

pub mod static_model;
#[cfg(test)]
mod tests;

use crate::eager::{engine_name, log_prob, prompt_ids, CandleFactory, CANDLE_VERSION};
use crate::ops::kv::AddU32;
use candle_core::{DType, Device, Tensor};
use meter::decoder::{DecodeError, Decoder, DecoderFactory};
use report::Precision;
use static_model::{argmax, DecodeState, StaticModel};

/// The graph engine's results fail with the engines' [`crate::Error`].
type Result<T, E = crate::Error> = std::result::Result<T, E>;

/// Eager steps before the capture (fill candle's kernel and parameter caches; a cache miss
/// during capture is an error).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
const WARM_STEPS: usize = 2;

/// Most positions of one prefill forward: a longer prompt is fed in chunks of this many.
pub const PREFILL_CHUNK: usize = 2048;

/// Whether the CUDA step runs op by op instead of as a captured graph (`QE_GRAPH_NO_CAPTURE=1`;
/// off), to time the static forward without the graph.
pub static NO_CAPTURE: crate::switch::Switch =
    crate::switch::Switch::new("QE_GRAPH_NO_CAPTURE", false);

/// Loads [`GraphDecoder`]s from the same weights [`CandleFactory`] gives the eager engine.
pub struct GraphFactory {
    /// The eager engine's factory, whose weights the graph engine reuses.
    pub inner: CandleFactory,
}

impl GraphFactory {
    /// Load one arm's weights into a static model, ready to decode.
    pub fn load_graph(&mut self, precision: Precision) -> Result<GraphDecoder> {
        let t0 = std::time::Instant::now();
        let shape = self.inner.shape().clone();
        let dev = self.inner.device.clone();
        #[cfg(feature = "cuda")]
        if dev.is_cuda() {
            // One stream only: cudarc's per-buffer event tracking is not needed, and leaving it
            // off keeps event records out of the captured graph. Affects buffers made from now.
            // SAFETY: everything of this engine runs on candle's single stream of `dev`.
            unsafe { dev.as_cuda_device()?.disable_event_tracking() };
        }
        let weights = self.inner.arm_weights(precision)?;
        let (model, notes) = StaticModel::load(&shape, weights, &dev)?;
        let base = match (model.kind, dev.is_cuda()) {
            (static_model::Kind::FloatQwen2 | static_model::Kind::FloatLlama, true)
                if crate::ops::GEMV.on()
                    && matches!(precision, Precision::Fp16 | Precision::Bf16) =>
            {
                "custom GEMV at one row (QE_GEMV=1), cuBLAS GEMM otherwise"
            }
            (static_model::Kind::FloatQwen2 | static_model::Kind::FloatLlama, true) => {
                "cuBLAS GEMM"
            }
            (_, true) if model.q8_in_use() => {
                "GGUF quantized matmul (candle's MMVQ CUDA kernels, fed Q8_1 activations by the \
                 fused norm, attention and SwiGLU up to batch 8)"
            }
            (_, true) => "GGUF quantized matmul (candle CUDA kernels)",
            (static_model::Kind::FloatQwen2 | static_model::Kind::FloatLlama, false) => "CPU gemm",
            (_, false) => "GGUF quantized matmul (CPU)",
        };
        let mut base_kernel = base.to_string();
        if dev.is_cuda() {
            for knob in [
                &crate::ops::ATTN_SPLIT_FROM,
                &crate::ops::attention::ATTN_TARGET_BLOCKS,
                &crate::ops::attention::ATTN_MIN_POSITIONS,
                &crate::ops::attention::ATTN_PASSES,
                &crate::ops::attention::ATTN_BLOCKS_PER_SM,
                &crate::ops::attention::ATTN_PREFETCH,
                &crate::ops::attention::ATTN_HOIST,
                &crate::ops::attention::ATTN_MMA,
                &static_model::PREFILL_DEQUANT_ROWS,
            ] {
                if let Some(k) = knob.label() {
                    base_kernel.push_str(&format!("; {k}"));
                }
            }
            if crate::ops::ATTN_ONE_BLOCK.on() {
                base_kernel
                    .push_str("; decode attention one block per query head (QE_ATTN_ONE_BLOCK=1)");
            }
            if let Some(k) = crate::ops::NORM_THREADS.label() {
                base_kernel.push_str(&format!("; add+norm threads {k} (a floor)"));
            }
        }
        tracing::info!(
            %precision,
            seconds = t0.elapsed().as_secs_f64(),
            "static-cache model loaded"
        );
        Ok(GraphDecoder {
            capture: dev.is_cuda() && !NO_CAPTURE.on(),
            model,
            device: dev,
            precision,
            base_kernel,
            notes,
            state: None,
            #[cfg(feature = "cuda")]
            cuda: None,
            prefill_chunk: PREFILL_CHUNK,
            prefilled: 0,
        })
    }
}

impl GraphFactory {
    /// [`DecoderFactory::load`] in the engine's own error.
    pub fn load_decoder(&mut self, precision: Precision) -> Result<Box<dyn Decoder>> {
        let name = crate::eager::source_name(&self.inner.source);
        Ok(Box::new(crate::eager::guard_loader(&name, || {
            self.load_graph(precision)
        })?))
    }

    /// [`DecoderFactory::tokenize`] in the engine's own error.
    pub fn tokens_of(&self, text: &str) -> Result<(Vec<u32>, String)> {
        self.inner.tokens_of(text)
    }
}

impl DecoderFactory for GraphFactory {
    fn load(&mut self, precision: Precision) -> Result<Box<dyn Decoder>, DecodeError> {
        Ok(self.load_decoder(precision)?)
    }
    fn required_bytes(&self, precision: Precision, batch: usize, context: usize) -> u64 {
        self.inner.required_bytes(precision, batch, context)
    }
    fn tokenize(&self, text: &str) -> Result<(Vec<u32>, String), DecodeError> {
        Ok(self.tokens_of(text)?)
    }
    fn decode_weight_bytes(&self, p: Precision) -> Option<meter::roofline::DecodeWeightBytes> {
        self.inner.decode_weight_bytes(p)
    }
}

/// CUDA-only state: the htod parameter cache held for the decoder's life, and the captured step.
#[cfg(feature = "cuda")]
struct CudaGraphState {
    /// candle's `CudaGraphHtodCacheGuard` (not nameable from outside candle).
    _htod_cache: Box<dyn std::any::Any>,
    graph: Option<candle_core::cuda_backend::cudarc::driver::CudaGraph>,
    /// Eager steps run on the current state (the capture waits for WARM_STEPS).
    warm: usize,
}

/// The graph engine's decoder: a static model, its decode state, and the captured step.
pub struct GraphDecoder {
    /// The static-cache forward.
    pub model: StaticModel,
    device: Device,
    precision: Precision,
    base_kernel: String,
    notes: Vec<String>,
    /// The device-side decode state (none before the first generation).
    pub state: Option<DecodeState>,
    /// Capture the step into a CUDA graph (CUDA only; off with [`NO_CAPTURE`]).
    capture: bool,
    #[cfg(feature = "cuda")]
    cuda: Option<CudaGraphState>,
    /// Most positions of one prefill forward ([`PREFILL_CHUNK`]; tests set 1 to feed the prompt
    /// one position at a time through the step's forward).
    pub prefill_chunk: usize,
    /// Prompt tokens the last prefill put in the cache (0: none since the state was made).
    prefilled: usize,
}

impl GraphDecoder {
    /// Make sure a state for (batch, ctx) exists (a new one drops any captured graph).
    pub fn ensure_state(&mut self, batch: usize, ctx: usize) -> Result<()> {
        if self
            .state
            .as_ref()
            .is_some_and(|s| s.batch == batch && s.ctx == ctx)
        {
            return Ok(());
        }
        #[cfg(feature = "cuda")]
        {
            // The graph refers to the old state's buffers: drop it first.
            if let Some(c) = self.cuda.as_mut() {
                c.graph = None;
                c.warm = 0;
            }
        }
        self.state = None;
        self.prefilled = 0;
        self.state = Some(self.model.new_state(batch, ctx)?);
        Ok(())
    }

    fn st(&self) -> Result<&DecodeState> {
        self.state.as_ref().ok_or(crate::Error::NoDecodeState)
    }

    /// Set the position counter (host → device; not part of a step).
    pub fn set_pos(&self, pos: u32) -> Result<()> {
        let st = self.st()?;
        st.pos
            .slice_set(&Tensor::new(&[pos], &self.device)?, 0, 0)?;
        Ok(())
    }

    /// Set the token buffer (host → device; not part of a step).
    pub fn set_tokens(&self, ids: &[u32]) -> Result<()> {
        let st = self.st()?;
        let t = Tensor::from_vec(ids.to_vec(), (st.batch, 1), &self.device)?;
        st.tok.slice_set(&t, 0, 0)?;
        Ok(())
    }

    /// The decode step, op by op: logits of `tok` at `pos`, K/V written at `pos`, argmax into
    /// `tok`, `pos += 1`. Reads and writes device tensors only; every shape is the state's.
    /// Returns the step's logits (dropped inside a capture).
    fn step_ops(model: &StaticModel, st: &DecodeState) -> Result<Tensor> {
        let logits = model.forward(&st.tok, st)?;
        let next = argmax(&logits)?;
        st.tok.slice_set(&next, 0, 0)?;
        st.pos.inplace_op1(&AddU32(1))?;
        Ok(logits)
    }

    /// The decode step op by op, returning its logits (tests compare them with the eager
    /// engine's; never captured).
    pub fn step_eager(&mut self) -> Result<Tensor> {
        Self::step_ops(&self.model, self.st()?)
    }

    /// Logits of one step (no argmax, no write to `tok`), `pos += 1`. For scoring.
    pub fn step_logits(&mut self) -> Result<Tensor> {
        let st = self.st()?;
        let logits = self.model.forward(&st.tok, st)?;
        st.pos.inplace_op1(&AddU32(1))?;
        Ok(logits)
    }

    /// One decode step: replays the captured graph once there is one (CUDA), else runs the step
    /// op by op (warm-up, CPU); captures after WARM_STEPS eager steps.
    pub fn step(&mut self) -> Result<()> {
        #[cfg(feature = "cuda")]
        if self.capture {
            return self.step_cuda();
        }
        Self::step_ops(&self.model, self.st()?).map(drop)
    }

    #[cfg(feature = "cuda")]
    fn step_cuda(&mut self) -> Result<()> {
        use candle_core::cuda_backend::cudarc::driver::sys;
        let cdev = self.device.as_cuda_device()?.clone();
        if self.cuda.is_none() {
            self.cuda = Some(CudaGraphState {
                _htod_cache: Box::new(cdev.enable_cuda_graph_htod_cache()),
                graph: None,
                warm: 0,
            });
        }
        let c = self.cuda.as_mut().expect("just set");
        if let Some(g) = &c.graph {
            g.launch().map_err(|e| crate::Error::CudaGraph {
                action: "CUDA graph launch",
                detail: format!("{e:?}"),
            })?;
            return Ok(());
        }
        let st = self.state.as_ref().ok_or(crate::Error::NoDecodeState)?;
        if c.warm < WARM_STEPS {
            Self::step_ops(&self.model, st)?;
            c.warm += 1;
            return Ok(());
        }
        self.device.synchronize()?;
        let stream = cdev.cuda_stream();
        stream
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(|e| crate::Error::CudaGraph {
                action: "begin_capture",
                detail: format!("{e:?}"),
            })?;
        // Everything the step allocates (its logits too) is freed inside the capture.
        let r = Self::step_ops(&self.model, st).map(drop);
        let g = stream.end_capture(
            sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH,
        );
        r?;
        let g = g
            .map_err(|e| crate::Error::CudaGraph {
                action: "end_capture",
                detail: format!("{e:?}"),
            })?
            .ok_or_else(|| crate::Error::CudaGraph {
                action: "end_capture",
                detail: "no graph returned".into(),
            })?;
        g.upload().map_err(|e| crate::Error::CudaGraph {
            action: "graph upload",
            detail: format!("{e:?}"),
        })?;
        // The capture recorded the step without running it: run it now.
        g.launch().map_err(|e| crate::Error::CudaGraph {
            action: "CUDA graph launch",
            detail: format!("{e:?}"),
        })?;
        c.graph = Some(g);
        tracing::info!(
            batch = st.batch,
            ctx = st.ctx,
            "decode step captured into a CUDA graph"
        );
        Ok(())
    }

    /// Feed `ids` (batch, s) from position 0: logits of the last position, their argmax into the
    /// token buffer, `pos = s`. Forwards of up to `prefill_chunk` positions each.
    pub fn prefill(&mut self, ids: &Tensor) -> Result<Tensor> {
        let (_, s) = ids.dims2()?;
        self.set_pos(0)?;
        let st = self.st()?;
        // Chunks of at most `prefill_chunk` positions: the score matrix of one chunk against the
        // cache stays bounded (a 16 k prompt in one piece overflows cuBLAS's sizes).
        let chunk = self.prefill_chunk.max(1);
        let mut last = None;
        for start in (0..s).step_by(chunk) {
            let c = chunk.min(s - start);
            let ids = ids.narrow(1, start, c)?.contiguous()?;
            last = Some(self.model.forward_chunk(&ids, st, start)?);
            st.pos.inplace_op1(&AddU32(c as u32))?;
        }
        let logits = last.ok_or(crate::Error::EmptyPrompt)?;
        st.tok.slice_set(&argmax(&logits)?, 0, 0)?;
        self.prefilled = s;
        Ok(logits)
    }
}

impl GraphDecoder {
    /// [`Decoder::prefill_prompt`] in the engine's own error: a fresh state of `capacity`
    /// positions (at least the prompt + 1), the fixed prompt fed.
    pub fn prefill_fresh(
        &mut self,
        batch: usize,
        prompt_len: usize,
        capacity: usize,
    ) -> Result<()> {
        let prompt_len = prompt_len.max(1);
        self.ensure_state(batch, capacity.max(prompt_len + 1))?;
        let ids = prompt_ids(batch, prompt_len, self.model.vocab);
        let prompt = Tensor::from_vec(ids, (batch, prompt_len), &self.device)?;
        self.prefill(&prompt)?;
        Ok(())
    }

    /// [`Decoder::decode_at`] in the engine's own error: the position rewound to `depth` (the
    /// cache rows past it are rewritten), then `new_tokens` replayed steps.
    pub fn decode_from(&mut self, depth: usize, new_tokens: usize) -> Result<usize> {
        if new_tokens == 0 {
            return Err(DecodeError::NoNewTokens.into());
        }
        DecodeError::check_depth(depth, self.prefilled)?;
        let (batch, ctx) = {
            let st = self.st()?;
            (st.batch, st.ctx)
        };
        if depth + new_tokens > ctx {
            return Err(crate::Error::PastCache {
                end: depth + new_tokens,
                ctx,
            });
        }
        self.set_pos(depth as u32)?;
        for _ in 0..new_tokens {
            self.step()?;
        }
        Ok(batch * new_tokens)
    }

    /// [`Decoder::generate`] in the engine's own error.
    pub fn decode(&mut self, batch: usize, prompt_len: usize, new_tokens: usize) -> Result<usize> {
        if new_tokens == 0 {
            return Err(DecodeError::NoNewTokens.into());
        }
        let prompt_len = prompt_len.max(1);
        // The prefill yields the first token, then new_tokens − 1 single-token steps (greedy,
        // never stopping early), as in the eager engine.
        self.prefill_fresh(batch, prompt_len, prompt_len + new_tokens)?;
        for _ in 1..new_tokens {
            self.step()?;
        }
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
        if let Some(bad) = ids.iter().find(|&&t| t as usize >= self.model.vocab) {
            return Err(DecodeError::TokenOutOfVocabulary {
                id: *bad,
                vocab: self.model.vocab,
            }
            .into());
        }
        self.ensure_state(1, ids.len())?;
        self.set_pos(0)?;
        let mut sum = 0.0f64;
        for pair in ids.windows(2) {
            self.set_tokens(&[pair[0]])?;
            let logits = self.step_logits()?;
            sum -= log_prob(&logits.to_dtype(DType::F32)?, pair[1])?;
        }
        Ok(sum)
    }
}

impl Decoder for GraphDecoder {
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

    fn prefill_prompt(
        &mut self,
        batch: usize,
        prompt_len: usize,
        capacity: usize,
    ) -> Result<(), DecodeError> {
        Ok(self.prefill_fresh(batch, prompt_len, capacity)?)
    }

    fn decode_at(&mut self, depth: usize, new_tokens: usize) -> Result<usize, DecodeError> {
        Ok(self.decode_from(depth, new_tokens)?)
    }

    fn kernel(&self) -> String {
        let how = if self.capture {
            "decode step replayed as one CUDA graph"
        } else if self.device.is_cuda() {
            "op by op (capture off)"
        } else {
            "op by op (no CUDA graph on the CPU)"
        };
        let scores = if self.model.prefill_scores_in_f16() {
            ", prefill scores in F16"
        } else {
            ""
        };
        format!(
            "candle {CANDLE_VERSION} {} {}; static KV cache ({:?}){scores}, {how}",
            engine_name(self.precision),
            self.base_kernel,
            self.model.cache_dtype()
        )
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }

    fn nll(&mut self, ids: &[u32]) -> Result<f64, DecodeError> {
        Ok(self.score(ids)?)
    }
}
