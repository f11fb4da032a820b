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

/// Arithmetic mean (NaN for no values).
pub fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Sample standard deviation (n − 1), `None` below two values.
pub fn sample_sd(v: &[f64]) -> Option<f64> {
    if v.len() < 2 {
        return None;
    }
    let m = mean(v);
    Some((v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt())
}

/// 95 % half-width of a mean of `n` paired differences with sample SD `sd`: `t(n−1) · sd / √n`
/// (`None` below two).
pub fn paired_halfwidth(sd: f64, n: usize) -> Option<f64> {
    (n >= 2).then(|| t95(n - 1) * sd / (n as f64).sqrt())
}

/// 95 % half-width of the difference of two means from separate runs (Welch): `t(ν) · √(a + b)`
/// with `a = sd_a²/n_a`, `b = sd_b²/n_b` and the Welch–Satterthwaite `ν = (a + b)² / (a²/(n_a−1) +
/// b²/(n_b−1))`, rounded down (the t quantile then errs wide). `None` below two runs on a side.
pub fn welch_halfwidth(sd_a: f64, n_a: usize, sd_b: f64, n_b: usize) -> Option<f64> {
    if n_a < 2 || n_b < 2 {
        return None;
    }
    let (a, b) = (sd_a * sd_a / n_a as f64, sd_b * sd_b / n_b as f64);
    if a + b == 0.0 {
        return Some(0.0);
    }
    let df = (a + b).powi(2) / (a * a / (n_a - 1) as f64 + b * b / (n_b - 1) as f64);
    Some(t95((df.floor() as usize).max(1)) * (a + b).sqrt())
}

/// Coefficient of variation (sample SD / mean) in %, `None` below two values.
pub fn cv_pct(v: &[f64]) -> Option<f64> {
    sample_sd(v).map(|sd| sd / mean(v) * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn welch_halfwidth_worked() {
        // SD 2 over 3 runs against SD 3 over 4: a = 4/3, b = 9/4, ν = 3.5833² / (1.3333²/2 +
        // 2.25²/3) = 4.98 → 4 → t = 2.776; 2.776 · √3.5833 = 5.2549.
        let h = welch_halfwidth(2.0, 3, 3.0, 4).unwrap();
        assert!((h - 5.25489).abs() < 1e-4, "{h}");
        assert_eq!(welch_halfwidth(2.0, 1, 3.0, 4), None);
        assert_eq!(welch_halfwidth(0.0, 3, 0.0, 3), Some(0.0));
    }

    #[test]
    fn t_quantiles() {
        assert_eq!(t95(4), 2.776);
        assert!((t95(60) - 2.000).abs() < 0.003);
        assert!(t95(0).is_infinite());
    }

    #[test]
    fn mean_sd_cv() {
        let v = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert_eq!(mean(&v), 5.0);
        // Σ(x − 5)² = 32, / 7.
        assert!((sample_sd(&v).unwrap() - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert!((cv_pct(&v).unwrap() - (32.0f64 / 7.0).sqrt() / 5.0 * 100.0).abs() < 1e-12);
        assert_eq!(cv_pct(&[1.0]), None);
    }
}
