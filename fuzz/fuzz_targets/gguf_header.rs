//! The GGUF header parser, `modelfile::inspect_gguf_bytes`, on arbitrary bytes (what
//! `measure --server-cmd` reads from a model file while the server loads it).
//!
//! Asserts besides "no panic": an accepted header is version 2 or 3, its length lies within the
//! bytes, `params` is the sum of the tensors' element counts, every tensor has at most 4
//! dimensions; any prefix of the bytes that ends before the header does is refused as
//! truncated, never misread; the bytes after the header do not change what is read.
#![no_main]

use libfuzzer_sys::fuzz_target;
use modelfile::{inspect_gguf_bytes, GgufProblem, ModelFileError};

fuzz_target!(|data: &[u8]| {
    let Ok(h) = inspect_gguf_bytes(data) else {
        return;
    };
    assert!(h.version == 2 || h.version == 3);
    assert!(h.len as usize <= data.len());
    let sum: u64 = h.tensors.iter().map(|t| t.elements()).sum();
    assert_eq!(sum, h.params);
    assert!(h.tensors.iter().all(|t| t.dims.len() <= 4));
    // Exactly the header's bytes read the same; one byte fewer is a truncation.
    let end = h.len as usize;
    assert_eq!(inspect_gguf_bytes(&data[..end]).ok().as_ref(), Some(&h));
    if end > 0 {
        match inspect_gguf_bytes(&data[..end - 1]) {
            Err(ModelFileError::Gguf {
                problem: GgufProblem::Truncated { .. },
                ..
            }) => {}
            other => panic!("a header cut one byte short reads as {other:?}"),
        }
    }
});
