//! `pianoformer eval --task accompaniment --texture --lead-sheets --data DIR`: whether the
//! accompaniment shows the form of songs that come with no labels — lead sheets (MusicXML: a
//! melody and its chord symbols, such as OpenEWLD's). Each is read as the page reads it (its
//! chord symbols the chord lane, the harmonizer's chords where it has none, its phrases
//! detected), accompanied as the page does (the model's texture echo, the settings' defaults) and
//! with the echo off, and scored by ILS against its detected phrases, with chord tones and
//! onsets a beat. There is no pianist to set beside it: the echo-off row is the comparison.

use std::path::{Path, PathBuf};
use std::time::Instant;

use pianoformer::generate::piece_input;
use pianoformer::model::config::Task;
use pianoformer::music::musicxml::read_piece;
use pianoformer::music::piece::{Piece, TrackRole};
use pianoformer::music::playing::chord_tone_ratio;
use pianoformer::music::roll::PianoRoll;
use pianoformer::music::texture::{Ils, ils, mean_ils};
use pianoformer::studio::{Common, Family, Kept, Run, TaskKind};
use serde::Serialize;

use super::{Args, name_seed};

fn ratio(ils: &Option<Ils>) -> String {
    ils.map_or("-".into(), |i| format!("{:.3}", i.ratio()))
}

/// One lead sheet, accompanied with the echo and without, scored.
#[derive(Serialize)]
struct Sheet {
    name: String,
    bars: usize,
    /// The detected phrase lane, as letters and lengths (`A8A8B8…`).
    phrases: String,
    harmonized: bool,
    /// ILS, chord tones and onsets a beat, with the echo at the model's strength and off.
    echo: Scored,
    plain: Scored,
}

#[derive(Serialize)]
struct Scored {
    ils: Option<Ils>,
    chord_tones: Option<f64>,
    onsets_a_beat: f64,
}

/// Every MusicXML file under `dir` (`.mxl`, `.musicxml`, `.xml`), in path order.
fn lead_sheets(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let out = pianoformer::data::sources::files_under(dir, &["mxl", "musicxml", "xml"])?;
    if out.is_empty() {
        return Err(format!(
            "{} holds no MusicXML lead sheets (.mxl, .musicxml, .xml)",
            dir.display()
        ));
    }
    Ok(out)
}

pub fn run(args: Args) -> Result<(), String> {
    let device = pianoformer::device::cpu().device;
    let spec = args.model.display().to_string();
    let loaded = crate::models::load(&spec, Task::Accompaniment, None, &device)?;
    if !loaded.model.config.is_autoregressive() {
        return Err(format!(
            "{spec} writes the whole accompaniment at once; the texture echo steers a \
             step-by-step model"
        ));
    }
    // --song-density: the model's echo with its density kept per song.
    let mut defaults = loaded.defaults;
    if let Some(lean) = defaults.texture_echo.as_mut() {
        lean.song_density = args.song_density.unwrap_or(lean.song_density);
    }
    let harmonizer = crate::models::harmonizer("default", None, &device)?;
    let mut paths = lead_sheets(&args.data)?;
    paths.truncate(args.limit.unwrap_or(usize::MAX));
    let started = Instant::now();
    let sheets = super::super::panel::par_map(&paths, args.threads(), &loaded.model, |m, path| {
        let name = path
            .strip_prefix(&args.data)
            .unwrap_or(path)
            .display()
            .to_string();
        let bytes = std::fs::read(path).map_err(|e| format!("{name}: {e}"))?;
        let Ok(mut piece) = read_piece(&bytes, &name) else {
            eprintln!("{name}: not read as a lead sheet; skipped");
            return Ok(None);
        };
        let harmonizer = harmonizer
            .as_ref()
            .filter(|_| crate::generate::wants_harmonizer(&piece));
        if let Some(h) = harmonizer {
            crate::generate::harmonize_lane(&mut piece, h, &Default::default())?;
        }
        // A sheet's own seed (--seed-per-song) within the seeds the page takes (32 bits).
        let own = if args.seed_per_song {
            name_seed(&name) % (1 << 31)
        } else {
            0
        };
        let seed = (Common::default().seed + (args.seed % (1 << 31)) + own) % (1 << 32);
        let run = Run {
            model: m,
            defaults: &defaults,
            device: &device,
            dynamics: None,
            pedal: None,
        };
        let play = |texture_echo: Option<f32>| {
            accompanied(&run, &piece, seed, texture_echo).map_err(|e| format!("{name}: {e}"))
        };
        let (echo, plain) = (play(None)?, play(Some(0.0))?);
        let sheet = Sheet {
            phrases: piece
                .phrases
                .iter()
                .map(|(l, n)| format!("{l}{n}"))
                .collect(),
            name,
            bars: piece.bars.len(),
            harmonized: harmonizer.is_some(),
            echo,
            plain,
        };
        eprintln!(
            "{}: {} bars, {}; ILS {} (echo off {}) ({:.0} s)",
            sheet.name,
            sheet.bars,
            sheet.phrases,
            ratio(&sheet.echo.ils),
            ratio(&sheet.plain.ils),
            started.elapsed().as_secs_f64()
        );
        Ok(Some(sheet))
    })?;
    let sheets: Vec<Sheet> = sheets.into_iter().flatten().collect();
    let result = summary(&sheets, &paths, &args, &loaded.source);
    write_out(&args, &result)
}

/// The panel into --out (default runs/lead-sheets-texture.json).
fn write_out(args: &Args, result: &serde_json::Value) -> Result<(), String> {
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("runs/lead-sheets-texture.json"));
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(result).expect("the panel serialises");
    std::fs::write(&out, text).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    println!("  into {}", out.display());
    Ok(())
}

/// The written piano of `piece` accompanied with the page's defaults (`texture_echo`: the
/// model's strength when `None`), scored against the piece's own lanes.
fn accompanied(
    run: &Run<'_>,
    piece: &Piece,
    seed: u64,
    texture_echo: Option<f32>,
) -> Result<Scored, String> {
    // The page's settings: its defaults but the seed and the echo's strength.
    let settings = serde_json::json!({ "seed": seed, "textureEcho": texture_echo });
    let out = pollster::block_on(TaskKind::Accompaniment.generate(
        run,
        piece,
        &settings,
        &mut Kept::default(),
        |_| async { true },
    ))
    .map_err(|e| e.to_string())?
    .into_pieces();
    let written = out.into_iter().next().ok_or("no piece was written")?.piece;
    let grid = written.grid(|_| true);
    let input = piece_input(&written, grid.clone(), false).map_err(|e| e.to_string())?;
    let notes: Vec<_> = written
        .tracks
        .iter()
        .filter(|t| t.role == TrackRole::Generated)
        .flat_map(|t| t.midi_notes(0))
        .collect();
    let roll = PianoRoll::from_notes(&notes, &grid);
    let spb = grid.steps_per_beat.max(1);
    Ok(Scored {
        ils: ils(&roll, &input.sheet.labels),
        chord_tones: chord_tone_ratio(&roll, &input.chords, spb),
        onsets_a_beat: notes.len() as f64 / grid.num_beats().max(1) as f64,
    })
}

/// The panel's means, printed, with every sheet.
fn summary(sheets: &[Sheet], paths: &[PathBuf], args: &Args, model: &str) -> serde_json::Value {
    let mean = |f: &dyn Fn(&Sheet) -> Option<f64>| {
        let v: Vec<f64> = sheets.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let row = |pick: fn(&Sheet) -> &Scored| {
        let (ils, n) = mean_ils(sheets.iter().map(|s| pick(s).ils));
        serde_json::json!({
            "ils": ils,
            "sheets_with_ils": n,
            "chord_tones": mean(&|s| pick(s).chord_tones),
            "onsets_a_beat": mean(&|s| Some(pick(s).onsets_a_beat)),
        })
    };
    let (echo, plain) = (row(|s| &s.echo), row(|s| &s.plain));
    // How much busier the echo plays each sheet than the model alone: quartiles and median.
    let mut busier: Vec<f64> = sheets
        .iter()
        .filter(|s| s.plain.onsets_a_beat > 0.0)
        .map(|s| s.echo.onsets_a_beat / s.plain.onsets_a_beat)
        .collect();
    busier.sort_by(f64::total_cmp);
    let quantile = |q: f64| {
        (!busier.is_empty()).then(|| busier[((busier.len() - 1) as f64 * q).round() as usize])
    };
    let over =
        |x: f64| busier.iter().filter(|&&b| b > x).count() as f64 / busier.len().max(1) as f64;
    let busier = serde_json::json!({
        "quartiles": [quantile(0.25), quantile(0.5), quantile(0.75)],
        "over_1_25": over(1.25),
        "over_2": over(2.0),
    });
    let f =
        |v: &serde_json::Value, k: &str| v[k].as_f64().map_or("-".into(), |x| format!("{x:.3}"));
    println!(
        "Lead sheets ({} read of {}; {} harmonized; {model}, seed {}{}), phrases detected:",
        sheets.len(),
        paths.len(),
        sheets.iter().filter(|s| s.harmonized).count(),
        args.seed,
        ["", " + each sheet's own"][usize::from(args.seed_per_song)]
    );
    for (name, r) in [("texture echo (the page's)", &echo), ("echo off", &plain)] {
        println!(
            "  {name:<26} ILS {} over {} sheets with a returning letter  chord tones {}  onsets a beat {}",
            f(r, "ils"),
            r["sheets_with_ils"],
            f(r, "chord_tones"),
            f(r, "onsets_a_beat"),
        );
    }
    let q = |i: usize| {
        busier["quartiles"][i]
            .as_f64()
            .map_or("-".into(), |x| format!("{x:.2}"))
    };
    println!(
        "  the echo's onsets over echo off's, a sheet: median {}x (quartiles {}x, {}x); over 1.25x on {:.0} %, over 2x on {:.0} %",
        q(1),
        q(0),
        q(2),
        100.0 * busier["over_1_25"].as_f64().unwrap_or(0.0),
        100.0 * busier["over_2"].as_f64().unwrap_or(0.0),
    );
    serde_json::json!({
        "task": "accompaniment",
        "panel": "lead sheets, texture",
        "song_density": args.song_density,
        "echo_over_plain_onsets": busier,
        "model": model,
        "data": args.data.display().to_string(),
        "seed": args.seed,
        "seed_per_song": args.seed_per_song,
        "echo": echo,
        "echo_off": plain,
        "sheets": sheets,
    })
}
