#!/usr/bin/env bash
# Every op of the graph engine on the GPU against its CPU reference (`engine-check --ops`: every
# dtype pair, odd shapes). Run from the repo root inside a device call, with the CUDA build carried
# as .ship/quantenergy.gz (scripts/build-cuda.sh); the table and JSON come back under $OUT.
set -u
source scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
$QE engine-check --ops --json "$OUT/ops.json" 2>&1 | tee "$OUT/ops.txt"
