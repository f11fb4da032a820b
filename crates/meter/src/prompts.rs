//! A prompt set (`measure --prompts FILE`, e.g. `data/prompts/prompt-set-v1.json`): requests of the
//! kinds people send a deployed model, each a prompt of a known length and the output tokens it
//! asks for. A run serves them one after another, as a server with one stream would, and measures
//! the energy of the whole mix (see [`crate::protocol::ProtocolConfig::prompts`]).
//!
//! What is real here is the mix of lengths: each prompt's token count is its text's in the
//! tokenizer the file names (Qwen2's for the committed set). The engines feed a prompt of that
//! many tokens, as every other run does (synthetic weights have no tokenizer of their own), so the
//! figures hold for any text of those lengths.

use sha2::Digest;

/// Why a prompt-set file was refused: its path in the JSON and what is wrong there.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PromptSetError {
    /// Not JSON of the expected shape.
    #[error("the prompt set is not valid: {0}")]
    Json(String),
    /// A field with a value the runs cannot use.
    #[error("{path}: {message}")]
    Field {
        /// Where, e.g. `$.prompts[3].prompt_tokens`.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// One request of a set: a prompt of `prompt_tokens` and the `output_tokens` it asks for.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
pub struct Prompt {
    /// A short name, unique in the set.
    pub id: String,
    /// What kind of request (`chat`, `chat-history`, `rag`, `summarize`, …).
    pub kind: String,
    /// The prompt's length in the set's tokenizer.
    pub prompt_tokens: u32,
    /// Tokens the request generates (never stopping early).
    pub output_tokens: u32,
    /// The prompt's text.
    pub text: String,
}

/// The file as committed.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: String,
    license: String,
    token_counts: String,
    prompts: Vec<Prompt>,
}

/// A parsed, checked prompt set.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PromptSet {
    /// The set's name (`quantenergy-prompts-v1`).
    pub name: String,
    /// SHA-256 of the file's bytes: runs are comparable only over the same set.
    pub sha256: String,
    /// Which tokenizer the counts are in.
    pub token_counts: String,
    /// The requests, in the file's order (the order they are served in).
    pub prompts: Vec<Prompt>,
}

/// The longest prompt a set may hold, and the most output tokens a request may ask for (the
/// protocol's own bounds on a prompt and on tokens per run).
const MAX_TOKENS: u32 = 1 << 20;

impl PromptSet {
    /// Parse and check a prompt-set file's bytes.
    pub fn parse(bytes: &[u8]) -> Result<PromptSet, PromptSetError> {
        let f: File =
            serde_json::from_slice(bytes).map_err(|e| PromptSetError::Json(e.to_string()))?;
        let field = |path: String, message: &str| PromptSetError::Field {
            path,
            message: message.to_string(),
        };
        if f.name.trim().is_empty() {
            return Err(field("$.name".into(), "empty"));
        }
        if f.license.trim().is_empty() {
            return Err(field(
                "$.license".into(),
                "empty: say under which terms the texts are",
            ));
        }
        if f.prompts.is_empty() {
            return Err(field("$.prompts".into(), "no prompt"));
        }
        for (i, p) in f.prompts.iter().enumerate() {
            let at = |k: &str| format!("$.prompts[{i}].{k}");
            if p.id.trim().is_empty() {
                return Err(field(at("id"), "empty"));
            }
            if f.prompts[..i].iter().any(|q| q.id == p.id) {
                return Err(field(at("id"), &format!("{:?} appears twice", p.id)));
            }
            for (k, v) in [
                ("prompt_tokens", p.prompt_tokens),
                ("output_tokens", p.output_tokens),
            ] {
                if v == 0 || v > MAX_TOKENS {
                    return Err(field(at(k), &format!("{v} is not in 1..={MAX_TOKENS}")));
                }
            }
        }
        Ok(PromptSet {
            name: f.name,
            sha256: hex(&sha2::Sha256::digest(bytes)),
            token_counts: f.token_counts,
            prompts: f.prompts,
        })
    }

    /// Prompt tokens of one pass over the set.
    pub fn prompt_tokens(&self) -> u64 {
        self.prompts
            .iter()
            .map(|p| u64::from(p.prompt_tokens))
            .sum()
    }

    /// Output tokens of one pass over the set.
    pub fn output_tokens(&self) -> u64 {
        self.prompts
            .iter()
            .map(|p| u64::from(p.output_tokens))
            .sum()
    }

    /// The report's `workload.prompt_set`.
    pub fn report_ref(&self) -> report::PromptSetRef {
        report::PromptSetRef {
            name: self.name.clone(),
            sha256: self.sha256.clone(),
            prompts: self.prompts.len() as u32,
            prompt_tokens: self.prompt_tokens(),
            output_tokens: self.output_tokens(),
            token_counts: self.token_counts.clone(),
            extra: Default::default(),
        }
    }

    /// The KV cache every request fits in: the longest prompt plus its output. The engines keep
    /// one cache of this size for the whole set, as a server keeps its context window.
    pub fn capacity(&self) -> usize {
        self.prompts
            .iter()
            .map(|p| (p.prompt_tokens + p.output_tokens) as usize)
            .max()
            .unwrap_or(0)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(prompts: &str) -> String {
        format!(
            r#"{{"name": "s", "license": "CC0-1.0", "token_counts": "Qwen2", "prompts": [{prompts}]}}"#
        )
    }

    const TWO: &str = r#"{"id": "a", "kind": "chat", "prompt_tokens": 30, "output_tokens": 8, "text": "hi"},
        {"id": "b", "kind": "rag", "prompt_tokens": 1000, "output_tokens": 100, "text": "docs"}"#;

    #[test]
    fn sums_and_capacity_of_a_set() {
        let s = PromptSet::parse(file(TWO).as_bytes()).unwrap();
        assert_eq!((s.prompt_tokens(), s.output_tokens()), (1030, 108));
        assert_eq!(s.capacity(), 1100);
        assert_eq!(s.sha256.len(), 64);
        // The hash is the bytes': one more space is another set.
        let t = PromptSet::parse(format!("{} ", file(TWO)).as_bytes()).unwrap();
        assert_ne!(s.sha256, t.sha256);
    }

    #[test]
    fn a_bad_field_is_named() {
        let bad = |prompts: &str| PromptSet::parse(file(prompts).as_bytes()).unwrap_err();
        assert_eq!(
            bad(&TWO.replace("\"output_tokens\": 100", "\"output_tokens\": 0")).to_string(),
            "$.prompts[1].output_tokens: 0 is not in 1..=1048576"
        );
        assert_eq!(
            bad(&TWO.replace("\"id\": \"b\"", "\"id\": \"a\"")).to_string(),
            "$.prompts[1].id: \"a\" appears twice"
        );
        assert_eq!(bad("").to_string(), "$.prompts: no prompt");
        let neg = bad(&TWO.replace("30", "-30")).to_string();
        assert!(
            neg.starts_with("the prompt set is not valid: invalid value"),
            "{neg}"
        );
        let unknown = PromptSet::parse(
            br#"{"name": "s", "license": "x", "token_counts": "q", "prompts": [], "more": 1}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(unknown.contains("unknown field `more`"), "{unknown}");
    }

    /// The committed set parses, and its lengths spread from a short chat turn to a long document.
    #[test]
    fn the_committed_set() {
        let bytes = include_bytes!("../../../data/prompts/prompt-set-v1.json");
        let s = PromptSet::parse(bytes).unwrap();
        assert_eq!(s.name, "quantenergy-prompts-v1");
        assert_eq!(s.prompts.len(), 10);
        let lens: Vec<u32> = s.prompts.iter().map(|p| p.prompt_tokens).collect();
        assert!(lens.iter().any(|&l| l < 100), "{lens:?}");
        assert!(lens.iter().any(|&l| l > 6000), "{lens:?}");
    }
}
