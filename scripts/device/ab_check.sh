#!/usr/bin/env bash
# An engine switch off and on, side by side (issue 13): engine-check per shape with VAR=0 then VAR=1,
# the given precisions: greedy tokens against the eager engine and replayed vs op by op, the
# teacher-forced logit difference (compare it between the two: the one check of a kernel's
# arithmetic on the GPU), and the graph engine's tok/s (256 tokens, median of 3 timed runs). No
# metering: a speed and correctness check before any campaign row uses the switch.
# Usage (on the device, repo root; carry .ship/quantenergy.gz):
#   bash scripts/device/ab_check.sh VAR PRECISIONS [SHAPE...]
#   e.g. ab_check.sh QE_ATTN_SPLIT F16,Q4_0 qwen2-7b qwen2-1.5b    (≈ 1 min a shape and setting)
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
var=${1:?VAR} precs=${2:?PRECISIONS}; shift 2
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit --format=csv,noheader
PY=/opt/torch/.venv/bin/python; [ -x "$PY" ] || PY=python3
for s in ${*:-qwen2-7b tinyllama-1.1b qwen2-1.5b qwen2-0.5b}; do
  for v in 0 1; do
    echo "== $s $var=$v"
    env "$var=$v" timeout 170 "$QE" engine-check --synthetic "$s" --precision "$precs" --tokens 256 \
      --timing-runs 3 --json "$OUT/ab-$s-$v.json" 2>&1 | grep -vE "^\s*$|INFO" | tail -4
    echo "rc ${PIPESTATUS[0]}"
  done
  # Side by side: graph tok/s, teacher-forced max relative logit difference, kernel label.
  "$PY" - "$OUT/ab-$s-0.json" "$OUT/ab-$s-1.json" <<'PYEOF' || true
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
