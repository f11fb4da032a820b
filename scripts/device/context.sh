#!/usr/bin/env bash
# Decode along the context on one H200, in one device call (one card, one sitting): the graph
# engine's prefill and decode timed apart at cache depths 16 … 16 384, beside llama.cpp's
# llama-bench at the same depths (`-p 0 -n 256 -d D -fa 1`, and `-p D -n 0` for its prefill rate).
#   bash scripts/device/context.sh SHAPES FORMATS [DEPTHS]
#     e.g. context.sh qwen2-1.5b F16,Q8_0,Q4_K,Q4_0 16,1024,4096,16384
# First, while llama.cpp builds on the CPU and the GGUFs are written: every op against its CPU
# reference (engine-check --ops), then the graph vs the eager engine at depth 16 and 4 000 (tokens
# compared). Then, shape by shape: ours at every depth (graph-only; and the one-block attention,
# QE_ATTN_ONE_BLOCK=1, at the first and third depth), then llama-bench, nothing else on the GPU.
# Environment: OPS=0 skips the op check; EAGER_DEPTHS (default "16 4000") the depths of the
# graph-vs-eager check; ONE_BLOCK=0 skips the one-block runs; THRESHOLD="SHAPE FORMATS DEPTHS" first
# times that shape at those depths with the split kernel forced (QE_ATTN_SPLIT_FROM=0) and the
# one-block kernel forced (QE_ATTN_ONE_BLOCK=1), alternating; EXTRA="SHAPE DEPTH" one more split run
# (its llama-bench at DEPTH too); AB="VAR=VALUE SHAPE FORMATS DEPTH" one run of ours with that
# setting (tag "ab"), before the default runs; BUDGET_S (480: nothing of ours starts after it).
# Carry .ship/quantenergy.gz (scripts/build-cuda.sh) and .ship/llama.cpp.tar.xz
# (scripts/peers/fetch-llama-cpp.sh, then tar -cJf .ship/llama.cpp.tar.xz -C .peers llama.cpp).
# Everything comes back as $OUT/context.tgz plus the log; a call stopped at its limit keeps what ran.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
SHAPES=${1:?shapes, space- or comma-separated}
FORMATS=${2:?formats, comma-separated}
DEPTHS=${3:-16,1024,4096,16384}
SHAPES=${SHAPES//,/ }
T0=$(date +%s)
R=/tmp/context; rm -rf "$R"; mkdir -p "$R"
exec > >(tee -a "$OUT/context.log") 2>&1
say() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
late() { [ $(( $(date +%s) - T0 )) -gt "${1:-540}" ]; }
bundle() { (cd /tmp && tar czf "$OUT/context.tgz" context); }
trap bundle EXIT
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit,clocks.max.sm --format=csv,noheader | tee "$R/gpu.txt"
git log -1 --format='%H %s' > "$R/commit.txt" 2>/dev/null || true

PREP_SHAPES="$SHAPES${EXTRA:+ ${EXTRA%% *}}"
(SHAPES="$PREP_SHAPES" FORMATS="${FORMATS//,/ }" OUT="$R/prep" WORK=/tmp/peers LLAMA_TARGETS=llama-bench \
  bash scripts/peers/server_campaign.sh prep > "$R/prep.log" 2>&1; echo "prep rc $?" >> "$R/prep.log") &
prep=$!

if [ "${OPS:-1}" = 1 ]; then
  say "engine-check --ops"
  timeout 150 "$QE" engine-check --ops --json "$R/ops.json" > "$R/ops.txt" 2>&1
  echo "rc $?" >> "$R/ops.txt"; tail -3 "$R/ops.txt"; bundle
fi
first=${SHAPES%% *}
for depth in ${EAGER_DEPTHS:-16 4000}; do
  late 300 && break
  say "graph vs eager, $first, depth $depth"
  timeout 150 "$QE" engine-check --synthetic "$first" --precision F16,Q4_0 --prompt-len "$depth" --tokens 128 \
    --timing-runs 1 --json "$R/eager-$first-$depth.json" > "$R/eager-$first-$depth.log" 2>&1
  echo "rc $?" >> "$R/eager-$first-$depth.log"; grep -E "depth|^rc" "$R/eager-$first-$depth.log"; bundle
done

ours() {
  local shape=$1 depth=$2 tag=$3
  late "${BUDGET_S:-480}" && { say "budget spent: ours $shape $depth $tag not run"; return; }
  timeout 150 env ${4:-} "$QE" engine-check --synthetic "$shape" --precision "${5:-$FORMATS}" --prompt-len "$depth" \
    --tokens 256 --timing-runs 3 --graph-only --json "$R/ours-$tag-$shape-$depth.json" \
    > "$R/ours-$tag-$shape-$depth.log" 2>&1
  echo "rc $?" >> "$R/ours-$tag-$shape-$depth.log"; grep -E "depth|^rc" "$R/ours-$tag-$shape-$depth.log"; bundle
}
IFS=, read -ra DS <<< "$DEPTHS"
if [ -n "${THRESHOLD:-}" ]; then
  read -r tshape tformats tdepths <<< "$THRESHOLD"
  say "threshold: $tshape $tformats at $tdepths, split forced vs one-block forced"
  for d in ${tdepths//,/ }; do
    ours "$tshape" "$d" forcedsplit QE_ATTN_SPLIT_FROM=0 "$tformats"
    ours "$tshape" "$d" oneblock QE_ATTN_ONE_BLOCK=1 "$tformats"
  done
fi
if [ -n "${AB:-}" ]; then
  read -r abenv abshape abformats abdepth <<< "$AB"
  say "A/B: $abenv, $abshape $abformats at depth $abdepth"
  ours "$abshape" "$abdepth" ab "$abenv" "$abformats"
fi
if [ -n "${EXTRA:-}" ]; then
  read -r eshape edepth <<< "$EXTRA"
  say "ours: $eshape at depth $edepth"
  ours "$eshape" "$edepth" split
fi
for shape in $SHAPES; do
  say "ours: $shape at depths $DEPTHS"
  for d in "${DS[@]}"; do ours "$shape" "$d" split; done
  [ "${ONE_BLOCK:-1}" = 1 ] || continue
  for d in "${DS[0]}" "${DS[2]:-${DS[0]}}"; do ours "$shape" "$d" oneblock QE_ATTN_ONE_BLOCK=1; done
done

wait "$prep"; tail -3 "$R/prep.log"
BIN=/tmp/peers/llama-build-cuda/bin
bench_one() {
  local shape=$1 t=$2 depths=$3 tag=${4:-}
  late 560 && { say "budget spent: llama-bench $shape $t not run"; return; }
  local f=/tmp/peers/gguf/$shape-$t.gguf
  [ -f "$f" ] || { say "no $f"; return; }
  say "llama-bench $shape $t: decode at $depths"
  timeout 150 "$BIN/llama-bench" -m "$f" -ngl 999 -fa 1 -r 3 -o json -p 0 -n 256 -d "$depths" \
    > "$R/bench$tag-$shape-$t.json" 2> "$R/bench$tag-$shape-$t.log"
  echo "rc $?" >> "$R/bench$tag-$shape-$t.log"; bundle
}
if [ -n "${EXTRA:-}" ]; then
  for t in ${FORMATS//,/ }; do bench_one "$eshape" "$t" "$edepth" -extra; done
fi
for shape in $SHAPES; do
  for t in ${FORMATS//,/ }; do
    late 560 && { say "budget spent: llama-bench $shape $t not run"; continue; }
    f=/tmp/peers/gguf/$shape-$t.gguf
    [ -f "$f" ] || { say "no $f"; continue; }
    say "llama-bench $shape $t: decode at $DEPTHS, prefill of ${DS[2]:-4096}"
    timeout 150 "$BIN/llama-bench" -m "$f" -ngl 999 -fa 1 -r 3 -o json -p 0 -n 256 -d "$DEPTHS" \
      > "$R/bench-$shape-$t.json" 2> "$R/bench-$shape-$t.log"
    echo "rc $?" >> "$R/bench-$shape-$t.log"
    timeout 60 "$BIN/llama-bench" -m "$f" -ngl 999 -fa 1 -r 3 -o json -p "${DS[2]:-4096}" -n 0 \
      > "$R/bench-prefill-$shape-$t.json" 2>> "$R/bench-$shape-$t.log"
    echo "rc $?" >> "$R/bench-$shape-$t.log"; tail -1 "$R/bench-$shape-$t.log"; bundle
  done
done
python3 scripts/device/context_table.py "$R" | tee "$R/table.md"
say "done"
