#!/usr/bin/env bash
# The opt-in matvec (QE_GEMV=1, engine::fused::Gemv) against cuBLAS's GEMM in the graph engine, F16
# and BF16 (measured on the H200: +1 % at 7 B, −2 to −6 % at 0.5–1.5 B).
# Usage (on the device, repo root; carry .ship/quantenergy.gz): bash scripts/device/gemv_check.sh [SHAPE...]
exec bash "$(dirname "$0")/ab_check.sh" QE_GEMV F16,BF16 "$@"
