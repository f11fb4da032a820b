//! GGUF files: tensor names, per-tensor format fallback, metadata, writing, and reading a shape.

use super::*;

/// GGUF name of a Hugging Face tensor name.
pub(crate) fn gguf_name(hf: &str) -> String {
    if hf == "model.embed_tokens.weight" {
        return "token_embd.weight".into();
    }
    if hf == "model.norm.weight" {
        return "output_norm.weight".into();
    }
    if hf == "lm_head.weight" {
        return "output.weight".into();
    }
    let rest = hf.strip_prefix("model.layers.").unwrap_or(hf);
    let (layer, tail) = rest.split_once('.').unwrap_or(("0", rest));
    let tail = tail
        .replace("self_attn.q_proj", "attn_q")
        .replace("self_attn.k_proj", "attn_k")
        .replace("self_attn.v_proj", "attn_v")
        .replace("self_attn.o_proj", "attn_output")
        .replace("mlp.gate_proj", "ffn_gate")
        .replace("mlp.up_proj", "ffn_up")
        .replace("mlp.down_proj", "ffn_down")
        .replace("input_layernorm", "attn_norm")
        .replace("post_attention_layernorm", "ffn_norm");
    format!("blk.{layer}.{tail}")
}

/// Hugging Face name of a GGUF tensor name (the inverse of [`gguf_name`]); `None` for a tensor
/// the float models do not read (e.g. `rope_freqs.weight`).
pub(crate) fn hf_name(gguf: &str) -> Option<String> {
    match gguf {
        "token_embd.weight" => return Some("model.embed_tokens.weight".into()),
        "output_norm.weight" => return Some("model.norm.weight".into()),
        "output.weight" => return Some("lm_head.weight".into()),
        _ => {}
    }
    let rest = gguf.strip_prefix("blk.")?;
    let (layer, tail) = rest.split_once('.')?;
    let (part, kind) = tail.rsplit_once('.')?;
    let hf = match part {
        "attn_q" => "self_attn.q_proj",
        "attn_k" => "self_attn.k_proj",
        "attn_v" => "self_attn.v_proj",
        "attn_output" => "self_attn.o_proj",
        "ffn_gate" => "mlp.gate_proj",
        "ffn_up" => "mlp.up_proj",
        "ffn_down" => "mlp.down_proj",
        "attn_norm" => "input_layernorm",
        "ffn_norm" => "post_attention_layernorm",
        _ => return None,
    };
    Some(format!("model.layers.{layer}.{hf}.{kind}"))
}

/// Every tensor of a float GGUF under its Hugging Face name, in `dtype` on the CPU, with
/// llama.cpp's q/k row permutation undone for Llama: the tensors a float model is built from.
pub(crate) fn gguf_as_hf_tensors<R: std::io::Read + std::io::Seek>(
    content: &gguf_file::Content,
    reader: &mut R,
    s: &ModelShape,
    dtype: DType,
) -> Result<HashMap<String, Tensor>> {
    let mut out = HashMap::new();
    for name in content.tensor_infos.keys() {
        let Some(hf) = hf_name(name) else { continue };
        let mut t = content
            .tensor(reader, name, &Device::Cpu)?
            .dequantize(&Device::Cpu)?;
        if s.family == "llama" && hf.ends_with("self_attn.q_proj.weight") {
            t = super::hf::unpermute_qk(&t, s.heads)?;
        } else if s.family == "llama" && hf.ends_with("self_attn.k_proj.weight") {
            t = super::hf::unpermute_qk(&t, s.kv_heads)?;
        }
        out.insert(hf, t.to_dtype(dtype)?);
    }
    Ok(out)
}

/// The format a 2-D weight gets: the requested one when its input dimension is a multiple of the
/// block size, else Q8_0 (block 32), as llama.cpp falls back per tensor. Returned with a note.
pub(crate) fn format_for(q: GgmlDType, dims: &[usize]) -> GgmlDType {
    let input = *dims.last().unwrap_or(&0);
    if input.is_multiple_of(q.block_size()) {
        q
    } else {
        GgmlDType::Q8_0
    }
}

pub(crate) fn gguf_metadata(s: &ModelShape) -> Vec<(String, gguf_file::Value)> {
    use gguf_file::Value as V;
    let a = s.family.as_str();
    vec![
        ("general.architecture".into(), V::String(a.into())),
        (format!("{a}.attention.head_count"), V::U32(s.heads as u32)),
        (
            format!("{a}.attention.head_count_kv"),
            V::U32(s.kv_heads as u32),
        ),
        (format!("{a}.embedding_length"), V::U32(s.hidden as u32)),
        (
            format!("{a}.context_length"),
            V::U32(s.max_position.min(crate::eager::SYNTHETIC_MAX_POSITIONS) as u32),
        ),
        (format!("{a}.block_count"), V::U32(s.layers as u32)),
        (
            format!("{a}.feed_forward_length"),
            V::U32(s.intermediate as u32),
        ),
        (
            format!("{a}.rope.dimension_count"),
            V::U32(s.head_dim as u32),
        ),
        (
            format!("{a}.attention.layer_norm_rms_epsilon"),
            V::F32(s.rms_eps as f32),
        ),
        (format!("{a}.rope.freq_base"), V::F32(s.rope_theta as f32)),
    ]
}

pub(crate) fn write_gguf(s: &ModelShape, tensors: &[(String, QTensor)]) -> Result<Vec<u8>> {
    let md = gguf_metadata(s);
    let md_refs: Vec<(&str, &gguf_file::Value)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let t_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut cur = Cursor::new(Vec::new());
    gguf_file::write(&mut cur, &md_refs, &t_refs)?;
    Ok(cur.into_inner())
}

pub(crate) fn fallback_note(fallbacks: &[String], q: GgmlDType) -> Vec<String> {
    if fallbacks.is_empty() {
        return Vec::new();
    }
    vec![format!(
        "{} tensor(s) kept at Q8_0 instead of {q:?} (input dimension not a multiple of {}), e.g. {}",
        fallbacks.len(),
        q.block_size(),
        fallbacks.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
    )]
}

pub(crate) fn dominant_type(ct: &gguf_file::Content) -> Option<GgmlDType> {
    let mut counts: Vec<(GgmlDType, u64)> = Vec::new();
    for (name, info) in &ct.tensor_infos {
        if !name.starts_with("blk.") || !name.ends_with(".weight") || info.shape.rank() != 2 {
            continue;
        }
        let n = info.shape.elem_count() as u64;
        match counts.iter_mut().find(|(d, _)| *d == info.ggml_dtype) {
            Some(c) => c.1 += n,
            None => counts.push((info.ggml_dtype, n)),
        }
    }
    counts.into_iter().max_by_key(|c| c.1).map(|c| c.0)
}

/// The precision a GGUF file declares in `general.file_type` (llama.cpp's `llama_ftype`, which
/// names the mix llama-quantize was asked for: `Q4_K_M` keeps rows whose width is not a multiple
/// of 256 in Q5_0), else that of its most common weight type.
pub(crate) fn gguf_precision(ct: &gguf_file::Content) -> Option<Precision> {
    let declared = ct
        .metadata
        .get("general.file_type")
        .and_then(|v| v.to_u32().ok());
    let from_ftype = declared.and_then(|t| match t {
        0 => Some(Precision::Fp32),
        1 => Some(Precision::Fp16),
        2 => Some(Precision::Q4_0),
        7 => Some(Precision::Q8_0),
        14 | 15 => Some(Precision::Q4K),
        16 | 17 => Some(Precision::Q5K),
        18 => Some(Precision::Q6K),
        32 => Some(Precision::Bf16),
        _ => None,
    });
    if declared.is_some() {
        return from_ftype;
    }
    match dominant_type(ct)? {
        GgmlDType::F32 => Some(Precision::Fp32),
        GgmlDType::F16 => Some(Precision::Fp16),
        GgmlDType::BF16 => Some(Precision::Bf16),
        GgmlDType::Q4_0 => Some(Precision::Q4_0),
        GgmlDType::Q8_0 => Some(Precision::Q8_0),
        GgmlDType::Q4K => Some(Precision::Q4K),
        GgmlDType::Q5K => Some(Precision::Q5K),
        GgmlDType::Q6K => Some(Precision::Q6K),
        _ => None,
    }
}

/// What a GGUF holds, for an error or a note: its declared file type and the count of each type
/// among its 2-D weights ("file type 15; 150 Q5_0, 30 Q4K, 1 Q8_0").
pub(crate) fn gguf_types(ct: &gguf_file::Content) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for info in ct.tensor_infos.values() {
        if info.shape.rank() != 2 {
            continue;
        }
        let t = format!("{:?}", info.ggml_dtype);
        match counts.iter_mut().find(|(d, _)| *d == t) {
            Some(c) => c.1 += 1,
            None => counts.push((t, 1)),
        }
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mix = counts
        .iter()
        .map(|(t, n)| format!("{n} {t}"))
        .collect::<Vec<_>>()
        .join(", ");
    match ct
        .metadata
        .get("general.file_type")
        .and_then(|v| v.to_u32().ok())
    {
        Some(t) => format!("file type {t}; 2-D tensors: {mix}"),
        None => format!("2-D tensors: {mix}"),
    }
}

/// Open a GGUF file and read its header (metadata and tensor index); the file is returned for
/// the tensor data.
pub(crate) fn read_gguf(path: &std::path::Path) -> Result<(gguf_file::Content, std::fs::File)> {
    let mut f = std::fs::File::open(path).map_err(|source| crate::Error::Io {
        action: "opening",
        path: path.to_path_buf(),
        source,
    })?;
    let ct = gguf_file::Content::read(&mut f).map_err(|e| crate::Error::NotGguf {
        path: path.to_path_buf(),
        source: Box::new(e),
    })?;
    Ok((ct, f))
}

/// Read a shape from a GGUF file's metadata.
pub fn shape_from_gguf(path: &std::path::Path) -> Result<ModelShape> {
    let (ct, _) = read_gguf(path)?;
    let missing = |key: String| crate::Error::GgufMissing {
        path: path.to_path_buf(),
        key,
    };
    let arch = ct
        .metadata
        .get("general.architecture")
        .and_then(|v| v.to_string().ok())
        .cloned()
        .ok_or_else(|| missing("general.architecture".into()))?;
    let family = match arch.as_str() {
        "qwen2" => "qwen2",
        "llama" => "llama",
        other => {
            return Err(crate::Error::UnsupportedGgufArchitecture {
                path: path.to_path_buf(),
                arch: other.to_string(),
            })
        }
    };
    let u = |k: &str| -> Result<usize> {
        ct.metadata
            .get(&format!("{arch}.{k}"))
            .and_then(|v| v.to_u32().ok())
            .map(|x| x as usize)
            .ok_or_else(|| missing(format!("{arch}.{k}")))
    };
    let vocab = ct
        .tensor_infos
        .get("token_embd.weight")
        .map(|i| i.shape.dims()[0])
        .ok_or_else(|| missing("token_embd.weight".into()))?;
    let heads = u("attention.head_count")?;
    let hidden = u("embedding_length")?;
    let mut s = ModelShape {
        name: path
            .file_stem()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        family: family.into(),
        params_b: 0.0,
        layers: u("block_count")?,
        hidden,
        heads,
        kv_heads: u("attention.head_count_kv").unwrap_or(heads),
        head_dim: hidden / heads,
        intermediate: u("feed_forward_length").unwrap_or(hidden * 4),
        vocab,
        tied_embeddings: !ct.tensor_infos.contains_key("output.weight"),
        rope_theta: ct
            .metadata
            .get(&format!("{arch}.rope.freq_base"))
            .and_then(|v| v.to_f32().ok())
            .unwrap_or(10000.0) as f64,
        rms_eps: ct
            .metadata
            .get(&format!("{arch}.attention.layer_norm_rms_epsilon"))
            .and_then(|v| v.to_f32().ok())
            .map_or(1e-6, f64::from),
        max_position: u("context_length").unwrap_or(4096),
        source: path.display().to_string(),
    };
    s.params_b = s.param_count() as f64 / 1e9;
    Ok(s)
}
