// The Generate panel: Generate and "Regenerate these bars", the notes and attention streamed
// in while a model writes, Cancel, and the move to the CPU when WebGPU fails mid-way. Its
// settings are read and restored by settings.js; the pure parts (options, counting, status
// lines) are in generation-plan.js.
import { $, status, showError, notice } from './page.js';
import { optionsProblem } from './options.js';
import { settings } from './settings.js';
import { emit } from './events.js';
import {
  call,
  cancelCall,
  deviceLost,
  fallBackToCpu,
  startWorker,
  workerBackend,
  workerStarted,
} from './worker-client.js';
import {
  contextOf, regionTicks, draftPiece, writesFrom, generateOptions, unflattenNotes, notesWritten,
  progressText, progressShare, doneText,
} from './generation-plan.js';
import { currentEntry, dynamicsText, ensureModel, pedalText } from './model-loader.js';
import { endJob, remember, setPiece, startJob, store, showDraft } from './page-store.js';
import { attention } from './attention-view.js';
import { phraseMarks } from './attention.js';
import { command, run } from './commands.js';
import { withPageMarks } from './piece.js';
import { pitchRange } from './labels.js';

command('generate', (request) => generate(request));

/**
 * Generates with `entry` (the chosen model by default); resolves to the new piece, or null.
 * `region`: bars [from, to) to rewrite, the rest kept. Accompaniment: the piano there (the
 * melody stays). Continuation: every note there, written from the music before the bars; the
 * model stops where the kept music resumes, but it reads left to right and cannot hear what
 * comes after. `comparing`: a run of a comparison (compare-panel.js), which stays on show.
 * With alternatives it resolves to null and the strip offers them; `onKept(piece)` hears the
 * one kept (a flow such as a song from a plan goes on from it).
 */
export async function generate({ entry = currentEntry(), comparing = false, region = null, seed = null, onKept = null } = {}) {
  if (!store.piece || store.job) return null;
  if (!entry) return null;
  if (status.recording) {
    // The take changes the piece, and a live piano needs the Worker to itself.
    notice('A take is being recorded: stop it (Record, or R) before generating.');
    return null;
  }
  if (!comparing) emit('leave-compare');
  const s = settings();
  if (seed !== null) s.seed = seed;
  // A comparison sets two models' one piece side by side: no alternatives to choose from.
  if (comparing) s.alternatives = null;
  // The model's task (the panel's, unless a flow such as a song from a plan asks another's).
  const task = entry.task.toLowerCase();
  // A setting out of range is said in words at once (the Worker would refuse it the same way).
  const range = task === 'melody' && s.melodyRange ? pitchRange(s.melodyRange) : null;
  if (range?.error) {
    notice(`The singer's range: ${range.error}.`);
    $('melody-range').focus();
    return null;
  }
  const bad = optionsProblem(generateOptions(s, { task, region, context: null }));
  if (bad) {
    notice(`${bad.message[0].toUpperCase()}${bad.message.slice(1)}.`);
    if (bad.input) $(bad.input)?.focus();
    return null;
  }
  const before = store.piece;
  const started = performance.now();
  const job = { id: null, task, region, cancelled: false };
  let retry = false;
  startJob(job);
  run('attention-stop');
  run('update-buttons');
  run('stop-playback');
  $('gen-progress').hidden = false;
  $('gen-progress').value = 0;
  $('gen-status').textContent = 'Preparing…';
  $('error').hidden = true;
  notice('');
  attention.reset(1);
  attention.setLabel(`Attention of layer ${s.layer + 1}, head ${s.head + 1}`);
  // An accompaniment attends over the piece's steps: its bars and phrases on the map's axes.
  attention.setMarks(task === 'accompaniment' ? phraseMarks(before) : null);
  // The piece as it is being written: the previous result's tracks give way to a live one.
  const ticks = regionTicks(before, region);
  const { live, track } = draftPiece(before, task, ticks);
  try {
    await ensureModel(entry);
    if (job.cancelled) throw new Error('generation was cancelled');
    showDraft(live);
    run('roll-draft', live);
    const options = generateOptions(s, { task, region, context: contextOf(entry, store.manifest) });
    const from = writesFrom(before, task, ticks);
    const dynamics = task === 'accompaniment' && $('dynamics').checked ? await dynamicsText() : '';
    const pedal = options.pedal === 'learnt' ? await pedalText() : '';
    $('gen-status').textContent = `Running ${entry.name} on ${status.backend?.kind === 'gpu' ? 'WebGPU' : 'the CPU'}…`;
    const result = await call(
      'generate',
      { task, model: entry.name, piece: before, options, dynamics, pedal },
      {
        onProgress: (p) => {
          if (p.started) {
            job.id = p.id;
            if (job.cancelled) cancelCall(job.id);
            return;
          }
          onProgress(p, job, track, live, from, started);
        },
      },
    );
    run('roll-generating', null);
    const ms = performance.now() - started;
    if (result.alternatives) {
      // Several to choose from: the piece stays as it was until one is kept.
      showDraft(before);
      run('roll-draft', before);
      offerPieces({ before, pieces: result.alternatives, task, region, ticks, from, s, ms, entry, onKept });
      return null;
    }
    const notes = notesWritten(before, result, { task, trackName: track.name, ticks });
    // The Worker's piece, with what only the page keeps about the piece it was written from.
    const written = withPageMarks(result, before);
    setPiece(written, { undoable: false });
    remember(before);
    $('gen-status').textContent =
      doneText({ task, region, notes, ms, gpu: status.backend?.kind === 'gpu', seed: s.seed, last: job.last });
    status.generations.push({
      task,
      model: entry.name,
      backend: status.backend?.kind,
      ms,
      notes,
      tokens: job.tokens ?? null,
      bars: job.last?.bars ?? null,
      seed: s.seed,
      region,
    });
    return written;
  } catch (e) {
    run('roll-generating', null);
    showDraft(before);
    run('roll-draft', before);
    // The Worker's guard decided whether the device was gone (e.deviceLost); where it could
    // go on on the CPU itself it already did, so an error here met a lost device only when
    // the Worker could not.
    const onGpu = workerBackend() !== 'cpu' && (status.backend?.kind === 'gpu' || e.deviceLost);
    if (/cancelled/.test(e.message)) {
      $('gen-status').textContent = 'Cancelled; the piece is as it was.';
    } else if ((e.fatal || e.deviceLost || deviceLost()) && onGpu) {
      $('gen-status').textContent = 'WebGPU stopped working; writing it again on the CPU…';
      fallBackToCpu(deviceLost() ? `the GPU device was lost: ${deviceLost()}` : e.message);
      retry = true;
    } else {
      $('gen-status').textContent = '';
      showError(`Generation failed: ${e.message}`);
      if (e.fatal) startWorker(workerBackend());
    }
  } finally {
    endJob(job);
    $('gen-progress').hidden = true;
    run('show-piece');
  }
  if (retry) {
    // The same request, on the CPU Worker once it is up.
    try {
      await workerStarted();
    } catch {
      return null;
    }
    return generate({ entry, comparing, region, seed: s.seed });
  }
  return null;
}

/**
 * The strip of `pieces` (alternatives a generation wrote from `before`, the k-th with seed
 * `s.seed + k`): each a small roll of the notes it wrote, heard from where they start, kept
 * as the generation's result (one Undo) with its seed put in the Seed field, so that Generate
 * (and a share link's settings) write it again.
 */
function offerPieces({ before, pieces, task, region, ticks, from, s, ms, entry, onKept }) {
  const gpu = status.backend?.kind === 'gpu';
  const seeds = pieces.map((_, k) => (s.seed + k) % 2 ** 32);
  const written = pieces.map((p) => writtenNotes(p, task, ticks, from));
  const to = ticks ? ticks[1] : Math.max(from + 1, ...written.flat().map((n) => n[2]));
  const where = region
    ? `bars ${region[0] + 1}–${region[1]}`
    : { accompaniment: 'the piece', melody: 'the melody' }[task] ?? 'the continuation';
  const k = pieces.length;
  $('gen-status').textContent =
    `${k} alternatives for ${where} in ${(ms / 1000).toFixed(1)} s on ${gpu ? 'WebGPU' : 'the CPU'} (seeds ${seeds[0]}–${seeds[k - 1]}).`;
  status.generations.push({
    task, model: entry.name, backend: status.backend?.kind, ms, notes: written[0].length,
    tokens: null, bars: null, seed: s.seed, region, alternatives: k,
  });
  run('show-alternatives', {
    base: before,
    kind: 'pieces',
    caption: `${k} ${{ accompaniment: 'accompaniments', melody: 'melodies' }[task] ?? 'continuations'} for ${where}, each with its own seed.`,
    span: [from, to],
    playFrom: from,
    items: pieces.map((p, i) => ({
      piece: withPageMarks(p, before),
      notes: written[i],
      text: `seed ${seeds[i]}`,
      hint: `${written[i].length} notes`,
    })),
    keep: (i) => {
      const kept = withPageMarks(pieces[i], before);
      setPiece(kept, { undoable: false });
      remember(before);
      $('seed').value = String(seeds[i]);
      $('seed').dispatchEvent(new Event('change'));
      notice(`Kept alternative ${i + 1} of ${k} (seed ${seeds[i]}, now the Seed setting). Undo takes it back.`);
      onKept?.(kept);
    },
  });
}

/** The notes `piece` holds that a generation of `task` wrote: from `from`, or in `ticks`. */
function writtenNotes(piece, task, ticks, from) {
  const span = ticks ?? [from, Infinity];
  return piece.tracks
    .filter((t) => t.role === (task === 'melody' ? 'melody' : 'generated'))
    .flatMap((t) => t.notes)
    .filter((n) => task === 'accompaniment' && !ticks ? true : n[1] >= span[0] && n[1] < span[1]);
}

/** One progress message of a generation: the bar, the line, the notes so far, attention rows. */
function onProgress(p, job, track, live, from, started) {
  $('gen-progress').value = progressShare(p);
  const seconds = (performance.now() - started) / 1000;
  $('gen-status').textContent = progressText(p, job.task, seconds);
  job.tokens = p.done;
  job.last = { done: p.done, total: p.total, bars: p.bars ?? null };
  if (p.notes) {
    const notes = unflattenNotes(p.notes);
    track.notes = notes;
    const end = notes.reduce((m, n) => Math.max(m, n[2]), from);
    live.endTick = Math.max(live.endTick, end);
    run('roll-generating', { fromTick: from, toTick: end, progress: progressShare(p) });
  }
  if (p.attention) {
    const a = p.attention;
    attention.addRows(a.start, a.values, a.keys);
  }
}

/** Cancels the generation running (the Worker stops between steps). */
export function cancel() {
  const job = store.job;
  if (!job) return;
  job.cancelled = true;
  $('gen-status').textContent = 'Cancelling…';
  if (job.id !== null) cancelCall(job.id);
}
