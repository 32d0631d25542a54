// The harmonizer: chords for a melody whose notes carry no harmony. A file (or a take) with a
// melody and no accompaniment gets its chord lane from the harmonizer model instead of the
// rule-based detector (which reads one or two melody notes a beat as sus chords); "Suggest
// chords" proposes a progression for the selected bars (or the whole piece), another press
// another alternative. The lane says which one filled it.
import { status } from './page.js';
import { store } from './page-store.js';
import { call } from './worker-client.js';
import { ensureModel } from './model-loader.js';
import { clonePiece, fitPhrases } from './piece.js';
import { harmonizerEntry, needsHarmonizer } from './generation-plan.js';

/**
 * A copy of `piece` whose chord lane over bars `[from, to)` (every bar of the melody when
 * `bars` is null) is the harmonizer's: the most likely progression, or with `seed` one drawn
 * with it, as colourful as `colour` (0 plain … 1, the default, colourful). Throws in words when no harmonizer is available.
 */
export async function harmonized(piece, { bars = null, seed = null, colour = null } = {}) {
  const out = await ask(piece, { bars, seed, colour });
  return withCells(piece, out.from, out.cells);
}

/**
 * Up to `count` alternative progressions for bars `[from, to)` (every bar when `bars` is
 * null), the most likely first: each `{piece, cells, logProb, voicing}`, `piece` a copy of
 * `piece` with those chords in its lane, `voicing` their block chords to audition
 * ([pitch, on, off, velocity] notes).
 */
export async function harmonizedAlternatives(piece, { bars = null, seed = null, count = 4 } = {}) {
  const out = await ask(piece, { bars, seed, count });
  return out.alternatives.map((a) => ({ ...a, piece: withCells(piece, out.from, a.cells) }));
}

/** The Worker's `harmonize` for `piece` with `options`, timed into the page's status. */
async function ask(piece, options) {
  const entry = harmonizerEntry(store.manifest);
  if (!entry) throw new Error('no harmonizer model is installed (www/models/manifest.json lists none)');
  const asked = performance.now();
  await ensureModel(entry);
  const started = performance.now();
  const out = await call('harmonize', { model: entry.name, piece, options });
  // `load`: fetching and loading the model first (its warm-up included), when it was not loaded.
  status.harmonizations.push({ bars: out.cells.length, ms: performance.now() - started, load: started - asked });
  return out;
}

/** A copy of `piece` with `cells` in its chord lane from bar `from`. */
function withCells(piece, from, cells) {
  const next = clonePiece(piece);
  cells.forEach((cell, i) => {
    if (from + i < next.chords.length) next.chords[from + i] = cell;
  });
  next.chordSource = 'harmonizer';
  return next;
}

/**
 * `piece` as a file or take opens: with the harmonizer's chords when its notes carry no
 * harmony and a harmonizer is installed; else as it came (detected chords), with a reason
 * when the harmonizer failed.
 */
export async function withLaneFilled(piece) {
  if (!needsHarmonizer(piece) || !harmonizerEntry(store.manifest)) {
    return { piece: { ...piece, chordSource: piece.chordSource ?? 'detector' } };
  }
  try {
    return { piece: await harmonized(piece) };
  } catch (e) {
    return { piece: { ...piece, chordSource: 'detector' }, problem: e.message };
  }
}

/**
 * The lanes of `piece` after its notes were edited in bars [from, to): those bars' chords filled
 * again from the notes, by what fills a lane for this kind of piece (the harmonizer for a melody
 * alone, else the detector), and the phrases detected again, except where the person set them
 * (a chord they chose or accepted: `chordsSet`; any phrase they edited: `phrasesSet`). Returns
 * a new piece, or `piece` itself when nothing changed.
 */
export async function relabelled(piece, [from, to]) {
  const set = new Set(piece.chordsSet ?? []);
  const open = [];
  for (let bar = from; bar < Math.min(to, piece.bars.length); bar++) if (!set.has(bar)) open.push(bar);
  const bytes = await call('writeMidi', { piece });
  const buffer = bytes.buffer;
  const detected = await call('readMidi', { bytes: buffer, name: piece.name }, { transfer: [buffer] });
  const fresh = new Map(detected.bars.map((tick, i) => [tick, detected.chords[i]]));
  let source = 'detector';
  if (open.length && needsHarmonizer(piece) && harmonizerEntry(store.manifest)) {
    const lo = open[0];
    const hi = open.at(-1) + 1;
    const byHarmonizer = await harmonized(piece, { bars: [lo, hi] });
    for (let bar = lo; bar < hi; bar++) fresh.set(piece.bars[bar], byHarmonizer.chords[bar]);
    source = 'harmonizer';
  }
  // The notes are shared, not copied: the roll's selection of them stays as it was.
  const next = { ...piece, chords: [...piece.chords], phrases: piece.phrases.map((p) => [...p]) };
  if (open.length) next.chordSource = source;
  let changed = false;
  for (const bar of open) {
    const chord = fresh.get(piece.bars[bar]) ?? '';
    if (chord !== next.chords[bar]) {
      next.chords[bar] = chord;
      changed = true;
    }
  }
  if (!piece.phrasesSet && detected.phrases?.length) {
    next.phrases = detected.phrases.map((p) => [...p]);
    fitPhrases(next);
    changed ||= JSON.stringify(next.phrases) !== JSON.stringify(piece.phrases);
  }
  return changed ? next : piece;
}
