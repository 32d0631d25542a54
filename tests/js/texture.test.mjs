import { test } from 'node:test';
import assert from 'node:assert/strict';

import { GALLERY, textureOf, textureChoices, setChosenTexture, chosenTexture, chosenText } from '../../www/texture.js';

test('the gallery offers its named textures, each whole', () => {
  assert.deepEqual(GALLERY.map((d) => d.name), ['ballad', 'arpeggio', 'block', 'stride', 'syncopated']);
  for (const d of GALLERY) {
    assert.ok(d.bars.length > 0 && d.notes.length > 0, d.name);
    assert.equal(d.chords.length, d.bars.length, `${d.name}: a chord cell a bar`);
    assert.match(d.source, /POP909 song \d+, bars \d+-\d+/, `${d.name}: where it comes from`);
  }
});

test("the menu: the song's own, the gallery, and the chosen bars once there are some", () => {
  setChosenTexture(null);
  const plain = textureChoices();
  assert.equal(plain[0].value, '', "the song's own first");
  assert.deepEqual(plain.slice(1).map((c) => c.value), GALLERY.map((d) => d.name));
  const mine = { name: 'bars 9-12 of song.mid', bars: [16, 16, 16, 16], notes: [[48, 0, 4], [60, 2, 2]], chords: ['C', 'F', 'G', 'C'] };
  setChosenTexture(mine);
  assert.equal(chosenTexture(), mine);
  assert.deepEqual(textureChoices().at(-1), { value: 'chosen', label: 'Chosen: bars 9-12 of song.mid', title: 'Bars you chose with Use as texture' });
  assert.match(chosenText(mine), /^bars 9-12 of song.mid is the texture now \(2 notes\)/);
  setChosenTexture({ name: 'not a texture' });
  assert.equal(chosenTexture(), null, 'something that is no texture is not kept');
});

test('what a Generate request sends for each choice', () => {
  assert.equal(textureOf({}), null, 'settings saved before the menu');
  assert.equal(textureOf({ texture: '' }), null);
  assert.equal(textureOf({ texture: 'block' }), GALLERY.find((d) => d.name === 'block'));
  assert.equal(textureOf({ texture: 'chosen', textureDonor: null }), null);
  const mine = { name: 'x', bars: [16], notes: [[40, 0, 1]], chords: [''] };
  assert.equal(textureOf({ texture: 'chosen', textureDonor: mine }), mine);
});
