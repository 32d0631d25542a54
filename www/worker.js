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
//      {type: 'device-lost', message}  (the GPU device is gone: the page moves to the CPU)
//      {type: 'moved', backend, report?, ms?}  (auto moved to WebGPU, warmed and measured faster,
//      with WebGPU's self-check; or stays on the CPU, with the reason)
//
// Two bundles: pkg/cpu/ (no WebGPU code, a fraction of the size) makes the page ready on the
// CPU; on "auto" with a hardware adapter, pkg/ (with WebGPU) is fetched afterwards, checked and
// measured in the background, and the session moves to it only if it is faster. "WebGPU only"
// loads pkg/ alone and is ready once WebGPU is up; its self-check follows, in the background.
//      {type: 'reply', id, ok, value | message} · {type: 'progress', id, done, total, notes?,
//      attention?}

let wasm = null;
let session = null;
let wasmMemory = null;
let tuner = null; // the fine-tuning run in progress (the page calls tuneStep once per step)
let tunerSession = null; // the session it runs in (a later move leaves it there)
const cancelled = new Set();
// The models loaded into the session, {entry, bytes} by name: a move to the other bundle loads
// them there too, so the page's requests go on as before.
const models = new Map();

// Every GPUDevice wgpu asks for, so that a drill (the page's `?drill` mode, for tests) can
// destroy them mid-generation, as a driver reset or a lost GPU would.
const devices = [];
let deviceLost = false;
if (globalThis.GPUAdapter?.prototype.requestDevice) {
  const request = GPUAdapter.prototype.requestDevice;
  GPUAdapter.prototype.requestDevice = async function (...args) {
    const device = await request.apply(this, args);
    devices.push(device);
    // A lost device fails every later GPU call: the page moves to the CPU at once.
    device.lost?.then((info) => {
      deviceLost = true;
      postMessage({ type: 'device-lost', message: info?.message || info?.reason || 'lost' });
    });
    return device;
  };
}

function fail(error, context) {
  const message = error instanceof Error ? error.message : String(error);
  postMessage({ type: 'error', message: context ? `${context}: ${message}` : message });
}

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

async function init(preference, drill) {
  const t0 = performance.now();
  const adapter = preference === 'cpu' ? null : await webGpuAdapter();
  if (preference === 'gpu') {
    // "WebGPU only": the WebGPU bundle, usable as soon as WebGPU is up.
    use(await loadWasm('gpu'));
    session = await wasm.Session.create('gpu');
    postMessage({ type: 'ready', backend: labelled(session.backend(), adapter), ms: performance.now() - t0 });
    const t1 = performance.now();
    try {
      const report = await session.selfCheck();
      postMessage({ type: 'check', report, ms: performance.now() - t1 });
    } catch (e) {
      // A device lost meanwhile is the page's to handle (it moves to the CPU); the news of
      // the loss may come a moment after the failed read.
      await new Promise((resolve) => setTimeout(resolve, 1000));
      if (!deviceLost) fail(e, 'The WebGPU self-check failed');
    }
    return;
  }
  use(await loadWasm('cpu'));
  session = await wasm.Session.create('cpu');
  const backend = session.backend();
  // A software WebGPU adapter (SwiftShader) runs these small models far slower than the CPU
  // backend: "auto" stays on the CPU there and says why.
  const warm = preference === 'auto' && adapter && (!adapter.software || ['warm', 'move'].includes(drill));
  if (preference === 'auto' && !warm) {
    if (adapter?.software) {
      backend.fallback_reason = `the only WebGPU adapter is a software renderer (${adapter.name})`;
      backend.fallback_detail =
        'It runs these models hundreds of times slower than the CPU. Choose "WebGPU only" to use it anyway.';
    } else {
      backend.fallback_reason = navigator.gpu
        ? 'this browser offers no WebGPU adapter (WebGPU is off, blocked or unsupported here)'
        : 'this browser has no WebGPU';
      backend.fallback_detail = 'The CPU backend runs the same models.';
    }
  }
  postMessage({ type: 'ready', backend, ms: performance.now() - t0 });
  const t1 = performance.now();
  const report = await session.selfCheck();
  const cpuCheckMs = performance.now() - t1;
  postMessage({ type: 'check', report, ms: cpuCheckMs });
  if (warm) await warmGpu(adapter, drill === 'move');
}

// On "auto" with a hardware adapter, in the background while the page works on the CPU: the
// WebGPU bundle is fetched and started, passes its self-check, then a first-run measurement
// (the self-check once more on WebGPU, its kernels compiled now, and once on the CPU) decides.
async function warmGpu(adapter, always = false) {
  let candidate = null;
  try {
    const bundle = await loadWasm('gpu');
    candidate = await bundle.module.Session.create('gpu');
    const backend = labelled(candidate.backend(), adapter);
    let t = performance.now();
    const report = await candidate.selfCheck();
    const checkMs = performance.now() - t;
    if (!passes(report)) throw new Error(`WebGPU failed its self-check on ${backend.label}`);
    t = performance.now();
    await candidate.selfCheck();
    const gpuMs = performance.now() - t;
    t = performance.now();
    await session.selfCheck();
    const cpuMs = performance.now() - t;
    if (cpuMs < gpuMs && !always) {
      throw new Error(
        `a first-run measurement found the CPU faster here (${cpuMs.toFixed(0)} ms against ${gpuMs.toFixed(0)} ms on ${backend.label})`,
      );
    }
    for (const { entry, bytes } of models.values()) candidate.loadModel(entry, bytes);
    session = candidate;
    candidate = null;
    use(bundle);
    postMessage({ type: 'moved', backend, report, ms: checkMs });
  } catch (e) {
    candidate?.free();
    const stay = session.backend();
    stay.fallback_reason = e instanceof Error ? e.message : String(e);
    stay.fallback_detail = 'Choose "WebGPU only" to use WebGPU anyway.';
    postMessage({ type: 'moved', backend: stay });
  }
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
    const info = session.loadModel(text, data);
    models.set(entry.name, { entry: text, bytes: data });
    if (entry.task === 'harmonization' && session.backend().kind === 'cpu') await warmUp(entry.name);
    return info;
  },
  hasModel: ({ name }) => session.hasModel(name),
  template: ({ model, layer, head, lags }) => session.template(model, layer, head, lags),
  // A live take (play-in.js, live.js): started on a piece, then asked for each sixteenth
  // shortly before it sounds with the keys played since, then stopped. Each reply carries the
  // time the Worker spent on it (`ms`).
  liveStart: async ({ model, harmonizer, piece, options }) =>
    JSON.parse(await session.liveStart(model, harmonizer ?? undefined, JSON.stringify(piece), JSON.stringify(options))),
  liveStep: async ({ events, step }) => {
    const t = performance.now();
    const steps = JSON.parse(await session.liveStep(JSON.stringify(events), step));
    return { steps, ms: performance.now() - t };
  },
  liveStop: () => JSON.parse(session.liveStop()),
  harmonize: async ({ model, piece, options }) =>
    JSON.parse(await session.harmonize(model, JSON.stringify(piece), JSON.stringify(options))),
  attention: ({ model, piece, options }, id) =>
    session.attention(model, JSON.stringify(piece), JSON.stringify(options), progressHandler(id)),
  unloadModel: ({ name }) => {
    models.delete(name);
    return session.unloadModel(name);
  },
  tuneInspect: ({ pieces, task, holdout }) =>
    wasm.inspectTuneFiles(JSON.stringify(pieces), task, holdout),
  // Starts a run on this Worker's backend; returns what it reads and the base model's
  // held-out loss.
  tuneStart: async ({ base, pieces, options }) => {
    tuner?.free();
    tuner = null;
    const run = await session.tuner(base, JSON.stringify(pieces), JSON.stringify(options));
    tuner = run;
    tunerSession = session;
    const info = tuner.info();
    info.baseValidLoss = await tuner.validate();
    return info;
  },
  tuneStep: async () => {
    if (!tuner) throw new Error('no fine-tuning run is in progress');
    const report = await tuner.step();
    report.wasmBytes = wasmMemory?.buffer.byteLength ?? null;
    return report;
  },
  tuneKeep: async ({ name, description }) => {
    if (!tuner) throw new Error('no fine-tuned model to keep');
    const out = await tunerSession.keepTuned(tuner, name, description ?? '');
    const kept = { entry: out.entry, bytes: new Uint8Array(out.weights) };
    models.set(name, kept);
    // Moved to the other bundle meanwhile: the new model is loaded where requests now go.
    if (tunerSession !== session) session.loadModel(kept.entry, kept.bytes);
    return { entry: JSON.parse(out.entry), weights: out.weights };
  },
  tuneDrop: () => {
    tuner?.free();
    tuner = null;
  },
  packModel: ({ entry, weights }) => wasm.packModel(JSON.stringify(entry), new Uint8Array(weights)),
  unpackModel: ({ bytes }) => {
    const out = wasm.unpackModel(new Uint8Array(bytes));
    return { entry: JSON.parse(out.entry), weights: out.weights };
  },
  generate: async ({ task, model, piece, options, dynamics }, id) => {
    const run = task === 'continuation' ? 'continuePiece' : 'accompany';
    // The velocity model for this accompaniment ('' : none): sent with every call, so a
    // Worker that moved backends or restarted has it too.
    if (run === 'accompany') session.setDynamics(dynamics ?? '');
    const text = await session[run](
      model,
      JSON.stringify(piece),
      JSON.stringify(options),
      progressHandler(id),
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
    const value = await run(args ?? {}, id);
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
    postMessage({ type: 'reply', id, ok: false, fatal, message });
  } finally {
    cancelled.delete(id);
  }
}

self.onmessage = ({ data }) => {
  if (data?.type === 'init') {
    init(data.backend ?? 'auto', data.drill).catch((e) => fail(e, 'The compute backend could not start'));
  } else if (data?.type === 'call') {
    call(data);
  } else if (data?.type === 'cancel') {
    cancelled.add(data.id);
  } else if (data?.type === 'drill' && data.what === 'lose-device') {
    for (const device of devices) device.destroy();
  } else {
    fail(`unknown message ${JSON.stringify(data?.type)}`);
  }
};
