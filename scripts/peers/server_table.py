#!/usr/bin/env python3
"""The server campaign's table (docs/MEASUREMENTS.md): llama-server (single stream and concurrency 8)
next to llama-bench and our candle-graph engine, same card, same sitting, same synthetic shapes.

  server_table.py data/measurements/h200/server
"""
import glob
import json
import os
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "data/measurements/h200/server"
SHAPES = {"qwen2-0.5b": "Qwen2-0.5B", "qwen2-1.5b": "Qwen2-1.5B", "qwen2-7b": "Qwen2-7B"}
FORMATS = [("F16", "FP16"), ("Q8_0", "Q8_0"), ("Q4_K", "Q4_K"), ("Q4_0", "Q4_0")]


def report_arm(path, precision):
    r = json.load(open(path))
    arm = next(a for a in r["protocol"]["arms"] if a["precision"] == precision)
    return r, arm


def server(shape, conc, prec):
    p = glob.glob(os.path.join(root, "llama-server", f"{shape}-c{conc}", f"*_{prec}.json"))
    if not p:
        return None
    r, a = report_arm(p[0], prec)
    return dict(tok_s=a["throughput_tokens_per_s"], mj=a["energy_per_token_mj"], d=r["results"].get("vs_fp16_energy_pct"),
                cv=a.get("iteration_time_cv_pct"), lat=a.get("latency") or {}, cot=a.get("counter_over_trace_ratio"))


def bench(shape, fmt):
    p = os.path.join(root, "llama-bench", f"{shape}-{fmt}.json")
    if not os.path.exists(p):
        return None
    j = json.load(open(p))
    return dict(tok_s=j["tok_s"], mj=j["mj_per_token"], cv=j.get("iter_cv_pct"))


def engine(shape, prec):
    p = glob.glob(os.path.join(root, "candle-graph", shape, f"*_{prec}_b1.json"))
    if not p:
        return None
    r, a = report_arm(p[0], prec)
    return dict(tok_s=a["throughput_tokens_per_s"], mj=a["energy_per_token_mj"], d=r["results"].get("vs_fp16_energy_pct"),
                cv=a.get("iteration_time_cv_pct"))


def cell(x):
    return "–" if x is None else f"{x['tok_s']:.0f} · {x['mj']:.0f}"


def delta(x, base):
    if x is None or base is None:
        return "–"
    return f"{(x['mj'] - base['mj']) / base['mj'] * 100:+.1f} %"


print("| shape | format | llama-server c1: tok/s · mJ/tok (ΔE) | llama-bench: tok/s · mJ/tok (ΔE) | server ÷ bench energy |"
      " candle-graph: tok/s · mJ/tok (ΔE) | llama-server c8: tok/s · mJ/tok (ΔE) | c1 TTFT p50 / ITL p50 ms | c1 iteration CV % |")
print("|---|---|---|---|---|---|---|---|---|")
for shape in SHAPES:
    b16, s16, e16, c16 = bench(shape, "F16"), server(shape, 1, "FP16"), engine(shape, "FP16"), server(shape, 8, "FP16")
    for fmt, prec in FORMATS:
        s, b, e, c = server(shape, 1, prec), bench(shape, fmt), engine(shape, prec), server(shape, 8, prec)
        ratio = f"{s['mj'] / b['mj']:.3f}" if s and b else "–"
        lat = f"{s['lat'].get('ttft_ms_p50', 0):.1f} / {s['lat'].get('itl_ms_p50', 0):.2f}" if s else "–"
        print(f"| {SHAPES[shape]} | {fmt} | {cell(s)} ({delta(s, s16)}) | {cell(b)} ({delta(b, b16)}) | {ratio} | "
              f"{cell(e)} ({delta(e, e16)}) | {cell(c)} ({delta(c, c16)}) | {lat} | {s['cv'] if s else '–'} |")
