//! The CUDA sources of the graph engine's ops, one `.cu` file per kernel family under
//! `crates/engine/kernels/` (shared device code in `.cuh` headers), and the loader that compiles
//! them with NVRTC at first use on a GPU, as two modules ([`Module`]). The CUDA build checks every file with `nvcc`
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

/// The modules the loader builds. `Main` holds every kernel but the tensor-core attention and is
/// compiled once a process for NVRTC's default target (sm_75's PTX, which every device since runs);
/// `TensorCores` holds `attention_mma.cu`, compiled for the device's own architecture (its
/// mma.sync m16n8k16 needs sm_80) and only when a launch asks for one of its kernels, so that a
/// process that never does pays nothing for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Module {
    /// Every kernel but the tensor-core attention.
    Main,
    /// `attention_mma.cu`'s kernels.
    TensorCores,
}

/// The file of the [`Module::TensorCores`] module.
const TENSOR_CORE_FILE: &str = "attention_mma.cu";

impl Module {
    /// Its name in candle's custom-module cache.
    pub fn name(self) -> &'static str {
        match self {
            Module::Main => "quantenergy_kernels",
            Module::TensorCores => "quantenergy_kernels_mma",
        }
    }

    /// The module that exports kernel `name`.
    pub fn of(name: &str) -> Module {
        if name.starts_with("decode_attn_mma") {
            Module::TensorCores
        } else {
            Module::Main
        }
    }

    /// Its `.cu` files, in [`FILES`]' order.
    fn files(self) -> impl Iterator<Item = &'static str> {
        FILES
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| n.ends_with(".cu"))
            .filter(move |n| (*n == TENSOR_CORE_FILE) == (self == Module::TensorCores))
    }
}

/// The main module's source: the constants, the kernels' tuning knobs, then every `.cu` file with
/// its headers inlined once (`#pragma once` is for `nvcc`; here a header already inlined is
/// skipped).
pub fn source() -> String {
    module_source(Module::Main)
}

/// A module's source, built as [`source`] is.
pub fn module_source(m: Module) -> String {
    assemble(m).0
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

/// A module's source, and the files in the order it inlined them (each once).
fn assemble(m: Module) -> (String, Vec<&'static str>) {
    let mut out = launch::prelude() + &tuning();
    let mut seen: Vec<&'static str> = Vec::new();
    for name in m.files() {
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
    use super::Module;
    use candle_core::cuda_backend::cudarc::nvrtc;
    use candle_core::cuda_backend::{CudaDevice, DeviceId};
    use candle_core::{bail, Result};
    use std::sync::{Mutex, OnceLock};

    type Built = std::result::Result<&'static str, String>;

    /// The PTX of module `m` for `dev`, compiled by NVRTC once a process (every launch asks: a
    /// lookup). The tensor-core module is compiled once per architecture, looked up by device,
    /// then by compute capability, since each opened device is a new one to candle.
    pub fn ptx(dev: &CudaDevice, m: Module) -> Result<&'static str> {
        let built = match m {
            Module::Main => {
                static MAIN: OnceLock<Built> = OnceLock::new();
                MAIN.get_or_init(|| compile(m, None)).clone()
            }
            Module::TensorCores => tensor_core_ptx(dev)?,
        };
        match built {
            Ok(p) => Ok(p),
            Err(e) => bail!("NVRTC could not compile the engine's kernels: {e}"),
        }
    }

    fn tensor_core_ptx(dev: &CudaDevice) -> Result<Built> {
        static BY_DEVICE: Mutex<Vec<(DeviceId, Built)>> = Mutex::new(Vec::new());
        static BY_ARCH: Mutex<Vec<((i32, i32), Built)>> = Mutex::new(Vec::new());
        let mut devices = BY_DEVICE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, p)) = devices.iter().find(|(id, _)| *id == dev.id()) {
            return Ok(p.clone());
        }
        let cc = super::arch::compute_capability(dev)?;
        let mut archs = BY_ARCH.lock().unwrap_or_else(|e| e.into_inner());
        let p = match archs.iter().find(|(c, _)| *c == cc) {
            Some((_, p)) => p.clone(),
            None => {
                let p = compile(Module::TensorCores, Some(super::arch::target(cc)));
                archs.push((cc, p.clone()));
                p
            }
        };
        devices.push((dev.id(), p.clone()));
        Ok(p)
    }

    /// NVRTC's PTX of module `m` for `arch` (NVRTC's default target without one), kept for the
    /// process.
    fn compile(m: Module, arch: Option<String>) -> Built {
        let arch: Option<&'static str> = arch.map(|a| &*Box::leak(a.into_boxed_str()));
        let opts = nvrtc::CompileOptions {
            arch,
            ..Default::default()
        };
        nvrtc::compile_ptx_with_opts(super::module_source(m), opts)
            .map(|p| &*Box::leak(p.to_src().into_boxed_str()))
            .map_err(|e| format!("{e:?} ({:?}, target {})", m, arch.unwrap_or("default")))
    }
}

#[cfg(feature = "cuda")]
pub use load::ptx;

/// The kernel `$name` on the CUDA device `$dev`, from the module that exports it ([`Module::of`]),
/// loaded once per device through candle's cache
/// (so it runs on candle's stream and is captured into a CUDA graph with the rest of the step).
/// A macro because candle does not name the function type it returns.
#[cfg(feature = "cuda")]
#[macro_export]
macro_rules! kernel_func {
    ($dev:expr, $name:expr) => {{
        let name: &str = $name;
        let module = $crate::kernels::Module::of(name);
        $dev.get_or_load_custom_func(name, module.name(), $crate::kernels::ptx(&$dev, module)?)
    }};
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

    /// The tensor-core kernels are their own module, whose bodies are compiled only for sm_80 and
    /// newer targets (NVRTC's default, sm_75, has no mma.sync m16n8k16); the main module, which
    /// every device runs, has none.
    #[test]
    fn the_tensor_core_kernels_are_their_own_module_for_sm_80() {
        let s = module_source(Module::TensorCores);
        let guard = s.find("__CUDA_ARCH__ >= 800").expect("the sm_80 guard");
        let mma = s
            .find("mma.sync.aligned.m16n8k16")
            .expect("the mma instruction");
        assert!(guard < mma, "the guard comes before the instruction");
        assert!(!source().contains("mma.sync"));
        assert_eq!(
            Module::of("decode_attn_mma128_f32_f16"),
            Module::TensorCores
        );
        assert_eq!(Module::of("decode_attn_split128_f32_f16"), Module::Main);
        assert_ne!(Module::Main.name(), Module::TensorCores.name());
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

    /// Each module inlines each of its files once (a header where the first file that includes it
    /// names it), the two together every file, and no include or `#pragma once` line is left for
    /// NVRTC (which has no files to read).
    #[test]
    fn the_source_inlines_each_header_once() {
        let mut all: Vec<&str> = Vec::new();
        for m in [Module::Main, Module::TensorCores] {
            let (s, order) = assemble(m);
            assert!(s.starts_with(&launch::prelude()));
            let copied: usize = order.iter().map(|n| body(n).len()).sum();
            let head = launch::prelude().len() + tuning().len();
            assert_eq!(s.len(), head + copied, "no file twice in {m:?}");
            let left = s
                .lines()
                .filter(|l| l.trim_start().starts_with(INCLUDE) || l.trim() == PRAGMA_ONCE);
            assert_eq!(left.count(), 0);
            all.extend(order);
        }
        let mut names: Vec<&str> = FILES.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all, names, "every file in a module");
    }

    /// Every entry point a launcher loads is in the source: by its own name, or, for a kernel
    /// instantiated per dtype (`<family>_<a>[_<c>]`), as the `<family>_` the instantiating macro
    /// pastes the dtypes onto.
    #[test]
    fn every_kernel_name_is_in_the_source() {
        let (s, mma) = (source(), module_source(Module::TensorCores));
        let (main_ids, mma_ids) = (identifiers(&s), identifiers(&mma));
        for dtype in launch::DTYPES {
            assert!(main_ids.contains(dtype), "{dtype}");
        }
        for name in launch::kernel_names() {
            let ids = match Module::of(&name) {
                Module::Main => &main_ids,
                Module::TensorCores => &mma_ids,
            };
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
