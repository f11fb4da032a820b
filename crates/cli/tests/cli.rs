//! The `quantenergy` binary as a user runs it.

mod files;
use std::path::PathBuf;
use std::process::{Command, Output};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The binary under test: this build's, or `QE_BIN` (scripts/hostile-classes.sh runs these tests
/// against an older build to show which of them that build fails).
fn bin() -> std::ffi::OsString {
    std::env::var_os("QE_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_quantenergy").into())
}

fn qe(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .current_dir(repo())
        .env("RUST_LOG", "error")
        .output()
        .expect("run quantenergy")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn validate_accepts_every_example_including_upstream() {
    let mut files: Vec<String> = std::fs::read_dir(repo().join("data/examples"))
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .collect();
    files.sort();
    let args: Vec<&str> = std::iter::once("validate")
        .chain(files.iter().map(String::as_str))
        .collect();
    let o = qe(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("upstream-no-gpu.json: ok"));
}

#[test]
fn validate_rejects_the_whole_bad_corpus_with_field_messages_and_exit_codes() {
    let manifest = std::fs::read_to_string(repo().join("tests/bad_reports/expected.tsv")).unwrap();
    let mut checked = 0;
    for line in manifest
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty() && !l.starts_with("file\t"))
    {
        let (file, expected) = line.split_once('\t').unwrap();
        let path = format!("tests/bad_reports/{file}");
        let o = qe(&["validate", &path]);
        let code = o.status.code();
        assert!(code == Some(1) || code == Some(2), "{file}: exit {code:?}");
        let out = stdout(&o);
        assert!(
            out.contains("INVALID") || out.contains("unreadable"),
            "{file}: {out}"
        );
        assert!(
            out.to_lowercase().contains(&expected.to_lowercase()),
            "{file}: expected {expected:?} in {out}"
        );
        assert!(
            !String::from_utf8_lossy(&o.stderr).contains("panicked"),
            "{file} panicked"
        );
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} corpus cases");
}

#[test]
fn validate_exit_codes_distinguish_invalid_from_not_json() {
    let dir = std::env::temp_dir().join(format!("qe-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad_enum = dir.join("bad.json");
    let text = std::fs::read_to_string(repo().join("data/examples/upstream-no-gpu.json"))
        .unwrap()
        .replace("\"interpolated\"", "\"guessed\"");
    std::fs::write(&bad_enum, text).unwrap();
    assert_eq!(
        qe(&["validate", bad_enum.to_str().unwrap()]).status.code(),
        Some(1)
    );
    let not_json = dir.join("x.json");
    std::fs::write(&not_json, "{ nope").unwrap();
    assert_eq!(
        qe(&["validate", not_json.to_str().unwrap()]).status.code(),
        Some(2)
    );
    assert_eq!(
        qe(&["validate", "/nonexistent/energy.json"]).status.code(),
        Some(2)
    );
    // stdin
    let mut child = Command::new(bin())
        .args(["validate", "-"])
        .current_dir(repo())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            std::fs::read(repo().join("data/examples/interpolated.json"))
                .unwrap()
                .as_slice(),
        )
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn crossover_ada_nf4_is_3_73_b() {
    let o = qe(&["crossover", "--arch", "ada", "--precision", "NF4", "--json"]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let x = v[0]["crossover_b"].as_f64().unwrap();
    assert!((x - 3.73).abs() / 3.73 < 0.01, "{x}");
    assert_eq!(v[0]["anchors"], 9);
    let table = stdout(&qe(&["crossover"]));
    assert!(table.contains("3.728 B"), "{table}");
    assert!(qe(&["crossover", "--arch", "voodoo"]).status.code() == Some(2));
    // Hopper's Q4_K curves are three engines', each named once.
    let hopper = stdout(&qe(&[
        "crossover",
        "--arch",
        "hopper",
        "--precision",
        "Q4_K",
    ]));
    for e in ["candle-graph", "candle ", "llama.cpp"] {
        let rows = hopper
            .lines()
            .filter(|l| l.starts_with("hopper Q4_K") && l.contains(e));
        assert_eq!(rows.count(), 1, "{e}: {hopper}");
    }
}

/// `--engine` picks the stack an estimate is for and never swaps it for another (the H200 has
/// candle-graph, eager candle and llama.cpp curves; llama.cpp measured no BF16).
#[test]
fn estimate_names_its_stack_and_an_asked_engine_is_never_switched() {
    let args = |engine: Option<&str>| {
        let mut a = vec![
            "estimate",
            "--gpu",
            "H200",
            "--params-b",
            "7.6156",
            "--precision",
            "Q4_K",
        ];
        a.extend(engine.map(|e| ["--engine", e]).into_iter().flatten());
        stdout(&qe(&a))
    };
    let default = args(None);
    assert!(default.contains("stack        candle-graph\n"), "{default}");
    assert_eq!(args(Some("candle-graph")), default);
    let eager = args(Some("candle"));
    assert!(eager.contains("stack        candle\n"), "{eager}");
    assert_ne!(eager, default, "the engines' curves and baselines differ");
    let llama = args(Some("llama.cpp"));
    assert!(llama.contains("stack        llama.cpp\n"), "{llama}");
    let bf16 = stdout(&qe(&[
        "estimate",
        "--gpu",
        "H200",
        "--params-b",
        "1.5437",
        "--precision",
        "BF16",
        "--engine",
        "llama.cpp",
    ]));
    assert!(
        bf16.contains("unavailable") && bf16.contains("no BF16 curve measured with llama.cpp"),
        "{bf16}"
    );
}

#[test]
fn estimate_json_is_a_valid_report_never_measured() {
    let o = qe(&[
        "estimate",
        "--arch",
        "ada",
        "--params-b",
        "7",
        "--precision",
        "NF4",
        "--json",
    ]);
    assert!(o.status.success());
    let text = stdout(&o);
    let v = report::validate_str(&text);
    assert!(v.errors.is_empty(), "{:?}", v.errors);
    let r = v.report.unwrap();
    assert_eq!(r.results.basis, report::Basis::Interpolated);
    let human = stdout(&qe(&[
        "estimate",
        "--gpu",
        "NVIDIA H200",
        "--params-b",
        "70",
        "--precision",
        "INT8",
    ]));
    assert!(
        human.contains("extrapolated") && human.contains("borrowed from ampere"),
        "{human}"
    );
    assert_eq!(
        qe(&[
            "estimate",
            "--params-b",
            "-1",
            "--arch",
            "ada",
            "--precision",
            "NF4"
        ])
        .status
        .code(),
        Some(2)
    );
}

#[test]
fn share_round_trips_through_the_link() {
    let o = qe(&["share", "data/examples/upstream-no-gpu.json"]);
    assert!(o.status.success());
    let link = stdout(&o).trim().to_string();
    assert!(link.contains("?tab=run&overlay="), "{link}");
    let d = qe(&["share", "--decode", &link]);
    assert!(d.status.success());
    let v: serde_json::Value = serde_json::from_slice(&d.stdout).unwrap();
    assert_eq!(v["gpu_arch"], "blackwell");
    assert_eq!(v["basis"], "interpolated");
    let bad = qe(&["share", "--decode", "?tab=run&overlay=%%%<script>"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("cannot decode"));

    // A long link comes from stdin (`-`) or a file (`@FILE`), with its trailing newline.
    let mut child = Command::new(bin())
        .args(["share", "--decode", "-"])
        .current_dir(repo())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    writeln!(child.stdin.take().unwrap(), "{link}").unwrap();
    let piped = child.wait_with_output().unwrap();
    assert!(
        piped.status.success(),
        "{}",
        String::from_utf8_lossy(&piped.stderr)
    );
    assert_eq!(piped.stdout, d.stdout);
    let dir = temp_dir("share-file");
    let file = dir.join("link.txt");
    std::fs::write(&file, format!("{link}\n")).unwrap();
    let from_file = qe(&["share", "--decode", &format!("@{}", file.display())]);
    assert!(from_file.status.success());
    assert_eq!(from_file.stdout, d.stdout);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn perplexity_options_need_the_perplexity_flag() {
    /// Runs `qwen2-0.5b` with the extra arguments; returns (exit code, stderr).
    fn run(cmd: &str, precision: &str, extra: &[&str]) -> (Option<i32>, String) {
        let mut args = vec![cmd, "--synthetic", "qwen2-0.5b", "--precision", precision];
        args.extend_from_slice(extra);
        let o = qe(&args);
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }
    let (code, err) = run("measure", "Q4_K", &["--ppl-tokens", "100"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--perplexity"), "{err}");
    let (code, err) = run("measure", "Q4_K", &["--perplexity", "--ppl-tokens", "1"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--ppl-tokens") && err.contains("2.."), "{err}");
    let (code, err) = run("overhead", "F16", &["--perplexity"]);
    assert_ne!(code, Some(0));
    assert!(err.contains("belongs to `quantenergy measure`"), "{err}");
}

#[test]
fn measure_without_a_gpu_writes_a_labelled_estimate_never_measured() {
    let dir = std::env::temp_dir().join(format!("qe-measure-{}", std::process::id()));
    let o = qe(&[
        "measure",
        "--synthetic",
        "qwen2-7b",
        "--precision",
        "NF4,Q4_K",
        "--gpu",
        "RTX 4090",
        "--perplexity",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let v = report::validate_str(&std::fs::read_to_string(&p).unwrap());
        assert!(v.errors.is_empty(), "{}: {:?}", p.display(), v.errors);
        let r = v.report.unwrap();
        assert_ne!(r.results.basis, report::Basis::Measured);
        assert!(r.results.note.unwrap().starts_with("Not measured:"));
        // Nothing ran, so nothing was scored: said, not left out.
        let q = r.quality.unwrap();
        assert_eq!(q.basis, "unavailable");
        assert!(q.value.is_none() && q.error.unwrap().starts_with("not scored"));
        n += 1;
    }
    assert_eq!(n, 2);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn committed_h200_reports_validate_and_are_measured() {
    let mut n = 0;
    for sub in [
        "data/measurements/h200/raw",
        "data/measurements/h200/extra",
        "data/measurements/h200/perplexity/independent-weights",
        "data/measurements/h200/perplexity/shared-weights",
    ] {
        for e in std::fs::read_dir(repo().join(sub)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_none_or(|x| x != "json") {
                continue;
            }
            let v = report::validate_str(&std::fs::read_to_string(&p).unwrap());
            assert!(v.errors.is_empty(), "{}: {:?}", p.display(), v.errors);
            let r = v.report.unwrap();
            assert_eq!(r.results.basis, report::Basis::Measured, "{}", p.display());
            assert_eq!(r.system_under_test.gpu_arch, "hopper");
            n += 1;
        }
    }
    assert!(n >= 20, "{n} reports");
}

#[test]
fn anchors_h200_rows_are_exactly_what_aggregate_makes_of_the_raw_reports() {
    // The page's Hopper curves must be reproducible from the committed raw reports: no hand edit,
    // no stale row after new runs. One session per engine, in this order: the eager candle
    // campaign, the CUDA-graph engine's, llama-server's.
    let mut fresh: Vec<String> = Vec::new();
    for (dir, session) in [
        ("data/measurements/h200/raw", "h200-2026-11-30"),
        (
            "data/measurements/h200/graph/raw",
            "h200-candle-graph-2026-12",
        ),
        (
            "data/measurements/h200/llama/raw",
            "h200-llama-server-2026-12",
        ),
    ] {
        let o = qe(&["aggregate", dir, "--session", session, "--include-flagged"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let rows: Vec<String> = stdout(&o).lines().map(str::to_string).collect();
        assert!(
            rows.iter().all(|r| r.contains(&format!(",{session},"))),
            "{dir}: a row of another session"
        );
        fresh.extend(rows);
    }
    // The real model beside its synthetic twin: one stack per folder, checks, not curve anchors.
    for stack in [
        "graph-real",
        "graph-synthetic",
        "llama-real",
        "llama-synthetic",
    ] {
        let dir = format!("data/measurements/h200/truth-rerun/card-c/{stack}");
        let o = qe(&[
            "aggregate",
            &dir,
            "--include-flagged",
            "--not-curve",
            "a real model beside its synthetic twin (data/measurements/h200/truth-rerun)",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let rows: Vec<String> = stdout(&o).lines().map(str::to_string).collect();
        assert!(
            rows.iter().all(|r| r.contains(",truth-rerun-2026-12-03,")),
            "{dir}: a row of another session"
        );
        fresh.extend(rows);
    }
    // The context runs, each folder a session of its own; checks of the context model. Session
    // 22's three runs at depth 4 096 (their reports name no session); session 26's graph engine
    // and llama-server at 1 k / 16 k (n = 3, one build, one card); session 23's llama-server with
    // the q8_0 KV cache at 4 k / 16 k (n = 3). Raw data only: session 23's graph engine (n = 1, an
    // older kernel) and llama-server, whose reports carry the session name session 26's llama-server
    // carries, and session 26's q8_0-cache arm (n = 1).
    let ctx = "data/measurements/h200/engine/context-2026-12-04";
    let context_dirs = [
        (
            format!("{ctx}/measure"),
            Some("h200-context-2026-12-04-measure"),
        ),
        (format!("{ctx}-s26/campaign/graph"), None),
        (format!("{ctx}-s26/campaign/llama"), None),
        (format!("{ctx}-s23/campaign/llama-kvq8"), None),
    ];
    for (dir, session) in &context_dirs {
        let mut args = vec!["aggregate", dir.as_str(), "--include-flagged"];
        if let Some(s) = session {
            args.extend(["--session", s]);
        }
        let o = qe(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let rows: Vec<String> = stdout(&o).lines().map(str::to_string).collect();
        assert!(
            rows.iter().all(|r| r.contains(",check,")),
            "{dir}: a context row that is not a check"
        );
        fresh.extend(rows);
    }
    let anchors = std::fs::read_to_string(repo().join("data/anchors.csv")).unwrap();
    let committed: Vec<String> = anchors
        .lines()
        .filter(|l| l.starts_with("H200,hopper,"))
        .map(str::to_string)
        .collect();
    assert!(committed.len() >= 70, "{} H200 rows", committed.len());
    assert_eq!(
        fresh, committed,
        "re-run quantenergy aggregate into data/anchors.csv"
    );
}

#[test]
fn aggregate_markdown_is_the_full_table_with_both_energies() {
    let o = qe(&[
        "aggregate",
        "data/measurements/h200/raw",
        "--session",
        "x",
        "--markdown",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = stdout(&o);
    assert!(t.starts_with(
        "| model | params B | batch | precision | n | cards | nodes | mJ/tok counter | mJ/tok trace"
    ));
    let row = |model: &str, batch: &str, p: &str| -> Vec<String> {
        t.lines()
            .find(|l| {
                l.starts_with(&format!("| {model} |")) && l.contains(&format!("| {batch} | {p} |"))
            })
            .unwrap_or_else(|| panic!("no {model} b{batch} {p} row in\n{t}"))
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    // Cells: 1 model, 5 n, 6 cards, 7 nodes, 8 counter, 9 trace, 10 counter/trace, 13 CV, 14 ΔE.
    let q4 = row("Qwen2.5-14B", "1", "Q4_0");
    assert_eq!(q4[5], "3");
    assert_eq!(q4[6], "1", "all three 14B runs on one card");
    let (counter, trace): (f64, f64) = (q4[8].parse().unwrap(), q4[9].parse().unwrap());
    assert!((counter / trace - 1.0).abs() < 0.02, "{counter} vs {trace}");
    assert!(q4[14].starts_with('-'), "14B Q4_0 saves energy: {}", q4[14]);
    // One host name behind every H200 run (the device machine is always called the same).
    assert_eq!(q4[7], "1");
    let fp16 = row("Qwen2.5-14B", "1", "FP16");
    assert_eq!(fp16[14], "–");
    // Pooled over sessions: the 1.5B batch-1 baseline ran on two cards.
    assert_eq!(row("Qwen2-1.5B", "1", "FP16")[6], "2");
    // Batch 64 meets the CV target and is marked so; a batch-1 row of the launch-bound regime is not.
    assert!(row("Qwen2-1.5B", "64", "FP16")[13].ends_with('✓'));
    assert!(!row("Qwen2-0.5B", "1", "FP16")[13].ends_with('✓'));
}

#[test]
fn engine_is_graph_or_eager() {
    let o = qe(&[
        "measure",
        "--synthetic",
        "qwen2-0.5b",
        "--precision",
        "F16",
        "--engine",
        "turbo",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("graph") && err.contains("eager"), "{err}");
}

#[test]
fn aggregate_keeps_the_graph_engine_apart_from_the_eager_one() {
    let o = qe(&[
        "aggregate",
        "data/measurements/h200/engine/call2",
        "--session",
        "engine",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = stdout(&o);
    for m in ["Qwen2-1.5B", "Qwen2-7B"] {
        let graph = format!("{m} [candle-graph]");
        assert!(out.lines().any(|l| l.contains(&graph)), "{out}");
        assert!(
            out.lines()
                .any(|l| l.contains(m) && !l.contains("[candle-graph]")),
            "{out}"
        );
    }
}

const INSIDE: &str = "data/measurements/h200/raw/qwen2-7b_b1_r1_Q4_K.json";
const OUTSIDE: &str = "data/measurements/h200/raw/qwen2-1.5b_b1_r2_Q4_0.json";
const GRAPH: &str = "data/measurements/h200/engine/sitting-2026-11-30/qwen2-7b_graph_Q4_K.json";
const BATCH64: &str = "data/measurements/h200/raw/qwen2-1.5b_b64_r1_Q4_K.json";

fn compare_json(args: &[&str]) -> (Option<i32>, Vec<serde_json::Value>) {
    let mut all = vec!["compare", "--json"];
    all.extend_from_slice(args);
    let o = qe(&all);
    let rows: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)));
    (o.status.code(), rows.as_array().unwrap().clone())
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("qe-cli-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A committed report with `edit` applied, written to `dir/name`.
fn tampered(dir: &std::path::Path, name: &str, edit: impl Fn(&mut serde_json::Value)) -> String {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join(INSIDE)).unwrap()).unwrap();
    edit(&mut v);
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    path.display().to_string()
}

#[test]
fn compare_places_a_committed_report_inside_its_curve_band() {
    let o = qe(&["compare", INSIDE]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let out = stdout(&o);
    let row = out.lines().find(|l| l.starts_with(INSIDE)).expect(&out);
    // Qwen2-7B Q4_K on the H200, eager candle: −28.6 % measured, the hopper Q4_K curve −27.1 %
    // at 7.62 B, band −31.6 … −22.6 %, 0.7 σ below it.
    for cell in [
        "NVIDIA H200 · hopper",
        "Q4_K",
        "7.62 B",
        "candle",
        "−28.6 %",
        "−27.1 %",
        "−31.6 % … −22.6 %",
        "−0.7",
        "inside",
    ] {
        assert!(row.contains(cell), "{cell:?} not in {row}");
    }
    let (code, rows) = compare_json(&[INSIDE]);
    assert_eq!(code, Some(0));
    let r = &rows[0];
    assert_eq!(r["file"], INSIDE);
    assert_eq!(r["outcome"], "inside");
    assert_eq!(r["curve"], "hopper Q4_K");
    assert_eq!(r["engine"], "candle");
    let c = &r["comparison"];
    assert_eq!(c["measured_pct"], -28.62);
    let (pred, sigma) = (
        c["predicted_pct"].as_f64().unwrap(),
        c["sigma_pct"].as_f64().unwrap(),
    );
    assert!((pred + 27.1).abs() < 0.05, "{pred}");
    let z = c["sigmas"].as_f64().unwrap();
    assert!((z - (-28.62 - pred) / sigma).abs() < 1e-9, "{z}");
    let band = c["band_pct"].as_array().unwrap();
    let half = (band[1].as_f64().unwrap() - band[0].as_f64().unwrap()) / 2.0;
    assert!((half - 1.96 * sigma).abs() < 1e-9);
}

#[test]
fn compare_exits_1_when_a_measured_report_is_outside_its_band() {
    // A committed single run far from its class's curve (−32.1 % where the curve says −19.9 %).
    let o = qe(&["compare", INSIDE, OUTSIDE]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let out = stdout(&o);
    let row = out.lines().find(|l| l.starts_with(OUTSIDE)).expect(&out);
    assert!(row.contains("OUTSIDE") && row.contains("−8.4"), "{row}");
    assert!(
        out.contains("2 files: 1 inside the band, 1 outside"),
        "{out}"
    );
    // The same report with its quantized energy tampered to +20 % vs FP16.
    let dir = temp_dir("compare-outside");
    let path = tampered(&dir, "plus20.json", |v| {
        let fp16 = v["results"]["fp16_energy_per_token_mj"].as_f64().unwrap();
        v["results"]["energy_per_token_mj"] = (fp16 * 1.2).into();
        v["results"]["vs_fp16_energy_pct"] = 20.0.into();
    });
    let (code, rows) = compare_json(&[&path]);
    assert_eq!(code, Some(1));
    assert_eq!(rows[0]["outcome"], "outside");
    assert_eq!(rows[0]["measured_delta_pct"], 20.0);
    assert!(rows[0]["comparison"]["sigmas"].as_f64().unwrap() > 1.96);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn compare_explains_what_it_cannot_place_and_exits_0() {
    let dir = temp_dir("explain");
    let other = other_engine(&dir);
    let files = [
        other.as_str(),
        BATCH64,
        "data/examples/interpolated.json",
        "data/examples/unavailable.json",
        "data/examples/upstream-measured-illustrative.json",
    ];
    let mut args = vec!["compare"];
    args.extend_from_slice(&files);
    let o = qe(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let out = stdout(&o);
    for line in [
        "no hopper Q4_K curve for stack vllm: the published hopper Q4_K curves were measured with candle-graph, candle, llama.cpp",
        "no curve at batch 64: the published curves are single-stream decode (batch 1)",
        "not measured (basis interpolated): an estimate is not compared with the curve",
        "not measured (basis unavailable): an estimate is not compared with the curve",
        "the report names no stack.engine: compared with the curve measured with transformers + bitsandbytes",
    ] {
        assert!(out.contains(line), "{line:?} not in {out}");
    }
    let (code, rows) = compare_json(&files);
    assert_eq!(code, Some(0));
    let outcomes: Vec<&str> = rows
        .iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        outcomes,
        [
            "no_curve",
            "no_curve",
            "not_measured",
            "not_measured",
            "inside"
        ]
    );
    assert_eq!(rows[0]["no_curve"]["kind"], "stack");
    assert_eq!(rows[1]["no_curve"]["kind"], "batch");
    // An estimate never gets a number.
    for r in &rows[2..4] {
        assert!(
            r["measured_delta_pct"].is_null() && r["comparison"].is_null(),
            "{r}"
        );
    }
    let est = out
        .lines()
        .find(|l| l.starts_with("data/examples/interpolated.json"))
        .unwrap();
    assert!(!est.contains('%'), "{est}");
    std::fs::remove_dir_all(&dir).ok();
}

/// The eager H200 Qwen2-7B Q4_K report as if another engine (`vllm`, with no Hopper curve) had
/// measured it: every real H200 engine now has a Q4_K curve of its own.
fn other_engine(dir: &std::path::Path) -> String {
    tampered(dir, "vllm.json", |v| v["stack"]["engine"] = "vllm".into())
}

#[test]
fn compare_says_when_a_report_has_no_fp16_figure() {
    let dir = temp_dir("compare-nodelta");
    let path = tampered(&dir, "no-fp16.json", |v| {
        let r = v["results"].as_object_mut().unwrap();
        r.remove("fp16_energy_per_token_mj");
        r.remove("vs_fp16_energy_pct");
    });
    let o = qe(&["compare", &path]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("no ΔE: the report has no FP16 energy"));
    let (_, rows) = compare_json(&[&path]);
    assert_eq!(rows[0]["outcome"], "no_delta");
    assert!(rows[0]["measured_delta_pct"].is_null());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn compare_exits_2_on_an_invalid_or_unreadable_file_naming_the_field() {
    let dir = temp_dir("compare-invalid");
    let bad = tampered(&dir, "bad-batch.json", |v| {
        v["workload"]["batch_size"] = "one".into();
    });
    // Invalid beats outside: 2, with validate's message at the field's path.
    let o = qe(&["compare", INSIDE, OUTSIDE, &bad]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    let out = stdout(&o);
    assert!(out.contains(&format!("{bad}: INVALID")), "{out}");
    assert!(
        out.contains("error   $.workload.batch_size: expected an integer ≥ 1"),
        "{out}"
    );
    assert!(out.contains("1 unreadable or invalid"), "{out}");
    let (code, rows) = compare_json(&[&bad, "/nonexistent/energy.json"]);
    assert_eq!(code, Some(2));
    assert_eq!(rows[0]["outcome"], "invalid");
    assert_eq!(rows[0]["errors"][0]["path"], "$.workload.batch_size");
    assert_eq!(rows[1]["outcome"], "unreadable");
    let not_json = dir.join("x.json");
    std::fs::write(&not_json, "{ nope").unwrap();
    assert_eq!(
        qe(&["compare", not_json.to_str().unwrap()]).status.code(),
        Some(2)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn compare_help_documents_the_exit_codes() {
    let o = qe(&["compare", "--help"]);
    let out = stdout(&o);
    assert!(
        out.contains("1 any measured report outside its band") && out.contains("regression check"),
        "{out}"
    );
}

/// A report whose engine has no curve of its class is refused; `--any-stack` compares it anyway
/// with the curve the class prefers, says it is a cross-stack comparison, and the stack's effect
/// is the residual. A report whose engine has a curve (llama.cpp, candle-graph) is placed on its
/// own, with or without the flag.
#[test]
fn compare_any_stack_places_a_report_without_its_engines_curve_on_another_and_says_so() {
    let dir = temp_dir("any-stack");
    let f = other_engine(&dir);
    let (code, rows) = compare_json(&[&f]);
    assert_eq!(code, Some(0));
    assert_eq!(rows[0]["outcome"], "no_curve", "{:?}", rows[0]);
    let (code, rows) = compare_json(&[&f, "--any-stack"]);
    let o = rows[0]["outcome"].as_str().unwrap();
    assert!(o == "inside" || o == "outside", "{:?}", rows[0]);
    assert_eq!(code, Some(if o == "outside" { 1 } else { 0 }));
    assert_eq!(rows[0]["engine"], "vllm", "the report keeps its engine");
    assert_eq!(rows[0]["curve_engines"][0], "candle-graph");
    let text = stdout(&qe(&["compare", &f, "--any-stack"]));
    assert!(
        text.contains(
            "across stacks (--any-stack): a vllm report against the curve measured with candle-graph"
        ),
        "{text}"
    );
    let llama =
        "data/measurements/h200/server/llama-server/qwen2-7b-c1/qwen2-7b-llama-server-c1_Q4_K.json";
    for args in [
        vec![llama],
        vec![llama, "--any-stack"],
        vec![GRAPH, "--any-stack"],
    ] {
        let (_, rows) = compare_json(&args);
        let own = rows[0]["engine"].as_str().unwrap();
        assert_eq!(rows[0]["curve_engines"][0], own, "{:?}", rows[0]);
        assert!(rows[0]["comparison"].is_object(), "{:?}", rows[0]);
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A reader that goes away (`quantenergy … | head`) ends the command quietly, never with a panic.
#[test]
fn a_closed_pipe_ends_quietly() {
    use std::process::Stdio;
    let mut child = Command::new(bin())
        .args(["compare", "--json", "data/measurements/h200/raw"])
        .current_dir(repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader is gone before the first line
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
}

/// The graph engine's campaign in progress beside the published eager rows, a column
/// per session, never pooled; a card with no size measured twice says so.
#[test]
fn stacks_sets_a_campaign_in_progress_beside_the_published_rows() {
    let o = qe(&[
        "stacks",
        "data/measurements/h200/graph/raw",
        "--size",
        "7.6",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = stdout(&o);
    let header = out.lines().find(|l| l.starts_with("| format |")).unwrap();
    assert!(
        header.contains("candle 0.11.1 (h200-2026-11-30")
            && header.contains("candle-graph 0.11.1 (h200-candle-graph-2026-12"),
        "{out}"
    );
    for f in ["FP16", "BF16", "Q8_0", "Q4_K", "Q4_0"] {
        assert!(out.contains(&format!("| {f} |")), "{f}: {out}");
    }
    assert!(out.contains("Widest disagreement between stacks"), "{out}");
    // The directory's rows alone hold one session: nothing to set side by side.
    let o = qe(&["stacks", "data/measurements/h200/graph/raw", "--no-anchors"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("no model size of H200 was measured by two sessions"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The H200's batch sweeps as Markdown: the graph engine's two models, the eager one and
/// llama-server's concurrency sweep (its unit the stream), each batch a row; a card without any
/// batch > 1 energy row is refused with the reason.
#[test]
fn sweeps_prints_every_batch_sweep_of_a_card() {
    let o = qe(&["sweeps", "--gpu", "H200"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = stdout(&o);
    let heads: Vec<&str> = out.lines().filter(|l| l.contains(" · session ")).collect();
    assert_eq!(heads.len(), 4, "{out}");
    assert!(heads[3].contains("Qwen2-7B [llama.cpp]"), "{out}");
    assert!(out.contains("| streams | FP16 mJ/tok · tok/s |"), "{out}");
    assert!(
        heads[1].starts_with("candle-graph 0.11.1 · Qwen2-7B [candle-graph]"),
        "{out}"
    );
    assert!(
        out.contains("Q4_K saves 38 % at batch 1 but costs 18 % more at batch 4."),
        "{out}"
    );
    assert_eq!(
        out.lines().filter(|l| l.starts_with("| 64 |")).count(),
        3,
        "{out}"
    );
    let o = qe(&["sweeps", "--gpu", "RTX 4090"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("RTX 4090 has no energy row at batch > 1"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `optimize --calibration` prints each engine's measured batch step correction next to the
/// launch floors: the graph engine's Q4_K step at batch 64 is several times the roofline's.
#[test]
fn calibration_prints_the_batch_step_corrections() {
    let o = qe(&["optimize", "--calibration"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = stdout(&o);
    let line = out
        .lines()
        .find(|l| {
            l.trim_start()
                .starts_with("candle-graph Q4_K batch step correction")
        })
        .unwrap_or_else(|| panic!("no graph Q4_K correction in\n{out}"));
    let b64: f64 = line
        .rsplit("b64 ×")
        .next()
        .and_then(|x| x.trim().parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(b64 > 3.0, "{line}");
    assert!(out.contains("candle FP16 batch step correction"), "{out}");
}

/// Counts are checked at the edge: a batch of 0 or a token count past the cap is a usage error
/// naming the flag, never a report that says something else.
#[test]
fn measure_refuses_zero_and_oversized_counts_naming_the_flag() {
    for (flag, value) in [
        ("--batch", "0"),
        ("--tokens", "0"),
        ("--tokens", "18446744073709551615"),
        ("--prompt-len", "99999999999"),
        ("--iterations", "0"),
        ("--name", "/tmp/elsewhere"),
        ("--name", "../up"),
    ] {
        let o = qe(&[
            "measure",
            "--synthetic",
            "tiny",
            "--precision",
            "F16",
            flag,
            value,
        ]);
        assert_eq!(o.status.code(), Some(2), "{flag} {value}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(flag), "{flag} {value}: {err}");
    }
    // Sizes past any model: a clear refusal from the shape model's users, never an overflow.
    for cmd in [
        &["optimize", "--gpu", "H200", "--params-b", "1e12"][..],
        &[
            "estimate",
            "--gpu",
            "H200",
            "--params-b",
            "1e12",
            "--precision",
            "Q4_0",
        ][..],
    ] {
        let o = qe(cmd);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && !err.contains("panicked"),
            "{cmd:?}: {err}"
        );
        assert!(
            err.contains("params") && err.contains("100000"),
            "{cmd:?}: {err}"
        );
    }
}

/// A model path that does not exist says so; a FIFO given to `validate` is refused without
/// blocking (exit 2: unreadable), and a folder of reports skips it.
#[test]
fn missing_paths_and_special_files_get_their_own_words() {
    let o = qe(&[
        "measure",
        "--model",
        "./no-such-model",
        "--precision",
        "F16",
    ]);
    assert_ne!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no such file or folder"), "{err}");

    let dir = std::env::temp_dir().join(format!("qe-cli-fifo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("report.json");
    let st = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(st.success());
    let o = qe(&["validate", fifo.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("not a regular file (a FIFO)"),
        "{}",
        stdout(&o)
    );
    // Before, `aggregate` opened the FIFO and waited for a writer forever.
    let mut child = Command::new(bin())
        .args(["aggregate", dir.to_str().unwrap()])
        .env("RUST_LOG", "error")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed().as_secs() > 30 {
            child.kill().unwrap();
            panic!("aggregate blocked on a FIFO named *.json");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--context` without a GPU: one labelled estimate per depth, named by its depth, never
/// measured; the eager engine is refused (it cannot decode at a depth without its prefill).
#[test]
fn measure_context_without_a_gpu_writes_one_estimate_per_depth() {
    let dir = std::env::temp_dir().join(format!("qe-context-{}", std::process::id()));
    let o = qe(&[
        "measure",
        "--synthetic",
        "qwen2-1.5b",
        "--precision",
        "Q4_0",
        "--gpu",
        "H200",
        "--context",
        "1024,4096",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "Qwen2-1.5B_Q4_0_b1_c1024.estimate.json",
            "Qwen2-1.5B_Q4_0_b1_c4096.estimate.json"
        ]
    );
    for n in &names {
        let v = report::validate_str(&std::fs::read_to_string(dir.join(n)).unwrap());
        let r = v.report.unwrap();
        assert_ne!(r.results.basis, report::Basis::Measured, "{n}");
        let depth = if n.contains("_c1024") { 1024 } else { 4096 };
        assert_eq!(r.workload.context_length, Some(depth + 256), "{n}");
    }
    std::fs::remove_dir_all(&dir).ok();
    let o = qe(&[
        "measure",
        "--synthetic",
        "qwen2-1.5b",
        "--precision",
        "Q4_0",
        "--engine",
        "eager",
        "--context",
        "1024",
    ]);
    assert_ne!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("graph engine"));
    // The server path takes --context through llama.cpp's /completion only (it can tell a
    // cached prompt from a prefill); another API is refused before any server is asked.
    let o = qe(&[
        "measure",
        "--server",
        "http://127.0.0.1:9",
        "--api",
        "completions",
        "--params-b",
        "0.5",
        "--precision",
        "Q4_0",
        "--context",
        "1024",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--api llama") && err.contains("/v1/completions"),
        "{err}"
    );
}

/// `--prompts` without a GPU: the committed set is read and named in the report, but nothing is
/// estimated (the figure would include every prefill, which the estimator does not model); a bad
/// set is refused at the edge naming the file and the field, and `--context` or `--tokens`
/// beside it are refused by clap.
#[test]
fn measure_prompts_without_a_gpu_names_the_set_and_estimates_nothing() {
    let dir = std::env::temp_dir().join(format!("qe-prompts-{}", std::process::id()));
    let o = qe(&[
        "measure",
        "--synthetic",
        "qwen2-1.5b",
        "--precision",
        "Q4_0",
        "--gpu",
        "H200",
        "--prompts",
        "data/prompts/prompt-set-v1.json",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let path = dir.join("Qwen2-1.5B_Q4_0_b1_prompts.estimate.json");
    let v = report::validate_str(&std::fs::read_to_string(&path).unwrap());
    assert!(v.errors.is_empty(), "{:?}", v.errors);
    let r = v.report.unwrap();
    assert_eq!(r.results.basis, report::Basis::Unavailable);
    assert_eq!(r.results.energy_per_token_mj, None);
    assert!(r.results.note.unwrap().contains("does not model"));
    let set = r.workload.prompt_set.unwrap();
    assert_eq!(
        (set.name.as_str(), set.prompts),
        ("quantenergy-prompts-v1", 10)
    );
    assert_eq!((set.prompt_tokens, set.output_tokens), (13_912, 1_984));
    // The longest request: 6 290 prompt tokens and 384 output tokens.
    assert_eq!(r.workload.context_length, Some(6_674));
    std::fs::remove_dir_all(&dir).ok();

    let bad = std::env::temp_dir().join(format!("qe-bad-prompts-{}.json", std::process::id()));
    std::fs::write(
        &bad,
        r#"{"name": "x", "license": "CC0-1.0", "token_counts": "q", "prompts": [
            {"id": "a", "kind": "chat", "prompt_tokens": 0, "output_tokens": 4, "text": ""}]}"#,
    )
    .unwrap();
    let o = qe(&[
        "measure",
        "--synthetic",
        "qwen2-1.5b",
        "--prompts",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("$.prompts[0].prompt_tokens: 0 is not in 1..=1048576"),
        "{err}"
    );
    std::fs::remove_file(&bad).ok();
    for other in [["--context", "1024"], ["--tokens", "64"]] {
        let mut a = vec![
            "measure",
            "--synthetic",
            "qwen2-1.5b",
            "--prompts",
            "data/prompts/prompt-set-v1.json",
        ];
        a.extend(other);
        let o = qe(&a);
        assert_eq!(o.status.code(), Some(2), "{other:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("cannot be used with"));
    }
}

/// An external server's size beyond what a report may say (the fuzz target `cli_args` found
/// `--params-b 71048576` writing a report `validate` refused), or not a size: exit 2 naming
/// `--params-b`, nothing written.
#[test]
fn an_external_servers_size_is_bounded_where_it_is_parsed() {
    for bad in ["71048576", "0", "-1", "nan", "inf"] {
        let o = qe(&[
            "measure",
            "--server",
            "http://127.0.0.1:9",
            "--precision",
            "Q4_K",
            &format!("--params-b={bad}"),
        ]);
        assert_eq!(o.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("--params-b"), "{bad}: {err}");
    }
}

/// A number out of range or a lone surrogate is not JSON: exit 2, as for any text that is not.
#[test]
fn validate_says_not_json_for_out_of_range_numbers_and_lone_surrogates() {
    let dir = std::env::temp_dir().join(format!("qe-notjson-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in [
        ("range.json", r#"{"schema_version": 1e400}"#),
        ("surrogate.json", r#"{"schema_version": "\ud800"}"#),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        let o = qe(&["validate", p.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stdout(&o));
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// `measure --model-file` without a server: our engines decode one GGUF per arm. A missing file and
/// two files of one precision are refused with words that name them, before anything is measured.
#[test]
fn model_files_for_our_engines_are_checked_before_a_run() {
    let dir = temp_dir("model-files");
    let o = qe(&[
        "measure",
        "--model-file",
        "/nonexistent/m-Q4_0.gguf",
        "--precision",
        "Q4_0",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("/nonexistent/m-Q4_0.gguf") && err.contains("no such file"),
        "{err}"
    );
    let tiny = repo().join("fuzz/corpus/gguf_header/v3-kvs-tensors.gguf");
    let (a, b) = (dir.join("m-a.gguf"), dir.join("m-b.gguf"));
    std::fs::copy(&tiny, &a).unwrap();
    std::fs::copy(&tiny, &b).unwrap();
    let o = qe(&[
        "measure",
        "--model-file",
        a.to_str().unwrap(),
        "--model-file",
        b.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("one file per precision"), "{err}");
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        2,
        "nothing written"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Warnings go to a pipe as plain text: colour codes only at a terminal.
#[test]
fn no_colour_codes_when_stderr_is_not_a_terminal() {
    let dir = temp_dir("no-colour");
    let o = Command::new(bin())
        .args([
            "measure",
            "--synthetic",
            "qwen2-0.5b",
            "--precision",
            "Q4_0",
            "--out",
        ])
        .arg(&dir)
        .current_dir(repo())
        .env("RUST_LOG", "warn")
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("WARN"), "{err}");
    assert!(!err.contains('\u{1b}'), "{err:?}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `measure --server URL` with nothing answering there is an error naming the URL, even without a
/// GPU (it used to write an estimate and exit 0 without trying the server).
#[test]
fn an_external_server_that_does_not_answer_is_an_error() {
    let dir = temp_dir("no-server");
    let o = qe(&[
        "measure",
        "--server",
        "http://127.0.0.1:9",
        "--precision",
        "Q4_0",
        "--params-b",
        "1",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("http://127.0.0.1:9"), "{err}");
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "no estimate written"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A plan's error names the plan's own file, whatever it is called, and a plan of 10¹² repeats is
/// refused at once instead of expanded.
#[test]
fn plan_errors_name_their_file_and_huge_plans_are_refused_at_once() {
    let dir = temp_dir("plan-names");
    let plan = dir.join("campaign-a.toml");
    std::fs::write(&plan, "out = \"x\"\n[[run]]\nsynthetic = \"qwen2-0.5b\"\nprecisions = [\"Q4_0\"]\nrepeats = \"x\"\n").unwrap();
    let o = qe(&["sweep", plan.to_str().unwrap(), "--dry-run"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("campaign-a.toml: not a valid plan"), "{err}");
    std::fs::write(&plan, "out = \"x\"\n[[run]]\nsynthetic = \"qwen2-0.5b\"\nprecisions = [\"Q4_0\"]\nrepeats = 1000000000000\n").unwrap();
    let t0 = std::time::Instant::now();
    let o = qe(&["sweep", plan.to_str().unwrap(), "--dry-run"]);
    assert!(t0.elapsed().as_secs() < 10, "{:?}", t0.elapsed());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("`repeats` 1000000000000 is over 1000"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Without a CUDA device, engine-check refuses a real model's shape unless told to run on the
/// CPU (it ran silently for more than five minutes).
#[test]
fn engine_check_on_the_cpu_needs_to_be_asked_for() {
    // The refusal is immediate; a build that decodes instead is stopped after 30 s.
    let mut child = Command::new(bin())
        .args([
            "engine-check",
            "--synthetic",
            "qwen2-0.5b",
            "--precision",
            "Q4_0",
        ])
        .current_dir(repo())
        .env("RUST_LOG", "error")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > std::time::Duration::from_secs(30) {
            child.kill().unwrap();
            panic!("engine-check decoded on the CPU for 30 s without being asked");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let o = child.wait_with_output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--allow-cpu") && err.contains("qwen2-0.5b"),
        "{err}"
    );
}

/// `measure --server-cmd … --dry-run` on a machine without a GPU: the server is started, asked
/// for 8 tokens and stopped; nothing is written to `--out`; a server that dies fails the run (1).
#[test]
fn a_server_dry_run_checks_the_command_without_metering() {
    let dir = temp_dir("dry-run");
    let fake = repo().join("crates/server/tests/fixtures/fake_server.py");
    let out = dir.join("out");
    // The fake server's mode is the model file's name.
    let dry = |mode: &str| {
        let model = dir.join(format!("{mode}.safetensors"));
        files::tiny_safetensors(&model);
        qe(&[
            "measure",
            "--server-cmd",
            &format!(
                "python3 {} --port {{port}} --mode $(basename {{model}} .safetensors)",
                fake.display()
            ),
            "--model-file",
            &format!("F16={}", model.display()),
            "--out",
            &out.display().to_string(),
            "--dry-run",
        ])
    };
    let o = dry("ok");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        stdout(&o),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout(&o).contains("FP16: ") && stdout(&o).contains("answered 8 tokens"),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("no energy was read and no report written"));
    let o = dry("exit_at_start");
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("FP16: no answer: the server exited"),
        "{}",
        stdout(&o)
    );
    let written: Vec<_> = std::fs::read_dir(&out)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name())
                .filter(|n| n != "server-logs")
                .collect()
        })
        .unwrap_or_default();
    assert!(written.is_empty(), "{written:?}");
    // Not a server run: the flag says what it is for.
    let o = qe(&[
        "measure",
        "--synthetic",
        "qwen2-0.5b",
        "--precision",
        "Q4_0",
        "--dry-run",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--dry-run checks a server command"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Outputs stay where their owner asked: a plan's `out` that climbs out of the plan's folder or is
/// absolute is refused, `--name` is a plain file name, and a link planted where a report will be
/// written is replaced by the report, never written through.
#[test]
fn outputs_cannot_leave_the_folder_they_were_asked_for() {
    // Everything an escape could write lands under this test's own root, checked at the end.
    let root = temp_dir("confined");
    let dir = root.join("plan");
    std::fs::create_dir_all(&dir).unwrap();
    let plan = dir.join("plan.toml");
    let body = "[defaults]\nrepeats = 1\ntokens = 8\niterations = 1\nwarmup = 0\ncooldown_max_s = 0\ncard = \"H200\"\n[[run]]\nsynthetic = \"qwen2-0.5b\"\nprecisions = [\"Q4_0\"]\n";
    let absolute = root.join("absolute").display().to_string();
    for out in ["../escape", absolute.as_str(), "results/../../escape"] {
        std::fs::write(&plan, format!("out = {out:?}\n{body}")).unwrap();
        let o = qe(&["sweep", plan.to_str().unwrap(), "--dry-run"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{out}: {err}");
        assert!(err.contains("inside the plan's folder"), "{out}: {err}");
    }
    let abs_name = root.join("abs").display().to_string();
    for name in [abs_name.as_str(), "../up", "a/b"] {
        let o = Command::new(bin())
            .args([
                "measure",
                "--synthetic",
                "qwen2-0.5b",
                "--precision",
                "Q4_0",
                "--name",
                name,
            ])
            .current_dir(&dir)
            .env("RUST_LOG", "error")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains("not a plain file name"), "{name}: {err}");
    }
    // A link where the report goes, pointing outside: the report replaces the link.
    let outside = root.join("outside.txt");
    std::fs::write(&outside, "keep me").unwrap();
    let results = dir.join("results");
    std::fs::create_dir_all(&results).unwrap();
    let target = results.join("qwen2-0.5b_b1_r1_Q4_0.estimate.json");
    std::os::unix::fs::symlink(&outside, &target).unwrap();
    std::fs::write(&plan, format!("out = \"results\"\n{body}")).unwrap();
    let o = qe(&["sweep", plan.to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me");
    assert!(std::fs::symlink_metadata(&target)
        .unwrap()
        .file_type()
        .is_file());
    let mut left: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["outside.txt", "plan"],
        "written outside the plan's folder"
    );
    let up: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(up.iter().all(|n| n != "up" && n != "a"), "{up:?}");
    std::fs::remove_dir_all(&root).ok();
}
