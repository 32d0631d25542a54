//! What a trained model is judged by, and how its outputs become music.
//!
//! Accompaniment: the model's onset and sustain probabilities become a piano roll by a
//! threshold and a gap merge (both chosen on validation data by onset F1), then F-StrIPE's
//! scores (CS, SSMD, GS, NDD) compare it with the real piano part. Continuation: cross-entropy
//! per token position, to see whether a model trained on N-token windows still predicts well
//! at 2N, 3N, 4N (the SPE paper's Figure 3). `panel` samples whole songs and measures how
//! they are played; `melody` measures a melody, written or a song's own; `sampled` continues real prompts and compares the music with the song's.

#[cfg(not(target_arch = "wasm32"))]
pub mod donor;
pub mod harmony;
pub mod live;
pub mod melody;
pub mod openings;
pub mod panel;
pub mod pedal;
pub mod plan;
pub mod report;
pub mod sampled;
#[cfg(not(target_arch = "wasm32"))]
pub mod stepwise;
#[cfg(not(target_arch = "wasm32"))]
pub mod texture;

use burn::tensor::Device;
use serde::{Deserialize, Serialize};

use crate::data::Example;
use crate::data::corpus::{Batch, Corpus, WindowSpec};
use crate::data::features::LABEL_FEATURES;
use crate::generate::binarize::{Binarize, binarize};
use crate::model::config::ACCOMPANIMENT_INPUTS;
use crate::model::performer::Performer;
use crate::music::metrics::{AccompanimentScores, accompaniment_scores};
use crate::music::roll::{PITCHES, PianoRoll};
use crate::train::step::TrainError;

/// The thresholds and gaps tried when choosing on validation data.
pub const THRESHOLDS: [f32; 10] = [0.02, 0.05, 0.08, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5];
pub const GAPS: [usize; 3] = [0, 1, 2];

/// Precision, recall and F1 of predicted onsets against the target's, per step and pitch.
pub fn onset_f1(predicted: &PianoRoll, target: &PianoRoll) -> f64 {
    let n = predicted.num_steps.min(target.num_steps);
    let (mut tp, mut fp, mut fn_) = (0usize, 0usize, 0usize);
    for s in 0..n {
        for p in 0..PITCHES {
            match (predicted.onset(s, p), target.onset(s, p)) {
                (true, true) => tp += 1,
                (true, false) => fp += 1,
                (false, true) => fn_ += 1,
                _ => {}
            }
        }
    }
    if tp == 0 {
        return 0.0;
    }
    let precision = tp as f64 / (tp + fp) as f64;
    let recall = tp as f64 / (tp + fn_) as f64;
    2.0 * precision * recall / (precision + recall)
}

/// The target piano roll of an example (its onset and sustain planes).
pub fn target_roll(e: &Example) -> PianoRoll {
    let mut roll = PianoRoll::new(e.len);
    for t in 0..e.len {
        let row = &e.targets[t * 2 * PITCHES..(t + 1) * 2 * PITCHES];
        for p in 0..PITCHES {
            let (on, sus) = (row[p] > 0.5, row[PITCHES + p] > 0.5);
            if on || sus {
                roll.set(t, p, on, sus, 0);
            }
        }
    }
    roll
}

/// Onset and sustain probabilities `[len, 128]` for one example, the whole window in one
/// parallel pass (any length: the Performer's cost is linear in it).
pub async fn accompany(
    model: &Performer,
    e: &Example,
    seed: u64,
    device: &Device,
) -> Result<(Vec<f32>, Vec<f32>), TrainError> {
    crate::generate::accompany_probs(model, e, seed, e.len, None, device, |_| async { true })
        .await
        .map_err(|err| match err {
            crate::generate::GenerateError::Model(m) => TrainError::Model(m),
            other => TrainError::Read(other.to_string()),
        })
}

/// Excerpts of `bars` bars (4/4: 16 steps a bar) from each piece with an accompaniment:
/// non-overlapping, from the start of its annotated span, at most `per_piece` each.
pub fn excerpts(corpus: &Corpus, spec: &WindowSpec, per_piece: usize) -> Vec<(String, Example)> {
    let mut out = Vec::new();
    for p in corpus.pieces.iter().filter(|p| p.has_accompaniment()) {
        let len = spec.len;
        let mut next = p.range.start;
        let mut taken = 0;
        for start in p.crop_starts(len) {
            if taken == per_piece || start + len > p.range.end {
                break;
            }
            if start < next {
                continue;
            }
            out.push((
                format!("{}@{}", p.name, start),
                p.sheet.example(spec, start, 0),
            ));
            next = start + len;
            taken += 1;
        }
    }
    out
}

/// Model outputs for a set of excerpts, kept so thresholds can be swept without rerunning.
pub struct Predictions {
    pub items: Vec<(String, Example, Vec<f32>, Vec<f32>)>,
}

impl Predictions {
    pub async fn run(
        model: &Performer,
        examples: Vec<(String, Example)>,
        seed: u64,
        device: &Device,
    ) -> Result<Self, TrainError> {
        let mut items = Vec::with_capacity(examples.len());
        for (name, e) in examples {
            let (on, sus) = accompany(model, &e, seed, device).await?;
            items.push((name, e, on, sus));
        }
        Ok(Self { items })
    }

    /// Mean onset F1 with `b`.
    pub fn onset_f1(&self, b: Binarize) -> f64 {
        let n = self.items.len().max(1) as f64;
        self.items
            .iter()
            .map(|(_, e, on, sus)| onset_f1(&binarize(on, sus, e.len, b), &target_roll(e)))
            .sum::<f64>()
            / n
    }

    /// The threshold and gap with the best mean onset F1, and that F1.
    pub fn choose(&self) -> (Binarize, f64) {
        let mut best = (Binarize::default(), -1.0);
        for threshold in THRESHOLDS {
            for gap in GAPS {
                let b = Binarize { threshold, gap };
                let f1 = self.onset_f1(b);
                if f1 > best.1 {
                    best = (b, f1);
                }
            }
        }
        best
    }

    /// F-StrIPE's scores of every excerpt, binarised with `b`.
    pub fn scores(&self, b: Binarize, steps_per_beat: usize) -> Vec<AccompanimentScores> {
        self.items
            .iter()
            .map(|(_, e, on, sus)| {
                accompaniment_scores(
                    &binarize(on, sus, e.len, b),
                    &target_roll(e),
                    steps_per_beat,
                )
            })
            .collect()
    }
}

/// What a trained model's outputs rest on, measured by taking each thing away: the mean loss
/// (as in training, unweighted) on held-out windows as they are; with every attention layer's
/// queries and keys zeroed (each step then averages the values of all steps so far: attention
/// that selects nothing); with the structure labels, wherever the model reads them (the lanes
/// as inputs, F-StrIPE's kernel), all zero; and with another window's labels (a wrong song's
/// structure). Label figures are `None` for a model that reads no labels.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ablations {
    pub loss: f64,
    pub uniform_attention: f64,
    pub labels_zero: Option<f64>,
    pub labels_other: Option<f64>,
}

impl Ablations {
    /// [`Ablations`] of `model` on `windows` (accompaniment examples of one length), in
    /// batches of `batch`; `seed` draws the same random features for every variant.
    pub async fn measure(
        model: &Performer,
        windows: &[Example],
        batch: usize,
        seed: u64,
    ) -> Result<Self, TrainError> {
        let loss = |model: &Performer, windows: Vec<Example>| {
            let trainer = crate::train::step::Trainer::for_evaluation(model.clone(), seed);
            async move {
                let (mut sum, mut n) = (0.0f64, 0usize);
                for chunk in windows.chunks(batch.max(1)) {
                    let l = trainer.evaluate(&Batch::Rolls(chunk.to_vec())).await?;
                    sum += l as f64 * chunk.len() as f64;
                    n += chunk.len();
                }
                Ok::<f64, TrainError>(sum / n.max(1) as f64)
            }
        };
        let config = &model.config;
        let lanes = config.conditioning.is_some_and(|c| c.labels);
        let kernel = config.pe.is_structural();
        // Labels of the window `k` further on (`k = 0`: every label zero).
        let relabelled = |k: usize| -> Vec<Example> {
            let n = windows.len();
            let width = |e: &Example| e.inputs.len() / e.len.max(1);
            (0..n)
                .map(|i| {
                    let mut e = windows[i].clone();
                    let other = &windows[(i + k) % n];
                    let same = k > 0 && other.len == e.len;
                    if kernel {
                        match same {
                            true => e.coordinates.clone_from(&other.coordinates),
                            false => e.coordinates.iter_mut().for_each(|c| *c = 0.0),
                        }
                    }
                    if lanes {
                        let w = width(&e);
                        let lane = ACCOMPANIMENT_INPUTS..ACCOMPANIMENT_INPUTS + LABEL_FEATURES;
                        for t in 0..e.len {
                            let row = t * w;
                            let (from, to) = (row + lane.start, row + lane.end);
                            match same {
                                true => e.inputs[from..to].copy_from_slice(&other.inputs[from..to]),
                                false => e.inputs[from..to].fill(0.0),
                            }
                        }
                    }
                    e
                })
                .collect()
        };
        let (mut labels_zero, mut labels_other) = (None, None);
        if config.reads_lanes() {
            labels_zero = Some(loss(model, relabelled(0)).await?);
            if windows.len() > 1 {
                labels_other = Some(loss(model, relabelled(1)).await?);
            }
        }
        Ok(Self {
            loss: loss(model, windows.to_vec()).await?,
            uniform_attention: loss(&uniform_attention(model), windows.to_vec()).await?,
            labels_zero,
            labels_other,
        })
    }
}

/// `model` with every attention layer's query and key projections zeroed.
pub fn uniform_attention(model: &Performer) -> Performer {
    let mut model = model.clone();
    let zero = |l: &mut burn::nn::Linear| {
        l.weight = l.weight.clone().map(|w| w.zeros_like());
        l.bias = l.bias.clone().map(|b| b.map(|b| b.zeros_like()));
    };
    for block in &mut model.blocks {
        zero(&mut block.wq);
        zero(&mut block.wk);
    }
    model
}

/// Cross-entropy per token position over `batches` of windows (all of one length), averaged
/// over the windows.
pub async fn position_losses(
    model: &Performer,
    batches: &[Batch],
    seed: u64,
) -> Result<Vec<f64>, TrainError> {
    let trainer_like = crate::train::step::Trainer::for_evaluation(model.clone(), seed);
    let mut sum: Vec<f64> = Vec::new();
    let mut n = 0usize;
    for batch in batches {
        let per = trainer_like.evaluate_positions(batch).await?;
        if sum.is_empty() {
            sum = vec![0.0; per.len()];
        }
        for (s, v) in sum.iter_mut().zip(&per) {
            *s += *v as f64 * batch.len() as f64;
        }
        n += batch.len();
    }
    Ok(sum.into_iter().map(|s| s / n.max(1) as f64).collect())
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod ablations_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn onset_f1_counts_hits_and_misses() {
        let mut a = PianoRoll::new(4);
        let mut b = PianoRoll::new(4);
        a.set(0, 60, true, true, 0);
        a.set(1, 62, true, true, 0);
        b.set(0, 60, true, true, 0);
        b.set(2, 64, true, true, 0);
        assert!((onset_f1(&a, &b) - 0.5).abs() < 1e-12);
        assert_eq!(onset_f1(&a, &a), 1.0);
        assert_eq!(onset_f1(&PianoRoll::new(4), &b), 0.0);
    }
}
