//! What synthetic-weight rows may be off by: a real model's ΔE beside its synthetic twin's
//! (same shape, card model, engine and sitting), and the real model's quality beside its energy.
//!
//! Our Hopper rows decode seeded random weights at real shapes. Energy per token should not care
//! what the weights are, but a kernel's path can (a real F16 GGUF once ran another matmul than
//! synthetic F16 did), and so can the tokens decoded. A pair answers it for one shape: the
//! difference of the two ΔE with a Welch interval (the two sets are separate runs), "measured"
//! only when that interval excludes zero.

use crate::dataset::Anchor;
use crate::stats::welch_halfwidth;
use report::{Precision, WeightsKind};

/// One format's real row beside the synthetic row of the same shape, card, engine and session.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticPair<'a> {
    /// The real-weights row.
    pub real: &'a Anchor,
    /// The synthetic-weights row.
    pub synthetic: &'a Anchor,
    /// Real ΔE minus synthetic ΔE, percentage points.
    pub difference_pts: f64,
    /// 95 % Welch half-width of the difference (`None` below two runs on a side, or without the
    /// runs' ΔE spreads).
    pub halfwidth_pts: Option<f64>,
    /// The real row's perplexity change vs its FP16 row's, % (where both were scored).
    pub real_ppl_delta_pct: Option<f64>,
}

impl SyntheticPair<'_> {
    /// The difference is measurable: its interval excludes zero.
    pub fn measurable(&self) -> bool {
        self.halfwidth_pts
            .is_some_and(|h| self.difference_pts.abs() > h)
    }

    /// In words: "+7.8 ± 3.6 points, measured" (the synthetic row differs by this much) or "not
    /// measurable (+2.9 ± 9.4 points)".
    pub fn words(&self) -> String {
        let d = self.difference_pts;
        match self.halfwidth_pts {
            Some(h) if self.measurable() => {
                format!("{d:+.1} ± {h:.1} points, measured")
            }
            Some(h) => format!("not measurable ({d:+.1} ± {h:.1} points)"),
            None => format!("{d:+.1} points, no interval (fewer than two runs on a side)"),
        }
    }
}

/// The FP16 row of `row`'s model, session and stack.
fn fp16_of<'a>(anchors: &'a [Anchor], row: &Anchor) -> Option<&'a Anchor> {
    anchors.iter().find(|a| a.is_fp16_beside(row))
}

/// Every real row that has a synthetic twin in `anchors` (batch 1, not FP16), in file order.
pub fn synthetic_pairs(anchors: &[Anchor]) -> Vec<SyntheticPair<'_>> {
    let kind = |a: &Anchor| a.weights;
    anchors
        .iter()
        .filter(|a| kind(a) == Some(WeightsKind::Real))
        .filter(|a| a.precision != Precision::Fp16 && a.batch == 1)
        .filter_map(|real| {
            let synthetic = anchors.iter().find(|s| {
                kind(s) == Some(WeightsKind::Synthetic)
                    && s.gpu == real.gpu
                    && s.session == real.session
                    && s.engine() == real.engine()
                    && s.precision_label() == real.precision_label()
                    && s.batch == real.batch
                    && (s.params_b - real.params_b).abs() < 1e-9
            })?;
            let difference_pts = real.delta_pct()? - synthetic.delta_pct()?;
            let halfwidth_pts = match (
                real.vs_fp16_sd_pct,
                real.n,
                synthetic.vs_fp16_sd_pct,
                synthetic.n,
            ) {
                (Some(sa), Some(na), Some(sb), Some(nb)) => {
                    welch_halfwidth(sa, na as usize, sb, nb as usize)
                }
                _ => None,
            };
            let fp16_ppl = fp16_of(anchors, real).and_then(|f| f.perplexity);
            let real_ppl_delta_pct = match (real.perplexity, fp16_ppl) {
                (Some(q), Some(f)) if f > 0.0 => Some((q / f - 1.0) * 100.0),
                _ => None,
            };
            Some(SyntheticPair {
                real,
                synthetic,
                difference_pts,
                halfwidth_pts,
                real_ppl_delta_pct,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Dataset;

    fn row(stack: &str, precision: Precision, e: f64, sd: Option<f64>, ppl: Option<f64>) -> Anchor {
        let mut a = Anchor {
            model: "SmolLM2-135M".into(),
            params_b: 0.1345,
            precision,
            precision_variant: None,
            batch: 1,
            energy_mj: Some(e),
            fp16_energy_mj: Some(200.0),
            n: Some(3),
            vs_fp16_sd_pct: sd,
            session: "truth".into(),
            perplexity: ppl,
            ..Dataset::embedded().anchors[0].clone()
        };
        a.set_stack(stack);
        a
    }

    const REAL: &str = "candle-graph 0.11.1 GGUF/cuBLAS kernels, CUDA 13.0, real weights";
    const SYNTH: &str = "candle-graph 0.11.1 GGUF/cuBLAS kernels, CUDA 13.0, synthetic weights";

    #[test]
    fn a_pair_is_the_difference_of_the_deltas_with_a_welch_interval() {
        let rows = vec![
            row(REAL, Precision::Fp16, 200.0, None, Some(10.0)),
            row(REAL, Precision::Q4_0, 180.0, Some(2.0), Some(19.3)),
            row(SYNTH, Precision::Fp16, 200.0, None, None),
            row(SYNTH, Precision::Q4_0, 190.0, Some(3.0), None),
        ];
        let pairs = synthetic_pairs(&rows);
        assert_eq!(pairs.len(), 1);
        let p = &pairs[0];
        // ΔE −10 % real, −5 % synthetic: −5 points. SD 2 and 3 over n = 3 each: a = 4/3, b = 3,
        // ν = 4.333² / (1.778/2 + 9/2) = 3.48 → 3 → t = 3.182 · √4.333 = 6.624 points.
        assert!((p.difference_pts + 5.0).abs() < 1e-9);
        assert!((p.halfwidth_pts.unwrap() - 6.6238).abs() < 1e-3, "{p:?}");
        assert!(!p.measurable());
        assert!(p.words().starts_with("not measurable"), "{}", p.words());
        assert!((p.real_ppl_delta_pct.unwrap() - 93.0).abs() < 1e-9);
    }

    #[test]
    fn a_measured_bias_says_so_and_other_sessions_never_pair() {
        let mut rows = vec![
            row(REAL, Precision::Fp16, 200.0, None, None),
            row(REAL, Precision::Q8_0, 150.0, Some(0.5), None),
            row(SYNTH, Precision::Q8_0, 180.0, Some(0.5), None),
        ];
        let p = &synthetic_pairs(&rows)[0];
        assert!(p.measurable(), "{p:?}");
        assert!(p.words().starts_with("-15.0 ± "), "{}", p.words());
        assert_eq!(p.real_ppl_delta_pct, None);
        rows[2].session = "another sitting".into();
        assert!(synthetic_pairs(&rows).is_empty());
    }
}
