//! The measurement protocol against fakes: arm order, cooldown, failures, stuck counters, lost
//! GPUs, pre-flight refusal, atomic writes, report validation (a real decode under the fake meter
//! is the engine's `protocol_cpu` test).

use meter::decoder::FakeDecoderFactory;
use meter::files::write_atomic;
use meter::meter::{FakeClock, FakeMeter};
use meter::protocol::{
    self, ArmFailure, CooldownConfig, PerplexityConfig, ProtocolConfig, ProtocolError, ScoreError,
};
use meter::run_report::{build_report, RunContext, WeightsInfo};
use meter::testing::{precision as p, short_protocol, synthetic_context};
use std::sync::Arc;

/// The same context with real weights (perplexity Δ between arms of one model).
fn real_ctx() -> RunContext {
    RunContext {
        weights: WeightsInfo::Real {
            path: "/models/tiny".into(),
            files: Vec::new(),
        },
        ..synthetic_context()
    }
}

/// Power: 100 W idle, 300 W while "decoding" (the fake decoder advances virtual time).
fn meter() -> FakeMeter {
    FakeMeter::new(|_| 300.0)
}

fn run(
    cfg: &ProtocolConfig,
    m: &FakeMeter,
    f: &mut FakeDecoderFactory,
) -> Result<protocol::Outcome, ProtocolError> {
    let mut mm = m.clone();
    protocol::run(cfg, &mut mm, f, Arc::new(FakeClock(m.clone())))
}

/// A server holds a GPU context of its own: the card idles at 120 W with it where it idled at 80 W
/// before. The cooldowns aim at the idle read with the first arm loaded (120 + 6 W) and converge;
/// aimed at the context-free 80 + 6 W they could not. The report says which reference it used.
#[test]
fn arms_that_hold_their_own_context_cool_down_to_the_idle_with_it() {
    let m = meter().with(|s| s.power = Box::new(|_| 80.0));
    let c = short_protocol(&["Q4_K"]);
    let mut server = FakeDecoderFactory::new(m.clone());
    server.own_context_w = Some(120.0);
    let out = run(&c, &m, &mut server).unwrap();
    assert_eq!(out.idle_power_w, 80.0);
    assert_eq!(out.loaded_idle_power_w, Some(120.0));
    for a in ["Q4_K", "FP16"] {
        let arm = out.arm(p(a)).unwrap().outcome.as_ref().unwrap();
        assert!(arm.cooldown.converged, "{a}: {:?}", arm.cooldown);
        assert_eq!(arm.cooldown.target_power_w, 126.0);
    }
    let rep = build_report(&c, &out, &synthetic_context(), p("Q4_K")).unwrap();
    assert!(
        rep.results
            .note
            .as_deref()
            .unwrap_or("")
            .contains("first arm loaded, 120.0 W"),
        "{:?}",
        rep.results.note
    );

    // The same card and an engine whose context was there all along: the run-level reference.
    let m = meter().with(|s| s.power = Box::new(|_| 80.0));
    let out = run(&c, &m, &mut FakeDecoderFactory::new(m.clone())).unwrap();
    assert_eq!(out.loaded_idle_power_w, None);
}

/// A warm-up slower than the timed generations it sizes still gives a window of `min_window_s`:
/// 25 % slower sizes it at ⌈5 / 0.2⌉ = 25 generations (4.0 s); generations are added until it lasts
/// 5 s, 32 of them.
#[test]
fn a_slow_warm_up_does_not_leave_the_window_short() {
    let m = meter();
    let mut slow = FakeDecoderFactory::new(m.clone());
    let c = ProtocolConfig {
        min_window_s: 5.0,
        ..short_protocol(&["Q4_K"])
    };
    slow.slow_first = Some((c.warmup, 1.25));
    let out = run(&c, &m, &mut slow).unwrap();
    let q = out.arm(p("Q4_K")).unwrap().outcome.as_ref().unwrap();
    assert_eq!(q.iteration_s.len(), 32);
    assert!(q.window_s >= 5.0, "{}", q.window_s);
}

/// The window is stretched until it lasts `min_window_s` (the last warm-up sizes it), the counter's
/// update period is measured first, and the report's validity follows from its figures: a
/// 5.12 s window on a counter moving every 100 ms, a busy unthrottled card, a cooldown that
/// converged raises no flag; the same card half idle is `host_bound`; 3 iterations (0.48 s) are a
/// `short_window` and a `coarse_counter`. The power trace is off in the first run: its thread
/// samples on the wall clock while the fake's time jumps, so counter ÷ trace would measure the
/// test machine's scheduling (the trace rule has tests of its own); the verdict is then
/// `unknown` on that one rule alone.
#[test]
fn windows_last_five_seconds_and_the_report_says_whether_they_can_be_trusted() {
    use meter::meter::WindowActivity;
    use report::validity::{Reason, Status};
    let busy = |pct: f64| WindowActivity {
        gpu_busy_pct: Some(pct),
        power_throttle_pct: Some(0.0),
        thermal_throttle_pct: Some(0.0),
    };
    let m = meter().with(|s| {
        s.counter_update_s = Some(0.1);
        s.activity = busy(95.0);
    });
    let mut f = FakeDecoderFactory::new(m.clone());
    let c = ProtocolConfig {
        min_window_s: 5.0,
        trace: false,
        ..short_protocol(&["Q4_K"])
    };
    let out = run(&c, &m, &mut f).unwrap();
    let period = out.counter_update_s.expect("the counter moved");
    assert!((period - 0.1).abs() < 0.005, "{period}");
    let q = out.arm(p("Q4_K")).unwrap().outcome.as_ref().unwrap();
    // 20 tokens × 8 ms = 0.16 s per generation: ⌈5 / 0.16⌉ = 32 of them.
    assert_eq!(q.iteration_s.len(), 32);
    assert!(q.window_s >= 5.0, "{}", q.window_s);
    let rep = build_report(&c, &out, &synthetic_context(), p("Q4_K")).unwrap();
    assert_eq!(rep.protocol.as_ref().unwrap().iterations, Some(32));
    assert_eq!(rep.energy.as_ref().unwrap().counter_update_ms, Some(100.0));
    let v = rep.validity.clone().expect("the meter writes its validity");
    assert!(v.flags.is_empty(), "{v:?}");
    assert_eq!(
        v.unknown,
        vec![report::validity::Check::CounterTrace],
        "{v:?}"
    );
    assert_eq!(v.status, Status::Unknown, "{v:?}");
    assert_eq!(v, report::validity::assess(&rep));

    let m = meter().with(|s| {
        s.counter_update_s = Some(0.1);
        s.activity = busy(50.0);
    });
    let out = run(&c, &m, &mut FakeDecoderFactory::new(m.clone())).unwrap();
    let rep = build_report(&c, &out, &synthetic_context(), p("Q4_K")).unwrap();
    let v = rep.validity.unwrap();
    assert_eq!(v.status, Status::Flagged);
    for arm in ["Q4_K", "FP16"] {
        let host_bound = v
            .flags
            .iter()
            .find(|f| f.code == Reason::HostBound && f.arm.as_deref() == Some(arm))
            .unwrap_or_else(|| panic!("{arm}: {v:?}"));
        assert!(host_bound.detail.contains("50 %"), "{}", host_bound.detail);
    }

    let short = ProtocolConfig {
        min_window_s: 0.0,
        trace: true,
        ..c
    };
    let m = meter().with(|s| {
        s.counter_update_s = Some(0.1);
        s.activity = busy(95.0);
    });
    let out = run(&short, &m, &mut FakeDecoderFactory::new(m.clone())).unwrap();
    let rep = build_report(&short, &out, &synthetic_context(), p("Q4_K")).unwrap();
    let v = rep.validity.clone().unwrap();
    let q4 = v
        .flags
        .iter()
        .filter(|f| f.arm.as_deref() == Some("Q4_K"))
        .map(|f| f.code)
        .collect::<Vec<_>>();
    // And, as on the H200, a 100 ms counter over half a second misses the trace by 15 %.
    assert_eq!(
        q4,
        vec![
            Reason::ShortWindow,
            Reason::CoarseCounter,
            Reason::CounterTraceDisagree
        ],
        "{v:?}"
    );
    // A hand-edited verdict is an error at $.validity.
    let mut edited = rep.clone();
    edited.validity.as_mut().unwrap().status = Status::Valid;
    edited.validity.as_mut().unwrap().flags.clear();
    let text = serde_json::to_string(&edited).unwrap();
    let checked = report::validate_str(&text);
    assert!(
        checked.errors.iter().any(|e| e.path == "$.validity"),
        "{:?}",
        checked.errors
    );
}

#[test]
fn both_arms_measured_give_a_measured_delta_from_the_counter() {
    let m = meter();
    let mut f = FakeDecoderFactory::new(m.clone());
    let c = short_protocol(&["Q4_K"]);
    let out = run(&c, &m, &mut f).unwrap();
    assert_eq!(out.arms.len(), 2);
    let q = out.arm(p("Q4_K")).unwrap().outcome.as_ref().unwrap();
    let b = out.arm(p("F16")).unwrap().outcome.as_ref().unwrap();
    // 300 W × 8 ms per token = 2.4 J/token = 2400 mJ; F16: 10 ms → 3000 mJ.
    assert!(
        (q.mj_per_token() - 2400.0).abs() / 2400.0 < 0.01,
        "{}",
        q.mj_per_token()
    );
    assert!(
        (b.mj_per_token() - 3000.0).abs() / 3000.0 < 0.01,
        "{}",
        b.mj_per_token()
    );
    assert_eq!(q.tokens_generated, 60);
    let rep = build_report(&c, &out, &synthetic_context(), p("Q4_K")).unwrap();
    assert_eq!(rep.results.basis, report::Basis::Measured);
    let d = rep.results.vs_fp16_energy_pct.unwrap();
    assert!((d - -20.0).abs() < 1.0, "{d}");
    // The report validates with no errors and carries the arm order actually used.
    let text = serde_json::to_string(&rep).unwrap();
    let v = report::validate_str(&text);
    assert!(v.errors.is_empty(), "{:?}", v.errors);
    let value = serde_json::to_value(&rep).unwrap();
    let arm_order: Vec<String> =
        serde_json::from_value(value.pointer("/protocol/arm_order").unwrap().clone()).unwrap();
    assert_eq!(arm_order.len(), 2);
    assert_eq!(
        arm_order,
        out.arm_order
            .iter()
            .map(|p| p.as_str().to_string())
            .collect::<Vec<_>>()
    );
}

#[test]
fn arm_order_is_seeded_random_and_recorded() {
    let mut orders = std::collections::HashSet::new();
    for seed in 0..12 {
        let m = meter();
        let mut f = FakeDecoderFactory::new(m.clone());
        let mut c = short_protocol(&["Q4_K"]);
        c.seed = seed;
        c.iterations = 1;
        let out = run(&c, &m, &mut f).unwrap();
        assert_eq!(f.loads, out.arm_order, "loads follow the recorded order");
        orders.insert(out.arm_order.clone());
        // Same seed, same order.
        let m2 = meter();
        let mut f2 = FakeDecoderFactory::new(m2.clone());
        assert_eq!(run(&c, &m2, &mut f2).unwrap().arm_order, out.arm_order);
    }
    assert_eq!(orders.len(), 2, "both orders occur across seeds");
}

#[test]
fn cooldown_waits_for_power_and_temperature_and_records_convergence() {
    // Power decays from 400 W towards 100 W idle with τ = 5 s of virtual time.
    let m = FakeMeter::new(|t| 100.0 + 300.0 * (-t / 5.0).exp())
        .with(|s| s.temperature = Box::new(|t| 45.0 + 20.0 * (-t / 5.0).exp()));
    let mut mm = m.clone();
    let clock = FakeClock(m.clone());
    let c = CooldownConfig::default();
    let r = protocol::cool_down(&mut mm, &clock, 100.0, Some(45.0), &c).unwrap();
    assert!(r.converged);
    // 300·e^(−t/5) ≤ 6 → t ≥ 19.6 s; 20·e^(−t/5) ≤ 5 → t ≥ 6.9 s.
    assert!(r.seconds >= 19.0 && r.seconds <= 21.5, "{}", r.seconds);
    // A GPU that never cools: bounded wait, converged = false.
    let hot = FakeMeter::new(|_| 500.0);
    let mut hm = hot.clone();
    let r = protocol::cool_down(
        &mut hm,
        &FakeClock(hot.clone()),
        100.0,
        None,
        &CooldownConfig { max_s: 10.0, ..c },
    )
    .unwrap();
    assert!(!r.converged);
    assert!(r.seconds >= 10.0 && r.seconds < 12.0);
}

#[test]
fn a_failing_arm_keeps_the_other_and_never_yields_a_measured_delta() {
    let m = meter();
    let mut f = FakeDecoderFactory::new(m.clone());
    f.fail_load = vec![p("F16")];
    let c = short_protocol(&["Q4_K"]);
    let out = run(&c, &m, &mut f).unwrap();
    assert!(out.arm(p("F16")).unwrap().outcome.is_err());
    // The failure is typed, and its text is what the report says.
    let failure = out.arm(p("F16")).unwrap().outcome.clone().unwrap_err();
    assert_eq!(
        failure,
        ArmFailure::Load {
            precision: p("F16"),
            error: "scripted load failure for FP16".into()
        }
    );
    assert_eq!(
        failure.to_string(),
        "load FP16: scripted load failure for FP16"
    );
    let rep = build_report(&c, &out, &synthetic_context(), p("Q4_K")).unwrap();
    let arms = rep.protocol.as_ref().unwrap().arms.as_ref().unwrap();
    let f16 = arms.iter().find(|a| a.precision == "FP16").unwrap();
    assert_eq!(
        f16.error.as_deref(),
        Some("load FP16: scripted load failure for FP16")
    );
    assert_eq!(
        rep.results.basis,
        report::Basis::Measured,
        "the Q4_K energy itself was measured"
    );
    assert_eq!(rep.results.vs_fp16_energy_pct, None);
    assert_eq!(rep.results.fp16_energy_per_token_mj, None);
    assert!(rep
        .results
        .note
        .as_ref()
        .unwrap()
        .contains("baseline arm failed"));

    // The requested arm fails mid-window: unavailable, the FP16 figure kept and labelled.
    let m = meter();
    let mut f = FakeDecoderFactory::new(m.clone());
    f.fail_decode_after = Some((p("Q4_K"), 2));
    let out = run(&c, &m, &mut f).unwrap();
    assert_eq!(
        out.arm(p("Q4_K")).unwrap().outcome.as_ref().unwrap_err(),
        &ArmFailure::Decode {
            precision: p("Q4_K"),
            error: "scripted decode failure on call 3".into()
        }
    );
    let rep = build_report(&c, &out, &synthetic_context(), p("Q4_K")).unwrap();
    assert_eq!(rep.results.basis, report::Basis::Unavailable);
    assert_eq!(rep.results.energy_per_token_mj, None);
    assert!(rep.results.fp16_energy_per_token_mj.is_some());
    assert_eq!(rep.results.vs_fp16_energy_pct, None);
    let v = report::validate_str(&serde_json::to_string(&rep).unwrap());
    assert!(v.errors.is_empty(), "{:?}", v.errors);
}

#[test]
fn failing_power_reads_are_counted_not_hidden() {
    let m = meter().with(|s| s.fail_power_every = 3);
    let mut f = FakeDecoderFactory::new(m.clone());
    let c = short_protocol(&["Q4_K"]);
    let out = run(&c, &m, &mut f).unwrap();
    let q = out.arm(p("Q4_K")).unwrap().outcome.as_ref().unwrap();
    let trace = q.trace.as_ref().unwrap();
    assert!(trace.failed_reads > 0);
    // The counter figure is unaffected by trace read failures.
    assert!((q.mj_per_token() - 2400.0).abs() / 2400.0 < 0.01);
}

#[test]
fn a_stuck_counter_fails_the_arm_instead_of_reporting_zero() {
    let m = meter().with(|s| s.counter_stuck = true);
    let mut f = FakeDecoderFactory::new(m.clone());
    let c = short_protocol(&["Q4_K"]);
    let out = run(&c, &m, &mut f).unwrap();
    for a in &out.arms {
        let e = a.outcome.as_ref().unwrap_err();
        assert!(e.to_string().contains("did not move"), "{e}");
        assert!(matches!(e, ArmFailure::CounterStuck { .. }), "{e:?}");
    }
    let rep = build_report(&c, &out, &synthetic_context(), p("Q4_K")).unwrap();
    assert_eq!(rep.results.basis, report::Basis::Unavailable);
    assert_eq!(rep.results.energy_per_token_mj, None);
}

#[test]
fn no_counter_support_refuses_to_start() {
    let m = meter().with(|s| s.counter_supported = false);
    let mut f = FakeDecoderFactory::new(m.clone());
    let err = run(&short_protocol(&["Q4_K"]), &m, &mut f).unwrap_err();
    assert!(matches!(err, ProtocolError::NoCounter(_)));
    assert!(f.loads.is_empty());
}

#[test]
fn a_gpu_that_disappears_ends_the_run_with_every_arm_accounted_for() {
    // Lost after 1 virtual second: the first arm's warmup (20 tokens × 10 ms = 0.2 s) passes,
    // the window does not.
    let m = meter().with(|s| s.lost_after_s = Some(0.5));
    let mut f = FakeDecoderFactory::new(m.clone());
    let out = run(&short_protocol(&["Q4_K"]), &m, &mut f).unwrap();
    assert_eq!(out.arms.len(), 2);
    assert!(out.arms.iter().all(|a| a.outcome.is_err()));
    assert!(
        out.arms[1]
            .outcome
            .as_ref()
            .unwrap_err()
            .to_string()
            .contains("disappeared")
            || out.arms[1]
                .outcome
                .as_ref()
                .unwrap_err()
                .to_string()
                .contains("removed")
    );
    // The arm that lost the GPU says so; the next was never run, and says why.
    let first = out.arms[0].outcome.as_ref().unwrap_err();
    assert!(first.is_gpu_lost(), "{first:?}");
    assert_eq!(
        first.to_string(),
        "meter: the GPU disappeared: fake GPU removed"
    );
    assert_eq!(out.arms[1].outcome, Err(ArmFailure::NotRunGpuLost));
    assert_eq!(
        ArmFailure::NotRunGpuLost.to_string(),
        "not run: the GPU disappeared during an earlier arm"
    );
}

#[test]
fn preflight_refuses_before_loading_anything() {
    let m = meter().with(|s| s.free_bytes = 2 << 30);
    let mut f = FakeDecoderFactory::new(m.clone());
    f.bytes = 3 << 30;
    let err = run(&short_protocol(&["Q4_K"]), &m, &mut f).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("pre-flight") && msg.contains("nothing was loaded"),
        "{msg}"
    );
    assert!(f.loads.is_empty());
}

#[test]
fn atomic_write_leaves_no_partial_file() {
    let dir = std::env::temp_dir().join(format!("qe-atomic-{}", std::process::id()));
    let path = dir.join("energy.json");
    write_atomic(&path, b"{\"a\":1}").unwrap();
    write_atomic(&path, b"{\"a\":2}").unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":2}");
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
    // A target that cannot be written (a directory in the way) fails cleanly and leaves nothing.
    let blocked = dir.join("blocked");
    std::fs::create_dir_all(blocked.join("x")).unwrap();
    assert!(write_atomic(&blocked, b"data").is_err());
    let leftovers = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .count();
    assert_eq!(leftovers, 0);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn trace_overhead_ab_alternates_windows_on_one_loaded_model() {
    use meter::overhead::{self, OverheadConfig};
    let m = meter();
    let mut f = FakeDecoderFactory::new(m.clone());
    let cfg = OverheadConfig {
        precision: p("F16"),
        pairs: 4,
        iterations: 2,
        tokens: 20,
        batch: 1,
        prompt_len: 4,
        warmup: 1,
        sample_hz: 500.0,
        seed: 3,
    };
    let mut mm = m.clone();
    let r = overhead::run(&cfg, &mut mm, &mut f, Arc::new(FakeClock(m.clone()))).unwrap();
    assert_eq!(f.loads, vec![p("F16")], "loaded once");
    assert_eq!(r.windows.len(), 8);
    for p in 0..4 {
        let ws: Vec<_> = r.windows.iter().filter(|w| w.pair == p).collect();
        assert_eq!(ws.len(), 2);
        assert_ne!(ws[0].trace_on, ws[1].trace_on, "one on, one off per pair");
    }
    // The order inside pairs is seeded, not fixed.
    let firsts: Vec<bool> = r.windows.iter().step_by(2).map(|w| w.trace_on).collect();
    assert!(
        firsts.contains(&true) && firsts.contains(&false),
        "{firsts:?}"
    );
    for w in &r.windows {
        assert_eq!(w.tokens, 40);
        assert_eq!(w.samples.is_some(), w.trace_on);
        // 300 W × 0.010 s/token on the fake → 3000 mJ/token whether traced or not.
        assert!((w.mj_per_token() - 3000.0).abs() < 1.0, "{w:?}");
    }
    let s = r.summary.unwrap();
    assert_eq!(s.pairs, 4);
    // Virtual time cannot see the thread: no overhead, and a zero-width interval below target.
    assert!(s.overhead_pct.abs() < 1e-6, "{s:?}");
    assert_eq!(s.verdict, overhead::Verdict::BelowTarget);

    let stuck = FakeMeter::new(|_| 300.0).with(|s| s.counter_stuck = true);
    let mut f = FakeDecoderFactory::new(stuck.clone());
    let mut sm = stuck.clone();
    let e = overhead::run(&cfg, &mut sm, &mut f, Arc::new(FakeClock(stuck))).unwrap_err();
    assert!(e.to_string().contains("did not move"), "{e}");
}

#[test]
fn host_cpu_steal_and_process_load_are_recorded_per_arm() {
    let m = meter().with(|s| s.steal_share = Some(0.25));
    let mut f = FakeDecoderFactory::new(m.clone());
    let c = short_protocol(&["Q4_K"]);
    let out = run(&c, &m, &mut f).unwrap();
    for arm in &out.arms {
        let h = arm
            .outcome
            .as_ref()
            .unwrap()
            .host
            .expect("scripted host counters");
        assert!((h.steal_pct - 25.0).abs() < 0.5, "{h:?}");
        assert!((h.process_cpu_cores - 1.0).abs() < 0.01, "{h:?}");
    }
    let rep = build_report(&c, &out, &synthetic_context(), p("Q4_K")).unwrap();
    let v = serde_json::to_value(&rep).unwrap();
    let arms = v.pointer("/protocol/arms").unwrap().as_array().unwrap();
    assert!(arms
        .iter()
        .all(|a| (a["host_cpu_steal_pct"].as_f64().unwrap() - 25.0).abs() < 0.5));
    assert!(report::validate_str(&serde_json::to_string(&rep).unwrap())
        .errors
        .is_empty());

    // Unreadable host counters are reported as missing, never as a zero.
    let m = meter();
    let mut f = FakeDecoderFactory::new(m.clone());
    let out = run(&c, &m, &mut f).unwrap();
    assert!(out
        .arms
        .iter()
        .all(|a| a.outcome.as_ref().unwrap().host.is_none()));
    let v = serde_json::to_value(build_report(&c, &out, &synthetic_context(), p("Q4_K")).unwrap())
        .unwrap();
    assert!(v
        .pointer("/protocol/arms/0/host_cpu_steal_pct")
        .is_none_or(|x| x.is_null()));
}

#[test]
fn perplexity_is_scored_after_the_window_and_reported_with_its_delta() {
    let m = meter();
    let mut f = FakeDecoderFactory::new(m.clone());
    f.nll_per_token = vec![(p("F16"), 2.0), (p("Q4_K"), 2.1)];
    let mut c = short_protocol(&["Q4_K"]);
    c.perplexity = Some(PerplexityConfig::embedded(300, 128));
    let out = run(&c, &m, &mut f).unwrap();
    // Scoring advances the fake GPU's clock like decoding; the energy per token is the same as
    // without scoring (3000 mJ at F16), so it was not inside the window.
    let b = out.arm(p("F16")).unwrap().outcome.as_ref().unwrap();
    assert!(
        (b.mj_per_token() - 3000.0).abs() / 3000.0 < 0.01,
        "{}",
        b.mj_per_token()
    );
    let s = b.perplexity.clone().unwrap().unwrap();
    // 300 byte ids in windows of 128: 127 + 127 + 43 predictions.
    assert_eq!((s.tokens_evaluated, s.windows), (297, 3));
    assert!((s.mean_nll - 2.0).abs() < 1e-12);

    // Synthetic quantized arms not quantized from the float weights drew their own random weights:
    // their perplexity stands, but no Δ against a different model.
    let q = build_report(&c, &out, &synthetic_context(), p("Q4_K"))
        .unwrap()
        .quality
        .unwrap();
    assert_eq!(q.basis, "measured");
    assert!(q.delta_vs_fp16_pct.is_none() && q.fp16_value.is_none());
    let why = q.delta_note.clone().unwrap();
    assert!(why.contains("drawn independently"), "{why}");
    assert!(q.note.unwrap().contains("Synthetic weights"));

    let rep = build_report(&c, &out, &real_ctx(), p("Q4_K")).unwrap();
    assert_eq!(rep.results.basis, report::Basis::Measured);
    let q = rep.quality.clone().expect("quality block");
    assert_eq!(q.basis, "measured");
    let want = (2.1f64.exp() / 2.0f64.exp() - 1.0) * 100.0; // +10.52 %
    assert!(
        (q.delta_vs_fp16_pct.unwrap() - want).abs() < 1e-3,
        "{:?}",
        q.delta_vs_fp16_pct
    );
    assert!((q.value.unwrap() - 2.1f64.exp()).abs() < 1e-3);
    let text = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../data/perplexity/us-founding-texts.txt"
    ))
    .unwrap();
    use sha2::Digest;
    let sha: String = sha2::Sha256::digest(&text)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let corpus = q.corpus.unwrap();
    assert_eq!(corpus.sha256.as_deref(), Some(sha.as_str()));
    assert_eq!(corpus.bytes, Some(text.len() as i64));
    assert!(!q.note.unwrap().contains("Synthetic weights"));
    let v = report::validate_str(&serde_json::to_string(&rep).unwrap());
    assert!(v.errors.is_empty(), "{:?}", v.errors);
}

#[test]
fn a_failed_score_never_becomes_a_quality_figure_and_keeps_the_energy() {
    let m = meter();
    // The quantized arm cannot be scored: its quality is unavailable, its energy still measured.
    let mut f = FakeDecoderFactory::new(m.clone());
    f.fail_nll = vec![p("Q4_K")];
    let mut c = short_protocol(&["Q4_K"]);
    c.perplexity = Some(PerplexityConfig::embedded(64, 32));
    let out = run(&c, &m, &mut f).unwrap();
    let rep = build_report(&c, &out, &synthetic_context(), p("Q4_K")).unwrap();
    assert_eq!(rep.results.basis, report::Basis::Measured);
    let q = rep.quality.unwrap();
    assert_eq!(q.basis, "unavailable");
    assert!(q.value.is_none() && q.delta_vs_fp16_pct.is_none());
    assert!(q.error.unwrap().contains("scripted scoring failure"));

    // The baseline cannot be scored: the arm's perplexity stands, with no Δ and the reason.
    let mut f = FakeDecoderFactory::new(m.clone());
    f.fail_nll = vec![p("F16")];
    let out = run(&c, &m, &mut f).unwrap();
    let q = build_report(&c, &out, &real_ctx(), p("Q4_K"))
        .unwrap()
        .quality
        .unwrap();
    assert_eq!(q.basis, "measured");
    assert!(q.delta_vs_fp16_pct.is_none() && q.fp16_value.is_none());
    let why = q.delta_note.as_deref().unwrap();
    assert!(
        why.contains("no Δ vs FP16") && why.contains("scoring failure for FP16"),
        "{why}"
    );

    // No tokens at all: every arm says why.
    let mut f = FakeDecoderFactory::new(m.clone());
    f.fail_tokenize = true;
    let out = run(&c, &m, &mut f).unwrap();
    for a in &out.arms {
        let e = a
            .outcome
            .as_ref()
            .unwrap()
            .perplexity
            .clone()
            .unwrap()
            .unwrap_err();
        assert!(e.to_string().contains("tokenizing the corpus"), "{e}");
        assert_eq!(
            e,
            ScoreError::Tokenize {
                error: "scripted tokenizer failure".into()
            }
        );
    }
    let q = build_report(&c, &out, &synthetic_context(), p("Q4_K"))
        .unwrap()
        .quality
        .unwrap();
    assert_eq!(q.basis, "unavailable");
}

#[test]
fn a_counter_that_goes_backwards_fails_the_arm_with_the_reason() {
    // A driver reload mid-window restarts the counter from 0: the difference means nothing.
    // The update-period probe reads the counter 8 times first (it stops at 7 changes); the
    // window's opening read is the 9th.
    let m = meter().with(|s| s.counter_resets_after_reads = Some(9));
    let mut f = FakeDecoderFactory::new(m.clone());
    let c = ProtocolConfig {
        baseline: None,
        ..short_protocol(&["Q4_K"])
    };
    let out = run(&c, &m, &mut f).unwrap();
    let e = out.arm(p("Q4_K")).unwrap().outcome.as_ref().unwrap_err();
    assert!(matches!(e, ArmFailure::CounterBackwards { .. }), "{e:?}");
    assert!(e.to_string().contains("went backwards"), "{e}");
    let rep = build_report(&c, &out, &synthetic_context(), p("Q4_K")).unwrap();
    assert_eq!(rep.results.basis, report::Basis::Unavailable);
    assert_eq!(rep.results.energy_per_token_mj, None, "never a figure");
}

#[test]
fn a_counter_read_error_at_the_close_fails_the_arm_and_the_run_goes_on() {
    // Power reads keep working (the trace is fine); only the counter fails, after the first arm.
    let m = meter().with(|s| s.counter_fails_after_s = Some(1e9));
    let mut f = FakeDecoderFactory::new(m.clone());
    let c = short_protocol(&["Q4_K"]);
    let first = run(&c, &m, &mut f).unwrap();
    let t_end = m.now();
    // Again, with the counter failing from the middle of the first arm's window on.
    let m = meter().with(|s| s.counter_fails_after_s = Some(t_end / 4.0));
    let mut f = FakeDecoderFactory::new(m.clone());
    let out = run(&c, &m, &mut f).unwrap();
    assert!(first.arms.iter().all(|a| a.outcome.is_ok()));
    for a in &out.arms {
        let e = a.outcome.as_ref().unwrap_err();
        assert!(matches!(e, ArmFailure::MeterRead { .. }), "{e:?}");
        assert!(e.to_string().contains("energy counter read failure"), "{e}");
    }
    let rep = build_report(&c, &out, &synthetic_context(), p("Q4_K")).unwrap();
    assert_eq!(rep.results.basis, report::Basis::Unavailable);
    assert_eq!(rep.results.energy_per_token_mj, None);
}

#[test]
fn a_trace_with_gaps_is_flagged_and_the_counter_figure_stands() {
    let m = meter().with(|s| s.fail_power_every = 2); // half the trace reads fail
    let mut f = FakeDecoderFactory::new(m.clone());
    let c = short_protocol(&["Q4_K"]);
    let out = run(&c, &m, &mut f).unwrap();
    let rep = build_report(&c, &out, &synthetic_context(), p("Q4_K")).unwrap();
    assert_eq!(rep.results.basis, report::Basis::Measured);
    let note = rep.results.note.unwrap();
    assert!(note.contains("The power trace has gaps"), "{note}");
    // Every read failing: no trace at all, said so; still the counter's figure.
    let m = meter().with(|s| s.fail_power_every = 1);
    let mut f = FakeDecoderFactory::new(m.clone());
    let c = ProtocolConfig {
        cooldown: CooldownConfig {
            max_s: 0.0,
            ..CooldownConfig::default()
        },
        ..short_protocol(&["Q4_K"])
    };
    // The idle reference needs one good read: none → the run cannot start, and says why.
    let e = run(&c, &m, &mut f).unwrap_err();
    assert!(e.to_string().contains("power read"), "{e}");
}

#[test]
fn out_of_memory_at_load_or_at_the_first_step_fails_that_arm_and_the_others_run() {
    // The pre-flight estimate said it fits; the allocator disagreed.
    let m = meter();
    let mut f = FakeDecoderFactory::new(m.clone());
    f.fail_load = vec![p("Q4_K")];
    f.failure_text = Some("CUDA_ERROR_OUT_OF_MEMORY: out of memory".into());
    let c = short_protocol(&["Q4_K", "Q8_0"]);
    let out = run(&c, &m, &mut f).unwrap();
    let e = out.arm(p("Q4_K")).unwrap().outcome.as_ref().unwrap_err();
    assert!(e.to_string().contains("CUDA_ERROR_OUT_OF_MEMORY"), "{e}");
    assert!(out.arm(p("Q8_0")).unwrap().outcome.is_ok());
    assert!(out.arm(p("F16")).unwrap().outcome.is_ok());
    // At the first decode step (the warm-up).
    let m = meter();
    let mut f = FakeDecoderFactory::new(m.clone());
    f.fail_decode_after = Some((p("Q8_0"), 0));
    f.failure_text = Some("CUDA_ERROR_OUT_OF_MEMORY: out of memory".into());
    let out = run(&c, &m, &mut f).unwrap();
    let e = out.arm(p("Q8_0")).unwrap().outcome.as_ref().unwrap_err();
    assert!(matches!(e, ArmFailure::Decode { .. }), "{e:?}");
    assert!(e.to_string().contains("out of memory"), "{e}");
    assert!(out.arm(p("Q4_K")).unwrap().outcome.is_ok());
    assert!(out.arm(p("F16")).unwrap().outcome.is_ok());
    let rep = build_report(&c, &out, &synthetic_context(), p("Q8_0")).unwrap();
    let arms = rep.protocol.unwrap().arms.unwrap();
    let q8 = arms.iter().find(|a| a.precision == "Q8_0").unwrap();
    assert!(q8.error.as_deref().unwrap().contains("out of memory"));
}

#[test]
fn arms_report_their_weight_bytes_and_hbm_roofline_fraction() {
    use meter::roofline::DecodeWeightBytes;
    let m = meter();
    let mut f = FakeDecoderFactory::new(m.clone());
    let bytes = DecodeWeightBytes {
        per_step: 4_000_000_000,
        per_sequence: 14_336,
    };
    f.weight_bytes = vec![(p("Q4_K"), bytes)];
    let c = short_protocol(&["Q4_K"]);
    let mut out = run(&c, &m, &mut f).unwrap();
    let arm = |rep: &report::Report, name: &str| {
        rep.protocol
            .as_ref()
            .unwrap()
            .arms
            .as_ref()
            .unwrap()
            .iter()
            .find(|a| a.precision == name)
            .unwrap()
            .clone()
    };
    // An unknown card: the bytes, no fraction (omitted, not zero).
    let rep = build_report(&c, &out, &synthetic_context(), p("Q4_K")).unwrap();
    let q = arm(&rep, "Q4_K");
    assert_eq!(q.weight_bytes_per_token, Some(4_000_014_336));
    assert_eq!(q.hbm_roofline_fraction, None);
    // The FP16 arm's engine could not say: neither field.
    let b = arm(&rep, "FP16");
    assert_eq!(
        (b.weight_bytes_per_token, b.hbm_roofline_fraction),
        (None, None)
    );
    let json = serde_json::to_value(&rep).unwrap();
    assert!(!json.to_string().contains("hbm_roofline_fraction"));

    // On an H200 (4800 GB/s): 4 000 014 336 B × ~125 tok/s (8 ms per token) ÷ 4.8e12 B/s.
    out.device.name = "NVIDIA H200".into();
    let rep = build_report(&c, &out, &synthetic_context(), p("Q4_K")).unwrap();
    let q = arm(&rep, "Q4_K");
    let tok_s = q.throughput_tokens_per_s.unwrap();
    let want = 4_000_014_336.0 * tok_s / 4.8e12;
    let got = q.hbm_roofline_fraction.unwrap();
    assert!((got / want - 1.0).abs() < 1e-3, "{got} vs {want}");
    assert!((got - 0.1042).abs() < 0.002, "{got}");
    let md = report::to_markdown(&rep);
    assert!(
        md.contains("| Memory roofline | 4000.01 MB of weights read per token · "),
        "{md}"
    );

    // Weights that would outrun the card (served from cache): the fraction is omitted with a
    // note, and the report is still written.
    f.weight_bytes = vec![(
        p("Q4_K"),
        DecodeWeightBytes {
            per_step: 50_000_000_000,
            per_sequence: 0,
        },
    )];
    let mut out = run(&c, &m, &mut f).unwrap();
    out.device.name = "NVIDIA H200".into();
    let rep = build_report(&c, &out, &synthetic_context(), p("Q4_K")).unwrap();
    let q = arm(&rep, "Q4_K");
    assert_eq!(q.weight_bytes_per_token, Some(50_000_000_000));
    assert_eq!(q.hbm_roofline_fraction, None);
    assert!(q
        .notes
        .unwrap()
        .iter()
        .any(|n| n.contains("hbm_roofline_fraction omitted")),);

    // Batch 4: a step's bytes are shared by the four tokens it generates.
    let mut c4 = short_protocol(&["Q4_K"]);
    c4.batch = 4;
    f.weight_bytes = vec![(p("Q4_K"), bytes)];
    let out = run(&c4, &m, &mut f).unwrap();
    let rep = build_report(&c4, &out, &synthetic_context(), p("Q4_K")).unwrap();
    assert_eq!(
        arm(&rep, "Q4_K").weight_bytes_per_token,
        Some(1_000_014_336)
    );
}

/// A context run measures the prefill and the decode in windows of their own: the decode
/// window's energy is the decode steps' alone (a prefill inside it would add 300 W × 1 s per
/// iteration), the prefill window's is the prefills', and each window lasts at least
/// `min_window_s`. The report says the depth, carries the prefill block and validates.
#[test]
fn a_context_run_keeps_the_prefill_out_of_the_decode_window() {
    let m = meter();
    let mut f = FakeDecoderFactory::new(m.clone());
    // 1 ms per prompt token: a 1000-token prefill takes 1 s of virtual time.
    f.prefill_s_per_token = 0.001;
    let c = ProtocolConfig {
        context: Some(1000),
        min_window_s: 2.5,
        ..short_protocol(&["Q4_K"])
    };
    let out = run(&c, &m, &mut f).unwrap();
    for (name, step_ms) in [("Q4_K", 8.0), ("F16", 10.0)] {
        let a = out.arm(p(name)).unwrap().outcome.as_ref().unwrap();
        // Decode: 300 W × the step alone.
        let want = 300.0 * step_ms;
        assert!(
            (a.mj_per_token() - want).abs() / want < 0.01,
            "{name}: {} mJ/token, want {want}",
            a.mj_per_token()
        );
        // 20 tokens × 8 ms = 0.16 s an iteration: 16 iterations make 2.5 s.
        assert!(
            a.window_s >= 2.5 && a.iteration_s.len() >= 3,
            "{name}: {a:?}"
        );
        let pre = a.prefill.as_ref().expect("a prefill window");
        // Prefill: 300 W × 1 ms per prompt token = 300 mJ; 1 s each, 3 of them (the minimum).
        assert!(
            (pre.mj_per_prompt_token() - 300.0).abs() < 3.0,
            "{name}: {pre:?}"
        );
        assert_eq!(pre.prefills, 3);
        assert_eq!(pre.prompt_tokens, 3000);
        assert!(
            pre.window_s >= 2.5 && (pre.ttft_s - 1.0).abs() < 0.05,
            "{pre:?}"
        );
    }
    let rep = build_report(&c, &out, &synthetic_context(), p("Q4_K")).unwrap();
    assert_eq!(rep.workload.context_depth, Some(1000));
    assert_eq!(rep.workload.context_length, Some(1020));
    let pre = rep.results.prefill.as_ref().unwrap();
    assert!((pre.energy_per_prompt_token_mj - 300.0).abs() < 3.0);
    assert!(pre.vs_fp16_energy_pct.is_some());
    assert!((pre.time_to_first_token_ms - 1000.0).abs() < 50.0);
    let text = serde_json::to_string(&rep).unwrap();
    let v = report::validate_str(&text);
    assert!(v.errors.is_empty(), "{:?}", v.errors);
    assert!(rep.measurement.method.contains("depth 1000"));
    let md = report::to_markdown(&rep);
    assert!(
        md.contains("| Workload | context run: the decode at depth 1000 (the prefill in a window of its own); prefill 30"),
        "{md}"
    );
}

/// A prompt-set run serves every request whole (a prefill, then its output tokens) in the
/// requests' window, and every prefill alone in a window of its own. Two requests: 100 prompt
/// tokens and 10 outputs, 400 and 20. At 300 W, 1 ms a prompt token and 8 ms a Q4_K step, a pass
/// costs 150 J of prefill and 72 J of decode for 30 output tokens: 7 400 mJ a token end to end,
/// 2 400 mJ the decode's share, 300 mJ a prompt token, 111 J a request.
#[test]
fn a_prompt_set_run_serves_whole_requests_and_measures_the_prefill_apart() {
    let m = meter();
    let mut f = FakeDecoderFactory::new(m.clone());
    f.prefill_s_per_token = 0.001;
    let set = meter::prompts::PromptSet::parse(
        br#"{"name": "two", "license": "CC0-1.0", "token_counts": "words", "prompts": [
            {"id": "a", "kind": "chat", "prompt_tokens": 100, "output_tokens": 10, "text": "a"},
            {"id": "b", "kind": "rag", "prompt_tokens": 400, "output_tokens": 20, "text": "b"}]}"#,
    )
    .unwrap();
    let c = ProtocolConfig {
        prompts: Some(set.clone()),
        min_window_s: 2.5,
        ..short_protocol(&["Q4_K"])
    };
    let out = run(&c, &m, &mut f).unwrap();
    let a = out.arm(p("Q4_K")).unwrap().outcome.as_ref().unwrap();
    // Whole passes: 0.74 s each, so 4 make the 2.5 s window (3 iterations asked).
    let q = a.requests.as_ref().unwrap();
    assert_eq!((q.passes, q.requests), (4, 8));
    assert_eq!(a.tokens_generated, 4 * 30);
    assert_eq!(q.prompt_tokens, 4 * 500);
    assert!((a.mj_per_token() - 7400.0).abs() < 40.0, "{a:?}");
    // The prefill window: whole passes of both prefills (0.5 s a pass) until it lasts 2.5 s.
    let pre = a.prefill.as_ref().unwrap();
    assert!(pre.window_s >= 2.49 && pre.prefills >= 10, "{pre:?}");
    assert_eq!(pre.prefills % 2, 0);
    assert_eq!(pre.prompt_tokens, pre.prefills as u64 / 2 * 500);
    assert!((pre.mj_per_prompt_token() - 300.0).abs() < 3.0, "{pre:?}");
    // Half at 0.1 s, half at 0.4 s: the median (the upper one) and the 90th percentile are 0.4 s.
    assert!((pre.ttft_s - 0.4).abs() < 0.02 && (q.ttft_p90_s - 0.4).abs() < 0.02);

    let rep = build_report(&c, &out, &synthetic_context(), p("Q4_K")).unwrap();
    let ps = rep.workload.prompt_set.as_ref().unwrap();
    assert_eq!(
        (ps.prompts, ps.prompt_tokens, ps.output_tokens),
        (2, 500, 30)
    );
    assert_eq!(ps.sha256, set.sha256);
    // The cache every request fits in; the run has no single depth.
    assert_eq!(rep.workload.context_length, Some(420));
    assert_eq!(rep.workload.context_depth, None);
    assert_eq!(rep.measurement.tokens_per_run, Some(30));
    let r = rep.results.requests.as_ref().unwrap();
    assert!((r.energy_per_request_joules - 111.0).abs() < 0.6, "{r:?}");
    let decode = r.decode_energy_per_token_mj.unwrap();
    assert!((decode - 2400.0).abs() < 40.0, "{decode}");
    // ΔE vs FP16 is the requests' end to end: F16 decodes at 10 ms, 8 000 mJ a token.
    let d = rep.results.vs_fp16_energy_pct.unwrap();
    assert!((d - (7400.0 / 8000.0 - 1.0) * 100.0).abs() < 0.5, "{d}");
    assert!(rep
        .measurement
        .method
        .contains("prompt-set run (two, 2 requests)"));
    let md = report::to_markdown(&rep);
    assert!(
        md.contains(
            "| Workload | prompt set two (2 requests, 500 prompt and 30 output tokens a pass)"
        ),
        "{md}"
    );
    assert!(md.contains("J per request, decode's share 24"), "{md}");
    let text = serde_json::to_string(&rep).unwrap();
    let v = report::validate_str(&text);
    assert!(v.errors.is_empty(), "{:?}", v.errors);
    // A requests count that is not whole passes is refused, naming the field.
    let bad = text.replace("\"requests\":8", "\"requests\":7");
    assert_ne!(bad, text);
    let v = report::validate_str(&bad);
    assert!(
        v.errors
            .iter()
            .any(|e| e.path == "$.results.requests.requests"
                && e.message.contains("4 passes × 2 prompts")),
        "{:?}",
        v.errors
    );
}

/// Without phases (an engine that only generates whole), a context run fails the arm with
/// words that say why, never a figure that holds the prefill.
#[test]
fn a_context_run_on_an_engine_without_phases_fails_saying_so() {
    struct Whole(FakeDecoderFactory);
    struct WholeDecoder(Box<dyn meter::decoder::Decoder>);
    impl meter::decoder::Decoder for WholeDecoder {
        fn generate(
            &mut self,
            b: usize,
            p: usize,
            n: usize,
        ) -> Result<usize, meter::decoder::DecodeError> {
            self.0.generate(b, p, n)
        }
        fn synchronize(&mut self) -> Result<(), meter::decoder::DecodeError> {
            self.0.synchronize()
        }
        fn kernel(&self) -> String {
            "whole-only".into()
        }
        fn nll(&mut self, ids: &[u32]) -> Result<f64, meter::decoder::DecodeError> {
            self.0.nll(ids)
        }
    }
    impl meter::decoder::DecoderFactory for Whole {
        fn load(
            &mut self,
            p: report::Precision,
        ) -> Result<Box<dyn meter::decoder::Decoder>, meter::decoder::DecodeError> {
            Ok(Box::new(WholeDecoder(self.0.load(p)?)))
        }
        fn required_bytes(&self, p: report::Precision, b: usize, c: usize) -> u64 {
            self.0.required_bytes(p, b, c)
        }
        fn tokenize(&self, t: &str) -> Result<(Vec<u32>, String), meter::decoder::DecodeError> {
            self.0.tokenize(t)
        }
    }
    let m = meter();
    let mut f = Whole(FakeDecoderFactory::new(m.clone()));
    let c = ProtocolConfig {
        context: Some(100),
        ..short_protocol(&["Q4_K"])
    };
    let mut mm = m.clone();
    let out = protocol::run(&c, &mut mm, &mut f, Arc::new(FakeClock(m.clone()))).unwrap();
    let e = out.arm(p("Q4_K")).unwrap().outcome.as_ref().unwrap_err();
    assert!(
        e.to_string()
            .contains("cannot time its prefill and its decode apart"),
        "{e}"
    );
}
