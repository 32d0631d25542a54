// Listening: the sampled piano (audio.js) playing the piece from the playhead or around the loop
// selection, at the panel's tempo and mutes, the playhead following the sound, and the WAV
// export with the same voices.
import { $, status, showError, download } from './page.js';
import { store } from './page-store.js';
import { piano } from './sound.js';
import { exportName } from './page-text.js';
import { command, run } from './commands.js';

export { piano };

command('stop-playback', () => stopPlayback());
// An audition: `piece` (not the page's) from its start, or around the loop selection.
command('play-piece', (piece) => startPlayback(piece));
command('seek', (tick) => seek(tick));
command('playhead', () => playhead);
// After the piece changed under it (a comparison's other side): from the playhead again.
command('restart-playback', () => {
  if (piano.playing) startPlayback();
});
let playFrame = 0;
let playhead = 0; // where playback starts (ticks), and where it is while it plays

/** The mute checkboxes, as the piano takes them. */
export function mutes() {
  return { melody: $('mute-melody').checked, accompaniment: $('mute-accompaniment').checked };
}

/** Whether the sampler plays the tracks' sustain pedal (the Sustain pedal box). */
export function pedalOn() {
  return $('pedal').checked;
}

/** Moves the playhead to `tick` (playback, if on, goes on from there). */
export function seek(tick) {
  playhead = tick;
  run('roll-playhead', tick);
  if (piano.playing) startPlayback();
}

export async function togglePlayback() {
  if (piano.playing) stopPlayback();
  else await startPlayback();
}

/**
 * (Re)starts playback of `piece` (the page's by default): the loop selection if Loop is on,
 * else from the playhead to the end.
 */
export async function startPlayback(piece = store.piece) {
  if (!piece) return;
  try {
    if (!piano.loaded) {
      $('play-status').textContent = 'Loading the piano…';
      await piano.load((loaded, total) => {
        $('play-status').textContent = `Loading the piano: ${loaded} of ${total} samples`;
      });
      $('play-status').textContent = '';
    }
    const selection = store.loop;
    const loop = $('loop').checked && !!selection;
    const [fromTick, toTick] = loop ? selection : [playhead >= piece.endTick ? 0 : playhead, Infinity];
    piano.play(piece, {
      fromTick,
      toTick,
      loop,
      tempo: Number($('tempo').value) / 100,
      mute: mutes(),
      pedal: pedalOn(),
      onEnd: () => {
        playhead = 0;
        stopPlayback();
      },
    });
    $('play').textContent = '■ Stop';
    status.playing = true;
    cancelAnimationFrame(playFrame);
    const follow = () => {
      const tick = piano.positionTick();
      if (tick !== null) {
        run('roll-playhead', tick);
        playhead = tick;
        playFrame = requestAnimationFrame(follow);
      }
    };
    playFrame = requestAnimationFrame(follow);
  } catch (e) {
    $('play-status').textContent = '';
    showError(e.message);
  }
}

export function stopPlayback() {
  if (piano.playing) piano.stop();
  cancelAnimationFrame(playFrame);
  $('play').textContent = '▶ Play';
  status.playing = false;
}

/** Renders the piece, at the tempo and without the muted parts, into a WAV download. */
export async function exportWav() {
  const button = $('export-wav');
  button.disabled = true;
  $('play-status').textContent = 'Rendering the WAV file…';
  try {
    if (!piano.loaded) await piano.load();
    const blob = await piano.renderWav(store.piece, {
      tempo: Number($('tempo').value) / 100,
      mute: mutes(),
      pedal: pedalOn(),
    });
    download(blob, exportName(store.piece, 'wav'));
    $('play-status').textContent = `WAV: ${(blob.size / 1e6).toFixed(1)} MB.`;
  } catch (e) {
    $('play-status').textContent = '';
    showError(e.message);
  } finally {
    button.disabled = !store.piece;
  }
}
