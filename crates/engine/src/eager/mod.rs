//! The candle decode engine: Llama and Qwen2 families, F32/F16/BF16 through candle's float models
//! and GGUF formats (Q8_0, Q4_K, Q4_0, Q5_K, Q6_K) through its quantized models. Weights come
//! from a local Hugging Face directory, a GGUF file, or seeded random values at a real
//! architecture's exact shapes (`--synthetic`).

use analysis::ModelShape;
use candle_core::quantized::{ggml_file::qtensor_from_ggml, gguf_file, GgmlDType, QTensor};
use candle_core::{DType, Device, Tensor, D};
use candle_nn::VarBuilder;
use candle_transformers::models::{llama, quantized_llama, quantized_qwen2, qwen2};
use meter::decoder::{DecodeError, Decoder, DecoderFactory};
use rand::{RngCore, SeedableRng};
use report::Precision;
use std::collections::HashMap;
use std::io::Cursor;
use std::path::PathBuf;

mod engine;
mod gguf;
pub mod gguf_tokenizer;
mod hf;
mod synthetic;
#[cfg(test)]
pub(crate) mod tests;
mod weight_bytes;

pub(crate) use engine::log_prob;
use engine::*;
pub use engine::{llama_config, prompt_ids, qwen2_config, CandleDecoder};
pub use gguf::shape_from_gguf;
use gguf::*;
pub use hf::shape_from_hf_config;
use hf::*;
use synthetic::*;
pub use synthetic::{write_synthetic_gguf, write_synthetic_hf_dir};

/// The candle crate version this engine is built against, recorded in reports.
pub const CANDLE_VERSION: &str = "0.11.1";

/// Most positions of a synthetic model's rotary tables (its config's or GGUF's context length,
/// where the architecture allows more): 16 k-token contexts plus their decode fit, and the tables
/// stay a few MB. Rows below it are the same whatever the cap.
pub const SYNTHETIC_MAX_POSITIONS: usize = 32768;

/// The engine's results fail with its [`crate::Error`] (candle's own errors convert with `?`).
type Result<T, E = crate::Error> = std::result::Result<T, E>;

/// Where the weights come from.
#[derive(Debug, Clone)]
pub enum WeightSource {
    /// Random weights of a given shape, generated from a seed.
    Synthetic {
        /// The model shape to generate.
        shape: ModelShape,
        /// The seed the weights are generated from.
        seed: u64,
    },
    /// A Hugging Face model directory (config.json, safetensors, tokenizer).
    HfDir(PathBuf),
    /// GGUF weight files of one model, at most one per precision: an arm loads the file whose
    /// declared type (`general.file_type`) is its precision. Never empty.
    Gguf(Vec<PathBuf>),
}

/// How this engine stores a precision's weights: a float dtype or a GGML block format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// candle's float models (F32, F16, BF16).
    Float(DType),
    /// candle's quantized models fed a GGUF of this block format.
    Quant(GgmlDType),
}

/// The engine format of a report precision, or why this engine cannot run it.
pub fn format_of(p: Precision) -> Result<Format> {
    Ok(match p {
        Precision::Fp32 => Format::Float(DType::F32),
        Precision::Fp16 => Format::Float(DType::F16),
        Precision::Bf16 => Format::Float(DType::BF16),
        Precision::Q8_0 => Format::Quant(GgmlDType::Q8_0),
        Precision::Q4_0 => Format::Quant(GgmlDType::Q4_0),
        Precision::Q4K => Format::Quant(GgmlDType::Q4K),
        Precision::Q5K => Format::Quant(GgmlDType::Q5K),
        Precision::Q6K => Format::Quant(GgmlDType::Q6K),
        other => return Err(crate::Error::UnsupportedPrecision(other)),
    })
}

/// candle's own name of a precision (`F16`, `F32`; GGML formats as the schema spells them), as
/// the kernel labels of earlier reports have it.
pub fn engine_name(p: Precision) -> &'static str {
    match p {
        Precision::Fp16 => "F16",
        Precision::Fp32 => "F32",
        other => other.as_str(),
    }
}

/// Bytes per parameter of a precision, including block scales.
pub fn bytes_per_param(p: Format) -> f64 {
    match p {
        Format::Float(DType::F32) => 4.0,
        Format::Float(_) => 2.0,
        Format::Quant(q) => q.type_size() as f64 / q.block_size() as f64,
    }
}

/// Builds candle decoders for one weight source on one device.
pub struct CandleFactory {
    /// Where the weights come from.
    pub source: WeightSource,
    /// The candle device the decoders run on.
    pub device: Device,
    shape: ModelShape,
    /// Synthetic quantized arms: quantize the float arms' seeded weights (slower to load) instead
    /// of drawing independent random blocks. Perplexity needs it: a Δ vs FP16 only means
    /// something between the same weights. The decode work is the same either way, but power can
    /// depend on the values, so campaign sweeps keep random blocks (a sweep plan cannot ask for
    /// perplexity); the report's `weights.quantized_from_float` says which a run used.
    pub quantize_synthetic_floats: bool,
    /// Whether a float GGUF arm (F16, BF16, F32) is built as float weights — the float models
    /// and their GEMMs, as a Hugging Face checkpoint of that dtype is — instead of candle's
    /// quantized models, which widen such weights to F32. On for CUDA devices: there the
    /// quantized path reads twice the bytes (on the H200 a real F16 SmolLM2 drew 211 mJ/token
    /// that way against 181 for float weights); off on the CPU, where the real-model tests hold
    /// the quantized path's F32 arithmetic to llama.cpp's.
    pub gguf_floats_as_float: bool,
    /// What a decode step of each precision's last loaded weights reads (see
    /// [`DecoderFactory::decode_weight_bytes`]).
    weight_bytes: HashMap<Precision, meter::roofline::DecodeWeightBytes>,
}

impl CandleFactory {
    /// A factory for `source` on `device`; reads the model's shape up front.
    pub fn new(source: WeightSource, device: Device) -> Result<Self> {
        let shape = match &source {
            WeightSource::Synthetic { shape, .. } => shape.clone(),
            WeightSource::HfDir(dir) => {
                guard_loader(&source_name(&source), || shape_from_hf_config(dir))?
            }
            WeightSource::Gguf(paths) => {
                guard_loader(&source_name(&source), || same_shape_everywhere(paths))?
            }
        };
        Ok(CandleFactory {
            source,
            gguf_floats_as_float: device.is_cuda(),
            device,
            shape,
            quantize_synthetic_floats: false,
            weight_bytes: HashMap::new(),
        })
    }

    /// The shape of the model this factory loads.
    pub fn shape(&self) -> &ModelShape {
        &self.shape
    }

    /// The weights of one arm, before any model is built from them: a float `VarBuilder` or an
    /// (in-memory or on-disk) GGUF file. Both engines (eager candle models and the static-cache
    /// graph engine, [`crate::graph`]) build from this, so they run the same weights. Records
    /// the bytes of weights a decode step of them reads.
    pub(crate) fn arm_weights(&mut self, precision: Precision) -> Result<ArmWeights> {
        let w = self.load_arm_weights(precision)?;
        match w.decode_weight_bytes(&self.shape) {
            Some(b) => self.weight_bytes.insert(precision, b),
            None => self.weight_bytes.remove(&precision),
        };
        Ok(w)
    }

    /// [`Self::arm_weights`] without the record.
    fn load_arm_weights(&mut self, precision: Precision) -> Result<ArmWeights> {
        let p = format_of(precision)?;
        let shape = self.shape.clone();
        let dev = self.device.clone();
        let gguf_bytes = |bytes: Vec<u8>, notes: Vec<String>| -> Result<ArmWeights> {
            let mut cur = Cursor::new(bytes);
            let content = gguf_file::Content::read(&mut cur)?;
            Ok(ArmWeights::Gguf {
                content,
                reader: Box::new(cur),
                notes,
            })
        };
        Ok(match (&self.source, p) {
            (WeightSource::Synthetic { seed, .. }, Format::Float(dt)) => {
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
                ArmWeights::Float {
                    vb: VarBuilder::from_tensors(tensors, dt, &dev),
                    notes: Vec::new(),
                }
            }
            (WeightSource::Synthetic { seed, .. }, Format::Quant(q))
                if self.quantize_synthetic_floats =>
            {
                // The same values the float arms get (see above).
                let tensors = synthetic_float_tensors(&shape, *seed, &Device::Cpu)?;
                let (gguf, mut notes) = quantize_hf_tensors(tensors, &shape, q)?;
                notes.push(format!(
                    "quantized in memory from the float arms' seeded synthetic weights (seed {seed})"
                ));
                gguf_bytes(gguf, notes)?
            }
            (WeightSource::Synthetic { seed, .. }, Format::Quant(q)) => {
                let (gguf, notes) = synthetic_gguf(&shape, q, *seed)?;
                gguf_bytes(gguf, notes)?
            }
            (WeightSource::HfDir(dir), Format::Float(dt)) => {
                let files = safetensor_files(dir)?;
                // SAFETY: the files are memory-mapped read-only for the lifetime of the model.
                let vb = unsafe { VarBuilder::from_mmaped_safetensors(&files, dt, &dev)? };
                ArmWeights::Float {
                    vb,
                    notes: Vec::new(),
                }
            }
            (WeightSource::HfDir(dir), Format::Quant(q)) => {
                let (gguf, notes) = quantize_hf_dir(dir, &shape, q)?;
                gguf_bytes(gguf, notes)?
            }
            (WeightSource::Gguf(paths), Format::Float(dt)) if self.gguf_floats_as_float => {
                let (path, content, mut f) = gguf_of_precision(paths, precision)?;
                let tensors = gguf_as_hf_tensors(&content, &mut f, &shape, dt)?;
                ArmWeights::Float {
                    vb: VarBuilder::from_tensors(tensors, dt, &dev),
                    notes: vec![format!(
                        "weights from GGUF file {} ({}), loaded as {dt:?} float weights",
                        path.display(),
                        gguf_types(&content)
                    )],
                }
            }
            (WeightSource::Gguf(paths), _) => {
                let (path, content, f) = gguf_of_precision(paths, precision)?;
                let notes = vec![format!(
                    "weights from GGUF file {} ({})",
                    path.display(),
                    gguf_types(&content)
                )];
                ArmWeights::Gguf {
                    content,
                    reader: Box::new(f),
                    notes,
                }
            }
        })
    }

    /// The eager engine's decoder of one arm (candle_transformers' models).
    pub(crate) fn load_candle(&mut self, precision: Precision) -> Result<CandleDecoder> {
        let shape = self.shape.clone();
        let dev = self.device.clone();
        let t0 = std::time::Instant::now();
        let model = match self.arm_weights(precision)? {
            ArmWeights::Float { vb, notes } => {
                let mut m = float_model(&shape, vb)?;
                m.notes = notes;
                m
            }
            ArmWeights::Gguf {
                content,
                mut reader,
                notes,
            } => {
                let mut m = quant_model(&shape, content, &mut reader, &dev)?;
                m.notes = notes;
                m
            }
        };
        tracing::info!(
            %precision,
            seconds = t0.elapsed().as_secs_f64(),
            "model loaded"
        );
        Ok(CandleDecoder {
            model,
            device: dev,
            vocab: shape.vocab,
            precision,
        })
    }
}

/// A reader of GGUF tensor data (an in-memory file or a file on disk).
pub(crate) trait ReadSeek: std::io::Read + std::io::Seek {}
impl<T: std::io::Read + std::io::Seek> ReadSeek for T {}

/// One arm's weights (see [`CandleFactory::arm_weights`]), with the notes the report must carry.
pub(crate) enum ArmWeights {
    Float {
        vb: VarBuilder<'static>,
        notes: Vec<String>,
    },
    Gguf {
        content: gguf_file::Content,
        reader: Box<dyn ReadSeek>,
        notes: Vec<String>,
    },
}

/// The file or directory a source reads, for messages.
pub(crate) fn source_name(s: &WeightSource) -> String {
    match s {
        WeightSource::Synthetic { shape, .. } => format!("synthetic {}", shape.name),
        WeightSource::HfDir(p) => p.display().to_string(),
        WeightSource::Gguf(paths) => paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The shape every file of a GGUF set declares; files of different shapes are not one model.
fn same_shape_everywhere(paths: &[PathBuf]) -> Result<ModelShape> {
    let first = paths.first().ok_or(crate::Error::NoGgufFiles)?;
    let shape = shape_from_gguf(first)?;
    for p in &paths[1..] {
        let other = shape_from_gguf(p)?;
        // Each file names itself (name, source): only the architecture must agree.
        let named_alike = ModelShape {
            name: shape.name.clone(),
            source: shape.source.clone(),
            ..other
        };
        if named_alike != shape {
            return Err(crate::Error::GgufShapesDiffer {
                first: first.clone(),
                other: p.clone(),
            });
        }
    }
    Ok(shape)
}

/// The file of a GGUF set that declares `precision`, opened; an error lists what each file holds.
fn gguf_of_precision(
    paths: &[PathBuf],
    precision: Precision,
) -> Result<(PathBuf, gguf_file::Content, std::fs::File)> {
    let mut found = Vec::new();
    for path in paths {
        let (content, f) = read_gguf(path)?;
        if gguf_precision(&content) == Some(precision) {
            return Ok((path.clone(), content, f));
        }
        found.push((path, gguf_types(&content)));
    }
    Err(match found.as_slice() {
        [(path, types)] => crate::Error::WrongQuantization {
            path: path.to_path_buf(),
            found: Some(types.clone()),
            requested: precision,
        },
        _ => crate::Error::NoGgufOfPrecision {
            requested: precision,
            files: found
                .iter()
                .map(|(p, t)| format!("{} ({t})", p.display()))
                .collect::<Vec<_>>()
                .join(", "),
        },
    })
}

/// Run a loader that parses untrusted files; a panic inside it (candle's readers index and
/// slice what the file says) becomes an error naming the file, so the arm fails and the run —
/// the other arms, the reports — goes on.
pub(crate) fn guard_loader<T>(name: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".into());
        Err(crate::Error::LoaderPanic {
            source_name: name.to_string(),
            message,
        })
    })
}

impl CandleFactory {
    /// [`DecoderFactory::load`] in the engine's own error.
    pub fn load_decoder(&mut self, precision: Precision) -> Result<Box<dyn Decoder>> {
        let name = source_name(&self.source);
        Ok(Box::new(guard_loader(&name, || {
            self.load_candle(precision)
        })?))
    }

    /// [`DecoderFactory::tokenize`] in the engine's own error.
    pub fn tokens_of(&self, text: &str) -> Result<(Vec<u32>, String)> {
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
            WeightSource::Gguf(paths) => first_gguf(paths)?.with_file_name("tokenizer.json"),
        };
        let embedded = match (&self.source, file.is_file()) {
            (WeightSource::Gguf(paths), false) => {
                let path = first_gguf(paths)?;
                Some((path, embedded_tokenizer(path)?))
            }
            _ => None,
        };
        if let Some((path, found)) = embedded {
            return match found {
                Ok((tok, how)) => Ok((encode_whole(&tok, text, path)?, how)),
                Err(why) => Err(crate::Error::NoTokenizer {
                    path: file,
                    embedded: Some(why.to_string()),
                }),
            };
        }
        if !file.is_file() {
            return Err(crate::Error::NoTokenizer {
                path: file,
                embedded: None,
            });
        }
        let tokenizer_error = |action| {
            let path = file.clone();
            move |source| crate::Error::Tokenizer {
                action,
                path,
                source,
            }
        };
        let tok = tokenizers::Tokenizer::from_file(&file).map_err(tokenizer_error("loading"))?;
        Ok((
            encode_whole(&tok, text, &file)?,
            format!("tokenizer.json ({})", file.display()),
        ))
    }
}

/// Text of token ids under a GGUF's own tokenizer (to show what a model wrote).
pub fn detokenize(gguf: &std::path::Path, ids: &[u32]) -> Result<String> {
    let (tok, _) = embedded_tokenizer(gguf)?.map_err(|why| crate::Error::NoTokenizer {
        path: gguf.to_path_buf(),
        embedded: Some(why.to_string()),
    })?;
    tok.decode(ids, false)
        .map_err(|source| crate::Error::Tokenizer {
            action: "decoding with",
            path: gguf.to_path_buf(),
            source,
        })
}

/// The files of a GGUF set share one tokenizer (their shapes are checked alike at load).
fn first_gguf(paths: &[PathBuf]) -> Result<&std::path::Path> {
    paths
        .first()
        .map(PathBuf::as_path)
        .ok_or(crate::Error::NoGgufFiles)
}

/// The tokenizer in a GGUF's own metadata, or why there is none usable (the outer error: the
/// file could not be read).
fn embedded_tokenizer(
    path: &std::path::Path,
) -> Result<Result<(tokenizers::Tokenizer, String), gguf_tokenizer::GgufTokenizerError>> {
    let (ct, _) = read_gguf(path)?;
    Ok(gguf_tokenizer::from_gguf(&ct))
}

/// The text's ids as the tokenizer makes them: no pad tokens, no cut at its max length, no
/// special tokens added (the corpus is scored as it is).
fn encode_whole(
    tok: &tokenizers::Tokenizer,
    text: &str,
    file: &std::path::Path,
) -> Result<Vec<u32>> {
    let tokenizer_error = |action| {
        let path = file.to_path_buf();
        move |source| crate::Error::Tokenizer {
            action,
            path,
            source,
        }
    };
    let mut tok = tok.clone();
    tok.with_padding(None);
    tok.with_truncation(None)
        .map_err(tokenizer_error("configuring"))?;
    let enc = tok
        .encode(text, false)
        .map_err(tokenizer_error("tokenizing with"))?;
    Ok(enc.get_ids().to_vec())
}

impl DecoderFactory for CandleFactory {
    fn load(&mut self, precision: Precision) -> Result<Box<dyn Decoder>, DecodeError> {
        Ok(self.load_decoder(precision)?)
    }

    fn required_bytes(&self, precision: Precision, batch: usize, context: usize) -> u64 {
        let Ok(p) = format_of(precision) else {
            return 0;
        };
        required_bytes(&self.shape, p, batch, context)
    }

    fn decode_weight_bytes(
        &self,
        precision: Precision,
    ) -> Option<meter::roofline::DecodeWeightBytes> {
        self.weight_bytes.get(&precision).copied()
    }

    fn tokenize(&self, text: &str) -> Result<(Vec<u32>, String), DecodeError> {
        Ok(self.tokens_of(text)?)
    }
}

/// Weights + KV cache + dequantized embedding (quantized models keep it in F32) + logits +
/// runtime overhead (CUDA context, cuBLAS workspace, allocator slack: 1.5 GB measured-ish).
pub fn required_bytes(shape: &ModelShape, p: Format, batch: usize, context: usize) -> u64 {
    let params = shape.param_count() as f64;
    let emb = (shape.vocab * shape.hidden) as f64;
    let (weights, kv_elem, extra) = match p {
        Format::Float(dt) => (params * bytes_per_param(p), dt.size_in_bytes() as f64, 0.0),
        Format::Quant(_) => (
            shape.linear_params() as f64 * bytes_per_param(p) + emb * 1.0625,
            4.0,
            emb * 4.0,
        ),
    };
    let kv = shape.kv_bytes_per_token(kv_elem) * (context * batch) as f64;
    let logits = (batch * shape.vocab) as f64 * 4.0 * 4.0;
    (weights + kv + extra + logits + 1.5e9) as u64
}
