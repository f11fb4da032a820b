//! A sweep plan as a Slurm job array: one array task per plan job, each running that one job
//! (`quantenergy sweep PLAN --task $SLURM_ARRAY_TASK_ID`) on the GPU(s) Slurm gave it, writing
//! into one results directory that every node shares. The scheduler boundary is here: Slurm
//! decides where and when; the task decides nothing but whether its job is still to do.

use std::fmt::Write;
use std::path::Path;

/// What the array asks Slurm for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SlurmOptions {
    /// `--partition`.
    pub partition: Option<String>,
    /// `--account`.
    pub account: Option<String>,
    /// `--time` per task, in Slurm's syntax (`30:00`, `1-00:00:00`).
    pub time: Option<String>,
    /// `--gpus-per-task` (0: ask for none, e.g. to run the no-GPU path).
    pub gpus_per_task: u32,
    /// At most this many tasks at once (`--array=0-N%K`).
    pub max_parallel: Option<usize>,
    /// Tasks run their job again when it failed before (`sweep --retry-failed`).
    pub retry_failed: bool,
    /// Tasks run their job again when only its no-GPU estimate is there.
    pub retry_estimated: bool,
}

/// The array to emit.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrayScript<'a> {
    /// The plan, as an absolute path the nodes can read.
    pub plan: &'a Path,
    /// Its SHA-256: a task refuses to run a plan that changed after emission (its job numbers
    /// would point at other jobs).
    pub plan_sha256: &'a str,
    /// The shared results directory, absolute.
    pub results: &'a Path,
    /// The command each task runs (this binary, or a site wrapper around it).
    pub exe: &'a str,
    /// Jobs in the plan: one array task each.
    pub jobs: usize,
    /// What to ask Slurm for.
    pub opts: &'a SlurmOptions,
}

/// `s` quoted for a POSIX shell.
pub fn sh_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@%".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// A value Slurm reads from an `#SBATCH` line: one line, no spaces that would end it.
fn sbatch_value(what: &str, v: &str) -> Result<String, String> {
    if v.is_empty() || v.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("--{what} {v:?}: one word, no spaces"));
    }
    Ok(v.to_string())
}

/// The sbatch script. Errors name an option Slurm could not read.
pub fn sbatch_script(a: &ArrayScript) -> Result<String, String> {
    if a.jobs == 0 {
        return Err("the plan has no jobs: nothing to submit".into());
    }
    let name = a
        .plan
        .file_stem()
        .map(|s| meter::files::safe_name(&s.to_string_lossy()))
        .unwrap_or_default();
    let parent = a
        .plan
        .parent()
        .and_then(|p| p.file_name())
        .map(|s| meter::files::safe_name(&s.to_string_lossy()))
        .unwrap_or_default();
    let plan = a.plan.display().to_string();
    let results = a.results.display().to_string();
    let mut s = String::new();
    let _ = writeln!(s, "#!/bin/bash");
    let _ = writeln!(
        s,
        "# A quantenergy sweep as a Slurm job array (quantenergy {}, `sweep --emit slurm`).",
        env!("CARGO_PKG_VERSION")
    );
    let _ = writeln!(s, "# Plan:    {plan}");
    let _ = writeln!(
        s,
        "#          sha256 {}: a task refuses to run if the plan changed; emit again.",
        a.plan_sha256
    );
    let _ = writeln!(
        s,
        "# Results: {results} (shared by every node; reports written atomically)"
    );
    let _ = writeln!(
        s,
        "# {} jobs, one array task each. Submit this script again to run the jobs whose report is",
        a.jobs
    );
    let _ = writeln!(
        s,
        "# missing: finished tasks exit at once; a failed job leaves <stem>.failed.json with its reason."
    );
    let _ = writeln!(s, "#SBATCH --job-name=qe-{parent}-{name}");
    let throttle = a
        .opts
        .max_parallel
        .map(|k| format!("%{k}"))
        .unwrap_or_default();
    let _ = writeln!(s, "#SBATCH --array=0-{}{throttle}", a.jobs - 1);
    let _ = writeln!(s, "#SBATCH --ntasks=1");
    if a.opts.gpus_per_task > 0 {
        let _ = writeln!(s, "#SBATCH --gpus-per-task={}", a.opts.gpus_per_task);
    }
    for (flag, v) in [
        ("partition", &a.opts.partition),
        ("account", &a.opts.account),
        ("time", &a.opts.time),
    ] {
        if let Some(v) = v {
            let _ = writeln!(s, "#SBATCH --{flag}={}", sbatch_value(flag, v)?);
        }
    }
    let log_dir = sbatch_value("results", &format!("{results}/slurm-logs"))?;
    let _ = writeln!(s, "#SBATCH --output={log_dir}/%A_%a.log");
    let _ = writeln!(s, "set -euo pipefail");
    let _ = writeln!(
        s,
        "# NVML and CUDA count cards in the same (PCI bus) order; the meter maps them by UUID."
    );
    let _ = writeln!(s, "export CUDA_DEVICE_ORDER=PCI_BUS_ID");
    let _ = writeln!(s, "export QUANTENERGY_EXE={}", sh_quote(a.exe));
    let retry = [
        (a.opts.retry_failed, " --retry-failed"),
        (a.opts.retry_estimated, " --retry-estimated"),
    ]
    .iter()
    .filter(|(on, _)| *on)
    .map(|(_, f)| *f)
    .collect::<String>();
    let _ = writeln!(
        s,
        "exec \"$QUANTENERGY_EXE\" sweep {} --out {} --task \"$SLURM_ARRAY_TASK_ID\" --plan-sha256 {}{retry}",
        sh_quote(&plan),
        sh_quote(&results),
        a.plan_sha256
    );
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(opts: &SlurmOptions, exe: &str) -> Result<String, String> {
        sbatch_script(&ArrayScript {
            plan: Path::new("/shared/h200/plan.toml"),
            plan_sha256: "ab12",
            results: Path::new("/shared/h200/raw"),
            exe,
            jobs: 12,
            opts,
        })
    }

    #[test]
    fn the_array_has_one_task_per_job_and_asks_for_what_was_given() {
        let opts = SlurmOptions {
            partition: Some("gpu".into()),
            account: Some("proj-7".into()),
            time: Some("00:30:00".into()),
            gpus_per_task: 1,
            max_parallel: Some(4),
            ..Default::default()
        };
        let s = script(&opts, "/opt/qe/quantenergy").unwrap();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "#!/bin/bash");
        for want in [
            "#SBATCH --array=0-11%4",
            "#SBATCH --ntasks=1",
            "#SBATCH --gpus-per-task=1",
            "#SBATCH --partition=gpu",
            "#SBATCH --account=proj-7",
            "#SBATCH --time=00:30:00",
            "#SBATCH --output=/shared/h200/raw/slurm-logs/%A_%a.log",
            "#SBATCH --job-name=qe-h200-plan",
            "export CUDA_DEVICE_ORDER=PCI_BUS_ID",
            "export QUANTENERGY_EXE=/opt/qe/quantenergy",
        ] {
            assert!(lines.contains(&want), "{want} missing:\n{s}");
        }
        let exec = lines.last().unwrap();
        assert_eq!(
            *exec,
            "exec \"$QUANTENERGY_EXE\" sweep /shared/h200/plan.toml --out /shared/h200/raw \
             --task \"$SLURM_ARRAY_TASK_ID\" --plan-sha256 ab12"
        );
        // Slurm reads #SBATCH lines only before the first command.
        let first_cmd = lines.iter().position(|l| !l.starts_with('#')).unwrap();
        assert!(lines[first_cmd..].iter().all(|l| !l.starts_with("#SBATCH")));
    }

    #[test]
    fn no_gpus_no_throttle_and_odd_paths_are_quoted() {
        let s = script(&SlurmOptions::default(), "/home/a b/it's/qe").unwrap();
        assert!(s.contains("#SBATCH --array=0-11\n"), "{s}");
        assert!(s.trim_end().ends_with("--plan-sha256 ab12"), "{s}");
        let retry = SlurmOptions {
            retry_failed: true,
            ..Default::default()
        };
        let r = script(&retry, "qe").unwrap();
        assert!(
            r.trim_end().ends_with("--plan-sha256 ab12 --retry-failed"),
            "{r}"
        );
        assert!(!s.contains("gpus-per-task"), "{s}");
        assert!(!s.contains("--partition"), "{s}");
        assert!(
            s.contains(r"export QUANTENERGY_EXE='/home/a b/it'\''s/qe'"),
            "{s}"
        );
        assert_eq!(sh_quote(""), "''");
    }

    #[test]
    fn what_slurm_could_not_read_is_refused() {
        let bad = SlurmOptions {
            partition: Some("gpu a100".into()),
            ..Default::default()
        };
        let e = script(&bad, "qe").unwrap_err();
        assert!(e.contains("--partition") && e.contains("no spaces"), "{e}");
        let e = sbatch_script(&ArrayScript {
            plan: Path::new("/p.toml"),
            plan_sha256: "00",
            results: Path::new("/r"),
            exe: "qe",
            jobs: 0,
            opts: &SlurmOptions::default(),
        })
        .unwrap_err();
        assert!(e.contains("no jobs"), "{e}");
    }
}
