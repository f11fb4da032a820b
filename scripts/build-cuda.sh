#!/usr/bin/env bash
# Build `quantenergy` with the `cuda` feature on a machine WITHOUT a GPU (DESIGN.md §6b):
#  - CUDA 13.0 toolkit pieces from PyPI wheels (nvcc, nvvm, runtime, crt, cccl, nvrtc, cublas, curand),
#    downloaded once into ~/.cache/quantenergy and unpacked (no GitHub, no NVIDIA installer);
#  - a stub libcuda.so.1 to link against (the real one comes with the driver on the GPU machine);
#  - CUDA_COMPUTE_CAP=90 (Hopper). Output: target/cuda/release/quantenergy and a gzip copy under
#    .ship/ (ignored by git) small enough to carry to the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${QE_CUDA_CACHE:-$HOME/.cache/quantenergy}
WHEELS=$CACHE/cuda-wheels
CU=$CACHE/cuda13/nvidia/cu13
PKGS="nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-runtime==13.0.96 nvidia-cuda-crt==13.0.88
nvidia-cuda-cccl==13.0.85 nvidia-cuda-nvrtc==13.0.88 nvidia-cublas==13.0.2.14 nvidia-curand==10.4.0.35"
if [ ! -x "$CU/bin/nvcc" ]; then
  mkdir -p "$WHEELS" "$CACHE/cuda13"
  python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$WHEELS" $PKGS
  for w in "$WHEELS"/*.whl; do unzip -q -o "$w" 'nvidia/*' -d "$CACHE/cuda13"; done
fi
# In CUDA 13 cicc and libdevice live in the nvvm wheel: put them where nvcc looks.
[ -e "$CU/nvvm/bin/cicc" ] || { echo "nvvm missing under $CU/nvvm" >&2; exit 1; }
LINK=$CACHE/link
mkdir -p "$LINK"
for l in cublas cublasLt nvrtc cudart curand; do
  f=$(ls "$CU"/lib/lib$l.so.* | head -1); ln -sf "$f" "$LINK/lib$l.so"
done
if [ ! -e "$LINK/libcuda.so" ]; then
  # The stub's symbols come from cudarc's source: on a fresh machine it is not unpacked yet.
  cargo fetch --locked >/dev/null
  src=$(ls -d "$HOME"/.cargo/registry/src/*/cudarc-0.19.10 | head -1)
  grep -ohE "fn cu[A-Za-z0-9_]+\(" "$src/src/driver/sys/mod.rs" | sed 's/fn //; s/($//' | sort -u \
    | awk '{print "void " $1 "(void) {}"}' > "$LINK/stub.c"
  gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$LINK/libcuda.so" "$LINK/stub.c"
fi
export CUDA_HOME=$CU CUDA_ROOT=$CU CUDA_PATH=$CU NVCC=$CU/bin/nvcc PATH=$CU/bin:$PATH CUDA_COMPUTE_CAP=90
export LIBRARY_PATH=$LINK:$CU/lib:${LIBRARY_PATH:-}
export RUSTFLAGS="-L native=$LINK -L native=$CU/lib"
nvcc --version | tail -2
# The build every report names (stack.meter_build): the commit, and a hash of the diff when the tree
# has changes, so two builds carried to one sitting are never mistaken for one.
QE_METER_REV=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || QE_METER_REV="$QE_METER_REV-dirty.$(git diff HEAD | sha256sum | cut -c1-8)"
export QE_METER_REV
echo "meter build: $QE_METER_REV"
cargo build --release -p cli --features cuda --target-dir target/cuda --bin quantenergy
mkdir -p .ship
strip -o .ship/quantenergy target/cuda/release/quantenergy
# gzip, not zstd: the GPU machine has gunzip but no zstd.
gzip -f -9 .ship/quantenergy
# scripts/device/env.sh takes .ship/quantenergy.xz before this file: an older one must not shadow it.
rm -f .ship/quantenergy.xz
ls -la .ship/
