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
