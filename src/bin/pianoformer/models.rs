//! Finding a model for `generate` and `eval`: a training run's folder (`config.json`,
//! `model.bpk`, and `eval.json` once evaluated), or a name in the shipped manifest
//! (`www/models/manifest.json`; `default` picks the task's default). Shipped weights are
//! checked against the manifest's sha256 and config.

use std::path::{Path, PathBuf};

use burn::tensor::Device;
use pianoformer::model::config::{PerformerConfig, Task};
use pianoformer::model::performer::Performer;
use pianoformer::models::{Manifest, ModelDefaults, load_entry};
use pianoformer::music::dynamics::Dynamics;
use pianoformer::music::harmony::decode::HarmonyDecode;
use pianoformer::music::pedal::model::PedalModel;
use pianoformer::studio::PedalMode;

/// The shipped models' manifest, relative to the repository root.
pub const MANIFEST: &str = "www/models/manifest.json";

/// The environment variable naming the folder of shipped models (or their manifest file).
pub const MODELS_ENV: &str = "PIANOFORMER_MODELS";

/// Where the shipped manifest may be, in the order tried: `--manifest` alone when given, else
/// `$PIANOFORMER_MODELS` alone when set (a folder holding manifest.json, or the file), else
/// `www/models/` under the working folder, then beside the binary (`models/`, `www/models/`,
/// and the same under each folder above it, so a binary in `target/release/` finds its
/// checkout's), then the checkout the binary was built from.
pub fn manifest_candidates(explicit: Option<&Path>) -> Vec<PathBuf> {
    if let Some(path) = explicit {
        return vec![path.to_path_buf()];
    }
    if let Some(dir) = std::env::var_os(MODELS_ENV).filter(|v| !v.is_empty()) {
        let dir = PathBuf::from(dir);
        return vec![if dir.is_dir() {
            dir.join("manifest.json")
        } else {
            dir
        }];
    }
    let mut out = vec![PathBuf::from(MANIFEST)];
    if let Some(exe_dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        for dir in exe_dir.ancestors() {
            out.push(dir.join("models/manifest.json"));
            out.push(dir.join(MANIFEST));
        }
    }
    out.push(Path::new(env!("CARGO_MANIFEST_DIR")).join(MANIFEST));
    out.dedup();
    out
}

/// The first of [`manifest_candidates`] that exists, or an error in words saying where it
/// looked.
pub fn find_manifest(explicit: Option<&Path>) -> Result<PathBuf, String> {
    let candidates = manifest_candidates(explicit);
    if let Some(found) = candidates.iter().find(|p| p.is_file()) {
        return Ok(found.clone());
    }
    let looked: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
    Err(format!(
        "the shipped models' manifest is not in {} (set {MODELS_ENV} to the folder holding \
         manifest.json, or give --manifest)",
        looked.join(", ")
    ))
}

pub struct Loaded {
    pub model: Performer,
    /// How it plays unless told otherwise (its manifest entry's, or its run's `eval.json`).
    pub defaults: ModelDefaults,
    /// Where it came from, in words.
    pub source: String,
    /// The window it was trained on (grid steps or tokens), where its run or manifest says.
    pub trained_window: Option<usize>,
}

/// The defaults `eval` chose for the run in `dir` (its `eval.json`; a continuation's
/// temperature from `eval --plan`'s `plan.json`), as `ship` writes them into the manifest entry
/// and `generate` reads them from the run: each figure read where it is there.
pub fn run_defaults(dir: &Path, task: Task) -> ModelDefaults {
    let eval: serde_json::Value = std::fs::read_to_string(dir.join("eval.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let number = |key: &str| eval[key].as_f64().map(|v| v as f32);
    let texture: serde_json::Value = std::fs::read_to_string(dir.join("texture.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let accompaniment = task == Task::Accompaniment;
    ModelDefaults {
        binarize: serde_json::from_value(eval["binarize"].clone()).ok(),
        temperature: number("temperature").or_else(|| plan_temperature(dir)),
        hold_temperature: number("hold_temperature"),
        pitch_temperature: number("pitch_temperature"),
        // A melody model's echo is chosen with its temperatures; a continuation's lives in its
        // sampling and its panels (`eval --plan`).
        echo: number("echo").filter(|_| task == Task::Melody),
        harmony: serde_json::from_value(eval["decode"].clone()).ok(),
        // The texture echo's lean, as `eval --texture` counted and tried it.
        texture_echo: serde_json::from_value(texture["lean"].clone())
            .ok()
            .filter(|_| accompaniment),
        // And the strength it chose on validation.
        texture_strength: texture["strength"]
            .as_f64()
            .map(|v| v as f32)
            .filter(|_| accompaniment),
    }
}

/// The model `generate --task live` plays with when none is named: the page's choice
/// (`Manifest::live`), else the task's default.
pub fn live_spec(spec: &str, manifest: Option<&Path>) -> String {
    let chosen = (spec == "default")
        .then(|| find_manifest(manifest).ok())
        .flatten()
        .and_then(|path| std::fs::read_to_string(path).ok())
        .and_then(|text| Manifest::parse(&text).ok())
        .and_then(|m| m.live().map(|e| e.name.clone()));
    chosen.unwrap_or_else(|| spec.to_string())
}

pub fn load(
    spec: &str,
    task: Task,
    manifest: Option<&Path>,
    device: &Device,
) -> Result<Loaded, String> {
    let dir = PathBuf::from(spec);
    if dir.join("model.bpk").is_file() {
        return load_run(&dir, task, device);
    }
    if dir.is_dir() || spec.contains('/') {
        return Err(format!(
            "{spec} is not a model: a training run's folder holds model.bpk and config.json"
        ));
    }
    let manifest_path =
        find_manifest(manifest).map_err(|e| format!("no run folder called {spec}, and {e}"))?;
    let text = std::fs::read_to_string(&manifest_path)
        .map_err(|e| format!("cannot read {}: {e}", manifest_path.display()))?;
    let manifest = Manifest::parse(&text).map_err(|e| e.to_string())?;
    let name = (spec != "default").then_some(spec);
    let entry = manifest.find(name, task).map_err(|e| e.to_string())?;
    if entry.task != task {
        return Err(format!(
            "{} is a {:?} model, but --task is {task:?}",
            entry.name, entry.task
        ));
    }
    let file = manifest_path
        .parent()
        .unwrap_or(Path::new("."))
        .join(&entry.file);
    let bytes = std::fs::read(&file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let model = load_entry(entry, &bytes, device).map_err(|e| e.to_string())?;
    Ok(Loaded {
        model,
        defaults: entry.defaults,
        source: format!("{} ({})", entry.name, file.display()),
        trained_window: entry.training["options"]["window"]
            .as_u64()
            .map(|w| w as usize),
    })
}

fn load_run(dir: &Path, task: Task, device: &Device) -> Result<Loaded, String> {
    let text = std::fs::read_to_string(dir.join("config.json"))
        .map_err(|e| format!("{}: no config.json beside the weights: {e}", dir.display()))?;
    let config: PerformerConfig = serde_json::from_str(&text)
        .map_err(|e| format!("{}/config.json is not a model config: {e}", dir.display()))?;
    if config.task != task {
        return Err(format!(
            "{} holds a {:?} model, but --task is {task:?}",
            dir.display(),
            config.task
        ));
    }
    config
        .validate_for(pianoformer::music::tokens::VOCAB_SIZE)
        .map_err(|e| format!("{}/config.json: {e}", dir.display()))?;
    let bytes = std::fs::read(dir.join("model.bpk"))
        .map_err(|e| format!("cannot read {}/model.bpk: {e}", dir.display()))?;
    let model = Performer::from_bytes(&config, &bytes, device)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(Loaded {
        model,
        defaults: run_defaults(dir, task),
        source: dir.display().to_string(),
        trained_window: std::fs::read_to_string(dir.join("run.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v["options"]["window"].as_u64())
            .map(|w| w as usize),
    })
}

/// The temperature `eval --plan` chose on validation for the continuation run in `dir`.
pub fn plan_temperature(dir: &Path) -> Option<f32> {
    let text = std::fs::read_to_string(dir.join("plan.json")).ok()?;
    let plan: serde_json::Value = serde_json::from_str(&text).ok()?;
    plan["temperature"].as_f64().map(|t| t as f32)
}

/// The harmonizer that fills the chord lane of a melody-only file: `spec` as `load` takes it
/// (`default`: the manifest's default harmonizer), with its decoding (the default rhythm when
/// a run was never evaluated). `Ok(None)` for `none`, or when no harmonizer is shipped and
/// none was asked for by name.
/// The velocity model `spec` names: `default` (the manifest's `dynamics`, when the manifest
/// ships one; none otherwise), `none`, or a JSON file written by `pianoformer dynamics`.
pub fn dynamics(spec: &str, manifest: Option<&Path>) -> Result<Option<Dynamics>, String> {
    match spec {
        "none" => Ok(None),
        "default" => {
            let Ok(path) = find_manifest(manifest) else {
                return Ok(None);
            };
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let manifest = Manifest::parse(&text).map_err(|e| e.to_string())?;
            manifest
                .dynamics
                .map(|entry| entry.load(path.parent().unwrap_or(Path::new("."))))
                .transpose()
        }
        file => {
            let text = std::fs::read_to_string(file).map_err(|e| {
                format!("--dynamics {file}: cannot read it ({e}); give `default`, `none` or a file written by `pianoformer dynamics`")
            })?;
            Dynamics::from_json(&text)
                .map(Some)
                .map_err(|e| format!("{file}: {e}"))
        }
    }
}

/// The pedal `spec` asks for the piano written: `learnt` (the manifest's pedal model, when
/// it ships one; for a `live` take the one that pedals as it plays, as the page's take is,
/// where it ships one), `played` (the file's own pedal, none for new bars), `none`, or a JSON
/// file written by `pianoformer pedal` (learnt with it).
pub fn pedal(
    spec: &str,
    manifest: Option<&Path>,
    live: bool,
) -> Result<(PedalMode, Option<PedalModel>), String> {
    match spec {
        "none" | "off" => Ok((PedalMode::Off, None)),
        "played" => Ok((PedalMode::Played, None)),
        "learnt" => {
            let Ok(path) = find_manifest(manifest) else {
                return Ok((PedalMode::Learnt, None));
            };
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let manifest = Manifest::parse(&text).map_err(|e| e.to_string())?;
            let entry = match live {
                true => manifest.pedal_live.or(manifest.pedal),
                false => manifest.pedal,
            };
            let model = entry
                .map(|entry| entry.load_pedal(path.parent().unwrap_or(Path::new("."))))
                .transpose()?;
            Ok((PedalMode::Learnt, model))
        }
        file => {
            let text = std::fs::read_to_string(file).map_err(|e| {
                format!("--pedal {file}: cannot read it ({e}); give `learnt`, `played`, `none` or a file written by `pianoformer pedal`")
            })?;
            let model = PedalModel::from_json(&text).map_err(|e| format!("{file}: {e}"))?;
            Ok((PedalMode::Learnt, Some(model)))
        }
    }
}

pub fn harmonizer(
    spec: &str,
    manifest: Option<&Path>,
    device: &Device,
) -> Result<Option<(Loaded, HarmonyDecode)>, String> {
    if spec == "none" {
        return Ok(None);
    }
    match load(spec, Task::Harmonization, manifest, device) {
        Ok(loaded) => {
            let decode = loaded.defaults.harmony();
            Ok(Some((loaded, decode)))
        }
        Err(e)
            if spec == "default"
                && (e.contains("no Harmonization model") || e.contains("manifest is not in")) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}
