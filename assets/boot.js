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

// The pre-rendered landing (see gate.js and src/prerender.rs). The page takes it over when it has
// painted its first chart (util::settle_prerender, in the same task: no frame without a chart); this
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

async function startLanding() {
  const glue = await import('./quantenergy-landing.js');
  const wasm = await glue.default({ module_or_path: new URL('./quantenergy-landing_bg.wasm', import.meta.url) });
  window.wasmBindings = glue;
  window.qeLoadFull = (tab) => {
    if (fullStarted) return fullStarted;
    const url = new URL(location.href);
    if (url.searchParams.get('tab') !== tab) {
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
  requestAnimationFrame(settlePrerender);
} catch (e) {
  failed(e);
  throw e;
}
