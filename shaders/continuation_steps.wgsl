// Continuation tokens, fused (after performer_step.wgsl): per step the token's embedding, the
// whole Performer, and the NEXT token sampled on the GPU (the REMI grammar's mask, temperature,
// top-p and a counter-based uniform), which the next step reads; K steps run as K dispatches
// (or fewer, longer ones) and are read back once. The host (src/generate/continuation.rs) stays
// the authority: it replays every read-back step with its own sampler (`sample_token`, the
// same arithmetic and uniforms) and what only it knows (the plan's forced chords, the echo of a
// repeated phrase, the bar and token limits); where its token differs from the GPU's, the steps
// after it are dropped and the next chunk starts from the sums the kept steps left (the state
// buffer is a ring of slots, one per step). So the tokens are the host's, and the GPU's guess
// only decides how many are known per read-back. Launched by src/generate/fused.rs
// (`FusedSteps::run_tokens`).
//
// Its placeholders: the token ids' layout (bar, meter, position, chord, tempo, pitch, velocity,
// duration: each kind's first id; vocab) and the grid (steps_per_beat).
//   steps  per step: the codes (nothing else: the step's token is the last one's draw)
//   state  a ring of slots of the sums
//   outs   per step: the logits [vocab], then the step's draw and the grammar after it
//          [8: token, state, bar beats, position (-1: none), last pitch (-1: none)], then the
//          watched features
//   info   after the common part: top-p (f32 bits), the chunk's first token, the grammar after
//          it (state, bar beats, position and last pitch, u32::MAX for none), whether the piece
//          may end

const T_BAR: u32 = {{ t_bar }}u;
const T_METER: u32 = {{ t_meter }}u;
const T_POSITION: u32 = {{ t_position }}u;
const T_CHORD: u32 = {{ t_chord }}u;
const T_TEMPO: u32 = {{ t_tempo }}u;
const T_PITCH: u32 = {{ t_pitch }}u;
const T_VELOCITY: u32 = {{ t_velocity }}u;
const T_DURATION: u32 = {{ t_duration }}u;
const VOCAB: u32 = {{ vocab }}u;
const STEPS_PER_BEAT: u32 = {{ steps_per_beat }}u;
const T_EOS: u32 = 2u;
const NONE: u32 = 0xffffffffu;
const CARRY: u32 = 8u;
const I_TOP_P: u32 = 12u;
const I_TOKEN: u32 = 13u;
const I_GRAMMAR: u32 = 14u;  // 4 values
const I_MAY_END: u32 = 18u;

// The grammar's states (`tokens::grammar::State`, in its order).
const S_START: u32 = 0u;
const S_BEGUN: u32 = 1u;
const S_AFTER_BAR: u32 = 2u;
const S_AFTER_METER: u32 = 3u;
const S_AFTER_POSITION: u32 = 4u;
const S_AFTER_CHORD: u32 = 5u;
const S_AFTER_TEMPO: u32 = 6u;
const S_AFTER_PITCH: u32 = 7u;
const S_AFTER_VELOCITY: u32 = 8u;
const S_AFTER_NOTE: u32 = 9u;
const S_ENDED: u32 = 10u;

// The token the step reads and the grammar after it: state, bar beats, position, last pitch.
var<workgroup> token: u32;
var<workgroup> grammar: array<u32, 4>;
// Sampling: each allowed token's weight exp(logit / t − max) (−1: not allowed), the allowed
// tokens by weight (largest first, ties by id, as a stable sort gives), the largest scaled
// logit and how many are allowed.
var<workgroup> weight: array<f32, VOCAB>;
var<workgroup> order: array<u32, VOCAB>;
var<workgroup> top: f32;
var<workgroup> allowed_n: u32;

// Whether `id` may come next (`Grammar::check` with the sampler's own bans: padding, BOS, meters
// — new bars keep the meter in force — and EOS unless the piece may end).
fn allowed(id: u32, may_end: bool) -> bool {
    let s = grammar[0];
    if (id < T_EOS) {
        return false;
    }
    if (id == T_EOS) {
        return may_end && !(s == S_START || s == S_BEGUN || s == S_AFTER_PITCH
            || s == S_AFTER_VELOCITY || s == S_AFTER_POSITION || s == S_ENDED);
    }
    if (id == T_BAR) {
        return !(s == S_AFTER_POSITION || s == S_AFTER_PITCH || s == S_AFTER_VELOCITY
            || s == S_ENDED);
    }
    if (id < T_POSITION) {
        return false;
    }
    if (id < T_CHORD) {
        let p = id - T_POSITION;
        let between = s == S_AFTER_BAR || s == S_AFTER_METER || s == S_AFTER_CHORD
            || s == S_AFTER_TEMPO || s == S_AFTER_NOTE;
        return between && p < grammar[1] * STEPS_PER_BEAT && (grammar[2] == NONE || p > grammar[2]);
    }
    if (id < T_TEMPO) {
        return s == S_AFTER_POSITION;
    }
    if (id < T_PITCH) {
        return s == S_AFTER_POSITION || s == S_AFTER_CHORD;
    }
    if (id < T_VELOCITY) {
        let p = id - T_PITCH;
        if (s == S_AFTER_POSITION || s == S_AFTER_CHORD || s == S_AFTER_TEMPO) {
            return true;
        }
        return s == S_AFTER_NOTE && (grammar[3] == NONE || p > grammar[3]);
    }
    if (id < T_DURATION) {
        return s == S_AFTER_PITCH;
    }
    return id < VOCAB && s == S_AFTER_VELOCITY;
}

// The grammar after `id` (`Grammar::advance`; `id` was allowed).
fn advance(id: u32) {
    if (id <= T_EOS) {
        grammar[0] = select(S_ENDED, S_BEGUN, id == 1u);
    } else if (id == T_BAR) {
        grammar[0] = S_AFTER_BAR;
        grammar[2] = NONE;
        grammar[3] = NONE;
    } else if (id < T_POSITION) {
        grammar[0] = S_AFTER_METER;
        grammar[1] = id - T_METER + 1u;
    } else if (id < T_CHORD) {
        grammar[0] = S_AFTER_POSITION;
        grammar[2] = id - T_POSITION;
        grammar[3] = NONE;
    } else if (id < T_TEMPO) {
        grammar[0] = S_AFTER_CHORD;
    } else if (id < T_PITCH) {
        grammar[0] = S_AFTER_TEMPO;
    } else if (id < T_VELOCITY) {
        grammar[0] = S_AFTER_PITCH;
        grammar[3] = id - T_PITCH;
    } else if (id < T_DURATION) {
        grammar[0] = S_AFTER_VELOCITY;
    } else {
        grammar[0] = S_AFTER_NOTE;
    }
}

fn none_as_f32(v: u32) -> f32 {
    return select(f32(v), -1.0, v == NONE);
}

fn f32_as_none(v: f32) -> u32 {
    return select(u32(v), NONE, v < 0.0);
}

@compute @workgroup_size({{ wg }}, 1, 1)
fn main(@builtin(local_invocation_index) lid: u32) {
    let at = info[I_AT];
    if (lid == 0u) {
        var k_steps = info[I_STEPS];
        if (!buffers_fit(at + k_steps, 0u)) {
            k_steps = 0u;
        }
        uniform_k = k_steps;
        // The token this dispatch starts from: the chunk's first, or the last dispatch's draw.
        if (at == 0u) {
            token = info[I_TOKEN];
            for (var i = 0u; i < 4u; i++) {
                grammar[i] = info[I_GRAMMAR + i];
            }
        } else {
            let c = (at - 1u) * OSTEP + OUT;
            token = u32(outs[c]);
            grammar[0] = u32(outs[c + 1u]);
            grammar[1] = u32(outs[c + 2u]);
            grammar[2] = f32_as_none(outs[c + 3u]);
            grammar[3] = f32_as_none(outs[c + 4u]);
        }
    }
    let k_steps = workgroupUniformLoad(&uniform_k);
    let first = info[I_FIRST];
    let seed_lo = info[I_SEED_LO];
    let seed_hi = info[I_SEED_HI];
    let t = max(bitcast<f32>(info[I_TEMP]), 1e-4);
    let top_p = bitcast<f32>(info[I_TOP_P]);
    let may_end = info[I_MAY_END] != 0u;

    for (var s = 0u; s < k_steps; s++) {
        let j = at + s;
        let row = j * STEP;
        let o = j * OSTEP;
        // The input layer: the token's embedding (its bias is zero).
        let id = min(workgroupUniformLoad(&token), IN_ROWS - 1u);
        for (var c = lid; c < D; c += WG) {
            x[c] = weights[IN_W + id * D + c] + weights[IN_B + c];
        }
        workgroupBarrier();

        model_step(lid, row, o, slot_of(j), slot_of(j + 1u));

        // The next token, as `sample_token` draws it: the allowed tokens' weights at the
        // temperature, sorted, cut to top-p, one drawn with the uniform of its index.
        if (lid == 0u) {
            var mx = -3.4e38;
            var n = 0u;
            for (var i = 0u; i < OUT; i++) {
                if (allowed(i, may_end)) {
                    mx = max(mx, logit[i] / t);
                    n++;
                }
            }
            top = mx;
            allowed_n = n;
        }
        workgroupBarrier();
        let mx = top;
        for (var i = lid; i < OUT; i += WG) {
            weight[i] = select(-1.0, exp(logit[i] / t - mx), allowed(i, may_end));
        }
        workgroupBarrier();
        for (var i = lid; i < OUT; i += WG) {
            let w = weight[i];
            if (w >= 0.0) {
                var rank = 0u;
                for (var jj = 0u; jj < OUT; jj++) {
                    let u = weight[jj];
                    if (u > w || (u == w && jj < i)) {
                        rank++;
                    }
                }
                order[rank] = i;
            }
        }
        workgroupBarrier();
        if (lid == 0u) {
            let n = allowed_n;
            var next = T_EOS;
            if (n > 0u) {
                var total = 0.0;
                for (var r = 0u; r < n; r++) {
                    total += weight[order[r]];
                }
                var kept = 0.0;
                var cut = n;
                for (var r = 0u; r < n; r++) {
                    kept += weight[order[r]] / total;
                    if (kept >= top_p) {
                        cut = r + 1u;
                        break;
                    }
                }
                var mass = 0.0;
                for (var r = 0u; r < cut; r++) {
                    mass += weight[order[r]];
                }
                var u = uniform01(seed_lo, seed_hi, first + j, 0u, 0u) * mass;
                next = order[cut - 1u];
                for (var r = 0u; r < cut; r++) {
                    u -= weight[order[r]];
                    if (u <= 0.0) {
                        next = order[r];
                        break;
                    }
                }
            }
            advance(next);
            token = next;
            outs[o + OUT] = f32(next);
            outs[o + OUT + 1u] = f32(grammar[0]);
            outs[o + OUT + 2u] = f32(grammar[1]);
            outs[o + OUT + 3u] = none_as_f32(grammar[2]);
            outs[o + OUT + 4u] = none_as_f32(grammar[3]);
        }
        workgroupBarrier();
    }
}
