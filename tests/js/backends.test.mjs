// The Worker's backends (www/backends.js) under Node with stand-in sessions: which session runs
// a request is decided in one place; a request that meets a lost device runs again on the CPU
// with the models it had (a cancelled one does not); requests wait for a race and a race for
// them. And the Worker keeps no module-level `let` state: the race and the dispatch each own
// theirs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Backends } from '../../www/backends.js';

class FakeSession {
  constructor(kind, log) {
    this.kind = kind;
    this.log = log;
    this.loaded = new Set();
    this.onGenerate = null;
  }
  backend() {
    return { kind: this.kind, label: this.kind };
  }
  loadModel(entry) {
    this.loaded.add(JSON.parse(entry).name);
    return { name: JSON.parse(entry).name };
  }
  hasModel(name) {
    return this.loaded.has(name);
  }
  unloadModel(name) {
    return this.loaded.delete(name);
  }
  async selfCheck() {
    return { ops: { matmul: 0, cumsum: 0, softmax: 0 }, fit: { losses: [2, 1] } };
  }
  async fusedCheck() {
    return null;
  }
  async generate(task, model) {
    this.log.push(`${this.kind}:${model}`);
    if (this.onGenerate) await this.onGenerate();
    return this.kind;
  }
  free() {}
}

/** Backends whose bundles make FakeSessions; `log` lists the generations each session ran. */
function backendsWithFakes() {
  const posted = [];
  const log = [];
  const sessions = [];
  const module = {
    Session: {
      create: async (kind) => {
        const s = new FakeSession(kind, log);
        sessions.push(s);
        return s;
      },
    },
  };
  const backends = new Backends({
    post: (m) => posted.push(m),
    load: async () => ({ module, memory: null }),
  });
  return { backends, posted, log, sessions };
}

const entry = (name, task = 'accompaniment') => ({ name, task });
const remember = (backends, name, task) => {
  const e = entry(name, task);
  backends.main.loadModel(JSON.stringify(e));
  backends.remember(e, JSON.stringify(e), new Uint8Array(0));
};
const generate = (backends, model) =>
  backends.request(() => {
    const s = backends.session('generation', model);
    return backends.call(s, 'generate', () => s.generate('accompaniment', model));
  });

test('generation and fine-tuning go where their race sent them, with the model loaded there; the rest stays', async () => {
  const { backends } = backendsWithFakes();
  await backends.init('cpu', null);
  remember(backends, 'acc');
  const cpu = backends.main;
  assert.equal(backends.session('generation', 'acc'), cpu);
  const gpu = new FakeSession('gpu', []);
  backends.routes.generation = gpu;
  assert.equal(backends.session('generation', 'acc'), gpu);
  assert.ok(gpu.hasModel('acc'), 'the routed session loads the model from the registry');
  assert.equal(backends.session('tuning', 'acc'), cpu, 'fine-tuning has its own race');
  assert.equal(backends.session('page'), cpu);
  backends.drillMode = 'move';
  assert.equal(backends.session('tuning', 'acc'), gpu, '`?drill=move` moves fine-tuning with generation');
  backends.routes.tuning = cpu;
  assert.equal(backends.session('tuning', 'acc'), cpu);
});

test('a generation that meets a lost device runs again on the CPU, with the models it had', async () => {
  const { backends, posted, log } = backendsWithFakes();
  await backends.init('gpu', null);
  const gpu = backends.main;
  assert.equal(gpu.kind, 'gpu');
  assert.ok(backends.onGpu(gpu));
  remember(backends, 'acc');
  gpu.onGenerate = async () => {
    backends.guard.lose('a driver reset');
    throw new Error('the staging buffer could not be mapped');
  };
  assert.equal(await generate(backends, 'acc'), 'cpu');
  assert.deepEqual(log, ['gpu:acc', 'cpu:acc']);
  assert.equal(backends.main.kind, 'cpu');
  assert.ok(backends.main.hasModel('acc'));
  assert.ok(backends.dead(gpu));
  const lost = posted.find((m) => m.type === 'device-lost');
  assert.equal(lost.backend.kind, 'cpu');
  assert.match(lost.backend.fallback_reason, /a driver reset/);
  // Later requests go to the CPU at once.
  assert.equal(await generate(backends, 'acc'), 'cpu');
});

test('a cancelled request that meets a lost device is not run again; an ordinary error stays itself', async () => {
  const { backends, log } = backendsWithFakes();
  await backends.init('gpu', null);
  remember(backends, 'acc');
  backends.main.onGenerate = async () => {
    throw new Error('a bug of its own');
  };
  await assert.rejects(generate(backends, 'acc'), /a bug of its own/);
  assert.equal(backends.guard.gone, null, 'a healthy device maps its probe: not a loss');
  backends.main.onGenerate = async () => {
    backends.guard.lose('unplugged');
    throw new Error('map failed');
  };
  const s = backends.main;
  await assert.rejects(
    backends.request(
      () => backends.call(s, 'generate', () => s.generate('accompaniment', 'acc')),
      () => false,
    ),
    (e) => e.deviceLost === true,
  );
  assert.deepEqual(log, ['gpu:acc', 'gpu:acc']);
});

test('requests wait for a race to end, and a race for the requests in flight', async () => {
  const { backends } = backendsWithFakes();
  await backends.init('cpu', null);
  let endRace;
  backends.racing = new Promise((resolve) => {
    endRace = resolve;
  }).then(() => {
    backends.racing = null;
  });
  let ran = false;
  const request = backends.request(async () => {
    ran = true;
  });
  await new Promise((resolve) => setTimeout(resolve, 10));
  assert.equal(ran, false, 'the request waits while the race runs');
  endRace();
  await request;
  assert.ok(ran);
  // A request in flight holds a race back until it ends.
  let finish;
  const inFlight = backends.request(
    () =>
      new Promise((resolve) => {
        finish = resolve;
      }),
  );
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.equal(backends.inFlight, 1);
  let raceStarted = false;
  const waited = (async () => {
    while (backends.inFlight) await new Promise((resolve) => backends.idleWaiters.push(resolve));
    raceStarted = true;
  })();
  await new Promise((resolve) => setTimeout(resolve, 10));
  assert.equal(raceStarted, false);
  finish();
  await inFlight;
  await waited;
  assert.ok(raceStarted);
});

test('the Worker keeps no module-level mutable state: the backends and the dispatch own theirs', () => {
  for (const file of ['www/worker.js', 'www/backends.js']) {
    const text = readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');
    assert.deepEqual(text.match(/^(let|var) .*/gm) ?? [], [], `${file} has module-level let/var`);
  }
});
