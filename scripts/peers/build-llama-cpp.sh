#!/usr/bin/env bash
# Build llama-server, llama-bench and llama-quantize from the trimmed tree in .peers/llama.cpp
# (scripts/peers/fetch-llama-cpp.sh) with the flags of DESIGN.md §6c.
#   build-llama-cpp.sh [cuda|cpu]        (default cuda)
# Environment:
#   LLAMA_SRC    source tree            (default <repo>/.peers/llama.cpp; run_all.sh passes its own)
#   LLAMA_BUILD  build directory        (default $HOME/.cache/quantenergy/llama-build-<kind>, outside the tree)
#   JOBS         parallel jobs          (default: nproc)
#   TARGETS      what to build          (default: llama-server llama-bench llama-quantize)
# CUDA: nvcc from /usr/local/cuda/bin (13.0 on the H200 machine: not newer than the driver), cmake and
# ninja from /opt/torch/.venv/bin when they are not on PATH. CPU: needs cmake + ninja-build (apt).
# Prints the binaries' directory on the last line of stdout.
set -euo pipefail
KIND=${1:-cuda}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=${LLAMA_SRC:-$HERE/../../.peers/llama.cpp}
SRC=$(cd "$SRC" && pwd)
BUILD=${LLAMA_BUILD:-$HOME/.cache/quantenergy/llama-build-$KIND}
JOBS=${JOBS:-$(nproc)}
for d in /opt/torch/.venv/bin /usr/local/cuda/bin; do [ -d "$d" ] && PATH=$PATH:$d; done
export PATH
command -v cmake >/dev/null || { echo "cmake not found (apt-get install -y cmake ninja-build)" >&2; exit 1; }
GEN=(); command -v ninja >/dev/null && GEN=(-G Ninja)
COMMON=(-DCMAKE_BUILD_TYPE=Release -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_USE_PREBUILT_UI=OFF
        -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF
        -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON)
case "$KIND" in
  cuda)
    # /usr/local/cuda/bin first, so that a newer nvcc elsewhere on PATH is not picked up.
    [ -x /usr/local/cuda/bin/nvcc ] && export PATH=/usr/local/cuda/bin:$PATH CUDACXX=/usr/local/cuda/bin/nvcc
    command -v nvcc >/dev/null || { echo "nvcc not found" >&2; exit 1; }
    # shared libs (the default): libggml-cuda is linked once, not into each of the three tools
    FLAGS=(-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90) ;;
  cpu)
    # static: self-contained binaries that a CI cache can keep anywhere
    FLAGS=(-DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF) ;;
  *) echo "usage: $0 [cuda|cpu]" >&2; exit 2 ;;
esac
mkdir -p "$BUILD"
t0=$(date +%s)
# The source tree can move between runs (a carried copy): a cache made for another source dir is reset.
if [ -f "$BUILD/CMakeCache.txt" ] && ! grep -q "^CMAKE_HOME_DIRECTORY:INTERNAL=$SRC\$" "$BUILD/CMakeCache.txt"; then
  rm -rf "$BUILD"/CMakeCache.txt "$BUILD"/CMakeFiles
fi
cmake -S "$SRC" -B "$BUILD" "${GEN[@]}" "${COMMON[@]}" "${FLAGS[@]}" >"$BUILD/configure.log" 2>&1 \
  || { tail -40 "$BUILD/configure.log" >&2; exit 1; }
cmake --build "$BUILD" -j "$JOBS" --target ${TARGETS:-llama-server llama-bench llama-quantize} >"$BUILD/build.log" 2>&1 \
  || { tail -60 "$BUILD/build.log" >&2; exit 1; }
echo "built llama.cpp ($KIND) in $(( $(date +%s) - t0 )) s: $BUILD/bin" >&2
ls -la "$BUILD/bin" >&2
echo "$BUILD/bin"
