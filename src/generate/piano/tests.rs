use pollster::block_on;

use super::*;
use crate::generate::{accompaniment_input, input_example};
use crate::model::config::{Conditioning, PerformerConfig};
use crate::model::pe::{PeConfig, PeKind, StructureLevel};
use crate::music::chords::Chord;
use crate::music::fixtures::song;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

fn model(pe: PeConfig) -> Performer {
    let config = PerformerConfig::tiny(Task::Accompaniment, 0, pe)
        .with_inputs(Some(Conditioning::AUTOREGRESSIVE));
    Performer::new(&config, 3, &Device::flex()).unwrap()
}

fn sigmoid1(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

#[test]
fn a_step_strikes_holds_and_releases_by_its_probabilities() {
    let mut roll = PianoRoll::new(2);
    roll.set(0, 60, true, true, 0);
    roll.set(0, 62, true, true, 0);
    let mut on = vec![-20.0f32; PITCHES];
    let mut sus = vec![-20.0f32; PITCHES];
    on[64] = 2.0; // struck
    sus[60] = 3.0; // held: p_sus 0.95, p_on ≈ 0
    sus[62] = -3.0; // released
    sus[65] = 3.0; // not sounding before: a sustain alone starts nothing
    let threshold = PianoSampling {
        threshold: Some(0.5),
        ..Default::default()
    };
    let mut rng = StdRng::seed_from_u64(0);
    draw_step(&mut roll, 1, &on, &sus, &threshold, None, &mut |_, _| {
        rng.random::<f32>()
    });
    assert!(roll.onset(1, 64));
    assert!(roll.sustain(1, 60) && !roll.onset(1, 60));
    assert!(!roll.sustain(1, 62) && !roll.sustain(1, 65));
    // Shares of 4000 draws of step 1, after pitch 60 sounded at step 0, that strike
    // `pitch` (onset probability 0.2) and that hold 60 (sustain logit `sus`).
    let mut shares = |pitch: usize, sus: f32, hold_temperature: f32| {
        let (mut struck, mut held) = (0usize, 0usize);
        let s = PianoSampling {
            hold_temperature,
            ..Default::default()
        };
        for _ in 0..4000 {
            let mut r = PianoRoll::new(2);
            r.set(0, 60, true, true, 0);
            let mut on = vec![-30.0f32; PITCHES];
            let mut sus_logits = vec![-30.0f32; PITCHES];
            on[pitch] = (0.2f32 / 0.8).ln();
            sus_logits[60] = sus;
            draw_step(&mut r, 1, &on, &sus_logits, &s, None, &mut |_, _| {
                rng.random::<f32>()
            });
            struck += r.onset(1, pitch) as usize;
            held += (r.sustain(1, 60) && !r.onset(1, 60)) as usize;
        }
        (struck as f64 / 4000.0, held as f64 / 4000.0)
    };
    // Drawn: a hold probability of (p_sus − p_on) / (1 − p_on) = (0.6 − 0.2) / 0.8 = 0.5
    // holds about half the time; an onset probability of 0.2 strikes about a fifth of it.
    let (struck, held) = shares(60, (0.6f32 / 0.4).ln(), 1.0);
    assert!((struck - 0.2).abs() < 0.03, "{struck}");
    assert!((held - 0.4).abs() < 0.03, "{held}");
    // A hold temperature sharpens the hold draws alone: at 0.5 a hold probability of 0.75
    // becomes 0.9 (0.75² / (0.75² + 0.25²)), 0.25 becomes 0.1; onsets are drawn as before.
    assert!((sharpen(0.75, 0.5) - 0.9).abs() < 1e-6);
    assert!((sharpen(0.25, 0.5) - 0.1).abs() < 1e-6);
    assert_eq!(
        (sharpen(0.0, 0.3), sharpen(1.0, 0.3), sharpen(0.3, 1.0)),
        (0.0, 1.0, 0.3)
    );
    // p_sus 0.75, p_on ≈ 0 for 60: hold 0.75, sharpened to 0.9; 61 struck a fifth of the time.
    let (struck, held) = shares(61, 3.0f32.ln(), 0.5);
    assert!((held - 0.9).abs() < 0.03, "{held}");
    assert!((struck - 0.2).abs() < 0.03, "{struck}");
    let bad = PianoSampling {
        hold_temperature: 0.0,
        ..Default::default()
    };
    assert!(
        bad.check()
            .unwrap_err()
            .to_string()
            .contains("hold temperature")
    );
}

/// Every step's attention row reaches the map, in order, each row a distribution over the
/// steps up to its own.
#[test]
fn every_step_reaches_the_attention_map() {
    let device = Device::flex();
    let m = model(PeConfig::new(PeKind::SineSpe));
    let input = accompaniment_input(&song(2, 2), None, None).unwrap();
    let e = input_example(&m, &input);
    let watch = Watch { layer: 1, head: 1 };
    let mut reports = Vec::new();
    block_on(accompany_steps(
        &m,
        &e,
        Given::plain(None, 8..e.len),
        PianoSampling::default(),
        Reports {
            every: 10,
            watch: Some(watch),
        },
        &device,
        |p| {
            reports.push(p.attention.unwrap());
            async { true }
        },
    ))
    .unwrap();
    // Rows 8 .. len arrive in chunks of 10, each row over the keys up to its own step,
    // summing to one there and zero after it.
    let mut next = 8;
    for r in &reports {
        let rows = r.values.len() / r.keys;
        assert_eq!(r.start, next);
        assert_eq!(r.keys, r.start + rows);
        for i in 0..rows {
            let row = &r.values[i * r.keys..(i + 1) * r.keys];
            let own = r.start + i + 1;
            let sum: f32 = row[..own].iter().sum();
            assert!(
                (sum - 1.0).abs() < 1e-3,
                "row {} sums to {sum}",
                r.start + i
            );
            assert!(row[own..].iter().all(|&x| x == 0.0));
        }
        next += rows;
    }
    assert_eq!(next, e.len);
    assert_eq!(reports.len(), (e.len - 8).div_ceil(10));
}

/// The step-by-step generator and one teacher-forced parallel pass over what it wrote give
/// the same probabilities at every step: what training optimises is what generation uses.
#[test]
fn step_by_step_agrees_with_the_teacher_forced_pass() {
    let device = Device::flex();
    for pe in [
        PeConfig::new(PeKind::SineSpe).with_gate(true),
        PeConfig::new(PeKind::Fstripe)
            .with_levels(&[StructureLevel::Chord, StructureLevel::Position]),
    ] {
        let m = model(pe);
        let input = accompaniment_input(&song(2, 3), None, None).unwrap();
        let mut e = input_example(&m, &input);
        let mut steps: Vec<f32> = Vec::new();
        let sampling = PianoSampling {
            seed: 5,
            ..Default::default()
        };
        let roll = block_on(accompany_steps(
            &m,
            &e,
            Given::plain(None, 0..e.len),
            sampling,
            Reports {
                every: 1,
                watch: None,
            },
            &device,
            |p| {
                steps.extend(p.logits.iter().map(|&x| sigmoid1(x)));
                async { true }
            },
        ))
        .unwrap();
        let notes = (0..e.len)
            .map(|t| (0..PITCHES).filter(|&p| roll.onset(t, p)).count())
            .sum::<usize>();
        assert!(
            notes > 0,
            "an untrained model at temperature 1 strikes something"
        );
        // Teacher forcing: the written piano as the previous-step input.
        let offset = ACCOMPANIMENT_INPUTS + LABEL_FEATURES;
        let width = m.config.input_dim;
        for t in 0..e.len {
            let row = &mut e.inputs[t * width + offset..t * width + offset + 2 * PITCHES];
            row.fill(0.0);
            if t > 0 {
                for p in 0..PITCHES {
                    row[p] = roll.onset(t - 1, p) as u8 as f32;
                    row[PITCHES + p] = roll.sustain(t - 1, p) as u8 as f32;
                }
            }
        }
        let forced = block_on(teacher_forced_probs(&m, &e, 5, &device)).unwrap();
        assert_eq!(forced.len(), steps.len());
        let worst = forced
            .iter()
            .zip(&steps)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(worst < 1e-4, "{:?}: {worst}", m.config.pe.kind);
    }
}

#[test]
fn the_lanes_steer_the_piano_and_a_region_keeps_the_rest() {
    let device = Device::flex();
    let m = model(PeConfig::new(PeKind::SineSpe));
    let tune = song(0, 4);
    let chord = |s: &str| Chord::parse_any(s).unwrap();
    let as_given = accompaniment_input(&tune, None, None).unwrap();
    let other = [
        vec![chord("E")],
        vec![chord("B")],
        vec![chord("C#m")],
        vec![chord("A")],
    ];
    let changed = accompaniment_input(&tune, Some(&other[..]), None).unwrap();
    let sampling = PianoSampling {
        threshold: Some(0.5),
        ..Default::default()
    };
    let run = |input: &crate::generate::AccompanimentInput, given, region| {
        let e = input_example(&m, input);
        block_on(accompany_steps(
            &m,
            &e,
            Given::plain(given, region),
            sampling,
            Reports {
                every: 16,
                watch: None,
            },
            &device,
            |_| async { true },
        ))
        .unwrap()
    };
    let len = as_given.sheet.grid.num_steps();
    let first = run(&as_given, None, 0..len);
    let second = run(&changed, None, 0..len);
    assert_ne!(
        first, second,
        "other chords in the lane, another piano part"
    );
    // Regenerate bar 2 with the changed lanes: bar 1 stays note for note, and so do bars
    // 3 and 4 after their first step (where a note cut by the region is struck again).
    let mixed = run(&changed, Some(&first), 16..32);
    for t in (0..16).chain(33..len) {
        for p in 0..PITCHES {
            assert_eq!(
                (mixed.onset(t, p), mixed.sustain(t, p)),
                (first.onset(t, p), first.sustain(t, p)),
                "step {t}, pitch {p}"
            );
        }
    }
}

/// A density multiplies every onset's odds by its square root: at 4 an onset of probability 0.2
/// comes with probability 1/3 (odds 0.25 → 0.5), at 1/4 with 1/9.
#[test]
fn a_density_scales_the_odds_of_every_onset() {
    let mut rng = StdRng::seed_from_u64(3);
    let mut share = |density: f32| {
        let s = PianoSampling {
            density,
            ..Default::default()
        };
        let mut struck = 0usize;
        for _ in 0..6000 {
            let mut r = PianoRoll::new(2);
            let mut on = vec![-30.0f32; PITCHES];
            on[64] = (0.2f32 / 0.8).ln();
            draw_step(&mut r, 1, &on, &[-30.0; PITCHES], &s, None, &mut |_, _| {
                rng.random::<f32>()
            });
            struck += usize::from(r.onset(1, 64));
            assert!((0..PITCHES).all(|p| p == 64 || !r.onset(1, p)));
        }
        struck as f64 / 6000.0
    };
    let (plain, busy, sparse) = (share(1.0), share(4.0), share(0.25));
    assert!((plain - 0.2).abs() < 0.02, "{plain}");
    assert!((busy - 1.0 / 3.0).abs() < 0.02, "{busy}");
    assert!((sparse - 1.0 / 9.0).abs() < 0.015, "{sparse}");
}

/// Alternatives written together (one batched step for all, each with its own seed) are each
/// exactly the piano that seed writes alone, from the start and over a region after a kept
/// piano; and they are different pianos. Progress counts the steps once for all.
#[test]
fn a_lean_that_keeps_the_count_moves_onsets_and_keeps_their_number() {
    // The model: a C major triad likely (C4, E4, G4 at 0.6), everything else 1 %.
    let mut on = vec![(0.01f32 / 0.99).ln(); PITCHES];
    for p in [60, 64, 67] {
        on[p] = (0.6f32 / 0.4).ln();
    }
    // A lean toward what an answered step struck (A3, C4, E4: +4) and against the rest (−1).
    let mut lean = vec![-1.0f32; PITCHES];
    for p in [57, 60, 64] {
        lean[p] = 4.0;
    }
    let s = PianoSampling {
        temperature: 0.9,
        density: 0.8,
        ..Default::default()
    };
    let count = |lean: &[f32]| -> f32 {
        let odds = |p: usize| on[p] / s.temperature + s.onset_bias() + lean[p];
        (0..PITCHES).map(|p| sigmoid1(odds(p))).sum()
    };
    let (before, asked) = (count(&lean), count(&[0.0; PITCHES]));
    assert!(
        before > asked + 0.3,
        "the lean alone plays more: {before} against {asked}"
    );
    let old = lean.clone();
    crate::generate::texture::keep_count(&mut lean, &on, &s);
    let after = count(&lean);
    assert!((after - asked).abs() < 1e-2, "{after} against {asked}");
    // One shift for every pitch: the lean still orders the pitches as it did.
    let shift = lean[0] - old[0];
    assert!(shift < 0.0);
    assert!(
        lean.iter()
            .zip(&old)
            .all(|(l, o)| (l - o - shift).abs() < 1e-5)
    );
    // A step the model leaves silent stays silent, whatever the lean.
    let silent = vec![-60.0f32; PITCHES];
    let mut lean = old;
    crate::generate::texture::keep_count(&mut lean, &silent, &s);
    let odds = |p: usize| silent[p] / s.temperature + s.onset_bias() + lean[p];
    assert!((0..PITCHES).map(|p| sigmoid1(odds(p))).sum::<f32>() < 1e-3);
}

#[test]
fn alternatives_written_together_are_each_their_seed_alone() {
    let device = Device::flex();
    for pe in [
        PeConfig::new(PeKind::SineSpe).with_gate(true),
        PeConfig::new(PeKind::Fstripe)
            .with_levels(&[StructureLevel::Chord, StructureLevel::Position]),
    ] {
        let m = model(pe);
        let input = accompaniment_input(&song(1, 3), None, None).unwrap();
        let e = input_example(&m, &input);
        let samplings: Vec<PianoSampling> = [4, 9, 11]
            .map(|seed| PianoSampling {
                seed,
                ..Default::default()
            })
            .to_vec();
        let alone = |s: PianoSampling, given: Option<&PianoRoll>, region: Range<usize>| {
            let quiet = |_: PianoProgress<'_>| async { true };
            block_on(accompany_steps(
                &m,
                &e,
                Given::plain(given, region),
                s,
                Reports {
                    every: 16,
                    watch: None,
                },
                &device,
                quiet,
            ))
            .unwrap()
        };
        let kept = alone(samplings[0], None, 0..e.len);
        for (given, region) in [(None, 0..e.len), (Some(&kept), 16..32)] {
            let mut reports = Vec::new();
            let together = block_on(accompany_batch(
                &m,
                &e,
                Given::plain(given, region.clone()),
                &samplings,
                Reports {
                    every: 8,
                    watch: None,
                },
                &device,
                |p| {
                    assert_eq!(p.rolls.len(), 3);
                    reports.push((p.done, p.total));
                    async { true }
                },
            ))
            .unwrap();
            assert_eq!(reports.last(), Some(&(region.len(), region.len())));
            assert_eq!(reports.len(), region.len().div_ceil(8));
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
}

#[test]
fn a_reference_lane_is_fed_as_training_reads_it() {
    // A B A of two bars each: the second A's steps answer the first's. The reference lane a
    // generation feeds (from the piano it writes) must be the one training reads from the
    // pianist's part: teacher forcing the written piano through `example` gives the same
    // probabilities step by step.
    let device = Device::flex();
    let config = PerformerConfig::tiny(
        Task::Accompaniment,
        0,
        PeConfig::new(PeKind::SineSpe).with_gate(true),
    )
    .with_inputs(Some(Conditioning::REFERENCE));
    let m = Performer::new(&config, 3, &device).unwrap();
    let phrases = two_bar_phrases("ABA");
    let mut input = accompaniment_input(&song(2, 6), None, Some(phrases)).unwrap();
    let e = input_example(&m, &input);
    let answers = Answers::repeats(&input.sheet.labels).expect("the second A answers");
    assert_eq!(answers.answering(), 2 * 16);
    let sampling = PianoSampling {
        seed: 5,
        ..Default::default()
    };
    let write = |reference: Option<&Answers>| {
        let mut probs: Vec<f32> = Vec::new();
        let given = Given {
            reference,
            ..Given::plain(None, 0..e.len)
        };
        let rolls = block_on(accompany_batch(
            &m,
            &e,
            given,
            &[sampling],
            Reports {
                every: 1,
                watch: None,
            },
            &device,
            |p| {
                probs.extend(p.logits[0].iter().map(|&x| sigmoid1(x)));
                async { true }
            },
        ))
        .unwrap();
        (rolls.into_iter().next().unwrap(), probs)
    };
    let (roll, stepped) = write(Some(&answers));
    input.sheet.rolls.piano = roll.clone();
    let forced = block_on(teacher_forced_probs(
        &m,
        &input_example(&m, &input),
        5,
        &device,
    ))
    .unwrap();
    assert_eq!(forced.len(), stepped.len());
    let worst = forced
        .iter()
        .zip(&stepped)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(worst < 1e-4, "{worst}");
    // Without answers the lane is silent, whatever the example held: the second A hears
    // nothing of the first, and the first two phrases are as before.
    let (_, silent) = write(None);
    let per = 2 * PITCHES;
    assert_eq!(silent[..4 * 16 * per], stepped[..4 * 16 * per]);
    assert_ne!(silent[4 * 16 * per..], stepped[4 * 16 * per..]);
}

#[test]
fn a_trained_model_given_the_reference_lane_plays_as_before_until_trained() {
    let device = Device::flex();
    let old = model(PeConfig::new(PeKind::SineSpe).with_gate(true));
    let config = old
        .config
        .clone()
        .with_inputs(Some(Conditioning::REFERENCE));
    let phrases = two_bar_phrases("AA");
    let input = accompaniment_input(&song(1, 4), None, Some(phrases)).unwrap();
    let before = block_on(teacher_forced_probs(
        &old,
        &input_example(&old, &input),
        2,
        &device,
    ));
    let wide = old.with_more_inputs(&config).unwrap();
    assert_eq!(wide.config.input_dim, old_width() + REFERENCE_INPUTS);
    let e = input_example(&wide, &input);
    let width = wide.config.input_dim;
    assert!(
        (16 * 2..16 * 4).any(|t| e.inputs[t * width + old_width()..(t + 1) * width]
            .iter()
            .any(|&v| v != 0.0)),
        "the second A's lane holds the first's piano"
    );
    let after = block_on(teacher_forced_probs(&wide, &e, 2, &device));
    assert_eq!(before.unwrap(), after.unwrap());
    // Anything else that differs is refused.
    let other = PerformerConfig {
        d_ff: 2 * config.d_ff,
        ..config
    };
    let m = model(PeConfig::new(PeKind::SineSpe).with_gate(true));
    let Err(err) = m.with_more_inputs(&other) else {
        panic!("a wider feed-forward is refused")
    };
    let err = err.to_string();
    assert!(err.contains("only inputs can be added"), "{err}");
}

/// Inputs per step of the step-by-step accompaniment without the reference lane.
fn old_width() -> usize {
    ACCOMPANIMENT_INPUTS + LABEL_FEATURES + 2 * PITCHES
}

/// Phrases of two bars each, one per letter of `letters`.
fn two_bar_phrases(letters: &str) -> Vec<crate::music::phrases::Segment> {
    letters
        .chars()
        .enumerate()
        .map(|(i, letter)| crate::music::phrases::Segment {
            start_bar: 2 * i,
            bars: 2,
            letter,
        })
        .collect()
}

/// A written piano part strikes a piano's keys only, A0 to C8, however likely the model makes
/// another pitch; the draws of the others are still taken (a live take's come in order).
#[test]
fn only_a_pianos_keys_are_struck() {
    let s = PianoSampling {
        temperature: 1.0,
        ..PianoSampling::default()
    };
    let on = [30.0f32; PITCHES];
    let mut roll = PianoRoll::new(2);
    let mut draws = 0;
    draw_step(
        &mut roll,
        1,
        &on,
        &[-30.0; PITCHES],
        &s,
        None,
        &mut |_, _| {
            draws += 1;
            0.5
        },
    );
    let struck: Vec<usize> = (0..PITCHES).filter(|&p| roll.onset(1, p)).collect();
    assert_eq!(struck, (21..=108).collect::<Vec<_>>());
    assert_eq!(draws, PITCHES, "one onset draw a pitch");
    let b = crate::generate::binarize::binarize(
        &[0.9; PITCHES],
        &[0.9; PITCHES],
        1,
        crate::generate::binarize::Binarize::default(),
    );
    assert_eq!((0..PITCHES).filter(|&p| b.onset(0, p)).count(), 88);
}
