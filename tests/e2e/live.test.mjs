// End-to-end: playing along live. A melody-only file at 120 bpm is dropped (its chord lane the
// harmonizer's); a fake MIDI keyboard plays its melody back into a take with "Piano plays along
// live" on. The live piano's notes and its pedal are decided in the Worker a sixteenth at a
// time and scheduled (never after their sixteenth began); after Stop the piece holds the take's
// melody and the live piano with the pedal it played (one edit: Undo takes both back). On the CPU backend. Needs pkg/ (make
// wasm), the samples (make samples) and Chromium (make setup).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { OUT, cspViolations, dropFile, launch, serveApp } from './browser.mjs';
import { fakeMidi, melodyFile, playLiveTake } from './live-take.mjs';

let server;
let base;
let file;

before(async () => {
  let wasm;
  ({ server, base, wasm } = await serveApp({ wasm: true }));
  file = melodyFile(wasm, { bars: 8, bpm: 120 });
});

after(() => server?.close());

test('the piano plays along live with a melody played in, and the take goes into the piece', { timeout: 600_000 }, async () => {
  const { browser, page, log } = await launch({ webgpu: false, url: `${base}?backend=cpu`, init: fakeMidi });
  try {
    await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: 120_000 });
    assert.equal(await page.evaluate(() => window.pianoformer.state), 'ready', log.join('\n'));
    await dropFile(page, file.bytes, 'live.mid');
    const before = await page.evaluate(() => window.pianoformer.piece);
    assert.ok(before.chords.some((c) => c), 'the lane holds chords to follow');
    await page.click('#midi-connect');
    await page.waitForFunction(() => /Fake Keys/.test(document.getElementById('notice').textContent), null, { timeout: 10_000 });
    await page.selectOption('#quantise', '4');

    // Four bars of the melody (8 s at 120 bpm) played back through the keyboard.
    const live = await playLiveTake(page, { notes: file.notes, ppq: file.ppq, bpm: 120, seconds: 8 });
    assert.ok(live, 'the take kept its live figures');
    assert.ok(live.steps >= 60, `the piano decided the sixteenths as they came: ${live.steps}`);
    assert.equal(live.hits + live.late, live.steps);
    assert.ok(live.hits > 0 && live.minMarginMs >= 0, `sounded sixteenths were scheduled before they began: ${live.minMarginMs} ms`);
    assert.ok(live.notes > 0, `the live piano played: ${JSON.stringify({ ...live, latencies: undefined, workerMs: undefined })}`);
    assert.ok(live.keyDelays.length >= 8, 'the keys were heard');
    await page.waitForFunction(() => /live piano notes/.test(document.getElementById('notice').textContent), null, { timeout: 30_000 });
    assert.match(await page.textContent('#live-meter'), /Live piano: \d+ sixteenths, [\d.]+ % in time · decision p50/);
    await page.screenshot({ path: join(OUT, 'live-take.png'), fullPage: true });

    const after = await page.evaluate(() => window.pianoformer.piece);
    const melody = (p) => p.tracks.find((t) => t.role === 'melody').notes;
    const pianoNotes = after.tracks.find((t) => t.role === 'generated')?.notes ?? [];
    assert.ok(pianoNotes.length > 0, 'the live piano is in the piece');
    const beat = after.ppq;
    const first = melody(before).filter((n) => n[1] < 16 * beat).map((n) => n.slice(0, 2));
    const played = melody(after).filter((n) => n[1] < 16 * beat).map((n) => n.slice(0, 2));
    assert.ok(played.length >= first.length - 2, `the take's melody: ${played.length} of ${first.length} notes`);
    assert.ok(pianoNotes.every((n) => n[1] >= 0 && n[2] > n[1] && n[1] <= 17 * beat), 'piano notes within the take');
    assert.deepEqual(after.chords.slice(0, 4), before.chords.slice(0, 4), 'planned chords are kept');
    // The take's piano is pedalled by the live (causal) pedal as it plays (the page's default):
    // its moves came with the sixteenths, held notes past their release in the live sampler,
    // and are what the piece keeps, inside the take.
    const pedal = after.tracks.find((t) => t.role === 'generated')?.pedal ?? [];
    assert.ok(pedal.some((e) => e[1] === 64 && e[2] >= 64), `the live piano's pedal: ${JSON.stringify(pedal)}`);
    assert.ok(pedal.every((e) => e[0] <= 17 * beat), 'pedal within the take');
    assert.ok(live.pedal.some(([, v]) => v >= 64), `the pedal moved while the take played: ${JSON.stringify(live.pedal)}`);
    assert.ok(live.pedalled > 0, 'the live pedal held notes past their release');
    const kept = new Set(pedal.map((e) => `${e[0]}:${e[2]}`));
    assert.ok(live.pedal.every(([tick, v]) => kept.has(`${tick}:${v}`)), 'the pedal heard is the pedal kept');
    console.log(`the live piano: ${pianoNotes.length} notes, ${pedal.length} pedal events (${live.pedal.length} moved live, up to ${live.pedalled} notes held by it)`);

    // One Undo takes the take and its piano back.
    await page.click('#undo');
    const undone = await page.evaluate(() => window.pianoformer.piece);
    assert.deepEqual(undone.tracks, before.tracks);
    assert.deepEqual(log.filter((l) => l.startsWith('[pageerror]')), []);
    assert.deepEqual(await cspViolations(page, log), []);
  } finally {
    await browser.close();
  }
});
