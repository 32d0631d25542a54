//! Beat grids with bars: beats as ticks, each subdivided into `steps_per_beat` equal steps, and
//! the beats on which bars begin.
//!
//! Beats are given as ticks, so a grid follows whatever the beats follow: one beat per quarter
//! note for an ordinary file, or annotated beat times (POP909's `beat_midi.txt`, converted to
//! ticks through the tempo map) for a performance whose tempo drifts. Bars follow the file's
//! whole time-signature map, or annotated downbeats.

use std::ops::Range;

use super::midi::Song;

/// Tick positions of beats, subdivided into `steps_per_beat` equal steps, grouped into bars.
#[derive(Clone, Debug, PartialEq)]
pub struct Grid {
    /// Strictly increasing ticks of each beat; the last one closes the grid.
    pub beat_ticks: Vec<u64>,
    pub steps_per_beat: usize,
    /// Index of the first beat of each bar: starts at 0, strictly increasing, below
    /// `num_beats()` (empty only when the grid has no beats).
    pub bar_starts: Vec<usize>,
}

/// Quarter notes in a bar of `numerator/denominator` (6/8 = 3, 7/8 = 3.5). "1/4" is what many
/// files (574 POP909 songs among them) say when they mean nothing in particular: it is read as
/// 4/4.
pub fn quarters_per_bar(numerator: u8, denominator: u16) -> f64 {
    if numerator <= 1 || denominator == 0 {
        return 4.0;
    }
    numerator as f64 * 4.0 / denominator as f64
}

impl Grid {
    /// A grid over `beat_ticks` with bars starting on `bar_starts` (cleaned: sorted, deduplicated,
    /// clipped to the grid, and starting at beat 0).
    pub fn new(beat_ticks: Vec<u64>, steps_per_beat: usize, bar_starts: Vec<usize>) -> Self {
        let mut grid = Self {
            beat_ticks,
            steps_per_beat: steps_per_beat.max(1),
            bar_starts,
        };
        let beats = grid.num_beats();
        grid.bar_starts.retain(|&b| b < beats);
        grid.bar_starts.sort_unstable();
        grid.bar_starts.dedup();
        if beats > 0 && grid.bar_starts.first() != Some(&0) {
            grid.bar_starts.insert(0, 0);
        }
        grid
    }

    /// A grid over `beat_ticks` with a bar every `beats_per_bar` beats, the first full bar
    /// starting on beat `phase` (beats before it form a pickup bar).
    pub fn regular(
        beat_ticks: Vec<u64>,
        steps_per_beat: usize,
        beats_per_bar: usize,
        phase: usize,
    ) -> Self {
        let beats = beat_ticks.len().saturating_sub(1);
        let per = beats_per_bar.max(1);
        let bars = (phase % per..beats).step_by(per).collect();
        Self::new(beat_ticks, steps_per_beat, bars)
    }

    /// One beat per quarter note from tick 0 until `end_tick` (rounded up to a whole beat), in
    /// bars of 4/4.
    pub fn quarters(ppq: u16, end_tick: u64, steps_per_beat: usize) -> Self {
        let ppq = ppq.max(1) as u64;
        let beats = end_tick.div_ceil(ppq).max(1);
        Self::regular((0..=beats).map(|b| b * ppq).collect(), steps_per_beat, 4, 0)
    }

    /// This grid with its last bar completed and `bars` more bars after it, each as long as
    /// the bar before the last (the meter in force) and with beats as long as its last beat:
    /// room for music still to be played (a live take).
    pub fn extended(&self, bars: usize) -> Self {
        let beats = self.num_beats();
        if beats == 0 {
            return self.clone();
        }
        let n = self.num_bars();
        let last = self.bar_beats(n - 1).len();
        let per = if n >= 2 {
            self.bar_beats(n - 2).len()
        } else {
            last
        }
        .max(last)
        .max(1);
        let beat = (self.beat_ticks[beats] - self.beat_ticks[beats - 1]).max(1);
        let mut beat_ticks = self.beat_ticks.clone();
        let mut bar_starts = self.bar_starts.clone();
        let add = |count: usize, ticks: &mut Vec<u64>| {
            for _ in 0..count {
                ticks.push(ticks.last().copied().unwrap_or(0) + beat);
            }
        };
        add(per - last, &mut beat_ticks);
        for _ in 0..bars {
            bar_starts.push(beat_ticks.len() - 1);
            add(per, &mut beat_ticks);
        }
        Self::new(beat_ticks, self.steps_per_beat, bar_starts)
    }

    /// The quarter-note grid of a whole song, with bars following its time-signature map (4/4
    /// before the first signature and when there is none). A signature change in the middle of
    /// a bar starts a new bar there, as sequencers do; bars of an odd number of eighths start on
    /// the quarter nearest to where they fall. The last bar is whole: the grid runs on to its
    /// end when the notes stop before it.
    pub fn for_song(song: &Song, steps_per_beat: usize) -> Self {
        Self::for_song_until(song, song.end_tick(), steps_per_beat)
    }

    /// [`Self::for_song`] running on to `end_tick` at least (bars planned past the music).
    pub fn for_song_until(song: &Song, end_tick: u64, steps_per_beat: usize) -> Self {
        let end_tick = end_tick.max(song.end_tick());
        let mut grid = Self::quarters(song.ppq, end_tick, steps_per_beat);
        let ppq = song.ppq.max(1) as f64;
        let beats = grid.num_beats();
        let mut sections: Vec<(u64, f64)> = vec![(0, 4.0)];
        for ts in &song.time_signatures {
            let q = quarters_per_bar(ts.numerator, ts.denominator);
            match sections.last_mut() {
                Some(last) if last.0 == ts.tick => last.1 = q,
                _ => sections.push((ts.tick, q)),
            }
        }
        let mut starts = Vec::new();
        // The last bar's start (in quarters, unrounded) and length.
        let mut last = None;
        for (i, &(tick, q)) in sections.iter().enumerate() {
            let from = tick as f64 / ppq;
            let to = sections
                .get(i + 1)
                .map_or(beats as f64, |s| s.0 as f64 / ppq);
            let mut k = 0.0;
            while from + k * q < to - 1e-9 {
                starts.push((from + k * q).round() as usize);
                last = Some((from + k * q, q));
                k += 1.0;
            }
        }
        // Music that stops in the middle of a bar ends in a whole bar of its meter: the end of
        // the notes is not a change of meter (a prompt cut 8 bars in, whose last notes ring a
        // beat into bar 9, stays in 4/4).
        let mut beat_ticks = std::mem::take(&mut grid.beat_ticks);
        if let Some((start, q)) = last {
            let end = (start + q).round() as u64;
            let step = song.ppq.max(1) as u64;
            for beat in beats as u64 + 1..=end {
                beat_ticks.push(beat * step);
            }
        }
        grid = Self::new(beat_ticks, steps_per_beat, starts);
        grid
    }

    pub fn num_beats(&self) -> usize {
        self.beat_ticks.len().saturating_sub(1)
    }

    pub fn num_steps(&self) -> usize {
        self.num_beats() * self.steps_per_beat
    }

    pub fn num_bars(&self) -> usize {
        self.bar_starts.len()
    }

    /// The beats of `bar`.
    pub fn bar_beats(&self, bar: usize) -> Range<usize> {
        let start = self.bar_starts[bar];
        let end = self
            .bar_starts
            .get(bar + 1)
            .copied()
            .unwrap_or(self.num_beats());
        start..end
    }

    /// The steps of `bar`.
    pub fn bar_steps(&self, bar: usize) -> Range<usize> {
        let beats = self.bar_beats(bar);
        beats.start * self.steps_per_beat..beats.end * self.steps_per_beat
    }

    /// Bar boundaries as ticks: one more entry than there are bars.
    pub fn bar_ticks(&self) -> Vec<u64> {
        let mut ticks: Vec<u64> = self
            .bar_starts
            .iter()
            .map(|&b| self.beat_ticks[b])
            .collect();
        ticks.extend(
            self.beat_ticks
                .last()
                .filter(|_| !self.bar_starts.is_empty()),
        );
        ticks
    }

    /// The bar holding `beat`, and the beat's index within it (both from 0).
    pub fn bar_of_beat(&self, beat: usize) -> (usize, usize) {
        let bar = self.bar_starts.partition_point(|&b| b <= beat).max(1) - 1;
        (bar, beat - self.bar_starts.get(bar).copied().unwrap_or(0))
    }

    /// The bar holding `step`, and the step's index within that bar.
    pub fn bar_of_step(&self, step: usize) -> (usize, usize) {
        let (bar, _) = self.bar_of_beat(step / self.steps_per_beat);
        let start = self.bar_starts.get(bar).copied().unwrap_or(0) * self.steps_per_beat;
        (bar, step - start)
    }

    /// Nearest step boundary to `tick` (clamped to the grid), as a step index.
    pub fn step_at(&self, tick: u64) -> usize {
        let beats = &self.beat_ticks;
        if beats.len() < 2 || tick <= beats[0] {
            return 0;
        }
        let last = beats.len() - 1;
        if tick >= beats[last] {
            return self.num_steps();
        }
        // Beat interval holding `tick`: beats[b] <= tick < beats[b + 1].
        let b = beats.partition_point(|&t| t <= tick) - 1;
        let (lo, hi) = (beats[b], beats[b + 1]);
        let frac = (tick - lo) as f64 / (hi - lo) as f64;
        b * self.steps_per_beat + (frac * self.steps_per_beat as f64).round() as usize
    }

    /// `tick` in beats from the grid's start, fractional (linear within a beat; clamped to the
    /// grid).
    pub fn beat_at(&self, tick: u64) -> f64 {
        let beats = &self.beat_ticks;
        if beats.len() < 2 || tick <= beats[0] {
            return 0.0;
        }
        let last = beats.len() - 1;
        if tick >= beats[last] {
            return last as f64;
        }
        let b = beats.partition_point(|&t| t <= tick) - 1;
        b as f64 + (tick - beats[b]) as f64 / (beats[b + 1] - beats[b]) as f64
    }

    /// Tick at the start of `step` (linear within its beat).
    pub fn tick_at(&self, step: usize) -> u64 {
        let spb = self.steps_per_beat;
        let (b, s) = (step / spb, step % spb);
        if b >= self.num_beats() {
            return *self.beat_ticks.last().unwrap_or(&0);
        }
        let (lo, hi) = (self.beat_ticks[b], self.beat_ticks[b + 1]);
        lo + ((hi - lo) as f64 * s as f64 / spb as f64).round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::music::midi::TimeSignature;
    use crate::music::midi::tests::note;

    #[test]
    fn quarter_grid_maps_ticks_to_sixteenths() {
        let g = Grid::quarters(480, 1920, 4);
        assert_eq!(g.num_steps(), 16);
        assert_eq!(g.step_at(0), 0);
        assert_eq!(g.step_at(120), 1);
        assert_eq!(g.step_at(170), 1, "rounds to the nearest step");
        assert_eq!(g.step_at(190), 2);
        assert_eq!(g.step_at(5000), 16, "clamped");
        assert_eq!(g.tick_at(5), 600);
        assert_eq!(g.bar_starts, vec![0]);
        assert_eq!(g.bar_ticks(), vec![0, 1920]);
    }

    #[test]
    fn uneven_beats_are_followed() {
        // A performance slowing down: beats 400, 500 then 600 ticks long.
        let g = Grid::new(vec![0, 400, 900, 1500], 2, vec![0]);
        assert_eq!(g.step_at(200), 1);
        assert_eq!(g.step_at(650), 3);
        assert_eq!(g.step_at(1200), 5);
        assert_eq!(g.tick_at(3), 650);
        assert_eq!(g.beat_at(1200), 2.5);
        assert_eq!(g.beat_at(9999), 3.0);
    }

    #[test]
    fn regular_bars_with_a_pickup() {
        let g = Grid::regular((0..=10).map(|b| b * 100).collect(), 4, 4, 2);
        assert_eq!(g.bar_starts, vec![0, 2, 6]);
        assert_eq!(g.bar_beats(0), 0..2);
        assert_eq!(g.bar_beats(2), 6..10);
        assert_eq!(g.bar_ticks(), vec![0, 200, 600, 1000]);
        assert_eq!(g.bar_of_beat(5), (1, 3));
        assert_eq!(g.bar_of_step(9), (1, 1));
        assert_eq!(g.bar_steps(1), 8..24);
    }

    #[test]
    fn a_grid_extends_by_whole_bars_of_its_meter() {
        // 3/4 with a pickup beat, ending two beats into its third full bar.
        let g = Grid::regular((0..=9).map(|b| b * 480).collect(), 4, 3, 1);
        assert_eq!(g.bar_starts, vec![0, 1, 4, 7]);
        let e = g.extended(2);
        assert_eq!(e.bar_starts, vec![0, 1, 4, 7, 10, 13]);
        assert_eq!(
            e.num_beats(),
            16,
            "the last bar completed, then two bars of 3"
        );
        assert_eq!(e.beat_ticks[..10], g.beat_ticks[..]);
        assert_eq!(*e.beat_ticks.last().unwrap(), 16 * 480);
        assert_eq!(g.extended(0).num_beats(), 10, "completed only");
    }

    fn song_with(signatures: &[(u64, u8, u16)], quarters: u64) -> Song {
        Song {
            ppq: 480,
            tempos: vec![],
            time_signatures: signatures
                .iter()
                .map(|&(tick, numerator, denominator)| TimeSignature {
                    tick,
                    numerator,
                    denominator,
                })
                .collect(),
            key_signatures: vec![],
            tracks: vec![crate::music::midi::Track {
                pedal: Vec::new(),
                notes: vec![note(60, 0, quarters * 480)],
                ..Default::default()
            }],
        }
    }

    #[test]
    fn bars_follow_the_whole_time_signature_map() {
        // Two bars of 3/4, one of 2/4, then 6/8 (three quarters a bar) to the end.
        let song = song_with(&[(0, 3, 4), (2880, 2, 4), (3840, 6, 8)], 16);
        let g = Grid::for_song(&song, 4);
        assert_eq!(g.bar_starts, vec![0, 3, 6, 8, 11, 14]);
        assert_eq!(
            g.bar_beats(5),
            14..17,
            "the last bar is whole, although the song ends in it"
        );
        // Notes that stop a beat into a bar of 4/4 leave a whole bar, not a bar of 1/4.
        let g = Grid::for_song(&song_with(&[], 33), 4);
        assert_eq!((g.bar_starts.len(), g.num_beats()), (9, 36));
        assert_eq!(Grid::for_song(&song_with(&[], 32), 4).num_beats(), 32);
    }

    #[test]
    fn a_change_in_mid_bar_starts_a_new_bar_and_one_four_reads_as_four_four() {
        let song = song_with(&[(0, 1, 4), (5 * 480, 3, 4)], 11);
        let g = Grid::for_song(&song, 1);
        assert_eq!(g.bar_starts, vec![0, 4, 5, 8]);
        // No signature at all is 4/4; a signature after tick 0 has 4/4 before it.
        assert_eq!(
            Grid::for_song(&song_with(&[], 9), 1).bar_starts,
            vec![0, 4, 8]
        );
        let late = Grid::for_song(&song_with(&[(480 * 2, 3, 4)], 8), 1);
        assert_eq!(late.bar_starts, vec![0, 2, 5]);
    }

    #[test]
    fn odd_eighths_do_not_drift() {
        // 7/8 = 3.5 quarters: bars start on the nearest quarter, every 7 quarters in two bars.
        let g = Grid::for_song(&song_with(&[(0, 7, 8)], 14), 1);
        assert_eq!(g.bar_starts, vec![0, 4, 7, 11]);
        assert_eq!(g.num_beats(), 14);
    }
}
