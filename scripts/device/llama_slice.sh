#!/usr/bin/env bash
# The H200 campaign's llama.cpp half (data/measurements/h200/llama), inside one device call:
# build llama-server (CUDA) from the carried tree, then shape after shape write that shape's GGUFs
# (scripts/peers/make_gguf.py; the disk holds one large shape's four files at a time), run the plan's
# pending jobs of that shape (`quantenergy sweep … --only <shape>_server`, every repeat and
# concurrency) one at a time, delete the files once none is pending (a warm machine keeps them for
# the next call otherwise). No job starts after START_BY seconds; what ran comes back as
# $OUT/llama-<time>.tgz, bundled after every job.
# Usage (on the device, repo root; carry .ship/quantenergy.gz and .ship/llama.cpp.tar.xz):
#   bash scripts/device/llama_slice.sh START_BY [SHAPE...]   (default: the plan's six shapes)
#   START_BY 0 with no SHAPE only builds llama-server. SLICE_TAG names this slice's work dir and
#   bundle, so that two slices can run at once, one per GPU (CUDA_VISIBLE_DEVICES, which the meter
#   and the servers it starts both follow): scripts/device/llama_pair.sh.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
PLAN=data/measurements/h200/llama/plan.toml
start_by=${1:?START_BY}; shift
SHAPES=${*:-qwen2-0.5b tinyllama-1.1b qwen2-1.5b qwen2.5-3b qwen2-7b qwen2.5-14b}
T0=$(date +%s)
say() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
TAG=${SLICE_TAG:-}
W=/tmp/llama-slice${TAG:+-$TAG}; mkdir -p "$W/raw"
cp "$(dirname "$PLAN")"/raw/*.json "$W/raw/" 2>/dev/null   # committed jobs are skipped
touch "$W/.mark"; stamp=$(date +%s)
B=llama${TAG:+-$TAG}-$stamp
bundle() { (cd "$W" && find raw logs -type f -newer .mark 2>/dev/null | tar czf "$OUT/$B.tmp" -T - && mv "$OUT/$B.tmp" "$OUT/$B.tgz"); }
PY=/opt/torch/.venv/bin/python; [ -x "$PY" ] || PY=python3
[ -d .peers/llama.cpp ] || { mkdir -p .peers && tar -xJf .ship/llama.cpp.tar.xz -C .peers; }
export LLAMA_SRC=$PWD/.peers/llama.cpp LLAMA_BUILD=/tmp/llama-build-cuda
# Built on every fresh machine (≈ 4 min on its 16 cores): the build's bin/ is 43 MB even stripped and
# xz'd (the CUDA kernels), which with the meter and the tree is over the 64 MiB a call carries. A warm
# machine keeps it in /tmp between calls.
if [ ! -x "$LLAMA_BUILD/bin/llama-server" ]; then
  say "building llama-server (CUDA)"
  TARGETS=llama-server scripts/peers/build-llama-cpp.sh cuda > "$W/build.log" 2>&1 || { tail -20 "$W/build.log"; exit 1; }
  say "built"
fi
"$LLAMA_BUILD/bin/llama-server" --version 2>&1 | tail -2
[ "$start_by" = 0 ] && [ $# -eq 0 ] && { say "built only"; exit 0; }
export LLAMA_BIN=$LLAMA_BUILD/bin
GGUF=$(dirname "$PLAN")/gguf   # the plan's model_files are relative to it
mkdir -p /tmp/gguf "$W/logs"; ln -sfn /tmp/gguf "$GGUF"
# A call killed at its limit leaves its server running (the meter's child): it would draw power and
# hold memory under the next job. -x: match the process name, not this script's command line. Two
# slices at once (SLICE_TAG) leave this to llama_pair.sh, which does it before starting both.
# Also (one slice only) GGUFs of shapes this call does not run, and half-written ones: kept files
# are ≈ 32 GB at 7 B and 14 B's need ≈ 63 GB of the 64 GB disk.
if [ -z "$TAG" ]; then
  stop_llama_servers && say "stopped a llama-server left by an earlier call"
  prune_ggufs $SHAPES
fi
# "Nothing pending for this shape"; grep reads all of the dry run (with -q it would stop at the first
# match, the meter would die of SIGPIPE, and pipefail would turn that into "pending").
nothing_pending() { "$QE" sweep "$PLAN" --out "$W/raw" --only "$1_server" --dry-run | grep " 0 to run" > /dev/null; }
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit --format=csv,noheader ${CUDA_VISIBLE_DEVICES:+-i "$CUDA_VISIBLE_DEVICES"}
for s in $SHAPES; do
  [ $(( $(date +%s) - T0 )) -ge "$start_by" ] && { say "budget spent: $s not started"; continue; }
  nothing_pending "$s" && { say "$s: nothing pending"; continue; }
  say "GGUFs of $s"
  # A warm machine may still hold them from the last call (kept while jobs were pending); make_gguf
  # renames a finished file into place, so one that exists is whole.
  pids=()
  for t in Q8_0 Q4_K Q4_0; do
    [ -e "/tmp/gguf/$s-$t.gguf" ] && continue
    "$PY" scripts/peers/make_gguf.py --shape "$s" --type "$t" --seed 0 --out "/tmp/gguf/$s-$t.gguf" >> "$W/logs/gguf.log" 2>&1 & pids+=($!)
  done
  [ ${#pids[@]} -gt 0 ] && wait "${pids[@]}"
  # The F16 file is ~1.9x the Q8_0 one: 14B's four files (~63 GB) overfill the 64 GB disk, so F16 goes
  # to /dev/shm when the disk lacks room and shm has it (a link keeps the plan's path).
  f16=/tmp/gguf/$s-F16.gguf
  if [ ! -e "$f16" ]; then
    need=$(( $(stat -c %s "/tmp/gguf/$s-Q8_0.gguf") * 19 / 10 + (2 << 30) ))
    if [ "$(df --output=avail -B1 /tmp | tail -1)" -lt "$need" ] && [ "$(df --output=avail -B1 /dev/shm | tail -1)" -gt "$need" ]; then
      f16=/dev/shm/$s-F16.gguf; ln -sfn "$f16" "/tmp/gguf/$s-F16.gguf"; say "F16 of $s in /dev/shm"
    fi
    "$PY" scripts/peers/make_gguf.py --shape "$s" --type F16 --seed 0 --out "$f16" >> "$W/logs/gguf.log" 2>&1 \
      || { say "F16 GGUF of $s failed"; tail -5 "$W/logs/gguf.log"; rm -f /tmp/gguf/"$s"-*.gguf; continue; }
  fi
  say "sweep $s"
  # One job at a time, bundled after each: a call killed at its limit loses at most the job it was
  # in (the meter writes each report whole or not at all), never the finished ones before it.
  # Jobs run repeat by repeat (every run's r1 before any r2), so the next one may be the longest
  # (7 B at 32 streams ≈ 240 s): START_BY must leave that much of the call.
  while [ $(( $(date +%s) - T0 )) -lt "$start_by" ]; do
    "$QE" sweep "$PLAN" --out "$W/raw" --only "${s}_server" --limit 1 2>&1 \
      | grep -E "wrote .*basis|mJ/token|FAILED|failed|error|panick"
    bundle
    nothing_pending "$s" && break
  done
  # A shape's files stay while it has jobs pending (the budget ran out): the next call on the warm
  # machine resumes without writing them again (≈ 1 min at 7 B, more at 14 B); no later shape starts
  # in this call, and the next call prunes them if it does not run this shape.
  if nothing_pending "$s"; then
    rm -f /tmp/gguf/"$s"-*.gguf /dev/shm/"$s"-F16.gguf
  else
    say "$s: jobs pending, its GGUFs kept for the next call"
  fi
  bundle
done
say "done"; bundle
