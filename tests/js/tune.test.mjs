// The fine-tuning panel's pure helpers: the curve's smoothing and scale, and time-left text.
import test from 'node:test';
import assert from 'node:assert/strict';
import { smooth, drawTuneCurve } from '../../www/loss-curve.js';

function fakeCanvas() {
  const calls = [];
  const props = {};
  const ctx = new Proxy(props, {
    get: (target, name) => (name in target ? target[name] : (...args) => calls.push([name, ...args])),
    set: (target, name, value) => ((target[name] = value), true),
  });
  return { width: 640, height: 180, getContext: () => ctx, calls };
}

test('smoothing follows the losses and starts at the first one', () => {
  assert.deepEqual(smooth([]), []);
  const s = smooth([1, 0, 0, 0], 0.5);
  assert.deepEqual(s, [1, 0.5, 0.25, 0.125]);
});

test('the curve spans every finite loss and skips NaN/Inf', () => {
  const canvas = fakeCanvas();
  const range = drawTuneCurve(canvas, {
    train: [[1, 0.5], [2, Number.NaN], [3, 0.3]],
    valid: [[0, 0.6], [3, Number.POSITIVE_INFINITY]],
    steps: 3,
  });
  assert.deepEqual(range, { lo: 0.3, hi: 0.6 });
  const points = canvas.calls.filter(([f]) => f === 'lineTo' || f === 'moveTo').map(([, x, y]) => [x, y]);
  assert.ok(points.every(([x, y]) => Number.isFinite(x) && Number.isFinite(y)), 'no NaN coordinates');
  assert.ok(points.every(([x, y]) => x >= 0 && x <= 640 && y >= 0 && y <= 180), 'inside the canvas');
  assert.equal(drawTuneCurve(fakeCanvas(), { train: [], valid: [], steps: 10 }), null);
  // A flat curve still gets a range to draw in.
  const flat = drawTuneCurve(fakeCanvas(), { train: [[1, 2], [2, 2]], steps: 2 });
  assert.ok(flat.hi > flat.lo);
});
