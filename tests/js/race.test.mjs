// The backends' race (www/race.js): WebGPU's time limits, the verdicts and their words, under
// Node. The Worker runs the races; the e2e test (page.test.mjs) races SwiftShader.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  TIMED_FACTOR,
  TUNING_RACE_WITHIN,
  WARM_FLOOR_MS,
  gpuLimits,
  raceText,
  raceTuningAfter,
  tuningSkippedText,
  verdict,
} from '../../www/race.js';

test("WebGPU's limits: a floor for its warm-up, a multiple of the CPU's time for its timed run", () => {
  assert.deepEqual(gpuLimits(2, 1), { warm: WARM_FLOOR_MS, timed: TIMED_FACTOR });
  const slow = gpuLimits(100, 80);
  assert.ok(slow.warm > WARM_FLOOR_MS, 'a slow CPU gives WebGPU a longer warm-up');
  assert.equal(slow.timed, TIMED_FACTOR * 80);
});

test('the faster backend wins; a run stopped at its limit loses, with a lower bound on the ratio', () => {
  const gpuWins = verdict('generation', { cpuMs: 40, gpuMs: 10, gpuWarmMs: 300 });
  assert.equal(gpuWins.winner, 'gpu');
  assert.equal(gpuWins.ratio, 0.25);
  assert.match(raceText(gpuWins, 'one bar of accompaniment', 'NVIDIA'), /generation on WebGPU: one bar of accompaniment took the CPU 40 ms, WebGPU \(NVIDIA\) 10 ms/);
  const cpuWins = verdict('generation', { cpuMs: 10, gpuMs: 12, gpuWarmMs: 50 });
  assert.equal(cpuWins.winner, 'cpu', 'a tie-ish race stays on the CPU unless WebGPU is faster');
  // SwiftShader: a warm-up stopped at its 3 s limit where the CPU took 12 ms, before any
  // progress: the ratio is a lower bound.
  const software = verdict('generation', { cpuMs: 12, gpuMs: null, gpuWarmMs: null, stoppedMs: 3012 });
  assert.equal(software.winner, 'cpu');
  assert.ok(software.stopped && software.bound);
  assert.equal(software.stage, 'warm-up');
  assert.equal(Math.round(software.ratio), 251);
  const text = raceText(software, 'one bar of accompaniment', 'Google SwiftShader');
  assert.match(text, /^generation on the CPU: one bar of accompaniment took the CPU 12 ms, WebGPU \(Google SwiftShader\) stopped after 3\.0 s of its warm-up, at least 251× the CPU$/);
  // A timed run stopped at its limit a fifth of the way through: extrapolated to the whole.
  const timedOut = verdict('generation', { cpuMs: 47, gpuMs: null, gpuWarmMs: 900, stoppedMs: 216, share: 3 / 16 });
  assert.equal(timedOut.stage, 'timed');
  assert.equal(timedOut.winner, 'cpu');
  assert.ok(!timedOut.bound);
  assert.equal(timedOut.projectedMs, 1152);
  assert.equal(Math.round(timedOut.ratio), 25);
  assert.match(raceText(timedOut, 'one bar of accompaniment', 'SwiftShader'), /stopped after 216 ms of its timed run, on course for 1\.2 s \(25× the CPU\)$/);
  // Tests may move to WebGPU whatever the times.
  assert.equal(verdict('generation', { cpuMs: 1, gpuMs: 50 }, 'gpu').winner, 'gpu');
});

test('fine-tuning is raced unless WebGPU lost generation by far', () => {
  assert.ok(raceTuningAfter(null), 'no generation race yet: race');
  assert.ok(raceTuningAfter(verdict('generation', { cpuMs: 10, gpuMs: 30 })), '3x slower at generation: still race');
  const far = verdict('generation', { cpuMs: 10, gpuMs: null, stoppedMs: 10 * (TUNING_RACE_WITHIN + 1) });
  assert.equal(raceTuningAfter(far), false);
  assert.match(tuningSkippedText(far, 'SwiftShader'), /fine-tuning on the CPU: WebGPU \(SwiftShader\) was at least 11× slower at generation/);
});

test('fine-tuning is not raced on a software adapter, however generation went', () => {
  const close = verdict('generation', { cpuMs: 10, gpuMs: 80 });
  assert.ok(raceTuningAfter(close, false), 'hardware, 8x at generation: race');
  assert.equal(raceTuningAfter(close, true), false, 'software: no race');
  assert.equal(raceTuningAfter(null, true), false, 'software, before generation raced: no race');
  assert.match(
    tuningSkippedText(close, 'google swiftshader', true),
    /^fine-tuning on the CPU: WebGPU \(google swiftshader\) is a software adapter running on this CPU, where a fine-tuning step takes about 140× the CPU backend's/,
  );
});
