// The pre-rendered landing (crates/web/src/prerender.rs, scripts/prerender.sh): what a visitor sees
// without JavaScript, that it says exactly what the page says once the wasm runs, that the page takes
// over without moving anything, and that a link to another view never shows it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { startServer, launch, openPage, DIST } from './harness.mjs';

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

// Everything the landing states, in reading order: hero verdicts, pickers, bars, verdicts, legend.
async function statements(page) {
  return page.evaluate(() => {
    const text = (sel) => [...document.querySelectorAll(sel)]
      .filter((e) => e.offsetParent !== null || e.getClientRects().length > 0)
      .map((e) => e.textContent.replace(/\s+/g, ' ').trim());
    const picked = (id) => {
      const s = document.getElementById(id);
      return s ? s.options[s.selectedIndex]?.textContent.trim() : null;
    };
    return {
      h1: text('h1'),
      crossovers: text('.crossovers li'),
      gpu: picked('gpu-select'),
      model: picked('model-select'),
      sessions: text('.session-head'),
      bars: text('.bar-row'),
      verdicts: text('.session .verdict'),
      legend: text('.legend li'),
      controls: text('.chart-controls label'),
    };
  });
}

// Boxes (CSS px) of the landmarks a visitor's eye is on.
async function boxes(page) {
  return page.evaluate(() => {
    const sel = ['h1', '.crossovers', 'nav.tabs', '#gpu-select', '.session', '.verdicts', '.chart-wrap', '.legend', 'footer'];
    return Object.fromEntries(sel.map((s) => {
      const r = document.querySelector(s)?.getBoundingClientRect();
      return [s, r ? [r.x, r.y + scrollY, r.width, r.height].map((v) => Math.round(v)) : null];
    }));
  });
}

for (const [name, viewport] of [['desktop', { width: 1280, height: 900 }], ['phone', { width: 420, height: 900 }]]) {
  test(`${name}: without JavaScript the landing shows the verdicts and the chart, and they are the page's`, async () => {
    const off = await browser.newContext({ viewport, javaScriptEnabled: false });
    const p0 = await off.newPage();
    await p0.goto(server.url);
    const before = await statements(p0);
    // The visible chart is the SVG of this layout, drawn (paths) with axis titles; no canvas.
    const svg = await p0.evaluate(() => {
      const s = [...document.querySelectorAll('svg.chart-svg')].find((e) => e.getBoundingClientRect().width > 0);
      return s && { cls: s.getAttribute('class'), paths: s.querySelectorAll('path').length, text: s.textContent, h: s.getBoundingClientRect().height };
    });
    assert.ok(svg, 'no visible pre-rendered chart');
    assert.match(svg.cls, name === 'desktop' ? /wide/ : /narrow/);
    assert.ok(svg.paths > 10, `only ${svg.paths} paths drawn`);
    assert.match(svg.text, /model size \(B parameters, log scale\)/);
    assert.match(svg.text, /saves energy vs FP16/);
    assert.equal(await p0.locator('canvas').count(), 0);
    assert.ok(await p0.locator('.nojs-note').isVisible(), 'the note about JavaScript is not shown');
    assert.ok(before.crossovers.length >= 4 && before.bars.length >= 2 && before.verdicts.length >= 1, JSON.stringify(before));
    await off.close();

    // The pre-render as a visitor with JavaScript sees it while the wasm is on its way (held here).
    const waiting = await browser.newContext({ viewport });
    await waiting.route('**/*.wasm', () => {});
    const p1 = await waiting.newPage();
    await p1.goto(server.url, { waitUntil: 'domcontentloaded' });
    const boxesBefore = await boxes(p1);
    assert.equal(await p1.locator('#prerender').count(), 1);
    await waiting.close();

    // With JavaScript: the page runs on the same URL, paints its own chart, removes the pre-render.
    const { page, context, problems } = await openPage(browser, { viewport });
    await page.addInitScript(() => {
      window.__shift = 0;
      new PerformanceObserver((l) => { for (const e of l.getEntries()) if (!e.hadRecentInput) window.__shift += e.value; })
        .observe({ type: 'layout-shift', buffered: true });
    });
    await page.goto(server.url);
    await page.waitForSelector('#crossover-canvas[data-painted="1"]', { timeout: 15000 });
    // The take-over is the task after the chart's draw.
    await page.waitForFunction(() => !document.documentElement.classList.contains('qe-pre'));
    // Of the pre-render only its skip link and hero stay (the page does not render its own then);
    // nothing is on the page twice.
    assert.deepEqual(await page.evaluate(() => [...document.querySelectorAll('#prerender > *')].map((e) => e.className)),
      ['skip', 'hero'], 'the pre-render was not handed over');
    for (const sel of ['h1', 'nav.tabs', 'main', '#gpu-select', 'footer']) {
      assert.equal(await page.locator(sel).count(), 1, `${sel} is on the page more than once`);
    }
    assert.equal(await page.evaluate(() => document.documentElement.classList.contains('qe-pre')), false);
    const after = await statements(page);
    assert.deepEqual(after, before, 'the pre-render says something the page does not');
    // Same layout: every landmark in the same place (±1 px), and no layout shift was recorded.
    const boxesAfter = await boxes(page);
    for (const [sel, b] of Object.entries(boxesBefore)) {
      assert.ok(b && boxesAfter[sel], `${sel} missing`);
      b.forEach((v, i) => assert.ok(Math.abs(v - boxesAfter[sel][i]) <= 1, `${sel} moved: ${b} → ${boxesAfter[sel]}`));
    }
    const shift = await page.evaluate(() => window.__shift);
    assert.ok(shift < 0.01, `cumulative layout shift ${shift}`);
    assert.deepEqual(problems, []);
    await context.close();
  });
}

test('a link to another view never shows the pre-rendered numbers', async () => {
  const meta = fs.readFileSync(path.join(DIST, 'index.html'), 'utf8').match(/name="qe-default-view" content="([^"]*)"/);
  assert.ok(meta && meta[1].startsWith('?tab=tested'), 'the default view is not written into index.html');
  const defaultQuery = meta[1].replace(/&amp;/g, '&');
  // The class gate.js sets in <head>, before the first paint, and whether the pre-render shows.
  const firstState = async (q) => {
    const ctx = await browser.newContext({ javaScriptEnabled: true });
    const p = await ctx.newPage();
    await p.goto(server.url + q, { waitUntil: 'domcontentloaded' });
    const s = await p.evaluate(() => ({
      deep: document.documentElement.classList.contains('qe-deep'),
      pre: document.documentElement.classList.contains('qe-pre'),
      // Anything of the pre-render but its view-independent skip link and hero, on screen.
      shown: [...document.querySelectorAll('#prerender > :not(.skip):not(.hero)')]
        .some((e) => getComputedStyle(e).display !== 'none'),
      hero: document.querySelectorAll('header.hero').length,
    }));
    await ctx.close();
    return s;
  };
  for (const q of ['?tab=model', '?tab=run', '?tab=tested&gpu=H200&model=Qwen2-7B', '?tab=tested&all=1', '#r=abc']) {
    const s = await firstState(q);
    assert.deepEqual(s, { deep: true, pre: false, shown: false, hero: 1 }, `${q}: the pre-render could be painted`);
  }
  // The bare URL, ?tab=tested and the page's own address for the default view keep it.
  for (const q of ['', '?tab=tested', defaultQuery]) {
    const s = await firstState(q);
    assert.deepEqual([s.deep, s.pre], [false, true], `${q || '(bare)'}: treated as another view`);
  }
  const { page, context, problems } = await openPage(browser);
  // A deep link still opens its view, and a card picked by link shows that card.
  await page.goto(server.url + '?tab=tested&gpu=H200&model=Qwen2-7B');
  await page.waitForSelector('#crossover-canvas[data-painted="1"]', { timeout: 15000 });
  assert.match(await page.locator('#gpu-select option:checked').textContent(), /H200/);
  // The hero is the pre-render's (the page modules do not render it), once.
  assert.equal(await page.locator('header.hero').count(), 1);
  assert.equal(await page.locator('#prerender nav, #prerender main').count(), 0);
  assert.deepEqual(problems, []);
  await context.close();
});

test('when the wasm cannot load, the pre-rendered landing stays readable and says what failed', async () => {
  for (const q of ['', '?tab=model']) {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await ctx.route('**/*.wasm', (r) => r.abort());
    const p = await ctx.newPage();
    const errors = [];
    p.on('pageerror', (e) => errors.push(e.message));
    await p.goto(server.url + q);
    const alert = p.locator('[role="alert"]', { hasText: 'could not start the interactive page' });
    await alert.waitFor({ timeout: 10000 });
    assert.ok(await alert.isVisible(), `${q}: the failure is not shown`);
    // The hero is there on every link; the default view keeps its verdicts and chart.
    assert.ok(await p.locator('header.hero h1').isVisible());
    if (q === '') {
      assert.ok(await p.locator('#prerender .session').first().isVisible(), 'the pre-rendered verdicts went away');
    }
    // The one uncaught error is the failed start itself, never a ReferenceError of the handler.
    assert.ok(errors.every((m) => !/is not defined/.test(m)), errors.join('; '));
    await ctx.close();
  }
});
