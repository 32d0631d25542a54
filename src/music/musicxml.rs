//! MusicXML in and out, where lead sheets live: a score's notes become a [`Song`] and its chord
//! symbols (`<harmony>`) the chord lane as they are written (no guessing); a piece goes out as a
//! lead sheet (the melody and the chord lane's symbols) or as a full score (every track a part),
//! in `.musicxml` or compressed `.mxl`. roxmltree reads the XML, quick-xml writes it, zip opens
//! and writes `.mxl`. What cannot be read is said in a sentence ([`MusicXmlError`]): a hostile
//! file meets limits on its size, its XML nodes, its notes and bars, never a panic.
//!
//! Read: partwise scores (`score-partwise`, what notation programs write); notes, rests, chords,
//! ties, grace notes (left out: they take no time), backup and forward, several voices,
//! divisions that change, time signatures, key signatures and tempos. Repeats are read as
//! written (not unrolled).

use std::io::{Cursor, Read};

use super::chords::{Chord, Quality};
use super::grid::Grid;
use super::harmony::ChordSource;
use super::midi::{
    KeySignature, MAX_PEDAL_EVENTS, Note, Pedal, SOFT, SOSTENUTO, SUSTAIN, Song, TempoChange,
    TimeSignature, Track,
};
use super::piece::{Piece, PieceError, chord_cell};
use super::roll::Role;
use super::tokens::STEPS_PER_BEAT;

#[cfg(test)]
mod tests;
pub mod write;
pub use write::{ScoreKind, write_musicxml, write_mxl};

/// Ticks per quarter note of a song read from MusicXML.
pub const PPQ: u16 = 480;
/// The most bytes a MusicXML file (or an `.mxl`'s score inside it) may hold.
pub const MAX_XML_BYTES: usize = 32 << 20;
/// The most XML nodes read (a hostile file is refused before it fills memory).
const MAX_NODES: u32 = 4_000_000;
/// The most notes and measures read.
const MAX_NOTES: usize = 200_000;
const MAX_MEASURES: usize = 4096;
/// The longest score read, in quarter notes (4 096 bars of 4/4 and then some).
const MAX_QUARTERS: f64 = 65_536.0;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MusicXmlError {
    #[error("it is not MusicXML: {0}")]
    NotMusicXml(String),
    #[error("the compressed MusicXML (.mxl) could not be opened: {0}")]
    Archive(String),
    #[error("the XML is not well formed: {0}")]
    Xml(String),
    #[error("{0}")]
    Unsupported(String),
    #[error("it is too large: {0}")]
    TooLarge(String),
    #[error("measure {measure}: {reason}")]
    Measure { measure: String, reason: String },
}

/// A score as read: its notes as a song, and its chord symbols in time order (tick, chord;
/// `None` for "no chord").
#[derive(Clone, Debug, PartialEq)]
pub struct Score {
    pub song: Song,
    pub chords: Vec<(u64, Option<Chord>)>,
    /// Start tick of every measure of the first part, and the end of the last.
    pub measures: Vec<u64>,
}

/// Whether `bytes` look like MusicXML (compressed or not): what opening a file decides by.
pub fn is_musicxml(bytes: &[u8], name: &str) -> bool {
    let lower = name.to_lowercase();
    if lower.ends_with(".mxl") || lower.ends_with(".musicxml") {
        return true;
    }
    if lower.ends_with(".xml") {
        return true;
    }
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(1024)]);
    head.contains("<score-partwise") || head.contains("<score-timewise")
}

/// Reads a MusicXML score, compressed (`.mxl`, a zip) or not.
pub fn read_musicxml(bytes: &[u8]) -> Result<Score, MusicXmlError> {
    let text = if bytes.starts_with(b"PK\x03\x04") {
        unzip_score(bytes)?
    } else {
        if bytes.len() > MAX_XML_BYTES {
            return Err(MusicXmlError::TooLarge(format!(
                "{} MB of XML; at most {} MB are read",
                bytes.len() >> 20,
                MAX_XML_BYTES >> 20
            )));
        }
        decode_text(bytes)?
    };
    read_text(&text)
}

/// The text of XML bytes: UTF-8 (with or without a byte-order mark) or UTF-16.
fn decode_text(bytes: &[u8]) -> Result<String, MusicXmlError> {
    let utf16 = |le: bool| -> Result<String, MusicXmlError> {
        let units: Vec<u16> = bytes[2..]
            .chunks_exact(2)
            .map(|c| {
                if le {
                    u16::from_le_bytes([c[0], c[1]])
                } else {
                    u16::from_be_bytes([c[0], c[1]])
                }
            })
            .collect();
        String::from_utf16(&units)
            .map_err(|_| MusicXmlError::Xml("its UTF-16 text is broken".into()))
    };
    match bytes {
        [0xFF, 0xFE, ..] => utf16(true),
        [0xFE, 0xFF, ..] => utf16(false),
        [0xEF, 0xBB, 0xBF, rest @ ..] => String::from_utf8(rest.to_vec())
            .map_err(|_| MusicXmlError::Xml("its text is not UTF-8".into())),
        _ => String::from_utf8(bytes.to_vec())
            .map_err(|_| MusicXmlError::Xml("its text is not UTF-8".into())),
    }
}

/// The text of the entry `name` of an `.mxl`, read no further than [`MAX_XML_BYTES`] whatever
/// the entry claims.
fn read_entry(
    zip: &mut zip::ZipArchive<Cursor<&[u8]>>,
    name: &str,
) -> Result<String, MusicXmlError> {
    let entry = zip
        .by_name(name)
        .map_err(|e| MusicXmlError::Archive(format!("{name}: {e}")))?;
    let mut out = Vec::new();
    entry
        .take(MAX_XML_BYTES as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| MusicXmlError::Archive(format!("{name}: {e}")))?;
    if out.len() > MAX_XML_BYTES {
        return Err(MusicXmlError::TooLarge(format!(
            "{name} unpacks to more than {} MB",
            MAX_XML_BYTES >> 20
        )));
    }
    decode_text(&out)
}

/// The score inside an `.mxl`: the root file `META-INF/container.xml` names, else the first
/// `.xml` or `.musicxml` outside `META-INF`.
fn unzip_score(bytes: &[u8]) -> Result<String, MusicXmlError> {
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| MusicXmlError::Archive(e.to_string()))?;
    let root = read_entry(&mut zip, "META-INF/container.xml")
        .ok()
        .and_then(|container| {
            let doc = roxmltree::Document::parse(&container).ok()?;
            let path = doc
                .descendants()
                .find(|n| n.has_tag_name("rootfile"))?
                .attribute("full-path")?
                .to_string();
            Some(path)
        });
    let root = root.or_else(|| {
        zip.file_names()
            .filter_map(Result::ok)
            .map(|n| n.to_string())
            .find(|n| {
                let lower = n.to_lowercase();
                !n.starts_with("META-INF")
                    && (lower.ends_with(".xml") || lower.ends_with(".musicxml"))
            })
    });
    let root = root.ok_or_else(|| {
        MusicXmlError::Archive("it holds no MusicXML score (.xml or .musicxml)".into())
    })?;
    read_entry(&mut zip, &root)
}

fn child<'a, 'input>(
    node: roxmltree::Node<'a, 'input>,
    name: &str,
) -> Option<roxmltree::Node<'a, 'input>> {
    node.children().find(|c| c.has_tag_name(name))
}

fn child_text<'a>(node: roxmltree::Node<'a, '_>, name: &str) -> Option<&'a str> {
    child(node, name).and_then(|c| c.text()).map(str::trim)
}

/// A number in a child element (`None` when absent or not a number).
fn child_number(node: roxmltree::Node, name: &str) -> Option<f64> {
    child_text(node, name)?
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
}

/// The chord quality a `<kind>` names (the root's triad where the kind is unknown).
fn quality_of(kind: &str) -> Option<Quality> {
    Some(match kind {
        "major" | "" | "other" | "power" | "pedal" => Quality::Maj,
        "minor" => Quality::Min,
        "augmented" | "augmented-seventh" => Quality::Aug,
        "diminished" => Quality::Dim,
        "dominant" | "dominant-seventh" | "dominant-ninth" | "dominant-11th" | "dominant-13th" => {
            Quality::Dom7
        }
        "major-seventh" | "major-ninth" | "major-11th" | "major-13th" => Quality::Maj7,
        "minor-seventh" | "minor-ninth" | "minor-11th" | "minor-13th" => Quality::Min7,
        "diminished-seventh" => Quality::Dim7,
        "half-diminished" => Quality::HalfDim7,
        "major-minor" => Quality::MinMaj7,
        "major-sixth" => Quality::Maj6,
        "minor-sixth" => Quality::Min6,
        "suspended-second" => Quality::Sus2,
        "suspended-fourth" => Quality::Sus4,
        "none" => return None,
        _ => Quality::Maj,
    })
}

fn step_class(step: &str) -> Option<i32> {
    Some(match step {
        "C" => 0,
        "D" => 2,
        "E" => 4,
        "F" => 5,
        "G" => 7,
        "A" => 9,
        "B" => 11,
        _ => return None,
    })
}

/// A `<harmony>`'s chord: `Ok(None)` for "no chord" (kind `none`), `Err` for a symbol without
/// a readable root.
fn harmony_chord(h: roxmltree::Node) -> Result<Option<Chord>, String> {
    let kind = child_text(h, "kind").unwrap_or("");
    let Some(quality) = quality_of(kind) else {
        return Ok(None);
    };
    let root = child(h, "root").ok_or("a chord symbol without a root")?;
    let step = child_text(root, "root-step").ok_or("a chord symbol without a root step")?;
    let pc =
        step_class(step).ok_or_else(|| format!("the chord root {step:?} is not a note name"))?;
    let alter = child_number(root, "root-alter").unwrap_or(0.0).round() as i32;
    Ok(Some(Chord {
        root: (pc + alter).rem_euclid(12) as u8,
        quality,
    }))
}

/// Reads a MusicXML score (`.musicxml`, `.xml` or compressed `.mxl`): its parts as tracks
/// (the melody detected, or the part named so), its chord symbols as the chord lane, bar by
/// bar as written (the detector only where the score has none), the phrases detected.
pub fn read_piece(bytes: &[u8], name: &str) -> Result<Piece, PieceError> {
    let mut score = read_musicxml(bytes).map_err(|e| PieceError::Invalid(e.to_string()))?;
    // A score of one part with notes, one at a time, is a lead sheet: that part is the
    // melody, whatever instrument it names.
    let mut parts = score.song.tracks.iter_mut().filter(|t| !t.notes.is_empty());
    if let (Some(only), None) = (parts.next(), parts.next())
        && super::melody::monophony(only) >= 0.8
    {
        only.name = Role::Melody.track_name().into();
    }
    let mut piece = Piece::from_song(&score.song, name)?;
    if score.chords.is_empty() {
        return Ok(piece);
    }
    let grid = Grid::for_song(&score.song, STEPS_PER_BEAT);
    let beat_chord = |beat: usize| -> Option<Chord> {
        let tick = grid.tick_at(beat * grid.steps_per_beat);
        let i = score.chords.partition_point(|c| c.0 <= tick);
        i.checked_sub(1).and_then(|i| score.chords[i].1)
    };
    for (bar, cell) in piece.chords.iter_mut().enumerate().take(grid.num_bars()) {
        let beats: Vec<Option<Chord>> = grid.bar_beats(bar).map(beat_chord).collect();
        *cell = chord_cell(&beats);
    }
    piece.chord_source = Some(ChordSource::Score);
    Ok(piece)
}

/// Reads the score's text.
pub fn read_text(text: &str) -> Result<Score, MusicXmlError> {
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        nodes_limit: MAX_NODES,
        // External entities are never fetched.
        entity_resolver: None,
    };
    let doc = roxmltree::Document::parse_with_options(text, options)
        .map_err(|e| MusicXmlError::Xml(e.to_string()))?;
    let root = doc.root_element();
    match root.tag_name().name() {
        "score-partwise" => {}
        "score-timewise" => {
            return Err(MusicXmlError::Unsupported(
                "a timewise MusicXML score is not read: save it from the notation program as \
                 MusicXML (partwise, the usual form)"
                    .into(),
            ));
        }
        other => {
            return Err(MusicXmlError::NotMusicXml(format!(
                "its root element is <{other}>, not <score-partwise>"
            )));
        }
    }
    let names: Vec<(String, String)> = child(root, "part-list")
        .map(|list| {
            list.children()
                .filter(|c| c.has_tag_name("score-part"))
                .map(|p| {
                    let id = p.attribute("id").unwrap_or("").to_string();
                    let name = child_text(p, "part-name").unwrap_or("").to_string();
                    (id, name)
                })
                .collect()
        })
        .unwrap_or_default();
    let parts: Vec<roxmltree::Node> = root.children().filter(|c| c.has_tag_name("part")).collect();
    if parts.is_empty() {
        return Err(MusicXmlError::NotMusicXml("it has no <part>".into()));
    }
    let mut song = Song {
        ppq: PPQ,
        tempos: Vec::new(),
        time_signatures: Vec::new(),
        key_signatures: Vec::new(),
        tracks: Vec::new(),
    };
    let mut chords = Vec::new();
    let mut measures = Vec::new();
    let mut notes_read = 0usize;
    for (index, part) in parts.iter().enumerate() {
        let first = index == 0;
        let id = part.attribute("id").unwrap_or("");
        let name = names
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, n)| n.clone())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| format!("Part {}", index + 1));
        let channel = if index >= 9 { index + 1 } else { index }.min(15) as u8;
        let mut reader = PartReader::new(channel);
        for (m, measure) in part
            .children()
            .filter(|c| c.has_tag_name("measure"))
            .enumerate()
        {
            if m >= MAX_MEASURES {
                return Err(MusicXmlError::TooLarge(format!(
                    "more than {MAX_MEASURES} measures"
                )));
            }
            let number = measure.attribute("number").unwrap_or("?").to_string();
            if first {
                measures.push(reader.tick);
            }
            reader
                .measure(measure, first, &mut song, &mut chords)
                .map_err(|reason| MusicXmlError::Measure {
                    measure: number,
                    reason,
                })?;
            // The notes of the parts before this one and this part's so far.
            if notes_read + reader.notes.len() > MAX_NOTES {
                return Err(MusicXmlError::TooLarge(format!(
                    "more than {MAX_NOTES} notes"
                )));
            }
        }
        if first {
            measures.push(reader.tick);
        }
        notes_read += reader.notes.len();
        let mut pedal = std::mem::take(&mut reader.pedal);
        pedal.sort_by_key(|p| p.tick);
        song.tracks.push(Track {
            pedal,
            name,
            instrument: String::new(),
            program: None,
            notes: reader.notes,
        });
    }
    chords.sort_by_key(|c| c.0);
    song.tempos.sort_by_key(|t| t.tick);
    song.tempos.dedup_by_key(|t| t.tick);
    Ok(Score {
        song,
        chords,
        measures,
    })
}

/// Where a part is as its measures are read.
struct PartReader {
    /// Divisions per quarter note (MusicXML's unit of duration).
    divisions: f64,
    /// The measure's start and the current position, in ticks.
    tick: u64,
    position: f64,
    notes: Vec<Note>,
    /// Pedal marks in the order read (sorted by tick when the part ends).
    pedal: Vec<Pedal>,
    /// The start of the last note (a `<chord/>` note starts with it).
    last_start: f64,
    channel: u8,
}

impl PartReader {
    fn new(channel: u8) -> Self {
        Self {
            divisions: 1.0,
            tick: 0,
            position: 0.0,
            notes: Vec::new(),
            pedal: Vec::new(),
            last_start: 0.0,
            channel,
        }
    }

    /// Ticks of `duration` divisions.
    fn ticks(&self, duration: f64) -> f64 {
        duration * PPQ as f64 / self.divisions
    }

    fn duration(&self, node: roxmltree::Node) -> Result<f64, String> {
        let d = match child_text(node, "duration") {
            None => 0.0,
            Some(text) => child_number(node, "duration").ok_or_else(|| {
                format!("a note or rest lasts {text:?} divisions, which is not a number")
            })?,
        };
        if !(0.0..=1e6).contains(&d) {
            return Err(format!("a duration of {d} divisions cannot be"));
        }
        Ok(self.ticks(d))
    }

    fn measure(
        &mut self,
        measure: roxmltree::Node,
        first: bool,
        song: &mut Song,
        chords: &mut Vec<(u64, Option<Chord>)>,
    ) -> Result<(), String> {
        let start = self.tick as f64;
        self.position = start;
        let mut end = start;
        for el in measure.children().filter(|c| c.is_element()) {
            match el.tag_name().name() {
                "attributes" => {
                    if let Some(d) = child_number(el, "divisions") {
                        if !(1.0..=1e5).contains(&d) {
                            return Err(format!("{d} divisions per quarter note cannot be"));
                        }
                        self.divisions = d;
                    }
                    if first {
                        self.attributes(el, song);
                    }
                }
                "direction" | "sound" => {
                    let sound = if el.has_tag_name("sound") {
                        Some(el)
                    } else {
                        child(el, "sound")
                    };
                    self.pedal_marks(el, sound)?;
                    let tempo = sound
                        .and_then(|s| s.attribute("tempo"))
                        .and_then(|t| t.parse::<f64>().ok())
                        .filter(|t| (10.0..=1000.0).contains(t));
                    if let (true, Some(bpm)) = (first, tempo) {
                        song.tempos.push(TempoChange {
                            tick: self.position.round() as u64,
                            micros_per_quarter: (60e6 / bpm).round() as u32,
                        });
                    }
                }
                "harmony" => {
                    let offset = child_number(el, "offset").map_or(0.0, |o| self.ticks(o));
                    let at = (self.position + offset).max(0.0).round() as u64;
                    chords.push((at, harmony_chord(el)?));
                }
                "backup" => {
                    self.position = (self.position - self.duration(el)?).max(start);
                }
                "forward" => {
                    self.position += self.duration(el)?;
                }
                "note" => self.note(el)?,
                _ => {}
            }
            end = end.max(self.position);
        }
        if end > MAX_QUARTERS * PPQ as f64 {
            return Err(format!(
                "the score runs past {MAX_QUARTERS} quarter notes; pianoformer reads shorter ones"
            ));
        }
        self.tick = end.round() as u64;
        Ok(())
    }

    /// The pedal a `<direction>` (or a bare `<sound>`) marks at the current position (plus
    /// its `<offset>`): `<pedal type="start|stop|change|resume|discontinue|sostenuto">`, else
    /// the sound's `damper-pedal`, `sostenuto-pedal` and `soft-pedal` (`yes`, `no`, or a
    /// percentage, kept as a half-pedal value).
    fn pedal_marks(
        &mut self,
        el: roxmltree::Node,
        sound: Option<roxmltree::Node>,
    ) -> Result<(), String> {
        let offset = child_number(el, "offset").map_or(0.0, |o| self.ticks(o));
        let tick = (self.position + offset).max(0.0).round() as u64;
        let mut push = |controller: u8, value: u8| {
            self.pedal.push(Pedal {
                tick,
                controller,
                value,
                channel: self.channel,
            })
        };
        let marks: Vec<&str> = el
            .descendants()
            .filter(|d| d.has_tag_name("pedal"))
            .filter_map(|d| d.attribute("type"))
            .collect();
        for mark in &marks {
            match *mark {
                "start" | "resume" => push(SUSTAIN, 127),
                "stop" | "discontinue" => push(SUSTAIN, 0),
                "change" => {
                    push(SUSTAIN, 0);
                    push(SUSTAIN, 127);
                }
                "sostenuto" => push(SOSTENUTO, 127),
                _ => {}
            }
        }
        if !marks.is_empty() {
            return Ok(());
        }
        for (attribute, controller) in [
            ("damper-pedal", SUSTAIN),
            ("sostenuto-pedal", SOSTENUTO),
            ("soft-pedal", SOFT),
        ] {
            let Some(v) = sound.and_then(|s| s.attribute(attribute)) else {
                continue;
            };
            let value = match v.trim() {
                "yes" => 127,
                "no" => 0,
                number => match number.parse::<f64>() {
                    Ok(p) if (0.0..=100.0).contains(&p) => (p * 1.27).round() as u8,
                    _ => {
                        return Err(format!(
                            "a {attribute} of {v:?} cannot be (yes, no or 0–100)"
                        ));
                    }
                },
            };
            push(controller, value);
        }
        if self.pedal.len() > MAX_PEDAL_EVENTS {
            return Err(format!("more than {MAX_PEDAL_EVENTS} pedal marks"));
        }
        Ok(())
    }

    fn attributes(&self, el: roxmltree::Node, song: &mut Song) {
        let tick = self.position.round() as u64;
        if let Some(time) = child(el, "time") {
            let beats = child_text(time, "beats").and_then(|b| {
                b.split('+')
                    .map(|x| x.trim().parse::<u32>().ok())
                    .sum::<Option<u32>>()
            });
            let beat_type = child_text(time, "beat-type").and_then(|b| b.parse::<u16>().ok());
            if let (Some(n), Some(d)) = (beats, beat_type)
                && (1..=64).contains(&n)
                && d.is_power_of_two()
                && d <= 64
            {
                song.time_signatures.push(TimeSignature {
                    tick,
                    numerator: n as u8,
                    denominator: d,
                });
            }
        }
        if let Some(key) = child(el, "key")
            && let Some(fifths) = child_number(key, "fifths").filter(|f| (-7.0..=7.0).contains(f))
        {
            song.key_signatures.push(KeySignature {
                tick,
                fifths: fifths as i8,
                minor: child_text(key, "mode") == Some("minor"),
            });
        }
    }

    fn note(&mut self, el: roxmltree::Node) -> Result<(), String> {
        if child(el, "grace").is_some() {
            return Ok(());
        }
        let duration = self.duration(el)?;
        let chord = child(el, "chord").is_some();
        let start = if chord {
            self.last_start
        } else {
            self.position
        };
        if !chord {
            self.last_start = start;
            self.position += duration;
        }
        let Some(pitch) = child(el, "pitch") else {
            // A rest, an unpitched (percussion) note or a cue: time only.
            return Ok(());
        };
        if child(el, "cue").is_some() {
            return Ok(());
        }
        let step = child_text(pitch, "step").ok_or("a note without a step")?;
        let pc = step_class(step).ok_or_else(|| format!("the note name {step:?} is not one"))?;
        let alter = child_number(pitch, "alter").unwrap_or(0.0).round() as i32;
        let octave = child_number(pitch, "octave").ok_or("a note without an octave")? as i32;
        let midi = (octave + 1) * 12 + pc + alter;
        if !(0..=127).contains(&midi) {
            return Err(format!("the note {step}{octave} is off the MIDI keyboard"));
        }
        let (s, e) = (start.round() as u64, (start + duration).round() as u64);
        let tie_stop = el
            .children()
            .any(|c| c.has_tag_name("tie") && c.attribute("type") == Some("stop"));
        if tie_stop
            && let Some(n) = self
                .notes
                .iter_mut()
                .rev()
                .find(|n| n.pitch == midi as u8 && n.end == s)
        {
            n.end = e.max(n.end);
            return Ok(());
        }
        if e > s {
            self.notes.push(Note {
                pitch: midi as u8,
                velocity: 80,
                start: s,
                end: e,
                channel: self.channel,
            });
        }
        Ok(())
    }
}
