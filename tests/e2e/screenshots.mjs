// Screenshots of every tab, desktop (1280) and phone (390), light and dark, into
// docs/screenshots/. Not a test: run `node tests/e2e/screenshots.mjs` after `trunk build --release`.
import fs from 'node:fs';
import path from 'node:path';
import { startServer, launch, ROOT, EXAMPLES } from './harness.mjs';

const OUT = path.join(ROOT, 'docs', 'screenshots');
fs.mkdirSync(OUT, { recursive: true });
const only = process.argv[2];

const server = await startServer();
const browser = await launch();
const tabs = ['tested', 'model', 'optimize', 'run', 'data'];
const sizes = { desktop: { width: 1280, height: 900 }, phone: { width: 390, height: 844 } };
try {
  for (const [device, viewport] of Object.entries(sizes)) {
    for (const scheme of ['light', 'dark']) {
      const context = await browser.newContext({
        viewport,
        colorScheme: scheme,
        deviceScaleFactor: 1,
        isMobile: device === 'phone',
        hasTouch: device === 'phone',
      });
      const page = await context.newPage();
      for (const tab of tabs) {
        if (only && !`${tab}-${device}-${scheme}`.includes(only)) continue;
        const q = {
          model: '?tab=model&n=7&gpu=RTX%204090&p=NF4&b=1&ctx=2048',
          optimize: '?tab=optimize&gpu=H200&model=Qwen2-1.5B&objective=min-energy&ctx=2048',
        }[tab] || `?tab=${tab}`;
        await page.goto(server.url + q);
        await page.waitForSelector('main');
        if (tab === 'run') {
          await page.setInputFiles('#file-input', [EXAMPLES.illustrative, EXAMPLES.noGpu]);
          await page.waitForFunction(() => document.querySelectorAll('#entries > li').length === 2
            && !document.querySelector('#entries').textContent.includes('Checking'));
          await page.check('#include-fit');
        }
        await page.waitForTimeout(300);
        const file = path.join(OUT, `${tab}-${device}-${scheme}.png`);
        if (tab === 'optimize') {
          // The chart and the tables sit below the first screen: one more shot of them.
          await page.waitForSelector('#pareto-canvas[data-painted="1"]');
          const extra = path.join(OUT, `optimize-pareto-${device}-${scheme}.png`);
          await page.locator('#pareto-card').screenshot({ path: extra });
          console.log(`${path.relative(ROOT, extra)} ${(fs.statSync(extra).size / 1024).toFixed(0)} KB`);
        }
        // The first 1 800 px of the page (desktop) or 2 400 px (phone), to stay under 300 KB a file.
        const height = await page.evaluate(() => document.documentElement.scrollHeight);
        // The data tab's wide tables compress worse: a shorter clip keeps it under 300 KB too.
        const clipH = Math.min(height, device === 'phone' ? 2400 : tab === 'data' ? 1500 : 1800);
        await page.screenshot({ path: file, fullPage: true, clip: { x: 0, y: 0, width: viewport.width, height: clipH } });
        console.log(`${path.relative(ROOT, file)} ${(fs.statSync(file).size / 1024).toFixed(0)} KB`);
      }
      // The hopper classes on the tabs that show them: one dark desktop, one light phone; the
      // H200's software stacks side by side (issue 15) in all four.
      const both = (device === 'desktop') === (scheme === 'dark');
      {
        for (const [name, q] of [
          ['tested-h200-stacks', '?tab=tested&gpu=H200&model=Qwen2-1.5B'],
          // A real model beside its synthetic twin: PPL on the bars, cards on the chips, the pairs.
          ['tested-h200-truth', '?tab=tested&gpu=H200&model=SmolLM2-135M-Instruct'],
          ['model-h200-stack', '?tab=model&n=1.5437&gpu=H200&p=Q4_K&b=1&ctx=2048&stack=llama.cpp'],
          ['optimize-h200-stacks', '?tab=optimize&gpu=H200&model=Qwen2-7B&objective=min-energy'],
          ...(both ? [
            ['tested-h200', '?tab=tested&gpu=H200&model=Qwen2-7B'],
            ['model-hopper-bf16', '?tab=model&n=3&gpu=H200&p=BF16&b=1&ctx=2048'],
            ['model-hopper-q4k', '?tab=model&n=7&gpu=H200&p=Q4_K&b=1&ctx=2048'],
            ['optimize-infeasible', '?tab=optimize&gpu=RTX%204090&model=Qwen2-7B&objective=min-energy&max_ms=1'],
          ] : []),
        ]) {
          if (only && !`${name}-${device}-${scheme}`.includes(only)) continue;
          await page.goto(server.url + q);
          await page.waitForSelector('main');
          await page.waitForTimeout(300);
          const file = path.join(OUT, `${name}-${device}-${scheme}.png`);
          const height = await page.evaluate(() => document.documentElement.scrollHeight);
          const clipH = Math.min(height, device === 'phone' ? 2400 : 1800);
          await page.screenshot({ path: file, fullPage: true, clip: { x: 0, y: 0, width: viewport.width, height: clipH } });
          console.log(`${path.relative(ROOT, file)} ${(fs.statSync(file).size / 1024).toFixed(0)} KB`);
        }
      }
      // Cards alone, in all four: the H200's measured batch sweeps and context runs (Optimize),
      // the real model beside its synthetic twin and a model's context runs (Tested models).
      for (const [name, q, sel] of [
        ['optimize-h200-sweeps', '?tab=optimize&gpu=H200&model=Qwen2-7B&objective=min-energy', '#batch-sweeps'],
        ['optimize-h200-context', '?tab=optimize&gpu=H200&model=Qwen2-1.5B&objective=min-energy', '#context-runs'],
        ['tested-h200-synthetic', '?tab=tested&gpu=H200&model=SmolLM2-135M-Instruct', '#synthetic-card'],
        ['tested-h200-context', '?tab=tested&gpu=H200&model=Qwen2-1.5B', '#tested-context-runs'],
      ]) {
        if (only && !`${name}-${device}-${scheme}`.includes(only)) continue;
        await page.goto(server.url + q);
        const card = page.locator(sel);
        await card.waitFor();
        const file = path.join(OUT, `${name}-${device}-${scheme}.png`);
        // A clip of the full page at the card's place (an element shot of a card this far down the
        // phone page came out offset).
        const r = await card.evaluate((el) => {
          const b = el.getBoundingClientRect();
          return { x: b.left + window.scrollX, y: b.top + window.scrollY, width: b.width, height: b.height };
        });
        await page.screenshot({ path: file, fullPage: true, clip: r });
        console.log(`${path.relative(ROOT, file)} ${(fs.statSync(file).size / 1024).toFixed(0)} KB`);
      }
      // A measured report's card with its validity (real SmolLM2 on the graph engine, valid; the
      // same model on llama-server at one stream, host-bound), in all four.
      if (!only || `run-validity-${device}-${scheme}`.includes(only)) {
        await page.goto(server.url + '?tab=run');
        await page.waitForSelector('main');
        const truth = (f) => path.join(ROOT, 'data/measurements/h200/truth', f);
        await page.setInputFiles('#file-input', [
          truth('card-b/graph-real/smollm2-graph-real-r1_Q4_0.json'),
          truth('card-a/llama-real/smollm2-llama-real-r1_Q4_0.json'),
        ]);
        await page.waitForFunction(() => document.querySelectorAll('#entries .validity').length === 2);
        const list = page.locator('#entries');
        const file = path.join(OUT, `run-validity-${device}-${scheme}.png`);
        const r = await list.evaluate((el) => {
          const b = el.getBoundingClientRect();
          return { x: b.left + window.scrollX, y: b.top + window.scrollY, width: b.width, height: Math.min(b.height, 2400) };
        });
        await page.screenshot({ path: file, fullPage: true, clip: r });
        console.log(`${path.relative(ROOT, file)} ${(fs.statSync(file).size / 1024).toFixed(0)} KB`);
      }
      await context.close();
      // The pre-rendered landing as a visitor without JavaScript sees it (issue 18).
      if (!only || `nojs-${device}-${scheme}`.includes(only)) {
        const off = await browser.newContext({
          viewport, colorScheme: scheme, deviceScaleFactor: 1, isMobile: device === 'phone', javaScriptEnabled: false,
        });
        const p = await off.newPage();
        await p.goto(server.url);
        const file = path.join(OUT, `nojs-${device}-${scheme}.png`);
        const height = await p.evaluate(() => document.documentElement.scrollHeight);
        const clipH = Math.min(height, device === 'phone' ? 2400 : 1800);
        await p.screenshot({ path: file, fullPage: true, clip: { x: 0, y: 0, width: viewport.width, height: clipH } });
        console.log(`${path.relative(ROOT, file)} ${(fs.statSync(file).size / 1024).toFixed(0)} KB`);
        await off.close();
      }
    }
  }
} finally {
  await browser.close();
  await server.close();
}
