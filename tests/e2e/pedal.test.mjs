// End-to-end: the sustain pedal. A MIDI file whose piano holds the pedal (written by the
// project's own MIDI writer) opens with its pedal kept, exports with the same controller 64
// events, and the sampler's offline render (the WAV export's) keeps a note sounding after its
// release while the pedal is down and stops it at the lift — measured on the rendered
// samples, against the same piece with the pedal off. In the pedal lane a drag draws a span
// and a click lifts it, each one Undo. Needs pkg/ (make wasm), the samples
// (make samples) and Chromium (make setup).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, serveApp, dropFile } from './browser.mjs';

let server;
let base;
let wasm;

before(async () => {
  ({ server, base, wasm } = await serveApp({ wasm: true }));
});

after(() => server?.close());

// 120 bpm, 480 ticks a quarter: a quarter is 0.5 s. A short C4 (0.25 s) and an E4 under a
// pedal held from 0 to 1 s, then a G4 at 2 s without pedal.
const PEDALLED = {
  version: 1, name: 'pedal.mid', ppq: 480, tempos: [[0, 500000]], timeSignatures: [[0, 4, 4]],
  bars: [0, 1920], endTick: 3840,
  tracks: [
    { name: 'MELODY', role: 'melody', program: 0, channel: 0, notes: [[72, 0, 1920, 80], [74, 1920, 3840, 80]] },
    { name: 'PIANO', role: 'piano', program: 0, channel: 1, notes: [[60, 0, 240, 100], [64, 0, 240, 100], [67, 1920, 2160, 100]],
      pedal: [[0, 64, 127], [480, 64, 70], [960, 64, 0]] },
  ],
  chords: ['C', 'C'], phrases: [['A', 2]], promptBars: 2,
};

test('a pedalled file keeps its pedal, exports it, and the WAV holds notes until the lift', async () => {
  const bytes = wasm.writeMidi(JSON.stringify(PEDALLED));
  const { browser, page, log } = await launch({ webgpu: false, url: base });
  try {
    await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: 240_000 });
    await dropFile(page, bytes, 'pedal.mid');
    const piece = await page.evaluate(() => window.pianoformer.piece);
    const piano = piece.tracks.find((t) => t.name === 'PIANO');
    assert.deepEqual(piano.pedal, PEDALLED.tracks[1].pedal, `the pedal opened with the file\n${log.join('\n')}`);
    // The page's MIDI export (the Worker's writer) carries the same controller events.
    const again = JSON.parse(wasm.readMidi(new Uint8Array(wasm.writeMidi(JSON.stringify(piece))), 'again.mid'));
    assert.deepEqual(again.tracks.find((t) => t.name === 'PIANO').pedal, PEDALLED.tracks[1].pedal);
    // Rendered offline, mono loudness (RMS) in windows of the WAV, with the pedal and without.
    const rms = await page.evaluate(async (piece) => {
      const { Piano } = await import('/www/audio.js');
      const piano = new Piano();
      const out = {};
      for (const pedal of [true, false]) {
        const blob = await piano.renderWav(piece, { pedal, mute: {}, sampleRate: 22050 });
        const view = new DataView(await blob.arrayBuffer());
        const rate = view.getUint32(24, true);
        const frames = (view.byteLength - 44) / 4;
        const loud = (from, to) => {
          let sum = 0;
          let n = 0;
          for (let i = Math.floor(from * rate); i < Math.min(frames, to * rate); i++) {
            const v = view.getInt16(44 + 4 * i, true) / 32768;
            sum += v * v;
            n++;
          }
          return Math.sqrt(sum / Math.max(1, n));
        };
        out[pedal] = { attack: loud(0.02, 0.2), held: loud(0.6, 0.95), lifted: loud(1.45, 1.9), later: loud(2.02, 2.2) };
      }
      return out;
    }, { ...piece, tracks: piece.tracks.filter((t) => t.role === 'piano') });
    const [on, off] = [rms.true, rms.false];
    console.log(`pedal on ${JSON.stringify(on)}; off ${JSON.stringify(off)}`);
    assert.ok(on.attack > 0.01 && off.attack > 0.01, 'both strike the chord');
    assert.ok(on.held > 0.1 * on.attack, `held under the pedal after the release: ${on.held} against ${on.attack}`);
    assert.ok(off.held < 0.01 * off.attack, `without the pedal the damper stops it: ${off.held}`);
    assert.ok(on.lifted < 0.01 * on.attack, `the lift at 1 s stops it: ${on.lifted}`);
    assert.ok(on.later > 0.01 && Math.abs(on.later - off.later) < 0.2 * off.later, 'the unpedalled G4 sounds the same');
    // The pedal lane: with Edit notes on, a drag over bar 2's first two beats draws a span on
    // the piano, a click on it lifts it again, and each is one Undo.
    if ((await page.getAttribute('#edit-notes', 'aria-pressed')) !== 'true') await page.click('#edit-notes');
    const point = (tick) => page.evaluate((t) => window.pianoformer.pedalPoint(t), tick);
    const pedalOf = () => page.evaluate(() => window.pianoformer.piece.tracks.find((t) => t.name === 'PIANO').pedal);
    const [a, b] = [await point(1920), await point(2880)];
    await page.mouse.move(a.x, a.y);
    await page.mouse.down();
    await page.mouse.move(b.x, b.y, { steps: 5 });
    await page.mouse.up();
    assert.deepEqual(await pedalOf(), [...PEDALLED.tracks[1].pedal, [1920, 64, 127], [2880, 64, 0]], 'a span drawn');
    const c = await point(2400);
    await page.mouse.click(c.x, c.y);
    assert.deepEqual(await pedalOf(), PEDALLED.tracks[1].pedal, 'a click on it lifts it');
    await page.click('#undo');
    assert.deepEqual(await pedalOf(), [...PEDALLED.tracks[1].pedal, [1920, 64, 127], [2880, 64, 0]], 'Undo brings the span back');
    await page.click('#undo');
    assert.deepEqual(await pedalOf(), PEDALLED.tracks[1].pedal, 'and a second Undo takes the drawing back');
  } finally {
    await browser.close();
  }
});

test('Pedal these bars pedals the selected bars with the learnt pedal, one Undo', async () => {
  // The page's bundled example (two bars), its piano unpedalled.
  const piece = JSON.parse(wasm.readMidi(new Uint8Array(wasm.exampleMidi()), 'example.mid'));
  for (const t of piece.tracks) if (t.role === 'piano') t.pedal = [];
  const { browser, page, log } = await launch({ webgpu: false, url: base });
  try {
    await page.waitForFunction(() => document.body.dataset.state === 'ready', null, { timeout: 240_000 });
    await dropFile(page, wasm.writeMidi(JSON.stringify(piece)), 'example.mid');
    await page.focus('canvas[aria-label^="Chord lane"]');
    await page.keyboard.press('Home');
    await page.keyboard.press('Shift+ArrowRight');
    await page.waitForFunction(() => !document.getElementById('repedal').disabled, null, { timeout: 60_000 });
    await page.click('#repedal');
    await page.waitForFunction(() => /Pedalled|could not/.test(document.getElementById('gen-status').textContent), null, { timeout: 60_000 });
    assert.match(await page.textContent('#gen-status'), /Pedalled bars 1–2/, log.join('\n'));
    const pedal = () => page.evaluate(() => window.pianoformer.piece.tracks.find((t) => t.role === 'piano').pedal ?? []);
    const events = await pedal();
    // Pressed and lifted again within the two bars selected (the example's whole 2 bars of 4/4).
    assert.ok(events.length >= 2 && events.every((e) => e[0] <= 2 * 1920), JSON.stringify(events));
    assert.deepEqual(events.at(-1).slice(1), [64, 0], 'lifted at the end');
    await page.click('#undo');
    assert.deepEqual(await pedal(), [], 'Undo takes it back');
  } finally {
    await browser.close();
  }
});
