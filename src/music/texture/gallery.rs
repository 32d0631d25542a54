//! The gallery's textures, found in the training songs' piano parts by rule (`pianoformer
//! textures` writes `settings/textures.json` from them): for each [`Kind`] the four bars of
//! 4/4 that fit its rule best, steady from bar to bar. The rules read the onsets of each
//! bar (which sixteenths start a note, how many notes, in which register) and the notes'
//! written lengths:
//!
//! - **ballad**: few onsets (2–6 a bar), long notes, a bass note on every downbeat;
//! - **arpeggio**: a busy line of single notes (8 or more onsets a bar, most of them one note,
//!   at least five pitches a bar);
//! - **block**: chords struck together (most onsets three notes or more above the bass), 4–8 a
//!   bar on the eighths, at least half of them on the beat;
//! - **stride**: bass on beats 1 and 3, a chord above it on beats 2 and 4, little else;
//! - **syncopated**: most onsets off the beat, anticipating the next beat (an "and" with
//!   nothing on the beat after it).
//!
//! A window also has to be steady: each bar's rhythm like the others' (mean cosine of the
//! bars' rhythm vectors at least [`STEADY`]), so a gallery texture is one pattern, not a
//! fill.

use super::{REGISTERS, register, rhythm};
use crate::music::roll::{PITCHES, PianoRoll};

/// The gallery's textures, in its order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Ballad,
    Arpeggio,
    Block,
    Stride,
    Syncopated,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::Ballad,
        Kind::Arpeggio,
        Kind::Block,
        Kind::Stride,
        Kind::Syncopated,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Ballad => "ballad",
            Kind::Arpeggio => "arpeggio",
            Kind::Block => "block",
            Kind::Stride => "stride",
            Kind::Syncopated => "syncopated",
        }
    }
}

/// Steps of a 4/4 bar (sixteenths).
pub const BAR: usize = 16;
/// Bars of a gallery texture.
pub const BARS: usize = 4;
/// How alike a window's bars must be (mean cosine of their rhythm vectors).
pub const STEADY: f64 = 0.7;

/// What the rules read of one bar.
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    /// Per sixteenth: the notes that start there in each register.
    pub onsets: [[u8; REGISTERS]; BAR],
    /// Distinct pitches that start in the bar.
    pub pitches: usize,
    /// Mean written length of the notes that start in it, in steps.
    pub mean_length: f64,
}

impl Bar {
    /// Bar `start..start + 16` of `roll`.
    pub fn of(roll: &PianoRoll, start: usize) -> Self {
        let mut onsets = [[0u8; REGISTERS]; BAR];
        let mut pitches = 0u128;
        let (mut length, mut notes) = (0usize, 0usize);
        for (i, slot) in onsets.iter_mut().enumerate() {
            let t = start + i;
            for p in 0..PITCHES {
                if t >= roll.num_steps || !roll.onset(t, p) {
                    continue;
                }
                slot[register(p)] += 1;
                pitches |= 1 << p;
                let mut end = t + 1;
                while end < roll.num_steps && roll.sustain(end, p) && !roll.onset(end, p) {
                    end += 1;
                }
                length += end - t;
                notes += 1;
            }
        }
        Self {
            onsets,
            pitches: pitches.count_ones() as usize,
            mean_length: if notes > 0 {
                length as f64 / notes as f64
            } else {
                0.0
            },
        }
    }

    /// Sixteenths where something starts.
    fn steps(&self) -> Vec<usize> {
        (0..BAR)
            .filter(|&i| self.onsets[i].iter().any(|&n| n > 0))
            .collect()
    }

    fn notes_at(&self, i: usize) -> u8 {
        self.onsets[i].iter().sum()
    }

    /// Notes starting at `i` above the bass.
    fn upper_at(&self, i: usize) -> u8 {
        self.onsets[i][1..].iter().sum()
    }

    /// How well the bar fits `kind`'s rule, from 0 (not at all) up.
    pub fn fit(&self, kind: Kind) -> f64 {
        let steps = self.steps();
        let n = steps.len();
        if n == 0 {
            return 0.0;
        }
        let share =
            |f: &dyn Fn(usize) -> bool| steps.iter().filter(|&&i| f(i)).count() as f64 / n as f64;
        match kind {
            Kind::Ballad => {
                let few = (2..=6).contains(&n);
                let bass = self.onsets[0][0] > 0;
                if !(few && bass) {
                    return 0.0;
                }
                (self.mean_length / 8.0).min(1.0)
            }
            Kind::Arpeggio => {
                if n < 8 || self.pitches < 5 {
                    return 0.0;
                }
                let single = share(&|i| self.notes_at(i) == 1);
                if single < 0.75 { 0.0 } else { single }
            }
            Kind::Block => {
                let on_beats = share(&|i| i % 4 == 0);
                if !(4..=8).contains(&n) || steps.iter().any(|i| i % 2 == 1) || on_beats < 0.5 {
                    return 0.0;
                }
                let chords = share(&|i| self.upper_at(i) >= 3);
                if chords < 0.75 { 0.0 } else { chords }
            }
            Kind::Stride => {
                let bass = [0, 8].iter().filter(|&&i| self.onsets[i][0] > 0).count();
                let chord = [4, 12]
                    .iter()
                    .filter(|&&i| self.onsets[i][0] == 0 && self.upper_at(i) >= 2)
                    .count();
                let extra = n.saturating_sub(4) as f64;
                if bass + chord < 4 {
                    return 0.0;
                }
                1.0 / (1.0 + 0.25 * extra)
            }
            Kind::Syncopated => {
                let off = share(&|i| i % 4 != 0);
                let anticipations = steps
                    .iter()
                    .filter(|&&i| i % 4 == 2 || i % 4 == 3)
                    .filter(|&&i| {
                        let beat = (i / 4 + 1) * 4;
                        beat >= BAR || self.notes_at(beat) == 0
                    })
                    .count();
                if off < 0.5 || anticipations < 2 || n < 4 {
                    return 0.0;
                }
                off * (anticipations as f64 / 3.0).min(1.0)
            }
        }
    }
}

/// How well bars `start..start + 64` of `roll` fit `kind`: the weakest bar's fit, times how
/// steady they are; 0 where a bar does not fit or they are not steady.
pub fn window_fit(roll: &PianoRoll, start: usize, kind: Kind) -> f64 {
    let bars: Vec<Bar> = (0..BARS).map(|k| Bar::of(roll, start + k * BAR)).collect();
    let fit = bars
        .iter()
        .map(|b| b.fit(kind))
        .fold(f64::INFINITY, f64::min);
    if fit <= 0.0 {
        return 0.0;
    }
    let steady = steadiness(roll, start);
    if steady < STEADY {
        return 0.0;
    }
    fit * steady
}

/// The mean cosine similarity of the rhythm vectors of the four bars from `start`, pair by
/// pair.
pub fn steadiness(roll: &PianoRoll, start: usize) -> f64 {
    let vectors: Vec<Vec<f32>> = (0..BARS)
        .map(|k| {
            let seg = super::Segment {
                phrase: 0,
                letter: 'A',
                number: 0,
                start: start + k * BAR,
                len: BAR,
            };
            rhythm(roll, &seg)
        })
        .collect();
    let (mut sum, mut n) = (0.0, 0);
    for i in 0..BARS {
        for j in i + 1..BARS {
            sum += super::similarity(&vectors[i], &vectors[j]).unwrap_or(0.0);
            n += 1;
        }
    }
    sum / n as f64
}

#[cfg(test)]
mod tests;
