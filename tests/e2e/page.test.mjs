// End-to-end tests of the built page (dist/) in headless Chromium.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { startServer, launch, openPage, b64url, EXAMPLES, DIST } from './harness.mjs';

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

// A chart is drawn, and the page has taken over from the pre-render (the task after the first draw).
const painted = (page, id) => page.waitForFunction(
  (id) => document.querySelector(`#${id}[data-painted="1"]`) && !document.documentElement.classList.contains('qe-pre'),
  id, { timeout: 15000 });

async function entriesText(page, n) {
  await page.waitForFunction(
    (n) => {
      const li = document.querySelectorAll('#entries > li');
      return li.length === n && [...li].every((x) => !x.textContent.includes('Checking'));
    },
    n,
    { timeout: 20000 },
  );
  return page.locator('#entries').innerText();
}

test('the page loads with no console errors and no request leaves the page', async () => {
  const { page, problems, external, context } = await openPage(browser);
  await page.goto(server.url);
  await painted(page, 'crossover-canvas');
  await page.click('#tab-model');
  await painted(page, 'model-canvas');
  await page.click('#tab-optimize');
  await painted(page, 'pareto-canvas');
  await page.click('#tab-run');
  await painted(page, 'overlay-canvas');
  await page.click('#tab-data');
  await page.waitForSelector('#how-we-measure');
  assert.deepEqual(problems, []);
  assert.deepEqual(external, []);
  await context.close();
});

test('the crossover canvas is painted (non-blank pixels)', async () => {
  const { page, context } = await openPage(browser);
  await page.goto(server.url);
  await painted(page, 'crossover-canvas');
  const stats = await page.evaluate(() => {
    const c = document.getElementById('crossover-canvas');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    const colours = new Set();
    let differ = 0;
    const [r0, g0, b0] = [d[0], d[1], d[2]];
    for (let i = 0; i < d.length; i += 4) {
      if (Math.abs(d[i] - r0) + Math.abs(d[i + 1] - g0) + Math.abs(d[i + 2] - b0) > 30) differ++;
      colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
    }
    return { differ, colours: colours.size, w: c.width, h: c.height, cssW: c.clientWidth };
  });
  assert.ok(stats.differ > 2000, `only ${stats.differ} painted pixels`);
  assert.ok(stats.colours > 20, `only ${stats.colours} colours`);
  await context.close();
});

test('HiDPI: the canvas backing store follows devicePixelRatio', async () => {
  const { page, context } = await openPage(browser, { deviceScaleFactor: 2 });
  await page.goto(server.url);
  await painted(page, 'crossover-canvas');
  const s = await page.evaluate(() => {
    const c = document.getElementById('crossover-canvas');
    return { w: c.width, css: c.getBoundingClientRect().width };
  });
  assert.ok(Math.abs(s.w - 2 * s.css) <= 2, JSON.stringify(s));
  await context.close();
});

test('choosing both upstream examples with the file input overlays two points and lists their basis', async () => {
  const { page, problems, context } = await openPage(browser);
  await page.goto(`${server.url}?tab=run`);
  await painted(page, 'overlay-canvas');
  await page.setInputFiles('#file-input', [EXAMPLES.illustrative, EXAMPLES.noGpu]);
  const text = await entriesText(page, 2);
  assert.match(text, /measured/);
  assert.match(text, /interpolated/);
  assert.match(text, /drawn on the blackwell NF4 curve/);
  // blackwell NF4: 4 published anchors + the two points.
  await page.waitForSelector('#overlay-canvas[data-marks="6"]');
  // The illustrative report's stated +11.3 % does not match its energies (+11.31 % recomputed is
  // close; any warning is shown next to the point, not as an error).
  assert.doesNotMatch(text, /error/i);
  // Each valid point has a share link and Markdown.
  assert.equal(await page.locator('#entries .share-link').count(), 2);
  assert.equal(await page.locator('#entries details.md').count(), 2);
  // Clear empties the stack.
  await page.click('#clear-all');
  await page.waitForFunction(() => document.querySelectorAll('#entries > li').length === 0);
  assert.deepEqual(problems, []);
  await context.close();
});

test('a llama-server report from the H200 is drawn on the llama.cpp curve, never a candle one, and names its stack and latency', async () => {
  const { page, problems, context } = await openPage(browser);
  await page.goto(`${server.url}?tab=run`);
  await painted(page, 'overlay-canvas');
  const report = path.join(
    path.dirname(DIST),
    'data/measurements/h200/server/llama-server/qwen2-7b-c1/qwen2-7b-llama-server-c1_Q4_K.json',
  );
  await page.setInputFiles('#file-input', [report]);
  const text = await entriesText(page, 1);
  assert.match(text, /Q4_K/);
  assert.match(text, /measured/);
  // Engines are never pooled: the point is drawn on llama.cpp's own hopper Q4_K curve (our
  // llama-server campaign), not on a candle one. That campaign measured 7.6 B too: the sixth
  // session's report (−49.2 %) sits inside the curve's band (−49.7 % there).
  assert.match(text, /drawn on the hopper Q4_K curve of llama\.cpp; inside the hopper Q4_K band: measured −49\.2 % vs curve −49\.7 % at 7\.62 B/);
  const stack = await page.locator('#entries .stack-line').innerText();
  assert.match(stack, /^Stack: llama\.cpp b0-unknown · server started by the meter, \/v1\/completions, 1 stream · TTFT p50 9\.8 ms/);
  assert.deepEqual(problems, []);
  await context.close();
});

test('reports the Python wheel wrote on the H200 (Campaign over torch.compile, FP16/BF16 and weight-only int4) are read, valid, and name their stack', async () => {
  const { page, problems, context } = await openPage(browser);
  await page.goto(`${server.url}?tab=run`);
  await painted(page, 'overlay-canvas');
  const wheel = path.join(path.dirname(DIST), 'data/measurements/h200/python-wheel/campaign-r1/Qwen2-0.5B_BF16_b1.json');
  await page.setInputFiles('#file-input', [wheel]);
  const text = await entriesText(page, 1);
  assert.match(text, /torch\.compile/);
  const valid = await page.locator('#entries .validity[data-validity="valid"]').innerText();
  assert.match(valid, /^Validity: valid/);
  // Weight-only int4 through tinygemm (session 21's Campaign): a precision of its own, measured,
  // with no curve to place it on.
  const int4 = path.join(path.dirname(DIST), 'data/measurements/h200/python-int4/campaign-r2/Qwen2-0.5B_INT4-WO_b1.json');
  await page.setInputFiles('#file-input', [int4]);
  const both = await entriesText(page, 2);
  assert.match(both, /INT4-WO/);
  assert.match(both, /−32\.6 %/);
  assert.deepEqual(problems, []);
  await context.close();
});

test('a measured report says whether its windows can be trusted: real SmolLM2 on the graph engine is valid and shows its perplexity; llama-server at one stream is host-bound', async () => {
  const { page, problems, context } = await openPage(browser);
  await page.goto(`${server.url}?tab=run`);
  await painted(page, 'overlay-canvas');
  const truth = (f) => path.join(path.dirname(DIST), 'data/measurements/h200/truth', f);
  await page.setInputFiles('#file-input', [truth('card-b/graph-real/smollm2-graph-real-r1_Q4_0.json')]);
  await entriesText(page, 1);
  const valid = await page.locator('#entries .validity[data-validity="valid"]').innerText();
  assert.match(valid, /Validity: valid: every window passes every rule \(energy window ≥ 5 s;/);
  const quality = await page.locator('#entries .quality').innerText();
  assert.match(quality, /19\.8/);
  await page.setInputFiles('#file-input', [truth('card-a/llama-real/smollm2-llama-real-r1_Q4_0.json')]);
  await entriesText(page, 2);
  const flagged = await page.locator('#entries .validity[data-validity="flagged"]').innerText();
  assert.match(flagged, /Validity: flagged \(14 flags\)/);
  assert.match(flagged, /host_bound \(Q4_0\): the GPU was busy 64\.52 % of the window/);
  assert.deepEqual(problems, []);
  await context.close();
});

test('dropping both upstream examples (synthetic drop event with DataTransfer) stacks them', async () => {
  const { page, context } = await openPage(browser);
  await page.goto(`${server.url}?tab=run`);
  await painted(page, 'overlay-canvas');
  const files = [EXAMPLES.illustrative, EXAMPLES.noGpu].map((p) => ({
    name: path.basename(p),
    text: fs.readFileSync(p, 'utf8'),
  }));
  await page.evaluate((files) => {
    const dt = new DataTransfer();
    for (const f of files) dt.items.add(new File([f.text], f.name, { type: 'application/json' }));
    const zone = document.getElementById('dropzone');
    zone.dispatchEvent(new DragEvent('dragover', { dataTransfer: dt, bubbles: true, cancelable: true }));
    zone.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
  }, files);
  const text = await entriesText(page, 2);
  assert.match(text, /upstream-measured-illustrative\.json/);
  assert.match(text, /upstream-no-gpu\.json/);
  assert.match(text, /measured/);
  assert.match(text, /interpolated/);
  await page.waitForSelector('#overlay-canvas[data-marks="6"]');
  await context.close();
});

test('a context report says its depth; a prompt-set report says what its ΔE is and is not drawn on the decode curves', async () => {
  const { page, problems, context } = await openPage(browser);
  await page.goto(`${server.url}?tab=run`);
  await painted(page, 'overlay-canvas');
  const file = path.join(
    path.dirname(DIST),
    'data/measurements/h200/engine/context-2026-12-04-s23/campaign/graph/qwen2-1.5b-graph-r1_c4096_Q4_0.json',
  );
  await page.setInputFiles('#file-input', [file]);
  await entriesText(page, 1);
  // The submission's Markdown names the workload: the decode at its depth, the prefill apart.
  assert.match(
    await page.locator('#entries pre.code').textContent(),
    /\| Workload \| context run: the decode at depth 4096 \(the prefill in a window of its own\); prefill 19\.29 mJ per prompt token/,
  );
  assert.equal(await page.locator('#entries .share-link').count(), 1);
  // The same run as a prompt set's would report it: whole requests, the prefill apart.
  const served = JSON.parse(fs.readFileSync(file, 'utf8'));
  delete served.workload.context_depth;
  served.workload.prompt_set = {
    name: 'quantenergy-prompts-v1', sha256: 'ab'.repeat(32), prompts: 10,
    prompt_tokens: 13912, output_tokens: 1984, token_counts: 'Qwen2',
  };
  served.results.requests = {
    requests: 20, passes: 2, energy_per_request_joules: 120.5, prompt_tokens: 27824,
    decode_energy_per_token_mj: 480.1, time_to_first_token_p90_ms: 410.0,
  };
  await page.click('#entries button.small');
  await page.waitForFunction(() => document.querySelectorAll('#entries > li').length === 0);
  await page.setInputFiles('#file-input', {
    name: 'prompt-set.json',
    mimeType: 'application/json',
    buffer: Buffer.from(JSON.stringify(served)),
  });
  // Valid, but no point on the decode curves: its ΔE is whole requests', prefills included.
  const text = await entriesText(page, 1);
  assert.match(text, /No point to draw\./);
  assert.doesNotMatch(text, /error/);
  assert.match(
    await page.locator('#entries pre.code').textContent(),
    /prompt set quantenergy-prompts-v1 \(10 requests, 13912 prompt and 1984 output tokens a pass\).*120\.5 J per request, decode's share 480\.1 mJ per output token \(derived\)/,
  );
  assert.equal(await page.locator('#entries .share-link').count(), 0);
  assert.deepEqual(problems, []);
  await context.close();
});

test('a malformed file shows an error naming the field', async () => {
  const { page, context } = await openPage(browser);
  await page.goto(`${server.url}?tab=run`);
  const bad = JSON.parse(fs.readFileSync(EXAMPLES.noGpu, 'utf8'));
  delete bad.workload.model_name;
  bad.results.basis = 'guessed';
  await page.setInputFiles('#file-input', {
    name: 'broken.json',
    mimeType: 'application/json',
    buffer: Buffer.from(JSON.stringify(bad)),
  });
  const text = await entriesText(page, 1);
  assert.match(text, /\$\.workload\.model_name|\$\.results\.basis/);
  assert.match(text, /not drawn/);
  await context.close();
});

test('an upstream-format overlay link draws its point', async () => {
  const { page, problems, context } = await openPage(browser);
  const payload = b64url({ m: 'TinyLlama-1.1B', N: 1.1, a: 'ada', p: 'NF4', e: 12.5, b: 'measured', g: 'RTX 4090' });
  await page.goto(`${server.url}?tab=run&overlay=${payload}`);
  const text = await entriesText(page, 1);
  assert.match(text, /TinyLlama-1\.1B/);
  assert.match(text, /\+12\.5 %/);
  assert.match(text, /drawn on the ada NF4 curve/);
  // ada NF4: 9 anchors + the linked point.
  await page.waitForSelector('#overlay-canvas[data-marks="10"]');
  assert.deepEqual(problems, []);
  await context.close();
});

test('a hostile overlay link renders as text and runs nothing', async () => {
  const { page, problems, context } = await openPage(browser);
  const model = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">';
  const payload = b64url({ m: model, N: 1.1, a: 'ada', p: 'NF4', e: 12.5, b: 'measured', g: '<b>RTX</b>' });
  await page.goto(`${server.url}?tab=run&overlay=${payload}`);
  const text = await entriesText(page, 1);
  assert.ok(text.includes(model), text);
  assert.equal(await page.locator('#entries img, #entries script, #entries b').count(), 0);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.deepEqual(problems, []);
  await context.close();
});

test('a malformed link shows a message, never a blank page', async () => {
  const { page, problems, context } = await openPage(browser);
  await page.goto(`${server.url}?tab=run&overlay=%%%25not*base64`);
  const text = await entriesText(page, 1);
  assert.match(text, /cannot be read/);
  await page.goto(`${server.url}?tab=bogus&gpu=${encodeURIComponent('<i>x</i>')}`);
  await painted(page, 'crossover-canvas');
  assert.match(await page.locator('.notice').innerText(), /does not have/);
  assert.deepEqual(problems, []);
  await context.close();
});

test('permalink round trip restores the same view', async () => {
  const { page, context } = await openPage(browser);
  await page.goto(server.url);
  await page.click('#tab-model');
  await page.fill('#params-input', '13');
  await page.dispatchEvent('#params-input', 'change');
  await page.selectOption('#precision-select', 'INT8');
  await page.selectOption('#batch-select', '4');
  await page.selectOption('#model-gpu', 'RTX 5090');
  await painted(page, 'model-canvas');
  const verdict = await page.locator('#model-verdict').innerText();
  const url = page.url();
  assert.match(url, /tab=model/);
  assert.match(url, /n=13/);
  const again = await context.newPage();
  await again.goto(url);
  await painted(again, 'model-canvas');
  assert.equal(await again.locator('#params-input').inputValue(), '13');
  assert.equal(await again.locator('#precision-select').inputValue(), 'INT8');
  assert.equal(await again.locator('#batch-select').inputValue(), '4');
  assert.equal(await again.locator('#model-gpu').inputValue(), 'RTX 5090');
  assert.equal(await again.locator('#model-verdict').innerText(), verdict);

  // Tested models keeps card and model too.
  await page.click('#tab-tested');
  await page.selectOption('#gpu-select', 'T4');
  await page.selectOption('#model-select', 'Qwen2.5-3B');
  const url2 = page.url();
  await again.goto(url2);
  await painted(again, 'crossover-canvas');
  assert.equal(await again.locator('#gpu-select').inputValue(), 'T4');
  assert.equal(await again.locator('#model-select').inputValue(), 'Qwen2.5-3B');
  await context.close();
});

test('on the H200, Tested models sets the software stacks of one model side by side on one energy axis', async () => {
  const { page, problems, context } = await openPage(browser);
  await page.goto(`${server.url}?tab=tested&gpu=H200&model=Qwen2-1.5B`);
  // This model has context runs: the landing module hands the view over to the full module,
  // which shows them; read the page once that one is up.
  await page.locator('#tested-context-runs').waitFor();
  await painted(page, 'crossover-canvas');
  // One model in the picker, however many stacks measured it.
  const options = await page.locator('#model-select option').allInnerTexts();
  assert.equal(options.filter((o) => o.startsWith('Qwen2-1.5B ')).length, 1, options.join(' | '));
  assert.ok(!options.some((o) => o.includes('[')), options.join(' | '));
  const stacks = await page.locator('.stack-grid .stack-name').allInnerTexts();
  assert.deepEqual(stacks.map((s) => s.split(' ')[0]), ['candle-graph', 'candle', 'llama.cpp']);
  const lede = await page.locator('#stacks-lede').innerText();
  assert.match(lede, /^Same card, same model, different software: \S+ changes energy per token by .*with candle-graph.*with llama\.cpp.* points apart\.$/);
  // One axis: the largest energy of all three blocks fills its track, every other bar is shorter.
  const widths = await page.locator('.stack-grid .bar-fill').evaluateAll((els) => els.map((e) => parseFloat(e.style.width)));
  assert.ok(widths.length >= 12, `${widths.length} bars`);
  assert.equal(Math.max(...widths), 100);
  assert.equal(widths.filter((w) => w === 100).length, 1, widths.join(' '));
  // A card with one stack keeps the single session view.
  await page.selectOption('#gpu-select', 'RTX 4090');
  await page.waitForFunction(() => !document.querySelector('#stacks-lede'));
  assert.equal(await page.locator('.stack-grid').count(), 0);
  assert.deepEqual(problems, []);
  await context.close();
});

test('a real model beside its synthetic twin: perplexity and cards on the bars, the ΔE differences with their intervals, and what a synthetic session may be off by', async () => {
  const { page, problems, context } = await openPage(browser);
  await page.goto(`${server.url}?tab=tested&gpu=H200&model=SmolLM2-135M-Instruct`);
  await page.waitForSelector('#synthetic-table');
  // Two engines × Q8_0, Q4_K, Q4_0, each the difference of the two ΔE with its Welch interval.
  const rows = await page.locator('#synthetic-table tbody tr').allInnerTexts();
  assert.equal(rows.length, 6, rows.join('\n'));
  assert.ok(rows.every((r) => /([+-]\d+\.\d ± \d+\.\d points, measured|not measurable \([+-]\d+\.\d ± \d+\.\d points\))/.test(r)), rows.join('\n'));
  assert.ok(rows.some((r) => r.includes('not measurable')), rows.join('\n'));
  // The graph engine scored perplexity: the real rows show it beside their energy.
  assert.ok(rows.some((r) => /\d+\.\d\d \(\+9\d %\)/.test(r)), rows.join('\n'));
  const meta = await page.locator('.bar-meta .meta-line').allInnerTexts();
  assert.ok(meta.some((m) => /^1 card · PPL \d+\.\d\d/.test(m)), meta.join(' | '));
  // A synthetic-weights session of another model on the same card and engine says what it may be off by.
  await page.selectOption('#model-select', 'Qwen2-7B');
  await page.waitForSelector('.synthetic-note');
  const notes = await page.locator('.synthetic-note').allInnerTexts();
  assert.ok(notes.some((n) => n.startsWith('Synthetic weights') && n.includes('SmolLM2-135M-Instruct')), notes.join(' | '));
  assert.equal(await page.locator('#synthetic-card').count(), 0);
  assert.deepEqual(problems, []);
  await context.close();
});

test('the stack picker of Your model changes the estimate, and the permalink carries it', async () => {
  const { page, problems, context } = await openPage(browser);
  await page.goto(`${server.url}?tab=model&gpu=H200&n=1.5437&p=Q4_K`);
  await painted(page, 'model-canvas');
  const opts = await page.locator('#stack-select option').allInnerTexts();
  assert.deepEqual(opts, ['candle-graph (default)', 'candle', 'llama.cpp']);
  const graph = await page.locator('#model-result').innerText();
  await page.selectOption('#stack-select', 'llama.cpp');
  await page.waitForFunction((before) => document.querySelector('#model-result').innerText !== before, graph);
  const llama = await page.locator('#model-result').innerText();
  assert.match(llama, /llama\.cpp/);
  assert.match(page.url(), /stack=llama\.cpp/);
  // The link restores the stack and the same estimate.
  const again = await context.newPage();
  await again.goto(page.url());
  await painted(again, 'model-canvas');
  assert.equal(await again.locator('#stack-select').inputValue(), 'llama.cpp');
  assert.equal(await again.locator('#model-result').innerText(), llama);
  // A stack the card lacks is not asked for: no picker, no stack in the link.
  await page.selectOption('#model-gpu', 'RTX 4090');
  await page.waitForFunction(() => !document.querySelector('#stack-select'));
  assert.doesNotMatch(page.url(), /stack=/);
  assert.deepEqual(problems, []);
  await context.close();
});

test('the optimizer searches every stack of the H200 and says which one its recommendation assumes', async () => {
  const { page, problems, context } = await openPage(browser);
  await page.goto(`${server.url}?tab=optimize&gpu=H200&model=Qwen2-1.5B`);
  await painted(page, 'pareto-canvas');
  assert.match(await page.locator('#opt-stack-used').innerText(), /stacks searched: candle-graph, candle, llama\.cpp/);
  await page.selectOption('#opt-stack', 'llama.cpp');
  await page.waitForFunction(() => /Assumes the llama\.cpp stack/.test(document.querySelector('#opt-stack-used')?.innerText ?? ''));
  assert.match(await page.locator('#opt-choice').innerText(), /^llama\.cpp · /);
  assert.match(page.url(), /stack=llama\.cpp/);
  assert.deepEqual(problems, []);
  await context.close();
});

test('the H200 batch sweeps: Tested models links to them, Optimize shows where batching turns a saving into a cost', async () => {
  const { page, problems, context } = await openPage(browser);
  await page.goto(`${server.url}?tab=tested&gpu=H200&model=Qwen2-7B`);
  const link = page.locator('#batched-note a');
  assert.match(await link.getAttribute('href'), /tab=optimize&gpu=H200#batch-sweeps/);
  // The picked model was swept: its energy card says the batch-1 verdicts can change.
  assert.match(await page.locator('#swept-note a').getAttribute('href'), /tab=optimize&gpu=H200#batch-sweeps/);
  await link.click();
  const card = page.locator('#batch-sweeps');
  await card.waitFor();
  assert.match(await page.locator('#opt-stack-used').innerText(), /its measured batch sweep below/);
  // One table per swept model and session: the graph engine's 1.5 B and 7 B, the eager one's 1.5 B,
  // llama-server's 7 B, whose batch is the number of streams and whose thin rows say their n.
  assert.equal(await card.locator('.sweep').count(), 4);
  const llama = card.locator('.sweep').nth(3);
  assert.equal(await llama.locator('thead th').first().innerText(), 'streams');
  assert.deepEqual(await llama.locator('tbody th').allInnerTexts(), ['1', '8', '32']);
  // Three runs a side at every streams count now: no n mark. The interval is paired (each run's
  // own ΔE): at 8 streams +2.5 % [−2.8, +7.8] has no direction, at 32 streams −12.3 % is a saving.
  const [s8, s32] = [llama.locator('tbody tr').nth(1), llama.locator('tbody tr').nth(2)];
  assert.match(await s32.innerText(), /984 tok\/s/);
  assert.doesNotMatch(await s32.innerText(), /n = /);
  assert.equal(await s8.locator('.delta.good, .delta.bad').count(), 0);
  assert.equal(await s32.locator('.delta.good').count(), 1);
  assert.match(await llama.locator('.sweep-lede').innerText(), /at 8 streams/);
  const ledes = await card.locator('.sweep-lede').allInnerTexts();
  assert.deepEqual(ledes.slice(0, 2), [
    'Q4_K saves 27 % at batch 1 but costs 37 % more at batch 4',
    'Q4_K saves 38 % at batch 1 but costs 18 % more at batch 4',
  ]);
  // The 7 B table: batches 1, 4, 16, 64; at batch 4 Q4_K costs more (red), at batch 1 it saves (green).
  const rows = card.locator('.sweep').nth(1).locator('tbody tr');
  assert.equal(await rows.count(), 4);
  assert.deepEqual(await rows.locator('th').allInnerTexts(), ['1', '4', '16', '64']);
  assert.match(await rows.nth(1).locator('.delta').innerText(), /^\+17\.9 %/);
  assert.equal(await rows.nth(1).locator('.delta.bad').count(), 1);
  assert.equal(await rows.nth(0).locator('.delta.good').count(), 1);
  assert.match(await rows.nth(3).innerText(), /6742 tok\/s/);
  // A card without a batch sweep shows no such card, and the recommendation does not point to one.
  await page.selectOption('#opt-gpu', 'RTX 4090');
  await page.waitForFunction(() => !document.querySelector('#batch-sweeps'));
  assert.match(await page.locator('#opt-stack-used').innerText(), /see How these figures are made$/);
  // A model never swept on its card gets no note.
  await page.goto(`${server.url}?tab=tested&gpu=H200&model=Qwen2.5-3B`);
  await page.locator('#batched-note').waitFor();
  assert.equal(await page.locator('#swept-note').count(), 0);
  assert.deepEqual(problems, []);
  await context.close();
});

test('a 50 MB file is refused from its size, without freezing the page', async () => {
  const { page, context } = await openPage(browser);
  await page.goto(`${server.url}?tab=run`);
  const big = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'qe-')), 'huge.json');
  fs.writeFileSync(big, Buffer.alloc(50 * 1024 * 1024, 0x20));
  const t0 = Date.now();
  await page.setInputFiles('#file-input', big);
  const text = await entriesText(page, 1);
  const ms = Date.now() - t0;
  assert.match(text, /at most 8 MiB/);
  // Still responsive: a round trip through the page's event loop is quick.
  const rt = await page.evaluate(() => new Promise((r) => { const t = performance.now(); setTimeout(() => r(performance.now() - t), 0); }));
  assert.ok(rt < 200, `event loop blocked ${rt} ms`);
  console.log(`50 MB file: refused in ${ms} ms (incl. upload to the browser), event loop ${rt.toFixed(1)} ms`);
  fs.rmSync(path.dirname(big), { recursive: true });
  await context.close();
});

test('timing: first chart painted, refit, 1000-point redraw (printed)', async () => {
  const { page, context } = await openPage(browser);
  await page.goto(server.url);
  await painted(page, 'crossover-canvas');
  const first = await page.evaluate(() => window.qe && window.qe.firstChartMs);
  console.log(`first chart painted: ${first.toFixed(0)} ms after navigation start`);
  assert.ok(first > 0 && first < 3000, `first chart at ${first} ms`);
  // The timing hooks live in the full page module: open a tab that loads it.
  await page.goto(`${server.url}?tab=data`);
  await page.waitForFunction(() => window.wasmBindings && window.wasmBindings.qe_bench_refit);
  const refit = await page.evaluate(() => window.wasmBindings.qe_bench_refit(0, 20));
  const refitUser = await page.evaluate(() => window.wasmBindings.qe_bench_refit(10, 20));
  const redraw = await page.evaluate(() => window.wasmBindings.qe_bench_redraw(1000, 5));
  console.log(`refit all classes: ${refit.toFixed(2)} ms (with 10 user points ${refitUser.toFixed(2)} ms)`);
  console.log(`1000 overlaid points redraw: ${redraw.toFixed(1)} ms`);
  assert.ok(refit < 50, `refit ${refit} ms`);
  assert.ok(redraw < 500, `redraw ${redraw} ms`);
  await context.close();
});

test('served from a sub-path (GitHub Pages /<repo>/), the page and its worker load', async () => {
  const sub = await startServer({ prefix: '/quantenergy/', rebase: true });
  const { page, problems, context } = await openPage(browser);
  try {
    // The landing module, then the hand-over to the full module, under the sub-path.
    await page.goto(sub.url);
    await painted(page, 'crossover-canvas');
    await page.click('#tab-model');
    await painted(page, 'model-canvas');
    await page.goto(`${sub.url}?tab=run`);
    await painted(page, 'overlay-canvas');
    await page.setInputFiles('#file-input', [EXAMPLES.noGpu]);
    const text = await entriesText(page, 1);
    assert.match(text, /interpolated/);
    const link = await page.locator('.share-link').first().inputValue();
    assert.ok(link.startsWith(`${sub.url}?tab=run&overlay=`), link);
    assert.deepEqual(sub.requests.filter((p) => !p.startsWith('/quantenergy/')), []);
    assert.deepEqual(page.workers().map((w) => new URL(w.url()).pathname), ['/quantenergy/worker.js']);
    assert.deepEqual(problems, []);
  } finally {
    await context.close();
    await sub.close();
  }
});

test('data downloads (CSV and JSON) and the estimate energy.json come out of the page', async () => {
  const { page, problems, context } = await openPage(browser, { acceptDownloads: true });
  await page.goto(`${server.url}?tab=data`);
  for (const [id, name, check] of [
    ['#dl-csv', 'quantenergy-anchors.csv', (t) => t.startsWith('gpu,gpu_arch,model,params_b')],
    ['#dl-json', 'quantenergy-dataset.json', (t) => JSON.parse(t).anchors.length > 100],
  ]) {
    const [dl] = await Promise.all([page.waitForEvent('download'), page.click(id)]);
    assert.equal(dl.suggestedFilename(), name);
    const text = fs.readFileSync(await dl.path(), 'utf8');
    assert.ok(check(text), `${name}: ${text.slice(0, 80)}`);
  }
  await page.goto(`${server.url}?tab=model&n=13&gpu=H100&p=NF4`);
  await page.click('#report-details summary');
  await page.waitForFunction(() => document.querySelector('#report-json').textContent.includes('schema_version'));
  const report = JSON.parse(await page.locator('#report-json').textContent());
  assert.equal(report.schema_version, 'quantenergy/1.2');
  assert.notEqual(report.results.basis, 'measured');
  assert.equal(report.workload.params_b, 13);
  assert.deepEqual(problems, []);
  await context.close();
});

test('copy decision brief and copy permalink put the verdicts and the current link on the clipboard', async () => {
  const { page, problems, context } = await openPage(browser);
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url.replace(/\/$/, '') });
  await page.goto(`${server.url}?tab=tested&gpu=RTX%204090&model=Qwen2-7B`);
  await painted(page, 'crossover-canvas');
  await page.click('#copy-brief');
  await page.waitForFunction(() => document.querySelector('#copy-brief').textContent.includes('Copied'));
  const brief = await page.evaluate(() => navigator.clipboard.readText());
  assert.match(brief, /NF4 saves 28 % here/);
  assert.match(brief, /n = 1/);
  assert.match(brief, /Permalink: http/);
  await page.click('#copy-permalink');
  await page.waitForFunction(() => document.querySelector('#copy-permalink').textContent.includes('Copied'));
  const link = await page.evaluate(() => navigator.clipboard.readText());
  assert.equal(link, page.url());
  assert.deepEqual(problems, []);
  await context.close();
});

test('the Optimize tab opens from a permalink: recommendation, tagged tiles, painted Pareto chart', async () => {
  const { page, problems, context } = await openPage(browser);
  await page.goto(`${server.url}?tab=optimize&gpu=H200&model=Qwen2-1.5B&objective=min-energy&ctx=2048`);
  await painted(page, 'pareto-canvas');
  assert.equal(await page.locator('#tab-optimize').getAttribute('aria-current'), 'page');
  assert.equal(await page.locator('#opt-gpu').inputValue(), 'H200');
  assert.equal(await page.locator('#opt-model').inputValue(), 'Qwen2-1.5B');
  assert.equal(await page.locator('#opt-context').inputValue(), '2048');
  assert.match(await page.locator('#opt-choice').innerText(), /batch \d+ · ctx 2048/);
  assert.equal(await page.locator('#opt-recommendation .tiles .tchip').count(), 8);
  const front = Number(await page.locator('#pareto-table').getAttribute('data-points'));
  assert.ok(front >= 3, `frontier of ${front}`);
  // frontier markers + the ★ are the chart's marks; the canvas has real pixels.
  assert.equal(Number(await page.locator('#pareto-canvas').getAttribute('data-marks')), front + 1);
  const differ = await page.evaluate(() => {
    const c = document.getElementById('pareto-canvas');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if (Math.abs(d[i] - d[0]) + Math.abs(d[i + 1] - d[1]) + Math.abs(d[i + 2] - d[2]) > 30) n++;
    return n;
  });
  assert.ok(differ > 2000, `only ${differ} painted pixels`);
  // Keyboard focus shows a text tooltip of a configuration.
  await page.focus('#pareto-canvas');
  assert.match(await page.locator('.chart-wrap .tooltip').first().innerText(), /batch \d+ · ctx 2048[\s\S]*J\/1k tokens/);
  assert.ok(await page.locator('#alt-table tbody tr').count() >= 3);
  // Changing an input keeps the permalink current.
  await page.selectOption('#opt-objective', 'max-throughput');
  await page.waitForFunction(() => location.search.includes('objective=max-throughput'));
  assert.deepEqual(problems, []);
  await context.close();
});

test('an impossible budget shows the least-violating configuration and the budget it breaks', async () => {
  const { page, problems, context } = await openPage(browser);
  await page.goto(`${server.url}?tab=optimize&gpu=RTX%204090&model=Qwen2-7B&objective=min-energy&max_ms=1`);
  const callout = page.locator('#least-violating');
  await callout.waitFor();
  const text = await callout.innerText();
  assert.match(text, /No configuration meets your budgets/);
  assert.match(text, /Closest: \S+ · \S+ · batch \d+ · ctx \d+/);
  assert.match(text, /breaks latency budget: [\d.]+ ms\/token \(modelled\) vs limit 1 ms\/token — [\d.]+ % over it/);
  assert.equal(await page.locator('#opt-recommendation').count(), 0);
  assert.deepEqual(problems, []);
  await context.close();
});

test('the H200 context runs: ΔE along the context per stack, the context model beside it with its error', async () => {
  const { page, problems, context } = await openPage(browser);
  await page.goto(`${server.url}?tab=optimize&gpu=H200&model=Qwen2-1.5B`);
  const card = page.locator('#context-runs');
  await card.waitFor();
  // Three stacks of Qwen2-1.5B Q4_0: the graph engine (its short-prompt anchor; 1 k and 16 k in
  // three runs of one session, 4 k in three runs of another), llama-server (1 k and 16 k) and
  // llama-server with a q8_0 KV cache (4 k and 16 k), three runs each.
  assert.equal(await card.locator('.sweep').count(), 3);
  const graph = card.locator('.sweep').nth(0);
  assert.deepEqual(await graph.locator('tbody th').allInnerTexts(), ['16 (anchor)', '1024', '4096', '16384']);
  assert.deepEqual(await graph.locator('tbody td:nth-child(2)').allInnerTexts(), ['3', '3', '3', '3']);
  // The anchor is what the model is fitted to. 4 k: −30.2 % ± 3 (3.1), model −29.1 %. 16 k:
  // −25.6 % ± 3 (2.6), model −24.2 %, prefill 43.0 vs 17.0 mJ a prompt token (+152 %).
  assert.equal(await graph.locator('tbody tr').nth(0).locator('td').nth(3).innerText(), 'fitted');
  const mid = graph.locator('tbody tr').nth(2);
  assert.match(await mid.locator('.delta').innerText(), /^−30\.2 %/);
  assert.match(await mid.innerText(), /−30\.2 % ±3\s/);
  assert.match(await mid.innerText(), /−29\.1 %\t\+1\.1/);
  const deep = graph.locator('tbody tr').nth(3);
  assert.match(await deep.locator('.delta').innerText(), /^−25\.6 %/);
  assert.match(await deep.innerText(), /−25\.6 % ±3\s/);
  assert.match(await deep.innerText(), /−24\.2 %\t\+1\.4/);
  assert.match(await deep.innerText(), /43\.0 vs 17\.0/);
  assert.match(await graph.locator('.sweep-lede').innerText(), /off by at most 1\.4 points/);
  const kv = card.locator('.sweep').nth(2);
  assert.match(await kv.locator('.stack-name').innerText(), /KV cache q8_0/);
  assert.match(await kv.innerText(), /knows nothing of this stack's quantized one/);
  // The optimizer reads the measured point where there is one: the graph engine at 4 096 tokens.
  await page.goto(`${server.url}?tab=optimize&gpu=H200&model=Qwen2-1.5B&objective=min-energy&ctx=4096&stack=candle-graph`);
  await page.locator('#opt-notes').waitFor();
  assert.match(await page.locator('#opt-notes').textContent(), /at 4096 tokens on this card the batch-1 energies/);
  // A card without context runs shows no such card.
  await page.selectOption('#opt-gpu', 'RTX 4090');
  await page.waitForFunction(() => !document.querySelector('#context-runs'));
  assert.deepEqual(problems, []);
  await context.close();
});

test('the Tested tab shows the picked model\'s context runs, and none for a model without them', async () => {
  const { page, problems, context } = await openPage(browser);
  await page.goto(`${server.url}?tab=tested&gpu=H200&model=Qwen2-1.5B`);
  const card = page.locator('#tested-context-runs');
  await card.waitFor();
  assert.match(await card.locator('.card-title').textContent(), /^Qwen2-1\.5B on the H200: ΔE along the context, measured/);
  // The same three stacks as the Optimize tab's card, and only this model's.
  assert.equal(await card.locator('.sweep').count(), 3);
  assert.deepEqual(await card.locator('.sweep').nth(0).locator('tbody th').allInnerTexts(), ['16 (anchor)', '1024', '4096', '16384']);
  // llama-server at 1 k: (459.25 − 1026.20) / 1026.20 = −55.2 %.
  assert.match(await card.locator('.sweep').nth(1).innerText(), /−55\.2 %/);
  // Qwen2-7B has no context runs on this card: no card.
  await page.selectOption('#model-select', 'Qwen2-7B');
  await page.waitForFunction(() => !document.querySelector('#tested-context-runs'));
  assert.deepEqual(problems, []);
  await context.close();
});

test('first load and whole app stay within their gzip budgets', async () => {
  const gz = (rel) => zlib.gzipSync(fs.readFileSync(path.join(DIST, rel)), { level: 9 }).length;
  const { page, context } = await openPage(browser);
  const fetched = [];
  page.on('request', (r) => fetched.push(new URL(r.url()).pathname.replace(/^\//, '') || 'index.html'));
  await page.goto(server.url);
  await painted(page, 'crossover-canvas');
  const beforePaint = [...new Set(fetched)];
  // Nothing of the full page module is fetched for the landing view.
  assert.ok(!beforePaint.some((f) => f.startsWith('quantenergy-web')), beforePaint.join(', '));
  const first = beforePaint.reduce((t, f) => t + gz(f), 0);
  const all = fs.readdirSync(DIST).reduce((t, f) => t + gz(f), 0);
  console.log(`first load ${first} B gz (${beforePaint.join(' + ')}); whole app ${all} B gz`);
  assert.ok(first <= 250_000, `first load ${first} B gz > 250 KB`);
  // 725 KB since the H200 has three software stacks (issue 15): their rows, the estimate's and
  // the optimizer's engine dimension and the stacks views took the whole app from 685 to ≈ 712 KB
  // (docs/MEASUREMENTS.md, 2026-12-01 tenth session), the measured batch sweeps on Optimize and
  // the optimizer's batch corrections to ≈ 720.5 KB (eleventh session). Only the full module grew;
  // the first load, what a visitor waits for, keeps its 250 KB. 750 KB since reports carry context
  // runs (workload.context_depth, results.prefill: 726.9 KB at d4a7538), the bound the long-context
  // work was given; the first load's 250 KB stays. The context card (rendered at build time into
  // index.html) took it to 752.1 KB; the two modules then stopped embedding data/anchors.csv each and
  // read the one copy index.html carries: 743.4 KB, first load 235.0 KB. Prompt-set reports and
  // the Tested tab's context card took it to 749,997 B (the landing module hands a view with
  // context runs to the full module rather than carry the card).
  assert.ok(all <= 750_000, `whole app ${all} B gz > 750 KB`);
  // Opening another tab hands the page over to the full module, on the same URL, without errors.
  await page.click('#tab-optimize');
  await painted(page, 'pareto-canvas');
  assert.match(page.url(), /tab=optimize/);
  assert.equal(await page.locator('nav.tabs').count(), 1, 'one page, not two');
  await context.close();
});

test('reports are checked in a Web Worker that is the full module itself (printed: a 7.9 MB report)', async () => {
  const { page, problems, context } = await openPage(browser);
  await page.goto(`${server.url}?tab=run`);
  await page.waitForSelector('#file-input');
  await page.evaluate(() => {
    window.maxGap = 0;
    let last = performance.now();
    setInterval(() => { const t = performance.now(); window.maxGap = Math.max(window.maxGap, t - last); last = t; }, 10);
  });
  const rep = JSON.parse(fs.readFileSync(EXAMPLES.noGpu, 'utf8'));
  rep.padding = Array.from({ length: 65000 }, (_, i) => ({ i, note: 'x'.repeat(100) }));
  const big = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'qe-')), 'big.json');
  fs.writeFileSync(big, JSON.stringify(rep));
  const t0 = Date.now();
  await page.setInputFiles('#file-input', big);
  const text = await entriesText(page, 1);
  const ms = Date.now() - t0;
  assert.match(text, /TinyLlama/);
  const workers = page.workers().map((w) => new URL(w.url()).pathname);
  assert.deepEqual(workers, ['/worker.js']);
  const gap = await page.evaluate(() => window.maxGap);
  console.log(`${(fs.statSync(big).size / 1e6).toFixed(1)} MB report checked in ${ms} ms; longest main-thread gap ${gap.toFixed(0)} ms`);
  assert.deepEqual(problems, []);
  fs.rmSync(path.dirname(big), { recursive: true });
  await context.close();
});
