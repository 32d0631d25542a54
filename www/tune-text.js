// The Fine-tune panel's pure parts: the run's options from the form's fields, the words for a
// file, a step, a finished run and a kept model, and the names new models get. No DOM: tune.js,
// tune-files.js and tune-mine.js show these, tests/js/tune-text.test.mjs checks them.

export const MAX_FILES = 50;
export const HOLDOUT = 0.2; // the last fifth of every file is held out

/** "42 s", "12 min", "1.5 h"; '…' while unknown. */
export function formatSeconds(s) {
  if (!Number.isFinite(s)) return '…';
  if (s < 90) return `${Math.max(0, Math.round(s))} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

/**
 * The run's options from the form's `steps`, `learningRate` and `trainable` ('all', 'top-1',
 * 'top-2') fields, as strings; throws a sentence (without its full stop) when one is out of range.
 */
export function tuneOptions({ steps: stepsField, learningRate: rateField, trainable }) {
  const steps = Math.round(Number(stepsField));
  const learningRate = Number(rateField);
  if (!(steps >= 1 && steps <= 20000)) throw new Error('the number of steps must be between 1 and 20 000');
  if (!(learningRate > 0 && learningRate <= 0.01)) {
    throw new Error('the learning rate must be above 0 and at most 0.01');
  }
  return {
    steps,
    learningRate,
    trainable: trainable === 'all' ? 'all' : 'top',
    topLayers: Number(trainable.split('-')[1] ?? 1),
    batch: 4,
    holdout: HOLDOUT,
    seed: 0,
    evalEvery: Math.max(1, Math.round(steps / 10)),
  };
}

/** The accompaniment tracks of a file, by name ('none' without any). */
export function accompanimentTracks(piece) {
  const names = piece.tracks.filter((t) => t.role === 'piano').map((t, i) => t.name || `track ${i + 1}`);
  return names.length ? names.join(', ') : 'none';
}

/** A file's chords (the first six changes) and phrases, as the files table shows them. */
export function chordsSummary(piece) {
  const distinct = [];
  for (const cell of piece.chords) {
    for (const c of cell.split(/\s+/).filter(Boolean)) {
      if (distinct.at(-1) !== c) distinct.push(c);
    }
  }
  const chords = distinct.length
    ? `${distinct.slice(0, 6).join(' ')}${distinct.length > 6 ? ' …' : ''}`
    : 'no chords';
  const phrases = piece.phrases.map(([letter, bars]) => `${letter}${bars}`).join(' ');
  return `${chords} · phrases ${phrases || 'none'}`;
}

/** What the files table's "Used" cell says of a file's inspection report (null: not yet). */
export function usedText(report, piece) {
  if (!report) return { text: '…', className: null };
  if (report.problem) return { text: `not used: ${report.problem}`, className: 'problem' };
  return {
    text:
      `${report.trainBars} bars to train, ${report.heldOutBars} held out · ${report.melodyNotes} melody notes · ` +
      `accompaniment: ${accompanimentTracks(piece)} (${report.accompanimentNotes} notes)`,
    className: 'ok',
  };
}

/**
 * The line after step `r` ({step, loss}) of `run` ({steps, times (ms per step), valid
 * ([[step, loss]], the base's first), backend}): the losses, the speed and the time left.
 */
export function progressText(run, r) {
  const recent = run.times.slice(-10);
  const perStep = recent.reduce((a, b) => a + b, 0) / recent.length / 1000;
  const left = (run.steps - r.step) * perStep;
  const valid = run.valid.at(-1);
  const base = run.valid[0];
  const held = valid && valid !== base
    ? ` · held-out ${valid[1].toFixed(4)} (base ${base[1].toFixed(4)})`
    : base
      ? ` · held-out of the base ${base[1].toFixed(4)}`
      : '';
  const moved = run.resumedAt !== null && run.resumedAt !== undefined
    ? ` (the GPU was lost at step ${run.resumedAt + 1}: it went on on the CPU from step ${run.resumedAt})`
    : '';
  return (
    `Step ${r.step} of ${run.steps} · loss ${r.loss.toFixed(4)}${held} · ` +
    `${(1 / perStep).toFixed(2)} steps/s · about ${formatSeconds(left)} left on ${run.backend}${moved}`
  );
}

/** "; held-out loss 0.1234 → 0.0987" once the run has two held-out losses, else ''. */
export function heldOutSummary(run) {
  if (run.valid.length < 2) return '';
  const [, first] = run.valid[0];
  const [, last] = run.valid.at(-1);
  return `; held-out loss ${first.toFixed(4)} → ${last.toFixed(4)}`;
}

/** What `status.tune.lastRun` says of a run that ended in `state`. */
export function runRecord(run, state) {
  return {
    state,
    steps: run.train.length,
    train: run.train,
    valid: run.valid,
    backend: run.backend,
    msPerStep: run.times.length ? run.times.reduce((a, b) => a + b, 0) / run.times.length : null,
    times: run.times,
    wasmBytes: run.wasmBytes ?? null,
    // The step a run whose GPU was lost went on from on the CPU (null: it was not moved).
    resumedAt: run.resumedAt ?? null,
  };
}

/** The name offered for a model fine-tuned from `base`: base-mine-1, -2, … not in `taken`. */
export function keepName(base, taken) {
  let n = 1;
  while (taken.has(`${base}-mine-${n}`)) n++;
  return `${base}-mine-${n}`;
}

/** The name an imported model gets: its own, or name-2, -3, … when `taken(name)` says so. */
export function importName(name, taken) {
  let out = name;
  for (let n = 2; taken(out); n++) out = `${name}-${n}`;
  return out;
}

/** The line under a kept model in "Your models". */
export function modelSummary(m) {
  const before = m.metrics?.held_out_loss_before;
  const after = m.metrics?.held_out_loss;
  return (
    `${m.task.toLowerCase()} · from ${m.training?.base ?? '?'} · ${m.training?.steps ?? '?'} steps` +
    (Number.isFinite(before) && Number.isFinite(after)
      ? ` · held-out loss ${before.toFixed(4)} → ${after.toFixed(4)}`
      : '')
  );
}
