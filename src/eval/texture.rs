//! The texture panel (issue 69): whether an accompaniment shows the song's form. Every song is
//! accompanied with its annotated lanes without and with the texture echo
//! ([`crate::generate::texture`]), and with the phrases the detector finds in its melody alone
//! (what a file without labels gets: the default path), and each is scored by ILS
//! ([`crate::music::texture::ils`]) against the *annotated* phrases, beside the pianist's, with
//! its chord tones and density. The echo's lean is counted in the training songs' pianists
//! ([`training_counts`]), never on the songs scored.

use burn::tensor::Device;
use serde::Serialize;

use super::harmony::HarmonySong;
use super::target_roll;
use crate::data::corpus::{Corpus, Piece, WindowSpec};
use crate::data::example;
use crate::generate::texture::TextureEcho;
use crate::generate::{BatchProgress, GenerateError, Given, PianoSampling, accompany_given};
use crate::model::performer::Performer;
use crate::music::labels::StepLabels;
use crate::music::playing::{chord_tone_ratio, onsets_per_beat};
use crate::music::roll::PianoRoll;
use crate::music::texture::echo::{EchoCounts, EchoLean};
use crate::music::texture::{Ils, ils};

/// The echo counts of the pianists of `train`'s songs that have an accompaniment, over their
/// annotated spans.
pub fn training_counts(train: &Corpus) -> EchoCounts {
    let mut counts = EchoCounts::default();
    for p in train.pieces.iter().filter(|p| p.has_accompaniment()) {
        let labels = p.sheet.labels.slice(p.range.clone());
        let roll = steps_of(&p.sheet.rolls.piano, p.range.clone());
        counts.add(&roll, &labels);
    }
    counts
}

/// Steps `range` of `roll`.
pub fn steps_of(roll: &PianoRoll, range: std::ops::Range<usize>) -> PianoRoll {
    let mut out = PianoRoll::new(range.len());
    for (i, t) in range.enumerate() {
        for p in 0..crate::music::roll::PITCHES {
            let (on, sus) = (roll.onset(t, p), roll.sustain(t, p));
            if on || sus {
                out.set(i, p, on, sus, roll.velocity(t, p));
            }
        }
    }
    out
}

/// One way of accompanying a song, scored.
#[derive(Clone, Debug, Serialize)]
pub struct Played {
    /// ILS against the annotated phrases.
    pub ils: Option<Ils>,
    pub chord_tones: Option<f64>,
    /// Onsets a beat over the pianist's.
    pub density: Option<f64>,
}

/// A song's texture figures.
#[derive(Clone, Debug, Serialize)]
pub struct TextureSong {
    pub name: String,
    pub pianist: Played,
    /// The annotated lanes, each echo strength tried (0: no echo).
    pub annotated: Vec<(f32, Played)>,
    /// The detected phrases (annotated chords), the echo at strength 1.
    pub detected: Played,
}

/// Accompanies steps `piece.range` under `lanes` (one label per step of the range), the echo
/// at `strength` times `lean` over their repeats.
pub async fn accompany_with_echo(
    model: &Performer,
    piece: &Piece,
    lanes: &StepLabels,
    sampling: PianoSampling,
    lean: EchoLean,
    strength: f32,
    device: &Device,
) -> Result<PianoRoll, GenerateError> {
    let range = piece.range.clone();
    let spec = WindowSpec::for_model(&model.config, range.len());
    let mut full = piece.sheet.labels.clone();
    for (i, t) in range.clone().enumerate() {
        full.chord[t] = lanes.chord[i];
        full.phrase[t] = lanes.phrase[i];
    }
    let e = example(&piece.sheet.rolls, &full, &spec, range.start, 0);
    let texture = TextureEcho::repeats(lean, strength, lanes);
    let given = Given {
        roll: None,
        region: 0..e.len,
        texture: texture.as_ref(),
    };
    let quiet = |_: BatchProgress<'_>| async { true };
    let mut rolls =
        accompany_given(model, &e, given, &[sampling], e.len, None, device, quiet).await?;
    Ok(rolls.pop().expect("one roll"))
}

/// The panel's figures for one song.
pub async fn texture_song(
    model: &Performer,
    piece: &Piece,
    sampling: PianoSampling,
    lean: EchoLean,
    strengths: &[f32],
    device: &Device,
) -> Result<TextureSong, GenerateError> {
    let range = piece.range.clone();
    let annotated = piece.sheet.labels.slice(range.clone());
    let spb = annotated.steps_per_beat.max(1);
    let chords = annotated.beat_chords();
    let real = target_roll(&example(
        &piece.sheet.rolls,
        &piece.sheet.labels,
        &WindowSpec::for_model(&model.config, range.len()),
        range.start,
        0,
    ));
    let real_density = onsets_per_beat(&real, 0..real.num_steps, spb);
    let score = |roll: &PianoRoll| Played {
        ils: ils(roll, &annotated),
        chord_tones: chord_tone_ratio(roll, &chords, spb),
        density: (real_density > 0.0)
            .then(|| onsets_per_beat(roll, 0..roll.num_steps, spb) / real_density),
    };
    let mut tried = Vec::new();
    for &s in strengths {
        let roll = accompany_with_echo(model, piece, &annotated, sampling, lean, s, device).await?;
        tried.push((s, score(&roll)));
    }
    let detected = HarmonySong::new(piece).detected_labels.slice(range);
    let roll = accompany_with_echo(model, piece, &detected, sampling, lean, 1.0, device).await?;
    Ok(TextureSong {
        name: piece.name.clone(),
        pianist: score(&real),
        annotated: tried,
        detected: score(&roll),
    })
}
