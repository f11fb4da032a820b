//! Every op of the graph engine on a device against its CPU reference (the `test-backend-ops` idea
//! of llama.cpp): the same seeded inputs through the op's CPU implementation and through its CUDA
//! kernel, for every dtype (pair) the kernel is instantiated for and for odd shapes (head widths,
//! rows that are not a block's multiple, positions past a softmax chunk, a cache of 2 049 rows).
//! `quantenergy engine-check --ops` runs it on a GPU; on the CPU it compares the CPU with itself
//! (what the unit test does, to keep the cases building).

use crate::ops::kv::{AddU32, KvWrite};
use crate::ops::{
    q8, AddRmsNorm, ArgMax, AttnSplit, CausalSoftmax, DecodeAttn, Gemv, RopeKv, RopeStep, SwiGlu,
};
use crate::testing::{attn_dims, rand, AttnCase};
use crate::Result;
use candle_core::{DType, Device, Tensor};

/// One op, one case, one dtype: the CUDA result against the CPU reference.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OpCheck {
    /// The op (and its variant: folded KV write, split, Q8_1 blocks).
    pub op: String,
    /// The shape, as the op's arguments name it.
    pub case: String,
    /// The dtype (or activation/cache pair).
    pub dtype: String,
    /// max |device − CPU| / max |CPU| over the output (and the cache, for in-place ops).
    pub rel_err: f32,
    /// The tolerance it is held to.
    pub tol: f32,
}

impl OpCheck {
    /// Whether the device agrees with the CPU within the tolerance.
    pub fn ok(&self) -> bool {
        self.rel_err <= self.tol
    }

    /// One line: `ok   rope_kv  b1 h4/4 d8 ctx5 pos0  F16/F32  3.1e-4 ≤ 2.0e-3`.
    pub fn line(&self) -> String {
        format!(
            "{} {:<22} {:<38} {:<10} {:.2e} {} {:.1e}",
            if self.ok() { "ok  " } else { "FAIL" },
            self.op,
            self.case,
            self.dtype,
            self.rel_err,
            if self.ok() { "≤" } else { ">" },
            self.tol
        )
    }
}

/// The tolerance of a device result against the CPU reference in `dt`: both compute in F32 and
/// round once, so they differ by the order of F32 sums, or by one rounding of the dtype where a
/// value sits at a tie (2⁻¹⁰ F16, 2⁻⁷ BF16, relative to the largest value).
fn tol(dt: DType) -> f32 {
    match dt {
        DType::F16 => 2e-3,
        DType::BF16 => 1.6e-2,
        _ => 1e-4,
    }
}

/// Q8_1 blocks quantize to 1/127 of a block's largest value: a value at a rounding tie may land
/// one step away.
const Q8_TOL: f32 = 2.0 / 127.0;

/// The activation/cache dtype pairs the attention kernels are instantiated for.
const PAIRS: [(DType, DType); 9] = [
    (DType::F32, DType::F32),
    (DType::F32, DType::F16),
    (DType::F32, DType::BF16),
    (DType::F16, DType::F32),
    (DType::F16, DType::F16),
    (DType::F16, DType::BF16),
    (DType::BF16, DType::F32),
    (DType::BF16, DType::F16),
    (DType::BF16, DType::BF16),
];
const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// max |got − want| / max |want|, both brought to the CPU in F32.
fn rel(got: &Tensor, want: &Tensor) -> Result<f32> {
    let g = got
        .to_device(&Device::Cpu)?
        .to_dtype(DType::F32)?
        .flatten_all()?;
    let w = want
        .to_device(&Device::Cpu)?
        .to_dtype(DType::F32)?
        .flatten_all()?;
    let d = (&g - &w)?.abs()?.max_all()?.to_scalar::<f32>()?;
    let m = w.abs()?.max_all()?.to_scalar::<f32>()?;
    Ok(if m > 0.0 { d / m } else { d })
}

/// A flat op output of `n` values followed by their Q8_1 blocks: (values, the blocks' values).
fn split_q8(t: &Tensor, n: usize) -> Result<(Tensor, Tensor)> {
    let t = t.to_device(&Device::Cpu)?.flatten_all()?;
    let vals = t.narrow(0, 0, n)?;
    let words = t.narrow(0, n, q8::words(n))?.to_vec1::<f32>()?;
    let blocks = Tensor::from_vec(q8::decode(&words), n, &Device::Cpu)?;
    Ok((vals, blocks))
}

fn name(dt: DType) -> &'static str {
    match dt {
        DType::F32 => "F32",
        DType::F16 => "F16",
        DType::BF16 => "BF16",
        _ => "?",
    }
}

/// Collects the checks of one run.
struct Checks<'a> {
    dev: &'a Device,
    /// Only the small shapes ([`Scope::Small`]).
    small: bool,
    /// The device runs the tensor-core attention, checked beside the CUDA-core kernel whatever
    /// `QE_ATTN_MMA` says.
    tensor_cores: bool,
    out: Vec<OpCheck>,
    each: &'a mut dyn FnMut(&OpCheck),
}

impl Checks<'_> {
    fn push(&mut self, op: &str, case: &str, dtype: String, rel_err: f32, tol: f32) {
        let c = OpCheck {
            op: op.into(),
            case: case.into(),
            dtype,
            rel_err,
            tol,
        };
        (self.each)(&c);
        self.out.push(c);
    }

    /// The shapes of `all` a run takes: the first `small` of them for [`Scope::Small`].
    fn shapes<T: Copy>(&self, all: &[T], small: usize) -> Vec<T> {
        all[..if self.small { small } else { all.len() }].to_vec()
    }

    fn to_dev(&self, t: &Tensor) -> Result<Tensor> {
        Ok(t.to_device(self.dev)?)
    }
}

/// Which cases to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every case: what the GPU runs.
    Full,
    /// The small cases only (every op, dtype and variant, no 7 B-sized shape): what a debug build
    /// on the CPU runs in seconds.
    Small,
}

/// Run every op's cases on `dev`, calling `each` with every result as it comes.
pub fn run(dev: &Device, scope: Scope, each: &mut dyn FnMut(&OpCheck)) -> Result<Vec<OpCheck>> {
    let mut c = Checks {
        dev,
        small: scope == Scope::Small,
        tensor_cores: crate::kernels::arch::has_tensor_cores(dev)?,
        out: Vec::new(),
        each,
    };
    rope_step(&mut c)?;
    let cases = if c.small {
        &ATTN_CASES[..5]
    } else {
        &ATTN_CASES[..]
    };
    for (i, case) in cases.iter().enumerate() {
        for (j, &(act, cache)) in PAIRS.iter().enumerate() {
            for bias in [false, true] {
                let seed = (i * 100 + j * 10 + bias as usize) as u64;
                attention(&mut c, *case, act, cache, bias, seed)?;
            }
        }
    }
    swiglu(&mut c)?;
    add_rms_norm(&mut c)?;
    gemv(&mut c)?;
    kv_write(&mut c)?;
    causal_softmax(&mut c)?;
    argmax(&mut c)?;
    Ok(c.out)
}

fn rope_step(c: &mut Checks) -> Result<()> {
    for (rows, hd, pos) in [
        (5usize, 8usize, 0u32),
        (300, 64, 299),
        (2049, 128, 1500),
        (7, 80, 6),
    ] {
        let table = rand(&[rows, hd], rows as u64)?;
        let p = Tensor::new(&[pos], &Device::Cpu)?;
        let want = table.apply_op2_no_bwd(&p, &RopeStep)?;
        let got = c
            .to_dev(&table)?
            .apply_op2_no_bwd(&c.to_dev(&p)?, &RopeStep)?;
        let case = format!("table {rows}×{hd} pos {pos}");
        c.push("rope_step", &case, "F32".into(), rel(&got, &want)?, 0.0);
    }
    Ok(())
}

const ATTN_CASES: [AttnCase; 13] = [
    (1, 4, 4, 8, 5, 0, false),
    (3, 6, 2, 16, 9, 5, false),
    (2, 4, 1, 32, 7, 3, true),
    (1, 14, 2, 64, 40, 17, true),
    (2, 8, 2, 64, 300, 299, false),
    // Past one online-softmax chunk (1 024 positions), and a 7 B shape at 2 049 positions.
    (1, 12, 2, 128, 1100, 1050, false),
    (1, 28, 4, 128, 2049, 2048, false),
    // The split kernel's shapes: SmolLM2's group of 3 at hd 64, a group of 8, hd 256 without
    // GQA, a 1.5 B shape at batch 4 and 4 200 positions; and a group of 16 (one-block kernel).
    (1, 9, 3, 64, 513, 400, false),
    (1, 16, 2, 128, 100, 99, true),
    (2, 8, 8, 256, 70, 69, false),
    (4, 12, 2, 128, 4200, 4150, false),
    (1, 16, 1, 64, 50, 49, false),
    // 7 B at 16 k: 33 splits of ≈ 500 positions, six chunks a share (QE_ATTN_PREFETCH's case).
    (1, 28, 4, 128, 16400, 16390, false),
];

/// RopeKv + DecodeAttn of one case on the device, four ways (unfused, KV write folded into the
/// attention, split over blocks, with Q8_1 blocks), each against the CPU's RopeKv then DecodeAttn.
fn attention(
    c: &mut Checks,
    a: AttnCase,
    act: DType,
    cache: DType,
    bias: bool,
    seed: u64,
) -> Result<()> {
    let (b, nh, nkv, hd, ctx, pos, interleaved) = a;
    let dims = attn_dims(a, bias);
    let case = format!(
        "b{b} h{nh}/{nkv} d{hd} ctx{ctx} pos{pos}{}{}",
        if bias { " bias" } else { "" },
        if interleaved { " interleaved" } else { "" }
    );
    let dt = format!("{}/{}", name(act), name(cache));
    let t = 2.0 * tol(act).max(tol(cache));
    let qkv = rand(&[b, 1, dims.qkv_width()], seed)?.to_dtype(act)?;
    let buf = rand(&[dims.buf_len()], seed + 1)?.to_dtype(cache)?;
    let angles = rand(&[ctx, hd / 2], seed + 2)?.affine(3.0, 0.0)?;
    let table = Tensor::cat(&[angles.cos()?, angles.sin()?], 1)?;
    let p = Tensor::new(&[pos as u32], &Device::Cpu)?;
    let step = table.apply_op2_no_bwd(&p, &RopeStep)?;
    let attn = |fold_kv, q8, split| DecodeAttn {
        dims,
        scale: 1.0 / (hd as f32).sqrt(),
        q8,
        fold_kv,
        split,
    };
    // The CPU reference: RopeKv, then attention.
    let want_buf = buf.copy()?;
    want_buf.inplace_op3(&qkv, &step, &RopeKv(dims))?;
    let want = qkv.apply_op3_no_bwd(&want_buf, &step, &attn(false, false, None))?;

    let (qkv_d, step_d) = (c.to_dev(&qkv)?, c.to_dev(&step)?);
    let buf_d = c.to_dev(&buf)?;
    buf_d.inplace_op3(&qkv_d, &step_d, &RopeKv(dims))?;
    c.push("rope_kv", &case, dt.clone(), rel(&buf_d, &want_buf)?, t);
    let got = qkv_d.apply_op3_no_bwd(&buf_d, &step_d, &attn(false, false, None))?;
    c.push("decode_attn", &case, dt.clone(), rel(&got, &want)?, t);

    // The split kernel as the engine sizes it, and with more blocks than positions (empty
    // shares in the combine); shapes it does not cover run the one-block kernel.
    // The same two on tensor cores where the device has them (F16 and BF16 caches; the F32
    // cache runs the CUDA-core kernel either way).
    let counters = Tensor::zeros(b * nh, DType::U32, c.dev)?;
    let split = |splits, tensor_cores| AttnSplit {
        splits,
        counters: counters.clone(),
        tensor_cores,
    };
    let (engine, sparse) = (
        AttnSplit::splits_for(nkv, b, ctx),
        (ctx + 3).min(AttnSplit::MAX_SPLITS),
    );
    let mut variants = vec![
        ("decode_attn fold", None),
        ("decode_attn fold split", Some(split(engine, false))),
        ("decode_attn fold split sparse", Some(split(sparse, false))),
    ];
    if c.tensor_cores && cache != DType::F32 {
        variants.push(("decode_attn fold split mma", Some(split(engine, true))));
        variants.push((
            "decode_attn fold split sparse mma",
            Some(split(sparse, true)),
        ));
    }
    for (label, split) in variants {
        let buf_f = c.to_dev(&buf)?;
        // The CPU op neither folds nor splits: there it runs RopeKv first (the reference itself).
        let fold = !c.dev.is_cpu();
        if !fold {
            buf_f.inplace_op3(&qkv_d, &step_d, &RopeKv(dims))?;
        }
        let got = qkv_d.apply_op3_no_bwd(&buf_f, &step_d, &attn(fold, false, split))?;
        let r = rel(&got, &want)?.max(rel(&buf_f, &want_buf)?);
        c.push(label, &case, dt.clone(), r, t);
    }
    // The Q8_1 blocks after the output: F32 activations, whole blocks per head.
    if act == DType::F32 && hd % q8::QK == 0 {
        let n = b * nh * hd;
        let want_q = qkv.apply_op3_no_bwd(&want_buf, &step, &attn(false, true, None))?;
        let one_split = Some(split(engine, false));
        for (label, split) in [
            ("decode_attn q8", None),
            ("decode_attn q8 split", one_split),
        ] {
            let got_q = qkv_d.apply_op3_no_bwd(&buf_d, &step_d, &attn(false, true, split))?;
            let ((gv, gb), (wv, wb)) = (split_q8(&got_q, n)?, split_q8(&want_q, n)?);
            let r = rel(&gv, &wv)?.max(rel(&gb, &wb)? * t / Q8_TOL);
            c.push(label, &case, dt.clone(), r, t);
        }
    }
    Ok(())
}

fn swiglu(c: &mut Checks) -> Result<()> {
    for (rows, inter) in c.shapes(&[(1usize, 37usize), (3, 4864), (1, 8960), (8, 18944)], 2) {
        for dt in FLOATS {
            for q8 in [false, true] {
                if q8 && (dt != DType::F32 || (rows * inter) % q8::QK != 0) {
                    continue;
                }
                let gu = rand(&[rows, 2 * inter], (rows * inter) as u64)?.to_dtype(dt)?;
                let op = SwiGlu { q8 };
                let want = gu.apply_op1_no_bwd(&op)?;
                let got = c.to_dev(&gu)?.apply_op1_no_bwd(&op)?;
                let r = if q8 {
                    let n = rows * inter;
                    let ((gv, gb), (wv, wb)) = (split_q8(&got, n)?, split_q8(&want, n)?);
                    rel(&gv, &wv)?.max(rel(&gb, &wb)? * tol(dt) / Q8_TOL)
                } else {
                    rel(&got, &want)?
                };
                let label = if q8 { "swiglu q8" } else { "swiglu" };
                c.push(
                    label,
                    &format!("{rows}×{inter}"),
                    name(dt).into(),
                    r,
                    tol(dt),
                );
            }
        }
    }
    Ok(())
}

fn add_rms_norm(c: &mut Checks) -> Result<()> {
    // Widths below, at and above what 1 024 threads keep in registers (8 values each).
    for (rows, h) in [
        (1usize, 96usize),
        (3, 1000),
        (1, 3584),
        (2, 8192),
        (1, 9000),
    ] {
        for dt in FLOATS {
            for q8 in [false, true] {
                if q8 && (dt != DType::F32 || h % q8::QK != 0) {
                    continue;
                }
                let seed = (rows * h) as u64;
                let a = rand(&[rows, h], seed)?.to_dtype(dt)?;
                let r = rand(&[rows, h], seed + 1)?.to_dtype(dt)?;
                let w = rand(&[h], seed + 2)?.to_dtype(dt)?;
                let op = AddRmsNorm { eps: 1e-6, q8 };
                let want = a.apply_op3_no_bwd(&r, &w, &op)?;
                let got = c
                    .to_dev(&a)?
                    .apply_op3_no_bwd(&c.to_dev(&r)?, &c.to_dev(&w)?, &op)?;
                let err = if q8 {
                    // [sum | normed sum | blocks of the normed sum]
                    let n = rows * h;
                    let (g, wt) = (got.to_device(&Device::Cpu)?, want.clone());
                    let vals = rel(&g.narrow(0, 0, 2 * n)?, &wt.narrow(0, 0, 2 * n)?)?;
                    let blocks = |t: &Tensor| -> Result<Tensor> {
                        let words = t.narrow(0, 2 * n, q8::words(n))?.to_vec1::<f32>()?;
                        Ok(Tensor::from_vec(q8::decode(&words), n, &Device::Cpu)?)
                    };
                    vals.max(rel(&blocks(&g)?, &blocks(&wt)?)? * tol(dt) / Q8_TOL)
                } else {
                    rel(&got, &want)?
                };
                let label = if q8 {
                    "add_rms_norm q8"
                } else {
                    "add_rms_norm"
                };
                c.push(label, &format!("{rows}×{h}"), name(dt).into(), err, tol(dt));
            }
        }
    }
    Ok(())
}

fn gemv(c: &mut Checks) -> Result<()> {
    for (n, k) in c.shapes(
        &[(7usize, 8usize), (129, 1000), (896, 4864), (3584, 3584)],
        2,
    ) {
        for dt in [DType::F16, DType::BF16] {
            let x = rand(&[1, 1, k], (n + k) as u64)?.to_dtype(dt)?;
            let w = rand(&[n, k], (n * k) as u64)?.to_dtype(dt)?;
            let want = x.apply_op2_no_bwd(&w, &Gemv)?;
            let got = c.to_dev(&x)?.apply_op2_no_bwd(&c.to_dev(&w)?, &Gemv)?;
            c.push(
                "gemv",
                &format!("{n}×{k}"),
                name(dt).into(),
                rel(&got, &want)?,
                tol(dt),
            );
        }
    }
    Ok(())
}

/// Prefill chunks: (KV groups · query heads, queries, keys, first position): a chunk at the
/// start, one after earlier chunks (keys past the last query's position hidden), rows of fewer
/// keys than a block's threads, and a 7 B-sized chunk of 512 queries over 4 096 keys.
fn causal_softmax(c: &mut Checks) -> Result<()> {
    for (groups, queries, keys, pos) in c.shapes(
        &[
            (2usize, 3usize, 5usize, 2u32),
            (6, 64, 1000, 900),
            (14, 17, 300, 0),
            (28, 512, 4096, 3584),
        ],
        3,
    ) {
        for dt in FLOATS {
            let att = (rand(&[groups, queries, keys], keys as u64)? * 40.0)?.to_dtype(dt)?;
            let p = Tensor::new(&[pos], &Device::Cpu)?;
            let op = CausalSoftmax {
                queries,
                scale: 0.125,
            };
            let want = att.apply_op2_no_bwd(&p, &op)?;
            let got = c.to_dev(&att)?.apply_op2_no_bwd(&c.to_dev(&p)?, &op)?;
            let case = format!("{groups}×{queries} q × {keys} keys pos{pos}");
            c.push(
                "causal_softmax",
                &case,
                name(dt).into(),
                rel(&got, &want)?,
                tol(dt),
            );
        }
    }
    Ok(())
}

fn kv_write(c: &mut Checks) -> Result<()> {
    for (b, h, ctx, s, d, pos) in [
        (1usize, 2usize, 9usize, 1usize, 8usize, 8u32),
        (2, 4, 300, 3, 64, 100),
        (1, 3, 17, 2, 80, 15),
    ] {
        for dt in FLOATS {
            let cache = rand(&[b, h, ctx, d], ctx as u64)?.to_dtype(dt)?;
            let new = rand(&[b, h, s, d], ctx as u64 + 1)?.to_dtype(dt)?;
            let p = Tensor::new(&[pos], &Device::Cpu)?;
            let want = cache.copy()?;
            want.inplace_op3(&new, &p, &KvWrite)?;
            let got = c.to_dev(&cache)?;
            got.inplace_op3(&c.to_dev(&new)?, &c.to_dev(&p)?, &KvWrite)?;
            let case = format!("b{b} h{h} ctx{ctx} rows{s} d{d} pos{pos}");
            c.push("kv_write", &case, name(dt).into(), rel(&got, &want)?, 0.0);
        }
    }
    let p = Tensor::new(&[5u32, 7, 9], &Device::Cpu)?;
    let want = p.copy()?;
    want.inplace_op1(&AddU32(3))?;
    let got = c.to_dev(&p)?;
    got.inplace_op1(&AddU32(3))?;
    let r = (rel(&got.to_dtype(DType::F32)?, &want.to_dtype(DType::F32)?))?;
    c.push("add_u32", "3 counters + 3", "U32".into(), r, 0.0);
    Ok(())
}

/// The device's argmax picks the CPU's index in every row, ties (frequent in BF16 at a vocabulary's
/// size) to the lowest; `rel_err` is the share of rows that differ.
fn argmax(c: &mut Checks) -> Result<()> {
    for (rows, n) in c.shapes(
        &[(1usize, 37usize), (3, 1000), (1, 151_936), (4, 32_000)],
        2,
    ) {
        for dt in FLOATS {
            let x = (rand(&[rows, n], n as u64)? * 10.0)?.to_dtype(dt)?;
            let want = x.apply_op1_no_bwd(&ArgMax)?.to_vec2::<u32>()?;
            let got = c.to_dev(&x)?.apply_op1_no_bwd(&ArgMax)?.to_vec2::<u32>()?;
            let differ = want.iter().zip(&got).filter(|(w, g)| w != g).count();
            let r = differ as f32 / rows as f32;
            c.push("argmax", &format!("{rows}×{n}"), name(dt).into(), r, 0.0);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On the CPU every case builds and runs, and the CPU agrees with itself exactly.
    #[test]
    fn every_case_runs_on_the_cpu() {
        let mut n = 0;
        let all = run(&Device::Cpu, Scope::Small, &mut |_| n += 1).unwrap();
        assert_eq!(all.len(), n);
        assert!(
            all.iter().all(|c| c.rel_err == 0.0),
            "{:?}",
            all.iter().find(|c| c.rel_err != 0.0)
        );
        for op in [
            "rope_step",
            "rope_kv",
            "decode_attn",
            "decode_attn fold split",
            "decode_attn q8",
            "swiglu q8",
            "add_rms_norm",
            "add_rms_norm q8",
            "gemv",
            "kv_write",
            "add_u32",
            "argmax",
        ] {
            assert!(all.iter().any(|c| c.op == op), "{op}");
        }
        // Every activation/cache pair of the attention kernels.
        for (a, k) in PAIRS {
            let dt = format!("{}/{}", name(a), name(k));
            assert!(
                all.iter().any(|c| c.op == "decode_attn" && c.dtype == dt),
                "{dt}"
            );
        }
    }
}
