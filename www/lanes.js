// Editing the chord and phrase lanes: the dialog a click (or Enter) on a lane's bar opens, and
// the planned bars past the music that continuations follow. What a label may be is in labels.js.
import { $, app } from './page.js';
import { clonePiece, phraseIndex, setBarCount, setPhrase } from './piece.js';
import {
  CHORD_CHOICES, LABEL_HELP, chordCell, labelError, labelProblems, labelTitle, plannedBars,
} from './labels.js';
import { setPiece } from './piece-view.js';

/** Opens the dialog for the `kind` ('chord' or 'phrase') label of bar `bar`. */
export function editLabel(kind, bar) {
  if (!app.piece || app.generating) return;
  const dialog = $('label-dialog');
  const input = $('label-input');
  const planned = bar >= app.piece.promptBars;
  $('label-error').textContent = '';
  $('label-split-row').hidden = kind !== 'phrase';
  $('label-split').checked = false;
  $('label-title').textContent = labelTitle(kind, bar, planned);
  $('label-help').textContent = LABEL_HELP[kind === 'chord' ? 'chord' : 'phrase'];
  if (kind === 'chord') {
    input.value = app.piece.chords[bar] ?? '';
  } else {
    const { index } = phraseIndex(app.piece, bar);
    input.value = app.piece.phrases[index]?.[0] ?? 'A';
  }
  dialog.onclose = () => {
    if (dialog.returnValue !== 'ok') return;
    const next = clonePiece(app.piece);
    if (kind === 'chord') next.chords[bar] = chordCell(input.value);
    else setPhrase(next, bar, input.value.trim(), $('label-split').checked);
    setPiece(next, { keepView: true });
  };
  $('label-ok').onclick = (e) => {
    const value = input.value.trim();
    const bad = labelProblems(kind, value);
    if (bad.length) {
      e.preventDefault();
      $('label-error').textContent = labelError(kind, bad);
    }
  };
  dialog.showModal();
  input.select();
}

/** Wires the planned-bars field and the dialog's chord suggestions. */
export function wireLanes() {
  $('plan-bars').addEventListener('change', (e) => {
    if (!app.piece) return;
    const n = plannedBars(e.target.value);
    const next = clonePiece(app.piece);
    setBarCount(next, next.promptBars + n);
    setPiece(next, { keepView: true });
  });
  $('chord-list').replaceChildren(...CHORD_CHOICES.map((c) => new Option(c)));
}
