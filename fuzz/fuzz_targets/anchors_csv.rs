//! The dataset's CSV parsers, `analysis::dataset::parse_anchors` and `parse_gpus` (`data/anchors.csv`,
//! `data/gpus.csv`; `Dataset::parse` is the two together), on arbitrary text; then, on the anchors
//! that parse, beside the embedded cards, the context series of the rows with a depth
//! (`analysis::context`) and the crossover fits (`analysis::curves::fit_classes`, what the page
//! refits for "include my points").
//!
//! Asserts besides "no panic": every number a row yields is finite and ≥ 0 (the parser's
//! contract, which the fits rely on); a card looked up by a parsed name is found; every fitted
//! class has finite parameters.
#![no_main]

use analysis::curves::fit_classes;
use analysis::dataset::{parse_anchors, parse_gpus, Dataset};
use libfuzzer_sys::fuzz_target;

fn ok(x: f64) -> bool {
    x.is_finite() && x >= 0.0
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(gpus) = parse_gpus(&text) {
        for g in &gpus {
            assert!(ok(g.vram_gb) && ok(g.bandwidth_gbs) && ok(g.fp16_tflops) && ok(g.tdp_w));
        }
        let ds = Dataset {
            anchors: Vec::new(),
            context: Vec::new(),
            gpus: gpus.clone(),
        };
        for g in gpus.iter().take(8) {
            if !g.name.trim().is_empty() {
                assert!(ds.gpu(&g.name).is_some(), "card {:?} not found", g.name);
            }
        }
    }
    let Ok(anchors) = parse_anchors(&text) else {
        return;
    };
    for a in &anchors {
        assert!(ok(a.params_b));
        for x in [
            a.energy_mj,
            a.fp16_energy_mj,
            a.throughput_tok_s,
            a.avg_power_w,
            a.cv_pct,
            a.prefill_mj,
        ]
        .into_iter()
        .flatten()
        {
            assert!(ok(x));
        }
        let _ = a.precision_label();
        let _ = a.delta_pct();
        let _ = a.replicated();
    }
    if anchors.len() > 64 {
        return; // the fits are the slow part; 64 rows reach every branch
    }
    let (context, anchors) = anchors.into_iter().partition(|a| a.context_depth.is_some());
    let ds = Dataset {
        anchors,
        context,
        gpus: Dataset::embedded().gpus.clone(),
    };
    // The context series (their FP16 rows, intervals and prefill ratios) of whatever parsed.
    for s in analysis::context::context_series(&ds, &[]) {
        for p in &s.points {
            let _ = (p.error_pct(), p.prefill_delta_pct(), p.model_within_interval());
        }
    }
    for a in &ds.anchors {
        if let Some(fp16) = ds.fp16_row_of(a) {
            let _ = a.delta_halfwidth_pct(fp16);
        }
    }
    for c in fit_classes(&ds, &[]) {
        let f = &c.fit;
        assert!(
            f.a.is_finite() && f.s.is_finite() && f.n_star.is_finite(),
            "{}: fit {f:?}",
            c.label()
        );
    }
});
