// End-to-end: the main path of the playground in headless Chromium. A MIDI file written by the
// project's own code (the wasm's exampleMidi, run in Node) is dropped on the page; a shipped
// model accompanies it on WebGPU and then on the CPU; notes and the attention map appear;
// playback starts; a share link restores the identical notes; a corrupt file gives a plain
// error. On the CPU: chord edits, regenerating bars for both tasks (and three alternatives of
// them to audition, keep, undo and share), and comparing two models.
// Screenshots go to $E2E_OUT (default target/e2e/). Needs pkg/ (make wasm).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { normalizePiece } from '../../www/share.js';
import { OUT, cspViolations, launch, serveApp } from './browser.mjs';

// SwiftShader WebGPU: the backend check and the first kernels take minutes on 2 cores.
const SLOW = 600_000;

let server;
let base;
let midi;
// WebGPU on SwiftShader runs a step-by-step model at a step or so a second: two bars there.
let short;

before(async () => {
  let wasm;
  ({ server, base, wasm } = await serveApp({ wasm: true }));
  midi = wasm.exampleMidi(2, 8);
  short = wasm.exampleMidi(2, 2);
  writeFileSync(join(OUT, 'dropped.mid'), midi);
});

after(() => server?.close());

async function open({ webgpu, query = '' }) {
  const { browser, page, log } = await launch({ webgpu, url: base + query });
  try {
    await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, {
      timeout: SLOW,
    });
  } catch (e) {
    throw new Error(`page never settled: ${e.message}\n${log.join('\n')}`);
  }
  const state = await page.evaluate(() => window.pianoformer.state);
  assert.equal(state, 'ready', `${await page.evaluate(() => window.pianoformer.error)}\n${log.join('\n')}`);
  return { browser, page, log };
}

/** Drops `bytes` as a file named `name` on the page, as a user dragging it in would. */
async function drop(page, bytes, name) {
  await page.evaluate(
    ({ data, name }) => {
      const file = new File([new Uint8Array(data)], name, { type: 'audio/midi' });
      const dt = new DataTransfer();
      dt.items.add(file);
      for (const type of ['dragenter', 'dragover', 'drop']) {
        document.querySelector('main').dispatchEvent(
          new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true }),
        );
      }
    },
    { data: [...bytes], name },
  );
}

async function generateAccompaniment(page, log) {
  const before = await page.evaluate(() => window.pianoformer.generations.length);
  await page.selectOption('#task', 'accompaniment');
  await page.click('#generate');
  try {
    await page.waitForFunction(
      (n) => window.pianoformer.generations.length > n || !document.getElementById('error').hidden,
      before,
      { timeout: SLOW },
    );
  } catch (e) {
    throw new Error(`generation never finished: ${e.message}\n${log.join('\n')}`);
  }
  const error = await page.evaluate(() => (document.getElementById('error').hidden ? null : window.pianoformer.error));
  assert.equal(error, null, log.join('\n'));
  return page.evaluate(() => window.pianoformer.generations.at(-1));
}

test('drop, accompany on WebGPU, watch attention, play, share, and a corrupt file', { timeout: 3 * SLOW }, async () => {
  const { browser, page, log } = await open({ webgpu: true, query: '?backend=gpu' });
  try {
    assert.equal(await page.evaluate(() => window.pianoformer.backend.kind), 'gpu');
    await drop(page, short, 'dropped.mid');
    await page.waitForFunction(() => window.pianoformer.piece?.name === 'dropped.mid', null, { timeout: 60_000 });
    const piece = await page.evaluate(() => window.pianoformer.piece);
    assert.equal(piece.tracks.find((t) => t.role === 'melody')?.name, 'MELODY');
    assert.deepEqual(piece.chords.slice(0, 2), ['D', 'A'], 'chords detected (I–V in D)');
    await page.screenshot({ path: join(OUT, 'playground-dropped.png') });

    const run = await generateAccompaniment(page, log);
    assert.equal(run.backend, 'gpu');
    assert.ok(run.notes > 0, 'the accompaniment has notes');
    const after = await page.evaluate(() => window.pianoformer.piece);
    const piano = after.tracks.find((t) => t.role === 'generated');
    assert.equal(piano.notes.length, run.notes);
    assert.deepEqual(
      after.tracks.find((t) => t.role === 'melody').notes,
      piece.tracks.find((t) => t.role === 'melody').notes,
      'the melody is untouched',
    );
    assert.equal(await page.evaluate(() => window.pianoformer.attentionBlank()), false, 'attention drawn');
    // Its axes carry the piece's bars and phrase letters (each weight drawn against uniform).
    const marks = await page.evaluate(() => window.pianoformer.attentionMarks());
    assert.equal(marks.length, after.bars.length, 'a bar line a bar');
    assert.deepEqual(marks.filter((m) => m.letter).map((m) => m.letter), after.phrases.map(([l]) => l), 'the phrase letters');
    console.log(`WebGPU accompaniment: ${run.notes} notes in ${(run.ms / 1000).toFixed(1)} s`);
    await page.screenshot({ path: join(OUT, 'playground-webgpu.png'), fullPage: true });

    // Playback starts (samples load from the app itself) and the playhead moves.
    await page.click('#play');
    await page.waitForFunction(() => window.pianoformer.playing === true, null, { timeout: 60_000 });
    assert.match(await page.textContent('#play'), /Stop/);
    await page.click('#play');

    // The share link restores the identical piece in a fresh page.
    await page.click('#share');
    await page.waitForFunction(() => window.pianoformer.shareLink, null, { timeout: 30_000 });
    const link = await page.evaluate(() => window.pianoformer.shareLink);
    const shared = await browser.newPage();
    await shared.goto(link);
    await shared.waitForFunction(() => window.pianoformer.piece, null, { timeout: SLOW });
    const restored = await shared.evaluate(() => window.pianoformer.piece);
    assert.deepEqual(normalizePiece(restored), normalizePiece(after), 'the link restores the piece exactly');
    assert.equal(await shared.inputValue('#seed'), await page.inputValue('#seed'));
    await shared.close();

    // A corrupt file: a plain error, and the piece on screen stays.
    await drop(page, new TextEncoder().encode('MThd this is not a MIDI file'), 'broken.mid');
    await page.waitForSelector('#error:not([hidden])', { timeout: 30_000 });
    assert.match(await page.textContent('#error-text'), /broken\.mid could not be read/);
    assert.equal((await page.evaluate(() => window.pianoformer.piece)).name, 'dropped.mid');
    await page.screenshot({ path: join(OUT, 'playground-corrupt-file.png') });
    // Generating, attention, playback, sharing and errors ran under the page's strict CSP.
    assert.deepEqual(await cspViolations(page, log), [], 'nothing was blocked by the CSP');
  } finally {
    await browser.close();
  }
});

test('with WebGPU disabled the same accompaniment runs on the CPU', { timeout: 2 * SLOW }, async () => {
  const { browser, page, log } = await open({ webgpu: false });
  try {
    assert.equal(await page.evaluate(() => window.pianoformer.backend.kind), 'cpu');
    await drop(page, midi, 'dropped.mid');
    await page.waitForFunction(() => window.pianoformer.piece?.name === 'dropped.mid', null, { timeout: 60_000 });
    const run = await generateAccompaniment(page, log);
    assert.equal(run.backend, 'cpu');
    assert.ok(run.notes > 0);
    assert.equal(await page.evaluate(() => window.pianoformer.attentionBlank()), false);
    console.log(`CPU accompaniment: ${run.notes} notes in ${(run.ms / 1000).toFixed(1)} s`);
    await page.screenshot({ path: join(OUT, 'playground-cpu.png'), fullPage: true });

    // Another head's attention over the piece, without generating again.
    const generations = await page.evaluate(() => window.pianoformer.generations.length);
    await page.selectOption('#att-head', '2');
    await page.waitForFunction(() => !window.pianoformer.attentionBlank(), null, { timeout: 60_000 });
    assert.equal(await page.evaluate(() => window.pianoformer.generations.length), generations);

    // The lanes steer the accompaniment: bar 3's chord goes from Bm to E♭ (far from D major);
    // generating again with the same seed rewrites that bar, and its notes fit the new chord.
    const bars = (await page.evaluate(() => window.pianoformer.piece)).bars;
    const inBar = (notes, bar) => notes.filter((n) => n[1] >= bars[bar] && n[1] < bars[bar + 1]);
    const pianoNotes = async () =>
      (await page.evaluate(() => window.pianoformer.piece)).tracks.find((t) => t.role === 'generated').notes;
    const old = await pianoNotes();
    await page.focus('canvas[aria-label^="Chord lane"]');
    await page.keyboard.press('Home');
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#label-dialog[open]');
    await page.fill('#label-input', 'Eb');
    await page.click('#label-ok');
    await page.waitForFunction(() => window.pianoformer.piece.chords[2] === 'Eb');
    await generateAccompaniment(page, log);
    const edited = await pianoNotes();
    assert.notDeepEqual(inBar(edited, 2), inBar(old, 2), 'the edited bar is played differently');
    const fits = inBar(edited, 2).filter((n) => [3, 7, 10].includes(n[0] % 12)).length;
    assert.ok(inBar(edited, 2).length > 0, 'the edited bar has notes');
    assert.ok(
      fits / inBar(edited, 2).length >= 0.6,
      `${fits} of ${inBar(edited, 2).length} onsets in the E♭ bar are E♭, G or B♭`,
    );
    console.log(`chord edit: ${fits} of ${inBar(edited, 2).length} onsets in the E♭ bar are its tones`);
    await page.screenshot({ path: join(OUT, 'playground-chord-edit.png'), fullPage: true });

    // "Regenerate these bars": bars 5–6 are selected and rewritten with another seed; the
    // melody and the piano elsewhere stay as they were.
    await page.fill('#seed', '12345');
    await page.focus('canvas[aria-label^="Chord lane"]');
    await page.keyboard.press('Home');
    for (let i = 0; i < 4; i++) await page.keyboard.press('ArrowRight');
    await page.keyboard.press('Shift+ArrowRight');
    await page.waitForFunction(() => !document.getElementById('regen-bars').disabled);
    const n0 = await page.evaluate(() => window.pianoformer.generations.length);
    await page.click('#regen-bars');
    await page.waitForFunction(
      (n) => window.pianoformer.generations.length > n || !document.getElementById('error').hidden,
      n0,
      { timeout: SLOW },
    );
    const regen = await page.evaluate(() => window.pianoformer.generations.at(-1));
    assert.deepEqual(regen.region, [4, 6], await page.evaluate(() => window.pianoformer.error));
    const rewritten = await pianoNotes();
    // Notes before the selection keep their start (one held into it may now end there);
    // those after it stay whole (one at its very end may be struck again to join).
    const outside = (notes) => [
      ...notes.filter((n) => n[1] < bars[4]).map((n) => `${n[0]}@${n[1]}`),
      ...notes.filter((n) => n[1] > bars[6]).map((n) => n.join(',')),
    ].sort();
    assert.deepEqual(outside(rewritten), outside(edited), 'the piano outside the selection is kept');
    assert.notDeepEqual(
      [...inBar(rewritten, 4), ...inBar(rewritten, 5)],
      [...inBar(edited, 4), ...inBar(edited, 5)],
      'the selected bars are rewritten',
    );
    console.log(`CPU regeneration of 2 bars: ${(regen.ms / 1000).toFixed(1)} s`);

    // Alternatives: bars 5–6 again with Alternatives 3 (seeds 12345–12347, written together):
    // the strip offers three; key 2 plays the second, Enter keeps it (the Seed becomes its
    // seed), Undo takes it back, Redo brings it, and a share link restores it.
    await page.fill('#alternatives', '3');
    await page.dispatchEvent('#alternatives', 'change');
    await page.focus('canvas[aria-label^="Chord lane"]');
    await page.keyboard.press('Home');
    for (let i = 0; i < 4; i++) await page.keyboard.press('ArrowRight');
    await page.keyboard.press('Shift+ArrowRight');
    await page.waitForFunction(() => !document.getElementById('regen-bars').disabled);
    const a0 = await page.evaluate(() => window.pianoformer.generations.length);
    await page.click('#regen-bars');
    await page.waitForFunction(
      (n) => window.pianoformer.generations.length > n || !document.getElementById('error').hidden,
      a0,
      { timeout: SLOW },
    );
    assert.equal(await page.evaluate(() => window.pianoformer.generations.at(-1).alternatives), 3,
      await page.evaluate(() => window.pianoformer.error));
    assert.deepEqual(await page.evaluate(() => window.pianoformer.alternatives()), { kind: 'pieces', count: 3, playing: null });
    assert.deepEqual(await pianoNotes(), rewritten, 'the piece waits for a choice');
    assert.equal(await page.locator('#alternatives-list .mini-roll').count(), 3);
    await page.screenshot({ path: join(OUT, 'playground-alternatives.png'), fullPage: true });
    await page.keyboard.press('2');
    await page.waitForFunction(() => window.pianoformer.playing && window.pianoformer.alternatives()?.playing === 1);
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.getElementById('alternatives-strip').hidden);
    const kept = await pianoNotes();
    assert.notDeepEqual([...inBar(kept, 4), ...inBar(kept, 5)], [...inBar(rewritten, 4), ...inBar(rewritten, 5)],
      'the second alternative (seed 12346) rewrote bars 5–6');
    assert.deepEqual(outside(kept), outside(rewritten), 'and kept the rest');
    assert.equal(await page.inputValue('#seed'), '12346');
    await page.click('#undo');
    await page.waitForFunction((n) => JSON.stringify(window.pianoformer.piece.tracks.find((t) => t.role === 'generated').notes) === n,
      JSON.stringify(rewritten));
    await page.click('#redo');
    await page.waitForFunction((n) => JSON.stringify(window.pianoformer.piece.tracks.find((t) => t.role === 'generated').notes) === n,
      JSON.stringify(kept));
    await page.evaluate(() => { window.pianoformer.shareLink = null; });
    await page.click('#share');
    await page.waitForFunction(() => window.pianoformer.shareLink, null, { timeout: 30_000 });
    const sharedPage = await browser.newPage();
    await sharedPage.goto(await page.evaluate(() => window.pianoformer.shareLink));
    await sharedPage.waitForFunction(() => window.pianoformer.piece, null, { timeout: SLOW });
    const restoredKept = await sharedPage.evaluate(() => window.pianoformer.piece.tracks.find((t) => t.role === 'generated')?.notes);
    assert.deepEqual(restoredKept, kept, 'the share link restores the kept alternative');
    assert.equal(await sharedPage.inputValue('#seed'), '12346');
    await sharedPage.close();
    await page.fill('#alternatives', '');
    await page.dispatchEvent('#alternatives', 'change');
    console.log(`CPU alternatives of 2 bars: 3 in ${(await page.evaluate(() => window.pianoformer.generations.at(-1).ms) / 1000).toFixed(1)} s`);

    // A continuation: planned bars with a chord, then new notes after the music.
    const before = await page.evaluate(() => window.pianoformer.piece);
    await page.fill('#plan-bars', '2');
    await page.dispatchEvent('#plan-bars', 'change');
    await page.waitForFunction((n) => window.pianoformer.piece.bars.length === n + 2, before.bars.length);
    // The first planned bar's chord: F, far from the piece's D major.
    const planned = before.bars.length - 1;
    await page.focus('canvas[aria-label^="Chord lane"]');
    await page.keyboard.press('Home');
    for (let k = 0; k < planned; k++) await page.keyboard.press('ArrowRight');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#label-dialog[open]');
    await page.fill('#label-input', 'F');
    await page.click('#label-ok');
    await page.waitForFunction((b) => window.pianoformer.piece.chords[b] === 'F', planned);
    await page.selectOption('#task', 'continuation');
    await page.fill('#max-tokens', '96');
    const n = await page.evaluate(() => window.pianoformer.generations.length);
    await page.click('#generate');
    await page.waitForFunction(
      (n) => window.pianoformer.generations.length > n || !document.getElementById('error').hidden,
      n,
      { timeout: 300_000 },
    );
    const cont = await page.evaluate(() => window.pianoformer.generations.at(-1));
    assert.equal(cont.task, 'continuation', await page.evaluate(() => window.pianoformer.error));
    const piece = await page.evaluate(() => window.pianoformer.piece);
    const added = piece.tracks.find((t) => t.name === 'CONTINUATION');
    assert.ok(added?.notes.length > 0, 'the continuation wrote notes');
    const lastOnset = Math.max(...before.tracks.flatMap((t) => t.notes.map((x) => x[1])));
    assert.ok(added.notes.every((x) => x[1] >= lastOnset), 'after the music');
    // The planned bar is played in its chord.
    const inPlanned = added.notes.filter((x) => x[1] >= piece.bars[planned] && x[1] < piece.bars[planned + 1]);
    const tones = inPlanned.filter((x) => [5, 9, 0].includes(x[0] % 12)).length;
    assert.ok(inPlanned.length > 0, 'the planned bar has notes');
    assert.ok(
      tones / inPlanned.length >= 0.6,
      `${tones} of ${inPlanned.length} onsets in the planned F bar are F, A or C`,
    );
    console.log(`planned chord: ${tones} of ${inPlanned.length} onsets in the F bar are its tones`);
    console.log(`CPU continuation: ${cont.tokens} tokens in ${(cont.ms / 1000).toFixed(1)} s`);
    // Its attention, streamed while it was written, stays on the map: the model loaded for it
    // asked for a redraw that the generation, done in well under that redraw's delay, must
    // not let through (it blanked the map and drew it again).
    await new Promise((r) => setTimeout(r, 600));
    assert.equal(await page.evaluate(() => window.pianoformer.attentionBlank()), false, 'continuation attention drawn');
    assert.equal(
      await page.evaluate(() => window.pianoformer.attentionMaps.filter((m) => m.model.startsWith('continuation')).length),
      0,
      'the live map is not drawn again',
    );
    await page.screenshot({ path: join(OUT, 'playground-continuation.png'), fullPage: true });

    // "Regenerate these bars" with the continuation model: bars 5–8 are rewritten from the
    // music before them; bars 1–4 and 9 on stay note for note, in every track; Undo restores.
    const whole = await page.evaluate(() => window.pianoformer.piece);
    const cb = whole.bars;
    const notesOf = (p, keep) => p.tracks
      .flatMap((t) => t.notes.filter((x) => keep(x[1])).map((x) => `${t.name}:${x.join(',')}`))
      .sort();
    const outsideBars = (t) => t < cb[4] || t >= cb[8];
    const insideBars = (t) => t >= cb[4] && t < cb[8];
    await page.fill('#seed', '777');
    await page.focus('canvas[aria-label^="Chord lane"]');
    await page.keyboard.press('Home');
    for (let i = 0; i < 4; i++) await page.keyboard.press('ArrowRight');
    for (let i = 0; i < 3; i++) await page.keyboard.press('Shift+ArrowRight');
    await page.waitForFunction(() => !document.getElementById('regen-bars').disabled);
    const m = await page.evaluate(() => window.pianoformer.generations.length);
    await page.click('#regen-bars');
    await page.waitForFunction(
      (m) => window.pianoformer.generations.length > m || !document.getElementById('error').hidden,
      m,
      { timeout: 300_000 },
    );
    const re = await page.evaluate(() => window.pianoformer.generations.at(-1));
    assert.equal(re.task, 'continuation', await page.evaluate(() => window.pianoformer.error));
    assert.deepEqual(re.region, [4, 8]);
    const redone = await page.evaluate(() => window.pianoformer.piece);
    assert.deepEqual(redone.bars, whole.bars, 'no bar added or lost');
    assert.deepEqual(notesOf(redone, outsideBars), notesOf(whole, outsideBars), 'bars 1–4 and 9 on are kept');
    assert.notDeepEqual(notesOf(redone, insideBars), notesOf(whole, insideBars), 'bars 5–8 are rewritten');
    assert.ok(notesOf(redone, insideBars).length > 0, 'bars 5–8 have notes');
    assert.match(await page.textContent('#gen-status'), /Bars 5–8 rewritten; continuation/);
    await page.click('#undo');
    await page.waitForFunction(
      (n) => JSON.stringify(window.pianoformer.piece.tracks.map((t) => t.notes)) === n,
      JSON.stringify(whole.tracks.map((t) => t.notes)),
    );
    console.log(`CPU continuation of bars 5–8: ${(re.ms / 1000).toFixed(1)} s`);

    // Compare: the default continuation model (sineSPE) and convSPE write the same piece with
    // the same seed (convSPE decoding from its filters read once, in wasm); the two results
    // switch back and forth, each with its attention map; the share link carries both, and
    // opens as a comparison.
    const partner = 'continuation-convspe';
    const start = await page.evaluate(() => window.pianoformer.piece);
    await page.selectOption('#compare-model', partner);
    const k = await page.evaluate(() => window.pianoformer.generations.length);
    await page.click('#compare');
    await page.waitForFunction(
      (k) => window.pianoformer.generations.length >= k + 2 || !document.getElementById('error').hidden,
      k,
      { timeout: 300_000 },
    );
    const [ca, cb2] = await page.evaluate((k) => window.pianoformer.generations.slice(k), k);
    assert.equal(cb2?.model, partner, await page.evaluate(() => window.pianoformer.error));
    assert.equal(ca.model, await page.inputValue('#model'));
    assert.equal(ca.seed, cb2.seed);
    assert.deepEqual(await page.evaluate(() => window.pianoformer.compared), [ca.model, partner]);
    const sideA = await page.evaluate(() => window.pianoformer.piece);
    assert.equal(await page.evaluate(() => window.pianoformer.attentionBlank()), false);
    await page.click('#compare-b');
    assert.equal(await page.evaluate(() => window.pianoformer.comparing), 'b');
    const sideB = await page.evaluate(() => window.pianoformer.piece);
    assert.notDeepEqual(sideB.tracks.map((t) => t.notes), sideA.tracks.map((t) => t.notes), 'two results');
    assert.equal(await page.evaluate(() => window.pianoformer.attentionBlank()), false, "B's own map");
    await page.click('#compare-a');
    assert.deepEqual(await page.evaluate(() => window.pianoformer.piece), sideA);
    await page.click('#share');
    await page.waitForFunction(() => /#v2\./.test(window.pianoformer.shareLink), null, { timeout: 30_000 });
    const opened = await browser.newPage();
    await opened.goto(await page.evaluate(() => window.pianoformer.shareLink));
    await opened.waitForFunction(() => window.pianoformer.compared, null, { timeout: SLOW });
    assert.deepEqual(await opened.evaluate(() => window.pianoformer.compared), [ca.model, partner]);
    const notes = (p) => normalizePiece(p).tracks.map((t) => t.notes);
    assert.deepEqual(notes(await opened.evaluate(() => window.pianoformer.piece)), notes(sideA));
    await opened.click('#compare-b');
    assert.deepEqual(notes(await opened.evaluate(() => window.pianoformer.piece)), notes(sideB));
    await opened.close();
    // Undo leaves the comparison and goes back to the piece before it.
    await page.click('#undo');
    assert.equal(await page.isVisible('#compare-bar'), false);
    assert.deepEqual(notes(await page.evaluate(() => window.pianoformer.piece)), notes(start));
    console.log(`CPU compare: ${ca.model} ${ca.notes} notes in ${(ca.ms / 1000).toFixed(1)} s, ${partner} ${cb2.notes} notes in ${(cb2.ms / 1000).toFixed(1)} s`);
    assert.deepEqual(await cspViolations(page, log), [], 'nothing was blocked by the CSP');
  } finally {
    await browser.close();
  }
});
