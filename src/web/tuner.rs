//! Fine-tuning from the page: a run on the session's backend driven one step at a time (so
//! pause, resume and cancel never block the Worker), and the tuned model kept as a new one.

use std::cell::RefCell;

use wasm_bindgen::prelude::*;

use super::{Loaded, ModelFile, Session, parse_pieces, to_js, to_value};
use crate::model::performer::Performer;
use crate::models::{ModelEntry, sha256_hex};
use crate::tune::{FileReport, FineTune, Progress, TuneOptions};

/// A fine-tuning run in progress. The page drives it one step at a time, which is how pause,
/// resume and cancel work without the Worker being blocked.
#[wasm_bindgen]
pub struct Tuner {
    /// Taken out while a step runs (a second call meanwhile is refused, not a panic).
    run: RefCell<Option<FineTune>>,
    base: ModelEntry,
    names: Vec<String>,
    options: TuneOptions,
    first_valid: RefCell<Option<f32>>,
}

#[wasm_bindgen]
impl Session {
    /// Starts fine-tuning the loaded model `base` on `pieces` (a JSON array of pieces) with
    /// `options` (JSON: steps, learningRate, batch, window, trainable, topLayers, holdout,
    /// seed, evalEvery). Training runs on this session's backend with autodiff.
    pub async fn tuner(
        &self,
        base: String,
        pieces: String,
        options: String,
    ) -> Result<Tuner, JsError> {
        let loaded = self.model(&base)?;
        let pieces = parse_pieces(&pieces)?;
        let mut options: TuneOptions = serde_json::from_str(&options).map_err(|e| {
            JsError::new(&format!("the fine-tuning settings are not readable: {e}"))
        })?;
        // The loss the base model was trained with, unless the page says otherwise.
        if options.pos_weight.is_none() {
            options.pos_weight = loaded.entry.training["options"]["pos_weight"].as_f64();
        }
        let bytes = loaded.model.to_bytes_async().await.map_err(to_js)?;
        let device = self.backend.device.clone().autodiff();
        let model = Performer::from_bytes(&loaded.model.config, &bytes, &device).map_err(to_js)?;
        let run = FineTune::new(model, &pieces, &options).map_err(to_js)?;
        Ok(Tuner {
            run: RefCell::new(Some(run)),
            base: loaded.entry.clone(),
            names: pieces.iter().map(|p| p.name.clone()).collect(),
            options,
            first_valid: RefCell::new(None),
        })
    }

    /// Makes the model trained so far by `tuner` a model of this session called `name`, ready
    /// to generate with. Returns `{entry (JSON text), weights (Uint8Array)}` for the page to
    /// keep. The weights are read asynchronously (WebGPU) and loaded back for inference.
    #[wasm_bindgen(js_name = keepTuned)]
    pub async fn keep_tuned(
        &self,
        tuner: &Tuner,
        name: String,
        description: String,
    ) -> Result<JsValue, JsError> {
        let name = name.trim().to_string();
        if name.is_empty() || name.len() > 80 {
            return Err(JsError::new("give the model a name of 1 to 80 characters"));
        }
        let run = tuner.take()?;
        let weights = run.model().to_bytes_async().await;
        let (step, losses, valid_losses, files, window) = (
            run.step(),
            run.losses.clone(),
            run.valid_losses.clone(),
            run.files.clone(),
            run.window,
        );
        tuner.put(run);
        let weights = weights.map_err(to_js)?;
        let config = tuner.base.config.clone();
        let model =
            Performer::from_bytes(&config, &weights, &self.backend.device).map_err(to_js)?;
        let last = |v: &[(usize, f32)]| v.last().map(|&(_, l)| l);
        let entry = ModelEntry {
            name: name.clone(),
            file: format!("{name}.bpk"),
            task: config.task,
            pe: tuner.base.pe.clone(),
            description: if description.trim().is_empty() {
                format!(
                    "{} fine-tuned for {step} steps on {} of your files.",
                    tuner.base.name,
                    tuner.names.len()
                )
            } else {
                description
            },
            default: false,
            parameters: model.parameters(),
            bytes: weights.len(),
            sha256: sha256_hex(&weights),
            config,
            training: serde_json::json!({
                "base": tuner.base.name,
                "base_sha256": tuner.base.sha256,
                "files": files,
                "options": tuner.options,
                "window": window,
                "steps": step,
                "where": "in the browser (pianoformer Fine-tune panel)",
            }),
            metrics: serde_json::json!({
                "train_loss": last(&losses),
                "held_out_loss_before": *tuner.first_valid.borrow(),
                "held_out_loss": last(&valid_losses),
            }),
            defaults: tuner.base.defaults,
        };
        let file = ModelFile::to_js(&entry, &weights)?;
        self.models
            .borrow_mut()
            .insert(name.clone(), std::rc::Rc::new(Loaded { model, entry }));
        self.forget_kept(&name);
        Ok(file)
    }

    /// Forgets the model `name` (a deleted fine-tuned model); true when it was loaded.
    #[wasm_bindgen(js_name = unloadModel)]
    pub fn unload_model(&self, name: &str) -> bool {
        self.forget_kept(name);
        self.models.borrow_mut().remove(name).is_some()
    }
}

/// A run's [`Progress`] and the base model's held-out loss, as `Tuner::snapshot` writes them
/// (JSON; `step` at the top level).
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Saved {
    #[serde(flatten)]
    run: Progress,
    first_valid: Option<f32>,
}

/// What a fine-tuning run reads, as [`Tuner::info`] gives it.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct RunInfo<'a> {
    files: &'a [FileReport],
    window: usize,
    valid_window: usize,
    validation_windows: usize,
    steps: usize,
    step: usize,
}

#[wasm_bindgen]
impl Tuner {
    /// `{files, window, validWindow, validationWindows, steps, step}`: what the run reads.
    pub fn info(&self) -> Result<JsValue, JsError> {
        let run = self.run.borrow();
        let run = run
            .as_ref()
            .ok_or_else(|| JsError::new("the run is busy with a step"))?;
        to_value(&RunInfo {
            files: &run.files,
            window: run.window,
            valid_window: run.valid_window,
            validation_windows: run.validation_windows(),
            steps: run.steps(),
            step: run.step(),
        })
    }

    /// One optimiser step: `{step, steps, loss, learningRate, validLoss}` (validLoss when this
    /// step measured the held-out loss, else null). A diverging run fails with the reason and
    /// its last good weights back in place.
    pub async fn step(&self) -> Result<JsValue, JsError> {
        let mut run = self.take()?;
        let report = run.train_step().await;
        self.put(run);
        to_value(&report.map_err(to_js)?)
    }

    /// Where the run stands, for [`Self::restore`] on another backend:
    /// `{progress (JSON text), weights (Uint8Array)}`. The weights are read asynchronously
    /// (WebGPU): the Worker keeps the last one while the run is on a GPU, so a lost device
    /// loses no step.
    pub async fn snapshot(&self) -> Result<JsValue, JsError> {
        let run = self.take()?;
        let out = run.snapshot().await;
        self.put(run);
        let (run, weights) = out.map_err(to_js)?;
        let saved = Saved {
            run,
            first_valid: *self.first_valid.borrow(),
        };
        let object = js_sys::Object::new();
        let progress = serde_json::to_string(&saved).map_err(|e| JsError::new(&e.to_string()))?;
        js_sys::Reflect::set(&object, &"progress".into(), &progress.into())
            .map_err(|_| JsError::new("the snapshot could not be built"))?;
        js_sys::Reflect::set(
            &object,
            &"weights".into(),
            &js_sys::Uint8Array::from(weights.as_slice()).into(),
        )
        .map_err(|_| JsError::new("the snapshot could not be built"))?;
        Ok(object.into())
    }

    /// Goes on from a `snapshot()` of a run with the same base, files and settings (taken on
    /// a device since lost): its weights, step and losses (the optimiser's moments start
    /// again).
    pub fn restore(&self, progress: &str, weights: &[u8]) -> Result<(), JsError> {
        let saved: Saved = serde_json::from_str(progress).map_err(|e| {
            JsError::new(&format!("the saved fine-tuning run is not readable: {e}"))
        })?;
        let mut run = self.take()?;
        let out = run.restore(saved.run, weights);
        self.put(run);
        out.map_err(to_js)?;
        *self.first_valid.borrow_mut() = saved.first_valid;
        Ok(())
    }

    /// The held-out loss of the model as it is now (null without held-out bars); the first
    /// call gives the base model's.
    pub async fn validate(&self) -> Result<JsValue, JsError> {
        let mut run = self.take()?;
        let loss = run.validate().await;
        self.put(run);
        let loss = loss.map_err(to_js)?;
        self.first_valid
            .borrow_mut()
            .get_or_insert_with(|| loss.unwrap_or(f32::NAN));
        Ok(loss.map_or(JsValue::NULL, |l| (l as f64).into()))
    }
}

impl Tuner {
    fn take(&self) -> Result<FineTune, JsError> {
        self.run
            .borrow_mut()
            .take()
            .ok_or_else(|| JsError::new("the fine-tuning run is busy with another request"))
    }

    fn put(&self, run: FineTune) {
        *self.run.borrow_mut() = Some(run);
    }
}
