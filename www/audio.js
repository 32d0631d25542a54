// Sampled piano: plays a piece (see piece.js) live through Web Audio and renders it offline into
// a WAV file, with the same voices. The sounds are the Salamander Grand Piano V3 samples by
// Alexander Holm (CC BY 3.0), one every minor third from A0 to C8, copied into www/samples/ by
// tools/samples.mjs; each note plays the nearest one re-pitched by at most a semitone.
//
//   const piano = new Piano(baseUrl?)       samples from ./samples/ next to this module
//   await piano.load((loaded, total) => …)  fetch + decode the 30 samples (once; no user gesture
//                                           needed: no AudioContext is created until `play`)
//   piano.loaded                            true once `load` has succeeded
//   piano.play(piece, { fromTick, toTick, loop, tempo, mute, onEnd })
//   piano.playing                           true from `play` until it stops
//   piano.positionTick()                    the tick heard now (loop and tempo included), or null
//   piano.setMute({ melody, accompaniment }) instant, also for the notes sounding now
//   piano.stop()                            quick fade, every scheduled note stopped
//   await piano.renderWav(piece, { tempo, mute, sampleRate })  → Blob (audio/wav, 16-bit stereo)
//
// Tracks with role 'melody' or 'bridge' form the melody group; all others ('piano',
// 'generated', 'other') the accompaniment group, each with its own gain node for muting.
// Live playback schedules in a look-ahead window (every 100 ms, the notes starting in the next
// 1.5 s), so pieces with thousands of notes start at once and never block the page; export
// pauses its offline render every 2 s of audio to do the same (`scheduleNotes` serves both).
//
// The pure helpers (`nearestSample`, `noteEvents`, `encodeWav`, ...) are in audio-notes.js and
// re-exported here, the Web Audio graph (voices, the scheduler) in audio-voices.js; this file is
// the Piano. Importable in Node: nothing touches the Web Audio globals until `load` or `play`.
import { tickAtSeconds } from './piece.js';
import { SAMPLES, RELEASE, noteEvents, findOnset, encodeWav } from './audio-notes.js';
import { createOutput, createBus, attackVoice, scheduleNotes } from './audio-voices.js';

export { SAMPLES, MELODY_ROLES, nearestSample, groupOf, noteEvents, encodeWav } from './audio-notes.js';

const LOOKAHEAD = 1.5; // s scheduled ahead (covers a background tab's 1 s timer throttling)
const SCHEDULE_EVERY = 100; // ms between two scheduling passes
export const START_DELAY = 0.06; // s between `play` and the first note, so that it is not late
const STOP_FADE = 0.01; // s, time constant of the fade-out on `stop` (silent after ~60 ms)
const MIN_LOOP = 0.1; // s, shorter loop ranges play once
const MAX_RENDER_SECONDS = 20 * 60;
// Export schedules notes in steps too: Chromium processes every scheduled node in every render
// quantum, even before it starts, so scheduling all notes up front costs notes × length
// (2000 notes took 200 s). The render pauses every RENDER_STEP s to schedule the next ones.
const RENDER_STEP = 2;

export class Piano {
  #baseUrl;
  #samples = null; // Map name → { buffer: AudioBuffer, onset: seconds }
  #loading = null;
  #ctx = null; // the live AudioContext, created by the first `play`
  #output = null;
  #session = null; // the playback in progress
  #mute = { melody: false, accompaniment: false };
  #held = new Map(); // pitch → the voice of a key held live
  #sustain = false; // a keyboard's sustain pedal is down
  #sustained = new Set(); // keys released under it, still sounding
  #live = new Map(); // pitch → the voice of a live piano note (a live take's accompaniment)
  #livePedal = false; // the live piano's sustain pedal is down (as of the last move scheduled)
  #livePedalled = new Map(); // pitch → a live piano note ended under its pedal, still sounding

  /** `baseUrl`: the folder holding A0.mp3 … C8.mp3 (a URL or a string, relative to the page). */
  constructor(baseUrl = new URL('./samples/', import.meta.url)) {
    const url = new URL(baseUrl, globalThis.location?.href ?? import.meta.url);
    if (!url.pathname.endsWith('/')) url.pathname += '/';
    this.#baseUrl = url;
  }

  get loaded() {
    return this.#samples !== null;
  }

  get playing() {
    return this.#session !== null;
  }

  /**
   * Sounds `pitch` now, held until `noteOff(pitch)`: a key played live (MIDI or computer
   * keyboard). Returns false (silently) while the samples are not loaded.
   */
  noteOn(pitch, velocity = 90) {
    if (!this.#samples) return false;
    const ctx = this.#context();
    if (ctx.state !== 'running') ctx.resume().catch(() => {});
    this.#release(pitch); // a key struck again under the pedal re-strikes
    this.#sustained.delete(pitch);
    this.#held.set(pitch, attackVoice(ctx, this.#samples, this.#output, pitch, velocity, ctx.currentTime));
    return true;
  }

  /** Releases a key held by `noteOn` (under the sustain pedal, when the pedal lifts). */
  noteOff(pitch) {
    if (this.#sustain && this.#held.has(pitch)) {
      this.#sustained.add(pitch);
      return;
    }
    this.#release(pitch);
  }

  /**
   * The sustain pedal of the keys played live (a keyboard's controller 64): while `down`,
   * released keys keep sounding; lifting it releases them.
   */
  setSustain(down) {
    this.#sustain = Boolean(down);
    if (this.#sustain) return;
    for (const pitch of this.#sustained) this.#release(pitch);
    this.#sustained.clear();
  }

  /** The live keys still sounding (held or under the pedal), for tests. */
  get sounding() {
    return this.#held.size;
  }

  #release(pitch) {
    const voice = this.#held.get(pitch);
    if (!voice) return;
    this.#held.delete(pitch);
    const now = this.#ctx.currentTime;
    const gain = voice.envelope.gain;
    gain.cancelScheduledValues(now);
    gain.setValueAtTime(Math.max(gain.value, voice.peak * 1e-3), now);
    gain.exponentialRampToValueAtTime(voice.peak * 1e-3, now + RELEASE);
    voice.source.stop(now + RELEASE);
  }

  /** The audio clock (context seconds), the one live notes are scheduled on. */
  clock() {
    const ctx = this.#context();
    if (ctx.state !== 'running') ctx.resume().catch(() => {});
    return ctx.currentTime;
  }

  /**
   * A live piano note (a live take's accompaniment) attacked at context time `when`, sounding
   * until `liveOff(pitch, …)`; one already sounding at that pitch ends there. False while the
   * samples are not loaded.
   */
  liveOn(pitch, velocity, when) {
    if (!this.#samples) return false;
    // Struck again: the string sounding (held, or under the pedal) is damped as it is re-struck.
    this.#damp(this.#live, pitch, when);
    this.#damp(this.#livePedalled, pitch, when);
    this.#live.set(pitch, attackVoice(this.#context(), this.#samples, this.#output, pitch, velocity, when));
    return true;
  }

  /**
   * Ends a live piano note at context time `when` (its release fades after it); while the live
   * piano's pedal is down it sounds on until the pedal lifts or the key is struck again.
   */
  liveOff(pitch, when) {
    if (this.#livePedal && this.#live.has(pitch)) {
      this.#livePedalled.set(pitch, this.#live.get(pitch));
      this.#live.delete(pitch);
      return;
    }
    this.#damp(this.#live, pitch, when);
  }

  /**
   * The live piano's sustain pedal (a live take's learnt pedal), moved at context time `when`:
   * lifting it ends the notes it holds there. Moves are given in the order they happen, with
   * the notes' `liveOn` / `liveOff` around them.
   */
  livePedal(down, when) {
    this.#livePedal = Boolean(down);
    if (this.#livePedal) return;
    for (const pitch of [...this.#livePedalled.keys()]) this.#damp(this.#livePedalled, pitch, when);
  }

  /** The live piano's notes sounding only because its pedal is down, for tests and the meter. */
  get livePedalled() {
    return this.#livePedalled.size;
  }

  /** Ends `voices`' note at `pitch` at context time `when` (its release fades after it). */
  #damp(voices, pitch, when) {
    const voice = voices.get(pitch);
    if (!voice) return;
    voices.delete(pitch);
    const at = Math.max(when, this.#ctx.currentTime);
    const gain = voice.envelope.gain;
    gain.cancelScheduledValues(at);
    gain.setValueAtTime(voice.peak, at);
    gain.exponentialRampToValueAtTime(voice.peak * 1e-3, at + RELEASE);
    voice.source.stop(at + RELEASE);
  }

  /** Ends every live piano note at context time `when`, its pedal lifted (the take stopped). */
  liveStop(when = this.#ctx?.currentTime ?? 0) {
    this.#livePedal = false;
    for (const pitch of [...this.#live.keys()]) this.#damp(this.#live, pitch, when);
    for (const pitch of [...this.#livePedalled.keys()]) this.#damp(this.#livePedalled, pitch, when);
  }

  /**
   * A metronome click at `seconds` from now (a short sine blip; `accent` on the bar's first
   * beat). Needs no samples. Returns the context time it sounds at.
   */
  click(seconds, accent = false) {
    const ctx = this.#context();
    if (ctx.state !== 'running') ctx.resume().catch(() => {});
    const when = ctx.currentTime + Math.max(0, seconds);
    const osc = ctx.createOscillator();
    const gain = ctx.createGain();
    osc.frequency.value = accent ? 1760 : 1320;
    gain.gain.setValueAtTime(0, when);
    gain.gain.linearRampToValueAtTime(accent ? 0.5 : 0.3, when + 0.002);
    gain.gain.exponentialRampToValueAtTime(1e-4, when + 0.05);
    osc.connect(gain).connect(this.#output);
    osc.onended = () => gain.disconnect();
    osc.start(when);
    osc.stop(when + 0.06);
    return when;
  }

  /** The mute state that `play` starts with and `setMute` changes: { melody, accompaniment }. */
  get mute() {
    return { ...this.#mute };
  }

  /**
   * Fetches and decodes the samples; `onProgress(loaded, total)` after each one. Calling it again
   * returns the same promise (its `onProgress` is not called); a failed load may be retried.
   * Rejects with an Error whose message is a sentence for the user.
   */
  load(onProgress) {
    this.#loading ??= this.#fetchAll(onProgress).catch((e) => {
      this.#loading = null;
      throw new Error(`The piano samples could not be loaded: ${e.message || e}.`);
    });
    return this.#loading;
  }

  async #fetchAll(onProgress) {
    if (typeof OfflineAudioContext === 'undefined') {
      throw new Error('this browser has no Web Audio');
    }
    // Decoding needs a context but not a running one: an offline context at the files' own rate
    // avoids the autoplay policy (and resampling); AudioBuffers work in any context.
    const decoder = new OfflineAudioContext(2, 1, 44100);
    let loaded = 0;
    onProgress?.(0, SAMPLES.length);
    const entries = await Promise.all(
      SAMPLES.map(async ({ name }) => {
        const url = new URL(`${name}.mp3`, this.#baseUrl);
        try {
          const response = await fetch(url);
          if (!response.ok) {
            throw new Error(`the server answered ${response.status} ${response.statusText}`.trim());
          }
          const buffer = await decoder.decodeAudioData(await response.arrayBuffer());
          onProgress?.(++loaded, SAMPLES.length);
          return [name, { buffer, onset: findOnset(buffer) }];
        } catch (e) {
          throw new Error(`${url.pathname}: ${e.message || e}`);
        }
      }),
    );
    this.#samples = new Map(entries);
  }

  /** The live AudioContext and its output, created on first use (in a user gesture, ideally). */
  #context() {
    if (!this.#ctx) {
      this.#ctx = new AudioContext();
      this.#output = createOutput(this.#ctx);
    }
    return this.#ctx;
  }

  /**
   * Plays `piece` from `fromTick` to `toTick` (Infinity: its end), `tempo` times as fast as
   * written, looping over that range if `loop` until `stop`. `mute` ({ melody, accompaniment },
   * either may be left out) replaces the current mute state. `onEnd()` is called when playback
   * stops by itself (never after `stop` or another `play`). `pedal` (default true) holds notes
   * under their track's sustain pedal (pedal.js). Stops any playback in progress.
   * The notes are read once, here: edits to `piece` are heard from the next `play`.
   * Throws if the samples are not loaded yet.
   */
  play(
    piece,
    { fromTick = 0, toTick = Infinity, loop = false, tempo = 1, mute, onEnd, pedal = true } = {},
  ) {
    if (!this.#samples) {
      throw new Error('The piano samples are not loaded yet (await load() first).');
    }
    const plan = noteEvents(piece, { fromTick, toTick, tempo, pedal });
    this.stop();
    if (mute) this.#mute = { ...this.#mute, ...mute };
    const ctx = this.#context();
    // A context made outside a user gesture starts suspended; until it runs, its clock stands
    // still and nothing gets scheduled, so playback simply starts when it resumes.
    if (ctx.state !== 'running') ctx.resume().catch(() => {});
    const session = {
      piece,
      tempo,
      plan,
      loop: Boolean(loop) && plan.length >= MIN_LOOP,
      onEnd,
      bus: createBus(ctx, this.#output, this.#mute),
      t0: ctx.currentTime + START_DELAY, // context time at which fromTick sounds
      next: 0, // index of the next event to schedule
      round: 0, // loop repetitions scheduled so far
      sources: new Set(),
      timer: 0,
    };
    this.#session = session;
    this.#schedule(session);
    session.timer = setInterval(() => this.#schedule(session), SCHEDULE_EVERY);
  }

  /** Schedules the notes starting before now + LOOKAHEAD, and ends playback once all have faded. */
  #schedule(session) {
    if (this.#session !== session) return;
    const now = this.#ctx.currentTime;
    scheduleNotes(this.#ctx, this.#samples, session.bus, session, now + LOOKAHEAD, (source) => {
      session.sources.add(source);
      source.addEventListener('ended', () => session.sources.delete(source));
    });
    if (!session.loop && now >= session.t0 + session.plan.tail) {
      this.#end(session);
      session.onEnd?.();
    }
  }

  /** Stops playback at once: a fade of a few tens of milliseconds, then every source stops. */
  stop() {
    if (this.#session) this.#end(this.#session);
  }

  #end(session) {
    this.#session = null;
    clearInterval(session.timer);
    const now = this.#ctx.currentTime;
    session.bus.output.gain.setTargetAtTime(0, now, STOP_FADE);
    for (const source of session.sources) {
      try {
        source.stop(now + 6 * STOP_FADE);
      } catch {
        // already stopped
      }
    }
    setTimeout(() => session.bus.output.disconnect(), 200);
  }

  /**
   * The tick being heard now (output latency, tempo and loop included), or null when stopped.
   * Before the first note sounds it is `fromTick`; after the end, the end tick.
   */
  positionTick() {
    const session = this.#session;
    if (!session) return null;
    const ctx = this.#ctx;
    const latency = (ctx.baseLatency || 0) + (ctx.outputLatency || 0);
    let t = Math.max(0, ctx.currentTime - latency - session.t0);
    const { start, length } = session.plan;
    t = session.loop ? t % length : Math.min(t, length);
    return tickAtSeconds(session.piece, start + t, session.tempo);
  }

  /**
   * Mutes or unmutes a group ({ melody, accompaniment }, either may be left out), instantly.
   * Muted notes are still scheduled (into a silent gain), so unmuting brings back held notes.
   */
  setMute(mute) {
    this.#mute = { ...this.#mute, ...mute };
    const session = this.#session;
    if (!session) return;
    const now = this.#ctx.currentTime;
    for (const [group, gain] of Object.entries(session.bus.groups)) {
      gain.gain.setTargetAtTime(this.#mute[group] ? 0 : 1, now, 0.005);
    }
  }

  /**
   * Renders the whole `piece` offline, `tempo` times as fast as written, without the muted
   * groups (default: the current mute state), into a 16-bit stereo WAV including the last
   * release, with the tracks' sustain pedal unless `pedal` is false. Loads the samples if
   * needed. Refuses pieces longer than 20 minutes.
   */
  async renderWav(
    piece,
    { tempo = 1, mute = this.#mute, sampleRate = 44100, pedal = true } = {},
  ) {
    await this.load();
    const plan = noteEvents(piece, { tempo, pedal });
    if (plan.length > MAX_RENDER_SECONDS) {
      throw new Error(
        `The piece lasts ${Math.round(plan.length / 60)} minutes at this tempo; ` +
          `WAV export is limited to ${MAX_RENDER_SECONDS / 60} minutes.`,
      );
    }
    const muted = { melody: false, accompaniment: false, ...mute };
    const events = plan.events.filter((e) => !muted[e.group]);
    const frames = Math.max(1, Math.ceil((plan.tail + 0.05) * sampleRate));
    let rendered;
    let failure = null;
    try {
      const ctx = new OfflineAudioContext(2, frames, sampleRate);
      const bus = createBus(ctx, createOutput(ctx), muted);
      const cursor = { plan: { ...plan, events }, t0: 0, loop: false, next: 0, round: 0 };
      // Schedule two steps ahead, and pause the render at every step (a whole number of
      // 128-frame render quanta) to schedule more.
      const stepFrames = Math.round((RENDER_STEP * sampleRate) / 128) * 128;
      const step = (frame) => {
        scheduleNotes(ctx, this.#samples, bus, cursor, (frame + 2 * stepFrames) / sampleRate);
        const next = frame + stepFrames;
        if (cursor.next >= events.length || next >= frames) return;
        // Half a frame in: rounding the time to a frame cannot land on the frame before.
        ctx.suspend((next + 0.5) / sampleRate).then(
          () => {
            try {
              step(next);
            } catch (e) {
              failure = e;
            }
            return ctx.resume();
          },
          (e) => (failure = e),
        );
      };
      step(0);
      rendered = await ctx.startRendering();
    } catch (e) {
      failure = e;
    }
    if (failure) throw new Error(`The piece could not be rendered: ${failure.message || failure}.`);
    const channels = [rendered.getChannelData(0), rendered.getChannelData(1)];
    return new Blob([encodeWav(channels, sampleRate)], { type: 'audio/wav' });
  }
}
