//! Model configuration, saved as JSON beside the weights, with presets.

use burn::config::Config;
use serde::{Deserialize, Serialize};

use super::features::FeatureKind;
use super::pe::{PeConfig, PeKind};

/// What the model reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Task {
    /// Rolls in (melody, bridge: onset and sustain planes; with [`Conditioning`], the lanes'
    /// labels and the piano's previous step too), piano onset and sustain out per step.
    Accompaniment,
    /// REMI tokens in, the next token out.
    Continuation,
    /// The melody and bridge per beat with the bar grid and the phrase lane in
    /// ([`BEAT_FEATURES`]), chord-class logits out per beat ([`CHORD_CLASSES`]).
    Harmonization,
    /// The lanes, the melody's step before and the accompaniment's pitch classes in per
    /// sixteenth (`data::melody::MELODY_INPUTS`), one class out: rest, hold or the onset of a
    /// pitch (`data::melody::MELODY_CLASSES`).
    Melody,
}

impl Task {
    /// Whether its inputs are token ids, read through an embedding (else rows of values,
    /// through a linear map): what the model core knows of a kind. Everything else a kind is
    /// (its sizes, windows, loss, what it learns from) is its row of `data/kinds.rs`.
    pub fn reads_tokens(self) -> bool {
        self == Task::Continuation
    }
}

impl std::str::FromStr for Task {
    type Err = String;

    /// The task's name as the CLI, the page and the manifest write it.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "accompaniment" => Ok(Task::Accompaniment),
            "continuation" => Ok(Task::Continuation),
            "harmonization" => Ok(Task::Harmonization),
            "melody" => Ok(Task::Melody),
            _ => Err(format!(
                "unknown task `{s}`: use accompaniment, continuation, harmonization or melody"
            )),
        }
    }
}

/// How attention is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttentionKind {
    /// Causal linear attention through a feature map (the Performer).
    Linear,
    /// Exact causal softmax attention (the quadratic baseline).
    Softmax,
}

/// Which positions attention reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Each position reads itself and the positions before it (every generator; a
    /// harmonizer for live playing).
    Causal,
    /// Each position reads the whole sequence (the harmonizer of a whole melody): one call
    /// per sequence, no step-by-step decoding.
    Bidirectional,
}

/// What an accompaniment model reads at every step besides the melody and bridge rolls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conditioning {
    /// The chord, phrase and bar-position lanes as features ([`LABEL_FEATURES`] per step),
    /// so the lanes a person edits steer the model whatever its positional encoding.
    pub labels: bool,
    /// The piano's previous step (onset and sustain, 2 × 128): the model is autoregressive in
    /// the piano part (teacher forcing in training, one recurrent step at a time when
    /// generating), so it knows what it just played.
    pub piano: bool,
    /// Steps by which the melody roll is read late: step `t` reads the melody of step
    /// `t − melody_lag` (the bridge and the lanes stay on time). 0 for a model that hears the
    /// melody note it accompanies; 1 for a live accompanist, which must decide a sixteenth's
    /// notes before the player's note at that sixteenth is heard.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub melody_lag: u8,
    /// The reference lane: at a step of a phrase the lane repeats, the piano of the step it
    /// answers in the phrase's first occurrence (or in a donor's bars), onset and sustain
    /// (2 × 128), and two flags (there is one; the chord under the two differs). The model
    /// learns from the training songs' own repeats how literally a pianist returns to it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub reference: bool,
}

fn is_zero(v: &u8) -> bool {
    *v == 0
}

fn is_false(v: &bool) -> bool {
    !*v
}

impl Conditioning {
    /// Labels and the previous piano step: the product's accompaniment.
    pub const AUTOREGRESSIVE: Conditioning = Conditioning {
        labels: true,
        piano: true,
        melody_lag: 0,
        reference: false,
    };

    /// As [`Conditioning::AUTOREGRESSIVE`], reading the melody `lag` steps late (live playing).
    pub const fn lagged(lag: u8) -> Conditioning {
        Conditioning {
            melody_lag: lag,
            ..Self::AUTOREGRESSIVE
        }
    }

    /// As [`Conditioning::AUTOREGRESSIVE`], with the reference lane.
    pub const REFERENCE: Conditioning = Conditioning {
        reference: true,
        ..Self::AUTOREGRESSIVE
    };
}

#[derive(Config, Debug, PartialEq)]
pub struct PerformerConfig {
    pub task: Task,
    /// Inputs per step: the token vocabulary (continuation) or roll features (accompaniment).
    pub input_dim: usize,
    /// Outputs per step: the vocabulary, or 2 × 128 piano onset and sustain logits.
    pub output_dim: usize,
    pub d_model: usize,
    pub layers: usize,
    pub heads: usize,
    pub d_head: usize,
    pub d_ff: usize,
    /// Random features per head (FAVOR+ needs an even number).
    #[config(default = 64)]
    pub features: usize,
    #[config(default = "FeatureKind::Favor")]
    pub feature_kind: FeatureKind,
    #[config(default = "AttentionKind::Linear")]
    pub attention: AttentionKind,
    #[config(default = "PeConfig::new(PeKind::SineSpe)")]
    pub pe: PeConfig,
    /// Positions per chunk of the parallel causal linear attention.
    #[config(default = 128)]
    pub chunk: usize,
    /// Accompaniment: the lanes and the previous piano step as inputs (`None`: melody and
    /// bridge rolls only, the F-StrIPE paper's setting and the first shipped models).
    pub conditioning: Option<Conditioning>,
    /// Which positions attention reads (`None`: causal, as every model before the harmonizer).
    pub direction: Option<Direction>,
}

/// Roll features per step for accompaniment: melody and bridge, onset and sustain, 128 each.
pub const ACCOMPANIMENT_INPUTS: usize = 4 * 128;
/// Piano onset and sustain logits per step.
pub const ACCOMPANIMENT_OUTPUTS: usize = 2 * 128;

impl PerformerConfig {
    /// The tiny shape (a few thousand parameters, for tests and quick runs) for `task` with
    /// `input_dim` values in and `output_dim` out per position.
    pub fn tiny_sized(task: Task, input_dim: usize, output_dim: usize, pe: PeConfig) -> Self {
        let mut pe = pe;
        pe.realizations = 16;
        pe.sines = 3;
        pe.taps = 8;
        Self::new(task, input_dim, output_dim, 32, 2, 2, 16, 64)
            .with_features(16)
            .with_pe(pe)
            .with_chunk(16)
    }

    /// The shape shipped to the page (4 layers, 4 heads of 32, d_model 128) for `task` with
    /// `input_dim` values in and `output_dim` out per position.
    pub fn small_sized(task: Task, input_dim: usize, output_dim: usize, pe: PeConfig) -> Self {
        let mut pe = pe;
        pe.realizations = 32;
        Self::new(task, input_dim, output_dim, 128, 4, 4, 32, 512)
            .with_features(64)
            .with_pe(pe)
    }

    /// Whether attention reads only the past (every model but a whole-melody harmonizer).
    pub fn is_causal(&self) -> bool {
        self.direction != Some(Direction::Bidirectional)
    }

    /// Whether accompaniment is generated one step at a time from the piano written so far.
    pub fn is_autoregressive(&self) -> bool {
        self.task == Task::Accompaniment && self.conditioning.is_some_and(|c| c.piano)
    }

    /// Whether the chord and phrase lanes reach the model (as inputs or through F-StrIPE).
    pub fn reads_lanes(&self) -> bool {
        self.conditioning.is_some_and(|c| c.labels) || self.pe.is_structural()
    }

    /// Checks that the sizes fit together, in words.
    pub fn validate(&self) -> Result<(), String> {
        if self.d_model == 0 || self.layers == 0 || self.heads == 0 || self.d_head == 0 {
            return Err("d_model, layers, heads and d_head must be positive".into());
        }
        if self.attention == AttentionKind::Linear
            && self.feature_kind == FeatureKind::Favor
            && (self.features == 0 || self.features % 2 == 1)
        {
            return Err(format!(
                "FAVOR+ needs an even, positive number of features, not {}",
                self.features
            ));
        }
        if self.attention == AttentionKind::Linear && self.features == 0 {
            return Err("a feature map needs at least one feature".into());
        }
        crate::model::pe::Kernel::check(&self.pe)?;
        if self.pe.acts_on_attention() && self.pe.realizations == 0 {
            return Err("SPE needs at least one realization".into());
        }
        if !self.is_causal() && self.attention == AttentionKind::Softmax {
            return Err("bidirectional attention is linear only".into());
        }
        if !self.is_causal() && self.task != Task::Harmonization {
            return Err("only a harmonizer reads its whole sequence at once".into());
        }
        if self.task == Task::Melody
            && self
                .pe
                .structure_levels()
                .contains(&crate::model::pe::StructureLevel::Melody)
        {
            return Err(
                "a melody model writes the melody, so F-StrIPE cannot read it in its positions:                  use the phrase, phrase_bar, position, chord and time levels"
                    .into(),
            );
        }
        if self.input_dim == 0 || self.output_dim == 0 {
            return Err("input and output sizes must be positive".into());
        }
        // A config is also what a model file brings: sizes far beyond any model this app can
        // run are refused before anything is allocated (a forged file would otherwise ask the
        // page for terabytes).
        let p = &self.pe;
        for (name, value, most) in [
            ("input_dim", self.input_dim, LIMIT_WIDTH),
            ("output_dim", self.output_dim, LIMIT_WIDTH),
            ("d_model", self.d_model, LIMIT_WIDTH),
            ("d_ff", self.d_ff, 4 * LIMIT_WIDTH),
            ("d_head", self.d_head, LIMIT_WIDTH),
            ("layers", self.layers, 64),
            ("heads", self.heads, 64),
            ("features", self.features, LIMIT_WIDTH),
            ("chunk", self.chunk, LIMIT_WIDTH),
            ("realizations", p.realizations, 1024),
            ("sines", p.sines, 256),
            ("taps", p.taps, LIMIT_WIDTH),
        ] {
            if value > most {
                return Err(format!(
                    "{name} is {value}, more than this app runs ({most} at most)"
                ));
            }
        }
        if self.numbers() > LIMIT_NUMBERS {
            return Err(format!(
                "the model would hold about {} million numbers, more than this app runs ({} \
                 million at most)",
                self.numbers() / 1_000_000,
                LIMIT_NUMBERS / 1_000_000
            ));
        }
        Ok(())
    }

    /// About how many numbers the model and one sequence's draw hold (its weights, the feature
    /// maps, the codes' noise): an upper estimate, for [`Self::validate`].
    pub fn numbers(&self) -> u128 {
        let n = |v: usize| v as u128;
        let (d, h, dh, p) = (n(self.d_model), n(self.heads), n(self.d_head), &self.pe);
        let qk = n(p.realizations).max(dh * (2 * n(p.sines) + 1));
        let per_layer = 4 * d * h * dh + 2 * d * n(self.d_ff) + h * qk * n(self.features);
        (n(self.input_dim) + n(self.output_dim)) * d
            + n(self.layers) * per_layer
            + 2 * h * dh * n(p.taps)
            + h * dh * 2 * n(p.sines) * n(p.realizations)
    }
}

/// The widest size a config may give (see [`PerformerConfig::validate`]).
const LIMIT_WIDTH: usize = 4096;
/// The most numbers a model may hold (`PerformerConfig::numbers`): 512 MiB of f32.
const LIMIT_NUMBERS: u128 = 1 << 27;
