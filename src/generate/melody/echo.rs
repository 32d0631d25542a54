//! A melody's echo, as a steering part: a bar the phrase lane marks as a repeat leans each
//! step towards what the same step of its phrase's first occurrence sang, less where the songs
//! vary their repeats (under another chord, at the cadence).

use std::ops::Range;

use super::{ECHO_LESS_AT_A_CADENCE, ECHO_LESS_UNDER_ANOTHER_CHORD};
use crate::data::melody::{HOLD, MelodyStep, REST};
use crate::data::sheet::Sheet;
use crate::generate::steer::Steer;
use crate::music::chords::Chord;
use crate::music::labels::first_occurrence;

/// Where a melody stands when step `step` is drawn.
pub(super) struct Now<'a> {
    pub step: usize,
    /// The step before (a rest before the first).
    pub before: MelodyStep,
    /// The melody so far, prompt and written, one per step from the first.
    pub sung: &'a [MelodyStep],
}

/// The echo at `strength` ([`super::MelodySampling::echo`]): the class the step it echoes sang
/// gets `e^(strength - less)` times its odds (a hold only continues a note that sounds now, so
/// an echoed hold over a rest leans to a rest).
pub(super) struct Echoing<'a> {
    echo: Echo<'a>,
    strength: f32,
}

impl<'a> Echoing<'a> {
    pub(super) fn new(sheet: &'a Sheet, strength: f32) -> Self {
        Self {
            echo: Echo::new(sheet),
            strength,
        }
    }
}

impl Steer<Now<'_>> for Echoing<'_> {
    fn lean(&mut self, now: &Now, lean: &mut [f32]) -> bool {
        let Some((e, less)) = self.echo.source(now.step) else {
            return false;
        };
        let Some(heard) = now.sung.get(e) else {
            return false;
        };
        let by = (self.strength - less).max(0.0);
        if by <= 0.0 {
            return false;
        }
        let class = match heard.class {
            HOLD if now.before.pitch == 0 => REST,
            c => c,
        };
        lean[class] += by;
        true
    }
}

/// Where each step of a sheet was first heard: for a step in a bar the phrase lane marks as a
/// repeat, the same step of the same bar of the phrase's first occurrence.
pub(super) struct Echo<'a> {
    /// Per bar: its steps, for a repeat the first step of the bar it repeats, and whether it
    /// is its phrase's last bar (the cadence).
    bars: Vec<(Range<usize>, Option<usize>, bool)>,
    chords: &'a [Option<Chord>],
}

impl<'a> Echo<'a> {
    pub(super) fn new(sheet: &'a Sheet) -> Self {
        let grid = &sheet.grid;
        let phrases = sheet.labels.bar_phrase_labels(grid);
        let bars = (0..grid.num_bars())
            .map(|b| {
                let first = first_occurrence(&phrases, b).map(|f| grid.bar_steps(f).start);
                let cadence = phrases
                    .get(b)
                    .copied()
                    .flatten()
                    .is_some_and(|p| p.bar + 1 == p.bars);
                (grid.bar_steps(b), first, cadence)
            })
            .collect();
        Self {
            bars,
            chords: &sheet.labels.chord,
        }
    }

    /// The step `s` echoes, if any, and how much less than the full echo it leans there
    /// ([`ECHO_LESS_UNDER_ANOTHER_CHORD`], [`ECHO_LESS_AT_A_CADENCE`]).
    pub(super) fn source(&self, s: usize) -> Option<(usize, f32)> {
        let i = self.bars.partition_point(|(span, _, _)| span.end <= s);
        let (span, first, cadence) = self.bars.get(i)?;
        let offset = s.checked_sub(span.start)?;
        let e = first.map(|f| f + offset).filter(|&e| e < s)?;
        let chord = |t: usize| self.chords.get(t).copied().flatten();
        let less = if chord(s) == chord(e) {
            0.0
        } else {
            ECHO_LESS_UNDER_ANOTHER_CHORD
        } + if *cadence {
            ECHO_LESS_AT_A_CADENCE
        } else {
            0.0
        };
        Some((e, less))
    }
}
