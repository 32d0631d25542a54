//! The accompaniment panel: what a step-by-step model plays when sampled, on whole held-out
//! songs (melody and bridge in, the annotated chords and phrases in the lanes), against the
//! real pianist and against the chords it was given.
//!
//! - **chord tones**: the share of the generated onsets that are tones of the annotated chord
//!   of their beat (the real piano part scores about 0.95);
//! - **label following**: the same melody with a substituted progression in the chord lane
//!   (the song's own progression moved [`SHIFT_BARS`] bars later, cyclically, so it stays in
//!   the song's key but changes under the melody); the share of onsets that are tones of the
//!   *given* chord, counted on the beats whose chord the substitution changed, and whether the
//!   output changed at all;
//! - **density**: onsets per beat divided by the real pianist's in the same song;
//! - **sounding**: pitches sounding per step divided by the real pianist's (with density, how
//!   long the notes are held);
//! - **re-strikes**: the share of onset groups that repeat the group before them within a
//!   beat, beside the real pianist's share.

use burn::tensor::Device;
use serde::Serialize;

use super::target_roll;
use crate::data::corpus::{Piece, WindowSpec};
use crate::data::example;
use crate::generate::piano::sample_whole;
use crate::generate::texture::Answers;
use crate::generate::{
    BatchProgress, GenerateError, Given, PianoSampling, Reports, accompany_batch,
};
use crate::model::performer::Performer;
use crate::music::chords::Chord;
use crate::music::labels::StepLabels;
use crate::music::playing::{chord_tone_ratio, onsets_per_beat, restrike_rate, sounding_per_step};
use crate::music::roll::{PITCHES, PianoRoll};
use crate::music::texture::ils;

/// Bars by which the label-following test moves each song's progression.
pub const SHIFT_BARS: usize = 2;

/// What one song gave.
#[derive(Clone, Debug, Serialize)]
pub struct SongResult {
    pub name: String,
    pub steps: usize,
    pub chord_tones: Option<f64>,
    pub real_chord_tones: Option<f64>,
    pub density: f64,
    pub real_density: f64,
    /// Pitches sounding per step.
    pub sounding: f64,
    pub real_sounding: f64,
    pub restrikes: Option<f64>,
    pub real_restrikes: Option<f64>,
    /// Chord tones of the substituted chords, on the beats they changed.
    pub followed: Option<f64>,
    /// Beats whose chord the substitution changed.
    pub changed_beats: usize,
    /// Whether the piano written for the substituted chords differs from the first one.
    pub output_changed: bool,
    /// ILS under the annotated phrases (`music::texture`; `None` where no letter returns),
    /// the model's as sampled (no texture echo: `eval --texture` plays it) and the pianist's.
    pub ils: Option<f64>,
    pub real_ils: Option<f64>,
}

/// `labels` with their chords moved `shift` steps later inside `range`, cyclically.
pub fn shifted_chords(
    labels: &StepLabels,
    range: std::ops::Range<usize>,
    shift: usize,
) -> StepLabels {
    let mut out = labels.clone();
    let n = range.len();
    if n == 0 {
        return out;
    }
    for (i, s) in range.clone().enumerate() {
        out.chord[s] = labels.chord[range.start + (i + n - shift % n) % n];
    }
    out
}

/// Chords per beat of `labels` over `range` (which starts on a beat).
fn beat_chords(labels: &StepLabels, range: std::ops::Range<usize>) -> Vec<Option<Chord>> {
    labels.slice(range).beat_chords()
}

/// The chord-tone share of `piano`'s onsets against `given`, only on the beats where `given`
/// differs from `original`.
pub(crate) fn followed_ratio(
    piano: &PianoRoll,
    given: &[Option<Chord>],
    original: &[Option<Chord>],
    steps_per_beat: usize,
) -> (Option<f64>, usize) {
    let masked: Vec<Option<Chord>> = given
        .iter()
        .zip(original)
        .map(|(g, o)| if g != o { *g } else { None })
        .collect();
    let changed = masked.iter().filter(|c| c.is_some()).count();
    (chord_tone_ratio(piano, &masked, steps_per_beat), changed)
}

/// Samples an accompaniment of `piece`'s annotated span with `labels` in the lanes; returns it
/// and the pianist's part there.
pub async fn sample_with_lanes(
    model: &Performer,
    piece: &Piece,
    labels: &StepLabels,
    sampling: PianoSampling,
    device: &Device,
) -> Result<(PianoRoll, PianoRoll), GenerateError> {
    let range = piece.range.clone();
    let spec = WindowSpec::for_model(&model.config, range.len());
    let e = example(&piece.sheet.rolls, labels, &spec, range.start, 0);
    let reference = Answers::repeats(&labels.slice(range));
    let roll = sample_whole(model, &e, reference.as_ref(), sampling, device).await?;
    Ok((roll, target_roll(&e)))
}

/// The share of the onsets of an accompaniment of `piece` that are tones of its annotated
/// chords, when the lanes hold `lanes` instead of the annotations (chords and phrases a
/// harmonizer or the detector wrote from the melody alone): how much of the song's real
/// harmony the piano plays.
pub async fn chord_tones_with_lanes(
    model: &Performer,
    piece: &Piece,
    lanes: &StepLabels,
    sampling: PianoSampling,
    device: &Device,
) -> Result<Option<f64>, GenerateError> {
    let spb = piece.sheet.labels.steps_per_beat.max(1);
    let (roll, _) = sample_with_lanes(model, piece, lanes, sampling, device).await?;
    let annotated = beat_chords(&piece.sheet.labels, piece.range.clone());
    Ok(chord_tone_ratio(&roll, &annotated, spb))
}

/// The panel's figures for one song.
pub async fn song_result(
    model: &Performer,
    piece: &Piece,
    sampling: PianoSampling,
    device: &Device,
) -> Result<SongResult, GenerateError> {
    let spb = piece.sheet.labels.steps_per_beat.max(1);
    let range = piece.range.clone();
    let (roll, real) =
        sample_with_lanes(model, piece, &piece.sheet.labels, sampling, device).await?;
    let chords = beat_chords(&piece.sheet.labels, range.clone());
    let bar_steps = piece
        .sheet
        .grid
        .bar_steps(piece.sheet.grid.bar_of_step(range.start).0)
        .len();
    let shifted = shifted_chords(&piece.sheet.labels, range.clone(), SHIFT_BARS * bar_steps);
    let (other, _) = sample_with_lanes(model, piece, &shifted, sampling, device).await?;
    let given = beat_chords(&shifted, range.clone());
    let (followed, changed_beats) = followed_ratio(&other, &given, &chords, spb);
    let steps = range.len();
    let annotated = piece.sheet.labels.slice(range.clone());
    Ok(SongResult {
        name: piece.name.clone(),
        steps,
        chord_tones: chord_tone_ratio(&roll, &chords, spb),
        real_chord_tones: chord_tone_ratio(&real, &chords, spb),
        density: onsets_per_beat(&roll, 0..steps, spb),
        real_density: onsets_per_beat(&real, 0..steps, spb),
        sounding: sounding_per_step(&roll, 0..steps),
        real_sounding: sounding_per_step(&real, 0..steps),
        restrikes: restrike_rate(&roll, spb),
        real_restrikes: restrike_rate(&real, spb),
        followed,
        changed_beats,
        output_changed: other != roll,
        ils: ils(&roll, &annotated).map(|i| i.ratio()),
        real_ils: ils(&real, &annotated).map(|i| i.ratio()),
    })
}

/// K alternatives of one song's accompaniment, the annotated chords and phrases in the lanes.
#[derive(Clone, Debug, Serialize)]
pub struct AlternativesResult {
    pub name: String,
    /// Each alternative's chord tones against the annotated chords.
    pub chord_tones: Vec<Option<f64>>,
    /// Each alternative's onsets a beat over the real pianist's (`None` when the pianist
    /// plays none).
    pub density: Vec<Option<f64>>,
    pub real_chord_tones: Option<f64>,
    /// The mean onset F1 of every pair of alternatives (1: the same onsets).
    pub pairwise_f1: f64,
}

/// `samplings.len()` accompaniments of `piece` (each its own seed), written together
/// ([`accompany_batch`]), scored as the panel scores one.
pub async fn alternatives_result(
    model: &Performer,
    piece: &Piece,
    samplings: &[PianoSampling],
    device: &Device,
) -> Result<AlternativesResult, GenerateError> {
    let spb = piece.sheet.labels.steps_per_beat.max(1);
    let range = piece.range.clone();
    let spec = WindowSpec::for_model(&model.config, range.len());
    let e = example(
        &piece.sheet.rolls,
        &piece.sheet.labels,
        &spec,
        range.start,
        0,
    );
    let quiet = |_: BatchProgress<'_>| async { true };
    let rolls = accompany_batch(
        model,
        &e,
        Given::plain(None, 0..e.len),
        samplings,
        Reports::at_end(),
        device,
        quiet,
    )
    .await?;
    let real = target_roll(&e);
    let chords = beat_chords(&piece.sheet.labels, range);
    let steps = e.len;
    let real_density = onsets_per_beat(&real, 0..steps, spb);
    let onsets: Vec<_> = rolls.iter().map(onset_set).collect();
    let mut f1 = Vec::new();
    for i in 0..onsets.len() {
        for j in 0..i {
            let total = onsets[i].len() + onsets[j].len();
            if total > 0 {
                f1.push(2.0 * onsets[i].intersection(&onsets[j]).count() as f64 / total as f64);
            }
        }
    }
    Ok(AlternativesResult {
        name: piece.name.clone(),
        chord_tones: rolls
            .iter()
            .map(|r| chord_tone_ratio(r, &chords, spb))
            .collect(),
        density: rolls
            .iter()
            .map(|r| (real_density > 0.0).then(|| onsets_per_beat(r, 0..steps, spb) / real_density))
            .collect(),
        real_chord_tones: chord_tone_ratio(&real, &chords, spb),
        pairwise_f1: if f1.is_empty() {
            1.0
        } else {
            mean(f1.into_iter())
        },
    })
}

/// A roll's onsets as (step, pitch).
fn onset_set(roll: &PianoRoll) -> std::collections::HashSet<(usize, usize)> {
    (0..roll.num_steps)
        .flat_map(|t| {
            (0..PITCHES)
                .filter(move |&p| roll.onset(t, p))
                .map(move |p| (t, p))
        })
        .collect()
}

/// The panel over many songs: means of the per-song figures (songs where a figure is
/// undefined are left out of its mean) and the ratios the targets are stated in.
#[derive(Clone, Debug, Serialize)]
pub struct Panel {
    pub songs: usize,
    pub chord_tones: f64,
    pub real_chord_tones: f64,
    pub followed: f64,
    pub changed_share: f64,
    /// Generated onsets per beat over the real pianist's, averaged over songs.
    pub density_ratio: f64,
    /// Pitches sounding per step over the real pianist's, averaged over songs.
    pub sounding_ratio: f64,
    pub restrikes: f64,
    pub real_restrikes: f64,
    /// `restrikes / real_restrikes`.
    pub restrike_ratio: f64,
    /// Mean ILS over the songs where a letter returns, the model's and the pianists'.
    pub ils: f64,
    pub real_ils: f64,
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (mut sum, mut n) = (0.0, 0usize);
    for v in values {
        sum += v;
        n += 1;
    }
    if n == 0 { f64::NAN } else { sum / n as f64 }
}

impl Panel {
    pub fn of(results: &[SongResult]) -> Self {
        let restrikes = mean(results.iter().filter_map(|r| r.restrikes));
        let real_restrikes = mean(results.iter().filter_map(|r| r.real_restrikes));
        Self {
            songs: results.len(),
            chord_tones: mean(results.iter().filter_map(|r| r.chord_tones)),
            real_chord_tones: mean(results.iter().filter_map(|r| r.real_chord_tones)),
            followed: mean(results.iter().filter_map(|r| r.followed)),
            changed_share: mean(results.iter().map(|r| r.output_changed as u8 as f64)),
            density_ratio: mean(
                results
                    .iter()
                    .filter(|r| r.real_density > 0.0)
                    .map(|r| r.density / r.real_density),
            ),
            sounding_ratio: mean(
                results
                    .iter()
                    .filter(|r| r.real_sounding > 0.0)
                    .map(|r| r.sounding / r.real_sounding),
            ),
            restrikes,
            real_restrikes,
            restrike_ratio: restrikes / real_restrikes,
            ils: mean(results.iter().filter_map(|r| r.ils)),
            real_ils: mean(results.iter().filter_map(|r| r.real_ils)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::music::chords::Quality;
    use crate::music::grid::Grid;

    #[test]
    fn substituted_chords_move_cyclically_and_following_counts_changed_beats() {
        let grid = Grid::regular((0..=8).map(|b| b * 480).collect(), 1, 4, 0);
        let melody = PianoRoll::new(8);
        let ch = |root| {
            Some(Chord {
                root,
                quality: Quality::Maj,
            })
        };
        let chords = [ch(0), ch(0), ch(7), ch(7), ch(5), ch(5), ch(0), ch(0)];
        let labels = StepLabels::new(&grid, &melody, &chords, &[]);
        let shifted = shifted_chords(&labels, 0..8, 2);
        assert_eq!(
            shifted.chord,
            vec![ch(0), ch(0), ch(0), ch(0), ch(7), ch(7), ch(5), ch(5)]
        );
        // A piano that plays C on every beat: a chord tone of C only.
        let mut piano = PianoRoll::new(8);
        for s in 0..8 {
            piano.set(s, 60, true, true, 0);
        }
        let (r, changed) = followed_ratio(&piano, &shifted.chord, &labels.chord, 1);
        // Changed beats: 2, 3 (G→C), 4, 5 (F→G), 6, 7 (C→F): C is a tone of C and F.
        assert_eq!(changed, 6);
        assert!((r.unwrap() - 4.0 / 6.0).abs() < 1e-12);
    }
}
