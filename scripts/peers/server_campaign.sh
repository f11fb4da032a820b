#!/usr/bin/env bash
# The server path on the GPU machine, in phases that each fit one device call (≤ 10 min):
#   server_campaign.sh prep                      build llama-server + llama-bench (CUDA), write the GGUFs
#   server_campaign.sh server GPU CONC SHAPES…   quantenergy measure --server-cmd llama-server, every format
#   server_campaign.sh bench  GPU SHAPES…        llama-bench, every format (the peer protocol, NVML window)
#   server_campaign.sh engine GPU SHAPES…        our candle-graph engine (the CUDA build), every format
# Environment: QE (the quantenergy binary with NVML; default .ship/quantenergy-nvml), QE_CUDA (the CUDA
#   build; default .ship/quantenergy), OUT (results; default ./server-out), WORK (build + GGUFs, kept while
#   the machine stays warm; default ~/.cache/quantenergy/peers), FORMATS ("F16 Q8_0 Q4_K Q4_0"),
#   BUDGET_S (540: no shape starts later), COOLDOWN_MAX_S (15).
#   LLAMA_TARGETS (prep: the llama.cpp targets to build; default "llama-server llama-bench").
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
T0=$(date +%s)
OUT=${OUT:-$PWD/server-out}
WORK=${WORK:-$HOME/.cache/quantenergy/peers}
FORMATS=${FORMATS:-F16 Q8_0 Q4_K Q4_0}
BUDGET_S=${BUDGET_S:-540}
COOLDOWN_MAX_S=${COOLDOWN_MAX_S:-15}
QE=${QE:-$ROOT/.ship/quantenergy-nvml}
QE_CUDA=${QE_CUDA:-$ROOT/.ship/quantenergy}
PY=${PY:-/opt/torch/.venv/bin/python}; [ -x "$PY" ] || PY=python3
export LLAMA_SRC=${LLAMA_SRC:-$ROOT/.peers/llama.cpp} LLAMA_BUILD=${LLAMA_BUILD:-$WORK/llama-build-cuda}
export CUDA_DEVICE_ORDER=PCI_BUS_ID   # CUDA indices = NVML indices
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
BIN=$LLAMA_BUILD/bin
GGUF=$WORK/gguf
mkdir -p "$OUT" "$WORK" "$GGUF"
say() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
late() { [ $(( $(date +%s) - T0 )) -gt "$BUDGET_S" ]; }
# Unpack a carried binary (run `server_campaign.sh unpack` once before phases run in parallel).
unpack() { for f in "$@"; do [ -x "${f}" ] || { [ -f "$f.gz" ] && gunzip -c "$f.gz" > "$f.tmp" && chmod +x "$f.tmp" && mv "$f.tmp" "$f"; }; done; }

phase=${1:?phase}; shift
case "$phase" in
  unpack) unpack "$QE" "$QE_CUDA" ;;
  prep)
    [ -d "$LLAMA_SRC" ] || { mkdir -p "$ROOT/.peers" && tar -xJf "$ROOT/.ship/llama.cpp.tar.xz" -C "$ROOT/.peers"; }
    say "building ${LLAMA_TARGETS:-llama-server llama-bench} (CUDA) while the GGUFs are written"
    (TARGETS="${LLAMA_TARGETS:-llama-server llama-bench}" "$HERE/build-llama-cpp.sh" cuda > "$OUT/build.log" 2>&1; echo "build rc $?" >> "$OUT/build.log") &
    build=$!
    for s in ${SHAPES:-qwen2-0.5b qwen2-1.5b qwen2-7b}; do
      pids=()
      for t in $FORMATS; do
        f=$GGUF/$s-$t.gguf
        [ -f "$f" ] || { "$PY" "$HERE/make_gguf.py" --shape "$s" --type "$t" --seed 0 --out "$f" >> "$OUT/gguf.log" 2>&1 & pids+=($!); }
      done
      [ ${#pids[@]} -gt 0 ] && wait "${pids[@]}"
      say "GGUFs of $s written"
    done
    wait "$build"
    tail -3 "$OUT/build.log"; ls -la "$GGUF" "$BIN" 2>&1 | head -30
    ;;
  server)
    gpu=$1 conc=$2; shift 2
    unpack "$QE"
    for s in "$@"; do
      late && { say "budget spent: $s not started"; continue; }
      # Named explicitly: a Q4_K file of 0.5 B holds more Q5_0 than Q4_K (llama-quantize's fallback
      # for 896-wide rows), so the file alone cannot say which arm it is.
      args=(); for t in $FORMATS; do args+=(--model-file "$t=$GGUF/$s-$t.gguf"); done
      say "server $s concurrency $conc on GPU $gpu"
      "$QE" measure --server-cmd "CUDA_VISIBLE_DEVICES=$gpu $BIN/llama-server -m {model} --port {port} -ngl 999 -c $((conc * 512)) -np $conc" \
        "${args[@]}" --concurrency "$conc" --gpu "$gpu" --cooldown-max-s "$COOLDOWN_MAX_S" \
        --out "$OUT/server/$s-c$conc" --name "$s-llama-server-c$conc" > "$OUT/server-$s-c$conc.log" 2>&1
      echo "rc $?" >> "$OUT/server-$s-c$conc.log"; grep -E "wrote|mJ/token|rc " "$OUT/server-$s-c$conc.log"
    done
    ;;
  bench)
    gpu=$1; shift
    mkdir -p "$OUT/bench"
    for s in "$@"; do
      for t in $FORMATS; do
        late && break
        say "llama-bench $s $t on GPU $gpu"
        CUDA_VISIBLE_DEVICES=$gpu LLAMA_BIN=$BIN NVML_INDEX=$gpu COOLDOWN_MAX_S=$COOLDOWN_MAX_S \
          "$HERE/llama_bench.sh" "$GGUF/$s-$t.gguf" "$s" "$t" "$OUT/bench/$s-$t.json" bench > "$OUT/bench-$s-$t.log" 2>&1
        echo "rc $?" >> "$OUT/bench-$s-$t.log"; tail -1 "$OUT/bench-$s-$t.log"
      done
    done
    ;;
  engine)
    gpu=$1; shift
    unpack "$QE_CUDA"
    for s in "$@"; do
      late && continue
      say "candle-graph $s on GPU $gpu"
      precs=$(echo $FORMATS | tr ' ' ',')
      "$QE_CUDA" measure --synthetic "$s" --precision "$precs" --baseline F16 --device "$gpu" --engine graph \
        --cooldown-max-s "$COOLDOWN_MAX_S" --out "$OUT/engine/$s" > "$OUT/engine-$s.log" 2>&1
      echo "rc $?" >> "$OUT/engine-$s.log"; grep -E "mJ/token|rc " "$OUT/engine-$s.log"
    done
    ;;
  *) sed -n 2,10p "$0" >&2; exit 2 ;;
esac
