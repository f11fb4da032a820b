//! Decode engines behind a trait: candle (`crate::candle`) and a fake for tests, and the
//! [`DecodeError`] both return.

use crate::meter::FakeMeter;
use report::Precision;
use std::path::PathBuf;

/// Why a decode engine could not load a model, decode, synchronize, tokenize or score. Its
/// `Display` names what failed (the path, the field, the precision); the cause, where there is
/// one, is its [`std::error::Error::source`] (see [`crate::error::chain`]).
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// A third-party loader (candle's GGUF or safetensors reader) panicked on this input.
    #[error("{source_name}: the model loader failed on this file (it panicked: {message})")]
    LoaderPanic {
        /// The file or directory being loaded.
        source_name: String,
        /// The panic's message.
        message: String,
    },
    /// The engine does not run this precision.
    #[error(
        "unsupported precision {0}: the candle engine runs FP32, FP16, BF16, Q8_0, Q4_0, Q4_K, Q5_K or Q6_K"
    )]
    UnsupportedPrecision(Precision),
    /// The engine has no model for this family.
    #[error("unsupported model family {0:?} (llama, qwen2)")]
    UnsupportedFamily(String),
    /// A model file or directory could not be opened, read or written; `action` is what was
    /// being done ("opening", "reading", "writing", "creating").
    #[error("{action} {}", path.display())]
    Io {
        /// What was being done to the file (e.g. "read").
        action: &'static str,
        /// The file concerned.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A Hugging Face directory without weights.
    #[error("{}: no *.safetensors files", .0.display())]
    NoSafetensors(PathBuf),
    /// `config.json` is not JSON.
    #[error("{}: not JSON", path.display())]
    ConfigJson {
        /// The config file that did not parse.
        path: PathBuf,
        /// The JSON parse error.
        #[source]
        source: serde_json::Error,
    },
    /// `config.json` lacks a field the shape needs (or it is not an integer).
    #[error("{}: missing integer `{field}`", path.display())]
    ConfigField {
        /// The `config.json` concerned.
        path: PathBuf,
        /// The missing field.
        field: String,
    },
    /// `config.json` names a `model_type` the engine does not run.
    #[error("{}: model_type {model_type:?} is not supported (llama, mistral, qwen2)", path.display())]
    UnsupportedModelType {
        /// The `config.json` concerned.
        path: PathBuf,
        /// The `model_type` it names.
        model_type: String,
    },
    /// A file that should be GGUF cannot be parsed as GGUF.
    #[error("{}: not a GGUF file", path.display())]
    NotGguf {
        /// The weights file concerned.
        path: PathBuf,
        /// The loader's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A GGUF file lacks a metadata key or tensor the shape needs.
    #[error("{}: missing {key}", path.display())]
    GgufMissing {
        /// The GGUF file concerned.
        path: PathBuf,
        /// The missing metadata key or tensor name.
        key: String,
    },
    /// A GGUF file of an architecture the engine does not run.
    #[error("{}: GGUF architecture {arch:?} is not supported (llama, qwen2)", path.display())]
    UnsupportedGgufArchitecture {
        /// The GGUF file concerned.
        path: PathBuf,
        /// The architecture it names.
        arch: String,
    },
    /// A GGUF file holds one quantization; another was asked for. `found` is the format of most
    /// of its 2-D block weights (`None`: it has none).
    #[error(
        "{} holds {} weights, not {requested}: a GGUF file is one quantization",
        path.display(),
        found.as_deref().unwrap_or("no quantized block")
    )]
    WrongQuantization {
        /// The weights file concerned.
        path: PathBuf,
        /// The weight type found in the file, if any.
        found: Option<String>,
        /// The precision that was requested.
        requested: Precision,
    },
    /// A float arm asked of a (quantized) GGUF file.
    #[error(
        "{} is a quantized GGUF file; the {precision} arm needs float weights (a Hugging Face directory)",
        path.display()
    )]
    NeedsFloatWeights {
        /// The quantized GGUF file.
        path: PathBuf,
        /// The arm that needs float weights.
        precision: Precision,
    },
    /// Perplexity needs the model's `tokenizer.json` and there is none.
    #[error(
        "no tokenizer at {}: perplexity needs the model's tokenizer.json{}",
        path.display(),
        if *beside_gguf { " beside the GGUF file" } else { "" }
    )]
    NoTokenizer {
        /// Where the tokenizer was looked for.
        path: PathBuf,
        /// Whether it was looked for beside a GGUF file.
        beside_gguf: bool,
    },
    /// The tokenizer failed; `action` is what it was doing ("loading", "configuring",
    /// "tokenizing with").
    #[error("{action} {}", path.display())]
    Tokenizer {
        /// What was being done (e.g. "load").
        action: &'static str,
        /// The tokenizer file concerned.
        path: PathBuf,
        /// The tokenizer library's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
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
    /// A GGUF file (or in-memory GGUF) lacks a metadata key the graph engine needs.
    #[error("GGUF metadata {0} missing")]
    GgufMetadata(String),
    /// The graph engine was asked to decode before it had a decode state (a bug).
    #[error("graph engine: no decode state")]
    NoDecodeState,
    /// A decode state longer than the model's rotary table.
    #[error("context {ctx} exceeds the model's rotary table ({max} positions)")]
    ContextTooLong {
        /// Prompt + new tokens asked for.
        ctx: usize,
        /// Positions the rotary table holds.
        max: usize,
    },
    /// A forward fed a batch other than its decode state's.
    #[error("batch {fed} fed to a state of batch {state}")]
    BatchMismatch {
        /// The batch fed.
        fed: usize,
        /// The batch the state was made for.
        state: usize,
    },
    /// A CUDA graph call of the graph engine failed; `action` is the call ("begin_capture",
    /// "end_capture", "graph upload", "CUDA graph launch"), `detail` the driver's error.
    #[error("{action}: {detail}")]
    CudaGraph {
        /// The call that failed.
        action: &'static str,
        /// The driver's error.
        detail: String,
    },
    /// candle itself failed (a tensor op, a CUDA call, a safetensors or GGUF read …).
    #[cfg(feature = "candle")]
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
    /// A served model failed (started, answered, streamed or counted wrong).
    #[error(transparent)]
    Server(#[from] crate::server::ServerError),
    /// A failure scripted into [`FakeDecoderFactory`] (tests).
    #[error("{0}")]
    Scripted(String),
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
    fn served(&self) -> Option<crate::server::Served> {
        None
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
    /// The bytes of weights a decode step of the arm last loaded at `precision` reads (issue 13),
    /// or `None` where the engine cannot say (a server, a fake): never a guess.
    fn decode_weight_bytes(
        &self,
        _precision: Precision,
    ) -> Option<crate::roofline::DecodeWeightBytes> {
        None
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
        }
    }
}

struct FakeDecoder {
    meter: FakeMeter,
    step_s: f64,
    precision: Precision,
    fail_after: Option<usize>,
    calls: usize,
    nll_per_token: Result<f64, String>,
    failure_text: Option<String>,
}

impl Decoder for FakeDecoder {
    fn generate(
        &mut self,
        batch: usize,
        _prompt_len: usize,
        new_tokens: usize,
    ) -> Result<usize, DecodeError> {
        self.calls += 1;
        if self.fail_after.is_some_and(|n| self.calls > n) {
            return Err(DecodeError::Scripted(
                self.failure_text
                    .clone()
                    .unwrap_or_else(|| format!("scripted decode failure on call {}", self.calls)),
            ));
        }
        // Advance virtual time token by token, yielding real time so the sampler thread sees
        // the window.
        for _ in 0..new_tokens {
            self.meter.advance(self.step_s);
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
    fn load(&mut self, precision: Precision) -> Result<Box<dyn Decoder>, DecodeError> {
        self.loads.push(precision);
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
            failure_text: self.failure_text.clone(),
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
