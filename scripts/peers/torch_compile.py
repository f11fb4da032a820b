#!/usr/bin/env python3
"""torch.compile peer: a self-contained Qwen2 decoder (random weights, seeded) with a static KV cache and
`torch.compile(decode_step, mode="reduce-overhead", fullgraph=True)` (CUDA graphs) and gpt-fast's
inductor settings (coordinate-descent tuning; `--inductor default` leaves torch's), metered with the
peer protocol (README.md).

  torch_compile.py --shape qwen2-0.5b --arm f16  --out a.json     F16 weights and activations
  torch_compile.py --shape qwen2-0.5b --arm int4 --out a.json     weight-only int4 (group 128) through
        aten._convert_weight_to_int4pack / aten._weight_int4pack_mm, BF16 activations

Model: Qwen2 (RMSNorm, rotary with rope_theta, GQA attention with q/k/v biases, SwiGLU MLP, tied or
untied LM head as the shape says). The int4 arm quantizes every Linear, LM head included (for tied
shapes a quantized copy of the embedding serves as LM head; the lookup table stays BF16).
Generation: eager prefill of PROMPT_LEN fixed ids (the project meter's ids), then TOKENS-1 compiled
decode steps, greedy argmax on the device, never stopping early: TOKENS new tokens per generation.
Window: after compile + WARMUP generations + a bounded cooldown, torch.cuda.synchronize(), energy
counter, ITERATIONS generations (each ends in a synchronize, timed one by one), counter.
"""
import argparse
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import nvml_window as nw  # noqa: E402
import shapes  # noqa: E402

import torch  # noqa: E402
import torch._dynamo  # noqa: E402,F401
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

GROUP = 128
INNER_K_TILES = 8
INIT_STD = 0.02


def configure_inductor(profile):
    """gpt-fast's inductor settings (its generate.py). coordinate_descent_tuning matters most: with it,
    inductor rewrites a matmul with one row (a decode step's GEMV) as a fused multiply-reduce it tunes
    per shape, which reaches more of the memory bandwidth than the cuBLAS call it replaces.
    'default' leaves torch's defaults."""
    import torch._inductor.config as icfg
    if hasattr(icfg.triton, "cudagraph_support_input_mutation"):
        icfg.triton.cudagraph_support_input_mutation = True
    if profile == "gpt-fast":
        icfg.coordinate_descent_tuning = True
        icfg.triton.unique_kernel_names = True
        icfg.fx_graph_cache = True
    elif profile != "default":
        raise ValueError(f"inductor profile: gpt-fast or default, got {profile!r}")


# ---------------------------------------------------------------- weight-only int4 (tinygemm layout)
def int4_quantize(w, hi_first=True):
    """w [n, k] -> (packed int4 for _weight_int4pack_mm, scales_and_zeros [k/G, n, 2] bf16, dequantized w).
    Asymmetric per group of GROUP along k: q = round((w - min) / scale) in 0..15, w ≈ (q - 8) * scale + zero
    with zero = min + 8 * scale (torchao's tinygemm convention)."""
    n, k = w.shape
    assert k % GROUP == 0 and k % (16 * INNER_K_TILES) == 0 and n % 8 == 0, (n, k)
    wg = w.float().reshape(n, k // GROUP, GROUP)
    mn, mx = wg.amin(dim=2, keepdim=True), wg.amax(dim=2, keepdim=True)
    scale = (mx - mn).clamp(min=1e-6) / 15
    zero = mn + 8 * scale
    q = ((wg - mn) / scale).round().clamp(0, 15).to(torch.int32)
    deq = ((q - 8) * scale + zero).reshape(n, k)
    q = q.reshape(n, k)
    if hi_first:   # element 2j in the high nibble (torchao for torch >= 2.5)
        u8 = ((q[:, 0::2] << 4) | q[:, 1::2]).to(torch.uint8)
    else:
        u8 = ((q[:, 1::2] << 4) | q[:, 0::2]).to(torch.uint8)
    packed = torch.ops.aten._convert_weight_to_int4pack(u8.contiguous(), INNER_K_TILES)
    sz = torch.cat([scale.reshape(n, k // GROUP, 1), zero.reshape(n, k // GROUP, 1)], dim=2)
    sz = sz.transpose(0, 1).contiguous().to(torch.bfloat16)
    return packed, sz, deq


def int4_check(gen, device):
    """Which nibble order makes _weight_int4pack_mm match x @ deq.T; returns (hi_first, rel_err)."""
    n, k = 256, 1024
    w = torch.randn(n, k, device=device, generator=gen) * INIT_STD
    x = torch.randn(4, k, device=device, generator=gen).to(torch.bfloat16)
    best = None
    for hi in (True, False):
        packed, sz, deq = int4_quantize(w, hi)
        y = torch.ops.aten._weight_int4pack_mm(x, packed, GROUP, sz).float()
        ref = x.float() @ deq.t()
        err = ((y - ref).norm() / ref.norm()).item()
        if best is None or err < best[1]:
            best = (hi, err)
    return best


class Linear(nn.Module):
    def __init__(self, n_in, n_out, bias, dtype, gen, int4=None, weight=None):
        super().__init__()
        self.n_in, self.n_out, self.int4 = n_in, n_out, int4 is not None
        dev = "cuda"
        if weight is None:
            weight = torch.randn(n_out, n_in, device=dev, dtype=torch.float32, generator=gen).mul_(INIT_STD)
        if self.int4:
            packed, sz, _ = int4_quantize(weight, int4)
            self.register_buffer("packed", packed)
            self.register_buffer("sz", sz)
        else:
            self.weight = nn.Parameter(weight.to(dtype), requires_grad=False)
        del weight
        self.bias = nn.Parameter((torch.randn(n_out, device=dev, generator=gen) * INIT_STD).to(dtype),
                                 requires_grad=False) if bias else None

    def forward(self, x):
        if self.int4:
            y = torch.ops.aten._weight_int4pack_mm(x.reshape(-1, self.n_in), self.packed, GROUP, self.sz)
            y = y.reshape(*x.shape[:-1], self.n_out)
        else:
            y = F.linear(x, self.weight)
        return y + self.bias if self.bias is not None else y

    def weight_bytes(self):
        t = [self.packed, self.sz] if self.int4 else [self.weight]
        if self.bias is not None:
            t.append(self.bias)
        return sum(x.numel() * x.element_size() for x in t)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps, dtype):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, device="cuda", dtype=dtype), requires_grad=False)

    def forward(self, x):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Block(nn.Module):
    def __init__(self, s, max_seq, dtype, gen, int4):
        super().__init__()
        h, hd = s["hidden"], s["head_dim"]
        self.nh, self.nkv, self.hd = s["heads"], s["kv_heads"], hd
        self.attn_norm = RMSNorm(h, s["rms_eps"], dtype)
        self.q = Linear(h, self.nh * hd, True, dtype, gen, int4)
        self.k = Linear(h, self.nkv * hd, True, dtype, gen, int4)
        self.v = Linear(h, self.nkv * hd, True, dtype, gen, int4)
        self.o = Linear(self.nh * hd, h, False, dtype, gen, int4)
        self.mlp_norm = RMSNorm(h, s["rms_eps"], dtype)
        self.gate = Linear(h, s["intermediate"], False, dtype, gen, int4)
        self.up = Linear(h, s["intermediate"], False, dtype, gen, int4)
        self.down = Linear(s["intermediate"], h, False, dtype, gen, int4)
        # static KV cache [1, kv_heads, max_seq, head_dim]
        self.register_buffer("k_cache", torch.zeros(1, self.nkv, max_seq, hd, device="cuda", dtype=dtype))
        self.register_buffer("v_cache", torch.zeros(1, self.nkv, max_seq, hd, device="cuda", dtype=dtype))

    def forward(self, x, pos, cos, sin, mask):
        b, t, _ = x.shape
        hx = self.attn_norm(x)
        q = self.q(hx).view(b, t, self.nh, self.hd).transpose(1, 2)
        k = self.k(hx).view(b, t, self.nkv, self.hd).transpose(1, 2)
        v = self.v(hx).view(b, t, self.nkv, self.hd).transpose(1, 2)
        q = (q.float() * cos + rotate_half(q.float()) * sin).to(x.dtype)
        k = (k.float() * cos + rotate_half(k.float()) * sin).to(x.dtype)
        self.k_cache.index_copy_(2, pos, k)
        self.v_cache.index_copy_(2, pos, v)
        # GQA without copying the cache: the `rep` query heads of each KV head (head i uses KV head
        # i // rep, as HF's repeat_kv) become `rep` query rows of that KV head.
        rep = self.nh // self.nkv
        qg = q.reshape(b, self.nkv, rep * t, self.hd)
        mg = mask.expand(1, 1, t, mask.shape[-1]).repeat(1, 1, rep, 1)  # [1, 1, rep*t, max_seq]
        a = F.scaled_dot_product_attention(qg, self.k_cache, self.v_cache, attn_mask=mg)
        a = a.view(b, self.nh, t, self.hd)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, self.nh * self.hd))
        hx = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(hx)) * self.up(hx))


class Qwen2(nn.Module):
    def __init__(self, s, max_seq, dtype, gen, int4):
        super().__init__()
        h, hd = s["hidden"], s["head_dim"]
        self.max_seq = max_seq
        emb = torch.randn(s["vocab"], h, device="cuda", dtype=torch.float32, generator=gen).mul_(INIT_STD)
        self.embed = nn.Parameter(emb.to(dtype), requires_grad=False)
        self.blocks = nn.ModuleList(Block(s, max_seq, dtype, gen, int4) for _ in range(s["layers"]))
        self.norm = RMSNorm(h, s["rms_eps"], dtype)
        if s["tied"]:
            self.lm_head = None if int4 is None else Linear(h, s["vocab"], False, dtype, gen, int4, weight=emb)
        else:
            self.lm_head = Linear(h, s["vocab"], False, dtype, gen, int4)
        del emb
        inv = 1.0 / (s["rope_theta"] ** (torch.arange(0, hd, 2, device="cuda", dtype=torch.float32) / hd))
        f = torch.outer(torch.arange(max_seq, device="cuda", dtype=torch.float32), inv)
        f = torch.cat((f, f), dim=-1)
        self.register_buffer("cos", f.cos())
        self.register_buffer("sin", f.sin())
        self.register_buffer("kpos", torch.arange(max_seq, device="cuda"))

    def forward(self, idx, pos):
        """idx [1, T] token ids at positions pos [T] -> logits of the last position [1, vocab]."""
        x = F.embedding(idx, self.embed)
        cos, sin = self.cos[pos][None, None], self.sin[pos][None, None]
        mask = (self.kpos[None, :] <= pos[:, None])[None, None]  # [1, 1, T, max_seq]
        for blk in self.blocks:
            x = blk(x, pos, cos, sin, mask)
        x = self.norm(x[:, -1])
        return self.lm_head(x) if self.lm_head is not None else F.linear(x, self.embed)

    def weight_bytes_per_token(self):
        """Weights read per decoded token: every Linear, norm and the LM head (the embedding matrix when
        tied and not quantized); the embedding lookup reads one row (ignored)."""
        n = 0
        for m in self.modules():
            if isinstance(m, Linear):
                n += m.weight_bytes()
            elif isinstance(m, RMSNorm):
                n += m.weight.numel() * m.weight.element_size()
        if self.lm_head is None:
            n += self.embed.numel() * self.embed.element_size()
        return n


def decode_step(model, tok, pos):
    return model(tok, pos).argmax(dim=-1, keepdim=True)


def generate(model, step, prompt, n_new):
    """Eager prefill + n_new - 1 decode steps; returns [1, n_new] token ids (device)."""
    p = prompt.shape[1]
    tok = model(prompt, torch.arange(p, device="cuda")).argmax(dim=-1, keepdim=True)
    out = [tok]
    pos = torch.tensor([p], device="cuda")
    for _ in range(n_new - 1):
        tok = step(model, tok, pos).clone()
        pos += 1
        out.append(tok)
    return torch.cat(out, dim=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", required=True)
    ap.add_argument("--arm", choices=["f16", "int4"], default="f16")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--prompt-len", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compile-mode", default="reduce-overhead", help="'none' runs the decode step eagerly")
    ap.add_argument("--inductor", choices=["gpt-fast", "default"], default="gpt-fast",
                    help="gpt-fast's inductor settings (coordinate-descent tuning: the peer at its strongest) "
                         "or torch's defaults")
    ap.add_argument("--cooldown-max-s", type=float, default=10.0)
    ap.add_argument("--trace-hz", type=float, default=50.0)
    ap.add_argument("--models-csv")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    s = shapes.load(a.shape, a.models_csv)
    arm = f"torch-compile-{a.arm}"
    precision = "F16" if a.arm == "f16" else "INT4-G128"
    try:
        rec = run(a, s, arm, precision)
    except Exception as e:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        rec = nw.failure_record(engine="torch.compile", arm=arm, shape=s["name"], precision=precision,
                                error=f"{type(e).__name__}: {e}", mode=f"compile-{a.compile_mode}")
    with open(a.out, "w") as f:
        json.dump(rec, f, indent=1)
    print(json.dumps({k: rec.get(k) for k in ("arm", "shape", "ok", "tok_s", "mj_per_token", "avg_power_w",
                                               "iter_cv_pct", "hbm_fraction", "compile_s", "error")}))
    sys.exit(0 if rec["ok"] else 1)


def run(a, s, arm, precision):
    t_start = time.perf_counter()
    meter = nw.Meter()
    torch.manual_seed(a.seed)
    torch.zeros(1, device="cuda")  # a live context before the idle reference, as the project's meter
    idle = meter.idle()
    gen = torch.Generator(device="cuda")
    gen.manual_seed(a.seed)
    notes, extra = [], {}
    int4 = None
    if a.arm == "int4":
        int4, err = int4_check(gen, "cuda")
        extra["int4_nibble_order"] = "even-k high nibble" if int4 else "even-k low nibble"
        extra["int4_check_rel_err"] = round(err, 5)
        if err > 0.05:
            notes.append(f"int4 self-check error {err:.3f} > 0.05: the packed layout may be wrong")
    dtype = torch.float16 if a.arm == "f16" else torch.bfloat16
    max_seq = ((a.prompt_len + a.tokens + 63) // 64) * 64
    with torch.no_grad():
        t = time.perf_counter()
        model = Qwen2(s, max_seq, dtype, gen, int4).eval()
        torch.cuda.synchronize()
        extra["build_s"] = round(time.perf_counter() - t, 2)
        wbytes = model.weight_bytes_per_token()
        # the caches are written in place by every step: mark them static so that the CUDA graphs keep
        # their addresses instead of being skipped for a mutated input (as transformers' StaticCache does)
        for blk in model.blocks:
            torch._dynamo.mark_static_address(blk.k_cache)
            torch._dynamo.mark_static_address(blk.v_cache)
        if a.compile_mode == "none":
            step = decode_step
        else:
            configure_inductor(a.inductor)
            step = torch.compile(decode_step, mode=a.compile_mode, fullgraph=True)
        vocab = s["vocab"]
        prompt = torch.tensor([[(i * 7919 + 13) % vocab for i in range(a.prompt_len)]], device="cuda")
        # compile + CUDA-graph capture: a short generation (first step compiles, next ones record)
        t = time.perf_counter()
        generate(model, step, prompt, 5)
        torch.cuda.synchronize()
        compile_s = time.perf_counter() - t
        warm = []
        for _ in range(a.warmup):
            t = time.perf_counter()
            out = generate(model, step, prompt, a.tokens)
            torch.cuda.synchronize()
            warm.append(time.perf_counter() - t)
        assert out.shape == (1, a.tokens), out.shape
        cool = meter.cooldown(idle[0], idle[1], a.cooldown_max_s) if a.cooldown_max_s > 0 else {}
        win = nw.Window(meter, a.trace_hz)
        iter_s, n = [], 0
        torch.cuda.synchronize()
        win.open()
        for _ in range(a.iterations):
            t = time.perf_counter()
            out = generate(model, step, prompt, a.tokens)
            torch.cuda.synchronize()
            iter_s.append(time.perf_counter() - t)
            n += out.shape[1]
        win.close()
        first_tokens = out[0, :8].tolist()
    try:
        from torch._dynamo.utils import counters
        skips = dict(counters["inductor"]).get("cudagraph_skips", 0)
        extra["cudagraph_skips"] = skips
        if skips:
            notes.append(f"inductor skipped CUDA graphs {skips} time(s): the decode step ran without them")
    except Exception:  # noqa: BLE001
        pass
    extra.update(compile_s=round(compile_s, 2), warmup_iter_s=[round(x, 4) for x in warm],
                 prompt_len=a.prompt_len, warmup=a.warmup, iterations=a.iterations, new_tokens=a.tokens,
                 max_seq=max_seq, activation_dtype=str(dtype).replace("torch.", ""),
                 compile_mode=a.compile_mode, inductor=a.inductor, first_tokens=first_tokens, params_b=round(shapes.params_b(s), 4),
                 total_s=round(time.perf_counter() - t_start, 2),
                 window_brackets=f"{a.iterations} generations: eager {a.prompt_len}-token prefill + "
                                 f"{a.tokens - 1} compiled decode steps each, greedy on device; excludes "
                                 "weight init, compile, warm-ups, cooldown")
    extra.update(cool)
    extra["idle_reference"] = "this process's CUDA context live, before the weights are made"
    return nw.arm_record(engine="torch.compile", engine_version=f"torch {torch.__version__}", arm=arm,
                         mode=f"compile-{a.compile_mode}", shape=s["name"], precision=precision,
                         tokens_generated=n, iter_s=iter_s, window=win.result(), weight_bytes_per_token=wbytes,
                         meter_info=meter.info(), idle=idle, extra=extra, notes=notes)


if __name__ == "__main__":
    main()
