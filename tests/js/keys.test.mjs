// Playing in: the computer-keyboard map, MIDI message decoding, a take's quantisation and how
// a take goes into a piece (www/keys.js).
import test from 'node:test';
import assert from 'node:assert/strict';
import { Take, computerKeyPitch, emptyPiece, noteMessage, pedalMessage, recordInto } from '../../www/keys.js';

test('the computer keyboard is a piano from C, an octave at a time', () => {
  assert.equal(computerKeyPitch('a'), 60);
  assert.equal(computerKeyPitch('W'), 61);
  assert.equal(computerKeyPitch('k'), 72);
  assert.equal(computerKeyPitch(';'), 76);
  assert.equal(computerKeyPitch('a', 2), 36);
  assert.equal(computerKeyPitch('q'), null);
  assert.equal(computerKeyPitch('a', 10), null, 'above the MIDI range');
});

test('MIDI messages: note-on, note-off (or velocity 0) on any channel; the rest ignored', () => {
  assert.deepEqual(noteMessage([0x90, 60, 100]), { on: true, pitch: 60, velocity: 100 });
  assert.deepEqual(noteMessage([0x93, 61, 1]), { on: true, pitch: 61, velocity: 1 });
  assert.deepEqual(noteMessage([0x90, 60, 0]), { on: false, pitch: 60 });
  assert.deepEqual(noteMessage([0x8f, 60, 64]), { on: false, pitch: 60 });
  for (const other of [[0xf8], [0xb0, 64, 127], [0xe0, 0, 64], [0xf0, 1, 2, 0xf7], [], null]) {
    assert.equal(noteMessage(other), null, JSON.stringify(other));
  }
});

test('a take snaps to the grid, keeps a slightly early first note and ends held keys', () => {
  const piece = emptyPiece({ bpm: 120 }); // 500 ms a quarter, 480 ticks
  const take = new Take({ piece, startTick: 1920, startMs: 10_000, grid: 120 });
  take.on(60, 90, 9_970); // 30 ms early: within half a sixteenth
  take.off(60, 10_260);
  take.on(55, 70, 9_700); // 300 ms early: in the count-in, dropped
  take.off(55, 9_800);
  take.on(64, 80, 10_490);
  take.on(64, 81, 10_740); // struck again: the first one ends
  take.off(64, 10_990);
  take.on(67, 60, 11_000); // still down at the end
  assert.deepEqual(take.notes(12_000), [
    [60, 1920, 2160, 90],
    [64, 2400, 2640, 80],
    [64, 2640, 2880, 81],
    [67, 2880, 3840, 60],
  ]);
  const loose = new Take({ piece, startTick: 0, startMs: 0, grid: 0 });
  loose.on(60, 90, 101);
  loose.off(60, 102);
  assert.deepEqual(loose.notes(1000), [[60, 97, 98, 90]], 'not quantised, at least a tick long');
});

test('a take replaces the melody where it was played, and the bars grow to hold it', () => {
  const piece = emptyPiece({ bars: 2 });
  piece.tracks = [{ name: 'PIANO', role: 'piano', program: 0, notes: [[48, 0, 960, 70]] }];
  const once = recordInto(piece, [[60, 0, 480, 90], [62, 3840, 5760, 90]], 0, 5760);
  assert.equal(once.tracks[0].name, 'MELODY', 'a melody track is made when there is none');
  assert.deepEqual(once.tracks[1].notes, [[48, 0, 960, 70]], 'other tracks are kept');
  assert.deepEqual(once.bars, [0, 1920, 3840]);
  assert.equal(once.chords.length, 3);
  assert.equal(once.promptBars, 3);
  assert.equal(once.endTick, 5760);
  const twice = recordInto(once, [[67, 0, 240, 80]], 0, 240);
  assert.deepEqual(twice.tracks[0].notes, [[67, 0, 240, 80], [62, 3840, 5760, 90]]);
  assert.deepEqual(once.tracks[0].notes[0], [60, 0, 480, 90], 'the piece given is not changed');
});

test('a keyboard\'s sustain pedal is read, recorded in the take and kept in the melody', () => {
  assert.equal(pedalMessage([0xb0, 64, 127]), 127);
  assert.equal(pedalMessage([0xb3, 64, 20]), 20, 'any channel');
  assert.equal(pedalMessage([0xb0, 7, 100]), null, 'volume is no pedal');
  assert.equal(pedalMessage([0x90, 64, 100]), null, 'a note');
  assert.equal(pedalMessage([0xb0, 64]), null);
  // 120 bpm, 480 ppq: 1 ms is 0.96 ticks. The take starts at tick 1920, at 1000 ms.
  const piece = emptyPiece({ bpm: 120 });
  const take = new Take({ piece, startTick: 1920, startMs: 1000, grid: 120 });
  take.pedal(127, 900); // pressed in the count-in: down from the start
  take.on(60, 90, 1000);
  take.off(60, 1250);
  take.pedal(40, 1500); // a half pedal, up
  take.pedal(127, 1600); // down again, still down when the take stops
  const pedal = take.pedalEvents(2000);
  assert.deepEqual(pedal, [[1920, 64, 127], [2400, 64, 40], [2496, 64, 127], [2880, 64, 0]]);
  const next = recordInto(piece, take.notes(2000), 1920, 2400, pedal);
  assert.deepEqual(next.tracks[0].pedal, pedal);
  // A second take over the same bars replaces that pedal, and keeps the rest.
  const again = recordInto(next, [[62, 4000, 4100, 80]], 3840, 4100, [[3840, 64, 127], [4100, 64, 0]]);
  assert.deepEqual(again.tracks[0].pedal, [...pedal, [3840, 64, 127], [4100, 64, 0]]);
  assert.equal(recordInto(piece, [[60, 0, 240, 90]], 0, 240).tracks[0].pedal, undefined, 'no pedal, no field');
});
