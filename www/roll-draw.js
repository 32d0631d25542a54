// Piano-roll drawing: the gutter (lane names, keyboard), the bar ruler, the chord and phrase
// lanes and the roll itself, for the visible ticks only. A PianoRoll (roll.js) owns one
// RollDrawing, given the roll itself: it reads the roll's state (piece, zoom, scroll, pitch
// range, selection, playhead, the editor's selection) and changes none of it.
import { downSpans, pedalTrack } from './pedal.js';
import { barAt, barEnd, barLength } from './piece.js';
import {
  ROLE_COLOURS, GUTTER, RULER_H, CHORD_H, PHRASE_H, LANES_H, VELOCITY_H, PEDAL_H, FONT, THEME, BLACK_KEYS, clamp,
  tickToX, visibleNotes, beatTicks, phraseColour, labelStep, pitchName,
} from './roll-geometry.js';

// ---------------------------------------------------------------------------------------------
// DOM helpers

export function element(tag, style, attrs = {}) {
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

export function readColours(el) {
  const css = getComputedStyle(el);
  const v = (name, fallback) => css.getPropertyValue(name).trim() || fallback;
  return { ...ROLE_COLOURS, melody: v('--melody', ROLE_COLOURS.melody), piano: v('--accomp', ROLE_COLOURS.piano) };
}

function addNoteRect(path, x, y, w, h) {
  // Corners only where they show: plain rectangles are cheaper when zoomed out over many notes.
  if (path.roundRect && w >= 4 && h >= 3) path.roundRect(x, y, w, h, Math.min(2, w / 2, h / 2));
  else path.rect(x, y, w, h);
}

export class RollDrawing {
  constructor(roll) {
    this.roll = roll;
    this.patterns = new WeakMap(); // the hatch of the planned bars, per canvas context
  }

  /** Draws every canvas for the view `v`: {px, x0, w, t0, t1 (the visible ticks), dpr}. */
  draw(v) {
    this._drawGutter(v);
    this._drawRuler(v);
    this._drawChords(v);
    this._drawPhrases(v);
    this._drawRoll(v);
    this._drawVelocities(v);
    this._drawPedal(v);
  }

  _visibleBars(v) {
    const p = this.roll.piece;
    return [barAt(p, Math.max(0, v.t0)), barAt(p, v.t1)];
  }

  _hatch(ctx, v) {
    let pattern = this.patterns.get(ctx);
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
      this.patterns.set(ctx, pattern);
    }
    // Hatches scroll with the music instead of sliding under it.
    pattern.setTransform?.(new DOMMatrix([1, 0, 0, 1, -(v.x0 % 8), 0]));
    return pattern;
  }

  /** Dims and hatches the bars after the prompt: their labels only plan what gets generated. */
  _drawPlanned(ctx, v, h, dim) {
    const p = this.roll.piece;
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
    const s = this.roll.selection;
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
    const g = this.roll.generating;
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
    if (this.roll.playhead == null) return;
    const x = tickToX(this.roll.playhead, v.px, v.x0);
    if (x < -1 || x > v.w + 1) return;
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(Math.round(x) - 0.5, 0, 1.5, h);
  }

  _drawGutter(v) {
    const ctx = sizeCanvas(this.roll.gutter, GUTTER, LANES_H + this.roll.rollHeight + VELOCITY_H + PEDAL_H, v.dpr);
    ctx.fillStyle = THEME.panel;
    ctx.fillRect(0, 0, GUTTER, LANES_H);
    ctx.font = `10px ${FONT}`;
    ctx.textBaseline = 'middle';
    ctx.fillStyle = THEME.muted;
    ctx.fillText('Bar', 4, RULER_H / 2);
    ctx.fillText('Chord', 4, RULER_H + CHORD_H / 2);
    ctx.fillText('Phrase', 4, RULER_H + CHORD_H + PHRASE_H / 2);
    this._drawKeyboard(ctx, LANES_H);
    ctx.fillStyle = THEME.panel;
    ctx.fillRect(0, LANES_H + this.roll.rollHeight, GUTTER, VELOCITY_H);
    ctx.fillStyle = THEME.muted;
    ctx.font = `10px ${FONT}`;
    ctx.fillText('Velocity', 4, LANES_H + this.roll.rollHeight + VELOCITY_H / 2);
    ctx.fillStyle = THEME.panel;
    ctx.fillRect(0, LANES_H + this.roll.rollHeight + VELOCITY_H, GUTTER, PEDAL_H);
    ctx.fillStyle = THEME.muted;
    ctx.fillText('Pedal', 4, LANES_H + this.roll.rollHeight + VELOCITY_H + PEDAL_H / 2);
  }

  _drawKeyboard(ctx, top) {
    const [lo, hi] = this.roll.range;
    const rh = this.roll.rollHeight / (hi - lo + 1);
    ctx.fillStyle = '#cfccc6';
    ctx.fillRect(0, top, GUTTER, this.roll.rollHeight);
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
    ctx.fillRect(GUTTER - 1, top, 1, this.roll.rollHeight);
    ctx.textAlign = 'start';
  }

  _drawRuler(v) {
    const ctx = sizeCanvas(this.roll.ruler, v.w, RULER_H, v.dpr);
    ctx.fillStyle = THEME.panel;
    ctx.fillRect(0, 0, v.w, RULER_H);
    const p = this.roll.piece;
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
    const ctx = this._laneFrame(this.roll.chordLane, h, v);
    const p = this.roll.piece;
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
    this._drawCursor(ctx, v, h, this.roll.chordLane);
    this._drawPlayhead(ctx, v, h);
  }

  _drawPhrases(v) {
    const h = PHRASE_H;
    const ctx = this._laneFrame(this.roll.phraseLane, h, v);
    const p = this.roll.piece;
    if (!p || !p.bars.length) return;
    ctx.font = `600 11px ${FONT}`;
    ctx.textBaseline = 'middle';
    const lastBar = p.bars.length - 1;
    for (const run of this.roll.runs) {
      if (run.from > lastBar) break;
      const a = tickToX(p.bars[run.from], v.px, v.x0);
      const b = tickToX(barEnd(p, Math.min(run.to, lastBar + 1) - 1), v.px, v.x0);
      if (b < 0 || a > v.w) continue;
      this._drawRun(ctx, v, run, a, b, h);
    }
    this._drawPlanned(ctx, v, h, 0.35);
    this._drawSelection(ctx, v, h, 0.14);
    this._drawCursor(ctx, v, h, this.roll.phraseLane);
    this._drawPlayhead(ctx, v, h);
  }

  /** One phrase: a pill over its bars, faint ticks at its inner bar lines, the letter kept in view. */
  _drawRun(ctx, v, run, a, b, h) {
    const p = this.roll.piece;
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
    const p = this.roll.piece;
    const a = tickToX(p.bars[this.roll.cursorBar], v.px, v.x0);
    const w = barLength(p, this.roll.cursorBar) * v.px;
    // Inside the browser's focus ring and in another colour, so the two do not merge.
    ctx.fillStyle = 'rgba(255, 255, 255, 0.10)';
    ctx.fillRect(a + 3, 3, Math.max(2, w - 6), h - 6);
    ctx.strokeStyle = '#ffd699';
    ctx.lineWidth = 2;
    ctx.strokeRect(a + 4, 4, Math.max(2, w - 8), h - 8);
  }

  _drawRoll(v) {
    const h = this.roll.rollHeight;
    const ctx = sizeCanvas(this.roll.roll, v.w, h, v.dpr);
    this._drawRows(ctx, v, h);
    const p = this.roll.piece;
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
    this._drawEditing(ctx, v);
    this._drawPlayhead(ctx, v, h);
  }

  /** The notes selected for editing (outlined) and the box being dragged. */
  _drawEditing(ctx, v) {
    const ed = this.roll.editor;
    if (!ed.selection.size && !ed.box) return;
    const [lo, hi] = this.roll.range;
    const rh = this.roll.rollHeight / (hi - lo + 1);
    ctx.strokeStyle = '#ffffff';
    ctx.lineWidth = 1.5;
    for (const n of ed.selection) {
      if (n[2] <= v.t0 || n[1] >= v.t1 || n[0] < lo || n[0] > hi) continue;
      const x = n[1] * v.px - v.x0;
      const w = Math.max(1.5, (n[2] - n[1]) * v.px - 1);
      ctx.strokeRect(x + 0.75, (hi - n[0]) * rh + 1.25, Math.max(1, w - 1.5), Math.max(1, rh - 2.5));
    }
    if (ed.box) {
      const [tA, pA, tB, pB] = ed.box;
      const x = Math.min(tA, tB) * v.px - v.x0;
      const y = (hi - Math.max(pA, pB)) * rh;
      ctx.fillStyle = 'rgba(255, 255, 255, 0.08)';
      ctx.fillRect(x, y, Math.abs(tB - tA) * v.px, (Math.abs(pB - pA) + 1) * rh);
      ctx.strokeRect(x, y, Math.abs(tB - tA) * v.px, (Math.abs(pB - pA) + 1) * rh);
    }
  }

  /** The velocity lane: a stem per visible note, as tall as it is loud; selected ones white. */
  _drawVelocities(v) {
    const h = VELOCITY_H;
    const ctx = sizeCanvas(this.roll.velocityLane, v.w, h, v.dpr);
    ctx.fillStyle = THEME.panel;
    ctx.fillRect(0, 0, v.w, h);
    ctx.fillStyle = THEME.line;
    ctx.fillRect(0, 0, v.w, 1);
    if (!this.roll.piece) return;
    const sel = this.roll.editor.selection;
    for (const track of this.roll.tracks) {
      const notes = track.index.notes;
      const [i0, i1] = visibleNotes(track.index, v.t0, v.t1);
      const path = new Path2D();
      const chosen = new Path2D();
      for (let i = i0; i < i1; i++) {
        const n = notes[i];
        if (n[1] < v.t0 - 2 / v.px) continue;
        const x = Math.round(n[1] * v.px - v.x0);
        const top = 2 + (h - 3) * (1 - n[3] / 127);
        (sel.has(n) ? chosen : path).rect(x, top, 2, h - top);
      }
      ctx.fillStyle = this.roll.colours[track.role];
      ctx.fill(path);
      ctx.fillStyle = '#ffffff';
      ctx.fill(chosen);
    }
  }

  /**
   * The pedal lane: the sustain pedal of the piano part (pedal.js's `pedalTrack`) as bars where
   * it is down, in its track's colour; half-pedal values below 64 (up) are not drawn.
   */
  _drawPedal(v) {
    const h = PEDAL_H;
    const ctx = sizeCanvas(this.roll.pedalLane, v.w, h, v.dpr);
    ctx.fillStyle = THEME.panel;
    ctx.fillRect(0, 0, v.w, h);
    ctx.fillStyle = THEME.line;
    ctx.fillRect(0, 0, v.w, 1);
    const p = this.roll.piece;
    const index = pedalTrack(p);
    if (index < 0) return;
    const track = p.tracks[index];
    const spans = downSpans(track.pedal, Math.max(this.roll.endTick, v.t1));
    ctx.fillStyle = this.roll.colours[ROLE_COLOURS[track.role] ? track.role : 'other'];
    for (const [a, b] of spans) {
      if (b < v.t0 || a > v.t1) continue;
      const x = Math.round(tickToX(a, v.px, v.x0));
      const w = Math.max(1, Math.round(tickToX(b, v.px, v.x0)) - x - 1);
      ctx.fillRect(x, 3, w, h - 5);
    }
  }

  /** Pitch rows: darker for black keys, a line under every C. */
  _drawRows(ctx, v, h) {
    const [lo, hi] = this.roll.range;
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
    const p = this.roll.piece;
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
    const [lo, hi] = this.roll.range;
    const rh = this.roll.rollHeight / (hi - lo + 1);
    const nh = Math.max(1, rh - 1);
    for (const track of this.roll.tracks) {
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
      ctx.fillStyle = this.roll.colours[track.role];
      paths.forEach((path, band) => {
        if (!path) return;
        ctx.globalAlpha = 0.35 + (0.65 * (band * 16 + 8)) / 127; // velocity → alpha
        ctx.fill(path);
      });
      ctx.globalAlpha = 1;
    }
  }
}
