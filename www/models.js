// The models: the manifest of shipped models (plus the person's own, added by tune.js), the
// Model list of the Generate panel and what it says about the chosen one, the models it can be
// compared with, and loading a model into the Worker once (ensureModel: concurrent asks share
// one load; the bytes come from the page's model cache, a download, or this browser's storage).
import { $, app, status, showError, notice } from './page.js';
import { call, onWorkerRestart } from './worker-client.js';
import { fetchModel } from './store.js';
import { defaultPartner, partnerChoices, sideLabel } from './compare.js';
import { modelOption, modelAbout } from './page-text.js';
import { run } from './commands.js';
import { emit } from './events.js';

const loading = new Map(); // model name -> the promise of its load into the Worker
let prefetched = null; // {name, bytes: promise of fetchModel} started with the page

// A new Worker has none of the old one's models.
onWorkerRestart(() => {
  app.loaded.clear();
  loading.clear();
});

/** Starts downloading `entry`'s weights now (while the Worker starts); its load takes them. */
export function prefetchModel(entry) {
  if (!entry || entry.user) return;
  const mine = { name: entry.name, bytes: fetchModel(entry) };
  prefetched = mine;
  mine.bytes.catch(() => {
    if (prefetched === mine) prefetched = null;
  });
}

export async function loadManifest() {
  try {
    const response = await fetch(new URL('./models/manifest.json', import.meta.url), { cache: 'no-cache' });
    if (!response.ok) throw new Error(`the server answered ${response.status}`);
    const manifest = await response.json();
    app.manifest = manifest.models ?? [];
    app.dynamicsEntry = manifest.dynamics ?? null;
  } catch (e) {
    showError(`The list of models could not be loaded (${e.message}); generation is unavailable.`);
  }
  showModels();
}

let dynamics = null; // the velocity model's JSON, once fetched ('' when there is none)

/**
 * The velocity model the manifest ships (written accompaniments get their dynamics from it),
 * fetched and checked once; '' when there is none or it could not be had (the piano then
 * plays at one velocity, and the page says why once).
 */
export async function dynamicsText() {
  if (dynamics !== null) return dynamics;
  const entry = app.dynamicsEntry;
  if (!entry) return (dynamics = '');
  try {
    const { bytes } = await fetchModel(entry);
    dynamics = new TextDecoder().decode(bytes);
    status.dynamics = entry.name;
  } catch (e) {
    dynamics = '';
    notice(`The piano will play at one velocity: the dynamics model could not be loaded (${e.message}).`);
  }
  return dynamics;
}

/** Lists the chosen task's models, choosing `selected` (else the default) and its settings. */
export function showModels(selected) {
  const task = $('task').value;
  const select = $('model');
  const models = app.manifest.filter((m) => m.task.toLowerCase() === task);
  select.replaceChildren(...models.map((m) => new Option(modelOption(m), m.name)));
  const pick = models.find((m) => m.name === selected) ?? models.find((m) => m.default) ?? models[0];
  if (pick) select.value = pick.name;
  for (const el of document.querySelectorAll('.acc-only')) el.hidden = task !== 'accompaniment';
  for (const el of document.querySelectorAll('.cont-only')) el.hidden = task !== 'continuation';
  showModelAbout();
  emit('model-shown');
  app.tuning?.showBases();
}

/** The chosen model's manifest entry (undefined when the list is empty). */
export function currentEntry() {
  return app.manifest.find((m) => m.name === $('model').value);
}

export function entryNamed(name) {
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

export function showModelAbout() {
  const entry = currentEntry();
  const c = entry?.config;
  $('model-about').textContent = modelAbout(entry);
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

/** Loads `entry` into the Worker unless it is there or on its way. */
export function ensureModel(entry) {
  if (app.loaded.has(entry.name)) return Promise.resolve();
  let load = loading.get(entry.name);
  if (!load) {
    load = loadModel(entry).finally(() => loading.delete(entry.name));
    loading.set(entry.name, load);
  }
  return load;
}

/** Downloads (or takes from the cache, or this browser's storage) and loads `entry` in the Worker. */
async function loadModel(entry) {
  const label = $('model-status');
  if (entry.user) {
    // A model fine-tuned here (or imported): its weights are in this tab or in IndexedDB.
    const weights = await app.tuning.weightsOf(entry);
    if (!weights) throw new Error(`the weights of ${entry.name} are no longer stored in this browser`);
    const copy = new Uint8Array(weights);
    const clean = { ...entry };
    delete clean.user;
    label.textContent = `Loading ${entry.name}…`;
    await call('loadModel', { entry: clean, bytes: copy.buffer }, { transfer: [copy.buffer] });
    app.loaded.add(entry.name);
    label.textContent = `${entry.name} ready (yours).`;
    emit('model-loaded', entry);
    return;
  }
  label.textContent = `Fetching ${entry.name}…`;
  const early = prefetched?.name === entry.name ? prefetched.bytes : null;
  prefetched = null;
  const { bytes, cached } = await (early ??
    fetchModel(entry, {
      onProgress: ({ loaded, total }) => {
        label.textContent = `Downloading ${entry.name}: ${(loaded / 1e6).toFixed(1)} of ${(total / 1e6).toFixed(1)} MB`;
      },
    }));
  label.textContent = `Loading ${entry.name}…`;
  await call('loadModel', { entry, bytes: bytes.buffer }, { transfer: [bytes.buffer] });
  app.loaded.add(entry.name);
  label.textContent = `${entry.name} ready (${cached ? 'from the cache' : `downloaded, ${(entry.bytes / 1e6).toFixed(1)} MB`}).`;
  run('show-cached');
  emit('model-loaded', entry);
}
