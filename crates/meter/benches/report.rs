//! Criterion benchmark: parse + validate one report (schema and semantic checks).
use criterion::{black_box, criterion_group, criterion_main, Criterion};

const MEASURED: &str = include_str!("../../../data/examples/measured.json");
const UPSTREAM: &str = include_str!("../../../data/examples/upstream-measured-illustrative.json");

fn benches(c: &mut Criterion) {
    c.bench_function("parse+validate quantenergy/1.2 report", |b| {
        b.iter(|| report::validate_str(black_box(MEASURED)))
    });
    c.bench_function("parse+validate upstream 1.1 report", |b| {
        b.iter(|| report::validate_str(black_box(UPSTREAM)))
    });
}

criterion_group!(group, benches);
criterion_main!(group);
