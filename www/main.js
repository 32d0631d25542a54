// Main thread: owns the page and the piece. The models run in a Worker (worker.js); this file
// wires the roll, the lanes, the generation panel, playback, attention and sharing to it.
import { drawLossCurve } from './loss-curve.js';
import { clonePiece, noteCount, setBarCount, setPhrase, phraseIndex, barAt, secondsAt, fitPhrases } from './piece.js';
import { Take, computerKeyPitch, emptyPiece, noteMessage, recordInto } from './keys.js';
import { PianoRoll } from './roll.js';
import { AttentionMap, drawTemplate } from './attention.js';
import { Piano, START_DELAY } from './audio.js';
import { encodeShare, decodeShare } from './share.js';
import { Comparison, defaultPartner, partnerChoices, sideLabel } from './compare.js';
import { initTuning } from './tune.js';
import {
  fetchModel,
  clearModelCache,
  cachedModels,
  saveWork,
  flushWork,
  loadWork,
  clearWork,
} from './store.js';

const t0 = performance.now();
const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const savedPreference = localStorage.getItem('pianoformer.backend');
const preference = ['auto', 'gpu', 'cpu'].find((p) => p === (params.get('backend') ?? savedPreference)) ?? 'auto';
const MAX_FILE_BYTES = 8 * 1024 * 1024;

// What the end-to-end test (and a curious user in the console) can read.
const status = {
  state: 'loading',
  backend: null,
  readyMs: null,
  modelReadyMs: null, // when the chosen model was first loaded (ms after page load)
  check: null,
  error: null,
  generations: [],
  shareLink: null,
  get piece() {
    return app.piece;
  },
  attentionBlank: () => attention.isBlank(),
  // The Worker's wasm memory in bytes (it only grows: the peak so far).
  wasmBytes: () => call('memory'),
  // Tests only (`?drill`): destroys the Worker's GPU devices, as a lost GPU would.
  loseDevice: params.has('drill') ? () => app.worker.postMessage({ type: 'drill', what: 'lose-device' }) : undefined,
  // 'ready' once the service worker has kept everything for offline use (sw.js).
  offline: 'pending',
};
window.pianoformer = status;

const app = {
  piece: null,
  undo: [],
  manifest: [],
  worker: null,
  workerBackend: null,
  loaded: new Set(), // models loaded in the current Worker
  calls: new Map(),
  nextId: 1,
  started: null, // resolves when the Worker's wasm and session are up
  generating: null,
  playhead: 0,
  restored: false,
  attentionJob: null, // the Worker request drawing attention without generating
  loading: new Map(), // model name -> the promise of its load into the Worker
  prefetched: null, // {name, bytes: promise of fetchModel} started with the page
  backendUp: false, // the Worker's session is up
  startedUp: false, // the page has restored what it restores (the last piece, a link)
};

// ------------------------------------------------------------------ messages

function setState(state) {
  status.state = state;
  document.body.dataset.state = state;
}

function showError(message, { fatal = false } = {}) {
  status.error = message;
  if (fatal) setState('error');
  $('error-text').textContent = message;
  $('error').hidden = false;
  if (fatal && !status.backend) {
    $('backend-badge').textContent = 'no backend';
    $('backend-badge').className = 'badge failed';
  }
}

function notice(message) {
  const box = $('notice');
  box.textContent = message;
  box.hidden = !message;
}

// ------------------------------------------------------------------ the Worker

function startWorker(backend) {
  app.worker?.terminate();
  for (const pending of app.calls.values()) pending.reject(new Error('the model Worker restarted'));
  app.calls.clear();
  app.loaded.clear();
  app.loading.clear();
  app.workerBackend = backend;
  let resolveStarted;
  let rejectStarted;
  app.started = new Promise((resolve, reject) => {
    resolveStarted = resolve;
    rejectStarted = reject;
  });
  app.started.catch(() => {});
  let worker;
  try {
    worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
  } catch (e) {
    showError(`This browser cannot start module Workers, which pianoformer needs (${e.message}).`, {
      fatal: true,
    });
    return;
  }
  app.worker = worker;
  app.deviceLost = null;
  worker.onmessage = ({ data }) => {
    if (data.type === 'ready') {
      showBackend(data.backend, data.ms);
      resolveStarted();
    } else if (data.type === 'check') {
      showCheck(data.report, data.ms);
    } else if (data.type === 'moved') {
      // The Worker loaded the page's models into the session it moved to.
      const ready = status.readyMs;
      showBackend(data.backend, 0);
      status.readyMs = ready;
      if (data.report) showCheck(data.report, data.ms);
      notice(
        data.backend.kind === 'gpu'
          ? `Now on ${data.backend.label}: it warmed up in the background and measured faster than the CPU.`
          : `Running on the CPU: ${data.backend.fallback_reason}.`,
      );
    } else if (data.type === 'error') {
      rejectStarted(new Error(data.message));
      showError(data.message, { fatal: true });
    } else if (data.type === 'reply') {
      const pending = app.calls.get(data.id);
      app.calls.delete(data.id);
      if (!pending) return;
      if (data.ok) pending.resolve(data.value);
      else {
        const error = new Error(data.message);
        error.fatal = data.fatal;
        pending.reject(error);
      }
    } else if (data.type === 'progress') {
      app.calls.get(data.id)?.onProgress?.(data);
    } else if (data.type === 'device-lost' && worker === app.worker) {
      // A generation in progress fails and is run again on the CPU; otherwise move now.
      app.deviceLost = data.message;
      app.onDeviceLost?.();
      if (!app.generating) fallBackToCpu(`the GPU device was lost: ${data.message}`);
    }
  };
  worker.onerror = (e) => {
    e.preventDefault();
    const message = `The model Worker stopped: ${e.message || 'unknown error'}.`;
    rejectStarted(new Error(message));
    for (const pending of app.calls.values()) {
      const error = new Error(message);
      error.fatal = true;
      pending.reject(error);
    }
    app.calls.clear();
    showError(message);
  };
  // `?drill=warm`: tests treat a software adapter as a hardware one (warmed in the background);
  // `?drill=move`: and move to it whatever the measurement says.
  worker.postMessage({ type: 'init', backend, drill: params.get('drill') });
}

/** Sends a request to the Worker; resolves with its reply. */
async function call(method, args = {}, { transfer = [], onProgress } = {}) {
  await app.started;
  const id = app.nextId++;
  return new Promise((resolve, reject) => {
    app.calls.set(id, { resolve, reject, onProgress });
    app.worker.postMessage({ type: 'call', id, method, args }, transfer);
    if (onProgress) onProgress({ id, started: true });
  });
}

function showBackend(backend, ms) {
  status.backend = backend;
  status.readyMs = performance.now() - t0;
  const badge = $('backend-badge');
  badge.textContent = backend.kind === 'gpu' ? backend.label : 'CPU';
  badge.className = `badge ${backend.kind}`;
  badge.title = backend.fallback_reason
    ? `Running on the CPU: ${backend.fallback_reason}.\n${backend.fallback_detail ?? ''}`
    : backend.label;
  let text = backend.label;
  if (backend.fallback_reason) text += ` — not WebGPU: ${backend.fallback_reason}`;
  $('check-backend').textContent = text;
  $('check-ready').textContent =
    `${status.readyMs.toFixed(0)} ms after page load (${ms.toFixed(0)} ms in the Worker)`;
  app.backendUp = true;
  whenReady();
  updateButtons();
}

// Ready once the backend is up and the last visit's piece is back: the self-check's result
// follows (and stops the page if it fails).
function whenReady() {
  if (status.state === 'loading' && app.backendUp && app.startedUp) {
    setState('ready');
    // The chosen model comes in now, so that the first Generate does not wait for it.
    const entry = currentEntry();
    if (entry) {
      ensureModel(entry)
        .then(() => {
          status.modelReadyMs ??= performance.now() - t0;
        })
        .catch(() => {
          // Said again, in words, when Generate needs it.
        });
    }
  }
  updateButtons();
}

function showCheck(report, ms) {
  status.check = report;
  const { matmul, cumsum, softmax } = report.ops;
  const worst = Math.max(matmul, cumsum, softmax);
  const fmt = (x) => x.toExponential(1);
  $('check-ops').textContent =
    `max |Δ| matmul ${fmt(matmul)}, cumsum ${fmt(cumsum)}, softmax ${fmt(softmax)} ` +
    (worst <= 1e-4 ? '✓' : '✗ (too far from the CPU reference)');
  const losses = report.fit.losses;
  $('check-fit').textContent =
    `${losses.length - 1} Adam steps, loss ${losses[0].toFixed(4)} → ${losses.at(-1).toFixed(4)} ` +
    `in ${ms.toFixed(0)} ms`;
  drawLossCurve($('loss-curve'), losses);
  if (worst > 1e-4 || !(losses.at(-1) < losses[0])) {
    showError('The compute backend failed its self-check; results on it would not be trustworthy.', {
      fatal: true,
    });
    return;
  }
  updateButtons();
  keepOffline();
}

/**
 * Registers the service worker that keeps the app, its default models and the piano samples
 * (../sw.js), once the page is ready so it never competes with the start. Where service
 * workers are missing (insecure contexts, some private modes) the page works online as before.
 */
async function keepOffline() {
  if (status.offline !== 'pending') return;
  if (!('serviceWorker' in navigator)) {
    status.offline = 'unsupported';
    return;
  }
  status.offline = 'installing';
  try {
    await navigator.serviceWorker.register(new URL('../sw.js', import.meta.url), {
      type: 'module',
      scope: new URL('../', import.meta.url).pathname,
    });
    await navigator.serviceWorker.ready;
    status.offline = 'ready';
    $('offline-badge').hidden = false;
  } catch (e) {
    status.offline = `unavailable: ${e?.message ?? e}`;
  }
}

/** After WebGPU failed mid-way: a fresh Worker on the CPU, the piece untouched. */
function fallBackToCpu(why) {
  notice(`WebGPU stopped working (${why}). Switched to the CPU; your piece is safe.`);
  startWorker('cpu');
}

// ------------------------------------------------------------------ the piece

const roll = new PianoRoll($('roll'), {
  onChordClick: (bar) => editLabel('chord', bar),
  onPhraseClick: (bar) => editLabel('phrase', bar),
  onSeek: (tick) => seek(tick),
  onSelect: () => updateButtons(),
});
const attention = new AttentionMap($('attention'));

/** Makes `piece` the current piece; the previous one goes on the undo stack. */
// `fresh`: another piece (a file, a link, the last visit), which ends a comparison.
function setPiece(piece, { undoable = true, keepView = false, fresh = false } = {}) {
  if (fresh) hideCompare();
  if (undoable && app.piece) {
    app.undo.push(app.piece);
    if (app.undo.length > 50) app.undo.shift();
  }
  // An edit while comparing stays with the result it was made on.
  else if (undoable && app.compare) app.compare.edited(piece);
  app.piece = piece;
  if (keepView) roll.update();
  roll.setPiece(piece);
  showPiece();
  save();
}

function showPiece() {
  const p = app.piece;
  $('empty').hidden = !!p;
  $('roll').hidden = !p;
  $('roll-tools').hidden = !p;
  $('piece-name').textContent = p ? `${p.name} · ${p.bars.length} bars · ${noteCount(p)} notes` : '';
  $('plan-bars').value = p ? p.bars.length - p.promptBars : 0;
  showTracks();
  updateButtons();
}

function showTracks() {
  const list = $('tracks');
  list.replaceChildren();
  for (const [i, track] of (app.piece?.tracks ?? []).entries()) {
    const li = document.createElement('li');
    li.className = `track role-${track.role}`;
    const swatch = document.createElement('span');
    swatch.className = 'swatch';
    swatch.setAttribute('aria-hidden', 'true');
    const name = document.createElement('span');
    name.textContent = `${track.name} (${track.notes.length} notes)`;
    const select = document.createElement('select');
    select.setAttribute('aria-label', `Role of track ${track.name}`);
    for (const role of ['melody', 'bridge', 'piano', 'generated', 'other']) {
      const o = new Option(role === 'piano' ? 'accompaniment' : role, role);
      select.add(o);
    }
    select.value = track.role;
    select.addEventListener('change', () => {
      const next = clonePiece(app.piece);
      next.tracks[i].role = select.value;
      setPiece(next, { keepView: true });
    });
    li.append(swatch, name, select);
    list.append(li);
  }
}

function updateButtons() {
  const has = !!app.piece;
  const busy = !!app.generating;
  $('download-midi').disabled = !has;
  $('export-wav').disabled = !has;
  $('share').disabled = !has;
  $('play').disabled = !has;
  $('undo').disabled = app.undo.length === 0 || busy;
  $('generate').disabled = !has || busy || !status.backend || !$('model').value;
  $('regen-bars').disabled = $('generate').disabled || !selectedBars()
    || (settings().task === 'accompaniment' ? !hasPiano(app.piece) : !hasNotes(app.piece));
  $('cancel').disabled = !busy;
  $('compare').disabled = !has || busy || !status.backend || !$('compare-model').value;
  tuning?.updateButtons();
  $('example').disabled = busy;
  $('file-input').disabled = busy;
}

function save() {
  if (!app.piece) return;
  saveWork({ piece: app.piece, settings: settings() });
}

async function openFile(file) {
  if (app.generating) {
    notice('A generation is running: cancel it (Esc) before opening another file.');
    return;
  }
  if (!/\.(mid|midi|kar|smf)$/i.test(file.name) && !/midi/.test(file.type)) {
    showError(`${file.name} is not a MIDI file (.mid or .midi).`);
    return;
  }
  if (file.size > MAX_FILE_BYTES) {
    showError(`${file.name} is ${(file.size / 1e6).toFixed(1)} MB; pianoformer opens MIDI files up to 8 MB.`);
    return;
  }
  try {
    const bytes = await file.arrayBuffer();
    const piece = await call('readMidi', { bytes, name: file.name }, { transfer: [bytes] });
    setPiece(piece, { fresh: true });
    $('error').hidden = true;
    notice(`Opened ${file.name}: ${describeRoles(piece)}.`);
  } catch (e) {
    showError(e.message);
  }
}

function describeRoles(piece) {
  const melody = piece.tracks.filter((t) => t.role === 'melody').map((t) => t.name);
  return melody.length
    ? `melody on ${melody.join(', ')}; ${piece.chords.filter((c) => c).length} bars with chords`
    : 'no melody track found — choose one in the track list below the roll';
}

async function openExample() {
  try {
    const bytes = await call('exampleMidi', { key: 0, bars: 16 });
    const buffer = bytes.buffer;
    const piece = await call('readMidi', { bytes: buffer, name: 'example.mid' }, { transfer: [buffer] });
    setPiece(piece, { fresh: true });
    notice('The example: a melody on a I–V–vi–IV progression, written by pianoformer itself.');
  } catch (e) {
    showError(e.message);
  }
}

// ------------------------------------------------------------------ labels

const CHORD_TOKEN =
  /^(N|[A-G][#b]?(|m|7|m7|maj7|M7|dim|dim7|aug|\+|sus2|sus4|m7b5|6|m6|mM7|m\(maj7\))|[A-G][#b]?:[a-z0-9()]+)$/;

function editLabel(kind, bar) {
  if (!app.piece || app.generating) return;
  const dialog = $('label-dialog');
  const input = $('label-input');
  const planned = bar >= app.piece.promptBars ? ' (planned, past the music)' : '';
  $('label-error').textContent = '';
  $('label-split-row').hidden = kind !== 'phrase';
  $('label-split').checked = false;
  if (kind === 'chord') {
    $('label-title').textContent = `Chord of bar ${bar + 1}${planned}`;
    $('label-help').textContent =
      'A chord such as C, Am, F#7, Bbmaj7, Gsus4; two or more share the bar evenly ("C G"); empty or N for none.';
    input.value = app.piece.chords[bar] ?? '';
  } else {
    const { index } = phraseIndex(app.piece, bar);
    $('label-title').textContent = `Phrase at bar ${bar + 1}${planned}`;
    $('label-help').textContent =
      'A letter: the same capital letter for repeats of a melodic phrase (A, B, …); i for an intro, o for an outro, b for a bridge, x for a transition.';
    input.value = app.piece.phrases[index]?.[0] ?? 'A';
  }
  dialog.onclose = () => {
    if (dialog.returnValue !== 'ok') return;
    const next = clonePiece(app.piece);
    if (kind === 'chord') next.chords[bar] = input.value.trim().split(/\s+/).filter((s) => s).join(' ');
    else setPhrase(next, bar, input.value.trim(), $('label-split').checked);
    setPiece(next, { keepView: true });
  };
  $('label-ok').onclick = (e) => {
    const value = input.value.trim();
    const bad =
      kind === 'chord'
        ? value.split(/\s+/).filter((s) => s && !CHORD_TOKEN.test(s))
        : /^[A-Za-z]$/.test(value)
          ? []
          : [value || '(empty)'];
    if (bad.length) {
      e.preventDefault();
      $('label-error').textContent =
        kind === 'chord' ? `Not a chord: ${bad.join(', ')}` : 'A phrase is one letter, A–Z or a–z.';
    }
  };
  dialog.showModal();
  input.select();
}

// ------------------------------------------------------------------ models

async function loadManifest() {
  try {
    const response = await fetch(new URL('./models/manifest.json', import.meta.url), { cache: 'no-cache' });
    if (!response.ok) throw new Error(`the server answered ${response.status}`);
    const manifest = await response.json();
    app.manifest = manifest.models ?? [];
  } catch (e) {
    showError(`The list of models could not be loaded (${e.message}); generation is unavailable.`);
  }
  showModels();
}

function showModels(selected) {
  const task = $('task').value;
  const select = $('model');
  const models = app.manifest.filter((m) => m.task.toLowerCase() === task);
  select.replaceChildren(
    ...models.map((m) => {
      const o = new Option(`${m.name} · ${m.pe}${m.default ? ' (default)' : ''}${m.user ? ' (yours)' : ''}`, m.name);
      return o;
    }),
  );
  const pick = models.find((m) => m.name === selected) ?? models.find((m) => m.default) ?? models[0];
  if (pick) select.value = pick.name;
  for (const el of document.querySelectorAll('.acc-only')) el.hidden = task !== 'accompaniment';
  for (const el of document.querySelectorAll('.cont-only')) el.hidden = task !== 'continuation';
  showModelAbout();
  updateButtons();
  tuning?.showBases();
}

function currentEntry() {
  return app.manifest.find((m) => m.name === $('model').value);
}

/**
 * The most tokens a continuation model reads at once: the window it (or, fine-tuned, its base)
 * was trained on; null (everything) when no entry says.
 */
function contextOf(entry) {
  const trained = entry?.user ? entryNamed(entry.training?.base) : entry;
  const w = trained?.training?.options?.window;
  return Number.isInteger(w) && w >= 32 ? w : null;
}

function entryNamed(name) {
  return app.manifest.find((m) => m.name === name) ?? null;
}

/** Lists the models the chosen one can be compared with (its task's others). */
function showPartners() {
  const entry = currentEntry();
  const select = $('compare-model');
  const previous = select.dataset.picked || null; // the person's own last choice
  const choices = partnerChoices(app.manifest, entry);
  select.replaceChildren(...choices.map((m) => new Option(sideLabel(m, entry), m.name)));
  const pick = defaultPartner(app.manifest, entry, previous);
  if (pick) select.value = pick.name;
  $('compare-group').hidden = choices.length === 0;
}

function showModelAbout() {
  const entry = currentEntry();
  const c = entry?.config;
  $('model-about').textContent = entry
    ? `${entry.description} ${c ? `${c.layers} layers × ${c.heads} heads, ${(entry.parameters / 1e6).toFixed(2)} M parameters, ${(entry.bytes / 1e6).toFixed(1)} MB.` : ''}`
    : 'No model for this task.';
  showPartners();
  const layers = c?.layers ?? 1;
  const heads = c?.heads ?? 1;
  fillNumbers($('att-layer'), layers);
  fillNumbers($('att-head'), heads);
}

function fillNumbers(select, n) {
  const keep = Math.min(Number(select.value) || 0, n - 1);
  select.replaceChildren(...Array.from({ length: n }, (_, i) => new Option(String(i + 1), String(i))));
  select.value = String(keep);
}

/** Downloads (or takes from the cache) and loads `entry` in the Worker. */
/** Loads `entry` into the Worker unless it is there or on its way. */
function ensureModel(entry) {
  if (app.loaded.has(entry.name)) return Promise.resolve();
  let loading = app.loading.get(entry.name);
  if (!loading) {
    loading = loadModel(entry).finally(() => app.loading.delete(entry.name));
    app.loading.set(entry.name, loading);
  }
  return loading;
}

async function loadModel(entry) {
  const label = $('model-status');
  if (entry.user) {
    // A model fine-tuned here (or imported): its weights are in this tab or in IndexedDB.
    const weights = await tuning.weightsOf(entry);
    if (!weights) throw new Error(`the weights of ${entry.name} are no longer stored in this browser`);
    const copy = new Uint8Array(weights);
    const clean = { ...entry };
    delete clean.user;
    label.textContent = `Loading ${entry.name}…`;
    await call('loadModel', { entry: clean, bytes: copy.buffer }, { transfer: [copy.buffer] });
    app.loaded.add(entry.name);
    label.textContent = `${entry.name} ready (yours).`;
    showTemplate();
    return;
  }
  label.textContent = `Fetching ${entry.name}…`;
  const prefetched = app.prefetched?.name === entry.name ? app.prefetched.bytes : null;
  app.prefetched = null;
  const { bytes, cached } = await (prefetched ??
    fetchModel(entry, {
      onProgress: ({ loaded, total }) => {
        label.textContent = `Downloading ${entry.name}: ${(loaded / 1e6).toFixed(1)} of ${(total / 1e6).toFixed(1)} MB`;
      },
    }));
  label.textContent = `Loading ${entry.name}…`;
  await call('loadModel', { entry, bytes: bytes.buffer }, { transfer: [bytes.buffer] });
  app.loaded.add(entry.name);
  label.textContent = `${entry.name} ready (${cached ? 'from the cache' : `downloaded, ${(entry.bytes / 1e6).toFixed(1)} MB`}).`;
  showCached();
  showTemplate();
}

async function showCached() {
  const urls = await cachedModels();
  $('cached-models').textContent = urls.length
    ? urls.map((u) => u.split('/').pop()).join(', ')
    : 'none';
}

async function showTemplate() {
  const entry = currentEntry();
  const canvas = $('template');
  const caption = $('template-caption');
  if (!entry || !app.loaded.has(entry.name)) {
    caption.textContent = 'The positional template appears once the model is loaded.';
    return;
  }
  const layer = Number($('att-layer').value);
  const head = Number($('att-head').value);
  try {
    const t = await call('template', { model: entry.name, layer, head, lags: 256 });
    if (!t) {
      canvas.getContext('2d').clearRect(0, 0, canvas.width, canvas.height);
      caption.textContent = `${entry.pe} has no positional template: ${
        entry.pe.startsWith('fstripe')
          ? 'its kernel compares structure labels (melody, chords, phrases), not lags.'
          : 'positions enter by adding a code to the input, not through a kernel of the lag.'
      }`;
      return;
    }
    const mean = new Float32Array(t.lags);
    for (let d = 0; d < t.dims; d++) {
      for (let k = 0; k < t.lags; k++) mean[k] += t.values[d * t.lags + k] / t.dims;
    }
    drawTemplate(canvas, mean, t.lags, { label: `P_d of layer ${layer + 1}, head ${head + 1}` });
    caption.textContent = `Layer ${layer + 1}, head ${head + 1}: the positional template P_d(τ), averaged over its ${t.dims} dimensions — how much a query favours keys τ steps back.`;
  } catch (e) {
    caption.textContent = `The template could not be computed: ${e.message}`;
  }
}

// ------------------------------------------------------------------ generation

function settings() {
  return {
    task: $('task').value,
    model: $('model').value,
    seed: Number($('seed').value) || 0,
    threshold: $('threshold').value === '' ? null : Number($('threshold').value),
    pianoTemperature: $('piano-temperature').value === '' ? null : Number($('piano-temperature').value),
    temperature: Number($('temperature').value) || 1,
    length: Number($('length').value) || 512,
    maxBars: $('max-bars').value === '' ? null : Number($('max-bars').value),
    readAll: $('read-all').checked,
    layer: Number($('att-layer').value) || 0,
    head: Number($('att-head').value) || 0,
    tempo: Number($('tempo').value) || 100,
  };
}

function applySettings(s) {
  if (!s) return;
  if (s.task) $('task').value = s.task;
  showModels(s.model);
  const set = (id, v) => {
    if (v !== undefined && v !== null) $(id).value = v;
  };
  set('seed', s.seed);
  set('threshold', s.threshold);
  set('piano-temperature', s.pianoTemperature);
  set('temperature', s.temperature);
  set('length', s.length);
  set('max-bars', s.maxBars);
  if (typeof s.readAll === 'boolean') $('read-all').checked = s.readAll;
  set('att-layer', s.layer);
  set('att-head', s.head);
  set('tempo', s.tempo);
  $('tempo-value').textContent = `${$('tempo').value} %`;
}

/** Generates with `entry` (the chosen model by default); resolves to the new piece, or null. */
/** The bars `[from, to)` under the loop selection, or null. */
function selectedBars() {
  const range = roll.getSelection();
  const bars = app.piece?.bars;
  if (!range || !bars?.length) return null;
  let from = 0;
  while (from + 1 < bars.length && bars[from + 1] <= range[0]) from++;
  let to = from + 1;
  while (to < bars.length && bars[to] < range[1]) to++;
  return [from, to];
}

/** The start tick of bar `b` (from 0); past the last entry, bars of the last bar's length. */
function barTick(piece, b) {
  const bars = piece.bars;
  if (b < bars.length) return bars[b];
  const last = bars.length - 1;
  const len = bars.length >= 2 ? bars[last] - bars[last - 1] : 4 * piece.ppq;
  return (bars[last] ?? 0) + len * (b - last);
}

/** Whether the piece holds any note. */
function hasNotes(piece) {
  return !!piece?.tracks.some((t) => t.notes.length);
}

/** Whether the piece has a piano part (the pianist's or a generated one) to keep around bars. */
function hasPiano(piece) {
  return !!piece?.tracks.some((t) => (t.role === 'generated' || t.role === 'piano') && t.notes.length);
}

/**
 * Generates with the chosen model. `region`: bars [from, to) to rewrite, the rest kept.
 * Accompaniment: the piano there (the melody stays). Continuation: every note there, written
 * from the music before the bars; the model stops where the kept music resumes, but it reads
 * left to right and cannot hear what comes after.
 */
async function generate({ entry = currentEntry(), comparing = false, region = null, seed = null } = {}) {
  if (!app.piece || app.generating) return null;
  if (!entry) return null;
  if (!comparing) hideCompare();
  const s = settings();
  if (seed !== null) s.seed = seed;
  const task = s.task;
  const before = app.piece;
  const started = performance.now();
  const job = { id: null, task, cancelled: false };
  let retry = false;
  app.generating = job;
  if (app.attentionJob !== undefined && app.attentionJob !== null) {
    app.worker.postMessage({ type: 'cancel', id: app.attentionJob });
    app.attentionJob = null;
  }
  updateButtons();
  stopPlayback();
  $('gen-progress').hidden = false;
  $('gen-progress').value = 0;
  $('gen-status').textContent = 'Preparing…';
  $('error').hidden = true;
  notice('');
  attention.reset(1);
  attention.setLabel(`Attention of layer ${s.layer + 1}, head ${s.head + 1}`);
  // The piece as it is being written: the previous result's tracks give way to a live one.
  const live = clonePiece(before);
  const track = {
    name: task === 'accompaniment' ? 'PIANO' : 'CONTINUATION',
    role: 'generated',
    program: 0,
    notes: [],
  };
  const regionTicks = region ? [barTick(before, region[0]), barTick(before, region[1])] : null;
  const inRegion = (n) => n[1] >= regionTicks[0] && n[1] < regionTicks[1];
  if (task === 'accompaniment') {
    live.tracks = live.tracks.filter((t) => t.role !== 'piano' && t.role !== 'generated');
  } else if (regionTicks) {
    for (const t of live.tracks) t.notes = t.notes.filter((n) => !inRegion(n));
  }
  live.tracks.push(track);
  try {
    await ensureModel(entry);
    if (job.cancelled) throw new Error('generation was cancelled');
    app.piece = live;
    roll.setPiece(live);
    const options = {
      seed: s.seed,
      threshold: s.threshold,
      pianoTemperature: s.pianoTemperature,
      region,
      temperature: s.temperature,
      tokens: s.length,
      // A continuation model reads at most the window it was trained on (studio Options).
      context: task === 'continuation' && !s.readAll ? contextOf(entry) : null,
      bars: s.maxBars,
      watch: { layer: s.layer, head: s.head },
    };
    const from = regionTicks ? regionTicks[0]
      : task === 'accompaniment' ? 0 : before.bars[Math.max(0, before.promptBars - 1)];
    $('gen-status').textContent = `Running ${entry.name} on ${status.backend?.kind === 'gpu' ? 'WebGPU' : 'the CPU'}…`;
    const result = await call(
      'generate',
      { task, model: entry.name, piece: before, options },
      {
        onProgress: (p) => {
          if (p.started) {
            job.id = p.id;
            if (job.cancelled) app.worker.postMessage({ type: 'cancel', id: job.id });
            return;
          }
          onProgress(p, job, track, live, from, started);
        },
      },
    );
    roll.setGenerating(null);
    const ms = performance.now() - started;
    const written = (p) => p.tracks.filter((t) => t.name === track.name && t.role === 'generated')
      .reduce((n, t) => n + t.notes.length, 0);
    const notes = regionTicks && task === 'continuation'
      ? result.tracks.filter((t) => t.role === 'generated')
        .reduce((n, t) => n + t.notes.filter(inRegion).length, 0)
      : written(result) - (task === 'continuation' ? written(before) : 0);
    setPiece(result, { undoable: false });
    app.undo.push(before);
    const what = region
      ? `Bars ${region[0] + 1}–${region[1]} rewritten; ${task}`
      : task === 'continuation' ? 'Continuation' : 'Accompaniment';
    $('gen-status').textContent =
      `${what}: ${notes} notes in ${(ms / 1000).toFixed(1)} s on ${status.backend?.kind === 'gpu' ? 'WebGPU' : 'the CPU'} (seed ${s.seed}).`;
    status.generations.push({
      task,
      model: entry.name,
      backend: status.backend?.kind,
      ms,
      notes,
      tokens: job.tokens ?? null,
      seed: s.seed,
      region,
    });
    return result;
  } catch (e) {
    roll.setGenerating(null);
    app.piece = before;
    roll.setPiece(before);
    const onGpu = app.workerBackend !== 'cpu' && status.backend?.kind === 'gpu';
    if (onGpu && !app.deviceLost && !/cancelled/.test(e.message)) {
      // The failed read may arrive before the news that the device is gone: wait a moment.
      await new Promise((resolve) => {
        app.onDeviceLost = resolve;
        setTimeout(resolve, 1000);
      });
      app.onDeviceLost = null;
    }
    if (/cancelled/.test(e.message)) {
      $('gen-status').textContent = 'Cancelled; the piece is as it was.';
    } else if ((e.fatal || app.deviceLost) && onGpu) {
      $('gen-status').textContent = 'WebGPU stopped working; writing it again on the CPU…';
      fallBackToCpu(app.deviceLost ? `the GPU device was lost: ${app.deviceLost}` : e.message);
      retry = true;
    } else {
      $('gen-status').textContent = '';
      showError(`Generation failed: ${e.message}`);
      if (e.fatal) startWorker(app.workerBackend);
    }
  } finally {
    app.generating = null;
    $('gen-progress').hidden = true;
    showPiece();
  }
  if (retry) {
    // The same request, on the CPU Worker once it is up.
    try {
      await app.started;
    } catch {
      return null;
    }
    return generate({ entry, comparing, region, seed: s.seed });
  }
  return null;
}

// Two models on the same piece with the same seed (the chosen one, then the one picked beside
// Compare): two buttons switch between the results, each with its own attention map, while
// playback goes on; a share link carries both.
async function compare() {
  const first = currentEntry();
  const second = entryNamed($('compare-model').value);
  if (!app.piece || !first || !second || app.generating) return;
  hideCompare();
  const start = app.piece;
  const seed = settings().seed; // both runs use it, whatever happens to the field meanwhile
  const a = await generate({ entry: first, comparing: true, seed });
  if (!a) return;
  const attentionA = attention.snapshot();
  setPiece(start, { undoable: false, keepView: true });
  const b = await generate({ entry: second, comparing: true, seed });
  // Both runs put the same starting piece on the undo stack: one Undo goes back to it.
  if (app.undo.length > 1 && app.undo.at(-1) === app.undo.at(-2)) app.undo.pop();
  if (!b) {
    setPiece(a, { undoable: false, keepView: true });
    attention.restore(attentionA);
    return;
  }
  showComparison(new Comparison(
    { model: first.name, piece: a, attention: attentionA },
    { model: second.name, piece: b, attention: attention.snapshot() },
    seed,
  ));
  $('gen-status').textContent += ` Compared with ${second.name}: same piece, seed ${seed}.`;
}

// `draw`: draw a side's attention that was not kept (a shared link's) when it is shown; off when
// a link opens, so that opening one downloads no model.
function showComparison(comparison, { draw = true } = {}) {
  app.compare = comparison;
  const [a, b] = [entryNamed(comparison.a.model), entryNamed(comparison.b.model)];
  $('compare-a').textContent = a ? sideLabel(a, b) : comparison.a.model ?? 'first';
  $('compare-b').textContent = b ? sideLabel(b, a) : comparison.b.model;
  $('compare-bar').hidden = false;
  status.compared = [comparison.a.model, comparison.b.model];
  showCompared('a', { draw });
}

function showCompared(which, { draw = true } = {}) {
  if (!app.compare || app.generating) return;
  if (app.attentionJob !== undefined && app.attentionJob !== null) {
    app.worker.postMessage({ type: 'cancel', id: app.attentionJob });
    app.attentionJob = null;
  }
  const side = app.compare.show(which);
  setPiece(side.piece, { undoable: false, keepView: true });
  $('compare-a').setAttribute('aria-pressed', String(which === 'a'));
  $('compare-b').setAttribute('aria-pressed', String(which === 'b'));
  status.comparing = which;
  if (side.attention) attention.restore(side.attention);
  else if (draw) refreshAttention();
  else attention.reset(1);
  if (piano.playing) startPlayback();
}

function hideCompare() {
  app.compare = null;
  status.comparing = null;
  status.compared = null;
  $('compare-bar').hidden = true;
}

function onProgress(p, job, track, live, from, started) {
  $('gen-progress').value = p.total ? p.done / p.total : 0;
  const unit = job.task === 'accompaniment' ? 'steps' : 'tokens';
  const seconds = (performance.now() - started) / 1000;
  $('gen-status').textContent = p.done
    ? `${p.done} of ${p.total} ${unit} · ${(p.done / seconds).toFixed(0)} ${unit}/s`
    : 'Reading the prompt…';
  job.tokens = p.done;
  if (p.notes) {
    const flat = p.notes;
    const notes = new Array(flat.length / 4);
    for (let i = 0; i < notes.length; i++) {
      notes[i] = [flat[4 * i], flat[4 * i + 1], flat[4 * i + 2], flat[4 * i + 3]];
    }
    track.notes = notes;
    const end = notes.reduce((m, n) => Math.max(m, n[2]), from);
    live.endTick = Math.max(live.endTick, end);
    roll.setGenerating({ fromTick: from, toTick: end, progress: p.total ? p.done / p.total : 0 });
    roll.update();
  }
  if (p.attention) {
    const a = p.attention;
    attention.addRows(a.start, a.values, a.keys);
  }
}

/**
 * Draws the chosen head's attention over the current piece without generating (after the
 * layer or head changes), with the selected model if it is loaded.
 */
async function refreshAttention() {
  // While comparing, the map belongs to the result on show.
  const side = app.compare?.shown ?? null;
  const entry = side ? entryNamed(side.model) : currentEntry();
  if (!app.piece || app.generating || !entry) return;
  if (!app.loaded.has(entry.name)) {
    if (!side) return;
    try {
      await ensureModel(entry);
    } catch (e) {
      $('gen-status').textContent = `Attention: ${e.message}`;
      return;
    }
    // Switched sides (or left the comparison) while the model loaded: that side draws its own.
    if ((app.compare?.shown ?? null) !== side || app.generating) return;
  }
  if (app.attentionJob !== undefined && app.attentionJob !== null) {
    app.worker.postMessage({ type: 'cancel', id: app.attentionJob });
  }
  const s = settings();
  attention.reset(1);
  attention.setLabel(`Attention of layer ${s.layer + 1}, head ${s.head + 1}`);
  const options = { seed: s.seed, threshold: s.threshold, watch: { layer: s.layer, head: s.head } };
  let mine = null;
  try {
    await call(
      'attention',
      { model: entry.name, piece: app.piece, options },
      {
        onProgress: (p) => {
          if (p.started) {
            mine = p.id;
            app.attentionJob = p.id;
          } else if (p.attention && app.attentionJob === mine) {
            attention.addRows(p.attention.start, p.attention.values, p.attention.keys);
          }
        },
      },
    );
  } catch (e) {
    if (!/cancelled/.test(e.message)) $('gen-status').textContent = `Attention: ${e.message}`;
  } finally {
    if (app.attentionJob === mine) app.attentionJob = null;
  }
}

function cancel() {
  const job = app.generating;
  if (!job) return;
  job.cancelled = true;
  $('gen-status').textContent = 'Cancelling…';
  if (job.id !== null) app.worker.postMessage({ type: 'cancel', id: job.id });
}

// ------------------------------------------------------------------ playback

const piano = new Piano();
let playFrame = 0;

function seek(tick) {
  app.playhead = tick;
  roll.setPlayhead(tick);
  if (piano.playing) startPlayback();
}

async function togglePlayback() {
  if (piano.playing) stopPlayback();
  else await startPlayback();
}

async function startPlayback() {
  if (!app.piece) return;
  try {
    if (!piano.loaded) {
      $('play-status').textContent = 'Loading the piano…';
      await piano.load((loaded, total) => {
        $('play-status').textContent = `Loading the piano: ${loaded} of ${total} samples`;
      });
      $('play-status').textContent = '';
    }
    const selection = roll.getSelection();
    const loop = $('loop').checked && !!selection;
    const [fromTick, toTick] = loop ? selection : [app.playhead >= app.piece.endTick ? 0 : app.playhead, Infinity];
    piano.play(app.piece, {
      fromTick,
      toTick,
      loop,
      tempo: Number($('tempo').value) / 100,
      mute: { melody: $('mute-melody').checked, accompaniment: $('mute-accompaniment').checked },
      onEnd: () => {
        app.playhead = 0;
        stopPlayback();
      },
    });
    $('play').textContent = '■ Stop';
    status.playing = true;
    cancelAnimationFrame(playFrame);
    const follow = () => {
      const tick = piano.positionTick();
      if (tick !== null) {
        roll.setPlayhead(tick);
        app.playhead = tick;
        playFrame = requestAnimationFrame(follow);
      }
    };
    playFrame = requestAnimationFrame(follow);
  } catch (e) {
    $('play-status').textContent = '';
    showError(e.message);
  }
}

function stopPlayback() {
  if (piano.playing) piano.stop();
  cancelAnimationFrame(playFrame);
  $('play').textContent = '▶ Play';
  status.playing = false;
}

// ------------------------------------------------------------------ playing in

const keys = {
  octave: 4,
  computer: false, // the computer keyboard plays notes (the toggle, or during a take)
  midi: null, // the MIDIAccess once connected
  down: new Map(), // computer key → pitch held
  take: null, // the recording in progress: { take, fromTick, clicks }
};

/** One key pressed (MIDI or computer): heard, and recorded when a take is running. */
function keyOn(pitch, velocity) {
  if (!piano.loaded) piano.load().catch((e) => showError(e.message));
  piano.noteOn(pitch, velocity);
  keys.take?.take.on(pitch, velocity, performance.now());
  status.keysPlayed = (status.keysPlayed ?? 0) + 1;
}

function keyOff(pitch) {
  piano.noteOff(pitch);
  keys.take?.take.off(pitch, performance.now());
}

function setComputerKeys(on) {
  keys.computer = on;
  $('keys-toggle').setAttribute('aria-pressed', String(on));
  if (!on) {
    for (const pitch of keys.down.values()) keyOff(pitch);
    keys.down.clear();
  }
  showKeys();
}

function showKeys() {
  const midi = keys.midi ? [...keys.midi.inputs.values()].map((i) => i.name || 'MIDI input') : [];
  const parts = [];
  if (midi.length) parts.push(`MIDI: ${midi.join(', ')}`);
  if (keys.computer || keys.take) {
    const c = keys.octave - 1;
    parts.push(`computer keys on: A W S E D F T G Y H U J K play C${c + 1}–C${c + 2}, Z / X octave, Esc ends`);
  }
  if (keys.take) parts.push('recording — press Record again (or R) to stop');
  $('keys-status').textContent = parts.join(' · ') ||
    'Keys: A W S E D F T G Y H U J K (C to C), Z / X octave down / up';
}

/** Asks for the MIDI keyboards (the browser may ask the person first). */
async function connectMidi() {
  if (!navigator.requestMIDIAccess) {
    showError('This browser has no Web MIDI, so a MIDI keyboard cannot be used here (Chromium-based browsers and Firefox have it); the computer keyboard works: press "Computer keys".');
    return;
  }
  try {
    keys.midi = await navigator.requestMIDIAccess();
  } catch (e) {
    showError(`The MIDI keyboard could not be used: ${e.message || 'access was refused'}.`);
    return;
  }
  const listen = () => {
    for (const input of keys.midi.inputs.values()) {
      input.onmidimessage = (event) => {
        const m = noteMessage(event.data);
        if (!m) return;
        if (m.on) keyOn(m.pitch, m.velocity);
        else keyOff(m.pitch);
      };
    }
    showKeys();
  };
  keys.midi.onstatechange = listen;
  listen();
  const n = keys.midi.inputs.size;
  notice(n ? `MIDI keyboard connected: ${[...keys.midi.inputs.values()].map((i) => i.name).join(', ')}.` : 'No MIDI keyboard is connected yet: plug one in and it is used at once.');
  $('midi-connect').textContent = 'MIDI connected';
}

/** Starts a take at the playhead's bar (after a bar of count-in), or stops the one running. */
async function toggleRecording() {
  if (keys.take) return stopRecording();
  if (app.generating) {
    notice('A generation is running: cancel it (Esc) before recording.');
    return;
  }
  stopPlayback();
  const piece = app.piece ?? emptyPiece();
  const fromBar = app.piece ? barAt(piece, Math.min(app.playhead, piece.bars.at(-1))) : 0;
  const fromTick = piece.bars[fromBar];
  const beat = secondsAt(piece, fromTick + piece.ppq) - secondsAt(piece, fromTick);
  const countIn = $('count-in').checked ? 4 : 0;
  if (!piano.loaded) {
    $('keys-status').textContent = 'Loading the piano…';
    try {
      await piano.load();
    } catch (e) {
      showError(e.message);
      showKeys();
      return;
    }
  }
  const grid = Number($('quantise').value) > 0 ? piece.ppq / Number($('quantise').value) : 0;
  const startMs = performance.now() + (countIn * beat + 0.1) * 1000;
  const take = new Take({ piece, startTick: fromTick, startMs, grid });
  // The metronome: the count-in, then every beat while recording, scheduled a little ahead.
  let next = 0;
  const clicks = setInterval(() => {
    const ahead = (performance.now() - startMs) / 1000 + countIn * beat + 0.3;
    while (next * beat <= ahead) {
      const at = (startMs - performance.now()) / 1000 + (next - countIn) * beat;
      piano.click(at, (next - countIn) % 4 === 0);
      status.clicks = (status.clicks ?? 0) + 1;
      next++;
    }
  }, 50);
  // The music already there plays along from the take's start, its melody muted (the take
  // replaces it).
  const playAlong = app.piece && noteCount(app.piece) > 0
    ? setTimeout(() => {
      if (keys.take?.take !== take) return;
      piano.play(piece, { fromTick, tempo: 1, mute: { melody: true, accompaniment: $('mute-accompaniment').checked } });
      status.playingAlong = true;
    }, startMs - performance.now() - START_DELAY * 1000)
    : null;
  keys.take = { take, fromTick, piece, clicks, playAlong, fresh: !app.piece };
  status.recording = { fromTick, startMs };
  status.recordingBpm = 60 / beat;
  $('record').textContent = '■ Stop recording';
  $('record').classList.add('recording');
  showKeys();
}

async function stopRecording() {
  const { take, fromTick, piece, clicks, playAlong, fresh } = keys.take;
  keys.take = null;
  clearInterval(clicks);
  clearTimeout(playAlong);
  if (piano.playing) piano.stop();
  piano.setMute({ melody: $('mute-melody').checked });
  status.playingAlong = false;
  status.recording = null;
  $('record').textContent = '● Record';
  $('record').classList.remove('recording');
  for (const pitch of keys.down.values()) piano.noteOff(pitch);
  keys.down.clear();
  showKeys();
  const notes = take.notes(performance.now());
  if (!notes.length) {
    notice('Nothing was played: the piece is as it was.');
    return;
  }
  let next = recordInto(piece, notes, fromTick, Math.max(...notes.map((n) => n[2])));
  if (fresh) {
    // A new piece: its chords and phrases detected from what was played, as for a file (the
    // whole bars kept: the importer would cut the last one at the last note).
    try {
      const bytes = await call('writeMidi', { piece: next });
      const buffer = bytes.buffer;
      const detected = await call('readMidi', { bytes: buffer, name: next.name }, { transfer: [buffer] });
      const chordAt = new Map(detected.bars.map((tick, i) => [tick, detected.chords[i]]));
      next.chords = next.bars.map((tick, i) => chordAt.get(tick) ?? next.chords[i]);
      next.phrases = detected.phrases;
      fitPhrases(next);
    } catch (e) {
      notice(`Recorded; the chords could not be detected (${e.message}): set them in the chord lane.`);
    }
  }
  setPiece(next);
  notice(`Recorded ${notes.length} notes into the melody from bar ${barAt(next, fromTick) + 1}. Undo (Ctrl+Z) takes the take back.`);
}

function wirePlayIn() {
  $('record').addEventListener('click', toggleRecording);
  $('keys-toggle').addEventListener('click', () => setComputerKeys(!keys.computer));
  $('midi-connect').addEventListener('click', connectMidi);
  addEventListener('keydown', (e) => {
    if (!(keys.computer || keys.take) || e.ctrlKey || e.altKey || e.metaKey) return;
    if ($('label-dialog').open || e.target.closest?.('input, select, textarea, [contenteditable]')) return;
    const key = e.key.toLowerCase();
    if (key === 'escape' && keys.computer && !keys.take && !app.generating) {
      setComputerKeys(false);
    } else if (key === 'z' || key === 'x') {
      keys.octave = Math.max(0, Math.min(8, keys.octave + (key === 'z' ? -1 : 1)));
      showKeys();
    } else {
      const pitch = computerKeyPitch(key, keys.octave);
      if (pitch === null) return;
      if (!e.repeat && !keys.down.has(key)) {
        keys.down.set(key, pitch);
        keyOn(pitch, 90);
      }
    }
    e.preventDefault();
    e.stopImmediatePropagation();
  }, { capture: true });
  addEventListener('keyup', (e) => {
    const key = e.key.toLowerCase();
    const pitch = keys.down.get(key);
    if (pitch === undefined) return;
    keys.down.delete(key);
    keyOff(pitch);
  }, { capture: true });
  addEventListener('blur', () => {
    for (const pitch of keys.down.values()) keyOff(pitch);
    keys.down.clear();
  });
}

// ------------------------------------------------------------------ keeping and sharing

function download(blob, name) {
  const url = URL.createObjectURL(blob);
  const a = Object.assign(document.createElement('a'), { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

const baseName = () => (app.piece?.name ?? 'piece').replace(/\.(mid|midi|kar|smf)$/i, '');

async function downloadMidi() {
  try {
    const bytes = await call('writeMidi', { piece: app.piece });
    download(new Blob([bytes], { type: 'audio/midi' }), `${baseName()}-pianoformer.mid`);
  } catch (e) {
    showError(`The MIDI file could not be written: ${e.message}`);
  }
}

async function exportWav() {
  const button = $('export-wav');
  button.disabled = true;
  $('play-status').textContent = 'Rendering the WAV file…';
  try {
    if (!piano.loaded) await piano.load();
    const blob = await piano.renderWav(app.piece, {
      tempo: Number($('tempo').value) / 100,
      mute: { melody: $('mute-melody').checked, accompaniment: $('mute-accompaniment').checked },
    });
    download(blob, `${baseName()}-pianoformer.wav`);
    $('play-status').textContent = `WAV: ${(blob.size / 1e6).toFixed(1)} MB.`;
  } catch (e) {
    $('play-status').textContent = '';
    showError(e.message);
  } finally {
    button.disabled = !app.piece;
  }
}

async function share() {
  try {
    const s = settings();
    const fragment = await encodeShare({
      piece: app.piece,
      model: s.model,
      seed: s.seed,
      task: s.task,
      settings: s,
      ...(app.compare ? app.compare.forShare() : {}),
      ...(app.compare?.seed != null ? { seed: app.compare.seed } : {}),
    });
    const link = `${location.origin}${location.pathname}#${fragment}`;
    status.shareLink = link;
    try {
      await navigator.clipboard.writeText(link);
      notice(`Share link copied (${(link.length / 1000).toFixed(1)} kB): it holds the piece, its labels, the model and the seed.`);
    } catch {
      notice(`Share link (copy it): ${link}`);
    }
  } catch (e) {
    showError(e.message);
  }
}

/** Opens a share link in the URL fragment, if there is one. */
async function openShared() {
  const fragment = location.hash.slice(1);
  if (!fragment) return false;
  history.replaceState(null, '', location.pathname + location.search);
  try {
    const shared = await decodeShare(fragment);
    await call('checkPiece', { piece: shared.piece });
    if (shared.compare) await call('checkPiece', { piece: shared.compare.piece });
    applySettings({ ...shared.settings, task: shared.task, model: shared.model, seed: shared.seed });
    setPiece(shared.piece, { fresh: true });
    const comparison = Comparison.fromShare(shared);
    if (comparison) {
      if (entryNamed(comparison.b.model)) $('compare-model').value = comparison.b.model;
      showComparison(comparison, { draw: false });
    }
    const what = comparison ? `${shared.model ?? 'no model'} against ${comparison.b.model}` : shared.model ?? 'no model';
    notice(`Opened a shared piece (${what}, seed ${shared.seed ?? '–'}). Press Play (Space) to hear it.`);
    return true;
  } catch (e) {
    showError(`This share link could not be opened: ${e.message}`);
    return false;
  }
}

// ------------------------------------------------------------------ wiring

function wire() {
  $('backend-select').value = preference;
  $('backend-select').addEventListener('change', (e) => {
    localStorage.setItem('pianoformer.backend', e.target.value);
    const url = new URL(location.href);
    url.searchParams.set('backend', e.target.value);
    flushWork().finally(() => location.assign(url));
  });
  $('error-close').addEventListener('click', () => {
    $('error').hidden = true;
  });
  $('file-input').addEventListener('change', (e) => {
    const file = e.target.files?.[0];
    if (file) openFile(file);
    e.target.value = '';
  });
  $('example').addEventListener('click', openExample);
  $('undo').addEventListener('click', undo);
  $('download-midi').addEventListener('click', downloadMidi);
  $('export-wav').addEventListener('click', exportWav);
  $('share').addEventListener('click', share);
  $('zoom-in').addEventListener('click', () => roll.zoomIn());
  $('zoom-out').addEventListener('click', () => roll.zoomOut());
  $('zoom-fit').addEventListener('click', () => roll.fit());
  $('plan-bars').addEventListener('change', (e) => {
    if (!app.piece) return;
    const n = Math.max(0, Math.min(256, Math.round(Number(e.target.value) || 0)));
    const next = clonePiece(app.piece);
    setBarCount(next, next.promptBars + n);
    setPiece(next, { keepView: true });
  });
  $('task').addEventListener('change', () => {
    showModels();
    save();
  });
  $('model').addEventListener('change', () => {
    showModelAbout();
    showTemplate();
    save();
  });
  for (const id of ['att-layer', 'att-head']) {
    $(id).addEventListener('change', () => {
      // Compared results kept the old head's maps: each draws the new one when shown.
      if (app.compare) app.compare.a.attention = app.compare.b.attention = null;
      showTemplate();
      refreshAttention();
      save();
    });
  }
  for (const id of ['seed', 'threshold', 'piano-temperature', 'temperature', 'length', 'max-bars', 'read-all']) {
    $(id).addEventListener('change', save);
  }
  $('reseed').addEventListener('click', () => {
    $('seed').value = String(Math.floor(Math.random() * 1e9));
    save();
  });
  $('generate').addEventListener('click', () => generate());
  $('regen-bars').addEventListener('click', () => {
    const region = selectedBars();
    if (region) generate({ region });
  });
  $('compare').addEventListener('click', compare);
  $('compare-model').addEventListener('change', (e) => {
    e.target.dataset.picked = e.target.value;
    updateButtons();
  });
  $('compare-a').addEventListener('click', () => showCompared('a'));
  $('compare-b').addEventListener('click', () => showCompared('b'));
  $('cancel').addEventListener('click', cancel);
  $('play').addEventListener('click', togglePlayback);
  $('tempo').addEventListener('input', () => {
    $('tempo-value').textContent = `${$('tempo').value} %`;
  });
  $('tempo').addEventListener('change', () => {
    save();
    if (piano.playing) startPlayback();
  });
  for (const id of ['mute-melody', 'mute-accompaniment']) {
    $(id).addEventListener('change', () =>
      piano.setMute({ melody: $('mute-melody').checked, accompaniment: $('mute-accompaniment').checked }),
    );
  }
  $('clear-cache').addEventListener('click', async () => {
    const n = await clearModelCache();
    app.loaded.clear();
    startWorker(app.workerBackend);
    notice(`Removed ${n} cached model file${n === 1 ? '' : 's'}; they download again when used.`);
    showCached();
  });
  $('clear-work').addEventListener('click', async () => {
    await clearWork();
    notice('The saved piece is forgotten; the one on screen stays until you reload.');
  });
  wireDrop();
  wireKeys();
  wirePlayIn();
  addEventListener('pagehide', () => {
    // IndexedDB may not finish while the page unloads; localStorage is written at once.
    if (app.piece) {
      try {
        localStorage.setItem(
          'pianoformer.lastWork',
          JSON.stringify({ savedAt: Date.now(), state: { piece: app.piece, settings: settings() } }),
        );
      } catch {
        // Too large for localStorage: IndexedDB (below) usually has it.
      }
    }
    save();
    flushWork();
  });
  const chords = ['C', 'Cm', 'C7', 'Cmaj7', 'Cm7', 'Cdim', 'Csus4', 'D', 'Dm', 'Dm7', 'E', 'Em', 'E7', 'F', 'Fmaj7', 'G', 'G7', 'Gsus4', 'A', 'Am', 'Am7', 'Bb', 'Bdim', 'Bm7b5', 'N'];
  $('chord-list').replaceChildren(...chords.map((c) => new Option(c)));
}

function undo() {
  if (!app.undo.length || app.generating) return;
  hideCompare();
  const previous = app.undo.pop();
  setPiece(previous, { undoable: false, keepView: true });
  notice('Undone.');
}

function wireDrop() {
  const overlay = $('drop-overlay');
  let depth = 0;
  const hasFiles = (e) => [...(e.dataTransfer?.types ?? [])].includes('Files');
  addEventListener('dragenter', (e) => {
    if (!hasFiles(e)) return;
    depth++;
    overlay.hidden = false;
  });
  addEventListener('dragleave', () => {
    depth = Math.max(0, depth - 1);
    if (!depth) overlay.hidden = true;
  });
  addEventListener('dragover', (e) => {
    if (hasFiles(e)) e.preventDefault();
  });
  addEventListener('drop', (e) => {
    e.preventDefault();
    depth = 0;
    overlay.hidden = true;
    const file = e.dataTransfer?.files?.[0];
    if (file) openFile(file);
  });
}

function wireKeys() {
  addEventListener('keydown', (e) => {
    if ($('label-dialog').open) return;
    const typing = e.target.closest?.('input, select, textarea, [contenteditable]');
    if (e.key === 'Escape' && app.generating) {
      cancel();
      e.preventDefault();
      return;
    }
    if (typing || e.altKey || e.metaKey) return;
    if (e.ctrlKey && e.key.toLowerCase() === 'z') {
      undo();
      e.preventDefault();
    } else if (e.ctrlKey) {
      return;
    } else if (e.key === ' ' && !e.target.closest?.('button')) {
      togglePlayback();
      e.preventDefault();
    } else if (e.key.toLowerCase() === 'r' && !e.repeat) {
      toggleRecording();
      e.preventDefault();
    } else if (e.key.toLowerCase() === 'k' && !e.repeat) {
      setComputerKeys(!keys.computer);
      e.preventDefault();
    } else if (e.key.toLowerCase() === 'g' && !$('generate').disabled) {
      generate();
      e.preventDefault();
    }
  });
}

let tuning = null;

async function start() {
  wire();
  tuning = initTuning({
    call,
    ensureModel,
    models: () => app.manifest,
    addModel(entry, { loaded = false } = {}) {
      app.manifest = app.manifest.filter((m) => m.name !== entry.name).concat([entry]);
      if (loaded) app.loaded.add(entry.name);
      else app.loaded.delete(entry.name);
      showModels($('model').value);
    },
    removeModel(name) {
      app.manifest = app.manifest.filter((m) => m.name !== name);
      app.loaded.delete(name);
      showModels($('model').value);
    },
    useModel(entry) {
      $('task').value = entry.task.toLowerCase();
      showModels(entry.name);
      save();
      $('gen-title').scrollIntoView({ behavior: 'smooth', block: 'start' });
      notice(`${entry.name} is chosen in the Generate panel.`);
    },
    currentPiece: () => app.piece,
    showError,
    notice,
    download,
    maxFileBytes: MAX_FILE_BYTES,
    status,
    busy: () => Boolean(app.generating),
  });
  startWorker(preference);
  await loadManifest();
  // The chosen model's bytes come while the Worker starts; it loads them once it is up.
  const chosen = currentEntry();
  if (chosen && !chosen.user) {
    app.prefetched = { name: chosen.name, bytes: fetchModel(chosen) };
    app.prefetched.bytes.catch(() => {
      app.prefetched = null;
    });
  }
  await tuning.restore();
  const shared = await openShared().catch(() => false);
  if (!shared) {
    let work = await loadWork();
    try {
      const last = JSON.parse(localStorage.getItem('pianoformer.lastWork') ?? 'null');
      if (last?.state?.piece) work = last.state;
      localStorage.removeItem('pianoformer.lastWork');
    } catch {
      // Unreadable: the IndexedDB copy stands.
    }
    if (work?.piece) {
      try {
        await call('checkPiece', { piece: work.piece });
        applySettings(work.settings);
        setPiece(work.piece, { undoable: false, fresh: true });
        notice(`Restored ${work.piece.name} from your last visit.`);
      } catch (e) {
        notice(`The piece saved from your last visit could not be restored (${e.message}).`);
      }
    }
  }
  showCached();
  showTemplate();
}

window.addEventListener('error', (e) => showError(`Unexpected error: ${e.message}`));
window.addEventListener('unhandledrejection', (e) =>
  showError(`Unexpected error: ${e.reason?.message ?? e.reason}`),
);
start().finally(() => {
  app.startedUp = true;
  whenReady();
});
