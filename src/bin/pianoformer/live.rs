//! `pianoformer eval --task accompaniment --live`: the live accompaniment on held-out songs
//! (`pianoformer::eval::live`). Each song's melody is played in exactly in time, the piano
//! deciding each sixteenth before the note played at it is heard, with the chord lane planned
//! (the annotated chords and phrases) or open (phrases detected from the melody, chords decided
//! live by the causal harmonizer); the same model offline beside it (each step hearing its
//! melody; the open lane filled by the whole-melody harmonizer, as a dropped file gets it).
//! Chord tones against the annotated chords and density against the pianist, into live.json.

use std::time::Instant;

use pianoformer::eval::harmony::{HarmonySong, with_chords};
use pianoformer::eval::live::{Played, live_take, offline_take, score, take_span};
use pianoformer::generate::harmonize::{Choice, chord_log_probs, progression};
use pianoformer::generate::live::LiveChords;
use pianoformer::model::config::Task;

use crate::eval::Args;

/// The cases, in the order printed.
const CASES: [&str; 4] = [
    "planned lanes, live",
    "planned lanes, offline",
    "open lanes, live (causal harmonizer)",
    "open lanes, offline (whole-melody harmonizer)",
];

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
    let acc = crate::models::load(&spec, task, None, &device)?;
    if !acc.model.config.is_autoregressive() {
        return Err(format!(
            "{spec} writes the whole accompaniment at once: live playing needs a step-by-step model"
        ));
    }
    let causal = crate::models::load(&args.harmonizer, Task::Harmonization, None, &device)?;
    if !causal.model.config.is_causal() {
        return Err(format!(
            "--harmonizer {}: live chords need a causal harmonizer (one that reads only up to \
             the current beat)",
            args.harmonizer
        ));
    }
    let whole = crate::models::load("default", Task::Harmonization, None, &device)?;
    let causal_decode = causal.harmony.unwrap_or_default();
    let whole_decode = whole.harmony.unwrap_or_default();
    let started = Instant::now();
    let data = args.load_split(test)?;
    let corpus = if test { &data.test } else { &data.valid };
    let mut sampling = acc.piano_sampling();
    sampling.seed = args.seed;
    let lag = acc.model.config.conditioning.map_or(0, |c| c.melody_lag);
    let chords = LiveChords {
        late_changes: args.live_late_changes,
        ..LiveChords::new(&causal.model, &causal_decode)
    };
    let mut songs = Vec::new();
    for piece in corpus.pieces.iter().filter(|p| p.has_harmony()) {
        let fail = |e: pianoformer::generate::GenerateError| format!("{}: {e}", piece.name);
        let harmony = HarmonySong::new(piece);
        let span = take_span(piece);
        let (planned_live, _) = pollster::block_on(live_take(
            &acc.model,
            None,
            piece,
            &piece.labels,
            true,
            sampling,
            &device,
        ))
        .map_err(fail)?;
        let planned_offline = pollster::block_on(offline_take(
            &acc.model,
            piece,
            &piece.labels,
            sampling,
            &device,
        ))
        .map_err(fail)?;
        let (open_live, live_chords) = pollster::block_on(live_take(
            &acc.model,
            Some(chords),
            piece,
            &harmony.detected_labels,
            false,
            sampling,
            &device,
        ))
        .map_err(fail)?;
        let lp = pollster::block_on(chord_log_probs(
            &whole.model,
            &harmony.melody,
            &harmony.bridge,
            &harmony.detected_labels,
            args.seed,
        ))
        .map_err(fail)?;
        let file_chords = progression(
            &lp,
            &harmony.places,
            &whole_decode,
            0..usize::MAX,
            None,
            Choice::Best,
        );
        let file_lanes = with_chords(&harmony.detected_labels, &file_chords);
        let open_offline = pollster::block_on(offline_take(
            &acc.model,
            piece,
            &file_lanes,
            sampling,
            &device,
        ))
        .map_err(fail)?;
        let played: Vec<Played> = vec![
            score(piece, &planned_live, span.clone()),
            score(piece, &planned_offline, piece.range.clone()),
            score(piece, &open_live, span.clone()),
            score(piece, &open_offline, piece.range.clone()),
        ];
        // How often the live chords' root is the annotated one, per annotated beat.
        let spb = piece.labels.steps_per_beat.max(1);
        let annotated = piece.labels.slice(span.clone()).beat_chords();
        let pairs: Vec<_> = annotated
            .iter()
            .zip(&live_chords)
            .filter_map(|(a, l)| a.map(|a| (a, *l)))
            .collect();
        let root = (!pairs.is_empty()).then(|| {
            pairs
                .iter()
                .filter(|(a, l)| l.is_some_and(|l| l.root == a.root))
                .count() as f64
                / pairs.len() as f64
        });
        eprintln!(
            "{}: {} beats; chord tones {} / {} / {} / {}; density {} / {} / {} / {}; live root \
             {} ({:.0} s)",
            piece.name,
            span.len() / spb,
            num(played[0].chord_tones),
            num(played[1].chord_tones),
            num(played[2].chord_tones),
            num(played[3].chord_tones),
            num(played[0].density),
            num(played[1].density),
            num(played[2].density),
            num(played[3].density),
            num(root),
            started.elapsed().as_secs_f64()
        );
        songs.push(serde_json::json!({
            "song": piece.name,
            "played": CASES.iter().zip(&played).map(|(c, p)| serde_json::json!({"case": c, "chord_tones": p.chord_tones, "density": p.density})).collect::<Vec<_>>(),
            "live_root": root,
        }));
    }
    if songs.is_empty() {
        return Err("no song of the split has annotated chords and a melody".into());
    }
    let column = |i: usize, what: &str| mean(songs.iter().map(|s| s["played"][i][what].as_f64()));
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
    crate::eval::write_scores(&out, &result)
}

fn num(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.3}"))
}
