//! With the `cuda` feature, every kernel file is compiled with `nvcc -ptx -arch=sm_90` before the
//! crate (candle's kernels are compiled the same way), so a kernel that does not compile, or a
//! launcher's kernel that no file exports, fails the build instead of a run on the card. The PTX
//! used at run time is still NVRTC's (see `src/kernels/mod.rs`); this is the check.

#[path = "src/kernels/launch.rs"]
#[allow(dead_code)]
mod launch;

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=kernels");
    println!("cargo::rerun-if-changed=src/kernels/launch.rs");
    println!("cargo::rerun-if-env-changed=NVCC");
    if std::env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let prelude = out.join("qe_launch.cuh");
    std::fs::write(&prelude, launch::prelude()).expect("writing the launch prelude");
    let nvcc = std::env::var("NVCC").unwrap_or_else(|_| "nvcc".into());
    let mut ptx_all = String::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir("kernels")
        .expect("reading kernels/")
        .map(|e| e.expect("reading kernels/").path())
        .filter(|p| p.extension().is_some_and(|e| e == "cu"))
        .collect();
    files.sort();
    for cu in &files {
        ptx_all.push_str(&compile(&nvcc, cu, &prelude, &out));
    }
    let missing: Vec<String> = launch::kernel_names()
        .into_iter()
        .filter(|k| !ptx_all.contains(&format!(".entry {k}(")))
        .collect();
    if !missing.is_empty() {
        panic!(
            "kernels/*.cu export no kernel named: {}",
            missing.join(", ")
        );
    }
}

/// `nvcc -ptx` of one kernel file with the launch constants ahead; its PTX, or the build fails
/// with nvcc's words.
fn compile(nvcc: &str, cu: &Path, prelude: &Path, out: &Path) -> String {
    let ptx = out.join(
        cu.with_extension("ptx")
            .file_name()
            .expect("a .cu file name"),
    );
    let res = Command::new(nvcc)
        .args(["-ptx", "-arch=sm_90", "-Ikernels", "-include"])
        .arg(prelude)
        .arg(cu)
        .arg("-o")
        .arg(&ptx)
        .output()
        .unwrap_or_else(|e| panic!("running {nvcc} (set NVCC or put nvcc on PATH): {e}"));
    if !res.status.success() {
        panic!(
            "nvcc could not compile {}:\n{}{}",
            cu.display(),
            String::from_utf8_lossy(&res.stdout),
            String::from_utf8_lossy(&res.stderr)
        );
    }
    std::fs::read_to_string(&ptx).expect("reading nvcc's PTX")
}
