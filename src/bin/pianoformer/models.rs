//! Finding a model for `generate` and `eval`: a training run's folder (`config.json`,
//! `model.bpk`, and `eval.json` once evaluated), or a name in the shipped manifest
//! (`www/models/manifest.json`; `default` picks the task's default). Shipped weights are
//! checked against the manifest's sha256 and config.

use std::path::{Path, PathBuf};

use burn::tensor::Device;
use pianoformer::model::config::{PerformerConfig, Task};
use pianoformer::model::performer::Performer;
use pianoformer::models::{Manifest, load_entry};
use pianoformer::train::eval::Binarize;

/// The shipped models' manifest, relative to the repository root.
pub const MANIFEST: &str = "www/models/manifest.json";

pub struct Loaded {
    pub model: Performer,
    pub binarize: Option<Binarize>,
    /// Step-by-step accompaniment: the temperature chosen on validation data.
    pub temperature: Option<f32>,
    /// Step-by-step accompaniment: the hold draws' temperature chosen with it.
    pub hold_temperature: Option<f32>,
    /// Where it came from, in words.
    pub source: String,
}

/// What `eval` writes into a run folder and `generate` reads back.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct EvalFile {
    #[serde(default)]
    pub binarize: Option<Binarize>,
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default)]
    pub hold_temperature: Option<f32>,
    #[serde(flatten)]
    pub rest: serde_json::Value,
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
    let manifest_path = manifest.map_or_else(|| PathBuf::from(MANIFEST), Path::to_path_buf);
    if dir.is_dir() || spec.contains('/') {
        return Err(format!(
            "{spec} is not a model: a training run's folder holds model.bpk and config.json"
        ));
    }
    let text = std::fs::read_to_string(&manifest_path).map_err(|e| {
        format!(
            "no run folder called {spec}, and the shipped manifest {} cannot be read: {e}",
            manifest_path.display()
        )
    })?;
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
        binarize: entry.binarize,
        temperature: entry.temperature,
        hold_temperature: entry.hold_temperature,
        source: format!("{} ({})", entry.name, file.display()),
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
    let eval = std::fs::read_to_string(dir.join("eval.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<EvalFile>(&t).ok());
    Ok(Loaded {
        model,
        binarize: eval.as_ref().and_then(|e| e.binarize),
        temperature: eval.as_ref().and_then(|e| e.temperature),
        hold_temperature: eval.as_ref().and_then(|e| e.hold_temperature),
        source: dir.display().to_string(),
    })
}
