// Live playing, the parts with no page in them (tested in Node): which models play live, when
// each sixteenth of a take sounds, the figures of the live meter, and the take's piano put
// into the piece.
import { barEnd, setBarCount } from './piece.js';
import { splicePedal } from './pedal.js';

/**
 * The models a live take plays with: `{ model, harmonizer }` manifest entries. The piano is a
 * step-by-step accompaniment: a model trained to read the melody late (made for live playing)
 * when there is one — the chosen one if it is such a model — else the chosen accompaniment if
 * it writes step by step, else the default one. The chords of open bars come from a causal
 * harmonizer (null when none is installed: those bars then have no chord). Throws in words
 * when no model can play live.
 */
export function liveModels(manifest, chosen) {
  const all = manifest ?? [];
  const stepwise = (m) => m?.task === 'accompaniment' && m.config?.conditioning?.piano === true;
  const late = (m) => stepwise(m) && (m.config.conditioning.melody_lag ?? 0) >= 1;
  const byDefault = (list) => list.find((m) => m.default) ?? list[0] ?? null;
  const model =
    (late(chosen) ? chosen : null) ??
    byDefault(all.filter(late)) ??
    (stepwise(chosen) ? chosen : null) ??
    byDefault(all.filter(stepwise));
  if (!model) {
    throw new Error('no installed accompaniment model writes step by step, so none can play live');
  }
  const harmonizer = all.find((m) => m.task === 'harmonization' && m.config?.direction === 'causal') ?? null;
  return { model, harmonizer };
}

/** The tick at which step `step` of a take's grid (`liveStart`'s reply) starts. */
export function stepTick(grid, step) {
  const spb = grid.stepsPerBeat;
  const beat = Math.floor(step / spb);
  const ticks = grid.beatTicks;
  if (beat + 1 < ticks.length) {
    return ticks[beat] + ((step % spb) / spb) * (ticks[beat + 1] - ticks[beat]);
  }
  const last = ticks.length - 1;
  const beatTicks = ticks[last] - ticks[last - 1];
  return ticks[last] + ((step - last * spb) / spb) * beatTicks;
}

/** The value at quantile `q` (0–1) of `values` (nearest rank), or null when there are none. */
export function quantile(values, q) {
  if (!values.length) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

/**
 * What the live meter shows of a take so far (`stats`: `{ steps, hits, latencies }`, the
 * decision latencies in ms): steps decided, the share ready in time, the latencies' p50, p99
 * and maximum.
 */
export function meterFigures(stats) {
  const { steps, hits, latencies } = stats;
  return {
    steps,
    hitRate: steps ? hits / steps : null,
    p50: quantile(latencies, 0.5),
    p99: quantile(latencies, 0.99),
    max: latencies.length ? Math.max(...latencies) : null,
  };
}

/** The meter's line, in words. */
export function meterText(stats) {
  const f = meterFigures(stats);
  if (!f.steps) return 'Live piano: waiting for the first sixteenth…';
  const ms = (v) => `${v.toFixed(v < 10 ? 1 : 0)} ms`;
  const line =
    `Live piano: ${f.steps} sixteenths, ${(100 * f.hitRate).toFixed(f.hitRate === 1 ? 0 : 1)} % in time · ` +
    `decision p50 ${ms(f.p50)}, p99 ${ms(f.p99)}, max ${ms(f.max)}`;
  // Late sixteenths are not sounded: say why the piano is quiet, and what helps.
  const slow = f.steps >= 16 && f.hitRate < 0.9;
  return slow ? `${line} — most sixteenths come too late on this backend: try the CPU backend` : line;
}

/**
 * `piece` (already holding the take's melody) with a take's live piano and chords: the piano's
 * notes from `result.fromTick` on replace the generated track's there (a new PIANO track when
 * there is none, in place of the pianist's, whose notes before the take it keeps), and each bar
 * whose chords were decided live gets them in the lane; the take's pedal (`result.pedal`) is
 * spliced over its span.
 */
export function withLivePiano(piece, result) {
  const next = structuredClone(piece);
  let track = next.tracks.find((t) => t.role === 'generated');
  if (!track) {
    // The live piano takes the pianist's place, as a generated accompaniment does; the
    // pianist's notes before the take stay, in the new track.
    const pianist = next.tracks.filter((t) => t.role === 'piano');
    const before = pianist.flatMap((t) => t.notes);
    const pedal = pianist.find((t) => t.pedal?.length)?.pedal ?? [];
    next.tracks = next.tracks.filter((t) => t.role !== 'piano');
    track = { name: 'PIANO', role: 'generated', program: 0, notes: before, ...(pedal.length ? { pedal } : {}) };
    next.tracks.push(track);
  }
  // Before the take the piano is kept (cut where the take starts), after it too (from where
  // the take ended); the take's span is the live piano's.
  const { fromTick, endTick } = result;
  const before = track.notes
    .filter((n) => n[1] < fromTick)
    .map((n) => [n[0], n[1], Math.min(n[2], Math.max(n[1] + 1, fromTick)), n[3]]);
  const after = track.notes
    .filter((n) => n[1] >= fromTick && n[2] > endTick)
    .map((n) => [n[0], Math.max(n[1], endTick), n[2], n[3]]);
  track.notes = before
    .concat(result.piano.map((n) => [...n]), after)
    .sort((a, b) => a[1] - b[1] || a[0] - b[0]);
  // The take's pedal over its span (learnt from what it played, or none); null: as it was.
  if (Array.isArray(result.pedal)) {
    const pedal = splicePedal(track.pedal ?? [], result.pedal, fromTick, endTick);
    if (pedal.length) track.pedal = pedal;
    else delete track.pedal;
  }
  const end = Math.max(0, ...result.piano.map((n) => n[2]));
  while (barEnd(next, next.bars.length - 1) < end) setBarCount(next, next.bars.length + 1);
  result.cells.forEach((cell, i) => {
    const bar = result.fromBar + i;
    if (cell && bar < next.chords.length) next.chords[bar] = cell;
  });
  next.endTick = Math.max(next.endTick ?? 0, end);
  return next;
}
