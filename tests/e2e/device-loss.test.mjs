// End-to-end: the GPU lost mid-generation. On WebGPU (SwiftShader here), the page's drill mode
// (`?drill`) destroys the Worker's GPU devices while the default model is writing; the page
// must move to the CPU, write the accompaniment again there and keep the piece intact.
// Needs pkg/ (make wasm) and Chromium (make setup).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { cspViolations, launch, serveApp } from './browser.mjs';

let server;
let base;
let song;

before(async () => {
  let wasm;
  ({ server, base, wasm } = await serveApp({ wasm: true }));
  song = wasm.exampleMidi(2, 2);
});

after(() => server?.close());

test('a GPU device lost mid-generation: the page finishes on the CPU with the piece intact', { timeout: 900_000 }, async () => {
  const { browser, page, log } = await launch({ webgpu: true, url: `${base}?backend=gpu&drill` });
  try {
    await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: 600_000 });
    assert.equal(await page.evaluate(() => window.pianoformer.backend?.kind), 'gpu', log.join('\n'));
    await page.evaluate((data) => {
      const dt = new DataTransfer();
      dt.items.add(new File([new Uint8Array(data)], 'song.mid', { type: 'audio/midi' }));
      for (const type of ['dragenter', 'dragover', 'drop']) {
        document.querySelector('main').dispatchEvent(new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true }));
      }
    }, [...song]);
    await page.waitForFunction(() => window.pianoformer.piece?.name === 'song.mid', null, { timeout: 30_000 });
    const melody = await page.evaluate(() => window.pianoformer.piece.tracks.find((t) => t.role === 'melody').notes);
    await page.selectOption('#task', 'accompaniment');
    await page.click('#generate');
    // Mid-generation: the model loaded and running on WebGPU (a step takes a second or more
    // on SwiftShader), then the device goes.
    await page.waitForFunction(() => /^Running/.test(document.getElementById('gen-status').textContent), null, { timeout: 600_000 });
    await page.waitForTimeout(3000);
    assert.equal(await page.evaluate(() => window.pianoformer.generations.length), 0);
    await page.evaluate(() => window.pianoformer.loseDevice());
    await page.waitForFunction(
      () => window.pianoformer.generations.length > 0 || !document.getElementById('error').hidden,
      null,
      { timeout: 300_000 },
    );
    assert.equal(await page.evaluate(() => (document.getElementById('error').hidden ? null : window.pianoformer.error)), null, log.join('\n'));
    const run = await page.evaluate(() => window.pianoformer.generations.at(-1));
    assert.equal(run.backend, 'cpu');
    assert.ok(run.notes > 0);
    assert.equal(await page.textContent('#backend-badge'), 'CPU');
    const piece = await page.evaluate(() => window.pianoformer.piece);
    assert.deepEqual(piece.tracks.find((t) => t.role === 'melody').notes, melody, 'the melody is intact');
    assert.ok(piece.tracks.some((t) => t.role === 'generated' && t.notes.length > 0));
    assert.deepEqual(log.filter((l) => l.startsWith('[pageerror]')), []);
    assert.deepEqual(await cspViolations(page, log), []);
  } finally {
    await browser.close();
  }
});
