// The Fine-tune panel's pure parts (www/tune-text.js), under Node.
import test from 'node:test';
import assert from 'node:assert/strict';
import {
  MAX_FILES, HOLDOUT, formatSeconds, tuneOptions, accompanimentTracks, chordsSummary, usedText,
  progressText, heldOutSummary, runRecord, keepName, importName, modelSummary,
} from '../../www/tune-text.js';
// (tune.js itself is a panel: it imports the page, so the browser tests load it.)

test('the limits of a fine-tuning run', () => {
  assert.equal(MAX_FILES, 50);
  assert.equal(HOLDOUT, 0.2);
});

test('seconds, minutes, hours', () => {
  assert.equal(formatSeconds(NaN), '…');
  assert.equal(formatSeconds(Infinity), '…');
  assert.equal(formatSeconds(-3), '0 s');
  assert.equal(formatSeconds(42.4), '42 s');
  assert.equal(formatSeconds(89), '89 s');
  assert.equal(formatSeconds(90), '2 min');
  assert.equal(formatSeconds(5399), '90 min');
  assert.equal(formatSeconds(5400), '1.5 h');
});

test('the run\'s options from the form, and what is refused', () => {
  assert.deepEqual(tuneOptions({ steps: '100', learningRate: '0.0001', trainable: 'all' }), {
    steps: 100, learningRate: 0.0001, trainable: 'all', topLayers: 1, batch: 4, holdout: 0.2, seed: 0, evalEvery: 10,
  });
  const top = tuneOptions({ steps: '7.6', learningRate: '0.01', trainable: 'top-2' });
  assert.equal(top.steps, 8);
  assert.equal(top.trainable, 'top');
  assert.equal(top.topLayers, 2);
  assert.equal(top.evalEvery, 1);
  assert.equal(tuneOptions({ steps: '3', learningRate: '1e-5', trainable: 'top-1' }).topLayers, 1);
  assert.throws(() => tuneOptions({ steps: '0', learningRate: '0.001', trainable: 'all' }), /number of steps/);
  assert.throws(() => tuneOptions({ steps: '20001', learningRate: '0.001', trainable: 'all' }), /number of steps/);
  assert.throws(() => tuneOptions({ steps: 'x', learningRate: '0.001', trainable: 'all' }), /number of steps/);
  assert.throws(() => tuneOptions({ steps: '10', learningRate: '0', trainable: 'all' }), /learning rate/);
  assert.throws(() => tuneOptions({ steps: '10', learningRate: '0.02', trainable: 'all' }), /learning rate/);
});

test('what the files table says of a file', () => {
  const piece = {
    chords: ['C', 'C', 'Am F', '', 'G', 'Dm', 'E', 'A', 'B'], phrases: [['A', 4], ['B', 4]], promptBars: 9,
    tracks: [{ name: 'Lead', role: 'melody', notes: [] }, { name: '', role: 'piano', notes: [] }, { name: 'Pad', role: 'piano', notes: [] }],
  };
  assert.equal(accompanimentTracks(piece), 'track 1, Pad');
  assert.equal(accompanimentTracks({ tracks: [] }), 'none');
  assert.equal(chordsSummary(piece), 'C Am F G Dm E … · phrases A4 B4');
  assert.equal(chordsSummary({ chords: ['', 'N'], phrases: [] }), 'N · phrases none');
  assert.equal(chordsSummary({ chords: [''], phrases: [] }), 'no chords · phrases none');
  assert.deepEqual(usedText(null, piece), { text: '…', className: null });
  assert.deepEqual(usedText({ problem: 'no melody' }, piece), { text: 'not used: no melody', className: 'problem' });
  assert.deepEqual(usedText({ trainBars: 8, heldOutBars: 2, melodyNotes: 40, accompanimentNotes: 90 }, piece), {
    text: '8 bars to train, 2 held out · 40 melody notes · accompaniment: track 1, Pad (90 notes)',
    className: 'ok',
  });
});

test('the step line and the held-out summary', () => {
  const run = { steps: 100, times: [500, 500], valid: [[0, 0.5]], backend: 'the CPU' };
  assert.equal(progressText(run, { step: 2, loss: 0.25 }),
    'Step 2 of 100 · loss 0.2500 · held-out of the base 0.5000 · 2.00 steps/s · about 49 s left on the CPU');
  run.valid.push([10, 0.4]);
  assert.match(progressText(run, { step: 10, loss: 0.2 }), /held-out 0\.4000 \(base 0\.5000\)/);
  assert.doesNotMatch(progressText({ ...run, valid: [] }, { step: 1, loss: 0.2 }), /held-out/);
  assert.equal(heldOutSummary(run), '; held-out loss 0.5000 → 0.4000');
  assert.equal(heldOutSummary({ valid: [[0, 0.5]] }), '');
  assert.match(progressText({ ...run, resumedAt: 3 }, { step: 5, loss: 0.2 }),
    /left on the CPU \(the GPU was lost at step 4: it went on on the CPU from step 3\)$/);
});

test('a run\'s record, and the names new models get', () => {
  const run = { train: [[1, 0.3], [2, 0.2]], valid: [], backend: 'WebGPU', times: [100, 300], wasmBytes: 1024 };
  assert.deepEqual(runRecord(run, 'done'), {
    state: 'done', steps: 2, train: run.train, valid: [], backend: 'WebGPU', msPerStep: 200, times: run.times, wasmBytes: 1024, resumedAt: null,
  });
  assert.equal(runRecord({ ...run, resumedAt: 7 }, 'done').resumedAt, 7, 'a run whose GPU was lost says where it went on');
  assert.equal(runRecord({ ...run, times: [], wasmBytes: undefined }, 'cancelled').msPerStep, null);
  assert.equal(runRecord({ ...run, wasmBytes: undefined }, 'failed').wasmBytes, null);
  assert.equal(keepName('acc', new Set()), 'acc-mine-1');
  assert.equal(keepName('acc', new Set(['acc-mine-1', 'acc-mine-2'])), 'acc-mine-3');
  const taken = new Set(['m', 'm-2']);
  assert.equal(importName('m', (n) => taken.has(n)), 'm-3');
  assert.equal(importName('new', (n) => taken.has(n)), 'new');
});

test('the line under a kept model', () => {
  assert.equal(modelSummary({ task: 'Continuation', training: { base: 'c', steps: 40 }, metrics: { held_out_loss_before: 1.5, held_out_loss: 1.25 } }),
    'continuation · from c · 40 steps · held-out loss 1.5000 → 1.2500');
  assert.equal(modelSummary({ task: 'Accompaniment' }), 'accompaniment · from ? · ? steps');
});
