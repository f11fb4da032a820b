#!/usr/bin/env node
// Summarise Lighthouse JSON reports: node summarize.mjs OUT_DIR LABEL MODE...
// Reads OUT_DIR/MODE-run*.report.json for each MODE, writes OUT_DIR/summary.json and summary.md.
// Each metric is the median of the runs on its own (not Lighthouse's single "median run"), and
// every run's score is listed too, so the spread stays visible.
import fs from 'node:fs';
import path from 'node:path';

const [outDir, label, ...modes] = process.argv.slice(2);
const median = (xs) => {
  const s = xs.filter((x) => typeof x === 'number').sort((a, b) => a - b);
  if (!s.length) return null;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
// LH 13 moved the LCP element into the lcp-breakdown insight; older versions had its own audit.
function lcpElement(audits) {
  for (const id of ['lcp-breakdown-insight', 'largest-contentful-paint-element']) {
    const stack = [audits[id]?.details];
    while (stack.length) {
      const d = stack.pop();
      if (!d || typeof d !== 'object') continue;
      if (d.type === 'node') return `${d.nodeLabel || ''} <${d.selector || ''}>`.trim();
      stack.push(...Object.values(d));
    }
  }
  return null;
}

const summary = { label, lighthouseVersion: null, userAgent: null, modes: {} };
for (const mode of modes) {
  const files = fs.readdirSync(outDir).filter((f) => f.startsWith(mode + '-run') && f.endsWith('.report.json')).sort();
  const runs = files.map((f) => {
    const r = JSON.parse(fs.readFileSync(path.join(outDir, f), 'utf8'));
    summary.lighthouseVersion = r.lighthouseVersion;
    summary.userAgent = r.environment?.hostUserAgent;
    const a = r.audits, nv = (id) => a[id]?.numericValue ?? null;
    return {
      file: f, runtimeError: r.runtimeError?.code ?? null, warnings: r.runWarnings,
      performance: r.categories.performance?.score ?? null,
      accessibility: r.categories.accessibility?.score ?? null,
      lcp_ms: nv('largest-contentful-paint'), fcp_ms: nv('first-contentful-paint'),
      tbt_ms: nv('total-blocking-time'), cls: nv('cumulative-layout-shift'), si_ms: nv('speed-index'),
      total_bytes: nv('total-byte-weight'), lcp_element: lcpElement(a),
      benchmarkIndex: r.environment?.benchmarkIndex ?? null,
    };
  });
  const med = (k) => median(runs.map((x) => x[k]));
  summary.modes[mode] = {
    runs: runs.length,
    median: {
      performance: med('performance'), lcp_ms: med('lcp_ms'), fcp_ms: med('fcp_ms'), tbt_ms: med('tbt_ms'),
      cls: med('cls'), si_ms: med('si_ms'), accessibility: med('accessibility'), total_bytes: med('total_bytes'),
      benchmarkIndex: med('benchmarkIndex'),
    },
    lcp_elements: [...new Set(runs.map((x) => x.lcp_element))],
    per_run: runs,
  };
}
fs.writeFileSync(path.join(outDir, 'summary.json'), JSON.stringify(summary, null, 2) + '\n');

const s = (ms) => (ms == null ? '—' : (ms / 1000).toFixed(2) + ' s');
const lines = [
  `### ${label} — Lighthouse ${summary.lighthouseVersion}, mobile preset (simulated slow 4G, 4× CPU), medians`,
  '',
  '| mode | runs | perf (each run) | LCP | FCP | TBT | CLS | SI | a11y | transfer | LCP element |',
  '|---|---|---|---|---|---|---|---|---|---|---|',
];
for (const [mode, m] of Object.entries(summary.modes)) {
  const d = m.median;
  const each = m.per_run.map((x) => x.performance?.toFixed(2) ?? 'err').join('/');
  lines.push(`| ${mode} | ${m.runs} | **${d.performance?.toFixed(2)}** (${each}) | ${s(d.lcp_ms)} | ${s(d.fcp_ms)} | ` +
    `${d.tbt_ms == null ? '—' : Math.round(d.tbt_ms) + ' ms'} | ${d.cls?.toFixed(3)} | ${s(d.si_ms)} | ` +
    `${d.accessibility?.toFixed(2)} | ${d.total_bytes == null ? '—' : (d.total_bytes / 1024).toFixed(0) + ' KiB'} | ` +
    `${m.lcp_elements.map((e) => '`' + String(e).replace(/\|/g, '\\|').slice(0, 80) + '`').join(', ')} |`);
}
fs.writeFileSync(path.join(outDir, 'summary.md'), lines.join('\n') + '\n');
console.log(lines.join('\n'));
