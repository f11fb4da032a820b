//! Hugging Face directories: safetensors files, in-memory quantization to GGUF, config.json shapes.

use super::*;

pub(crate) fn safetensor_files(dir: &std::path::Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|source| crate::Error::Io {
            action: "reading",
            path: dir.to_path_buf(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(crate::Error::NoSafetensors(dir.to_path_buf()));
    }
    Ok(files)
}

/// llama.cpp's q/k row permutation for Llama (its GGUF rope is interleaved; HF's is not).
pub(crate) fn permute_qk(t: &Tensor, heads: usize) -> Result<Tensor> {
    let (out, inp) = t.dims2()?;
    Ok(t.reshape((heads, 2, out / heads / 2, inp))?
        .transpose(1, 2)?
        .reshape((out, inp))?)
}

/// The inverse of [`permute_qk`]: a GGUF's Llama q/k rows back in Hugging Face's order.
pub(crate) fn unpermute_qk(t: &Tensor, heads: usize) -> Result<Tensor> {
    let (out, inp) = t.dims2()?;
    Ok(t.reshape((heads, out / heads / 2, 2, inp))?
        .transpose(1, 2)?
        .reshape((out, inp))?)
}

/// Quantize a Hugging Face checkpoint in memory (parallel per tensor).
pub(crate) fn quantize_hf_dir(
    dir: &std::path::Path,
    s: &ModelShape,
    q: GgmlDType,
) -> Result<(Vec<u8>, Vec<String>)> {
    let mut all = Vec::new();
    for f in safetensor_files(dir)? {
        let ts = candle_core::safetensors::load(&f, &Device::Cpu)?;
        all.extend(ts);
    }
    let (gguf, mut notes) = quantize_hf_tensors(all, s, q)?;
    notes.push(format!("quantized in memory from {}", dir.display()));
    Ok((gguf, notes))
}

/// Quantize Hugging Face-named float tensors (on the CPU) into an in-memory GGUF file.
pub(crate) fn quantize_hf_tensors(
    all: impl IntoIterator<Item = (String, Tensor)>,
    s: &ModelShape,
    q: GgmlDType,
) -> Result<(Vec<u8>, Vec<String>)> {
    let mut work = Vec::new();
    for (name, t) in all {
        let mut t = t.to_device(&Device::Cpu)?.to_dtype(DType::F32)?;
        if s.family == "llama" && name.ends_with("self_attn.q_proj.weight") {
            t = permute_qk(&t, s.heads)?;
        } else if s.family == "llama" && name.ends_with("self_attn.k_proj.weight") {
            t = permute_qk(&t, s.kv_heads)?;
        }
        work.push((name, t));
    }
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .min(16);
    let chunk = work.len().div_ceil(threads).max(1);
    let results: Vec<Result<Vec<(String, QTensor, bool)>>> = std::thread::scope(|scope| {
        let hs: Vec<_> = work
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || -> Result<Vec<(String, QTensor, bool)>> {
                    part.iter()
                        .map(|(name, t)| {
                            let dims = t.dims().to_vec();
                            let f = if dims.len() == 1 {
                                GgmlDType::F32
                            } else {
                                format_for(q, &dims)
                            };
                            Ok((
                                gguf_name(name),
                                QTensor::quantize(t, f)?,
                                dims.len() > 1 && f != q,
                            ))
                        })
                        .collect()
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("quantizer thread panicked"))
            .collect()
    });
    let mut tensors = Vec::new();
    let mut fallbacks = Vec::new();
    for r in results {
        for (n, t, fb) in r? {
            if fb {
                fallbacks.push(n.clone());
            }
            tensors.push((n, t));
        }
    }
    let notes = fallback_note(&fallbacks, q);
    Ok((write_gguf(s, &tensors)?, notes))
}

/// Read a shape from a Hugging Face config.json.
pub fn shape_from_hf_config(dir: &std::path::Path) -> Result<ModelShape> {
    let path = dir.join("config.json");
    let text = std::fs::read_to_string(&path).map_err(|source| crate::Error::Io {
        action: "reading",
        path: path.clone(),
        source,
    })?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|source| crate::Error::ConfigJson {
            path: path.clone(),
            source,
        })?;
    let get = |k: &str| -> Result<usize> {
        v.get(k)
            .and_then(|x| x.as_u64())
            .map(|x| x as usize)
            .ok_or_else(|| crate::Error::ConfigField {
                path: path.clone(),
                field: k.to_string(),
            })
    };
    let model_type = v
        .get("model_type")
        .and_then(|x| x.as_str())
        .unwrap_or("llama");
    let family = match model_type {
        "qwen2" => "qwen2",
        "llama" | "mistral" => "llama",
        other => {
            return Err(crate::Error::UnsupportedModelType {
                path,
                model_type: other.to_string(),
            })
        }
    };
    let heads = get("num_attention_heads")?;
    let hidden = get("hidden_size")?;
    let mut s = ModelShape {
        name: dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        family: family.into(),
        params_b: 0.0,
        layers: get("num_hidden_layers")?,
        hidden,
        heads,
        kv_heads: get("num_key_value_heads").unwrap_or(heads),
        head_dim: v
            .get("head_dim")
            .and_then(|x| x.as_u64())
            .map(|x| x as usize)
            .unwrap_or(hidden / heads),
        intermediate: get("intermediate_size")?,
        vocab: get("vocab_size")?,
        tied_embeddings: v
            .get("tie_word_embeddings")
            .and_then(|x| x.as_bool())
            .unwrap_or(false),
        rope_theta: v
            .get("rope_theta")
            .and_then(|x| x.as_f64())
            .unwrap_or(10000.0),
        rms_eps: v
            .get("rms_norm_eps")
            .and_then(|x| x.as_f64())
            .unwrap_or(1e-6),
        max_position: get("max_position_embeddings").unwrap_or(4096),
        source: path.display().to_string(),
    };
    s.params_b = s.param_count() as f64 / 1e9;
    Ok(s)
}
