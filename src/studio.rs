//! What the page does with a piece and a model, written once for the Worker, the CLI and
//! native tests: chords for the piece's melody (the harmonizer), an accompaniment for its
//! melody, a continuation after its end, a melody for its lanes, and a live take (the piano
//! accompanying a melody as it is played), streamed (notes and attention as they are computed,
//! cancellable) and put back into the piece. Every generation task is one row of the table
//! below ([`family`] says how a task joins it).

use serde::{Deserialize, Serialize};

use crate::generate::{AttentionRows, GenerateError, Watch};
use crate::music::piece::PieceNote;

/// Name of the track an accompaniment is written to.
pub const ACCOMPANIMENT_TRACK: &str = "PIANO";
/// Name of the track a continuation is written to.
pub const CONTINUATION_TRACK: &str = "CONTINUATION";

/// What every task that writes pieces is asked, whatever the task: each task's settings hold
/// these ([`Asked::common`], flattened into the same JSON object as its own) beside its own
/// (`AccompanyOptions`, `ContinueOptions`, `MelodyOptions`, `HarmonizeOptions`, `TakeOptions`,
/// each in its task's studio file). The page sends each task the settings its panel holds for
/// it; the CLI fills one object in the page's words for any task (the harmonizer's, whose
/// `bars` are a span, it does not fill); a task reads what it knows of it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Common {
    pub seed: u64,
    /// Rewrite bars `from .. to` only (0-based, `to` excluded): what the task keeps around
    /// them is its own (its options say).
    pub region: Option<[usize; 2]>,
    /// Alternatives to write (1–8; `None`: 1), the k-th (from 0) with seed `seed + k`, so each
    /// is the piece that seed writes alone: the step-by-step accompaniment writes them
    /// together (one batched step for all on the CPU), the others one after another.
    pub alternatives: Option<usize>,
    /// The attention to capture while generating.
    pub watch: Option<WatchOptions>,
    /// Steps computed between two progress reports.
    pub chunk_steps: usize,
}

impl Default for Common {
    fn default() -> Self {
        Self {
            seed: limits::default("seed").unwrap_or(0.0) as u64,
            region: None,
            alternatives: None,
            watch: None,
            chunk_steps: 64,
        }
    }
}

impl Common {
    /// What is wrong with these settings, in words, and which setting it is.
    pub fn check(&self) -> Result<(), BadOption> {
        check_numbers(&[
            ("seed", Some(self.seed as f64)),
            ("alternatives", self.alternatives.map(|k| k as f64)),
        ])?;
        if let Some([from, to]) = self.region
            && from >= to
        {
            return Err(BadOption {
                field: "region",
                message: "choose at least one bar to regenerate".into(),
            });
        }
        Ok(())
    }

    fn watch(&self) -> Option<Watch> {
        self.watch.map(|w| Watch {
            layer: w.layer,
            head: w.head,
        })
    }
}

/// A task's settings: what every task is asked ([`Common`]) and its own, checked in words.
pub trait Asked: Clone {
    fn common(&self) -> &Common;
    fn common_mut(&mut self) -> &mut Common;

    /// Its own numbers, each by its key in the settings' JSON (`settings/options.json` holds
    /// their ranges).
    fn numbers(&self) -> Vec<(&'static str, Option<f64>)>;

    /// What else is wrong with its own settings, in words.
    fn check_rest(&self) -> Result<(), BadOption> {
        Ok(())
    }

    /// What is wrong with these settings, in words, and which setting it is (the generators
    /// call it first; the CLI names its flag).
    fn check(&self) -> Result<(), BadOption> {
        self.common().check()?;
        check_numbers(&self.numbers())?;
        self.check_rest()
    }

    /// How many alternatives to write.
    fn count(&self) -> usize {
        self.common().alternatives.unwrap_or(1).max(1)
    }

    /// These settings for alternative `k` (from 0): its seed, `seed + k` (past the largest
    /// seed, counting on from 0).
    fn alternative(&self, k: usize) -> Self {
        let mut one = self.clone();
        let common = one.common_mut();
        common.seed = (common.seed + k as u64) % (1 << 32);
        common.alternatives = None;
        one
    }
}

/// A task asked nothing of its own (a toy's) reads these alone.
impl Asked for Common {
    fn common(&self) -> &Common {
        self
    }

    fn common_mut(&mut self) -> &mut Common {
        self
    }

    fn numbers(&self) -> Vec<(&'static str, Option<f64>)> {
        Vec::new()
    }
}

/// Each setting given (its key in the settings' JSON, its value) checked against its range
/// (settings/options.json), the first out of it said in words.
pub fn check_numbers(numbers: &[(&str, Option<f64>)]) -> Result<(), BadOption> {
    for &(key, value) in numbers {
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
    Ok(())
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

/// A setting out of its range: which one (`field`, its name in the settings' JSON) and
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

impl Progress {
    /// A map of attention drawn without generating (every task's `attention`): its rows, the
    /// positions mapped `done` of `total`.
    pub fn map(done: usize, total: usize, rows: AttentionRows) -> Self {
        Self {
            done,
            total,
            bars: None,
            notes: None,
            attention: Some(rows),
            alternative: None,
        }
    }
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
    AccompanyOptions, ModelPlay, accompaniment_attention, accompany_piece, accompany_pieces,
    repedal,
};
pub use continuation::{
    ContinueOptions, Continued, continuation_attention, continue_piece, continue_piece_ids,
    continue_pieces,
};
pub use family::{Family, Generated, Kept, Run, Written};
pub use harmonize::{
    HarmonizeOptions, Harmonized, HarmonyCache, harmonize_piece, needs_harmonizer,
};
pub use live::{KeyEvent, LiveGrid, LiveOptions, LiveResult, live_result, live_start, live_step};
pub use melody::{
    MELODY_VELOCITY, MelodyOptions, melody_attention_map, melody_bars, melody_piece, melody_pieces,
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
