//! `pianoformer bench continue`: milliseconds per token of continuation as generation pays it
//! (the model's step, the grammar's mask, top-p), the shipped default model (or `--model`)
//! after a 2-bar fixture prompt. On wgpu, both ways: through tensor ops a token at a time (what
//! WebGPU ran before issue 35) and fused (`shaders/continuation_steps.wgsl`: a dispatch a
//! token, the next token drawn on the GPU, up to 16 a read-back, replayed by the host), with
//! the read-backs a token and whether they wrote the same tokens; on the CPU, the plain-slice
//! decoder. Each length in `--positions` (new tokens, default 32 and 96) is generated once to
//! warm up and once timed; the cost per token is the difference of the two timed lengths over
//! the difference of their tokens, so what a generation pays once (the prompt's prefill,
//! gathering the weights, compiling the kernels) falls out.

use std::time::Instant;

use burn::tensor::Device;
use pianoformer::device::{self, Preference};
use pianoformer::generate::continuation::ahead::{AheadStats, take_stats};
use pianoformer::generate::fused;
use pianoformer::generate::{Length, Sampling, continue_tokens, prompt_tokens};
use pianoformer::model::config::Task;
use pianoformer::model::performer::Performer;
use pianoformer::music::chords::Chord;
use pianoformer::music::fixtures;

use super::Options;

pub fn continuation(options: &Options) -> Result<(), String> {
    let preference: Preference = options.backend.parse().map_err(|e| format!("{e}"))?;
    let backend = pollster::block_on(device::init(preference)).map_err(|e| format!("{e}"))?;
    let device = backend.device.clone();
    let loaded = crate::models::load(&options.model, Task::Continuation, None, &device)?;
    let model = &loaded.model;
    let mut lengths = options.positions.clone();
    lengths.sort_unstable();
    lengths.dedup();
    if lengths.len() < 2 || lengths[0] == 0 {
        return Err("give two or more token counts, e.g. --positions 32,96".into());
    }
    let gpu = backend.info.kind == device::BackendKind::Gpu;
    // (name, fused, planned): a planned continuation has every new bar's chord set (C Am F G7
    // in turn), which the host forces and the GPU does not know.
    let ways: &[(&str, bool, bool)] = if gpu {
        &[
            ("tensor ops", false, false),
            ("fused", true, false),
            ("fused, planned", true, true),
        ]
    } else {
        &[("plain-slice", true, false)]
    };
    println!(
        "continuation {} ({} parameters) on {}; ms per token from {:?} new tokens",
        loaded.source.split_whitespace().next().unwrap_or("default"),
        model.parameters(),
        backend.info.label(),
        lengths
    );
    let prompt = prompt_tokens(&fixtures::song(0, 2)).map_err(|e| e.to_string())?;
    let sampling = Sampling {
        seed: 3,
        temperature: 0.8,
        ..Sampling::default()
    };
    // Read at most the window the model was trained on, as the page and `generate` do.
    let context = loaded.trained_window;
    let chord = |s: &str| Chord::parse_any(s).ok().flatten();
    let plan: Vec<Vec<Option<Chord>>> = (0..64)
        .map(|bar| vec![chord(["C", "Am", "F", "G7"][bar % 4])])
        .collect();
    let run = |n: usize, (on, planned): (bool, bool)| {
        let plan = if planned { &plan[..] } else { &[] };
        generate(model, &prompt, n, sampling, context, plan, on, &device)
    };
    let mut per_way = Vec::new();
    let mut outputs = Vec::new();
    for &(name, on, planned) in ways {
        let mut times = Vec::new();
        let mut stats = AheadStats::default();
        for &n in &lengths {
            run(n, (on, planned))?;
            take_stats();
            let start = Instant::now();
            let tokens = run(n, (on, planned))?;
            times.push((n, start.elapsed().as_secs_f64() * 1e3));
            stats = take_stats();
            outputs.push(tokens);
        }
        let (first, last) = (times[0], times[times.len() - 1]);
        let per_token = (last.1 - first.1) / (last.0 - first.0) as f64;
        let ahead = read_backs(&stats);
        println!(
            "{name:>14}: {per_token:8.3} ms/token ({} tokens {:.1} ms, {} tokens {:.1} ms){ahead}",
            first.0, first.1, last.0, last.1
        );
        per_way.push(per_token);
    }
    if per_way.len() > 1 {
        let k = lengths.len();
        println!(
            "{:>14}: {:.1}x faster a token than tensor ops; {}",
            ways[1].0,
            per_way[0] / per_way[1],
            agreement(&outputs[k - 1], &outputs[2 * k - 1])
        );
    }
    fused::set_enabled(true);
    Ok(())
}

/// The read-backs a token of a fused run (nothing for a run that did not go ahead).
fn read_backs(stats: &AheadStats) -> String {
    if stats.chunks == 0 {
        return String::new();
    }
    format!(
        "; {:.3} read-backs a token ({} chunks for {} tokens, {} misses)",
        stats.chunks as f64 / stats.fed as f64,
        stats.chunks,
        stats.fed,
        stats.misses
    )
}

/// Whether two runs wrote the same tokens, or where they part.
fn agreement(a: &[u32], b: &[u32]) -> String {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        None if a.len() == b.len() => "the same tokens".into(),
        None => "one run is longer".into(),
        Some(at) => format!("the tokens part at token {at}"),
    }
}

/// `n` new tokens after `prompt` with its new bars' chords planned by `plan` (none: the
/// model's), fused or not.
#[allow(clippy::too_many_arguments)]
fn generate(
    model: &Performer,
    prompt: &[u32],
    n: usize,
    sampling: Sampling,
    context: Option<usize>,
    plan: &[Vec<Option<Chord>>],
    fused_on: bool,
    device: &Device,
) -> Result<Vec<u32>, String> {
    fused::set_enabled(fused_on);
    pollster::block_on(continue_tokens(
        model,
        prompt,
        Length {
            context,
            ..Length::tokens(n)
        },
        sampling,
        plan,
        &[],
        None,
        device,
        |_| async { true },
    ))
    .map_err(|e| e.to_string())
}
