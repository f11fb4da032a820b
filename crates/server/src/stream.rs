//! The request bodies the meter sends and the streamed events it reads back, per API. Pure: no
//! I/O, so every server dialect is unit-tested on captured chunks.

use meter::served::Api;
use serde::Serialize;
use serde_json::Value;

/// The fixed prompt: token ids where the API takes them, else text.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    /// Token ids (the same ids every request, so every arm prefills the same sequence).
    Ids(Vec<u32>),
    /// Text (chat APIs): the server tokenizes it with its own tokenizer.
    Text(String),
}

impl Prompt {
    /// `len` deterministic token ids from `seed`, inside the first 256 ids above 100 (below any
    /// real vocabulary's size, clear of the special tokens most vocabularies put first).
    pub fn ids(len: usize, seed: u64) -> Prompt {
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        Prompt::Ids(
            (0..len)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    100 + ((x >> 33) % 256) as u32
                })
                .collect(),
        )
    }
    /// A fixed English text of about `words` words (chat APIs tokenize it themselves).
    pub fn text(words: usize) -> Prompt {
        const TEXT: &str =
            "Write a long and detailed account of how a river changes over the seasons, \
             from the first thaw in spring to the ice of winter, and of the towns along its banks";
        let w: Vec<&str> = TEXT.split(' ').collect();
        Prompt::Text(
            (0..words.max(1))
                .map(|i| w[i % w.len()])
                .collect::<Vec<_>>()
                .join(" "),
        )
    }
}

/// One streamed request: the body for `api`. Every dialect's way of not stopping early is sent
/// (`ignore_eos`, `min_tokens`, `n_predict`); a server that ignores them and stops early fails
/// the arm (the caller checks the count), it never yields a short figure.
pub fn request_body(
    api: Api,
    prompt: &Prompt,
    max_tokens: usize,
    model: Option<&str>,
    seed: u64,
) -> Value {
    request_body_cached(api, prompt, max_tokens, model, seed, false)
}

/// [`request_body`], asking llama.cpp to reuse a cached prompt prefix when `cache_prompt`: a
/// context run's decode requests, whose prompt an untimed prefill left in the server's cache.
pub fn request_body_cached(
    api: Api,
    prompt: &Prompt,
    max_tokens: usize,
    model: Option<&str>,
    seed: u64,
    cache_prompt: bool,
) -> Value {
    #[derive(Serialize)]
    struct Body<'a> {
        #[serde(skip_serializing_if = "Option::is_none")]
        model: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        prompt: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        messages: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        max_tokens: Option<usize>,
        #[serde(skip_serializing_if = "Option::is_none")]
        min_tokens: Option<usize>,
        #[serde(skip_serializing_if = "Option::is_none")]
        n_predict: Option<usize>,
        ignore_eos: bool,
        temperature: f64,
        seed: u64,
        stream: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        stream_options: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        return_tokens: Option<bool>,
        /// llama.cpp reuses a cached prompt prefix by default; the candle path prefills every
        /// iteration, so the server does too (vLLM's prefix cache cannot be turned off per request),
        /// except in a context run's decode window.
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_prompt: Option<bool>,
    }
    let prompt_value = match prompt {
        Prompt::Ids(ids) => Value::from(ids.clone()),
        Prompt::Text(t) => Value::from(t.clone()),
    };
    let text = match prompt {
        Prompt::Text(t) => t.clone(),
        Prompt::Ids(ids) => format!("{ids:?}"),
    };
    let llama = api == Api::Llama;
    let body = Body {
        model: if llama { None } else { model },
        prompt: (api != Api::Chat).then_some(prompt_value),
        messages: (api == Api::Chat)
            .then(|| serde_json::json!([{ "role": "user", "content": text }])),
        max_tokens: (!llama).then_some(max_tokens),
        min_tokens: (!llama).then_some(max_tokens),
        n_predict: Some(max_tokens),
        ignore_eos: true,
        temperature: 0.0,
        seed,
        stream: true,
        stream_options: (!llama).then(|| serde_json::json!({ "include_usage": true })),
        return_tokens: llama.then_some(true),
        cache_prompt: Some(cache_prompt),
    };
    serde_json::to_value(body).expect("a plain struct serializes")
}

/// What one streamed event said.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Chunk {
    /// Output tokens this chunk carried, where the server says (llama.cpp's `tokens`); `None`:
    /// one chunk of output, count unknown.
    pub tokens: Option<u64>,
    /// Whether the chunk carried generated output (a token, possibly an empty text piece).
    pub output: bool,
    /// `finish_reason` / `stop_type`, where given.
    pub finish_reason: Option<String>,
    /// Completion tokens from a usage block (OpenAI `usage.completion_tokens`, llama.cpp
    /// `tokens_predicted`).
    pub usage_tokens: Option<u64>,
    /// The model name the server answered with.
    pub model: Option<String>,
    /// `system_fingerprint` (llama.cpp puts its build there).
    pub fingerprint: Option<String>,
    /// Prompt tokens the server evaluated for this request, where it says (llama.cpp's final
    /// `timings.prompt_n`: fewer than the prompt's when it reused a cached prefix).
    pub prompt_evaluated: Option<u64>,
}

/// One server-sent event's `data:` payload, read.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// `[DONE]`: the stream is over.
    Done,
    /// A chunk of the response.
    Chunk(Chunk),
    /// The server reported an error inside the stream.
    Error(String),
}

/// Read one `data:` payload of `api`'s stream. Text that is not JSON is an error naming it.
pub fn parse_event(api: Api, data: &str) -> Result<Event, String> {
    let data = data.trim();
    if data == "[DONE]" {
        return Ok(Event::Done);
    }
    let v: Value = serde_json::from_str(data)
        .map_err(|e| format!("a streamed event is not JSON ({e}): {}", clip(data, 200)))?;
    if let Some(err) = v.get("error") {
        let msg = err
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| clip(&err.to_string(), 300));
        return Ok(Event::Error(msg));
    }
    let str_of = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let mut c = Chunk {
        model: str_of("model"),
        fingerprint: str_of("system_fingerprint"),
        ..Chunk::default()
    };
    match api {
        Api::Llama => {
            let toks = v
                .get("tokens")
                .and_then(Value::as_array)
                .map(|a| a.len() as u64);
            let content = v.get("content").and_then(Value::as_str).unwrap_or("");
            let stop = v.get("stop").and_then(Value::as_bool).unwrap_or(false);
            c.tokens = toks;
            c.output = toks.is_some_and(|n| n > 0) || (!stop && !content.is_empty());
            if stop {
                c.finish_reason = str_of("stop_type").or(Some("stop".into()));
                c.usage_tokens = v.get("tokens_predicted").and_then(Value::as_u64);
                c.prompt_evaluated = v
                    .get("timings")
                    .and_then(|t| t.get("prompt_n"))
                    .and_then(Value::as_u64);
            }
        }
        Api::Completions | Api::Chat => {
            if let Some(choice) = v
                .get("choices")
                .and_then(Value::as_array)
                .and_then(|a| a.first())
            {
                c.finish_reason = choice
                    .get("finish_reason")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                let piece = if api == Api::Chat {
                    choice.get("delta").and_then(|d| d.get("content"))
                } else {
                    choice.get("text")
                };
                // A chunk without a finish reason is a token, even when its text is empty (a
                // byte of an unfinished UTF-8 character).
                c.output = c.finish_reason.is_none() && piece.is_some_and(|p| !p.is_null())
                    || piece.and_then(Value::as_str).is_some_and(|t| !t.is_empty());
            }
            c.usage_tokens = v
                .get("usage")
                .and_then(|u| u.get("completion_tokens"))
                .and_then(Value::as_u64);
        }
    }
    Ok(Event::Chunk(c))
}

/// The first `n` characters of `s`, with an ellipsis when cut.
pub fn clip(s: &str, n: usize) -> String {
    let mut out: String = s.chars().take(n).collect();
    if s.chars().count() > n {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_names_round_trip() {
        for a in Api::ALL {
            assert_eq!(a.as_str().parse::<Api>().unwrap(), a);
        }
        assert!("grpc"
            .parse::<Api>()
            .unwrap_err()
            .contains("completions, chat, llama"));
    }

    #[test]
    fn prompt_ids_are_deterministic_and_in_range() {
        let Prompt::Ids(a) = Prompt::ids(16, 7) else {
            panic!()
        };
        let Prompt::Ids(b) = Prompt::ids(16, 7) else {
            panic!()
        };
        let Prompt::Ids(c) = Prompt::ids(16, 8) else {
            panic!()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.len(), 16);
        assert!(a.iter().all(|&t| (100..356).contains(&t)));
        let Prompt::Text(t) = Prompt::text(40) else {
            panic!()
        };
        assert_eq!(t.split(' ').count(), 40);
    }

    #[test]
    fn bodies_ask_every_dialect_not_to_stop() {
        let p = Prompt::ids(4, 1);
        let b = request_body(Api::Completions, &p, 256, Some("m"), 3);
        assert_eq!(b["max_tokens"], 256);
        assert_eq!(b["min_tokens"], 256);
        assert_eq!(b["ignore_eos"], true);
        assert_eq!(b["stream_options"]["include_usage"], true);
        assert_eq!(b["model"], "m");
        assert!(b["prompt"].is_array());
        let l = request_body(Api::Llama, &p, 64, Some("m"), 3);
        assert_eq!(l["n_predict"], 64);
        assert_eq!(l["return_tokens"], true);
        assert!(l.get("model").is_none() && l.get("max_tokens").is_none());
        let c = request_body(Api::Chat, &Prompt::text(5), 8, None, 0);
        assert_eq!(c["messages"][0]["role"], "user");
        assert!(c.get("prompt").is_none() && c.get("model").is_none());
    }

    #[test]
    fn llama_native_chunks() {
        let e = parse_event(Api::Llama, r#"{"content":"hi","tokens":[42],"stop":false}"#).unwrap();
        let Event::Chunk(c) = e else { panic!() };
        assert_eq!((c.tokens, c.output, c.usage_tokens), (Some(1), true, None));
        let last = r#"{"content":"","tokens":[],"stop":true,"stop_type":"limit","tokens_predicted":256,"model":"x.gguf"}"#;
        let Event::Chunk(c) = parse_event(Api::Llama, last).unwrap() else {
            panic!()
        };
        assert!(!c.output);
        assert_eq!(c.usage_tokens, Some(256));
        assert_eq!(c.finish_reason.as_deref(), Some("limit"));
        assert_eq!(c.model.as_deref(), Some("x.gguf"));
        assert_eq!(c.prompt_evaluated, None, "no timings: not known");
        // llama.cpp's final chunk says how many prompt tokens it evaluated (1 of a cached 4 096).
        let cached = r#"{"content":"","tokens":[],"stop":true,"tokens_predicted":16,"timings":{"cache_n":4095,"prompt_n":1,"predicted_n":16}}"#;
        let Event::Chunk(c) = parse_event(Api::Llama, cached).unwrap() else {
            panic!()
        };
        assert_eq!(c.prompt_evaluated, Some(1));
        let b = request_body_cached(Api::Llama, &Prompt::ids(3, 1), 4, None, 0, true);
        assert_eq!(b["cache_prompt"], true);
        assert_eq!(
            request_body(Api::Llama, &Prompt::ids(3, 1), 4, None, 0)["cache_prompt"],
            false
        );
    }

    #[test]
    fn openai_chunks_usage_and_done() {
        let tok = r#"{"choices":[{"text":"","index":0,"finish_reason":null}],"model":"m","system_fingerprint":"b1-abc"}"#;
        let Event::Chunk(c) = parse_event(Api::Completions, tok).unwrap() else {
            panic!()
        };
        assert!(
            c.output,
            "an empty text piece without finish_reason is a token"
        );
        assert_eq!(c.fingerprint.as_deref(), Some("b1-abc"));
        let fin = r#"{"choices":[{"text":"","index":0,"finish_reason":"length"}]}"#;
        let Event::Chunk(c) = parse_event(Api::Completions, fin).unwrap() else {
            panic!()
        };
        assert!(!c.output);
        assert_eq!(c.finish_reason.as_deref(), Some("length"));
        let usage = r#"{"choices":[],"usage":{"prompt_tokens":16,"completion_tokens":256}}"#;
        let Event::Chunk(c) = parse_event(Api::Completions, usage).unwrap() else {
            panic!()
        };
        assert_eq!(c.usage_tokens, Some(256));
        assert!(!c.output);
        let chat = r#"{"choices":[{"delta":{"content":"a"},"index":0,"finish_reason":null}]}"#;
        let Event::Chunk(c) = parse_event(Api::Chat, chat).unwrap() else {
            panic!()
        };
        assert!(c.output);
        let role = r#"{"choices":[{"delta":{"role":"assistant"},"index":0,"finish_reason":null}]}"#;
        let Event::Chunk(c) = parse_event(Api::Chat, role).unwrap() else {
            panic!()
        };
        assert!(!c.output, "the role-only first delta carries no token");
        assert_eq!(parse_event(Api::Chat, " [DONE] ").unwrap(), Event::Done);
    }

    #[test]
    fn errors_in_the_stream_are_named() {
        let e = parse_event(
            Api::Completions,
            r#"{"error":{"message":"context full","code":400}}"#,
        );
        assert_eq!(e.unwrap(), Event::Error("context full".into()));
        let bad = parse_event(Api::Completions, "<html>502</html>").unwrap_err();
        assert!(bad.contains("not JSON") && bad.contains("<html>"), "{bad}");
    }
}
