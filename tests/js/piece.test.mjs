import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withPageMarks } from '../../www/piece.js';

test("a generation's result keeps the chords and phrases the person set by hand", () => {
  const before = { chords: ['Dm', 'G'], chordsSet: [0], phrasesSet: true };
  const result = { chords: ['Dm', 'G'], tracks: [1] };
  const out = withPageMarks(result, before);
  assert.deepEqual(out.chordsSet, [0]);
  assert.equal(out.phrasesSet, true);
  assert.deepEqual(out.tracks, [1]);
  assert.equal(result.chordsSet, undefined, 'the result itself is left as it came');
  // Nothing set by hand: nothing added; a result that says otherwise wins.
  assert.deepEqual(Object.keys(withPageMarks(result, { chords: [] })).sort(), ['chords', 'tracks']);
  assert.deepEqual(withPageMarks({ chordsSet: [1] }, before).chordsSet, [1]);
});
