#!/usr/bin/env bash
# One llama.cpp arm with the peer protocol (see llamacpp_arm.py and README.md):
#   llama_bench.sh GGUF SHAPE PRECISION OUT.json [bench|server]
# bench  (default): llama-bench -m GGUF -p 0 -n $TOKENS -r $((WARMUP+ITERATIONS)) -ngl 999 -fa 1 -o jsonl --progress,
#        NVML window from repetition WARMUP+1 to the end of the last one (model load and warm-ups outside).
# server: llama-server + WARMUP, then ITERATIONS /completion requests (n_predict, ignore_eos, top_k 1) in the window.
# Environment: LLAMA_BIN (dir with the binaries; default: the build dir of build-llama-cpp.sh cuda),
#   PY (python with nvidia-ml-py; default /opt/torch/.venv/bin/python or python3), TOKENS (256), ITERATIONS (10),
#   WARMUP (2), COOLDOWN_MAX_S (10), ARM_TIMEOUT_S (300), LOG (append the engine's output there).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 4 ] || { sed -n 2,10p "$0" >&2; exit 2; }
GGUF=$1 SHAPE=$2 PREC=$3 OUTJ=$4 MODE=${5:-bench}
BIN=${LLAMA_BIN:-$HOME/.cache/quantenergy/llama-build-cuda/bin}
PY=${PY:-/opt/torch/.venv/bin/python}; [ -x "$PY" ] || PY=python3
exec "$PY" "$HERE/llamacpp_arm.py" --mode "$MODE" --bin "$BIN" --gguf "$GGUF" --shape "$SHAPE" --precision "$PREC" \
  --tokens "${TOKENS:-256}" --iterations "${ITERATIONS:-10}" --warmup "${WARMUP:-2}" \
  --cooldown-max-s "${COOLDOWN_MAX_S:-10}" --timeout "${ARM_TIMEOUT_S:-300}" ${LOG:+--log "$LOG"} --out "$OUTJ"
