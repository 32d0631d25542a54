// The sampled piano's pure parts: which sample plays a pitch, the mute group of a track, the
// gain of a velocity, the notes of a piece as timed events, where a sample's sound starts, and
// the WAV encoder. No Web Audio here: audio.js and audio-voices.js play with these, and
// tests/js/audio.test.mjs checks them under Node.
import { downSpans, soundingEnds } from './pedal.js';
import { secondsAt } from './piece.js';

/** The 30 samples, low to high: `name` is the file in www/samples/ without `.mp3`. */
export const SAMPLES = Array.from({ length: 30 }, (_, i) => {
  const pitch = 21 + 3 * i; // A0 = MIDI 21, then every minor third up to C8 = 108
  const letter = { 0: 'C', 3: 'Ds', 6: 'Fs', 9: 'A' }[pitch % 12];
  return { name: `${letter}${Math.floor(pitch / 12) - 1}`, pitch };
});

export const MELODY_ROLES = ['melody', 'bridge'];

export const RELEASE = 0.3; // s, exponential fade to -60 dB after the note's end (the damper)
export const MIN_NOTE = 0.02; // s, shortest note sounded (zero-length notes still make a sound)
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
export function velocityGain(velocity) {
  return (Math.min(127, Math.max(1, velocity)) / 127) ** 1.6;
}

/**
 * The notes of `piece` starting in [fromTick, toTick), as seconds after `fromTick` at the tempo
 * scale `tempo`, sorted by time. Notes are cut at `toTick`; `toTick` = Infinity means the end of
 * the piece (`piece.endTick` or the last note's end, whichever is later). With `pedal` (the
 * default) a note lasts as long as it sounds under its track's sustain pedal (pedal.js): held
 * past its release while the pedal is down, until the lift or its next strike; the pedal spans
 * are cut at `toTick` too.
 * → { fromTick, endTick, start (s of fromTick), length (s to endTick), tail (s until the last
 *     release has faded), events: [{ time, duration, pitch, velocity, group }] }
 */
export function noteEvents(
  piece,
  { fromTick = 0, toTick = Infinity, tempo = 1, pedal = true } = {},
) {
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
    const ends =
      pedal && track.pedal?.length
        ? soundingEnds(track.notes, downSpans(track.pedal, endTick))
        : track.notes.map((n) => n[2]);
    for (const [i, [pitch, on, , velocity]] of track.notes.entries()) {
      if (on < fromTick || on >= endTick || !(velocity > 0)) continue;
      const time = secondsAt(piece, on, tempo) - start;
      const stop = secondsAt(piece, Math.min(ends[i], endTick), tempo) - start;
      const duration = Math.max(MIN_NOTE, stop - time);
      events.push({ time, duration, pitch, velocity, group });
      tail = Math.max(tail, time + duration + RELEASE);
    }
  }
  events.sort((a, b) => a.time - b.time);
  return { fromTick, endTick, start, length, tail, events };
}

/** Where the sound of `buffer` starts, in seconds: its first sample above -60 dB, less a margin. */
export function findOnset(buffer) {
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
