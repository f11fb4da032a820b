//! `quantenergy sweep` when the world misbehaves, on this GPU-less machine: a sweep
//! told to stop mid-job leaves nothing for that job and resumes exactly there; a job killed from
//! outside (the OOM killer) leaves a failed report with the reason; an array task refuses a plan
//! that changed after its script was emitted. Jobs go through `QUANTENERGY_EXE`, a wrapper that
//! can hold or kill one job, as a site wrapper around the binary would sit there.

mod files;
use files::tiny_safetensors;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const QE: &str = env!("CARGO_BIN_EXE_quantenergy");

const PLAN: &str = r#"
out = "results"
session = "faults"
[defaults]
repeats = 1
tokens = 8
iterations = 1
warmup = 0
cooldown_max_s = 0
card = "H200"
[[run]]
synthetic = "qwen2-0.5b"
precisions = ["Q4_K"]
[[run]]
synthetic = "qwen2-1.5b"
precisions = ["Q4_0"]
[[run]]
synthetic = "qwen2-7b"
precisions = ["Q4_0"]
"#;

struct Campaign {
    dir: PathBuf,
    plan: PathBuf,
    results: PathBuf,
    wrapper: PathBuf,
}

/// A plan and a wrapper that runs `script` (sh) before the real binary for the job whose
/// arguments contain `model`.
fn campaign(tag: &str, model: &str, script: &str) -> Campaign {
    let dir = std::env::temp_dir().join(format!("qe-sweep-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let plan = dir.join("plan.toml");
    std::fs::write(&plan, PLAN).unwrap();
    let wrapper = dir.join("wrapper.sh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\ncase \" $* \" in *\" measure \"*{model}*) {script};; esac\nexec {QE} \"$@\"\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    Campaign {
        results: dir.join("results"),
        dir,
        plan,
        wrapper,
    }
}

impl Campaign {
    fn sweep(&self) -> Command {
        let mut c = Command::new(QE);
        c.arg("sweep")
            .arg(&self.plan)
            .env("QUANTENERGY_EXE", &self.wrapper);
        c
    }
    fn files(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.results)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }
}

impl Drop for Campaign {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn wait_for(p: &Path) {
    let t0 = Instant::now();
    while !p.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{} never appeared",
            p.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_sweep_stopped_mid_job_leaves_nothing_for_it_and_resumes_exactly_there() {
    let c = campaign(
        "sigterm",
        "qwen2-1.5b",
        "[ -e HOLD ] && { touch STARTED; exec sleep 300; }",
    );
    let (hold, started) = (c.dir.join("hold"), c.dir.join("started"));
    let script = std::fs::read_to_string(&c.wrapper)
        .unwrap()
        .replace("HOLD", hold.to_str().unwrap())
        .replace("STARTED", started.to_str().unwrap());
    std::fs::write(&c.wrapper, script).unwrap();
    std::fs::write(&hold, "").unwrap();

    let child = c
        .sweep()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&started);
    // SIGTERM to the sweep alone (as `kill PID` or a scheduler would send it): it must pass it on
    // to the job's process, write nothing for that job, and start no other.
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let t0 = Instant::now();
    let o = child.wait_with_output().unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "the sweep took {:?} to stop",
        t0.elapsed()
    );
    assert_eq!(o.status.code(), Some(128 + libc::SIGTERM), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("interrupted during qwen2-1.5b_b1_r1_Q4_0"),
        "{err}"
    );
    assert_eq!(
        c.files(),
        ["qwen2-0.5b_b1_r1_Q4_K.estimate.json"],
        "only the job before the interruption may have written"
    );
    let first = std::fs::metadata(c.results.join("qwen2-0.5b_b1_r1_Q4_K.estimate.json"))
        .unwrap()
        .modified()
        .unwrap();

    std::fs::remove_file(&hold).unwrap();
    let o = c.sweep().output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("3 jobs in the plan, 2 to run, 1 done"),
        "{out}"
    );
    assert_eq!(
        c.files(),
        [
            "aggregate.csv",
            "qwen2-0.5b_b1_r1_Q4_K.estimate.json",
            "qwen2-1.5b_b1_r1_Q4_0.estimate.json",
            "qwen2-7b_b1_r1_Q4_0.estimate.json",
        ]
    );
    let again = std::fs::metadata(c.results.join("qwen2-0.5b_b1_r1_Q4_K.estimate.json"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(first, again, "a finished job was run again");
    // Nothing left to run: the aggregate is not rewritten.
    let csv = c.results.join("aggregate.csv");
    let before = std::fs::metadata(&csv).unwrap().modified().unwrap();
    let o = c.sweep().output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("aggregate.csv unchanged"));
    assert_eq!(before, std::fs::metadata(&csv).unwrap().modified().unwrap());
}

#[test]
fn a_job_killed_from_outside_leaves_a_failed_report_with_the_reason() {
    // The OOM killer's way: SIGKILL, no last words.
    let c = campaign("sigkill", "qwen2-7b", "echo 'loading 7B' >&2; kill -9 $$");
    let o = c.sweep().output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("1 job(s) failed") && err.contains("qwen2-7b"),
        "{err}"
    );
    let failed = c.results.join("qwen2-7b_b1_r1_Q4_0.failed.json");
    let rep: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&failed).unwrap()).unwrap();
    let why = rep["protocol"]["arms"][0]["error"].as_str().unwrap();
    assert!(
        why.contains("killed by signal 9") && why.contains("out-of-memory"),
        "{why}"
    );
    assert!(
        why.contains("loading 7B"),
        "the job's last words are kept: {why}"
    );
    assert_eq!(rep["results"]["basis"], "unavailable");
    assert!(rep["results"]["energy_per_token_mj"].is_null());
    assert_eq!(rep["protocol"]["session"], "faults");
    // The failed job is not run again unless asked; asked, a good run replaces its failed report.
    let o = c.sweep().arg("--dry-run").output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("0 to run") && out.contains("failed: killed by signal 9"),
        "{out}"
    );
    std::fs::write(&c.wrapper, format!("#!/bin/sh\nexec {QE} \"$@\"\n")).unwrap();
    let o = c.sweep().arg("--retry-failed").output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!failed.exists(), "the stale failed report stayed");
    assert!(c.results.join("qwen2-7b_b1_r1_Q4_0.estimate.json").exists());
}

#[test]
fn an_array_task_refuses_a_plan_that_changed_or_a_job_it_does_not_have() {
    let c = campaign("sha", "none", "true");
    let o = c
        .sweep()
        .args(["--task", "0", "--plan-sha256", "00ff"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("changed since the array was emitted"), "{err}");
    let o = c.sweep().args(["--task", "3"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("the plan has 3 jobs"),
        "{err}"
    );
    assert!(c.files().is_empty(), "{:?}", c.files());
    // The right hash runs the job.
    let (sha, _) = meter::files::sha256_file(&c.plan).unwrap();
    let o = c
        .sweep()
        .args(["--task", "2", "--plan-sha256", &sha])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(c.files(), ["qwen2-7b_b1_r1_Q4_0.estimate.json"]);
}

/// A plan's server runs (llama-server driven by the meter) are jobs like the candle
/// runs: one `measure --server-cmd` per concurrency and repeat, model files relative to the plan,
/// a report per arm — here, with no GPU, each arm's labelled estimate — and a resumable state.
#[test]
fn a_plan_runs_its_server_jobs_and_resumes_them_like_any_other() {
    let c = campaign("server", "none", "true");
    std::fs::write(
        &c.plan,
        r#"
out = "results"
session = "llama-test"
[defaults]
repeats = 1
tokens = 8
iterations = 1
warmup = 0
cooldown_max_s = 0
card = "H200"
[[run]]
synthetic = "qwen2-0.5b"
precisions = ["Q4_K"]
batch = [1, 8]
server_cmd = "/nonexistent/llama-server -m {model} --port {port}"
model_files = "models/{name}-{precision}.safetensors"
"#,
    )
    .unwrap();
    std::fs::create_dir_all(c.dir.join("models")).unwrap();
    for t in ["F16", "Q4_K"] {
        tiny_safetensors(&c.dir.join(format!("models/qwen2-0.5b-{t}.safetensors")));
    }
    // From another working directory: the model files are found beside the plan.
    let o = c.sweep().current_dir("/").output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let files = c.files();
    for want in [
        "qwen2-0.5b_server_b1_r1_FP16.estimate.json",
        "qwen2-0.5b_server_b1_r1_Q4_K.estimate.json",
        "qwen2-0.5b_server_b8_r1_FP16.estimate.json",
        "qwen2-0.5b_server_b8_r1_Q4_K.estimate.json",
    ] {
        assert!(files.iter().any(|f| f == want), "{want} not in {files:?}");
    }
    let rep: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(c.results.join("qwen2-0.5b_server_b8_r1_Q4_K.estimate.json"))
            .unwrap(),
    )
    .unwrap();
    assert_ne!(rep["results"]["basis"], "measured", "{rep}");
    let v = report::validate_str(&rep.to_string());
    assert!(v.errors.is_empty(), "{:?}", v.errors);
    assert_eq!(rep["workload"]["precision"], "Q4_K");
    assert_eq!(rep["protocol"]["session"], "llama-test");
    let o = c.sweep().arg("--dry-run").output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("0 to run") && out.contains("qwen2-0.5b_server_b8_r1"),
        "{out}"
    );
    // A missing model file fails the jobs that need it, each report saying which file.
    std::fs::remove_dir_all(&c.results).unwrap();
    std::fs::remove_file(c.dir.join("models/qwen2-0.5b-Q4_K.safetensors")).unwrap();
    let o = c.sweep().output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("2 job(s) failed"),
        "{err}"
    );
    let failed =
        std::fs::read_to_string(c.results.join("qwen2-0.5b_server_b1_r1_Q4_K.failed.json"))
            .unwrap_or_default();
    assert!(failed.contains("qwen2-0.5b-Q4_K.safetensors"), "{failed}");
}
