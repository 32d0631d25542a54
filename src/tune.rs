//! Fine-tuning a trained model on a person's own pieces: what the page's Fine-tune panel runs
//! in its Worker (WebGPU or the CPU), and what the tests run natively.
//!
//! Each file becomes a training piece with the labels the person sees in the lanes (chords and
//! phrases as shown, the melody track as chosen). The last bars of every file are held out, so
//! the curve shows how the model does on music of theirs it does not train on. The loop is the
//! training loop ([`Session`]), with a watch for divergence: a step whose loss is not finite or
//! explodes stops the run and puts back the weights of the last good step.

use burn::module::Module;
use serde::{Deserialize, Serialize};

use crate::data::corpus::{Corpus, WindowSpec};
use crate::model::config::Task;
use crate::model::performer::Performer;
use crate::music::piece::Piece;
use crate::train::session::{RunOptions, Session};
use crate::train::step::TrainError;

mod files;
use files::prepare;
pub use files::{FileReport, inspect};

/// Most files one run reads.
pub const MAX_FILES: usize = 50;
/// A batch loss this many times the lowest seen so far counts as an explosion.
pub const EXPLOSION: f32 = 4.0;

/// Which weights train.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trainable {
    /// Every weight.
    All,
    /// The last `top_layers` blocks, the output head and the positional encoding.
    Top,
}

/// A run's settings, as the panel sends them (camelCase JSON; absent fields take defaults).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TuneOptions {
    pub steps: usize,
    pub learning_rate: f64,
    /// Windows per step.
    pub batch: usize,
    /// Grid steps (accompaniment) or tokens (continuation) per window; 0: the task's default.
    pub window: usize,
    pub trainable: Trainable,
    /// With [`Trainable::Top`]: how many of the last blocks train.
    pub top_layers: usize,
    /// Share of every file's bars, at its end, held out to measure progress.
    pub holdout: f64,
    pub seed: u64,
    /// Measure the held-out loss every this many steps (and before the first and after the
    /// last).
    pub eval_every: usize,
    /// Accompaniment: the loss weight of sounding notes (`None`: the base model's).
    pub pos_weight: Option<f64>,
}

impl Default for TuneOptions {
    /// Defaults that work for about five songs: 100 steps of 4 windows at a low learning rate
    /// (a tenth of pre-training's peak), every weight training.
    fn default() -> Self {
        Self {
            steps: 100,
            learning_rate: 1e-4,
            batch: 4,
            window: 0,
            trainable: Trainable::All,
            top_layers: 1,
            holdout: 0.2,
            seed: 0,
            eval_every: 10,
            pos_weight: None,
        }
    }
}

impl TuneOptions {
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=20_000).contains(&self.steps) {
            return Err(format!(
                "the number of steps must be between 1 and 20 000, not {}",
                self.steps
            ));
        }
        if !(self.learning_rate > 0.0 && self.learning_rate <= 0.01) {
            return Err(format!(
                "the learning rate must be above 0 and at most 0.01, not {}",
                self.learning_rate
            ));
        }
        if !(1..=64).contains(&self.batch) {
            return Err("windows per step must be between 1 and 64".into());
        }
        if self.window != 0 && !(16..=4096).contains(&self.window) {
            return Err("windows must be 16 to 4 096 steps or tokens long".into());
        }
        if !(0.0..=0.5).contains(&self.holdout) {
            return Err("the held-out share must be between 0 and one half".into());
        }
        if self.trainable == Trainable::Top && self.top_layers == 0 {
            return Err("train at least one layer".into());
        }
        Ok(())
    }

    /// The window length asked for (the task's default when 0): 8 bars of sixteenths for the
    /// accompaniment and the melody, 32 bars of beats for the harmonizer, 256 tokens for the
    /// continuation.
    pub fn window_for(&self, task: Task) -> usize {
        match self.window {
            0 => task.tune_window(),
            w => w,
        }
    }
}

/// The report of one step.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepReport {
    /// Steps done.
    pub step: usize,
    pub steps: usize,
    /// This step's training loss (before its update).
    pub loss: f32,
    pub learning_rate: f64,
    /// The held-out loss, when this step measured it.
    pub valid_loss: Option<f32>,
}

/// Why a run stopped by itself.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TuneError {
    #[error("{0}")]
    Setup(String),
    #[error(
        "training diverged at step {step} (the loss became {loss}); the weights of step {restored} \
         are back. Try a lower learning rate, or train only the last layers"
    )]
    Diverged {
        step: usize,
        loss: f32,
        restored: usize,
    },
    #[error("training stopped: {0}")]
    Failed(String),
    #[error("the run is finished")]
    Finished,
}

/// Where a run stood after a step, with its weights read out (asynchronously, so it works on
/// WebGPU): the page keeps the last one while fine-tuning runs on a GPU, so a lost device
/// costs no steps — the run goes on on the CPU from here ([`FineTune::restore`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    pub step: usize,
    pub losses: Vec<(usize, f32)>,
    pub valid_losses: Vec<(usize, f32)>,
    /// The lowest training loss so far (none before the first step).
    pub lowest: Option<f32>,
}

/// A fine-tuning run of a model on a person's pieces.
pub struct FineTune {
    session: Session,
    /// The blocks that train (`None`: all), as [`Performer::trainable_top`] takes them.
    top: Option<usize>,
    /// The model of the last step whose loss was sound, and its step.
    last_good: (Performer, usize),
    lowest: f32,
    pub files: Vec<FileReport>,
    /// Training and held-out losses so far: (step, loss).
    pub losses: Vec<(usize, f32)>,
    pub valid_losses: Vec<(usize, f32)>,
    /// Set once a run diverged: it cannot go on.
    stopped: bool,
    /// Windows used for training and validation.
    pub window: usize,
    pub valid_window: usize,
}

impl FineTune {
    /// A run from `base` (on an autodiff device) over `pieces`. Files that cannot be used are
    /// listed with their reason in the error when none can.
    pub fn new(
        base: Performer,
        pieces: &[Piece],
        options: &TuneOptions,
    ) -> Result<Self, TuneError> {
        options.validate().map_err(TuneError::Setup)?;
        if pieces.is_empty() {
            return Err(TuneError::Setup(
                "add at least one MIDI file to learn from".into(),
            ));
        }
        if pieces.len() > MAX_FILES {
            return Err(TuneError::Setup(format!(
                "at most {MAX_FILES} files can be used at once, not {}",
                pieces.len()
            )));
        }
        let task = base.config.task;
        let (mut train, mut valid, mut files) = (Corpus::default(), Corpus::default(), vec![]);
        for piece in pieces {
            match prepare(piece, task, options.holdout) {
                Ok(p) => {
                    files.push(p.report);
                    train.pieces.push(p.train);
                    valid.pieces.extend(p.held_out);
                }
                Err(report) => files.push(report),
            }
        }
        if train.pieces.is_empty() {
            let reasons: Vec<String> = files
                .iter()
                .map(|f| format!("{}: {}", f.name, f.problem.as_deref().unwrap_or("unusable")))
                .collect();
            return Err(TuneError::Setup(format!(
                "none of the files can be used: {}",
                reasons.join("; ")
            )));
        }
        // Windows no longer than the music there is.
        let longest =
            |c: &Corpus| -> usize { c.pieces.iter().map(|p| task.longest(p)).max().unwrap_or(0) };
        let asked = options.window_for(task);
        let window = asked.min(longest(&train));
        if window < 16 {
            return Err(TuneError::Setup(format!(
                "the files are too short to learn from: the longest gives {window} {}, at least \
                 16 are needed",
                task.unit()
            )));
        }
        let valid_window = asked.min(longest(&valid));
        let pos_weight = options.pos_weight.unwrap_or(1.0);
        let run = RunOptions {
            steps: options.steps,
            batch: options.batch,
            window,
            peak_lr: options.learning_rate,
            warmup: (options.steps / 10).min(20),
            final_ratio: 0.1,
            clip_norm: 1.0,
            pos_weight,
            pe_lr_scale: 1.0,
            max_shift: 5,
            chord_noise: 0.0,
            seed: options.seed,
            eval_every: options.eval_every,
            eval_windows: 32,
        };
        let top = (options.trainable == Trainable::Top).then_some(options.top_layers);
        let model = base.trainable_top(top);
        let last_good = (model.clone(), 0);
        let names: Vec<&str> = pieces.iter().map(|p| p.name.as_str()).collect();
        let mut session = Session::with_model(
            model,
            run,
            train,
            &Corpus::default(),
            format!("{} of your files ({})", names.len(), names.join(", ")),
        )
        .map_err(TuneError::Setup)?;
        if valid_window >= 16 {
            let spec = WindowSpec {
                len: valid_window,
                max_shift: 0,
                ..session.spec.clone()
            };
            session.set_validation(valid.fixed_windows(task, &spec, 1, 32, options.batch));
        }
        Ok(Self {
            session,
            top,
            last_good,
            lowest: f32::INFINITY,
            files,
            losses: Vec::new(),
            valid_losses: Vec::new(),
            stopped: false,
            window,
            valid_window: if valid_window >= 16 { valid_window } else { 0 },
        })
    }

    pub fn step(&self) -> usize {
        self.session.step()
    }

    pub fn steps(&self) -> usize {
        self.session.options.steps
    }

    pub fn is_done(&self) -> bool {
        self.stopped || self.session.is_done()
    }

    /// Held-out windows measured at each validation.
    pub fn validation_windows(&self) -> usize {
        self.session.validation_windows()
    }

    /// The model as trained so far (on the autodiff device; after a divergence, the last good
    /// weights).
    pub fn model(&self) -> &Performer {
        &self.session.trainer.model
    }

    /// The held-out loss of the model as it is now (`None` without held-out windows).
    pub async fn validate(&mut self) -> Result<Option<f32>, TuneError> {
        let loss = self
            .session
            .validate()
            .await
            .map_err(|e| TuneError::Failed(e.to_string()))?;
        if let Some(l) = loss {
            let step = self.step();
            self.valid_losses.retain(|&(s, _)| s != step);
            self.valid_losses.push((step, l));
        }
        Ok(loss)
    }

    /// One optimiser step (measuring the held-out loss when it is due). A loss that is not
    /// finite, or explodes past [`EXPLOSION`] times the lowest so far, stops the run and puts
    /// back the last good weights.
    pub async fn train_step(&mut self) -> Result<StepReport, TuneError> {
        if self.is_done() {
            return Err(TuneError::Finished);
        }
        let step = self.step();
        let before = self.session.trainer.model.clone();
        let learning_rate = self.session.options.schedule().lr(step);
        let loss = match self.session.train_step().await {
            Ok(loss) => loss,
            Err(TrainError::Diverged(loss)) => return Err(self.diverged(step, loss)),
            Err(e) => return Err(TuneError::Failed(e.to_string())),
        };
        if loss > EXPLOSION * self.lowest && step >= 3 {
            return Err(self.diverged(step, loss));
        }
        self.lowest = self.lowest.min(loss);
        self.last_good = (before, step);
        self.losses.push((step + 1, loss));
        let done = step + 1;
        let valid_loss = if self.session.validates_after(done) {
            self.validate().await?
        } else {
            None
        };
        Ok(StepReport {
            step: done,
            steps: self.steps(),
            loss,
            learning_rate,
            valid_loss,
        })
    }

    /// The run as it stands (its weights as model-file bytes) for [`Self::restore`].
    pub async fn snapshot(&self) -> Result<(Progress, Vec<u8>), TuneError> {
        let weights = self
            .model()
            .to_bytes_async()
            .await
            .map_err(|e| TuneError::Failed(e.to_string()))?;
        let progress = Progress {
            step: self.step(),
            losses: self.losses.clone(),
            valid_losses: self.valid_losses.clone(),
            lowest: self.lowest.is_finite().then_some(self.lowest),
        };
        Ok((progress, weights))
    }

    /// Goes on from a [`Self::snapshot`] of a run with the same base, files and settings (one
    /// that ran on a device now lost): its weights, step and losses. The optimiser's moments
    /// start again (they stayed on the lost device); the schedule and the batches follow the
    /// step, so the run reads what it would have read.
    pub fn restore(&mut self, progress: Progress, weights: &[u8]) -> Result<(), TuneError> {
        if progress.step > self.steps() {
            return Err(TuneError::Setup(format!(
                "the saved run is at step {}, past this run's {} steps",
                progress.step,
                self.steps()
            )));
        }
        let model = self.model();
        let (config, device) = (model.config.clone(), model.devices()[0].clone());
        let model = Performer::from_bytes(&config, weights, &device)
            .map_err(|e| TuneError::Setup(format!("the saved weights are not readable: {e}")))?
            .trainable_top(self.top);
        self.session.trainer.model = model.clone();
        self.session.trainer.step = progress.step;
        self.last_good = (model, progress.step);
        self.lowest = progress.lowest.unwrap_or(f32::INFINITY);
        self.losses = progress.losses;
        self.valid_losses = progress.valid_losses;
        Ok(())
    }

    fn diverged(&mut self, step: usize, loss: f32) -> TuneError {
        let (model, restored) = self.last_good.clone();
        self.session.trainer.model = model;
        self.session.trainer.step = restored;
        self.stopped = true;
        TuneError::Diverged {
            step: step + 1,
            loss,
            restored,
        }
    }

    /// The learning rate can be changed before a run or after a divergence was explained; for
    /// tests, a way to make one happen.
    pub fn set_learning_rate(&mut self, lr: f64) {
        self.session.options.peak_lr = lr;
        self.session.trainer.schedule = self.session.options.schedule();
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;
