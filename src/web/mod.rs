//! The JavaScript-facing API, used by the page's Web Worker (`www/worker.js`). Errors become
//! `JsError`s with a plain sentence here and nowhere else. Pieces travel as JSON text (the
//! shape of `www/piece.js`), notes streamed during generation as flat `Float64Array`s
//! (pitch, start, end, velocity per note) and attention rows as `Float32Array`s.

use std::cell::RefCell;
use std::collections::HashMap;

use js_sys::{Float32Array, Float64Array, Function, Promise, Uint8Array};
use serde::Serialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use crate::device::{self, Backend, BackendInfo, Preference};
use crate::generate::live::{Live, LiveChords};
use crate::model::config::Task;
use crate::model::performer::Performer;
use crate::models::{ModelEntry, load_entry, pack_model, unpack_model};
use crate::music::dynamics::Dynamics;
use crate::music::fixtures;
use crate::music::harmony::decode::HarmonyDecode;
use crate::music::midi::write_midi;
use crate::music::pedal::model::PedalModel;
use crate::music::piece::{Piece, PieceNote};
use crate::studio::{self, Progress};
use crate::tune;

mod tuner;
pub use tuner::Tuner;

#[wasm_bindgen(start)]
fn start() {
    crate::device::run_constructors();
    console_error_panic_hook::set_once();
}

/// Reads a MIDI file into a piece (JSON), detecting the melody, chords and phrases.
#[wasm_bindgen(js_name = readMidi)]
pub fn read_midi(bytes: &[u8], name: String) -> Result<String, JsError> {
    let piece = Piece::from_midi(bytes, &name)
        .map_err(|e| JsError::new(&format!("{name} could not be read: {e}")))?;
    serde_json::to_string(&piece).map_err(to_js)
}

/// Reads a MusicXML score (`.musicxml`, `.xml` or `.mxl`) into a piece (JSON): its chord
/// symbols fill the chord lane as written.
#[wasm_bindgen(js_name = readMusicXml)]
pub fn read_music_xml(bytes: &[u8], name: String) -> Result<String, JsError> {
    let piece = crate::music::musicxml::read_piece(bytes, &name)
        .map_err(|e| JsError::new(&format!("{name} could not be read: {e}")))?;
    serde_json::to_string(&piece).map_err(to_js)
}

/// A piece (JSON) as compressed MusicXML (`.mxl`): `lead` a lead sheet (the melody and the
/// chord lane's symbols), else every track as a part.
#[wasm_bindgen(js_name = writeMusicXml)]
pub fn write_music_xml(piece: &str, lead: bool) -> Result<Vec<u8>, JsError> {
    use crate::music::musicxml::{ScoreKind, write_mxl};
    let kind = if lead {
        ScoreKind::LeadSheet
    } else {
        ScoreKind::Full
    };
    write_mxl(&parse_piece(piece)?, kind).map_err(|e| JsError::new(&e))
}

/// A piece (JSON) as a type-1 MIDI file, one track per piece track.
#[wasm_bindgen(js_name = writeMidi)]
pub fn write_midi_bytes(piece: &str) -> Result<Vec<u8>, JsError> {
    parse_piece(piece)?.to_midi().map_err(to_js)
}

/// An empty piece to plan a song in: `bars` bars of `numerator/denominator` at `bpm`, its
/// chord cells and phrases set after (JSON, as `readMidi` returns a piece).
#[wasm_bindgen(js_name = planPiece)]
pub fn plan_piece(
    bars: usize,
    numerator: u8,
    denominator: u16,
    bpm: f64,
) -> Result<String, JsError> {
    let piece = Piece::from_plan("plan", bars, numerator, denominator, bpm).map_err(to_js)?;
    serde_json::to_string(&piece).map_err(to_js)
}

/// Checks a piece (JSON) from a share link or a saved session; the error says what is wrong.
#[wasm_bindgen(js_name = checkPiece)]
pub fn check_piece(piece: &str) -> Result<(), JsError> {
    parse_piece(piece).map(|_| ())
}

/// Bars `from..to` (from 0, the end excluded) of a piece's piano part (JSON: its generated
/// track, else the pianist's) as a texture to play like ("Use as texture"): the texture's
/// JSON, or what keeps them from being one, in words.
#[wasm_bindgen(js_name = textureFrom)]
pub fn texture_from(piece: &str, from: usize, to: usize) -> Result<String, JsError> {
    let piece = parse_piece(piece)?;
    let donor = crate::music::texture::donor::Donor::from_piece(&piece, from..to)
        .map_err(|e| JsError::new(&e))?;
    serde_json::to_string(&donor).map_err(to_js)
}

/// The bundled example: a MIDI file of `bars` bars written by the project's own code (a melody
/// on a I–V–vi–IV progression in `key`, with a piano part).
#[wasm_bindgen(js_name = exampleMidi)]
pub fn example_midi(key: u8, bars: u32) -> Vec<u8> {
    write_midi(&fixtures::song(key % 12, bars.clamp(1, 512) as u64))
}

/// Whether the step-by-step accompaniment and continuation run fused on WebGPU (one dispatch a
/// step or token, one read-back per 16; on by default) or through tensor ops: the page's
/// `?fused=0`, a way out if a browser's WebGPU mis-compiles the kernels (the self-check also
/// turns them off where they disagree with tensor ops), and the "before" of
/// `tools/bench-gpu-calls.mjs`.
#[cfg(feature = "gpu")]
#[wasm_bindgen(js_name = setFusedSteps)]
pub fn set_fused_steps(on: bool) {
    crate::generate::fused::set_enabled(on);
}

/// What fine-tuning a `task` model (`"accompaniment"` or `"continuation"`) would read of each
/// piece (a JSON array of pieces): `[{name, bars, melodyNotes, accompanimentNotes, tokens,
/// trainBars, heldOutBars, problem}]`, `problem` a sentence or null.
#[wasm_bindgen(js_name = inspectTuneFiles)]
pub fn inspect_tune_files(pieces: &str, task: &str, holdout: f64) -> Result<JsValue, JsError> {
    let pieces = parse_pieces(pieces)?;
    let task: Task = task.parse().map_err(|e: String| JsError::new(&e))?;
    to_value(&tune::inspect(&pieces, task, holdout.clamp(0.0, 0.5)))
}

/// A model file (what the Fine-tune panel exports) from a manifest entry (JSON) and weights.
#[wasm_bindgen(js_name = packModel)]
pub fn pack_model_file(entry: &str, weights: &[u8]) -> Result<Vec<u8>, JsError> {
    let entry: ModelEntry = serde_json::from_str(entry)
        .map_err(|e| JsError::new(&format!("the model's description is not readable: {e}")))?;
    Ok(pack_model(&entry, weights))
}

/// Reads a model file: `{entry (JSON text), weights (Uint8Array)}`, after checking its format,
/// size, checksum and config.
#[wasm_bindgen(js_name = unpackModel)]
pub fn unpack_model_file(file: &[u8]) -> Result<JsValue, JsError> {
    let (entry, weights) = unpack_model(file).map_err(to_js)?;
    ModelFile::to_js(&entry, &weights)
}

fn parse_pieces(text: &str) -> Result<Vec<Piece>, JsError> {
    let pieces: Vec<Piece> = serde_json::from_str(text)
        .map_err(|e| JsError::new(&format!("the files are not readable: {e}")))?;
    for p in &pieces {
        p.validate()
            .map_err(|e| JsError::new(&format!("{}: {e}", p.name)))?;
    }
    Ok(pieces)
}

fn to_value(value: &impl serde::Serialize) -> Result<JsValue, JsError> {
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(to_js)
}

fn parse_piece(text: &str) -> Result<Piece, JsError> {
    let piece: Piece = serde_json::from_str(text)
        .map_err(|e| JsError::new(&format!("the piece is not readable: {e}")))?;
    piece.validate().map_err(to_js)?;
    Ok(piece)
}

struct Loaded {
    model: Performer,
    entry: ModelEntry,
}

/// One model session in a Worker: the backend it runs on and the models loaded on it.
#[wasm_bindgen]
pub struct Session {
    backend: Backend,
    models: RefCell<HashMap<String, std::rc::Rc<Loaded>>>,
    /// What each model's generations kept for the next: its task's cache (a harmonizer's
    /// probabilities for the last melody it read).
    kept: RefCell<HashMap<String, studio::Kept>>,
    /// Each model's features from its last attention map's pass: another head or a layer no
    /// deeper over the same notes is drawn from them.
    maps: RefCell<HashMap<String, crate::generate::MapFeatures>>,
    /// The live take in progress (out of the cell while one of its calls runs).
    live: RefCell<Option<LiveRun>>,
    /// The velocity model for written accompaniments (`setDynamics`), if the page gave one.
    dynamics: RefCell<Option<std::rc::Rc<Dynamics>>>,
    /// The learnt pedal for written accompaniments (`setPedal`), if the page gave one.
    pedal: RefCell<Option<std::rc::Rc<PedalModel>>>,
}

/// A live take: its state and the models it plays with (the harmonizer with its decoding).
struct LiveRun {
    live: Live,
    /// The take's pedal (its options'), written when it stops.
    pedal: studio::PedalMode,
    model: std::rc::Rc<Loaded>,
    harmonizer: Option<(std::rc::Rc<Loaded>, HarmonyDecode)>,
}

fn live_chords(h: &Option<(std::rc::Rc<Loaded>, HarmonyDecode)>) -> Option<LiveChords<'_>> {
    h.as_ref()
        .map(|(h, decode)| LiveChords::new(&h.model, decode))
}

#[wasm_bindgen]
impl Session {
    /// Starts a session on `preference` (`"auto"`, `"gpu"` or `"cpu"`). `"auto"` falls back to
    /// the CPU when WebGPU is missing and says why in `backend().fallback_reason`.
    pub async fn create(preference: String) -> Result<Session, JsError> {
        let preference: Preference = preference.parse().map_err(to_js)?;
        let backend = device::init(preference).await.map_err(to_js)?;
        Ok(Session {
            backend,
            models: RefCell::new(HashMap::new()),
            kept: RefCell::new(HashMap::new()),
            maps: RefCell::new(HashMap::new()),
            live: RefCell::new(None),
            dynamics: RefCell::new(None),
            pedal: RefCell::new(None),
        })
    }

    /// `{kind, api, adapter, device_type, fallback_reason, label}` of the backend in use.
    pub fn backend(&self) -> Result<JsValue, JsError> {
        let info = &self.backend.info;
        to_value(&BackendView {
            info,
            label: info.label(),
        })
    }

    /// Runs the backend self-check (ops against the CPU reference, a few Adam steps; on WebGPU,
    /// unless `fused` is false, the fused steps against tensor ops, turned off where they
    /// differ) and returns `{ops: {matmul, cumsum, softmax}, fit: {losses}, fused?: {tokens,
    /// tokens_agree, read_backs, overridden, steps, steps_agree, on}}`. The Worker runs the two
    /// parts apart (`selfCheck(false)`, then `fusedCheck()`), so that it knows which one a lost
    /// device interrupted.
    #[wasm_bindgen(js_name = selfCheck)]
    pub async fn self_check(&self, fused: Option<bool>) -> Result<JsValue, JsError> {
        #[derive(Serialize)]
        struct Report {
            #[serde(flatten)]
            check: device::check::SelfCheck,
            #[cfg(feature = "gpu")]
            #[serde(skip_serializing_if = "Option::is_none")]
            fused: Option<crate::generate::check::FusedCheck>,
        }
        let device = &self.backend.device;
        let check = device::check::self_check(device).await.map_err(to_js)?;
        #[cfg(feature = "gpu")]
        let fused = if fused.unwrap_or(true) {
            self.fused_report().await?
        } else {
            None
        };
        #[cfg(not(feature = "gpu"))]
        let _ = fused;
        to_value(&Report {
            check,
            #[cfg(feature = "gpu")]
            fused,
        })
    }

    /// The fused steps' part of the self-check alone (null off WebGPU): `{tokens, tokens_agree,
    /// read_backs, overridden, steps, steps_agree, on}`.
    #[wasm_bindgen(js_name = fusedCheck)]
    pub async fn fused_check(&self) -> Result<JsValue, JsError> {
        #[cfg(feature = "gpu")]
        let report = to_value(&self.fused_report().await?)?;
        #[cfg(not(feature = "gpu"))]
        let report = JsValue::NULL;
        Ok(report)
    }

    /// Loads a model from its manifest entry (JSON) and weights, checking size, checksum and
    /// configuration. Returns `{name, task, pe, layers, heads, parameters}`.
    #[wasm_bindgen(js_name = loadModel)]
    pub fn load_model(&self, entry: &str, bytes: &[u8]) -> Result<JsValue, JsError> {
        let entry: ModelEntry = serde_json::from_str(entry).map_err(|e| {
            JsError::new(&format!("the model's manifest entry is not readable: {e}"))
        })?;
        let model = load_entry(&entry, bytes, &self.backend.device).map_err(|e| {
            JsError::new(&format!(
                "the model {} could not be loaded: {e}",
                entry.name
            ))
        })?;
        let info = to_value(&ModelInfo {
            name: &entry.name,
            task: model.config.task,
            pe: &entry.pe,
            layers: model.config.layers,
            heads: model.config.heads,
            parameters: model.parameters(),
            templates: model.pe.templates(0, &[0]).is_some(),
        })?;
        self.forget_kept(&entry.name);
        self.models.borrow_mut().insert(
            entry.name.clone(),
            std::rc::Rc::new(Loaded { model, entry }),
        );
        Ok(info)
    }

    /// Gives written accompaniments their dynamics from the velocity model in `json` (the
    /// manifest's `dynamics` file, its checksum checked by the page), or none for `""`.
    #[wasm_bindgen(js_name = setDynamics)]
    pub fn set_dynamics(&self, json: &str) -> Result<(), JsError> {
        let model = if json.is_empty() {
            None
        } else {
            Some(std::rc::Rc::new(
                Dynamics::from_json(json).map_err(|e| JsError::new(&e))?,
            ))
        };
        *self.dynamics.borrow_mut() = model;
        Ok(())
    }

    /// Gives written accompaniments the learnt sustain pedal of the model in `json` (the
    /// manifest's `pedal` file, its checksum checked by the page), or none for `""`.
    #[wasm_bindgen(js_name = setPedal)]
    pub fn set_pedal(&self, json: &str) -> Result<(), JsError> {
        let model = if json.is_empty() {
            None
        } else {
            Some(std::rc::Rc::new(
                PedalModel::from_json(json).map_err(|e| JsError::new(&e))?,
            ))
        };
        *self.pedal.borrow_mut() = model;
        Ok(())
    }

    /// "Pedal these bars": the piece (JSON) with its piano part's sustain pedal over bars
    /// `from`..`to` (from 0, `to` excluded) pedalled again by the learnt pedal given with
    /// `setPedal`, the rest kept. Returns the new piece (JSON).
    #[wasm_bindgen(js_name = repedal)]
    pub fn repedal(&self, piece: &str, from: usize, to: usize) -> Result<String, JsError> {
        let model = self.pedal.borrow().clone().ok_or_else(|| {
            JsError::new("no pedal model is loaded: the page ships none, or it could not be read")
        })?;
        let piece = parse_piece(piece)?;
        let out = studio::repedal(&piece, [from, to], &model)
            .map_err(|e| JsError::new(&e.to_string()))?;
        serde_json::to_string(&out).map_err(to_js)
    }

    /// True when the model `name` is loaded.
    #[wasm_bindgen(js_name = hasModel)]
    pub fn has_model(&self, name: &str) -> bool {
        self.models.borrow().contains_key(name)
    }

    /// Generation of `task` (a row of the studio's task table: `"accompaniment"`,
    /// `"continuation"`, `"melody"`, `"harmonization"`, `"live"`: the piece's melody played as
    /// a take at once, where `liveStart` streams one as it is played) with model `name` over the piece, with
    /// the task's settings (`options`, JSON). Returns the new piece (JSON), or, when `options`
    /// asks for alternatives (K > 1), `{alternatives: [piece, …]}` (the k-th written with seed
    /// `seed + k − 1`); a harmonizer returns `{from, cells, alternatives?}`.
    /// `on_progress({done, total, bars?, notes?, attention?, alternative?})` may return a
    /// promise of `false` to cancel (the error then says "generation was cancelled").
    pub async fn generate(
        &self,
        task: String,
        name: String,
        piece: String,
        options: String,
        on_progress: Function,
    ) -> Result<String, JsError> {
        let loaded = self.model(&name)?;
        let piece = parse_piece(&piece)?;
        let dynamics = self.dynamics.borrow().clone();
        let pedal = self.pedal.borrow().clone();
        let run = studio::Run {
            model: &loaded.model,
            defaults: &loaded.entry.defaults,
            device: &self.backend.device,
            dynamics: dynamics.as_ref(),
            pedal: pedal.as_ref(),
        };
        // Out of the cell while the model runs (no borrow is held across an await), then kept.
        let mut kept = self.kept.borrow_mut().remove(&name).unwrap_or_default();
        let out = studio::family::generate_json::<studio::TaskKind, _, _>(
            &task,
            &run,
            &piece,
            &options,
            &mut kept,
            progress_to(&on_progress, true),
        )
        .await;
        if self.still_loaded(&name, &loaded) {
            self.kept.borrow_mut().insert(name, kept);
        }
        out.map_err(to_js)
    }

    /// Starts a live take on the piece (JSON) with the step-by-step accompaniment `name` and,
    /// for the bars whose chords the lane leaves open, the causal harmonizer `harmonizer`
    /// (optional). `options`: [`studio::LiveOptions`] (JSON). Returns the take's grid
    /// ([`studio::LiveGrid`], JSON). A take already running is dropped.
    #[wasm_bindgen(js_name = liveStart)]
    pub async fn live_start(
        &self,
        name: String,
        harmonizer: Option<String>,
        piece: String,
        options: String,
    ) -> Result<String, JsError> {
        self.live.borrow_mut().take();
        let model = self.model(&name)?;
        let harmonizer = match harmonizer {
            Some(h) => {
                let h = self.model(&h)?;
                let decode = h.entry.defaults.harmony();
                Some((h, decode))
            }
            None => None,
        };
        let piece = parse_piece(&piece)?;
        let options: studio::LiveOptions = serde_json::from_str(&options)
            .map_err(|e| JsError::new(&format!("the live settings are not readable: {e}")))?;
        let chords = live_chords(&harmonizer);
        let pedal = self.pedal.borrow().clone();
        let (live, grid) = studio::live_start(
            &model.model,
            &studio::ModelPlay::of(&model.entry.defaults),
            chords,
            &piece,
            &options,
            pedal.as_deref(),
            &self.backend.device,
        )
        .await
        .map_err(to_js)?;
        *self.live.borrow_mut() = Some(LiveRun {
            live,
            pedal: options.pedal,
            model,
            harmonizer,
        });
        serde_json::to_string(&grid).map_err(to_js)
    }

    /// Hears the keys played since the last call (`events`: JSON `[[pitch, tick, on], …]`)
    /// and decides the piano's steps up to `step`. Returns `[{step, onsets, ends, chord?,
    /// pedal?}]` (JSON; `chord` where a beat's chord was decided live: its name, or `null` for
    /// none; `pedal`: the piano's sustain pedal moves, `[tick, value]`, where the take's pedal
    /// model is causal).
    #[wasm_bindgen(js_name = liveStep)]
    pub async fn live_step(&self, events: String, step: usize) -> Result<String, JsError> {
        let events: Vec<studio::KeyEvent> = serde_json::from_str(&events)
            .map_err(|e| JsError::new(&format!("the keys played are not readable: {e}")))?;
        let mut run = self.live.borrow_mut().take().ok_or_else(|| {
            JsError::new("no live take is running (or one of its steps is still being decided)")
        })?;
        let device = &self.backend.device;
        let LiveRun {
            live,
            model,
            harmonizer,
            ..
        } = &mut run;
        let chords = live_chords(harmonizer);
        let steps = studio::live_step(live, &model.model, chords, &events, step, device).await;
        // Back in its cell, unless another take started meanwhile.
        self.live.borrow_mut().get_or_insert(run);
        let steps = steps.map_err(to_js)?;
        let view: Vec<LiveStepView> = steps
            .into_iter()
            .map(|s| LiveStepView {
                step: s.step,
                onsets: s.onsets,
                ends: s.ends,
                chord: s.chord.map(|c| c.map(|c| c.name())),
                pedal: s.pedal,
            })
            .collect();
        serde_json::to_string(&view).map_err(to_js)
    }

    /// Ends the live take: the piano from its start, the chords decided live and the pedal
    /// over the take (learnt with the pedal given to `setPedal`, unless the take's options
    /// said otherwise) ([`studio::LiveResult`], JSON).
    #[wasm_bindgen(js_name = liveStop)]
    pub fn live_stop(&self) -> Result<String, JsError> {
        let run = self
            .live
            .borrow_mut()
            .take()
            .ok_or_else(|| JsError::new("no live take is running"))?;
        let model = self.pedal.borrow().clone();
        let result = studio::live_result(&run.live, run.pedal, model.as_deref());
        serde_json::to_string(&result).map_err(to_js)
    }

    /// The watched head's attention over the piece's notes as they stand, without generating
    /// (after the user picks another layer or head, edits notes, rewrites bars or plays a take):
    /// one teacher-forced pass of the task that runs the model's kind, or, for another head or
    /// a layer no deeper over the same notes, the features that pass kept; rows arrive through
    /// `on_progress` as in generation.
    pub async fn attention(
        &self,
        name: String,
        piece: String,
        options: String,
        on_progress: Function,
    ) -> Result<(), JsError> {
        let loaded = self.model(&name)?;
        let piece = parse_piece(&piece)?;
        let run = studio::Run {
            model: &loaded.model,
            defaults: &loaded.entry.defaults,
            device: &self.backend.device,
            dynamics: None,
            pedal: None,
        };
        // Out of the cell while the pass runs (another call may come meanwhile).
        let mut map = self.maps.borrow_mut().remove(&name).unwrap_or_default();
        let out = studio::family::attention::<studio::TaskKind, _, _>(
            &run,
            &piece,
            &options,
            &mut map,
            progress_to(&on_progress, false),
        )
        .await;
        if self.still_loaded(&name, &loaded) {
            self.maps.borrow_mut().insert(name, map);
        }
        out.map(|_| ()).map_err(to_js)
    }

    /// The positional templates `P_d(τ)` of a head at lags `0 .. lags`: `{dims, lags, values}`
    /// (values dims × lags), or `null` for encodings without templates (APE, F-StrIPE, none).
    pub async fn template(
        &self,
        name: String,
        layer: usize,
        head: usize,
        lags: usize,
    ) -> Result<JsValue, JsError> {
        let loaded = self.model(&name)?;
        let c = &loaded.model.config;
        if layer >= c.layers || head >= c.heads {
            return Err(JsError::new(&format!(
                "layer {layer}, head {head} does not exist in this model"
            )));
        }
        let lags: Vec<usize> = (0..lags.clamp(1, 4096)).collect();
        let Some(p) = loaded.model.pe.templates(layer, &lags) else {
            return Ok(JsValue::NULL);
        };
        let [_, dims, n] = p.dims();
        let values = device::read(p.narrow(0, head, 1))
            .await
            .map_err(|e| JsError::new(&e))?;
        to_value(&Templates {
            dims,
            lags: n,
            values: Js(Float32Array::from(&values[..])),
        })
    }
}

impl Session {
    #[cfg(feature = "gpu")]
    async fn fused_report(&self) -> Result<Option<crate::generate::check::FusedCheck>, JsError> {
        crate::generate::check::fused_steps(&self.backend.device)
            .await
            .map_err(|e| JsError::new(&format!("the fused steps could not be checked: {e}")))
    }

    /// Whether `loaded` is still the model called `name` (not replaced or unloaded while a
    /// call on it ran): only then is what the call kept put back.
    fn still_loaded(&self, name: &str, loaded: &std::rc::Rc<Loaded>) -> bool {
        self.models
            .borrow()
            .get(name)
            .is_some_and(|m| std::rc::Rc::ptr_eq(m, loaded))
    }

    /// Drops what calls on the model `name` kept (it is replaced, fine-tuned or unloaded).
    fn forget_kept(&self, name: &str) {
        self.kept.borrow_mut().remove(name);
        self.maps.borrow_mut().remove(name);
    }

    fn model(&self, name: &str) -> Result<std::rc::Rc<Loaded>, JsError> {
        self.models
            .borrow()
            .get(name)
            .cloned()
            .ok_or_else(|| JsError::new(&format!("the model {name} is not loaded")))
    }
}

/// The progress callback of a generation or an attention replay: reports to `callback`, with
/// the notes written or (`notes` false: the attention only) without. Every caller shares this
/// one closure type, so each generator is compiled into the wasm once.
fn progress_to(callback: &Function, notes: bool) -> impl FnMut(Progress) -> Answer + '_ {
    move |mut p| {
        if !notes {
            p.notes = None;
        }
        report(callback, p)
    }
}

/// Sends a progress report to JavaScript; resolves to whether to go on (a callback that
/// throws, or returns or resolves to `false`, cancels).
fn report(callback: &Function, p: Progress) -> Answer {
    let event = ProgressEvent {
        done: p.done,
        total: p.total,
        bars: p.bars,
        alternative: p.alternative,
        notes: p.notes.as_deref().map(|n| Js(flat_notes(n))),
        attention: p.attention.map(|a| AttentionEvent {
            start: a.start,
            keys: a.keys,
            values: Js(Float32Array::from(&a.values[..])),
        }),
    };
    let returned = to_value(&event)
        .map_err(JsValue::from)
        .and_then(|event| callback.call1(&JsValue::NULL, &event));
    match returned {
        Ok(v) if v.is_instance_of::<Promise>() => Answer::Later(JsFuture::from(Promise::from(v))),
        Ok(v) => Answer::Now(v.as_bool().unwrap_or(true)),
        Err(_) => Answer::Now(false),
    }
}

/// JavaScript's answer to a progress report: whether to go on, now or once its promise settles
/// (a rejected promise cancels).
enum Answer {
    Now(bool),
    Later(JsFuture),
}

impl std::future::Future for Answer {
    type Output = bool;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<bool> {
        match self.get_mut() {
            Answer::Now(go_on) => std::task::Poll::Ready(*go_on),
            Answer::Later(answer) => std::pin::Pin::new(answer)
                .poll(cx)
                .map(|v| v.map(|v| v.as_bool().unwrap_or(true)).unwrap_or(false)),
        }
    }
}

fn flat_notes(notes: &[PieceNote]) -> Float64Array {
    let flat: Vec<f64> = notes
        .iter()
        .flat_map(|&(p, s, e, v)| [p as f64, s as f64, e as f64, v as f64])
        .collect();
    Float64Array::from(&flat[..])
}

fn to_js(e: impl std::fmt::Display) -> JsError {
    JsError::new(&e.to_string())
}

// What JavaScript receives: serde structs made into plain objects by `to_value`; typed arrays
// pass through as the arrays they are (`Js`).

/// A typed array (or any JS value) inside a serialised struct, passed through as it is.
#[derive(Serialize)]
#[serde(transparent)]
struct Js<T: JsCast>(#[serde(with = "serde_wasm_bindgen::preserve")] T);

/// A model file's parts: `{entry (JSON text), weights (Uint8Array)}`.
#[derive(Serialize)]
struct ModelFile {
    entry: String,
    weights: Js<Uint8Array>,
}

impl ModelFile {
    /// The file's parts as JavaScript receives them.
    fn to_js(entry: &ModelEntry, weights: &[u8]) -> Result<JsValue, JsError> {
        to_value(&ModelFile {
            entry: serde_json::to_string(entry).map_err(to_js)?,
            weights: Js(Uint8Array::from(weights)),
        })
    }
}

#[derive(Serialize)]
struct BackendView<'a> {
    #[serde(flatten)]
    info: &'a BackendInfo,
    label: String,
}

#[derive(Serialize)]
struct ModelInfo<'a> {
    name: &'a str,
    task: Task,
    pe: &'a str,
    layers: usize,
    heads: usize,
    parameters: usize,
    templates: bool,
}

/// The positional templates of one head: values `dims × lags`.
#[derive(Serialize)]
struct Templates {
    dims: usize,
    lags: usize,
    values: Js<Float32Array>,
}

/// A progress report: `notes` as flat (pitch, start, end, velocity) quadruples.
#[derive(Serialize)]
struct ProgressEvent {
    done: usize,
    total: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    bars: Option<[usize; 2]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    alternative: Option<[usize; 2]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    notes: Option<Js<Float64Array>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    attention: Option<AttentionEvent>,
}

/// One decided step of a live take, as the page reads it.
#[derive(Serialize)]
struct LiveStepView {
    step: usize,
    onsets: Vec<u8>,
    ends: Vec<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    chord: Option<Option<String>>,
    /// The piano's sustain pedal moves the step starts, `[tick, value]` (none: left out).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pedal: Vec<(u64, u8)>,
}

#[derive(Serialize)]
struct AttentionEvent {
    start: usize,
    keys: usize,
    values: Js<Float32Array>,
}
