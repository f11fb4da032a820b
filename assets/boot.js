// Loads the page. An external file rather than trunk's inline script, so the Content-Security-Policy
// can stay at script-src 'self' 'wasm-unsafe-eval'.
//
// Two wasm modules: the landing module (hero + Tested models, ≈ 220 KB gz) paints the first chart;
// the full module (every tab) is fetched when the visitor opens another tab — or first, when the
// link itself opens one. The landing hands over by calling window.qeLoadFull(tab): the full module is
// fetched and compiled while the landing stays on screen, then the landing unmounts and the full
// page starts on the same URL (every input lives in the query string).
const FULL_TABS = ['model', 'optimize', 'run', 'data'];
const boot = document.getElementById('boot');

// The page could not start: say so where the visitor looks. A pre-rendered landing stays readable
// (its verdicts and chart are static); what is lost is the interactive part.
function failed(e) {
  const msg = 'This browser could not start the interactive page (WebAssembly failed to load): ' + String(e);
  if (boot && boot.isConnected && getComputedStyle(boot).display !== 'none') {
    boot.textContent = msg;
    boot.setAttribute('role', 'alert');
  } else {
    const p = document.createElement('p');
    p.className = 'boot';
    p.setAttribute('role', 'alert');
    p.textContent = msg;
    document.body.prepend(p);
  }
}

// Give the browser a turn between the steps of the start (input, paint): Lighthouse's total
// blocking time counts every task over 50 ms, and one task doing all of it was ≈ 250 ms on a phone.
const nextTask = () => (globalThis.scheduler?.yield ? scheduler.yield() : new Promise((r) => setTimeout(r, 0)));

// The pre-rendered landing (see gate.js and src/prerender.rs). The page takes it over when it has
// painted its first chart (util::settle_prerender, the task after the chart's: no frame without one); this
// is the fallback for a view with no chart. A link to another view keeps only the (view-independent)
// skip link and hero, at once.
const html = document.documentElement;
function settlePrerender() {
  const pre = document.getElementById('prerender');
  if (pre) for (const k of [...pre.children]) if (!k.matches('.skip, header.hero')) k.remove();
  html.classList.remove('qe-pre');
}
window.qeSettle = settlePrerender; // the page calls it after its first chart (util::settle_prerender)
if (html.classList.contains('qe-deep')) settlePrerender();

let fullModule; // Promise<WebAssembly.Module>: fetched and compiled once
function compileFull() {
  fullModule ??= WebAssembly.compileStreaming(fetch(new URL('./quantenergy-web_bg.wasm', import.meta.url)));
  return fullModule;
}

let fullStarted;
async function startFull(beforeStart) {
  const [glue, module] = await Promise.all([import('./quantenergy-web.js'), compileFull()]);
  beforeStart?.();
  const wasm = await glue.default({ module_or_path: module });
  window.wasmBindings = glue;
  dispatchEvent(new CustomEvent('TrunkApplicationStarted', { detail: { wasm } }));
}

// The pre-rendered landing is the whole first screen: let the browser paint it before the landing
// module competes for the network and the CPU (a frame, or 100 ms where frames are not drawn, e.g.
// a background tab). Without a pre-render there is nothing to wait for.
const afterFirstPaint = () => (!html.classList.contains('qe-pre') ? Promise.resolve()
  : new Promise((r) => { requestAnimationFrame(() => setTimeout(r, 0)); setTimeout(r, 100); }));

async function startLanding() {
  await afterFirstPaint();
  const glue = await import('./quantenergy-landing.js');
  performance.mark('qe:glue');
  const wasm = await glue.default({ module_or_path: new URL('./quantenergy-landing_bg.wasm', import.meta.url) });
  performance.mark('qe:instantiated');
  // The start in steps, each its own task: read the embedded data, build the page (its first chart
  // draws in a task of its own, then the page takes over from the pre-render).
  await nextTask();
  glue.qe_prepare();
  performance.mark('qe:prepared');
  await nextTask();
  glue.qe_mount();
  performance.mark('qe:mounted');
  window.wasmBindings = glue;
  window.qeLoadFull = (tab) => {
    if (fullStarted) return fullStarted;
    const url = new URL(location.href);
    // Another tab starts from its own defaults; the same tab (tested is the default) keeps its inputs.
    if ((url.searchParams.get('tab') ?? 'tested') !== tab) {
      url.search = '?tab=' + encodeURIComponent(tab);
      history.replaceState(null, '', url);
    }
    // Keep the reader's place: same scroll position, focus back on the tab that was chosen.
    const y = scrollY;
    const hadFocus = document.activeElement?.closest?.('nav.tabs') != null;
    fullStarted = startFull(() => glue.qe_unmount())
      .then(() => {
        scrollTo(0, y);
        if (hadFocus) document.getElementById('tab-' + tab)?.focus();
      })
      .catch(failed);
    return fullStarted;
  };
  // A pointer on the tab bar is a good hint that another tab is next: fetch ahead.
  addEventListener('pointerover', (ev) => { if (ev.target.closest?.('nav.tabs')) compileFull().catch(() => {}); }, { passive: true });
  addEventListener('focusin', (ev) => { if (ev.target.closest?.('nav.tabs')) compileFull().catch(() => {}); });
  dispatchEvent(new CustomEvent('TrunkApplicationStarted', { detail: { wasm } }));
}

try {
  const tab = new URLSearchParams(location.search).get('tab');
  if (FULL_TABS.includes(tab)) {
    fullStarted = startFull();
    await fullStarted;
  } else {
    await startLanding();
  }
  if (boot) boot.remove();
  // The page settles itself after its first chart; this is for a view that draws none.
  setTimeout(settlePrerender, 2000);
} catch (e) {
  failed(e);
  throw e;
}
