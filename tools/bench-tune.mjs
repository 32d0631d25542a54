// Fine-tuning speed, measured in one run (a benchmark, not a test): the page's Fine-tune panel
// in Chromium on the CPU backend and on WebGPU, against the same step natively
// (`pianoformer bench tune`): the shipped default accompaniment model (small preset) with the
// panel's defaults (4 windows of 128 steps) on five songs written by the project's own code.
// Usage: make wasm && node tools/bench-tune.mjs [--skip-gpu] [--steps 8] [--gpu-steps 3]
// Peak memory: the wasm's linear memory in the Worker (it only grows) and the native process's
// peak resident memory. WebGPU buffers live outside the wasm memory and are not counted.
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { homedir } from 'node:os';
import { startServer } from './serve.mjs';
import { launch } from '../tests/e2e/browser.mjs';

const args = process.argv.slice(2);
const skipGpu = args.includes('--skip-gpu');
const option = (name, fallback) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : fallback);
const steps = option('--steps', 8);
const gpuSteps = option('--gpu-steps', 3);
const LIMIT = 3_600_000;

const mod = await import('../pkg/pianoformer.js');
mod.initSync({ module: readFileSync('pkg/pianoformer_bg.wasm') });
const files = [0, 7, 2, 9, 4].map((key, k) => ({
  name: `song${k}.mid`,
  mimeType: 'audio/midi',
  buffer: Buffer.from(mod.exampleMidi(key, 16)),
}));

process.stderr.write('measuring natively (cargo run --release -- bench tune)…\n');
const native = JSON.parse(
  execFileSync('cargo', ['run', '--release', '--quiet', '--', 'bench', 'tune', '--json', '--steps', String(steps)], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    // The Makefile's target dir, so that a run outside make reuses its build.
    env: { ...process.env, CARGO_TARGET_DIR: process.env.CARGO_TARGET_DIR ?? `${homedir()}/.cache/pianoformer/target` },
  }),
);

const server = await startServer({ port: 0, quiet: true });
const base = `http://127.0.0.1:${server.address().port}/`;

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function measure(backend) {
  const { browser, page } = await launch({ webgpu: backend === 'gpu', url: `${base}?backend=${backend}` });
  try {
    await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: LIMIT });
    const label = await page.evaluate(() => window.pianoformer.backend.label);
    await page.setInputFiles('#tune-files', files);
    await page.waitForFunction(() => window.pianoformer.tune.files.length === 5 && window.pianoformer.tune.files.every((f) => f.trainBars), null, { timeout: LIMIT });
    // One more step than timed: the first compiles kernels and allocates.
    const n = (backend === 'gpu' ? gpuSteps : steps) + 1;
    await page.fill('#tune-steps', String(n));
    await page.click('#tune-start');
    await page.waitForFunction(() => window.pianoformer.tune.lastRun, null, { timeout: LIMIT });
    const run = await page.evaluate(() => window.pianoformer.tune.lastRun);
    if (run.state !== 'done') throw new Error(`${backend}: the run ended ${run.state}`);
    const times = run.times.slice(1);
    return { backend, label, ms: median(times), first: run.times[0], wasmMiB: run.wasmBytes / 2 ** 20, steps: times.length };
  } finally {
    await browser.close();
  }
}

const results = [];
for (const backend of skipGpu ? ['cpu'] : ['cpu', 'gpu']) {
  process.stderr.write(`measuring ${backend} in Chromium…\n`);
  results.push(await measure(backend));
}
server.close();

console.log(`Fine-tuning ${native.model}: ${native.parameters} parameters, batch ${native.batch} × ${native.window} steps\n`);
console.log('| where | ms per step (median) | steps/s | vs native | first step | peak memory |');
console.log('|---|---|---|---|---|---|');
const mib = (x) => (x ? `${x.toFixed(0)} MiB` : '—');
console.log(
  `| native, ${native.backend.kind === 'cpu' ? 'CPU' : native.backend.kind} (${steps} steps) | ${native.ms_per_step.toFixed(0)} | ${native.steps_per_second.toFixed(2)} | 1× | — | ${mib(native.peak_rss_mib)} (process) |`,
);
for (const r of results) {
  console.log(
    `| Chromium, ${r.label} (${r.steps} steps) | ${r.ms.toFixed(0)} | ${(1000 / r.ms).toFixed(2)} | ${(r.ms / native.ms_per_step).toFixed(1)}× slower | ${(r.first / 1000).toFixed(1)} s | ${mib(r.wasmMiB)} (wasm memory) |`,
  );
}
