// The alternatives strip under the roll: several choices to audition and keep, side by side.
// "Suggest chords" with Alternatives above 1 offers the harmonizer's progressions for the bars
// (each a chord chart with its odds, the most likely first); Generate and "Regenerate these
// bars" offer that many pieces (each a small roll of the notes it wrote, with its seed). Keys
// 1–8 (or a row's Play) audition one: the roll shows the piece with that choice (drawn, not
// kept) and it sounds from where the choices differ; Enter (or Keep) keeps it as one undoable
// edit; Esc (or Keep none) leaves the piece as it was, and the roll shows it again.
import { $, status } from './page.js';
import { on as onStore, store } from './page-store.js';
import { command, run } from './commands.js';

// {base, items, keep, playFrom, playing}
let shown = null;

command('show-alternatives', (offer) => show(offer));
command('close-alternatives', () => close());
status.alternatives = () => (shown ? { kind: shown.kind, count: shown.items.length, playing: shown.playing } : null);

/**
 * Offers `items` for `base` (the piece they were made from): each `{piece, text, hint,
 * notes?, heard?}`: `text` a chord chart (kind 'chords') or a summary, `hint` beside it,
 * `notes` the notes it wrote (drawn as a small roll over the ticks `span`), `heard` the piece
 * to play (default `piece`). `keep(i)` makes item i the piece; `caption` says what they are;
 * playback starts at `playFrom` (ticks).
 */
function show({ base, kind, items, caption, keep, span = null, playFrom = 0 }) {
  close();
  shown = { base, kind, items, keep, playFrom, playing: null };
  const n = items.length;
  $('alternatives-caption').textContent = `${caption} Keys 1–${n} or Play: hear one; Enter or Keep: use it; Esc: keep none.`;
  $('alternatives-strip').setAttribute('aria-label', kind === 'chords' ? 'Chord alternatives' : 'Alternatives');
  const pitches = items.flatMap((a) => (a.notes ?? []).map((note) => note[0]));
  const range = pitches.length ? [Math.min(...pitches), Math.max(...pitches)] : [60, 72];
  $('alternatives-list').replaceChildren(...items.map((a, i) => {
    const item = document.createElement('li');
    const play = document.createElement('button');
    play.textContent = `▶ ${i + 1}`;
    play.title = `Play the piece with this one (${i + 1})`;
    play.addEventListener('click', () => audition(i));
    const text = document.createElement('span');
    text.className = kind === 'chords' ? 'chart' : 'summary';
    text.textContent = a.text;
    const hint = document.createElement('span');
    hint.className = 'hint';
    hint.textContent = a.hint ?? '';
    const keepButton = document.createElement('button');
    keepButton.textContent = 'Keep';
    keepButton.addEventListener('click', () => choose(i));
    const parts = [play];
    if (a.notes && span) parts.push(miniRoll(a.notes, span, range));
    parts.push(text, hint, keepButton);
    item.append(...parts);
    return item;
  }));
  $('alternatives-strip').hidden = false;
  // Focus on the strip: Enter keeps, not the button that asked (which would ask again).
  $('alternatives-strip').focus();
  window.addEventListener('keydown', onKey, true);
}

/** A small roll of `notes` ([pitch, start, end, velocity]) over the ticks `span`. */
function miniRoll(notes, [from, to], [low, high]) {
  const canvas = document.createElement('canvas');
  canvas.className = 'mini-roll';
  const [w, h] = [240, 40];
  const scale = window.devicePixelRatio || 1;
  canvas.width = w * scale;
  canvas.height = h * scale;
  canvas.setAttribute('aria-hidden', 'true');
  const g = canvas.getContext('2d');
  if (!g) return canvas;
  g.scale(scale, scale);
  const color = getComputedStyle(document.documentElement).getPropertyValue('--generated').trim() || '#e8a33d';
  g.fillStyle = color;
  const rows = Math.max(1, high - low + 1);
  const x = (t) => ((t - from) / Math.max(1, to - from)) * w;
  for (const [pitch, start, end] of notes) {
    const y = h - ((pitch - low + 1) / rows) * h;
    g.fillRect(x(start), y, Math.max(1, x(end) - x(start) - 0.5), Math.max(1, h / rows));
  }
  return canvas;
}

/** Shows item `i` in the roll and plays it (from where the choices differ). */
function audition(i) {
  if (!shown) return;
  const a = shown.items[i];
  if (!a) return;
  shown.playing = i;
  for (const [k, li] of [...$('alternatives-list').children].entries()) li.classList.toggle('playing', k === i);
  // Drawn, not kept: the piece itself changes only with Keep.
  run('roll-draft', a.piece);
  run('seek', shown.playFrom);
  run('play-piece', a.heard ?? a.piece);
}

/** Keeps item `i` (one Undo takes it back). */
function choose(i) {
  if (!shown) return;
  const { base, keep } = shown;
  close();
  // Another piece came meanwhile (an edit, a file): the offer was for the old one.
  if (store.piece !== base || store.job) return;
  keep(i);
}

/**
 * Hides the strip; the piece stays as it is, and so does the roll unless `restore` (the
 * person kept none): then an alternative drawn there gives way to the piece again.
 */
function close({ restore = false } = {}) {
  if (!shown) return;
  if (shown.playing !== null) {
    run('stop-playback');
    if (restore && store.piece === shown.base) run('roll-draft', shown.base);
  }
  shown = null;
  $('alternatives-strip').hidden = true;
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
  if (/^[1-8]$/.test(e.key) && Number(e.key) <= shown.items.length) audition(Number(e.key) - 1);
  else if (e.key === 'Enter' && !(target instanceof HTMLButtonElement)) choose(shown.playing ?? 0);
  else if (e.key === 'Escape') close({ restore: true });
  else handled = false;
  if (handled) {
    e.preventDefault();
    e.stopImmediatePropagation();
  }
}

export function wireAlternatives() {
  $('alternatives-close').addEventListener('click', () => close({ restore: true }));
}

// Another piece (an edit, Undo, a file) ends the offer: it was for the piece as it was.
onStore('piece', () => {
  if (shown && store.piece !== shown.base) close();
});
