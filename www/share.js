// Share links with no server: the whole piece (and the model, seed and settings that made it)
// travels in the URL fragment, which browsers never send to a server.
//
// A fragment is `v1.<base64url>` or `v2.<base64url>`. The version sits outside the compressed
// data so that a later pianoformer can still read older links, and an older one can say "made by
// a newer pianoformer" instead of "damaged".
//
// v2 is v1 with a comparison: the header's `compare` is `{ model, piece }`, the other model's
// result on the same piece and seed, and that piece's bars and tracks are packed after the first
// piece's, the same way. A link without a comparison is still written as v1, so pages from before
// v2 open it.
//
// v1 payload, compressed with deflate-raw (CompressionStream), all integers LEB128 varints:
//   headerLength, header      UTF-8 JSON: { piece, model, seed, task, settings }, where the
//                             piece's `bars` and each track's `notes` are `null` when they are
//                             packed below (they stay inline JSON when they hold anything but
//                             whole ticks, so any plain-JSON piece comes back exactly)
//   bars                      count, then zigzag deltas from the previous bar (from 0 first)
//   per packed track, in order:
//     count, then four columns of `count` values each:
//     zigzag start deltas · zigzag durations (end - start) · zigzag pitches · zigzag velocities
//     (columns rather than rows: runs of similar numbers are what deflate compresses best)
//   crc32                     4 bytes, big-endian, of everything above; deflate-raw has no
//                             check of its own, and a flipped character must not decode to a
//                             subtly different song
//
// encodeShare normalises note order: each track's notes come back sorted by
// (start, pitch, end, velocity); `normalizePiece` applies the same order for comparisons.

import { pedalProblem } from './pedal.js';

/** The newest format this page reads and writes (see the top of this file). */
export const SHARE_VERSION = 2;
/** Longest fragment encodeShare makes: URLs much longer break in chat apps and some browsers. */
export const MAX_SHARE_CHARS = 60000;
/** Most bytes a link may decompress to: a deflate bomb in a link must not exhaust memory. */
export const MAX_DECODED_BYTES = 8 * 1024 * 1024;

// Whole ticks up to 2^40 pack; their deltas and zigzags then stay far inside 2^53.
const PACK_LIMIT = 2 ** 40;

/** An Error whose `code` says which kind: 'version', 'damaged', 'shape' or 'too-large'. */
export class ShareError extends Error {
  constructor(code, message) {
    super(message);
    this.name = 'ShareError';
    this.code = code;
  }
}

const damaged = (why) =>
  new ShareError(
    'damaged',
    'This share link is damaged or incomplete; ask for the link again, or check that it was ' +
      `copied in full${why ? ` (${why})` : ''}.`,
  );

// ---------------------------------------------------------------- note order

function compareNotes(a, b) {
  return a[1] - b[1] || a[0] - b[0] || a[2] - b[2] || a[3] - b[3];
}

/** A deep copy of `piece` with every track's notes in the order decodeShare returns them. */
export function normalizePiece(piece) {
  const copy = structuredClone(piece);
  for (const track of copy.tracks ?? []) {
    if (Array.isArray(track.notes)) track.notes.sort(compareNotes);
  }
  return copy;
}

// ---------------------------------------------------------------- shape checks

const isObject = (x) => x !== null && typeof x === 'object' && !Array.isArray(x);
const isNumbers = (x, n) =>
  Array.isArray(x) && (n === undefined || x.length === n) && x.every(Number.isFinite);
const isListOf = (x, test) => Array.isArray(x) && x.every(test);

// Only what the page relies on; any other field travels as it is.
function shapeProblem(piece) {
  if (!isObject(piece)) return 'there is no piece';
  if (!isListOf(piece.tracks, isObject)) return 'it has no list of tracks';
  for (const [i, track] of piece.tracks.entries()) {
    if (!isListOf(track.notes, (n) => isNumbers(n) && n.length >= 4)) {
      return `track ${i + 1} has no list of [pitch, start, end, velocity] notes`;
    }
    const pedal = pedalProblem(track.pedal);
    if (pedal) return `track ${i + 1}: ${pedal}`;
  }
  const PLAIN = {
    ppq: 'resolution (ticks per quarter note) is',
    promptBars: 'number of prompt bars is',
    timeSignatures: 'time signatures are',
    chordsSet: 'list of chords set by hand is',
    phrasesSet: 'mark of phrases set by hand is',
  };
  const optional = {
    ppq: (x) => Number.isFinite(x) && x > 0,
    tempos: (x) => isListOf(x, (t) => isNumbers(t, 2)),
    timeSignatures: (x) => isListOf(x, (t) => isNumbers(t, 3)),
    bars: (x) => isNumbers(x),
    chords: (x) => isListOf(x, (c) => typeof c === 'string'),
    phrases: (x) =>
      isListOf(x, (p) => Array.isArray(p) && p.length === 2 && typeof p[0] === 'string' && Number.isInteger(p[1]) && p[1] > 0),
    promptBars: (x) => Number.isFinite(x),
    chordsSet: (x) => isNumbers(x),
    phrasesSet: (x) => typeof x === 'boolean',
    name: (x) => typeof x === 'string',
  };
  for (const [key, test] of Object.entries(optional)) {
    if (piece[key] !== undefined && !test(piece[key])) {
      return `its ${PLAIN[key] ?? `${key} ${key.endsWith('s') ? 'are' : 'is'}`} malformed`;
    }
  }
  return null;
}

function extrasProblem({ model, seed, task, settings, compare }) {
  if (model != null && typeof model !== 'string') return 'the model id is not a string';
  if (compare != null) {
    if (!isObject(compare)) return 'the comparison is not an object';
    if (typeof model !== 'string') return 'the model id of a comparison is not a string';
    if (typeof compare.model !== 'string') return 'the compared model id is not a string';
    const problem = shapeProblem(compare.piece);
    if (problem) return `the compared piece is malformed: ${problem}`;
  }
  if (seed != null && !Number.isSafeInteger(seed)) return 'the seed is not a whole number';
  if (task != null && typeof task !== 'string') return 'the task is not a string';
  if (settings != null && !isObject(settings)) return 'the settings are not an object';
  return null;
}

// ---------------------------------------------------------------- varints

class Writer {
  constructor() {
    this.bytes = new Uint8Array(1024);
    this.length = 0;
  }

  reserve(n) {
    if (this.length + n <= this.bytes.length) return;
    const grown = new Uint8Array(Math.max(this.bytes.length * 2, this.length + n));
    grown.set(this.bytes.subarray(0, this.length));
    this.bytes = grown;
  }

  // Arithmetic, not bit operations: values may pass 2^32.
  uint(v) {
    this.reserve(8);
    while (v >= 128) {
      this.bytes[this.length++] = (v % 128) + 128;
      v = Math.floor(v / 128);
    }
    this.bytes[this.length++] = v;
  }

  int(v) {
    this.uint(v < 0 ? -2 * v - 1 : 2 * v);
  }

  raw(bytes) {
    this.reserve(bytes.length);
    this.bytes.set(bytes, this.length);
    this.length += bytes.length;
  }

  result() {
    return this.bytes.subarray(0, this.length);
  }
}

class Reader {
  constructor(bytes) {
    this.bytes = bytes;
    this.pos = 0;
  }

  get left() {
    return this.bytes.length - this.pos;
  }

  uint() {
    let v = 0;
    let scale = 1;
    for (;;) {
      if (this.pos >= this.bytes.length) throw damaged('it ends in the middle of a number');
      const b = this.bytes[this.pos++];
      v += (b & 127) * scale;
      if (b < 128) return v;
      scale *= 128;
      if (scale >= 2 ** 49) throw damaged('a number in it is too long');
    }
  }

  int() {
    const z = this.uint();
    return z % 2 === 1 ? -(z + 1) / 2 : z / 2;
  }

  // A count of items that take at least `each` bytes: bounded by what is left, so a forged
  // count cannot make the decoder allocate gigabytes.
  count(each) {
    const n = this.uint();
    if (n * each > this.left) throw damaged('a count in it is larger than the data');
    return n;
  }

  raw(n) {
    if (n > this.left) throw damaged('it ends early');
    const out = this.bytes.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
}

// ---------------------------------------------------------------- packing

const packable = (x) => Number.isSafeInteger(x) && Math.abs(x) <= PACK_LIMIT;

function packBars(w, bars) {
  w.uint(bars.length);
  let last = 0;
  for (const b of bars) {
    w.int(b - last);
    last = b;
  }
}

function unpackBars(r) {
  const n = r.count(1);
  const bars = new Array(n);
  let last = 0;
  for (let i = 0; i < n; i++) bars[i] = last += r.int();
  return bars;
}

function packNotes(w, notes) {
  w.uint(notes.length);
  let last = 0;
  for (const n of notes) {
    w.int(n[1] - last);
    last = n[1];
  }
  for (const n of notes) w.int(n[2] - n[1]);
  for (const n of notes) w.int(n[0]);
  for (const n of notes) w.int(n[3]);
}

function unpackNotes(r) {
  const count = r.count(4);
  const notes = new Array(count);
  let last = 0;
  for (let i = 0; i < count; i++) notes[i] = [0, (last += r.int()), 0, 0];
  for (const n of notes) n[2] = n[1] + r.int();
  for (const n of notes) n[0] = r.int();
  for (const n of notes) n[3] = r.int();
  return notes;
}

// ---------------------------------------------------------------- payload

// What of `piece` packs as columns: { header (the piece with those parts null), pack(w) }.
function packing(piece) {
  const packBarsToo = Array.isArray(piece.bars) && piece.bars.every(packable);
  const packTrack = piece.tracks.map((t) =>
    t.notes.every((n) => n.length === 4 && n.every(packable)),
  );
  return {
    header: {
      ...piece,
      ...(packBarsToo ? { bars: null } : {}),
      tracks: piece.tracks.map((t, i) => ({ ...t, notes: packTrack[i] ? null : t.notes })),
    },
    pack(w) {
      if (packBarsToo) packBars(w, piece.bars);
      piece.tracks.forEach((t, i) => packTrack[i] && packNotes(w, t.notes));
    },
  };
}

// The parts of a piece `packing` left null, read back in the same order.
function unpackPiece(r, piece) {
  if (piece.bars === null) piece.bars = unpackBars(r);
  for (const track of piece.tracks) {
    if (isObject(track) && track.notes === null) track.notes = unpackNotes(r);
  }
}

function buildPayload(piece, extras) {
  const pieces = [packing(piece)];
  const header = { ...extras, piece: pieces[0].header };
  if (extras.compare) {
    pieces.push(packing(extras.compare.piece));
    header.compare = { ...extras.compare, piece: pieces[1].header };
  }
  const w = new Writer();
  const json = new TextEncoder().encode(JSON.stringify(header));
  w.uint(json.length);
  w.raw(json);
  for (const p of pieces) p.pack(w);
  const crc = crc32(w.result());
  w.raw([crc >>> 24, (crc >>> 16) & 255, (crc >>> 8) & 255, crc & 255]);
  return w.result();
}

function readPayload(bytes, version) {
  if (bytes.length < 5) throw damaged('it is too short');
  const body = bytes.subarray(0, bytes.length - 4);
  const t = bytes.subarray(bytes.length - 4);
  if (((t[0] << 24) | (t[1] << 16) | (t[2] << 8) | t[3]) >>> 0 !== crc32(body)) {
    throw damaged('its checksum does not match');
  }
  const r = new Reader(body);
  let header;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(r.raw(r.count(1))));
  } catch (e) {
    if (e instanceof ShareError) throw e;
    throw damaged('its header is not readable');
  }
  if (!isObject(header) || !isObject(header.piece) || !Array.isArray(header.piece.tracks)) {
    throw wrongShape('there is no piece');
  }
  unpackPiece(r, header.piece);
  if (header.compare !== undefined) {
    if (version < 2) throw damaged('a v1 link holds no comparison');
    const compared = header.compare?.piece;
    if (!isObject(compared) || !Array.isArray(compared.tracks)) {
      throw wrongShape('the comparison has no piece');
    }
    unpackPiece(r, compared);
  }
  if (r.left !== 0) throw damaged('it has data left over');
  return header;
}

const wrongShape = (why) =>
  new ShareError('shape', `This share link does not hold a piece pianoformer can open: ${why}.`);

// ---------------------------------------------------------------- compression

async function compress(bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new CompressionStream('deflate-raw'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

// Reads chunk by chunk so that it can stop at `limit` instead of inflating a bomb.
async function decompress(bytes, limit) {
  const reader = new Blob([bytes])
    .stream()
    .pipeThrough(new DecompressionStream('deflate-raw'))
    .getReader();
  const chunks = [];
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.length;
      if (total > limit) {
        reader.cancel().catch(() => {});
        throw damaged(`it unpacks to more than ${limit / 1024 / 1024} MB`);
      }
      chunks.push(value);
    }
  } catch (e) {
    if (e instanceof ShareError) throw e;
    throw damaged('its compressed data is broken');
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

// ---------------------------------------------------------------- base64url

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const LOOKUP = new Int16Array(128).fill(-1);
for (let i = 0; i < 64; i++) LOOKUP[ALPHABET.charCodeAt(i)] = i;

/** base64url without padding (RFC 4648 §5). */
export function toBase64Url(bytes) {
  let out = '';
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const v = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
    out += ALPHABET[v >> 18] + ALPHABET[(v >> 12) & 63];
    out += ALPHABET[(v >> 6) & 63] + ALPHABET[v & 63];
  }
  const rest = bytes.length - i;
  if (rest === 1) {
    const v = bytes[i] << 16;
    out += ALPHABET[v >> 18] + ALPHABET[(v >> 12) & 63];
  } else if (rest === 2) {
    const v = (bytes[i] << 16) | (bytes[i + 1] << 8);
    out += ALPHABET[v >> 18] + ALPHABET[(v >> 12) & 63] + ALPHABET[(v >> 6) & 63];
  }
  return out;
}

/** Inverse of toBase64Url; null when `text` is not base64url. */
export function fromBase64Url(text) {
  if (text.length % 4 === 1) return null;
  const out = new Uint8Array(Math.floor((text.length * 3) / 4));
  let acc = 0;
  let bits = 0;
  let at = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const v = c < 128 ? LOOKUP[c] : -1;
    if (v < 0) return null;
    acc = ((acc << 6) | v) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[at++] = (acc >> bits) & 255;
    }
  }
  // Left-over bits must be zero: one text per byte string, so no edit goes unnoticed.
  if ((acc & ((1 << bits) - 1)) !== 0) return null;
  return out;
}

// ---------------------------------------------------------------- crc32

const CRC_TABLE = new Uint32Array(256).map((_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c;
});

/** CRC-32 (IEEE) of `bytes`: the payload checksum (exported for the fuzzer, tools/fuzz-share.mjs). */
export function crc32(bytes) {
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]) & 255] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

// ---------------------------------------------------------------- the two calls

/**
 * The fragment (without '#') of a link that opens `piece` as it is, with the model, seed, task
 * and settings that made it, and optionally `compare: { model, piece }`, another model's result
 * on the same piece and seed. Notes come back in normalizePiece order.
 */
export async function encodeShare({ piece, model, seed, task, settings, compare }) {
  const problem = shapeProblem(piece) ?? extrasProblem({ model, seed, task, settings, compare });
  if (problem) throw new ShareError('shape', `This piece cannot be shared: ${problem}.`);
  const extras = { model, seed, task, settings };
  if (compare) extras.compare = { model: compare.model, piece: normalizePiece(compare.piece) };
  const payload = buildPayload(normalizePiece(piece), extras);
  const version = compare ? 2 : 1;
  const fragment = `v${version}.${toBase64Url(await compress(payload))}`;
  if (fragment.length > MAX_SHARE_CHARS) {
    throw new ShareError(
      'too-large',
      `This piece is too large for a link (${Math.ceil(fragment.length / 1000)} kB); ` +
        'download the MIDI file instead.',
    );
  }
  return fragment;
}

/**
 * What encodeShare packed: `{ piece, model, seed, task, settings }`, and `compare` when the link
 * holds a comparison; throws a ShareError.
 */
export async function decodeShare(fragment) {
  const text = String(fragment).replace(/^#/, '').replace(/\s+/g, '');
  const match = /^v(\d{1,6})\.(.*)$/s.exec(text);
  if (!match) throw damaged('it does not start with a format version');
  const version = Number(match[1]);
  if (version > SHARE_VERSION) {
    throw new ShareError(
      'version',
      `This link was made by a newer pianoformer (format v${version}) than this page, which ` +
        `reads format v${SHARE_VERSION}; reload the page to get the newest version.`,
    );
  }
  if (version < 1) throw damaged(`format v${version} does not exist`);
  const compressed = fromBase64Url(match[2]);
  if (!compressed || compressed.length === 0) throw damaged('it holds characters a link cannot');
  const header = readPayload(await decompress(compressed, MAX_DECODED_BYTES), version);
  const problem = shapeProblem(header.piece) ?? extrasProblem(header);
  if (problem) throw wrongShape(problem);
  const { piece, model, seed, task, settings, compare } = header;
  return compare
    ? { piece, model, seed, task, settings, compare: { model: compare.model, piece: compare.piece } }
    : { piece, model, seed, task, settings };
}
