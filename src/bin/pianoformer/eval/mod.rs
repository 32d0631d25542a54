//! `pianoformer eval`: scores a trained model on POP909's held-out songs and writes
//! `eval.json` into its run folder (`report.rs` gathers runs into tables).
//!
//! Accompaniment (the F-StrIPE Table I setting): the binarisation threshold and gap are chosen
//! on 16-bar validation excerpts by onset F1, then CS, SSMD, GS and NDD are measured on test
//! excerpts of each requested length. Continuation (the SPE Table 6 / Figure 3 setting):
//! cross-entropy per token position on validation windows up to 4× the training length.

// The eval modes, each its own file; they share this module's Args and helpers (super::).
pub mod alternatives;
pub mod donor;
pub mod harmony;
pub mod live;
pub mod melody;
pub mod openings;
pub mod panel;
pub mod plan;
pub mod report;
pub mod sampled;
pub mod texture;

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::tensor::Device;
use pianoformer::data::corpus::{Corpus, WindowSpec};
use pianoformer::data::sources::{self, Parts};
use pianoformer::device::{self, Preference};
use pianoformer::eval::{Ablations, Predictions, excerpts, position_losses};
use pianoformer::model::config::Task;
use pianoformer::model::performer::Performer;
use pianoformer::music::metrics::mean_std;
use pianoformer::music::tokens::STEPS_PER_BEAT;
use pianoformer::train::session::RunState;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// accompaniment, continuation, harmonization, melody, or pedal (the shipped pedal model,
    /// or the one --model names, against the pianists and the chord-change rule).
    #[arg(long)]
    pub task: String,
    /// The training run's folder (eval.json is written there); for `--task pedal`, the pedal
    /// model's JSON file (`default`: www/models/pedal.json).
    #[arg(long)]
    pub model: PathBuf,
    /// The POP909 folder.
    #[arg(long)]
    pub data: PathBuf,
    /// Accompaniment: excerpt lengths in bars for the test scores.
    #[arg(long, value_delimiter = ',', default_value = "16,64")]
    pub bars: Vec<usize>,
    /// Accompaniment: excerpts per song at most.
    #[arg(long, default_value_t = 2)]
    pub per_song: usize,
    /// Continuation: window length in tokens (default: 4 × the training window); with
    /// --sample, the tokens of prompt and continuation together.
    #[arg(long)]
    pub length: Option<usize>,
    /// Continuation: sample from the first bars of every song of --split and score what the
    /// model plays (style similarity to the song per quarter, key, density, silences, grammar)
    /// into samples.json, instead of the cross-entropy by position. --model may then name a
    /// shipped model, with --out.
    #[arg(long)]
    pub sample: bool,
    /// Continuation: the plan-following panel instead — from --prompt-bars of every song, the
    /// next 16 bars under the song's own progression and a substituted one: chord tones of the
    /// plan, note rate and key against the real next bars, phrase echo. The temperature is
    /// chosen on the validation songs among --temperatures (as busy as the songs, chord tones
    /// closest to theirs), then the test songs are played with it (--split valid: the sweep
    /// alone); into plan.json. --model may name a shipped model, with --out or --record.
    #[arg(long)]
    pub plan: bool,
    /// Continuation: the path a person takes instead — every song's first --prompt-bars bars
    /// (default 8), and as many ending where a phrase starts mid-song, as MIDI files of their
    /// own continued for as many bars with the page's defaults: bars written and their meter,
    /// notes a beat, register and key against the prompt and the song's real next bars; into
    /// openings.json (--model may name a shipped model, with --out).
    #[arg(long)]
    pub openings: bool,
    /// --openings: where the prompts are taken (opening, mid-song).
    #[arg(long, value_delimiter = ',', default_value = "opening,mid-song")]
    pub places: Vec<String>,
    /// Step-by-step accompaniment: the live panel instead — every song's melody played in
    /// exactly in time, the piano deciding each sixteenth before the note played at it is
    /// heard, with the chord lane planned (the annotations) or open (chords decided live by
    /// --harmonizer), beside the same model offline; chord tones and density into live.json
    /// (--model may name a shipped model, with --out).
    #[arg(long)]
    pub live: bool,
    /// Step-by-step accompaniment: K alternatives of every song instead (seeds SEED … SEED +
    /// K − 1, written together as the page writes them, the annotated lanes, the model's own
    /// sampling): each one's chord tones and density against the pianist, and how much they
    /// differ (mean pairwise onset F1); into alternatives.json (--model may name a shipped
    /// model, with --out).
    #[arg(long)]
    pub alternatives: Option<usize>,
    /// --live: the causal harmonizer that decides the open lane's chords (a shipped model's
    /// name or a run folder).
    #[arg(long, default_value = "harmonizer-causal")]
    pub harmonizer: String,
    /// --live: whether a chord decided live may change a beat after a bar line or half bar as
    /// freely as on it (the page's choice: true).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub live_late_changes: bool,
    /// --plan: the phrase lane the model is given over the prompt and the planned bars:
    /// `song` (the song's own, as a person planning its form would set it) or `none` (an
    /// empty lane: what a model with F-StrIPE does without it).
    #[arg(long, default_value = "song")]
    pub phrase_lane: String,
    /// --plan with a shipped model: write the chosen temperature and the panel into its entry
    /// of the manifest (what the page and `generate` then play with) instead of a file;
    /// --texture: the echo's lean and the panel.
    #[arg(long)]
    pub record: bool,
    /// --sample, --plan: bars of each song given as the prompt (from its first bar with a
    /// note; 4 for --sample, 8 for --plan).
    #[arg(long)]
    pub prompt_bars: Option<usize>,
    /// --plan: the prompts' piano written by this accompaniment model as the page writes it
    /// (its texture echo, the shipped dynamics) in place of the pianists'
    /// (`eval/plan/prompt.rs`): how a continuation follows its plan after it.
    #[arg(long)]
    pub prompt_piano: Option<String>,
    /// --plan --prompt-piano: the texture echo's lean and strength of this texture panel's JSON
    /// (`eval --texture --out FILE`) instead of the model's own.
    #[arg(long)]
    pub prompt_texture: Option<PathBuf>,
    /// --sample, --task pedal: valid or test.
    #[arg(long, default_value = "test")]
    pub split: String,
    /// --task pedal: the lanes the default path's melody-only files are accompanied with, each
    /// in turn: `open` (as a dropped file gets them: phrases detected, chords by the
    /// harmonizer), `chords` (the annotated chords, phrases detected), `phrases` (the human
    /// phrases, chords by the harmonizer), `annotated` (both). The piano is the one
    /// --accompaniment names (`default`: the page's), at the page's seed plus --seed.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "open")]
    pub lanes: Vec<crate::pedal::Lanes>,
    /// --sample: sampling temperature (default 1); --openings: instead of the model's.
    #[arg(long)]
    pub temperature: Option<f32>,
    /// --sample: nucleus sampling's probability mass (default: the page's).
    #[arg(long, default_value_t = pianoformer::generate::limits::default("topP").unwrap_or(0.95) as f32)]
    pub top_p: f32,
    /// --sample, --plan: how strongly a bar the phrase lane marks as a repeat leans towards
    /// its phrase's first occurrence (0: not at all; default: what the page plays with).
    #[arg(long)]
    pub echo: Option<f32>,
    /// --sample, --plan: the new part's notes a beat as a multiple of the prompt's, on every
    /// bar (default: --sample as the model plays, --plan the page's default, which leaves
    /// planned bars to the model); the
    /// accompaniment panel and --texture: about this many times the onsets the model would
    /// play (as `generate --density`; default: as the model plays).
    #[arg(long)]
    pub density: Option<f32>,
    /// --openings, --sample, --plan: how strongly unplanned new bars keep the prompt's pitch
    /// classes (as `generate --key`; --openings: default the page's; the others: 0, as the
    /// model plays).
    #[arg(long)]
    pub key: Option<f32>,
    /// Where the scores go: a shipped model (which has no run folder) needs it; default: the
    /// run folder (eval.json, or samples.json, openings.json … for a panel).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Continuation: windows at most.
    #[arg(long, default_value_t = 64)]
    pub windows: usize,
    /// Continuation with --sample: the most tokens the model reads at once, as `generate` and
    /// the page play it; past it, it starts again from the piece's first bars and its last
    /// ones (0: it reads everything). The scores then go to samples-context.json.
    #[arg(long, default_value_t = 0)]
    pub context: usize,
    /// Step-by-step accompaniment: the sampling temperatures tried on 16-bar validation
    /// excerpts: of those that play 0.8-1.25x as many notes as the pianist there, the one
    /// with the best chroma similarity is kept (else the density nearest the pianist's).
    /// Continuation --plan: those tried on the validation songs (see --plan).
    #[arg(long, value_delimiter = ',', default_value = "0.8,0.9,1.0,1.1,1.2")]
    pub temperatures: Vec<f32>,
    /// Melody: the pitch temperatures tried on the validation songs at the (rhythm's)
    /// temperature chosen there.
    #[arg(long, value_delimiter = ',', default_value = "0.6,0.75,0.9")]
    pub pitch_temperatures: Vec<f32>,
    /// Melody: the echoes tried on the validation songs at the temperature chosen there (how
    /// strongly a repeated phrase leans towards its first occurrence; --echo tries one).
    #[arg(long, value_delimiter = ',', default_value = "0,1.5,2.5,3,3.5,4.5")]
    pub echoes: Vec<f32>,
    /// Melody: melodies written a song at each setting (the k-th with seed SEED + song +
    /// 10 000·k; the first is what one sample writes), counted together: one melody a song
    /// moves the validation distance by about ±0.06 with the seed alone (reports/melody.md).
    #[arg(long, default_value_t = 1)]
    pub samples: usize,
    /// Step-by-step accompaniment: the hold temperatures tried with each temperature (the
    /// temperature of the draws that decide whether a sounding note goes on, on top of the
    /// temperature). Of the settings that strike and hold 0.8-1.25x as many notes as the
    /// pianist on validation, the best chroma similarity is kept.
    #[arg(long, value_delimiter = ',', default_value = "1.0,0.7,0.5")]
    pub hold_temperatures: Vec<f32>,
    /// Step-by-step accompaniment: threads that sample songs side by side (default: every
    /// core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Accompaniment: measure only what the outputs rest on (validation loss with uniform
    /// attention, with the labels at zero or from another song) and add it to the run's
    /// existing eval.json, leaving its other scores as they are.
    #[arg(long)]
    pub ablations_only: bool,
    /// Harmonization: the accompaniment model played from each lane (the harmonizer's, the
    /// detector's, the annotations') on the test songs, scored by its chord tones against the
    /// annotated chords: a shipped model's name, a run folder, `default`, or `none` to skip.
    /// `--task pedal`: the accompaniment the default path's lengths are measured with.
    #[arg(long, default_value = "default")]
    pub accompaniment: String,
    /// Songs per split at most (quick runs).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Step-by-step accompaniment: the texture panel instead — the echo's lean counted in the
    /// training songs' pianists, then every song of --split accompanied with its annotated
    /// lanes at each of --strengths and with the phrases detected in its melody alone; ILS
    /// (how much of the song's form the piano shows) against the annotated phrases, beside
    /// the pianist's, with chord tones and density; into texture.json (--model may name a
    /// shipped model, with --out).
    #[arg(long)]
    pub texture: bool,
    /// --texture: the donor panel instead — every song of --split accompanied as asked to play
    /// like each texture of the gallery (settings/textures.json) at each of --strengths, over
    /// its annotated chords and a substituted progression: its onsets' likeness to the donor
    /// beside the pianists' same-letter likeness, chord tones, the melody doubled and crossed;
    /// into donors.json.
    #[arg(long, requires = "texture")]
    pub donors: bool,
    /// --texture: lead sheets instead of POP909 — every MusicXML file under --data (OpenEWLD's
    /// `dataset`, say: a melody and its chord symbols, no labels) read as the page reads it
    /// (its phrases detected), accompanied with the model's texture echo and without, and
    /// scored by ILS against its detected phrases, with chord tones; into --out (default
    /// runs/lead-sheets-texture.json).
    #[arg(long, requires = "texture", conflicts_with = "donors")]
    pub lead_sheets: bool,
    /// --texture: the echo strengths tried (0: none; 1: the lean as the training songs'
    /// pianists justify it).
    #[arg(long, value_delimiter = ',', default_value = "0,1")]
    pub strengths: Vec<f32>,
    /// --texture: the lean's evidence: `own` (the model's manifest entry's, as the page plays
    /// it), or counted in the training songs' pianists: what a repeat tells `alone`,
    /// `beyond-others` (beyond what bars of another letter of the same song tell), `by-melody`
    /// (alone, counted apart by how alike the repeat's bar sings to the bar it answers),
    /// `by-latest` (by melody, and where a phrase returns a third time or more, by what its
    /// first and its latest earlier occurrences both held), `pasting` (each repeated bar's
    /// register drawn pasted or played anew, as often as the pianists paste, each kind with its
    /// own lean by melody), or `keeping` (pasting, and a bar of a phrase heard for the first
    /// time drawn pasted from the bar before or played anew, as the pianists keep a texture
    /// through a section). by-latest was the default from session 36 (within 0.000–0.021 of
    /// the pianists' ILS on three validation seeds); since session 40 the default model ships
    /// keeping, re-voiced, its steps at the density measured on training songs
    /// (`--revoice --measure-echo-density 60`): as near the pianists' ILS, nearer their
    /// likeness within a phrase and their share of repeats pasted, and a continuation after
    /// it follows its planned chords as well (reports/accompaniment.md, "The echo's own
    /// density").
    #[arg(long, default_value = "own")]
    pub lean: String,
    /// --texture: take from the lean what the model already plays: the same counts taken of
    /// its own accompaniments (no echo) of this many training songs under their lanes
    /// (`music::texture::echo::beyond`; 0: the pianists' lean as it stands).
    #[arg(long, default_value_t = 0)]
    pub beyond_model: usize,
    /// --texture: where the chord under a step differs from the answered one's, a pitch struck
    /// then that is no tone of the chord now leans as another key of its register
    /// (`music::texture::echo::EchoLean::revoices`).
    #[arg(long)]
    pub revoice: bool,
    /// --texture: the lean moves a step's onsets between pitches and leaves their number to
    /// the model (`music::texture::echo::EchoLean::keeps_count`).
    #[arg(long)]
    pub keep_count: bool,
    /// --texture: the density of the steps the echo leans, and only those
    /// (`music::texture::echo::EchoLean::density`; default: the model's own).
    #[arg(long)]
    pub echo_density: Option<f32>,
    /// --texture: that density kept per song as it is written, starting from the measured
    /// one: the shift of the leaned steps' odds that gives them the count the model's own
    /// odds expect there (`free`), never busier than the measured one (`capped`), or `off`
    /// (`music::texture::echo::SongDensityRule`; default: the model's own).
    #[arg(long)]
    pub song_density: Option<pianoformer::music::texture::echo::SongDensityRule>,
    /// --texture: that density measured in the model's accompaniments of this many training
    /// songs, with the echo at --strengths (one) and without (`eval/texture/density.rs`).
    #[arg(long, default_value_t = 0)]
    pub measure_echo_density: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// `--task pedal`: play each song of the default path at the page's seed + --seed + its
    /// POP909 number, so the songs' random draws are independent (at one seed they share them,
    /// and the panel's figures move with the seed as a whole: reports/pedal.md). `--texture`:
    /// each song at --seed + a number drawn from its name.
    #[arg(long)]
    pub seed_per_song: bool,
    #[arg(long, default_value = "cpu")]
    pub backend: String,
}

fn run_state(dir: &Path) -> Option<RunState> {
    let text = std::fs::read_to_string(dir.join("run.json")).ok()?;
    serde_json::from_str(&text).ok()
}

impl Args {
    /// `--threads`, else every core.
    pub fn threads(&self) -> usize {
        self.threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// `--echo`, checked against its range (the settings file), or the page's default.
    pub fn echo(&self) -> Result<f32, String> {
        checked("echo", self.echo).map(|e| e.unwrap_or(pianoformer::generate::DEFAULT_ECHO))
    }

    /// `--density`, checked against its range (the settings file).
    pub fn density(&self) -> Result<Option<f32>, String> {
        checked("density", self.density)
    }

    /// `--key`, checked against its range (the settings file).
    pub fn key(&self) -> Result<Option<f32>, String> {
        checked("key", self.key)
    }

    /// `--temperature`, checked against the continuation's range (the settings file).
    pub fn temperature(&self) -> Result<Option<f32>, String> {
        checked("temperature", self.temperature)
    }

    /// `--top-p`, checked against its range (the settings file).
    pub fn top_p(&self) -> Result<f32, String> {
        checked("topP", Some(self.top_p)).map(|p| p.unwrap_or(self.top_p))
    }

    /// Where a panel's scores go: `--out`, else `file` in the run's folder (a shipped model,
    /// which has none, needs `--out`).
    pub fn scores_path(&self, file: &str) -> Result<PathBuf, String> {
        match (&self.out, self.model.join("model.bpk").is_file()) {
            (Some(out), _) => Ok(out.clone()),
            (None, true) => Ok(self.model.join(file)),
            (None, false) => Err(format!(
                "{} is not a training run's folder: say where the scores go with --out",
                self.model.display()
            )),
        }
    }

    /// The device of `--backend`, once `--data` is known to be the POP909 folder (`why`: what
    /// the panel uses it for, in words).
    pub fn pop909_device(&self, why: &str) -> Result<burn::tensor::Device, String> {
        if !sources::is_pop909(&self.data) {
            return Err(format!(
                "{} is not the POP909 folder ({why})",
                self.data.display()
            ));
        }
        let preference: Preference = self.backend.parse().map_err(|e| format!("{e}"))?;
        let backend = pollster::block_on(device::init(preference)).map_err(|e| format!("{e}"))?;
        Ok(backend.device.clone())
    }

    /// The songs of `--split` alone (`test`: the test songs, else the validation songs),
    /// `--limit` of them at most; says which were read.
    pub fn load_split(&self, test: bool) -> Result<sources::Loaded, String> {
        let parts = Parts {
            train: false,
            valid: !test,
            test,
        };
        let data = sources::load(&self.data, parts, self.limit)?;
        eprintln!("data: {}", data.description);
        Ok(data)
    }

    /// `--split`: whether it names the test songs (else the validation songs).
    pub fn test_split(&self) -> Result<bool, String> {
        match self.split.as_str() {
            "test" => Ok(true),
            "valid" | "validation" => Ok(false),
            other => Err(format!("--split is valid or test, not {other:?}")),
        }
    }
}

/// Changes the shipped model `loaded`'s manifest entry with `change` (which says what it
/// wrote) and writes the manifest back.
pub fn record(
    loaded: &crate::models::Loaded,
    change: impl FnOnce(&mut pianoformer::models::ModelEntry) -> String,
) -> Result<(), String> {
    let name = loaded
        .source
        .split_whitespace()
        .next()
        .ok_or("no model name")?
        .to_string();
    let path = crate::models::find_manifest(None)?;
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut manifest = pianoformer::models::Manifest::parse(&text).map_err(|e| e.to_string())?;
    let entry = manifest
        .models
        .iter_mut()
        .find(|m| m.name == name)
        .ok_or_else(|| format!("--record: {name} is not a shipped model (ship the run first)"))?;
    let what = change(entry);
    let text = serde_json::to_string_pretty(&manifest).expect("manifest serialises");
    std::fs::write(&path, text + "\n")
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    eprintln!("recorded {what} in {} ({name})", path.display());
    Ok(())
}

/// The panel a flag asks for instead of the plain evaluation, if any.
fn panel_of(args: &Args) -> Option<fn(Args) -> Result<(), String>> {
    if args.openings {
        Some(openings::run)
    } else if args.plan {
        Some(plan::run)
    } else if args.live {
        Some(live::run)
    } else if args.alternatives.is_some() {
        Some(alternatives::run)
    } else if args.texture && args.lead_sheets {
        Some(texture::lead_sheets::run)
    } else if args.texture && args.donors {
        Some(donor::run)
    } else if args.texture {
        Some(texture::run)
    } else if args.sample {
        Some(sampled::run)
    } else {
        None
    }
}

/// `--task pedal`: the shipped (or given) pedal model on the songs of `--split`.
fn pedal(args: &Args) -> Result<(), String> {
    let model = if args.model.as_os_str() == "default" {
        PathBuf::from("www/models/pedal.json")
    } else {
        args.model.clone()
    };
    let split = match args.split.as_str() {
        "valid" | "validation" => pianoformer::music::pop909::Split::Validation,
        "test" => pianoformer::music::pop909::Split::Test,
        other => return Err(format!("--split is valid or test, not {other}")),
    };
    let path = crate::pedal::DefaultPath {
        accompaniment: &args.accompaniment,
        lanes: &args.lanes,
        seed: args.seed,
        per_song: args.seed_per_song,
    };
    crate::pedal::eval(&args.data, &model, args.limit, split, &path)
}

/// How `eval --task K` judges a model of each kind: one row a kind.
struct Judged {
    kind: Task,
    /// Whether it reads the training songs too (the harmonizer counts their harmonic rhythm;
    /// the melody model's repeats are set beside theirs), and the test songs.
    train: bool,
    test: bool,
    /// Whether the ablations (uniform attention, the labels zeroed or another song's) are
    /// measured beside it.
    ablations: bool,
    run: Judge,
}

/// A kind's evaluation: the model, the POP909 splits read, the flags, the device and the run
/// it came from (if any), to the scores written to eval.json.
type Judge = fn(
    &Performer,
    &sources::Loaded,
    &Args,
    &Device,
    Option<&RunState>,
) -> Result<serde_json::Value, String>;

const JUDGED: &[Judged] = &[
    Judged {
        kind: Task::Accompaniment,
        train: false,
        test: true,
        ablations: true,
        // The product's step-by-step accompaniment by its sampled panel, else the windows.
        run: |model, data, args, device, _| {
            if model.config.is_autoregressive() {
                panel::run(model, data, args, device)
            } else {
                accompaniment_windows(model, data, args, device)
            }
        },
    },
    Judged {
        kind: Task::Continuation,
        train: false,
        test: false,
        ablations: false,
        run: |model, data, args, _, state| continuation_curve(model, data, args, state),
    },
    Judged {
        kind: Task::Harmonization,
        train: true,
        test: true,
        ablations: false,
        run: |model, data, args, device, _| harmony::run(model, data, args, device),
    },
    Judged {
        kind: Task::Melody,
        train: true,
        test: true,
        ablations: false,
        run: |model, data, args, device, _| melody::run(model, data, args, device),
    },
];

pub fn run(args: Args) -> Result<(), String> {
    if args.task == "pedal" {
        return pedal(&args);
    }
    let panel = panel_of(&args);
    if let Some(panel) = panel {
        return panel(args);
    }
    let task: Task = args.task.parse()?;
    let judged = JUDGED
        .iter()
        .find(|j| j.kind == task)
        .ok_or_else(|| format!("no evaluation is written for a {task:?} model"))?;
    if args.bars.contains(&0) || args.per_song == 0 || args.windows == 0 {
        return Err("--bars, --per-song and --windows must be positive".into());
    }
    if args.length.is_some_and(|l| l < 4) {
        return Err("--length must be at least 4 tokens".into());
    }
    let preference: Preference = args.backend.parse().map_err(|e| format!("{e}"))?;
    let backend = pollster::block_on(device::init(preference)).map_err(|e| format!("{e}"))?;
    let device = backend.device.clone();
    let spec = args.model.display().to_string();
    // A run's folder takes its eval.json; a shipped model's scores go where --out says.
    let path = args.scores_path("eval.json")?;
    if args.ablations_only && !args.model.join("model.bpk").is_file() {
        return Err(format!(
            "{spec} is not a training run's folder (no model.bpk): --ablations-only adds to a run's eval.json"
        ));
    }
    let loaded = crate::models::load(&spec, task, None, &device)?;
    let model = &loaded.model;
    let state = run_state(&args.model);
    if !sources::is_pop909(&args.data) {
        return Err(format!(
            "{} is not the POP909 folder (evaluation uses its validation and test split)",
            args.data.display()
        ));
    }
    let started = Instant::now();
    let data = sources::load(
        &args.data,
        Parts {
            train: judged.train,
            valid: true,
            test: judged.test && !args.ablations_only,
        },
        args.limit,
    )?;
    eprintln!("data: {}", data.description);
    if args.ablations_only {
        if !judged.ablations {
            return Err("--ablations-only is for accompaniment models".into());
        }
        return add_ablations(model, &data.valid, &args);
    }
    let mut result = (judged.run)(model, &data, &args, &device, state.as_ref())?;
    if judged.ablations {
        let ablations = ablations(model, &data.valid, args.per_song, args.seed)?;
        if let Some(obj) = result.as_object_mut() {
            obj.insert("ablations".into(), serde_json::json!(ablations));
        }
    }
    let description = &data.description;
    describe(&mut result, &loaded, state.as_ref(), description, started);
    std::fs::write(&path, serde_json::to_vec_pretty(&result).expect("json"))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    eprintln!("written to {}", path.display());
    Ok(())
}

/// `--ablations-only`: the ablations of an evaluated run, added to its eval.json.
fn add_ablations(model: &Performer, valid: &Corpus, args: &Args) -> Result<(), String> {
    let path = args.model.join("eval.json");
    let mut result = read_eval(&args.model)?;
    let a = ablations(model, valid, args.per_song, args.seed)?;
    let obj = result
        .as_object_mut()
        .ok_or_else(|| format!("{} is not an evaluation", path.display()))?;
    obj.insert("ablations".into(), serde_json::json!(a));
    std::fs::write(&path, serde_json::to_vec_pretty(&result).expect("json"))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    eprintln!("added to {}", path.display());
    Ok(())
}

/// What an evaluation was of: the model, its encoding, its training steps, the data, the time.
fn describe(
    result: &mut serde_json::Value,
    loaded: &crate::models::Loaded,
    state: Option<&RunState>,
    data: &str,
    started: Instant,
) {
    let model = &loaded.model;
    let Some(obj) = result.as_object_mut() else {
        return;
    };
    obj.insert("model".into(), serde_json::json!(loaded.source));
    obj.insert("pe".into(), serde_json::json!(model.config.pe.kind.name()));
    obj.insert("gated".into(), serde_json::json!(model.config.pe.gated));
    obj.insert(
        "levels".into(),
        serde_json::json!(model.config.pe.structure_levels()),
    );
    obj.insert("steps".into(), serde_json::json!(state.map(|s| s.step)));
    obj.insert("data".into(), serde_json::json!(data));
    obj.insert(
        "seconds".into(),
        serde_json::json!(started.elapsed().as_secs_f64()),
    );
}

/// A whole-window accompaniment model: its binarisation chosen on 16-bar validation excerpts,
/// then CS, SSMD, GS, NDD and onset F1 on test excerpts of each of `--bars`.
fn accompaniment_windows(
    model: &Performer,
    data: &sources::Loaded,
    args: &Args,
    device: &Device,
) -> Result<serde_json::Value, String> {
    let spec16 = WindowSpec::for_model(&model.config, 16 * 4 * STEPS_PER_BEAT);
    let valid = excerpts(&data.valid, &spec16, args.per_song);
    if valid.is_empty() {
        return Err(
            "no validation song has 16 annotated bars with an accompaniment: the \
             threshold cannot be chosen"
                .into(),
        );
    }
    let preds = pollster::block_on(Predictions::run(model, valid, args.seed, device))
        .map_err(|e| e.to_string())?;
    let (binarize, valid_f1) = preds.choose();
    eprintln!(
        "validation: threshold {} and gap {} give onset F1 {valid_f1:.3} on {} excerpts",
        binarize.threshold,
        binarize.gap,
        preds.items.len()
    );
    let mut lengths = serde_json::Map::new();
    for &bars in &args.bars {
        let spec = WindowSpec::for_model(&model.config, bars * 4 * STEPS_PER_BEAT);
        let test = excerpts(&data.test, &spec, args.per_song);
        if test.is_empty() {
            eprintln!("no test song has {bars} annotated bars; skipped");
            continue;
        }
        let preds = pollster::block_on(Predictions::run(model, test, args.seed, device))
            .map_err(|e| e.to_string())?;
        let scores = preds.scores(binarize, STEPS_PER_BEAT);
        let stat = |f: fn(&pianoformer::music::metrics::AccompanimentScores) -> f64| {
            let v: Vec<f64> = scores.iter().map(f).collect();
            let (m, s) = mean_std(&v);
            serde_json::json!({"mean": m, "std": s})
        };
        let entry = serde_json::json!({
            "excerpts": scores.len(),
            "cs": stat(|s| s.cs),
            "ssmd": stat(|s| s.ssmd),
            "gs": stat(|s| s.gs),
            "ndd": stat(|s| s.ndd),
            "onset_f1": preds.onset_f1(binarize),
        });
        eprintln!("test, {bars} bars: {entry}");
        lengths.insert(format!("{bars}"), entry);
    }
    Ok(serde_json::json!({
        "task": "accompaniment",
        "binarize": binarize,
        "valid_onset_f1": valid_f1,
        "test": lengths,
    }))
}

/// A continuation model: the validation cross-entropy by position over windows of `--length`
/// tokens (4× its training window by default), and by quarter.
fn continuation_curve(
    model: &Performer,
    data: &sources::Loaded,
    args: &Args,
    state: Option<&RunState>,
) -> Result<serde_json::Value, String> {
    let trained = state.as_ref().map_or(512, |s| s.options.window);
    let length = args.length.unwrap_or(4 * trained);
    let spec = WindowSpec::for_model(&model.config, length);
    let batches = data
        .valid
        .fixed_windows(Task::Continuation, &spec, 8, args.windows, 8);
    if batches.is_empty() {
        return Err(format!(
            "no validation song has {length} tokens after a bar line"
        ));
    }
    let windows: usize = batches.iter().map(|b| b.len()).sum();
    let curve = pollster::block_on(position_losses(model, &batches, args.seed))
        .map_err(|e| e.to_string())?;
    let quarter = |k: usize| -> f64 {
        let part = &curve[k * length / 4..(k + 1) * length / 4];
        part.iter().sum::<f64>() / part.len().max(1) as f64
    };
    let quarters: Vec<f64> = (0..4).map(quarter).collect();
    eprintln!(
        "validation cross-entropy on {windows} windows of {length} tokens (trained on \
         {trained}): {:.3} / {:.3} / {:.3} / {:.3} nats per token by quarter",
        quarters[0], quarters[1], quarters[2], quarters[3]
    );
    Ok(serde_json::json!({
        "task": "continuation",
        "trained_window": trained,
        "length": length,
        "windows": windows,
        "quarters": quarters,
        "mean": curve.iter().sum::<f64>() / curve.len() as f64,
        "positions": curve.iter().map(|v| (v * 1e4).round() / 1e4).collect::<Vec<_>>(),
    }))
}

/// [`Ablations`] on the 16-bar validation excerpts, printed as it goes.
fn ablations(
    model: &Performer,
    valid: &Corpus,
    per_song: usize,
    seed: u64,
) -> Result<Ablations, String> {
    let spec16 = WindowSpec::for_model(&model.config, 16 * 4 * STEPS_PER_BEAT);
    let windows: Vec<_> = excerpts(valid, &spec16, per_song)
        .into_iter()
        .map(|(_, e)| e)
        .collect();
    let started = Instant::now();
    let a = pollster::block_on(Ablations::measure(model, &windows, 8, seed))
        .map_err(|e| e.to_string())?;
    let pct = |x: f64| 100.0 * (x - a.loss) / a.loss;
    let mut line = format!(
        "what the outputs rest on, validation loss on {} excerpts: {:.5} as trained; {:.5} \
         ({:+.2} %) with uniform attention",
        windows.len(),
        a.loss,
        a.uniform_attention,
        pct(a.uniform_attention)
    );
    if let Some(z) = a.labels_zero {
        line += &format!("; {z:.5} ({:+.2} %) with the labels at zero", pct(z));
    }
    if let Some(o) = a.labels_other {
        line += &format!("; {o:.5} ({:+.2} %) with another song's labels", pct(o));
    }
    eprintln!("{line} ({:.0} s)", started.elapsed().as_secs_f64());
    Ok(a)
}

/// A run's eval.json.
pub fn read_eval(dir: &Path) -> Result<serde_json::Value, String> {
    let path = dir.join("eval.json");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "{}: {e} (run `pianoformer eval` on it first)",
            path.display()
        )
    })?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Writes a panel's scores as JSON to `out` (its folder made when missing) and says where.
pub fn write_scores(out: &Path, result: &serde_json::Value) -> Result<(), String> {
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    std::fs::write(out, serde_json::to_vec_pretty(result).expect("json"))
        .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    eprintln!("written to {}", out.display());
    Ok(())
}

/// A label for a run in tables: its folder name.
pub fn run_name(dir: &Path) -> String {
    dir.file_name()
        .map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into())
}

/// The value of the setting `key` given to a flag, checked against the setting's range (the
/// settings file the page reads too), the message naming the flag.
fn checked(key: &str, value: Option<f32>) -> Result<Option<f32>, String> {
    if let Some(v) = value {
        pianoformer::generate::limits::limit(key).check_flag(f64::from(v))?;
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_model_is_judged_once() {
        for &task in Task::ALL {
            let rows = JUDGED.iter().filter(|j| j.kind == task).count();
            assert_eq!(rows, 1, "{task:?}");
        }
    }
}
