//! `pianoformer bench map`: what redrawing the attention map costs against a generation, as the
//! page pays it when the layer or head changes or the notes are edited: the shipped default
//! accompaniment and continuation models (the task's defaults, or `--model` for the
//! accompaniment) write a fixture song's piece with the map watched, then the map of the
//! piece written is drawn again by one teacher-forced pass (`studio::accompaniment_attention`,
//! `studio::continuation_attention`). Each length in `--positions` (bars, default 16 and 64)
//! runs once to warm up and once timed; the ratio of the two times is the figure. This is the
//! first map over new notes (no features kept); another head over the same notes reads the
//! features the page's session keeps (`generate::MapFeatures`), measured in the page by
//! `node tools/bench-map.mjs` (issue 54: at most 1/10).

use std::time::Instant;

use burn::tensor::Device;
use pianoformer::generate::GenerateError;
use pollster::block_on;

use pianoformer::device::{self, Preference};
use pianoformer::model::config::Task;
use pianoformer::music::fixtures;
use pianoformer::music::piece::Piece;
use pianoformer::studio::{
    Options as StudioOptions, WatchOptions, accompaniment_attention, accompany_piece,
    continuation_attention, continue_piece,
};

use super::Options;

/// Runs `once` (a generation, then the map of what it wrote: ms each) twice, the first to warm
/// up; the second's times.
fn twice(mut once: impl FnMut() -> Result<(f64, f64), String>) -> Result<(f64, f64), String> {
    once()?;
    once()
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

pub fn map(options: &Options) -> Result<(), String> {
    let preference: Preference = options.backend.parse().map_err(|e| format!("{e}"))?;
    let backend = pollster::block_on(device::init(preference)).map_err(|e| format!("{e}"))?;
    let device = backend.device.clone();
    let acc = crate::models::load(&options.model, Task::Accompaniment, None, &device)?;
    let cont = crate::models::load("default", Task::Continuation, None, &device)?;
    let studio = StudioOptions {
        watch: Some(WatchOptions { layer: 0, head: 0 }),
        ..StudioOptions::default()
    };
    // A continuation of 8 bars after the piece, its map over the whole piece written.
    let cont_options = StudioOptions {
        temperature: cont.temperature,
        context: cont.trained_window,
        bars: Some(8),
        ..studio.clone()
    };
    let name = |source: &str| {
        source
            .split_whitespace()
            .next()
            .unwrap_or("default")
            .to_string()
    };
    println!(
        "the attention map redrawn (one teacher-forced pass) against the generation that drew \
         it, on {}",
        backend.info.label()
    );
    println!("| model | bars | generation ms | map ms | map / generation |");
    println!("|---|---|---|---|---|");
    let mut worst: f64 = 0.0;
    for &bars in &options.positions {
        let piece = Piece::from_song(&fixtures::song(0, bars as u64), "bench.mid")
            .map_err(|e| e.to_string())?;
        let accompaniment = twice(|| accompaniment_times(&acc, &piece, &studio, &device))?;
        let continuation = twice(|| continuation_times(&cont, &piece, &cont_options, &device))?;
        for (what, (generation, redraw)) in [
            (
                format!("accompaniment ({})", name(&acc.source)),
                accompaniment,
            ),
            (
                format!("continuation ({}), 8 new bars", name(&cont.source)),
                continuation,
            ),
        ] {
            worst = worst.max(redraw / generation);
            println!(
                "| {what} | {bars} | {generation:.1} | {redraw:.1} | {:.3} |",
                redraw / generation
            );
        }
    }
    println!("largest ratio {worst:.3} (target: at most 0.1)");
    Ok(())
}

/// `generate` (a piece), then `map` over what it wrote: ms each.
fn timed(
    generate: impl FnOnce() -> Result<Piece, GenerateError>,
    map: impl FnOnce(&Piece) -> Result<usize, GenerateError>,
) -> Result<(f64, f64), String> {
    let started = Instant::now();
    let out = generate().map_err(|e| e.to_string())?;
    let generation = ms(started);
    let started = Instant::now();
    map(&out).map_err(|e| e.to_string())?;
    Ok((generation, ms(started)))
}

/// An accompaniment of `piece`, then the map of what it wrote: ms each.
fn accompaniment_times(
    acc: &crate::models::Loaded,
    piece: &Piece,
    options: &StudioOptions,
    device: &Device,
) -> Result<(f64, f64), String> {
    let done = |_| async { true };
    timed(
        || {
            block_on(accompany_piece(
                &acc.model,
                acc.binarize,
                acc.piano_sampling(),
                piece,
                options,
                device,
                done,
            ))
        },
        |out| {
            block_on(accompaniment_attention(
                &acc.model, out, options, device, None, done,
            ))
        },
    )
}

/// A continuation after `piece`, then the map of the whole piece written: ms each.
fn continuation_times(
    cont: &crate::models::Loaded,
    piece: &Piece,
    options: &StudioOptions,
    device: &Device,
) -> Result<(f64, f64), String> {
    let done = |_| async { true };
    timed(
        || block_on(continue_piece(&cont.model, piece, options, device, done)),
        |out| {
            block_on(continuation_attention(
                &cont.model,
                out,
                options,
                device,
                None,
                done,
            ))
        },
    )
}
