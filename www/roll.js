// Piano roll with chord and phrase lanes: the page's main view of a piece (see piece.js).
//
// Layout: a fixed gutter (lane names, the keyboard) beside a horizontal scroller. The scroller
// holds a spacer as wide as the whole piece at the current zoom, so the native scrollbar and
// touch panning work, and a sticky strip of viewport-wide canvases redrawn for the visible ticks
// only: a canvas as wide as a zoomed-in piece would pass the browser's canvas size limit, and
// drawing only what shows keeps a 5000-note piece fast.
// The geometry and lookups are pure functions, exported for the Node tests; nothing here touches
// the DOM until a PianoRoll is constructed.
import { ROLES, barAt, barEnd, barLength } from './piece.js';

export const ROLE_COLOURS = {
  melody: '#f2b84b',
  bridge: '#ffd699',
  piano: '#5fb3f9',
  generated: '#b48cff',
  other: '#8a8f99',
};
// Later roles draw on top: the melody must stay readable over a dense accompaniment.
export const DRAW_ORDER = ['other', 'piano', 'generated', 'bridge', 'melody'];

const GUTTER = 44;
const RULER_H = 18;
const CHORD_H = 26;
const PHRASE_H = 22;
const ROLL_H = 288;
const LANES_H = RULER_H + CHORD_H + PHRASE_H;
const MIN_BAR_PX = 56; // the opening zoom keeps a chord symbol readable
const MAX_QUARTER_PX = 480;
const END_PAD = 12; // room after the last bar so its line and the playhead stay visible
const DRAG_PX = 4; // a press that moves less than this is a click
const FONT = 'system-ui, -apple-system, "Segoe UI", sans-serif';
const THEME = {
  bg: '#14161b', panel: '#1d2027', line: '#2b2f38', text: '#e8e6e3', muted: '#9aa0aa',
  ok: '#5dd39e', white: '#171a20', black: '#111318', beat: '#20232a', bar: '#3a3f4b',
};
const NOTE_NAMES = ['C', 'C♯', 'D', 'D♯', 'E', 'F', 'F♯', 'G', 'G♯', 'A', 'A♯', 'B'];
const BLACK_KEYS = new Set([1, 3, 6, 8, 10]);

const clamp = (x, lo, hi) => Math.min(hi, Math.max(lo, x));

// ---------------------------------------------------------------------------------------------
// Pure geometry and lookups (tested in tests/js/roll.test.mjs)

/** Canvas x of `tick` at `pxPerTick`, with the view scrolled by `scrollX` px. */
export function tickToX(tick, pxPerTick, scrollX = 0) {
  return tick * pxPerTick - scrollX;
}

/** Tick under canvas x (inverse of `tickToX`). */
export function xToTick(x, pxPerTick, scrollX = 0) {
  return (x + scrollX) / pxPerTick;
}

/** Scroll offset that keeps the tick under `anchorX` in place when the zoom changes. */
export function zoomAround(oldPxPerTick, newPxPerTick, scrollX, anchorX) {
  const tick = xToTick(anchorX, oldPxPerTick, scrollX);
  return Math.max(0, tick * newPxPerTick - anchorX);
}

/** Last tick the roll shows: the piece's end, its last (planned) bar, or a later note. */
export function pieceEndTick(piece) {
  let end = piece.endTick ?? 0;
  if (piece.bars.length) end = Math.max(end, barEnd(piece, piece.bars.length - 1));
  for (const track of piece.tracks) for (const n of track.notes) end = Math.max(end, n[2]);
  return end;
}

/**
 * Pitch range [lo, hi] (inclusive) to show: the notes plus `margin` semitones, widened
 * evenly to at least `minSpan` semitones (two octaves) and kept inside MIDI's 0..127.
 */
export function fitPitchRange(piece, { margin = 2, minSpan = 24 } = {}) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const track of piece.tracks) {
    for (const n of track.notes) {
      if (n[0] < lo) lo = n[0];
      if (n[0] > hi) hi = n[0];
    }
  }
  if (lo > hi) [lo, hi] = [60, 60]; // no notes: two octaves around middle C
  lo -= margin;
  hi += margin;
  const missing = minSpan - (hi - lo);
  if (missing > 0) {
    lo -= Math.floor(missing / 2);
    hi += Math.ceil(missing / 2);
  }
  if (lo < 0) [lo, hi] = [0, hi - lo];
  if (hi > 127) [lo, hi] = [lo - (hi - 127), 127];
  return [Math.max(0, Math.round(lo)), Math.min(127, Math.round(hi))];
}

/**
 * Lookup structure for one track's notes: the notes sorted by start (the piece keeps them
 * sorted; a copy is sorted only if it did not) and the longest duration, which bounds how far
 * before the view a still-sounding note can start.
 */
export function noteIndex(notes) {
  let sorted = true;
  let maxDur = 0;
  for (let i = 0; i < notes.length; i++) {
    const n = notes[i];
    if (n[2] - n[1] > maxDur) maxDur = n[2] - n[1];
    if (i > 0 && n[1] < notes[i - 1][1]) sorted = false;
  }
  return { notes: sorted ? notes : [...notes].sort((a, b) => a[1] - b[1]), maxDur };
}

/** First index whose note starts at or after `tick` (notes sorted by start). */
export function lowerBound(notes, tick) {
  let lo = 0;
  let hi = notes.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (notes[mid][1] < tick) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Index range [i0, i1) of `index.notes` that can overlap ticks [from, to): every note with
 * start < to and end > from lies inside it (a few inside may end before `from`).
 */
export function visibleNotes(index, from, to) {
  return [lowerBound(index.notes, from - index.maxDur), lowerBound(index.notes, to)];
}

/** The time signatures as sorted [tick, num, den] with one at tick 0 (MIDI's default 4/4). */
function signatures(piece) {
  const sigs = (piece.timeSignatures ?? []).filter((s) => s[2] > 0);
  if (!sigs.length || sigs[0][0] > 0) sigs.unshift([0, 4, 4]);
  return sigs;
}

/** Ticks of the beats in [from, to]: a beat every 1/denominator note from each signature change. */
export function beatTicks(piece, from, to) {
  const sigs = signatures(piece);
  const out = [];
  for (let s = 0; s < sigs.length; s++) {
    const [start, , den] = sigs[s];
    const end = s + 1 < sigs.length ? sigs[s + 1][0] : Infinity;
    const step = (piece.ppq * 4) / den;
    if (end <= from || start > to) continue;
    for (let t = start + Math.max(0, Math.ceil((from - start) / step)) * step; t < end && t <= to; t += step) {
      out.push(t);
    }
  }
  return out;
}

/** `tick` rounded to the nearest beat (never past the next signature change). */
export function snapToBeat(piece, tick) {
  const sigs = signatures(piece);
  let s = 0;
  while (s + 1 < sigs.length && sigs[s + 1][0] <= tick) s++;
  const step = (piece.ppq * 4) / sigs[s][2];
  const snapped = sigs[s][0] + Math.round((tick - sigs[s][0]) / step) * step;
  return s + 1 < sigs.length ? Math.min(snapped, sigs[s + 1][0]) : snapped;
}

/** [from, to] covering whole bars, from the bar at one tick to the end of the bar at the other. */
export function barSpan(piece, tickA, tickB) {
  const a = barAt(piece, Math.min(tickA, tickB));
  const b = barAt(piece, Math.max(tickA, tickB));
  return [piece.bars[a], barEnd(piece, b)];
}

/** [from, to] between the beats nearest two ticks, inside [0, endTick]. */
export function beatSpan(piece, tickA, tickB, endTick = Infinity) {
  const a = clamp(snapToBeat(piece, Math.min(tickA, tickB)), 0, endTick);
  const b = clamp(snapToBeat(piece, Math.max(tickA, tickB)), 0, endTick);
  return [a, b];
}

/**
 * The phrases ([[letter, bars], ...] from bar 0) as runs [{ letter, from, to }] in bars, `to`
 * exclusive. Two phrases with the same letter stay two runs: the boundary between them is
 * structure the models read.
 */
export function phraseRuns(phrases) {
  const runs = [];
  let from = 0;
  for (const [letter, bars] of phrases) {
    runs.push({ letter, from, to: from + bars });
    from += bars;
  }
  return runs;
}

/** The letter of the phrase holding `bar` ('' when none does). */
export function phraseAt(phrases, bar) {
  return phraseRuns(phrases).find((r) => bar >= r.from && bar < r.to)?.letter ?? '';
}

/**
 * Colours of a phrase letter: a hue per letter (golden-angle steps, so A, B, C differ
 * clearly), muted for lower case (intro, bridge, outro: not melodic phrases).
 */
export function phraseColour(letter) {
  const l = letter || '?';
  const code = l.toUpperCase().charCodeAt(0) - 65;
  const hue = Math.round((((code * 137.5 + 35) % 360) + 360) % 360);
  const muted = l !== l.toUpperCase();
  return muted
    ? { hue, muted, fill: `hsla(${hue}, 12%, 45%, 0.22)`, stroke: `hsla(${hue}, 12%, 55%, 0.5)`, text: THEME.muted }
    : { hue, muted, fill: `hsla(${hue}, 60%, 55%, 0.30)`, stroke: `hsl(${hue}, 60%, 60%)`, text: `hsl(${hue}, 80%, 82%)` };
}

/** Smallest of 1, 2, 4, 8... bars between labels so that labels are at least `minPx` apart. */
export function labelStep(barPx, minPx) {
  let step = 1;
  while (step * barPx < minPx && step < 1 << 20) step *= 2;
  return step;
}

/** Scientific pitch name (MIDI 60 = C4). */
export function pitchName(pitch) {
  return `${NOTE_NAMES[pitch % 12]}${Math.floor(pitch / 12) - 1}`;
}

/** What the roll shows, in words: "Piano roll: 32 bars, 812 melody notes, 1630 piano notes". */
export function rollSummary(piece) {
  const counts = new Map();
  for (const t of piece.tracks) counts.set(t.role, (counts.get(t.role) ?? 0) + t.notes.length);
  const roles = [...ROLES, ...[...counts.keys()].filter((r) => !ROLES.includes(r))];
  const parts = [`${piece.bars.length} bars`];
  for (const role of roles) if (counts.get(role)) parts.push(`${counts.get(role)} ${role} notes`);
  let text = `Piano roll: ${parts.join(', ')}`;
  const prompt = piece.promptBars ?? piece.bars.length;
  if (prompt < piece.bars.length) text += `; bars ${prompt + 1}–${piece.bars.length} planned`;
  return text;
}

// ---------------------------------------------------------------------------------------------
// DOM helpers

function element(tag, style, attrs = {}) {
  const el = document.createElement(tag);
  el.style.cssText = style;
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
}

/** Sizes a canvas's backing store for the device pixel ratio and returns its context in css px. */
function sizeCanvas(canvas, w, h, dpr) {
  const W = Math.max(1, Math.round(w * dpr));
  const H = Math.max(1, Math.round(h * dpr));
  if (canvas.width !== W || canvas.height !== H) {
    canvas.width = W;
    canvas.height = H;
  }
  canvas.style.width = `${w}px`;
  canvas.style.height = `${h}px`;
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return ctx;
}

function readColours(el) {
  const css = getComputedStyle(el);
  const v = (name, fallback) => css.getPropertyValue(name).trim() || fallback;
  return { ...ROLE_COLOURS, melody: v('--melody', ROLE_COLOURS.melody), piano: v('--accomp', ROLE_COLOURS.piano) };
}

function addNoteRect(path, x, y, w, h) {
  // Corners only where they show: plain rectangles are cheaper when zoomed out over many notes.
  if (path.roundRect && w >= 4 && h >= 3) path.roundRect(x, y, w, h, Math.min(2, w / 2, h / 2));
  else path.rect(x, y, w, h);
}

// ---------------------------------------------------------------------------------------------

export class PianoRoll {
  /**
   * callbacks: { onChordClick(bar), onPhraseClick(bar), onSeek(tick), onSelect(fromTick, toTick) }
   * (onSelect(null, null) when the user clears the selection with Escape).
   * options: { height } of the roll in css px.
   */
  constructor(container, callbacks = {}, { height = ROLL_H } = {}) {
    this.container = container;
    this.callbacks = callbacks;
    this.rollHeight = height;
    this.piece = null;
    this.pxPerTick = 0.1;
    this.playhead = null;
    this.selection = null;
    this.generating = null;
    this.cursorBar = 0;
    this.viewWidth = 0;
    this._fitted = false;
    this._zoomPending = false;
    this._follow = true;
    this._expectScroll = -1;
    this._anchor = null;
    this._drag = null;
    this._frame = 0;
    this._stale = false;
    this._keepRange = false;
    this._tracks = [];
    this._runs = [];
    this._range = [48, 72];
    this._endTick = 0;
    this._summary = '';
    this._patterns = new WeakMap();
    this.colours = readColours(container);
    this._build();
  }

  // --- public API ------------------------------------------------------------------------------

  /** Shows `piece` (or nothing for null): refits the pitch range and the opening zoom. */
  setPiece(piece) {
    this.piece = piece;
    this.selection = null;
    this._anchor = null;
    this.cursorBar = 0;
    this._keepRange = false;
    if (!piece) {
      this._summary = '';
      this.roll.setAttribute('aria-label', 'Piano roll: no piece loaded');
      for (const lane of [this.chordLane, this.phraseLane]) lane.setAttribute('aria-valuetext', 'no piece loaded');
      this._schedule();
      return;
    }
    this._refresh();
    this.viewWidth = this.scroller.clientWidth;
    this._zoomPending = !this.viewWidth; // laid out later: the resize observer opens the zoom
    if (this.viewWidth) this._openingZoom();
    this._setCursor(0);
    this._schedule();
  }

  /** Redraws after the piece was changed in place (notes streamed in, labels edited). */
  update() {
    if (!this.piece) return;
    this._stale = true;
    this._schedule();
  }

  /** Moves the playhead (null hides it). While it moves the view follows it, until the user scrolls away. */
  setPlayhead(tick) {
    const was = this.playhead;
    this.playhead = tick ?? null;
    if (this.playhead != null) {
      // Follow from the start of playback, and again once the playhead walks back into view.
      if (was == null || this._inView(this.playhead)) this._follow = true;
      if (this._follow) this._keepInView(this.playhead);
    }
    this._schedule();
  }

  /** The loop range [fromTick, toTick], or null. */
  getSelection() {
    return this.selection ? [...this.selection] : null;
  }

  /** Sets the loop range without calling onSelect (e.g. restoring a saved one); null clears. */
  setSelection(range) {
    this.selection = range && range[1] > range[0] ? [range[0], range[1]] : null;
    this._schedule();
  }

  clearSelection() {
    this.setSelection(null);
  }

  /** Shades { fromTick, toTick, progress (0..1) } as being written by a model; null removes it. */
  setGenerating(state) {
    this.generating = state ? { ...state } : null;
    this._schedule();
  }

  zoomIn() {
    this._zoomBy(1.5);
  }

  zoomOut() {
    this._zoomBy(1 / 1.5);
  }

  /** Zooms so the whole piece, planned bars included, fits the view (and keeps it so on resize). */
  fit() {
    if (!this.piece) return;
    this._fitted = true;
    this._setZoom(this._fitZoom(), 0);
    this._scrollTo(0);
  }

  /** Scrolls so `tick` sits near the left of the view. */
  scrollToTick(tick) {
    this._scrollTo(tick * this.pxPerTick - this.viewWidth * 0.15);
  }

  /** Draws now instead of at the next animation frame (tests, screenshots). */
  flush() {
    if (!this._frame) return;
    cancelAnimationFrame(this._frame);
    this._draw();
  }

  destroy() {
    if (this._frame) cancelAnimationFrame(this._frame);
    this._frame = 0;
    this._resize?.disconnect();
    this.root.remove();
  }

  // --- building --------------------------------------------------------------------------------

  _build() {
    const stack = LANES_H + this.rollHeight;
    this.root = element('div', `display:grid;grid-template-columns:${GUTTER}px minmax(0,1fr);` +
      'user-select:none;-webkit-user-select:none;width:100%;min-width:0');
    this.gutter = element('canvas', 'display:block;border-radius:0', { 'aria-hidden': 'true' });
    this.scroller = element('div', 'overflow-x:auto;overflow-y:hidden;overscroll-behavior-x:contain;min-width:0');
    this.content = element('div', `position:relative;height:${stack}px;width:100%`);
    this.strip = element('div', 'position:sticky;left:0;top:0;display:flex;flex-direction:column');
    const laneStyle = 'display:block;border-radius:0;touch-action:pan-y;outline-offset:-2px';
    this.ruler = element('canvas', `${laneStyle};cursor:text`, { 'aria-hidden': 'true' });
    this.chordLane = element('canvas', `${laneStyle};cursor:pointer`, this._laneAttrs('Chord lane',
      'one chord per bar. Left and Right choose a bar, Enter edits its chord, Shift with Left or Right selects bars to loop.'));
    this.phraseLane = element('canvas', `${laneStyle};cursor:pointer`, this._laneAttrs('Phrase lane',
      'one phrase letter per bar. Left and Right choose a bar, Enter edits its phrase, Shift with Left or Right selects bars to loop.'));
    this.roll = element('canvas', 'display:block;border-radius:0;touch-action:pan-x pan-y',
      { role: 'img', 'aria-label': 'Piano roll: no piece loaded' });
    this.strip.append(this.ruler, this.chordLane, this.phraseLane, this.roll);
    this.content.append(this.strip);
    this.scroller.append(this.content);
    this.root.append(this.gutter, this.scroller);
    this.container.append(this.root);
    this._listen();
  }

  _laneAttrs(name, help) {
    return {
      tabindex: '0', role: 'slider', 'aria-orientation': 'horizontal', 'aria-label': `${name}: ${help}`,
      'aria-valuemin': '1', 'aria-valuemax': '1', 'aria-valuenow': '1', 'aria-valuetext': 'no piece loaded',
    };
  }

  _listen() {
    const targets = [[this.ruler, 'ruler'], [this.chordLane, 'chord'], [this.phraseLane, 'phrase'], [this.roll, 'roll']];
    for (const [canvas, kind] of targets) {
      canvas.addEventListener('pointerdown', (e) => this._pointerDown(e, kind));
      canvas.addEventListener('pointermove', (e) => this._pointerMove(e));
      canvas.addEventListener('pointerup', (e) => this._pointerUp(e));
      canvas.addEventListener('pointercancel', () => this._pointerCancel());
    }
    for (const [lane, kind] of [[this.chordLane, 'chord'], [this.phraseLane, 'phrase']]) {
      lane.addEventListener('keydown', (e) => this._laneKey(e, kind));
      lane.addEventListener('focus', () => this._schedule());
      lane.addEventListener('blur', () => this._schedule());
    }
    this.scroller.addEventListener('scroll', () => this._onScroll());
    this.scroller.addEventListener('wheel', (e) => this._onWheel(e), { passive: false });
    if (typeof ResizeObserver === 'function') {
      this._resize = new ResizeObserver(() => this._onResize());
      this._resize.observe(this.scroller);
    }
  }

  // --- state -----------------------------------------------------------------------------------

  /** Recomputes what depends on the notes and labels; runs at most once a frame. */
  _refresh() {
    this._stale = false;
    const p = this.piece;
    this._tracks = p.tracks
      .filter((t) => t.notes.length)
      .map((t) => ({ role: ROLE_COLOURS[t.role] ? t.role : 'other', index: noteIndex(t.notes) }))
      .sort((a, b) => DRAW_ORDER.indexOf(a.role) - DRAW_ORDER.indexOf(b.role));
    const fitted = fitPitchRange(p);
    // Streamed notes only widen the range: a keyboard that jumps while notes arrive is hard to read.
    this._range = this._keepRange
      ? [Math.min(fitted[0], this._range[0]), Math.max(fitted[1], this._range[1])]
      : fitted;
    this._keepRange = true;
    this._endTick = pieceEndTick(p);
    this._runs = phraseRuns(p.phrases ?? []);
    if (this._fitted && this.viewWidth) this.pxPerTick = clamp(this._fitZoom(), ...this._zoomLimits());
    this._layout();
    this._describe();
  }

  _describe() {
    const summary = rollSummary(this.piece);
    if (summary !== this._summary) this.roll.setAttribute('aria-label', (this._summary = summary));
    this._setCursor(this.cursorBar);
  }

  _setCursor(bar) {
    const p = this.piece;
    if (!p || !p.bars.length) return;
    this.cursorBar = clamp(bar, 0, p.bars.length - 1);
    const b = this.cursorBar;
    const planned = b >= (p.promptBars ?? p.bars.length) ? ' (planned)' : '';
    const where = `Bar ${b + 1} of ${p.bars.length}${planned}`;
    const texts = [
      [this.chordLane, `${where}: ${p.chords?.[b] || 'no chord'}`],
      [this.phraseLane, `${where}: phrase ${phraseAt(p.phrases ?? [], b) || 'none'}`],
    ];
    for (const [lane, text] of texts) {
      lane.setAttribute('aria-valuemax', String(p.bars.length));
      lane.setAttribute('aria-valuenow', String(b + 1));
      lane.setAttribute('aria-valuetext', text);
    }
    this._schedule();
  }

  // --- zoom and scroll -------------------------------------------------------------------------

  _fitZoom() {
    return Math.max(1, (this.viewWidth || 300) - END_PAD) / Math.max(1, this._endTick);
  }

  _zoomLimits() {
    const fit = this._fitZoom();
    return [fit, Math.max(fit, MAX_QUARTER_PX / (this.piece?.ppq ?? 480))];
  }

  /** Whole piece when its bars stay wide enough for chord symbols, else that width from bar 1. */
  _openingZoom() {
    const legible = MIN_BAR_PX / barLength(this.piece, 0);
    const fit = this._fitZoom();
    this._fitted = fit >= legible;
    this.pxPerTick = clamp(Math.max(fit, legible), ...this._zoomLimits());
    this._layout();
    this._scrollTo(0);
  }

  _zoomBy(factor, anchorX = this.viewWidth / 2) {
    if (!this.piece) return;
    this._fitted = false;
    this._setZoom(this.pxPerTick * factor, anchorX);
  }

  _setZoom(pxPerTick, anchorX) {
    const next = clamp(pxPerTick, ...this._zoomLimits());
    const scroll = zoomAround(this.pxPerTick, next, this.scroller.scrollLeft, anchorX);
    this.pxPerTick = next;
    this._layout();
    this._scrollTo(scroll);
    this._schedule();
  }

  _layout() {
    const width = Math.max(this.viewWidth, Math.ceil(this._endTick * this.pxPerTick) + END_PAD);
    this.content.style.width = `${width}px`;
    this.strip.style.width = `${this.viewWidth}px`;
  }

  /** A scroll the roll makes itself (following the playhead, zooming): not the user looking away. */
  _scrollTo(x) {
    this.scroller.scrollLeft = Math.max(0, x);
    this._expectScroll = this.scroller.scrollLeft;
    this._schedule();
  }

  _keepInView(tick) {
    const x = tickToX(tick, this.pxPerTick, this.scroller.scrollLeft);
    // Page forward rather than scroll every frame: the notes stay still while they play.
    if (x < 0 || x > this.viewWidth * 0.85) this._scrollTo(tick * this.pxPerTick - this.viewWidth * 0.15);
  }

  _inView(tick) {
    const x = tickToX(tick, this.pxPerTick, this.scroller.scrollLeft);
    return x >= 0 && x <= this.viewWidth;
  }

  _revealBar(bar) {
    const p = this.piece;
    const left = p.bars[bar] * this.pxPerTick;
    const right = barEnd(p, bar) * this.pxPerTick;
    const x = this.scroller.scrollLeft;
    if (left < x) this.scroller.scrollLeft = left - 8;
    else if (right > x + this.viewWidth) this.scroller.scrollLeft = Math.min(left - 8, right - this.viewWidth + 8);
  }

  _onScroll() {
    const x = this.scroller.scrollLeft;
    // The user scrolled: follow the playhead only while they keep it in view.
    if (Math.abs(x - this._expectScroll) > 1 && this.playhead != null) this._follow = this._inView(this.playhead);
    this._expectScroll = -1;
    this._schedule();
  }

  _onWheel(e) {
    const unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? this.viewWidth : 1;
    if (e.ctrlKey || e.metaKey) {
      // Ctrl+wheel, and a trackpad pinch (which browsers report as ctrl+wheel), zoom at the cursor.
      e.preventDefault();
      const anchor = e.clientX - this.scroller.getBoundingClientRect().left;
      this._zoomBy(Math.exp(-e.deltaY * unit * 0.0015), anchor);
      return;
    }
    if (Math.abs(e.deltaX) >= Math.abs(e.deltaY)) return; // already horizontal: native scrolling
    const max = this.scroller.scrollWidth - this.scroller.clientWidth;
    const next = clamp(this.scroller.scrollLeft + e.deltaY * unit, 0, max);
    if (next === this.scroller.scrollLeft) return; // at an end: let the page scroll instead
    e.preventDefault();
    this.scroller.scrollLeft = next;
  }

  _onResize() {
    if (!this._measure()) return;
    this._schedule();
    this.flush(); // resized canvases are blank: draw before this frame is painted
  }

  /** Takes in a new view width (the first one, for a piece set while hidden); true if it changed. */
  _measure() {
    const width = this.scroller.clientWidth;
    if (width === this.viewWidth) return false;
    this.viewWidth = width;
    if (this.piece && this._zoomPending && width) {
      this._zoomPending = false;
      this._openingZoom();
    } else if (this.piece && this._fitted) {
      this.pxPerTick = clamp(this._fitZoom(), ...this._zoomLimits());
    }
    this._layout();
    return true;
  }

  // --- pointer and keyboard --------------------------------------------------------------------

  _tickAtClient(clientX) {
    const x = clientX - this.strip.getBoundingClientRect().left;
    return xToTick(x, this.pxPerTick, this.scroller.scrollLeft);
  }

  _barAtTick(tick) {
    const p = this.piece;
    if (!p.bars.length || tick < p.bars[0] || tick >= barEnd(p, p.bars.length - 1)) return -1;
    return barAt(p, tick);
  }

  _pointerDown(e, kind) {
    if (!this.piece || e.button !== 0 || (kind !== 'roll' && !this.piece.bars.length)) return;
    let mode = 'bars';
    if (kind === 'roll') mode = e.shiftKey ? 'beats' : e.pointerType === 'mouse' ? 'pan' : 'click';
    if (mode !== 'click') e.currentTarget.setPointerCapture?.(e.pointerId);
    this._drag = {
      kind, mode, startX: e.clientX, tick: this._tickAtClient(e.clientX),
      scroll: this.scroller.scrollLeft, moved: false, before: this.selection,
    };
  }

  _pointerMove(e) {
    const d = this._drag;
    if (!d) return;
    const dx = e.clientX - d.startX;
    if (!d.moved && Math.abs(dx) < DRAG_PX) return;
    d.moved = true;
    if (d.mode === 'pan') {
      this.scroller.scrollLeft = d.scroll - dx;
      return;
    }
    if (d.mode === 'click') return;
    this._edgeScroll(e.clientX);
    const tick = this._tickAtClient(e.clientX);
    this.selection = d.mode === 'bars'
      ? barSpan(this.piece, d.tick, tick)
      : beatSpan(this.piece, d.tick, tick, this._endTick);
    this._schedule();
  }

  /** While selecting past an edge of the view, scroll towards it. */
  _edgeScroll(clientX) {
    const rect = this.strip.getBoundingClientRect();
    const over = clientX < rect.left ? clientX - rect.left : clientX > rect.right ? clientX - rect.right : 0;
    if (over) this.scroller.scrollLeft += over;
  }

  _pointerUp() {
    const d = this._drag;
    if (!d) return;
    this._drag = null;
    if (!d.moved) {
      this._click(d);
      return;
    }
    if (d.mode !== 'bars' && d.mode !== 'beats') return;
    const s = this.selection;
    if (s && s[1] > s[0]) {
      this.callbacks.onSelect?.(s[0], s[1]);
    } else {
      this.selection = d.before;
      this._schedule();
    }
  }

  _pointerCancel() {
    if (this._drag && (this._drag.mode === 'bars' || this._drag.mode === 'beats')) this.selection = this._drag.before;
    this._drag = null;
    this._schedule();
  }

  _click(d) {
    if (d.kind === 'chord' || d.kind === 'phrase') {
      const bar = this._barAtTick(d.tick);
      if (bar < 0) return;
      this._setCursor(bar);
      if (d.kind === 'chord') this.callbacks.onChordClick?.(bar);
      else this.callbacks.onPhraseClick?.(bar);
      return;
    }
    this._follow = true;
    this.callbacks.onSeek?.(Math.round(clamp(d.tick, 0, this._endTick)));
  }

  _laneKey(e, kind) {
    const p = this.piece;
    if (!p || !p.bars.length || e.altKey || e.ctrlKey || e.metaKey) return;
    const bar = this.cursorBar;
    if (e.key === 'Enter') {
      e.preventDefault();
      if (kind === 'chord') this.callbacks.onChordClick?.(bar);
      else this.callbacks.onPhraseClick?.(bar);
      return;
    }
    if (e.key === 'Escape' && this.selection) {
      e.preventDefault();
      this.clearSelection();
      this.callbacks.onSelect?.(null, null);
      return;
    }
    const last = p.bars.length - 1;
    const moves = { ArrowLeft: bar - 1, ArrowRight: bar + 1, Home: 0, End: last, PageUp: bar - 4, PageDown: bar + 4 };
    if (!Object.hasOwn(moves, e.key)) return;
    e.preventDefault();
    const next = clamp(moves[e.key], 0, last);
    if (e.shiftKey) {
      this._anchor ??= bar;
      this.selection = barSpan(p, p.bars[this._anchor], p.bars[next]);
      this.callbacks.onSelect?.(...this.selection);
    } else {
      this._anchor = null;
    }
    this._setCursor(next);
    this._revealBar(next);
  }

  // --- drawing ---------------------------------------------------------------------------------

  _schedule() {
    if (!this._frame) this._frame = requestAnimationFrame(() => this._draw());
  }

  _draw() {
    this._frame = 0;
    if (!this.viewWidth) this._measure();
    if (!this.viewWidth) return; // hidden: the resize observer draws once it shows
    if (this.piece && this._stale) this._refresh();
    const px = this.pxPerTick;
    const x0 = this.scroller.scrollLeft;
    const w = this.viewWidth;
    const v = { px, x0, w, t0: xToTick(0, px, x0), t1: xToTick(w, px, x0), dpr: globalThis.devicePixelRatio || 1 };
    this._drawGutter(v);
    this._drawRuler(v);
    this._drawChords(v);
    this._drawPhrases(v);
    this._drawRoll(v);
  }

  _visibleBars(v) {
    const p = this.piece;
    return [barAt(p, Math.max(0, v.t0)), barAt(p, v.t1)];
  }

  _hatch(ctx, v) {
    let pattern = this._patterns.get(ctx);
    if (!pattern) {
      const tile = element('canvas', '');
      tile.width = tile.height = 8;
      const g = tile.getContext('2d');
      g.strokeStyle = 'rgba(255, 255, 255, 0.09)';
      g.lineWidth = 1.5;
      g.beginPath();
      for (const o of [-8, 0, 8]) {
        g.moveTo(o, 8);
        g.lineTo(o + 8, 0);
      }
      g.stroke();
      pattern = ctx.createPattern(tile, 'repeat');
      this._patterns.set(ctx, pattern);
    }
    // Hatches scroll with the music instead of sliding under it.
    pattern.setTransform?.(new DOMMatrix([1, 0, 0, 1, -(v.x0 % 8), 0]));
    return pattern;
  }

  /** Dims and hatches the bars after the prompt: their labels only plan what gets generated. */
  _drawPlanned(ctx, v, h, dim) {
    const p = this.piece;
    const prompt = p.promptBars ?? p.bars.length;
    if (prompt >= p.bars.length) return;
    const x = Math.max(0, tickToX(p.bars[prompt], v.px, v.x0));
    if (x >= v.w) return;
    ctx.fillStyle = `rgba(20, 22, 27, ${dim})`;
    ctx.fillRect(x, 0, v.w - x, h);
    ctx.fillStyle = this._hatch(ctx, v);
    ctx.fillRect(x, 0, v.w - x, h);
  }

  _drawSelection(ctx, v, h, alpha) {
    const s = this.selection;
    if (!s) return;
    const a = tickToX(s[0], v.px, v.x0);
    const b = tickToX(s[1], v.px, v.x0);
    if (b < 0 || a > v.w) return;
    ctx.fillStyle = `rgba(93, 211, 158, ${alpha})`;
    ctx.fillRect(a, 0, b - a, h);
    ctx.fillStyle = THEME.ok;
    ctx.fillRect(Math.round(a), 0, 1, h);
    ctx.fillRect(Math.round(b) - 1, 0, 1, h);
  }

  _drawGenerating(ctx, v, h, asBar) {
    const g = this.generating;
    if (!g) return;
    const a = tickToX(g.fromTick, v.px, v.x0);
    const b = tickToX(g.toTick, v.px, v.x0);
    const done = a + (b - a) * clamp(g.progress ?? 0, 0, 1);
    if (b < 0 || a > v.w) return;
    if (asBar) {
      ctx.fillStyle = 'rgba(180, 140, 255, 0.25)';
      ctx.fillRect(a, h - 3, b - a, 3);
      ctx.fillStyle = ROLE_COLOURS.generated;
      ctx.fillRect(a, h - 3, done - a, 3);
      return;
    }
    ctx.fillStyle = 'rgba(180, 140, 255, 0.07)';
    ctx.fillRect(a, 0, b - a, h);
    ctx.fillStyle = 'rgba(180, 140, 255, 0.08)';
    ctx.fillRect(a, 0, done - a, h);
    ctx.fillStyle = ROLE_COLOURS.generated;
    ctx.fillRect(Math.round(done) - 1, 0, 2, h);
  }

  _drawPlayhead(ctx, v, h) {
    if (this.playhead == null) return;
    const x = tickToX(this.playhead, v.px, v.x0);
    if (x < -1 || x > v.w + 1) return;
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(Math.round(x) - 0.5, 0, 1.5, h);
  }

  _drawGutter(v) {
    const ctx = sizeCanvas(this.gutter, GUTTER, LANES_H + this.rollHeight, v.dpr);
    ctx.fillStyle = THEME.panel;
    ctx.fillRect(0, 0, GUTTER, LANES_H);
    ctx.font = `10px ${FONT}`;
    ctx.textBaseline = 'middle';
    ctx.fillStyle = THEME.muted;
    ctx.fillText('Bar', 4, RULER_H / 2);
    ctx.fillText('Chord', 4, RULER_H + CHORD_H / 2);
    ctx.fillText('Phrase', 4, RULER_H + CHORD_H + PHRASE_H / 2);
    this._drawKeyboard(ctx, LANES_H);
  }

  _drawKeyboard(ctx, top) {
    const [lo, hi] = this._range;
    const rh = this.rollHeight / (hi - lo + 1);
    ctx.fillStyle = '#cfccc6';
    ctx.fillRect(0, top, GUTTER, this.rollHeight);
    ctx.textAlign = 'right';
    ctx.font = `9px ${FONT}`;
    for (let pitch = lo; pitch <= hi; pitch++) {
      const y = top + (hi - pitch) * rh;
      if (BLACK_KEYS.has(pitch % 12)) {
        ctx.fillStyle = '#2a2d35';
        ctx.fillRect(0, y, GUTTER * 0.6, rh);
      } else if (pitch % 12 === 0 || pitch % 12 === 5) {
        ctx.fillStyle = '#8b8880'; // the white-white boundaries below C and F
        ctx.fillRect(0, y + rh - 0.5, GUTTER, 0.5);
      }
      if (pitch % 12 === 0) {
        ctx.fillStyle = THEME.panel;
        ctx.fillText(pitchName(pitch), GUTTER - 3, y + rh / 2);
      }
    }
    ctx.fillStyle = THEME.line;
    ctx.fillRect(GUTTER - 1, top, 1, this.rollHeight);
    ctx.textAlign = 'start';
  }

  _drawRuler(v) {
    const ctx = sizeCanvas(this.ruler, v.w, RULER_H, v.dpr);
    ctx.fillStyle = THEME.panel;
    ctx.fillRect(0, 0, v.w, RULER_H);
    const p = this.piece;
    if (!p || !p.bars.length) return;
    this._drawPlanned(ctx, v, RULER_H, 0.3);
    this._drawSelection(ctx, v, RULER_H, 0.25);
    this._drawGenerating(ctx, v, RULER_H, true);
    ctx.font = `11px ${FONT}`;
    ctx.textBaseline = 'middle';
    const prompt = p.promptBars ?? p.bars.length;
    let labelEnd = -Infinity;
    if (prompt < p.bars.length && tickToX(p.bars[prompt], v.px, v.x0) < 0) {
      labelEnd = this._rulerLabel(ctx, 'planned', 3, THEME.muted); // scrolled into the plan: keep its name
    }
    const step = labelStep(barLength(p, 0) * v.px, 24);
    const [b0, b1] = this._visibleBars(v);
    for (let b = b0; b <= b1; b++) {
      const x = Math.round(tickToX(p.bars[b], v.px, v.x0));
      const labelled = b % step === 0 || b === prompt;
      ctx.fillStyle = THEME.bar;
      ctx.fillRect(x, labelled ? 3 : RULER_H - 6, 1, RULER_H);
      if (!labelled || x + 3 < labelEnd + 4) continue;
      const text = b === prompt ? `${b + 1} planned` : String(b + 1);
      labelEnd = this._rulerLabel(ctx, text, x + 3, b >= prompt ? THEME.muted : THEME.text);
    }
    this._drawPlayhead(ctx, v, RULER_H);
  }

  _rulerLabel(ctx, text, x, colour) {
    ctx.fillStyle = colour;
    ctx.fillText(text, x, RULER_H / 2 + 0.5);
    return x + ctx.measureText(text).width;
  }

  _laneFrame(canvas, h, v) {
    const ctx = sizeCanvas(canvas, v.w, h, v.dpr);
    ctx.fillStyle = THEME.bg;
    ctx.fillRect(0, 0, v.w, h);
    return ctx;
  }

  _drawChords(v) {
    const h = CHORD_H;
    const ctx = this._laneFrame(this.chordLane, h, v);
    const p = this.piece;
    if (!p || !p.bars.length) return;
    const [b0, b1] = this._visibleBars(v);
    ctx.fillStyle = THEME.panel;
    for (let b = b0; b <= b1; b++) {
      const x = tickToX(p.bars[b], v.px, v.x0);
      ctx.fillRect(x + 1, 2, barLength(p, b) * v.px - 2, h - 4);
    }
    this._drawPlanned(ctx, v, h, 0.35);
    this._drawSelection(ctx, v, h, 0.14);
    ctx.font = `600 12px ${FONT}`;
    ctx.textAlign = 'center';
    ctx.textBaseline = 'middle';
    const prompt = p.promptBars ?? p.bars.length;
    for (let b = b0; b <= b1; b++) {
      const x = tickToX(p.bars[b], v.px, v.x0);
      const w = barLength(p, b) * v.px;
      let text = p.chords?.[b] || '·';
      if (ctx.measureText(text).width > w - 4) text = w >= 12 ? '…' : '';
      ctx.fillStyle = b >= prompt ? THEME.muted : THEME.text;
      ctx.fillText(text, x + w / 2, h / 2 + 0.5);
    }
    ctx.textAlign = 'start';
    this._drawCursor(ctx, v, h, this.chordLane);
    this._drawPlayhead(ctx, v, h);
  }

  _drawPhrases(v) {
    const h = PHRASE_H;
    const ctx = this._laneFrame(this.phraseLane, h, v);
    const p = this.piece;
    if (!p || !p.bars.length) return;
    ctx.font = `600 11px ${FONT}`;
    ctx.textBaseline = 'middle';
    const lastBar = p.bars.length - 1;
    for (const run of this._runs) {
      if (run.from > lastBar) break;
      const a = tickToX(p.bars[run.from], v.px, v.x0);
      const b = tickToX(barEnd(p, Math.min(run.to, lastBar + 1) - 1), v.px, v.x0);
      if (b < 0 || a > v.w) continue;
      this._drawRun(ctx, v, run, a, b, h);
    }
    this._drawPlanned(ctx, v, h, 0.35);
    this._drawSelection(ctx, v, h, 0.14);
    this._drawCursor(ctx, v, h, this.phraseLane);
    this._drawPlayhead(ctx, v, h);
  }

  /** One phrase: a pill over its bars, faint ticks at its inner bar lines, the letter kept in view. */
  _drawRun(ctx, v, run, a, b, h) {
    const p = this.piece;
    const colour = phraseColour(run.letter);
    ctx.beginPath();
    if (ctx.roundRect) ctx.roundRect(a + 1.5, 2.5, b - a - 3, h - 5, 5);
    else ctx.rect(a + 1.5, 2.5, b - a - 3, h - 5);
    ctx.fillStyle = colour.fill;
    ctx.fill();
    ctx.strokeStyle = colour.stroke;
    ctx.lineWidth = 1;
    ctx.stroke();
    ctx.fillStyle = colour.stroke;
    for (let bar = run.from + 1; bar < run.to && bar < p.bars.length; bar++) {
      const x = Math.round(tickToX(p.bars[bar], v.px, v.x0));
      if (x >= 0 && x <= v.w) ctx.fillRect(x, h - 7, 1, 3);
    }
    const tx = Math.max(a, 0) + 6;
    if (tx + 8 < b) {
      ctx.fillStyle = colour.text;
      ctx.fillText(run.letter, tx, h / 2 + 0.5);
    }
  }

  /** The keyboard cursor's bar, outlined while its lane has focus. */
  _drawCursor(ctx, v, h, lane) {
    if (document.activeElement !== lane) return;
    const p = this.piece;
    const a = tickToX(p.bars[this.cursorBar], v.px, v.x0);
    const w = barLength(p, this.cursorBar) * v.px;
    // Inside the browser's focus ring and in another colour, so the two do not merge.
    ctx.fillStyle = 'rgba(255, 255, 255, 0.10)';
    ctx.fillRect(a + 3, 3, Math.max(2, w - 6), h - 6);
    ctx.strokeStyle = '#ffd699';
    ctx.lineWidth = 2;
    ctx.strokeRect(a + 4, 4, Math.max(2, w - 8), h - 8);
  }

  _drawRoll(v) {
    const h = this.rollHeight;
    const ctx = sizeCanvas(this.roll, v.w, h, v.dpr);
    this._drawRows(ctx, v, h);
    const p = this.piece;
    if (!p) {
      ctx.fillStyle = THEME.muted;
      ctx.font = `13px ${FONT}`;
      ctx.fillText('No piece loaded', 12, 24);
      return;
    }
    if (p.bars.length) this._drawPlanned(ctx, v, h, 0.25);
    this._drawGrid(ctx, v, h);
    this._drawGenerating(ctx, v, h, false);
    this._drawSelection(ctx, v, h, 0.1);
    this._drawNotes(ctx, v);
    this._drawPlayhead(ctx, v, h);
  }

  /** Pitch rows: darker for black keys, a line under every C. */
  _drawRows(ctx, v, h) {
    const [lo, hi] = this._range;
    const rh = h / (hi - lo + 1);
    ctx.fillStyle = THEME.white;
    ctx.fillRect(0, 0, v.w, h);
    for (let pitch = lo; pitch <= hi; pitch++) {
      const y = (hi - pitch) * rh;
      if (BLACK_KEYS.has(pitch % 12)) {
        ctx.fillStyle = THEME.black;
        ctx.fillRect(0, y, v.w, rh);
      } else if (pitch % 12 === 0) {
        ctx.fillStyle = THEME.line;
        ctx.fillRect(0, y + rh - 1, v.w, 1);
      }
    }
  }

  /** Beat lines (when at least 6 px apart), then stronger bar lines. */
  _drawGrid(ctx, v, h) {
    const p = this.piece;
    const beats = beatTicks(p, Math.max(0, v.t0), v.t1);
    if (beats.length && beats.length * 6 <= v.w) {
      ctx.fillStyle = THEME.beat;
      for (const t of beats) ctx.fillRect(Math.round(tickToX(t, v.px, v.x0)), 0, 1, h);
    }
    if (!p.bars.length) return;
    const [b0, b1] = this._visibleBars(v);
    ctx.fillStyle = THEME.bar;
    for (let b = b0; b <= b1 + 1 && b <= p.bars.length; b++) {
      const t = b < p.bars.length ? p.bars[b] : barEnd(p, b - 1);
      ctx.fillRect(Math.round(tickToX(t, v.px, v.x0)), 0, 1, h);
    }
  }

  /** Notes of the visible ticks, one path per track and velocity band (8 fills per track, not one per note). */
  _drawNotes(ctx, v) {
    const [lo, hi] = this._range;
    const rh = this.rollHeight / (hi - lo + 1);
    const nh = Math.max(1, rh - 1);
    for (const track of this._tracks) {
      const paths = new Array(8).fill(null);
      const notes = track.index.notes;
      const [i0, i1] = visibleNotes(track.index, v.t0, v.t1);
      for (let i = i0; i < i1; i++) {
        const n = notes[i];
        if (n[2] <= v.t0 || n[0] < lo || n[0] > hi) continue;
        const x = n[1] * v.px - v.x0;
        const w = Math.max(1.5, (n[2] - n[1]) * v.px - 1);
        const band = Math.min(7, Math.max(0, n[3] >> 4));
        addNoteRect((paths[band] ??= new Path2D()), x, (hi - n[0]) * rh + 0.5, w, nh);
      }
      ctx.fillStyle = this.colours[track.role];
      paths.forEach((path, band) => {
        if (!path) return;
        ctx.globalAlpha = 0.35 + (0.65 * (band * 16 + 8)) / 127; // velocity → alpha
        ctx.fill(path);
      });
      ctx.globalAlpha = 1;
    }
  }
}
