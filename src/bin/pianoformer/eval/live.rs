//! `pianoformer eval --task accompaniment --live`: the live accompaniment on held-out songs
//! (`pianoformer::eval::live`). Each song's melody is played in exactly in time, the piano
//! deciding each sixteenth before the note played at it is heard, with the chord lane planned
//! (the annotated chords and phrases) or open (phrases detected from the melody, chords decided
//! live by the causal harmonizer); the same model offline beside it (each step hearing its
//! melody; the open lane filled by the whole-melody harmonizer, as a dropped file gets it).
//! Chord tones against the annotated chords and density against the pianist, into live.json.

use std::time::Instant;

use pianoformer::eval::live::{CASES, LivePanel, LiveSong};
use pianoformer::generate::live::LiveChords;
use pianoformer::model::config::Task;

use super::Args;
use crate::models::Loaded;

fn mean(values: impl Iterator<Item = Option<f64>>) -> (f64, usize) {
    let v: Vec<f64> = values.flatten().collect();
    (v.iter().sum::<f64>() / v.len().max(1) as f64, v.len())
}

pub fn run(args: Args) -> Result<(), String> {
    let task: Task = args.task.parse()?;
    if task != Task::Accompaniment {
        return Err("--live is for accompaniment models".into());
    }
    let test = args.test_split()?;
    let spec = args.model.display().to_string();
    let out = args.scores_path("live.json")?;
    let device = args.pop909_device("the live panel plays its annotated songs")?;
    let (acc, causal, whole) = models(&args, &spec, &device)?;
    let causal_decode = causal.defaults.harmony();
    let whole_decode = whole.defaults.harmony();
    let started = Instant::now();
    let data = args.load_split(test)?;
    let corpus = if test { &data.test } else { &data.valid };
    let mut sampling = acc.defaults.piano_sampling();
    sampling.seed = args.seed;
    let lag = acc.model.config.conditioning.map_or(0, |c| c.melody_lag);
    let panel = LivePanel {
        accompanist: &acc.model,
        sampling,
        chords: LiveChords {
            late_changes: args.live_late_changes,
            ..LiveChords::new(&causal.model, &causal_decode)
        },
        whole: &whole.model,
        whole_decode: &whole_decode,
        seed: args.seed,
    };
    let mut songs = Vec::new();
    for piece in corpus.pieces.iter().filter(|p| p.has_harmony()) {
        let song = pollster::block_on(panel.song(piece, &device))
            .map_err(|e| format!("{}: {e}", piece.name))?;
        eprintln!(
            "{}: {} ({:.0} s)",
            piece.name,
            song_line(&song),
            started.elapsed().as_secs_f64()
        );
        songs.push(serde_json::json!({
            "song": piece.name,
            "played": CASES.iter().zip(&song.played).map(|(c, p)| serde_json::json!({"case": c, "chord_tones": p.chord_tones, "density": p.density})).collect::<Vec<_>>(),
            "live_root": song.live_root,
        }));
    }
    println!(
        "{} songs ({}), {} (reads the melody {lag} step{} late), {}; chords decided live by {}",
        songs.len(),
        if test { "test" } else { "validation" },
        acc.source,
        if lag == 1 { "" } else { "s" },
        format_args!(
            "temperature {}, hold {}",
            sampling.temperature, sampling.hold_temperature
        ),
        causal.source
    );
    let (summary, root) = print_table(&songs)?;
    let result = serde_json::json!({
        "task": "accompaniment",
        "live": true,
        "model": acc.source,
        "melody_lag": lag,
        "harmonizer": causal.source,
        "late_changes": args.live_late_changes,
        "file_harmonizer": whole.source,
        "temperature": sampling.temperature,
        "hold_temperature": sampling.hold_temperature,
        "seed": args.seed,
        "data": data.description,
        "split": if test { "test" } else { "valid" },
        "summary": summary,
        "live_root": root,
        "songs": songs,
        "seconds": started.elapsed().as_secs_f64(),
    });
    super::write_scores(&out, &result)
}

/// The step-by-step accompanist `spec`, the causal harmonizer that decides chords live and the
/// whole-melody one a file gets, each checked for its part.
fn models(
    args: &Args,
    spec: &str,
    device: &burn::tensor::Device,
) -> Result<(Loaded, Loaded, Loaded), String> {
    let task = Task::Accompaniment;
    let acc = crate::models::load(spec, task, None, device)?;
    if !acc.model.config.is_autoregressive() {
        return Err(format!(
            "{spec} writes the whole accompaniment at once: live playing needs a step-by-step model"
        ));
    }
    let causal = crate::models::load(&args.harmonizer, Task::Harmonization, None, device)?;
    if !causal.model.config.is_causal() {
        return Err(format!(
            "--harmonizer {}: live chords need a causal harmonizer (one that reads only up to \
             the current beat)",
            args.harmonizer
        ));
    }
    let whole = crate::models::load("default", Task::Harmonization, None, device)?;
    Ok((acc, causal, whole))
}

/// A song's figures on one line: beats, chord tones and density per case, the live root.
fn song_line(song: &LiveSong) -> String {
    let p = &song.played;
    format!(
        "{} beats; chord tones {} / {} / {} / {}; density {} / {} / {} / {}; live root {}",
        song.beats,
        num(p[0].chord_tones),
        num(p[1].chord_tones),
        num(p[2].chord_tones),
        num(p[3].chord_tones),
        num(p[0].density),
        num(p[1].density),
        num(p[2].density),
        num(p[3].density),
        num(song.live_root),
    )
}

/// The table of means over songs, per case; returns the summary rows and the live root.
fn print_table(songs: &[serde_json::Value]) -> Result<(Vec<serde_json::Value>, f64), String> {
    if songs.is_empty() {
        return Err("no song of the split has annotated chords and a melody".into());
    }
    let column = |i: usize, what: &str| mean(songs.iter().map(|s| s["played"][i][what].as_f64()));
    println!("| lanes | piano | chord tones (annotated chords) | density (the pianist's) |");
    println!("|---|---|---|---|");
    let mut summary = Vec::new();
    for (i, case) in CASES.iter().enumerate() {
        let (tones, n) = column(i, "chord_tones");
        let (density, m) = column(i, "density");
        let (lanes, piano) = case.split_once(", ").unwrap_or((case, ""));
        println!("| {lanes} | {piano} | {tones:.3} ({n} songs) | {density:.2}x ({m} songs) |");
        summary.push(serde_json::json!({"case": case, "chord_tones": tones, "density": density}));
    }
    let (root, n) = mean(songs.iter().map(|s| s["live_root"].as_f64()));
    println!(
        "chords decided live: root of the annotated chord on {root:.3} of its beats ({n} songs)"
    );
    Ok((summary, root))
}

fn num(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.3}"))
}
