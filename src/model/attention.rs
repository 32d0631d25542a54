//! Causal attention in three forms that must agree:
//!
//! - **parallel linear** (training, whole songs, prompt prefill): for features `φq, φk` and
//!   values `v`, `out_m = Σ_{n≤m} (φq_m·φk_n) v_n / Σ_{n≤m} φq_m·φk_n`. Computed chunk by
//!   chunk: inside a chunk a masked `C × C` product, across chunks the running state
//!   `S = Σ φk_n v_nᵀ`, `z = Σ φk_n`. Memory is O(C² + m·d) per head, never the O(L·m·d)
//!   prefix sum a cumulative-sum formulation materialises.
//! - **recurrent linear** (decoding): the same `S`, `z` carried token by token, so a token costs
//!   the same at position 10 and at position 10 000.
//! - **exact softmax** (the quadratic baseline every claim is compared with), with a KV cache
//!   for decoding.
//!
//! Shapes: [batch, heads, len, features or dim].

use burn::tensor::activation::softmax;
use burn::tensor::{Device, Tensor, TensorData};

/// Added to denominators: features are positive, so this only guards an all-zero row (ReLU
/// features can be all zero).
pub const EPS: f64 = 1e-6;

/// Lower-triangular ones (diagonal included), [1, 1, n, n].
fn causal_mask(n: usize, device: &Device) -> Tensor<4> {
    offset_causal_mask(n, n, device)
}

/// Ones where query `i` (at position `keys − queries + i`) may see key `j`, [1, 1, queries,
/// keys]: the mask of the last `queries` rows of a causal `keys × keys` map.
fn offset_causal_mask(queries: usize, keys: usize, device: &Device) -> Tensor<4> {
    let start = keys - queries;
    let mut values = vec![0f32; queries * keys];
    for i in 0..queries {
        values[i * keys..i * keys + start + i + 1].fill(1.0);
    }
    Tensor::from_data(TensorData::new(values, vec![1, 1, queries, keys]), device)
}

/// The running sums of causal linear attention for one layer: `S` [batch, heads, m, d_v] and
/// `z` [batch, heads, m, 1].
#[derive(Clone, Debug)]
pub struct LinearState {
    pub s: Tensor<4>,
    pub z: Tensor<4>,
}

impl LinearState {
    pub fn zeros(batch: usize, heads: usize, features: usize, d_v: usize, device: &Device) -> Self {
        Self {
            s: Tensor::zeros([batch, heads, features, d_v], device),
            z: Tensor::zeros([batch, heads, features, 1], device),
        }
    }

    /// Adds keys and values. Shapes: [batch, heads, n, m] and [batch, heads, n, d_v].
    pub fn absorb(self, phi_k: Tensor<4>, v: Tensor<4>) -> Self {
        let kt = phi_k.swap_dims(2, 3);
        Self {
            s: self.s + kt.clone().matmul(v),
            z: self.z + kt.sum_dim(3),
        }
    }

    /// What queries read from the state alone: numerator [b, h, n, d_v], denominator [b, h, n, 1].
    fn read(&self, phi_q: Tensor<4>) -> (Tensor<4>, Tensor<4>) {
        (
            phi_q.clone().matmul(self.s.clone()),
            phi_q.matmul(self.z.clone()),
        )
    }
}

/// Parallel causal linear attention, `chunk` positions at a time, continuing from `state`
/// (zeros for a fresh sequence). Returns the outputs and the state after the last position,
/// from which [`recurrent_step`] can go on decoding.
pub fn causal_linear(
    phi_q: Tensor<4>,
    phi_k: Tensor<4>,
    v: Tensor<4>,
    chunk: usize,
    mut state: LinearState,
) -> (Tensor<4>, LinearState) {
    let [_, _, len, _] = phi_q.dims();
    let device = phi_q.device();
    let chunk = chunk.max(1).min(len.max(1));
    let full_mask = causal_mask(chunk, &device);
    let mut outs = Vec::with_capacity(len.div_ceil(chunk));
    let mut start = 0;
    while start < len {
        let n = chunk.min(len - start);
        let q = phi_q.clone().narrow(2, start, n);
        let k = phi_k.clone().narrow(2, start, n);
        let vc = v.clone().narrow(2, start, n);
        let mask = if n == chunk {
            full_mask.clone()
        } else {
            full_mask.clone().narrow(2, 0, n).narrow(3, 0, n)
        };
        let a = q.clone().matmul(k.clone().swap_dims(2, 3)) * mask;
        let (num_state, den_state) = state.read(q);
        let num = a.clone().matmul(vc.clone()) + num_state;
        let den = a.sum_dim(3) + den_state;
        outs.push(num / den.add_scalar(EPS));
        state = state.absorb(k, vc);
        start += n;
    }
    (Tensor::cat(outs, 2), state)
}

/// One decoding step: absorbs the new key and value, then reads with the new query. Shapes:
/// [batch, heads, 1, m], [batch, heads, 1, m], [batch, heads, 1, d_v].
pub fn recurrent_step(
    phi_q: Tensor<4>,
    phi_k: Tensor<4>,
    v: Tensor<4>,
    state: LinearState,
) -> (Tensor<4>, LinearState) {
    let state = state.absorb(phi_k, v);
    let (num, den) = state.read(phi_q);
    (num / den.add_scalar(EPS), state)
}

/// The normalised attention of the last `l` positions over the `n` keys so far, for display:
/// row `i` is `φq_i·φk_j / Σ_{j'≤p} φq_i·φk_j'` for keys `j ≤ p` (the query's own position
/// `p = n − l + i`), zero after. Shapes: [batch, heads, l, m] and [batch, heads, n, m] ->
/// [batch, heads, l, n].
pub fn attention_rows(phi_q: Tensor<4>, phi_k: Tensor<4>) -> Tensor<4> {
    let (l, n) = (phi_q.dims()[2], phi_k.dims()[2]);
    let mask = offset_causal_mask(l, n, &phi_q.device());
    let scores = phi_q.matmul(phi_k.swap_dims(2, 3)) * mask; // [b, h, l, n]
    let total = scores.clone().sum_dim(3).add_scalar(EPS);
    scores / total
}

/// [`attention_rows`] for exact softmax attention over plain queries and keys.
pub fn softmax_rows(q: Tensor<4>, k: Tensor<4>, scale: f64) -> Tensor<4> {
    let (l, n) = (q.dims()[2], k.dims()[2]);
    let mask = offset_causal_mask(l, n, &q.device());
    let scores = q.matmul(k.swap_dims(2, 3)).mul_scalar(scale);
    let scores = scores * mask.clone() + (mask.neg().add_scalar(1.0)).mul_scalar(-1e9);
    softmax(scores, 3)
}

/// Exact causal softmax attention, `softmax(scale · q kᵀ)` with the future masked (`scale` is
/// `1/sqrt(d)` for plain queries and keys). Shapes: [batch, heads, len, d] for all three.
pub fn causal_softmax(q: Tensor<4>, k: Tensor<4>, v: Tensor<4>, scale: f64) -> Tensor<4> {
    let len = q.dims()[2];
    let device = q.device();
    let scores = q.matmul(k.swap_dims(2, 3)).mul_scalar(scale);
    // Masked scores get a large negative number rather than −inf: no NaN for empty rows.
    let mask = causal_mask(len, &device);
    let scores = scores.clone() * mask.clone() + (mask.neg().add_scalar(1.0)).mul_scalar(-1e9);
    softmax(scores, 3).matmul(v)
}

/// Keys and values so far, for softmax decoding.
#[derive(Clone, Debug)]
pub struct KvCache {
    pub k: Option<Tensor<4>>,
    pub v: Option<Tensor<4>>,
}

impl KvCache {
    pub fn new() -> Self {
        Self { k: None, v: None }
    }

    pub fn len(&self) -> usize {
        self.k.as_ref().map_or(0, |k| k.dims()[2])
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends `len` positions' keys and values and attends with `softmax(scale · q kᵀ)`, each
    /// query over the cache and the new positions up to its own. Shapes: [batch, heads, len, d].
    pub fn attend(&mut self, q: Tensor<4>, k: Tensor<4>, v: Tensor<4>, scale: f64) -> Tensor<4> {
        let past = self.len();
        let len = q.dims()[2];
        let device = q.device();
        let k = match self.k.take() {
            Some(old) => Tensor::cat(vec![old, k], 2),
            None => k,
        };
        let v = match self.v.take() {
            Some(old) => Tensor::cat(vec![old, v], 2),
            None => v,
        };
        let mut scores = q.matmul(k.clone().swap_dims(2, 3)).mul_scalar(scale);
        if len > 1 {
            let total = past + len;
            let mut blocked = vec![0f32; len * total];
            for i in 0..len {
                for j in past + i + 1..total {
                    blocked[i * total + j] = -1e9;
                }
            }
            let blocked =
                Tensor::<4>::from_data(TensorData::new(blocked, vec![1, 1, len, total]), &device);
            scores = scores + blocked;
        }
        let out = softmax(scores, 3).matmul(v.clone());
        self.k = Some(k);
        self.v = Some(v);
        out
    }

    /// One position: [`Self::attend`] with `len` 1.
    pub fn step(&mut self, q: Tensor<4>, k: Tensor<4>, v: Tensor<4>, scale: f64) -> Tensor<4> {
        self.attend(q, k, v, scale)
    }
}

impl Default for KvCache {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::model::features::{FeatureKind, FeatureMap};
    use crate::model::testing::{close, random, to_vec};

    #[test]
    fn parallel_chunks_recurrent_and_brute_force_agree() {
        let device = Device::flex();
        let (b, h, len, m, dv) = (2, 3, 13, 8, 5);
        let phi_q = random(&[b, h, len, m], 1, &device).abs();
        let phi_k = random(&[b, h, len, m], 2, &device).abs();
        let v = random(&[b, h, len, dv], 3, &device);
        // Brute force: the full masked product.
        let a = phi_q.clone().matmul(phi_k.clone().swap_dims(2, 3)) * causal_mask(len, &device);
        let brute = a.clone().matmul(v.clone()) / a.sum_dim(3).add_scalar(EPS);
        let brute = to_vec(brute);
        for chunk in [1, 4, 13, 64] {
            let state = LinearState::zeros(b, h, m, dv, &device);
            let (par, _) = causal_linear(phi_q.clone(), phi_k.clone(), v.clone(), chunk, state);
            assert!(close(&to_vec(par), &brute, 1e-5), "chunk {chunk}");
        }
        let mut state = LinearState::zeros(b, h, m, dv, &device);
        let mut outs = Vec::new();
        for t in 0..len {
            let at = |x: &Tensor<4>| x.clone().narrow(2, t, 1);
            let (o, s) = recurrent_step(at(&phi_q), at(&phi_k), at(&v), state);
            state = s;
            outs.push(o);
        }
        assert!(close(&to_vec(Tensor::cat(outs, 2)), &brute, 1e-5));
    }

    #[test]
    fn prefill_then_decode_continues_the_same_sequence() {
        let device = Device::flex();
        let (len, m, dv) = (9, 4, 3);
        let phi_q = random(&[1, 2, len, m], 4, &device).abs();
        let phi_k = random(&[1, 2, len, m], 5, &device).abs();
        let v = random(&[1, 2, len, dv], 6, &device);
        let zeros = || LinearState::zeros(1, 2, m, dv, &device);
        let (all, _) = causal_linear(phi_q.clone(), phi_k.clone(), v.clone(), 4, zeros());
        let (_, state) = causal_linear(
            phi_q.clone().narrow(2, 0, 6),
            phi_k.clone().narrow(2, 0, 6),
            v.clone().narrow(2, 0, 6),
            4,
            zeros(),
        );
        let (next, _) = recurrent_step(
            phi_q.narrow(2, 6, 1),
            phi_k.narrow(2, 6, 1),
            v.narrow(2, 6, 1),
            state,
        );
        assert!(close(&to_vec(next), &to_vec(all.narrow(2, 6, 1)), 1e-5));
    }

    #[test]
    fn attention_rows_are_the_normalised_brute_force_rows() {
        let device = Device::flex();
        let phi_q = random(&[1, 1, 6, 4], 7, &device).abs();
        let phi_k = random(&[1, 1, 6, 4], 8, &device).abs();
        // The last three positions' rows, as a call of length 3 after three earlier steps.
        let rows = to_vec(attention_rows(phi_q.clone().narrow(2, 3, 3), phi_k.clone()));
        let q = to_vec(phi_q);
        let k = to_vec(phi_k);
        for i in 0..3 {
            let p = 3 + i;
            let scores: Vec<f32> = (0..6)
                .map(|n| {
                    let s: f32 = (0..4).map(|f| q[p * 4 + f] * k[n * 4 + f]).sum();
                    if n <= p { s } else { 0.0 }
                })
                .collect();
            let total: f32 = scores.iter().sum();
            let expected: Vec<f32> = scores.iter().map(|s| s / total).collect();
            let row = &rows[i * 6..(i + 1) * 6];
            assert!(
                close(row, &expected, 1e-6),
                "row {p}: {row:?} vs {expected:?}"
            );
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        }
    }

    #[test]
    fn softmax_rows_are_the_causal_softmax_weights() {
        let device = Device::flex();
        let q = random(&[1, 1, 5, 4], 12, &device);
        let k = random(&[1, 1, 5, 4], 13, &device);
        let rows = to_vec(softmax_rows(q.clone().narrow(2, 2, 3), k.clone(), 0.5));
        let (q, k) = (to_vec(q), to_vec(k));
        for i in 0..3 {
            let p = 2 + i;
            let e: Vec<f32> = (0..=p)
                .map(|n| (0.5 * (0..4).map(|f| q[p * 4 + f] * k[n * 4 + f]).sum::<f32>()).exp())
                .collect();
            let total: f32 = e.iter().sum();
            for n in 0..5 {
                let want = if n <= p { e[n] / total } else { 0.0 };
                assert!((rows[i * 5 + n] - want).abs() < 1e-5, "{p} {n}");
            }
        }
    }

    #[test]
    fn kv_cache_decoding_equals_causal_softmax() {
        let device = Device::flex();
        let (len, d) = (7, 8);
        let q = random(&[1, 2, len, d], 9, &device);
        let k = random(&[1, 2, len, d], 10, &device);
        let v = random(&[1, 2, len, d], 11, &device);
        let scale = 1.0 / (d as f64).sqrt();
        let full = to_vec(causal_softmax(q.clone(), k.clone(), v.clone(), scale));
        let mut cache = KvCache::new();
        let outs: Vec<_> = (0..len)
            .map(|t| {
                cache.step(
                    q.clone().narrow(2, t, 1),
                    k.clone().narrow(2, t, 1),
                    v.clone().narrow(2, t, 1),
                    scale,
                )
            })
            .collect();
        assert_eq!(cache.len(), len);
        assert!(close(&to_vec(Tensor::cat(outs, 2)), &full, 1e-5));
        // A prefill of several positions, then steps.
        let mut cache = KvCache::new();
        let first = cache.attend(
            q.clone().narrow(2, 0, 4),
            k.clone().narrow(2, 0, 4),
            v.clone().narrow(2, 0, 4),
            scale,
        );
        let rest = cache.attend(
            q.narrow(2, 4, 3),
            k.narrow(2, 4, 3),
            v.narrow(2, 4, 3),
            scale,
        );
        assert!(close(
            &to_vec(Tensor::cat(vec![first, rest], 2)),
            &full,
            1e-5
        ));
    }

    /// FAVOR+ estimates softmax attention; the error shrinks as features are added.
    #[test]
    fn favor_approaches_softmax_attention_with_more_features() {
        let device = Device::flex();
        let (len, d) = (16, 8);
        // Small inputs: the regime where a few hundred features already estimate well.
        let q = random(&[1, 1, len, d], 12, &device).mul_scalar(0.5);
        let k = random(&[1, 1, len, d], 13, &device).mul_scalar(0.5);
        let v = random(&[1, 1, len, d], 14, &device);
        let exact = to_vec(causal_softmax(
            q.clone(),
            k.clone(),
            v.clone(),
            1.0 / (d as f64).sqrt(),
        ));
        // Softmax uses q·k/sqrt(d): feed q and k scaled by d^(-1/4) each.
        let s = 1.0 / (d as f64).powf(0.25);
        let err = |features: usize| {
            let mut total = 0.0;
            let trials = 6;
            for seed in 0..trials {
                let fm = FeatureMap::draw(FeatureKind::Favor, 1, d, features, 100 + seed, &device);
                let pq = fm.apply(q.clone().mul_scalar(s), true);
                let pk = fm.apply(k.clone().mul_scalar(s), false);
                let state = LinearState::zeros(1, 1, features, d, &device);
                let (out, _) = causal_linear(pq, pk, v.clone(), 8, state);
                let out = to_vec(out);
                let mse: f64 = out
                    .iter()
                    .zip(&exact)
                    .map(|(a, b)| ((a - b) as f64).powi(2))
                    .sum::<f64>()
                    / out.len() as f64;
                total += mse;
            }
            total / trials as f64
        };
        let (e16, e256) = (err(16), err(256));
        assert!(
            e256 < e16 / 4.0,
            "error {e16} with 16 features, {e256} with 256"
        );
        assert!(e256 < 2e-3, "{e256}");
    }
}
