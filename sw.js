// The app offline: a module service worker (registered by www/main.js once the page is ready)
// that keeps everything the page needs, so a later visit works with the network off.
//
// - On install: the app shell (index.html, every module and style, the wasm and its loader,
//   the model manifest, the web app manifest and icon) and the 30 piano samples go into the
//   shell cache; the default models go, checked against the manifest's size and sha256, into
//   the page's own model cache (www/store.js), where the page looks first.
// - On fetch (same-origin GET): the network first, so an online visit always gets the newest
//   build, and every good answer refreshes the cache; the cache when the network fails.
//   Model files are left to the page's model cache.
// - On activate: caches of other versions of this worker are deleted.
// Bump VERSION when the list of cached files changes shape.
import { fetchModel } from './www/store.js';
import { SAMPLES } from './www/audio.js';

export const VERSION = 21;
export const SHELL_CACHE = `pianoformer-shell-v${VERSION}`;

/** What the page cannot start without, relative to this worker. */
export const SHELL_FILES = [
  './',
  'index.html',
  'manifest.webmanifest',
  'www/icon.svg',
  'www/style.css',
  'www/attention-panel.js',
  'www/attention-view.js',
  'www/attention.js',
  'www/audio-notes.js',
  'www/audio-voices.js',
  'www/audio.js',
  'www/backend-card.js',
  'www/backends.js',
  'www/commands.js',
  'www/compare-panel.js',
  'www/compare.js',
  'www/events.js',
  'www/generate.js',
  'www/generation-plan.js',
  'www/harmonizer.js',
  'www/alternatives.js',
  'www/keys.js',
  'www/labels.js',
  'www/lanes.js',
  'www/live-plan.js',
  'www/live.js',
  'www/loss-curve.js',
  'www/main.js',
  'www/model-loader.js',
  'www/models.js',
  'www/note-edit.js',
  'www/options.js',
  'settings/options.json',
  'settings/chords.json',
  'settings/textures.json',
  'www/page-store.js',
  'www/page-text.js',
  'www/page.js',
  'www/piece-view.js',
  'www/piece.js',
  'www/plan-song.js',
  'www/play-in.js',
  'www/playback.js',
  'www/race.js',
  'www/gpu-guard.js',
  'www/roll-draw.js',
  'www/roll-edit.js',
  'www/roll-geometry.js',
  'www/roll-input.js',
  'www/roll.js',
  'www/settings.js',
  'www/share.js',
  'www/sound.js',
  'www/sharing.js',
  'www/store.js',
  'www/texture.js',
  'www/pedal.js',
  'www/tune-files.js',
  'www/tune-mine.js',
  'www/tune-state.js',
  'www/tune-text.js',
  'www/tune.js',
  'www/worker-client.js',
  'www/worker.js',
  // The CPU bundle, which the page starts on; the WebGPU bundle (pkg/) is kept when a visit
  // with WebGPU fetches it (networkFirst below).
  'pkg/cpu/pianoformer.js',
  'pkg/cpu/pianoformer_bg.wasm',
  'www/models/manifest.json',
];

export const SAMPLE_FILES = SAMPLES.map((s) => `www/samples/${s.name}.mp3`);

// Only when running as a service worker (the module is also imported by the tests under Node).
if (typeof ServiceWorkerGlobalScope !== 'undefined' && self instanceof ServiceWorkerGlobalScope) {
  self.addEventListener('install', (event) => event.waitUntil(install()));
  self.addEventListener('activate', (event) => event.waitUntil(activate()));
  self.addEventListener('fetch', (event) => {
    const { request } = event;
    const url = new URL(request.url);
    if (request.method !== 'GET' || url.origin !== self.location.origin) return;
    if (url.pathname.endsWith('.bpk')) return;
    event.respondWith(networkFirst(request));
  });
}

async function install() {
  const cache = await caches.open(SHELL_CACHE);
  // 'reload': past the HTTP cache, so a new worker never keeps an old build.
  await cache.addAll(SHELL_FILES.map((f) => new Request(f, { cache: 'reload' })));
  // Samples and default models are wanted, not required: a failure means they come later.
  await cache.addAll(SAMPLE_FILES).catch(() => {});
  try {
    const manifest = await (await cache.match('www/models/manifest.json')).json();
    for (const entry of manifest.models.filter((m) => m.default)) {
      await fetchModel(entry).catch(() => {});
    }
  } catch {
    // No readable manifest: the models are cached when first used.
  }
  await self.skipWaiting();
}

/**
 * The caches an activating worker deletes: older versions of the app shell. The model cache
 * stays (its files are checked by sha256), and so does anything another app on this origin
 * keeps.
 */
export function staleCaches(names) {
  return names.filter((name) => name.startsWith('pianoformer-shell-') && name !== SHELL_CACHE);
}

async function activate() {
  for (const name of staleCaches(await caches.keys())) await caches.delete(name);
  await self.clients.claim();
}

async function networkFirst(request) {
  const cache = await caches.open(SHELL_CACHE);
  try {
    const response = await fetch(request);
    if (response.status === 200 && response.type === 'basic') {
      cache.put(request, response.clone()).catch(() => {});
    }
    return response;
  } catch (e) {
    // A visit with ?backend=… or a share link's #fragment is still the same page.
    const hit = await cache.match(request, { ignoreSearch: true });
    if (hit) return hit;
    throw e;
  }
}
