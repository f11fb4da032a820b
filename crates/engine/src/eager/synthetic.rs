//! Seeded random weights at a real architecture's exact shapes: float tensors, valid quantized
//! blocks, and writers for a synthetic GGUF file or Hugging Face directory.

use super::*;

/// Hugging Face tensor names and shapes (out, in) of a model.
pub(crate) fn hf_tensor_shapes(s: &ModelShape) -> Vec<(String, Vec<usize>)> {
    let (h, q, kv) = (s.hidden, s.heads * s.head_dim, s.kv_heads * s.head_dim);
    let mut v = vec![("model.embed_tokens.weight".to_string(), vec![s.vocab, h])];
    for l in 0..s.layers {
        let p = format!("model.layers.{l}");
        v.push((format!("{p}.self_attn.q_proj.weight"), vec![q, h]));
        v.push((format!("{p}.self_attn.k_proj.weight"), vec![kv, h]));
        v.push((format!("{p}.self_attn.v_proj.weight"), vec![kv, h]));
        v.push((format!("{p}.self_attn.o_proj.weight"), vec![h, q]));
        if s.family == "qwen2" {
            v.push((format!("{p}.self_attn.q_proj.bias"), vec![q]));
            v.push((format!("{p}.self_attn.k_proj.bias"), vec![kv]));
            v.push((format!("{p}.self_attn.v_proj.bias"), vec![kv]));
        }
        v.push((format!("{p}.mlp.gate_proj.weight"), vec![s.intermediate, h]));
        v.push((format!("{p}.mlp.up_proj.weight"), vec![s.intermediate, h]));
        v.push((format!("{p}.mlp.down_proj.weight"), vec![h, s.intermediate]));
        v.push((format!("{p}.input_layernorm.weight"), vec![h]));
        v.push((format!("{p}.post_attention_layernorm.weight"), vec![h]));
    }
    v.push(("model.norm.weight".to_string(), vec![h]));
    if !s.tied_embeddings {
        v.push(("lm_head.weight".to_string(), vec![s.vocab, h]));
    }
    v
}

/// Seeded random float weights at the model's exact shapes (N(0, 0.02); norms = 1). Generated in
/// F32 on the device (candle's CUDA randn rejects F16) and cast by the VarBuilder.
pub(crate) fn synthetic_float_tensors(
    s: &ModelShape,
    seed: u64,
    dev: &Device,
) -> Result<HashMap<String, Tensor>> {
    // The CPU backend cannot be seeded: draw there from our own seeded generator instead.
    let mut cpu_rng = rand::rngs::StdRng::seed_from_u64(seed);
    if !dev.is_cpu() {
        dev.set_seed(seed)?;
    }
    let mut out = HashMap::new();
    for (name, dims) in hf_tensor_shapes(s) {
        let t = if name.ends_with("norm.weight") {
            Tensor::ones(dims, DType::F32, dev)?
        } else if name.ends_with(".bias") {
            Tensor::zeros(dims, DType::F32, dev)?
        } else if dev.is_cpu() {
            let n: usize = dims.iter().product();
            // Box–Muller, N(0, 0.02).
            let vals: Vec<f32> = (0..n)
                .map(|_| {
                    let u1 = (cpu_rng.next_u32() as f64 + 1.0) / (u32::MAX as f64 + 2.0);
                    let u2 = cpu_rng.next_u32() as f64 / u32::MAX as f64;
                    ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos() * 0.02) as f32
                })
                .collect();
            Tensor::from_vec(vals, dims, dev)?
        } else {
            Tensor::randn(0f32, 0.02, dims, dev)?
        };
        out.insert(name, t);
    }
    Ok(out)
}

/// Random but valid quantized blocks: random quant bytes, small fixed scales (so activations stay
/// finite through every layer).
pub(crate) fn random_blocks(q: GgmlDType, elems: usize, rng: &mut impl RngCore) -> Vec<u8> {
    let blocks = elems / q.block_size();
    let bs = q.type_size();
    let mut data = vec![0u8; blocks * bs];
    rng.fill_bytes(&mut data);
    let f16 = |v: f32| half::f16::from_f32(v).to_le_bytes();
    for b in data.chunks_exact_mut(bs) {
        match q {
            GgmlDType::Q4_0 => b[0..2].copy_from_slice(&f16(0.005)),
            GgmlDType::Q8_0 => b[0..2].copy_from_slice(&f16(0.0003)),
            GgmlDType::Q4K | GgmlDType::Q5K => {
                b[0..2].copy_from_slice(&f16(1e-4));
                b[2..4].copy_from_slice(&f16(1e-4));
            }
            GgmlDType::Q6K => {
                let n = b.len();
                b[n - 2..].copy_from_slice(&f16(5e-6));
            }
            _ => {}
        }
    }
    data
}

/// A synthetic quantized model as an in-memory GGUF file, generated in parallel.
pub(crate) fn synthetic_gguf(
    s: &ModelShape,
    q: GgmlDType,
    seed: u64,
) -> Result<(Vec<u8>, Vec<String>)> {
    let specs = hf_tensor_shapes(s);
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .min(16);
    let chunk = specs.len().div_ceil(threads);
    let results: Vec<Result<Vec<(String, QTensor, bool)>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = specs
            .chunks(chunk.max(1))
            .enumerate()
            .map(|(ci, part)| {
                scope.spawn(move || -> Result<Vec<(String, QTensor, bool)>> {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(
                        seed ^ (ci as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                    );
                    let mut out = Vec::new();
                    for (name, dims) in part {
                        let gname = gguf_name(name);
                        let elems: usize = dims.iter().product();
                        let (qt, fell_back) = if dims.len() == 1 {
                            let vals: Vec<f32> = if name.ends_with(".bias") {
                                vec![0.0; elems]
                            } else {
                                vec![1.0; elems]
                            };
                            let t = Tensor::from_vec(vals, dims.clone(), &Device::Cpu)?;
                            (QTensor::quantize(&t, GgmlDType::F32)?, false)
                        } else {
                            let f = format_for(q, dims);
                            let raw = random_blocks(f, elems, &mut rng);
                            (
                                qtensor_from_ggml(f, &raw, dims.clone(), &Device::Cpu)?,
                                f != q,
                            )
                        };
                        out.push((gname, qt, fell_back));
                    }
                    Ok(out)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("generator thread panicked"))
            .collect()
    });
    let mut tensors = Vec::new();
    let mut fallbacks = Vec::new();
    for r in results {
        for (name, t, fb) in r? {
            if fb {
                fallbacks.push(name.clone());
            }
            tensors.push((name, t));
        }
    }
    let notes = fallback_note(&fallbacks, q);
    Ok((write_gguf(s, &tensors)?, notes))
}

/// Write a synthetic model as a GGUF file (used by tests and by `--write-gguf`).
pub fn write_synthetic_gguf(
    shape: &ModelShape,
    q: GgmlDType,
    seed: u64,
    path: &std::path::Path,
) -> Result<()> {
    let (bytes, _) = synthetic_gguf(shape, q, seed)?;
    std::fs::write(path, bytes).map_err(|source| crate::Error::Io {
        action: "writing",
        path: path.to_path_buf(),
        source,
    })
}

/// Write a synthetic model as a Hugging Face directory (config.json + model.safetensors).
pub fn write_synthetic_hf_dir(shape: &ModelShape, seed: u64, dir: &std::path::Path) -> Result<()> {
    let io = |action, path: PathBuf| {
        move |source| crate::Error::Io {
            action,
            path,
            source,
        }
    };
    std::fs::create_dir_all(dir).map_err(io("creating", dir.to_path_buf()))?;
    let tensors = synthetic_float_tensors(shape, seed, &Device::Cpu)?;
    candle_core::safetensors::save(&tensors, dir.join("model.safetensors"))?;
    let config = serde_json::json!({
        "model_type": shape.family,
        "hidden_size": shape.hidden,
        "intermediate_size": shape.intermediate,
        "num_hidden_layers": shape.layers,
        "num_attention_heads": shape.heads,
        "num_key_value_heads": shape.kv_heads,
        "vocab_size": shape.vocab,
        "max_position_embeddings": shape.max_position,
        "rope_theta": shape.rope_theta,
        "rms_norm_eps": shape.rms_eps,
        "tie_word_embeddings": shape.tied_embeddings,
    });
    let path = dir.join("config.json");
    // Serializing a JSON value only fails on a writer error: one I/O path for both.
    serde_json::to_vec_pretty(&config)
        .map_err(std::io::Error::from)
        .and_then(|text| std::fs::write(&path, text))
        .map_err(io("writing", path.clone()))?;
    Ok(())
}
