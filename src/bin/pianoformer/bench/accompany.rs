//! `pianoformer bench accompany`: milliseconds per step of the step-by-step accompaniment as
//! generation pays it (the model's step and the drawing of the step's notes), the shipped
//! default model (or `--model`) on a fixture song. On wgpu, both ways: through tensor ops a
//! step at a time (what WebGPU ran before issue 35) and fused (`shaders/accompaniment_steps.wgsl`,
//! one step a dispatch and, to compare, 16; one read-back a bar), checking that they write the
//! same piece; on the CPU, the plain-slice decoder. Each length in `--positions` (bars, default 1 and 4) is generated
//! once to warm up and once timed; the cost per step is the difference of the two timed
//! lengths over the difference of their steps, so what a generation pays once (gathering the
//! weights, compiling the kernels) falls out.

use std::time::Instant;

use burn::tensor::Device;
use pianoformer::data::Example;
use pianoformer::device::{self, Preference};
use pianoformer::generate::fused;
use pianoformer::generate::{
    BatchProgress, Given, PianoSampling, Reports, accompaniment_input, accompany_batch,
    accompany_steps, input_example,
};
use pianoformer::model::config::Task;
use pianoformer::model::performer::Performer;
use pianoformer::music::fixtures;
use pianoformer::music::roll::PianoRoll;

use super::Options;

type Rolls = (PianoRoll, Vec<Vec<f32>>);

pub fn accompany(options: &Options) -> Result<(), String> {
    let preference: Preference = options.backend.parse().map_err(|e| format!("{e}"))?;
    let backend = pollster::block_on(device::init(preference)).map_err(|e| format!("{e}"))?;
    let device = backend.device.clone();
    let loaded = crate::models::load(&options.model, Task::Accompaniment, None, &device)?;
    let model = &loaded.model;
    let mut bars = options.positions.clone();
    bars.sort_unstable();
    bars.dedup();
    if bars.len() < 2 || bars[0] == 0 {
        return Err("give two or more bar counts, e.g. --positions 1,4".into());
    }
    // (name, fused, steps a dispatch)
    let ways: &[(&str, bool, usize)] = if backend.info.kind == device::BackendKind::Gpu {
        &[
            ("tensor ops", false, 1),
            ("fused", true, 1),
            ("fused, 16 steps a dispatch", true, 16),
        ]
    } else {
        &[("plain-slice", true, 1)]
    };
    println!(
        "accompaniment {} ({} parameters) on {}; ms per step from {:?} bars",
        loaded.source.split_whitespace().next().unwrap_or("default"),
        model.parameters(),
        backend.info.label(),
        bars
    );
    let examples = bars
        .iter()
        .map(|&n| {
            let input = accompaniment_input(&fixtures::song(0, n as u64), None, None)
                .map_err(|e| e.to_string())?;
            Ok(input_example(model, &input))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let sampling = PianoSampling {
        seed: 3,
        ..PianoSampling::default()
    };
    let run =
        |e: &Example, s: PianoSampling, way: (bool, usize)| generate(model, e, s, way, &device);
    let mut per_way = Vec::new();
    for &(name, on, per) in ways {
        let mut times = Vec::new();
        for e in &examples {
            run(e, sampling, (on, per))?;
            let start = Instant::now();
            run(e, sampling, (on, per))?;
            times.push((e.len, start.elapsed().as_secs_f64() * 1e3));
        }
        let (first, last) = (times[0], times[times.len() - 1]);
        let per_step = (last.1 - first.1) / (last.0 - first.0) as f64;
        println!(
            "{name:>26}: {per_step:8.3} ms/step ({} steps {:.1} ms, {} steps {:.1} ms)",
            first.0, first.1, last.0, last.1
        );
        per_way.push(per_step);
    }
    let last = &examples[examples.len() - 1];
    if per_way.len() > 1 {
        compare_ways(model, last, sampling, ways, &per_way, &device)?;
    }
    fused::set_enabled(true);
    fused::set_steps_per_dispatch(1);
    // One alternative the way alternatives run: fused, a step a dispatch (on the CPU, plain).
    let one = ways
        .iter()
        .position(|&(_, on, per)| on && per == 1)
        .map_or(per_way[0], |i| per_way[i]);
    if options.batch > 1 {
        alternatives(model, &examples, sampling, options.batch, one, &device)?;
    }
    Ok(())
}

/// Whether every way writes the tensor ops' piece (thresholded), and how much faster a step.
fn compare_ways(
    model: &Performer,
    e: &Example,
    sampling: PianoSampling,
    ways: &[(&str, bool, usize)],
    per_way: &[f64],
    device: &Device,
) -> Result<(), String> {
    let run =
        |e: &Example, s: PianoSampling, way: (bool, usize)| generate(model, e, s, way, device);
    // The same piece? Drawn notes part at the first near-tie (a uniform within float
    // rounding of its probability), and every step after it reads what differs; so the
    // check is thresholded, and the logits of each bar's last step are compared.
    let thresholded = PianoSampling {
        threshold: Some(0.3),
        ..sampling
    };
    let reference = run(e, thresholded, (false, 1))?;
    for (i, &(name, on, per)) in ways.iter().enumerate().skip(1) {
        let got = run(e, thresholded, (on, per))?;
        println!(
            "{name:>26}: {:.1}x faster a step than tensor ops; {}",
            per_way[0] / per_way[i],
            agreement(&reference, &got, e.len)
        );
    }
    Ok(())
}

/// `k` alternatives written together (`accompany_batch`: on the CPU one batched step for
/// all, on wgpu one workgroup each in the same fused dispatches), timed as the single ways are (the difference of two lengths), against `one` ms a
/// step for one alternative; and whether the first is the piece its seed writes alone.
fn alternatives(
    model: &Performer,
    examples: &[Example],
    sampling: PianoSampling,
    k: usize,
    one: f64,
    device: &Device,
) -> Result<(), String> {
    let samplings: Vec<PianoSampling> = (0..k as u64)
        .map(|i| PianoSampling {
            seed: sampling.seed + i,
            ..sampling
        })
        .collect();
    let run = |e: &Example| {
        let quiet = |_: BatchProgress<'_>| async { true };
        pollster::block_on(accompany_batch(
            model,
            e,
            Given::plain(None, 0..e.len),
            &samplings,
            Reports {
                every: 16,
                watch: None,
            },
            device,
            quiet,
        ))
        .map_err(|e| e.to_string())
    };
    let mut times = Vec::new();
    for e in examples {
        run(e)?;
        let start = Instant::now();
        run(e)?;
        times.push((e.len, start.elapsed().as_secs_f64() * 1e3));
    }
    let (first, last) = (times[0], times[times.len() - 1]);
    let per_step = (last.1 - first.1) / (last.0 - first.0) as f64;
    let e = &examples[examples.len() - 1];
    let together = run(e)?;
    let (alone, _) = generate(model, e, sampling, (true, 1), device)?;
    println!(
        "{:>26}: {per_step:8.3} ms/step for all {k}, {:.2}x one alternative's step ({k} one \
         after another: {k}x); the first {} the piece its seed writes alone",
        format!("{k} alternatives together"),
        per_step / one,
        if together[0] == alone { "is" } else { "is NOT" }
    );
    Ok(())
}

/// The whole of `e` accompanied with `s`, fused or not and so many steps a dispatch (`way`),
/// with the logits of each bar's last step.
fn generate(
    model: &Performer,
    e: &Example,
    s: PianoSampling,
    way: (bool, usize),
    device: &Device,
) -> Result<Rolls, String> {
    fused::set_enabled(way.0);
    fused::set_steps_per_dispatch(way.1);
    let mut logits = Vec::new();
    let roll = pollster::block_on(accompany_steps(
        model,
        e,
        Given::plain(None, 0..e.len),
        s,
        Reports {
            every: 16,
            watch: None,
        },
        device,
        |p| {
            logits.push(p.logits.to_vec());
            async { true }
        },
    ))
    .map_err(|e| e.to_string())?;
    Ok((roll, logits))
}

/// How two thresholded runs agree: the logits of each reported step, and the pieces.
fn agreement(a: &Rolls, b: &Rolls, len: usize) -> String {
    let worst =
        a.1.iter()
            .zip(&b.1)
            .map(|(x, y)| {
                let scale = x.iter().fold(1f32, |m, v| m.max(v.abs()));
                x.iter().zip(y).fold(0f32, |m, (u, v)| m.max((u - v).abs())) / scale
            })
            .fold(0f32, f32::max);
    let part = (0..len).find(|&t| {
        (0..128)
            .any(|p| a.0.onset(t, p) != b.0.onset(t, p) || a.0.sustain(t, p) != b.0.sustain(t, p))
    });
    format!(
        "thresholded at 0.3: logits within {worst:.1e} of their scale, {}",
        match part {
            None => "the same piece".to_string(),
            Some(t) => format!("the pieces part at step {t}"),
        }
    )
}
