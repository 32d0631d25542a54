// The worker client: starts the model Worker (worker.js) on a backend, sends it requests and
// routes its replies, progress and news back. `call()` resolves with a request's reply;
// `cancelCall()` asks the Worker to stop one. What the page shows when the Worker reports its
// backend or self-check is main.js's, given once through setWorkerHandlers(). The Worker and
// its bookkeeping are this module's alone; others ask through the functions below.
import { params, status, showError, notice } from './page.js';
import { store } from './page-store.js';

let worker = null;
let backendAsked = null; // what the current Worker was started on: 'auto', 'gpu' or 'cpu'
const calls = new Map(); // request id -> {resolve, reject, onProgress}
let nextId = 1;
let started = null; // resolves when the Worker's wasm and session are up
let lost = null; // the GPU device's loss message, once the Worker reports one
const restartHooks = [];

const handlers = {
  backend: (backend, ms) => {}, // the Worker's session is up on `backend` (or generation moved to it)
  race: (race) => {}, // a backends' race ended (race.js's verdict with its words), or failed (null)
  check: (report, ms) => {}, // the backend's self-check report
};

/** Sets what happens when the Worker reports its backend (`backend`) and self-check (`check`). */
export function setWorkerHandlers(h) {
  Object.assign(handlers, h);
}

/** Runs `hook()` whenever a new Worker starts (what the old one had loaded is gone). */
export function onWorkerRestart(hook) {
  restartHooks.push(hook);
}

/** The backend the current Worker was started on ('auto', 'gpu' or 'cpu'). */
export const workerBackend = () => backendAsked;

/** Resolves when the current Worker is up (rejects when it failed to start). */
export const workerStarted = () => started;

/** The GPU device's loss message, once the current Worker has reported one (else null). */
export const deviceLost = () => lost;

/** Tests only (`?drill`): asks the Worker to act out a failure (`'lose-device'`). */
export function drill(what) {
  worker?.postMessage({ type: 'drill', what });
}

/** Asks the Worker to stop request `id` (it answers it with a 'cancelled' error). */
export function cancelCall(id) {
  worker?.postMessage({ type: 'cancel', id });
}

export function startWorker(backend) {
  worker?.terminate();
  worker = null;
  for (const pending of calls.values()) pending.reject(new Error('the model Worker restarted'));
  calls.clear();
  for (const hook of restartHooks) hook();
  backendAsked = backend;
  let resolveStarted;
  let rejectStarted;
  started = new Promise((resolve, reject) => {
    resolveStarted = resolve;
    rejectStarted = reject;
  });
  started.catch(() => {});
  let mine;
  try {
    mine = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
  } catch (e) {
    showError(`This browser cannot start module Workers, which pianoformer needs (${e.message}).`, {
      fatal: true,
    });
    return;
  }
  worker = mine;
  lost = null;
  mine.onmessage = ({ data }) => {
    if (data.type === 'ready') {
      handlers.backend(data.backend, data.ms);
      resolveStarted();
    } else if (data.type === 'check') {
      handlers.check(data.report, data.ms);
    } else if (data.type === 'raced') {
      // On auto: a kind of work was raced on both backends (race.js); generation's backend is
      // the one the badge shows. WebGPU's self-check comes with a win.
      if (data.race) status.races.push(data.race);
      if (data.backend && (!data.race || data.race.kind === 'generation')) {
        const ready = status.readyMs;
        handlers.backend(data.backend, 0);
        status.readyMs = ready;
      }
      if (data.report) handlers.check(data.report, data.ms);
      handlers.race(data.race);
      if (data.race?.winner === 'gpu') {
        notice(`${data.race.kind === 'generation' ? 'Generation' : 'Fine-tuning'} now runs on ${data.backend.label}: it won a race against the CPU.`);
      }
    } else if (data.type === 'error') {
      rejectStarted(new Error(data.message));
      showError(data.message, { fatal: true });
    } else if (data.type === 'reply') {
      const pending = calls.get(data.id);
      calls.delete(data.id);
      if (!pending) return;
      if (data.ok) pending.resolve(data.value);
      else {
        const error = new Error(data.message);
        error.fatal = data.fatal;
        // The Worker's guard found the device gone (and could not go on on the CPU itself).
        error.deviceLost = data.deviceLost;
        if (data.deviceLost && mine === worker) lost ??= data.message;
        pending.reject(error);
      }
    } else if (data.type === 'stopped' && mine === worker) {
      stopped(data.message);
    } else if (data.type === 'progress') {
      calls.get(data.id)?.onProgress?.(data);
    } else if (data.type === 'device-lost' && mine === worker) {
      lost = data.message;
      if (data.backend) {
        // The Worker runs on the CPU now (the request that met the loss ran again there, a
        // fine-tuning run goes on from its last good step): nothing to restart.
        const ready = status.readyMs;
        handlers.backend(data.backend, 0);
        if (ready !== undefined && ready !== null) status.readyMs = ready;
        resolveStarted();
        status.deviceLosses.push(data.message);
        notice(`WebGPU stopped working (the GPU device was lost: ${data.message}). Switched to the CPU; your piece is safe.`);
      } else if (!store.job) {
        // A generation in progress fails and is run again on a CPU Worker; otherwise move now.
        fallBackToCpu(`the GPU device was lost: ${data.message}`);
      }
    }
  };
  mine.onerror = (e) => {
    e.preventDefault();
    stopped(e.message);
  };
  // The Worker stopped: every call fails, and the page says so.
  function stopped(why) {
    const message = `The model Worker stopped: ${why || 'unknown error'}.`;
    rejectStarted(new Error(message));
    for (const pending of calls.values()) {
      const error = new Error(message);
      error.fatal = true;
      pending.reject(error);
    }
    calls.clear();
    showError(message);
  }
  // `?drill=move`: tests move generation (and fine-tuning) to WebGPU whatever its race says.
  // `?fused=0`: the accompaniment's steps and continuation's tokens through tensor ops on
  // WebGPU (not fused).
  mine.postMessage({ type: 'init', backend, drill: params.get('drill'), fused: params.get('fused') !== '0' });
}

/** Sends a request to the Worker; resolves with its reply. */
export async function call(method, args = {}, { transfer = [], onProgress } = {}) {
  await started;
  const id = nextId++;
  return new Promise((resolve, reject) => {
    calls.set(id, { resolve, reject, onProgress });
    worker.postMessage({ type: 'call', id, method, args }, transfer);
    if (onProgress) onProgress({ id, started: true });
  });
}

/** After WebGPU failed mid-way: a fresh Worker on the CPU, the piece untouched. */
export function fallBackToCpu(why) {
  status.deviceLosses.push(why);
  notice(`WebGPU stopped working (${why}). Switched to the CPU; your piece is safe.`);
  startWorker('cpu');
}
