//! sineSPE (SPE paper, eqs. 18–21): per head and key dimension d, the kernel
//! `P_d(m − n) = (1/2K) Σ_k λ_kd² cos(2π f_kd (m − n) + θ_kd)`, realised by codes
//! `Qbar_d = Ω(m, f_d, θ_d) diag(λ̈_d) Z_d / sqrt(2K)` and `Kbar_d = Ω(n, f_d, 0) diag(λ̈_d) Z_d /
//! sqrt(2K)` that share one Gaussian `Z_d` (2K × R). As in the reference code:
//! `f = sigmoid(raw)/2` with raw frequencies initialised around −4 (long periods), `λ` through
//! softplus, and the phase offset `θ` on the query side only.

use burn::module::{Module, Param};
use burn::tensor::activation::{sigmoid, softplus};
use burn::tensor::{Device, Tensor, TensorData};
use rand::rngs::StdRng;

use super::{init_gains, omega_features, seeded};
use crate::model::features::normal;

#[derive(Module, Debug)]
pub struct SineSpe {
    /// Raw frequencies [heads, dim, sines]: `f = sigmoid(raw) / 2`.
    pub freqs: Param<Tensor<3>>,
    /// Phase offsets θ [heads, dim, sines] (query side).
    pub offsets: Param<Tensor<3>>,
    /// Raw gains [heads, dim, sines]: `λ = softplus(raw)`.
    pub gains: Param<Tensor<3>>,
}

impl SineSpe {
    pub fn new(heads: usize, dim: usize, sines: usize, rng: &mut StdRng, device: &Device) -> Self {
        let n = heads * dim * sines;
        let freqs: Vec<f32> = (0..n).map(|_| normal(rng) as f32 - 4.0).collect();
        let offsets: Vec<f32> = (0..n).map(|_| normal(rng) as f32).collect();
        let gains = init_gains(heads * dim, sines, rng);
        let shape = vec![heads, dim, sines];
        let p = |v: Vec<f32>| Param::from_data(TensorData::new(v, shape.clone()), device);
        Self {
            freqs: p(freqs),
            offsets: p(offsets),
            gains: p(gains),
        }
    }

    pub fn sines(&self) -> usize {
        self.freqs.dims()[2]
    }

    /// Frequencies in cycles per step, in (0, 0.5).
    pub fn frequencies(&self) -> Tensor<3> {
        sigmoid(self.freqs.val()).mul_scalar(0.5)
    }

    /// Query and key features for positions `start..start + len`, gains included:
    /// `Ω(m) diag(λ̈) / sqrt(2K)`, shape [1, heads, len, dim, 2K].
    pub fn omegas(&self, start: usize, len: usize, device: &Device) -> (Tensor<5>, Tensor<5>) {
        let positions: Vec<f32> = (start..start + len).map(|m| m as f32).collect();
        let positions = Tensor::<1>::from_data(TensorData::new(positions, vec![len]), device);
        let [heads, dim, sines] = self.freqs.dims();
        // Phase per [heads, len, dim, sines]: 2π f m (+ θ for queries).
        let f = self.frequencies().reshape([heads, 1, dim, sines]);
        let m = positions.reshape([1, len, 1, 1]);
        let phase_k = (f * m).mul_scalar(2.0 * std::f64::consts::PI);
        let phase_q = phase_k.clone() + self.offsets.val().reshape([heads, 1, dim, sines]);
        let gains = softplus(self.gains.val(), 1.0).reshape([1, heads, 1, dim, sines]);
        let scale = 1.0 / ((2 * sines) as f64).sqrt();
        let q = omega_features(phase_q.unsqueeze_dim(0), gains.clone()).mul_scalar(scale);
        let k = omega_features(phase_k.unsqueeze_dim(0), gains).mul_scalar(scale);
        (q, k)
    }

    /// The analytic kernel `P_d(τ)` at lags `τ`: [heads, dim, lags].
    pub fn kernel(&self, lags: &[f32]) -> Tensor<3> {
        let device = self.freqs.device();
        let [heads, dim, sines] = self.freqs.dims();
        let tau = Tensor::<1>::from_data(TensorData::new(lags.to_vec(), vec![lags.len()]), &device)
            .reshape([1, 1, 1, lags.len()]);
        let f = self.frequencies().reshape([heads, dim, sines, 1]);
        let theta = self.offsets.val().reshape([heads, dim, sines, 1]);
        let lambda2 = softplus(self.gains.val(), 1.0)
            .square()
            .reshape([heads, dim, sines, 1]);
        let cos = ((f * tau).mul_scalar(2.0 * std::f64::consts::PI) + theta).cos();
        (lambda2 * cos)
            .sum_dim(2)
            .mul_scalar(1.0 / (2 * sines) as f64)
            .reshape([heads, dim, lags.len()])
    }

    /// A draw of the shared Gaussian `Z`: [heads, dim · 2K, realizations].
    pub fn draw_mix(&self, realizations: usize, seed: u64, device: &Device) -> Tensor<3> {
        let [heads, dim, sines] = self.freqs.dims();
        seeded(&[heads, dim * 2 * sines, realizations], seed, device)
    }
}
