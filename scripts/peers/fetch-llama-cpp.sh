#!/usr/bin/env bash
# Fetch llama.cpp's source as it ships inside the llama-cpp-python source distribution on PyPI
# (vendor/llama.cpp), unpack it into the git-ignored folder .peers/llama.cpp at the repo root,
# trim what a build and a synthetic GGUF do not need, and print its size.
#   LLAMA_CPP_PY_VERSION   sdist version (default 0.3.36)
#   PEERS_DIR              where to put it (default <repo>/.peers)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VER=${LLAMA_CPP_PY_VERSION:-0.3.36}
PEERS=${PEERS_DIR:-$ROOT/.peers}
CACHE=${QE_CACHE:-$HOME/.cache/quantenergy}/sdist
DST=$PEERS/llama.cpp
mkdir -p "$CACHE" "$PEERS"
SDIST=$(ls "$CACHE"/llama_cpp_python-"$VER".tar.gz 2>/dev/null || true)
if [ -z "$SDIST" ]; then
  # Only llama-cpp-python itself as a source distribution: pip still prepares its metadata, which
  # pulls its build back-end (scikit-build-core) as a wheel into an isolated env; nothing is compiled.
  python3 -m pip download --no-deps --no-binary llama-cpp-python -d "$CACHE" "llama-cpp-python==$VER"
  SDIST=$(ls "$CACHE"/llama_cpp_python-"$VER".tar.gz)
fi
echo "sdist: $SDIST ($(du -h "$SDIST" | cut -f1))"
rm -rf "$DST" "$PEERS/.unpack"
mkdir -p "$PEERS/.unpack"
tar -xzf "$SDIST" -C "$PEERS/.unpack" "llama_cpp_python-$VER/vendor/llama.cpp"
mv "$PEERS/.unpack/llama_cpp_python-$VER/vendor/llama.cpp" "$DST"
rm -rf "$PEERS/.unpack"
cd "$DST"
# Keep: the CMake files, ggml/ (CPU + CUDA backends), src/, include/, common/, vendor/ (cpp-httplib,
# nlohmann json, miniaudio, stb: common/, mtmd/ and the server need them), tools/ (llama-bench,
# llama-server, llama-quantize and what tools/CMakeLists.txt adds unconditionally), gguf-py/,
# scripts/ui-assets.cmake (the server's UI target runs it; with the UI off it embeds nothing) and
# models/ggml-vocab-qwen2.gguf and ggml-vocab-llama-spm.gguf (TinyLlama's). Drop the rest.
rm -rf docs media examples pocs tests benches .devops .github ci grammars prompts conversion skills app licenses \
       requirements requirements.txt flake.nix flake.lock poetry.lock pyproject.toml convert_*.py \
       build-xcframework.sh AGENTS.md CLAUDE.md CODEOWNERS CONTRIBUTING.md SECURITY.md mypy.ini \
       pyrightconfig.json ty.toml
find scripts -mindepth 1 ! -name 'ui-assets.cmake' -exec rm -rf {} + 2>/dev/null || true
find models -mindepth 1 ! -name 'ggml-vocab-qwen2.gguf' ! -name 'ggml-vocab-llama-spm.gguf' -exec rm -rf {} + 2>/dev/null || true
# Backends other than CPU, CUDA and BLAS: only added when their GGML_<NAME> option is on (it is off).
for b in cann et hexagon hip metal musa opencl openvino rpc sycl virtgpu vulkan webgpu zdnn zendnn; do
  rm -rf "ggml/src/ggml-$b"
done
# The server's web UI sources (not built: LLAMA_BUILD_UI=OFF, LLAMA_USE_PREBUILT_UI=OFF), test media.
# Keep CMakeLists.txt, sources.cmake and the ui.cpp.in / ui.h.in templates: the UI target renders them
# into an empty ui.cpp/ui.h even with no UI (scripts/ui-assets.cmake, emit_files).
find tools/ui -mindepth 1 ! -name 'CMakeLists.txt' ! -name '*.cmake' ! -name '*.in' -exec rm -rf {} + 2>/dev/null || true
rm -rf tools/mtmd/tests tools/mtmd/*.mp3 tools/mtmd/*.mp4 tools/mtmd/*.png tools/mtmd/*.jpg \
       tools/server/tests tools/server/bench gguf-py/tests
# LLAMA_BUILD_TESTS/EXAMPLES are off, but keep empty CMakeLists in case an option flips.
mkdir -p tests examples && : > tests/CMakeLists.txt && : > examples/CMakeLists.txt
# A tree without git builds as "b0-unknown", and that is what a server then says of itself (GET /props
# build_info, recorded in every report's stack): name the tree and ggml's version instead.
GGML_VER=$(awk '/^set\(GGML_VERSION_(MAJOR|MINOR|PATCH) /{gsub(/\)/,"",$2); v=v (v==""?"":".") $2} END{print v}' ggml/CMakeLists.txt)
sed -i "s/^set(BUILD_COMMIT \"unknown\")/set(BUILD_COMMIT \"llama-cpp-python-$VER-ggml-$GGML_VER\")/" cmake/build-info.cmake
grep -q "llama-cpp-python-$VER-ggml-$GGML_VER" cmake/build-info.cmake \
  || { echo "fetch-llama-cpp.sh: cmake/build-info.cmake has no BUILD_COMMIT line to name the tree by" >&2; exit 1; }
echo "llama.cpp from llama-cpp-python $VER" > "$PEERS/llama.cpp.SOURCE"
cd "$PEERS"
echo "tree: $(du -sh llama.cpp | cut -f1) in $(find llama.cpp -type f | wc -l) files"
echo "packed (tar.xz): $(tar -cJf - llama.cpp | wc -c | awk '{printf "%.1f MB", $1/1e6}')"
echo "packed (tar.gz): $(tar -czf - llama.cpp | wc -c | awk '{printf "%.1f MB", $1/1e6}')"
