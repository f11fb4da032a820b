//! The plain-language verdict on a ΔE vs FP16, shared by the estimate (CLI and Your model) and the
//! measured rows of the Tested tab: which way it goes, and no direction when the 95 % interval
//! spans zero.

/// A signed percentage with a typographic minus: `+11.7 %`, `−28.5 %` (`0.0 %` without a sign).
pub fn signed_pct(x: f64, dp: usize) -> String {
    let s = format!("{:.*}", dp, x.abs());
    if s.chars().all(|c| c == '0' || c == '.') {
        format!("{s} %")
    } else if x < 0.0 {
        format!("−{s} %")
    } else {
        format!("+{s} %")
    }
}

/// Which way a ΔE goes, as far as the data can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// ΔE below zero beyond the interval: quantization saves.
    Saves,
    /// ΔE above zero beyond the interval: quantization costs more.
    Costs,
    /// Within ±0.5 points of FP16, or the interval spans zero.
    Neutral,
}

/// The interval contains zero: the data do not say which way this goes.
pub fn spans_zero(interval: Option<(f64, f64)>) -> bool {
    interval.is_some_and(|(lo, hi)| lo < 0.0 && hi > 0.0)
}

/// Which way `delta` goes given its 95 % `interval`.
pub fn direction(delta: f64, interval: Option<(f64, f64)>) -> Direction {
    if delta.abs() < 0.5 || spans_zero(interval) {
        Direction::Neutral
    } else if delta < 0.0 {
        Direction::Saves
    } else {
        Direction::Costs
    }
}

/// "NF4 saves 28 % here", "INT8 costs 36 % more here", "BF16 ≈ FP16 here", or — when `interval`
/// (95 %, points) spans zero — the value with the `source` of its uncertainty and no direction.
pub fn verdict(precision: &str, delta: f64, interval: Option<(f64, f64)>, source: &str) -> String {
    match direction(delta, interval) {
        Direction::Saves => format!("{precision} saves {:.0} % here", -delta),
        Direction::Costs => format!("{precision} costs {delta:.0} % more here"),
        Direction::Neutral if delta.abs() < 0.5 => format!("{precision} ≈ FP16 here"),
        Direction::Neutral => {
            let (lo, hi) = interval.unwrap_or((delta, delta));
            format!(
                "{precision}: {} here, within the {source} (the 95 % interval, {} to {}, spans zero): \
                 no clear difference from FP16",
                signed_pct(delta, 1),
                signed_pct(lo, 1),
                signed_pct(hi, 1)
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        assert_eq!(
            verdict("NF4", -28.5, Some((-39.7, -17.2)), "fit"),
            "NF4 saves 28 % here"
        );
        assert_eq!(
            verdict("NF4", 36.2, None, "fit"),
            "NF4 costs 36 % more here"
        );
        assert_eq!(
            verdict("BF16", 0.3, Some((-5.0, 5.6)), "fit"),
            "BF16 ≈ FP16 here"
        );
        let v = verdict("BF16", -4.46, Some((-43.0, 34.1)), "run-to-run spread");
        assert_eq!(
            v,
            "BF16: −4.5 % here, within the run-to-run spread (the 95 % interval, −43.0 % to +34.1 %, \
             spans zero): no clear difference from FP16"
        );
        assert_eq!(direction(-4.46, Some((-43.0, 34.1))), Direction::Neutral);
        assert_eq!(signed_pct(-0.04, 1), "0.0 %");
    }
}
