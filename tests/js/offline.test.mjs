// The offline service worker's lists (sw.js) against the files the page is made of, and the
// server's answers for the worker and the web app manifest.
import test from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { SAMPLE_FILES, SHELL_CACHE, SHELL_FILES, VERSION, staleCaches } from '../../sw.js';
import { SAMPLES } from '../../www/audio.js';
import { MODEL_CACHE } from '../../www/store.js';
import { startServer } from '../../tools/serve.mjs';

const root = new URL('../../', import.meta.url);

test('the shell holds every module and style of the page, and each one exists', () => {
  const www = readdirSync(new URL('www/', root)).filter((f) => /\.(js|css)$/.test(f));
  for (const f of www) assert.ok(SHELL_FILES.includes(`www/${f}`), `www/${f} is not kept offline`);
  for (const f of SHELL_FILES.filter((f) => f !== './' && !f.startsWith('pkg/'))) {
    assert.ok(existsSync(new URL(f, root)), `${f} is listed but missing`);
  }
  // The bundles and their loaders are what the Worker imports: the CPU one is kept offline.
  const worker = readFileSync(new URL('www/backends.js', root), 'utf8');
  assert.match(worker, /cpu: '\.\.\/pkg\/cpu\/pianoformer\.js', gpu: '\.\.\/pkg\/pianoformer\.js'/);
  assert.ok(SHELL_FILES.includes('pkg/cpu/pianoformer.js') && SHELL_FILES.includes('pkg/cpu/pianoformer_bg.wasm'));
  assert.match(SHELL_CACHE, /^pianoformer-shell-v\d+$/);
});

test('a new version deletes the older shells, and keeps the models and other apps\' caches', () => {
  const older = [`pianoformer-shell-v${VERSION - 1}`, 'pianoformer-shell-v0'];
  const kept = [SHELL_CACHE, MODEL_CACHE, 'some-other-app'];
  assert.deepEqual(staleCaches([...kept, ...older]), older);
  assert.deepEqual(staleCaches(kept), []);
});

test('every piano sample is kept', () => {
  assert.equal(SAMPLE_FILES.length, SAMPLES.length);
  assert.equal(new Set(SAMPLE_FILES).size, SAMPLES.length);
  if (existsSync(new URL('www/samples/', root))) {
    for (const f of SAMPLE_FILES) assert.ok(existsSync(new URL(f, root)), f);
  }
});

test('the server sends the worker as JavaScript and the web app manifest with its type', async () => {
  const server = await startServer({ port: 0, quiet: true });
  try {
    const base = `http://127.0.0.1:${server.address().port}/`;
    const sw = await fetch(base + 'sw.js');
    assert.equal(sw.status, 200);
    assert.match(sw.headers.get('content-type'), /^text\/javascript/);
    await sw.arrayBuffer();
    const res = await fetch(base + 'manifest.webmanifest');
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'application/manifest+json');
    const manifest = await res.json();
    assert.equal(manifest.start_url, './');
    for (const icon of manifest.icons) {
      const r = await fetch(new URL(icon.src, base));
      assert.equal(r.status, 200, icon.src);
      await r.arrayBuffer();
    }
    const html = readFileSync(new URL('index.html', root), 'utf8');
    assert.match(html, /<link rel="manifest" href="manifest\.webmanifest">/);
  } finally {
    server.close();
  }
});
