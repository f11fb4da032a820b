//! Criterion benchmarks: fitting every class, one estimate, dataset parse.
use analysis::{dataset, default_classes, estimate, fit_classes, Dataset, EstimateInput};
use criterion::{black_box, criterion_group, criterion_main, Criterion};

fn benches(c: &mut Criterion) {
    let ds = Dataset::embedded();
    c.bench_function("parse embedded dataset", |b| {
        b.iter(|| {
            Dataset::parse(
                black_box(dataset::ANCHORS_CSV),
                black_box(dataset::GPUS_CSV),
            )
            .unwrap()
        })
    });
    c.bench_function("fit all default classes (with LOO)", |b| {
        b.iter(|| fit_classes(black_box(ds), &[]))
    });
    let classes = default_classes();
    let input = EstimateInput {
        arch: report::Arch::Ada,
        params_b: 7.0,
        precision: report::Precision::Nf4,
        batch: 1,
        context: 2048,
        engine: None,
    };
    c.bench_function("one estimate", |b| {
        b.iter(|| estimate(ds, classes, black_box(&input)))
    });
}

criterion_group!(group, benches);
criterion_main!(group, grid);

/// The optimizer's full grid (3 precisions × 7 batches × 7 contexts, budgets, Pareto) on a card.
fn grid_benches(c: &mut Criterion) {
    use analysis::{optimize, Budgets, Objective, OptimizeRequest};
    // Calibrations are computed once per process; keep that out of the per-search figure.
    let _ = (analysis::latency_calibration(), analysis::batch_curve());
    let req = OptimizeRequest {
        gpu: "RTX 4090".into(),
        params_b: Some(7.0),
        model: Some("qwen2-7b".into()),
        objective: Objective::MinEnergy,
        budgets: Budgets {
            max_latency_ms: Some(200.0),
            ..Budgets::default()
        },
        context: None,
        engine: None,
    };
    c.bench_function("optimize grid search (147 configs)", |b| {
        b.iter(|| optimize(black_box(&req)).unwrap())
    });
    // What the first search pays once: every stack's floors, efficiencies and ceilings.
    c.bench_function("calibrate the latency model (every stack)", |b| {
        b.iter(|| analysis::roofline::calibrate_latency(black_box(analysis::Dataset::embedded())))
    });
}

criterion_group!(grid, grid_benches);
