//! The decode engine a run uses ([`Engine`]), and the graph decode engine (`--engine graph`): a
//! static-KV-cache forward ([`static_model`]) whose decode step reads and writes only device
//! tensors, captured once into a CUDA graph and replayed for every token. The eager engine
//! ([`crate::candle`]) runs candle's own models op by op and is launch-bound at batch 1; this one
//! launches one graph per token.
//!
//! On the CPU (tests, or a binary without `cuda`) the same step runs op by op: the static-cache
//! forward is what is tested against the eager models, the capture is what the GPU adds.
//!
//! [`Engine`] itself needs no feature (sweep plans name it); the engine's code needs `candle`,
//! its CUDA graph and kernels `cuda`.

#[cfg(feature = "candle")]
pub mod check;
#[cfg(feature = "candle")]
pub mod fused;
#[cfg(all(test, feature = "candle"))]
mod fused_tests;
#[cfg(feature = "candle")]
mod graph;
#[cfg(feature = "candle")]
pub mod ops;
#[cfg(feature = "candle")]
pub mod q8;
#[cfg(feature = "candle")]
pub mod static_model;
#[cfg(all(test, feature = "candle"))]
mod tests;

#[cfg(feature = "candle")]
pub use graph::{GraphDecoder, GraphFactory};

/// A switch of the graph engine read from the environment once, for A/B runs on the GPU: `1`
/// turns it on, `0` off, anything else (or nothing) leaves its default.
pub struct Switch {
    var: &'static str,
    default: bool,
    on: std::sync::OnceLock<bool>,
}

impl Switch {
    /// The switch `var`, `default` when unset.
    pub const fn new(var: &'static str, default: bool) -> Self {
        Switch {
            var,
            default,
            on: std::sync::OnceLock::new(),
        }
    }

    /// Whether it is on (the environment is read the first time).
    pub fn on(&self) -> bool {
        *self
            .on
            .get_or_init(|| match std::env::var(self.var).as_deref() {
                Ok("1") => true,
                Ok("0") => false,
                _ => self.default,
            })
    }
}

/// A numeric engine setting read from the environment once: `var` when it is one of `allowed`,
/// else `default` (a launch shape to tune on the card, e.g. `QE_NORM_THREADS=512`).
pub struct Knob {
    var: &'static str,
    default: u32,
    allowed: &'static [u32],
    value: std::sync::OnceLock<u32>,
}

impl Knob {
    /// The knob `var`, `default` when unset or not one of `allowed`.
    pub const fn new(var: &'static str, default: u32, allowed: &'static [u32]) -> Self {
        Knob {
            var,
            default,
            allowed,
            value: std::sync::OnceLock::new(),
        }
    }

    /// Its value (the environment is read the first time; a value it does not allow is logged
    /// and the default used, so a tuning run never records a setting it did not run).
    pub fn get(&self) -> u32 {
        *self.value.get_or_init(|| {
            let raw = std::env::var(self.var).ok();
            let v = self.parse(raw.as_deref());
            if let Some(r) = raw.filter(|r| r.trim().parse() != Ok(v)) {
                tracing::warn!(var = self.var, value = %r, allowed = ?self.allowed,
                    default = self.default, "not an allowed value: the default is used");
            }
            v
        })
    }

    /// The value `raw` (the variable's text, if set) stands for.
    fn parse(&self, raw: Option<&str>) -> u32 {
        raw.and_then(|v| v.trim().parse().ok())
            .filter(|v| self.allowed.contains(v))
            .unwrap_or(self.default)
    }

    /// `VAR=value` when it is not its default (for a kernel label), else `None`.
    pub fn label(&self) -> Option<String> {
        (self.get() != self.default).then(|| format!("{}={}", self.var, self.get()))
    }
}

/// The report's `stack.engine` for the graph engine (the eager one says "candle").
pub const ENGINE_NAME: &str = "candle-graph";

/// Which decode engine a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// Static KV cache, one CUDA graph per token.
    #[default]
    Graph,
    /// candle_transformers' models, op by op.
    Eager,
}

/// An engine name other than `graph` or `eager`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown engine {0:?} (graph, eager)")]
pub struct UnknownEngine(pub String);

impl Engine {
    /// Every engine, in the order the CLI lists them.
    pub const ALL: [Engine; 2] = [Engine::Graph, Engine::Eager];

    /// The report's `stack.engine`.
    pub fn stack_name(self) -> &'static str {
        match self {
            Engine::Graph => ENGINE_NAME,
            Engine::Eager => "candle",
        }
    }

    /// The CLI's (and plans') name: `graph` or `eager`.
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Graph => "graph",
            Engine::Eager => "eager",
        }
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Engine {
    type Err = UnknownEngine;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Engine::ALL
            .into_iter()
            .find(|e| e.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| UnknownEngine(s.to_string()))
    }
}

#[cfg(test)]
mod name_tests {
    use super::*;

    #[test]
    fn engine_names_parse_and_print() {
        for e in Engine::ALL {
            assert_eq!(e.as_str().parse::<Engine>(), Ok(e));
            assert_eq!(e.to_string(), e.as_str());
        }
        assert_eq!("Eager".parse::<Engine>(), Ok(Engine::Eager));
        assert_eq!("cuda".parse::<Engine>(), Err(UnknownEngine("cuda".into())));
        assert_eq!(Engine::default(), Engine::Graph);
        assert_eq!(Engine::Eager.stack_name(), "candle");
        assert_eq!(Engine::Graph.stack_name(), "candle-graph");
    }
}

#[cfg(test)]
mod switch_tests {
    use super::{Knob, Switch};

    /// Unset, a switch is its default; the value is read once and kept.
    #[test]
    fn an_unset_switch_is_its_default() {
        static OFF: Switch = Switch::new("QE_TEST_SWITCH_NEVER_SET_A", false);
        static ON: Switch = Switch::new("QE_TEST_SWITCH_NEVER_SET_B", true);
        assert!(!OFF.on() && ON.on());
        assert!(!OFF.on() && ON.on());
    }

    /// A knob is its default when unset or set to a value it does not allow; its label names a
    /// value only when it is not the default.
    #[test]
    fn a_knob_takes_only_allowed_values() {
        let k = Knob::new("QE_TEST_KNOB_NEVER_SET", 1024, &[256, 1024]);
        assert_eq!(k.parse(None), 1024);
        assert_eq!(k.parse(Some(" 256 ")), 256);
        assert_eq!(k.parse(Some("300")), 1024);
        assert_eq!(k.parse(Some("many")), 1024);
        assert_eq!((k.get(), k.label()), (1024, None));
        let other = Knob::new("QE_TEST_KNOB_NEVER_SET", 512, &[256]);
        // Unset: the default, even one the set leaves out.
        assert_eq!(other.get(), 512);
        let tuned = Knob::new("QE_TEST_KNOB_NEVER_SET", 1024, &[256, 1024]);
        let _ = tuned.value.set(256);
        assert_eq!(tuned.label().as_deref(), Some("QE_TEST_KNOB_NEVER_SET=256"));
    }
}
