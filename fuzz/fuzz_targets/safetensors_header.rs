//! The safetensors header reader, `modelfile::inspect_safetensors_bytes` (the pure part
//! of `inspect` on a `.safetensors` file), on arbitrary bytes: an 8-byte little-endian header
//! length, the JSON header, then the data the header's `data_offsets` point into.
//!
//! Asserts besides "no panic": an accepted file's `params` is the sum of `weight_types`'
//! element counts (each type counted once, largest first), `bytes` is the input's length, and the
//! same bytes written to a `.safetensors` file read the same through `inspect`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use modelfile::{inspect, inspect_safetensors_bytes, ModelFormat};
use std::path::PathBuf;
use std::sync::OnceLock;

fn scratch() -> &'static std::path::Path {
    static DIR: OnceLock<std::path::PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = scratch_root().join(format!("qe-fuzz-st-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("scratch dir");
        d
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(info) = inspect_safetensors_bytes(data) else {
        return;
    };
    assert_eq!(info.format, ModelFormat::Safetensors);
    assert_eq!(info.bytes, data.len() as u64);
    let sum: u64 = info.weight_types.iter().map(|(_, n)| n).sum();
    assert_eq!(sum, info.params);
    assert!(info.weight_types.windows(2).all(|w| w[0].1 >= w[1].1));
    // The file path reads the same (architecture comes from a config.json, absent here).
    let path = scratch().join("model.safetensors");
    std::fs::write(&path, data).expect("write scratch file");
    let from_file = inspect(&path).expect("the same bytes from a file");
    assert_eq!(from_file.params, info.params);
    assert_eq!(from_file.weight_types, info.weight_types);
    assert_eq!(from_file.precision, info.precision);
});

/// `/dev/shm` where there is one (these targets write a file per input), else the temp dir.
fn scratch_root() -> PathBuf {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}
