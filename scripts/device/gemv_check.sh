#!/usr/bin/env bash
# The opt-in matvec (QE_GEMV=1, engine::fused::Gemv) against cuBLAS's GEMM in the graph engine
# (issue 13: 7 B F16 at ≥ 65 % of the HBM roofline; 61.6 % with cuBLAS). engine-check per shape,
# F16 and BF16, without and with it: greedy tokens against the eager engine and replayed vs op by op,
# the teacher-forced logit difference (the one check of the kernel's arithmetic on the GPU: compare
# it between the two), and the graph engine's tok/s (256 tokens, median of 3 timed runs). No
# metering: a speed and correctness check before any campaign row uses it. 7 B first (the target),
# TinyLlama for the Llama head. ≈ 4–5 min on one H200.
# Usage (on the device, repo root; carry .ship/quantenergy.gz): bash scripts/device/gemv_check.sh [SHAPE...]
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit --format=csv,noheader
PY=/opt/torch/.venv/bin/python; [ -x "$PY" ] || PY=python3
for s in ${*:-qwen2-7b tinyllama-1.1b qwen2-1.5b qwen2-0.5b}; do
  for g in 0 1; do
    echo "== $s QE_GEMV=$g"
    QE_GEMV=$g timeout 170 "$QE" engine-check --synthetic "$s" --precision F16,BF16 --tokens 256 \
      --timing-runs 3 --json "$OUT/gemv-$s-$g.json" 2>&1 | grep -vE "^\s*$|INFO" | tail -4
    echo "rc ${PIPESTATUS[0]}"
  done
  # Side by side: graph tok/s, teacher-forced max relative logit difference, kernel label.
  "$PY" - "$OUT/gemv-$s-0.json" "$OUT/gemv-$s-1.json" <<'PYEOF' || true
import json, sys
for path in sys.argv[1:]:
    try:
        rows = json.load(open(path))
    except Exception as e:
        print(f"{path}: {e}"); continue
    for r in rows if isinstance(rows, list) else [rows]:
        print(f"{path.rsplit('/', 1)[-1]} {r['precision']}: graph {r['graph_tok_s']:.1f} tok/s, "
              f"tf rel diff {r['tf_max_rel_logit_diff']:.2e}, replay identical {r['replay_identical']}, "
              f"kernel {r['graph_kernel']}")
PYEOF
done
