// Piano-roll input: pointer presses and drags (seek, pan, select bars or beats), the lanes'
// keyboard (move the cursor bar, edit, select), the wheel (scroll, Ctrl+wheel zoom), scrolling
// and resizing. RollInput is the base of PianoRoll (roll.js) and sits on RollDrawing
// (roll-draw.js); the callbacks it calls are the ones given to PianoRoll's constructor.
import { barAt, barEnd } from './piece.js';
import { DRAG_PX, clamp, tickToX, xToTick, barSpan, beatSpan } from './roll-geometry.js';
import { RollDrawing } from './roll-draw.js';

export class RollInput extends RollDrawing {
  // --- scrolling, the wheel and resizing --------------------------------------------------------

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
    if ((kind === 'roll' || kind === 'velocity') && this.editor.on) {
      if (this.piece && e.button === 0) this.editor.down(e, kind);
      return;
    }
    if (kind === 'velocity') return;
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
    if (this.editor.drag) {
      this.editor.move(e);
      return;
    }
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
    if (this.editor.drag) {
      this.editor.up();
      return;
    }
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
    this.editor.cancel();
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
}
