//! The server path against the real thing: llama.cpp's `llama-server` built for the CPU from the
//! tree vendored in PyPI's llama-cpp-python sdist (`scripts/peers/fetch-llama-cpp.sh`,
//! `build-llama-cpp.sh cpu`; `./dev test` does both and caches the build), serving tiny synthetic
//! GGUFs written by `scripts/peers/make_gguf.py`. The energy comes from a meter that integrates a
//! constant power over real time (there is no GPU here): what is tested is everything else —
//! starting and stopping the server per arm, readiness, identity, streamed token counting and
//! latency, a server killed mid-run, and valid reports.
//!
//! `QE_LLAMA_SERVER` points at another binary. The tests are ignored by a plain `cargo test`
//! (they need that build); `./dev test` runs them with `--include-ignored`, and there a missing
//! server fails the test and says how to build it: a missing peer never passes silently.

use meter::meter::RealClock;
use meter::protocol::{CooldownConfig, ProtocolConfig};
use report::Precision;
use server::run::{measure_served, ServerRun};
use server::{Api, Launch, ServedModel, ServerOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use meter::testing::WallMeter;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn llama_server() -> PathBuf {
    let p = std::env::var_os("QE_LLAMA_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default();
            home.join(".cache/quantenergy/llama-build-cpu/bin/llama-server")
        });
    assert!(
        p.is_file(),
        "no llama-server at {}: run `scripts/peers/fetch-llama-cpp.sh && scripts/peers/build-llama-cpp.sh cpu` \
         (./dev test does) or set QE_LLAMA_SERVER",
        p.display()
    );
    p
}

/// A tiny synthetic GGUF of `shape` (a test shape of scripts/peers/shapes.py: `tiny`, `tiny-llama`)
/// and `ty` (F16 / Q4_0 / Q4_K), written once per machine (one writer at a time:
/// the tests of this file run in parallel).
fn tiny_gguf_of(shape: &str, ty: &str) -> PathBuf {
    static WRITING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = WRITING.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join("qe-llama-server-ggufs");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{shape}-{ty}.gguf"));
    if !path.exists() {
        let out = std::process::Command::new("python3")
            .arg(repo().join("scripts/peers/make_gguf.py"))
            .args(["--shape", shape, "--type", ty, "--seed", "3", "--out"])
            .arg(&path)
            .output()
            .expect("python3");
        assert!(
            out.status.success(),
            "make_gguf.py failed (needs numpy and .peers/llama.cpp): {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    path
}

fn model(precision: Precision, ty: &str) -> ServedModel {
    model_of("tiny", precision, ty)
}

fn model_of(shape: &str, precision: Precision, ty: &str) -> ServedModel {
    let path = tiny_gguf_of(shape, ty);
    let info = modelfile::inspect(&path).unwrap();
    assert_eq!(
        info.precision,
        Some(precision),
        "{ty}: {:?}",
        info.weight_types
    );
    ServedModel {
        precision,
        path,
        info,
    }
}

fn protocol(tokens: usize, batch: usize) -> ProtocolConfig {
    ProtocolConfig {
        tokens,
        iterations: 3,
        warmup: 1,
        batch,
        prompt_len: 8,
        sample_hz: 20.0,
        idle_reads: 2,
        cooldown: CooldownConfig {
            max_s: 0.2,
            poll_s: 0.05,
            ..CooldownConfig::default()
        },
        // Exact iteration counts: the CPU server would otherwise repeat until 5 s.
        min_window_s: 0.0,
        ..ProtocolConfig::default()
    }
}

fn run(
    command: String,
    models: Vec<ServedModel>,
    api: Api,
    cfg: ProtocolConfig,
    out: &Path,
) -> ServerRun {
    ServerRun {
        server: ServerOptions {
            launch: Launch::Start {
                command,
                models,
                log_dir: out.join("server-logs"),
            },
            api,
            served_model: None,
            ready_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(60),
            stall_timeout: Duration::from_secs(20),
            seed: 5,
        },
        protocol: cfg,
        out: out.to_path_buf(),
        name: None,
        card: None,
        params_b: None,
        model_name: None,
    }
}

fn out_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("qe-llama-server-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn arm(r: &report::Report, p: Precision) -> &report::Arm {
    r.protocol
        .as_ref()
        .unwrap()
        .arms
        .as_ref()
        .unwrap()
        .iter()
        .find(|a| a.precision == p.as_str())
        .unwrap()
}

/// The run measured, `reports` reports written, each valid against the schema and measured.
fn measured_and_valid(r: &ServerRun, reports: usize) -> meter::fallback::MeasureResult {
    let res = measure_served(r, &mut WallMeter::new(), Arc::new(RealClock::default())).unwrap();
    assert!(res.measured);
    assert_eq!(res.reports.len(), reports);
    for (path, rep) in &res.reports {
        let text = std::fs::read_to_string(path).unwrap();
        let v = report::validate_str(&text);
        assert!(v.errors.is_empty(), "{}: {:?}", path.display(), v.errors);
        assert_eq!(
            rep.results.basis,
            report::Basis::Measured,
            "{:?}",
            rep.results.note
        );
    }
    res
}

/// One llama-server test at a time: on a 2-core CI box two servers of `-t 2` plus their clients
/// starved each other and a stream was cut mid-answer ("Peer disconnected").
fn one_server_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SERVERS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERVERS.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
#[ignore = "needs a CPU llama-server build (QE_LLAMA_SERVER): ./dev test builds it and runs these"]
fn llama_server_arms_are_measured_with_latency_and_identity() {
    let _one = one_server_at_a_time();
    let server = llama_server();
    let out = out_dir("ok");
    let cmd = format!(
        "{} -m {{model}} --port {{port}} -c 512 -t 2 -np 2",
        server.display()
    );
    for (api, batch) in [(Api::Completions, 1), (Api::Llama, 2)] {
        let r = run(
            cmd.clone(),
            vec![
                model(Precision::Fp16, "F16"),
                model(Precision::Q4_0, "Q4_0"),
            ],
            api,
            protocol(24, batch),
            &out,
        );
        let res = measured_and_valid(&r, 2);
        for (_, rep) in &res.reports {
            assert_eq!(rep.results.tokens_generated, Some(3 * 24 * batch as u64));
            assert_eq!(rep.workload.batch_size, batch as u32);
            let stack = rep.stack.as_ref().unwrap();
            assert_eq!(stack.engine.as_deref(), Some("llama.cpp"));
            assert!(stack.engine_version.is_some());
            let serving = stack.serving.as_ref().unwrap();
            assert_eq!(serving.mode, report::ServingMode::Started);
            assert_eq!(serving.api.as_deref(), Some(api.path()));
            assert!(serving.command.as_deref().unwrap().contains("--port "));
            assert_eq!(
                serving.identified_by.as_deref(),
                Some("GET /props build_info")
            );
            let w = rep.weights.as_ref().unwrap();
            assert_eq!(
                w.kind,
                report::WeightsKind::Synthetic,
                "make_gguf.py names its files synthetic"
            );
            let p: Precision = rep.workload.precision.parse().unwrap();
            let lat = arm(rep, p)
                .latency
                .as_ref()
                .expect("latency of a server arm");
            assert_eq!(lat.requests, 3 * batch as u64);
            assert_eq!(lat.usage_tokens, Some(3 * 24 * batch as u64));
            assert_eq!(lat.counted_from, report::TokenCount::Usage);
            assert!(
                lat.ttft_ms_p50 > 0.0 && lat.itl_ms_p50 > 0.0 && lat.tpot_ms_mean > 0.0,
                "{lat:?}"
            );
            assert!(lat.streamed_chunks >= 3, "{lat:?}");
            // Each arm's Δ is against the F16 file served in the same run.
            assert!(rep.results.fp16_energy_per_token_mj.is_some());
        }
        let q4 = res
            .reports
            .iter()
            .find(|(_, r)| r.workload.precision == "Q4_0")
            .unwrap();
        assert!(q4.1.results.vs_fp16_energy_pct.is_some());
        assert!(out.join("server-logs/Q4_0.log").exists());
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// A prompt-set run on the server path: every request prefills its prompt afresh and decodes
/// from it out of the server's cache (a request that evaluated its prompt again would fail the
/// arm), whole passes of the set, the prefills also in their own window; the reports validate.
#[test]
#[ignore = "needs a CPU llama-server build (QE_LLAMA_SERVER): ./dev test builds it and runs these"]
fn a_prompt_set_run_serves_each_request_from_its_own_prefill() {
    let _one = one_server_at_a_time();
    let server = llama_server();
    let out = out_dir("prompts");
    let cmd = format!(
        "{} -m {{model}} --port {{port}} -c 512 -t 2 -np 1",
        server.display()
    );
    let mut cfg = protocol(16, 1);
    cfg.prompts = Some(
        meter::prompts::PromptSet::parse(
            br#"{"name": "two", "license": "CC0-1.0", "token_counts": "none", "prompts": [
                {"id": "a", "kind": "chat", "prompt_tokens": 40, "output_tokens": 6, "text": ""},
                {"id": "b", "kind": "rag", "prompt_tokens": 200, "output_tokens": 4, "text": ""}]}"#,
        )
        .unwrap(),
    );
    let models = vec![
        model(Precision::Fp16, "F16"),
        model(Precision::Q4_0, "Q4_0"),
    ];
    let r = run(cmd, models, Api::Llama, cfg, &out);
    let res = measured_and_valid(&r, 2);
    for (_, rep) in &res.reports {
        let q = rep.results.requests.as_ref().expect("a requests window");
        assert!(q.passes >= 3 && q.requests == 2 * q.passes, "{q:?}");
        assert_eq!(q.prompt_tokens, 240 * q.passes);
        assert_eq!(rep.results.tokens_generated, Some(10 * q.passes));
        let p = rep.results.prefill.as_ref().expect("a prefill window");
        assert_eq!(p.prompt_tokens, p.prefills / 2 * 240);
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// A context run on the server path: the prefill window's requests evaluate the whole prompt
/// afresh, the decode window's reuse it from the server's cache (llama.cpp's own account:
/// `timings.prompt_n` of a cached request is a token or two, of a fresh one the whole prompt),
/// and the reports carry both windows at the depth asked. Another API is refused.
#[test]
#[ignore = "needs a CPU llama-server build (QE_LLAMA_SERVER): ./dev test builds it and runs these"]
fn a_context_run_prefills_apart_and_decodes_from_the_cached_prompt() {
    use server::client::Client;
    use server::stream::request_body_cached;
    let _one = one_server_at_a_time();
    let server = llama_server();
    let out = out_dir("context");
    let depth = 300;
    let cmd = format!(
        "{} -m {{model}} --port {{port}} -c 512 -t 2 -np 1",
        server.display()
    );
    let mut cfg = protocol(16, 1);
    cfg.context = Some(depth);
    let models = vec![
        model(Precision::Fp16, "F16"),
        model(Precision::Q4_0, "Q4_0"),
    ];
    let r = run(cmd.clone(), models.clone(), Api::Llama, cfg.clone(), &out);
    let res = measured_and_valid(&r, 2);
    for (_, rep) in &res.reports {
        assert_eq!(rep.workload.context_depth, Some(depth as u32));
        let p = rep.results.prefill.as_ref().expect("a prefill window");
        assert!(p.prefills >= 3, "{p:?}");
        assert_eq!(p.prompt_tokens, p.prefills * depth as u64);
        assert!(p.time_to_first_token_ms > 0.0 && p.energy_per_prompt_token_mj > 0.0);
        let decoded = rep.results.tokens_generated.unwrap();
        assert!(decoded >= 3 * 16 && decoded % 16 == 0, "{decoded}");
    }

    // What the decode requests rest on, asked of the server itself.
    let port = server::process::free_port().unwrap();
    let line = server::process::fill_template(&cmd, Some(&models[0].path), port).unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let client = Client::new(&url, Duration::from_secs(60), Duration::from_secs(20)).unwrap();
    let mut started =
        server::process::ServerProcess::start(&line, &out.join("direct.log")).unwrap();
    started
        .wait_ready(&client, Duration::from_secs(60))
        .unwrap();
    let prompt = server::Prompt::ids(depth, 5);
    let fresh = request_body_cached(Api::Llama, &prompt, 4, None, 5, false);
    let cached = request_body_cached(Api::Llama, &prompt, 4, None, 5, true);
    let first = client.stream(Api::Llama, &fresh).unwrap();
    let second = client.stream(Api::Llama, &cached).unwrap();
    let third = client.stream(Api::Llama, &fresh).unwrap();
    assert_eq!(first.prompt_evaluated, Some(depth as u64));
    assert!(
        second.prompt_evaluated.is_some_and(|n| n <= 16),
        "{second:?}"
    );
    assert_eq!(third.prompt_evaluated, Some(depth as u64));
    drop(started);

    let mut chat = run(cmd, models, Api::Chat, cfg, &out);
    chat.name = None;
    let e = measure_served(&chat, &mut WallMeter::new(), Arc::new(RealClock::default()));
    let msg = match e {
        Ok(res) => res
            .reports
            .iter()
            .map(|(_, r)| r.results.note.clone().unwrap_or_default())
            .collect::<Vec<_>>()
            .join(" "),
        Err(e) => e.to_string(),
    };
    assert!(msg.contains("--api llama"), "{msg}");
    let _ = std::fs::remove_dir_all(&out);
}

/// A server killed while its arm runs fails that arm with the server's exit and last words; the
/// other arm is still measured and the reports validate.
#[test]
#[ignore = "needs a CPU llama-server build (QE_LLAMA_SERVER): ./dev test builds it and runs these"]
fn a_killed_llama_server_fails_its_arm_and_keeps_the_other() {
    let _one = one_server_at_a_time();
    let server = llama_server();
    let out = out_dir("kill");
    // The F16 arm's server is killed (SIGKILL) once it has finished its first completion (the
    // warm-up): a crash mid-run. The Q4_0 arm's server runs normally.
    let cmd = format!(
        "case {{model}} in *F16*) ({} -m {{model}} --port {{port}} -c 512 -t 2 & S=$!; \
         while ! grep -q 'stop processing' {log} 2>/dev/null; do sleep 0.05; done; \
         kill -9 $S; wait $S; exit 137) ;; *) exec {} -m {{model}} --port {{port}} -c 512 -t 2 ;; esac",
        server.display(),
        server.display(),
        log = out.join("server-logs/FP16.log").display(),
    );
    let r = run(
        cmd,
        vec![
            model(Precision::Fp16, "F16"),
            model(Precision::Q4_0, "Q4_0"),
        ],
        Api::Completions,
        protocol(48, 1),
        &out,
    );
    let res = measure_served(&r, &mut WallMeter::new(), Arc::new(RealClock::default())).unwrap();
    let f16 = res
        .reports
        .iter()
        .find(|(_, r)| r.workload.precision == "FP16")
        .unwrap();
    let q4 = res
        .reports
        .iter()
        .find(|(_, r)| r.workload.precision == "Q4_0")
        .unwrap();
    for (path, _) in &res.reports {
        let v = report::validate_str(&std::fs::read_to_string(path).unwrap());
        assert!(v.errors.is_empty(), "{}: {:?}", path.display(), v.errors);
    }
    assert_eq!(f16.1.results.basis, report::Basis::Unavailable);
    assert!(f16.1.results.energy_per_token_mj.is_none());
    let err = arm(&f16.1, Precision::Fp16).error.clone().unwrap();
    // The wrapper shell reports the SIGKILL as exit status 137.
    assert!(err.contains("exited (exit status: 137)"), "{err}");
    assert_eq!(q4.1.results.basis, report::Basis::Measured);
    assert!(
        q4.1.results.vs_fp16_energy_pct.is_none(),
        "no Δ against a failed baseline"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// The llama.cpp campaign has a Llama-family shape (TinyLlama): the GGUF writer's Llama
/// files (no q/k/v biases, SentencePiece vocabulary) are served by llama-server and measured.
#[test]
#[ignore = "needs a CPU llama-server build (QE_LLAMA_SERVER): ./dev test builds it and runs these"]
fn a_llama_family_gguf_is_served_and_measured() {
    let _one = one_server_at_a_time();
    let server = llama_server();
    let out = out_dir("llama-family");
    let cmd = format!(
        "{} -m {{model}} --port {{port}} -c 512 -t 2 -np 1",
        server.display()
    );
    let r = run(
        cmd,
        vec![
            model_of("tiny-llama", Precision::Fp16, "F16"),
            model_of("tiny-llama", Precision::Q4K, "Q4_K"),
        ],
        Api::Completions,
        protocol(16, 1),
        &out,
    );
    let res = measure_served(&r, &mut WallMeter::new(), Arc::new(RealClock::default())).unwrap();
    assert!(res.measured);
    for (_, rep) in &res.reports {
        assert_eq!(
            rep.results.basis,
            report::Basis::Measured,
            "{:?}",
            rep.results.note
        );
        assert_eq!(rep.results.tokens_generated, Some(3 * 16));
    }
    let info = modelfile::inspect(&tiny_gguf_of("tiny-llama", "Q4_K")).unwrap();
    assert_eq!(info.architecture.as_deref(), Some("llama"));
    let _ = std::fs::remove_dir_all(&out);
}
