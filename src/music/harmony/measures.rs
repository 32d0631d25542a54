//! How good a harmonization is: accuracy against annotated chords per beat (root, root and
//! family, exact), and the melody-harmonization measures of Yeh et al., "Automatic melody
//! harmonization with triad chords: a comparative study" (2020), which need no reference:
//!
//! - **CTnCTR**, chord-tone to non-chord-tone ratio: `(n_c + n_p) / (n_c + n_n)` over melody
//!   notes, `n_c` chord tones, `n_n` non-chord tones, `n_p` the non-chord tones within two
//!   semitones of the note after them (passing and neighbour tones);
//! - **PCS**, pitch consonance score: per sixteenth the melody sounds over a chord, the mean over
//!   the chord's tones of +1 for a unison, third, fifth or sixth above the chord tone, 0 for a
//!   fourth, −1 otherwise;
//! - **MCTD**, melody–chord tonal distance: the distance between a melody note's tonal centroid
//!   and its chord's, averaged over notes weighted by their length;
//! - **CHE** and **CC**, chord histogram entropy (natural log, over beats) and coverage (distinct
//!   chords);
//! - **CTD**, chord tonal distance: the mean tonal-centroid distance across chord changes.

use std::ops::Range;

use serde::Serialize;

use crate::music::chords::{Chord, Quality};
use crate::music::labels::tonal_centroid;
use crate::music::roll::{PITCHES, PianoRoll};

/// Counts of beats matched against annotated chords.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Accuracy {
    /// Annotated beats with a chord.
    pub beats: usize,
    pub root: usize,
    /// Root and family (maj / min / dim / aug / sus; sevenths and sixths as their triad).
    pub family: usize,
    pub exact: usize,
    /// Summed over those beats: the share of the predicted chord's tones that are tones of the
    /// annotated one (what a piano playing the predicted chord gets right; no chord: 0).
    pub tones: f64,
}

impl Accuracy {
    /// `predicted` against `reference` (one chord per beat) over `beats`, where the reference
    /// names a chord; a predicted "no chord" is wrong there.
    pub fn of(
        predicted: &[Option<Chord>],
        reference: &[Option<Chord>],
        beats: Range<usize>,
    ) -> Self {
        let mut a = Self::default();
        for b in beats {
            let Some(r) = reference.get(b).copied().flatten() else {
                continue;
            };
            a.beats += 1;
            if let Some(p) = predicted.get(b).copied().flatten() {
                a.root += (p.root == r.root) as usize;
                a.family += (p.root == r.root && p.quality.family() == r.quality.family()) as usize;
                a.exact += (p == r) as usize;
                let theirs: Vec<u8> = r.pitch_classes().collect();
                let (mut shared, mut all) = (0usize, 0usize);
                for pc in p.pitch_classes() {
                    all += 1;
                    shared += theirs.contains(&pc) as usize;
                }
                a.tones += shared as f64 / all.max(1) as f64;
            }
        }
        a
    }

    pub fn add(&mut self, other: Accuracy) {
        self.beats += other.beats;
        self.root += other.root;
        self.family += other.family;
        self.exact += other.exact;
        self.tones += other.tones;
    }

    /// Root, root + family and exact accuracy as shares.
    pub fn rates(&self) -> [f64; 3] {
        let n = self.beats.max(1) as f64;
        [self.root, self.family, self.exact].map(|x| x as f64 / n)
    }

    /// The mean share of the predicted chords' tones that are tones of the annotated chords.
    pub fn tone_share(&self) -> f64 {
        self.tones / self.beats.max(1) as f64
    }
}

/// Melody notes of a roll: (onset step, pitch, length in steps).
pub fn roll_notes(roll: &PianoRoll) -> Vec<(usize, u8, usize)> {
    let mut notes = Vec::new();
    for s in 0..roll.num_steps {
        for p in 0..PITCHES {
            if roll.onset(s, p) {
                let mut end = s + 1;
                while end < roll.num_steps && roll.sustain(end, p) && !roll.onset(end, p) {
                    end += 1;
                }
                notes.push((s, p as u8, end - s));
            }
        }
    }
    notes
}

/// The reference-free measures of one harmonization (see the module's documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Measures {
    pub ctnctr: f64,
    pub pcs: f64,
    pub mctd: f64,
    pub che: f64,
    pub cc: f64,
    pub ctd: f64,
    /// Share of the beats with a chord that hold a sus2 or sus4 chord.
    pub sus: f64,
}

fn distance(a: [f32; 6], b: [f32; 6]) -> f64 {
    a.iter()
        .zip(&b)
        .map(|(x, y)| ((x - y) as f64).powi(2))
        .sum::<f64>()
        .sqrt()
}

/// What an interval of `semitones` (melody above chord tone, mod 12) scores in PCS.
fn consonance(semitones: i32) -> f64 {
    match semitones.rem_euclid(12) {
        0 | 3 | 4 | 7 | 8 | 9 => 1.0,
        5 => 0.0,
        _ => -1.0,
    }
}

/// The measures of `chords` (one per beat of `steps_per_beat` steps) under `melody`, over
/// `beats`. `None` when the melody has no note over a chord there.
pub fn measures(
    melody: &PianoRoll,
    chords: &[Option<Chord>],
    steps_per_beat: usize,
    beats: Range<usize>,
) -> Option<Measures> {
    let spb = steps_per_beat.max(1);
    let chord_at = |step: usize| -> Option<Chord> {
        let b = step / spb;
        if beats.contains(&b) {
            chords.get(b).copied().flatten()
        } else {
            None
        }
    };
    let notes = roll_notes(melody);
    let (mut nc, mut nn, mut np) = (0usize, 0usize, 0usize);
    let (mut tonal, mut weight) = (0.0f64, 0.0f64);
    for (i, &(s, p, len)) in notes.iter().enumerate() {
        let Some(c) = chord_at(s) else { continue };
        let pc = p % 12;
        if c.pitch_classes().any(|q| q == pc) {
            nc += 1;
        } else {
            nn += 1;
            let next = notes[i + 1..].iter().find(|n| n.0 > s);
            if next.is_some_and(|n| (n.1 as i32 - p as i32).abs() <= 2) {
                np += 1;
            }
        }
        tonal += len as f64 * distance(tonal_centroid([pc]), tonal_centroid(c.pitch_classes()));
        weight += len as f64;
    }
    let (mut pcs, mut pcs_n) = (0.0f64, 0usize);
    for s in 0..melody.num_steps {
        let Some(c) = chord_at(s) else { continue };
        for p in 0..PITCHES {
            if melody.sustain(s, p) {
                let tones: Vec<u8> = c.pitch_classes().collect();
                pcs += tones
                    .iter()
                    .map(|&q| consonance(p as i32 - q as i32))
                    .sum::<f64>()
                    / tones.len() as f64;
                pcs_n += 1;
            }
        }
    }
    if nc + nn == 0 || pcs_n == 0 {
        return None;
    }
    let used: Vec<Chord> = beats
        .clone()
        .filter_map(|b| chords.get(b).copied().flatten())
        .collect();
    let mut counts: Vec<(Chord, usize)> = Vec::new();
    for &c in &used {
        match counts.iter_mut().find(|(d, _)| *d == c) {
            Some((_, n)) => *n += 1,
            None => counts.push((c, 1)),
        }
    }
    let total = used.len().max(1) as f64;
    let che = -counts
        .iter()
        .map(|(_, n)| {
            let p = *n as f64 / total;
            p * p.ln()
        })
        .sum::<f64>();
    let mut changes = Vec::new();
    for w in used.windows(2) {
        if w[0] != w[1] {
            changes.push(distance(
                tonal_centroid(w[0].pitch_classes()),
                tonal_centroid(w[1].pitch_classes()),
            ));
        }
    }
    let sus = used
        .iter()
        .filter(|c| matches!(c.quality, Quality::Sus2 | Quality::Sus4))
        .count() as f64
        / total;
    Some(Measures {
        ctnctr: (nc + np) as f64 / (nc + nn) as f64,
        pcs: pcs / pcs_n as f64,
        mctd: tonal / weight.max(1.0),
        che,
        cc: counts.len() as f64,
        ctd: changes.iter().sum::<f64>() / changes.len().max(1) as f64,
        sus,
    })
}

/// The mean of each measure over songs.
pub fn mean_measures(all: &[Measures]) -> Measures {
    let n = all.len().max(1) as f64;
    let mean = |f: fn(&Measures) -> f64| all.iter().map(f).sum::<f64>() / n;
    Measures {
        ctnctr: mean(|m| m.ctnctr),
        pcs: mean(|m| m.pcs),
        mctd: mean(|m| m.mctd),
        che: mean(|m| m.che),
        cc: mean(|m| m.cc),
        ctd: mean(|m| m.ctd),
        sus: mean(|m| m.sus),
    }
}

/// Whether two passages of a progression carry the same chords: over the beat pairs
/// `(a + i, b + i)`, `i < len`, where both name a chord, the share naming the same root and
/// family. A phrase and its repetition are compared this way.
pub fn agreement(chords: &[Option<Chord>], a: usize, b: usize, len: usize) -> Option<f64> {
    let (mut same, mut n) = (0usize, 0usize);
    for i in 0..len {
        if let (Some(Some(x)), Some(Some(y))) = (chords.get(a + i), chords.get(b + i)) {
            n += 1;
            same += (x.root == y.root && x.quality.family() == y.quality.family()) as usize;
        }
    }
    (n > 0).then(|| same as f64 / n as f64)
}
