//! The two kinds of repeat a pianist plays: a repeated bar's register pasted from the bar it
//! answers (the same rhythm exactly) or played anew. [`pasted`] measures how often a piano
//! part pastes; [`PasteMix`] is the echo's lean as a mix of the two, counted in the training
//! songs' pianists ([`super::EchoCounts::lean_pasting`]).

use super::{
    LeanTable, MASKS, MELODY_BINS, Table, answered_bars, bars, count_in, kept_evidence, lean_of,
    melody_bin,
};
use crate::music::labels::StepLabels;
use crate::music::roll::{PITCHES, PianoRoll};
use crate::music::texture::{REGISTERS, onset_bits, register, register_mask};

/// How often a repeat's bar plays its answered bar's rhythm exactly, register by register (a
/// key starts at each of its steps where one started then, and at no other: the rhythm of
/// [`crate::music::texture::rhythm`]; a register quiet in both bars is not counted): the bars
/// pasted and the bars counted, over every bar that answers a first occurrence, and over those
/// that are a third occurrence or later against the latest earlier one. A pianist who returns
/// literally pastes whole bars; one whose repeats only lean toward the first does not.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Pasted {
    pub first: [usize; 2],
    pub latest: [usize; 2],
}

impl Pasted {
    /// The share of `first`'s bars pasted (`None` where none is counted).
    pub fn share(counted: [usize; 2]) -> Option<f64> {
        (counted[1] > 0).then(|| counted[0] as f64 / counted[1] as f64)
    }

    /// Adds `other`'s bars.
    pub fn add(&mut self, other: &Pasted) {
        for (a, b) in [
            (&mut self.first, other.first),
            (&mut self.latest, other.latest),
        ] {
            a[0] += b[0];
            a[1] += b[1];
        }
    }
}

/// The [`Pasted`] bars of `roll` under the phrase lane of `labels`.
pub fn pasted(roll: &PianoRoll, labels: &StepLabels) -> Pasted {
    let n = roll.num_steps.min(labels.len());
    let labels = labels.slice(0..n);
    let masks = *MASKS.get_or_init(|| std::array::from_fn(register_mask));
    let bits: Vec<u128> = (0..n).map(|t| onset_bits(roll, t)).collect();
    let mut out = Pasted::default();
    let tally = |into: &mut [usize; 2], start: usize, then: usize, len: usize| {
        for &m in &masks {
            if let Some(same) = pasted_in(&bits[start..start + len], &bits[then..then + len], m) {
                into[0] += same as usize;
                into[1] += 1;
            }
        }
    };
    for (start, len, f_start, latest) in answered_bars(&labels) {
        tally(&mut out.first, start, f_start, len);
        if let Some(l) = latest {
            tally(&mut out.latest, start, l, len);
        }
    }
    out
}

/// The bars of a melodic phrase (A, B, …) that answer no earlier phrase (`answered_bars`),
/// each against the bar before it in the same phrase where that is as long: each bar's first
/// step, its length, the first step of the bar before, and the [`super::melody_bin`] of the two.
pub fn kept_bars(labels: &StepLabels) -> Vec<(usize, usize, usize, usize)> {
    let bars = bars(labels);
    let repeated: std::collections::HashSet<usize> =
        answered_bars(labels).into_iter().map(|b| b.0).collect();
    let sung = |t: usize| labels.melody.get(t).copied();
    bars.windows(2)
        .filter_map(|w| {
            let ((from, f_len, before), (start, len, here)) = (w[0], w[1]);
            let (before, here) = (before?, here?);
            let same_phrase = here.letter.is_ascii_uppercase()
                && before.index == here.index
                && before.bar + 1 == here.bar;
            (same_phrase && f_len == len && !repeated.contains(&start)).then(|| {
                let alike = (0..len)
                    .filter(|&i| sung(start + i) == sung(from + i))
                    .count();
                (start, len, from, melody_bin(alike, len))
            })
        })
        .collect()
}

/// Whether a bar whose steps start `now` (bits) plays the rhythm of one that started `was`
/// in the register of mask `m`; `None` where the register is quiet in both.
fn pasted_in(now: &[u128], was: &[u128], m: u128) -> Option<bool> {
    if now.iter().chain(was).all(|b| b & m == 0) {
        return None;
    }
    Some(
        now.iter()
            .zip(was)
            .all(|(a, b)| (a & m != 0) == (b & m != 0)),
    )
}

/// Bars counted by kind ([`PasteMix`]): a bar's register pasted from the bar it answers or
/// played anew, by melody bin and pooled over it (last).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KindCounts {
    /// The bars' registers counted, by melody bin and register: [played anew, pasted].
    pub bars: [[[u64; 2]; REGISTERS]; MELODY_BINS + 1],
    /// The pitches of their steps against the answered steps, apart for the registers played
    /// anew (0, with those quiet in both) and pasted (1).
    pub by_kind: [[Table; MELODY_BINS + 1]; 2],
}

impl KindCounts {
    /// Adds the bars `answered` of a song whose steps start `bits` under `labels`: each bar's
    /// first step, its length, the first step of the bar it answers, and its melody bin.
    pub(super) fn add(
        &mut self,
        bits: &[u128],
        labels: &StepLabels,
        answered: &[(usize, usize, usize, usize)],
    ) {
        let masks = *MASKS.get_or_init(|| std::array::from_fn(register_mask));
        for &(start, len, from, bin) in answered {
            let (now, was) = (&bits[start..start + len], &bits[from..from + len]);
            let bar: [Option<bool>; REGISTERS] =
                std::array::from_fn(|r| pasted_in(now, was, masks[r]));
            for (r, k) in bar.iter().enumerate() {
                if let Some(k) = *k {
                    for m in [bin, MELODY_BINS] {
                        self.bars[m][r][k as usize] += 1;
                    }
                }
            }
            for k in [false, true] {
                // A register quiet in both bars is played anew as much as a bar can be.
                let counted = bar.map(|x| x.unwrap_or(false) == k);
                for i in 0..len {
                    for m in [bin, MELODY_BINS] {
                        let table = &mut self.by_kind[k as usize][m];
                        count_in(table, bits, labels, (start + i, from + i), counted);
                    }
                }
            }
        }
    }

    /// The mix these counts justify: the share pasted (a bar added to each kind) and the
    /// lean of each kind, counted alone.
    pub fn mix(&self) -> PasteMix {
        let share = std::array::from_fn(|m| {
            std::array::from_fn(|r| {
                let [anew, pasted] = self.bars[m][r];
                ((pasted as f64 + 1.0) / ((anew + pasted) as f64 + 2.0)) as f32
            })
        });
        let lean =
            std::array::from_fn(|k| std::array::from_fn(|m| lean_of(&self.by_kind[k][m], None)));
        PasteMix { share, lean }
    }
}

/// The two kinds of repeat ([`Pasted`]), counted in the training songs' pianists: a repeated
/// bar's register plays the answered bar's rhythm exactly or is played anew. Which one a
/// bar's register is, is drawn at the bar (with the pianists' share for its melody bin and
/// register); its steps then lean by that kind's lean.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PasteMix {
    /// The share of repeated bars' registers pasted, by melody bin (the last: pooled, for a
    /// bar whose melody is not known) and register.
    pub share: [[f32; REGISTERS]; MELODY_BINS + 1],
    /// The lean of registers played anew (0) and pasted (1), by melody bin (the last: pooled).
    pub lean: [[LeanTable; MELODY_BINS + 1]; 2],
}

impl PasteMix {
    /// The share pasted of register `r` in a bar of melody bin `melody` (`None`: pooled).
    pub fn share_of(&self, melody: Option<usize>, r: usize) -> f32 {
        self.share[melody.unwrap_or(MELODY_BINS).min(MELODY_BINS)][r]
    }

    /// The lean of every pitch at a step whose answered step started `then`, the chord the
    /// same or not, in a bar of melody bin `melody`, each register pasted or not (`pasted`),
    /// scaled by `strength`.
    pub fn of(
        &self,
        (then, keep): (u128, u128),
        (chord_changed, melody): (bool, Option<usize>),
        pasted: [bool; REGISTERS],
        strength: f32,
        out: &mut [f32],
    ) {
        let (c, m) = (
            chord_changed as usize,
            melody.unwrap_or(MELODY_BINS).min(MELODY_BINS),
        );
        for (p, o) in out.iter_mut().enumerate().take(PITCHES) {
            let r = register(p);
            let ev = kept_evidence((then, keep), p, r);
            *o = strength * self.lean[pasted[r] as usize][m][c][r][ev];
        }
    }
}
