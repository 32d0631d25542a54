// Playing music in: a MIDI keyboard (Web MIDI) or the computer keyboard, and recording what is
// played into the piece's melody, quantised to the grid. The pure parts — key mapping, MIDI
// message decoding, the take and how it goes into a piece — are tested under Node
// (tests/js/keys.test.mjs); play-in.js wires them to the page, the sampler and the metronome.

import { barEnd, clonePiece, secondsAt, setBarCount, tickAtSeconds } from './piece.js';

/**
 * The computer keyboard as a piano (the layout of most DAWs): the home row from A is the white
 * keys from C, the row above the black keys; Z and X move an octave down and up.
 */
export const COMPUTER_KEYS = {
  a: 0, w: 1, s: 2, e: 3, d: 4, f: 5, t: 6, g: 7, y: 8, h: 9, u: 10, j: 11,
  k: 12, o: 13, l: 14, p: 15, ';': 16,
};

/** MIDI pitch of computer key `key` with C of `octave` as its A key (octave 4: middle C). */
export function computerKeyPitch(key, octave = 4) {
  const step = COMPUTER_KEYS[key.toLowerCase()];
  if (step === undefined) return null;
  const pitch = 12 * (octave + 1) + step;
  return pitch >= 0 && pitch <= 127 ? pitch : null;
}

/**
 * A MIDI message as a note event: `{ on: true, pitch, velocity }` for a note-on (velocity > 0),
 * `{ on: false, pitch }` for a note-off (or a note-on with velocity 0), null for anything else
 * (clock, sensing, controllers, sysex).
 */
export function noteMessage(data) {
  if (!data || data.length < 3) return null;
  const kind = data[0] & 0xf0;
  const pitch = data[1] & 0x7f;
  const velocity = data[2] & 0x7f;
  if (kind === 0x90 && velocity > 0) return { on: true, pitch, velocity };
  if (kind === 0x80 || kind === 0x90) return { on: false, pitch };
  return null;
}

/**
 * A MIDI message as a sustain pedal move: the value (0–127; 64 and up is down) of controller
 * 64 on any channel, null for anything else.
 */
export function pedalMessage(data) {
  if (!data || data.length < 3) return null;
  return (data[0] & 0xf0) === 0xb0 && (data[1] & 0x7f) === 64 ? data[2] & 0x7f : null;
}

/**
 * One take: notes played from `startTick` of `piece` onwards, timed in milliseconds from
 * `startMs` (the moment `startTick` sounds), quantised to `grid` ticks (0: not quantised).
 */
export class Take {
  constructor({ piece, startTick, startMs, grid }) {
    this.piece = piece;
    this.startTick = startTick;
    this.startMs = startMs;
    this.grid = grid;
    this.held = new Map(); // pitch → { startMs, velocity }
    this.done = []; // [pitch, startMs, endMs, velocity]
    this.pedals = []; // [ms, value]: the sustain pedal's moves
  }

  /** The sustain pedal moved to `value` at `ms`. */
  pedal(value, ms) {
    this.pedals.push([ms, value]);
  }

  /**
   * The sustain pedal of the take as a track's pedal, `[tick, 64, value]` in order, as of
   * `endMs` (ticks as played, not quantised): a pedal already down when the take began is
   * pressed at its start, and one still down at `endMs` lifts there.
   */
  pedalEvents(endMs) {
    const out = [];
    let down = false;
    for (const [ms, value] of this.pedals) {
      const tick = Math.max(this.startTick, Math.round(this.#tick(ms)));
      if (ms > endMs) break;
      if (tick === this.startTick && out.length && out.at(-1)[0] === tick) out.pop();
      out.push([tick, 64, value]);
      down = value >= 64;
    }
    if (down) out.push([Math.max(out.at(-1)[0], Math.round(this.#tick(endMs))), 64, 0]);
    return out;
  }

  on(pitch, velocity, ms) {
    this.off(pitch, ms);
    this.held.set(pitch, { startMs: ms, velocity });
  }

  off(pitch, ms) {
    const note = this.held.get(pitch);
    if (!note) return;
    this.held.delete(pitch);
    this.done.push([pitch, note.startMs, ms, note.velocity]);
  }

  #tick(ms) {
    const seconds = secondsAt(this.piece, this.startTick) + (ms - this.startMs) / 1000;
    return tickAtSeconds(this.piece, Math.max(0, seconds));
  }

  #snap(tick) {
    return this.grid > 0 ? Math.round(tick / this.grid) * this.grid : Math.round(tick);
  }

  /**
   * The notes `[pitch, start, end, velocity]` in ticks, sorted, as of `endMs` (keys still down
   * end there). A note struck before the take began (in the count-in) counts from the start
   * if it is within half a grid step of it, and is dropped otherwise.
   */
  notes(endMs) {
    const all = [...this.done, ...[...this.held].map(([p, n]) => [p, n.startMs, endMs, n.velocity])];
    const step = Math.max(1, this.grid);
    const out = [];
    for (const [pitch, s, e, velocity] of all) {
      let start = this.#snap(this.#tick(s));
      if (start < this.startTick) {
        if (this.startTick - this.#tick(s) > step / 2) continue;
        start = this.startTick;
      }
      const end = Math.max(start + step, this.#snap(this.#tick(e)));
      out.push([pitch, start, end, velocity]);
    }
    out.sort((a, b) => a[1] - b[1] || a[0] - b[0]);
    return out;
  }
}

/**
 * `piece` with `notes` recorded into its melody between `fromTick` and `toTick`: the melody's
 * notes starting there are replaced (a new MELODY track when there is none), and so is its
 * pedal there by the take's `pedal` ([tick, 64, value], from `Take.pedalEvents`); the bars grow
 * to hold the last note, and the prompt covers the recorded music. Returns a new piece.
 */
export function recordInto(piece, notes, fromTick, toTick, pedal = []) {
  const next = clonePiece(piece);
  let melody = next.tracks.find((t) => t.role === 'melody');
  if (!melody) {
    melody = { name: 'MELODY', role: 'melody', program: 0, notes: [] };
    next.tracks.unshift(melody);
  }
  melody.notes = melody.notes
    .filter((n) => n[1] < fromTick || n[1] >= toTick)
    .concat(notes.map((n) => [...n]))
    .sort((a, b) => a[1] - b[1] || a[0] - b[0]);
  if (pedal.length || melody.pedal?.length) {
    const outside = (melody.pedal ?? []).filter((e) => e[0] < fromTick || e[0] > toTick);
    melody.pedal = outside.concat(pedal.map((e) => [...e])).sort((a, b) => a[0] - b[0]);
  }
  const end = Math.max(next.endTick ?? 0, ...notes.map((n) => n[2]));
  next.endTick = end;
  let bars = next.bars.length;
  while (barEnd(next, bars - 1) < end) {
    next.bars.push(barEnd(next, next.bars.length - 1));
    bars++;
  }
  let last = 0;
  while (last + 1 < next.bars.length && next.bars[last + 1] < end) last++;
  next.promptBars = Math.max(next.promptBars, last + 1);
  setBarCount(next, Math.max(next.bars.length, next.promptBars));
  return next;
}

/** An empty piece to record into: `bars` bars of 4/4 at `bpm`, no chords, one phrase. */
export function emptyPiece({ bars = 8, bpm = 100, ppq = 480, name = 'recording.mid' } = {}) {
  return {
    version: 1,
    name,
    ppq,
    tempos: [[0, Math.round(60e6 / bpm)]],
    timeSignatures: [[0, 4, 4]],
    bars: Array.from({ length: bars }, (_, i) => i * 4 * ppq),
    endTick: 0,
    tracks: [{ name: 'MELODY', role: 'melody', program: 0, notes: [] }],
    chords: new Array(bars).fill(''),
    phrases: [['A', bars]],
    promptBars: 1,
  };
}
