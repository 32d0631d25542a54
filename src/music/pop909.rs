//! POP909 with structure labels (`../shared/data/pop909`): the song folder's annotation files,
//! parsed with typed errors, and the fixed train/validation/test split by song id.
//!
//! File formats are described in the data set's README; the parsers here take the text, so
//! they are tested on small strings and, when the data is present, on every song.

use std::path::{Path, PathBuf};

mod song;
pub use song::{
    ANNOTATION_BEATS_PER_BAR, Alignment, Pop909, Pop909Song, best_chord_offset, chord_agreement,
};

/// The data set's split by song id: ids divisible by 10 are test, ids ≡ 5 (mod 10) validation,
/// the rest training. Fixed so that every reported figure is reproducible.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    Train,
    Validation,
    Test,
}

impl Split {
    pub fn of(song_id: u32) -> Self {
        match song_id % 10 {
            0 => Self::Test,
            5 => Self::Validation,
            _ => Self::Train,
        }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Pop909Error {
    #[error("cannot read {path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error("{file}, line {line}: {message}")]
    Parse {
        file: &'static str,
        line: usize,
        message: String,
    },
}

/// Non-blank lines with their 1-based numbers, for error messages.
fn content_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| (i + 1, l))
}

fn parse_err(file: &'static str, line: usize, message: impl Into<String>) -> Pop909Error {
    Pop909Error::Parse {
        file,
        line,
        message: message.into(),
    }
}

/// One line of `beat_midi.txt`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Beat {
    pub seconds: f64,
    /// Column `b`: 1 on every fourth beat, the downbeats of 4/4 bars.
    pub bar_start: bool,
}

pub fn parse_beats(text: &str) -> Result<Vec<Beat>, Pop909Error> {
    const FILE: &str = "beat_midi.txt";
    let mut beats = Vec::new();
    for (i, line) in content_lines(text) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let [t, _, b] = cols[..] else {
            return Err(parse_err(FILE, i, "expected three numbers"));
        };
        let seconds: f64 = t.parse().map_err(|_| parse_err(FILE, i, "bad time"))?;
        let b: f64 = b.parse().map_err(|_| parse_err(FILE, i, "bad bar flag"))?;
        if beats
            .last()
            .is_some_and(|prev: &Beat| prev.seconds >= seconds)
        {
            return Err(parse_err(FILE, i, "beat times must increase"));
        }
        beats.push(Beat {
            seconds,
            bar_start: b == 1.0,
        });
    }
    Ok(beats)
}

/// One line of `chord_midi.txt`: a chord symbol over a span of seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct TimedChord {
    pub start: f64,
    pub end: f64,
    /// Harte-style symbol such as `C:maj`, `A:min7`, `G:sus4(b7)` or `N` (no chord).
    pub symbol: String,
}

pub fn parse_timed_chords(text: &str) -> Result<Vec<TimedChord>, Pop909Error> {
    const FILE: &str = "chord_midi.txt";
    let mut out = Vec::new();
    for (i, line) in content_lines(text) {
        let mut cols = line.split('\t');
        let (Some(s), Some(e), Some(symbol)) = (cols.next(), cols.next(), cols.next()) else {
            return Err(parse_err(FILE, i, "expected start, end and chord"));
        };
        let start: f64 = s
            .trim()
            .parse()
            .map_err(|_| parse_err(FILE, i, "bad start"))?;
        let end: f64 = e
            .trim()
            .parse()
            .map_err(|_| parse_err(FILE, i, "bad end"))?;
        out.push(TimedChord {
            start,
            end,
            symbol: symbol.trim().to_string(),
        });
    }
    Ok(out)
}

/// One line of `structure_finalized_chord.txt`: a chord lasting a whole number of beats.
#[derive(Clone, Debug, PartialEq)]
pub struct BeatChord {
    pub symbol: String,
    /// Pitch classes, 0 = C; empty for no chord.
    pub pitch_classes: Vec<u8>,
    /// Root pitch class; `None` for no chord.
    pub root: Option<u8>,
    pub beats: u32,
}

pub fn parse_beat_chords(text: &str) -> Result<Vec<BeatChord>, Pop909Error> {
    const FILE: &str = "structure_finalized_chord.txt";
    let mut out = Vec::new();
    for (i, line) in content_lines(text) {
        let line = line.trim();
        // The symbol may itself contain spaces ("G:sus4(b7, 9)"), so split around the brackets.
        let (Some(open), Some(close)) = (line.rfind('['), line.rfind(']')) else {
            return Err(parse_err(FILE, i, "expected a [pitch classes] list"));
        };
        if close < open {
            return Err(parse_err(FILE, i, "malformed [pitch classes] list"));
        }
        let symbol = line[..open].trim().to_string();
        let pitch_classes = line[open + 1..close]
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| s.parse::<u8>().ok().filter(|&p| p < 12))
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(|| parse_err(FILE, i, "pitch classes must be 0-11"))?;
        let rest: Vec<&str> = line[close + 1..].split_whitespace().collect();
        // "N" (no chord) lines may leave the root out: `N []  7`. Two lines of the data set
        // carry a stray third number (`Ab:maj [0, 3, 8] 8 4 2`, song 803): it is ignored.
        let (root, beats) = match rest[..] {
            [root, beats, ..] => (Some(root), beats),
            [beats] if pitch_classes.is_empty() => (None, beats),
            _ => {
                return Err(parse_err(
                    FILE,
                    i,
                    "expected root and duration after the list",
                ));
            }
        };
        let root = match root {
            // "N" lines carry noise in their other columns (`N [10] 18 2` in song 310).
            _ if symbol == "N" => None,
            None => None,
            Some(r) => Some(
                r.parse::<u8>()
                    .ok()
                    .filter(|&r| r < 12)
                    .ok_or_else(|| parse_err(FILE, i, "root must be 0-11"))?,
            ),
        };
        let beats: u32 = beats
            .parse()
            .map_err(|_| parse_err(FILE, i, "bad duration in beats"))?;
        out.push(BeatChord {
            symbol,
            pitch_classes,
            root,
            beats,
        });
    }
    Ok(out)
}

/// `structure_melody.txt`: the annotated melody as (MIDI pitch, length in sixteenth notes)
/// pairs from the start of the annotations; pitch 0 is a rest.
pub fn parse_melody(text: &str) -> Result<Vec<(u8, u32)>, Pop909Error> {
    const FILE: &str = "structure_melody.txt";
    let mut out = Vec::new();
    for (i, line) in content_lines(text) {
        let mut cols = line.split_whitespace();
        let (Some(pitch), Some(len), None) = (cols.next(), cols.next(), cols.next()) else {
            return Err(parse_err(FILE, i, "expected a pitch and a length"));
        };
        let pitch: u8 = pitch
            .parse()
            .ok()
            .filter(|&p| p < 128)
            .ok_or_else(|| parse_err(FILE, i, format!("bad pitch '{pitch}'")))?;
        let len: u32 = len
            .parse()
            .map_err(|_| parse_err(FILE, i, format!("bad length '{len}'")))?;
        out.push((pitch, len));
    }
    Ok(out)
}

/// A phrase of `structure_human_label*.txt`: a letter and its length in bars.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Phrase {
    /// Upper case A–E, X: melodic phrases (same letter = repeat); lower case i (intro),
    /// o (outro), b/x (bridge or transition): non-melodic.
    pub letter: char,
    pub bars: u32,
}

impl Phrase {
    pub fn is_melodic(&self) -> bool {
        self.letter.is_ascii_uppercase()
    }
}

/// Parses a string of (letter, bar count) pairs such as `i4A4B8A4o3`.
pub fn parse_phrases(text: &str) -> Result<Vec<Phrase>, Pop909Error> {
    const FILE: &str = "structure_human_label1.txt";
    let text = text.trim();
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((pos, letter)) = chars.next() {
        if !letter.is_ascii_alphabetic() {
            return Err(parse_err(
                FILE,
                1,
                format!("expected a letter at character {}", pos + 1),
            ));
        }
        let mut bars = 0u32;
        let mut digits = 0;
        while let Some(&(_, d)) = chars.peek() {
            let Some(v) = d.to_digit(10) else { break };
            bars = bars.saturating_mul(10).saturating_add(v);
            digits += 1;
            chars.next();
        }
        if digits == 0 || bars == 0 {
            return Err(parse_err(
                FILE,
                1,
                format!("phrase '{letter}' has no bar count"),
            ));
        }
        out.push(Phrase { letter, bars });
    }
    if out.is_empty() {
        return Err(parse_err(FILE, 1, "no phrases"));
    }
    Ok(out)
}

/// `startpos.csv`: per song id, the offset in quarter notes between the first MIDI note and the
/// start of the structure annotations (positive: the annotations start later).
pub fn parse_startpos(text: &str) -> Result<Vec<(u32, f64)>, Pop909Error> {
    const FILE: &str = "startpos.csv";
    let mut out = Vec::new();
    // The first line is the header.
    for (i, line) in content_lines(text).skip(1) {
        let cols: Vec<&str> = line.split(',').map(str::trim).collect();
        let [id, position, _beats] = cols[..] else {
            return Err(parse_err(FILE, i, "expected ID,Position,Beats"));
        };
        let id: u32 = id.parse().map_err(|_| parse_err(FILE, i, "bad song id"))?;
        // Position (16 ticks per quarter) is authoritative: Beats is blank on some lines.
        let position: i64 = position
            .parse()
            .map_err(|_| parse_err(FILE, i, "bad position"))?;
        out.push((id, position as f64 / 16.0));
    }
    Ok(out)
}

/// The folder of song `id` (`songs/NNN`).
pub fn song_dir(root: &Path, id: u32) -> PathBuf {
    root.join("songs").join(format!("{id:03}"))
}

pub fn read_text(path: &Path) -> Result<String, Pop909Error> {
    std::fs::read_to_string(path).map_err(|e| Pop909Error::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotated_melody_parses() {
        assert_eq!(
            parse_melody("0 65\n67 1\n\n62 2\n").unwrap(),
            vec![(0, 65), (67, 1), (62, 2)]
        );
        assert!(parse_melody("67").is_err());
        assert!(parse_melody("300 1").is_err());
    }

    #[test]
    fn split_is_by_song_id() {
        assert_eq!(Split::of(10), Split::Test);
        assert_eq!(Split::of(15), Split::Validation);
        assert_eq!(Split::of(1), Split::Train);
        let test = (1..=859).filter(|&i| Split::of(i) == Split::Test).count();
        assert_eq!(test, 85);
    }

    #[test]
    fn beats_and_bar_flags() {
        let beats = parse_beats("0.05 1.0 1.0\n0.72 0.0 0.0\n1.39 1.0 0.0\n").unwrap();
        assert_eq!(beats.len(), 3);
        assert!(beats[0].bar_start && !beats[2].bar_start);
        assert!(
            parse_beats("1.0 1 1\n0.5 0 0\n").is_err(),
            "times must increase"
        );
    }

    #[test]
    fn chord_symbols_with_spaces_and_no_chord() {
        let text = "B:maj [3, 6, 11] 11 2 \nG:sus4(b7, 9) [0, 2, 5, 7] 7 4\nN [] 0 1\nN []  7 \nN [10] 18 2\n";
        let chords = parse_beat_chords(text).unwrap();
        assert_eq!(chords[0].pitch_classes, vec![3, 6, 11]);
        assert_eq!((chords[0].root, chords[0].beats), (Some(11), 2));
        assert_eq!((chords[3].root, chords[3].beats), (None, 7));
        assert_eq!(chords[1].symbol, "G:sus4(b7, 9)");
        assert!(chords[2].pitch_classes.is_empty());
        assert_eq!(chords[4].root, None);
        let err = parse_beat_chords("C:maj [0, 4, 13] 0 2").unwrap_err();
        assert_eq!(
            err.to_string(),
            "structure_finalized_chord.txt, line 1: pitch classes must be 0-11"
        );
    }

    #[test]
    fn phrase_strings() {
        let p = parse_phrases("i4A4B8A4A4b4B8o3\n").unwrap();
        assert_eq!(p.len(), 8);
        assert_eq!(
            p[2],
            Phrase {
                letter: 'B',
                bars: 8
            }
        );
        assert!(!p[0].is_melodic() && p[1].is_melodic());
        assert_eq!(p.iter().map(|x| x.bars).sum::<u32>(), 39);
        assert!(parse_phrases("A4B").is_err());
        assert!(parse_phrases("4A").is_err());
    }

    #[test]
    fn timed_chords_and_startpos() {
        let c = parse_timed_chords("0.05\t0.72\tN\n0.72\t1.39\tA:min7\n").unwrap();
        assert_eq!(c[1].symbol, "A:min7");
        let s = parse_startpos("ID,Position,Beats\r\n1,8,0.5\r\n4,-16,-1\r\n56,69,\r\n").unwrap();
        assert_eq!(s, vec![(1, 0.5), (4, -1.0), (56, 69.0 / 16.0)]);
    }
}
