//! One training step for any task: a batch of windows through the Performer on an autodiff
//! device; per-step multi-label binary cross-entropy on piano onsets and sustains
//! (accompaniment), next-token cross-entropy (continuation), chord-class cross-entropy per
//! beat (harmonization) or melody-class cross-entropy per sixteenth (melody); Adam with
//! gradient-norm clipping and a warm-up + cosine learning rate. No native-only pieces: the same code
//! fine-tunes in the browser (the loss is read asynchronously).

use burn::grad_clipping::GradientClippingConfig;
use burn::module::Module;
use burn::optim::{AdamConfig, GradientsParams, ModuleOptimizer};
use burn::tensor::activation::{log_softmax, relu};
use burn::tensor::{Int, Tensor};
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};

use crate::data::corpus::Batch;
use crate::data::{stack, stack_coordinates, stack_tokens};
use crate::model::performer::{Inputs, ModelError, Performer};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    pub peak_lr: f64,
    pub warmup: usize,
    pub total: usize,
    /// The learning rate ends at `peak_lr · final_ratio`.
    pub final_ratio: f64,
}

impl Schedule {
    /// Linear warm-up to the peak over `warmup` steps, then a cosine down to the final rate
    /// at `total`.
    pub fn lr(&self, step: usize) -> f64 {
        if step < self.warmup {
            return self.peak_lr * (step + 1) as f64 / self.warmup as f64;
        }
        let span = self.total.saturating_sub(self.warmup).max(1) as f64;
        let t = ((step - self.warmup) as f64 / span).min(1.0);
        let low = self.peak_lr * self.final_ratio;
        low + (self.peak_lr - low) * 0.5 * (1.0 + (std::f64::consts::PI * t).cos())
    }
}

/// Cross-entropy of `logits` [batch, len, vocab] against target ids [batch, len, 1], per
/// position [batch, len].
pub fn token_nll(logits: Tensor<3>, targets: Tensor<3, Int>) -> Tensor<2> {
    log_softmax(logits, 2)
        .gather(2, targets)
        .neg()
        .squeeze_dim::<2>(2)
}

/// Cross-entropy of chord-class `logits` [batch, len, classes] against target classes
/// [batch, len, 1] given as numbers, where a negative target means "no target here": per
/// position [batch, len], zero where there is no target, and scaled so that the mean over all
/// positions is the mean over the positions with a target.
pub fn class_nll(logits: Tensor<3>, targets: Tensor<3>) -> Tensor<2> {
    let [b, l, _] = targets.dims();
    let mask = targets.clone().greater_equal_elem(0.0).float();
    let ids = targets.clamp_min(0.0).int();
    let nll = log_softmax(logits, 2).gather(2, ids).neg() * mask.clone();
    let counted = mask.sum().clamp_min(1.0).reshape([1, 1]);
    nll.squeeze_dim::<2>(2) * (b * l) as f32 / counted
}

/// Per-step BCE of `logits` against `targets`, averaged over the output units: [batch, len].
/// `pos_weight` scales the loss of the notes that do sound (1: plain BCE), against the
/// sparsity of piano rolls, where a model otherwise learns the silent prior first:
/// `(1 − y)·softplus(x) + w·y·softplus(−x)`.
pub fn bce_per_step(logits: Tensor<3>, targets: Tensor<3>, pos_weight: f32) -> Tensor<2> {
    let softplus_neg_abs = logits.clone().abs().neg().exp().add_scalar(1.0).log();
    let softplus = relu(logits.clone()) + softplus_neg_abs;
    let mut loss = softplus.clone() - logits.clone() * targets.clone();
    if pos_weight != 1.0 {
        loss = loss + (softplus - logits) * targets * (pos_weight - 1.0);
    }
    loss.mean_dim(2).squeeze_dim::<2>(2)
}

/// A tensor's values as f32 ([`crate::model::read`]).
async fn read_vec<const D: usize>(t: Tensor<D>) -> Result<Vec<f32>, TrainError> {
    crate::model::read(t).await.map_err(TrainError::Read)
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TrainError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error("the training loss became {0}: the run diverged")]
    Diverged(f32),
    #[error("reading the loss from the device failed: {0}")]
    Read(String),
}

/// Adam with gradient-norm clipping at `clip_norm`.
pub fn adam(clip_norm: f64) -> ModuleOptimizer {
    AdamConfig::new()
        .with_grad_clipping(Some(GradientClippingConfig::Norm(clip_norm as f32)))
        .init()
}

/// A model on an autodiff device with its optimiser and schedule.
pub struct Trainer {
    pub model: Performer,
    pub optim: ModuleOptimizer,
    pub schedule: Schedule,
    pub step: usize,
    /// Accompaniment: weight of sounding notes in the loss (see [`bce_per_step`]).
    pub pos_weight: f32,
    /// Seeds the SPE codes and random features of each step (a fresh draw per step).
    pub seed: u64,
    /// The positional encoding's learning rate as a multiple of the schedule's.
    pub pe_lr_scale: f64,
}

impl Trainer {
    /// A trainer that only measures: [`Self::evaluate`] and [`Self::evaluate_positions`] on
    /// `model` (any device), with the noise of `seed`; its learning rate is zero.
    pub fn for_evaluation(model: Performer, seed: u64) -> Self {
        let schedule = Schedule {
            peak_lr: 0.0,
            warmup: 0,
            total: 1,
            final_ratio: 1.0,
        };
        Self::new(model, schedule, 1.0, seed)
    }

    /// `model` must live on an autodiff device (`device.autodiff()`).
    pub fn new(model: Performer, schedule: Schedule, clip_norm: f64, seed: u64) -> Self {
        let optim = adam(clip_norm);
        Self {
            model,
            optim,
            schedule,
            step: 0,
            pos_weight: 1.0,
            seed,
            pe_lr_scale: 1.0,
        }
    }

    /// The loss per window and position [batch, len] of `batch` (on the model's device).
    fn losses(&self, batch: &Batch, seed: u64, augment: bool) -> Result<Tensor<2>, TrainError> {
        let device = self.model.devices()[0].clone();
        let mut state = self.model.start(seed, false, &device);
        // CAPE's training-time shifts and scaling.
        let mut rng: StdRng = rand::SeedableRng::seed_from_u64(seed);
        let augment = augment.then_some(&mut rng);
        Ok(match batch {
            Batch::Rolls(examples) => {
                let (inputs, targets, coords) = stack(examples, &device);
                let coords = coords.filter(|_| self.model.config.pe.is_structural());
                let logits =
                    self.model
                        .forward(Inputs::Rolls(inputs), coords, &mut state, augment)?;
                if self.model.config.task.learns_classes() {
                    class_nll(logits, targets)
                } else {
                    bce_per_step(logits, targets, self.pos_weight)
                }
            }
            Batch::Tokens { ids, coordinates } => {
                let (inputs, targets) = stack_tokens(ids, &device);
                let coords = stack_coordinates(coordinates, inputs.dims(), &device)
                    .filter(|_| self.model.config.pe.is_structural());
                let logits =
                    self.model
                        .forward(Inputs::Tokens(inputs), coords, &mut state, augment)?;
                token_nll(logits, targets)
            }
        })
    }

    /// One optimiser step on `batch`; returns the batch loss before the update.
    pub async fn train_step(&mut self, batch: &Batch) -> Result<f32, TrainError> {
        let loss = self
            .losses(batch, self.seed.wrapping_add(self.step as u64), true)?
            .mean();
        let value = read_vec(loss.clone().detach()).await?[0];
        if !value.is_finite() {
            return Err(TrainError::Diverged(value));
        }
        let mut grads = loss.backward();
        let lr = self.schedule.lr(self.step);
        let stand_in = self.model.clone();
        let mut model = std::mem::replace(&mut self.model, stand_in);
        if self.pe_lr_scale != 1.0 {
            // Both groups' gradients are taken before either update (gradients are keyed by
            // the tensors the loss was computed from); parameters without one stay as they are.
            let pe = GradientsParams::from_module(&mut grads, &model.pe);
            let rest = GradientsParams::from_grads(grads, &model);
            model = self.optim.step(lr * self.pe_lr_scale, model, pe);
            self.model = self.optim.step(lr, model, rest);
        } else {
            let grads = GradientsParams::from_grads(grads, &model);
            self.model = self.optim.step(lr, model, grads);
        }
        self.step += 1;
        Ok(value)
    }

    /// The mean loss on `batch` without training (held-out data).
    pub async fn evaluate(&self, batch: &Batch) -> Result<f32, TrainError> {
        Ok(read_vec(self.losses(batch, self.seed, false)?.mean().detach()).await?[0])
    }

    /// The loss per position [len], averaged over the windows of `batch` (how well the model
    /// does at each distance from the window's start).
    pub async fn evaluate_positions(&self, batch: &Batch) -> Result<Vec<f32>, TrainError> {
        read_vec(self.losses(batch, self.seed, false)?.mean_dim(0).detach()).await
    }
}
