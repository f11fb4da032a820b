#!/usr/bin/env bash
# The protocol and its baselines on the H200 (one device call, < 10 min): probe; the campaign's
# first two jobs (Qwen2-0.5B and Qwen2-1.5B: F16 baseline + Q8_0, Q4_K, Q4_0, full protocol); F16
# with the trace thread off (sampler overhead); HF transformers FP16 on the same shapes with the
# same protocol.
source scripts/device/env.sh
mkdir -p $OUT/raw $OUT/extra
cp data/measurements/h200/raw/*.json $OUT/raw/ 2>/dev/null || true
t0=$(date +%s)
step() { echo "=== [$(( $(date +%s) - t0 ))s] $*"; }
step probe; $QE probe 2>&1 | tee $OUT/probe.txt
step "campaign jobs 1-2"
$QE sweep data/measurements/h200/plan.toml --out $OUT/raw --limit 2 2>&1 | grep -vE "^\s*$" | tail -15
step "0.5B F16, trace thread off"
$QE measure --synthetic qwen2-0.5b --precision F16 --baseline none --no-trace --cooldown-max-s 20 \
  --out $OUT/extra --name qwen2-0.5b_F16_notrace 2>&1 | tail -3
step "HF transformers FP16"
for s in Qwen2-0.5B Qwen2-1.5B; do timeout 200 python3 scripts/hf_baseline.py --shape $s --cooldown-max-s 20 2>&1 | grep -v Warning | tee -a $OUT/hf_baseline.jsonl; done
step done
tar czf $OUT/raw.tgz -C $OUT raw extra
rm -rf $OUT/raw $OUT/extra
