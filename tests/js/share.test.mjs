// Share links: run with `node --test tests/js/` (Node 18.20+ or 20.12+, for deflate-raw).
import test from 'node:test';
import assert from 'node:assert/strict';
import {
  encodeShare,
  decodeShare,
  normalizePiece,
  toBase64Url,
  fromBase64Url,
  MAX_SHARE_CHARS,
} from '../../www/share.js';

// mulberry32: a small seeded PRNG, so the test piece is the same on every run.
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// A pop song's shape: 4/4, a 3/4 middle section, 4/4 again; tempo changes; melody, bridge and
// piano (block chords: many notes on one start) adding up to 2000 notes.
function realisticPiece(seed = 1) {
  const rand = prng(seed);
  const pick = (list) => list[Math.floor(rand() * list.length)];
  const ppq = 480;
  const timeSignatures = [
    [0, 4, 4],
    [16 * 4 * ppq, 3, 4],
    [16 * 4 * ppq + 8 * 3 * ppq, 4, 4],
  ];
  const bars = [];
  for (let tick = 0, i = 0; i < 80; i++) {
    bars.push(tick);
    tick += i >= 16 && i < 24 ? 3 * ppq : 4 * ppq;
  }
  const barLen = (i) => (i + 1 < bars.length ? bars[i + 1] - bars[i] : 4 * ppq);
  const grid = ppq / 4;
  const tracks = [
    { name: 'MELODY', role: 'melody', program: 0, notes: [] },
    { name: 'BRIDGE', role: 'bridge', program: 0, notes: [] },
    { name: 'PIANO', role: 'piano', program: 0, notes: [] },
  ];
  const counts = [600, 400, 1000];
  counts.forEach((count, t) => {
    const notes = tracks[t].notes;
    while (notes.length < count) {
      const bar = Math.floor(rand() * bars.length);
      const start = bars[bar] + Math.floor((rand() * barLen(bar)) / grid) * grid;
      const length = pick([1, 2, 2, 4, 4, 4, 8, 16]) * grid;
      const velocity = 40 + Math.floor(rand() * 70);
      const root = t === 0 ? 60 + Math.floor(rand() * 20) : t === 1 ? 55 : 40 + Math.floor(rand() * 12);
      const chord = t === 2 ? [0, 4, 7, 12] : [0];
      for (const step of chord) {
        if (notes.length < count) notes.push([root + step, start, start + length, velocity]);
      }
    }
  });
  const chordNames = ['C', 'Am', 'F', 'G7', 'Em', 'Dm7', 'Bbmaj7', ''];
  return {
    version: 1,
    name: 'Test song — ünïcode.mid',
    ppq,
    tempos: [
      [0, 500000],
      [bars[16], 545454],
      [bars[24], 480000],
      [bars[60] + 123, 500001],
    ],
    timeSignatures,
    bars,
    endTick: Math.max(...tracks.flatMap((t) => t.notes.map((n) => n[2]))),
    tracks,
    chords: bars.map(() => pick(chordNames)),
    phrases: [['i', 4], ['A', 12], ['A', 12], ['B', 12], ['B', 12], ['C', 12], ['B', 8], ['o', 8]],
    promptBars: 32,
  };
}

const extras = {
  model: 'accompaniment-sinespe',
  seed: 424242,
  task: 'accompaniment',
  settings: { temperature: 0.9, length: 48, topP: 0.95 },
};

async function rejectsWith(promise, code, pattern) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof Error, 'an Error');
    assert.equal(e.code, code, e.message);
    assert.match(e.message, pattern);
    return true;
  });
}

test('a realistic piece comes back exactly, notes in normalised order', async (t) => {
  const piece = realisticPiece();
  assert.equal(piece.tracks.reduce((n, tr) => n + tr.notes.length, 0), 2000);
  const before = structuredClone(piece);
  const fragment = await encodeShare({ piece, ...extras });
  assert.deepEqual(piece, before, 'encodeShare leaves its argument alone');
  assert.match(fragment, /^v1\.[A-Za-z0-9_-]+$/);
  const message = `encoded size: ${fragment.length} characters for 2000 notes, 80 bars (${(
    fragment.length / 2000
  ).toFixed(2)} characters a note)`;
  t.diagnostic(message);
  console.log(message);
  const decoded = await decodeShare(fragment);
  assert.deepEqual(decoded, { piece: normalizePiece(piece), ...extras });
  // The order really was normalised (the generator writes notes out of order).
  assert.notDeepEqual(piece.tracks[0].notes, decoded.piece.tracks[0].notes);
  assert.deepEqual(await decodeShare(`#${fragment}`), decoded, 'a leading # is fine');
  assert.ok(fragment.length < 20000, 'a 2000-note piece fits comfortably in a link');
});

test('normalizePiece sorts by (start, pitch, end, velocity) and copies', () => {
  const notes = [[64, 0, 10, 80], [60, 0, 20, 80], [60, 0, 10, 90], [60, 0, 10, 70], [50, 5, 6, 1]];
  const piece = { tracks: [{ notes }] };
  const normal = normalizePiece(piece);
  const sorted = [[60, 0, 10, 70], [60, 0, 10, 90], [60, 0, 20, 80], [64, 0, 10, 80], [50, 5, 6, 1]];
  assert.deepEqual(normal.tracks[0].notes, sorted);
  assert.equal(piece.tracks[0].notes[0][0], 64, 'the original is untouched');
});

test('what does not pack (fractional ticks, extra fields) still comes back exactly', async () => {
  const piece = {
    ...realisticPiece(2),
    custom: { anything: [1, 'two', null] },
  };
  piece.tracks[0].notes[3] = [61, 100.5, 200.25, 64];
  piece.tracks[1].notes = [];
  piece.tracks.push({ name: 'gen', role: 'generated', program: 1, notes: [[60, -5, 10, 0]] });
  piece.bars = [0, 1920.5, 3840];
  const decoded = await decodeShare(await encodeShare({ piece }));
  assert.deepEqual(decoded.piece, normalizePiece(piece));
  assert.equal(decoded.model, undefined);
  assert.equal(decoded.seed, undefined);
});

test('an empty piece round-trips', async () => {
  const piece = { version: 1, name: '', ppq: 480, tempos: [], timeSignatures: [], bars: [] };
  Object.assign(piece, { endTick: 0, tracks: [], chords: [], phrases: [], promptBars: 0 });
  const shared = { piece, model: 'm', seed: 0, task: 'continuation', settings: {} };
  assert.deepEqual(await decodeShare(await encodeShare(shared)), shared);
});

test('the lanes set by hand and the velocities drawn in the roll round-trip', async () => {
  const piece = realisticPiece(5);
  piece.chordsSet = [0, 3];
  piece.phrasesSet = true;
  piece.tracks[0].notes = piece.tracks[0].notes.map((n, i) => [n[0], n[1], n[2], 1 + ((i * 37) % 127)]);
  const shared = { piece, ...extras };
  const back = await decodeShare(await encodeShare(shared));
  assert.deepEqual(normalizePiece(back.piece), normalizePiece(piece));
  assert.deepEqual([back.piece.chordsSet, back.piece.phrasesSet], [[0, 3], true]);
});

test('a track\'s pedal round-trips, and an older link without one still opens', async () => {
  const piece = realisticPiece(6);
  piece.tracks[2].pedal = Array.from({ length: 300 }, (_, i) => [i * 240, 64, i % 2 ? 0 : 127 - (i % 5)]);
  const back = await decodeShare(await encodeShare({ piece, ...extras }));
  assert.deepEqual(back.piece.tracks[2].pedal, piece.tracks[2].pedal);
  assert.equal(back.piece.tracks[0].pedal, undefined);
  const older = realisticPiece(6);
  const opened = await decodeShare(await encodeShare({ piece: older, ...extras }));
  assert.deepEqual(normalizePiece(opened.piece), normalizePiece(older));
});

test('the texture chosen (a gallery name, or the bars taken with Use as texture) round-trips', async () => {
  const donor = {
    name: 'bars 9-12 of song.mid', bars: [16, 16, 16, 16], chords: ['C', 'Am', 'F', 'G C'],
    notes: Array.from({ length: 64 }, (_, i) => [36 + (i % 24), i, 1 + (i % 3)]),
  };
  for (const settings of [{ texture: 'arpeggio', textureDonor: null }, { texture: 'chosen', textureDonor: donor }]) {
    const shared = { piece: realisticPiece(3), model: 'm', seed: 4, task: 'accompaniment', settings };
    const back = await decodeShare(await encodeShare(shared));
    assert.deepEqual(back.settings, settings);
  }
});

test('flipped characters give the "damaged" error', async () => {
  const fragment = await encodeShare({ piece: realisticPiece(3), ...extras });
  const body = fragment.length - 3;
  let tried = 0;
  // Every position but the last two characters, whose spare bits deflate itself ignores.
  for (let i = 3; i < fragment.length - 2; i += Math.max(1, Math.floor(body / 40))) {
    const c = fragment[i];
    const flipped = fragment.slice(0, i) + (c === 'A' ? 'B' : 'A') + fragment.slice(i + 1);
    await rejectsWith(decodeShare(flipped), 'damaged', /damaged or incomplete/);
    tried++;
  }
  assert.ok(tried >= 30);
  const badCharacter = fragment.slice(0, 10) + '!' + fragment.slice(11);
  await rejectsWith(decodeShare(badCharacter), 'damaged', /damaged/);
});

test('truncated links give the "damaged" error', async () => {
  const fragment = await encodeShare({ piece: realisticPiece(4), ...extras });
  const n = fragment.length;
  for (const length of [n - 1, n - 2, n - 7, Math.floor(n / 2), 40, 4, 3, 2, 1, 0]) {
    await rejectsWith(decodeShare(fragment.slice(0, length)), 'damaged', /damaged or incomplete/);
  }
  await rejectsWith(decodeShare('not a link at all'), 'damaged', /damaged/);
});

test('a link from a future version says so', async () => {
  const fragment = await encodeShare({ piece: realisticPiece(5), ...extras });
  const v7 = `v7${fragment.slice(2)}`;
  await rejectsWith(decodeShare(v7), 'version', /newer pianoformer \(format v7\)/);
  await rejectsWith(decodeShare('v12.AAAA'), 'version', /format v12/);
  await rejectsWith(decodeShare('v0.AAAA'), 'damaged', /format v0 does not exist/);
});

test('a piece too large for a link says how large and what to do instead', async () => {
  const rand = prng(9);
  const notes = Array.from({ length: 30000 }, () => {
    const start = Math.floor(rand() * 1e7);
    const end = start + Math.floor(rand() * 1e5);
    return [Math.floor(rand() * 128), start, end, Math.floor(rand() * 128)];
  });
  const piece = { ...realisticPiece(6), tracks: [{ name: 'noise', role: 'other', program: 0, notes }] };
  await rejectsWith(
    encodeShare({ piece }),
    'too-large',
    /too large for a link \(\d+ kB\); download the MIDI file instead/,
  );
  assert.equal(MAX_SHARE_CHARS, 60000);
});

// Builds a v1 (or `version`) fragment around any payload, the way a hostile or buggy encoder
// could.
async function forge(payload, version = 1) {
  let c = 0xffffffff;
  for (const byte of payload) {
    c ^= byte;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  }
  c = (c ^ 0xffffffff) >>> 0;
  const withCrc = new Uint8Array([...payload, c >>> 24, (c >>> 16) & 255, (c >>> 8) & 255, c & 255]);
  const stream = new Blob([withCrc]).stream().pipeThrough(new CompressionStream('deflate-raw'));
  return `v${version}.${toBase64Url(new Uint8Array(await new Response(stream).arrayBuffer()))}`;
}

function jsonPayload(header, tail = []) {
  const json = [...new TextEncoder().encode(JSON.stringify(header))];
  const length = [];
  for (let n = json.length; ; n = Math.floor(n / 128)) {
    if (n < 128) {
      length.push(n);
      break;
    }
    length.push((n % 128) + 128);
  }
  return new Uint8Array([...length, ...json, ...tail]);
}

test('a well-formed link holding the wrong shapes says it cannot be opened', async () => {
  const open = async (header, tail) => decodeShare(await forge(jsonPayload(header, tail)));
  await rejectsWith(open({ piece: { tracks: 'x' } }), 'shape', /does not hold a piece/);
  await rejectsWith(open([1, 2]), 'shape', /does not hold a piece/);
  await rejectsWith(
    open({ piece: { tracks: [{ notes: [[1, 2]] }] } }),
    'shape',
    /track 1/,
  );
  await rejectsWith(
    open({ piece: { tracks: [] }, seed: 'x' }),
    'shape',
    /seed/,
  );
  await rejectsWith(
    open({ piece: { tracks: [{ notes: [], pedal: [[0, 64, 300]] }] } }),
    'shape',
    /track 1: a pedal event cannot be \(controller 64, value 300/,
  );
  // The marks of lanes set by hand (roll editing keeps them) must be what they say.
  await rejectsWith(open({ piece: { tracks: [], chordsSet: ['1'] } }), 'shape', /chords set by hand/);
  await rejectsWith(open({ piece: { tracks: [], phrasesSet: 1 } }), 'shape', /phrases set by hand/);
  // A forged note count far beyond the data must not allocate, only fail.
  await rejectsWith(
    open({ piece: { tracks: [{ notes: null }] } }, [0xff, 0xff, 0xff, 0x7f]),
    'damaged',
    /larger than the data/,
  );
  // One packed note: start +1, duration 2, pitch 60, velocity 50, all zigzagged.
  const ok = await open({ piece: { tracks: [{ notes: null }] } }, [1, 2, 4, 120, 100]);
  assert.deepEqual(ok.piece.tracks[0].notes, [[60, 1, 3, 50]]);
});

test('a comparison (v2) carries both results; a link without one stays v1', async () => {
  const piece = realisticPiece(11);
  const other = realisticPiece(12);
  other.tracks[2].notes = other.tracks[2].notes.slice(0, 100); // a sparser piano
  const compare = { model: 'continuation-ape', piece: other };
  const fragment = await encodeShare({ piece, ...extras, compare });
  assert.match(fragment, /^v2\.[A-Za-z0-9_-]+$/);
  const decoded = await decodeShare(fragment);
  assert.deepEqual(decoded, {
    piece: normalizePiece(piece),
    ...extras,
    compare: { model: 'continuation-ape', piece: normalizePiece(other) },
  });
  const single = await encodeShare({ piece, ...extras });
  assert.match(single, /^v1\./);
  // The second piece shares most of the first's notes: deflate finds them, so a comparison
  // costs far less than two links.
  const message = `comparison link: ${fragment.length} characters; one piece: ${single.length}`;
  console.log(message);
  assert.ok(fragment.length < 2 * single.length);
  // Bad comparisons: refused when sharing, a sentence when opening.
  await rejectsWith(encodeShare({ piece, model: 'a', compare: { model: 7, piece: other } }), 'shape', /compared model/);
  await rejectsWith(encodeShare({ piece, model: 'a', compare: { model: 'x', piece: { tracks: 1 } } }), 'shape', /compared piece/);
  await rejectsWith(encodeShare({ piece, compare: { model: 'x', piece: other } }), 'shape', /model id of a comparison/);
  const open = async (header, tail, version) => decodeShare(await forge(jsonPayload(header, tail), version));
  const base = { piece: { tracks: [] } };
  await rejectsWith(open({ ...base, compare: { model: 'x', piece: { tracks: [] } } }, [], 1), 'damaged', /v1 link holds no comparison/);
  await rejectsWith(open({ ...base, compare: 'x' }, [], 2), 'shape', /comparison has no piece/);
  await rejectsWith(open({ ...base, model: 'x', compare: { piece: { tracks: [] } } }, [], 2), 'shape', /compared model/);
  await rejectsWith(open({ ...base, compare: { model: 'y', piece: { tracks: [] } } }, [], 2), 'shape', /model id of a comparison/);
  const ok = await open({ ...base, model: 'n', compare: { model: 'm', piece: { tracks: [{ notes: null }] } } }, [1, 2, 4, 120, 100], 2);
  assert.deepEqual(ok.compare, { model: 'm', piece: { tracks: [{ notes: [[60, 1, 3, 50]] }] } });
});

test('encodeShare refuses what is not a piece', async () => {
  await rejectsWith(encodeShare({ piece: null }), 'shape', /cannot be shared/);
  const nan = { tracks: [{ notes: [[60, 0, NaN, 1]] }] };
  await rejectsWith(encodeShare({ piece: nan }), 'shape', /track 1/);
  await rejectsWith(encodeShare({ piece: { tracks: [] }, seed: 1.5 }), 'shape', /seed/);
});

test('a decompression bomb stops at 8 MB', async () => {
  const zeros = new Uint8Array(9 * 1024 * 1024);
  const fragment = await forge(zeros);
  assert.ok(fragment.length < MAX_SHARE_CHARS);
  await rejectsWith(decodeShare(fragment), 'damaged', /more than 8 MB/);
});

test('base64url matches Node and rejects what is not base64url', () => {
  for (let n = 0; n < 40; n++) {
    const bytes = new Uint8Array(n).map((_, i) => (i * 97 + n * 13) & 255);
    const text = toBase64Url(bytes);
    assert.equal(text, Buffer.from(bytes).toString('base64url'));
    assert.deepEqual(fromBase64Url(text), bytes);
  }
  assert.equal(fromBase64Url('AAAAA'), null, 'a length of 4k+1 cannot be');
  assert.equal(fromBase64Url('AB'), null, 'spare bits must be zero');
  assert.equal(fromBase64Url('A+'), null, 'standard base64 characters are not base64url');
});
