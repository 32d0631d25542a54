// What a generation asks for and how its result is counted, pure: the bars under a selection,
// the piece shown while a model writes, the options sent to the Worker, the streamed notes, the
// status lines. No DOM: generate.js runs the generation with these, and
// tests/js/generation-plan.test.mjs checks them under Node.
import { clonePiece } from './piece.js';
import { pitchRange } from './labels.js';
import { textureOf } from './texture.js';

/** The bars `[from, to)` under the tick range `range` ([fromTick, toTick]), or null. */
export function barsUnder(bars, range) {
  if (!range || !bars?.length) return null;
  let from = 0;
  while (from + 1 < bars.length && bars[from + 1] <= range[0]) from++;
  let to = from + 1;
  while (to < bars.length && bars[to] < range[1]) to++;
  return [from, to];
}

/** The start tick of bar `b` (from 0); past the last entry, bars of the last bar's length. */
export function barTick(piece, b) {
  const bars = piece.bars;
  if (b < bars.length) return bars[b];
  const last = bars.length - 1;
  const len = bars.length >= 2 ? bars[last] - bars[last - 1] : 4 * piece.ppq;
  return (bars[last] ?? 0) + len * (b - last);
}

/** Whether the piece holds any note. */
export function hasNotes(piece) {
  return !!piece?.tracks.some((t) => t.notes.length);
}

/** The manifest's default model of `task` (its first when none is marked), or null. */
export function defaultEntry(manifest, task) {
  const all = (manifest ?? []).filter((m) => m.task.toLowerCase() === task);
  return all.find((m) => m.default) ?? all[0] ?? null;
}

/** The manifest's harmonizer (its default one), or null. */
export function harmonizerEntry(manifest) {
  return defaultEntry(manifest, 'harmonization');
}

/**
 * Whether no part of `piece` carries the harmony (a melody, and no accompaniment): its chord
 * lane is then the harmonizer's.
 */
export function needsHarmonizer(piece) {
  const has = (role) => !!piece?.tracks.some((t) => t.role === role && t.notes.length);
  return has('melody') && !has('piano') && !has('generated');
}

/** What the chord lane's note says about where its chords came from ('' when unknown). */
export function chordSourceText(piece) {
  switch (piece?.chordSource) {
    case 'harmonizer':
      return 'Chords: proposed by the harmonizer from the melody';
    case 'detector':
      return 'Chords: detected from the notes';
    case 'score':
      return "Chords: the score's own chord symbols";
    default:
      return '';
  }
}

/** Whether the piece has a piano part (the pianist's or a generated one) to keep around bars. */
export function hasPiano(piece) {
  return !!piece?.tracks.some((t) => (t.role === 'generated' || t.role === 'piano') && t.notes.length);
}

/**
 * The most tokens a continuation model reads at once: the window it (or, fine-tuned, its base
 * in `manifest`) was trained on; null (everything) when no entry says.
 */
export function contextOf(entry, manifest) {
  const trained = entry?.user ? (manifest.find((m) => m.name === entry.training?.base) ?? null) : entry;
  const w = trained?.training?.options?.window;
  return Number.isInteger(w) && w >= 32 ? w : null;
}

/** The tick range of bars `region` ([from, to)) in `piece`, or null for the whole piece. */
export function regionTicks(piece, region) {
  return region ? [barTick(piece, region[0]), barTick(piece, region[1])] : null;
}

/** Whether note `n` starts inside the tick range `ticks`. */
export function startsIn(n, ticks) {
  return n[1] >= ticks[0] && n[1] < ticks[1];
}

/**
 * The piece shown while a model writes into `before`: accompaniment drops the previous piano
 * and generated tracks; a continuation of a region drops every note starting in it; a melody
 * of a region drops the melody's notes starting in it. `track` is the empty track the streamed
 * notes go into (already in `live`).
 */
export function draftPiece(before, task, ticks) {
  const live = clonePiece(before);
  const melody = task === 'melody';
  const track = {
    name: { accompaniment: 'PIANO', melody: 'MELODY (writing)' }[task] ?? 'CONTINUATION',
    role: melody ? 'melody' : 'generated',
    program: 0,
    notes: [],
  };
  if (melody) {
    if (ticks) for (const t of live.tracks.filter((t) => t.role === 'melody')) t.notes = t.notes.filter((n) => !startsIn(n, ticks));
  } else if (task === 'accompaniment') {
    live.tracks = live.tracks.filter((t) => t.role !== 'piano' && t.role !== 'generated');
  } else if (ticks) {
    for (const t of live.tracks) t.notes = t.notes.filter((n) => !startsIn(n, ticks));
  }
  live.tracks.push(track);
  return { live, track };
}

/**
 * The tick a generation writes from: the region's start, 0 (an accompaniment; a melody for a
 * piece without one), or where the music ends (a continuation; a melody of the planned bars).
 */
export function writesFrom(before, task, ticks) {
  if (ticks) return ticks[0];
  const fromStart = task === 'accompaniment' || (task === 'melody' && !hasMelody(before));
  return fromStart ? 0 : before.bars[Math.max(0, before.promptBars - 1)];
}

/** Whether the piece has melody notes. */
export function hasMelody(piece) {
  return !!piece?.tracks.some((t) => t.role === 'melody' && t.notes.length);
}

/**
 * The `generate` request's options from the panel's settings `s`: each task's own settings
 * (the piano's temperature for an accompaniment, the continuation's for a continuation).
 */
export function generateOptions(s, { task, region, context }) {
  const continuation = task === 'continuation';
  const accompaniment = task === 'accompaniment';
  // A melody takes the continuation's temperature and echo (how strongly a repeated phrase
  // leans towards its first occurrence), nothing of the piano's.
  const sampled = continuation || task === 'melody';
  return {
    seed: s.seed,
    threshold: accompaniment ? s.threshold : null,
    pianoTemperature: accompaniment ? s.pianoTemperature : null,
    region,
    temperature: sampled ? s.temperature : null,
    echo: sampled ? s.echo ?? null : null,
    textureEcho: accompaniment ? s.textureEcho ?? null : null,
    // A texture to play like (texture.js): a gallery entry or bars chosen; null: the song's own.
    texture: accompaniment ? textureOf(s) : null,
    // The piano's sustain pedal over the bars written (an accompaniment's piano, a
    // continuation's new bars): 'learnt', 'played' or 'off' (settings saved before there was
    // one: learnt, the engine's default).
    ...(accompaniment || continuation ? { pedal: s.writtenPedal ?? 'learnt' } : {}),
    // A singer's range the field could not read is said before (generate.js); here: none.
    melodyRange: task === 'melody' && s.melodyRange ? pitchRange(s.melodyRange).range ?? null : null,
    density: task === 'melody' ? null : s.density ?? null,
    key: continuation ? s.keyHold ?? null : null,
    tokens: task === 'melody' ? null : s.maxTokens ?? null,
    // A continuation model reads at most the window it was trained on (the engine's
    // ContinueOptions::context).
    context: task === 'continuation' && !s.readAll ? context : null,
    bars: task === 'melody' ? null : s.bars ?? null,
    // Several to audition and keep (the k-th with seed + k); 1 writes the piece at once.
    alternatives: s.alternatives ?? null,
    watch: { layer: s.layer, head: s.head },
  };
}

/** Notes streamed as a flat [pitch, start, end, velocity, ...] array, as [[p, s, e, v], ...]. */
export function unflattenNotes(flat) {
  const notes = new Array(flat.length / 4);
  for (let i = 0; i < notes.length; i++) {
    notes[i] = [flat[4 * i], flat[4 * i + 1], flat[4 * i + 2], flat[4 * i + 3]];
  }
  return notes;
}

/** How many notes a generation wrote: into `result` and not in `before` (or inside the region). */
export function notesWritten(before, result, { task, trackName, ticks }) {
  if (task === 'melody') {
    const melody = (p) => p.tracks.filter((t) => t.role === 'melody').flatMap((t) => t.notes);
    return ticks
      ? melody(result).filter((n) => startsIn(n, ticks)).length
      : melody(result).length - melody(before).length;
  }
  const written = (p) => p.tracks.filter((t) => t.name === trackName && t.role === 'generated')
    .reduce((n, t) => n + t.notes.length, 0);
  return ticks && task === 'continuation'
    ? result.tracks.filter((t) => t.role === 'generated')
      .reduce((n, t) => n + t.notes.filter((note) => startsIn(note, ticks)).length, 0)
    : written(result) - (task === 'continuation' ? written(before) : 0);
}

/**
 * The progress line: "bar 3 of 8 · 120 tokens · 85 tokens/s" for a continuation asked for
 * bars, "120 of 512 tokens · 85 tokens/s" otherwise, or the prompt being read.
 */
export function progressText(p, task, seconds) {
  const unit = task === 'continuation' ? 'tokens' : 'steps';
  // Alternatives: written together ([0, k]: a step for all) or one after another ([i, k]).
  const [which, count] = p.alternative ?? [0, 1];
  const of = count > 1 ? (which ? `alternative ${which} of ${count} · ` : `${count} alternatives together · `) : '';
  if (!p.done) return which > 1 ? `${of}reading the prompt…` : 'Reading the prompt…';
  const rate = `${(p.done / seconds).toFixed(0)} ${unit}/s`;
  return p.bars
    ? `${of}bar ${Math.max(1, p.bars[0])} of ${p.bars[1]} · ${p.done} ${unit} · ${rate}`
    : `${of}${p.done} of ${p.total} ${unit} · ${rate}`;
}

/**
 * How far a generation is, from 0 to 1: in bars for a continuation asked for bars; over all
 * the alternatives when they are written one after another.
 */
export function progressShare(p) {
  const own = p.bars ? (p.bars[1] ? Math.max(0, p.bars[0] - 1) / p.bars[1] : 0) : p.total ? p.done / p.total : 0;
  const [which, count] = p.alternative ?? [0, 1];
  return which ? (which - 1 + own) / count : own;
}

/**
 * What a continuation's last progress report (`last`) says about its end: null when it wrote
 * the bars asked, else the sentence that says the token limit stopped it.
 */
export function tokenLimitText(last) {
  if (!last?.bars || last.done < last.total) return null;
  const [begun, asked] = last.bars;
  const whole = Math.max(0, begun - 1);
  if (whole >= asked) return null;
  return `It stopped at the token limit (${last.total} tokens) after ${whole} of the ${asked} bars asked: raise “Token limit” to let it finish.`;
}

/** The line a finished generation leaves. */
export function doneText({ task, region, notes, ms, gpu, seed, last }) {
  const what = region
    ? `Bars ${region[0] + 1}–${region[1]} rewritten; ${task}`
    : { continuation: 'Continuation', melody: 'Melody' }[task] ?? 'Accompaniment';
  const whole = last?.bars && (last.done < last.total ? last.bars[0] : Math.max(0, last.bars[0] - 1));
  const bars = !region && last?.bars ? `${Math.min(whole, last.bars[1])} bars, ` : '';
  const done = `${what}: ${bars}${notes} notes in ${(ms / 1000).toFixed(1)} s on ${gpu ? 'WebGPU' : 'the CPU'} (seed ${seed}).`;
  const limit = task === 'continuation' ? tokenLimitText(last) : null;
  return limit ? `${done} ${limit}` : done;
}
