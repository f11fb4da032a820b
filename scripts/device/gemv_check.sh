#!/usr/bin/env bash
# The opt-in matvec (QE_GEMV=1, engine::fused::Gemv) against cuBLAS's GEMM in the graph engine
# (issue 13: 7 B F16 at ≥ 65 % of the HBM roofline; 61.6 % with cuBLAS). engine-check per shape,
# F16 and BF16, without and with it: greedy tokens against the eager engine and replayed vs op by op,
# and the graph engine's tok/s (256 tokens, median of 3 timed runs). No metering: a speed and
# correctness check before any campaign row uses it. ≈ 3 min on one H200.
# Usage (on the device, repo root; carry .ship/quantenergy.gz): bash scripts/device/gemv_check.sh [SHAPE...]
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit --format=csv,noheader
for s in ${*:-qwen2-0.5b qwen2-1.5b qwen2-7b}; do
  for g in 0 1; do
    echo "== $s QE_GEMV=$g"
    QE_GEMV=$g "$QE" engine-check --synthetic "$s" --precision F16,BF16 --tokens 256 --timing-runs 3 \
      --json "$OUT/gemv-$s-$g.json" 2>&1 | grep -vE "^\s*$|INFO" | tail -4
  done
done
