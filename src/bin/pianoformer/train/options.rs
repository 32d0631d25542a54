//! The model config and the run's options from `pianoformer train`'s arguments, and the
//! names of encodings and structure levels as the CLI takes them.

use super::Args;
use pianoformer::data::beats::BeatInputs;
use pianoformer::model::config::{AttentionKind, Conditioning, Direction, PerformerConfig, Task};
use pianoformer::model::features::FeatureKind;
use pianoformer::model::pe::{PeConfig, PeKind, StructureLevel};
use pianoformer::music::tokens::VOCAB_SIZE;
use pianoformer::train::session::RunOptions;

pub fn parse_pe(s: &str) -> Result<PeKind, String> {
    PeKind::ALL
        .iter()
        .copied()
        .find(|k| k.name() == s.replace('-', "_"))
        .ok_or_else(|| {
            let names: Vec<&str> = PeKind::ALL.iter().map(|k| k.name()).collect();
            format!(
                "unknown positional encoding `{s}`: use one of {}",
                names.join(", ")
            )
        })
}

/// `--levels` when not given.
pub const DEFAULT_LEVELS: [&str; 4] = ["melody", "chord", "phrase", "position"];

pub fn parse_levels(names: &[String]) -> Result<Vec<StructureLevel>, String> {
    names
        .iter()
        .filter(|n| !n.is_empty())
        .map(|n| match n.as_str() {
            "melody" => Ok(StructureLevel::Melody),
            "chord" | "chords" => Ok(StructureLevel::Chord),
            "phrase" | "phrases" => Ok(StructureLevel::Phrase),
            "position" | "beat" | "bar" => Ok(StructureLevel::Position),
            "phrase_bar" | "phrase-bar" => Ok(StructureLevel::PhraseBar),
            "time" => Ok(StructureLevel::Time),
            _ => Err(format!(
                "unknown structure level `{n}`: use melody, chord, phrase, position, phrase_bar \
                 or time"
            )),
        })
        .collect()
}

pub(super) fn model_config(args: &Args, task: Task) -> Result<PerformerConfig, String> {
    if let Some(path) = &args.config {
        return config_file(path, args, task);
    }
    let pe = pe_config(args, task)?;
    let direction = direction(args, task)?;
    let mut config = match args.preset.as_str() {
        "tiny" => PerformerConfig::tiny(task, VOCAB_SIZE, pe),
        "small" if task == Task::Harmonization => PerformerConfig::harmonizer(pe, direction),
        "small" if task == Task::Melody => PerformerConfig::melody(pe),
        "small" => PerformerConfig::small(task, VOCAB_SIZE, pe),
        other => return Err(format!("unknown preset `{other}`: use tiny or small")),
    };
    if let Some(taps) = args.taps {
        if config.pe.kind != PeKind::ConvSpe {
            return Err(format!(
                "--taps is the length of convSPE's filters; --pe {} has none",
                args.pe
            ));
        }
        if taps == 0 || taps > 4096 {
            return Err(format!("--taps must be between 1 and 4096, not {taps}"));
        }
        config.pe.taps = taps;
    }
    let attention = match args.attention.as_str() {
        "linear" => AttentionKind::Linear,
        "softmax" => AttentionKind::Softmax,
        other => {
            return Err(format!(
                "unknown attention `{other}`: use linear or softmax"
            ));
        }
    };
    let feature_kind = match args.feature_map.as_str() {
        "favor" => FeatureKind::Favor,
        "relu" => FeatureKind::Relu,
        other => {
            return Err(format!(
                "unknown feature map `{other}`: use favor (FAVOR+) or relu"
            ));
        }
    };
    if feature_kind != FeatureKind::Favor && attention != AttentionKind::Linear {
        return Err("--feature-map is the linear attention's; softmax attention has none".into());
    }
    config.feature_kind = feature_kind;
    let conditioning = conditioning(args, task)?;
    if task == Task::Harmonization {
        config = config.with_direction(Some(direction));
    }
    match (args.context.as_deref(), task) {
        (None, _) | (Some("song"), Task::Harmonization) => {}
        (Some("none"), Task::Harmonization) => config.input_dim = BeatInputs::default().width(),
        (Some("song" | "none"), _) => {
            return Err(format!(
                "--context is what a harmonizer reads around each beat; a {} model reads none",
                args.task
            ));
        }
        (Some(other), _) => {
            return Err(format!(
                "unknown context `{other}`: use song (the chroma around each beat) or none"
            ));
        }
    }
    let config = config
        .with_attention(attention)
        .with_inputs(conditioning.filter(|_| task == Task::Accompaniment));
    config.validate()?;
    Ok(config)
}

/// A config from `--config`, checked against the task.
fn config_file(path: &std::path::Path, args: &Args, task: Task) -> Result<PerformerConfig, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the config {}: {e}", path.display()))?;
    let config: PerformerConfig = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a model config: {e}", path.display()))?;
    if config.task != task {
        return Err(format!(
            "{} is a {:?} config, but --task is {}",
            path.display(),
            config.task,
            args.task
        ));
    }
    config.validate_for(VOCAB_SIZE)?;
    Ok(config)
}

/// The positional encoding of `--pe`, `--gated`, `--levels` and `--chord-encoding`.
fn pe_config(args: &Args, task: Task) -> Result<PeConfig, String> {
    let kind = parse_pe(&args.pe)?;
    let mut pe = PeConfig::new(kind).with_gate(args.gated);
    if args.chord_encoding != "centroid" && !pe.is_structural() {
        return Err(format!(
            "--chord-encoding {} is for F-StrIPE (--pe fstripe or fstripe_sff); {} reads no \
             chord labels in its positions",
            args.chord_encoding, args.pe
        ));
    }
    if pe.is_structural() {
        let mut levels = parse_levels(&args.levels)?;
        if task == Task::Continuation {
            if args.levels == DEFAULT_LEVELS {
                // What the tokens and the lanes say of each token: chord in force, phrase and
                // the bar's place in it, position in the bar, time.
                levels = StructureLevel::CONTINUATION.to_vec();
            } else if levels.contains(&StructureLevel::Melody) {
                return Err(
                    "a continuation's tokens have no melody part, so F-StrIPE cannot read the \
                     melody level: use chord, phrase, phrase_bar, position and time"
                        .into(),
                );
            }
        }
        if task == Task::Melody && args.levels == DEFAULT_LEVELS {
            levels = StructureLevel::MELODY.to_vec();
        }
        if task == Task::Harmonization && args.levels == DEFAULT_LEVELS {
            // The default levels less the chord, which a harmonizer writes.
            levels.retain(|l| *l != StructureLevel::Chord);
        }
        if task == Task::Harmonization
            && levels
                .iter()
                .any(|l| matches!(l, StructureLevel::Chord | StructureLevel::ChordId))
        {
            return Err(
                "a harmonizer writes the chords, so F-StrIPE cannot read them: use the melody, \
                 phrase and position levels"
                    .into(),
            );
        }
        match args.chord_encoding.as_str() {
            "centroid" => {}
            "id" => {
                for l in levels.iter_mut().filter(|l| **l == StructureLevel::Chord) {
                    *l = StructureLevel::ChordId;
                }
            }
            other => {
                return Err(format!(
                    "unknown chord encoding `{other}`: use centroid or id"
                ));
            }
        }
        pe = pe.with_levels(&levels);
    }
    Ok(pe)
}

/// Which positions attention reads (`--direction`): a harmonizer reads both ways by default.
fn direction(args: &Args, task: Task) -> Result<Direction, String> {
    Ok(match (args.direction.as_deref(), task) {
        (None | Some("bidirectional" | "whole"), Task::Harmonization) => Direction::Bidirectional,
        (Some("causal"), Task::Harmonization) => Direction::Causal,
        (None | Some("causal"), _) => Direction::Causal,
        (Some("bidirectional" | "whole"), _) => {
            return Err(format!(
                "a {} model generates left to right: only a harmonizer reads in both directions",
                args.task
            ));
        }
        (Some(other), _) => {
            return Err(format!(
                "unknown direction `{other}`: use bidirectional (the whole melody) or causal \
                 (up to the current beat)"
            ));
        }
    })
}

/// What an accompaniment reads besides the rolls (`--conditioning`, `--melody-lag`).
pub(super) fn conditioning(args: &Args, task: Task) -> Result<Option<Conditioning>, String> {
    let conditioning = match args.conditioning.as_str() {
        "autoregressive" | "ar" => Some(Conditioning::AUTOREGRESSIVE),
        "reference" => Some(Conditioning::REFERENCE),
        "labels" => Some(Conditioning {
            labels: true,
            piano: false,
            melody_lag: 0,
            reference: false,
        }),
        "none" => None,
        other => {
            return Err(format!(
                "unknown conditioning `{other}`: use autoregressive, reference, labels or none"
            ));
        }
    };
    Ok(match (conditioning, args.melody_lag) {
        (c, 0) => c,
        (Some(c), lag) if c.piano && task == Task::Accompaniment && lag <= 4 => {
            Some(Conditioning {
                melody_lag: lag,
                ..c
            })
        }
        (_, lag) if lag > 4 => {
            return Err(format!("--melody-lag must be at most 4 steps, not {lag}"));
        }
        _ => {
            return Err(
                "--melody-lag is for the step-by-step accompaniment (--conditioning \
                 autoregressive): it reads the melody late so that it can play live"
                    .into(),
            );
        }
    })
}

pub(super) fn run_options(args: &Args, task: Task) -> RunOptions {
    let mut o = RunOptions::defaults(task);
    if let Some(v) = args.steps {
        o.steps = v;
    }
    if let Some(v) = args.batch {
        o.batch = v;
    }
    if let Some(v) = args.window {
        o.window = v;
    }
    if let Some(v) = args.lr {
        o.peak_lr = v;
    }
    if let Some(v) = args.warmup {
        o.warmup = v;
    }
    if let Some(v) = args.seed {
        o.seed = v;
    }
    if let Some(v) = args.eval_every {
        o.eval_every = v;
    }
    if let Some(v) = args.pos_weight {
        o.pos_weight = v;
    }
    if let Some(v) = args.pe_lr_scale {
        o.pe_lr_scale = v;
    }
    if let Some(v) = args.chord_noise {
        o.chord_noise = v;
    }
    o
}
