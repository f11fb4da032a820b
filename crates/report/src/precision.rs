//! The numeric formats a report, an anchor or an estimate can name: exactly the values of
//! `workload.precision` in `data/energy.schema.json`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A weight format (`workload.precision`). Spelled in reports as [`Precision::as_str`] gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Precision {
    /// IEEE half precision, the baseline every ΔE is measured against (`FP16`).
    Fp16,
    /// transformers + bitsandbytes 4-bit NormalFloat (`NF4`).
    Nf4,
    /// bitsandbytes LLM.int8() with the default outlier threshold (`INT8`).
    Int8,
    /// bfloat16 (`BF16`).
    Bf16,
    /// single precision (`FP32`).
    Fp32,
    /// LLM.int8() with `llm_int8_threshold=0`: no fp16 outlier path (`INT8-pure`).
    Int8Pure,
    /// candle GGML block format, 8 bits + one f16 scale per 32 weights (`Q8_0`).
    Q8_0,
    /// candle GGML k-quant, 4.5 bits per weight (`Q4_K`).
    Q4K,
    /// candle GGML block format, 4 bits + one f16 scale per 32 weights (`Q4_0`).
    Q4_0,
    /// candle GGML k-quant, 5.5 bits per weight (`Q5_K`).
    Q5K,
    /// candle GGML k-quant, 6.5625 bits per weight (`Q6_K`).
    Q6K,
    /// llama.cpp GGUF file at 16 bits (`GGUF-F16`).
    GgufF16,
    /// llama.cpp GGUF Q4_0 file (`GGUF-Q4_0`).
    GgufQ4_0,
    /// Activation-aware 4-bit weights, as vLLM / SGLang / TGI serve them (`AWQ-INT4`).
    AwqInt4,
    /// GPTQ 4-bit weights, as vLLM / SGLang / TGI serve them (`GPTQ-INT4`).
    GptqInt4,
    /// 8-bit floating point weights (E4M3), as vLLM / SGLang / TensorRT-LLM serve them (`FP8`).
    Fp8,
    /// Weight-only 4-bit integers, 16-bit activations: groups of weights with a 16-bit scale and
    /// zero each, multiplied by PyTorch's tinygemm kernel (`_weight_int4pack_mm`), as gpt-fast and
    /// torchao's `int4_weight_only` run them (`INT4-WO`).
    Int4Wo,
}

impl Precision {
    /// Every precision, in the order of the schema's enum.
    pub const ALL: [Precision; 17] = [
        Precision::Fp16,
        Precision::Nf4,
        Precision::Int8,
        Precision::Bf16,
        Precision::Fp32,
        Precision::Int8Pure,
        Precision::Q8_0,
        Precision::Q4K,
        Precision::Q4_0,
        Precision::Q5K,
        Precision::Q6K,
        Precision::GgufF16,
        Precision::GgufQ4_0,
        Precision::AwqInt4,
        Precision::GptqInt4,
        Precision::Fp8,
        Precision::Int4Wo,
    ];

    /// The schema's spelling (`FP16`, `Q4_K`, `INT8-pure`, `GGUF-Q4_0`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::Fp16 => "FP16",
            Precision::Nf4 => "NF4",
            Precision::Int8 => "INT8",
            Precision::Bf16 => "BF16",
            Precision::Fp32 => "FP32",
            Precision::Int8Pure => "INT8-pure",
            Precision::Q8_0 => "Q8_0",
            Precision::Q4K => "Q4_K",
            Precision::Q4_0 => "Q4_0",
            Precision::Q5K => "Q5_K",
            Precision::Q6K => "Q6_K",
            Precision::GgufF16 => "GGUF-F16",
            Precision::GgufQ4_0 => "GGUF-Q4_0",
            Precision::AwqInt4 => "AWQ-INT4",
            Precision::GptqInt4 => "GPTQ-INT4",
            Precision::Fp8 => "FP8",
            Precision::Int4Wo => "INT4-WO",
        }
    }

    /// The precision spelled exactly as the schema's enum does (case-sensitive, no aliases):
    /// what a report must write.
    pub fn from_schema(s: &str) -> Option<Precision> {
        Precision::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// An unquantized floating-point format (FP16, BF16, FP32, GGUF-F16).
    pub fn is_float(self) -> bool {
        matches!(
            self,
            Precision::Fp16 | Precision::Bf16 | Precision::Fp32 | Precision::GgufF16
        )
    }

    /// A quantized format (everything that is not [`Precision::is_float`]).
    pub fn is_quantized(self) -> bool {
        !self.is_float()
    }

    /// A 16-bit float format (FP16, BF16, GGUF-F16): the same bytes per weight as the baseline.
    pub fn is_16bit_float(self) -> bool {
        matches!(self, Precision::Fp16 | Precision::Bf16 | Precision::GgufF16)
    }

    /// One of bitsandbytes' 8-bit formats (INT8, INT8-pure).
    pub fn is_int8(self) -> bool {
        matches!(self, Precision::Int8 | Precision::Int8Pure)
    }

    /// An 8-bit format (INT8, INT8-pure, Q8_0): these save less, so their fit allows less saving.
    pub fn is_8bit(self) -> bool {
        self.is_int8() || matches!(self, Precision::Q8_0 | Precision::Fp8)
    }

    /// A GGML/GGUF block format (candle's `Q*` or llama.cpp's `GGUF-*`).
    pub fn is_gguf(self) -> bool {
        matches!(
            self,
            Precision::Q8_0
                | Precision::Q4K
                | Precision::Q4_0
                | Precision::Q5K
                | Precision::Q6K
                | Precision::GgufF16
                | Precision::GgufQ4_0
        )
    }

    /// Sort key for display: FP16, BF16, NF4, INT8, INT8-pure, Q8_0, Q4_K, Q4_0, then the rest
    /// (equal keys; a stable sort keeps their order).
    pub fn display_rank(self) -> usize {
        match self {
            Precision::Fp16 => 0,
            Precision::Bf16 => 1,
            Precision::Nf4 => 2,
            Precision::Int8 => 3,
            Precision::Int8Pure => 4,
            Precision::Q8_0 => 5,
            Precision::Q4K => 6,
            Precision::Q4_0 => 7,
            _ => 9,
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// `"FP4".parse::<Precision>()` fails with this.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown precision {0:?}: expected one of FP16, NF4, INT8, BF16, FP32, INT8-pure, Q8_0, Q4_K, Q4_0, Q5_K, Q6_K, GGUF-F16, GGUF-Q4_0, AWQ-INT4, GPTQ-INT4, FP8, INT4-WO")]
pub struct ParsePrecisionError(pub String);

impl FromStr for Precision {
    type Err = ParsePrecisionError;
    /// Case-insensitive, surrounding white space ignored; `F16` and `F32` (as candle and
    /// llama.cpp name them) are read as FP16 and FP32.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("F16") {
            return Ok(Precision::Fp16);
        }
        if t.eq_ignore_ascii_case("F32") {
            return Ok(Precision::Fp32);
        }
        Precision::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(t))
            .ok_or_else(|| ParsePrecisionError(s.to_string()))
    }
}

impl Serialize for Precision {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Precision {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spelling_round_trips() {
        for p in Precision::ALL {
            assert_eq!(p.as_str().parse::<Precision>(), Ok(p));
            assert_eq!(p.as_str().to_lowercase().parse::<Precision>(), Ok(p));
            assert_eq!(p.to_string(), p.as_str());
            let j = serde_json::to_string(&p).unwrap();
            assert_eq!(j, format!("\"{}\"", p.as_str()));
            assert_eq!(serde_json::from_str::<Precision>(&j).unwrap(), p);
        }
        assert_eq!("F16".parse(), Ok(Precision::Fp16));
        assert_eq!(" q4_k ".parse(), Ok(Precision::Q4K));
        assert_eq!("fp8".parse(), Ok(Precision::Fp8));
        assert_eq!("awq-int4".parse(), Ok(Precision::AwqInt4));
        assert_eq!("int4-wo".parse(), Ok(Precision::Int4Wo));
        assert!("FP4".parse::<Precision>().is_err());
        assert!("GGUF-Q4_0-mlperf-client-file".parse::<Precision>().is_err());
    }

    #[test]
    fn classes() {
        assert!(Precision::Bf16.is_float() && !Precision::Bf16.is_quantized());
        assert!(Precision::Nf4.is_quantized() && !Precision::Nf4.is_gguf());
        assert!(Precision::Q8_0.is_8bit() && Precision::Int8Pure.is_int8());
        assert!(Precision::GgufQ4_0.is_gguf() && Precision::GgufF16.is_float());
        let mut v = Precision::ALL.to_vec();
        v.sort_by_key(|p| p.display_rank());
        assert_eq!(&v[..3], [Precision::Fp16, Precision::Bf16, Precision::Nf4]);
    }
}
