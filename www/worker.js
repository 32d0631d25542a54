// The model's home: the Worker loads the wasm, owns the Session and the loaded models, and
// talks to the page only by messages, so the page never freezes while tensors are computed.
//
// In:  {type: 'init', backend: 'auto' | 'gpu' | 'cpu'}
//      {type: 'call', id, method, args}   methods: readMidi, writeMidi, exampleMidi, checkPiece, memory,
//                                          loadModel, hasModel, unloadModel, generate, attention,
//                                          template; fine-tuning: tuneInspect, tuneStart,
//                                          tuneStep, tuneKeep, tuneDrop, packModel, unpackModel
//      {type: 'cancel', id}
// Out: {type: 'ready', backend, ms} · {type: 'check', report, ms} · {type: 'error', message}
//      {type: 'device-lost', message}  (the GPU device is gone: the page moves to the CPU)
//      {type: 'moved', backend}  (auto moved to the CPU after measuring)
//      {type: 'reply', id, ok, value | message} · {type: 'progress', id, done, total, notes?,
//      attention?}

let wasm = null;
let session = null;
let wasmMemory = null;
let tuner = null; // the fine-tuning run in progress (the page calls tuneStep once per step)
const cancelled = new Set();

// Every GPUDevice wgpu asks for, so that a drill (the page's `?drill` mode, for tests) can
// destroy them mid-generation, as a driver reset or a lost GPU would.
const devices = [];
if (globalThis.GPUAdapter?.prototype.requestDevice) {
  const request = GPUAdapter.prototype.requestDevice;
  GPUAdapter.prototype.requestDevice = async function (...args) {
    const device = await request.apply(this, args);
    devices.push(device);
    // A lost device fails every later GPU call: the page moves to the CPU at once.
    device.lost?.then((info) => postMessage({ type: 'device-lost', message: info?.message || info?.reason || 'lost' }));
    return device;
  };
}

function fail(error, context) {
  const message = error instanceof Error ? error.message : String(error);
  postMessage({ type: 'error', message: context ? `${context}: ${message}` : message });
}

async function loadWasm() {
  try {
    const module = await import('../pkg/pianoformer.js');
    const exports = await module.default();
    // The wasm's linear memory only grows: its size is the peak so far.
    wasmMemory = exports.memory;
    return module;
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

async function init(preference) {
  const t0 = performance.now();
  wasm = await loadWasm();
  const adapter = await webGpuAdapter();
  // A software WebGPU adapter (SwiftShader) runs these small models about 40 times slower
  // than the CPU backend: "auto" takes the CPU there and says why.
  let softwareFallback = false;
  if (preference === 'auto' && adapter?.software) {
    preference = 'cpu';
    softwareFallback = true;
  }
  session = await wasm.Session.create(preference);
  const backend = session.backend();
  if (backend.kind === 'gpu' && adapter?.name) {
    backend.adapter = adapter.name;
    backend.label = `WebGPU · ${adapter.name}${adapter.software ? ' (software adapter)' : ''}`;
  }
  if (softwareFallback) {
    backend.fallback_reason = `the only WebGPU adapter is a software renderer (${adapter.name})`;
    backend.fallback_detail =
      'It runs these models about 40 times slower than the CPU. Choose "WebGPU only" to use it anyway.';
  }
  postMessage({ type: 'ready', backend, ms: performance.now() - t0 });
  const t1 = performance.now();
  const report = await session.selfCheck();
  postMessage({ type: 'check', report, ms: performance.now() - t1 });
  if (preference === 'auto' && backend.kind === 'gpu') await measureFirstRun(backend);
}

// On "auto" with a hardware adapter: a quick first-run measurement. The self-check runs once
// more on WebGPU (its kernels compiled now) and once on the CPU; if the CPU is faster, the
// session moves there and the badge says so.
async function measureFirstRun(backend) {
  try {
    let t = performance.now();
    await session.selfCheck();
    const gpuMs = performance.now() - t;
    const cpu = await wasm.Session.create('cpu');
    t = performance.now();
    await cpu.selfCheck();
    const cpuMs = performance.now() - t;
    if (cpuMs < gpuMs) {
      session = cpu;
      const moved = cpu.backend();
      moved.fallback_reason = `a first-run measurement found the CPU faster here (${cpuMs.toFixed(0)} ms against ${gpuMs.toFixed(0)} ms on ${backend.label})`;
      moved.fallback_detail = 'Choose "WebGPU only" to use WebGPU anyway.';
      postMessage({ type: 'moved', backend: moved });
    } else {
      cpu.free();
    }
  } catch {
    // The measurement is an optimisation; WebGPU stays when it cannot be made.
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

const methods = {
  readMidi: ({ bytes, name }) => JSON.parse(wasm.readMidi(new Uint8Array(bytes), name)),
  writeMidi: ({ piece }) => wasm.writeMidi(JSON.stringify(piece)),
  exampleMidi: ({ key = 0, bars = 16 }) => wasm.exampleMidi(key, bars),
  // Bytes of the wasm's linear memory (it only grows: the peak so far).
  memory: () => wasmMemory?.buffer.byteLength ?? null,
  checkPiece: ({ piece }) => wasm.checkPiece(JSON.stringify(piece)),
  loadModel: ({ entry, bytes }) => session.loadModel(JSON.stringify(entry), new Uint8Array(bytes)),
  hasModel: ({ name }) => session.hasModel(name),
  template: ({ model, layer, head, lags }) => session.template(model, layer, head, lags),
  attention: ({ model, piece, options }, id) =>
    session.attention(model, JSON.stringify(piece), JSON.stringify(options), progressHandler(id)),
  unloadModel: ({ name }) => session.unloadModel(name),
  tuneInspect: ({ pieces, task, holdout }) =>
    wasm.inspectTuneFiles(JSON.stringify(pieces), task, holdout),
  // Starts a run on this Worker's backend; returns what it reads and the base model's
  // held-out loss.
  tuneStart: async ({ base, pieces, options }) => {
    tuner?.free();
    tuner = null;
    const run = await session.tuner(base, JSON.stringify(pieces), JSON.stringify(options));
    tuner = run;
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
    const out = await session.keepTuned(tuner, name, description ?? '');
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
  generate: async ({ task, model, piece, options }, id) => {
    const run = task === 'continuation' ? 'continuePiece' : 'accompany';
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
    init(data.backend ?? 'auto').catch((e) => fail(e, 'The compute backend could not start'));
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
