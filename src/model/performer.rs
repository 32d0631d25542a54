//! The Performer: pre-LayerNorm blocks of multi-head causal attention (linear through a feature
//! map, or exact softmax) and a GELU feed-forward, with the positional encoding of the config,
//! an input layer per task (token embedding or roll projection) and an output head (next-token
//! logits or per-step piano onset/sustain logits).
//!
//! One `forward` serves training, whole songs, prompt prefill and token-by-token decoding: it
//! runs positions `state.position ..` and carries each layer's attention state (`S`, `z`, or
//! the KV cache) in a [`State`], whose noise (SPE codes, gating noise, random features) is
//! drawn once. A call of length 1 takes the recurrent form.

use burn::module::{Module, Param};
use burn::nn::{
    Embedding, EmbeddingConfig, Initializer, LayerNorm, LayerNormConfig, Linear, LinearConfig,
};
use burn::tensor::activation::gelu;
use burn::tensor::{Device, Int, Tensor, TensorData};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

#[cfg(not(feature = "gpu"))]
use super::attention::causal_linear as causal_linear_fast;
use super::attention::{KvCache, LinearState, attention_rows, recurrent_step, softmax_rows};
use super::config::{AttentionKind, PerformerConfig};
use super::features::{FeatureMap, normal};
#[cfg(feature = "gpu")]
use super::kernels::causal_linear_fast;
use super::pe::ape::sinusoids;
use super::pe::{Codes, PeKind, PositionalEncoding, Span};

pub use super::ModelError;

/// What goes in: tokens [batch, len] or rolls [batch, len, input_dim].
#[derive(Clone, Debug)]
pub enum Inputs {
    Tokens(Tensor<2, Int>),
    Rolls(Tensor<3>),
}

impl Inputs {
    pub fn dims(&self) -> (usize, usize) {
        match self {
            Inputs::Tokens(t) => {
                let [b, l] = t.dims();
                (b, l)
            }
            Inputs::Rolls(r) => {
                let [b, l, _] = r.dims();
                (b, l)
            }
        }
    }
}

#[derive(Module, Debug)]
pub struct Block {
    pub norm1: LayerNorm,
    pub wq: Linear,
    pub wk: Linear,
    pub wv: Linear,
    pub wo: Linear,
    pub norm2: LayerNorm,
    pub ff1: Linear,
    pub ff2: Linear,
}

#[derive(Module, Debug)]
pub struct Performer {
    pub embedding: Option<Embedding>,
    pub input: Option<Linear>,
    pub blocks: Vec<Block>,
    pub norm: LayerNorm,
    pub head: Linear,
    pub pe: PositionalEncoding,
    #[module(skip)]
    pub config: PerformerConfig,
}

/// A linear layer initialised from `rng` (uniform ±1/sqrt(d_in), as PyTorch does), so a seed
/// gives the same model on every backend.
pub(crate) fn seeded_linear(
    rng: Option<&mut StdRng>,
    d_in: usize,
    d_out: usize,
    device: &Device,
) -> Linear {
    let mut layer = LinearConfig::new(d_in, d_out)
        .with_initializer(Initializer::Zeros)
        .init(device);
    let Some(rng) = rng else { return layer };
    let bound = 1.0 / (d_in as f32).sqrt();
    let mut uniform = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| (rng.random::<f32>() * 2.0 - 1.0) * bound)
            .collect()
    };
    layer.weight = Param::from_data(
        TensorData::new(uniform(d_in * d_out), vec![d_in, d_out]),
        device,
    );
    layer.bias = Some(Param::from_data(
        TensorData::new(uniform(d_out), vec![d_out]),
        device,
    ));
    layer
}

impl Performer {
    /// A freshly initialised model; the same `seed` gives the same weights everywhere.
    pub fn new(config: &PerformerConfig, seed: u64, device: &Device) -> Result<Self, ModelError> {
        Self::build(config, seed, true, device)
    }

    /// [`Self::new`], with the matrices (input, attention, feed-forward, output) drawn from
    /// `seed` when `random`, else zeros: what a model about to be overwritten by its weights
    /// needs ([`Self::from_bytes`]), without drawing a million numbers it throws away (a
    /// quarter of the page's first model load). The positional encoding's few parameters are
    /// drawn either way.
    pub(crate) fn build(
        config: &PerformerConfig,
        seed: u64,
        random: bool,
        device: &Device,
    ) -> Result<Self, ModelError> {
        config.validate().map_err(ModelError::Config)?;
        // One stream for everything when random (the draws of `new`, in its order); else the
        // encoding gets its own.
        let mut matrices = random.then(|| StdRng::seed_from_u64(seed));
        let mut own = StdRng::seed_from_u64(seed);
        let d = config.d_model;
        let inner = config.heads * config.d_head;
        let (embedding, input) = if config.task.reads_tokens() {
            let mut e = EmbeddingConfig::new(config.input_dim, d)
                .with_initializer(Initializer::Zeros)
                .init(device);
            if let Some(rng) = matrices.as_mut() {
                let scale = 1.0 / (d as f64).sqrt();
                let v: Vec<f32> = (0..config.input_dim * d)
                    .map(|_| (normal(rng) * scale) as f32)
                    .collect();
                e.weight = Param::from_data(TensorData::new(v, vec![config.input_dim, d]), device);
            }
            (Some(e), None)
        } else {
            (
                None,
                Some(seeded_linear(
                    matrices.as_mut(),
                    config.input_dim,
                    d,
                    device,
                )),
            )
        };
        let blocks = (0..config.layers)
            .map(|_| Block {
                norm1: LayerNormConfig::new(d).init(device),
                wq: seeded_linear(matrices.as_mut(), d, inner, device),
                wk: seeded_linear(matrices.as_mut(), d, inner, device),
                wv: seeded_linear(matrices.as_mut(), d, inner, device),
                wo: seeded_linear(matrices.as_mut(), inner, d, device),
                norm2: LayerNormConfig::new(d).init(device),
                ff1: seeded_linear(matrices.as_mut(), d, config.d_ff, device),
                ff2: seeded_linear(matrices.as_mut(), config.d_ff, d, device),
            })
            .collect();
        let pe = PositionalEncoding::new(
            &config.pe,
            config.layers,
            config.heads,
            config.d_head,
            matrices.as_mut().unwrap_or(&mut own),
            device,
        );
        Ok(Self {
            embedding,
            input,
            blocks,
            norm: LayerNormConfig::new(d).init(device),
            head: seeded_linear(matrices.as_mut(), d, config.output_dim, device),
            pe,
            config: config.clone(),
        })
    }

    /// Number of trainable numbers.
    pub fn parameters(&self) -> usize {
        self.num_params()
    }

    /// A new sequence: its noise drawn from `seed` (SPE codes and gating noise, one random
    /// feature map per layer). With `capture`, each call records the attention rows of its
    /// last position for display.
    pub fn start(&self, seed: u64, capture: bool, device: &Device) -> State {
        let c = &self.config;
        let qk_dim = self.pe.qk_dim();
        let maps = (0..c.layers)
            .map(|layer| {
                FeatureMap::draw(
                    c.feature_kind,
                    c.heads,
                    qk_dim,
                    c.features,
                    seed.wrapping_add(0x5eed_0000 + layer as u64),
                    device,
                )
            })
            .collect();
        State {
            position: 0,
            batch: None,
            draw: self.pe.draw(seed, device),
            maps,
            layers: vec![LayerState::Empty; c.layers],
            capture,
            capture_layer: None,
            capture_head: None,
            stop_after: None,
            features: None,
            keys: vec![None; c.layers],
            rows: Vec::new(),
            decoder: None,
            plain_draw: None,
        }
    }

    /// Runs `inputs` at positions `state.position ..`, continuing the sequence in `state`, and
    /// returns the logits [batch, len, output_dim]. `labels` [batch, len, coordinates] are the
    /// structure coordinates F-StrIPE reads. `augment` draws CAPE's training-time positions.
    pub fn forward(
        &self,
        inputs: Inputs,
        labels: Option<Tensor<3>>,
        state: &mut State,
        augment: Option<&mut StdRng>,
    ) -> Result<Tensor<3>, ModelError> {
        let c = &self.config;
        let (batch, len) = inputs.dims();
        if len == 0 || batch == 0 {
            return Err(ModelError::Input {
                expected: "at least one step".into(),
                given: "none".into(),
            });
        }
        match state.batch {
            Some(started) if started != batch => {
                return Err(ModelError::Batch {
                    started,
                    given: batch,
                });
            }
            _ => state.batch = Some(batch),
        }
        if let Some(l) = &labels {
            let want = [batch, len, c.pe.coordinates()];
            if l.dims() != want {
                return Err(ModelError::Input {
                    expected: format!("structure labels shaped {want:?}"),
                    given: format!("{:?}", l.dims()),
                });
            }
        }
        let mut x = match (inputs, &self.embedding, &self.input) {
            (Inputs::Tokens(t), Some(e), _) => e.forward(t),
            (Inputs::Rolls(r), _, Some(l)) => {
                let width = r.dims()[2];
                if width != c.input_dim {
                    return Err(ModelError::Input {
                        expected: format!("{} features per step", c.input_dim),
                        given: format!("{width}"),
                    });
                }
                l.forward(r)
            }
            (Inputs::Tokens(_), None, _) => {
                return Err(ModelError::Input {
                    expected: "piano rolls".into(),
                    given: "tokens".into(),
                });
            }
            (Inputs::Rolls(_), _, None) => {
                return Err(ModelError::Input {
                    expected: "tokens".into(),
                    given: "piano rolls".into(),
                });
            }
        };
        let device = x.device();
        let start = state.position;
        match c.pe.kind {
            PeKind::Ape | PeKind::Cape => {
                let positions: Vec<f32> = match (c.pe.kind, augment) {
                    (PeKind::Cape, Some(rng)) => (0..batch)
                        .flat_map(|_| c.pe.cape.positions(start, len, rng))
                        .collect(),
                    _ => (0..batch)
                        .flat_map(|_| (start..start + len).map(|t| t as f32))
                        .collect(),
                };
                x = x + sinusoids(&positions, batch, c.d_model, &device);
            }
            _ => {}
        }
        if !c.is_causal() && start > 0 {
            return Err(ModelError::Input {
                expected: "the whole sequence in one call (the model reads it in both directions)"
                    .into(),
                given: format!("a continuation from position {start}"),
            });
        }
        if self.pe.config.is_structural() && labels.is_none() {
            return Err(ModelError::MissingLabels);
        }
        let span = Span { start, len, labels };
        let whole = self.whole(state, batch, &span);
        let codes = match whole {
            Some(_) => Codes::None,
            None => self.pe.codes(&span, &mut state.draw, &device)?,
        };
        let mut rows = Vec::new();
        for (layer, block) in self.blocks.iter().enumerate() {
            // A pass that stops at a linear layer it captures (a map) needs that layer's rows
            // alone: no values, no output, no feed-forward.
            if state.stop_after == Some(layer)
                && whole.is_none()
                && c.attention == AttentionKind::Linear
                && state.capture
                && state.capture_layer.is_none_or(|l| l == layer)
            {
                rows.push(Some(self.rows_only(layer, block, x.clone(), &codes, state)));
                break;
            }
            let (out, row) = match &whole {
                Some(w) => {
                    let h = block.norm1.forward(x.clone());
                    let (q, k, v) = (
                        block.wq.forward(h.clone()),
                        block.wk.forward(h.clone()),
                        block.wv.forward(h),
                    );
                    let merged = self.attend_whole(layer, w, q, k, v, state);
                    (block.wo.forward(merged), None)
                }
                None => self.attend(layer, block, x.clone(), &codes, state),
            };
            x = x + out;
            rows.push(row);
            let h = block.norm2.forward(x.clone());
            x = x.clone() + block.ff2.forward(gelu(block.ff1.forward(h)));
            if state.stop_after == Some(layer) {
                break;
            }
        }
        state.position += len;
        if state.capture {
            state.rows = rows;
        }
        if state.stop_after.is_some() {
            return Ok(x);
        }
        Ok(self.head.forward(self.norm.forward(x)))
    }

    /// The attention rows of a linear layer that captures them, and nothing else: its queries
    /// and keys, encoded and mapped as [`Self::attend`] does, the watched head's alone kept
    /// when only it is shown.
    fn rows_only(
        &self,
        layer: usize,
        block: &Block,
        x: Tensor<3>,
        codes: &Codes,
        state: &mut State,
    ) -> Tensor<4> {
        let c = &self.config;
        let [b, l, _] = x.dims();
        let h = block.norm1.forward(x);
        let split = |t: Tensor<3>| t.reshape([b, l, c.heads, c.d_head]).swap_dims(1, 2);
        let q = split(block.wq.forward(h.clone()));
        let k = split(block.wk.forward(h));
        let (qh, kh) = self.pe.qk(layer, q, k, codes, &state.draw);
        let device = qh.device();
        let map = &state.maps[layer];
        let (phi_q, phi_k) = (map.apply(qh, true), map.apply(kh, false));
        if let Some(f) = state.features.as_mut() {
            f.push((phi_q.clone(), phi_k.clone()));
        }
        let (q, k) = match state.capture_head {
            Some(h) => (phi_q.narrow(1, h, 1), phi_k.narrow(1, h, 1)),
            None => (phi_q, phi_k),
        };
        let old = state.keys[layer]
            .take()
            .map(|k| k.tensor(c.features, &device));
        let keys = append(old, k);
        let rows = attention_rows(q, keys.clone());
        state.keys[layer] = Some(Keys::Tensor(Box::new(keys)));
        rows
    }

    /// One block's attention sublayer (pre-LN): returns its output [batch, len, d_model] and,
    /// when capturing this layer, the attention rows of the call's positions.
    fn attend(
        &self,
        layer: usize,
        block: &Block,
        x: Tensor<3>,
        codes: &Codes,
        state: &mut State,
    ) -> (Tensor<3>, Option<Tensor<4>>) {
        let c = &self.config;
        let capture = state.capture && state.capture_layer.is_none_or(|l| l == layer);
        let [b, l, _] = x.dims();
        let h = block.norm1.forward(x);
        let split = |t: Tensor<3>| t.reshape([b, l, c.heads, c.d_head]).swap_dims(1, 2);
        let q = split(block.wq.forward(h.clone()));
        let k = split(block.wk.forward(h.clone()));
        let v = split(block.wv.forward(h));
        let (qh, kh) = self.pe.qk(layer, q, k, codes, &state.draw);
        let device = qh.device();
        let mut row = None;
        let out = match c.attention {
            AttentionKind::Linear => {
                let map = &state.maps[layer];
                let phi_q = map.apply(qh, true);
                let phi_k = map.apply(kh, false);
                if let Some(f) = state.features.as_mut() {
                    f.push((phi_q.clone(), phi_k.clone()));
                }
                let prior = match std::mem::replace(&mut state.layers[layer], LayerState::Empty) {
                    LayerState::Linear(s) => *s,
                    LayerState::Plain { s, z } => {
                        let (h, m, dv) = (c.heads, c.features, c.d_head);
                        LinearState {
                            s: Tensor::from_data(TensorData::new(s, vec![1, h, m, dv]), &device),
                            z: Tensor::from_data(TensorData::new(z, vec![1, h, m, 1]), &device),
                        }
                    }
                    _ => LinearState::zeros(b, c.heads, c.features, c.d_head, &device),
                };
                if capture {
                    // One head's rows, its keys alone kept, when only it is shown.
                    let (q, k) = match state.capture_head {
                        Some(h) => (phi_q.clone().narrow(1, h, 1), phi_k.clone().narrow(1, h, 1)),
                        None => (phi_q.clone(), phi_k.clone()),
                    };
                    let old = state.keys[layer]
                        .take()
                        .map(|k| k.tensor(c.features, &device));
                    let keys = append(old, k);
                    row = Some(attention_rows(q, keys.clone()));
                    state.keys[layer] = Some(Keys::Tensor(Box::new(keys)));
                }
                let (out, next) = if l == 1 || !c.is_causal() {
                    // Bidirectional: every key is absorbed before any query reads, which is
                    // the recurrent step's order over the whole sequence at once.
                    recurrent_step(phi_q, phi_k, v, prior)
                } else {
                    // The fused WGSL kernel for plain (inference) wgpu tensors; the generic
                    // `causal_linear` (the reference) everywhere else, training included.
                    causal_linear_fast(phi_q, phi_k, v, c.chunk, prior)
                };
                state.layers[layer] = LayerState::Linear(Box::new(next));
                out
            }
            AttentionKind::Softmax => {
                let mut cache = match std::mem::replace(&mut state.layers[layer], LayerState::Empty)
                {
                    LayerState::Softmax(cache) => *cache,
                    _ => KvCache::new(),
                };
                let out = cache.attend(qh.clone(), kh, v, 1.0);
                if capture {
                    let keys = cache.k.clone().expect("just filled");
                    row = Some(softmax_rows(qh, keys, 1.0));
                }
                state.layers[layer] = LayerState::Softmax(Box::new(cache));
                out
            }
        };
        let merged = out.swap_dims(1, 2).reshape([b, l, c.heads * c.d_head]);
        (block.wo.forward(merged), row)
    }

    /// Which parameters train from here on: with `Some(k)`, only the last `k` blocks, the
    /// final norm, the output head and the positional encoding's parameters (frequencies,
    /// gains, filters, gates); the input layer and the earlier blocks stay as they are.
    /// `None` trains everything.
    pub fn trainable_top(mut self, top: Option<usize>) -> Self {
        let Some(k) = top else {
            return self.set_require_grad(true);
        };
        let frozen = self.blocks.len().saturating_sub(k);
        self.embedding = self.embedding.map(|e| e.set_require_grad(false));
        self.input = self.input.map(|l| l.set_require_grad(false));
        self.blocks = self
            .blocks
            .into_iter()
            .enumerate()
            .map(|(i, b)| b.set_require_grad(i >= frozen))
            .collect();
        self
    }
}

mod plain;
mod state;
mod step;
mod weights;
mod whole;
pub use plain::Decoder;
#[cfg(feature = "gpu")]
pub(crate) use plain::captured_row;
pub use state::State;
#[cfg(feature = "gpu")]
pub(crate) use state::Sums;
use state::{Keys, LayerState, append};
pub use step::{StepInput, Stepping};

#[cfg(all(test, not(target_arch = "wasm32")))]
mod step_tests;
#[cfg(all(test, not(target_arch = "wasm32")))]
pub(crate) mod tests;
