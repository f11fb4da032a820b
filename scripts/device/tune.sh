#!/usr/bin/env bash
# Engine settings side by side on one card: for one shape and format, engine-check once
# per setting — greedy tokens against the eager engine and replayed vs op by op, the teacher-forced
# logit difference, and the graph engine's tok/s (256 tokens, median of 3 timed runs). No metering:
# it picks launch shapes and kernels before a campaign row uses them.
# Usage (on the device, repo root; carry .ship/quantenergy.gz):
#   bash scripts/device/tune.sh SHAPE PRECISION SETTING...
#   a SETTING is "-" (the defaults) or space-separated VAR=value pairs, e.g.
#   tune.sh qwen2-1.5b Q4_0 - QE_NORM_THREADS=1024 "QE_NORM_THREADS=256 QE_Q8=0"
#   (a variable the meter does not know is ignored: the run is then the defaults under that name)
# PRECISION may be a list (F16,Q4_0). Results: $OUT/tune-SHAPE-PRECISION-N.json per setting (N counts
# the settings from 1), a summary line per setting and precision on stdout, after the card's line.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
shape=${1:?SHAPE} prec=${2:?PRECISION}; shift 2
PY=/opt/torch/.venv/bin/python; [ -x "$PY" ] || PY=python3
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit --format=csv,noheader
n=0
for setting in "$@"; do
  n=$((n + 1))
  vars=(); [ "$setting" = - ] || read -r -a vars <<< "$setting"
  json="$OUT/tune-$shape-$prec-$n.json"
  env ${vars[@]+"${vars[@]}"} timeout 170 "$QE" engine-check --synthetic "$shape" --precision "$prec" --tokens 256 \
    --timing-runs 3 --json "$json" > "$OUT/tune-$shape-$prec-$n.log" 2>&1
  rc=$?
  "$PY" - "$json" "$setting" "$rc" <<'PYEOF' || true
import json, sys
path, setting, rc = sys.argv[1:]
try:
    rows = json.load(open(path))
except Exception as e:
    print(f"{setting:40s} rc {rc}: no result ({e})"); sys.exit()
for r in rows if isinstance(rows, list) else [rows]:
    print(f"{setting:40s} {r['model']} {r['precision']}: graph {r['graph_tok_s']:.1f} tok/s, "
          f"tokens {'identical' if r['identical'] else 'differ at %s' % r['first_divergence']}, "
          f"tf rel diff {r['tf_max_rel_logit_diff']:.2e}, replay identical {r['replay_identical']}")
PYEOF
done
