// Editing notes in the roll, as pure functions from a piece and a selection to a new piece: the
// pencil, moves, lengths, deletes, copy and paste, duplicated bars and velocities. The piece
// given is never changed: the result has new track and note lists (notes not touched are
// shared), so the old piece stays on the undo stack as it was. A selection is a Set of the note
// arrays ([pitch, start, end, velocity]) of the piece it was made on; every edit returns the
// selection as it stands in the new piece. No DOM here: the Node tests run all of it.
import { barAt, barEnd, setBarCount } from './piece.js';
import { DRAW_ORDER } from './roll-geometry.js';

export const DEFAULT_VELOCITY = 80;
const MAX_PITCH = 127;

const byStart = (a, b) => a[1] - b[1] || a[0] - b[0] || a[2] - b[2];
const clampInt = (x, lo, hi) => Math.min(hi, Math.max(lo, Math.round(x)));

/**
 * The snapping grid in ticks for a quantise setting (notes per quarter: 4 = sixteenths, 0 =
 * off, which still snaps to 1/32 of a quarter so a drawn note has a sensible length).
 */
export function gridTicks(ppq, perQuarter) {
  return perQuarter > 0 ? Math.max(1, Math.round(ppq / perQuarter)) : Math.max(1, Math.round(ppq / 32));
}

/** `tick` snapped down to the grid (from tick 0). */
export function snapDown(tick, grid) {
  return Math.floor(tick / grid) * grid;
}

/** `tick` snapped to the nearest grid line. */
export function snapNearest(tick, grid) {
  return Math.round(tick / grid) * grid;
}

/** Tracks in the order the roll draws them, the topmost last: where a click finds a note. */
function drawnTracks(piece) {
  const rank = (t) => DRAW_ORDER.indexOf(DRAW_ORDER.includes(t.role) ? t.role : 'other');
  return piece.tracks.map((t, i) => ({ t, i })).sort((a, b) => rank(a.t) - rank(b.t));
}

/** The note sounding `pitch` at `tick` that the roll shows on top, or null. */
export function noteAt(piece, tick, pitch) {
  const tracks = drawnTracks(piece);
  for (let k = tracks.length - 1; k >= 0; k--) {
    const notes = tracks[k].t.notes;
    for (let i = notes.length - 1; i >= 0; i--) {
      const n = notes[i];
      if (n[0] === pitch && n[1] <= tick && tick < n[2]) return n;
    }
  }
  return null;
}

/** Notes overlapping the box of ticks [t0, t1) and pitches [p0, p1] (either order). */
export function notesIn(piece, tA, tB, pA, pB) {
  const [t0, t1] = tA <= tB ? [tA, tB] : [tB, tA];
  const [p0, p1] = pA <= pB ? [pA, pB] : [pB, pA];
  const found = new Set();
  for (const track of piece.tracks) {
    for (const n of track.notes) if (n[0] >= p0 && n[0] <= p1 && n[1] < t1 && n[2] > t0) found.add(n);
  }
  return found;
}

/** Every note of the piece. */
export function allNotes(piece) {
  return new Set(piece.tracks.flatMap((t) => t.notes));
}

/** Notes in time order (start, then pitch), for stepping through with the keyboard. */
export function notesInOrder(piece) {
  return piece.tracks.flatMap((t) => t.notes).sort(byStart);
}

/**
 * The piece grown to hold its notes: more bars when a note ends past the last one, the prompt
 * (the bars that hold the person's music) over every bar with a note, `endTick` the last end.
 */
function fitted(next) {
  let end = 0;
  for (const t of next.tracks) for (const n of t.notes) end = Math.max(end, n[2]);
  next.endTick = end;
  if (!next.bars.length) return next;
  next.bars = [...next.bars];
  next.chords = [...(next.chords ?? [])];
  next.phrases = (next.phrases ?? []).map((p) => [...p]);
  let count = next.bars.length;
  while (barEnd(next, count - 1) < end) {
    next.bars.push(barEnd(next, count - 1));
    count++;
  }
  if (end > 0) next.promptBars = Math.max(next.promptBars ?? 0, barAt(next, end - 1) + 1);
  setBarCount(next, count);
  return next;
}

/**
 * Applies `change` to each selected note (a new [pitch, start, end, velocity], or null to
 * delete it); the rest are kept as they are. Returns { piece, selection } with the changed notes
 * selected.
 */
function changeSelected(piece, selection, change) {
  const chosen = new Set();
  const tracks = piece.tracks.map((track) => {
    if (!track.notes.some((n) => selection.has(n))) return track;
    const notes = [];
    for (const n of track.notes) {
      if (!selection.has(n)) {
        notes.push(n);
        continue;
      }
      const m = change(n);
      if (!m) continue;
      notes.push(m);
      chosen.add(m);
    }
    return { ...track, notes: notes.sort(byStart) };
  });
  return { piece: fitted({ ...piece, tracks }), selection: chosen };
}

/**
 * Draws a note into the track of `role` (a new one, named like the importer's, when the piece
 * has none). Returns { piece, selection } with the new note selected.
 */
export function addNote(piece, { pitch, start, end, velocity = DEFAULT_VELOCITY }, role = 'melody') {
  const note = [clampInt(pitch, 0, MAX_PITCH), Math.max(0, Math.round(start)), 0, clampInt(velocity, 1, 127)];
  note[2] = Math.max(note[1] + 1, Math.round(end));
  let index = piece.tracks.findIndex((t) => t.role === role);
  const tracks = [...piece.tracks];
  if (index < 0) {
    tracks.unshift({ name: role.toUpperCase(), role, program: 0, notes: [] });
    index = 0;
  }
  tracks[index] = { ...tracks[index], notes: [...tracks[index].notes, note].sort(byStart) };
  return { piece: fitted({ ...piece, tracks }), selection: new Set([note]) };
}

/**
 * How far the selection may move: `dt` ticks and `dp` semitones, cut so that no note starts
 * before tick 0 or leaves MIDI's pitches (the notes keep their shape as a group).
 */
function allowedMove(selection, dt, dp) {
  let minStart = Infinity;
  let lo = Infinity;
  let hi = -Infinity;
  for (const n of selection) {
    minStart = Math.min(minStart, n[1]);
    lo = Math.min(lo, n[0]);
    hi = Math.max(hi, n[0]);
  }
  return [Math.max(dt, -minStart), clampInt(dp, -lo, MAX_PITCH - hi)];
}

/** Moves the selected notes by `dt` ticks and `dp` semitones. */
export function moveNotes(piece, selection, dt, dp) {
  if (!selection.size) return { piece, selection };
  const [t, p] = allowedMove(selection, Math.round(dt), dp);
  if (!t && !p) return { piece, selection };
  return changeSelected(piece, selection, (n) => [n[0] + p, n[1] + t, n[2] + t, n[3]]);
}

/** Lengthens (or with a negative `dt` shortens) the selected notes, each at least `minLength`. */
export function resizeNotes(piece, selection, dt, minLength = 1) {
  if (!selection.size || !dt) return { piece, selection };
  return changeSelected(piece, selection, (n) => [n[0], n[1], Math.max(n[1] + minLength, n[2] + Math.round(dt)), n[3]]);
}

/** Sets the selected notes' velocity to `velocity` (1–127). */
export function setVelocity(piece, selection, velocity) {
  const v = clampInt(velocity, 1, 127);
  return changeSelected(piece, selection, (n) => [n[0], n[1], n[2], v]);
}

/** Changes the selected notes' velocities by `dv`, each kept within 1–127. */
export function changeVelocity(piece, selection, dv) {
  return changeSelected(piece, selection, (n) => [n[0], n[1], n[2], clampInt(n[3] + dv, 1, 127)]);
}

/** Removes the selected notes. */
export function deleteNotes(piece, selection) {
  const { piece: next } = changeSelected(piece, selection, () => null);
  return { piece: next, selection: new Set() };
}

/**
 * The selected notes as a clip to paste: each with its track's role and name, its times from the
 * clip's start, which is the bar line at or before the first note (so a pasted phrase keeps its
 * place in the bar), and the clip's length to the bar line after the last note.
 */
export function copyNotes(piece, selection) {
  const notes = [];
  for (const track of piece.tracks) {
    for (const n of track.notes) if (selection.has(n)) notes.push({ role: track.role, name: track.name, note: n });
  }
  if (!notes.length || !piece.bars.length) return null;
  const first = Math.min(...notes.map((x) => x.note[1]));
  const last = Math.max(...notes.map((x) => x.note[2]));
  const from = piece.bars[barAt(piece, first)];
  const lastBar = barAt(piece, Math.max(first, last - 1));
  const to = lastBar < piece.bars.length - 1 || last <= barEnd(piece, lastBar) ? barEnd(piece, lastBar) : last;
  return {
    length: to - from,
    notes: notes.map(({ role, name, note }) => ({ role, name, note: [note[0], note[1] - from, note[2] - from, note[3]] })),
  };
}

/**
 * Puts `clip`'s notes in at tick `at`, each into the track of its name, else of its role, else a
 * new track of that role. Returns { piece, selection } with the pasted notes selected.
 */
export function pasteNotes(piece, clip, at) {
  if (!clip?.notes.length) return { piece, selection: new Set() };
  const tracks = piece.tracks.map((t) => ({ ...t, notes: [...t.notes] }));
  const selection = new Set();
  for (const { role, name, note } of clip.notes) {
    let track = tracks.find((t) => t.name === name && t.role === role) ?? tracks.find((t) => t.role === role);
    if (!track) {
      track = { name, role, program: 0, notes: [] };
      tracks.push(track);
    }
    const n = [note[0], note[1] + at, note[2] + at, note[3]];
    track.notes.push(n);
    selection.add(n);
  }
  for (const t of tracks) t.notes.sort(byStart);
  return { piece: fitted({ ...piece, tracks }), selection };
}

/**
 * Duplicates bars [from, to) right after themselves: their notes (those starting in them) are
 * copied into bars [to, 2·to − from), over whatever is there, with the bars' chords; the piece
 * grows when it must. Returns { piece, selection } with the copies selected.
 */
export function duplicateBars(piece, from, to) {
  if (!(to > from) || from < 0 || to > piece.bars.length) return { piece, selection: new Set() };
  const t0 = piece.bars[from];
  const t1 = barEnd(piece, to - 1);
  const notes = [];
  for (const t of piece.tracks) {
    for (const n of t.notes) {
      if (n[1] >= t0 && n[1] < t1) notes.push({ role: t.role, name: t.name, note: [n[0], n[1] - t0, n[2] - t0, n[3]] });
    }
  }
  const { piece: next, selection } = notes.length
    ? pasteNotes(piece, { length: t1 - t0, notes }, t1)
    : { piece: fitted({ ...piece }), selection: new Set() };
  const n = to - from;
  setBarCount(next, Math.max(next.bars.length, to + n));
  next.promptBars = Math.max(next.promptBars ?? 0, Math.min(next.bars.length, to + n));
  const set = new Set(piece.chordsSet ?? []);
  for (let i = 0; i < n; i++) {
    next.chords[to + i] = piece.chords?.[from + i] ?? '';
    if (set.has(from + i)) set.add(to + i);
  }
  if (set.size) next.chordsSet = [...set].sort((a, b) => a - b);
  return { piece: next, selection };
}

/** The bars [from, to) an edit touched: those of the notes before and after it. */
export function touchedBars(piece, notes) {
  let from = Infinity;
  let to = -Infinity;
  for (const n of notes) {
    from = Math.min(from, barAt(piece, n[1]));
    to = Math.max(to, barAt(piece, Math.max(n[1], n[2] - 1)) + 1);
  }
  return from < to ? [from, Math.min(to, piece.bars.length)] : null;
}
