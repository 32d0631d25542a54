//! A POP909 song as the models see it: the beat grid of `beat_midi.txt`, the MELODY, BRIDGE and
//! PIANO rolls, and per-step labels from the structure annotations (chords of
//! `structure_finalized_chord.txt`, phrases of `structure_human_label1.txt`) placed with
//! `startpos.csv`.
//!
//! The annotations count beats from their own start, four to a bar. `startpos.csv` gives that
//! start relative to the first note. The annotated melody (`structure_melody.txt`) checks it:
//! where it matches the MIDI melody clearly better at another beat, and for the 41 songs
//! `startpos.csv` leaves out, the annotations are placed where it matches best. The MIDI-time
//! chords of `chord_midi.txt`, made independently, cross-check the result.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{
    Pop909Error, Split, parse_beat_chords, parse_beats, parse_melody, parse_phrases,
    parse_startpos, parse_timed_chords, read_text, song_dir,
};
use crate::music::chords::Chord;
use crate::music::grid::Grid;
use crate::music::labels::{StepLabels, sounding_pitch};
use crate::music::midi::{Song, read_midi};
use crate::music::phrases::Segment;
use crate::music::roll::{MultiRoll, Role};

/// Bars of the structure annotations, in beats.
pub const ANNOTATION_BEATS_PER_BAR: usize = 4;

/// How a song's annotations were placed on its beats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Alignment {
    /// With the song's offset in `startpos.csv`.
    StartPos,
    /// `startpos.csv` has an offset, but the annotated melody (`structure_melody.txt`, made with
    /// the chord and phrase labels) matches the MIDI melody clearly better elsewhere: placed
    /// there. The chords of `chord_midi.txt`, made independently, agree with the move.
    Corrected,
    /// The song has no offset in `startpos.csv`: where the annotated melody matches best.
    MelodyMatch,
}

/// How much better (as a share of the melody's sixteenths) the annotated melody must match
/// elsewhere before `startpos.csv`'s placement is overruled.
pub const MELODY_MARGIN: f64 = 0.1;

/// One song with everything a model or a metric needs.
#[derive(Clone, Debug)]
pub struct Pop909Song {
    pub id: u32,
    pub split: Split,
    pub song: Song,
    /// Beats of `beat_midi.txt` (extended to cover every note), bars of four beats from the
    /// start of the annotations (a pickup bar before it).
    pub grid: Grid,
    pub rolls: MultiRoll,
    pub labels: StepLabels,
    /// Steps covered by both chord and phrase annotations.
    pub annotated: Range<usize>,
    pub alignment: Alignment,
    /// The annotations' first beat on the grid (negative: they start before the first beat).
    pub start_beat: i64,
    /// Share of the annotated melody's sixteenths (`structure_melody.txt`, notes only) on which
    /// the MIDI melody sounds the same pitch, as placed.
    pub melody_agreement: f64,
    /// Per-beat agreement (root and chord family) of the placed annotations with
    /// `chord_midi.txt`, over beats where both name a chord.
    pub chord_agreement: f64,
    /// Where the annotated chords agree best with `chord_midi.txt`: the cross-check of
    /// `start_beat` for songs placed with `startpos.csv`.
    pub chord_match_beat: i64,
}

/// The data set's folder and its `startpos.csv`.
#[derive(Clone, Debug)]
pub struct Pop909 {
    pub root: PathBuf,
    startpos: HashMap<u32, f64>,
}

impl Pop909 {
    /// Opens the data set at `root` (the folder holding `songs/` and `startpos.csv`).
    pub fn open(root: &Path) -> Result<Self, Pop909Error> {
        if !root.join("songs").is_dir() {
            return Err(Pop909Error::Io {
                path: root.to_path_buf(),
                message: "no POP909 here (expected a songs/ folder and startpos.csv)".into(),
            });
        }
        let startpos = parse_startpos(&read_text(&root.join("startpos.csv"))?)?
            .into_iter()
            .collect();
        Ok(Self {
            root: root.to_path_buf(),
            startpos,
        })
    }

    /// Ids of the songs present, ascending.
    pub fn song_ids(&self) -> Result<Vec<u32>, Pop909Error> {
        let dir = self.root.join("songs");
        let entries = std::fs::read_dir(&dir).map_err(|e| Pop909Error::Io {
            path: dir.clone(),
            message: e.to_string(),
        })?;
        let mut ids: Vec<u32> = entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }

    /// Ids of the songs of one split.
    pub fn split_ids(&self, split: Split) -> Result<Vec<u32>, Pop909Error> {
        Ok(self
            .song_ids()?
            .into_iter()
            .filter(|&id| Split::of(id) == split)
            .collect())
    }

    /// The offset of `startpos.csv` for song `id`, in quarter notes.
    pub fn start_offset(&self, id: u32) -> Option<f64> {
        self.startpos.get(&id).copied()
    }

    /// Loads song `id` on a grid of `steps_per_beat` steps per beat.
    pub fn load(&self, id: u32, steps_per_beat: usize) -> Result<Pop909Song, Pop909Error> {
        let dir = song_dir(&self.root, id);
        let midi_path = dir.join(format!("{id:03}.mid"));
        let bytes = std::fs::read(&midi_path).map_err(|e| Pop909Error::Io {
            path: midi_path.clone(),
            message: e.to_string(),
        })?;
        let song = read_midi(&bytes).map_err(|e| Pop909Error::Io {
            path: midi_path.clone(),
            message: e.to_string(),
        })?;
        let read = |name: &str| read_text(&dir.join(name));
        let beats = parse_beats(&read("beat_midi.txt")?)?;
        let finalized = parse_beat_chords(&read("structure_finalized_chord.txt")?)?;
        let phrases = parse_phrases(&read("structure_human_label1.txt")?)?;
        let timed = parse_timed_chords(&read("chord_midi.txt")?)?;
        let annotated_melody: Vec<u8> = parse_melody(&read("structure_melody.txt")?)?
            .into_iter()
            .flat_map(|(pitch, len)| std::iter::repeat_n(pitch, len as usize))
            .collect();

        let beat_ticks = beat_grid(&song, beats.iter().map(|b| b.seconds));
        // The annotated chords, one per beat from the annotations' start.
        let annotated_chords: Vec<Option<Chord>> = finalized
            .iter()
            .flat_map(|c| {
                let chord = Chord::parse(&c.symbol).ok().flatten();
                std::iter::repeat_n(chord, c.beats as usize)
            })
            .collect();
        // chord_midi.txt's chord in the middle of each beat.
        let midi_chords: Vec<Option<Chord>> = beat_ticks
            .windows(2)
            .map(|w| {
                let mid = (song.seconds_at(w[0]) + song.seconds_at(w[1])) / 2.0;
                timed
                    .iter()
                    .find(|c| c.start <= mid && mid < c.end)
                    .and_then(|c| Chord::parse(&c.symbol).ok().flatten())
            })
            .collect();
        let first_note = song
            .tracks
            .iter()
            .filter_map(|t| t.notes.first().map(|n| n.start))
            .min()
            .unwrap_or(0);
        // The MIDI melody per sixteenth of the beat grid.
        let sixteenths = Grid::regular(beat_ticks.clone(), 4, 4, 0);
        let midi_melody: Vec<u8> = {
            let roll = crate::music::roll::PianoRoll::from_notes(
                song.tracks
                    .iter()
                    .filter(|t| Role::from_track_name(&t.name) == Some(Role::Melody))
                    .flat_map(|t| &t.notes),
                &sixteenths,
            );
            (0..roll.num_steps)
                .map(|s| sounding_pitch(&roll, s))
                .collect()
        };
        let melody_match_beat = best_melody_offset(&annotated_melody, &midi_melody);
        let melody_fit = |beat: i64| {
            let (agree, total) = melody_agreement(&annotated_melody, &midi_melody, beat);
            agree as f64 / total.max(1) as f64
        };
        let (start_beat, alignment) = match self.start_offset(id) {
            Some(offset) => {
                let tick = first_note as f64 + offset * song.ppq as f64;
                let beat = nearest_beat(&beat_ticks, song.ppq, tick);
                if melody_fit(melody_match_beat) >= melody_fit(beat) + MELODY_MARGIN {
                    (melody_match_beat, Alignment::Corrected)
                } else {
                    (beat, Alignment::StartPos)
                }
            }
            None => (melody_match_beat, Alignment::MelodyMatch),
        };
        let melody_agreement = melody_fit(start_beat);
        let (agree, total) = chord_agreement(&annotated_chords, &midi_chords, start_beat);
        let chord_agreement = agree as f64 / total.max(1) as f64;
        let chord_match_beat = best_chord_offset(&annotated_chords, &midi_chords);
        let grid = Grid::regular(
            beat_ticks,
            steps_per_beat,
            ANNOTATION_BEATS_PER_BAR,
            start_beat.rem_euclid(ANNOTATION_BEATS_PER_BAR as i64) as usize,
        );
        let num_beats = grid.num_beats() as i64;
        let beat_chords: Vec<Option<Chord>> = (0..num_beats)
            .map(|b| {
                let k = b - start_beat;
                if k < 0 {
                    None
                } else {
                    annotated_chords.get(k as usize).copied().flatten()
                }
            })
            .collect();
        let mut segments = Vec::new();
        let mut at = 0i64; // annotation bar
        for p in &phrases {
            // The phrase's bars that fall on the grid.
            let bars: Vec<usize> = (at..at + p.bars as i64)
                .map(|j| start_beat + j * ANNOTATION_BEATS_PER_BAR as i64)
                .filter(|&b| b >= 0 && b < num_beats)
                .map(|b| grid.bar_of_beat(b as usize).0)
                .collect();
            if let Some(&first) = bars.first() {
                segments.push(Segment {
                    start_bar: first,
                    bars: bars.len(),
                    letter: p.letter,
                });
            }
            at += p.bars as i64;
        }
        let tracks = song
            .tracks
            .iter()
            .filter_map(|t| Role::from_track_name(&t.name).map(|role| (role, &t.notes[..])));
        let rolls = MultiRoll::from_tracks(tracks, &grid);
        let labels = StepLabels::new(&grid, &rolls.melody, &beat_chords, &segments);
        let spb = grid.steps_per_beat as i64;
        let end_beat = (start_beat + annotated_chords.len() as i64)
            .min(start_beat + at * ANNOTATION_BEATS_PER_BAR as i64)
            .clamp(0, num_beats);
        let annotated = (start_beat.clamp(0, end_beat) * spb) as usize..(end_beat * spb) as usize;
        Ok(Pop909Song {
            id,
            split: Split::of(id),
            song,
            grid,
            rolls,
            labels,
            annotated,
            alignment,
            start_beat,
            melody_agreement,
            chord_agreement,
            chord_match_beat,
        })
    }
}

/// Beat ticks from annotated beat times, made strictly increasing, with a first beat at tick 0
/// when a note starts before the first annotated beat and beats of a quarter note added until
/// every note is covered.
fn beat_grid(song: &Song, seconds: impl Iterator<Item = f64>) -> Vec<u64> {
    let ppq = song.ppq.max(1) as u64;
    let mut ticks: Vec<u64> = Vec::new();
    for t in seconds.map(|s| song.tick_at_seconds(s)) {
        if ticks.last().is_none_or(|&last| t > last) {
            ticks.push(t);
        }
    }
    let first_note = song
        .tracks
        .iter()
        .filter_map(|t| t.notes.first().map(|n| n.start))
        .min();
    match (ticks.first(), first_note) {
        (Some(&first), Some(note)) if note < first && first > 0 => ticks.insert(0, 0),
        (None, _) => ticks.push(0),
        _ => {}
    }
    let end = song.end_tick();
    while ticks.len() < 2 || *ticks.last().unwrap() < end {
        let last = *ticks.last().unwrap();
        ticks.push(last + ppq);
    }
    ticks
}

/// Index of the beat nearest to `tick`; before the first beat, counted back in quarter notes
/// (negative).
fn nearest_beat(beat_ticks: &[u64], ppq: u16, tick: f64) -> i64 {
    let first = beat_ticks[0] as f64;
    if tick < first {
        return ((tick - first) / ppq.max(1) as f64).round() as i64;
    }
    let i = beat_ticks.partition_point(|&t| (t as f64) <= tick);
    [i.saturating_sub(1), i.min(beat_ticks.len() - 1)]
        .into_iter()
        .min_by(|&a, &b| {
            let da = (beat_ticks[a] as f64 - tick).abs();
            let db = (beat_ticks[b] as f64 - tick).abs();
            da.total_cmp(&db)
        })
        .unwrap_or(0) as i64
}

/// Sixteenths on which the annotated melody placed from beat `start` names the pitch the MIDI
/// melody sounds, and the sixteenths where the annotation has a note.
pub fn melody_agreement(annotated: &[u8], midi: &[u8], start: i64) -> (usize, usize) {
    let (mut agree, mut total) = (0, 0);
    for (k, &p) in annotated.iter().enumerate() {
        if p == 0 {
            continue;
        }
        total += 1;
        let step = start * 4 + k as i64;
        agree += (step >= 0 && midi.get(step as usize) == Some(&p)) as usize;
    }
    (agree, total)
}

/// The start beat at which the annotated melody agrees with the MIDI melody on the most
/// sixteenths (the earliest on a tie).
pub fn best_melody_offset(annotated: &[u8], midi: &[u8]) -> i64 {
    (-16..(midi.len() / 4) as i64)
        .max_by_key(|&s| (melody_agreement(annotated, midi, s).0, std::cmp::Reverse(s)))
        .unwrap_or(0)
}

fn same_chord(a: Chord, b: Chord) -> bool {
    a.root == b.root && a.quality.family() == b.quality.family()
}

/// Beats on which the annotated chords placed from beat `start` agree with `midi_chords`
/// (root and family), and the beats where both name a chord.
pub fn chord_agreement(
    annotated: &[Option<Chord>],
    midi_chords: &[Option<Chord>],
    start: i64,
) -> (usize, usize) {
    let (mut agree, mut total) = (0, 0);
    for (k, a) in annotated.iter().enumerate() {
        let b = start + k as i64;
        if b < 0 {
            continue;
        }
        if let (Some(a), Some(Some(m))) = (a, midi_chords.get(b as usize)) {
            total += 1;
            agree += same_chord(*a, *m) as usize;
        }
    }
    (agree, total)
}

/// The start beat at which the annotated chords agree with `midi_chords` on the most beats
/// (the earliest such beat on a tie).
pub fn best_chord_offset(annotated: &[Option<Chord>], midi_chords: &[Option<Chord>]) -> i64 {
    (-(ANNOTATION_BEATS_PER_BAR as i64) * 4..midi_chords.len() as i64)
        .max_by_key(|&s| {
            (
                chord_agreement(annotated, midi_chords, s).0,
                std::cmp::Reverse(s),
            )
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::music::chords::Quality;

    fn ch(root: u8, quality: Quality) -> Option<Chord> {
        Some(Chord { root, quality })
    }

    #[test]
    fn chords_find_their_offset() {
        use Quality::*;
        let annotated = [
            ch(0, Maj),
            ch(0, Maj),
            ch(9, Min),
            ch(5, Maj),
            ch(7, Dom7),
            None,
        ];
        let mut midi = vec![None, None, None];
        // chord_midi.txt names the same chords three beats later, G7 as plain G.
        midi.extend([
            ch(0, Maj),
            ch(0, Maj),
            ch(9, Min),
            ch(5, Maj),
            ch(7, Maj),
            ch(0, Maj),
        ]);
        assert_eq!(best_chord_offset(&annotated, &midi), 3);
        assert_eq!(chord_agreement(&annotated, &midi, 3), (5, 5));
        assert_eq!(chord_agreement(&annotated, &midi, 2).1, 4);
    }

    #[test]
    fn nearest_beat_counts_back_before_the_grid() {
        let beats = [100, 580, 1060, 1540];
        assert_eq!(nearest_beat(&beats, 480, 600.0), 1);
        assert_eq!(nearest_beat(&beats, 480, 1400.0), 3);
        assert_eq!(nearest_beat(&beats, 480, 5000.0), 3);
        assert_eq!(nearest_beat(&beats, 480, -860.0), -2);
    }
}
