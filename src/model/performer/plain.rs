//! The plain-slice decoder's pieces: a model's weights as plain numbers ([`Decoder`]), a
//! sequence's draws ([`PlainDraw`]), and the loops a step runs over them (matrix rows, layer
//! norm, GELU, the positional codes and feature maps of one query and key).

use std::sync::Arc;

use burn::nn::{LayerNorm, Linear};
use burn::tensor::Tensor;

use crate::model::attention::EPS;
use crate::model::features::FeatureKind;
use crate::model::pe::PlainKernel;

/// A linear layer: `x W + b`, `W` [d_in, d_out] as Burn stores it.
#[derive(Debug)]
pub(super) struct Dense {
    pub(super) w: Vec<f32>,
    pub(super) b: Vec<f32>,
}

impl Dense {
    pub(super) async fn read(l: &Linear) -> Result<Self, String> {
        let w = crate::model::read(l.weight.val()).await?;
        let b = match &l.bias {
            Some(b) => crate::model::read(b.val()).await?,
            None => vec![0.0; l.weight.dims()[1]],
        };
        Ok(Self { w, b })
    }

    pub(super) fn apply(&self, x: &[f32], out: &mut Vec<f32>) {
        out.clear();
        out.extend_from_slice(&self.b);
        // Row by row (`out += x_i W_i`): vectorises without reordering sums, and skips the
        // zeros of a piano roll's input.
        for (&xi, row) in x.iter().zip(self.w.chunks_exact(self.b.len())) {
            if xi != 0.0 {
                axpy(xi, row, out);
            }
        }
    }

    /// [`Self::apply`] for several inputs at once: each row of `W` is read from memory once
    /// and meets every input while it is in cache. Each output is summed in the same order as
    /// `apply` sums it (the bias, then the rows in order, a row skipped where its input is
    /// zero), so it is the same to the bit. (Summing tiles of columns in registers for groups
    /// of inputs was no faster natively and three times slower in the browser's wasm.)
    pub(super) fn apply_batch<X: AsRef<[f32]>>(&self, xs: &[X], outs: &mut [Vec<f32>]) {
        if let ([x], [out]) = (xs, &mut *outs) {
            return self.apply(x.as_ref(), out);
        }
        for out in outs.iter_mut() {
            out.clear();
            out.extend_from_slice(&self.b);
        }
        for (i, row) in self.w.chunks_exact(self.b.len()).enumerate() {
            for (x, out) in xs.iter().zip(outs.iter_mut()) {
                let xi = x.as_ref()[i];
                if xi != 0.0 {
                    axpy(xi, row, out);
                }
            }
        }
    }
}

#[derive(Debug)]
pub(super) struct Norm {
    pub(super) gamma: Vec<f32>,
    pub(super) beta: Vec<f32>,
}

impl Norm {
    pub(super) async fn read(n: &LayerNorm) -> Result<Self, String> {
        let gamma = crate::model::read(n.gamma.val()).await?;
        let beta = match &n.beta {
            Some(b) => crate::model::read(b.val()).await?,
            None => vec![0.0; gamma.len()],
        };
        Ok(Self { gamma, beta })
    }

    /// Layer norm with Burn's default epsilon (the model never sets another).
    pub(super) fn apply(&self, x: &[f32], out: &mut Vec<f32>) {
        let n = x.len() as f32;
        let mean = x.iter().sum::<f32>() / n;
        let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
        let inv = 1.0 / (var + 1e-5).sqrt();
        out.clear();
        out.extend(
            x.iter()
                .zip(self.gamma.iter().zip(&self.beta))
                .map(|(v, (g, b))| (v - mean) * inv * g + b),
        );
    }
}

#[derive(Debug)]
pub(super) struct Block {
    pub(super) norm1: Norm,
    pub(super) wq: Dense,
    pub(super) wk: Dense,
    pub(super) wv: Dense,
    pub(super) wo: Dense,
    pub(super) norm2: Norm,
    pub(super) ff1: Dense,
    pub(super) ff2: Dense,
}

/// A model's weights as plain numbers, for [`Performer::step`] on the CPU.
#[derive(Debug)]
pub struct Decoder {
    pub(super) embedding: Option<Vec<f32>>,
    pub(super) input: Option<Dense>,
    pub(super) blocks: Vec<Block>,
    pub(super) norm: Norm,
    pub(super) head: Dense,
    /// The positional encoding's plain form, if it has one.
    pub(super) kernel: Option<Arc<dyn PlainKernel>>,
    /// Per layer, `sqrt(1 − δ)` and `sqrt(δ)` [heads · dim] of the gate.
    pub(super) gates: Vec<(Vec<f32>, Vec<f32>)>,
}

/// A sequence's draws as plain numbers, read at its first plain step.
#[derive(Debug)]
pub(super) struct PlainDraw {
    /// Z [heads, dim · J, R] of sine and SFF codes.
    pub(super) mix: Option<Vec<f32>>,
    /// ε per layer [heads, dim, R].
    pub(super) eps: Vec<Vec<f32>>,
    /// Feature-map directions per layer [heads, qk_dim, directions].
    pub(super) maps: Vec<Vec<f32>>,
}

/// Where a step's codes leave queries and keys before the feature map.
pub(super) enum StepCodes {
    /// As they are (scaled).
    None,
    /// Codes `Qbar`, `Kbar` [heads, dim, R], mixed with ε where gated.
    Bars(Vec<f32>, Vec<f32>),
    /// F-StrIPE's exact features Ω [heads, dim, J] (and J), concatenated over dimensions.
    Exact(Vec<f32>, Vec<f32>, usize),
}

pub(super) fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y += a * x;
    }
}

pub(super) fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Eight running sums, so that the compiler can keep them in SIMD lanes.
    let mut acc = [0f32; 8];
    let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ac
        .remainder()
        .iter()
        .zip(bc.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ac.zip(bc) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

pub(super) fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + libm::erff(x * std::f32::consts::FRAC_1_SQRT_2))
}

pub(super) fn sync<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .expect("f32 values")
}

/// One head's query or key (`side` 0 or 1) through the codes, as `PositionalEncoding::qk`
/// computes it: the feature map's input, written to `out` [qk_dim].
#[allow(clippy::too_many_arguments)]
pub(super) fn qk_plain(
    codes: &StepCodes,
    x: &[f32],
    side: usize,
    head: usize,
    dim: usize,
    r: usize,
    gate: Option<(&[f32], &[f32])>,
    eps: Option<&[f32]>,
    out: &mut [f32],
) {
    match codes {
        StepCodes::None => {
            let s = (dim as f32).powf(-0.25);
            out.iter_mut().zip(x).for_each(|(o, x)| *o = x * s);
        }
        StepCodes::Bars(q, k) => {
            let bar = if side == 0 { q } else { k };
            qk_bar(
                &bar[head * dim * r..(head + 1) * dim * r],
                x,
                r,
                gate,
                eps,
                out,
            );
        }
        StepCodes::Exact(q, k, j) => {
            let omega = if side == 0 { q } else { k };
            qk_exact(
                &omega[head * dim * j..(head + 1) * dim * j],
                x,
                *j,
                gate,
                out,
            );
        }
    }
}

/// One head's query or key `x` [dim] through its codes `bar` [dim, R] (and, gated, through ε
/// [dim, R]): the feature map's input [R], scaled as `PositionalEncoding::qk` scales it.
pub(super) fn qk_bar(
    bar: &[f32],
    x: &[f32],
    r: usize,
    gate: Option<(&[f32], &[f32])>,
    eps: Option<&[f32]>,
    out: &mut [f32],
) {
    out.fill(0.0);
    for (i, (&xi, b)) in x.iter().zip(bar.chunks_exact(r)).enumerate() {
        axpy(xi * gate.map_or(1.0, |(a, _)| a[i]), b, out);
    }
    if let (Some((_, g)), Some(eps)) = (gate, eps) {
        for (i, (&xi, e)) in x.iter().zip(eps.chunks_exact(r)).enumerate() {
            axpy(xi * g[i], e, out);
        }
    }
    let (d, rr) = (x.len() as f32, r as f32);
    let s = (d * rr).powf(-0.25) * rr.powf(-0.25);
    out.iter_mut().for_each(|o| *o *= s);
}

/// One head's query or key `x` [dim] through F-StrIPE's exact features `omega` [dim, J]: the
/// feature map's input [dim · J (+ dim, gated)], as `PositionalEncoding::qk` forms it.
pub(super) fn qk_exact(
    omega: &[f32],
    x: &[f32],
    j: usize,
    gate: Option<(&[f32], &[f32])>,
    out: &mut [f32],
) {
    let dim = x.len();
    let s = (dim as f32).powf(-0.25);
    for (i, &xi) in x.iter().enumerate() {
        let a = gate.map_or(1.0, |(a, _)| a[i]);
        for jj in 0..j {
            out[i * j + jj] = xi * a * omega[i * j + jj] * s;
        }
    }
    if let Some((_, g)) = gate {
        for (i, &xi) in x.iter().enumerate() {
            out[dim * j + i] = xi * g[i] * s;
        }
    }
}

/// The feature map of one head's `x` [qk_dim] with its directions `w` [qk_dim, directions],
/// as `FeatureMap::apply` computes it, into `out` [features].
pub(super) fn features(
    kind: FeatureKind,
    w: &[f32],
    x: &[f32],
    is_query: bool,
    m: usize,
    out: &mut [f32],
) {
    let directions = w.len() / x.len().max(1);
    let proj = &mut out[..directions];
    proj.fill(0.0);
    for (&xi, row) in x.iter().zip(w.chunks_exact(directions)) {
        axpy(xi, row, proj);
    }
    let scale = 1.0 / (m as f32).sqrt();
    match kind {
        FeatureKind::Relu => out.iter_mut().for_each(|o| *o = o.max(0.0) * scale),
        FeatureKind::Favor => {
            let half_norm = 0.5 * x.iter().map(|v| v * v).sum::<f32>();
            let (pos, neg) = out.split_at_mut(directions);
            for (n, p) in neg.iter_mut().zip(pos.iter_mut()) {
                *n = -*p - half_norm;
                *p -= half_norm;
            }
            let shift = if is_query {
                out.iter().copied().fold(f32::NEG_INFINITY, f32::max)
            } else {
                0.0
            };
            out.iter_mut().for_each(|o| *o = (*o - shift).exp() * scale);
        }
    }
}

/// Appends this step's key to a head's captured keys [n · m] and writes the query's
/// normalised attention over every key so far to `row` (as `attention_rows` does).
pub(crate) fn captured_row(keys: &mut Vec<f32>, phi_k: &[f32], phi_q: &[f32], row: &mut Vec<f32>) {
    keys.extend_from_slice(phi_k);
    let start = row.len();
    row.extend(keys.chunks_exact(phi_k.len()).map(|key| dot(phi_q, key)));
    let total: f32 = row[start..].iter().sum::<f32>() + EPS as f32;
    row[start..].iter_mut().for_each(|v| *v /= total);
}
