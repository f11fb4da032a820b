#!/usr/bin/env bash
# The trace-overhead A/B (issue 5) where decode is not launch-bound, inside one device call:
# 1.5B at batch 64 (Q4_K: ~1 % window spread at batch 64; F16: ~6 %), then batch 1 again with
# per-window hypervisor steal and process CPU, to test whether slow windows are stolen ones.
# Usage (on the device, from the repo root): scripts/device/overhead.sh
source scripts/device/env.sh
ab() { local name=$1; shift; timeout 240 $QE overhead "$@" --out "$OUT" --name "$name" 2>&1 \
  | grep -vE "^\s*$" | tail -4; }
ab overhead_qwen2-1.5b_Q4_K_b64 --synthetic qwen2-1.5b --precision Q4_K --batch 64 --pairs 30 --iterations 1 --seed 21
ab overhead_qwen2-1.5b_F16_b64 --synthetic qwen2-1.5b --precision F16 --batch 64 --pairs 20 --iterations 1 --seed 22
ab overhead_qwen2-0.5b_F16_b1_host --synthetic qwen2-0.5b --precision F16 --batch 1 --pairs 12 --iterations 2 --seed 23
