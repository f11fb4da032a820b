//! Small statistics shared by the page and the meter.

/// Two-sided 95 % Student-t quantile for `df` degrees of freedom (∞ for 0).
pub fn t95(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df - 1],
        _ => 1.96 + 2.4 / df as f64, // within 0.003 of the exact quantile above 30
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles() {
        assert_eq!(t95(4), 2.776);
        assert!((t95(60) - 2.000).abs() < 0.003);
        assert!(t95(0).is_infinite());
    }
}
