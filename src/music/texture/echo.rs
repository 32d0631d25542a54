//! The texture echo: where the phrase lane repeats a letter, a pianist's accompaniment of the
//! repeat plays like its first occurrence's — not note for note, but the same rhythm in the
//! same registers, re-voiced where the chords under it differ. [`sources`] says which step of
//! the first occurrence each step of a repeat answers; [`EchoCounts`] counts, in the training
//! songs' pianists, how much more likely a pitch starts at a repeat's step when something
//! starts at the answered step (in its register; on that very pitch) than when nothing does,
//! against the same count between bars of *different* letters of the same song (which holds
//! what a song's texture keeps everywhere — its meter, its pianist's habits — and so what the
//! model already plays without an echo). Their ratio is the [`EchoLean`]: evidence added to
//! the model's onset log odds, as much as the pianists' own repeats justify.

mod beyond;
mod paste;

pub use paste::{KindCounts, PasteMix, Pasted, kept_bars, pasted};

use super::{REGISTERS, onset_bits, register, register_mask};
use crate::music::labels::{PhraseLabel, StepLabels, first_occurrence};
use crate::music::roll::{PITCHES, PianoRoll};

/// What the answered step holds for one pitch: nothing starts in its register (0), something
/// else does (1), the pitch itself does (2).
pub const EVIDENCE: usize = 3;

/// The phrase lane of `labels` bar by bar: each bar's first step, its length in steps and its
/// phrase (`labels.bar` numbers the bars; a bar is a run of steps with one number).
pub fn bars(labels: &StepLabels) -> Vec<(usize, usize, Option<PhraseLabel>)> {
    let mut out: Vec<(usize, usize, Option<PhraseLabel>)> = Vec::new();
    for (t, &b) in labels.bar.iter().enumerate() {
        match out.last_mut() {
            Some((start, len, _)) if labels.bar[*start] == b => *len += 1,
            _ => out.push((t, 1, labels.phrase[t])),
        }
    }
    out
}

/// For every step of `labels`, the step of the phrase's first occurrence it answers: the same
/// place in the same bar of the first earlier phrase with its letter
/// ([`first_occurrence`]); `None` where the bar is no repeat or the two bars differ in length
/// (a pickup, another meter: their places do not line up).
pub fn sources(labels: &StepLabels) -> Vec<Option<usize>> {
    let mut out = vec![None; labels.len()];
    for (start, len, f_start, _) in answered_bars(labels) {
        for (i, o) in out[start..start + len].iter_mut().enumerate() {
            *o = Some(f_start + i);
        }
    }
    out
}

/// For every step of `labels` that answers a first occurrence ([`sources`]), the same place
/// of the latest earlier occurrence of its phrase where that is not the first (the third A's
/// second A, as long as it); `None` elsewhere (a second occurrence has only the first).
pub fn latest_sources(labels: &StepLabels) -> Vec<Option<usize>> {
    let mut out = vec![None; labels.len()];
    for (start, len, _, latest) in answered_bars(labels) {
        if let Some(l_start) = latest {
            for (i, o) in out[start..start + len].iter_mut().enumerate() {
                *o = Some(l_start + i);
            }
        }
    }
    out
}

/// The bars of `labels` that answer an earlier one: each bar's first step, its length, the
/// first step of the bar it answers ([`sources`]) and of the same bar of the latest earlier
/// occurrence when that is another, as long ([`latest_sources`]).
fn answered_bars(labels: &StepLabels) -> Vec<(usize, usize, usize, Option<usize>)> {
    let bars = bars(labels);
    let lane: Vec<Option<PhraseLabel>> = bars.iter().map(|b| b.2).collect();
    let mut out = Vec::new();
    for (k, &(start, len, here)) in bars.iter().enumerate() {
        let Some(f) = first_occurrence(&lane, k) else {
            continue;
        };
        let (f_start, f_len, _) = bars[f];
        if f_len != len {
            continue;
        }
        let latest = here.and_then(|here| {
            (f + 1..k).rev().find(|&j| {
                lane[j].is_some_and(|p| {
                    p.letter == here.letter && p.index < here.index && p.bar == here.bar
                })
            })
        });
        let latest = latest.filter(|&j| bars[j].1 == len).map(|j| bars[j].0);
        out.push((start, len, f_start, latest));
    }
    out
}

/// Bins of how alike a repeat's bar sings to the bar it answers: the share of the bar's steps
/// where the same melody pitch sounds in both (or both rest) — under a half, a half to 0.8,
/// 0.8 to all but one step, every step. A pianist returns more literally where the melody does.
pub const MELODY_BINS: usize = 4;

/// The bin of a share of steps sung alike ([`MELODY_BINS`]).
pub fn melody_bin(alike: usize, of: usize) -> usize {
    match (alike, of) {
        (_, 0) => MELODY_BINS - 1,
        (a, n) if a == n => 3,
        (a, n) if 5 * a >= 4 * n => 2,
        (a, n) if 2 * a >= n => 1,
        _ => 0,
    }
}

/// For every step of `labels` that answers another ([`sources`]), the [`melody_bin`] of its
/// bar's melody against the answered bar's; `None` elsewhere.
pub fn melody_alike(labels: &StepLabels) -> Vec<Option<usize>> {
    let mut out = vec![None; labels.len()];
    for (start, len, f_start, _) in answered_bars(labels) {
        let sung = |t: usize| labels.melody.get(t).copied();
        let alike = (0..len)
            .filter(|&i| sung(start + i) == sung(f_start + i))
            .count();
        let bin = melody_bin(alike, len);
        out[start..start + len].fill(Some(bin));
    }
    out
}

/// Each register's keys as bits.
static MASKS: std::sync::OnceLock<[u128; REGISTERS]> = std::sync::OnceLock::new();

/// Onsets counted by (whether the chord at the two steps differs, register, evidence, whether
/// the pitch starts).
type Table = [[[[u64; 2]; EVIDENCE]; REGISTERS]; 2];

/// A lean: log odds by (whether the chord differs, register, evidence).
pub type LeanTable = [[[f32; EVIDENCE]; REGISTERS]; 2];

/// Onsets counted by (whether the chord at the repeat and its first occurrence differs,
/// register, what the first occurrence held, what the latest earlier occurrence held, whether
/// the pitch starts).
type JointTable = [[[[[u64; 2]; EVIDENCE]; EVIDENCE]; REGISTERS]; 2];

/// A lean by (whether the chord differs from the first occurrence's, register, what the first
/// occurrence held, what the latest earlier one held).
pub type JointLean = [[[[f32; EVIDENCE]; EVIDENCE]; REGISTERS]; 2];

/// Counts of the pianists' onsets at answered steps, for repeats and for other letters.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EchoCounts {
    pub repeats: Table,
    /// The repeats again, by how alike the repeat's bar sings to the answered one
    /// ([`melody_bin`]).
    #[serde(default)]
    pub repeats_by_melody: [Table; MELODY_BINS],
    pub others: Table,
    /// Songs and answered steps counted.
    pub songs: usize,
    pub repeat_steps: u64,
    pub other_steps: u64,
    /// Repeated steps of each [`melody_bin`].
    #[serde(default)]
    pub repeat_steps_by_melody: [u64; MELODY_BINS],
    /// The repeats that have a latest earlier occurrence besides the first (a third A and
    /// later: [`latest_sources`]), by melody bin and pooled over it (last), counted by what
    /// both held.
    #[serde(default)]
    pub repeats_by_latest: [JointTable; MELODY_BINS + 1],
    /// Repeated steps that have one.
    #[serde(default)]
    pub latest_steps: u64,
    /// The repeated bars by whether each register pastes the answered bar's rhythm
    /// ([`Pasted`]): the two kinds of repeat a pianist plays.
    #[serde(default)]
    pub repeat_kinds: KindCounts,
    /// The bars of a phrase that answer no earlier phrase, against the bar before them in the
    /// phrase ([`kept_bars`]), by the same two kinds: a texture kept through a section.
    #[serde(default)]
    pub kept_kinds: KindCounts,
}

/// What a step whose keys are `then` holds for the pitches of register mask `m`: the pitches
/// of each evidence ([`EVIDENCE`]: nothing in the register, another pitch in it, the pitch).
fn evidence_groups(then: u128, m: u128) -> [u128; EVIDENCE] {
    let then = then & m;
    if then == 0 {
        [m, 0, 0]
    } else {
        [0, m & !then, then]
    }
}

/// Adds the pitches of step `t` against its first occurrence's step `s` and its latest
/// earlier occurrence's step `l` to `table`.
fn count_joint(
    table: &mut JointTable,
    bits: &[u128],
    labels: &StepLabels,
    (t, s, l): (usize, usize, usize),
) {
    let changed = (labels.chord[t] != labels.chord[s]) as usize;
    let masks = *MASKS.get_or_init(|| std::array::from_fn(register_mask));
    for (r, &m) in masks.iter().enumerate() {
        let (first, latest) = (evidence_groups(bits[s], m), evidence_groups(bits[l], m));
        for (ef, &f) in first.iter().enumerate() {
            for (el, &g) in latest.iter().enumerate() {
                let pitches = f & g;
                let on = (bits[t] & pitches).count_ones() as u64;
                let c = &mut table[changed][r][ef][el];
                c[1] += on;
                c[0] += pitches.count_ones() as u64 - on;
            }
        }
    }
}

/// Adds the pitches of step `t` against step `s` to `table` (`bits`: each step's onsets).
fn count(table: &mut Table, bits: &[u128], labels: &StepLabels, t: usize, s: usize) {
    count_in(table, bits, labels, (t, s), [true; REGISTERS]);
}

/// [`count`] for the registers `counted` names alone.
fn count_in(
    table: &mut Table,
    bits: &[u128],
    labels: &StepLabels,
    (t, s): (usize, usize),
    counted: [bool; REGISTERS],
) {
    let changed = (labels.chord[t] != labels.chord[s]) as usize;
    let (now, then) = (bits[t], bits[s]);
    let masks = *MASKS.get_or_init(|| std::array::from_fn(register_mask));
    for (r, cells_of) in table[changed].iter_mut().enumerate() {
        if !counted[r] {
            continue;
        }
        let m = masks[r];
        let (now, then) = (now & m, then & m);
        let cells: [(usize, u128); 2] = if then == 0 {
            [(0, m), (0, 0)]
        } else {
            [(1, m & !then), (2, then)]
        };
        for (ev, pitches) in cells {
            let on = (now & pitches).count_ones() as u64;
            let c = &mut cells_of[ev];
            c[1] += on;
            c[0] += pitches.count_ones() as u64 - on;
        }
    }
}

impl EchoCounts {
    /// Adds a song: its piano `roll` under `labels` (one per step).
    pub fn add(&mut self, roll: &PianoRoll, labels: &StepLabels) {
        let n = roll.num_steps.min(labels.len());
        let labels = labels.slice(0..n);
        let src = sources(&labels);
        let sung = melody_alike(&labels);
        let latest = latest_sources(&labels);
        let bits: Vec<u128> = (0..n).map(|t| onset_bits(roll, t)).collect();
        let repeated: Vec<_> = answered_bars(&labels)
            .into_iter()
            .filter_map(|(start, len, from, _)| Some((start, len, from, sung[start]?)))
            .collect();
        self.repeat_kinds.add(&bits, &labels, &repeated);
        self.kept_kinds.add(&bits, &labels, &kept_bars(&labels));
        for (t, (s, bin)) in src.iter().zip(&sung).enumerate() {
            if let (Some(s), Some(bin), Some(l)) = (*s, *bin, latest[t]) {
                for m in [bin, MELODY_BINS] {
                    count_joint(&mut self.repeats_by_latest[m], &bits, &labels, (t, s, l));
                }
                self.latest_steps += 1;
            }
            if let (Some(s), Some(bin)) = (*s, *bin) {
                count(&mut self.repeats, &bits, &labels, t, s);
                count(&mut self.repeats_by_melody[bin], &bits, &labels, t, s);
                self.repeat_steps += 1;
                self.repeat_steps_by_melody[bin] += 1;
            }
        }
        // Every melodic bar against each earlier melodic bar of another letter, as long.
        let bars = bars(&labels);
        let melodic = |b: &Option<PhraseLabel>| b.filter(|p| p.letter.is_ascii_uppercase());
        for (k, &(start, len, phrase)) in bars.iter().enumerate() {
            let Some(here) = melodic(&phrase) else {
                continue;
            };
            for &(c_start, c_len, c_phrase) in &bars[..k] {
                let Some(there) = melodic(&c_phrase) else {
                    continue;
                };
                if there.letter == here.letter || c_len != len {
                    continue;
                }
                for i in 0..len {
                    count(&mut self.others, &bits, &labels, start + i, c_start + i);
                    self.other_steps += 1;
                }
            }
        }
        self.songs += 1;
    }

    /// The lean these counts justify beyond what another letter of the song tells.
    pub fn lean(&self) -> EchoLean {
        EchoLean {
            lean: lean_of(&self.repeats, Some(&self.others)),
            by_melody: None,
            by_latest: None,
            revoices: false,
            keeps_count: false,
            density: None,
            song_density: SongDensityRule::Off,
            paste: None,
            kept: None,
        }
    }

    /// The lean the repeats justify alone (as if the model knew nothing of the song's texture
    /// elsewhere).
    pub fn lean_alone(&self) -> EchoLean {
        EchoLean {
            lean: lean_of(&self.repeats, None),
            by_melody: None,
            by_latest: None,
            revoices: false,
            keeps_count: false,
            density: None,
            song_density: SongDensityRule::Off,
            paste: None,
            kept: None,
        }
    }

    /// [`Self::lean_alone`], and beside it the lean of each [`melody_bin`] counted alone: a
    /// repeat whose melody returns note for note leans by what such repeats justify.
    pub fn lean_by_melody(&self) -> EchoLean {
        EchoLean {
            by_melody: Some(std::array::from_fn(|b| {
                lean_of(&self.repeats_by_melody[b], None)
            })),
            ..self.lean_alone()
        }
    }

    /// The lean as a mix of the two kinds of repeat ([`PasteMix`]): how often the pianists
    /// paste a repeated bar's register, and the lean of bars pasted and of bars played anew,
    /// each by melody bin; the pooled leans of [`Self::lean_by_melody`] beside it.
    pub fn lean_pasting(&self) -> EchoLean {
        EchoLean {
            paste: Some(self.repeat_kinds.mix()),
            ..self.lean_by_melody()
        }
    }

    /// [`Self::lean_pasting`], and beside it the same mix for the bars of a phrase that answer
    /// no earlier phrase, against the bar before them ([`kept_bars`]): a texture kept, or
    /// changed, through a section as the pianists keep theirs.
    pub fn lean_keeping(&self) -> EchoLean {
        EchoLean {
            kept: Some(self.kept_kinds.mix()),
            ..self.lean_pasting()
        }
    }

    /// [`Self::lean_by_melody`], and beside it, for a repeat that has a latest earlier
    /// occurrence besides the first, the lean of what both held, by melody bin and pooled
    /// over it (last).
    pub fn lean_by_latest(&self) -> EchoLean {
        let joint = |table: &JointTable| -> JointLean {
            std::array::from_fn(|c| {
                std::array::from_fn(|r| {
                    let cells = &table[c][r];
                    std::array::from_fn(|ef| {
                        std::array::from_fn(|el| joint_ratio(cells, ef, el) as f32)
                    })
                })
            })
        };
        EchoLean {
            by_latest: Some(std::array::from_fn(|m| joint(&self.repeats_by_latest[m]))),
            ..self.lean_by_melody()
        }
    }
}

/// [`log_ratio`] over the joint evidence of the first and the latest occurrence.
fn joint_ratio(cells: &[[[u64; 2]; EVIDENCE]; EVIDENCE], ef: usize, el: usize) -> f64 {
    let total = |o: usize| {
        cells
            .iter()
            .flatten()
            .map(|c| c[o] as f64 + 1.0)
            .sum::<f64>()
    };
    let p = |o: usize| (cells[ef][el][o] as f64 + 1.0) / total(o);
    (p(1) / p(0)).ln()
}

/// The lean `repeats` justify, less what `others` do.
fn lean_of(repeats: &Table, others: Option<&Table>) -> LeanTable {
    let mut lean = [[[0f32; EVIDENCE]; REGISTERS]; 2];
    for (c, rows) in lean.iter_mut().enumerate() {
        for (r, row) in rows.iter_mut().enumerate() {
            for (ev, x) in row.iter_mut().enumerate() {
                let others = others.map_or(0.0, |o| log_ratio(&o[c][r], ev));
                *x = (log_ratio(&repeats[c][r], ev) - others) as f32;
            }
        }
    }
    lean
}

/// `ln P(evidence ev | onset) − ln P(ev | no onset)` over one register's counts, with a count
/// added to every cell (a cell never seen is no evidence either way).
fn log_ratio(cells: &[[u64; 2]; EVIDENCE], ev: usize) -> f64 {
    let total = |o: usize| cells.iter().map(|c| c[o] as f64 + 1.0).sum::<f64>();
    let p = |o: usize| (cells[ev][o] as f64 + 1.0) / total(o);
    (p(1) / p(0)).ln()
}

/// Evidence added to a pitch's onset log odds at a step that answers an earlier one, by
/// whether the chord there differs, the pitch's register, and what the answered step holds.
/// Whether the density of the steps an echo leans is kept for each song as it is written
/// (`generate::texture::SongDensity`): the one shift of the leaned steps' odds that gives the
/// leaned steps so far the count of onsets the model's own odds expect there, starting from
/// the measured density ([`EchoLean::density`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SongDensityRule {
    /// One density for every song, the measured one.
    #[default]
    Off,
    /// The song's own, either way from the measured one.
    Free,
    /// The song's own where it is sparser than the measured one, which it never exceeds: the
    /// measured density takes back what the lean counts twice on the average song, and a song
    /// whose lean counts more (its leaned steps busier than its model plays them) has more
    /// taken back.
    Capped,
}

impl SongDensityRule {
    pub fn is_off(&self) -> bool {
        *self == Self::Off
    }
}

impl std::str::FromStr for SongDensityRule {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(Self::Off),
            "free" => Ok(Self::Free),
            "capped" => Ok(Self::Capped),
            _ => Err(format!("{s:?}: use off, free or capped")),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EchoLean {
    pub lean: LeanTable,
    /// The lean by how alike the repeat's bar sings to the answered one ([`melody_bin`]),
    /// where it was counted so; `lean` serves a step whose melody is not known (a donor, a
    /// live take).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_melody: Option<[LeanTable; MELODY_BINS]>,
    /// For a repeat with a latest earlier occurrence besides the first (a third A and later),
    /// the lean of what both held, by melody bin (the last: not known), where it was counted
    /// so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_latest: Option<[JointLean; MELODY_BINS + 1]>,
    /// Whether, where the chord under a step differs from the answered one's, a pitch struck
    /// then that is no tone of the chord now leans as another key of its register (the
    /// register's rhythm, not the pitch: re-voiced), not as that pitch.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub revoices: bool,
    /// Whether the lean says which pitches start at a step and leaves how many to the model
    /// (and the density asked): at each step it is shifted by the one constant that keeps the
    /// step's expected count of onsets the model's own (`generate::texture::keep_count`). The
    /// pianists' repeats are no busier than their first occurrences, but a lean added to a
    /// model that already follows its chords counts the same evidence twice, and plays more.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keeps_count: bool,
    /// The density the steps it leans play at, at strength 1 (as `PianoSampling::density`
    /// scales every onset's odds; its log scales with the strength; `None`: the model's own). The lean, added to a model that
    /// already follows its chords, counts that evidence twice and plays more onsets than the
    /// pianists' repeats do; this takes them back where it leans on the song's own bars, and
    /// nowhere else (a donor's bars, which it leans by the pooled lean, play at the model's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub density: Option<f32>,
    /// Whether that density is the song's own, kept as it is written
    /// ([`SongDensityRule`]). One density measured on POP909 leaves a song unlike its songs
    /// busier than the model alone plays it (a lead sheet's sparse melody:
    /// reports/accompaniment.md, "The echo's density, the song's own").
    #[serde(default, skip_serializing_if = "SongDensityRule::is_off")]
    pub song_density: SongDensityRule,
    /// The repeats as the pianists play them, where counted so: a bar's register pasted or
    /// played anew, each with its own lean (in place of the others).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paste: Option<PasteMix>,
    /// The same mix for a bar of a phrase that answers no earlier phrase, against the bar
    /// before it in the phrase ([`kept_bars`]), where counted so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<PasteMix>,
}

/// What a step that started `then` holds for `pitch` of register `r`, the pitch itself
/// counted as another key of its register where `keep` leaves it out ([`EchoLean::revoices`]).
fn kept_evidence((then, keep): (u128, u128), pitch: usize, r: usize) -> usize {
    match evidence(then, pitch, r) {
        2 if keep & (1 << pitch) == 0 => 1,
        ev => ev,
    }
}

/// What a step that started `bits` holds for `pitch` of register `r` ([`EVIDENCE`]).
fn evidence(bits: u128, pitch: usize, r: usize) -> usize {
    if bits & (1 << pitch) != 0 {
        2
    } else if bits & MASKS.get_or_init(|| std::array::from_fn(register_mask))[r] != 0 {
        1
    } else {
        0
    }
}

impl EchoLean {
    /// The lean of every pitch at a step whose answered step started `then` (bits), the chord
    /// there the same or not, the melody of the two bars in bin `melody` ([`melody_bin`]; the
    /// pooled lean when `None` or not counted by melody), the latest earlier occurrence's
    /// step (a third A's second) having started `latest` (not read when `None` or not counted
    /// so), scaled by `strength` (1: as measured).
    pub fn of(
        &self,
        (then, keep): (u128, u128),
        (chord_changed, melody, latest): (bool, Option<usize>, Option<u128>),
        strength: f32,
        out: &mut [f32],
    ) {
        let c = chord_changed as usize;
        let by_melody = self.by_melody.as_ref().zip(melody).map(|(t, b)| &t[b]);
        let table = &by_melody.unwrap_or(&self.lean)[c];
        let joint = self.by_latest.as_ref().zip(latest).map(|(t, l)| {
            let m = melody.unwrap_or(MELODY_BINS).min(MELODY_BINS);
            (&t[m][c], l)
        });
        for (p, o) in out.iter_mut().enumerate().take(PITCHES) {
            let r = register(p);
            let ev = kept_evidence((then, keep), p, r);
            *o = strength
                * match joint {
                    Some((j, l)) => j[r][ev][evidence(l, p, r)],
                    None => table[r][ev],
                };
        }
    }
}
