//! Linear attention over a whole call on plain slices, for `Performer::forward` on the CPU: the
//! layers' matrices stay tensor products (a few large ops), while the positional codes, the
//! feature maps and the attention sums, which the tensor form spreads over dozens of small ops
//! a layer (and sineSPE's sines and cosines of every position, recomputed for each call), run
//! as loops over `Vec<f32>`, with the codes formed once per call for all layers. It is what
//! the harmonizer's whole-melody pass and a prompt's prefill do on the page's CPU backend.
//!
//! Taken only when a state carries the plain-slice decoder ([`State::stepping`]), for linear
//! attention without an attention map being watched, batch one, and every encoding but
//! convSPE (its codes come from a window of noise); everything
//! else, training included, runs the tensor form, which stays the reference (the tests
//! compare them).

use std::sync::Arc;

use burn::tensor::{Tensor, TensorData};

use super::plain::{Decoder, PlainDraw, axpy, features, qk_bar, qk_exact, sync};
use super::{LayerState, Performer, State};
use crate::model::attention::EPS;
use crate::model::config::AttentionKind;
use crate::model::pe::{PlainCodes, Span};

/// What every layer of one call reads on the plain path.
pub(super) struct Whole {
    decoder: Arc<Decoder>,
    draw: Arc<PlainDraw>,
    codes: CallCodes,
}

/// The codes of every position of a call, position-major.
enum CallCodes {
    None,
    /// `Qbar`, `Kbar` [len, heads, dim, R] (sineSPE, F-StrIPE with SFF).
    Bars(Vec<f32>, Vec<f32>),
    /// F-StrIPE's exact features Ω [len, heads, dim, J], and J.
    Exact(Vec<f32>, Vec<f32>, usize),
}

impl Performer {
    /// The plain path's codes for `span`, or `None` where the call takes the tensor form.
    pub(super) fn whole(&self, state: &mut State, batch: usize, span: &Span) -> Option<Whole> {
        let c = &self.config;
        let decoder = state.decoder.clone()?;
        if batch != 1 || state.capture || c.attention != AttentionKind::Linear {
            return None;
        }
        let draw = Arc::clone(state.plain_draw.get_or_insert_with(|| {
            Arc::new(PlainDraw {
                mix: state.draw.mix.clone().map(sync),
                eps: state.draw.eps.iter().cloned().map(sync).collect(),
                maps: state.maps.iter().map(|m| sync(m.w.clone())).collect(),
            })
        }));
        let r = c.pe.realizations;
        let codes = match &decoder.kernel {
            None => CallCodes::None,
            Some(kernel) => {
                let labels = span.labels.clone().map(sync);
                match kernel.call(span.start, span.len, labels.as_deref())? {
                    PlainCodes::Factored(q, k, j) => {
                        let mix = draw.mix.as_ref()?;
                        CallCodes::Bars(mix_bars(&q, mix, j, r), mix_bars(&k, mix, j, r))
                    }
                    PlainCodes::Bars(q, k) => CallCodes::Bars(q, k),
                    PlainCodes::Exact(q, k, j) => CallCodes::Exact(q, k, j),
                }
            }
        };
        Some(Whole {
            decoder,
            draw,
            codes,
        })
    }

    /// Layer `layer`'s attention for queries, keys and values [len, heads · d_head] of one
    /// call: the merged heads [len, heads · d_head], continuing (and leaving) the layer's sums
    /// in `state`. Bidirectional models absorb every key before any query reads; causal ones
    /// read after each key, as the recurrent step does.
    pub(super) fn attend_whole(
        &self,
        layer: usize,
        whole: &Whole,
        q: Tensor<3>,
        k: Tensor<3>,
        v: Tensor<3>,
        state: &mut State,
    ) -> Tensor<3> {
        let c = &self.config;
        let device = q.device();
        let [_, len, _] = q.dims();
        let (q, k, v) = (sync(q), sync(k), sync(v));
        let (heads, dh, m, r) = (c.heads, c.d_head, c.features, c.pe.realizations);
        let qk_dim = self.pe.qk_dim();
        let maps = &whole.draw.maps[layer];
        let directions = maps.len() / (heads * qk_dim);
        let gates = whole.decoder.gates.get(layer);
        let eps = whole.draw.eps.get(layer);
        let (mut s, mut z) = self.plain_layer(state, layer);
        let width = heads * dh;
        let mut merged = vec![0f32; len * width];
        let mut phi_q = vec![0f32; len * heads * m];
        let (mut hat, mut phi_k) = (vec![0f32; qk_dim], vec![0f32; m]);
        let scale = (dh as f32).powf(-0.25);
        let causal = c.is_causal();
        for t in 0..len {
            for head in 0..heads {
                let span = t * width + head * dh..t * width + (head + 1) * dh;
                let gate = gates.map(|(a, g)| {
                    let hs = head * dh..(head + 1) * dh;
                    (&a[hs.clone()], &g[hs])
                });
                let eps = eps.map(|e| &e[head * dh * r..(head + 1) * dh * r]);
                let w = &maps[head * qk_dim * directions..][..qk_dim * directions];
                let at = t * heads + head;
                let mut one = |x: &[f32], side: usize, out: &mut [f32]| {
                    match &whole.codes {
                        CallCodes::None => hat.iter_mut().zip(x).for_each(|(h, x)| *h = x * scale),
                        CallCodes::Bars(q, k) => {
                            let bar = if side == 0 { q } else { k };
                            qk_bar(
                                &bar[at * dh * r..(at + 1) * dh * r],
                                x,
                                r,
                                gate,
                                eps,
                                &mut hat,
                            );
                        }
                        CallCodes::Exact(q, k, j) => {
                            let omega = if side == 0 { q } else { k };
                            qk_exact(
                                &omega[at * dh * j..(at + 1) * dh * j],
                                x,
                                *j,
                                gate,
                                &mut hat,
                            );
                        }
                    }
                    features(c.feature_kind, w, &hat, side == 0, m, out);
                };
                let pq = &mut phi_q[at * m..(at + 1) * m];
                one(&q[span.clone()], 0, pq);
                one(&k[span.clone()], 1, &mut phi_k);
                let s = &mut s[head * m * dh..(head + 1) * m * dh];
                let z = &mut z[head * m..(head + 1) * m];
                for f in 0..m {
                    axpy(phi_k[f], &v[span.clone()], &mut s[f * dh..(f + 1) * dh]);
                    z[f] += phi_k[f];
                }
                if causal {
                    read_out(pq, s, z, &mut merged[span]);
                }
            }
        }
        if !causal {
            for t in 0..len {
                for head in 0..heads {
                    let span = t * width + head * dh..t * width + (head + 1) * dh;
                    read_out(
                        &phi_q[(t * heads + head) * m..(t * heads + head + 1) * m],
                        &s[head * m * dh..(head + 1) * m * dh],
                        &z[head * m..(head + 1) * m],
                        &mut merged[span],
                    );
                }
            }
        }
        state.layers[layer] = LayerState::Plain { s, z };
        Tensor::from_data(TensorData::new(merged, vec![1, len, width]), &device)
    }
}

/// `φ(q)ᵀS / (φ(q)ᵀz + ε)` of one head into `out` [d_head].
fn read_out(phi_q: &[f32], s: &[f32], z: &[f32], out: &mut [f32]) {
    let dh = out.len();
    out.fill(0.0);
    let mut den = 0.0;
    for (f, &p) in phi_q.iter().enumerate() {
        axpy(p, &s[f * dh..(f + 1) * dh], out);
        den += p * z[f];
    }
    let inv = 1.0 / (den + EPS as f32);
    out.iter_mut().for_each(|o| *o *= inv);
}

/// Codes [len, heads · dim, R] from Ω [len, heads · dim, J] through the mix `Z`
/// [heads · dim, J, R]: `Qbar_d = Ω_d Z_d`.
fn mix_bars(omega: &[f32], mix: &[f32], j: usize, r: usize) -> Vec<f32> {
    let hd = mix.len() / (j * r).max(1);
    let len = omega.len() / (hd * j).max(1);
    let mut out = vec![0f32; len * hd * r];
    for (i, (o, w)) in out
        .chunks_exact_mut(r)
        .zip(omega.chunks_exact(j))
        .enumerate()
    {
        let d = i % hd;
        for (&wj, zr) in w
            .iter()
            .zip(mix[d * j * r..(d + 1) * j * r].chunks_exact(r))
        {
            axpy(wj, zr, o);
        }
    }
    out
}
