//! Continuation tokens run ahead on the GPU (`ahead`, `shaders/continuation_steps.wgsl`)
//! against the CPU's plain-slice decoder.

use super::*;
use crate::device::{self, Preference};
use crate::model::config::PerformerConfig;
use crate::model::features::FeatureKind;
use crate::model::pe::{PeConfig, PeKind};
use pollster::block_on;

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
        crate::generate::assert_rows_agree(&want_rows, &got_rows);
    }
}
