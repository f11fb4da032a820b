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
# Minify the stylesheet too (esbuild, pinned in package.json) and re-pin its SRI hash in the page:
# ≈ 1 KB gz of the 700 KB whole-app budget. Done here, not in build-full-module.sh, because this
# hook is the one that rewrites index.html (hooks of a stage run side by side).
esbuild=$(command -v esbuild || echo node_modules/.bin/esbuild)
"$esbuild" "$out/style.css" --minify --log-level=warning --allow-overwrite --outfile="$out/style.css"
node -e '
  const fs = require("fs"), crypto = require("crypto");
  const [css, page] = process.argv.slice(1);
  const sri = "sha384-" + crypto.createHash("sha384").update(fs.readFileSync(css)).digest("base64");
  const html = fs.readFileSync(page, "utf8");
  const out = html.replace(/(href="[^"]*style\.css" integrity=")[^"]*(")/, `$1${sri}$2`);
  if (out === html) { console.error("prerender.sh: no style.css integrity attribute to update"); process.exit(1); }
  fs.writeFileSync(page + ".tmp", out); fs.renameSync(page + ".tmp", page);
' "$out/style.css" "$out/index.html"
