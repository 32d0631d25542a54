//! `eval --task continuation --plan`: the plan-following panel (`pianoformer::eval::plan` says
//! what is scored). Every song with enough bars gets a continuation under its own progression
//! and under a substituted one (the next song's, moved to its key), sampled as the page
//! samples it. The sampling temperature is chosen on the validation songs among
//! `--temperatures` — of those whose new bars are as busy as the songs' (mean note rate
//! 0.8–1.25×), the one whose chord tones on the planned bars come closest to the songs' own —
//! then the test songs are played with it (`--split valid`: the validation sweep alone). The
//! scores go to `plan.json` in the run folder (or `--out`), where `generate` and `ship` find
//! the chosen temperature; `--record` writes it and the test summary into the shipped model's
//! manifest entry instead.

use std::path::PathBuf;
use std::time::Instant;

use burn::tensor::Device;
use pianoformer::data::sources::{self, Parts};
use pianoformer::device::{self, Preference};
use pianoformer::eval::plan::{
    MAX_NOTE_RATE, PLAN_BARS, Plan, PlanCase, PlanScores, PlanSummary, sample_plan,
};
use pianoformer::generate::{DEFAULT_DENSITY, Sampling};
use pianoformer::model::config::Task;
use pianoformer::model::performer::Performer;

use super::Args;

mod prompt;

pub fn run(args: Args) -> Result<(), String> {
    let task: Task = args.task.parse()?;
    if task != Task::Continuation {
        return Err("--plan is for continuation models".into());
    }
    let (prompt_bars, test, out) = checked(&args)?;
    let spec = args.model.display().to_string();
    let preference: Preference = args.backend.parse().map_err(|e| format!("{e}"))?;
    let backend = pollster::block_on(device::init(preference)).map_err(|e| format!("{e}"))?;
    let device = backend.device.clone();
    let loaded = crate::models::load(&spec, task, None, &device)?;
    let context = context(&args, loaded.trained_window)?;
    let started = Instant::now();
    let parts = Parts {
        train: false,
        valid: true,
        test,
    };
    let mut data = sources::load(&args.data, parts, args.limit)?;
    eprintln!("data: {}", data.description);
    let prompt_piano = prompt::PromptPiano::of(&args, &device)?;
    if let Some(piano) = &prompt_piano {
        eprintln!("the prompts' piano: {}", piano.description);
        data.valid = piano.rewrite(&data.valid, &args, &device)?;
        if test {
            data.test = piano.rewrite(&data.test, &args, &device)?;
        }
    }
    let threads = args.threads();
    let panel = |corpus: &pianoformer::data::corpus::Corpus, temperature: f32| {
        let cases = lane_cases(&args, corpus, prompt_bars)?;
        let sampling = Sampling {
            temperature,
            top_p: args.top_p,
            seed: args.seed,
            echo: args.echo()?,
            // The page's default unless a density is asked: the prompt's pace on unplanned
            // bars only (the panel's bars are all planned, so the model's own pace there).
            density: Some(args.density()?.unwrap_or(DEFAULT_DENSITY)),
            density_on_plan: args.density.is_some(),
            key: args.key()?.unwrap_or(0.0),
        };
        let model = &loaded.model;
        run_panel(&cases, model, sampling, context, threads, &device, started)
    };
    // The validation sweep, and the temperature it chooses.
    let tried = sweep(&args.temperatures, |t| {
        panel(&data.valid, t).map(|(s, _)| s)
    })?;
    let chosen = choose(&tried);
    eprintln!("chosen on validation: temperature {chosen}");
    let mut result = serde_json::json!({
        "task": "continuation",
        "model": loaded.source,
        "pe": loaded.model.config.pe.kind.name(),
        "prompt_bars": prompt_bars,
        "plan_bars": PLAN_BARS,
        "context": context,
        "top_p": decimal(args.top_p),
        "echo": decimal(args.echo()?),
        "seed": args.seed,
        "data": data.description,
        "prompt_piano": prompt_piano.as_ref().map(|p| p.description.clone()),
        "rule": "of the validation temperatures whose own-plan note rate is 0.8-1.25x the songs', the one whose chord tones on the planned bars come closest to the songs' own",
        "valid": tried.iter().map(|(t, s)| serde_json::json!({"temperature": decimal(*t), "summary": s})).collect::<Vec<_>>(),
        "temperature": decimal(chosen),
    });
    if test {
        let (summaries, samples) = panel(&data.test, chosen)?;
        println!(
            "test songs, {prompt_bars}-bar prompts, {PLAN_BARS} planned bars, temperature {chosen} \
             (chosen on validation) top-p {} (context {}):",
            args.top_p,
            context.map_or("all".into(), |c| c.to_string())
        );
        print_table(&summaries, &mut std::io::stdout());
        result["summary"] = serde_json::json!(summaries);
        result["samples"] = serde_json::json!(samples);
    }
    result["seconds"] = serde_json::json!(started.elapsed().as_secs_f64());
    if args.record {
        return record(&loaded, &result);
    }
    super::write_scores(&out, &result)
}

/// The cases of `corpus`'s songs with the phrase lane `--phrase-lane` asks for.
fn lane_cases(
    args: &Args,
    corpus: &pianoformer::data::corpus::Corpus,
    prompt_bars: usize,
) -> Result<Vec<PlanCase>, String> {
    let mut cases = cases(corpus, prompt_bars)?;
    match args.phrase_lane.as_str() {
        "song" => {}
        "none" => cases.iter_mut().for_each(|c| c.lane.fill(None)),
        other => {
            return Err(format!(
                "unknown --phrase-lane `{other}`: use song (the song's own) or none"
            ));
        }
    }
    Ok(cases)
}

/// Each temperature's validation summaries, printed as they come.
fn sweep(
    temperatures: &[f32],
    panel: impl Fn(f32) -> Result<Vec<PlanSummary>, String>,
) -> Result<Vec<(f32, Vec<PlanSummary>)>, String> {
    let mut tried = Vec::new();
    for &t in temperatures {
        let summaries = panel(t)?;
        eprintln!("validation, temperature {t}:");
        print_table(&summaries, &mut std::io::stderr());
        tried.push((t, summaries));
    }
    Ok(tried)
}

/// The arguments of `--plan`, checked: the prompt's bars, whether the test songs are played,
/// and where the scores go.
fn checked(args: &Args) -> Result<(usize, bool, PathBuf), String> {
    let prompt_bars = args.prompt_bars.unwrap_or(8);
    if prompt_bars == 0 {
        return Err("--prompt-bars must be positive".into());
    }
    args.top_p()?;
    let test = args.test_split()?;
    let spec = args.model.display();
    let out = match (&args.out, args.model.join("model.bpk").is_file()) {
        (Some(out), _) => out.clone(),
        (None, true) => args.model.join("plan.json"),
        (None, false) if args.record => PathBuf::new(),
        (None, false) => {
            return Err(format!(
                "{spec} is not a training run's folder: say where the scores go with --out \
                 (or --record them in the manifest)"
            ));
        }
    };
    if args.record && args.prompt_piano.is_some() {
        return Err(
            "--record keeps the panel of the songs' own prompts: try --prompt-piano \
                    without --record"
                .into(),
        );
    }
    if args.record && args.model.join("model.bpk").is_file() {
        return Err("--record is for shipped models: a run's plan.json is read by `ship`".into());
    }
    if !sources::is_pop909(&args.data) {
        return Err(format!(
            "{} is not the POP909 folder (the panel plans with its annotated chords and phrases)",
            args.data.display()
        ));
    }
    if args.temperatures.is_empty() || args.temperatures.iter().any(|&t| !(t > 0.0 && t <= 10.0)) {
        return Err("--temperatures: each must be above 0 and at most 10".into());
    }
    Ok((prompt_bars, test, out))
}

/// The most tokens the model reads at once: `--context`, else (as the page plays) the window
/// it was trained on.
fn context(args: &Args, trained: Option<usize>) -> Result<Option<usize>, String> {
    match args.context {
        0 => Ok(trained),
        c if c < 32 => Err(format!(
            "--context {c}: the model must read at least 32 tokens at once"
        )),
        c => Ok(Some(c)),
    }
}

/// The cases of `corpus`'s songs that have enough bars.
fn cases(
    corpus: &pianoformer::data::corpus::Corpus,
    prompt_bars: usize,
) -> Result<Vec<PlanCase>, String> {
    let cases: Vec<PlanCase> = corpus
        .pieces
        .iter()
        .filter_map(|p| PlanCase::of(&p.name, &p.tokens, &p.bar_phrases, prompt_bars))
        .collect();
    if cases.is_empty() {
        return Err(format!(
            "no song of the split has {} bars from its first note, and one more",
            prompt_bars + PLAN_BARS
        ));
    }
    Ok(cases)
}

/// Every case under its own plan and a substituted one (the next song, in turn, whose
/// progression fits its bars), side by side on threads.
fn run_panel(
    cases: &[PlanCase],
    model: &Performer,
    sampling: Sampling,
    context: Option<usize>,
    threads: usize,
    device: &Device,
    started: Instant,
) -> Result<(Vec<PlanSummary>, Vec<PlanScores>), String> {
    let jobs: Vec<(usize, &'static str, Plan)> = cases
        .iter()
        .enumerate()
        .flat_map(|(i, case)| {
            let own = (i, "own", case.own_plan());
            let other = (1..cases.len())
                .find_map(|k| case.substituted_plan(&cases[(i + k) % cases.len()]))
                .map(|plan| (i, "substituted", plan));
            std::iter::once(own).chain(other)
        })
        .collect();
    let scored = super::panel::par_map(&jobs, threads, model, |m, (i, which, plan)| {
        let case = &cases[*i];
        let sampling = Sampling {
            seed: sampling.seed ^ ((*i as u64) << 8),
            ..sampling
        };
        let s = pollster::block_on(sample_plan(m, case, which, plan, context, sampling, device))
            .map_err(|e| format!("{}: {e}", case.song))?;
        eprintln!(
            "{} ({which}, temperature {}): {} bars, note rate {}x ({}x the prompt's), chord tones {} (the song {}), \
             echo {} (the song {}) ({:.0} s)",
            s.song,
            sampling.temperature,
            s.bars,
            num(s.note_rate, 2),
            num(s.prompt_ratio, 2),
            num(s.chord_tones, 3),
            num(s.song_chord_tones, 3),
            num(s.echo, 3),
            num(s.song_echo, 3),
            started.elapsed().as_secs_f64()
        );
        Ok(s)
    })?;
    let summaries = ["own", "substituted"]
        .iter()
        .map(|w| PlanSummary::of(w, &scored))
        .collect();
    Ok((summaries, scored))
}

/// The validation rule: of the temperatures whose own-plan note rate is 0.8–1.25× the songs',
/// the one whose chord tones come closest to the songs' own (the higher on a tie); when none is
/// as busy as the songs, the one whose note rate comes closest.
pub fn choose(tried: &[(f32, Vec<PlanSummary>)]) -> f32 {
    let own = |s: &[PlanSummary]| s.iter().find(|x| x.plan == "own").cloned();
    let score = |(t, s): &(f32, Vec<PlanSummary>)| -> Option<(bool, f64, f32)> {
        let o = own(s)?;
        let busy = (0.8..=1.25).contains(&o.note_rate);
        let gap = if busy {
            (o.chord_tones - o.song_chord_tones).abs()
        } else {
            (o.note_rate - 1.0).abs()
        };
        (gap.is_finite()).then_some((busy, gap, *t))
    };
    tried
        .iter()
        .filter_map(score)
        .min_by(|a, b| {
            b.0.cmp(&a.0)
                .then(a.1.total_cmp(&b.1))
                .then(b.2.total_cmp(&a.2))
        })
        .map_or(1.0, |x| x.2)
}

/// Writes the chosen temperature and the panel's summaries into the shipped model's manifest
/// entry (`loaded` must be a shipped model).
fn record(loaded: &crate::models::Loaded, result: &serde_json::Value) -> Result<(), String> {
    super::record(loaded, |entry| {
        entry.defaults.temperature = result["temperature"].as_f64().map(|t| t as f32);
        let mut plan = result.clone();
        if let Some(obj) = plan.as_object_mut() {
            obj.remove("samples");
            obj.remove("model");
        }
        entry.metrics["plan"] = plan;
        format!("temperature {} and the panel", result["temperature"])
    })
}

fn print_table(summaries: &[PlanSummary], out: &mut dyn std::io::Write) {
    let _ = writeln!(
        out,
        "| plan | samples | note rate (max; over {MAX_NOTE_RATE}) | over the prompt (10th–90th percentile) | key (the songs') | key ratio | chord tones (the songs') | echo (the songs') | echo ratio |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
    for s in summaries {
        let _ = writeln!(
            out,
            "| {} | {} | {:.2}× ({:.2}; {}) | {:.2}× ({:.2}–{:.2}) | {:.3} ({:.3}) | {:.2} | {:.3} ({:.3}) | {:.3} ({:.3}, {} samples) | {:.2} |",
            s.plan,
            s.samples,
            s.note_rate,
            s.note_rate_max,
            s.note_rate_over,
            s.prompt_ratio,
            s.prompt_ratio_low,
            s.prompt_ratio_high,
            s.key,
            s.song_key,
            s.key_ratio,
            s.chord_tones,
            s.song_chord_tones,
            s.echo,
            s.song_echo,
            s.echo_samples,
            s.echo_ratio
        );
    }
    for s in summaries {
        let _ = writeln!(
            out,
            "{}: echo ratio of phrases first heard in the prompt {:.2} ({} samples), in the new bars {:.2} ({} samples)",
            s.plan,
            s.echo_ratio_of_prompt,
            s.echo_samples_of_prompt,
            s.echo_ratio_of_new,
            s.echo_samples_of_new
        );
    }
}

/// A temperature as the decimal it was written as (not its f32 value widened).
fn decimal(t: f32) -> f64 {
    (t as f64 * 1e4).round() / 1e4
}

fn num(x: Option<f64>, digits: usize) -> String {
    x.map_or("–".into(), |x| format!("{x:.digits$}"))
}
