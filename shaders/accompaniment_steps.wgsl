// The step-by-step accompaniment decoder, fused: K steps of the whole Performer (input layer,
// every layer's norm, projections, positional codes, feature map, recurrent state update and
// read-out, output projection and feed-forward, the final norm and head) and the drawing of
// each step's piano notes, in ONE dispatch of ONE workgroup, so that a bar of accompaniment
// costs one dispatch and one read-back instead of hundreds of each. Launched by
// src/generate/piano/fused.rs (`FusedSteps`); the reference it must match is the plain-slice
// decoder (`Performer::step` on the CPU) followed by `draw_step` with the same counter-based
// uniforms (`piano::uniform`), which the tests compare it with.
//
// A single workgroup: a step is a chain of small matrix-vector products, each needing the last
// one's whole output, so the invocations of one workgroup share activations in workgroup memory
// and meet at barriers; across workgroups each product would be a dispatch of its own.
//
// Template placeholders (filled by fused.rs; every one is in the KernelId):
//   d (d_model), hd (heads·d_head), h (heads), dh (d_head), r (the feature map's input per head:
//   R codes, or d_head with no codes), dir (feature-map directions), m (features), ff (d_ff),
//   inp (input width), out (output width, 2·128), layers, wg (workgroup size), piano (where the
//   previous piano step sits in an input row), codes (per step and side: heads·d_head·R, or 0),
//   gated, favor (bool), hr = h·r, hm = h·m, gate (hd if gated, else 0), epsn (h·dh·r if gated
//   with codes, else 0).
//
// Buffers (row-major f32; every one declared read_write, as Burn's memory pools need):
//   weights  every parameter, in the order of the constants below (fused.rs packs it so)
//   steps    per step: the input row [inp] (its piano planes are ignored: the kernel writes the
//            step it drew before), then the codes of queries and of keys [codes] each
//   state    S [layers, h, m, dh], z [layers, h, m], the previous piano step [256] (onsets then
//            sustains); read at the start and left as the last step leaves it
//   outs     per step: the logits [out], the drawn step [256] (onsets then sustains, 0 or 1), and
//            the watched head's query and key features [m] each (what the attention map reads)
//   info     u32: steps, first step's index in the piece, seed (low, high), temperature,
//            threshold, whether thresholded, hold temperature, the codes' scale, the feature
//            map's scale (f32 as bits), the first step's index in `steps` and `outs` (a chunk's
//            steps may take several dispatches, each reading the state the last left), and the
//            watched layer and head

@group(0) @binding(0) var<storage, read_write> weights: array<f32>;
@group(0) @binding(1) var<storage, read_write> steps: array<f32>;
@group(0) @binding(2) var<storage, read_write> state: array<f32>;
@group(0) @binding(3) var<storage, read_write> outs: array<f32>;
@group(0) @binding(4) var<storage, read> info: array<u32>;

const D: u32 = {{ d }}u;
const HD: u32 = {{ hd }}u;
const H: u32 = {{ h }}u;
const DH: u32 = {{ dh }}u;
const R: u32 = {{ r }}u;
const DIR: u32 = {{ dir }}u;
const M: u32 = {{ m }}u;
const FF: u32 = {{ ff }}u;
const IN: u32 = {{ inp }}u;
const OUT: u32 = {{ out }}u;
const L: u32 = {{ layers }}u;
const WG: u32 = {{ wg }}u;
const PIANO: u32 = {{ piano }}u;
const CODES: u32 = {{ codes }}u;
const GATED: bool = {{ gated }};
const FAVOR: bool = {{ favor }};
const P: u32 = 128u;
const EPS: f32 = 1e-6;

// One layer's parameters, from its start.
const GATE: u32 = {{ gate }}u;   // HD when gated, else 0
const EPSN: u32 = {{ epsn }}u;   // H·DH·R when gated with codes, else 0
const L_N1G: u32 = 0u;
const L_N1B: u32 = L_N1G + D;
const L_WQ: u32 = L_N1B + D;
const L_BQ: u32 = L_WQ + D * HD;
const L_WK: u32 = L_BQ + HD;
const L_BK: u32 = L_WK + D * HD;
const L_WV: u32 = L_BK + HD;
const L_BV: u32 = L_WV + D * HD;
const L_WO: u32 = L_BV + HD;
const L_BO: u32 = L_WO + HD * D;
const L_N2G: u32 = L_BO + D;
const L_N2B: u32 = L_N2G + D;
const L_F1W: u32 = L_N2B + D;
const L_F1B: u32 = L_F1W + D * FF;
const L_F2W: u32 = L_F1B + FF;
const L_F2B: u32 = L_F2W + FF * D;
const L_GA: u32 = L_F2B + D;       // sqrt(1 - delta) [hd]
const L_GG: u32 = L_GA + GATE;     // sqrt(delta) [hd]
const L_EPS: u32 = L_GG + GATE;    // the gate's noise [h, dh, R]
const L_MAP: u32 = L_EPS + EPSN;   // feature-map directions [h, r, dir]
const LSZ: u32 = L_MAP + H * R * DIR;
// The whole buffer.
const IN_W: u32 = 0u;
const IN_B: u32 = IN_W + IN * D;
const LAYER0: u32 = IN_B + D;
const F_NG: u32 = LAYER0 + L * LSZ;
const F_NB: u32 = F_NG + D;
const HEAD_W: u32 = F_NB + D;
const HEAD_B: u32 = HEAD_W + D * OUT;
const TOTAL: u32 = HEAD_B + OUT;
// The state and the outputs.
const Z0: u32 = L * H * M * DH;
const PREV0: u32 = Z0 + L * H * M;
const STATE_TOTAL: u32 = PREV0 + 2u * P;
const STEP: u32 = IN + 2u * CODES;
const OSTEP: u32 = OUT + 2u * P + 2u * M;

var<workgroup> x: array<f32, D>;
var<workgroup> hn: array<f32, D>;
var<workgroup> q: array<f32, HD>;
var<workgroup> k: array<f32, HD>;
var<workgroup> v: array<f32, HD>;
var<workgroup> att: array<f32, HD>;
var<workgroup> hq: array<f32, {{ hr }}>;
var<workgroup> hk: array<f32, {{ hr }}>;
var<workgroup> fq: array<f32, {{ hm }}>;
var<workgroup> fk: array<f32, {{ hm }}>;
var<workgroup> shift: array<f32, H>;
var<workgroup> ffh: array<f32, FF>;
var<workgroup> logit: array<f32, OUT>;
var<workgroup> prev: array<f32, 256>;
var<workgroup> uniform_k: u32;
// The layer norm's mean and 1/sqrt(var + eps), computed once; the input row's non-zero entries
// (their indices, ascending) and their count.
var<workgroup> stats: array<f32, 2>;
var<workgroup> nonzero: array<u32, IN>;
var<workgroup> nonzero_n: u32;

// The counter-based uniform in [0, 1) of (seed, step, pitch, kind): PCG hashes (Jarzynski &
// Olano, "Hash functions for GPU rendering", 2020), 24 bits. `piano::uniform` is the same.
fn pcg(v: u32) -> u32 {
    let s = v * 747796405u + 2891336453u;
    let w = ((s >> ((s >> 28u) + 4u)) ^ s) * 277803737u;
    return (w >> 22u) ^ w;
}

fn uniform01(seed_lo: u32, seed_hi: u32, step: u32, pitch: u32, kind: u32) -> f32 {
    let a = pcg(seed_lo ^ pcg(seed_hi));
    let b = pcg(a ^ step);
    let c = pcg(b ^ (pitch * 2u + kind));
    return f32(c >> 8u) * (1.0 / 16777216.0);
}

// erf to about 1e-7 (Numerical Recipes' erfc, fractional error below 1.2e-7): WGSL has none.
fn erf_(z: f32) -> f32 {
    let a = abs(z);
    let t = 1.0 / (1.0 + 0.5 * a);
    let r = t * exp(-a * a - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418
        + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587
        + t * (-0.82215223 + t * 0.17087277)))))))));
    return select(r - 1.0, 1.0 - r, z >= 0.0);
}

fn gelu(z: f32) -> f32 {
    return 0.5 * z * (1.0 + erf_(z * 0.70710678118654752));
}

// p at temperature t: sigmoid(logit(p) / t), exact at 0 and 1 (`sharpen` in piano.rs).
fn sharpen(p: f32, t: f32) -> f32 {
    if (t == 1.0) {
        return p;
    }
    let a = select(pow(p, 1.0 / t), 0.0, p <= 0.0);
    let b = select(pow(1.0 - p, 1.0 / t), 0.0, p >= 1.0);
    return select(0.5, a / (a + b), a + b > 0.0);
}

// hn = LayerNorm(x) with the parameters at `g` and `b` (Burn's epsilon, 1e-5). The sums run
// once, in order, on the first invocation (the others would only repeat them).
fn layer_norm(g: u32, b: u32, lid: u32) {
    if (lid == 0u) {
        var s = 0.0;
        for (var i = 0u; i < D; i++) {
            s += x[i];
        }
        let mean = s / f32(D);
        var var_ = 0.0;
        for (var i = 0u; i < D; i++) {
            let c = x[i] - mean;
            var_ += c * c;
        }
        stats[0] = mean;
        stats[1] = 1.0 / sqrt(var_ / f32(D) + 1e-5);
    }
    workgroupBarrier();
    let mean = stats[0];
    let inv = stats[1];
    for (var j = lid; j < D; j += WG) {
        hn[j] = (x[j] - mean) * inv * weights[g + j] + weights[b + j];
    }
    workgroupBarrier();
}

// Entry i of step `s`'s input row: the previous piano step's where the row holds it.
fn input_at(row: u32, i: u32) -> f32 {
    if (i >= PIANO && i < PIANO + 2u * P) {
        return prev[i - PIANO];
    }
    return steps[row + i];
}

@compute @workgroup_size({{ wg }}, 1, 1)
fn main(@builtin(local_invocation_index) lid: u32) {
    // The buffers must hold what the template's sizes say (the runtime compiles without bounds
    // checks): otherwise nothing runs and the outputs stay unwritten.
    if (lid == 0u) {
        var k_steps = info[0];
        let end = info[10] + k_steps;
        if (arrayLength(&weights) < TOTAL || arrayLength(&state) < STATE_TOTAL
            || arrayLength(&steps) < end * STEP || arrayLength(&outs) < end * OSTEP) {
            k_steps = 0u;
        }
        uniform_k = k_steps;
    }
    let k_steps = workgroupUniformLoad(&uniform_k);
    let step0 = info[1];
    let seed_lo = info[2];
    let seed_hi = info[3];
    let temperature = bitcast<f32>(info[4]);
    let threshold = bitcast<f32>(info[5]);
    let thresholded = info[6] != 0u;
    let hold_t = bitcast<f32>(info[7]);
    let code_scale = bitcast<f32>(info[8]);
    let feature_scale = bitcast<f32>(info[9]);
    let at = info[10];
    let watched_layer = info[11];
    let watched_head = info[12];

    for (var i = lid; i < 2u * P; i += WG) {
        prev[i] = state[PREV0 + i];
    }
    workgroupBarrier();

    for (var s = 0u; s < k_steps; s++) {
        let row = (at + s) * STEP;
        let o = (at + s) * OSTEP;
        // The input layer, the previous piano step taken from what was drawn. A roll's row is
        // mostly zeros: the first invocation lists the others once, in order.
        if (lid == 0u) {
            var n = 0u;
            for (var i = 0u; i < IN; i++) {
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

        for (var l = 0u; l < L; l++) {
            let base = LAYER0 + l * LSZ;
            layer_norm(base + L_N1G, base + L_N1B, lid);
            for (var j = lid; j < HD; j += WG) {
                var aq = weights[base + L_BQ + j];
                var ak = weights[base + L_BK + j];
                var av = weights[base + L_BV + j];
                for (var i = 0u; i < D; i++) {
                    let hi = hn[i];
                    if (hi != 0.0) {
                        aq += hi * weights[base + L_WQ + i * HD + j];
                        ak += hi * weights[base + L_WK + i * HD + j];
                        av += hi * weights[base + L_WV + i * HD + j];
                    }
                }
                q[j] = aq;
                k[j] = ak;
                v[j] = av;
            }
            workgroupBarrier();

            // Queries and keys through the codes: the feature map's inputs.
            for (var idx = lid; idx < H * R; idx += WG) {
                let head = idx / R;
                let rr = idx % R;
                if (CODES > 0u) {
                    let cq = row + IN + head * DH * R;
                    let ck = cq + CODES;
                    var aq = 0.0;
                    var ak = 0.0;
                    for (var i = 0u; i < DH; i++) {
                        var a = 1.0;
                        if (GATED) {
                            a = weights[base + L_GA + head * DH + i];
                        }
                        aq += (q[head * DH + i] * a) * steps[cq + i * R + rr];
                        ak += (k[head * DH + i] * a) * steps[ck + i * R + rr];
                    }
                    if (GATED) {
                        let e0 = base + L_EPS + head * DH * R;
                        for (var i = 0u; i < DH; i++) {
                            let g = weights[base + L_GG + head * DH + i];
                            aq += (q[head * DH + i] * g) * weights[e0 + i * R + rr];
                            ak += (k[head * DH + i] * g) * weights[e0 + i * R + rr];
                        }
                    }
                    hq[idx] = aq * code_scale;
                    hk[idx] = ak * code_scale;
                } else {
                    hq[idx] = q[idx] * code_scale;
                    hk[idx] = k[idx] * code_scale;
                }
            }
            workgroupBarrier();

            // The feature map: projections on the directions, then FAVOR+'s exponentials
            // (queries shifted by their head's largest value) or ReLU.
            for (var idx = lid; idx < H * DIR; idx += WG) {
                let head = idx / DIR;
                let d = idx % DIR;
                let w0 = base + L_MAP + head * R * DIR;
                var pq = 0.0;
                var pk = 0.0;
                for (var i = 0u; i < R; i++) {
                    let w = weights[w0 + i * DIR + d];
                    pq += hq[head * R + i] * w;
                    pk += hk[head * R + i] * w;
                }
                if (FAVOR) {
                    var nq = 0.0;
                    var nk = 0.0;
                    for (var i = 0u; i < R; i++) {
                        nq += hq[head * R + i] * hq[head * R + i];
                        nk += hk[head * R + i] * hk[head * R + i];
                    }
                    fq[head * M + d] = pq - 0.5 * nq;
                    fq[head * M + DIR + d] = -pq - 0.5 * nq;
                    fk[head * M + d] = pk - 0.5 * nk;
                    fk[head * M + DIR + d] = -pk - 0.5 * nk;
                } else {
                    fq[head * M + d] = max(pq, 0.0) * feature_scale;
                    fk[head * M + d] = max(pk, 0.0) * feature_scale;
                }
            }
            workgroupBarrier();
            if (FAVOR) {
                for (var head = lid; head < H; head += WG) {
                    var top = fq[head * M];
                    for (var f = 1u; f < M; f++) {
                        top = max(top, fq[head * M + f]);
                    }
                    shift[head] = top;
                }
                workgroupBarrier();
                for (var idx = lid; idx < H * M; idx += WG) {
                    fq[idx] = exp(fq[idx] - shift[idx / M]) * feature_scale;
                    fk[idx] = exp(fk[idx]) * feature_scale;
                }
                workgroupBarrier();
            }

            if (l == watched_layer) {
                for (var f = lid; f < M; f += WG) {
                    outs[o + OUT + 2u * P + f] = fq[watched_head * M + f];
                    outs[o + OUT + 2u * P + M + f] = fk[watched_head * M + f];
                }
            }

            // The state update and the read-out: each invocation owns columns of S.
            let s0 = l * H * M * DH;
            let z0 = Z0 + l * H * M;
            for (var idx = lid; idx < HD; idx += WG) {
                let head = idx / DH;
                let c = idx % DH;
                let vv = v[idx];
                var num = 0.0;
                var den = 0.0;
                for (var f = 0u; f < M; f++) {
                    let si = s0 + (head * M + f) * DH + c;
                    let sv = state[si] + fk[head * M + f] * vv;
                    state[si] = sv;
                    num += fq[head * M + f] * sv;
                    den += fq[head * M + f] * (state[z0 + head * M + f] + fk[head * M + f]);
                }
                att[idx] = num * (1.0 / (den + EPS));
            }
            storageBarrier();
            workgroupBarrier();
            for (var idx = lid; idx < H * M; idx += WG) {
                state[z0 + idx] = state[z0 + idx] + fk[idx];
            }
            storageBarrier();
            workgroupBarrier();

            // Output projection and residual; then the feed-forward and its residual.
            for (var j = lid; j < D; j += WG) {
                var acc = weights[base + L_BO + j];
                for (var i = 0u; i < HD; i++) {
                    let a = att[i];
                    if (a != 0.0) {
                        acc += a * weights[base + L_WO + i * D + j];
                    }
                }
                x[j] = x[j] + acc;
            }
            workgroupBarrier();
            layer_norm(base + L_N2G, base + L_N2B, lid);
            for (var j = lid; j < FF; j += WG) {
                var acc = weights[base + L_F1B + j];
                for (var i = 0u; i < D; i++) {
                    let hi = hn[i];
                    if (hi != 0.0) {
                        acc += hi * weights[base + L_F1W + i * FF + j];
                    }
                }
                ffh[j] = gelu(acc);
            }
            workgroupBarrier();
            for (var j = lid; j < D; j += WG) {
                var acc = weights[base + L_F2B + j];
                for (var i = 0u; i < FF; i++) {
                    let fi = ffh[i];
                    if (fi != 0.0) {
                        acc += fi * weights[base + L_F2W + i * D + j];
                    }
                }
                x[j] = x[j] + acc;
            }
            workgroupBarrier();
        }

        layer_norm(F_NG, F_NB, lid);
        for (var j = lid; j < OUT; j += WG) {
            var acc = weights[HEAD_B + j];
            for (var i = 0u; i < D; i++) {
                let hi = hn[i];
                if (hi != 0.0) {
                    acc += hi * weights[HEAD_W + i * OUT + j];
                }
            }
            logit[j] = acc;
            outs[o + j] = acc;
        }
        workgroupBarrier();

        // The piano step: per pitch an onset, else (if it was sounding) whether it is held.
        let t = step0 + s;
        for (var p = lid; p < P; p += WG) {
            let p_on = 1.0 / (1.0 + exp(-logit[p] / temperature));
            var on = 0.0;
            var sus = 0.0;
            var strike = false;
            if (thresholded) {
                strike = p_on > threshold;
            } else {
                strike = uniform01(seed_lo, seed_hi, t, p, 0u) < p_on;
            }
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
            outs[o + OUT + p] = on;
            outs[o + OUT + P + p] = sus;
            prev[p] = on;
            prev[P + p] = sus;
        }
        workgroupBarrier();
    }

    for (var i = lid; i < 2u * P; i += WG) {
        state[PREV0 + i] = prev[i];
    }
}
