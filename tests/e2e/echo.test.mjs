// End-to-end: what the continuation reads of the panel. A planned repeat echoes its first
// occurrence: a piece written by the project's own code is dropped; two bars are planned after it, and in the phrase lane they start a new
// phrase with the letter of the piece's first one (the second A of A … A). The default
// continuation writes them with the page's echo (its default, chosen on validation songs) and
// with the echo at 0: with it, the planned bars (no chords planned: they take the first
// phrase's) share more of their onsets (sixteenth in the bar, pitch class) with the first
// phrase's same bars. On the CPU backend. Needs pkg/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dropFile, launch, serveApp } from './browser.mjs';

const SLOW = 300_000;
let server;
let base;
let midi;

// An opening as a person exports "the first 8 bars": its last chord rings a beat into bar 9.
let opening;

before(async () => {
  let wasm;
  ({ server, base, wasm } = await serveApp({ wasm: true }));
  midi = wasm.exampleMidi(2, 8);
  const piece = JSON.parse(wasm.readMidi(wasm.exampleMidi(9, 8), 'opening.mid'));
  const last = Math.max(...piece.tracks.flatMap((t) => t.notes.map((n) => n[1])));
  for (const t of piece.tracks) for (const n of t.notes) if (n[1] === last) n[2] = 8 * 4 * piece.ppq + piece.ppq;
  opening = wasm.writeMidi(JSON.stringify(piece));
});

after(() => server?.close());

/** F1 of two note lists' onsets as (sixteenth from `fromA` / `fromB`, pitch class). */
function onsetF1(a, fromA, b, fromB, sixteenth) {
  const set = (notes, from) => new Set(notes.map((n) => `${Math.round((n[1] - from) / sixteenth)}:${n[0] % 12}`));
  const [x, y] = [set(a, fromA), set(b, fromB)];
  if (x.size + y.size === 0) return null;
  return (2 * [...x].filter((k) => y.has(k)).length) / (x.size + y.size);
}

/** Presses Generate and returns the piece once the generation is in (failing on an error). */
async function generated(page, log) {
  const n = await page.evaluate(() => window.pianoformer.generations.length);
  await page.click('#generate');
  await page.waitForFunction(
    (n) => window.pianoformer.generations.length > n || !document.getElementById('error').hidden,
    n,
    { timeout: SLOW },
  );
  assert.equal(await page.evaluate(() => (document.getElementById('error').hidden ? null : window.pianoformer.error)), null, log.join('\n'));
  return page.evaluate(() => window.pianoformer.piece);
}

/** Undoes the continuation just written. */
async function undone(page) {
  await page.click('#undo');
  await page.waitForFunction(() => window.pianoformer.piece.tracks.every((t) => t.name !== 'CONTINUATION'));
}

test('a planned repeat of the first phrase echoes it', { timeout: 3 * SLOW }, async () => {
  const { browser, page, log } = await launch({ webgpu: false, url: `${base}?backend=cpu` });
  try {
    await page.waitForFunction(() => document.body.dataset.state === 'ready', null, { timeout: SLOW });
    await dropFile(page, midi, 'song.mid');
    const start = await page.evaluate(() => window.pianoformer.piece);
    const [letter, firstBars] = start.phrases[0];
    const planned = Math.min(2, firstBars);
    await page.fill('#plan-bars', String(planned));
    await page.dispatchEvent('#plan-bars', 'change');
    const from = start.bars.length;
    await page.waitForFunction((n) => window.pianoformer.piece.bars.length === n, from + planned);
    // The planned bars start a new phrase with the first one's letter.
    await page.focus('canvas[aria-label^="Phrase lane"]');
    await page.keyboard.press('Home');
    for (let k = 0; k < from; k++) await page.keyboard.press('ArrowRight');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#label-dialog[open]');
    await page.fill('#label-input', letter);
    await page.check('#label-split');
    await page.click('#label-ok');
    await page.waitForFunction(
      ({ letter, planned }) => JSON.stringify(window.pianoformer.piece.phrases.at(-1)) === JSON.stringify([letter, planned]),
      { letter, planned },
    );
    const plannedPiece = await page.evaluate(() => window.pianoformer.piece);
    const sixteenth = plannedPiece.ppq / 4;
    const firstNotes = plannedPiece.tracks.flatMap((t) => t.notes);
    await page.selectOption('#task', 'continuation');
    await page.fill('#max-tokens', '512');
    await page.fill('#length', String(planned + 1));

    const echoOf = async (echo) => {
      await page.fill('#echo', echo);
      const piece = await generated(page, log);
      const added = piece.tracks.find((t) => t.name === 'CONTINUATION')?.notes ?? [];
      const f1s = [];
      for (let k = 0; k < planned; k++) {
        const [a0, a1] = [piece.bars[k], piece.bars[k + 1]];
        const [b0, b1] = [piece.bars[from + k], piece.bars[from + k + 1]];
        const f1 = onsetF1(
          firstNotes.filter((x) => x[1] >= a0 && x[1] < a1), a0,
          added.filter((x) => x[1] >= b0 && x[1] < b1), b0,
          sixteenth,
        );
        if (f1 !== null) f1s.push(f1);
      }
      await undone(page);
      return f1s.reduce((a, b) => a + b, 0) / Math.max(1, f1s.length);
    };
    const withEcho = await echoOf('');
    const without = await echoOf('0');
    console.log(`planned repeat of ${letter}: onset F1 with its first bars ${withEcho.toFixed(2)} with the echo, ${without.toFixed(2)} without`);
    assert.ok(withEcho > without, `the echo brings the repeat closer (${withEcho} against ${without})`);
    assert.ok(withEcho >= 0.4, `the repeat echoes its first occurrence (F1 ${withEcho})`);
  } finally {
    await browser.close();
  }
});

// The Density field reaches the model: the same piece continued for six bars at half and at
// twice the notes a beat of its last bars (every track, as the model reads them).
test('a continuation plays as busy as the Density field asks', { timeout: 3 * SLOW }, async () => {
  const { browser, page, log } = await launch({ webgpu: false, url: `${base}?backend=cpu` });
  try {
    await page.waitForFunction(() => document.body.dataset.state === 'ready', null, { timeout: SLOW });
    await dropFile(page, midi, 'song.mid');
    const start = await page.evaluate(() => window.pianoformer.piece);
    const bars = start.bars;
    const barLength = bars[1] - bars[0];
    assert.equal(barLength, 4 * start.ppq, 'the example is in 4/4');
    const end = bars.at(-1) + barLength;
    const lastBars = Math.min(8, bars.length);
    const notes = start.tracks.flatMap((t) => t.notes);
    const promptRate = notes.filter((n) => n[1] >= bars[bars.length - lastBars] && n[1] < end).length / (lastBars * 4);
    await page.selectOption('#task', 'continuation');
    await page.fill('#max-tokens', '2048');
    await page.fill('#length', '6');
    const rateAt = async (density) => {
      await page.fill('#density', density);
      const piece = await generated(page, log);
      const added = (piece.tracks.find((t) => t.name === 'CONTINUATION')?.notes ?? []).filter((x) => x[1] >= end);
      assert.ok(piece.bars.length >= bars.length + 6, `six new bars (${piece.bars.length - bars.length})`);
      await undone(page);
      return added.length / (6 * 4) / promptRate;
    };
    const sparse = await rateAt('0.5');
    const busy = await rateAt('2');
    console.log(`density asked 0.5: ${sparse.toFixed(2)}x the prompt's notes a beat; asked 2: ${busy.toFixed(2)}x`);
    assert.ok(sparse < 0.8, `asked for half: ${sparse}`);
    assert.ok(busy > 1.3 && busy > 2 * sparse, `asked for twice: ${busy} (half: ${sparse})`);
  } finally {
    await browser.close();
  }
});

// A song's opening continued with the page's defaults: the length is 8 bars, and the eight new
// bars follow the eight of the prompt in its 4/4 (the last chord ringing into bar 9 once
// made the new part a run of 1/4 bars), in its register and key, not crammed onto the bar lines.
test("a song's opening is continued for eight bars in its meter, register and key", { timeout: 3 * SLOW }, async () => {
  const { browser, page, log } = await launch({ webgpu: false, url: `${base}?backend=cpu` });
  try {
    await page.waitForFunction(() => document.body.dataset.state === 'ready', null, { timeout: SLOW });
    await dropFile(page, opening, 'opening.mid');
    const start = await page.evaluate(() => window.pianoformer.piece);
    const bar = 4 * start.ppq;
    assert.equal(start.bars[1] - start.bars[0], bar, 'the opening is in 4/4');
    await page.selectOption('#task', 'continuation');
    assert.equal(await page.inputValue('#length'), '8', 'the default length is 8 bars');
    const piece = await generated(page, log);
    const gen = await page.evaluate(() => window.pianoformer.generations.at(-1));
    assert.deepEqual(gen.bars, [8, 8], 'eight new bars written');
    assert.match(await page.textContent('#gen-status'), /^Continuation: 8 bars, \d+ notes/);
    const from = 8 * bar;
    const added = piece.tracks.find((t) => t.name === 'CONTINUATION').notes;
    assert.ok(added.length > 0);
    assert.ok(added.every((n) => n[1] >= from - bar && n[1] < from + 8 * bar), 'in the eight bars after the prompt');
    const newNotes = added.filter((n) => n[1] >= from);
    // Every piece bar through the new ones is a bar of 4/4.
    for (let k = 1; k < Math.min(piece.bars.length, 16); k++) assert.equal(piece.bars[k] - piece.bars[k - 1], bar, `bar ${k}`);
    // Onsets in at least six of the eight bars, and off the bar lines too.
    const barsWithNotes = new Set(newNotes.map((n) => Math.floor((n[1] - from) / bar))).size;
    const offBeatOne = newNotes.filter((n) => (n[1] - from) % bar >= start.ppq).length / newNotes.length;
    // Register and pace against the prompt's (every track).
    const prompt = start.tracks.flatMap((t) => t.notes);
    const high = Math.max(...prompt.map((n) => n[0]));
    const pitches = newNotes.map((n) => n[0]).sort((a, b) => a - b);
    const p99 = pitches[Math.ceil(0.99 * pitches.length) - 1];
    const rate = newNotes.length / 32 / (prompt.length / 32);
    // The key: the pitch-class histograms' cosine (the page's default Key hold).
    const classes = (notes) => notes.reduce((h, n) => (h[n[0] % 12]++, h), new Array(12).fill(0));
    const [u, v] = [classes(newNotes), classes(prompt)];
    const dot = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0);
    const key = dot(u, v) / Math.sqrt(dot(u, u) * dot(v, v));
    assert.equal(await page.inputValue('#key-hold'), '', 'the key hold at its default');
    console.log(`opening: ${newNotes.length} notes in ${barsWithNotes} of 8 new bars, ${(100 * offBeatOne).toFixed(0)} % off beat one, ` +
      `pitch 99 % ${p99} (prompt up to ${high}), ${rate.toFixed(2)}x the prompt's notes a beat, key cosine ${key.toFixed(3)}`);
    assert.ok(barsWithNotes >= 6, `${barsWithNotes} bars with notes`);
    assert.ok(offBeatOne > 0.3, `${offBeatOne} of the onsets off beat one`);
    assert.ok(p99 <= high + 7, `99th percentile ${p99}, the prompt up to ${high}`);
    assert.ok(rate > 0.5 && rate < 2, `${rate}x the prompt's notes a beat`);
    assert.ok(key >= 0.85, `key cosine ${key} to the prompt`);
  } finally {
    await browser.close();
  }
});
