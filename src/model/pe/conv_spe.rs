//! convSPE (SPE paper, eq. 22 and appendix A.1): per head and key dimension d, codes are one
//! white-noise draw filtered by a learned query filter and a learned key filter,
//! `Qbar_d[m] = Σ_p A_d[p] z_d[m + p]`, `Kbar_d[n] = Σ_p B_d[p] z_d[n + p]` (depthwise, `P`
//! taps), so `P_d(m − n) = Σ_p A_d[p] B_d[p + m − n]`: the filters' cross-correlation, zero
//! beyond the filter length. Filters start uniform in [0, 1) / sqrt(P/2), as in the reference.
//!
//! The noise is indexed by absolute position: the code of position m needs noise m .. m+P−1,
//! so a decoder computes any position's code from the same seeded noise the parallel form used.

use std::sync::Arc;

use burn::module::{Module, Param};
use burn::tensor::module::conv1d;
use burn::tensor::ops::ConvOptions;
use burn::tensor::{Device, Tensor, TensorData};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::{Codes, Draw, PeConfig, PlainCodes, PlainKernel, Relative, Span};
use crate::model::ModelError;
use crate::model::features::normal;

/// Windows at least this long are filtered through FFTs natively (see [`ConvSpe::correlate`]).
#[cfg(not(target_arch = "wasm32"))]
pub const FFT_FROM_LEN: usize = 16;

/// Noise columns of consecutive positions `first ..`, kept between decoding steps.
#[derive(Clone, Debug, Default)]
pub struct NoiseColumns {
    seed: u64,
    first: usize,
    columns: std::collections::VecDeque<Vec<f32>>,
}

impl NoiseColumns {
    /// Makes the cache hold the columns of positions `start .. start + width`, drawing only
    /// those it does not have.
    fn cover(
        &mut self,
        channels: usize,
        realizations: usize,
        seed: u64,
        start: usize,
        width: usize,
    ) {
        if self.seed != seed || start < self.first || start > self.first + self.columns.len() {
            *self = NoiseColumns {
                seed,
                first: start,
                columns: Default::default(),
            };
        }
        while self.first < start {
            self.columns.pop_front();
            self.first += 1;
        }
        while self.columns.len() < width {
            let position = self.first + self.columns.len();
            self.columns
                .push_back(column(channels, realizations, seed, position));
        }
    }
}

/// The noise column of one absolute position: [realizations · channels], from its own seed.
fn column(channels: usize, realizations: usize, seed: u64, position: usize) -> Vec<f32> {
    let mut rng =
        StdRng::seed_from_u64(seed ^ (position as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    (0..realizations * channels)
        .map(|_| normal(&mut rng) as f32)
        .collect()
}

/// Both filters as plain numbers, tap-major ([taps][heads · dim]), read once per generation
/// so that decoding computes each position's codes on the CPU ([`ConvSpe::step_codes`]).
#[derive(Clone, Debug, PartialEq)]
pub struct StepFilters {
    q: Vec<f32>,
    k: Vec<f32>,
    channels: usize,
    taps: usize,
}

impl StepFilters {
    /// The codes of `position` from the noise columns in `cache`: [heads, dim, R] each.
    pub fn values(
        &self,
        realizations: usize,
        seed: u64,
        position: usize,
        cache: &mut NoiseColumns,
    ) -> (Vec<f32>, Vec<f32>) {
        let (channels, taps) = (self.channels, self.taps);
        cache.cover(channels, realizations, seed, position, taps);
        let mut q = vec![0f32; realizations * channels];
        let mut k = vec![0f32; realizations * channels];
        for (p, column) in cache.columns.iter().take(taps).enumerate() {
            let fq = &self.q[p * channels..(p + 1) * channels];
            let fk = &self.k[p * channels..(p + 1) * channels];
            for ((z, oq), ok) in column
                .chunks_exact(channels)
                .zip(q.chunks_exact_mut(channels))
                .zip(k.chunks_exact_mut(channels))
            {
                for ((((oq, ok), z), fq), fk) in oq.iter_mut().zip(ok).zip(z).zip(fq).zip(fk) {
                    *oq += fq * z;
                    *ok += fk * z;
                }
            }
        }
        // [R, heads · dim] → [heads, dim, R], as `codes` lays them out.
        let lay = |v: Vec<f32>| {
            let mut out = vec![0f32; v.len()];
            for (r, row) in v.chunks_exact(channels).enumerate() {
                for (c, x) in row.iter().enumerate() {
                    out[c * realizations + r] = *x;
                }
            }
            out
        };
        (lay(q), lay(k))
    }

    /// From the filters' values as stored, [heads · dim, 1, taps] each.
    pub fn new(q: &[f32], k: &[f32], channels: usize, taps: usize) -> Self {
        let tap_major = |f: &[f32]| {
            assert_eq!(f.len(), channels * taps, "convSPE filter size");
            let mut out = vec![0f32; f.len()];
            for c in 0..channels {
                for p in 0..taps {
                    out[p * channels + c] = f[c * taps + p];
                }
            }
            out
        };
        Self {
            q: tap_major(q),
            k: tap_major(k),
            channels,
            taps,
        }
    }
}

#[derive(Module, Debug)]
pub struct ConvSpe {
    /// Query filters [heads · dim, 1, taps].
    pub filter_q: Param<Tensor<3>>,
    /// Key filters [heads · dim, 1, taps].
    pub filter_k: Param<Tensor<3>>,
    #[module(skip)]
    pub heads: usize,
    #[module(skip)]
    pub dim: usize,
}

impl ConvSpe {
    pub fn new(heads: usize, dim: usize, taps: usize, rng: &mut StdRng, device: &Device) -> Self {
        let n = heads * dim * taps;
        let scale = 1.0 / (taps as f32 / 2.0).sqrt();
        let mut filter = || {
            let v: Vec<f32> = (0..n).map(|_| rng.random::<f32>() * scale).collect();
            Param::from_data(TensorData::new(v, vec![heads * dim, 1, taps]), device)
        };
        Self {
            filter_q: filter(),
            filter_k: filter(),
            heads,
            dim,
        }
    }

    pub fn taps(&self) -> usize {
        self.filter_q.dims()[2]
    }

    /// White noise for positions `start .. start + len + taps − 1`, [realizations, heads · dim,
    /// len + taps − 1]: each position's column from its own seed, so any window of positions
    /// gets the same numbers. `cache` keeps the columns of the last window: a decoder moving
    /// one position a step draws one new column, not `taps`.
    pub fn noise(
        &self,
        realizations: usize,
        seed: u64,
        start: usize,
        len: usize,
        cache: &mut NoiseColumns,
        device: &Device,
    ) -> Tensor<3> {
        let channels = self.heads * self.dim;
        let width = len + self.taps() - 1;
        cache.cover(channels, realizations, seed, start, width);
        let mut values = vec![0f32; realizations * channels * width];
        for (t, col) in cache.columns.iter().take(width).enumerate() {
            for (rc, v) in col.iter().enumerate() {
                values[rc * width + t] = *v;
            }
        }
        Tensor::from_data(
            TensorData::new(values, vec![realizations, channels, width]),
            device,
        )
    }

    /// The codes of the one position `position`, computed on the CPU from `filters` (read
    /// once per generation) and the noise columns in `cache`: (Qbar, Kbar), each [heads, 1,
    /// dim, realizations], equal to [`Self::codes`] of that position.
    ///
    /// A decoder pays `2 · taps · realizations · heads · dim` multiply-adds a token (4 M for
    /// the shipped model), where the convolution over a fresh [R, heads · dim, taps] noise
    /// tensor cost 29 ms natively.
    pub fn step_codes(
        &self,
        filters: &StepFilters,
        realizations: usize,
        seed: u64,
        position: usize,
        cache: &mut NoiseColumns,
        device: &Device,
    ) -> (Tensor<4>, Tensor<4>) {
        let (q, k) = self.step_values(filters, realizations, seed, position, cache);
        let shape = vec![self.heads, 1, self.dim, realizations];
        let t = |v: Vec<f32>| Tensor::from_data(TensorData::new(v, shape.clone()), device);
        (t(q), t(k))
    }

    /// The values of [`Self::step_codes`], [heads, dim, R] each.
    pub fn step_values(
        &self,
        filters: &StepFilters,
        realizations: usize,
        seed: u64,
        position: usize,
        cache: &mut NoiseColumns,
    ) -> (Vec<f32>, Vec<f32>) {
        assert_eq!(
            (filters.channels, filters.taps),
            (self.heads * self.dim, self.taps()),
            "convSPE step filters of another model"
        );
        filters.values(realizations, seed, position, cache)
    }

    /// [`Self::noise`] without a cache.
    pub fn seeded_noise(
        &self,
        realizations: usize,
        seed: u64,
        start: usize,
        len: usize,
        device: &Device,
    ) -> Tensor<3> {
        self.noise(
            realizations,
            seed,
            start,
            len,
            &mut NoiseColumns::default(),
            device,
        )
    }

    /// Codes from `noise` [realizations, heads · dim, len + taps − 1]: (Qbar, Kbar), each
    /// [heads, len, dim, realizations] (unscaled: `Qbar Kbar^T / R → P`).
    pub fn codes(&self, noise: Tensor<3>) -> (Tensor<4>, Tensor<4>) {
        let [r, _, width] = noise.dims();
        let len = width + 1 - self.taps();
        let split = |out: Tensor<3>| {
            out.reshape([r, self.heads, self.dim, len])
                .permute([1, 3, 2, 0])
        };
        let (q, k) = self.correlate(noise, len);
        (split(q), split(k))
    }

    /// Both filters run over `noise`: [R, heads · dim, len] each.
    ///
    /// Natively, long windows go through FFTs: Burn's depthwise convolution computes the
    /// filter gradient group by group through im2col, which made training with 512 taps
    /// eleven times slower than sineSPE (4.8 s a step on 4 × 512 tokens). The product of
    /// spectra is the same cross-correlation (no wrap-around: the FFT length is at least
    /// `len + taps − 1`). The page keeps the direct form (no FFT kernels in the bundle), and
    /// so does decoding, one position at a time.
    fn correlate(&self, noise: Tensor<3>, len: usize) -> (Tensor<3>, Tensor<3>) {
        #[cfg(not(target_arch = "wasm32"))]
        if len >= FFT_FROM_LEN {
            return self.correlate_fft(noise, len);
        }
        #[cfg(target_arch = "wasm32")]
        let _ = len; // the page filters directly
        self.correlate_direct(noise)
    }

    /// [`Self::correlate`] as Burn's depthwise convolution.
    pub(crate) fn correlate_direct(&self, noise: Tensor<3>) -> (Tensor<3>, Tensor<3>) {
        let channels = noise.dims()[1];
        let direct = |f: &Param<Tensor<3>>| {
            conv1d(
                noise.clone(),
                f.val(),
                None,
                ConvOptions::new([1], [0], [1], channels),
            )
        };
        (direct(&self.filter_q), direct(&self.filter_k))
    }

    /// [`Self::correlate`] through spectra: `irfft(Z · conj(F))`, cut to `len`.
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) fn correlate_fft(&self, noise: Tensor<3>, len: usize) -> (Tensor<3>, Tensor<3>) {
        use burn::signal::{irfft, rfft};
        let n = noise.dims()[2].next_power_of_two();
        let (zr, zi) = rfft(noise, 2, Some(n)); // [R, heads·dim, n/2 + 1]
        let correlate = |f: &Param<Tensor<3>>| {
            let (fr, fi) = rfft(f.val().swap_dims(0, 1), 2, Some(n)); // [1, heads·dim, n/2 + 1]
            let re = zr.clone() * fr.clone() + zi.clone() * fi.clone();
            let im = zi.clone() * fr - zr.clone() * fi;
            irfft(re, im, 2, Some(n)).narrow(2, 0, len)
        };
        (correlate(&self.filter_q), correlate(&self.filter_k))
    }

    /// The analytic kernel `P_d(τ) = Σ_p A_d[p] B_d[p + τ]` at lags `τ ≥ 0`: [heads, dim, lags].
    pub fn kernel(&self, lags: &[usize]) -> Tensor<3> {
        let taps = self.taps();
        let a = self.filter_q.val().reshape([self.heads, self.dim, taps]);
        let b = self.filter_k.val().reshape([self.heads, self.dim, taps]);
        let columns: Vec<Tensor<3>> = lags
            .iter()
            .map(|&tau| {
                if tau >= taps {
                    Tensor::zeros([self.heads, self.dim, 1], &a.device())
                } else {
                    let n = taps - tau;
                    (a.clone().narrow(2, 0, n) * b.clone().narrow(2, tau, n)).sum_dim(2)
                }
            })
            .collect();
        Tensor::cat(columns, 2)
    }
}

impl Relative for ConvSpe {
    fn new(config: &PeConfig, heads: usize, dim: usize, rng: &mut StdRng, device: &Device) -> Self {
        ConvSpe::new(heads, dim, config.taps, rng, device)
    }

    fn check(config: &PeConfig) -> Result<(), String> {
        if config.taps == 0 {
            return Err("convSPE needs filters of at least one tap".into());
        }
        Ok(())
    }

    /// One position with the plain form at hand (a decoder's step) takes its codes from the
    /// cached noise on the CPU; a window is filtered.
    fn codes(
        &self,
        config: &PeConfig,
        span: &Span,
        draw: &mut Draw,
        device: &Device,
    ) -> Result<Codes, ModelError> {
        let r = config.realizations;
        if span.len == 1
            && let Some(plain) = draw.plain.clone()
            && let PlainCodes::Bars(q, k) = plain.step(span.start, None, draw)
        {
            let shape = vec![self.heads, 1, self.dim, r];
            let t = |v: Vec<f32>| Tensor::from_data(TensorData::new(v, shape.clone()), device);
            return Ok(Codes::Explicit {
                qbar: t(q),
                kbar: t(k),
            });
        }
        let noise = self.noise(
            r,
            draw.seed,
            span.start,
            span.len,
            &mut draw.conv_noise,
            device,
        );
        let (qbar, kbar) = self.codes(noise);
        Ok(Codes::Explicit { qbar, kbar })
    }

    fn templates(&self, lags: &[usize]) -> Option<Tensor<3>> {
        Some(self.kernel(lags))
    }

    fn plain_tensors(&self) -> Vec<Tensor<1>> {
        vec![
            self.filter_q.val().flatten(0, 2),
            self.filter_k.val().flatten(0, 2),
        ]
    }

    fn plain(
        &self,
        config: &PeConfig,
        values: Vec<Vec<f32>>,
    ) -> Result<Arc<dyn PlainKernel>, String> {
        let [q, k]: [Vec<f32>; 2] = values
            .try_into()
            .map_err(|_| "convSPE reads two filters".to_string())?;
        let channels = self.heads * self.dim;
        if q.len() != channels * self.taps() || k.len() != q.len() {
            return Err("convSPE filters of another size".into());
        }
        Ok(Arc::new(PlainConv {
            filters: StepFilters::new(&q, &k, channels, self.taps()),
            realizations: config.realizations,
        }))
    }

    fn plain_steps(&self) -> bool {
        true
    }
}

/// convSPE's plain form: the filters, and R.
#[derive(Debug)]
pub struct PlainConv {
    filters: StepFilters,
    realizations: usize,
}

impl PlainKernel for PlainConv {
    fn step(&self, position: usize, _labels: Option<&[f32]>, draw: &mut Draw) -> PlainCodes {
        let (q, k) =
            self.filters
                .values(self.realizations, draw.seed, position, &mut draw.conv_noise);
        PlainCodes::Bars(q, k)
    }
}
