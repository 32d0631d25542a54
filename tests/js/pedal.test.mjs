// The sustain pedal as the sampler plays it (www/pedal.js, www/audio-notes.js): which spans it
// is down, how long notes sound under it, and what a piece's pedal may hold. Node only.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { downAt, downSpans, drawPedal, liftPedalAt, pedalProblem, pedalTrack, soundingEnds, splicePedal } from '../../www/pedal.js';
import { noteEvents } from '../../www/audio.js';

const close = (a, b, eps = 1e-9) => assert.ok(Math.abs(a - b) < eps, `${a} is not ${b}`);

test('the pedal is down from 64; half-pedal values sound as up; a pedal never lifted holds to the end', () => {
  const events = [
    [0, 64, 30], [10, 64, 50], [20, 64, 64], [30, 64, 127], [40, 64, 0],
    [50, 67, 127], // the soft pedal is no damper
    [60, 64, 100],
  ];
  assert.deepEqual(downSpans(events, 90), [[20, 40], [60, 90]]);
  assert.deepEqual(downSpans([[95, 64, 127]], 90), [[95, 96]]);
  assert.deepEqual(downSpans(undefined, 90), []);
});

test('a note sounds until the lift unless it is struck again (the rule src/music/pedal.rs keeps)', () => {
  const spans = [[0, 100]];
  const notes = [
    [60, 0, 10, 80], // released under the pedal: to the lift
    [62, 0, 10, 80], // struck again at 40: until then
    [62, 40, 50, 80], // the second strike: to the lift
    [64, 90, 120, 80], // released after the lift: as written
    [65, 100, 110, 80], // struck as the pedal lifts: as written
  ];
  assert.deepEqual(soundingEnds(notes, spans), [100, 40, 100, 120, 110]);
  assert.deepEqual(soundingEnds(notes, []), [10, 10, 50, 120, 110]);
});

test('noteEvents holds a track\'s notes under its own pedal, cut at the range, and not with the pedal off', () => {
  const piece = {
    ppq: 480, tempos: [[0, 500000]], endTick: 1920,
    tracks: [
      { name: 'tune', role: 'melody', notes: [[72, 0, 240, 100]] },
      { name: 'left', role: 'piano', notes: [[48, 0, 240, 70], [52, 480, 720, 70]], pedal: [[0, 64, 127], [960, 64, 0]] },
    ],
  };
  const held = noteEvents(piece);
  const by = (plan, pitch) => plan.events.find((e) => e.pitch === pitch);
  close(by(held, 72).duration, 0.25); // the melody has no pedal of its own
  close(by(held, 48).duration, 1); // held to the lift at tick 960 (1 s)
  close(by(held, 52).duration, 0.5);
  const dry = noteEvents(piece, { pedal: false });
  close(by(dry, 48).duration, 0.25);
  const cut = noteEvents(piece, { toTick: 600 });
  close(by(cut, 48).duration, 0.625); // the loop's end cuts the held note
  // A pedal never lifted holds to the end of the piece, and no further.
  piece.tracks[1].pedal = [[0, 64, 127]];
  const stuck = noteEvents(piece);
  close(by(stuck, 48).duration, 2);
  close(by(stuck, 52).duration, 1.5);
  close(stuck.tail, 2.3); // with the last release
});

test('a piece\'s pedal is checked in words', () => {
  assert.equal(pedalProblem(undefined), null);
  assert.equal(pedalProblem([[0, 64, 127], [0, 64, 0], [9, 67, 20]]), null);
  assert.match(pedalProblem('x'), /not a list/);
  assert.match(pedalProblem([[0, 64]]), /not a list/);
  assert.match(pedalProblem([[0, 64, 1.5]]), /not a list/);
  assert.match(pedalProblem([[0, 7, 127]]), /controller 7/);
  assert.match(pedalProblem([[0, 64, 128]]), /value 128/);
  assert.match(pedalProblem([[-1, 64, 0]]), /tick -1/);
  assert.match(pedalProblem([[5, 64, 0], [4, 64, 127]]), /out of order/);
  // Thousands of events are a pianist's long piece, not a problem.
  const many = Array.from({ length: 20000 }, (_, i) => [i * 10, 64, i % 2 ? 0 : 127]);
  assert.equal(pedalProblem(many), null);
});

test('a span of new pedal leaves both sides sounding as they did (the rule src/music/pedal.rs keeps)', () => {
  const old = [[0, 64, 127], [100, 64, 0], [150, 64, 127]];
  const out = splicePedal(old, [[60, 64, 127], [110, 64, 0]], 40, 120);
  assert.deepEqual(out, [[0, 64, 127], [40, 64, 0], [60, 64, 127], [110, 64, 0], [150, 64, 127]]);
  assert.deepEqual(splicePedal(old, [], 40, 160), [[0, 64, 127], [40, 64, 0], [160, 64, 127]]);
  assert.ok(downAt(out, 30) && !downAt(out, 50) && downAt(out, 70));
});

test('the pedal lane draws a span and a click lifts one, on the piano part', () => {
  const piece = {
    tracks: [
      { role: 'melody', notes: [[72, 0, 480, 90]] },
      { role: 'piano', notes: [[48, 0, 480, 70]], pedal: [[0, 64, 127], [480, 64, 0]] },
    ],
  };
  assert.equal(pedalTrack(piece), 1);
  assert.equal(pedalTrack({ tracks: [...piece.tracks, { role: 'generated', notes: [[50, 0, 9, 80]] }] }), 2, 'what a model wrote first');
  assert.equal(pedalTrack({ tracks: [{ role: 'other', notes: [[1, 0, 9, 9]] }] }), -1);
  const drawn = drawPedal(piece, 1, 960, 720); // dragged right to left
  assert.deepEqual(drawn.tracks[1].pedal, [[0, 64, 127], [480, 64, 0], [720, 64, 127], [960, 64, 0]]);
  assert.deepEqual(piece.tracks[1].pedal, [[0, 64, 127], [480, 64, 0]], 'the piece it came from is unchanged');
  assert.equal(drawPedal(piece, 1, 500, 500), piece, 'no span, no edit');
  const lifted = liftPedalAt(drawn, 1, 100);
  assert.deepEqual(lifted.tracks[1].pedal, [[720, 64, 127], [960, 64, 0]]);
  assert.equal(liftPedalAt(drawn, 1, 600), drawn, 'a click where the pedal is up changes nothing');
  // A pedal never lifted goes whole.
  const stuck = { tracks: [{ role: 'piano', notes: [], pedal: [[0, 64, 127], [10, 64, 0], [20, 64, 127]] }] };
  assert.deepEqual(liftPedalAt(stuck, 0, 5000).tracks[0].pedal, [[0, 64, 127], [10, 64, 0]]);
});
