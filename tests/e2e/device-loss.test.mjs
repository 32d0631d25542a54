// End-to-end: the GPU lost at every moment the page uses it. On WebGPU (SwiftShader here) the
// drill (`?drill=lose:MOMENT:K`, www/gpu-guard.js) destroys the Worker's GPU devices as the
// K-th read-back of MOMENT starts: while the device is being set up (load), during the ops and
// the fused steps' self-checks, during the backends' race (auto), at a step of a generation
// (several moments), during an attention map, and at a fine-tuning step. Each must end on the
// CPU with no error shown, the piece intact and the work done there (fine-tuning going on from
// its last good step). The moments are read-backs, not times, so a busy machine hits the same
// one. The Worker's decision itself, with simulated failures, is tests/js/gpu-guard.test.mjs.
// Needs pkg/ (make test-bundles or make wasm) and Chromium (make setup).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { cspViolations, dropFile, launch, serveApp } from './browser.mjs';

const SLOW = 600_000;
let server;
let base;
let song;
let sixteenBars;
let tuneFiles;

before(async () => {
  let wasm;
  ({ server, base, wasm } = await serveApp({ wasm: true }));
  song = wasm.exampleMidi(2, 2);
  sixteenBars = wasm.exampleMidi(2, 16);
  tuneFiles = [
    { name: 'mine-in-c.mid', mimeType: 'audio/midi', buffer: Buffer.from(wasm.exampleMidi(0, 8)) },
    { name: 'mine-in-f.mid', mimeType: 'audio/midi', buffer: Buffer.from(wasm.exampleMidi(5, 8)) },
  ];
});

after(() => server?.close());

/** A page on WebGPU (`backend`: 'gpu' or 'auto') with the drill `drill`, once it is ready. */
async function open(drill, backend = 'gpu') {
  const opened = await launch({ webgpu: true, url: `${base}?backend=${backend}&drill=${drill}` });
  await opened.page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: SLOW });
  return opened;
}

const shownError = (page) => page.evaluate(() => (document.getElementById('error').hidden ? null : window.pianoformer.error));

/** Waits for the Worker's news of the loss, then checks the page is on the CPU and well. */
async function onCpu(page, log) {
  await page.waitForFunction(
    () => window.pianoformer.deviceLosses.length > 0 || !document.getElementById('error').hidden,
    null,
    { timeout: SLOW },
  );
  assert.equal(await shownError(page), null, log.join('\n'));
  await page.waitForFunction(() => window.pianoformer.backend?.kind === 'cpu', null, { timeout: SLOW });
  assert.equal(await page.textContent('#backend-badge'), 'CPU');
  assert.match(await page.evaluate(() => window.pianoformer.backend.fallback_reason), /GPU device was lost/);
}

/** Drops the two-bar song and accompanies it; the result, with the melody checked intact. */
async function accompany(page, log, { bytes = song } = {}) {
  await dropFile(page, bytes, 'song.mid');
  const melody = await page.evaluate(() => window.pianoformer.piece.tracks.find((t) => t.role === 'melody').notes);
  await page.selectOption('#task', 'accompaniment');
  const before = await page.evaluate(() => window.pianoformer.generations.length);
  await page.click('#generate');
  await page.waitForFunction(
    (n) => window.pianoformer.generations.length > n || !document.getElementById('error').hidden,
    before,
    { timeout: SLOW },
  );
  assert.equal(await shownError(page), null, log.join('\n'));
  const run = await page.evaluate(() => window.pianoformer.generations.at(-1));
  assert.ok(run.notes > 0);
  const piece = await page.evaluate(() => window.pianoformer.piece);
  assert.deepEqual(piece.tracks.find((t) => t.role === 'melody').notes, melody, 'the melody is intact');
  assert.ok(piece.tracks.some((t) => t.role === 'generated' && t.notes.length > 0));
  return run;
}

async function clean(page, log) {
  assert.deepEqual(log.filter((l) => l.startsWith('[pageerror]')), []);
  assert.deepEqual(await cspViolations(page, log), []);
  assert.equal(await page.evaluate(() => window.pianoformer.deviceLosses.length), 1, 'one loss, told once');
}

// Before the page is up, during each part of the self-check, and during the backends' race on
// auto (it starts once the default model is loaded; its first read-back on WebGPU loses the
// device): the page is ready on the CPU and accompanies there.
for (const [drill, backend, when] of [
  ['lose:load', 'gpu', 'as the device is set up'],
  ['lose:check:2', 'gpu', 'during the self-check'],
  ['lose:fused-check:1', 'gpu', "during the fused steps' self-check"],
  ['lose:race:1', 'auto', 'during the backends’ race (auto)'],
]) {
  test(`a GPU device lost ${when}: the page is ready on the CPU and works there`, { timeout: SLOW }, async () => {
    const { browser, page, log } = await open(drill, backend);
    try {
      await onCpu(page, log);
      const run = await accompany(page, log);
      assert.equal(run.backend, 'cpu');
      await clean(page, log);
    } finally {
      await browser.close();
    }
  });
}

// A generation's read-backs come a chunk of 16 steps at a time (sixteen bars: about 16 of
// them): the first, and one drawn at random from 2 to 8 (in the test's name, so a failure says
// which), or E2E_LOSE_AT's.
const moments = process.env.E2E_LOSE_AT
  ? process.env.E2E_LOSE_AT.split(',').map(Number)
  : [1, 2 + Math.floor(Math.random() * 7)];
for (const k of moments) {
  test(`a GPU device lost at read-back ${k} of a generation: it is written again on the CPU, the piece intact`, { timeout: SLOW }, async () => {
    const { browser, page, log } = await open(`lose:generate:${k}`);
    try {
      assert.equal(await page.evaluate(() => window.pianoformer.backend?.kind), 'gpu', log.join('\n'));
      const run = await accompany(page, log, { bytes: sixteenBars });
      await onCpu(page, log);
      assert.equal(run.backend, 'cpu');
      await clean(page, log);
    } finally {
      await browser.close();
    }
  });
}

test('a GPU device lost while an attention map is drawn: the map is drawn on the CPU', { timeout: SLOW }, async () => {
  const { browser, page, log } = await open('lose:attention:1');
  try {
    await dropFile(page, song, 'song.mid');
    await page.waitForFunction(() => window.pianoformer.modelReadyMs !== null, null, { timeout: SLOW });
    // Another layer: its map over the piece, without generating.
    const layer = await page.$eval('#att-layer', (s) => [...s.options].at(-1).value);
    await page.selectOption('#att-layer', layer);
    await onCpu(page, log);
    await page.waitForFunction(() => !window.pianoformer.attentionBlank(), null, { timeout: SLOW });
    await clean(page, log);
  } finally {
    await browser.close();
  }
});

test('a GPU device lost at a fine-tuning step: the run goes on on the CPU from its last good step', { timeout: 2 * SLOW }, async () => {
  const { browser, page, log } = await open('lose:tune:2');
  try {
    assert.equal(await page.evaluate(() => window.pianoformer.backend?.kind), 'gpu', log.join('\n'));
    await page.setInputFiles('#tune-files', tuneFiles);
    await page.waitForFunction(
      () => window.pianoformer.tune.files.length === 2 && window.pianoformer.tune.files.every((f) => f.trainBars > 0),
      null,
      { timeout: SLOW },
    );
    await page.fill('#tune-steps', '3');
    await page.click('#tune-start');
    await page.waitForFunction(
      () => !document.getElementById('tune-keep-form').hidden || !document.getElementById('error').hidden,
      null,
      { timeout: 2 * SLOW },
    );
    assert.equal(await shownError(page), null, log.join('\n'));
    const run = await page.evaluate(() => window.pianoformer.tune.lastRun);
    assert.equal(run.state, 'done', await page.textContent('#tune-status'));
    assert.deepEqual(run.train.map(([step]) => step), [1, 2, 3], 'every step once, none lost or repeated');
    assert.ok(run.train.every(([, loss]) => Number.isFinite(loss)));
    assert.equal(run.resumedAt, 1, 'step 1 was done on WebGPU; the CPU went on from it');
    assert.equal(run.backend, 'the CPU');
    await onCpu(page, log);
    await clean(page, log);
  } finally {
    await browser.close();
  }
});
