//! The donor panel (issue 69, "texture you choose"): every song is accompanied as a person
//! asks it to play like a texture of the gallery (`settings/textures.json`), its annotated
//! chords in the lane, and again over a substituted progression (the song's own moved
//! [`SHIFT_BARS`] bars, as the label-following panel moves it). Each is scored by
//!
//! - **following**: the mean cosine similarity of its 2-bar rhythm vectors (onset or not at
//!   every step, in three registers: [`crate::music::texture::rhythm`]) to the donor's laid
//!   over the same bars (bar k answering the donor's bar k mod its length), beside the same
//!   figure for the model asked for no texture and for the pianist (what following by chance
//!   scores), and the pianists' own same-letter similarity (how alike a pianist plays a
//!   returning phrase: the bar);
//! - **chord tones** against the target bars' chords (and against the substituted chords, on
//!   the beats they changed);
//! - **the melody**: the share of onsets (while the melody sounds) on its pitch and above it,
//!   beside the pianist's ([`against_melody`]).

use burn::tensor::Device;
use serde::Serialize;

use super::panel::{SHIFT_BARS, followed_ratio, shifted_chords};
use super::target_roll;
use super::texture::accompany_answering;
use crate::data::corpus::{Piece, WindowSpec};
use crate::data::example;
use crate::generate::texture::Answers;
use crate::generate::{GenerateError, PianoSampling};
use crate::model::performer::Performer;
use crate::music::labels::StepLabels;
use crate::music::playing::{AgainstMelody, against_melody, chord_tone_ratio, onsets_per_beat};
use crate::music::roll::PianoRoll;
use crate::music::texture::donor::Donor;
use crate::music::texture::echo::{EchoLean, bars};
use crate::music::texture::{Segment, ils, rhythm, similarity};

/// One accompaniment asked to play like a donor, scored.
#[derive(Clone, Debug, Serialize)]
pub struct Followed {
    /// Mean similarity of its 2-bar segments to the donor laid over them.
    pub following: Option<f64>,
    pub chord_tones: Option<f64>,
    /// Over the substituted progression: its following, and its chord tones against the
    /// substituted chords on the beats they changed.
    pub following_substituted: Option<f64>,
    pub substituted_chord_tones: Option<f64>,
    pub against_melody: Option<AgainstMelody>,
    /// Onsets a beat over the pianist's.
    pub density: Option<f64>,
}

/// One donor on one song.
#[derive(Clone, Debug, Serialize)]
pub struct DonorRow {
    pub donor: String,
    /// The pianist's and the model's own (asked for no texture) similarity to the donor laid
    /// over the song: following by chance.
    pub pianist_following: Option<f64>,
    pub plain_following: Option<f64>,
    /// Each strength tried.
    pub played: Vec<(f32, Followed)>,
}

/// A song's donor figures.
#[derive(Clone, Debug, Serialize)]
pub struct DonorSong {
    pub name: String,
    /// The pianist's mean similarity of segments of two phrases with the same letter.
    pub pianist_same_letter: Option<f64>,
    pub pianist_against_melody: Option<AgainstMelody>,
    pub plain_against_melody: Option<AgainstMelody>,
    pub donors: Vec<DonorRow>,
}

/// The mean similarity of `roll`'s 2-bar segments (bars 0–1, 2–3, … of `labels`, whole
/// pairs of equal bars) to `laid`'s, where both play; `None` where none does.
pub fn following(roll: &PianoRoll, laid: &PianoRoll, labels: &StepLabels) -> Option<f64> {
    let bars = bars(labels);
    let (mut sum, mut n) = (0.0, 0usize);
    for pair in bars.chunks_exact(2) {
        let (start, len) = (pair[0].0, pair[0].1 + pair[1].1);
        let seg = Segment {
            phrase: 0,
            letter: 'A',
            number: 0,
            start,
            len,
        };
        if let Some(s) = similarity(&rhythm(roll, &seg), &rhythm(laid, &seg)) {
            sum += s;
            n += 1;
        }
    }
    (n > 0).then(|| sum / n as f64)
}

/// The panel's figures for one song and each of `donors`, at each of `strengths` (the model
/// asked for no texture plays its repeats at `plain_strength`, as the page does).
pub async fn donor_song(
    model: &Performer,
    piece: &Piece,
    donors: &[Donor],
    sampling: PianoSampling,
    lean: Option<EchoLean>,
    (strengths, plain_strength): (&[f32], f32),
    device: &Device,
) -> Result<DonorSong, GenerateError> {
    let range = piece.range.clone();
    let annotated = piece.sheet.labels.slice(range.clone());
    let spb = annotated.steps_per_beat.max(1);
    let chords = annotated.beat_chords();
    let bar_steps = piece
        .sheet
        .grid
        .bar_steps(piece.sheet.grid.bar_of_step(range.start).0)
        .len();
    let shifted = shifted_chords(&piece.sheet.labels, range.clone(), SHIFT_BARS * bar_steps)
        .slice(range.clone());
    let given = shifted.beat_chords();
    let real = target_roll(&example(
        &piece.sheet.rolls,
        &piece.sheet.labels,
        &WindowSpec::for_model(&model.config, range.len()),
        range.start,
        0,
    ));
    let real_density = onsets_per_beat(&real, 0..real.num_steps, spb);
    let melody = &annotated.melody;
    let repeats = Answers::repeats(&annotated);
    let plain_echo = lean.map(|l| (l, plain_strength));
    let plain = accompany_answering(
        model,
        piece,
        &annotated,
        repeats.as_ref(),
        plain_echo,
        sampling,
        device,
    )
    .await?;
    let mut rows = Vec::new();
    for donor in donors {
        let Some(answers) = Answers::donor(&annotated, 0..annotated.len(), donor) else {
            continue;
        };
        let laid = answers.laid().expect("a donor's answers").clone();
        let on_shifted = Answers::donor(&shifted, 0..shifted.len(), donor);
        let mut played = Vec::new();
        for &s in strengths {
            let echo = lean.map(|l| (l, s));
            let roll = accompany_answering(
                model,
                piece,
                &annotated,
                Some(&answers),
                echo,
                sampling,
                device,
            )
            .await?;
            let other = accompany_answering(
                model,
                piece,
                &shifted,
                on_shifted.as_ref(),
                echo,
                sampling,
                device,
            )
            .await?;
            played.push((
                s,
                Followed {
                    following: following(&roll, &laid, &annotated),
                    chord_tones: chord_tone_ratio(&roll, &chords, spb),
                    following_substituted: following(&other, &laid, &annotated),
                    substituted_chord_tones: followed_ratio(&other, &given, &chords, spb).0,
                    against_melody: against_melody(&roll, melody),
                    density: (real_density > 0.0)
                        .then(|| onsets_per_beat(&roll, 0..roll.num_steps, spb) / real_density),
                },
            ));
        }
        rows.push(DonorRow {
            donor: donor.name.clone(),
            pianist_following: following(&real, &laid, &annotated),
            plain_following: following(&plain, &laid, &annotated),
            played,
        });
    }
    Ok(DonorSong {
        name: piece.name.clone(),
        pianist_same_letter: ils(&real, &annotated).map(|i| i.same),
        pianist_against_melody: against_melody(&real, melody),
        plain_against_melody: against_melody(&plain, melody),
        donors: rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn following_is_the_segments_similarity_to_the_laid_donor() {
        // Four 4-step bars; the laid donor strikes every step's first beat in the bass.
        let mut labels = StepLabels {
            steps_per_beat: 1,
            melody: vec![0; 16],
            chord: vec![None; 16],
            phrase: vec![None; 16],
            bar: (0..16).map(|t| t / 4).collect(),
            position: (0..16).map(|t| (t % 4) as u16).collect(),
        };
        labels.melody[0] = 60;
        let mut laid = PianoRoll::new(16);
        let mut same = PianoRoll::new(16);
        let mut off = PianoRoll::new(16);
        for t in (0..16).step_by(4) {
            laid.set(t, 36, true, true, 0);
            same.set(t, 40, true, true, 0);
            off.set(t + 2, 40, true, true, 0);
        }
        assert_eq!(following(&same, &laid, &labels), Some(1.0));
        assert_eq!(following(&off, &laid, &labels), Some(0.0));
        assert_eq!(following(&PianoRoll::new(16), &laid, &labels), None);
    }
}
