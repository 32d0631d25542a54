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
// Importable in Node: nothing touches the Web Audio globals until `load` or `play`, so the pure
// helpers (`nearestSample`, `noteEvents`, `encodeWav`) are unit-tested there.
import { secondsAt, tickAtSeconds } from './piece.js';

/** The 30 samples, low to high: `name` is the file in www/samples/ without `.mp3`. */
export const SAMPLES = Array.from({ length: 30 }, (_, i) => {
  const pitch = 21 + 3 * i; // A0 = MIDI 21, then every minor third up to C8 = 108
  const letter = { 0: 'C', 3: 'Ds', 6: 'Fs', 9: 'A' }[pitch % 12];
  return { name: `${letter}${Math.floor(pitch / 12) - 1}`, pitch };
});

export const MELODY_ROLES = ['melody', 'bridge'];

const ATTACK = 0.005; // s, linear fade-in: keeps the sample's own attack without a click
const RELEASE = 0.3; // s, exponential fade to -60 dB after the note's end (the damper)
const MIN_NOTE = 0.02; // s, shortest note sounded (zero-length notes still make a sound)
// The v8 samples peak at about 0.23: a make-up gain before the compressor that catches chords
// (a single C4 then peaks at 0.27 at velocity 100, 0.36 at 127).
const MASTER_GAIN = 1.5;
const LOOKAHEAD = 1.5; // s scheduled ahead (covers a background tab's 1 s timer throttling)
const SCHEDULE_EVERY = 100; // ms between two scheduling passes
export const START_DELAY = 0.06; // s between `play` and the first note, so that it is not late
const LATE = 0.25; // s: notes found later than this (the page was frozen) are skipped
const STOP_FADE = 0.01; // s, time constant of the fade-out on `stop` (silent after ~60 ms)
const MIN_LOOP = 0.1; // s, shorter loop ranges play once
const MAX_RENDER_SECONDS = 20 * 60;
// Export schedules notes in steps too: Chromium processes every scheduled node in every render
// quantum, even before it starts, so scheduling all notes up front costs notes × length
// (2000 notes took 200 s). The render pauses every RENDER_STEP s to schedule the next ones.
const RENDER_STEP = 2;
const ONSET_THRESHOLD = 1e-3; // -60 dB: where a sample's sound starts (the files begin silent)
const ONSET_MARGIN = 0.002; // s kept before that onset

/** The sample for MIDI `pitch`: the nearest one (a semitone away at most), clamped to A0–C8. */
export function nearestSample(pitch) {
  const i = Math.min(SAMPLES.length - 1, Math.max(0, Math.round((Math.round(pitch) - 21) / 3)));
  return SAMPLES[i];
}

/** 'melody' or 'accompaniment': the mute group of a track role. */
export function groupOf(role) {
  return MELODY_ROLES.includes(role) ? 'melody' : 'accompaniment';
}

/** Gain of a note of MIDI velocity 1–127: a curve, so that soft notes are clearly softer. */
function velocityGain(velocity) {
  return (Math.min(127, Math.max(1, velocity)) / 127) ** 1.6;
}

/**
 * The notes of `piece` starting in [fromTick, toTick), as seconds after `fromTick` at the tempo
 * scale `tempo`, sorted by time. Notes are cut at `toTick`; `toTick` = Infinity means the end of
 * the piece (`piece.endTick` or the last note's end, whichever is later).
 * → { fromTick, endTick, start (s of fromTick), length (s to endTick), tail (s until the last
 *     release has faded), events: [{ time, duration, pitch, velocity, group }] }
 */
export function noteEvents(piece, { fromTick = 0, toTick = Infinity, tempo = 1 } = {}) {
  if (!(tempo > 0 && Number.isFinite(tempo))) {
    throw new RangeError(`The tempo scale must be a positive number, not ${tempo}.`);
  }
  let pieceEnd = piece.endTick ?? 0;
  for (const track of piece.tracks) {
    for (const note of track.notes) pieceEnd = Math.max(pieceEnd, note[2]);
  }
  const endTick = Number.isFinite(toTick) ? toTick : pieceEnd;
  const start = secondsAt(piece, fromTick, tempo);
  const length = Math.max(0, secondsAt(piece, endTick, tempo) - start);
  const events = [];
  let tail = length;
  for (const track of piece.tracks) {
    const group = groupOf(track.role);
    for (const [pitch, on, off, velocity] of track.notes) {
      if (on < fromTick || on >= endTick || !(velocity > 0)) continue;
      const time = secondsAt(piece, on, tempo) - start;
      const stop = secondsAt(piece, Math.min(off, endTick), tempo) - start;
      const duration = Math.max(MIN_NOTE, stop - time);
      events.push({ time, duration, pitch, velocity, group });
      tail = Math.max(tail, time + duration + RELEASE);
    }
  }
  events.sort((a, b) => a.time - b.time);
  return { fromTick, endTick, start, length, tail, events };
}

/** master gain → compressor → destination: the output shared by every playback of a context. */
function createOutput(ctx) {
  const master = ctx.createGain();
  master.gain.value = MASTER_GAIN;
  const compressor = ctx.createDynamicsCompressor();
  // Measured in Chromium: with its automatic make-up gain, ten notes at velocity 127 at once
  // peak at -2 dBFS.
  compressor.threshold.value = -10;
  compressor.knee.value = 6;
  compressor.ratio.value = 12;
  compressor.attack.value = 0.001;
  compressor.release.value = 0.2;
  master.connect(compressor).connect(ctx.destination);
  return master;
}

/** One playback's gains: one per group (melody, accompaniment) into `output` (faded on stop). */
function createBus(ctx, destination, mute) {
  const output = ctx.createGain();
  output.connect(destination);
  const groups = {};
  for (const group of ['melody', 'accompaniment']) {
    groups[group] = ctx.createGain();
    groups[group].gain.value = mute[group] ? 0 : 1;
    groups[group].connect(output);
  }
  return { output, groups };
}

/**
 * The start of one voice: the sample nearest to `pitch`, re-pitched, into `destination` with
 * `velocity`'s gain and a short attack at `when` (context time). The caller ends it.
 */
function attackVoice(ctx, samples, destination, pitch, velocity, when) {
  const sample = nearestSample(pitch);
  const { buffer, onset } = samples.get(sample.name);
  const source = ctx.createBufferSource();
  source.buffer = buffer;
  source.playbackRate.value = 2 ** ((pitch - sample.pitch) / 12);
  const envelope = ctx.createGain();
  const peak = velocityGain(velocity);
  envelope.gain.setValueAtTime(0, when);
  envelope.gain.linearRampToValueAtTime(peak, when + ATTACK);
  source.connect(envelope).connect(destination);
  source.onended = () => envelope.disconnect();
  source.start(when, onset);
  return { source, envelope, peak };
}

/**
 * Sounds one note event into `destination`: attacked at `when` (context time), released after
 * `when + duration`. The one voice of both live playback and export. Returns the source node,
 * already scheduled to stop when the release has faded.
 */
function startVoice(ctx, samples, destination, { pitch, velocity, duration }, when) {
  const { source, envelope, peak } = attackVoice(ctx, samples, destination, pitch, velocity, when);
  const off = when + Math.max(duration, MIN_NOTE);
  envelope.gain.setValueAtTime(peak, off);
  envelope.gain.exponentialRampToValueAtTime(peak * 1e-3, off + RELEASE);
  source.stop(off + RELEASE);
  return source;
}

/**
 * Schedules the notes of a playback `cursor` ({ plan, t0, loop, next, round }: `plan` from
 * `noteEvents`, `t0` the context time of its start) that start before `until` (context time),
 * looping over the plan if `cursor.loop`, and advances the cursor past them. A note found more
 * than LATE s behind the context's clock is skipped; a less late one starts at once.
 * `onStart(source)` sees each source node. Used by both live playback and export.
 */
function scheduleNotes(ctx, samples, bus, cursor, until, onStart) {
  const now = ctx.currentTime;
  const { events, length } = cursor.plan;
  for (;;) {
    if (cursor.next >= events.length) {
      if (!cursor.loop || events.length === 0) return;
      cursor.next = 0;
      cursor.round++;
    }
    const event = events[cursor.next];
    const when = cursor.t0 + cursor.round * length + event.time;
    if (when >= until) return;
    cursor.next++;
    if (when < now - LATE) continue;
    const source = startVoice(ctx, samples, bus.groups[event.group], event, Math.max(when, now));
    onStart?.(source);
  }
}

/** Where the sound of `buffer` starts, in seconds: its first sample above -60 dB, less a margin. */
function findOnset(buffer) {
  let first = buffer.length;
  for (let c = 0; c < buffer.numberOfChannels; c++) {
    const data = buffer.getChannelData(c);
    const limit = Math.min(first, data.length);
    for (let i = 0; i < limit; i++) {
      if (Math.abs(data[i]) > ONSET_THRESHOLD) {
        first = i;
        break;
      }
    }
  }
  if (first === buffer.length) return 0;
  return Math.max(0, first / buffer.sampleRate - ONSET_MARGIN);
}

export class Piano {
  #baseUrl;
  #samples = null; // Map name → { buffer: AudioBuffer, onset: seconds }
  #loading = null;
  #ctx = null; // the live AudioContext, created by the first `play`
  #output = null;
  #session = null; // the playback in progress
  #mute = { melody: false, accompaniment: false };
  #held = new Map(); // pitch → the voice of a key held live

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
    this.noteOff(pitch);
    this.#held.set(pitch, attackVoice(ctx, this.#samples, this.#output, pitch, velocity, ctx.currentTime));
    return true;
  }

  /** Releases a key held by `noteOn`. */
  noteOff(pitch) {
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
   * stops by itself (never after `stop` or another `play`). Stops any playback in progress.
   * The notes are read once, here: edits to `piece` are heard from the next `play`.
   * Throws if the samples are not loaded yet.
   */
  play(piece, { fromTick = 0, toTick = Infinity, loop = false, tempo = 1, mute, onEnd } = {}) {
    if (!this.#samples) {
      throw new Error('The piano samples are not loaded yet (await load() first).');
    }
    const plan = noteEvents(piece, { fromTick, toTick, tempo });
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
   * release. Loads the samples if needed. Refuses pieces longer than 20 minutes.
   */
  async renderWav(piece, { tempo = 1, mute = this.#mute, sampleRate = 44100 } = {}) {
    await this.load();
    const plan = noteEvents(piece, { tempo });
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

/**
 * A RIFF/WAVE file of 16-bit PCM from `channels` (one Float32Array per channel, all the same
 * length, samples in [-1, 1]; beyond is clamped, NaN is silence), interleaved.
 */
export function encodeWav(channels, sampleRate) {
  if (channels.length < 1 || channels.length > 0xffff) {
    throw new RangeError('A WAV file needs 1 to 65535 channels.');
  }
  const frames = channels[0].length;
  if (channels.some((c) => c.length !== frames)) {
    throw new RangeError('All channels of a WAV file must have the same length.');
  }
  if (!(Number.isInteger(sampleRate) && sampleRate > 0)) {
    throw new RangeError(`A WAV file needs a positive whole sample rate, not ${sampleRate}.`);
  }
  const blockAlign = channels.length * 2;
  const dataBytes = frames * blockAlign;
  if (44 + dataBytes > 0xffffffff) {
    throw new RangeError('The audio is too long for a WAV file (4 GiB at most).');
  }
  const buffer = new ArrayBuffer(44 + dataBytes);
  const view = new DataView(buffer);
  const ascii = (offset, text) => {
    for (let i = 0; i < text.length; i++) view.setUint8(offset + i, text.charCodeAt(i));
  };
  ascii(0, 'RIFF');
  view.setUint32(4, 36 + dataBytes, true); // everything after this field
  ascii(8, 'WAVE');
  ascii(12, 'fmt ');
  view.setUint32(16, 16, true); // fmt chunk size
  view.setUint16(20, 1, true); // PCM
  view.setUint16(22, channels.length, true);
  view.setUint32(24, sampleRate, true);
  view.setUint32(28, sampleRate * blockAlign, true); // bytes per second
  view.setUint16(32, blockAlign, true); // bytes per frame
  view.setUint16(34, 16, true); // bits per sample
  ascii(36, 'data');
  view.setUint32(40, dataBytes, true);
  let offset = 44;
  for (let i = 0; i < frames; i++) {
    for (const channel of channels) {
      const s = Math.max(-1, Math.min(1, channel[i] || 0));
      view.setInt16(offset, Math.round(s < 0 ? s * 0x8000 : s * 0x7fff), true);
      offset += 2;
    }
  }
  return buffer;
}
