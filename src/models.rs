//! Shipped models: `www/models/manifest.json` lists each model's file, config, sha256, data
//! split and metrics; loading checks the bytes and the config before building the model, and
//! says plainly what does not match. The page fetches the same manifest and weights.

use burn::tensor::Device;
use serde::{Deserialize, Serialize};

use crate::generate::PianoSampling;
use crate::generate::binarize::Binarize;
use crate::model::config::{PerformerConfig, Task};
use crate::model::performer::{ModelError, Performer};

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
    /// How it plays unless told otherwise, chosen on the validation split (the same keys at
    /// the entry's top level, as `ship` writes them).
    #[serde(flatten)]
    pub defaults: ModelDefaults,
}

/// A model's own settings, chosen on validation songs by `eval` and kept in its manifest entry
/// (`ship`), a run's `eval.json` or a fine-tuned copy: what every caller (the page's Session,
/// the CLI, the benchmarks) fills a generation's unset options from. Each task reads the fields
/// it has (`studio::family`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelDefaults {
    /// Accompaniment: how probabilities become notes (chosen on the validation split).
    #[serde(default)]
    pub binarize: Option<Binarize>,
    /// The sampling temperature chosen on the validation split: a step-by-step
    /// accompaniment's piano, a continuation's tokens (`eval --plan`), a melody's rhythm.
    #[serde(default)]
    pub temperature: Option<f32>,
    /// Step-by-step accompaniment: the temperature of the hold draws, chosen with it.
    #[serde(default)]
    pub hold_temperature: Option<f32>,
    /// Melody: the temperature of a new note's pitch, chosen on validation with `temperature`
    /// (the rhythm's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pitch_temperature: Option<f32>,
    /// Melody: how strongly a repeated phrase leans towards its first occurrence
    /// ([`crate::generate::melody::MelodySampling::echo`]), chosen on validation with the
    /// temperatures (`None`: the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub echo: Option<f32>,
    /// Harmonization: the harmonic rhythm (counted in the training songs) and the emission
    /// weight (chosen on validation) that turn its probabilities into chords.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harmony: Option<crate::music::harmony::decode::HarmonyDecode>,
    /// Step-by-step accompaniment: the texture echo's lean, counted in the training songs'
    /// pianists and chosen on validation (`eval --texture --record`; `None`: no echo).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub texture_echo: Option<crate::music::texture::echo::EchoLean>,
    /// Step-by-step accompaniment: the strength the lean plays at when a person asks for none,
    /// chosen on validation (`None`: 1, the lean as measured). A model that reads the reference
    /// lane already answers a repeat itself, and needs less.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub texture_strength: Option<f32>,
}

impl ModelDefaults {
    /// How a step-by-step accompaniment model plays by default: the temperatures chosen on
    /// validation (1 where none was chosen).
    pub fn piano_sampling(&self) -> PianoSampling {
        PianoSampling::of_model(self.temperature, self.hold_temperature)
    }

    /// The harmonizer's decoding (the default rhythm where none was chosen).
    pub fn harmony(&self) -> crate::music::harmony::decode::HarmonyDecode {
        self.harmony.unwrap_or_default()
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub models: Vec<ModelEntry>,
    /// The velocity model for the piano the models write (`music::dynamics`), if shipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamics: Option<DynamicsEntry>,
    /// The learnt sustain pedal for the piano the models write (`music::pedal::model`), if
    /// shipped (the same kind of entry as the velocity model's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pedal: Option<DynamicsEntry>,
    /// The causal pedal a live take's piano is pedalled with as it plays (`pianoformer pedal
    /// --causal`), if shipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pedal_live: Option<DynamicsEntry>,
}

/// A shipped side model fitted by its own command — the velocity model (`pianoformer
/// dynamics`) or the pedal (`pianoformer pedal`): a JSON file beside the weights.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DynamicsEntry {
    pub name: String,
    /// The model's file, relative to the manifest.
    pub file: String,
    pub description: String,
    pub bytes: usize,
    pub sha256: String,
    /// What it was fitted on and how (data split, the command).
    pub training: serde_json::Value,
    /// Its figures on the test songs and the choice made on validation.
    #[serde(default)]
    pub metrics: serde_json::Value,
}

impl DynamicsEntry {
    /// The model, read from `dir` (the manifest's folder) and checked against the entry.
    pub fn load(&self, dir: &std::path::Path) -> Result<crate::music::dynamics::Dynamics, String> {
        crate::music::dynamics::Dynamics::from_json(&self.checked_text(dir)?)
    }

    /// The pedal model, read from `dir` and checked against the entry.
    pub fn load_pedal(
        &self,
        dir: &std::path::Path,
    ) -> Result<crate::music::pedal::model::PedalModel, String> {
        crate::music::pedal::model::PedalModel::from_json(&self.checked_text(dir)?)
    }

    /// The entry's file as text, refused when it is not the file the entry describes.
    fn checked_text(&self, dir: &std::path::Path) -> Result<String, String> {
        let path = dir.join(&self.file);
        let bytes =
            std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if bytes.len() != self.bytes || crate::model::sha256_hex(&bytes) != self.sha256 {
            return Err(format!(
                "{} is not the {} model the manifest describes (size or checksum)",
                path.display(),
                self.name
            ));
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

impl Manifest {
    pub fn parse(text: &str) -> Result<Self, ModelError> {
        serde_json::from_str(text)
            .map_err(|e| ModelError::Weights(format!("the model manifest is not valid: {e}")))
    }

    /// The entry called `name`, or the default of `task` when `name` is `None`.
    /// The model a live take plays with, as the page chooses it (`liveModels` in
    /// `www/live-plan.js`): a step-by-step accompaniment made to read the melody late (the
    /// default of those, else the first), else the default step-by-step one.
    pub fn live(&self) -> Option<&ModelEntry> {
        let stepwise = |m: &&ModelEntry| {
            m.task == Task::Accompaniment && m.config.conditioning.is_some_and(|c| c.piano)
        };
        let late = |m: &&ModelEntry| {
            stepwise(m) && m.config.conditioning.is_some_and(|c| c.melody_lag >= 1)
        };
        let by_default = |pick: &dyn Fn(&&ModelEntry) -> bool| {
            let mut all = self.models.iter().filter(|m| pick(m));
            let first = all.clone().next();
            all.find(|m| m.default).or(first)
        };
        by_default(&late).or_else(|| by_default(&stepwise))
    }

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

pub use crate::model::sha256_hex;

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

/// The first bytes of a model file exported from the page.
pub const MODEL_FILE_MAGIC: &[u8; 8] = b"PFMODEL1";

/// One file holding a model's manifest entry and its weights (what the page exports and
/// imports): the magic, the entry's JSON length (u32, little-endian), the entry, the weights.
pub fn pack_model(entry: &ModelEntry, weights: &[u8]) -> Vec<u8> {
    let json = serde_json::to_vec(entry).expect("an entry is always serialisable");
    let mut out = Vec::with_capacity(12 + json.len() + weights.len());
    out.extend_from_slice(MODEL_FILE_MAGIC);
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(weights);
    out
}

/// The entry and weights of a file from [`pack_model`], after checking everything that can be
/// checked without building the model: the format, the weights' size and sha256 against the
/// entry, and the config.
pub fn unpack_model(file: &[u8]) -> Result<(ModelEntry, Vec<u8>), ModelError> {
    let bad = |why: &str| ModelError::File(why.to_string());
    if file.len() < 12 || &file[..8] != MODEL_FILE_MAGIC {
        return Err(bad(
            "it does not start like a pianoformer model (export one from the Fine-tune panel)",
        ));
    }
    let len = u32::from_le_bytes(file[8..12].try_into().expect("4 bytes")) as usize;
    let json = 12usize
        .checked_add(len)
        .and_then(|end| file.get(12..end))
        .ok_or_else(|| bad("it is cut short"))?;
    let entry: ModelEntry = serde_json::from_slice(json)
        .map_err(|e| bad(&format!("its description is not readable ({e})")))?;
    let weights = &file[12 + len..];
    if weights.len() != entry.bytes {
        return Err(bad(&format!(
            "its weights are {} bytes but should be {}",
            weights.len(),
            entry.bytes
        )));
    }
    if sha256_hex(weights) != entry.sha256 {
        return Err(bad(
            "its weights do not match their checksum (the file is damaged)",
        ));
    }
    entry
        .config
        .validate_for(crate::music::tokens::VOCAB_SIZE)
        .map_err(ModelError::Config)?;
    Ok((entry, weights.to_vec()))
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
            defaults: ModelDefaults::default(),
        }
    }

    /// The shipped manifest reads and writes back as it is: each entry's defaults (binarize,
    /// temperatures, echo, harmony) sit at the entry's top level, where `ship` wrote them.
    #[test]
    fn the_shipped_manifest_round_trips_with_its_defaults() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("www/models/manifest.json");
        let text = std::fs::read_to_string(path).unwrap();
        let manifest = Manifest::parse(&text).unwrap();
        // As text, as `ship` writes it (a Value would widen every f32 to its f64 digits).
        let written: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(&manifest).unwrap()).unwrap();
        let read: serde_json::Value = serde_json::from_str(&text).unwrap();
        for (w, r) in written["models"]
            .as_array()
            .unwrap()
            .iter()
            .zip(read["models"].as_array().unwrap())
        {
            for (key, value) in r.as_object().unwrap() {
                assert_eq!(&w[key], value, "{}: {key}", r["name"]);
            }
            assert_eq!(
                w.as_object().unwrap().len(),
                r.as_object().unwrap().len(),
                "{}",
                r["name"]
            );
        }
        assert_eq!(written, read);
        let melody = manifest
            .models
            .iter()
            .find(|m| m.task == Task::Melody && m.default)
            .unwrap();
        assert!(melody.defaults.echo.is_some() && melody.defaults.pitch_temperature.is_some());
        let harmonizer = manifest
            .models
            .iter()
            .find(|m| m.task == Task::Harmonization)
            .unwrap();
        assert!(harmonizer.defaults.harmony.is_some());
    }

    #[test]
    fn model_files_round_trip_and_damage_is_refused_in_words() {
        let device = Device::flex();
        let config =
            PerformerConfig::tiny(Task::Accompaniment, VOCAB, PeConfig::new(PeKind::SineSpe));
        let model = Performer::new(&config, 5, &device).unwrap();
        let params = model.parameters();
        let bytes = model.to_bytes().unwrap();
        let file = pack_model(&entry(&bytes, config, params), &bytes);
        let (e, w) = unpack_model(&file).unwrap();
        assert_eq!(w, bytes);
        assert!(load_entry(&e, &w, &device).is_ok());
        let err = |f: &[u8]| unpack_model(f).unwrap_err().to_string();
        assert!(err(b"MThd\0\0\0\x06").contains("does not start like"));
        assert!(err(&file[..file.len() - 1]).contains("should be"));
        let mut damaged = file.clone();
        let last = damaged.len() - 1;
        damaged[last] ^= 1;
        assert!(err(&damaged).contains("checksum"));
        assert!(err(&file[..20]).contains("cut short"));
    }

    /// A forged model file is the page's most dangerous input: whoever makes it can make its
    /// size, checksum and config agree with any bytes. Seeded mutations of a real file's weights
    /// and description, with size and checksum recomputed so they reach the weight reader:
    /// every one is loaded or refused with an error, never a panic.
    #[test]
    fn forged_model_files_are_loaded_or_refused_never_a_panic() {
        use rand::{RngExt, SeedableRng};
        let device = Device::flex();
        let config =
            PerformerConfig::tiny(Task::Accompaniment, VOCAB, PeConfig::new(PeKind::SineSpe));
        let model = Performer::new(&config, 5, &device).unwrap();
        let params = model.parameters();
        let bytes = model.to_bytes().unwrap();
        let good = entry(&bytes, config, params);
        let mut rng = rand::rngs::StdRng::seed_from_u64(20261123);
        let (mut loaded, mut refused) = (0, 0);
        // 300 in the test suite; PIANOFORMER_FUZZ_ROUNDS runs a longer campaign.
        let rounds = std::env::var("PIANOFORMER_FUZZ_ROUNDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(300);
        for round in 0..rounds {
            let mut weights = bytes.clone();
            let mut e = good.clone();
            for _ in 0..rng.random_range(1..6) {
                let at = rng.random_range(0..weights.len());
                match rng.random_range(0..6) {
                    // The header and the tensor table sit at the start: hit them more often.
                    0 => weights[at % 256] ^= 1 << rng.random_range(0..8),
                    1 => weights[at] ^= 1 << rng.random_range(0..8),
                    2 => weights[at % 64] = [0, 0x7f, 0x80, 0xff][rng.random_range(0..4)],
                    3 => weights.truncate(at),
                    4 => weights.splice(at..at, [0xff; 9]).for_each(drop),
                    _ => e.parameters = rng.random_range(0..2 * params),
                }
            }
            e.bytes = weights.len();
            e.sha256 = sha256_hex(&weights);
            let file = pack_model(&e, &weights);
            let outcome = std::panic::catch_unwind(|| {
                let (e, w) = unpack_model(&file)?;
                load_entry(&e, &w, &device).map(|_| ())
            });
            match outcome {
                Ok(Ok(())) => loaded += 1,
                Ok(Err(err)) => {
                    assert!(!err.to_string().is_empty());
                    refused += 1
                }
                Err(_) => panic!("round {round}: loading a forged model panicked"),
            }
        }
        eprintln!("forged model files: {loaded} loaded, {refused} refused");
        assert!(refused > rounds / 3, "{loaded} loaded, {refused} refused");
        // A description promising more bytes than the file could ever hold.
        let mut huge = pack_model(&good, &bytes);
        huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(
            unpack_model(&huge)
                .unwrap_err()
                .to_string()
                .contains("cut short")
        );
        // A description promising a model far larger than the app runs is refused before
        // anything is allocated, dimension by dimension and as a whole.
        let refused = |change: &dyn Fn(&mut ModelEntry)| {
            let mut e = good.clone();
            change(&mut e);
            let err = unpack_model(&pack_model(&e, &bytes))
                .unwrap_err()
                .to_string();
            assert!(err.contains("more than this app runs"), "{err}");
        };
        refused(&|e| e.config.d_model = 1 << 40);
        refused(&|e| e.config.layers = 1000);
        refused(&|e| e.config.pe.realizations = usize::MAX);
        refused(&|e| {
            (e.config.d_model, e.config.d_ff, e.config.layers) = (4096, 16384, 64);
        });
        if let Some(dir) = std::env::var_os("PIANOFORMER_MODEL_SEED") {
            // The seed of the cargo-fuzz target `model_file` (see reports/robustness.md).
            std::fs::write(
                std::path::Path::new(&dir).join("tiny.pfmodel"),
                pack_model(&good, &bytes),
            )
            .unwrap();
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
            dynamics: None,
            pedal: None,
            pedal_live: None,
        };
        // The velocity model's entry survives a manifest's round trip (`ship` rewrites it), and
        // a manifest without one stays without.
        let text = serde_json::to_string(&manifest).unwrap();
        assert!(!text.contains("dynamics"));
        let with = Manifest {
            dynamics: Some(DynamicsEntry {
                name: "dynamics".into(),
                file: "dynamics.json".into(),
                description: String::new(),
                bytes: 3,
                sha256: "00".into(),
                training: serde_json::Value::Null,
                metrics: serde_json::Value::Null,
            }),
            ..manifest.clone()
        };
        let back = Manifest::parse(&serde_json::to_string(&with).unwrap()).unwrap();
        assert_eq!(back, with);
        assert_eq!(manifest.find(None, Task::Continuation).unwrap().name, "m");
        assert!(manifest.find(Some("x"), Task::Continuation).is_err());
        assert!(manifest.find(None, Task::Accompaniment).is_err());
    }
}
