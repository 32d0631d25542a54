// What the page keeps in the browser: downloaded models (Cache API, so a reload does not fetch
// megabytes again) and the work in progress (IndexedDB, so a reload or a crash loses nothing).
// Works in the page and in a Worker; everything degrades to "not kept" where the storage APIs
// are missing (insecure contexts, some private modes), never to an error.

export const MODEL_CACHE = 'pianoformer-models-v1';

/** An Error whose `code` is 'download' (network, server) or 'integrity' (size, checksum). */
export class ModelError extends Error {
  constructor(code, message) {
    super(message);
    this.name = 'ModelError';
    this.code = code;
  }
}

// ---------------------------------------------------------------- integrity

/**
 * Lower-case hex SHA-256 of `bytes`, or null where crypto.subtle is missing (insecure
 * contexts, such as plain http on a LAN address). The Worker's loader checks the checksum
 * again in Rust (sha2) before a model is used, so a missing digest here only means a copy is
 * cached unchecked, never that one runs unchecked.
 */
export async function sha256Hex(bytes) {
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) return null;
  const digest = new Uint8Array(await subtle.digest('SHA-256', bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** Resolves when `bytes` are the model `entry` describes; rejects with a ModelError if not. */
export async function verifyBytes(bytes, entry) {
  const integrity = (why) =>
    new ModelError(
      'integrity',
      `The model ${entry.name} downloaded with the wrong ${why}; it was not used.`,
    );
  if (Number.isFinite(entry.bytes) && bytes.length !== entry.bytes) {
    throw integrity(`size (${bytes.length} bytes, not ${entry.bytes})`);
  }
  const digest = await sha256Hex(bytes);
  if (typeof entry.sha256 !== 'string' || (digest !== null && digest !== entry.sha256.toLowerCase())) {
    throw integrity('checksum');
  }
}

// ---------------------------------------------------------------- models

const modelUrl = (entry, baseUrl) => {
  const base = new URL(baseUrl ?? './models/', import.meta.url);
  return new URL(entry.file, base).href;
};

// Some browsers throw on caches.open (private windows, blocked storage): then no cache.
async function openCache(cacheName) {
  if (typeof caches === 'undefined') return null;
  try {
    return await caches.open(cacheName);
  } catch {
    return null;
  }
}

async function fromCache(cache, url, entry) {
  const hit = await cache.match(url).catch(() => undefined);
  if (!hit) return null;
  try {
    const bytes = new Uint8Array(await hit.arrayBuffer());
    await verifyBytes(bytes, entry);
    return bytes;
  } catch {
    // A stale or truncated copy (an old model under the same name, a write cut short):
    // drop it so the download below replaces it.
    await cache.delete(url).catch(() => {});
    return null;
  }
}

// Reads into one buffer sized from the manifest and refuses to grow past it: a wrong or
// hostile server cannot make the page hold more than the model should weigh.
async function readBody(response, entry, onProgress) {
  const total = Number.isFinite(entry.bytes) ? entry.bytes : null;
  if (!response.body) {
    const bytes = new Uint8Array(await response.arrayBuffer());
    onProgress?.({ loaded: bytes.length, total: total ?? bytes.length });
    return bytes;
  }
  const reader = response.body.getReader();
  let buffer = new Uint8Array(total ?? 1 << 20);
  let loaded = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (loaded + value.length > buffer.length) {
      if (total !== null) {
        reader.cancel().catch(() => {});
        throw new ModelError(
          'integrity',
          `The model ${entry.name} downloaded with the wrong size (more than ${total} bytes); ` +
            'it was not used.',
        );
      }
      const grown = new Uint8Array(Math.max(buffer.length * 2, loaded + value.length));
      grown.set(buffer.subarray(0, loaded));
      buffer = grown;
    }
    buffer.set(value, loaded);
    loaded += value.length;
    onProgress?.({ loaded, total: total ?? loaded });
  }
  return buffer.subarray(0, loaded);
}

async function download(url, entry, onProgress, signal) {
  const failed = (why) =>
    new ModelError('download', `The model ${entry.name} could not be downloaded: ${why}.`);
  let response;
  try {
    // 'no-cache' revalidates with the server: the Cache API keeps the model, and a stale HTTP
    // cache copy of a model that was since retrained would only fail its checksum.
    response = await fetch(url, { cache: 'no-cache', signal });
  } catch (e) {
    if (e?.name === 'AbortError') throw e; // the caller cancelled: not a failure to report
    throw failed(e?.message || 'the network request failed');
  }
  if (!response.ok) {
    throw failed(`the server answered ${response.status} ${response.statusText}`.trim());
  }
  try {
    return await readBody(response, entry, onProgress);
  } catch (e) {
    if (e instanceof ModelError || e?.name === 'AbortError') throw e;
    throw failed(`the connection broke after it started (${e?.message || e})`);
  }
}

/**
 * The bytes of the model `entry` (a manifest entry: name, file, bytes, sha256), from the cache
 * when a checked copy is there, else downloaded, checked and cached.
 * `baseUrl`: folder of the model files (default: models/ beside this module).
 * `onProgress({ loaded, total })`: called as bytes arrive (once, complete, on a cache hit).
 * Resolves to `{ bytes: Uint8Array, cached: boolean }`; rejects with a ModelError.
 */
export async function fetchModel(
  entry,
  { baseUrl, onProgress, cacheName = MODEL_CACHE, signal } = {},
) {
  const url = modelUrl(entry, baseUrl);
  const cache = await openCache(cacheName);
  const hit = cache && (await fromCache(cache, url, entry));
  if (hit) {
    onProgress?.({ loaded: hit.length, total: hit.length });
    return { bytes: hit, cached: true };
  }
  const bytes = await download(url, entry, onProgress, signal);
  await verifyBytes(bytes, entry);
  if (cache) {
    const response = new Response(bytes, {
      headers: {
        'Content-Type': 'application/octet-stream',
        'Content-Length': String(bytes.length),
      },
    });
    // A full disk only means the next visit downloads again.
    await cache.put(url, response).catch((e) => {
      console.warn(`pianoformer: could not cache the model ${entry.name}: ${e?.message ?? e}`);
    });
  }
  return { bytes, cached: false };
}

/** Empties the model cache; resolves to the number of files removed. */
export async function clearModelCache(cacheName = MODEL_CACHE) {
  const cache = await openCache(cacheName);
  if (!cache) return 0;
  const keys = await cache.keys();
  await Promise.all(keys.map((request) => cache.delete(request)));
  return keys.length;
}

/** URLs of the cached model files. */
export async function cachedModels(cacheName = MODEL_CACHE) {
  const cache = await openCache(cacheName);
  if (!cache) return [];
  return (await cache.keys()).map((request) => request.url);
}

// ---------------------------------------------------------------- work in progress

const DB_NAME = 'pianoformer';
const DB_VERSION = 2; // 1: work; 2: + models (fine-tuned in the browser)
const STORE = 'work';
const MODELS = 'models';
const MODEL_FORMAT = 1;
const KEY = 'current';
const WORK_FORMAT = 1;
export const SAVE_DELAY_MS = 500;

let dbPromise = null;
let dbFactory = null;
let pending = null; // { state } waiting for the timer; null when all is written
let timer = null;

function openDb() {
  if (typeof indexedDB === 'undefined') return Promise.reject(new Error('no IndexedDB here'));
  // A different factory (only the tests swap it) means a different database.
  if (dbFactory !== indexedDB) dbPromise = null;
  dbFactory = indexedDB;
  dbPromise ??= new Promise((resolve, reject) => {
    const request = indexedDB.open(DB_NAME, DB_VERSION);
    request.onupgradeneeded = () => {
      const db = request.result;
      for (const name of [STORE, MODELS]) {
        if (!db.objectStoreNames.contains(name)) db.createObjectStore(name);
      }
    };
    request.onsuccess = () => {
      const db = request.result;
      // Let a newer page in another tab upgrade the database instead of being blocked by us.
      db.onversionchange = () => {
        db.close();
        dbPromise = null;
      };
      resolve(db);
    };
    request.onerror = () => reject(request.error);
    request.onblocked = () => reject(new Error('the database is held by another tab'));
  }).catch((e) => {
    dbPromise = null; // try again next time (storage may come back)
    throw e;
  });
  return dbPromise;
}

// One request in its own transaction; resolves with the request's result once committed.
async function transact(mode, act, store = STORE) {
  const db = await openDb();
  return new Promise((resolve, reject) => {
    const tx = db.transaction(store, mode);
    const request = act(tx.objectStore(store));
    tx.oncomplete = () => resolve(request.result);
    tx.onerror = () => reject(tx.error ?? request.error);
    tx.onabort = () => reject(tx.error ?? new Error('the write was aborted'));
  });
}

let writing = 0; // saves being written

/**
 * Keeps `state` (plain JSON: the piece and the settings) for the next visit. Writes at most
 * SAVE_DELAY_MS after the first unsaved change, with whatever state is newest by then: a
 * stream of edits costs one write per half second, and none is postponed forever.
 */
export function saveWork(state) {
  pending = { state };
  if (timer === null) timer = setTimeout(() => void flushWork(), SAVE_DELAY_MS);
}

/** Writes the pending state now (for `pagehide`); never rejects. */
export async function flushWork() {
  if (timer !== null) clearTimeout(timer);
  timer = null;
  if (!pending) return;
  const { state } = pending;
  pending = null;
  if (typeof indexedDB === 'undefined') return; // nowhere to keep it: not an error
  writing++;
  try {
    const record = { format: WORK_FORMAT, savedAt: Date.now(), state };
    await transact('readwrite', (store) => store.put(record, KEY));
    lastWarning = null;
  } catch (e) {
    warnOnce(`pianoformer: the work in progress could not be saved (${e?.message ?? e}).`);
  } finally {
    writing--;
  }
}

/** True while a change waits to be saved or is being written (tests wait for false). */
export const workPending = () => pending !== null || timer !== null || writing > 0;

// A full disk fails every save, twice a second while the user edits: say so once.
let lastWarning = null;
function warnOnce(message) {
  if (message !== lastWarning) console.warn(message);
  lastWarning = message;
}

/** The state saved last, or null when there is none or it cannot be read. */
export async function loadWork() {
  if (pending) return pending.state;
  try {
    const record = await transact('readonly', (store) => store.get(KEY));
    const state = record?.format === WORK_FORMAT ? record.state : null;
    return state !== null && typeof state === 'object' ? state : null;
  } catch {
    return null;
  }
}

/** Forgets the saved work (and any write still waiting); never rejects. */
export async function clearWork() {
  if (timer !== null) clearTimeout(timer);
  timer = null;
  pending = null;
  try {
    await transact('readwrite', (store) => store.delete(KEY));
  } catch (e) {
    if (typeof indexedDB !== 'undefined') {
      console.warn(`pianoformer: the saved work could not be removed (${e?.message ?? e}).`);
    }
  }
}

// ---------------------------------------------------------------- your models

/**
 * Keeps a fine-tuned model (its manifest entry and weights) under `entry.name`, replacing one
 * of that name. Rejects with a sentence when the browser cannot keep it (no IndexedDB, disk
 * full): the model then lives until the tab closes, and exporting it is the way to keep it.
 */
export async function saveUserModel(entry, weights) {
  if (typeof indexedDB === 'undefined') throw new Error('this browser offers no storage here');
  const record = { format: MODEL_FORMAT, savedAt: Date.now(), entry, weights: new Uint8Array(weights) };
  try {
    await transact('readwrite', (store) => store.put(record, entry.name), MODELS);
  } catch (e) {
    throw new Error(`the browser refused to store it (${e?.message ?? e})`);
  }
}

/** The kept models' entries with when they were saved, oldest first; [] when none or unreadable. */
export async function listUserModels() {
  try {
    const records = await transact('readonly', (store) => store.getAll(), MODELS);
    return (records ?? [])
      .filter((r) => r?.format === MODEL_FORMAT && r.entry?.name)
      .sort((a, b) => a.savedAt - b.savedAt)
      .map((r) => ({ entry: r.entry, savedAt: r.savedAt }));
  } catch {
    return [];
  }
}

/** `{entry, weights}` of the kept model `name`, or null. */
export async function loadUserModel(name) {
  try {
    const r = await transact('readonly', (store) => store.get(name), MODELS);
    return r?.format === MODEL_FORMAT ? { entry: r.entry, weights: new Uint8Array(r.weights) } : null;
  } catch {
    return null;
  }
}

/** Forgets the kept model `name`; never rejects. */
export async function deleteUserModel(name) {
  try {
    await transact('readwrite', (store) => store.delete(name), MODELS);
  } catch (e) {
    console.warn(`pianoformer: the model ${name} could not be removed (${e?.message ?? e}).`);
  }
}
