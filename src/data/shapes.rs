//! The shapes of the models of each task: how many values a model reads and writes per
//! position, from what the feeding layer writes (the rolls, the lanes' [`LABEL_FEATURES`], a
//! harmonizer's [`BeatInputs`], the token vocabulary), and the presets at those sizes. The
//! model core knows the sizes as numbers only (`PerformerConfig::tiny_sized`).

pub use super::beats::BEAT_FEATURES;
use super::beats::BeatInputs;
pub use super::example::REFERENCE_INPUTS;
pub use super::features::LABEL_FEATURES;
pub use super::melody::{MELODY_CLASSES, MELODY_INPUTS};
use crate::model::config::{
    ACCOMPANIMENT_INPUTS, ACCOMPANIMENT_OUTPUTS, Conditioning, Direction, PerformerConfig, Task,
};
use crate::model::pe::{PeConfig, PeKind};
pub use crate::music::harmony::CHORD_CLASSES;
use crate::music::tokens::VOCAB_SIZE;

impl Conditioning {
    /// Extra input features per step.
    pub fn extra_inputs(self) -> usize {
        self.labels as usize * LABEL_FEATURES
            + self.piano as usize * ACCOMPANIMENT_OUTPUTS
            + self.reference as usize * REFERENCE_INPUTS
    }

    /// Where the reference lane starts in a row, if the model reads one.
    pub fn reference_offset(self) -> Option<usize> {
        self.reference.then(|| {
            ACCOMPANIMENT_INPUTS
                + self.labels as usize * LABEL_FEATURES
                + self.piano as usize * ACCOMPANIMENT_OUTPUTS
        })
    }
}

impl PerformerConfig {
    fn for_task(task: Task, vocab: usize) -> (usize, usize) {
        Self::sizes(task, vocab, None)
    }

    /// Inputs and outputs per step of a `task` model (its kind's, `data/kinds`).
    pub fn sizes(task: Task, vocab: usize, conditioning: Option<Conditioning>) -> (usize, usize) {
        task.sizes(vocab, conditioning)
    }

    /// What a harmonizer reads per beat: its input width says whether it reads the context
    /// (the first shipped harmonizer did not), its direction how far.
    pub fn beat_inputs(&self) -> BeatInputs {
        BeatInputs::of_width(self.input_dim, self.is_causal()).unwrap_or_default()
    }

    /// This config with `conditioning` (accompaniment), its input size to match.
    pub fn with_inputs(mut self, conditioning: Option<Conditioning>) -> Self {
        if self.task.conditioned() {
            self.conditioning = conditioning;
            self.input_dim = Self::sizes(self.task, 0, conditioning).0;
        }
        self
    }

    /// A few thousand parameters: for tests and quick runs.
    pub fn tiny(task: Task, vocab: usize, pe: PeConfig) -> Self {
        let (i, o) = Self::for_task(task, vocab);
        Self::tiny_sized(task, i, o, pe)
    }

    /// The size shipped to the page: 4 layers, 4 heads of 32, d_model 128.
    pub fn small(task: Task, vocab: usize, pe: PeConfig) -> Self {
        let (i, o) = Self::for_task(task, vocab);
        Self::small_sized(task, i, o, pe)
    }

    /// The harmonizer's size (about 0.4 M parameters, under 2 MB): 3 layers, 4 heads of 32,
    /// d_model 128, reading the whole melody (`Bidirectional`) or only up to the current beat.
    pub fn harmonizer(pe: PeConfig, direction: Direction) -> Self {
        let (i, o) = Self::sizes(Task::Harmonization, 0, None);
        let mut pe = pe;
        pe.realizations = 32;
        Self::new(Task::Harmonization, i, o, 128, 3, 4, 32, 256)
            .with_features(32)
            .with_pe(pe)
            .with_direction(Some(direction))
    }

    /// The melody model's size (about 0.4 M parameters, under 2 MB): the harmonizer's, causal
    /// (a melody is written a sixteenth at a time).
    pub fn melody(pe: PeConfig) -> Self {
        let (i, o) = Self::sizes(Task::Melody, 0, None);
        let mut pe = pe;
        pe.realizations = 32;
        Self::new(Task::Melody, i, o, 128, 3, 4, 32, 256)
            .with_features(32)
            .with_pe(pe)
    }

    /// The decode benchmark's headline size: the token vocabulary, d_model 256, 4 layers, 4
    /// heads × 64, R = 64, 128 FAVOR+ features, gated sineSPE with K = 5 and one shared code.
    pub fn bench() -> Self {
        let pe = PeConfig::new(PeKind::SineSpe).with_gate(true);
        let vocab = VOCAB_SIZE;
        Self::new(Task::Continuation, vocab, vocab, 256, 4, 4, 64, 1024)
            .with_features(128)
            .with_pe(pe)
    }

    /// Checks that the input and output sizes are those of the task: 512 roll features (plus
    /// the conditioning's) in and 256 logits out for accompaniment, the vocabulary `vocab`
    /// both ways for continuation.
    pub fn validate_for(&self, vocab: usize) -> Result<(), String> {
        self.validate()?;
        if !self.task.conditioned() && self.conditioning.is_some() {
            return Err(format!(
                "a {:?} model takes no accompaniment conditioning",
                self.task
            ));
        }
        let (i, o) = Self::sizes(self.task, vocab, self.conditioning);
        // A harmonizer reads its beats with or without the context (the first shipped one
        // without).
        let i = self.task.input_width(self, i);
        if (self.input_dim, self.output_dim) != (i, o) {
            return Err(format!(
                "a {:?} model reads {i} and writes {o} values per step, but this config says {} \
                 and {}",
                self.task, self.input_dim, self.output_dim
            ));
        }
        Ok(())
    }
}
