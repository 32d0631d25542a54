//! `eval --texture --measure-echo-density N`: the density of the steps the echo leans
//! (`music::texture::echo::EchoLean::density`), measured in the model's accompaniments of N
//! training songs under their annotated lanes: the onsets it plays on those steps without the
//! echo over those it plays with it. The lean, added to a model that already follows its
//! chords, counts that evidence twice; at this density the leaned steps play about as many
//! onsets as the model's own, so the echo says where they fall, not how many there are.

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

/// The density of the steps `lean` leans at `strength`, measured on `n` of `train`'s songs
/// spread evenly over them (printed with what it counted).
pub fn measured(
    (train, n): (&Corpus, usize),
    args: &Args,
    (model, sampling): (&Performer, PianoSampling),
    (lean, strength): (EchoLean, f32),
    device: &Device,
) -> Result<f32, String> {
    let all: Vec<&Piece> = train
        .pieces
        .iter()
        .filter(|p| p.has_accompaniment() && p.has_harmony())
        .collect();
    let every = all.len().div_ceil(n.max(1)).max(1);
    let pieces: Vec<&Piece> = all.into_iter().step_by(every).take(n).collect();
    let started = Instant::now();
    let lean = EchoLean {
        density: None,
        ..lean
    };
    let counted = super::super::panel::par_map(&pieces, args.threads(), model, |m, p| {
        let labels = p.sheet.labels.slice(p.range.clone());
        let Some(echo) = TextureEcho::repeats(lean, strength, &labels) else {
            return Ok((0, 0));
        };
        let mut played = [0usize; 2];
        for (k, s) in [0.0, strength].into_iter().enumerate() {
            let roll = pollster::block_on(accompany_with_echo(
                m, p, &labels, sampling, lean, s, device,
            ))
            .map_err(|e| format!("{}: {e}", p.name))?;
            played[k] = leaned_onsets(&roll, &echo);
        }
        Ok((played[0], played[1]))
    })?;
    let (without, with) = counted
        .iter()
        .fold((0, 0), |(a, b), &(x, y)| (a + x, b + y));
    if with == 0 || without == 0 {
        return Err(format!(
            "--measure-echo-density: the {} training songs measured have no onsets on the \
             steps the echo leans; measure more songs",
            pieces.len()
        ));
    }
    let density = without as f32 / with as f32;
    eprintln!(
        "the echo's steps in the model's accompaniments of {} training songs ({:.0} s): {with} \
         onsets with the echo, {without} without: its steps play at density {density:.3}",
        pieces.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(density)
}
