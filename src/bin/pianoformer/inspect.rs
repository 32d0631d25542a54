//! `pianoformer inspect FILE.mid`: a user's first debugging tool, and ours.

use std::path::Path;

use pianoformer::generate::GenerateError;
use pianoformer::generate::harmonize::lane_chords;
use pianoformer::music::grid::Grid;
use pianoformer::music::harmony::ChordSource;
use pianoformer::music::midi::{MAX_FILE_BYTES, Song, read_midi};
use pianoformer::music::summary::{SongSummary, note_name, summarize};

/// Appends a line to a `String` (writing to a `String` cannot fail).
macro_rules! outln {
    ($out:ident, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        let _ = writeln!($out, $($arg)*);
    }};
}

pub fn run(path: &Path, json: bool, harmonizer: &str) -> Result<(), String> {
    let text = render(path, json, harmonizer)?;
    crate::print_stdout(&text)
}

/// The harmonizer's chords per bar for a song whose notes carry no harmony (`None` when an
/// accompaniment plays, no melody is found, or no harmonizer is used).
/// Chord names per bar, and the model that wrote them.
type Harmonized = (Vec<Vec<String>>, String);

fn harmonized(song: &Song, spec: &str) -> Result<Option<Harmonized>, String> {
    let device = burn::tensor::Device::flex();
    let Some((loaded, decode)) = crate::models::harmonizer(spec, None, &device)? else {
        return Ok(None);
    };
    let chords = match pollster::block_on(lane_chords(&loaded.model, &decode, song, 0)) {
        Ok(Some(chords)) => chords,
        Ok(None) | Err(GenerateError::NoMelody) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let grid = Grid::for_song(song, 1);
    let per_bar = (0..grid.num_bars())
        .map(|bar| {
            grid.bar_beats(bar)
                .map(|b| chords.get(b).copied().flatten())
                .map(|c| c.map_or_else(|| "N".to_string(), |c| c.name()))
                .collect()
        })
        .collect();
    Ok(Some((per_bar, loaded.source)))
}

fn render(path: &Path, json: bool, harmonizer: &str) -> Result<String, String> {
    let mut out = String::new();
    let meta =
        std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if meta.len() > MAX_FILE_BYTES as u64 {
        return Err(format!(
            "{} is {} bytes; MIDI files over {MAX_FILE_BYTES} bytes are not accepted",
            path.display(),
            meta.len()
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let song = read_midi(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut s = summarize(&song);
    let mut source = None;
    if let Some((chords, model)) = harmonized(&song, harmonizer)? {
        s.chords_per_bar = chords;
        s.chord_source = ChordSource::Harmonizer;
        source = Some(model);
    }
    if json {
        let mut text = serde_json::to_string_pretty(&s).map_err(|e| e.to_string())?;
        text.push('\n');
        return Ok(text);
    }
    header(&mut out, path, &s);
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
    }
    structure(&mut out, &s, source.as_deref());
    Ok(out)
}

/// The file's length, meters, key and tempo.
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
