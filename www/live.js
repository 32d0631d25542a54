// Live playing: while a take is recorded, the piano accompanies it as it is played. The model
// runs in the Worker (never on this thread): a little before each sixteenth (LEAD_MS), the page
// sends the keys played since its last request and asks for that sixteenth's notes, which are
// scheduled on the audio clock at the sixteenth's own time. A sixteenth whose notes come back
// after it began is not sounded (counted late). The melody itself sounds as the key goes down
// (play-in.js), with no added delay. Per take, the decisions' latency (request to reply), the
// share ready in time and the melody's key-to-sound delay are kept in `status.live` and shown
// in a small meter.
import { $, status } from './page.js';
import { store } from './page-store.js';
import { call } from './worker-client.js';
import { currentEntry, ensureModel, livePedalText } from './model-loader.js';
import { secondsAt, tickAtSeconds } from './piece.js';
import { piano } from './sound.js';
import { settings } from './settings.js';
import { liveModels, meterText, stepTick } from './live-plan.js';

export const LEAD_MS = 25; // a sixteenth is asked for this long before it sounds
const LOOK_MS = 4; // how often the scheduler looks at the clock
const VELOCITY = 72; // the live piano's notes (the generated piano's velocity)

/**
 * One live take on `piece` from bar `fromBar` (its music before the bar heard by the model
 * first). `start()` loads the models and reads the piece (it may take a moment: call it before
 * the count-in); `begin(startMs)` starts the sixteenths at `startMs` (performance.now() time
 * of the take's first beat); `keyOn` / `keyOff` pass the keys on; `stop()` ends it and
 * resolves to the piano and chords it wrote (`liveStop`'s reply).
 */
export class LiveTake {
  constructor(piece, fromBar) {
    this.piece = piece;
    this.fromBar = fromBar;
    this.events = []; // [pitch, tick, on] not yet sent
    this.inFlight = false;
    this.stopped = false;
    // minMarginMs: the least time between a sounded sixteenth's notes arriving and its start
    // (never negative: a late sixteenth is not sounded).
    // pedal: the live piano's sustain pedal moves ([tick, value]); pedalled: the most notes its
    // pedal held past their release at once.
    this.stats = { steps: 0, hits: 0, late: 0, lateSteps: [], latencies: [], workerMs: [], keyDelays: [], notes: 0, chords: [], pedal: [], pedalled: 0, minMarginMs: null };
  }

  async start() {
    const { model, harmonizer } = liveModels(store.manifest, currentEntry());
    await ensureModel(model);
    if (harmonizer) await ensureModel(harmonizer);
    const s = settings();
    this.model = model;
    this.harmonizer = harmonizer;
    this.grid = await call('liveStart', {
      model: model.name,
      harmonizer: harmonizer?.name ?? null,
      piece: this.piece,
      options: {
        fromBar: this.fromBar,
        seed: s.seed,
        pianoTemperature: model.name === s.model ? s.pianoTemperature : null,
        density: s.density ?? null,
        textureEcho: s.textureEcho ?? null,
        pedal: s.writtenPedal ?? 'learnt',
      },
      // The learnt pedal of the take's piano ('': none): the live one (causal) pedals it as it
      // plays; without one, the written piano's pedals it when the take stops.
      pedal: (s.writtenPedal ?? 'learnt') === 'learnt' ? await livePedalText() : '',
    });
    this.next = this.grid.fromStep;
    this.fromSeconds = secondsAt(this.piece, this.grid.fromTick);
    status.live = this.stats;
    return this;
  }

  /** performance.now() time at which step `step` sounds. */
  stepMs(step) {
    return this.tickMs(stepTick(this.grid, step));
  }

  /** performance.now() time at which piece tick `tick` sounds in the take. */
  tickMs(tick) {
    return this.startMs + (secondsAt(this.piece, tick) - this.fromSeconds) * 1000;
  }

  #tick(ms) {
    return tickAtSeconds(this.piece, Math.max(0, this.fromSeconds + (ms - this.startMs) / 1000));
  }

  begin(startMs) {
    this.startMs = startMs;
    this.timer = setInterval(() => this.#look(), LOOK_MS);
    $('live-meter').hidden = false;
    $('live-meter').textContent = meterText(this.stats);
    this.meter = setInterval(() => {
      $('live-meter').textContent = meterText(this.stats);
    }, 500);
  }

  /** A key went down at `ms` (the event's time); `heardMs`: when the page sounded it. */
  keyOn(pitch, ms, heardMs = performance.now()) {
    this.stats.keyDelays.push(Math.max(0, heardMs - ms));
    this.events.push([pitch, this.#tick(ms), 1]);
  }

  keyOff(pitch, ms) {
    this.events.push([pitch, this.#tick(ms), 0]);
  }

  #look() {
    if (this.inFlight || this.stopped || this.next >= this.grid.steps) return;
    const now = performance.now();
    if (now < this.stepMs(this.next) - LEAD_MS) return;
    // Behind (a slow step, a busy page): ask for every step due by now at once.
    let step = this.next;
    while (step + 1 < this.grid.steps && now >= this.stepMs(step + 1) - LEAD_MS) step++;
    const events = this.events;
    this.events = [];
    this.inFlight = true;
    const asked = now;
    call('liveStep', { events, step })
      .then(({ steps, ms }) => this.#play(steps, asked, ms))
      .catch((e) => {
        if (!this.stopped) {
          this.stopped = true;
          clearInterval(this.timer);
          clearInterval(this.meter);
          this.failed = e.message;
          $('live-meter').textContent = `Live piano stopped: ${e.message}`;
        }
      })
      .finally(() => {
        this.inFlight = false;
      });
    this.next = step + 1;
  }

  #play(steps, asked, workerMs) {
    const arrived = performance.now();
    const latency = arrived - asked;
    const clock = piano.clock();
    for (const s of steps) {
      const at = this.stepMs(s.step);
      this.stats.steps++;
      this.stats.latencies.push(latency);
      this.stats.workerMs.push(workerMs / steps.length);
      if (s.chord !== undefined) this.stats.chords.push([s.step, s.chord]);
      if (this.stopped) continue;
      // What ends here ends even when the step came back late (at once, then).
      const when = clock + Math.max(0, at - arrived) / 1000;
      for (const p of s.ends) piano.liveOff(p, when);
      // The piano's pedal moves with its notes (late ones at once): a lift lets the notes it
      // held go, a change presses again a 64th later.
      for (const [tick, value] of s.pedal ?? []) {
        piano.livePedal(value >= 64, clock + Math.max(0, this.tickMs(tick) - arrived) / 1000);
        this.stats.pedal.push([tick, value]);
      }
      if (arrived > at) {
        this.stats.late++;
        this.stats.lateSteps.push([s.step, Math.round(arrived - at), Math.round(latency), steps.length]);
        continue;
      }
      this.stats.hits++;
      this.stats.minMarginMs = Math.min(this.stats.minMarginMs ?? Infinity, at - arrived);
      for (const p of s.onsets) {
        piano.liveOn(p, VELOCITY, when);
        this.stats.notes++;
      }
      this.stats.pedalled = Math.max(this.stats.pedalled, piano.livePedalled);
    }
  }

  /** Ends the take: resolves to `{ fromTick, endTick, piano, fromBar, cells }`. */
  async stop() {
    this.stopped = true;
    clearInterval(this.timer);
    clearInterval(this.meter);
    piano.liveStop();
    $('live-meter').textContent = meterText(this.stats);
    while (this.inFlight) await new Promise((ok) => setTimeout(ok, 5));
    return call('liveStop', {});
  }
}
