// The chord alternatives strip under the roll: "Suggest chords" with Alternatives above 1 shows
// the harmonizer's progressions for the bars, the most likely first, each as a chord chart with
// its probability. Keys 1–8 (or a row's Play) audition one: the piece sounds with that
// progression in its lane and its chords as block chords beside the melody; Enter (or Keep)
// makes it the piece's lane as one undoable edit; Esc (or Keep none) leaves the piece as it was.
import { $, notice, status } from './page.js';
import { on as onStore, setPiece, store } from './page-store.js';
import { command, run } from './commands.js';

let shown = null; // {base, alternatives, bars, where, playing}

command('show-chord-alternatives', (offer) => show(offer));
command('close-chord-alternatives', () => close());
status.chordAlternatives = () => (shown ? { count: shown.alternatives.length, playing: shown.playing } : null);

/**
 * Shows `alternatives` (from harmonizer.js's `harmonizedAlternatives`) for `bars` ([from, to)
 * or null: every bar) of `base`, the piece they were asked for; `where` names the bars.
 */
function show({ base, alternatives, bars, where }) {
  close();
  shown = { base, alternatives, bars, where, playing: null };
  $('alternatives-caption').textContent = `${alternatives.length} progression${alternatives.length === 1 ? '' : 's'} for ${where}, the most likely first. Keys 1–${alternatives.length} or Play: hear one with the melody; Enter or Keep: use it; Esc: keep none.`;
  const best = alternatives[0].logProb;
  $('alternatives-list').replaceChildren(...alternatives.map((a, i) => {
    const item = document.createElement('li');
    const chart = document.createElement('span');
    chart.className = 'chart';
    chart.textContent = a.cells.join(' | ');
    const odds = document.createElement('span');
    odds.className = 'hint';
    // How much less likely than the first, as the decode's odds.
    odds.textContent = i === 0 ? 'most likely' : `1 : ${formatOdds(Math.exp(best - a.logProb))}`;
    const play = document.createElement('button');
    play.textContent = `▶ ${i + 1}`;
    play.title = `Play the piece with these chords (${i + 1})`;
    play.addEventListener('click', () => audition(i));
    const keep = document.createElement('button');
    keep.textContent = 'Keep';
    keep.addEventListener('click', () => choose(i));
    item.append(play, chart, odds, keep);
    return item;
  }));
  $('chord-alternatives').hidden = false;
  // Focus on the strip: Enter keeps, not the button that asked (which would ask again).
  $('chord-alternatives').focus();
  window.addEventListener('keydown', onKey, true);
}

function formatOdds(x) {
  return x < 10 ? x.toFixed(1) : x < 1e4 ? String(Math.round(x)) : x.toExponential(0);
}

/** Plays the piece with alternative `i`'s chords in its lane and sounding as block chords. */
function audition(i) {
  if (!shown) return;
  const a = shown.alternatives[i];
  if (!a) return;
  shown.playing = i;
  for (const [k, li] of [...$('alternatives-list').children].entries()) li.classList.toggle('playing', k === i);
  const heard = {
    ...a.piece,
    tracks: [...a.piece.tracks, { name: 'CHORDS', role: 'other', program: 0, notes: a.voicing }],
  };
  run('play-piece', heard);
}

/** Makes alternative `i` the piece's chord lane (one Undo takes it back). */
function choose(i) {
  if (!shown) return;
  const { base, alternatives, bars, where } = shown;
  close();
  // Another piece came meanwhile (an edit, a file): the offer was for the old one.
  if (store.piece !== base || store.job) return;
  const next = alternatives[i].piece;
  run('mark-chords-set', next, ...(bars ?? [0, next.promptBars]));
  setPiece(next, { keepView: true });
  notice(`Chords for ${where} from the harmonizer (alternative ${i + 1} of ${alternatives.length}). Undo takes them back.`);
}

/** Hides the strip; the piece stays as it is. */
function close() {
  if (!shown) return;
  if (shown.playing !== null) run('stop-playback');
  shown = null;
  $('chord-alternatives').hidden = true;
  $('alternatives-list').replaceChildren();
  window.removeEventListener('keydown', onKey, true);
}

// While the strip shows (keys the page gives other meanings to otherwise: Enter on a lane opens
// its dialog, Esc clears a selection): 1–8 audition, Enter keeps the one heard (else the
// first), Esc keeps none. Typing in a field or a dialog is left alone.
function onKey(e) {
  if (!shown || $('label-dialog').open) return;
  const target = e.target;
  if (target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement || target instanceof HTMLSelectElement) return;
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  let handled = true;
  if (/^[1-8]$/.test(e.key) && Number(e.key) <= shown.alternatives.length) audition(Number(e.key) - 1);
  else if (e.key === 'Enter' && !(target instanceof HTMLButtonElement)) choose(shown.playing ?? 0);
  else if (e.key === 'Escape') close();
  else handled = false;
  if (handled) {
    e.preventDefault();
    e.stopImmediatePropagation();
  }
}

export function wireChordAlternatives() {
  $('alternatives-close').addEventListener('click', () => close());
}

// Another piece (an edit, Undo, a file) ends the offer: it was for the piece as it was.
onStore('piece', () => {
  if (shown && store.piece !== shown.base) close();
});
