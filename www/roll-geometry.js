// Piano-roll geometry, pure: the maths between ticks, pixels, pitches, bars and beats, the
// visible-note lookup, phrase runs and colours, and the roll's sizes and theme. No DOM: the
// Node tests import it (tests/js/roll.test.mjs, through roll.js, and roll-geometry.test.mjs);
// roll.js, roll-input.js and roll-draw.js build the PianoRoll on it.
import { ROLES, barAt, barEnd } from './piece.js';

export const ROLE_COLOURS = {
  melody: '#f2b84b',
  bridge: '#ffd699',
  piano: '#5fb3f9',
  generated: '#b48cff',
  other: '#8a8f99',
};
// Later roles draw on top: the melody must stay readable over a dense accompaniment.
export const DRAW_ORDER = ['other', 'piano', 'generated', 'bridge', 'melody'];

export const GUTTER = 44;
export const RULER_H = 18;
export const CHORD_H = 26;
export const PHRASE_H = 22;
export const ROLL_H = 288;
export const LANES_H = RULER_H + CHORD_H + PHRASE_H;
export const VELOCITY_H = 40; // the velocity lane under the roll
export const PEDAL_H = 14; // the pedal lane under it
export const MIN_BAR_PX = 56; // the opening zoom keeps a chord symbol readable
export const MAX_QUARTER_PX = 480;
export const END_PAD = 12; // room after the last bar so its line and the playhead stay visible
export const DRAG_PX = 4; // a press that moves less than this is a click
export const FONT = 'system-ui, -apple-system, "Segoe UI", sans-serif';
export const THEME = {
  bg: '#14161b', panel: '#1d2027', line: '#2b2f38', text: '#e8e6e3', muted: '#9aa0aa',
  ok: '#5dd39e', white: '#171a20', black: '#111318', beat: '#20232a', bar: '#3a3f4b',
};
const NOTE_NAMES = ['C', 'C♯', 'D', 'D♯', 'E', 'F', 'F♯', 'G', 'G♯', 'A', 'A♯', 'B'];
export const BLACK_KEYS = new Set([1, 3, 6, 8, 10]);

export const clamp = (x, lo, hi) => Math.min(hi, Math.max(lo, x));

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
