// Loads the page's wasm module. An external file rather than trunk's inline script, so the
// Content-Security-Policy can stay at script-src 'self' 'wasm-unsafe-eval'.
import init, * as bindings from './quantenergy-web.js';

const boot = document.getElementById('boot');
try {
  const wasm = await init({ module_or_path: new URL('./quantenergy-web_bg.wasm', import.meta.url) });
  window.wasmBindings = bindings;
  if (boot) boot.remove();
  dispatchEvent(new CustomEvent('TrunkApplicationStarted', { detail: { wasm } }));
} catch (e) {
  if (boot) {
    boot.textContent = 'This browser could not start the page (WebAssembly failed to load): ' + String(e);
  }
  throw e;
}
