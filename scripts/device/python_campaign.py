#!/usr/bin/env python3
"""The Python wheel on the GPU (issue 34): `quantenergy.Campaign` meters torch.compile decode
(scripts/peers/torch_compile.py's Qwen2 with a static KV cache, `mode="reduce-overhead"`,
`fullgraph=True`, gpt-fast's inductor settings, synthetic seeded weights) arm by arm with the
meter's protocol, and
`quantenergy.Meter.window` is checked against nvidia-ml-py reading the same energy counter on the
same window (pynvml's reads sit just inside the window's edges).

  python_campaign.py --shape qwen2-0.5b --repeats 3 --out DIR

Arms: FP16, BF16 and INT4-WO (weight-only int4, group 128, through `_weight_int4pack_mm` with BF16
activations, as gpt-fast's int4 runs it: every Linear and the LM head). Each compiled model is
built once and reused by every repeat (the compile is not in any window). Writes
DIR/campaign-r<R>/*.json and DIR/agreement.json.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "peers"))
import shapes  # noqa: E402
import torch_compile as tc  # noqa: E402

import pynvml  # noqa: E402
import torch  # noqa: E402

import quantenergy as qe  # noqa: E402


class Arm:
    """One precision's compiled decoder, as a Campaign arm."""

    def __init__(self, s, precision, max_seq, seed):
        dtype = {"FP16": torch.float16, "BF16": torch.bfloat16, "INT4-WO": torch.bfloat16}[precision]
        gen = torch.Generator(device="cuda")
        gen.manual_seed(seed)
        int4 = None
        if precision == "INT4-WO":
            int4, err = tc.int4_check(gen, "cuda")
            assert err <= 0.05, f"int4 self-check error {err:.3f}: the packed layout may be wrong"
        with torch.no_grad():
            self.model = tc.Qwen2(s, max_seq, dtype, gen, int4).eval()
            self.weight_bytes_per_step = int(self.model.weight_bytes_per_token())
            for blk in self.model.blocks:
                torch._dynamo.mark_static_address(blk.k_cache)
                torch._dynamo.mark_static_address(blk.v_cache)
        self.step = torch.compile(tc.decode_step, mode="reduce-overhead", fullgraph=True)
        self.vocab = s["vocab"]
        matmul = (f"int4 group {tc.GROUP} _weight_int4pack_mm, BF16 activations" if int4 is not None
                  else f"{precision} matmuls as inductor lowers them")
        self.kernel = f"torch {torch.__version__} compile reduce-overhead fullgraph (gpt-fast inductor), {matmul}"
        t = time.perf_counter()
        self.generate(1, 16, 5)  # compile and record the CUDA graphs outside every window
        self.synchronize()
        self.compile_s = time.perf_counter() - t

    def generate(self, batch, prompt_len, new_tokens):
        assert batch == 1, "this decoder runs one sequence"
        prompt = torch.tensor([[(i * 7919 + 13) % self.vocab for i in range(prompt_len)]], device="cuda")
        with torch.no_grad():
            out = tc.generate(self.model, self.step, prompt, new_tokens)
        return out.shape[1]

    def synchronize(self):
        torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="qwen2-0.5b")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--precisions", default="FP16,BF16,INT4-WO")
    ap.add_argument("--session", default="python-wheel-2026-12-03")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    s = shapes.load(a.shape)
    torch.zeros(1, device="cuda")
    tc.configure_inductor("gpt-fast")
    arms = {}

    def load(precision):
        if precision not in arms:
            arms[precision] = Arm(s, precision, ((16 + a.tokens + 63) // 64) * 64, 0)
            print(f"{precision}: compiled in {arms[precision].compile_s:.1f} s", flush=True)
        return arms[precision]

    for r in range(1, a.repeats + 1):
        c = qe.Campaign(model=s["name"], params_b=shapes.params_b(s), precisions=a.precisions.split(","),
                        stack="torch.compile", stack_version=torch.__version__, tokens=a.tokens,
                        warmup=2, iterations=10, order="balanced", repeat=r, seed=34, min_window_s=5.0,
                        cooldown_max_s=10.0, session=a.session,
                        synthetic_seed=0)
        paths = c.run(load, out=os.path.join(a.out, f"campaign-r{r}"))
        for p in paths:
            rep = json.load(open(p))
            v = qe.validate(p)
            print(f"r{r} {os.path.basename(p)}: {rep['results'].get('energy_per_token_mj')} mJ/token, "
                  f"{rep['results'].get('vs_fp16_energy_pct')} % vs FP16, window "
                  f"{rep['energy']['window_seconds']} s, valid={v.valid}, validity="
                  f"{(v.validity or {}).get('status')}", flush=True)

    # The same counter read by nvidia-ml-py inside the meter's window, over the same work.
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(int(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or 0))
    meter = qe.Meter()
    arm = load("FP16")
    rows = []
    for i in range(5):
        with meter.window(tokens=20 * a.tokens) as w:
            e0 = pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
            for _ in range(20):
                arm.generate(1, 16, a.tokens)
            arm.synchronize()
            e1 = pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
        ours, theirs = w.result.joules, (e1 - e0) / 1000.0
        rows.append({"window_s": w.result.seconds, "quantenergy_j": ours, "pynvml_j": theirs,
                     "diff_pct": (ours / theirs - 1) * 100, "trace_j": w.result.trace_joules,
                     "counter_over_trace": w.result.counter_over_trace, "flags": w.result.flags,
                     "gpu_busy_pct": w.result.gpu_busy_pct})
        print(json.dumps(rows[-1]), flush=True)
    json.dump({"device": meter.device, "pynvml": pynvml.__version__ if hasattr(pynvml, "__version__") else "nvidia-ml-py",
               "windows": rows}, open(os.path.join(a.out, "agreement.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
