//! The page's piece: a song with its tracks' roles, its bars and the chord and phrase labels a
//! user sees and edits in the lanes, as plain JSON (`www/piece.js` documents the same shape).
//! Reading MIDI into it detects what the file does not say (melody track, chords, phrases);
//! writing it back gives a type-1 MIDI file with melody and piano on separate tracks.

use serde::{Deserialize, Serialize};

use super::chords::Chord;
use super::grid::Grid;
use super::harmony::ChordSource;
use super::labels::{PhraseLabel, bar_phrases, detect_structure};
use super::midi::{
    MidiError, Note, Pedal, Song, TempoChange, TimeSignature, Track, read_midi, write_midi,
};
use super::phrases::Segment;
use super::roll::Role;
use super::tokens::STEPS_PER_BEAT;

pub const PIECE_VERSION: u32 = 1;
/// Most notes a piece may hold (a dense four-minute piano piece has about 10 000).
pub const MAX_NOTES: usize = 200_000;
/// Most bars, labels included (also the phrase segmenter's limit).
pub const MAX_BARS: usize = super::phrases::MAX_BARS;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PieceError {
    #[error(transparent)]
    Midi(#[from] MidiError),
    #[error("this file holds no notes")]
    Empty,
    #[error("the piece is not readable: {0}")]
    Invalid(String),
    #[error("bar {bar}: {reason}")]
    Chord { bar: usize, reason: String },
}

/// What a track is to the models and the page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrackRole {
    /// The tune (the accompaniment model's main input).
    Melody,
    /// A secondary melody (POP909's BRIDGE; also an input).
    Bridge,
    /// An accompaniment already in the file.
    Piano,
    /// Notes a model wrote.
    Generated,
    /// Anything else (drums, other instruments): shown and played, not read by the models.
    Other,
}

/// One note: pitch, start and end ticks, velocity.
pub type PieceNote = (u8, u64, u64, u8);

/// One pedal event: tick, controller (64 sustain, 66 sostenuto, 67 soft), value (0–127; 64 and
/// up is down).
pub type PiecePedal = (u64, u8, u8);

/// Most pedal events a piece may hold (as a MIDI file: `midi::MAX_PEDAL_EVENTS`).
pub const MAX_PEDAL_EVENTS: usize = super::midi::MAX_PEDAL_EVENTS;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PieceTrack {
    pub name: String,
    pub role: TrackRole,
    #[serde(default)]
    pub program: u8,
    /// MIDI channel (0-based; 9 is drums). Absent: one per role.
    #[serde(default)]
    pub channel: Option<u8>,
    pub notes: Vec<PieceNote>,
    /// The track's pedal in tick order (absent in pieces and links from before it was kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pedal: Vec<PiecePedal>,
}

impl PieceTrack {
    /// The track's notes as MIDI notes on `channel`, each made possible (pitch and velocity in
    /// range, at least a tick long).
    pub fn midi_notes(&self, channel: u8) -> impl Iterator<Item = Note> + '_ {
        self.notes
            .iter()
            .map(move |&(pitch, start, end, velocity)| Note {
                pitch: pitch.min(127),
                velocity: velocity.clamp(1, 127),
                start,
                end: end.max(start + 1),
                channel,
            })
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Piece {
    pub version: u32,
    pub name: String,
    pub ppq: u16,
    /// (tick, microseconds per quarter note).
    pub tempos: Vec<(u64, u32)>,
    /// (tick, numerator, denominator).
    pub time_signatures: Vec<(u64, u8, u16)>,
    /// Start tick of every bar, planned bars past the music included.
    pub bars: Vec<u64>,
    pub end_tick: u64,
    pub tracks: Vec<PieceTrack>,
    /// A cell per bar: one chord (`Am`), several sharing the bar evenly (`C G`), or "" (none).
    pub chords: Vec<String>,
    /// What filled the chord lane when the piece was opened (the page says it); absent in
    /// share links and pieces saved before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chord_source: Option<ChordSource>,
    /// Phrases in order from bar 0: (letter, bars).
    pub phrases: Vec<(char, usize)>,
    /// Bars that hold the music; labels after them plan what a continuation writes.
    pub prompt_bars: usize,
}

impl Piece {
    /// Reads a MIDI file, detecting the melody track (unless one is named MELODY), the chords
    /// and the phrases.
    pub fn from_midi(bytes: &[u8], name: &str) -> Result<Piece, PieceError> {
        let song = read_midi(bytes)?;
        Piece::from_song(&song, name)
    }

    pub fn from_song(song: &Song, name: &str) -> Result<Piece, PieceError> {
        if song.note_count() == 0 {
            return Err(PieceError::Empty);
        }
        let grid = Grid::for_song(song, STEPS_PER_BEAT);
        let detected = detect_structure(song, &grid);
        let named = |i: usize| Role::from_track_name(&song.tracks[i].name);
        let has_named_melody = (0..song.tracks.len()).any(|i| named(i) == Some(Role::Melody));
        let tracks = song
            .tracks
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let role = match named(i) {
                    Some(Role::Melody) => TrackRole::Melody,
                    Some(Role::Bridge) => TrackRole::Bridge,
                    Some(Role::Piano) => TrackRole::Piano,
                    None if !has_named_melody && detected.melody_track == Some(i) => {
                        TrackRole::Melody
                    }
                    None if t.is_drums() => TrackRole::Other,
                    None => TrackRole::Piano,
                };
                PieceTrack {
                    name: if t.name.trim().is_empty() {
                        format!("Track {}", i + 1)
                    } else {
                        t.name.clone()
                    },
                    role,
                    program: t.program.unwrap_or(0),
                    channel: t.notes.first().map(|n| n.channel),
                    notes: t
                        .notes
                        .iter()
                        .map(|n| (n.pitch, n.start, n.end, n.velocity))
                        .collect(),
                    pedal: t
                        .pedal
                        .iter()
                        .map(|p| (p.tick, p.controller, p.value))
                        .collect(),
                }
            })
            .collect();
        let bars = grid.bar_ticks();
        let chords = (0..grid.num_bars())
            .map(|bar| {
                let beats: Vec<Option<Chord>> = grid
                    .bar_beats(bar)
                    .map(|b| detected.chords.get(b).copied().flatten())
                    .collect();
                chord_cell(&beats)
            })
            .collect();
        let mut piece = Piece {
            version: PIECE_VERSION,
            name: name.to_string(),
            ppq: song.ppq,
            tempos: song
                .tempos
                .iter()
                .map(|t| (t.tick, t.micros_per_quarter))
                .collect(),
            time_signatures: song
                .time_signatures
                .iter()
                .map(|t| (t.tick, t.numerator, t.denominator))
                .collect(),
            prompt_bars: bars.len(),
            bars,
            end_tick: song.end_tick(),
            tracks,
            chords,
            chord_source: Some(ChordSource::Detector),
            phrases: detected
                .phrases
                .iter()
                .map(|s| (s.letter, s.bars))
                .collect(),
        };
        piece.fit_phrases();
        Ok(piece)
    }

    /// An empty piece of `bars` bars in `numerator/denominator` at `bpm`, its melody track
    /// empty, no chords and one phrase: a plan to fill (chord cells and phrases set after),
    /// for a song that starts from nothing.
    pub fn from_plan(
        name: &str,
        bars: usize,
        numerator: u8,
        denominator: u16,
        bpm: f64,
    ) -> Result<Piece, PieceError> {
        let bad = |s: String| Err(PieceError::Invalid(s));
        if bars == 0 || bars > MAX_BARS {
            return bad(format!("a plan needs 1 to {MAX_BARS} bars, not {bars}"));
        }
        if !(20.0..=400.0).contains(&bpm) {
            return bad(format!(
                "a tempo of {bpm} beats a minute is not one to play at (20–400)"
            ));
        }
        let ppq: u16 = 480;
        let bar = ppq as u64 * 4 * numerator as u64 / denominator.max(1) as u64;
        let mut piece = Piece {
            version: PIECE_VERSION,
            name: name.to_string(),
            ppq,
            tempos: vec![(0, (60_000_000.0 / bpm).round() as u32)],
            time_signatures: vec![(0, numerator, denominator)],
            bars: (0..bars as u64).map(|b| b * bar).collect(),
            end_tick: 0,
            tracks: vec![PieceTrack {
                name: Role::Melody.track_name().into(),
                role: TrackRole::Melody,
                program: 0,
                channel: Some(Role::Melody.channel()),
                notes: Vec::new(),
                pedal: Vec::new(),
            }],
            chords: vec![String::new(); bars],
            chord_source: None,
            phrases: vec![('A', bars)],
            prompt_bars: 0,
        };
        piece.validate()?;
        if bar == 0 || !(1..=32).contains(&numerator) {
            return bad(format!(
                "the time signature {numerator}/{denominator} is not one to plan in"
            ));
        }
        piece.fit_phrases();
        Ok(piece)
    }

    /// Checks what a page (or a share link) could have got wrong, in words.
    pub fn validate(&self) -> Result<(), PieceError> {
        let bad = |s: String| Err(PieceError::Invalid(s));
        if self.version != PIECE_VERSION {
            return bad(format!(
                "it is version {} and this pianoformer reads version {PIECE_VERSION}",
                self.version
            ));
        }
        if self.ppq == 0 {
            return bad("its resolution (ticks per quarter note) is zero".into());
        }
        if self.tempos.iter().any(|t| t.1 == 0) {
            return bad("a tempo is zero".into());
        }
        for &(_, num, den) in &self.time_signatures {
            if num == 0 || den == 0 || !den.is_power_of_two() || den > 64 {
                return bad(format!("the time signature {num}/{den} is not possible"));
            }
        }
        let notes: usize = self.tracks.iter().map(|t| t.notes.len()).sum();
        if notes > MAX_NOTES {
            return bad(format!(
                "it holds {notes} notes; pianoformer takes at most {MAX_NOTES}"
            ));
        }
        if self.bars.len() > MAX_BARS {
            return bad(format!(
                "it has {} bars; at most {MAX_BARS} are possible",
                self.bars.len()
            ));
        }
        for t in &self.tracks {
            if let Some(&(p, s, e, v)) = t
                .notes
                .iter()
                .find(|&&(p, s, e, v)| p > 127 || v > 127 || e < s)
            {
                return bad(format!(
                    "track '{}' has a note that cannot be (pitch {p}, ticks {s}–{e}, velocity {v})",
                    t.name
                ));
            }
        }
        if self.bars.windows(2).any(|w| w[1] <= w[0]) {
            return bad("its bars are not in order".into());
        }
        self.validate_pedal()
    }

    /// The pedal's part of [`Piece::validate`]: known controllers, values a controller can
    /// take, ticks in order, no more than the limit.
    fn validate_pedal(&self) -> Result<(), PieceError> {
        let bad = |s: String| Err(PieceError::Invalid(s));
        let events: usize = self.tracks.iter().map(|t| t.pedal.len()).sum();
        if events > MAX_PEDAL_EVENTS {
            return bad(format!(
                "it holds {events} pedal events; pianoformer takes at most {MAX_PEDAL_EVENTS}"
            ));
        }
        for t in &self.tracks {
            if let Some(&(tick, c, v)) = t
                .pedal
                .iter()
                .find(|&&(_, c, v)| !super::midi::PEDALS.contains(&c) || v > 127)
            {
                return bad(format!(
                    "track '{}' has a pedal event that cannot be (controller {c}, value {v} at \
                     tick {tick}; controllers 64, 66 and 67 take 0–127)",
                    t.name
                ));
            }
            if t.pedal.windows(2).any(|w| w[1].0 < w[0].0) {
                return bad(format!("track '{}' has its pedal out of order", t.name));
            }
        }
        Ok(())
    }

    /// The song, tracks named as they are in the piece.
    /// The start tick of bar `b` (from 0): `bars[b]`, and past the last entry, bars of the
    /// last bar's length (a bar of the file's resolution in 4/4 when there is no bar to go by).
    pub fn bar_tick(&self, b: usize) -> u64 {
        let bars = &self.bars;
        match bars.get(b) {
            Some(&t) => t,
            None => {
                let last = bars.len().saturating_sub(1);
                let len = if bars.len() >= 2 {
                    bars[last] - bars[last - 1]
                } else {
                    self.ppq as u64 * 4
                };
                bars.get(last).copied().unwrap_or(0) + len * (b - last) as u64
            }
        }
    }

    /// The grid of the tracks `keep` accepts (their extent, the piece's tempo and meters).
    pub fn grid(&self, keep: impl Fn(&PieceTrack) -> bool) -> Grid {
        Grid::for_song(&self.song_with(|t| t.name.clone(), keep), STEPS_PER_BEAT)
    }

    /// The piano part on `grid`: the generated track's notes (what a model wrote), else the
    /// pianist's.
    pub fn piano_roll(&self, grid: &Grid) -> super::roll::PianoRoll {
        let of = |role: TrackRole| {
            self.tracks
                .iter()
                .filter(move |t| t.role == role)
                .flat_map(|t| t.midi_notes(Role::Piano.channel()))
                .collect::<Vec<_>>()
        };
        let generated = of(TrackRole::Generated);
        let notes = if generated.is_empty() {
            of(TrackRole::Piano)
        } else {
            generated
        };
        super::roll::PianoRoll::from_notes(&notes, grid)
    }

    /// The grid of every track over every bar, planned bars past the music included (their
    /// meter the piece's last).
    pub fn plan_grid(&self) -> Grid {
        let end = self.bar_tick(self.bars.len());
        Grid::for_song_until(&self.to_song(), end, STEPS_PER_BEAT)
    }

    pub fn to_song(&self) -> Song {
        self.song_with(|t| t.name.clone(), |_| true)
    }

    /// The song as the models read it: melody, bridge and piano tracks named MELODY, BRIDGE and
    /// PIANO (whatever their names in the piece), without the tracks `keep` refuses.
    pub fn model_song(&self, keep: impl Fn(&PieceTrack) -> bool) -> Song {
        self.song_with(
            |t| match t.role {
                TrackRole::Melody => Role::Melody.track_name().into(),
                TrackRole::Bridge => Role::Bridge.track_name().into(),
                TrackRole::Piano => Role::Piano.track_name().into(),
                TrackRole::Generated => "GENERATED".into(),
                TrackRole::Other => format!("OTHER {}", t.name),
            },
            keep,
        )
    }

    fn song_with(
        &self,
        name: impl Fn(&PieceTrack) -> String,
        keep: impl Fn(&PieceTrack) -> bool,
    ) -> Song {
        let tracks = self
            .tracks
            .iter()
            .filter(|t| keep(t))
            .map(|t| {
                let channel = t.channel.unwrap_or(match t.role {
                    TrackRole::Melody => 0,
                    TrackRole::Bridge => 1,
                    TrackRole::Piano => 2,
                    TrackRole::Generated => 3,
                    TrackRole::Other => 4,
                });
                let mut notes: Vec<Note> = t.midi_notes(channel.min(15)).collect();
                notes.sort_by_key(|n| (n.start, n.pitch));
                Track {
                    pedal: t
                        .pedal
                        .iter()
                        .map(|&(tick, controller, value)| Pedal {
                            tick,
                            controller,
                            value: value.min(127),
                            channel: channel.min(15),
                        })
                        .collect(),
                    name: name(t),
                    instrument: String::new(),
                    program: Some(t.program.min(127)),
                    notes,
                }
            })
            .collect();
        Song {
            ppq: self.ppq,
            tempos: self
                .tempos
                .iter()
                .map(|&(tick, micros_per_quarter)| TempoChange {
                    tick,
                    micros_per_quarter,
                })
                .collect(),
            time_signatures: self
                .time_signatures
                .iter()
                .map(|&(tick, numerator, denominator)| TimeSignature {
                    tick,
                    numerator,
                    denominator,
                })
                .collect(),
            key_signatures: Vec::new(),
            tracks,
        }
    }

    /// A type-1 MIDI file of the piece, one track per piece track.
    pub fn to_midi(&self) -> Result<Vec<u8>, PieceError> {
        self.validate()?;
        Ok(write_midi(&self.to_song()))
    }

    /// The chord cells parsed, one per bar (several chords share a bar's beats evenly).
    pub fn bar_chords(&self) -> Result<Vec<Vec<Option<Chord>>>, PieceError> {
        self.chords
            .iter()
            .enumerate()
            .map(|(bar, cell)| {
                cell.split_whitespace()
                    .map(|s| {
                        Chord::parse_any(s).map_err(|e| PieceError::Chord {
                            bar: bar + 1,
                            reason: e,
                        })
                    })
                    .collect()
            })
            .collect()
    }

    /// The phrase lane's label at each bar (planned bars included), `None` past its end.
    pub fn bar_phrases(&self) -> Vec<Option<PhraseLabel>> {
        bar_phrases(&self.segments())
    }

    /// The phrases as segments from bar 0.
    pub fn segments(&self) -> Vec<Segment> {
        let mut start_bar = 0;
        self.phrases
            .iter()
            .map(|&(letter, bars)| {
                let s = Segment {
                    start_bar,
                    bars,
                    letter,
                };
                start_bar += bars;
                s
            })
            .collect()
    }

    /// After the notes changed (a model added some): the end, the bars (planned bars past the
    /// music kept), chords detected for new bars nobody labelled, phrases covering every bar.
    pub fn refresh(&mut self) {
        let song = self.to_song();
        self.end_tick = song.end_tick();
        let grid = Grid::for_song(&song, STEPS_PER_BEAT);
        let music_bars = grid.bar_ticks();
        let labelled = self.chords.len();
        self.prompt_bars = music_bars.len();
        if music_bars.len() >= self.bars.len() {
            self.bars = music_bars;
        }
        if self.bars.len() > labelled {
            let detected = detect_structure(&song, &grid).chords;
            for bar in labelled..self.bars.len() {
                let beats: Vec<Option<Chord>> = if bar < grid.num_bars() {
                    grid.bar_beats(bar)
                        .map(|b| detected.get(b).copied().flatten())
                        .collect()
                } else {
                    Vec::new()
                };
                self.chords.push(chord_cell(&beats));
            }
        }
        self.fit_phrases();
    }

    /// `count` bars (never fewer than the music's, nor 1): planned bars past the music added at
    /// the last bar's length with empty chord cells, or planned ones taken away; the phrases
    /// fitted to them (the page's planned-bars field, `www/piece.js`'s `setBarCount`).
    pub fn set_bar_count(&mut self, count: usize) {
        let count = count.max(self.prompt_bars).max(1);
        while self.bars.len() < count {
            let next = self.bar_tick(self.bars.len());
            self.bars.push(next);
        }
        self.bars.truncate(count);
        self.chords.resize(count, String::new());
        self.fit_phrases();
    }

    /// Makes the phrases cover exactly the bars: the last phrase grows or the list is cut.
    fn fit_phrases(&mut self) {
        let bars = self.bars.len();
        self.chords
            .resize(bars.max(self.chords.len()), String::new());
        let mut covered = 0;
        let mut kept = Vec::new();
        for &(letter, n) in &self.phrases {
            if covered >= bars {
                break;
            }
            let n = n.min(bars - covered);
            if n > 0 {
                kept.push((letter, n));
                covered += n;
            }
        }
        if covered < bars {
            match kept.last_mut() {
                Some(last) => last.1 += bars - covered,
                None => kept.push(('A', bars)),
            }
        }
        self.phrases = kept;
    }
}

/// A chord chart as a person types it, in the page's chord dialog or after `generate --chords`:
/// bars separated by `|`, the chords of one bar by spaces (they share it evenly, as in a lane
/// cell: `C G`), `N` or nothing for a bar without a chord; bar lines at either end are allowed
/// (`| C | G Am | F |`). Returns a lane cell per bar (one for text without a bar line), each
/// symbol checked; `www/labels.js`'s `chordChart` reads the same (cases:
/// `tests/chord-charts.json`).
pub fn chord_chart(text: &str) -> Result<Vec<String>, String> {
    let text = text.trim();
    let mut cells: Vec<&str> = text.split('|').collect();
    if cells.len() > 1 && text.starts_with('|') {
        cells.remove(0);
    }
    if cells.len() > 1 && text.ends_with('|') {
        cells.pop();
    }
    cells
        .iter()
        .enumerate()
        .map(|(bar, cell)| {
            let symbols: Vec<&str> = cell.split_whitespace().collect();
            for s in &symbols {
                Chord::parse_any(s).map_err(|e| format!("bar {}: {e}", bar + 1))?;
            }
            Ok(symbols.join(" "))
        })
        .collect()
}

/// The chords of one bar cell over its `beats`: `n` chords take `beats / n` beats each (the
/// last one what is left); an empty cell is "no chord".
pub fn spread(cell: &[Option<Chord>], beats: usize) -> Vec<Option<Chord>> {
    if cell.is_empty() {
        return vec![None; beats];
    }
    let each = (beats / cell.len()).max(1);
    (0..beats)
        .map(|b| cell[(b / each).min(cell.len() - 1)])
        .collect()
}

/// A bar's cell from its beats' chords: one symbol when they agree, else the fewest equal
/// parts that are each one chord (`C G` for two halves), else one per beat.
pub fn chord_cell(beats: &[Option<Chord>]) -> String {
    let n = beats.len();
    let name = |c: &Option<Chord>| c.map_or("N".to_string(), |c| c.name());
    if n == 0 || beats.iter().all(|c| c.is_none()) {
        return String::new();
    }
    for parts in (1..=n).filter(|p| n.is_multiple_of(*p)) {
        let each = n / parts;
        let uniform = beats
            .chunks(each)
            .all(|part| part.iter().all(|c| *c == part[0]));
        if uniform {
            return beats
                .chunks(each)
                .map(|part| name(&part[0]))
                .collect::<Vec<_>>()
                .join(" ");
        }
    }
    unreachable!("one part per beat is always uniform")
}

#[cfg(test)]
mod tests;
