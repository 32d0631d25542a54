//! The pedal panel (issue 70): a pedalling of a POP909 song's piano part scored against its
//! pianist's — presses found within an eighth of the pianist's (F1), the share of time down,
//! blur (the time notes sound past their release under the pedal against a chord they are not
//! a tone of, over all the time they sound) and the median sounding length — for the learnt
//! pedal ([`PedalModel`]), the rule "change at every annotated chord change", and the pianist.
//! `pianoformer pedal` fits and ships the model with these figures; `eval --task pedal`
//! scores a shipped one.

use std::ops::Range;
use std::path::Path;

use serde::Serialize;

use crate::music::grid::Grid;
use crate::music::labels::StepLabels;
use crate::music::midi::SUSTAIN;
use crate::music::pedal::model::{PedalModel, Steps, chord_change_rule, press_f1, press_steps};
use crate::music::pedal::{down_spans, sounding_ends};
use crate::music::pop909::{Pop909, Split};
use crate::music::roll::Role;

/// Presses count as found within this many sixteenths of the pianist's: an eighth.
pub const TOLERANCE: usize = 2;

/// A song's piano part as the panel reads it.
pub struct PedalSong {
    pub id: u32,
    pub grid: Grid,
    pub labels: StepLabels,
    /// The piano's notes (pitch, start, end) in ticks, and the ticks a quarter.
    pub notes: Vec<(u8, u64, u64)>,
    pub ppq: u16,
    /// The pianist's pedal of the piano track.
    pub pianist: Vec<(u64, u8, u8)>,
    /// The steps scored: the annotated span, within the piano's first onset and last release.
    pub range: Range<usize>,
    /// The features of every step (for the learnt pedal).
    pub steps: Steps,
}

/// The POP909 songs of `split` whose piano part has the pianist's pedal (`limit`: the first
/// so many), their steps read causally where `causal` (for a live take's pedal), and how many
/// of the split's songs had none.
pub fn load(
    root: &Path,
    split: Split,
    limit: Option<usize>,
    causal: bool,
) -> Result<(Vec<PedalSong>, usize), String> {
    let data = Pop909::open(root).map_err(|e| e.to_string())?;
    let ids = data.split_ids(split).map_err(|e| e.to_string())?;
    let mut songs = Vec::new();
    let mut unpedalled = 0;
    for id in ids.into_iter().take(limit.unwrap_or(usize::MAX)) {
        let s = data.load(id, 4).map_err(|e| format!("song {id}: {e}"))?;
        let Some(track) = s
            .song
            .tracks
            .iter()
            .find(|t| t.name == Role::Piano.track_name())
        else {
            continue;
        };
        let pianist: Vec<(u64, u8, u8)> = track
            .pedal
            .iter()
            .filter(|p| p.controller == SUSTAIN)
            .map(|p| (p.tick, p.controller, p.value))
            .collect();
        if pianist.is_empty() || track.notes.is_empty() {
            unpedalled += 1;
            continue;
        }
        let notes: Vec<(u8, u64, u64)> = track
            .notes
            .iter()
            .map(|n| (n.pitch, n.start, n.end))
            .collect();
        let first = s.grid.step_at(notes.iter().map(|n| n.1).min().unwrap_or(0));
        let last = s.grid.step_at(notes.iter().map(|n| n.2).max().unwrap_or(0));
        let range = s.annotated.start.max(first)..s.annotated.end.min(last);
        if range.len() < 16 {
            continue;
        }
        let rolls = (&s.rolls.piano, &s.rolls.melody);
        let steps = if causal {
            Steps::causal(&s.grid, &s.labels, rolls, 0..s.grid.num_steps())
        } else {
            Steps::new(&s.grid, &s.labels, rolls.0, rolls.1)
        };
        songs.push(PedalSong {
            id,
            grid: s.grid,
            labels: s.labels,
            notes,
            ppq: s.song.ppq,
            pianist,
            range,
            steps,
        });
    }
    Ok((songs, unpedalled))
}

/// A pedalling of one song, scored.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Scored {
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    pub share_down: f64,
    pub blur: f64,
    /// The median note's sounding length in quarter notes (written: the same without pedal).
    pub sounding_beats: f64,
    pub presses_per_bar: f64,
}

impl PedalSong {
    /// Ticks of the scored range.
    fn ticks(&self) -> (u64, u64) {
        (
            self.grid.tick_at(self.range.start),
            self.grid.tick_at(self.range.end),
        )
    }

    /// The pedal `events` scored against the pianist's, over the range.
    pub fn score(&self, events: &[(u64, u8, u8)]) -> Scored {
        let (from, to) = self.ticks();
        let in_range = |s: &usize| self.range.contains(s);
        let found: Vec<usize> = press_steps(&self.grid, events, to)
            .into_iter()
            .filter(in_range)
            .collect();
        let wanted: Vec<usize> = press_steps(&self.grid, &self.pianist, to)
            .into_iter()
            .filter(in_range)
            .collect();
        let (precision, recall, f1) =
            press_f1(&found, &wanted, TOLERANCE).unwrap_or((1.0, 1.0, 1.0));
        let spans = down_spans(events, to);
        let down: u64 = spans
            .iter()
            .map(|&(a, b)| b.min(to).saturating_sub(a.max(from)))
            .sum();
        let notes: Vec<(u8, u64, u64)> = self
            .notes
            .iter()
            .copied()
            .filter(|n| n.1 >= from && n.1 < to)
            .collect();
        let ends = sounding_ends(&notes, &spans);
        let (mut blurred, mut sounded) = (0usize, 0usize);
        for (n, &end) in notes.iter().zip(&ends) {
            let (s0, s1, s2) = (
                self.grid.step_at(n.1),
                self.grid.step_at(n.2),
                self.grid.step_at(end),
            );
            sounded += s2.max(s1).saturating_sub(s0);
            for s in s1..s2.min(self.labels.chord.len()) {
                if let Some(chord) = self.labels.chord[s]
                    && !chord.pitch_classes().any(|pc| pc == n.0 % 12)
                {
                    blurred += 1;
                }
            }
        }
        let mut lengths: Vec<f64> = notes
            .iter()
            .zip(&ends)
            .map(|(n, &e)| (e - n.1) as f64 / f64::from(self.ppq.max(1)))
            .collect();
        lengths.sort_by(f64::total_cmp);
        let bars = self.grid.bar_of_step(self.range.end - 1).0 + 1
            - self.grid.bar_of_step(self.range.start).0;
        Scored {
            precision,
            recall,
            f1,
            share_down: down as f64 / (to - from).max(1) as f64,
            blur: blurred as f64 / sounded.max(1) as f64,
            sounding_beats: lengths.get(lengths.len() / 2).copied().unwrap_or(0.0),
            presses_per_bar: found.len() as f64 / bars.max(1) as f64,
        }
    }

    /// The learnt pedal of this song's piano part over its range.
    pub fn learnt(&self, model: &PedalModel) -> Vec<(u64, u8, u8)> {
        model.pedal(&self.steps, &self.grid, self.range.clone())
    }

    /// The rule: a change at every annotated chord change.
    pub fn rule(&self) -> Vec<(u64, u8, u8)> {
        chord_change_rule(&self.grid, &self.labels, self.range.clone())
    }

    /// The median written length in quarter notes, over the range.
    pub fn written_beats(&self) -> f64 {
        let (from, to) = self.ticks();
        let mut lengths: Vec<f64> = self
            .notes
            .iter()
            .filter(|n| n.1 >= from && n.1 < to)
            .map(|n| (n.2 - n.1) as f64 / f64::from(self.ppq.max(1)))
            .collect();
        lengths.sort_by(f64::total_cmp);
        lengths.get(lengths.len() / 2).copied().unwrap_or(0.0)
    }
}

/// Means over songs of each figure of a pedalling, and the mean distance of its share of time
/// down from the pianist's.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Panel {
    pub songs: usize,
    pub f1: f64,
    pub precision: f64,
    pub recall: f64,
    pub share_down: f64,
    /// Mean over songs of |share down − the pianist's|.
    pub share_off: f64,
    pub blur: f64,
    pub presses_per_bar: f64,
    /// The median over songs of the median sounding length, in quarter notes (it sits on
    /// whole beats: most notes start on one and sound to a change on another).
    pub sounding_beats: f64,
    /// The mean over songs of the median sounding length, in quarter notes.
    pub sounding_beats_mean: f64,
}

/// The panel of `scored` (one per song) against the pianists' own `pianists`.
pub fn panel(scored: &[Scored], pianists: &[Scored]) -> Panel {
    let n = scored.len().max(1) as f64;
    let mean = |f: fn(&Scored) -> f64| scored.iter().map(f).sum::<f64>() / n;
    let mut lengths: Vec<f64> = scored.iter().map(|s| s.sounding_beats).collect();
    lengths.sort_by(f64::total_cmp);
    Panel {
        songs: scored.len(),
        f1: mean(|s| s.f1),
        precision: mean(|s| s.precision),
        recall: mean(|s| s.recall),
        share_down: mean(|s| s.share_down),
        share_off: scored
            .iter()
            .zip(pianists)
            .map(|(s, p)| (s.share_down - p.share_down).abs())
            .sum::<f64>()
            / n,
        blur: mean(|s| s.blur),
        presses_per_bar: mean(|s| s.presses_per_bar),
        sounding_beats: lengths.get(lengths.len() / 2).copied().unwrap_or(0.0),
        sounding_beats_mean: mean(|s| s.sounding_beats),
    }
}

/// The panel of the pianists, the rule and (when given) the learnt pedal on `songs`.
pub fn panels(songs: &[PedalSong], model: Option<&PedalModel>) -> (Panel, Panel, Option<Panel>) {
    let pianists: Vec<Scored> = songs.iter().map(|s| s.score(&s.pianist)).collect();
    let rule: Vec<Scored> = songs.iter().map(|s| s.score(&s.rule())).collect();
    let learnt = model.map(|m| {
        let scored: Vec<Scored> = songs.iter().map(|s| s.score(&s.learnt(m))).collect();
        panel(&scored, &pianists)
    });
    (panel(&pianists, &pianists), panel(&rule, &pianists), learnt)
}

/// The median sounding length, in the grid's beats, of `notes` (pitch, start, end ticks)
/// under the pedal `events`.
pub fn sounding_beats(grid: &Grid, notes: &[(u8, u64, u64)], events: &[(u64, u8, u8)]) -> f64 {
    let end = notes.iter().map(|n| n.2).max().unwrap_or(0);
    let ends = sounding_ends(
        notes,
        &down_spans(events, grid.tick_at(grid.num_steps()).max(end)),
    );
    let mut lengths: Vec<f64> = notes
        .iter()
        .zip(&ends)
        .map(|(n, &e)| grid.beat_at(e) - grid.beat_at(n.1))
        .collect();
    lengths.sort_by(f64::total_cmp);
    lengths.get(lengths.len() / 2).copied().unwrap_or(0.0)
}

/// One line of a panel, as `pianoformer pedal` and `eval --task pedal` print it.
pub fn line(name: &str, p: &Panel) -> String {
    format!(
        "{name:<28} F1 {:.3} (P {:.3}, R {:.3})  down {:.3} (off by {:.3})  blur {:.3}  presses a bar {:.2}  sounding {:.2} beats (mean of songs {:.2})",
        p.f1,
        p.precision,
        p.recall,
        p.share_down,
        p.share_off,
        p.blur,
        p.presses_per_bar,
        p.sounding_beats,
        p.sounding_beats_mean
    )
}
