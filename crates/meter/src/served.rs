//! What a served arm reports besides its energy, in the report's own words: who served it, how it
//! was driven and the streamed latency of the timed iterations. The `server` crate fills it; the
//! protocol carries it to the report untouched.

use serde::Serialize;

/// Which HTTP API drives the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// OpenAI-compatible `/v1/completions` (vLLM, SGLang, TGI, llama-server, ollama).
    Completions,
    /// OpenAI-compatible `/v1/chat/completions` (the server applies its chat template).
    Chat,
    /// llama.cpp's native `/completion` (token ids back with every chunk).
    Llama,
}

impl Api {
    /// Every API, in `--api` order.
    pub const ALL: [Api; 3] = [Api::Completions, Api::Chat, Api::Llama];
    /// The `--api` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Completions => "completions",
            Api::Chat => "chat",
            Api::Llama => "llama",
        }
    }
    /// The endpoint path.
    pub fn path(self) -> &'static str {
        match self {
            Api::Completions => "/v1/completions",
            Api::Chat => "/v1/chat/completions",
            Api::Llama => "/completion",
        }
    }
    /// Whether the API takes a prompt as token ids (else the fixed text is sent).
    pub fn takes_token_ids(self) -> bool {
        !matches!(self, Api::Chat)
    }
}

impl std::str::FromStr for Api {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Api::ALL
            .into_iter()
            .find(|a| a.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| format!("unknown API {s:?} (completions, chat, llama)"))
    }
}

/// Who served an arm and what its stream measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Served {
    /// Engine name as the report's `stack.engine` spells it (`llama.cpp`, `vllm` …).
    pub engine: String,
    /// The version it reported, if any.
    pub engine_version: Option<String>,
    /// The endpoint and field the identity came from.
    pub identified_by: String,
    /// Started by the meter, or external.
    pub mode: report::ServingMode,
    /// The endpoint driven.
    pub api: Api,
    /// The command line (started servers).
    pub command: Option<String>,
    /// The model name the stream answered with.
    pub model_id: Option<String>,
    /// Latency and token accounting over the timed iterations (`None` before any request).
    pub latency: Option<report::Latency>,
}
