// The landing's main-thread tasks as Lighthouse's simulated mobile run counts them (observed unthrottled,
// then multiplied by its 4× CPU slowdown), from a Chrome trace: what the total-blocking-time budget is
// spent on. Serves dist/ itself (tests/e2e/harness.mjs).
//   node scripts/perf/main-thread.mjs [RUNS=3] [QUERY]      (after `trunk build --release`)
// Prints, per run, every main-thread task ≥ 16 ms (slowed) with its largest parts, the sum of
// (task − 50 ms) over the tasks after first contentful paint (Lighthouse's TBT before its network
// simulation), and the page's own marks (qe:*).
import { startServer, launch } from '../../tests/e2e/harness.mjs';

const runs = Number(process.argv[2] || 3);
const query = process.argv[3] || '';
const SLOWDOWN = 4;

function analyse(events) {
  const main = events.find((e) => e.name === 'thread_name' && e.args?.name === 'CrRendererMain');
  const onMain = events.filter((e) => main && e.pid === main.pid && e.tid === main.tid);
  const fcp = onMain.find((e) => e.name === 'firstContentfulPaint')?.ts;
  const tasks = onMain.filter((e) => e.name === 'RunTask' && e.ph === 'X' && e.dur);
  const parts = onMain.filter((e) => e.ph === 'X' && e.dur && e.name !== 'RunTask');
  const marks = events.filter((e) => e.name?.startsWith('qe:') && e.cat?.includes('user_timing'));
  const t0 = Math.min(...tasks.map((t) => t.ts));
  let tbt = 0;
  const rows = [];
  for (const t of tasks) {
    const ms = (t.dur / 1000) * SLOWDOWN;
    if (fcp && t.ts >= fcp && ms > 50) tbt += ms - 50;
    if (ms < 16) continue;
    const inside = parts.filter((p) => p.ts >= t.ts && p.ts + p.dur <= t.ts + t.dur);
    const by = new Map();
    for (const p of inside) by.set(p.name, Math.max(by.get(p.name) || 0, p.dur / 1000 * SLOWDOWN));
    const top = [...by].sort((a, b) => b[1] - a[1]).slice(0, 5).map(([n, d]) => `${n} ${d.toFixed(0)}`).join(', ');
    // The page's own marks inside the task say which step of the start it was.
    const inMarks = marks.filter((m) => m.ts >= t.ts && m.ts <= t.ts + t.dur).map((m) => m.name);
    rows.push(`  +${((t.ts - t0) / 1000).toFixed(0).padStart(5)} ms  ${ms.toFixed(0).padStart(4)} ms${fcp && t.ts >= fcp ? '' : ' (before FCP)'}  ${inMarks.length ? `[${inMarks.join(' ')}] ` : ''}${top}`);
  }
  const lcp = onMain.filter((e) => e.name === 'largestContentfulPaint::Candidate')
    .map((e) => `${((e.ts - t0) / 1000).toFixed(0)} ms (${e.args?.data?.type ?? '?'} ${e.args?.data?.size ?? ''})`);
  return { rows, tbt, fcp: fcp ? (fcp - t0) / 1000 : null, lcp };
}

const server = await startServer();
const browser = await launch();
try {
  for (let r = 1; r <= runs; r++) {
    const context = await browser.newContext({ viewport: { width: 412, height: 823 } });
    const page = await context.newPage();
    await browser.startTracing(page, { categories: ['devtools.timeline', 'disabled-by-default-devtools.timeline', 'v8', 'blink.user_timing', 'loading'] });
    await page.goto(server.url + query);
    await page.waitForFunction(() => window.qe?.firstChartMs != null, null, { timeout: 60000 });
    await page.waitForTimeout(1500);
    const trace = JSON.parse((await browser.stopTracing()).toString());
    const { rows, tbt, fcp, lcp } = analyse(trace.traceEvents);
    const marks = await page.evaluate(() => performance.getEntriesByType('mark')
      .filter((m) => m.name.startsWith('qe:')).map((m) => `${m.name} ${m.startTime.toFixed(0)}`).join(', '));
    const first = await page.evaluate(() => window.qe.firstChartMs);
    console.log(`run ${r}: FCP ${fcp?.toFixed(0)} ms (observed), first chart ${first.toFixed(0)} ms, TBT (slowed ${SLOWDOWN}×, after FCP) ${tbt.toFixed(0)} ms`);
    console.log(rows.join('\n'));
    if (marks) console.log(`  marks: ${marks}`);
    console.log(`  LCP candidates (observed): ${lcp.join(', ') || 'none'}`);
    await context.close();
  }
} finally {
  await browser.close();
  await server.close();
}
