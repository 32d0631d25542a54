// End-to-end: writing notes in the roll. From an empty page a person presses New piece, draws a
// four-bar melody with the mouse (the chord lane fills in from it), edits it with the keyboard
// (select, transpose, shorten, louder, delete, copy and paste) and with the mouse (move a note,
// set a velocity in the lane under the roll; a chord set by hand stays through it), has the
// default model accompany it (with the velocity model's dynamics), undoes and redoes, and
// shares it: the link restores every note with its velocity. And with the Worker slowed on
// purpose, bars edited while the harmonizer reads an earlier edit still get their chords.
// Needs pkg/ (make wasm) and Chromium (make setup).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { OUT, cspViolations, launch, serveApp } from './browser.mjs';
import { normalizePiece } from '../../www/share.js';

let server;
let base;

before(async () => {
  ({ server, base } = await serveApp());
});

after(() => server?.close());

const Q = 480;
const melody = (p) => p.tracks.find((t) => t.role === 'melody').notes;
const noteCount = (page) => page.evaluate(() => window.pianoformer.piece.tracks.reduce((n, t) => n + t.notes.length, 0));

/** A mouse drag in the roll from (tick, pitch) to (tick2, pitch2). */
async function drag(page, [tick, pitch], [tick2, pitch2], { lane = false } = {}) {
  const point = (t, p) => page.evaluate(([t, p, lane]) => (lane ? window.pianoformer.velocityPoint(t, p) : window.pianoformer.rollPoint(t, p)), [t, p, lane]);
  const a = await point(tick, pitch);
  const b = await point(tick2, pitch2);
  await page.mouse.move(a.x, a.y);
  await page.mouse.down();
  await page.mouse.move(b.x, b.y, { steps: 4 });
  await page.mouse.up();
}

async function key(page, combo, count = 1) {
  for (let i = 0; i < count; i++) await page.keyboard.press(combo);
}

test('a melody drawn and edited in the roll, accompanied, undone, redone and shared', { timeout: 600_000 }, async () => {
  const { browser, page, log } = await launch({ webgpu: false, url: `${base}?backend=cpu` });
  try {
    await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: 120_000 });
    assert.equal(await page.evaluate(() => window.pianoformer.state), 'ready', log.join('\n'));
    // A point taken in the same task as the click (before any frame or resize callback) is where
    // the note will be drawn: the roll settles its opening zoom when asked, not a frame later.
    const [early, late] = await page.evaluate(async () => {
      document.getElementById('new-piece').click();
      const early = window.pianoformer.rollPoint(960, 60);
      for (let i = 0; i < 3; i++) await new Promise(requestAnimationFrame);
      return [early, window.pianoformer.rollPoint(960, 60)];
    });
    assert.deepEqual(early, late, 'the roll geometry right after New piece');
    assert.equal(await page.getAttribute('#edit-notes', 'aria-pressed'), 'true', 'a new piece opens for editing');
    await page.selectOption('#quantise', '1'); // a quarter-note grid

    // Eight half notes over four bars, each drawn by a press and a drag for its length.
    const tune = [[60, 0], [64, 2], [67, 4], [65, 6], [64, 8], [62, 10], [60, 12], [67, 14]];
    for (const [i, [pitch, beat]] of tune.entries()) {
      await drag(page, [beat * Q + 20, pitch], [(beat + 2) * Q - 40, pitch]);
      await page.waitForFunction((n) => window.pianoformer.piece.tracks[0].notes.length === n, i + 1, { timeout: 10_000 });
    }
    let piece = await page.evaluate(() => window.pianoformer.piece);
    assert.deepEqual(melody(piece).map((n) => n.slice(0, 3)), tune.map(([p, b]) => [p, b * Q, (b + 2) * Q]));
    assert.equal(piece.promptBars, 4);
    // The lane fills in from what was drawn (the harmonizer's, a moment after the last edit).
    await page.waitForFunction(() => window.pianoformer.piece.chords.slice(0, 4).every((c) => c), null, { timeout: 60_000 });
    const lane = await page.evaluate(() => window.pianoformer.piece.chords.slice(0, 4));
    assert.ok(!lane.some((c) => /sus/.test(c)), `no sus chords for a plain tune: ${lane}`);

    // The keyboard: the last note drawn is selected; two semitones down, a beat shorter, louder.
    await key(page, 'ArrowDown', 2);
    await key(page, 'Shift+ArrowLeft');
    await key(page, '+');
    // [ selects the note before it (60 at beat 12), Delete removes it.
    await key(page, '[');
    await key(page, 'Delete');
    piece = await page.evaluate(() => window.pianoformer.piece);
    assert.equal(melody(piece).length, 7);
    assert.deepEqual(melody(piece).at(-1), [65, 14 * Q, 15 * Q, 88]);
    assert.ok(!melody(piece).some((n) => n[1] === 12 * Q), 'the note at beat 12 was deleted');
    // ] selects the first note, Shift+] adds the next: copied (pasted later).
    await key(page, ']');
    await key(page, 'Shift+]');
    assert.equal(await page.evaluate(() => window.pianoformer.selectedNotes().length), 2);
    await key(page, 'Control+c');
    await key(page, 'Escape');
    // A chord set by hand (bar 1: Dm) stays when its notes are edited; the others refill.
    await page.focus('canvas[aria-label^="Chord lane"]');
    await page.keyboard.press('Home');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#label-dialog[open]');
    await page.fill('#label-input', 'Dm');
    await page.click('#label-ok');
    await page.waitForFunction(() => window.pianoformer.piece.chords[0] === 'Dm');
    // The mouse: the note at beat 2 moves up a tone and a beat later; its velocity goes to about 40.
    await drag(page, [2 * Q + 100, 64], [3 * Q + 100, 66]);
    await page.waitForFunction(() => window.pianoformer.piece.tracks[0].notes.some((n) => n[0] === 66), null, { timeout: 10_000 });
    await drag(page, [3 * Q, 100], [3 * Q, 40], { lane: true });
    piece = await page.evaluate(() => window.pianoformer.piece);
    const moved = melody(piece).find((n) => n[0] === 66);
    assert.equal(moved[1], 3 * Q);
    assert.ok(Math.abs(moved[3] - 40) <= 4, `velocity from the lane: ${moved[3]}`);
    // Past the lanes' refill after the edit (it starts 400 ms after the last edit).
    await page.waitForFunction(() => window.pianoformer.lanesRefill() === 'idle', null, { timeout: 30_000 });
    assert.equal(await page.evaluate(() => window.pianoformer.piece.chords[0]), 'Dm', 'a chord set by hand is kept');
    const beforePaste = await noteCount(page);
    await key(page, 'Control+v'); // no playhead: after the selected note (beat 5)
    assert.equal(await noteCount(page), beforePaste + 2, 'two notes pasted');
    await page.screenshot({ path: join(OUT, 'edit-drawn.png'), fullPage: true });

    // The model accompanies the drawn melody.
    const n = await page.evaluate(() => window.pianoformer.generations.length);
    await page.selectOption('#task', 'accompaniment');
    await page.click('#generate');
    await page.waitForFunction((n) => window.pianoformer.generations.length > n || !document.getElementById('error').hidden, n, { timeout: 300_000 });
    assert.equal(await page.evaluate(() => (document.getElementById('error').hidden ? null : window.pianoformer.error)), null);
    const accompanied = await page.evaluate(() => window.pianoformer.piece);
    const piano = accompanied.tracks.find((t) => t.role === 'generated' && t.notes.length);
    assert.ok(piano, 'the piano wrote notes');
    // With "Dynamics" on (the default) the piano plays with the velocity model's dynamics.
    assert.equal(await page.evaluate(() => window.pianoformer.dynamics), 'dynamics');
    const velocities = new Set(piano.notes.map((n) => n[3]));
    assert.ok(velocities.size >= 3, `velocities of the written piano: ${[...velocities]}`);

    // Undo takes the accompaniment back, Redo brings it again; a later edit clears Redo.
    await page.click('#undo');
    const undone = await page.evaluate(() => window.pianoformer.piece);
    assert.ok(!undone.tracks.some((t) => t.role === 'generated' && t.notes.length));
    assert.equal(await page.isDisabled('#redo'), false);
    const maps = await page.evaluate(() => window.pianoformer.attentionMaps.length);
    await page.keyboard.press('Control+Shift+Z');
    assert.deepEqual(await page.evaluate(() => window.pianoformer.piece), accompanied, 'Redo restores the accompanied piece');
    assert.equal(await page.isDisabled('#redo'), true);
    // The map follows the notes on screen: drawn again over the piece Redo brought back, by
    // one pass over its notes, for every step of it.
    await page.waitForFunction((n) => window.pianoformer.attentionMaps.length > n, maps, { timeout: 120_000 });
    const map = await page.evaluate(() => window.pianoformer.attentionMaps.at(-1));
    const end = Math.max(...accompanied.tracks.flatMap((t) => t.notes.map((n) => n[2])));
    const steps = 16 * accompanied.bars.filter((b) => b < end).length;
    assert.equal(map.rows, steps, `the map covers every step of the music: ${JSON.stringify(map)}`);
    assert.equal(await page.evaluate(() => window.pianoformer.attentionBlank()), false);

    // The share link restores every note with its velocity.
    await page.click('#share');
    await page.waitForFunction(() => window.pianoformer.shareLink, null, { timeout: 30_000 });
    const shared = await browser.newPage();
    await shared.goto(await page.evaluate(() => window.pianoformer.shareLink));
    await shared.waitForFunction(() => window.pianoformer.piece, null, { timeout: 120_000 });
    const restored = await shared.evaluate(() => window.pianoformer.piece);
    assert.deepEqual(normalizePiece(restored).tracks, normalizePiece(accompanied).tracks);
    assert.ok(melody(restored).some((n) => n[3] === 88) && melody(restored).some((n) => Math.abs(n[3] - 40) <= 4));
    await shared.close();

    // A chord chart typed in the last bar's dialog fills it and the bar after, planned past the
    // end (the syntax `generate --chords` reads); one Undo takes both back.
    const before = await page.evaluate(() => window.pianoformer.piece);
    const last = before.bars.length - 1;
    await page.focus('canvas[aria-label^="Chord lane"]');
    await page.keyboard.press('End');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#label-dialog[open]');
    await page.fill('#label-input', 'Am7 | F G');
    await page.click('#label-ok');
    await page.waitForFunction((n) => window.pianoformer.piece.bars.length === n, before.bars.length + 1);
    const charted = await page.evaluate(() => window.pianoformer.piece);
    assert.deepEqual(charted.chords.slice(last), ['Am7', 'F G']);
    assert.equal(charted.promptBars, before.promptBars, 'the new bar is planned, past the music');
    await page.click('#undo');
    assert.deepEqual((await page.evaluate(() => window.pianoformer.piece)).chords, before.chords);
    assert.deepEqual(log.filter((l) => l.startsWith('[pageerror]')), []);
    assert.deepEqual(await cspViolations(page, log), []);
  } finally {
    await browser.close();
  }
});

test('bars edited while the harmonizer is still reading the last edit get their chords too', { timeout: 300_000 }, async () => {
  const { browser, page, log } = await launch({ webgpu: false, url: `${base}?backend=cpu` });
  try {
    await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: 120_000 });
    assert.equal(await page.evaluate(() => window.pianoformer.state), 'ready', log.join('\n'));
    // A slow machine, made on purpose: the Worker gets each request to write the piece as MIDI
    // (the first thing a refill of the lanes asks for) 1.5 s late.
    await page.evaluate(() => {
      const post = Worker.prototype.postMessage;
      Worker.prototype.postMessage = function (message, ...rest) {
        if (message?.type === 'call' && message.method === 'writeMidi') {
          setTimeout(() => post.call(this, message, ...rest), 1500);
          return undefined;
        }
        return post.call(this, message, ...rest);
      };
    });
    await page.click('#new-piece');
    await page.selectOption('#quantise', '1');
    // A note in bar 1; its refill starts 400 ms later and waits on the Worker; meanwhile a note
    // in bar 3, whose own refill covers bar 3 only.
    await drag(page, [20, 64], [2 * Q - 40, 64]);
    await page.waitForFunction(() => window.pianoformer.piece.tracks[0].notes.length === 1);
    await page.waitForFunction(() => window.pianoformer.lanesRefill() === 'reading', null, { timeout: 30_000 });
    await drag(page, [8 * Q + 20, 67], [10 * Q - 40, 67]);
    await page.waitForFunction(() => window.pianoformer.piece.tracks[0].notes.length === 2);
    await page.waitForFunction(() => window.pianoformer.piece.chords[0] && window.pianoformer.piece.chords[2], null, { timeout: 30_000 });
    assert.deepEqual(log.filter((l) => l.startsWith('[pageerror]')), []);
  } finally {
    await browser.close();
  }
});
