// A small loss-curve plot on a canvas: reused by the backend check and, later, by fine-tuning.

/** Draws `values` (one per step) as a polyline scaled to the canvas, with min/max labels. */
export function drawLossCurve(canvas, values) {
  const ctx = canvas.getContext('2d');
  const { width, height } = canvas;
  ctx.clearRect(0, 0, width, height);
  const finite = values.filter(Number.isFinite);
  if (finite.length < 2) return;
  const lo = Math.min(...finite);
  const hi = Math.max(...finite);
  const pad = 14;
  const x = (i) => pad + (i / (values.length - 1)) * (width - 2 * pad);
  const y = (v) => height - pad - ((v - lo) / (hi - lo || 1)) * (height - 2 * pad);
  ctx.strokeStyle = '#5fb3f9';
  ctx.lineWidth = 2;
  ctx.beginPath();
  values.forEach((v, i) => (i === 0 ? ctx.moveTo(x(i), y(v)) : ctx.lineTo(x(i), y(v))));
  ctx.stroke();
  ctx.fillStyle = '#9aa0aa';
  ctx.font = '11px system-ui, sans-serif';
  ctx.fillText(`loss ${hi.toFixed(3)}`, pad, 11);
  ctx.fillText(`${lo.toFixed(3)}`, width - pad - 36, height - 2);
}

/**
 * Exponential moving average of `values` (weight `alpha` on the newest), for a readable
 * training curve over noisy per-batch losses.
 */
export function smooth(values, alpha = 0.2) {
  let s = null;
  return values.map((v) => (s = s === null ? v : s + alpha * (v - s)));
}

/**
 * The fine-tuning curve: training loss per step (raw, faint; smoothed, bold) and held-out loss
 * (dots joined), against steps 0..`steps`. `train` and `valid` are [step, loss] pairs.
 * Non-finite losses are left out. Returns the y range drawn, or null when there is nothing.
 */
export function drawTuneCurve(canvas, { train = [], valid = [], steps = 1 }) {
  const ctx = canvas.getContext('2d');
  const { width, height } = canvas;
  ctx.clearRect(0, 0, width, height);
  const points = [...train, ...valid].filter(([, v]) => Number.isFinite(v));
  if (!points.length) return null;
  let lo = Math.min(...points.map(([, v]) => v));
  let hi = Math.max(...points.map(([, v]) => v));
  if (hi - lo < 1e-6) {
    hi += 0.5 * Math.abs(hi || 1) * 0.1;
    lo -= 0.5 * Math.abs(lo || 1) * 0.1;
  }
  const left = 46;
  const right = 10;
  const top = 18;
  const bottom = 22;
  const x = (s) => left + (s / Math.max(1, steps)) * (width - left - right);
  const y = (v) => top + (1 - (v - lo) / (hi - lo)) * (height - top - bottom);
  ctx.font = '11px system-ui, sans-serif';
  ctx.fillStyle = '#9aa0aa';
  ctx.strokeStyle = '#2b2f38';
  ctx.lineWidth = 1;
  for (const v of [lo, (lo + hi) / 2, hi]) {
    ctx.beginPath();
    ctx.moveTo(left, y(v));
    ctx.lineTo(width - right, y(v));
    ctx.stroke();
    ctx.fillText(v.toPrecision(3), 2, y(v) + 4);
  }
  ctx.fillText('0', left, height - 6);
  ctx.fillText(`${steps} steps`, width - right - 52, height - 6);
  const line = (pairs, color, widthPx) => {
    const finite = pairs.filter(([, v]) => Number.isFinite(v));
    if (!finite.length) return;
    ctx.strokeStyle = color;
    ctx.lineWidth = widthPx;
    ctx.beginPath();
    finite.forEach(([s, v], i) => (i === 0 ? ctx.moveTo(x(s), y(v)) : ctx.lineTo(x(s), y(v))));
    ctx.stroke();
  };
  const finiteTrain = train.filter(([, v]) => Number.isFinite(v));
  line(finiteTrain, 'rgba(95, 179, 249, 0.35)', 1);
  const smoothed = smooth(finiteTrain.map(([, v]) => v));
  line(finiteTrain.map(([s], i) => [s, smoothed[i]]), '#5fb3f9', 2);
  line(valid, '#f2b84b', 2);
  ctx.fillStyle = '#f2b84b';
  for (const [s, v] of valid.filter(([, v]) => Number.isFinite(v))) {
    ctx.beginPath();
    ctx.arc(x(s), y(v), 3, 0, 2 * Math.PI);
    ctx.fill();
  }
  ctx.fillStyle = '#5fb3f9';
  ctx.fillText('training loss', left + 6, 12);
  ctx.fillStyle = '#f2b84b';
  ctx.fillText('held-out loss', left + 90, 12);
  return { lo, hi };
}
