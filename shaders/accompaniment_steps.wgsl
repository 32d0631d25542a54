// The step-by-step accompaniment decoder, fused (after performer_step.wgsl): K steps of the whole
// Performer and the drawing of each step's piano notes in ONE dispatch of ONE workgroup, so that
// a bar of accompaniment costs one read-back instead of hundreds of dispatches and two
// read-backs a step. Alternatives (several seeds) are one workgroup each in the same dispatch:
// the dispatches a step do not depend on how many there are. Launched by src/generate/fused.rs (`FusedSteps::run`); the reference it
// must match is the plain-slice decoder (`Performer::step` on the CPU) followed by `draw_step`
// with the same counter-based uniforms (`sample::uniform`), which the tests compare it with.
//
// Its placeholder: piano (where the previous piano step sits in an input row).
//   steps  per step: the input row [in_rows] (its piano planes are ignored: the kernel writes
//          the step it drew before), then the codes
//   state  one slot of sums, updated in place, then the previous piano step [256] (onsets then
//          sustains); read at the start and left as the last step leaves it
//   outs   per step: the logits [256], the drawn step [256] (0 or 1), the watched features
//   info   after the common part: the threshold, whether thresholded, the hold temperature, the
//          density's log odds (added to every onset's), the chunk's steps, then each stream's
//          seed (two u32)
//   Each stream (workgroup) has its own part of steps, state and outs, and its own draws.

const PIANO: u32 = {{ piano }}u;
const P: u32 = 128u;
const I_THRESHOLD: u32 = 12u;
const I_THRESHOLDED: u32 = 13u;
const I_HOLD_TEMP: u32 = 14u;
const I_ONSET_BIAS: u32 = 15u;
// The steps the chunk holds in `steps` and `outs` for each stream, then each stream's seed (low
// and high halves).
const I_CHUNK: u32 = 16u;
const I_STREAM_SEEDS: u32 = 17u;

var<workgroup> prev: array<f32, 256>;
// The input row's non-zero entries (their indices, ascending) and their count.
var<workgroup> nonzero: array<u32, IN_ROWS>;
var<workgroup> nonzero_n: u32;

// p at temperature t: sigmoid(logit(p) / t), exact at 0 and 1 (`sharpen` in piano.rs).
fn sharpen(p: f32, t: f32) -> f32 {
    if (t == 1.0) {
        return p;
    }
    let a = select(pow(p, 1.0 / t), 0.0, p <= 0.0);
    let b = select(pow(1.0 - p, 1.0 / t), 0.0, p >= 1.0);
    return select(0.5, a / (a + b), a + b > 0.0);
}

// Entry i of step `s`'s input row: the previous piano step's where the row holds it.
fn input_at(row: u32, i: u32) -> f32 {
    if (i >= PIANO && i < PIANO + 2u * P) {
        return prev[i - PIANO];
    }
    return steps[sb + row + i];
}

@compute @workgroup_size({{ wg }}, 1, 1)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    let chunk = info[I_CHUNK];
    set_stream(wid.x, chunk * STEP, info[I_SLOTS] * SLOT + 2u * P, chunk * OSTEP);
    // Otherwise nothing runs and the outputs stay unwritten.
    let prev0 = info[I_SLOTS] * SLOT;
    if (lid == 0u) {
        var k_steps = info[I_STEPS];
        if (!buffers_fit(info[I_AT] + k_steps, 2u * P)) {
            k_steps = 0u;
        }
        uniform_k = k_steps;
    }
    let k_steps = workgroupUniformLoad(&uniform_k);
    let step0 = info[I_FIRST];
    let seed_lo = info[I_STREAM_SEEDS + 2u * wid.x];
    let seed_hi = info[I_STREAM_SEEDS + 2u * wid.x + 1u];
    let temperature = bitcast<f32>(info[I_TEMP]);
    let threshold = bitcast<f32>(info[I_THRESHOLD]);
    let thresholded = info[I_THRESHOLDED] != 0u;
    let hold_t = bitcast<f32>(info[I_HOLD_TEMP]);
    let onset_bias = bitcast<f32>(info[I_ONSET_BIAS]);
    let at = info[I_AT];

    for (var i = lid; i < 2u * P; i += WG) {
        prev[i] = state[stb + prev0 + i];
    }
    workgroupBarrier();

    for (var s = 0u; s < k_steps; s++) {
        let row = (at + s) * STEP;
        let o = (at + s) * OSTEP;
        // The input layer, the previous piano step taken from what was drawn. A roll's row is
        // mostly zeros: the first invocation lists the others once, in order.
        if (lid == 0u) {
            var n = 0u;
            for (var i = 0u; i < IN_ROWS; i++) {
                if (input_at(row, i) != 0.0) {
                    nonzero[n] = i;
                    n++;
                }
            }
            nonzero_n = n;
        }
        let n_in = workgroupUniformLoad(&nonzero_n);
        for (var j = lid; j < D; j += WG) {
            var acc = weights[IN_B + j];
            for (var e = 0u; e < n_in; e++) {
                let i = nonzero[e];
                acc += input_at(row, i) * weights[IN_W + i * D + j];
            }
            x[j] = acc;
        }
        workgroupBarrier();

        model_step(lid, row, o, slot_of(at + s), slot_of(at + s + 1u));

        // The piano step: per pitch an onset, else (if it was sounding) whether it is held.
        let t = step0 + at + s;
        for (var p = lid; p < P; p += WG) {
            let p_on = 1.0 / (1.0 + exp(-(logit[p] / temperature + onset_bias)));
            var on = 0.0;
            var sus = 0.0;
            var strike = false;
            if (thresholded) {
                strike = p_on > threshold;
            } else {
                strike = uniform01(seed_lo, seed_hi, t, p, 0u) < p_on;
            }
            // Only a piano's keys, A0 to C8 (`PIANO_KEYS` in roll.rs).
            strike = strike && p >= 21u && p <= 108u;
            if (strike) {
                on = 1.0;
                sus = 1.0;
            } else if (prev[P + p] != 0.0) {
                let p_sus = 1.0 / (1.0 + exp(-logit[P + p] / temperature));
                let hold = clamp((p_sus - p_on) / max(1.0 - p_on, 1e-6), 0.0, 1.0);
                var held = false;
                if (thresholded) {
                    held = hold > 0.5;
                } else {
                    held = uniform01(seed_lo, seed_hi, t, p, 1u) < sharpen(hold, hold_t);
                }
                if (held) {
                    sus = 1.0;
                }
            }
            outs[ob + o + OUT + p] = on;
            outs[ob + o + OUT + P + p] = sus;
            prev[p] = on;
            prev[P + p] = sus;
        }
        workgroupBarrier();
    }

    for (var i = lid; i < 2u * P; i += WG) {
        state[stb + prev0 + i] = prev[i];
    }
}
