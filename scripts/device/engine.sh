#!/usr/bin/env bash
# Graph vs eager decode engine on the GPU machine. Carried as .ship/engine/engine.sh with the
# binary .ship/engine/quantenergy.gz; run from the repo root inside a device call:
#   bash .ship/engine/engine.sh check     — engine-check: greedy tokens + tok/s, Qwen2-0.5B and TinyLlama shapes
#   bash .ship/engine/engine.sh measure SHAPE...  — quantenergy measure, --engine graph and eager, F16 + Q4_K arms
# Everything it writes comes back as one $OUT/engine-<mode>.tgz (a call returns at most 8 files).
set -u
mkdir -p /tmp/qe
gunzip -c .ship/engine/quantenergy.gz > /tmp/qe/quantenergy && chmod +x /tmp/qe/quantenergy
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export QE=/tmp/qe/quantenergy RUST_LOG=${RUST_LOG:-warn}
R=/tmp/engine-results; mkdir -p $R
mode=$1; shift
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
case $mode in
check)
  for shape in qwen2-0.5b tinyllama-1.1b; do
    timeout 200 $QE engine-check --synthetic $shape --precision F16,BF16,Q8_0,Q4_K,Q4_0 --tokens 256 \
      --timing-runs 1 --json $R/check_${shape}_b1.json 2>&1 | tee -a $R/check.log
    echo "== $shape b1 done at $(( $(date +%s) - t0 )) s"
  done
  for p in F16 Q4_K; do
    timeout 120 $QE engine-check --synthetic qwen2-0.5b --precision $p --batch 64 --tokens 64 \
      --timing-runs 1 --json $R/check_qwen2-0.5b_b64_$p.json 2>&1 | tee -a $R/check.log
  done
  ;;
measure)
  for shape in "$@"; do
    for engine in graph eager; do
      timeout 280 $QE measure --synthetic $shape --precision Q4_K --baseline F16 --engine $engine \
        --iterations 10 --tokens 256 --warmup 2 --cooldown-max-s 15 --out $R --name ${shape}_${engine} 2>&1 \
        | grep -vE "^\s*$" | tail -n 30 | tee -a $R/measure.log
      for f in $R/${shape}_${engine}*.json; do
        python3 - "$f" <<'PY' 2>&1 | tee -a $R/measure.log
import json, sys
r = json.load(open(sys.argv[1]))
for a in r["protocol"]["arms"]:
    print(sys.argv[1].split("/")[-1], r["stack"]["engine"], a["precision"], a.get("status"),
          a.get("throughput_tokens_per_s"), "tok/s", a.get("energy_per_token_mj"), "mJ/tok", a.get("kernel"))
PY
      done
      echo "== $shape $engine done at $(( $(date +%s) - t0 )) s" | tee -a $R/measure.log
    done
  done
  ;;
esac
(cd /tmp && tar czf "$OUT/engine-$mode.tgz" engine-results)
