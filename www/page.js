// The page's shared state, in one place: the `app` object (what several panels read and
// change: the piece, the models and which are loaded, the generation running,
// the comparison on show, the Fine-tune panel; what one module alone uses stays in it), the
// `status` object tests and the console read as `window.pianoformer`, the URL's settings, and
// the messages every panel shows (the state, errors, notices). No imports: every other module
// of the page imports this one.
import { showDraft, store } from './page-store.js';
export const t0 = performance.now();
export const $ = (id) => document.getElementById(id);
export const params = new URLSearchParams(location.search);
const savedPreference = localStorage.getItem('pianoformer.backend');
export const preference =
  ['auto', 'gpu', 'cpu'].find((p) => p === (params.get('backend') ?? savedPreference)) ?? 'auto';
export const MAX_FILE_BYTES = 8 * 1024 * 1024;

export const app = {
  // The current piece lives in the page store (page-store.js); this reads it, and a
  // generation's draft is put on show through it.
  get piece() {
    return store.piece;
  },
  set piece(draft) {
    showDraft(draft);
  },
  // The running generation or chord suggestion (page-store.js startJob/endJob), or null.
  get generating() {
    return store.job;
  },
  manifest: [],
  loaded: new Set(), // models loaded in the current Worker
  compare: null, // the Comparison on show (compare.js), or null
  tuning: null, // the Fine-tune panel (tune.js), once main.js has made it
  dynamicsEntry: null, // the manifest's velocity model (models.js), or null
};

// What the end-to-end test (and a curious user in the console) can read. main.js adds the
// hooks that need the Worker and the attention map (wasmBytes, attentionBlank, loseDevice).
export const status = {
  state: 'loading',
  backend: null,
  readyMs: null,
  modelReadyMs: null, // when the chosen model was first loaded (ms after page load)
  check: null,
  error: null,
  generations: [],
  // Every harmonizer call: {bars, ms} (the lane of a melody-only file, "Suggest chords").
  harmonizations: [],
  shareLink: null,
  // The velocity model written accompaniments use (its name), once fetched.
  dynamics: null,
  get piece() {
    return app.piece;
  },
  attentionBlank: null,
  // The Worker's wasm memory in bytes (it only grows: the peak so far).
  wasmBytes: null,
  // Tests only (`?drill`; main.js adds it): destroys the Worker's GPU devices, as a lost GPU would.
  loseDevice: undefined,
  // 'ready' once the service worker has kept everything for offline use (sw.js).
  offline: 'pending',
};
window.pianoformer = status;

export function setState(state) {
  status.state = state;
  document.body.dataset.state = state;
}

export function showError(message, { fatal = false } = {}) {
  status.error = message;
  if (fatal) setState('error');
  $('error-text').textContent = message;
  $('error').hidden = false;
  if (fatal && !status.backend) {
    $('backend-badge').textContent = 'no backend';
    $('backend-badge').className = 'badge failed';
  }
}

export function notice(message) {
  const box = $('notice');
  box.textContent = message;
  box.hidden = !message;
}

/** Saves `blob` as a file called `name` (a download the browser shows). */
export function download(blob, name) {
  const url = URL.createObjectURL(blob);
  const a = Object.assign(document.createElement('a'), { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
