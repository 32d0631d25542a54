//! The melody model's vocabulary and examples. A melody is written a sixteenth at a time as one
//! class per step: a rest, a hold (the note before goes on) or the onset of a pitch in
//! [`MELODY_LOW`] ..= [`MELODY_HIGH`] — monophonic by construction. At every step the model
//! reads the lanes ([`LABEL_FEATURES`]: chord, phrase, place in the bar), the step before's
//! class and sounding pitch (it is autoregressive in the melody), and, when the piece has one,
//! the accompaniment's pitch classes at the step (piano and bridge; training leaves it out of
//! half the windows, so a melody can be written over a plan alone or over a piano part).
//! Training, generation and evaluation all build their rows with [`write_melody_row`].

use std::ops::Range;

use super::example::{Example, WindowSpec, transpose_labels, window_coordinates};
use super::features::{LABEL_FEATURES, LabelFeatures};
use super::harmony::NO_TARGET;
use crate::music::labels::StepLabels;
use crate::music::roll::{MultiRoll, PITCHES, PianoRoll};

/// The lowest pitch the melody model writes (C2); lower notes of a melody fold up by octaves.
pub const MELODY_LOW: u8 = 36;
/// The highest pitch it writes (D#7); higher notes fold down by octaves.
pub const MELODY_HIGH: u8 = 99;
/// Pitches the model writes.
pub const MELODY_PITCHES: usize = (MELODY_HIGH - MELODY_LOW) as usize + 1;
/// The class of a step where the melody rests.
pub const REST: usize = 0;
/// The class of a step where the note before goes on.
pub const HOLD: usize = 1;
/// Classes per step: rest, hold, and an onset per pitch.
pub const MELODY_CLASSES: usize = 2 + MELODY_PITCHES;
/// The accompaniment at a step: the pitch classes sounding (12), those struck (12), and
/// whether the piece has an accompaniment at all (1).
pub const ACCOMPANIMENT_CHROMA: usize = 25;
/// Values the melody model reads per step.
pub const MELODY_INPUTS: usize =
    LABEL_FEATURES + MELODY_CLASSES + MELODY_PITCHES + ACCOMPANIMENT_CHROMA;

/// The chord an onset at step `s` is judged against where a melody's fit to its chords is
/// measured (`eval --task melody`, `generate`'s report): the lane's chord there when the onset
/// falls on a change of chord or on a strong beat (a bar's first beat, a 4/4 bar's third);
/// `None` elsewhere, or where the lane holds no chord. `pos`: the step's place in its bar of
/// `beats` beats of `spb` steps.
pub fn judged_chord(
    labels: &StepLabels,
    s: usize,
    pos: usize,
    beats: usize,
    spb: usize,
) -> Option<crate::music::chords::Chord> {
    let change = s > 0 && labels.chord[s] != labels.chord[s - 1];
    let strong = pos == 0 || (beats == 4 && pos == 2 * spb);
    labels.chord[s].filter(|_| change || strong)
}

/// `pitch` moved by octaves into the range the model writes.
pub fn fold(pitch: i32) -> u8 {
    let (low, high) = (MELODY_LOW as i32, MELODY_HIGH as i32);
    let mut p = pitch;
    while p < low {
        p += 12;
    }
    while p > high {
        p -= 12;
    }
    p as u8
}

/// The class of an onset of `pitch` (folded into range).
pub fn onset_class(pitch: u8) -> usize {
    2 + (fold(pitch as i32) - MELODY_LOW) as usize
}

/// The pitch whose onset `class` is, `None` for a rest or a hold.
pub fn class_pitch(class: usize) -> Option<u8> {
    (2..MELODY_CLASSES)
        .contains(&class)
        .then(|| MELODY_LOW + (class - 2) as u8)
}

/// One step of a melody: its class and the pitch sounding (0 for none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MelodyStep {
    pub class: usize,
    pub pitch: u8,
}

impl MelodyStep {
    /// The step that follows `self` when `class` is written: a hold keeps the pitch (a hold
    /// after a rest is a rest).
    pub fn then(self, class: usize) -> MelodyStep {
        match class {
            HOLD if self.pitch > 0 => MelodyStep {
                class,
                pitch: self.pitch,
            },
            HOLD | REST => MelodyStep {
                class: REST,
                pitch: 0,
            },
            c => MelodyStep {
                class: c,
                pitch: class_pitch(c).unwrap_or(0),
            },
        }
    }
}

/// The melody of a roll as steps, transposed by `transpose` semitones (folded into range): the
/// highest note sounding at each step (`sounding[s]`, as [`StepLabels::melody`] holds it), an
/// onset where it is struck or where a different pitch takes over, a hold where it goes on.
pub fn melody_steps(roll: &PianoRoll, sounding: &[u8], transpose: i32) -> Vec<MelodyStep> {
    let n = sounding.len().min(roll.num_steps);
    (0..n)
        .map(|s| {
            let p = sounding[s];
            if p == 0 {
                return MelodyStep::default();
            }
            let pitch = fold(p as i32 + transpose);
            let struck = roll.onset(s, p as usize) || s == 0 || sounding[s - 1] != p;
            MelodyStep {
                class: if struck { onset_class(pitch) } else { HOLD },
                pitch,
            }
        })
        .collect()
}

/// The step before's melody and the accompaniment under the melody: what a melody row reads
/// besides the lanes.
#[derive(Clone, Copy, Debug)]
pub struct MelodyContext<'a> {
    /// The melody's step before (`None` at a song's first step).
    pub previous: Option<MelodyStep>,
    /// The accompaniment (piano and bridge) at the song's step, transposed; `None` when the
    /// model writes over the lanes alone.
    pub accompaniment: Option<(&'a MultiRoll, usize, i32)>,
}

/// A melody row into `row` ([`MELODY_INPUTS`] values): the lanes at step `t` of `labels`
/// (already transposed), the step before's class and pitch, the accompaniment's pitch
/// classes.
pub fn write_melody_row(labels: &StepLabels, t: usize, context: MelodyContext, row: &mut [f32]) {
    let row = &mut row[..MELODY_INPUTS];
    row.fill(0.0);
    labels.write_features(t, &mut row[..LABEL_FEATURES]);
    let mut at = LABEL_FEATURES;
    if let Some(prev) = context.previous {
        row[at + prev.class.min(MELODY_CLASSES - 1)] = 1.0;
        if prev.pitch > 0 {
            let p = fold(prev.pitch as i32) - MELODY_LOW;
            row[at + MELODY_CLASSES + p as usize] = 1.0;
        }
    }
    at += MELODY_CLASSES + MELODY_PITCHES;
    if let Some((rolls, s, transpose)) = context.accompaniment {
        let chroma = &mut row[at..at + ACCOMPANIMENT_CHROMA];
        chroma[24] = 1.0;
        if s < rolls.num_steps() {
            for roll in [&rolls.piano, &rolls.bridge] {
                for p in 0..PITCHES {
                    let pc = (p as i32 + transpose).rem_euclid(12) as usize;
                    if roll.sustain(s, p) {
                        chroma[pc] = 1.0;
                    }
                    if roll.onset(s, p) {
                        chroma[12 + pc] = 1.0;
                    }
                }
            }
        }
    }
}

/// The melody window `start .. start + spec.len` of a song, transposed: rows as
/// [`write_melody_row`] writes them (with the accompaniment when `accompaniment`), the class of
/// every step inside `range` as the target ([`NO_TARGET`] outside it and past the song), and
/// the lanes' structure coordinates. The window's first row reads the song's step before it
/// (teacher forcing sees the melody that was really there).
pub fn melody_example(
    rolls: &MultiRoll,
    labels: &StepLabels,
    range: &Range<usize>,
    spec: &WindowSpec,
    start: usize,
    transpose: i32,
    accompaniment: bool,
) -> Example {
    let len = spec.len;
    let steps = melody_steps(&rolls.melody, &labels.melody, transpose);
    let window = transpose_labels(&labels.slice(start..start + len), transpose);
    let mut inputs = vec![0f32; len * MELODY_INPUTS];
    let mut targets = vec![NO_TARGET; len];
    for t in 0..len {
        let s = start + t;
        if s >= steps.len() {
            break;
        }
        let context = MelodyContext {
            previous: s.checked_sub(1).map(|p| steps[p]),
            accompaniment: accompaniment.then_some((rolls, s, transpose)),
        };
        write_melody_row(
            &window,
            t,
            context,
            &mut inputs[t * MELODY_INPUTS..(t + 1) * MELODY_INPUTS],
        );
        if range.contains(&s) {
            targets[t] = steps[s].class as f32;
        }
    }
    Example {
        len,
        inputs,
        targets,
        coordinates: window_coordinates(&window, spec),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::beats::BeatInputs;
    use crate::model::pe::StructureLevel;
    use crate::music::chords::{Chord, Quality};
    use crate::music::grid::Grid;
    use crate::music::midi::tests::note;
    use crate::music::phrases::Segment;
    use crate::music::roll::Role;

    #[test]
    fn classes_fold_into_range_and_back() {
        assert_eq!(fold(30), 42);
        assert_eq!(fold(100), 88);
        assert_eq!(fold(60), 60);
        assert_eq!(class_pitch(onset_class(60)), Some(60));
        assert_eq!(class_pitch(onset_class(MELODY_HIGH)), Some(MELODY_HIGH));
        assert_eq!(class_pitch(REST), None);
        assert_eq!(class_pitch(HOLD), None);
        assert_eq!(class_pitch(MELODY_CLASSES), None);
        let c = MelodyStep::default().then(onset_class(67));
        assert_eq!(
            c,
            MelodyStep {
                class: onset_class(67),
                pitch: 67
            }
        );
        assert_eq!(
            c.then(HOLD),
            MelodyStep {
                class: HOLD,
                pitch: 67
            }
        );
        assert_eq!(
            c.then(REST).then(HOLD),
            MelodyStep::default(),
            "a hold after a rest rests"
        );
    }

    #[test]
    fn melody_windows_hold_the_step_before_and_target_each_step() {
        // One bar of 4/4 at 4 steps a beat: C5 for a beat, a rest, E5 re-struck twice (two
        // steps each), then G5 under a higher A5 that starts a step later.
        let grid = Grid::quarters(480, 8 * 480, 4);
        let melody = [
            note(72, 0, 480),
            note(76, 2 * 480, 2 * 480 + 240),
            note(76, 2 * 480 + 240, 3 * 480),
            note(79, 3 * 480, 4 * 480),
            note(81, 3 * 480 + 120, 4 * 480),
        ];
        let piano = [note(48, 0, 1200)];
        let rolls = MultiRoll::from_tracks(
            [(Role::Melody, &melody[..]), (Role::Piano, &piano[..])],
            &grid,
        );
        let c = Some(Chord {
            root: 0,
            quality: Quality::Maj,
        });
        let phrases = [Segment {
            start_bar: 0,
            bars: 2,
            letter: 'A',
        }];
        let labels = StepLabels::new(&grid, &rolls.melody, &[c; 8], &phrases);
        let steps = melody_steps(&rolls.melody, &labels.melody, 0);
        let classes: Vec<usize> = steps.iter().map(|s| s.class).collect();
        let (c5, e5, g5, a5) = (
            onset_class(72),
            onset_class(76),
            onset_class(79),
            onset_class(81),
        );
        assert_eq!(
            &classes[..16],
            &[
                c5, HOLD, HOLD, HOLD, REST, REST, REST, REST, e5, HOLD, e5, HOLD, g5, a5, HOLD,
                HOLD
            ]
        );
        let spec = WindowSpec {
            len: 8,
            max_shift: 0,
            levels: vec![StructureLevel::Phrase, StructureLevel::Position],
            conditioning: None,
            beats: BeatInputs::default(),
            chord_noise: 0.0,
        };
        // From step 9, up a tone, trusted up to step 13, with the accompaniment.
        let e = melody_example(&rolls, &labels, &(0..14), &spec, 9, 2, true);
        assert_eq!(e.inputs.len(), 8 * MELODY_INPUTS);
        let row = |t: usize| &e.inputs[t * MELODY_INPUTS..(t + 1) * MELODY_INPUTS];
        let prev = LABEL_FEATURES;
        assert_eq!(
            row(0)[prev + onset_class(78)],
            1.0,
            "step 8's F#5 onset, read at step 9"
        );
        assert_eq!(
            row(0)[prev + MELODY_CLASSES + (78 - MELODY_LOW) as usize],
            1.0
        );
        assert_eq!(row(1)[prev + HOLD], 1.0);
        assert_eq!(
            row(0)[LABEL_FEATURES - 16 + 9],
            1.0,
            "step 9: nine sixteenths into its bar"
        );
        let chroma = MELODY_INPUTS - ACCOMPANIMENT_CHROMA;
        assert_eq!(row(0)[chroma + 24], 1.0, "an accompaniment is there");
        assert_eq!(row(0)[chroma + 2], 1.0, "C3 + 2 sounds: D");
        assert_eq!(row(7)[chroma + 2], 0.0, "the piano stopped after ten steps");
        assert_eq!(
            &e.targets,
            &[
                HOLD as f32,
                onset_class(78) as f32,
                HOLD as f32,
                onset_class(81) as f32,
                onset_class(83) as f32,
                NO_TARGET,
                NO_TARGET,
                NO_TARGET
            ]
        );
        assert_eq!(e.coordinates.len(), 8 * 2);
        // Without the accompaniment, its values are all zero.
        let e = melody_example(&rolls, &labels, &(0..32), &spec, 9, 0, false);
        assert!(
            e.inputs[..MELODY_INPUTS][chroma..]
                .iter()
                .all(|&x| x == 0.0)
        );
        // The song's first step reads no step before.
        let e = melody_example(&rolls, &labels, &(0..32), &spec, 0, 0, false);
        assert!(
            e.inputs[LABEL_FEATURES..LABEL_FEATURES + MELODY_CLASSES]
                .iter()
                .all(|&x| x == 0.0)
        );
        assert_eq!(e.targets[0], c5 as f32);
    }
}
