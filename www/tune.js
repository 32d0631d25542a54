// The Fine-tune panel: the files a person teaches a model with (tune-files.js), the run (one
// Worker request per step, so pause, resume and cancel act between steps and the page stays
// responsive), its live curve, and the models kept in IndexedDB (tune-mine.js: use, export,
// import, delete). The Worker runs the steps on its backend; the panel's words and option
// checks are tune-text.js's; its state is tune-state.js's.
import { drawTuneCurve } from './loss-curve.js';
import { saveUserModel } from './store.js';
import { formatSeconds, tuneOptions, progressText, heldOutSummary, runRecord, keepName } from './tune-text.js';
import { addFiles, addPiece, inspect, showFiles } from './tune-files.js';
import { importModel, restoreMine, showMine } from './tune-mine.js';
import { $, status, showError, notice } from './page.js';
import { call } from './worker-client.js';
import { ensureModel } from './model-loader.js';
import { addModel, store } from './page-store.js';
import { run as runCommand } from './commands.js';
import { on } from './events.js';
import { task, tune } from './tune-state.js';

// -------------------------------------------------------------- base models and settings

function showBases() {
  const select = $('tune-base');
  const keep = select.value;
  const models = store.manifest.filter((m) => m.task.toLowerCase() === task());
  select.replaceChildren(
    ...models.map((m) => new Option(`${m.name} · ${m.pe}${m.user ? ' (yours)' : ''}`, m.name)),
  );
  const pick = models.find((m) => m.name === keep) ?? models.find((m) => m.default) ?? models[0];
  if (pick) select.value = pick.name;
  updateButtons();
}

function options() {
  return tuneOptions({
    steps: $('tune-steps').value,
    learningRate: $('tune-lr').value,
    trainable: $('tune-trainable').value,
  });
}

function usable() {
  return tune.files.filter((f) => f.report && !f.report.problem);
}

function updateButtons() {
  const run = tune.run;
  const running = ['starting', 'running', 'pausing', 'paused'].includes(run?.state);
  $('tune-start').disabled = running || !usable().length || !$('tune-base').value;
  $('tune-pause').disabled = !running || run.state === 'starting';
  $('tune-pause').textContent = run?.state === 'paused' ? 'Resume' : 'Pause';
  $('tune-finish').disabled = !running || run.state === 'starting' || !run.train.length;
  $('tune-cancel').disabled = !running;
  $('tune-clear').disabled = running || !tune.files.length;
  $('tune-add-current').disabled = running || !store.piece;
  for (const id of ['tune-base', 'tune-steps', 'tune-lr', 'tune-trainable']) $(id).disabled = running;
}

// -------------------------------------------------------------- the run

function draw() {
  const run = tune.run ?? tune.lastDrawn;
  if (!run) return;
  drawTuneCurve($('tune-curve'), { train: run.train, valid: run.valid, steps: run.steps });
}

function say(text) {
  $('tune-status').textContent = text;
}

async function start() {
  if (tune.run) return;
  if (store.job) {
    notice('A generation is running: let it finish before fine-tuning.');
    return;
  }
  let opts;
  try {
    opts = options();
  } catch (e) {
    showError(`Fine-tuning cannot start: ${e.message}.`);
    return;
  }
  const base = store.manifest.find((m) => m.name === $('tune-base').value);
  const files = usable();
  if (!base || !files.length) return;
  const run = {
    state: 'starting',
    base,
    steps: opts.steps,
    options: opts,
    train: [],
    valid: [],
    times: [],
    files: files.map((f) => f.name),
    backend: status.backend?.kind === 'gpu' ? 'WebGPU' : 'the CPU',
    resume: null,
    resumedAt: null, // the step it went on from on the CPU, if its GPU was lost
    stop: null, // 'cancel' | 'finish'
    started: performance.now(),
  };
  tune.run = run;
  $('tune-keep-form').hidden = true;
  showFiles();
  say(`Preparing ${files.length} file${files.length > 1 ? 's' : ''} and ${base.name}…`);
  try {
    await ensureModel(base);
    const info = await call('tuneStart', {
      base: base.name,
      pieces: files.map((f) => f.piece),
      options: opts,
    });
    run.info = info;
    if (info.baseValidLoss !== null && info.baseValidLoss !== undefined) {
      run.valid.push([0, info.baseValidLoss]);
    }
    run.state = 'running';
    updateButtons();
    say(`Training on ${run.backend}: ${info.window}-${task() === 'continuation' ? 'token' : 'step'} windows, ${info.validationWindows} held-out windows.`);
    draw();
    while (run.train.length < run.steps && !run.stop) {
      if (run.state === 'paused') {
        say(`Paused at step ${run.train.length} of ${run.steps}.`);
        await new Promise((resolve) => (run.resume = resolve));
        if (run.stop) break;
        run.state = 'running';
        updateButtons();
      }
      const t = performance.now();
      const r = await call('tuneStep');
      if (r.resumedAt !== undefined) {
        // The GPU it ran on was lost: the Worker went on on the CPU from its last good step.
        run.resumedAt = r.resumedAt;
        run.backend = 'the CPU';
        run.times.length = 0; // the GPU's step times say nothing of the CPU's
      }
      run.times.push(performance.now() - t);
      run.wasmBytes = r.wasmBytes ?? run.wasmBytes;
      run.train.push([r.step, r.loss]);
      if (r.validLoss !== null && r.validLoss !== undefined) run.valid.push([r.step, r.validLoss]);
      draw();
      say(progressText(run, r));
      if (run.state === 'pausing') {
        run.state = 'paused';
        updateButtons();
      }
    }
    if (run.stop === 'cancel') {
      await call('tuneDrop').catch(() => {});
      say(`Cancelled after ${run.train.length} steps; nothing was kept.`);
      finish(run, 'cancelled');
      return;
    }
    say(
      `Done: ${run.train.length} steps in ${formatSeconds((performance.now() - run.started) / 1000)}` +
        `${heldOutSummary(run)}. Name the model to keep it.`,
    );
    finish(run, 'done');
    offerKeep(run);
  } catch (e) {
    if (/diverged/.test(e.message)) {
      say(`Stopped: ${e.message}.`);
      finish(run, 'diverged');
      offerKeep(run);
    } else {
      showError(`Fine-tuning stopped: ${e.message}`);
      say('');
      finish(run, 'failed');
      await call('tuneDrop').catch(() => {});
    }
  }
}

function finish(run, state) {
  run.state = state;
  status.tune.lastRun = runRecord(run, state);
  tune.lastDrawn = run;
  tune.run = null;
  run.resume?.();
  showFiles();
}

function offerKeep(run) {
  $('tune-name').value = keepName(run.base.name, new Set(store.manifest.map((m) => m.name)));
  $('tune-keep-form').hidden = false;
  tune.pending = run;
}

async function keep() {
  const run = tune.pending;
  if (!run) return;
  const name = $('tune-name').value.trim();
  if (!name) return;
  if (store.manifest.some((m) => m.name === name)) {
    showError(`A model called ${name} exists already: choose another name.`);
    return;
  }
  $('tune-keep').disabled = true;
  try {
    const { entry, weights } = await call('tuneKeep', {
      name,
      description: `${run.base.name} fine-tuned in this browser for ${run.train.length} steps on ${run.files.length} of your files (${run.files.join(', ')}).`,
    });
    await call('tuneDrop').catch(() => {});
    tune.pending = null;
    $('tune-keep-form').hidden = true;
    tune.kept.set(entry.name, weights);
    let where = 'kept in this browser';
    try {
      await saveUserModel(entry, weights);
    } catch (e) {
      where = `not kept after this tab closes (${e.message}): export it to keep it`;
    }
    addModel({ ...entry, user: true }, { loaded: true });
    await showMine();
    runCommand('use-model', { ...entry, user: true });
    say(`${entry.name} is chosen in the Generate panel and ${where}.`);
  } catch (e) {
    showError(`The model could not be kept: ${e.message}`);
  } finally {
    $('tune-keep').disabled = false;
  }
}

async function discard() {
  tune.pending = null;
  $('tune-keep-form').hidden = true;
  await call('tuneDrop').catch(() => {});
  say('Discarded.');
}

// -------------------------------------------------------------- wiring

/** Wires the panel, once, as the page starts; `restoreTuning` then lists the person's models. */
export function initTuning() {
  status.tune = {
    get state() {
      return tune.run?.state ?? 'idle';
    },
    get files() {
      return tune.files.map((f) => ({ name: f.name, ...f.report }));
    },
    get losses() {
      return tune.run?.train ?? [];
    },
    get validLosses() {
      return tune.run?.valid ?? [];
    },
    lastRun: null,
    models: [],
  };

  $('tune-files').addEventListener('change', (e) => {
    addFiles(e.target.files);
    e.target.value = '';
  });
  $('tune-import').addEventListener('change', (e) => {
    const file = e.target.files?.[0];
    if (file) importModel(file);
    e.target.value = '';
  });
  $('tune-add-current').addEventListener('click', () => {
    const piece = store.piece;
    if (!piece) return;
    addPiece(piece);
    inspect();
  });
  $('tune-clear').addEventListener('click', () => {
    tune.files = [];
    showFiles();
  });
  const zone = $('tune-drop');
  zone.addEventListener('dragover', (e) => {
    e.preventDefault();
    zone.classList.add('over');
  });
  zone.addEventListener('dragleave', () => zone.classList.remove('over'));
  zone.addEventListener('drop', (e) => {
    // These files are for fine-tuning, not to open: the page's own drop handler stays out.
    e.preventDefault();
    e.stopPropagation();
    zone.classList.remove('over');
    document.getElementById('drop-overlay').hidden = true;
    if (tune.run) return;
    addFiles(e.dataTransfer?.files ?? []);
  });
  $('tune-start').addEventListener('click', start);
  $('tune-pause').addEventListener('click', () => {
    const run = tune.run;
    if (!run) return;
    if (run.state === 'paused') {
      run.resume?.();
    } else if (run.state === 'running') {
      run.state = 'pausing';
      say('Pausing after this step…');
    }
    updateButtons();
  });
  $('tune-finish').addEventListener('click', () => {
    if (!tune.run) return;
    tune.run.stop = 'finish';
    tune.run.resume?.();
  });
  $('tune-cancel').addEventListener('click', () => {
    if (!tune.run) return;
    tune.run.stop = 'cancel';
    tune.run.resume?.();
    say('Cancelling after this step…');
  });
  $('tune-keep-form').addEventListener('submit', (e) => {
    e.preventDefault();
    keep();
  });
  $('tune-discard').addEventListener('click', discard);
  $('task').addEventListener('change', () => {
    showBases();
    inspect();
  });
  // The panel's buttons follow the page's (a piece, a job, the backend) and its own files; its
  // base models follow the Generate panel's task and the model list.
  on('buttons', updateButtons);
  on('tune-files', updateButtons);
  on('model-shown', showBases);
}

export { restoreMine as restoreTuning };
