// A fuzzer for share links, the one input the page decodes that anybody can forge.
// Mutates valid links at three levels — the link text, the payload under the compression
// (checksum recomputed, so mutations get past it) and the JSON header's values — and checks
// that decodeShare either returns a piece that normalizes and re-encodes, or rejects with a
// ShareError saying why in words. Anything else (another exception, a piece that breaks later)
// is a finding, written to the findings folder.
//
//   node tools/fuzz-share.mjs [--seconds 60] [--seed 1] [--out target/fuzz-share]
//
// tests/js/share-fuzz.test.mjs runs a few thousand seeded iterations of the same loop.
import { mkdirSync, writeFileSync } from 'node:fs';
import { ShareError, crc32, decodeShare, encodeShare, fromBase64Url, normalizePiece, toBase64Url } from '../www/share.js';

const CODES = new Set(['version', 'damaged', 'shape', 'too-large']);

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

/**
 * Small valid links to start from: packed notes, a track whose notes stay JSON, and a comparison
 * of two results (v2).
 */
function seeds() {
  const ppq = 480;
  const bars = [0, 1920, 3840, 5760];
  const melody = [[72, 0, 480, 90], [74, 480, 960, 90], [76, 960, 1920, 90], [79, 1920, 3840, 80]];
  const piano = [[48, 0, 1920, 70], [52, 0, 1920, 70], [55, 0, 1920, 70], [43, 1920, 3840, 70]];
  const piece = {
    version: 1,
    name: 'fuzz.mid',
    ppq,
    tempos: [[0, 500000], [3840, 400000]],
    timeSignatures: [[0, 4, 4]],
    bars,
    endTick: 5760,
    tracks: [
      { name: 'MELODY', role: 'melody', program: 0, notes: melody },
      { name: 'PIANO', role: 'piano', program: 0, notes: piano },
    ],
    chords: ['C', 'G', 'Am', 'F'],
    phrases: [['A', 4]],
    promptBars: 4,
  };
  const extras = { model: 'accompaniment-ar', seed: 7, task: 'accompaniment', settings: { temperature: 1 } };
  const odd = structuredClone(piece);
  odd.tracks[0].notes[0][1] = 2 ** 40; // too large to pack: stays JSON
  odd.tracks[0].notes.sort((a, b) => a[1] - b[1]);
  const other = structuredClone(piece);
  other.tracks[1].notes = [[45, 0, 3840, 60]];
  return [
    { piece, ...extras },
    { piece: odd, ...extras, settings: {} },
    { piece, ...extras, compare: { model: 'accompaniment-fstripe', piece: other } }, // v2
  ];
}

async function inflate(bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate-raw'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

async function deflate(bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new CompressionStream('deflate-raw'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

function uint(v) {
  const out = [];
  while (v >= 128) {
    out.push((v % 128) + 128);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return out;
}

function withCrc(body) {
  const crc = crc32(body);
  return Uint8Array.from([...body, crc >>> 24, (crc >>> 16) & 255, (crc >>> 8) & 255, crc & 255]);
}

const WEIRD = [null, true, 0, -1, 0.5, 1e300, -1e300, 2 ** 53, -(2 ** 31), 127, 128, 1e6, '', 'x'.repeat(300),
  'C', 'Zz', '<script>', [], [0], [[0, 0]], [[60, 0, 10, 100, 5]], {}, { notes: null }];

function mutateJson(value, rand) {
  const pick = (list) => list[Math.floor(rand() * list.length)];
  // Walk to a random node and change it.
  const path = [];
  let node = value;
  while (node && typeof node === 'object' && rand() < 0.8) {
    const keys = Array.isArray(node) ? node.map((_, i) => i) : Object.keys(node);
    if (!keys.length) break;
    const key = pick(keys);
    path.push([node, key]);
    node = node[key];
  }
  if (!path.length) return pick(WEIRD);
  const [parent, key] = path.at(-1);
  const r = rand();
  if (r < 0.15 && !Array.isArray(parent)) delete parent[key];
  else if (r < 0.25 && Array.isArray(parent)) parent.splice(key, 0, structuredClone(parent[key]));
  else if (r < 0.35 && Array.isArray(parent)) parent.splice(key, 1);
  else if (r < 0.5 && typeof parent[key] === 'number') parent[key] = parent[key] + pick([-1, 1, -1000, 1e9]);
  else parent[key] = structuredClone(pick(WEIRD));
  return value;
}

/** One mutated fragment from `fragment` (a valid link), at a random level. */
async function mutate(fragment, rand) {
  const pick = (list) => list[Math.floor(rand() * list.length)];
  const level = rand();
  if (level < 0.3) {
    // The link text.
    const chars = [...fragment];
    const n = 1 + Math.floor(rand() * 4);
    for (let i = 0; i < n; i++) {
      const at = Math.floor(rand() * chars.length);
      const r = rand();
      if (r < 0.3) chars[at] = pick([...'ABCxyz019-_.%+/= v#']);
      else if (r < 0.5) chars.splice(at, 1);
      else if (r < 0.7) chars.splice(at, 0, pick([...'Aa0_-']));
      else if (r < 0.85) chars.length = at;
      else chars.splice(at, 0, ...chars.slice(at, at + 40));
    }
    return chars.join('');
  }
  const [, prefix, data] = /^(v\d+\.)(.*)$/.exec(fragment);
  const payload = await inflate(fromBase64Url(data));
  const body = payload.subarray(0, payload.length - 4);
  let next;
  if (level < 0.65) {
    // The payload's bytes, checksum recomputed.
    const bytes = [...body];
    const n = 1 + Math.floor(rand() * 6);
    for (let i = 0; i < n; i++) {
      const at = Math.floor(rand() * bytes.length);
      const r = rand();
      if (r < 0.4) bytes[at] ^= 1 << Math.floor(rand() * 8);
      else if (r < 0.55) bytes[at] = pick([0, 127, 128, 255]);
      else if (r < 0.7) bytes.splice(at, 1);
      else if (r < 0.85) bytes.splice(at, 0, pick([0, 127, 128, 255]), 255, 255, 255, 255, 255, 255, 255);
      else bytes.length = at;
    }
    next = withCrc(Uint8Array.from(bytes));
  } else {
    // The JSON header's values, packed data kept.
    let pos = 0;
    let len = 0;
    for (let scale = 1; ; scale *= 128) {
      const b = body[pos++];
      len += (b & 127) * scale;
      if (b < 128) break;
    }
    const header = JSON.parse(new TextDecoder().decode(body.subarray(pos, pos + len)));
    const json = new TextEncoder().encode(JSON.stringify(mutateJson(header, rand)));
    next = withCrc(Uint8Array.from([...uint(json.length), ...json, ...body.subarray(pos + len)]));
  }
  return prefix + toBase64Url(await deflate(next));
}

/** What is wrong with how decodeShare treated `fragment`, or null when it behaved. */
export async function check(fragment) {
  let shared;
  try {
    shared = await decodeShare(fragment);
  } catch (e) {
    if (e instanceof ShareError && CODES.has(e.code) && /^This /.test(e.message)) return null;
    return `threw ${e?.name}: ${e?.message}`;
  }
  try {
    normalizePiece(shared.piece);
    await encodeShare(shared);
  } catch (e) {
    if (e instanceof ShareError && e.code === 'too-large') return null;
    return `accepted, then ${e?.name}: ${e?.message}`;
  }
  return null;
}

/**
 * Runs the fuzzer for `iterations` or `seconds`, whichever ends first; returns figures and
 * findings ({ fragment, problem }).
 */
export async function fuzz({ iterations = Infinity, seconds = Infinity, seed = 1, onFinding } = {}) {
  const rand = prng(seed);
  const corpus = [];
  for (const s of seeds()) corpus.push(await encodeShare(s));
  const start = performance.now();
  const outcomes = new Map();
  const findings = [];
  let runs = 0;
  while (runs < iterations && performance.now() - start < seconds * 1000) {
    const parent = corpus[Math.floor(rand() * corpus.length)];
    let fragment;
    try {
      fragment = await mutate(parent, rand);
    } catch {
      continue; // a parent the structured mutators cannot read (itself a mutant)
    }
    runs++;
    const problem = await check(fragment);
    let outcome = 'accepted';
    if (problem) {
      findings.push({ fragment, problem });
      onFinding?.({ fragment, problem });
      outcome = 'finding';
    } else {
      try {
        await decodeShare(fragment);
        // Accepted mutants join the corpus: the next mutations start from them.
        if (corpus.length < 256) corpus.push(fragment);
      } catch (e) {
        outcome = `${e.code}: ${e.message.replace(/\d+/g, 'N')}`;
      }
    }
    outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
  }
  return { runs, seconds: (performance.now() - start) / 1000, corpus: corpus.length, outcomes, findings };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const arg = (name, fallback) => {
    const i = process.argv.indexOf(`--${name}`);
    return i > 0 ? process.argv[i + 1] : fallback;
  };
  const out = arg('out', 'target/fuzz-share');
  mkdirSync(out, { recursive: true });
  const result = await fuzz({
    seconds: Number(arg('seconds', 60)),
    seed: Number(arg('seed', 1)),
    onFinding: ({ fragment, problem }) => {
      const file = `${out}/finding-${crc32(new TextEncoder().encode(fragment)).toString(16)}.txt`;
      writeFileSync(file, `${problem}\n${fragment}\n`);
      console.log(`finding: ${problem} (${file})`);
    },
  });
  console.log(`${result.runs} executions in ${result.seconds.toFixed(0)} s (${(result.runs / result.seconds).toFixed(0)}/s), corpus ${result.corpus}, findings ${result.findings.length}`);
  for (const [outcome, n] of [...result.outcomes].sort((a, b) => b[1] - a[1])) console.log(`${String(n).padStart(8)}  ${outcome}`);
  process.exit(result.findings.length ? 1 : 0);
}
