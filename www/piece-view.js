// The piece on the page: the piano roll (roll.js) and the track list under it, making a piece
// the current one (with undo and redo), notes edited in the roll (and the lanes refilled where
// they were detected from those notes), saving it for the next visit, opening a MIDI file or the example,
// and which of the page's buttons can be pressed.
import { $, status, MAX_FILE_BYTES, showError, notice } from './page.js';
import { call } from './worker-client.js';
import { clonePiece } from './piece.js';
import { emptyPiece } from './keys.js';
import { PianoRoll } from './roll.js';
import { saveWork } from './store.js';
import { barsUnder, chordSourceText, harmonizerEntry, hasNotes, hasPiano } from './generation-plan.js';
import { describeRoles, pieceTitle } from './page-text.js';
import { command, run } from './commands.js';
import { settings } from './settings.js';
import { emit, on } from './events.js';
import { relabelled, withLaneFilled } from './harmonizer.js';
import {
  on as onStore,
  redo as redoPiece,
  remember,
  setPiece,
  store,
  undo as undoPiece,
  setLoop,
} from './page-store.js';

export const roll = new PianoRoll($('roll'), {
  onChordClick: (bar) => emit('label-click', 'chord', bar),
  onPhraseClick: (bar) => emit('label-click', 'phrase', bar),
  onSeek: (tick) => run('seek', tick),
  onSelect: (from, to) => setLoop(from == null ? null : [from, to]),
  onEdit: (piece, { touched }) => editNotes(piece, touched),
  onNotice: (text) => notice(text),
  quantise: () => Number($('quantise').value),
});
on('model-shown', () => updateButtons());
// A loop selection made or cleared: "Regenerate these bars" and the like follow it.
onStore('loop', () => updateButtons());
command('update-buttons', () => updateButtons());
command('show-piece', () => showPiece());
command('selected-bars', () => selectedBars());
command('roll-playhead', (tick) => roll.setPlayhead(tick));
// A generation draws the piece as it writes it, and the bars still to come.
command('roll-draft', (draft) => {
  roll.setPiece(draft); // with no loop selection
  setLoop(null);
});
command('roll-generating', (range) => {
  roll.setGenerating(range);
  if (range) roll.update();
});

// Where the roll shows a tick and pitch (or a velocity, in the lane under it), in client px: the
// e2e test draws and drags with the mouse there.
status.rollPoint = (tick, pitch) => roll.clientPoint(tick, pitch);
status.velocityPoint = (tick, velocity) => roll.clientPoint(tick, null, velocity);
status.pedalPoint = (tick) => roll.pedalPoint(tick);
status.selectedNotes = () => roll.selectedNotes();

export { remember, setPiece };

// What follows a new current piece: a fresh one ends a comparison, an edit while comparing
// stays with the result it was made on; the roll and the track list show it; it is saved.
onStore('piece', ({ piece, keepView, fresh, edit }) => {
  if (fresh) emit('leave-compare');
  else if (edit && store.comparison) store.comparison.edited(piece);
  if (keepView) {
    roll.replacePiece(piece);
  } else {
    roll.setPiece(piece); // with no loop selection
    setLoop(null);
  }
  showPiece();
  save();
});

export function showPiece() {
  const p = store.piece;
  $('empty').hidden = !!p;
  $('roll').hidden = !p;
  $('roll-tools').hidden = !p;
  $('piece-name').textContent = pieceTitle(p);
  $('plan-bars').value = p ? p.bars.length - p.promptBars : 0;
  $('chord-source').textContent = chordSourceText(p);
  showTracks();
  updateButtons();
}

function showTracks() {
  const list = $('tracks');
  list.replaceChildren();
  for (const [i, track] of (store.piece?.tracks ?? []).entries()) {
    const li = document.createElement('li');
    li.className = `track role-${track.role}`;
    const swatch = document.createElement('span');
    swatch.className = 'swatch';
    swatch.setAttribute('aria-hidden', 'true');
    const name = document.createElement('span');
    name.textContent = `${track.name} (${track.notes.length} notes)`;
    const select = document.createElement('select');
    select.setAttribute('aria-label', `Role of track ${track.name}`);
    for (const role of ['melody', 'bridge', 'piano', 'generated', 'other']) {
      const o = new Option(role === 'piano' ? 'accompaniment' : role, role);
      select.add(o);
    }
    select.value = track.role;
    select.addEventListener('change', () => {
      const next = clonePiece(store.piece);
      next.tracks[i].role = select.value;
      setPiece(next, { keepView: true });
    });
    li.append(swatch, name, select);
    list.append(li);
  }
}

/** The bars `[from, to)` under the roll's loop selection, or null. */
export function selectedBars() {
  return barsUnder(store.piece?.bars, store.loop);
}

export function updateButtons() {
  const has = !!store.piece;
  const busy = !!store.job;
  $('download-midi').disabled = !has;
  $('download-lead-sheet').disabled = !has;
  $('download-score').disabled = !has;
  $('export-wav').disabled = !has;
  $('share').disabled = !has;
  $('play').disabled = !has;
  $('undo').disabled = !store.canUndo || busy;
  $('redo').disabled = !store.canRedo || busy;
  $('edit-notes').disabled = !has;
  $('generate').disabled = !has || busy || !status.backend || !$('model').value;
  $('suggest-chords').disabled = !has || busy || !status.backend || !harmonizerEntry(store.manifest);
  $('regen-bars').disabled = $('generate').disabled || !selectedBars()
    || ({ accompaniment: !hasPiano(store.piece), melody: false }[settings().task] ?? !hasNotes(store.piece));
  $('use-texture').disabled = !has || busy || !selectedBars() || !hasPiano(store.piece);
  $('repedal').disabled = !has || busy || !status.backend || !selectedBars() || !hasPiano(store.piece) || !store.pedal;
  $('cancel').disabled = !busy;
  $('compare').disabled = !has || busy || !status.backend || !$('compare-model').value;
  emit('buttons');
  $('example').disabled = busy;
  $('file-input').disabled = busy;
}

/** Keeps the piece and the panel's settings for the next visit (store.js). */
export function save() {
  if (!store.piece) return;
  saveWork({ piece: store.piece, settings: settings() });
}

export function undo() {
  if (!store.canUndo || store.job) return;
  emit('leave-compare');
  undoPiece();
  notice('Undone.');
}

export function redo() {
  if (!store.canRedo || store.job) return;
  emit('leave-compare');
  redoPiece();
  notice('Redone.');
}

let pendingBars = null; // bars whose notes were edited since the lanes were last refilled
let relabelTimer = 0;
let lastEdited = null; // the piece the last note edit made (its lanes refilled, once they are)
let refilling = false; // the harmonizer is reading edited bars

/** The lanes' refill after note edits: 'idle', 'due' (edits wait for it) or 'reading'. */
export const lanesRefill = () => (refilling ? 'reading' : pendingBars ? 'due' : 'idle');
const spanOf = (a, b) => (a && b ? [Math.min(a[0], b[0]), Math.max(a[1], b[1])] : (a ?? b));

/**
 * A note edit from the roll: the new piece becomes the current one (one Undo away); a moment
 * after the last of a run of edits, the chords and phrases detected from the edited bars are
 * filled again (harmonizer.js `relabelled`), into the same Undo step.
 */
export function editNotes(piece, touched) {
  if (store.job) {
    notice('A generation is running: edit the notes when it is done (or cancel it with Esc).');
    roll.replacePiece(store.piece);
    return;
  }
  setPiece(piece, { keepView: true });
  lastEdited = piece;
  if (!touched) return;
  pendingBars = spanOf(pendingBars, touched);
  scheduleRefill();
}

function scheduleRefill() {
  clearTimeout(relabelTimer);
  relabelTimer = setTimeout(refillLanes, 400);
}

async function refillLanes() {
  const bars = pendingBars;
  const piece = store.piece;
  if (!bars || !piece || store.job || piece !== lastEdited) {
    pendingBars = null; // a generation, an undo or another piece came after the edits
    return;
  }
  if (!status.backend) {
    // The models are still loading: the edited bars wait for them (not on a page that failed).
    if (status.state !== 'error') scheduleRefill();
    return;
  }
  pendingBars = null;
  refilling = true;
  try {
    const next = await relabelled(piece, bars);
    if (store.piece !== piece || store.job) {
      // Another edit came while the harmonizer read this one: its refill takes these bars too
      // (else they would keep the lanes of before, however slowly the harmonizer answered).
      if (store.piece === lastEdited && !store.job) {
        pendingBars = spanOf(pendingBars, bars);
        scheduleRefill();
      }
      return;
    }
    if (next === piece) return;
    setPiece(next, { undoable: false, keepView: true });
    lastEdited = next; // the same edit, its lanes filled: bars still owed refill on it
  } catch (e) {
    notice(`The chord lane was not refreshed after the edit (${e.message}).`);
  } finally {
    refilling = false;
  }
}

/** Turns note editing in the roll on or off (the "Edit notes" button, E). */
export function setEditing(on) {
  const button = $('edit-notes');
  button.setAttribute('aria-pressed', String(!!on));
  roll.setEditing(on);
  if (on) {
    roll.roll.focus({ preventScroll: true });
    notice('Editing notes: click to draw (drag for length), drag a note to move it or its end to lengthen it, Shift+drag to select; Delete, arrows, [ ], N, Ctrl+C/V/D — see the help.');
  }
}

/** A new empty piece to write into with the mouse and keyboard (8 bars of 4/4). */
export function newPiece() {
  if (store.job) return;
  const bpm = Math.min(240, Math.max(40, Number($('take-bpm').value) || 100));
  setPiece(emptyPiece({ bpm, name: 'new piece.mid' }), { fresh: true });
  setEditing(true);
}

export async function openFile(file) {
  if (store.job) {
    notice('A generation is running: cancel it (Esc) before opening another file.');
    return;
  }
  const score = /\.(musicxml|mxl|xml)$/i.test(file.name);
  if (!score && !/\.(mid|midi|kar|smf)$/i.test(file.name) && !/midi/.test(file.type)) {
    showError(`${file.name} is not a MIDI file (.mid or .midi) or a MusicXML score (.musicxml, .mxl or .xml).`);
    return;
  }
  if (file.size > MAX_FILE_BYTES) {
    showError(`${file.name} is ${(file.size / 1e6).toFixed(1)} MB; pianoformer opens MIDI files up to 8 MB.`);
    return;
  }
  try {
    const bytes = await file.arrayBuffer();
    const read = await call(score ? 'readMusicXml' : 'readMidi', { bytes, name: file.name }, { transfer: [bytes] });
    // A score's chord symbols are its lane, as written.
    const { piece, problem } = read.chordSource === 'score' ? { piece: read, problem: null } : await withLaneFilled(read);
    setPiece(piece, { fresh: true });
    $('error').hidden = true;
    const chords = problem ? ` The harmonizer could not propose chords (${problem}): they are detected.` : '';
    notice(`Opened ${file.name}: ${describeRoles(piece)}.${chords}`);
  } catch (e) {
    showError(e.message);
  }
}

export async function openExample() {
  try {
    const bytes = await call('exampleMidi', { key: 0, bars: 16 });
    const buffer = bytes.buffer;
    const read = await call('readMidi', { bytes: buffer, name: 'example.mid' }, { transfer: [buffer] });
    const { piece } = await withLaneFilled(read);
    setPiece(piece, { fresh: true });
    notice('The example: a melody on a I–V–vi–IV progression, written by pianoformer itself.');
  } catch (e) {
    showError(e.message);
  }
}
