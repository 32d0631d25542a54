//! A piece as MusicXML (partwise, version 4.0): a lead sheet (the melody with the chord lane's
//! symbols over it) or a full score (every track with notes a part, the symbols over the
//! first). Notes are written on the piece's sixteenth grid (divisions 4 a quarter): each part's
//! notes are laid in as few voices as keep them one at a time, each voice a line of notes and
//! rests in standard values, tied across values and bar lines.

use std::io::{Cursor, Write};

use quick_xml::Writer;
use quick_xml::events::{BytesDecl, BytesText, Event};

use crate::music::chords::{Chord, Quality};
use crate::music::grid::Grid;
use crate::music::piece::{Piece, PieceNote, PieceTrack, TrackRole};

/// What a score holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScoreKind {
    /// The melody and the chord symbols.
    LeadSheet,
    /// Every track with notes, the chord symbols over the first.
    Full,
}

/// Divisions (of a quarter note) the score counts in: sixteenths.
const DIVISIONS: usize = 4;

/// Note values in sixteenths, longest first, with their type and dots.
const VALUES: [(usize, &str, usize); 8] = [
    (16, "whole", 0),
    (12, "half", 1),
    (8, "half", 0),
    (6, "quarter", 1),
    (4, "quarter", 0),
    (3, "eighth", 1),
    (2, "eighth", 0),
    (1, "16th", 0),
];

/// A pitch class's spelling: step and alter (flats for E♭, A♭, B♭, sharps otherwise).
fn spell(pc: u8) -> (&'static str, i8) {
    [
        ("C", 0),
        ("C", 1),
        ("D", 0),
        ("E", -1),
        ("E", 0),
        ("F", 0),
        ("F", 1),
        ("G", 0),
        ("A", -1),
        ("A", 0),
        ("B", -1),
        ("B", 0),
    ][pc as usize % 12]
}

/// MusicXML's `<kind>` of a quality, and the short text it is shown as.
fn kind_of(q: Quality) -> (&'static str, &'static str) {
    match q {
        Quality::Maj => ("major", ""),
        Quality::Min => ("minor", "m"),
        Quality::Dim => ("diminished", "dim"),
        Quality::Aug => ("augmented", "+"),
        Quality::Sus2 => ("suspended-second", "sus2"),
        Quality::Sus4 => ("suspended-fourth", "sus4"),
        Quality::Dom7 => ("dominant", "7"),
        Quality::Maj7 => ("major-seventh", "maj7"),
        Quality::Min7 => ("minor-seventh", "m7"),
        Quality::HalfDim7 => ("half-diminished", "m7b5"),
        Quality::Dim7 => ("diminished-seventh", "dim7"),
        Quality::Maj6 => ("major-sixth", "6"),
        Quality::Min6 => ("minor-sixth", "m6"),
        Quality::MinMaj7 => ("major-minor", "mMaj7"),
    }
}

/// A note on the grid: pitch, first step, end step.
type Span = (u8, usize, usize);

/// The notes of `tracks` on `grid`, in voices: each voice's notes never overlap.
fn voices(tracks: &[&PieceTrack], grid: &Grid) -> Vec<Vec<Span>> {
    let mut spans: Vec<Span> = tracks
        .iter()
        .flat_map(|t| t.notes.iter())
        .map(|&(p, s, e, _): &PieceNote| {
            let start = grid.step_at(s);
            (p, start, grid.step_at(e).max(start + 1))
        })
        .filter(|&(_, s, _)| s < grid.num_steps())
        .collect();
    spans.sort_by_key(|&(p, s, e)| (s, std::cmp::Reverse(p), e));
    // Notes struck together with one length share a voice as a chord.
    let mut voices: Vec<Vec<Span>> = Vec::new();
    for span in spans {
        let fits = |v: &Vec<Span>| {
            v.last()
                .is_none_or(|&(_, s, e)| e <= span.1 || (s == span.1 && e == span.2))
        };
        match voices.iter_mut().find(|v| fits(v)) {
            Some(v) => v.push(span),
            None => voices.push(vec![span]),
        }
    }
    if voices.is_empty() {
        voices.push(Vec::new());
    }
    voices
}

/// The chord lane's symbols as (step, chord) changes: each bar's cell spread over its beats.
fn chord_changes(piece: &Piece, grid: &Grid) -> Vec<(usize, Option<Chord>)> {
    let cells = piece.bar_chords().unwrap_or_default();
    let mut out: Vec<(usize, Option<Chord>)> = Vec::new();
    for (bar, cell) in cells.iter().enumerate().take(grid.num_bars()) {
        let steps = grid.bar_steps(bar);
        if cell.is_empty() {
            // A bar without a chord says so ("N.C.") where one was in force.
            if out.last().is_some_and(|last| last.1.is_some()) {
                out.push((steps.start, None));
            }
            continue;
        }
        let each = steps.len() / cell.len();
        for (k, chord) in cell.iter().enumerate() {
            let at = steps.start + k * each;
            if out.last().is_none_or(|last| last.1 != *chord) {
                out.push((at, *chord));
            }
        }
    }
    out
}

type W = Writer<Cursor<Vec<u8>>>;

fn text(w: &mut W, name: &str, value: &str) -> std::io::Result<()> {
    w.create_element(name)
        .write_text_content(BytesText::new(value))?;
    Ok(())
}

fn harmony(w: &mut W, chord: Option<Chord>, offset: usize) -> std::io::Result<()> {
    w.create_element("harmony").write_inner_content(|w| {
        let (root, kind, shown) = match chord {
            Some(c) => {
                let (kind, shown) = kind_of(c.quality);
                (c.root, kind, shown)
            }
            None => (0, "none", "N.C."),
        };
        let (step, alter) = spell(root);
        w.create_element("root").write_inner_content(|w| {
            text(w, "root-step", step)?;
            if alter != 0 {
                text(w, "root-alter", &alter.to_string())?;
            }
            Ok(())
        })?;
        w.create_element("kind")
            .with_attribute(("text", shown))
            .write_text_content(BytesText::new(kind))?;
        if offset > 0 {
            text(w, "offset", &offset.to_string())?;
        }
        Ok(())
    })?;
    Ok(())
}

/// One note or rest of `len` sixteenths (a standard value): `pitches` empty for a rest, several
/// for a chord; `tie` whether it is tied from before and on after.
fn note(
    w: &mut W,
    pitches: &[u8],
    len: usize,
    voice: usize,
    (tied_from, tied_on): (bool, bool),
    whole_bar: bool,
) -> std::io::Result<()> {
    let (_, kind, dots) = VALUES
        .iter()
        .copied()
        .find(|v| v.0 == len)
        .unwrap_or((len, "16th", 0));
    let count = pitches.len().max(1);
    for i in 0..count {
        w.create_element("note").write_inner_content(|w| {
            if i > 0 {
                w.create_element("chord").write_empty()?;
            }
            match pitches.get(i) {
                Some(&p) => {
                    let (step, alter) = spell(p % 12);
                    // B♯/C♭ never arise: the octave is the MIDI number's.
                    let octave = (p as i32 - alter as i32) / 12 - 1;
                    w.create_element("pitch").write_inner_content(|w| {
                        text(w, "step", step)?;
                        if alter != 0 {
                            text(w, "alter", &alter.to_string())?;
                        }
                        text(w, "octave", &octave.to_string())
                    })?;
                }
                None if whole_bar => {
                    w.create_element("rest")
                        .with_attribute(("measure", "yes"))
                        .write_empty()?;
                }
                None => {
                    w.create_element("rest").write_empty()?;
                }
            }
            text(w, "duration", &len.to_string())?;
            if !pitches.is_empty() {
                if tied_from {
                    w.create_element("tie")
                        .with_attribute(("type", "stop"))
                        .write_empty()?;
                }
                if tied_on {
                    w.create_element("tie")
                        .with_attribute(("type", "start"))
                        .write_empty()?;
                }
            }
            text(w, "voice", &voice.to_string())?;
            if !whole_bar {
                text(w, "type", kind)?;
                for _ in 0..dots {
                    w.create_element("dot").write_empty()?;
                }
            }
            if !pitches.is_empty() && (tied_from || tied_on) {
                w.create_element("notations").write_inner_content(|w| {
                    if tied_from {
                        w.create_element("tied")
                            .with_attribute(("type", "stop"))
                            .write_empty()?;
                    }
                    if tied_on {
                        w.create_element("tied")
                            .with_attribute(("type", "start"))
                            .write_empty()?;
                    }
                    Ok(())
                })?;
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// `len` sixteenths from `at` (steps from the bar's start) as standard values, each starting
/// where it may: the largest value that fits.
fn values(mut len: usize) -> Vec<usize> {
    let mut out = Vec::new();
    while len > 0 {
        let v = VALUES.iter().map(|v| v.0).find(|&v| v <= len).unwrap_or(1);
        out.push(v);
        len -= v;
    }
    out
}

/// Writes one voice of one bar (`bar` steps), chord symbols before the events they fall in
/// when `symbols` is given.
fn voice_bar(
    w: &mut W,
    line: &[Span],
    bar: std::ops::Range<usize>,
    voice: usize,
    symbols: Option<&[(usize, Option<Chord>)]>,
) -> std::io::Result<()> {
    // Events: (start, end, pitches, tied from before, tied on after).
    let mut events: Vec<(usize, usize, Vec<u8>, bool, bool)> = Vec::new();
    let mut at = bar.start;
    let mut i = line.partition_point(|&(_, _, e)| e <= bar.start);
    while i < line.len() && line[i].1 < bar.end {
        let (_, s, e) = line[i];
        let mut pitches = Vec::new();
        while i < line.len() && line[i].1 == s && line[i].2 == e {
            pitches.push(line[i].0);
            i += 1;
        }
        let (from, to) = (s.max(bar.start), e.min(bar.end));
        if from > at {
            events.push((at, from, Vec::new(), false, false));
        }
        events.push((from, to, pitches, s < bar.start, e > bar.end));
        at = to;
    }
    if at < bar.end {
        events.push((at, bar.end, Vec::new(), false, false));
    }
    if events.len() == 1 && events[0].2.is_empty() {
        // A bar of rest: its symbols from the bar's start, then one whole-bar rest.
        for &(step, chord) in symbols.unwrap_or(&[]).iter().filter(|c| bar.contains(&c.0)) {
            harmony(w, chord, step - bar.start)?;
        }
        return note(w, &[], bar.len(), voice, (false, false), true);
    }
    for (start, end, pitches, tied_from, tied_on) in events {
        let mut pos = start;
        let parts = values(end - start);
        let n = parts.len();
        for (k, len) in parts.into_iter().enumerate() {
            if let Some(symbols) = symbols {
                for &(step, chord) in symbols.iter().filter(|c| (pos..pos + len).contains(&c.0)) {
                    harmony(w, chord, step - pos)?;
                }
            }
            let ties = (tied_from || k > 0, tied_on || k + 1 < n);
            note(w, &pitches, len, voice, ties, false)?;
            pos += len;
        }
    }
    Ok(())
}

/// The piece as MusicXML text.
pub fn write_musicxml(piece: &Piece, kind: ScoreKind) -> Result<String, String> {
    piece.validate().map_err(|e| e.to_string())?;
    let grid = piece.plan_grid();
    if grid.num_bars() == 0 {
        return Err("the piece has no bars to write".into());
    }
    let parts: Vec<(String, Vec<&PieceTrack>)> = match kind {
        ScoreKind::LeadSheet => {
            let melody: Vec<&PieceTrack> = piece
                .tracks
                .iter()
                .filter(|t| t.role == TrackRole::Melody)
                .collect();
            vec![("Melody".into(), melody)]
        }
        ScoreKind::Full => piece
            .tracks
            .iter()
            .filter(|t| !t.notes.is_empty())
            .map(|t| (t.name.clone(), vec![t]))
            .collect(),
    };
    let parts = if parts.is_empty() {
        vec![("Melody".to_string(), Vec::new())]
    } else {
        parts
    };
    let symbols = chord_changes(piece, &grid);
    let bpm = piece
        .tempos
        .first()
        .map_or(120.0, |t| 60e6 / t.1.max(1) as f64);
    let write = |w: &mut W| -> std::io::Result<()> {
        w.write_event(Event::Decl(BytesDecl::new(
            "1.0",
            Some("UTF-8"),
            Some("no"),
        )))?;
        w.write_event(Event::DocType(BytesText::from_escaped(
            r#"score-partwise PUBLIC "-//Recordare//DTD MusicXML 4.0 Partwise//EN" "http://www.musicxml.org/dtds/partwise.dtd""#,
        )))?;
        w.create_element("score-partwise")
            .with_attribute(("version", "4.0"))
            .write_inner_content(|w| {
                w.create_element("work").write_inner_content(|w| {
                    text(w, "work-title", piece.name.trim_end_matches(".mid"))
                })?;
                w.create_element("identification")
                    .write_inner_content(|w| {
                        w.create_element("encoding")
                            .write_inner_content(|w| text(w, "software", "pianoformer"))?;
                        Ok(())
                    })?;
                w.create_element("part-list").write_inner_content(|w| {
                    for (i, (name, _)) in parts.iter().enumerate() {
                        w.create_element("score-part")
                            .with_attribute(("id", format!("P{}", i + 1).as_str()))
                            .write_inner_content(|w| text(w, "part-name", name))?;
                    }
                    Ok(())
                })?;
                for (i, (_, tracks)) in parts.iter().enumerate() {
                    let lines = voices(tracks, &grid);
                    let low = tracks
                        .iter()
                        .flat_map(|t| t.notes.iter())
                        .map(|n| n.0 as f64)
                        .sum::<f64>()
                        / tracks.iter().map(|t| t.notes.len()).sum::<usize>().max(1) as f64;
                    let bass_clef = low > 0.0 && low < 57.0;
                    let pedal = pedal_marks(tracks, &grid);
                    w.create_element("part")
                        .with_attribute(("id", format!("P{}", i + 1).as_str()))
                        .write_inner_content(|w| {
                            for bar in 0..grid.num_bars() {
                                let steps = grid.bar_steps(bar);
                                w.create_element("measure")
                                    .with_attribute(("number", (bar + 1).to_string().as_str()))
                                    .write_inner_content(|w| {
                                        measure_head(w, piece, &grid, bar, bass_clef, bpm)?;
                                        pedal_directions(w, &pedal, steps.clone())?;
                                        for (v, line) in lines.iter().enumerate() {
                                            if v > 0 {
                                                w.create_element("backup").write_inner_content(
                                                    |w| {
                                                        text(
                                                            w,
                                                            "duration",
                                                            &steps.len().to_string(),
                                                        )
                                                    },
                                                )?;
                                            }
                                            let symbols =
                                                (i == 0 && v == 0).then_some(&symbols[..]);
                                            voice_bar(w, line, steps.clone(), v + 1, symbols)?;
                                        }
                                        Ok(())
                                    })?;
                            }
                            Ok(())
                        })?;
                }
                Ok(())
            })?;
        Ok(())
    };
    let mut w = Writer::new_with_indent(Cursor::new(Vec::new()), b' ', 2);
    write(&mut w).map_err(|e| format!("the score could not be written: {e}"))?;
    String::from_utf8(w.into_inner().into_inner()).map_err(|e| e.to_string())
}

/// Where the sustain pedal of `tracks` goes down (`start`), up (`stop`) or both at one step
/// (`change`), in steps of `grid`, in order.
fn pedal_marks(tracks: &[&PieceTrack], grid: &Grid) -> Vec<(usize, &'static str)> {
    let mut marks: Vec<(usize, &'static str)> = Vec::new();
    for track in tracks {
        let end = track.notes.iter().map(|n| n.2).max().unwrap_or(0);
        for (from, to) in crate::music::pedal::down_spans(&track.pedal, end) {
            let (down, up) = (grid.step_at(from), grid.step_at(to));
            match marks.last_mut() {
                Some(last) if last.0 == down && last.1 == "stop" => last.1 = "change",
                _ => marks.push((down, "start")),
            }
            if up > down {
                marks.push((up, "stop"));
            } else if let Some(last) = marks.pop() {
                // Down for less than a step: as if never pressed.
                if last.1 == "change" {
                    marks.push((last.0, "stop"));
                }
            }
        }
    }
    marks.sort_by_key(|m| m.0);
    marks
}

/// The pedal marks that fall in `bar` (steps), each a `<direction>` below the staff at its
/// offset from the bar's start, with the sound it makes.
fn pedal_directions(
    w: &mut W,
    marks: &[(usize, &'static str)],
    bar: std::ops::Range<usize>,
) -> std::io::Result<()> {
    let from = marks.partition_point(|m| m.0 < bar.start);
    for &(step, kind) in marks[from..].iter().take_while(|m| m.0 < bar.end) {
        w.create_element("direction")
            .with_attribute(("placement", "below"))
            .write_inner_content(|w| {
                w.create_element("direction-type")
                    .write_inner_content(|w| {
                        w.create_element("pedal")
                            .with_attribute(("type", kind))
                            .with_attribute(("line", "yes"))
                            .write_empty()?;
                        Ok(())
                    })?;
                if step > bar.start {
                    text(w, "offset", &(step - bar.start).to_string())?;
                }
                w.create_element("sound")
                    .with_attribute(("damper-pedal", if kind == "stop" { "no" } else { "yes" }))
                    .write_empty()?;
                Ok(())
            })?;
    }
    Ok(())
}

/// The first bar's attributes (divisions, key, time, clef) and tempo, and a bar whose meter
/// changes its new time signature.
fn measure_head(
    w: &mut W,
    piece: &Piece,
    grid: &Grid,
    bar: usize,
    bass_clef: bool,
    bpm: f64,
) -> std::io::Result<()> {
    let steps = grid.bar_steps(bar).len();
    let previous = bar.checked_sub(1).map(|b| grid.bar_steps(b).len());
    if bar > 0 && previous == Some(steps) {
        return Ok(());
    }
    // The piece's own signature where one starts at this bar, else quarters.
    let tick = grid.tick_at(grid.bar_steps(bar).start);
    let (beats, beat_type) = piece
        .time_signatures
        .iter()
        .rev()
        .find(|t| t.0 <= tick)
        .filter(|t| t.1 as usize * 16 / t.2 as usize == steps)
        .map_or(((steps / DIVISIONS).max(1), 4usize), |t| {
            (t.1 as usize, t.2 as usize)
        });
    w.create_element("attributes").write_inner_content(|w| {
        if bar == 0 {
            text(w, "divisions", &DIVISIONS.to_string())?;
            w.create_element("key")
                .write_inner_content(|w| text(w, "fifths", "0"))?;
        }
        w.create_element("time").write_inner_content(|w| {
            text(w, "beats", &beats.to_string())?;
            text(w, "beat-type", &beat_type.to_string())
        })?;
        if bar == 0 {
            w.create_element("clef").write_inner_content(|w| {
                text(w, "sign", if bass_clef { "F" } else { "G" })?;
                text(w, "line", if bass_clef { "4" } else { "2" })
            })?;
        }
        Ok(())
    })?;
    if bar == 0 {
        w.create_element("direction")
            .with_attribute(("placement", "above"))
            .write_inner_content(|w| {
                w.create_element("direction-type")
                    .write_inner_content(|w| {
                        w.create_element("metronome").write_inner_content(|w| {
                            text(w, "beat-unit", "quarter")?;
                            text(w, "per-minute", &format!("{}", bpm.round()))
                        })?;
                        Ok(())
                    })?;
                w.create_element("sound")
                    .with_attribute(("tempo", format!("{:.2}", bpm).as_str()))
                    .write_empty()?;
                Ok(())
            })?;
    }
    Ok(())
}

/// The piece as a compressed MusicXML file (`.mxl`): the score and the container that names it.
pub fn write_mxl(piece: &Piece, kind: ScoreKind) -> Result<Vec<u8>, String> {
    let xml = write_musicxml(piece, kind)?;
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let stored =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    let deflated = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    let fail = |e: String| format!("the .mxl could not be written: {e}");
    // The mimetype first and stored, as the format asks.
    zip.start_file("mimetype", stored)
        .map_err(|e| fail(e.to_string()))?;
    zip.write_all(b"application/vnd.recordare.musicxml")
        .map_err(|e| fail(e.to_string()))?;
    zip.start_file("META-INF/container.xml", deflated)
        .map_err(|e| fail(e.to_string()))?;
    zip.write_all(
        br#"<?xml version="1.0" encoding="UTF-8"?>
<container>
  <rootfiles>
    <rootfile full-path="score.musicxml" media-type="application/vnd.recordare.musicxml+xml"/>
  </rootfiles>
</container>
"#,
    )
    .map_err(|e| fail(e.to_string()))?;
    zip.start_file("score.musicxml", deflated)
        .map_err(|e| fail(e.to_string()))?;
    zip.write_all(xml.as_bytes())
        .map_err(|e| fail(e.to_string()))?;
    let out = zip.finish().map_err(|e| fail(e.to_string()))?;
    Ok(out.into_inner())
}
