// How the roll keeps up while notes are edited in a long piece (a benchmark, not a test): the
// example song at 200 bars (melody and accompaniment, written by pianoformer itself) is dropped
// on the page (CPU backend, headless Chromium), "Edit notes" is turned on, and then
//   - a note is dragged across the roll (each pointer move previews the moved piece),
//   - the keyboard moves a selection of one note, then of every note (Ctrl+A), step by step,
//   - a stem in the velocity lane is dragged,
// while the page records the time between animation frames, and the Event Timing API the
// inputs whose handling until the next paint took 16 ms or more. Prints the figures; asserts
// nothing about time (the machine is shared).
// Usage: make wasm && node tools/bench-edit.mjs [--bars 200 | --file song.mid] [--moves 40] [--keys 20]
import { readFileSync } from 'node:fs';
import { launch, dropFile, serveApp } from '../tests/e2e/browser.mjs';

const args = process.argv.slice(2);
const option = (name, fallback) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : fallback);
const bars = option('--bars', 200);
const moves = option('--moves', 40);
const keys = option('--keys', 20);

const mod = await import('../pkg/cpu/pianoformer.js');
mod.initSync({ module: readFileSync('pkg/cpu/pianoformer_bg.wasm') });
const file = args.includes('--file') ? args[args.indexOf('--file') + 1] : null;
const midi = file ? readFileSync(file) : Buffer.from(mod.exampleMidi(0, bars));

const { server, base } = await serveApp();
const { browser, page, log } = await launch({ webgpu: false, url: `${base}?backend=cpu` });
const quantile = (xs, q) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))];

/** Runs `work` while the page records frame intervals and slow inputs; returns their figures. */
async function measured(name, work) {
  await page.evaluate(() => {
    const rec = { frames: [], slow: [], on: true };
    window.__bench = rec;
    let last = performance.now();
    const tick = (t) => {
      if (!rec.on) return;
      rec.frames.push(t - last);
      last = t;
      requestAnimationFrame(tick);
    };
    requestAnimationFrame((t) => {
      last = t;
      requestAnimationFrame(tick);
    });
    rec.observer = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) rec.slow.push({ name: e.name, duration: e.duration });
    });
    rec.observer.observe({ type: 'event', durationThreshold: 16 });
  });
  const started = Date.now();
  await work();
  await page.waitForTimeout(200);
  const rec = await page.evaluate(() => {
    const r = window.__bench;
    r.on = false;
    r.observer.disconnect();
    return { frames: r.frames, slow: r.slow };
  });
  const f = rec.frames;
  const slowest = rec.slow.reduce((m, e) => Math.max(m, e.duration), 0);
  console.log(
    `${name.padEnd(44)} ${((Date.now() - started) / 1000).toFixed(1).padStart(5)} s, ${String(f.length).padStart(4)} frames: ` +
      `interval p50 ${quantile(f, 0.5).toFixed(1)} ms, p95 ${quantile(f, 0.95).toFixed(1)} ms, max ${Math.max(...f).toFixed(1)} ms; ` +
      `inputs ≥ 16 ms to paint: ${rec.slow.length} (slowest ${slowest.toFixed(0)} ms)`,
  );
}

try {
  await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: 120_000 });
  await dropFile(page, midi, file ? 'bench.mid' : `example-${bars}.mid`);
  const { notes, length } = await page.evaluate(() => ({
    notes: window.pianoformer.piece.tracks.reduce((n, t) => n + t.notes.length, 0),
    length: window.pianoformer.piece.promptBars,
  }));
  console.log(`${file ?? 'the example'}: ${length} bars, ${notes} notes; CPU backend, headless Chromium`);
  await page.click('#edit-notes');
  // A note of the melody in the view: the first one.
  const first = await page.evaluate(() => window.pianoformer.piece.tracks.find((t) => t.role === 'melody').notes[0]);
  const at = (tick, pitch) => page.evaluate(([t, p]) => window.pianoformer.rollPoint(t, p), [tick, pitch]);
  const a = await at((first[1] + first[2]) / 2, first[0]);
  await measured(`drag a note (${moves} pointer moves)`, async () => {
    await page.mouse.move(a.x, a.y);
    await page.mouse.down();
    for (let i = 1; i <= moves; i++) await page.mouse.move(a.x + i * 6, a.y - (i % 8) * 3);
    await page.mouse.up();
  });
  const selectedStart = () => page.evaluate(() => window.pianoformer.selectedNotes()[0][1]);
  const startBefore = await selectedStart();
  await measured(`right arrow, one note selected (${keys} presses)`, async () => {
    for (let i = 0; i < keys; i++) await page.keyboard.press('ArrowRight');
  });
  if ((await selectedStart()) <= startBefore) throw new Error('the arrow keys did not move the note');
  await page.keyboard.press('Control+a');
  const highest = () => page.evaluate(() => Math.max(...window.pianoformer.piece.tracks.flatMap((t) => t.notes.map((n) => n[0]))));
  const before = await highest();
  await measured(`up arrow, all ${notes} notes selected (${keys} presses)`, async () => {
    for (let i = 0; i < keys; i++) await page.keyboard.press('ArrowUp');
  });
  if ((await highest()) !== Math.min(127, before + keys)) throw new Error('the arrow keys did not move every note');
  await page.keyboard.press('Escape');
  const v = await page.evaluate((t) => window.pianoformer.velocityPoint(t, 100), first[1]);
  await measured(`velocity lane drag (${moves} pointer moves)`, async () => {
    await page.mouse.move(v.x, v.y);
    await page.mouse.down();
    for (let i = 1; i <= moves; i++) await page.mouse.move(v.x, v.y + (i % 10) * 2);
    await page.mouse.up();
  });
  await measured('idle, for comparison (1 s)', () => page.waitForTimeout(1000));
  const errors = log.filter((l) => l.startsWith('[pageerror]'));
  if (errors.length) console.log(errors.join('\n'));
} finally {
  await browser.close();
  server.close();
}
