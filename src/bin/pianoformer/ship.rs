//! `pianoformer ship`: copies a trained, evaluated run into `www/models/` and records it in the
//! manifest with its config, parameter count, sha256, data split, training command and
//! metrics.

use std::path::{Path, PathBuf};

use burn::tensor::Device;
use pianoformer::model::performer::Performer;
use pianoformer::models::{Manifest, ModelEntry, sha256_hex};
use pianoformer::train::session::RunState;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The training run's folder (model.bpk, config.json, run.json, eval.json).
    pub run: PathBuf,
    /// The model's name in the manifest (letters, digits and '-').
    #[arg(long)]
    pub name: String,
    /// One line for the page's model picker.
    #[arg(long)]
    pub description: String,
    /// Make it its task's default.
    #[arg(long)]
    pub default: bool,
    /// The command that trained it, recorded in the manifest.
    #[arg(long)]
    pub command: Option<String>,
    /// The manifest to update.
    #[arg(long, default_value = crate::models::MANIFEST)]
    pub manifest: PathBuf,
    /// Ship a run that stopped before its planned steps (the manifest says how far it got:
    /// `training.steps` of `training.options.steps`); it cannot be the default.
    #[arg(long)]
    pub unfinished: bool,
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

pub fn run(args: Args) -> Result<(), String> {
    let state = finished_state(&args)?;
    let eval: serde_json::Value = serde_json::from_str(&read(&args.run.join("eval.json"))?)
        .map_err(|e| format!("{}/eval.json: {e}", args.run.display()))?;
    let bytes = std::fs::read(args.run.join("model.bpk"))
        .map_err(|e| format!("cannot read {}/model.bpk: {e}", args.run.display()))?;
    let model =
        Performer::from_bytes(&state.config, &bytes, &Device::flex()).map_err(|e| e.to_string())?;
    let file = format!("{}.bpk", args.name);
    let dir = args
        .manifest
        .parent()
        .unwrap_or(Path::new("."))
        .to_path_buf();
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let manifest = if args.manifest.exists() {
        Manifest::parse(&read(&args.manifest)?).map_err(|e| e.to_string())?
    } else {
        Manifest::default()
    };
    let metrics = metrics(&args, &eval)?;
    let defaults = crate::models::run_defaults(&args.run, state.config.task);
    if state.config.task == pianoformer::model::config::Task::Harmonization
        && defaults.harmony.is_none()
    {
        return Err(format!(
            "{}/eval.json has no harmonic rhythm and weight (`decode`): run `pianoformer eval \
             --task harmonization` on it first",
            args.run.display()
        ));
    }
    let entry = ModelEntry {
        name: args.name.clone(),
        file: file.clone(),
        task: state.config.task,
        pe: state.config.pe.kind.name().to_string(),
        description: args.description.clone(),
        default: args.default,
        config: state.config.clone(),
        parameters: model.parameters(),
        bytes: bytes.len(),
        sha256: sha256_hex(&bytes),
        training: serde_json::json!({
            "data": state.data,
            "split": "POP909 songs with id % 10 not in {0, 5} (0: test, 5: validation)",
            "steps": state.step,
            "options": state.options,
            "final_valid_loss": state.valid_loss,
            "command": args.command,
        }),
        metrics,
        defaults,
    };
    write(&args, &dir, manifest, entry, &bytes)?;
    eprintln!(
        "shipped {} ({} parameters, {} bytes) as {}",
        args.run.display(),
        model.parameters(),
        bytes.len(),
        dir.join(&file).display()
    );
    Ok(())
}

/// The run's state, checked: a usable name, and a finished run unless `--unfinished`.
fn finished_state(args: &Args) -> Result<RunState, String> {
    if args.name.is_empty()
        || !args
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return Err("--name may hold only letters, digits and '-'".into());
    }
    let state: RunState = serde_json::from_str(&read(&args.run.join("run.json"))?)
        .map_err(|e| format!("{}/run.json: {e}", args.run.display()))?;
    if args.unfinished && args.default {
        return Err("an --unfinished run cannot be the default".into());
    }
    if state.step < state.options.steps && !args.unfinished {
        return Err(format!(
            "{} stopped at step {} of {}: finish it with `pianoformer train --resume` first \
             (or ship it as it is with --unfinished)",
            args.run.display(),
            state.step,
            state.options.steps
        ));
    }
    Ok(state)
}

/// What the manifest records of the run's evaluation: eval.json without what lives elsewhere
/// in the entry, with the sampled, plan and live panels where the run has them.
fn metrics(args: &Args, eval: &serde_json::Value) -> Result<serde_json::Value, String> {
    let mut metrics = eval.clone();
    if let Some(obj) = metrics.as_object_mut() {
        // The per-position curve and the chosen binarisation live elsewhere in the entry; the
        // per-song panel stays in the run's eval.json (the page fetches the manifest).
        obj.remove("positions");
        obj.remove("songs");
        obj.remove("binarize");
        obj.remove("temperature");
        obj.remove("hold_temperature");
        obj.remove("pitch_temperature");
        if obj.get("task").and_then(|t| t.as_str()) == Some("melody") {
            obj.remove("echo");
            // Every setting's repeat profile stays in eval.json; the test split's comes along.
            if let Some(sweep) = obj.get_mut("sweep").and_then(|s| s.as_array_mut()) {
                for f in sweep.iter_mut().filter_map(|f| f.as_object_mut()) {
                    f.remove("real_echo");
                    f.remove("written_echo");
                }
            }
        }
        obj.remove("decode");
        obj.remove("valid");
        obj.remove("valid_tones");
        obj.remove("model");
        // The colourful end's validation sweep (every temperature tried) stays in
        // eval.json too; what was chosen and its test scores come along.
        if let Some(colourful) = obj
            .get_mut("alternatives")
            .and_then(|a| a.get_mut("colourful"))
            .and_then(|c| c.as_object_mut())
        {
            colourful.remove("valid");
        }
    }
    // What a continuation plays when sampled (`eval --sample`), where the run has it: reading
    // everything, and reading at most its window (`--context`), as the page and CLI play it.
    for (file, key) in [
        ("samples.json", "sampled"),
        ("samples-context.json", "sampled_in_context"),
    ] {
        let (Some(obj), Ok(text)) = (
            metrics.as_object_mut(),
            std::fs::read_to_string(args.run.join(file)),
        ) else {
            continue;
        };
        let sampled: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("{}/{file}: {e}", args.run.display()))?;
        obj.insert(
            key.into(),
            serde_json::json!({
                "split": sampled["split"],
                "length": sampled["length"],
                "prompt_bars": sampled["prompt_bars"],
                "context": sampled["context"],
                "sampling": sampled["sampling"],
                "summary": sampled["summary"],
            }),
        );
    }
    // The plan-following panel (`eval --plan`), where the run has it.
    if let (Some(obj), Ok(text)) = (
        metrics.as_object_mut(),
        std::fs::read_to_string(args.run.join("plan.json")),
    ) {
        let mut plan: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("{}/plan.json: {e}", args.run.display()))?;
        if let Some(p) = plan.as_object_mut() {
            p.remove("samples");
            p.remove("model");
        }
        obj.insert("plan".into(), plan);
    }
    // The live panel (`eval --live`, test songs), where the run has it.
    if let (Some(obj), Ok(text)) = (
        metrics.as_object_mut(),
        std::fs::read_to_string(args.run.join("live.json")),
    ) {
        let mut live: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("{}/live.json: {e}", args.run.display()))?;
        if let Some(l) = live.as_object_mut() {
            l.remove("songs");
            l.remove("model");
        }
        obj.insert("live".into(), live);
    }
    Ok(metrics)
}

/// The entry in the manifest (the task's default moves to it when asked) and its weights
/// beside it.
fn write(
    args: &Args,
    dir: &Path,
    mut manifest: Manifest,
    entry: ModelEntry,
    bytes: &[u8],
) -> Result<(), String> {
    let file = entry.file.clone();
    if args.default {
        for m in manifest.models.iter_mut().filter(|m| m.task == entry.task) {
            m.default = false;
        }
    }
    manifest.models.retain(|m| m.name != entry.name);
    manifest.models.push(entry);
    std::fs::write(dir.join(&file), bytes)
        .map_err(|e| format!("cannot write {}: {e}", dir.join(&file).display()))?;
    let text = serde_json::to_string_pretty(&manifest).expect("manifest serialises");
    std::fs::write(&args.manifest, text + "\n")
        .map_err(|e| format!("cannot write {}: {e}", args.manifest.display()))?;
    Ok(())
}
