#!/usr/bin/env bash
# Our graph engine beside torch.compile at its strongest (gpt-fast's inductor settings: static KV
# cache, reduce-overhead, fullgraph, coordinate-descent tuning), F16, one card, one call, shape by
# shape: graph, then torch.compile. Carry .ship (quantenergy.gz from scripts/build-cuda.sh).
#   [INDUCTOR="gpt-fast default"] bash scripts/device/torch_gap.sh "qwen2-0.5b qwen2-1.5b qwen2-7b" [BUDGET_S]
# Every JSON goes back as $OUT/torch-gap.tgz (re-bundled after each arm: a call cut at its limit
# still brings back what finished); one summary line per arm on stdout.
source scripts/device/env.sh
SHAPES=${1:-qwen2-0.5b qwen2-1.5b qwen2-7b}
BUDGET_S=${2:-540}
PY=${PY:-/opt/torch/.venv/bin/python}
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache PYTHONUNBUFFERED=1 RUST_LOG=warn
W=/tmp/torch-gap; rm -rf "$W"; mkdir -p "$W"
t0=$(date +%s)
left() { echo $(( BUDGET_S - ($(date +%s) - t0) )); }
bundle() { (cd "$W" && tar czf "$OUT/torch-gap.tgz.tmp" . && mv "$OUT/torch-gap.tgz.tmp" "$OUT/torch-gap.tgz"); }
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit --format=csv,noheader | tee "$W/gpu.txt"
for shape in $SHAPES; do
  [ "$(left)" -gt 60 ] || { echo "budget spent before $shape"; break; }
  timeout "$(left)" $QE measure --synthetic "$shape" --precision F16 --baseline none --engine graph \
    --tokens 256 --iterations 10 --warmup 2 --cooldown-max-s 10 --min-window-s 5 --out "$W" \
    --name "graph-$shape" 2>&1 | grep -E "mJ/token|error" | sed "s/^/graph $shape: /"
  bundle
  for ind in ${INDUCTOR:-gpt-fast}; do
    [ "$(left)" -gt 60 ] || break
    timeout "$(left)" $PY scripts/peers/torch_compile.py --shape "$shape" --arm f16 --inductor "$ind" \
      --iterations 16 --out "$W/torch-$ind-$shape.json" 2>&1 | tail -1
    bundle
  done
done
echo "done after $(( $(date +%s) - t0 )) s"
