//! The HTTP side of a server arm: a ureq agent with timeouts (plain HTTP: NVML reads the GPUs of
//! this machine, so the server runs here), one streamed request with its timings, and the probes
//! that ask a server what it is.

use super::stream::{clip, parse_event, Event};
use super::ServerError;
use meter::served::Api;
use serde_json::Value;
use std::io::BufRead;
use std::time::{Duration, Instant};

/// What one streamed request returned and when.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRecord {
    /// Request sent → first chunk with output, s.
    pub ttft_s: f64,
    /// Gaps between consecutive chunks with output, s.
    pub chunk_gaps_s: Vec<f64>,
    /// Request sent → stream closed, s.
    pub total_s: f64,
    /// Output tokens (the server's usage figure, else the streamed count).
    pub tokens: u64,
    /// The server's usage figure, if it gave one.
    pub usage: Option<u64>,
    /// Tokens counted from the stream.
    pub streamed_tokens: u64,
    /// Chunks that carried output.
    pub chunks: u64,
    /// The model name the server answered with.
    pub model: Option<String>,
    /// `system_fingerprint`, if sent.
    pub fingerprint: Option<String>,
    /// The last finish reason the stream gave.
    pub finish: Option<String>,
    /// Prompt tokens the server says it evaluated (see [`super::stream::Chunk`]).
    pub prompt_evaluated: Option<u64>,
}

/// A server's base URL and an agent with the run's timeouts.
#[derive(Clone)]
pub struct Client {
    agent: ureq::Agent,
    base: String,
}

/// A GET's answer: status, JSON body (if it was JSON), the `Server` header.
#[derive(Debug, Clone)]
pub struct GetAnswer {
    /// HTTP status.
    pub status: u16,
    /// The body, if it parsed as JSON.
    pub json: Option<Value>,
    /// The body's first characters.
    pub text: String,
    /// The `Server` response header.
    pub server_header: Option<String>,
}

impl Client {
    /// A client for `base` (e.g. `http://127.0.0.1:8080`): `request` bounds a whole request,
    /// `stall` each read (a server that stops streaming fails the arm, it never hangs the run).
    pub fn new(base: &str, request: Duration, stall: Duration) -> Result<Client, ServerError> {
        let base = base.trim_end_matches('/').to_string();
        if !base.starts_with("http://") {
            return Err(ServerError::Url(base));
        }
        // No idle connection is kept: llama-server serves each connection on one thread of a
        // small pool (cpp-httplib, n_parallel + 2 threads) for as long as the client keeps it
        // alive, so pooled idle connections (the readiness polls', a finished stream's) starved
        // the next concurrent stream of a thread and it was cut ("Peer disconnected"). A fresh
        // loopback connection per request costs well under a millisecond.
        let agent = ureq::Agent::config_builder()
            .max_idle_connections(0)
            .max_idle_connections_per_host(0)
            .timeout_global(Some(request))
            .timeout_connect(Some(Duration::from_secs(5)))
            .timeout_per_read(Some(stall))
            .http_status_as_error(false)
            .build()
            .new_agent();
        Ok(Client { agent, base })
    }

    /// The base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// GET `path` (short timeout): whatever came back, or the transport error.
    pub fn get(&self, path: &str, timeout: Duration) -> Result<GetAnswer, ServerError> {
        let url = format!("{}{path}", self.base);
        let mut resp = self
            .agent
            .get(&url)
            .config()
            .timeout_global(Some(timeout))
            .build()
            .call()
            .map_err(|e| ServerError::Http {
                url: url.clone(),
                detail: e.to_string(),
            })?;
        let status = resp.status().as_u16();
        let server_header = resp
            .headers()
            .get("server")
            .and_then(|h| h.to_str().ok())
            .map(str::to_string);
        let text = resp
            .body_mut()
            .with_config()
            .limit(4 << 20)
            .read_to_string()
            .unwrap_or_default();
        Ok(GetAnswer {
            status,
            json: serde_json::from_str(&text).ok(),
            text: clip(&text, 300),
            server_header,
        })
    }

    /// Send one streamed request and read it to its end, timing every chunk. A non-2xx status,
    /// an error event, a stream that is not SSE JSON, or a token count that contradicts itself is
    /// an error carrying the server's words.
    pub fn stream(&self, api: Api, body: &Value) -> Result<RequestRecord, ServerError> {
        let url = format!("{}{}", self.base, api.path());
        let sent = Instant::now();
        let resp = self
            .agent
            .post(&url)
            .header("Accept", "text/event-stream")
            .send_json(body)
            .map_err(|e| ServerError::Http {
                url: url.clone(),
                detail: e.to_string(),
            })?;
        let status = resp.status().as_u16();
        let mut reader = std::io::BufReader::new(resp.into_body().into_reader());
        if !(200..300).contains(&status) {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut reader, &mut text);
            return Err(ServerError::Status {
                url,
                status,
                body: server_message(&text),
            });
        }
        let mut rec = RequestRecord {
            ttft_s: 0.0,
            chunk_gaps_s: Vec::new(),
            total_s: 0.0,
            tokens: 0,
            usage: None,
            streamed_tokens: 0,
            chunks: 0,
            model: None,
            fingerprint: None,
            finish: None,
            prompt_evaluated: None,
        };
        let mut last: Option<Instant> = None;
        let mut line = String::new();
        loop {
            line.clear();
            let n = reader.read_line(&mut line).map_err(|e| ServerError::Http {
                url: url.clone(),
                detail: format!("reading the stream: {e}"),
            })?;
            if n == 0 {
                break;
            }
            let Some(data) = line.trim_end().strip_prefix("data:") else {
                continue; // blank separators, `event:` and `:` comment lines
            };
            let now = Instant::now();
            match parse_event(api, data).map_err(ServerError::BadStream)? {
                Event::Done => break,
                Event::Error(msg) => return Err(ServerError::InStream(msg)),
                Event::Chunk(c) => {
                    rec.model = rec.model.take().or(c.model);
                    rec.fingerprint = rec.fingerprint.take().or(c.fingerprint);
                    if c.finish_reason.is_some() {
                        rec.finish = c.finish_reason.clone();
                    }
                    if let Some(u) = c.usage_tokens {
                        rec.usage = Some(u);
                    }
                    if c.prompt_evaluated.is_some() {
                        rec.prompt_evaluated = c.prompt_evaluated;
                    }
                    if c.output {
                        match last {
                            None => rec.ttft_s = (now - sent).as_secs_f64(),
                            Some(t) => rec.chunk_gaps_s.push((now - t).as_secs_f64()),
                        }
                        last = Some(now);
                        rec.chunks += 1;
                        rec.streamed_tokens += c.tokens.unwrap_or(1);
                    }
                }
            }
        }
        rec.total_s = sent.elapsed().as_secs_f64();
        // A token the server generated but streams no text for (a control token, which random
        // weights can pick) still counts where its usage says so; a stream with neither is an
        // answer with no token at all.
        if rec.chunks == 0 && rec.usage.unwrap_or(0) == 0 {
            return Err(ServerError::NoTokens);
        }
        if let Some(u) = rec.usage {
            // Servers may merge tokens into one chunk, never split one token over two.
            if rec.streamed_tokens > u {
                return Err(ServerError::Inconsistent {
                    streamed: rec.streamed_tokens,
                    usage: u,
                });
            }
        }
        rec.tokens = rec.usage.unwrap_or(rec.streamed_tokens);
        Ok(rec)
    }
}

/// The message in an error body (OpenAI `{"error":{"message":…}}`, TGI `{"error":"…"}`, or the
/// text itself), clipped.
pub fn server_message(body: &str) -> String {
    let v: Option<Value> = serde_json::from_str(body).ok();
    let msg = v.as_ref().and_then(|v| {
        let e = v.get("error").or_else(|| v.get("detail"))?;
        e.get("message")
            .and_then(Value::as_str)
            .or_else(|| e.as_str())
            .map(str::to_string)
    });
    clip(msg.as_deref().unwrap_or(body.trim()), 400)
}

/// What a server says it is: engine, version and where that came from.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Identity {
    /// Engine name as the report's `stack.engine` spells it (`llama.cpp`, `vllm`, `sglang`,
    /// `tgi`, `ollama`, or the `Server` header / `owned_by` of an unknown one).
    pub engine: String,
    /// The version it reported, if any.
    pub version: Option<String>,
    /// The endpoint and field the answer came from.
    pub identified_by: String,
    /// The first model id of `/v1/models`, if listed.
    pub model_id: Option<String>,
}

/// Ask the server what it is: llama.cpp `/props`, TGI `/info`, SGLang `/get_server_info`, ollama
/// `/api/version`, vLLM `/version`, then `/v1/models`' `owned_by` or the `Server` header. An
/// endpoint counts only when it answers with the fields that engine is known to send.
pub fn identify(client: &Client) -> Identity {
    let t = Duration::from_secs(5);
    let get = |p: &str| client.get(p, t).ok().filter(|a| a.status == 200);
    let field = |a: &GetAnswer, k: &str| {
        a.json
            .as_ref()
            .and_then(|j| j.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let models = get("/v1/models");
    let model_id = models.as_ref().and_then(|m| {
        m.json
            .as_ref()?
            .get("data")?
            .as_array()?
            .first()?
            .get("id")?
            .as_str()
            .map(str::to_string)
    });
    let owned_by = models.as_ref().and_then(|m| {
        m.json
            .as_ref()?
            .get("data")?
            .as_array()?
            .first()?
            .get("owned_by")?
            .as_str()
            .map(str::to_string)
    });
    let id = |engine: &str, version: Option<String>, by: &str| Identity {
        engine: engine.into(),
        version,
        identified_by: by.into(),
        model_id: model_id.clone(),
    };
    if let Some(a) = get("/props") {
        if let Some(b) = field(&a, "build_info") {
            return id("llama.cpp", Some(b), "GET /props build_info");
        }
    }
    if let Some(a) = get("/info") {
        if a.json.as_ref().is_some_and(|j| j.get("model_id").is_some()) {
            return id("tgi", field(&a, "version"), "GET /info version");
        }
    }
    if let Some(a) = get("/get_server_info") {
        if let Some(v) = field(&a, "version") {
            return id("sglang", Some(v), "GET /get_server_info version");
        }
    }
    if let Some(a) = get("/api/version") {
        if let Some(v) = field(&a, "version") {
            return id("ollama", Some(v), "GET /api/version version");
        }
    }
    if let Some(a) = get("/version") {
        if let Some(v) = field(&a, "version") {
            return id("vllm", Some(v), "GET /version version");
        }
    }
    if let Some(o) = owned_by {
        return id(&o, None, "GET /v1/models owned_by");
    }
    let header = models
        .and_then(|m| m.server_header)
        .or_else(|| get("/health").and_then(|a| a.server_header));
    match header {
        Some(h) => id(&h, None, "the Server response header"),
        None => id(
            "unknown server",
            None,
            "nothing: the server did not say what it is",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_give_the_servers_words() {
        assert_eq!(
            server_message(r#"{"error":{"message":"model not found","type":"x"}}"#),
            "model not found"
        );
        assert_eq!(
            server_message(r#"{"error":"Input validation error"}"#),
            "Input validation error"
        );
        assert_eq!(server_message(r#"{"detail":"Not Found"}"#), "Not Found");
        assert_eq!(server_message("  upstream timeout \n"), "upstream timeout");
    }

    #[test]
    fn only_plain_http_urls() {
        let d = Duration::from_secs(1);
        assert!(Client::new("http://127.0.0.1:1/", d, d).is_ok());
        assert_eq!(
            Client::new("http://h:1/", d, d).unwrap().base(),
            "http://h:1"
        );
        let e = Client::new("https://example.org", d, d).err().unwrap();
        assert!(e.to_string().contains("http://"), "{e}");
    }
}
