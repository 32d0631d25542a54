//! What a melody is judged by, the same for a written one and a song's own: where its onsets
//! meet the chords, how busy it is, its range and interval profile, whether phrases the lane
//! labels alike come back alike (and different ones stay different), and whether it breathes at
//! phrase ends. Counts add up over songs ([`MelodyCounts::add`]) before the ratios are taken
//! ([`MelodyCounts::figures`]), so long songs weigh what their notes weigh.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::data::melody::{MelodyStep, class_pitch, judged_chord};
use crate::music::grid::Grid;
use crate::music::labels::{StepLabels, first_occurrence};

/// Intervals up to this many semitones are steps (a major third).
pub const STEP_MOST: u8 = 4;
/// Intervals of at least this many are leaps (a minor sixth).
pub const LEAP_LEAST: u8 = 8;

/// What the figures are made of, summed over songs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MelodyCounts {
    pub bars: usize,
    pub onsets: usize,
    /// Onsets where a chord starts or on a strong beat (beat 1; beat 3 of a four-beat bar),
    /// and how many of them are tones of the chord there.
    pub strong_onsets: usize,
    pub strong_chord_tones: usize,
    /// Intervals between consecutive notes (within the region; a rest does not break them).
    pub intervals: usize,
    pub steps: usize,
    pub leaps: usize,
    /// Bars of a phrase that repeats an earlier one's letter: onsets (offset, pitch) shared
    /// with the same bar of the first occurrence, and the onsets of both.
    pub repeat_shared: usize,
    pub repeat_total: usize,
    /// Bars of a melodic phrase against the same bar of the first earlier phrase with another
    /// letter.
    pub contrast_shared: usize,
    pub contrast_total: usize,
    /// Melodic phrases ending inside the region, and those whose last beat strikes no note
    /// (the melody rests or holds).
    pub phrase_ends: usize,
    pub breathing_ends: usize,
    /// Each song's range in semitones (highest onset minus lowest).
    pub ranges: Vec<f64>,
    pub pitch_sum: f64,
}

/// The figures of [`MelodyCounts`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MelodyFigures {
    pub onsets_per_bar: f64,
    /// Share of the onsets at chord changes and strong beats that are chord tones.
    pub chord_tones: f64,
    /// Share of intervals that are steps (≤ a major third) and leaps (≥ a minor sixth).
    pub steps: f64,
    pub leaps: f64,
    /// Songs' ranges in semitones: median, 10th and 90th percentiles.
    pub range_median: f64,
    pub range_p10: f64,
    pub range_p90: f64,
    /// Onset-and-pitch F1 of repeated phrases' bars with their first occurrence, and of
    /// different phrases' bars with each other.
    pub repeat_f1: f64,
    pub contrast_f1: f64,
    /// Share of melodic phrase ends where the melody rests or holds over the last beat.
    pub breathing: f64,
    pub mean_pitch: f64,
    pub songs: usize,
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// The `q`-quantile of `values` (linear between neighbours); 0 for none.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let x = q.clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let (i, f) = (x.floor() as usize, x.fract());
    v[i] + (v[(i + 1).min(v.len() - 1)] - v[i]) * f
}

impl MelodyCounts {
    pub fn add(&mut self, other: &MelodyCounts) {
        self.bars += other.bars;
        self.onsets += other.onsets;
        self.strong_onsets += other.strong_onsets;
        self.strong_chord_tones += other.strong_chord_tones;
        self.intervals += other.intervals;
        self.steps += other.steps;
        self.leaps += other.leaps;
        self.repeat_shared += other.repeat_shared;
        self.repeat_total += other.repeat_total;
        self.contrast_shared += other.contrast_shared;
        self.contrast_total += other.contrast_total;
        self.phrase_ends += other.phrase_ends;
        self.breathing_ends += other.breathing_ends;
        self.ranges.extend_from_slice(&other.ranges);
        self.pitch_sum += other.pitch_sum;
    }

    pub fn figures(&self) -> MelodyFigures {
        MelodyFigures {
            onsets_per_bar: ratio(self.onsets, self.bars),
            chord_tones: ratio(self.strong_chord_tones, self.strong_onsets),
            steps: ratio(self.steps, self.intervals),
            leaps: ratio(self.leaps, self.intervals),
            range_median: quantile(&self.ranges, 0.5),
            range_p10: quantile(&self.ranges, 0.1),
            range_p90: quantile(&self.ranges, 0.9),
            repeat_f1: ratio(2 * self.repeat_shared, self.repeat_total),
            contrast_f1: ratio(2 * self.contrast_shared, self.contrast_total),
            breathing: ratio(self.breathing_ends, self.phrase_ends),
            mean_pitch: if self.onsets == 0 {
                0.0
            } else {
                self.pitch_sum / self.onsets as f64
            },
            songs: self.ranges.len(),
        }
    }
}

/// The counts of a melody's `steps` (one per grid step from step 0) over `region` of a song
/// with `labels` on `grid`. Only bars wholly inside the region count.
pub fn count_melody(
    steps: &[MelodyStep],
    labels: &StepLabels,
    grid: &Grid,
    region: Range<usize>,
) -> MelodyCounts {
    let mut c = MelodyCounts::default();
    let n = steps.len().min(labels.len()).min(grid.num_steps());
    let region = region.start.min(n)..region.end.min(n);
    let bars: Vec<usize> = (0..grid.num_bars())
        .filter(|&b| {
            let s = grid.bar_steps(b);
            s.start >= region.start && s.end <= region.end
        })
        .collect();
    c.bars = bars.len();
    let onset = |s: usize| class_pitch(steps[s].class);
    let spb = grid.steps_per_beat.max(1);
    let (mut low, mut high) = (u8::MAX, 0u8);
    let mut last: Option<u8> = None;
    for &b in &bars {
        let span = grid.bar_steps(b);
        let beats = span.len() / spb;
        for s in span.clone() {
            let Some(p) = onset(s) else { continue };
            c.onsets += 1;
            c.pitch_sum += p as f64;
            low = low.min(p);
            high = high.max(p);
            if let Some(chord) = judged_chord(labels, s, s - span.start, beats, spb) {
                c.strong_onsets += 1;
                if chord.pitch_classes().any(|pc| pc == p % 12) {
                    c.strong_chord_tones += 1;
                }
            }
            if let Some(q) = last {
                let d = p.abs_diff(q);
                c.intervals += 1;
                c.steps += (d <= STEP_MOST) as usize;
                c.leaps += (d >= LEAP_LEAST) as usize;
            }
            last = Some(p);
        }
    }
    if c.onsets > 0 {
        c.ranges.push((high - low) as f64);
    }
    // Phrases: bar by bar against the first occurrence (repeats) or the first earlier phrase
    // of another letter (contrasts).
    let phrases = labels.bar_phrase_labels(grid);
    let bar_onsets = |b: usize| -> Vec<(usize, u8)> {
        let span = grid.bar_steps(b);
        span.clone()
            .filter_map(|s| onset(s).map(|p| (s - span.start, p)))
            .collect()
    };
    let compare = |a: usize, b: usize| -> (usize, usize) {
        let (x, y) = (bar_onsets(a), bar_onsets(b));
        let shared = x.iter().filter(|o| y.contains(o)).count();
        (shared, x.len() + y.len())
    };
    for &b in &bars {
        let Some(here) = phrases.get(b).copied().flatten() else {
            continue;
        };
        if !here.letter.is_ascii_uppercase() {
            continue;
        }
        if let Some(first) = first_occurrence(&phrases, b) {
            if bars.contains(&first) {
                let (s, t) = compare(b, first);
                c.repeat_shared += s;
                c.repeat_total += t;
            }
            continue;
        }
        // The first earlier melodic phrase with another letter, at the same bar of it.
        let start = b - here.bar as usize;
        let other = (0..start).find_map(|e| {
            let p = phrases[e]?;
            (p.letter.is_ascii_uppercase() && p.letter != here.letter && p.bar == 0).then_some(e)
        });
        if let Some(e) = other {
            let bar = e + here.bar as usize;
            let same = phrases.get(bar).copied().flatten();
            if same.is_some_and(|p| p.index == phrases[e].map_or(u16::MAX, |p| p.index))
                && bars.contains(&bar)
            {
                let (s, t) = compare(b, bar);
                c.contrast_shared += s;
                c.contrast_total += t;
            }
        }
    }
    for &b in &bars {
        let Some(here) = phrases.get(b).copied().flatten() else {
            continue;
        };
        if !here.letter.is_ascii_uppercase() || here.bar + 1 != here.bars {
            continue;
        }
        let span = grid.bar_steps(b);
        let last_beat = span.end.saturating_sub(spb).max(span.start)..span.end;
        c.phrase_ends += 1;
        if last_beat.clone().all(|s| onset(s).is_none()) {
            c.breathing_ends += 1;
        }
    }
    c
}

/// How repeated bars keep their first occurrence, by what the harmony and the phrase do
/// there: onsets of a repeated bar (a melodic phrase's letter heard before, the same bar of it)
/// and how many the first occurrence sings at the same place and pitch, split by whether the
/// chord under the onset is the one under that place the first time and whether the bar is
/// its phrase's last (the cadence). What the melody writer's echo leans by
/// ([`crate::generate::melody::ECHO_LESS_UNDER_ANOTHER_CHORD`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EchoProfile {
    /// `[under another chord][at a cadence]`: (onsets, matched).
    pub cells: [[(usize, usize); 2]; 2],
}

impl EchoProfile {
    /// Adds a melody's `steps` (one per grid step from step 0) over `region` of a song with
    /// `labels` on `grid`; only bars wholly inside the region count, as in [`count_melody`].
    pub fn add(
        &mut self,
        steps: &[MelodyStep],
        labels: &StepLabels,
        grid: &Grid,
        region: Range<usize>,
    ) {
        let n = steps.len().min(labels.len()).min(grid.num_steps());
        let region = region.start.min(n)..region.end.min(n);
        let phrases = labels.bar_phrase_labels(grid);
        for b in 0..grid.num_bars() {
            let span = grid.bar_steps(b);
            if span.start < region.start || span.end > region.end {
                continue;
            }
            let Some(first) = first_occurrence(&phrases, b) else {
                continue;
            };
            let cadence = phrases[b].is_some_and(|p| p.bar + 1 == p.bars);
            let source = grid.bar_steps(first);
            for (s, e) in span.zip(source) {
                if steps[s].class < 2 {
                    continue;
                }
                let other = labels.chord[s] != labels.chord[e];
                let cell = &mut self.cells[other as usize][cadence as usize];
                cell.0 += 1;
                cell.1 += (steps[e].class == steps[s].class) as usize;
            }
        }
    }

    /// The share of repeated onsets matched, under another chord or not, at a cadence or not.
    pub fn matched(&self, other_chord: bool, cadence: bool) -> f64 {
        let (onsets, matched) = self.cells[other_chord as usize][cadence as usize];
        matched as f64 / onsets.max(1) as f64
    }

    fn log_odds(&self, other_chord: bool, cadence: bool) -> f64 {
        let p = self.matched(other_chord, cadence).clamp(1e-3, 1.0 - 1e-3);
        (p / (1.0 - p)).ln()
    }

    /// How much lower the log-odds of a repeated onset being kept are under another chord
    /// than under the first time's (the mean over cadences and not).
    pub fn less_under_another_chord(&self) -> f64 {
        [false, true]
            .iter()
            .map(|&c| self.log_odds(false, c) - self.log_odds(true, c))
            .sum::<f64>()
            / 2.0
    }

    /// How much lower they are in a phrase's last bar (the mean over the chords' two cases).
    pub fn less_at_a_cadence(&self) -> f64 {
        [false, true]
            .iter()
            .map(|&o| self.log_odds(o, false) - self.log_odds(o, true))
            .sum::<f64>()
            / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::melody::{HOLD, melody_steps, onset_class};
    use crate::music::chords::{Chord, Quality};
    use crate::music::midi::tests::note;
    use crate::music::phrases::Segment;
    use crate::music::roll::{MultiRoll, Role};

    /// Four bars of 4/4, each 60 64 67 (a quarter, a quarter, a half) but the last, whose 67
    /// is a 65.
    fn four_bars() -> (Grid, MultiRoll) {
        let grid = Grid::quarters(480, 16 * 480, 4);
        let bar = |b: u64| b * 4 * 480;
        let mut melody = Vec::new();
        for b in 0..4u64 {
            let last = if b == 3 { 65 } else { 67 };
            melody.push(note(60, bar(b), bar(b) + 480));
            melody.push(note(64, bar(b) + 480, bar(b) + 960));
            melody.push(note(last, bar(b) + 960, bar(b) + 1920));
        }
        let rolls = MultiRoll::from_tracks([(Role::Melody, &melody[..])], &grid);
        (grid, rolls)
    }

    #[test]
    fn a_melody_is_counted_where_it_meets_chords_and_phrases() {
        // Four bars of 4/4 in C major, phrase A twice (two bars each): the second repeats the
        // first but for its last note.
        let (grid, rolls) = four_bars();
        let c = Some(Chord {
            root: 0,
            quality: Quality::Maj,
        });
        let phrases = [
            Segment {
                start_bar: 0,
                bars: 2,
                letter: 'A',
            },
            Segment {
                start_bar: 2,
                bars: 2,
                letter: 'A',
            },
        ];
        let labels = StepLabels::new(&grid, &rolls.melody, &[c; 16], &phrases);
        let steps = melody_steps(&rolls.melody, &labels.melody, 0);
        assert_eq!(steps[1].class, HOLD);
        assert_eq!(steps[0].class, onset_class(60));
        let counts = count_melody(&steps, &labels, &grid, 0..64);
        let f = counts.figures();
        assert_eq!(counts.bars, 4);
        assert_eq!(f.onsets_per_bar, 3.0);
        // Strong beats: 60 on beat 1 and 67/65 on beat 3; 65 is no tone of C.
        assert_eq!((counts.strong_onsets, counts.strong_chord_tones), (8, 7));
        // Intervals: two a bar within it (thirds and a second: steps) and the fifths between
        // bars (7 semitones: neither a step nor a leap), 11 in all.
        assert_eq!(counts.intervals, 11);
        assert_eq!(counts.steps, 8);
        assert_eq!(counts.leaps, 0);
        assert_eq!(counts.ranges, vec![7.0]);
        // Bar 2 repeats bar 0 exactly, bar 3 repeats bar 1 but for its last note.
        assert_eq!(counts.repeat_total, 12);
        assert_eq!(counts.repeat_shared, 3 + 2);
        assert!((f.repeat_f1 - 10.0 / 12.0).abs() < 1e-9);
        assert_eq!(counts.contrast_total, 0, "no other letter");
        // Both phrases end on a note held over the last beat.
        assert_eq!((counts.phrase_ends, counts.breathing_ends), (2, 2));
        // A region leaving out the last bar counts three bars and one phrase end.
        let part = count_melody(&steps, &labels, &grid, 0..60);
        assert_eq!((part.bars, part.phrase_ends), (3, 1));
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.5), 3.0);
        assert_eq!(quantile(&[0.0, 10.0], 0.1), 1.0);
    }

    #[test]
    fn repeated_onsets_are_told_apart_by_their_chord_and_cadence() {
        // Phrase A twice (two bars each, 60 64 67 a bar, the last bar's 67 a 65); the last
        // bar's second half is under F, where its first occurrence was under C.
        let (grid, rolls) = four_bars();
        let chord = |root| {
            Some(Chord {
                root,
                quality: Quality::Maj,
            })
        };
        let mut chords = [chord(0); 16];
        chords[14] = chord(5);
        chords[15] = chord(5);
        let phrases = [0, 2].map(|start_bar| Segment {
            start_bar,
            bars: 2,
            letter: 'A',
        });
        let labels = StepLabels::new(&grid, &rolls.melody, &chords, &phrases);
        let steps = melody_steps(&rolls.melody, &labels.melody, 0);
        let mut profile = EchoProfile::default();
        profile.add(&steps, &labels, &grid, 0..64);
        // Bar 2 (not a cadence) keeps all three; bar 3 (the cadence) keeps its two onsets
        // under C and changes the one under F.
        assert_eq!(profile.cells[0][0], (3, 3));
        assert_eq!(profile.cells[0][1], (2, 2));
        assert_eq!(profile.cells[1][1], (1, 0));
        assert_eq!(profile.cells[1][0], (0, 0));
        assert_eq!(profile.matched(true, true), 0.0);
        assert!(profile.less_under_another_chord() > 5.0);
        assert_eq!(profile.less_at_a_cadence(), 0.0);
        // The first occurrence's bars count nothing.
        let mut first = EchoProfile::default();
        first.add(&steps, &labels, &grid, 0..32);
        assert_eq!(first, EchoProfile::default());
    }
}
