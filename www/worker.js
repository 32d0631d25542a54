// The model's home: the Worker loads the wasm, owns the Session and the loaded models, and
// talks to the page only by messages, so the page never freezes while tensors are computed.
// Two parts, each owning its state: the backends (backends.js: the bundles, the sessions, the
// GPU guard and the backends' race; it decides which session runs a request) and the request
// dispatch here (the requests, their cancellation, the fine-tuning run in progress).
//
// In:  {type: 'init', backend: 'auto' | 'gpu' | 'cpu', drill?, fused?}
//      {type: 'call', id, method, args}   methods: readMidi, writeMidi, exampleMidi, checkPiece, textureFrom, repedal, memory,
//                                          loadModel, hasModel, unloadModel, generate, attention,
//                                          harmonize, liveStart, liveStep, liveStop,
//                                          template; fine-tuning: tuneInspect, tuneStart,
//                                          tuneStep, tuneKeep, tuneDrop, packModel, unpackModel
//      {type: 'cancel', id} · {type: 'drill', what: 'lose-device'} (tests only)
// Out: {type: 'ready', backend, ms} · {type: 'check', report, ms} · {type: 'error', message}
//      {type: 'device-lost', message, backend?}  (the GPU device is gone; with `backend`, the
//      Worker already runs on the CPU: the request that met the loss is run again there and a
//      fine-tuning run goes on from its last good step; without, the page starts a CPU Worker)
//      {type: 'raced', race, backend, report?, ms?}  (on auto: a kind of work was raced on both
//      backends — race.js's verdict with its words — and runs on `backend` from now on; with
//      WebGPU's self-check when WebGPU won)
//      {type: 'stopped', message}  (the WebGPU bundle failed for a reason other than a loss)
//      {type: 'reply', id, ok, value | message} · {type: 'progress', id, done, total, bars?, notes?,
//      attention?}

import { Backends, turns } from './backends.js';

// Requests that need no session (the wasm's plain functions).
const FREE = new Set(['readMidi', 'readMusicXml', 'writeMusicXml', 'writeMidi', 'exampleMidi', 'checkPiece', 'planPiece', 'textureFrom', 'memory', 'tuneInspect', 'packModel', 'unpackModel']);

// The browser compiles wasm in two tiers: a function runs first as quickly compiled baseline
// code and is optimised once it has run for a while. The harmonizer's first call on a long
// melody would run mostly in baseline code (a 100-bar melody: 190-280 ms, against 35-40 ms
// once warm; `node tools/bench-harmonize.mjs`), so as a harmonizer loads on the CPU it reads
// a short melody (8 bars of the bundled example) and the file that follows finds much of its
// code optimised (90-165 ms). A failure here only leaves it cold.
async function warmUp(wasm, s, name) {
  try {
    const piece = JSON.parse(wasm.readMidi(wasm.exampleMidi(0, 8), 'warm-up.mid'));
    piece.tracks = piece.tracks.filter((t) => t.role === 'melody');
    await s.generate('harmonization', name, JSON.stringify(piece), JSON.stringify({ bars: null, seed: null }), () => true);
  } catch {
    // Cold code is slower, not wrong.
  }
}

class Requests {
  constructor(backends, post) {
    this.backends = backends;
    this.post = post;
    this.cancelled = new Set();
    // The fine-tuning run in progress (the page calls tuneStep once per step): the run, the
    // session it runs in (a later move leaves it there), what started it, and — while it runs
    // on a GPU — a snapshot of its last good step, to go on from on the CPU if the device is
    // lost.
    this.tune = null; // {run, session, base, pieces, options, snapshot, resumedAt}
    this.turn = turns();
    this.methods = this.table();
  }

  // Posts a progress report, hands the event loop a turn, then says whether to go on.
  progress(id) {
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
      this.post(message, transfer);
      return this.turn().then(() => !this.cancelled.has(id));
    };
  }

  /** Runs `fn(session)` on the session for `kind` ('generation', 'tuning' or the page's), as a GPU call of `what`. */
  on(kind, what, fn, model = null) {
    const s = this.backends.session(kind, model);
    return this.backends.call(s, what, () => fn(s));
  }

  // Fine-tuning that ran on a device now gone goes on on the CPU from its last good step: a
  // new run with the same base, files and settings, given the snapshot's weights, step and
  // losses.
  async resumeTuning() {
    const { base, pieces, options, snapshot } = this.tune;
    const s = this.backends.session('tuning', base);
    const run = await s.tuner(base, pieces, options);
    if (snapshot) run.restore(snapshot.progress, snapshot.weights);
    try {
      this.tune.run.free();
    } catch {
      // Its memory went with the device's bundle.
    }
    this.tune = { ...this.tune, run, session: s, snapshot: null, resumedAt: snapshot ? JSON.parse(snapshot.progress).step : 0 };
  }

  table() {
    const b = this.backends;
    return {
      readMidi: ({ bytes, name }) => JSON.parse(b.wasm.readMidi(new Uint8Array(bytes), name)),
      readMusicXml: ({ bytes, name }) => JSON.parse(b.wasm.readMusicXml(new Uint8Array(bytes), name)),
      writeMusicXml: ({ piece, lead }) => b.wasm.writeMusicXml(JSON.stringify(piece), !!lead),
      writeMidi: ({ piece }) => b.wasm.writeMidi(JSON.stringify(piece)),
      exampleMidi: ({ key = 0, bars = 16 }) => b.wasm.exampleMidi(key, bars),
      // Bytes of the wasm's linear memory (it only grows: the peak so far).
      memory: () => b.memory?.buffer.byteLength ?? null,
      checkPiece: ({ piece }) => b.wasm.checkPiece(JSON.stringify(piece)),
      textureFrom: ({ piece, from, to }) => JSON.parse(b.wasm.textureFrom(JSON.stringify(piece), from, to)),
      // "Pedal these bars": the learnt pedal (its JSON sent with the call) over the bars.
      repedal: ({ piece, from, to, pedal }) =>
        this.on('page', 'repedal', (s) => {
          s.setPedal(pedal ?? '');
          return JSON.parse(s.repedal(JSON.stringify(piece), from, to));
        }),
      planPiece: ({ bars, numerator = 4, denominator = 4, bpm = 100 }) =>
        JSON.parse(b.wasm.planPiece(bars, numerator, denominator, bpm)),
      loadModel: async ({ entry, bytes }) => {
        const text = JSON.stringify(entry);
        const data = new Uint8Array(bytes);
        const info = await this.on('page', 'load', (s) => s.loadModel(text, data));
        b.remember(entry, text, data);
        const s = b.session('page');
        if (entry.task === 'harmonization' && s.backend().kind === 'cpu') await warmUp(b.wasm, s, entry.name);
        return info;
      },
      hasModel: ({ name }) => b.session('page').hasModel(name),
      template: ({ model, layer, head, lags }) => this.on('page', 'template', (s) => s.template(model, layer, head, lags)),
      // A live take (play-in.js, live.js): started on a piece, then asked for each sixteenth
      // shortly before it sounds with the keys played since, then stopped. Each reply carries
      // the time the Worker spent on it (`ms`).
      liveStart: async ({ model, harmonizer, piece, options, pedal }) =>
        JSON.parse(
          await this.on('page', 'live', (s) => {
            s.setPedal(pedal ?? '');
            return s.liveStart(model, harmonizer ?? undefined, JSON.stringify(piece), JSON.stringify(options));
          }),
        ),
      liveStep: async ({ events, step }) => {
        const t = performance.now();
        const steps = JSON.parse(await this.on('page', 'live', (s) => s.liveStep(JSON.stringify(events), step)));
        return { steps, ms: performance.now() - t };
      },
      liveStop: () => JSON.parse(b.session('page').liveStop()),
      harmonize: async ({ model, piece, options }) =>
        JSON.parse(
          await this.on('page', 'harmonize', (s) =>
            s.generate('harmonization', model, JSON.stringify(piece), JSON.stringify(options), () => true),
          ),
        ),
      attention: ({ model, piece, options }, id) =>
        this.on('page', 'attention', (s) => s.attention(model, JSON.stringify(piece), JSON.stringify(options), this.progress(id))),
      unloadModel: ({ name }) => b.forget(name),
      tuneInspect: ({ pieces, task, holdout }) => b.wasm.inspectTuneFiles(JSON.stringify(pieces), task, holdout),
      // Starts a run where fine-tuning runs; returns what it reads and the base model's
      // held-out loss.
      tuneStart: async ({ base, pieces, options }) => {
        this.tune?.run.free();
        this.tune = null;
        const piecesText = JSON.stringify(pieces);
        const optionsText = JSON.stringify(options);
        const s = await b.tuningSession(base, piecesText, optionsText);
        const run = await b.call(s, 'tune', () => s.tuner(base, piecesText, optionsText));
        this.tune = { run, session: s, base, pieces: piecesText, options: optionsText, snapshot: null, resumedAt: null };
        const info = run.info();
        info.baseValidLoss = await b.call(s, 'tune', () => run.validate());
        return info;
      },
      // One step. On a GPU the step's weights are read back after it (the snapshot a lost
      // device resumes from); a run whose device is gone goes on on the CPU first
      // (`resumedAt`: the step it went on from, once).
      tuneStep: async () => {
        if (!this.tune) throw new Error('no fine-tuning run is in progress');
        if (b.dead(this.tune.session)) await this.resumeTuning();
        const { run, session: s } = this.tune;
        b.drillStep(s);
        const report = await b.call(s, 'tune', () => run.step());
        if (b.onGpu(s)) this.tune.snapshot = await b.call(s, 'tune', () => run.snapshot());
        if (this.tune.resumedAt !== null) {
          report.resumedAt = this.tune.resumedAt;
          this.tune.resumedAt = null;
        }
        report.wasmBytes = b.memory?.buffer.byteLength ?? null;
        return report;
      },
      tuneKeep: async ({ name, description }) => {
        if (!this.tune) throw new Error('no fine-tuned model to keep');
        if (b.dead(this.tune.session)) await this.resumeTuning();
        const { run, session: s } = this.tune;
        const out = await b.call(s, 'tune', () => s.keepTuned(run, name, description ?? ''));
        b.adopt(name, out.entry, new Uint8Array(out.weights), s);
        return { entry: JSON.parse(out.entry), weights: out.weights };
      },
      tuneDrop: () => {
        try {
          this.tune?.run.free();
        } catch {
          // A run on a lost device's bundle: nothing left to free.
        }
        this.tune = null;
      },
      packModel: ({ entry, weights }) => b.wasm.packModel(JSON.stringify(entry), new Uint8Array(weights)),
      unpackModel: ({ bytes }) => {
        const out = b.wasm.unpackModel(new Uint8Array(bytes));
        return { entry: JSON.parse(out.entry), weights: out.weights };
      },
      // Every generation task (the studio's table) through the Session's one entry point.
      generate: ({ task, model, piece, options, dynamics, pedal }, id) =>
        this.on(
          'generation',
          'generate',
          async (s) => {
            // The velocity model for the piano an accompaniment writes ('' : none): sent with
            // every call, so a Worker that moved backends or restarted has it too.
            s.setDynamics(dynamics ?? '');
            s.setPedal(pedal ?? '');
            return JSON.parse(await s.generate(task, model, JSON.stringify(piece), JSON.stringify(options), this.progress(id)));
          },
          model,
        ),
    };
  }

  async call({ id, method, args }) {
    try {
      if (!this.backends.ready && !FREE.has(method)) throw new Error('the model backend is still starting');
      if (!this.backends.wasm) throw new Error('the app is still loading');
      const run = this.methods[method];
      if (!run) throw new Error(`unknown request ${JSON.stringify(method)}`);
      const value = FREE.has(method)
        ? await run(args ?? {}, id)
        : await this.backends.request(() => run(args ?? {}, id), () => !this.cancelled.has(id));
      const transfer =
        value instanceof Uint8Array ? [value.buffer] : value?.weights instanceof Uint8Array ? [value.weights.buffer] : [];
      this.post({ type: 'reply', id, ok: true, value }, transfer);
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
      this.post({ type: 'reply', id, ok: false, fatal, deviceLost: e.deviceLost === true, message });
    } finally {
      this.cancelled.delete(id);
    }
  }
}

const post = (message, transfer) => postMessage(message, transfer ?? []);
const backends = new Backends({ post });
backends.install(self);
const requests = new Requests(backends, post);

self.onmessage = ({ data }) => {
  if (data?.type === 'init') {
    backends
      .init(data.backend ?? 'auto', data.drill, data.fused !== false)
      .catch((e) => backends.fail(e, 'The compute backend could not start'));
  } else if (data?.type === 'call') {
    requests.call(data);
  } else if (data?.type === 'cancel') {
    requests.cancelled.add(data.id);
  } else if (data?.type === 'drill' && data.what === 'lose-device') {
    backends.destroyDevices();
  } else {
    backends.fail(`unknown message ${JSON.stringify(data?.type)}`);
  }
};
