// Piano roll with chord and phrase lanes: the page's main view of a piece (see piece.js).
//
// Layout: a fixed gutter (lane names, the keyboard) beside a horizontal scroller. The scroller
// holds a spacer as wide as the whole piece at the current zoom, so the native scrollbar and
// touch panning work, and a sticky strip of viewport-wide canvases redrawn for the visible ticks
// only: a canvas as wide as a zoomed-in piece would pass the browser's canvas size limit, and
// drawing only what shows keeps a 5000-note piece fast.
// This file owns the PianoRoll's state, public API, building, zoom and scroll; the pure
// geometry is in roll-geometry.js (re-exported here for the Node tests). The roll is composed
// of three parts, each given the roll and reading its state through it: a RollDrawing
// (roll-draw.js) draws it, a RollInput (roll-input.js) takes its pointer, wheel and lane keys,
// a NoteEditor (roll-edit.js) edits notes. Nothing touches the DOM until a PianoRoll is
// constructed.
import { barEnd, barLength } from './piece.js';
import {
  ROLE_COLOURS, DRAW_ORDER, ROLL_H, LANES_H, VELOCITY_H, PEDAL_H, GUTTER, MIN_BAR_PX, MAX_QUARTER_PX, END_PAD, clamp,
  zoomAround, pieceEndTick, fitPitchRange, noteIndex, phraseRuns, phraseAt, rollSummary, tickToX, xToTick,
} from './roll-geometry.js';
import { RollDrawing, element, readColours } from './roll-draw.js';
import { RollInput } from './roll-input.js';
import { NoteEditor } from './roll-edit.js';

export {
  ROLE_COLOURS, DRAW_ORDER, tickToX, xToTick, zoomAround, pieceEndTick, fitPitchRange, noteIndex,
  lowerBound, visibleNotes, beatTicks, snapToBeat, barSpan, beatSpan, phraseRuns, phraseAt,
  phraseColour, labelStep, pitchName, rollSummary,
} from './roll-geometry.js';

export class PianoRoll {
  /**
   * callbacks: { onChordClick(bar), onPhraseClick(bar), onSeek(tick), onSelect(fromTick, toTick),
   * onEdit(piece, { touched: [fromBar, toBar] }), onNotice(text), quantise() }
   * (onSelect(null, null) when the user clears the selection with Escape; onEdit when notes
   * were edited, with the new piece; quantise() the grid setting, notes per quarter).
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
    this.follow = true;
    this.expectScroll = -1;
    this._frame = 0;
    this._stale = false;
    this._keepRange = false;
    this.tracks = [];
    this.runs = [];
    this.range = [48, 72];
    this.endTick = 0;
    this._summary = '';
    this.colours = readColours(container);
    this.drawing = new RollDrawing(this);
    this.input = new RollInput(this);
    this.editor = new NoteEditor(this);
    this._build();
  }

  // --- public API ------------------------------------------------------------------------------

  /** Shows `piece` (or nothing for null): refits the pitch range and the opening zoom. */
  setPiece(piece) {
    this.editor.cancel();
    this.editor.pieceChanged(null);
    this.piece = piece;
    this.selection = null;
    this.input.pieceChanged();
    this.cursorBar = 0;
    this._keepRange = false;
    if (!piece) {
      this._summary = '';
      this.roll.setAttribute('aria-label', 'Piano roll: no piece loaded');
      for (const lane of [this.chordLane, this.phraseLane]) lane.setAttribute('aria-valuetext', 'no piece loaded');
      this.schedule();
      return;
    }
    this._refresh();
    this.viewWidth = this.scroller.clientWidth;
    this._zoomPending = !this.viewWidth; // laid out later: the resize observer opens the zoom
    if (this.viewWidth) this._openingZoom();
    this.setCursor(0);
    this.schedule();
  }

  /**
   * Shows `piece` in place of the current one keeping the view (zoom, scroll, loop selection,
   * cursor, pitch range, the selected notes still in it): an edit, an undo.
   */
  replacePiece(piece) {
    if (!piece || !this.piece) {
      this.setPiece(piece);
      return;
    }
    this.editor.cancel();
    this.piece = piece;
    this.editor.pieceChanged(piece);
    this._stale = true;
    this.schedule();
  }

  /** Turns note editing with the pointer and keyboard on or off (see roll-edit.js). */
  setEditing(on) {
    this.editor.cancel();
    this.editor.on = !!on;
    if (!on) this.editor.selection = new Set();
    this.roll.style.cursor = on ? 'crosshair' : '';
    this.velocityLane.style.cursor = on ? 'ns-resize' : '';
    this.pedalLane.style.cursor = on ? 'col-resize' : '';
    this.schedule();
  }

  /**
   * Client coordinates of `tick` at `pitch` in the roll (the middle of its row), or with a null
   * pitch at `velocity` in the velocity lane.
   */
  clientPoint(tick, pitch, velocity = 64) {
    this.settle();
    const x = this.strip.getBoundingClientRect().left + tickToX(tick, this.pxPerTick, this.scroller.scrollLeft);
    if (pitch == null) {
      const lane = this.velocityLane.getBoundingClientRect();
      return { x, y: lane.top + lane.height * (1 - velocity / 127) };
    }
    const [lo, hi] = this.range;
    const rh = this.rollHeight / (hi - lo + 1);
    return { x, y: this.roll.getBoundingClientRect().top + (hi - pitch + 0.5) * rh };
  }

  /** Client coordinates of `tick` in the pedal lane (its middle). */
  pedalPoint(tick) {
    this.settle();
    const x = this.strip.getBoundingClientRect().left + tickToX(tick, this.pxPerTick, this.scroller.scrollLeft);
    const lane = this.pedalLane.getBoundingClientRect();
    return { x, y: lane.top + lane.height / 2 };
  }

  /** The notes selected for editing (note arrays of the current piece). */
  selectedNotes() {
    return [...this.editor.selection];
  }

  /** Redraws after the piece was changed in place (notes streamed in, labels edited). */
  update() {
    if (!this.piece) return;
    this._stale = true;
    this.schedule();
  }

  /** Moves the playhead (null hides it). While it moves the view follows it, until the user scrolls away. */
  setPlayhead(tick) {
    const was = this.playhead;
    this.playhead = tick ?? null;
    if (this.playhead != null) {
      // Follow from the start of playback, and again once the playhead walks back into view.
      if (was == null || this.inView(this.playhead)) this.follow = true;
      if (this.follow) this.keepInView(this.playhead);
    }
    this.schedule();
  }

  /** The loop range [fromTick, toTick], or null. */
  getSelection() {
    return this.selection ? [...this.selection] : null;
  }

  /** Sets the loop range without calling onSelect (e.g. restoring a saved one); null clears. */
  setSelection(range) {
    this.selection = range && range[1] > range[0] ? [range[0], range[1]] : null;
    this.schedule();
  }

  clearSelection() {
    this.setSelection(null);
  }

  /** Shades { fromTick, toTick, progress (0..1) } as being written by a model; null removes it. */
  setGenerating(state) {
    this.generating = state ? { ...state } : null;
    this.schedule();
  }

  zoomIn() {
    this.zoomBy(1.5);
  }

  zoomOut() {
    this.zoomBy(1 / 1.5);
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
    const stack = LANES_H + this.rollHeight + VELOCITY_H + PEDAL_H;
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
    this.roll = element('canvas', 'display:block;border-radius:0;touch-action:pan-x pan-y;outline-offset:-2px',
      { role: 'img', tabindex: '0', 'aria-label': 'Piano roll: no piece loaded' });
    this.velocityLane = element('canvas', 'display:block;border-radius:0;touch-action:pan-y',
      { 'aria-hidden': 'true' });
    this.pedalLane = element('canvas', 'display:block;border-radius:0;touch-action:pan-y',
      { 'aria-hidden': 'true' });
    this.strip.append(this.ruler, this.chordLane, this.phraseLane, this.roll, this.velocityLane, this.pedalLane);
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
    const targets = [
      [this.ruler, 'ruler'], [this.chordLane, 'chord'], [this.phraseLane, 'phrase'], [this.roll, 'roll'],
      [this.velocityLane, 'velocity'], [this.pedalLane, 'pedal'],
    ];
    for (const [canvas, kind] of targets) {
      canvas.addEventListener('pointerdown', (e) => this.input.pointerDown(e, kind));
      canvas.addEventListener('pointermove', (e) => this.input.pointerMove(e));
      canvas.addEventListener('pointerup', (e) => this.input.pointerUp(e));
      canvas.addEventListener('pointercancel', () => this.input.pointerCancel());
    }
    for (const [lane, kind] of [[this.chordLane, 'chord'], [this.phraseLane, 'phrase']]) {
      lane.addEventListener('keydown', (e) => this.input.laneKey(e, kind));
      lane.addEventListener('focus', () => this.schedule());
      lane.addEventListener('blur', () => this.schedule());
    }
    this.roll.addEventListener('keydown', (e) => {
      if (this.editor.on && this.editor.key(e)) {
        e.preventDefault();
        e.stopPropagation();
      }
    });
    this.scroller.addEventListener('scroll', () => this.input.onScroll());
    this.scroller.addEventListener('wheel', (e) => this.input.onWheel(e), { passive: false });
    if (typeof ResizeObserver === 'function') {
      this._resize = new ResizeObserver(() => this.input.onResize());
      this._resize.observe(this.scroller);
    }
  }

  // --- state -----------------------------------------------------------------------------------

  /** Recomputes what depends on the notes and labels; runs at most once a frame. */
  _refresh() {
    this._stale = false;
    const p = this.piece;
    this.tracks = p.tracks
      .filter((t) => t.notes.length)
      .map((t) => ({ role: ROLE_COLOURS[t.role] ? t.role : 'other', index: noteIndex(t.notes) }))
      .sort((a, b) => DRAW_ORDER.indexOf(a.role) - DRAW_ORDER.indexOf(b.role));
    const fitted = fitPitchRange(p);
    // Streamed notes only widen the range: a keyboard that jumps while notes arrive is hard to read.
    this.range = this._keepRange
      ? [Math.min(fitted[0], this.range[0]), Math.max(fitted[1], this.range[1])]
      : fitted;
    this._keepRange = true;
    this.endTick = pieceEndTick(p);
    this.runs = phraseRuns(p.phrases ?? []);
    if (this._fitted && this.viewWidth) this.pxPerTick = clamp(this._fitZoom(), ...this._zoomLimits());
    this._layout();
    this._describe();
  }

  _describe() {
    const summary = rollSummary(this.piece);
    if (summary !== this._summary) this.roll.setAttribute('aria-label', (this._summary = summary));
    this.setCursor(this.cursorBar);
  }

  setCursor(bar) {
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
    this.schedule();
  }

  // --- zoom and scroll -------------------------------------------------------------------------

  _fitZoom() {
    return Math.max(1, (this.viewWidth || 300) - END_PAD) / Math.max(1, this.endTick);
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

  zoomBy(factor, anchorX = this.viewWidth / 2) {
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
    this.schedule();
  }

  _layout() {
    const width = Math.max(this.viewWidth, Math.ceil(this.endTick * this.pxPerTick) + END_PAD);
    this.content.style.width = `${width}px`;
    this.strip.style.width = `${this.viewWidth}px`;
  }

  /** A scroll the roll makes itself (following the playhead, zooming): not the user looking away. */
  _scrollTo(x) {
    this.scroller.scrollLeft = Math.max(0, x);
    this.expectScroll = this.scroller.scrollLeft;
    this.schedule();
  }

  /** Scrolls a page forward (or back) when `tick` leaves the view. */
  keepInView(tick) {
    const x = tickToX(tick, this.pxPerTick, this.scroller.scrollLeft);
    // Page forward rather than scroll every frame: the notes stay still while they play.
    if (x < 0 || x > this.viewWidth * 0.85) this._scrollTo(tick * this.pxPerTick - this.viewWidth * 0.15);
  }

  /** Whether `tick` is in the visible part of the roll. */
  inView(tick) {
    const x = tickToX(tick, this.pxPerTick, this.scroller.scrollLeft);
    return x >= 0 && x <= this.viewWidth;
  }

  /** Scrolls just enough to show `bar` whole. */
  revealBar(bar) {
    const p = this.piece;
    const left = p.bars[bar] * this.pxPerTick;
    const right = barEnd(p, bar) * this.pxPerTick;
    const x = this.scroller.scrollLeft;
    if (left < x) this.scroller.scrollLeft = left - 8;
    else if (right > x + this.viewWidth) this.scroller.scrollLeft = Math.min(left - 8, right - this.viewWidth + 8);
  }

  /** Takes in a new view width (the first one, for a piece set while hidden); true if it changed. */
  measure() {
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

  /**
   * Brings the geometry up to date now rather than at the next frame: the opening zoom of a
   * piece set while the roll was hidden (else left to the resize observer), the canvases' sizes
   * and a pitch range the last edit widened (the pending draw). Coordinates taken before it
   * would place a note where it will not be.
   */
  settle() {
    if (this.piece && this._zoomPending) this.measure();
    this.flush();
  }

  /** The tick under client x coordinate `clientX`. */
  tickAtClient(clientX) {
    const x = clientX - this.strip.getBoundingClientRect().left;
    return xToTick(x, this.pxPerTick, this.scroller.scrollLeft);
  }

  /** While selecting past an edge of the view, scroll towards it. */
  edgeScroll(clientX) {
    const rect = this.strip.getBoundingClientRect();
    const over = clientX < rect.left ? clientX - rect.left : clientX > rect.right ? clientX - rect.right : 0;
    if (over) this.scroller.scrollLeft += over;
  }

  // --- drawing ---------------------------------------------------------------------------------

  /** Draws at the next animation frame (once, however often it is asked). */
  schedule() {
    if (!this._frame) this._frame = requestAnimationFrame(() => this._draw());
  }

  _draw() {
    this._frame = 0;
    if (!this.viewWidth) this.measure();
    if (!this.viewWidth) return; // hidden: the resize observer draws once it shows
    if (this.piece && this._stale) this._refresh();
    const px = this.pxPerTick;
    const x0 = this.scroller.scrollLeft;
    const w = this.viewWidth;
    this.drawing.draw({ px, x0, w, t0: xToTick(0, px, x0), t1: xToTick(w, px, x0), dpr: globalThis.devicePixelRatio || 1 });
  }
}
