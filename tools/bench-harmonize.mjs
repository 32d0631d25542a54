// How long the harmonizer takes in the page (a benchmark, not a test): a melody-only file of
// --bars bars (the bundled example's melody, written by pianoformer, its piano taken out) is
// dropped on the page on the CPU backend; its chord lane is the harmonizer's, then "Suggest
// chords" for the whole piece runs --repeats times. Prints the first call (the model reads the
// melody; its load into the Worker counted apart) and the median of the rest (the Worker keeps
// the probabilities of the melody it read, so these decode only), against the same melody
// through the native CLI (`inspect`, which harmonizes it) in the same run. Then --edits files
// of the same melody with one note moved are dropped in turn: each is a melody the model has
// not read, on a page that has harmonized before (what opening another file or editing notes
// costs once the page is warm).
// Usage: make wasm && node tools/bench-harmonize.mjs [--bars 100] [--repeats 5] [--edits 5] [--page-only]
import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer } from './serve.mjs';
import { launch } from '../tests/e2e/browser.mjs';

const args = process.argv.slice(2);
const option = (name, fallback) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : fallback);
const bars = option('--bars', 100);
const repeats = option('--repeats', 5);
const edits = option('--edits', 5);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const mod = await import('../pkg/pianoformer.js');
mod.initSync({ module: readFileSync('pkg/pianoformer_bg.wasm') });
const piece = JSON.parse(mod.readMidi(mod.exampleMidi(0, bars), 'melody.mid'));
piece.tracks = piece.tracks.filter((t) => t.role === 'melody');
const melody = Buffer.from(mod.writeMidi(JSON.stringify(piece)));
// The same melody with its (7k)th note a semitone up: a melody the model has not read.
const edited = Array.from({ length: edits }, (_, k) => {
  const copy = JSON.parse(JSON.stringify(piece));
  const notes = copy.tracks[0].notes;
  notes[(7 * (k + 1)) % notes.length][0] += 1;
  return Buffer.from(mod.writeMidi(JSON.stringify(copy)));
});

// Natively: `inspect` loads the shipped harmonizer and harmonizes the whole melody.
const dir = mkdtempSync(join(tmpdir(), 'bench-harmonize-'));
const file = join(dir, 'melody.mid');
writeFileSync(file, melody);
const env = { ...process.env, CARGO_TARGET_DIR: process.env.CARGO_TARGET_DIR ?? join(homedir(), '.cache/pianoformer/target') };
const native = [];
for (let i = 0; !args.includes('--page-only') && i < 1 + repeats; i++) {
  const t0 = performance.now();
  const r = spawnSync('cargo', ['run', '--release', '--quiet', '--', 'inspect', file], { encoding: 'utf8', env });
  if (r.status !== 0) throw new Error(`inspect failed:\n${r.stderr}`);
  if (!/harmonizer/.test(r.stdout)) throw new Error(`inspect did not use the harmonizer:\n${r.stdout}`);
  if (i > 0) native.push(performance.now() - t0);
}

const server = await startServer({ port: 0, quiet: true });
const { browser, page } = await launch({ webgpu: false, url: `http://127.0.0.1:${server.address().port}/?backend=cpu` });
try {
  await page.waitForFunction(() => document.body.dataset.state === 'ready', null, { timeout: 300_000 });
  const drop = async (bytes, name) => {
    const n = await page.evaluate(() => window.pianoformer.harmonizations.length);
    await page.evaluate(({ data, name }) => {
      const dt = new DataTransfer();
      dt.items.add(new File([new Uint8Array(data)], name));
      document.querySelector('main').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    }, { data: [...bytes], name });
    await page.waitForFunction(
      (n) => window.pianoformer.harmonizations.length > n && window.pianoformer.piece?.chordSource === 'harmonizer',
      n,
      { timeout: 120_000 },
    );
    return page.evaluate(() => window.pianoformer.harmonizations.at(-1).ms);
  };
  await drop(melody, 'melody.mid');
  for (let i = 0; i < repeats; i++) {
    const n = await page.evaluate(() => window.pianoformer.harmonizations.length);
    await page.click('#suggest-chords');
    await page.waitForFunction((n) => window.pianoformer.harmonizations.length > n, n, { timeout: 120_000 });
  }
  const runs = await page.evaluate(() => window.pianoformer.harmonizations);
  const warm = median(runs.slice(1).map((r) => r.ms));
  const changed = [];
  for (const [k, bytes] of edited.entries()) changed.push(await drop(bytes, `melody-${k}.mid`));
  console.log(`harmonizing a ${runs[0].bars}-bar melody on the page's CPU backend (Chromium, wasm, 1 thread):`);
  console.log(`  the model's load as the first file opens (fetch, load, an 8-bar warm-up on the CPU): ${runs[0].load.toFixed(1)} ms`);
  console.log(`  first (the lane as the file opens, after the model's load; the model reads the melody): ${runs[0].ms.toFixed(1)} ms`);
  console.log(`  then "Suggest chords" on the same melody (its probabilities kept: decoding only), median of ${runs.length - 1}: ${warm.toFixed(1)} ms`);
  if (changed.length) {
    console.log(`  a melody it has not read (the same one, one note moved), dropped on the warm page, median of ${changed.length}: ${median(changed).toFixed(1)} ms (${changed.map((x) => x.toFixed(0)).join(', ')})`);
  }
  if (native.length) console.log(`  natively, the whole \`inspect\` process (start, model load, harmonize, print): median ${median(native).toFixed(0)} ms`);
} finally {
  await browser.close();
  server.close();
}
