// The page's performance, measured in one run (a benchmark, not a test), against the same work
// natively in the same run: the bundles' sizes, the time from page load to ready, and on the
// CPU backend and on WebGPU in one Chromium build an accompaniment (16 bars, and a whole 64-bar
// song on the CPU), the page's default continuation (8 new bars after the 16-bar song), and
// fine-tuning steps, all with the default models and the bundled example song.
// Usage: make wasm && node tools/bench-page.mjs [--skip-gpu] [--bars 16] [--long-bars 64]
//        [--gpu-bars 4] [--new-bars 8] [--gpu-new-bars 2] [--tune-steps 8] [--gpu-tune-steps 2]
//        [--repeats 3]
// Native figures come from the release CLI (`cargo run --release`; $PIANOFORMER_BIN, a built
// binary, instead): `generate --json` on the same MIDI file with the same options, and
// `bench tune --json`. `make test` runs it once at toy size on the test bundles (no timing
// asserted), so that a change that breaks it fails there. On a machine without a GPU, WebGPU is
// SwiftShader (software): far slower, so on WebGPU the work is smaller and compared per step,
// token or optimiser step.
import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { startServer } from './serve.mjs';
import { generateOnce, launch } from '../tests/e2e/browser.mjs';

const args = process.argv.slice(2);
const skipGpu = args.includes('--skip-gpu');
const option = (name, fallback) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : fallback);
const newBars = option('--new-bars', 8);
const gpuNewBars = option('--gpu-new-bars', 2);
const bars = option('--bars', 16);
const longBars = option('--long-bars', 64);
const gpuBars = option('--gpu-bars', 4);
const tuneSteps = option('--tune-steps', 8);
const gpuTuneSteps = option('--gpu-tune-steps', 2);
// Warm runs of each measurement (page and native), of which the median is reported: this
// machine is shared and one run moves by a third.
const repeats = option('--repeats', 3);
const LIMIT = 3_600_000;

const bundles = ['pkg/cpu', 'pkg'].map((dir) => {
  const bytes = readFileSync(`${dir}/pianoformer_bg.wasm`);
  return { dir, raw: bytes.length, gz: gzipSync(bytes, { level: 9 }).length };
});
const manifest = JSON.parse(readFileSync('www/models/manifest.json', 'utf8'));
const defaults = manifest.models.filter((m) => m.default);
const mod = await import('../pkg/pianoformer.js');
mod.initSync({ module: readFileSync('pkg/pianoformer_bg.wasm') });
const midiOf = (n, key = 0) => Buffer.from(mod.exampleMidi(key, n));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// ------------------------------------------------------------------ natively

// The release CLI: its stdout (`bench tune --json`) or its report line on stderr (`generate`).
// The Makefile's target dir, so that a run outside make reuses its build.
const env = { ...process.env, CARGO_TARGET_DIR: process.env.CARGO_TARGET_DIR ?? join(homedir(), '.cache/pianoformer/target') };
function pianoformer(rest, stream) {
  const bin = process.env.PIANOFORMER_BIN;
  const r = bin
    ? spawnSync(bin, rest, { encoding: 'utf8', env })
    : spawnSync('cargo', ['run', '--release', '--quiet', '--', ...rest], { encoding: 'utf8', env });
  if (r.status !== 0) throw new Error(`pianoformer ${rest.join(' ')} failed:\n${r.stderr}`);
  return r[stream];
}
process.stderr.write(`measuring natively (${process.env.PIANOFORMER_BIN ?? 'cargo run --release'})…\n`);
const dir = mkdtempSync(join(tmpdir(), 'bench-page-'));
// One run to warm the file caches, then `repeats` more: their JSON reports, for the median.
const nativeReports = (rest) => {
  pianoformer([...rest, '--json'], 'stdout');
  return Array.from({ length: repeats }, () => JSON.parse(pianoformer([...rest, '--json'], 'stdout')));
};
const native = {};
for (const [name, n] of [['short', bars], ['long', longBars]].filter(([, n]) => n > 0)) {
  const file = join(dir, `${name}.mid`);
  writeFileSync(file, midiOf(n));
  const acc = nativeReports(['generate', '--task', 'accompaniment', '-o', join(dir, 'a.mid'), file]);
  native[`acc${name}`] = (median(acc.map((r) => r.seconds)) * 1000) / (n * 16);
  if (name === 'short') {
    const cont = nativeReports(['generate', '--task', 'continuation', '--bars', String(newBars), '-o', join(dir, 'c.mid'), file]);
    native.token = median(cont.map((r) => (r.seconds * 1000) / r.pieces[0].tokens.added));
  }
}
native.tune = JSON.parse(pianoformer(['bench', 'tune', '--json', '--steps', String(tuneSteps)], 'stdout'));
// A figure that cannot be read is a broken benchmark, not a number to print.
for (const [what, v] of Object.entries({ ...native, tune: native.tune.ms_per_step })) {
  if (!Number.isFinite(v)) throw new Error(`the native ${what} figure is ${v}: the CLI's report changed shape`);
}

// ------------------------------------------------------------------ in Chromium

const server = await startServer({ port: 0, quiet: true });
const base = `http://127.0.0.1:${server.address().port}/`;

async function measure(backend) {
  const gpu = backend === 'gpu';
  const { browser, page } = await launch({ webgpu: gpu, url: `${base}?backend=${backend}` });
  try {
    const start = Date.now();
    await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: LIMIT });
    const readyMs = Date.now() - start;
    // The chosen model (the accompaniment default) comes in right after.
    await page.waitForFunction(() => window.pianoformer.modelReadyMs, null, { timeout: LIMIT });
    const modelMs = Date.now() - start;
    const label = await page.evaluate(() => window.pianoformer.backend.label);
    const drop = async (data, name) => {
      await page.evaluate(
        ({ data, name }) => {
          const dt = new DataTransfer();
          dt.items.add(new File([new Uint8Array(data)], name));
          document.querySelector('main').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
        },
        { data: [...data], name },
      );
      await page.waitForFunction((name) => window.pianoformer.piece?.name === name, name, { timeout: 60_000 });
    };
    // A first run (it includes the model's download and load, and the wasm's tier-up), then
    // `repeats` more: warm is their median.
    // `length`: a continuation's new bars (the page's Length field counts bars).
    const run = async (task, length) => {
      await page.selectOption('#task', task);
      if (length) await page.fill('#length', String(length));
      const times = [];
      for (let i = 0; i < 1 + repeats; i++) {
        times.push(await generateOnce(page, { timeout: LIMIT, what: `${backend} ${task}` }));
      }
      const warm = times.slice(1).sort((a, b) => a.ms - b.ms);
      return { first: times[0], warm: warm[Math.floor(warm.length / 2)] };
    };
    const n = gpu ? gpuBars : bars;
    await drop(midiOf(n), 'bench.mid');
    const acc = await run('accompaniment');
    const cont = await run('continuation', gpu ? gpuNewBars : newBars);
    let long = null;
    if (!gpu && longBars) {
      await drop(midiOf(longBars), 'long.mid');
      long = await run('accompaniment');
    }
    // Fine-tuning: five 16-bar songs, the panel's defaults, one more step than timed (the
    // first compiles kernels and allocates).
    const files = [0, 7, 2, 9, 4].map((key, k) => ({ name: `song${k}.mid`, mimeType: 'audio/midi', buffer: midiOf(16, key) }));
    await page.setInputFiles('#tune-files', files);
    await page.waitForFunction(
      () => window.pianoformer.tune.files.length === 5 && window.pianoformer.tune.files.every((f) => f.trainBars),
      null,
      { timeout: LIMIT },
    );
    await page.fill('#tune-steps', String((gpu ? gpuTuneSteps : tuneSteps) + 1));
    await page.click('#tune-start');
    await page.waitForFunction(() => window.pianoformer.tune.lastRun, null, { timeout: LIMIT });
    const tuneRun = await page.evaluate(() => window.pianoformer.tune.lastRun);
    if (tuneRun.state !== 'done') throw new Error(`${backend}: the fine-tuning run ended ${tuneRun.state}`);
    const tune = median(tuneRun.times.slice(1));
    return { backend, label, readyMs, modelMs, acc, cont, long, tune, bars: n };
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

// ------------------------------------------------------------------ the report

const kib = (n) => `${(n / 1024).toFixed(0)} KiB`;
for (const b of bundles) {
  const what = b.dir === 'pkg' ? 'with WebGPU' : 'CPU only, what the page starts on';
  console.log(`wasm ${b.dir}/ (${what}): ${kib(b.raw)} (${kib(b.gz)} gzipped)`);
}
for (const m of defaults) console.log(`model ${m.name}: ${(m.bytes / 1e6).toFixed(2)} MB`);
console.log('');
const s = (ms) => `${(ms / 1000).toFixed(2)} s`;
const x = (a, b) => `${(a / b).toFixed(1)}×`;
console.log('| backend | ready / model loaded | accompaniment, first / warm | ms a step (vs native) | continuation, first / warm | ms a token (vs native) | fine-tune ms a step (vs native) |');
console.log('|---|---|---|---|---|---|---|');
console.log(
  `| native CLI (${native.tune.backend.kind === 'cpu' ? 'CPU' : native.tune.backend.kind}) | — | ${bars} bars | ${native.accshort.toFixed(2)} | ${newBars} new bars | ${native.token.toFixed(2)} | ${native.tune.ms_per_step.toFixed(0)} |`,
);
for (const r of results) {
  const step = r.acc.warm.ms / (r.bars * 16);
  const token = r.cont.warm.ms / r.cont.warm.tokens;
  console.log(
    `| ${r.label} | ${s(r.readyMs)} / ${s(r.modelMs)} | ${r.bars} bars: ${s(r.acc.first.ms)} / ${s(r.acc.warm.ms)} | ${step.toFixed(2)} (${x(step, native.accshort)}) | ` +
      `${r.cont.warm.tokens} tokens: ${s(r.cont.first.ms)} / ${s(r.cont.warm.ms)} | ${token.toFixed(2)} (${x(token, native.token)}) | ` +
      `${r.tune.toFixed(0)} (${x(r.tune, native.tune.ms_per_step)}) |`,
  );
}
const cpu = results.find((r) => r.backend === 'cpu');
if (cpu?.long) {
  const step = cpu.long.warm.ms / (longBars * 16);
  console.log(
    `\nA whole ${longBars}-bar song on the CPU in the page: ${s(cpu.long.first.ms)} first, ${s(cpu.long.warm.ms)} warm ` +
      `(${step.toFixed(2)} ms a step; natively ${native.acclong.toFixed(2)}, ${x(step, native.acclong)}).`,
  );
}
