//! Files the CLI tests write as model files.

use std::path::Path;

/// The smallest safetensors file: one F16 tensor `w` of 2 × 2 zeros (a header length, the JSON
/// header, the 8 data bytes), for arms whose file is only read for its size and dtype.
pub fn tiny_safetensors(path: &Path) {
    let header = br#"{"w":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]}}"#;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header);
    bytes.extend_from_slice(&[0u8; 8]);
    std::fs::write(path, bytes).unwrap();
}
