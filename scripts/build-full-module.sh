#!/usr/bin/env bash
# Trunk post_build hook (Trunk.toml): build the full page module next to the landing module trunk
# built. Same toolchain as trunk's own pipeline — profile wasm-release, the pinned wasm-bindgen
# 0.2.130 (--target web), wasm-opt -Oz from npm's binaryen — into trunk's staging dir, so `dist/`
# gets quantenergy-web.js + quantenergy-web_bg.wasm. `assets/boot.js` loads it when a visitor opens a
# tab beyond the landing (or arrives on one); assets/worker.js runs the same module as the
# report-checking Web Worker.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${TRUNK_STAGING_DIR:?run by trunk as a post_build hook}
profile=wasm-release
cargo build --target wasm32-unknown-unknown --profile "$profile" -p web --bin quantenergy-web \
  --no-default-features --features inline,worker,page-anchors
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
wasm-bindgen --target web --no-typescript --out-dir "$tmp" \
  "${CARGO_TARGET_DIR:-target}/wasm32-unknown-unknown/$profile/quantenergy-web.wasm"
opt=$(command -v wasm-opt || echo node_modules/.bin/wasm-opt)
"$opt" -Oz --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
  --enable-mutable-globals --enable-reference-types \
  "$tmp/quantenergy-web_bg.wasm" -o "$out/quantenergy-web_bg.wasm"
cp "$tmp/quantenergy-web.js" "$out/quantenergy-web.js"
# Minify every script of the page — mostly the two wasm-bindgen glues — with esbuild (pinned in
# package.json, from npm): ≈ 5 KB gz less, which keeps the whole app under its 700 KB budget with the
# pre-rendered landing in index.html. style.css and gate.js are the pre-render hook's
# (scripts/prerender.sh inlines them into the page it owns).
esbuild=$(command -v esbuild || echo node_modules/.bin/esbuild)
for f in quantenergy-web.js quantenergy-landing.js boot.js worker.js; do
  "$esbuild" "$out/$f" --minify --format=esm --log-level=warning --allow-overwrite --outfile="$out/$f"
done
