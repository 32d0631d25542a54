//! What a MIDI file holds, as a person wants to see it: tracks, tempo map, key, time signature
//! and the detected chords per bar. `pianoformer inspect` prints it; the page shows the same.

use serde::Serialize;

use super::chords::PITCH_CLASS_NAMES;
use super::labels::{Detected, detect_structure};
use super::midi::Song;
use super::phrases::{Segment, label_string};
use super::roll::Grid;

#[derive(Clone, Debug, Serialize)]
pub struct TrackSummary {
    pub name: String,
    pub program: Option<u8>,
    /// MIDI channels used, 1-based as musicians count them.
    pub channels: Vec<u8>,
    pub notes: usize,
    pub lowest: u8,
    pub highest: u8,
    pub drums: bool,
    /// The track's pedalling, when it has pedal events.
    pub pedal: Option<super::pedal::PedalFigures>,
}

/// A track's [`PedalFigures`](super::pedal::PedalFigures) over the bars its notes span
/// (`bar_of`: the 1-based bar of a tick).
fn track_pedal(
    track: &super::midi::Track,
    ppq: u16,
    bar_of: impl Fn(u64) -> usize,
) -> Option<super::pedal::PedalFigures> {
    let notes: Vec<(u8, u64, u64)> = track
        .notes
        .iter()
        .map(|n| (n.pitch, n.start, n.end))
        .collect();
    let events: Vec<(u64, u8, u8)> = track
        .pedal
        .iter()
        .map(|p| (p.tick, p.controller, p.value))
        .collect();
    let first = notes.iter().map(|n| n.1).min()?;
    let last = notes.iter().map(|n| n.2).max()?;
    let bars = bar_of(last.saturating_sub(1).max(first)) + 1 - bar_of(first);
    super::pedal::figures(&notes, &events, ppq, bars)
}

#[derive(Clone, Debug, Serialize)]
pub struct TempoSummary {
    /// 1-based bar and beat where the tempo takes effect.
    pub bar: usize,
    pub beat: usize,
    pub bpm: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct SongSummary {
    pub ppq: u16,
    pub seconds: f64,
    pub notes: usize,
    pub tracks: Vec<TrackSummary>,
    pub tempos: Vec<TempoSummary>,
    /// Time signatures as `n/d`, with the 1-based bar where each takes effect (4/4 from bar 1
    /// when the file gives none).
    pub time_signatures: Vec<(usize, String)>,
    pub key: Option<String>,
    /// Chord names per bar, one per beat (`N` where nothing sounds): detected, unless a
    /// harmonizer filled them (`chord_source`).
    pub chords_per_bar: Vec<Vec<String>>,
    pub chord_source: super::harmony::ChordSource,
    /// Index into `tracks` of the track taken as the melody, if any looks like one.
    pub melody_track: Option<usize>,
    /// Detected phrases, and the same as a label string (`i4A8B8A8o2`).
    pub phrases: Vec<Segment>,
    pub phrase_labels: String,
}

const MAJOR_KEYS: [&str; 15] = [
    "Cb", "Gb", "Db", "Ab", "Eb", "Bb", "F", "C", "G", "D", "A", "E", "B", "F#", "C#",
];
const MINOR_KEYS: [&str; 15] = [
    "Ab", "Eb", "Bb", "F", "C", "G", "D", "A", "E", "B", "F#", "C#", "G#", "D#", "A#",
];

/// `Gb major`, `F# minor` from a key signature's sharps/flats.
pub fn key_name(fifths: i8, minor: bool) -> String {
    let i = (fifths.clamp(-7, 7) + 7) as usize;
    if minor {
        format!("{} minor", MINOR_KEYS[i])
    } else {
        format!("{} major", MAJOR_KEYS[i])
    }
}

pub fn note_name(pitch: u8) -> String {
    format!(
        "{}{}",
        PITCH_CLASS_NAMES[(pitch % 12) as usize],
        pitch as i32 / 12 - 1
    )
}

/// A pitch typed as a scientific note name (`C4` = 60, `F#3`, `Bb4`) or a MIDI number.
fn typed_pitch(text: &str) -> Option<u8> {
    let t = text.trim();
    if !t.is_empty() && t.len() <= 3 && t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse::<u8>().ok().filter(|&p| p <= 127);
    }
    let mut chars = t.chars();
    let pc = match chars.next()?.to_ascii_lowercase() {
        'c' => 0,
        'd' => 2,
        'e' => 4,
        'f' => 5,
        'g' => 7,
        'a' => 9,
        'b' => 11,
        _ => return None,
    };
    let rest = chars.as_str();
    let (shift, octave) = match rest.as_bytes().first()? {
        b'#' => (1, &rest[1..]),
        b'b' => (-1, &rest[1..]),
        _ => (0, rest),
    };
    let octave: i32 = match octave.strip_prefix('-') {
        Some(d) if d.len() == 1 => -d.parse::<i32>().ok()?,
        _ if octave.len() == 1 => octave.parse().ok()?,
        _ => return None,
    };
    u8::try_from(12 * (octave + 1) + pc + shift)
        .ok()
        .filter(|&p| p <= 127)
}

/// A singer's range as typed (`C3–C6`, `F#3 to Bb4`, `55-79`): the lowest and highest MIDI
/// pitch, or what is wrong in words. The page's Singer's range reads the same (`pitchRange` in
/// www/labels.js; cases: tests/melody-ranges.json).
pub fn pitch_range(text: &str) -> Result<[u8; 2], String> {
    let t = text.trim();
    let bad = || {
        format!(
            "\"{t}\" is not a range: give the lowest and highest note, e.g. C3–C6, F#3 to Bb4 \
             or 55-79"
        )
    };
    let split = t
        .split_once('–')
        .or_else(|| t.split_once(" to "))
        .or_else(|| {
            // A hyphen after a digit (`C3-C6`, `55 - 79`), not an octave's minus sign (`C-1`).
            let at = t
                .char_indices()
                .find(|&(i, c)| {
                    c == '-' && t[..i].trim_end().ends_with(|d: char| d.is_ascii_digit())
                })?
                .0;
            Some((&t[..at], &t[at + 1..]))
        });
    let (low, high) = split.ok_or_else(bad)?;
    let (low, high) = (
        typed_pitch(low).ok_or_else(bad)?,
        typed_pitch(high).ok_or_else(bad)?,
    );
    if low > high {
        return Err(format!(
            "the range {t} is upside down: give the lowest note first"
        ));
    }
    Ok([low, high])
}

pub fn summarize(song: &Song) -> SongSummary {
    let grid = Grid::for_song(song, 1);
    let bar_beat = |tick: u64| {
        let (bar, beat) = grid.bar_of_beat(grid.step_at(tick).min(grid.num_beats().max(1) - 1));
        (bar + 1, beat + 1)
    };
    let mut time_signatures: Vec<(usize, String)> = song
        .time_signatures
        .iter()
        .map(|t| {
            let name = format!("{}/{}", t.numerator, t.denominator);
            let read = if t.numerator <= 1 {
                format!("{name} (read as 4/4)")
            } else {
                name
            };
            (bar_beat(t.tick).0, read)
        })
        .collect();
    if time_signatures.first().is_none_or(|t| t.0 > 1) {
        time_signatures.insert(0, (1, "4/4".into()));
    }
    let tracks = song
        .tracks
        .iter()
        .map(|t| {
            let mut channels: Vec<u8> = t.notes.iter().map(|n| n.channel + 1).collect();
            channels.sort_unstable();
            channels.dedup();
            TrackSummary {
                name: t.name.clone(),
                program: t.program,
                channels,
                notes: t.notes.len(),
                lowest: t.notes.iter().map(|n| n.pitch).min().unwrap_or(0),
                highest: t.notes.iter().map(|n| n.pitch).max().unwrap_or(0),
                drums: t.is_drums(),
                pedal: track_pedal(t, song.ppq, |tick| bar_beat(tick).0),
            }
        })
        .collect();
    let tempos = song
        .tempos
        .iter()
        .map(|t| {
            let (bar, beat) = bar_beat(t.tick);
            TempoSummary {
                bar,
                beat,
                bpm: 60e6 / t.micros_per_quarter as f64,
            }
        })
        .collect();
    let Detected {
        chords,
        melody_track,
        phrases,
    } = detect_structure(song, &grid);
    let chords_per_bar = (0..grid.num_bars())
        .map(|bar| {
            chords[grid.bar_beats(bar)]
                .iter()
                .map(|c| c.map_or_else(|| "N".to_string(), |c| c.name()))
                .collect()
        })
        .collect();
    SongSummary {
        ppq: song.ppq,
        seconds: song.seconds_at(song.end_tick()),
        notes: song.note_count(),
        tracks,
        tempos,
        time_signatures,
        key: song
            .key_signatures
            .first()
            .map(|k| key_name(k.fifths, k.minor)),
        chords_per_bar,
        chord_source: super::harmony::ChordSource::Detector,
        melody_track,
        phrase_labels: label_string(&phrases),
        phrases,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_singers_range_is_read_as_the_page_reads_it() {
        let cases: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/melody-ranges.json")).unwrap();
        for case in cases["cases"].as_array().unwrap() {
            let text = case["text"].as_str().unwrap();
            let read = super::pitch_range(text);
            if case.get("refused").is_some() {
                assert!(read.is_err(), "{text}: {read:?}");
            } else {
                let want: Vec<u8> = serde_json::from_value(case["range"].clone()).unwrap();
                assert_eq!(read.as_ref().map(|r| r.to_vec()), Ok(want), "{text}");
            }
        }
        assert!(
            super::pitch_range("C6-C3")
                .unwrap_err()
                .contains("lowest note first")
        );
    }

    use super::*;
    use crate::music::midi::{Note, TimeSignature, Track};

    #[test]
    fn names() {
        assert_eq!(key_name(-6, false), "Gb major");
        assert_eq!(key_name(3, true), "F# minor");
        assert_eq!(key_name(0, true), "A minor");
        assert_eq!(note_name(60), "C4");
        assert_eq!(note_name(21), "A0");
    }

    #[test]
    fn bars_follow_the_time_signature() {
        let chord = |root: u8, start: u64| {
            [0u8, 4, 7].map(|i| Note {
                pitch: 48 + root + i,
                velocity: 80,
                start,
                end: start + 3 * 480,
                channel: 0,
            })
        };
        let mut notes = chord(0, 0).to_vec();
        notes.extend(chord(7, 3 * 480));
        let song = Song {
            ppq: 480,
            tempos: vec![],
            time_signatures: vec![TimeSignature {
                tick: 0,
                numerator: 3,
                denominator: 4,
            }],
            key_signatures: vec![],
            tracks: vec![Track {
                pedal: Vec::new(),
                name: "Piano".into(),
                notes,
                ..Default::default()
            }],
        };
        let s = summarize(&song);
        assert_eq!(s.time_signatures, vec![(1, "3/4".to_string())]);
        assert_eq!(s.chords_per_bar, vec![vec!["C"; 3], vec!["G"; 3]]);
        assert_eq!(s.tracks[0].lowest, 48);
        assert_eq!(s.tracks[0].channels, vec![1]);
    }
}
