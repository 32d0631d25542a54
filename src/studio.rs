//! What the page does with a piece and a model, written once for the Worker, the CLI and
//! native tests: chords for the piece's melody (the harmonizer), an accompaniment for its
//! melody, a continuation after its end, a melody for its lanes, and a live take (the piano
//! accompanying a melody as it is played), streamed (notes and attention as they are computed,
//! cancellable) and put back into the piece. Every generation task is one row of the table
//! below ([`family`] says how a task joins it).

use serde::{Deserialize, Serialize};

use crate::generate::binarize::Binarize;
use crate::generate::{AttentionRows, GenerateError, Length, PianoSampling, Sampling, Watch};
use crate::music::piece::PieceNote;
use crate::music::texture::donor::Donor;

/// Name of the track an accompaniment is written to.
pub const ACCOMPANIMENT_TRACK: &str = "PIANO";
/// Name of the track a continuation is written to.
pub const CONTINUATION_TRACK: &str = "CONTINUATION";

/// How to generate, for the page and the CLI alike: both fill one of these, [`Options::check`]
/// says in words what is wrong with it, and the model's own defaults (chosen on validation
/// data) fill what is left `None`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Options {
    pub seed: u64,
    /// Accompaniment: note threshold (else the model's, chosen on validation data). A model
    /// that writes step by step draws its notes unless one is given.
    pub threshold: Option<f32>,
    /// Step-by-step accompaniment: the sampling temperature (else the model's).
    pub piano_temperature: Option<f32>,
    /// Step-by-step accompaniment: the temperature of the draws that decide whether a sounding
    /// note is held (else the model's).
    pub hold_temperature: Option<f32>,
    /// Accompaniment: steps computed between two progress reports.
    pub chunk_steps: usize,
    /// Rewrite bars `from .. to` only (0-based, `to` excluded). Accompaniment: the piano
    /// there, keeping it elsewhere (the generated track, else the pianist's) and the melody
    /// everywhere; a model that writes step by step continues from the piano before the first
    /// of them. Continuation: every note starting in them, written anew into the
    /// CONTINUATION track from the music before them; the model writes exactly these bars
    /// (stopping where the kept music resumes) with the chords planned in their lanes, but,
    /// reading left to right, it cannot hear the bars after them.
    pub region: Option<[usize; 2]>,
    /// Continuation and melody: the sampling temperature (else the model's, chosen on
    /// validation songs: for a continuation by the plan-following panel; 1 where none was
    /// chosen).
    pub temperature: Option<f32>,
    pub top_p: f32,
    /// Continuation: how strongly a bar the phrase lane marks as a repeat leans towards its
    /// phrase's first occurrence (see [`Sampling::echo`]; `None`: the default, chosen on
    /// validation songs; 0: not at all).
    pub echo: Option<f32>,
    /// How busy the new notes are. Continuation: notes a beat as a multiple of the music before
    /// them, on every new bar ([`Sampling::density`]; `None`: [`crate::generate::DEFAULT_DENSITY`],
    /// the prompt's pace, on bars whose chords nobody planned); step-by-step accompaniment: about this many times the onsets the model would play
    /// ([`PianoSampling::density`]; `None`: as the model plays).
    pub density: Option<f32>,
    /// Continuation: how strongly unplanned new bars keep the pitch classes of the music
    /// before them ([`Sampling::key`]; `None`: [`crate::generate::DEFAULT_KEY`]; 0: as the
    /// model plays). Planned bars follow their chords.
    pub key: Option<f32>,
    /// Continuation: new bars (`None`: as many as `tokens` holds), and the most tokens to add,
    /// a safety limit (`None`: [`TOKENS_A_BAR`] a bar asked, [`MAX_TOKENS`] at most; 512
    /// without bars).
    pub tokens: Option<usize>,
    pub bars: Option<usize>,
    pub may_end: bool,
    /// Continuation: the prompt's last this-many tokens are read (trained on 256-token windows,
    /// the shipped models stay flat to about 4 times that).
    pub max_prompt_tokens: usize,
    /// Continuation: the most tokens the model reads at once (see [`Length::context`]; `None`:
    /// all of them).
    pub context: Option<usize>,
    /// Melody: the temperature of a new note's pitch (else the model's; the rhythm's is
    /// `temperature`).
    pub pitch_temperature: Option<f32>,
    /// Melody: the lowest and highest pitch it may sing (MIDI numbers; `None`: C3–C6).
    pub melody_range: Option<[u8; 2]>,
    /// Alternatives to write (1–8; `None`: 1), the k-th (from 0) with seed `seed + k`, so each
    /// is the piece that seed writes alone: the step-by-step accompaniment writes them
    /// together (one batched step for all on the CPU), the others one after another.
    pub alternatives: Option<usize>,
    /// Step-by-step accompaniment: how strongly a phrase the lane repeats plays like its first
    /// occurrence (the texture echo: its rhythm in each register, re-voiced to the chords
    /// under it), as a multiple of the lean the training songs' pianists justify (`None`: 1
    /// where the model has one; 0: not at all).
    pub texture_echo: Option<f32>,
    /// Step-by-step accompaniment: a texture to play like, a gallery texture or bars a person
    /// chose ([`Donor`]): the bars written (the region's, else every bar) cycle through its bars,
    /// its rhythm in its registers over their own chords and melody, at the texture echo's
    /// strength. `None`: a phrase the lane repeats plays like its first occurrence.
    pub texture: Option<Donor>,
    /// The attention to capture while generating.
    pub watch: Option<WatchOptions>,
    /// Accompaniment: the velocity model that gives the written piano its dynamics (the
    /// Session's or the CLI's, never read from JSON); without one every note has one velocity.
    #[serde(skip)]
    pub dynamics: Option<std::rc::Rc<crate::music::dynamics::Dynamics>>,
    /// Accompaniment and continuation: the sustain pedal of the bars written ([`PedalMode`];
    /// learnt by default).
    pub pedal: PedalMode,
    /// The learnt pedal (the Session's or the CLI's, never read from JSON); without one a
    /// learnt pedal writes none.
    #[serde(skip)]
    pub pedal_model: Option<std::rc::Rc<crate::music::pedal::model::PedalModel>>,
}

/// The sustain pedal of the bars a model writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PedalMode {
    /// The pedal model's, over the bars written (the rest keep theirs).
    #[default]
    Learnt,
    /// The pedal as the piano part already had it (a file's pianist; none for new bars).
    Played,
    /// None over the bars written.
    Off,
}

/// A setting out of its range: which one (`field`, its name in the JSON of [`Options`]) and
/// why, in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadOption {
    pub field: &'static str,
    pub message: String,
}

impl std::fmt::Display for BadOption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<BadOption> for GenerateError {
    fn from(bad: BadOption) -> Self {
        GenerateError::Read(bad.message)
    }
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct WatchOptions {
    pub layer: usize,
    pub head: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            seed: limits::default("seed").unwrap_or(0.0) as u64,
            threshold: None,
            piano_temperature: None,
            hold_temperature: None,
            chunk_steps: 64,
            region: None,
            temperature: None,
            top_p: limits::default("topP").unwrap_or(0.95) as f32,
            echo: None,
            density: None,
            key: None,
            tokens: limits::default("tokens").map(|t| t as usize),
            bars: limits::default("bars").map(|b| b as usize),
            may_end: false,
            max_prompt_tokens: 1024,
            context: None,
            pitch_temperature: None,
            melody_range: None,
            alternatives: None,
            texture_echo: None,
            texture: None,
            watch: None,
            dynamics: None,
            pedal: PedalMode::Learnt,
            pedal_model: None,
        }
    }
}

impl Options {
    /// How many alternatives to write.
    pub fn count(&self) -> usize {
        self.alternatives.unwrap_or(1).max(1)
    }

    /// These options for alternative `k` (from 0): its seed, `seed + k` (past the largest
    /// seed, counting on from 0).
    pub fn alternative(&self, k: usize) -> Self {
        Self {
            seed: (self.seed + k as u64) % (1 << 32),
            alternatives: None,
            ..self.clone()
        }
    }

    fn watch(&self) -> Option<Watch> {
        self.watch.map(|w| Watch {
            layer: w.layer,
            head: w.head,
        })
    }

    /// What is wrong with these settings, in words, and which setting it is (the generators
    /// call it first; the CLI names its flag).
    pub fn check(&self) -> Result<(), BadOption> {
        let numbers = [
            ("seed", Some(self.seed as f64)),
            ("threshold", self.threshold.map(f64::from)),
            ("pianoTemperature", self.piano_temperature.map(f64::from)),
            ("holdTemperature", self.hold_temperature.map(f64::from)),
            ("temperature", self.temperature.map(f64::from)),
            ("topP", Some(f64::from(self.top_p))),
            ("echo", self.echo.map(f64::from)),
            ("density", self.density.map(f64::from)),
            ("key", self.key.map(f64::from)),
            ("tokens", self.tokens.map(|t| t as f64)),
            ("bars", self.bars.map(|b| b as f64)),
            ("context", self.context.map(|c| c as f64)),
            ("alternatives", self.alternatives.map(|k| k as f64)),
            ("textureEcho", self.texture_echo.map(f64::from)),
        ];
        for (key, value) in numbers {
            let limit = limits::limit(key);
            if let Some(v) = value
                && let Err(message) = limit.check(v)
            {
                return Err(BadOption {
                    field: limit.key.as_str(),
                    message,
                });
            }
        }
        if let Some([from, to]) = self.region
            && from >= to
        {
            return Err(BadOption {
                field: "region",
                message: "choose at least one bar to regenerate".into(),
            });
        }
        if let Some(Err(message)) = self.texture.as_ref().map(Donor::check) {
            return Err(BadOption {
                field: "texture",
                message,
            });
        }
        Ok(())
    }

    /// How an accompaniment's probabilities become notes: the model's rule (`model`, chosen on
    /// validation data), with the threshold given here if any.
    pub fn binarize(&self, model: Option<Binarize>) -> Binarize {
        let mut b = model.unwrap_or_default();
        if let Some(t) = self.threshold {
            b.threshold = t;
        }
        b
    }

    /// How a step-by-step accompaniment draws its notes: the temperatures given here, else the
    /// model's (`model`), and the threshold when one is given.
    pub fn piano_sampling(&self, model: PianoSampling) -> PianoSampling {
        PianoSampling {
            temperature: self.piano_temperature.unwrap_or(model.temperature),
            threshold: self.threshold,
            hold_temperature: self.hold_temperature.unwrap_or(model.hold_temperature),
            seed: self.seed,
            density: self.density.unwrap_or(1.0),
        }
    }

    /// How a continuation draws its tokens.
    pub fn sampling(&self) -> Sampling {
        Sampling {
            temperature: self.temperature.unwrap_or(1.0),
            top_p: self.top_p,
            seed: self.seed,
            echo: self.echo.unwrap_or(crate::generate::DEFAULT_ECHO),
            // The prompt's pace on unplanned bars unless asked otherwise, then on every bar
            // (chosen on validation songs).
            density: Some(self.density.unwrap_or(crate::generate::DEFAULT_DENSITY)),
            density_on_plan: self.density.is_some(),
            // The prompt's key held on unplanned bars unless asked otherwise (validation).
            key: self.key.unwrap_or(crate::generate::DEFAULT_KEY),
        }
    }

    /// The most tokens a continuation adds: `tokens`, else [`TOKENS_A_BAR`] for each bar asked
    /// (512 when no bars are).
    pub fn token_limit(&self) -> usize {
        self.tokens
            .unwrap_or_else(|| self.bars.map_or(512, |b| b.saturating_mul(TOKENS_A_BAR)))
            .min(MAX_TOKENS)
    }

    /// How long a continuation of the whole piece goes on.
    pub fn length(&self) -> Length {
        Length {
            tokens: self.token_limit(),
            bars: self.bars,
            may_end: self.may_end,
            context: self.context,
        }
    }
}

/// A continuation's safety limit for each bar asked: room for 64 notes a bar, each with a
/// position of its own (four tokens a note); a model that writes more is stuck.
pub const TOKENS_A_BAR: usize = 256;
/// The most tokens one continuation adds.
pub const MAX_TOKENS: usize = 20_000;

/// A progress report: how far (`done` of `total`, in steps or tokens), every note written so
/// far (piece ticks), and the watched attention rows just computed.
pub struct Progress {
    pub done: usize,
    pub total: usize,
    /// A continuation asked for bars: the bar being written (from 1) and the bars asked.
    pub bars: Option<[usize; 2]>,
    pub notes: Option<Vec<PieceNote>>,
    pub attention: Option<AttentionRows>,
    /// Alternatives asked for: which one this report is about (from 1; 0 when they are
    /// written together, a step for all) and how many there are.
    pub alternative: Option<[usize; 2]>,
}

mod accompany;
mod continuation;
pub mod family;
mod harmonize;
pub use crate::generate::limits;
mod live;
mod melody;
mod take;

// The generation tasks, one row each: the name the Worker's `generate` and the CLI's `--task`
// use, and the task's studio type (`family.rs` says what a row provides).
crate::tasks! {
    /// A piano part for the piece's melody and lanes.
    Accompaniment = "accompaniment" => accompany::Accompany;
    /// New bars after the piece's music, or a region's bars written anew.
    Continuation = "continuation" => continuation::Continue;
    /// Chord cells for the chord lane from the melody.
    Harmonization = "harmonization" => harmonize::Harmonize;
    /// A tune for the piece's chords and phrases.
    Melody = "melody" => melody::Melody;
    /// The piano a live take plays over the piece's melody, each sixteenth decided from what
    /// was heard before it (the page streams a take through `live_start`/`live_step`).
    Live = "live" => take::Take;
}

pub use accompany::{
    ModelPlay, accompaniment_attention, accompany_piece, accompany_pieces, repedal,
};
pub use continuation::{
    Continued, continuation_attention, continue_piece, continue_piece_ids, continue_pieces,
};
pub use family::{Family, Generated, Kept, Run, Written};
pub use harmonize::{
    HarmonizeOptions, Harmonized, HarmonyCache, harmonize_piece, needs_harmonizer,
};
pub use live::{KeyEvent, LiveGrid, LiveOptions, LiveResult, live_result, live_start, live_step};
pub use melody::{
    MELODY_VELOCITY, melody_attention_map, melody_bars, melody_piece, melody_pieces,
    melody_sampling,
};
pub use take::{TakeOptions, with_take};

#[cfg(all(test, not(target_arch = "wasm32")))]
mod family_tests;
#[cfg(all(test, not(target_arch = "wasm32")))]
mod harmonize_tests;
#[cfg(all(test, not(target_arch = "wasm32")))]
mod melody_tests;
#[cfg(all(test, not(target_arch = "wasm32")))]
mod options_tests;
#[cfg(all(test, not(target_arch = "wasm32")))]
mod take_tests;
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;
