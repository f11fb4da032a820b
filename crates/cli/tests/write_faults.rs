//! A report that cannot be written (disk full, file too large, read-only directory) gives a clear
//! error naming the file, leaves no half-written or temporary file, and the previous report of the
//! same name — when overwriting — intact. `measure` runs its no-GPU path here (this
//! machine has no GPU), which writes through the same atomic writer as a measurement.
//!
//! Disk full and read-only use a small tmpfs in a private mount namespace (`unshare -m`, root);
//! "file too large" uses the file-size limit (`ulimit -f`), which needs no privilege.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const QE: &str = env!("CARGO_BIN_EXE_quantenergy");

const PREVIOUS: &str = "{\"previous\": \"report\"}\n";

fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("qe-wf-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `measure` into `out` under `sh` with `setup` run first (in the same shell).
fn measure_sh(setup: &str, out: &Path, namespace: bool) -> Output {
    let script = format!(
        "set -e; {setup}; trap '' XFSZ; {QE} measure --synthetic qwen2-0.5b --precision Q4_K \
         --gpu H200 --out {out} --name r; echo 'measure exited 0'",
        out = out.display()
    );
    let mut c = if namespace {
        let mut c = Command::new("unshare");
        c.args(["-m", "sh", "-c", &script]);
        c
    } else {
        let mut c = Command::new("sh");
        c.args(["-c", &script]);
        c
    };
    c.output().unwrap()
}

fn leftovers(d: &Path) -> Vec<String> {
    std::fs::read_dir(d)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect()
}

fn assert_refused(o: &Output, want: &str, target: &Path) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains("measure exited 0"),
        "measure succeeded: {o:?}"
    );
    assert!(err.contains(want), "{err}");
    assert!(
        err.contains(&target.display().to_string()),
        "the error names {}: {err}",
        target.display()
    );
}

#[test]
fn a_file_size_limit_fails_the_write_and_keeps_the_previous_report() {
    let d = dir("fsize");
    let target = d.join("r.estimate.json");
    std::fs::write(&target, PREVIOUS).unwrap();
    // 1 block: the estimate report is several kB.
    let o = measure_sh("ulimit -f 1", &d, false);
    assert_refused(&o, "File too large", &target);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), PREVIOUS);
    assert!(leftovers(&d).is_empty(), "{:?}", leftovers(&d));
    let _ = std::fs::remove_dir_all(&d);
}

/// Whether this process may make a private mount namespace (root with CAP_SYS_ADMIN).
fn can_mount() -> bool {
    Command::new("unshare")
        .args(["-m", "true"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
#[ignore = "needs root (unshare -m mounts a small tmpfs): ./dev test runs it"]
fn a_full_disk_or_a_read_only_directory_fails_the_write_and_keeps_the_previous_report() {
    assert!(
        can_mount(),
        "this test needs `unshare -m` (root): it mounts a small tmpfs to fill it and to make it read-only"
    );
    let d = dir("mounts");
    let target = d.join("r.estimate.json");
    // Disk full: an 8 kB tmpfs, the previous report, then filler until nothing fits.
    let o = measure_sh(
        &format!(
            "mount -t tmpfs -o size=8k none {d}; printf '%s' '{prev}' > {t}; \
             dd if=/dev/zero of={d}/filler bs=1k count=64 2>/dev/null || true; \
             trap 'cat {t} > {d}.after' EXIT",
            d = d.display(),
            t = target.display(),
            prev = PREVIOUS.trim_end()
        ),
        &d,
        true,
    );
    assert_refused(&o, "No space left on device", &target);
    // The tmpfs is gone with the namespace; what it held at the end was copied out.
    let after = std::fs::read_to_string(format!("{}.after", d.display())).unwrap();
    assert_eq!(after, PREVIOUS.trim_end(), "the previous report changed");

    // Read-only: the previous report in place, the mount flipped read-only.
    let o = measure_sh(
        &format!(
            "mount -t tmpfs -o size=1m none {d}; printf '%s' '{prev}' > {t}; \
             mount -o remount,ro {d}; trap 'cat {t} > {d}.after; ls -a {d} > {d}.ls' EXIT",
            d = d.display(),
            t = target.display(),
            prev = PREVIOUS.trim_end()
        ),
        &d,
        true,
    );
    assert_refused(&o, "Read-only file system", &target);
    let after = std::fs::read_to_string(format!("{}.after", d.display())).unwrap();
    assert_eq!(after, PREVIOUS.trim_end());
    let ls = std::fs::read_to_string(format!("{}.ls", d.display())).unwrap();
    assert!(!ls.contains(".tmp"), "{ls}");
    for f in [
        format!("{}.after", d.display()),
        format!("{}.ls", d.display()),
    ] {
        let _ = std::fs::remove_file(f);
    }
    let _ = std::fs::remove_dir_all(&d);
}
