// The page's performance, measured in one run (a benchmark, not a test): time from page load to
// ready, download sizes, and generation speed on WebGPU and on the CPU in the same Chromium
// build, for an accompaniment of a whole song (64 bars unless --bars) and a 512-token
// continuation with the default models.
// Usage: make wasm && node tools/bench-page.mjs [--skip-gpu] [--bars 64] [--gpu-bars 4]
//        [--tokens 512] [--gpu-tokens 32]
// On a machine without a GPU, WebGPU is SwiftShader (software): far slower, so on WebGPU the
// accompaniment is timed on fewer bars (--gpu-bars) and the continuation over fewer tokens
// (--gpu-tokens), and both are compared per step or token.
import { readFileSync, statSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { chromium } from 'playwright-core';
import { startServer } from './serve.mjs';
import { CHROMIUM, FLAGS } from '../tests/e2e/browser.mjs';

const args = process.argv.slice(2);
const skipGpu = args.includes('--skip-gpu');
const option = (name, fallback) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : fallback);
const tokens = option('--tokens', 512);
const gpuTokens = option('--gpu-tokens', 32);
const bars = option('--bars', 64);
const gpuBars = option('--gpu-bars', 4);
const LIMIT = 1_800_000;

const wasmBytes = readFileSync('pkg/pianoformer_bg.wasm');
const manifest = JSON.parse(readFileSync('www/models/manifest.json', 'utf8'));
const defaults = manifest.models.filter((m) => m.default);
const mod = await import('../pkg/pianoformer.js');
mod.initSync({ module: wasmBytes });
const midiOf = (n) => [...mod.exampleMidi(0, n)];

const server = await startServer({ port: 0, quiet: true });
const base = `http://127.0.0.1:${server.address().port}/`;

async function measure(backend) {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: backend === 'gpu' ? [...FLAGS, '--enable-unsafe-webgpu'] : [...FLAGS, '--disable-webgpu'],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const start = Date.now();
    await page.goto(`${base}?backend=${backend}`);
    await page.waitForFunction(() => window.pianoformer.backend, null, { timeout: LIMIT });
    const backendMs = await page.evaluate(() => window.pianoformer.readyMs);
    await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: LIMIT });
    const readyMs = Date.now() - start;
    const label = await page.evaluate(() => window.pianoformer.backend.label);
    await page.evaluate((data) => {
      const dt = new DataTransfer();
      dt.items.add(new File([new Uint8Array(data)], 'bench.mid'));
      document.querySelector('main').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    }, midiOf(backend === 'gpu' ? gpuBars : bars));
    await page.waitForFunction(() => window.pianoformer.piece, null, { timeout: 60_000 });
    const run = async (task) => {
      await page.selectOption('#task', task);
      if (task === 'continuation') await page.fill('#length', String(backend === 'gpu' ? gpuTokens : tokens));
      const n = await page.evaluate(() => window.pianoformer.generations.length);
      await page.click('#generate');
      await page.waitForFunction(
        (n) => window.pianoformer.generations.length > n || !document.getElementById('error').hidden,
        n,
        { timeout: LIMIT },
      );
      const g = await page.evaluate(() => window.pianoformer.generations.at(-1) ?? { error: window.pianoformer.error });
      if (g.error) throw new Error(g.error);
      // The first run includes the model download and load; run again for the steady speed.
      const n2 = n + 1;
      await page.click('#generate');
      await page.waitForFunction((n) => window.pianoformer.generations.length > n, n2, { timeout: LIMIT });
      const warm = await page.evaluate(() => window.pianoformer.generations.at(-1));
      return { first: g, warm };
    };
    const acc = await run('accompaniment');
    const cont = await run('continuation');
    return { backend, label, backendMs, readyMs, acc, cont, bars: backend === 'gpu' ? gpuBars : bars };
  } finally {
    await browser.close();
  }
}

const results = [];
for (const backend of skipGpu ? ['cpu'] : ['cpu', 'gpu']) {
  process.stderr.write(`measuring ${backend}…\n`);
  results.push(await measure(backend));
}
server.close();

const kb = (n) => `${(n / 1024).toFixed(0)} KiB`;
console.log(`wasm: ${kb(wasmBytes.length)} (${kb(gzipSync(wasmBytes, { level: 9 }).length)} gzipped)`);
for (const m of defaults) console.log(`model ${m.name}: ${(m.bytes / 1e6).toFixed(2)} MB`);
console.log('');
console.log('| backend | backend up | ready (self-check done) | accompaniment (first / warm) | steps/s | ' +
  'continuation (first / warm) | tokens/s |');
console.log('|---|---|---|---|---|---|---|');
for (const r of results) {
  const s = (ms) => `${(ms / 1000).toFixed(2)} s`;
  console.log(
    `| ${r.label} | ${s(r.backendMs)} | ${s(r.readyMs)} | ${r.bars} bars: ${s(r.acc.first.ms)} / ${s(r.acc.warm.ms)} | ` +
      `${((r.bars * 16) / (r.acc.warm.ms / 1000)).toPrecision(3)} | ${r.cont.warm.tokens} tokens: ${s(r.cont.first.ms)} / ${s(r.cont.warm.ms)} | ` +
      `${(r.cont.warm.tokens / (r.cont.warm.ms / 1000)).toPrecision(2)} |`,
  );
}
if (results.length === 2) {
  const [cpu, gpu] = results;
  const perToken = (r) => r.cont.warm.ms / r.cont.warm.tokens;
  const perStep = (r) => r.acc.warm.ms / (r.bars * 16);
  console.log(`\nWebGPU / CPU time: accompaniment per step ${(perStep(gpu) / perStep(cpu)).toFixed(1)}×, ` +
    `continuation per token ${(perToken(gpu) / perToken(cpu)).toFixed(1)}×`);
}
