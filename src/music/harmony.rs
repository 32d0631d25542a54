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

/// Values per beat of the context ([`BeatInputs::context`]): the chroma of the melody and
/// bridge over the beat's bar, its half bar, the two bars either side of its bar and the whole
/// song (12 each, scaled so the loudest pitch class is 1). A chord lasts a bar or half a bar and
/// the key a song: read per beat, the melody shows one or two of a chord's tones.
pub const CONTEXT_FEATURES: usize = 48;

/// What a harmonizer reads per beat: [`write_beat_features`]'s values, then (with `context`)
/// the chroma around the beat, read from the beats up to the current one only when `causal`
/// (a live harmonizer must not hear the future).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BeatInputs {
    pub context: bool,
    pub causal: bool,
}

impl BeatInputs {
    /// The context read from the whole song (a new harmonizer for files; a causal model's
    /// reader sets `causal`).
    pub const WITH_CONTEXT: BeatInputs = BeatInputs {
        context: true,
        causal: false,
    };

    /// Values per beat.
    pub const fn width(self) -> usize {
        BEAT_FEATURES + if self.context { CONTEXT_FEATURES } else { 0 }
    }

    /// The inputs of a model reading `width` values per beat (the first harmonizer read no
    /// context), `None` for a width no harmonizer reads.
    pub fn of_width(width: usize, causal: bool) -> Option<Self> {
        [false, true]
            .map(|context| Self { context, causal })
            .into_iter()
            .find(|i| i.width() == width)
    }
}

/// Reads a song's beats as a harmonizer does: the per-beat values and, with context, the
/// chroma of the melody and bridge summed from the song's start (so any span costs 12 values).
pub struct BeatReader<'a> {
    melody: &'a PianoRoll,
    bridge: &'a PianoRoll,
    labels: &'a StepLabels,
    pub places: BeatPlaces,
    inputs: BeatInputs,
    /// `prefix[b]`: each pitch class's sounding share summed over beats `0..b`.
    prefix: Vec<[f32; 12]>,
}

impl<'a> BeatReader<'a> {
    pub fn new(
        melody: &'a PianoRoll,
        bridge: &'a PianoRoll,
        labels: &'a StepLabels,
        inputs: BeatInputs,
    ) -> Self {
        let places = BeatPlaces::from_labels(labels);
        let mut prefix = Vec::new();
        if inputs.context {
            prefix.reserve(places.len() + 1);
            let mut sum = [0f32; 12];
            prefix.push(sum);
            for b in 0..places.len() {
                add_beat_chroma(melody, bridge, labels, b, &mut sum);
                prefix.push(sum);
            }
        }
        Self::with_parts(melody, bridge, labels, places, inputs, prefix)
    }

    /// A reader whose places and chroma sums are already known: `prefix[b]` sums
    /// [`add_beat_chroma`] over beats `0..b`, as far as the beats that will be read need (a
    /// causal reader of beat `b` reads `prefix[..= b + 1]`). A live harmonizer keeps them from
    /// beat to beat instead of reading the whole song again.
    pub fn with_parts(
        melody: &'a PianoRoll,
        bridge: &'a PianoRoll,
        labels: &'a StepLabels,
        places: BeatPlaces,
        inputs: BeatInputs,
        prefix: Vec<[f32; 12]>,
    ) -> Self {
        Self {
            melody,
            bridge,
            labels,
            places,
            inputs,
            prefix,
        }
    }

    /// The places and chroma sums back (see [`BeatReader::with_parts`]).
    pub fn into_parts(self) -> (BeatPlaces, Vec<[f32; 12]>) {
        (self.places, self.prefix)
    }

    /// Beats in the song.
    pub fn len(&self) -> usize {
        self.places.len()
    }

    pub fn is_empty(&self) -> bool {
        self.places.is_empty()
    }

    /// Beat `beat`'s values ([`BeatInputs::width`]), transposed by `transpose` semitones, into
    /// `out`; zeros past the end.
    pub fn write(&self, beat: usize, transpose: i32, out: &mut [f32]) {
        write_beat_features(
            self.melody,
            self.bridge,
            self.labels,
            &self.places,
            beat,
            transpose,
            out,
        );
        if !self.inputs.context {
            return;
        }
        let out = &mut out[BEAT_FEATURES..BEAT_FEATURES + CONTEXT_FEATURES];
        out.fill(0.0);
        if beat >= self.len() {
            return;
        }
        let (k, n) = (self.places.in_bar[beat], self.places.bar_beats[beat]);
        let bar = beat - k..beat - k + n;
        let half = if n >= 4 && n % 2 == 0 {
            let start = bar.start + (k >= n / 2) as usize * n / 2;
            start..start + n / 2
        } else {
            bar.clone()
        };
        let near = bar.start.saturating_sub(2 * n)..bar.end + 2 * n;
        let spans = [bar, half, near, 0..self.len()];
        for (span, out) in spans.into_iter().zip(out.chunks_mut(12)) {
            let end = span.end.min(self.len());
            let end = if self.inputs.causal {
                end.min(beat + 1)
            } else {
                end
            };
            let (a, b) = (&self.prefix[span.start.min(end)], &self.prefix[end]);
            let max = (0..12).map(|i| b[i] - a[i]).fold(0f32, f32::max);
            if max > 0.0 {
                for i in 0..12 {
                    out[(i as i32 + transpose).rem_euclid(12) as usize] = (b[i] - a[i]) / max;
                }
            }
        }
    }
}

/// Adds beat `beat`'s chroma (each pitch class's share of the beat sounding, melody and
/// bridge) to `sum`: what the context's chroma sums are made of.
pub fn add_beat_chroma(
    melody: &PianoRoll,
    bridge: &PianoRoll,
    labels: &StepLabels,
    beat: usize,
    sum: &mut [f32; 12],
) {
    let spb = labels.steps_per_beat.max(1);
    let share = 1.0 / spb as f32;
    for s in beat * spb..((beat + 1) * spb).min(labels.len()) {
        for roll in [melody, bridge] {
            if s < roll.num_steps {
                for p in (0..PITCHES).filter(|&p| roll.sustain(s, p)) {
                    sum[p % 12] += share;
                }
            }
        }
    }
}

/// Every beat's values, row-major `[beats, inputs.width()]`.
pub fn beat_features(
    melody: &PianoRoll,
    bridge: &PianoRoll,
    labels: &StepLabels,
    transpose: i32,
    inputs: BeatInputs,
) -> Vec<f32> {
    let reader = BeatReader::new(melody, bridge, labels, inputs);
    let width = inputs.width();
    let mut out = vec![0f32; reader.len() * width];
    for (b, row) in out.chunks_mut(width).enumerate() {
        reader.write(b, transpose, row);
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
