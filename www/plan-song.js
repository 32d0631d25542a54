// "New song from a plan": a chord chart and a phrase form typed in a dialog become an empty
// piece of that many bars (the Worker's `planPiece`, the CLI's `generate --task melody` without
// a file), its lanes set; the default melody model writes its tune, then the default
// accompaniment model its piano — each a generation of its own, so each is one Undo and
// Cancel stops either.
import { $, notice, showError } from './page.js';
import { readPlan } from './labels.js';
import { defaultEntry } from './generation-plan.js';
import { call } from './worker-client.js';
import { setPiece, store } from './page-store.js';
import { run } from './commands.js';
import { fitPhrases } from './piece.js';

function open() {
  if (store.job) {
    notice('A generation is running: cancel it (Esc) before starting a new song.');
    return;
  }
  $('plan-error').textContent = '';
  $('plan-dialog').showModal();
  $('plan-chords').focus();
}

async function write() {
  const plan = readPlan({ chords: $('plan-chords').value, form: $('plan-form').value, meter: $('plan-meter').value });
  if (plan.error) {
    $('plan-error').textContent = `${plan.error[0].toUpperCase()}${plan.error.slice(1)}.`;
    return;
  }
  const melody = defaultEntry(store.manifest, 'melody');
  const piano = defaultEntry(store.manifest, 'accompaniment');
  if (!melody || !piano) {
    $('plan-error').textContent = 'No melody or accompaniment model is available.';
    return;
  }
  $('plan-dialog').close();
  try {
    const bpm = Math.min(240, Math.max(40, Number($('plan-bpm').value) || 100));
    const piece = await call('planPiece', { bars: plan.bars, numerator: plan.numerator, denominator: plan.denominator, bpm });
    piece.name = 'plan.mid';
    plan.cells.forEach((cell, i) => {
      if (i < piece.chords.length) piece.chords[i] = cell;
    });
    if (plan.phrases.length) {
      piece.phrases = plan.phrases;
      fitPhrases(piece);
    }
    setPiece(piece, { fresh: true });
    notice(`A plan of ${plan.bars} bars: the melody is being written, then its accompaniment.`);
    const sung = await run('generate', { entry: melody });
    if (!sung) return;
    const played = await run('generate', { entry: piano });
    if (played) notice(`A song from the plan: ${melody.name} wrote the melody, ${piano.name} the piano. Undo takes back one at a time.`);
  } catch (e) {
    showError(e.message);
  }
}

export function wirePlanSong() {
  $('plan-song').addEventListener('click', open);
  $('plan-write').addEventListener('click', (e) => {
    e.preventDefault();
    write();
  });
}
