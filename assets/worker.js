// The report-checking Web Worker: the full page module again (the browser already has it). Its
// `main` finds no window and answers the page's requests instead of mounting (web::validate).
import init from './quantenergy-web.js';

await init({ module_or_path: new URL('./quantenergy-web_bg.wasm', import.meta.url) });
