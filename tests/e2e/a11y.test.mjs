// Accessibility (issue 18): axe-core's WCAG 2.0/2.1 A and AA rules over every tab, desktop (1280 px)
// and phone (420 px), light and dark — 20 views, and the pre-rendered landing in each of the 4 — with the page in the state a visitor sees (the
// Your-run tab with two reports dropped on it). Any violation fails, listed with its rule, the
// elements and axe's summary of what to fix.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { startServer, launch, ROOT, EXAMPLES } from './harness.mjs';

const AXE = path.join(ROOT, 'node_modules', 'axe-core', 'axe.min.js');
const TABS = {
  tested: '?tab=tested',
  model: '?tab=model&n=7&gpu=RTX%204090&p=NF4&b=1&ctx=2048',
  optimize: '?tab=optimize&gpu=H200&model=Qwen2-1.5B&objective=min-energy&ctx=2048',
  run: '?tab=run',
  data: '?tab=data',
};
const SIZES = { desktop: { width: 1280, height: 900 }, phone: { width: 420, height: 900 } };

let server;
let browser;
before(async () => {
  server = await startServer();
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await server?.close();
});

/** The violations axe finds on the page as it is now, one line each. */
export async function axeViolations(page) {
  await page.addScriptTag({ path: AXE });
  const result = await page.evaluate(async () => {
    // eslint-disable-next-line no-undef
    const r = await axe.run(document, {
      runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] },
      resultTypes: ['violations'],
    });
    return r.violations.map((v) => ({
      id: v.id,
      nodes: v.nodes.map((n) => `${n.target.join(' ')} — ${n.failureSummary.replace(/\s+/g, ' ')}`),
    }));
  });
  return result.flatMap((v) => v.nodes.map((n) => `${v.id}: ${n}`));
}

for (const [device, viewport] of Object.entries(SIZES)) {
  for (const scheme of ['light', 'dark']) {
    test(`axe: no WCAG A/AA violation on any tab, ${device}, ${scheme}`, async () => {
      // bypassCSP: the page's CSP (rightly) refuses the injected axe script.
      const context = await browser.newContext({ viewport, colorScheme: scheme, isMobile: device === 'phone', bypassCSP: true });
      const page = await context.newPage();
      const found = [];
      try {
        for (const [tab, q] of Object.entries(TABS)) {
          await page.goto(server.url + q);
          await page.waitForSelector('main');
          if (tab === 'run') {
            await page.setInputFiles('#file-input', [EXAMPLES.illustrative, EXAMPLES.noGpu]);
            await page.waitForFunction(() => document.querySelectorAll('#entries > li').length === 2
              && !document.querySelector('#entries').textContent.includes('Checking'));
          }
          if (tab === 'optimize') await page.waitForSelector('#pareto-canvas[data-painted="1"]');
          // The page itself, not the pre-rendered landing it replaces (checked below).
          if (tab === 'tested') {
            await page.waitForSelector('#crossover-canvas[data-painted="1"]');
            await page.waitForFunction(() => !document.documentElement.classList.contains('qe-pre'));
          }
          await page.waitForTimeout(200);
          for (const v of await axeViolations(page)) found.push(`[${tab}] ${v}`);
        }
        // The pre-rendered landing, as shown while the wasm is on its way (held here).
        const pre = await context.newPage();
        await pre.route('**/*.wasm', () => {});
        await pre.goto(server.url, { waitUntil: 'domcontentloaded' });
        await pre.waitForSelector('#prerender svg.chart-svg', { state: 'attached' });
        for (const v of await axeViolations(pre)) found.push(`[pre-render] ${v}`);
      } finally {
        await context.close();
      }
      assert.deepEqual(found, [], `${found.length} violation(s):\n${found.join('\n')}`);
    });
  }
}
