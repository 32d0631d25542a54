// End-to-end: fine-tuning on the page (CPU backend, as most machines without a GPU run it).
// Two MIDI files written by the project's own code are added to the Fine-tune panel; a few
// steps run with pause and resume; the model is kept, used at once in the generate panel and
// compared with its base on the same piece and seed; it survives a reload, exports, deletes,
// and imports back; a damaged model file is refused in words; a melody model fine-tunes on the
// same files. Needs pkg/ (make wasm).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { OUT, cspViolations, launch, serveApp } from './browser.mjs';

const SLOW = 600_000;
let server;
let base;
let files;

before(async () => {
  let wasm;
  ({ server, base, wasm } = await serveApp({ wasm: true }));
  files = [
    { name: 'mine-in-c.mid', mimeType: 'audio/midi', buffer: Buffer.from(wasm.exampleMidi(0, 12)) },
    { name: 'mine-in-f.mid', mimeType: 'audio/midi', buffer: Buffer.from(wasm.exampleMidi(5, 12)) },
  ];
});

after(() => server?.close());

const tune = (page) => page.evaluate(() => ({ ...window.pianoformer.tune, state: window.pianoformer.tune.state }));

test('fine-tune a few steps on two files, keep, generate and compare, reload, export, import', { timeout: 3 * SLOW }, async () => {
  const { browser, page, log } = await launch({ webgpu: false, url: `${base}?backend=cpu` });
  const fail = (what) => `${what}\n${log.join('\n')}`;
  try {
    await page.waitForFunction(() => document.body.dataset.state === 'ready', null, { timeout: SLOW });

    // The files: what was understood of each.
    await page.setInputFiles('#tune-files', files);
    await page.waitForFunction(
      () => window.pianoformer.tune.files.length === 2 && window.pianoformer.tune.files.every((f) => f.trainBars > 0),
      null,
      { timeout: 60_000 },
    );
    const understood = (await tune(page)).files;
    for (const f of understood) {
      assert.equal(f.problem, null, fail(JSON.stringify(f)));
      assert.ok(f.heldOutBars >= 2 && f.melodyNotes > 0 && f.accompanimentNotes > 0, JSON.stringify(f));
    }
    assert.match(await page.textContent('#tune-table'), /C G Am F/, 'detected chords are shown');
    // A wrong melody choice is reported, and fixing it makes the file usable again.
    const melodyRow = page.locator('#tune-table tbody tr').first().locator('select');
    await melodyRow.selectOption('-1');
    await page.waitForFunction(() => window.pianoformer.tune.files[0].problem !== null);
    assert.match(await page.textContent('#tune-table'), /no track is marked as the melody/);
    const melodyValue = await melodyRow.evaluate(
      (select) => [...select.options].find((o) => o.text.startsWith('MELODY')).value,
    );
    await melodyRow.selectOption(melodyValue);
    await page.waitForFunction(() => window.pianoformer.tune.files[0].problem === null);

    // A short run with pause and resume.
    const baseModel = await page.inputValue('#tune-base');
    await page.fill('#tune-steps', '8');
    await page.fill('#tune-lr', '0.0003');
    await page.click('#tune-start');
    await page.waitForFunction(() => window.pianoformer.tune.losses.length >= 1, null, { timeout: SLOW });
    await page.click('#tune-pause');
    await page.waitForFunction(() => window.pianoformer.tune.state === 'paused', null, { timeout: 120_000 });
    const pausedAt = (await tune(page)).losses.length;
    await page.waitForTimeout(1500);
    assert.equal((await tune(page)).losses.length, pausedAt, 'no steps while paused');
    assert.match(await page.textContent('#tune-status'), /Paused at step/);
    await page.click('#tune-pause'); // resume
    await page.waitForSelector('#tune-keep-form:not([hidden])', { timeout: SLOW });
    const run = (await tune(page)).lastRun;
    assert.equal(run.state, 'done', fail(await page.textContent('#tune-status')));
    assert.equal(run.train.length, 8);
    assert.ok(run.train.every(([, l]) => Number.isFinite(l)));
    assert.ok(run.valid.length >= 2, 'held-out loss before and during the run');
    console.log(
      `fine-tuning on the CPU: ${(run.msPerStep / 1000).toFixed(2)} s/step; loss ${run.train[0][1].toFixed(4)} -> ${run.train.at(-1)[1].toFixed(4)}, held-out ${run.valid[0][1].toFixed(4)} -> ${run.valid.at(-1)[1].toFixed(4)}`,
    );
    await page.locator('#tune-card').screenshot({ path: join(OUT, 'fine-tune.png') });

    // Keep it: it becomes the generate panel's model at once.
    const name = await page.inputValue('#tune-name');
    await page.click('#tune-keep');
    await page.waitForFunction((n) => window.pianoformer.tune.models.includes(n), name, { timeout: 60_000 });
    assert.equal(await page.inputValue('#model'), name);

    // Generate with it and with its base on the same piece and seed.
    await page.click('#example');
    await page.waitForFunction(() => window.pianoformer.piece?.name === 'example.mid');
    const n = await page.evaluate(() => window.pianoformer.generations.length);
    await page.click('#compare');
    await page.waitForFunction(
      (n) => window.pianoformer.generations.length >= n + 2 || !document.getElementById('error').hidden,
      n,
      { timeout: SLOW },
    );
    const [a, b] = await page.evaluate((n) => window.pianoformer.generations.slice(n), n);
    assert.equal(a?.model, name, fail(await page.evaluate(() => window.pianoformer.error)));
    assert.equal(b.model, baseModel, 'the second is the base model');
    assert.equal(a.seed, b.seed);
    assert.ok(a.notes > 0 && b.notes > 0);
    assert.equal(await page.isVisible('#compare-bar'), true);
    await page.click('#compare-b');
    assert.equal(await page.evaluate(() => window.pianoformer.comparing), 'b');
    console.log(`compare: fine-tuned ${a.notes} notes, base ${b.notes} notes (seed ${a.seed})`);

    // It survives a reload (IndexedDB) and generates again from storage.
    await page.reload();
    await page.waitForFunction(() => document.body.dataset.state === 'ready', null, { timeout: SLOW });
    await page.waitForFunction((n) => window.pianoformer.tune?.models.includes(n), name, { timeout: 30_000 });

    // Export, delete, import back.
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.click(`button[aria-label="Export ${name}"]`),
    ]);
    const exported = join(OUT, `${name}.pfmodel`);
    await download.saveAs(exported);
    page.once('dialog', (d) => d.accept());
    await page.click(`button[aria-label="Delete ${name}"]`);
    await page.waitForFunction((n) => !window.pianoformer.tune.models.includes(n), name);
    await page.setInputFiles('#tune-import', exported);
    await page.waitForFunction((n) => window.pianoformer.tune.models.includes(n), name, { timeout: 60_000 });
    assert.match(await page.textContent('#notice'), /Imported/);
    await page.click(`button[aria-label="Generate with ${name}"]`);
    await page.click('#example');
    await page.waitForFunction(() => window.pianoformer.piece?.name === 'example.mid');
    const m = await page.evaluate(() => window.pianoformer.generations.length);
    await page.click('#generate');
    await page.waitForFunction(
      (m) => window.pianoformer.generations.length > m || !document.getElementById('error').hidden,
      m,
      { timeout: SLOW },
    );
    const again = await page.evaluate(() => window.pianoformer.generations.at(-1));
    assert.equal(again.model, name, fail(await page.evaluate(() => window.pianoformer.error)));
    assert.equal(again.notes, a.notes, 'the imported model writes what the kept one wrote (same seed)');

    // A damaged model file is refused in words.
    const bytes = readFileSync(exported);
    bytes[bytes.length - 1] ^= 1;
    await page.setInputFiles('#tune-import', { name: 'damaged.pfmodel', mimeType: 'application/octet-stream', buffer: bytes });
    await page.waitForSelector('#error:not([hidden])', { timeout: 30_000 });
    assert.match(await page.textContent('#error-text'), /damaged\.pfmodel could not be imported: .*checksum/);

    // A melody model fine-tunes on the same files: the bases follow the Generate panel's task.
    await page.selectOption('#task', 'melody');
    await page.waitForFunction(() => [...document.getElementById('tune-base').options].every((o) => o.text.startsWith('melody-')));
    await page.setInputFiles('#tune-files', files);
    await page.fill('#tune-steps', '2');
    await page.click('#tune-start');
    await page.waitForSelector('#tune-keep-form:not([hidden])', { timeout: SLOW });
    const sung = (await tune(page)).lastRun;
    assert.equal(sung.state, 'done', fail(await page.textContent('#tune-status')));
    assert.equal(sung.train.length, 2);
    assert.ok(sung.train.every(([, l]) => Number.isFinite(l)) && sung.valid.length >= 2);
    await page.click('#tune-discard');
    assert.deepEqual(await cspViolations(page, log), [], 'nothing was blocked by the CSP');
  } finally {
    await browser.close();
  }
});
