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
use pianoformer::generate::{GenerateError, MapFeatures};
use pollster::block_on;

use pianoformer::device::{self, Preference};
use pianoformer::model::config::Task;
use pianoformer::music::fixtures;
use pianoformer::music::piece::Piece;
use pianoformer::studio::{
    AccompanyOptions, Asked, Common, ContinueOptions, ModelPlay, WatchOptions,
    accompaniment_attention, accompany_piece, continuation_attention, continue_piece,
};

use super::Options;

/// Runs `once` (a generation, then the maps of what it wrote: ms each) twice, the first to
/// warm up; the second's times.
fn twice(mut once: impl FnMut() -> Result<Times, String>) -> Result<Times, String> {
    once()?;
    once()
}

/// A generation, the first map over what it wrote (one pass, its features kept), and the map
/// of another head over the same notes (from those features): ms each.
type Times = (f64, f64, f64);

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

pub fn map(options: &Options) -> Result<(), String> {
    let preference: Preference = options.backend.parse().map_err(|e| format!("{e}"))?;
    let backend = pollster::block_on(device::init(preference)).map_err(|e| format!("{e}"))?;
    let device = backend.device.clone();
    let acc = crate::models::load(&options.model, Task::Accompaniment, None, &device)?;
    let cont = crate::models::load("default", Task::Continuation, None, &device)?;
    let common = Common {
        watch: Some(WatchOptions { layer: 0, head: 0 }),
        ..Common::default()
    };
    let studio = AccompanyOptions {
        common: common.clone(),
        ..AccompanyOptions::default()
    };
    // A continuation of 8 bars after the piece, its map over the whole piece written.
    let cont_options = ContinueOptions {
        common,
        temperature: cont.defaults.temperature,
        context: cont.trained_window,
        bars: Some(8),
        ..ContinueOptions::default()
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
    println!(
        "| model | bars | generation ms | first map over new notes ms (/ generation) | another \
         head ms | another head / generation |"
    );
    println!("|---|---|---|---|---|---|");
    let mut worst: f64 = 0.0;
    for &bars in &options.positions {
        let piece = Piece::from_song(&fixtures::song(0, bars as u64), "bench.mid")
            .map_err(|e| e.to_string())?;
        let accompaniment = twice(|| accompaniment_times(&acc, &piece, &studio, &device))?;
        let continuation = twice(|| continuation_times(&cont, &piece, &cont_options, &device))?;
        for (what, (generation, first, head)) in [
            (
                format!("accompaniment ({})", name(&acc.source)),
                accompaniment,
            ),
            (
                format!("continuation ({}), 8 new bars", name(&cont.source)),
                continuation,
            ),
        ] {
            worst = worst.max(head / generation);
            println!(
                "| {what} | {bars} | {generation:.1} | {first:.1} ({:.2}) | {head:.1} | {:.3} |",
                first / generation,
                head / generation
            );
        }
    }
    println!("largest ratio of another head {worst:.3} (target: at most 0.1)");
    Ok(())
}

/// `generate` (a piece), then `map` over what it wrote with head 0 (filling the features) and
/// head 1 (from them): ms each.
fn timed(
    generate: impl FnOnce() -> Result<Piece, GenerateError>,
    mut map: impl FnMut(&Piece, usize, &mut MapFeatures) -> Result<usize, GenerateError>,
) -> Result<Times, String> {
    let started = Instant::now();
    let out = generate().map_err(|e| e.to_string())?;
    let generation = ms(started);
    let mut kept = MapFeatures::default();
    let started = Instant::now();
    map(&out, 0, &mut kept).map_err(|e| e.to_string())?;
    let first = ms(started);
    let started = Instant::now();
    map(&out, 1, &mut kept).map_err(|e| e.to_string())?;
    Ok((generation, first, ms(started)))
}

/// `options` watching layer 0, head `head`.
fn watching<O: Asked>(options: &O, head: usize) -> O {
    let mut watching = options.clone();
    watching.common_mut().watch = Some(WatchOptions { layer: 0, head });
    watching
}

/// An accompaniment of `piece`, then the maps of what it wrote: ms each.
fn accompaniment_times(
    acc: &crate::models::Loaded,
    piece: &Piece,
    options: &AccompanyOptions,
    device: &Device,
) -> Result<Times, String> {
    let done = |_| async { true };
    timed(
        || {
            block_on(accompany_piece(
                &acc.model,
                &ModelPlay::of(&acc.defaults),
                piece,
                options,
                device,
                done,
            ))
        },
        |out, head, kept| {
            block_on(accompaniment_attention(
                &acc.model,
                out,
                &watching(options, head),
                device,
                Some(kept),
                done,
            ))
        },
    )
}

/// A continuation after `piece`, then the maps of the whole piece written: ms each.
fn continuation_times(
    cont: &crate::models::Loaded,
    piece: &Piece,
    options: &ContinueOptions,
    device: &Device,
) -> Result<Times, String> {
    let done = |_| async { true };
    timed(
        || block_on(continue_piece(&cont.model, piece, options, device, done)),
        |out, head, kept| {
            block_on(continuation_attention(
                &cont.model,
                out,
                &watching(options, head),
                device,
                Some(kept),
                done,
            ))
        },
    )
}
