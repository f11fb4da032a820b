//! What the protocol drives: a [`Decoder`] per arm, loaded by a [`DecoderFactory`] — the candle
//! engines (crate `engine`), a served model (crate `server`), or the fake here for tests — and
//! the [`DecodeError`] they return. [`EngineKind`] names quantenergy's own engines.

use crate::meter::FakeMeter;
use report::Precision;

/// Why a decoder could not load a model, decode, synchronize, tokenize or score. The meter's own
/// variants are the protocol's; a backend (the candle engines, a served model) boxes its own typed
/// error into [`DecodeError::Backend`], whose `Display` and causes pass through unchanged (see
/// [`crate::causes::chain`]).
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// `generate` was asked for no new token.
    #[error("new_tokens must be ≥ 1")]
    NoNewTokens,
    /// `nll` was given fewer than 2 tokens (nothing to predict).
    #[error("perplexity needs at least 2 tokens, got {0}")]
    TooFewTokens(usize),
    /// `nll` was given a token id the model cannot embed.
    #[error("token id {id} is outside the model's vocabulary of {vocab}")]
    TokenOutOfVocabulary {
        /// The offending token id.
        id: u32,
        /// The model's vocabulary size, tokens.
        vocab: usize,
    },
    /// The backend's own error (an engine's, a server's).
    #[error(transparent)]
    Backend(Box<dyn std::error::Error + Send + Sync + 'static>),
    /// The engine cannot prefill and decode apart (a context run needs them apart).
    #[error(
        "{0} cannot time its prefill and its decode apart: a context run needs the graph engine"
    )]
    PhasesUnsupported(String),
    /// A decode at a depth the last prefill did not reach.
    #[error("a decode at depth {depth} after a prefill of {prefilled} tokens")]
    DepthPastPrefill {
        /// The depth asked for.
        depth: usize,
        /// The tokens the last prefill put in the cache (0: none).
        prefilled: usize,
    },
    /// A failure scripted into [`FakeDecoderFactory`] (tests).
    #[error("{0}")]
    Scripted(String),
}

impl DecodeError {
    /// [`DecodeError::DepthPastPrefill`] unless a decode at `depth` (≥ 1) stays inside the
    /// `prefilled` tokens of the last prefill: what every [`Decoder::decode_at`] checks first.
    pub fn check_depth(depth: usize, prefilled: usize) -> Result<(), DecodeError> {
        if depth == 0 || depth > prefilled {
            return Err(DecodeError::DepthPastPrefill { depth, prefilled });
        }
        Ok(())
    }

    /// A backend's error, boxed.
    pub fn backend(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        DecodeError::Backend(Box::new(e))
    }

    /// The backend's error as its own type `E`, if it is one.
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        match self {
            DecodeError::Backend(b) => b.downcast_ref::<E>(),
            _ => None,
        }
    }
}

/// Which of quantenergy's own decode engines a run uses (the `engine` crate runs both; plans and
/// the CLI name them, so the name needs no engine code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// Static KV cache, fused kernels, one CUDA graph per token.
    #[default]
    Graph,
    /// candle_transformers' models, op by op.
    Eager,
}

/// An engine name other than `graph` or `eager`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown engine {0:?} (graph, eager)")]
pub struct UnknownEngine(pub String);

impl EngineKind {
    /// Every engine, in the order the CLI lists them.
    pub const ALL: [EngineKind; 2] = [EngineKind::Graph, EngineKind::Eager];

    /// The report's `stack.engine`.
    pub fn stack_name(self) -> &'static str {
        match self {
            EngineKind::Graph => "candle-graph",
            EngineKind::Eager => "candle",
        }
    }

    /// The CLI's (and plans') name: `graph` or `eager`.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Graph => "graph",
            EngineKind::Eager => "eager",
        }
    }
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for EngineKind {
    type Err = UnknownEngine;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EngineKind::ALL
            .into_iter()
            .find(|e| e.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| UnknownEngine(s.to_string()))
    }
}

/// A loaded model that decodes tokens at one precision.
pub trait Decoder {
    /// Prefill `prompt_len` fixed tokens for `batch` sequences, then decode exactly `new_tokens`
    /// tokens greedily with the KV cache (never stopping early). Returns tokens generated
    /// (`batch · new_tokens`).
    fn generate(
        &mut self,
        batch: usize,
        prompt_len: usize,
        new_tokens: usize,
    ) -> Result<usize, DecodeError>;
    /// Block until the device has finished all queued work (window edges must be synchronized).
    fn synchronize(&mut self) -> Result<(), DecodeError>;
    /// What runs the matmuls, e.g. "candle 0.11.1 F16 cuBLAS" or "candle Q4_K mmvq".
    fn kernel(&self) -> String;
    /// Anything the report must say about this arm (e.g. per-tensor format fallbacks).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
    /// Teacher-forced negative log-likelihood of one sequence, fresh cache: the sum over
    /// `ids[1..]` of −ln p(idₜ | ids[..t]) in nats (`ids.len() − 1` predictions).
    fn nll(&mut self, ids: &[u32]) -> Result<f64, DecodeError>;
    /// Forget the latency recorded so far (the protocol calls it after the warm-ups, so only
    /// the timed iterations are summarized).
    fn reset_latency(&mut self) {}
    /// For a served model: who served it and the streamed latency since the last reset.
    fn served(&self) -> Option<crate::served::Served> {
        None
    }
    /// Prefill `prompt_len` fixed tokens for `batch` sequences into a fresh cache of `capacity`
    /// positions (the prompt's last logits give the first token): the prefill alone, for a
    /// context run's prefill window and ahead of its decode window ([`Decoder::decode_at`]).
    fn prefill_prompt(
        &mut self,
        batch: usize,
        prompt_len: usize,
        capacity: usize,
    ) -> Result<(), DecodeError> {
        let _ = (batch, prompt_len, capacity);
        Err(DecodeError::PhasesUnsupported(self.kernel()))
    }
    /// `new_tokens` single-token steps from cache depth `depth` on, after a
    /// [`Decoder::prefill_prompt`] of at least `depth` tokens. Each call first rewinds to `depth`,
    /// so repeated calls decode the same positions: a decode window at a fixed depth with no
    /// prefill inside it. Returns tokens generated (`batch · new_tokens`).
    fn decode_at(&mut self, depth: usize, new_tokens: usize) -> Result<usize, DecodeError> {
        let _ = (depth, new_tokens);
        Err(DecodeError::PhasesUnsupported(self.kernel()))
    }
}

/// Loads a [`Decoder`] per precision.
pub trait DecoderFactory {
    /// Load the model at `precision`.
    fn load(&mut self, precision: Precision) -> Result<Box<dyn Decoder>, DecodeError>;
    /// Device bytes the arm needs: weights + KV cache + activations + runtime overhead.
    fn required_bytes(&self, precision: Precision, batch: usize, context: usize) -> u64;
    /// The perplexity text as token ids, and how they were made (the model's tokenizer file, or
    /// byte ids where the weights come without one).
    fn tokenize(&self, text: &str) -> Result<(Vec<u32>, String), DecodeError>;
    /// The bytes of weights a decode step of the arm last loaded at `precision` reads,
    /// or `None` where the engine cannot say (a server, a fake): never a guess.
    fn decode_weight_bytes(
        &self,
        _precision: Precision,
    ) -> Option<crate::roofline::DecodeWeightBytes> {
        None
    }
    /// Whether each arm's load starts a process with a GPU context of its own (an inference
    /// server): the card cannot return to the context-free idle while it holds one, so the
    /// cooldown's idle reference is read again with the first arm loaded.
    fn arms_hold_their_own_context(&self) -> bool {
        false
    }
}

/// A fake engine: each token costs `step_s` of virtual time on a [`FakeMeter`], during which the
/// meter's scripted power applies. Failures can be scripted per precision.
pub struct FakeDecoderFactory {
    /// The fake meter whose virtual clock the decoding advances.
    pub meter: FakeMeter,
    /// (precision, seconds per generated token)
    pub step_s: Vec<(Precision, f64)>,
    /// Precisions whose `load` fails.
    pub fail_load: Vec<Precision>,
    /// Fail decoding at this precision after this many tokens.
    pub fail_decode_after: Option<(Precision, usize)>,
    /// Device memory the fake says every arm needs (`required_bytes`), bytes.
    pub bytes: u64,
    /// Precisions loaded so far, in order (recorded for tests).
    pub loads: Vec<Precision>,
    /// (precision, nats per predicted token) for `nll`; 2.0 where not listed.
    pub nll_per_token: Vec<(Precision, f64)>,
    /// Precisions whose `nll` fails.
    pub fail_nll: Vec<Precision>,
    /// Whether `tokenize` fails.
    pub fail_tokenize: bool,
    /// What the scripted load and decode failures say (default: "scripted … failure …"), e.g.
    /// an out-of-memory error as CUDA words it.
    pub failure_text: Option<String>,
    /// (precision, bytes of weights a decode step reads) for `decode_weight_bytes`; `None`
    /// where not listed.
    pub weight_bytes: Vec<(Precision, crate::roofline::DecodeWeightBytes)>,
    /// Seconds of virtual time one prompt token of one sequence costs in `prefill_prompt` (and
    /// in `generate`'s prefill), so a test can tell whether a prefill fell inside a window.
    pub prefill_s_per_token: f64,
    /// The first this-many generations of each decoder take this factor × their step time (a
    /// warm-up slower than the timed iterations that it sizes).
    pub slow_first: Option<(usize, f64)>,
    /// A server's context: from the first load on, the card draws this many W when idle (the
    /// meter's power becomes this constant), and the factory says its arms hold their own context.
    pub own_context_w: Option<f64>,
}

impl FakeDecoderFactory {
    /// A fake engine on `meter` with no scripted failures.
    pub fn new(meter: FakeMeter) -> Self {
        FakeDecoderFactory {
            meter,
            step_s: vec![(Precision::Fp16, 0.010), (Precision::Q4K, 0.008)],
            fail_load: Vec::new(),
            fail_decode_after: None,
            bytes: 1 << 30,
            loads: Vec::new(),
            nll_per_token: Vec::new(),
            fail_nll: Vec::new(),
            fail_tokenize: false,
            failure_text: None,
            weight_bytes: Vec::new(),
            prefill_s_per_token: 0.0,
            slow_first: None,
            own_context_w: None,
        }
    }
}

struct FakeDecoder {
    meter: FakeMeter,
    step_s: f64,
    prefill_s_per_token: f64,
    /// Tokens the last prefill put in the cache, and its batch.
    prefilled: usize,
    batch: usize,
    precision: Precision,
    fail_after: Option<usize>,
    calls: usize,
    nll_per_token: Result<f64, String>,
    failure_text: Option<String>,
    slow_first: Option<(usize, f64)>,
}

impl Decoder for FakeDecoder {
    fn generate(
        &mut self,
        batch: usize,
        prompt_len: usize,
        new_tokens: usize,
    ) -> Result<usize, DecodeError> {
        self.meter
            .advance(self.prefill_s_per_token * (batch * prompt_len) as f64);
        self.calls += 1;
        if self.fail_after.is_some_and(|n| self.calls > n) {
            return Err(DecodeError::Scripted(
                self.failure_text
                    .clone()
                    .unwrap_or_else(|| format!("scripted decode failure on call {}", self.calls)),
            ));
        }
        let slower = self
            .slow_first
            .filter(|(n, _)| self.calls <= *n)
            .map_or(1.0, |(_, f)| f);
        // Advance virtual time token by token, yielding real time so the sampler thread sees
        // the window.
        for _ in 0..new_tokens {
            self.meter.advance(self.step_s * slower);
            std::thread::yield_now();
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
        Ok(batch * new_tokens)
    }
    fn synchronize(&mut self) -> Result<(), DecodeError> {
        Ok(())
    }
    fn kernel(&self) -> String {
        format!("fake {}", self.precision)
    }
    fn prefill_prompt(
        &mut self,
        batch: usize,
        prompt_len: usize,
        _capacity: usize,
    ) -> Result<(), DecodeError> {
        self.meter
            .advance(self.prefill_s_per_token * (batch * prompt_len) as f64);
        std::thread::sleep(std::time::Duration::from_millis(1));
        self.prefilled = prompt_len;
        self.batch = batch;
        Ok(())
    }
    fn decode_at(&mut self, depth: usize, new_tokens: usize) -> Result<usize, DecodeError> {
        DecodeError::check_depth(depth, self.prefilled)?;
        for _ in 0..new_tokens {
            self.meter.advance(self.step_s);
            std::thread::yield_now();
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
        Ok(self.batch * new_tokens)
    }
    fn nll(&mut self, ids: &[u32]) -> Result<f64, DecodeError> {
        // Scoring keeps the fake GPU busy like decoding does, so a test can tell whether it
        // fell inside the energy window.
        self.meter.advance(self.step_s * ids.len() as f64);
        match &self.nll_per_token {
            Ok(n) => Ok(n * ids.len().saturating_sub(1) as f64),
            Err(e) => Err(DecodeError::Scripted(e.clone())),
        }
    }
}

impl DecoderFactory for FakeDecoderFactory {
    fn arms_hold_their_own_context(&self) -> bool {
        self.own_context_w.is_some()
    }
    fn load(&mut self, precision: Precision) -> Result<Box<dyn Decoder>, DecodeError> {
        self.loads.push(precision);
        if let Some(w) = self.own_context_w {
            self.meter.state.lock().unwrap().power = Box::new(move |_| w);
        }
        if self.fail_load.contains(&precision) {
            return Err(DecodeError::Scripted(
                self.failure_text
                    .clone()
                    .unwrap_or_else(|| format!("scripted load failure for {precision}")),
            ));
        }
        let step_s = self
            .step_s
            .iter()
            .find(|(p, _)| *p == precision)
            .map(|(_, s)| *s)
            .unwrap_or(0.01);
        Ok(Box::new(FakeDecoder {
            meter: self.meter.clone(),
            prefill_s_per_token: self.prefill_s_per_token,
            prefilled: 0,
            batch: 1,
            failure_text: self.failure_text.clone(),
            slow_first: self.slow_first,
            step_s,
            precision,
            fail_after: self
                .fail_decode_after
                .as_ref()
                .filter(|(p, _)| *p == precision)
                .map(|(_, n)| *n),
            calls: 0,
            nll_per_token: if self.fail_nll.contains(&precision) {
                Err(format!("scripted scoring failure for {precision}"))
            } else {
                Ok(self
                    .nll_per_token
                    .iter()
                    .find(|(p, _)| *p == precision)
                    .map(|(_, n)| *n)
                    .unwrap_or(2.0))
            },
        }))
    }
    fn required_bytes(&self, _precision: Precision, _batch: usize, _context: usize) -> u64 {
        self.bytes
    }
    fn decode_weight_bytes(
        &self,
        precision: Precision,
    ) -> Option<crate::roofline::DecodeWeightBytes> {
        self.weight_bytes
            .iter()
            .find(|(p, _)| *p == precision)
            .map(|(_, b)| *b)
    }
    fn tokenize(&self, text: &str) -> Result<(Vec<u32>, String), DecodeError> {
        if self.fail_tokenize {
            return Err(DecodeError::Scripted("scripted tokenizer failure".into()));
        }
        Ok((
            text.bytes().map(u32::from).collect(),
            "byte ids (fake)".into(),
        ))
    }
}

#[cfg(test)]
mod name_tests {
    use super::*;

    #[test]
    fn engine_names_parse_and_print() {
        for e in EngineKind::ALL {
            assert_eq!(e.as_str().parse::<EngineKind>(), Ok(e));
            assert_eq!(e.to_string(), e.as_str());
        }
        assert_eq!("Eager".parse::<EngineKind>(), Ok(EngineKind::Eager));
        assert_eq!(
            "cuda".parse::<EngineKind>(),
            Err(UnknownEngine("cuda".into()))
        );
        assert_eq!(EngineKind::default(), EngineKind::Graph);
        assert_eq!(EngineKind::Eager.stack_name(), "candle");
        assert_eq!(EngineKind::Graph.stack_name(), "candle-graph");
    }

    #[derive(Debug, thiserror::Error)]
    #[error("backend says no")]
    struct BackendError(#[source] std::io::Error);

    /// A boxed backend error keeps its words, its cause and its type.
    #[test]
    fn a_backend_error_passes_through_with_its_cause() {
        let e = DecodeError::backend(BackendError(std::io::Error::other("disk")));
        assert_eq!(e.to_string(), "backend says no");
        assert_eq!(crate::causes::chain(&e), "backend says no: disk");
        assert!(e.downcast_ref::<BackendError>().is_some());
        assert!(DecodeError::NoNewTokens
            .downcast_ref::<BackendError>()
            .is_none());
    }
}
