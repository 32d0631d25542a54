//! Shipped models: `www/models/manifest.json` lists each model's file, config, sha256, data
//! split and metrics; loading checks the bytes and the config before building the model, and
//! says plainly what does not match. The page fetches the same manifest and weights.

use burn::tensor::Device;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::model::config::{PerformerConfig, Task};
use crate::model::performer::{ModelError, Performer};
use crate::train::eval::Binarize;

/// One shipped model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelEntry {
    /// Short name, unique in the manifest (`accompaniment-fstripe`).
    pub name: String,
    /// The weights file, relative to the manifest.
    pub file: String,
    pub task: Task,
    /// The positional encoding's name (`fstripe`, `sine_spe`, …), for the page's picker.
    pub pe: String,
    /// What the page shows about it.
    pub description: String,
    /// The default model of its task.
    #[serde(default)]
    pub default: bool,
    pub config: PerformerConfig,
    pub parameters: usize,
    pub bytes: usize,
    pub sha256: String,
    /// What it was trained on and how (data split, steps, the command).
    pub training: serde_json::Value,
    /// Evaluation results.
    #[serde(default)]
    pub metrics: serde_json::Value,
    /// Accompaniment: how probabilities become notes (chosen on the validation split).
    #[serde(default)]
    pub binarize: Option<Binarize>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub models: Vec<ModelEntry>,
}

impl Manifest {
    pub fn parse(text: &str) -> Result<Self, ModelError> {
        serde_json::from_str(text)
            .map_err(|e| ModelError::Weights(format!("the model manifest is not valid: {e}")))
    }

    /// The entry called `name`, or the default of `task` when `name` is `None`.
    pub fn find(&self, name: Option<&str>, task: Task) -> Result<&ModelEntry, ModelError> {
        let found = match name {
            Some(n) => self.models.iter().find(|m| m.name == n),
            None => self
                .models
                .iter()
                .find(|m| m.task == task && m.default)
                .or_else(|| self.models.iter().find(|m| m.task == task)),
        };
        found.ok_or_else(|| {
            let names: Vec<&str> = self.models.iter().map(|m| m.name.as_str()).collect();
            ModelError::Weights(match name {
                Some(n) => format!(
                    "no model called `{n}` in the manifest (it has {})",
                    names.join(", ")
                ),
                None => format!("the manifest has no {task:?} model"),
            })
        })
    }
}

/// The sha256 of `bytes`, as lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Builds the model of `entry` from `bytes`, after checking the bytes' size and sha256 and the
/// config.
pub fn load_entry(
    entry: &ModelEntry,
    bytes: &[u8],
    device: &Device,
) -> Result<Performer, ModelError> {
    if bytes.len() != entry.bytes {
        return Err(ModelError::Weights(format!(
            "{} should be {} bytes but is {}: the download is incomplete or the file was replaced",
            entry.file,
            entry.bytes,
            bytes.len()
        )));
    }
    let sum = sha256_hex(bytes);
    if sum != entry.sha256 {
        return Err(ModelError::Weights(format!(
            "{} does not match its checksum in the manifest (sha256 {sum}, expected {}): the file \
             is damaged or belongs to another model",
            entry.file, entry.sha256
        )));
    }
    entry
        .config
        .validate_for(crate::music::tokens::VOCAB_SIZE)
        .map_err(ModelError::Config)?;
    let model = Performer::from_bytes(&entry.config, bytes, device)?;
    if model.parameters() != entry.parameters {
        return Err(ModelError::Weights(format!(
            "{} has {} parameters but the manifest says {}",
            entry.file,
            model.parameters(),
            entry.parameters
        )));
    }
    Ok(model)
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::model::pe::{PeConfig, PeKind};
    use crate::music::tokens::VOCAB_SIZE as VOCAB;

    fn entry(bytes: &[u8], config: PerformerConfig, parameters: usize) -> ModelEntry {
        ModelEntry {
            name: "m".into(),
            file: "m.bpk".into(),
            task: config.task,
            pe: config.pe.kind.name().into(),
            description: String::new(),
            default: true,
            config,
            parameters,
            bytes: bytes.len(),
            sha256: sha256_hex(bytes),
            training: serde_json::Value::Null,
            metrics: serde_json::Value::Null,
            binarize: None,
        }
    }

    #[test]
    fn sha256_is_the_standard_digest() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn loading_checks_the_bytes_and_the_config() {
        let device = Device::flex();
        let config =
            PerformerConfig::tiny(Task::Continuation, VOCAB, PeConfig::new(PeKind::SineSpe));
        let model = Performer::new(&config, 3, &device).unwrap();
        let params = model.parameters();
        let bytes = model.to_bytes().unwrap();
        let good = entry(&bytes, config.clone(), params);
        assert!(load_entry(&good, &bytes, &device).is_ok());

        let mut damaged = bytes.clone();
        let mid = damaged.len() / 2;
        damaged[mid] ^= 1;
        let err = load_entry(&good, &damaged, &device)
            .unwrap_err()
            .to_string();
        assert!(err.contains("checksum"), "{err}");
        let err = load_entry(&good, &bytes[..10], &device)
            .unwrap_err()
            .to_string();
        assert!(err.contains("incomplete"), "{err}");

        // Right bytes, wrong config: refused in words, not a panic.
        let mut other =
            PerformerConfig::tiny(Task::Continuation, VOCAB, PeConfig::new(PeKind::SineSpe));
        other.d_model = 48;
        let err = load_entry(&entry(&bytes, other, params), &bytes, &device)
            .unwrap_err()
            .to_string();
        assert!(err.contains("weights"), "{err}");
        // A config whose sizes are not the task's: refused before any weights are read.
        let mut odd = config.clone();
        odd.input_dim = 40;
        let err = load_entry(&entry(&bytes, odd, params), &bytes, &device)
            .unwrap_err()
            .to_string();
        assert!(err.contains("reads 509"), "{err}");

        let manifest = Manifest {
            models: vec![good.clone()],
        };
        assert_eq!(manifest.find(None, Task::Continuation).unwrap().name, "m");
        assert!(manifest.find(Some("x"), Task::Continuation).is_err());
        assert!(manifest.find(None, Task::Accompaniment).is_err());
    }
}
