#!/usr/bin/env node
// Tiny static server for Lighthouse runs: node stdlib only, loopback only.
//   node serve.mjs DIR PORT gzip|raw
// gzip mimics GitHub Pages (Fastly): text types and .wasm are gzipped when the client sends
// Accept-Encoding: gzip; raw never compresses, to show what an uncompressed host costs.
// Compressed bodies are made once per file (keyed by mtime) and kept in memory, so the server
// spends no CPU per request and every Lighthouse run sees identical bytes.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';

const [dirArg, portArg, mode = 'gzip'] = process.argv.slice(2);
if (!dirArg || !portArg || !['gzip', 'raw'].includes(mode)) {
  console.error('usage: serve.mjs DIR PORT gzip|raw');
  process.exit(2);
}
const root = path.resolve(dirArg);

const TYPES = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8', '.wasm': 'application/wasm',
  '.svg': 'image/svg+xml', '.xml': 'application/xml', '.txt': 'text/plain; charset=utf-8',
  '.png': 'image/png', '.jpg': 'image/jpeg', '.jpeg': 'image/jpeg', '.gif': 'image/gif',
  '.webp': 'image/webp', '.ico': 'image/x-icon', '.woff2': 'font/woff2', '.woff': 'font/woff',
  '.pdf': 'application/pdf', '.map': 'application/json; charset=utf-8',
};
// What Fastly compresses for GitHub Pages (text, JS, JSON, SVG, XML) plus .wasm as the brief asks.
const COMPRESSIBLE = new Set(['.html', '.js', '.mjs', '.css', '.json', '.wasm', '.svg', '.xml', '.txt', '.map']);

const gzCache = new Map(); // file -> {mtimeMs, body}
function gzipped(file, stat, raw) {
  const hit = gzCache.get(file);
  if (hit && hit.mtimeMs === stat.mtimeMs) return hit.body;
  const body = zlib.gzipSync(raw, { level: 6 }); // level 6 ≈ typical CDN on-the-fly gzip
  gzCache.set(file, { mtimeMs: stat.mtimeMs, body });
  return body;
}

function resolveFile(urlPath) {
  let p;
  try { p = decodeURIComponent(urlPath.split('?')[0]); } catch { return { status: 400 }; }
  const file = path.join(root, path.normalize(p));
  if (file !== root && !file.startsWith(root + path.sep)) return { status: 403 };
  let st;
  try { st = fs.statSync(file); } catch { return { status: 404 }; }
  if (st.isDirectory()) {
    // GitHub Pages redirects /dir to /dir/ and serves dir/index.html.
    if (!p.endsWith('/')) return { status: 301, location: p + '/' };
    return resolveFile(p + 'index.html');
  }
  return { status: 200, file, st };
}

const server = http.createServer((req, res) => {
  if (req.method !== 'GET' && req.method !== 'HEAD') { res.writeHead(405).end(); return; }
  let r = resolveFile(req.url);
  if (r.status === 301) { res.writeHead(301, { Location: r.location, 'Content-Length': 0 }).end(); return; }
  let status = r.status;
  if (status === 404 && fs.existsSync(path.join(root, '404.html'))) r = resolveFile('/404.html');
  if (r.status !== 200) {
    res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8' }).end(String(status) + '\n');
    return;
  }
  const ext = path.extname(r.file).toLowerCase();
  let body = fs.readFileSync(r.file);
  const headers = {
    'Content-Type': TYPES[ext] || 'application/octet-stream',
    // Same policy as GitHub Pages; Lighthouse clears the browser cache before every run anyway.
    'Cache-Control': 'max-age=600',
    'Last-Modified': r.st.mtime.toUTCString(),
  };
  if (mode === 'gzip' && COMPRESSIBLE.has(ext)) {
    headers['Vary'] = 'Accept-Encoding';
    if (/\bgzip\b/.test(req.headers['accept-encoding'] || '')) {
      body = gzipped(r.file, r.st, body);
      headers['Content-Encoding'] = 'gzip';
    }
  }
  headers['Content-Length'] = body.length;
  res.writeHead(status === 404 ? 404 : 200, headers);
  res.end(req.method === 'HEAD' ? undefined : body);
});
server.listen(Number(portArg), '127.0.0.1', () =>
  console.log(`serving ${root} on http://127.0.0.1:${portArg}/ (${mode})`));
