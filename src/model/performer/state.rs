//! What a sequence carries from one call to the next ([`State`]): each layer's attention
//! memory (linear sums as tensors or plain numbers, or a KV cache), the draws, and the
//! captured keys and attention rows when an attention map is watched.

use std::sync::Arc;

use burn::tensor::{Device, Tensor, TensorData};

use super::Stepping;
use super::plain::{Decoder, PlainDraw};
use crate::model::attention::{KvCache, LinearState};
use crate::model::features::FeatureMap;
use crate::model::pe::Draw;

/// A layer's attention memory.
#[derive(Clone, Debug)]
pub(super) enum LayerState {
    Empty,
    Linear(Box<LinearState>),
    /// The same sums as plain numbers, S [heads, m, d_v] and z [heads, m] (batch 1), while
    /// the plain-slice decoder steps.
    Plain {
        s: Vec<f32>,
        z: Vec<f32>,
    },
    Softmax(Box<KvCache>),
}

/// A captured layer's feature-mapped keys so far.
#[derive(Clone, Debug)]
pub(super) enum Keys {
    /// [batch, heads, n, m].
    Tensor(Box<Tensor<4>>),
    /// Per head, [n · m] (batch 1).
    Plain(Vec<Vec<f32>>),
}

impl Keys {
    /// Per head, as plain numbers (the CPU backend reads synchronously).
    pub(super) fn plain(t: Tensor<4>) -> Vec<Vec<f32>> {
        let [_, heads, n, m] = t.dims();
        let v = t
            .narrow(0, 0, 1)
            .into_data()
            .convert::<f32>()
            .try_into_vec::<f32>();
        let v = v.expect("f32 keys");
        (0..heads)
            .map(|h| v[h * n * m..(h + 1) * n * m].to_vec())
            .collect()
    }

    /// As a tensor; `features` is m.
    pub(super) fn tensor(self, features: usize, device: &Device) -> Tensor<4> {
        match self {
            Keys::Tensor(t) => *t,
            Keys::Plain(heads) => {
                let h = heads.len();
                let n = heads.first().map_or(0, Vec::len) / features.max(1);
                let values: Vec<f32> = heads.into_iter().flatten().collect();
                Tensor::from_data(TensorData::new(values, vec![1, h, n, features]), device)
            }
        }
    }
}

/// Everything a sequence carries from one `forward` call to the next.
#[derive(Clone, Debug)]
pub struct State {
    /// Position of the next step.
    pub position: usize,
    /// Rows in the batch, fixed by the first call.
    pub batch: Option<usize>,
    pub draw: Draw,
    /// One feature-map draw per layer.
    pub maps: Vec<FeatureMap>,
    pub(super) layers: Vec<LayerState>,
    /// When capturing: every captured layer's feature-mapped keys so far [batch, heads, n, m]
    /// (softmax: the cache holds them), and, per layer, the attention rows of every position
    /// of the last call [batch, heads, len, n] (`None` for layers not captured).
    pub(super) capture: bool,
    /// Capture only this layer (rows cost len × n per head: a long prefill shows one layer).
    pub capture_layer: Option<usize>,
    /// Capture only this head's rows (and keep only its keys): what a map shows.
    pub capture_head: Option<usize>,
    /// Run the blocks up to this layer only: [`Performer::forward`] then returns that layer's
    /// output, not logits (a map needs nothing after the layer it shows).
    pub stop_after: Option<usize>,
    pub(super) keys: Vec<Option<Keys>>,
    pub rows: Vec<Option<Tensor<4>>>,
    /// When `Some`: every linear layer run by a whole-sequence call pushes its queries' and
    /// keys' features here (all heads, [batch, heads, len, m] each), what a map of another
    /// head or layer over the same call is drawn from (`generate::MapFeatures` keeps them).
    pub features: Option<Vec<(Tensor<4>, Tensor<4>)>>,
    /// The plain-slice decoder [`Performer::step`] uses, if any, and the draws it has read.
    pub(super) decoder: Option<Arc<Decoder>>,
    pub(super) plain_draw: Option<Arc<PlainDraw>>,
}

impl State {
    /// This state with what [`Performer::stepping`] read: one-position calls then take the
    /// encoding's plain codes where the tensor form steps with them (convSPE: the same codes),
    /// and [`Performer::step`] the plain-slice
    /// decoder where there is one.
    pub fn stepping(mut self, stepping: &Stepping) -> Self {
        self.draw.plain = stepping.plain.clone();
        self.decoder = stepping.decoder.clone();
        self
    }
}

/// A layer's linear-attention sums as [`State::linear_sums`] finds them.
#[cfg(feature = "gpu")]
pub(crate) enum Sums<'a> {
    /// No position yet.
    Empty,
    /// As tensors (S [batch, heads, m, d_v], z [batch, heads, m, 1]).
    Tensors(&'a LinearState),
    /// Held otherwise: as plain numbers, or a KV cache.
    Other,
}

impl State {
    #[cfg(feature = "gpu")]
    /// Layer `layer`'s linear-attention sums, for a decoder that takes them over (the fused
    /// accompaniment steps on wgpu).
    pub(crate) fn linear_sums(&self, layer: usize) -> Sums<'_> {
        match self.layers.get(layer) {
            Some(LayerState::Empty) => Sums::Empty,
            Some(LayerState::Linear(s)) => Sums::Tensors(s),
            _ => Sums::Other,
        }
    }

    #[cfg(feature = "gpu")]
    /// The feature-mapped keys captured in `layer` so far, [batch, heads, n, m] (`features`
    /// is m), if that layer is captured and has any.
    pub(crate) fn captured_keys(
        &self,
        layer: usize,
        features: usize,
        device: &Device,
    ) -> Option<Tensor<4>> {
        let keys = self.keys.get(layer)?.clone()?;
        Some(keys.tensor(features, device))
    }
}

pub(super) fn append(old: Option<Tensor<4>>, new: Tensor<4>) -> Tensor<4> {
    match old {
        Some(old) => Tensor::cat(vec![old, new], 2),
        None => new,
    }
}
