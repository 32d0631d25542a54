// The piece: the page's one source of truth, plain JSON (saved for reload, packed into share
// links, sent to the Worker). The Worker reads MIDI into it (`readMidi`) and writes it back.
//
// {
//   version: 1,
//   name: 'song.mid',
//   ppq: 480,                                   ticks per quarter note
//   tempos: [[tick, microsecondsPerQuarter]],   sorted, the first at tick 0
//   timeSignatures: [[tick, numerator, denominator]],
//   bars: [tick, ...],                          start of every bar of the piece, plus planned
//                                               bars past its end (as many as the labels)
//   endTick: number,                            end of the last note
//   tracks: [{ name, role, program, notes: [[pitch, start, end, velocity], ...] }],
//        role: 'melody' | 'bridge' | 'piano' | 'generated' | 'other'
//        (melody and bridge are the model's input; piano is an accompaniment, generated the
//        notes a model wrote; notes sorted by start); optional channel (0-based, 9 = drums);
//        optional pedal: [[tick, controller, value], ...] in tick order (64 sustain, down
//        from 64; 66 sostenuto; 67 soft; pedal.js)
//   chords: ['C', 'Am', 'G7', '', ...],         one per bar ('' = no chord), bars.length long
//   phrases: [['i', 4], ['A', 8], ['A', 8]],    phrases in order from bar 0: letter and bars,
//                                               covering bars.length (upper case: melodic
//                                               phrase, same letter = repeat; lower: intro,
//                                               bridge, outro...)
//   promptBars: number,                         bars that hold the user's music; the labels
//                                               after it only plan what is generated
// }

export const PIECE_VERSION = 1;
export const ROLES = ['melody', 'bridge', 'piano', 'generated', 'other'];

/** Seconds at `tick`, following the tempo map; `scale` > 1 plays faster. */
export function secondsAt(piece, tick, scale = 1) {
  const tempos = piece.tempos.length ? piece.tempos : [[0, 500000]];
  let seconds = 0;
  let [lastTick, us] = [0, tempos[0][1]];
  for (const [t, u] of tempos) {
    if (t >= tick) break;
    seconds += ((t - lastTick) * us) / 1e6 / piece.ppq;
    [lastTick, us] = [t, u];
  }
  seconds += ((tick - lastTick) * us) / 1e6 / piece.ppq;
  return seconds / scale;
}

/** The tick at `seconds` (inverse of `secondsAt`). */
export function tickAtSeconds(piece, seconds, scale = 1) {
  const tempos = piece.tempos.length ? piece.tempos : [[0, 500000]];
  let remaining = seconds * scale;
  let [lastTick, us] = [0, tempos[0][1]];
  for (const [t, u] of tempos) {
    const span = ((t - lastTick) * us) / 1e6 / piece.ppq;
    if (t > lastTick && span >= remaining) break;
    if (t > lastTick) remaining -= span;
    [lastTick, us] = [t, u];
  }
  return lastTick + (remaining * 1e6 * piece.ppq) / us;
}

/** Length of bar `i` in ticks (bars past the known ones repeat the last length). */
export function barLength(piece, i) {
  const b = piece.bars;
  if (i + 1 < b.length) return b[i + 1] - b[i];
  if (b.length >= 2) return b[b.length - 1] - b[b.length - 2];
  return piece.ppq * 4;
}

/** Tick where bar `i` ends. */
export function barEnd(piece, i) {
  return piece.bars[i] + barLength(piece, i);
}

/**
 * Sets the number of bars to `count` (at least the music's `promptBars`): planned bars are added
 * at the last bar length with no chord, and the last phrase grows or shrinks to fit.
 */
export function setBarCount(piece, count) {
  count = Math.max(count, piece.promptBars, 1);
  while (piece.bars.length < count) {
    const i = piece.bars.length - 1;
    piece.bars.push(piece.bars[i] + barLength(piece, i));
  }
  piece.bars.length = count;
  while (piece.chords.length < count) piece.chords.push('');
  piece.chords.length = count;
  fitPhrases(piece);
}

/** Makes the phrases cover exactly the bars (the last phrase grows, or the list is cut). */
export function fitPhrases(piece) {
  const bars = piece.bars.length;
  const kept = [];
  let covered = 0;
  for (const [letter, n] of piece.phrases) {
    if (covered >= bars) break;
    const take = Math.min(n, bars - covered);
    if (take > 0) kept.push([letter, take]);
    covered += take;
  }
  if (covered < bars) {
    if (kept.length) kept.at(-1)[1] += bars - covered;
    else kept.push(['A', bars]);
  }
  piece.phrases = kept;
}

/** The index of the phrase holding `bar`, and the bar it starts on. */
export function phraseIndex(piece, bar) {
  let from = 0;
  for (let i = 0; i < piece.phrases.length; i++) {
    const n = piece.phrases[i][1];
    if (bar < from + n) return { index: i, from };
    from += n;
  }
  return { index: piece.phrases.length - 1, from: from - (piece.phrases.at(-1)?.[1] ?? 0) };
}

/**
 * Relabels the phrase holding `bar` as `letter`; with `split`, a new phrase starts at `bar`
 * (the one holding it ends just before).
 */
export function setPhrase(piece, bar, letter, split = false) {
  const { index, from } = phraseIndex(piece, bar);
  const [old, n] = piece.phrases[index];
  if (split && bar > from) {
    piece.phrases.splice(index, 1, [old, bar - from], [letter, from + n - bar]);
  } else {
    piece.phrases[index] = [letter, n];
  }
}

/** The bar holding `tick`. */
export function barAt(piece, tick) {
  const b = piece.bars;
  let lo = 0;
  let hi = b.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (b[mid] <= tick) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** Number of notes over all tracks. */
export function noteCount(piece) {
  return piece.tracks.reduce((n, t) => n + t.notes.length, 0);
}

/** A deep copy (pieces are plain JSON). */
export function clonePiece(piece) {
  return structuredClone(piece);
}

/**
 * A piece the Worker wrote from `before` (a generation's result), with what only the page
 * keeps about `before`: the bars whose chord the person set by hand (`chordsSet`) and whether
 * they edited the phrases (`phrasesSet`). The Worker's piece has no such fields; without them
 * the next note edit would refill a chord the person chose.
 */
export function withPageMarks(result, before) {
  const out = { ...result };
  for (const key of ['chordsSet', 'phrasesSet']) {
    if (before?.[key] !== undefined && out[key] === undefined) out[key] = before[key];
  }
  return out;
}
