//! `pianoformer inspect FILE.mid`: a user's first debugging tool, and ours.

use std::path::Path;

use pianoformer::generate::GenerateError;
use pianoformer::generate::harmonize::lane_alternatives;
use pianoformer::music::chords::Chord;
use pianoformer::music::grid::Grid;
use pianoformer::music::harmony::ChordSource;
use pianoformer::music::midi::{MAX_FILE_BYTES, Song, read_midi};
use pianoformer::music::musicxml::{Score, is_musicxml, read_musicxml};
use pianoformer::music::piece::chord_cell;
use pianoformer::music::summary::{SongSummary, note_name, summarize};

/// Appends a line to a `String` (writing to a `String` cannot fail).
macro_rules! outln {
    ($out:ident, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        let _ = writeln!($out, $($arg)*);
    }};
}

pub fn run(
    path: &Path,
    json: bool,
    harmonizer: &str,
    suggest: Option<usize>,
) -> Result<(), String> {
    let text = render(path, json, harmonizer, suggest)?;
    crate::print_stdout(&text)
}

/// The most alternatives `--suggest` gives.
pub const MAX_SUGGESTIONS: usize = 8;

/// The harmonizer's chords for a song whose notes carry no harmony (`None` when an
/// accompaniment plays, no melody is found, or no harmonizer is used): the lane's chords per
/// bar, the model that wrote them, and `suggest` alternatives (the lane's first), each with
/// its chords per beat and log-probability.
struct Harmonized {
    per_bar: Vec<Vec<String>>,
    model: String,
    suggestions: Vec<(Vec<Option<Chord>>, f32)>,
}

fn harmonized(
    song: &Song,
    spec: &str,
    suggest: Option<usize>,
) -> Result<Option<Harmonized>, String> {
    let device = burn::tensor::Device::flex();
    let Some((loaded, decode)) = crate::models::harmonizer(spec, None, &device)? else {
        return Ok(None);
    };
    let count = suggest.unwrap_or(1);
    let found = pollster::block_on(lane_alternatives(&loaded.model, &decode, song, count, 0));
    let suggestions = match found {
        Ok(Some(s)) if !s.is_empty() => s,
        Ok(_) | Err(GenerateError::NoMelody) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let per_bar = names_per_bar(&Grid::for_song(song, 1), &suggestions[0].0);
    Ok(Some(Harmonized {
        per_bar,
        model: loaded.source,
        suggestions: if suggest.is_some() {
            suggestions
        } else {
            Vec::new()
        },
    }))
}

/// A file's song and, for a MusicXML score, its chord symbols at every beat (its chords as
/// written).
type Read = (Song, Option<Vec<Option<Chord>>>);

/// The song of the file at `path`, MIDI or MusicXML ([`Read`]).
fn read_song(path: &Path) -> Result<Read, String> {
    let meta =
        std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if meta.len() > MAX_FILE_BYTES as u64 {
        return Err(format!(
            "{} is {} bytes; files over {MAX_FILE_BYTES} bytes are not accepted",
            path.display(),
            meta.len()
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    if is_musicxml(&bytes, &name) {
        let score = read_musicxml(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        let chords = score_beats(&score);
        Ok((score.song, Some(chords)))
    } else {
        let song = read_midi(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok((song, None))
    }
}

/// A score's chord symbols as the chord in force at each beat of its grid.
fn score_beats(score: &Score) -> Vec<Option<Chord>> {
    let grid = Grid::for_song(&score.song, 1);
    (0..grid.num_beats())
        .map(|b| {
            let tick = grid.tick_at(b);
            let i = score.chords.partition_point(|c| c.0 <= tick);
            i.checked_sub(1).and_then(|i| score.chords[i].1)
        })
        .collect()
}

/// A progression's chords per bar: a name per beat (`N`: none), as `chords_per_bar`.
fn names_per_bar(grid: &Grid, chords: &[Option<Chord>]) -> Vec<Vec<String>> {
    (0..grid.num_bars())
        .map(|bar| {
            grid.bar_beats(bar)
                .map(|b| chords.get(b).copied().flatten())
                .map(|c| c.map_or_else(|| "N".to_string(), |c| c.name()))
                .collect()
        })
        .collect()
}

fn render(
    path: &Path,
    json: bool,
    harmonizer: &str,
    suggest: Option<usize>,
) -> Result<String, String> {
    if let Some(k) = suggest
        && !(1..=MAX_SUGGESTIONS).contains(&k)
    {
        return Err(format!(
            "--suggest {k}: ask for 1 to {MAX_SUGGESTIONS} chord alternatives"
        ));
    }
    if suggest.is_some() && harmonizer == "none" {
        return Err("--suggest needs a harmonizer (not --harmonizer none)".into());
    }
    let mut out = String::new();
    let (song, written) = read_song(path)?;
    let mut s = summarize(&song);
    let mut source = None;
    let mut suggestions = Vec::new();
    if let Some(chords) = &written {
        s.chords_per_bar = names_per_bar(&Grid::for_song(&song, 1), chords);
        s.chord_source = ChordSource::Score;
    } else if let Some(h) = harmonized(&song, harmonizer, suggest)? {
        s.chords_per_bar = h.per_bar;
        s.chord_source = ChordSource::Harmonizer;
        source = Some(h.model);
        suggestions = h.suggestions;
    }
    let grid = Grid::for_song(&song, 1);
    if json {
        let mut value = serde_json::to_value(&s).map_err(|e| e.to_string())?;
        if suggest.is_some()
            && let Some(obj) = value.as_object_mut()
        {
            let list: Vec<serde_json::Value> = suggestions
                .iter()
                .map(|(chords, log_prob)| {
                    serde_json::json!({
                        "chords_per_bar": names_per_bar(&grid, chords),
                        "log_prob": log_prob,
                    })
                })
                .collect();
            obj.insert("suggestions".into(), serde_json::Value::Array(list));
        }
        let mut text = serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?;
        text.push('\n');
        return Ok(text);
    }
    header(&mut out, path, &s);
    tracks(&mut out, &s);
    structure(&mut out, &s, source.as_deref());
    if suggest.is_some() {
        suggested(&mut out, &grid, &suggestions);
    }
    Ok(out)
}

/// `--suggest`: each alternative as a chord chart (the page's: `|` between bars), with its
/// log-probability.
fn suggested(out: &mut String, grid: &Grid, suggestions: &[(Vec<Option<Chord>>, f32)]) {
    if suggestions.is_empty() {
        outln!(
            out,
            "suggestions: none (the file's own notes carry the harmony, or no melody was found)"
        );
        return;
    }
    outln!(
        out,
        "suggestions ({}; the first is the lane above), with their log-probability:",
        suggestions.len()
    );
    for (i, (chords, log_prob)) in suggestions.iter().enumerate() {
        let bars: Vec<String> = (0..grid.num_bars())
            .map(|bar| {
                let beats: Vec<Option<Chord>> = grid
                    .bar_beats(bar)
                    .map(|b| chords.get(b).copied().flatten())
                    .collect();
                chord_cell(&beats)
            })
            .collect();
        outln!(out, "  {}. {log_prob:.1}: {}", i + 1, bars.join(" | "));
    }
}

/// The file's length, meters, key and tempo.
/// The tracks, a line each, with a line for the pedal of those that have one.
fn tracks(out: &mut String, s: &SongSummary) {
    outln!(out, "tracks:");
    for (i, t) in s.tracks.iter().enumerate() {
        let channels: Vec<String> = t.channels.iter().map(|c| c.to_string()).collect();
        outln!(
            out,
            "  {:>2} {:<20} program {:>3}  channel {:<5} {:>6} notes  {}–{}{}",
            i + 1,
            if t.name.is_empty() {
                "(unnamed)"
            } else {
                &t.name
            },
            t.program.map_or("-".to_string(), |p| p.to_string()),
            channels.join(","),
            t.notes,
            note_name(t.lowest),
            note_name(t.highest),
            if t.drums { "  drums" } else { "" }
        );
        if let Some(p) = &t.pedal {
            outln!(
                out,
                "     pedal: down {:.0} % of the time, {:.2} presses a bar; notes sound {:.1}× \
                 as long as written (median {:.2} against {:.2} beats)",
                100.0 * p.share_down,
                p.presses_per_bar,
                p.lengthening(),
                p.sounding_beats,
                p.written_beats
            );
        }
    }
}

fn header(out: &mut String, path: &Path, s: &SongSummary) {
    let minutes = s.seconds / 60.0;
    outln!(
        out,
        "{}: {} notes, {}:{:02} long, {} ticks per quarter",
        path.display(),
        s.notes,
        minutes.floor() as u32,
        (s.seconds % 60.0).round() as u32,
        s.ppq
    );
    let signatures: Vec<String> = s
        .time_signatures
        .iter()
        .map(|(bar, ts)| {
            if *bar == 1 {
                ts.clone()
            } else {
                format!("{ts} from bar {bar}")
            }
        })
        .collect();
    outln!(
        out,
        "time signature {}, key {}",
        signatures.join(", "),
        s.key.as_deref().unwrap_or("not given")
    );
    match s.tempos.as_slice() {
        [] => outln!(out, "tempo 120 bpm (the MIDI default; the file sets none)"),
        [only] => outln!(out, "tempo {:.1} bpm", only.bpm),
        many => {
            outln!(out, "tempo map ({} changes):", many.len());
            for t in many.iter().take(8) {
                outln!(out, "  bar {:>3} beat {}: {:.1} bpm", t.bar, t.beat, t.bpm);
            }
            if many.len() > 8 {
                outln!(out, "  … {} more", many.len() - 8);
            }
        }
    }
}

/// The melody track, the detected phrases and the chords per beat of each bar.
fn structure(out: &mut String, s: &SongSummary, source: Option<&str>) {
    match s.melody_track {
        Some(i) => outln!(out, "melody: track {} ({})", i + 1, s.tracks[i].name),
        None => outln!(out, "melody: no track looks like one"),
    }
    outln!(out, "phrases (detected): {}", s.phrase_labels);
    match source {
        Some(model) => outln!(out, "chords: {} — {model}", s.chord_source.describe()),
        None => outln!(out, "chords: {}", s.chord_source.describe()),
    }
    outln!(out, "bar  phrase  chords per beat");
    for (i, bar) in s.chords_per_bar.iter().enumerate() {
        let phrase = s
            .phrases
            .iter()
            .find(|p| p.start_bar == i)
            .map_or(String::new(), |p| format!("{}{}", p.letter, p.bars));
        let chords: String = bar.iter().map(|c| format!("{c:<6}")).collect();
        outln!(out, "{:>3}  {phrase:<6}  {}", i + 1, chords.trim_end());
    }
}
