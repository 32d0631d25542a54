//! Absolute sinusoidal positions added to the embeddings (Vaswani et al.): `PE(t, 2i) =
//! sin(t / 10000^(2i/d))`, `PE(t, 2i+1) = cos(…)`, and CAPE (Likhomanenko et al. 2021), the same
//! at continuous positions augmented during training only: a global shift per sequence, a
//! local shift per token and a global scaling per sequence, `t' = λ (t + Δ + ε_t)`. The
//! positions are not mean-normalised: a causal decoder could not keep earlier tokens' positions
//! fixed as the sequence grows.

use burn::tensor::{Device, Tensor, TensorData};
use rand::RngExt;
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};

/// CAPE's training-time augmentation.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapeAugment {
    /// Global shift Δ ~ U(−max_shift, max_shift), in steps.
    pub max_shift: f64,
    /// Local shift ε_t ~ U(−max_local, max_local), per token.
    pub max_local: f64,
    /// Global scaling: log λ ~ U(−ln max_scale, ln max_scale).
    pub max_scale: f64,
}

impl Default for CapeAugment {
    /// The 1-D (text) recipe: Δ = 5, ε = ±0.5, λ = 1.03.
    fn default() -> Self {
        Self {
            max_shift: 5.0,
            max_local: 0.5,
            max_scale: 1.03,
        }
    }
}

impl CapeAugment {
    /// Positions `start..start + len`, augmented with one draw from `rng`.
    pub fn positions(&self, start: usize, len: usize, rng: &mut StdRng) -> Vec<f32> {
        let mut uniform = |a: f64| (rng.random::<f64>() * 2.0 - 1.0) * a;
        let shift = uniform(self.max_shift);
        let scale = uniform(self.max_scale.max(1.0).ln()).exp();
        (start..start + len)
            .map(|t| (scale * (t as f64 + shift + uniform(self.max_local))) as f32)
            .collect()
    }
}

/// Sinusoidal encodings of (possibly fractional) positions for each of `batch` rows:
/// `positions` is [batch · len], the result [batch, len, d_model].
pub fn sinusoids(positions: &[f32], batch: usize, d_model: usize, device: &Device) -> Tensor<3> {
    let len = positions.len() / batch.max(1);
    let values = sinusoid_values(positions, d_model);
    Tensor::from_data(TensorData::new(values, vec![batch, len, d_model]), device)
}

/// The values of [`sinusoids`], [positions, d_model].
pub fn sinusoid_values(positions: &[f32], d_model: usize) -> Vec<f32> {
    let mut values = Vec::with_capacity(positions.len() * d_model);
    for &t in positions {
        for i in 0..d_model {
            let freq = (-(10000f64.ln()) * (2 * (i / 2)) as f64 / d_model as f64).exp();
            let angle = t as f64 * freq;
            values.push(if i % 2 == 0 { angle.sin() } else { angle.cos() } as f32);
        }
    }
    values
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn sinusoids_follow_the_formula() {
        let device = Device::flex();
        let t = sinusoids(&[0.0, 3.0], 1, 8, &device);
        let v = t.into_data().try_to_vec::<f32>().unwrap();
        assert_eq!(&v[..2], &[0.0, 1.0]);
        let freq = (-(10000f64.ln()) * 2.0 / 8.0).exp();
        assert!((v[8 + 2] - (3.0 * freq).sin() as f32).abs() < 1e-6);
        assert!((v[8 + 3] - (3.0 * freq).cos() as f32).abs() < 1e-6);
    }

    #[test]
    fn cape_augments_within_its_ranges() {
        let mut rng = StdRng::seed_from_u64(3);
        let aug = CapeAugment::default();
        for _ in 0..50 {
            let p = aug.positions(10, 20, &mut rng);
            // t' = λ (t + Δ + ε): within [0.97 (t − 5.5), 1.03 (t + 5.5)].
            for (k, &x) in p.iter().enumerate() {
                let t = (10 + k) as f32;
                assert!(
                    x >= (t - 5.5) / 1.031 && x <= (t + 5.5) * 1.031,
                    "{t} -> {x}"
                );
            }
        }
        let none = CapeAugment {
            max_shift: 0.0,
            max_local: 0.0,
            max_scale: 1.0,
        };
        assert_eq!(none.positions(4, 3, &mut rng), vec![4.0, 5.0, 6.0]);
    }
}
