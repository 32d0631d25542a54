//! Chords for a melody with a harmonizer model: the melody and bridge rolls and the phrase lane
//! go in per beat, the model's log-probabilities of every chord class come out, and
//! [`crate::music::harmony::decode`] turns them into a progression (the most likely one, or one
//! drawn with a seed). Nothing native-only: the page calls the same functions.

use burn::module::Module;

use crate::data::beats::{beat_features, beat_labels};
use crate::data::features::LabelFeatures;
use crate::data::stack;
use crate::data::{Example, harmony::NO_TARGET};
use crate::model::config::Task;
use crate::model::performer::{Inputs, Performer};
use crate::music::chords::Chord;
use crate::music::harmony::decode::{
    Draws, HarmonyDecode, alternatives, causal, log_softmax_rows, recolour, viterbi,
};
use crate::music::harmony::{BeatPlaces, CHORD_CLASSES, class_chord};
use crate::music::labels::StepLabels;
use crate::music::roll::PianoRoll;

use super::accompany::AccompanimentInput;
use super::{GenerateError, read_f32};

/// The model's log-probabilities of every chord class at every beat of the labels' grid,
/// row-major `[beats, CHORD_CLASSES]`. `melody` and `bridge` are rolls on the labels' grid;
/// only the labels' phrases and bar positions are read (never their chords). `seed` draws the
/// model's noise (SPE codes, random features).
pub async fn chord_log_probs(
    model: &Performer,
    melody: &PianoRoll,
    bridge: &PianoRoll,
    labels: &StepLabels,
    seed: u64,
) -> Result<Vec<f32>, GenerateError> {
    if model.config.task != Task::Harmonization {
        return Err(GenerateError::WrongTask {
            model: model.config.task,
            wanted: Task::Harmonization,
        });
    }
    let reads = model.config.beat_inputs();
    let inputs = beat_features(melody, bridge, labels, 0, reads);
    let beats = inputs.len() / reads.width();
    if beats == 0 {
        return Err(GenerateError::EmptyPrompt);
    }
    let levels = model.config.pe.structure_levels().to_vec();
    let example = Example {
        len: beats,
        inputs,
        targets: vec![NO_TARGET; beats],
        coordinates: beat_labels(labels).coordinates(&levels),
    };
    let device = model.devices()[0].clone();
    let (inputs, _, coords) = stack(std::slice::from_ref(&example), &device);
    let coords = coords.filter(|_| model.config.pe.is_structural());
    // On the CPU the attention runs over plain slices (`Performer::stepping`).
    let stepping = model.stepping(&device).await?;
    let mut state = model.start(seed, false, &device).stepping(&stepping);
    let logits = model.forward(Inputs::Rolls(inputs), coords, &mut state, None)?;
    let values = read_f32(logits).await?;
    debug_assert_eq!(values.len(), beats * CHORD_CLASSES);
    Ok(log_softmax_rows(&values))
}

/// Whether `song` has notes besides the tracks `input` keeps as melody and bridge: an
/// accompaniment whose notes carry the harmony, so the detector fills the chord lane.
pub fn has_accompaniment(song: &crate::music::midi::Song, input: &AccompanimentInput) -> bool {
    song.tracks
        .iter()
        .enumerate()
        .any(|(i, t)| !t.is_drums() && !t.notes.is_empty() && !input.kept.contains(&i))
}

/// [`chord_log_probs`] of `input`'s melody, bridge and labels.
async fn input_log_probs(
    model: &Performer,
    input: &AccompanimentInput,
    seed: u64,
) -> Result<Vec<f32>, GenerateError> {
    let rolls = &input.sheet.rolls;
    chord_log_probs(
        model,
        &rolls.melody,
        &rolls.bridge,
        &input.sheet.labels,
        seed,
    )
    .await
}

/// Fills `input`'s chords with the harmonizer's progression (the most likely one, or one
/// drawn with a seed) from its melody, bridge and phrases, and rebuilds its labels.
pub async fn harmonize_input(
    model: &Performer,
    decode: &HarmonyDecode,
    input: &mut AccompanimentInput,
    choice: Choice,
    seed: u64,
) -> Result<(), GenerateError> {
    let lp = input_log_probs(model, input, seed).await?;
    let places = BeatPlaces::from_labels(&input.sheet.labels);
    let choice = choice.for_model(model);
    input.chords = progression(&lp, &places, decode, 0..usize::MAX, None, choice);
    input.sheet.labels = StepLabels::new(
        &input.sheet.grid,
        &input.sheet.rolls.melody,
        &input.chords,
        &input.phrases,
    );
    Ok(())
}

/// The chord lane of `song` as the product fills it, with alternatives: `None` when its notes
/// carry the harmony (an accompaniment plays: the detector's chords stand), else `count`
/// progressions over every beat of the song's grid ([`progressions`]; the first is the
/// harmonizer's most likely one, the lane), each with its log-probability under `decode`.
/// `seed` draws the model's noise and the draws.
pub async fn lane_alternatives(
    model: &Performer,
    decode: &HarmonyDecode,
    song: &crate::music::midi::Song,
    count: usize,
    seed: u64,
) -> Result<Option<Vec<(Vec<Option<Chord>>, f32)>>, GenerateError> {
    let input = super::accompany::song_input(song, None, None, true)?;
    if has_accompaniment(song, &input) {
        return Ok(None);
    }
    let lp = input_log_probs(model, &input, seed).await?;
    let places = BeatPlaces::from_labels(&input.sheet.labels);
    let draws = Draws {
        count,
        temperature: decode.alternatives.unwrap_or(ALTERNATIVES_TEMPERATURE),
        seed,
    };
    if model.config.is_causal() {
        // A causal model decides beat by beat: one progression, no alternatives.
        let chords = progression(&lp, &places, decode, 0..usize::MAX, None, Choice::Causal);
        return Ok(Some(vec![(chords, 0.0)]));
    }
    Ok(Some(progressions(
        &lp,
        &places,
        decode,
        0..usize::MAX,
        None,
        draws,
    )))
}

/// How a progression is read from the probabilities.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Choice {
    /// The most likely progression under the harmonic rhythm (Viterbi).
    Best,
    /// The best progression's harmonic rhythm with each stretch's chord drawn again with this
    /// seed, at a temperature: the colourful end of chord choice ([`recolour`]).
    Drawn { seed: u64, temperature: f32 },
    /// Beat by beat from the past alone (what live playing writes; a causal model's).
    Causal,
}

impl Choice {
    /// This choice as `model` can make it: a causal model's chords are decided beat by beat
    /// from the past whatever was asked.
    pub fn for_model(self, model: &Performer) -> Choice {
        if model.config.is_causal() {
            Choice::Causal
        } else {
            self
        }
    }
}

/// The chords of `beats` (a range of the log-probabilities' beats) as `choice` reads them,
/// continuing from the chord before the range when there is one.
pub fn progression(
    log_probs: &[f32],
    places: &BeatPlaces,
    decode: &HarmonyDecode,
    beats: std::ops::Range<usize>,
    before: Option<Option<Chord>>,
    choice: Choice,
) -> Vec<Option<Chord>> {
    let (rows, sub, before) = window(log_probs, places, beats, before);
    let classes = match choice {
        Choice::Best => viterbi(rows, &sub, decode, before),
        Choice::Drawn { seed, temperature } => {
            let plain = viterbi(rows, &sub, decode, before);
            recolour(rows, decode, &plain, temperature, seed)
        }
        Choice::Causal => causal(rows, &sub, decode),
    };
    classes.into_iter().map(class_chord).collect()
}

/// The log-probabilities and places of `beats` (cut to the beats there are), and the chord
/// before them as a class: what [`progression`] and [`progressions`] decode.
fn window<'a>(
    log_probs: &'a [f32],
    places: &BeatPlaces,
    beats: std::ops::Range<usize>,
    before: Option<Option<Chord>>,
) -> (&'a [f32], BeatPlaces, Option<usize>) {
    let total = log_probs.len() / CHORD_CLASSES;
    let end = beats.end.min(total);
    let start = beats.start.min(end);
    let rows = &log_probs[start * CHORD_CLASSES..end * CHORD_CLASSES];
    let before = before.map(crate::music::harmony::chord_class);
    (rows, places.slice(start..end), before)
}

/// The temperature chord alternatives are drawn at when the model's decode names none
/// (`HarmonyDecode::alternatives`): of 0.5–1, the one whose best of four per
/// 8-bar section names the annotated root most often on the validation songs (`eval --task
/// harmonization`, reports/harmonizer.md, "Alternatives").
pub const ALTERNATIVES_TEMPERATURE: f32 = 0.75;

/// The temperature of the colourful end of chord choice when the model's decode names none
/// (`HarmonyDecode::colourful`): of 0.5–1, the one whose drawn
/// progressions' chord-histogram entropy and coverage come closest to the annotations' on the
/// validation songs (`eval --task harmonization`, reports/harmonizer.md, "Plain ↔ colourful").
pub const COLOURFUL_TEMPERATURE: f32 = 0.8;

/// Up to `draws.count` distinct progressions of `beats` (as [`progression`] reads its
/// arguments), each with its log-probability under `decode`: the best first, then those that
/// most add to the chance that one is right ([`decode::alternatives`]).
///
/// [`decode::alternatives`]: crate::music::harmony::decode::alternatives
pub fn progressions(
    log_probs: &[f32],
    places: &BeatPlaces,
    decode: &HarmonyDecode,
    beats: std::ops::Range<usize>,
    before: Option<Option<Chord>>,
    draws: Draws,
) -> Vec<(Vec<Option<Chord>>, f32)> {
    let (rows, sub, before) = window(log_probs, places, beats, before);
    alternatives(rows, &sub, decode, before, draws)
        .into_iter()
        .map(|a| (a.classes.into_iter().map(class_chord).collect(), a.log_prob))
        .collect()
}

#[cfg(all(test, not(target_arch = "wasm32")))]
pub(crate) mod tests;
