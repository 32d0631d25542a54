//! `pianoformer bench harmonize`: where the time of harmonizing a melody goes, stage by stage,
//! as the page pays it for "Suggest chords" (`studio::harmonize_piece`): the input (the piece's
//! rolls, grid, phrase lane and labels), the beat features, the model's forward pass (the
//! tensor form, then the plain-slice attention the CPU runs, and the ratio of the two) and the
//! decoding (Viterbi). The melody: the bundled example's, its piano taken out, at each of
//! `--positions` bars; the shipped default harmonizer (or `--model`). Medians of `--steps` runs.

use std::time::Instant;

use burn::tensor::Device;
use pianoformer::data::beats::{beat_features, beat_labels};
use pianoformer::data::features::LabelFeatures;
use pianoformer::data::{Example, harmony::NO_TARGET, stack};
use pianoformer::device::{self, Preference};
use pianoformer::generate::harmonize::{Choice, progression};
use pianoformer::generate::piece_input;
use pianoformer::model::config::Task;
use pianoformer::model::performer::{Inputs, Performer};
use pianoformer::music::fixtures;
use pianoformer::music::harmony::BeatPlaces;
use pianoformer::music::harmony::decode::{HarmonyDecode, log_softmax_rows};
use pianoformer::music::piece::{Piece, TrackRole};
use pianoformer::studio::{self, HarmonizeOptions};

use super::Options;

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

pub fn harmonize(options: &Options) -> Result<(), String> {
    let preference: Preference = options.backend.parse().map_err(|e| format!("{e}"))?;
    let backend = pollster::block_on(device::init(preference)).map_err(|e| format!("{e}"))?;
    let device = backend.device.clone();
    let loaded = crate::models::load(&options.model, Task::Harmonization, None, &device)?;
    let model = &loaded.model;
    let decode = loaded.defaults.harmony();
    println!(
        "harmonizer {} ({} parameters) on {}; medians of {} runs, in ms",
        loaded.source.split_whitespace().next().unwrap_or("default"),
        model.parameters(),
        backend.info.label(),
        options.steps.max(1)
    );
    println!(
        "{:>5} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "bars",
        "beats",
        "input",
        "features",
        "forward",
        "plain",
        "speed-up",
        "read",
        "decode",
        "whole"
    );
    for &bars in &options.positions {
        let song = fixtures::song(0, bars as u64);
        let mut piece = Piece::from_song(&song, "bench").map_err(|e| e.to_string())?;
        piece.tracks.retain(|t| t.role == TrackRole::Melody);
        let mut stages: [Vec<f64>; 7] = Default::default();
        let mut beats = 0;
        for _ in 0..options.steps.max(1) {
            let times;
            (times, beats) = timed_run(model, &decode, &piece, &device)?;
            for (stage, t) in stages.iter_mut().zip(times) {
                stage.push(t);
            }
        }
        let [input, features, forward, plain, read, dec, whole] = stages.map(median);
        println!(
            "{bars:>5} {beats:>6} {input:>9.1} {features:>9.1} {forward:>9.1} {plain:>9.1} {:>9.2} {read:>9.1} {dec:>9.1} {whole:>9.1}",
            forward / plain
        );
    }
    Ok(())
}

/// One harmonization of `piece`, stage by stage: the input, the beat features, the forward
/// pass (tensor form), the same on plain slices, reading the logits, the decoding, and the
/// whole `harmonize_piece`; ms each, and the beats.
fn timed_run(
    model: &Performer,
    decode: &HarmonyDecode,
    piece: &Piece,
    device: &Device,
) -> Result<([f64; 7], usize), String> {
    let t0 = Instant::now();
    let grid = piece.grid(|t| t.role == TrackRole::Melody);
    let input = piece_input(piece, grid.clone(), true).map_err(|e| e.to_string())?;
    let t1 = Instant::now();
    let example = beat_example(model, &input);
    let beats = example.len;
    let (x, _, coords) = stack(std::slice::from_ref(&example), device);
    let coords = coords.filter(|_| model.config.pe.is_structural());
    let t2 = Instant::now();
    let mut state = model.start(0, false, device);
    let logits = model
        .forward(Inputs::Rolls(x), coords, &mut state, None)
        .map_err(|e| e.to_string())?;
    let _ = logits.clone().slice([0..1, 0..1, 0..1]).into_data();
    let t3 = Instant::now();
    // The same pass with the attention on plain slices, as the harmonizer runs it on
    // the CPU (reading the decoder's weights counted in).
    let stepping = pollster::block_on(model.stepping(device)).map_err(|e| e.to_string())?;
    let mut state = model.start(0, false, device).stepping(&stepping);
    let (x, _, coords) = stack(std::slice::from_ref(&example), device);
    let coords = coords.filter(|_| model.config.pe.is_structural());
    let plain = model
        .forward(Inputs::Rolls(x), coords, &mut state, None)
        .map_err(|e| e.to_string())?;
    let _ = plain.slice([0..1, 0..1, 0..1]).into_data();
    let t3b = Instant::now();
    let values = logits
        .into_data()
        .try_to_vec::<f32>()
        .map_err(|e| format!("{e:?}"))?;
    let lp = log_softmax_rows(&values);
    let t4 = Instant::now();
    let places = BeatPlaces::from_labels(&input.sheet.labels);
    let chords = progression(&lp, &places, decode, 0..beats, None, Choice::Best);
    if chords.len() != beats {
        return Err(format!("decoded {} beats of {beats}", chords.len()));
    }
    let t5 = Instant::now();
    let whole = pollster::block_on(studio::harmonize_piece(
        model,
        decode,
        piece,
        &HarmonizeOptions::default(),
        &mut studio::HarmonyCache::default(),
    ))
    .map_err(|e| e.to_string())?;
    if whole.cells.len() != grid.num_bars() {
        return Err(format!(
            "harmonize_piece wrote {} bars of {}",
            whole.cells.len(),
            grid.num_bars()
        ));
    }
    let t6 = Instant::now();
    let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e3;
    Ok((
        [
            ms(t0, t1),
            ms(t1, t2),
            ms(t2, t3),
            ms(t3, t3b),
            ms(t3b, t4),
            ms(t4, t5),
            ms(t5, t6),
        ],
        beats,
    ))
}

/// What the harmonizer reads of `input`: a beat a position, with its structure coordinates.
fn beat_example(model: &Performer, input: &pianoformer::generate::AccompanimentInput) -> Example {
    let reads = model.config.beat_inputs();
    let inputs = beat_features(
        &input.sheet.rolls.melody,
        &input.sheet.rolls.bridge,
        &input.sheet.labels,
        0,
        reads,
    );
    let beats = inputs.len() / reads.width();
    let levels = model.config.pe.structure_levels().to_vec();
    Example {
        len: beats,
        inputs,
        targets: vec![NO_TARGET; beats],
        coordinates: beat_labels(&input.sheet.labels).coordinates(&levels),
    }
}
