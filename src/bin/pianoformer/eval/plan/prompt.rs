//! `eval --plan --prompt-piano MODEL`: the plan-following panel with each song's piano written
//! by an accompaniment model, as the page writes it before a person continues the song — the
//! annotated span accompanied under its lanes with the model's texture echo (or the lean and
//! strength of the texture panel `--prompt-texture` names), given the shipped velocity
//! model's dynamics — in place of the pianist's. A continuation then reads that piano in its
//! prompt: does it follow its planned chords as well as after a pianist? Without
//! `--prompt-piano` the prompts are the songs' own.

use burn::tensor::Device;
use pianoformer::data::corpus::{Corpus, Piece};
use pianoformer::eval::texture::accompany_answering;
use pianoformer::generate::texture::Answers;
use pianoformer::music::dynamics::Context;
use pianoformer::music::pop909::Pop909;
use pianoformer::music::roll::{GENERATED_VELOCITY, PITCHES, PianoRoll, Role};
use pianoformer::music::texture::echo::EchoLean;

use super::Args;
use crate::models::Loaded;

/// The accompaniment model that writes the prompts' piano, and how it leans.
pub struct PromptPiano {
    loaded: Loaded,
    /// The echo's lean and strength (`None`: no echo).
    echo: Option<(EchoLean, f32)>,
    dynamics: Option<pianoformer::music::dynamics::Dynamics>,
    /// In words, for the panel's JSON and summary.
    pub description: String,
}

impl PromptPiano {
    /// The model `--prompt-piano` names with the echo `--prompt-texture` asks for (its own
    /// where none is named); `None` without `--prompt-piano`.
    pub fn of(args: &Args, device: &Device) -> Result<Option<Self>, String> {
        let Some(spec) = &args.prompt_piano else {
            if args.prompt_texture.is_some() {
                return Err(
                    "--prompt-texture chooses the echo of --prompt-piano's model: \
                            name the model with --prompt-piano"
                        .into(),
                );
            }
            return Ok(None);
        };
        let loaded = crate::models::load(
            spec,
            pianoformer::model::config::Task::Accompaniment,
            None,
            device,
        )?;
        if !loaded.model.config.is_autoregressive() {
            return Err(format!(
                "--prompt-piano {spec} writes the whole accompaniment at once; the page \
                 accompanies step by step"
            ));
        }
        let (echo, from) = match &args.prompt_texture {
            Some(path) => (Some(texture_file(path)?), path.display().to_string()),
            None => (
                loaded
                    .defaults
                    .texture_echo
                    .map(|l| (l, loaded.defaults.texture_strength.unwrap_or(1.0))),
                "its own".into(),
            ),
        };
        let dynamics = crate::models::dynamics("default", None)?;
        let description = match echo {
            Some((_, s)) => format!("{}, the texture echo {from} at strength {s}", loaded.source),
            None => format!("{}, no texture echo", loaded.source),
        };
        Ok(Some(Self {
            loaded,
            echo,
            dynamics,
            description,
        }))
    }

    /// `corpus` with each song's piano written by the model (over its annotated span; none
    /// outside it), on `threads` threads; songs without a melody and chords to accompany are
    /// left out.
    pub fn rewrite(&self, corpus: &Corpus, args: &Args, device: &Device) -> Result<Corpus, String> {
        let pop = Pop909::open(&args.data).map_err(|e| format!("{}: {e}", args.data.display()))?;
        let pieces: Vec<&Piece> = corpus
            .pieces
            .iter()
            .filter(|p| p.has_accompaniment() && p.has_harmony())
            .collect();
        let model = &self.loaded.model;
        let started = std::time::Instant::now();
        let pieces = super::super::panel::par_map(&pieces, args.threads(), model, |m, p| {
            let piece = self.rewritten(m, p, &pop, args.seed, device)?;
            eprintln!(
                "{}: its piano written by the model from bar {} of the music ({:.0} s)",
                p.name,
                span_bar(p) + 1,
                started.elapsed().as_secs_f64()
            );
            Ok(piece)
        })?;
        Ok(Corpus { pieces })
    }

    /// `piece` with the model's piano in place of its pianist's.
    fn rewritten(
        &self,
        model: &pianoformer::model::performer::Performer,
        piece: &Piece,
        pop: &Pop909,
        seed: u64,
        device: &Device,
    ) -> Result<Piece, String> {
        let id: u32 = piece
            .name
            .rsplit('/')
            .next()
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("{}: not a POP909 song's name", piece.name))?;
        let range = piece.range.clone();
        let lanes = piece.sheet.labels.slice(range.clone());
        let answers = Answers::repeats(&lanes);
        let sampling = pianoformer::generate::PianoSampling {
            seed: seed ^ (u64::from(id) << 8),
            ..self.loaded.defaults.piano_sampling()
        };
        let written = pollster::block_on(accompany_answering(
            model,
            piece,
            &lanes,
            answers.as_ref(),
            self.echo,
            sampling,
            device,
        ))
        .map_err(|e| format!("{}: {e}", piece.name))?;
        let sheet = &piece.sheet;
        let mut piano = PianoRoll::new(sheet.rolls.num_steps());
        for (i, t) in range.clone().enumerate().take(written.num_steps) {
            for p in 0..PITCHES {
                let (on, held) = (written.onset(i, p), written.sustain(i, p));
                if on || held {
                    piano.set(t, p, on, held, 0);
                }
            }
        }
        if let Some(dynamics) = &self.dynamics {
            let ctx = Context::new(&sheet.grid, &sheet.labels, &sheet.rolls.melody);
            dynamics.apply(&ctx, &mut piano, range.clone(), sampling.seed);
        }
        let mut song = pop
            .load(id, sheet.grid.steps_per_beat)
            .map_err(|e| format!("{}: {e}", piece.name))?;
        let notes = piano.to_notes(&sheet.grid, Role::Piano.channel(), GENERATED_VELOCITY);
        let mut tracks = song.song.tracks.iter_mut();
        match tracks.find(|t| Role::from_track_name(&t.name) == Some(Role::Piano)) {
            Some(track) => {
                track.notes = notes;
                track.pedal.clear();
            }
            None => return Err(format!("{}: no piano track to replace", piece.name)),
        }
        let mut rolls = sheet.rolls.clone();
        rolls.piano = piano;
        Piece::new(
            piece.name.clone(),
            &song.song,
            sheet.grid.clone(),
            rolls,
            sheet.labels.clone(),
            range,
        )
    }
}

/// The bar of `piece`'s annotated span's first step, counted from its first bar with a note
/// (0: the span starts there; a prompt starts at that bar, and before the span the model
/// writes no piano).
fn span_bar(piece: &Piece) -> usize {
    let rolls = &piece.sheet.rolls;
    let labels = &piece.sheet.labels;
    let first = (0..rolls.num_steps()).find(|&t| {
        [&rolls.melody, &rolls.bridge, &rolls.piano]
            .iter()
            .any(|r| (0..PITCHES).any(|p| r.onset(t, p)))
    });
    let bar = |t: usize| labels.bar.get(t).copied().unwrap_or_default() as usize;
    first.map_or(0, |f| bar(piece.range.start).saturating_sub(bar(f)))
}

/// The lean and the chosen strength (else the one strength tried) of a texture panel's JSON
/// (`eval --texture --out FILE`).
fn texture_file(path: &std::path::Path) -> Result<(EchoLean, f32), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--prompt-texture: cannot read {}: {e}", path.display()))?;
    let panel: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("--prompt-texture {}: not JSON: {e}", path.display()))?;
    let lean: EchoLean = serde_json::from_value(panel["lean"].clone()).map_err(|e| {
        format!(
            "--prompt-texture {}: no texture echo's lean in it ({e}); give the JSON \
             `eval --texture --out` writes",
            path.display()
        )
    })?;
    let tried: Vec<f64> = panel["annotated"]
        .as_array()
        .map(|a| a.iter().filter_map(|s| s["strength"].as_f64()).collect())
        .unwrap_or_default();
    let strength = match (panel["strength"].as_f64(), &tried[..]) {
        (Some(s), _) | (None, &[s]) => s as f32,
        _ => {
            return Err(format!(
                "--prompt-texture {}: the panel chose no strength among {tried:?}; give one \
                 that tried a single strength",
                path.display()
            ));
        }
    };
    Ok((lean, strength))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_texture_panels_lean_and_strength_are_read_or_refused_in_words() {
        let dir = std::env::temp_dir().join(format!("pf-prompt-texture-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let lean = EchoLean {
            revoices: true,
            keeps_count: true,
            ..EchoLean::default()
        };
        let write = |name: &str, panel: serde_json::Value| {
            let path = dir.join(name);
            std::fs::write(&path, panel.to_string()).unwrap();
            path
        };
        let tried = |s: &[f64]| -> Vec<serde_json::Value> {
            s.iter()
                .map(|s| serde_json::json!({"strength": s}))
                .collect()
        };
        // One strength tried and none chosen (out of bounds): that one.
        let one = write(
            "one.json",
            serde_json::json!({"lean": lean, "strength": null, "annotated": tried(&[0.8])}),
        );
        assert_eq!(texture_file(&one), Ok((lean, 0.8)));
        // The chosen one among several.
        let chosen = write(
            "chosen.json",
            serde_json::json!({"lean": lean, "strength": 0.5, "annotated": tried(&[0.5, 1.0])}),
        );
        assert_eq!(texture_file(&chosen), Ok((lean, 0.5)));
        let none = write(
            "none.json",
            serde_json::json!({"lean": lean, "strength": null, "annotated": tried(&[0.5, 1.0])}),
        );
        assert!(
            texture_file(&none)
                .unwrap_err()
                .contains("chose no strength")
        );
        let no_lean = write("no-lean.json", serde_json::json!({"strength": 1.0}));
        assert!(
            texture_file(&no_lean)
                .unwrap_err()
                .contains("no texture echo's lean")
        );
        let missing = texture_file(&dir.join("missing.json")).unwrap_err();
        assert!(missing.contains("cannot read"), "{missing}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
