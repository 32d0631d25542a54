// A short, seeded run of the share-link fuzzer (tools/fuzz-share.mjs): every mutant is either
// decoded into a piece that normalizes and re-encodes, or refused with a sentence. The run also
// shows the mutators get past each layer: the link text, the compression and checksum, the
// packed numbers and the header's shape.
import test from 'node:test';
import assert from 'node:assert/strict';
import { check, fuzz } from '../../tools/fuzz-share.mjs';

test('1000 mutated share links: each decodes to a good piece or is refused in words', async () => {
  const result = await fuzz({ iterations: 1000, seed: 20261123 });
  assert.deepEqual(result.findings, []);
  assert.equal(result.runs, 1000);
  const seen = [...result.outcomes.keys()].join('\n');
  assert.ok(result.outcomes.get('accepted') > 0, seen);
  for (const layer of ['holds characters a link cannot', 'compressed data is broken', 'checksum does not match',
    'count in it is larger than the data', "header is not readable", 'shape: ']) {
    assert.ok(seen.includes(layer), `no mutant reached "${layer}":\n${seen}`);
  }
});

test('the checker flags a decoder that throws anything but a sentence', async () => {
  // Not a fragment at all: decodeShare refuses it in words, so the checker passes it...
  assert.equal(await check('not a link'), null);
  // ...and a value whose String() throws makes decodeShare throw a TypeError: a finding.
  const hostile = { toString() { throw new TypeError('boom'); } };
  assert.match(await check(hostile), /threw TypeError: boom/);
});
