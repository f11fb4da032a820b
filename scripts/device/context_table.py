#!/usr/bin/env python3
"""The table of scripts/device/context.sh: per shape, format and depth, the graph engine's decode
tok/s (split attention, the default; and the one-block kernel where it ran) beside llama-bench's
`-p 0 -n 256 -d DEPTH` rate, and both prefill rates.

    context_table.py DIR      DIR holds ours-<tag>-<shape>-<depth>.json (engine-check --json) and
                              bench-<shape>-<format>.json / bench-prefill-<shape>-<format>.json
                              (llama-bench -o json)
"""
import glob
import json
import os
import re
import sys

GGUF_NAME = {"FP16": "F16", "F16": "F16", "BF16": "BF16", "Q8_0": "Q8_0", "Q4_K": "Q4_K", "Q4_0": "Q4_0"}


def ours(d):
    out = {}
    for p in glob.glob(os.path.join(d, "ours-*.json")):
        m = re.match(r"ours-(split|oneblock|forcedsplit)-(.+)-(\d+)\.json$", os.path.basename(p))
        if not m:
            continue
        tag, shape, depth = m.group(1), m.group(2), int(m.group(3))
        try:
            rows = json.load(open(p))
        except (OSError, ValueError):
            continue
        for r in rows:
            out[(shape, r["precision"], depth, tag)] = r
    return out


def bench(d):
    dec, pre = {}, {}
    for p in glob.glob(os.path.join(d, "bench-*.json")):
        base = os.path.basename(p)
        m = re.match(r"bench(?:-extra)?-(prefill-)?(.+)-(F16|BF16|Q8_0|Q4_K|Q4_0)\.json$", base)
        if not m:
            continue
        shape, fmt = m.group(2), m.group(3)
        try:
            rows = json.load(open(p))
        except (OSError, ValueError):
            continue
        for r in rows:
            if m.group(1):
                pre[(shape, fmt, r["n_prompt"])] = r["avg_ts"]
            else:
                dec[(shape, fmt, r.get("n_depth", 0))] = (r["avg_ts"], r.get("stddev_ts", 0.0))
    return dec, pre


def main():
    d = sys.argv[1]
    o = ours(d)
    dec, pre = bench(d)
    print("| shape | format | depth | graph decode tok/s | split forced | one-block forced "
          "| llama-bench tok/s (± sd) | graph / llama | graph prefill tok/s | llama-bench prefill tok/s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    keys = sorted({(s, p, dp) for (s, p, dp, _) in o}, key=lambda k: (k[0], k[1], k[2]))
    for s, p, dp in keys:
        r = o.get((s, p, dp, "split"))
        one = o.get((s, p, dp, "oneblock"))
        forced = o.get((s, p, dp, "forcedsplit"))
        fmt = GGUF_NAME.get(p, p)
        # llama-bench's depth d: d tokens in the cache, then 256 generated; ours: a prompt of d.
        b = dec.get((s, fmt, dp))
        pr = pre.get((s, fmt, dp))
        g = r["graph_decode_tok_s"] if r else None
        cells = [
            s, p, str(dp),
            f"{g:.1f}" if g else "–",
            f"{forced['graph_decode_tok_s']:.1f}" if forced else "–",
            f"{one['graph_decode_tok_s']:.1f}" if one else "–",
            f"{b[0]:.1f} ± {b[1]:.1f}" if b else "–",
            f"{g / b[0]:.2f}×" if g and b else "–",
            f"{r['graph_prefill_tok_s']:.0f}" if r else "–",
            f"{pr:.0f}" if pr else "–",
        ]
        print("| " + " | ".join(cells) + " |")
    # Replay identity of every row (graph-only runs compare the replay with the ops).
    bad = [k for k, r in o.items() if not r.get("replay_identical", False)]
    print(f"\nreplay vs op by op identical in {len(o) - len(bad)} of {len(o)} runs" +
          (f"; differs: {bad}" if bad else ""))


if __name__ == "__main__":
    main()
