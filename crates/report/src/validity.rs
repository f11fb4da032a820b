//! Whether a report's energy windows can be trusted, as reason codes (after InferenceX's
//! `power_valid`): each measured arm's window checked against six rules, each rule either
//! passed, flagged, or unknown because the report lacks the field it needs. The same function
//! writes the meter's `validity` block and re-derives it for older reports, so the block a file
//! carries can always be checked against its own fields.

use serde::{Deserialize, Serialize};

use crate::{Arm, ArmStatus, Report};

/// Shortest energy window whose counter reading we trust, s (the ML.ENERGY benchmark's bound).
pub const MIN_WINDOW_S: f64 = 5.0;
/// Largest bracketing error the counter's update period may allow over a window: one update
/// period of energy at either end, as a share of the window.
pub const MAX_BRACKET_ERROR: f64 = 0.02;
/// Largest |counter ÷ trace − 1|.
pub const MAX_COUNTER_TRACE_GAP: f64 = 0.02;
/// Smallest share of the window the GPU must be busy for the window to measure the card, %.
pub const MIN_GPU_BUSY_PCT: f64 = 80.0;
/// Largest share of the window the clocks may be held down by a power or thermal limit, %.
pub const MAX_THROTTLED_PCT: f64 = 1.0;

/// One rule of [`assess`].
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    /// Window ≥ [`MIN_WINDOW_S`].
    Window,
    /// The counter's update period allows at most [`MAX_BRACKET_ERROR`] over the window.
    CounterPeriod,
    /// The cooldown before the arm reached its targets.
    Cooldown,
    /// The counter and the power trace agree within [`MAX_COUNTER_TRACE_GAP`].
    CounterTrace,
    /// The GPU was busy ≥ [`MIN_GPU_BUSY_PCT`] of the window.
    GpuBusy,
    /// No power or thermal throttling over more than [`MAX_THROTTLED_PCT`] of the window.
    Throttle,
}

impl Check {
    /// Every rule, in the order they are reported.
    pub const ALL: [Check; 6] = [
        Check::Window,
        Check::CounterPeriod,
        Check::Cooldown,
        Check::CounterTrace,
        Check::GpuBusy,
        Check::Throttle,
    ];

    /// What the rule asks, in words.
    pub fn rule(self) -> &'static str {
        match self {
            Check::Window => "energy window ≥ 5 s",
            Check::CounterPeriod => "counter update period ≤ 2 % of the window",
            Check::Cooldown => "cooldown reached its targets",
            Check::CounterTrace => "counter and power trace within 2 %",
            Check::GpuBusy => "GPU busy ≥ 80 % of the window",
            Check::Throttle => "no power or thermal throttling",
        }
    }
}

/// Why an arm's window is flagged.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// The window was shorter than [`MIN_WINDOW_S`].
    ShortWindow,
    /// The counter moves too rarely for this window.
    CoarseCounter,
    /// The cooldown did not reach its targets.
    CooldownNotConverged,
    /// Counter and trace disagree.
    CounterTraceDisagree,
    /// The GPU idled for much of the window, waiting on the host.
    HostBound,
    /// A power limit held the clocks down.
    PowerThrottled,
    /// A thermal limit held the clocks down.
    ThermalThrottled,
}

impl Reason {
    /// The reason code as the report spells it.
    pub fn code(self) -> &'static str {
        match self {
            Reason::ShortWindow => "short_window",
            Reason::CoarseCounter => "coarse_counter",
            Reason::CooldownNotConverged => "cooldown_not_converged",
            Reason::CounterTraceDisagree => "counter_trace_disagree",
            Reason::HostBound => "host_bound",
            Reason::PowerThrottled => "power_throttled",
            Reason::ThermalThrottled => "thermal_throttled",
        }
    }
}

/// One raised flag: its reason, the arm, and the figures behind it in words.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Flag {
    /// The reason code.
    pub code: Reason,
    /// The arm's precision (schema spelling), or `null` for the report's one window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm: Option<String>,
    /// What was found, against what the rule asks.
    pub detail: String,
}

/// The verdict over every rule and every measured arm.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Every rule was checked on every arm, and none raised a flag.
    Valid,
    /// At least one flag.
    Flagged,
    /// No flag, but at least one rule could not be checked.
    Unknown,
}

impl Status {
    /// The verdict as the report spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Valid => "valid",
            Status::Flagged => "flagged",
            Status::Unknown => "unknown",
        }
    }
}

/// The `validity` block of a report.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Validity {
    /// The verdict.
    pub status: Status,
    /// Every flag raised, arm by arm.
    #[serde(default)]
    pub flags: Vec<Flag>,
    /// The rules that could not be checked on some measured arm (its report lacks the field).
    #[serde(default)]
    pub unknown: Vec<Check>,
}

impl Validity {
    /// Whether any flag names this arm (or the report's one window when `arm` is `None`).
    pub fn flags_arm(&self, arm: Option<&str>) -> bool {
        self.flags
            .iter()
            .any(|f| f.arm.is_none() || f.arm.as_deref() == arm)
    }

    /// The verdict in one sentence, for a terminal or a card (the lines follow it).
    pub fn headline(&self) -> String {
        match self.status {
            Status::Valid => {
                let rules: Vec<&str> = Check::ALL.iter().map(|c| c.rule()).collect();
                format!(
                    "valid: every window passes every rule ({})",
                    rules.join("; ")
                )
            }
            Status::Flagged => format!(
                "flagged ({} flag{}): read the figures with these in mind",
                self.flags.len(),
                if self.flags.len() == 1 { "" } else { "s" }
            ),
            Status::Unknown => "unknown: the report lacks figures some rules need".into(),
        }
    }

    /// One line per flag and one for the rules not checked, for a terminal or a card.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .flags
            .iter()
            .map(|f| match &f.arm {
                Some(a) => format!("{} ({a}): {}", f.code.code(), f.detail),
                None => format!("{}: {}", f.code.code(), f.detail),
            })
            .collect();
        if !self.unknown.is_empty() {
            let rules: Vec<&str> = self.unknown.iter().map(|c| c.rule()).collect();
            out.push(format!(
                "not checked (the report lacks the figure): {}",
                rules.join("; ")
            ));
        }
        out
    }
}

/// The figures of one energy window the rules read: an arm's, the report's energy block's, or a
/// window the Python API metered around the caller's code. `None` leaves its rule unchecked.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Window<'a> {
    /// The arm's precision (schema spelling), or `None` for a report's or a caller's one window.
    pub arm: Option<&'a str>,
    /// Window length, s.
    pub seconds: Option<f64>,
    /// Counter joules ÷ power-trace joules over the window.
    pub counter_over_trace: Option<f64>,
    /// Whether the cooldown before the window reached its targets (`None`: no cooldown ran).
    pub converged: Option<bool>,
    /// Share of the window the GPU was busy, %.
    pub gpu_busy_pct: Option<f64>,
    /// Share of the window a power limit held the clocks down, %.
    pub power_throttle_pct: Option<f64>,
    /// Share of the window a thermal limit held the clocks down, %.
    pub thermal_throttle_pct: Option<f64>,
}

fn arm_window<'a>(r: &'a Report, a: &'a Arm) -> Window<'a> {
    let protocol_cooldown = r.protocol.as_ref().and_then(|p| p.cooldown.as_ref());
    Window {
        arm: Some(&a.precision),
        seconds: a.window_seconds,
        counter_over_trace: a.counter_over_trace_ratio,
        converged: a
            .cooldown
            .as_ref()
            .and_then(|c| c.converged)
            .or_else(|| protocol_cooldown.and_then(|c| c.converged)),
        gpu_busy_pct: a.gpu_busy_pct,
        power_throttle_pct: a.power_throttle_pct,
        thermal_throttle_pct: a.thermal_throttle_pct,
    }
}

fn report_window(r: &Report) -> Window<'_> {
    let e = r.energy.as_ref();
    Window {
        arm: None,
        seconds: e.and_then(|e| e.window_seconds),
        counter_over_trace: e.and_then(|e| e.counter_over_trace_ratio),
        converged: r
            .protocol
            .as_ref()
            .and_then(|p| p.cooldown.as_ref())
            .and_then(|c| c.converged),
        ..Window::default()
    }
}

fn num(x: f64) -> String {
    let s = format!("{x:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// Each rule on one window: `Ok(None)` passed, `Ok(Some(flag))` flagged, `Err(check)` unknown.
fn rules(w: &Window, counter_update_ms: Option<f64>) -> Vec<Result<Option<Flag>, Check>> {
    let flag = |code, detail: String| {
        Some(Flag {
            code,
            arm: w.arm.map(str::to_string),
            detail,
        })
    };
    let fin = |x: Option<f64>| x.filter(|v| v.is_finite());
    let mut out = Vec::new();
    out.push(match fin(w.seconds) {
        None => Err(Check::Window),
        Some(s) if s < MIN_WINDOW_S => Ok(flag(
            Reason::ShortWindow,
            format!("a {} s window, under {MIN_WINDOW_S} s", num(s)),
        )),
        Some(_) => Ok(None),
    });
    out.push(match (fin(w.seconds), fin(counter_update_ms)) {
        (Some(s), Some(p)) if s > 0.0 && p / 1e3 / s > MAX_BRACKET_ERROR => Ok(flag(
            Reason::CoarseCounter,
            format!(
                "the counter moves every {} ms: up to {} % of a {} s window",
                num(p),
                num(100.0 * p / 1e3 / s),
                num(s)
            ),
        )),
        (Some(_), Some(_)) => Ok(None),
        _ => Err(Check::CounterPeriod),
    });
    out.push(match w.converged {
        None => Err(Check::Cooldown),
        Some(false) => Ok(flag(
            Reason::CooldownNotConverged,
            "the cooldown before the window did not reach its power/temperature targets".into(),
        )),
        Some(true) => Ok(None),
    });
    out.push(match fin(w.counter_over_trace) {
        None => Err(Check::CounterTrace),
        Some(r) if (r - 1.0).abs() > MAX_COUNTER_TRACE_GAP => Ok(flag(
            Reason::CounterTraceDisagree,
            format!(
                "counter ÷ trace = {}, beyond 1 ± {MAX_COUNTER_TRACE_GAP}",
                num(r)
            ),
        )),
        Some(_) => Ok(None),
    });
    out.push(match fin(w.gpu_busy_pct) {
        None => Err(Check::GpuBusy),
        Some(b) if b < MIN_GPU_BUSY_PCT => Ok(flag(
            Reason::HostBound,
            format!(
                "the GPU was busy {} % of the window (under {MIN_GPU_BUSY_PCT} %): it waited on the host",
                num(b)
            ),
        )),
        Some(_) => Ok(None),
    });
    for (pct, reason, what) in [
        (w.power_throttle_pct, Reason::PowerThrottled, "power"),
        (w.thermal_throttle_pct, Reason::ThermalThrottled, "thermal"),
    ] {
        out.push(match fin(pct) {
            None => Err(Check::Throttle),
            Some(p) if p > MAX_THROTTLED_PCT => Ok(flag(
                reason,
                format!(
                    "a {what} limit held the clocks down {} % of the window",
                    num(p)
                ),
            )),
            Some(_) => Ok(None),
        });
    }
    out
}

/// The report's validity from its own fields: every measured arm of `protocol.arms`, or the
/// report's one window (`energy`) when it lists no arms. A report with neither (a published row)
/// is `unknown` on every rule.
pub fn assess(r: &Report) -> Validity {
    let counter_update_ms = r.energy.as_ref().and_then(|e| e.counter_update_ms);
    let arms: Vec<&Arm> = r
        .protocol
        .as_ref()
        .and_then(|p| p.arms.as_ref())
        .map(|a| a.iter().filter(|a| a.status == ArmStatus::Ok).collect())
        .unwrap_or_default();
    let windows: Vec<Window> = if arms.is_empty() {
        vec![report_window(r)]
    } else {
        arms.iter().map(|a| arm_window(r, a)).collect()
    };
    judge(&windows, counter_update_ms)
}

/// One window's validity by the same rules: what the Python API's `Meter.window` says of the
/// window it metered (`counter_update_ms`: the counter's measured update period).
pub fn assess_window(w: &Window, counter_update_ms: Option<f64>) -> Validity {
    judge(std::slice::from_ref(w), counter_update_ms)
}

fn judge(windows: &[Window], counter_update_ms: Option<f64>) -> Validity {
    let mut flags = Vec::new();
    let mut unknown = Vec::new();
    for w in windows {
        for result in rules(w, counter_update_ms) {
            match result {
                Ok(Some(f)) => flags.push(f),
                Ok(None) => {}
                Err(c) => unknown.push(c),
            }
        }
    }
    unknown.sort();
    unknown.dedup();
    let status = if !flags.is_empty() {
        Status::Flagged
    } else if !unknown.is_empty() {
        Status::Unknown
    } else {
        Status::Valid
    };
    Validity {
        status,
        flags,
        unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_window_is_judged_by_the_reports_rules() {
        // 4 s with a counter that moves every 100 ms: short (4 < 5), and one period is 2.5 % of
        // the window (> 2 %); counter ÷ trace 1.03 is beyond 1 ± 0.02; 70 % busy is host-bound.
        let w = Window {
            seconds: Some(4.0),
            counter_over_trace: Some(1.03),
            gpu_busy_pct: Some(70.0),
            power_throttle_pct: Some(0.0),
            thermal_throttle_pct: Some(0.5),
            ..Window::default()
        };
        let v = assess_window(&w, Some(100.0));
        let codes: Vec<Reason> = v.flags.iter().map(|f| f.code).collect();
        assert_eq!(
            codes,
            [
                Reason::ShortWindow,
                Reason::CoarseCounter,
                Reason::CounterTraceDisagree,
                Reason::HostBound
            ]
        );
        assert_eq!(
            v.flags[1].detail,
            "the counter moves every 100 ms: up to 2.5 % of a 4 s window"
        );
        assert_eq!(v.unknown, [Check::Cooldown]); // no cooldown ran before a bare window
        assert_eq!(v.status, Status::Flagged);

        // 6 s, 100 ms period (1.7 %), agreeing trace, busy, no throttle: only the cooldown unchecked.
        let ok = Window {
            seconds: Some(6.0),
            counter_over_trace: Some(1.004),
            gpu_busy_pct: Some(93.0),
            converged: Some(true),
            power_throttle_pct: Some(0.0),
            thermal_throttle_pct: Some(0.0),
            ..Window::default()
        };
        assert_eq!(assess_window(&ok, Some(100.0)).status, Status::Valid);
        assert_eq!(assess_window(&ok, None).unknown, [Check::CounterPeriod]);
    }
}
