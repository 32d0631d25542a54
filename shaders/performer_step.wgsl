// One step of the Performer's recurrent form, fused (issue 35): every layer's norm, q/k/v
// projections, positional codes, feature map, recurrent state update and read-out, output
// projection and feed-forward, then the final norm and the head, run by ONE workgroup whose
// invocations share the activations in workgroup memory and meet at barriers (a step is a chain
// of small matrix-vector products, each needing the last one's whole output). The step's input
// layer and what is done with its logits are the entry point's: `accompaniment_steps.wgsl`
// (an input row, then the piano notes drawn) and `continuation_steps.wgsl` (a token, then the
// next token sampled under the grammar); src/generate/fused.rs puts this file before one of
// them and fills the template. The reference both must match is the plain-slice decoder
// (`Performer::step` on the CPU).
//
// Template placeholders (filled by fused.rs; every one is in the KernelId):
//   d (d_model), hd (heads·d_head), h (heads), dh (d_head), r (the feature map's input per head:
//   R codes, or d_head with no codes), dir (feature-map directions), m (features), ff (d_ff),
//   in_rows (rows of the input layer: input width, or vocabulary), out (output width), layers,
//   wg (workgroup size), codes (per step and side: heads·d_head·R, or 0), step_in (floats of a
//   step's own input before its codes), ostep (floats of a step's outputs), feat_at (where the
//   watched head's features sit in them), slot (floats of one copy of the attention sums),
//   gated, favor (bool), hr = h·r, hm = h·m, gate (hd if gated, else 0), epsn (h·dh·r if gated
//   with codes, else 0), and the entry point's own.
//
// Buffers (row-major f32; every one declared read_write, as Burn's memory pools need):
//   weights  every parameter, in the order of the constants below (fused.rs packs it so),
//            then each stream's draws (gate noise, feature-map directions)
//   steps    per step: its own input [step_in], then the codes of queries and of keys [codes]
//   state    copies ("slots") of the attention sums, S [layers, h, m, dh] then z [layers, h, m]
//            each, then what the entry point keeps; a step reads one slot and writes another
//            (the same one when the sums are updated in place)
//   outs     per step [ostep]: the logits [out], the entry point's outputs, and the watched
//            head's query and key features [m] each at feat_at (what the attention map reads)
//   info     u32: the common part below, then the entry point's

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
const IN_ROWS: u32 = {{ in_rows }}u;
const OUT: u32 = {{ out }}u;
const L: u32 = {{ layers }}u;
const WG: u32 = {{ wg }}u;
const CODES: u32 = {{ codes }}u;
const STEP_IN: u32 = {{ step_in }}u;
const OSTEP: u32 = {{ ostep }}u;
const FEAT_AT: u32 = {{ feat_at }}u;
const SLOT: u32 = {{ slot }}u;
const GATED: bool = {{ gated }};
const FAVOR: bool = {{ favor }};
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
const LSZ: u32 = L_GG + GATE;
// The weights every stream shares: the input layer (an embedding has zero biases), the layers,
// the final norm and the head.
const IN_W: u32 = 0u;
const IN_B: u32 = IN_W + IN_ROWS * D;
const LAYER0: u32 = IN_B + D;
const F_NG: u32 = LAYER0 + L * LSZ;
const F_NB: u32 = F_NG + D;
const HEAD_W: u32 = F_NB + D;
const HEAD_B: u32 = HEAD_W + D * OUT;
// Then each stream's draws (its seed's): per layer the gate's noise [h, dh, R] and the
// feature-map directions [h, r, dir].
const DRAWS: u32 = HEAD_B + OUT;
const D_EPS: u32 = 0u;
const D_MAP: u32 = EPSN;
const LDRAW: u32 = EPSN + H * R * DIR;
// A slot of the attention sums: S, then z.
const Z0: u32 = L * H * M * DH;
const STEP: u32 = STEP_IN + 2u * CODES;

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
var<workgroup> uniform_k: u32;

// Several sequences decoded at once (alternatives, each its own seed): one workgroup each, the
// same steps in the same dispatch. Each reads the shared weights and its own draws, and its own
// part of `steps`, `state` and `outs`, the streams' parts one after the other. An entry point
// that decodes one sequence leaves these at zero: stream 0, every part from the start.
var<private> stream: u32;
var<private> sb: u32;
var<private> stb: u32;
var<private> ob: u32;

// Makes this invocation decode stream `id`, whose parts of `steps`, `state` and `outs` hold
// `steps_n`, `state_n` and `outs_n` floats.
fn set_stream(id: u32, steps_n: u32, state_n: u32, outs_n: u32) {
    stream = id;
    sb = id * steps_n;
    stb = id * state_n;
    ob = id * outs_n;
}

// Where layer `l`'s draws of this stream start in `weights`.
fn draws_at(l: u32) -> u32 {
    return DRAWS + (stream * L + l) * LDRAW;
}
// The layer norm's mean and 1/sqrt(var + eps), computed once.
var<workgroup> stats: array<f32, 2>;

// The common part of `info`.
const I_STEPS: u32 = 0u;     // steps this dispatch runs
const I_FIRST: u32 = 1u;     // the chunk's first step's index in the piece (numbers the draws)
const I_SEED_LO: u32 = 2u;
const I_SEED_HI: u32 = 3u;
const I_TEMP: u32 = 4u;      // the temperature (f32 bits)
const I_CODE_SCALE: u32 = 5u;
const I_FEATURE_SCALE: u32 = 6u;
const I_AT: u32 = 7u;        // this dispatch's first step in the chunk (in `steps` and `outs`)
const I_WATCH_LAYER: u32 = 8u;  // u32::MAX: none
const I_WATCH_HEAD: u32 = 9u;
const I_BASE_SLOT: u32 = 10u;   // the slot the chunk's first step reads
const I_SLOTS: u32 = 11u;       // slots in the ring (1: in place)

// The counter-based uniform in [0, 1) of (seed, step, lane, kind): PCG hashes (Jarzynski &
// Olano, "Hash functions for GPU rendering", 2020), 24 bits. `sample::uniform` is the same.
fn pcg(v: u32) -> u32 {
    let s = v * 747796405u + 2891336453u;
    let w = ((s >> ((s >> 28u) + 4u)) ^ s) * 277803737u;
    return (w >> 22u) ^ w;
}

fn uniform01(seed_lo: u32, seed_hi: u32, step: u32, lane: u32, kind: u32) -> f32 {
    let a = pcg(seed_lo ^ pcg(seed_hi));
    let b = pcg(a ^ step);
    let c = pcg(b ^ (lane * 2u + kind));
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

// Whether the buffers hold what the template's sizes say for this stream's `end` steps and the
// state's `extra` floats after the slots (the runtime compiles without bounds checks).
fn buffers_fit(end: u32, extra: u32) -> bool {
    return arrayLength(&weights) >= draws_at(L)
        && arrayLength(&state) >= stb + info[I_SLOTS] * SLOT + extra
        && arrayLength(&steps) >= sb + end * STEP && arrayLength(&outs) >= ob + end * OSTEP;
}

// The model from `x` (the step's input layer, written by the entry point) to `logit` (also
// written to `outs` at `o`), for the step whose input starts at `row` in `steps`, reading the
// attention sums of slot `src` and writing slot `dst`. Runs in uniform control flow.
fn model_step(lid: u32, row: u32, o: u32, src: u32, dst: u32) {
    let code_scale = bitcast<f32>(info[I_CODE_SCALE]);
    let feature_scale = bitcast<f32>(info[I_FEATURE_SCALE]);
    let watched_layer = info[I_WATCH_LAYER];
    let watched_head = info[I_WATCH_HEAD];
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
                let cq = row + STEP_IN + head * DH * R;
                let ck = cq + CODES;
                var aq = 0.0;
                var ak = 0.0;
                for (var i = 0u; i < DH; i++) {
                    var a = 1.0;
                    if (GATED) {
                        a = weights[base + L_GA + head * DH + i];
                    }
                    aq += (q[head * DH + i] * a) * steps[sb + cq + i * R + rr];
                    ak += (k[head * DH + i] * a) * steps[sb + ck + i * R + rr];
                }
                if (GATED) {
                    let e0 = draws_at(l) + D_EPS + head * DH * R;
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
            let w0 = draws_at(l) + D_MAP + head * R * DIR;
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
                outs[ob + o + FEAT_AT + f] = fq[watched_head * M + f];
                outs[ob + o + FEAT_AT + M + f] = fk[watched_head * M + f];
            }
        }

        // The state update and the read-out: each invocation owns columns of S.
        let s_src = src * SLOT + l * H * M * DH;
        let s_dst = dst * SLOT + l * H * M * DH;
        let z_src = src * SLOT + Z0 + l * H * M;
        let z_dst = dst * SLOT + Z0 + l * H * M;
        for (var idx = lid; idx < HD; idx += WG) {
            let head = idx / DH;
            let c = idx % DH;
            let vv = v[idx];
            var num = 0.0;
            var den = 0.0;
            for (var f = 0u; f < M; f++) {
                let si = (head * M + f) * DH + c;
                let sv = state[stb + s_src + si] + fk[head * M + f] * vv;
                state[stb + s_dst + si] = sv;
                num += fq[head * M + f] * sv;
                den += fq[head * M + f] * (state[stb + z_src + head * M + f] + fk[head * M + f]);
            }
            att[idx] = num * (1.0 / (den + EPS));
        }
        storageBarrier();
        workgroupBarrier();
        for (var idx = lid; idx < H * M; idx += WG) {
            state[stb + z_dst + idx] = state[stb + z_src + idx] + fk[idx];
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
        outs[ob + o + j] = acc;
    }
    workgroupBarrier();
}

// The slots step `j` of the chunk reads and writes: a ring, so that a step's sums stay until the
// host knows whether the steps after it are kept.
fn slot_of(j: u32) -> u32 {
    return (info[I_BASE_SLOT] + j) % info[I_SLOTS];
}
