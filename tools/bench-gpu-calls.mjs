// What the page asks of WebGPU per unit of work (a benchmark, not a test; issue 35): the
// compute dispatches, queue submissions, buffer read-backs (mapAsync), buffer writes and
// buffers created per accompaniment step, per continuation token and per fine-tuning step,
// with the default models on the page's WebGPU backend. These counts do not depend on the
// GPU — SwiftShader here issues the same calls a hardware adapter would — and on a real GPU
// each dispatch costs tens of microseconds and each read-back milliseconds, so they are what
// bounds a small model there.
//
// How: the page's Worker is instrumented from Playwright (`worker.evaluate`) by wrapping the
// WebGPU prototypes' methods with counters; each piece of work is run twice with different
// lengths, and the difference of the counts over the difference of the lengths is the cost
// per step or token (what a generation costs once, whatever its length — the prompt's
// prefill, the model's upload — falls out).
// The accompaniment and continuation run first on a page opened with `?fused=0` (tensor ops,
// the code before issue 35's fused steps), then as shipped, and their time per step or token
// is compared.
// With `--alternatives K` the fused accompaniment also runs with Alternatives K (K pieces, one
// workgroup each in the same dispatches; issue 55): the calls per step should not grow with K.
// Usage: make wasm && node tools/bench-gpu-calls.mjs [--bars 1,2] [--tokens 32,96] [--tune-steps 2,3]
//          [--accompaniment-only | --no-tuning | --tuning-only] [--alternatives 8]
import { readFileSync } from 'node:fs';
import { startServer } from './serve.mjs';
import { launch } from '../tests/e2e/browser.mjs';

const args = process.argv.slice(2);
const pair = (name, fallback) => {
  const v = args.includes(name) ? args[args.indexOf(name) + 1].split(',').map(Number) : fallback;
  if (v.length !== 2 || !(v[1] > v[0]) || v.some((x) => !(x > 0))) throw new Error(`${name}: two increasing lengths, e.g. ${fallback}`);
  return v;
};
const bars = pair('--bars', [1, 2]);
const tokens = pair('--tokens', [32, 96]);
const tuneSteps = pair('--tune-steps', [2, 3]);
const LIMIT = 3_600_000;

const mod = await import('../pkg/pianoformer.js');
mod.initSync({ module: readFileSync('pkg/pianoformer_bg.wasm') });
const midiOf = (n, key = 0) => Buffer.from(mod.exampleMidi(key, n));

// Runs in the Worker: wraps each counted method once and keeps the tallies on globalThis.
function instrument() {
  if (globalThis.__gpuCalls) return true;
  if (!globalThis.GPUQueue) return false;
  const counts = {};
  globalThis.__gpuCalls = counts;
  const wrap = (cls, method, key) => {
    const proto = globalThis[cls]?.prototype;
    const original = proto?.[method];
    if (typeof original !== 'function') return;
    counts[key] = 0;
    proto[method] = function (...a) {
      counts[key]++;
      return original.apply(this, a);
    };
  };
  wrap('GPUComputePassEncoder', 'dispatchWorkgroups', 'dispatches');
  wrap('GPUComputePassEncoder', 'dispatchWorkgroupsIndirect', 'dispatches');
  wrap('GPUQueue', 'submit', 'submits');
  wrap('GPUBuffer', 'mapAsync', 'readBacks');
  wrap('GPUQueue', 'writeBuffer', 'writes');
  wrap('GPUCommandEncoder', 'copyBufferToBuffer', 'copies');
  wrap('GPUDevice', 'createBuffer', 'buffers');
  wrap('GPUDevice', 'createBindGroup', 'bindGroups');
  wrap('GPUDevice', 'createComputePipeline', 'pipelines');
  return true;
}

const server = await startServer({ port: 0, quiet: true });
// Opens the page on WebGPU (`query` added to the URL) with its Worker instrumented; returns
// `generate(task, file, length)`, the counts and page time of one generation.
async function openPage(query) {
  const { browser, page } = await launch({ webgpu: true, url: `http://127.0.0.1:${server.address().port}/?backend=gpu${query}` });
  await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: LIMIT });
  await page.waitForFunction(() => window.pianoformer.modelReadyMs, null, { timeout: LIMIT });
  // The backend self-check runs after the page is ready: its dispatches are not the work's.
  await page.waitForFunction(() => window.pianoformer.check, null, { timeout: LIMIT });
  const label = await page.evaluate(() => window.pianoformer.backend.label);
  if (!(await page.evaluate(() => window.pianoformer.backend.kind === 'gpu'))) throw new Error(`the page is not on WebGPU: ${label}`);
  const workers = page.workers();
  if (workers.length !== 1) throw new Error(`expected the page's one Worker, found ${workers.length}`);
  const worker = workers[0];
  if (!(await worker.evaluate(instrument))) throw new Error('the Worker has no WebGPU to count');
  const counts = () => worker.evaluate(() => ({ ...globalThis.__gpuCalls }));
  const minus = (a, b) => Object.fromEntries(Object.keys(a).map((k) => [k, a[k] - (b[k] ?? 0)]));

  const drop = async (bytes, name) => {
    await page.evaluate(
      ({ data, name }) => {
        const dt = new DataTransfer();
        dt.items.add(new File([new Uint8Array(data)], name));
        document.querySelector('main').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
      },
      { data: [...bytes], name },
    );
    await page.waitForFunction((name) => window.pianoformer.piece?.name === name, name, { timeout: 60_000 });
  };
  // The counts of one generation from `file` (dropped again before each run, so that every
  // run starts from the same piece): a warm-up run first (kernels compiled, buffers pooled),
  // then the counted one, whose time the page reports (`ms`).
  const generate = async (task, file, length, alternatives = null) => {
    let before = null;
    let g = null;
    for (let i = 0; i < 2; i++) {
      await drop(file.bytes, `${file.name}-${i}.mid`);
      await page.selectOption('#task', task);
      if (length) await page.fill('#length', String(length));
      await page.fill('#alternatives', alternatives ? String(alternatives) : '');
      const n = await page.evaluate(() => window.pianoformer.generations.length);
      before = await counts();
      await page.click('#generate');
      await page.waitForFunction(
        (n) => window.pianoformer.generations.length > n || !document.getElementById('error').hidden,
        n,
        { timeout: LIMIT },
      );
      g = await page.evaluate(() => window.pianoformer.generations.at(-1) ?? { error: window.pianoformer.error });
      if (g.error) throw new Error(`${task}: ${g.error}`);
    }
    return { counts: { ...minus(await counts(), before), ms: g.ms }, generation: g };
  };
  return { browser, page, label, counts, minus, generate };
}

const accompanimentOnly = args.includes('--accompaniment-only');
// Accompaniment: the bundled example of bars[0] and bars[1] bars (16 steps a bar); continuation:
// tokens[0] and tokens[1] new tokens after the same 2-bar prompt.
const generations = async (generate) => {
  const acc = [];
  for (const n of bars) acc.push(await generate('accompaniment', { bytes: midiOf(n), name: `acc-${n}` }));
  const cont = [];
  if (!accompanimentOnly) {
    for (const n of tokens) cont.push(await generate('continuation', { bytes: midiOf(2), name: `prompt-${n}` }, n));
  }
  return { acc, cont };
};

const tuningOnly = args.includes('--tuning-only');
// Through tensor ops first (`?fused=0`), on a page of its own.
let tensor = { acc: [], cont: [] };
if (!tuningOnly) {
  const before = await openPage('&fused=0');
  try {
    tensor = await generations(before.generate);
  } finally {
    await before.browser.close();
  }
}

const { browser, page, label, counts, minus, generate } = await openPage('');
try {
  const perUnit = (a, b, units) => Object.fromEntries(Object.keys(a.counts).map((k) => [k, (b.counts[k] - a.counts[k]) / units]));
  const rows = [];

  if (!tuningOnly) {
    const fused = await generations(generate);
    const accSteps = (bars[1] - bars[0]) * 16;
    rows.push(['accompaniment step, tensor ops (`?fused=0`)', perUnit(tensor.acc[0], tensor.acc[1], accSteps), tensor.acc[1]]);
    rows.push(['accompaniment step, fused', perUnit(fused.acc[0], fused.acc[1], accSteps), fused.acc[1]]);
    const k = args.includes('--alternatives') ? Number(args[args.indexOf('--alternatives') + 1]) : 1;
    if (k > 1) {
      const together = [];
      for (const n of bars) together.push(await generate('accompaniment', { bytes: midiOf(n), name: `alt-${n}` }, null, k));
      rows.push([`accompaniment step, fused, ${k} alternatives together`, perUnit(together[0], together[1], accSteps), together[1]]);
    }
    for (const [what, cont] of [['continuation token, tensor ops (`?fused=0`)', tensor.cont], ['continuation token, fused', fused.cont]]) {
      if (!cont.length) continue;
      const made = cont.map((c) => c.generation.tokens);
      rows.push([what, perUnit(cont[0], cont[1], made[1] - made[0]), cont[1]]);
    }
  }

  if (!accompanimentOnly && !args.includes('--no-tuning')) {

  // Fine-tuning: tuneSteps[0] and tuneSteps[1] steps on two 8-bar songs.
  const files = [0, 7].map((key, k) => ({ name: `song${k}.mid`, mimeType: 'audio/midi', buffer: midiOf(8, key) }));
  await page.setInputFiles('#tune-files', files);
  await page.waitForFunction(
    () => window.pianoformer.tune.files.length === 2 && window.pianoformer.tune.files.every((f) => f.trainBars),
    null,
    { timeout: LIMIT },
  );
  // A first run (the model's training state set up on the GPU) is left out of the counts.
  const tune = [];
  for (const [i, steps] of [tuneSteps[0], ...tuneSteps].entries()) {
    await page.evaluate(() => {
      window.pianoformer.tune.lastRun = null;
    });
    const before = await counts();
    await page.fill('#tune-steps', String(steps));
    await page.click('#tune-start');
    await page.waitForFunction(() => window.pianoformer.tune.lastRun, null, { timeout: LIMIT });
    const run = await page.evaluate(() => window.pianoformer.tune.lastRun);
    if (run.state !== 'done') throw new Error(`the fine-tuning run ended ${run.state}`);
    // Its time: the page's own measure of the run's steps (ms each, the first included).
    const ms = run.times.reduce((a, b) => a + b, 0);
    if (i > 0) tune.push({ counts: { ...minus(await counts(), before), ms } });
  }
  rows.push(['fine-tuning step', perUnit(tune[0], tune[1], tuneSteps[1] - tuneSteps[0]), tune[1]]);
  }

  // Buffers and pipelines come from pools and caches: per unit they are noise, so they are
  // shown for whole runs only.
  const keys = ['dispatches', 'submits', 'readBacks', 'writes', 'copies', 'bindGroups', 'ms'];
  const all = [...keys, 'buffers', 'pipelines'];
  console.log(`WebGPU calls per unit of work, default models, ${label}:`);
  console.log(`| per | ${keys.join(' | ')} |`);
  console.log(`|---|${keys.map(() => '---').join('|')}|`);
  for (const [what, per] of rows) console.log(`| ${what} | ${keys.map((k) => (per[k] === undefined || Number.isNaN(per[k]) ? '—' : per[k].toFixed(Math.abs(per[k]) < 1 ? 3 : 1))).join(' | ')} |`);
  console.log('');
  for (const [what, unit, at] of [['accompaniment', 'step', 0], ['continuation', 'token', 2]]) {
    if (rows.length < at + 2 || !rows[at + 1][0].startsWith(what)) continue;
    const [a, b] = [rows[at][1], rows[at + 1][1]];
    console.log(
      `fused ${what}: ${(a.dispatches / b.dispatches).toFixed(0)}x fewer dispatches, ` +
        `${(a.readBacks / b.readBacks).toFixed(0)}x fewer read-backs, ` +
        `${(a.ms / b.ms).toFixed(1)}x faster a ${unit} (${a.ms.toFixed(1)} -> ${b.ms.toFixed(2)} ms)`,
    );
  }
  console.log('');
  console.log('whole runs (the longer of each pair), for reference:');
  for (const [what, , run] of rows) console.log(`  ${what}: ${all.map((k) => `${k} ${run.counts[k] ?? 0}`).join(', ')}`);
} finally {
  await browser.close();
  server.close();
}
