// Shared harness for the end-to-end tests: a static server for dist/ on a free 127.0.0.1 port
// (node's http module) and Debian's chromium driven by playwright-core.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const DIST = path.join(ROOT, 'dist');

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.wasm': 'application/wasm',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
};

/**
 * Serve `root` under `prefix` (e.g. '/' or '/quantenergy/'); resolves to { url, close, requests }.
 * With `rebase`, index.html's root-relative links (`<base href="/">`, `/style.css`) are served as
 * `prefix`-relative, which is exactly what `trunk build --public-url <prefix>` writes.
 */
export function startServer({ root = DIST, prefix = '/', rebase = false } = {}) {
  const requests = [];
  const server = http.createServer((req, res) => {
    const u = new URL(req.url, 'http://x');
    requests.push(u.pathname);
    if (!u.pathname.startsWith(prefix)) {
      res.writeHead(404).end('not found');
      return;
    }
    let rel = decodeURIComponent(u.pathname.slice(prefix.length)) || 'index.html';
    if (rel.endsWith('/')) rel += 'index.html';
    const file = path.normalize(path.join(root, rel));
    if (!file.startsWith(root) || !fs.existsSync(file) || fs.statSync(file).isDirectory()) {
      res.writeHead(404).end('not found');
      return;
    }
    res.writeHead(200, {
      'content-type': TYPES[path.extname(file)] || 'application/octet-stream',
      'cache-control': 'no-store',
    });
    if (rebase && file.endsWith('index.html')) {
      res.end(fs.readFileSync(file, 'utf8').replace(/(href|src)="\//g, `$1="${prefix}`));
      return;
    }
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      resolve({
        url: `http://127.0.0.1:${port}${prefix}`,
        requests,
        close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); }),
      });
    });
  });
}

export async function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--headless=new'],
  });
}

/** A page that records console errors, page errors and requests leaving 127.0.0.1. */
export async function openPage(browser, opts = {}) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, ...opts });
  const page = await context.newPage();
  const problems = [];
  const external = [];
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith('http://127.0.0.1') && !u.startsWith('data:') && !u.startsWith('blob:')) external.push(u);
  });
  page.on('dialog', (d) => { problems.push(`dialog: ${d.message()}`); d.dismiss(); });
  return { context, page, problems, external };
}

/** base64url without padding, as the upstream container writes overlay links. */
export function b64url(obj) {
  return Buffer.from(JSON.stringify(obj)).toString('base64').replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

export const EXAMPLES = {
  illustrative: path.join(ROOT, 'data/examples/upstream-measured-illustrative.json'),
  noGpu: path.join(ROOT, 'data/examples/upstream-no-gpu.json'),
};
