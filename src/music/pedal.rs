//! The sustain pedal as a pianist plays it: the spans it is down, how long notes sound under
//! it, and the figures `inspect` and `eval --task pedal` print.
//!
//! A note sounds until its key is released or, when the sustain pedal (controller 64) is down
//! then, until the pedal lifts; a new strike of the same pitch ends it sooner. Values of 64 and
//! up are down (General MIDI's reading; the half-pedal values below it are kept as played, and
//! sound as up). The sostenuto and soft pedals (66, 67) are kept and written, not sounded.
//! `www/audio-notes.js` plays by the same rule.

pub mod model;

use serde::Serialize;

use super::midi::SUSTAIN;

/// The value from which the sustain pedal is down.
pub const DOWN: u8 = 64;

/// The spans `[from, to)` in ticks where the sustain pedal is down, from pedal events
/// `(tick, controller, value)` in tick order (other controllers are skipped); a pedal never
/// lifted stays down until `end` (or its press, when that is later).
pub fn down_spans(events: &[(u64, u8, u8)], end: u64) -> Vec<(u64, u64)> {
    let mut spans = Vec::new();
    let mut pressed: Option<u64> = None;
    for &(tick, controller, value) in events {
        if controller != SUSTAIN {
            continue;
        }
        match (pressed, value >= DOWN) {
            (None, true) => pressed = Some(tick),
            (Some(from), false) => {
                if tick > from {
                    spans.push((from, tick));
                }
                pressed = None;
            }
            _ => {}
        }
    }
    if let Some(from) = pressed {
        spans.push((from, end.max(from + 1)));
    }
    spans
}

/// The tick each note of `notes` (pitch, start, end; any order) stops sounding under the
/// pedal `spans` (from [`down_spans`]): its written end, or the lift of a pedal down at that
/// end, but no later than the next start of the same pitch.
pub fn sounding_ends(notes: &[(u8, u64, u64)], spans: &[(u64, u64)]) -> Vec<u64> {
    let mut order: Vec<usize> = (0..notes.len()).collect();
    order.sort_by_key(|&i| (notes[i].0, notes[i].1));
    let mut ends = vec![0; notes.len()];
    for (k, &i) in order.iter().enumerate() {
        let (pitch, start, end) = notes[i];
        let end = end.max(start);
        let at = spans.partition_point(|s| s.1 <= end);
        let held = match spans.get(at) {
            Some(&(from, to)) if from <= end => to,
            _ => end,
        };
        let restrike = order
            .get(k + 1)
            .map(|&j| notes[j])
            .filter(|n| n.0 == pitch && n.1 > start)
            .map_or(u64::MAX, |n| n.1);
        ends[i] = if restrike > end {
            held.min(restrike)
        } else {
            end
        };
    }
    ends
}

/// Whether the sustain pedal of `events` (in tick order) is down at `tick` (after every event
/// at or before it).
pub fn down_at(events: &[(u64, u8, u8)], tick: u64) -> bool {
    events
        .iter()
        .rev()
        .filter(|e| e.1 == SUSTAIN && e.0 <= tick)
        .map(|e| e.2 >= DOWN)
        .next()
        .unwrap_or(false)
}

/// `old` pedal events with the ticks `[from, to)` given to `new` (whose events there are
/// kept, in order): a sustain pedal down in `old` when the span starts lifts at `from`, and one
/// down in `old` at `to` is pressed again there, so that both sides sound as they did.
pub fn splice(
    old: &[(u64, u8, u8)],
    new: &[(u64, u8, u8)],
    from: u64,
    to: u64,
) -> Vec<(u64, u8, u8)> {
    let mut out: Vec<(u64, u8, u8)> = old.iter().copied().filter(|e| e.0 < from).collect();
    if down_at(old, from.saturating_sub(1)) && from > 0 {
        out.push((from, SUSTAIN, 0));
    }
    out.extend(new.iter().copied().filter(|e| (from..to).contains(&e.0)));
    let inside = down_at(&out, to.saturating_sub(1));
    let after = down_at(old, to);
    if inside != after {
        out.push((to, SUSTAIN, if after { 127 } else { 0 }));
    }
    out.extend(
        old.iter()
            .copied()
            .filter(|e| e.0 >= to && !(e.0 == to && e.1 == SUSTAIN)),
    );
    out.sort_by_key(|e| e.0);
    out
}

/// A track's pedalling in figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PedalFigures {
    /// Pedal events of every controller.
    pub events: usize,
    /// Times the sustain pedal goes down.
    pub presses: usize,
    /// Share of the track's time (its first onset to its last written end) with the pedal down.
    pub share_down: f64,
    /// Presses over the bars the track spans.
    pub presses_per_bar: f64,
    /// The median note's written length and sounding length, in quarter notes.
    pub written_beats: f64,
    pub sounding_beats: f64,
}

impl PedalFigures {
    /// How much longer notes sound than they are written (median over median).
    pub fn lengthening(&self) -> f64 {
        if self.written_beats > 0.0 {
            self.sounding_beats / self.written_beats
        } else {
            1.0
        }
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// The figures of a track's `notes` (pitch, start, end) under its pedal `events`, at `ppq`
/// ticks a quarter; `bars` is how many bars the track spans. `None` for a track without pedal
/// events or notes.
pub fn figures(
    notes: &[(u8, u64, u64)],
    events: &[(u64, u8, u8)],
    ppq: u16,
    bars: usize,
) -> Option<PedalFigures> {
    if events.is_empty() || notes.is_empty() {
        return None;
    }
    let first = notes.iter().map(|n| n.1).min()?;
    let last = notes.iter().map(|n| n.2).max()?.max(first + 1);
    let spans = down_spans(events, last);
    let down: u64 = spans
        .iter()
        .map(|&(from, to)| to.min(last).saturating_sub(from.max(first)))
        .sum();
    let ends = sounding_ends(notes, &spans);
    let beats = |ticks: u64| ticks as f64 / ppq.max(1) as f64;
    Some(PedalFigures {
        events: events.len(),
        presses: spans.len(),
        share_down: down as f64 / (last - first) as f64,
        presses_per_bar: spans.len() as f64 / bars.max(1) as f64,
        written_beats: median(notes.iter().map(|n| beats(n.2 - n.1)).collect()),
        sounding_beats: median(
            notes
                .iter()
                .zip(&ends)
                .map(|(n, &e)| beats(e - n.1))
                .collect(),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pedal_is_down_from_64_and_a_never_lifted_one_holds_to_the_end() {
        // A half-pedal ramp (30, 50) sounds as up; 64 presses; repeats change nothing.
        let events = [
            (0, 64, 30),
            (10, 64, 50),
            (20, 64, 64),
            (30, 64, 127),
            (40, 64, 0),
            (50, 67, 127), // the soft pedal is not the damper
            (60, 64, 100),
        ];
        assert_eq!(down_spans(&events, 90), vec![(20, 40), (60, 90)]);
        assert_eq!(down_spans(&[(95, 64, 127)], 90), vec![(95, 96)]);
        assert!(down_spans(&[], 90).is_empty());
    }

    #[test]
    fn a_note_sounds_until_the_lift_unless_it_is_struck_again() {
        let spans = [(0, 100)];
        let notes = [
            (60, 0, 10),    // released under the pedal: sounds to the lift
            (62, 0, 10),    // struck again at 40: sounds until then
            (62, 40, 50),   // its second strike: to the lift
            (64, 90, 120),  // released after the lift: as written
            (65, 100, 110), // struck as the pedal lifts: as written
        ];
        assert_eq!(sounding_ends(&notes, &spans), vec![100, 40, 100, 120, 110]);
        assert_eq!(sounding_ends(&notes, &[]), vec![10, 10, 50, 120, 110]);
    }

    #[test]
    fn a_span_of_new_pedal_leaves_both_sides_sounding_as_they_did() {
        // Down over 0..100, up, down again from 150.
        let old = [(0, 64, 127), (100, 64, 0), (150, 64, 127)];
        // Bars 40..120 rewritten with a change at 60 and a lift at 110.
        let new = [(60, 64, 127), (110, 64, 0)];
        let out = splice(&old, &new, 40, 120);
        assert_eq!(
            out,
            [
                (0, 64, 127),
                (40, 64, 0),
                (60, 64, 127),
                (110, 64, 0),
                (150, 64, 127)
            ]
        );
        assert!(down_at(&out, 30) && !down_at(&out, 50) && down_at(&out, 70));
        // Nothing new: the span is up, and the old pedal comes back where it was down.
        let none = splice(&old, &[], 40, 160);
        assert_eq!(none, [(0, 64, 127), (40, 64, 0), (160, 64, 127)]);
        assert!(splice(&[], &[], 0, 100).is_empty());
    }

    #[test]
    fn figures_count_presses_share_and_lengths() {
        let notes = [(60, 0, 96), (64, 96, 192), (67, 192, 288), (72, 288, 384)];
        // Down over the first half, then up.
        let events = [(0, 64, 127), (192, 64, 0)];
        let f = figures(&notes, &events, 96, 1).unwrap();
        assert_eq!(f.presses, 1);
        assert!((f.share_down - 0.5).abs() < 1e-9);
        assert!((f.written_beats - 1.0).abs() < 1e-9);
        // Sounding: 2, 1 (lift at 192 is the second note's end: held to 192), 1, 1 beats.
        assert!((f.sounding_beats - 1.0).abs() < 1e-9);
        assert!(figures(&notes, &[], 96, 1).is_none());
    }
}
