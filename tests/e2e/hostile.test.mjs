// End-to-end: the page under hostile input. Malformed and unusual MIDI files dropped on a
// piece the user has worked on each get a sentence naming the file while the piece stays
// exactly as it was (or, for unusual but readable files, open as a new piece); damaged share
// links get a sentence, not a blank page; no uncaught exception and no CSP violation on the way.
// The files are written here, byte by byte. Needs pkg/ (make wasm) and Chromium (make setup).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { normalizePiece } from '../../www/share.js';
import { cspViolations, launch, serveApp } from './browser.mjs';

let server;
let base;
let song;

before(async () => {
  let wasm;
  ({ server, base, wasm } = await serveApp({ wasm: true }));
  song = wasm.exampleMidi(5, 8);
});

after(() => server?.close());

const bytes = (s) => [...new TextEncoder().encode(s)];
const u32 = (n) => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255];
const u16 = (n) => [(n >> 8) & 255, n & 255];
const header = (format, tracks, division) => [...bytes('MThd'), ...u32(6), ...u16(format), ...u16(tracks), ...u16(division)];
const track = (events) => [...bytes('MTrk'), ...u32(events.length), ...events];
// Middle C for a quarter note at 480 ticks per quarter, and the end of the track.
const note = [0x00, 0x90, 60, 100, 0x83, 0x60, 0x80, 60, 0];
const end = [0x00, 0xff, 0x2f, 0x00];
const longest = [0x8f, 0xff, 0xff, 0x7f]; // the largest delta time MIDI can write

const HTML_NAME = '<img src=x onerror="window.__pwned=1">';

/** Files the page must refuse, each with what its sentence must say. */
const REFUSED = {
  'empty.mid': [[], /empty/],
  'not-midi.mid': [bytes('hello, I am a text file with a .mid name'), /not a MIDI file/],
  'truncated-header.mid': [header(0, 1, 480).slice(0, 9), /not a MIDI file, or it is damaged/],
  'wrong-header-length.mid': [
    [...bytes('MThd'), ...u32(100), ...u16(0), ...u16(1), ...u16(480), ...track([...note, ...end])],
    /no tracks/,
  ],
  'zero-tracks.mid': [header(1, 0, 480), /no tracks/],
  'no-notes.mid': [[...header(0, 1, 480), ...track(end)], /no notes/],
  'running-status-first.mid': [[...header(0, 1, 480), ...track([0x00, 60, 100, ...end])], /no notes/],
  'huge-sysex.mid': [[...header(0, 1, 480), ...track([0x00, 0xf0, ...longest, 1, 2, 3])], /no notes/],
  'huge-delta.mid': [
    [...header(0, 1, 480), ...track([...longest, 0x90, 60, 100, ...longest, 0x80, 60, 0, ...end])],
    /quarter notes long; at most/,
  ],
  'smpte.mid': [[...header(0, 1, 0xe728), ...track([...note, ...end])], /SMPTE/],
  'zero-division.mid': [[...header(0, 1, 0), ...track([...note, ...end])], /0 ticks per quarter/],
  // Built in the page (a 9 MB array is slow to pass in): a header, then zeros.
  'too-big.mid': [{ head: header(0, 1, 480), zeros: 9 * 1024 * 1024 }, /up to 8 MB/],
  'notes.txt': [bytes('C D E F G'), /not a MIDI file \(\.mid or \.midi\)/],
};

/** Unusual files that can be read: they open as a new piece. */
const READABLE = {
  'truncated-track.mid': [...header(0, 1, 480), ...bytes('MTrk'), ...u32(1000), ...note],
  'type-2.mid': [...header(2, 2, 480), ...track([...note, ...end]), ...track([...note, ...end])],
  'more-tracks-than-written.mid': [...header(1, 65535, 480), ...track([...note, ...end])],
  // Text in a file is shown as text: a track name that is HTML.
  'html-name.mid': [...header(0, 1, 480), ...track([0x00, 0xff, 0x03, HTML_NAME.length, ...bytes(HTML_NAME), ...note, ...end])],
};

/** Drops `data` (bytes, or `{head, zeros}`) as a file named `name`, as a user dragging it in. */
async function drop(page, data, name) {
  await page.evaluate(
    ({ data, name }) => {
      const body = Array.isArray(data) ? [new Uint8Array(data)] : [new Uint8Array(data.head), new Uint8Array(data.zeros)];
      const file = new File(body, name, { type: name.endsWith('.txt') ? 'text/plain' : 'audio/midi' });
      const dt = new DataTransfer();
      dt.items.add(file);
      for (const type of ['dragenter', 'dragover', 'drop']) {
        document.querySelector('main').dispatchEvent(new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true }));
      }
    },
    { data, name },
  );
}

async function ready(url) {
  const { browser, page, log } = await launch({ webgpu: false, url });
  await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: 120_000 });
  assert.equal(await page.evaluate(() => window.pianoformer.state), 'ready', log.join('\n'));
  return { browser, page, log };
}

test('malformed MIDI files get a sentence and the piece the user made stays', { timeout: 600_000 }, async () => {
  const { browser, page, log } = await ready(`${base}?backend=cpu`);
  try {
    await drop(page, [...song], 'song.mid');
    await page.waitForFunction(() => window.pianoformer.piece?.name === 'song.mid', null, { timeout: 30_000 });
    // Something the user made: an accompaniment.
    const n = await page.evaluate(() => window.pianoformer.generations.length);
    await page.selectOption('#task', 'accompaniment');
    await page.click('#generate');
    await page.waitForFunction((n) => window.pianoformer.generations.length > n, n, { timeout: 300_000 });
    const made = normalizePiece(await page.evaluate(() => window.pianoformer.piece));
    assert.ok(made.tracks.some((t) => t.role === 'generated' && t.notes.length > 0), 'the accompaniment is there');

    for (const [name, [data, says]] of Object.entries(REFUSED)) {
      await page.evaluate(() => { document.getElementById('error').hidden = true; });
      await drop(page, data, name);
      await page.waitForFunction(
        (name) => !document.getElementById('error').hidden && document.getElementById('error-text').textContent.includes(name),
        name,
        { timeout: 60_000 },
      ).catch((e) => { throw new Error(`${name}: no sentence (${e.message})\n${log.join('\n')}`); });
      const text = await page.textContent('#error-text');
      assert.match(text, says, name);
      assert.deepEqual(normalizePiece(await page.evaluate(() => window.pianoformer.piece)), made, `${name}: the piece stays`);
      assert.equal(await page.evaluate(() => window.pianoformer.state), 'ready', name);
    }

    for (const [name, data] of Object.entries(READABLE)) {
      await drop(page, data, name);
      await page.waitForFunction((name) => window.pianoformer.piece?.name === name, name, { timeout: 60_000 })
        .catch((e) => { throw new Error(`${name}: not opened (${e.message})\n${log.join('\n')}`); });
      const piece = await page.evaluate(() => window.pianoformer.piece);
      assert.ok(piece.tracks.some((t) => t.notes.length > 0), `${name}: its notes are there`);
    }
    // The last one opened has an HTML track name: shown as text, never as markup.
    assert.match(await page.textContent('#tracks'), /<img src=x onerror=/);
    assert.equal(await page.locator('#tracks img').count(), 0);
    assert.equal(await page.evaluate(() => window.__pwned ?? null), null);
    assert.deepEqual(log.filter((l) => l.startsWith('[pageerror]')), [], 'no uncaught exception');
    assert.deepEqual(await cspViolations(page, log), []);
  } finally {
    await browser.close();
  }
});

test('a damaged share link gets a sentence, and the piece the user was working on stays', { timeout: 300_000 }, async () => {
  const { browser, page, log } = await ready(`${base}?backend=cpu`);
  try {
    // Work in progress, saved by the page (half a second after a change).
    await drop(page, [...song], 'work.mid');
    await page.waitForFunction(() => window.pianoformer.piece?.name === 'work.mid', null, { timeout: 30_000 });
    const work = normalizePiece(await page.evaluate(() => window.pianoformer.piece));
    await page.waitForFunction(() => !window.pianoformer.workPending(), null, { timeout: 30_000 });
    let visit = 0;
    for (const fragment of ['garbage', 'v1.%%%', 'v1.' + 'A'.repeat(5000), 'v2.' + 'B'.repeat(64)]) {
      // A fresh load of the page by a damaged link (another query, so not a same-page jump).
      visit += 1;
      await page.goto(`${base}?backend=cpu&visit=${visit}#${fragment}`);
      await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: 120_000 });
      await page.waitForSelector('#error:not([hidden])', { timeout: 30_000 });
      assert.match(await page.textContent('#error-text'), /This share link could not be opened: \S/, fragment);
      await page.waitForFunction(() => window.pianoformer.piece?.name === 'work.mid', null, { timeout: 30_000 })
        .catch((e) => { throw new Error(`${fragment}: the saved work is not back (${e.message})\n${log.join('\n')}`); });
      assert.deepEqual(normalizePiece(await page.evaluate(() => window.pianoformer.piece)), work, `${fragment}: the work stays`);
    }
    // Still usable: a file opens.
    await drop(page, [...song], 'after.mid');
    await page.waitForFunction(() => window.pianoformer.piece?.name === 'after.mid', null, { timeout: 30_000 });
    assert.deepEqual(log.filter((l) => l.startsWith('[pageerror]')), [], 'no uncaught exception');
    assert.deepEqual(await cspViolations(page, log), []);
  } finally {
    await browser.close();
  }
});
