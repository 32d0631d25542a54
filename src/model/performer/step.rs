//! Decoding one position at a time on the CPU over plain slices: what generation does after
//! its prompt, a token or a sixteenth at a time. It is `Performer::forward` with a length of
//! one in linear attention, but each matrix is one pass over a `Vec<f32>` instead of a tensor
//! op (a dozen small ops per layer cost more than their arithmetic, above all in wasm), and
//! each layer's state update `S += φ(k) vᵀ, z += φ(k)` and read-out `φ(q)ᵀS / φ(q)ᵀz` is one
//! pass per head. The weights are read once per generation ([`Performer::stepping`]); the
//! tensor form stays the reference (the tests compare them) and runs everything else:
//! training, prefill, WebGPU, softmax attention.
//!
//! The recurrent state moves between the two forms in [`State`]: the first plain step reads
//! the tensors a prefill left, and a later tensor call takes the plain state back.

use std::sync::Arc;

use burn::tensor::{Device, Tensor, TensorData};

use super::plain::{
    Block, Decoder, Dense, Norm, PlainDraw, StepCodes, axpy, captured_row, features, gelu,
    qk_plain, sync,
};
use super::{Keys, LayerState, ModelError, Performer, State};
use crate::model::attention::{EPS, LinearState};
use crate::model::config::AttentionKind;
use crate::model::pe::ape::sinusoid_values;
use crate::model::pe::{PeKind, PlainCodes, PlainKernel};

/// What one step reads: a token id (continuation) or a row of the input roll (accompaniment).
#[derive(Clone, Copy, Debug)]
pub enum StepInput<'a> {
    Token(u32),
    Roll(&'a [f32]),
}

/// What decoding a position a step reads once per generation; put it in a state with
/// [`State::stepping`].
#[derive(Clone, Debug, Default)]
pub struct Stepping {
    /// The positional encoding's plain form: on the CPU backend, and on every device for
    /// encodings whose tensor-form steps take their codes from it (convSPE).
    pub plain: Option<Arc<dyn PlainKernel>>,
    /// The model's weights as plain numbers, when steps run on the CPU.
    pub decoder: Option<Arc<Decoder>>,
}

impl Performer {
    /// What decoding a position a step reads once per generation, asynchronously (the
    /// browser cannot read a WebGPU tensor synchronously): on the CPU backend
    /// (`Device::flex()`) the weights for the plain-slice decoder and the encoding's plain
    /// form; elsewhere the plain form only where the tensor form's steps use it (convSPE:
    /// each step's codes from the cached noise on the CPU). Softmax attention and other
    /// devices decode through tensors.
    pub async fn stepping(&self, device: &Device) -> Result<Stepping, ModelError> {
        let on_cpu = *device == Device::flex() && self.config.attention == AttentionKind::Linear;
        let kernel = match self.pe.relative() {
            Some(k) if on_cpu || k.plain_steps() => self.pe.plain().await?,
            _ => None,
        };
        let decoder = if on_cpu {
            let read = self.read_decoder(kernel.clone());
            Some(Arc::new(read.await.map_err(ModelError::Weights)?))
        } else {
            None
        };
        Ok(Stepping {
            plain: kernel,
            decoder,
        })
    }

    async fn read_decoder(&self, kernel: Option<Arc<dyn PlainKernel>>) -> Result<Decoder, String> {
        use crate::model::read;
        let mut blocks = Vec::with_capacity(self.blocks.len());
        for b in &self.blocks {
            blocks.push(Block {
                norm1: Norm::read(&b.norm1).await?,
                wq: Dense::read(&b.wq).await?,
                wk: Dense::read(&b.wk).await?,
                wv: Dense::read(&b.wv).await?,
                wo: Dense::read(&b.wo).await?,
                norm2: Norm::read(&b.norm2).await?,
                ff1: Dense::read(&b.ff1).await?,
                ff2: Dense::read(&b.ff2).await?,
            });
        }
        let mut gates = Vec::new();
        for (a, g) in (0..self.pe.gates.len()).filter_map(|layer| self.pe.gate(layer)) {
            gates.push((read(a).await?, read(g).await?));
        }
        Ok(Decoder {
            embedding: match &self.embedding {
                Some(e) => Some(read(e.weight.val()).await?),
                None => None,
            },
            input: match &self.input {
                Some(l) => Some(Dense::read(l).await?),
                None => None,
            },
            blocks,
            norm: Norm::read(&self.norm).await?,
            head: Dense::read(&self.head).await?,
            kernel,
            gates,
        })
    }

    /// One position of `state`'s sequence, returning its logits [output_dim]: on the
    /// plain-slice decoder when the state has one (see [`Self::stepping`]) and holds one row,
    /// otherwise through [`Self::forward`]. `labels` are the position's structure coordinates
    /// (F-StrIPE).
    pub async fn step(
        &self,
        input: StepInput<'_>,
        labels: Option<&[f32]>,
        state: &mut State,
        device: &Device,
    ) -> Result<Vec<f32>, ModelError> {
        let c = &self.config;
        if !c.is_causal() {
            return Err(ModelError::Input {
                expected: "the whole sequence in one call (the model reads it in both directions)"
                    .into(),
                given: "one position at a time".into(),
            });
        }
        match input {
            StepInput::Token(id) if id as usize >= c.input_dim || self.embedding.is_none() => {
                return Err(ModelError::Input {
                    expected: self.expects(),
                    given: format!("token {id}"),
                });
            }
            StepInput::Roll(r) if r.len() != c.input_dim || self.input.is_none() => {
                return Err(ModelError::Input {
                    expected: self.expects(),
                    given: format!("a row of {} features", r.len()),
                });
            }
            _ => {}
        }
        let coords = c.pe.coordinates();
        let labels = match (self.pe.config.is_structural(), labels) {
            (false, _) => None,
            (true, None) => return Err(ModelError::MissingLabels),
            (true, Some(l)) if l.len() != coords => {
                return Err(ModelError::Input {
                    expected: format!("{coords} structure coordinates"),
                    given: format!("{}", l.len()),
                });
            }
            (true, Some(l)) => Some(l),
        };
        match state.decoder.clone() {
            Some(d) if state.batch.unwrap_or(1) == 1 => {
                state.batch = Some(1);
                Ok(self.step_plain(&d, input, labels, state, device))
            }
            _ => {
                let inputs = match input {
                    StepInput::Token(id) => super::Inputs::Tokens(Tensor::from_data(
                        TensorData::new(vec![id as i64], vec![1, 1]),
                        device,
                    )),
                    StepInput::Roll(r) => super::Inputs::Rolls(Tensor::from_data(
                        TensorData::new(r.to_vec(), vec![1, 1, r.len()]),
                        device,
                    )),
                };
                let labels = labels.map(|l| {
                    Tensor::from_data(TensorData::new(l.to_vec(), vec![1, 1, l.len()]), device)
                });
                let logits = self.forward(inputs, labels, state, None)?;
                crate::model::read(logits)
                    .await
                    .map_err(|e| ModelError::Weights(format!("the logits could not be read: {e}")))
            }
        }
    }

    fn expects(&self) -> String {
        match (&self.embedding, &self.input) {
            (Some(_), _) => format!("token ids below {}", self.config.input_dim),
            _ => format!("piano-roll rows of {} features", self.config.input_dim),
        }
    }

    fn step_plain(
        &self,
        d: &Decoder,
        input: StepInput<'_>,
        labels: Option<&[f32]>,
        state: &mut State,
        device: &Device,
    ) -> Vec<f32> {
        let c = &self.config;
        let (heads, dh, dm) = (c.heads, c.d_head, c.d_model);
        let position = state.position;
        // Read once a sequence; each step takes a reference count, not a copy.
        let draw = state.plain_draw.get_or_insert_with(|| {
            Arc::new(PlainDraw {
                mix: state.draw.mix.clone().map(sync),
                eps: state.draw.eps.iter().cloned().map(sync).collect(),
                maps: state.maps.iter().map(|m| sync(m.w.clone())).collect(),
            })
        });
        let draw = Arc::clone(draw);
        let mut x = Vec::with_capacity(dm);
        match (input, &d.embedding, &d.input) {
            (StepInput::Token(id), Some(e), _) => {
                x.extend_from_slice(&e[id as usize * dm..(id as usize + 1) * dm]);
            }
            (StepInput::Roll(r), _, Some(l)) => l.apply(r, &mut x),
            _ => unreachable!("checked in step"),
        }
        if matches!(c.pe.kind, PeKind::Ape | PeKind::Cape) {
            axpy(1.0, &sinusoid_values(&[position as f32], dm), &mut x);
        }
        let codes = self.step_codes(d, &draw, labels, state);
        let r = c.pe.realizations;
        let qk_dim = self.pe.qk_dim();
        let directions = draw.maps.first().map_or(0, |m| m.len() / (heads * qk_dim));
        let m = c.features;
        let (mut h, mut q, mut k, mut v) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut tmp, mut ff) = (Vec::new(), Vec::new());
        let mut merged = vec![0f32; heads * dh];
        let (mut hat_q, mut hat_k) = (vec![0f32; qk_dim], vec![0f32; qk_dim]);
        let (mut phi_q, mut phi_k) = (vec![0f32; m], vec![0f32; m]);
        let mut rows: Vec<Option<Tensor<4>>> = Vec::new();
        for (layer, block) in d.blocks.iter().enumerate() {
            block.norm1.apply(&x, &mut h);
            block.wq.apply(&h, &mut q);
            block.wk.apply(&h, &mut k);
            block.wv.apply(&h, &mut v);
            let (mut s, mut z) = self.plain_layer(state, layer);
            let capture = state.capture && state.capture_layer.is_none_or(|l| l == layer);
            let mut row = capture.then(Vec::new);
            let mut keys = capture.then(|| match state.keys[layer].take() {
                Some(Keys::Plain(k)) => k,
                Some(Keys::Tensor(t)) => Keys::plain(*t),
                None => vec![Vec::new(); heads],
            });
            for head in 0..heads {
                let span = head * dh..(head + 1) * dh;
                let gate = d
                    .gates
                    .get(layer)
                    .map(|(a, g)| (&a[span.clone()], &g[span.clone()]));
                let eps = draw
                    .eps
                    .get(layer)
                    .map(|e| &e[head * dh * r..(head + 1) * dh * r]);
                let one = |x: &[f32], side: usize, out: &mut [f32]| {
                    qk_plain(&codes, x, side, head, dh, r, gate, eps, out)
                };
                one(&q[span.clone()], 0, &mut hat_q);
                one(&k[span.clone()], 1, &mut hat_k);
                let w = &draw.maps[layer][head * qk_dim * directions..][..qk_dim * directions];
                features(c.feature_kind, w, &hat_q, true, m, &mut phi_q);
                features(c.feature_kind, w, &hat_k, false, m, &mut phi_k);
                // The state update and the read-out in one pass over the head's S and z.
                let s = &mut s[head * m * dh..(head + 1) * m * dh];
                let z = &mut z[head * m..(head + 1) * m];
                let out = &mut merged[head * dh..(head + 1) * dh];
                out.fill(0.0);
                let mut den = 0.0;
                for f in 0..m {
                    let row = &mut s[f * dh..(f + 1) * dh];
                    axpy(phi_k[f], &v[head * dh..(head + 1) * dh], row);
                    z[f] += phi_k[f];
                    axpy(phi_q[f], row, out);
                    den += phi_q[f] * z[f];
                }
                let inv = 1.0 / (den + EPS as f32);
                out.iter_mut().for_each(|o| *o *= inv);
                if let (Some(row), Some(keys)) = (row.as_mut(), keys.as_mut()) {
                    captured_row(&mut keys[head], &phi_k, &phi_q, row);
                }
            }
            state.layers[layer] = LayerState::Plain { s, z };
            if let Some(keys) = keys {
                state.keys[layer] = Some(Keys::Plain(keys));
            }
            if let Some(row) = row {
                let n = row.len() / heads;
                rows.push(Some(Tensor::from_data(
                    TensorData::new(row, vec![1, heads, 1, n]),
                    device,
                )));
            } else {
                rows.push(None);
            }
            block.wo.apply(&merged, &mut tmp);
            axpy(1.0, &tmp, &mut x);
            block.norm2.apply(&x, &mut h);
            block.ff1.apply(&h, &mut ff);
            ff.iter_mut().for_each(|f| *f = gelu(*f));
            block.ff2.apply(&ff, &mut tmp);
            axpy(1.0, &tmp, &mut x);
        }
        state.position += 1;
        if state.capture {
            state.rows = rows;
        }
        d.norm.apply(&x, &mut h);
        let mut logits = Vec::new();
        d.head.apply(&h, &mut logits);
        logits
    }

    /// Takes layer `layer`'s S [heads, m, d_head] and z [heads, m] out of the state as plain
    /// numbers, read from the tensors a prefill left if need be.
    pub(super) fn plain_layer(&self, state: &mut State, layer: usize) -> (Vec<f32>, Vec<f32>) {
        let c = &self.config;
        match std::mem::replace(&mut state.layers[layer], LayerState::Empty) {
            LayerState::Plain { s, z } => (s, z),
            LayerState::Linear(state) => {
                let LinearState { s, z } = *state;
                (sync(s), sync(z))
            }
            _ => (
                vec![0.0; c.heads * c.features * c.d_head],
                vec![0.0; c.heads * c.features],
            ),
        }
    }

    /// The codes of the state's position for one step.
    fn step_codes(
        &self,
        d: &Decoder,
        draw: &PlainDraw,
        labels: Option<&[f32]>,
        state: &mut State,
    ) -> StepCodes {
        let c = &self.config.pe;
        let (heads, dim, r) = (self.config.heads, self.config.d_head, c.realizations);
        // Ω [heads, dim, J] → codes [heads, dim, R] through Z.
        let bars = |omega: &[f32], j: usize| -> Vec<f32> {
            let mut out = vec![0f32; heads * dim * r];
            let Some(mix) = draw.mix.as_ref() else {
                return out;
            };
            for (hd, o) in out.chunks_exact_mut(r).enumerate() {
                let z = &mix[hd * j * r..(hd + 1) * j * r];
                for (w, zr) in omega[hd * j..(hd + 1) * j].iter().zip(z.chunks_exact(r)) {
                    axpy(*w, zr, o);
                }
            }
            out
        };
        match &d.kernel {
            None => StepCodes::None,
            Some(k) => match k.step(state.position, labels, &mut state.draw) {
                PlainCodes::Factored(q, k, j) => StepCodes::Bars(bars(&q, j), bars(&k, j)),
                PlainCodes::Bars(q, k) => StepCodes::Bars(q, k),
                PlainCodes::Exact(q, k, j) => StepCodes::Exact(q, k, j),
            },
        }
    }
}
