// The pure parts of the piano roll (www/roll.js) and the attention map (www/attention.js):
// geometry, lookups and binning, without a DOM. Run with `node --test tests/js/`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  tickToX, xToTick, zoomAround, pieceEndTick, fitPitchRange, noteIndex, lowerBound, visibleNotes,
  beatTicks, snapToBeat, barSpan, beatSpan, phraseRuns, phraseColour, labelStep, pitchName, rollSummary,
} from '../../www/roll.js';
import {
  MAX_BINS, binLayout, createBins, growBins, binRows, ratioLevel, diverging, colourTable, colourRow, phraseMarks, niceTicks,
} from '../../www/attention.js';

const PPQ = 480;

function piece(overrides = {}) {
  return {
    version: 1, name: 't', ppq: PPQ, tempos: [[0, 500000]], timeSignatures: [[0, 4, 4]],
    bars: [0, 1920, 3840, 5760], endTick: 7680,
    tracks: [], chords: ['C', 'Am', '', 'G'], phrases: [['i', 1], ['A', 2], ['B', 1]], promptBars: 4,
    ...overrides,
  };
}

/** Deterministic pseudo-random numbers (mulberry32). */
function random(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// --- roll -----------------------------------------------------------------------------------

test('tick <-> px mapping round-trips and zooming keeps the anchor tick in place', () => {
  assert.equal(tickToX(960, 0.1, 20), 76);
  assert.equal(xToTick(76, 0.1, 20), 960);
  for (const [tick, px, scroll] of [[0, 1, 0], [12345, 0.037, 99], [7, 3, 5]]) {
    assert.ok(Math.abs(xToTick(tickToX(tick, px, scroll), px, scroll) - tick) < 1e-9);
  }
  const scroll = zoomAround(0.1, 0.3, 200, 150); // tick under x=150 was (150+200)/0.1 = 3500
  assert.ok(Math.abs(xToTick(150, 0.3, scroll) - 3500) < 1e-9);
  assert.equal(zoomAround(0.1, 0.05, 0, 10), 0, 'never scrolls before the start');
});

test('end tick covers planned bars and notes past the end', () => {
  assert.equal(pieceEndTick(piece()), 7680);
  assert.equal(pieceEndTick(piece({ bars: [0, 1920, 3840, 5760, 7680, 9600] })), 11520);
  const p = piece({ tracks: [{ role: 'generated', notes: [[60, 7000, 8000, 90]] }] });
  assert.equal(pieceEndTick(p), 8000);
});

test('pitch range fits the notes with a margin and spans at least two octaves', () => {
  const track = (pitches) => ({ role: 'melody', notes: pitches.map((p, i) => [p, i * 10, i * 10 + 5, 80]) });
  assert.deepEqual(fitPitchRange(piece({ tracks: [track([40, 90])] })), [38, 92]);
  const [lo, hi] = fitPitchRange(piece({ tracks: [track([60, 64])] }));
  assert.ok(hi - lo >= 24 && lo <= 58 && hi >= 66, `${lo}..${hi}`);
  assert.deepEqual(fitPitchRange(piece()), [48, 72], 'empty: two octaves around middle C');
  const low = fitPitchRange(piece({ tracks: [track([0, 2])] }));
  assert.equal(low[0], 0);
  assert.ok(low[1] - low[0] >= 24);
  const high = fitPitchRange(piece({ tracks: [track([126, 127])] }));
  assert.equal(high[1], 127);
  assert.ok(high[1] - high[0] >= 24);
});

test('visible-note lookup finds every overlapping note among 5000, and few others', () => {
  const rand = random(7);
  const notes = [];
  let t = 0;
  for (let i = 0; i < 5000; i++) {
    t += Math.floor(rand() * 120);
    const len = i % 500 === 0 ? 20000 : 30 + Math.floor(rand() * 900); // a few very long notes
    notes.push([40 + Math.floor(rand() * 40), t, t + len, 64]);
  }
  const index = noteIndex(notes);
  assert.equal(index.notes, notes, 'sorted notes are used as they are');
  assert.equal(index.maxDur, 20000);
  for (const [from, to] of [[0, 1000], [100000, 104000], [250000, 251000], [-50, 0], [1e9, 2e9]]) {
    const [i0, i1] = visibleNotes(index, from, to);
    const want = notes.flatMap((n, i) => (n[1] < to && n[2] > from ? [i] : []));
    for (const i of want) assert.ok(i >= i0 && i < i1, `note ${i} outside [${i0}, ${i1}) for ${from}..${to}`);
    // Notes start about 60 ticks apart: the window plus the longest note's reach.
    assert.ok(i1 - i0 <= (to - from + 20000) / 30, `${i1 - i0} notes scanned for ${from}..${to}`);
  }
  assert.equal(lowerBound(notes, -1), 0);
  assert.equal(lowerBound(notes, Infinity), notes.length);
  const unsorted = noteIndex([[60, 500, 600, 1], [62, 100, 200, 1]]);
  assert.deepEqual(unsorted.notes.map((n) => n[1]), [100, 500]);
});

test('beat lines follow the time signatures: 3/4 then 4/4, then 6/8', () => {
  const p = piece({ timeSignatures: [[0, 3, 4], [2880, 4, 4], [4800, 6, 8]] });
  assert.deepEqual(beatTicks(p, 0, 4800), [
    0, 480, 960, 1440, 1920, 2400, // two bars of 3/4
    2880, 3360, 3840, 4320, // one bar of 4/4
    4800, // 6/8 starts
  ]);
  assert.deepEqual(beatTicks(p, 4800, 6000), [4800, 5040, 5280, 5520, 5760, 6000], 'eighth notes in 6/8');
  assert.deepEqual(beatTicks(p, 500, 1500), [960, 1440]);
  assert.deepEqual(beatTicks(piece({ timeSignatures: [] }), 0, 1920), [0, 480, 960, 1440, 1920], 'default 4/4');
  assert.deepEqual(beatTicks(piece({ timeSignatures: [[960, 3, 4]] }), 0, 1440), [0, 480, 960, 1440]);
});

test('selections snap to beats and whole bars', () => {
  const p = piece({ timeSignatures: [[0, 3, 4], [2880, 4, 4]] });
  assert.equal(snapToBeat(p, 700), 480);
  assert.equal(snapToBeat(p, 730), 960);
  assert.equal(snapToBeat(p, 2870), 2880, 'never past the next signature change');
  assert.equal(snapToBeat(p, 3100), 3360 - 480);
  assert.deepEqual(beatSpan(p, 1500, 300), [480, 1440]);
  assert.deepEqual(beatSpan(p, 0, 99999, 7680), [0, 7680], 'clamped to the end');
  const q = piece();
  assert.deepEqual(barSpan(q, 2000, 100), [0, 3840]);
  assert.deepEqual(barSpan(q, 5000, 5000), [3840, 5760]);
  assert.deepEqual(barSpan(q, 6000, 99999), [5760, 7680], 'past the end: the last bar');
});

test('phrases become runs of bars (repeats stay apart) with a colour per letter, muted in lower case', () => {
  assert.deepEqual(phraseRuns([['i', 1], ['A', 2], ['A', 2], ['B', 1], ['o', 1]]), [
    { letter: 'i', from: 0, to: 1 }, { letter: 'A', from: 1, to: 3 }, { letter: 'A', from: 3, to: 5 },
    { letter: 'B', from: 5, to: 6 }, { letter: 'o', from: 6, to: 7 },
  ]);
  assert.deepEqual(phraseRuns([]), []);
  const [a, b, lower] = [phraseColour('A'), phraseColour('B'), phraseColour('a')];
  assert.notEqual(a.hue, b.hue);
  assert.equal(a.hue, lower.hue);
  assert.equal(a.muted, false);
  assert.equal(lower.muted, true);
  assert.notEqual(a.fill, lower.fill);
  assert.equal(phraseColour('').muted, false, 'an empty label does not throw');
});

test('labels, pitch names and the roll summary', () => {
  assert.equal(labelStep(60, 24), 1);
  assert.equal(labelStep(10, 24), 4);
  assert.equal(labelStep(0, 24) > 0, true);
  assert.equal(pitchName(60), 'C4');
  assert.equal(pitchName(21), 'A0');
  assert.equal(pitchName(61), 'C♯4');
  const p = piece({
    bars: Array.from({ length: 32 }, (_, i) => i * 1920),
    promptBars: 24,
    tracks: [
      { role: 'melody', notes: Array(812).fill([60, 0, 1, 1]) },
      { role: 'piano', notes: Array(1000).fill([48, 0, 1, 1]) },
      { role: 'piano', notes: Array(630).fill([48, 0, 1, 1]) },
      { role: 'generated', notes: [] },
    ],
  });
  assert.equal(rollSummary(p), 'Piano roll: 32 bars, 812 melody notes, 1630 piano notes; bars 25–32 planned');
  assert.equal(rollSummary(piece()), 'Piano roll: 4 bars');
});

// --- attention map ----------------------------------------------------------------------------

/** Query rows [start, start + count) of the dense causal matrix `dense(i, j)`, keyCount wide. */
function rowsOf(dense, start, count, keyCount) {
  const rows = new Float32Array(count * keyCount);
  for (let r = 0; r < count; r++) {
    const i = start + r;
    for (let j = 0; j <= i && j < keyCount; j++) rows[r * keyCount + j] = dense(i, j);
  }
  return rows;
}

/** The pooled reference (each block's mean ratio to uniform), computed the slow way. */
function pooled(dense, length, per) {
  const bins = Math.ceil(length / per);
  const sum = new Float64Array(bins * bins);
  const n = new Float64Array(bins * bins);
  for (let i = 0; i < length; i++) {
    for (let j = 0; j <= i; j++) {
      const k = Math.floor(i / per) * bins + Math.floor(j / per);
      sum[k] += Math.fround(dense(i, j)) * (i + 1);
      n[k] += 1;
    }
  }
  return Array.from(sum, (v, k) => (n[k] ? v / n[k] : 0));
}

/** The state's block means. */
const means = (state) => Array.from(state.data, (v, k) => (state.count[k] ? v / state.count[k] : 0));

/** Whether two arrays agree to float precision. */
function close(a, b, what) {
  assert.equal(a.length, b.length, what);
  for (let k = 0; k < a.length; k++) assert.ok(Math.abs(a[k] - b[k]) <= 1e-4 * Math.max(1, Math.abs(b[k])), `${what}: ${k}: ${a[k]} vs ${b[k]}`);
}

const weight = (i, j) => ((i * 7919 + j * 104729) % 1000) / 1000 + (i === j ? 2 : 0);

test('bin layout stays within 512 x 512 with power-of-two bins', () => {
  assert.deepEqual(binLayout(256), { shift: 0, per: 1, bins: 256 });
  assert.deepEqual(binLayout(512), { shift: 0, per: 1, bins: 512 });
  assert.deepEqual(binLayout(513), { shift: 1, per: 2, bins: 257 });
  assert.deepEqual(binLayout(1000), { shift: 1, per: 2, bins: 500 });
  assert.deepEqual(binLayout(8000), { shift: 4, per: 16, bins: 500 });
  for (const n of [1, 2, 511, 1024, 1025, 4096, 8193, 100000]) {
    const { bins, per } = binLayout(n);
    assert.ok(bins <= MAX_BINS && bins * per >= n, `length ${n}`);
  }
  assert.ok(createBins(8000).data.length <= 512 * 512);
});

test('rows for length 1000 pool into 500 x 500 bins', () => {
  const length = 1000;
  const state = createBins(length);
  assert.equal(state.bins, 500);
  // Rows arrive in uneven chunks, each as wide as the keys generated so far, as while sampling.
  const chunks = [[0, 1], [1, 6], [7, 250], [257, 3], [260, 740]];
  const touched = [];
  for (const [start, count] of chunks) {
    const keyCount = start + count;
    touched.push(binRows(state, start, rowsOf(weight, start, count, keyCount), keyCount));
  }
  assert.deepEqual(touched[0], [0, 0]);
  assert.deepEqual(touched.at(-1), [130, 499]);
  close(means(state), pooled(weight, length, 2), 'pooled');
  assert.ok(state.written.every((w) => w === 1));
  for (let bi = 0; bi < state.bins; bi++) {
    for (let bj = bi + 1; bj < state.bins; bj++) assert.equal(state.data[bi * state.bins + bj], 0);
  }
});

test('binning ignores keys past the query (causal) and rows past the length', () => {
  const state = createBins(4);
  const rows = new Float32Array([0.5, 9, 9, 9, 0.25, 0.75, 9, 9]); // keys past i must not land
  assert.deepEqual(binRows(state, 0, rows, 4), [0, 1]);
  // Each weight against uniform attention: row 0 has one key (uniform 1), row 1 two (1/2).
  assert.deepEqual([...state.data], [0.5, 0, 0, 0, 0.5, 1.5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
  assert.equal(binRows(state, 4, new Float32Array(4).fill(1), 4), null);
  assert.equal(binRows(state, 0, new Float32Array(3), 4), null, 'an incomplete row is not a row');
  const nan = createBins(2);
  binRows(nan, 0, new Float32Array([NaN, 0, 0.5, NaN]), 2);
  assert.deepEqual(means(nan), [0, 0, 1, 0]);
});

test('growing past 512 positions re-pools exactly what direct binning gives', () => {
  const state0 = createBins(300);
  binRows(state0, 0, rowsOf(weight, 0, 300, 300), 300);
  const state1 = growBins(state0, 700); // 1 -> 2 positions a bin
  assert.equal(state1.per, 2);
  binRows(state1, 300, rowsOf(weight, 300, 400, 700), 700);
  const state2 = growBins(state1, 3000); // 2 -> 8 positions a bin
  assert.equal(state2.per, 8);
  binRows(state2, 700, rowsOf(weight, 700, 2300, 3000), 3000);
  close(means(state2), pooled(weight, 3000, 8), 'pooled again');
  assert.equal(growBins(state2, 10), state2, 'never shrinks');
});

test('colours: each weight against uniform on a fixed log scale, transparent above the diagonal and in unwritten rows', () => {
  assert.equal(ratioLevel(1), 0.5, 'uniform is the middle');
  assert.equal(ratioLevel(8), 1);
  assert.equal(ratioLevel(100), 1);
  assert.equal(ratioLevel(1 / 8), 0);
  assert.ok(Math.abs(ratioLevel(2) - (0.5 + 1 / 6)) < 1e-12);
  assert.equal(ratioLevel(0), 0);
  assert.equal(ratioLevel(NaN), 0);
  assert.deepEqual(diverging(0), [33, 102, 172], 'blue below');
  assert.deepEqual(diverging(0.5), [200, 200, 200], 'grey at uniform');
  assert.deepEqual(diverging(1), [178, 24, 43], 'red above');
  assert.deepEqual(diverging(NaN), [33, 102, 172]);
  const state = createBins(3);
  // Row 1 (two keys): 0.002 and 0.998, 1/250 and 2x uniform. Row 0 holds one key: uniform.
  binRows(state, 0, new Float32Array([1, 0, 0, 0.002, 0.998, 0]), 3);
  const rgba = new Uint8ClampedArray(3 * 3 * 4);
  const lut = colourTable();
  assert.ok(Math.abs(colourRow(state, 1, rgba, lut) - 1.996) < 1e-6, 'the row\'s largest ratio');
  const px = (bi, bj) => [...rgba.slice((bi * 3 + bj) * 4, (bi * 3 + bj) * 4 + 4)];
  assert.deepEqual(px(1, 0), [...diverging(0), 255], 'far below uniform: the blue end');
  const twice = diverging(Math.round(ratioLevel(1.996) * 255) / 255);
  assert.deepEqual(px(1, 1), [...twice, 255]);
  assert.equal(px(1, 2)[3], 0, 'above the diagonal');
  colourRow(state, 0, rgba, lut);
  assert.deepEqual(px(0, 0), [...diverging(128 / 255), 255], 'one key: uniform, the middle');
  colourRow(state, 2, rgba, lut);
  assert.equal(px(2, 0)[3], 0, 'a row not generated yet');
  // A row that attends evenly reads uniform however long it is: the raw weight shrinks with
  // the row, the ratio does not.
  const long = createBins(400);
  binRows(long, 399, new Float32Array(400).fill(1 / 400), 400);
  assert.ok(Math.abs(long.data[399 * 400] - 1) < 1e-6);
  // Pooled, a block of keys that attend as uniform stays uniform, a sharp peak still shows.
  const wide = createBins(2048); // 4 positions a bin
  const row = new Float32Array(2048).fill(1 / 2048);
  binRows(wide, 2047, row, 2048);
  assert.ok(Math.abs(means(wide)[511 * 512] - 1) < 1e-4, 'uniform stays 1');
  row[8] = 50 / 2048;
  binRows(wide, 2046, row, 2048);
  assert.ok(means(wide)[511 * 512 + 2] > 2, 'a peak 50x uniform lifts its block above 2x');
});

test('bar lines and phrase letters: the piece\'s bars in steps, a letter where a phrase starts', () => {
  const piece = { ppq: 480, bars: [0, 1920, 3840, 5760, 7200], phrases: [['A', 2], ['B', 1], ['A', 2]] };
  assert.deepEqual(phraseMarks(piece), [
    { at: 0, bar: 0, letter: 'A' },
    { at: 16, bar: 1, letter: null },
    { at: 32, bar: 2, letter: 'B' },
    { at: 48, bar: 3, letter: 'A' },
    { at: 60, bar: 4, letter: null },
  ]);
  assert.equal(phraseMarks({ ppq: 480, bars: [], phrases: [] }), null);
  assert.equal(phraseMarks(null), null);
});

test('nice ticks', () => {
  assert.deepEqual(niceTicks(0, 255, 5), [0, 100, 200]);
  assert.deepEqual(niceTicks(0, 999, 5), [0, 200, 400, 600, 800]);
  assert.deepEqual(niceTicks(-0.3, 1, 7), [-0.2, 0, 0.2, 0.4, 0.6, 0.8, 1]);
  assert.deepEqual(niceTicks(-0.3, 1, 4), [0, 0.5, 1]);
  assert.deepEqual(niceTicks(0, 0), [0]);
  assert.deepEqual(niceTicks(0, 7, 10), [0, 1, 2, 3, 4, 5, 6, 7]);
});
