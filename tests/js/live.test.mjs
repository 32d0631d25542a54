// Live playing without a page (www/live-plan.js): which models play live, when each sixteenth
// of a take sounds, the meter's figures, and the take's piano and chords put into the piece.
import test from 'node:test';
import assert from 'node:assert/strict';
import { liveModels, meterFigures, meterText, quantile, stepTick, withLivePiano } from '../../www/live-plan.js';
import { emptyPiece } from '../../www/keys.js';

const acc = (name, extra = {}) => ({
  name,
  task: 'accompaniment',
  config: { conditioning: { labels: true, piano: true, ...extra } },
});
const whole = { name: 'acc-whole', task: 'accompaniment', config: { conditioning: null } };
const causal = { name: 'harm-causal', task: 'harmonization', config: { direction: 'causal' } };
const bidirectional = { name: 'harm', task: 'harmonization', default: true, config: { direction: 'bidirectional' } };
const cont = { name: 'cont', task: 'continuation', default: true, config: {} };

test('the live piano is a model made for it, else the chosen step-by-step one, else the default', () => {
  const def = { ...acc('acc-ar'), default: true };
  const live = acc('acc-live', { melody_lag: 1 });
  const other = acc('acc-conv');
  assert.deepEqual(liveModels([def, other, whole, causal, bidirectional], other), { model: other, harmonizer: causal });
  assert.equal(liveModels([def, other, whole], whole).model, def, 'a whole-piece model cannot play live');
  assert.equal(liveModels([def, other, cont], cont).model, def);
  assert.equal(liveModels([def, live, other], other).model, live, 'the live model first');
  assert.equal(liveModels([def, live], live).model, live);
  assert.equal(liveModels([def], def).harmonizer, null, 'no causal harmonizer: none');
  assert.equal(liveModels([def, bidirectional], def).harmonizer, null, 'a whole-melody one cannot');
  assert.throws(() => liveModels([whole, cont], cont), /step by step/);
});

test('sixteenths fall on the take grid, past its last beat too', () => {
  const grid = { stepsPerBeat: 4, beatTicks: [0, 480, 960, 1500] };
  assert.equal(stepTick(grid, 0), 0);
  assert.equal(stepTick(grid, 1), 120);
  assert.equal(stepTick(grid, 5), 600);
  assert.equal(stepTick(grid, 9), 960 + 135, 'an uneven beat is shared evenly');
  assert.equal(stepTick(grid, 12), 1500);
  assert.equal(stepTick(grid, 14), 1500 + 270, 'past the end: the last beat again');
});

test('the meter reads quantiles by nearest rank and says it in words', () => {
  assert.equal(quantile([], 0.5), null);
  assert.equal(quantile([3, 1, 2], 0.5), 2);
  const latencies = Array.from({ length: 200 }, (_, i) => i + 1); // 1 … 200 ms
  assert.equal(quantile(latencies, 0.99), 198);
  assert.equal(quantile(latencies, 1), 200);
  const f = meterFigures({ steps: 200, hits: 199, latencies });
  assert.deepEqual(f, { steps: 200, hitRate: 0.995, p50: 100, p99: 198, max: 200 });
  assert.match(meterText({ steps: 200, hits: 199, latencies }), /200 sixteenths, 99\.5 % in time · decision p50 100 ms, p99 198 ms, max 200 ms/);
  assert.match(meterText({ steps: 4, hits: 4, latencies: [0.5, 0.7, 0.4, 2.25] }), /100 % in time · decision p50 0\.5 ms, p99 2\.3 ms/);
  assert.match(meterText({ steps: 0, hits: 0, latencies: [] }), /waiting/);
  assert.doesNotMatch(meterText({ steps: 200, hits: 199, latencies }), /too late/);
  assert.match(meterText({ steps: 40, hits: 2, latencies: Array(40).fill(56) }), /5\.0 % in time.*too late on this backend: try the CPU backend/);
});

test("a take's piano replaces the generated piano from its start and its chords fill open bars", () => {
  const piece = emptyPiece({ bars: 2 }); // 4/4, 1920 ticks a bar
  piece.chords = ['C', ''];
  piece.tracks.push({ name: 'PIANO', role: 'generated', program: 0, notes: [[48, 0, 3000, 72], [50, 2000, 2200, 72]] });
  const result = {
    fromTick: 1920,
    endTick: 5760,
    fromBar: 1,
    piano: [[52, 1920, 2400, 72], [55, 4000, 5760, 72]],
    cells: ['Am', 'F G'],
  };
  const next = withLivePiano(piece, result);
  const notes = next.tracks.find((t) => t.role === 'generated').notes;
  assert.deepEqual(notes, [[48, 0, 1920, 72], [52, 1920, 2400, 72], [55, 4000, 5760, 72]], 'cut at the take, then the live notes');
  assert.deepEqual(next.chords, ['C', 'Am', 'F G'], 'the bars grow to hold the piano');
  assert.equal(next.bars.length, 3);
  assert.equal(next.endTick, 5760);
  assert.deepEqual(piece.chords, ['C', ''], 'the piece given is not changed');
  // Planned bars keep their chords (null cells); a piece with no piano gets a PIANO track.
  const fresh = emptyPiece({ bars: 1 });
  fresh.chords = ['G'];
  const out = withLivePiano(fresh, { fromTick: 0, endTick: 1920, fromBar: 0, piano: [[43, 0, 480, 72]], cells: [null] });
  assert.deepEqual(out.chords, ['G']);
  assert.deepEqual(out.tracks.at(-1), { name: 'PIANO', role: 'generated', program: 0, notes: [[43, 0, 480, 72]] });
  // The old piano after the take stays (a note crossing its end struck again there); an empty
  // cell (no chords decided) leaves the lane alone.
  const longer = emptyPiece({ bars: 4 });
  longer.chords = ['C', 'F', 'G', 'C'];
  longer.tracks.push({ name: 'PIANO', role: 'generated', program: 0, notes: [[48, 0, 500, 72], [50, 3000, 4500, 72], [52, 5000, 6000, 72]] });
  const middle = withLivePiano(longer, { fromTick: 1920, endTick: 3840, fromBar: 1, piano: [[60, 1920, 2000, 72]], cells: ['', 'Am'] });
  assert.deepEqual(middle.tracks.at(-1).notes, [[48, 0, 500, 72], [60, 1920, 2000, 72], [50, 3840, 4500, 72], [52, 5000, 6000, 72]]);
  assert.deepEqual(middle.chords, ['C', 'F', 'Am', 'C']);
  // A pianist's part: its notes before the take stay, in the live piano's track.
  const played = emptyPiece({ bars: 2 });
  played.tracks.push({ name: 'Piano', role: 'piano', program: 0, notes: [[40, 0, 960, 80], [41, 1920, 2400, 80]] });
  const kept = withLivePiano(played, { ...result, piano: [[52, 1920, 2400, 72]], cells: [] });
  assert.deepEqual(kept.tracks.map((t) => t.role), ['melody', 'generated']);
  assert.deepEqual(kept.tracks[1].notes, [[40, 0, 960, 80], [52, 1920, 2400, 72]]);
  // The take's pedal: spliced over its span, the pianist's around it kept (lifted at the take's
  // start where it was still down, pressed again at its end); none asked for lifts it over the
  // take; null keeps it as it was.
  played.tracks[1].pedal = [[0, 64, 127]];
  const pedalled = withLivePiano(played, { ...result, endTick: 3840, piano: [[52, 1920, 2400, 72]], cells: [], pedal: [[1930, 64, 127], [3000, 64, 0]] });
  assert.deepEqual(pedalled.tracks[1].pedal, [[0, 64, 127], [1920, 64, 0], [1930, 64, 127], [3000, 64, 0], [3840, 64, 127]]);
  const dry = withLivePiano(played, { ...result, endTick: 3840, piano: [], cells: [], pedal: [] });
  assert.deepEqual(dry.tracks[1].pedal, [[0, 64, 127], [1920, 64, 0], [3840, 64, 127]]);
  const asWas = withLivePiano(played, { ...result, endTick: 3840, piano: [], cells: [], pedal: null });
  assert.deepEqual(asWas.tracks[1].pedal, [[0, 64, 127]]);
});
