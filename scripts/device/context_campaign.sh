#!/usr/bin/env bash
# The context campaign on one H200 (issue: real contexts): energy per output token at context depths,
# with the prefill apart, on the graph engine and on llama.cpp's llama-server (through the server path,
# `--api llama`, whose decode requests reuse the cached prompt), and llama-server with its KV cache in
# q8_0 (`-ctk q8_0 -ctv q8_0`) as its own stack. Each repeat is one `measure --context` per stack: every
# depth a run of its own (idle reference, cooldowns, arm order counterbalanced by --order-repeat), every
# window ≥ 5 s. Synthetic weights on both sides (seed 0; make_gguf.py's seeded GGUFs for llama.cpp).
#   context_campaign.sh prep SHAPE FORMATS          build llama-server (CUDA), write the GGUFs
#   context_campaign.sh run SHAPE FORMATS DEPTHS R…  the repeats R, stacks alternating, to BUDGET_S (520)
#     e.g. run qwen2-1.5b F16,Q8_0,Q4_0 16,1024,4096,16384 1
#     DEPTHS `prompts`: the committed prompt set (data/prompts/prompt-set-v1.json) instead, its
#     requests end to end (`measure --prompts`), the server's context window 8 192.
# STACKS (default "graph llama llama-kvq8") picks stacks. SESSION names the sessions (default
# h200-context-DAY-CARD, the day and the card's UUID: each sitting's stacks are sessions of their
# own, and the repeats of one sitting, made over several calls, share one). Carry
# .ship/quantenergy.gz and .ship/llama.cpp.tar.xz. Results: $OUT/campaign.tgz (reports, logs, the
# GPU), bundled after every run, so a call stopped at its limit keeps them.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
T0=$(date +%s)
W=/tmp/ctxc
R=$W/out
mkdir -p "$R"
say() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
late() { [ $(( $(date +%s) - T0 )) -gt "${BUDGET_S:-520}" ]; }
bundle() { (cd "$W" && tar czf "$OUT/campaign.tgz" out); }
phase=${1:?phase}; SHAPE=${2:?shape}; FORMATS=${3:?formats}; shift 3
case "$phase" in
  prep)
    SHAPES="$SHAPE" FORMATS="${FORMATS//,/ }" OUT="$W/prep" WORK=/tmp/peers LLAMA_TARGETS=llama-server \
      bash scripts/peers/server_campaign.sh prep > "$W/prep.log" 2>&1
    echo "prep rc $?"; tail -3 "$W/prep.log"; ls -la /tmp/peers/gguf
    ;;
  run)
    DEPTHS=${1:?depths}; shift
    nvidia-smi --query-gpu=name,uuid,driver_version,power.limit,clocks.max.sm --format=csv,noheader | tee -a "$R/gpu.txt"
    uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
    SESSION=${SESSION:-h200-context-$(date -u +%Y-%m-%d)-${uuid:4:8}}
    BIN=/tmp/peers/llama-build-cuda/bin
    last=${DEPTHS##*,}
    workload=(--context "$DEPTHS")
    [ "$DEPTHS" = prompts ] && { last=7680; workload=(--prompts data/prompts/prompt-set-v1.json); }
    files=(); for t in ${FORMATS//,/ }; do files+=(--model-file "$t=/tmp/peers/gguf/$SHAPE-$t.gguf"); done
    server="$BIN/llama-server -m {model} --port {port} -ngl 999 -fa on -np 1 -c $((last + 512))"
    for r in "$@"; do
      for stack in ${STACKS:-graph llama llama-kvq8}; do
        late && { say "budget spent: $stack r$r not started"; continue; }
        case $stack in
          graph) args=(--synthetic "$SHAPE" --precision "$FORMATS") ;;
          llama) args=(--server-cmd "$server" --api llama "${files[@]}") ;;
          llama-kvq8) args=(--server-cmd "$server -ctk q8_0 -ctv q8_0" --api llama "${files[@]}") ;;
        esac
        say "$stack r$r: $SHAPE $FORMATS at $DEPTHS"
        "$QE" measure "${args[@]}" "${workload[@]}" --min-window-s 5 --cooldown-max-s 8 \
          --session "$SESSION-$stack" --order-seed 41 --order-repeat "$r" \
          --out "$R/$stack" --name "$SHAPE-$stack-r$r" > "$R/$stack-r$r.log" 2>&1
        echo "rc $?" >> "$R/$stack-r$r.log"; grep -E "mJ/token|^rc|rror" "$R/$stack-r$r.log" | head -8
        stop_llama_servers
        bundle
      done
    done
    ;;
  *) echo "phases: prep run" >&2; exit 2 ;;
esac
