// The worker client: starts the model Worker (worker.js) on a backend, sends it requests and
// routes its replies, progress and news back. `call()` resolves with a request's reply;
// `cancelCall()` asks the Worker to stop one. What the page shows when the Worker reports its
// backend or self-check is main.js's, given once through setWorkerHandlers().
import { app, params, status, showError, notice } from './page.js';

const handlers = {
  backend: (backend, ms) => {}, // the Worker's session is up on `backend` (or moved to it)
  check: (report, ms) => {}, // the backend's self-check report
};

/** Sets what happens when the Worker reports its backend (`backend`) and self-check (`check`). */
export function setWorkerHandlers(h) {
  Object.assign(handlers, h);
}

/** Asks the Worker to stop request `id` (it answers it with a 'cancelled' error). */
export function cancelCall(id) {
  app.worker.postMessage({ type: 'cancel', id });
}

export function startWorker(backend) {
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
      handlers.backend(data.backend, data.ms);
      resolveStarted();
    } else if (data.type === 'check') {
      handlers.check(data.report, data.ms);
    } else if (data.type === 'moved') {
      // The Worker loaded the page's models into the session it moved to.
      const ready = status.readyMs;
      handlers.backend(data.backend, 0);
      status.readyMs = ready;
      if (data.report) handlers.check(data.report, data.ms);
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
export async function call(method, args = {}, { transfer = [], onProgress } = {}) {
  await app.started;
  const id = app.nextId++;
  return new Promise((resolve, reject) => {
    app.calls.set(id, { resolve, reject, onProgress });
    app.worker.postMessage({ type: 'call', id, method, args }, transfer);
    if (onProgress) onProgress({ id, started: true });
  });
}

/** After WebGPU failed mid-way: a fresh Worker on the CPU, the piece untouched. */
export function fallBackToCpu(why) {
  notice(`WebGPU stopped working (${why}). Switched to the CPU; your piece is safe.`);
  startWorker('cpu');
}
