//! What a model file holds, read from its header alone: format, parameter count, weight
//! precision, architecture. The server path needs these while an external server (llama-server,
//! vLLM) loads the same file, so nothing here loads a weight or needs `candle`.
//!
//! [`inspect`] takes a `.gguf` file, a `.safetensors` file, or a Hugging Face directory of
//! `*.safetensors` shards (with an optional `config.json`); [`inspect_gguf_bytes`],
//! [`inspect_safetensors_bytes`] and [`config_model_type_bytes`] are the pure parsers it uses
//! (the fuzz targets of `fuzz/` drive them). Every length and count in a file is bounded before anything is
//! allocated for it, and every malformed input is a [`ModelFileError`], never a panic.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use report::Precision;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// Longest GGUF string (key, value or array element) accepted: real ones are names, tokens and
/// chat templates, far below this.
const MAX_STRING_BYTES: u64 = 1 << 20;
/// Most tensors (GGUF or safetensors) and most GGUF key-value pairs accepted.
const MAX_TENSORS: u64 = 1_000_000;
const MAX_KVS: u64 = 1_000_000;
/// ggml's `GGML_MAX_DIMS`: llama.cpp refuses a tensor with more.
const GGML_MAX_DIMS: u32 = 4;
/// Most dimensions of a safetensors tensor accepted.
const MAX_SAFETENSORS_DIMS: usize = 8;
/// Largest safetensors header JSON accepted (the format's own reference reader's limit).
const MAX_SAFETENSORS_HEADER: u64 = 100_000_000;
/// Largest GGUF header read: big vocabularies make headers of tens of MB, never hundreds.
const MAX_GGUF_HEADER: u64 = 256 << 20;
/// Largest `config.json` / `model.safetensors.index.json` read.
const MAX_SIDE_JSON: u64 = 100_000_000;
/// The first read of a file; a GGUF header that does not fit is read again, twice as long.
const FIRST_READ: u64 = 1 << 20;
/// The path errors of [`inspect_gguf_bytes`] name, having no file.
const IN_MEMORY: &str = "<memory>";

/// A model file format [`inspect`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ModelFormat {
    /// llama.cpp's GGUF (versions 2 and 3, little endian).
    Gguf,
    /// Hugging Face safetensors (one file, or a directory of shards).
    Safetensors,
}

impl fmt::Display for ModelFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            ModelFormat::Gguf => "GGUF",
            ModelFormat::Safetensors => "safetensors",
        })
    }
}

/// What [`inspect`] found in a model file or directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelFileInfo {
    /// The file's format.
    pub format: ModelFormat,
    /// The path given to [`inspect`].
    pub path: PathBuf,
    /// Size on disk: the file, or for a directory the sum of the shards inspected.
    pub bytes: u64,
    /// Sum over all tensors of the product of their dimensions.
    pub params: u64,
    /// The format holding the most elements among tensors of ≥ 2 dimensions (the matmul weights
    /// and the token embedding); `None` when there is no such tensor or the format has no
    /// [`Precision`] (IQ*, Q2_K, I32-packed …). A GGUF `F16` / `Q4_0` is named `FP16` / `Q4_0`
    /// here, as candle runs it; a llama.cpp caller relabels them `GGUF-F16` / `GGUF-Q4_0`.
    pub precision: Option<Precision>,
    /// Elements per type name (`"Q4_K"`, `"F32"`, `"BF16"` …) over all tensors, largest first
    /// (ties by name).
    pub weight_types: Vec<(String, u64)>,
    /// GGUF `general.architecture`, or `model_type` of the `config.json` beside safetensors.
    pub architecture: Option<String>,
    /// GGUF `general.name`.
    pub name: Option<String>,
}

/// A ggml tensor type id, as a GGUF tensor info stores it (`enum ggml_type` in ggml.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GgmlType(pub u32);

impl GgmlType {
    /// ggml's name for the type (`GGML_TYPE_` dropped), `None` for an id ggml has not (or no
    /// longer) defined.
    pub fn name(self) -> Option<&'static str> {
        // ggml.h as of late 2025; 4, 5 and 31..=33, 36..=38 were removed from the format.
        Some(match self.0 {
            0 => "F32",
            1 => "F16",
            2 => "Q4_0",
            3 => "Q4_1",
            6 => "Q5_0",
            7 => "Q5_1",
            8 => "Q8_0",
            9 => "Q8_1",
            10 => "Q2_K",
            11 => "Q3_K",
            12 => "Q4_K",
            13 => "Q5_K",
            14 => "Q6_K",
            15 => "Q8_K",
            16 => "IQ2_XXS",
            17 => "IQ2_XS",
            18 => "IQ3_XXS",
            19 => "IQ1_S",
            20 => "IQ4_NL",
            21 => "IQ3_S",
            22 => "IQ2_S",
            23 => "IQ4_XS",
            24 => "I8",
            25 => "I16",
            26 => "I32",
            27 => "I64",
            28 => "F64",
            29 => "IQ1_M",
            30 => "BF16",
            34 => "TQ1_0",
            35 => "TQ2_0",
            39 => "MXFP4",
            40 => "NVFP4",
            41 => "Q1_0",
            42 => "Q2_0",
            _ => return None,
        })
    }

    /// The report precision of this format, where the schema has one.
    pub fn precision(self) -> Option<Precision> {
        self.name().and_then(precision_of)
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.pad(name),
            None => write!(f, "ggml type {}", self.0),
        }
    }
}

/// The schema precision a GGUF type or safetensors dtype name stands for.
fn precision_of(type_name: &str) -> Option<Precision> {
    Some(match type_name {
        "F32" => Precision::Fp32,
        "F16" => Precision::Fp16,
        "BF16" => Precision::Bf16,
        "Q8_0" => Precision::Q8_0,
        "Q4_0" => Precision::Q4_0,
        "Q4_K" => Precision::Q4K,
        "Q5_K" => Precision::Q5K,
        "Q6_K" => Precision::Q6K,
        _ => return None,
    })
}

/// One tensor info of a GGUF header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GgufTensorInfo {
    /// The tensor's name (`blk.0.attn_q.weight`).
    pub name: String,
    /// Its dimensions, innermost first (ggml's `ne`).
    pub dims: Vec<u64>,
    /// Its element type.
    pub ggml_type: GgmlType,
    /// Where its data starts, relative to the (aligned) data section.
    pub offset: u64,
}

impl GgufTensorInfo {
    /// The number of elements (saturating; [`inspect_gguf_bytes`] has refused any that overflow).
    pub fn elements(&self) -> u64 {
        self.dims.iter().fold(1u64, |n, &d| n.saturating_mul(d))
    }
}

/// What [`inspect_gguf_bytes`] reads from a GGUF header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GgufHeader {
    /// The GGUF version (2 or 3).
    pub version: u32,
    /// `general.architecture` (`llama`, `qwen2` …), when it is a string.
    pub architecture: Option<String>,
    /// `general.name`, when it is a string.
    pub name: Option<String>,
    /// The tensor infos, in file order.
    pub tensors: Vec<GgufTensorInfo>,
    /// Sum of the tensors' element counts.
    pub params: u64,
    /// Bytes from the start of the file to the end of the last tensor info.
    pub len: u64,
}

/// Why a GGUF header cannot be read. Places are `KV n` / `tensor info n`, counted from 0, with
/// the key or tensor name once it has been read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GgufProblem {
    /// The first four bytes are not `GGUF`.
    #[error("not a GGUF file (magic \"{}\")", .0.escape_ascii())]
    BadMagic([u8; 4]),
    /// The version reads as a byte-swapped small number: a big-endian file.
    #[error("GGUF version {0:#010x} looks byte-swapped: big-endian GGUF is not supported")]
    BigEndian(u32),
    /// A version other than 2 or 3 (1 used 32-bit counts and is gone from llama.cpp).
    #[error("unsupported GGUF version {0} (2 and 3 are read)")]
    UnsupportedVersion(u32),
    /// The bytes end inside the header.
    #[error("GGUF header truncated while reading {at}")]
    Truncated {
        /// Where: "the file header", "KV 3 (\`general.name\`)",
        /// "tensor info 12 (\`blk.0.attn_q.weight\`)".
        at: String,
    },
    /// A count beyond what any real model has.
    #[error("GGUF header claims {count} {what} (at most {max} accepted)")]
    TooMany {
        /// What is counted (`tensors`, `key-value pairs`).
        what: &'static str,
        /// The count in the file.
        count: u64,
        /// The most accepted.
        max: u64,
    },
    /// A string longer than 1 MiB.
    #[error("string of {len} bytes (more than 1 MiB) in {at}")]
    StringTooLong {
        /// Its claimed length.
        len: u64,
        /// Where.
        at: String,
    },
    /// A key, name or kept value that is not UTF-8.
    #[error("string is not UTF-8 in {at}")]
    NotUtf8 {
        /// Where.
        at: String,
    },
    /// A value type id outside 0..=12.
    #[error("unknown GGUF value type {value_type} in {at}")]
    UnknownValueType {
        /// The id.
        value_type: u32,
        /// Where.
        at: String,
    },
    /// An array of arrays (GGUF has none; llama.cpp refuses them).
    #[error("nested array in {at}")]
    NestedArray {
        /// Where.
        at: String,
    },
    /// A tensor with more dimensions than ggml's 4.
    #[error("{n_dims} dimensions (ggml allows at most 4) in {at}")]
    TooManyDims {
        /// The count in the file.
        n_dims: u32,
        /// Where.
        at: String,
    },
    /// A dimension that is negative as ggml's `int64_t`.
    #[error("dimension {dim} out of range in {at}")]
    BadDim {
        /// The dimension as stored.
        dim: u64,
        /// Where.
        at: String,
    },
    /// An element count, or their sum, that overflows 64 bits.
    #[error("element count overflows 64 bits in {at}")]
    Overflow {
        /// Where.
        at: String,
    },
    /// The header runs past the most [`inspect`] reads of a file.
    #[error("GGUF header larger than {limit} bytes")]
    HeaderTooLarge {
        /// The limit.
        limit: u64,
    },
}

/// Why a safetensors header cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SafetensorsProblem {
    /// The 8-byte header length exceeds the 100 MB limit.
    #[error("safetensors header of {len} bytes (more than 100 MB)")]
    HeaderTooLarge {
        /// The claimed length.
        len: u64,
    },
    /// The file ends before its header does.
    #[error(
        "safetensors file truncated: {file_len} bytes cannot hold an 8-byte length and a \
         {header_len}-byte header"
    )]
    Truncated {
        /// The claimed header length.
        header_len: u64,
        /// The file's length.
        file_len: u64,
    },
    /// More than a million tensors.
    #[error("safetensors header lists more than {max} tensors")]
    TooManyTensors {
        /// The most accepted.
        max: u64,
    },
    /// A tensor entry that cannot be right.
    #[error("tensor `{name}`: {what}")]
    BadTensor {
        /// The tensor's name.
        name: String,
        /// What is wrong.
        what: String,
    },
}

/// What [`inspect`] or [`inspect_gguf_bytes`] failed on; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum ModelFileError {
    /// A file-system call failed; `action` is what was being done to `path`.
    #[error("{action} {}", path.display())]
    Io {
        /// What was being done ("opening", "reading" …).
        action: &'static str,
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A GGUF header that cannot be read.
    #[error("{}: {problem}", path.display())]
    Gguf {
        /// The file (`<memory>` from [`inspect_gguf_bytes`]).
        path: PathBuf,
        /// What is wrong.
        problem: GgufProblem,
    },
    /// A safetensors header that cannot be read.
    #[error("{}: {problem}", path.display())]
    Safetensors {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: SafetensorsProblem,
    },
    /// A safetensors header, `config.json` or shard index that is not the JSON it should be.
    #[error("{}: {what} is not valid", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// Which JSON (`the safetensors header`, `config.json` …).
        what: &'static str,
        /// serde_json's account (line, column, what was expected).
        #[source]
        source: serde_json::Error,
    },
    /// A directory with no `*.safetensors` file.
    #[error("{}: no *.safetensors file in this directory", .0.display())]
    NoWeights(PathBuf),
    /// A shard index naming a file outside its directory or missing.
    #[error("{}: bad shard file name {name:?} in the weight_map", path.display())]
    BadShard {
        /// The index file.
        path: PathBuf,
        /// The name it gives.
        name: String,
    },
    /// Parameter counts summed over shards overflow 64 bits.
    #[error("{}: parameter count overflows 64 bits", .0.display())]
    Overflow(PathBuf),
    /// A file that is neither GGUF nor safetensors.
    #[error("{}: neither a GGUF nor a safetensors file", .0.display())]
    UnknownFormat(PathBuf),
}

impl ModelFileError {
    fn io(action: &'static str, path: &Path, source: std::io::Error) -> Self {
        ModelFileError::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Reads what a model file or directory holds from its headers: a `.gguf` file, a
/// `.safetensors` file, or a directory of `*.safetensors` shards (those named by
/// `model.safetensors.index.json` when there is one, so a stray `consolidated.safetensors` beside
/// the shards is not counted twice). Only the header region of each file is read.
pub fn inspect(path: &Path) -> Result<ModelFileInfo, ModelFileError> {
    let meta = std::fs::metadata(path).map_err(|e| ModelFileError::io("reading", path, e))?;
    if meta.is_dir() {
        return inspect_dir(path);
    }
    let mut file = File::open(path).map_err(|e| ModelFileError::io("opening", path, e))?;
    let len = meta.len();
    let mut buf = Vec::new();
    read_up_to(&mut file, path, &mut buf, len.min(FIRST_READ))?;
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let is_gguf = match ext.as_deref() {
        Some("gguf") => true,
        Some("safetensors") => false,
        // No telling extension: sniff the GGUF magic, or a safetensors header's opening brace.
        _ if buf.starts_with(b"GGUF") => true,
        _ if buf.get(8) == Some(&0x7b) => false, // an opening brace
        _ => return Err(ModelFileError::UnknownFormat(path.to_path_buf())),
    };
    if is_gguf {
        let header = read_gguf(&mut file, path, buf, len)?;
        let mut info = summarize(
            ModelFormat::Gguf,
            path,
            header
                .tensors
                .iter()
                .map(|t| (t.ggml_type.to_string(), t.elements(), t.dims.len())),
        );
        info.bytes = len;
        info.architecture = header.architecture;
        info.name = header.name;
        Ok(info)
    } else {
        let tensors = read_safetensors(&mut file, path, buf, len)?;
        let mut info = summarize(ModelFormat::Safetensors, path, tensors.into_iter());
        info.bytes = len;
        let dir = path.parent().unwrap_or(Path::new(""));
        info.architecture = config_model_type(&dir.join("config.json"))?;
        Ok(info)
    }
}

/// Parses a GGUF header from the first bytes of a file (all of it, or a prefix at least as long
/// as the header). Bytes that end inside the header give [`GgufProblem::Truncated`]; errors name
/// the path `<memory>`.
pub fn inspect_gguf_bytes(header: &[u8]) -> Result<GgufHeader, ModelFileError> {
    parse_gguf(header).map_err(|problem| ModelFileError::Gguf {
        path: PathBuf::from(IN_MEMORY),
        problem,
    })
}

/// Reads a whole safetensors file held in memory (header, then data: every tensor's
/// `data_offsets` is checked against the bytes after the header, as [`inspect`] checks them against
/// the file's length). The pure counterpart of [`inspect`] on one `.safetensors` file, without the
/// `config.json` beside it (`architecture` stays `None`); errors name the path `<memory>`.
pub fn inspect_safetensors_bytes(file: &[u8]) -> Result<ModelFileInfo, ModelFileError> {
    let path = Path::new(IN_MEMORY);
    let len = file.len() as u64;
    let end = safetensors_header_end(file, len).map_err(|p| safetensors_error(path, p))?;
    // `end <= len` was checked, so the slice is in range.
    let json = &file[8..end as usize];
    let tensors = parse_safetensors_header(json, len - end).map_err(|e| header_error(path, e))?;
    let mut info = summarize(ModelFormat::Safetensors, path, tensors.into_iter());
    info.bytes = len;
    Ok(info)
}

/// `model_type` of `config.json` text, `None` when the field is absent: what [`inspect`] reads
/// from the `config.json` beside safetensors weights. Errors name the path `<memory>`.
pub fn config_model_type_bytes(json: &[u8]) -> Result<Option<String>, ModelFileError> {
    Ok(parse_side_json::<Config>(json, Path::new(IN_MEMORY), "config.json")?.model_type)
}

/// Tensors as (type name, elements, number of dims) → a [`ModelFileInfo`] with `bytes`,
/// `architecture` and `name` left for the caller.
fn summarize(
    format: ModelFormat,
    path: &Path,
    tensors: impl Iterator<Item = (String, u64, usize)>,
) -> ModelFileInfo {
    let mut all: BTreeMap<String, u64> = BTreeMap::new();
    let mut matrices: BTreeMap<String, u64> = BTreeMap::new();
    let mut params = 0u64;
    for (ty, n, ndims) in tensors {
        // Callers have checked the sums; saturating keeps this total.
        params = params.saturating_add(n);
        if ndims >= 2 {
            let e = matrices.entry(ty.clone()).or_default();
            *e = e.saturating_add(n);
        }
        let e = all.entry(ty).or_default();
        *e = e.saturating_add(n);
    }
    let ranked = |m: BTreeMap<String, u64>| {
        let mut v: Vec<(String, u64)> = m.into_iter().collect();
        // Stable over the BTreeMap's name order, so ties go by name.
        v.sort_by_key(|t| std::cmp::Reverse(t.1));
        v
    };
    let precision = ranked(matrices)
        .first()
        .and_then(|(ty, _)| precision_of(ty));
    ModelFileInfo {
        format,
        path: path.to_path_buf(),
        bytes: 0,
        params,
        precision,
        weight_types: ranked(all),
        architecture: None,
        name: None,
    }
}

/// Appends to `buf` (which holds the file's first `buf.len()` bytes, the file positioned after
/// them) until it holds `want` bytes or the file ends.
fn read_up_to(
    file: &mut File,
    path: &Path,
    buf: &mut Vec<u8>,
    want: u64,
) -> Result<(), ModelFileError> {
    let have = buf.len() as u64;
    if want > have {
        file.take(want - have)
            .read_to_end(buf)
            .map_err(|e| ModelFileError::io("reading", path, e))?;
    }
    Ok(())
}

/// Parses the GGUF header, reading twice as much of the file each time the bytes so far end
/// inside it.
fn read_gguf(
    file: &mut File,
    path: &Path,
    mut buf: Vec<u8>,
    len: u64,
) -> Result<GgufHeader, ModelFileError> {
    loop {
        let problem = match parse_gguf(&buf) {
            Ok(header) => return Ok(header),
            Err(problem) => problem,
        };
        let have = buf.len() as u64;
        let more = matches!(problem, GgufProblem::Truncated { .. }) && have < len;
        if !more {
            return Err(ModelFileError::Gguf {
                path: path.to_path_buf(),
                problem,
            });
        }
        if have >= MAX_GGUF_HEADER {
            return Err(ModelFileError::Gguf {
                path: path.to_path_buf(),
                problem: GgufProblem::HeaderTooLarge {
                    limit: MAX_GGUF_HEADER,
                },
            });
        }
        let want = have
            .saturating_mul(2)
            .max(FIRST_READ)
            .min(len)
            .min(MAX_GGUF_HEADER);
        read_up_to(file, path, &mut buf, want)?;
        if buf.len() as u64 == have {
            // The file shrank under us: report the truncation as it stands.
            return Err(ModelFileError::Gguf {
                path: path.to_path_buf(),
                problem,
            });
        }
    }
}

/// Where the GGUF parser is, for error messages (built only when an error is).
#[derive(Clone, Copy)]
enum At<'a> {
    FileHeader,
    Kv(u64, Option<&'a str>),
    Tensor(u64, Option<&'a str>),
    Total,
}

impl fmt::Display for At<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            At::FileHeader => write!(f, "the file header"),
            At::Kv(i, None) => write!(f, "KV {i}"),
            At::Kv(i, Some(key)) => write!(f, "KV {i} (`{key}`)"),
            At::Tensor(i, None) => write!(f, "tensor info {i}"),
            At::Tensor(i, Some(name)) => write!(f, "tensor info {i} (`{name}`)"),
            At::Total => write!(f, "the total parameter count"),
        }
    }
}

/// GGUF value type ids (gguf.h `enum gguf_type`).
const GGUF_STRING: u32 = 8;
const GGUF_ARRAY: u32 = 9;

struct Gguf<'a> {
    buf: &'a [u8],
    pos: usize,
    at: At<'a>,
}

impl<'a> Gguf<'a> {
    fn take(&mut self, n: u64) -> Result<&'a [u8], GgufProblem> {
        let rest = &self.buf[self.pos..];
        match usize::try_from(n) {
            Ok(n) if n <= rest.len() => {
                self.pos += n;
                Ok(&rest[..n])
            }
            _ => Err(GgufProblem::Truncated {
                at: self.at.to_string(),
            }),
        }
    }

    fn u32(&mut self) -> Result<u32, GgufProblem> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, GgufProblem> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    fn raw_str(&mut self) -> Result<&'a [u8], GgufProblem> {
        let len = self.u64()?;
        if len > MAX_STRING_BYTES {
            return Err(GgufProblem::StringTooLong {
                len,
                at: self.at.to_string(),
            });
        }
        self.take(len)
    }

    fn str(&mut self) -> Result<&'a str, GgufProblem> {
        let b = self.raw_str()?;
        std::str::from_utf8(b).map_err(|_| GgufProblem::NotUtf8 {
            at: self.at.to_string(),
        })
    }

    /// Bytes of one element of a fixed-size value type.
    fn fixed_size(&self, value_type: u32) -> Result<Option<u64>, GgufProblem> {
        Ok(match value_type {
            0 | 1 | 7 => Some(1),
            2 | 3 => Some(2),
            4..=6 => Some(4),
            10..=12 => Some(8),
            GGUF_STRING | GGUF_ARRAY => None,
            _ => {
                return Err(GgufProblem::UnknownValueType {
                    value_type,
                    at: self.at.to_string(),
                })
            }
        })
    }

    /// Steps over a value without keeping it (vocabularies are arrays of 100k+ strings).
    fn skip_value(&mut self, value_type: u32) -> Result<(), GgufProblem> {
        if let Some(size) = self.fixed_size(value_type)? {
            self.take(size)?;
            return Ok(());
        }
        if value_type == GGUF_STRING {
            self.raw_str()?;
            return Ok(());
        }
        let elem = self.u32()?;
        let count = self.u64()?;
        if elem == GGUF_ARRAY {
            return Err(GgufProblem::NestedArray {
                at: self.at.to_string(),
            });
        }
        match self.fixed_size(elem)? {
            Some(size) => {
                let bytes = count
                    .checked_mul(size)
                    .ok_or_else(|| GgufProblem::Truncated {
                        at: self.at.to_string(),
                    })?;
                self.take(bytes)?;
            }
            None => {
                // Each string takes at least its 8-byte length, so a huge count ends in a
                // truncation after at most len/8 steps.
                for _ in 0..count {
                    self.raw_str()?;
                }
            }
        }
        Ok(())
    }
}

fn parse_gguf(buf: &[u8]) -> Result<GgufHeader, GgufProblem> {
    let mut p = Gguf {
        buf,
        pos: 0,
        at: At::FileHeader,
    };
    let magic = p.take(4)?;
    if magic != b"GGUF" {
        return Err(GgufProblem::BadMagic([
            magic[0], magic[1], magic[2], magic[3],
        ]));
    }
    let version = p.u32()?;
    if version != 0 && version & 0xffff == 0 {
        return Err(GgufProblem::BigEndian(version));
    }
    if !(2..=3).contains(&version) {
        return Err(GgufProblem::UnsupportedVersion(version));
    }
    let tensor_count = p.u64()?;
    let kv_count = p.u64()?;
    for (what, count, max) in [
        ("tensors", tensor_count, MAX_TENSORS),
        ("key-value pairs", kv_count, MAX_KVS),
    ] {
        if count > max {
            return Err(GgufProblem::TooMany { what, count, max });
        }
    }

    let mut architecture = None;
    let mut name = None;
    for i in 0..kv_count {
        p.at = At::Kv(i, None);
        let key = p.str()?;
        p.at = At::Kv(i, Some(key));
        let value_type = p.u32()?;
        let keep = match key {
            "general.architecture" => Some(&mut architecture),
            "general.name" => Some(&mut name),
            _ => None,
        };
        match keep {
            Some(slot) if value_type == GGUF_STRING => *slot = Some(p.str()?.to_string()),
            _ => p.skip_value(value_type)?,
        }
    }

    // Reserve by what the bytes can hold, not by the claimed count.
    let mut tensors = Vec::with_capacity((tensor_count as usize).min(buf.len() / 24));
    let mut params = 0u64;
    for i in 0..tensor_count {
        p.at = At::Tensor(i, None);
        let tname = p.str()?;
        p.at = At::Tensor(i, Some(tname));
        let n_dims = p.u32()?;
        if n_dims > GGML_MAX_DIMS {
            return Err(GgufProblem::TooManyDims {
                n_dims,
                at: p.at.to_string(),
            });
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        let mut elements = 1u64;
        for _ in 0..n_dims {
            let dim = p.u64()?;
            if dim > i64::MAX as u64 {
                return Err(GgufProblem::BadDim {
                    dim,
                    at: p.at.to_string(),
                });
            }
            elements = elements
                .checked_mul(dim)
                .ok_or_else(|| GgufProblem::Overflow {
                    at: p.at.to_string(),
                })?;
            dims.push(dim);
        }
        let ggml_type = GgmlType(p.u32()?);
        let offset = p.u64()?;
        params = params.checked_add(elements).ok_or(GgufProblem::Overflow {
            at: At::Total.to_string(),
        })?;
        tensors.push(GgufTensorInfo {
            name: tname.to_string(),
            dims,
            ggml_type,
            offset,
        });
    }
    Ok(GgufHeader {
        version,
        architecture,
        name,
        tensors,
        params,
        len: p.pos as u64,
    })
}

/// One safetensors tensor as (dtype, elements, number of dims), the shape [`summarize`] takes.
type TensorSummary = (String, u64, usize);

/// Reads and checks a safetensors header (the file positioned after `buf`'s bytes).
fn read_safetensors(
    file: &mut File,
    path: &Path,
    mut buf: Vec<u8>,
    len: u64,
) -> Result<Vec<TensorSummary>, ModelFileError> {
    let end = safetensors_header_end(&buf, len).map_err(|p| safetensors_error(path, p))?;
    read_up_to(file, path, &mut buf, end)?;
    let json = buf.get(8..end as usize).ok_or_else(|| {
        safetensors_error(
            path,
            SafetensorsProblem::Truncated {
                header_len: end - 8,
                file_len: buf.len() as u64,
            },
        )
    })?;
    parse_safetensors_header(json, len - end).map_err(|e| header_error(path, e))
}

/// The end of a safetensors header (8 + its length), checked against the limit and against
/// `len`, the file's length; `buf` holds at least the file's first 8 bytes when it has them.
fn safetensors_header_end(buf: &[u8], len: u64) -> Result<u64, SafetensorsProblem> {
    let header_len = match buf.get(..8) {
        Some(b) => {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            u64::from_le_bytes(a)
        }
        None => {
            return Err(SafetensorsProblem::Truncated {
                header_len: 0,
                file_len: len,
            })
        }
    };
    if header_len > MAX_SAFETENSORS_HEADER {
        return Err(SafetensorsProblem::HeaderTooLarge { len: header_len });
    }
    let end = 8 + header_len;
    if end > len {
        return Err(SafetensorsProblem::Truncated {
            header_len,
            file_len: len,
        });
    }
    Ok(end)
}

fn safetensors_error(path: &Path, problem: SafetensorsProblem) -> ModelFileError {
    ModelFileError::Safetensors {
        path: path.to_path_buf(),
        problem,
    }
}

fn header_error(path: &Path, e: HeaderError) -> ModelFileError {
    match e {
        HeaderError::Json(source) => ModelFileError::Json {
            path: path.to_path_buf(),
            what: "the safetensors header",
            source,
        },
        HeaderError::Problem(problem) => safetensors_error(path, problem),
    }
}

enum HeaderError {
    Json(serde_json::Error),
    Problem(SafetensorsProblem),
}

/// One entry of a safetensors header; `shape` is read through [`Shape`] so a hostile one cannot
/// allocate more than 8 numbers.
#[derive(Deserialize)]
struct Entry {
    dtype: String,
    shape: Shape,
    data_offsets: [u64; 2],
}

struct Shape(Result<Vec<u64>, usize>);

impl<'de> Deserialize<'de> for Shape {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Shape;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array of dimensions")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Shape, A::Error> {
                let mut dims = Vec::new();
                let mut n = 0usize;
                while let Some(d) = seq.next_element::<u64>()? {
                    n += 1;
                    if n <= MAX_SAFETENSORS_DIMS {
                        dims.push(d);
                    }
                }
                Ok(Shape(if n <= MAX_SAFETENSORS_DIMS {
                    Ok(dims)
                } else {
                    Err(n)
                }))
            }
        }
        d.deserialize_seq(V)
    }
}

/// The header's tensors in order, at most `MAX` of them; `__metadata__` is skipped unread.
struct Entries<const MAX: u64>(Vec<(String, Entry)>);

impl<'de, const MAX: u64> Deserialize<'de> for Entries<MAX> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<const MAX: u64>;
        impl<'de, const MAX: u64> Visitor<'de> for V<MAX> {
            type Value = Entries<MAX>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object of tensors")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries<MAX>, A::Error> {
                let mut out: Vec<(String, Entry)> = Vec::new();
                while let Some(name) = map.next_key::<String>()? {
                    if name == "__metadata__" {
                        map.next_value::<IgnoredAny>()?;
                        continue;
                    }
                    if out.len() as u64 >= MAX {
                        return Err(de::Error::custom(TOO_MANY));
                    }
                    let entry = map.next_value::<Entry>()?;
                    out.push((name, entry));
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(V::<MAX>)
    }
}

/// The message by which the visitor's tensor-count refusal is told from a JSON error.
const TOO_MANY: &str = "too many tensors";

/// Bytes per element of the safetensors dtypes of a fixed whole-byte size.
fn dtype_size(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "BOOL" | "U8" | "I8" | "F8_E4M3" | "F8_E5M2" => 1,
        "U16" | "I16" | "F16" | "BF16" => 2,
        "U32" | "I32" | "F32" => 4,
        "U64" | "I64" | "F64" => 8,
        _ => return None,
    })
}

fn parse_safetensors_header(json: &[u8], data_len: u64) -> Result<Vec<TensorSummary>, HeaderError> {
    parse_safetensors_header_max::<MAX_TENSORS>(json, data_len)
}

/// [`parse_safetensors_header`] with the tensor limit a parameter, so a test can reach it.
fn parse_safetensors_header_max<const MAX: u64>(
    json: &[u8],
    data_len: u64,
) -> Result<Vec<TensorSummary>, HeaderError> {
    let entries = match serde_json::from_slice::<Entries<MAX>>(json) {
        Ok(e) => e.0,
        Err(e) if e.to_string().starts_with(TOO_MANY) => {
            return Err(HeaderError::Problem(SafetensorsProblem::TooManyTensors {
                max: MAX,
            }))
        }
        Err(e) => return Err(HeaderError::Json(e)),
    };
    let mut out = Vec::with_capacity(entries.len());
    let mut params = 0u64;
    for (name, e) in entries {
        let fail = |what: String| {
            HeaderError::Problem(SafetensorsProblem::BadTensor {
                name: name.clone(),
                what,
            })
        };
        let dims = match e.shape.0 {
            Ok(d) => d,
            Err(n) => {
                return Err(fail(format!(
                    "{n} dimensions (at most {MAX_SAFETENSORS_DIMS} accepted)"
                )))
            }
        };
        let elements = dims
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d))
            .ok_or_else(|| fail("element count overflows 64 bits".into()))?;
        let [start, end] = e.data_offsets;
        if start > end || end > data_len {
            return Err(fail(format!(
                "data_offsets [{start}, {end}] outside the {data_len} data bytes"
            )));
        }
        if let Some(size) = dtype_size(&e.dtype) {
            if elements.checked_mul(size) != Some(end - start) {
                return Err(fail(format!(
                    "data_offsets span {} bytes but {} {:?} needs {} × {size}",
                    end - start,
                    e.dtype,
                    dims,
                    elements
                )));
            }
        }
        params = params
            .checked_add(elements)
            .ok_or_else(|| fail("parameter count overflows 64 bits".into()))?;
        out.push((e.dtype, elements, dims.len()));
    }
    Ok(out)
}

/// Reads a whole small JSON side file (`config.json`, the shard index), `None` when absent.
fn read_side_json<T: for<'de> Deserialize<'de>>(
    path: &Path,
    what: &'static str,
) -> Result<Option<T>, ModelFileError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ModelFileError::io("opening", path, e)),
    };
    let mut bytes = Vec::new();
    file.take(MAX_SIDE_JSON)
        .read_to_end(&mut bytes)
        .map_err(|e| ModelFileError::io("reading", path, e))?;
    parse_side_json(&bytes, path, what).map(Some)
}

/// Parses the bytes of a side JSON file read from `path`.
fn parse_side_json<T: for<'de> Deserialize<'de>>(
    bytes: &[u8],
    path: &Path,
    what: &'static str,
) -> Result<T, ModelFileError> {
    let json_error = |source| ModelFileError::Json {
        path: path.to_path_buf(),
        what,
        source,
    };
    // serde's derived structs also read an array of their fields in order, so `["qwen2"]` read as
    // a config with `model_type` qwen2 (found by the `config_json` fuzz target). Both
    // files are JSON objects.
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&0x5b) {
        // an opening bracket
        return Err(json_error(de::Error::invalid_type(
            de::Unexpected::Seq,
            &"a JSON object",
        )));
    }
    serde_json::from_slice(bytes).map_err(json_error)
}

/// The one field of `config.json` read.
#[derive(Deserialize)]
struct Config {
    model_type: Option<String>,
}

/// `model_type` of a `config.json`, `None` when the file or the field is absent.
fn config_model_type(path: &Path) -> Result<Option<String>, ModelFileError> {
    Ok(read_side_json::<Config>(path, "config.json")?.and_then(|c| c.model_type))
}

fn inspect_dir(dir: &Path) -> Result<ModelFileInfo, ModelFileError> {
    #[derive(Deserialize)]
    struct Index {
        weight_map: BTreeMap<String, String>,
    }
    let index_path = dir.join("model.safetensors.index.json");
    let shards: Vec<PathBuf> = match read_side_json::<Index>(&index_path, "the shard index")? {
        Some(index) => {
            let mut names: Vec<&String> = index.weight_map.values().collect();
            names.sort();
            names.dedup();
            let mut shards = Vec::with_capacity(names.len());
            for name in names {
                // Only plain file names: an index must not point outside its directory.
                let plain = Path::new(name).file_name().map(|f| f == name.as_str()) == Some(true);
                if !plain {
                    return Err(ModelFileError::BadShard {
                        path: index_path,
                        name: name.clone(),
                    });
                }
                shards.push(dir.join(name));
            }
            shards
        }
        None => {
            let mut shards = Vec::new();
            for entry in
                std::fs::read_dir(dir).map_err(|e| ModelFileError::io("listing", dir, e))?
            {
                let entry = entry.map_err(|e| ModelFileError::io("listing", dir, e))?;
                let p = entry.path();
                let is_shard = p
                    .extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| e.eq_ignore_ascii_case("safetensors"));
                if is_shard && p.is_file() {
                    shards.push(p);
                }
            }
            shards.sort();
            shards
        }
    };
    if shards.is_empty() {
        return Err(ModelFileError::NoWeights(dir.to_path_buf()));
    }
    let mut tensors = Vec::new();
    let mut bytes = 0u64;
    let mut params = 0u64;
    for shard in &shards {
        let mut file = File::open(shard).map_err(|e| ModelFileError::io("opening", shard, e))?;
        let len = file
            .metadata()
            .map_err(|e| ModelFileError::io("reading", shard, e))?
            .len();
        let mut buf = Vec::new();
        read_up_to(&mut file, shard, &mut buf, len.min(FIRST_READ))?;
        let found = read_safetensors(&mut file, shard, buf, len)?;
        for t in &found {
            params = params
                .checked_add(t.1)
                .ok_or_else(|| ModelFileError::Overflow(dir.to_path_buf()))?;
        }
        bytes = bytes.saturating_add(len);
        tensors.extend(found);
    }
    let mut info = summarize(ModelFormat::Safetensors, dir, tensors.into_iter());
    info.bytes = bytes;
    info.architecture = config_model_type(&dir.join("config.json"))?;
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A little-endian GGUF writer, just enough for headers.
    #[derive(Default)]
    struct W(Vec<u8>);

    impl W {
        fn u32(&mut self, v: u32) -> &mut Self {
            self.0.extend_from_slice(&v.to_le_bytes());
            self
        }
        fn u64(&mut self, v: u64) -> &mut Self {
            self.0.extend_from_slice(&v.to_le_bytes());
            self
        }
        fn str(&mut self, s: &str) -> &mut Self {
            self.u64(s.len() as u64);
            self.0.extend_from_slice(s.as_bytes());
            self
        }
        fn start(&mut self, version: u32, tensors: u64, kvs: u64) -> &mut Self {
            self.0.extend_from_slice(b"GGUF");
            self.u32(version).u64(tensors).u64(kvs)
        }
        fn kv_str(&mut self, key: &str, v: &str) -> &mut Self {
            self.str(key).u32(GGUF_STRING).str(v)
        }
        fn kv_u32(&mut self, key: &str, v: u32) -> &mut Self {
            self.str(key).u32(4).u32(v)
        }
        fn kv_str_array(&mut self, key: &str, items: &[String]) -> &mut Self {
            self.str(key).u32(GGUF_ARRAY).u32(GGUF_STRING);
            self.u64(items.len() as u64);
            for s in items {
                self.str(s);
            }
            self
        }
        fn kv_f32_array(&mut self, key: &str, items: &[f32]) -> &mut Self {
            self.str(key).u32(GGUF_ARRAY).u32(6).u64(items.len() as u64);
            for x in items {
                self.0.extend_from_slice(&x.to_le_bytes());
            }
            self
        }
        fn tensor(&mut self, name: &str, dims: &[u64], ty: u32, offset: u64) -> &mut Self {
            self.str(name).u32(dims.len() as u32);
            for &d in dims {
                self.u64(d);
            }
            self.u32(ty).u64(offset)
        }
    }

    fn tokens(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("tok{i}")).collect()
    }

    /// A v3 header: 6 KVs (one a string array), 2-D Q4_K matrices, a large 1-D F32 vector, a
    /// small 2-D F16 matrix.
    fn sample(vocab: usize) -> Vec<u8> {
        let mut w = W::default();
        w.start(3, 4, 6)
            .kv_str("general.architecture", "llama")
            .kv_u32("general.alignment", 32)
            .kv_str("general.name", "Tiny Llama")
            .kv_str_array("tokenizer.ggml.tokens", &tokens(vocab))
            .kv_f32_array("tokenizer.ggml.scores", &[0.5, -1.0])
            .kv_u32("llama.block_count", 1)
            .tensor("token_embd.weight", &[256, 32], 12, 0)
            .tensor("blk.0.attn_q.weight", &[256, 256], 12, 4608)
            .tensor("output_norm.weight", &[100_000], 0, 41472)
            .tensor("blk.0.ffn_gate.weight", &[16, 16], 1, 441472);
        w.0
    }

    const SAMPLE_PARAMS: u64 = 256 * 32 + 256 * 256 + 100_000 + 256;

    fn problem(r: Result<GgufHeader, ModelFileError>) -> GgufProblem {
        match r {
            Err(ModelFileError::Gguf { problem, .. }) => problem,
            other => panic!("expected a GGUF error, got {other:?}"),
        }
    }

    /// A fresh scratch directory for one test.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("qe-modelfile-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn gguf_header_parses() {
        let bytes = sample(5);
        let h = inspect_gguf_bytes(&bytes).unwrap();
        assert_eq!(h.version, 3);
        assert_eq!(h.architecture.as_deref(), Some("llama"));
        assert_eq!(h.name.as_deref(), Some("Tiny Llama"));
        assert_eq!(h.tensors.len(), 4);
        assert_eq!(h.tensors[1].name, "blk.0.attn_q.weight");
        assert_eq!(h.tensors[1].dims, vec![256, 256]);
        assert_eq!(h.tensors[1].ggml_type, GgmlType(12));
        assert_eq!(h.tensors[1].offset, 4608);
        assert_eq!(h.params, SAMPLE_PARAMS);
        assert_eq!(h.len, bytes.len() as u64);
        // Trailing bytes (padding, tensor data) are not the parser's business.
        let mut longer = bytes.clone();
        longer.extend_from_slice(&[0xAA; 100]);
        assert_eq!(inspect_gguf_bytes(&longer).unwrap(), h);
        // v2 has the same layout.
        let mut v2 = bytes;
        v2[4] = 2;
        assert_eq!(inspect_gguf_bytes(&v2).unwrap().version, 2);
    }

    #[test]
    fn ggml_type_names_and_precisions() {
        assert_eq!(GgmlType(12).to_string(), "Q4_K");
        assert_eq!(GgmlType(30).to_string(), "BF16");
        assert_eq!(GgmlType(24).to_string(), "I8");
        assert_eq!(GgmlType(4).to_string(), "ggml type 4");
        assert_eq!(GgmlType(99).name(), None);
        assert_eq!(GgmlType(12).precision(), Some(Precision::Q4K));
        assert_eq!(GgmlType(1).precision(), Some(Precision::Fp16));
        assert_eq!(GgmlType(2).precision(), Some(Precision::Q4_0));
        assert_eq!(GgmlType(30).precision(), Some(Precision::Bf16));
        assert_eq!(GgmlType(16).precision(), None);
        // Every Precision named here spells its schema value like the type name.
        for ty in [0, 1, 2, 8, 12, 13, 14, 30] {
            let p = GgmlType(ty).precision().unwrap();
            let spelled: Precision = GgmlType(ty).name().unwrap().parse().unwrap();
            assert_eq!(p, spelled);
        }
    }

    #[test]
    fn inspect_gguf_file_reads_the_header_only() {
        let dir = scratch("gguf");
        // A vocabulary big enough (≈ 4 MB) that the first 1 MiB read ends inside it.
        let mut bytes = sample(300_000);
        let header_len = bytes.len();
        assert!(header_len as u64 > 2 * FIRST_READ);
        bytes.resize(header_len + 4096, 0);
        let path = dir.join("tiny.gguf");
        std::fs::write(&path, &bytes).unwrap();
        let info = inspect(&path).unwrap();
        assert_eq!(info.format, ModelFormat::Gguf);
        assert_eq!(info.path, path);
        assert_eq!(info.bytes, bytes.len() as u64);
        assert_eq!(info.params, SAMPLE_PARAMS);
        // The 1-D F32 norm holds the most elements, but precision looks at matrices only.
        assert_eq!(info.precision, Some(Precision::Q4K));
        assert_eq!(
            info.weight_types,
            vec![
                ("F32".to_string(), 100_000),
                ("Q4_K".to_string(), 256 * 32 + 256 * 256),
                ("F16".to_string(), 256),
            ]
        );
        assert_eq!(info.architecture.as_deref(), Some("llama"));
        assert_eq!(info.name.as_deref(), Some("Tiny Llama"));

        // No extension: the magic tells.
        let bare = dir.join("model");
        std::fs::write(&bare, &bytes).unwrap();
        assert_eq!(inspect(&bare).unwrap().params, SAMPLE_PARAMS);

        // A file cut inside the header (past the first read) is a truncation naming the file.
        let cut = dir.join("cut.gguf");
        std::fs::write(&cut, &bytes[..header_len - 3]).unwrap();
        let e = inspect(&cut).unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with(&cut.display().to_string()), "{text}");
        assert!(
            text.ends_with(
                "GGUF header truncated while reading tensor info 3 (`blk.0.ffn_gate.weight`)"
            ),
            "{text}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn every_prefix_is_a_truncation() {
        let bytes = sample(3);
        for n in 0..bytes.len() {
            match problem(inspect_gguf_bytes(&bytes[..n])) {
                GgufProblem::Truncated { .. } => {}
                p => panic!("prefix {n}: {p}"),
            }
        }
        assert!(inspect_gguf_bytes(&bytes).is_ok());
    }

    #[test]
    fn truncation_says_where() {
        let bytes = sample(3);
        let at = |n: usize| problem(inspect_gguf_bytes(&bytes[..n])).to_string();
        assert_eq!(
            at(10),
            "GGUF header truncated while reading the file header"
        );
        // Inside the first key's length, then after it.
        assert_eq!(at(26), "GGUF header truncated while reading KV 0");
        assert_eq!(
            at(24 + 8 + 20 + 2),
            "GGUF header truncated while reading KV 0 (`general.architecture`)"
        );
        assert!(at(bytes.len() - 1).ends_with("tensor info 3 (`blk.0.ffn_gate.weight`)"));
        let e = inspect_gguf_bytes(&bytes[..bytes.len() - 1]).unwrap_err();
        assert!(
            e.to_string().starts_with("<memory>: GGUF header truncated"),
            "{e}"
        );
    }

    #[test]
    fn bad_magic_and_versions() {
        let mut bytes = sample(3);
        bytes[..4].copy_from_slice(b"GGML");
        let e = inspect_gguf_bytes(&bytes).unwrap_err();
        assert_eq!(e.to_string(), "<memory>: not a GGUF file (magic \"GGML\")");
        bytes[..4].copy_from_slice(&[0, 0xff, b'G', b'\n']);
        assert_eq!(
            problem(inspect_gguf_bytes(&bytes)).to_string(),
            "not a GGUF file (magic \"\\x00\\xffG\\n\")"
        );

        for (version, want) in [
            (1, GgufProblem::UnsupportedVersion(1)),
            (0, GgufProblem::UnsupportedVersion(0)),
            (4, GgufProblem::UnsupportedVersion(4)),
            (0x0300_0000, GgufProblem::BigEndian(0x0300_0000)),
        ] {
            let mut b = sample(3);
            b[4..8].copy_from_slice(&u32::to_le_bytes(version));
            assert_eq!(problem(inspect_gguf_bytes(&b)), want);
        }
        assert_eq!(
            GgufProblem::UnsupportedVersion(1).to_string(),
            "unsupported GGUF version 1 (2 and 3 are read)"
        );
    }

    #[test]
    fn absurd_counts_and_values() {
        let p = |w: &W| problem(inspect_gguf_bytes(&w.0));
        let mut w = W::default();
        w.start(3, 1 << 40, 0);
        assert!(
            matches!(p(&w), GgufProblem::TooMany { what: "tensors", count, .. } if count == 1 << 40)
        );
        let mut w = W::default();
        w.start(3, 0, u64::MAX);
        assert!(matches!(
            p(&w),
            GgufProblem::TooMany {
                what: "key-value pairs",
                ..
            }
        ));

        // A string claiming a terabyte.
        let mut w = W::default();
        w.start(3, 0, 1).u64(1 << 40);
        assert!(matches!(p(&w), GgufProblem::StringTooLong { len, .. } if len == 1 << 40));

        // Value types: unknown, nested array, array of unknown, u8 array overflowing its size.
        let mut w = W::default();
        w.start(3, 0, 1).str("k").u32(13);
        assert_eq!(
            p(&w).to_string(),
            "unknown GGUF value type 13 in KV 0 (`k`)"
        );
        let mut w = W::default();
        w.start(3, 0, 1)
            .str("k")
            .u32(GGUF_ARRAY)
            .u32(GGUF_ARRAY)
            .u64(1);
        assert!(matches!(p(&w), GgufProblem::NestedArray { .. }));
        let mut w = W::default();
        w.start(3, 0, 1).str("k").u32(GGUF_ARRAY).u32(77).u64(1);
        assert!(matches!(
            p(&w),
            GgufProblem::UnknownValueType { value_type: 77, .. }
        ));
        let mut w = W::default();
        w.start(3, 0, 1)
            .str("k")
            .u32(GGUF_ARRAY)
            .u32(12)
            .u64(u64::MAX);
        assert!(matches!(p(&w), GgufProblem::Truncated { .. }));
        // A string array claiming 2^60 elements ends at the bytes' end, without allocating.
        let mut w = W::default();
        w.start(3, 0, 1)
            .str("k")
            .u32(GGUF_ARRAY)
            .u32(GGUF_STRING)
            .u64(1 << 60);
        w.str("a").str("b");
        assert!(matches!(p(&w), GgufProblem::Truncated { .. }));

        // general.name of another type is skipped, not kept.
        let mut w = W::default();
        w.start(3, 0, 1).kv_u32("general.name", 7);
        assert_eq!(inspect_gguf_bytes(&w.0).unwrap().name, None);

        // Tensor infos: too many dims, a negative dim, overflowing products and sums.
        let mut w = W::default();
        w.start(3, 1, 0).str("t").u32(5);
        assert_eq!(
            p(&w).to_string(),
            "5 dimensions (ggml allows at most 4) in tensor info 0 (`t`)"
        );
        let mut w = W::default();
        w.start(3, 1, 0).tensor("t", &[u64::MAX], 0, 0);
        assert!(matches!(p(&w), GgufProblem::BadDim { dim: u64::MAX, .. }));
        let mut w = W::default();
        w.start(3, 1, 0).tensor("t", &[1 << 40, 1 << 40], 0, 0);
        assert!(matches!(p(&w), GgufProblem::Overflow { .. }));
        let mut w = W::default();
        let big = i64::MAX as u64;
        w.start(3, 3, 0)
            .tensor("a", &[big], 0, 0)
            .tensor("b", &[big], 0, 0)
            .tensor("c", &[big], 0, 0);
        assert_eq!(
            p(&w).to_string(),
            "element count overflows 64 bits in the total parameter count"
        );
        // An unknown ggml type is kept, named by its id, with no precision.
        let mut w = W::default();
        w.start(3, 1, 0).tensor("t", &[4, 4], 1234, 0);
        let h = inspect_gguf_bytes(&w.0).unwrap();
        assert_eq!(h.tensors[0].ggml_type.to_string(), "ggml type 1234");
    }

    /// A safetensors file of `tensors` (name, dtype, shape) with zeroed data.
    fn safetensors(tensors: &[(&str, &str, &[u64])]) -> Vec<u8> {
        let mut header = serde_json::Map::new();
        header.insert(
            "__metadata__".into(),
            serde_json::json!({"format": "pt", "nested": {"ignored": [1, 2]}}),
        );
        let mut offset = 0u64;
        for (name, dtype, shape) in tensors {
            let n: u64 = shape.iter().product::<u64>() * dtype_size(dtype).unwrap();
            header.insert(
                name.to_string(),
                serde_json::json!({
                    "dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]
                }),
            );
            offset += n;
        }
        let json = serde_json::to_vec(&header).unwrap();
        let mut out = (json.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(&json);
        out.resize(out.len() + offset as usize, 0);
        out
    }

    /// The pure readers the fuzz targets drive read what `inspect` reads from a file.
    #[test]
    fn safetensors_and_config_bytes_read_as_files_do() {
        let one = safetensors(&[("w", "BF16", &[10, 4]), ("n", "F32", &[4])]);
        let info = inspect_safetensors_bytes(&one).unwrap();
        assert_eq!(info.path, PathBuf::from("<memory>"));
        assert_eq!((info.bytes, info.params), (one.len() as u64, 44));
        assert_eq!(info.precision, Some(Precision::Bf16));
        let path = scratch("st-bytes").join("model.safetensors");
        std::fs::write(&path, &one).unwrap();
        let file = inspect(&path).unwrap();
        assert_eq!(file.weight_types, info.weight_types);
        // One byte of data missing: refused, as from a file.
        assert!(matches!(
            inspect_safetensors_bytes(&one[..one.len() - 1]),
            Err(ModelFileError::Safetensors {
                problem: SafetensorsProblem::BadTensor { .. },
                ..
            })
        ));
        assert!(matches!(
            inspect_safetensors_bytes(&one[..7]),
            Err(ModelFileError::Safetensors {
                problem: SafetensorsProblem::Truncated { .. },
                ..
            })
        ));
        assert_eq!(
            config_model_type_bytes(br#"{"model_type": "qwen2", "x": [1]}"#).unwrap(),
            Some("qwen2".to_string())
        );
        assert_eq!(config_model_type_bytes(b"{}").unwrap(), None);
        // An array of the fields in order is not a config (a fuzz finding).
        let err = config_model_type_bytes(br#" ["qwen2"]"#).unwrap_err();
        assert!(
            format!("{:?}", err).contains("expected a JSON object"),
            "{err:?}"
        );
        assert!(config_model_type_bytes(br#"{"model_type": 3}"#).is_err());
    }

    #[test]
    fn safetensors_file_and_directory() {
        let dir = scratch("st");
        let one = safetensors(&[
            ("model.embed_tokens.weight", "BF16", &[10, 4]),
            ("model.norm.weight", "F32", &[4]),
        ]);
        let path = dir.join("model.safetensors");
        std::fs::write(&path, &one).unwrap();
        let info = inspect(&path).unwrap();
        assert_eq!(info.format, ModelFormat::Safetensors);
        assert_eq!(info.bytes, one.len() as u64);
        assert_eq!(info.params, 44);
        assert_eq!(info.precision, Some(Precision::Bf16));
        assert_eq!(
            info.weight_types,
            vec![("BF16".to_string(), 40), ("F32".to_string(), 4)]
        );
        assert_eq!(info.architecture, None);
        assert_eq!(info.name, None);

        // A directory of two shards and a config.json.
        std::fs::remove_file(&path).unwrap();
        let a = safetensors(&[("a.weight", "F16", &[8, 8]), ("a.bias", "F32", &[8])]);
        let b = safetensors(&[("b.weight", "F16", &[8, 4]), ("b.scale", "I8", &[100, 3])]);
        std::fs::write(dir.join("model-00001-of-00002.safetensors"), &a).unwrap();
        std::fs::write(dir.join("model-00002-of-00002.safetensors"), &b).unwrap();
        std::fs::write(
            dir.join("config.json"),
            r#"{"model_type": "qwen2", "vocab_size": 8}"#,
        )
        .unwrap();
        std::fs::write(dir.join("README.md"), "not weights").unwrap();
        let info = inspect(&dir).unwrap();
        assert_eq!(info.path, dir);
        assert_eq!(info.bytes, (a.len() + b.len()) as u64);
        assert_eq!(info.params, 64 + 8 + 32 + 300);
        // I8 holds the most 2-D elements and has no precision.
        assert_eq!(info.precision, None);
        assert_eq!(info.weight_types[0], ("I8".to_string(), 300));
        assert_eq!(info.weight_types[1], ("F16".to_string(), 96));
        assert_eq!(info.architecture.as_deref(), Some("qwen2"));

        // A single shard reads the config.json beside it.
        let shard = inspect(&dir.join("model-00001-of-00002.safetensors")).unwrap();
        assert_eq!(shard.params, 72);
        assert_eq!(shard.precision, Some(Precision::Fp16));
        assert_eq!(shard.architecture.as_deref(), Some("qwen2"));

        // With an index, only the shards it names count (not a stray consolidated file).
        std::fs::write(dir.join("consolidated.safetensors"), &a).unwrap();
        assert_eq!(inspect(&dir).unwrap().params, 72 + 72 + 332);
        std::fs::write(
            dir.join("model.safetensors.index.json"),
            r#"{"metadata": {"total_size": 1}, "weight_map": {
                "a.weight": "model-00001-of-00002.safetensors",
                "a.bias": "model-00001-of-00002.safetensors",
                "b.weight": "model-00002-of-00002.safetensors"}}"#,
        )
        .unwrap();
        assert_eq!(inspect(&dir).unwrap().params, 72 + 332);
        std::fs::write(
            dir.join("model.safetensors.index.json"),
            r#"{"weight_map": {"x": "../model.safetensors"}}"#,
        )
        .unwrap();
        assert!(matches!(
            inspect(&dir),
            Err(ModelFileError::BadShard { .. })
        ));
        std::fs::remove_file(dir.join("model.safetensors.index.json")).unwrap();

        // A broken config.json is reported, naming it.
        std::fs::write(dir.join("config.json"), "{").unwrap();
        let e = inspect(&dir).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("config.json: config.json is not valid"),
            "{e}"
        );

        // A directory without shards.
        let empty = dir.join("empty");
        std::fs::create_dir(&empty).unwrap();
        assert!(matches!(inspect(&empty), Err(ModelFileError::NoWeights(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The error inspecting `bytes`, written to `path`, gives.
    fn inspect_err(path: &Path, bytes: &[u8]) -> ModelFileError {
        std::fs::write(path, bytes).unwrap();
        inspect(path).unwrap_err()
    }

    /// A safetensors file of the header `json` and `data` zero bytes.
    fn safetensors_file(json: &str, data: usize) -> Vec<u8> {
        let mut out = (json.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(json.as_bytes());
        out.resize(out.len() + data, 0);
        out
    }

    /// A safetensors file cut short (in the length, the header or the data), or whose header
    /// length is past any real header, is refused, saying so.
    fn safetensors_framing_errors(path: &Path) {
        let good = safetensors(&[("w", "F16", &[2, 3])]);
        for cut in [5, 20] {
            let e = inspect_err(path, &good[..cut]);
            assert!(
                matches!(
                    e,
                    ModelFileError::Safetensors {
                        problem: SafetensorsProblem::Truncated { .. },
                        ..
                    }
                ),
                "{e}"
            );
        }
        let mut huge = good.clone();
        huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        let e = inspect_err(path, &huge);
        assert!(
            e.to_string()
                .ends_with("safetensors header of 18446744073709551615 bytes (more than 100 MB)"),
            "{e}"
        );
        // Data cut short: the offsets point past the end.
        let e = inspect_err(path, &good[..good.len() - 1]);
        assert!(
            e.to_string()
                .contains("tensor `w`: data_offsets [0, 12] outside the 11 data bytes"),
            "{e}"
        );
    }

    /// A header that is not an object, or whose tensor does not fit its data (span, rank,
    /// element count), is refused; an unknown dtype is kept, unchecked, without a precision.
    fn safetensors_header_errors(path: &Path) {
        let e = inspect_err(path, &safetensors_file("[1, 2]", 0));
        assert!(matches!(e, ModelFileError::Json { .. }), "{e}");
        let e = inspect_err(
            path,
            &safetensors_file(
                r#"{"w": {"dtype": "F16", "shape": [2], "data_offsets": [0, 3]}}"#,
                3,
            ),
        );
        assert!(
            e.to_string()
                .contains("data_offsets span 3 bytes but F16 [2] needs 2 × 2"),
            "{e}"
        );
        let e = inspect_err(
            path,
            &safetensors_file(
                r#"{"w": {"dtype": "F16", "shape": [1,1,1,1,1,1,1,1,1], "data_offsets": [0, 2]}}"#,
                2,
            ),
        );
        assert!(e.to_string().contains("9 dimensions"), "{e}");
        let e = inspect_err(
            path,
            &safetensors_file(
                r#"{"w": {"dtype": "U8", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}}"#,
                0,
            ),
        );
        assert!(e.to_string().contains("overflows"), "{e}");
        std::fs::write(
            path,
            safetensors_file(
                r#"{"w": {"dtype": "F4", "shape": [4, 4], "data_offsets": [0, 8]}}"#,
                8,
            ),
        )
        .unwrap();
        let info = inspect(path).unwrap();
        assert_eq!((info.params, info.precision), (16, None));
    }

    /// A file of neither format, a `.gguf` that is not one, and a missing file.
    fn neither_format_errors(dir: &Path) {
        let other = dir.join("notes.txt");
        std::fs::write(&other, "hello, world").unwrap();
        assert!(matches!(
            inspect(&other),
            Err(ModelFileError::UnknownFormat(_))
        ));
        let fake = dir.join("fake.gguf");
        std::fs::write(&fake, b"PK\x03\x04 zip").unwrap();
        let e = inspect(&fake).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("fake.gguf: not a GGUF file (magic \"PK\\x03\\x04\")"),
            "{e}"
        );
        let e = inspect(&dir.join("missing.gguf")).unwrap_err();
        assert!(matches!(e, ModelFileError::Io { .. }), "{e}");
    }

    #[test]
    fn safetensors_errors() {
        let dir = scratch("st-bad");
        let path = dir.join("m.safetensors");
        safetensors_framing_errors(&path);
        safetensors_header_errors(&path);
        neither_format_errors(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn too_many_safetensors_tensors_is_refused() {
        let mut json = String::from("{");
        for i in 0..4 {
            if i > 0 {
                json.push(',');
            }
            json.push_str(&format!(
                r#""{i}":{{"dtype":"U8","shape":[],"data_offsets":[0,1]}}"#
            ));
        }
        json.push('}');
        assert!(parse_safetensors_header_max::<4>(json.as_bytes(), 1).is_ok());
        assert!(matches!(
            parse_safetensors_header_max::<3>(json.as_bytes(), 1),
            Err(HeaderError::Problem(SafetensorsProblem::TooManyTensors {
                max: 3
            }))
        ));
    }

    proptest! {
        #[test]
        fn gguf_random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut bytes = bytes;
            let _ = inspect_gguf_bytes(&bytes);
            // And with a valid magic and version, so the parser gets further in.
            if bytes.len() >= 8 {
                bytes[..4].copy_from_slice(b"GGUF");
                bytes[4..8].copy_from_slice(&3u32.to_le_bytes());
                let _ = inspect_gguf_bytes(&bytes);
            }
        }

        #[test]
        fn gguf_mutations_never_panic(
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut bytes = sample(4);
            for (i, b) in &edits {
                let i = i.index(bytes.len());
                bytes[i] = *b;
            }
            if let Ok(h) = inspect_gguf_bytes(&bytes) {
                let sum: u64 = h.tensors.iter().map(GgufTensorInfo::elements).sum();
                prop_assert_eq!(h.params, sum);
                prop_assert!(h.len <= bytes.len() as u64);
            }
            let _ = inspect_gguf_bytes(&bytes[..cut.index(bytes.len())]);
        }

        #[test]
        fn safetensors_mutations_never_panic(
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        ) {
            let file = safetensors(&[("a", "F16", &[2, 3]), ("b", "F32", &[3])]);
            let n = u64::from_le_bytes(file[..8].try_into().unwrap()) as usize;
            let mut json = file[8..8 + n].to_vec();
            for (i, b) in &edits {
                let i = i.index(json.len());
                json[i] = *b;
            }
            let _ = parse_safetensors_header(&json, (file.len() - 8 - n) as u64);
        }
    }
}
