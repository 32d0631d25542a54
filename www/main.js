// Main thread: starts the page. The models run in a Worker (worker-client.js drives it); this
// file wires the page's controls to the modules that own them, restores the last visit's piece
// (or opens a share link), and says when the page is ready.
//
// The page's state is the page store's (page-store.js: the piece and its history, the job,
// the models, the comparison, the loop selection), which tells its listeners what changed;
// page.js holds the `window.pianoformer` status and the messages. The panels, each with its
// own part of the page: backend-card.js, models.js, piece-view.js (the roll, the current
// piece, the buttons), lanes.js, plan-song.js (a song from a plan), generate.js,
// alternatives.js (the alternatives offered after a generation), compare-panel.js,
// attention-panel.js, playback.js, play-in.js, sharing.js, tune.js. They import the store, the Worker client
// (worker-client.js), services (model-loader.js, harmonizer.js, sound.js, attention-view.js)
// and their own helpers, never each other: one panel runs another's work by its command
// (commands.js). Their pure parts (no DOM, tested under Node) are page-text.js,
// generation-plan.js, labels.js and roll-geometry.js. None does anything when it is imported
// beyond making its own view objects: everything starts from start() below.
import { $, status, t0, params, preference, setState, showError, notice } from './page.js';
import { store, forgetLoaded } from './page-store.js';
import { withPageMarks } from './piece.js';
import { call, drill, startWorker, setWorkerHandlers, workerBackend } from './worker-client.js';
import { showBackend, showCheck, showCached, showRace, keepOffline } from './backend-card.js';
import { loadManifest, showModels, showModelAbout, currentEntry, ensureModel, pedalText, prefetchModel } from './models.js';
import {
  roll, setPiece, updateButtons, save, undo, redo, openFile, openExample, selectedBars, setEditing, newPiece, lanesRefill,
} from './piece-view.js';
import { wireLanes } from './lanes.js';
import { wirePlanSong } from './plan-song.js';
import { wireAlternatives } from './alternatives.js';
import { generate, cancel } from './generate.js';
import { applySettings, settings } from './settings.js';
import { chosenText, fillTextureMenu, setChosenTexture } from './texture.js';
import { applyLimits } from './options.js';
import { compare, showCompared } from './compare-panel.js';
import { attention, followAttention, refreshAttention, showTemplate } from './attention-panel.js';
import { piano, mutes, togglePlayback, startPlayback, exportWav } from './playback.js';
import { keys, setComputerKeys, toggleRecording, wirePlayIn } from './play-in.js';
import { downloadMidi, downloadMusicXml, share, openShared } from './sharing.js';
import { initTuning, restoreTuning } from './tune.js';
import { command } from './commands.js';
import { clearModelCache, flushWork, loadWork, clearWork, workPending } from './store.js';

status.attentionBlank = () => attention.isBlank();
status.attentionMarks = () => attention.marks;
status.wasmBytes = () => call('memory');
// States tests wait for instead of times: a change still to be saved, the lanes' refill.
status.workPending = workPending;
status.lanesRefill = lanesRefill;
if (params.has('drill')) status.loseDevice = () => drill('lose-device');

let backendUp = false; // the Worker's session is up
let startedUp = false; // the page has restored what it restores (the last piece, a link)

setWorkerHandlers({
  backend(backend, ms) {
    showBackend(backend, ms);
    backendUp = true;
    whenReady();
    updateButtons();
  },
  check(report, ms) {
    if (!showCheck(report, ms)) return;
    updateButtons();
    keepOffline();
  },
  race: (race) => showRace(race),
});

// Ready once the backend is up and the last visit's piece is back: the self-check's result
// follows (and stops the page if it fails).
function whenReady() {
  if (status.state === 'loading' && backendUp && startedUp) {
    setState('ready');
    // The chosen model comes in now, so that the first Generate does not wait for it.
    const entry = currentEntry();
    if (entry) {
      ensureModel(entry)
        .then(() => {
          status.modelReadyMs ??= performance.now() - t0;
        })
        .catch(() => {
          // Said again, in words, when Generate needs it.
        });
    }
  }
  updateButtons();
}

function wire() {
  applyLimits(document); // the settings' ranges, steps and defaults (settings/options.json)
  $('backend-select').value = preference;
  $('backend-select').addEventListener('change', (e) => {
    localStorage.setItem('pianoformer.backend', e.target.value);
    const url = new URL(location.href);
    url.searchParams.set('backend', e.target.value);
    flushWork().finally(() => location.assign(url));
  });
  $('error-close').addEventListener('click', () => {
    $('error').hidden = true;
  });
  $('file-input').addEventListener('change', (e) => {
    const file = e.target.files?.[0];
    if (file) openFile(file);
    e.target.value = '';
  });
  $('example').addEventListener('click', openExample);
  $('undo').addEventListener('click', undo);
  $('redo').addEventListener('click', redo);
  $('new-piece').addEventListener('click', newPiece);
  wirePlanSong();
  $('edit-notes').addEventListener('click', () => setEditing($('edit-notes').getAttribute('aria-pressed') !== 'true'));
  $('download-midi').addEventListener('click', downloadMidi);
  $('download-lead-sheet').addEventListener('click', () => downloadMusicXml(true));
  $('download-score').addEventListener('click', () => downloadMusicXml(false));
  $('export-wav').addEventListener('click', exportWav);
  $('share').addEventListener('click', share);
  $('zoom-in').addEventListener('click', () => roll.zoomIn());
  $('zoom-out').addEventListener('click', () => roll.zoomOut());
  $('zoom-fit').addEventListener('click', () => roll.fit());
  wireLanes(); // the planned bars and the chord suggestions
  wireAlternatives(); // the strip of alternatives to audition and keep
  $('task').addEventListener('change', () => {
    showModels();
    save();
  });
  $('model').addEventListener('change', () => {
    showModelAbout();
    showTemplate();
    followAttention(); // the map of the model chosen, once it is loaded
    save();
  });
  for (const id of ['att-layer', 'att-head']) {
    $(id).addEventListener('change', () => {
      // Compared results kept the old head's maps: each draws the new one when shown.
      if (store.comparison) store.comparison.a.attention = store.comparison.b.attention = null;
      // The map first: the Worker answers in order, and the template is the smaller picture.
      refreshAttention();
      showTemplate();
      save();
    });
  }
  for (const id of ['seed', 'threshold', 'piano-temperature', 'temperature', 'echo', 'texture-echo', 'texture', 'key-hold', 'density', 'alternatives', 'chord-colour', 'length', 'max-tokens', 'read-all']) {
    $(id).addEventListener('change', save);
  }
  $('reseed').addEventListener('click', () => {
    $('seed').value = String(Math.floor(Math.random() * 1e9));
    save();
  });
  $('generate').addEventListener('click', () => generate());
  $('regen-bars').addEventListener('click', () => {
    const region = selectedBars();
    if (region) generate({ region });
  });
  fillTextureMenu($('texture'), '');
  $('use-texture').addEventListener('click', useTexture);
  $('repedal').addEventListener('click', repedalBars);
  $('compare').addEventListener('click', compare);
  $('compare-model').addEventListener('change', (e) => {
    e.target.dataset.picked = e.target.value;
    updateButtons();
  });
  $('compare-a').addEventListener('click', () => showCompared('a'));
  $('compare-b').addEventListener('click', () => showCompared('b'));
  $('cancel').addEventListener('click', cancel);
  $('play').addEventListener('click', togglePlayback);
  $('tempo').addEventListener('input', () => {
    $('tempo-value').textContent = `${$('tempo').value} %`;
  });
  $('tempo').addEventListener('change', () => {
    save();
    if (piano.playing) startPlayback();
  });
  $('pedal').addEventListener('change', () => {
    save();
    if (piano.playing) startPlayback();
  });
  for (const id of ['mute-melody', 'mute-accompaniment']) {
    $(id).addEventListener('change', () => piano.setMute(mutes()));
  }
  $('clear-cache').addEventListener('click', async () => {
    const n = await clearModelCache();
    forgetLoaded();
    startWorker(workerBackend());
    notice(`Removed ${n} cached model file${n === 1 ? '' : 's'}; they download again when used.`);
    showCached();
  });
  $('clear-work').addEventListener('click', async () => {
    await clearWork();
    notice('The saved piece is forgotten; the one on screen stays until you reload.');
  });
  wireDrop();
  wireKeys();
  wirePlayIn();
  addEventListener('pagehide', () => {
    // IndexedDB may not finish while the page unloads; localStorage is written at once.
    if (store.piece) {
      try {
        localStorage.setItem(
          'pianoformer.lastWork',
          JSON.stringify({ savedAt: Date.now(), state: { piece: store.piece, settings: settings() } }),
        );
      } catch {
        // Too large for localStorage: IndexedDB (below) usually has it.
      }
    }
    save();
    flushWork();
  });
}

function wireDrop() {
  const overlay = $('drop-overlay');
  let depth = 0;
  const hasFiles = (e) => [...(e.dataTransfer?.types ?? [])].includes('Files');
  addEventListener('dragenter', (e) => {
    if (!hasFiles(e)) return;
    depth++;
    overlay.hidden = false;
  });
  addEventListener('dragleave', () => {
    depth = Math.max(0, depth - 1);
    if (!depth) overlay.hidden = true;
  });
  addEventListener('dragover', (e) => {
    if (hasFiles(e)) e.preventDefault();
  });
  addEventListener('drop', (e) => {
    e.preventDefault();
    depth = 0;
    overlay.hidden = true;
    const file = e.dataTransfer?.files?.[0];
    if (file) openFile(file);
  });
}

function wireKeys() {
  addEventListener('keydown', (e) => {
    if ($('label-dialog').open || $('plan-dialog').open) return;
    const typing = e.target.closest?.('input, select, textarea, [contenteditable]');
    if (e.key === 'Escape' && store.job) {
      cancel();
      e.preventDefault();
      return;
    }
    if (typing || e.altKey || e.metaKey) return;
    if (e.ctrlKey && (e.key.toLowerCase() === 'y' || (e.shiftKey && e.key.toLowerCase() === 'z'))) {
      redo();
      e.preventDefault();
    } else if (e.ctrlKey && e.key.toLowerCase() === 'z') {
      undo();
      e.preventDefault();
    } else if (e.ctrlKey) {
      return;
    } else if (e.key === ' ' && !e.target.closest?.('button')) {
      togglePlayback();
      e.preventDefault();
    } else if (e.key.toLowerCase() === 'r' && !e.repeat) {
      toggleRecording();
      e.preventDefault();
    } else if (e.key.toLowerCase() === 'k' && !e.repeat) {
      setComputerKeys(!keys.computer);
      e.preventDefault();
    } else if (e.key.toLowerCase() === 'e' && !e.repeat && !keys.computer && !$('edit-notes').disabled) {
      setEditing($('edit-notes').getAttribute('aria-pressed') !== 'true');
      e.preventDefault();
    } else if (e.key.toLowerCase() === 'g' && !$('generate').disabled) {
      generate();
      e.preventDefault();
    }
  });
}

async function start() {
  wire();
  // A fine-tuned model chosen in the Fine-tune panel goes to the Generate panel.
  command('use-model', (entry) => {
    $('task').value = entry.task.toLowerCase();
    showModels(entry.name);
    save();
    $('gen-title').scrollIntoView({ behavior: 'smooth', block: 'start' });
    notice(`${entry.name} is chosen in the Generate panel.`);
  });
  initTuning();
  startWorker(preference);
  await loadManifest();
  // The chosen model's bytes come while the Worker starts; it loads them once it is up.
  prefetchModel(currentEntry());
  await restoreTuning();
  const shared = await openShared().catch(() => false);
  if (!shared) {
    let work = await loadWork();
    try {
      const last = JSON.parse(localStorage.getItem('pianoformer.lastWork') ?? 'null');
      if (last?.state?.piece) work = last.state;
      localStorage.removeItem('pianoformer.lastWork');
    } catch {
      // Unreadable: the IndexedDB copy stands.
    }
    if (work?.piece) {
      try {
        await call('checkPiece', { piece: work.piece });
        applySettings(work.settings, showModels);
        setPiece(work.piece, { undoable: false, fresh: true });
        notice(`Restored ${work.piece.name} from your last visit.`);
      } catch (e) {
        notice(`The piece saved from your last visit could not be restored (${e.message}).`);
      }
    }
  }
  showCached();
  showTemplate();
}

window.addEventListener('error', (e) => showError(`Unexpected error: ${e.message}`));
window.addEventListener('unhandledrejection', (e) =>
  showError(`Unexpected error: ${e.reason?.message ?? e.reason}`),
);
start().finally(() => {
  startedUp = true;
  whenReady();
});

/** "Use as texture": the selected bars of the piano part become the Texture menu's choice. */
/** "Pedal these bars": the piano part's pedal over the selected bars, learnt again (one Undo). */
async function repedalBars() {
  const bars = selectedBars();
  if (!bars || !store.piece) return;
  try {
    const pedal = await pedalText();
    if (!pedal) throw new Error('the page has no pedal model');
    const next = await call('repedal', { piece: store.piece, from: bars[0], to: bars[1], pedal });
    setPiece(withPageMarks(next, store.piece), { keepView: true });
    $('gen-status').textContent = `Pedalled bars ${bars[0] + 1}–${bars[1]} again; Undo (Ctrl+Z) takes it back.`;
  } catch (e) {
    $('gen-status').textContent = `Those bars could not be pedalled: ${e?.message ?? e}`;
  }
}

async function useTexture() {
  const bars = selectedBars();
  if (!bars || !store.piece) return;
  try {
    const donor = await call('textureFrom', { piece: store.piece, from: bars[0], to: bars[1] });
    setChosenTexture(donor);
    fillTextureMenu($('texture'), 'chosen');
    $('gen-status').textContent = chosenText(donor);
    save();
  } catch (e) {
    $('gen-status').textContent = `Those bars cannot be the texture: ${e?.message ?? e}`;
  }
}
