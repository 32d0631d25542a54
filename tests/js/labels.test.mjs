// The chord and phrase labels typed in the lanes' dialog (www/labels.js), under Node.
import test from 'node:test';
import assert from 'node:assert/strict';
import {
  CHORD_TOKEN, CHORD_CHOICES, LABEL_HELP, labelTitle, labelProblems, labelError, chordCell, chordChart,
  plannedBars, phraseForm, readPlan, planText, pitchRange,
} from '../../www/labels.js';
import { readFileSync } from 'node:fs';

test('chord charts: the cells the CLI\'s --chords gives too (tests/chord-charts.json)', () => {
  const { cases } = JSON.parse(readFileSync(new URL('../chord-charts.json', import.meta.url), 'utf8'));
  assert.ok(cases.length >= 8);
  for (const { text, cells, refused } of cases) {
    if (refused) {
      assert.ok(labelProblems('chord', text.trim()).includes(refused), text);
    } else {
      assert.deepEqual(labelProblems('chord', text.trim()), [], text);
      assert.deepEqual(chordChart(text), cells, text);
    }
  }
});

test('chord symbols: the importer\'s qualities, N, and root:quality forms', () => {
  for (const ok of ['C', 'Am', 'F#7', 'Bbmaj7', 'Gsus4', 'Ebdim7', 'C+', 'Dm7b5', 'Am(maj7)', 'N', 'C:maj', 'G:min7']) {
    assert.ok(CHORD_TOKEN.test(ok), ok);
  }
  for (const bad of ['H', 'c', 'Cmaj9', 'C#b', 'N7', '', 'C G', 'C:']) assert.ok(!CHORD_TOKEN.test(bad), bad);
  for (const c of CHORD_CHOICES) assert.ok(CHORD_TOKEN.test(c), `suggested ${c} is accepted`);
});

test('what the dialog refuses, and says', () => {
  assert.deepEqual(labelProblems('chord', 'C G'), []);
  assert.deepEqual(labelProblems('chord', ''), [], 'empty: no chord');
  assert.deepEqual(labelProblems('chord', 'C Hm x'), ['Hm', 'x']);
  assert.deepEqual(labelProblems('phrase', 'A'), []);
  assert.deepEqual(labelProblems('phrase', 'i'), []);
  assert.deepEqual(labelProblems('phrase', 'AB'), ['AB']);
  assert.deepEqual(labelProblems('phrase', ''), ['(empty)']);
  assert.deepEqual(labelProblems('phrase', '1'), ['1']);
  assert.equal(labelError('chord', ['Hm', 'x']), 'Not a chord: Hm, x');
  assert.equal(labelError('phrase', ['AB']), 'A phrase is one letter, A–Z or a–z.');
});

test('chord cells keep the symbols one space apart', () => {
  assert.equal(chordCell('  C   G7 '), 'C G7');
  assert.equal(chordCell('Am'), 'Am');
  assert.equal(chordCell('   '), '');
});

test('titles say which bar, and when it is planned', () => {
  assert.equal(labelTitle('chord', 0, false), 'Chord of bar 1');
  assert.equal(labelTitle('chord', 4, true), 'Chord of bar 5 (planned, past the music)');
  assert.equal(labelTitle('phrase', 2, false), 'Phrase at bar 3');
  assert.match(LABEL_HELP.chord, /C, Am, F#7/);
  assert.match(LABEL_HELP.phrase, /one|letter/i);
});

test('planned bars: whole, from 0 to 256', () => {
  assert.equal(plannedBars('4'), 4);
  assert.equal(plannedBars('2.6'), 3);
  assert.equal(plannedBars('-3'), 0);
  assert.equal(plannedBars('999'), 256);
  assert.equal(plannedBars(''), 0);
  assert.equal(plannedBars('many'), 0);
});

test('a song from a plan: the phrase form and the chords give the bars, bad parts said in words', () => {
  assert.deepEqual(phraseForm('i4 A8B8A8o4'), { phrases: [['i', 4], ['A', 8], ['B', 8], ['A', 8], ['o', 4]] });
  assert.deepEqual(phraseForm(''), { phrases: [] });
  assert.match(phraseForm('A8 B').error, /letter and its bars/);
  assert.match(phraseForm('A0').error, /1 to 256 bars/);
  const plan = readPlan({ chords: 'C | G | Am F', form: 'A2A2', meter: '3/4' });
  assert.deepEqual(plan, { cells: ['C', 'G', 'Am F'], phrases: [['A', 2], ['A', 2]], bars: 4, numerator: 3, denominator: 4 });
  assert.equal(readPlan({ chords: '', form: '', meter: '4/4' }).bars, 8, 'nothing planned: 8 bars');
  assert.match(readPlan({ chords: 'C | Q7', form: '', meter: '4/4' }).error, /Not a chord: Q7/);
  assert.match(readPlan({ chords: '', form: 'A200B100', meter: '4/4' }).error, /at most 256 bars/);
});

test('a plan from the lanes of an open piece: its bars\' chords and phrases, cut to the selection', () => {
  const piece = { chords: ['C', 'G', '', 'F G', 'C', 'Am', 'Dm', 'G7'], phrases: [['i', 2], ['A', 4], ['B', 2]] };
  assert.deepEqual(planText(piece, 0, 8), { chords: 'C | G | N | F G | C | Am | Dm | G7', form: 'i2A4B2' });
  assert.deepEqual(planText(piece, 1, 7), { chords: 'G | N | F G | C | Am | Dm', form: 'i1A4B1' });
  // What it writes, the dialog reads back as the same lanes.
  const plan = readPlan({ ...planText(piece, 3, 8), meter: '4/4' });
  assert.deepEqual(plan.cells, ['F G', 'C', 'Am', 'Dm', 'G7']);
  assert.deepEqual(plan.phrases, [['A', 3], ['B', 2]]);
  assert.equal(plan.bars, 5);
});

test('a singer\'s range: the pitches the CLI\'s --range gives too (tests/melody-ranges.json)', () => {
  const { cases } = JSON.parse(readFileSync(new URL('../melody-ranges.json', import.meta.url), 'utf8'));
  assert.ok(cases.length >= 10);
  for (const { text, range, refused } of cases) {
    const read = pitchRange(text);
    if (refused) assert.ok(read.error && !read.range, `${text}: ${JSON.stringify(read)}`);
    else assert.deepEqual(read, { range }, text);
  }
  assert.match(pitchRange('C6-C3').error, /lowest note first/);
  assert.match(pitchRange('soprano').error, /e\.g\. C3–C6/);
});
