// The piano roll's pure module (www/roll-geometry.js): what roll.js re-exports from it, and the
// parts tests/js/roll.test.mjs does not cover (phraseAt, clamp, the lane sizes). Under Node.
import test from 'node:test';
import assert from 'node:assert/strict';
import * as geometry from '../../www/roll-geometry.js';
import * as roll from '../../www/roll.js';

test('roll.js re-exports the geometry the tests and the page import from it', () => {
  const names = [
    'ROLE_COLOURS', 'DRAW_ORDER', 'tickToX', 'xToTick', 'zoomAround', 'pieceEndTick', 'fitPitchRange',
    'noteIndex', 'lowerBound', 'visibleNotes', 'beatTicks', 'snapToBeat', 'barSpan', 'beatSpan',
    'phraseRuns', 'phraseAt', 'phraseColour', 'labelStep', 'pitchName', 'rollSummary',
  ];
  for (const name of names) assert.equal(roll[name], geometry[name], name);
  assert.equal(typeof roll.PianoRoll, 'function');
  assert.deepEqual(Object.keys(roll).sort(), [...names, 'PianoRoll'].sort(), 'and nothing else');
});

test('the phrase holding a bar', () => {
  const phrases = [['i', 1], ['A', 2], ['A', 2], ['b', 1]];
  assert.equal(geometry.phraseAt(phrases, 0), 'i');
  assert.equal(geometry.phraseAt(phrases, 2), 'A');
  assert.equal(geometry.phraseAt(phrases, 3), 'A');
  assert.equal(geometry.phraseAt(phrases, 5), 'b');
  assert.equal(geometry.phraseAt(phrases, 6), '', 'past the phrases');
  assert.equal(geometry.phraseAt([], 0), '');
});

test('clamp, and the lanes stacked above the roll', () => {
  assert.equal(geometry.clamp(5, 0, 3), 3);
  assert.equal(geometry.clamp(-1, 0, 3), 0);
  assert.equal(geometry.clamp(2, 0, 3), 2);
  assert.equal(geometry.LANES_H, geometry.RULER_H + geometry.CHORD_H + geometry.PHRASE_H);
  assert.ok(geometry.DRAG_PX > 0 && geometry.END_PAD > 0 && geometry.GUTTER > 0);
  assert.deepEqual([...geometry.BLACK_KEYS].sort((a, b) => a - b), [1, 3, 6, 8, 10]);
  for (const role of geometry.DRAW_ORDER) assert.match(geometry.ROLE_COLOURS[role], /^#[0-9a-f]{6}$/);
});
