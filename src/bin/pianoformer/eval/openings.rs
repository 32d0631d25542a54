//! `eval --task continuation --openings`: the path a person takes (`pianoformer::eval::openings`
//! says what is measured). Every song of `--split` gives its first `--prompt-bars` bars (and,
//! with `mid-song` in `--places`, as many bars ending where a phrase starts mid-song) as a MIDI
//! file of its own, continued for as many bars the way the page does with its defaults: the
//! model's temperature, the echo, the context it was trained on. One line a song, then a
//! summary a place; the scores go to `openings.json` in the run folder (or `--out`).

use std::time::Instant;

use pianoformer::eval::openings::{
    Excerpt, OpeningScores, OpeningSummary, Place, REGISTER_MARGIN, continue_excerpt, excerpt,
};
use pianoformer::model::config::Task;
use pianoformer::music::pop909::{Pop909, Split};
use pianoformer::music::tokens::STEPS_PER_BEAT;
use pianoformer::studio::{Common, ContinueOptions};

use super::Args;

pub fn run(args: Args) -> Result<(), String> {
    let task: Task = args.task.parse()?;
    if task != Task::Continuation {
        return Err("--openings is for continuation models".into());
    }
    let bars = args.prompt_bars.unwrap_or(8);
    if bars == 0 {
        return Err("--prompt-bars must be positive".into());
    }
    let places = places(&args.places)?;
    let split = if args.test_split()? {
        Split::Test
    } else {
        Split::Validation
    };
    let out = args.scores_path("openings.json")?;
    let device = args.pop909_device("the openings are cut from its songs")?;
    let spec = args.model.display().to_string();
    let loaded = crate::models::load(&spec, task, None, &device)?;
    let started = Instant::now();
    let (excerpts, skipped) = excerpts(&args, split, &places, bars)?;
    // The page's defaults for this model: what a person gets without touching a setting.
    let options = ContinueOptions {
        common: Common {
            seed: args.seed,
            ..Common::default()
        },
        temperature: args.temperature.or(loaded.defaults.temperature),
        echo: args.echo,
        density: args.density()?,
        key: args.key()?,
        context: loaded.trained_window,
        ..ContinueOptions::default()
    };
    eprintln!(
        "{} excerpts, {bars} bars each, continued for {bars} bars by {} (temperature {}, context \
         {}, token limit {})",
        excerpts.len(),
        loaded.source,
        options.temperature.unwrap_or(1.0),
        options.context.map_or("all".into(), |c| c.to_string()),
        ContinueOptions {
            bars: Some(bars),
            ..options.clone()
        }
        .token_limit()
    );
    let scores = play(
        &excerpts,
        &loaded.model,
        &options,
        args.threads(),
        &device,
        started,
    )?;
    let summaries: Vec<OpeningSummary> = places
        .iter()
        .map(|&p| OpeningSummary::of(p, &scores))
        .collect();
    println!(
        "{:?} songs, {bars}-bar prompts, {bars} new bars asked, the page's defaults ({}):",
        split, loaded.source
    );
    for s in &summaries {
        print_summary(s);
    }
    let result = serde_json::json!({
        "task": "continuation",
        "model": loaded.source,
        "split": format!("{split:?}").to_lowercase(),
        "prompt_bars": bars,
        "temperature": options.temperature,
        "context": options.context,
        "seed": args.seed,
        "summary": summaries,
        "scores": scores,
        "skipped": skipped,
        "seconds": started.elapsed().as_secs_f64(),
    });
    super::write_scores(&out, &result)
}

/// Every excerpt continued with `options` (the seed varied by excerpt), `threads` at once.
fn play(
    excerpts: &[Excerpt],
    model: &pianoformer::model::performer::Performer,
    options: &ContinueOptions,
    threads: usize,
    device: &burn::tensor::Device,
    started: Instant,
) -> Result<Vec<OpeningScores>, String> {
    // The options hold no learnt pedal here, but their type is not shared between threads:
    // each thread reads its own from their JSON (every setting but the dynamics).
    let json = serde_json::to_string(options).map_err(|e| e.to_string())?;
    super::panel::par_map(excerpts, threads, model, |m, e| {
        let mut options: ContinueOptions =
            serde_json::from_str(&json).map_err(|e| e.to_string())?;
        options.common.seed ^= (e.from_bar as u64) << 16;
        let s = pollster::block_on(continue_excerpt(m, e, &options, device))
            .map_err(|err| format!("{} ({}): {err}", e.song, e.place.name()))?;
        eprintln!("{} ({:.0} s)", line(&s), started.elapsed().as_secs_f64());
        Ok(s)
    })
}

/// `--places`, read.
fn places(names: &[String]) -> Result<Vec<Place>, String> {
    names
        .iter()
        .map(|p| match p.as_str() {
            "opening" => Ok(Place::Opening),
            "mid-song" => Ok(Place::MidSong),
            other => Err(format!(
                "--places: `{other}` is neither opening nor mid-song"
            )),
        })
        .collect()
}

/// The excerpts of the songs of `split` (`--limit` of them) at `places`, and the songs that
/// have none there.
fn excerpts(
    args: &Args,
    split: Split,
    places: &[Place],
    bars: usize,
) -> Result<(Vec<Excerpt>, Vec<String>), String> {
    let pop = Pop909::open(&args.data).map_err(|e| format!("{}: {e}", args.data.display()))?;
    let mut ids = pop
        .split_ids(split)
        .map_err(|e| format!("{}: {e}", args.data.display()))?;
    if let Some(n) = args.limit {
        ids.truncate(n);
    }
    let mut excerpts = Vec::new();
    let mut skipped = Vec::new();
    for &id in &ids {
        let song = pop
            .load(id, STEPS_PER_BEAT)
            .map_err(|e| format!("POP909 song {id:03}: {e}"))?;
        for &place in places {
            match excerpt(&song, place, bars) {
                Some(e) => excerpts.push(e),
                None => skipped.push(format!("{id:03} ({})", place.name())),
            }
        }
    }
    if !skipped.is_empty() {
        eprintln!(
            "no {bars}+{bars} whole bars of 4/4 there: {}",
            skipped.join(", ")
        );
    }
    Ok((excerpts, skipped))
}

fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// One song's line.
fn line(s: &OpeningScores) -> String {
    format!(
        "{} {} bar {}: {}/{} bars{}{}, {} notes a beat ({}x the prompt's, {}x the next bars'), \
         pitch 99% {} (prompt up to {}, {:+}), key {} (the song {})",
        s.song,
        s.place.name(),
        s.from_bar + 1,
        s.bars_written,
        s.bars_asked,
        if s.meter_changes > 0 {
            format!(
                ", {} in another meter ({} beats)",
                s.meter_changes, s.beats_written
            )
        } else {
            String::new()
        },
        if s.token_limit { ", token limit" } else { "" },
        num(Some(s.notes_per_beat), 2),
        num(s.rate(), 2),
        num(s.rate_vs_next(), 2),
        s.high99.map_or("-".into(), |h| h.to_string()),
        s.prompt_high,
        s.above().unwrap_or(0),
        num(s.key_cosine, 3),
        num(s.next_key_cosine, 3),
    )
}

fn print_summary(s: &OpeningSummary) {
    let pct = |v: f64| format!("{:.0} %", 100.0 * v);
    println!(
        "  {} ({} songs): bars asked in the prompt's meter {}; token limit reached {}\n    \
         notes a beat 0.75-1.33x the prompt's: {} (median {:.2}x; the songs' next bars {}, median {:.2}x); \
         median {:.2}x the real next bars'\n    99th-percentile pitch at most {REGISTER_MARGIN} \
         semitones above the prompt's highest: {} (the songs' next bars {})\n    key cosine to \
         the prompt {:.3} (the songs' next bars {:.3}: {:.2}x); notes on tones of their chords \
         {:.3}",
        s.place.name(),
        s.songs,
        pct(s.bars_and_meter),
        pct(s.token_limit),
        pct(s.rate_in_band),
        s.rate_median,
        pct(s.next_rate_in_band),
        s.next_rate_median,
        s.rate_vs_next_median,
        pct(s.register_kept),
        pct(s.next_register_kept),
        s.key_cosine,
        s.next_key_cosine,
        s.key_ratio,
        s.chord_tones,
    );
}
