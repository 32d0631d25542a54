//! `pianoformer eval --task accompaniment --texture`: whether the accompaniment shows the
//! song's form (`pianoformer::eval::texture`). The texture echo's lean is counted in the
//! training songs' pianists and printed; every song of --split is then accompanied with the
//! annotated lanes at each of --strengths (0: no echo; 1: the lean as measured), and with the
//! phrases detected in its melody alone at the model's strength, each scored by ILS against the annotated phrases
//! beside the pianist's, with chord tones and density. Into texture.json.

use std::time::Instant;

use burn::tensor::Device;
use pianoformer::data::corpus::Piece;
use pianoformer::data::sources::{self, Parts};
use pianoformer::eval::texture::{
    Played, TextureSong, accompany_with_echo, pianists, share_of_draws_reaching, steps_of,
    texture_song, training_counts,
};
use pianoformer::generate::PianoSampling;
use pianoformer::model::config::Task;
use pianoformer::model::performer::Performer;
use pianoformer::music::texture::echo::{EchoCounts, EchoLean, MELODY_BINS, Pasted};
use pianoformer::music::texture::{Ils, ils, mean_ils};

use super::Args;

mod density;
pub mod lead_sheets;

pub fn run(args: Args) -> Result<(), String> {
    let (task, test, out) = checked(&args)?;
    let device = args.pop909_device("the texture panel accompanies its annotated songs")?;
    let loaded = step_by_step(&args, task, &device)?;
    let started = Instant::now();
    let parts = Parts {
        train: true,
        valid: !test,
        test,
    };
    let data = sources::load(&args.data, parts, args.limit)?;
    eprintln!("data: {}", data.description);
    let counts = training_counts(&data.train);
    let sampling = PianoSampling {
        seed: args.seed,
        density: args
            .density()?
            .unwrap_or(loaded.defaults.piano_sampling().density),
        ..loaded.defaults.piano_sampling()
    };
    let (lean, model_counts) = the_lean(
        &args,
        (&counts, loaded.defaults.texture_echo),
        (&data.train, &loaded.model, &device),
        sampling,
    )?;
    let corpus = if test { &data.test } else { &data.valid };
    let pieces: Vec<_> = corpus
        .pieces
        .iter()
        .filter(|p| p.has_accompaniment() && p.has_harmony())
        .collect();
    let strengths = args.strengths.clone();
    // The default path plays at the model's own strength (the manifest's, else 1).
    let own = loaded.defaults.texture_strength.unwrap_or(1.0);
    let (model, tried) = (&loaded.model, (&strengths[..], own));
    let songs = accompany_all(&pieces, &args, model, sampling, lean, tried, &device)?;
    let (pianist, by_strength, detected) = report(&songs, &strengths, own);
    let typical = typical_of_training(&data.train, &pianist, songs.len());
    let strength = chosen_strength(&pianist, &by_strength);
    if let Some(s) = strength {
        println!(
            "  chosen: echo {s} (ILS nearest the pianists' of those with chord tones >= 0.88 \
             and 0.8-1.25x their onsets)"
        );
    }
    let split = if test { "test" } else { "valid" };
    println!(
        "  ({} {split} songs, {}, temperature {}, hold {}, density {}, seed {}{})",
        songs.len(),
        loaded.source,
        sampling.temperature,
        sampling.hold_temperature,
        sampling.density,
        args.seed,
        ["", " + each song's own"][usize::from(args.seed_per_song)]
    );
    let result = serde_json::json!({
        "task": "accompaniment",
        "panel": "texture",
        "model": loaded.source,
        "temperature": sampling.temperature,
        "hold_temperature": sampling.hold_temperature,
        "density": sampling.density,
        "seed": args.seed,
        "seed_per_song": args.seed_per_song,
        "data": data.description,
        "split": split,
        "counts": counts,
        "lean_kind": lean_kind(&args),
        "model_counts": model_counts,
        "lean": lean,
        "pianist": pianist,
        "pianist_typical": typical,
        "annotated": by_strength,
        "strength": strength,
        "detected": detected,
        "detected_strength": own,
        "songs": songs,
        "seconds": started.elapsed().as_secs_f64(),
    });
    finish(&args, &loaded, lean, &result, out)
}

/// The task, whether --split names the test songs, and where the scores go (`None`: into
/// the manifest alone), the flags checked.
fn checked(args: &Args) -> Result<(Task, bool, Option<std::path::PathBuf>), String> {
    let task: Task = args.task.parse()?;
    if task != Task::Accompaniment {
        return Err("--texture is for accompaniment models".into());
    }
    if args.echo_density.is_some_and(|d| !(d > 0.0 && d <= 4.0)) {
        return Err("--echo-density must be above 0 and at most 4".into());
    }
    if args.beyond_model > 0 && args.lean == "own" {
        return Err(
            "--beyond-model takes the model's own lean from a lean counted in the \
                    pianists: name its kind with --lean (keeping, by-latest, …)"
                .into(),
        );
    }
    if args.measure_echo_density > 0 && (args.echo_density.is_some() || args.strengths.len() != 1) {
        return Err(
            "--measure-echo-density measures the density at one strength: give one \
                    --strengths and no --echo-density"
                .into(),
        );
    }
    if args.strengths.iter().any(|s| !(0.0..=10.0).contains(s)) {
        return Err("--strengths must be numbers from 0 to 10".into());
    }
    let test = args.test_split()?;
    let out = match (&args.out, args.record) {
        (None, true) => None,
        _ => Some(args.scores_path("texture.json")?),
    };
    if args.record && args.model.join("model.bpk").is_file() {
        return Err(
            "--record is for shipped models: a run's texture.json is read by `ship`".into(),
        );
    }
    Ok((task, test, out))
}

/// The scores written where they go: into `out`, and with --record the lean and the panel
/// into the shipped model's manifest entry.
fn finish(
    args: &Args,
    loaded: &crate::models::Loaded,
    lean: EchoLean,
    result: &serde_json::Value,
    out: Option<std::path::PathBuf>,
) -> Result<(), String> {
    if args.record {
        let mut metrics = result.clone();
        if let Some(obj) = metrics.as_object_mut() {
            for key in ["songs", "model", "lean", "counts", "model_counts"] {
                obj.remove(key);
            }
        }
        let strength = result["strength"].as_f64().map(|v| v as f32);
        super::record(loaded, |entry| {
            entry.defaults.texture_echo = Some(lean);
            entry.defaults.texture_strength = strength.filter(|&s| s != 1.0);
            entry.metrics["texture"] = metrics;
            format!(
                "the texture echo's lean ({}) and the panel",
                lean_kind(args)
            )
        })?;
    }
    match out {
        Some(out) => super::write_scores(&out, result),
        None => Ok(()),
    }
}

/// How typical the split's pianists are of the training songs' pianists, printed: their mean
/// ILS, and the share of 10 000 draws of as many training songs whose mean is as far from
/// theirs, on the same side, as the split's.
fn typical_of_training(
    train: &pianoformer::data::corpus::Corpus,
    pianist: &serde_json::Value,
    songs: usize,
) -> serde_json::Value {
    let (pool, pasted) = pianists(train);
    let target = pianist["ils"].as_f64();
    let n = pianist["songs_with_ils"]
        .as_u64()
        .map_or(songs, |n| n as usize);
    let mean = (!pool.is_empty()).then(|| pool.iter().sum::<f64>() / pool.len() as f64);
    let share = target.and_then(|t| share_of_draws_reaching(&pool, n, t, 10_000, 0));
    if let (Some(m), Some(t), Some(s)) = (mean, target, share) {
        println!(
            "  the training songs' pianists: ILS {m:.3} over {} songs; {:.2} % of 10 000 draws \
             of {n} of them are as {} as this split's {t:.3}",
            pool.len(),
            100.0 * s,
            if t >= m { "high" } else { "low" }
        );
    }
    println!(
        "  the training songs' pianists paste {}",
        pasted_words(&pasted)
    );
    serde_json::json!({"training_ils": mean, "training_songs": pool.len(), "draws": 10_000,
                       "share_reaching": share, "training_pasted": pasted})
}

/// `pasted`'s shares in words.
fn pasted_words(pasted: &Pasted) -> String {
    let share = |c: [usize; 2]| Pasted::share(c).map_or("-".into(), |s| format!("{s:.3}"));
    format!(
        "{} of {} repeated bars' registers (from the latest earlier occurrence {} of {})",
        share(pasted.first),
        pasted.first[1],
        share(pasted.latest),
        pasted.latest[1]
    )
}

/// The model --model names, which must write step by step (the echo steers such a model).
fn step_by_step(args: &Args, task: Task, device: &Device) -> Result<crate::models::Loaded, String> {
    if args.record && args.density.is_some() {
        return Err(
            "--record keeps the echo's lean and strength for the page, which plays at \
                    the model's own density: try --density without --record"
                .into(),
        );
    }
    let spec = args.model.display().to_string();
    let loaded = crate::models::load(&spec, task, None, device)?;
    if !loaded.model.config.is_autoregressive() {
        return Err(format!(
            "{spec} writes the whole accompaniment at once; the texture echo steers a \
             step-by-step model"
        ));
    }
    Ok(loaded)
}

/// The lean --lean and --beyond-model ask for, said, and the counts of the model's own
/// accompaniments where it is taken beyond them.
fn the_lean(
    args: &Args,
    (counts, shipped): (&EchoCounts, Option<EchoLean>),
    (train, model, device): (&pianoformer::data::corpus::Corpus, &Performer, &Device),
    sampling: PianoSampling,
) -> Result<(EchoLean, Option<EchoCounts>), String> {
    let lean = match args.lean.as_str() {
        // The model's own, as the page plays it; the flags given on top.
        "own" => {
            let own = shipped.ok_or_else(|| {
                format!(
                    "{} has no texture echo of its own: name one with --lean keeping (or \
                     by-latest, pasting, by-melody, alone, beyond-others)",
                    args.model.display()
                )
            })?;
            EchoLean {
                revoices: args.revoice || own.revoices,
                keeps_count: args.keep_count || own.keeps_count,
                density: args.echo_density.or(own.density),
                song_density: args.song_density.unwrap_or(own.song_density),
                ..own
            }
        }
        kind => EchoLean {
            revoices: args.revoice,
            keeps_count: args.keep_count,
            density: args.echo_density,
            song_density: args.song_density.unwrap_or_default(),
            ..lean_of(counts, kind)?
        },
    };
    say_lean(counts, &lean);
    let (mut lean, own) = match args.beyond_model {
        0 => (lean, None),
        n => {
            let own = model_counts(train, n, args, model, sampling, device)?;
            let model_lean = lean_of(&own.pooled_kinds(), &args.lean)?;
            eprintln!("the model's own lean, on {} training songs:", own.songs);
            say_lean(&own, &model_lean);
            let lean = lean.beyond(&model_lean);
            eprintln!(
                "the lean beyond the model's: {}",
                serde_json::to_string(&lean.lean).expect("json")
            );
            (lean, Some(own))
        }
    };
    if args.measure_echo_density > 0 {
        let n = args.measure_echo_density;
        let strength = args.strengths[0];
        let d = density::measured(
            (train, n),
            args,
            (model, sampling),
            (lean, strength),
            device,
        )?;
        lean.density = Some(d);
    }
    Ok((lean, own))
}

/// The lean --lean and --beyond-model ask for, in words.
fn lean_kind(args: &Args) -> String {
    let named = match args.lean.as_str() {
        "own" => "the model's own".to_string(),
        kind => kind.to_string(),
    };
    let mut kind = match args.revoice {
        true => format!("{named}, re-voiced"),
        false => named,
    };
    if args.keep_count {
        kind.push_str(", keeping the model's count");
    }
    if let Some(d) = args.echo_density {
        kind.push_str(&format!(", its steps at density {d}"));
    }
    if let Some(rule) = args.song_density.filter(|r| !r.is_off()) {
        kind.push_str(&format!(", kept per song ({rule:?})"));
    }
    if args.measure_echo_density > 0 {
        let n = args.measure_echo_density;
        kind.push_str(&format!(
            ", its steps' density measured on {n} training songs"
        ));
    }
    match args.beyond_model {
        0 => kind,
        n => format!("{kind} beyond the model's own on {n} training songs"),
    }
}

/// `n` of `train`'s songs that can be accompanied, spread evenly over them.
fn spread_songs(train: &pianoformer::data::corpus::Corpus, n: usize) -> Vec<&Piece> {
    let all: Vec<&Piece> = train
        .pieces
        .iter()
        .filter(|p| p.has_accompaniment() && p.has_harmony())
        .collect();
    let every = all.len().div_ceil(n.max(1)).max(1);
    all.into_iter().step_by(every).take(n).collect()
}

/// The counts of the model's own accompaniments (no echo) of `n` of `train`'s songs, spread
/// evenly over them, under their annotated lanes: what its sampling already leans toward.
fn model_counts(
    train: &pianoformer::data::corpus::Corpus,
    n: usize,
    args: &Args,
    model: &Performer,
    sampling: PianoSampling,
    device: &Device,
) -> Result<EchoCounts, String> {
    let pieces = spread_songs(train, n);
    let started = Instant::now();
    let lean = EchoLean::default();
    let rolls = super::panel::par_map(&pieces, args.threads(), model, |m, p| {
        let labels = p.sheet.labels.slice(p.range.clone());
        let roll = pollster::block_on(accompany_with_echo(
            m, p, &labels, sampling, lean, 0.0, device,
        ))
        .map_err(|e| format!("{}: {e}", p.name))?;
        Ok((roll, labels))
    })?;
    let mut counts = EchoCounts::default();
    let (mut model_ils, mut pianist_ils) = (Vec::new(), Vec::new());
    for ((roll, labels), p) in rolls.iter().zip(&pieces) {
        counts.add(roll, labels);
        let pianist = steps_of(&p.sheet.rolls.piano, p.range.clone());
        if let (Some(m), Some(t)) = (ils(roll, labels), ils(&pianist, labels)) {
            model_ils.push(m);
            pianist_ils.push(t);
        }
    }
    // A model that plays its training songs' form much as their pianists do, but not the
    // validation songs', has learnt those songs, and its lean there overstates its own.
    let mean = |v: &[Ils], f: &dyn Fn(&Ils) -> Option<f64>| {
        let v: Vec<f64> = v.iter().filter_map(f).collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    let (ratio, within) = (|i: &Ils| Some(i.ratio()), |i: &Ils| i.within);
    eprintln!(
        "the model's own accompaniments of {} training songs ({:.0} s): ILS {:.3}, within a \
         phrase {:.3} (their pianists {:.3}, {:.3}; {} songs where a letter returns)",
        counts.songs,
        started.elapsed().as_secs_f64(),
        mean(&model_ils, &ratio),
        mean(&model_ils, &within),
        mean(&pianist_ils, &ratio),
        mean(&pianist_ils, &within),
        model_ils.len()
    );
    Ok(counts)
}

/// The lean `kind` (--lean) of `counts`.
fn lean_of(counts: &EchoCounts, kind: &str) -> Result<EchoLean, String> {
    Ok(match kind {
        "beyond-others" => counts.lean(),
        "alone" => counts.lean_alone(),
        "by-melody" => counts.lean_by_melody(),
        "by-latest" => counts.lean_by_latest(),
        "pasting" => counts.lean_pasting(),
        "keeping" => counts.lean_keeping(),
        other => {
            return Err(format!(
                "--lean is alone, beyond-others, by-melody, by-latest, pasting or keeping, not \
                 {other:?}"
            ));
        }
    })
}

/// The echo's lean and what it was counted from, said.
fn say_lean(counts: &EchoCounts, lean: &EchoLean) {
    eprintln!(
        "the echo's lean, from {} training songs ({} repeated steps, {} steps against another \
         letter): {}",
        counts.songs,
        counts.repeat_steps,
        counts.other_steps,
        serde_json::to_string(&lean.lean).expect("json")
    );
    if let Some(by) = &lean.by_melody {
        for (b, (table, steps)) in by.iter().zip(counts.repeat_steps_by_melody).enumerate() {
            eprintln!(
                "  melody alike, bin {b} ({steps} repeated steps): {}",
                serde_json::to_string(table).expect("json")
            );
        }
    }
    if let Some(by) = &lean.by_latest {
        eprintln!(
            "  a third occurrence and later ({} repeated steps), pooled over the melody, by \
             (chord changed, register, first then, latest then): {}",
            counts.latest_steps,
            serde_json::to_string(&by[by.len() - 1]).expect("json")
        );
    }
    let mixes = [
        ("repeats", &lean.paste, &counts.repeat_kinds),
        ("kept from the bar before", &lean.kept, &counts.kept_kinds),
    ];
    for (what, mix, kinds) in mixes {
        let Some(mix) = mix else { continue };
        for (m, share) in mix.share.iter().enumerate() {
            let bars: u64 = kinds.bars[m].iter().flatten().sum();
            eprintln!(
                "  {what}, {} ({bars} bars' registers): pasted by register {share:.3?}; lean \
                 anew {}, pasted {}",
                if m == MELODY_BINS {
                    "pooled".to_string()
                } else {
                    format!("melody bin {m}")
                },
                serde_json::to_string(&mix.lean[0][m]).expect("json"),
                serde_json::to_string(&mix.lean[1][m]).expect("json")
            );
        }
    }
}

/// Every song of `pieces` played as the panel plays it, said as it comes.
fn accompany_all(
    pieces: &[&Piece],
    args: &Args,
    model: &Performer,
    sampling: PianoSampling,
    lean: EchoLean,
    (strengths, detected): (&[f32], f32),
    device: &Device,
) -> Result<Vec<TextureSong>, String> {
    let started = Instant::now();
    super::panel::par_map(pieces, args.threads(), model, |m, p| {
        // With --seed-per-song each song draws from a seed of its own (its name's), so the
        // songs' random draws are independent rather than shared.
        let sampling = PianoSampling {
            seed: sampling.seed.wrapping_add(if args.seed_per_song {
                name_seed(&p.name)
            } else {
                0
            }),
            ..sampling
        };
        let r = pollster::block_on(texture_song(
            m, p, sampling, lean, strengths, detected, device,
        ))
        .map_err(|e| format!("{}: {e}", p.name))?;
        eprintln!(
            "{}: ILS pianist {}, {}; detected {} ({:.0} s)",
            p.name,
            ratio(&r.pianist),
            r.annotated
                .iter()
                .map(|(s, x)| format!("echo {s}: {}", ratio(x)))
                .collect::<Vec<_>>()
                .join(", "),
            ratio(&r.detected),
            started.elapsed().as_secs_f64()
        );
        Ok(r)
    })
}

/// A song's own seed offset: the FNV-1a hash of its name (stable across runs and machines).
fn name_seed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The panel's means over songs, printed: the pianists', each strength's, the detected
/// phrases'.
fn report(
    songs: &[TextureSong],
    strengths: &[f32],
    detected_strength: f32,
) -> (serde_json::Value, Vec<serde_json::Value>, serde_json::Value) {
    let summary = |pick: &dyn Fn(&TextureSong) -> &Played| {
        let (ils, n) = mean_ils(songs.iter().map(|s| pick(s).ils));
        let mean = |f: &dyn Fn(&Played) -> Option<f64>| {
            let v: Vec<f64> = songs.iter().filter_map(|s| f(pick(s))).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        let mut pasted = Pasted::default();
        for s in songs {
            pasted.add(&pick(s).pasted);
        }
        serde_json::json!({
            "ils": ils,
            "songs_with_ils": n,
            "chord_tones": mean(&|p| p.chord_tones),
            "density": mean(&|p| p.density),
            "within": mean(&|p| p.ils.and_then(|i| i.within)),
            "pasted": Pasted::share(pasted.first),
            "pasted_latest": Pasted::share(pasted.latest),
        })
    };
    let pianist = summary(&|s| &s.pianist);
    let line = |name: &str, v: &serde_json::Value| {
        println!(
            "  {name:<28} ILS {} over {} songs (segments alike within a phrase {}); chord tones \
             {}; density {}x the pianist's; repeated bars pasted {} (from the latest {})",
            fmt(&v["ils"]),
            v["songs_with_ils"],
            fmt(&v["within"]),
            fmt(&v["chord_tones"]),
            fmt(&v["density"]),
            fmt(&v["pasted"]),
            fmt(&v["pasted_latest"])
        );
    };
    line("the pianists", &pianist);
    let mut by_strength = Vec::new();
    for (i, s) in strengths.iter().enumerate() {
        let v = summary(&|song| &song.annotated[i].1);
        line(&format!("annotated lanes, echo {s}"), &v);
        by_strength.push(serde_json::json!({"strength": s, "summary": v}));
    }
    let detected = summary(&|s| &s.detected);
    line(
        &format!("detected phrases, echo {detected_strength}"),
        &detected,
    );
    for (name, pick) in [
        (
            "melody alone",
            (|s: &TextureSong| s.detector_melody) as fn(&TextureSong) -> _,
        ),
        ("whole arrangement", |s: &TextureSong| s.detector_full),
    ] {
        let mean = |f: fn(&pianoformer::eval::texture::Agreement) -> Option<f64>| {
            let v: Vec<f64> = songs.iter().filter_map(|s| f(&pick(s))).collect();
            fmt(&serde_json::json!(
                (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
            ))
        };
        println!(
            "  the detector from the {name}: boundaries precision {} recall {}; same-letter \
             pairs precision {} recall {}; answers precision {} recall {}",
            mean(|a| a.boundary_precision),
            mean(|a| a.boundary_recall),
            mean(|a| a.pair_precision),
            mean(|a| a.pair_recall),
            mean(|a| a.answer_precision),
            mean(|a| a.answer_recall)
        );
    }
    (pianist, by_strength, detected)
}

/// The strength the panel chooses: of those whose chord tones are at least
/// [`CHORD_TONES_FLOOR`] and whose onsets are 0.8–1.25× the pianists', the one whose ILS is
/// nearest the pianists' (a copy machine above them counts as much as a pianist who never
/// returns below them); `None` where none qualifies.
fn chosen_strength(pianist: &serde_json::Value, by_strength: &[serde_json::Value]) -> Option<f32> {
    let target = pianist["ils"].as_f64()?;
    by_strength
        .iter()
        .filter_map(|b| {
            let v = &b["summary"];
            let (ils, tones, density, strength) = (
                v["ils"].as_f64()?,
                v["chord_tones"].as_f64()?,
                v["density"].as_f64()?,
                b["strength"].as_f64()? as f32,
            );
            (tones >= CHORD_TONES_FLOOR && (0.8..=1.25).contains(&density))
                .then_some(((ils - target).abs(), strength))
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, s)| s)
}

/// The floor on chord tones while the texture returns.
const CHORD_TONES_FLOOR: f64 = 0.88;

fn ratio(p: &Played) -> String {
    p.ils.map_or("-".into(), |i| format!("{:.3}", i.ratio()))
}

fn fmt(v: &serde_json::Value) -> String {
    v.as_f64().map_or("-".into(), |x| format!("{x:.3}"))
}
