// Causal linear attention, fused: fast-transformers' `causal_dot_product` with the normaliser
// folded in as one extra column. Inference only (no gradient). Launched by
// src/model/kernels.rs (`causal_linear_fused`); `causal_linear` in src/model/attention.rs is the
// reference it must match.
//
// Sizes: BH = batch·heads, L = positions, M = features (m), DV = value width (d_v),
// C = DV + 1 columns: the DV value columns and one column whose value is always 1, so that its
// running state is z and its output the denominator.
//
// Template placeholders (filled by kernels.rs; every one of them is in the KernelId):
//   m   the feature count M (1..=256): the size of each invocation's private state column
//   m4  M rounded down to a multiple of 4 (the vectorised part of the feature loop)
//   wg  the workgroup size (x)
//
// One invocation per (bh, e), e < C. It keeps column e of the state in a private array and
// walks the positions in order:
//   st[f] = state_in[bh, f, e]                               for f < M
//   for i in 0..L:
//     st[f] += phi_k[bh, i, f] * v1[bh, i, e]                (v1[.., e] = v[.., e] for e < DV, 1 for e = DV)
//     num_den[bh, i, e] = sum_f phi_q[bh, i, f] * st[f]
//   state_out[bh, f, e] = st[f]
// so num_den[.., e < DV] = sum_{j<=i} (phi_q_i . phi_k_j) v_j + phi_q_i . S0   (numerator)
// and num_den[.., DV]    = sum_{j<=i}  phi_q_i . phi_k_j      + phi_q_i . z0   (denominator),
// and the caller divides: out = num / (den + EPS), exactly as the reference does.
//
// Every tensor is contiguous row-major f32. Every buffer is declared read_write (Burn's native
// memory pools share one wgpu buffer between allocations; wgpu refuses read-only and
// read-write views of one buffer in a dispatch). The runtime compiles this with bounds checks
// off, so every index below is kept in range by construction, and the buffer lengths are
// checked against the sizes in `info` before anything is read.

// phi_q:     [BH, L, M]   query features
@group(0) @binding(0) var<storage, read_write> phi_q: array<f32>;
// phi_k:     [BH, L, M]   key features
@group(0) @binding(1) var<storage, read_write> phi_k: array<f32>;
// v:         [BH, L, DV]  values
@group(0) @binding(2) var<storage, read_write> v: array<f32>;
// state_in:  [BH, M, C]   initial state, S0 in columns 0..DV, z0 in column DV
@group(0) @binding(3) var<storage, read_write> state_in: array<f32>;
// num_den:   [BH, L, C]   output: numerators in columns 0..DV, denominator in column DV
@group(0) @binding(4) var<storage, read_write> num_den: array<f32>;
// state_out: [BH, M, C]   output: the state after the last position, same layout as state_in
@group(0) @binding(5) var<storage, read_write> state_out: array<f32>;
// info:      [BH, L, M, DV] as u32, two per little-endian u64 word; appended as the last
//            binding by KernelArguments::with_info
@group(0) @binding(6) var<storage, read> info: array<u32>;

const M: u32 = {{ m }}u;
const M4: u32 = {{ m4 }}u;
const WG: u32 = {{ wg }}u;

@compute @workgroup_size({{ wg }}, 1, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let n_bh = info[0];
    let len = info[1];
    let m = info[2];
    let dv = info[3];
    let cols = dv + 1u;

    // A 2-D grid when there are more than 65 535 workgroups: row-major over (y, x).
    let idx = gid.y * (nwg.x * WG) + gid.x;
    if (idx >= n_bh * cols) {
        return;
    }
    // The sizes must be those the template was built for and fit the bound buffers: with
    // bounds checks off, a mismatch would read or write out of range. (The Rust side makes
    // them agree; this only refuses to run if they do not, leaving the outputs unwritten.)
    if (m != M
        || arrayLength(&phi_q) < n_bh * len * M
        || arrayLength(&phi_k) < n_bh * len * M
        || arrayLength(&v) < n_bh * len * dv
        || arrayLength(&state_in) < n_bh * M * cols
        || arrayLength(&num_den) < n_bh * len * cols
        || arrayLength(&state_out) < n_bh * M * cols) {
        return;
    }
    let bh = idx / cols;
    let e = idx % cols;

    // Column e of this (batch, head)'s state: st[f] = state[bh, f, e].
    var st: array<f32, {{ m }}>;
    let s_base = bh * M * cols + e;
    for (var f = 0u; f < M; f = f + 1u) {
        st[f] = state_in[s_base + f * cols];
    }

    for (var i = 0u; i < len; i = i + 1u) {
        let row = bh * len + i;
        let qk = row * M;
        // The value this column absorbs: v[bh, i, e], or 1 for the denominator column.
        var ve: f32 = 1.0;
        if (e < dv) {
            ve = v[row * dv + e];
        }
        // Absorb key i, then read with query i (position i sees itself). Four partial sums
        // keep the dependency chain short.
        var acc = vec4<f32>(0.0);
        for (var f = 0u; f < M4; f = f + 4u) {
            let kf = vec4<f32>(phi_k[qk + f], phi_k[qk + f + 1u], phi_k[qk + f + 2u], phi_k[qk + f + 3u]);
            let s = vec4<f32>(st[f], st[f + 1u], st[f + 2u], st[f + 3u]) + kf * ve;
            st[f] = s.x;
            st[f + 1u] = s.y;
            st[f + 2u] = s.z;
            st[f + 3u] = s.w;
            let qf = vec4<f32>(phi_q[qk + f], phi_q[qk + f + 1u], phi_q[qk + f + 2u], phi_q[qk + f + 3u]);
            acc = acc + qf * s;
        }
        var total = (acc.x + acc.y) + (acc.z + acc.w);
        for (var f = M4; f < M; f = f + 1u) {
            let s = st[f] + phi_k[qk + f] * ve;
            st[f] = s;
            total = total + phi_q[qk + f] * s;
        }
        num_den[row * cols + e] = total;
    }

    for (var f = 0u; f < M; f = f + 1u) {
        state_out[s_base + f * cols] = st[f];
    }
}
