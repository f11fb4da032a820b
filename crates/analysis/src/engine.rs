//! Which engine a software stack is: the words of an anchor's free-text `stack` cell (`candle
//! 0.11.1 GGUF/cuBLAS kernels, …`, `transformers + bitsandbytes (…)`) and a report's
//! `stack.engine`, read the one way every module keys curves, baselines and sweeps by.
//!
//! A dataset row reads its stack once, into [`crate::Anchor::engines`] ([`StackEngines`]); the
//! functions here are for texts that are not a row's (a class's stack list, a report's engine,
//! a stack picked in the page).

use report::WeightsKind;
use serde::{Deserialize, Serialize};

/// The engine a report's `stack.engine` names, as curves are keyed: its first word, lower case
/// (`candle`, `candle-graph`, `llama.cpp`, `transformers`).
pub fn engine_key(engine: &str) -> String {
    engine
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_ascii_lowercase()
}

/// The engines an anchor's `stack` text names: the first word of each `+`-separated part before
/// any parenthesis, lower case. `candle 0.11.1 GGUF/cuBLAS kernels, …` → `[candle]`;
/// `transformers + bitsandbytes (dataset v1.1.0)` → `[transformers, bitsandbytes]`;
/// `llama.cpp GGUF (…)` → `[llama.cpp]`.
pub fn stack_engines(stack: &str) -> Vec<String> {
    let head = stack.split('(').next().unwrap_or("");
    let mut out: Vec<String> = Vec::new();
    for part in head.split('+') {
        let e = engine_key(part);
        if !e.is_empty() && !out.contains(&e) {
            out.push(e);
        }
    }
    out
}

/// The engine a stack text names first, as classes are keyed (`transformers` for `transformers +
/// bitsandbytes (…)`, `candle`, `candle-graph`, `llama.cpp`).
pub fn curve_engine(stack: &str) -> String {
    stack_engines(stack).into_iter().next().unwrap_or_default()
}

/// Whether a `stack` description names one of our own meter's candle engines — the eager `candle`
/// or the CUDA-graph `candle-graph` (rows written by `quantenergy aggregate` with stacks starting
/// "candle"). Both load the same weights, so this is the right test for a storage format; where
/// the two engines behave differently (baselines, curves, batch curves, latency) compare
/// [`curve_engine`] instead.
pub fn is_candle_stack(stack: &str) -> bool {
    stack
        .trim_start()
        .to_ascii_lowercase()
        .starts_with("candle")
}

/// The engines one stack text names ([`stack_engines`]), read once: the first is the one curves
/// are keyed by ([`StackEngines::curve`], what [`curve_engine`] returns).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct StackEngines(Vec<String>);

impl StackEngines {
    /// The engines `stack` names.
    pub fn parse(stack: &str) -> StackEngines {
        StackEngines(stack_engines(stack))
    }

    /// The engine named first, as classes are keyed (`""` for a stack that names none).
    pub fn curve(&self) -> &str {
        self.0.first().map(String::as_str).unwrap_or("")
    }

    /// Every engine named, in the text's order (`[transformers, bitsandbytes]`).
    pub fn all(&self) -> &[String] {
        &self.0
    }
}

/// The stack text's weights kind, as `aggregate` writes it (`…, real weights`): read once per
/// row into [`crate::Anchor::weights`] when the dataset is parsed.
pub fn weights_of(stack: &str) -> Option<WeightsKind> {
    let last = stack.rsplit(", ").next()?;
    match last.strip_suffix(" weights")? {
        "real" => Some(WeightsKind::Real),
        "synthetic" => Some(WeightsKind::Synthetic),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_are_read_from_the_stack_label() {
        let real = "candle-graph 0.11.1 GGUF/cuBLAS kernels, CUDA 13.0, real weights";
        let synthetic = "candle-graph 0.11.1 GGUF/cuBLAS kernels, CUDA 13.0, synthetic weights";
        assert_eq!(weights_of(real), Some(WeightsKind::Real));
        assert_eq!(weights_of(synthetic), Some(WeightsKind::Synthetic));
        assert_eq!(weights_of("transformers + bitsandbytes"), None);
    }

    #[test]
    fn parsed_engines_are_the_stack_texts() {
        let s = "transformers + bitsandbytes (dataset v1.1.0)";
        let e = StackEngines::parse(s);
        assert_eq!(e.all(), stack_engines(s).as_slice());
        assert_eq!(e.curve(), curve_engine(s));
        assert_eq!(e.curve(), "transformers");
        assert_eq!(StackEngines::parse("(no engine)").curve(), "");
        assert_eq!(curve_engine("(no engine)"), "");
    }
}
