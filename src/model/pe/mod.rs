//! Positional encodings, one file each, listed in one table (`family!` below; how to add
//! one: `family.rs`):
//!
//! | kind | where it acts | file |
//! |---|---|---|
//! | `none` (NoPE) | nowhere | |
//! | `ape` | sinusoids added to the embeddings | `ape.rs` |
//! | `cape` | the same, positions augmented while training | `ape.rs` |
//! | `sine_spe` | queries and keys, through codes (SPE eqs. 16–21) | `sine_spe.rs` |
//! | `conv_spe` | the same, filtered-noise codes (eq. 22) | `conv_spe.rs` |
//! | `fstripe`, `fstripe_sff` | the same, over structure labels (F-StrIPE eqs. 6, 9, 4) | `fstripe.rs` |
//!
//! SPE variants turn each head's projected query `q_m` (dimension D) into
//! `qhat_m = Σ_d q_md Qbar_d[m] / (DR)^{1/4}` (dimension R) and likewise for keys, optionally
//! gated (eqs. 23–25: `Qbar ← sqrt(1−δ) Qbar + sqrt(δ) ε`, one gate per layer, head and
//! dimension, `ε` shared by queries, keys and positions). One code draw serves every layer.
//! The outputs are scaled so that `exp(qhat·khat)` is the attention weight the feature map
//! estimates (for SPE: the reference's extra `R^{-1/4}` temperature is folded in).
//!
//! Codes are never materialised as [len, D, R] where it can be avoided: sine and SFF codes are
//! `Ω(m) Z`, so `qhat = ((q ⊙ Ω) reshaped to D·2K) Z`, a matmul of memory O(L·D·K).

#[macro_use]
mod family;
pub mod ape;
pub mod conv_spe;
pub mod fstripe;
pub mod levels;
pub mod sine_spe;

use std::sync::Arc;

use burn::module::{Module, Param};
use burn::tensor::activation::sigmoid;
use burn::tensor::{Device, Tensor, TensorData};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};

use crate::model::ModelError;
use crate::model::features::normal;
use ape::CapeAugment;
pub use family::{PlainCodes, PlainKernel, Relative};
pub use levels::StructureLevel;

family! {
    /// NoPE: no positional encoding.
    None = "none";
    Ape = "ape";
    /// APE with positions augmented while training.
    Cape = "cape";
    SineSpe = "sine_spe" => sine_spe::SineSpe;
    ConvSpe = "conv_spe" => conv_spe::ConvSpe;
    Fstripe = "fstripe" => fstripe::Fstripe;
    /// F-StrIPE's features through SPE's shared Gaussian (SFF): the same kernel, other codes.
    FstripeSff = "fstripe_sff" => fstripe::Fstripe;
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeConfig {
    pub kind: PeKind,
    /// R, realizations of the SPE codes (sine, conv, SFF).
    pub realizations: usize,
    /// K (N_f), sinusoids per dimension (sine, F-StrIPE).
    pub sines: usize,
    /// P, convSPE filter length.
    pub taps: usize,
    /// Gating (eqs. 23–25), per layer.
    pub gated: bool,
    /// F-StrIPE's structure levels.
    pub levels: Vec<StructureLevel>,
    pub cape: CapeAugment,
}

impl PeConfig {
    /// `kind` with the papers' sizes: R = 64, K = 5, P = 128, ungated, all structure levels.
    pub fn new(kind: PeKind) -> Self {
        Self {
            kind,
            realizations: 64,
            sines: 5,
            taps: 128,
            gated: false,
            levels: StructureLevel::ALL.to_vec(),
            cape: CapeAugment::default(),
        }
    }

    pub fn with_gate(mut self, gated: bool) -> Self {
        self.gated = gated;
        self
    }

    pub fn with_levels(mut self, levels: &[StructureLevel]) -> Self {
        self.levels = levels.to_vec();
        self
    }

    /// Coordinates of the structure labels F-StrIPE reads per step.
    pub fn coordinates(&self) -> usize {
        self.levels.iter().map(|l| l.dims()).sum()
    }

    pub fn is_structural(&self) -> bool {
        Kernel::reads_labels(self.kind)
    }

    /// The structure levels the model reads: F-StrIPE's, none for the other encodings.
    pub fn structure_levels(&self) -> &[StructureLevel] {
        if self.is_structural() {
            &self.levels
        } else {
            &[]
        }
    }

    /// Whether the encoding acts on queries and keys (the SPE family).
    pub fn acts_on_attention(&self) -> bool {
        Kernel::variant(self.kind).is_some()
    }
}

/// Interleaved `[cos φ_k, sin φ_k]` times the gains: phases and gains [.., K] → [.., 2K].
pub(crate) fn omega_features(phase: Tensor<5>, gains: Tensor<5>) -> Tensor<5> {
    let [b, h, l, d, k] = phase.dims();
    let cos = phase.clone().cos() * gains.clone();
    let sin = phase.sin() * gains;
    Tensor::stack::<6>(vec![cos, sin], 5).reshape([b, h, l, d, 2 * k])
}

/// The gated and the ungated part of queries or keys: `(x·sqrt(1 − δ), (x·sqrt(δ), ε))`, or `x`
/// alone without a gate.
type Gate = ((Tensor<4>, Tensor<4>), Tensor<4>);
fn split_by_gate(x: Tensor<4>, gate: Option<&Gate>) -> (Tensor<4>, Option<(Tensor<4>, Tensor<4>)>) {
    match gate {
        Some(((a, g), eps)) => (x.clone() * a.clone(), Some((x * g.clone(), eps.clone()))),
        None => (x, None),
    }
}

/// Initial raw gains for `n` (head, dim) rows of `sines` values: N(0, 1), then
/// `g ← 2 g / sqrt(|g|)` with the norm over the sines (the reference SPE code's init).
pub(crate) fn init_gains(rows: usize, sines: usize, rng: &mut StdRng) -> Vec<f32> {
    let mut gains: Vec<f32> = (0..rows * sines).map(|_| normal(rng) as f32).collect();
    for g in gains.chunks_mut(sines.max(1)) {
        let norm = g.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
        g.iter_mut().for_each(|x| *x *= 2.0 / norm.sqrt());
    }
    gains
}

/// Standard normal values from `seed`, generated on the host (reproducible on every backend).
pub(crate) fn seeded<const D: usize>(shape: &[usize], seed: u64, device: &Device) -> Tensor<D> {
    let mut rng = StdRng::seed_from_u64(seed);
    let n = shape.iter().product();
    let values: Vec<f32> = (0..n).map(|_| normal(&mut rng) as f32).collect();
    Tensor::from_data(TensorData::new(values, shape.to_vec()), device)
}

/// Where a stretch of a sequence is: its first position, its length and, for F-StrIPE, the
/// structure coordinates of its steps [batch, len, coordinates].
#[derive(Clone, Debug)]
pub struct Span {
    pub start: usize,
    pub len: usize,
    pub labels: Option<Tensor<3>>,
}

impl Span {
    pub fn positions(start: usize, len: usize) -> Self {
        Self {
            start,
            len,
            labels: None,
        }
    }
}

/// The randomness of one sequence (a training step, or a whole generation session): the SPE
/// mixing draw and, per layer, the gating noise. Drawn once, so every layer and every
/// position, in the parallel or the recurrent form, sees the same numbers.
#[derive(Clone, Debug)]
pub struct Draw {
    pub seed: u64,
    /// Z for sine and SFF codes: [heads, dim · 2K, R].
    pub mix: Option<Tensor<3>>,
    /// ε per layer: [heads, dim, R].
    pub eps: Vec<Tensor<3>>,
    /// convSPE's noise columns of the current window.
    pub conv_noise: conv_spe::NoiseColumns,
    /// The encoding's plain form, when read for decoding one position a step
    /// (`Performer::stepping`).
    pub plain: Option<Arc<dyn PlainKernel>>,
}

/// Codes for a span, shared by all layers.
#[derive(Clone, Debug)]
pub enum Codes {
    /// No codes: queries and keys go to the feature map as they are.
    None,
    /// `Qbar_d[m] = Ω_q[m, d] Z_d` (sine, SFF): Ω [batch or 1, heads, len, dim, J].
    Factored {
        omega_q: Tensor<5>,
        omega_k: Tensor<5>,
        /// The sequence's `Z` [heads, dim · J, R].
        mix: Box<Tensor<3>>,
    },
    /// Explicit codes [heads, len, dim, R] (conv).
    Explicit { qbar: Tensor<4>, kbar: Tensor<4> },
    /// Noise-free features concatenated over d (F-StrIPE RFF): [batch, heads, len, dim, J].
    Exact {
        omega_q: Tensor<5>,
        omega_k: Tensor<5>,
    },
}

#[derive(Module, Debug)]
pub struct PositionalEncoding {
    /// The encoding's learnt part (relative encodings only).
    pub kernel: Option<Kernel>,
    /// Per-layer gates [heads, dim]: `δ = sigmoid(gate)`.
    pub gates: Vec<Param<Tensor<2>>>,
    #[module(skip)]
    pub config: PeConfig,
    #[module(skip)]
    pub heads: usize,
    #[module(skip)]
    pub dim: usize,
}

impl PositionalEncoding {
    pub fn new(
        config: &PeConfig,
        layers: usize,
        heads: usize,
        dim: usize,
        rng: &mut StdRng,
        device: &Device,
    ) -> Self {
        let kernel = Kernel::new(config, heads, dim, rng, device);
        let gates = if config.gated && config.acts_on_attention() {
            (0..layers)
                .map(|_| {
                    let v: Vec<f32> = (0..heads * dim).map(|_| normal(rng) as f32).collect();
                    Param::from_data(TensorData::new(v, vec![heads, dim]), device)
                })
                .collect()
        } else {
            Vec::new()
        };
        Self {
            kernel,
            gates,
            config: config.clone(),
            heads,
            dim,
        }
    }

    pub fn kind(&self) -> PeKind {
        self.config.kind
    }

    /// The relative encoding, if this is one.
    pub fn relative(&self) -> Option<&dyn Relative> {
        self.kernel.as_ref().map(Kernel::relative)
    }

    /// Dimension of what [`Self::qk`] returns, the feature map's input.
    pub fn qk_dim(&self) -> usize {
        self.relative()
            .map_or(self.dim, |k| k.qk_dim(&self.config, self.dim))
    }

    /// A fresh draw of the sequence's noise from `seed`.
    pub fn draw(&self, seed: u64, device: &Device) -> Draw {
        let r = self.config.realizations;
        let mix = self
            .relative()
            .and_then(|k| k.mix(&self.config, seed, device));
        let eps = (0..self.gates.len())
            .map(|layer| {
                seeded(
                    &[self.heads, self.dim, r],
                    seed ^ (0xa5a5_0000 + layer as u64),
                    device,
                )
            })
            .collect();
        Draw {
            seed,
            mix,
            eps,
            conv_noise: Default::default(),
            plain: None,
        }
    }

    /// The codes of `span`, from `draw`.
    pub fn codes(
        &self,
        span: &Span,
        draw: &mut Draw,
        device: &Device,
    ) -> Result<Codes, ModelError> {
        match self.relative() {
            Some(k) => k.codes(&self.config, span, draw, device),
            None => Ok(Codes::None),
        }
    }

    /// The plain form of the encoding (read once per generation), `None` without one.
    pub async fn plain(&self) -> Result<Option<Arc<dyn PlainKernel>>, ModelError> {
        let Some(k) = self.relative() else {
            return Ok(None);
        };
        let failed =
            |e: String| ModelError::Weights(format!("the positional encoding's weights: {e}"));
        let mut values = Vec::new();
        for t in k.plain_tensors() {
            values.push(crate::model::read(t).await.map_err(failed)?);
        }
        k.plain(&self.config, values).map(Some).map_err(failed)
    }

    /// `sqrt(1 − δ)` and `sqrt(δ)` of `layer`'s gate, [1, heads, 1, dim].
    pub(crate) fn gate(&self, layer: usize) -> Option<(Tensor<4>, Tensor<4>)> {
        let g = self.gates.get(layer)?;
        let delta = sigmoid(g.val()).reshape([1, self.heads, 1, self.dim]);
        Some((delta.clone().neg().add_scalar(1.0).sqrt(), delta.sqrt()))
    }

    /// Queries and keys [batch, heads, len, dim] of `layer`, through the codes: the feature
    /// map's inputs, scaled so that `exp(qhat·khat)` is the target attention weight.
    pub fn qk(
        &self,
        layer: usize,
        q: Tensor<4>,
        k: Tensor<4>,
        codes: &Codes,
        draw: &Draw,
    ) -> (Tensor<4>, Tensor<4>) {
        let d = self.dim as f64;
        let r = self.config.realizations as f64;
        // The gate's two factors and ε of this layer, [1, heads, dim, R] (drawn when gated).
        let eps = draw.eps.get(layer).map(|e| e.clone().unsqueeze_dim::<4>(0));
        let gate = self.gate(layer).zip(eps);
        match codes {
            Codes::None => {
                let s = d.powf(-0.25);
                (q.mul_scalar(s), k.mul_scalar(s))
            }
            Codes::Factored {
                omega_q,
                omega_k,
                mix,
            } => {
                let mix = (**mix).clone().unsqueeze_dim::<4>(0);
                let one = |x: Tensor<4>, omega: &Tensor<5>| {
                    let [b, h, l, dd] = x.dims();
                    let j = omega.dims()[4];
                    let (x1, x2) = split_by_gate(x, gate.as_ref());
                    let u = (x1.unsqueeze_dim::<5>(4) * omega.clone()).reshape([b, h, l, dd * j]);
                    let mut hat = u.matmul(mix.clone());
                    if let Some((x2, eps)) = x2 {
                        hat = hat + x2.matmul(eps);
                    }
                    // (DR)^{-1/4} from eqs. 16–17, R^{-1/4} the feature map's temperature.
                    hat.mul_scalar((d * r).powf(-0.25) * r.powf(-0.25))
                };
                (one(q, omega_q), one(k, omega_k))
            }
            Codes::Explicit { qbar, kbar } => {
                let one = |x: Tensor<4>, bar: &Tensor<4>| {
                    let [b, h, l, dd] = x.dims();
                    let rr = bar.dims()[3];
                    let (x1, x2) = split_by_gate(x, gate.as_ref());
                    // Per (head, position): [batch, D] @ [D, R].
                    let xs = x1.permute([1, 2, 0, 3]).reshape([h * l, b, dd]);
                    let bars = bar.clone().reshape([h * l, dd, rr]);
                    let mut hat = xs.matmul(bars).reshape([h, l, b, rr]).permute([2, 0, 1, 3]);
                    if let Some((x2, eps)) = x2 {
                        hat = hat + x2.matmul(eps);
                    }
                    hat.mul_scalar((d * r).powf(-0.25) * r.powf(-0.25))
                };
                (one(q, qbar), one(k, kbar))
            }
            Codes::Exact { omega_q, omega_k } => {
                let one = |x: Tensor<4>, omega: &Tensor<5>| {
                    let [b, h, l, dd] = x.dims();
                    let j = omega.dims()[4];
                    let (x1, x2) = split_by_gate(x, gate.as_ref());
                    let u = (x1.unsqueeze_dim::<5>(4) * omega.clone()).reshape([b, h, l, dd * j]);
                    let hat = match x2 {
                        Some((x2, _)) => Tensor::cat(vec![u, x2], 3),
                        None => u,
                    };
                    hat.mul_scalar(d.powf(-0.25))
                };
                (one(q, omega_q), one(k, omega_k))
            }
        }
    }

    /// The positional templates `P_d(τ)` of `layer` at lags `τ ≥ 0`, [heads, dim, lags],
    /// gate included (`(1 − δ) P + δ`), for encodings whose kernel is a function of the lag
    /// (sineSPE, convSPE); `None` for the others.
    pub fn templates(&self, layer: usize, lags: &[usize]) -> Option<Tensor<3>> {
        let p = self.relative()?.templates(lags)?;
        Some(match self.gates.get(layer) {
            Some(g) => {
                let delta = sigmoid(g.val()).reshape([self.heads, self.dim, 1]);
                p * delta.clone().neg().add_scalar(1.0) + delta
            }
            None => p,
        })
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;
