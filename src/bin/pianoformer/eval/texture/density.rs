//! `eval --texture --measure-echo-density N`: the density of the steps the echo leans
//! (`music::texture::echo::EchoLean::density`), measured in the model's accompaniments of N
//! training songs under their annotated lanes: the density at which it plays as many onsets
//! on those steps with the echo as without it. The lean, added to a model that already
//! follows its chords, counts that evidence twice; at this density the echo says where the
//! leaned steps' onsets fall, and the model how many there are.

use std::time::Instant;

use burn::tensor::Device;
use pianoformer::data::corpus::{Corpus, Piece};
use pianoformer::eval::texture::accompany_with_echo;
use pianoformer::generate::PianoSampling;
use pianoformer::generate::texture::TextureEcho;
use pianoformer::model::performer::Performer;
use pianoformer::music::roll::{PITCHES, PianoRoll};
use pianoformer::music::texture::echo::EchoLean;

use super::Args;

/// The onsets of `roll` on the steps `echo` leans on.
fn leaned_onsets(roll: &PianoRoll, echo: &TextureEcho) -> usize {
    (0..roll.num_steps)
        .filter(|&t| echo.leans_on(t))
        .map(|t| (0..PITCHES).filter(|&p| roll.onset(t, p)).count())
        .sum()
}

/// The onsets of `pieces`' accompaniments under their annotated lanes, the echo of `lean` at
/// `s`, on the steps it leans at `strength`.
fn played(
    pieces: &[&Piece],
    args: &Args,
    (model, sampling): (&Performer, PianoSampling),
    (lean, strength, s): (EchoLean, f32, f32),
    device: &Device,
) -> Result<usize, String> {
    let counted = super::super::panel::par_map(pieces, args.threads(), model, |m, p| {
        let labels = p.sheet.labels.slice(p.range.clone());
        let Some(echo) = TextureEcho::repeats(lean, strength, &labels) else {
            return Ok(0);
        };
        let roll = pollster::block_on(accompany_with_echo(
            m, p, &labels, sampling, lean, s, device,
        ))
        .map_err(|e| format!("{}: {e}", p.name))?;
        Ok(leaned_onsets(&roll, &echo))
    })?;
    Ok(counted.iter().sum())
}

/// How near the leaned steps' onsets must come to the model's own before the search stops,
/// and the most passes it makes.
const NEAR: f64 = 0.02;
const PASSES: usize = 8;

/// The density of the steps `lean` leans at `strength` at which they play as many onsets as
/// the model plays there without the echo, in its accompaniments of `n` of `train`'s songs
/// spread evenly over them: the ratio of the two counts, then a secant step in log-log from
/// the last two passes (the model hears what it played, and the lean's strongest evidence
/// barely moves, so the onsets follow the density by a power below 1) until the two come
/// within 2 % (printed with what it counted).
pub fn measured(
    (train, n): (&Corpus, usize),
    args: &Args,
    (model, sampling): (&Performer, PianoSampling),
    (lean, strength): (EchoLean, f32),
    device: &Device,
) -> Result<f32, String> {
    let pieces = super::spread_songs(train, n);
    let started = Instant::now();
    let count = |s: f32, d: Option<f32>| {
        let mut at = lean;
        at.density = d;
        played(&pieces, args, (model, sampling), (at, strength, s), device)
    };
    let without = count(0.0, None)?;
    let mut density = 1.0f32;
    // The last pass's (log density, log onsets): the onsets follow the density by a power
    // below 1 (the lean's strongest evidence barely moves), read off the last two passes.
    let mut last: Option<(f64, f64)> = None;
    for pass in 1..=PASSES {
        let with = count(strength, Some(density))?;
        if with == 0 || without == 0 {
            return Err(format!(
                "--measure-echo-density: the {} training songs measured have no onsets on the \
                 steps the echo leans; measure more songs",
                pieces.len()
            ));
        }
        let ratio = without as f64 / with as f64;
        eprintln!(
            "the echo's steps in the model's accompaniments of {} training songs, pass {pass} \
             ({:.0} s): {with} onsets with the echo at density {density:.3}, {without} without",
            pieces.len(),
            started.elapsed().as_secs_f64()
        );
        if (ratio - 1.0).abs() < NEAR {
            break;
        }
        let here = ((density as f64).ln(), (with as f64).ln());
        // The power (1 before two passes: the ratio itself), kept within 0.2-1.
        let power = last.map_or(1.0, |(d, w)| ((here.1 - w) / (here.0 - d)).clamp(0.2, 1.0));
        last = Some(here);
        density = (here.0 + ratio.ln() / power).exp().clamp(0.05, 4.0) as f32;
    }
    eprintln!("its steps play at density {density:.3}");
    Ok(density)
}
