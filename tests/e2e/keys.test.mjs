// End-to-end: playing a melody in. A fake MIDI keyboard (a stand-in for navigator's
// requestMIDIAccess, installed before the page's scripts) plays four quarter notes into an
// empty page after the count-in; they land on the beats of a new piece's melody, chords are
// detected, and the default model accompanies them. A second take from the computer keyboard
// replaces the first while the accompaniment plays along, and Undo brings the first back; the
// metronome clicks, and keys played outside a take sound without touching the piece. Without
// Web MIDI, connecting says why.
// Needs pkg/ (make wasm), the samples (make samples) and Chromium (make setup).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { OUT, cspViolations, launch, serveApp } from './browser.mjs';

let server;
let base;

before(async () => {
  ({ server, base } = await serveApp());
});

after(() => server?.close());

function fakeMidi() {
  const input = { id: 'fake-1', name: 'Fake Keys', manufacturer: 'pianoformer tests', state: 'connected', type: 'input', onmidimessage: null };
  window.__midiSend = (data) => input.onmidimessage?.({ data: Uint8Array.from(data), timeStamp: performance.now() });
  navigator.requestMIDIAccess = async () => ({ inputs: new Map([[input.id, input]]), outputs: new Map(), onstatechange: null });
}

async function ready(page, log) {
  await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: 120_000 });
  assert.equal(await page.evaluate(() => window.pianoformer.state), 'ready', log.join('\n'));
}

/** Starts a take and waits for its count-in to end; returns { beatMs }. */
async function record(page) {
  await page.click('#record');
  await page.waitForFunction(() => window.pianoformer.recording, null, { timeout: 60_000 });
  return page.evaluate(() => {
    const { startMs } = window.pianoformer.recording;
    return new Promise((ok) => setTimeout(() => ok(), Math.max(0, startMs - performance.now())));
  });
}

/** In the page, at beat `b` of the take (bpm from the piece), calls `send(pitch, on)`. */
async function playBeats(page, kind, notes) {
  await page.evaluate(({ kind, notes }) => {
    const { startMs } = window.pianoformer.recording;
    const beatMs = 60000 / window.pianoformer.recordingBpm;
    const keyOf = { 60: 'a', 62: 's', 64: 'd', 65: 'f', 67: 'g', 69: 'h', 71: 'j', 72: 'k' };
    const send = (pitch, on) => {
      if (kind === 'midi') window.__midiSend(on ? [0x90, pitch, 100] : [0x80, pitch, 0]);
      else document.body.dispatchEvent(new KeyboardEvent(on ? 'keydown' : 'keyup', { key: keyOf[pitch], bubbles: true }));
    };
    return Promise.all(notes.flatMap(([pitch, beat, beats]) => [
      new Promise((ok) => setTimeout(() => ok(send(pitch, true)), startMs + beat * beatMs - performance.now())),
      new Promise((ok) => setTimeout(() => ok(send(pitch, false)), startMs + (beat + beats) * beatMs - performance.now())),
    ]));
  }, { kind, notes });
}

const melody = (p) => p.tracks.find((t) => t.role === 'melody').notes.map((n) => n.slice(0, 3));

test('a MIDI keyboard and the computer keyboard record a melody that the model accompanies', { timeout: 600_000 }, async () => {
  const { browser, page, log } = await launch({ webgpu: false, url: `${base}?backend=cpu`, init: fakeMidi });
  try {
    await ready(page, log);
    await page.click('#midi-connect');
    await page.waitForFunction(() => /Fake Keys/.test(document.getElementById('notice').textContent), null, { timeout: 10_000 });
    await page.selectOption('#quantise', '1'); // quarter notes: generous for a loaded machine

    await record(page);
    await playBeats(page, 'midi', [[60, 0, 0.9], [64, 1, 0.9], [67, 2, 0.9], [72, 3, 1.9]]);
    await page.click('#record');
    await page.waitForFunction(() => window.pianoformer.piece?.name === 'recording.mid', null, { timeout: 30_000 });
    // The metronome clicked the count-in and the beats of the take (4 + 4 at least).
    assert.ok(await page.evaluate(() => window.pianoformer.clicks >= 8), `clicks: ${await page.evaluate(() => window.pianoformer.clicks)}`);
    const first = await page.evaluate(() => window.pianoformer.piece);
    assert.deepEqual(melody(first), [[60, 0, 480], [64, 480, 960], [67, 960, 1440], [72, 1440, 2400]]);
    assert.ok(first.chords.length >= 2 && first.chords.some((c) => c), `chords detected: ${first.chords}`);
    assert.equal(first.promptBars, 2);
    assert.deepEqual(first.bars.slice(0, 3), [0, 1920, 3840], "whole bars");

    // The model accompanies what was played.
    const n = await page.evaluate(() => window.pianoformer.generations.length);
    await page.selectOption('#task', 'accompaniment');
    await page.click('#generate');
    await page.waitForFunction((n) => window.pianoformer.generations.length > n || !document.getElementById('error').hidden, n, { timeout: 300_000 });
    assert.equal(await page.evaluate(() => (document.getElementById('error').hidden ? null : window.pianoformer.error)), null);
    assert.ok((await page.evaluate(() => window.pianoformer.generations.at(-1).notes)) > 0);
    await page.screenshot({ path: join(OUT, 'recorded-and-accompanied.png'), fullPage: true });
    const accompanied = await page.evaluate(() => window.pianoformer.piece);

    // A second take from the computer keyboard, over the first bar: replaces those notes.
    await page.click('#keys-toggle');
    assert.equal(await page.getAttribute('#keys-toggle', 'aria-pressed'), 'true');
    await record(page);
    assert.equal(await page.evaluate(() => window.pianoformer.playingAlong), true, 'the accompaniment plays along');
    await playBeats(page, 'keys', [[62, 0, 0.9], [65, 1, 0.9], [69, 2, 0.9], [71, 3, 0.9]]);
    await page.click('#record');
    await page.waitForFunction(() => /Recorded 4 notes/.test(document.getElementById('notice').textContent), null, { timeout: 30_000 });
    const second = await page.evaluate(() => window.pianoformer.piece);
    assert.deepEqual(melody(second), [[62, 0, 480], [65, 480, 960], [69, 960, 1440], [71, 1440, 1920]]);
    await page.click('#undo');
    assert.deepEqual(melody(await page.evaluate(() => window.pianoformer.piece)), melody(accompanied), 'Undo brings the first take back');
    assert.ok(await page.evaluate(() => window.pianoformer.keysPlayed >= 8), 'the keys were heard');
    // Playing without recording: the keys sound, and the piece stays as it is.
    const kept = await page.evaluate(() => window.pianoformer.piece);
    const heard = await page.evaluate(() => window.pianoformer.keysPlayed);
    await page.evaluate(() => {
      window.__midiSend([0x90, 67, 90]);
      window.__midiSend([0x80, 67, 0]);
      document.body.dispatchEvent(new KeyboardEvent('keydown', { key: 'a', bubbles: true }));
      document.body.dispatchEvent(new KeyboardEvent('keyup', { key: 'a', bubbles: true }));
    });
    assert.equal(await page.evaluate(() => window.pianoformer.keysPlayed), heard + 2, 'both keys sounded');
    assert.equal(await page.evaluate(() => window.pianoformer.recording ?? null), null, 'no take');
    assert.deepEqual(await page.evaluate(() => window.pianoformer.piece), kept, 'the piece is unchanged');
    assert.deepEqual(log.filter((l) => l.startsWith('[pageerror]')), []);
    assert.deepEqual(await cspViolations(page, log), []);
  } finally {
    await browser.close();
  }
});

test('without Web MIDI, connecting a keyboard says why and points to the computer keys', { timeout: 300_000 }, async () => {
  const init = () => {
    delete Navigator.prototype.requestMIDIAccess;
    delete navigator.requestMIDIAccess;
  };
  const { browser, page, log } = await launch({ webgpu: false, url: `${base}?backend=cpu`, init });
  try {
    await ready(page, log);
    await page.click('#midi-connect');
    await page.waitForSelector('#error:not([hidden])', { timeout: 10_000 });
    assert.match(await page.textContent('#error-text'), /no Web MIDI.*computer keyboard/);
  } finally {
    await browser.close();
  }
});
