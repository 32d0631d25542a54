//! Structure labels per grid step: what the models condition on (F-StrIPE's structure levels)
//! and what the page's chord and phrase lanes show and a user edits. They come from
//! annotations (POP909) or are detected in any MIDI file.

use serde::Serialize;

use super::chords::{Chord, Quality, RecognizeOptions, recognize};
use super::grid::Grid;
use super::melody::pick_melody_track;
use super::midi::{Note, Song};
use super::phrases::{PhraseOptions, Segment, segment_phrases};
use super::roll::{PITCHES, PianoRoll};

/// A chord's identity for [`StructureLevel::ChordId`]: 0 for no chord, else
/// `1 + 14 · root + quality`.
pub fn chord_id(chord: Option<Chord>) -> f32 {
    chord.map_or(0.0, |c| {
        let q = Quality::ALL
            .iter()
            .position(|&q| q == c.quality)
            .expect("every quality is in Quality::ALL");
        (1 + Quality::ALL.len() * (c.root as usize % 12) + q) as f32
    })
}

/// The tonal centroid of a set of pitch classes (six coordinates, unscaled).
pub fn tonal_centroid(pitch_classes: impl IntoIterator<Item = u8>) -> [f32; 6] {
    use std::f32::consts::PI;
    let (mut c, mut n) = ([0f32; 6], 0);
    for pc in pitch_classes {
        let l = pc as f32;
        let angles = [l * 7.0 * PI / 6.0, l * 3.0 * PI / 2.0, l * 2.0 * PI / 3.0];
        let radii = [1.0, 1.0, 0.5];
        for k in 0..3 {
            c[2 * k] += radii[k] * angles[k].sin();
            c[2 * k + 1] += radii[k] * angles[k].cos();
        }
        n += 1;
    }
    if n > 0 {
        c.iter_mut().for_each(|x| *x /= n as f32);
    }
    c
}

/// Structure found in a file without annotations.
#[derive(Clone, Debug, PartialEq)]
pub struct Detected {
    /// Chords per beat of the grid, recognised over every pitched track.
    pub chords: Vec<Option<Chord>>,
    /// The track that looks like a melody, if any.
    pub melody_track: Option<usize>,
    /// Phrases segmented over the grid's bars.
    pub phrases: Vec<Segment>,
}

/// Chords per beat, the melody track and the phrases of `song` on `grid`: what `inspect`
/// prints and what the page's lanes start from.
pub fn detect_structure(song: &Song, grid: &Grid) -> Detected {
    let notes: Vec<(&Note, f32)> = song
        .tracks
        .iter()
        .filter(|t| !t.is_drums())
        .flat_map(|t| t.notes.iter().map(|n| (n, 1.0)))
        .collect();
    let chords = recognize(&notes, &grid.beat_ticks, RecognizeOptions::default());
    let melody_track = pick_melody_track(song);
    let melody = melody_track.map_or(&[][..], |i| &song.tracks[i].notes[..]);
    let phrases = if grid.num_bars() > 0 {
        segment_phrases(melody, grid, &chords, PhraseOptions::default())
    } else {
        Vec::new()
    };
    Detected {
        chords,
        melody_track,
        phrases,
    }
}

/// The highest pitch sounding at `step` of `roll` (0 when none, or past its end).
pub fn sounding_pitch(roll: &PianoRoll, step: usize) -> u8 {
    if step >= roll.num_steps {
        return 0;
    }
    (0..PITCHES)
        .rev()
        .find(|&p| roll.sustain(step, p))
        .map_or(0, |p| p as u8)
}

/// The phrase a step belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PhraseLabel {
    /// A, B, … for melodic phrases (same letter = repeat); i, o, b, x for intro, outro, bridge
    /// and transition.
    pub letter: char,
    /// Which phrase of the song, from 0.
    pub index: u16,
    /// The step's bar within the phrase, from 0, and the phrase's length in bars.
    pub bar: u16,
    pub bars: u16,
}

/// The phrase label of each bar covered by `phrases` (segments in bars), `None` between them;
/// one entry per bar up to the last phrase's end.
pub fn bar_phrases(phrases: &[Segment]) -> Vec<Option<PhraseLabel>> {
    let bars = phrases
        .iter()
        .map(|s| s.start_bar + s.bars)
        .max()
        .unwrap_or(0);
    let mut out = vec![None; bars];
    for (index, seg) in phrases.iter().enumerate() {
        for k in 0..seg.bars {
            out[seg.start_bar + k] = Some(PhraseLabel {
                letter: seg.letter,
                index: index.min(u16::MAX as usize) as u16,
                bar: k.min(u16::MAX as usize) as u16,
                bars: seg.bars.min(u16::MAX as usize) as u16,
            });
        }
    }
    out
}

/// Where bar `bar` of a phrase lane (one label per bar) was first heard: the same bar of the
/// first earlier phrase with its letter, when it belongs to a melodic phrase (A, B, …; not an
/// intro, outro, bridge or transition) that repeats one. What a planned repetition echoes.
pub fn first_occurrence(phrases: &[Option<PhraseLabel>], bar: usize) -> Option<usize> {
    let here = phrases.get(bar).copied().flatten()?;
    if !here.letter.is_ascii_uppercase() {
        return None;
    }
    (0..bar).find(|&j| {
        phrases[j]
            .is_some_and(|p| p.letter == here.letter && p.index < here.index && p.bar == here.bar)
    })
}

/// Labels for every step of a grid. All vectors have one entry per step.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepLabels {
    pub steps_per_beat: usize,
    /// The melody pitch sounding at the step (the highest, should several sound), 0 for a rest.
    pub melody: Vec<u8>,
    /// The chord at the step; `None` for no chord or where the labels do not reach.
    pub chord: Vec<Option<Chord>>,
    /// The phrase at the step; `None` where the labels do not reach.
    pub phrase: Vec<Option<PhraseLabel>>,
    /// The step's bar (from 0) and its position within the bar, in steps.
    pub bar: Vec<u32>,
    pub position: Vec<u16>,
}

impl StepLabels {
    /// Labels on `grid` from the melody roll, chords per beat (`beat_chords[b]` for beat `b`;
    /// beats past its end get none) and phrases in bars of the grid.
    pub fn new(
        grid: &Grid,
        melody: &PianoRoll,
        beat_chords: &[Option<Chord>],
        phrases: &[Segment],
    ) -> Self {
        let n = grid.num_steps();
        let spb = grid.steps_per_beat;
        let melody = (0..n).map(|s| sounding_pitch(melody, s)).collect();
        let chord = (0..n)
            .map(|s| beat_chords.get(s / spb).copied().flatten())
            .collect();
        let mut phrase = vec![None; n];
        for (bar, label) in bar_phrases(phrases).into_iter().enumerate() {
            if bar >= grid.num_bars() {
                break;
            }
            for s in grid.bar_steps(bar) {
                phrase[s] = label;
            }
        }
        let (bar, position) = (0..n)
            .map(|s| {
                let (bar, pos) = grid.bar_of_step(s);
                (bar as u32, pos.min(u16::MAX as usize) as u16)
            })
            .unzip();
        Self {
            steps_per_beat: spb,
            melody,
            chord,
            phrase,
            bar,
            position,
        }
    }

    /// Labels detected in a file without annotations (see [`detect_structure`]). Returns the
    /// labels and the melody track's index.
    pub fn detect(song: &Song, grid: &Grid) -> (Self, Option<usize>) {
        let found = detect_structure(song, grid);
        let melody = found
            .melody_track
            .map_or(&[][..], |i| &song.tracks[i].notes[..]);
        let roll = PianoRoll::from_notes(melody, grid);
        (
            Self::new(grid, &roll, &found.chords, &found.phrases),
            found.melody_track,
        )
    }

    pub fn len(&self) -> usize {
        self.melody.len()
    }

    pub fn is_empty(&self) -> bool {
        self.melody.is_empty()
    }

    /// The labels of `steps` (clipped to the labels' length).
    /// The phrase at the first step of every bar of `grid` (`None` where the labels do not
    /// reach): the phrase lane bar by bar, as `first_occurrence` reads it.
    pub fn bar_phrase_labels(&self, grid: &super::grid::Grid) -> Vec<Option<PhraseLabel>> {
        (0..grid.num_bars())
            .map(|b| self.phrase.get(grid.bar_steps(b).start).copied().flatten())
            .collect()
    }

    pub fn slice(&self, steps: std::ops::Range<usize>) -> Self {
        let end = steps.end.min(self.len());
        let start = steps.start.min(end);
        Self {
            steps_per_beat: self.steps_per_beat,
            melody: self.melody[start..end].to_vec(),
            chord: self.chord[start..end].to_vec(),
            phrase: self.phrase[start..end].to_vec(),
            bar: self.bar[start..end].to_vec(),
            position: self.position[start..end].to_vec(),
        }
    }

    /// Chord per beat (the chord at each beat's first step).
    pub fn beat_chords(&self) -> Vec<Option<Chord>> {
        self.chord
            .iter()
            .step_by(self.steps_per_beat.max(1))
            .copied()
            .collect()
    }
}

/// Labels for tests: two bars of 4/4 at 2 steps per beat after a pickup beat, a melody (C5
/// then G4), chords none | C C | G per beat, and one phrase A over the two bars.
#[cfg(test)]
pub(crate) fn pickup_labels() -> (StepLabels, [Option<Chord>; 4]) {
    use super::midi::tests::note;
    let grid = Grid::regular((0..=9).map(|b| b * 480).collect(), 2, 4, 1);
    let melody = PianoRoll::from_notes(&[note(72, 0, 480), note(67, 960, 1200)], &grid);
    let (c, g) = (
        Chord::parse_any("C").ok().flatten(),
        Chord::parse_any("G").ok().flatten(),
    );
    let chords = [None, c, c, g];
    let phrases = [Segment {
        start_bar: 1,
        bars: 2,
        letter: 'A',
    }];
    (StepLabels::new(&grid, &melody, &chords, &phrases), chords)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::music::chords::Quality;

    #[test]
    fn labels_are_laid_out_per_step() {
        let (l, chords) = pickup_labels();
        let (c, g) = (chords[1].unwrap(), chords[3].unwrap());
        assert_eq!(l.len(), 18);
        assert_eq!(&l.melody[..6], &[72, 72, 0, 0, 67, 0]);
        assert_eq!(l.chord[2], Some(c));
        assert_eq!(l.chord[6], Some(g));
        assert_eq!(l.chord[8], None, "past the given chords");
        assert_eq!(l.phrase[1], None, "the pickup is in no phrase");
        let p = l.phrase[11].unwrap();
        assert_eq!((p.letter, p.index, p.bar, p.bars), ('A', 0, 1, 2));
        assert_eq!((l.bar[1], l.position[1]), (0, 1));
        assert_eq!((l.bar[2], l.position[2]), (1, 0));
        assert_eq!((l.bar[17], l.position[17]), (2, 7));
        assert_eq!(l.beat_chords()[..4], chords);
        let s = l.slice(2..6);
        assert_eq!((s.len(), s.chord[0], s.bar[0]), (4, Some(c), 1));
    }

    #[test]
    fn chord_ids_are_distinct_and_start_at_one() {
        assert_eq!(chord_id(None), 0.0);
        let id = |root, quality| chord_id(Some(Chord { root, quality }));
        assert_eq!(id(0, Quality::Maj), 1.0);
        assert_eq!(id(0, Quality::Min), 2.0);
        assert_eq!(id(1, Quality::Maj), 15.0);
        let mut all: Vec<f32> = (0..12)
            .flat_map(|r| Quality::ALL.map(|q| id(r, q)))
            .collect();
        all.sort_by(f32::total_cmp);
        all.dedup();
        assert_eq!(all.len(), 12 * 14);
        assert_eq!(all[all.len() - 1], 168.0);
    }

    #[test]
    fn tonal_centroids_put_related_chords_close() {
        let chord = |root: u8, quality| Chord { root, quality };
        let at = |c: Chord| tonal_centroid(c.pitch_classes());
        let dist = |a: [f32; 6], b: [f32; 6]| {
            a.iter()
                .zip(&b)
                .map(|(x, y)| (x - y).powi(2))
                .sum::<f32>()
                .sqrt()
        };
        let c = at(chord(0, Quality::Maj));
        let am = at(chord(9, Quality::Min));
        let g = at(chord(7, Quality::Maj));
        let fs = at(chord(6, Quality::Maj));
        assert!(dist(c, am) < dist(c, fs) && dist(c, g) < dist(c, fs));
        // Transposition moves a chord, it does not change its shape.
        let d = at(chord(2, Quality::Maj));
        assert!((dist(c, g) - dist(d, at(chord(9, Quality::Maj)))).abs() < 1e-5);
        assert_eq!(tonal_centroid([]), [0.0; 6]);
    }
}
