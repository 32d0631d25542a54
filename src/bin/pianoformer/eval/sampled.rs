//! `eval --task continuation --sample`: what a continuation model plays when sampled, from the
//! first bars of every held-out song of a split (`pianoformer::eval::sampled` says what is
//! scored). Songs are sampled side by side on threads; the scores go to `samples.json` in the
//! run folder (or `--out`), and `report` draws them.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use pianoformer::eval::report::COLORS;
use pianoformer::eval::sampled::{
    KEY_CONSISTENT, LONGEST_GAP_BARS, QUARTERS, SampleScores, SampledSummary, sample_song,
};
use pianoformer::generate::Sampling;
use pianoformer::model::config::Task;

use super::Args;

pub fn run(args: Args) -> Result<(), String> {
    let task: Task = args.task.parse()?;
    if task != Task::Continuation {
        return Err(
            "--sample is for continuation models (accompaniment models are always \
                    evaluated by sampling)"
                .into(),
        );
    }
    let (prompt_bars, default_file) = checked(&args)?;
    let test = args.test_split()?;
    let spec = args.model.display().to_string();
    let out = args.scores_path(default_file)?;
    let device = args.pop909_device("evaluation uses its validation and test split")?;
    let loaded = crate::models::load(&spec, task, None, &device)?;
    let trained = loaded.trained_window;
    let length = args.length.or(trained.map(|w| 4 * w)).ok_or_else(|| {
        format!("{spec} does not say the window it was trained on: give --length")
    })?;
    let started = Instant::now();
    let data = args.load_split(test)?;
    let corpus = if test { &data.test } else { &data.valid };
    let threads = args.threads();
    let sampling = Sampling {
        temperature: args.temperature.unwrap_or(1.0),
        top_p: args.top_p,
        seed: args.seed,
        echo: args.echo()?,
        density: args.density()?,
        density_on_plan: true,
        key: args.key()?.unwrap_or(0.0),
    };
    let device = &device;
    let scored = super::panel::par_map(&corpus.pieces, threads, &loaded.model, |m, p| {
        let context = (args.context > 0).then_some(args.context);
        let take = Take {
            prompt_bars,
            length,
            context,
            sampling,
        };
        sample_one(m, p, take, device, started)
    })?;
    let samples: Vec<SampleScores> = scored.into_iter().flatten().collect();
    if samples.is_empty() {
        return Err(format!(
            "no song of the split has {} bars and more to prompt with in fewer than {length} \
             tokens (--prompt-bars, --length)",
            prompt_bars
        ));
    }
    let summary = SampledSummary::of(&samples);
    print_summary(&summary, prompt_bars, length, started);
    let result = serde_json::json!({
        "task": "continuation",
        "model": loaded.source,
        "pe": loaded.model.config.pe.kind.name(),
        "gated": loaded.model.config.pe.gated,
        "trained_window": trained,
        "length": length,
        "prompt_bars": prompt_bars,
        "context": (args.context > 0).then_some(args.context),
        "split": if test { "test" } else { "validation" },
        "sampling": {"temperature": args.temperature.unwrap_or(1.0), "top_p": args.top_p, "seed": args.seed},
        "data": data.description,
        "quarters": QUARTERS,
        "summary": summary,
        "samples": samples,
        "seconds": started.elapsed().as_secs_f64(),
    });
    super::write_scores(&out, &result)
}

/// How each song is played: its prompt's bars, the tokens written, the most read at once.
#[derive(Clone, Copy)]
struct Take {
    prompt_bars: usize,
    length: usize,
    context: Option<usize>,
    sampling: Sampling,
}

/// One song sampled and scored (`None` when it is too short), with a line said.
fn sample_one(
    m: &pianoformer::model::performer::Performer,
    p: &pianoformer::data::corpus::Piece,
    take: Take,
    device: &burn::tensor::Device,
    started: Instant,
) -> Result<Option<SampleScores>, String> {
    let s = pollster::block_on(sample_song(
        m,
        &p.name,
        &p.tokens,
        &p.bar_phrases,
        take.prompt_bars,
        take.length,
        take.context,
        take.sampling,
        device,
    ))
    .map_err(|e| format!("{}: {e}", p.name))?;
    if let Some(s) = &s {
        eprintln!(
            "{}: {} bars, style {} / {} by quarter ({:.0} s)",
            s.song,
            s.bars,
            quarters(&s.onset_duration),
            quarters(&s.time_pitch),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(s)
}

/// The arguments of `--sample`, checked: the prompt's bars and the file the scores go to.
fn checked(args: &Args) -> Result<(usize, &'static str), String> {
    let prompt_bars = args.prompt_bars.unwrap_or(4);
    if prompt_bars == 0 {
        return Err("--prompt-bars must be positive".into());
    }
    if (1..32).contains(&args.context) {
        return Err(format!(
            "--context {}: the model must read at least 32 tokens at once (0 reads everything)",
            args.context
        ));
    }
    // What `ship` reads: samples.json reading everything, samples-context.json as played.
    let default_file = if args.context > 0 {
        "samples-context.json"
    } else {
        "samples.json"
    };
    args.temperature()?;
    args.top_p()?;
    Ok((prompt_bars, default_file))
}

/// The summary over songs on one paragraph.
fn print_summary(summary: &SampledSummary, prompt_bars: usize, length: usize, started: Instant) {
    let f = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.3}"))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    eprintln!(
        "{} songs, {}-bar prompts, {length} tokens: onset-duration {} (last quarter {:.2}x the \
         first), time-pitch {} ({:.2}x); key consistency {:.3} (>= {KEY_CONSISTENT} in {:.0} %; \
         the songs' own {:.3}); density {:.2}x the prompt's (the songs' own {:.2}x); no silence over {LONGEST_GAP_BARS} bars in {:.0} %; \
         grammatical bars without the mask {:.3} ({:.3} of each draw's probability on \
         forbidden tokens) ({:.0} s)",
        summary.samples,
        prompt_bars,
        f(&summary.onset_duration),
        summary.onset_duration_kept,
        f(&summary.time_pitch),
        summary.time_pitch_kept,
        summary.key_consistency,
        100.0 * summary.key_consistent_share,
        summary.song_key_consistency,
        summary.density_ratio,
        summary.song_density_ratio,
        100.0 * summary.no_long_silence_share,
        summary.grammatical_bars,
        summary.forbidden_mass,
        started.elapsed().as_secs_f64()
    );
}

/// `x` with `digits` decimals, or – when there was nothing to measure.
fn num(x: f64, digits: usize) -> String {
    if x.is_finite() {
        format!("{x:.digits$}")
    } else {
        "–".into()
    }
}

fn quarters(v: &[Option<f64>]) -> String {
    v.iter()
        .map(|x| x.map_or("-".to_string(), |x| format!("{x:.2}")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `report` section for runs with a `samples.json`: a table, and where `svg` is given, a
/// plot of both style similarities by quarter (one line per run name, seeds averaged).
pub fn report(runs: &[PathBuf], svg: Option<&Path>) -> Result<String, String> {
    let groups = read_groups(runs)?;
    if groups.is_empty() {
        return Ok(String::new());
    }
    let mean = |vs: &[serde_json::Value], key: &str, k: Option<usize>| -> f64 {
        let xs: Vec<f64> = vs
            .iter()
            .filter_map(|v| match k {
                Some(k) => v["summary"][key][k].as_f64(),
                None => v["summary"][key].as_f64(),
            })
            .collect();
        // Nothing to average (JSON null: no sample had notes there) stays NaN, shown as –.
        if xs.is_empty() {
            f64::NAN
        } else {
            xs.iter().sum::<f64>() / xs.len() as f64
        }
    };
    let mut out = String::from(
        "\nSampled from the first bars of held-out songs to 4× the training window \
         (style similarity to the song by quarter of the new part)\n\n| run | seeds | songs | \
         onset–duration, quarters 1–4 | kept | time–pitch, quarters 1–4 | kept | key ↑ | key ≥ \
         0.8 | density × prompt | no silence > 2 bars | grammatical bars | forbidden mass | the \
         songs' own key, density |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut lines = Vec::new();
    for (name, vs) in &groups {
        let q = |key: &str| {
            (0..QUARTERS)
                .map(|k| mean(vs, key, Some(k)))
                .collect::<Vec<_>>()
        };
        let (od, tp) = (q("onset_duration"), q("time_pitch"));
        let join = |v: &[f64]| v.iter().map(|x| num(*x, 3)).collect::<Vec<_>>().join(" / ");
        let m = |key: &str| mean(vs, key, None);
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} % | {} | {} % | {} | {} | {}, {} |",
            vs.len(),
            vs[0]["summary"]["samples"],
            join(&od),
            num(m("onset_duration_kept"), 2),
            join(&tp),
            num(m("time_pitch_kept"), 2),
            num(m("key_consistency"), 3),
            num(100.0 * m("key_consistent_share"), 0),
            num(m("density_ratio"), 2),
            num(100.0 * m("no_long_silence_share"), 0),
            num(m("grammatical_bars"), 3),
            num(m("forbidden_mass"), 3),
            num(m("song_key_consistency"), 3),
            num(m("song_density_ratio"), 2),
        );
        lines.push((name.clone(), od, tp));
    }
    if let Some(path) = svg {
        std::fs::write(path, style_plot(&lines))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        eprintln!("style plot written to {}", path.display());
    }
    Ok(out)
}

/// Every run's samples.json and samples-context.json, grouped by run name (seeds together) and
/// context.
fn read_groups(runs: &[PathBuf]) -> Result<Vec<(String, Vec<serde_json::Value>)>, String> {
    let mut groups: Vec<(String, Vec<serde_json::Value>)> = Vec::new();
    // samples.json reads everything; samples-context.json (`--context`) is as the page plays.
    let files = runs
        .iter()
        .flat_map(|r| ["samples.json", "samples-context.json"].map(|f| (r, r.join(f))));
    for (r, path) in files {
        if !path.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut name = pianoformer::eval::report::group_name(&super::run_name(r));
        if let Some(c) = v["context"].as_u64() {
            name = format!("{name}, context {c}");
        }
        match groups.iter_mut().find(|(n, _)| *n == name) {
            Some((_, vs)) => vs.push(v),
            None => groups.push((name, vec![v])),
        }
    }
    Ok(groups)
}

/// Two panels (onset–duration, time–pitch): similarity by quarter of the new part, a line
/// per run.
fn style_plot(lines: &[(String, Vec<f64>, Vec<f64>)]) -> String {
    const PANEL: f64 = 300.0;
    const H: f64 = 300.0;
    const L: f64 = 55.0;
    const T: f64 = 30.0;
    const B: f64 = 45.0;
    let (lo, hi) = value_range(lines);
    // Room for the longest run name in the legend (about 7 px a character at 12 px).
    let longest = lines
        .iter()
        .map(|(n, ..)| n.chars().count())
        .max()
        .unwrap_or(0);
    let width = 2.0 * (L + PANEL) + 40.0 + 7.0 * longest as f64;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{H}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" \
         fill=\"white\"/>\n"
    );
    for (p, title) in ["onset–duration", "time–pitch"].iter().enumerate() {
        let x0 = L + p as f64 * (L + PANEL);
        let x = |q: usize| x0 + 20.0 + (PANEL - 40.0) * q as f64 / (QUARTERS - 1) as f64;
        let y = |v: f64| T + (H - T - B) * (1.0 - (v - lo) / (hi - lo));
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"18\" text-anchor=\"middle\">{title} similarity to the song\
             </text>\n<line x1=\"{x0}\" y1=\"{T}\" x2=\"{x0}\" y2=\"{b}\" stroke=\"black\"/>\n\
             <line x1=\"{x0}\" y1=\"{b}\" x2=\"{:.1}\" y2=\"{b}\" stroke=\"black\"/>",
            x0 + PANEL / 2.0,
            x0 + PANEL,
            b = H - B
        );
        for q in 0..QUARTERS {
            let _ = writeln!(
                s,
                "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">Q{}</text>",
                x(q),
                H - B + 16.0,
                q + 1
            );
        }
        pianoformer::eval::report::value_labels(&mut s, x0, lo, hi, &y);
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">quarter of the continuation\
             </text>",
            x0 + PANEL / 2.0,
            H - 8.0
        );
        for (k, (_, od, tp)) in lines.iter().enumerate() {
            let values = if p == 0 { od } else { tp };
            curve(&mut s, values, COLORS[k % COLORS.len()], &|q| x(q), &y);
        }
    }
    for (k, (name, ..)) in lines.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let lx = 2.0 * (L + PANEL) + 10.0;
        let ly = T + 18.0 * k as f64 + 10.0;
        let _ = writeln!(
            s,
            "<line x1=\"{lx}\" y1=\"{ly}\" x2=\"{}\" y2=\"{ly}\" stroke=\"{color}\" \
             stroke-width=\"2\"/><text x=\"{}\" y=\"{}\">{}</text>",
            lx + 20.0,
            lx + 25.0,
            ly + 4.0,
            escape(name)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// The similarity axis: the values' range with a margin, within [0, 1].
fn value_range(lines: &[(String, Vec<f64>, Vec<f64>)]) -> (f64, f64) {
    let all = lines
        .iter()
        .flat_map(|(_, a, b)| a.iter().chain(b))
        .copied()
        .filter(|v| v.is_finite());
    let (lo, hi) = all.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    if lo.is_finite() && hi > lo {
        (
            (lo - 0.1 * (hi - lo)).max(0.0),
            (hi + 0.1 * (hi - lo)).min(1.0),
        )
    } else {
        (0.0, 1.0)
    }
}

/// A run's line over the quarters, a dot at each value (unmeasured quarters left out).
fn curve(
    s: &mut String,
    values: &[f64],
    color: &str,
    x: &dyn Fn(usize) -> f64,
    y: &dyn Fn(f64) -> f64,
) {
    let points: Vec<(f64, f64)> = values
        .iter()
        .enumerate()
        .filter(|(_, v)| v.is_finite())
        .map(|(q, &v)| (x(q), y(v)))
        .collect();
    let path: Vec<String> = points
        .iter()
        .map(|(a, b)| format!("{a:.1},{b:.1}"))
        .collect();
    let _ = writeln!(
        s,
        "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>",
        path.join(" ")
    );
    for (a, b) in points {
        let _ = writeln!(
            s,
            "<circle cx=\"{a:.1}\" cy=\"{b:.1}\" r=\"3\" fill=\"{color}\"/>"
        );
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
