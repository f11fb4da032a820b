// Part of the post_build hook scripts/prerender.sh: put the two render-blocking files into the page
// itself, so the first paint waits for index.html alone (one round trip less on a slow phone link;
// Lighthouse's largest contentful paint is the hero's text, gated by them).
//   node scripts/inline-critical.mjs STAGING_DIR
// * style.css (already minified) becomes a <style> element (the CSP allows inline styles);
// * gate.js (minified here) becomes an inline <script>, allowed by its SHA-256 in the CSP's
//   script-src — every other script stays 'self' only.
// Both files leave the staging dir: nothing else loads them. Fails if the page lacks either link or
// the CSP meta tag, so a changed index.html cannot silently ship them external again.
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { execFileSync } from 'node:child_process';

const dir = process.argv[2];
if (!dir) throw new Error('usage: inline-critical.mjs STAGING_DIR');
const pagePath = path.join(dir, 'index.html');
let html = fs.readFileSync(pagePath, 'utf8');

function replaceOnce(re, by, what) {
  const m = html.match(re);
  if (!m) {
    console.error(`inline-critical: ${what} not found in index.html`);
    process.exit(1);
  }
  html = html.replace(re, () => by(m));
}

const cssPath = path.join(dir, 'style.css');
const css = fs.readFileSync(cssPath, 'utf8').trim();
if (css.includes('</style')) throw new Error('style.css contains </style');
replaceOnce(/<link rel="stylesheet" href="[^"]*style\.css"[^>]*>/, () => `<style>${css}</style>`, 'the style.css link');

const esbuild = fs.existsSync('node_modules/.bin/esbuild') ? 'node_modules/.bin/esbuild' : 'esbuild';
const gatePath = path.join(dir, 'gate.js');
const gate = execFileSync(esbuild, [gatePath, '--minify', '--log-level=warning'], { encoding: 'utf8' }).trim();
if (gate.includes('</script')) throw new Error('gate.js contains </script');
const hash = crypto.createHash('sha256').update(gate).digest('base64');
replaceOnce(/<script src="[^"]*gate\.js"><\/script>/, () => `<script>${gate}</script>`, 'the gate.js script');
replaceOnce(/(<meta http-equiv="Content-Security-Policy" content="[^"]*script-src 'self')/,
  (m) => `${m[1]} 'sha256-${hash}'`, "the CSP's script-src 'self'");

fs.writeFileSync(pagePath + '.tmp', html);
fs.renameSync(pagePath + '.tmp', pagePath);
fs.rmSync(cssPath);
fs.rmSync(gatePath);
console.log(`inline-critical: style.css (${css.length} B) and gate.js (${gate.length} B) inlined; gate sha256-${hash}`);
