//! One training step for accompaniment: a batch of windows through the Performer on an
//! autodiff device, per-step multi-label binary cross-entropy on piano onsets and sustains,
//! Adam with gradient-norm clipping and a warm-up + cosine learning rate. No native-only
//! pieces: the same code fine-tunes in the browser (the loss is read asynchronously).

use burn::grad_clipping::GradientClippingConfig;
use burn::module::Module;
use burn::optim::{AdamConfig, GradientsParams, ModuleOptimizer};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use super::data::Example;
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

/// Mean binary cross-entropy of `logits` against 0/1 `targets`, computed stably:
/// `max(x, 0) − x·y + log(1 + exp(−|x|))`.
pub fn bce_with_logits<const D: usize>(logits: Tensor<D>, targets: Tensor<D>) -> Tensor<1> {
    let softplus_neg_abs = logits.clone().abs().neg().exp().add_scalar(1.0).log();
    (relu(logits.clone()) - logits * targets + softplus_neg_abs).mean()
}

/// Stacks examples (all of one length) into inputs [batch, len, 512], targets
/// [batch, len, 256] and coordinates [batch, len, c] (`None` when there are none).
pub fn stack(examples: &[Example], device: &Device) -> (Tensor<3>, Tensor<3>, Option<Tensor<3>>) {
    let b = examples.len();
    let len = examples.first().map_or(0, |e| e.len);
    let cat = |f: fn(&Example) -> &Vec<f32>| -> Vec<f32> {
        examples.iter().flat_map(|e| f(e).iter().copied()).collect()
    };
    let inputs = cat(|e| &e.inputs);
    let targets = cat(|e| &e.targets);
    let coords = cat(|e| &e.coordinates);
    let width = |v: &Vec<f32>| v.len() / (b * len).max(1);
    let tensor = |v: Vec<f32>| {
        let w = width(&v);
        Tensor::<3>::from_data(TensorData::new(v, vec![b, len, w]), device)
    };
    let coords = (!coords.is_empty()).then(|| tensor(coords));
    (tensor(inputs), tensor(targets), coords)
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

/// A model on an autodiff device with its optimiser and schedule.
pub struct Trainer {
    pub model: Performer,
    pub optim: ModuleOptimizer,
    pub schedule: Schedule,
    pub step: usize,
    /// Seeds the SPE codes and random features of each step (a fresh draw per step).
    pub seed: u64,
}

impl Trainer {
    /// `model` must live on an autodiff device (`device.autodiff()`).
    pub fn new(model: Performer, schedule: Schedule, clip_norm: f64, seed: u64) -> Self {
        let optim = AdamConfig::new()
            .with_grad_clipping(Some(GradientClippingConfig::Norm(clip_norm as f32)))
            .init();
        Self {
            model,
            optim,
            schedule,
            step: 0,
            seed,
        }
    }

    /// One optimiser step on `examples`; returns the batch loss before the update.
    pub async fn train_step(&mut self, examples: &[Example]) -> Result<f32, TrainError> {
        let device = self.model.devices()[0].clone();
        let (inputs, targets, coords) = stack(examples, &device);
        let coords = coords.filter(|_| self.model.config.pe.is_structural());
        let mut state = self
            .model
            .start(self.seed.wrapping_add(self.step as u64), false, &device);
        let logits = self
            .model
            .forward(Inputs::Rolls(inputs), coords, &mut state, None)?;
        let loss = bce_with_logits(logits, targets);
        let value = loss
            .clone()
            .detach()
            .into_data_async()
            .await
            .map_err(|e| TrainError::Read(format!("{e:?}")))?
            .try_to_vec::<f32>()
            .map_err(|e| TrainError::Read(format!("{e:?}")))?[0];
        if !value.is_finite() {
            return Err(TrainError::Diverged(value));
        }
        let grads = GradientsParams::from_grads(loss.backward(), &self.model);
        let lr = self.schedule.lr(self.step);
        let stand_in = self.model.clone();
        let model = std::mem::replace(&mut self.model, stand_in);
        self.model = self.optim.step(lr, model, grads);
        self.step += 1;
        Ok(value)
    }

    /// The loss on `examples` without training (held-out data).
    pub async fn evaluate(&self, examples: &[Example]) -> Result<f32, TrainError> {
        let device = self.model.devices()[0].clone();
        let (inputs, targets, coords) = stack(examples, &device);
        let coords = coords.filter(|_| self.model.config.pe.is_structural());
        let mut state = self.model.start(self.seed, false, &device);
        let logits = self
            .model
            .forward(Inputs::Rolls(inputs), coords, &mut state, None)?;
        let loss = bce_with_logits(logits, targets).detach();
        Ok(loss
            .into_data_async()
            .await
            .map_err(|e| TrainError::Read(format!("{e:?}")))?
            .try_to_vec::<f32>()
            .map_err(|e| TrainError::Read(format!("{e:?}")))?[0])
    }
}
