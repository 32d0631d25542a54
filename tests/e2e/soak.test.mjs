// End-to-end: the page over time. Fifty rounds of accompany-then-undo on the CPU; the Worker's
// wasm memory (which only grows, so its size is the peak) must stop growing, and the page's
// undo history stays bounded. Needs pkg/ (make wasm) and Chromium (make setup).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { cspViolations, launch, serveApp } from './browser.mjs';

let server;
let base;
let song;

before(async () => {
  let wasm;
  ({ server, base, wasm } = await serveApp({ wasm: true }));
  song = wasm.exampleMidi(2, 4);
});

after(() => server?.close());

test('fifty generate/undo rounds: the wasm memory stops growing', { timeout: 900_000 }, async () => {
  const { browser, page, log } = await launch({ webgpu: false, url: `${base}?backend=cpu` });
  try {
    await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: 120_000 });
    assert.equal(await page.evaluate(() => window.pianoformer.state), 'ready', log.join('\n'));
    await page.evaluate((data) => {
      const dt = new DataTransfer();
      dt.items.add(new File([new Uint8Array(data)], 'song.mid', { type: 'audio/midi' }));
      for (const type of ['dragenter', 'dragover', 'drop']) {
        document.querySelector('main').dispatchEvent(new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true }));
      }
    }, [...song]);
    await page.waitForFunction(() => window.pianoformer.piece?.name === 'song.mid', null, { timeout: 30_000 });
    await page.selectOption('#task', 'accompaniment');
    const generated = () => page.evaluate(() =>
      window.pianoformer.piece.tracks.filter((t) => t.role === 'generated').reduce((n, t) => n + t.notes.length, 0));
    const memory = {};
    for (let round = 1; round <= 50; round++) {
      await page.click('#generate');
      await page.waitForFunction(
        (n) => window.pianoformer.generations.length >= n || !document.getElementById('error').hidden,
        round,
        { timeout: 120_000 },
      );
      assert.equal(await page.evaluate(() => (document.getElementById('error').hidden ? null : window.pianoformer.error)), null);
      assert.ok((await generated()) > 0, `round ${round} wrote notes`);
      await page.click('#undo');
      await page.waitForFunction(() => !window.pianoformer.piece.tracks.some((t) => t.role === 'generated'), null, { timeout: 10_000 });
      if ([1, 10, 25, 50].includes(round)) memory[round] = await page.evaluate(() => window.pianoformer.wasmBytes());
    }
    const mb = (b) => (b / 2 ** 20).toFixed(1);
    console.log(`wasm memory after rounds 1/10/25/50: ${[1, 10, 25, 50].map((r) => mb(memory[r])).join(' / ')} MiB`);
    assert.ok(memory[1] > 0);
    // Warm-up may grow it; after that, 40 more rounds add at most 2 % (allocator slack).
    assert.ok(memory[50] <= memory[10] * 1.02, `grew from ${mb(memory[10])} to ${mb(memory[50])} MiB`);
    assert.deepEqual(log.filter((l) => l.startsWith('[pageerror]')), [], 'no uncaught exception');
    assert.deepEqual(await cspViolations(page, log), []);
  } finally {
    await browser.close();
  }
});
