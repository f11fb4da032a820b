#!/usr/bin/env bash
# Where a graph decode step's time goes: Nsight Compute's duration of every kernel the step
# runs, each in isolation (--cache-control none, clocks untouched), for one shape and format. The fused
# kernels occur only in the static engine; the quantized matmul kernels (activation → Q8_1, then MMVQ)
# are candle's, the same launches on the same shapes in both engines, so the eager engine's decode
# steps stand for them. Usage on the GPU machine: bash scripts/device/ncu_step.sh [SHAPE] [FORMAT]
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
shape=${1:-qwen2-1.5b} fmt=${2:-Q4_0}
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
"$NCU" --version | tail -1
run() {  # $1 = label, $2 = kernel-name regex, $3 = how many launches
  timeout 240 "$NCU" --clock-control none --cache-control none --metrics gpu__time_duration.sum \
    --csv --page raw --kernel-name "regex:$2" --launch-count "$3" \
    "$QE" engine-check --synthetic "$shape" --precision "$fmt" --tokens 4 --timing-runs 1 \
    > "$OUT/ncu-$1.csv" 2> "$OUT/ncu-$1.err"
  echo "$1: rc $? $(grep -c '^"' "$OUT/ncu-$1.csv") rows"; tail -3 "$OUT/ncu-$1.err"
}
run fused 'rope_step|rope_kv|decode_attn|swiglu|add_rms_norm' 400
case "$fmt" in
  # Float formats: the matmuls are cuBLAS's (gemv/gemm kernels, names vary by size and version).
  F16|BF16|FP16) run matmul 'gemv|gemm|xmma|cutlass|splitK' 400 ;;
  # GGUF formats: candle's activation → Q8_1 kernel and its MMVQ kernels (`mmvq_gguf_*`, which
  # 'mul_mat_vec' alone misses).
  *) run quant 'quantize_q8_1|mmvq|mul_mat_vec' 500 ;;
esac
