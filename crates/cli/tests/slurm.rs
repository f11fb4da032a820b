//! A sweep as a Slurm job array, on a real Slurm: `scripts/slurm/local-cluster.sh` starts
//! munged, slurmctld and slurmd for this machine alone (own key, socket, ports and spool under a
//! temp dir; no systemd), the test submits what `sweep --emit slurm` wrote, and checks what the
//! array left behind. The jobs run the meter's no-GPU path (this machine has no GPU): labelled
//! estimates, never measurements.
//!
//! Needs root and Debian's slurmctld, slurmd, slurm-client and munge; `./dev test` installs them.
//! Without them the test fails and says so: a scheduler test never passes silently.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant, SystemTime};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const QE: &str = env!("CARGO_BIN_EXE_quantenergy");

/// The cluster, stopped when dropped (also when an assertion fails).
struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
}

impl Cluster {
    fn start(dir: &Path) -> Cluster {
        for bin in [
            "munged",
            "slurmctld",
            "slurmd",
            "sbatch",
            "squeue",
            "scancel",
        ] {
            assert!(
                Command::new("sh")
                    .args(["-c", &format!("command -v {bin}")])
                    .output()
                    .is_ok_and(|o| o.status.success()),
                "{bin} not found: `./dev test` installs Slurm (apt-get install slurmctld slurmd \
                 slurm-client munge); this test needs them and root"
            );
        }
        let o = Command::new(repo().join("scripts/slurm/local-cluster.sh"))
            .arg("start")
            .arg(dir)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "local-cluster.sh start: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        Cluster {
            dir: dir.to_path_buf(),
            conf: dir.join("slurm.conf"),
        }
    }

    fn cmd(&self, bin: &str, args: &[&str]) -> Output {
        Command::new(bin)
            .args(args)
            .env("SLURM_CONF", &self.conf)
            .output()
            .unwrap()
    }

    /// `sbatch --parsable SCRIPT` → the array's job id.
    fn submit(&self, script: &Path) -> String {
        let o = self.cmd("sbatch", &["--parsable", script.to_str().unwrap()]);
        assert!(
            o.status.success(),
            "sbatch: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    /// Wait until no task of the array is pending or running (there is no accounting storage,
    /// so `squeue` is the witness).
    fn wait_done(&self, job: &str) {
        let t0 = Instant::now();
        loop {
            let o = self.cmd("squeue", &["-h", "-r", "-j", job, "-o", "%i %T"]);
            let text = String::from_utf8_lossy(&o.stdout).to_string();
            if text.trim().is_empty() {
                return;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(180),
                "array {job} still queued after 180 s:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(repo().join("scripts/slurm/local-cluster.sh"))
            .arg("stop")
            .arg(&self.dir)
            .status();
    }
}

fn read_json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn json_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json") || n.contains(".tmp"))
        .collect();
    v.sort();
    v
}

const PLAN: &str = r#"
out = "results"
session = "slurm-ci"
[defaults]
repeats = 2
tokens = 8
iterations = 1
warmup = 0
cooldown_max_s = 0
card = "H200"
[[run]]
synthetic = "qwen2-0.5b"
precisions = ["Q8_0", "Q4_K"]
[[run]]
synthetic = "qwen2-1.5b"
precisions = ["Q4_0"]
repeats = 1
[[run]]
model = "missing/model.gguf"
precisions = ["Q4_0"]
repeats = 1
"#;

#[test]
#[ignore = "needs root and a one-node Slurm (slurmctld, slurmd, munge): ./dev test installs them and runs it"]
fn a_plan_runs_as_a_slurm_array_resumes_after_scancel_and_never_pools_estimates() {
    let root = std::env::temp_dir().join(format!("qe-slurm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let cluster = Cluster::start(&root.join("cluster"));
    let work = root.join("campaign");
    std::fs::create_dir_all(&work).unwrap();
    let plan = work.join("plan.toml");
    std::fs::write(&plan, PLAN).unwrap();
    let results = work.join("results");
    let hold = work.join("hold");
    let started = work.join("held-job-started");
    let wrapper = write_wrapper(&work.join("qe-wrapper.sh"), &hold, &started);
    std::fs::write(&hold, "").unwrap();

    // Emit: stdout is the script; --dry-run lists the four tasks, all to run.
    let emit = |extra: &[&str]| emit_slurm(&plan, &wrapper, extra);
    let o = emit(&[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let script = work.join("sweep.sbatch");
    std::fs::write(&script, &o.stdout).unwrap();
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(text.contains("#SBATCH --array=0-3\n"), "{text}");
    let dry = String::from_utf8_lossy(&emit(&["--dry-run"]).stdout).to_string();
    assert!(dry.contains("4 tasks: 4 would run"), "{dry}");

    // First submission; cancel the held task while its measurement runs.
    let job = cluster.submit(&script);
    wait_for(&started, "the held task never started");
    // Jobs are breadth first: 0.5B r1, 1.5B r1, missing r1, 0.5B r2 → the 1.5B job is task 1.
    let o = cluster.cmd("scancel", &[&format!("{job}_1")]);
    assert!(
        o.status.success(),
        "scancel: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    cluster.wait_done(&job);
    let files = json_files(&results);
    check_all_but_the_cancelled_task(&files);
    check_where_and_why(&results, &job);

    // Resubmit the same script: only the cancelled task runs again.
    std::fs::remove_file(&hold).unwrap();
    let before = modified(&results, &files);
    let dry = String::from_utf8_lossy(&emit(&["--dry-run"]).stdout).to_string();
    assert!(dry.contains("4 tasks: 1 would run"), "{dry}");
    let job2 = cluster.submit(&script);
    cluster.wait_done(&job2);
    check_only_the_cancelled_task_reran(&results, &job2, before);
    check_never_pooled(&results);
    drop(cluster);
    let _ = std::fs::remove_dir_all(&root);
}

/// The command the array runs, written to `path`: a site wrapper around the binary (as a module
/// system or a container launcher would be). Ours holds the 1.5B job's measurement while the flag
/// file `hold` exists (touching `started` first), so that it can be cancelled mid-run.
fn write_wrapper(path: &Path, hold: &Path, started: &Path) -> PathBuf {
    std::fs::write(
        path,
        format!(
            "#!/bin/sh\ncase \" $* \" in *\" measure \"*qwen2-1.5b*) if [ -e {h} ]; then touch {s}; exec sleep 300; fi;; esac\nexec {qe} \"$@\"\n",
            h = hold.display(),
            s = started.display(),
            qe = QE
        ),
    )
    .unwrap();
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path.to_path_buf()
}

/// `quantenergy sweep PLAN --emit slurm` through `wrapper`, with `extra` arguments.
fn emit_slurm(plan: &Path, wrapper: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "sweep",
        plan.to_str().unwrap(),
        "--emit",
        "slurm",
        "--gpus-per-task",
        "0",
        "--exe",
        wrapper.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    Command::new(QE).args(&args).output().unwrap()
}

/// Wait (up to 120 s) until `path` exists; `what` is the failure.
fn wait_for(path: &Path, what: &str) {
    let t0 = Instant::now();
    while !path.exists() {
        assert!(t0.elapsed() < Duration::from_secs(120), "{what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// After the first submission: every task's report but the cancelled one's, and no temp file.
fn check_all_but_the_cancelled_task(files: &[String]) {
    assert!(
        !files.iter().any(|f| f.contains("qwen2-1.5b")),
        "the cancelled task left something behind: {files:?}"
    );
    assert!(
        !files.iter().any(|f| f.contains(".tmp")),
        "temp files: {files:?}"
    );
    for f in [
        "qwen2-0.5b_b1_r1_Q8_0.estimate.json",
        "qwen2-0.5b_b1_r1_Q4_K.estimate.json",
        "qwen2-0.5b_b1_r2_Q8_0.estimate.json",
        "qwen2-0.5b_b1_r2_Q4_K.estimate.json",
        "missing_model.gguf_b1_r1_Q4_0.failed.json",
    ] {
        assert!(files.contains(&f.to_string()), "{f} missing: {files:?}");
    }
}

/// When each of `files` under `results` was last written.
fn modified(results: &Path, files: &[String]) -> Vec<(String, SystemTime)> {
    files
        .iter()
        .map(|f| {
            (
                f.clone(),
                std::fs::metadata(results.join(f))
                    .unwrap()
                    .modified()
                    .unwrap(),
            )
        })
        .collect()
}

/// After the resubmission `job2`: the cancelled task's report is there, from `job2`, and none of
/// the files written `before` was rewritten; the tasks that had run say so in their logs.
fn check_only_the_cancelled_task_reran(
    results: &Path,
    job2: &str,
    before: Vec<(String, SystemTime)>,
) {
    assert!(results.join("qwen2-1.5b_b1_r1_Q4_0.estimate.json").exists());
    for (f, t) in before {
        let now = std::fs::metadata(results.join(&f))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(now, t, "{f} was rewritten by the resubmission");
    }
    let log = std::fs::read_to_string(results.join(format!("slurm-logs/{job2}_0.log"))).unwrap();
    assert!(log.contains("done (no-GPU estimate only)"), "{log}");
    let log = std::fs::read_to_string(results.join(format!("slurm-logs/{job2}_2.log"))).unwrap();
    assert!(log.contains("failed: exit status"), "{log}");
    let redo = read_json(&results.join("qwen2-1.5b_b1_r1_Q4_0.estimate.json"));
    assert_eq!(redo["environment"]["slurm"]["array_job_id"], job2);
}

/// Estimates and failures never become a measured row: `aggregate` refuses, counting them.
fn check_never_pooled(results: &Path) {
    let o = Command::new(QE)
        .arg("aggregate")
        .arg(results)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("5 estimate(s), which are never pooled") && err.contains("1 failed"),
        "{err}"
    );
}

/// After the first submission: every report says where it ran, in Slurm's words, and the failed
/// job left a failed report with its reason, not a hole.
fn check_where_and_why(results: &Path, job: &str) {
    let host =
        String::from_utf8_lossy(&Command::new("hostname").arg("-s").output().unwrap().stdout)
            .trim()
            .to_string();
    let est = read_json(&results.join("qwen2-0.5b_b1_r2_Q4_K.estimate.json"));
    let slurm = &est["environment"]["slurm"];
    assert_eq!(slurm["array_job_id"], job, "{slurm}");
    assert_eq!(slurm["array_task_id"], 3, "{slurm}");
    assert_eq!(slurm["node"], host.as_str(), "{slurm}");
    assert_eq!(slurm["partition"], "debug", "{slurm}");
    assert!(
        slurm["job_id"].as_str().is_some_and(|j| !j.is_empty()),
        "{slurm}"
    );
    assert_eq!(est["results"]["basis"], "interpolated", "{est}");
    assert!(est["results"]["energy_per_token_mj"]
        .as_f64()
        .is_some_and(|e| e > 0.0));

    // The failed job: a failed report with its reason, not a hole.
    let failed = read_json(&results.join("missing_model.gguf_b1_r1_Q4_0.failed.json"));
    assert_eq!(failed["results"]["basis"], "unavailable");
    let reason = failed["protocol"]["arms"][0]["error"].as_str().unwrap();
    assert!(
        reason.contains("missing/model.gguf") && reason.contains("exit status"),
        "{reason}"
    );
    assert_eq!(failed["protocol"]["session"], "slurm-ci");
    assert_eq!(failed["environment"]["slurm"]["array_task_id"], 2);
    let v = Command::new(QE)
        .arg("validate")
        .arg(results.join("missing_model.gguf_b1_r1_Q4_0.failed.json"))
        .output()
        .unwrap();
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stdout));
}
