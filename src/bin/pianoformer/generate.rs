//! `pianoformer generate`: music from a file with a trained or shipped model, the page's way:
//! the file opened as the page opens it (a studio `Piece`), its lanes set from the flags as a
//! person sets them there, and the same studio call as the page's Generate, Continue or
//! "Regenerate these bars"; the result written as the page exports it (accompaniment: the
//! file's tracks with a new PIANO track in place of its piano; continuation: the file with a
//! CONTINUATION track; melody: the file with its MELODY track written over the bars asked, or a
//! new piece from a plan of chords and phrases alone).

use std::path::{Path, PathBuf};
use std::time::Instant;

use std::rc::Rc;

use pianoformer::device::{self, Preference};
use pianoformer::generate::{GenerateError, limits};
use pianoformer::model::config::Task;
use pianoformer::music::harmony::ChordSource;
use pianoformer::music::harmony::decode::HarmonyDecode;
use pianoformer::music::musicxml::{ScoreKind, is_musicxml, read_piece, write_musicxml, write_mxl};
use pianoformer::music::piece::{MAX_BARS, Piece, TrackRole, chord_chart};
use pianoformer::music::pop909::parse_phrases;
use pianoformer::music::texture::donor::{self, Donor};
use pianoformer::studio::{
    ContinueOptions, Family, HarmonizeOptions, HarmonyCache, Kept, Run, TaskKind, Written,
    harmonize_piece, needs_harmonizer,
};
use serde_json::Value;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// accompaniment, continuation, melody, or live (the piano a live take plays over the
    /// file's melody, each sixteenth decided from what was heard before it, as the page's live
    /// play-along does; `--bars 9-16` plays bars 9 to 16).
    #[arg(long)]
    pub task: String,
    /// A training run's folder, or a shipped model's name (`default`: the task's default; for
    /// live, the model the page plays live with).
    #[arg(long, default_value = "default")]
    pub model: String,
    /// The manifest of shipped models (default: $PIANOFORMER_MODELS, else www/models/ in
    /// the working folder, beside the binary or in the checkout it was built from).
    #[arg(long)]
    pub manifest: Option<PathBuf>,
    /// The prompt: a MIDI file or a MusicXML score, whose chord symbols are then the chord
    /// lane (a melody for accompaniment; the start of a piece for
    /// continuation; for a melody, a piece whose bars to write or to go on from — without one,
    /// the melody is written from the plan of --chords and --phrases alone).
    pub prompt: Option<PathBuf>,
    /// The prompt's melody track, by number (from 1, as `pianoformer inspect` lists them) or
    /// name, where the one found is not it or none is (a score whose only part holds chords):
    /// as the page's track list marks it.
    #[arg(long)]
    pub melody_track: Option<String>,
    /// Melody without a prompt: the plan's time signature.
    #[arg(long, default_value = "4/4")]
    pub meter: String,
    /// Melody without a prompt: the plan's tempo in beats a minute.
    #[arg(long, default_value_t = 100.0)]
    pub bpm: f64,
    /// Melody: the lowest and highest pitch it may sing, note names or MIDI numbers (`C4-G5`,
    /// `F#3 to Bb4`, `55-79`; default C3-C6, 48-84), as the page's Singer's range.
    #[arg(long)]
    pub range: Option<String>,
    /// Where to write the result: a MIDI file, or MusicXML when named `.musicxml`, `.xml` or
    /// `.mxl` (compressed): every track a part, the chord lane's symbols over the first.
    #[arg(long, short)]
    pub out: PathBuf,
    /// With a MusicXML output: a lead sheet, the melody and the chord symbols only.
    #[arg(long)]
    pub lead_sheet: bool,
    /// Chords from the first bar as a chord chart, as the page's chord dialog reads them: bars
    /// separated by `|`, chords sharing a bar by spaces (`"C | G | Am F | N"`; Harte symbols
    /// such as `A:min7` too; `N` or nothing for none). Detected (or, for a melody alone,
    /// proposed by --harmonizer) where not given. Bars past the prompt's music plan a
    /// continuation's new bars (each chord written where it falls; the model writes no chord
    /// of its own there).
    #[arg(long)]
    pub chords: Option<String>,
    /// Phrases as POP909 writes them, letter and bars (`i4A8B8A8o4`), from the first bar;
    /// detected where not given. Accompaniment reads them; so does a continuation model with
    /// F-StrIPE, and those past the prompt plan its new bars (`A8B8A8` after an 8-bar prompt:
    /// the new bars are a B, then the A again).
    #[arg(long)]
    pub phrases: Option<String>,
    /// Without --chords: the harmonizer that writes the chord lane when no part of the file
    /// carries the harmony (a melody-only file), as the page does when it opens one: a shipped
    /// model's name, a training run's folder, `default` (the shipped default) or `none` (the
    /// rule-based detector always).
    #[arg(long, default_value = "default")]
    pub harmonizer: String,
    /// Accompaniment: the velocity model that gives the piano its dynamics: `default` (the
    /// manifest's, when it ships one), a JSON file written by `pianoformer dynamics`, or
    /// `none` (every note at one velocity).
    #[arg(long, default_value = "default")]
    pub dynamics: String,
    /// Accompaniment and continuation: the sustain pedal of the bars written: `learnt` (the
    /// shipped pedal model's), `played` (the file's pianist's, none for new bars), `none`, or
    /// a JSON file written by `pianoformer pedal`. The MIDI file written carries it (controller 64).
    #[arg(long, default_value = "learnt")]
    pub pedal: String,
    /// Accompaniment: note threshold (default: the one chosen on validation data; a model
    /// that writes step by step draws its notes unless a threshold is given).
    #[arg(long)]
    pub threshold: Option<f32>,
    /// Continuation: the most tokens to add, a safety limit (default: 256 for each bar asked).
    /// Given without --bars, the continuation runs for this many tokens, whatever the bars.
    #[arg(long)]
    pub tokens: Option<usize>,
    /// Bars to rewrite, `9-16` (1-based, both included), keeping everything outside them:
    /// accompaniment rewrites the piano there (the file's PIANO track is kept elsewhere);
    /// continuation rewrites every note there from the music before them; melody rewrites the
    /// melody there. A single number is for continuation and melody: this many new bars
    /// (default 8 for a continuation, as on the page; a melody writes the bars its plan
    /// reaches past the music).
    #[arg(long)]
    pub bars: Option<String>,
    /// Continuation: let the model end the piece before --tokens or --bars.
    #[arg(long)]
    pub may_end: bool,
    /// Continuation: use only the prompt's last this-many tokens.
    #[arg(long)]
    pub prompt_tokens: Option<usize>,
    /// Continuation: the most tokens the model reads at once; past it, it starts again from
    /// the music's first bars and its last ones (default: the window it was trained on; 0: it
    /// reads everything, however long).
    #[arg(long)]
    pub context: Option<usize>,
    /// The sampling temperature of the task the model does: the piano's for an
    /// accompaniment, the continuation's for a continuation (default: the model's, chosen on
    /// validation data — for a continuation model by `eval --plan`, 1 where none was
    /// chosen). Ranges of this and every setting: settings/options.json.
    #[arg(long)]
    pub temperature: Option<f32>,
    /// Melody: the temperature of a new note's pitch (below --temperature, the rhythm's, it
    /// keeps to the likelier pitches; default: the model's).
    #[arg(long)]
    pub pitch_temperature: Option<f32>,
    /// Step-by-step accompaniment: the temperature of the draws that decide whether a
    /// sounding note goes on (below 1 holds notes more surely; default: the model's).
    #[arg(long)]
    pub hold_temperature: Option<f32>,
    #[arg(long, default_value_t = limits::default("topP").unwrap_or(0.95) as f32)]
    pub top_p: f32,
    /// Continuation: how strongly a bar the phrase lane marks as a repeat leans towards the
    /// same bar of its phrase's first occurrence (0: not at all; default: chosen on
    /// validation songs, as the page plays).
    #[arg(long)]
    pub echo: Option<f32>,
    /// How busy the new notes are: 0.5 half as many, 2 twice. Continuation: as a multiple of
    /// the notes a beat of the music before (its last 8 bars with notes), on every new bar;
    /// default 1 on the bars whose chords are not planned, planned ones following their plan
    /// (chosen on validation songs, as the page plays); step-by-step accompaniment: of the onsets the
    /// model would play (default: as it plays). A model that writes the whole accompaniment at
    /// once (its piano not read back) plays as it does: use --threshold there.
    #[arg(long)]
    pub density: Option<f32>,
    /// Step-by-step accompaniment: how strongly a phrase the lane repeats plays like its first
    /// occurrence (its rhythm in each register, re-voiced to the chords under it), as a
    /// multiple of the lean the training songs' pianists justify (default 1 where the model's
    /// manifest entry has one; 0: not at all).
    #[arg(long)]
    pub texture_echo: Option<f32>,
    /// Step-by-step accompaniment: play like bars of a piano part, `FILE:BARS` (a MIDI or
    /// MusicXML file, its bars counted from 1: `song.mid:9-12`; its generated or pianist's
    /// track): the bars written (--bars A-B, else every bar) cycle through them, their rhythm
    /// in their registers over the written bars' own chords and melody, at --texture-echo's
    /// strength.
    #[arg(long, value_name = "FILE:BARS", conflicts_with = "texture")]
    pub texture_from: Option<String>,
    /// Step-by-step accompaniment: play like a named texture of the gallery
    /// (settings/textures.json: ballad, arpeggio, block, stride, syncopated), as --texture-from.
    #[arg(long, value_name = "NAME")]
    pub texture: Option<String>,
    /// Continuation: how strongly new bars whose chords are not planned keep the pitch classes
    /// of the music before (its last 8 bars with notes): the model's chords lean towards them,
    /// pitches it rarely plays lose odds unless they are tones of the chord in force (0: as
    /// the model plays; default: chosen on validation songs, as the page plays).
    #[arg(long)]
    pub key: Option<f32>,
    /// The seed of every draw (the page's default too).
    #[arg(long, default_value_t = limits::default("seed").unwrap_or(0.0) as u64)]
    pub seed: u64,
    /// Write K alternatives (1–8): OUT.1.mid … OUT.K.mid, the k-th with seed SEED + k − 1, so
    /// each is what `--seed` alone writes; prints each one's figures and how alike they are.
    #[arg(long, value_name = "K")]
    pub alternatives: Option<usize>,
    /// cpu, gpu or auto.
    #[arg(long, default_value = "cpu")]
    pub backend: String,
    /// Also print what was written as JSON on stdout, for benchmarks and scripts: `{task,
    /// model, seconds, pieces: [{file, seed, summary, tokens?: {prompt, added}}]}`.
    #[arg(long)]
    pub json: bool,
}

/// `--chords`: a chord chart as the page's chord dialog reads it ([`chord_chart`]), a lane cell
/// per bar from the first. Several chords without a bar line are refused: the command line once
/// read `C G Am F` as four bars, where the page reads one bar of four chords.
fn parse_chords(text: &str) -> Result<Vec<String>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err(
            "--chords: no chords; give a chord per bar, bars separated by | \
                    (\"C | G | Am | F\")"
                .into(),
        );
    }
    if !text.contains('|') && text.split_whitespace().count() > 1 {
        return Err(format!(
            "--chords \"{text}\": separate the bars with | (\"{}\"), as in the page's chord \
             dialog; chords written together share one bar, written \"{text} |\"",
            text.split_whitespace().collect::<Vec<_>>().join(" | ")
        ));
    }
    chord_chart(text).map_err(|e| format!("--chords: {e}"))
}

/// `--phrases`: the phrase lane from the first bar, (letter, bars) as the piece keeps it.
fn parse_phrase_labels(text: &str) -> Result<Vec<(char, usize)>, String> {
    Ok(parse_phrases(text)
        .map_err(|e| format!("--phrases: {e}"))?
        .into_iter()
        .map(|p| (p.letter, p.bars as usize))
        .collect())
}

/// What `--bars` asks for.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Bars {
    /// Continuation: new bars at most.
    Count(usize),
    /// Bars to rewrite, 0-based, the end excluded.
    Region([usize; 2]),
}

fn parse_bars(text: &str) -> Result<Bars, String> {
    let number = |t: &str| {
        t.trim()
            .parse::<usize>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| {
                format!(
                    "--bars {text:?}: give a number of bars (8) or the bars to rewrite (9-16), \
                     counting from 1"
                )
            })
    };
    match text.split_once('-') {
        None => number(text).map(Bars::Count),
        Some((a, b)) => {
            let (a, b) = (number(a)?, number(b)?);
            if b < a {
                return Err(format!(
                    "--bars {text:?}: the last bar comes before the first"
                ));
            }
            Ok(Bars::Region([a - 1, b]))
        }
    }
}

/// The piece as `path`'s extension asks: MusicXML (`.musicxml`, `.xml`; `.mxl` compressed),
/// a lead sheet with `lead_sheet`, else a MIDI file.
fn encode(piece: &Piece, path: &Path, lead_sheet: bool) -> Result<Vec<u8>, String> {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let kind = if lead_sheet {
        ScoreKind::LeadSheet
    } else {
        ScoreKind::Full
    };
    match ext.as_str() {
        "musicxml" | "xml" => write_musicxml(piece, kind).map(String::into_bytes),
        "mxl" => write_mxl(piece, kind),
        _ if lead_sheet => Err(format!(
            "--lead-sheet writes MusicXML: name the output .musicxml or .mxl, not {}",
            path.display()
        )),
        _ => piece.to_midi().map_err(|e| e.to_string()),
    }
}

/// `--range LOW-HIGH`: note names or MIDI numbers, as the page's Singer's range.
fn parse_range(text: &str) -> Result<[u8; 2], String> {
    pianoformer::music::summary::pitch_range(text).map_err(|e| format!("--range: {e}"))
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// What `generate --task harmonization` answers.
const HARMONIZER_WRITES_NO_MUSIC: &str = "a harmonizer writes chords, not notes: an \
     accompaniment of a melody-only file uses it for the chord lane (generate --task \
     accompaniment), and `pianoformer inspect FILE` prints its chords";

pub fn run(args: Args) -> Result<(), String> {
    let kind: TaskKind = args.task.parse()?;
    if kind == TaskKind::Harmonization {
        return Err(HARMONIZER_WRITES_NO_MUSIC.into());
    }
    let task = kind.model();
    let bytes = read_prompt(&args, kind)?;
    let bars = args.bars.as_deref().map(parse_bars).transpose()?;
    if matches!(bars, Some(Bars::Count(_))) && task == Task::Accompaniment {
        return Err(
            "--bars for an accompaniment is the bars to rewrite, e.g. 9-16 (the whole melody \
             is accompanied otherwise)"
                .into(),
        );
    }
    // The lanes given, read before anything loads.
    let chart = args.chords.as_deref().map(parse_chords).transpose()?;
    let phrases = args
        .phrases
        .as_deref()
        .map(parse_phrase_labels)
        .transpose()?;
    let preference: Preference = args.backend.parse().map_err(|e| format!("{e}"))?;
    let backend = pollster::block_on(device::init(preference)).map_err(|e| format!("{e}"))?;
    let device = backend.device.clone();
    let spec = match kind {
        TaskKind::Live => crate::models::live_spec(&args.model, args.manifest.as_deref()),
        _ => args.model.clone(),
    };
    let loaded = crate::models::load(&spec, task, args.manifest.as_deref(), &device)?;
    let (region, new_bars) = match bars {
        Some(Bars::Region(region)) => (Some(region), None),
        Some(Bars::Count(n)) => (None, Some(n)),
        None => (None, None),
    };
    // Checked as the page's are (--alternatives among them), before anything is read.
    let mut settings = settings(&args, kind, &loaded, region, new_bars)?;
    let piece = match &bytes {
        Some(bytes) => {
            let mut piece = open(&args, bytes, chart, phrases, &device)?;
            if let (true, Some(n)) = (kind.writes_from_a_plan(), new_bars) {
                // A task that writes planned bars (a melody): `n` bars after the music's last
                // (its bars, counted on the grid).
                let music = piece.grid(|_| true).num_bars();
                piece.set_bar_count(piece.bars.len().max(music + n));
            }
            piece
        }
        None => plan(&args, chart, phrases, new_bars)?,
    };
    let dynamics = crate::models::dynamics(&args.dynamics, args.manifest.as_deref())?.map(Rc::new);
    let live = kind == TaskKind::Live;
    let (pedal_mode, pedal) = crate::models::pedal(&args.pedal, args.manifest.as_deref(), live)?;
    let pedal = pedal.map(Rc::new);
    settings["pedal"] = serde_json::json!(pedal_mode);
    let run = Run {
        model: &loaded.model,
        defaults: &loaded.defaults,
        device: &device,
        dynamics: dynamics.as_ref(),
        pedal: pedal.as_ref(),
    };
    // Every alternative at once, as the page asks for them: the task decides how they are
    // written (a step-by-step accompaniment writes them together, a step for all).
    let started = Instant::now();
    let out = pollster::block_on(kind.generate(
        &run,
        &piece,
        &settings,
        &mut Kept::default(),
        |_| async { true },
    ))
    .map_err(|e| failed(&args, e))?
    .into_pieces();
    let seconds = started.elapsed().as_secs_f64();
    report(
        &args,
        kind,
        &loaded.source,
        &piece,
        &settings,
        &out,
        seconds,
    )
}

/// Writes what a generation wrote (each alternative to its own file) and says what each holds,
/// how long it took and, for alternatives, how alike they are.
fn report(
    args: &Args,
    kind: TaskKind,
    source: &str,
    piece: &Piece,
    settings: &Value,
    out: &[Written],
    seconds: f64,
) -> Result<(), String> {
    let added: usize = out
        .iter()
        .filter_map(|w| w.tokens.as_ref())
        .map(|t| t.added.len())
        .sum();
    let pace = if added > 0 {
        format!(" ({:.2} ms a token)", 1e3 * seconds / added as f64)
    } else {
        String::new()
    };
    let mut written = Vec::new();
    let mut pieces = Vec::new();
    for (k, w) in out.iter().enumerate() {
        // Alternative k's settings: its seed, `seed + k` (as every task writes it).
        let seed = (args.seed + k as u64) % (1 << 32);
        let mut settings = settings.clone();
        settings["seed"] = seed.into();
        settings["alternatives"] = Value::Null;
        let path = match args.alternatives {
            None => args.out.clone(),
            Some(_) => numbered(&args.out, k + 1),
        };
        write(&path, &encode(&w.piece, &path, args.lead_sheet)?)?;
        let summary = kind.describe(piece, w, &settings);
        pieces.push(serde_json::json!({
            "file": path.display().to_string(),
            "seed": seed,
            "summary": summary,
            "tokens": w.tokens.as_ref().map(|t| serde_json::json!({
                "prompt": t.prompt.len(),
                "added": t.added.len(),
            })),
        }));
        match args.alternatives {
            None => eprintln!(
                "{summary}{pace} by {} in {seconds:.2} s; written to {}",
                source,
                path.display()
            ),
            Some(_) => eprintln!(
                "alternative {} (seed {}): {summary}; written to {}",
                k + 1,
                seed,
                path.display()
            ),
        }
        written.push(written_onsets(piece, &w.piece, region(&settings)));
    }
    if args.alternatives.is_some() {
        eprintln!(
            "{} alternatives{pace} by {} in {seconds:.2} s",
            out.len(),
            source
        );
    }
    if out.len() > 1 {
        eprintln!(
            "the alternatives' new notes alike: mean pairwise onset F1 {:.2} (1: the same notes)",
            mean_pairwise_f1(&written)
        );
    }
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "task": kind.name(),
                "model": source,
                "seconds": seconds,
                "pieces": pieces,
            })
        );
    }
    Ok(())
}

/// `out` with `.k` before its extension (`song.mid` → `song.2.mid`).
fn numbered(out: &Path, k: usize) -> PathBuf {
    let stem = out
        .file_stem()
        .map_or_else(|| "out".into(), |s| s.to_string_lossy().to_string());
    let ext = out
        .extension()
        .map_or_else(|| "mid".into(), |e| e.to_string_lossy().to_string());
    out.with_file_name(format!("{stem}.{k}.{ext}"))
}

/// What a generation wrote, as (start tick, pitch): the onsets `out` holds that `before` did
/// not (only in the bars a rewrite was asked for).
fn written_onsets(
    before: &Piece,
    out: &Piece,
    region: Option<[usize; 2]>,
) -> std::collections::HashSet<(u64, u8)> {
    let ticks = match region {
        Some([from, to]) => out.bar_tick(from)..out.bar_tick(to.min(out.bars.len())),
        None => 0..u64::MAX,
    };
    let onsets = |piece: &Piece| -> std::collections::HashSet<(u64, u8)> {
        piece
            .tracks
            .iter()
            .flat_map(|t| t.notes.iter())
            .filter(|n| ticks.contains(&n.1))
            .map(|&(pitch, start, _, _)| (start, pitch))
            .collect()
    };
    let old = onsets(before);
    onsets(out)
        .into_iter()
        .filter(|o| !old.contains(o))
        .collect()
}

/// The mean F1 of every pair of onset sets (1 when there are fewer than two).
fn mean_pairwise_f1(sets: &[std::collections::HashSet<(u64, u8)>]) -> f64 {
    let mut f1 = Vec::new();
    for i in 0..sets.len() {
        for j in 0..i {
            let total = sets[i].len() + sets[j].len();
            if total > 0 {
                f1.push(2.0 * sets[i].intersection(&sets[j]).count() as f64 / total as f64);
            }
        }
    }
    if f1.is_empty() {
        1.0
    } else {
        f1.iter().sum::<f64>() / f1.len() as f64
    }
}

/// A generation's error, with the flag it came from when it is the bars'.
fn failed(args: &Args, e: GenerateError) -> String {
    match (&e, &args.bars) {
        // The page's words name its track list; here the flag chooses.
        (GenerateError::NoMelodyTrack, _) => format!(
            "{}: no track is read as the melody: give --melody-track with the melody's track \
             number or name (`pianoformer inspect FILE` lists the tracks)",
            args.prompt
                .as_deref()
                .unwrap_or(Path::new("the prompt"))
                .display()
        ),
        (_, Some(bars)) if bars.contains('-') => format!("--bars {bars}: {e}"),
        _ => e.to_string(),
    }
}

/// `--melody-track`: the track the models read as the melody, by number (from 1) or name, as
/// the page's track list marks it; any other track marked so is read as another instrument.
fn choose_melody(piece: &mut Piece, spec: &str) -> Result<(), String> {
    let index = match spec.trim().parse::<usize>() {
        Ok(n) if (1..=piece.tracks.len()).contains(&n) => Some(n - 1),
        Ok(_) => None,
        Err(_) => piece
            .tracks
            .iter()
            .position(|t| t.name.eq_ignore_ascii_case(spec.trim())),
    };
    let Some(index) = index else {
        let tracks: Vec<String> = piece
            .tracks
            .iter()
            .enumerate()
            .map(|(i, t)| format!("{} {} ({} notes)", i + 1, t.name, t.notes.len()))
            .collect();
        return Err(format!(
            "--melody-track {spec}: no such track; the file has {}",
            if tracks.is_empty() {
                "none".into()
            } else {
                tracks.join(", ")
            }
        ));
    };
    for (i, track) in piece.tracks.iter_mut().enumerate() {
        if i == index {
            track.role = TrackRole::Melody;
        } else if track.role == TrackRole::Melody {
            track.role = TrackRole::Other;
        }
    }
    Ok(())
}

/// A MusicXML score or a MIDI file (by its bytes and name) as a piece.
fn read_any(bytes: &[u8], name: &str) -> Result<Piece, String> {
    if is_musicxml(bytes, name) {
        read_piece(bytes, name).map_err(|e| e.to_string())
    } else {
        Piece::from_midi(bytes, name).map_err(|e| e.to_string())
    }
}

/// The file as the page opens it ([`Piece::from_midi`]: the melody track, chords and phrases
/// detected), with the lanes the command line gives set as a person sets them in the page:
/// `--phrases` and `--chords` from the first bar, planning bars past the music where they reach
/// further; without `--chords`, a melody whose notes carry no harmony gets the harmonizer's
/// chords, as a file opened in the page does.
fn open(
    args: &Args,
    bytes: &[u8],
    chart: Option<Vec<String>>,
    phrases: Option<Vec<(char, usize)>>,
    device: &burn::tensor::Device,
) -> Result<Piece, String> {
    let path = args.prompt.clone().unwrap_or_default();
    let name = path
        .file_name()
        .map_or_else(|| "prompt.mid".into(), |n| n.to_string_lossy().to_string());
    let mut piece = read_any(bytes, &name).map_err(|e| format!("{}: {e}", path.display()))?;
    if let Some(spec) = &args.melody_track {
        choose_melody(&mut piece, spec)?;
    }
    let labelled = chart
        .as_ref()
        .map_or(0, Vec::len)
        .max(phrases.as_ref().map_or(0, |p| p.iter().map(|s| s.1).sum()));
    if labelled > piece.bars.len() {
        if labelled > MAX_BARS {
            return Err(format!(
                "--chords and --phrases reach bar {labelled}; a piece holds at most {MAX_BARS}"
            ));
        }
        piece.set_bar_count(labelled);
    }
    if let Some(phrases) = phrases {
        piece.phrases = phrases;
        piece.set_bar_count(piece.bars.len());
    }
    match chart {
        Some(cells) => {
            for (cell, given) in piece.chords.iter_mut().zip(cells) {
                *cell = given;
            }
        }
        // A score's chord symbols are its lane, as written.
        None if wants_harmonizer(&piece) => {
            if let Some(harmonizer) = crate::models::harmonizer(&args.harmonizer, None, device)? {
                harmonize_lane(&mut piece, &harmonizer, &HarmonizeOptions::default())?;
                eprintln!(
                    "chords: {} — {}",
                    ChordSource::Harmonizer.describe(),
                    harmonizer.0.source
                );
            }
        }
        None => {}
    }
    Ok(piece)
}

/// Whether the chord lane is the harmonizer's to fill: a melody whose notes carry no harmony,
/// its chords not a score's symbols.
pub fn wants_harmonizer(piece: &Piece) -> bool {
    needs_harmonizer(piece) && piece.chord_source != Some(ChordSource::Score)
}

/// The chord lane filled with `harmonizer`'s chords, as a file opened in the page gets them
/// (`options`: the default, the most likely progression).
pub fn harmonize_lane(
    piece: &mut Piece,
    (harmonizer, decode): &(crate::models::Loaded, HarmonyDecode),
    options: &HarmonizeOptions,
) -> Result<(), String> {
    let out = pollster::block_on(harmonize_piece(
        &harmonizer.model,
        decode,
        piece,
        options,
        &mut HarmonyCache::default(),
    ))
    .map_err(|e| e.to_string())?;
    for (k, cell) in out.cells.into_iter().enumerate() {
        if let Some(c) = piece.chords.get_mut(out.from + k) {
            *c = cell;
        }
    }
    piece.chord_source = Some(ChordSource::Harmonizer);
    Ok(())
}

/// The prompt's bytes; `None` for a task that writes from a plan alone (a melody).
fn read_prompt(args: &Args, kind: TaskKind) -> Result<Option<Vec<u8>>, String> {
    if let Some(path) = &args.prompt {
        return std::fs::read(path)
            .map(Some)
            .map_err(|e| format!("cannot read {}: {e}", path.display()));
    }
    if kind.writes_from_a_plan() {
        return Ok(None);
    }
    let planned: Vec<&str> = TaskKind::ALL
        .iter()
        .filter(|k| k.writes_from_a_plan())
        .map(|k| k.name())
        .collect();
    Err(format!(
        "give the MIDI file to {} (only a {} can start from a plan alone)",
        kind.verb(),
        pianoformer::studio::family::or_list(&planned)
    ))
}

/// A piece from nothing but a plan (`generate --task melody` without a prompt): as many bars
/// as `--chords`, `--phrases` or `--bars N` reach, in `--meter` at `--bpm`.
fn plan(
    args: &Args,
    chart: Option<Vec<String>>,
    phrases: Option<Vec<(char, usize)>>,
    new_bars: Option<usize>,
) -> Result<Piece, String> {
    let bars = chart
        .as_ref()
        .map_or(0, Vec::len)
        .max(phrases.as_ref().map_or(0, |p| p.iter().map(|s| s.1).sum()))
        .max(new_bars.unwrap_or(0));
    if bars == 0 {
        return Err(
            "a melody from nothing needs a plan: give --chords (\"C | G | Am | F\"), --phrases \
             (i4A8B8A8) or --bars N, or a MIDI file to go on from"
                .into(),
        );
    }
    let (numerator, denominator) = args
        .meter
        .split_once('/')
        .and_then(|(n, d)| Some((n.trim().parse::<u8>().ok()?, d.trim().parse::<u16>().ok()?)))
        .ok_or_else(|| format!("--meter {:?}: write it as 4/4, 3/4 or 6/8", args.meter))?;
    let mut piece = Piece::from_plan("plan", bars, numerator, denominator, args.bpm)
        .map_err(|e| format!("--meter/--bpm/--chords/--phrases: {e}"))?;
    if let Some(phrases) = phrases {
        piece.phrases = phrases;
        piece.set_bar_count(bars);
    }
    if let Some(cells) = chart {
        for (cell, given) in piece.chords.iter_mut().zip(cells) {
            *cell = given;
        }
    }
    Ok(piece)
}

/// The most tokens a continuation model reads at once: `--context` (0: no limit), else the
/// window it was trained on.
fn context(args: &Args, loaded: &crate::models::Loaded) -> Result<Option<usize>, String> {
    match args.context {
        Some(0) => Ok(None),
        Some(n) if n < 32 => Err(format!(
            "--context {n}: the model must read at least 32 tokens at once (0 reads everything)"
        )),
        Some(n) => Ok(Some(n)),
        None => Ok(loaded.trained_window),
    }
}

/// The bars a generation was asked to rewrite (the settings' `region`).
fn region(settings: &Value) -> Option<[usize; 2]> {
    serde_json::from_value(settings["region"].clone())
        .ok()
        .flatten()
}

/// The command line's settings as the page sends them (one JSON object in the page's words,
/// each task reading what it knows of it), checked by the task the way the page's are:
/// `region` for `--bars A-B`, `new_bars` for `--bars N`.
fn settings(
    args: &Args,
    kind: TaskKind,
    loaded: &crate::models::Loaded,
    region: Option<[usize; 2]>,
    new_bars: Option<usize>,
) -> Result<Value, String> {
    // --temperature is the temperature of the task the model does: the piano's for an
    // accompaniment or a take, the continuation's or the melody's (else the model's own, chosen
    // on validation by `eval --plan` or `eval --task melody`) for those; each task reads its
    // own of the two.
    let settings = serde_json::json!({
        "seed": args.seed,
        "threshold": args.threshold,
        "pianoTemperature": args.temperature,
        "holdTemperature": args.hold_temperature,
        "region": region,
        "temperature": args.temperature.or(loaded.defaults.temperature),
        "topP": args.top_p,
        "echo": args.echo,
        "density": args.density,
        "key": args.key,
        "tokens": args.tokens,
        // The page's length in bars unless only a number of tokens is asked.
        "bars": new_bars.or(if args.tokens.is_some() {
            None
        } else {
            ContinueOptions::default().bars
        }),
        "mayEnd": args.may_end,
        "maxPromptTokens": args
            .prompt_tokens
            .unwrap_or(ContinueOptions::default().max_prompt_tokens),
        "context": context(args, loaded)?,
        "melodyRange": args.range.as_deref().map(parse_range).transpose()?,
        "pitchTemperature": args.pitch_temperature,
        "alternatives": args.alternatives,
        "textureEcho": args.texture_echo,
        "texture": texture(args, loaded)?,
    });
    // A number of new bars is the page's Length (a melody's too, which reads no `bars`).
    if let Some(n) = new_bars {
        limits::limit("bars")
            .check(n as f64)
            .map_err(|m| format!("--bars {n}: {m}"))?;
    }
    kind.check(&settings).map_err(|bad| {
        // Each setting's flag is written beside its range (settings/options.json).
        let flag = match bad.field {
            "settings" => return bad.message,
            "region" => "--bars",
            "texture" if args.texture.is_some() => "--texture",
            "texture" => "--texture-from",
            key => limits::limit(key).flag.as_str(),
        };
        format!("{flag}: {bad}")
    })?;
    Ok(settings)
}

/// The texture `--texture` names (the gallery's) or `--texture-from` reads.
fn texture(args: &Args, loaded: &crate::models::Loaded) -> Result<Option<Donor>, String> {
    if args.texture.is_none() && args.texture_from.is_none() {
        return Ok(None);
    }
    if loaded.model.config.task != Task::Accompaniment {
        return Err("--texture and --texture-from are for an accompaniment".into());
    }
    if let Some(name) = &args.texture {
        return donor::named(name).cloned().map(Some);
    }
    let spec = args.texture_from.as_deref().unwrap_or_default();
    let (file, bars) = spec.rsplit_once(':').ok_or_else(|| {
        format!("--texture-from {spec:?}: give a file and its bars, as song.mid:9-12")
    })?;
    let Ok(Bars::Region([from, to])) = parse_bars(bars) else {
        return Err(format!(
            "--texture-from {spec:?}: give the bars as FIRST-LAST, counting from 1 (song.mid:9-12)"
        ));
    };
    let path = Path::new(file);
    let bytes = std::fs::read(path).map_err(|e| format!("--texture-from {file}: {e}"))?;
    let name = path
        .file_name()
        .map_or_else(|| file.to_string(), |n| n.to_string_lossy().to_string());
    let piece = read_any(&bytes, &name).map_err(|e| format!("--texture-from {file}: {e}"))?;
    Donor::from_piece(&piece, from..to)
        .map(Some)
        .map_err(|e| format!("--texture-from {file}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_are_a_count_or_a_range_counted_from_one() {
        assert_eq!(parse_bars("8"), Ok(Bars::Count(8)));
        assert_eq!(parse_bars("9-16"), Ok(Bars::Region([8, 16])));
        assert_eq!(parse_bars(" 5 - 5 "), Ok(Bars::Region([4, 5])));
        for bad in ["0", "0-4", "9-", "x", "16-9", "-3"] {
            assert!(parse_bars(bad).is_err(), "{bad}");
        }
        assert!(parse_bars("16-9").unwrap_err().contains("comes before"));
    }
}
