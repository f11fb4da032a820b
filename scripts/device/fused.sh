#!/usr/bin/env bash
# The fused-kernel graph engine on one H200, in two device calls (each < 10 min, each one
# sitting on one card: the ratios it prints never mix cards or sittings).
#   bash scripts/device/fused.sh quant   correctness (engine-check: graph vs eager, 256 greedy steps, every
#                                        format, Qwen2 + Llama shapes), then candle-graph vs llama-bench
#                                        (CUDA build of the carried llama.cpp tree) at 1.5 B and 7 B
#   bash scripts/device/fused.sh f16     candle-graph vs torch.compile (reduce-overhead) at 0.5/1.5/7 B,
#                                        and the 0.5 B GGUF arms
#   bash scripts/device/fused.sh step    correctness, then llama-bench vs candle-graph at 1.5 B, 7 B F16,
#                                        and A/B timings of engine settings (AB="SETTING|…")
# Carry .ship/quantenergy.gz (scripts/build-cuda.sh) and, for `quant` and `step`, .ship/llama.cpp.tar.xz. Everything
# it writes comes back as $OUT/fused-<phase>.tgz plus the log.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
phase=${1:?quant or f16}
T0=$(date +%s)
R=/tmp/fused-$phase; rm -rf "$R"; mkdir -p "$R"
exec > >(tee -a "$OUT/fused-$phase.log") 2>&1
say() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
late() { [ $(( $(date +%s) - T0 )) -gt "${1:-520}" ]; }
bundle() { (cd /tmp && tar czf "$OUT/fused-$phase.tgz" "fused-$phase"); }
trap bundle EXIT
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit,clocks.max.sm --format=csv,noheader | tee "$R/gpu.txt"
export COOLDOWN_MAX_S=10

# Our engine, one shape: F16 baseline + the given formats, graph engine, the protocol's defaults
# (2 warm-ups, one window over 10 × 256 tokens, batch 1).
graph() {
  local shape=$1 precs=$2
  late 540 && { say "budget spent: graph $shape not run"; return; }
  say "candle-graph $shape $precs"
  timeout 200 "$QE" measure --synthetic "$shape" --precision "$precs" --baseline F16 --engine graph \
    --iterations 10 --tokens 256 --warmup 2 --cooldown-max-s 10 --out "$R/graph" --name "$shape" \
    > "$R/graph-$shape.log" 2>&1
  echo "rc $?" >> "$R/graph-$shape.log"; grep -E "tok/s|mJ/token|rc " "$R/graph-$shape.log" | tail -8
  bundle  # after every step: a call stopped at its limit still returns what ran
}

# llama.cpp builds on the CPU (and the given shapes' Q4_K/Q4_0 GGUFs are written) while the GPU runs
# the correctness checks — graph vs eager, every format, 256 steps (they time nothing that counts).
prep_and_check() {
  (SHAPES="$1" FORMATS="Q4_K Q4_0" OUT="$R/prep" WORK=/tmp/peers LLAMA_TARGETS=llama-bench \
    bash scripts/peers/server_campaign.sh prep > "$R/prep.log" 2>&1; echo "prep rc $?" >> "$R/prep.log") &
  local prep=$! shape
  for shape in qwen2-0.5b tinyllama-1.1b; do
    say "engine-check $shape, every format, 256 steps"
    timeout 150 "$QE" engine-check --synthetic "$shape" --precision F16,BF16,Q8_0,Q4_K,Q4_0 --tokens 256 \
      --timing-runs 1 --json "$R/check_$shape.json" > "$R/check_$shape.log" 2>&1
    echo "rc $?" >> "$R/check_$shape.log"; grep -E "b1:|^rc" "$R/check_$shape.log"; bundle
  done
  wait "$prep"; tail -2 "$R/prep.log"
}

# llama-bench, one shape and format, from the GGUFs and build of `server_campaign.sh prep`.
bench() {
  local shape=$1 t=$2
  say "llama-bench $shape $t"
  LLAMA_BIN=/tmp/peers/llama-build-cuda/bin NVML_INDEX=0 COOLDOWN_MAX_S=10 \
    timeout 120 scripts/peers/llama_bench.sh "/tmp/peers/gguf/$shape-$t.gguf" "$shape" "$t" \
    "$R/bench-$shape-$t.json" bench > "$R/bench-$shape-$t.log" 2>&1
  echo "rc $?" >> "$R/bench-$shape-$t.log"; tail -2 "$R/bench-$shape-$t.log"; bundle
}

case $phase in
quant)
  # Smoke first: a broken kernel must not cost the whole call.
  say "smoke: engine-check qwen2-0.5b F16 and Q4_0, 32 steps"
  if ! timeout 120 "$QE" engine-check --synthetic qwen2-0.5b --precision F16,Q4_0 --tokens 32 --timing-runs 1 \
      --json "$R/smoke.json" > "$R/smoke.log" 2>&1; then
    tail -30 "$R/smoke.log"; say "smoke failed: stopping"; exit 1
  fi
  tail -5 "$R/smoke.log"
  prep_and_check "qwen2-1.5b qwen2-7b"
  # The comparison, shape by shape, nothing else running: llama-bench then our engine.
  for shape in qwen2-1.5b qwen2-7b; do
    for t in Q4_K Q4_0; do
      late 470 && break
      bench "$shape" "$t"
    done
    graph "$shape" Q4_K,Q4_0
  done
  ;;
step)
  # The graph step beside llama-bench. Correctness first (a broken fold falls back: QE_FOLD_KV=0),
  # the llama.cpp build on the CPU meanwhile; then, nothing else running, llama-bench vs our engine
  # at 1.5 B, 7 B F16 (the roofline), and A/B timings of engine settings. SMOKE=0 skips the smoke
  # check (a call short of device time, with a binary whose kernels already ran).
  if [ "${SMOKE:-1}" = 1 ]; then say "smoke: engine-check qwen2-0.5b F16 and Q4_0, 32 steps"
  else say "smoke skipped (SMOKE=0)"; fi
  if [ "${SMOKE:-1}" = 1 ] && ! timeout 120 "$QE" engine-check --synthetic qwen2-0.5b --precision F16,Q4_0 \
      --tokens 32 --timing-runs 1 --json "$R/smoke.json" > "$R/smoke.log" 2>&1; then
    tail -8 "$R/smoke.log"; say "smoke failed: again without the folded KV write"
    export QE_FOLD_KV=0
    timeout 120 "$QE" engine-check --synthetic qwen2-0.5b --precision F16,Q4_0 --tokens 32 --timing-runs 1 \
      --json "$R/smoke0.json" > "$R/smoke0.log" 2>&1 || { tail -8 "$R/smoke0.log"; exit 1; }
  fi
  grep -E "b1:" "$R/smoke.log" "$R/smoke0.log" 2>/dev/null
  prep_and_check qwen2-1.5b
  for t in Q4_K Q4_0; do bench qwen2-1.5b "$t"; done
  graph qwen2-1.5b Q4_K,Q4_0
  say "candle-graph qwen2-7b F16"
  timeout 150 "$QE" measure --synthetic qwen2-7b --precision F16 --engine graph --iterations 10 --tokens 256 \
    --warmup 2 --cooldown-max-s 10 --out "$R/graph" --name qwen2-7b-f16 > "$R/graph-qwen2-7b-f16.log" 2>&1
  echo "rc $?" >> "$R/graph-qwen2-7b-f16.log"; grep -E "tok/s|roofline|rc " "$R/graph-qwen2-7b-f16.log" | tail -4; bundle
  # A/B of settings, one line each (engine-check's graph tok/s, median of 3 timed runs of 256
  # tokens; no metering): AB="SETTING|SETTING…" (default: the norm threads, 512 vs 1024;
  # "QE_Q8=1 QE_FOLD_KV=1|QE_Q8=0 QE_FOLD_KV=1|QE_Q8=1 QE_FOLD_KV=0" weighs the Q8_1 and fold
  # switches).
  # AB="" runs none.
  IFS='|' read -r -a abs <<< "${AB-QE_NORM_THREADS=512|QE_NORM_THREADS=1024}"
  if [ ${#abs[@]} -gt 0 ] && ! late 480; then
    say "A/B ${abs[*]}: tune.sh qwen2-1.5b Q4_0"
    OUT="$R" bash scripts/device/tune.sh qwen2-1.5b Q4_0 "${abs[@]}"; bundle
  fi
  ;;
f16)
  for shape in qwen2-0.5b qwen2-1.5b qwen2-7b; do
    late 430 && break
    say "torch.compile F16 $shape"
    SHAPES=$shape ARMS=torch-f16 OUT="$R/torch-$shape" WORK=/tmp/peers BUDGET_S=560 \
      timeout 170 bash scripts/peers/run_all.sh > "$R/torch-$shape.log" 2>&1
    grep -E "tok/s|mJ" "$R/torch-$shape.log" | tail -3; bundle
    if [ "$shape" = qwen2-0.5b ]; then graph "$shape" Q8_0,Q4_K,Q4_0; else graph "$shape" F16; fi
  done
  ;;
*) sed -n 2,10p "$0" >&2; exit 2 ;;
esac
say "done"
