//! The lanes as numbers a model reads: F-StrIPE's structure coordinates per step or token
//! ([`LabelFeatures::coordinates`], [`token_coordinates`]) and the lanes as input features
//! per step ([`LabelFeatures::write_features`]), from the labels `music` makes. The model
//! knows only how many there are ([`StructureLevel::dims`], [`LABEL_FEATURES`]).

use crate::model::pe::StructureLevel;
use crate::music::chords::Chord;
use crate::music::labels::{PhraseLabel, StepLabels, chord_id, tonal_centroid};
use crate::music::tokens::places::TokenPlace;

/// Input features per step that [`LabelFeatures::write_features`] writes.
pub const LABEL_FEATURES: usize = 56;

/// Scale of the chord coordinates.
const CHORD_SCALE: f32 = 12.0;

/// The chord's coordinates at [`StructureLevel::Chord`]: its tonal centroid, scaled (no chord:
/// the origin).
fn chord_coordinates(chord: Option<Chord>) -> [f32; 6] {
    chord
        .map_or([0.0; 6], |c| tonal_centroid(c.pitch_classes()))
        .map(|x| x * CHORD_SCALE)
}

/// F-StrIPE's coordinates of tokens at `places` for `levels`, row-major `[len, Σ dims]`: the
/// chord in force (its root moved `transpose` semitones), the phrase of the token's bar
/// (`bar_phrases[bar]`, none past its end) and its bar's place in it, the position in the bar,
/// and the time in beats (F-StrIPE reads differences only). Tokens carry no melody:
/// [`StructureLevel::Melody`] reads 0.
pub fn token_coordinates(
    places: &[TokenPlace],
    bar_phrases: &[Option<PhraseLabel>],
    levels: &[StructureLevel],
    transpose: i32,
) -> Vec<f32> {
    let mut out = Vec::with_capacity(places.len() * levels.iter().map(|l| l.dims()).sum::<usize>());
    for place in places {
        let phrase = place
            .bar
            .and_then(|b| bar_phrases.get(b as usize).copied().flatten());
        let chord = place.chord.map(|mut c| {
            c.root = (c.root as i32 + transpose).rem_euclid(12) as u8;
            c
        });
        for level in levels {
            match level {
                StructureLevel::Melody => out.push(0.0),
                StructureLevel::Chord => out.extend(chord_coordinates(chord)),
                StructureLevel::ChordId => out.push(chord_id(chord)),
                StructureLevel::Phrase => out.push(phrase_code(phrase)),
                StructureLevel::Position => out.push(place.position as f32),
                StructureLevel::PhraseBar => out.push(phrase.map_or(0.0, |p| p.bar as f32)),
                StructureLevel::Time => out.push(place.beat),
            }
        }
    }
    out
}

/// The number a phrase letter stands for.
fn phrase_code(phrase: Option<PhraseLabel>) -> f32 {
    match phrase.map(|p| p.letter) {
        Some(c @ 'A'..='Z') => (c as u8 - b'A' + 1) as f32,
        Some(c @ 'a'..='z') => (c as u8 - b'a' + 33) as f32,
        _ => 0.0,
    }
}

/// The labels of every step as what a model reads.
pub trait LabelFeatures {
    /// Structure coordinates of every step for `levels`, row-major `[len, Σ dims]`: the
    /// positions F-StrIPE puts in place of the step index.
    fn coordinates(&self, levels: &[StructureLevel]) -> Vec<f32>;

    /// Step `s`'s coordinates (as in [`LabelFeatures::coordinates`]) appended to `out`: what a
    /// model stepping through a song reads at `s`.
    fn write_coordinates(&self, s: usize, levels: &[StructureLevel], out: &mut Vec<f32>);

    /// The lanes at `step` as input features, written into `out` ([`LABEL_FEATURES`] values;
    /// zeros past the labels' end).
    fn write_features(&self, step: usize, out: &mut [f32]);
}

impl LabelFeatures for StepLabels {
    /// Structure coordinates of every step for `levels`, row-major `[len, Σ dims]`: the
    /// positions F-StrIPE puts in place of the step index.
    fn coordinates(&self, levels: &[StructureLevel]) -> Vec<f32> {
        let mut out =
            Vec::with_capacity(self.len() * levels.iter().map(|l| l.dims()).sum::<usize>());
        for s in 0..self.len() {
            self.write_coordinates(s, levels, &mut out);
        }
        out
    }

    /// Step `s`'s coordinates (as in [`StepLabels::coordinates`]) appended to `out`: what a
    /// model stepping through a song reads at `s`.
    fn write_coordinates(&self, s: usize, levels: &[StructureLevel], out: &mut Vec<f32>) {
        let per_sixteenth = 4.0 / self.steps_per_beat.max(1) as f32;
        for level in levels {
            match level {
                StructureLevel::Melody => out.push(self.melody[s] as f32),
                StructureLevel::Chord => out.extend(chord_coordinates(self.chord[s])),
                StructureLevel::ChordId => out.push(chord_id(self.chord[s])),
                StructureLevel::Phrase => out.push(phrase_code(self.phrase[s])),
                StructureLevel::Position => out.push(self.position[s] as f32 * per_sixteenth),
                StructureLevel::PhraseBar => out.push(self.phrase[s].map_or(0.0, |p| p.bar as f32)),
                StructureLevel::Time => out.push(s as f32 / self.steps_per_beat.max(1) as f32),
            }
        }
    }

    /// The lanes at `step` as input features, written into `out` ([`LABEL_FEATURES`] values;
    /// zeros past the labels' end):
    ///
    /// | values | what |
    /// |---|---|
    /// | 12 | chord chroma: its pitch classes |
    /// | 12 | chord root, one-hot |
    /// | 1 | no chord |
    /// | 1 | a chord starts here (it differs from the step before's) |
    /// | 11 | phrase letter, one-hot: A–E, other upper case, i, o, b, other lower case, none |
    /// | 1 | the phrase's first bar |
    /// | 1 | the phrase's last bar |
    /// | 1 | the bar's place in the phrase, 0 at its first bar to 1 at its last |
    /// | 16 | position in the bar in sixteenths, one-hot (longer bars fold onto the last) |
    fn write_features(&self, step: usize, out: &mut [f32]) {
        let out = &mut out[..LABEL_FEATURES];
        out.fill(0.0);
        if step >= self.len() {
            return;
        }
        let chord = self.chord[step];
        match chord {
            Some(c) => {
                for pc in c.pitch_classes() {
                    out[pc as usize % 12] = 1.0;
                }
                out[12 + c.root as usize % 12] = 1.0;
            }
            None => out[24] = 1.0,
        }
        if step == 0 || self.chord[step - 1] != chord {
            out[25] = 1.0;
        }
        let letter = match self.phrase[step].map(|p| p.letter) {
            Some(c @ 'A'..='E') => (c as u8 - b'A') as usize,
            Some('A'..='Z') => 5,
            Some('i') => 6,
            Some('o') => 7,
            Some('b') => 8,
            Some(_) => 9,
            None => 10,
        };
        out[26 + letter] = 1.0;
        if let Some(p) = self.phrase[step] {
            out[37] = (p.bar == 0) as u8 as f32;
            out[38] = (p.bar + 1 >= p.bars) as u8 as f32;
            out[39] = p.bar as f32 / (p.bars.max(2) - 1) as f32;
        }
        let sixteenth = self.position[step] as usize * 4 / self.steps_per_beat.max(1);
        out[40 + sixteenth.min(15)] = 1.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::music::chords::Quality;
    use crate::music::grid::Grid;
    use crate::music::phrases::Segment;
    use crate::music::roll::PianoRoll;

    #[test]
    fn coordinates_follow_the_labels_per_step() {
        let (l, _) = crate::music::labels::pickup_labels();
        let levels = [
            StructureLevel::Melody,
            StructureLevel::Phrase,
            StructureLevel::Position,
        ];
        let coords = l.coordinates(&levels);
        assert_eq!(coords.len(), 18 * 3);
        // Step 11: melody rests, phrase A, position 1 step (2 a beat) into bar 2 = 2 sixteenths.
        assert_eq!(&coords[33..36], &[0.0, 1.0, 2.0]);
        assert_eq!(l.coordinates(&[StructureLevel::Chord]).len(), 18 * 6);
        // As identities: one number per step, equal for equal chords, 0 where there is none.
        let ids = l.coordinates(&[StructureLevel::ChordId]);
        assert_eq!(ids.len(), 18);
        for (id, chord) in ids.iter().zip(&l.chord) {
            assert_eq!(*id, chord_id(*chord));
        }
        let level: StructureLevel = serde_json::from_str("\"chord_id\"").unwrap();
        assert_eq!((level, level.dims()), (StructureLevel::ChordId, 1));
    }

    #[test]
    fn lane_features_encode_chord_phrase_and_position() {
        let grid = Grid::regular((0..=8).map(|b| b * 480).collect(), 4, 4, 0);
        let melody = PianoRoll::new(grid.num_steps());
        let am = Chord {
            root: 9,
            quality: Quality::Min,
        };
        let chords = [Some(am), Some(am), None, None, Some(am)];
        let phrases = [Segment {
            start_bar: 0,
            bars: 2,
            letter: 'B',
        }];
        let l = StepLabels::new(&grid, &melody, &chords, &phrases);
        let at = |s: usize| {
            let mut f = vec![9.0; LABEL_FEATURES];
            l.write_features(s, &mut f);
            f
        };
        let f = at(0);
        let chroma: Vec<usize> = (0..12).filter(|&i| f[i] == 1.0).collect();
        assert_eq!(chroma, vec![0, 4, 9], "A minor is A C E");
        assert_eq!((f[12 + 9], f[24], f[25]), (1.0, 0.0, 1.0));
        assert_eq!(f[26 + 1], 1.0, "phrase B");
        assert_eq!((f[37], f[38], f[39], f[40]), (1.0, 0.0, 0.0, 1.0));
        assert_eq!(f.iter().sum::<f32>(), 3.0 + 1.0 + 1.0 + 1.0 + 1.0 + 1.0);
        let f = at(5);
        assert_eq!((f[25], f[40 + 5]), (0.0, 1.0), "same chord, sixteenth 5");
        let f = at(8);
        assert_eq!((f[24], f[25]), (1.0, 1.0), "no chord starts at beat 2");
        let f = at(16);
        assert_eq!((f[24], f[25]), (0.0, 1.0), "A minor again in bar 2");
        assert_eq!((f[37], f[38], f[39], f[40]), (0.0, 1.0, 1.0, 1.0));
        assert!(at(l.len()).iter().all(|&x| x == 0.0), "past the end");
        // Transposition moves the chroma and the root together.
        let up = Chord { root: 11, ..am };
        let l2 = StepLabels::new(&grid, &melody, &[Some(up)], &phrases);
        let mut g = vec![0.0; LABEL_FEATURES];
        l2.write_features(0, &mut g);
        assert_eq!(g[12 + 11], 1.0);
        assert_eq!(
            (0..12).filter(|&i| g[i] == 1.0).collect::<Vec<_>>(),
            vec![2, 6, 11]
        );
    }
}
