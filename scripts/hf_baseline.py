#!/usr/bin/env python3
"""HF transformers FP16 decode measured with the same protocol as `quantenergy measure`.

The upstream stack (transformers + torch) decoding the same synthetic shapes (random init from a
config built from data/models.csv), metered the same way: idle reference with a live CUDA context,
2 warmups, cooldown (bounded), one NVML energy-counter window around 10 x 256-token greedy
generations (min_new_tokens = max_new_tokens), POWER_INSTANT trace at 50 Hz as cross-check.
Prints one JSON object per shape. Runs on the GPU machine (torch, transformers, nvidia-ml-py).
"""
import argparse, csv, json, os, threading, time

import pynvml
import torch
import transformers

FI_POWER_INSTANT = 186


def shape(name, models_csv):
    for r in csv.DictReader(open(models_csv)):
        if r["name"].lower() == name.lower():
            return r
    raise SystemExit(f"unknown shape {name}")


def config(r):
    common = dict(
        vocab_size=int(r["vocab"]), hidden_size=int(r["hidden"]), intermediate_size=int(r["intermediate"]),
        num_hidden_layers=int(r["layers"]), num_attention_heads=int(r["heads"]),
        num_key_value_heads=int(r["kv_heads"]), max_position_embeddings=int(r["max_position"]),
        tie_word_embeddings=r["tied_embeddings"] == "1", rope_theta=float(r["rope_theta"]),
        rms_norm_eps=float(r["rms_eps"]),
    )
    if r["family"] == "qwen2":
        return transformers.Qwen2Config(**common)
    return transformers.LlamaConfig(**common)


def power_w(h):
    v = pynvml.nvmlDeviceGetFieldValues(h, [FI_POWER_INSTANT])[0]
    if v.nvmlReturn != 0:
        raise RuntimeError("field read failed")
    return v.value.uiVal / 1000.0


class Sampler(threading.Thread):
    def __init__(self, h, hz):
        super().__init__(daemon=True)
        self.h, self.period, self.samples, self.failed = h, 1.0 / hz, [], 0
        self.stop = threading.Event()

    def run(self):
        t0 = time.perf_counter()
        nxt = t0
        while True:
            stopping = self.stop.is_set()
            try:
                self.samples.append((time.perf_counter() - t0, power_w(self.h)))
            except Exception:
                self.failed += 1
            if stopping:
                break
            nxt += self.period
            time.sleep(max(0.0, nxt - time.perf_counter()))

    def energy_j(self):
        s = self.samples
        return sum((b[0] - a[0]) * (a[1] + b[1]) / 2 for a, b in zip(s, s[1:])) if len(s) > 1 else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", required=True)
    ap.add_argument("--models-csv", default=os.path.join(os.path.dirname(__file__), "..", "data", "models.csv"))
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--prompt-len", type=int, default=16)
    ap.add_argument("--cooldown-max-s", type=float, default=30)
    ap.add_argument("--sample-hz", type=float, default=50)
    a = ap.parse_args()

    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    torch.manual_seed(0)
    torch.cuda.init()
    torch.zeros(1, device="cuda")  # live context before the idle reference, as our meter does
    idle = min(power_w(h) for _ in range(30) if time.sleep(0.02) is None)
    r = shape(a.shape, a.models_csv)
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(config(r), dtype=torch.float16).eval()
    vocab = int(r["vocab"])
    ids = torch.tensor([[(i * 7919 + 13) % vocab for i in range(a.prompt_len)]], device="cuda")
    gen = dict(max_new_tokens=a.tokens, min_new_tokens=a.tokens, do_sample=False, use_cache=True,
               pad_token_id=0, eos_token_id=None)
    with torch.inference_mode():
        for _ in range(a.warmup):
            model.generate(ids, **gen)
        torch.cuda.synchronize()
        t_cool = time.perf_counter()
        while power_w(h) > idle + 6 and time.perf_counter() - t_cool < a.cooldown_max_s:
            time.sleep(0.5)
        cooled = power_w(h) <= idle + 6
        cool_s = time.perf_counter() - t_cool
        smp = Sampler(h, a.sample_hz)
        smp.start()
        e0 = pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
        t0 = time.perf_counter()
        n = 0
        for _ in range(a.iterations):
            out = model.generate(ids, **gen)
            n += out.shape[1] - ids.shape[1]
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        e1 = pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
        smp.stop.set()
        smp.join()
    window = t1 - t0
    counter_j = (e1 - e0) / 1000.0
    trace_j = smp.energy_j()
    print(json.dumps({
        "engine": f"transformers {transformers.__version__} / torch {torch.__version__}",
        "shape": r["name"], "precision": "FP16", "tokens_generated": n, "window_s": round(window, 4),
        "tok_s": round(n / window, 3), "mj_per_token_counter": round(counter_j * 1000 / n, 3),
        "mj_per_token_trace": round(trace_j * 1000 / n, 3) if trace_j else None,
        "counter_over_trace": round(counter_j / trace_j, 4) if trace_j else None,
        "avg_power_w": round(counter_j / window, 2), "idle_power_w": round(idle, 2),
        "samples": len(smp.samples), "failed_reads": smp.failed,
        "achieved_hz": round((len(smp.samples) + smp.failed) / window, 2),
        "cooldown_converged": cooled, "cooldown_s": round(cool_s, 2),
    }))


if __name__ == "__main__":
    main()
