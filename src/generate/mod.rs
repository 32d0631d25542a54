//! Making music with a trained model, for the CLI and the page alike (tensors are read
//! asynchronously, nothing native-only).
//!
//! Accompaniment: a song's melody (and bridge) with its chord and phrase labels, given or
//! detected. Models that read the piano they wrote go a step at a time (`piano.rs`); the
//! paper's setting computes every step in one parallel pass of any length and thresholds the
//! probabilities into a piano part.
//! Melody: a melody model writes a region a sixteenth at a time over the lanes (`melody.rs`).
//! Continuation: the prompt's REMI tokens prefill the model, then tokens are sampled one at a
//! time through the recurrent form (constant cost per token, any length), masked by the REMI
//! grammar so what comes out always decodes.

use burn::tensor::Tensor;

use crate::model::config::Task;
use crate::model::performer::{ModelError, Performer, State};

pub mod accompany;
pub mod binarize;
#[cfg(feature = "gpu")]
pub mod check;
pub mod continuation;
#[cfg(feature = "gpu")]
pub mod fused;
pub mod harmonize;
pub mod limits;
pub mod live;
pub mod melody;
pub mod piano;
pub mod prompt;
pub mod sample;
pub mod steer;
pub mod texture;

pub use accompany::{
    AccompanimentInput, AccompanimentProgress, accompaniment_input, accompany_probs, input_example,
    piece_input, piece_input_with, song_input, spread, watched_pass,
};
pub use binarize::{Binarize, binarize};
pub use continuation::{Length, TokenProgress, View, continue_tokens, watched_token_pass};
pub use piano::{
    BatchProgress, Given, PianoSampling, Reports, accompany_batch, accompany_steps, splice,
};
pub use prompt::{cut_prompt, prompt_tokens, prompt_tokens_with};
pub use sample::{
    DEFAULT_DENSITY, DEFAULT_ECHO, DEFAULT_KEY, Sampling, log_softmax_values, sample_token,
};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GenerateError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error("{0}")]
    Read(String),
    #[error("this is a {model:?} model; it cannot do {wanted:?}")]
    WrongTask { model: Task, wanted: Task },
    #[error(
        "no melody found: name the melody track MELODY, or give a file whose melody is a mostly \
         one-note-at-a-time track"
    )]
    NoMelody,
    /// The piece's tracks hold notes, but none is marked as the melody (the page's track list
    /// and the CLI's `--melody-track` choose one).
    #[error("no track is marked as the melody: choose the melody track in the track list")]
    NoMelodyTrack,
    #[error("the prompt holds no notes")]
    EmptyPrompt,
    #[error("the prompt could not be read as tokens: {0}")]
    Tokens(String),
    #[error("{given} chord labels for {bars} bars: give one per bar, or fewer to label the start")]
    TooManyChords { given: usize, bars: usize },
    #[error("generation was cancelled")]
    Cancelled,
    #[error(
        "layer {layer}, head {head} does not exist in this model ({layers} layers, {heads} heads)"
    )]
    NoSuchHead {
        layer: usize,
        head: usize,
        layers: usize,
        heads: usize,
    },
}

/// A piece the page or a file gave that does not hold together, said as its reason.
impl From<crate::music::piece::PieceError> for GenerateError {
    fn from(e: crate::music::piece::PieceError) -> Self {
        Self::Read(e.to_string())
    }
}

/// Which attention to watch while generating: one layer and head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Watch {
    pub layer: usize,
    pub head: usize,
}

impl Watch {
    fn check(self, model: &Performer) -> Result<(), GenerateError> {
        let c = &model.config;
        if self.layer >= c.layers || self.head >= c.heads {
            return Err(GenerateError::NoSuchHead {
                layer: self.layer,
                head: self.head,
                layers: c.layers,
                heads: c.heads,
            });
        }
        Ok(())
    }
}

/// Attention rows of the watched head: queries `start .. start + rows`, each over `keys`
/// keys (`values` is rows × keys, zero past each query's own position).
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionRows {
    pub start: usize,
    pub keys: usize,
    pub values: Vec<f32>,
}

/// What a map's pass computed that a map of another head, or of a layer no deeper, over the
/// same notes can be drawn from without running the model again: every linear layer's query
/// and key features (all heads) up to the layer it showed, and a fingerprint of what the pass
/// read (the model's inputs, labels and seed). A caller keeps one per model; a pass over other
/// notes replaces it.
#[derive(Clone, Debug, Default)]
pub struct MapFeatures {
    fingerprint: u64,
    layers: Vec<(Tensor<4>, Tensor<4>)>,
}

impl MapFeatures {
    /// The fingerprint of a pass's inputs (`parts`: its numbers, each slice as read) and seed.
    pub fn fingerprint(parts: &[&[f32]], ids: &[u32], seed: u64) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for part in parts {
            // One write of all its bits (an integer slice hashes as its bytes), not one per
            // number: the page fingerprints every map request's input before a cache hit.
            part.iter()
                .map(|x| x.to_bits())
                .collect::<Vec<u32>>()
                .hash(&mut h);
        }
        ids.hash(&mut h);
        seed.hash(&mut h);
        h.finish()
    }

    /// The features of `watch.layer` when this pass read what `fingerprint` says.
    fn of(&self, fingerprint: u64, watch: Watch) -> Option<&(Tensor<4>, Tensor<4>)> {
        (self.fingerprint == fingerprint)
            .then(|| self.layers.get(watch.layer))
            .flatten()
    }
}

/// The watched head's rows of one pass of `inputs` (`labels`: F-StrIPE's coordinates) that
/// runs only what a map shows: the blocks up to the watched layer, that head's rows, no output
/// read; noise seeded by `seed`, as a generation's. `task`: the model's, checked. With `cache`
/// (and the inputs' `fingerprint`): a map the cached features hold is drawn from them, and a
/// pass keeps its layers' features there.
/// `build` makes the pass's inputs and labels, only when the model runs.
#[allow(clippy::too_many_arguments)]
async fn watched_forward(
    model: &crate::model::performer::Performer,
    task: crate::model::config::Task,
    build: impl FnOnce() -> (crate::model::performer::Inputs, Option<Tensor<3>>),
    seed: u64,
    watch: Watch,
    device: &burn::tensor::Device,
    cache: Option<(&mut MapFeatures, u64)>,
) -> Result<AttentionRows, GenerateError> {
    if model.config.task != task {
        return Err(GenerateError::WrongTask {
            model: model.config.task,
            wanted: task,
        });
    }
    watch.check(model)?;
    let linear = model.config.attention == crate::model::config::AttentionKind::Linear;
    let cache = cache.filter(|_| linear);
    if let Some((c, fingerprint)) = &cache
        && let Some((q, k)) = c.of(*fingerprint, watch)
    {
        let (q, k) = (
            q.clone().narrow(1, watch.head, 1),
            k.clone().narrow(1, watch.head, 1),
        );
        let rows = crate::model::attention::attention_rows(q, k);
        let keys = rows.dims()[3];
        return Ok(AttentionRows {
            start: 0,
            keys,
            values: read_f32(rows).await?,
        });
    }
    let mut state = model.start(seed, true, device);
    state.capture_layer = Some(watch.layer);
    state.capture_head = Some(watch.head);
    state.stop_after = Some(watch.layer);
    if cache.is_some() {
        state.features = Some(Vec::new());
    }
    let (inputs, labels) = build();
    model.forward(inputs, labels, &mut state, None)?;
    if let (Some((c, fingerprint)), Some(layers)) = (cache, state.features.take()) {
        *c = MapFeatures {
            fingerprint,
            layers,
        };
    }
    watched_rows(&state, Some(watch), 0)
        .await?
        .ok_or_else(|| GenerateError::Read("the watched layer recorded no attention".into()))
}

/// Reads the watched head's rows from a state that captured them.
async fn watched_rows(
    state: &State,
    watch: Option<Watch>,
    start: usize,
) -> Result<Option<AttentionRows>, GenerateError> {
    let Some(w) = watch else { return Ok(None) };
    let Some(Some(rows)) = state.rows.get(w.layer) else {
        return Ok(None);
    };
    let [_, heads, _, keys] = rows.dims();
    // A state that captured the watched head alone holds one.
    let head = if heads == 1 { 0 } else { w.head };
    let values = read_f32(rows.clone().narrow(0, 0, 1).narrow(1, head, 1)).await?;
    Ok(Some(AttentionRows {
        start,
        keys,
        values,
    }))
}

async fn read_f32<const D: usize>(t: Tensor<D>) -> Result<Vec<f32>, GenerateError> {
    crate::model::read(t)
        .await
        .map_err(|e| GenerateError::Read(format!("reading the model's output failed: {e}")))
}

pub use crate::music::playing::chord_tone_ratio;

/// Tests: two runs' attention rows cover the same queries and keys and agree to 1e-4.
#[cfg(all(test, feature = "gpu", not(target_arch = "wasm32")))]
pub(crate) fn assert_rows_agree(want: &[AttentionRows], got: &[AttentionRows]) {
    assert_eq!(want.len(), got.len());
    for (w, g) in want.iter().zip(got) {
        assert_eq!(
            (w.start, w.keys, w.values.len()),
            (g.start, g.keys, g.values.len())
        );
        let worst = w
            .values
            .iter()
            .zip(&g.values)
            .fold(0f32, |a, (x, y)| a.max((x - y).abs()));
        assert!(worst <= 1e-4, "attention rows differ by {worst}");
    }
}
