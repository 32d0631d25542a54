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

before(async () => {
  ({ server, base } = await serveApp());
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
    console.log(`WebGPU: backend ready ${status.readyMs.toFixed(0)} ms after load`);
    assert.deepEqual(await cspViolations(page, log), [], 'nothing was blocked by the CSP');
  } finally {
    await browser.close();
  }
});

test('on auto, a software WebGPU adapter (SwiftShader) gives way to the CPU, saying why', async () => {
  const { browser, page, log } = await openPage({ webgpu: true, query: '?backend=auto' });
  try {
    const status = await waitSettled(page, log);
    assert.equal(status.state, 'ready', `${status.error}\n${log.join('\n')}`);
    const software = await page.evaluate(async () => {
      const info = (await navigator.gpu?.requestAdapter())?.info ?? {};
      return info.isFallbackAdapter === true || /swiftshader|llvmpipe|lavapipe/i.test(
        [info.vendor, info.architecture, info.description].join(' '));
    });
    if (software) {
      assert.equal(status.backend.kind, 'cpu');
      assert.match(status.backend.fallback_reason, /software/);
      assert.match(await page.getAttribute('#backend-badge', 'title'), /software renderer/);
    } else {
      assert.equal(status.backend.kind, 'gpu', 'a hardware adapter is used on auto');
    }
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
