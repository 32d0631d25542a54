// What the live-playing e2e test and benchmark share (not a test file itself): a melody-only
// MIDI file at a tempo (the bundled example's melody, written by the project's own code), a
// fake MIDI keyboard, and a take that plays that melody into the page through the keyboard
// with the piano playing along live.

/** `{ bytes, notes }`: a melody-only file of `bars` bars at `bpm`, and its notes. */
export function melodyFile(wasm, { bars, bpm, key = 0 }) {
  const piece = JSON.parse(wasm.readMidi(wasm.exampleMidi(key, bars), 'melody.mid'));
  piece.tracks = piece.tracks.filter((t) => t.role === 'melody');
  piece.tempos = [[0, Math.round(60e6 / bpm)]];
  const bytes = wasm.writeMidi(JSON.stringify(piece));
  return { bytes, notes: piece.tracks[0].notes, ppq: piece.ppq };
}

/** A stand-in for navigator.requestMIDIAccess, installed before the page's scripts. */
export function fakeMidi() {
  const input = { id: 'fake-1', name: 'Fake Keys', manufacturer: 'pianoformer tests', state: 'connected', type: 'input', onmidimessage: null };
  window.__midiSend = (data) => input.onmidimessage?.({ data: Uint8Array.from(data), timeStamp: performance.now() });
  navigator.requestMIDIAccess = async () => ({ inputs: new Map([[input.id, input]]), outputs: new Map(), onstatechange: null });
}

/**
 * Starts a take with the piano playing along live, plays `notes` ([pitch, start, end] ticks
 * at `ppq`, `bpm`) through the fake keyboard from the take's first beat, up to `seconds`,
 * and stops the take. Resolves to what the page kept of the take (`status.live`).
 */
export async function playLiveTake(page, { notes, ppq, bpm, seconds }) {
  await page.check('#live-piano');
  await page.click('#record');
  await page.waitForFunction(() => window.pianoformer.recording, null, { timeout: 120_000 });
  await page.evaluate(
    ({ notes, ppq, bpm, seconds }) => {
      const { startMs } = window.pianoformer.recording;
      const ms = (tick) => startMs + (tick / ppq) * (60000 / bpm);
      const end = startMs + seconds * 1000;
      const at = (t, fn) => setTimeout(fn, Math.max(0, t - performance.now()));
      for (const [pitch, start, stop] of notes) {
        if (ms(start) >= end) continue;
        at(ms(start), () => window.__midiSend([0x90, pitch, 96]));
        at(Math.min(ms(stop), end) - 1, () => window.__midiSend([0x80, pitch, 0]));
      }
      return new Promise((ok) => at(end + 50, ok));
    },
    { notes, ppq, bpm, seconds },
  );
  const kept = await page.evaluate(() => window.pianoformer.live);
  await page.click('#record');
  return kept;
}
