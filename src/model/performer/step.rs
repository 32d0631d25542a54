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
        let mut out = self
            .step_batch(&[input], &[labels], std::slice::from_mut(state), device)
            .await?;
        Ok(out.pop().expect("one stream, one row of logits"))
    }

    /// One position of each of several sequences decoded together (alternatives: each state
    /// its own seed, position and memory), returning each one's logits [output_dim]. On the
    /// plain-slice decoder every matrix is read once for all of them (each row of weights
    /// meets every sequence's input while it is in cache), and each sequence's numbers are
    /// exactly what [`Self::step`] gives it alone; elsewhere the sequences step one after
    /// the other.
    pub async fn step_batch(
        &self,
        inputs: &[StepInput<'_>],
        labels: &[Option<&[f32]>],
        states: &mut [State],
        device: &Device,
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        if inputs.len() != states.len() || labels.len() != states.len() {
            return Err(ModelError::Input {
                expected: format!("an input and labels for each of {} sequences", states.len()),
                given: format!("{} inputs and {} labels", inputs.len(), labels.len()),
            });
        }
        let mut checked = Vec::with_capacity(states.len());
        for (input, labels) in inputs.iter().zip(labels) {
            checked.push(self.step_labels(*input, *labels)?);
        }
        let plain = states.iter().map(|s| match &s.decoder {
            Some(d) if s.batch.unwrap_or(1) == 1 => Some(Arc::clone(d)),
            _ => None,
        });
        let plain: Option<Vec<Arc<Decoder>>> = plain.collect();
        if let Some(decoders) = plain
            && let Some(d) = decoders.first()
            && decoders.iter().all(|o| Arc::ptr_eq(o, d))
        {
            states.iter_mut().for_each(|s| s.batch = Some(1));
            return Ok(self.step_plain(d, inputs, &checked, states, device));
        }
        let mut out = Vec::with_capacity(states.len());
        for ((input, labels), state) in inputs.iter().zip(&checked).zip(states.iter_mut()) {
            let inputs = match *input {
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
            out.push(
                crate::model::read(logits).await.map_err(|e| {
                    ModelError::Weights(format!("the logits could not be read: {e}"))
                })?,
            );
        }
        Ok(out)
    }

    /// Checks one step's input and labels; the labels the encoding reads (none unless it is
    /// structural).
    fn step_labels<'a>(
        &self,
        input: StepInput<'_>,
        labels: Option<&'a [f32]>,
    ) -> Result<Option<&'a [f32]>, ModelError> {
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
        match (self.pe.config.is_structural(), labels) {
            (false, _) => Ok(None),
            (true, None) => Err(ModelError::MissingLabels),
            (true, Some(l)) if l.len() != coords => Err(ModelError::Input {
                expected: format!("{coords} structure coordinates"),
                given: format!("{}", l.len()),
            }),
            (true, Some(l)) => Ok(Some(l)),
        }
    }

    fn expects(&self) -> String {
        match (&self.embedding, &self.input) {
            (Some(_), _) => format!("token ids below {}", self.config.input_dim),
            _ => format!("piano-roll rows of {} features", self.config.input_dim),
        }
    }

    /// One position of each state's sequence on the plain-slice decoder `d`: the matrices
    /// once for all (`Dense::apply_batch`), each sequence's codes, feature maps and memory on
    /// their own.
    fn step_plain(
        &self,
        d: &Decoder,
        inputs: &[StepInput<'_>],
        labels: &[Option<&[f32]>],
        states: &mut [State],
        device: &Device,
    ) -> Vec<Vec<f32>> {
        let c = &self.config;
        let n = states.len();
        let mut draws = Vec::with_capacity(n);
        let mut x = vec![Vec::with_capacity(c.d_model); n];
        let mut codes = Vec::with_capacity(n);
        for (b, state) in states.iter_mut().enumerate() {
            // Read once a sequence; each step takes a reference count, not a copy.
            let draw = state.plain_draw.get_or_insert_with(|| {
                Arc::new(PlainDraw {
                    mix: state.draw.mix.clone().map(sync),
                    eps: state.draw.eps.iter().cloned().map(sync).collect(),
                    maps: state.maps.iter().map(|m| sync(m.w.clone())).collect(),
                })
            });
            draws.push(Arc::clone(draw));
            if let (StepInput::Token(id), Some(e)) = (inputs[b], &d.embedding) {
                let dm = c.d_model;
                x[b].extend_from_slice(&e[id as usize * dm..(id as usize + 1) * dm]);
            }
        }
        if let Some(l) = &d.input {
            let rows: Vec<&[f32]> = inputs
                .iter()
                .map(|i| match i {
                    StepInput::Roll(r) => *r,
                    StepInput::Token(_) => unreachable!("checked in step_batch"),
                })
                .collect();
            l.apply_batch(&rows, &mut x);
        }
        for (b, state) in states.iter_mut().enumerate() {
            if matches!(c.pe.kind, PeKind::Ape | PeKind::Cape) {
                axpy(
                    1.0,
                    &sinusoid_values(&[state.position as f32], c.d_model),
                    &mut x[b],
                );
            }
            codes.push(self.step_codes(d, &draws[b], labels[b], state));
        }
        let mut h = vec![Vec::new(); n];
        let (mut q, mut k, mut v) = (
            vec![Vec::new(); n],
            vec![Vec::new(); n],
            vec![Vec::new(); n],
        );
        let (mut tmp, mut ff) = (vec![Vec::new(); n], vec![Vec::new(); n]);
        let mut merged = vec![vec![0f32; c.heads * c.d_head]; n];
        let mut rows: Vec<Vec<Option<Tensor<4>>>> = vec![Vec::new(); n];
        for (layer, block) in d.blocks.iter().enumerate() {
            norms(&block.norm1, &x, &mut h);
            block.wq.apply_batch(&h, &mut q);
            block.wk.apply_batch(&h, &mut k);
            block.wv.apply_batch(&h, &mut v);
            for (b, state) in states.iter_mut().enumerate() {
                let heads = Heads {
                    d,
                    draw: &draws[b],
                    codes: &codes[b],
                    layer,
                };
                let row = self.attend_plain(&heads, [&q[b], &k[b], &v[b]], state, &mut merged[b]);
                rows[b].push(row.map(|row| {
                    let keys = row.len() / c.heads;
                    Tensor::from_data(TensorData::new(row, vec![1, c.heads, 1, keys]), device)
                }));
            }
            block.wo.apply_batch(&merged, &mut tmp);
            residual(&tmp, &mut x);
            norms(&block.norm2, &x, &mut h);
            block.ff1.apply_batch(&h, &mut ff);
            ff.iter_mut()
                .for_each(|f| f.iter_mut().for_each(|f| *f = gelu(*f)));
            block.ff2.apply_batch(&ff, &mut tmp);
            residual(&tmp, &mut x);
        }
        for (state, rows) in states.iter_mut().zip(rows) {
            state.position += 1;
            if state.capture {
                state.rows = rows;
            }
        }
        norms(&d.norm, &x, &mut h);
        let mut logits = vec![Vec::new(); n];
        d.head.apply_batch(&h, &mut logits);
        logits
    }

    /// One layer's attention for one sequence: each head's query and key through the codes
    /// and the feature map, the state update `S += φ(k) vᵀ, z += φ(k)` and read-out
    /// `φ(q)ᵀS / φ(q)ᵀz` in one pass over the head's S and z, into `merged` [heads · d_head];
    /// the captured attention row of every head when this layer is watched.
    fn attend_plain(
        &self,
        at: &Heads<'_>,
        [q, k, v]: [&[f32]; 3],
        state: &mut State,
        merged: &mut [f32],
    ) -> Option<Vec<f32>> {
        let c = &self.config;
        let (heads, dh, m, r) = (c.heads, c.d_head, c.features, c.pe.realizations);
        let (d, draw, layer) = (at.d, at.draw, at.layer);
        let qk_dim = self.pe.qk_dim();
        let directions = draw.maps.first().map_or(0, |w| w.len() / (heads * qk_dim));
        let (mut hat_q, mut hat_k) = (vec![0f32; qk_dim], vec![0f32; qk_dim]);
        let (mut phi_q, mut phi_k) = (vec![0f32; m], vec![0f32; m]);
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
                qk_plain(at.codes, x, side, head, dh, r, gate, eps, out)
            };
            one(&q[span.clone()], 0, &mut hat_q);
            one(&k[span.clone()], 1, &mut hat_k);
            let w = &draw.maps[layer][head * qk_dim * directions..][..qk_dim * directions];
            features(c.feature_kind, w, &hat_q, true, m, &mut phi_q);
            features(c.feature_kind, w, &hat_k, false, m, &mut phi_k);
            let s = &mut s[head * m * dh..(head + 1) * m * dh];
            let z = &mut z[head * m..(head + 1) * m];
            let out = &mut merged[head * dh..(head + 1) * dh];
            out.fill(0.0);
            let mut den = 0.0;
            for f in 0..m {
                let row = &mut s[f * dh..(f + 1) * dh];
                axpy(phi_k[f], &v[span.clone()], row);
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
        row
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

/// What a layer's heads read besides the sequence's state: the decoder, the sequence's draws
/// and its codes for this position.
struct Heads<'a> {
    d: &'a Decoder,
    draw: &'a PlainDraw,
    codes: &'a StepCodes,
    layer: usize,
}

/// Layer norm of each sequence's `x` into its `out`.
fn norms(norm: &Norm, x: &[Vec<f32>], out: &mut [Vec<f32>]) {
    for (x, out) in x.iter().zip(out) {
        norm.apply(x, out);
    }
}

/// `x += add`, each sequence.
fn residual(add: &[Vec<f32>], x: &mut [Vec<f32>]) {
    for (a, x) in add.iter().zip(x) {
        axpy(1.0, a, x);
    }
}
