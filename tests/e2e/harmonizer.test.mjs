// End-to-end: a melody without an accompaniment gets its chord lane from the harmonizer (not a
// flood of sus chords from the detector), the lane says so, "Suggest chords" rewrites the
// selected bars only and Undo takes it back, and the accompaniment then plays on those chords.
// The melody is the bundled example's (written by the project's own code) with its piano taken
// out. On the CPU backend. Needs pkg/ (make wasm).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { cspViolations, launch, serveApp, OUT } from './browser.mjs';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';

const SLOW = 300_000;
let server;
let base;
let melody;

before(async () => {
  let wasm;
  ({ server, base, wasm } = await serveApp({ wasm: true }));
  const piece = JSON.parse(wasm.readMidi(wasm.exampleMidi(7, 8), 'tune.mid'));
  piece.tracks = piece.tracks.filter((t) => t.role === 'melody');
  melody = wasm.writeMidi(JSON.stringify(piece));
});

after(() => server?.close());

test('a melody alone gets the harmonizer\'s chords; Suggest chords and Undo; the piano follows', { timeout: 2 * SLOW }, async () => {
  const { browser, page, log } = await launch({ webgpu: false, url: `${base}?backend=cpu` });
  try {
    await page.waitForFunction(() => document.body.dataset.state === 'ready', null, { timeout: SLOW });
    await page.evaluate(
      ({ data }) => {
        const file = new File([new Uint8Array(data)], 'tune.mid', { type: 'audio/midi' });
        const dt = new DataTransfer();
        dt.items.add(file);
        for (const type of ['dragenter', 'dragover', 'drop']) {
          document.querySelector('main').dispatchEvent(new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true }));
        }
      },
      { data: [...melody] },
    );
    await page.waitForFunction(() => window.pianoformer.piece?.name === 'tune.mid', null, { timeout: 60_000 });
    const piece = await page.evaluate(() => window.pianoformer.piece);
    assert.equal(piece.chordSource, 'harmonizer', `${await page.evaluate(() => document.getElementById('notice')?.textContent)}\n${log.join('\n')}`);
    assert.match(await page.textContent('#chord-source'), /harmonizer/);
    const chords = piece.chords.flatMap((c) => c.split(/\s+/)).filter((c) => c && c !== 'N');
    assert.ok(chords.length >= 8, `a chord in every bar: ${piece.chords}`);
    const sus = chords.filter((c) => /sus/.test(c)).length;
    assert.ok(sus / chords.length <= 0.2, `no flood of sus chords: ${piece.chords}`);
    console.log(`harmonizer lane: ${piece.chords.join(' | ')}`);

    // Bars 3-4 selected in the chord lane; "Suggest chords" until they change (each press is
    // another draw); the other bars stay; Undo brings the lane back.
    await page.focus('canvas[aria-label^="Chord lane"]');
    await page.keyboard.press('Home');
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('Shift+ArrowRight');
    let after = piece;
    for (let i = 0; i < 6 && after.chords.slice(2, 4).join() === piece.chords.slice(2, 4).join(); i++) {
      await page.waitForFunction(() => !document.getElementById('suggest-chords').disabled);
      await page.evaluate(() => { document.getElementById('notice').textContent = ''; });
      await page.click('#suggest-chords');
      await page.waitForFunction(
        () => document.getElementById('notice').textContent.includes('from the harmonizer') || !document.getElementById('error').hidden,
        null,
        { timeout: 60_000 },
      );
      assert.equal(await page.evaluate(() => document.getElementById('error').hidden), true, await page.evaluate(() => window.pianoformer.error));
      after = await page.evaluate(() => window.pianoformer.piece);
    }
    assert.notDeepEqual(after.chords.slice(2, 4), piece.chords.slice(2, 4), 'the selected bars got other chords');
    assert.deepEqual([...after.chords.slice(0, 2), ...after.chords.slice(4)], [...piece.chords.slice(0, 2), ...piece.chords.slice(4)], 'the rest of the lane stays');
    console.log(`suggested for bars 3-4: ${after.chords.slice(2, 4).join(' | ')}`);
    await page.screenshot({ path: join(OUT, 'harmonizer-suggest.png'), fullPage: true });
    while (JSON.stringify(await page.evaluate(() => window.pianoformer.piece.chords)) !== JSON.stringify(piece.chords)) {
      assert.equal(await page.evaluate(() => document.getElementById('undo').disabled), false, 'Undo brings the lane back');
      await page.click('#undo');
    }

    // Alternatives: four progressions for bars 3-4 in the strip under the roll, the most likely
    // first; key 2 auditions the second (the piece plays), Enter keeps it as one undoable
    // edit; another offer, Esc, keeps none.
    await page.fill('#alternatives', '4');
    const offer = async () => {
      await page.focus('canvas[aria-label^="Chord lane"]');
      await page.keyboard.press('Home');
      await page.keyboard.press('ArrowRight');
      await page.keyboard.press('ArrowRight');
      await page.keyboard.press('Shift+ArrowRight');
      await page.waitForFunction(() => !document.getElementById('suggest-chords').disabled);
      await page.click('#suggest-chords');
      await page.waitForFunction(
        () => !document.getElementById('alternatives-strip').hidden || !document.getElementById('error').hidden,
        null,
        { timeout: 60_000 },
      );
      assert.equal(await page.evaluate(() => document.getElementById('error').hidden), true, await page.evaluate(() => window.pianoformer.error));
      return page.$$eval('#alternatives-list .chart', (charts) => charts.map((c) => c.textContent.split(' | ')));
    };
    const offered = await offer();
    assert.ok(offered.length >= 2 && offered.length <= 4, `alternatives: ${JSON.stringify(offered)}`);
    assert.ok(offered.every((cells) => cells.length === 2), 'two bars each');
    assert.notDeepEqual(offered[1], offered[0], 'another progression');
    console.log(`alternatives for bars 3-4: ${offered.map((c) => c.join(' | ')).join(' / ')}`);
    await page.screenshot({ path: join(OUT, 'harmonizer-alternatives.png'), fullPage: true });
    await page.keyboard.press('2');
    await page.waitForFunction(() => window.pianoformer.playing && window.pianoformer.alternatives()?.playing === 1, null, { timeout: 60_000 });
    assert.deepEqual(await page.evaluate(() => window.pianoformer.piece.chords), piece.chords, 'an audition changes nothing');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.getElementById('alternatives-strip').hidden);
    const kept = await page.evaluate(() => window.pianoformer.piece.chords);
    assert.deepEqual(kept.slice(2, 4), offered[1], 'the second is kept');
    assert.deepEqual([...kept.slice(0, 2), ...kept.slice(4)], [...piece.chords.slice(0, 2), ...piece.chords.slice(4)], 'the rest of the lane stays');
    assert.equal(await page.evaluate(() => window.pianoformer.playing), false, 'the audition stops');
    await page.click('#undo');
    assert.deepEqual(await page.evaluate(() => window.pianoformer.piece.chords), piece.chords, 'one Undo takes it back');
    await offer();
    await page.keyboard.press('Escape');
    await page.waitForFunction(() => document.getElementById('alternatives-strip').hidden);
    assert.deepEqual(await page.evaluate(() => window.pianoformer.piece.chords), piece.chords, 'Esc keeps none');
    await page.fill('#alternatives', '');

    // Chord colour at plain: every press suggests the same (most likely) progression.
    await page.$eval('#chord-colour', (e) => { e.value = '0'; e.dispatchEvent(new Event('change')); });
    const plain = [];
    for (let i = 0; i < 2; i++) {
      await page.waitForFunction(() => !document.getElementById('suggest-chords').disabled);
      await page.evaluate(() => { document.getElementById('notice').textContent = ''; });
      await page.click('#suggest-chords');
      await page.waitForFunction(() => document.getElementById('notice').textContent.includes('from the harmonizer'), null, { timeout: 60_000 });
      plain.push(await page.evaluate(() => window.pianoformer.piece.chords));
    }
    assert.deepEqual(plain[1], plain[0], 'plain: the same progression at every press');
    await page.click('#undo');
    await page.click('#undo');
    await page.$eval('#chord-colour', (e) => { e.value = '1'; e.dispatchEvent(new Event('change')); });

    // The accompaniment plays the harmonizer's chords.
    const n = await page.evaluate(() => window.pianoformer.generations.length);
    await page.selectOption('#task', 'accompaniment');
    await page.click('#generate');
    await page.waitForFunction((n) => window.pianoformer.generations.length > n || !document.getElementById('error').hidden, n, { timeout: SLOW });
    const run = await page.evaluate(() => window.pianoformer.generations.at(-1));
    assert.ok(run?.notes > 0, await page.evaluate(() => window.pianoformer.error));

    // A setting out of its range (settings/options.json) is refused in the words the Worker and the
    // CLI use (tests/options-cases.json), before anything runs, and the field gets the focus.
    const cases = JSON.parse(readFileSync('tests/options-cases.json', 'utf8'));
    const zero = cases.find((c) => c.key === 'temperature' && c.value === 0);
    await page.selectOption('#task', 'continuation');
    await page.fill('#temperature', '0');
    const runs = await page.evaluate(() => window.pianoformer.generations.length);
    await page.click('#generate');
    await page.waitForFunction(() => !document.getElementById('notice').hidden, null, { timeout: 10_000 });
    const said = await page.evaluate(() => document.getElementById('notice').textContent);
    assert.equal(said.toLowerCase(), `${zero.problem}.`.toLowerCase());
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'temperature');
    assert.equal(await page.evaluate(() => window.pianoformer.generations.length), runs, 'nothing ran');
    assert.equal(await page.getAttribute('#temperature', 'max'), '10', 'the input takes its range from the file');
    await page.fill('#temperature', '');
    assert.deepEqual(await cspViolations(page, log), []);
  } finally {
    await browser.close();
  }
});
