// Editing notes without a page (www/note-edit.js): every edit makes a new piece and leaves the
// old one as it was (the undo stack holds it), keeps notes sorted, grows the bars and the prompt
// to hold what was written, and returns the selection as it stands in the new piece.
import test from 'node:test';
import assert from 'node:assert/strict';
import {
  addNote, allNotes, changeVelocity, copyNotes, deleteNotes, duplicateBars, gridTicks, moveNotes,
  noteAt, notesIn, notesInOrder, pasteNotes, resizeNotes, setVelocity, snapDown, snapNearest,
  touchedBars,
} from '../../www/note-edit.js';
import { emptyPiece } from '../../www/keys.js';

const Q = 480; // ticks per quarter
const BAR = 4 * Q;

/** A piece with a melody of `notes` ([pitch, start, end, velocity]) and 4 bars of C–G–Am–F. */
function piece(notes = [], extra = {}) {
  const p = emptyPiece({ bars: 4 });
  p.tracks[0].notes = notes.map((n) => [...n]);
  p.chords = ['C', 'G', 'Am', 'F'];
  p.promptBars = 4;
  p.endTick = Math.max(0, ...notes.map((n) => n[2]));
  return { ...p, ...extra };
}

const frozen = (p) => JSON.stringify(p);

test('the grid follows the quantise setting; off still snaps to a 32nd of a quarter', () => {
  assert.equal(gridTicks(480, 4), 120);
  assert.equal(gridTicks(480, 2), 240);
  assert.equal(gridTicks(480, 1), 480);
  assert.equal(gridTicks(480, 0), 15);
  assert.equal(snapDown(239, 120), 120);
  assert.equal(snapNearest(181, 120), 240);
  assert.equal(snapNearest(179, 120), 120);
});

test('drawing a note into an empty piece: a melody note, selected, in the prompt', () => {
  const empty = emptyPiece({ bars: 8 });
  const before = frozen(empty);
  const { piece: p, selection } = addNote(empty, { pitch: 64, start: 2 * BAR + 120, end: 2 * BAR + 360, velocity: 90 });
  assert.equal(frozen(empty), before, 'the old piece is untouched');
  assert.deepEqual(p.tracks[0].notes, [[64, 2 * BAR + 120, 2 * BAR + 360, 90]]);
  assert.equal(p.tracks[0].role, 'melody');
  assert.deepEqual([...selection], p.tracks[0].notes);
  assert.equal(p.promptBars, 3, 'the prompt reaches the bar with the note');
  assert.equal(p.endTick, 2 * BAR + 360);
  assert.equal(p.bars.length, 8);
});

test('a note past the last bar grows the bars, chords and phrases with it', () => {
  const p0 = piece();
  const { piece: p } = addNote(p0, { pitch: 60, start: 5 * BAR, end: 5 * BAR + Q });
  assert.equal(p.bars.length, 6);
  assert.equal(p.chords.length, 6);
  assert.equal(p.phrases.reduce((n, [, k]) => n + k, 0), 6);
  assert.equal(p.promptBars, 6);
  assert.equal(p0.bars.length, 4, 'the old piece keeps its bars');
});

test('a piece without a melody gets one for drawn notes; other tracks are left alone', () => {
  const p0 = piece();
  p0.tracks = [{ name: 'PIANO', role: 'piano', program: 0, notes: [[48, 0, BAR, 70]] }];
  const { piece: p } = addNote(p0, { pitch: 72, start: 0, end: Q });
  assert.equal(p.tracks.length, 2);
  assert.equal(p.tracks[0].role, 'melody');
  assert.equal(p.tracks[1].notes, p0.tracks[0].notes, 'untouched tracks are shared, not copied');
});

test('hit testing finds the note on top and the notes in a box', () => {
  const p = piece([[60, 0, Q, 80], [64, Q, 2 * Q, 80], [67, 2 * Q, 3 * Q, 80]]);
  p.tracks.push({ name: 'PIANO', role: 'piano', program: 0, notes: [[60, 0, BAR, 50]] });
  assert.equal(noteAt(p, 10, 60), p.tracks[0].notes[0], 'the melody is drawn over the piano');
  assert.equal(noteAt(p, Q + 10, 60), p.tracks[1].notes[0]);
  assert.equal(noteAt(p, Q, 62), null);
  assert.equal(noteAt(p, Q, 60), p.tracks[1].notes[0], 'a note ends where the next begins');
  const boxed = notesIn(p, 2.5 * Q, Q + 1, 70, 63);
  assert.deepEqual([...boxed].map((n) => n[0]).sort(), [64, 67]);
  assert.equal(allNotes(p).size, 4);
  assert.deepEqual(notesInOrder(p).map((n) => n[0]), [60, 60, 64, 67]);
});

test('moving keeps the group inside the piece and MIDI pitches, and the notes sorted', () => {
  const p0 = piece([[60, 0, Q, 80], [64, Q, 2 * Q, 80], [126, 3 * Q, 4 * Q, 80]]);
  const notes = p0.tracks[0].notes;
  const sel = new Set([notes[1]]);
  const { piece: p, selection } = moveNotes(p0, sel, -2 * Q, 3);
  assert.deepEqual(p.tracks[0].notes, [[60, 0, Q, 80], [67, 0, Q, 80], [126, 3 * Q, 4 * Q, 80]].sort((a, b) => a[1] - b[1] || a[0] - b[0]));
  assert.deepEqual([...selection], [[67, 0, Q, 80]], 'the start is held at tick 0');
  assert.deepEqual(notes[1], [64, Q, 2 * Q, 80], 'the old note array is not changed');
  const up = moveNotes(p0, new Set([notes[2], notes[0]]), 0, 5);
  assert.deepEqual([...up.selection].map((n) => n[0]).sort((a, b) => a - b), [61, 127], 'cut to the highest pitch');
  assert.equal(moveNotes(p0, sel, 0, 0).piece, p0, 'no move, no new piece');
});

test('lengths, velocities and deletes', () => {
  const p0 = piece([[60, 0, Q, 80], [64, Q, 2 * Q, 100]]);
  const [a, b] = p0.tracks[0].notes;
  assert.deepEqual([...resizeNotes(p0, new Set([a]), 240, 120).selection], [[60, 0, Q + 240, 80]]);
  assert.deepEqual([...resizeNotes(p0, new Set([a]), -5 * Q, 120).selection], [[60, 0, 120, 80]], 'at least a grid step');
  assert.deepEqual([...setVelocity(p0, new Set([a, b]), 200).selection].map((n) => n[3]), [127, 127]);
  assert.deepEqual([...changeVelocity(p0, new Set([a, b]), -90).selection].map((n) => n[3]), [1, 10]);
  const { piece: p, selection } = deleteNotes(p0, new Set([a]));
  assert.deepEqual(p.tracks[0].notes, [[64, Q, 2 * Q, 100]]);
  assert.equal(selection.size, 0);
  assert.equal(p0.tracks[0].notes.length, 2);
});

test('copy and paste keep each note\'s place in the bar and its track', () => {
  const p0 = piece([[60, BAR + 120, BAR + Q, 70], [64, BAR + Q, BAR + 2 * Q, 90]]);
  const clip = copyNotes(p0, new Set(p0.tracks[0].notes));
  assert.equal(clip.length, BAR, 'from the bar line before the first note to the one after the last');
  assert.deepEqual(clip.notes.map((x) => x.note), [[60, 120, Q, 70], [64, Q, 2 * Q, 90]]);
  const { piece: p, selection } = pasteNotes(p0, clip, 3 * BAR);
  assert.equal(p.tracks[0].notes.length, 4);
  assert.deepEqual([...selection], [[60, 3 * BAR + 120, 3 * BAR + Q, 70], [64, 3 * BAR + Q, 3 * BAR + 2 * Q, 90]]);
  assert.equal(copyNotes(p0, new Set()), null);
});

test('duplicating bars copies their notes and chords right after them, growing the piece', () => {
  const p0 = piece([[60, 0, Q, 80], [62, BAR, BAR + Q, 80], [64, 2 * BAR, 2 * BAR + Q, 80]], { chordsSet: [1] });
  const { piece: p, selection } = duplicateBars(p0, 0, 2);
  assert.deepEqual(p.tracks[0].notes.map((n) => [n[0], n[1]]), [[60, 0], [62, BAR], [60, 2 * BAR], [64, 2 * BAR], [62, 3 * BAR]]);
  assert.equal(selection.size, 2);
  assert.deepEqual(p.chords, ['C', 'G', 'C', 'G']);
  assert.deepEqual(p.chordsSet, [1, 3], 'a chord set by hand stays set in its copy');
  const { piece: longer } = duplicateBars(p0, 2, 4);
  assert.equal(longer.bars.length, 6);
  assert.deepEqual(longer.chords, ['C', 'G', 'Am', 'F', 'Am', 'F']);
  assert.equal(longer.promptBars, 6);
});

test('the bars an edit touched are those of its notes before and after', () => {
  const p = piece();
  assert.deepEqual(touchedBars(p, [[60, BAR + 10, BAR + 20, 80], [60, 3 * BAR - 10, 3 * BAR, 80]]), [1, 3]);
  assert.deepEqual(touchedBars(p, [[60, 0, BAR + 1, 80]]), [0, 2], 'a note held over a bar line touches both');
  assert.equal(touchedBars(p, []), null);
});
