// Editing notes in the roll with the pointer and the keyboard (the edits themselves are the pure
// functions of note-edit.js). While a drag lasts the roll shows its result without making it the
// page's piece; letting go hands the new piece to `callbacks.onEdit(piece, { touched })`, which
// makes it the current piece (one Undo away). The roll owns one NoteEditor (roll.js).
//
// Pointer, with "Edit notes" on: a press on empty roll draws a note (drag for its length, on the
// quantise grid); on a note selects it (Shift adds or removes) and a drag moves the selection
// (time and pitch), or from the note's last few pixels changes its length; Shift and a drag on
// empty roll selects the notes in a box. In the velocity lane a drag sets a note's velocity
// (every selected note's, when it is one of them). In the pedal lane a drag draws a span of the
// piano part's sustain pedal (on the quantise grid) and a click on a span lifts it.
// Keyboard (the roll focused): N draws a note at the playhead; [ and ] select the previous or
// next note (Shift adds); arrows move (Shift with Up/Down: an octave); Shift with Left/Right
// shortens or lengthens; Delete removes; + and − change velocity; Ctrl+A selects every note;
// Ctrl+C, Ctrl+X, Ctrl+V copy, cut and paste (at the playhead); Ctrl+D duplicates the selected
// bars, or the bars of the selected notes; Escape clears the selection.
import {
  addNote, allNotes, changeVelocity, copyNotes, deleteNotes, duplicateBars, gridTicks, moveNotes,
  noteAt, notesIn, notesInOrder, pasteNotes, resizeNotes, setVelocity, snapDown, snapNearest,
  touchedBars, DEFAULT_VELOCITY,
} from './note-edit.js';
import { barAt } from './piece.js';
import { drawPedal, liftPedalAt, pedalTrack } from './pedal.js';
import { DRAG_PX, clamp, tickToX } from './roll-geometry.js';

const EDGE_PX = 6; // a press this close to a note's end changes its length
const VELOCITY_STEP = 8;

export class NoteEditor {
  constructor(roll) {
    this.roll = roll;
    this.on = false;
    this.selection = new Set();
    this.drag = null;
    this.clip = null;
    this.box = null; // [tick0, pitch0, tick1, pitch1] while selecting with a box
    this.lastPitch = 60;
    this.lastVelocity = DEFAULT_VELOCITY;
  }

  get piece() {
    return this.roll.piece;
  }

  /** The snapping grid in ticks, from the page's quantise setting. */
  grid() {
    const perQuarter = Number(this.roll.callbacks.quantise?.() ?? 4);
    return gridTicks(this.piece?.ppq ?? 480, perQuarter);
  }

  /**
   * Another version of the piece (an edit, an undo, the lanes refilled): the selection keeps the
   * notes still in it, found by value where the piece was copied.
   */
  pieceChanged(piece) {
    if (!piece || !this.selection.size) {
      this.selection = new Set();
      return;
    }
    const all = allNotes(piece);
    const byValue = new Map([...all].map((n) => [n.join(), n]));
    const kept = new Set();
    for (const n of this.selection) {
      const same = all.has(n) ? n : byValue.get(n.join());
      if (same) kept.add(same);
    }
    this.selection = kept;
  }

  _pitchAt(clientY) {
    const r = this.roll;
    const [lo, hi] = r.range;
    const rh = r.rollHeight / (hi - lo + 1);
    const y = clientY - r.roll.getBoundingClientRect().top;
    return clamp(hi - Math.floor(y / rh), 0, 127);
  }

  /** Shows an edit's result while the pointer is down (the page's piece is unchanged). */
  _preview(result) {
    this.roll.piece = result.piece;
    this.selection = result.selection;
    this.roll.update();
  }

  /** Hands an edit's piece to the page (nothing when the edit changed nothing). */
  _commit(result, before) {
    this.selection = result.selection;
    if (result.piece === this.roll.piece) {
      this.roll.update();
      return;
    }
    const touched = touchedBars(result.piece, [...before, ...result.selection]);
    this.roll.callbacks.onEdit?.(result.piece, { touched });
  }

  // --- pointer -------------------------------------------------------------------------------

  down(e, kind) {
    const p = this.piece;
    if (!p) return;
    e.currentTarget.setPointerCapture?.(e.pointerId);
    // The editing keys go to the roll, wherever the press was (no mousedown moving focus after).
    e.preventDefault();
    this.roll.roll.focus({ preventScroll: true });
    const tick = this.roll.tickAtClient(e.clientX);
    if (kind === 'pedal') {
      const at = snapNearest(Math.max(0, tick), this.grid());
      this.drag = { mode: 'pedal', base: p, startX: e.clientX, tick, at, moved: false, track: pedalTrack(p) };
      return;
    }
    if (kind === 'velocity') {
      const note = this._noteNearX(e.clientX);
      if (!note) return;
      const targets = this.selection.has(note) ? this.selection : new Set([note]);
      this.drag = { mode: 'velocity', base: p, targets, moved: false };
      this._velocityAt(e.clientY);
      return;
    }
    const pitch = this._pitchAt(e.clientY);
    const hit = noteAt(p, tick, pitch);
    const start = { startX: e.clientX, tick, pitch, base: p, moved: false };
    if (hit) {
      if (e.shiftKey && this.selection.has(hit)) {
        // Shift on a selected note takes it out of the selection: nothing to drag.
        this.selection = new Set([...this.selection].filter((n) => n !== hit));
        this.roll.update();
        return;
      }
      if (e.shiftKey) {
        this.selection = new Set([...this.selection, hit]);
      } else if (!this.selection.has(hit)) {
        this.selection = new Set([hit]);
      }
      this.lastPitch = hit[0];
      this.lastVelocity = hit[3];
      const endX = tickToX(hit[2], this.roll.pxPerTick, this.roll.scroller.scrollLeft);
      const x = e.clientX - this.roll.strip.getBoundingClientRect().left;
      const width = (hit[2] - hit[1]) * this.roll.pxPerTick;
      const resize = endX - x <= EDGE_PX && width > 2 * EDGE_PX;
      this.drag = { ...start, mode: resize ? 'resize' : 'move', anchor: hit, selection: this.selection };
    } else if (e.shiftKey) {
      this.drag = { ...start, mode: 'box', selection: this.selection };
      this.box = [tick, pitch, tick, pitch];
    } else {
      const grid = this.grid();
      const at = snapDown(Math.max(0, tick), grid);
      this.drag = { ...start, mode: 'draw', at, pitch };
      this.lastPitch = pitch;
      this._preview(addNote(p, { pitch, start: at, end: at + grid, velocity: this.lastVelocity }));
    }
    this.roll.update();
  }

  move(e) {
    const d = this.drag;
    if (!d) return;
    if (d.mode === 'velocity') {
      d.moved = true;
      this._velocityAt(e.clientY);
      return;
    }
    if (d.mode === 'pedal') {
      if (!d.moved && Math.abs(e.clientX - d.startX) < DRAG_PX) return;
      d.moved = true;
      this.roll.edgeScroll(e.clientX);
      const to = snapNearest(Math.max(0, this.roll.tickAtClient(e.clientX)), this.grid());
      this.roll.piece = drawPedal(d.base, d.track, d.at, to);
      this.roll.update();
      return;
    }
    if (!d.moved && Math.abs(e.clientX - d.startX) < DRAG_PX && this._pitchAt(e.clientY) === d.pitch) return;
    d.moved = true;
    this.roll.edgeScroll(e.clientX);
    const tick = this.roll.tickAtClient(e.clientX);
    const pitch = this._pitchAt(e.clientY);
    const grid = this.grid();
    if (d.mode === 'draw') {
      const end = Math.max(d.at + grid, snapNearest(tick, grid));
      this._preview(addNote(d.base, { pitch: d.pitch, start: d.at, end, velocity: this.lastVelocity }));
    } else if (d.mode === 'move') {
      const dt = snapNearest(d.anchor[1] + tick - d.tick, grid) - d.anchor[1];
      this._preview(moveNotes(d.base, d.selection, dt, pitch - d.pitch));
    } else if (d.mode === 'resize') {
      const dt = Math.max(d.anchor[1] + grid, snapNearest(d.anchor[2] + tick - d.tick, grid)) - d.anchor[2];
      this._preview(resizeNotes(d.base, d.selection, dt, grid));
    } else if (d.mode === 'box') {
      this.box = [d.tick, d.pitch, tick, pitch];
      const inBox = notesIn(d.base, d.tick, tick, d.pitch, pitch);
      this.selection = new Set([...d.selection, ...inBox]);
      this.roll.update();
    }
  }

  up() {
    const d = this.drag;
    if (!d) return;
    this.drag = null;
    this.box = null;
    if (d.mode === 'pedal') {
      // A drag drew a span; a click on a span lifts it. One Undo either way.
      const result = d.moved ? this.roll.piece : liftPedalAt(d.base, d.track, d.tick);
      this.roll.piece = d.base;
      if (result === d.base) this.roll.update();
      else this.roll.callbacks.onEdit?.(result, { touched: null });
      return;
    }
    const edited = this.roll.piece !== d.base;
    const before = d.mode === 'velocity' ? d.targets : d.selection ?? new Set();
    if (edited) {
      const result = { piece: this.roll.piece, selection: this.selection };
      this.roll.piece = d.base; // the page makes the result its piece (or keeps this one)
      this._commit(result, before);
    } else {
      this.roll.update();
    }
  }

  cancel() {
    const d = this.drag;
    if (!d) return;
    this.drag = null;
    this.box = null;
    this.roll.piece = d.base;
    this.selection = d.selection ?? new Set();
    this.roll.update();
  }

  _noteNearX(clientX) {
    const r = this.roll;
    const x = clientX - r.strip.getBoundingClientRect().left;
    let best = null;
    let bestDistance = EDGE_PX;
    for (const track of this.piece.tracks) {
      for (const n of track.notes) {
        const d = Math.abs(tickToX(n[1], r.pxPerTick, r.scroller.scrollLeft) - x);
        if (d < bestDistance || (d === bestDistance && this.selection.has(n))) {
          best = n;
          bestDistance = d;
        }
      }
    }
    return best;
  }

  _velocityAt(clientY) {
    const d = this.drag;
    const lane = this.roll.velocityLane.getBoundingClientRect();
    const v = Math.round(127 * (1 - (clientY - lane.top) / Math.max(1, lane.height)));
    this.lastVelocity = clamp(v, 1, 127);
    this._preview(setVelocity(d.base, d.targets, this.lastVelocity));
  }

  // --- keyboard ------------------------------------------------------------------------------

  /** Handles a key in the focused roll; true when it was an editing key. */
  key(e) {
    const p = this.piece;
    if (!p || this.drag) return false;
    const grid = this.grid();
    const sel = this.selection;
    const ctrl = e.ctrlKey || e.metaKey;
    const k = e.key.length === 1 ? e.key.toLowerCase() : e.key;
    const edit = (result) => this._commit(result, sel);
    if (ctrl && k === 'a') {
      this.selection = allNotes(p);
      this.roll.update();
      return true;
    }
    if (ctrl && (k === 'c' || k === 'x')) {
      if (!sel.size) return false;
      this.clip = copyNotes(p, sel);
      if (k === 'x') edit(deleteNotes(p, sel));
      this.roll.callbacks.onNotice?.(`${k === 'x' ? 'Cut' : 'Copied'} ${sel.size} note${sel.size === 1 ? '' : 's'}; Ctrl+V pastes them at the playhead.`);
      return true;
    }
    if (ctrl && k === 'v') {
      if (!this.clip) return false;
      edit(pasteNotes(p, this.clip, this._pasteTick()));
      return true;
    }
    if (ctrl && k === 'd') {
      const bars = this._barsToDuplicate();
      if (!bars) return false;
      edit(duplicateBars(p, ...bars));
      this.roll.callbacks.onNotice?.(`Bars ${bars[0] + 1}–${bars[1]} duplicated after themselves.`);
      return true;
    }
    if (ctrl || e.altKey) return false;
    if (k === 'n') {
      const at = snapDown(Math.max(0, this._pasteTick()), grid);
      edit(addNote(p, { pitch: this.lastPitch, start: at, end: at + grid, velocity: this.lastVelocity }));
      return true;
    }
    if (k === '[' || k === ']' || k === '{' || k === '}') {
      this._step(k === ']' || k === '}' ? 1 : -1, e.shiftKey);
      return true;
    }
    if (k === 'Escape' && sel.size) {
      this.selection = new Set();
      this.roll.update();
      return true;
    }
    if (!sel.size) return false;
    if (k === 'Delete' || k === 'Backspace') {
      edit(deleteNotes(p, sel));
      return true;
    }
    if (k === '+' || k === '=' || k === '-' || k === '_') {
      edit(changeVelocity(p, sel, k === '+' || k === '=' ? VELOCITY_STEP : -VELOCITY_STEP));
      return true;
    }
    const moves = {
      ArrowUp: [0, e.shiftKey ? 12 : 1],
      ArrowDown: [0, e.shiftKey ? -12 : -1],
      ArrowLeft: [-grid, 0],
      ArrowRight: [grid, 0],
    };
    if (!Object.hasOwn(moves, k)) return false;
    if (e.shiftKey && (k === 'ArrowLeft' || k === 'ArrowRight')) {
      edit(resizeNotes(p, sel, k === 'ArrowRight' ? grid : -grid, grid));
    } else {
      edit(moveNotes(p, sel, ...moves[k]));
    }
    return true;
  }

  _pasteTick() {
    const r = this.roll;
    if (r.playhead != null) return r.playhead;
    if (this.selection.size) return Math.max(...[...this.selection].map((n) => n[2]));
    return r.piece.bars[r.cursorBar] ?? 0;
  }

  /** The bars of the loop selection, else the bars of the selected notes. */
  _barsToDuplicate() {
    const p = this.piece;
    const s = this.roll.selection;
    if (s) {
      const from = barAt(p, s[0]);
      const to = Math.max(from + 1, barAt(p, s[1] - 1) + 1);
      return [from, to];
    }
    return this.selection.size ? touchedBars(p, this.selection) : null;
  }

  /** Selects the note after (or before) the selection in time; with `add`, keeps the rest. */
  _step(direction, add) {
    const order = notesInOrder(this.piece);
    if (!order.length) return;
    const indices = order.map((n, i) => (this.selection.has(n) ? i : -1)).filter((i) => i >= 0);
    let i;
    if (!indices.length) i = direction > 0 ? 0 : order.length - 1;
    else i = clamp(direction > 0 ? Math.max(...indices) + 1 : Math.min(...indices) - 1, 0, order.length - 1);
    const note = order[i];
    this.selection = add ? new Set([...this.selection, note]) : new Set([note]);
    this.lastPitch = note[0];
    this.lastVelocity = note[3];
    this.roll.update();
    if (!this.roll.inView(note[1])) this.roll.scrollToTick(note[1]);
  }
}
