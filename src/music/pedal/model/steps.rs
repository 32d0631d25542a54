//! A song's steps as the learnt pedal reads them ([`Steps`]): each sixteenth's features
//! ([`FEATURES`](super::FEATURES)), read from the whole song or causally, as a live take knows them.

use super::super::super::grid::Grid;
use super::super::super::labels::StepLabels;
use super::super::super::roll::{PITCHES, PianoRoll};
use super::{D, PedalModel};

/// A song's steps as the pedal reads them: the piano part, the melody and the lanes on a grid,
/// read whole or causally.
pub struct Steps {
    /// The features of steps `offset..offset + rows.len()`.
    rows: Vec<[f64; D]>,
    offset: usize,
    /// Each step read only from what is known when it is played live ([`Steps::causal`]);
    /// its context then reaches back only.
    causal: bool,
}

pub(super) fn chord_changes(labels: &StepLabels, s: usize) -> bool {
    s > 0
        && s < labels.chord.len()
        && labels.chord[s].is_some()
        && labels.chord[s] != labels.chord[s - 1]
}

/// Per step: the pitches struck and sounding (onset or held) in `roll`.
fn struck(roll: &PianoRoll, s: usize) -> impl Iterator<Item = usize> + '_ {
    (0..PITCHES).filter(move |&p| roll.onset(s, p))
}

fn sounding(roll: &PianoRoll, s: usize) -> impl Iterator<Item = usize> + '_ {
    (0..PITCHES).filter(move |&p| roll.onset(s, p) || roll.sustain(s, p))
}

/// A causal reading forgets the bass it last heard this many steps on (so that a stretch of a
/// take is read as the whole take is: [`Steps::causal`]).
const BASS_MEMORY: usize = 32;

/// Steps a causal reading of a stretch starts before it (past the bass's memory and the
/// longest "since" feature), besides going back to its bar's start.
const WARM: usize = BASS_MEMORY + 16;

/// How many steps' features a model with `context` reads per step: either side, or (causal)
/// the step and those before it.
pub fn width(context: usize, causal: bool) -> usize {
    if causal { context + 1 } else { 2 * context + 1 }
}

impl Steps {
    /// The features of every step of `grid` for the `piano` part under `melody` and `labels`,
    /// each read from the whole song (what comes after it too).
    pub fn new(grid: &Grid, labels: &StepLabels, piano: &PianoRoll, melody: &PianoRoll) -> Self {
        let n = grid.num_steps().min(piano.num_steps);
        Self::read(grid, labels, (piano, melody), 0..n, false)
    }

    /// The features of the steps `range` as a live take knows them when it decides each: the
    /// piano up to the step itself, the melody up to the step before, the chord lane up to the
    /// step; what a step's features would read of later steps reads nothing (the chord
    /// changing one or two steps later, the piano resting the beat after), and the bar's
    /// onsets are counted up to the step. Reading any stretch gives its steps the features
    /// the whole song gives them.
    pub fn causal(
        grid: &Grid,
        labels: &StepLabels,
        (piano, melody): (&PianoRoll, &PianoRoll),
        range: std::ops::Range<usize>,
    ) -> Self {
        Self::read(grid, labels, (piano, melody), range, true)
    }

    /// The steps as `model` reads them: causally where it was fitted so.
    pub fn for_model(
        model: &PedalModel,
        grid: &Grid,
        labels: &StepLabels,
        (piano, melody): (&PianoRoll, &PianoRoll),
    ) -> Self {
        if model.causal {
            let n = grid.num_steps().min(piano.num_steps);
            Self::causal(grid, labels, (piano, melody), 0..n)
        } else {
            Self::new(grid, labels, piano, melody)
        }
    }

    fn read(
        grid: &Grid,
        labels: &StepLabels,
        (piano, melody): (&PianoRoll, &PianoRoll),
        range: std::ops::Range<usize>,
        causal: bool,
    ) -> Self {
        let n = grid.num_steps().min(piano.num_steps);
        let range = range.start.min(n)..range.end.min(n);
        let spb = grid.steps_per_beat.max(1);
        // A causal stretch is read from a little before it (and its bar's start), so that its
        // first steps know what the whole song's reading knows there.
        let from = if causal && !range.is_empty() {
            let bar = grid.bar_steps(grid.bar_of_step(range.start).0).start;
            range.start.saturating_sub(WARM).min(bar)
        } else {
            range.start
        };
        let to = if causal { range.end } else { n };
        let bass: Vec<Option<usize>> = (from..to).map(|s| struck(piano, s).next()).collect();
        let onsets: Vec<usize> = (from..to).map(|s| struck(piano, s).count()).collect();
        // Whole: each bar's onsets; causal: the bar's onsets up to the step (counted below).
        let mut bar_onsets = vec![0usize; grid.num_bars()];
        if !causal {
            for (i, &o) in onsets.iter().enumerate() {
                bar_onsets[grid.bar_of_step(from + i).0] += o;
            }
        }
        let mut rows = Vec::with_capacity(range.len());
        let (mut last_change, mut last_bass, mut previous_bass) = (0usize, 0usize, None);
        for s in from..range.end {
            let i = s - from;
            let (bar, at) = grid.bar_of_step(s);
            if causal {
                bar_onsets[bar] = if at == 0 { 0 } else { bar_onsets[bar] } + onsets[i];
            }
            let bar_len = grid.bar_steps(bar).len().max(1);
            let changes = |d: isize| {
                let t = s as isize + d;
                t >= 0 && chord_changes(labels, t as usize)
            };
            if changes(0) {
                last_change = s;
            }
            if causal && s - last_bass > BASS_MEMORY {
                previous_bass = None;
            }
            let bass_here = bass[i].filter(|&p| p < 55);
            let bass_moves =
                bass_here.is_some() && previous_bass.is_some() && bass_here != previous_bass;
            if bass_here.is_some() {
                last_bass = s;
                previous_bass = bass_here;
            }
            if s < range.start {
                continue;
            }
            let before: Vec<bool> = {
                let mut classes = vec![false; 12];
                for t in s.saturating_sub(spb)..s {
                    for p in sounding(piano, t) {
                        classes[p % 12] = true;
                    }
                }
                classes
            };
            let struck_classes: Vec<usize> = struck(piano, s).map(|p| p % 12).collect();
            let novelty = if struck_classes.is_empty() {
                0.0
            } else {
                struck_classes.iter().filter(|&&c| !before[c]).count() as f64
                    / struck_classes.len() as f64
            };
            let chord = labels.chord.get(s).copied().flatten();
            let sounding_now: Vec<usize> = sounding(piano, s).collect();
            let tones = match chord {
                Some(c) if !sounding_now.is_empty() => {
                    let classes: Vec<u8> = c.pitch_classes().collect();
                    sounding_now
                        .iter()
                        .filter(|&&p| classes.contains(&((p % 12) as u8)))
                        .count() as f64
                        / sounding_now.len() as f64
                }
                _ => 0.0,
            };
            let phrase = labels.phrase.get(s).copied().flatten();
            let flag = |b: bool| f64::from(u8::from(b));
            let on_beat = at % spb == 0;
            // Live, the melody of a step is heard only as it sounds: read the step before.
            let m = if causal { s.checked_sub(1) } else { Some(s) };
            let melody_struck =
                m.is_some_and(|m| melody.num_steps > m && struck(melody, m).next().is_some());
            let melody_rests =
                m.is_none_or(|m| melody.num_steps <= m || sounding(melody, m).next().is_none());
            let later = |b: bool| flag(!causal && b);
            rows.push([
                1.0,
                flag(changes(0)),
                later(changes(1)),
                flag(changes(-1)),
                later(changes(2)),
                flag(at == 0),
                flag(at != 0 && bar_len.is_multiple_of(2) && at == bar_len / 2 && at % spb == 0),
                flag(at != 0 && at % spb == 0 && at != bar_len / 2),
                (onsets[i] as f64 / 4.0).min(2.0),
                flag(bass_here.is_some()),
                flag(bass_moves),
                flag(sounding_now.is_empty()),
                later((i + 1..(i + 1 + spb).min(onsets.len())).all(|t| onsets[t] == 0)),
                flag(melody_struck),
                flag(melody_rests),
                flag(phrase.is_some_and(|p| p.bar == 0 && at == 0)),
                flag(phrase.is_some_and(|p| p.bar + 1 == p.bars)),
                flag(phrase.is_none_or(|p| !p.letter.is_ascii_uppercase())),
                novelty,
                ((s - last_change) as f64 / 16.0).min(1.0),
                ((s - last_bass) as f64 / 16.0).min(1.0),
                bar_onsets[bar] as f64 / 16.0,
                tones,
                flag(changes(0) && at == 0),
                flag(changes(0) && bass_here.is_some()),
                flag(bass_here.is_some() && at == 0),
                flag(bass_moves && on_beat),
            ]);
        }
        Self {
            rows,
            offset: range.start,
            causal,
        }
    }

    /// Steps up to the last one read (the first `offset` of them not read).
    pub fn len(&self) -> usize {
        self.offset + self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the steps were read causally.
    pub fn is_causal(&self) -> bool {
        self.causal
    }

    /// The features of step `s` with `context` steps either side, or (causal) before it;
    /// zeros past the ends of what was read.
    pub fn row(&self, s: usize, context: usize) -> Vec<f64> {
        let span = width(context, self.causal);
        let mut out = Vec::with_capacity(D * span);
        for d in 0..span {
            let t = (s + d)
                .checked_sub(context)
                .and_then(|t| t.checked_sub(self.offset))
                .filter(|&t| t < self.rows.len());
            match t {
                Some(t) => out.extend_from_slice(&self.rows[t]),
                None => out.extend(std::iter::repeat_n(0.0, D)),
            }
        }
        out
    }
}
