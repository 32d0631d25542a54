//! `pianoformer report`: gathers evaluated runs into Markdown tables (mean ± std over seeds),
//! and for continuation an SVG plot of loss against token position.

use std::path::{Path, PathBuf};

use pianoformer::eval::report;

use super::read_eval;

/// A Markdown table of several evaluated runs (mean ± std over runs that
/// share a name up to a trailing `-seedN`), and for continuation an SVG of loss per position.
pub fn run(runs: &[PathBuf], svg: Option<&Path>, style_svg: Option<&Path>) -> Result<(), String> {
    if runs.is_empty() {
        return Err("give the run folders to report on".into());
    }
    // Runs scored only by sampling (`eval --sample`) have no eval.json.
    let sampled = super::sampled::report(runs, style_svg)?;
    if style_svg.is_some() && sampled.is_empty() {
        return Err(
            "--style-svg: none of these runs has a samples.json (run `pianoformer eval --task \
             continuation --sample` on them first)"
                .into(),
        );
    }
    let evals: Vec<(String, serde_json::Value)> = runs
        .iter()
        .filter(|r| sampled.is_empty() || r.join("eval.json").is_file())
        .map(|r| Ok((super::run_name(r), read_eval(r)?)))
        .collect::<Result<_, String>>()?;
    if evals.is_empty() {
        return crate::print_stdout(&sampled);
    }
    let mut out = if evals[0].1["task"].as_str() == Some("accompaniment") {
        report::accompaniment_tables(&evals)
    } else {
        if let Some(path) = svg {
            std::fs::write(path, report::loss_plot(&report::groups(&evals)))
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            eprintln!("plot written to {}", path.display());
        }
        report::continuation_table(&evals)
    };
    out.push_str(&sampled);
    crate::print_stdout(&out)
}
