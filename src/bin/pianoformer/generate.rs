//! `pianoformer generate`: music from a prompt with a trained or shipped model.
//! Accompaniment writes the prompt's melody (and bridge) with a new PIANO track; continuation
//! writes the prompt followed by what the model added.

use std::path::{Path, PathBuf};
use std::time::Instant;

use pianoformer::device::{self, Preference};
use pianoformer::generate::harmonize::{Choice, harmonize_input, has_accompaniment};
use pianoformer::generate::{
    accompaniment_input, accompany_song, chord_tone_ratio, continue_tokens, cut_prompt, limits,
    prompt_tokens_with, song_from_tokens, with_piano,
};
use pianoformer::model::config::Task;
use pianoformer::music::chords::Chord;
use pianoformer::music::dynamics::Context;
use pianoformer::music::grid::Grid;
use pianoformer::music::harmony::ChordSource;
use pianoformer::music::labels::{bar_phrases, detect_structure};
use pianoformer::music::midi::{read_midi, write_midi};
use pianoformer::music::phrases::Segment;
use pianoformer::music::piece::{Piece, TrackRole, chord_cell};
use pianoformer::music::pop909::parse_phrases;
use pianoformer::music::tokens::{STEPS_PER_BEAT, Token};
use pianoformer::studio::{Options, accompany_piece, continue_piece};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// accompaniment or continuation.
    #[arg(long)]
    pub task: String,
    /// A training run's folder, or a shipped model's name (`default`: the task's default).
    #[arg(long, default_value = "default")]
    pub model: String,
    /// The manifest of shipped models (default: $PIANOFORMER_MODELS, else www/models/ in
    /// the working folder, beside the binary or in the checkout it was built from).
    #[arg(long)]
    pub manifest: Option<PathBuf>,
    /// The prompt: a MIDI file (a melody for accompaniment; the start of a piece for
    /// continuation).
    pub prompt: PathBuf,
    /// Where to write the result.
    #[arg(long, short)]
    pub out: PathBuf,
    /// Chords per bar from the first bar, space- or comma-separated (`C G Am F`, Harte
    /// symbols such as `A:min7` too; `N` for none; `C|G` shares a bar between two chords).
    /// Detected where not given. A continuation reads them over the prompt's bars, and
    /// those past its end plan the new bars (each chord written where it falls; the model
    /// writes no chord of its own there).
    #[arg(long)]
    pub chords: Option<String>,
    /// Phrases as POP909 writes them, letter and bars (`i4A8B8A8o4`), from the first bar;
    /// detected where not given. Accompaniment reads them; so does a continuation model with
    /// F-StrIPE, and those past the prompt plan its new bars (`A8B8A8` after an 8-bar prompt:
    /// the new bars are a B, then the A again).
    #[arg(long)]
    pub phrases: Option<String>,
    /// Accompaniment without --chords: the harmonizer that writes the chord lane when no part
    /// of the file carries the harmony (a melody-only file): a shipped model's name, a
    /// training run's folder, `default` (the shipped default) or `none` (the rule-based
    /// detector always).
    #[arg(long, default_value = "default")]
    pub harmonizer: String,
    /// Accompaniment: the velocity model that gives the piano its dynamics: `default` (the
    /// manifest's, when it ships one), a JSON file written by `pianoformer dynamics`, or
    /// `none` (every note at one velocity).
    #[arg(long, default_value = "default")]
    pub dynamics: String,
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
    /// continuation rewrites every note there from the music before them. A single number is
    /// for continuation: this many new bars (default 8, as on the page).
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
    /// chosen). Ranges of this and every setting: www/options.json.
    #[arg(long)]
    pub temperature: Option<f32>,
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
    /// the notes a beat of the music before (its last 8 bars with notes; default 1, chosen on
    /// validation songs, as the page plays); step-by-step accompaniment: of the onsets the
    /// model would play (default: as it plays).
    #[arg(long)]
    pub density: Option<f32>,
    /// Continuation: how strongly new bars whose chords are not planned keep the pitch classes
    /// of the music before (its last 8 bars with notes): the model's chords lean towards them,
    /// pitches it rarely plays lose odds unless they are tones of the chord in force (0: as
    /// the model plays; default: chosen on validation songs, as the page plays).
    #[arg(long)]
    pub key: Option<f32>,
    /// The seed of every draw (the page's default too).
    #[arg(long, default_value_t = limits::default("seed").unwrap_or(0.0) as u64)]
    pub seed: u64,
    /// cpu, gpu or auto.
    #[arg(long, default_value = "cpu")]
    pub backend: String,
}

fn parse_chords(text: &str) -> Result<Vec<Vec<Option<Chord>>>, String> {
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(|bar| {
            bar.split('|')
                .map(|s| Chord::parse_any(s).map_err(|e| format!("--chords: {e}")))
                .collect()
        })
        .collect()
}

fn parse_phrase_labels(text: &str) -> Result<Vec<Segment>, String> {
    let phrases = parse_phrases(text).map_err(|e| format!("--phrases: {e}"))?;
    let mut start = 0;
    Ok(phrases
        .into_iter()
        .map(|p| {
            let s = Segment {
                start_bar: start,
                bars: p.bars as usize,
                letter: p.letter,
            };
            start += p.bars as usize;
            s
        })
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

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// What `generate --task harmonization` answers.
const HARMONIZER_WRITES_NO_MUSIC: &str = "a harmonizer writes chords, not notes: an \
     accompaniment of a melody-only file uses it for the chord lane (generate --task \
     accompaniment), and `pianoformer inspect FILE` prints its chords";

pub fn run(args: Args) -> Result<(), String> {
    let task: Task = args.task.parse()?;
    let bytes = std::fs::read(&args.prompt)
        .map_err(|e| format!("cannot read {}: {e}", args.prompt.display()))?;
    let song = read_midi(&bytes).map_err(|e| format!("{}: {e}", args.prompt.display()))?;
    let preference: Preference = args.backend.parse().map_err(|e| format!("{e}"))?;
    let backend = pollster::block_on(device::init(preference)).map_err(|e| format!("{e}"))?;
    let device = backend.device.clone();
    let loaded = crate::models::load(&args.model, task, args.manifest.as_deref(), &device)?;
    let started = Instant::now();
    let bars = args.bars.as_deref().map(parse_bars).transpose()?;
    if let Some(Bars::Region(region)) = bars {
        return regenerate(&args, task, region, &bytes, &loaded, &device);
    }
    let new_bars = bars.map(|b| match b {
        Bars::Count(n) => n,
        Bars::Region(_) => unreachable!("handled above"),
    });
    if new_bars.is_some() && task == Task::Accompaniment {
        return Err(
            "--bars for an accompaniment is the bars to rewrite, e.g. 9-16 (the whole melody \
             is accompanied otherwise)"
                .into(),
        );
    }
    let options = options(&args, &loaded, None, new_bars)?;
    let run = Run {
        args: &args,
        song: &song,
        loaded: &loaded,
        options: &options,
        device: &device,
        started,
    };
    match task {
        Task::Harmonization => return Err(HARMONIZER_WRITES_NO_MUSIC.into()),
        Task::Accompaniment => accompany(&run)?,
        Task::Continuation => continue_song(&run)?,
    }
    Ok(())
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

/// The command line's settings as the one type the page sends too ([`Options`]), checked once
/// the way the page's are: `region` for `--bars A-B`, `new_bars` for `--bars N`.
fn options(
    args: &Args,
    loaded: &crate::models::Loaded,
    region: Option<[usize; 2]>,
    new_bars: Option<usize>,
) -> Result<Options, String> {
    // --temperature is the temperature of the task the model does: the piano's for an
    // accompaniment, the continuation's (else the model's own, chosen on validation by
    // `eval --plan`) for a continuation.
    let continuation = loaded.model.config.task == Task::Continuation;
    let options = Options {
        seed: args.seed,
        threshold: args.threshold,
        piano_temperature: args.temperature.filter(|_| !continuation),
        hold_temperature: args.hold_temperature,
        region,
        temperature: if continuation {
            args.temperature.or(loaded.temperature)
        } else {
            None
        },
        top_p: args.top_p,
        echo: args.echo,
        density: args.density,
        key: args.key,
        tokens: args.tokens,
        // The page's length in bars unless only a number of tokens is asked.
        bars: new_bars.or(if args.tokens.is_some() {
            None
        } else {
            Options::default().bars
        }),
        may_end: args.may_end,
        max_prompt_tokens: args
            .prompt_tokens
            .unwrap_or(Options::default().max_prompt_tokens),
        context: context(args, loaded)?,
        dynamics: crate::models::dynamics(&args.dynamics, args.manifest.as_deref())?
            .map(std::rc::Rc::new),
        ..Options::default()
    };
    options.check().map_err(|bad| {
        // Each setting's flag is written beside its range (www/options.json).
        let flag = match bad.field {
            "region" => "--bars",
            key => limits::limit(key).flag.as_str(),
        };
        format!("{flag}: {bad}")
    })?;
    Ok(options)
}

/// `--bars A-B`: the prompt file as the page holds it, its bars `region` rewritten the way the
/// page's "Regenerate these bars" does it (`pianoformer::studio`), written back as MIDI.
fn regenerate(
    args: &Args,
    task: Task,
    region: [usize; 2],
    bytes: &[u8],
    loaded: &crate::models::Loaded,
    device: &burn::tensor::Device,
) -> Result<(), String> {
    let started = Instant::now();
    let name = args
        .prompt
        .file_name()
        .map_or_else(|| "prompt.mid".into(), |n| n.to_string_lossy().to_string());
    let mut piece =
        Piece::from_midi(bytes, &name).map_err(|e| format!("{}: {e}", args.prompt.display()))?;
    if let Some(text) = &args.chords {
        let chords = parse_chords(text)?;
        for (cell, chord) in piece.chords.iter_mut().zip(&chords) {
            *cell = chord_cell(chord);
        }
    }
    if let Some(text) = &args.phrases {
        piece.phrases = parse_phrase_labels(text)?
            .into_iter()
            .map(|s| (s.letter, s.bars))
            .collect();
        piece.refresh();
    }
    let options = options(args, loaded, Some(region), None)?;
    let model = &loaded.model;
    let out = match task {
        Task::Harmonization => return Err(HARMONIZER_WRITES_NO_MUSIC.into()),
        Task::Accompaniment => pollster::block_on(accompany_piece(
            model,
            loaded.binarize,
            loaded.piano_sampling(),
            &piece,
            &options,
            device,
            |_| async { true },
        )),
        Task::Continuation => {
            pollster::block_on(continue_piece(model, &piece, &options, device, |_| async {
                true
            }))
        }
    }
    .map_err(|e| format!("--bars {}: {e}", args.bars.as_deref().unwrap_or("")))?;
    let midi = out.to_midi().map_err(|e| e.to_string())?;
    write(&args.out, &midi)?;
    let [from, to] = region;
    let to = to.min(out.bars.len());
    let (start, end) = (out.bar_tick(from), out.bar_tick(to));
    let written = out
        .tracks
        .iter()
        .filter(|t| t.role == TrackRole::Generated)
        .flat_map(|t| &t.notes)
        .filter(|n| n.1 >= start && n.1 < end)
        .count();
    eprintln!(
        "bars {}-{to} rewritten by {} in {:.1} s: {written} notes there, the rest of the piece \
         kept; written to {}",
        from + 1,
        loaded.source,
        started.elapsed().as_secs_f64(),
        args.out.display()
    );
    Ok(())
}

/// What a generation from a file works with.
#[derive(Clone, Copy)]
struct Run<'a> {
    args: &'a Args,
    song: &'a pianoformer::music::midi::Song,
    loaded: &'a crate::models::Loaded,
    options: &'a Options,
    device: &'a burn::tensor::Device,
    started: Instant,
}

/// `generate --task accompaniment`: the melody's piano, under the given or detected lanes (the
/// harmonizer's chords for a melody alone), written as a MIDI file.
fn accompany(run: &Run) -> Result<(), String> {
    let Run {
        args,
        song,
        loaded,
        options,
        device,
        started,
    } = *run;
    let (model, device) = (&loaded.model, device.clone());
    let chords = args.chords.as_deref().map(parse_chords).transpose()?;
    let phrases = args
        .phrases
        .as_deref()
        .map(parse_phrase_labels)
        .transpose()?;
    let mut input = accompaniment_input(song, chords.as_deref(), phrases)
        .map_err(|e| format!("{}: {e}", args.prompt.display()))?;
    let harmonizer = if chords.is_none() && !has_accompaniment(song, &input) {
        crate::models::harmonizer(&args.harmonizer, None, &device)?
    } else {
        None
    };
    if let Some((harmonizer, decode)) = harmonizer {
        pollster::block_on(harmonize_input(
            &harmonizer.model,
            &decode,
            &mut input,
            Choice::Best,
            options.seed,
        ))
        .map_err(|e| e.to_string())?;
        eprintln!(
            "chords: {} — {}",
            ChordSource::Harmonizer.describe(),
            harmonizer.source
        );
    }
    let mut piano = pollster::block_on(accompany_song(
        model,
        &input,
        options.binarize(loaded.binarize),
        options.piano_sampling(loaded.piano_sampling()),
        &device,
    ))
    .map_err(|e| e.to_string())?;
    if let Some(dynamics) = &options.dynamics {
        let ctx = Context::new(
            &input.sheet.grid,
            &input.sheet.labels,
            &input.sheet.rolls.melody,
        );
        dynamics.apply(
            &ctx,
            &mut piano,
            0..input.sheet.grid.num_steps(),
            options.seed,
        );
    }
    let out = with_piano(song, &input, &piano);
    write(&args.out, &write_midi(&out))?;
    let notes = out.tracks.last().map_or(0, |t| t.notes.len());
    let ratio = chord_tone_ratio(&piano, &input.chords, input.sheet.grid.steps_per_beat);
    eprintln!(
        "{} bars accompanied by {} in {:.2} s: {notes} piano notes{}; written to {}",
        input.sheet.grid.num_bars(),
        loaded.source,
        started.elapsed().as_secs_f64(),
        ratio.map_or(String::new(), |r| format!(
            ", {:.0} % of them chord tones",
            100.0 * r
        )),
        args.out.display()
    );
    Ok(())
}

/// `generate --task continuation`: new bars after the prompt, under the planned chords and
/// the phrase lane, written as a MIDI file.
fn continue_song(run: &Run) -> Result<(), String> {
    let Run {
        args,
        song,
        loaded,
        options,
        device,
        started,
    } = *run;
    let (model, device) = (&loaded.model, device.clone());
    // --chords over the prompt's bars replace the detected ones; those past its end
    // plan the new bars.
    let cells = args.chords.as_deref().map(parse_chords).transpose()?;
    let mut prompt = prompt_tokens_with(song, cells.as_deref()).map_err(|e| e.to_string())?;
    let song_bars = prompt.iter().filter(|&&id| id == Token::Bar.id()).count();
    let plan: Vec<Vec<Option<Chord>>> = cells
        .map(|c| c.into_iter().skip(song_bars).collect())
        .unwrap_or_default();
    // The phrase lane (given, else detected), over the prompt and past it: what a
    // model with F-StrIPE reads.
    let segments = match args.phrases.as_deref() {
        Some(text) => parse_phrase_labels(text)?,
        None => detect_structure(song, &Grid::for_song(song, STEPS_PER_BEAT)).phrases,
    };
    let lane = bar_phrases(&segments);
    let mut first_bar = 0;
    if args.prompt_tokens.is_some() {
        (prompt, first_bar) = cut_prompt(&prompt, options.max_prompt_tokens);
    }
    let added = pollster::block_on(continue_tokens(
        model,
        &prompt,
        options.length(),
        options.sampling(),
        &plan,
        lane.get(first_bar..).unwrap_or(&[]),
        None,
        &device,
        |_| async { true },
    ))
    .map_err(|e| e.to_string())?;
    let mut all = prompt.clone();
    all.extend_from_slice(&added);
    let out = song_from_tokens(&all).map_err(|e| e.to_string())?;
    write(&args.out, &write_midi(&out))?;
    let secs = started.elapsed().as_secs_f64();
    let new_bars = added.iter().filter(|&&id| id == Token::Bar.id()).count();
    if let Some(asked) = options.bars
        && added.len() >= options.token_limit()
    {
        eprintln!(
            "stopped at the safety limit of {} tokens after {} of the {asked} bars asked \
             (--tokens raises it)",
            options.token_limit(),
            new_bars.saturating_sub(1),
        );
    }
    eprintln!(
        "{} prompt tokens, {} new tokens ({new_bars} new bars) by {} in {:.2} s ({:.2} ms a \
         token), up to position {}; written to {}",
        prompt.len(),
        added.len(),
        loaded.source,
        secs,
        1e3 * secs / added.len().max(1) as f64,
        all.len(),
        args.out.display()
    );
    Ok(())
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
