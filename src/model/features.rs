//! Feature maps that turn softmax attention into linear attention (Performer, Choromanski et
//! al. 2021): FAVOR+ positive orthogonal random features for the softmax kernel, and a ReLU
//! random-feature map, the alternative the SPE paper studies.
//!
//! FAVOR+: `phi(x) = exp(−|x|²/2) [exp(W x), exp(−W x)] / sqrt(m)` with `m/2` rows of `W`
//! orthogonal Gaussian directions (drawn in blocks of `dim` orthogonal rows, each scaled to the
//! norm of an independent Gaussian vector), so that `E[phi(x)·phi(y)] = exp(x·y)`. The ± pair
//! (Performer's hyperbolic variant, as fast-transformers implements it) has a lower variance
//! than `exp(W x)` alone. The ReLU map is `relu(W x) / sqrt(m)` with `m` directions. Draws come
//! from a seeded
//! host generator: one draw is kept for a whole generation session and redrawn on demand
//! during training, and every backend sees the same numbers.

use burn::tensor::activation::relu;
use burn::tensor::{Device, Tensor, TensorData};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

/// Which feature map a model uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FeatureKind {
    /// FAVOR+ positive random features (the softmax kernel).
    Favor,
    /// `relu(W x) / sqrt(m)` with the same orthogonal random `W`.
    Relu,
}

/// A standard normal draw (Box–Muller), from `rng`.
pub fn normal(rng: &mut StdRng) -> f64 {
    let u1: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// `rows × dim` orthogonal random features: blocks of `dim` orthonormal rows (Gram–Schmidt on
/// Gaussian rows), each row scaled to the length of an independent `dim`-dimensional Gaussian
/// vector, so each row is marginally Gaussian and rows within a block are orthogonal.
pub fn orthogonal_gaussian(rows: usize, dim: usize, rng: &mut StdRng) -> Vec<f64> {
    let mut out = Vec::with_capacity(rows * dim);
    while out.len() < rows * dim {
        // Only as many orthogonal rows as are still needed: O(rows · dim²), not O(dim³) for a
        // wide input and few features.
        let want = dim.min(rows - out.len() / dim);
        let mut block: Vec<Vec<f64>> = Vec::with_capacity(want);
        while block.len() < want {
            let mut v: Vec<f64> = (0..dim).map(|_| normal(rng)).collect();
            for u in &block {
                let d: f64 = v.iter().zip(u).map(|(a, b)| a * b).sum();
                for (x, y) in v.iter_mut().zip(u) {
                    *x -= d * y;
                }
            }
            let n = v.iter().map(|x| x * x).sum::<f64>().sqrt();
            if n > 1e-6 {
                block.push(v.into_iter().map(|x| x / n).collect());
            }
        }
        for u in block {
            if out.len() >= rows * dim {
                break;
            }
            let scale = (0..dim).map(|_| normal(rng).powi(2)).sum::<f64>().sqrt();
            out.extend(u.into_iter().map(|x| x * scale));
        }
    }
    out
}

/// One draw of a feature map: `features` random directions in `dim` dimensions, per head.
#[derive(Clone, Debug)]
pub struct FeatureMap {
    pub kind: FeatureKind,
    /// Shape: [heads, dim, directions] (so `x.matmul(w)` projects rows of `x`); `features / 2`
    /// directions for FAVOR+, `features` for ReLU.
    pub w: Tensor<3>,
    pub features: usize,
}

impl FeatureMap {
    /// A fresh draw from `seed`, independent per head. FAVOR+ needs an even `features`.
    pub fn draw(
        kind: FeatureKind,
        heads: usize,
        dim: usize,
        features: usize,
        seed: u64,
        device: &Device,
    ) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let directions = match kind {
            FeatureKind::Favor => (features / 2).max(1),
            FeatureKind::Relu => features,
        };
        let mut values = Vec::with_capacity(heads * dim * directions);
        for _ in 0..heads {
            let w = orthogonal_gaussian(directions, dim, &mut rng); // [directions, dim]
            // Transposed to [dim, directions].
            for d in 0..dim {
                for f in 0..directions {
                    values.push(w[f * dim + d] as f32);
                }
            }
        }
        let w = Tensor::from_data(
            TensorData::new(values, vec![heads, dim, directions]),
            device,
        );
        Self { kind, w, features }
    }

    /// Features of `x`. Shape: [batch, heads, len, dim] -> [batch, heads, len, features].
    ///
    /// `is_query` only matters for FAVOR+: a query row may be shifted by its own maximum,
    /// which cancels in the normalised attention and keeps `exp` in range; a key may not (its
    /// constant would have to be shared by all keys, past and future).
    pub fn apply(&self, x: Tensor<4>, is_query: bool) -> Tensor<4> {
        let [_, heads, _, dim] = x.dims();
        let directions = self.w.dims()[2];
        let w = self.w.clone().reshape([1, heads, dim, directions]);
        let proj = x.clone().matmul(w);
        let scale = 1.0 / (self.features as f64).sqrt();
        match self.kind {
            FeatureKind::Relu => relu(proj).mul_scalar(scale),
            FeatureKind::Favor => {
                let half_norm = x.square().sum_dim(3).mul_scalar(0.5);
                let mut arg = Tensor::cat(vec![proj.clone(), proj.neg()], 3) - half_norm;
                if is_query {
                    arg = arg.clone() - arg.max_dim(3).detach();
                }
                arg.exp().mul_scalar(scale)
            }
        }
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    #[test]
    fn orthogonal_rows_within_a_block() {
        let mut rng = StdRng::seed_from_u64(1);
        let dim = 6;
        let w = orthogonal_gaussian(9, dim, &mut rng);
        let row = |i: usize| &w[i * dim..(i + 1) * dim];
        for i in 0..dim {
            for j in 0..i {
                let d: f64 = row(i).iter().zip(row(j)).map(|(a, b)| a * b).sum();
                assert!(d.abs() < 1e-9, "rows {i} and {j}: {d}");
            }
        }
        // The second block (rows 6..9) is a new draw, not orthogonal to the first.
        assert_eq!(w.len(), 9 * dim);
    }

    #[test]
    fn normal_draws_have_unit_variance() {
        let mut rng = StdRng::seed_from_u64(2);
        let xs: Vec<f64> = (0..20000).map(|_| normal(&mut rng)).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        assert!(
            mean.abs() < 0.03 && (var - 1.0).abs() < 0.05,
            "{mean} {var}"
        );
    }
}
