// The backends' race (issue 35): on "auto" with a WebGPU adapter the page starts on the CPU,
// and each kind of work — generation, fine-tuning — goes to the backend that ran a short
// piece of that same work faster. The Worker runs the races (worker.js); the rules and their
// words are here, DOM-free, so Node tests check them.
//
// A race runs the work once to warm up (WebGPU compiles its kernels on first use) and once
// timed, the CPU first. WebGPU's runs have a limit, so that a software adapter (SwiftShader,
// hundreds of times slower than the CPU here) costs the page seconds, not minutes: its warm-up
// may take `WARM_FACTOR` times the CPU's two runs (at least `WARM_FLOOR_MS`: a real GPU's
// first kernels compile in a fraction of that), its timed run `TIMED_FACTOR` times the CPU's
// timed run. Past its limit it stops and loses.

export const WARM_FLOOR_MS = 3000;
export const WARM_FACTOR = 50;
export const TIMED_FACTOR = 4;
/**
 * Fine-tuning is raced only on a hardware adapter that was at most this many times slower at
 * generation: one that lost generation by far would take minutes a fine-tuning step.
 */
export const TUNING_RACE_WITHIN = 10;
/**
 * A fine-tuning step on SwiftShader took this many times the CPU backend's in the page
 * (reports/speed.md, "Fine-tuning in the page": 44.5 s against 0.32 s). Generation no longer
 * says so: its steps are fused into one dispatch each on WebGPU (issue 35), which brought a
 * software adapter within 10× of the CPU there, while fine-tuning still costs thousands of
 * dispatches a step. So a software adapter (WebGPU emulated on this very CPU) is not raced.
 */
export const SOFTWARE_TUNING_SLOWER = 140;

/** WebGPU's time limits (ms) once the CPU ran the work in `cpuWarmMs` then `cpuMs`. */
export function gpuLimits(cpuWarmMs, cpuMs) {
  return {
    warm: Math.max(WARM_FLOOR_MS, WARM_FACTOR * (cpuWarmMs + cpuMs)),
    timed: Math.max(1, TIMED_FACTOR * cpuMs),
  };
}

/**
 * The outcome of a race of `kind` ('generation' | 'fine-tuning'): `cpuMs` the CPU's timed run;
 * WebGPU's `gpuMs` (null when it stopped at its limit, `stoppedMs` in, having done `share` of
 * the run: 0–1, 0 when it had not reported any progress) and `gpuWarmMs` its warm-up (null when
 * that stopped). A stopped run that did part of the work is extrapolated to the whole; one that
 * did none gives a lower bound. `force` ('gpu'): tests move whatever the times say. Returns
 * {kind, winner: 'cpu' | 'gpu', cpuMs, gpuMs, gpuWarmMs, ratio (WebGPU's time over the CPU's),
 * stopped, stage ('warm-up' | 'timed': where it stopped), bound (the ratio is only a lower
 * bound), projectedMs}.
 */
export function verdict(kind, { cpuMs, gpuMs, gpuWarmMs = null, stoppedMs = null, share = 0 }, force = null) {
  const stopped = gpuMs == null;
  const projectedMs = stopped && share > 0 ? stoppedMs / share : null;
  const gpuTime = stopped ? (projectedMs ?? stoppedMs) : gpuMs;
  const ratio = gpuTime / Math.max(cpuMs, 1e-3);
  const winner = force === 'gpu' ? 'gpu' : !stopped && gpuMs < cpuMs ? 'gpu' : 'cpu';
  return {
    kind,
    winner,
    cpuMs,
    gpuMs,
    gpuWarmMs,
    ratio,
    stopped,
    stage: stopped && gpuWarmMs == null ? 'warm-up' : 'timed',
    bound: stopped && projectedMs == null,
    stoppedMs,
    projectedMs,
  };
}

/**
 * Whether fine-tuning is worth racing after generation's race `generation` (a verdict), on an
 * adapter that is `software` or not.
 */
export function raceTuningAfter(generation, software = false) {
  return !software && (!generation || generation.ratio <= TUNING_RACE_WITHIN);
}

const ms = (x) => (x >= 1000 ? `${(x / 1000).toFixed(1)} s` : `${x.toFixed(x < 10 ? 1 : 0)} ms`);

/** What the race of `work` ('one bar of accompaniment', ...) found, in words, for the backend card. */
export function raceText(v, work, gpuLabel) {
  let gpu = `WebGPU (${gpuLabel}) ${ms(v.gpuMs ?? 0)}`;
  if (v.stopped) {
    const run = v.stage === 'warm-up' ? 'warm-up' : 'timed run';
    gpu = `WebGPU (${gpuLabel}) stopped after ${ms(v.stoppedMs)} of its ${run}, `;
    gpu += v.bound
      ? `at least ${v.ratio.toFixed(0)}× the CPU`
      : `on course for ${ms(v.projectedMs)} (${v.ratio.toFixed(0)}× the CPU)`;
  }
  const who = v.winner === 'gpu' ? 'WebGPU' : 'the CPU';
  return `${v.kind} on ${who}: ${work} took the CPU ${ms(v.cpuMs)}, ${gpu}`;
}

/** Why fine-tuning was not raced, in words. */
export function tuningSkippedText(generation, gpuLabel, software = false) {
  if (software) {
    return `fine-tuning on the CPU: WebGPU (${gpuLabel}) is a software adapter running on this CPU, where a fine-tuning step takes about ${SOFTWARE_TUNING_SLOWER}× the CPU backend's, so it is not raced`;
  }
  return `fine-tuning on the CPU: WebGPU (${gpuLabel}) was at least ${generation.ratio.toFixed(0)}× slower at generation, so a race of fine-tuning steps would cost minutes`;
}
