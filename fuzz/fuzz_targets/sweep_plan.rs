//! The sweep plan parser, `campaign::plan::parse_plan` (`plan.toml`), on arbitrary text, and the
//! job list `campaign::plan::jobs` of every plan it accepts.
//!
//! Asserts besides "no panic": an accepted plan has runs that each name exactly one model and at
//! least one precision; the plan-wide sample rate is a finite number > 0 and the cooldown a finite
//! number ≥ 0 (TOML has `nan` and `inf`); every job measures at least one arm with ≥ 1 batch, token and iteration under its own stem, and expected
//! report files directly inside the output directory (a plan cannot make the sweep write
//! elsewhere than `out`).
#![no_main]

use campaign::plan::{jobs, parse_plan, JobTarget};
use libfuzzer_sys::fuzz_target;
use std::path::{Component, Path};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(plan) = parse_plan(&text) else {
        return;
    };
    for r in &plan.runs {
        assert!(r.synthetic.is_some() != r.model.is_some());
        assert!(!r.precisions.is_empty());
    }
    // Job count is repeats × runs × batches: skip plans that ask for millions of processes.
    let d = &plan.defaults;
    assert!(
        d.sample_hz.is_finite() && d.sample_hz > 0.0,
        "sample_hz {}",
        d.sample_hz
    );
    assert!(
        d.cooldown_max_s.is_finite() && d.cooldown_max_s >= 0.0,
        "cooldown_max_s {}",
        d.cooldown_max_s
    );
    let total: u128 = plan
        .runs
        .iter()
        .map(|r| r.repeats.unwrap_or(d.repeats) as u128 * r.batch.len().max(1) as u128)
        .sum();
    if total > 10_000 {
        return;
    }
    let out = Path::new("/fuzz-out");
    for j in jobs(&plan, out) {
        let m = &j.measure;
        assert!(!j.stem.is_empty());
        assert_eq!(m.name, j.stem, "the process's stem is the job's");
        assert_eq!(m.out, out, "the process writes into out");
        assert!(m.batch >= 1 && m.tokens >= 1 && m.iterations >= 1);
        assert!(m.sample_hz.is_finite() && m.sample_hz > 0.0);
        match &m.target {
            JobTarget::Engine { precisions, .. } => assert!(!precisions.is_empty()),
            JobTarget::Server { model_files, .. } => assert!(!model_files.is_empty()),
        }
        for e in &j.expected {
            let rel = e.strip_prefix(out).expect("a report inside out");
            let mut parts = rel.components();
            assert!(
                matches!(parts.next(), Some(Component::Normal(_))) && parts.next().is_none(),
                "job writes outside out: {e:?}"
            );
        }
    }
});
