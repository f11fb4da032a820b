//! The bytes of weights a decode step reads, counted from what an arm loads (the arithmetic is
//! [`meter::roofline`]).
//!
//! Both engines build from the same [`ArmWeights`] and hold the same tensors (the graph engine
//! concatenates q/k/v and gate/up, which changes no byte count):
//!
//! * float weights: every tensor the models `get` from the `VarBuilder`, cast to its dtype —
//!   elements × dtype size, norms and biases included. A tied head (Qwen2: no `lm_head.weight`;
//!   Llama: the config's flag) multiplies by the embedding matrix itself.
//! * GGUF weights: candle keeps a matrix as `QMatMul` blocks (its stored bytes), except that
//!   F32/F16/BF16 matrices are dequantized to F32 at load (`QMatMul::from_arc`); norms and biases
//!   are dequantized to F32; the token embedding is dequantized to F32 for the lookup, and a tied
//!   head reads the stored `token_embd.weight` blocks (a second copy).

use super::*;
use meter::roofline::{DecodeWeightBytes, EmbeddingRead};

/// The Hugging Face name of the token-embedding table.
const EMBED: &str = "model.embed_tokens.weight";

/// The tensor names and shapes the engines load, with the head tied or not.
fn loaded_tensors(s: &ModelShape, head_tied: bool) -> Vec<(String, Vec<usize>)> {
    let mut shape = s.clone();
    shape.tied_embeddings = head_tied;
    hf_tensor_shapes(&shape)
}

/// Float weights of `dt`: every loaded tensor's elements × dtype size; the embedding table one
/// row per sequence, or whole when the head is tied to it.
pub(crate) fn float_weight_bytes(s: &ModelShape, dt: DType, head_tied: bool) -> DecodeWeightBytes {
    let elem = dt.size_in_bytes() as u64;
    let (mut other, mut table) = (0u64, 0u64);
    for (name, dims) in loaded_tensors(s, head_tied) {
        let bytes = dims.iter().product::<usize>() as u64 * elem;
        if name == EMBED {
            table = bytes;
        } else {
            other += bytes;
        }
    }
    DecodeWeightBytes::new(
        other,
        if head_tied {
            EmbeddingRead::TiedShared { table_bytes: table }
        } else {
            EmbeddingRead::Untied {
                row_bytes: s.hidden as u64 * elem,
            }
        },
    )
}

/// Bytes of a GGUF tensor as candle holds it: F32 when dequantized (norms, biases, and float
/// matrices, which `QMatMul` dequantizes), else its block storage.
pub(crate) fn held_gguf_bytes(dtype: GgmlDType, elems: usize, dequantized: bool) -> u64 {
    let float = matches!(dtype, GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16);
    if dequantized || float {
        elems as u64 * 4
    } else {
        (elems / dtype.block_size() * dtype.type_size()) as u64
    }
}

/// GGUF weights: every tensor the quantized models load, as [`held_gguf_bytes`] says; the
/// lookup reads one F32 row per sequence, a tied head (no `output.weight`) the stored table.
/// `None` when a tensor the models load is missing (the load fails on it anyway).
pub(crate) fn gguf_weight_bytes(
    s: &ModelShape,
    ct: &gguf_file::Content,
) -> Option<DecodeWeightBytes> {
    let tied = !ct.tensor_infos.contains_key("output.weight");
    let (mut other, mut table) = (0u64, 0u64);
    for (name, dims) in loaded_tensors(s, tied) {
        let info = ct.tensor_infos.get(&gguf_name(&name))?;
        let bytes = held_gguf_bytes(info.ggml_dtype, info.shape.elem_count(), dims.len() == 1);
        if name == EMBED {
            table = bytes;
        } else {
            other += bytes;
        }
    }
    let row_bytes = s.hidden as u64 * 4;
    Some(DecodeWeightBytes::new(
        other,
        if tied {
            EmbeddingRead::TiedCopy {
                table_bytes: table,
                row_bytes,
            }
        } else {
            EmbeddingRead::Untied { row_bytes }
        },
    ))
}

impl ArmWeights {
    /// The bytes of weights a decode step of the model built from these weights reads.
    pub(crate) fn decode_weight_bytes(&self, s: &ModelShape) -> Option<DecodeWeightBytes> {
        match self {
            ArmWeights::Float { vb, .. } => {
                // As the models decide: qwen2.rs ties when the checkpoint has no lm_head,
                // llama.rs follows the config.
                let tied = match s.family.as_str() {
                    "qwen2" => !vb.contains_tensor("lm_head.weight"),
                    _ => s.tied_embeddings,
                };
                Some(float_weight_bytes(s, vb.dtype(), tied))
            }
            ArmWeights::Gguf { content, .. } => gguf_weight_bytes(s, content),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::tiny;

    /// tiny("qwen2") in elements, by hand: per layer q 256·256 + k 128·256 + v 128·256 +
    /// o 256·256 = 196 608, gate/up/down 3 · 512·256 = 393 216, biases 256+128+128 = 512,
    /// norms 2·256 = 512; two layers + the final norm (256). Embedding 512·256 = 131 072 (tied).
    const QWEN2_MATRICES: u64 = 2 * (196_608 + 393_216);
    const QWEN2_SMALL: u64 = 2 * (512 + 512) + 256;
    const TABLE: u64 = 512 * 256;

    #[test]
    fn tiny_qwen2_float_by_hand() {
        let s = tiny("qwen2");
        assert_eq!(QWEN2_MATRICES + QWEN2_SMALL, 1_181_952);
        let f16 = float_weight_bytes(&s, DType::F16, true);
        // Tied: the whole table once (the head), no extra row.
        assert_eq!(f16.step(1), (1_181_952 + 131_072) * 2);
        assert_eq!(f16.step(1), 2_626_048);
        assert_eq!(f16.step(8), 2_626_048);
        assert_eq!(float_weight_bytes(&s, DType::F32, true).step(1), 5_252_096);
        // Untied, the same tensors plus an lm_head; the table reads one row per sequence.
        let untied = float_weight_bytes(&s, DType::BF16, false);
        assert_eq!(untied.per_step, (1_181_952 + TABLE) * 2);
        assert_eq!(untied.per_sequence, 256 * 2);
    }

    #[test]
    fn tiny_llama_float_by_hand() {
        // No biases; untied: lm_head 512·256; one F16 row of 256 per sequence.
        let s = tiny("llama");
        let b = float_weight_bytes(&s, DType::F16, false);
        assert_eq!(
            b.per_step,
            (2 * (196_608 + 393_216 + 512) + 256 + TABLE) * 2
        );
        assert_eq!(b.step(1), 2_624_512);
        assert_eq!(b.step(4), 2_626_048);
        assert_eq!(b.per_token(4), 656_512.0);
    }

    #[test]
    fn gguf_block_bytes_by_hand() {
        // Q4_0: 18 bytes per 32; Q4_K: 144 per 256; Q8_0: 34 per 32; floats dequantized to F32.
        assert_eq!(held_gguf_bytes(GgmlDType::Q4_0, 1024, false), 576);
        assert_eq!(held_gguf_bytes(GgmlDType::Q4K, 1024, false), 576);
        assert_eq!(held_gguf_bytes(GgmlDType::Q8_0, 1024, false), 1088);
        assert_eq!(held_gguf_bytes(GgmlDType::Q6K, 256, false), 210);
        assert_eq!(held_gguf_bytes(GgmlDType::F16, 1024, false), 4096);
        assert_eq!(held_gguf_bytes(GgmlDType::Q4_0, 1024, true), 4096);
    }

    /// Loads one arm's weights through the factory and returns what it recorded.
    fn recorded(f: &mut CandleFactory, name: &str) -> DecodeWeightBytes {
        let p: Precision = name.parse().unwrap();
        f.arm_weights(p).unwrap();
        f.decode_weight_bytes(p).unwrap()
    }

    #[test]
    fn tiny_qwen2_synthetic_arms_by_hand() {
        let mut f = CandleFactory::new(
            WeightSource::Synthetic {
                shape: tiny("qwen2"),
                seed: 5,
            },
            Device::Cpu,
        )
        .unwrap();
        assert_eq!(recorded(&mut f, "F16").step(1), 2_626_048);
        // Q4_0 / Q4_K: every matrix 4.5 bits; biases and norms F32; the tied head reads the
        // quantized table, the lookup one F32 row of its dequantized copy.
        let q4 = QWEN2_MATRICES / 32 * 18 + QWEN2_SMALL * 4 + TABLE / 32 * 18;
        assert_eq!(q4, 746_496);
        for name in ["Q4_0", "Q4_K"] {
            let b = recorded(&mut f, name);
            assert_eq!((b.per_step, b.per_sequence), (q4, 1024), "{name}");
            assert_eq!(b.step(1), 747_520);
        }
        let q8 = recorded(&mut f, "Q8_0");
        assert_eq!(
            q8.step(1),
            QWEN2_MATRICES / 32 * 34 + 9_216 + TABLE / 32 * 34 + 1024
        );
        assert_eq!(q8.step(1), 1_402_880);
        // Quantized from the float arms' weights: the same formats, the same bytes.
        f.quantize_synthetic_floats = true;
        assert_eq!(recorded(&mut f, "Q4_K").step(1), 747_520);
    }

    /// What a GGUF's tensors occupy once candle has read them, tensor by tensor: an independent
    /// count of the loaded storage against [`gguf_weight_bytes`]'s arithmetic.
    fn loaded_gguf_bytes(bytes: Vec<u8>, s: &ModelShape, batch: usize) -> u64 {
        let mut cur = Cursor::new(bytes);
        let ct = gguf_file::Content::read(&mut cur).unwrap();
        let tied = !ct.tensor_infos.contains_key("output.weight");
        let mut total = 0;
        for name in ct.tensor_infos.keys() {
            let qt = ct.tensor(&mut cur, name, &Device::Cpu).unwrap();
            let float = matches!(qt.dtype(), GgmlDType::F32 | GgmlDType::F16);
            let held = if qt.rank() == 1 || float {
                qt.dequantize(&Device::Cpu).unwrap().elem_count() as u64 * 4
            } else {
                qt.storage_size_in_bytes() as u64
            };
            total += match name.as_str() {
                "token_embd.weight" if tied => held + (batch * s.hidden * 4) as u64,
                "token_embd.weight" => (batch * s.hidden * 4) as u64,
                _ => held,
            };
        }
        total
    }

    #[test]
    fn gguf_count_equals_the_loaded_storage() {
        let mut odd = tiny("qwen2");
        (odd.hidden, odd.heads, odd.kv_heads, odd.head_dim) = (96, 2, 1, 48);
        odd.intermediate = 256;
        for s in [tiny("qwen2"), tiny("llama"), odd] {
            for q in [
                GgmlDType::Q4_0,
                GgmlDType::Q4K,
                GgmlDType::Q6K,
                GgmlDType::F16,
            ] {
                let (bytes, _) = synthetic_gguf(&s, q, 3).unwrap();
                let ct = gguf_file::Content::read(&mut Cursor::new(&bytes)).unwrap();
                let b = gguf_weight_bytes(&s, &ct).unwrap();
                for batch in [1, 3] {
                    let want = loaded_gguf_bytes(bytes.clone(), &s, batch);
                    assert_eq!(b.step(batch), want, "{} {q:?} batch {batch}", s.name);
                }
            }
        }
    }

    #[test]
    fn float_count_equals_the_loaded_tensors() {
        for s in [tiny("qwen2"), tiny("llama")] {
            // What VarBuilder::from_tensors holds for a synthetic arm, and what a written HF
            // directory holds: every tensor, elements × dtype size once cast.
            let tensors = synthetic_float_tensors(&s, 1, &Device::Cpu).unwrap();
            let elems: usize = tensors.values().map(|t| t.elem_count()).sum();
            let table = (s.vocab * s.hidden) as u64;
            for dt in [DType::F16, DType::F32] {
                let b = float_weight_bytes(&s, dt, s.tied_embeddings);
                let sz = dt.size_in_bytes() as u64;
                let want = if s.tied_embeddings {
                    elems as u64 * sz
                } else {
                    (elems as u64 - table + s.hidden as u64) * sz
                };
                assert_eq!(b.step(1), want, "{} {dt:?}", s.name);
            }
        }
    }

    #[test]
    fn hf_dir_arms_record_what_they_load() {
        let dir = std::env::temp_dir().join(format!("qe-wb-{}", std::process::id()));
        let s = tiny("qwen2");
        write_synthetic_hf_dir(&s, 3, &dir).unwrap();
        let mut f = CandleFactory::new(WeightSource::HfDir(dir.clone()), Device::Cpu).unwrap();
        let on_disk = candle_core::safetensors::load(dir.join("model.safetensors"), &Device::Cpu)
            .unwrap()
            .values()
            .map(|t| t.elem_count() as u64)
            .sum::<u64>();
        // The checkpoint has no lm_head: tied, every tensor once.
        assert_eq!(recorded(&mut f, "F16").step(1), on_disk * 2);
        assert_eq!(recorded(&mut f, "Q4_0").step(1), 747_520);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn graph_engine_factory_reports_the_same_bytes() {
        let inner = CandleFactory::new(
            WeightSource::Synthetic {
                shape: tiny("llama"),
                seed: 2,
            },
            Device::Cpu,
        )
        .unwrap();
        let mut g = crate::factory(meter::decoder::EngineKind::Graph, inner);
        let p: Precision = "F16".parse().unwrap();
        assert_eq!(g.decode_weight_bytes(p), None, "nothing loaded yet");
        g.load(p).unwrap();
        assert_eq!(g.decode_weight_bytes(p).unwrap().step(1), 2_624_512);
    }

    /// The tensor index a synthetic GGUF arm of `q` would have (1-D tensors F32, matrices the
    /// requested format or their Q8_0 fallback, the table too), without drawing its weights.
    fn synthetic_index(s: &ModelShape, q: GgmlDType) -> gguf_file::Content {
        let tensor_infos = hf_tensor_shapes(s)
            .into_iter()
            .map(|(name, dims)| {
                let ggml_dtype = if dims.len() == 1 {
                    GgmlDType::F32
                } else {
                    format_for(q, &dims)
                };
                let info = gguf_file::TensorInfo {
                    ggml_dtype,
                    shape: dims.into(),
                    offset: 0,
                };
                (gguf_name(&name), info)
            })
            .collect();
        gguf_file::Content {
            magic: gguf_file::VersionedMagic::GgufV3,
            metadata: HashMap::new(),
            tensor_infos,
            tensor_data_offset: 0,
        }
    }

    #[test]
    fn synthetic_index_matches_the_generated_files() {
        let mut odd = tiny("qwen2");
        (odd.hidden, odd.heads, odd.kv_heads, odd.head_dim) = (96, 2, 1, 48);
        odd.intermediate = 256;
        for s in [tiny("qwen2"), tiny("llama"), odd] {
            for q in [GgmlDType::Q4_0, GgmlDType::Q4K, GgmlDType::Q8_0] {
                let (bytes, _) = synthetic_gguf(&s, q, 3).unwrap();
                let ct = gguf_file::Content::read(&mut Cursor::new(&bytes)).unwrap();
                assert_eq!(
                    gguf_weight_bytes(&s, &synthetic_index(&s, q)),
                    gguf_weight_bytes(&s, &ct),
                    "{} {q:?}",
                    s.name
                );
            }
        }
    }

    /// Bytes per batch-1 decode step of the real Qwen2 shapes as the meter's synthetic arms load
    /// them (F16: float VarBuilder; Q4_K / Q4_0: synthetic GGUF). Qwen2-0.5B's hidden 896 is not
    /// a multiple of 256: its Q4_K arm keeps every matrix reading the hidden state at Q8_0.
    #[test]
    fn real_qwen2_shapes() {
        // Checked by hand (a separate script over the same shapes and block sizes).
        let want: [(&str, [u64; 3]); 3] = [
            ("Qwen2-0.5B", [988_065_536, 472_825_856, 278_142_976]),
            ("Qwen2-1.5B", [3_087_428_608, 868_843_520, 868_843_520]),
            ("Qwen2-7B", [14_141_245_440, 3_978_383_360, 3_978_383_360]),
        ];
        for (name, [f16, q4k, q40]) in want {
            let s = analysis::find_shape(name).unwrap();
            let got = [
                float_weight_bytes(s, DType::F16, s.tied_embeddings).step(1),
                gguf_weight_bytes(s, &synthetic_index(s, GgmlDType::Q4K))
                    .unwrap()
                    .step(1),
                gguf_weight_bytes(s, &synthetic_index(s, GgmlDType::Q4_0))
                    .unwrap()
                    .step(1),
            ];
            println!(
                "{name}: F16 {} B, Q4_K {} B, Q4_0 {} B",
                got[0], got[1], got[2]
            );
            assert_eq!(got, [f16, q4k, q40], "{name}");
        }
    }
}
