// Piano-roll input: pointer presses and drags (seek, pan, select bars or beats), the lanes'
// keyboard (move the cursor bar, edit, select), the wheel (scroll, Ctrl+wheel zoom), scrolling
// and resizing. A PianoRoll (roll.js) owns one RollInput, given the roll itself, and sends it
// its canvases' events; it changes the roll's view (selection, cursor, zoom, scroll) through
// the roll and calls the callbacks given to the roll's constructor. Presses on the roll while
// notes are edited go to the roll's NoteEditor (roll-edit.js).
import { barAt, barEnd } from './piece.js';
import { DRAG_PX, clamp, barSpan, beatSpan } from './roll-geometry.js';

export class RollInput {
  constructor(roll) {
    this.roll = roll;
    this.drag = null; // the press being dragged: {kind, mode, startX, tick, scroll, moved, before}
    this.anchor = null; // the bar a Shift+arrow selection grows from
  }

  /** A new piece: no selection grows from the old one's bars. */
  pieceChanged() {
    this.anchor = null;
  }

  // --- scrolling, the wheel and resizing --------------------------------------------------------

  onScroll() {
    const r = this.roll;
    // The user scrolled: follow the playhead only while they keep it in view.
    if (Math.abs(r.scroller.scrollLeft - r.expectScroll) > 1 && r.playhead != null) r.follow = r.inView(r.playhead);
    r.expectScroll = -1;
    this.roll.schedule();
  }

  onWheel(e) {
    const unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? this.roll.viewWidth : 1;
    if (e.ctrlKey || e.metaKey) {
      // Ctrl+wheel, and a trackpad pinch (which browsers report as ctrl+wheel), zoom at the cursor.
      e.preventDefault();
      const anchor = e.clientX - this.roll.scroller.getBoundingClientRect().left;
      this.roll.zoomBy(Math.exp(-e.deltaY * unit * 0.0015), anchor);
      return;
    }
    if (Math.abs(e.deltaX) >= Math.abs(e.deltaY)) return; // already horizontal: native scrolling
    const max = this.roll.scroller.scrollWidth - this.roll.scroller.clientWidth;
    const next = clamp(this.roll.scroller.scrollLeft + e.deltaY * unit, 0, max);
    if (next === this.roll.scroller.scrollLeft) return; // at an end: let the page scroll instead
    e.preventDefault();
    this.roll.scroller.scrollLeft = next;
  }

  onResize() {
    if (!this.roll.measure()) return;
    this.roll.schedule();
    this.roll.flush(); // resized canvases are blank: draw before this frame is painted
  }

  // --- pointer and keyboard --------------------------------------------------------------------

  _barAtTick(tick) {
    const p = this.roll.piece;
    if (!p.bars.length || tick < p.bars[0] || tick >= barEnd(p, p.bars.length - 1)) return -1;
    return barAt(p, tick);
  }

  pointerDown(e, kind) {
    this.roll.settle();
    if ((kind === 'roll' || kind === 'velocity' || kind === 'pedal') && this.roll.editor.on) {
      if (this.roll.piece && e.button === 0) this.roll.editor.down(e, kind);
      return;
    }
    if (kind === 'velocity' || kind === 'pedal') return;
    if (!this.roll.piece || e.button !== 0 || (kind !== 'roll' && !this.roll.piece.bars.length)) return;
    let mode = 'bars';
    if (kind === 'roll') mode = e.shiftKey ? 'beats' : e.pointerType === 'mouse' ? 'pan' : 'click';
    if (mode !== 'click') e.currentTarget.setPointerCapture?.(e.pointerId);
    this.drag = {
      kind, mode, startX: e.clientX, tick: this.roll.tickAtClient(e.clientX),
      scroll: this.roll.scroller.scrollLeft, moved: false, before: this.roll.selection,
    };
  }

  pointerMove(e) {
    if (this.roll.editor.drag) {
      this.roll.editor.move(e);
      return;
    }
    const d = this.drag;
    if (!d) return;
    const dx = e.clientX - d.startX;
    if (!d.moved && Math.abs(dx) < DRAG_PX) return;
    d.moved = true;
    if (d.mode === 'pan') {
      this.roll.scroller.scrollLeft = d.scroll - dx;
      return;
    }
    if (d.mode === 'click') return;
    this.roll.edgeScroll(e.clientX);
    const tick = this.roll.tickAtClient(e.clientX);
    this.roll.selection = d.mode === 'bars'
      ? barSpan(this.roll.piece, d.tick, tick)
      : beatSpan(this.roll.piece, d.tick, tick, this.roll.endTick);
    this.roll.schedule();
  }

  pointerUp() {
    if (this.roll.editor.drag) {
      this.roll.editor.up();
      return;
    }
    const d = this.drag;
    if (!d) return;
    this.drag = null;
    if (!d.moved) {
      this._click(d);
      return;
    }
    if (d.mode !== 'bars' && d.mode !== 'beats') return;
    const s = this.roll.selection;
    if (s && s[1] > s[0]) {
      this.roll.callbacks.onSelect?.(s[0], s[1]);
    } else {
      this.roll.selection = d.before;
      this.roll.schedule();
    }
  }

  pointerCancel() {
    this.roll.editor.cancel();
    if (this.drag && (this.drag.mode === 'bars' || this.drag.mode === 'beats')) this.roll.selection = this.drag.before;
    this.drag = null;
    this.roll.schedule();
  }

  _click(d) {
    if (d.kind === 'chord' || d.kind === 'phrase') {
      const bar = this._barAtTick(d.tick);
      if (bar < 0) return;
      this.roll.setCursor(bar);
      if (d.kind === 'chord') this.roll.callbacks.onChordClick?.(bar);
      else this.roll.callbacks.onPhraseClick?.(bar);
      return;
    }
    this.roll.follow = true;
    this.roll.callbacks.onSeek?.(Math.round(clamp(d.tick, 0, this.roll.endTick)));
  }

  laneKey(e, kind) {
    const p = this.roll.piece;
    if (!p || !p.bars.length || e.altKey || e.ctrlKey || e.metaKey) return;
    const bar = this.roll.cursorBar;
    if (e.key === 'Enter') {
      e.preventDefault();
      if (kind === 'chord') this.roll.callbacks.onChordClick?.(bar);
      else this.roll.callbacks.onPhraseClick?.(bar);
      return;
    }
    if (e.key === 'Escape' && this.roll.selection) {
      e.preventDefault();
      this.roll.clearSelection();
      this.roll.callbacks.onSelect?.(null, null);
      return;
    }
    const last = p.bars.length - 1;
    const moves = { ArrowLeft: bar - 1, ArrowRight: bar + 1, Home: 0, End: last, PageUp: bar - 4, PageDown: bar + 4 };
    if (!Object.hasOwn(moves, e.key)) return;
    e.preventDefault();
    const next = clamp(moves[e.key], 0, last);
    if (e.shiftKey) {
      this.anchor ??= bar;
      this.roll.selection = barSpan(p, p.bars[this.anchor], p.bars[next]);
      this.roll.callbacks.onSelect?.(...this.roll.selection);
    } else {
      this.anchor = null;
    }
    this.roll.setCursor(next);
    this.roll.revealBar(next);
  }
}
