// What a generation asks for and how its result is counted (www/generation-plan.js), under Node.
import test from 'node:test';
import assert from 'node:assert/strict';
import {
  barsUnder, barTick, hasNotes, hasPiano, contextOf, regionTicks, startsIn, draftPiece, writesFrom,
  generateOptions, unflattenNotes, notesWritten, progressText, progressShare, tokenLimitText, doneText,
  harmonizerEntry, needsHarmonizer, chordSourceText,
} from '../../www/generation-plan.js';

const PPQ = 480;

function piece(overrides = {}) {
  return {
    version: 1, name: 't', ppq: PPQ, tempos: [[0, 500000]], timeSignatures: [[0, 4, 4]],
    bars: [0, 1920, 3840, 5760], endTick: 7680, chords: ['C', 'Am', 'F', 'G'],
    phrases: [['A', 4]], promptBars: 4,
    tracks: [
      { name: 'MELODY', role: 'melody', program: 0, notes: [[72, 0, 480, 90], [74, 1920, 2400, 90], [76, 4000, 4400, 90]] },
      { name: 'PIANO', role: 'generated', program: 0, notes: [[48, 0, 1920, 70], [45, 1920, 3840, 70], [41, 3840, 5760, 70]] },
    ],
    ...overrides,
  };
}

test('the bars under a selection: from the bar holding its start to the bar holding its end', () => {
  const bars = [0, 1920, 3840, 5760];
  assert.deepEqual(barsUnder(bars, [0, 1920]), [0, 1]);
  assert.deepEqual(barsUnder(bars, [1920, 5760]), [1, 3]);
  assert.deepEqual(barsUnder(bars, [2000, 2100]), [1, 2], 'inside one bar: that bar');
  assert.deepEqual(barsUnder(bars, [3000, 4000]), [1, 3], 'across a bar line: both bars');
  assert.deepEqual(barsUnder(bars, [6000, 9000]), [3, 4], 'past the last bar: the last one');
  assert.equal(barsUnder(bars, null), null);
  assert.equal(barsUnder([], [0, 100]), null);
  assert.equal(barsUnder(undefined, [0, 100]), null, 'no piece');
});

test('bar ticks go on past the last bar at its length', () => {
  const p = piece();
  assert.equal(barTick(p, 0), 0);
  assert.equal(barTick(p, 3), 5760);
  assert.equal(barTick(p, 4), 7680);
  assert.equal(barTick(p, 6), 11520);
  assert.equal(barTick(piece({ bars: [0] }), 2), 2 * 4 * PPQ, 'one bar: 4/4 bars after it');
  assert.equal(barTick(piece({ bars: [] }), 1), 4 * PPQ * 2, 'no bars: from tick 0');
  assert.deepEqual(regionTicks(p, [1, 3]), [1920, 5760]);
  assert.equal(regionTicks(p, null), null);
});

test('notes and piano parts are found, and missing pieces have neither', () => {
  assert.ok(hasNotes(piece()) && hasPiano(piece()));
  const melodyOnly = piece();
  melodyOnly.tracks = melodyOnly.tracks.slice(0, 1);
  assert.ok(hasNotes(melodyOnly) && !hasPiano(melodyOnly));
  const pianist = piece();
  pianist.tracks[1].role = 'piano';
  assert.ok(hasPiano(pianist));
  const empty = piece({ tracks: [{ name: 'x', role: 'piano', notes: [] }] });
  assert.ok(!hasNotes(empty) && !hasPiano(empty));
  assert.equal(hasNotes(null), false);
  assert.equal(hasPiano(undefined), false);
});

test('a continuation model reads the window it (or its base) was trained on', () => {
  const manifest = [
    { name: 'base', training: { options: { window: 512 } } },
    { name: 'tiny', training: { options: { window: 16 } } },
    { name: 'free', training: {} },
  ];
  assert.equal(contextOf(manifest[0], manifest), 512);
  assert.equal(contextOf(manifest[1], manifest), null, 'below 32 tokens: no limit');
  assert.equal(contextOf(manifest[2], manifest), null);
  assert.equal(contextOf({ name: 'mine', user: true, training: { base: 'base', options: { window: 64 } } }, manifest), 512,
    'fine-tuned: its base\'s window');
  assert.equal(contextOf({ name: 'mine', user: true, training: { base: 'gone' } }, manifest), null);
  assert.equal(contextOf(undefined, manifest), null);
});

test('the live piece: accompaniment drops the old piano, a continuation region drops its notes', () => {
  const before = piece();
  const acc = draftPiece(before, 'accompaniment', null);
  assert.deepEqual(acc.live.tracks.map((t) => t.name), ['MELODY', 'PIANO']);
  assert.equal(acc.live.tracks[1], acc.track, 'the streamed track is in the live piece');
  assert.deepEqual(acc.track, { name: 'PIANO', role: 'generated', program: 0, notes: [] });
  const ticks = [1920, 3840];
  const cont = draftPiece(before, 'continuation', ticks);
  assert.deepEqual(cont.live.tracks.map((t) => t.name), ['MELODY', 'PIANO', 'CONTINUATION']);
  assert.deepEqual(cont.live.tracks[0].notes.map((n) => n[1]), [0, 4000]);
  assert.deepEqual(cont.live.tracks[1].notes.map((n) => n[1]), [0, 3840]);
  assert.equal(before.tracks[0].notes.length, 3, 'the piece before is untouched');
  assert.equal(draftPiece(before, 'continuation', null).live.tracks[0].notes.length, 3);
  assert.ok(startsIn([60, 1920, 2000, 80], ticks) && !startsIn([60, 3840, 4000, 80], ticks));
});

test('where a generation writes from', () => {
  const p = piece({ promptBars: 3 });
  assert.equal(writesFrom(p, 'accompaniment', null), 0);
  assert.equal(writesFrom(p, 'continuation', null), 3840, 'the last prompt bar');
  assert.equal(writesFrom(piece({ promptBars: 0 }), 'continuation', null), 0);
  assert.equal(writesFrom(p, 'continuation', [1920, 3840]), 1920);
});

test('the options sent to the Worker follow the settings', () => {
  const s = {
    seed: 7, threshold: 0.4, pianoTemperature: null, temperature: 1.2, echo: 2, textureEcho: 1.5, density: 0.5, keyHold: 0.5,
    bars: 8, maxTokens: 256, readAll: false, layer: 1, head: 2, alternatives: 3,
  };
  const cont = generateOptions(s, { task: 'continuation', region: [1, 2], context: 512 });
  assert.deepEqual(cont, {
    seed: 7, threshold: null, pianoTemperature: null, region: [1, 2], temperature: 1.2, echo: 2, textureEcho: null, texture: null, pedal: 'learnt', melodyRange: null, density: 0.5,
    key: 0.5, tokens: 256, context: 512, bars: 8, alternatives: 3, watch: { layer: 1, head: 2 },
  });
  assert.equal(generateOptions({ ...s, alternatives: null }, { task: 'accompaniment', region: null, context: 512 }).alternatives,
    null, 'one piece, written at once');
  const acc = generateOptions({ ...s, pianoTemperature: 0.9 }, { task: 'accompaniment', region: null, context: 512 });
  assert.deepEqual([acc.threshold, acc.pianoTemperature, acc.temperature], [0.4, 0.9, null], "each task's own settings");
  assert.equal(acc.textureEcho, 1.5, "the piano's texture echo");
  assert.equal(generateOptions({ ...s, textureEcho: undefined }, { task: 'accompaniment', region: null, context: 512 }).textureEcho,
    null, 'settings saved before there was a texture echo: the model\'s');
  assert.equal(acc.texture, null, "no texture chosen: the song's own");
  assert.equal(acc.pedal, 'learnt', 'settings saved before there was a pedal: learnt');
  assert.equal(generateOptions({ ...s, writtenPedal: 'played' }, { task: 'accompaniment', region: null, context: 512 }).pedal,
    'played', "the pianist's pedal kept");
  assert.equal(generateOptions({ ...s, writtenPedal: 'off' }, { task: 'continuation', region: null, context: 512 }).pedal,
    'off', "a continuation's new bars are pedalled as asked");
  assert.equal(generateOptions(s, { task: 'melody', region: null, context: 512 }).pedal, undefined, 'a melody has no pedal');
  const arpeggio = generateOptions({ ...s, texture: 'arpeggio' }, { task: 'accompaniment', region: null, context: 512 });
  assert.equal(arpeggio.texture.name, 'arpeggio', 'a gallery texture is sent whole');
  assert.ok(arpeggio.texture.notes.length > 0 && arpeggio.texture.bars.length === 4);
  const mine = { name: 'bars 1-2 of t', bars: [16, 16], notes: [[48, 0, 4]], chords: ['C', 'Am'] };
  assert.deepEqual(generateOptions({ ...s, texture: 'chosen', textureDonor: mine }, { task: 'accompaniment', region: [2, 4], context: 512 }).texture,
    mine, 'the bars chosen with Use as texture');
  assert.equal(generateOptions({ ...s, texture: 'arpeggio' }, { task: 'continuation', region: null, context: 512 }).texture, null,
    'a continuation plays no texture');
  assert.equal(generateOptions({ ...s, texture: 'waltz' }, { task: 'accompaniment', region: null, context: 512 }).texture, null,
    'a name the gallery no longer has: the song\'s own');
  assert.equal(generateOptions({ ...s, readAll: true }, { task: 'continuation', region: null, context: 512 }).context, null,
    'reading past the window: no limit');
  assert.equal(generateOptions(s, { task: 'accompaniment', region: null, context: 512 }).context, null);
  assert.equal(generateOptions(s, { task: 'accompaniment', region: null, context: 512 }).echo, null, 'no echo for the piano');
  assert.equal(generateOptions(s, { task: 'accompaniment', region: null, context: 512 }).density, 0.5, 'a sparser piano too');
  assert.equal(generateOptions(s, { task: 'accompaniment', region: null, context: 512 }).key, null, 'no key hold for the piano');
  assert.equal(generateOptions({ ...s, keyHold: undefined }, { task: 'continuation', region: null, context: 512 }).key, null,
    'settings saved before there was a key hold: the default');
  assert.equal(generateOptions({ ...s, maxTokens: null }, { task: 'continuation', region: null, context: 512 }).tokens, null,
    'no token limit given: the rule of 256 a bar');
  assert.equal(generateOptions({ ...s, density: undefined }, { task: 'continuation', region: null, context: 512 }).density, null,
    'settings saved before there was a density: as the model plays');
});

test('a melody: its draft, where it writes from, its options and its notes', () => {
  const before = piece({ promptBars: 3 });
  const ticks = [1920, 3840];
  const draft = draftPiece(before, 'melody', ticks);
  assert.deepEqual(draft.live.tracks.map((t) => t.name), ['MELODY', 'PIANO', 'MELODY (writing)']);
  assert.deepEqual(draft.live.tracks[0].notes.map((n) => n[1]), [0, 4000], 'the melody in the bars goes');
  assert.equal(draft.live.tracks[1].notes.length, before.tracks[1].notes.length, 'the piano stays');
  assert.equal(draft.track.role, 'melody');
  assert.equal(writesFrom(before, 'melody', null), 3840, 'planned bars: from the end of the music');
  const noTune = piece({ promptBars: 3 });
  noTune.tracks[0].notes = [];
  assert.equal(writesFrom(noTune, 'melody', null), 0, 'a piece without a melody: from its start');
  const s = { seed: 7, threshold: 0.4, pianoTemperature: 0.9, temperature: 1.1, echo: 3, density: 0.5, keyHold: 0.5, bars: 8, maxTokens: 256, alternatives: 2, layer: 0, head: 0 };
  const o = generateOptions(s, { task: 'melody', region: [1, 2], context: 512 });
  assert.deepEqual([o.temperature, o.echo, o.threshold, o.pianoTemperature, o.density, o.key, o.tokens, o.bars, o.context, o.alternatives],
    [1.1, 3, null, null, null, null, null, null, null, 2]);
  assert.equal(o.melodyRange, null, 'no range typed: the model\'s C3–C6');
  assert.deepEqual(generateOptions({ ...s, melodyRange: 'A3–E5' }, { task: 'melody', region: null, context: null }).melodyRange, [57, 76]);
  assert.equal(generateOptions({ ...s, melodyRange: 'A3–E5' }, { task: 'accompaniment', region: null, context: null }).melodyRange, null, 'a melody\'s alone');
  const result = piece();
  result.tracks[0].notes = result.tracks[0].notes.concat([[72, 2000, 2100, 90], [74, 2100, 2200, 90]]);
  assert.equal(notesWritten(before, result, { task: 'melody', trackName: 'MELODY', ticks }), 3);
  assert.equal(notesWritten(before, result, { task: 'melody', trackName: 'MELODY', ticks: null }), 2);
  assert.match(progressText({ done: 32, total: 64 }, 'melody', 1), /32 of 64 steps/);
  assert.match(doneText({ task: 'melody', region: null, notes: 12, ms: 900, gpu: false, seed: 3 }), /^Melody: 12 notes/);
});

test('streamed notes unflatten in fours', () => {
  assert.deepEqual(unflattenNotes([60, 0, 10, 90, 62, 10, 20, 80]), [[60, 0, 10, 90], [62, 10, 20, 80]]);
  assert.deepEqual(unflattenNotes(new Int32Array([1, 2, 3, 4])), [[1, 2, 3, 4]]);
  assert.deepEqual(unflattenNotes([]), []);
});

test('the notes a generation wrote', () => {
  const before = piece();
  const result = piece();
  result.tracks[1].notes = result.tracks[1].notes.concat([[50, 6000, 6400, 70]]);
  assert.equal(notesWritten(before, result, { task: 'accompaniment', trackName: 'PIANO', ticks: null }), 4,
    'accompaniment: every note of the new track');
  assert.equal(notesWritten(before, result, { task: 'continuation', trackName: 'PIANO', ticks: null }), 1,
    'continuation: the notes added');
  assert.equal(notesWritten(before, result, { task: 'continuation', trackName: 'PIANO', ticks: [3840, 7680] }), 2,
    'a region: the generated notes starting in it');
  assert.equal(notesWritten(before, result, { task: 'accompaniment', trackName: 'OTHER', ticks: null }), 0);
});

test('progress and result lines', () => {
  assert.equal(progressText({ done: 0, total: 512 }, 'continuation', 1), 'Reading the prompt…');
  assert.equal(progressText({ done: 100, total: 512 }, 'continuation', 2), '100 of 512 tokens · 50 tokens/s');
  assert.equal(progressText({ done: 30, total: 64 }, 'accompaniment', 3), '30 of 64 steps · 10 steps/s');
  assert.equal(doneText({ task: 'accompaniment', region: null, notes: 12, ms: 1500, gpu: false, seed: 3 }),
    'Accompaniment: 12 notes in 1.5 s on the CPU (seed 3).');
  assert.equal(doneText({ task: 'continuation', region: null, notes: 5, ms: 250, gpu: true, seed: 0 }),
    'Continuation: 5 notes in 0.3 s on WebGPU (seed 0).');
  assert.equal(doneText({ task: 'continuation', region: [4, 8], notes: 9, ms: 1000, gpu: false, seed: 1 }),
    'Bars 5–8 rewritten; continuation: 9 notes in 1.0 s on the CPU (seed 1).');
});

test('a continuation asked for bars counts bars, and says when the token limit stopped it', () => {
  assert.equal(progressText({ done: 100, total: 2048, bars: [3, 8] }, 'continuation', 2), 'bar 3 of 8 · 100 tokens · 50 tokens/s');
  assert.equal(progressShare({ done: 100, total: 2048, bars: [3, 8] }), 0.25, 'two whole bars of eight');
  assert.equal(progressShare({ done: 16, total: 64 }), 0.25);
  // Alternatives: one after another, the share counts them all; together, a step is all of them.
  assert.equal(progressShare({ done: 100, total: 2048, bars: [3, 8], alternative: [2, 4] }), (1 + 0.25) / 4);
  assert.equal(progressShare({ done: 16, total: 64, alternative: [0, 4] }), 0.25);
  assert.equal(progressText({ done: 100, total: 2048, bars: [3, 8], alternative: [2, 4] }, 'continuation', 2),
    'alternative 2 of 4 · bar 3 of 8 · 100 tokens · 50 tokens/s');
  assert.equal(progressText({ done: 30, total: 64, alternative: [0, 4] }, 'accompaniment', 3),
    '4 alternatives together · 30 of 64 steps · 10 steps/s');
  const whole = { done: 700, total: 2048, bars: [8, 8] };
  assert.equal(tokenLimitText(whole), null);
  assert.equal(doneText({ task: 'continuation', region: null, notes: 90, ms: 2000, gpu: false, seed: 1, last: whole }),
    'Continuation: 8 bars, 90 notes in 2.0 s on the CPU (seed 1).');
  const cut = { done: 64, total: 64, bars: [3, 8] };
  assert.equal(tokenLimitText(cut),
    'It stopped at the token limit (64 tokens) after 2 of the 8 bars asked: raise “Token limit” to let it finish.');
  assert.match(doneText({ task: 'continuation', region: null, notes: 30, ms: 500, gpu: false, seed: 1, last: cut }),
    /^Continuation: 2 bars, 30 notes .* It stopped at the token limit/);
  assert.equal(tokenLimitText({ done: 64, total: 64, bars: [9, 8] }), null, 'the bars asked, on the last token');
  assert.equal(tokenLimitText({ done: 64, total: 64, bars: null }), null, 'a length in tokens');
});

test('the harmonizer fills the lane of a melody alone, and the lane says who filled it', () => {
  const melodyOnly = piece({ tracks: [piece().tracks[0]] });
  assert.equal(needsHarmonizer(melodyOnly), true);
  assert.equal(needsHarmonizer(piece()), false, 'a generated piano carries the harmony');
  const withPianist = piece({ tracks: [piece().tracks[0], { ...piece().tracks[1], role: 'piano' }] });
  assert.equal(needsHarmonizer(withPianist), false, 'so does the pianist');
  const silent = piece({ tracks: [{ ...piece().tracks[0], notes: [] }] });
  assert.equal(needsHarmonizer(silent), false, 'no melody: nothing to harmonize');
  const manifest = [
    { name: 'acc', task: 'accompaniment', default: true },
    { name: 'h1', task: 'harmonization' },
    { name: 'h2', task: 'harmonization', default: true },
  ];
  assert.equal(harmonizerEntry(manifest).name, 'h2');
  assert.equal(harmonizerEntry(manifest.slice(0, 2)).name, 'h1');
  assert.equal(harmonizerEntry(manifest.slice(0, 1)), null);
  assert.equal(harmonizerEntry(undefined), null);
  assert.match(chordSourceText({ chordSource: 'harmonizer' }), /harmonizer/);
  assert.match(chordSourceText({ chordSource: 'detector' }), /detected/);
  assert.equal(chordSourceText(piece()), '');
});
