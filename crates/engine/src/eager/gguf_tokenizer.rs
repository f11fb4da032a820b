//! The tokenizer a GGUF file carries in its metadata (`tokenizer.ggml.*`), rebuilt as a Hugging
//! Face `tokenizers::Tokenizer`, so that a GGUF without a `tokenizer.json` beside it can still be
//! scored. Only the byte-level BPE pre-tokenizers whose rules are known to match llama.cpp's
//! (`llama-vocab.cpp`) are rebuilt; anything else is refused rather than tokenized differently.

use candle_core::quantized::gguf_file::{Content, Value};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::SplitDelimiterBehavior;
use tokenizers::{AddedToken, Tokenizer};

/// llama.cpp's token type of a control token (`<|im_start|>`, `<|endoftext|>`): matched whole in
/// the text, never split by the BPE.
const CONTROL: i32 = 3;

/// Qwen2's pre-tokenizer regex (llama-vocab.cpp, LLAMA_VOCAB_PRE_TYPE_QWEN2; the Hugging Face
/// tokenizer.json's `Split` pattern): contractions, letters with one leading non-letter, each
/// digit alone, punctuation runs, newlines, spaces.
const QWEN2_SPLIT: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Why a GGUF's embedded tokenizer cannot be rebuilt.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GgufTokenizerError {
    /// A `tokenizer.ggml.*` key is missing or of the wrong type.
    #[error("its metadata has no usable {0}")]
    Missing(&'static str),
    /// A tokenizer model other than byte-level BPE (`gpt2`).
    #[error("its tokenizer model is {0:?}; only byte-level BPE (\"gpt2\") is rebuilt")]
    Model(String),
    /// A pre-tokenizer whose splitting rules are not rebuilt here.
    #[error(
        "its pre-tokenizer is {0:?}; only \"smollm\", \"gpt2\" and \"qwen2\" are rebuilt \
         (their rules match llama.cpp's)"
    )]
    PreTokenizer(String),
    /// A merge that is not two space-separated tokens.
    #[error("merge {index} ({merge:?}) is not two tokens")]
    Merge {
        /// Position in `tokenizer.ggml.merges`.
        index: usize,
        /// The merge text.
        merge: String,
    },
    /// The tokenizers library refused the vocabulary.
    #[error("building the BPE: {0}")]
    Build(String),
}

fn strings<'a>(ct: &'a Content, key: &'static str) -> Result<Vec<&'a str>, GgufTokenizerError> {
    let missing = || GgufTokenizerError::Missing(key);
    let values = ct.metadata.get(key).ok_or_else(missing)?;
    values
        .to_vec()
        .map_err(|_| missing())?
        .iter()
        .map(|v| v.to_string().map(String::as_str).map_err(|_| missing()))
        .collect()
}

fn text<'a>(ct: &'a Content, key: &'static str) -> Result<&'a str, GgufTokenizerError> {
    ct.metadata
        .get(key)
        .and_then(|v| v.to_string().ok())
        .map(String::as_str)
        .ok_or(GgufTokenizerError::Missing(key))
}

fn token_types(ct: &Content, n: usize) -> Vec<i32> {
    let types = ct
        .metadata
        .get("tokenizer.ggml.token_type")
        .and_then(|v| v.to_vec().ok());
    match types {
        Some(v) => v
            .iter()
            .map(|t| match t {
                Value::I32(x) => *x,
                Value::U32(x) => *x as i32,
                _ => 1,
            })
            .collect(),
        None => vec![1; n],
    }
}

/// The tokenizer of a GGUF's metadata, and a line saying what it is ("GGUF tokenizer: gpt2 BPE,
/// pre smollm, 49152 tokens").
pub fn from_gguf(ct: &Content) -> Result<(Tokenizer, String), GgufTokenizerError> {
    let model = text(ct, "tokenizer.ggml.model")?;
    if model != "gpt2" {
        return Err(GgufTokenizerError::Model(model.into()));
    }
    let pre = text(ct, "tokenizer.ggml.pre").unwrap_or("default");
    let byte_level = ByteLevel::new(false, true, true);
    let pre_tokenizer = match pre {
        // llama-vocab.cpp, LLAMA_VOCAB_PRE_TYPE_SMOLLM: every digit alone, then GPT-2's regex.
        "smollm" => Sequence::new(vec![Digits::new(true).into(), byte_level.into()]),
        "gpt2" => Sequence::new(vec![byte_level.into()]),
        // As Qwen2's tokenizer.json: the regex splits, byte-level maps without a regex of its own.
        "qwen2" => {
            let split = Split::new(
                SplitPattern::Regex(QWEN2_SPLIT.into()),
                SplitDelimiterBehavior::Isolated,
                false,
            )
            .map_err(|e| GgufTokenizerError::Build(e.to_string()))?;
            Sequence::new(vec![
                split.into(),
                ByteLevel::new(false, false, false).into(),
            ])
        }
        other => return Err(GgufTokenizerError::PreTokenizer(other.into())),
    };
    let tokens = strings(ct, "tokenizer.ggml.tokens")?;
    let merges = strings(ct, "tokenizer.ggml.merges")?
        .into_iter()
        .enumerate()
        .map(|(index, m)| {
            m.split_once(' ')
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .ok_or_else(|| GgufTokenizerError::Merge {
                    index,
                    merge: m.into(),
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let vocab: Vocab = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.to_string(), i as u32))
        .collect();
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .build()
        .map_err(|e| GgufTokenizerError::Build(e.to_string()))?;
    let mut tok = Tokenizer::new(bpe);
    tok.with_pre_tokenizer(Some(pre_tokenizer));
    tok.with_decoder(Some(ByteLevelDecoder::default()));
    let control: Vec<AddedToken> = token_types(ct, tokens.len())
        .iter()
        .zip(&tokens)
        .filter(|(t, _)| **t == CONTROL)
        .map(|(_, s)| AddedToken::from(s.to_string(), true))
        .collect();
    let controls = control.len();
    tok.add_special_tokens(control)
        .map_err(|e| GgufTokenizerError::Build(e.to_string()))?;
    let how = format!(
        "GGUF tokenizer (gpt2 BPE, pre {pre}, {} tokens, {controls} control)",
        tokens.len()
    );
    Ok((tok, how))
}
