// The chord and phrase labels a person types in the lanes' dialog, pure: what is accepted, how a
// chord cell is written, the dialog's words, the chords offered as suggestions, and the number of
// planned bars. No DOM: lanes.js shows the dialog, tests/js/labels.test.mjs checks these.

import grammar from '../settings/chords.json' with { type: 'json' };

// The grammar's spellings as one alternation, longest first (so `m7b5` is tried before `m`).
const spellings = (keys) =>
  [...keys]
    .sort((a, b) => b.length - a.length)
    .map((k) => k.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('|');

/**
 * One chord symbol the lanes hold (or N, no chord), as settings/chords.json writes the grammar
 * the Rust code reads too (`Chord::parse_any`): a root, then a readable suffix or `:` and a Harte
 * quality with bracketed extensions; either may end in a bass after `/` (a note after a suffix,
 * `C/E`; a degree after a Harte quality, `B:maj/3`).
 */
export const CHORD_TOKEN = new RegExp(
  `^(N|[A-G][#b]?(${spellings(Object.keys(grammar.shorthand))})(/[A-G][#b]?)?|[A-G][#b]?:(${spellings(Object.keys(grammar.harte))})(\\([^()\\s|]*\\))?(/(${spellings(grammar.harte_bass)}))?)$`,
);

/** The chords the dialog suggests (the datalist under its input). */
export const CHORD_CHOICES = ['C', 'Cm', 'C7', 'Cmaj7', 'Cm7', 'Cdim', 'Csus4', 'D', 'Dm', 'Dm7', 'E', 'Em', 'E7', 'F', 'Fmaj7', 'G', 'G7', 'Gsus4', 'A', 'Am', 'Am7', 'Bb', 'Bdim', 'Bm7b5', 'N'];

/** The dialog's help for a `kind` ('chord' or 'phrase') of label. */
export const LABEL_HELP = {
  chord: 'A chord such as C, Am, F#7, Bbmaj7, Gsus4, C/E (a bass after /); two or more share the bar evenly ("C G"); empty or N for none. A bar line | goes on to the next bars ("C | G | Am F").',
  phrase: 'A letter: the same capital letter for repeats of a melodic phrase (A, B, …); i for an intro, o for an outro, b for a bridge, x for a transition.',
};

/** The dialog's title for bar `bar` (from 0); `planned`: past the music. */
export function labelTitle(kind, bar, planned) {
  const where = planned ? ' (planned, past the music)' : '';
  return kind === 'chord' ? `Chord of bar ${bar + 1}${where}` : `Phrase at bar ${bar + 1}${where}`;
}

/** What is wrong with `value` (already trimmed) as a `kind` label: the bad parts, [] if none. */
export function labelProblems(kind, value) {
  return kind === 'chord'
    ? value.split(/[\s|]+/).filter((s) => s && !CHORD_TOKEN.test(s))
    : /^[A-Za-z]$/.test(value)
      ? []
      : [value || '(empty)'];
}

/** The sentence the dialog shows for `bad` (from labelProblems). */
export function labelError(kind, bad) {
  return kind === 'chord' ? `Not a chord: ${bad.join(', ')}` : 'A phrase is one letter, A–Z or a–z.';
}

/** A chord cell as the piece keeps it: the symbols typed, one space apart ('' for none). */
export function chordCell(value) {
  return value.trim().split(/\s+/).filter((s) => s).join(' ');
}

/**
 * A chord chart typed in the dialog: bars separated by `|` (bar lines at either end allowed),
 * the chords of a bar by spaces; a lane cell per bar from the clicked one. The CLI's
 * `--chords` reads the same (`chord_chart` in src/music/piece.rs; cases: tests/chord-charts.json).
 */
export function chordChart(value) {
  const text = value.trim();
  const cells = text.split('|');
  if (cells.length > 1 && text.startsWith('|')) cells.shift();
  if (cells.length > 1 && text.endsWith('|')) cells.pop();
  return cells.map(chordCell);
}

/** The planned bars asked for in the field: a whole number from 0 to 256 (0 when unreadable). */
export function plannedBars(value) {
  return Math.max(0, Math.min(256, Math.round(Number(value) || 0)));
}

/**
 * A phrase form as POP909 writes it and `generate --phrases` reads it: letters with their bars
 * (`i4A8B8A8o4`; spaces allowed). Returns `{ phrases: [[letter, bars], …] }` or `{ error }` in
 * words.
 */
export function phraseForm(value) {
  const text = value.replace(/\s+/g, '');
  if (!text) return { phrases: [] };
  const parts = [...text.matchAll(/([A-Za-z])(\d+)/g)];
  if (parts.map((m) => m[0]).join('') !== text) {
    return { error: `“${value.trim()}” is not a form: write each phrase as a letter and its bars, e.g. A8B8A8 (i4 for a 4-bar intro)` };
  }
  const phrases = parts.map((m) => [m[1], Number(m[2])]);
  if (phrases.some(([, bars]) => bars < 1 || bars > 256)) return { error: 'a phrase lasts 1 to 256 bars' };
  return { phrases };
}

/**
 * The plan the dialog's fields ask for: `{ cells, phrases, bars, numerator, denominator }`, or
 * `{ error }` in words. Bars: as many as the chart or the form reaches (8 when neither says).
 */
export function readPlan({ chords, form, meter }) {
  const cells = chords.trim() ? chordChart(chords) : [];
  const bad = cells.flatMap((c) => labelProblems('chord', c));
  if (bad.length) return { error: `Not a chord: ${bad.join(', ')}` };
  const read = phraseForm(form);
  if (read.error) return { error: read.error };
  const [numerator, denominator] = meter.split('/').map(Number);
  const formBars = read.phrases.reduce((n, p) => n + p[1], 0);
  const bars = Math.max(cells.length, formBars) || 8;
  if (bars > 256) return { error: `the plan reaches bar ${bars}; plan at most 256 bars` };
  return { cells, phrases: read.phrases, bars, numerator, denominator };
}

/**
 * The plan of bars `[from, to)` of a piece, as the plan dialog's fields write it: the chord
 * chart (`C | G | Am F`, N where a bar has no chord) and the phrase form (`A4B4`, the phrases cut
 * to those bars), so a song can be planned from the lanes of one already open.
 */
export function planText({ chords, phrases }, from, to) {
  const chart = chords.slice(from, to).map((c) => c.trim() || 'N').join(' | ');
  const form = [];
  let start = 0;
  for (const [letter, n] of phrases) {
    const take = Math.min(start + n, to) - Math.max(start, from);
    if (take > 0) form.push(`${letter}${take}`);
    start += n;
  }
  return { chords: chart, form: form.join('') };
}

/** A pitch typed as a scientific note name (C4 = 60; # or b) or a MIDI number; null if not one. */
function typedPitch(text) {
  const t = text.trim();
  if (/^\d{1,3}$/.test(t)) return Number(t) <= 127 ? Number(t) : null;
  const m = /^([A-Ga-g])([#b]?)(-?\d)$/.exec(t);
  if (!m) return null;
  const pc = { c: 0, d: 2, e: 4, f: 5, g: 7, a: 9, b: 11 }[m[1].toLowerCase()];
  const pitch = 12 * (Number(m[3]) + 1) + pc + (m[2] === '#' ? 1 : m[2] === 'b' ? -1 : 0);
  return pitch >= 0 && pitch <= 127 ? pitch : null;
}

/**
 * A singer's range as typed (`C3–C6`, `F#3 to Bb4`, `55-79`): `{ range: [low, high] }` in MIDI
 * pitches, or `{ error }` in words. The CLI's `--range` reads the same (`pitch_range` in
 * src/music/summary.rs; cases: tests/melody-ranges.json).
 */
export function pitchRange(text) {
  const parts = text.trim().split(/\s*(?:–|to|(?<=\d)\s*-)\s*/);
  const [low, high] = parts.length === 2 ? parts.map(typedPitch) : [null, null];
  if (low === null || high === null) {
    return { error: `“${text.trim()}” is not a range: give the lowest and highest note, e.g. C3–C6, F#3 to Bb4 or 55-79` };
  }
  if (low > high) return { error: `the range ${text.trim()} is upside down: give the lowest note first` };
  return { range: [low, high] };
}
