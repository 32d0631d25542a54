// Live playing in the page (a benchmark, not a test): for each tempo, a melody-only file at that
// tempo (the bundled example's melody, written by pianoformer) is dropped on the page on the
// CPU backend (headless Chromium, wasm), and a fake MIDI keyboard plays its melody back into a
// take of --minutes with "Piano plays along live" on. Prints, per tempo: sixteenths decided,
// the share whose notes were ready before their sixteenth began (hit rate), the decision
// latency (the page's request to the Worker's reply: p50, p99, max), the Worker's own time per
// step, and the melody's key-to-sound delay (the key event's time to the moment the page
// sounded it). --backend gpu runs the page on WebGPU (SwiftShader on a machine without a GPU)
// instead. Usage: make wasm && node tools/bench-live.mjs [--minutes 5] [--bpm 120,160]
// [--backend cpu|gpu]
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { startServer } from './serve.mjs';
import { dropFile, launch } from '../tests/e2e/browser.mjs';
import { fakeMidi, melodyFile, playLiveTake } from '../tests/e2e/live-take.mjs';
import { quantile } from '../www/live-plan.js';

const args = process.argv.slice(2);
const option = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const minutes = Number(option('--minutes', '5'));
const tempos = option('--bpm', '120,160').split(',').map(Number);
const backend = option('--backend', 'cpu');
if (!['cpu', 'gpu'].includes(backend)) throw new Error(`--backend is cpu or gpu, not ${backend}`);

const wasm = await import('../pkg/pianoformer.js');
wasm.initSync({ module: readFileSync('pkg/pianoformer_bg.wasm') });
const server = await startServer({ port: 0, quiet: true });
const base = `http://127.0.0.1:${server.address().port}/`;
const rows = [];
try {
  for (const bpm of tempos) {
    const bars = Math.ceil((minutes * bpm) / 4) + 2;
    const file = melodyFile(wasm, { bars, bpm });
    const { browser, page, log } = await launch({ webgpu: backend === 'gpu', url: `${base}?backend=${backend}`, init: fakeMidi });
    try {
      await page.waitForFunction(() => document.body.dataset.state === 'ready', null, { timeout: 300_000 });
      const label = await page.evaluate(() => window.pianoformer.backend?.label ?? window.pianoformer.backend?.kind);
      await dropFile(page, file.bytes, `live-${bpm}.mid`);
      await page.click('#midi-connect');
      const live = await playLiveTake(page, { notes: file.notes, ppq: file.ppq, bpm, seconds: minutes * 60 });
      const errors = log.filter((l) => l.startsWith('[pageerror]'));
      if (errors.length) throw new Error(errors.join('\n'));
      const ms = (xs, q) => quantile(xs, q).toFixed(2);
      rows.push({
        backend: label,
        bpm,
        minutes,
        sixteenthMs: 15000 / bpm,
        steps: live.steps,
        hitRate: live.hits / live.steps,
        late: live.late,
        latency: { p50: ms(live.latencies, 0.5), p99: ms(live.latencies, 0.99), max: ms(live.latencies, 1) },
        worker: { p50: ms(live.workerMs, 0.5), p99: ms(live.workerMs, 0.99), max: ms(live.workerMs, 1) },
        keyToSound: { p50: ms(live.keyDelays, 0.5), p99: ms(live.keyDelays, 0.99), max: ms(live.keyDelays, 1) },
        keys: live.keyDelays.length,
        pianoNotes: live.notes,
        lateSteps: live.lateSteps,
      });
    } finally {
      await browser.close();
    }
  }
} finally {
  server.close();
}
console.log(`Live playing in headless Chromium, ${minutes}-minute takes`);
console.log('| backend | bpm | sixteenth | sixteenths | in time | late | decision p50 / p99 / max | Worker per step p50 / p99 / max | key-to-sound p50 / p99 / max | piano notes |');
console.log('|---|---|---|---|---|---|---|---|---|---|');
for (const r of rows) {
  console.log(
    `| ${r.backend} | ${r.bpm} | ${r.sixteenthMs.toFixed(1)} ms | ${r.steps} | ${(100 * r.hitRate).toFixed(2)} % | ${r.late} | ` +
      `${r.latency.p50} / ${r.latency.p99} / ${r.latency.max} ms | ${r.worker.p50} / ${r.worker.p99} / ${r.worker.max} ms | ` +
      `${r.keyToSound.p50} / ${r.keyToSound.p99} / ${r.keyToSound.max} ms | ${r.pianoNotes} |`,
  );
}
mkdirSync('target', { recursive: true });
writeFileSync('target/bench-live.json', JSON.stringify(rows, null, 2));
