// The models: fetching the manifest of shipped models into the page store (the person's own
// join it from tune.js), the Model list of the Generate panel and what it says about the
// chosen one, and the models it can be compared with. Loading one into the Worker is
// model-loader.js's.
import { $, showError } from './page.js';
import { on, setModels, store } from './page-store.js';
import { defaultPartner, partnerChoices, sideLabel } from './compare.js';
import { modelOption, modelAbout } from './page-text.js';
import { command } from './commands.js';
import { emit } from './events.js';
import { currentEntry } from './model-loader.js';

export { currentEntry, dynamicsText, ensureModel, entryNamed, pedalText, prefetchModel } from './model-loader.js';

export async function loadManifest() {
  try {
    const response = await fetch(new URL('./models/manifest.json', import.meta.url), { cache: 'no-cache' });
    if (!response.ok) throw new Error(`the server answered ${response.status}`);
    const manifest = await response.json();
    // The menus follow ('models').
    setModels(manifest.models ?? [], manifest.dynamics ?? null, manifest.pedal ?? null, manifest.pedal_live ?? null);
  } catch (e) {
    showError(`The list of models could not be loaded (${e.message}); generation is unavailable.`);
    showModels();
  }
}

command('show-models', (selected) => showModels(selected));
// The list changed (the manifest came, the person's own models joined or left): the menu
// shows it, keeping the chosen model where it is still there.
on('models', () => showModels($('model').value));

export function showModels(selected) {
  const task = $('task').value;
  const select = $('model');
  const models = store.manifest.filter((m) => m.task.toLowerCase() === task);
  select.replaceChildren(...models.map((m) => new Option(modelOption(m), m.name)));
  const pick = models.find((m) => m.name === selected) ?? models.find((m) => m.default) ?? models[0];
  if (pick) select.value = pick.name;
  for (const el of document.querySelectorAll('.acc-only')) el.hidden = task !== 'accompaniment';
  // The written pedal: the piano an accompaniment writes, a continuation's new bars.
  for (const el of document.querySelectorAll('.pedal-task')) el.hidden = !['accompaniment', 'continuation'].includes(task);
  // A melody is sampled as a continuation is: its temperature and echo (class mel-too) show;
  // the piano's and the continuation's density (class not-mel) does not apply to it; the
  // singer's range (mel-only) applies to it alone.
  for (const el of document.querySelectorAll('.not-mel')) el.hidden = task === 'melody';
  for (const el of document.querySelectorAll('.mel-only')) el.hidden = task !== 'melody';
  for (const el of document.querySelectorAll('.cont-only')) {
    el.hidden = !(task === 'continuation' || (task === 'melody' && el.classList.contains('mel-too')));
  }
  showModelAbout();
  emit('model-shown');
}

/** Lists the models the chosen one can be compared with (its task's others). */
function showPartners() {
  const entry = currentEntry();
  const select = $('compare-model');
  const previous = select.dataset.picked || null; // the person's own last choice
  const choices = partnerChoices(store.manifest, entry);
  select.replaceChildren(...choices.map((m) => new Option(sideLabel(m, entry), m.name)));
  const pick = defaultPartner(store.manifest, entry, previous);
  if (pick) select.value = pick.name;
  $('compare-group').hidden = choices.length === 0;
}

export function showModelAbout() {
  const entry = currentEntry();
  const c = entry?.config;
  $('model-about').textContent = modelAbout(entry);
  showPartners();
  const layers = c?.layers ?? 1;
  const heads = c?.heads ?? 1;
  fillNumbers($('att-layer'), layers);
  fillNumbers($('att-head'), heads);
}

function fillNumbers(select, n) {
  const keep = Math.min(Number(select.value) || 0, n - 1);
  select.replaceChildren(...Array.from({ length: n }, (_, i) => new Option(String(i + 1), String(i))));
  select.value = String(keep);
}
