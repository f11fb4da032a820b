#!/usr/bin/env bash
# The split decode attention's two sizes (QE_ATTN_MIN_POSITIONS, QE_ATTN_TARGET_BLOCKS) on one H200,
# in one call: the graph engine's decode tok/s at each setting and depth, alternating settings within
# a depth, then llama-bench at the same depths and its prefill rate at the longest.
#   bash scripts/device/attn_tune.sh SHAPE FORMATS DEPTHS SETTING...
#     e.g. attn_tune.sh qwen2-1.5b Q4_0,Q4_K 1024,4096,16384 default QE_ATTN_MIN_POSITIONS=128
# A setting is `default` (the carried meter), VAR=VALUE for it, or NAME, another build of the meter
# carried as .ship/quantenergy-NAME.xz (`base`: the commit before a kernel change, in one sitting),
# each optionally with variables joined by `+` (`default+QE_ATTN_U=4+QE_ATTN_BLOCKS_PER_SM=2`). LLAMA_TARGETS (llama-bench) picks what llama.cpp
# builds (add llama-server for a campaign in the same call). OPS=1 first checks every op against its
# CPU reference (engine-check --ops) while llama.cpp builds, under OPS_ENV's variables if given
# (`OPS_ENV="QE_ATTN_PREFETCH=1"`: a kernel knob's variant). Carry .ship/quantenergy.gz and
# .ship/llama.cpp.tar.xz. Everything comes back as $OUT/tune.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
SHAPE=${1:?shape} FORMATS=${2:?formats} DEPTHS=${3:?depths}
shift 3
# An engine-check's time: 7 B at 16 k took about 40 s a format (session 26); 120 s in all cut off two.
nformats=$(tr ',' '\n' <<< "$FORMATS" | wc -l)
T0=$(date +%s)
R=/tmp/tune; rm -rf "$R"; mkdir -p "$R"
exec > >(tee -a "$OUT/tune.log") 2>&1
say() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
bundle() { (cd /tmp && tar czf "$OUT/tune.tgz" tune); }
trap bundle EXIT
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit,clocks.max.sm --format=csv,noheader | tee "$R/gpu.txt"
unpack_builds
(SHAPES="$SHAPE" FORMATS="${FORMATS//,/ }" OUT="$R/prep" WORK=/tmp/peers LLAMA_TARGETS=${LLAMA_TARGETS:-llama-bench} \
  bash scripts/peers/server_campaign.sh prep > "$R/prep.log" 2>&1; echo "prep rc $?" >> "$R/prep.log") &
prep=$!
if [ "${OPS:-0}" = 1 ]; then
  say "engine-check --ops"
  timeout 200 env ${OPS_ENV:-} "$QE" engine-check --ops > "$R/ops.log" 2>&1; echo "rc $?" >> "$R/ops.log"
  grep -ciE "outside|differ" "$R/ops.log"; tail -2 "$R/ops.log"
fi
for d in ${DEPTHS//,/ }; do
  for s in "$@"; do
    [ $(( $(date +%s) - T0 )) -gt "${BUDGET_S:-420}" ] && { say "budget spent: $s at $d not run"; continue; }
    setting "$s"
    say "$SHAPE $FORMATS depth $d: $s"
    timeout $(( 60 + 50 * nformats )) env $env "$bin" engine-check --synthetic "$SHAPE" --precision "$FORMATS" --prompt-len "$d" \
      --tokens 256 --timing-runs 3 --graph-only --json "$R/ours-$s-$d.json" > "$R/ours-$s-$d.log" 2>&1
    echo "rc $?" >> "$R/ours-$s-$d.log"; grep -E "depth|^rc" "$R/ours-$s-$d.log"
  done
  bundle
done
wait "$prep"; tail -1 "$R/prep.log"
BIN=/tmp/peers/llama-build-cuda/bin
last=${DEPTHS##*,}
for t in ${FORMATS//,/ }; do
  f=/tmp/peers/gguf/$SHAPE-$t.gguf
  [ -f "$f" ] || { say "no $f"; continue; }
  say "llama-bench $t: decode at $DEPTHS, prefill of $last"
  timeout 120 "$BIN/llama-bench" -m "$f" -ngl 999 -fa 1 -r 3 -o json -p 0 -n 256 -d "$DEPTHS" \
    > "$R/bench-$t.json" 2> "$R/bench-$t.log"
  timeout 90 "$BIN/llama-bench" -m "$f" -ngl 999 -fa 1 -r 3 -o json -p "$last" -n 0 \
    > "$R/bench-prefill-$t.json" 2>> "$R/bench-$t.log"
  echo "rc $?" >> "$R/bench-$t.log"; bundle
done
python3 - "$R" <<'PY' | tee "$R/table.md"
import glob, json, os, sys
r = sys.argv[1]
rows = {}
for p in sorted(glob.glob(os.path.join(r, "ours-*.json"))):
    s, d = os.path.basename(p)[5:-5].rsplit("-", 1)
    for x in json.load(open(p)):
        rows.setdefault((x["precision"], int(d)), {})[s] = (x["graph_decode_tok_s"], x["graph_prefill_tok_s"])
bench = {}
for p in glob.glob(os.path.join(r, "bench-*.json")):
    prefill = "prefill" in p
    try:
        for x in json.load(open(p)):
            bench[(os.path.basename(p).split("-")[-1][:-5], x["n_depth"], prefill)] = x["avg_ts"]
    except ValueError:
        pass
print("| format | depth | setting | decode tok/s | / llama-bench | prefill tok/s |")
print("|---|---:|---|---:|---:|---:|")
for (prec, d), ss in sorted(rows.items()):
    b = bench.get((prec.replace("FP16", "F16"), d, False))
    for s, (dec, pre) in ss.items():
        ratio = f"{dec / b:.2f}×" if b else "–"
        print(f"| {prec} | {d} | {s} | {dec:.1f} | {ratio} | {pre:.0f} |")
for (t, d, prefill), v in sorted(bench.items()):
    print(f"llama-bench {t} depth {d} {'prefill' if prefill else 'decode'}: {v:.1f}")
PY
say "done"
