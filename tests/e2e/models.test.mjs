// End-to-end: every shipped model of both generation tasks loads and generates in the page on
// the CPU backend (wasm), as a person picking it from the Model menu would: a two-bar piece
// written by the project's own code is dropped, each model in turn writes an accompaniment or
// a short continuation, the notes appear, and Undo takes them back before the next. The menu
// must list every manifest entry of the task. Needs pkg/ (make wasm).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dropFile, launch, serveApp } from './browser.mjs';

const SLOW = 300_000;
let server;
let base;
let midi;

before(async () => {
  let wasm;
  ({ server, base, wasm } = await serveApp({ wasm: true }));
  midi = wasm.exampleMidi(3, 2);
});

after(() => server?.close());

const manifest = JSON.parse(readFileSync(new URL('../../www/models/manifest.json', import.meta.url)));

test('every shipped model loads and generates on the CPU backend', { timeout: 4 * SLOW }, async () => {
  const { browser, page, log } = await launch({ webgpu: false, url: `${base}?backend=cpu` });
  try {
    await page.waitForFunction(() => document.body.dataset.state === 'ready', null, { timeout: SLOW });
    await dropFile(page, midi, 'two-bars.mid');
    const notesOf = (piece) => JSON.stringify(piece.tracks.map((t) => t.notes));
    const start = notesOf(await page.evaluate(() => window.pianoformer.piece));
    const times = [];
    for (const task of ['accompaniment', 'continuation']) {
      await page.selectOption('#task', task);
      if (task === 'continuation') await page.fill('#max-tokens', '64');
      const listed = await page.$$eval('#model option', (os) => os.map((o) => o.value));
      const shipped = manifest.models.filter((m) => m.task === task).map((m) => m.name);
      for (const name of shipped) assert.ok(listed.includes(name), `${name} is in the ${task} menu: ${listed}`);
      for (const name of shipped) {
        await page.selectOption('#model', name);
        const n = await page.evaluate(() => window.pianoformer.generations.length);
        await page.waitForFunction(() => !document.getElementById('generate').disabled, null, { timeout: SLOW });
        await page.click('#generate');
        await page.waitForFunction(
          (n) => window.pianoformer.generations.length > n || !document.getElementById('error').hidden,
          n,
          { timeout: SLOW },
        );
        const error = await page.evaluate(() => (document.getElementById('error').hidden ? null : window.pianoformer.error));
        assert.equal(error, null, `${name}: ${error}\n${log.join('\n')}`);
        const made = await page.evaluate(() => window.pianoformer.generations.at(-1));
        assert.equal(made.model, name);
        assert.equal(made.task, task);
        const piece = await page.evaluate(() => window.pianoformer.piece);
        const track = piece.tracks.find((t) => t.name === (task === 'accompaniment' ? 'PIANO' : 'CONTINUATION'));
        assert.ok(track?.notes.length > 0, `${name} wrote notes`);
        assert.notEqual(notesOf(piece), start, `${name} changed the piece`);
        times.push(`${name} ${(made.ms / 1000).toFixed(1)} s`);
        await page.click('#undo');
        await page.waitForFunction((s) => JSON.stringify(window.pianoformer.piece.tracks.map((t) => t.notes)) === s, start);
      }
    }
    console.log(`every shipped model on the CPU backend: ${times.join(', ')}`);
  } finally {
    await browser.close();
  }
});
