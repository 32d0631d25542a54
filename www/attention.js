// Live attention map and positional-template plots.
//
// The map is the lower-triangular matrix A[i][j] (query position i attends key position j <= i),
// drawn like the figures of the SPE paper and filled in row by row while a model generates.
// Each weight is drawn against uniform attention (row i spreads 1 / (i + 1) over its keys): the
// ratio (i + 1) A[i][j] on a diverging log scale, blue below uniform, red above, grey where a
// row attends as evenly as uniform would. A row's structure so shows whatever its length: a
// raw map of a linear-attention model reads as a flat triangle, its weights all near 1 / (i + 1).
// With the piece's bar lines and phrase letters on both axes (`setMarks`), a person sees
// whether the second A looks at the first.
// Storage stays at display resolution: at most 512 x 512 bins, each holding the mean ratio of the
// positions it covers (the block's share of attention against uniform's: a mean of ratios that
// hover about 1 stays about 1, where their maximum would read every block as above uniform; a
// sharp peak still shows, a key 50 times uniform in a 4 x 4 block makes it 3 times). A bin covers a power-of-two number of positions, so when the sequence
// grows past the bins the existing bins merge 2 x 2 exactly, without the raw rows.
// The binning and scales are pure functions, tested in Node (tests/js/roll.test.mjs); nothing
// here touches the DOM until an AttentionMap is constructed or drawTemplate is called.

export const MAX_BINS = 512;
const OCTAVES = 3; // the ratio scale runs from 1/8 of uniform to 8 times it
const FONT = '11px system-ui, -apple-system, "Segoe UI", sans-serif';
const THEME = { text: '#e8e6e3', muted: '#9aa0aa', line: '#2b2f38', empty: '#0b0c0f', triangle: '#191c22' };

const clamp = (x, lo, hi) => Math.min(hi, Math.max(lo, x));

// ---------------------------------------------------------------------------------------------
// Pure binning and scales

/** Bin layout for `length` positions: `per` = 2^shift positions a bin, `bins` <= maxBins a side. */
export function binLayout(length, maxBins = MAX_BINS) {
  let shift = 0;
  while (Math.ceil(length / 2 ** shift) > maxBins) shift++;
  return { shift, per: 2 ** shift, bins: Math.max(1, Math.ceil(length / 2 ** shift)) };
}

/** Empty bins for `length` positions: data[bi * bins + bj] / count[...] is the block's mean ratio to uniform. */
export function createBins(length, maxBins = MAX_BINS) {
  const layout = binLayout(length, maxBins);
  return {
    length, maxBins, ...layout,
    data: new Float32Array(layout.bins * layout.bins),
    count: new Float32Array(layout.bins * layout.bins),
    written: new Uint8Array(layout.bins), // bin rows that have received at least one query row
  };
}

/** Bins for `newLength` positions holding what `state` holds (pooled again if coarser). */
export function growBins(state, newLength) {
  if (newLength <= state.length) return state;
  const next = createBins(newLength, state.maxBins);
  const merge = next.shift - state.shift;
  for (let bi = 0; bi < state.bins; bi++) {
    if (!state.written[bi]) continue;
    const ni = bi >> merge;
    next.written[ni] = 1;
    for (let bj = 0; bj <= bi; bj++) {
      const k = ni * next.bins + (bj >> merge);
      next.data[k] += state.data[bi * state.bins + bj];
      next.count[k] += state.count[bi * state.bins + bj];
    }
  }
  return next;
}

/** A copy of `state` that later writes to either leave the other alone. */
export function copyBins(state) {
  return { ...state, data: state.data.slice(), count: state.count.slice(), written: state.written.slice() };
}

/**
 * Pools query rows into `state` as ratios to uniform attention: `rows` holds rows.length /
 * keyCount consecutive rows from query position `startRow`, each `keyCount` weights over keys
 * 0..keyCount-1 (keys past a row's own position are ignored: the map is causal); row i's weight
 * w is kept as (i + 1) w. Rows at or past state.length are dropped (grow first). Returns the
 * range [firstBinRow, lastBinRow] it touched, or null.
 */
export function binRows(state, startRow, rows, keyCount) {
  const count = keyCount > 0 ? Math.floor(rows.length / keyCount) : 0;
  const { shift, bins, data, count: counts, written } = state;
  let first = -1;
  let last = -1;
  for (let r = 0; r < count; r++) {
    const i = startRow + r;
    if (i < 0) continue;
    if (i >= state.length) break;
    const bi = i >> shift;
    const base = bi * bins;
    const offset = r * keyCount;
    const end = Math.min(keyCount, i + 1);
    for (let j = 0; j < end; j++) {
      const v = rows[offset + j] * (i + 1);
      const k = base + (j >> shift);
      if (!Number.isFinite(v)) continue; // a bad weight is skipped
      data[k] += v;
      counts[k] += 1;
    }
    written[bi] = 1;
    if (first < 0) first = bi;
    last = bi;
  }
  return first < 0 ? null : [first, last];
}

/** Colour level 0..1 of a ratio to uniform attention: 0.5 uniform, 0 at 1/8 of it or less, 1 at 8 times or more. */
export function ratioLevel(ratio, octaves = OCTAVES) {
  if (!(ratio > 0)) return 0;
  return clamp(0.5 + Math.log2(ratio) / (2 * octaves), 0, 1);
}

// A diverging scale (ColorBrewer's RdBu, reversed): blue below uniform, grey at it, red above.
const DIVERGING = [
  [33, 102, 172], [67, 147, 195], [146, 197, 222], [209, 229, 240], [200, 200, 200],
  [253, 219, 199], [244, 165, 130], [214, 96, 77], [178, 24, 43],
];

/** The diverging colour of `t` in 0..1 as [r, g, b]. */
export function diverging(t) {
  const x = clamp(Number.isFinite(t) ? t : 0, 0, 1) * (DIVERGING.length - 1);
  const i = Math.min(DIVERGING.length - 2, Math.floor(x));
  const f = x - i;
  return DIVERGING[i].map((c, k) => Math.round(c + (DIVERGING[i + 1][k] - c) * f));
}

/** 256 colours of `scale` (the diverging one by default), r g b after each other. */
export function colourTable(scale = diverging) {
  const lut = new Uint8Array(256 * 3);
  for (let i = 0; i < 256; i++) lut.set(scale(i / 255), i * 3);
  return lut;
}

/**
 * Writes bin row `bi` of `state` as RGBA into `rgba` (bins wide), each ratio to uniform on the
 * fixed [`ratioLevel`] scale; returns the row's largest (mean) ratio.
 */
export function colourRow(state, bi, rgba, lut) {
  const { bins } = state;
  const base = bi * bins;
  const mean = (k) => (state.count[k] > 0 ? state.data[k] / state.count[k] : 0);
  let max = 0;
  for (let bj = 0; bj <= bi; bj++) max = Math.max(max, mean(base + bj));
  for (let bj = 0; bj < bins; bj++) {
    const p = (base + bj) * 4;
    if (bj > bi || !state.written[bi]) {
      rgba[p + 3] = 0; // above the diagonal, or not generated yet: the background shows
      continue;
    }
    const c = Math.round(ratioLevel(mean(base + bj)) * 255) * 3;
    rgba[p] = lut[c];
    rgba[p + 1] = lut[c + 1];
    rgba[p + 2] = lut[c + 2];
    rgba[p + 3] = 255;
  }
  return max;
}

/** Round tick values in [lo, hi]: steps of 1, 2 or 5 times a power of ten, about `count` of them. */
export function niceTicks(lo, hi, count = 5) {
  if (!(hi > lo)) return Number.isFinite(lo) ? [lo] : [];
  const rough = (hi - lo) / Math.max(1, count);
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= rough) ?? 10 * power;
  const ticks = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push(Math.abs(t) < step * 1e-9 ? 0 : Number(t.toPrecision(12)));
  }
  return ticks;
}

// ---------------------------------------------------------------------------------------------
// Canvas helpers

const pinned = new WeakSet();

/**
 * Sizes the canvas's backing store for the device pixel ratio at its css size and returns a
 * context in css px. A canvas whose css size came from its width/height attributes gets that
 * size pinned in its style first, or enlarging the backing store would enlarge the canvas.
 */
function fitCanvas(canvas) {
  if (!pinned.has(canvas)) {
    pinned.add(canvas);
    const rect = canvas.getBoundingClientRect();
    if (!rect.width || rect.width === canvas.width) canvas.style.width = `${canvas.width}px`;
    if (!rect.height || rect.height === canvas.height) canvas.style.height = `${canvas.height}px`;
  }
  const dpr = globalThis.devicePixelRatio || 1;
  const w = canvas.clientWidth || parseFloat(canvas.style.width) || canvas.width;
  const h = canvas.clientHeight || parseFloat(canvas.style.height) || canvas.height;
  const W = Math.max(1, Math.round(w * dpr));
  const H = Math.max(1, Math.round(h * dpr));
  if (canvas.width !== W || canvas.height !== H) {
    canvas.width = W;
    canvas.height = H;
  }
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  return { ctx, w, h };
}

function formatTick(t) {
  return Math.abs(t) >= 1e4 || (Math.abs(t) < 1e-3 && t !== 0) ? t.toExponential(0) : String(t);
}

function axisLabels(ctx, plot, xLabel, yLabel) {
  ctx.fillStyle = THEME.muted;
  ctx.font = FONT;
  ctx.textAlign = 'center';
  ctx.textBaseline = 'bottom';
  ctx.fillText(xLabel, plot.x + plot.w / 2, plot.y + plot.h + 30);
  ctx.save();
  ctx.translate(plot.x - 40, plot.y + plot.h / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.textBaseline = 'middle';
  ctx.fillText(yLabel, 0, 0);
  ctx.restore();
}

/** Ticks along the bottom (x) or left (y) edge of `plot`; `at` maps a value to a px offset. */
function axisTicks(ctx, plot, values, at, vertical) {
  ctx.fillStyle = THEME.muted;
  ctx.font = FONT;
  for (const t of values) {
    const o = at(t);
    if (vertical) {
      ctx.fillRect(plot.x - 4, plot.y + o, 4, 1);
      ctx.textAlign = 'right';
      ctx.textBaseline = 'middle';
      ctx.fillText(formatTick(t), plot.x - 6, plot.y + o);
    } else {
      ctx.fillRect(plot.x + o, plot.y + plot.h, 1, 4);
      ctx.textAlign = 'center';
      ctx.textBaseline = 'top';
      ctx.fillText(formatTick(t), plot.x + o, plot.y + plot.h + 5);
    }
  }
}

/**
 * The positional template `t` ({values, dims, lags}: dims rows of lags values, from the
 * Worker's `template`) averaged over its dimensions: one value per lag.
 */
export function meanTemplate(t) {
  const mean = new Float32Array(t.lags);
  for (let d = 0; d < t.dims; d++) {
    for (let k = 0; k < t.lags; k++) mean[k] += t.values[d * t.lags + k] / t.dims;
  }
  return mean;
}

// ---------------------------------------------------------------------------------------------

export class AttentionMap {
  constructor(canvas) {
    this.canvas = canvas;
    this.label = 'Attention';
    this._lut = colourTable();
    this.marks = null;
    this._image = document.createElement('canvas');
    this._frame = 0;
    canvas.setAttribute('role', 'img');
    if (typeof ResizeObserver === 'function') {
      this._resize = new ResizeObserver(() => this._schedule());
      this._resize.observe(canvas);
    }
    this.reset(1);
  }

  /** Positions the map currently covers. */
  get length() {
    return this.state.length;
  }

  /** Clears the map for `length` expected positions. */
  reset(length) {
    this.state = createBins(Math.max(1, Math.floor(length) || 1));
    this._rowsSeen = 0;
    this._painted = false;
    this._allocateImage();
    this._describe();
    this._schedule();
  }

  /** Extends the map to `newLength` positions, keeping (and if needed re-pooling) what it holds. */
  grow(newLength) {
    if (!(newLength > this.state.length)) return;
    const bins = this.state.bins;
    this.state = growBins(this.state, Math.floor(newLength));
    if (this.state.bins !== bins) this._allocateImage();
    this._describe();
    this._schedule();
  }

  /** Adds query rows (see binRows); grows the map when they reach past its length. */
  addRows(startRow, rows, keyCount) {
    const count = keyCount > 0 ? Math.floor(rows.length / keyCount) : 0;
    if (!count) return;
    if (startRow + count > this.state.length) this.grow(startRow + count);
    const touched = binRows(this.state, startRow, rows, keyCount);
    if (!touched) return;
    this._rowsSeen = Math.max(this._rowsSeen, startRow + count);
    this._dirty = this._dirty
      ? [Math.min(this._dirty[0], touched[0]), Math.max(this._dirty[1], touched[1])]
      : touched;
    this._schedule();
  }

  /** What the map holds, for `restore` (a compared result keeps its own map). */
  snapshot() {
    this.flush();
    return { state: copyBins(this.state), rowsSeen: this._rowsSeen, label: this.label };
  }

  /** Shows what `snapshot` kept; `reset` and `addRows` afterwards leave the snapshot alone. */
  restore(snapshot) {
    // addRows writes into state.data: the map gets its own copy, the snapshot stays as it was.
    this.state = copyBins(snapshot.state);
    this._rowsSeen = snapshot.rowsSeen;
    this.label = snapshot.label;
    this._painted = false;
    this._allocateImage();
    this._describe();
    this._schedule();
  }

  /**
   * The bar lines and phrase letters drawn on both axes (`phraseMarks`: [{at, bar, letter}],
   * positions from 0), or null for none (a map over tokens, not steps).
   */
  setMarks(marks) {
    this.marks = Array.isArray(marks) && marks.length ? marks : null;
    this._schedule();
  }

  /** Names the map for screen readers, e.g. 'Attention of layer 2, head 1'. */
  setLabel(text) {
    this.label = text;
    this._describe();
  }

  /** True while nothing has been drawn (no rows, or only zero weights). */
  isBlank() {
    this.flush();
    return !this._painted;
  }

  /** Draws now instead of at the next animation frame. */
  flush() {
    if (!this._frame) return;
    cancelAnimationFrame(this._frame);
    this._draw();
  }

  destroy() {
    if (this._frame) cancelAnimationFrame(this._frame);
    this._frame = 0;
    this._resize?.disconnect();
  }

  _describe() {
    this.canvas.setAttribute(
      'aria-label',
      `${this.label} over ${this.state.length} positions, each weight against uniform attention (blue below, red above)`,
    );
  }

  /** A fresh bins x bins image; every written row needs colouring again. */
  _allocateImage() {
    const { bins } = this.state;
    this._image.width = this._image.height = bins;
    this._pixels = new ImageData(bins, bins);
    this._dirty = [0, bins - 1];
  }

  _schedule() {
    if (!this._frame) this._frame = requestAnimationFrame(() => this._draw());
  }

  /** Recolours the changed bin rows (a row's colours depend on that row only) into the image. */
  _recolour() {
    if (!this._dirty) return;
    const [r0, r1] = this._dirty;
    this._dirty = null;
    for (let bi = r0; bi <= r1; bi++) {
      if (colourRow(this.state, bi, this._pixels.data, this._lut) > 0) this._painted = true;
    }
    this._image.getContext('2d').putImageData(this._pixels, 0, 0, 0, r0, this.state.bins, r1 - r0 + 1);
  }

  _draw() {
    this._frame = 0;
    this._recolour();
    const { ctx, w, h } = fitCanvas(this.canvas);
    const side = Math.max(10, Math.min(w - 56, h - 44));
    const plot = { x: 48, y: 8, w: side, h: side };
    const { length, bins, per } = this.state;
    ctx.fillStyle = THEME.empty;
    ctx.fillRect(plot.x, plot.y, side, side);
    // The lower triangle still to come, so the shape of the map shows from the first row.
    ctx.fillStyle = THEME.triangle;
    ctx.beginPath();
    ctx.moveTo(plot.x, plot.y);
    ctx.lineTo(plot.x + side, plot.y + side);
    ctx.lineTo(plot.x, plot.y + side);
    ctx.fill();
    ctx.save();
    ctx.beginPath();
    ctx.rect(plot.x, plot.y, side, side);
    ctx.clip();
    ctx.imageSmoothingEnabled = false;
    const span = (side * bins * per) / length; // the last bin may reach past the last position
    ctx.drawImage(this._image, 0, 0, bins, bins, plot.x, plot.y, span, span);
    ctx.restore();
    const at = (t) => ((t + 0.5) / length) * side;
    if (this.marks) {
      drawMarks(ctx, plot, this.marks, (t) => (t / length) * side);
      axisLabels(ctx, plot, 'key (bars; phrase letters)', 'query');
    } else {
      const ticks = niceTicks(0, length - 1, Math.max(2, Math.floor(side / 60)));
      axisTicks(ctx, plot, ticks, at, false);
      axisTicks(ctx, plot, ticks, at, true);
      axisLabels(ctx, plot, 'key position', 'query position');
    }
  }
}

/**
 * Bar lines and phrase letters over a map of `piece`'s steps (`stepsPerQuarter` a quarter note,
 * as the models' grid: 4): [{at, bar, letter}] for every bar from its first step, `letter` set
 * where a phrase of the phrase lane starts. null for a piece without bars.
 */
export function phraseMarks(piece, stepsPerQuarter = 4) {
  if (!piece?.bars?.length || !(piece.ppq > 0)) return null;
  const marks = piece.bars.map((tick, bar) => ({ at: Math.round((tick * stepsPerQuarter) / piece.ppq), bar, letter: null }));
  let bar = 0;
  for (const [letter, bars] of piece.phrases ?? []) {
    if (marks[bar]) marks[bar].letter = letter;
    bar += bars;
  }
  return marks;
}

/** Bar lines (faint) and phrase starts (with their letters) across the map, on both axes. */
function drawMarks(ctx, plot, marks, offset) {
  ctx.font = FONT;
  // Bar lines closer than 8 px would hide the map: then the phrases' alone.
  const bars = marks.length > 1 && (offset(marks.at(-1).at) - offset(marks[0].at)) / (marks.length - 1) >= 8;
  for (const m of marks) {
    const o = offset(m.at);
    if (!(o >= 0 && o <= plot.w) || (!m.letter && !bars)) continue;
    // Dark lines over the map's light middle: a phrase's start strong, a bar's faint.
    ctx.fillStyle = m.letter ? 'rgba(12, 13, 16, 0.85)' : 'rgba(12, 13, 16, 0.3)';
    ctx.fillRect(plot.x + o, plot.y + o, 1, plot.h - o); // the key's bar line, below the diagonal
    ctx.fillRect(plot.x, plot.y + o, o, 1); // the query's, left of it
    if (!m.letter) continue;
    ctx.fillStyle = THEME.text;
    ctx.textAlign = 'left';
    ctx.textBaseline = 'top';
    ctx.fillText(m.letter, plot.x + o + 2, plot.y + plot.h + 5);
    ctx.textAlign = 'right';
    ctx.textBaseline = 'top';
    ctx.fillText(m.letter, plot.x - 6, plot.y + o + 1);
  }
}

/**
 * Plots a positional template P_d: `values` (a Float32Array or array) over its first `length`
 * indices (lags or positions) as a line, with a zero line and axis labels.
 * options: { xLabel = 'lag', yLabel = 'value', label } (label names it for screen readers).
 */
export function drawTemplate(canvas, values, length = values.length, options = {}) {
  const { xLabel = 'lag', yLabel = 'value', label = 'Positional template' } = options;
  const n = Math.max(0, Math.min(length, values.length));
  const { ctx, w, h } = fitCanvas(canvas);
  const plot = { x: 52, y: 8, w: Math.max(10, w - 62), h: Math.max(10, h - 46) };
  let lo = 0;
  let hi = 0;
  for (let i = 0; i < n; i++) {
    if (values[i] < lo) lo = values[i];
    if (values[i] > hi) hi = values[i];
  }
  if (hi === lo) hi = lo + 1;
  const pad = (hi - lo) * 0.05;
  [lo, hi] = [lo - (lo < 0 ? pad : 0), hi + pad];
  const xAt = (i) => (n > 1 ? (i / (n - 1)) * plot.w : plot.w / 2);
  const yAt = (v) => plot.h - ((v - lo) / (hi - lo)) * plot.h;
  ctx.strokeStyle = THEME.line;
  ctx.strokeRect(plot.x + 0.5, plot.y + 0.5, plot.w - 1, plot.h - 1);
  ctx.fillStyle = THEME.line;
  ctx.fillRect(plot.x, plot.y + Math.round(yAt(0)), plot.w, 1);
  templateLine(ctx, plot, values, n, xAt, yAt);
  axisTicks(ctx, plot, niceTicks(0, Math.max(0, n - 1), Math.max(2, Math.floor(plot.w / 70))), xAt, false);
  axisTicks(ctx, plot, niceTicks(lo, hi, Math.max(2, Math.floor(plot.h / 30))), yAt, true);
  axisLabels(ctx, plot, xLabel, yLabel);
  canvas.setAttribute('role', 'img');
  const range = n ? `, values from ${min(values, n).toPrecision(3)} to ${max(values, n).toPrecision(3)}` : '';
  canvas.setAttribute('aria-label', `${label}: ${n} values by ${xLabel}${range}`);
}

function min(values, n) {
  let m = Infinity;
  for (let i = 0; i < n; i++) if (values[i] < m) m = values[i];
  return m;
}

function max(values, n) {
  let m = -Infinity;
  for (let i = 0; i < n; i++) if (values[i] > m) m = values[i];
  return m;
}

/** The line; with more values than pixel columns, each column gets its min-max span instead. */
function templateLine(ctx, plot, values, n, xAt, yAt) {
  if (!n) return;
  ctx.save();
  ctx.translate(plot.x, plot.y);
  ctx.strokeStyle = '#5fb3f9';
  ctx.fillStyle = '#5fb3f9';
  ctx.lineWidth = 1.5;
  if (n <= plot.w * 2) {
    ctx.beginPath();
    for (let i = 0; i < n; i++) ctx[i ? 'lineTo' : 'moveTo'](xAt(i), yAt(values[i]));
    ctx.stroke();
    if (n === 1) ctx.fillRect(xAt(0) - 2, yAt(values[0]) - 2, 4, 4);
  } else {
    const columns = Math.ceil(plot.w);
    for (let c = 0; c < columns; c++) {
      const i0 = Math.floor((c / columns) * n);
      const i1 = Math.max(i0 + 1, Math.floor(((c + 1) / columns) * n));
      let a = Infinity;
      let b = -Infinity;
      for (let i = i0; i < i1; i++) {
        if (values[i] < a) a = values[i];
        if (values[i] > b) b = values[i];
      }
      if (a <= b) ctx.fillRect(c, yAt(b), 1, Math.max(1, yAt(a) - yAt(b)));
    }
  }
  ctx.restore();
}
