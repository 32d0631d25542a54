// Playing in: the computer keyboard and MIDI keyboards heard through the piano, and recording
// a take into the melody from the playhead's bar (a count-in, a metronome, the music already
// there playing along). The take's maths (timing, grid, merging into the piece) is keys.js's.
import { $, status, showError, notice } from './page.js';
import { call } from './worker-client.js';
import { noteCount, barAt, secondsAt, fitPhrases } from './piece.js';
import { Take, computerKeyPitch, emptyPiece, noteMessage, pedalMessage, recordInto } from './keys.js';
import { START_DELAY } from './audio.js';
import { piano } from './sound.js';
import { run } from './commands.js';
import { setPiece, store } from './page-store.js';
import { withLaneFilled } from './harmonizer.js';
import { LiveTake } from './live.js';
import { withLivePiano } from './live-plan.js';

export const keys = {
  octave: 4,
  computer: false, // the computer keyboard plays notes (the toggle, or during a take)
  midi: null, // the MIDIAccess once connected
  down: new Map(), // computer key → pitch held
  take: null, // the recording in progress: { take, fromTick, clicks, live }
  starting: false, // a take with the live piano is getting ready
};

/**
 * One key pressed (MIDI or computer) at `ms` (the event's time): heard at once, recorded when a
 * take is running, and passed to the live piano when it plays along.
 */
function keyOn(pitch, velocity, ms = performance.now()) {
  if (!piano.loaded) piano.load().catch((e) => showError(e.message));
  piano.noteOn(pitch, velocity);
  const heard = performance.now();
  keys.take?.take.on(pitch, velocity, ms);
  keys.take?.live?.keyOn(pitch, ms, heard);
  status.keysPlayed = (status.keysPlayed ?? 0) + 1;
}

/** An event's own time (the moment the key moved), when the browser gives a sensible one. */
function eventMs(event) {
  const now = performance.now();
  return event.timeStamp > 0 && event.timeStamp <= now && now - event.timeStamp < 1000 ? event.timeStamp : now;
}

/** A keyboard's sustain pedal moved to `value`: heard at once, recorded when a take is running. */
function pedalMove(value, ms = performance.now()) {
  piano.setSustain(value >= 64);
  keys.take?.take.pedal(value, ms);
  status.pedalMoves = (status.pedalMoves ?? 0) + 1;
}

function keyOff(pitch, ms = performance.now()) {
  piano.noteOff(pitch);
  keys.take?.take.off(pitch, ms);
  keys.take?.live?.keyOff(pitch, ms);
}

export function setComputerKeys(on) {
  keys.computer = on;
  $('keys-toggle').setAttribute('aria-pressed', String(on));
  if (!on) {
    for (const pitch of keys.down.values()) keyOff(pitch);
    keys.down.clear();
  }
  showKeys();
}

function showKeys() {
  const midi = keys.midi ? [...keys.midi.inputs.values()].map((i) => i.name || 'MIDI input') : [];
  const parts = [];
  if (midi.length) parts.push(`MIDI: ${midi.join(', ')}`);
  if (keys.computer || keys.take) {
    const c = keys.octave - 1;
    parts.push(`computer keys on: A W S E D F T G Y H U J K play C${c + 1}–C${c + 2}, Z / X octave, Esc ends`);
  }
  if (keys.take) parts.push('recording — press Record again (or R) to stop');
  $('keys-status').textContent = parts.join(' · ') ||
    'Keys: A W S E D F T G Y H U J K (C to C), Z / X octave down / up';
}

/** Asks for the MIDI keyboards (the browser may ask the person first). */
async function connectMidi() {
  if (!navigator.requestMIDIAccess) {
    showError('This browser has no Web MIDI, so a MIDI keyboard cannot be used here (Chromium-based browsers and Firefox have it); the computer keyboard works: press "Computer keys".');
    return;
  }
  try {
    keys.midi = await navigator.requestMIDIAccess();
  } catch (e) {
    showError(`The MIDI keyboard could not be used: ${e.message || 'access was refused'}.`);
    return;
  }
  const listen = () => {
    for (const input of keys.midi.inputs.values()) {
      input.onmidimessage = (event) => {
        const pedal = pedalMessage(event.data);
        if (pedal !== null) {
          pedalMove(pedal, eventMs(event));
          return;
        }
        const m = noteMessage(event.data);
        if (!m) return;
        if (m.on) keyOn(m.pitch, m.velocity, eventMs(event));
        else keyOff(m.pitch, eventMs(event));
      };
    }
    showKeys();
  };
  keys.midi.onstatechange = listen;
  listen();
  const n = keys.midi.inputs.size;
  notice(n ? `MIDI keyboard connected: ${[...keys.midi.inputs.values()].map((i) => i.name).join(', ')}.` : 'No MIDI keyboard is connected yet: plug one in and it is used at once.');
  $('midi-connect').textContent = 'MIDI connected';
}

/** Starts a take at the playhead's bar (after a bar of count-in), or stops the one running. */
export async function toggleRecording() {
  if (keys.starting) return; // a take is getting ready (its count-in not begun)
  if (keys.take) return stopRecording();
  if (store.job) {
    notice('A generation is running: cancel it (Esc) before recording.');
    return;
  }
  run('stop-playback');
  const bpm = Math.min(240, Math.max(40, Number($('take-bpm').value) || 100));
  const piece = store.piece ?? emptyPiece({ bpm });
  const fromBar = store.piece ? barAt(piece, Math.min(run('playhead'), piece.bars.at(-1))) : 0;
  const fromTick = piece.bars[fromBar];
  const beat = secondsAt(piece, fromTick + piece.ppq) - secondsAt(piece, fromTick);
  const countIn = $('count-in').checked ? 4 : 0;
  // The samples, and for the live piano its models and a first reading of the piece, before
  // the count-in (another press of Record meanwhile does nothing).
  let live = null;
  keys.starting = true;
  try {
    if (!piano.loaded) {
      $('keys-status').textContent = 'Loading the piano…';
      await piano.load();
    }
    if ($('live-piano').checked) {
      $('keys-status').textContent = 'Getting the live piano ready…';
      try {
        live = await new LiveTake(piece, fromBar).start();
      } catch (e) {
        throw new Error(`The piano cannot play along live: ${e.message}`);
      }
    }
  } catch (e) {
    showError(e.message);
    showKeys();
    return;
  } finally {
    keys.starting = false;
  }
  const grid = Number($('quantise').value) > 0 ? piece.ppq / Number($('quantise').value) : 0;
  const startMs = performance.now() + (countIn * beat + 0.1) * 1000;
  live?.begin(startMs);
  const take = new Take({ piece, startTick: fromTick, startMs, grid });
  // The metronome: the count-in, then every beat while recording, scheduled a little ahead.
  let next = 0;
  const clicks = setInterval(() => {
    const ahead = (performance.now() - startMs) / 1000 + countIn * beat + 0.3;
    while (next * beat <= ahead) {
      const at = (startMs - performance.now()) / 1000 + (next - countIn) * beat;
      piano.click(at, (next - countIn) % 4 === 0);
      status.clicks = (status.clicks ?? 0) + 1;
      next++;
    }
  }, 50);
  // The music already there plays along from the take's start, its melody muted (the take
  // replaces it).
  const playAlong = store.piece && noteCount(store.piece) > 0
    ? setTimeout(() => {
      if (keys.take?.take !== take) return;
      // With the live piano, the old accompaniment is silent: the live one takes its place.
      piano.play(piece, { fromTick, tempo: 1, mute: { melody: true, accompaniment: !!live || $('mute-accompaniment').checked } });
      status.playingAlong = true;
    }, startMs - performance.now() - START_DELAY * 1000)
    : null;
  keys.take = { take, fromTick, piece, clicks, playAlong, fresh: !store.piece, live };
  status.recording = { fromTick, startMs };
  status.recordingBpm = 60 / beat;
  $('record').textContent = '■ Stop recording';
  $('record').classList.add('recording');
  showKeys();
}

async function stopRecording() {
  const { take, fromTick, piece, clicks, playAlong, fresh, live } = keys.take;
  keys.take = null;
  const endMs = performance.now();
  let played = null;
  if (live) {
    try {
      played = await live.stop();
    } catch (e) {
      notice(`The live piano's notes could not be kept (${e.message}).`);
    }
  }
  clearInterval(clicks);
  clearTimeout(playAlong);
  if (piano.playing) piano.stop();
  piano.setMute({ melody: $('mute-melody').checked });
  status.playingAlong = false;
  status.recording = null;
  $('record').textContent = '● Record';
  $('record').classList.remove('recording');
  for (const pitch of keys.down.values()) piano.noteOff(pitch);
  keys.down.clear();
  showKeys();
  const notes = take.notes(endMs);
  if (!notes.length) {
    notice('Nothing was played: the piece is as it was.');
    return;
  }
  let next = recordInto(piece, notes, fromTick, Math.max(...notes.map((n) => n[2])), take.pedalEvents(endMs));
  if (fresh) {
    // A new piece: its chords and phrases detected from what was played, as for a file (the
    // whole bars kept: the importer would cut the last one at the last note).
    try {
      const bytes = await call('writeMidi', { piece: next });
      const buffer = bytes.buffer;
      const detected = await call('readMidi', { bytes: buffer, name: next.name }, { transfer: [buffer] });
      const chordAt = new Map(detected.bars.map((tick, i) => [tick, detected.chords[i]]));
      next.chords = next.bars.map((tick, i) => chordAt.get(tick) ?? next.chords[i]);
      next.phrases = detected.phrases;
      fitPhrases(next);
      // A take is a melody alone: its chords are the harmonizer's where one is installed.
      const filled = await withLaneFilled(next);
      next = filled.piece;
      if (filled.problem) notice(`The harmonizer could not propose chords (${filled.problem}): they are detected.`);
    } catch (e) {
      notice(`Recorded; the chords could not be detected (${e.message}): set them in the chord lane.`);
    }
  }
  if (played) next = withLivePiano(next, played);
  setPiece(next);
  const withPiano = played ? ` and ${played.piano.length} live piano notes` : '';
  notice(`Recorded ${notes.length} notes into the melody${withPiano} from bar ${barAt(next, fromTick) + 1}. Undo (Ctrl+Z) takes the take back.`);
}

export function wirePlayIn() {
  $('record').addEventListener('click', toggleRecording);
  $('keys-toggle').addEventListener('click', () => setComputerKeys(!keys.computer));
  $('midi-connect').addEventListener('click', connectMidi);
  addEventListener('keydown', (e) => {
    if (!(keys.computer || keys.take) || e.ctrlKey || e.altKey || e.metaKey) return;
    if ($('label-dialog').open || e.target.closest?.('input, select, textarea, [contenteditable]')) return;
    const key = e.key.toLowerCase();
    if (key === 'escape' && keys.computer && !keys.take && !store.job) {
      setComputerKeys(false);
    } else if (key === 'z' || key === 'x') {
      keys.octave = Math.max(0, Math.min(8, keys.octave + (key === 'z' ? -1 : 1)));
      showKeys();
    } else {
      const pitch = computerKeyPitch(key, keys.octave);
      if (pitch === null) return;
      if (!e.repeat && !keys.down.has(key)) {
        keys.down.set(key, pitch);
        keyOn(pitch, 90, eventMs(e));
      }
    }
    e.preventDefault();
    e.stopImmediatePropagation();
  }, { capture: true });
  addEventListener('keyup', (e) => {
    const key = e.key.toLowerCase();
    const pitch = keys.down.get(key);
    if (pitch === undefined) return;
    keys.down.delete(key);
    keyOff(pitch, eventMs(e));
  }, { capture: true });
  addEventListener('blur', () => {
    for (const pitch of keys.down.values()) keyOff(pitch);
    keys.down.clear();
  });
}
