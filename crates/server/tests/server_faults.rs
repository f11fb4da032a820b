//! The server path against a server that misbehaves on purpose: `tests/fixtures/fake_server.py`
//! (Python 3 standard library only) speaks the OpenAI completions API and, per mode, answers an
//! HTTP error, stops short, drops the usage figure, reports an error in the stream, hangs, crashes
//! mid-run, never becomes ready or dies at start. Each test drives `measure_served` over two arms
//! (a healthy one and a faulty one: the command picks the mode from the model file's name) and
//! checks the written reports: both validate, the healthy arm is measured with its latency, the
//! faulty arm has no figure and its error carries the server's own words. After every test the
//! fake servers are gone (process group and port).
//!
//! The energy comes from a meter that integrates a constant power over real time; the clock is
//! the real one. Fast and deterministic: every test takes a few seconds at most.

use meter::fallback::MeasureResult;
use meter::meter::RealClock;
use meter::protocol::{CooldownConfig, ProtocolConfig};
use modelfile::{ModelFileInfo, ModelFormat};
use report::Precision;
use server::run::{dry_run_served, measure_served, ServerRun};
use server::{Api, Launch, ServedModel, ServerOptions};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use meter::testing::WallMeter;
const TOKENS: usize = 16;
const ITERATIONS: usize = 3;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake_server.py")
}

/// The Python interpreter itself (not a version manager's shim script in front of it), so the
/// fake server starts fast and is the process the meter stops.
fn python() -> &'static str {
    static PY: OnceLock<String> = OnceLock::new();
    PY.get_or_init(|| {
        let out = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("python3 on PATH (the fake server is a Python script)");
        assert!(out.status.success(), "python3 failed: {out:?}");
        let exe = String::from_utf8(out.stdout).unwrap().trim().to_string();
        assert!(Path::new(&exe).is_file(), "python3 reports {exe:?}");
        exe
    })
}

/// A fresh output directory for one test.
fn out_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("qe-server-faults-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// An arm serving `<dir>/models/<mode>.bin`: a tiny real file (it is hashed) with a header we
/// make up (the fake server never reads it).
fn model(dir: &Path, precision: Precision, mode: &str) -> ServedModel {
    let models = dir.join("models");
    std::fs::create_dir_all(&models).unwrap();
    let path = models.join(format!("{mode}.bin"));
    std::fs::write(&path, format!("fake weights for mode {mode}\n")).unwrap();
    let bytes = std::fs::metadata(&path).unwrap().len();
    let ty = match precision {
        Precision::Fp16 => "F16",
        _ => "Q4_0",
    };
    ServedModel {
        precision,
        path: path.clone(),
        info: ModelFileInfo {
            format: ModelFormat::Gguf,
            path,
            bytes,
            params: 494_032_768,
            precision: Some(precision),
            weight_types: vec![(ty.to_string(), 494_032_768)],
            architecture: Some("qwen2".into()),
            name: None,
        },
    }
}

/// The server command: the mode is the model file's name (`…/status500.bin` → `status500`).
fn command() -> String {
    format!(
        "{} {} --port {{port}} --mode $(basename {{model}} .bin)",
        python(),
        fixture().display()
    )
}

fn protocol() -> ProtocolConfig {
    ProtocolConfig {
        tokens: TOKENS,
        iterations: ITERATIONS,
        warmup: 1,
        batch: 1,
        prompt_len: 4,
        sample_hz: 20.0,
        idle_reads: 2,
        cooldown: CooldownConfig {
            max_s: 0.2,
            poll_s: 0.05,
            ..CooldownConfig::default()
        },
        min_window_s: 0.0,
        ..ProtocolConfig::default()
    }
}

fn options(launch: Launch) -> ServerOptions {
    ServerOptions {
        launch,
        api: Api::Completions,
        served_model: None,
        ready_timeout: Duration::from_secs(10),
        request_timeout: Duration::from_secs(10),
        stall_timeout: Duration::from_secs(2),
        seed: 5,
    }
}

fn started(models: Vec<ServedModel>, out: &Path) -> ServerRun {
    ServerRun {
        server: options(Launch::Start {
            command: command(),
            models,
            log_dir: out.join("server-logs"),
        }),
        protocol: protocol(),
        out: out.to_path_buf(),
        name: None,
        card: None,
        params_b: None,
        model_name: None,
    }
}

fn measure(run: &ServerRun) -> MeasureResult {
    measure_served(run, &mut WallMeter::new(), Arc::new(RealClock::default()))
        .expect("a failing arm is a report, never a failed run")
}

/// The report of arm `p`, after checking that every written report validates.
fn report_of(res: &MeasureResult, p: Precision) -> &report::Report {
    for (path, _) in &res.reports {
        let text = std::fs::read_to_string(path).unwrap();
        let v = report::validate_str(&text);
        assert!(v.is_valid(), "{}: {:?}\n{text}", path.display(), v.errors);
    }
    &res.reports
        .iter()
        .find(|(_, r)| r.workload.precision == p.as_str())
        .unwrap_or_else(|| panic!("no {p} report"))
        .1
}

/// `protocol.arms[]` entry of `p` in `rep`.
fn arm(rep: &report::Report, p: Precision) -> &report::Arm {
    rep.protocol
        .as_ref()
        .unwrap()
        .arms
        .as_ref()
        .unwrap()
        .iter()
        .find(|a| a.precision == p.as_str())
        .unwrap_or_else(|| panic!("no {p} arm in protocol.arms"))
}

/// A healthy arm: measured, every token counted from the usage figure, latency present.
fn assert_measured(res: &MeasureResult, p: Precision) {
    let rep = report_of(res, p);
    assert_eq!(
        rep.results.basis,
        report::Basis::Measured,
        "{p}: {:?} / {:?}",
        rep.results.note,
        arm(rep, p).error
    );
    let want = (ITERATIONS * TOKENS) as u64;
    assert_eq!(rep.results.tokens_generated, Some(want));
    assert!(rep.results.energy_per_token_mj.is_some_and(|e| e > 0.0));
    let lat = arm(rep, p)
        .latency
        .as_ref()
        .expect("latency of a server arm");
    assert_eq!(lat.requests, ITERATIONS as u64, "{lat:?}");
    assert_eq!(lat.usage_tokens, Some(want), "{lat:?}");
    assert_eq!(lat.counted_from, report::TokenCount::Usage, "{lat:?}");
    assert_eq!(lat.streamed_chunks, want, "{lat:?}");
    let stack = rep.stack.as_ref().unwrap();
    assert_eq!(stack.engine.as_deref(), Some("quantenergy-fake"));
    let serving = stack.serving.as_ref().unwrap();
    assert_eq!(serving.mode, report::ServingMode::Started);
    assert_eq!(serving.model_id.as_deref(), Some("fake-model"));
}

/// A faulty arm: no figure, and its error (in every report's `protocol.arms[]`) has `words`.
fn assert_failed(res: &MeasureResult, p: Precision, words: &[&str]) -> String {
    let rep = report_of(res, p);
    assert_eq!(rep.results.basis, report::Basis::Unavailable, "{p}");
    assert!(rep.results.energy_per_token_mj.is_none(), "{p}");
    assert!(arm(rep, p).energy_per_token_mj.is_none(), "{p}");
    let err = arm(rep, p)
        .error
        .clone()
        .unwrap_or_else(|| panic!("{p}: no error"));
    for w in words {
        assert!(err.contains(w), "{p}: {w:?} not in the error:\n{err}");
    }
    // The other report of the run says the same of this arm.
    for (_, other) in &res.reports {
        assert_eq!(arm(other, p).error.as_deref(), Some(err.as_str()));
    }
    err
}

/// Whether a process of group `pgid` is still running (zombies waiting to be reaped are not).
fn group_running(pgid: u32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .any(|stat| {
            let Some(rest) = stat.rsplit_once(')').map(|r| r.1) else {
                return false;
            };
            let f: Vec<&str> = rest.split_whitespace().collect();
            // After the command name: state, ppid, pgrp.
            f.first().is_some_and(|s| *s != "Z") && f.get(2) == Some(&pgid.to_string().as_str())
        })
}

/// Whether the fake server `pid` still answers on `port` (another test's server may since have
/// been given the same port: it answers with its own pid).
fn answers_on(port: u16, pid: u32) -> bool {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(300)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = s.write_all(b"GET /health HTTP/1.0\r\n\r\n");
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text.contains(&format!("\"pid\": {pid}}}"))
}

/// Every fake server started under `log_dir` (each logs its port, pid and process group) is
/// gone: its group has no running process and its port no longer answers. Returns how many
/// servers had started.
fn assert_servers_gone(log_dir: &Path) -> usize {
    let mut seen = 0;
    for entry in std::fs::read_dir(log_dir).unwrap().flatten() {
        let log = std::fs::read_to_string(entry.path()).unwrap_or_default();
        for line in log.lines() {
            let Some(rest) = line.strip_prefix("fake server listening on 127.0.0.1:") else {
                continue;
            };
            let w: Vec<&str> = rest.split_whitespace().collect();
            let port: u16 = w[0].parse().unwrap();
            let pid: u32 = w[2].parse().unwrap();
            let pgid: u32 = w[4].parse().unwrap();
            seen += 1;
            wait_gone(pgid, port, pid, &entry.path());
        }
    }
    seen
}

fn wait_gone(pgid: u32, port: u16, pid: u32, what: &Path) {
    let t0 = Instant::now();
    while group_running(pgid) || answers_on(port, pid) {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the fake server of {} (pid {pid}, group {pgid}, port {port}) is still running",
            what.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Run a healthy arm (`ok`) beside a faulty one (`fault`), check both reports and that the
/// servers are gone; returns the faulty arm's error and the run's wall time.
fn healthy_and_faulty(
    tag: &str,
    healthy: Precision,
    fault: &str,
    faulty: Precision,
    words: &[&str],
    tweak: impl FnOnce(&mut ServerRun),
) -> (String, Duration) {
    let out = out_dir(tag);
    let mut run = started(
        vec![model(&out, healthy, "ok"), model(&out, faulty, fault)],
        &out,
    );
    tweak(&mut run);
    let t0 = Instant::now();
    let res = measure(&run);
    let took = t0.elapsed();
    eprintln!("{tag}: {took:.2?}");
    assert!(res.measured, "the healthy arm is measured");
    assert_eq!(res.reports.len(), 2);
    assert_measured(&res, healthy);
    let err = assert_failed(&res, faulty, words);
    eprintln!("{tag}: the {faulty} arm's error: {err}");
    if healthy == Precision::Fp16 {
        assert!(report_of(&res, faulty).results.vs_fp16_energy_pct.is_none());
    } else {
        assert!(
            report_of(&res, healthy)
                .results
                .vs_fp16_energy_pct
                .is_none(),
            "no Δ against a failed baseline"
        );
    }
    assert!(out
        .join("server-logs")
        .join(format!("{}.log", faulty.as_str()))
        .exists());
    assert!(assert_servers_gone(&out.join("server-logs")) >= 1);
    let _ = std::fs::remove_dir_all(&out);
    (err, took)
}

#[test]
fn http_500_fails_the_arm_with_the_servers_message() {
    let (err, _) = healthy_and_faulty(
        "500",
        Precision::Fp16,
        "status500",
        Precision::Q4_0,
        &["HTTP 500", "CUDA out of memory (fake)"],
        |_| {},
    );
    assert!(err.contains("/v1/completions"), "{err}");
}

#[test]
fn http_400_fails_the_baseline_arm_and_keeps_the_other() {
    healthy_and_faulty(
        "400",
        Precision::Q4_0,
        "status400",
        Precision::Fp16,
        &["400", "max_tokens too large (fake)"],
        |_| {},
    );
}

#[test]
fn a_short_answer_is_no_figure() {
    healthy_and_faulty(
        "short",
        Precision::Fp16,
        "short",
        Precision::Q4_0,
        &["returned 4 of the 16 tokens", "finish: stop"],
        |_| {},
    );
}

#[test]
fn an_error_event_in_the_stream_fails_the_arm() {
    healthy_and_faulty(
        "event",
        Precision::Fp16,
        "error_event",
        Precision::Q4_0,
        &["slot crashed (fake)", "in the stream"],
        |_| {},
    );
}

#[test]
fn a_hanging_stream_hits_the_stall_timeout() {
    let (err, took) = healthy_and_faulty(
        "hang",
        Precision::Fp16,
        "hang",
        Precision::Q4_0,
        &["timeout"],
        |_| {},
    );
    // The stall timeout is 2 s and the fake hangs for 60 s: the arm fails on the timeout.
    assert!(took < Duration::from_secs(20), "{took:?}: {err}");
}

#[test]
fn a_server_crashing_mid_run_fails_its_arm_with_its_last_words() {
    // The warm-up request passes; the first timed request crashes the server.
    let (err, _) = healthy_and_faulty(
        "die",
        Precision::Fp16,
        "die_after:1",
        Precision::Q4_0,
        &["exited", "exit status: 3", "fatal: fake crash"],
        |_| {},
    );
    assert!(err.starts_with("decode Q4_0"), "{err}");
}

#[test]
fn a_server_exiting_at_start_fails_its_arm_with_its_last_words() {
    let (err, _) = healthy_and_faulty(
        "exit",
        Precision::Fp16,
        "exit_at_start",
        Precision::Q4_0,
        &["exited", "failed to load model (fake)"],
        |_| {},
    );
    assert!(err.starts_with("load Q4_0"), "{err}");
}

#[test]
fn a_server_never_ready_fails_its_arm_after_the_ready_timeout() {
    let (err, took) = healthy_and_faulty(
        "notready",
        Precision::Fp16,
        "never_ready",
        Precision::Q4_0,
        &["not ready"],
        |r| r.server.ready_timeout = Duration::from_secs(2),
    );
    assert!(err.starts_with("load Q4_0"), "{err}");
    assert!(took < Duration::from_secs(20), "{took:?}");
}

#[test]
fn tokens_are_counted_from_the_stream_without_usage() {
    let out = out_dir("nousage");
    let run = started(vec![model(&out, Precision::Fp16, "no_usage")], &out);
    let res = measure(&run);
    assert!(res.measured);
    assert_eq!(res.reports.len(), 1);
    let rep = report_of(&res, Precision::Fp16);
    assert_eq!(
        rep.results.basis,
        report::Basis::Measured,
        "{:?}",
        rep.results.note
    );
    let want = (ITERATIONS * TOKENS) as u64;
    assert_eq!(rep.results.tokens_generated, Some(want));
    let lat = arm(rep, Precision::Fp16).latency.as_ref().unwrap();
    assert_eq!(lat.requests, ITERATIONS as u64);
    assert_eq!(lat.counted_from, report::TokenCount::Stream, "{lat:?}");
    assert_eq!(lat.usage_tokens, None, "{lat:?}");
    assert_eq!(lat.streamed_chunks, want);
    let text = std::fs::read_to_string(&res.reports[0].0).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let arms = v["protocol"]["arms"].as_array().unwrap();
    assert!(
        arms[0]["latency"]["usage_tokens"].is_null(),
        "usage_tokens is null (or absent): {}",
        arms[0]["latency"]
    );
    assert_eq!(arms[0]["latency"]["counted_from"], "stream");
    assert_eq!(assert_servers_gone(&out.join("server-logs")), 1);
    let _ = std::fs::remove_dir_all(&out);
}

/// A fake server this test started itself; killed when dropped (also on a failed assertion).
struct OwnServer {
    child: Child,
    port: u16,
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_external_server_is_measured_and_identified() {
    let out = out_dir("external");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log = std::fs::File::create(out.join("external.log")).unwrap();
    let child = Command::new(python())
        .arg(fixture())
        .args(["--port", &port.to_string(), "--mode", "ok"])
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut server = OwnServer { child, port };
    let pid = server.child.id();
    let t0 = Instant::now();
    while !answers_on(port, pid) {
        assert!(
            server.child.try_wait().unwrap().is_none(),
            "the fake server exited: {}",
            std::fs::read_to_string(out.join("external.log")).unwrap_or_default()
        );
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the fake server never answered"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let run = ServerRun {
        server: options(Launch::External {
            url: format!("http://127.0.0.1:{}/", server.port),
            precision: Precision::Q4_0,
        }),
        protocol: protocol(),
        out: out.clone(),
        name: Some("external".into()),
        card: None,
        params_b: Some(0.5),
        model_name: Some("fake model".into()),
    };
    let res = measure(&run);
    assert!(res.measured);
    assert_eq!(res.reports.len(), 1);
    assert_eq!(res.reports[0].0, out.join("external.json"));
    let rep = report_of(&res, Precision::Q4_0);
    assert_eq!(
        rep.results.basis,
        report::Basis::Measured,
        "{:?}",
        rep.results.note
    );
    assert_eq!(
        rep.results.tokens_generated,
        Some((ITERATIONS * TOKENS) as u64)
    );
    let stack = rep.stack.as_ref().unwrap();
    assert_eq!(stack.engine.as_deref(), Some("quantenergy-fake"));
    let serving = stack.serving.as_ref().unwrap();
    assert_eq!(serving.mode, report::ServingMode::External);
    assert_eq!(serving.command, None);
    assert_eq!(
        serving.identified_by.as_deref(),
        Some("GET /v1/models owned_by")
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&res.reports[0].0).unwrap()).unwrap();
    assert_eq!(v["stack"]["serving"]["mode"], "external");
    assert_eq!(v["stack"]["engine"], "quantenergy-fake");
    // The meter names its own build beside the server's (version + commit where one is known).
    let build = v["stack"]["meter_build"].as_str().unwrap();
    assert!(build.starts_with(env!("CARGO_PKG_VERSION")), "{build}");
    let lat = arm(rep, Precision::Q4_0).latency.as_ref().unwrap();
    assert_eq!(lat.counted_from, report::TokenCount::Usage);
    // The meter leaves a server it did not start alone: still answering after the run.
    assert!(
        answers_on(port, pid),
        "the external server was stopped by the meter"
    );
    drop(server);
    assert!(!answers_on(port, pid), "the external server still answers");
    let _ = std::fs::remove_dir_all(&out);
}

/// `measure --dry-run`: each arm's server started, asked once, stopped before the next starts;
/// one that dies at start is reported with its words and the other arm is still tried; nothing is
/// written but the servers' logs.
#[test]
fn a_dry_run_asks_each_server_once_and_stops_it() {
    let out = out_dir("dry-run");
    let run = started(
        vec![
            model(&out, Precision::Fp16, "exit_at_start"),
            model(&out, Precision::Q4_0, "ok"),
        ],
        &out,
    );
    let arms = dry_run_served(&run, 8).expect("a dry run reports each arm");
    assert_eq!(arms.len(), 2);
    let dead = arms[0]
        .outcome
        .as_ref()
        .expect_err("the FP16 server died at start");
    assert!(dead.contains("exited"), "{dead}");
    let ok = arms[1].outcome.as_ref().expect("the Q4_0 server answers");
    assert_eq!(ok.tokens, 8);
    assert!(ok.ready_s.is_some() && ok.ttft_s <= ok.total_s, "{ok:?}");
    assert_eq!(assert_servers_gone(&out.join("server-logs")), 1);
    let written: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "models" && n != "server-logs")
        .collect();
    assert!(written.is_empty(), "a dry run wrote {written:?}");
    let _ = std::fs::remove_dir_all(&out);
}
