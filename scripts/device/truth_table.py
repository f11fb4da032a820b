#!/usr/bin/env python3
"""The real-vs-synthetic table of a truth sitting (scripts/device/truth.sh), from its raw reports.

    python3 scripts/device/truth_table.py data/measurements/h200/truth

Per engine and weights: each format's mJ/token and ΔE vs the FP16 arm of the same run, with the 95 %
interval from the spread of the runs' own ΔE (t(n-1)·sd/√n, as `quantenergy aggregate` pairs them), the
shortest window, the counter's update period and the validity verdicts. Then real minus synthetic ΔE
per engine and format (Welch interval: the two sets are separate runs), and the perplexity of the real
weights (the meter's, per run, and llama.cpp's llama-perplexity log where it is there).
"""
import glob
import json
import math
import os
import re
import statistics
import sys

# Student t, two-sided 95 %, by degrees of freedom (1..30); larger: 1.96.
T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
       2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
       2.045, 2.042]
FORMATS = ["FP16", "Q8_0", "Q4_K", "Q4_0"]
SETS = [("candle-graph", "real", "graph-real"), ("candle-graph", "synthetic", "graph-synthetic"),
        ("llama-server", "real", "llama-real"), ("llama-server", "synthetic", "llama-synthetic")]


def t95(df):
    return T95[df - 1] if 1 <= df <= len(T95) else 1.96


def half_width(xs):
    return t95(len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else float("nan")


def load(root, folder):
    rows = {}
    for f in sorted(glob.glob(os.path.join(root, "*", folder, "*.json"))):
        r = json.load(open(f))
        m = re.search(r"-r(\d+)_", os.path.basename(f))
        rows.setdefault(r["workload"]["precision"], []).append((int(m.group(1)), r, f))
    return rows


def main(root):
    deltas = {}
    print("| engine · weights | format | n | mJ/token | ΔE vs FP16 | 95 % (paired) | window s (min) | counter ms | validity | card |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|---|")
    for engine, weights, folder in SETS:
        rows = load(root, folder)
        for p in FORMATS:
            runs = rows.get(p, [])
            if not runs:
                continue
            e = [r["results"]["energy_per_token_mj"] for _, r, _ in runs]
            d = [r["results"]["vs_fp16_energy_pct"] for _, r, _ in runs if p != "FP16"]
            win = min(r["energy"]["window_seconds"] for _, r, _ in runs)
            upd = sorted({r["energy"].get("counter_update_ms") for _, r, _ in runs})
            val = sorted({(r.get("validity") or {}).get("status", "—") for _, r, _ in runs})
            flags = sorted({fl["code"] for _, r, _ in runs for fl in (r.get("validity") or {}).get("flags", [])})
            card = sorted({os.path.relpath(f, root).split(os.sep)[0] for _, _, f in runs})
            deltas[(engine, weights, p)] = d
            dd = f"{statistics.mean(d):+.1f} %" if d else "0 (baseline)"
            hw = f"±{half_width(d):.1f}" if len(d) > 1 else "—"
            print(f"| {engine} · {weights} | {p} | {len(runs)} | {statistics.mean(e):.1f} | {dd} | {hw} | "
                  f"{win:.2f} | {', '.join(str(u) for u in upd)} | {', '.join(val)}{' (' + ', '.join(flags) + ')' if flags else ''} | {', '.join(card)} |")
    print()
    print("| engine | format | ΔE real | ΔE synthetic | real − synthetic | 95 % (Welch) |")
    print("|---|---|---:|---:|---:|---:|")
    for engine in ["candle-graph", "llama-server"]:
        for p in FORMATS[1:]:
            a, b = deltas.get((engine, "real", p)), deltas.get((engine, "synthetic", p))
            if not a or not b or len(a) < 2 or len(b) < 2:
                continue
            va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
            se = math.sqrt(va + vb)
            df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1)) if va + vb > 0 else 1
            diff = statistics.mean(a) - statistics.mean(b)
            print(f"| {engine} | {p} | {statistics.mean(a):+.1f} % | {statistics.mean(b):+.1f} % | {diff:+.1f} points | "
                  f"±{t95(max(1, int(df))) * se:.1f} |")
    print()
    print("| format | meter PPL (graph, real; per run) | ΔPPL vs FP16 | llama-perplexity (-c 256) |")
    print("|---|---|---:|---:|")
    rows = load(root, "graph-real")
    for p in FORMATS:
        q = [r["quality"]["value"] for _, r, _ in rows.get(p, []) if r.get("quality")]
        dq = [r["quality"].get("delta_vs_fp16_pct") for _, r, _ in rows.get(p, []) if r.get("quality")]
        tag = "F16" if p == "FP16" else p
        logs = glob.glob(os.path.join(root, "*", "logs", f"llama-perplexity-{tag}.log"))
        lp = "—"
        if logs:
            m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", open(logs[0]).read())
            lp = f"{m.group(1)} ± {m.group(2)}" if m else "—"
        dqs = [x for x in dq if x is not None]
        print(f"| {p} | {', '.join(f'{x:.2f}' for x in q)} | {statistics.mean(dqs):+.1f} % | {lp} |" if dqs
              else f"| {p} | {', '.join(f'{x:.2f}' for x in q)} | 0 | {lp} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "data/measurements/h200/truth")
