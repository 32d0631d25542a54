//! F-StrIPE (Agarwal, Wang, Richard 2025): sineSPE with the step index replaced by a vector of
//! structure labels `s(m)` (melody pitch, chord, phrase, position in bar; any subset) and the
//! scalar frequency by a frequency vector per sinusoid (eq. 6), so that
//! `P_d(m, n) = (1/N) Σ_k λ_kd² cos(2π f_kd · (s(m) − s(n)) + θ^Q_kd − θ^K_kd)` depends only on
//! the labels: equal labels, equal kernel, however far apart in time.
//!
//! - **F-StrIPE** (eq. 9, random Fourier features, noise-free): the features
//!   `Ω(s, f_d, θ_d) diag(λ̈_d) / sqrt(N)` are used as they are. The paper does not say how
//!   dimensions are combined for linear attention; summing them over d, as SPE does, would
//!   leave cross terms no noise averages out, so they are concatenated (`dim · 2N` features per
//!   head), which gives `Σ_d q_d k_d P_d(m, n)` exactly.
//! - **F-StrIPE:SFF** (eq. 4 with eq. 6): the same features times a shared Gaussian `Z_d`, as in
//!   sineSPE, with R realizations. Both use the `1/sqrt(N)` of eq. 9 (eq. 4 has `1/sqrt(2N)`, a
//!   constant the gains absorb), so SFF's expectation is exactly the RFF kernel.

use std::sync::Arc;

use burn::module::{Module, Param};
use burn::tensor::activation::{sigmoid, softplus};
use burn::tensor::{Device, Tensor, TensorData};
use rand::rngs::StdRng;

use super::{
    Codes, Draw, PeConfig, PeKind, PlainCodes, PlainKernel, Relative, Span, StructureLevel,
    init_gains, omega_features, seeded,
};
use crate::model::ModelError;
use crate::model::features::normal;

#[derive(Module, Debug)]
pub struct Fstripe {
    /// Raw frequencies [heads, dim, sines, coordinates]: `f = sigmoid(raw) / 2` cycles per unit
    /// of label difference.
    pub freqs: Param<Tensor<4>>,
    /// Phases [heads, dim, sines], query and key side.
    pub theta_q: Param<Tensor<3>>,
    pub theta_k: Param<Tensor<3>>,
    /// Raw gains [heads, dim, sines]: `λ = softplus(raw)`.
    pub gains: Param<Tensor<3>>,
}

impl Fstripe {
    /// `time`: the column of the [`StructureLevel::Time`] coordinate,
    /// if the labels have one. Then the last `sines / 2` sines of each dimension start as
    /// sinusoids of time alone (as sineSPE's, periods of about 6–50 beats) and the others
    /// of the structure alone: a sine that read both would tell a phrase's repetition from
    /// its first occurrence by their distance in time, and so could not align them. Both
    /// kinds may learn to read everything (a frequency at raw −9 is off, not frozen).
    pub fn new(
        heads: usize,
        dim: usize,
        sines: usize,
        coordinates: usize,
        time: Option<usize>,
        rng: &mut StdRng,
        device: &Device,
    ) -> Self {
        let n = heads * dim * sines;
        // Label differences are of a few units (semitones, sixteenths, scaled chord
        // centroids, phrase codes), not of hundreds of steps as sineSPE's positions: raw
        // frequencies around −1.5 (f ≈ 0.04–0.19 cycles per unit at ±1σ) make 2π f·Δ span
        // about π over the typical differences from the start. sineSPE's −4 (f ≈ 0.009)
        // left the kernel nearly flat, and Adam barely moves it in a few thousand steps.
        let mut freqs: Vec<f32> = (0..n * coordinates)
            .map(|_| normal(rng) as f32 - 1.5)
            .collect();
        if let Some(t) = time.filter(|&t| t < coordinates && sines >= 2) {
            const OFF: f32 = -9.0;
            for (i, row) in freqs.chunks_exact_mut(coordinates).enumerate() {
                let timed = i % sines >= sines - sines / 2;
                for (c, f) in row.iter_mut().enumerate() {
                    if timed && c == t {
                        // f ≈ 0.02–0.16 cycles per beat (periods of 6–50 beats) at ±1.5σ.
                        *f = 0.8 * *f - 0.8;
                    } else if timed || c == t {
                        *f = OFF;
                    }
                }
            }
        }
        let theta_q: Vec<f32> = (0..n).map(|_| normal(rng) as f32).collect();
        let gains = init_gains(heads * dim, sines, rng);
        let shape = vec![heads, dim, sines];
        let p3 = |v: Vec<f32>| Param::from_data(TensorData::new(v, shape.clone()), device);
        Self {
            freqs: Param::from_data(
                TensorData::new(freqs, vec![heads, dim, sines, coordinates]),
                device,
            ),
            theta_q: p3(theta_q),
            theta_k: p3(vec![0.0; n]),
            gains: p3(gains),
        }
    }

    pub fn sines(&self) -> usize {
        self.freqs.dims()[2]
    }

    pub fn coordinates(&self) -> usize {
        self.freqs.dims()[3]
    }

    pub fn frequencies(&self) -> Tensor<4> {
        sigmoid(self.freqs.val()).mul_scalar(0.5)
    }

    /// Query and key features of `labels` [batch, len, coordinates], gains included and
    /// scaled by `1/sqrt(N)`: [batch, heads, len, dim, 2N].
    pub fn omegas(&self, labels: Tensor<3>) -> (Tensor<5>, Tensor<5>) {
        let [batch, len, coords] = labels.dims();
        let [heads, dim, sines, _] = self.freqs.dims();
        // Phase 2π f·s per [batch, heads, len, dim, sines].
        let f = self
            .frequencies()
            .reshape([heads * dim * sines, coords])
            .swap_dims(0, 1)
            .unsqueeze_dim::<3>(0); // [1, coords, h·d·k]
        let phase = labels
            .matmul(f)
            .reshape([batch, len, heads, dim, sines])
            .permute([0, 2, 1, 3, 4])
            .mul_scalar(2.0 * std::f64::consts::PI);
        let theta = |t: &Param<Tensor<3>>| t.val().reshape([1, heads, 1, dim, sines]);
        let gains = softplus(self.gains.val(), 1.0).reshape([1, heads, 1, dim, sines]);
        let scale = 1.0 / (sines as f64).sqrt();
        let q = omega_features(phase.clone() + theta(&self.theta_q), gains.clone());
        let k = omega_features(phase + theta(&self.theta_k), gains);
        (q.mul_scalar(scale), k.mul_scalar(scale))
    }

    /// The analytic (RFF) kernel for label differences `deltas` [n, coordinates]:
    /// [heads, dim, n].
    pub fn kernel(&self, deltas: Tensor<2>) -> Tensor<3> {
        let [n, coords] = deltas.dims();
        let [heads, dim, sines, _] = self.freqs.dims();
        let f = self.frequencies().reshape([heads * dim * sines, coords]);
        let phase = f
            .matmul(deltas.swap_dims(0, 1))
            .reshape([heads, dim, sines, n])
            .mul_scalar(2.0 * std::f64::consts::PI);
        let shift = (self.theta_q.val() - self.theta_k.val()).reshape([heads, dim, sines, 1]);
        let lambda2 = softplus(self.gains.val(), 1.0)
            .square()
            .reshape([heads, dim, sines, 1]);
        (lambda2 * (phase + shift).cos())
            .sum_dim(2)
            .mul_scalar(1.0 / sines as f64)
            .reshape([heads, dim, n])
    }

    /// A draw of the shared Gaussian `Z` for SFF: [heads, dim · 2N, realizations].
    pub fn draw_mix(&self, realizations: usize, seed: u64, device: &Device) -> Tensor<3> {
        let [heads, dim, sines, _] = self.freqs.dims();
        seeded(&[heads, dim * 2 * sines, realizations], seed, device)
    }
}

/// Both forms: F-StrIPE (`fstripe`, exact features) and F-StrIPE:SFF (`fstripe_sff`, the
/// features through a shared Gaussian), told apart by the config's kind.
impl Relative for Fstripe {
    fn new(config: &PeConfig, heads: usize, dim: usize, rng: &mut StdRng, device: &Device) -> Self {
        let time = config
            .levels
            .iter()
            .position(|l| *l == StructureLevel::Time)
            .map(|i| config.levels[..i].iter().map(|l| l.dims()).sum());
        Fstripe::new(
            heads,
            dim,
            config.sines,
            config.coordinates(),
            time,
            rng,
            device,
        )
    }

    fn check(config: &PeConfig) -> Result<(), String> {
        super::sine_spe::check_sines(config)?;
        if config.levels.is_empty() {
            return Err("F-StrIPE needs at least one structure level".into());
        }
        Ok(())
    }

    fn reads_labels() -> bool {
        true
    }

    fn mix(&self, config: &PeConfig, seed: u64, device: &Device) -> Option<Tensor<3>> {
        (config.kind == PeKind::FstripeSff)
            .then(|| self.draw_mix(config.realizations, seed, device))
    }

    fn codes(
        &self,
        config: &PeConfig,
        span: &Span,
        draw: &mut Draw,
        device: &Device,
    ) -> Result<Codes, ModelError> {
        let labels = span.labels.clone().ok_or(ModelError::MissingLabels)?;
        let (omega_q, omega_k) = self.omegas(labels);
        Ok(if config.kind == PeKind::FstripeSff {
            let mix = match &draw.mix {
                Some(mix) => mix.clone(),
                None => self.draw_mix(config.realizations, draw.seed, device),
            };
            Codes::Factored {
                omega_q,
                omega_k,
                mix: Box::new(mix),
            }
        } else {
            Codes::Exact { omega_q, omega_k }
        })
    }

    /// Exact features: `dim · 2N` per head (and the gate's `dim`).
    fn qk_dim(&self, config: &PeConfig, dim: usize) -> usize {
        match config.kind {
            PeKind::FstripeSff => config.realizations,
            _ => dim * 2 * config.sines + if config.gated { dim } else { 0 },
        }
    }

    fn plain_tensors(&self) -> Vec<Tensor<1>> {
        vec![
            self.frequencies().flatten(0, 3),
            self.theta_q.val().flatten(0, 2),
            self.theta_k.val().flatten(0, 2),
            softplus(self.gains.val(), 1.0).flatten(0, 2),
        ]
    }

    fn plain(
        &self,
        config: &PeConfig,
        values: Vec<Vec<f32>>,
    ) -> Result<Arc<dyn PlainKernel>, String> {
        let [freqs, theta_q, theta_k, gains]: [Vec<f32>; 4] = values
            .try_into()
            .map_err(|_| "F-StrIPE reads four tensors".to_string())?;
        Ok(Arc::new(PlainFstripe {
            freqs,
            theta_q,
            theta_k,
            gains,
            sines: self.sines(),
            coordinates: self.coordinates(),
            factored: config.kind == PeKind::FstripeSff,
        }))
    }
}

/// F-StrIPE's parameters as plain numbers: frequencies [heads · dim · sines, coordinates] in
/// cycles per unit, phases and gains (after softplus) [heads · dim · sines].
#[derive(Debug)]
pub struct PlainFstripe {
    freqs: Vec<f32>,
    theta_q: Vec<f32>,
    theta_k: Vec<f32>,
    gains: Vec<f32>,
    sines: usize,
    coordinates: usize,
    /// SFF: the features go through the draw's mix.
    factored: bool,
}

impl PlainKernel for PlainFstripe {
    fn step(&self, _position: usize, labels: Option<&[f32]>, _draw: &mut Draw) -> PlainCodes {
        self.omegas(labels.unwrap_or(&[]), 1)
    }

    fn call(&self, _start: usize, len: usize, labels: Option<&[f32]>) -> Option<PlainCodes> {
        Some(self.omegas(labels?, len))
    }
}

impl PlainFstripe {
    /// Ω [len, heads · dim, 2N] of `len` positions' labels [len · coordinates], as
    /// [`Fstripe::omegas`] computes them (labels missing or short read as zeros).
    fn omegas(&self, labels: &[f32], len: usize) -> PlainCodes {
        let (k, c) = (self.sines, self.coordinates);
        let j = 2 * k;
        let hd = self.gains.len() / k.max(1);
        let scale = 1.0 / (k as f32).sqrt();
        let two_pi = (2.0 * std::f64::consts::PI) as f32;
        let (mut oq, mut ok) = (vec![0f32; len * hd * j], vec![0f32; len * hd * j]);
        for t in 0..len {
            let s = labels.get(t * c..(t + 1) * c);
            for i in 0..hd * k {
                let dot: f32 = s.map_or(0.0, |s| {
                    self.freqs[i * c..(i + 1) * c]
                        .iter()
                        .zip(s)
                        .map(|(f, x)| f * x)
                        .sum()
                });
                let phase = dot * two_pi;
                let g = self.gains[i];
                let at = (t * hd + i / k) * j + 2 * (i % k);
                let (pq, pk) = (phase + self.theta_q[i], phase + self.theta_k[i]);
                // As the tensor form rounds: (cos · λ) · 1/sqrt(N).
                oq[at] = pq.cos() * g * scale;
                oq[at + 1] = pq.sin() * g * scale;
                ok[at] = pk.cos() * g * scale;
                ok[at + 1] = pk.sin() * g * scale;
            }
        }
        if self.factored {
            PlainCodes::Factored(oq, ok, j)
        } else {
            PlainCodes::Exact(oq, ok, j)
        }
    }
}
