//! The committed prompt set's token counts (`data/prompts/prompt-set-v1.json`) are its texts'
//! in Qwen2's tokenizer: llama.cpp's vocab-only `models/ggml-vocab-qwen2.gguf`, rebuilt by the
//! eager engine's GGUF tokenizer, no BOS, control tokens (`<|im_start|>`) whole. Ignored: it needs
//! the llama.cpp tree `./dev test` fetches into `.peers/`. On a mismatch it prints the counts to
//! paste into `scripts/prompts/build.py`.

use std::path::Path;

use candle_core::quantized::gguf_file::Content;
use engine::eager::gguf_tokenizer::from_gguf;
use meter::prompts::PromptSet;

#[test]
#[ignore = "needs .peers/llama.cpp (./dev test fetches it)"]
fn prompt_set_counts_are_qwen2s() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let vocab = root.join(".peers/llama.cpp/models/ggml-vocab-qwen2.gguf");
    let mut f = std::fs::File::open(&vocab).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (scripts/peers/fetch-llama-cpp.sh)",
            vocab.display()
        )
    });
    let ct = Content::read(&mut f).unwrap();
    let (tok, how) = from_gguf(&ct).unwrap();
    assert!(how.contains("pre qwen2"), "{how}");
    // The pre-tokenizer's splits as llama.cpp's: one digit a token, a space joined to a word.
    let ids = tok.encode("In 1794 it's open", false).unwrap();
    assert_eq!(
        ids.get_tokens(),
        ["In", "Ġ", "1", "7", "9", "4", "Ġit", "'s", "Ġopen"]
    );
    let bytes = std::fs::read(root.join("data/prompts/prompt-set-v1.json")).unwrap();
    let set = PromptSet::parse(&bytes).unwrap();
    let counted: Vec<(String, u32)> = set
        .prompts
        .iter()
        .map(|p| {
            let n = tok.encode(p.text.as_str(), false).unwrap().len();
            (p.id.clone(), n as u32)
        })
        .collect();
    let stated: Vec<(String, u32)> = set
        .prompts
        .iter()
        .map(|p| (p.id.clone(), p.prompt_tokens))
        .collect();
    assert_eq!(
        stated,
        counted,
        "counts to paste into scripts/prompts/build.py: {{{}}}",
        counted
            .iter()
            .map(|(id, n)| format!("{id:?}: {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
}
