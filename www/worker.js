// The model's home: the Worker loads the wasm, owns the Session (and later the models), and
// talks to the page only by messages, so the page never freezes while tensors are computed.
//
// Messages in:  {type: 'init', backend: 'auto' | 'gpu' | 'cpu'}
// Messages out: {type: 'ready', backend, ms} · {type: 'check', report, ms} · {type: 'error', message}

let session = null;

function fail(error, context) {
  const message = error instanceof Error ? error.message : String(error);
  postMessage({ type: 'error', message: context ? `${context}: ${message}` : message });
}

async function loadWasm() {
  try {
    const wasm = await import('../pkg/pianoformer.js');
    await wasm.default();
    return wasm;
  } catch (e) {
    throw new Error(
      `the app's WebAssembly could not be loaded (${e.message || e}). ` +
        'If you are running from a checkout, build it with `make serve`.',
    );
  }
}

// Browsers hide the adapter's description from wgpu; its vendor/architecture are still public
// through navigator.gpu and make the badge say what really runs (e.g. "google swiftshader").
async function describeWebGpuAdapter(backend) {
  if (backend.kind !== 'gpu' || backend.adapter || !navigator.gpu) return backend;
  try {
    const adapter = await navigator.gpu.requestAdapter();
    const info = adapter?.info ?? {};
    const name = [info.vendor, info.architecture, info.device, info.description]
      .filter((x) => x)
      .join(' ');
    if (name) {
      backend.adapter = name;
      backend.label = `WebGPU · ${name}${backend.device_type === 'Cpu' ? ' (software adapter)' : ''}`;
    }
  } catch {
    // The label without the adapter name is still right.
  }
  return backend;
}

async function init(preference) {
  const t0 = performance.now();
  const wasm = await loadWasm();
  session = await wasm.Session.create(preference);
  const backend = await describeWebGpuAdapter(session.backend());
  postMessage({ type: 'ready', backend, ms: performance.now() - t0 });
  const t1 = performance.now();
  const report = await session.selfCheck();
  postMessage({ type: 'check', report, ms: performance.now() - t1 });
}

self.onmessage = ({ data }) => {
  if (data?.type === 'init') {
    init(data.backend ?? 'auto').catch((e) => fail(e, 'The compute backend could not start'));
  } else {
    fail(`unknown message ${JSON.stringify(data?.type)}`);
  }
};
