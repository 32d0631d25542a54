//! Harmonization, the parts without tensors: what the harmonizer model reads per beat (the
//! melody and bridge, the place in the bar, the phrase lane), the chord classes it writes, how
//! its per-beat probabilities become a progression with a pianist's harmonic rhythm
//! ([`decode`]), and the measures of a harmonization ([`measures`]).
//!
//! A beat is the unit: a song of 100 bars is 400 positions, a sixteenth of the accompaniment's.

use super::chords::{Chord, Quality};
use super::labels::{LABEL_FEATURES, StepLabels, chord_id};
use super::roll::{PITCHES, PianoRoll};

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
}

impl ChordSource {
    /// How the page and `inspect` name it.
    pub fn describe(self) -> &'static str {
        match self {
            ChordSource::Detector => "detected from the notes",
            ChordSource::Harmonizer => "proposed by the harmonizer (the notes carry no harmony)",
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
#[derive(Clone, Debug, PartialEq)]
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

/// Values per beat that [`write_beat_features`] writes.
pub const BEAT_FEATURES: usize = 76;

/// What the harmonizer reads at `beat` (steps `beat · spb ..`) of the melody and bridge rolls
/// and the labels (only their phrase lane and bar grid: never their chords), transposed by
/// `transpose` semitones, into `out` ([`BEAT_FEATURES`] values; zeros past the end):
///
/// | values | what |
/// |---|---|
/// | 12 | melody chroma: the share of the beat each pitch class sounds |
/// | 12 | melody onsets by pitch class |
/// | 12 | the melody pitch class sounding at the beat's start |
/// | 12 | bridge (other non-piano parts) chroma |
/// | 1 | share of the beat the melody rests |
/// | 1 | melody height: mean sounding pitch, (p − 60) / 12 |
/// | 8 | beat in the bar, one-hot (later beats fold onto the last) |
/// | 1 | the bar's last beat |
/// | 1 | the half bar |
/// | 1 | a bar of three beats |
/// | 14 | phrase: letter (11, as the accompaniment reads it), first bar, last bar, place |
/// | 1 | the melody's first note after a rest of a beat or more starts in this beat |
pub fn write_beat_features(
    melody: &PianoRoll,
    bridge: &PianoRoll,
    labels: &StepLabels,
    places: &BeatPlaces,
    beat: usize,
    transpose: i32,
    out: &mut [f32],
) {
    let out = &mut out[..BEAT_FEATURES];
    out.fill(0.0);
    if beat >= places.len() {
        return;
    }
    let spb = labels.steps_per_beat.max(1);
    let steps = beat * spb..((beat + 1) * spb).min(labels.len());
    let share = 1.0 / spb as f32;
    let pc = |p: usize| (p as i32 + transpose).rem_euclid(12) as usize;
    let (mut rests, mut height, mut sounding) = (0.0, 0.0, 0usize);
    for s in steps.clone() {
        let mut any = false;
        for p in 0..PITCHES {
            if s < melody.num_steps && melody.sustain(s, p) {
                out[pc(p)] += share;
                any = true;
                height += p as f32 + transpose as f32;
                sounding += 1;
                if melody.onset(s, p) {
                    out[12 + pc(p)] = 1.0;
                }
                if s == steps.start {
                    out[24 + pc(p)] = 1.0;
                }
            }
            if s < bridge.num_steps && bridge.sustain(s, p) {
                out[36 + pc(p)] += share;
            }
        }
        if !any {
            rests += share;
        }
    }
    out[48] = rests;
    if sounding > 0 {
        out[49] = (height / sounding as f32 - 60.0) / 12.0;
    }
    let (k, n) = (places.in_bar[beat], places.bar_beats[beat]);
    out[50 + k.min(7)] = 1.0;
    out[58] = (k + 1 == n) as u8 as f32;
    out[59] = (places.slot(beat) == 1) as u8 as f32;
    out[60] = (n == 3) as u8 as f32;
    let mut lanes = [0f32; LABEL_FEATURES];
    labels.write_features(steps.start, &mut lanes);
    out[61..75].copy_from_slice(&lanes[26..40]);
    // A phrase of the melody starting: its first onset after at least a beat of rest.
    let rested = |from: usize| {
        let before = from.saturating_sub(spb)..from;
        from >= spb
            && before
                .clone()
                .all(|s| s >= melody.num_steps || (0..PITCHES).all(|p| !melody.sustain(s, p)))
    };
    out[75] = steps
        .clone()
        .find(|&s| s < melody.num_steps && (0..PITCHES).any(|p| melody.onset(s, p)))
        .is_some_and(rested) as u8 as f32;
}

/// Every beat's features, row-major `[beats, BEAT_FEATURES]`.
pub fn beat_features(
    melody: &PianoRoll,
    bridge: &PianoRoll,
    labels: &StepLabels,
    transpose: i32,
) -> Vec<f32> {
    let places = BeatPlaces::from_labels(labels);
    let mut out = vec![0f32; places.len() * BEAT_FEATURES];
    for (b, row) in out.chunks_mut(BEAT_FEATURES).enumerate() {
        write_beat_features(melody, bridge, labels, &places, b, transpose, row);
    }
    out
}

/// The labels at each beat's first step: what F-StrIPE's structure levels read per beat.
pub fn beat_labels(labels: &StepLabels) -> StepLabels {
    let spb = labels.steps_per_beat.max(1);
    let pick = |v: &[u8]| v.iter().step_by(spb).copied().collect::<Vec<_>>();
    StepLabels {
        steps_per_beat: 1,
        melody: pick(&labels.melody),
        chord: labels.chord.iter().step_by(spb).copied().collect(),
        phrase: labels.phrase.iter().step_by(spb).copied().collect(),
        bar: labels.bar.iter().step_by(spb).copied().collect(),
        // The beat within its bar (at one step per beat, `coordinates` counts it as 4
        // sixteenths a beat, as on the sixteenth grid).
        position: labels
            .position
            .iter()
            .step_by(spb)
            .map(|&p| (p as usize / spb) as u16)
            .collect(),
    }
}

#[cfg(test)]
mod tests;
