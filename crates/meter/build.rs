//! Names the meter's build for every report it writes (`stack.meter_build`): the crate version
//! and the commit it was built from, so two builds measured in one session can never pool as one
//! configuration. `QE_METER_REV` (set by scripts/build-cuda.sh: the commit, with `-dirty.<hash of
//! the diff>` for a tree with changes) wins; else `git rev-parse` where a checkout is at hand,
//! marked `-dirty` when tracked files differ; else the version alone.

use std::process::Command;

fn main() {
    println!("cargo::rerun-if-env-changed=QE_METER_REV");
    // A commit or a staged change moves these; an unstaged edit of another crate does not rebuild
    // this one, which is why the CUDA build passes QE_METER_REV itself.
    for f in ["../../.git/HEAD", "../../.git/index"] {
        if std::path::Path::new(f).exists() {
            println!("cargo::rerun-if-changed={f}");
        }
    }
    let rev = std::env::var("QE_METER_REV")
        .ok()
        .filter(|r| !r.is_empty())
        .or_else(git_rev);
    let version = env!("CARGO_PKG_VERSION");
    let build = match rev {
        Some(r) => format!("{version}+{r}"),
        None => version.to_string(),
    };
    println!("cargo::rustc-env=QE_METER_BUILD={build}");
}

fn git_rev() -> Option<String> {
    let out = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let rev = out(&["rev-parse", "--short=12", "HEAD"])?;
    let dirty = out(&["status", "--porcelain", "--untracked-files=no"])?;
    Some(if dirty.is_empty() {
        rev
    } else {
        format!("{rev}-dirty")
    })
}
