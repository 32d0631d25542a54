// The words the page shows about its data (www/page-text.js) and the positional template's
// average (www/attention.js), under Node.
import test from 'node:test';
import assert from 'node:assert/strict';
import {
  backendText, readyText, checkSummary, pieceTitle, describeRoles, modelOption, modelAbout,
  noTemplateText, cachedText, exportName,
} from '../../www/page-text.js';
import { meanTemplate } from '../../www/attention.js';

test('the backend badge: the adapter on WebGPU, CPU and why otherwise', () => {
  const gpu = backendText({ kind: 'gpu', label: 'WebGPU: SwiftShader' });
  assert.deepEqual(gpu, { badge: 'WebGPU: SwiftShader', className: 'badge gpu', title: 'WebGPU: SwiftShader', line: 'WebGPU: SwiftShader' });
  const cpu = backendText({ kind: 'cpu', label: 'CPU (wasm)', fallback_reason: 'no adapter', fallback_detail: 'details' });
  assert.equal(cpu.badge, 'CPU');
  assert.equal(cpu.className, 'badge cpu');
  assert.equal(cpu.title, 'Running on the CPU: no adapter.\ndetails');
  assert.equal(cpu.line, 'CPU (wasm) — not WebGPU: no adapter');
  assert.equal(backendText({ kind: 'cpu', label: 'CPU', fallback_reason: 'asked' }).title, 'Running on the CPU: asked.\n');
  assert.equal(readyText(812.4, 95.6), '812 ms after page load (96 ms in the Worker)');
});

test('the self-check passes within 1e-4 of the CPU with a falling loss, and fails otherwise', () => {
  const report = (ops, losses) => ({ ops, fit: { losses } });
  const good = checkSummary(report({ matmul: 1e-6, cumsum: 2e-7, softmax: 0 }, [1, 0.5, 0.25]), 41.2);
  assert.equal(good.ok, true);
  assert.equal(good.ops, 'max |Δ| matmul 1.0e-6, cumsum 2.0e-7, softmax 0.0e+0 ✓');
  assert.equal(good.fit, '2 Adam steps, loss 1.0000 → 0.2500 in 41 ms');
  const far = checkSummary(report({ matmul: 1e-3, cumsum: 0, softmax: 0 }, [1, 0.5]), 1);
  assert.equal(far.ok, false);
  assert.match(far.ops, /✗ \(too far from the CPU reference\)$/);
  assert.equal(checkSummary(report({ matmul: 0, cumsum: 0, softmax: 0 }, [1, 1]), 1).ok, false, 'a loss that did not fall');
  assert.equal(checkSummary(report({ matmul: 0, cumsum: 0, softmax: 0 }, [1, NaN]), 1).ok, false, 'NaN');
  assert.equal(good.fused, null, 'no fused steps on the CPU');
});

test('the self-check says whether the fused WebGPU steps agree with tensor ops, without failing', () => {
  const report = (fused) => ({ ops: { matmul: 0, cumsum: 0, softmax: 0 }, fit: { losses: [1, 0.5] }, fused });
  const agree = checkSummary(report({ tokens: 16, tokens_agree: true, read_backs: 1, overridden: 0, steps: 16, steps_agree: true, on: true }), 1);
  assert.equal(agree.fused, '16 continuation tokens (1 read-back) and 16 accompaniment steps as tensor ops write them ✓');
  const off = checkSummary(report({ tokens: 24, tokens_agree: false, steps: 32, steps_agree: true, on: false }), 1);
  assert.equal(off.ok, true, 'tensor ops still pass');
  assert.equal(off.fused, '✗ continuation tokens differ from tensor ops: the fused steps are off, generation goes through tensor ops');
});

test('a piece\'s title and roles', () => {
  const piece = {
    name: 'song.mid', bars: [0, 1920], chords: ['C', ''],
    tracks: [{ name: 'Voice', role: 'melody', notes: [[60, 0, 1, 1]] }, { name: 'Keys', role: 'piano', notes: [[48, 0, 1, 1], [52, 0, 1, 1]] }],
  };
  assert.equal(pieceTitle(piece), 'song.mid · 2 bars · 3 notes');
  assert.equal(pieceTitle(null), '');
  assert.equal(describeRoles(piece), 'melody on Voice; 1 bars with chords');
  assert.match(describeRoles({ ...piece, tracks: [piece.tracks[1]] }), /^no melody track found/);
});

test('model labels and descriptions', () => {
  const m = { name: 'acc', pe: 'sine_spe', default: true, description: 'An accompanist.', parameters: 1234567, bytes: 4.56e6, config: { layers: 4, heads: 8 } };
  assert.equal(modelOption(m), 'acc · sine_spe (default)');
  assert.equal(modelOption({ name: 'mine', pe: 'ape', user: true }), 'mine · ape (yours)');
  assert.equal(modelAbout(m), 'An accompanist. 4 layers × 8 heads, 1.23 M parameters, 4.6 MB.');
  assert.equal(modelAbout({ description: 'Bare.' }), 'Bare. ');
  assert.equal(modelAbout(undefined), 'No model for this task.');
  assert.match(noTemplateText('fstripe_x'), /^fstripe_x has no positional template: its kernel compares structure labels/);
  assert.match(noTemplateText('ape'), /^ape has no positional template: positions enter by adding a code/);
});

test('cached files and download names', () => {
  assert.equal(cachedText([]), 'none');
  assert.equal(cachedText(['https://x/www/models/a.bpk', 'https://x/www/models/b.bpk']), 'a.bpk, b.bpk');
  assert.equal(exportName({ name: 'Song.MID' }, 'wav'), 'Song-pianoformer.wav');
  assert.equal(exportName({ name: 'take.kar' }, 'mid'), 'take-pianoformer.mid');
  assert.equal(exportName({ name: 'a.mid.txt' }, 'mid'), 'a.mid.txt-pianoformer.mid');
  assert.equal(exportName(null, 'mid'), 'piece-pianoformer.mid');
});

test('the positional template is averaged over its dimensions, lag by lag', () => {
  const t = { dims: 2, lags: 3, values: [1, 2, 3, 3, 4, 5] };
  assert.deepEqual([...meanTemplate(t)], [2, 3, 4]);
  assert.ok(meanTemplate(t) instanceof Float32Array);
  assert.deepEqual([...meanTemplate({ dims: 1, lags: 2, values: [0.5, -1] })], [0.5, -1]);
});
