// Model cache and work in progress: run with `node --test tests/js/`. Node has no Cache API or
// IndexedDB, so the tests stand in small fakes for them (and for fetch).
import test from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  sha256Hex,
  verifyBytes,
  fetchModel,
  clearModelCache,
  cachedModels,
  saveWork,
  loadWork,
  flushWork,
  clearWork,
  SAVE_DELAY_MS,
  saveUserModel,
  listUserModels,
  loadUserModel,
  deleteUserModel,
} from '../../www/store.js';

const hex = (bytes) => createHash('sha256').update(bytes).digest('hex');
const model = new Uint8Array(300_000).map((_, i) => (i * 31 + (i >> 8)) & 255);
const entry = { name: 'test-model', file: 'test-model.bpk', bytes: model.length, sha256: hex(model) };
const BASE = 'https://example.test/models/';

// A fetch that serves `files` (url → bytes) in 64 kB chunks and records what was asked.
function stubFetch(files) {
  const calls = [];
  globalThis.fetch = async (url) => {
    calls.push(String(url));
    const bytes = files[String(url)];
    if (!bytes) return new Response('missing', { status: 404, statusText: 'Not Found' });
    const body = new ReadableStream({
      start(controller) {
        for (let at = 0; at < bytes.length; at += 65536) {
          controller.enqueue(bytes.slice(at, at + 65536));
        }
        controller.close();
      },
    });
    return new Response(body);
  };
  return calls;
}

function fakeCaches() {
  const stores = new Map();
  const key = (r) => (typeof r === 'string' ? r : r.url);
  return {
    stores,
    async open(name) {
      if (!stores.has(name)) stores.set(name, new Map());
      const files = stores.get(name);
      return {
        match: async (r) => (files.has(key(r)) ? new Response(files.get(key(r))) : undefined),
        put: async (r, response) => {
          files.set(key(r), new Uint8Array(await response.arrayBuffer()));
        },
        delete: async (r) => files.delete(key(r)),
        keys: async () => [...files.keys()].map((url) => new Request(url)),
      };
    },
  };
}

const realFetch = globalThis.fetch;
test.afterEach(() => {
  globalThis.fetch = realFetch;
  delete globalThis.caches;
  delete globalThis.indexedDB;
});

test('sha256Hex matches node:crypto', async () => {
  for (const n of [0, 1, 64, 1000, 100_003]) {
    const bytes = new Uint8Array(n).map((_, i) => (i * 7 + n) & 255);
    assert.equal(await sha256Hex(bytes), hex(bytes));
  }
});

test('verifyBytes accepts the right bytes and refuses a wrong size or checksum', async () => {
  await verifyBytes(model, entry);
  await verifyBytes(model, { ...entry, sha256: entry.sha256.toUpperCase() });
  await assert.rejects(verifyBytes(model.subarray(1), entry), {
    code: 'integrity',
    message: /^The model test-model downloaded with the wrong size \(299999 bytes, not 300000\)/,
  });
  const flipped = model.slice();
  flipped[1234] ^= 1;
  await assert.rejects(verifyBytes(flipped, entry), {
    code: 'integrity',
    message: 'The model test-model downloaded with the wrong checksum; it was not used.',
  });
});

test('fetchModel without a Cache API downloads, checks and reports progress', async () => {
  const calls = stubFetch({ [BASE + entry.file]: model });
  const progress = [];
  const onProgress = (p) => progress.push(p);
  const { bytes, cached } = await fetchModel(entry, { baseUrl: BASE, onProgress });
  assert.equal(cached, false);
  assert.deepEqual(bytes, model);
  assert.deepEqual(calls, [BASE + entry.file]);
  assert.ok(progress.length >= 4, `${progress.length} progress reports`);
  assert.ok(progress.every((p) => p.total === model.length));
  assert.ok(progress.every((p, i) => i === 0 || p.loaded > progress[i - 1].loaded), 'growing');
  assert.equal(progress.at(-1).loaded, model.length);
});

test('fetchModel refuses a download with the wrong checksum', async () => {
  const wrong = model.slice();
  wrong[0] ^= 255;
  stubFetch({ [BASE + entry.file]: wrong });
  await assert.rejects(fetchModel(entry, { baseUrl: BASE }), {
    code: 'integrity',
    message: 'The model test-model downloaded with the wrong checksum; it was not used.',
  });
});

test('fetchModel stops a download larger than the manifest says', async () => {
  stubFetch({ [BASE + entry.file]: new Uint8Array(model.length + 70000) });
  await assert.rejects(fetchModel(entry, { baseUrl: BASE }), {
    code: 'integrity',
    message: /wrong size \(more than 300000 bytes\)/,
  });
});

test('fetchModel says plainly when the download fails', async () => {
  stubFetch({});
  await assert.rejects(fetchModel(entry, { baseUrl: BASE }), {
    code: 'download',
    message: 'The model test-model could not be downloaded: the server answered 404 Not Found.',
  });
  globalThis.fetch = async () => {
    throw new TypeError('Failed to fetch');
  };
  await assert.rejects(fetchModel(entry, { baseUrl: BASE }), {
    code: 'download',
    message: 'The model test-model could not be downloaded: Failed to fetch.',
  });
});

test('fetchModel resolves the file beside this module by default', async () => {
  const calls = stubFetch({});
  await assert.rejects(fetchModel(entry));
  assert.equal(calls[0], new URL('../../www/models/test-model.bpk', import.meta.url).href);
});

test('fetchModel caches a checked download, serves it next time, and replaces a bad copy', async () => {
  const fake = fakeCaches();
  globalThis.caches = fake;
  const calls = stubFetch({ [BASE + entry.file]: model });
  assert.equal((await fetchModel(entry, { baseUrl: BASE })).cached, false);
  assert.deepEqual(await cachedModels(), [BASE + entry.file]);

  const progress = [];
  const again = await fetchModel(entry, { baseUrl: BASE, onProgress: (p) => progress.push(p) });
  assert.equal(again.cached, true);
  assert.deepEqual(again.bytes, model);
  assert.equal(calls.length, 1, 'no second download');
  assert.deepEqual(progress, [{ loaded: model.length, total: model.length }]);

  // A stale copy (an older model under the same file name) is dropped and downloaded again.
  fake.stores.get('pianoformer-models-v1').set(BASE + entry.file, new Uint8Array(10));
  const fresh = await fetchModel(entry, { baseUrl: BASE });
  assert.equal(fresh.cached, false);
  assert.deepEqual(fresh.bytes, model);
  assert.equal(calls.length, 2);
  assert.deepEqual(fake.stores.get('pianoformer-models-v1').get(BASE + entry.file), model);

  // A wrong download is never cached.
  const other = { ...entry, file: 'other.bpk' };
  stubFetch({ [BASE + 'other.bpk']: new Uint8Array(model.length) });
  await assert.rejects(fetchModel(other, { baseUrl: BASE }), { code: 'integrity' });
  assert.deepEqual(await cachedModels(), [BASE + entry.file]);

  assert.equal(await clearModelCache(), 1);
  assert.deepEqual(await cachedModels(), []);
});

test('without a Cache API the cache helpers report nothing cached', async () => {
  assert.equal(await clearModelCache(), 0);
  assert.deepEqual(await cachedModels(), []);
});

// The part of IndexedDB store.js uses; values are cloned on put, as the real one does.
function fakeIndexedDB({ failPuts = false } = {}) {
  const stores = new Map();
  const data = new Map();
  const fake = { data, stores, puts: 0 };
  const later = (fn) => setTimeout(fn, 1);
  const db = {
    objectStoreNames: { contains: (name) => stores.has(name) },
    createObjectStore(name) {
      stores.set(name, name === 'work' ? data : new Map());
    },
    close() {},
    transaction(name) {
      const data = stores.get(name);
      if (!data) throw new Error(`NotFoundError: no store ${name}`);
      const tx = {};
      const request = (run) => {
        const r = {};
        later(() => {
          try {
            r.result = run();
            tx.oncomplete?.();
          } catch (e) {
            tx.error = e;
            tx.onabort?.();
          }
        });
        return r;
      };
      tx.objectStore = () => ({
        put(value, key) {
          fake.puts++;
          const copy = structuredClone(value);
          return request(() => {
            if (failPuts) throw new Error('QuotaExceededError');
            data.set(key, copy);
          });
        },
        get: (key) => request(() => structuredClone(data.get(key))),
        getAll: () => request(() => [...data.values()].map((v) => structuredClone(v))),
        delete: (key) => request(() => void data.delete(key)),
      });
      return tx;
    },
  };
  fake.db = db;
  fake.open = () => {
    const r = {};
    later(() => {
      r.result = db;
      r.onupgradeneeded?.();
      r.onsuccess?.();
    });
    return r;
  };
  return fake;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

test('work in progress without IndexedDB: nothing throws, nothing is kept', async () => {
  saveWork({ piece: 1 });
  await flushWork();
  assert.equal(await loadWork(), null);
  await clearWork();
});

test('saveWork writes once per burst of edits, the newest state, after the delay', async () => {
  const fake = fakeIndexedDB();
  globalThis.indexedDB = fake;
  assert.equal(await loadWork(), null);
  for (let i = 0; i < 5; i++) saveWork({ piece: { name: `v${i}` }, settings: { temperature: 1 } });
  assert.equal(fake.puts, 0, 'nothing written at once');
  await sleep(SAVE_DELAY_MS + 100);
  assert.equal(fake.puts, 1);
  assert.deepEqual(await loadWork(), { piece: { name: 'v4' }, settings: { temperature: 1 } });
  assert.equal(fake.data.get('current').format, 1);

  saveWork({ piece: { name: 'now' } });
  await flushWork(); // what pagehide calls
  assert.equal(fake.puts, 2);
  await sleep(SAVE_DELAY_MS + 50);
  assert.equal(fake.puts, 2, 'the flushed timer does not write again');
  assert.deepEqual(await loadWork(), { piece: { name: 'now' } });

  await clearWork();
  assert.equal(await loadWork(), null);

  fake.data.set('current', { something: 'else' });
  assert.equal(await loadWork(), null, 'an unreadable record reads as nothing saved');

  // Another tab upgrading the database: the page lets go and opens it afresh next time.
  fake.db.onversionchange();
});

test('a failed save only warns', async (t) => {
  globalThis.indexedDB = fakeIndexedDB({ failPuts: true });
  const warn = t.mock.method(console, 'warn', () => {});
  saveWork({ piece: {} });
  await flushWork();
  assert.equal(warn.mock.callCount(), 1);
  assert.match(warn.mock.calls[0].arguments[0], /could not be saved \(QuotaExceededError\)/);
  saveWork({ piece: {} });
  await flushWork();
  assert.equal(warn.mock.callCount(), 1, 'the same failure is reported once');
});

test('fine-tuned models are kept, listed, read back and deleted', async () => {
  globalThis.indexedDB = fakeIndexedDB();
  const entry = { name: 'mine', task: 'Accompaniment', bytes: 3 };
  await saveUserModel(entry, new Uint8Array([1, 2, 3]));
  await sleep(5);
  await saveUserModel({ ...entry, name: 'second' }, new Uint8Array([4]));
  const listed = await listUserModels();
  assert.deepEqual(listed.map((m) => m.entry.name), ['mine', 'second']);
  assert.equal(listed[0].weights, undefined, 'the list does not carry weights');
  const back = await loadUserModel('mine');
  assert.deepEqual(back.entry, entry);
  assert.deepEqual([...back.weights], [1, 2, 3]);
  await deleteUserModel('mine');
  assert.equal(await loadUserModel('mine'), null);
  assert.deepEqual((await listUserModels()).map((m) => m.entry.name), ['second']);
  // The work in progress lives in its own store, untouched.
  assert.equal(await loadWork(), null);
});

test('without IndexedDB a model cannot be kept, and says so', async () => {
  delete globalThis.indexedDB;
  await assert.rejects(saveUserModel({ name: 'x' }, new Uint8Array(1)), /offers no storage/);
  assert.deepEqual(await listUserModels(), []);
  assert.equal(await loadUserModel('x'), null);
});
