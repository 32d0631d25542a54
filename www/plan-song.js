// "New song from a plan": a chord chart and a phrase form typed in a dialog become an empty
// piece of that many bars (the Worker's `planPiece`, the CLI's `generate --task melody` without
// a file), its lanes set; the default melody model writes its tune, then the default
// accompaniment model its piano — each a generation of its own, so each is one Undo and
// Cancel stops either.
import { $, notice, showError } from './page.js';
import { planText, readPlan } from './labels.js';
import { defaultEntry } from './generation-plan.js';
import { call } from './worker-client.js';
import { setPiece, store } from './page-store.js';
import { run } from './commands.js';
import { fitPhrases } from './piece.js';
import { selectedBars } from './piece-view.js';

function open() {
  if (store.job) {
    notice('A generation is running: cancel it (Esc) before starting a new song.');
    return;
  }
  $('plan-error').textContent = '';
  const bars = store.piece && selectedBars();
  $('plan-from-lanes').disabled = !store.piece?.bars.length;
  $('plan-from-lanes').textContent = bars
    ? `Take the lanes of bars ${bars[0] + 1}–${bars[1]}`
    : 'Take the lanes of this piece';
  $('plan-dialog').showModal();
  $('plan-chords').focus();
}

/** Fills the dialog from the open piece's lanes (the selected bars, or all): chords, form, meter, tempo. */
function fromLanes() {
  const piece = store.piece;
  if (!piece?.bars.length) return;
  const [from, to] = selectedBars() ?? [0, piece.bars.length];
  const { chords, form } = planText(piece, from, to);
  $('plan-chords').value = chords;
  $('plan-form').value = form;
  const tick = piece.bars[from];
  const at = (list) => list.filter((e) => e[0] <= tick).at(-1) ?? list[0];
  const sig = at(piece.timeSignatures ?? []);
  if (sig) {
    const meter = `${sig[1]}/${sig[2]}`;
    const select = $('plan-meter');
    if (![...select.options].some((o) => o.value === meter)) select.add(new Option(meter));
    select.value = meter;
  }
  const tempo = at(piece.tempos ?? []);
  if (tempo) $('plan-bpm').value = Math.round(60e6 / tempo[1]);
  $('plan-error').textContent = '';
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
      if (i < piece.chords.length) piece.chords[i] = cell === 'N' ? '' : cell;
    });
    if (plan.phrases.length) {
      piece.phrases = plan.phrases;
      fitPhrases(piece);
    }
    setPiece(piece, { fresh: true });
    notice(`A plan of ${plan.bars} bars: the melody is being written, then its accompaniment.`);
    // With Alternatives above 1 the melodies are offered in the strip; the piano follows the
    // one kept (and is offered the same way).
    const accompany = async () => {
      const played = await run('generate', { entry: piano });
      if (played) notice(`A song from the plan: ${melody.name} wrote the melody, ${piano.name} the piano. Undo takes back one at a time.`);
    };
    const sung = await run('generate', { entry: melody, onKept: () => accompany().catch((e) => showError(e.message)) });
    if (sung) await accompany();
  } catch (e) {
    showError(e.message);
  }
}

export function wirePlanSong() {
  $('plan-song').addEventListener('click', open);
  $('plan-from-lanes').addEventListener('click', fromLanes);
  $('plan-write').addEventListener('click', (e) => {
    e.preventDefault();
    write();
  });
}
