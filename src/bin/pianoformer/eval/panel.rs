//! `eval` for a step-by-step accompaniment model (`pianoformer::eval::stepwise`): the
//! temperature and the hold temperature chosen on validation excerpts, then the test panel on
//! whole songs and F-StrIPE's scores on excerpts, printed as they come.

use std::time::Instant;

use burn::tensor::Device;
use pianoformer::data::corpus::WindowSpec;
use pianoformer::data::sources::Loaded as Data;
use pianoformer::eval::excerpts;
use pianoformer::eval::stepwise::{DENSITY_RANGE, best, test_excerpts, test_songs, try_sampling};
use pianoformer::generate::PianoSampling;
use pianoformer::model::performer::Performer;
use pianoformer::music::tokens::STEPS_PER_BEAT;

use super::Args;

pub use pianoformer::eval::stepwise::par_map;

pub fn run(
    model: &Performer,
    data: &Data,
    args: &Args,
    device: &Device,
) -> Result<serde_json::Value, String> {
    let threads = args.threads();
    let started = Instant::now();
    let sampling = choose(model, data, args, threads, device, started)?;
    let (panel, results) = test_songs(model, &data.test, sampling.0, threads, device)?;
    eprintln!(
        "test songs ({}): chord tones {:.3} (real piano {:.3}); substituted chords followed \
         {:.3}, outputs changed in {:.0} %; density {:.2}x the real pianist's, sounding notes \
         {:.2}x; re-strikes {:.3} (real {:.3}, {:.2}x); ILS {:.3} (real {:.3}; without the \
         texture echo: eval --texture plays it) ({:.0} s)",
        panel.songs,
        panel.chord_tones,
        panel.real_chord_tones,
        panel.followed,
        100.0 * panel.changed_share,
        panel.density_ratio,
        panel.sounding_ratio,
        panel.restrikes,
        panel.real_restrikes,
        panel.restrike_ratio,
        panel.ils,
        panel.real_ils,
        started.elapsed().as_secs_f64()
    );
    let mut lengths = serde_json::Map::new();
    for &bars in &args.bars {
        match test_excerpts(
            model,
            &data.test,
            bars,
            args.per_song,
            sampling.0,
            threads,
            device,
        )? {
            Some(entry) => {
                eprintln!("test, {bars} bars: {entry}");
                lengths.insert(format!("{bars}"), entry);
            }
            None => eprintln!("no test song has {bars} annotated bars; skipped"),
        }
    }
    Ok(serde_json::json!({
        "task": "accompaniment",
        "decoding": "step by step, sampled",
        "temperature": sampling.0.temperature,
        "hold_temperature": sampling.0.hold_temperature,
        "settings_tried": sampling.1,
        "panel": panel,
        "songs": results,
        "test": lengths,
    }))
}

/// Every pair of `--temperatures` × `--hold-temperatures` tried on validation excerpts; the
/// best kept, with what each scored.
fn choose(
    model: &Performer,
    data: &Data,
    args: &Args,
    threads: usize,
    device: &Device,
    started: Instant,
) -> Result<(PianoSampling, Vec<serde_json::Value>), String> {
    let in_range = |ts: &[f32]| !ts.is_empty() && ts.iter().all(|&t| t > 0.0 && t <= 10.0);
    if !in_range(&args.temperatures) {
        return Err("--temperatures must be numbers above 0 and at most 10".into());
    }
    if !in_range(&args.hold_temperatures) {
        return Err("--hold-temperatures must be numbers above 0 and at most 10".into());
    }
    let spec16 = WindowSpec::for_model(&model.config, 16 * 4 * STEPS_PER_BEAT);
    let valid = excerpts(&data.valid, &spec16, 1);
    if valid.is_empty() {
        return Err("no validation song has 16 annotated bars with an accompaniment".into());
    }
    let mut tried = Vec::new();
    for &temperature in &args.temperatures {
        for &hold_temperature in &args.hold_temperatures {
            let sampling = PianoSampling {
                temperature,
                threshold: None,
                hold_temperature,
                seed: args.seed,
                density: args.density()?.unwrap_or(1.0),
            };
            let t = try_sampling(model, &valid, sampling, threads, device)?;
            let s = &t.valid;
            eprintln!(
                "validation, temperature {temperature}, hold temperature {hold_temperature}: \
                 CS {:.2}, NDD {:.2}, {:.2}x the pianist's onsets, {:.2}x the pianist's \
                 sounding notes, on {} excerpts ({:.0} s)",
                s["cs"]["mean"].as_f64().unwrap_or(0.0),
                s["ndd"]["mean"].as_f64().unwrap_or(f64::NAN),
                s["density_ratio"].as_f64().unwrap_or(f64::NAN),
                s["sounding_ratio"].as_f64().unwrap_or(f64::NAN),
                s["excerpts"],
                started.elapsed().as_secs_f64()
            );
            tried.push(t);
        }
    }
    let chosen = best(&tried).expect("at least one setting");
    if !chosen.inside() {
        eprintln!(
            "no setting tried keeps the validation onsets and sounding notes within {:?} of \
             the pianist's: the nearest is kept",
            DENSITY_RANGE
        );
    }
    let sampling = chosen.sampling;
    eprintln!(
        "temperature {}, hold temperature {} kept",
        sampling.temperature, sampling.hold_temperature
    );
    let tried = tried
        .iter()
        .map(|t| {
            serde_json::json!({
                "temperature": t.sampling.temperature,
                "hold_temperature": t.sampling.hold_temperature,
                "valid": t.valid,
            })
        })
        .collect();
    Ok((sampling, tried))
}
