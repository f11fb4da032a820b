//! The graph engine's settings read from the environment once, for A/B runs on the GPU: a
//! [`Switch`] (`1` on, `0` off, anything else its default) or a numeric [`Knob`] (a launch shape
//! from an allowed set). Every `QE_*` variable the engines read is one of these.

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
