// What an accompaniment plays like (the Generate panel's Texture menu, issue 69): the song's
// own texture (a phrase the lane repeats plays like its first occurrence), a named texture of
// the gallery (settings/textures.json, drawn from POP909's training songs by rule with
// `pianoformer textures`), or bars of a piano part the person chose with "Use as texture"
// (the Worker's `textureFrom`: the same Rust as the CLI's --texture-from). The bars written
// cycle through the texture's bars: its rhythm in its registers, over their own chords and
// melody. Plain functions and the chosen texture; the panel wires them (main.js).
import gallery from '../settings/textures.json' with { type: 'json' };

/** The gallery's textures: {name, bars, notes, chords, source}. */
export const GALLERY = gallery;

let chosen = null;

/** The texture "Use as texture" took last (a donor, as the Worker's `textureFrom` gives it), or null. */
export function chosenTexture() {
  return chosen;
}

/** Keeps `donor` as the chosen texture (null forgets it). */
export function setChosenTexture(donor) {
  chosen = donor && typeof donor === 'object' && Array.isArray(donor.bars) ? donor : null;
}

/**
 * The texture the panel's settings `s` ask for, as the Generate request sends it: null for the
 * song's own (settings saved before there was a texture menu too), a gallery entry by its
 * name, or the chosen one (`s.textureDonor`, saved with the settings).
 */
export function textureOf(s) {
  if (!s?.texture) return null;
  if (s.texture === 'chosen') return s.textureDonor ?? null;
  return GALLERY.find((d) => d.name === s.texture) ?? null;
}

/** The menu's entries: the song's own, the gallery's, and the chosen texture when there is one. */
export function textureChoices(donor = chosen) {
  return [
    { value: '', label: "The song's own (repeats return)", title: 'A phrase the lane repeats plays like its first occurrence' },
    ...GALLERY.map((d) => ({ value: d.name, label: d.name[0].toUpperCase() + d.name.slice(1), title: d.source ?? '' })),
    ...(donor ? [{ value: 'chosen', label: `Chosen: ${donor.name}`, title: 'Bars you chose with Use as texture' }] : []),
  ];
}

/** Fills the `<select>` with `textureChoices`, keeping `value` where it is still offered. */
export function fillTextureMenu(select, value = select.value) {
  const doc = select.ownerDocument;
  select.replaceChildren(
    ...textureChoices().map(({ value: v, label, title }) => {
      const o = doc.createElement('option');
      o.value = v;
      o.textContent = label;
      o.title = title;
      return o;
    }),
  );
  select.value = textureChoices().some((c) => c.value === value) ? value : '';
}

/** The status line's words once bars became the texture. */
export function chosenText(donor) {
  const notes = donor.notes.length;
  return `${donor.name} is the texture now (${notes} note${notes === 1 ? '' : 's'}): Generate or Regenerate these bars plays like them`;
}
