// Main thread: owns the page. Starts the model Worker and shows what it reports.
import { drawLossCurve } from './loss-curve.js';

const t0 = performance.now();
const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const preference = ['auto', 'gpu', 'cpu'].includes(params.get('backend')) ? params.get('backend') : 'auto';

// What the end-to-end test (and a curious user in the console) can read.
const status = { state: 'loading', backend: null, readyMs: null, check: null, error: null };
window.pianoformer = status;

function setState(state) {
  status.state = state;
  document.body.dataset.state = state;
}

function showError(message) {
  status.error = message;
  setState('error');
  const box = $('error');
  box.textContent = message;
  box.hidden = false;
  const badge = $('backend-badge');
  if (!status.backend) {
    badge.textContent = 'no backend';
    badge.className = 'badge failed';
  }
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
  if (backend.fallback_reason) text += ` — WebGPU unavailable: ${backend.fallback_reason}`;
  $('check-backend').textContent = text;
  $('check-ready').textContent =
    `${status.readyMs.toFixed(0)} ms after page load (${ms.toFixed(0)} ms in the Worker)`;
  setState('checking');
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
    showError('The compute backend failed its self-check; results on it would not be trustworthy.');
    return;
  }
  setState('ready');
}

function start() {
  $('backend-select').value = preference;
  $('backend-select').addEventListener('change', (e) => {
    const url = new URL(location.href);
    url.searchParams.set('backend', e.target.value);
    location.assign(url);
  });
  let worker;
  try {
    worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
  } catch (e) {
    showError(`This browser cannot start module Workers, which pianoformer needs (${e.message}).`);
    return;
  }
  worker.onmessage = ({ data }) => {
    if (data.type === 'ready') showBackend(data.backend, data.ms);
    else if (data.type === 'check') showCheck(data.report, data.ms);
    else if (data.type === 'error') showError(data.message);
  };
  worker.onerror = (e) => {
    e.preventDefault();
    showError(`The model Worker stopped: ${e.message || 'unknown error'}.`);
  };
  worker.postMessage({ type: 'init', backend: preference });
}

window.addEventListener('error', (e) => showError(`Unexpected error: ${e.message}`));
window.addEventListener('unhandledrejection', (e) => showError(`Unexpected error: ${e.reason?.message ?? e.reason}`));
start();
