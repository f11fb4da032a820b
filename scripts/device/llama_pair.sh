#!/usr/bin/env bash
# The llama.cpp slice on a two-GPU machine (nvidia-h200-x2), inside one device call: build
# llama-server once, then two slices at once, one per card, each with its own shapes, work dir and
# bundle ($OUT/llama-g0-*.tgz, $OUT/llama-g1-*.tgz) and log ($OUT/g0.log, $OUT/g1.log). Same
# protocol per job as one slice; twice the jobs per device-minute, and a second card in the rows.
# Usage (repo root; carry .ship/quantenergy.gz and .ship/llama.cpp.tar.xz):
#   bash scripts/device/llama_pair.sh START_BY "SHAPES ON GPU 0" "SHAPES ON GPU 1"
#   e.g. bash scripts/device/llama_pair.sh 380 "qwen2.5-3b qwen2.5-14b" "qwen2-7b"  (a call is ≤ 600 s:
#   repeat on the warm machine until `sweep --dry-run` shows nothing pending)
set -uo pipefail
cd "$(dirname "$0")/../.."
start_by=${1:?START_BY}; g0=${2:?shapes for GPU 0}; g1=${3:?shapes for GPU 1}
# The slices share /tmp/gguf, where each writes and deletes its own shapes' files: a shape in both
# lists would be written and deleted under the other slice.
for s in $g0; do
  case " $g1 " in *" $s "*) echo "shape $s is in both lists" >&2; exit 2 ;; esac
done
T0=$(date +%s)
bash scripts/device/llama_slice.sh 0 || exit 1
# What is left of START_BY after the build is each slice's own; none left, nothing starts (a job
# started anyway could run past the call's limit and lose its shape's reports).
left_now() { echo $(( start_by - ($(date +%s) - T0) )); }
[ "$(left_now)" -lt 1 ] && { echo "the build used all of START_BY: run again on the warm machine"; exit 0; }
# Servers left running by an earlier call killed at its limit, and GGUFs of shapes neither slice
# runs (each slice leaves both to us: it would kill the other's server and delete its files).
. scripts/device/env.sh
stop_llama_servers && echo "stopped a llama-server left by an earlier call"
# shellcheck disable=SC2086
prune_ggufs $g0 $g1
# shellcheck disable=SC2086  # the shape lists are word lists
CUDA_VISIBLE_DEVICES=0 SLICE_TAG=g0 bash scripts/device/llama_slice.sh "$(left_now)" $g0 > "$OUT/g0.log" 2>&1 & p0=$!
sleep 5   # the two first GGUF writes and server starts do not race for the same second
# shellcheck disable=SC2086
CUDA_VISIBLE_DEVICES=1 SLICE_TAG=g1 bash scripts/device/llama_slice.sh "$(left_now)" $g1 > "$OUT/g1.log" 2>&1 & p1=$!
wait $p0; r0=$?; wait $p1; r1=$?
echo "=== GPU 0 (exit $r0)"; tail -25 "$OUT/g0.log"
echo "=== GPU 1 (exit $r1)"; tail -25 "$OUT/g1.log"
echo "=== pair done after $(( $(date +%s) - T0 )) s"
