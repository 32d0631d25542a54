//! sineSPE (SPE paper, eqs. 18–21): per head and key dimension d, the kernel
//! `P_d(m − n) = (1/2K) Σ_k λ_kd² cos(2π f_kd (m − n) + θ_kd)`, realised by codes
//! `Qbar_d = Ω(m, f_d, θ_d) diag(λ̈_d) Z_d / sqrt(2K)` and `Kbar_d = Ω(n, f_d, 0) diag(λ̈_d) Z_d /
//! sqrt(2K)` that share one Gaussian `Z_d` (2K × R). As in the reference code:
//! `f = sigmoid(raw)/2` with raw frequencies initialised around −4 (long periods), `λ` through
//! softplus, and the phase offset `θ` on the query side only.

use std::sync::Arc;

use burn::module::{Module, Param};
use burn::tensor::activation::{sigmoid, softplus};
use burn::tensor::{Device, Tensor, TensorData};
use rand::rngs::StdRng;

use super::{
    Codes, Draw, PeConfig, PlainCodes, PlainKernel, Relative, Span, init_gains, omega_features,
    seeded,
};
use crate::model::ModelError;
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

impl Relative for SineSpe {
    fn new(config: &PeConfig, heads: usize, dim: usize, rng: &mut StdRng, device: &Device) -> Self {
        SineSpe::new(heads, dim, config.sines, rng, device)
    }

    fn check(config: &PeConfig) -> Result<(), String> {
        check_sines(config)
    }

    fn mix(&self, config: &PeConfig, seed: u64, device: &Device) -> Option<Tensor<3>> {
        Some(self.draw_mix(config.realizations, seed, device))
    }

    fn codes(
        &self,
        config: &PeConfig,
        span: &Span,
        draw: &mut Draw,
        device: &Device,
    ) -> Result<Codes, ModelError> {
        let (omega_q, omega_k) = self.omegas(span.start, span.len, device);
        let mix = match &draw.mix {
            Some(mix) => mix.clone(),
            None => self.draw_mix(config.realizations, draw.seed, device),
        };
        Ok(Codes::Factored {
            omega_q,
            omega_k,
            mix: Box::new(mix),
        })
    }

    fn templates(&self, lags: &[usize]) -> Option<Tensor<3>> {
        Some(self.kernel(&lags.iter().map(|&t| t as f32).collect::<Vec<_>>()))
    }

    fn plain_tensors(&self) -> Vec<Tensor<1>> {
        vec![
            self.frequencies().flatten(0, 2),
            self.offsets.val().flatten(0, 2),
            softplus(self.gains.val(), 1.0).flatten(0, 2),
        ]
    }

    fn plain(
        &self,
        _config: &PeConfig,
        values: Vec<Vec<f32>>,
    ) -> Result<Arc<dyn PlainKernel>, String> {
        let [freqs, offsets, gains]: [Vec<f32>; 3] = values
            .try_into()
            .map_err(|_| "sineSPE reads three tensors".to_string())?;
        Ok(Arc::new(PlainSine {
            freqs,
            offsets,
            gains,
            sines: self.sines(),
        }))
    }
}

/// sineSPE and F-StrIPE need a sinusoid and a code.
pub(super) fn check_sines(config: &PeConfig) -> Result<(), String> {
    if config.sines == 0 {
        return Err("sineSPE and F-StrIPE need at least one sinusoid".into());
    }
    Ok(())
}

/// sineSPE's parameters as the tensor form computes them: frequencies in cycles per step,
/// query offsets and gains (after softplus), each [heads, dim, sines].
#[derive(Debug)]
pub struct PlainSine {
    freqs: Vec<f32>,
    offsets: Vec<f32>,
    gains: Vec<f32>,
    sines: usize,
}

impl PlainKernel for PlainSine {
    /// Ω of one position, computed as the tensor form does (phases in f32).
    fn step(&self, position: usize, _labels: Option<&[f32]>, _draw: &mut Draw) -> PlainCodes {
        let k = self.sines;
        let j = 2 * k;
        let scale = 1.0 / (j as f32).sqrt();
        let hd = self.freqs.len() / k.max(1);
        let mut oq = vec![0f32; hd * j];
        let mut ok = vec![0f32; hd * j];
        let two_pi = (2.0 * std::f64::consts::PI) as f32;
        for i in 0..hd * k {
            let phase_k = (self.freqs[i] * position as f32) * two_pi;
            let phase_q = phase_k + self.offsets[i];
            let g = self.gains[i];
            let at = (i / k) * j + 2 * (i % k);
            oq[at] = phase_q.cos() * g * scale;
            oq[at + 1] = phase_q.sin() * g * scale;
            ok[at] = phase_k.cos() * g * scale;
            ok[at + 1] = phase_k.sin() * g * scale;
        }
        PlainCodes::Factored(oq, ok, j)
    }

    /// Ω of queries and keys [len, heads · dim, 2K] (gains and `1/sqrt(2K)` in) at positions
    /// `start..start + len`. The phases advance by rotation (in f64, re-anchored every 64
    /// positions) instead of a sine and a cosine per position, dimension and sinusoid.
    fn call(&self, start: usize, len: usize, _labels: Option<&[f32]>) -> Option<PlainCodes> {
        let k = self.sines;
        let j = 2 * k;
        let hd = self.freqs.len() / k.max(1);
        let scale = 1.0 / (j as f64).sqrt();
        let two_pi = 2.0 * std::f64::consts::PI;
        let (mut oq, mut ok) = (vec![0f32; len * hd * j], vec![0f32; len * hd * j]);
        // Per (dimension, sinusoid): the key's phase as (cos, sin) and one step's rotation.
        let mut phase = vec![(0f64, 0f64); hd * k];
        let step: Vec<(f64, f64)> = self
            .freqs
            .iter()
            .map(|&f| {
                let a = two_pi * f as f64;
                (a.cos(), a.sin())
            })
            .collect();
        let offsets: Vec<(f64, f64)> = self
            .offsets
            .iter()
            .map(|&o| ((o as f64).cos(), (o as f64).sin()))
            .collect();
        for t in 0..len {
            let position = start + t;
            for (i, p) in phase.iter_mut().enumerate() {
                *p = if t % 64 == 0 {
                    let a = two_pi * self.freqs[i] as f64 * position as f64;
                    (a.cos(), a.sin())
                } else {
                    let (c, s) = *p;
                    let (rc, rs) = step[i];
                    (c * rc - s * rs, s * rc + c * rs)
                };
                let (c, s) = *p;
                let (oc, os) = offsets[i];
                let g = self.gains[i] as f64 * scale;
                let at = (t * hd + i / k) * j + 2 * (i % k);
                ok[at] = (c * g) as f32;
                ok[at + 1] = (s * g) as f32;
                oq[at] = ((c * oc - s * os) * g) as f32;
                oq[at + 1] = ((s * oc + c * os) * g) as f32;
            }
        }
        Some(PlainCodes::Factored(oq, ok, j))
    }
}
