// The Worker's one decision "is the GPU device gone?" (www/gpu-guard.js), under Node with
// simulated devices: a read-back that fails because the device went is a lost device however
// late the browser's `lost` promise resolves (CI's flake: it came after a fixed one-second
// wait); a failure on a healthy device stays the error it is; the drill's moments.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DeviceGone, Drill, GpuGuard, PROBE_LABEL, parseDrill, probe } from '../../www/gpu-guard.js';

/**
 * A stand-in GPUDevice: `destroy()` makes every later map fail, as Chromium's do; its `lost`
 * promise resolves only when the test says (`resolveLost`), so nothing depends on its timing.
 * `hang`: maps never answer.
 */
function fakeDevice({ hang = false } = {}) {
  let resolveLost;
  const listeners = [];
  const device = {
    destroyed: false,
    labels: [],
    lost: new Promise((resolve) => {
      resolveLost = resolve;
    }),
    resolveLost: (info) => resolveLost(info),
    addEventListener: (type, fn) => type === 'uncapturederror' && listeners.push(fn),
    raise: (message) => listeners.forEach((fn) => fn({ error: { message } })),
    createBuffer({ label }) {
      device.labels.push(label);
      return {
        label,
        mapAsync: () =>
          device.destroyed
            ? Promise.reject(new Error('Error occurred when trying to async map a buffer'))
            : hang
              ? new Promise(() => {})
              : Promise.resolve(),
        unmap() {},
        destroy() {},
      };
    },
    destroy() {
      device.destroyed = true;
    },
  };
  return device;
}

function guarded(devices, options = {}) {
  const gone = [];
  const guard = new GpuGuard({ onGone: (m) => gone.push(m), ...options });
  for (const d of devices) guard.track(d);
  return { guard, gone };
}

const readBack = (device) => async () => {
  await device.createBuffer({ label: 'staging' }).mapAsync(1);
  return 'read';
};

test('a read-back that fails on a destroyed device is a lost device, before the browser says so', async () => {
  const device = fakeDevice();
  const { guard, gone } = guarded([device]);
  device.destroy(); // `lost` has not resolved (and will not in this test)
  await assert.rejects(guard.run(readBack(device)), (e) => {
    assert.ok(e instanceof DeviceGone);
    assert.equal(e.deviceLost, true);
    assert.match(e.message, /the GPU device was lost/);
    assert.match(e.cause.message, /async map a buffer/);
    return true;
  });
  assert.equal(gone.length, 1, 'the Worker is told once');
  assert.ok(device.labels.includes(PROBE_LABEL), 'the verdict came from the probe');
  // Every later call fails at once, without touching the device; the news is not repeated.
  let ran = false;
  await assert.rejects(guard.run(async () => (ran = true)), DeviceGone);
  assert.equal(ran, false);
  device.resolveLost({ reason: 'destroyed', message: 'Device was destroyed.' });
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(gone.length, 1);
});

test('a failure on a healthy device stays the error it is', async () => {
  const device = fakeDevice();
  const { guard, gone } = guarded([device]);
  const own = new Error('the model gpt is not loaded');
  await assert.rejects(guard.run(async () => { throw own; }), (e) => e === own);
  assert.deepEqual(gone, []);
  assert.equal(await guard.run(readBack(device)), 'read', 'and the device goes on working');
});

test("the browser's `lost` promise alone is enough: later calls fail as a lost device", async () => {
  const device = fakeDevice();
  const { guard, gone } = guarded([device]);
  device.resolveLost({ reason: 'unknown', message: 'GPU process crashed' });
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(gone, ['GPU process crashed']);
  await assert.rejects(guard.run(readBack(device)), /GPU process crashed/);
});

test('an uncaptured GPU error while a call runs makes its failure a lost device', async () => {
  const device = fakeDevice();
  const { guard, gone } = guarded([device]);
  await assert.rejects(
    guard.run(async () => {
      device.raise('Out of memory');
      throw new Error('the step failed');
    }),
    DeviceGone,
  );
  assert.match(gone[0], /no one caught: Out of memory/);
});

test('an uncaptured error before a call began does not condemn a later failure', async () => {
  const device = fakeDevice();
  const { guard, gone } = guarded([device]);
  device.raise('a validation error long ago');
  await assert.rejects(guard.run(async () => { throw new Error('own'); }), /^Error: own$/);
  assert.deepEqual(gone, []);
});

test('a device that cannot map four bytes within the deadline is gone', async () => {
  const device = fakeDevice({ hang: true });
  assert.equal(await probe(device, 5), false);
  const { guard, gone } = guarded([device], { deadline: 5 });
  await assert.rejects(guard.run(async () => { throw new Error('read-back timed out'); }), DeviceGone);
  assert.equal(gone.length, 1);
});

test('calls failing together on a destroyed device all become lost-device errors, the news once', async () => {
  const device = fakeDevice();
  const { guard, gone } = guarded([device]);
  device.destroy();
  // Three read-backs in flight at once, each probing while the others do.
  const results = await Promise.allSettled([1, 2, 3].map(() => guard.run(readBack(device))));
  for (const r of results) {
    assert.equal(r.status, 'rejected');
    assert.ok(r.reason instanceof DeviceGone);
  }
  assert.equal(gone.length, 1);
});

test('the drill: moments, the K-th read-back, once', () => {
  assert.deepEqual(parseDrill('lose:generate:3'), { moment: 'generate', at: 3 });
  assert.deepEqual(parseDrill('lose:fused-check'), { moment: 'fused-check', at: 1 });
  assert.deepEqual(parseDrill('lose:tune:0'), { moment: 'tune', at: 1 });
  for (const bad of [null, '', 'move', 'lose:', 'lose:nowhere:2', 'lose:generate:x']) assert.equal(parseDrill(bad), null, bad);

  const drill = new Drill('lose:generate:3');
  const fired = ['check', 'generate', 'check', 'generate', null, 'generate', 'generate'].map((m) => drill.readBack(m));
  assert.deepEqual(fired, [false, false, false, false, false, true, false]);
  assert.equal(drill.atLoad(), false);

  const load = new Drill('lose:load');
  assert.equal(load.readBack('load'), true, 'load: the first read-back of loading, if the device lives that long');
  assert.equal(load.atLoad(), false, 'once');
  const atLoad = new Drill('lose:load');
  assert.equal(atLoad.atLoad(), true);
  assert.equal(atLoad.readBack('load'), false);

  const none = new Drill(undefined);
  assert.equal(none.readBack('generate'), false);
  assert.equal(none.atLoad(), false);
});

// CI's second flake (session 18): a device lost while a generation read its results back made
// wgpu's WebGPU code panic inside a map callback, so the call in flight never settled and the
// Worker died. The Worker hands such an error to the guard; once it finds the device gone, a
// call in flight fails as a lost device at once, without waiting for a future that died.
test('a call in flight fails as a lost device as soon as the device is found gone elsewhere', async () => {
  const device = fakeDevice();
  const guard = new GpuGuard({ deadline: 200 });
  guard.track(device);
  const never = guard.run(() => new Promise(() => {}));
  device.destroy();
  assert.equal(await guard.verdict(new Error('RuntimeError: unreachable')), true);
  await assert.rejects(never, (e) => e instanceof DeviceGone && /could not map a buffer/.test(e.message));
  // A call that finishes normally is not touched, and none is left in flight.
  const healthy = new GpuGuard();
  assert.equal(await healthy.run(async () => 7), 7);
  assert.equal(healthy.inFlight.size, 0);
});
