// Unit tests of the page's pure audio helpers (www/audio.js) and the tempo map (www/piece.js),
// in Node without a browser: `node --test tests/js/`. The sample-file check needs www/samples/
// (`node tools/samples.mjs`) and is skipped without it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { encodeWav, groupOf, nearestSample, noteEvents, SAMPLES } from '../../www/audio.js';
import { secondsAt, tickAtSeconds } from '../../www/piece.js';

const SAMPLE_DIR = fileURLToPath(new URL('../../www/samples/', import.meta.url));

/** A small piece: 480 ppq, 120 bpm, then 60 bpm from tick 960 (bar 2 beat 1 in 2/4). */
function piece(tracks = []) {
  return {
    version: 1,
    name: 'test',
    ppq: 480,
    tempos: [
      [0, 500000],
      [960, 1000000],
    ],
    timeSignatures: [[0, 4, 4]],
    bars: [0, 1920],
    endTick: 1920,
    tracks,
    chords: ['', ''],
    phrases: [['A', 2]],
    promptBars: 2,
  };
}

const close = (actual, expected, eps = 1e-9) =>
  assert.ok(Math.abs(actual - expected) <= eps, `${actual} is not ${expected} (±${eps})`);

test('encodeWav writes a RIFF/WAVE PCM16 header', () => {
  const left = new Float32Array([0, 0.5, -0.5]);
  const right = new Float32Array([1, -1, 0]);
  const buffer = encodeWav([left, right], 44100);
  const view = new DataView(buffer);
  const ascii = (offset) => String.fromCharCode(...new Uint8Array(buffer, offset, 4));
  assert.equal(buffer.byteLength, 44 + 3 * 2 * 2);
  assert.equal(ascii(0), 'RIFF');
  assert.equal(view.getUint32(4, true), buffer.byteLength - 8);
  assert.equal(ascii(8), 'WAVE');
  assert.equal(ascii(12), 'fmt ');
  assert.equal(view.getUint32(16, true), 16);
  assert.equal(view.getUint16(20, true), 1, 'PCM');
  assert.equal(view.getUint16(22, true), 2, 'channels');
  assert.equal(view.getUint32(24, true), 44100, 'sample rate');
  assert.equal(view.getUint32(28, true), 44100 * 4, 'byte rate');
  assert.equal(view.getUint16(32, true), 4, 'block align');
  assert.equal(view.getUint16(34, true), 16, 'bits per sample');
  assert.equal(ascii(36), 'data');
  assert.equal(view.getUint32(40, true), 12);
});

test('encodeWav interleaves, scales and clamps the samples', () => {
  const left = new Float32Array([0, 0.5, -0.5, 1.5, -1.5, NaN]);
  const right = new Float32Array([1, -1, 0.25, -0.25, 0, 0]);
  const samples = new Int16Array(encodeWav([left, right], 8000).slice(44));
  assert.deepEqual(
    [...samples],
    [0, 32767, 16384, -32768, -16384, 8192, 32767, -8192, -32768, 0, 0, 0],
  );
  const mono = new DataView(encodeWav([new Float32Array([0.25])], 22050));
  assert.equal(mono.getUint16(22, true), 1);
  assert.equal(mono.getUint32(28, true), 44100);
  assert.equal(mono.getUint16(32, true), 2);
  assert.equal(mono.getInt16(44, true), 8192);
});

test('encodeWav refuses channels of different lengths and bad rates', () => {
  assert.throws(() => encodeWav([new Float32Array(2), new Float32Array(3)], 44100), RangeError);
  assert.throws(() => encodeWav([], 44100), RangeError);
  assert.throws(() => encodeWav([new Float32Array(2)], 0), RangeError);
  assert.equal(encodeWav([new Float32Array(0)], 44100).byteLength, 44);
});

test('nearestSample picks the sample at most a semitone away', () => {
  assert.deepEqual(nearestSample(21), { name: 'A0', pitch: 21 });
  assert.deepEqual(nearestSample(22), { name: 'A0', pitch: 21 });
  assert.deepEqual(nearestSample(23), { name: 'C1', pitch: 24 });
  assert.deepEqual(nearestSample(60), { name: 'C4', pitch: 60 });
  assert.deepEqual(nearestSample(61), { name: 'C4', pitch: 60 });
  assert.deepEqual(nearestSample(62), { name: 'Ds4', pitch: 63 });
  assert.deepEqual(nearestSample(66), { name: 'Fs4', pitch: 66 });
  assert.deepEqual(nearestSample(69), { name: 'A4', pitch: 69 });
  assert.deepEqual(nearestSample(108), { name: 'C8', pitch: 108 });
  // Outside the piano: the end samples, re-pitched further.
  assert.deepEqual(nearestSample(0), { name: 'A0', pitch: 21 });
  assert.deepEqual(nearestSample(127), { name: 'C8', pitch: 108 });
  for (let p = 21; p <= 108; p++) {
    assert.ok(Math.abs(nearestSample(p).pitch - p) <= 1, `pitch ${p}`);
  }
});

test('every sample nearestSample can return is in www/samples', (t) => {
  const names = new Set();
  for (let p = 0; p <= 127; p++) names.add(nearestSample(p).name);
  assert.equal(names.size, 30);
  assert.deepEqual([...names], SAMPLES.map((s) => s.name));
  if (!existsSync(SAMPLE_DIR)) {
    t.skip('www/samples/ is absent: run `node tools/samples.mjs` to check the files');
    return;
  }
  const missing = [...names].filter((name) => !existsSync(`${SAMPLE_DIR}${name}.mp3`));
  assert.deepEqual(missing, [], `missing in www/samples/: ${missing.join(', ')}`);
});

test('secondsAt follows a tempo change, and tickAtSeconds inverts it', () => {
  const p = piece();
  close(secondsAt(p, 0), 0);
  close(secondsAt(p, 480), 0.5);
  close(secondsAt(p, 960), 1);
  close(secondsAt(p, 1440), 2);
  close(secondsAt(p, 1920), 3);
  close(secondsAt(p, 1920, 2), 1.5, 1e-9);
  close(tickAtSeconds(p, 0.5), 480);
  close(tickAtSeconds(p, 1), 960);
  close(tickAtSeconds(p, 2.5), 1680);
  close(tickAtSeconds(p, 1.5, 2), 1920);
  for (const scale of [0.5, 1, 1.7]) {
    for (let tick = 0; tick <= 4000; tick += 37) {
      close(tickAtSeconds(p, secondsAt(p, tick, scale), scale), tick, 1e-6);
    }
  }
});

test('the tempo map handles no tempo, a first tempo after tick 0 and repeated ticks', () => {
  const none = { ...piece(), tempos: [] };
  close(secondsAt(none, 960), 1); // 120 bpm by default
  close(tickAtSeconds(none, 1), 960);
  const late = { ...piece(), tempos: [[480, 1000000], [960, 500000]] };
  close(secondsAt(late, 480), 1); // the first tempo also holds before it
  close(secondsAt(late, 1440), 2.5);
  const twice = { ...piece(), tempos: [[0, 500000], [960, 250000], [960, 1000000]] };
  close(secondsAt(twice, 1440), 2); // the last tempo at a tick wins
  for (const p of [none, late, twice]) {
    for (let tick = 0; tick <= 3000; tick += 53) {
      close(tickAtSeconds(p, secondsAt(p, tick)), tick, 1e-6);
    }
  }
});

test('noteEvents lists the notes of a range in seconds, cut at its end', () => {
  const p = piece([
    { name: 'tune', role: 'melody', program: 0, notes: [[72, 0, 480, 100], [74, 960, 1440, 90]] },
    { name: 'left', role: 'piano', program: 0, notes: [[48, 480, 1920, 70], [50, 1000, 1000, 0]] },
  ]);
  const all = noteEvents(p);
  assert.equal(all.endTick, 1920);
  close(all.length, 3);
  close(all.tail, 3.3);
  assert.deepEqual(
    all.events.map((e) => [e.pitch, e.group]),
    [[72, 'melody'], [48, 'accompaniment'], [74, 'melody']], // sorted by time; velocity 0 dropped
  );
  close(all.events[1].time, 0.5);
  close(all.events[1].duration, 2.5);
  const part = noteEvents(p, { fromTick: 480, toTick: 1440, tempo: 2 });
  close(part.start, 0.25);
  close(part.length, 0.75);
  assert.deepEqual(part.events.map((e) => e.pitch), [48, 74]);
  close(part.events[0].duration, 0.75); // cut at toTick
  close(part.events[1].time, 0.25);
  assert.throws(() => noteEvents(p, { tempo: 0 }), RangeError);
  assert.equal(groupOf('bridge'), 'melody');
  assert.equal(groupOf('generated'), 'accompaniment');
  assert.equal(groupOf('other'), 'accompaniment');
});

test('audio.js re-exports the pure helpers of audio-notes.js', async () => {
  const audio = await import('../../www/audio.js');
  const notes = await import('../../www/audio-notes.js');
  for (const name of ['SAMPLES', 'MELODY_ROLES', 'nearestSample', 'groupOf', 'noteEvents', 'encodeWav']) {
    assert.equal(audio[name], notes[name], name);
  }
  assert.deepEqual(Object.keys(audio).sort(),
    ['MELODY_ROLES', 'Piano', 'SAMPLES', 'START_DELAY', 'encodeWav', 'groupOf', 'nearestSample', 'noteEvents']);
});

test('velocity gain: a curve from 1 to 127, clamped', async () => {
  const { velocityGain } = await import('../../www/audio-notes.js');
  assert.equal(velocityGain(127), 1);
  assert.equal(velocityGain(200), 1);
  assert.equal(velocityGain(0), velocityGain(1));
  assert.ok(Math.abs(velocityGain(64) - (64 / 127) ** 1.6) < 1e-12);
  assert.ok(velocityGain(64) < 64 / 127, 'soft notes softer than linear');
});

test('a sample\'s onset: its first sound above -60 dB on any channel, less 2 ms', async () => {
  const { findOnset } = await import('../../www/audio-notes.js');
  const buffer = (channels, sampleRate = 1000) => ({
    length: channels[0].length, numberOfChannels: channels.length, sampleRate,
    getChannelData: (c) => channels[c],
  });
  const silent = new Float32Array(100);
  const late = new Float32Array(100);
  late[50] = 0.5;
  const early = new Float32Array(100);
  early[20] = -0.01;
  assert.equal(findOnset(buffer([silent])), 0, 'silence: from the start');
  assert.ok(Math.abs(findOnset(buffer([late])) - 0.048) < 1e-12);
  assert.ok(Math.abs(findOnset(buffer([late, early])) - 0.018) < 1e-12, 'the earlier channel');
  const quiet = new Float32Array(100).fill(5e-4);
  assert.equal(findOnset(buffer([quiet])), 0, 'below the threshold is silence');
  const first = new Float32Array(10);
  first[1] = 1;
  assert.equal(findOnset(buffer([first])), 0, 'never before the start');
});
