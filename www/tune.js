// The Fine-tune panel: the files a person teaches a model with (what was understood of each,
// with the melody track to fix), the run (one Worker request per step, so pause, resume and
// cancel act between steps and the page stays responsive), its live curve, and the models kept
// in IndexedDB (use, export, import, delete). The Worker runs the steps on its backend.
import { drawTuneCurve } from './loss-curve.js';
import { saveUserModel, listUserModels, loadUserModel, deleteUserModel } from './store.js';

export const MAX_FILES = 50;
const HOLDOUT = 0.2;
const $ = (id) => document.getElementById(id);

/**
 * Wires the panel. `ctx` is the page: {call(method, args, opts), ensureModel(entry),
 * models() (every entry the generate panel lists), addModel(entry), removeModel(name),
 * currentPiece(), showError(msg), notice(msg), download(blob, name), maxFileBytes, status,
 * busy() (a generation is running)}.
 */
export function initTuning(ctx) {
  const tune = {
    files: [], // {name, piece, report}
    run: null, // the run in progress, see start()
    kept: new Map(), // name → weights kept in this tab (what storage refused still exports)
  };
  ctx.status.tune = {
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

  const task = () => $('task').value;

  // -------------------------------------------------------------- files

  async function addFiles(list) {
    const files = [...list];
    const room = MAX_FILES - tune.files.length;
    if (files.length > room) {
      ctx.showError(`Fine-tuning reads at most ${MAX_FILES} files; ${files.length - room} were left out.`);
    }
    const problems = [];
    for (const file of files.slice(0, Math.max(0, room))) {
      if (!/\.(mid|midi|kar|smf)$/i.test(file.name) && !/midi/.test(file.type)) {
        problems.push(`${file.name} is not a MIDI file`);
        continue;
      }
      if (file.size > ctx.maxFileBytes) {
        problems.push(`${file.name} is larger than 8 MB`);
        continue;
      }
      try {
        const bytes = await file.arrayBuffer();
        const piece = await ctx.call('readMidi', { bytes, name: file.name }, { transfer: [bytes] });
        addPiece(piece);
      } catch (e) {
        problems.push(e.message);
      }
    }
    if (problems.length) ctx.showError(`Some files were not added: ${problems.join('; ')}.`);
    await inspect();
  }

  function addPiece(piece) {
    // The same name twice: the newer file replaces the older.
    tune.files = tune.files.filter((f) => f.name !== piece.name);
    tune.files.push({ name: piece.name, piece: structuredClone(piece), report: null });
  }

  async function inspect() {
    if (!tune.files.length) {
      showFiles();
      return;
    }
    try {
      const reports = await ctx.call('tuneInspect', {
        pieces: tune.files.map((f) => f.piece),
        task: task(),
        holdout: HOLDOUT,
      });
      reports.forEach((r, i) => (tune.files[i].report = r));
    } catch (e) {
      ctx.showError(`The files could not be read for fine-tuning: ${e.message}`);
    }
    showFiles();
  }

  // The melody-track choice: the chosen track becomes the melody; the former melody becomes
  // accompaniment (piano).
  function setMelody(file, index) {
    for (const [i, t] of file.piece.tracks.entries()) {
      if (i === index) t.role = 'melody';
      else if (t.role === 'melody') t.role = 'piano';
    }
    inspect();
  }

  function accompanimentTracks(piece) {
    const names = piece.tracks.filter((t) => t.role === 'piano').map((t, i) => t.name || `track ${i + 1}`);
    return names.length ? names.join(', ') : 'none';
  }

  function chordsSummary(piece) {
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

  function showFiles() {
    const table = $('tune-table');
    const body = table.tBodies[0];
    table.hidden = !tune.files.length;
    body.replaceChildren(
      ...tune.files.map((file, fi) => {
        const r = file.report;
        const row = document.createElement('tr');
        const cell = (text, cls) => {
          const td = document.createElement('td');
          td.textContent = text;
          if (cls) td.className = cls;
          return td;
        };
        const melody = document.createElement('select');
        melody.setAttribute('aria-label', `Melody track of ${file.name}`);
        melody.append(new Option('none', '-1'));
        file.piece.tracks.forEach((t, i) => {
          if (t.role === 'other' && t.channel === 9) return; // drums
          melody.append(new Option(`${t.name || `track ${i + 1}`} (${t.notes.length} notes)`, String(i)));
        });
        melody.value = String(file.piece.tracks.findIndex((t) => t.role === 'melody'));
        melody.disabled = Boolean(tune.run);
        melody.addEventListener('change', () => setMelody(file, Number(melody.value)));
        const melodyCell = document.createElement('td');
        melodyCell.append(melody);
        const used = !r
          ? cell('…')
          : r.problem
            ? cell(`not used: ${r.problem}`, 'problem')
            : cell(
                `${r.trainBars} bars to train, ${r.heldOutBars} held out · ${r.melodyNotes} melody notes · ` +
                  `accompaniment: ${accompanimentTracks(file.piece)} (${r.accompanimentNotes} notes)`,
                'ok',
              );
        const remove = document.createElement('button');
        remove.textContent = 'Remove';
        remove.setAttribute('aria-label', `Remove ${file.name}`);
        remove.disabled = Boolean(tune.run);
        remove.addEventListener('click', () => {
          tune.files.splice(fi, 1);
          inspect();
        });
        const removeCell = document.createElement('td');
        removeCell.append(remove);
        row.append(
          cell(file.name),
          melodyCell,
          cell(String(r && !r.problem ? r.trainBars + r.heldOutBars : file.piece.promptBars)),
          cell(chordsSummary(file.piece)),
          used,
          removeCell,
        );
        return row;
      }),
    );
    updateButtons();
  }

  // -------------------------------------------------------------- base models and settings

  function showBases() {
    const select = $('tune-base');
    const keep = select.value;
    const models = ctx.models().filter((m) => m.task.toLowerCase() === task());
    select.replaceChildren(
      ...models.map((m) => new Option(`${m.name} · ${m.pe}${m.user ? ' (yours)' : ''}`, m.name)),
    );
    const pick = models.find((m) => m.name === keep) ?? models.find((m) => m.default) ?? models[0];
    if (pick) select.value = pick.name;
    updateButtons();
  }

  function options() {
    const steps = Math.round(Number($('tune-steps').value));
    const learningRate = Number($('tune-lr').value);
    if (!(steps >= 1 && steps <= 20000)) throw new Error('the number of steps must be between 1 and 20 000');
    if (!(learningRate > 0 && learningRate <= 0.01)) {
      throw new Error('the learning rate must be above 0 and at most 0.01');
    }
    return {
      steps,
      learningRate,
      trainable: $('tune-trainable').value === 'all' ? 'all' : 'top',
      topLayers: Number($('tune-trainable').value.split('-')[1] ?? 1),
      batch: 4,
      holdout: HOLDOUT,
      seed: 0,
      evalEvery: Math.max(1, Math.round(steps / 10)),
    };
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
    $('tune-add-current').disabled = running || !ctx.currentPiece();
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

  function progressText(run, r) {
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
    return (
      `Step ${r.step} of ${run.steps} · loss ${r.loss.toFixed(4)}${held} · ` +
      `${(1 / perStep).toFixed(2)} steps/s · about ${formatSeconds(left)} left on ${run.backend}`
    );
  }

  async function start() {
    if (tune.run) return;
    if (ctx.busy()) {
      ctx.notice('A generation is running: let it finish before fine-tuning.');
      return;
    }
    let opts;
    try {
      opts = options();
    } catch (e) {
      ctx.showError(`Fine-tuning cannot start: ${e.message}.`);
      return;
    }
    const base = ctx.models().find((m) => m.name === $('tune-base').value);
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
      backend: ctx.status.backend?.kind === 'gpu' ? 'WebGPU' : 'the CPU',
      resume: null,
      stop: null, // 'cancel' | 'finish'
      started: performance.now(),
    };
    tune.run = run;
    $('tune-keep-form').hidden = true;
    showFiles();
    say(`Preparing ${files.length} file${files.length > 1 ? 's' : ''} and ${base.name}…`);
    try {
      await ctx.ensureModel(base);
      const info = await ctx.call('tuneStart', {
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
        const r = await ctx.call('tuneStep');
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
        await ctx.call('tuneDrop').catch(() => {});
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
        ctx.showError(`Fine-tuning stopped: ${e.message}`);
        say('');
        finish(run, 'failed');
        await ctx.call('tuneDrop').catch(() => {});
      }
    }
  }

  function heldOutSummary(run) {
    if (run.valid.length < 2) return '';
    const [, first] = run.valid[0];
    const [, last] = run.valid.at(-1);
    return `; held-out loss ${first.toFixed(4)} → ${last.toFixed(4)}`;
  }

  function finish(run, state) {
    run.state = state;
    ctx.status.tune.lastRun = {
      state,
      steps: run.train.length,
      train: run.train,
      valid: run.valid,
      backend: run.backend,
      msPerStep: run.times.length ? run.times.reduce((a, b) => a + b, 0) / run.times.length : null,
      times: run.times,
      wasmBytes: run.wasmBytes ?? null,
    };
    tune.lastDrawn = run;
    tune.run = null;
    run.resume?.();
    showFiles();
  }

  function offerKeep(run) {
    let n = 1;
    const taken = new Set(ctx.models().map((m) => m.name));
    while (taken.has(`${run.base.name}-mine-${n}`)) n++;
    $('tune-name').value = `${run.base.name}-mine-${n}`;
    $('tune-keep-form').hidden = false;
    tune.pending = run;
  }

  async function keep() {
    const run = tune.pending;
    if (!run) return;
    const name = $('tune-name').value.trim();
    if (!name) return;
    if (ctx.models().some((m) => m.name === name)) {
      ctx.showError(`A model called ${name} exists already: choose another name.`);
      return;
    }
    $('tune-keep').disabled = true;
    try {
      const { entry, weights } = await ctx.call('tuneKeep', {
        name,
        description: `${run.base.name} fine-tuned in this browser for ${run.train.length} steps on ${run.files.length} of your files (${run.files.join(', ')}).`,
      });
      await ctx.call('tuneDrop').catch(() => {});
      tune.pending = null;
      $('tune-keep-form').hidden = true;
      tune.kept.set(entry.name, weights);
      let where = 'kept in this browser';
      try {
        await saveUserModel(entry, weights);
      } catch (e) {
        where = `not kept after this tab closes (${e.message}): export it to keep it`;
      }
      ctx.addModel({ ...entry, user: true }, { loaded: true });
      await showMine();
      ctx.useModel({ ...entry, user: true });
      say(`${entry.name} is chosen in the Generate panel and ${where}.`);
    } catch (e) {
      ctx.showError(`The model could not be kept: ${e.message}`);
    } finally {
      $('tune-keep').disabled = false;
    }
  }

  async function discard() {
    tune.pending = null;
    $('tune-keep-form').hidden = true;
    await ctx.call('tuneDrop').catch(() => {});
    say('Discarded.');
  }

  // -------------------------------------------------------------- your models

  async function restoreMine() {
    for (const { entry } of await listUserModels()) {
      if (!ctx.models().some((m) => m.name === entry.name)) ctx.addModel({ ...entry, user: true });
    }
    await showMine();
  }

  async function showMine() {
    const mine = ctx.models().filter((m) => m.user);
    ctx.status.tune.models = mine.map((m) => m.name);
    const list = $('my-models');
    if (!mine.length) {
      const li = document.createElement('li');
      li.className = 'hint';
      li.textContent = 'None yet.';
      list.replaceChildren(li);
    } else {
      list.replaceChildren(
        ...mine.map((m) => {
          const li = document.createElement('li');
          const name = document.createElement('strong');
          name.textContent = m.name;
          const about = document.createElement('span');
          about.className = 'about';
          const before = m.metrics?.held_out_loss_before;
          const after = m.metrics?.held_out_loss;
          about.textContent =
            `${m.task.toLowerCase()} · from ${m.training?.base ?? '?'} · ${m.training?.steps ?? '?'} steps` +
            (Number.isFinite(before) && Number.isFinite(after)
              ? ` · held-out loss ${before.toFixed(4)} → ${after.toFixed(4)}`
              : '');
          const button = (text, act, label) => {
            const b = document.createElement('button');
            b.textContent = text;
            b.setAttribute('aria-label', `${label} ${m.name}`);
            b.addEventListener('click', act);
            return b;
          };
          li.append(
            name,
            about,
            button('Use', () => ctx.useModel(m), 'Generate with'),
            button('Export', () => exportModel(m), 'Export'),
            button('Delete', () => remove(m), 'Delete'),
          );
          return li;
        }),
      );
    }
    showBases();
  }

  async function weightsOf(entry) {
    return tune.kept.get(entry.name) ?? (await loadUserModel(entry.name))?.weights ?? null;
  }

  async function exportModel(entry) {
    try {
      const weights = await weightsOf(entry);
      if (!weights) throw new Error('its weights are no longer stored in this browser');
      const clean = { ...entry };
      delete clean.user;
      const copy = new Uint8Array(weights);
      const file = await ctx.call('packModel', { entry: clean, weights: copy.buffer }, { transfer: [copy.buffer] });
      ctx.download(new Blob([file], { type: 'application/octet-stream' }), `${entry.name}.pfmodel`);
    } catch (e) {
      ctx.showError(`${entry.name} could not be exported: ${e.message}`);
    }
  }

  async function importModel(file) {
    try {
      if (file.size > 256 * 1024 * 1024) throw new Error('it is larger than 256 MB');
      const bytes = await file.arrayBuffer();
      const { entry, weights } = await ctx.call('unpackModel', { bytes }, { transfer: [bytes] });
      let name = entry.name;
      for (let n = 2; ctx.models().some((m) => m.name === name); n++) name = `${entry.name}-${n}`;
      const renamed = { ...entry, name, file: `${name}.bpk`, default: false };
      tune.kept.set(name, weights);
      let where = 'and kept in this browser';
      try {
        await saveUserModel(renamed, weights);
      } catch (e) {
        where = `but not kept after this tab closes (${e.message})`;
      }
      ctx.addModel({ ...renamed, user: true });
      await showMine();
      ctx.notice(`Imported ${file.name} as ${name} (${renamed.task.toLowerCase()}), checked ${where}.`);
    } catch (e) {
      ctx.showError(`${file.name} could not be imported: ${e.message}`);
    }
  }

  async function remove(entry) {
    if (!confirm(`Delete ${entry.name}? This cannot be undone (export it first to keep a copy).`)) return;
    await deleteUserModel(entry.name);
    tune.kept.delete(entry.name);
    await ctx.call('unloadModel', { name: entry.name }).catch(() => {});
    ctx.removeModel(entry.name);
    await showMine();
  }

  // -------------------------------------------------------------- wiring

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
    const piece = ctx.currentPiece();
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

  return {
    restore: restoreMine,
    showBases,
    updateButtons,
    /** Weights of a kept model, for the generate panel (null when gone). */
    weightsOf,
  };
}

export function formatSeconds(s) {
  if (!Number.isFinite(s)) return '…';
  if (s < 90) return `${Math.max(0, Math.round(s))} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}
