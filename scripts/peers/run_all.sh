#!/usr/bin/env bash
# The peer engines on one GPU, in one sitting: build llama.cpp (CUDA), make the synthetic GGUFs, run the
# llama.cpp and torch.compile arms shape by shape, bundle every JSON into $OUT, print a summary table.
#
#   scripts/peers/run_all.sh                    everything (see README.md for how long each part takes)
#   SHAPES=qwen2-0.5b ARMS="llama-f16 torch-f16" scripts/peers/run_all.sh
#
# Environment (all optional):
#   SHAPES       "qwen2-0.5b qwen2-1.5b qwen2-7b"
#   ARMS         "llama-f16 llama-q8_0 llama-q4_k llama-q4_0 torch-f16 torch-int4"
#   LLAMA_MODES  "bench"  (llama-bench; add "server" for llama-server + /completion arms)
#   ORDER        "llama torch": which engine's arms run first within a shape
#   GGUF_FROM    direct (make_gguf.py writes random valid blocks of each type) | quantize (F16, then
#                llama-quantize --pure)
#   TOKENS ITERATIONS WARMUP   256 10 2;   COOLDOWN_MAX_S 10;   PROMPT_LEN 16
#   BUDGET_S     570: no arm starts after this many seconds from the start, and each arm is killed by then,
#                so the bundle is written inside a 600 s device call
#   OUT          where the bundle goes (default ./peers-out); WORK (default ~/.cache/quantenergy/peers):
#                build, GGUFs, compile cache (reused while the machine stays warm)
#   LLAMA_KIND   cuda | cpu (a CPU build, for plumbing tests on a machine without a GPU, with QE_FAKE_NVML=1)
#   LLAMA_SRC    llama.cpp tree (default <repo>/.peers/llama.cpp next to these scripts); JOBS (nproc)
#   PY           python with torch + nvidia-ml-py (default /opt/torch/.venv/bin/python)
# Output in $OUT (≤ 8 files): peers.json (all arm records), peers.tar.gz (per-arm JSON + logs),
# summary.txt, run_all.log.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
T0=$(date +%s)
OUT=${OUT:-$PWD/peers-out}
WORK=${WORK:-$HOME/.cache/quantenergy/peers}
mkdir -p "$OUT" "$WORK"
exec > >(tee -a "$OUT/run_all.log") 2>&1

SHAPES=${SHAPES:-qwen2-0.5b qwen2-1.5b qwen2-7b}
ARMS=${ARMS:-llama-f16 llama-q8_0 llama-q4_k llama-q4_0 torch-f16 torch-int4}
LLAMA_MODES=${LLAMA_MODES:-bench}
GGUF_FROM=${GGUF_FROM:-direct}
BUDGET_S=${BUDGET_S:-570}
export TOKENS=${TOKENS:-256} ITERATIONS=${ITERATIONS:-10} WARMUP=${WARMUP:-2} COOLDOWN_MAX_S=${COOLDOWN_MAX_S:-10}
PROMPT_LEN=${PROMPT_LEN:-16}
PY=${PY:-/opt/torch/.venv/bin/python}; [ -x "$PY" ] || PY=python3
export PY PYTHONUNBUFFERED=1
export LLAMA_SRC=${LLAMA_SRC:-$HERE/../../.peers/llama.cpp}
LLAMA_KIND=${LLAMA_KIND:-cuda}
export LLAMA_BUILD=${LLAMA_BUILD:-$WORK/llama-build-$LLAMA_KIND}
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$WORK/inductor-cache}
GGUF_DIR=$WORK/gguf
RUN=$WORK/run-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$GGUF_DIR" "$RUN"

el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[+$(el)s] $*"; }
left() { echo $(( BUDGET_S - $(el) )); }
has_arm() { case " $ARMS " in *" $1 "*) return 0 ;; esac; return 1; }

bundle() {
  "$PY" - "$RUN" "$OUT" <<'PYEOF'
import glob, json, os, sys
run, out = sys.argv[1:3]
recs = []
for p in sorted(glob.glob(os.path.join(run, "*.json"))):
    try:
        recs.append(json.load(open(p)))
    except Exception as e:
        recs.append({"ok": False, "file": os.path.basename(p), "error": f"unreadable: {e}"})
json.dump(recs, open(os.path.join(out, "peers.json.tmp"), "w"), indent=1)
os.replace(os.path.join(out, "peers.json.tmp"), os.path.join(out, "peers.json"))
cols = ["shape", "arm", "tok_s", "mj_per_token", "avg_power_w", "iter_cv_pct", "hbm_fraction", "counter_over_trace"]
lines = ["%-11s %-26s %9s %9s %7s %7s %7s %7s" % ("shape", "arm", "tok/s", "mJ/tok", "avg W", "CV %", "HBM fr", "c/trace")]
for r in recs:
    if r.get("ok"):
        v = [r.get(c) for c in cols]
        lines.append("%-11s %-26s %9s %9s %7s %7s %7s %7s" % tuple("-" if x is None else x for x in v))
    else:
        lines.append("%-11s %-26s FAILED: %s" % (r.get("shape"), r.get("arm"), str(r.get("error"))[:150]))
open(os.path.join(out, "summary.txt"), "w").write("\n".join(lines) + "\n")
PYEOF
  tar -czf "$OUT/peers.tar.gz.tmp" -C "$(dirname "$RUN")" "$(basename "$RUN")" 2>/dev/null \
    && mv "$OUT/peers.tar.gz.tmp" "$OUT/peers.tar.gz"
}

fail_json() {  # arm shape precision error
  "$PY" -c 'import json,sys; a,s,p,e=sys.argv[1:5]; json.dump({"schema":"quantenergy-peer/1","ok":False,"arm":a,"shape":s,"precision":p,"error":e}, open(sys.argv[5],"w"))' \
    "$1" "$2" "$3" "$4" "$RUN/$2--$1.json"
}

say "run_all: SHAPES='$SHAPES' ARMS='$ARMS' LLAMA_MODES='$LLAMA_MODES' GGUF_FROM=$GGUF_FROM BUDGET_S=$BUDGET_S"
say "host: $(nproc) cores; $(nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader 2>/dev/null)"
say "disk: $(df -h "$WORK" | tail -1)"
"$PY" -c 'import torch, pynvml; print("python", __import__("sys").version.split()[0], "torch", torch.__version__)' 2>&1 | sed "s/^/[+$(el)s] /"

# ---- 1. llama.cpp build (background) while the GGUFs are written
LLAMA_PRECS=""
for a in $ARMS; do case $a in llama-*) LLAMA_PRECS="$LLAMA_PRECS ${a#llama-}" ;; esac; done
BUILD_OK=0
if [ -n "$LLAMA_PRECS" ]; then
  say "llama.cpp: building ($LLAMA_KIND) in $LLAMA_BUILD"
  setsid bash "$HERE/build-llama-cpp.sh" "$LLAMA_KIND" >"$RUN/build.out" 2>"$RUN/build.err" &
  BUILD_PID=$!
  for shape in $SHAPES; do
    if [ "$GGUF_FROM" = quantize ]; then types="F16"; else types=$(echo $LLAMA_PRECS | tr a-z A-Z); fi
    for t in $types; do
      f=$GGUF_DIR/$shape-$t.gguf
      [ -s "$f" ] && { say "gguf: $f exists"; continue; }
      [ "$(left)" -gt 60 ] || { say "gguf: skipping $f (budget)"; continue; }
      need=$("$PY" -c "import sys; sys.path.insert(0,'$HERE'); import shapes; print(int(shapes.params_b(shapes.load('$shape'))*1e9*{'F16':2,'Q8_0':1.07,'Q4_K':0.6,'Q4_0':0.57}['$t'])+(2<<30))")
      avail=$(df --output=avail -B1 "$GGUF_DIR" | tail -1)
      [ "$avail" -gt "$need" ] || { say "gguf: skipping $f: $avail bytes free, $need needed"; continue; }
      say "gguf: writing $f"
      "$PY" "$HERE/make_gguf.py" --shape "$shape" --type "$t" --out "$f" --llama-src "$LLAMA_SRC" \
        > "$RUN/gguf-$shape-$t.log" 2>&1 && say "gguf: $(tail -1 "$RUN/gguf-$shape-$t.log")" \
        || say "gguf: FAILED $f: $(tail -3 "$RUN/gguf-$shape-$t.log")"
    done
  done
  say "disk after GGUFs: $(df -h "$GGUF_DIR" | tail -1)"
  say "llama.cpp: waiting for the build"
  while kill -0 $BUILD_PID 2>/dev/null; do
    if [ "$(left)" -lt 60 ]; then
      say "llama.cpp: build still running with $(left)s of budget left: stopping it"
      kill -- -$BUILD_PID 2>/dev/null; sleep 2; kill -9 -- -$BUILD_PID 2>/dev/null
      break
    fi
    sleep 2
  done
  say "llama.cpp: build log tail: $(tail -1 "$LLAMA_BUILD/build.log" 2>/dev/null | head -c 200)"
  if wait $BUILD_PID; then BUILD_OK=1; say "llama.cpp: $(grep -h '^built llama.cpp' "$RUN/build.err")"
  else say "llama.cpp: BUILD FAILED: $(tail -20 "$RUN/build.err")"; fi
  BIN=$LLAMA_BUILD/bin
  export LLAMA_BIN=$BIN
  if [ $BUILD_OK = 1 ] && [ "$GGUF_FROM" = quantize ]; then
    for shape in $SHAPES; do
      for p in $LLAMA_PRECS; do
        t=$(echo $p | tr a-z A-Z); [ "$t" = F16 ] && continue
        f=$GGUF_DIR/$shape-$t.gguf
        [ -s "$f" ] && continue
        [ -s "$GGUF_DIR/$shape-F16.gguf" ] || continue
        say "quantize: $f"
        "$BIN/llama-quantize" --pure "$GGUF_DIR/$shape-F16.gguf" "$f.part" "$t" > "$RUN/quantize-$shape-$t.log" 2>&1 \
          && mv "$f.part" "$f" && say "quantize: done $(du -h "$f" | cut -f1)" \
          || say "quantize: FAILED $(tail -3 "$RUN/quantize-$shape-$t.log")"
      done
    done
  fi
fi
bundle

# ---- 2. the arms, shape by shape
run_arm() {  # arm shape precision -- command...
  local arm=$1 shape=$2 prec=$3; shift 4
  local rem; rem=$(left)
  if [ "$rem" -lt 25 ]; then
    say "$shape $arm: SKIPPED (budget: ${rem}s left)"; fail_json "$arm" "$shape" "$prec" "skipped: time budget"; return
  fi
  local t=$(date +%s)
  say "$shape $arm: start (${rem}s of budget left)"
  timeout --kill-after=5 $(( rem - 5 )) "$@" > "$RUN/$shape--$arm.log" 2>&1
  local rc=$?
  [ -s "$RUN/$shape--$arm.json" ] || fail_json "$arm" "$shape" "$prec" "rc=$rc, no record: $(tail -c 600 "$RUN/$shape--$arm.log" | tr '\n' ' ')"
  say "$shape $arm: rc=$rc in $(( $(date +%s) - t ))s: $(tail -1 "$RUN/$shape--$arm.log" | head -c 400)"
  bundle
}

llama_arms() {  # shape
  local shape=$1 p t mode arm f
  for p in $LLAMA_PRECS; do
    t=$(echo $p | tr a-z A-Z)
    for mode in $LLAMA_MODES; do
      arm=llamacpp-$mode-$p
      f=$GGUF_DIR/$shape-$t.gguf
      if [ $BUILD_OK != 1 ]; then fail_json "$arm" "$shape" "$t" "llama.cpp build failed"; continue; fi
      if [ ! -s "$f" ]; then fail_json "$arm" "$shape" "$t" "no GGUF $f"; continue; fi
      run_arm "$arm" "$shape" "$t" -- "$PY" "$HERE/llamacpp_arm.py" --mode "$mode" --bin "$BIN" --gguf "$f" \
        --shape "$shape" --precision "$t" --tokens "$TOKENS" --iterations "$ITERATIONS" --warmup "$WARMUP" \
        --prompt-len "$PROMPT_LEN" --cooldown-max-s "$COOLDOWN_MAX_S" --timeout 300 \
        --log "$RUN/$shape--$arm.engine.log" --out "$RUN/$shape--$arm.json"
    done
  done
}

torch_arms() {  # shape
  local shape=$1 a arm
  for a in torch-f16 torch-int4; do
    has_arm $a || continue
    arm=torch-compile-${a#torch-}
    run_arm "$arm" "$shape" "${a#torch-}" -- "$PY" "$HERE/torch_compile.py" --shape "$shape" --arm "${a#torch-}" \
      --tokens "$TOKENS" --iterations "$ITERATIONS" --warmup "$WARMUP" --prompt-len "$PROMPT_LEN" \
      --cooldown-max-s "$COOLDOWN_MAX_S" --out "$RUN/$shape--$arm.json"
  done
}

for shape in $SHAPES; do
  for engine in ${ORDER:-llama torch}; do
    case $engine in llama) llama_arms "$shape" ;; torch) torch_arms "$shape" ;; esac
  done
done

bundle
say "done; records in $OUT/peers.json, logs in $OUT/peers.tar.gz"
cat "$OUT/summary.txt"
