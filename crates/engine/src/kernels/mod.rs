//! The CUDA sources of the graph engine's ops, one `.cu` file per kernel family under
//! `crates/engine/kernels/` (shared device code in `.cuh` headers), and the one loader that
//! compiles them with NVRTC at first use on a GPU. The CUDA build checks every file with `nvcc`
//! first (`build.rs`), so a kernel that does not compile fails the build, not a run on the card.
//!
//! The kernels need no CUDA headers (halves move as 16-bit words), so NVRTC compiles the text as
//! it is: the loader inlines each `#include "x.cuh"` once and puts the [`launch`] constants ahead.

pub mod launch;

/// Every kernel file, in the order the module holds them, with its text.
pub const FILES: [(&str, &str); 8] = [
    ("common.cuh", include_str!("../../kernels/common.cuh")),
    ("rotary.cuh", include_str!("../../kernels/rotary.cuh")),
    ("rope.cu", include_str!("../../kernels/rope.cu")),
    ("attention.cu", include_str!("../../kernels/attention.cu")),
    ("norm.cu", include_str!("../../kernels/norm.cu")),
    ("swiglu.cu", include_str!("../../kernels/swiglu.cu")),
    ("gemv.cu", include_str!("../../kernels/gemv.cu")),
    ("kv.cu", include_str!("../../kernels/kv.cu")),
];

/// The whole module's source: the constants, then every `.cu` file with its headers inlined once
/// (`#pragma once` is for `nvcc`; here a header already inlined is skipped).
pub fn source() -> String {
    let mut out = launch::prelude();
    let mut seen: Vec<&str> = Vec::new();
    for (name, _) in FILES.iter().filter(|(n, _)| n.ends_with(".cu")) {
        inline(name, &mut seen, &mut out);
    }
    out
}

fn text(name: &str) -> &'static str {
    FILES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .unwrap_or_else(|| panic!("kernels/{name} is not in kernels::FILES"))
}

fn inline<'a>(name: &'a str, seen: &mut Vec<&'a str>, out: &mut String) {
    if seen.contains(&name) {
        return;
    }
    seen.push(name);
    for line in text(name).lines() {
        match included(line) {
            Some(h) => inline(h, seen, out),
            None if line.trim() == "#pragma once" => {}
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
}

/// The header a `#include "x.cuh"` line names.
fn included(line: &str) -> Option<&'static str> {
    let h = line.trim().strip_prefix("#include")?.trim();
    let h = h.strip_prefix('"')?.strip_suffix('"')?;
    FILES.iter().find(|(n, _)| *n == h).map(|(n, _)| *n)
}

#[cfg(feature = "cuda")]
mod load {
    use candle_core::{bail, Result};
    use std::sync::OnceLock;

    /// The name of the module in candle's custom-module cache.
    pub const MODULE: &str = "quantenergy_kernels";

    /// The PTX of [`super::source`], compiled once per process by NVRTC.
    pub fn ptx() -> Result<&'static str> {
        static PTX: OnceLock<std::result::Result<String, String>> = OnceLock::new();
        match PTX.get_or_init(|| {
            candle_core::cuda_backend::cudarc::nvrtc::compile_ptx(super::source())
                .map(|p| p.to_src())
                .map_err(|e| format!("{e:?}"))
        }) {
            Ok(p) => Ok(p.as_str()),
            Err(e) => bail!("NVRTC could not compile the engine's kernels: {e}"),
        }
    }
}

#[cfg(feature = "cuda")]
pub use load::{ptx, MODULE};

/// The kernel `$name` on the CUDA device `$dev`, loaded once per device through candle's cache
/// (so it runs on candle's stream and is captured into a CUDA graph with the rest of the step).
/// A macro because candle does not name the function type it returns.
#[cfg(feature = "cuda")]
#[macro_export]
macro_rules! kernel_func {
    ($dev:expr, $name:expr) => {
        $dev.get_or_load_custom_func($name, $crate::kernels::MODULE, $crate::kernels::ptx()?)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every header is inlined once, before the first file that includes it, and no `#include`
    /// or `#pragma once` is left for NVRTC (which has no files to read).
    #[test]
    fn the_source_inlines_each_header_once() {
        let s = source();
        assert!(s.starts_with("#define NT 1024\n"));
        assert!(!s.contains("#include") && !s.contains("#pragma once"));
        assert_eq!(s.matches("float warp_sum(").count(), 1);
        assert_eq!(s.matches("float head_elem(").count(), 1);
        assert!(s.find("float warp_sum(") < s.find("float head_elem("));
    }

    /// Every launcher's kernel is instantiated for every dtype (pair) it is launched with: the
    /// names the launchers build are the macros' `<family>_<a>[_<c>]`.
    #[test]
    fn every_kernel_family_is_instantiated_for_its_dtypes() {
        let s = source();
        let pairs = "X(f32, 0, f32, 0) X(f32, 0, f16, 1) X(f32, 0, bf16, 2)";
        assert!(s.contains(pairs));
        for (family, list) in [
            ("rope_kv_##a##_##c(", "QE_FOR_DTYPE_PAIRS(QE_ROPE_KV)"),
            (
                "__launch_bounds__(NT, 1) decode_attn_##a##_##c(",
                "QE_FOR_DTYPE_PAIRS(QE_DECODE_ATTN)",
            ),
            (
                "__launch_bounds__(NS, 1) decode_attn_split_##a##_##c(",
                "QE_FOR_DTYPE_PAIRS(QE_DECODE_ATTN)",
            ),
            ("swiglu_##a(", "QE_FOR_DTYPES(QE_SWIGLU)"),
            (
                "__launch_bounds__(NT, 1) add_rms_norm_##a(",
                "QE_FOR_DTYPES(QE_ADD_RMS_NORM)",
            ),
            ("gemv_##a(", "QE_FOR_HALF_DTYPES(QE_GEMV)"),
        ] {
            assert!(s.contains(family), "{family}");
            assert!(s.contains(list), "{list}");
        }
        for name in ["rope_step(", "kv_write_u16(", "kv_write_u32(", "add_u32("] {
            assert!(s.contains(&format!("void {name}")), "{name}");
        }
        // The matvec's 16-bit loads have no F32 form: that falls back to cuBLAS.
        assert!(s.contains("#define QE_FOR_HALF_DTYPES(X) X(f16, 1) X(bf16, 2)\n"));
        assert!(!launch::kernel_names().contains(&"gemv_f32".to_string()));
        // For checking the source with nvcc (no GPU needed): QE_DUMP_KERNELS=path.cu.
        if let Some(p) = std::env::var_os("QE_DUMP_KERNELS") {
            std::fs::write(p, s).unwrap();
        }
    }
}
