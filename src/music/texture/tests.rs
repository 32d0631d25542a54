use super::echo::{EchoCounts, MELODY_BINS, latest_sources, melody_alike, melody_bin, sources};
use super::*;
use crate::music::labels::PhraseLabel;

/// Labels of `letters` phrases of `bars` bars each, 16 steps a bar, no chords.
fn lane(letters: &str, bars: u16) -> StepLabels {
    let mut phrase = Vec::new();
    let (mut bar, mut position) = (Vec::new(), Vec::new());
    for (index, letter) in letters.chars().enumerate() {
        for b in 0..bars {
            for i in 0..16 {
                phrase.push(Some(PhraseLabel {
                    letter,
                    index: index as u16,
                    bar: b,
                    bars,
                }));
                bar.push((index as u16 * bars + b) as u32);
                position.push(i);
            }
        }
    }
    let n = phrase.len();
    StepLabels {
        steps_per_beat: 4,
        melody: vec![0; n],
        chord: vec![None; n],
        phrase,
        bar,
        position,
    }
}

/// A roll whose phrase k (of `bars` bars, 16 steps each) plays `patterns[k]`: a bass note
/// every `patterns[k]` steps.
fn roll_of(patterns: &[usize], bars: usize) -> PianoRoll {
    let steps = 16 * bars;
    let mut roll = PianoRoll::new(steps * patterns.len());
    for (k, &every) in patterns.iter().enumerate() {
        for t in (0..steps).step_by(every) {
            roll.set(k * steps + t, 40, true, true, 0);
            if every == 3 {
                roll.set(k * steps + t, 70, true, true, 0);
            }
        }
    }
    roll
}

#[test]
fn registers_split_at_48_and_64() {
    assert_eq!(
        (register(47), register(48), register(63), register(64)),
        (0, 1, 1, 2)
    );
    let all: u128 = (0..REGISTERS).map(register_mask).fold(0, |a, m| a | m);
    assert_eq!(
        all.count_ones(),
        88,
        "the piano's keys, each in one register"
    );
}

#[test]
fn segments_are_two_whole_bars_of_melodic_phrases() {
    let mut l = lane("iAB", 3);
    let segs = segments(&l);
    // 3-bar phrases: one whole segment each; the intro has none.
    assert_eq!(segs.len(), 2);
    assert_eq!((segs[0].letter, segs[0].start, segs[0].len), ('A', 48, 32));
    assert_eq!((segs[1].letter, segs[1].start), ('B', 96));
    l.phrase[100] = None;
    assert_eq!(
        segments(&l).len(),
        1,
        "a gap splits B's segment; neither half is whole"
    );
    let from_mid_a = l.slice(50..l.len());
    assert_eq!(
        segments(&from_mid_a).len(),
        0,
        "labels from mid-segment: A's is not whole"
    );
}

#[test]
fn ils_is_above_one_only_where_a_letter_returns_as_it_was() {
    let l = lane("ABAB", 2);
    // A plays every 4 steps, B every 3 (bass and treble): the repeats as the first time.
    let structured = ils(&roll_of(&[4, 3, 4, 3], 2), &l).unwrap();
    assert!(structured.ratio() > 1.2, "{structured:?}");
    assert_eq!(structured.same, 1.0);
    // The same textures, but the second A plays B's and the second B A's.
    let crossed = ils(&roll_of(&[4, 3, 3, 4], 2), &l).unwrap();
    assert!(crossed.ratio() < 1.0, "{crossed:?}");
    // One texture everywhere: no structure to see.
    let flat = ils(&roll_of(&[4, 4, 4, 4], 2), &l).unwrap();
    assert!((flat.ratio() - 1.0).abs() < 1e-9);
    assert_eq!((flat.same_pairs, flat.all_pairs), (2, 6));
    assert!(
        ils(&roll_of(&[4, 3], 2), &lane("AB", 2)).is_none(),
        "no letter returns"
    );
    assert!(ils(&PianoRoll::new(128), &l).is_none(), "nothing plays");
    // Two-bar phrases have no two segments of one phrase.
    assert_eq!((structured.within, structured.within_pairs), (None, 0));
}

#[test]
fn a_texture_kept_through_a_phrase_is_alike_within_it() {
    // A B A of four bars: each phrase keeps one texture, or changes it halfway.
    let l = lane("ABA", 4);
    let kept = ils(&roll_of(&[4, 4, 3, 3, 4, 4], 2), &l).unwrap();
    assert_eq!((kept.within, kept.within_pairs), (Some(1.0), 3));
    let changed = ils(&roll_of(&[4, 3, 3, 4, 4, 3], 2), &l).unwrap();
    assert!(changed.within.unwrap() < 0.9, "{changed:?}");
    assert_eq!(changed.within_pairs, 3);
}

#[test]
fn a_repeat_answers_the_same_place_of_its_first_occurrence() {
    let l = lane("ABA", 2);
    let src = sources(&l);
    assert!(src[..64].iter().all(|s| s.is_none()));
    assert_eq!(src[64], Some(0));
    assert_eq!(src[64 + 21], Some(21));
}

/// A roll of `phrases` phrases of `bars` bars (16 steps each) where a few pitches start at
/// random (one in three), phrase `k` drawing its bars from the stream `streams[k]`: phrases with
/// the same stream play the same, bar for bar; every bar of a stream's phrase is new.
fn random_roll(streams: &[u64], bars: usize) -> PianoRoll {
    const PITCHES_PLAYED: [usize; 6] = [40, 43, 55, 60, 64, 72];
    let steps = 16 * bars;
    let mut roll = PianoRoll::new(steps * streams.len());
    for (k, &stream) in streams.iter().enumerate() {
        let mut x = stream.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        for t in 0..steps {
            for p in PITCHES_PLAYED {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if x % 3 == 0 {
                    roll.set(k * steps + t, p, true, true, 0);
                }
            }
        }
    }
    roll
}

#[test]
fn the_lean_is_what_the_repeats_justify_beyond_other_letters() {
    let l = lane("ABAB", 8);
    // Repeats as the first time, other letters unlike: a strong lean towards the same pitch,
    // against one where nothing started then.
    let mut counts = EchoCounts::default();
    counts.add(&random_roll(&[1, 2, 1, 2], 8), &l);
    assert_eq!(counts.repeat_steps, 2 * 8 * 16);
    let lean = counts.lean().lean[0];
    assert!(lean[0][2] > 1.0 && lean[2][2] > 1.0, "{lean:?}");
    assert!(
        lean[0][1] < -1.0,
        "another pitch then: this one less likely now: {lean:?}"
    );
    // A song whose every phrase is new: a repeat tells nothing more than another letter.
    let mut flat = EchoCounts::default();
    flat.add(&random_roll(&[1, 2, 3, 4], 8), &l);
    let lean = flat.lean().lean[0];
    assert!(lean.iter().flatten().all(|x| x.abs() < 0.3), "{lean:?}");
}

#[test]
fn a_repeat_is_binned_by_how_alike_its_melody_sings() {
    assert_eq!(
        [(0, 16), (8, 16), (13, 16), (15, 16), (16, 16)].map(|(a, n)| melody_bin(a, n)),
        [0, 1, 2, 2, 3]
    );
    // A A' A: the second A sings its first bar differently, the third sings as the first.
    let mut l = lane("AAA", 2);
    for t in 0..l.len() {
        l.melody[t] = 60 + (t % 16) as u8;
    }
    for t in 32..40 {
        l.melody[t] = 50;
    }
    let sung = melody_alike(&l);
    assert!(
        sung[..32].iter().all(Option::is_none),
        "the first A answers nothing"
    );
    assert_eq!((sung[32], sung[48], sung[64]), (Some(1), Some(3), Some(3)));
}

#[test]
fn the_lean_by_melody_is_counted_apart_for_each_bin() {
    // A B A B A: the piano of a repeat whose melody returns note for note plays as the first
    // time; where the melody differs (the last A, every step) it plays anew.
    let mut l = lane("ABABA", 8);
    for t in 0..l.len() {
        l.melody[t] = 60 + (t % 16) as u8;
    }
    let last = 4 * 8 * 16;
    for t in last..l.len() {
        l.melody[t] = 40;
    }
    let mut counts = EchoCounts::default();
    counts.add(&random_roll(&[1, 2, 1, 2, 3], 8), &l);
    assert_eq!(counts.repeat_steps_by_melody, [128, 0, 0, 256]);
    assert_eq!(counts.repeat_steps_by_melody.len(), MELODY_BINS);
    let lean = counts.lean_by_melody();
    let by = lean.by_melody.expect("counted by melody");
    let (same, other) = (by[3][0], by[0][0]);
    assert!(same[0][2] > 1.0, "a note for note repeat: {same:?}");
    // Sung anew it plays anew: what was played then tells no more than that the song plays
    // those pitches (the lean alone counts that too).
    assert!(
        same[0][2] > other[0][2] + 2.0,
        "a repeat sung anew: {other:?}, as before: {same:?}"
    );
    // The pooled lean lies between, and serves a step whose melody is not known.
    assert!(lean.lean[0][0][2] < same[0][2] && lean.lean[0][0][2] > other[0][2]);
    let mut out = [0f32; 128];
    lean.of((1 << 40, u128::MAX), (false, None, None), 1.0, &mut out);
    assert_eq!(out[40], lean.lean[0][0][2]);
    lean.of((1 << 40, u128::MAX), (false, Some(3), None), 1.0, &mut out);
    assert_eq!(out[40], same[0][2]);
    // Re-voiced: a pitch left out of the kept keys (no tone of the chord now) leans as
    // another key of its register, the register's rhythm kept.
    lean.of((1 << 40, !(1 << 40)), (true, None, None), 1.0, &mut out);
    assert_eq!((out[40], out[41]), (lean.lean[1][0][1], lean.lean[1][0][1]));
    assert_eq!(
        out[70], lean.lean[1][2][0],
        "a register quiet then stays so"
    );
}

#[test]
fn a_third_occurrence_also_answers_the_latest_before_it() {
    // A B A A, two bars each: the second A answers the first alone; the third answers the
    // first and, besides it, the second.
    let l = lane("ABAA", 2);
    let (first, latest) = (sources(&l), latest_sources(&l));
    assert_eq!((first[64], latest[64]), (Some(0), None));
    assert_eq!((first[96 + 5], latest[96 + 5]), (Some(5), Some(64 + 5)));
    assert!(latest[..96].iter().all(Option::is_none));
}

#[test]
fn where_the_latest_occurrence_was_played_anew_a_third_one_leans_on_both() {
    // A A A: the second A plays anew, the third plays as the second did.
    let l = lane("AAA", 8);
    let mut counts = EchoCounts::default();
    counts.add(&random_roll(&[1, 2, 2], 8), &l);
    assert_eq!(counts.latest_steps, 128, "the third A's steps");
    let lean = counts.lean_by_latest();
    let by = lean.by_latest.expect("counted by the latest occurrence");
    for m in [3, MELODY_BINS] {
        // Same chord, bass: the pitch struck by the latest only, against by the first only.
        let cells = by[m][0][0];
        assert!(cells[1][2] > cells[2][1] + 2.0, "melody bin {m}: {cells:?}");
    }
    // Read with the latest's keys, a pitch leans by both; without them, by the first alone.
    let mut out = [0f32; 128];
    lean.of(
        (1 << 40, u128::MAX),
        (false, Some(3), Some(1 << 43)),
        1.0,
        &mut out,
    );
    assert_eq!((out[40], out[43]), (by[3][0][0][2][1], by[3][0][0][1][2]));
    lean.of(
        (1 << 40, u128::MAX),
        (false, None, Some(1 << 40)),
        1.0,
        &mut out,
    );
    assert_eq!(out[40], by[MELODY_BINS][0][0][2][2]);
    lean.of((1 << 40, u128::MAX), (false, Some(3), None), 1.0, &mut out);
    assert_eq!(out[40], lean.by_melody.expect("by melody")[3][0][0][2]);
}

#[test]
fn a_repeat_is_pasted_where_its_rhythm_returns_exactly_in_a_register() {
    // A B A A, two bars each. Patterns by phrase: bass every 4 steps (A), every 2 (B), every
    // 4 again (the second A pastes the first), every 3 (the third A plays anew, bass and top).
    let l = lane("ABAA", 2);
    let p = echo::pasted(&roll_of(&[4, 2, 4, 3], 2), &l);
    // Against the first: the second A's two bars pasted (bass); the third A's bass differs,
    // and its top register, quiet in the first A, counts as not pasted.
    assert_eq!(p.first, [2, 2 + 4]);
    // Against the latest (the second A) likewise: neither of its registers returns.
    assert_eq!(p.latest, [0, 4]);
    assert_eq!(echo::Pasted::share(p.first), Some(1.0 / 3.0));
    // The same rhythm on other keys still pastes: a texture re-voiced to a new chord.
    let mut moved = roll_of(&[4, 2, 4, 4], 2);
    for t in (96..128).step_by(4) {
        moved.set(t, 40, false, false, 0);
        moved.set(t, 43, true, true, 0);
    }
    assert_eq!(echo::pasted(&moved, &l).first, [4, 4]);
}

#[test]
fn the_pianists_repeats_are_counted_apart_as_pasted_or_played_anew() {
    // A B A A as above: the second A pastes the first's bass; the third plays its bass and
    // its top anew (the top, quiet in the first A, is not pasted). The melody is the same
    // everywhere (bin 3).
    let l = lane("ABAA", 2);
    let mut counts = EchoCounts::default();
    counts.add(&roll_of(&[4, 2, 4, 3], 2), &l);
    for m in [3, MELODY_BINS] {
        // Per register: [anew, pasted] bars.
        assert_eq!(
            counts.repeat_kinds.bars[m],
            [[2, 2], [0, 0], [2, 0]],
            "bin {m}"
        );
    }
    assert_eq!(counts.repeat_kinds.bars[0], [[0, 0]; 3]);
    let mix = counts.lean_pasting().paste.expect("counted as a mix");
    // The shares, a bar added to each kind: (2 + 1) / (4 + 2) for the bass, 1 / 4 for the top.
    assert!((mix.share_of(Some(3), 0) - 0.5).abs() < 1e-6);
    assert!((mix.share_of(None, 2) - 0.25).abs() < 1e-6);
    // Same chord, bass. Where the bass pasted, nothing starts where nothing started then and
    // the pitch struck then starts again; played anew (every 3 steps against every 4), the
    // lean says far less either way.
    let (anew, pasted) = (
        mix.lean[0][MELODY_BINS][0][0],
        mix.lean[1][MELODY_BINS][0][0],
    );
    assert!(pasted[0] < -2.0 && pasted[2] > 2.0, "pasted {pasted:?}");
    assert!(
        pasted[0] < anew[0] && pasted[2] > anew[2],
        "{pasted:?} against {anew:?}"
    );
}

#[test]
fn a_bar_that_answers_no_earlier_phrase_is_counted_against_the_bar_before_it() {
    // A B A, two bars each: the first A's and B's second bars answer their first bars; the
    // second A answers the first A (a repeat), and B's first bar follows another phrase.
    let l = lane("ABA", 2);
    assert_eq!(echo::kept_bars(&l), vec![(16, 16, 0, 3), (48, 16, 32, 3)]);
    let mut counts = EchoCounts::default();
    counts.add(&roll_of(&[4, 3, 4], 2), &l);
    // The first A keeps its bass (a note every 4 steps, the same in each 16-step bar); B's
    // every 3 steps falls elsewhere in its second bar, in the bass and the top.
    assert_eq!(counts.kept_kinds.bars[3], [[1, 1], [0, 0], [1, 0]]);
    let lean = counts.lean_keeping();
    assert!(lean.kept.is_some() && lean.paste.is_some());
}
