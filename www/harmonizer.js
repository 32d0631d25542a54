// The harmonizer: chords for a melody whose notes carry no harmony. A file (or a take) with a
// melody and no accompaniment gets its chord lane from the harmonizer model instead of the
// rule-based detector (which reads one or two melody notes a beat as sus chords); "Suggest
// chords" proposes a progression for the selected bars (or the whole piece), another press
// another alternative. The lane says which one filled it.
import { app, status } from './page.js';
import { call } from './worker-client.js';
import { ensureModel } from './models.js';
import { clonePiece } from './piece.js';
import { harmonizerEntry, needsHarmonizer } from './generation-plan.js';

/**
 * A copy of `piece` whose chord lane over bars `[from, to)` (every bar of the melody when
 * `bars` is null) is the harmonizer's: the most likely progression, or with `seed` one drawn
 * with it. Throws in words when no harmonizer is available.
 */
export async function harmonized(piece, { bars = null, seed = null } = {}) {
  const entry = harmonizerEntry(app.manifest);
  if (!entry) throw new Error('no harmonizer model is installed (www/models/manifest.json lists none)');
  await ensureModel(entry);
  const started = performance.now();
  const out = await call('harmonize', { model: entry.name, piece, options: { bars, seed } });
  status.harmonizations.push({ bars: out.cells.length, ms: performance.now() - started });
  const next = clonePiece(piece);
  out.cells.forEach((cell, i) => {
    if (out.from + i < next.chords.length) next.chords[out.from + i] = cell;
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
  if (!needsHarmonizer(piece) || !harmonizerEntry(app.manifest)) {
    return { piece: { ...piece, chordSource: piece.chordSource ?? 'detector' } };
  }
  try {
    return { piece: await harmonized(piece) };
  } catch (e) {
    return { piece: { ...piece, chordSource: 'detector' }, problem: e.message };
  }
}
