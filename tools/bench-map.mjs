// What redrawing the attention map costs in the page against the generation that drew it,
// measured in one run (a benchmark, not a test): on the CPU backend (or `--backend gpu`), the
// default models, the bundled example song at each length of `--bars` (16 and 64), an
// accompaniment and a continuation (the page's default length) are generated `--repeats`
// times after a warm-up; after each, the Head control changes twice: the first map over the
// notes just written is one teacher-forced pass (the Worker's `attention`), the second reads
// the features that pass kept. The figure is the median time of the second over the median
// generation time, as the page's own status records them (`window.pianoformer.generations[].ms`,
// `attentionMaps[].ms`; a map's time includes its transfer and binning). Issue 54 asks for at
// most 1/10.
// Usage: make test-bundles (or make wasm) && node tools/bench-map.mjs [--bars 16,64] [--repeats 3]
//        [--backend cpu|gpu]
import { launch, dropFile, generateOnce, serveApp } from '../tests/e2e/browser.mjs';

const args = process.argv.slice(2);
const option = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const lengths = option('--bars', '16,64').split(',').map(Number);
const repeats = Number(option('--repeats', 3));
const backend = option('--backend', 'cpu');
const LIMIT = 1_800_000;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const { server, base, wasm } = await serveApp({ wasm: true });
const { browser, page } = await launch({ webgpu: backend === 'gpu', url: `${base}?backend=${backend}` });
const rows = [];
try {
  await page.waitForFunction(() => window.pianoformer.modelReadyMs, null, { timeout: LIMIT });
  const label = await page.evaluate(() => window.pianoformer.backend.label);
  const heads = await page.$$eval('#att-head option', (options) => options.map((o) => o.value));
  let head = 0;
  const generate = async () => (await generateOnce(page, { timeout: LIMIT })).ms;
  const redraw = async () => {
    const n = await page.evaluate(() => window.pianoformer.attentionMaps.length);
    head = (head + 1) % heads.length;
    await page.selectOption('#att-head', heads[head]);
    await page.waitForFunction((n) => window.pianoformer.attentionMaps.length > n, n, { timeout: LIMIT });
    return page.evaluate(() => window.pianoformer.attentionMaps.at(-1));
  };
  for (const bars of lengths) {
    for (const task of ['accompaniment', 'continuation']) {
      await dropFile(page, Buffer.from(wasm.exampleMidi(0, bars)), `bench-${bars}-${task}.mid`);
      await page.selectOption('#task', task);
      await page.waitForFunction(() => !document.getElementById('generate').disabled, null, { timeout: LIMIT });
      const generations = [];
      const firsts = [];
      const maps = [];
      let steps = 0;
      for (let i = 0; i <= repeats; i++) {
        const g = await generate();
        // The first map over the notes just written runs the model; the next head reads the
        // features that pass kept.
        const first = await redraw();
        const m = await redraw();
        if (i === 0) continue; // the warm-up (model load, the wasm's tier-up)
        generations.push(g);
        firsts.push(first.ms);
        maps.push(m.ms);
        steps = m.rows;
      }
      const gen = median(generations);
      const first = median(firsts);
      const map = median(maps);
      rows.push({ task, bars, steps, gen, first, map, ratio: map / gen });
      process.stderr.write(`${task}, ${bars} bars: generation ${gen.toFixed(0)} ms, maps ${first.toFixed(0)} / ${map.toFixed(0)} ms\n`);
    }
  }
  console.log(`The attention map redrawn in the page (a Head change) against the generation before it, on ${label}`);
  console.log(`(medians of ${repeats} warm runs each)\n`);
  console.log('| task | song bars | map rows (steps or tokens) | generation ms | first map over new notes ms (/ generation) | another head ms | another head / generation |');
  console.log('|---|---|---|---|---|---|---|');
  for (const r of rows) {
    console.log(
      `| ${r.task} | ${r.bars} | ${r.steps} | ${r.gen.toFixed(0)} | ${r.first.toFixed(0)} (${(r.first / r.gen).toFixed(2)}) | ${r.map.toFixed(0)} | ${r.ratio.toFixed(3)} |`,
    );
  }
  console.log(`\nlargest ratio ${Math.max(...rows.map((r) => r.ratio)).toFixed(3)} (issue 54: at most 0.1)`);
} finally {
  await browser.close();
  server.close();
}
