// Editing the chord and phrase lanes: the dialog a click (or Enter) on a lane's bar opens, the
// planned bars past the music that continuations follow, and "Suggest chords" (the
// harmonizer's progression for the selected bars). What a label may be is in labels.js.
import { $, notice, showError } from './page.js';
import { clonePiece, phraseIndex, setBarCount, setPhrase } from './piece.js';
import {
  CHORD_CHOICES, LABEL_HELP, chordChart, labelError, labelProblems, labelTitle, plannedBars,
} from './labels.js';
import { endJob, setPiece, startJob, store } from './page-store.js';
import { command, run } from './commands.js';
import { harmonized, harmonizedAlternatives } from './harmonizer.js';
import { settings } from './settings.js';
import { on } from './events.js';

on('label-click', (kind, bar) => editLabel(kind, bar));

/** Opens the dialog for the `kind` ('chord' or 'phrase') label of bar `bar`. */
export function editLabel(kind, bar) {
  if (!store.piece || store.job) return;
  const dialog = $('label-dialog');
  const input = $('label-input');
  const planned = bar >= store.piece.promptBars;
  $('label-error').textContent = '';
  $('label-split-row').hidden = kind !== 'phrase';
  $('label-split').checked = false;
  $('label-title').textContent = labelTitle(kind, bar, planned);
  $('label-help').textContent = LABEL_HELP[kind === 'chord' ? 'chord' : 'phrase'];
  if (kind === 'chord') {
    input.value = store.piece.chords[bar] ?? '';
  } else {
    const { index } = phraseIndex(store.piece, bar);
    input.value = store.piece.phrases[index]?.[0] ?? 'A';
  }
  dialog.onclose = () => {
    if (dialog.returnValue !== 'ok') return;
    const next = clonePiece(store.piece);
    if (kind === 'chord') {
      // A chart (`C | G | Am`) fills the bars from this one on, planning bars past the end.
      const cells = chordChart(input.value);
      if (bar + cells.length > next.bars.length) setBarCount(next, bar + cells.length);
      cells.forEach((cell, i) => { next.chords[bar + i] = cell; });
      markChordsSet(next, bar, bar + cells.length);
    } else {
      setPhrase(next, bar, input.value.trim(), $('label-split').checked);
      next.phrasesSet = true;
    }
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

/**
 * Records that the person chose the chords of bars [from, to) (in the dialog, or by accepting
 * "Suggest chords"): editing notes there no longer refills them.
 */
export function markChordsSet(piece, from, to) {
  const set = new Set(piece.chordsSet ?? []);
  for (let bar = from; bar < to; bar++) set.add(bar);
  piece.chordsSet = [...set].sort((a, b) => a - b);
}

/** Wires the planned-bars field, the dialog's chord suggestions and "Suggest chords". */
export function wireLanes() {
  $('plan-bars').addEventListener('change', (e) => {
    if (!store.piece) return;
    const n = plannedBars(e.target.value);
    const next = clonePiece(store.piece);
    setBarCount(next, next.promptBars + n);
    setPiece(next, { keepView: true });
  });
  $('chord-list').replaceChildren(...CHORD_CHOICES.map((c) => new Option(c)));
  $('suggest-chords').addEventListener('click', suggestChords);
}

let suggestions = 0; // presses of "Suggest chords" on this page: each is another alternative

/**
 * "Suggest chords": the harmonizer's progression for the selected bars (every bar without a
 * selection), one Undo away. The first press on a lane the detector filled is the most likely
 * progression; every later press draws another alternative. With Alternatives above 1, the
 * strip under the roll offers that many to audition and keep (alternatives.js).
 */
export async function suggestChords() {
  const piece = store.piece;
  if (!piece || store.job) return;
  const bars = run('selected-bars');
  const { alternatives: asked, chordColour: colour } = settings();
  const count = asked ?? 1;
  const first = suggestions === 0 && piece.chordSource !== 'harmonizer';
  suggestions += 1;
  const seed = first ? null : suggestions;
  const where = bars ? `bars ${bars[0] + 1}–${bars[1]}` : 'the whole piece';
  const job = { id: null, task: 'chords', cancelled: false };
  startJob(job);
  run('update-buttons');
  try {
    if (count > 1) {
      // The most likely first whatever the press: the others are drawn with this press's seed.
      const alternatives = await harmonizedAlternatives(piece, { bars, seed: suggestions, count });
      endJob(job);
      run('update-buttons');
      if (job.cancelled || store.piece !== piece) return;
      offerChords(piece, alternatives, bars, where);
      return;
    }
    const next = await harmonized(piece, { bars, seed, colour });
    endJob(job);
    run('update-buttons');
    // Cancelled, or another piece came meanwhile: the lane stays as it is.
    if (job.cancelled || store.piece !== piece) return;
    markChordsSet(next, ...(bars ?? [0, next.promptBars]));
    setPiece(next, { keepView: true });
    notice(`Chords for ${where} from the harmonizer (${first ? 'its most likely progression' : `alternative ${suggestions}`}). Undo takes them back; press again for another.`);
  } catch (e) {
    endJob(job);
    run('update-buttons');
    showError(`No chords could be suggested: ${e.message}`);
  }
}

/**
 * The strip of chord alternatives for `bars` of `base` (from `harmonizedAlternatives`): each
 * its chart and its odds against the first; heard with its chords as block chords beside the
 * melody; kept as the lane (one Undo).
 */
function offerChords(base, alternatives, bars, where) {
  const best = alternatives[0].logProb;
  const odds = (x) => (x < 10 ? x.toFixed(1) : x < 1e4 ? String(Math.round(x)) : x.toExponential(0));
  const n = alternatives.length;
  run('show-alternatives', {
    base,
    kind: 'chords',
    caption: `${n} progression${n === 1 ? '' : 's'} for ${where}, the most likely first.`,
    playFrom: bars ? base.bars[bars[0]] ?? 0 : 0,
    items: alternatives.map((a, i) => ({
      piece: a.piece,
      text: a.cells.join(' | '),
      // How much less likely than the first, as the decode's odds.
      hint: i === 0 ? 'most likely' : `1 : ${odds(Math.exp(best - a.logProb))}`,
      heard: { ...a.piece, tracks: [...a.piece.tracks, { name: 'CHORDS', role: 'other', program: 0, notes: a.voicing }] },
    })),
    keep: (i) => {
      const next = alternatives[i].piece;
      markChordsSet(next, ...(bars ?? [0, next.promptBars]));
      setPiece(next, { keepView: true });
      notice(`Chords for ${where} from the harmonizer (alternative ${i + 1} of ${n}). Undo takes them back.`);
    },
  });
}
