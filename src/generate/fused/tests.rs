use super::*;
use crate::device::{self, Preference};
use crate::generate::piano::{accompany_steps, uniform};
use crate::generate::{AttentionRows, Watch};
use crate::generate::{accompaniment_input, input_example};
use crate::model::config::{Conditioning, PerformerConfig, Task};
use crate::model::pe::PeConfig;
use crate::music::fixtures::song;
use crate::music::roll::PianoRoll;
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
        None,
        8..e.len,
        sampling,
        every,
        watch,
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

/// The counter-based uniforms look uniform and independent: mean, variance and the
/// correlation of neighbouring pitches' and steps' draws over 60 000 draws.
#[test]
fn the_counter_uniforms_are_uniform_and_independent() {
    let mut values = Vec::new();
    for step in 0..300 {
        for pitch in 0..PITCHES {
            values.push((
                uniform(7, step, pitch, 0),
                uniform(7, step, pitch, 1),
                uniform(7, step + 1, pitch, 0),
                uniform(8, step, pitch, 0),
            ));
        }
    }
    let n = values.len() as f64;
    let mean = values.iter().map(|v| v.0 as f64).sum::<f64>() / n;
    let var = values
        .iter()
        .map(|v| (v.0 as f64 - mean).powi(2))
        .sum::<f64>()
        / n;
    assert!((mean - 0.5).abs() < 0.005, "{mean}");
    assert!((var - 1.0 / 12.0).abs() < 0.002, "{var}");
    assert!(values.iter().all(|v| (0.0..1.0).contains(&v.0)));
    type Draws = (f32, f32, f32, f32);
    let corr = |f: &dyn Fn(&Draws) -> f32| {
        values
            .iter()
            .map(|v| (v.0 as f64 - 0.5) * (f(v) as f64 - 0.5))
            .sum::<f64>()
            / n
            * 12.0
    };
    for (what, c) in [
        ("kinds", corr(&|v| v.1)),
        ("steps", corr(&|v| v.2)),
        ("seeds", corr(&|v| v.3)),
    ] {
        assert!(c.abs() < 0.02, "{what}: correlation {c}");
    }
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
                ..Default::default()
            },
            PianoSampling {
                threshold: Some(0.3),
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
    assert_eq!(want_rows.len(), got_rows.len());
    for (w, g) in want_rows.iter().zip(&got_rows) {
        assert_eq!(
            (w.start, w.keys, w.values.len()),
            (g.start, g.keys, g.values.len())
        );
        let worst = w
            .values
            .iter()
            .zip(&g.values)
            .fold(0f32, |a, (x, y)| a.max((x - y).abs()));
        assert!(worst <= 1e-4, "attention rows differ by {worst}");
    }
}

/// A prompt of `bars` bars of four notes (a chord on its first beat).
fn prompt(bars: usize) -> Vec<u32> {
    use crate::music::chords::Chord;
    use crate::music::tokens::Token as T;
    let mut ids = vec![T::Bos.id()];
    for b in 0..bars {
        ids.extend([T::Bar.id(), T::Position(0).id()]);
        ids.push(T::Chord(Chord::parse_any(["C", "Am", "F", "G7"][b % 4]).unwrap()).id());
        for k in 0..4u8 {
            if k > 0 {
                ids.push(T::Position(4 * k).id());
            }
            ids.extend([
                T::Pitch(60 + ((b as u8 + k) % 8) * 2).id(),
                T::Velocity(20).id(),
                T::Duration(4).id(),
            ]);
        }
    }
    ids
}

/// Continuation on a native GPU (lavapipe in `make test`): the tokens run ahead on the GPU,
/// replayed by the host, give the same music as the CPU's plain-slice decoder for the same
/// seed — plain; with a context (restarts); with a plan and a phrase lane, where the host
/// writes the forced chords and the echo the GPU does not know; watched (the same attention
/// rows) — for sineSPE (gated and not), NoPE, convSPE, ReLU features and the shipped shape.
/// Where the host adds nothing (plain), every GPU draw is the host's token: no misses, so a
/// read-back brings up to 16 tokens.
#[test]
fn fused_tokens_match_the_cpu_on_a_native_gpu() {
    use crate::generate::continuation::ahead::take_stats;
    use crate::generate::{Length, Sampling, continue_tokens};
    use crate::music::chords::Chord;
    use crate::music::labels::PhraseLabel;
    use crate::music::tokens::VOCAB_SIZE;
    let Ok(gpu) = block_on(device::init(Preference::Gpu)) else {
        crate::note_skipped_test("no native GPU adapter");
        return;
    };
    let tiny = |pe: PeConfig| PerformerConfig::tiny(Task::Continuation, VOCAB_SIZE, pe);
    let relu = {
        let mut c = tiny(PeConfig::new(PeKind::SineSpe).with_gate(true));
        c.feature_kind = FeatureKind::Relu;
        c
    };
    let shipped = PerformerConfig::small_sized(
        Task::Continuation,
        VOCAB_SIZE,
        VOCAB_SIZE,
        PeConfig::new(PeKind::SineSpe).with_gate(true),
    );
    let chord = |s: &str| Chord::parse_any(s).unwrap();
    let label = |letter, index| {
        Some(PhraseLabel {
            letter,
            index,
            bar: 0,
            bars: 1,
        })
    };
    // Four prompt bars A B A B, then three new: A (planned Dm G7), B (unplanned), A (C).
    let lane = [
        label('A', 0),
        label('B', 1),
        label('A', 2),
        label('B', 3),
        label('A', 4),
        label('B', 5),
        label('A', 6),
    ];
    let plan = [vec![chord("Dm"), chord("G7")], vec![], vec![chord("C")]];
    let run = |m: &Performer, device: &Device, case: usize, watch: Option<Watch>| {
        let none: &[Vec<Option<Chord>>] = &[];
        let (length, plan, lane) = match case {
            0 => (Length::tokens(70), none, &[][..]),
            1 => (
                Length {
                    context: Some(64),
                    ..Length::tokens(90)
                },
                none,
                &[][..],
            ),
            _ => (
                Length {
                    bars: Some(3),
                    ..Length::tokens(150)
                },
                &plan[..],
                &lane[..],
            ),
        };
        let mut rows = Vec::new();
        let sampling = Sampling {
            seed: 3 + case as u64,
            temperature: 0.9,
            ..Sampling::default()
        };
        let tokens = block_on(continue_tokens(
            m,
            &prompt(4),
            length,
            sampling,
            plan,
            lane,
            watch,
            device,
            |p| {
                if p.token.is_some() {
                    rows.extend(p.attention);
                }
                async { true }
            },
        ))
        .unwrap();
        (tokens, rows)
    };
    let configs = [
        tiny(PeConfig::new(PeKind::SineSpe).with_gate(true)),
        tiny(PeConfig::new(PeKind::SineSpe)),
        tiny(PeConfig::new(PeKind::None)),
        tiny(PeConfig::new(PeKind::ConvSpe).with_gate(true)),
        relu,
        shipped,
    ];
    for (i, c) in configs.iter().enumerate() {
        let cpu = Performer::new(c, 3, &Device::flex()).unwrap();
        let gpu_m = Performer::new(c, 3, &gpu.device).unwrap();
        let what = format!("{:?} (config {i})", c.pe.kind);
        let cases = if c.d_model > 32 { 1 } else { 3 };
        for case in 0..cases {
            let (want, _) = run(&cpu, &Device::flex(), case, None);
            take_stats();
            let (got, _) = run(&gpu_m, &gpu.device, case, None);
            let stats = take_stats();
            assert_eq!(want, got, "{what}, case {case}: other tokens");
            assert!(stats.chunks > 0, "{what}: nothing ran ahead");
            if case == 0 {
                assert_eq!(stats.misses, 0, "{what}: {stats:?}");
                assert!(stats.fed >= 8 * stats.chunks, "{what}: {stats:?}");
            }
        }
    }
    // The attention map of a watched head: the same rows, the prefill's keys in them.
    let c = tiny(PeConfig::new(PeKind::SineSpe).with_gate(true));
    let cpu = Performer::new(&c, 3, &Device::flex()).unwrap();
    let gpu_m = Performer::new(&c, 3, &gpu.device).unwrap();
    let watch = Some(Watch { layer: 1, head: 0 });
    for case in [0, 1] {
        let (want, want_rows) = run(&cpu, &Device::flex(), case, watch);
        let (got, got_rows) = run(&gpu_m, &gpu.device, case, watch);
        assert_eq!(want, got);
        assert_eq!(want_rows.len(), got_rows.len());
        for (w, g) in want_rows.iter().zip(&got_rows) {
            assert_eq!((w.start, w.keys), (g.start, g.keys));
            let worst = w
                .values
                .iter()
                .zip(&g.values)
                .fold(0f32, |a, (x, y)| a.max((x - y).abs()));
            assert!(worst <= 1e-4, "attention rows differ by {worst}");
        }
    }
}

fn sizes(codes: bool, gated: bool, favor: bool) -> Sizes {
    Sizes {
        d: 32,
        h: 2,
        dh: 16,
        r: if codes { 8 } else { 16 },
        dir: 8,
        m: if favor { 16 } else { 8 },
        ff: 64,
        inp: 824,
        out: 256,
        layers: 2,
        mode: Mode::Rows { piano: 568 },
        codes: if codes { 2 * 16 * 8 } else { 0 },
        gated,
        favor,
    }
}

/// Every form of the template (codes or none, gated or not, FAVOR+ or ReLU, the default
/// models' sizes, rows and tokens) is valid WGSL for naga, the compiler wgpu uses natively.
#[test]
fn the_template_is_valid_wgsl() {
    use burn::backend::wgpu::wgpu::naga;
    let default = Sizes {
        d: 128,
        h: 4,
        dh: 32,
        r: 32,
        dir: 32,
        m: 64,
        ff: 512,
        inp: 824,
        out: 256,
        layers: 4,
        mode: Mode::Rows { piano: 568 },
        codes: 4 * 32 * 32,
        gated: true,
        favor: true,
    };
    let tokens = |s: Sizes| Sizes {
        inp: VOCAB_SIZE as u32,
        out: VOCAB_SIZE as u32,
        mode: Mode::Tokens,
        ..s
    };
    let forms = [
        sizes(true, true, true),
        sizes(true, false, true),
        sizes(false, false, true),
        sizes(true, true, false),
        default,
        tokens(sizes(true, true, true)),
        tokens(sizes(false, false, false)),
        tokens(default),
    ];
    for s in forms {
        let source = FusedKernel(s).source().complete();
        assert!(!source.contains("{{"), "unfilled placeholder: {s:?}");
        let module = naga::front::wgsl::parse_str(&source)
            .unwrap_or_else(|e| panic!("{s:?}: {}", e.emit_to_string(&source)));
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::empty(),
        )
        .validate(&module)
        .unwrap_or_else(|e| panic!("{s:?}: {e:?}"));
        assert!(s.workgroup_floats() * 4 <= WORKGROUP_BYTES, "{s:?}");
    }
}

/// The backend self-check's comparison: on a native GPU (lavapipe in `make test`) the fused
/// steps write what tensor ops write and stay on; on the CPU there is nothing to check.
#[test]
fn the_self_check_finds_the_fused_steps_agree_with_tensor_ops() {
    assert_eq!(block_on(check(&Device::flex())).unwrap(), None);
    let Ok(gpu) = block_on(device::init(Preference::Gpu)) else {
        crate::note_skipped_test("no native GPU adapter");
        return;
    };
    let report = block_on(check(&gpu.device))
        .unwrap()
        .expect("checked on wgpu");
    assert!(
        report.tokens_agree && report.steps_agree && report.on,
        "{report:?}"
    );
    assert!(report.tokens > 0 && report.steps > 0);
    assert!(enabled());
}
