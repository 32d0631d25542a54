// The Generate panel's settings: read from its fields, and put back (from a share link, the last
// visit, a saved piece). Also what is saved with the piece and put in a share link. A helper
// of the panels that read them (it imports no panel).
import { $ } from './page.js';
import { limitOf } from './options.js';

/** The panel's settings (also what is saved with the piece and put in a share link). */
export function settings() {
  return {
    task: $('task').value,
    model: $('model').value,
    seed: $('seed').value === '' ? limitOf('seed').default : Number($('seed').value),
    threshold: $('threshold').value === '' ? null : Number($('threshold').value),
    pianoTemperature: $('piano-temperature').value === '' ? null : Number($('piano-temperature').value),
    temperature: $('temperature').value === '' ? null : Number($('temperature').value),
    echo: $('echo').value === '' ? null : Number($('echo').value),
    density: $('density').value === '' ? null : Number($('density').value),
    length: $('length').value === '' ? limitOf('tokens').default : Number($('length').value),
    maxBars: $('max-bars').value === '' ? null : Number($('max-bars').value),
    readAll: $('read-all').checked,
    layer: Number($('att-layer').value) || 0,
    head: Number($('att-head').value) || 0,
    tempo: Number($('tempo').value) || 100,
  };
}

/**
 * Puts saved settings (from `settings()`, a link or the last visit) back in the panel;
 * `showModels(name)` (models.js) fills the model menu for the task, and its layers and heads,
 * before the attention's layer and head are set.
 */
export function applySettings(s, showModels) {
  if (!s) return;
  if (s.task) $('task').value = s.task;
  showModels(s.model);
  const set = (id, v) => {
    if (v !== undefined && v !== null) $(id).value = v;
  };
  set('seed', s.seed);
  set('threshold', s.threshold);
  set('piano-temperature', s.pianoTemperature);
  set('temperature', s.temperature);
  set('echo', s.echo);
  set('density', s.density);
  set('length', s.length);
  set('max-bars', s.maxBars);
  if (typeof s.readAll === 'boolean') $('read-all').checked = s.readAll;
  set('att-layer', s.layer);
  set('att-head', s.head);
  set('tempo', s.tempo);
  $('tempo-value').textContent = `${$('tempo').value} %`;
}
