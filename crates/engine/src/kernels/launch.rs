//! The launch constants the kernels and their launchers share; the loader writes them into the CUDA
//! source as `#define`s, and the build's `nvcc` check (build.rs) reads this same file.

/// Threads of the per-head attention and per-row norm kernels: a whole SM's worth, since those
/// kernels have one block per head or row and are latency-bound.
pub const NT: u32 = 1024;
/// Positions of the one-block attention's online-softmax chunk (fixed shared memory at any
/// context).
pub const CH: u32 = 1024;
/// Threads of a split-attention block: one warp per query head of a KV group (at most 8).
pub const NS: u32 = 256;
/// Values of a norm row each thread keeps in registers.
pub const NR: u32 = 8;

/// The `#define`s of the constants, ahead of every kernel source.
pub fn prelude() -> String {
    format!("#define NT {NT}\n#define CH {CH}\n#define NS {NS}\n#define NR {NR}\n")
}

/// The dtype names of kernel names (`<family>_<a>[_<c>]`), in the order of the source's
/// `QE_FOR_DTYPES`.
pub const DTYPES: [&str; 3] = ["f32", "f16", "bf16"];

/// Every entry point the launchers load: what the module must export (the CUDA build checks it in
/// nvcc's PTX).
pub fn kernel_names() -> Vec<String> {
    let mut v: Vec<String> = ["rope_step", "kv_write_u16", "kv_write_u32", "add_u32"]
        .map(String::from)
        .to_vec();
    for a in DTYPES {
        for c in DTYPES {
            for family in ["rope_kv", "decode_attn"] {
                v.push(format!("{family}_{a}_{c}"));
            }
            for hd in [64, 128, 256] {
                v.push(format!("decode_attn_split{hd}_{a}_{c}"));
                if c != "f32" {
                    v.push(format!("decode_attn_mma{hd}_{a}_{c}"));
                }
            }
        }
        v.push(format!("swiglu_{a}"));
        v.push(format!("causal_softmax_{a}"));
        v.push(format!("add_rms_norm_{a}"));
        v.push(format!("argmax_{a}"));
        if a != "f32" {
            v.push(format!("gemv_{a}"));
        }
    }
    v
}
