// The Worker's backends: the wasm bundles, the sessions they run, the GPU devices' guard and
// the backends' race. One object (`Backends`) owns all of it; the request dispatch (worker.js)
// owns the rest (the requests, their cancellation, the fine-tuning run) and asks this one
// object for a session: `session(kind, model)` is the one place that decides which session
// runs a request.
//
// Two bundles: pkg/cpu/ (no WebGPU code, a fraction of the size) makes the page ready on the
// CPU; on "auto" with a WebGPU adapter, pkg/ (with WebGPU) is fetched afterwards and each kind
// of work is raced on both (race.js): generation as soon as a generation model is loaded (one
// bar of accompaniment, or 16 tokens of continuation, with that model), fine-tuning at the
// first run's start (two steps of it; not on a software adapter, nor on one that lost
// generation by far). The work goes where its race was won; WebGPU passes its self-check
// first. "WebGPU only" loads pkg/ alone and is ready once WebGPU is up; its self-check
// follows, in the background.
//
// The GPU devices are watched by the guard (gpu-guard.js), the one place that decides "the
// device is gone"; every GPU call goes through `call()`. Once it is gone, `fallBack()` moves
// the Worker to the CPU (`switching` while it does) and requests that met the loss run again
// there (`request()`).
//
// Messages it posts (through `post`): ready, check, error, stopped, device-lost, raced
// (worker.js's header says what each carries).

import { SOFTWARE_TUNING_SLOWER, gpuLimits, raceText, raceTuningAfter, tuningSkippedText, verdict } from './race.js';
import { Drill, GpuGuard, PROBE_LABEL } from './gpu-guard.js';

export const BUNDLES = { cpu: '../pkg/cpu/pianoformer.js', gpu: '../pkg/pianoformer.js' };

/**
 * A function that resolves after a turn of the event loop (so a 'cancel' message can arrive):
 * a message to ourselves, which unlike setTimeout(0) is not held back 4 ms once timers nest (a
 * token at a time, they do). Each caller makes its own.
 */
export function turns() {
  let channel = null;
  const waiting = [];
  return () => {
    if (!channel) {
      channel = new MessageChannel();
      channel.port1.onmessage = () => waiting.shift()?.();
      // Node (tests): a port must not keep the process alive.
      channel.port1.unref?.();
    }
    return new Promise((resolve) => {
      waiting.push(resolve);
      channel.port2.postMessage(null);
    });
  };
}

// Browsers hide the adapter's description from wgpu; its vendor/architecture are public
// through navigator.gpu.
async function webGpuAdapter() {
  if (!globalThis.navigator?.gpu) return null;
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

const message = (e) => (e instanceof Error ? e.message : String(e));

export class Backends {
  /**
   * `post(message, transfer?)`: how messages reach the page. `load(bundle)`: imports a bundle
   * and returns {module, memory} (tests pass their own; the default imports BUNDLES).
   */
  constructor({ post, load = null }) {
    this.post = post;
    this.load = load;
    this.wasm = null; // the bundle in use (its module)
    this.memory = null; // its linear memory (it only grows: its size is the peak)
    this.main = null; // the session the page starts on (on auto: the CPU's)
    // On auto: the WebGPU session waiting beside the CPU's, {session, backend, checked,
    // software}, once fetched; the session each kind of work runs in (null: `main`) once
    // raced; the races' verdicts; the generation model to race with; the race running.
    this.gpu = null;
    this.routes = { generation: null, tuning: null };
    this.races = {};
    this.raceModel = null;
    this.racing = null;
    // Requests running on a session: a race waits for none to be running, requests for it.
    this.inFlight = 0;
    this.idleWaiters = [];
    // The models loaded, {entry, bytes} by name: a session that lacks one (the other bundle's,
    // the CPU's after a loss) loads it from here.
    this.models = new Map();
    this.onGpuSessions = new WeakSet();
    // What the Worker is doing with a GPU, each with the number of its calls in flight ('load',
    // 'check', 'fused-check', 'race', 'generate', 'attention', 'tune' — the drill's moments —
    // or 'template', 'harmonize', 'live'). Calls overlap (a template while a generation runs),
    // so a read-back counts for every moment in flight.
    this.moments = new Map();
    // `?drill=lose:MOMENT[:K]` (tests only): the devices are destroyed as the K-th read-back
    // of that moment starts (`load`: as soon as the device exists; `tune`: as the K-th step
    // starts), as a driver reset would. `?drill=move`: work moves to WebGPU whatever its race.
    this.drill = new Drill(null);
    this.drillMode = null;
    this.fused = true; // the page's `?fused=0` turns the WebGPU bundle's fused steps off
    this.poisoned = false; // the WebGPU bundle panicked: its instance is not used again
    this.switching = null;
    this.guard = new GpuGuard({
      onGone: (why) => {
        this.switching ??= this.fallBack(why);
      },
    });
    this.turn = turns();
  }

  /**
   * Hooks the Worker's global scope: every device wgpu asks for is watched by the guard (and
   * the drill destroys it at its moment), and a panic in the WebGPU bundle while a GPU call
   * runs waits for the guard's verdict.
   */
  install(scope) {
    const backends = this;
    if (scope.GPUAdapter?.prototype.requestDevice) {
      const request = scope.GPUAdapter.prototype.requestDevice;
      scope.GPUAdapter.prototype.requestDevice = async function (...args) {
        const device = backends.guard.track(await request.apply(this, args));
        if (backends.drill.atLoad()) device.destroy();
        return device;
      };
      const map = scope.GPUBuffer.prototype.mapAsync;
      scope.GPUBuffer.prototype.mapAsync = function (...args) {
        // Fine-tuning's drill counts steps instead (drillStep).
        if (this.label !== PROBE_LABEL) {
          for (const m of backends.moments.keys()) {
            if (m !== 'tune' && backends.drill.readBack(m)) {
              backends.destroyDevices();
              break;
            }
          }
        }
        return map.apply(this, args);
      };
    }
    // A panic in the WebGPU bundle while a GPU call runs (wgpu's WebGPU code unwraps a buffer
    // map that failed because the device is gone: an uncaught `unreachable`) would stop the
    // Worker. While a GPU call is in flight the error is held back until the guard decides: a
    // lost device is a loss like any other (the calls in flight fail as DeviceGone and run
    // again on the CPU, in the CPU bundle: the instance that panicked is not used again); any
    // other error stops the Worker as before ('stopped': the page treats it as the Worker's
    // error).
    scope.addEventListener('error', (event) => {
      if (this.moments.size === 0) return;
      event.preventDefault();
      this.poisoned = true;
      const error = event.error ?? new Error(event.message);
      this.guard.verdict(error).then((gone) => {
        if (!gone) this.post({ type: 'stopped', message: event.message || String(error) });
      });
    });
  }

  destroyDevices() {
    for (const device of this.guard.devices) device.destroy();
  }

  /** Fine-tuning's drill: destroys the devices as the step it is at starts on a GPU. */
  drillStep(s) {
    if (this.onGpu(s) && this.drill.readBack('tune')) this.destroyDevices();
  }

  /** Whether the backend has a session to run requests on. */
  get ready() {
    return this.main !== null;
  }

  onGpu(s) {
    return this.onGpuSessions.has(s);
  }

  /** A session whose device is gone (its requests run on the CPU now). */
  dead(s) {
    return this.onGpu(s) && this.guard.gone !== null;
  }

  /**
   * The session that runs a request of `kind` ('generation', 'tuning', or anything else: the
   * page's session), with the model `name` loaded there when given. The one decision.
   */
  session(kind, name = null) {
    let s = this.main;
    if (kind === 'generation') s = this.routes.generation ?? s;
    else if (kind === 'tuning') {
      s = this.routes.tuning ?? (this.drillMode === 'move' ? this.routes.generation : null) ?? s;
    }
    if (name && s !== this.main && !s.hasModel(name)) {
      const { entry, bytes } = this.models.get(name) ?? {};
      if (entry) s.loadModel(entry, bytes);
    }
    return s;
  }

  /** Runs `fn` as a GPU call of `what` when `s` is a WebGPU session (else just runs it). */
  async call(s, what, fn) {
    if (!this.onGpu(s)) return fn();
    this.enter(what);
    try {
      return await this.guard.run(fn);
    } finally {
      this.leave(what);
    }
  }

  enter(what) {
    this.moments.set(what, (this.moments.get(what) ?? 0) + 1);
  }

  leave(what) {
    const n = this.moments.get(what) - 1;
    if (n > 0) this.moments.set(what, n);
    else this.moments.delete(what);
  }

  /**
   * Runs a request: after any race (which shares the sessions), counted in flight (a race
   * waits for none), and once more on the CPU when it met a lost device and `wanted()` still
   * says so (a cancelled request is not run again).
   */
  async request(fn, wanted = () => true) {
    while (this.racing) await this.racing;
    this.inFlight++;
    try {
      if (this.switching) await this.switching;
      try {
        return await fn();
      } catch (e) {
        if (!e.deviceLost || !wanted() || !(await this.switching)) throw e;
        return fn();
      }
    } finally {
      this.inFlight--;
      if (!this.inFlight) for (const wake of this.idleWaiters.splice(0)) wake();
    }
  }

  /** Keeps a model loaded (a move or a loss loads it where requests go); a generation model is raced with. */
  remember(entry, text, bytes) {
    this.models.set(entry.name, { entry: text, bytes });
    if (/^(accompaniment|continuation)$/i.test(entry.task)) {
      this.raceModel = entry.name;
      // Not awaited: the race starts once this request is answered.
      setTimeout(() => this.raceGeneration(), 0);
    }
  }

  /** A model made in session `from` (fine-tuning): kept, and loaded where the page's requests go. */
  adopt(name, text, bytes, from) {
    this.models.set(name, { entry: text, bytes });
    if (from !== this.main) this.main.loadModel(text, bytes);
  }

  forget(name) {
    this.models.delete(name);
    if (this.gpu?.session.hasModel(name)) this.gpu.session.unloadModel(name);
    return this.main.unloadModel(name);
  }

  fail(error, context) {
    const text = message(error);
    this.post({ type: 'error', message: context ? `${context}: ${text}` : text });
  }

  // Loads a bundle: {module, memory}. A host that serves only pkg/ still works: the CPU then
  // runs from the WebGPU bundle.
  async loadWasm(bundle) {
    if (this.load) return this.load(bundle);
    try {
      let module;
      try {
        module = await import(BUNDLES[bundle]);
      } catch (e) {
        if (bundle !== 'cpu') throw e;
        module = await import(BUNDLES.gpu);
      }
      const exports = await module.default();
      module.setFusedSteps?.(this.fused);
      return { module, memory: exports.memory };
    } catch (e) {
      throw new Error(
        `the app's WebAssembly could not be loaded (${e.message || e}). ` +
          'If you are running from a checkout, build it with `make serve`.',
      );
    }
  }

  use(bundle) {
    this.wasm = bundle.module;
    this.memory = bundle.memory;
  }

  // The device is gone: every later request runs on the CPU. On auto the CPU session is there
  // already; "WebGPU only" loads the CPU bundle and the models it had. Tells the page, with the
  // backend it now runs on (without one, when the CPU could not start here, the page starts a
  // CPU Worker). Resolves true when the Worker runs on the CPU.
  async fallBack(why) {
    this.gpu = null;
    this.routes.generation = this.routes.tuning = null;
    if (this.races.generation === 'running') this.races.generation = null;
    try {
      // "WebGPU only" (or its session not up yet): the CPU bundle's session instead.
      const fresh = !this.main || this.onGpu(this.main) || this.poisoned;
      if (fresh) {
        const bundle = await this.loadWasm('cpu');
        const cpu = await bundle.module.Session.create('cpu');
        for (const { entry, bytes } of this.models.values()) cpu.loadModel(entry, bytes);
        this.use(bundle);
        this.main = cpu;
      }
      const backend = this.main.backend();
      backend.fallback_reason = `the GPU device was lost (${why})`;
      backend.fallback_detail = 'The CPU backend runs the same models; the piece, the settings and any fine-tuning went on there.';
      this.post({ type: 'device-lost', message: why, backend });
      if (fresh) {
        // The card shows the check of the backend in use.
        const t = performance.now();
        const report = await this.main.selfCheck();
        this.post({ type: 'check', report, ms: performance.now() - t });
      }
      return true;
    } catch (e) {
      this.post({ type: 'device-lost', message: `${why}; the CPU could not start here: ${e.message ?? e}` });
      return false;
    }
  }

  /** The self-check of a WebGPU session, its two parts apart (the drill's two moments). */
  async checkGpu(s) {
    const report = await this.call(s, 'check', () => s.selfCheck(false));
    const fused = await this.call(s, 'fused-check', () => s.fusedCheck());
    if (fused) report.fused = fused;
    return report;
  }

  /** Starts on `preference` ('auto' | 'gpu' | 'cpu'); `drillSpec`: `move`, `lose:…`, or both, comma-separated. */
  async init(preference, drillSpec, fused = true) {
    const t0 = performance.now();
    this.fused = fused;
    const parts = (drillSpec ?? '').split(',');
    this.drillMode = parts.includes('move') ? 'move' : null;
    this.drill = new Drill(parts.find((p) => p.startsWith('lose:')));
    const adapter = preference === 'cpu' ? null : await webGpuAdapter();
    if (preference === 'gpu') {
      await this.initGpuOnly(adapter, t0);
      return;
    }
    this.use(await this.loadWasm('cpu'));
    this.main = await this.wasm.Session.create('cpu');
    const backend = this.main.backend();
    if (preference === 'auto' && adapter) {
      backend.fallback_reason = `WebGPU (${adapter.name}) is still to race the CPU`;
      backend.fallback_detail = 'Each kind of work moves to WebGPU only if WebGPU runs a short piece of it faster.';
    } else if (preference === 'auto') {
      backend.fallback_reason = globalThis.navigator?.gpu
        ? 'this browser offers no WebGPU adapter (WebGPU is off, blocked or unsupported here)'
        : 'this browser has no WebGPU';
      backend.fallback_detail = 'The CPU backend runs the same models.';
    }
    this.post({ type: 'ready', backend, ms: performance.now() - t0 });
    const t1 = performance.now();
    const report = await this.main.selfCheck();
    this.post({ type: 'check', report, ms: performance.now() - t1 });
    if (preference === 'auto' && adapter) await this.prepareGpu(adapter);
  }

  // "WebGPU only": the WebGPU bundle, usable as soon as WebGPU is up.
  async initGpuOnly(adapter, t0) {
    this.use(await this.loadWasm('gpu'));
    let created = null;
    this.enter('load');
    try {
      created = await this.wasm.Session.create('gpu');
    } catch (e) {
      // Lost while it started: the CPU instead (fallBack). Any other failure is said as it is.
      if (!(await this.guard.verdict(e))) throw e;
    } finally {
      this.leave('load');
    }
    if (this.guard.gone !== null) {
      // fallBack() started the CPU session and told the page (its 'device-lost' carries the
      // backend the page is ready on).
      created?.free();
      await this.switching;
      return;
    }
    this.main = created;
    this.onGpuSessions.add(created);
    this.post({ type: 'ready', backend: labelled(created.backend(), adapter), ms: performance.now() - t0 });
    const t1 = performance.now();
    try {
      const report = await this.checkGpu(created);
      this.post({ type: 'check', report, ms: performance.now() - t1 });
    } catch (e) {
      // A lost device moved the Worker to the CPU (fallBack said so); anything else is a
      // failed check.
      if (!e.deviceLost) this.fail(e, 'The WebGPU self-check failed');
    }
  }

  // On auto, in the background while the page works on the CPU: the WebGPU bundle is fetched
  // and its session started; the first race starts once a generation model is loaded.
  async prepareGpu(adapter) {
    try {
      const bundle = await this.loadWasm('gpu');
      const candidate = await bundle.module.Session.create('gpu');
      // Lost while it started (fallBack has told the page): no race.
      if (this.guard.gone !== null) return;
      this.onGpuSessions.add(candidate);
      this.gpu = { session: candidate, backend: labelled(candidate.backend(), adapter), checked: false, software: adapter.software };
    } catch (e) {
      if (this.guard.gone !== null) return;
      const stay = this.main.backend();
      stay.fallback_reason = `WebGPU could not start (${message(e)})`;
      stay.fallback_detail = 'The CPU backend runs the same models.';
      this.post({ type: 'raced', race: null, backend: stay });
      return;
    }
    this.raceGeneration();
  }

  // Generation's race, once: with the generation model loaded last, when WebGPU is up. Requests
  // that arrive meanwhile wait for it (a second or two; a few seconds on a software adapter).
  raceGeneration() {
    if (!this.gpu || !this.raceModel || this.races.generation || this.racing) return;
    const name = this.raceModel;
    this.races.generation = 'running';
    this.racing = (async () => {
      while (this.inFlight) await new Promise((resolve) => this.idleWaiters.push(resolve));
      try {
        await this.runGenerationRace(name);
      } catch (e) {
        this.races.generation = null; // a failed race (a lost device, an unloaded model) is no verdict
        if (e.deviceLost) return; // fallBack() has told the page
        const stay = this.main.backend();
        stay.fallback_reason = `the race against WebGPU failed (${message(e)})`;
        this.post({ type: 'raced', race: null, backend: stay });
      }
    })().finally(() => {
      this.racing = null;
    });
  }

  // Runs `work(progress)` with a progress callback that stops it past `limit` ms; returns
  // {ms, stopped, share (of the work done when it stopped, from its progress reports)}.
  async timed(work, limit) {
    const t = performance.now();
    let stopped = false;
    let share = 0;
    const progress = (event) => {
      if (event?.total > 0) share = event.done / event.total;
      return this.turn().then(() => {
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

  async runGenerationRace(name) {
    const { entry, bytes } = this.models.get(name);
    const task = JSON.parse(entry).task.toLowerCase();
    const piece = this.wasm.readMidi(this.wasm.exampleMidi(0, 2), 'race.mid');
    const continuation = task === 'continuation';
    const options = JSON.stringify(continuation ? { seed: 1, tokens: 16, bars: 1 } : { seed: 1, region: [0, 1], chunkSteps: 1 });
    const work = continuation ? '16 tokens of continuation' : 'one bar of accompaniment';
    // Through the guard on WebGPU: a device lost mid-race ends the race (no verdict).
    const run = (s) => (progress) =>
      this.call(s, 'race', () =>
        s.generate(continuation ? 'continuation' : 'accompaniment', name, piece, options, progress),
      );
    const other = this.gpu.session;
    if (!other.hasModel(name)) other.loadModel(entry, bytes);
    const cpuWarm = await this.timed(run(this.main), Infinity);
    const cpu = await this.timed(run(this.main), Infinity);
    const force = this.drillMode === 'move' ? 'gpu' : null;
    const limits = force ? { warm: Infinity, timed: Infinity } : gpuLimits(cpuWarm.ms, cpu.ms);
    const gpuWarm = await this.timed(run(other), limits.warm);
    const gpuRun = gpuWarm.stopped ? null : await this.timed(run(other), limits.timed);
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
    await this.settle('generation', result, work);
  }

  // Makes a race's verdict the route of its kind of work and tells the page: WebGPU wins only
  // once it has passed its self-check.
  async settle(kind, result, work) {
    let report = null;
    let checkMs = null;
    if (result.winner === 'gpu' && !this.gpu.checked) {
      const t = performance.now();
      report = await this.checkGpu(this.gpu.session);
      if (!this.gpu) throw new Error('the GPU device was lost during its self-check');
      checkMs = performance.now() - t;
      this.gpu.checked = passes(report);
      if (!this.gpu.checked) result.winner = 'cpu';
    }
    result.text = raceText(result, work, this.gpu.backend.adapter ?? this.gpu.backend.label);
    if (report && !this.gpu.checked) result.text += '; but WebGPU failed its self-check';
    this.races[kind] = result;
    this.routes[kind] = result.winner === 'gpu' ? this.gpu.session : null;
    const backend = result.winner === 'gpu' ? this.gpu.backend : this.main.backend();
    if (result.winner !== 'gpu') {
      backend.fallback_reason = result.text;
      backend.fallback_detail = 'Choose "WebGPU only" to use WebGPU anyway.';
    }
    this.post({ type: 'raced', race: result, backend, report, ms: checkMs });
  }

  // The session a fine-tuning run starts in: on auto, the first run's start races two steps of
  // it on both backends (unless WebGPU is a software adapter, lost generation by far, or is
  // not up yet); then `session('tuning')` decides.
  async tuningSession(base, pieces, options) {
    if (this.gpu && !this.races.tuning && this.drillMode !== 'move') await this.raceTuning(base, pieces, options);
    return this.session('tuning', base);
  }

  async raceTuning(base, pieces, options) {
    const gpu = this.gpu;
    const generation = this.races.generation === 'running' ? null : this.races.generation;
    if (!raceTuningAfter(generation, gpu.software)) {
      const slower = gpu.software ? SOFTWARE_TUNING_SLOWER : generation.ratio;
      const result = verdict('fine-tuning', { cpuMs: 1, gpuMs: null, stoppedMs: slower });
      result.text = tuningSkippedText(generation, gpu.backend.adapter ?? gpu.backend.label, gpu.software);
      result.skipped = true;
      this.races.tuning = result;
      this.post({ type: 'raced', race: result, backend: null });
      return;
    }
    const { entry, bytes } = this.models.get(base) ?? {};
    if (entry && !gpu.session.hasModel(base)) gpu.session.loadModel(entry, bytes);
    const steps = (s, limit) =>
      this.call(s, 'tune', async () => {
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
    const cpu = await steps(this.main, { warm: Infinity });
    const limits = gpuLimits(cpu.warm, cpu.ms);
    const other = await steps(gpu.session, limits);
    const result = verdict('fine-tuning', {
      cpuMs: cpu.ms,
      gpuMs: other.warm == null ? null : other.ms,
      gpuWarmMs: other.warm,
      stoppedMs: other.ms,
    });
    await this.settle('tuning', result, 'a fine-tuning step');
  }
}
