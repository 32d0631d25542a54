//! Texture: a piano part's rhythm and register two bars at a time, and how much of it returns
//! where the phrase lane repeats a letter.
//!
//! - A **rhythm vector** ([`rhythm`]) is, for each of three registers (MIDI pitch below 48,
//!   48–63, 64 and up: [`register`]), whether any note starts at each step of a 2-bar segment
//!   (32 sixteenths in 4/4, so 96 values).
//! - **ILS** ([`ils`], AccoMontage-3's inter-phrase similarity): the mean cosine similarity of
//!   the rhythm vectors of segments in two different phrases with the same letter, over the
//!   mean of every pair of segments in two different phrases. 1 is no structure: the second A
//!   plays no more like the first A than like a B. POP909's pianists score about 1.13.
//!
//! Only melodic phrases (A, B, …) count: an intro, outro, bridge or transition has no letter to
//! return to. A segment is two whole bars of its phrase (bars 0–1, 2–3, …; a phrase's odd last
//! bar is left out); one where nothing starts has no direction and is left out too.

use super::labels::{PhraseLabel, StepLabels};
use super::roll::{PITCHES, PianoRoll};

/// Registers of a rhythm vector.
pub const REGISTERS: usize = 3;

/// Bars per segment.
pub const SEGMENT_BARS: u16 = 2;

/// The register of `pitch`: 0 below 48 (the bass), 1 for 48–63, 2 from 64 up.
pub fn register(pitch: usize) -> usize {
    match pitch {
        0..48 => 0,
        48..64 => 1,
        _ => 2,
    }
}

/// The pitches of register `r` that a piano has (A0 to C8), as bits.
pub fn register_mask(r: usize) -> u128 {
    crate::music::roll::PIANO_KEYS
        .filter(|&p| register(p) == r)
        .fold(0u128, |m, p| m | 1 << p)
}

/// The pitches that start at `step` of `roll`, as bits.
pub fn onset_bits(roll: &PianoRoll, step: usize) -> u128 {
    (0..PITCHES)
        .filter(|&p| roll.onset(step, p))
        .fold(0u128, |m, p| m | 1 << p)
}

/// Two bars of one melodic phrase: its steps `start..start + len` of the labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// The phrase's index in the song and its letter.
    pub phrase: u16,
    pub letter: char,
    /// Which segment of the phrase (0: its bars 0–1).
    pub number: u16,
    pub start: usize,
    pub len: usize,
}

/// The 2-bar segments of the melodic phrases of `labels`, in order: runs of steps of one
/// phrase's bars 2k and 2k + 1 that hold both whole (from the first bar's first step to the
/// second's last; a gap in the lane, or labels that start or end mid-segment, leave a part
/// that is not counted).
pub fn segments(labels: &StepLabels) -> Vec<Segment> {
    let mut out: Vec<Segment> = Vec::new();
    let n = labels.phrase.len();
    // A run: its phrase, its segment number, its first step.
    let mut open: Option<(PhraseLabel, u16, usize)> = None;
    let whole = |p: &PhraseLabel, number: u16, start: usize, end: usize| {
        let starts = labels.position.get(start) == Some(&0)
            && labels.phrase[start].is_some_and(|q| q.bar == number * SEGMENT_BARS);
        let ends = end == n || labels.position.get(end) == Some(&0);
        let both = labels.phrase[end - 1].is_some_and(|q| q.bar == number * SEGMENT_BARS + 1);
        starts && ends && both && (number + 1) * SEGMENT_BARS <= p.bars
    };
    let mut close = |open: &mut Option<(PhraseLabel, u16, usize)>, end: usize| {
        if let Some((p, number, start)) = open.take()
            && whole(&p, number, start, end)
        {
            out.push(Segment {
                phrase: p.index,
                letter: p.letter,
                number,
                start,
                len: end - start,
            });
        }
    };
    for (t, phrase) in labels.phrase.iter().enumerate() {
        let here = phrase
            .filter(|p| p.letter.is_ascii_uppercase())
            .map(|p| (p, p.bar / SEGMENT_BARS));
        let same =
            matches!((open, here), (Some((o, n, _)), Some((p, m))) if o.index == p.index && n == m);
        if !same {
            close(&mut open, t);
            open = here.map(|(p, m)| (p, m, t));
        }
    }
    close(&mut open, n);
    out
}

/// The rhythm vector of `roll` over `seg`: per register, whether a note starts at each step.
pub fn rhythm(roll: &PianoRoll, seg: &Segment) -> Vec<f32> {
    let masks: Vec<u128> = (0..REGISTERS).map(register_mask).collect();
    let mut v = vec![0f32; REGISTERS * seg.len];
    for i in 0..seg.len {
        let t = seg.start + i;
        if t >= roll.num_steps {
            break;
        }
        let bits = onset_bits(roll, t);
        for (r, m) in masks.iter().enumerate() {
            if bits & m != 0 {
                v[r * seg.len + i] = 1.0;
            }
        }
    }
    v
}

/// Cosine similarity of two rhythm vectors, register by register aligned from each segment's
/// start (the shorter one's steps only, where the meters differ); `None` when either is zero.
pub fn similarity(a: &[f32], b: &[f32]) -> Option<f64> {
    let (la, lb) = (a.len() / REGISTERS, b.len() / REGISTERS);
    let n = la.min(lb);
    let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
    for r in 0..REGISTERS {
        for i in 0..n {
            let (x, y) = (a[r * la + i] as f64, b[r * lb + i] as f64);
            dot += x * y;
            na += x * x;
            nb += y * y;
        }
    }
    (na > 0.0 && nb > 0.0).then(|| dot / (na * nb).sqrt())
}

/// A song's inter-phrase similarity.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Ils {
    /// Mean similarity of segments of two different phrases with the same letter.
    pub same: f64,
    /// Mean similarity of segments of any two different phrases.
    pub all: f64,
    /// Pairs counted in each.
    pub same_pairs: usize,
    pub all_pairs: usize,
    /// Mean similarity of two segments of one phrase, and the pairs counted (a texture a
    /// pianist keeps through a section; not part of the ratio). `None` where no phrase has two.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub within: Option<f64>,
    pub within_pairs: usize,
}

impl Ils {
    /// `same / all`: 1 is no structure.
    pub fn ratio(&self) -> f64 {
        self.same / self.all
    }
}

/// The ILS of `roll` under the phrase lane of `labels` (one label per step of the roll);
/// `None` when no letter returns (or nothing plays where one does).
pub fn ils(roll: &PianoRoll, labels: &StepLabels) -> Option<Ils> {
    let segs = segments(labels);
    let vectors: Vec<Option<Vec<f32>>> = segs
        .iter()
        .map(|s| {
            let v = rhythm(roll, s);
            v.iter().any(|&x| x > 0.0).then_some(v)
        })
        .collect();
    let (mut same, mut same_n, mut all, mut all_n) = (0f64, 0usize, 0f64, 0usize);
    let (mut within, mut within_n) = (0f64, 0usize);
    for i in 0..segs.len() {
        for j in i + 1..segs.len() {
            let (Some(a), Some(b)) = (&vectors[i], &vectors[j]) else {
                continue;
            };
            let Some(s) = similarity(a, b) else { continue };
            if segs[i].phrase == segs[j].phrase {
                within += s;
                within_n += 1;
                continue;
            }
            all += s;
            all_n += 1;
            if segs[i].letter == segs[j].letter {
                same += s;
                same_n += 1;
            }
        }
    }
    (same_n > 0 && all > 0.0).then(|| Ils {
        same: same / same_n as f64,
        all: all / all_n as f64,
        same_pairs: same_n,
        all_pairs: all_n,
        within: (within_n > 0).then(|| within / within_n as f64),
        within_pairs: within_n,
    })
}

/// The mean ILS ratio of `songs` that have one, and how many do.
pub fn mean_ils(songs: impl IntoIterator<Item = Option<Ils>>) -> (Option<f64>, usize) {
    let ratios: Vec<f64> = songs.into_iter().flatten().map(|i| i.ratio()).collect();
    let n = ratios.len();
    ((n > 0).then(|| ratios.iter().sum::<f64>() / n as f64), n)
}

pub mod donor;
pub mod echo;
pub mod gallery;

#[cfg(test)]
mod tests;
