// Loading a model into the Worker once (ensureModel: concurrent asks share one load; the bytes
// come from the page's model cache, a download, or this browser's storage), the chosen model's
// manifest entry, and the velocity model's JSON. A service the panels share: it owns no part of
// the page but the model status line.
import { $, status, notice } from './page.js';
import { store, markLoaded, forgetLoaded } from './page-store.js';
import { call, onWorkerRestart } from './worker-client.js';
import { fetchModel } from './store.js';
import { run } from './commands.js';
import { emit } from './events.js';
import { weightsOf } from './tune-state.js';

const loading = new Map(); // model name -> the promise of its load into the Worker
let prefetched = null; // {name, bytes: promise of fetchModel} started with the page

// A new Worker has none of the old one's models.
onWorkerRestart(() => {
  forgetLoaded();
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

// The side models' JSON, once fetched ('' when there is none): the velocity model, the pedal.
const sideTexts = { dynamics: null, pedal: null, livePedal: null };
const sideFailures = {
  dynamics: 'The piano will play at one velocity: the dynamics model could not be loaded',
  pedal: 'The written piano will have no pedal: the pedal model could not be loaded',
  livePedal: "The live piano will play without its pedal until the take stops: the live pedal model could not be loaded",
};

/** The side model `kind` the manifest ships, fetched and checked once ('' when none). */
async function sideText(kind) {
  if (sideTexts[kind] !== null) return sideTexts[kind];
  const entry = store[kind];
  if (!entry) return (sideTexts[kind] = '');
  try {
    const { bytes } = await fetchModel(entry);
    sideTexts[kind] = new TextDecoder().decode(bytes);
    status[kind] = entry.name;
  } catch (e) {
    sideTexts[kind] = '';
    notice(`${sideFailures[kind]} (${e.message}).`);
  }
  return sideTexts[kind];
}

/**
 * The velocity model the manifest ships (written accompaniments get their dynamics from it),
 * fetched and checked once; '' when there is none or it could not be had (the piano then
 * plays at one velocity, and the page says why once).
 */
export function dynamicsText() {
  return sideText('dynamics');
}

/**
 * The pedal model the manifest ships (written accompaniments get their learnt sustain pedal
 * from it), fetched and checked once; '' when there is none or it could not be had.
 */
export function pedalText() {
  return sideText('pedal');
}

/**
 * The pedal a live take's piano is pedalled with: the manifest's live (causal) pedal, which
 * pedals it as it plays; without one, the written piano's, which pedals the take when it stops.
 */
export async function livePedalText() {
  return (store.livePedal && (await sideText('livePedal'))) || pedalText();
}

/** Lists the chosen task's models, choosing `selected` (else the default) and its settings. */

/** The chosen model's manifest entry (undefined when the list is empty). */
export function currentEntry() {
  return store.manifest.find((m) => m.name === $('model').value);
}

export function entryNamed(name) {
  return store.manifest.find((m) => m.name === name) ?? null;
}

/** Loads `entry` into the Worker unless it is there or on its way. */
export function ensureModel(entry) {
  if (store.isLoaded(entry.name)) return Promise.resolve();
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
    const weights = await weightsOf(entry);
    if (!weights) throw new Error(`the weights of ${entry.name} are no longer stored in this browser`);
    const copy = new Uint8Array(weights);
    const clean = { ...entry };
    delete clean.user;
    label.textContent = `Loading ${entry.name}…`;
    await call('loadModel', { entry: clean, bytes: copy.buffer }, { transfer: [copy.buffer] });
    markLoaded(entry.name);
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
  markLoaded(entry.name);
  label.textContent = `${entry.name} ready (${cached ? 'from the cache' : `downloaded, ${(entry.bytes / 1e6).toFixed(1)} MB`}).`;
  run('show-cached');
  emit('model-loaded', entry);
}
