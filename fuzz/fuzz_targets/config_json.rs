//! The JSON side files of a Hugging Face model directory: `config.json` through
//! `modelfile::config_model_type_bytes`, and `model.safetensors.index.json` (with the
//! same text as `config.json`) through `modelfile::inspect` on a scratch directory that
//! holds one small valid shard.
//!
//! Asserts besides "no panic": the `model_type` read is the string the JSON holds there; an
//! index may only name plain file names inside the directory, so an accepted directory was read
//! from its one real shard.
#![no_main]

use libfuzzer_sys::fuzz_target;
use modelfile::{config_model_type_bytes, inspect};
use std::path::PathBuf;
use std::sync::OnceLock;

/// A scratch directory with `model.safetensors`: one F16 tensor of 2 × 2.
fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = scratch_root().join(format!("qe-fuzz-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("scratch dir");
        let header = br#"{"w":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]}}"#;
        let mut f = (header.len() as u64).to_le_bytes().to_vec();
        f.extend_from_slice(header);
        f.extend_from_slice(&[0u8; 8]);
        std::fs::write(d.join("model.safetensors"), f).expect("write shard");
        d
    })
}

fuzz_target!(|data: &[u8]| {
    let read = config_model_type_bytes(data);
    let strict: Option<serde_json::Value> = serde_json::from_slice(data).ok();
    if let (Some(serde_json::Value::Object(m)), Ok(t)) = (&strict, &read) {
        // (A key given twice is refused by the typed read and kept last by `Value`: only
        // compare what both read.)
        assert_eq!(m.get("model_type").and_then(|v| v.as_str()), t.as_deref());
    }
    if let Ok(Some(t)) = &read {
        // Lossily: serde_json does not check the UTF-8 of strings it skips (keys other than
        // `model_type`), so a config with a bad byte there is read, as it should be.
        // Nor does it range-check numbers it skips: `1e400` in another key is read, as it should
        // be (found by this target after 2 min), while `Value` refuses it — no oracle then.
        match serde_json::from_str::<serde_json::Value>(&String::from_utf8_lossy(data)) {
            Ok(v) => assert_eq!(
                v.get("model_type").and_then(|v| v.as_str()),
                Some(t.as_str())
            ),
            Err(e) => assert!(e.to_string().contains("number out of range"), "{e}"),
        }
    }

    let dir = scratch();
    std::fs::write(dir.join("model.safetensors.index.json"), data).expect("write index");
    std::fs::write(dir.join("config.json"), data).expect("write config");
    if let Ok(info) = inspect(dir) {
        assert_eq!(info.params, 4, "a directory with one 2 × 2 shard");
        assert_eq!(info.architecture, read.ok().flatten());
    }
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
