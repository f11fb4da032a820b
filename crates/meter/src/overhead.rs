//! What the power-trace thread costs: an A/B inside one process. One model is loaded once and
//! warmed up; then `pairs` pairs of windows run back to back, one window with the sampler
//! thread on and one with it off, in a seeded, balanced random order inside each pair. Comparing windows of
//! the same loaded model side by side removes the load-to-load spread (±15 % between processes on
//! the launch-bound H200 decode) that made separate trace-on/trace-off runs inconclusive.
//!
//! The figure is the paired throughput loss `(tok/s off − tok/s on) / tok/s off` in %, its mean
//! over pairs and a Student-t 95 % interval. The target is < 0.5 %.

use crate::decoder::{DecodeError, DecoderFactory};
use crate::meter::{Clock, DeviceInfo, EnergyMeter, HostWindow, MeterError};
use crate::protocol::{metered_window, WindowError};
use analysis::stats::t95;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use report::Precision;
use std::sync::Arc;

/// The trace-thread overhead A/B: what to decode and how many paired windows.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OverheadConfig {
    /// The precision decoded in every window.
    pub precision: Precision,
    /// Number of (trace on, trace off) window pairs.
    pub pairs: usize,
    /// Decode calls (each `tokens` new tokens) per window.
    pub iterations: usize,
    /// Tokens generated per window.
    pub tokens: usize,
    /// Sequences decoded at once.
    pub batch: usize,
    /// Prompt length, tokens.
    pub prompt_len: usize,
    /// Untimed warm-up iterations before the windows.
    pub warmup: usize,
    /// Power-trace sample rate when the trace is on, Hz.
    pub sample_hz: f64,
    /// Seed for the window order and the prompt.
    pub seed: u64,
}

/// One metered window of the A/B.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Window {
    /// Index of the pair this window belongs to.
    pub pair: usize,
    /// Whether the power-trace thread ran during this window.
    pub trace_on: bool,
    /// Tokens generated in the window.
    pub tokens: u64,
    /// Window length, s.
    pub seconds: f64,
    /// Energy from the hardware counter, J.
    pub counter_j: f64,
    /// Samples taken and the rate achieved (trace-on windows only).
    pub samples: Option<usize>,
    /// The trace's achieved sample rate, Hz (None when the trace was off).
    pub achieved_hz: Option<f64>,
    /// Hypervisor steal and this process's CPU use during the window.
    pub host: Option<HostWindow>,
}

impl Window {
    /// Throughput, tokens/s.
    pub fn tok_s(&self) -> f64 {
        self.tokens as f64 / self.seconds
    }
    /// Energy per token from the counter, mJ.
    pub fn mj_per_token(&self) -> f64 {
        self.counter_j * 1000.0 / self.tokens as f64
    }
}

/// The paired comparison. `overhead_pct` > 0 means the trace thread slowed decoding.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PairedSummary {
    /// Number of complete pairs summarized.
    pub pairs: usize,
    /// Mean throughput with the trace on, tokens/s.
    pub tok_s_on: f64,
    /// Mean throughput with the trace off, tokens/s.
    pub tok_s_off: f64,
    /// Mean per-pair throughput cost of the trace, % of trace-off tok/s.
    pub overhead_pct: f64,
    /// Standard deviation of the per-pair overhead, %.
    pub overhead_sd_pct: f64,
    /// 95 % confidence interval of the overhead, % (low, high).
    pub ci95_pct: (f64, f64),
    /// Mean energy per token with the trace on, mJ.
    pub mj_per_token_on: f64,
    /// Mean energy per token with the trace off, mJ.
    pub mj_per_token_off: f64,
    /// The overhead target the verdict is judged against, %.
    pub target_pct: f64,
    /// Whether the overhead meets the target.
    pub verdict: Verdict,
}

/// How the measured overhead compares with the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The whole 95 % interval lies below the target.
    BelowTarget,
    /// The whole interval lies above it.
    AboveTarget,
    /// The interval straddles the target: more pairs needed.
    Unresolved,
}

/// Everything one overhead A/B run produced.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OverheadResult {
    /// The configuration it ran with.
    pub config: OverheadConfig,
    /// The device it ran on.
    pub device: DeviceInfo,
    /// The decode kernel used.
    pub kernel: String,
    /// Every window, in the order run.
    pub windows: Vec<Window>,
    /// The paired summary (None if too few windows succeeded).
    pub summary: Option<PairedSummary>,
}

/// Why an overhead A/B could not run.
#[derive(Debug, thiserror::Error)]
pub enum OverheadError {
    /// The meter failed.
    #[error(transparent)]
    Meter(#[from] MeterError),
    /// The decoder failed loading, warming up, decoding or synchronizing the arm.
    #[error("{precision} arm")]
    Decode {
        /// The precision that failed to load.
        precision: Precision,
        /// The engine's error.
        #[source]
        source: DecodeError,
    },
    /// A window yielded no figure.
    #[error(transparent)]
    Window(#[from] WindowError),
    /// The configuration asks for too few pairs or iterations: (pairs, iterations per window).
    #[error("need at least 2 pairs and 1 iteration per window (got {0} pairs, {1} iterations)")]
    TooFew(usize, usize),
}

/// The overhead target: the trace may cost at most this much throughput, %.
pub const TARGET_PCT: f64 = 0.5;

/// Summarise windows into paired differences. `None` unless there are ≥ 2 complete pairs.
pub fn paired_summary(windows: &[Window]) -> Option<PairedSummary> {
    let mut pairs = Vec::new();
    let max_pair = windows.iter().map(|w| w.pair).max()?;
    for p in 0..=max_pair {
        let on = windows.iter().find(|w| w.pair == p && w.trace_on);
        let off = windows.iter().find(|w| w.pair == p && !w.trace_on);
        if let (Some(on), Some(off)) = (on, off) {
            pairs.push((on, off));
        }
    }
    let n = pairs.len();
    if n < 2 {
        return None;
    }
    let mean = |f: &dyn Fn(&(&Window, &Window)) -> f64| pairs.iter().map(f).sum::<f64>() / n as f64;
    let diffs: Vec<f64> = pairs
        .iter()
        .map(|(on, off)| (off.tok_s() - on.tok_s()) / off.tok_s() * 100.0)
        .collect();
    let d = analysis::stats::mean(&diffs);
    let sd = analysis::stats::sample_sd(&diffs)?;
    let half = t95(n - 1) * sd / (n as f64).sqrt();
    let ci = (d - half, d + half);
    let verdict = if ci.1 < TARGET_PCT {
        Verdict::BelowTarget
    } else if ci.0 > TARGET_PCT {
        Verdict::AboveTarget
    } else {
        Verdict::Unresolved
    };
    Some(PairedSummary {
        pairs: n,
        tok_s_on: mean(&|(on, _)| on.tok_s()),
        tok_s_off: mean(&|(_, off)| off.tok_s()),
        overhead_pct: d,
        overhead_sd_pct: sd,
        ci95_pct: ci,
        mj_per_token_on: mean(&|(on, _)| on.mj_per_token()),
        mj_per_token_off: mean(&|(_, off)| off.mj_per_token()),
        target_pct: TARGET_PCT,
        verdict,
    })
}

/// Load once, warm up, then run the alternating windows.
pub fn run(
    cfg: &OverheadConfig,
    meter: &mut dyn EnergyMeter,
    decoders: &mut dyn DecoderFactory,
    clock: Arc<dyn Clock>,
) -> Result<OverheadResult, OverheadError> {
    if cfg.pairs < 2 || cfg.iterations == 0 {
        return Err(OverheadError::TooFew(cfg.pairs, cfg.iterations));
    }
    let device = meter.info()?;
    let decode_err = |source: DecodeError| OverheadError::Decode {
        precision: cfg.precision,
        source,
    };
    let mut dec = decoders.load(cfg.precision).map_err(decode_err)?;
    for _ in 0..cfg.warmup {
        dec.generate(cfg.batch, cfg.prompt_len, cfg.tokens)
            .map_err(decode_err)?;
    }
    dec.synchronize().map_err(decode_err)?;
    // Balanced order: half the pairs start with the trace on, half with it off, shuffled — so a
    // drift (warming card, clock ramp) cannot favour one side.
    let mut rng = rand::rngs::StdRng::seed_from_u64(cfg.seed);
    let mut first_on: Vec<bool> = (0..cfg.pairs).map(|i| i % 2 == 0).collect();
    first_on.shuffle(&mut rng);
    let mut windows = Vec::with_capacity(cfg.pairs * 2);
    for (pair, first_on) in first_on.into_iter().enumerate() {
        for trace_on in [first_on, !first_on] {
            let (tokens, m) = metered_window(
                meter,
                &clock,
                trace_on.then_some(cfg.sample_hz),
                || -> Result<u64, OverheadError> {
                    let mut tokens = 0u64;
                    for _ in 0..cfg.iterations {
                        tokens += dec
                            .generate(cfg.batch, cfg.prompt_len, cfg.tokens)
                            .map_err(decode_err)? as u64;
                    }
                    dec.synchronize().map_err(decode_err)?;
                    Ok(tokens)
                },
            )?;
            windows.push(Window {
                pair,
                trace_on,
                tokens,
                seconds: m.seconds,
                counter_j: m.counter_j,
                samples: m.trace.as_ref().map(|t| t.samples.len()),
                achieved_hz: m.trace.as_ref().map(|t| t.achieved_hz),
                host: m.host,
            });
        }
    }
    Ok(OverheadResult {
        config: cfg.clone(),
        device,
        kernel: dec.kernel(),
        summary: paired_summary(&windows),
        windows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(pair: usize, trace_on: bool, seconds: f64) -> Window {
        Window {
            pair,
            trace_on,
            tokens: 1000,
            seconds,
            counter_j: 100.0 * seconds,
            samples: trace_on.then_some(50),
            achieved_hz: trace_on.then_some(50.0),
            host: None,
        }
    }

    #[test]
    fn paired_overhead_against_worked_numbers() {
        // Pair losses: 1 − 10/10.1 = 0.990 %, 1 − 10/10.05 = 0.498 %, 1 − 10/10.0 = 0 %.
        let ws = [
            w(0, true, 10.1),
            w(0, false, 10.0),
            w(1, false, 10.0),
            w(1, true, 10.05),
            w(2, true, 10.0),
            w(2, false, 10.0),
        ];
        let s = paired_summary(&ws).unwrap();
        let d = [1.0 - 10.0 / 10.1, 1.0 - 10.0 / 10.05, 0.0].map(|x| x * 100.0);
        let mean = d.iter().sum::<f64>() / 3.0;
        assert!((s.overhead_pct - mean).abs() < 1e-9, "{s:?}");
        assert!((mean - 0.4960).abs() < 1e-3);
        let sd = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 2.0).sqrt();
        assert!((s.ci95_pct.1 - (mean + 4.303 * sd / 3f64.sqrt())).abs() < 1e-9);
        assert_eq!(s.verdict, Verdict::Unresolved);
        assert_eq!(s.pairs, 3);
        // 100 W at 100 tok/s → 1000 mJ/token, on or off.
        assert!((s.mj_per_token_off - 1000.0).abs() < 1e-9);
    }

    #[test]
    fn verdicts_follow_the_interval_not_the_mean() {
        let small: Vec<Window> = (0..5)
            .flat_map(|p| [w(p, true, 10.001 + p as f64 * 1e-4), w(p, false, 10.0)])
            .collect();
        assert_eq!(
            paired_summary(&small).unwrap().verdict,
            Verdict::BelowTarget
        );
        let big: Vec<Window> = (0..5)
            .flat_map(|p| [w(p, true, 10.2 + p as f64 * 1e-3), w(p, false, 10.0)])
            .collect();
        assert_eq!(paired_summary(&big).unwrap().verdict, Verdict::AboveTarget);
        // One complete pair is not a comparison.
        assert!(paired_summary(&big[..3]).is_none());
    }
}
