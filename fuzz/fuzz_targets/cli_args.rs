//! The command line's arguments-to-report path on arbitrary argument lists (NUL-separated):
//! clap's parse of `estimate`, `optimize` and `measure` (the meter build: no candle, no GPU), then
//! what each makes of the numbers and names it accepted — the estimate and its report, the
//! optimizer's search, and the labelled reports `measure` writes on a machine without a GPU
//! (built in memory here) and their file names.
//!
//! Asserts besides "no panic" (overflow checks are on): every report an accepted command line
//! yields passes the schema and semantic checks that `validate` runs, names the batch and
//! precision it was asked for, and lands directly inside `--out`; the optimizer's figures are
//! finite.
#![no_main]

use clap::Parser;
use cli::cmd::{estimate::EstimateArgs, measure::MeasureArgs, optimize::OptimizeArgs};
use libfuzzer_sys::fuzz_target;
use std::path::{Component, Path};

#[derive(Parser, Debug)]
#[command(name = "quantenergy")]
enum Command {
    Estimate(EstimateArgs),
    Optimize(OptimizeArgs),
    Measure(Box<MeasureArgs>),
}

fn assert_valid(rep: &report::Report, what: &str) {
    let text = serde_json::to_string(rep).expect("a report serializes");
    let v = report::validate_str(&text);
    assert!(v.errors.is_empty(), "{what}: {:?}\n{text}", v.errors);
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let argv = std::iter::once("quantenergy").chain(text.split('\0'));
    let Ok(cmd) = Command::try_parse_from(argv) else {
        return;
    };
    match cmd {
        Command::Estimate(a) => {
            let Ok(e) = cli::cmd::estimate::estimate_of(&a) else {
                return;
            };
            let (gpu, model) = cli::cmd::estimate::labels(&a, e.input.arch);
            let rep = analysis::estimate_report(&e, &gpu, &model);
            assert_valid(&rep, "estimate --json");
            assert_eq!(rep.workload.precision, a.precision.as_str());
        }
        Command::Optimize(a) => {
            if a.calibration {
                return;
            }
            if let Ok(r) = analysis::optimize(&a.request()) {
                for c in r.pareto.iter().chain(r.optimum.iter()) {
                    for v in [
                        c.energy_mj_per_token.value,
                        c.latency_ms_per_token.value,
                        c.throughput_tok_s.value,
                        c.vram.total_gb.value,
                    ] {
                        assert!(v.is_finite(), "{c:?}");
                    }
                }
            }
        }
        Command::Measure(a) => {
            let cfg = a.protocol();
            let out = Path::new("/fuzz-out");
            let card = a.gpu.as_ref().and_then(|g| g.card());
            let model = a.synthetic.as_deref().unwrap_or("model");
            let params_b = a.server.params_b.unwrap_or(0.5);
            for &p in &cfg.precisions {
                let rep = meter::fallback::estimate_report(
                    card.as_deref(),
                    model,
                    (p, params_b),
                    &cfg,
                    "fuzzing: no GPU",
                );
                assert_valid(&rep, "measure without a GPU");
                assert_eq!(rep.workload.precision, p.as_str());
                assert_eq!(rep.workload.batch_size as usize, cfg.batch);
                let path = meter::files::report_path(
                    out,
                    a.name.as_deref(),
                    cfg.precisions.len() > 1,
                    (model, p, cfg.batch),
                    "",
                    ".estimate",
                );
                let rel = path.strip_prefix(out).expect("a report inside --out");
                let mut parts = rel.components();
                assert!(
                    matches!(parts.next(), Some(Component::Normal(_))) && parts.next().is_none(),
                    "measure writes outside --out: {path:?}"
                );
            }
        }
    }
});
