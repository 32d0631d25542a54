//! Harmonization, the parts without tensors: the chord classes the harmonizer writes (what it
//! reads per beat is in the data layer's beats), how
//! its per-beat probabilities become a progression with a pianist's harmonic rhythm
//! ([`decode`]), and the measures of a harmonization ([`measures`]).
//!
//! A beat is the unit: a song of 100 bars is 400 positions, a sixteenth of the accompaniment's.

use super::chords::{Chord, Quality};
use super::labels::{StepLabels, chord_id};

pub mod decode;
pub mod measures;

/// What filled a chord lane.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChordSource {
    /// The rule-based detector, from every part's notes: best where an accompaniment plays
    /// the harmony.
    #[default]
    Detector,
    /// The harmonizer model, from the melody and bridge: where no part carries the harmony.
    Harmonizer,
    /// The score's own chord symbols (a MusicXML lead sheet's `<harmony>`), as written.
    Score,
}

impl ChordSource {
    /// How the page and `inspect` name it.
    pub fn describe(self) -> &'static str {
        match self {
            ChordSource::Detector => "detected from the notes",
            ChordSource::Harmonizer => "proposed by the harmonizer (the notes carry no harmony)",
            ChordSource::Score => "the score's own chord symbols",
        }
    }
}

/// Chord classes the harmonizer writes: no chord, then every root × quality
/// (`1 + 14 · root + quality`, [`chord_id`]'s numbering).
pub const CHORD_CLASSES: usize = 1 + 12 * Quality::ALL.len();

/// The class of a chord.
pub fn chord_class(chord: Option<Chord>) -> usize {
    chord_id(chord) as usize
}

/// The chord of a class (`None` for class 0 or a class out of range).
pub fn class_chord(class: usize) -> Option<Chord> {
    if class == 0 || class >= CHORD_CLASSES {
        return None;
    }
    let k = class - 1;
    let n = Quality::ALL.len();
    Some(Chord {
        root: (k / n) as u8,
        quality: Quality::ALL[k % n],
    })
}

/// The beats of a grid as the harmonizer sees them: where each beat falls in its bar.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BeatPlaces {
    /// Beat within its bar, from 0.
    pub in_bar: Vec<usize>,
    /// Beats in the beat's bar.
    pub bar_beats: Vec<usize>,
}

impl BeatPlaces {
    /// From per-step labels (their `bar` and `position`), one entry per beat.
    pub fn from_labels(labels: &StepLabels) -> Self {
        let spb = labels.steps_per_beat.max(1);
        let beats = labels.len().div_ceil(spb);
        let in_bar: Vec<usize> = (0..beats)
            .map(|b| labels.position[b * spb] as usize / spb)
            .collect();
        let bar: Vec<u32> = (0..beats).map(|b| labels.bar[b * spb]).collect();
        let mut bar_beats = vec![0; beats];
        let mut start = 0;
        for b in 1..=beats {
            if b == beats || bar[b] != bar[start] {
                // A bar cut short by the end of the music counts its beats as they come.
                let n = in_bar[b - 1] + 1;
                bar_beats[start..b].fill(n);
                start = b;
            }
        }
        Self { in_bar, bar_beats }
    }

    pub fn len(&self) -> usize {
        self.in_bar.len()
    }

    /// The places of `beats` (cut to the beats there are).
    pub fn slice(&self, beats: std::ops::Range<usize>) -> Self {
        let end = beats.end.min(self.len());
        let start = beats.start.min(end);
        Self {
            in_bar: self.in_bar[start..end].to_vec(),
            bar_beats: self.bar_beats[start..end].to_vec(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.in_bar.is_empty()
    }

    /// The slot of [`decode::Rhythm`] a beat belongs to: the bar line, the half bar of a bar
    /// of four (or six, or eight) beats, or another beat.
    pub fn slot(&self, beat: usize) -> usize {
        let (k, n) = (self.in_bar[beat], self.bar_beats[beat]);
        if k == 0 {
            0
        } else if n >= 4 && n % 2 == 0 && 2 * k == n {
            1
        } else {
            2
        }
    }
}

#[cfg(test)]
mod tests;
