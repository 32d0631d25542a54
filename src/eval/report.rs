//! Reports over evaluated runs: Markdown tables of several runs (mean ± std over runs that
//! share a name up to a trailing `-seedN`) and, for continuation, an SVG of the validation
//! loss against token position. `pianoformer report` reads the runs' eval.json and prints
//! these.

use std::fmt::Write as _;

use serde_json::Value;

use crate::music::metrics::mean_std;

/// The plots' line colours, one per run (ColorBrewer's Dark2, then grey).
pub const COLORS: [&str; 8] = [
    "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666",
];

/// Runs of one name (their seeds), each run's eval.json.
pub type Group<'a> = (String, Vec<&'a Value>);

/// The name runs of several seeds share: `name-seed1`, `name-seed2` → `name`.
pub fn group_name(name: &str) -> String {
    match name.rsplit_once("-seed") {
        Some((base, n)) if n.chars().all(|c| c.is_ascii_digit()) => base.to_string(),
        _ => name.to_string(),
    }
}

/// Named evaluations grouped by [`group_name`], in the order they first appear.
pub fn groups(evals: &[(String, Value)]) -> Vec<Group<'_>> {
    let mut groups: Vec<Group> = Vec::new();
    for (name, e) in evals {
        let g = group_name(name);
        match groups.iter_mut().find(|(n, _)| *n == g) {
            Some((_, v)) => v.push(e),
            None => groups.push((g, vec![e])),
        }
    }
    groups
}

/// Mean ± std of `values` (the mean alone for one value).
fn pm(values: Vec<f64>, digits: usize) -> String {
    let (m, s) = mean_std(&values);
    if values.len() > 1 {
        format!("{m:.digits$} ± {s:.digits$}")
    } else {
        format!("{m:.digits$}")
    }
}

/// Every table of an accompaniment report: the sampled panel, the ablations and the excerpt
/// scores at each length, for the runs that have them.
pub fn accompaniment_tables(evals: &[(String, Value)]) -> String {
    let groups = groups(evals);
    let mut out = String::new();
    panel_table(&mut out, evals, &groups);
    ablations_table(&mut out, evals, &groups);
    excerpt_tables(&mut out, evals, &groups);
    out
}

fn panel_table(out: &mut String, evals: &[(String, Value)], groups: &[Group]) {
    if evals.iter().any(|(_, e)| e["panel"].is_object()) {
        let _ = writeln!(
            out,
            "\nWhole test songs, sampled (step-by-step models)\n\n| run | seeds | chord tones ↑ \
             (real piano) | substituted chords followed ↑ | outputs changed | density × \
             real | re-strikes (real) |\n|---|---|---|---|---|---|---|"
        );
        for (name, es) in groups {
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
}

fn ablations_table(out: &mut String, evals: &[(String, Value)], groups: &[Group]) {
    if evals.iter().any(|(_, e)| e["ablations"].is_object()) {
        let _ = writeln!(
            out,
            "\nWhat the outputs rest on: validation loss (16-bar excerpts) as trained, with \
             uniform attention (queries and keys zeroed), and, for models that read \
             structure labels, with the labels at zero or taken from another song\n\n\
             | run | seeds | as trained | uniform attention | labels at zero | another \
             song's labels |\n|---|---|---|---|---|---|"
        );
        for (name, es) in groups {
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
}

fn excerpt_tables(out: &mut String, evals: &[(String, Value)], groups: &[Group]) {
    let mut lengths: Vec<String> = Vec::new();
    for (_, e) in evals {
        if let Some(t) = e["test"].as_object() {
            for k in t.keys() {
                if !lengths.contains(k) {
                    lengths.push(k.clone());
                }
            }
        }
    }
    lengths.sort_by_key(|k| k.parse::<usize>().unwrap_or(0));
    for len in &lengths {
        let _ = writeln!(out, "\n{len}-bar test excerpts\n");
        let _ = writeln!(
            out,
            "| run | seeds | steps | decoding | CS ↑ | SSMD ↓ | GS ↑ | NDD ↓ | onset F1 ↑ |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
        for (name, es) in groups {
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
}

/// A continuation report's table: the loss by quarter of 4N positions.
pub fn continuation_table(evals: &[(String, Value)]) -> String {
    let groups = groups(evals);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| run | seeds | steps | trained on | 0–N | N–2N | 2N–3N | 3N–4N |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
    for (name, es) in groups {
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
    out
}

/// Five value labels from `lo` to `hi` left of the axis at `x`, placed by `y`.
pub fn value_labels(s: &mut String, x: f64, lo: f64, hi: f64, y: &dyn Fn(f64) -> f64) {
    for k in 0..=4 {
        let v = lo + (hi - lo) * k as f64 / 4.0;
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{v:.2}</text>",
            x - 6.0,
            y(v) + 4.0
        );
    }
}

/// Validation loss against token position, one line per group (seeds averaged), smoothed
/// over 32 positions, with the training length marked.
pub fn loss_plot(groups: &[(String, Vec<&serde_json::Value>)]) -> String {
    const W: f64 = 720.0;
    const H: f64 = 420.0;
    const L: f64 = 60.0;
    const R: f64 = 170.0;
    const T: f64 = 20.0;
    const B: f64 = 45.0;
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
    value_labels(&mut s, L, lo, hi, &y);
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
