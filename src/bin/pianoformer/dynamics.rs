//! `pianoformer dynamics`: fits the velocity model (`music::dynamics`) on the POP909 training
//! songs' pianists, chooses how much of their unexplained spread to draw on the validation
//! songs, scores it on the test songs against the pianists (and against one velocity for every
//! note, as the models wrote before), and ships it beside the models with its figures.

use std::path::{Path, PathBuf};

use pianoformer::data::corpus::Piece;
use pianoformer::data::sources::{self, Parts};
use pianoformer::eval::panel::sample_with_lanes;
use pianoformer::model::config::Task;
use pianoformer::models::{DynamicsEntry, Manifest};
use pianoformer::music::dynamics::{Context, Dynamics, Fit, Measure, Onset, PLACES, onsets};
use pianoformer::music::roll::GENERATED_VELOCITY;
use pianoformer::music::roll::{PITCHES, PianoRoll};
use serde_json::{Value, json};

#[derive(clap::Args)]
pub struct Args {
    /// POP909's folder (its train, validation and test songs).
    #[arg(long)]
    pub data: PathBuf,
    /// Where the fitted model goes.
    #[arg(long, default_value = "www/models/dynamics.json")]
    pub out: PathBuf,
    /// The manifest whose `dynamics` entry describes it (file, checksum, data, figures); `none`
    /// leaves every manifest alone.
    #[arg(long, default_value = "www/models/manifest.json")]
    pub manifest: String,
    /// Ridge on every weight but the bias.
    #[arg(long, default_value_t = 1.0)]
    pub lambda: f64,
    /// Shares of the residual spread tried on the validation songs.
    #[arg(long, value_delimiter = ',', default_value = "0,0.25,0.5,0.75,1,1.25")]
    pub noises: Vec<f64>,
    /// Also score the dynamics of the piano an accompaniment model writes for each test song's
    /// annotated span (its lanes the annotations): a shipped model's name, a training run's
    /// folder, `default`, or `none` to skip.
    #[arg(long, default_value = "default")]
    pub accompaniment: String,
}

/// A song's figures: the pianist's part, and the same onsets at the model's velocities.
struct Song {
    pianist: Measure,
    model: Measure,
    flat: Measure,
}

fn played(piece: &Piece) -> Vec<(Onset, u8)> {
    onsets(&piece.sheet.rolls.piano)
        .into_iter()
        .map(|o| (o, o.velocity))
        .collect()
}

fn score(model: &Dynamics, pieces: &[Piece]) -> Vec<Song> {
    pieces
        .iter()
        .enumerate()
        .filter(|(_, p)| p.has_accompaniment())
        .map(|(i, p)| {
            let ctx = Context::new(&p.sheet.grid, &p.sheet.labels, &p.sheet.rolls.melody);
            let pianist = played(p);
            let ours = model.velocities(
                &ctx,
                &p.sheet.rolls.piano,
                0..p.sheet.grid.num_steps(),
                i as u64,
            );
            let flat: Vec<(Onset, u8)> = pianist
                .iter()
                .map(|&(o, _)| (o, GENERATED_VELOCITY))
                .collect();
            Song {
                pianist: ctx.measure(&pianist),
                model: ctx.measure(&ours),
                flat: ctx.measure(&flat),
            }
        })
        .filter(|s| s.pianist.onsets > 0)
        .collect()
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 { f64::NAN } else { s / n as f64 }
}

/// The panel of one set of velocities against the pianists' over `songs`.
fn panel(songs: &[Song], of: impl Fn(&Song) -> &Measure) -> Value {
    let n = songs.len() as f64;
    let diff = |s: &Song| of(s).mean - s.pianist.mean;
    let ratio = |s: &Song| of(s).std / s.pianist.std.max(1e-9);
    let corr: Vec<f64> = songs.iter().filter_map(|s| of(s).melody_corr).collect();
    let accents: Vec<Value> = (0..PLACES.len())
        .map(|k| json!(mean(songs.iter().filter_map(|s| of(s).accents[k]))))
        .collect();
    json!({
        "songs": songs.len(),
        "mean": mean(songs.iter().map(|s| of(s).mean)),
        "mean_minus_pianist": mean(songs.iter().map(diff)),
        "mean_abs_difference": mean(songs.iter().map(|s| diff(s).abs())),
        "songs_within_6": songs.iter().filter(|s| diff(s).abs() <= 6.0).count() as f64 / n,
        "spread": mean(songs.iter().map(|s| of(s).std)),
        "spread_ratio": mean(songs.iter().map(ratio)),
        "songs_spread_0_7_to_1_3": songs.iter().filter(|s| (0.7..=1.3).contains(&ratio(s))).count() as f64 / n,
        "melody_corr": mean(corr.iter().copied()),
        "songs_melody_corr_positive": corr.iter().filter(|&&r| r > 0.0).count() as f64 / n,
        "accents": accents,
    })
}

fn line(name: &str, p: &Value) -> String {
    let f = |k: &str| p[k].as_f64().unwrap_or(f64::NAN);
    let accents: Vec<String> = p["accents"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| format!("{:+.1}", v.as_f64().unwrap_or(f64::NAN)))
                .collect()
        })
        .unwrap_or_default();
    format!(
        "{name:<22} mean {:5.1} ({:+5.1}; |Δ| {:4.1}; {:3.0} % of songs within ±6)  spread {:4.1} ({:.2}×; {:3.0} % in 0.7–1.3×)  \
         r(melody) {:+.2} ({:3.0} % > 0)  accents {}",
        f("mean"),
        f("mean_minus_pianist"),
        f("mean_abs_difference"),
        100.0 * f("songs_within_6"),
        f("spread"),
        f("spread_ratio"),
        100.0 * f("songs_spread_0_7_to_1_3"),
        f("melody_corr"),
        100.0 * f("songs_melody_corr_positive"),
        accents.join(" / ")
    )
}

fn write_manifest(
    path: &Path,
    args: &Args,
    bytes: &[u8],
    metrics: Value,
    data: &str,
) -> Result<(), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut manifest = Manifest::parse(&text).map_err(|e| e.to_string())?;
    let file = args
        .out
        .file_name()
        .map(|f| f.to_string_lossy().to_string())
        .ok_or("--out names no file")?;
    let noises: Vec<String> = args.noises.iter().map(|n| n.to_string()).collect();
    manifest.dynamics = Some(DynamicsEntry {
        name: "dynamics".into(),
        file,
        description: "Velocities for the piano the models write: least squares over 27 features of each \
                      onset (place in the bar, the melody's loudness, the phrase, the chord struck, register, \
                      length), learnt from the POP909 pianists, with part of their unexplained spread drawn"
            .into(),
        bytes: bytes.len(),
        sha256: pianoformer::model::sha256_hex(bytes),
        training: json!({
            "command": format!(
                "pianoformer dynamics --data {} --out {} --lambda {} --noises {}",
                args.data.display(), args.out.display(), args.lambda, noises.join(",")
            ),
            "data": data,
            "split": "POP909 songs with id % 10 not in {0, 5} (0: test, 5: validation)",
        }),
        metrics,
    });
    let out = serde_json::to_string_pretty(&manifest).expect("a manifest serialises") + "\n";
    std::fs::write(path, out).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

pub fn run(args: Args) -> Result<(), String> {
    let loaded = sources::load(&args.data, Parts::ALL, None)?;
    let mut model = fitted(&loaded, args.lambda)?;
    let (noise, tried) = choose_noise(&mut model, &loaded.valid.pieces, &args.noises)?;
    model.noise = noise;
    let songs = score(&model, &loaded.test.pieces);
    let ours = panel(&songs, |s| &s.model);
    let pianists = panel(&songs, |s| &s.pianist);
    let flat = panel(&songs, |s| &s.flat);
    println!(
        "Test songs ({}), the pianists' own notes at each velocity set (accents: mean velocity against the part's, at {}):",
        songs.len(),
        PLACES.join(" / ")
    );
    println!("{}", line("pianists", &pianists));
    println!("{}", line(&format!("model (noise {})", model.noise), &ours));
    println!(
        "{}",
        line(&format!("one velocity ({GENERATED_VELOCITY})"), &flat)
    );
    let generated = if args.accompaniment == "none" {
        None
    } else {
        let (songs, source) = score_generated(&model, &args.accompaniment, &loaded.test.pieces)?;
        let g = panel(&songs, |s| &s.model);
        let p = panel(&songs, |s| &s.pianist);
        println!(
            "The piano {source} wrote for the same songs (their annotated spans), at the model's velocities:"
        );
        println!("{}", line("pianists (the spans)", &p));
        println!("{}", line("written piano", &g));
        Some(json!({ "model": source, "written": g, "pianists": p }))
    };
    let bytes = serde_json::to_vec_pretty(&model).expect("the model serialises");
    std::fs::write(&args.out, &bytes)
        .map_err(|e| format!("cannot write {}: {e}", args.out.display()))?;
    println!("the model is in {}", args.out.display());
    let metrics = json!({
        "test": { "model": ours, "pianists": pianists, "one_velocity": flat },
        "test_written": generated,
        "validation": tried.iter().map(|(n, p)| json!({ "noise": n, "panel": p })).collect::<Vec<_>>(),
        "noise": model.noise,
        "residual": model.residual,
        "rule": "of the noise shares tried on validation, the one whose songs' velocity spread is nearest the pianists' (spread ratio nearest 1)",
        "places": PLACES,
    });
    if args.manifest != "none" {
        write_manifest(
            Path::new(&args.manifest),
            &args,
            &bytes,
            metrics,
            &loaded.description,
        )?;
        println!("its entry is in {}", args.manifest);
    }
    Ok(())
}

/// The velocity model fitted on the training songs' onsets (ridge `lambda`), its spread
/// around the predictions fitted too, said.
fn fitted(loaded: &sources::Loaded, lambda: f64) -> Result<Dynamics, String> {
    let mut fit = Fit::default();
    for p in loaded.train.pieces.iter().filter(|p| p.has_accompaniment()) {
        let ctx = Context::new(&p.sheet.grid, &p.sheet.labels, &p.sheet.rolls.melody);
        for (o, x) in ctx.rows(&p.sheet.rolls.piano, 0..p.sheet.grid.num_steps()) {
            fit.add(&x, f64::from(o.velocity));
        }
    }
    let mut model = fit.solve(lambda)?;
    // A song's spread around the predictions follows its melody's (an even melody, an even
    // touch): fitted on the training songs.
    let trained: Vec<&Piece> = loaded
        .train
        .pieces
        .iter()
        .filter(|p| p.has_accompaniment())
        .collect();
    let contexts: Vec<Context> = trained
        .iter()
        .map(|p| Context::new(&p.sheet.grid, &p.sheet.labels, &p.sheet.rolls.melody))
        .collect();
    model.fit_spread(
        contexts
            .iter()
            .zip(trained.iter().map(|p| &p.sheet.rolls.piano)),
    );
    if let Some([a, b]) = model.spread {
        eprintln!(
            "a song's spread around the predictions: {a:.2} + {b:.3} × its melody's velocity spread"
        );
    }
    eprintln!(
        "fitted on {} ({} onsets): residual {:.2}",
        loaded.description,
        fit_count(&loaded.train.pieces),
        model.residual
    );
    Ok(model)
}

/// How much of the pianists' unexplained spread to draw: on validation, the share whose songs
/// spread nearest the pianists' (the spread ratio nearest 1); with each share tried.
fn choose_noise(
    model: &mut Dynamics,
    valid: &[Piece],
    noises: &[f64],
) -> Result<(f64, Vec<(f64, Value)>), String> {
    // How much of the pianists' unexplained spread to draw: on validation, the share whose
    // songs spread nearest the pianists' (the spread ratio nearest 1).
    let mut tried = Vec::new();
    for &noise in noises {
        model.noise = noise;
        let songs = score(model, valid);
        let p = panel(&songs, |s| &s.model);
        eprintln!("validation, noise {noise}: {}", line("", &p));
        tried.push((noise, p));
    }
    let best = tried
        .iter()
        .min_by(|a, b| {
            let d = |p: &Value| (p["spread_ratio"].as_f64().unwrap_or(f64::INFINITY) - 1.0).abs();
            d(&a.1).total_cmp(&d(&b.1))
        })
        .ok_or("no noise to try (--noises)")?;
    Ok((best.0, tried))
}

/// The dynamics of the piano `spec` (an accompaniment model) writes for each piece's annotated
/// span with the annotations in its lanes, against the pianist's there.
fn score_generated(
    model: &Dynamics,
    spec: &str,
    pieces: &[Piece],
) -> Result<(Vec<Song>, String), String> {
    let device = pianoformer::device::cpu().device;
    let loaded = crate::models::load(spec, Task::Accompaniment, None, &device)?;
    let sampling = loaded.defaults.piano_sampling();
    let mut out = Vec::new();
    for (i, p) in pieces
        .iter()
        .enumerate()
        .filter(|(_, p)| p.has_accompaniment())
    {
        let (written, _) = pollster::block_on(sample_with_lanes(
            &loaded.model,
            p,
            &p.sheet.labels,
            sampling,
            &device,
        ))
        .map_err(|e| format!("{}: {e}", p.name))?;
        let range = p.range.clone();
        let mut full = PianoRoll::new(p.sheet.grid.num_steps());
        for t in 0..written.num_steps.min(range.len()) {
            for pitch in 0..PITCHES {
                let (on, sus) = (written.onset(t, pitch), written.sustain(t, pitch));
                if on || sus {
                    full.set(range.start + t, pitch, on, sus, 0);
                }
            }
        }
        let ctx = Context::new(&p.sheet.grid, &p.sheet.labels, &p.sheet.rolls.melody);
        let ours = model.velocities(&ctx, &full, range.clone(), i as u64);
        let pianist: Vec<(Onset, u8)> = played(p)
            .into_iter()
            .filter(|(o, _)| range.contains(&o.step))
            .collect();
        if pianist.is_empty() || ours.is_empty() {
            continue;
        }
        out.push(Song {
            pianist: ctx.measure(&pianist),
            model: ctx.measure(&ours),
            flat: Measure::default(),
        });
    }
    Ok((out, loaded.source))
}

fn fit_count(pieces: &[Piece]) -> usize {
    pieces
        .iter()
        .filter(|p| p.has_accompaniment())
        .map(|p| onsets(&p.sheet.rolls.piano).len())
        .sum()
}
