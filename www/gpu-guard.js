// The one place the Worker decides "the GPU device is gone". Every GPU call goes through
// `guard.run(fn)`: when `fn` fails, the guard tells a lost device from an ordinary error,
// without waiting a fixed time for the news. A device is gone when
//   - its `lost` promise has resolved (a driver reset, a GPU unplugged, `destroy()`), or
//   - an uncaptured GPU error was raised while the call ran (out of memory, an internal
//     error: its results cannot be trusted), or
//   - it cannot map a fresh 4-byte buffer for reading (the probe), which a lost device never
//     can: a read-back or a map that failed because the device went fails this probe too,
//     however late the `lost` promise resolves.
// A probe that does not answer within PROBE_DEADLINE_MS counts as a failed one: a device that
// cannot map 4 bytes in that time is not one to run a model on.
//
// The guard knows nothing of sessions or messages: `onGone(message)` (once) is the Worker's
// reaction. Node tests drive it with simulated devices (tests/js/gpu-guard.test.mjs).

export const PROBE_DEADLINE_MS = 10_000;
/** The label of the probe's buffers (the drill does not count their read-backs). */
export const PROBE_LABEL = 'pianoformer: is the device still there?';

/** The error a guarded call fails with once the device is gone; `cause` is the original. */
export class DeviceGone extends Error {
  constructor(message, cause) {
    super(`the GPU device was lost (${message})`);
    this.name = 'DeviceGone';
    this.deviceLost = true;
    this.reason = message;
    this.cause = cause;
  }
}

// GPUBufferUsage.MAP_READ | COPY_DST and GPUMapMode.READ, spelled out so the module loads in
// Node (where the WebGPU globals are missing).
const MAP_READ = 0x0001;
const COPY_DST = 0x0008;
const MODE_READ = 0x0001;

function text(error) {
  return error instanceof Error ? error.message : String(error?.message ?? error);
}

/** Whether `device` can still map a buffer for reading (false past `deadline` ms). */
export async function probe(device, deadline = PROBE_DEADLINE_MS) {
  let timer;
  const late = new Promise((resolve) => {
    timer = setTimeout(() => resolve(false), deadline);
  });
  const map = (async () => {
    const buffer = device.createBuffer({ label: PROBE_LABEL, size: 4, usage: MAP_READ | COPY_DST });
    try {
      await buffer.mapAsync(MODE_READ);
      buffer.unmap();
      return true;
    } finally {
      buffer.destroy();
    }
  })().catch(() => false);
  try {
    return await Promise.race([map, late]);
  } finally {
    clearTimeout(timer);
  }
}

export class GpuGuard {
  /** `onGone(message)`: called once, when a device is first found gone. */
  constructor({ onGone = () => {}, deadline = PROBE_DEADLINE_MS } = {}) {
    this.devices = [];
    this.gone = null; // why, once a device is gone
    this.onGone = onGone;
    this.deadline = deadline;
    this.uncaptured = 0; // uncaptured GPU errors so far
    this.lastUncaptured = null;
    this.inFlight = new Set(); // the rejections of the runs in flight
  }

  /** Watches a device wgpu asked for: its loss and its uncaptured errors. */
  track(device) {
    this.devices.push(device);
    device.lost?.then((info) => this.lose(info?.message || info?.reason || 'lost'));
    device.addEventListener?.('uncapturederror', (event) => {
      this.uncaptured++;
      this.lastUncaptured = text(event?.error ?? 'an uncaptured GPU error');
    });
    return device;
  }

  /** Marks the devices gone (once) and tells the Worker. */
  lose(message) {
    if (this.gone !== null) return;
    this.gone = message;
    // A run in flight may never settle (its future died with the device, or with a panic the
    // loss caused): it fails now.
    for (const reject of this.inFlight) reject(new DeviceGone(message));
    this.inFlight.clear();
    this.onGone(message);
  }

  /**
   * After a GPU call failed with `error`: true when the device is gone (and `gone` says why),
   * false when the call failed for a reason of its own. `uncapturedBefore`: the count of
   * uncaptured errors when the call began.
   */
  async verdict(error, uncapturedBefore = this.uncaptured) {
    if (this.gone !== null) return true;
    if (this.uncaptured > uncapturedBefore) {
      this.lose(`a GPU error no one caught: ${this.lastUncaptured}`);
      return true;
    }
    for (const device of this.devices) {
      if (this.gone !== null) return true;
      if (!(await probe(device, this.deadline))) {
        this.lose(`the device could not map a buffer after: ${text(error)}`);
        return true;
      }
    }
    return this.gone !== null;
  }

  /**
   * Runs a GPU call; a failure caused by a lost device becomes a DeviceGone, and so does the
   * call itself, at once, when the device is found gone while it runs.
   */
  async run(fn) {
    if (this.gone !== null) throw new DeviceGone(this.gone);
    const before = this.uncaptured;
    let reject;
    const gone = new Promise((_, r) => {
      reject = r;
    });
    this.inFlight.add(reject);
    try {
      const work = Promise.resolve().then(fn);
      work.catch(() => {}); // settled later or never: the race below decides
      return await Promise.race([work, gone]);
    } catch (error) {
      if (error instanceof DeviceGone) throw error;
      if (await this.verdict(error, before)) throw new DeviceGone(this.gone, error);
      throw error;
    } finally {
      this.inFlight.delete(reject);
    }
  }
}

/**
 * The drill (`?drill=lose:MOMENT[:K]`, tests only): the devices are destroyed as the K-th read
 * back (1 when absent) of MOMENT begins, or, for `load`, as soon as the device exists (for
 * `tune` the Worker counts steps: the K-th step's). Moments: load, check, fused-check, race,
 * generate, attention, tune. Null when `spec` asks for none.
 */
export function parseDrill(spec) {
  const m = /^lose:(load|check|fused-check|race|generate|attention|tune)(?::(\d+))?$/.exec(spec ?? '');
  if (!m) return null;
  return { moment: m[1], at: m[2] ? Math.max(1, Number(m[2])) : 1 };
}

/** Counts read-backs per moment and says when the drill's one has come (once). */
export class Drill {
  constructor(spec) {
    this.plan = parseDrill(spec);
    this.counts = {};
    this.fired = false;
  }

  /** True when the read-back (or step) starting now, during `moment`, is the one to lose the device at. */
  readBack(moment) {
    if (!this.plan || this.fired || !moment) return false;
    this.counts[moment] = (this.counts[moment] ?? 0) + 1;
    if (moment !== this.plan.moment || this.counts[moment] !== this.plan.at) return false;
    this.fired = true;
    return true;
  }

  /** True (once) when the drill loses the device as soon as it exists. */
  atLoad() {
    if (this.plan?.moment !== 'load' || this.fired) return false;
    this.fired = true;
    return true;
  }
}
