// The Generate panel's settings: read from its fields, and put back (from a share link, the last
// visit, a saved piece). Also what is saved with the piece and put in a share link. A helper
// of the panels that read them (it imports no panel).
import { $ } from './page.js';
import { limitOf } from './options.js';
import { chosenTexture, fillTextureMenu, setChosenTexture } from './texture.js';

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
    textureEcho: $('texture-echo').value === '' ? null : Number($('texture-echo').value),
    texture: $('texture').value || null,
    textureDonor: $('texture').value === 'chosen' ? chosenTexture() : null,
    melodyRange: $('melody-range').value.trim() || null,
    density: $('density').value === '' ? null : Number($('density').value),
    keyHold: $('key-hold').value === '' ? null : Number($('key-hold').value),
    alternatives: $('alternatives').value === '' ? null : Number($('alternatives').value),
    chordColour: Number($('chord-colour').value),
    bars: $('length').value === '' ? limitOf('bars').default : Number($('length').value),
    maxTokens: $('max-tokens').value === '' ? null : Number($('max-tokens').value),
    readAll: $('read-all').checked,
    layer: Number($('att-layer').value) || 0,
    head: Number($('att-head').value) || 0,
    tempo: Number($('tempo').value) || 100,
    pedal: $('pedal').checked,
    writtenPedal: $('written-pedal').value,
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
  set('texture-echo', s.textureEcho);
  if (s.textureDonor) setChosenTexture(s.textureDonor);
  fillTextureMenu($('texture'), s.texture ?? '');
  set('melody-range', s.melodyRange);
  set('density', s.density);
  set('key-hold', s.keyHold);
  set('alternatives', s.alternatives);
  set('chord-colour', s.chordColour);
  // Bars since December 2026; before, `length` was tokens (512 by default) and `maxBars` an
  // optional bar limit: a saved bar limit is the length, a token length not the old default
  // is the token limit.
  const legacy = s.bars === undefined && (s.length !== undefined || s.maxBars !== undefined);
  set('length', legacy ? s.maxBars : s.bars);
  set('max-tokens', legacy ? (s.length === 512 ? null : s.length) : s.maxTokens);
  if (typeof s.readAll === 'boolean') $('read-all').checked = s.readAll;
  set('att-layer', s.layer);
  set('att-head', s.head);
  set('tempo', s.tempo);
  if (typeof s.pedal === 'boolean') $('pedal').checked = s.pedal;
  if (['learnt', 'played', 'off'].includes(s.writtenPedal)) $('written-pedal').value = s.writtenPedal;
  $('tempo-value').textContent = `${$('tempo').value} %`;
}
