//! The bytes of weights a decode step reads, and the share of the card's memory bandwidth they
//! reach at the measured throughput: every measured arm reports its HBM roofline fraction, which
//! says how far a decode step is from bandwidth-bound (and so how much a smaller format can save).
//!
//! A decode step multiplies the activations of every sequence of the batch by every weight
//! matrix once: each weight tensor is read whole, in the form the engine holds it (GGUF block
//! storage, or float elements × dtype size). The token-embedding table is the exception — the
//! lookup reads one row per sequence — unless the LM head is tied to it, when the head reads the
//! whole matrix. What the candle engines hold is counted in the meter (`meter::candle`, feature
//! `candle`); the arithmetic is here, pure, so a report can be built and tested without the engine.

use serde::{Deserialize, Serialize};

/// How the token-embedding table is read in one decode step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbeddingRead {
    /// The head has its own matrix: the lookup reads one row (`row_bytes`) per sequence.
    Untied {
        /// Bytes of one row of the lookup table as held (hidden × bytes per element).
        row_bytes: u64,
    },
    /// The head reads the lookup table itself (float models): the whole matrix, once; the rows
    /// the lookup reads are part of it.
    TiedShared {
        /// Bytes of the whole table as held.
        table_bytes: u64,
    },
    /// The head reads the stored table (GGUF blocks) while the lookup reads a dequantized copy
    /// (candle's quantized models keep the embedding in F32): the whole stored matrix once, plus
    /// one row of the copy per sequence.
    TiedCopy {
        /// Bytes of the stored table the head reads.
        table_bytes: u64,
        /// Bytes of one row of the lookup copy.
        row_bytes: u64,
    },
}

/// Bytes of weights one decode step reads, split by how they scale with the batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecodeWeightBytes {
    /// Read once per step whatever the batch: every weight matrix, norm and bias (and a tied
    /// head's whole matrix).
    pub per_step: u64,
    /// Read once per sequence of the batch: the embedding rows the lookup gathers.
    pub per_sequence: u64,
}

impl DecodeWeightBytes {
    /// The bytes of weights a step reads: `other_tensor_bytes` (every weight tensor but the
    /// token embedding, each as held) plus the embedding table as [`EmbeddingRead`] says.
    pub fn new(other_tensor_bytes: u64, embedding: EmbeddingRead) -> Self {
        let (table, row) = match embedding {
            EmbeddingRead::Untied { row_bytes } => (0, row_bytes),
            EmbeddingRead::TiedShared { table_bytes } => (table_bytes, 0),
            EmbeddingRead::TiedCopy {
                table_bytes,
                row_bytes,
            } => (table_bytes, row_bytes),
        };
        DecodeWeightBytes {
            per_step: other_tensor_bytes + table,
            per_sequence: row,
        }
    }

    /// Bytes of weights one decode step of `batch` sequences reads.
    pub fn step(&self, batch: usize) -> u64 {
        self.per_step + self.per_sequence * batch.max(1) as u64
    }

    /// Bytes of weights read per generated token: a step's bytes ÷ the batch (a step generates
    /// one token per sequence). Exact at batch 1.
    pub fn per_token(&self, batch: usize) -> f64 {
        self.step(batch) as f64 / batch.max(1) as f64
    }
}

/// `bytes_per_token × tokens_per_s ÷ bandwidth`: the share of the card's memory bandwidth the
/// weight reads alone reach. `None` (never zero) without a positive, finite bandwidth, byte
/// count or throughput.
pub fn roofline_fraction(
    bytes_per_token: f64,
    tokens_per_s: f64,
    bandwidth_gbs: f64,
) -> Option<f64> {
    let ok = |x: f64| x.is_finite() && x > 0.0;
    (ok(bytes_per_token) && ok(tokens_per_s) && ok(bandwidth_gbs))
        .then(|| bytes_per_token * tokens_per_s / (bandwidth_gbs * 1e9))
        .filter(|f| ok(*f))
}

/// A card's memory bandwidth, GB/s, from `data/gpus.csv` (datasheet values), by the name NVML
/// gives it (`NVIDIA H200`); `None` for a card the catalog does not list.
pub fn card_bandwidth_gbs(gpu_name: &str) -> Option<f64> {
    crate::Dataset::embedded()
        .gpu(gpu_name)
        .map(|g| g.bandwidth_gbs)
        .filter(|b| b.is_finite() && *b > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untied_table_reads_one_row_per_sequence() {
        let b = DecodeWeightBytes::new(1000, EmbeddingRead::Untied { row_bytes: 8 });
        assert_eq!(b.step(1), 1008);
        assert_eq!(b.step(4), 1032);
        assert_eq!(b.per_token(1), 1008.0);
        assert_eq!(b.per_token(4), 258.0);
        // Batch 0 is not a step; it reads as batch 1 rather than dividing by zero.
        assert_eq!(b.step(0), 1008);
    }

    #[test]
    fn tied_tables_are_read_whole_by_the_head() {
        let shared = DecodeWeightBytes::new(1000, EmbeddingRead::TiedShared { table_bytes: 80 });
        assert_eq!((shared.step(1), shared.step(8)), (1080, 1080));
        let copy = DecodeWeightBytes::new(
            1000,
            EmbeddingRead::TiedCopy {
                table_bytes: 40,
                row_bytes: 16,
            },
        );
        assert_eq!((copy.step(1), copy.step(2)), (1056, 1072));
    }

    #[test]
    fn fraction_is_bytes_times_rate_over_bandwidth() {
        // 1 GB per token at 2400 tok/s on 4800 GB/s: half the bandwidth.
        assert_eq!(roofline_fraction(1e9, 2400.0, 4800.0), Some(0.5));
        // Qwen2-7B F16, 14 141 245 440 B per token at 250 tok/s on an H200.
        let f = roofline_fraction(14_141_245_440.0, 250.0, 4800.0).unwrap();
        assert!((f - 0.736_523_2).abs() < 1e-9, "{f}");
        for (b, t, bw) in [
            (0.0, 1.0, 1.0),
            (1.0, 0.0, 1.0),
            (1.0, 1.0, 0.0),
            (f64::NAN, 1.0, 1.0),
            (1.0, f64::INFINITY, 1.0),
            (1.0, 1.0, -4800.0),
        ] {
            assert_eq!(roofline_fraction(b, t, bw), None, "{b} {t} {bw}");
        }
    }

    #[test]
    fn bandwidth_comes_from_the_card_catalog() {
        assert_eq!(card_bandwidth_gbs("NVIDIA H200"), Some(4800.0));
        assert_eq!(card_bandwidth_gbs("NVIDIA GeForce RTX 4090"), Some(1008.0));
        assert_eq!(card_bandwidth_gbs("Tesla T4"), Some(320.0));
        assert_eq!(card_bandwidth_gbs("NVIDIA H100 80GB HBM3"), Some(3350.0));
        assert_eq!(card_bandwidth_gbs("Fake GPU"), None);
        assert_eq!(card_bandwidth_gbs(""), None);
    }
}
