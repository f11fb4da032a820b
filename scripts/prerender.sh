#!/usr/bin/env bash
# Trunk post_build hook (Trunk.toml): pre-render the landing view into the staged index.html, so a
# visitor reads the verdicts and sees the first chart before the wasm arrives (or without JavaScript).
# The markup comes from the page's own components rendered natively by Leptos, with the landing
# module's features, and the chart as SVG from the same drawing code as the canvas
# (crates/web/src/prerender.rs). It fails, and with it the build, if index.html lacks its slots.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${TRUNK_STAGING_DIR:?run by trunk as a post_build hook}
cargo run --quiet -p web --bin prerender --no-default-features --features landing -- "$out/index.html"
# Minify the stylesheet (esbuild, pinned in package.json), then put it and gate.js into the page
# (scripts/inline-critical.mjs: the first paint waits for index.html alone; gate.js is allowed by
# its hash in the CSP). Done here, not in build-full-module.sh: this hook owns index.html and the
# files it inlines (hooks of a stage run side by side).
esbuild=$(command -v esbuild || echo node_modules/.bin/esbuild)
"$esbuild" "$out/style.css" --minify --log-level=warning --allow-overwrite --outfile="$out/style.css"
node scripts/inline-critical.mjs "$out"
