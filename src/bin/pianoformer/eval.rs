//! `pianoformer eval`: scores a trained model on POP909's held-out songs and writes
//! `eval.json` into its run folder; `pianoformer report` gathers several runs into a Markdown
//! table (and, for continuation, an SVG plot of loss against token position).
//!
//! Accompaniment (the F-StrIPE Table I setting): the binarisation threshold and gap are chosen
//! on 16-bar validation excerpts by onset F1, then CS, SSMD, GS and NDD are measured on test
//! excerpts of each requested length. Continuation (the SPE Table 6 / Figure 3 setting):
//! cross-entropy per token position on validation windows up to 4× the training length.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use pianoformer::device::{self, Preference};
use pianoformer::model::config::Task;
use pianoformer::model::performer::Performer;
use pianoformer::music::metrics::mean_std;
use pianoformer::music::tokens::STEPS_PER_BEAT;
use pianoformer::train::corpus::{Corpus, WindowSpec};
use pianoformer::train::eval::{Ablations, Predictions, excerpts, position_losses};
use pianoformer::train::session::RunState;
use pianoformer::train::sources::{self, Parts};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// accompaniment or continuation.
    #[arg(long)]
    pub task: String,
    /// The training run's folder (eval.json is written there).
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
    /// Continuation: window length in tokens (default: 4 × the training window).
    #[arg(long)]
    pub length: Option<usize>,
    /// Continuation: windows at most.
    #[arg(long, default_value_t = 64)]
    pub windows: usize,
    /// Step-by-step accompaniment: the sampling temperatures tried on 16-bar validation
    /// excerpts: of those that play 0.8-1.25x as many notes as the pianist there, the one
    /// with the best chroma similarity is kept (else the density nearest the pianist's).
    #[arg(long, value_delimiter = ',', default_value = "0.8,0.9,1.0,1.1,1.2")]
    pub temperatures: Vec<f32>,
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
    /// Songs per split at most (quick runs).
    #[arg(long)]
    pub limit: Option<usize>,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[arg(long, default_value = "cpu")]
    pub backend: String,
}

fn run_state(dir: &Path) -> Option<RunState> {
    let text = std::fs::read_to_string(dir.join("run.json")).ok()?;
    serde_json::from_str(&text).ok()
}

pub fn run(args: Args) -> Result<(), String> {
    let task = crate::train::parse_task(&args.task)?;
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
    if !args.model.join("model.bpk").is_file() {
        return Err(format!(
            "{spec} is not a training run's folder (no model.bpk)"
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
            train: false,
            valid: true,
            test: task == Task::Accompaniment && !args.ablations_only,
        },
        args.limit,
    )?;
    eprintln!("data: {}", data.description);
    if args.ablations_only {
        if task != Task::Accompaniment {
            return Err("--ablations-only is for accompaniment models".into());
        }
        let path = args.model.join("eval.json");
        let mut result = read_eval(&args.model)?;
        let a = ablations(model, &data.valid, args.per_song, args.seed)?;
        let obj = result
            .as_object_mut()
            .ok_or_else(|| format!("{} is not an evaluation", path.display()))?;
        obj.insert("ablations".into(), serde_json::json!(a));
        std::fs::write(&path, serde_json::to_vec_pretty(&result).expect("json"))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        eprintln!("added to {}", path.display());
        return Ok(());
    }
    let result = match task {
        Task::Accompaniment if model.config.is_autoregressive() => {
            crate::panel::run(model, &data, &args, &device)?
        }
        Task::Accompaniment => {
            let spec16 = WindowSpec::for_model(&model.config, 16 * 4 * STEPS_PER_BEAT);
            let valid = excerpts(&data.valid, &spec16, args.per_song);
            if valid.is_empty() {
                return Err(
                    "no validation song has 16 annotated bars with an accompaniment: the \
                     threshold cannot be chosen"
                        .into(),
                );
            }
            let preds = pollster::block_on(Predictions::run(model, valid, args.seed, &device))
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
                let preds = pollster::block_on(Predictions::run(model, test, args.seed, &device))
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
            serde_json::json!({
                "task": "accompaniment",
                "binarize": binarize,
                "valid_onset_f1": valid_f1,
                "test": lengths,
            })
        }
        Task::Continuation => {
            let trained = state.as_ref().map_or(512, |s| s.options.window);
            let length = args.length.unwrap_or(4 * trained);
            let spec = WindowSpec::for_model(&model.config, length);
            let batches = data.valid.fixed_windows(true, &spec, 8, args.windows, 8);
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
            serde_json::json!({
                "task": "continuation",
                "trained_window": trained,
                "length": length,
                "windows": windows,
                "quarters": quarters,
                "mean": curve.iter().sum::<f64>() / curve.len() as f64,
                "positions": curve.iter().map(|v| (v * 1e4).round() / 1e4).collect::<Vec<_>>(),
            })
        }
    };
    let mut result = result;
    if task == Task::Accompaniment {
        let ablations = ablations(model, &data.valid, args.per_song, args.seed)?;
        if let Some(obj) = result.as_object_mut() {
            obj.insert("ablations".into(), serde_json::json!(ablations));
        }
    }
    if let Some(obj) = result.as_object_mut() {
        obj.insert("model".into(), serde_json::json!(loaded.source));
        obj.insert("pe".into(), serde_json::json!(model.config.pe.kind.name()));
        obj.insert("gated".into(), serde_json::json!(model.config.pe.gated));
        obj.insert(
            "levels".into(),
            serde_json::json!(model.config.pe.structure_levels()),
        );
        obj.insert("steps".into(), serde_json::json!(state.map(|s| s.step)));
        obj.insert("data".into(), serde_json::json!(data.description));
        obj.insert(
            "seconds".into(),
            serde_json::json!(started.elapsed().as_secs_f64()),
        );
    }
    let path = args.model.join("eval.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&result).expect("json"))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    eprintln!("written to {}", path.display());
    Ok(())
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

/// A label for a run in tables: its folder name.
fn run_name(dir: &Path) -> String {
    dir.file_name()
        .map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into())
}

fn read_eval(dir: &Path) -> Result<serde_json::Value, String> {
    let path = dir.join("eval.json");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "{}: {e} (run `pianoformer eval` on it first)",
            path.display()
        )
    })?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// `pianoformer report`: a Markdown table of several evaluated runs (mean ± std over runs that
/// share a name up to a trailing `-seedN`), and for continuation an SVG of loss per position.
pub fn report(runs: &[PathBuf], svg: Option<&Path>) -> Result<(), String> {
    if runs.is_empty() {
        return Err("give the run folders to report on".into());
    }
    let evals: Vec<(String, serde_json::Value)> = runs
        .iter()
        .map(|r| Ok((run_name(r), read_eval(r)?)))
        .collect::<Result<_, String>>()?;
    // Group seeds: `name-seed1`, `name-seed2` → `name`.
    let group = |name: &str| -> String {
        match name.rsplit_once("-seed") {
            Some((base, n)) if n.chars().all(|c| c.is_ascii_digit()) => base.to_string(),
            _ => name.to_string(),
        }
    };
    let mut groups: Vec<(String, Vec<&serde_json::Value>)> = Vec::new();
    for (name, e) in &evals {
        let g = group(name);
        match groups.iter_mut().find(|(n, _)| *n == g) {
            Some((_, v)) => v.push(e),
            None => groups.push((g, vec![e])),
        }
    }
    let task = evals[0].1["task"].as_str().unwrap_or("").to_string();
    let mut out = String::new();
    let pm = |values: Vec<f64>, digits: usize| -> String {
        let (m, s) = mean_std(&values);
        if values.len() > 1 {
            format!("{m:.digits$} ± {s:.digits$}")
        } else {
            format!("{m:.digits$}")
        }
    };
    if task == "accompaniment" {
        let mut lengths: Vec<String> = Vec::new();
        for (_, e) in &evals {
            if let Some(t) = e["test"].as_object() {
                for k in t.keys() {
                    if !lengths.contains(k) {
                        lengths.push(k.clone());
                    }
                }
            }
        }
        lengths.sort_by_key(|k| k.parse::<usize>().unwrap_or(0));
        if evals.iter().any(|(_, e)| e["panel"].is_object()) {
            let _ = writeln!(
                out,
                "\nWhole test songs, sampled (step-by-step models)\n\n| run | seeds | chord tones ↑ \
                 (real piano) | substituted chords followed ↑ | outputs changed | density × \
                 real | re-strikes (real) |\n|---|---|---|---|---|---|---|"
            );
            for (name, es) in &groups {
                let es: Vec<_> = es.iter().filter(|e| e["panel"].is_object()).collect();
                if es.is_empty() {
                    continue;
                }
                let m = |k: &str| -> Vec<f64> {
                    es.iter().filter_map(|e| e["panel"][k].as_f64()).collect()
                };
                let _ = writeln!(
                    out,
                    "| {name} | {} | {} ({}) | {} | {} | {} | {} ({}) |",
                    es.len(),
                    pm(m("chord_tones"), 3),
                    pm(m("real_chord_tones"), 3),
                    pm(m("followed"), 3),
                    pm(m("changed_share"), 2),
                    pm(m("density_ratio"), 2),
                    pm(m("restrikes"), 3),
                    pm(m("real_restrikes"), 3),
                );
            }
        }
        if evals.iter().any(|(_, e)| e["ablations"].is_object()) {
            let _ = writeln!(
                out,
                "\nWhat the outputs rest on: validation loss (16-bar excerpts) as trained, with \
                 uniform attention (queries and keys zeroed), and, for models that read \
                 structure labels, with the labels at zero or taken from another song\n\n\
                 | run | seeds | as trained | uniform attention | labels at zero | another \
                 song's labels |\n|---|---|---|---|---|---|"
            );
            for (name, es) in &groups {
                let es: Vec<_> = es.iter().filter(|e| e["ablations"].is_object()).collect();
                if es.is_empty() {
                    continue;
                }
                let m = |k: &str| -> String {
                    let v: Vec<f64> = es
                        .iter()
                        .filter_map(|e| e["ablations"][k].as_f64())
                        .collect();
                    if v.is_empty() { "—".into() } else { pm(v, 5) }
                };
                let _ = writeln!(
                    out,
                    "| {name} | {} | {} | {} | {} | {} |",
                    es.len(),
                    m("loss"),
                    m("uniform_attention"),
                    m("labels_zero"),
                    m("labels_other")
                );
            }
        }
        for len in &lengths {
            let _ = writeln!(out, "\n{len}-bar test excerpts\n");
            let _ = writeln!(
                out,
                "| run | seeds | steps | decoding | CS ↑ | SSMD ↓ | GS ↑ | NDD ↓ | onset F1 ↑ |"
            );
            let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
            for (name, es) in &groups {
                let metric = |m: &str| -> Vec<f64> {
                    es.iter()
                        .filter_map(|e| e["test"][len][m]["mean"].as_f64())
                        .collect()
                };
                let f1: Vec<f64> = es
                    .iter()
                    .filter_map(|e| e["test"][len]["onset_f1"].as_f64())
                    .collect();
                let b = &es[0]["binarize"];
                let decoding = match es[0]["temperature"].as_f64() {
                    Some(t) => format!("sampled, T {t:.2}"),
                    None => format!(
                        "{:.2} / {}",
                        b["threshold"].as_f64().unwrap_or(f64::NAN),
                        b["gap"]
                    ),
                };
                let _ = writeln!(
                    out,
                    "| {name} | {} | {} | {decoding} | {} | {} | {} | {} | {} |",
                    es.len(),
                    es[0]["steps"],
                    pm(metric("cs"), 3),
                    pm(metric("ssmd"), 2),
                    pm(metric("gs"), 3),
                    pm(metric("ndd"), 2),
                    pm(f1, 3)
                );
            }
        }
    } else {
        let _ = writeln!(
            out,
            "| run | seeds | steps | trained on | 0–N | N–2N | 2N–3N | 3N–4N |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
        for (name, es) in &groups {
            let q = |k: usize| -> Vec<f64> {
                es.iter()
                    .filter_map(|e| e["quarters"][k].as_f64())
                    .collect()
            };
            let _ = writeln!(
                out,
                "| {name} | {} | {} | {} | {} | {} | {} | {} |",
                es.len(),
                es[0]["steps"],
                es[0]["trained_window"],
                pm(q(0), 3),
                pm(q(1), 3),
                pm(q(2), 3),
                pm(q(3), 3)
            );
        }
        if let Some(path) = svg {
            let svg_text = loss_plot(&groups);
            std::fs::write(path, svg_text)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            eprintln!("plot written to {}", path.display());
        }
    }
    crate::print_stdout(&out)
}

/// Validation loss against token position, one line per group (seeds averaged), smoothed
/// over 32 positions, with the training length marked.
fn loss_plot(groups: &[(String, Vec<&serde_json::Value>)]) -> String {
    const W: f64 = 720.0;
    const H: f64 = 420.0;
    const L: f64 = 60.0;
    const R: f64 = 170.0;
    const T: f64 = 20.0;
    const B: f64 = 45.0;
    const COLORS: [&str; 8] = [
        "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666",
    ];
    let curves: Vec<(String, Vec<f64>)> = groups
        .iter()
        .map(|(name, es)| {
            let all: Vec<Vec<f64>> = es
                .iter()
                .filter_map(|e| e["positions"].as_array())
                .map(|a| a.iter().filter_map(|v| v.as_f64()).collect())
                .collect();
            let n = all.iter().map(Vec::len).min().unwrap_or(0);
            let mean: Vec<f64> = (0..n)
                .map(|i| all.iter().map(|c| c[i]).sum::<f64>() / all.len() as f64)
                .collect();
            let smooth: Vec<f64> = (0..n)
                .map(|i| {
                    let lo = i.saturating_sub(16);
                    let hi = (i + 16).min(n);
                    mean[lo..hi].iter().sum::<f64>() / (hi - lo) as f64
                })
                .collect();
            (name.clone(), smooth)
        })
        .collect();
    let n = curves.iter().map(|c| c.1.len()).max().unwrap_or(1).max(1);
    let values = curves.iter().flat_map(|c| c.1.iter().skip(8).copied());
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    let (lo, hi) = if lo.is_finite() && hi > lo {
        (lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))
    } else {
        (0.0, 1.0)
    };
    let x = |i: f64| L + (W - L - R) * i / n as f64;
    let y = |v: f64| T + (H - T - B) * (1.0 - (v - lo) / (hi - lo));
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" \
         fill=\"white\"/>\n"
    );
    // Axes and ticks.
    let _ = writeln!(
        s,
        "<line x1=\"{L}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>",
        H - B,
        W - R,
        H - B
    );
    let _ = writeln!(
        s,
        "<line x1=\"{L}\" y1=\"{T}\" x2=\"{L}\" y2=\"{}\" stroke=\"black\"/>",
        H - B
    );
    for k in 0..=4 {
        let i = n as f64 * k as f64 / 4.0;
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            x(i),
            H - B + 16.0,
            i as usize
        );
        if k > 0 && k < 4 {
            let _ = writeln!(
                s,
                "<line x1=\"{0:.1}\" y1=\"{T}\" x2=\"{0:.1}\" y2=\"{1}\" stroke=\"#ccc\" \
                 stroke-dasharray=\"4 3\"/>",
                x(i),
                H - B
            );
        }
    }
    for k in 0..=4 {
        let v = lo + (hi - lo) * k as f64 / 4.0;
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{v:.2}</text>",
            L - 6.0,
            y(v) + 4.0
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">token position (training windows end at \
         the first dashed line)</text>",
        (L + W - R) / 2.0,
        H - 8.0
    );
    let _ = writeln!(
        s,
        "<text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">\
         validation cross-entropy (nats)</text>",
        (T + H - B) / 2.0,
        (T + H - B) / 2.0
    );
    for (k, (name, c)) in curves.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let points: Vec<String> = c
            .iter()
            .enumerate()
            .map(|(i, &v)| format!("{:.1},{:.1}", x(i as f64), y(v.clamp(lo, hi))))
            .collect();
        let _ = writeln!(
            s,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"/>",
            points.join(" ")
        );
        let ly = T + 18.0 * k as f64 + 10.0;
        let _ = writeln!(
            s,
            "<line x1=\"{}\" y1=\"{ly}\" x2=\"{}\" y2=\"{ly}\" stroke=\"{color}\" \
             stroke-width=\"2\"/><text x=\"{}\" y=\"{}\">{name}</text>",
            W - R + 10.0,
            W - R + 30.0,
            W - R + 35.0,
            ly + 4.0
        );
    }
    s.push_str("</svg>\n");
    s
}
