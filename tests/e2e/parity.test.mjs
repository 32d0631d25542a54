// End-to-end: one path for every caller. The page's Generate on the CPU backend and the CLI's
// `generate` (the native binary the native tests built, src/bin/pianoformer/generate.rs) write
// the same notes for the same piece, model, seed and settings (the page's defaults on both
// sides): on the first 16 bars of three POP909 test songs (cut by the project's own MIDI code),
// an accompaniment of the whole piece, an 8-bar continuation after it, and a continuation of
// bars 5–8 only ("Regenerate these bars" / `--bars 5-8`), bars 9–12 played like bars 1–4 ("Use
// as texture" / `--texture-from`) and the whole piece like the gallery's arpeggio (`--texture`);
// and on one song's melody alone, whose
// chord lane the harmonizer fills on both sides first. Skips, saying so, without POP909.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { dropFile, launch, serveApp } from './browser.mjs';

const SLOW = 300_000;
const POP909 = process.env.POP909_DIR ?? '../shared/data/pop909';
const BIN = resolve(process.env.CARGO_TARGET_DIR ?? 'target', 'debug', 'pianoformer');
// Test songs (id % 10 == 0), never trained on, whose melody enters within their first 16 bars.
const SONGS = ['010', '030', '770'];
const missing = !existsSync(join(POP909, 'songs'))
  ? `POP909 not found at ${POP909} (set POP909_DIR)`
  : !existsSync(BIN)
    ? `${BIN} is missing: build the CLI first (make test-native, or cargo build --bin pianoformer)`
    : null;

let server;
let base;
let wasm;
let dir;

before(async () => {
  ({ server, base, wasm } = await serveApp({ wasm: true }));
  dir = mkdtempSync(join(tmpdir(), 'pianoformer-parity-'));
});

after(() => {
  server?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A file's first `bars` bars (notes starting before, cut at the bar line), as MIDI bytes. */
function firstBars(bytes, name, bars, keep = () => true) {
  const piece = JSON.parse(wasm.readMidi(bytes, name));
  const end = piece.bars[bars];
  piece.tracks = piece.tracks.filter(keep);
  for (const t of piece.tracks) {
    t.notes = t.notes.filter((n) => n[1] < end).map((n) => [n[0], n[1], Math.min(n[2], end), n[3]]);
  }
  piece.endTick = end;
  return wasm.writeMidi(JSON.stringify(piece));
}

/**
 * The notes of track `track` once the piece is written as MIDI and read back (as the CLI's
 * output is: a file keeps track names, not roles), sorted, as 'pitch start end velocity'.
 */
function trackNotes(piece, track) {
  const back = JSON.parse(wasm.readMidi(wasm.writeMidi(JSON.stringify(piece)), 'back.mid'));
  return back.tracks
    .filter((t) => t.name === track)
    .flatMap((t) => t.notes.map((n) => n.join(' ')))
    .sort();
}

/** The pedal events of track `track` once the piece is written as MIDI and read back. */
function trackPedal(piece, track) {
  const back = JSON.parse(wasm.readMidi(wasm.writeMidi(JSON.stringify(piece)), 'back.mid'));
  return back.tracks.filter((t) => t.name === track).flatMap((t) => t.pedal ?? []);
}

/** `generate` on `file` for `task` with the page's defaults (and `args`); its piece. */
function cli(file, task, args = []) {
  const out = join(dir, `out-${task}.mid`);
  execFileSync(BIN, ['generate', '--task', task, file, '-o', out, ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, PIANOFORMER_MODELS: resolve('www/models') },
  });
  return JSON.parse(wasm.readMidi(readFileSync(out), 'out.mid'));
}

/** Presses `button` and returns the piece once the generation is in (failing on an error). */
async function generated(page, log, button = '#generate') {
  const n = await page.evaluate(() => window.pianoformer.generations.length);
  await page.click(button);
  await page.waitForFunction(
    (n) => window.pianoformer.generations.length > n || !document.getElementById('error').hidden,
    n,
    { timeout: SLOW },
  );
  const error = await page.evaluate(() => (document.getElementById('error').hidden ? null : window.pianoformer.error));
  assert.equal(error, null, log.join('\n'));
  return page.evaluate(() => window.pianoformer.piece);
}

/** Undoes the generation just written: the piece has no generated track again. */
async function undone(page) {
  await page.click('#undo');
  await page.waitForFunction(() => window.pianoformer.piece.tracks.every((t) => t.role !== 'generated'));
}

/** Selects `count` bars from bar `from` (from 0) in the chord lane. */
async function selectBars(page, from, count) {
  await page.focus('canvas[aria-label^="Chord lane"]');
  await page.keyboard.press('Home');
  for (let i = 0; i < from; i++) await page.keyboard.press('ArrowRight');
  for (let i = 0; i < count - 1; i++) await page.keyboard.press('Shift+ArrowRight');
}

test('the page and the CLI write the same notes', { skip: missing ?? false, timeout: 6 * SLOW }, async () => {
  const { browser, page, log } = await launch({ webgpu: false, url: `${base}?backend=cpu` });
  try {
    await page.waitForFunction(() => document.body.dataset.state === 'ready', null, { timeout: SLOW });
    const cases = SONGS.map((id) => ({ id, keep: undefined, tasks: ['accompaniment', 'continuation', 'region'] }));
    // Texture you choose: bars 1-4 of the pianist's part "Use as texture", then bars 9-12
    // regenerated like them (`--texture-from FILE:1-4 --bars 9-12`); a gallery texture over
    // the whole piece (`--texture arpeggio`).
    cases[0].tasks.push('texture', 'gallery');
    cases.push({ id: SONGS[0], keep: (t) => t.role === 'melody', tasks: ['accompaniment'], melody: true });
    for (const { id, keep, tasks, melody } of cases) {
      const name = `${id}${melody ? '-melody' : ''}.mid`;
      const bytes = firstBars(readFileSync(join(POP909, 'songs', id, `${id}.mid`)), name, 16, keep);
      const file = join(dir, name);
      writeFileSync(file, bytes);
      await dropFile(page, bytes, name);
      await page.waitForFunction((n) => window.pianoformer.piece?.name === n, name);
      if (melody) {
        await page.waitForFunction(() => window.pianoformer.piece.chordSource === 'harmonizer', null, { timeout: SLOW });
      }
      for (const task of tasks) {
        const accompanies = ['texture', 'gallery'].includes(task);
        await page.selectOption('#task', task === 'region' ? 'continuation' : accompanies ? 'accompaniment' : task);
        let shown;
        let made;
        if (task === 'region') {
          // Bars 5–8 selected in the chord lane, then "Regenerate these bars".
          await page.focus('canvas[aria-label^="Chord lane"]');
          await page.keyboard.press('Home');
          for (let i = 0; i < 4; i++) await page.keyboard.press('ArrowRight');
          for (let i = 0; i < 3; i++) await page.keyboard.press('Shift+ArrowRight');
          await page.waitForFunction(() => !document.getElementById('regen-bars').disabled);
          shown = await generated(page, log, '#regen-bars');
          assert.deepEqual((await page.evaluate(() => window.pianoformer.generations.at(-1))).region, [4, 8]);
          made = cli(file, 'continuation', ['--bars', '5-8']);
        } else if (task === 'texture') {
          await selectBars(page, 0, 4);
          await page.waitForFunction(() => !document.getElementById('use-texture').disabled);
          await page.click('#use-texture');
          await page.waitForFunction(() => document.getElementById('texture').value === 'chosen');
          await selectBars(page, 8, 4);
          shown = await generated(page, log, '#regen-bars');
          made = cli(file, 'accompaniment', ['--texture-from', `${file}:1-4`, '--bars', '9-12']);
          await page.selectOption('#texture', '');
        } else if (task === 'gallery') {
          await page.selectOption('#texture', 'arpeggio');
          shown = await generated(page, log);
          made = cli(file, 'accompaniment', ['--texture', 'arpeggio']);
          await page.selectOption('#texture', '');
        } else {
          shown = await generated(page, log);
          made = cli(file, task);
        }
        const track = shown.tracks.find((t) => t.role === 'generated').name;
        const [a, b] = [trackNotes(shown, track), trackNotes(made, track)];
        assert.ok(a.length > 0, `${name} ${task}: the page wrote notes`);
        assert.deepEqual(a, b, `${name} ${task}: the page's ${a.length} notes and the CLI's ${b.length}`);
        // The written piano's learnt sustain pedal too (both read the manifest's pedal model).
        const [pa, pb] = [trackPedal(shown, track), trackPedal(made, track)];
        assert.deepEqual(pa, pb, `${name} ${task}: the page's ${pa.length} pedal events and the CLI's ${pb.length}`);
        console.log(`${name} ${task}: the same ${a.length} notes and ${pa.length} pedal events from the page and the CLI`);
        await undone(page);
      }
    }
  } finally {
    await browser.close();
  }
});
