#!/usr/bin/env bash
# Build the `quantenergy` wheel (crates/python: PyO3 abi3 module + the CLI as a console script,
# NVML meter and server path, no candle engine and no CUDA toolkit) with maturin from PyPI, in a
# venv of its own under .tools/. Output: target/wheels/quantenergy-*.whl (manylinux x86_64, any
# CPython ≥ 3.9).
#   scripts/build-wheel.sh            release build (the wheel to publish)
#   QE_WHEEL_PROFILE=dev scripts/build-wheel.sh   unoptimized, faster: what ./dev test checks
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.tools/maturin-venv
if [ ! -x "$VENV/bin/maturin" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "maturin==1.16.0"
fi
profile=${QE_WHEEL_PROFILE:-release}
rm -f target/wheels/quantenergy-*.whl
"$VENV/bin/maturin" build -q -m crates/python/Cargo.toml --profile "$profile" -o target/wheels >&2
ls target/wheels/quantenergy-*.whl
