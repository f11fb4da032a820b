//! `quantenergy engine-check`: the graph engine against the eager one on the same weights, with
//! no energy metering — greedy tokens compared position by position — and the graph engine's
//! prefill and decode timed apart between device synchronizations, at the depth the prompt sets.

use crate::eager::{prompt_ids, CandleFactory, WeightSource};
use crate::graph::{GraphDecoder, GraphFactory};
use crate::{Error, Result};
use candle_core::{Device, Tensor, D};
use meter::decoder::{DecodeError, Decoder};
use report::Precision;
use serde::Serialize;
use std::time::Instant;

/// What `engine-check` compares: synthetic weights of one architecture, at each precision.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// Synthetic weights at a real architecture's shapes (see data/models.csv).
    pub synthetic: String,
    /// The precisions to compare, one engine pair each.
    pub precisions: Vec<Precision>,
    /// Sequences decoded together.
    pub batch: usize,
    /// Fixed prompt tokens per sequence: the depth of the KV cache when the decode starts.
    pub prompt_len: usize,
    /// Generated tokens per sequence (compared, and per timed generation).
    pub tokens: usize,
    /// Timed generations per engine (after 2 untimed ones).
    pub timing_runs: usize,
    /// Seed of the synthetic weights.
    pub seed: u64,
    /// CUDA device index (the CPU when the binary has no CUDA).
    pub device: usize,
    /// Leave out the eager engine (its tokens, teacher-forced logits and timing): the graph's
    /// replay is still compared with its kernels run op by op.
    pub graph_only: bool,
}

/// The graph engine against the eager one on one precision.
#[derive(Debug, Clone, Serialize)]
pub struct EagerComparison {
    /// Greedy tokens equal at every position of every sequence.
    pub identical: bool,
    /// Positions (over all sequences) whose tokens agree, of batch · tokens.
    pub agreeing: usize,
    /// First position (0-based, per sequence) where a sequence diverged, if any.
    pub first_divergence: Option<usize>,
    /// Teacher-forced (both engines fed the eager engine's tokens): the largest
    /// max |Δlogit| / max |logit| over all steps.
    pub tf_max_rel_logit_diff: f64,
    /// Teacher-forced steps (× sequences) whose argmax differs between the engines.
    pub tf_argmax_differs: usize,
    /// The largest eager top-1 − top-2 logit gap (relative to max |logit|) among those: a
    /// difference only at near-ties is rounding, not a wrong forward.
    pub tf_max_gap_where_differs: f64,
    /// Eager engine, generated tokens per second (prefill included, as `generate`).
    pub eager_tok_s: f64,
    /// `graph_tok_s / eager_tok_s`.
    pub speedup: f64,
}

/// What one precision's check found.
#[derive(Debug, Clone, Serialize)]
pub struct CheckResult {
    /// The model's name.
    pub model: String,
    /// The precision compared.
    pub precision: Precision,
    /// Sequences decoded together.
    pub batch: usize,
    /// Prompt tokens per sequence (the decode's starting depth).
    pub prompt_len: usize,
    /// Generated tokens per sequence.
    pub tokens: usize,
    /// Against the eager engine; absent with `graph_only`.
    #[serde(flatten)]
    pub eager: Option<EagerComparison>,
    /// The replayed graph's greedy tokens equal those of the same kernels run op by op, uncaptured:
    /// what a capture bug (a stale position, a cache write recorded once) would break. The
    /// comparison with the eager engine can differ at near-ties by rounding; this one cannot.
    pub replay_identical: bool,
    /// First position where the replayed and the op-by-op tokens differ, if any.
    pub replay_first_divergence: Option<usize>,
    /// Graph engine, generated tokens per second, prefill included (as `generate`).
    pub graph_tok_s: f64,
    /// Graph engine, prompt tokens per second of the prefill alone (batch · prompt_len / time).
    pub graph_prefill_tok_s: f64,
    /// Graph engine, the prefill's time: the time to the first token, ms.
    pub graph_prefill_ms: f64,
    /// Graph engine, generated tokens per second of the single-token steps alone, from depth
    /// prompt_len + 1 on (batch · (tokens − 1) / time).
    pub graph_decode_tok_s: f64,
    /// The graph engine's kernel label.
    pub graph_kernel: String,
    /// Where it ran (`cuda:0` or `cpu`).
    pub device: String,
}

impl CheckResult {
    /// One line for the terminal.
    pub fn summary(&self) -> String {
        let r = self;
        let eager = match &r.eager {
            None => "eager left out".to_string(),
            Some(e) => format!(
                "tokens {} ({} of {} agree{}); teacher-forced: max rel logit diff {:.2e}, argmax \
                 differs {}× (eager top-2 gap ≤ {:.2e}); eager {:.1} tok/s",
                if e.identical { "IDENTICAL" } else { "DIFFER" },
                e.agreeing,
                r.batch * r.tokens,
                e.first_divergence
                    .map(|f| format!(", first divergence at token {f}"))
                    .unwrap_or_default(),
                e.tf_max_rel_logit_diff,
                e.tf_argmax_differs,
                e.tf_max_gap_where_differs,
                e.eager_tok_s,
            ),
        };
        format!(
            "{} {} b{} depth {}: {eager}; replay vs op by op {}; graph {:.1} tok/s{} — prefill \
             {:.0} tok/s ({:.1} ms), decode {:.1} tok/s",
            r.model,
            crate::eager::engine_name(r.precision),
            r.batch,
            r.prompt_len,
            match r.replay_first_divergence {
                None => "IDENTICAL".to_string(),
                Some(f) => format!("DIFFER at token {f}"),
            },
            r.graph_tok_s,
            r.eager
                .as_ref()
                .map(|e| format!(" ({:.2}×)", e.speedup))
                .unwrap_or_default(),
            r.graph_prefill_tok_s,
            r.graph_prefill_ms,
            r.graph_decode_tok_s,
        )
    }

    /// Every comparison the check made agrees: the eager engine's tokens (when compared) and the
    /// replay's.
    pub fn agrees(&self) -> bool {
        self.replay_identical && self.eager.as_ref().is_none_or(|e| e.identical)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Decode tok/s of `d`: 2 untimed generations, then the median of `runs` timed ones.
fn rate(d: &mut dyn Decoder, a: &CheckOptions) -> Result<f64, DecodeError> {
    for _ in 0..2 {
        d.generate(a.batch, a.prompt_len, a.tokens)?;
    }
    d.synchronize()?;
    let mut r = Vec::new();
    for _ in 0..a.runs() {
        let t0 = Instant::now();
        let n = d.generate(a.batch, a.prompt_len, a.tokens)?;
        d.synchronize()?;
        r.push(n as f64 / t0.elapsed().as_secs_f64());
    }
    Ok(median(r))
}

impl CheckOptions {
    fn runs(&self) -> usize {
        self.timing_runs.max(1)
    }
}

/// The graph engine's timing: end to end, the prefill alone and the steps alone.
struct GraphTiming {
    tok_s: f64,
    prefill_tok_s: f64,
    prefill_ms: f64,
    decode_tok_s: f64,
}

/// 2 untimed generations, then `runs` timed ones, the prefill and the `tokens − 1` steps each
/// between synchronizations; medians of each.
fn graph_timing(g: &mut GraphDecoder, prompt: &Tensor, a: &CheckOptions) -> Result<GraphTiming> {
    let (b, pl) = prompt.dims2()?;
    let n = a.tokens.max(1);
    let once = |g: &mut GraphDecoder| -> Result<(f64, f64)> {
        g.sync()?;
        let t0 = Instant::now();
        g.prefill(prompt)?;
        g.sync()?;
        let t1 = Instant::now();
        for _ in 1..n {
            g.step()?;
        }
        g.sync()?;
        Ok(((t1 - t0).as_secs_f64(), t1.elapsed().as_secs_f64()))
    };
    for _ in 0..2 {
        once(g)?;
    }
    let (mut e2e, mut pre, mut dec) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..a.runs() {
        let (tp, td) = once(g)?;
        e2e.push((b * n) as f64 / (tp + td));
        pre.push(tp);
        dec.push(if n > 1 {
            (b * (n - 1)) as f64 / td
        } else {
            f64::NAN
        });
    }
    let prefill_s = median(pre);
    Ok(GraphTiming {
        tok_s: median(e2e),
        prefill_tok_s: (b * pl) as f64 / prefill_s,
        prefill_ms: prefill_s * 1e3,
        decode_tok_s: median(dec),
    })
}

/// Compare the two engines for every precision of `a`, calling `each` with every result as it
/// comes (a precision takes a while on a large shape).
pub fn run(a: &CheckOptions, each: impl FnMut(&CheckResult)) -> Result<Vec<CheckResult>> {
    let shape = analysis::find_shape(&a.synthetic)
        .ok_or_else(|| Error::UnknownArchitecture {
            name: a.synthetic.clone(),
            known: analysis::shapes().iter().map(|s| s.name.clone()).collect(),
        })?
        .clone();
    run_shape(shape, a, each)
}

/// The eager engine's greedy tokens (as `CandleDecoder::generate` makes them), the logits of
/// every step after the first (F32), and its rate.
struct EagerRun {
    tokens: Vec<Vec<u32>>,
    logits: Vec<Tensor>,
    tok_s: f64,
}

fn eager_run(
    source: &WeightSource,
    dev: &Device,
    p: Precision,
    prompt: &Tensor,
    a: &CheckOptions,
) -> Result<EagerRun> {
    let mut f = CandleFactory::new(source.clone(), dev.clone())?;
    let mut e = f.load_candle(p)?;
    let (tokens, logits) = eager_greedy(&mut e, prompt, a.tokens.max(1))?;
    Ok(EagerRun {
        tokens,
        logits,
        tok_s: rate(&mut e, a)?,
    })
}

/// The eager engine's greedy tokens of `n` positions after `prompt` (b, len), and the logits of
/// every step after the first (F32).
fn eager_greedy(
    e: &mut crate::eager::CandleDecoder,
    prompt: &Tensor,
    n: usize,
) -> Result<(Vec<Vec<u32>>, Vec<Tensor>)> {
    let (b, pl) = prompt.dims2()?;
    e.clear();
    let mut cache = None;
    let mut next = if b == 1 {
        e.forward(prompt, 0, &mut cache)?
            .argmax_keepdim(D::Minus1)?
    } else {
        let mut last = None;
        for i in 0..pl {
            let col = prompt.narrow(1, i, 1)?.contiguous()?;
            last = Some(e.forward(&col, i, &mut cache)?.argmax_keepdim(D::Minus1)?);
        }
        last.expect("pl ≥ 1")
    };
    let mut toks = vec![next.clone()];
    let mut logits = Vec::new();
    for pos in pl..pl + n - 1 {
        let l = e.forward(&next, pos, &mut cache)?;
        next = l.argmax_keepdim(D::Minus1)?;
        logits.push(l.to_dtype(candle_core::DType::F32)?);
        toks.push(next.clone());
    }
    Ok((Tensor::cat(&toks, 1)?.to_vec2::<u32>()?, logits))
}

/// Both engines' results for one prompt on the same weights (greedy tokens by default): what the
/// real-model test holds against llama.cpp's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Continuations<T = Vec<u32>> {
    /// The eager engine's.
    pub eager: T,
    /// The graph engine's (its step replayed as a CUDA graph where there is one).
    pub graph: T,
}

/// `n` greedy tokens after `prompt` from each engine, loading `precision` from `source`.
pub fn continuations(
    source: &WeightSource,
    precision: Precision,
    prompt: &[u32],
    n: usize,
    dev: &Device,
) -> Result<Continuations> {
    if prompt.is_empty() {
        return Err(Error::EmptyPrompt);
    }
    let ids = Tensor::new(prompt, dev)?.unsqueeze(0)?;
    let n = n.max(1);
    let mut f = CandleFactory::new(source.clone(), dev.clone())?;
    let (mut eager, _) = eager_greedy(&mut f.load_candle(precision)?, &ids, n)?;
    let mut gf = GraphFactory { inner: f };
    let mut g = gf.load_graph(precision)?;
    g.ensure_state(1, prompt.len() + n)?;
    let mut graph = graph_tokens(&mut g, &ids, n, GraphDecoder::step)?;
    Ok(Continuations {
        eager: eager.remove(0),
        graph: graph.remove(0),
    })
}

/// Each engine's log-probabilities (F32, one vocabulary row per position) along `forced` after
/// `prompt`, teacher-forced: row i predicts `forced[i]` (row 0 from the prompt's prefill), every
/// engine fed the same tokens whatever its own argmax. What the real-model test compares with
/// llama.cpp's top log-probabilities along its greedy path.
pub fn teacher_forced_log_probs(
    source: &WeightSource,
    precision: Precision,
    prompt: &[u32],
    forced: &[u32],
    dev: &Device,
) -> Result<Continuations<Vec<Vec<f32>>>> {
    if prompt.is_empty() || forced.is_empty() {
        return Err(Error::EmptyPrompt);
    }
    let rows = |l: &Tensor| -> Result<Vec<f32>> {
        let l = l.to_dtype(candle_core::DType::F32)?.flatten_all()?;
        Ok(candle_nn::ops::log_softmax(&l, D::Minus1)?.to_vec1::<f32>()?)
    };
    let ids = Tensor::new(prompt, dev)?.unsqueeze(0)?;
    let mut f = CandleFactory::new(source.clone(), dev.clone())?;
    let mut e = f.load_candle(precision)?;
    e.clear();
    let mut cache = None;
    let mut eager = vec![rows(&e.forward(&ids, 0, &mut cache)?)?];
    let mut g = GraphFactory { inner: f }.load_graph(precision)?;
    g.ensure_state(1, prompt.len() + forced.len())?;
    let mut graph = vec![rows(&g.prefill(&ids)?)?];
    for (i, &t) in forced[..forced.len() - 1].iter().enumerate() {
        let x = Tensor::new(&[t], dev)?.unsqueeze(0)?;
        eager.push(rows(&e.forward(&x, prompt.len() + i, &mut cache)?)?);
        g.set_tokens(&[t])?;
        graph.push(rows(&g.step_logits()?)?);
    }
    Ok(Continuations { eager, graph })
}

/// Teacher-forced: the static forward (op by op: the kernels the graph replays) fed the eager
/// engine's tokens, logits compared step by step. Returns the largest relative logit
/// difference, the steps whose argmax differs, and the largest eager top-2 gap among those.
fn teacher_forced(
    g: &mut GraphDecoder,
    prompt: &Tensor,
    eager: &EagerRun,
) -> Result<(f64, usize, f64)> {
    let (mut tf_max, mut tf_diff, mut tf_gap) = (0f64, 0usize, 0f64);
    g.prefill(prompt)?;
    for (i, el) in eager.logits.iter().enumerate() {
        let col: Vec<u32> = eager.tokens.iter().map(|row| row[i]).collect();
        g.set_tokens(&col)?;
        let gl = g
            .step_eager()?
            .to_dtype(candle_core::DType::F32)?
            .to_vec2::<f32>()?;
        for (er, gr) in el.to_vec2::<f32>()?.iter().zip(&gl) {
            let m = er
                .iter()
                .fold(0f32, |m, x| m.max(x.abs()))
                .max(f32::MIN_POSITIVE);
            let d = er
                .iter()
                .zip(gr)
                .fold(0f32, |d, (x, y)| d.max((x - y).abs()));
            tf_max = tf_max.max(f64::from(d / m));
            if argmax(er) != argmax(gr) {
                tf_diff += 1;
                let mut s: Vec<f32> = er.clone();
                s.sort_by(|a, b| b.total_cmp(a));
                tf_gap = tf_gap.max(f64::from((s[0] - s[1]) / m));
            }
        }
    }
    Ok((tf_max, tf_diff, tf_gap))
}

fn argmax(r: &[f32]) -> usize {
    r.iter()
        .enumerate()
        .fold(
            (0, f32::NEG_INFINITY),
            |b, (j, &x)| if x > b.1 { (j, x) } else { b },
        )
        .0
}

fn run_shape(
    shape: analysis::ModelShape,
    a: &CheckOptions,
    mut each: impl FnMut(&CheckResult),
) -> Result<Vec<CheckResult>> {
    let dev = Device::cuda_if_available(a.device)?;
    let source = WeightSource::Synthetic {
        shape: shape.clone(),
        seed: a.seed,
    };
    let (b, pl, n) = (a.batch, a.prompt_len.max(1), a.tokens.max(1));
    let prompt = Tensor::from_vec(prompt_ids(b, pl, shape.vocab), (b, pl), &dev)?;
    let mut out = Vec::new();
    for &p in &a.precisions {
        let eager = (!a.graph_only)
            .then(|| eager_run(&source, &dev, p, &prompt, a))
            .transpose()?;
        // Graph: prefill, then the replayed step; the token buffer copied after each step
        // (outside the graph).
        let mut gf = GraphFactory {
            inner: CandleFactory::new(source.clone(), dev.clone())?,
        };
        let mut g = gf.load_graph(p)?;
        g.ensure_state(b, pl + n)?;
        let got = graph_tokens(&mut g, &prompt, n, GraphDecoder::step)?;
        // The same kernels op by op, never captured (CUDA: the captured graph is kept for later).
        let ops = graph_tokens(&mut g, &prompt, n, |g| g.step_eager().map(drop))?;
        let (_, replay_first) = agreement(&ops, &got);
        let compared = match &eager {
            Some(e) => Some((e, teacher_forced(&mut g, &prompt, e)?)),
            None => None,
        };
        let t = graph_timing(&mut g, &prompt, a)?;
        let eager = compared.map(|(e, (tf_max, tf_diff, tf_gap))| {
            let (agreeing, first) = agreement(&e.tokens, &got);
            EagerComparison {
                identical: first.is_none(),
                agreeing,
                first_divergence: first,
                tf_max_rel_logit_diff: tf_max,
                tf_argmax_differs: tf_diff,
                tf_max_gap_where_differs: tf_gap,
                eager_tok_s: e.tok_s,
                speedup: t.tok_s / e.tok_s,
            }
        });
        let r = CheckResult {
            model: shape.name.clone(),
            precision: p,
            batch: b,
            prompt_len: pl,
            tokens: n,
            eager,
            replay_identical: replay_first.is_none(),
            replay_first_divergence: replay_first,
            graph_tok_s: t.tok_s,
            graph_prefill_tok_s: t.prefill_tok_s,
            graph_prefill_ms: t.prefill_ms,
            graph_decode_tok_s: t.decode_tok_s,
            graph_kernel: g.kernel(),
            device: format!("{:?}", dev.location()),
        };
        each(&r);
        out.push(r);
    }
    Ok(out)
}

/// Greedy tokens of `n` positions from a fresh prefill of `prompt`, each after one `step` (the
/// token buffer copied after each, outside any graph).
fn graph_tokens(
    g: &mut GraphDecoder,
    prompt: &Tensor,
    n: usize,
    mut step: impl FnMut(&mut GraphDecoder) -> Result<()>,
) -> Result<Vec<Vec<u32>>> {
    let tok = |g: &GraphDecoder| -> Result<Tensor> {
        Ok(g.state
            .as_ref()
            .ok_or(crate::Error::NoDecodeState)?
            .tok
            .copy()?)
    };
    g.prefill(prompt)?;
    let mut toks = vec![tok(g)?];
    for _ in 1..n {
        step(g)?;
        toks.push(tok(g)?);
    }
    Ok(Tensor::cat(&toks, 1)?.to_vec2::<u32>()?)
}

/// Positions whose tokens agree, and the first (per sequence) where they do not.
fn agreement(want: &[Vec<u32>], got: &[Vec<u32>]) -> (usize, Option<usize>) {
    let mut agreeing = 0;
    let mut first: Option<usize> = None;
    for (w, g) in want.iter().zip(got) {
        for (i, (x, y)) in w.iter().zip(g).enumerate() {
            if x == y {
                agreeing += 1;
            } else if first.is_none_or(|f| i < f) {
                first = Some(i);
            }
        }
    }
    (agreeing, first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_counts_equal_positions_and_the_earliest_divergence() {
        let want = vec![vec![1, 2, 3, 4], vec![5, 6, 7, 8]];
        assert_eq!(agreement(&want, &want), (8, None));
        // Sequence 0 diverges at 3, sequence 1 at 1: the earliest is 1.
        let got = vec![vec![1, 2, 3, 9], vec![5, 0, 7, 8]];
        assert_eq!(agreement(&want, &got), (6, Some(1)));
    }

    #[test]
    fn engine_check_agrees_on_the_cpu() {
        let a = CheckOptions {
            synthetic: "tiny".into(),
            precisions: vec![Precision::Q4_0, Precision::Fp16],
            batch: 1,
            prompt_len: 3,
            tokens: 3,
            timing_runs: 1,
            seed: 1,
            device: 0,
            graph_only: false,
        };
        let mut seen = 0;
        let r = run_shape(crate::testing::tiny("llama"), &a, |_| seen += 1).unwrap();
        assert_eq!(seen, 2);
        for r in r {
            let e = r.eager.as_ref().expect("compared with the eager engine");
            assert!(e.identical && r.agrees(), "{r:?}");
            assert!(
                r.replay_identical && r.replay_first_divergence.is_none(),
                "{r:?}"
            );
            assert_eq!(e.agreeing, 3);
            assert!(e.eager_tok_s > 0.0 && r.graph_tok_s > 0.0);
            // Prefill and steps timed apart: 3 prompt tokens, 2 steps.
            assert!(r.graph_prefill_tok_s > 0.0 && r.graph_prefill_ms > 0.0);
            assert!(r.graph_decode_tok_s > 0.0 && r.graph_decode_tok_s.is_finite());
            let line = r.summary();
            assert!(
                line.contains("depth 3") && line.contains("decode"),
                "{line}"
            );
        }
        // Graph only: no eager fields, in the line or the JSON.
        let a = CheckOptions {
            graph_only: true,
            precisions: vec![Precision::Fp16],
            ..a
        };
        let r = run_shape(crate::testing::tiny("llama"), &a, |_| {}).unwrap();
        assert!(r[0].eager.is_none() && r[0].agrees());
        assert!(r[0].summary().contains("eager left out"));
        let json = serde_json::to_value(&r[0]).unwrap();
        assert!(json.get("eager_tok_s").is_none() && json.get("graph_decode_tok_s").is_some());
    }
}
