//! `pianoformer train`: trains a model of either task on POP909, a folder of MIDI files or one
//! file, with a progress bar (loss, steps/s, ETA), a JSONL log, checkpoints every so often and
//! `--resume` after an interruption. The output folder holds `config.json` (the model config),
//! `model.bpk` (weights), `optim.bpk` (Adam's state), `run.json` (options, step, data) and
//! `log.jsonl`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pianoformer::data::pop909_cl;
use pianoformer::data::sources::{self, Parts};
use pianoformer::device::{self, Preference};
use pianoformer::model::config::Task;
use pianoformer::train::session::{Checkpoint, RunState, Session};

mod options;
use options::{model_config, run_options};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// accompaniment (melody + bridge + labels → piano roll), continuation (REMI tokens) or
    /// harmonization (melody + bridge + phrases per beat → a chord per beat).
    #[arg(long)]
    pub task: String,
    /// The POP909 folder, a folder of MIDI files, or one MIDI file.
    #[arg(long)]
    pub data: PathBuf,
    /// Folder for the checkpoint, config and log (created if missing).
    #[arg(long, short)]
    pub out: PathBuf,
    /// Model size: tiny (tests, minutes) or small (shipped).
    #[arg(long, default_value = "small")]
    pub preset: String,
    /// Positional encoding: none, ape, cape, sine_spe, conv_spe, fstripe, fstripe_sff.
    #[arg(long, default_value = "sine_spe")]
    pub pe: String,
    /// Gate the SPE (eqs. 23–25).
    #[arg(long)]
    pub gated: bool,
    /// convSPE: taps of its filters, the longest offset it tells apart (the preset's 128
    /// otherwise; the SPE paper used 512 ungated, 128 gated).
    #[arg(long)]
    pub taps: Option<usize>,
    /// F-StrIPE structure levels, comma-separated: melody, chord, phrase, position, phrase_bar
    /// (the bar's place in its phrase), time (beats). A continuation model's default is
    /// chord, phrase, phrase_bar, position, time (its tokens have no melody part); a
    /// harmonizer's is melody, phrase, position.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "melody,chord,phrase,position"
    )]
    pub levels: Vec<String>,
    /// Accompaniment inputs besides the melody and bridge rolls: `autoregressive` (the lanes'
    /// chord, phrase and bar-position features and the piano's previous step: the product's
    /// step-by-step accompaniment), `reference` (as autoregressive, with the reference lane:
    /// at a repeated phrase's step, the piano of the step it answers in the phrase's first
    /// occurrence), `labels` (the lanes only, every step at once) or `none`
    /// (the rolls only: the F-StrIPE paper's setting).
    #[arg(long, default_value = "autoregressive")]
    pub conditioning: String,
    /// Step-by-step accompaniment: read the melody this many sixteenths late (1: a live
    /// accompanist, which decides each sixteenth before the note played at it is heard).
    #[arg(long, default_value_t = 0)]
    pub melody_lag: u8,
    /// Harmonization: `bidirectional` (the default: reads the whole melody, for files) or
    /// `causal` (reads only up to the current beat, for live playing).
    #[arg(long)]
    pub direction: Option<String>,
    /// Harmonization: `song` (the default: beside each beat, the chroma of its bar, half bar,
    /// nearby bars and the song) or `none` (the beat alone: the first harmonizer's inputs).
    #[arg(long)]
    pub context: Option<String>,
    /// softmax: exact attention instead of the Performer's linear attention.
    #[arg(long, default_value = "linear")]
    pub attention: String,
    /// The linear attention's feature map: `favor` (FAVOR+'s positive random features, the
    /// softmax kernel: the default) or `relu` (ReLU of the same random projections; issue 33
    /// found that it lets small models lean on their attention).
    #[arg(long, default_value = "favor")]
    pub feature_map: String,
    /// A model config JSON to use instead of --preset/--pe/--gated/--levels/--attention.
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[arg(long)]
    pub steps: Option<usize>,
    #[arg(long)]
    pub batch: Option<usize>,
    /// Grid steps (accompaniment; 16 per 4/4 bar), tokens (continuation) or beats
    /// (harmonization) per window.
    #[arg(long)]
    pub window: Option<usize>,
    #[arg(long)]
    pub lr: Option<f64>,
    #[arg(long)]
    pub warmup: Option<usize>,
    #[arg(long)]
    pub seed: Option<u64>,
    /// Accompaniment: weight of sounding notes in the loss (1: plain BCE; piano rolls are
    /// sparse, and a weight of 5–10 gets a model past the silent prior sooner).
    #[arg(long)]
    pub pos_weight: Option<f64>,
    /// The positional encoding's parameters learn at this multiple of --lr (e.g. 10 lets
    /// F-StrIPE's frequencies travel from their initialisation within a run).
    #[arg(long)]
    pub pe_lr_scale: Option<f64>,
    /// Accompaniment: give this share (0–1) of each training window's chord stretches another
    /// of the song's chords, so the model learns to play on under a partly wrong chord lane
    /// (a guessed one); validation reads the annotations as they are.
    #[arg(long)]
    pub chord_noise: Option<f64>,
    /// F-StrIPE: the chord level as the chord's tonal centroid (`centroid`, six coordinates in
    /// which related chords are close) or as its identity (`id`, one number per chord, as the
    /// paper indexes labels).
    #[arg(long, default_value = "centroid")]
    pub chord_encoding: String,
    /// Validate every this many steps.
    #[arg(long)]
    pub eval_every: Option<usize>,
    /// Save a checkpoint every this many steps (and at the end).
    #[arg(long, default_value_t = 100)]
    pub checkpoint_every: usize,
    /// Start from a trained model (a run's folder or a shipped model's name) instead of
    /// fresh weights: its architecture and encoding are kept (--preset, --pe and the like are
    /// ignored), and --conditioning may add inputs, whose weights start at zero (`--init
    /// accompaniment-ar --conditioning reference`: the default with the reference lane).
    #[arg(long)]
    pub init: Option<String>,
    /// Continue the run saved in --out (its options and data path are kept; --steps may
    /// lengthen it).
    #[arg(long)]
    pub resume: bool,
    /// Stop (with a checkpoint) after this many steps in this invocation, as an interruption
    /// would; `--resume` goes on. For time-boxed sessions.
    #[arg(long)]
    pub stop_after: Option<usize>,
    /// Read at most this many songs per split (quick runs).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Harmonization: train and validate on the chords of this POP909-CL folder (an expert's
    /// corrections of POP909's, `../shared/data/pop909-cl`) wherever a song's notes align
    /// them surely; POP909's labels elsewhere.
    #[arg(long)]
    pub corrected_chords: Option<PathBuf>,
    /// cpu, gpu or auto.
    #[arg(long, default_value = "cpu")]
    pub backend: String,
}

/// Writes `bytes` to `path` through a temporary file, so an interruption never leaves a
/// half-written checkpoint.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn save(out: &Path, checkpoint: &mut Checkpoint, args: &Args) -> Result<(), String> {
    checkpoint.state.data_path = Some(args.data.display().to_string());
    checkpoint.state.limit = args.limit;
    // Weights first, run.json last: run.json names a step whose weights are on disk.
    write_atomic(&out.join("model.bpk"), &checkpoint.model)?;
    write_atomic(&out.join("optim.bpk"), &checkpoint.optim)?;
    let config = serde_json::to_vec_pretty(&checkpoint.state.config).expect("config serialises");
    write_atomic(&out.join("config.json"), &config)?;
    let state = serde_json::to_vec_pretty(&checkpoint.state).expect("state serialises");
    write_atomic(&out.join("run.json"), &state)
}

/// Reads the checkpoint in `out`.
pub fn load_checkpoint(out: &Path) -> Result<Checkpoint, String> {
    let read = |name: &str| {
        std::fs::read(out.join(name)).map_err(|e| {
            format!(
                "{} holds no complete checkpoint ({name}: {e})",
                out.display()
            )
        })
    };
    let state: RunState = serde_json::from_slice(&read("run.json")?)
        .map_err(|e| format!("{}: run.json is damaged: {e}", out.display()))?;
    Ok(Checkpoint {
        state,
        model: read("model.bpk")?,
        optim: read("optim.bpk")?,
    })
}

struct Log {
    file: std::fs::File,
}

impl Log {
    fn open(path: &Path, truncate_after: Option<usize>) -> Result<Self, String> {
        // On resume, drop the lines written after the checkpoint (they will be redone).
        if let Some(step) = truncate_after
            && let Ok(text) = std::fs::read_to_string(path)
        {
            let kept: String = text
                .lines()
                .filter(|l| {
                    serde_json::from_str::<serde_json::Value>(l)
                        .ok()
                        .and_then(|v| v.get("step").and_then(|s| s.as_u64()))
                        .is_some_and(|s| s as usize <= step)
                })
                .map(|l| format!("{l}\n"))
                .collect();
            write_atomic(path, kept.as_bytes())?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        Ok(Self { file })
    }

    fn write(&mut self, value: serde_json::Value) -> Result<(), String> {
        writeln!(self.file, "{value}").map_err(|e| format!("cannot write the log: {e}"))
    }
}

fn backend_name(info: &device::BackendInfo) -> String {
    if info.adapter.is_empty() {
        info.api.clone()
    } else {
        format!("{} ({})", info.api, info.adapter)
    }
}

/// A resumed run must read the songs it was trained on. The path may differ (the run was moved,
/// or resumed from another directory or machine) as long as it holds the same split: the
/// loader's description counts each part's songs.
fn same_data(state: &RunState, found: &str, given: &Path) -> Result<(), String> {
    // The chords it learned from: POP909's, or POP909-CL's corrections (--corrected-chords).
    let corrected = |description: &str| description.contains("POP909-CL");
    if corrected(&state.data) != corrected(found) {
        return Err(if corrected(&state.data) {
            "this run was trained on POP909-CL's corrected chords: resume it with --corrected-chords".into()
        } else {
            "this run was trained on POP909's own chords: resume it without --corrected-chords"
                .into()
        });
    }
    let Some(path) = &state.data_path else {
        return Ok(());
    };
    let given = given.display().to_string();
    if *path == given {
        return Ok(());
    }
    // A folder's description names the folder itself: compare what it says of the songs.
    let songs = |description: &str, at: &str| description.replace(at, "<data>");
    match state.data.strip_suffix(&format!(" at {path}")) {
        Some(trained) if songs(trained, path) == songs(found, &given) => {
            eprintln!(
                "note: this run was trained on --data {path}; {given} holds the same songs ({found})"
            );
            Ok(())
        }
        trained => Err(format!(
            "this run was trained on --data {path} ({}); {given} holds {found}: resume it with the same data",
            trained.unwrap_or("songs not recorded")
        )),
    }
}

pub fn run(args: Args) -> Result<(), String> {
    let task: Task = args.task.parse()?;
    let out = args.out.clone();
    let preference: Preference = args.backend.parse().map_err(|e| format!("{e}"))?;
    let backend = pollster::block_on(device::init(preference)).map_err(|e| format!("{e}"))?;
    let device = backend.device.clone().autodiff();
    let resumed = to_resume(&args, task)?;
    let loaded = load_data(&args)?;
    let description = format!("{} at {}", loaded.description, args.data.display());
    let mut session = match resumed {
        Some(checkpoint) => {
            same_data(&checkpoint.state, &loaded.description, &args.data)?;
            let step = checkpoint.state.step;
            if backend.info.kind == device::BackendKind::Cpu {
                stay_on_the_cpu();
            }
            let s = Session::resume(checkpoint, loaded.train, &loaded.valid, &device)?;
            eprintln!("resuming at step {step} of {}", s.options.steps);
            s
        }
        None => {
            let options = run_options(&args, task);
            std::fs::create_dir_all(&out)
                .map_err(|e| format!("cannot create {}: {e}", out.display()))?;
            match &args.init {
                Some(spec) => {
                    let model = initial_model(&args, spec, task, &device)?;
                    Session::with_model(model, options, loaded.train, &loaded.valid, description)?
                }
                None => Session::new(
                    &model_config(&args, task)?,
                    options,
                    loaded.train,
                    &loaded.valid,
                    description,
                    &device,
                )?,
            }
        }
    };
    let backend = backend_name(&backend.info);
    describe(&session, &backend);
    let mut log = Log::open(&out.join("log.jsonl"), Some(session.step()))?;
    if session.step() == 0 {
        log.write(serde_json::json!({
            "event": "start",
            "step": 0,
            "config": session.trainer.model.config,
            "options": session.options,
            "data": session.data,
            "backend": backend,
            "parameters": session.trainer.model.parameters(),
            "init": args.init,
        }))?;
        save(
            &out,
            &mut session.checkpoint().map_err(|e| e.to_string())?,
            &args,
        )?;
    }
    train_steps(&args, &mut session, &mut log)
}

/// `--init`'s trained model, reading the inputs `--conditioning` asks for.
fn initial_model(
    args: &Args,
    spec: &str,
    task: Task,
    device: &burn::tensor::Device,
) -> Result<pianoformer::model::performer::Performer, String> {
    let loaded = crate::models::load(spec, task, None, device)?;
    let config = loaded
        .model
        .config
        .clone()
        .with_inputs(options::conditioning(args, task)?);
    eprintln!("starting from {}", loaded.source);
    loaded
        .model
        .with_more_inputs(&config)
        .map_err(|e| format!("--init {spec}: {e}"))
}

/// The checkpoint `--resume` continues (checked against the arguments), or `None` for a new
/// run in a folder that holds none.
fn to_resume(args: &Args, task: Task) -> Result<Option<Checkpoint>, String> {
    let out = &args.out;
    let existing = out.join("run.json").exists();
    if existing && !args.resume {
        return Err(format!(
            "{} already holds a training run: pass --resume to continue it, or choose another --out",
            out.display()
        ));
    }
    if !args.resume {
        return Ok(None);
    }
    if !existing {
        return Err(format!(
            "there is no run to resume in {} (no run.json)",
            out.display()
        ));
    }
    let mut checkpoint = load_checkpoint(out)?;
    if checkpoint.state.config.task != task {
        return Err(format!(
            "{} holds a {:?} run, but --task is {}",
            out.display(),
            checkpoint.state.config.task,
            args.task
        ));
    }
    if let Some(steps) = args.steps {
        checkpoint.state.options.steps = steps;
    }
    if checkpoint.state.limit != args.limit {
        return Err(format!(
            "this run was trained with --limit {:?}; resume it with the same limit",
            checkpoint.state.limit
        ));
    }
    Ok(Some(checkpoint))
}

/// The training and validation songs of `--data`, with what was skipped said.
fn load_data(args: &Args) -> Result<sources::Loaded, String> {
    let started = Instant::now();
    let mut loaded = sources::load(&args.data, Parts::ALL, args.limit)?;
    if let Some(dir) = &args.corrected_chords {
        if !dir.join("POP909_processed").is_dir() {
            return Err(format!(
                "--corrected-chords {}: not the POP909-CL folder (no POP909_processed in it)",
                dir.display()
            ));
        }
        let train = pop909_cl::use_corrected(&mut loaded.train.pieces, dir)?;
        let valid = pop909_cl::use_corrected(&mut loaded.valid.pieces, dir)?;
        loaded.description = format!(
            "{}, with POP909-CL's corrected chords on {train} of {} training and {valid} of {} \
             validation songs",
            loaded.description,
            loaded.train.pieces.len(),
            loaded.valid.pieces.len()
        );
    }
    eprintln!(
        "data: {} in {:.1} s",
        loaded.description,
        started.elapsed().as_secs_f64()
    );
    for s in loaded.skipped.iter().take(5) {
        eprintln!("skipped {s}");
    }
    if loaded.skipped.len() > 5 {
        eprintln!("… and {} more skipped", loaded.skipped.len() - 5);
    }
    Ok(loaded)
}

/// Burn reads the optimiser's state onto its default device before moving it to the model's
/// on the next step; with wgpu compiled in that default is the GPU, which a machine without
/// one cannot open. A CPU run resuming names the CPU backend instead, before the training
/// threads start.
fn stay_on_the_cpu() {
    if std::env::var_os("BURN_DEVICE").is_none() {
        // SAFETY: no other thread of this process reads or writes the environment yet (the
        // CPU backend starts none, and the data loading has joined its own).
        unsafe { std::env::set_var("BURN_DEVICE", "flex") };
    }
}

/// The model and the run, in two lines.
fn describe(session: &Session, backend: &str) {
    let config = &session.trainer.model.config;
    eprintln!(
        "model: {:?}, {} positional encoding{}, {} parameters, on {backend}",
        config.task,
        config.pe.kind.name(),
        if config.pe.is_structural() {
            format!(" over {:?}", config.pe.levels)
        } else {
            String::new()
        },
        session.trainer.model.parameters(),
    );
    eprintln!(
        "run: {} steps of {} windows × {}, validation on {} windows",
        session.options.steps,
        session.options.batch,
        session.options.window,
        session.validation_windows()
    );
}

/// Trains to the run's last step (or `--stop-after` steps), logging, validating and saving
/// checkpoints on the way.
fn train_steps(args: &Args, session: &mut Session, log: &mut Log) -> Result<(), String> {
    let out = &args.out;
    let total = session.options.steps as u64;
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{wide_bar} {pos}/{len} loss {msg} {per_sec} eta {eta}")
            .expect("valid template"),
    );
    bar.set_position(session.step() as u64);
    bar.reset_eta();
    let run_started = Instant::now();
    let first_step = session.step();
    let mut smoothed: Option<f32> = None;
    while !session.is_done() {
        if args
            .stop_after
            .is_some_and(|n| session.step() - first_step >= n)
        {
            save(
                out,
                &mut session.checkpoint().map_err(|e| e.to_string())?,
                args,
            )?;
            bar.finish_and_clear();
            eprintln!(
                "stopped at step {} of {} as asked; continue with --resume",
                session.step(),
                session.options.steps
            );
            return Ok(());
        }
        let step_started = Instant::now();
        let loss = pollster::block_on(session.train_step()).map_err(|e| {
            format!(
                "step {}: {e} (the last checkpoint in {} is intact)",
                session.step() + 1,
                out.display()
            )
        })?;
        let step = session.step();
        let shown = *smoothed.insert(smoothed.map_or(loss, |s| 0.95 * s + 0.05 * loss));
        log.write(serde_json::json!({
            "step": step,
            "loss": loss,
            "lr": session.trainer.schedule.lr(step - 1),
            "ms": step_started.elapsed().as_secs_f64() * 1e3,
        }))?;
        bar.set_message(format!("{shown:.4}"));
        bar.set_position(step as u64);
        let rate = (step - first_step) as f64 / run_started.elapsed().as_secs_f64().max(1e-9);
        report_step(session, log, &bar, step, shown, rate)?;
        if step.is_multiple_of(args.checkpoint_every.max(1)) || session.is_done() {
            save(
                out,
                &mut session.checkpoint().map_err(|e| e.to_string())?,
                args,
            )?;
        }
    }
    bar.finish_and_clear();
    let seconds = run_started.elapsed().as_secs_f64();
    log.write(serde_json::json!({
        "event": "end",
        "step": session.step(),
        "seconds": seconds,
        "valid_loss": session.valid_loss,
    }))?;
    eprintln!(
        "done: {} steps in {:.0} s; the model is in {}",
        session.step() - first_step,
        seconds,
        out.display()
    );
    Ok(())
}

/// After a step: the validation loss where one is due, else a progress line every 50 steps
/// when the bar is hidden (a log file).
fn report_step(
    session: &mut Session,
    log: &mut Log,
    bar: &ProgressBar,
    step: usize,
    loss: f32,
    rate: f64,
) -> Result<(), String> {
    let hidden = bar.is_hidden();
    if session.validates_after(step) {
        let valid = pollster::block_on(session.validate())
            .map_err(|e| format!("validation at step {step}: {e}"))?;
        if let Some(v) = valid {
            log.write(serde_json::json!({"step": step, "valid_loss": v}))?;
            let line = format!(
                "step {step}: train loss {loss:.4}, validation loss {v:.4}, {rate:.2} steps/s"
            );
            if hidden {
                eprintln!("{line}");
            } else {
                bar.println(line);
            }
        }
    } else if hidden && (step.is_multiple_of(50) || step == 1) {
        let eta = (session.options.steps - step) as f64 / rate.max(1e-9);
        eprintln!(
            "step {step}/{}: loss {loss:.4}, {rate:.2} steps/s, eta {eta:.0} s",
            session.options.steps,
        );
    }
    Ok(())
}
