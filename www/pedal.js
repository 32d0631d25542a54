// The sustain pedal as the sampler plays it: the spans a track's pedal is down and the tick
// each note stops sounding under it. The same rule as `src/music/pedal.rs`: a note sounds until
// its key is released or, when the sustain pedal (controller 64) is down then, until the pedal
// lifts; a new strike of the same pitch ends it sooner. Values of 64 and up are down; the
// half-pedal values below are kept as played and sound as up. Controllers 66 (sostenuto) and
// 67 (soft) are kept and exported, not sounded.
//
// A track's `pedal` is a list of [tick, controller, value] in tick order (piece.js).

export const SUSTAIN = 64;
export const PEDALS = [64, 66, 67];
/** The value from which the sustain pedal is down. */
export const DOWN = 64;

/**
 * The spans [from, to) in ticks where the sustain pedal of `pedal` is down; a pedal never
 * lifted stays down until `end` (or just after its press, when that is later).
 */
export function downSpans(pedal, end) {
  const spans = [];
  let pressed = null;
  for (const [tick, controller, value] of pedal ?? []) {
    if (controller !== SUSTAIN) continue;
    const down = value >= DOWN;
    if (pressed === null && down) pressed = tick;
    else if (pressed !== null && !down) {
      if (tick > pressed) spans.push([pressed, tick]);
      pressed = null;
    }
  }
  if (pressed !== null) spans.push([pressed, Math.max(end, pressed + 1)]);
  return spans;
}

/**
 * The tick each of `notes` ([pitch, start, end, ...], any order) stops sounding under `spans`
 * (from downSpans): its written end, or the lift of a pedal down at that end, but no later
 * than the next start of the same pitch.
 */
export function soundingEnds(notes, spans) {
  const order = notes.map((_, i) => i);
  order.sort((a, b) => notes[a][0] - notes[b][0] || notes[a][1] - notes[b][1]);
  const ends = new Array(notes.length);
  for (let k = 0; k < order.length; k++) {
    const [pitch, start, written] = notes[order[k]];
    const end = Math.max(written, start);
    // The first span that ends after `end`: binary search (spans are in order, apart).
    let lo = 0;
    let hi = spans.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (spans[mid][1] <= end) lo = mid + 1;
      else hi = mid;
    }
    const held = lo < spans.length && spans[lo][0] <= end ? spans[lo][1] : end;
    const next = notes[order[k + 1]];
    const restrike = next && next[0] === pitch && next[1] > start ? next[1] : Infinity;
    ends[order[k]] = restrike > end ? Math.min(held, restrike) : end;
  }
  return ends;
}

/**
 * Whether `pedal` is a track's pedal as pianoformer keeps it, or a sentence saying what is
 * wrong with it (for share links and saved pieces).
 */
export function pedalProblem(pedal) {
  if (pedal === undefined) return null;
  if (!Array.isArray(pedal)) return 'its pedal is not a list of [tick, controller, value]';
  let last = -Infinity;
  for (const event of pedal) {
    if (!Array.isArray(event) || event.length !== 3 || !event.every(Number.isInteger)) {
      return 'its pedal is not a list of [tick, controller, value]';
    }
    const [tick, controller, value] = event;
    if (tick < 0 || !PEDALS.includes(controller) || value < 0 || value > 127) {
      return (
        `a pedal event cannot be (controller ${controller}, value ${value} at tick ${tick}; ` +
        'controllers 64, 66 and 67 take 0–127)'
      );
    }
    if (tick < last) return 'its pedal is out of order';
    last = tick;
  }
  return null;
}

/** Whether the sustain pedal of `pedal` is down at `tick` (after every event at or before it). */
export function downAt(pedal, tick) {
  let down = false;
  for (const [t, controller, value] of pedal ?? []) {
    if (t > tick) break;
    if (controller === SUSTAIN) down = value >= DOWN;
  }
  return down;
}

/**
 * `old` pedal events with the ticks [from, to) given to `add` (its events there, in order): a
 * sustain pedal down in `old` as the span starts lifts at `from`, and one down in `old` at
 * `to` is pressed again there, so both sides sound as they did (`src/music/pedal.rs`'s
 * `splice`).
 */
export function splicePedal(old, add, from, to) {
  const out = (old ?? []).filter((e) => e[0] < from);
  if (from > 0 && downAt(old, from - 1)) out.push([from, SUSTAIN, 0]);
  out.push(...add.filter((e) => e[0] >= from && e[0] < to));
  const inside = downAt(out, to - 1);
  const after = downAt(old, to);
  if (inside !== after) out.push([to, SUSTAIN, after ? 127 : 0]);
  out.push(...(old ?? []).filter((e) => e[0] >= to && !(e[0] === to && e[1] === SUSTAIN)));
  return out.map((e) => [...e]).sort((a, b) => a[0] - b[0]);
}

/**
 * The index of the track whose pedal the roll's pedal lane shows and edits: the generated
 * piano, else the pianist's, else the melody (a take's pedal); -1 when there is none of them.
 */
export function pedalTrack(piece) {
  for (const role of ['generated', 'piano', 'melody']) {
    const i = piece?.tracks?.findIndex((t) => t.role === role && (t.notes.length || t.pedal?.length)) ?? -1;
    if (i >= 0) return i;
  }
  return -1;
}

/** A copy of `piece` with track `index`'s pedal `pedal`. */
function withPedal(piece, index, pedal) {
  const tracks = piece.tracks.map((t, i) => (i === index ? { ...t, pedal } : t));
  return { ...piece, tracks };
}

/** `piece` with the sustain pedal of track `index` down over the ticks [from, to) (a span drawn). */
export function drawPedal(piece, index, from, to) {
  const [a, b] = [Math.max(0, Math.min(from, to)), Math.max(from, to)];
  if (index < 0 || b <= a) return piece;
  const old = piece.tracks[index].pedal ?? [];
  const add = [[a, SUSTAIN, 127], ...(downAt(old, b) ? [] : [[b, SUSTAIN, 0]])];
  const held = splicePedal(old, add, a, b + 1);
  return withPedal(piece, index, held);
}

/** `piece` with the down span of track `index` that holds `tick` lifted (the same piece when none does). */
export function liftPedalAt(piece, index, tick) {
  if (index < 0) return piece;
  const old = piece.tracks[index].pedal ?? [];
  const span = downSpans(old, Infinity).find(([a, b]) => a <= tick && tick < b);
  if (!span) return piece;
  const [a, b] = span;
  // A pedal never lifted: its press and everything of the sustain pedal after it go.
  if (!Number.isFinite(b)) return withPedal(piece, index, old.filter((e) => e[0] < a || e[1] !== SUSTAIN));
  return withPedal(piece, index, splicePedal(old, [], a, b));
}
