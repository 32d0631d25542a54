//! `pianoformer bench decode`: per-token decoding time at several positions, measured in one
//! run, for whole tokens as generation pays them: the model's step, log-softmax, the grammar's
//! mask and top-p sampling. Rows: the shipped default continuation model (what the page runs)
//! on the plain-slice decoder and through tensor ops; the headline-size Performer the same two
//! ways; and the softmax baseline with a KV cache at that size. A Performer token should cost
//! the same at position 8192 as at 512; a softmax token grows with the cache.

use std::time::Instant;

use burn::tensor::{Device, Int, Tensor, TensorData};
use pianoformer::device::{self, Preference};
use pianoformer::generate::{Sampling, log_softmax_values, sample_token};
use pianoformer::model::config::{AttentionKind, PerformerConfig};
use pianoformer::model::performer::{Inputs, Performer, State, StepInput, Stepping};
use pianoformer::music::tokens::{Grammar, Token};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

mod accompany;
mod attention;
mod continuation;
mod harmonize;
mod map;
use attention::attention;

/// Prefill in chunks of this many tokens (keeps the softmax score matrix small).
const PREFILL_CHUNK: usize = 1024;

pub struct Options {
    pub positions: Vec<usize>,
    pub steps: usize,
    pub backend: String,
    pub json: bool,
    /// Training benchmark: steps per window and windows per batch.
    pub window: usize,
    pub batch: usize,
    /// Harmonizer benchmark: the model timed.
    pub model: String,
}

fn token_ids(start: usize, len: usize, vocab: usize, device: &Device) -> Tensor<2, Int> {
    let ids: Vec<i64> = (start..start + len)
        .map(|i| ((i * 7919 + 13) % vocab) as i64)
        .collect();
    Tensor::from_data(TensorData::new(ids, vec![1, len]), device)
}

/// Runs tokens until `state.position == target`, in chunks.
fn prefill(
    model: &Performer,
    state: &mut State,
    target: usize,
    device: &Device,
) -> Result<(), String> {
    while state.position < target {
        let len = PREFILL_CHUNK.min(target - state.position);
        let ids = token_ids(state.position, len, model.config.input_dim, device);
        let out = model
            .forward(Inputs::Tokens(ids), None, state, None)
            .map_err(|e| e.to_string())?;
        // Wait for the device before going on.
        let _ = out.narrow(1, len - 1, 1).into_data();
    }
    Ok(())
}

/// Median milliseconds per generated token over `steps` tokens from the current position:
/// each token is the model's step (plain-slice or tensor, as the state says), log-softmax, the
/// grammar's mask and a top-p draw, the drawn token being the next input.
fn decode(
    model: &Performer,
    state: &mut State,
    steps: usize,
    device: &Device,
) -> Result<f64, String> {
    let mut grammar = Grammar::new();
    grammar.advance(Token::Bos).map_err(|e| e.to_string())?;
    let mut rng = StdRng::seed_from_u64(state.position as u64);
    let sampling = Sampling {
        temperature: 1.0,
        top_p: 0.95,
        seed: 0,
        echo: 0.0,
        density: None,
        density_on_plan: true,
        key: 0.0,
    };
    let mut id = Token::Bos.id();
    let mut times = Vec::with_capacity(steps);
    for _ in 0..steps {
        let started = Instant::now();
        let logits = pollster::block_on(model.step(StepInput::Token(id), None, state, device))
            .map_err(|e| e.to_string())?;
        let logp = log_softmax_values(&logits);
        let mut allowed = grammar.allowed();
        for t in [Token::Pad, Token::Bos, Token::Eos] {
            allowed[t.id() as usize] = false;
        }
        id = sample_token(&logp, &allowed, sampling, rng.random());
        grammar
            .advance(Token::from_id(id).unwrap_or(Token::Eos))
            .map_err(|e| e.to_string())?;
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// The rows of `bench decode`: (name, ms per token at each position).
fn decode_rows(
    model: &Performer,
    name: &str,
    positions: &[usize],
    steps: usize,
    device: &Device,
    rows: &mut Vec<(String, Vec<f64>)>,
) -> Result<(), String> {
    let stepping = pollster::block_on(model.stepping(device)).map_err(|e| e.to_string())?;
    let plain = stepping.decoder.is_some();
    let forms: &[(&str, bool)] = if plain {
        &[("plain-slice steps", true), ("tensor steps", false)]
    } else {
        &[("tensor steps", false)]
    };
    for &(form, use_plain) in forms {
        let bare = Stepping {
            plain: stepping.plain.clone(),
            decoder: None,
        };
        let with = if use_plain { &stepping } else { &bare };
        let mut state = model.start(0, false, device).stepping(with);
        // One warm-up token (first-call allocations, kernel compilation on a GPU).
        decode(model, &mut state, 1, device)?;
        let mut times = Vec::new();
        for &p in positions {
            prefill(model, &mut state, p, device)?;
            times.push(decode(model, &mut state, steps, device)?);
        }
        rows.push((format!("{name}, {form}"), times));
    }
    Ok(())
}

/// Milliseconds per training step of the small accompaniment preset (sineSPE, gated) on
/// synthetic windows as dense as POP909's, after two warm-up steps.
fn train(options: &Options) -> Result<(), String> {
    use pianoformer::data::Example;
    use pianoformer::data::corpus::Batch;
    use pianoformer::model::config::Task;
    use pianoformer::model::pe::{PeConfig, PeKind};
    use pianoformer::train::step::{Schedule, Trainer};
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    let preference: Preference = options.backend.parse().map_err(|e| format!("{e}"))?;
    let backend = pollster::block_on(device::init(preference)).map_err(|e| format!("{e}"))?;
    let device = backend.device.clone().autodiff();
    let pe = PeConfig::new(PeKind::SineSpe).with_gate(true);
    let config = PerformerConfig::small(Task::Accompaniment, 0, pe);
    let model = Performer::new(&config, 0, &device).map_err(|e| e.to_string())?;
    let params = model.parameters();
    let schedule = Schedule {
        peak_lr: 1e-3,
        warmup: 10,
        total: 1000,
        final_ratio: 0.1,
    };
    let mut trainer = Trainer::new(model, schedule, 1.0, 0);
    let mut rng = StdRng::seed_from_u64(0);
    let len = options.window;
    let mut bernoulli = |n: usize, p: f32| -> Vec<f32> {
        (0..n)
            .map(|_| (rng.random::<f32>() < p) as u8 as f32)
            .collect()
    };
    let batch: Vec<Example> = (0..options.batch)
        .map(|_| Example {
            len,
            inputs: bernoulli(len * 512, 0.01),
            targets: bernoulli(len * 256, 0.03),
            coordinates: Vec::new(),
        })
        .collect();
    let batch = Batch::Rolls(batch);
    let mut times = Vec::new();
    for step in 0..options.steps + 2 {
        let started = Instant::now();
        pollster::block_on(trainer.train_step(&batch)).map_err(|e| e.to_string())?;
        if step >= 2 {
            times.push(started.elapsed().as_secs_f64() * 1e3);
        }
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    if options.json {
        let value = serde_json::json!({
            "backend": backend.info,
            "parameters": params,
            "window": len,
            "batch": options.batch,
            "ms_per_step": median,
            "steps_per_second": 1e3 / median,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?
        );
    } else {
        println!(
            "train, {}: small accompaniment preset ({params} parameters, gated sineSPE), \
             batch {} × {len} steps: {median:.0} ms per step ({:.2} steps/s), median of {}",
            backend.info.label(),
            options.batch,
            1e3 / median,
            options.steps
        );
    }
    Ok(())
}

/// Peak resident memory of this process in MiB (Linux; `None` elsewhere).
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// `bench tune`: the page's fine-tuning step, natively: the shipped default accompaniment
/// model (small preset) fine-tuned with the panel's defaults (4 windows of 128 steps) on five
/// songs written by the project's own code. The browser side is `tools/bench-tune.mjs`.
fn tune(options: &Options) -> Result<(), String> {
    use pianoformer::model::config::Task;
    use pianoformer::music::fixtures;
    use pianoformer::music::piece::Piece;
    use pianoformer::tune::{FineTune, TuneOptions};

    let preference: Preference = options.backend.parse().map_err(|e| format!("{e}"))?;
    let backend = pollster::block_on(device::init(preference)).map_err(|e| format!("{e}"))?;
    let device = backend.device.clone().autodiff();
    let loaded = crate::models::load("default", Task::Accompaniment, None, &device)?;
    let params = loaded.model.parameters();
    let pieces: Vec<Piece> = (0..5u8)
        .map(|k| Piece::from_song(&fixtures::song(k * 7 % 12, 16), &format!("song{k}.mid")))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let steps = options.steps.max(3);
    let tune_options = TuneOptions {
        steps: steps + 2,
        holdout: 0.0,
        ..TuneOptions::default()
    };
    let mut run = FineTune::new(loaded.model, &pieces, &tune_options).map_err(|e| e.to_string())?;
    let mut times = Vec::new();
    for step in 0..steps + 2 {
        let started = Instant::now();
        pollster::block_on(run.train_step()).map_err(|e| e.to_string())?;
        if step >= 2 {
            times.push(started.elapsed().as_secs_f64() * 1e3);
        }
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    let peak = peak_rss_mib();
    if options.json {
        let value = serde_json::json!({
            "backend": backend.info,
            "model": loaded.source,
            "parameters": params,
            "window": run.window,
            "batch": tune_options.batch,
            "ms_per_step": median,
            "steps_per_second": 1e3 / median,
            "peak_rss_mib": peak,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?
        );
    } else {
        println!(
            "tune, {}: {} ({params} parameters), batch {} × {} steps: {median:.0} ms per step \
             ({:.2} steps/s), median of {steps}; peak memory {}",
            backend.info.label(),
            loaded.source,
            tune_options.batch,
            run.window,
            1e3 / median,
            peak.map_or("unknown".into(), |m| format!("{m:.0} MiB")),
        );
    }
    Ok(())
}

pub fn run(what: &str, mut options: Options) -> Result<(), String> {
    if options.positions.is_empty() {
        options.positions = match what {
            "harmonize" => vec![25, 100, 400],
            "accompany" => vec![1, 4],
            "continue" => vec![32, 96],
            "map" => vec![16, 64],
            _ => vec![512, 2048, 8192],
        };
    }
    if what == "train" {
        return train(&options);
    }
    if what == "tune" {
        return tune(&options);
    }
    if what == "attention" {
        return attention(&options);
    }
    if what == "harmonize" {
        return harmonize::harmonize(&options);
    }
    if what == "accompany" {
        return accompany::accompany(&options);
    }
    if what == "continue" {
        return continuation::continuation(&options);
    }
    if what == "map" {
        return map::map(&options);
    }
    if what != "decode" {
        return Err(format!(
            "unknown benchmark '{what}' (there are: decode, train, tune, attention, harmonize, accompany, continue, map)"
        ));
    }
    decode_bench(&options)
}

/// `bench decode`: ms per token of the shipped continuation model and of the bench-sized
/// Performer and softmax baseline, at each of `--positions`.
fn decode_bench(options: &Options) -> Result<(), String> {
    let mut positions = options.positions.clone();
    positions.sort_unstable();
    positions.dedup();
    if positions.is_empty() || options.steps == 0 {
        return Err("give at least one position and one step".into());
    }
    let preference: Preference = options.backend.parse().map_err(|e| format!("{e}"))?;
    let backend = pollster::block_on(device::init(preference)).map_err(|e| format!("{e}"))?;
    let device = backend.device.clone();
    let mut rows = Vec::new();
    let shipped = crate::models::load(
        "default",
        pianoformer::model::config::Task::Continuation,
        None,
        &device,
    )?;
    let shipped_name = shipped
        .source
        .split_whitespace()
        .next()
        .unwrap_or("default")
        .to_string();
    let shipped_params = shipped.model.parameters();
    decode_rows(
        &shipped.model,
        &shipped_name,
        &positions,
        options.steps,
        &device,
        &mut rows,
    )?;
    let mut params = 0;
    for attention in [AttentionKind::Linear, AttentionKind::Softmax] {
        let config = PerformerConfig::bench().with_attention(attention);
        let model = Performer::new(&config, 0, &device).map_err(|e| e.to_string())?;
        params = model.parameters();
        let name = match attention {
            AttentionKind::Linear => "bench Performer",
            AttentionKind::Softmax => "bench softmax + KV cache",
        };
        decode_rows(&model, name, &positions, options.steps, &device, &mut rows)?;
    }
    let shipped = (shipped_name, shipped_params, &shipped.model.config);
    print_decode(options, &backend.info, shipped, params, &positions, &rows)
}

/// The decode benchmark's rows as JSON (`--json`) or a table.
fn print_decode(
    options: &Options,
    info: &device::BackendInfo,
    (shipped_name, shipped_params, shipped_config): (String, usize, &PerformerConfig),
    params: usize,
    positions: &[usize],
    rows: &[(String, Vec<f64>)],
) -> Result<(), String> {
    let ratio = |t: &[f64]| t[t.len() - 1] / t[0];
    if options.json {
        let value = serde_json::json!({
            "backend": info,
            "shipped": { "name": shipped_name, "parameters": shipped_params, "config": shipped_config },
            "bench": { "parameters": params, "config": PerformerConfig::bench() },
            "positions": positions,
            "steps": options.steps,
            "ms_per_token": rows.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
            "ratio_last_to_first": rows.iter().map(|(n, t)| (n.clone(), ratio(t))).collect::<std::collections::BTreeMap<_, _>>(),
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    println!(
        "decode, {}; whole tokens (step, log-softmax, grammar mask, top-p draw)",
        info.label()
    );
    println!(
        "{shipped_name}: {shipped_params} parameters (the page's default); bench: {params} \
         parameters (vocab {}, d_model 256, 4 layers, 4 heads × 64, gated sineSPE K 5, R 64, \
         128 features)",
        PerformerConfig::bench().input_dim
    );
    println!(
        "median ms per token over {} tokens at each position",
        options.steps
    );
    let width = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(10) + 2;
    print!("{:<width$}", "position");
    for p in positions {
        print!("{p:>10}");
    }
    let last = positions[positions.len() - 1];
    println!("{:>16}", format!("t({last})/t({})", positions[0]));
    for (name, times) in rows {
        print!("{name:<width$}");
        for t in times {
            print!("{t:>10.2}");
        }
        println!("{:>16.2}", ratio(times));
    }
    Ok(())
}
