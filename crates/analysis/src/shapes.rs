//! Real transformer shapes (`data/models.csv`), shared by the optimizer's VRAM/roofline model and the
//! meter's synthetic-weights mode.

use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// `data/models.csv`, embedded.
pub const MODELS_CSV: &str = include_str!("../../../data/models.csv");

/// A transformer's shapes (one row of models.csv).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelShape {
    /// Model name (`Qwen2-7B`).
    pub name: String,
    /// `qwen2` (q/k/v biases) or `llama`.
    pub family: String,
    /// Nominal size, B parameters.
    pub params_b: f64,
    /// Transformer layers.
    pub layers: usize,
    /// Hidden size.
    pub hidden: usize,
    /// Attention heads.
    pub heads: usize,
    /// Key/value heads (grouped-query attention).
    pub kv_heads: usize,
    /// Head dimension.
    pub head_dim: usize,
    /// MLP intermediate size.
    pub intermediate: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// Whether the output head shares the embedding.
    pub tied_embeddings: bool,
    /// RoPE θ.
    pub rope_theta: f64,
    /// RMSNorm ε.
    pub rms_eps: f64,
    /// Longest context the config allows.
    pub max_position: usize,
    /// Where the config comes from.
    pub source: String,
}

impl ModelShape {
    /// Parameters counted from the shapes (embeddings once if tied).
    pub fn param_count(&self) -> u64 {
        let (h, q, kv) = (
            self.hidden as u64,
            (self.heads * self.head_dim) as u64,
            (self.kv_heads * self.head_dim) as u64,
        );
        let bias = if self.family == "qwen2" {
            q + 2 * kv
        } else {
            0
        };
        let per_layer =
            h * q + 2 * h * kv + q * h + bias + 3 * h * self.intermediate as u64 + 2 * h;
        let emb = self.vocab as u64 * h * if self.tied_embeddings { 1 } else { 2 };
        self.layers as u64 * per_layer + emb + h
    }

    /// Parameters that live in the per-layer linear layers (the ones a GGUF format quantizes;
    /// embeddings, norms and biases are kept at higher precision).
    pub fn linear_params(&self) -> u64 {
        let (h, q, kv) = (
            self.hidden as u64,
            (self.heads * self.head_dim) as u64,
            (self.kv_heads * self.head_dim) as u64,
        );
        self.layers as u64 * (h * q + 2 * h * kv + q * h + 3 * h * self.intermediate as u64)
    }

    /// KV-cache bytes for one token of one sequence, with grouped-query attention:
    /// 2 (K and V) · layers · kv_heads · head_dim · bytes per element.
    pub fn kv_bytes_per_token(&self, bytes_per_elem: f64) -> f64 {
        2.0 * self.layers as f64 * self.kv_heads as f64 * self.head_dim as f64 * bytes_per_elem
    }
}

/// A models.csv row that cannot be read.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("models.csv: row {row}: {message}")]
pub struct ShapeError {
    /// 1-based row, counting the header.
    pub row: usize,
    /// What was wrong.
    pub message: String,
}

/// Parse models.csv text.
pub fn parse_models(text: &str) -> Result<Vec<ModelShape>, ShapeError> {
    let mut r = csv::ReaderBuilder::new().from_reader(text.as_bytes());
    let mut out = Vec::new();
    for (i, rec) in r.deserialize::<Raw>().enumerate() {
        let raw = rec.map_err(|e| ShapeError {
            row: i + 2,
            message: e.to_string(),
        })?;
        if raw.layers == 0
            || raw.hidden == 0
            || raw.heads == 0
            || raw.kv_heads == 0
            || raw.head_dim == 0
        {
            return Err(ShapeError {
                row: i + 2,
                message: "layers, hidden, heads, kv_heads and head_dim must be > 0".into(),
            });
        }
        if raw.heads % raw.kv_heads != 0 {
            return Err(ShapeError {
                row: i + 2,
                message: format!(
                    "heads {} not a multiple of kv_heads {}",
                    raw.heads, raw.kv_heads
                ),
            });
        }
        out.push(ModelShape {
            name: raw.name,
            family: raw.family,
            params_b: raw.params_b,
            layers: raw.layers,
            hidden: raw.hidden,
            heads: raw.heads,
            kv_heads: raw.kv_heads,
            head_dim: raw.head_dim,
            intermediate: raw.intermediate,
            vocab: raw.vocab,
            tied_embeddings: raw.tied_embeddings != 0,
            rope_theta: raw.rope_theta,
            rms_eps: raw.rms_eps,
            max_position: raw.max_position,
            source: raw.source,
        });
    }
    Ok(out)
}

#[derive(Deserialize)]
struct Raw {
    name: String,
    family: String,
    params_b: f64,
    layers: usize,
    hidden: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    intermediate: usize,
    vocab: usize,
    tied_embeddings: u8,
    rope_theta: f64,
    rms_eps: f64,
    max_position: usize,
    source: String,
}

/// The embedded shape table.
pub fn shapes() -> &'static [ModelShape] {
    static S: OnceLock<Vec<ModelShape>> = OnceLock::new();
    S.get_or_init(|| parse_models(MODELS_CSV).expect("data/models.csv is checked by tests"))
}

/// Find a shape by name, case-insensitively (`qwen2-0.5b` finds `Qwen2-0.5B`).
pub fn find_shape(name: &str) -> Option<&'static ModelShape> {
    shapes()
        .iter()
        .find(|s| s.name.eq_ignore_ascii_case(name.trim()))
}

/// A shape for an arbitrary size: the nearest real shape in log-size, with layers and widths
/// scaled so the parameter count matches (`interpolated` in the name). Used only where a user gave
/// a size and no architecture.
pub fn shape_for_params(params_b: f64) -> ModelShape {
    let nearest = shapes()
        .iter()
        .filter(|s| !s.name.starts_with("Qwen2.5-0.5") && !s.name.starts_with("Qwen2.5-1.5"))
        .min_by(|a, b| {
            (a.params_b.ln() - params_b.ln())
                .abs()
                .total_cmp(&(b.params_b.ln() - params_b.ln()).abs())
        })
        .expect("shape table is not empty");
    let mut s = nearest.clone();
    // Scale depth first (keeps the head geometry real), clamp to at least 2 layers.
    let emb = (s.vocab * s.hidden * if s.tied_embeddings { 1 } else { 2 }) as f64 / 1e9;
    let body = (nearest.params_b - emb).max(1e-3);
    let want_body = (params_b - emb).max(body * 0.05);
    // At most a million layers: far past any model, and the parameter counts stay inside u64 for
    // any size a caller passes (the optimizer and estimates bound sizes at report::MAX_PARAMS_B).
    s.layers = ((s.layers as f64 * want_body / body).round() as usize).clamp(2, 1_000_000);
    s.params_b = params_b;
    s.name = format!("~{params_b}B (interpolated from {})", nearest.name);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shape_reproduces_its_nominal_size() {
        for s in shapes() {
            let counted = s.param_count() as f64 / 1e9;
            assert!(
                (counted - s.params_b).abs() / s.params_b < 0.002,
                "{}: counted {counted} vs {}",
                s.name,
                s.params_b
            );
        }
        assert!(shapes().len() >= 10);
    }

    #[test]
    fn kv_bytes_use_grouped_query_attention() {
        // Qwen2-7B: 2 · 28 layers · 4 kv heads · 128 · 2 bytes = 57 344 B per token;
        // at 4096 tokens: 234 881 024 B (224 MiB) — 7× less than with 28 full heads.
        let s = find_shape("qwen2-7b").unwrap();
        assert_eq!(s.kv_bytes_per_token(2.0), 57_344.0);
        assert_eq!(s.kv_bytes_per_token(2.0) * 4096.0, 234_881_024.0);
    }

    #[test]
    fn interpolated_shape_lands_near_the_requested_size() {
        for want in [0.8, 2.0, 5.0, 13.0, 33.0] {
            let s = shape_for_params(want);
            let got = s.param_count() as f64 / 1e9;
            assert!(
                (got - want).abs() / want < 0.2,
                "{want}: {got} ({})",
                s.name
            );
        }
    }

    #[test]
    fn bad_rows_are_reported_with_their_row() {
        let header = MODELS_CSV.lines().next().unwrap();
        let bad = format!("{header}\nX,llama,1,2,64,3,2,16,128,100,0,1e4,1e-5,128,src\n");
        let e = parse_models(&bad).unwrap_err();
        assert_eq!(e.row, 2);
        assert!(e.message.contains("kv_heads"));
    }
}
