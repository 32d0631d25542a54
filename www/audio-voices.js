// The sampled piano's Web Audio graph: the output chain (gain, compressor), a playback's mute
// groups, one voice (the nearest sample re-pitched, its attack and release) and the scheduler
// that starts a plan's notes a little ahead of the clock, for live playback and WAV export
// alike. Nothing runs until audio.js's Piano calls it with a context.
import { MIN_NOTE, RELEASE, nearestSample, velocityGain } from './audio-notes.js';

const ATTACK = 0.005; // s, linear fade-in: keeps the sample's own attack without a click
// The v8 samples peak at about 0.23: a make-up gain before the compressor that catches chords
// (a single C4 then peaks at 0.27 at velocity 100, 0.36 at 127).
const MASTER_GAIN = 1.5;
const LATE = 0.25; // s: notes found later than this (the page was frozen) are skipped

/** master gain → compressor → destination: the output shared by every playback of a context. */
export function createOutput(ctx) {
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
export function createBus(ctx, destination, mute) {
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
export function attackVoice(ctx, samples, destination, pitch, velocity, when) {
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
export function startVoice(ctx, samples, destination, { pitch, velocity, duration }, when) {
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
export function scheduleNotes(ctx, samples, bus, cursor, until, onStart) {
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
