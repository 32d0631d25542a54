// The Attention card: the live map (filled by generate.js while a model writes, or here for the
// notes on screen when the layer or head changes, after an edit, a take or a rewrite), the
// positional-template plot, and stopping a map request when a generation or another result
// takes over.
import { $, status } from './page.js';
import { on as onStore, store } from './page-store.js';
import { call, cancelCall } from './worker-client.js';
import { drawTemplate, meanTemplate, phraseMarks } from './attention.js';
import { attention } from './attention-view.js';
import { command } from './commands.js';
import { noTemplateText } from './page-text.js';
import { currentEntry, entryNamed, ensureModel } from './model-loader.js';
import { settings } from './settings.js';
import { on } from './events.js';

export { attention };
let job = null; // the Worker request drawing the map without generating, while one runs

command('attention-stop', () => stopAttention());
command('attention-refresh', () => refreshAttention());

/** Stops the map request running, if one is (a generation or another result takes the map). */
export function stopAttention() {
  if (job !== null) {
    cancelCall(job);
    job = null;
  }
}

/**
 * Draws the chosen head's attention over the current piece without generating (after the
 * layer or head changes), with the selected model if it is loaded.
 */
export async function refreshAttention() {
  // While comparing, the map belongs to the result on show.
  const side = store.comparison?.shown ?? null;
  const entry = side ? entryNamed(side.model) : currentEntry();
  if (!store.piece || store.job || !entry) return;
  if (!store.isLoaded(entry.name)) {
    if (!side) return;
    try {
      await ensureModel(entry);
    } catch (e) {
      $('gen-status').textContent = `Attention: ${e.message}`;
      return;
    }
    // Switched sides (or left the comparison) while the model loaded: that side draws its own.
    if ((store.comparison?.shown ?? null) !== side || store.job) return;
  }
  if (job !== null) cancelCall(job);
  const s = settings();
  attention.reset(1);
  attention.setLabel(`Attention of layer ${s.layer + 1}, head ${s.head + 1}`);
  attention.setMarks(s.task === 'accompaniment' ? phraseMarks(store.piece) : null);
  const options = { seed: s.seed, threshold: s.threshold, watch: { layer: s.layer, head: s.head } };
  let mine = null;
  let rows = 0;
  const started = performance.now();
  try {
    await call(
      'attention',
      { model: entry.name, piece: store.piece, options },
      {
        onProgress: (p) => {
          if (p.started) {
            mine = p.id;
            job = p.id;
          } else if (p.attention && job === mine) {
            attention.addRows(p.attention.start, p.attention.values, p.attention.keys);
            rows = p.attention.start + p.attention.values.length / p.attention.keys;
          }
        },
      },
    );
    status.attentionMaps.push({ model: entry.name, rows, ms: performance.now() - started });
  } catch (e) {
    if (!/cancelled/.test(e.message)) $('gen-status').textContent = `Attention: ${e.message}`;
  } finally {
    if (job === mine) job = null;
  }
}

on('model-loaded', () => {
  showTemplate();
  follow();
});

// The map follows the notes on screen. Once one is drawn, a new piece that is not a whole
// generation's own result (an edit, an undo, a take, new lanes) and the end of a job whose map
// covers part of the piece or none of it (a rewrite of some bars, "Suggest chords") draw it
// again, shortly after the last change, by one teacher-forced pass over the notes shown (the
// Worker's `attention`). During a generation the live map stays as it is; a file opened
// clears it; while comparing, each result keeps its own.
let due = null;
let lastJob = null;
function follow(blankToo = false) {
  if (due !== null) clearTimeout(due);
  due = null;
  // While a job runs it draws its own map (or its end asks for one, below).
  if (store.job) return;
  due = setTimeout(() => {
    due = null;
    if (!store.job && !store.comparison && (blankToo || !attention.isBlank())) refreshAttention();
  }, 250);
}
onStore('piece', ({ fresh }) => {
  if (fresh) {
    stopAttention();
    attention.reset(1);
  } else if (!store.job) {
    follow();
  }
});
onStore('job', ({ job: running }) => {
  if (running) {
    // A generation draws its own map as it writes: a redraw still waiting (an edit just
    // before) would replace that map once a quick job is done.
    if (due !== null) clearTimeout(due);
    due = null;
    lastJob = running;
    return;
  }
  const whole = (lastJob?.task === 'accompaniment' || lastJob?.task === 'continuation') && !lastJob.region;
  // A melody is written a sixteenth at a time with no map streamed: its map is drawn once
  // it is written, over the whole melody.
  if (!whole) follow(lastJob?.task === 'melody');
});
export { follow as followAttention };

/** Plots the chosen model's positional template for the chosen layer and head. */
export async function showTemplate() {
  const entry = currentEntry();
  const canvas = $('template');
  const caption = $('template-caption');
  if (!entry || !store.isLoaded(entry.name)) {
    caption.textContent = 'The positional template appears once the model is loaded.';
    return;
  }
  const layer = Number($('att-layer').value);
  const head = Number($('att-head').value);
  try {
    const t = await call('template', { model: entry.name, layer, head, lags: 256 });
    if (!t) {
      canvas.getContext('2d').clearRect(0, 0, canvas.width, canvas.height);
      caption.textContent = noTemplateText(entry.pe);
      return;
    }
    const mean = meanTemplate(t);
    drawTemplate(canvas, mean, t.lags, { label: `P_d of layer ${layer + 1}, head ${head + 1}` });
    caption.textContent = `Layer ${layer + 1}, head ${head + 1}: the positional template P_d(τ), averaged over its ${t.dims} dimensions — how much a query favours keys τ steps back.`;
  } catch (e) {
    caption.textContent = `The template could not be computed: ${e.message}`;
  }
}
