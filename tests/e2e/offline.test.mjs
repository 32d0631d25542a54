// End-to-end: the app offline. A first visit (CPU) keeps everything through the service worker
// (sw.js); then the server is shut down — not emulated: nothing answers on the port — and the
// page reloads, restores the piece, accompanies it with the default model, plays it, and opens
// again by another address. Needs pkg/ (make wasm), the samples (make samples) and Chromium (make setup).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { OUT, cspViolations, launch, serveApp } from './browser.mjs';

let server;
let base;
let song;
let serving = false;

before(async () => {
  let wasm;
  ({ server, base, wasm } = await serveApp({ wasm: true }));
  serving = true;
  song = wasm.exampleMidi(7, 4);
});

after(() => {
  if (serving) server.close();
});

async function settle(page, log) {
  await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: 180_000 });
  const s = await page.evaluate(() => ({ state: window.pianoformer.state, error: window.pianoformer.error }));
  assert.equal(s.state, 'ready', `${s.error}\n${log.join('\n')}`);
}

async function accompany(page) {
  const n = await page.evaluate(() => window.pianoformer.generations.length);
  await page.selectOption('#task', 'accompaniment');
  await page.click('#generate');
  await page.waitForFunction(
    (n) => window.pianoformer.generations.length > n || !document.getElementById('error').hidden,
    n,
    { timeout: 300_000 },
  );
  const error = await page.evaluate(() => (document.getElementById('error').hidden ? null : window.pianoformer.error));
  assert.equal(error, null);
  return page.evaluate(() => window.pianoformer.generations.at(-1));
}

test('after one visit the page works with the server gone', { timeout: 900_000 }, async () => {
  const { browser, page, log } = await launch({ webgpu: false, url: `${base}?backend=cpu` });
  try {
    await settle(page, log);
    await page.waitForFunction(() => window.pianoformer.offline === 'ready', null, { timeout: 300_000 })
      .catch(async (e) => {
        throw new Error(`offline never ready (${await page.evaluate(() => window.pianoformer.offline)}): ${e.message}`);
      });
    assert.equal(await page.isVisible('#offline-badge'), true);
    await page.evaluate(() => navigator.serviceWorker.ready);
    await page.evaluate((data) => {
      const dt = new DataTransfer();
      dt.items.add(new File([new Uint8Array(data)], 'song.mid', { type: 'audio/midi' }));
      for (const type of ['dragenter', 'dragover', 'drop']) {
        document.querySelector('main').dispatchEvent(new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true }));
      }
    }, [...song]);
    await page.waitForFunction(() => window.pianoformer.piece?.name === 'song.mid', null, { timeout: 30_000 });
    // The work in progress is saved half a second after a change.
    await page.waitForFunction(() => !window.pianoformer.workPending(), null, { timeout: 30_000 });

    // The server goes away: nothing answers on its port any more.
    await new Promise((ok) => {
      server.close(ok);
      server.closeAllConnections();
    });
    serving = false;
    const gone = await page.evaluate((url) => fetch(url, { cache: 'no-store' }).then(() => 'answered', () => 'refused'), `${base}www/models/manifest.json?probe`);
    assert.equal(gone, 'answered', 'the service worker answers from its cache');

    await page.reload();
    await settle(page, log);
    assert.equal((await page.evaluate(() => window.pianoformer.piece))?.name, 'song.mid', 'the piece is restored');
    const run = await accompany(page);
    assert.ok(run.notes > 0, 'the default model accompanies offline');
    await page.click('#play');
    await page.waitForFunction(() => window.pianoformer.playing === true, null, { timeout: 60_000 });
    await page.click('#play');
    await page.screenshot({ path: join(OUT, 'offline.png'), fullPage: true });

    // A fresh navigation by another address of the page, not only a reload.
    await page.goto(`${base}index.html?backend=cpu`);
    await settle(page, log);
    assert.deepEqual(await cspViolations(page, log), []);
    console.log(`offline: ${run.notes} notes with the server gone`);
  } finally {
    await browser.close();
  }
});
