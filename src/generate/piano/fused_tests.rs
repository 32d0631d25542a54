//! The fused accompaniment steps (`generate::fused`, `shaders/accompaniment_steps.wgsl`)
//! against the CPU's plain-slice decoder.

use super::*;
use crate::device::{self, Preference};
use crate::generate::fused::{FusedSteps, Steps};
use crate::generate::{AttentionRows, Watch};
use crate::generate::{accompaniment_input, input_example};
use crate::model::config::{Conditioning, PerformerConfig, Task};
use crate::model::features::FeatureKind;
use crate::model::pe::{PeConfig, PeKind};
use crate::music::fixtures::song;
use crate::music::roll::PianoRoll;
use burn::tensor::Device;
use pollster::block_on;

fn config(pe: PeConfig) -> PerformerConfig {
    PerformerConfig::tiny(Task::Accompaniment, 0, pe)
        .with_inputs(Some(Conditioning::AUTOREGRESSIVE))
}

/// The accompaniment of steps 8.. of a two-bar song, reported every `every` steps (so
/// chunks of that many, and a last shorter one), with every report's logits.
fn accompany(
    m: &Performer,
    sampling: PianoSampling,
    every: usize,
    device: &Device,
) -> (PianoRoll, Vec<Vec<f32>>) {
    let (roll, logits, _) = watched(m, sampling, every, None, device);
    (roll, logits)
}

/// [`accompany`], watching `watch`'s head: also every report's attention rows.
fn watched(
    m: &Performer,
    sampling: PianoSampling,
    every: usize,
    watch: Option<Watch>,
    device: &Device,
) -> (PianoRoll, Vec<Vec<f32>>, Vec<AttentionRows>) {
    let input = accompaniment_input(&song(2, 3), None, None).unwrap();
    let e = input_example(m, &input);
    let mut logits = Vec::new();
    let mut rows = Vec::new();
    let roll = block_on(accompany_steps(
        m,
        &e,
        Given::plain(None, 8..e.len),
        sampling,
        Reports { every, watch },
        device,
        |p| {
            logits.push(p.logits.to_vec());
            rows.extend(p.attention);
            async { true }
        },
    ))
    .unwrap();
    (roll, logits, rows)
}

/// On the CPU the kernel declines, and the piece a seed gives does not depend on how often
/// progress is reported (the draws are counters, not a stream).
#[test]
fn off_wgpu_it_declines_and_a_seed_gives_one_piece() {
    let device = Device::flex();
    let m = Performer::new(
        &config(PeConfig::new(PeKind::SineSpe).with_gate(true)),
        3,
        &device,
    )
    .unwrap();
    let state = m.start(0, false, &device);
    let prev = vec![0f32; 2 * PITCHES];
    assert!(
        block_on(FusedSteps::prepare(
            &m,
            &state,
            Steps::Rows {
                piano: 0,
                previous: &prev
            },
            &device
        ))
        .unwrap()
        .is_none()
    );
    let sampling = PianoSampling {
        seed: 11,
        ..Default::default()
    };
    let (a, _) = accompany(&m, sampling, 5, &device);
    let (b, _) = accompany(&m, sampling, 16, &device);
    assert_eq!(a, b);
    assert!(a.onset_plane().iter().any(|&x| x > 0.0));
}

/// On a native GPU when there is one (lavapipe in `make test`): the fused steps write the
/// same piece as the CPU's plain-slice decoder with the same seed, drawn and thresholded,
/// for the shipped shape and the tiny one: sineSPE (gated and not), NoPE and convSPE, with
/// FAVOR+ and ReLU features; every
/// report's logits agree to 1e-4 of their scale.
#[test]
fn fused_steps_match_the_cpu_on_a_native_gpu() {
    let Ok(gpu) = block_on(device::init(Preference::Gpu)) else {
        crate::note_skipped_test("no native GPU adapter");
        return;
    };
    let relu = {
        let mut c = config(PeConfig::new(PeKind::SineSpe).with_gate(true));
        c.feature_kind = FeatureKind::Relu;
        c
    };
    // The shipped model's shape (random weights): a whole chunk of 16 steps, one dispatch a
    // step and one read-back, at the size where longer dispatches went wrong on lavapipe.
    let shipped = PerformerConfig::small_sized(
        Task::Accompaniment,
        crate::model::config::ACCOMPANIMENT_INPUTS,
        2 * PITCHES,
        PeConfig::new(PeKind::SineSpe).with_gate(true),
    )
    .with_inputs(Some(Conditioning::AUTOREGRESSIVE));
    let configs = [
        shipped,
        config(PeConfig::new(PeKind::SineSpe).with_gate(true)),
        config(PeConfig::new(PeKind::SineSpe)),
        config(PeConfig::new(PeKind::None)),
        config(PeConfig::new(PeKind::ConvSpe).with_gate(true)),
        relu,
    ];
    for c in configs {
        let cpu = Performer::new(&c, 3, &Device::flex()).unwrap();
        let gpu_m = Performer::new(&c, 3, &gpu.device).unwrap();
        let state = gpu_m.start(0, false, &gpu.device);
        let prev = vec![0f32; 2 * PITCHES];
        let piano = c.input_dim - 2 * PITCHES;
        let steps = Steps::Rows {
            piano,
            previous: &prev,
        };
        let fused = block_on(FusedSteps::prepare(&gpu_m, &state, steps, &gpu.device));
        assert!(
            fused.unwrap().is_some(),
            "{:?}: the kernel declined",
            c.pe.kind
        );
        for sampling in [
            PianoSampling {
                seed: 5,
                hold_temperature: 0.5,
                density: 0.5,
                ..Default::default()
            },
            PianoSampling {
                threshold: Some(0.3),
                density: 2.0,
                ..Default::default()
            },
        ] {
            let every = if c.d_model > 32 { 16 } else { 5 };
            if every == 16 && sampling.threshold.is_some() {
                continue; // the shipped shape once: it is the slow one on lavapipe
            }
            let (want, want_logits) = accompany(&cpu, sampling, every, &Device::flex());
            let (got, got_logits) = accompany(&gpu_m, sampling, every, &gpu.device);
            assert_eq!(want_logits.len(), got_logits.len());
            for (w, g) in want_logits.iter().zip(&got_logits) {
                let scale = w.iter().fold(1f32, |a, x| a.max(x.abs()));
                let worst = w.iter().zip(g).fold(0f32, |a, (x, y)| a.max((x - y).abs()));
                assert!(
                    worst <= 1e-4 * scale,
                    "{:?}: logits differ by {worst}",
                    c.pe.kind
                );
            }
            assert_eq!(want, got, "{:?} {sampling:?}: another piece", c.pe.kind);
            assert!(want.onset_plane().iter().any(|&x| x > 0.0));
        }
    }
    // The attention map a watched head shows: the same rows, the prefill's keys in them.
    let c = config(PeConfig::new(PeKind::SineSpe).with_gate(true));
    let cpu = Performer::new(&c, 3, &Device::flex()).unwrap();
    let gpu_m = Performer::new(&c, 3, &gpu.device).unwrap();
    let watch = Some(Watch { layer: 1, head: 1 });
    let sampling = PianoSampling::default();
    let (want, _, want_rows) = watched(&cpu, sampling, 5, watch, &Device::flex());
    let (got, _, got_rows) = watched(&gpu_m, sampling, 5, watch, &gpu.device);
    assert_eq!(want, got);
    crate::generate::assert_rows_agree(&want_rows, &got_rows);
}

/// On a native GPU (lavapipe in `make test`): alternatives written together by the fused
/// kernel (one workgroup each, the same dispatches) are each exactly the piece that seed
/// writes alone with the fused steps, from the start and over a region after a kept piano, and
/// they are different pieces.
#[test]
fn fused_alternatives_are_each_their_seed_alone_on_a_native_gpu() {
    let Ok(gpu) = block_on(device::init(Preference::Gpu)) else {
        crate::note_skipped_test("no native GPU adapter");
        return;
    };
    let device = &gpu.device;
    let m = Performer::new(
        &config(PeConfig::new(PeKind::SineSpe).with_gate(true)),
        3,
        device,
    )
    .unwrap();
    let input = accompaniment_input(&song(1, 3), None, None).unwrap();
    let e = input_example(&m, &input);
    let samplings: Vec<PianoSampling> = [4, 9, 11]
        .map(|seed| PianoSampling {
            seed,
            ..Default::default()
        })
        .to_vec();
    let alone = |s: PianoSampling, given: Option<&PianoRoll>, region: std::ops::Range<usize>| {
        let quiet = |_: PianoProgress<'_>| async { true };
        block_on(accompany_steps(
            &m,
            &e,
            Given::plain(given, region),
            s,
            Reports {
                every: 8,
                watch: None,
            },
            device,
            quiet,
        ))
        .unwrap()
    };
    let kept = alone(samplings[0], None, 0..e.len);
    for (given, region) in [(None, 0..e.len), (Some(&kept), 16..32)] {
        let mut reports = 0;
        let together = block_on(accompany_batch(
            &m,
            &e,
            Given::plain(given, region.clone()),
            &samplings,
            Reports {
                every: 8,
                watch: None,
            },
            device,
            |p| {
                assert_eq!(p.rolls.len(), 3, "together, not one after another");
                reports += 1;
                async { true }
            },
        ))
        .unwrap();
        assert_eq!(reports, region.len().div_ceil(8));
        for (roll, s) in together.iter().zip(&samplings) {
            assert!(
                *roll == alone(*s, given, region.clone()),
                "seed {} in a batch",
                s.seed
            );
        }
        assert!(together[0] != together[1] && together[1] != together[2]);
    }
}
