//! `quantenergy measure --server-cmd` / `--server`: the engine people deploy, measured with the
//! same protocol as the candle path. A served model is a [`Decoder`]: loading an arm starts its
//! server (or attaches to one someone else started), an iteration is `batch` concurrent streamed
//! requests of exactly `new_tokens` tokens, and dropping the arm stops the server. So arms run in
//! the protocol's seeded order, with its idle reference, cooldown, one counter window and failed
//! arms kept apart, and the report says which server answered.
//!
//! - [`stream`]: request bodies and streamed events per API (pure).
//! - [`client`]: HTTP with timeouts, one timed streamed request, identity probes.
//! - [`process`]: starting, watching and stopping a server process.
//! - [`run`]: a server run end to end, its reports, or the labelled estimate.

pub mod client;
pub mod process;
pub mod run;
pub mod stream;

use client::{identify, Client, Identity, RequestRecord};
use meter::decoder::{DecodeError, Decoder, DecoderFactory};
pub use meter::served::Api;
use meter::served::Served;
use modelfile::ModelFileInfo;
use process::{fill_template, free_port, ServerProcess};
use report::Precision;
use std::path::PathBuf;
use std::time::Duration;
pub use stream::Prompt;

/// Why a server arm could not start, answer or count its tokens. The message carries the
/// server's own words (its error body, or the tail of its log when it died).
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The command template lacks a placeholder.
    #[error("{0}")]
    Template(String),
    /// The URL is not plain `http://` (the server runs beside the GPUs NVML reads).
    #[error("{0}: only http:// URLs (the server must run on this machine, beside the GPUs the meter reads)")]
    Url(String),
    /// The server's log file could not be created.
    #[error("server log {}", .0.display())]
    Log(PathBuf, #[source] std::io::Error),
    /// `sh -c` could not be started.
    #[error("starting `{command}`")]
    Spawn {
        /// The command line.
        command: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The server exited (before it was ready, or mid-run).
    #[error("the server exited ({status}); its last words:\n{log_tail}")]
    Exited {
        /// Its exit status.
        status: String,
        /// The end of its log.
        log_tail: String,
    },
    /// The server did not become ready in time.
    #[error("the server was not ready after {seconds:.0} s; its last words:\n{log_tail}")]
    NotReady {
        /// The readiness timeout, s.
        seconds: f64,
        /// The end of its log.
        log_tail: String,
    },
    /// The request could not be sent or its answer read (refused, reset, timed out).
    #[error("{url}: {detail}")]
    Http {
        /// The URL.
        url: String,
        /// The transport error.
        detail: String,
    },
    /// The server answered with an error status.
    #[error("{url} answered HTTP {status}: {body}")]
    Status {
        /// The URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The server's message.
        body: String,
    },
    /// The stream carried an error event.
    #[error("the server reported an error in the stream: {0}")]
    InStream(String),
    /// The stream was not server-sent JSON events.
    #[error("{0}")]
    BadStream(String),
    /// The stream carried no token at all.
    #[error("the server streamed no tokens")]
    NoTokens,
    /// More tokens streamed than the server's usage figure says it generated.
    #[error("the server streamed {streamed} tokens but its usage says {usage}")]
    Inconsistent {
        /// Tokens counted from the stream.
        streamed: u64,
        /// The usage figure.
        usage: u64,
    },
    /// Fewer tokens than asked: the server stopped early (EOS, a stop word, a length limit).
    #[error(
        "the server returned {got} of the {asked} tokens asked (finish: {finish}); it stopped early \
         although ignore_eos/min_tokens were sent, so this arm has no per-token figure"
    )]
    Short {
        /// Tokens returned.
        got: u64,
        /// Tokens asked.
        asked: u64,
        /// The finish reason, if any.
        finish: String,
    },
    /// A context or prompt-set run on the server path needs llama.cpp's `/completion`: token-id
    /// prompts, and an answer that says how many prompt tokens it evaluated.
    #[error(
        "--context and --prompts on the server path need `--api llama` (llama.cpp's /completion), not {0}: its \
         prompts are token ids and its answers say how many prompt tokens it evaluated, so a decode \
         request that did not reuse the cached prompt fails the arm instead of hiding a prefill in \
         the decode window"
    )]
    ContextNeedsLlamaApi(String),
    /// A context run's decode request made the server evaluate its prompt again: the decode
    /// window would hold a prefill.
    #[error(
        "the server evaluated {evaluated} of the {depth} prompt tokens of a decode request instead of \
         reusing its cache (llama.cpp's `cache_prompt`): the decode window would hold a prefill"
    )]
    NoPromptReuse {
        /// Prompt tokens the server evaluated (`timings.prompt_n`).
        evaluated: u64,
        /// The context depth.
        depth: usize,
    },
    /// A context run's decode answer did not say how many prompt tokens the server evaluated.
    #[error(
        "the server's answer to a decode request has no timings.prompt_n: whether it reused the \
         cached prompt (and kept the prefill out of the decode window) cannot be told"
    )]
    PromptReuseUnknown,
    /// Perplexity needs logits the server does not give.
    #[error("perplexity is not scored on the server path (it needs the model's logits)")]
    NoPerplexity,
    /// An external server's size was not given (`--params-b`).
    #[error(
        "an external server's model size is unknown: pass --params-b (billions of parameters)"
    )]
    ParamsUnknown,
    /// A model file given to a server run could not be inspected.
    #[error(transparent)]
    ModelFile(#[from] modelfile::ModelFileError),
    /// The meter failed (the protocol, a report, a file).
    #[error(transparent)]
    Meter(#[from] meter::Error),
}

impl From<ServerError> for DecodeError {
    fn from(e: ServerError) -> Self {
        DecodeError::backend(e)
    }
}

/// `Result` with the server path's [`ServerError`].
pub type Result<T, E = ServerError> = std::result::Result<T, E>;

/// One arm of a started server: the file it serves and what the file says of itself.
#[derive(Debug, Clone)]
pub struct ServedModel {
    /// The arm's precision (from the file, or as the user named it).
    pub precision: Precision,
    /// The model file or directory (`{model}` in the command).
    pub path: PathBuf,
    /// The file's header: size, parameters, weight types.
    pub info: ModelFileInfo,
}

/// How the meter reaches the server(s).
#[derive(Debug, Clone)]
pub enum Launch {
    /// Start `command` for every arm (one model each), stop it after the arm.
    Start {
        /// The command template with `{model}` and `{port}`.
        command: String,
        /// One model per arm.
        models: Vec<ServedModel>,
        /// Where each arm's server log goes (`<dir>/<precision>.log`).
        log_dir: PathBuf,
    },
    /// A server someone else started: one arm.
    External {
        /// Its base URL.
        url: String,
        /// The precision it serves (as the user says).
        precision: Precision,
    },
}

/// Everything a server run needs besides the protocol.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Start servers, or use a running one.
    pub launch: Launch,
    /// The API driven.
    pub api: Api,
    /// The `model` field of OpenAI requests (default: the server's first `/v1/models` id).
    pub served_model: Option<String>,
    /// How long a started server may take to answer `/health`.
    pub ready_timeout: Duration,
    /// How long one request may take.
    pub request_timeout: Duration,
    /// How long the stream may stay silent.
    pub stall_timeout: Duration,
    /// Seed of the prompt ids.
    pub seed: u64,
}

/// Latency percentiles and token accounting over many requests.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LatencySummary {
    /// Requests.
    pub requests: u64,
    /// Chunks with output.
    pub chunks: u64,
    /// Sum of usage figures, where every request had one.
    pub usage_tokens: Option<u64>,
    /// Whether tokens came from usage (else from the stream).
    pub counted_from: report::TokenCount,
    /// TTFT p50, p90, mean, ms.
    pub ttft_ms: [f64; 3],
    /// Chunk-gap p50, p90, p99, ms.
    pub itl_ms: [f64; 3],
    /// Mean over requests of (total − TTFT) / (tokens − 1), ms.
    pub tpot_ms_mean: f64,
}

/// `q`-quantile (0…1) of `v` by linear interpolation; 0 for no data.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let pos = q.clamp(0.0, 1.0) * (s.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
}

impl LatencySummary {
    /// Summarize `records` (`None` when empty).
    pub fn of(records: &[RequestRecord]) -> Option<LatencySummary> {
        if records.is_empty() {
            return None;
        }
        let ms = |v: f64| (v * 1e6).round() / 1e3;
        let ttft: Vec<f64> = records.iter().map(|r| r.ttft_s).collect();
        let gaps: Vec<f64> = records
            .iter()
            .flat_map(|r| r.chunk_gaps_s.iter().copied())
            .collect();
        let tpot: Vec<f64> = records
            .iter()
            .filter(|r| r.tokens > 1)
            .map(|r| (r.total_s - r.ttft_s) / (r.tokens - 1) as f64)
            .collect();
        let all_usage = records.iter().all(|r| r.usage.is_some());
        Some(LatencySummary {
            requests: records.len() as u64,
            chunks: records.iter().map(|r| r.chunks).sum(),
            usage_tokens: all_usage.then(|| records.iter().filter_map(|r| r.usage).sum()),
            counted_from: if all_usage {
                report::TokenCount::Usage
            } else {
                report::TokenCount::Stream
            },
            ttft_ms: [
                ms(quantile(&ttft, 0.5)),
                ms(quantile(&ttft, 0.9)),
                ms(ttft.iter().sum::<f64>() / ttft.len() as f64),
            ],
            itl_ms: [
                ms(quantile(&gaps, 0.5)),
                ms(quantile(&gaps, 0.9)),
                ms(quantile(&gaps, 0.99)),
            ],
            tpot_ms_mean: if tpot.is_empty() {
                0.0
            } else {
                ms(tpot.iter().sum::<f64>() / tpot.len() as f64)
            },
        })
    }

    /// As the report's `protocol.arms[].latency`.
    pub fn to_report(&self) -> report::Latency {
        report::Latency {
            requests: self.requests,
            streamed_chunks: self.chunks,
            usage_tokens: self.usage_tokens,
            counted_from: self.counted_from,
            ttft_ms_p50: self.ttft_ms[0],
            ttft_ms_p90: self.ttft_ms[1],
            ttft_ms_mean: self.ttft_ms[2],
            itl_ms_p50: self.itl_ms[0],
            itl_ms_p90: self.itl_ms[1],
            itl_ms_p99: self.itl_ms[2],
            tpot_ms_mean: self.tpot_ms_mean,
            extra: Default::default(),
        }
    }
}

/// Loads a server arm per precision ([`DecoderFactory`]).
pub struct ServerFactory {
    opts: ServerOptions,
}

impl ServerFactory {
    /// A factory for `opts`; every started model must have its own precision.
    pub fn new(opts: ServerOptions) -> ServerFactory {
        ServerFactory { opts }
    }

    /// The precisions this run can measure, in the order given.
    pub fn precisions(&self) -> Vec<Precision> {
        match &self.opts.launch {
            Launch::Start { models, .. } => models.iter().map(|m| m.precision).collect(),
            Launch::External { precision, .. } => vec![*precision],
        }
    }

    fn client(&self, url: &str) -> Result<Client, ServerError> {
        Client::new(url, self.opts.request_timeout, self.opts.stall_timeout)
    }

    fn attach(&self, precision: Precision) -> Result<ServerDecoder, ServerError> {
        let o = &self.opts;
        let (client, process, ready_s) = match &o.launch {
            Launch::External { url, .. } => (self.client(url)?, None, None),
            Launch::Start {
                command,
                models,
                log_dir,
            } => {
                let m = models
                    .iter()
                    .find(|m| m.precision == precision)
                    .ok_or_else(|| {
                        ServerError::Template(format!("no model file for the {precision} arm"))
                    })?;
                let port = free_port()?;
                let cmd = fill_template(command, Some(&m.path), port)?;
                let client = self.client(&format!("http://127.0.0.1:{port}"))?;
                let mut p = ServerProcess::start(
                    &cmd,
                    &log_dir.join(format!("{}.log", precision.as_str())),
                )?;
                let ready = p.wait_ready(&client, o.ready_timeout)?;
                (client, Some(p), Some(ready))
            }
        };
        let identity = identify(&client);
        tracing::info!(engine = %identity.engine, version = ?identity.version, "server identified");
        Ok(ServerDecoder {
            model: o.served_model.clone().or_else(|| identity.model_id.clone()),
            client,
            identity,
            ready_s,
            process,
            api: o.api,
            seed: o.seed,
            records: Vec::new(),
            concurrency: 1,
            stream_model: None,
            prefilled: 0,
        })
    }
}

impl DecoderFactory for ServerFactory {
    fn load(&mut self, precision: Precision) -> Result<Box<dyn Decoder>, DecodeError> {
        Ok(Box::new(self.attach(precision)?))
    }

    /// A started server holds its own CUDA context; an external one holds it all along, and
    /// reading the idle with it "loaded" is reading the card as it is.
    fn arms_hold_their_own_context(&self) -> bool {
        true
    }

    /// The weights on disk plus a fifth for the server's KV cache and runtime (a server sizes
    /// its own cache; this only refuses runs that cannot fit at all). External servers hold
    /// their memory already: 0.
    fn required_bytes(&self, precision: Precision, _batch: usize, _context: usize) -> u64 {
        match &self.opts.launch {
            Launch::Start { models, .. } => models
                .iter()
                .find(|m| m.precision == precision)
                .map_or(0, |m| m.info.bytes + m.info.bytes / 5),
            Launch::External { .. } => 0,
        }
    }

    fn tokenize(&self, _text: &str) -> Result<(Vec<u32>, String), DecodeError> {
        Err(ServerError::NoPerplexity.into())
    }
}

/// One server arm as a [`Decoder`]: an iteration is `batch` concurrent streamed requests.
pub struct ServerDecoder {
    client: Client,
    identity: Identity,
    ready_s: Option<f64>,
    process: Option<ServerProcess>,
    api: Api,
    model: Option<String>,
    seed: u64,
    records: Vec<RequestRecord>,
    concurrency: usize,
    stream_model: Option<String>,
    /// Prompt tokens the last [`Decoder::prefill_prompt`] left in the server's cache (0: none).
    prefilled: usize,
}

impl ServerDecoder {
    /// A request error, with the server's last words when it has died meanwhile. A server that
    /// crashed is often still being torn down when its connection breaks: wait up to a second
    /// for its exit before deciding it is alive.
    fn explain(&mut self, e: ServerError) -> ServerError {
        if let Some(p) = self.process.as_mut() {
            let t0 = std::time::Instant::now();
            while p.exited().is_none() && t0.elapsed() < Duration::from_secs(1) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        match self
            .process
            .as_mut()
            .and_then(|p| p.exited().map(|s| (s, p.log_tail(12))))
        {
            Some((status, log_tail)) => ServerError::Exited {
                status,
                log_tail: format!("{log_tail}\n(the request failed with: {e})"),
            },
            None => e,
        }
    }
}

impl Decoder for ServerDecoder {
    fn generate(
        &mut self,
        batch: usize,
        prompt_len: usize,
        new_tokens: usize,
    ) -> Result<usize, DecodeError> {
        if new_tokens == 0 {
            return Err(DecodeError::NoNewTokens);
        }
        self.concurrency = batch.max(1);
        let prompt = if self.api.takes_token_ids() {
            Prompt::ids(prompt_len, self.seed)
        } else {
            Prompt::text(prompt_len)
        };
        let records = self.requests(&prompt, new_tokens, false)?;
        let tokens = records.iter().map(|r| r.tokens).sum::<u64>();
        self.records.extend(records);
        Ok(tokens as usize)
    }

    /// The context's prompt (`prompt_len` token ids) evaluated afresh by `batch` concurrent
    /// requests for one token each (`cache_prompt: false`); the server's cache keeps it for the
    /// decode requests after. Their latency is not recorded: the protocol times the prefill.
    fn prefill_prompt(
        &mut self,
        batch: usize,
        prompt_len: usize,
        _capacity: usize,
    ) -> Result<(), DecodeError> {
        if self.api != Api::Llama {
            return Err(ServerError::ContextNeedsLlamaApi(self.api.path().into()).into());
        }
        self.concurrency = batch.max(1);
        self.requests(&Prompt::ids(prompt_len, self.seed), 1, false)?;
        self.prefilled = prompt_len;
        Ok(())
    }

    /// `new_tokens` after the context's first `depth` prompt tokens, which the server reuses from
    /// its cache (`cache_prompt: true`); a request that evaluated more than a few of them, or did
    /// not say, fails the arm ([`ServerError::NoPromptReuse`]), so no prefill hides in the decode
    /// window.
    fn decode_at(&mut self, depth: usize, new_tokens: usize) -> Result<usize, DecodeError> {
        DecodeError::check_depth(depth, self.prefilled)?;
        let records = self.requests(&Prompt::ids(depth, self.seed), new_tokens, true)?;
        for r in &records {
            match r.prompt_evaluated {
                None => return Err(ServerError::PromptReuseUnknown.into()),
                Some(n) if n > REUSED_PROMPT_SLACK => {
                    return Err(ServerError::NoPromptReuse {
                        evaluated: n,
                        depth,
                    }
                    .into())
                }
                Some(_) => {}
            }
        }
        let tokens = records.iter().map(|r| r.tokens).sum::<u64>();
        self.records.extend(records);
        Ok(tokens as usize)
    }
    /// Every response has been read to its end: nothing is queued.
    fn synchronize(&mut self) -> Result<(), DecodeError> {
        match self
            .process
            .as_mut()
            .and_then(|p| p.exited().map(|s| (s, p.log_tail(12))))
        {
            Some((status, log_tail)) => Err(ServerError::Exited { status, log_tail }.into()),
            None => Ok(()),
        }
    }

    fn kernel(&self) -> String {
        format!(
            "{} {} server via {} (matmul kernels chosen by the server)",
            self.identity.engine,
            self.identity
                .version
                .as_deref()
                .unwrap_or("(version not reported)"),
            self.api.path()
        )
    }

    fn notes(&self) -> Vec<String> {
        let mut n = vec![format!(
            "decoded by a server over HTTP: each iteration is {} concurrent streamed request(s); \
             tokens and latency from the stream, energy from the card(s) over the same window",
            self.concurrency
        )];
        if let Some(r) = self.ready_s {
            n.push(format!("server ready {r:.1} s after start"));
        }
        n
    }

    fn nll(&mut self, _ids: &[u32]) -> Result<f64, DecodeError> {
        Err(ServerError::NoPerplexity.into())
    }

    fn reset_latency(&mut self) {
        self.records.clear();
    }

    fn served(&self) -> Option<Served> {
        Some(Served {
            engine: self.identity.engine.clone(),
            engine_version: self.identity.version.clone(),
            identified_by: self.identity.identified_by.clone(),
            mode: if self.process.is_some() {
                report::ServingMode::Started
            } else {
                report::ServingMode::External
            },
            api: self.api,
            command: self.process.as_ref().map(|p| p.command.clone()),
            model_id: self.stream_model.clone().or(self.identity.model_id.clone()),
            latency: LatencySummary::of(&self.records).map(|l| l.to_report()),
        })
    }
}

/// Prompt tokens a decode request may make the server evaluate although its prefix is cached:
/// llama.cpp evaluates the prompt's last token again to get its logits.
const REUSED_PROMPT_SLACK: u64 = 16;

impl ServerDecoder {
    /// `concurrency` streamed requests of `prompt` at once, each for `new_tokens` (no fewer: a
    /// server that stops early fails the arm), with llama.cpp's prompt cache on or off.
    fn requests(
        &mut self,
        prompt: &Prompt,
        new_tokens: usize,
        cache_prompt: bool,
    ) -> Result<Vec<RequestRecord>, DecodeError> {
        let body = stream::request_body_cached(
            self.api,
            prompt,
            new_tokens,
            self.model.as_deref(),
            self.seed,
            cache_prompt,
        );
        let results: Vec<Result<RequestRecord, ServerError>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..self.concurrency)
                .map(|_| s.spawn(|| self.client.stream(self.api, &body)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(Err(ServerError::NoTokens)))
                .collect()
        });
        let mut records = Vec::with_capacity(results.len());
        for r in results {
            let rec = r.map_err(|e| self.explain(e))?;
            if rec.tokens < new_tokens as u64 {
                return Err(ServerError::Short {
                    got: rec.tokens,
                    asked: new_tokens as u64,
                    finish: rec.finish.clone().unwrap_or_else(|| "none given".into()),
                }
                .into());
            }
            self.stream_model = self.stream_model.take().or(rec.model.clone());
            records.push(rec);
        }
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(ttft: f64, gaps: &[f64], tokens: u64, usage: Option<u64>) -> RequestRecord {
        RequestRecord {
            ttft_s: ttft,
            chunk_gaps_s: gaps.to_vec(),
            total_s: ttft + gaps.iter().sum::<f64>(),
            tokens,
            usage,
            streamed_tokens: tokens,
            chunks: gaps.len() as u64 + 1,
            model: None,
            fingerprint: None,
            finish: None,
            prompt_evaluated: None,
        }
    }

    #[test]
    fn quantiles_interpolate() {
        assert_eq!(quantile(&[], 0.5), 0.0);
        assert_eq!(quantile(&[3.0, 1.0, 2.0], 0.5), 2.0);
        assert!((quantile(&[0.0, 10.0], 0.9) - 9.0).abs() < 1e-12);
        assert_eq!(quantile(&[5.0], 0.99), 5.0);
    }

    #[test]
    fn latency_summary_worked_numbers() {
        // Two requests of 3 tokens: TTFT 100 and 300 ms, gaps 10/20 and 30/40 ms.
        let s = LatencySummary::of(&[
            rec(0.1, &[0.01, 0.02], 3, Some(3)),
            rec(0.3, &[0.03, 0.04], 3, Some(3)),
        ])
        .unwrap();
        assert_eq!(s.requests, 2);
        assert_eq!(s.chunks, 6);
        assert_eq!(s.usage_tokens, Some(6));
        assert_eq!(s.counted_from, report::TokenCount::Usage);
        assert_eq!(s.ttft_ms, [200.0, 280.0, 200.0]);
        assert_eq!(s.itl_ms[0], 25.0);
        // TPOT: (30 ms / 2 + 70 ms / 2) / 2 = 25 ms.
        assert_eq!(s.tpot_ms_mean, 25.0);
        let mixed =
            LatencySummary::of(&[rec(0.1, &[0.01], 2, None), rec(0.1, &[0.01], 2, Some(2))])
                .unwrap();
        assert_eq!(
            (mixed.usage_tokens, mixed.counted_from),
            (None, report::TokenCount::Stream)
        );
        assert!(LatencySummary::of(&[]).is_none());
    }
}
