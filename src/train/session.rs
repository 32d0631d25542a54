//! A training run as a sequence of steps that can stop and resume anywhere: the options, the
//! batches (drawn from a per-step seed, so a resumed run sees exactly the batches it would
//! have seen), validation on fixed held-out windows, and checkpoints as bytes (model, optimiser
//! state, and what the run was). The command line writes the checkpoints to files and shows
//! progress; the page keeps them in the browser. Nothing native-only.

use burn::tensor::{Bytes, Device};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};

use super::step::{Schedule, TrainError, Trainer, adam};
use crate::data::corpus::{Batch, Corpus, WindowSpec};
use crate::model::config::{PerformerConfig, Task};
use crate::model::performer::{ModelError, Performer};
use crate::music::tokens::VOCAB_SIZE;

/// Everything that defines a run besides the model's config and the data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunOptions {
    /// Optimiser steps in all.
    pub steps: usize,
    /// Windows per batch.
    pub batch: usize,
    /// Grid steps (accompaniment: 16 a bar in 4/4) or tokens (continuation) per window.
    pub window: usize,
    pub peak_lr: f64,
    pub warmup: usize,
    /// The learning rate ends at `peak_lr · final_ratio`.
    pub final_ratio: f64,
    pub clip_norm: f64,
    /// Accompaniment: weight of sounding notes in the loss (1: plain BCE).
    #[serde(default = "one")]
    pub pos_weight: f64,
    /// The positional encoding's parameters (SPE frequencies, phases, gains and filters,
    /// F-StrIPE's, the gates) learn at this multiple of the learning rate: Adam's step is
    /// about the learning rate whatever the gradient, so frequencies that must travel far
    /// from their initialisation move faster only with a larger rate.
    #[serde(default = "one")]
    pub pe_lr_scale: f64,
    /// Random transposition in `-max_shift ..= max_shift` semitones.
    pub max_shift: i32,
    /// Accompaniment: the share of each training window's chord stretches given another of
    /// the song's chords (`data::example::replace_chords`); validation reads the labels as
    /// they are.
    #[serde(default)]
    pub chord_noise: f64,
    pub seed: u64,
    /// Validate every this many steps (and at the end).
    pub eval_every: usize,
    /// Held-out windows used for validation, at most.
    pub eval_windows: usize,
}

impl RunOptions {
    /// Sensible defaults for `task`: 16-bar windows of 256 steps for accompaniment, 512 tokens
    /// for continuation.
    pub fn defaults(task: Task) -> Self {
        Self {
            steps: 2000,
            batch: 8,
            window: task.train_window(),
            peak_lr: 1e-3,
            warmup: 100,
            final_ratio: 0.05,
            clip_norm: 1.0,
            pos_weight: 1.0,
            pe_lr_scale: 1.0,
            max_shift: 5,
            chord_noise: 0.0,
            seed: 0,
            eval_every: 200,
            eval_windows: 64,
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.steps == 0 || self.batch == 0 || self.window < 2 {
            return Err("steps and batch must be positive and windows at least 2 long".into());
        }
        if !(self.peak_lr > 0.0 && self.peak_lr.is_finite()) {
            return Err(format!(
                "the learning rate must be positive, not {}",
                self.peak_lr
            ));
        }
        if !(self.pos_weight > 0.0 && self.pos_weight.is_finite()) {
            return Err("the positive weight must be a positive number".into());
        }
        if !(self.pe_lr_scale > 0.0 && self.pe_lr_scale <= 1000.0) {
            return Err(format!(
                "the positional encoding's learning-rate multiple must be above 0 and at most \
                 1000, not {}",
                self.pe_lr_scale
            ));
        }
        if self.clip_norm.is_nan() || self.clip_norm <= 0.0 {
            return Err("the gradient clipping norm must be positive".into());
        }
        if !(0.0..=1.0).contains(&self.chord_noise) {
            return Err(format!(
                "the share of chords replaced is between 0 and 1, not {}",
                self.chord_noise
            ));
        }
        if !(0..=12).contains(&self.max_shift) {
            return Err("transposition must stay within an octave (0 to 12 semitones)".into());
        }
        Ok(())
    }

    pub fn schedule(&self) -> Schedule {
        Schedule {
            peak_lr: self.peak_lr,
            warmup: self.warmup.min(self.steps),
            total: self.steps,
            final_ratio: self.final_ratio,
        }
    }
}

fn one() -> f64 {
    1.0
}

/// What a checkpoint records besides the weights.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    pub config: PerformerConfig,
    pub options: RunOptions,
    /// Steps done.
    pub step: usize,
    /// Where the data came from (a path, or "POP909 train split"), for the record.
    pub data: String,
    /// The last validation loss, if any.
    pub valid_loss: Option<f32>,
    /// The data path and song limit as given, so a resumed run reads the same songs.
    #[serde(default)]
    pub data_path: Option<String>,
    #[serde(default)]
    pub limit: Option<usize>,
    /// sha256 of the model and optimiser bytes saved with this state: a checkpoint cut short
    /// while saving is caught on resume.
    #[serde(default)]
    pub model_sha256: Option<String>,
    #[serde(default)]
    pub optim_sha256: Option<String>,
}

/// A checkpoint: the run state and the model and optimiser as burnpack bytes.
pub struct Checkpoint {
    pub state: RunState,
    pub model: Vec<u8>,
    pub optim: Vec<u8>,
}

/// A run in progress.
pub struct Session {
    pub trainer: Trainer,
    pub options: RunOptions,
    pub spec: WindowSpec,
    pub data: String,
    pub valid_loss: Option<f32>,
    train: Corpus,
    valid: Vec<Batch>,
}

impl Session {
    /// A new run of a freshly initialised model of `config` (seeded by `options.seed`) on an
    /// autodiff `device`.
    pub fn new(
        config: &PerformerConfig,
        options: RunOptions,
        train: Corpus,
        valid: &Corpus,
        data: String,
        device: &Device,
    ) -> Result<Self, String> {
        let model = Performer::new(config, options.seed, device).map_err(|e| e.to_string())?;
        Self::with_model(model, options, train, valid, data)
    }

    /// A run that starts from `model` (fine-tuning starts from a trained one).
    pub fn with_model(
        model: Performer,
        options: RunOptions,
        train: Corpus,
        valid: &Corpus,
        data: String,
    ) -> Result<Self, String> {
        options.validate()?;
        model.config.validate_for(VOCAB_SIZE)?;
        let task = model.config.task;
        if options.chord_noise > 0.0 && task != Task::Accompaniment {
            return Err("only an accompaniment learns under replaced chords".into());
        }
        let spec = WindowSpec {
            max_shift: options.max_shift,
            chord_noise: options.chord_noise,
            ..WindowSpec::for_model(&model.config, options.window)
        };
        train.check(task, &spec)?;
        let valid = if valid.pieces.is_empty() {
            Vec::new()
        } else {
            let clean = WindowSpec {
                chord_noise: 0.0,
                ..spec.clone()
            };
            valid.fixed_windows(task, &clean, 4, options.eval_windows, options.batch)
        };
        let mut trainer = Trainer::new(model, options.schedule(), options.clip_norm, options.seed);
        trainer.pos_weight = options.pos_weight as f32;
        trainer.pe_lr_scale = options.pe_lr_scale;
        Ok(Self {
            trainer,
            options,
            spec,
            data,
            valid_loss: None,
            train,
            valid,
        })
    }

    /// Continues the run saved in `checkpoint` (on the autodiff `device`) with the same data.
    pub fn resume(
        checkpoint: Checkpoint,
        train: Corpus,
        valid: &Corpus,
        device: &Device,
    ) -> Result<Self, String> {
        let state = checkpoint.state;
        for (what, bytes, sum) in [
            ("model", &checkpoint.model, &state.model_sha256),
            ("optimiser", &checkpoint.optim, &state.optim_sha256),
        ] {
            if sum
                .as_ref()
                .is_some_and(|s| *s != crate::model::sha256_hex(bytes))
            {
                return Err(format!(
                    "the checkpoint's {what} weights do not belong to its step {} (saving was \
                     interrupted): start the run again",
                    state.step
                ));
            }
        }
        let model = Performer::from_bytes(&state.config, &checkpoint.model, device)
            .map_err(|e| e.to_string())?;
        let mut session = Self::with_model(model, state.options, train, valid, state.data)?;
        session.trainer.optim = adam(session.options.clip_norm)
            .from_bytes(Bytes::from_bytes_vec(checkpoint.optim))
            .map_err(|e| format!("the optimiser state could not be read: {e}"))?;
        session.trainer.step = state.step;
        session.valid_loss = state.valid_loss;
        Ok(session)
    }

    pub fn step(&self) -> usize {
        self.trainer.step
    }

    /// Replaces the held-out windows (fine-tuning measures on windows of its own length).
    pub fn set_validation(&mut self, batches: Vec<Batch>) {
        self.valid = batches;
    }

    pub fn is_done(&self) -> bool {
        self.trainer.step >= self.options.steps
    }

    pub fn has_validation(&self) -> bool {
        !self.valid.is_empty()
    }

    /// Number of held-out windows.
    pub fn validation_windows(&self) -> usize {
        self.valid.iter().map(Batch::len).sum()
    }

    /// The batch of step `step`: the same for the same seed, however the run was interrupted.
    pub fn batch_at(&self, step: usize) -> Batch {
        // A stream of its own, apart from the model's noise (seeded by `seed + step`).
        let mut rng = StdRng::seed_from_u64(
            (self.options.seed ^ 0x0BA7_C4E5_u64)
                .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                .wrapping_add(step as u64)
                .rotate_left(17),
        );
        self.train.sample(
            self.trainer.model.config.task,
            &self.spec,
            self.options.batch,
            &mut rng,
        )
    }

    /// One optimiser step; returns its loss.
    pub async fn train_step(&mut self) -> Result<f32, TrainError> {
        let batch = self.batch_at(self.trainer.step);
        self.trainer.train_step(&batch).await
    }

    /// The mean loss over the held-out windows (`None` without any).
    pub async fn validate(&mut self) -> Result<Option<f32>, TrainError> {
        if self.valid.is_empty() {
            return Ok(None);
        }
        let (mut sum, mut n) = (0.0f64, 0usize);
        for batch in &self.valid {
            let loss = self.trainer.evaluate(batch).await?;
            sum += loss as f64 * batch.len() as f64;
            n += batch.len();
        }
        let loss = (sum / n as f64) as f32;
        self.valid_loss = Some(loss);
        Ok(Some(loss))
    }

    /// Whether step `step` (just done) is a validation point.
    pub fn validates_after(&self, step: usize) -> bool {
        self.has_validation()
            && (step == self.options.steps
                || (self.options.eval_every > 0 && step.is_multiple_of(self.options.eval_every)))
    }

    /// The run as it stands. Reads every weight synchronously: in the browser on WebGPU, move
    /// the model to the CPU first.
    pub fn checkpoint(&self) -> Result<Checkpoint, ModelError> {
        let model = self.trainer.model.clone().to_bytes()?;
        let optim = self
            .trainer
            .optim
            .into_bytes()
            .map_err(|e| ModelError::Weights(e.to_string()))?
            .to_vec();
        Ok(Checkpoint {
            state: RunState {
                config: self.trainer.model.config.clone(),
                options: self.options.clone(),
                step: self.trainer.step,
                data: self.data.clone(),
                valid_loss: self.valid_loss,
                data_path: None,
                limit: None,
                model_sha256: Some(crate::model::sha256_hex(&model)),
                optim_sha256: Some(crate::model::sha256_hex(&optim)),
            },
            model,
            optim,
        })
    }
}
