// The model's home: the Worker loads the wasm, owns the Session and the loaded models, and
// talks to the page only by messages, so the page never freezes while tensors are computed.
//
// In:  {type: 'init', backend: 'auto' | 'gpu' | 'cpu'}
//      {type: 'call', id, method, args}   methods: readMidi, writeMidi, exampleMidi, checkPiece, memory,
//                                          loadModel, hasModel, unloadModel, generate, attention,
//                                          harmonize, liveStart, liveStep, liveStop,
//                                          template; fine-tuning: tuneInspect, tuneStart,
//                                          tuneStep, tuneKeep, tuneDrop, packModel, unpackModel
//      {type: 'cancel', id}
// Out: {type: 'ready', backend, ms} · {type: 'check', report, ms} · {type: 'error', message}
//      {type: 'device-lost', message, backend?}  (the GPU device is gone; with `backend`, the
//      Worker already runs on the CPU: the request that met the loss is run again there and a
//      fine-tuning run goes on from its last good step; without, the page starts a CPU Worker)
//      {type: 'raced', race, backend, report?, ms?}  (on auto: a kind of work was raced on both
//      backends — race.js's verdict with its words — and runs on `backend` from now on; with
//      WebGPU's self-check when WebGPU won)
//
// Two bundles: pkg/cpu/ (no WebGPU code, a fraction of the size) makes the page ready on the
// CPU; on "auto" with a WebGPU adapter, pkg/ (with WebGPU) is fetched afterwards and each kind
// of work is raced on both (race.js): generation as soon as a generation model is loaded (one
// bar of accompaniment, or 16 tokens of continuation, with that model), fine-tuning at the
// first run's start (two steps of it; not on a software adapter, nor on one that lost
// generation by far). The work goes where its race was won; WebGPU passes its self-check
// first. "WebGPU only" loads pkg/ alone and is ready once WebGPU is up; its self-check
// follows, in the background.
//      {type: 'reply', id, ok, value | message} · {type: 'progress', id, done, total, bars?, notes?,
//      attention?}

import { SOFTWARE_TUNING_SLOWER, gpuLimits, raceText, raceTuningAfter, tuningSkippedText, verdict } from './race.js';
import { Drill, GpuGuard, PROBE_LABEL } from './gpu-guard.js';

let wasm = null;
let session = null; // the session the page starts on (on auto: the CPU's)
let wasmMemory = null;
// The fine-tuning run in progress (the page calls tuneStep once per step): the run, the
// session it runs in (a later move leaves it there), what started it, and — while it runs on
// a GPU — a snapshot of its last good step, to go on from on the CPU if the device is lost.
let tune = null; // {run, session, base, pieces, options, snapshot}
const cancelled = new Set();
// The models loaded into the session, {entry, bytes} by name: a move to the other bundle loads
// them there too, so the page's requests go on as before.
const models = new Map();

// On auto: the WebGPU session waiting beside the CPU's, {session, backend, checked}, once
// fetched; the session each kind of work runs in (null: `session`) once raced; the races'
// verdicts; the generation model to race with; the race running (requests wait for it).
let gpu = null;
const routes = { generation: null, tuning: null };
const races = {};
let raceModel = null;
let racing = null;
let inFlight = 0; // requests running on a session (a race waits for none to be running)
const idleWaiters = [];
let drillMode = null;

// The GPU devices, watched by the guard (gpu-guard.js), the one place that decides "the device
// is gone"; every GPU call goes through gpuCall(). Once it is gone, fallBack() moves the Worker
// to the CPU (`switching` while it does).
let switching = null;
const guard = new GpuGuard({
  onGone: (message) => {
    switching ??= fallBack(message);
  },
});
// What the Worker is doing with a GPU, each with the number of its calls in flight ('load',
// 'check', 'fused-check', 'race', 'generate', 'attention', 'tune' — the drill's moments — or
// 'template', 'harmonize', 'live'). Calls overlap (a template while a generation runs), so a
// read-back counts for every moment in flight.
const moments = new Map();
function enter(what) {
  moments.set(what, (moments.get(what) ?? 0) + 1);
}
function leave(what) {
  const n = moments.get(what) - 1;
  if (n > 0) moments.set(what, n);
  else moments.delete(what);
}
// `?drill=lose:MOMENT[:K]` (tests only): the devices are destroyed as the K-th read-back of
// that moment starts (`load`: as soon as the device exists; `tune`: as the K-th step starts),
// as a driver reset would.
let drill = new Drill(null);
const sessionsOnGpu = new WeakSet();

function destroyDevices() {
  for (const device of guard.devices) device.destroy();
}

if (globalThis.GPUAdapter?.prototype.requestDevice) {
  const request = GPUAdapter.prototype.requestDevice;
  GPUAdapter.prototype.requestDevice = async function (...args) {
    const device = guard.track(await request.apply(this, args));
    if (drill.atLoad()) device.destroy();
    return device;
  };
  const map = GPUBuffer.prototype.mapAsync;
  GPUBuffer.prototype.mapAsync = function (...args) {
    // Fine-tuning's drill counts steps instead (tuneStep).
    if (this.label !== PROBE_LABEL) {
      for (const m of moments.keys()) {
        if (m !== 'tune' && drill.readBack(m)) {
          destroyDevices();
          break;
        }
      }
    }
    return map.apply(this, args);
  };
}

/** Runs `fn` as a GPU call of `what` when `s` is a WebGPU session (else just runs it). */
// A panic in the WebGPU bundle while a GPU call runs (wgpu's WebGPU code unwraps a buffer map
// that failed because the device is gone: an uncaught `unreachable`) would stop the Worker.
// While a GPU call is in flight the error is held back until the guard decides: a lost device
// is a loss like any other (the calls in flight fail as DeviceGone and run again on the CPU,
// in the CPU bundle: the instance that panicked is not used again); any other error stops the
// Worker as before ('stopped': the page treats it as the Worker's error).
let poisoned = false;
self.addEventListener('error', (event) => {
  if (moments.size === 0) return;
  event.preventDefault();
  poisoned = true;
  const error = event.error ?? new Error(event.message);
  guard.verdict(error).then((gone) => {
    if (!gone) postMessage({ type: 'stopped', message: event.message || String(error) });
  });
});

async function gpuCall(s, what, fn) {
  if (!sessionsOnGpu.has(s)) return fn();
  enter(what);
  try {
    return await guard.run(fn);
  } finally {
    leave(what);
  }
}

// The device is gone: every later request runs on the CPU. On auto the CPU session is there
// already; "WebGPU only" loads the CPU bundle and the models it had. Tells the page, with the
// backend it now runs on (without one, when the CPU could not start here, the page starts a
// CPU Worker). Resolves true when the Worker runs on the CPU.
async function fallBack(message) {
  gpu = null;
  routes.generation = routes.tuning = null;
  if (races.generation === 'running') races.generation = null;
  try {
    // "WebGPU only" (or its session not up yet): the CPU bundle's session instead.
    const fresh = !session || sessionsOnGpu.has(session) || poisoned;
    if (fresh) {
      const bundle = await loadWasm('cpu');
      const cpu = await bundle.module.Session.create('cpu');
      for (const { entry, bytes } of models.values()) cpu.loadModel(entry, bytes);
      use(bundle);
      session = cpu;
    }
    const backend = session.backend();
    backend.fallback_reason = `the GPU device was lost (${message})`;
    backend.fallback_detail = 'The CPU backend runs the same models; the piece, the settings and any fine-tuning went on there.';
    postMessage({ type: 'device-lost', message, backend });
    if (fresh) {
      // The card shows the check of the backend in use.
      const t = performance.now();
      const report = await session.selfCheck();
      postMessage({ type: 'check', report, ms: performance.now() - t });
    }
    return true;
  } catch (e) {
    postMessage({ type: 'device-lost', message: `${message}; the CPU could not start here: ${e.message ?? e}` });
    return false;
  }
}

function fail(error, context) {
  const message = error instanceof Error ? error.message : String(error);
  postMessage({ type: 'error', message: context ? `${context}: ${message}` : message });
}

// The page's `?fused=0`: the accompaniment's steps and continuation's tokens through tensor ops
// on WebGPU, not fused.
let fusedSteps = true;

const BUNDLES = { cpu: '../pkg/cpu/pianoformer.js', gpu: '../pkg/pianoformer.js' };

// Loads a bundle: {module, memory} (the wasm's linear memory only grows: its size is the peak).
// A host that serves only pkg/ still works: the CPU then runs from the WebGPU bundle.
async function loadWasm(bundle) {
  try {
    let module;
    try {
      module = await import(BUNDLES[bundle]);
    } catch (e) {
      if (bundle !== 'cpu') throw e;
      module = await import(BUNDLES.gpu);
    }
    const exports = await module.default();
    // The WebGPU bundle's fused steps (`?fused=0` turns them off).
    module.setFusedSteps?.(fusedSteps);
    return { module, memory: exports.memory };
  } catch (e) {
    throw new Error(
      `the app's WebAssembly could not be loaded (${e.message || e}). ` +
        'If you are running from a checkout, build it with `make serve`.',
    );
  }
}

// Browsers hide the adapter's description from wgpu; its vendor/architecture are public
// through navigator.gpu.
async function webGpuAdapter() {
  if (!navigator.gpu) return null;
  try {
    const adapter = await navigator.gpu.requestAdapter();
    if (!adapter) return null;
    const info = adapter.info ?? {};
    const name = [info.vendor, info.architecture, info.device, info.description]
      .filter((x) => x)
      .join(' ');
    const software =
      info.isFallbackAdapter === true || /swiftshader|llvmpipe|lavapipe|software/i.test(name);
    return { name, software };
  } catch {
    return null;
  }
}

function use(bundle) {
  wasm = bundle.module;
  wasmMemory = bundle.memory;
}

function passes(report) {
  const { matmul, cumsum, softmax } = report.ops;
  const losses = report.fit.losses;
  return Math.max(matmul, cumsum, softmax) <= 1e-4 && losses.at(-1) < losses[0];
}

function labelled(backend, adapter) {
  if (backend.kind === 'gpu' && adapter?.name) {
    backend.adapter = adapter.name;
    backend.label = `WebGPU · ${adapter.name}${adapter.software ? ' (software adapter)' : ''}`;
  }
  return backend;
}

/** The self-check of a WebGPU session, its two parts apart (the drill's two moments). */
async function checkGpu(s) {
  const report = await gpuCall(s, 'check', () => s.selfCheck(false));
  const fused = await gpuCall(s, 'fused-check', () => s.fusedCheck());
  if (fused) report.fused = fused;
  return report;
}

async function init(preference, drillSpec) {
  const t0 = performance.now();
  // `?drill=move`, `?drill=lose:…`, or both, comma-separated.
  const parts = (drillSpec ?? '').split(',');
  drillMode = parts.includes('move') ? 'move' : null;
  drill = new Drill(parts.find((p) => p.startsWith('lose:')));
  const adapter = preference === 'cpu' ? null : await webGpuAdapter();
  if (preference === 'gpu') {
    // "WebGPU only": the WebGPU bundle, usable as soon as WebGPU is up.
    use(await loadWasm('gpu'));
    let created = null;
    enter('load');
    try {
      created = await wasm.Session.create('gpu');
    } catch (e) {
      // Lost while it started: the CPU instead (fallBack). Any other failure is said as it is.
      if (!(await guard.verdict(e))) throw e;
    } finally {
      leave('load');
    }
    if (guard.gone !== null) {
      // fallBack() started the CPU session and told the page (its 'device-lost' carries the
      // backend the page is ready on).
      created?.free();
      await switching;
      return;
    }
    session = created;
    sessionsOnGpu.add(session);
    postMessage({ type: 'ready', backend: labelled(session.backend(), adapter), ms: performance.now() - t0 });
    const t1 = performance.now();
    try {
      const report = await checkGpu(session);
      postMessage({ type: 'check', report, ms: performance.now() - t1 });
    } catch (e) {
      // A lost device moved the Worker to the CPU (fallBack said so); anything else is a
      // failed check.
      if (!e.deviceLost) fail(e, 'The WebGPU self-check failed');
    }
    return;
  }
  use(await loadWasm('cpu'));
  session = await wasm.Session.create('cpu');
  const backend = session.backend();
  if (preference === 'auto' && adapter) {
    backend.fallback_reason = `WebGPU (${adapter.name}) is still to race the CPU`;
    backend.fallback_detail = 'Each kind of work moves to WebGPU only if WebGPU runs a short piece of it faster.';
  } else if (preference === 'auto') {
    backend.fallback_reason = navigator.gpu
      ? 'this browser offers no WebGPU adapter (WebGPU is off, blocked or unsupported here)'
      : 'this browser has no WebGPU';
    backend.fallback_detail = 'The CPU backend runs the same models.';
  }
  postMessage({ type: 'ready', backend, ms: performance.now() - t0 });
  const t1 = performance.now();
  const report = await session.selfCheck();
  const cpuCheckMs = performance.now() - t1;
  postMessage({ type: 'check', report, ms: cpuCheckMs });
  if (preference === 'auto' && adapter) await prepareGpu(adapter);
}

// On auto, in the background while the page works on the CPU: the WebGPU bundle is fetched
// and its session started; the first race starts once a generation model is loaded.
async function prepareGpu(adapter) {
  try {
    const bundle = await loadWasm('gpu');
    const candidate = await bundle.module.Session.create('gpu');
    // Lost while it started (fallBack has told the page): no race.
    if (guard.gone !== null) return;
    sessionsOnGpu.add(candidate);
    gpu = { session: candidate, backend: labelled(candidate.backend(), adapter), checked: false, software: adapter.software };
  } catch (e) {
    if (guard.gone !== null) return;
    const stay = session.backend();
    stay.fallback_reason = `WebGPU could not start (${e instanceof Error ? e.message : e})`;
    stay.fallback_detail = 'The CPU backend runs the same models.';
    postMessage({ type: 'raced', race: null, backend: stay });
    return;
  }
  raceGeneration();
}

// Generation's race, once: with the generation model loaded last, when WebGPU is up. Requests
// that arrive meanwhile wait for it (a second or two; a few seconds on a software adapter).
function raceGeneration() {
  if (!gpu || !raceModel || races.generation || racing) return;
  const name = raceModel;
  races.generation = 'running';
  racing = (async () => {
    while (inFlight) await new Promise((resolve) => idleWaiters.push(resolve));
    try {
      await runGenerationRace(name);
    } catch (e) {
      races.generation = null; // a failed race (a lost device, an unloaded model) is no verdict
      if (e.deviceLost) return; // fallBack() has told the page
      const stay = session.backend();
      stay.fallback_reason = `the race against WebGPU failed (${e instanceof Error ? e.message : e})`;
      postMessage({ type: 'raced', race: null, backend: stay });
    }
  })().finally(() => {
    racing = null;
  });
}

// Runs `work(progress)` with a progress callback that stops it past `limit` ms; returns
// {ms, stopped, share (of the work done when it stopped, from its progress reports)}.
async function timed(work, limit) {
  const t = performance.now();
  let stopped = false;
  let share = 0;
  const progress = (event) => {
    if (event?.total > 0) share = event.done / event.total;
    return turn().then(() => {
      stopped = performance.now() - t > limit;
      return !stopped;
    });
  };
  try {
    await work(progress);
  } catch (e) {
    if (!stopped) throw e;
  }
  return { ms: performance.now() - t, stopped, share };
}

async function runGenerationRace(name) {
  const { entry, bytes } = models.get(name);
  const task = JSON.parse(entry).task.toLowerCase();
  const piece = wasm.readMidi(wasm.exampleMidi(0, 2), 'race.mid');
  const continuation = task === 'continuation';
  const options = JSON.stringify(continuation ? { seed: 1, tokens: 16, bars: 1 } : { seed: 1, region: [0, 1], chunkSteps: 1 });
  const work = continuation ? '16 tokens of continuation' : 'one bar of accompaniment';
  // Through the guard on WebGPU: a device lost mid-race ends the race (no verdict).
  const run = (s) => (progress) =>
    gpuCall(s, 'race', () =>
      continuation ? s.continuePiece(name, piece, options, progress) : s.accompany(name, piece, options, progress),
    );
  const other = gpu.session;
  if (!other.hasModel(name)) other.loadModel(entry, bytes);
  const cpuWarm = await timed(run(session), Infinity);
  const cpu = await timed(run(session), Infinity);
  const force = drillMode === 'move' ? 'gpu' : null;
  const limits = force ? { warm: Infinity, timed: Infinity } : gpuLimits(cpuWarm.ms, cpu.ms);
  const gpuWarm = await timed(run(other), limits.warm);
  const gpuRun = gpuWarm.stopped ? null : await timed(run(other), limits.timed);
  const result = verdict(
    'generation',
    {
      cpuMs: cpu.ms,
      gpuMs: gpuRun && !gpuRun.stopped ? gpuRun.ms : null,
      gpuWarmMs: gpuWarm.stopped ? null : gpuWarm.ms,
      stoppedMs: gpuWarm.stopped ? gpuWarm.ms : gpuRun?.ms,
      share: gpuWarm.stopped ? 0 : gpuRun?.share,
    },
    force,
  );
  await settle('generation', result, work);
}

// Makes a race's verdict the route of its kind of work and tells the page: WebGPU wins only
// once it has passed its self-check.
async function settle(kind, result, work) {
  let report = null;
  let checkMs = null;
  if (result.winner === 'gpu' && !gpu.checked) {
    const t = performance.now();
    report = await checkGpu(gpu.session);
    if (!gpu) throw new Error('the GPU device was lost during its self-check');
    checkMs = performance.now() - t;
    gpu.checked = passes(report);
    if (!gpu.checked) result.winner = 'cpu';
  }
  result.text = raceText(result, work, gpu.backend.adapter ?? gpu.backend.label);
  if (report && !gpu.checked) result.text += '; but WebGPU failed its self-check';
  races[kind] = result;
  routes[kind] = result.winner === 'gpu' ? gpu.session : null;
  const backend = result.winner === 'gpu' ? gpu.backend : session.backend();
  if (result.winner !== 'gpu') {
    backend.fallback_reason = result.text;
    backend.fallback_detail = 'Choose "WebGPU only" to use WebGPU anyway.';
  }
  postMessage({ type: 'raced', race: result, backend, report, ms: checkMs });
}

// The session fine-tuning runs in: on auto, the first run's start races two steps of it on
// both backends (unless WebGPU is a software adapter, lost generation by far, or is not up yet).
async function tuningSession(base, pieces, options) {
  if (!gpu || races.tuning || drillMode === 'move') return routes.tuning ?? (drillMode === 'move' ? routes.generation : null) ?? session;
  const generation = races.generation === 'running' ? null : races.generation;
  if (!raceTuningAfter(generation, gpu.software)) {
    const slower = gpu.software ? SOFTWARE_TUNING_SLOWER : generation.ratio;
    const result = verdict('fine-tuning', { cpuMs: 1, gpuMs: null, stoppedMs: slower });
    result.text = tuningSkippedText(generation, gpu.backend.adapter ?? gpu.backend.label, gpu.software);
    result.skipped = true;
    races.tuning = result;
    postMessage({ type: 'raced', race: result, backend: null });
    return session;
  }
  const { entry, bytes } = models.get(base) ?? {};
  if (entry && !gpu.session.hasModel(base)) gpu.session.loadModel(entry, bytes);
  const steps = (s, limit) =>
    gpuCall(s, 'tune', async () => {
      const run = await s.tuner(base, pieces, options);
      try {
        let t = performance.now();
        await run.step();
        const warm = performance.now() - t;
        if (warm > limit.warm) return { warm: null, ms: warm };
        t = performance.now();
        await run.step();
        return { warm, ms: performance.now() - t };
      } finally {
        run.free();
      }
    });
  const cpu = await steps(session, { warm: Infinity });
  const limits = gpuLimits(cpu.warm, cpu.ms);
  const other = await steps(gpu.session, limits);
  const result = verdict('fine-tuning', {
    cpuMs: cpu.ms,
    gpuMs: other.warm == null ? null : other.ms,
    gpuWarmMs: other.warm,
    stoppedMs: other.ms,
  });
  await settle('tuning', result, 'a fine-tuning step');
  return routes.tuning ?? session;
}

// The session that runs generations, with the model `name` loaded there.
function generationSession(name) {
  const s = routes.generation ?? session;
  if (s !== session && !s.hasModel(name)) {
    const { entry, bytes } = models.get(name) ?? {};
    if (entry) s.loadModel(entry, bytes);
  }
  return s;
}

// A turn of the event loop (so a 'cancel' message can arrive): a message to ourselves, which
// unlike setTimeout(0) is not held back 4 ms once timers nest (a token at a time, they do).
const turns = new MessageChannel();
const waiting = [];
turns.port1.onmessage = () => waiting.shift()?.();
function turn() {
  return new Promise((resolve) => {
    waiting.push(resolve);
    turns.port2.postMessage(null);
  });
}

// Posts a progress report, hands the event loop a turn, then says whether to go on.
function progressHandler(id) {
  return (event) => {
    const message = { type: 'progress', id, done: event.done, total: event.total };
    if (event.bars) message.bars = event.bars;
    const transfer = [];
    if (event.notes) {
      message.notes = event.notes;
      transfer.push(event.notes.buffer);
    }
    if (event.attention) {
      message.attention = event.attention;
      transfer.push(event.attention.values.buffer);
    }
    postMessage(message, transfer);
    return turn().then(() => !cancelled.has(id));
  };
}

// The browser compiles wasm in two tiers: a function runs first as quickly compiled baseline
// code and is optimised once it has run for a while. The harmonizer's first call on a long
// melody would run mostly in baseline code (a 100-bar melody: 190-280 ms, against 35-40 ms
// once warm; `node tools/bench-harmonize.mjs`), so as a harmonizer loads on the CPU it reads
// a short melody (8 bars of the bundled example) and the file that follows finds much of its
// code optimised (90-165 ms). A failure here only leaves it cold.
async function warmUp(name) {
  try {
    const piece = JSON.parse(wasm.readMidi(wasm.exampleMidi(0, 8), 'warm-up.mid'));
    piece.tracks = piece.tracks.filter((t) => t.role === 'melody');
    await session.harmonize(name, JSON.stringify(piece), JSON.stringify({ bars: null, seed: null }));
  } catch {
    // Cold code is slower, not wrong.
  }
}

// A session whose device is gone (its requests run on the CPU now).
const dead = (s) => sessionsOnGpu.has(s) && guard.gone !== null;

/** Runs `fn(session)` on the page's session, through the guard when that is a WebGPU one. */
const onSession = (what, fn) => {
  const s = session;
  return gpuCall(s, what, () => fn(s));
};

// Fine-tuning that ran on a device now gone goes on on the CPU from its last good step: a new
// run with the same base, files and settings, given the snapshot's weights, step and losses.
async function resumeTuning() {
  const { base, pieces, options, snapshot } = tune;
  const run = await session.tuner(base, pieces, options);
  if (snapshot) run.restore(snapshot.progress, snapshot.weights);
  try {
    tune.run.free();
  } catch {
    // Its memory went with the device's bundle.
  }
  tune = { ...tune, run, session, snapshot: null, resumedAt: snapshot ? JSON.parse(snapshot.progress).step : 0 };
}

const methods = {
  readMidi: ({ bytes, name }) => JSON.parse(wasm.readMidi(new Uint8Array(bytes), name)),
  writeMidi: ({ piece }) => wasm.writeMidi(JSON.stringify(piece)),
  exampleMidi: ({ key = 0, bars = 16 }) => wasm.exampleMidi(key, bars),
  // Bytes of the wasm's linear memory (it only grows: the peak so far).
  memory: () => wasmMemory?.buffer.byteLength ?? null,
  checkPiece: ({ piece }) => wasm.checkPiece(JSON.stringify(piece)),
  loadModel: async ({ entry, bytes }) => {
    const text = JSON.stringify(entry);
    const data = new Uint8Array(bytes);
    const info = await onSession('load', (s) => s.loadModel(text, data));
    models.set(entry.name, { entry: text, bytes: data });
    if (entry.task === 'harmonization' && session.backend().kind === 'cpu') await warmUp(entry.name);
    if (/^(accompaniment|continuation)$/i.test(entry.task)) {
      raceModel = entry.name;
      // Not awaited: the race starts once this request is answered.
      setTimeout(raceGeneration, 0);
    }
    return info;
  },
  hasModel: ({ name }) => session.hasModel(name),
  template: ({ model, layer, head, lags }) => onSession('template', (s) => s.template(model, layer, head, lags)),
  // A live take (play-in.js, live.js): started on a piece, then asked for each sixteenth
  // shortly before it sounds with the keys played since, then stopped. Each reply carries the
  // time the Worker spent on it (`ms`).
  liveStart: async ({ model, harmonizer, piece, options }) =>
    JSON.parse(
      await onSession('live', (s) =>
        s.liveStart(model, harmonizer ?? undefined, JSON.stringify(piece), JSON.stringify(options)),
      ),
    ),
  liveStep: async ({ events, step }) => {
    const t = performance.now();
    const steps = JSON.parse(await onSession('live', (s) => s.liveStep(JSON.stringify(events), step)));
    return { steps, ms: performance.now() - t };
  },
  liveStop: () => JSON.parse(session.liveStop()),
  harmonize: async ({ model, piece, options }) =>
    JSON.parse(await onSession('harmonize', (s) => s.harmonize(model, JSON.stringify(piece), JSON.stringify(options)))),
  attention: ({ model, piece, options }, id) =>
    onSession('attention', (s) => s.attention(model, JSON.stringify(piece), JSON.stringify(options), progressHandler(id))),
  unloadModel: ({ name }) => {
    models.delete(name);
    if (gpu?.session.hasModel(name)) gpu.session.unloadModel(name);
    return session.unloadModel(name);
  },
  tuneInspect: ({ pieces, task, holdout }) =>
    wasm.inspectTuneFiles(JSON.stringify(pieces), task, holdout),
  // Starts a run on this Worker's backend; returns what it reads and the base model's
  // held-out loss.
  tuneStart: async ({ base, pieces, options }) => {
    tune?.run.free();
    tune = null;
    const piecesText = JSON.stringify(pieces);
    const optionsText = JSON.stringify(options);
    const s = await tuningSession(base, piecesText, optionsText);
    const run = await gpuCall(s, 'tune', () => s.tuner(base, piecesText, optionsText));
    tune = { run, session: s, base, pieces: piecesText, options: optionsText, snapshot: null, resumedAt: null };
    const info = run.info();
    info.baseValidLoss = await gpuCall(s, 'tune', () => run.validate());
    return info;
  },
  // One step. On a GPU the step's weights are read back after it (the snapshot a lost device
  // resumes from); a run whose device is gone goes on on the CPU first (`resumedAt`: the step
  // it went on from, once).
  tuneStep: async () => {
    if (!tune) throw new Error('no fine-tuning run is in progress');
    if (dead(tune.session)) await resumeTuning();
    const { run, session: s } = tune;
    if (sessionsOnGpu.has(s) && drill.readBack('tune')) destroyDevices();
    const report = await gpuCall(s, 'tune', () => run.step());
    if (sessionsOnGpu.has(s)) tune.snapshot = await gpuCall(s, 'tune', () => run.snapshot());
    if (tune.resumedAt !== null) {
      report.resumedAt = tune.resumedAt;
      tune.resumedAt = null;
    }
    report.wasmBytes = wasmMemory?.buffer.byteLength ?? null;
    return report;
  },
  tuneKeep: async ({ name, description }) => {
    if (!tune) throw new Error('no fine-tuned model to keep');
    if (dead(tune.session)) await resumeTuning();
    const { run, session: s } = tune;
    const out = await gpuCall(s, 'tune', () => s.keepTuned(run, name, description ?? ''));
    const kept = { entry: out.entry, bytes: new Uint8Array(out.weights) };
    models.set(name, kept);
    // Moved to the other bundle meanwhile: the new model is loaded where requests now go.
    if (s !== session) session.loadModel(kept.entry, kept.bytes);
    return { entry: JSON.parse(out.entry), weights: out.weights };
  },
  tuneDrop: () => {
    try {
      tune?.run.free();
    } catch {
      // A run on a lost device's bundle: nothing left to free.
    }
    tune = null;
  },
  packModel: ({ entry, weights }) => wasm.packModel(JSON.stringify(entry), new Uint8Array(weights)),
  unpackModel: ({ bytes }) => {
    const out = wasm.unpackModel(new Uint8Array(bytes));
    return { entry: JSON.parse(out.entry), weights: out.weights };
  },
  generate: async ({ task, model, piece, options, dynamics }, id) => {
    const run = task === 'continuation' ? 'continuePiece' : 'accompany';
    const s = generationSession(model);
    // The velocity model for this accompaniment ('' : none): sent with every call, so a
    // Worker that moved backends or restarted has it too.
    if (run === 'accompany') s.setDynamics(dynamics ?? '');
    const text = await gpuCall(s, 'generate', () =>
      s[run](model, JSON.stringify(piece), JSON.stringify(options), progressHandler(id)),
    );
    return JSON.parse(text);
  },
};

async function call({ id, method, args }) {
  try {
    const free = ['readMidi', 'writeMidi', 'exampleMidi', 'checkPiece', 'memory', 'tuneInspect', 'packModel', 'unpackModel'];
    if (!session && !free.includes(method)) {
      throw new Error('the model backend is still starting');
    }
    if (!wasm) throw new Error('the app is still loading');
    const run = methods[method];
    if (!run) throw new Error(`unknown request ${JSON.stringify(method)}`);
    let value;
    if (free.includes(method)) {
      value = await run(args ?? {}, id);
    } else {
      // A backends' race shares the sessions: requests wait for it, and it for them.
      while (racing) await racing;
      inFlight++;
      try {
        value = await runOrFallBack(run, args ?? {}, id);
      } finally {
        inFlight--;
        if (!inFlight) for (const wake of idleWaiters.splice(0)) wake();
      }
    }
    const transfer =
      value instanceof Uint8Array ? [value.buffer] : value?.weights instanceof Uint8Array ? [value.weights.buffer] : [];
    postMessage({ type: 'reply', id, ok: true, value }, transfer);
  } catch (e) {
    // A Rust panic (or running out of memory) leaves the wasm instance unusable: the page
    // restarts the Worker then.
    const fatal = e instanceof WebAssembly.RuntimeError || e instanceof RangeError;
    let message = e instanceof Error ? e.message : String(e);
    if (fatal) {
      message = /memory/i.test(message)
        ? `the model ran out of memory (${message})`
        : `the model stopped with an internal error (${message})`;
    }
    postMessage({ type: 'reply', id, ok: false, fatal, deviceLost: e.deviceLost === true, message });
  } finally {
    cancelled.delete(id);
  }
}

// Runs a request; one that met a lost device runs again on the CPU once the Worker is there
// (a cancelled one is not run again).
async function runOrFallBack(run, args, id) {
  if (switching) await switching;
  try {
    return await run(args, id);
  } catch (e) {
    if (!e.deviceLost || cancelled.has(id) || !(await switching)) throw e;
    return run(args, id);
  }
}

self.onmessage = ({ data }) => {
  if (data?.type === 'init') {
    fusedSteps = data.fused !== false;
    init(data.backend ?? 'auto', data.drill).catch((e) => fail(e, 'The compute backend could not start'));
  } else if (data?.type === 'call') {
    call(data);
  } else if (data?.type === 'cancel') {
    cancelled.add(data.id);
  } else if (data?.type === 'drill' && data.what === 'lose-device') {
    destroyDevices();
  } else {
    fail(`unknown message ${JSON.stringify(data?.type)}`);
  }
};
