// The comparison's pure parts: run with `node --test tests/js/`.
import test from 'node:test';
import assert from 'node:assert/strict';
import { Comparison, defaultPartner, partnerChoices, sideLabel } from '../../www/compare.js';

const manifest = [
  { name: 'accompaniment-ar', task: 'Accompaniment', pe: 'sine_spe', default: true },
  { name: 'accompaniment-fstripe', task: 'Accompaniment', pe: 'fstripe' },
  { name: 'continuation-sinespe', task: 'Continuation', pe: 'sine_spe', default: true },
  { name: 'continuation-convspe', task: 'Continuation', pe: 'conv_spe' },
  { name: 'continuation-ape', task: 'Continuation', pe: 'ape' },
  { name: 'mine', task: 'continuation', pe: 'sine_spe', user: true, training: { base: 'continuation-ape' } },
];
const named = (n) => manifest.find((m) => m.name === n);

test('partners are the other models of the same task', () => {
  assert.deepEqual(
    partnerChoices(manifest, named('continuation-sinespe')).map((m) => m.name),
    ['continuation-convspe', 'continuation-ape', 'mine'],
  );
  assert.deepEqual(partnerChoices(manifest, named('accompaniment-fstripe')).map((m) => m.name), ['accompaniment-ar']);
  assert.deepEqual(partnerChoices(manifest, null), []);
  assert.deepEqual(partnerChoices([named('accompaniment-ar')], named('accompaniment-ar')), []);
});

test('the partner offered first: the base of a fine-tuned model, the default, another encoding', () => {
  assert.equal(defaultPartner(manifest, named('mine')).name, 'continuation-ape');
  assert.equal(defaultPartner(manifest, named('continuation-ape')).name, 'continuation-sinespe');
  // The default itself: the first with another encoding (not the fine-tuned sineSPE copy).
  assert.equal(defaultPartner(manifest, named('continuation-sinespe')).name, 'continuation-convspe');
  // The person's own choice wins while it is one; a stale one is ignored.
  assert.equal(defaultPartner(manifest, named('mine'), 'continuation-convspe').name, 'continuation-convspe');
  assert.equal(defaultPartner(manifest, named('mine'), 'accompaniment-ar').name, 'continuation-ape');
  assert.equal(defaultPartner(manifest, named('mine'), 'mine').name, 'continuation-ape');
  assert.equal(defaultPartner([named('accompaniment-ar')], named('accompaniment-ar')), null);
});

test('labels say which is fine-tuned and which is its base', () => {
  assert.equal(sideLabel(named('mine'), named('continuation-ape')), 'mine · sine_spe (fine-tuned)');
  assert.equal(sideLabel(named('continuation-ape'), named('mine')), 'continuation-ape · ape (base)');
  assert.equal(sideLabel(named('continuation-ape'), named('continuation-sinespe')), 'continuation-ape · ape');
  assert.equal(sideLabel(null, null), '');
});

test('a comparison switches sides, keeps edits with their side, and travels in a link', () => {
  const p = (n) => ({ name: n, tracks: [] });
  const c = new Comparison({ model: 'x', piece: p('a') }, { model: 'y', piece: p('b') }, 7);
  assert.equal(c.shown.piece.name, 'a');
  assert.equal(c.a.attention, null);
  c.a.attention = { state: 'a map' };
  c.edited(p('a edited'));
  assert.equal(c.a.attention, null, 'the map of the piece before the edit is dropped');
  assert.equal(c.show('b').piece.name, 'b');
  assert.deepEqual(c.forShare(), { piece: p('b'), model: 'y', compare: { model: 'x', piece: p('a edited') } });
  assert.throws(() => c.show('c'), /no side called c/);
  const back = Comparison.fromShare({ piece: p('b'), model: 'y', seed: 7, ...c.forShare() });
  assert.equal(back.seed, 7);
  assert.equal(back.shown.model, 'y');
  assert.equal(back.hidden.piece.name, 'a edited');
  assert.equal(Comparison.fromShare({ piece: p('b') }), null);
});
