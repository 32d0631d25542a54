// What alternatives cost in the page, measured in one run (a benchmark, not a test): on the CPU
// backend (or `--backend gpu`), the default accompaniment model accompanies the bundled example
// song at two lengths (`--bars`, default 4 and 12) with Alternatives 1 and then K (`--k`,
// default 8), `--repeats` warm runs each (medians, the page's own timing:
// `window.pianoformer.generations[].ms`). A step's cost is the difference of the two lengths'
// times over the difference of their steps, so what a generation pays once (reading the piece,
// the prefill, the weights) falls out. On the CPU the K alternatives advance together, one
// batched step for all (each matrix read once); on WebGPU they are written one after another.
// Issue 55 asks K = 8 to cost at most 2.5x one on the CPU backend.
// Usage: make test-bundles (or make wasm) && node tools/bench-alternatives.mjs [--bars 4,12]
//        [--k 8] [--repeats 3] [--backend cpu|gpu]
import { launch, dropFile, generateOnce, serveApp } from '../tests/e2e/browser.mjs';

const args = process.argv.slice(2);
const option = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const lengths = option('--bars', '4,12').split(',').map(Number);
const k = Number(option('--k', 8));
const repeats = Number(option('--repeats', 3));
const backend = option('--backend', 'cpu');
const LIMIT = 1_800_000;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const { server, base, wasm } = await serveApp({ wasm: true });
const { browser, page } = await launch({ webgpu: backend === 'gpu', url: `${base}?backend=${backend}` });
try {
  await page.waitForFunction(() => window.pianoformer.modelReadyMs, null, { timeout: LIMIT });
  const label = await page.evaluate(() => window.pianoformer.backend.label);
  await page.selectOption('#task', 'accompaniment');
  const generate = async () => {
    const g = await generateOnce(page, { timeout: LIMIT });
    // Leave the offer: the next Generate starts from the same piece.
    await page.evaluate(() => document.getElementById('alternatives-close').click());
    return g.ms;
  };
  const times = {};
  const steps = {};
  for (const bars of lengths) {
    await dropFile(page, Buffer.from(wasm.exampleMidi(0, bars)), `alternatives-${bars}.mid`);
    await page.waitForFunction(() => !document.getElementById('generate').disabled, null, { timeout: LIMIT });
    steps[bars] = await page.evaluate(() => {
      const p = window.pianoformer.piece;
      return Math.round((p.bars.at(-1) - p.bars[0]) / (p.ppq / 4));
    });
    for (const count of [1, k]) {
      await page.fill('#alternatives', String(count));
      const runs = [];
      for (let i = 0; i <= repeats; i++) {
        const ms = await generate();
        if (i > 0) runs.push(ms); // the first warms up (model load, the wasm's tier-up)
      }
      times[`${bars}/${count}`] = median(runs);
      process.stderr.write(`${bars} bars, ${count} alternative(s): ${median(runs).toFixed(0)} ms\n`);
    }
  }
  const [a, b] = [lengths[0], lengths[lengths.length - 1]];
  const perStep = (count) => (times[`${b}/${count}`] - times[`${a}/${count}`]) / (steps[b] - steps[a]);
  const one = perStep(1);
  const many = perStep(k);
  console.log(`Accompaniment alternatives in the page on ${label} (medians of ${repeats} warm runs)\n`);
  console.log('| alternatives | ' + lengths.map((n) => `${n} bars ms`).join(' | ') + ' | ms a step (all of them) | / one |');
  console.log('|---|' + lengths.map(() => '---|').join('') + '---|---|');
  for (const count of [1, k]) {
    const row = lengths.map((n) => times[`${n}/${count}`].toFixed(0)).join(' | ');
    console.log(`| ${count} | ${row} | ${perStep(count).toFixed(3)} | ${(perStep(count) / one).toFixed(2)} |`);
  }
  console.log(`\n${k} alternatives cost ${(many / one).toFixed(2)}x one a step (issue 55: at most 2.5 on the CPU, 1.5 on WebGPU)`);
} finally {
  await browser.close();
  server.close();
}
