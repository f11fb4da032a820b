#!/usr/bin/env bash
# An engine switch off and on, side by side: `tune.sh` per shape with VAR=0 then VAR=1 —
# greedy tokens against the eager engine and replayed vs op by op, the teacher-forced logit
# difference (compare it between the two: the one check of a kernel's arithmetic on the GPU), and
# the graph engine's tok/s (256 tokens, median of 3 timed runs). No metering.
# Usage (on the device, repo root; carry .ship/quantenergy.gz):
#   bash scripts/device/ab_check.sh VAR PRECISIONS [SHAPE...]
#   e.g. ab_check.sh QE_ATTN_ONE_BLOCK F16,Q4_0 qwen2-7b qwen2-1.5b    (≈ 1 min a shape and setting)
set -uo pipefail
var=${1:?VAR} precs=${2:?PRECISIONS}; shift 2
for s in ${*:-qwen2-7b tinyllama-1.1b qwen2-1.5b qwen2-0.5b}; do
  bash "$(dirname "$0")/tune.sh" "$s" "$precs" "$var=0" "$var=1"
done
