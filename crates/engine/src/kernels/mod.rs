//! The CUDA sources of the graph engine's ops, one `.cu` file per kernel family under
//! `crates/engine/kernels/` (shared device code in `.cuh` headers), and the one loader that
//! compiles them with NVRTC at first use on a GPU. The CUDA build checks every file with `nvcc`
//! first (`build.rs`), so a kernel that does not compile fails the build, not a run on the card.
//!
//! The kernels need no CUDA headers (halves move as 16-bit words), so NVRTC compiles the text as
//! it is: the loader inlines each `#include "x.cuh"` once and puts the [`launch`] constants ahead.

pub mod arch;
pub mod launch;

/// Every kernel file, in the order the module holds them, with its text.
pub const FILES: [(&str, &str); 12] = [
    ("common.cuh", include_str!("../../kernels/common.cuh")),
    ("rotary.cuh", include_str!("../../kernels/rotary.cuh")),
    ("attention.cuh", include_str!("../../kernels/attention.cuh")),
    ("rope.cu", include_str!("../../kernels/rope.cu")),
    ("attention.cu", include_str!("../../kernels/attention.cu")),
    (
        "attention_mma.cu",
        include_str!("../../kernels/attention_mma.cu"),
    ),
    ("norm.cu", include_str!("../../kernels/norm.cu")),
    ("swiglu.cu", include_str!("../../kernels/swiglu.cu")),
    ("gemv.cu", include_str!("../../kernels/gemv.cu")),
    ("kv.cu", include_str!("../../kernels/kv.cu")),
    ("softmax.cu", include_str!("../../kernels/softmax.cu")),
    ("argmax.cu", include_str!("../../kernels/argmax.cu")),
];

/// The preprocessor lines the loader resolves itself: NVRTC has no files to read.
const INCLUDE: &str = "#include";
const PRAGMA_ONCE: &str = "#pragma once";

/// The whole module's source: the constants, the kernels' tuning knobs, then every `.cu` file with
/// its headers inlined once (`#pragma once` is for `nvcc`; here a header already inlined is
/// skipped).
pub fn source() -> String {
    assemble().0
}

/// The `#define`s of the knobs compiled into the kernels (the environment is read once).
fn tuning() -> String {
    use crate::ops::attention::{ATTN_BLOCKS_PER_SM, ATTN_HOIST, ATTN_PASSES, ATTN_PREFETCH};
    format!(
        "#define QE_ATTN_U {}\n#define QE_ATTN_BLOCKS_PER_SM {}\n#define QE_ATTN_PREFETCH {}\n\
         #define QE_ATTN_HOIST {}\n",
        ATTN_PASSES.get(),
        ATTN_BLOCKS_PER_SM.get(),
        ATTN_PREFETCH.get(),
        ATTN_HOIST.get()
    )
}

/// [`source`], and the files in the order it inlined them (each once).
fn assemble() -> (String, Vec<&'static str>) {
    let mut out = launch::prelude() + &tuning();
    let mut seen: Vec<&'static str> = Vec::new();
    for (name, _) in FILES.iter().filter(|(n, _)| n.ends_with(".cu")) {
        inline(name, &mut seen, &mut out);
    }
    (out, seen)
}

fn text(name: &str) -> &'static str {
    FILES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .unwrap_or_else(|| panic!("kernels/{name} is not in kernels::FILES"))
}

fn inline(name: &'static str, seen: &mut Vec<&'static str>, out: &mut String) {
    if seen.contains(&name) {
        return;
    }
    seen.push(name);
    for line in text(name).lines() {
        match included(line) {
            Some(h) => inline(h, seen, out),
            None if line.trim() == PRAGMA_ONCE => {}
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
}

/// The header a `#include "x.cuh"` line names.
fn included(line: &str) -> Option<&'static str> {
    let h = line.trim().strip_prefix(INCLUDE)?.trim();
    let h = h.strip_prefix('"')?.strip_suffix('"')?;
    FILES.iter().find(|(n, _)| *n == h).map(|(n, _)| *n)
}

#[cfg(feature = "cuda")]
mod load {
    use candle_core::cuda_backend::cudarc::nvrtc;
    use candle_core::cuda_backend::{CudaDevice, DeviceId};
    use candle_core::{bail, Result};
    use std::sync::Mutex;

    /// The name of the module in candle's custom-module cache.
    pub const MODULE: &str = "quantenergy_kernels";

    /// The PTX of [`super::source`] for the device's own architecture, compiled by NVRTC at a
    /// device's first launch (every launch asks: a lookup): the tensor-core kernels need sm_80's
    /// instructions, which NVRTC's default target lacks.
    pub fn ptx(dev: &CudaDevice) -> Result<&'static str> {
        type Built = std::result::Result<&'static str, String>;
        static PTX: Mutex<Vec<(DeviceId, Built)>> = Mutex::new(Vec::new());
        let mut done = PTX.lock().unwrap_or_else(|e| e.into_inner());
        let built = match done.iter().find(|(id, _)| *id == dev.id()) {
            Some((_, p)) => p.clone(),
            None => {
                let cc = super::arch::compute_capability(dev)?;
                let arch: &'static str = Box::leak(super::arch::target(cc).into_boxed_str());
                let opts = nvrtc::CompileOptions {
                    arch: Some(arch),
                    ..Default::default()
                };
                let p = nvrtc::compile_ptx_with_opts(super::source(), opts)
                    .map(|p| &*Box::leak(p.to_src().into_boxed_str()))
                    .map_err(|e| format!("{e:?} (target {arch})"));
                done.push((dev.id(), p.clone()));
                p
            }
        };
        match built {
            Ok(p) => Ok(p),
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
        $dev.get_or_load_custom_func($name, $crate::kernels::MODULE, $crate::kernels::ptx(&$dev)?)
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// The identifiers of a source text (runs of letters, digits and `_`).
    fn identifiers(s: &str) -> HashSet<&str> {
        s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .collect()
    }

    /// A file's own lines, as [`source`] copies them (without the lines the loader resolves).
    fn body(name: &str) -> String {
        text(name)
            .lines()
            .filter(|l| included(l).is_none() && l.trim() != PRAGMA_ONCE)
            .map(|l| format!("{l}\n"))
            .collect()
    }

    /// The tensor-core kernels' bodies are compiled only for sm_80 and newer targets (NVRTC's
    /// default, sm_75, has no mma.sync m16n8k16), so the module builds for any device.
    #[test]
    fn the_tensor_core_kernels_need_sm_80() {
        let s = source();
        let guard = s.find("__CUDA_ARCH__ >= 800").expect("the sm_80 guard");
        let mma = s
            .find("mma.sync.aligned.m16n8k16")
            .expect("the mma instruction");
        assert!(guard < mma, "the guard comes before the instruction");
    }

    /// The kernels' tuning knobs are defined ahead of the files, at their defaults when unset.
    #[test]
    fn the_source_defines_the_tuning_knobs() {
        let s = source();
        for line in [
            "#define QE_ATTN_U 6\n",
            "#define QE_ATTN_BLOCKS_PER_SM 1\n",
            "#define QE_ATTN_PREFETCH 0\n",
            "#define QE_ATTN_HOIST 0\n",
        ] {
            let at = s.find(line).unwrap_or_else(|| panic!("{line}"));
            assert!(
                at < s.find("extern \"C\"").unwrap(),
                "{line} after a kernel"
            );
        }
    }

    /// Every file is inlined once (a header where the first file that includes it names it), and
    /// no include or `#pragma once` line is left for NVRTC (which has no files to read).
    #[test]
    fn the_source_inlines_each_header_once() {
        let (s, order) = assemble();
        assert!(s.starts_with(&launch::prelude()));
        let mut names: Vec<&str> = FILES.iter().map(|(n, _)| *n).collect();
        let mut inlined = order.clone();
        names.sort_unstable();
        inlined.sort_unstable();
        assert_eq!(inlined, names, "every file exactly once");
        let copied: usize = order.iter().map(|n| body(n).len()).sum();
        let head = launch::prelude().len() + tuning().len();
        assert_eq!(s.len(), head + copied, "no file twice");
        let left = s
            .lines()
            .filter(|l| l.trim_start().starts_with(INCLUDE) || l.trim() == PRAGMA_ONCE);
        assert_eq!(left.count(), 0);
    }

    /// Every entry point a launcher loads is in the source: by its own name, or, for a kernel
    /// instantiated per dtype (`<family>_<a>[_<c>]`), as the `<family>_` the instantiating macro
    /// pastes the dtypes onto.
    #[test]
    fn every_kernel_name_is_in_the_source() {
        let s = source();
        let ids = identifiers(&s);
        for dtype in launch::DTYPES {
            assert!(ids.contains(dtype), "{dtype}");
        }
        for name in launch::kernel_names() {
            let mut family = name.as_str();
            while let Some(f) = launch::DTYPES
                .iter()
                .find_map(|d| family.strip_suffix(d)?.strip_suffix('_'))
            {
                family = f;
            }
            let found = if family == name {
                ids.contains(family)
            } else {
                ids.contains(format!("{family}_").as_str())
            };
            assert!(found, "{name}");
        }
        // The matvec's 16-bit loads have no F32 form: that falls back to cuBLAS.
        let names = launch::kernel_names();
        assert!(names.iter().any(|n| n == "gemv_f16") && names.iter().any(|n| n == "gemv_bf16"));
        assert!(!names.iter().any(|n| n == "gemv_f32"));
        // For checking the source with nvcc (no GPU needed): QE_DUMP_KERNELS=path.cu.
        if let Some(p) = std::env::var_os("QE_DUMP_KERNELS") {
            std::fs::write(p, s).unwrap();
        }
    }
}
