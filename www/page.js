// What every panel of the page uses: the `status` object tests and the console read as
// `window.pianoformer`, the URL's settings, and the messages every panel shows (the state,
// errors, notices). The page's state itself is the page store's (page-store.js).
import { store } from './page-store.js';
export const t0 = performance.now();
export const $ = (id) => document.getElementById(id);
export const params = new URLSearchParams(location.search);
const savedPreference = localStorage.getItem('pianoformer.backend');
export const preference =
  ['auto', 'gpu', 'cpu'].find((p) => p === (params.get('backend') ?? savedPreference)) ?? 'auto';
export const MAX_FILE_BYTES = 8 * 1024 * 1024;

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
  // On auto with a WebGPU adapter: each backends' race (race.js's verdicts: kind, winner, the
  // CPU's and WebGPU's times, `text`).
  races: [],
  // Every harmonizer call: {bars, ms} (the lane of a melody-only file, "Suggest chords").
  harmonizations: [],
  shareLink: null,
  // The velocity model written accompaniments use (its name), once fetched.
  dynamics: null,
  get piece() {
    return store.piece;
  },
  attentionBlank: null,
  attentionMarks: null,
  // Every map drawn without generating (attention-panel.js): {model, rows, ms}.
  attentionMaps: [],
  // The Worker's wasm memory in bytes (it only grows: the peak so far).
  wasmBytes: null,
  // Tests only (`?drill`; main.js adds it): destroys the Worker's GPU devices, as a lost GPU would.
  loseDevice: undefined,
  // Each lost GPU device the Worker went on from on the CPU (its message).
  deviceLosses: [],
  // main.js's functions: a change still to be saved (true/false), the lanes' refill after a
  // note edit ('idle', 'due', 'reading'). Tests wait for these states, not for times.
  workPending: null,
  lanesRefill: null,
  // 'ready' once the service worker has kept everything for offline use (sw.js).
  offline: 'pending',
  // Whether the piano plays (playback.js), and the alternatives strip's state
  // (alternatives.js: {kind, count, playing} or null).
  playing: false,
  alternatives: null,
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
