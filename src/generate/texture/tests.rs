//! The texture echo end to end with a toy model trained here: a phrase the lane repeats plays
//! like its first occurrence more than like another letter, and a donor's rhythm carries over
//! to the bars it is asked for, over their own chords.

use burn::tensor::Device;
use pollster::block_on;
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::*;
use crate::data::corpus::{Corpus, Piece as TrainPiece, WindowSpec};
use crate::generate::steer::Steer;
use crate::generate::{BatchProgress, Given, PianoSampling, accompaniment_input};
use crate::generate::{Reports, accompany_batch, input_example};
use crate::model::config::{Conditioning, PerformerConfig, Task};
use crate::model::pe::{PeConfig, PeKind};
use crate::model::performer::Performer;
use crate::music::fixtures;
use crate::music::phrases::Segment as Phrase;
use crate::music::texture::donor::Donor;
use crate::music::texture::echo::EchoCounts;
use crate::music::texture::{Segment, rhythm, similarity};
use crate::train::step::{Schedule, Trainer};

/// A tiny step-by-step accompaniment model trained briefly on the fixture songs.
fn trained() -> (Performer, Device) {
    let device = Device::flex().autodiff();
    let corpus = Corpus {
        pieces: [0u8, 5]
            .iter()
            .map(|&k| TrainPiece::from_song(format!("key {k}"), &fixtures::song(k, 8)).unwrap())
            .collect(),
    };
    let config = PerformerConfig::tiny(Task::Accompaniment, 0, PeConfig::new(PeKind::SineSpe))
        .with_inputs(Some(Conditioning::AUTOREGRESSIVE));
    let spec = WindowSpec {
        len: 64,
        max_shift: 0,
        ..WindowSpec::for_model(&config, 64)
    };
    let model = Performer::new(&config, 1, &device).unwrap();
    let schedule = Schedule {
        peak_lr: 1e-2,
        warmup: 5,
        total: 60,
        final_ratio: 0.1,
    };
    let mut trainer = Trainer::new(model, schedule, 1.0, 7);
    let mut rng = StdRng::seed_from_u64(3);
    for _ in 0..60 {
        let batch = corpus.sample(Task::Accompaniment, &spec, 4, &mut rng);
        block_on(trainer.train_step(&batch)).unwrap();
    }
    (trainer.model.clone(), device)
}

/// 2-bar segments of 16-step bars from bar `bar`.
fn seg(bar: usize) -> Segment {
    Segment {
        phrase: 0,
        letter: 'A',
        number: 0,
        start: bar * 16,
        len: 32,
    }
}

/// Mean rhythm similarity of the 2-bar segments of bars `a..a + n` and `b..b + n` of `roll`.
fn alike(roll: &PianoRoll, a: usize, b: usize, n: usize) -> f64 {
    let sims: Vec<f64> = (0..n / 2)
        .map(|k| {
            let (x, y) = (rhythm(roll, &seg(a + 2 * k)), rhythm(roll, &seg(b + 2 * k)));
            similarity(&x, &y).unwrap_or(0.0)
        })
        .collect();
    sims.iter().sum::<f64>() / sims.len() as f64
}

/// The fixture song of 12 bars under the phrase lane A B A, four bars each.
fn aba() -> crate::generate::AccompanimentInput {
    let phrases = ["A", "B", "A"]
        .iter()
        .enumerate()
        .map(|(i, l)| Phrase {
            start_bar: 4 * i,
            bars: 4,
            letter: l.chars().next().unwrap(),
        })
        .collect();
    accompaniment_input(&fixtures::song(0, 12), None, Some(phrases)).unwrap()
}

/// The lean as the shipped one is counted (the pianist's repeats alone), from the fixture's
/// pianist under A B A.
fn aba_lean() -> crate::music::texture::echo::EchoLean {
    let input = aba();
    let mut counts = EchoCounts::default();
    counts.add(&input.sheet.rolls.piano, &input.sheet.labels);
    counts.lean_alone()
}

#[test]
fn a_repeated_letter_plays_like_its_first_occurrence_more_than_another_letter() {
    let (model, device) = trained();
    let input = aba();
    let labels = &input.sheet.labels;
    let e = input_example(&model, &input);
    let lean = aba_lean();
    let echo = TextureEcho::repeats(lean, 1.0, labels).expect("the second A repeats");
    assert_eq!(
        echo.answering(),
        4 * 16,
        "every step of the second A answers the first"
    );
    let samplings: Vec<PianoSampling> = (0..6)
        .map(|seed| PianoSampling {
            seed,
            ..PianoSampling::default()
        })
        .collect();
    let quiet = |_: BatchProgress<'_>| async { true };
    let write = |texture: Option<&TextureEcho>| {
        let given = Given {
            roll: None,
            region: 0..e.len,
            texture,
            reference: None,
        };
        block_on(accompany_batch(
            &model,
            &e,
            given,
            &samplings,
            Reports::at_end(),
            &device,
            quiet,
        ))
        .unwrap()
    };
    let (echoed, plain) = (write(Some(&echo)), write(None));
    let mean = |rolls: &[PianoRoll], b: usize| {
        rolls.iter().map(|r| alike(r, 8, b, 4)).sum::<f64>() / rolls.len() as f64
    };
    let (first, other) = (mean(&echoed, 0), mean(&echoed, 4));
    assert!(
        first > other + 0.05,
        "the second A like the first A {first:.3}, like B {other:.3}"
    );
    assert!(
        first > mean(&plain, 0) + 0.05,
        "the echo brings the first A back: {first:.3} against {:.3} without",
        mean(&plain, 0)
    );
    // Where nothing repeats, the echo changes nothing: the first A and B are as without it.
    for (a, b) in echoed.iter().zip(&plain) {
        for t in 0..8 * 16 {
            for p in 0..PITCHES {
                assert_eq!(a.onset(t, p), b.onset(t, p), "step {t}, pitch {p}");
            }
        }
    }
}

#[test]
fn a_donor_leans_by_the_pooled_lean_whatever_mix_the_repeats_paste_by() {
    let input = accompaniment_input(&fixtures::song(0, 8), None, None).unwrap();
    let labels = &input.sheet.labels;
    // A donor bar that strikes E2 on every beat.
    let donor = Donor {
        name: "bass".into(),
        bars: vec![16],
        notes: (0..16).step_by(4).map(|t| (40, t, 1)).collect(),
        chords: vec!["N".into()],
        source: None,
    };
    donor.check().unwrap();
    // A lean that pastes and keeps repeats as a pianist does, at its own density; the pooled
    // lean +2 on the pitch struck then, −1 where its register was silent.
    let lean = EchoLean {
        lean: [[[-1.0, 0.0, 2.0]; 3]; 2],
        paste: mix_lean(1.0).paste,
        kept: mix_lean(1.0).paste,
        density: Some(0.25),
        ..EchoLean::default()
    };
    let echo = Answers::donor(labels, 0..64, &donor)
        .and_then(|a| TextureEcho::new(lean, 1.0, a))
        .expect("a donor");
    let written = PianoRoll::new(labels.len());
    let mut out = [0f32; PITCHES];
    // Bar 2's first beat answers the donor's: the pooled lean, the model's own density (the
    // echo's density was measured where a song answers itself).
    assert!(echo.lean_at(&written, 16, 0, &mut out));
    assert_eq!(out[40], 2.0);
    assert_eq!(out[100], -1.0);
    // Nor is a song's own density kept over them.
    let song = EchoLean {
        song_density: SongDensityRule::Free,
        ..lean
    };
    let echo = Answers::donor(labels, 0..64, &donor).and_then(|a| TextureEcho::new(song, 1.0, a));
    assert_eq!(echo.expect("a donor").song_density(), None);
}

#[test]
fn a_donor_brings_its_rhythm_to_the_bars_it_is_asked_for() {
    let (model, device) = trained();
    let input = accompaniment_input(&fixtures::song(0, 8), None, None).unwrap();
    let e = input_example(&model, &input);
    // A donor unlike the fixture's pianist, from another song: off-beat eighths in the middle
    // register, a bass on every beat, both tones of its chord (C: G and E), re-voiced to each
    // target bar's chord as it falls.
    let mut notes = Vec::new();
    for t in 0..32 {
        if t % 4 == 2 {
            notes.push((55, t, 2));
        }
        if t % 4 == 0 {
            notes.push((40, t, 1));
        }
    }
    let spb = crate::music::tokens::STEPS_PER_BEAT;
    let beats = 16 / spb;
    let donor_spec = Donor {
        name: "off-beats".into(),
        bars: vec![16, 16],
        notes,
        chords: vec!["C".into(), "C".into()],
        source: None,
    };
    donor_spec.check().unwrap();
    let donor = donor_spec.roll();
    // A lean shaped as POP909's pianists' (the shipped default's): a pitch the answered step
    // struck gains about 5 logits, a register it left silent loses 1.5, another pitch of a
    // register it struck about nothing (the toy fixture's own repeats would light up whole
    // registers).
    let lean = EchoLean {
        lean: [[[-1.5, 0.0, 5.0]; 3]; 2],
        by_melody: None,
        revoices: false,
        keeps_count: false,
        density: None,
        song_density: SongDensityRule::Off,
        by_latest: None,
        paste: None,
        kept: None,
    };
    let texture = Answers::donor(&input.sheet.labels, 64..128, &donor_spec)
        .and_then(|a| TextureEcho::new(lean, 1.0, a))
        .expect("a donor");
    assert_eq!(
        texture.answering(),
        64,
        "bars 5-8 answer the donor, no other"
    );
    let quiet = |_: BatchProgress<'_>| async { true };
    let write = |texture: Option<&TextureEcho>| {
        let given = Given {
            roll: None,
            region: 0..e.len,
            texture,
            reference: None,
        };
        block_on(accompany_batch(
            &model,
            &e,
            given,
            &[PianoSampling::default()],
            Reports::at_end(),
            &device,
            quiet,
        ))
        .unwrap()
        .remove(0)
    };
    let (with, without) = (write(Some(&texture)), write(None));
    let to_donor = |roll: &PianoRoll| {
        let d = rhythm(&donor, &seg(0));
        (0..2)
            .map(|k| similarity(&rhythm(roll, &seg(4 + 2 * k)), &d).unwrap_or(0.0))
            .sum::<f64>()
            / 2.0
    };
    assert!(
        to_donor(&with) > to_donor(&without) + 0.1,
        "bars 5-8 like the donor: {:.3} with it, {:.3} without",
        to_donor(&with),
        to_donor(&without)
    );
    // Its notes re-voiced to bars 5-8's own chords: the rhythm changes, the harmony stays.
    let tones = |roll: &PianoRoll| {
        let mut bars = PianoRoll::new(64);
        for t in 0..64 {
            for p in (0..128).filter(|&p| roll.onset(64 + t, p)) {
                bars.set(t, p, true, true, 0);
            }
        }
        crate::music::playing::chord_tone_ratio(&bars, &input.chords[4 * beats..8 * beats], spb)
            .unwrap_or(0.0)
    };
    assert!(
        tones(&with) >= tones(&without) - 0.05,
        "bars 5-8 keep their chords: {:.3} chord tones with the donor, {:.3} without",
        tones(&with),
        tones(&without)
    );
}

#[test]
fn a_rewritten_repeat_answers_the_kept_first_occurrence() {
    let (model, device) = trained();
    let input = aba();
    let e = input_example(&model, &input);
    let echo = TextureEcho::repeats(aba_lean(), 1.0, &input.sheet.labels).unwrap();
    let quiet = |_: BatchProgress<'_>| async { true };
    let sampling = [PianoSampling {
        seed: 11,
        ..PianoSampling::default()
    }];
    // The piano over `region` written (the rest kept from `roll`; all of it when `None`).
    let write = |roll: Option<&PianoRoll>, region: std::ops::Range<usize>, texture| {
        let given = Given {
            roll,
            region,
            texture,
            reference: None,
        };
        block_on(accompany_batch(
            &model,
            &e,
            given,
            &sampling,
            Reports::at_end(),
            &device,
            quiet,
        ))
        .unwrap()
        .remove(0)
    };
    let kept = write(None, 0..e.len, None);
    // Bars 9-12 (the second A) rewritten with the echo; the rest kept as it was.
    let rewrite = |roll: &PianoRoll, region| write(Some(roll), region, Some(&echo));
    let again = rewrite(&kept, 128..192);
    for t in 0..128 {
        for p in 0..PITCHES {
            assert_eq!(again.onset(t, p), kept.onset(t, p), "step {t} kept");
        }
    }
    assert!(
        alike(&again, 8, 0, 4) > alike(&kept, 8, 0, 4),
        "the rewritten A like the kept first A: {:.3}, before {:.3}",
        alike(&again, 8, 0, 4),
        alike(&kept, 8, 0, 4)
    );
    // Rewriting the first A leaves the repeat as it was (nothing in the region answers).
    let first = rewrite(&kept, 0..64);
    for t in 128..192 {
        for p in 0..PITCHES {
            assert_eq!(
                first.onset(t, p),
                kept.onset(t, p),
                "step {t} of the repeat kept"
            );
        }
    }
}

#[test]
fn a_third_occurrence_leans_on_what_the_latest_before_it_played() {
    let phrases = (0..3)
        .map(|i| Phrase {
            start_bar: 4 * i,
            bars: 4,
            letter: 'A',
        })
        .collect();
    let input = accompaniment_input(&fixtures::song(0, 12), None, Some(phrases)).unwrap();
    let labels = &input.sheet.labels;
    // The pooled lean nothing; the joint lean says which evidence it read: 10 × the first
    // occurrence's, + the latest's.
    let lean = EchoLean {
        lean: [[[0.0; 3]; 3]; 2],
        by_melody: None,
        revoices: false,
        keeps_count: false,
        density: None,
        song_density: SongDensityRule::Off,
        by_latest: Some(std::array::from_fn(|_| {
            std::array::from_fn(|_| {
                std::array::from_fn(|_| {
                    std::array::from_fn(|ef| std::array::from_fn(|el| (10 * ef + el) as f32))
                })
            })
        })),
        paste: None,
        kept: None,
    };
    let echo = TextureEcho::repeats(lean, 1.0, labels).expect("A repeats");
    // Only the second A struck the bass's E at its fourth step.
    let mut written = PianoRoll::new(labels.len());
    written.set(64 + 3, 40, true, true, 0);
    let mut out = [0f32; PITCHES];
    assert!(echo.lean_at(&written, 128 + 3, 0, &mut out));
    assert_eq!(
        (out[40], out[43], out[70]),
        (2.0, 1.0, 0.0),
        "the third A: nothing then in the first, the pitch (another in its register) in the second"
    );
    assert!(echo.lean_at(&written, 64 + 3, 0, &mut out));
    assert_eq!(out[40], 0.0, "the second A has only the first to answer");
}

/// A mix whose pasted registers lean +1 on the pitch struck then and −1 where nothing
/// started, and whose registers played anew lean nothing, pasted with share `share`.
fn mix_lean(share: f32) -> EchoLean {
    use crate::music::texture::echo::{MELODY_BINS, PasteMix};
    let table = |v: [f32; 3]| [[v; 3]; 2];
    EchoLean {
        lean: [[[0.0; 3]; 3]; 2],
        by_melody: None,
        revoices: false,
        keeps_count: false,
        density: None,
        song_density: SongDensityRule::Off,
        by_latest: None,
        paste: Some(PasteMix {
            share: [[share; 3]; MELODY_BINS + 1],
            lean: [
                [table([0.0; 3]); MELODY_BINS + 1],
                [table([-1.0, 0.0, 1.0]); MELODY_BINS + 1],
            ],
        }),
        kept: None,
    }
}

#[test]
fn a_repeated_bar_is_drawn_pasted_or_played_anew_register_by_register_for_the_whole_bar() {
    let input = aba();
    let labels = &input.sheet.labels;
    // The first A's bass strikes E2 at every step of its first bar.
    let mut written = PianoRoll::new(labels.len());
    for t in 0..16 {
        written.set(t, 40, true, true, 0);
    }
    let lean_of = |share: f32, t: usize, seed: u64| {
        let echo = TextureEcho::repeats(mix_lean(share), 1.0, labels).expect("A repeats");
        let mut out = [0f32; PITCHES];
        assert!(echo.lean_at(&written, t, seed, &mut out));
        out
    };
    // Always pasted: the pitch struck then leans +1, the bass's other keys nothing; the top,
    // quiet then, is played anew (nothing).
    let out = lean_of(1.0, 128 + 5, 0);
    assert_eq!((out[40], out[41], out[80]), (1.0, 0.0, 0.0));
    // Never pasted: nothing anywhere.
    assert!(lean_of(0.0, 128 + 5, 0).iter().all(|&x| x == 0.0));
    // Half the time: each seed decides the bar once, for all its steps; about half the seeds
    // paste it.
    let mut pasted = 0;
    for seed in 0..200 {
        let at: Vec<f32> = (128..144).map(|t| lean_of(0.5, t, seed)[40]).collect();
        assert!(at.iter().all(|&x| x == at[0]), "seed {seed}: {at:?}");
        pasted += (at[0] == 1.0) as usize;
    }
    assert!((70..130).contains(&pasted), "{pasted} of 200");
}

#[test]
fn the_echos_density_scales_the_odds_of_the_steps_it_leans_and_no_others() {
    let input = aba();
    let labels = &input.sheet.labels;
    let mut written = PianoRoll::new(labels.len());
    for t in 0..16 {
        written.set(t, 40, true, true, 0);
    }
    let keeping = |density: Option<f32>| EchoLean {
        paste: None,
        kept: mix_lean(1.0).paste,
        density,
        ..mix_lean(1.0)
    };
    let lean_at = |lean: EchoLean, t: usize| {
        let echo = TextureEcho::repeats(lean, 1.0, labels).expect("A repeats");
        let mut out = [0f32; PITCHES];
        (
            echo.leans_on(t),
            echo.lean_at(&written, t, 0, &mut out).then_some(out),
        )
    };
    let (leans, plain) = lean_at(keeping(None), 16 + 5);
    let plain = plain.expect("it keeps the bar before");
    let (_, quarter) = lean_at(keeping(Some(0.25)), 16 + 5);
    let quarter = quarter.expect("it keeps the bar before");
    // Every pitch's odds a quarter's square root (as the density a person asks for), the
    // lean's own shape kept.
    assert!(leans);
    let bias = 0.5 * 0.25f32.ln();
    assert!((0..PITCHES).all(|p| (quarter[p] - plain[p] - bias).abs() < 1e-6));
    // A step it does not lean on (the first bar of the first A) stays the model's own.
    assert_eq!(lean_at(keeping(Some(0.25)), 5), (false, None));
    // At half the strength, half the lean and half the log of the density.
    let half = |density| {
        let echo = TextureEcho::repeats(keeping(density), 0.5, labels).expect("A repeats");
        let mut out = [0f32; PITCHES];
        assert!(echo.lean_at(&written, 16 + 5, 0, &mut out));
        out
    };
    let (plain, quarter) = (half(None), half(Some(0.25)));
    assert!((0..PITCHES).all(|p| (quarter[p] - plain[p] - 0.5 * bias).abs() < 1e-6));
}

#[test]
fn a_bar_of_a_first_occurrence_keeps_the_texture_of_the_bar_before() {
    let input = aba();
    let labels = &input.sheet.labels;
    // The first A's bass strikes E2 at every step of its first bar.
    let mut written = PianoRoll::new(labels.len());
    for t in 0..16 {
        written.set(t, 40, true, true, 0);
    }
    let keeping = |share: f32| EchoLean {
        paste: None,
        kept: mix_lean(share).paste,
        ..mix_lean(share)
    };
    let lean_at = |lean: EchoLean, t: usize| {
        let echo = TextureEcho::repeats(lean, 1.0, labels).expect("A repeats");
        let mut out = [0f32; PITCHES];
        echo.lean_at(&written, t, 0, &mut out).then_some(out)
    };
    // The second bar of the first A, kept: the bass's E2 again.
    let out = lean_at(keeping(1.0), 16 + 5).expect("it keeps the bar before");
    assert_eq!((out[40], out[41]), (1.0, 0.0));
    // The first bar of a phrase keeps nothing, and a lean without the kept mix leans only
    // where the lane repeats.
    assert!(lean_at(keeping(1.0), 5).is_none());
    assert!(lean_at(mix_lean(1.0), 16 + 5).is_none());
    // A song whose letters never return still keeps its textures.
    let phrases = vec![Phrase {
        start_bar: 0,
        bars: 12,
        letter: 'A',
    }];
    let one = accompaniment_input(&fixtures::song(0, 12), None, Some(phrases)).unwrap();
    let echo = TextureEcho::repeats(keeping(1.0), 1.0, &one.sheet.labels).expect("it keeps");
    assert_eq!(echo.answering(), 0);
    assert!(echo.answers_in(16..32) && !echo.answers_in(0..16));
    assert!(TextureEcho::repeats(mix_lean(1.0), 1.0, &one.sheet.labels).is_none());
}

#[test]
fn a_repeat_under_another_chord_re_voices_a_pitch_that_is_no_tone_of_it() {
    let input = aba();
    let labels = &input.sheet.labels;
    // The lean says which evidence it read: 10 × whether the chord changed, + the evidence.
    let table: crate::music::texture::echo::LeanTable = std::array::from_fn(|c| {
        std::array::from_fn(|_| std::array::from_fn(|ev| (10 * c + ev) as f32))
    });
    let lean = |revoices| EchoLean {
        lean: table,
        revoices,
        ..EchoLean::default()
    };
    // The first A's bass struck E2 at its fourth step.
    let mut written = PianoRoll::new(labels.len());
    written.set(3, 40, true, true, 0);
    let (t, s) = (128 + 3, 3);
    let c = Chord::parse("C").unwrap();
    let g = Chord::parse("G").unwrap();
    let at = |revoices: bool, now: Option<Chord>| {
        let mut chords = labels.chord.clone();
        (chords[s], chords[t]) = (c, now);
        let echo = TextureEcho::repeats(lean(revoices), 1.0, labels).expect("A repeats");
        let mut out = [0f32; PITCHES];
        assert!(echo.lean_with(&written, Some(&chords), (t, 0), &mut out));
        (out[40], out[43])
    };
    // Under C again the E is the E; under G (no E in it) it is another key of the bass,
    // where the lean re-voices; G2, not struck then, is another key of the bass either way.
    assert_eq!(at(true, c), (2.0, 1.0));
    assert_eq!(at(false, g), (12.0, 11.0));
    assert_eq!(at(true, g), (11.0, 11.0));
    // A chord that holds the E keeps it the E.
    assert_eq!(at(true, Chord::parse("A:min").unwrap()), (12.0, 11.0));
}

/// A borrowed figure is voiced under the tune: a donor's note struck on or over the melody
/// sounding at its target step drops by octaves until it sits under it (as the pianists, who
/// double or cross the melody on about one onset in twenty, voice a texture), and holds there.
#[test]
fn a_donors_notes_over_the_melody_are_voiced_under_it() {
    assert_eq!(under(72, 67), 1);
    assert_eq!(under(60, 60), 1, "doubling the melody drops too");
    assert_eq!(under(55, 60), 0);
    assert_eq!(under(90, 60), 3);
    assert_eq!(under(70, 0), 0, "no melody: as it was");
    assert_eq!(under(5, 3), 0, "nothing lower is left");
    let input = accompaniment_input(&fixtures::song(0, 8), None, None).unwrap();
    let labels = &input.sheet.labels;
    let t = (16..32)
        .find(|&t| labels.melody[t] != 0)
        .expect("bar 2 sings");
    let m = labels.melody[t];
    // A donor bar that strikes a fifth over the melody there, held for a beat.
    let over = m + 7;
    let donor = Donor {
        name: "high".into(),
        bars: vec![16],
        notes: vec![(over, t - 16, 4)],
        chords: vec!["N".into()],
        source: None,
    };
    let lean = EchoLean {
        lean: [[[-1.0, 0.0, 2.0]; 3]; 2],
        ..EchoLean::default()
    };
    let echo = Answers::donor(labels, 0..64, &donor)
        .and_then(|a| TextureEcho::new(lean, 1.0, a))
        .expect("a donor");
    let written = PianoRoll::new(labels.len());
    let mut out = [0f32; PITCHES];
    assert!(echo.lean_at(&written, t, 0, &mut out));
    let dropped = usize::from(over - 12);
    assert_eq!(out[dropped], 2.0, "struck an octave down, under the melody");
    assert_ne!(out[usize::from(over)], 2.0, "not over it");
}

/// The expected onsets of a step whose onset log odds are `logits` + `lean`.
fn expected(logits: &[f32], lean: &[f32]) -> f32 {
    logits
        .iter()
        .zip(lean)
        .map(|(z, l)| 1.0 / (1.0 + (-(z + l)).exp()))
        .sum()
}

#[test]
fn a_songs_density_gives_its_leaned_steps_the_models_count_and_keeps_the_leans_rhythm() {
    use super::SongDensity;
    use crate::generate::sample::PianoSampling;
    let s = PianoSampling::default();
    // The model's odds: a few likely keys, the rest unlikely; the lean strikes every other
    // step hard and leaves the steps between a little below the model's.
    let logits: Vec<f32> = (0..PITCHES)
        .map(|p| if (40..46).contains(&p) { -0.5 } else { -7.0 })
        .collect();
    let lean_of =
        |t: usize| -> Vec<f32> { vec![if t.is_multiple_of(2) { 2.5 } else { -0.5 }; PITCHES] };
    let prior = 0.5 * 0.489f32.ln();
    let mut density = SongDensity::new(prior, false);
    assert_eq!(density.shift(), prior, "it starts at the measured density");
    let (mut own, mut leaned, mut fixed, mut even, mut odd) = (0f32, 0f32, 0f32, 0f32, 0f32);
    for t in 0..400 {
        let mut lean = lean_of(t);
        fixed += expected(&logits, &lean.iter().map(|l| l + prior).collect::<Vec<_>>());
        density.settle(&mut lean, &logits, &s);
        let count = expected(&logits, &lean);
        own += expected(&logits, &[0.0; PITCHES]);
        leaned += count;
        *[&mut even, &mut odd][t % 2] += count;
    }
    // The shift that gives these steps the model's count, found by halving.
    let pair = |c: f32| {
        let shifted = |l: f32| expected(&logits, &[l + c; PITCHES]);
        shifted(2.5) + shifted(-0.5) - 2.0 * expected(&logits, &[0.0; PITCHES])
    };
    let (mut low, mut high) = (-8f32, 8f32);
    while high - low > 1e-4 {
        let mid = 0.5 * (low + high);
        *[&mut high, &mut low][usize::from(pair(mid) < 0.0)] = mid;
    }
    // The song's shift is that one, the measured density's pull (a bar of 400 steps) aside …
    let pull = 16.0 / 416.0 * (prior - low);
    assert!(
        (density.shift() - low - pull).abs() < 0.01,
        "{} against {low}",
        density.shift()
    );
    // … so the song plays near the model's count where one density would play far more …
    assert!((leaned / own - 1.0).abs() < 0.08, "{leaned} against {own}");
    assert!(fixed / own > 1.4, "{fixed} against {own}");
    // … and the lean still says which steps have them.
    assert!(
        even > 3.0 * odd,
        "{even} on the leaned-up steps, {odd} between"
    );
    // Where the lean adds nothing the song's shift goes to nothing, the prior outweighed.
    let mut plain = SongDensity::new(prior, false);
    for _ in 0..400 {
        plain.settle(&mut vec![0.0; PITCHES], &logits, &s);
    }
    assert!(plain.shift().abs() < 0.03, "{}", plain.shift());
    // Capped, it never plays busier than the measured density: there it stays, and where the
    // lean plays busier than the model it is taken back as far as uncapped.
    let (mut capped, mut busy) = (SongDensity::new(prior, true), SongDensity::new(prior, true));
    for t in 0..400 {
        capped.settle(&mut vec![0.0; PITCHES], &logits, &s);
        busy.settle(&mut lean_of(t), &logits, &s);
    }
    assert_eq!(capped.shift(), prior);
    assert!(
        (busy.shift() - density.shift()).abs() < 1e-3,
        "{}",
        busy.shift()
    );
}

#[test]
fn the_echo_keeps_a_songs_density_where_it_answers_the_song_and_not_a_donors() {
    use crate::generate::sample::PianoSampling;
    let input = aba();
    let labels = &input.sheet.labels;
    let mut written = PianoRoll::new(labels.len());
    for t in 0..16 {
        written.set(t, 40, true, true, 0);
    }
    let lean = |song_density| EchoLean {
        paste: None,
        kept: mix_lean(1.0).paste,
        density: Some(0.25),
        song_density,
        ..mix_lean(1.0)
    };
    let echo = |song_density| TextureEcho::repeats(lean(song_density), 1.0, labels).unwrap();
    assert_eq!(echo(SongDensityRule::Off).song_density(), None);
    let mut free = super::TextureSteer::new(echo(SongDensityRule::Free));
    let start = free.song_density().map(super::SongDensity::shift);
    assert_eq!(
        start,
        Some(0.5 * 0.25f32.ln()),
        "it starts at the measured density"
    );
    // Its first leaned step gets the measured density's shift, as one density would give it.
    let s = PianoSampling::default();
    let on = vec![-3.0; PITCHES];
    let (mut kept, mut fixed) = ([0f32; PITCHES], [0f32; PITCHES]);
    let now = super::PianoNow {
        written: &written,
        chords: None,
        step: 16 + 5,
        sampling: &s,
        onsets: &on,
    };
    assert!(free.lean(&now, &mut kept));
    let mut off = super::TextureSteer::new(echo(SongDensityRule::Off));
    assert!(off.lean(&now, &mut fixed));
    assert!((0..PITCHES).all(|p| (kept[p] - fixed[p]).abs() < 1e-5));
    // It has counted that step, and moved towards the model's count.
    assert_ne!(free.song_density().map(super::SongDensity::shift), start);
}
