#!/usr/bin/env python3
"""One-off provenance script: writes data/anchors.csv from ../shared/reference/anchors.csv.

Adds the columns the reference file lacks (session, stack, power accounting, whether the row feeds
the default curves and why not). Row groups follow reference/README.md "Row groups" 1-13, in file
order. Re-run only if the reference data changes; the output is committed and is the source of truth.
"""
import csv, sys, pathlib

ref = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/reference/anchors.csv")
out = pathlib.Path(__file__).resolve().parent.parent / "data" / "anchors.csv"

BNB = "transformers + bitsandbytes"
# (row count, session, stack, power accounting, default-curve note for rows not pooled)
GROUPS = [
    (15, "rtx4090-2026-07", f"{BNB} (ecocompute-mlcube container pins: bitsandbytes 0.43.3)", "gross", ""),
    (1, "rtx4090-2026-08-06", f"{BNB} (transformers 4.46.3, bitsandbytes 0.45.5; not pinned)", "gross", ""),
    (10, "rtx4090-2026-08-19", f"{BNB} (paired energy+perplexity session)", "gross",
     "separate session; INT8 penalties 2-2.5x July; source says not to pool with July"),
    (5, "rtx4090-2026-08-20", f"{BNB} (INT8 repeats)", "gross",
     "INT8 repeat session (means of 3); not in the upstream curves; different session from July"),
    (2, "rtx4090-2026-09-25", f"{BNB}", "gross",
     "two-card re-test of 3B NF4 (model inferred); not in the upstream curves"),
    (4, "rtx4090d-v1.1.0", f"{BNB} (dataset v1.1.0)", "gross", ""),
    (8, "rtx5090-2026-01", f"{BNB} (dataset v1.1.0)", "gross", ""),
    (22, "rtx5090-2026-09", f"{BNB} (bitsandbytes 0.50.2, torch 2.14)", "gross",
     "different stack (bitsandbytes 0.50.2, torch 2.14): NF4 crossover moves to ~1.8B; source says not to pool with January"),
    (8, "t4-v1.1.0", f"{BNB} (dataset v1.1.0)", "gross", ""),
    (3, "t4-2026-04-17-bs8", f"{BNB}", "gross",
     "batch 8; energy published in undeterminable units, so left out (throughput only)"),
    (14, "rtx4090d-2026-02", f"{BNB} (n=10 runs in one session)", "idle-subtracted",
     "energies have ~17 W idle power subtracted; never mix with gross rows"),
    (9, "a800-2026-02-13", f"{BNB} (128 new tokens, quick validation)", "gross",
     "quick validation off-protocol (128 new tokens, ~5 power samples per iteration)"),
    (6, "a800-v1.1.0", f"{BNB} (dataset v1.1.0)", "gross", ""),
    (3, "rtx4090-llamacpp-2026-09-03", "llama.cpp GGUF (decode-only E(576)-E(64), NVML counter)", "gross",
     "llama.cpp runtime and decode-only window; not comparable with bitsandbytes curves"),
]

rows = list(csv.DictReader(ref.open()))
assert sum(g[0] for g in GROUPS) == len(rows), (sum(g[0] for g in GROUPS), len(rows))
cols = ["gpu", "gpu_arch", "model", "params_b", "precision", "batch_size", "energy_per_token_mj",
        "fp16_energy_per_token_mj", "vs_fp16_energy_pct", "throughput_tok_s", "avg_power_w", "n", "cv_pct",
        "power_accounting", "stack", "session", "source", "default_curve", "curve_note"]
w = csv.DictWriter(out.open("w", newline=""), fieldnames=cols, lineterminator="\n")
w.writeheader()
i = 0
for count, session, stack, acct, note in GROUPS:
    for r in rows[i:i + count]:
        default = r["upstream_curve"] == "1"
        if default:
            cnote = "feeds the default curve (one of the 29 upstream curve anchors)"
        elif r["precision"] == "FP16":
            cnote = "FP16 baseline (dE = 0 by definition); used for absolute energy"
        elif note:
            cnote = note
        else:
            cnote = "same session as curve anchors but not among the 29 upstream curve rows"
        if session == "rtx4090-2026-08-06":
            # The re-run published only its INT8 energy and a ratio; its FP16 column was derived.
            cnote += ("; its FP16 energy was not measured in this re-run: upstream back-derived it "
                      "from the published ratio, so this row's dE rests on one measured energy")
        w.writerow({**{k: r[k] for k in cols if k in r}, "power_accounting": acct, "stack": stack,
                    "session": session, "default_curve": "1" if default else "0", "curve_note": cnote})
    i += count
print(f"wrote {out} ({len(rows)} rows)")
