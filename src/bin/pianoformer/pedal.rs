//! `pianoformer pedal`: fits the learnt sustain pedal (`music::pedal::model`) on the POP909
//! training songs' pianists, chooses its thresholds (and how many steps around it reads) on
//! the validation songs, scores it on the test songs against the pianists and the rule
//! "change at every annotated chord change", and ships it beside the models with its figures.
//! `eval --task pedal` scores a shipped one on the test songs again.

use std::path::{Path, PathBuf};

use pianoformer::eval::pedal::{Panel, PedalSong, Scored, line, load, panel, panels};
use pianoformer::models::{DynamicsEntry, Manifest};
use pianoformer::music::pedal::model::{FEATURES, Fit, Link, PedalModel};
use pianoformer::music::pedal::model::{pianist_steps, press_f1, press_steps};
use pianoformer::music::pop909::Split;
use serde_json::{Value, json};

mod lengths;
pub use lengths::Lanes;
use lengths::{default_path_lengths, written_lengths};

#[derive(clap::Args)]
pub struct Args {
    /// POP909's folder (its train, validation and test songs).
    #[arg(long)]
    pub data: PathBuf,
    /// Where the fitted model goes [default: www/models/pedal.json, with --causal
    /// www/models/pedal-live.json].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Fit the pedal a live take plays as it goes: each step read from what is known when it
    /// is decided (the piano up to it, the melody heard before it, the chords up to it), the
    /// context reaching back only, and each press decided at its step. Shipped as the
    /// manifest's `pedal_live`.
    #[arg(long)]
    pub causal: bool,
    /// The manifest whose `pedal` entry (with --causal, `pedal_live`) describes it (file,
    /// checksum, data, figures); `none` leaves every manifest alone.
    #[arg(long, default_value = "www/models/manifest.json")]
    pub manifest: String,
    /// Ridge on every weight but the bias.
    #[arg(long, default_value_t = 1.0)]
    pub lambda: f64,
    /// Steps read on either side of a step, each tried (fitted and chosen on validation): the
    /// bigger models the chosen one is set against.
    #[arg(long, value_delimiter = ',', default_value = "0,2,4")]
    pub contexts: Vec<usize>,
    /// The fits tried with each context: `linear` (least squares on the 0/1 answer) and
    /// `logistic` (maximum likelihood, by Newton's method: slower). Earlier ones are
    /// preferred: a later fit is chosen only where it beats every earlier one by more than
    /// 0.005 of the validation press F1. Logistic did not (reports/pedal.md, "The fit").
    #[arg(long, value_delimiter = ',', default_value = "linear")]
    pub links: Vec<Link>,
    /// Also a small network with each context: a layer of this many rectified units that
    /// both logistic scores read (`train::pedal`), fitted by Adam and kept at the pass with
    /// the lowest validation loss; chosen, as every other fit, only where it beats every
    /// earlier one by more than 0.005 of the validation press F1. Empty: none.
    #[arg(long, value_delimiter = ',')]
    pub hidden: Vec<usize>,
    /// The network's passes over the training steps at most.
    #[arg(long, default_value_t = 12)]
    pub passes: usize,
    /// The network's learning rate (Adam, cosine down to a tenth).
    #[arg(long, default_value_t = 0.003)]
    pub lr: f64,
    /// Seeds the network's first weights and its batches.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Fit and choose on the validation songs, print their figures and stop: the test songs
    /// are not read and nothing is written (for trying fits without looking at test).
    #[arg(long)]
    pub validate_only: bool,
    /// The first so many songs of each split (a quick look; the shipped model reads them all).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Also measure how long the notes sound under the learnt pedal in the piano an
    /// accompaniment model writes for each test song's annotated span (its lanes the
    /// annotations), against the pianist's: a shipped model's name, a training run's folder,
    /// `default`, or `none` to skip.
    #[arg(long, default_value = "default")]
    pub accompaniment: String,
}

/// The press threshold with the best mean F1 on `songs`, then the down threshold whose mean
/// share of time down is nearest the pianists'; each tried value's figures.
fn choose(model: &mut PedalModel, songs: &[PedalSong]) -> Vec<Value> {
    let scores: Vec<Vec<(f64, f64)>> = songs.iter().map(|s| model.scores(&s.steps)).collect();
    let mut tried = Vec::new();
    let (mut best_f1, mut best_press) = (-1.0, model.press_threshold);
    for k in 1..=16 {
        model.press_threshold = f64::from(k) * 0.04;
        let f1 = songs
            .iter()
            .zip(&scores)
            .filter_map(|(s, sc)| {
                let end = s.grid.tick_at(s.range.end);
                let wanted: Vec<usize> = press_steps(&s.grid, &s.pianist, end)
                    .into_iter()
                    .filter(|t| s.range.contains(t))
                    .collect();
                press_f1(&model.presses(sc, s.range.clone()), &wanted, 2).map(|f| f.2)
            })
            .sum::<f64>()
            / songs.len().max(1) as f64;
        tried.push(json!({ "press_threshold": model.press_threshold, "f1": f1 }));
        if f1 > best_f1 {
            (best_f1, best_press) = (f1, model.press_threshold);
        }
    }
    model.press_threshold = best_press;
    let pianists: Vec<Scored> = songs.iter().map(|s| s.score(&s.pianist)).collect();
    let pianists_share = panel(&pianists, &pianists).share_down;
    let (mut best_off, mut best_down) = (f64::INFINITY, model.down_threshold);
    for k in 0..=20 {
        model.down_threshold = f64::from(k) * 0.05;
        let scored: Vec<Scored> = songs.iter().map(|s| s.score(&s.learnt(model))).collect();
        let p = panel(&scored, &pianists);
        tried.push(json!({
            "press_threshold": model.press_threshold,
            "down_threshold": model.down_threshold,
            "panel": p,
        }));
        let mean_off = (p.share_down - pianists_share).abs();
        if mean_off < best_off {
            (best_off, best_down) = (mean_off, model.down_threshold);
        }
    }
    model.down_threshold = best_down;
    tried
}

/// The steps of `songs` with their pianists' answers, read with `context` steps either side.
fn steps_of(songs: &[PedalSong], fit: Fit) -> Fit {
    let mut fit = fit;
    for s in songs {
        let (press, down) = pianist_steps(&s.grid, &s.pianist, s.grid.tick_at(s.range.end));
        fit.add(&s.steps, s.range.clone(), &press, &down);
    }
    fit
}

impl Args {
    /// Where the fitted model goes.
    pub fn out(&self) -> PathBuf {
        self.out.clone().unwrap_or_else(|| {
            PathBuf::from(if self.causal {
                "www/models/pedal-live.json"
            } else {
                "www/models/pedal.json"
            })
        })
    }
}

/// The two scores fitted (`link`) on the training songs with `context` steps either side.
fn fitted(
    train: &[PedalSong],
    (context, link): (usize, Link),
    lambda: f64,
) -> Result<PedalModel, String> {
    let causal = train.first().is_some_and(|s| s.steps.is_causal());
    steps_of(train, Fit::new(context, link, causal)).solve(lambda)
}

/// The network of `units` fitted on the training songs with `context` steps either side,
/// kept at its best pass on the validation songs' steps.
fn network(
    (train, valid): (&[PedalSong], &[PedalSong]),
    context: usize,
    units: usize,
    args: &Args,
) -> Result<PedalModel, String> {
    use pianoformer::train::pedal::{NetworkFit, fit_network};
    let rows = |songs| {
        steps_of(
            songs,
            Fit::new(context, Link::Linear, args.causal).keeping_rows(),
        )
    };
    let (train, valid) = (rows(train), rows(valid));
    let fit = NetworkFit {
        context,
        causal: args.causal,
        units,
        passes: args.passes,
        batch: 512,
        lr: args.lr,
        seed: args.seed,
    };
    let device = pianoformer::device::cpu().device;
    fit_network(&fit, train.rows(), valid.rows(), &device, |pass, t, v| {
        eprintln!(
            "network, context {context}, {units} units: pass {pass}, loss {t:.5} (validation {v:.5})"
        )
    })
}

/// A fit with its thresholds chosen, its validation panel and every threshold tried.
type Candidate = (PedalModel, Panel, Vec<Value>);

/// `model` with its thresholds chosen on `valid`, its validation panel printed as `name`.
fn tried(mut model: PedalModel, valid: &[PedalSong], name: &str) -> Candidate {
    let tried = choose(&mut model, valid);
    let (_, _, learnt) = panels(valid, Some(&model));
    let learnt = learnt.expect("a model was given");
    println!("{}", line(name, &learnt));
    (model, learnt, tried)
}

/// Every fit `args` asks for, in the order in which a later one must pay to be chosen: each
/// link by context, then each network by context.
fn candidates(
    (train, valid): (&[PedalSong], &[PedalSong]),
    args: &Args,
) -> Result<Vec<Candidate>, String> {
    let mut candidates = Vec::new();
    let fits = args
        .links
        .iter()
        .flat_map(|&l| args.contexts.iter().map(move |&c| (c, l)));
    for (context, link) in fits {
        let model = fitted(train, (context, link), args.lambda)?;
        let name = format!("validation, {link:?} fit, context {context}").to_lowercase();
        candidates.push(tried(model, valid, &name));
    }
    for &units in args.hidden.iter().filter(|&&u| u > 0) {
        for &context in &args.contexts {
            let model = network((train, valid), context, units, args)?;
            let name = format!("validation, network of {units} units, context {context}");
            candidates.push(tried(model, valid, &name));
        }
    }
    Ok(candidates)
}

pub fn run(args: Args) -> Result<(), String> {
    if args.contexts.is_empty() || args.contexts.iter().any(|&c| c > 8) {
        return Err("--contexts takes 0 to 8 steps, at least one".into());
    }
    if args.links.is_empty() {
        return Err("--links takes linear, logistic or both".into());
    }
    let split = |s: Split| -> Result<Vec<PedalSong>, String> {
        let (songs, none) = load(&args.data, s, args.limit, args.causal)?;
        eprintln!(
            "{s:?}: {} songs pedalled, {none} without the pianist's pedal",
            songs.len()
        );
        Ok(songs)
    };
    let (train, valid) = (split(Split::Train)?, split(Split::Validation)?);
    let (_, rule, _) = panels(&valid, None);
    println!("{}", line("validation, rule: every chord change", &rule));
    let mut candidates = candidates((&train, &valid), &args)?;
    drop(train);
    // The first model within 0.005 F1 of the best (the first fit, the smallest context):
    // bigger or other must pay to be chosen.
    let best = candidates.iter().map(|c| c.1.f1).fold(f64::MIN, f64::max);
    let chosen = candidates
        .iter()
        .position(|c| c.1.f1 >= best - 0.005)
        .expect("one candidate is the best");
    let validation: Vec<Value> = candidates
        .iter()
        .map(|(m, p, tried)| json!({ "context": m.context, "link": m.link, "units": m.hidden.as_ref().map(|h| h.units), "panel": p, "tried": tried }))
        .collect();
    let model = candidates.swap_remove(chosen).0;
    if args.validate_only {
        println!("would choose: {}; test not read", fit_words(&model));
        return Ok(());
    }
    println!("chosen: {}", fit_words(&model));
    let test = split(Split::Test)?;
    let (pianists, rule, learnt) = panels(&test, Some(&model));
    let learnt = learnt.expect("a model was given");
    println!(
        "Test songs ({}), presses within an eighth of the pianist's:",
        test.len()
    );
    for (name, p) in [
        ("pianists", &pianists),
        ("rule: every chord change", &rule),
        ("learnt", &learnt),
    ] {
        println!("{}", line(name, p));
    }
    let written = median(test.iter().map(|s| s.written_beats()).collect());
    println!("written (no pedal): sounding {written:.2} beats");
    // A live take's pedal plays only in live takes, whose piano the default path is not.
    let accompaniment = if args.causal {
        "none"
    } else {
        &args.accompaniment
    };
    let (accompaniment, default_path) = match accompaniment {
        "none" => (Value::Null, Value::Null),
        spec => (
            written_lengths(&model, spec, &args)?,
            default_path_lengths(&model, spec, &args.data, &test, (Lanes::Open, 0, false))?,
        ),
    };
    let bytes = serde_json::to_vec_pretty(&model).expect("the model serialises");
    let out = args.out();
    std::fs::write(&out, &bytes).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    println!("the model is in {}", out.display());
    let metrics = json!({
        "test": { "learnt": learnt, "rule": rule, "pianists": pianists, "written_beats": written },
        "test_written": accompaniment,
        "test_default_path": default_path,
        "validation": validation,
        "rule": "press threshold: best mean press F1 (within an eighth) on validation; down threshold: mean share of time down nearest the pianists'; fit: the first of the linear fits, the logistic ones and the networks (each by context, the smallest first) within 0.005 F1 of the best",
    });
    if args.manifest != "none" {
        write_manifest(Path::new(&args.manifest), &args, &model, &bytes, metrics)?;
        println!("its entry is in {}", args.manifest);
    }
    Ok(())
}

/// A fitted model in words: its fit, context and thresholds.
fn fit_words(model: &PedalModel) -> String {
    format!(
        "{:?} fit{}, context {} (press threshold {:.2}, down threshold {:.2})",
        model.link,
        model
            .hidden
            .as_ref()
            .map_or(String::new(), |h| format!(" through {} units", h.units)),
        model.context,
        model.press_threshold,
        model.down_threshold
    )
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

fn write_manifest(
    path: &Path,
    args: &Args,
    model: &PedalModel,
    bytes: &[u8],
    metrics: Value,
) -> Result<(), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut manifest = Manifest::parse(&text).map_err(|e| e.to_string())?;
    let file = args
        .out()
        .file_name()
        .map(|f| f.to_string_lossy().to_string())
        .ok_or("--out names no file")?;
    let entry = DynamicsEntry {
        name: if model.causal { "pedal-live" } else { "pedal" }.into(),
        file,
        description: description(model),
        bytes: bytes.len(),
        sha256: pianoformer::model::sha256_hex(bytes),
        training: json!({
            "command": command(args),
            "split": "POP909 songs with id % 10 not in {0, 5} (0: test, 5: validation), their PIANO tracks' controller 64",
        }),
        metrics,
    };
    if model.causal {
        manifest.pedal_live = Some(entry);
    } else {
        manifest.pedal = Some(entry);
    }
    let out = serde_json::to_string_pretty(&manifest).expect("a manifest serialises") + "\n";
    std::fs::write(path, out).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The command that fits the model as `args` asked.
fn command(args: &Args) -> String {
    let list = |v: &[String]| v.join(",");
    let contexts: Vec<String> = args.contexts.iter().map(|n| n.to_string()).collect();
    let links: Vec<String> = args
        .links
        .iter()
        .map(|l| format!("{l:?}").to_lowercase())
        .collect();
    let mut command = format!(
        "pianoformer pedal --data {} --out {}{} --lambda {} --contexts {} --links {}",
        args.data.display(),
        args.out().display(),
        if args.causal { " --causal" } else { "" },
        args.lambda,
        list(&contexts),
        list(&links)
    );
    if !args.hidden.is_empty() {
        let hidden: Vec<String> = args.hidden.iter().map(|n| n.to_string()).collect();
        command += &format!(
            " --hidden {} --passes {} --lr {} --seed {}",
            list(&hidden),
            args.passes,
            args.lr,
            args.seed
        );
    }
    command
}

/// The manifest's words for a fitted `model`.
fn description(model: &PedalModel) -> String {
    let what = "the chord lane's changes, bar lines and beats, the piano's onsets and bass, \
                rests, the phrase";
    let around = match (model.context, model.causal) {
        (0, _) => String::new(),
        (c, true) => format!(" and of the {c} steps before it"),
        (c, false) => format!(" and of the {c} steps either side"),
    };
    let reads = match &model.hidden {
        Some(h) => format!(
            "a small network: {} rectified units over the {} features of each \
             sixteenth{around} ({what}), read by two logistic scores",
            h.units,
            FEATURES.len(),
        ),
        None => format!(
            "two {} scores over the {} features of each sixteenth{around} ({what})",
            match model.link {
                Link::Linear => "least-squares",
                Link::Logistic => "logistic",
            },
            FEATURES.len(),
        ),
    };
    if model.causal {
        format!(
            "The sustain pedal of a live take's piano, decided step by step as it plays, from \
             the piano up to the step, the melody heard before it and the chords decided: \
             {reads}; it presses where the first rises over the eighth before and holds while \
             the second holds, learnt from the POP909 pianists"
        )
    } else {
        format!(
            "The sustain pedal for the piano the models write: {reads}; it presses where the \
             first peaks and holds while the second holds, learnt from the POP909 pianists"
        )
    }
}

/// What `eval --task pedal` measures the default path with: the accompaniment (a shipped
/// model's name, a run folder or `default`), the lanes it is given in turn, and how far the
/// page's seed is moved.
pub struct DefaultPath<'a> {
    pub accompaniment: &'a str,
    pub lanes: &'a [Lanes],
    pub seed: u64,
    /// Each song's seed moved by its POP909 number as well.
    pub per_song: bool,
}

/// `eval --task pedal`: the shipped (or given) pedal model scored on the songs of `split`
/// (the test songs, unless tuning), with the pianists and the rule beside it, and the sounding
/// lengths it gives the default path's piano on their melodies alone, with each of the lanes.
pub fn eval(
    data: &Path,
    model: &Path,
    limit: Option<usize>,
    split: Split,
    path: &DefaultPath<'_>,
) -> Result<(), String> {
    let text = std::fs::read_to_string(model)
        .map_err(|e| format!("cannot read the pedal model {}: {e}", model.display()))?;
    let model = PedalModel::from_json(&text)?;
    let (songs, none) = load(data, split, limit, model.causal)?;
    let (pianists, rule, learnt) = panels(&songs, Some(&model));
    println!(
        "{split:?} songs ({} pedalled, {none} without the pianist's pedal), presses within an eighth of the pianist's:",
        songs.len()
    );
    for (name, p) in [("pianists", &pianists), ("rule: every chord change", &rule)] {
        println!("{}", line(name, p));
    }
    println!("{}", line("learnt", &learnt.expect("a model was given")));
    for &lanes in path.lanes {
        default_path_lengths(
            &model,
            path.accompaniment,
            data,
            &songs,
            (lanes, path.seed, path.per_song),
        )?;
    }
    Ok(())
}
