//! `pianoformer eval --task accompaniment --alternatives K`: K accompaniments of every held-out
//! song (`pianoformer::eval::panel::alternatives_result`), written together as the page's
//! Generate writes them with Alternatives K (seeds SEED … SEED + K − 1, the annotated chords and
//! phrases in the lanes, the model's own sampling). Issue 55 asks each alternative to keep the
//! single generation's quality (chord tones ≥ 0.87, density 0.8–1.25× the pianist's) while the
//! alternatives differ (mean pairwise onset F1 ≤ 0.6). Into alternatives.json.

use std::time::Instant;

use pianoformer::eval::panel::{AlternativesResult, alternatives_result};
use pianoformer::generate::{PianoSampling, limits};
use pianoformer::model::config::Task;

use super::Args;

pub fn run(args: Args) -> Result<(), String> {
    let task: Task = args.task.parse()?;
    if task != Task::Accompaniment {
        return Err("--alternatives is for accompaniment models".into());
    }
    let k = args.alternatives.unwrap_or(1);
    limits::limit("alternatives")
        .check(k as f64)
        .map_err(|m| format!("--alternatives {k}: {m}"))?;
    let test = args.test_split()?;
    let spec = args.model.display().to_string();
    let out = args.scores_path("alternatives.json")?;
    let device = args.pop909_device("the alternatives panel accompanies its annotated songs")?;
    let loaded = crate::models::load(&spec, task, None, &device)?;
    if !loaded.model.config.is_autoregressive() {
        return Err(format!(
            "{spec} writes the whole accompaniment at once: its alternatives differ only in its \
             noise; --alternatives is for step-by-step models"
        ));
    }
    let started = Instant::now();
    let data = args.load_split(test)?;
    let corpus = if test { &data.test } else { &data.valid };
    let base = loaded.defaults.piano_sampling();
    let samplings: Vec<PianoSampling> = (0..k as u64)
        .map(|i| PianoSampling {
            seed: args.seed + i,
            ..base
        })
        .collect();
    let pieces: Vec<_> = corpus.pieces.iter().filter(|p| p.has_harmony()).collect();
    let songs = super::panel::par_map(&pieces, args.threads(), &loaded.model, |m, p| {
        let r = pollster::block_on(alternatives_result(m, p, &samplings, &device))
            .map_err(|e| format!("{}: {e}", p.name))?;
        eprintln!(
            "{}: chord tones {}; density {}; pairwise onset F1 {:.2} ({:.0} s)",
            p.name,
            list(&r.chord_tones),
            list(&r.density),
            r.pairwise_f1,
            started.elapsed().as_secs_f64()
        );
        Ok(r)
    })?;
    let summary = summary(&songs, k);
    print_summary(&summary, &songs, test, &loaded.source, base, args.seed);
    let result = serde_json::json!({
        "task": "accompaniment",
        "alternatives": k,
        "model": loaded.source,
        "temperature": base.temperature,
        "hold_temperature": base.hold_temperature,
        "seed": args.seed,
        "data": data.description,
        "split": if test { "test" } else { "valid" },
        "summary": summary,
        "songs": songs,
        "seconds": started.elapsed().as_secs_f64(),
    });
    super::write_scores(&out, &result)
}

/// The summary's lines on standard output.
fn print_summary(
    summary: &Summary,
    songs: &[AlternativesResult],
    test: bool,
    source: &str,
    base: PianoSampling,
    seed: u64,
) {
    let k = summary.chord_tones.len();
    println!(
        "{} songs ({}), {k} alternatives of {} (temperature {}, hold {}, seeds {}–{}):",
        songs.len(),
        if test { "test" } else { "validation" },
        source,
        base.temperature,
        base.hold_temperature,
        seed,
        seed + k as u64 - 1
    );
    println!(
        "  chord tones per alternative {} (lowest {:.3}; the pianist {:.3})",
        list(&summary.chord_tones),
        summary.lowest_chord_tones,
        summary.real_chord_tones
    );
    println!(
        "  density per alternative {} x the pianist's (range {:.2}–{:.2})",
        list(&summary.density),
        summary.density_range[0],
        summary.density_range[1]
    );
    println!(
        "  alternatives alike: mean pairwise onset F1 {:.3} (1: the same notes)",
        summary.pairwise_f1
    );
}

/// The panel's means over songs, per alternative.
#[derive(serde::Serialize)]
struct Summary {
    chord_tones: Vec<Option<f64>>,
    lowest_chord_tones: f64,
    real_chord_tones: f64,
    density: Vec<Option<f64>>,
    density_range: [f64; 2],
    pairwise_f1: f64,
}

fn mean(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let v: Vec<f64> = values.flatten().collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn summary(songs: &[AlternativesResult], k: usize) -> Summary {
    let chord_tones: Vec<Option<f64>> = (0..k)
        .map(|i| mean(songs.iter().map(|s| s.chord_tones[i])))
        .collect();
    let density: Vec<Option<f64>> = (0..k)
        .map(|i| mean(songs.iter().map(|s| s.density[i])))
        .collect();
    let flat = |v: &[Option<f64>]| v.iter().flatten().copied().collect::<Vec<f64>>();
    let d = flat(&density);
    Summary {
        lowest_chord_tones: flat(&chord_tones).into_iter().fold(f64::NAN, f64::min),
        real_chord_tones: mean(songs.iter().map(|s| s.real_chord_tones)).unwrap_or(f64::NAN),
        density_range: [
            d.iter().copied().fold(f64::NAN, f64::min),
            d.iter().copied().fold(f64::NAN, f64::max),
        ],
        pairwise_f1: mean(songs.iter().map(|s| Some(s.pairwise_f1))).unwrap_or(f64::NAN),
        chord_tones,
        density,
    }
}

/// Figures as "0.89 / 0.88 / …" ("–" for none).
fn list(values: &[Option<f64>]) -> String {
    values
        .iter()
        .map(|v| v.map_or_else(|| "–".into(), |v| format!("{v:.3}")))
        .collect::<Vec<_>>()
        .join(" / ")
}
