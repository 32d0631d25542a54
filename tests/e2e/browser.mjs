// What the end-to-end tests share: where screenshots go, which Chromium runs, its flags, and a
// launch that records the page's console for failure messages. Not a test file itself.
import { chromium } from 'playwright-core';

export const OUT = process.env.E2E_OUT ?? 'target/e2e';
export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
export const FLAGS = [
  '--no-sandbox',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-quic',
  '--no-first-run',
  '--disable-dev-shm-usage',
  '--autoplay-policy=no-user-gesture-required',
];

/**
 * Headless Chromium with WebGPU on (SwiftShader without a GPU) or off, and one page at `url`;
 * `init` (a function) runs in the page before its own scripts.
 */
export async function launch({ webgpu, url, viewport = { width: 1280, height: 800 }, init = null }) {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: webgpu ? [...FLAGS, '--enable-unsafe-webgpu'] : [...FLAGS, '--disable-webgpu'],
  });
  const page = await browser.newPage({ viewport });
  const log = [];
  page.on('console', (m) => log.push(`[${m.type()}] ${m.text()}`));
  page.on('pageerror', (e) => log.push(`[pageerror] ${e.message}`));
  // Anything the Content-Security-Policy blocked, for cspViolations().
  await page.addInitScript(() => {
    window.__cspViolations = [];
    document.addEventListener('securitypolicyviolation', (e) =>
      window.__cspViolations.push(`${e.violatedDirective} blocked ${e.blockedURI || 'inline'}`),
    );
  });
  // A test's own stand-ins (e.g. a fake MIDI keyboard), installed before the page's scripts.
  if (init) await page.addInitScript(init);
  await page.goto(url);
  return { browser, page, log };
}

/** What the page's Content-Security-Policy blocked so far, from events and console messages. */
export async function cspViolations(page, log) {
  const events = await page.evaluate(() => window.__cspViolations ?? []);
  return [...events, ...log.filter((l) => l.includes('Content Security Policy'))];
}

/**
 * What every end-to-end file does first: checks pkg/ and Chromium exist, makes the screenshot
 * folder, and serves the page on a free loopback port. Returns {server, base}; with
 * `wasm: true` also the wasm module, loaded in Node (the project's own MIDI writer).
 */
export async function serveApp({ wasm = false } = {}) {
  const { existsSync, mkdirSync, readFileSync } = await import('node:fs');
  const { startServer } = await import('../../tools/serve.mjs');
  if (!existsSync('pkg/pianoformer_bg.wasm')) throw new Error('pkg/ is missing: run `make wasm` first');
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: run \`make setup\``);
  mkdirSync(OUT, { recursive: true });
  let module = null;
  if (wasm) {
    module = await import('../../pkg/pianoformer.js');
    module.initSync({ module: readFileSync('pkg/pianoformer_bg.wasm') });
  }
  const server = await startServer({ port: 0, quiet: true });
  return { server, base: `http://127.0.0.1:${server.address().port}/`, wasm: module };
}

/**
 * Drops `bytes` on the page as a file named `name` (a person dragging it in) and waits until
 * the page shows it as the piece.
 */
export async function dropFile(page, bytes, name) {
  await page.evaluate(
    ({ data, name }) => {
      const dt = new DataTransfer();
      dt.items.add(new File([new Uint8Array(data)], name, { type: 'audio/midi' }));
      for (const type of ['dragenter', 'dragover', 'drop']) {
        document.querySelector('main').dispatchEvent(new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true }));
      }
    },
    { data: [...bytes], name },
  );
  await page.waitForFunction((name) => window.pianoformer.piece?.name === name, name, { timeout: 60_000 });
}

/**
 * Presses Generate and waits for the generation it starts: its record in the page's status
 * (`window.pianoformer.generations`: task, ms, notes, …), or an error naming `what` when the
 * page showed one instead.
 */
export async function generateOnce(page, { timeout, what = 'generation' }) {
  const n = await page.evaluate(() => window.pianoformer.generations.length);
  await page.click('#generate');
  await page.waitForFunction(
    (n) => window.pianoformer.generations.length > n || !document.getElementById('error').hidden,
    n,
    { timeout },
  );
  const g = await page.evaluate(() => window.pianoformer.generations.at(-1) ?? { error: window.pianoformer.error });
  if (g.error || !g.ms) throw new Error(`${what} failed: ${g.error ?? 'no generation'}`);
  return g;
}
