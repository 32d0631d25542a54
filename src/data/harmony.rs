//! Harmonizer training examples: windows of beats of a song (what the harmonizer reads per
//! beat, [`write_beat_features`]) with the annotated chord of every beat as the target, and the
//! structure coordinates of each beat for F-StrIPE. Beats outside the trusted span (POP909's
//! annotated range) carry no target (−1) and no loss.

use std::ops::Range;

use super::beats::{BeatReader, beat_labels};
use super::example::{Example, WindowSpec, transpose_labels, window_coordinates};
use crate::music::grid::Grid;
use crate::music::harmony::chord_class;
use crate::music::labels::StepLabels;
use crate::music::roll::MultiRoll;

/// The target of a beat without a trusted chord.
pub const NO_TARGET: f32 = -1.0;

/// The window of `spec.len` beats from `start` (beats past the song read as silence and carry
/// no target), transposed by `transpose` semitones. `range` is the span of steps whose chords
/// are trusted.
pub fn harmony_example(
    rolls: &MultiRoll,
    labels: &StepLabels,
    range: &Range<usize>,
    spec: &WindowSpec,
    start: usize,
    transpose: i32,
) -> Example {
    let len = spec.len;
    let spb = labels.steps_per_beat.max(1);
    let reader = BeatReader::new(&rolls.melody, &rolls.bridge, labels, spec.beats);
    let width = spec.beats.width();
    let mut inputs = vec![0f32; len * width];
    let mut targets = vec![NO_TARGET; len];
    for t in 0..len {
        let b = start + t;
        if b >= reader.len() {
            break;
        }
        reader.write(b, transpose, &mut inputs[t * width..(t + 1) * width]);
        let step = b * spb;
        if range.contains(&step) {
            let chord = labels.chord[step].map(|mut c| {
                c.root = (c.root as i32 + transpose).rem_euclid(12) as u8;
                c
            });
            targets[t] = chord_class(chord) as f32;
        }
    }
    let beats = beat_labels(labels);
    let window = transpose_labels(&beats.slice(start..start + len), transpose);
    let coordinates = window_coordinates(&window, spec);
    Example {
        len,
        inputs,
        targets,
        coordinates,
    }
}

/// The beats where windows of `len` beats may start: the grid's bar lines that leave a whole
/// window in the song (beat 0 when the song is shorter than a window).
pub fn beat_crop_starts(grid: &Grid, len: usize) -> Vec<usize> {
    let last = grid.num_beats().saturating_sub(len);
    let starts: Vec<usize> = (0..grid.num_bars())
        .map(|b| grid.bar_beats(b).start)
        .filter(|&b| b <= last)
        .collect();
    if starts.is_empty() { vec![0] } else { starts }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::beats::{BEAT_FEATURES, BeatInputs};
    use crate::model::pe::StructureLevel;
    use crate::music::chords::{Chord, Quality};
    use crate::music::harmony::class_chord;
    use crate::music::midi::tests::note;
    use crate::music::phrases::Segment;
    use crate::music::roll::Role;

    #[test]
    fn beat_windows_hold_features_targets_and_coordinates() {
        // Two bars of 4/4 at 4 steps a beat; a melody C5 on beat 0, E5 on beat 5.
        let grid = Grid::quarters(480, 8 * 480, 4);
        let melody = [note(72, 0, 480), note(76, 5 * 480, 480)];
        let rolls = MultiRoll::from_tracks([(Role::Melody, &melody[..])], &grid);
        let c = Some(Chord {
            root: 0,
            quality: Quality::Maj,
        });
        let phrases = [Segment {
            start_bar: 0,
            bars: 2,
            letter: 'A',
        }];
        let labels = StepLabels::new(&grid, &rolls.melody, &[c, c, c, c, None], &phrases);
        let spec = WindowSpec {
            len: 10,
            max_shift: 0,
            levels: vec![StructureLevel::Melody, StructureLevel::Position],
            conditioning: None,
            beats: BeatInputs::default(),
            chord_noise: 0.0,
        };
        // Chords trusted over the first five beats only.
        let e = harmony_example(&rolls, &labels, &(0..20), &spec, 0, 2);
        assert_eq!(e.inputs.len(), 10 * BEAT_FEATURES);
        assert_eq!(e.inputs[2], 1.0, "C5 + 2 sounds the whole of beat 0");
        assert_eq!(e.inputs[12 + 2], 1.0, "and starts there");
        assert_eq!(e.inputs[BEAT_FEATURES + 48], 1.0, "beat 1 rests");
        let t: Vec<Option<Chord>> = e.targets[..4]
            .iter()
            .map(|&x| class_chord(x as usize))
            .collect();
        assert!(t.iter().all(|c| c.is_some_and(|c| c.root == 2)), "D major");
        assert_eq!(e.targets[4], 0.0, "no chord, trusted: class 0");
        assert_eq!(
            &e.targets[5..],
            &[NO_TARGET; 5],
            "untrusted, then past the song"
        );
        assert_eq!(e.coordinates.len(), 10 * 2);
        assert_eq!(&e.coordinates[..2], &[74.0, 0.0]);
        assert_eq!(
            &e.coordinates[2 * 5..2 * 5 + 2],
            &[78.0, 4.0],
            "beat 5: E5 + 2, beat 1 of its bar"
        );
        assert_eq!(beat_crop_starts(&grid, 4), vec![0, 4]);
        assert_eq!(beat_crop_starts(&grid, 40), vec![0]);
    }
}
