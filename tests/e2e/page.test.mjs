// End-to-end: serve the built page and drive it in headless Debian Chromium with Playwright.
// Needs pkg/ (make wasm) and Chromium (make setup). Screenshots go to $E2E_OUT (default
// target/e2e/). Run with `make test-e2e` or `node --test tests/e2e/*.test.mjs`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { OUT, cspViolations, launch, serveApp } from './browser.mjs';

// The backend check runs 30 Adam steps; on SwiftShader WebGPU that takes a while.
const READY_TIMEOUT = 240_000;

let server;
let base;
let wasm;

before(async () => {
  ({ server, base, wasm } = await serveApp({ wasm: true }));
});

after(() => server?.close());

function openPage({ webgpu, query = '' }) {
  return launch({ webgpu, url: base + query, viewport: { width: 1100, height: 700 } });
}

async function waitSettled(page, log) {
  try {
    await page.waitForFunction(
      () => ['ready', 'error'].includes(document.body.dataset.state),
      null,
      { timeout: READY_TIMEOUT },
    );
  } catch (e) {
    throw new Error(`page never settled: ${e.message}\n${log.join('\n')}`);
  }
  return page.evaluate(() => window.pianoformer);
}

test('page starts on WebGPU when asked, reports the adapter and passes its backend check', async () => {
  const { browser, page, log } = await openPage({ webgpu: true, query: '?backend=gpu' });
  try {
    const status = await waitSettled(page, log);
    await page.screenshot({ path: join(OUT, 'page-webgpu.png') });
    assert.equal(status.state, 'ready', `${status.error}\n${log.join('\n')}`);
    assert.equal(status.backend.kind, 'gpu');
    assert.equal(status.backend.api, 'BrowserWebGpu');
    assert.match(await page.textContent('#backend-badge'), /WebGPU/);
    // Usable before its self-check (which takes many seconds on SwiftShader); the check follows.
    const checked = await page.evaluate(() => window.pianoformer.check);
    console.log(`WebGPU: ready with its self-check ${checked ? 'already done' : 'still running'}`);
    await page.waitForFunction(() => window.pianoformer.check, null, { timeout: READY_TIMEOUT });
    const { check } = await page.evaluate(() => window.pianoformer);
    assert.ok(check.ops.matmul <= 1e-4, JSON.stringify(check.ops));
    const losses = check.fit.losses;
    assert.ok(losses.at(-1) < 0.5 * losses[0], `loss ${losses[0]} -> ${losses.at(-1)}`);
    // The fused steps agree with tensor ops here, so they stay on, and the card says so.
    assert.ok(check.fused?.on && check.fused.tokens_agree && check.fused.steps_agree, JSON.stringify(check.fused));
    assert.match(await page.textContent('#check-fused-text'), /as tensor ops write them ✓/);
    console.log(`WebGPU: backend ready ${status.readyMs.toFixed(0)} ms after load`);
    assert.deepEqual(await cspViolations(page, log), [], 'nothing was blocked by the CSP');
  } finally {
    await browser.close();
  }
});

test('on auto, the backends race each kind of work: SwiftShader loses generation to the CPU, and fine-tuning is not raced on it', { timeout: 600_000 }, async () => {
  const { browser, page, log } = await openPage({ webgpu: true, query: '?backend=auto' });
  try {
    const status = await waitSettled(page, log);
    assert.equal(status.state, 'ready', `${status.error}\n${log.join('\n')}`);
    assert.equal(status.backend.kind, 'cpu', 'ready on the CPU at once');
    const software = await page.evaluate(async () => {
      const info = (await navigator.gpu?.requestAdapter())?.info ?? {};
      return info.isFallbackAdapter === true || /swiftshader|llvmpipe|lavapipe/i.test(
        [info.vendor, info.architecture, info.description].join(' '));
    });
    // The default model loads as the page opens; generation's race follows, in the background.
    await page.waitForFunction(() => window.pianoformer.races.length > 0, null, { timeout: 300_000 });
    const race = await page.evaluate(() => window.pianoformer.races[0]);
    assert.equal(race.kind, 'generation');
    assert.ok(race.cpuMs > 0, JSON.stringify(race));
    console.log(`race: ${race.text}`);
    if (!software) {
      assert.equal(race.winner, 'gpu', `a hardware adapter should win: ${race.text}`);
      return;
    }
    assert.equal(race.winner, 'cpu', race.text);
    // Fused, generation is within reach of the CPU on SwiftShader (about 8x); fine-tuning is not.
    assert.ok(race.ratio > 1, `SwiftShader should be slower: ${race.text}`);
    const after = await page.evaluate(() => window.pianoformer.backend);
    assert.equal(after.kind, 'cpu');
    assert.match(after.fallback_reason, /^generation on the CPU: (one bar of accompaniment|16 tokens of continuation) took the CPU [\d.]+ m?s, WebGPU \(.*\) /);
    assert.match(await page.getAttribute('#backend-badge', 'title'), /took the CPU/);
    assert.match(await page.textContent('#check-race-text'), /generation on the CPU/);
    assert.equal(await page.getAttribute('#check-race-text', 'hidden'), null, 'the card shows the race');

    // Fine-tuning's turn: a run of one step on the example starts on the CPU, not raced on a
    // software adapter.
    await page.click('#example');
    await page.waitForFunction(() => window.pianoformer.piece !== null, null, { timeout: 60_000 });
    await page.click('#tune-add-current');
    await page.waitForFunction(() => window.pianoformer.tune.files.length === 1 && window.pianoformer.tune.files[0].trainBars > 0, null, { timeout: 60_000 });
    await page.fill('#tune-steps', '1');
    await page.click('#tune-start');
    await page.waitForSelector('#tune-keep-form:not([hidden])', { timeout: 300_000 });
    const races = await page.evaluate(() => window.pianoformer.races);
    const tuning = races.find((r) => r.kind === 'fine-tuning');
    assert.ok(tuning, JSON.stringify(races));
    assert.equal(tuning.winner, 'cpu');
    assert.ok(tuning.skipped);
    assert.match(tuning.text, /fine-tuning on the CPU: WebGPU .* is a software adapter running on this CPU/);
    assert.match(await page.textContent('#check-race-text'), /fine-tuning on the CPU/);
    assert.deepEqual(log.filter((l) => l.startsWith('[pageerror]')), []);
  } finally {
    await browser.close();
  }
});

test('on auto, generation moves to WebGPU when it wins its race: ready at once on the CPU, then generation on WebGPU with its model', { timeout: 900_000 }, async () => {
  // `drill=move` moves generation to WebGPU whatever its race says (on SwiftShader the CPU
  // wins, and auto stays).
  const { browser, page, log } = await openPage({ webgpu: true, query: '?backend=auto&drill=move' });
  try {
    const status = await waitSettled(page, log);
    assert.equal(status.state, 'ready', `${status.error}\n${log.join('\n')}`);
    assert.equal(status.backend.kind, 'cpu', 'ready on the CPU bundle, before WebGPU is warm');
    await page.waitForFunction(() => window.pianoformer.modelReadyMs, null, { timeout: READY_TIMEOUT });
    await page.waitForFunction(() => window.pianoformer.backend.kind === 'gpu', null, { timeout: READY_TIMEOUT });
    const moved = await page.evaluate(() => window.pianoformer);
    assert.ok(moved.check.ops.matmul <= 1e-4, JSON.stringify(moved.check.ops));
    assert.match(await page.textContent('#backend-badge'), /WebGPU/);
    assert.match(await page.textContent('#notice'), /Generation now runs on WebGPU.*won a race against the CPU/);
    const race = await page.evaluate(() => window.pianoformer.races[0]);
    assert.equal(race.winner, 'gpu');
    assert.ok(race.gpuMs > 0 && race.cpuMs > 0, JSON.stringify(race));
    // The model loaded on the CPU went with the session: the accompaniment runs on WebGPU.
    const song = [...wasm.exampleMidi(2, 2)];
    await page.evaluate((data) => {
      const dt = new DataTransfer();
      dt.items.add(new File([new Uint8Array(data)], 'song.mid', { type: 'audio/midi' }));
      document.querySelector('main').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    }, song);
    await page.waitForFunction(() => window.pianoformer.piece?.name === 'song.mid', null, { timeout: 30_000 });
    await page.selectOption('#task', 'accompaniment');
    await page.click('#generate');
    await page.waitForFunction(
      () => window.pianoformer.generations.length > 0 || !document.getElementById('error').hidden,
      null,
      { timeout: 600_000 },
    );
    const run = await page.evaluate(() => window.pianoformer.generations.at(-1) ?? { error: window.pianoformer.error });
    assert.equal(run.backend, 'gpu', JSON.stringify(run));
    assert.ok(run.notes > 0);
    assert.deepEqual(log.filter((l) => l.startsWith('[pageerror]')), []);
    assert.deepEqual(await cspViolations(page, log), []);
  } finally {
    await browser.close();
  }
});

test('without WebGPU the page falls back to the CPU and says why', async () => {
  const { browser, page, log } = await openPage({ webgpu: false });
  try {
    const status = await waitSettled(page, log);
    await page.screenshot({ path: join(OUT, 'page-cpu-fallback.png') });
    assert.equal(status.state, 'ready', `${status.error}\n${log.join('\n')}`);
    assert.equal(status.backend.kind, 'cpu');
    assert.ok(status.backend.fallback_reason, 'a fallback must say why');
    assert.equal(await page.textContent('#backend-badge'), 'CPU');
    console.log(`CPU fallback: backend ready ${status.readyMs.toFixed(0)} ms after load`);
    // The policy is enforced, and a breach would be seen: a request to another origin is refused.
    assert.deepEqual(await cspViolations(page, log), []);
    await page.evaluate(() => fetch('http://192.0.2.1/').catch(() => {}));
    await page.waitForFunction(() => window.__cspViolations.length > 0, null, { timeout: 10_000 });
    assert.match((await cspViolations(page, log)).join('\n'), /connect-src/);
  } finally {
    await browser.close();
  }
});

test('asking for WebGPU where there is none shows a plain error, not a blank page', async () => {
  const { browser, page, log } = await openPage({ webgpu: false, query: '?backend=gpu' });
  try {
    const status = await waitSettled(page, log);
    await page.screenshot({ path: join(OUT, 'page-no-webgpu-error.png') });
    assert.equal(status.state, 'error');
    const text = await page.textContent('#error');
    assert.match(text, /compute backend could not start/i);
    assert.ok(await page.isVisible('#error'));
  } finally {
    await browser.close();
  }
});
