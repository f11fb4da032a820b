//! ΔE along the context: the measured context runs ([`Dataset::context`]) of one card, model and
//! stack, beside the same stack's short-prompt row and what the estimator (the optimizer's
//! context model) gives at each depth, so the model's error along the context is stated where it
//! can be measured.

use crate::dataset::{Anchor, Dataset};
use crate::estimate::{estimate, EstimateInput};
use crate::CurveClass;
use report::Precision;

/// Tokens a context run decodes after its depth (`measure --context`'s 256): the estimate at a
/// depth is asked for the context the decode ends at.
pub const DECODE_TOKENS: u32 = 256;

/// One depth of a series, for one quantized precision.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextPoint {
    /// Tokens in the KV cache when the timed decode started; `None` for the stack's short-prompt
    /// row (16 prompt tokens, another session).
    pub depth: Option<u32>,
    /// Measured ΔE of the decode vs the same runs' FP16 arm, %.
    pub measured_pct: f64,
    /// Half-width of its paired 95 % interval, points (`None` below two runs).
    pub halfwidth_pct: Option<f64>,
    /// Independent runs behind it.
    pub n: Option<u32>,
    /// What the estimator gives for the same card, size, precision, engine and context, %.
    pub modelled_pct: Option<f64>,
    /// Prefill energy per prompt token, mJ: the quantized arm's and the FP16 arm's.
    pub prefill_mj: Option<(f64, f64)>,
}

impl ContextPoint {
    /// Modelled minus measured, points.
    pub fn error_pct(&self) -> Option<f64> {
        Some(self.modelled_pct? - self.measured_pct)
    }

    /// Whether the model falls inside the measured 95 % interval.
    pub fn model_within_interval(&self) -> Option<bool> {
        Some(self.error_pct()?.abs() <= self.halfwidth_pct?)
    }

    /// The prefill's ΔE per prompt token vs FP16, %.
    pub fn prefill_delta_pct(&self) -> Option<f64> {
        let (q, f) = self.prefill_mj?;
        (f > 0.0).then(|| (q - f) / f * 100.0)
    }
}

/// The context runs of one card, model, stack and quantized precision, by depth (the
/// short-prompt row first, where the stack has one).
#[derive(Debug, Clone, PartialEq)]
pub struct ContextSeries {
    /// Card.
    pub gpu: String,
    /// Model as the rows name it.
    pub model: String,
    /// The rows' stack text.
    pub stack: String,
    /// The engine the stack runs (what the estimate is asked for).
    pub engine: String,
    /// The quantized precision compared with FP16.
    pub precision: Precision,
    /// Shallowest first.
    pub points: Vec<ContextPoint>,
}

impl ContextSeries {
    /// The largest |modelled − measured| over the measured depths, points.
    pub fn max_error_pct(&self) -> Option<f64> {
        self.points
            .iter()
            .filter(|p| p.depth.is_some())
            .filter_map(ContextPoint::error_pct)
            .map(f64::abs)
            .reduce(f64::max)
    }
}

/// Every series of the dataset's context rows, estimated with `classes`.
pub fn context_series(ds: &Dataset, classes: &[CurveClass]) -> Vec<ContextSeries> {
    let mut out: Vec<ContextSeries> = Vec::new();
    for a in ds.context.iter().filter(|a| a.precision != Precision::Fp16) {
        let Some(fp16) = fp16_of(&ds.context, a) else {
            continue;
        };
        let point = point_of(ds, classes, a, fp16);
        match out.iter_mut().find(|s| {
            s.gpu == a.gpu && s.model == a.model && s.stack == a.stack && s.precision == a.precision
        }) {
            // Kept in depth order as they come (no sort: a stable sort's code is kilobytes of
            // the page's wasm).
            Some(s) => {
                let at = s
                    .points
                    .iter()
                    .position(|q| q.depth.unwrap_or(0) > point.depth.unwrap_or(0))
                    .unwrap_or(s.points.len());
                s.points.insert(at, point);
            }
            None => out.push(ContextSeries {
                gpu: a.gpu.clone(),
                model: a.model.clone(),
                stack: a.stack.clone(),
                engine: a.engine().to_string(),
                precision: a.precision,
                points: short_prompt_point(ds, classes, a)
                    .into_iter()
                    .chain([point])
                    .collect(),
            }),
        }
    }
    out
}

/// The FP16 context row of the same runs as `a`.
fn fp16_of<'a>(rows: &'a [Anchor], a: &Anchor) -> Option<&'a Anchor> {
    rows.iter().find(|o| o.is_fp16_beside(a))
}

fn point_of(ds: &Dataset, classes: &[CurveClass], a: &Anchor, fp16: &Anchor) -> ContextPoint {
    let context = a.context_depth.map_or(0, |d| d + DECODE_TOKENS);
    ContextPoint {
        depth: a.context_depth,
        measured_pct: a.delta_pct().unwrap_or(f64::NAN),
        halfwidth_pct: a.delta_halfwidth_pct(fp16),
        n: a.n,
        modelled_pct: modelled(ds, classes, a, context),
        prefill_mj: a.prefill_mj.zip(fp16.prefill_mj),
    }
}

/// The stack's own short-prompt row on the card (batch 1, the same engine and stack text but
/// the session), as the series' first point.
fn short_prompt_point(ds: &Dataset, classes: &[CurveClass], a: &Anchor) -> Option<ContextPoint> {
    let short = ds.anchors.iter().find(|o| {
        o.gpu == a.gpu
            && o.model == a.model
            && o.precision == a.precision
            && o.batch == 1
            && o.stack == a.stack
    })?;
    let fp16 = ds.fp16_row_of(short)?;
    Some(ContextPoint {
        // The protocol's 16-token prompt and 256 decoded tokens.
        modelled_pct: modelled(ds, classes, short, 16 + DECODE_TOKENS),
        depth: None,
        ..point_of(ds, classes, short, fp16)
    })
}

fn modelled(ds: &Dataset, classes: &[CurveClass], a: &Anchor, context: u32) -> Option<f64> {
    estimate(
        ds,
        classes,
        &EstimateInput {
            arch: a.arch,
            params_b: a.params_b,
            precision: a.precision,
            batch: a.batch,
            context,
            engine: Some(a.engine().to_string()),
        },
    )
    .delta_pct
}

#[cfg(test)]
mod tests {
    use super::*;

    fn embedded() -> Vec<ContextSeries> {
        context_series(Dataset::embedded(), crate::curves::default_classes())
    }

    /// The H200 context rows: three stacks of Qwen2-1.5B Q4_0 (the graph engine at 1 k / 16 k in
    /// three runs of one session and at 4 k in three runs of another; llama-server at 1 k / 16 k
    /// and llama-server with a q8_0 KV cache at 4 k / 16 k, three runs each), worked from the
    /// rows' own energies.
    #[test]
    fn the_embedded_context_rows_form_one_series_per_stack() {
        let all = embedded();
        assert_eq!(all.len(), 3, "{all:#?}");
        let graph = all.iter().find(|s| s.engine == "candle-graph").unwrap();
        let depths: Vec<(Option<u32>, Option<u32>)> =
            graph.points.iter().map(|p| (p.depth, p.n)).collect();
        assert_eq!(
            depths,
            [
                (None, Some(3)),
                (Some(1024), Some(3)),
                (Some(4096), Some(3)),
                (Some(16384), Some(3))
            ]
        );
        // 16 k, three runs: (594.64 − 799.00) / 799.00 = −25.58 %, paired half-width
        // t(2) = 4.303 · 1.06 / √3 = 2.63 points; prefill (42.973 − 17.040) / 17.040 = +152.2 %.
        let deep = graph.points.last().unwrap();
        assert!((deep.measured_pct - -25.577).abs() < 0.01, "{deep:?}");
        assert!(
            (deep.halfwidth_pct.unwrap() - 2.633).abs() < 0.01,
            "{deep:?}"
        );
        assert!(
            (deep.prefill_delta_pct().unwrap() - 152.19).abs() < 0.01,
            "{deep:?}"
        );
        // 4 k, three runs: −30.21 %, paired half-width t(2) = 4.303 · 1.25 / √3 = 3.11 points.
        let mid = &graph.points[2];
        assert!((mid.measured_pct - -30.21).abs() < 0.01, "{mid:?}");
        assert!((mid.halfwidth_pct.unwrap() - 3.105).abs() < 0.01, "{mid:?}");
        let kv = all
            .iter()
            .find(|s| s.stack.contains("KV cache q8_0"))
            .unwrap();
        assert_eq!(kv.engine, "llama.cpp");
        assert!(kv.points.iter().all(|p| p.modelled_pct.is_some()));
        assert!(graph.max_error_pct().is_some());
    }

    /// The error is modelled minus measured, and the interval test uses the half-width.
    #[test]
    fn the_error_is_modelled_minus_measured() {
        let p = ContextPoint {
            depth: Some(4096),
            measured_pct: -30.0,
            halfwidth_pct: Some(2.0),
            n: Some(3),
            modelled_pct: Some(-27.5),
            prefill_mj: Some((19.0, 10.0)),
        };
        assert_eq!(p.error_pct(), Some(2.5));
        assert_eq!(p.model_within_interval(), Some(false));
        assert_eq!(p.prefill_delta_pct(), Some(90.0));
    }

    /// A context row that is not a check is refused where the file is read, naming the column.
    #[test]
    fn a_context_row_must_be_a_check() {
        let header = crate::dataset::ANCHORS_CSV.lines().next().unwrap();
        let row = "H200,hopper,M,1.5,Q4_0,1,500,700,,500,280,3,2,1,gross,s,t,src,0,1,,,4096,19,n";
        let err = Dataset::parse(&format!("{header}\n{row}\n"), crate::dataset::GPUS_CSV)
            .unwrap_err()
            .to_string();
        assert!(err.contains("column `context_depth`"), "{err}");
        let ok = row.replace(",,,4096", ",,check,4096");
        let ds = Dataset::parse(&format!("{header}\n{ok}\n"), crate::dataset::GPUS_CSV).unwrap();
        assert_eq!((ds.context.len(), ds.anchors.len()), (1, 0));
    }
}
