//! Fixtures for the tests that prove engines are never mixed. The embedded dataset has Hopper rows
//! of three engines (eager candle, candle-graph, llama.cpp), but only the eager engine has a batch
//! sweep and no engine's throughputs come from a known step model. So [`eager_only`] is the
//! embedded dataset with the H200 rows of the eager engine alone (what "before another engine"
//! means), and [`with_graph_engine`] adds to it a copy of those rows as a CUDA-graph engine's
//! (`candle-graph …` stack, own session) with other energies, other batch behaviour and
//! throughputs generated from a known step model.

use crate::dataset::{Anchor, Dataset};
use crate::roofline::{roofline_step, shape_for_model_name, Efficiency, ANCHOR_DECODE_CONTEXT};
use crate::vram::find_format_on;
use report::{Arch, Precision};

/// The graph engine's FP16 energy relative to the eager one's (7B: 2434 vs 3086 mJ/token).
pub const GRAPH_FP16: f64 = 2434.0 / 3086.0;
/// Every graph row at batch > 1 uses this much more energy than the eager ratio would give (the
/// graph engine wastes less at batch 1, so batching saves less): its batch curves must differ.
pub const GRAPH_BATCH_PENALTY: f64 = 1.5;
/// The step model the graph rows' throughputs are generated from.
pub const GRAPH_FLOOR_MS_PER_LAYER: f64 = 0.02;
/// Bandwidth efficiency of the generated graph rows.
pub const GRAPH_BANDWIDTH: f64 = 0.60;
/// The graph engine's stack text.
pub const GRAPH_STACK: &str = "candle-graph 0.11.1 CUDA graphs, CUDA 13.0, synthetic weights";

/// Energy factor of a graph row vs its eager twin (different per precision, so ΔE differs).
pub fn graph_factor(p: Precision) -> f64 {
    match p {
        Precision::Q8_0 => 0.74,
        Precision::Q4K => 0.70,
        Precision::Q4_0 => 0.72,
        _ => GRAPH_FP16,
    }
}

/// The graph twin of an eager H200 row.
fn graph_row(ds: &Dataset, a: &Anchor) -> Anchor {
    let mut g = a.clone();
    g.set_stack(GRAPH_STACK);
    g.session = "h200-graph-test".into();
    let batch = if a.batch > 1 {
        GRAPH_BATCH_PENALTY
    } else {
        1.0
    };
    g.energy_mj = a.energy_mj.map(|e| e * graph_factor(a.precision) * batch);
    g.fp16_energy_mj = a.fp16_energy_mj.map(|f| f * GRAPH_FP16);
    let (shape, _) = shape_for_model_name(&a.model, a.params_b);
    let fmt = find_format_on(a.precision.as_str(), GRAPH_STACK).expect("candle-graph format");
    let eff = Efficiency {
        bandwidth: GRAPH_BANDWIDTH,
        compute: crate::roofline::DEFAULT_COMPUTE_EFFICIENCY,
        launch_ms_per_layer: GRAPH_FLOOR_MS_PER_LAYER,
    };
    let gpu = ds.gpu(&a.gpu).expect("H200 in gpus.csv");
    let step = roofline_step(gpu, &shape, fmt, a.batch, ANCHOR_DECODE_CONTEXT, &eff);
    g.throughput_tok_s = Some(a.batch as f64 / step.step_ms * 1e3);
    g
}

/// The embedded dataset without the Hopper rows of any engine but the eager candle one (the real
/// candle-graph and llama.cpp sessions dropped).
pub fn eager_only() -> Dataset {
    let mut ds = Dataset::embedded().clone();
    let before = ds.anchors.len();
    ds.anchors
        .retain(|a| a.arch != Arch::Hopper || a.engine() == "candle");
    assert!(
        ds.anchors.len() < before,
        "the other engines' rows were found"
    );
    ds
}

/// [`eager_only`] plus graph twins of every eager H200 row except BF16 (so the graph engine has
/// no BF16 curve).
pub fn with_graph_engine() -> Dataset {
    let mut ds = eager_only();
    let graph: Vec<Anchor> = ds
        .anchors
        .iter()
        .filter(|a| a.arch == Arch::Hopper && a.stack.starts_with("candle "))
        .filter(|a| a.precision != Precision::Bf16)
        .map(|a| graph_row(&ds, a))
        .collect();
    assert!(graph.len() > 20, "the eager H200 rows were found");
    ds.anchors.extend(graph);
    ds
}

/// The row of `ds` measured with `engine` (as [`crate::curve_engine`] names it).
pub fn row<'d>(
    ds: &'d Dataset,
    engine: &str,
    model: &str,
    precision: Precision,
    batch: u32,
) -> &'d Anchor {
    ds.anchors
        .iter()
        .find(|a| {
            a.engine() == engine && a.model == model && a.precision == precision && a.batch == batch
        })
        .unwrap_or_else(|| panic!("{engine} {model} {precision} b{batch}"))
}
