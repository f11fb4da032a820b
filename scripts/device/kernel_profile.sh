#!/usr/bin/env bash
# Per-kernel times of one decode step on one H200, ours beside llama.cpp's, under Nsight Compute
# (`ncu --clock-control none`: the clocks stay as they are; `--cache-control none`: caches are
# not flushed between kernels, as in a real step). Where the graph engine's step loses time to
# llama-bench's at a depth, this says which kernels: the whole-step A/B cannot.
#   bash scripts/device/kernel_profile.sh SHAPE FORMAT DEPTH [SETTING...]
#     e.g. kernel_profile.sh qwen2-1.5b Q4_0 1024 default base QE_ATTN_MIN_POSITIONS=64
# SETTING: as attn_tune.sh's (scripts/device/env.sh `setting`): `default` (the carried meter), `base`
# (.ship/quantenergy-base.xz, another build) or VAR=VALUE, joined by `+`. Needs llama.cpp's tree (.ship/llama.cpp.tar.xz) for llama-bench;
# LLAMA=0 skips it, OURS=0 profiles llama-bench alone (the folder keeps earlier runs). KFILTER (a
# regex) profiles only the kernels it names: at long depths the prefill's launches are too many to
# skip by count (llama.cpp decodes a 16 k GQA cache with its tensor-core kernel, not
# `flash_attn_ext_vec`: filter on `flash_attn` and skip past the prefill's launches). DETAIL=1 adds one attention launch of each side under `--set full` (memory
# throughput, occupancy, stall reasons). Everything comes back as $OUT/profile.tgz, a folder per
# shape, format and depth (several calls in one sitting add up), with a summary table per run.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
SHAPE=${1:?shape} FORMAT=${2:?format} DEPTH=${3:?depth}
shift 3
[ $# -gt 0 ] || set -- default
T0=$(date +%s)
R=/tmp/profile/$SHAPE-$FORMAT-$DEPTH; mkdir -p "$R"
exec > >(tee -a "$OUT/profile.log") 2>&1
say() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
bundle() { (cd /tmp && tar czf "$OUT/profile.tgz" profile); }
trap bundle EXIT
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "no ncu on this machine" >&2; exit 1; }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee "$R/gpu.txt"
unpack_builds
if [ "${LLAMA:-1}" = 1 ]; then
  (SHAPES="$SHAPE" FORMATS="$FORMAT" OUT="$R/prep" WORK=/tmp/peers LLAMA_TARGETS=llama-bench \
    bash scripts/peers/server_campaign.sh prep > "$R/prep.log" 2>&1; echo "prep rc $?" >> "$R/prep.log") &
  prep=$!
fi
# One CSV of (kernel, duration) per run; the first 40 decode steps are skipped by the launch count
# of the warm-up (the engine's prefill and its untimed generations launch far more kernels).
profile() {
  local tag=$1; shift
  say "ncu: $tag"
  local filter=(); [ -n "${KFILTER:-}" ] && filter=(-k "regex:$KFILTER")
  timeout 300 "$NCU" --clock-control none --cache-control none --metrics gpu__time_duration.sum \
    "${filter[@]}" --launch-skip "${SKIP:-4000}" --launch-count "${COUNT:-600}" --csv --log-file "$R/ncu-$tag.csv" \
    "$@" > "$R/ncu-$tag.out" 2> "$R/ncu-$tag.err"
  echo "rc $?" >> "$R/ncu-$tag.err"
  [ "${DETAIL:-0}" = 1 ] || return 0
  # The full sections of one attention launch well inside the decode (either side's kernel name).
  timeout 200 "$NCU" --clock-control none --cache-control none --set full \
    -k "regex:decode_attn|flash_attn_ext_vec" --launch-skip "${DETAIL_SKIP:-60}" --launch-count 1 \
    "$@" > "$R/detail-$tag.txt" 2>&1
  echo "rc $?" >> "$R/detail-$tag.txt"
}
[ "${OURS:-1}" = 1 ] || set --
for s in "$@"; do
  setting "$s"
  profile "ours-$s" env $env "$bin" engine-check --synthetic "$SHAPE" --precision "$FORMAT" \
    --prompt-len "$DEPTH" --tokens 64 --timing-runs 1 --graph-only
  bundle
done
if [ "${LLAMA:-1}" = 1 ]; then
  wait "$prep"; tail -1 "$R/prep.log"
  f=/tmp/peers/gguf/$SHAPE-$FORMAT.gguf
  profile llama-bench /tmp/peers/llama-build-cuda/bin/llama-bench -m "$f" -ngl 999 -fa 1 -r 1 \
    -p 0 -n 64 -d "$DEPTH"
fi
# Per run: each kernel's total and mean time over the profiled launches, the largest first.
python3 - "$R" <<'PY' | tee "$R/summary.md"
import csv, glob, os, sys
for path in sorted(glob.glob(os.path.join(sys.argv[1], "ncu-*.csv"))):
    rows = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(line for line in f if line.startswith('"')):
            if r.get("Metric Name") != "gpu__time_duration.sum":
                continue
            v = float(r["Metric Value"].replace(",", ""))
            scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3}.get(r.get("Metric Unit"), 1.0)
            k = r["Kernel Name"].split("(")[0][:60]
            n, t = rows.get(k, (0, 0.0))
            rows[k] = (n + 1, t + v * scale)
    total = sum(t for _, t in rows.values())
    print(f"\n### {os.path.basename(path)[4:-4]}: {sum(n for n, _ in rows.values())} launches, {total:.0f} µs")
    print("| kernel | launches | total µs | mean µs | share |\n|---|---:|---:|---:|---:|")
    for k, (n, t) in sorted(rows.items(), key=lambda x: -x[1][1])[:15]:
        print(f"| {k} | {n} | {t:.0f} | {t / n:.2f} | {t / total * 100:.1f} % |")
PY
say "done"
