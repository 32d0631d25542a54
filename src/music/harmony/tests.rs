use super::decode::{
    Draws, HarmonyDecode, Rhythm, alternatives, causal, log_softmax_rows, path_score, recolour,
    sample, tone_gains, viterbi,
};
use super::measures::{Accuracy, agreement, measures};
use super::*;
use crate::music::grid::Grid;
use crate::music::labels::StepLabels;
use crate::music::midi::tests::note;
use crate::music::roll::PianoRoll;

fn chord(root: u8, quality: Quality) -> Option<Chord> {
    Some(Chord { root, quality })
}

#[test]
fn chord_classes_round_trip() {
    assert_eq!(CHORD_CLASSES, 169);
    assert_eq!(class_chord(0), None);
    assert_eq!(chord_class(None), 0);
    for k in 1..CHORD_CLASSES {
        assert_eq!(chord_class(class_chord(k)), k);
    }
    assert_eq!(class_chord(CHORD_CLASSES), None);
    assert_eq!(class_chord(2), chord(0, Quality::Min));
}

#[test]
fn beat_places_know_bar_lines_and_half_bars() {
    // A bar of 4/4, a bar of 3/4 and a bar cut short after two beats.
    let beats: Vec<u64> = (0..=9).map(|b| b * 480).collect();
    let grid = Grid::new(beats, 4, vec![0, 4, 7]);
    let labels = StepLabels::new(&grid, &PianoRoll::new(grid.num_steps()), &[], &[]);
    let places = BeatPlaces::from_labels(&labels);
    assert_eq!(places.in_bar, vec![0, 1, 2, 3, 0, 1, 2, 0, 1]);
    assert_eq!(places.bar_beats, vec![4, 4, 4, 4, 3, 3, 3, 2, 2]);
    let slots: Vec<usize> = (0..9).map(|b| places.slot(b)).collect();
    assert_eq!(slots, vec![0, 2, 1, 2, 0, 2, 2, 0, 2]);
}

fn places(beats: usize) -> BeatPlaces {
    BeatPlaces {
        in_bar: (0..beats).map(|b| b % 4).collect(),
        bar_beats: vec![4; beats],
    }
}

#[test]
fn rhythm_counts_changes_by_kind_of_beat() {
    let c = chord(0, Quality::Maj);
    let g = chord(7, Quality::Maj);
    // Changes on both bar lines and one half bar; none elsewhere.
    let chords = [c, c, g, g, c, c, c, c, g];
    let p = places(9);
    let r = Rhythm::fit([(&chords[..], &p)]);
    assert_eq!(r.change[0], 1.0f32.clamp(0.001, 0.999));
    assert_eq!(r.change[1], 0.5);
    assert_eq!(r.change[2], 0.001);
}

/// Log-probabilities of one row that split `pa` and `pb` between two classes, the rest evenly.
fn row2(a: usize, pa: f32, b: usize, pb: f32) -> Vec<f32> {
    let rest = (1.0 - pa - pb) / (CHORD_CLASSES - 2) as f32;
    (0..CHORD_CLASSES)
        .map(|c| match c {
            _ if c == a => pa.ln(),
            _ if c == b => pb.ln(),
            _ => rest.ln(),
        })
        .collect()
}

#[test]
fn viterbi_changes_chords_where_a_pianist_would() {
    let c = chord_class(chord(0, Quality::Maj));
    let g = chord_class(chord(7, Quality::Maj));
    let decode = HarmonyDecode::default();
    // Beat 1 leans a little to G, the rest of the bar is C: the chord stays C.
    let mut lp = [
        row2(c, 0.8, g, 0.1),
        row2(g, 0.5, c, 0.4),
        row2(c, 0.6, g, 0.3),
        row2(c, 0.6, g, 0.3),
    ]
    .concat();
    assert_eq!(viterbi(&lp, &places(4), &decode, None), vec![c; 4]);
    // G clearly from beat 2 (the half bar): it changes there.
    lp = [
        row2(c, 0.8, g, 0.1),
        row2(c, 0.5, g, 0.4),
        row2(g, 0.8, c, 0.1),
        row2(g, 0.8, c, 0.1),
    ]
    .concat();
    assert_eq!(viterbi(&lp, &places(4), &decode, None), vec![c, c, g, g]);
    // The same lean to G on beat 1 alone does not move it off the bar's grid.
    lp = [
        row2(c, 0.6, g, 0.3),
        row2(g, 0.6, c, 0.3),
        row2(c, 0.6, g, 0.3),
        row2(c, 0.6, g, 0.3),
    ]
    .concat();
    assert_eq!(viterbi(&lp, &places(4), &decode, None), vec![c; 4]);
    // A flat distribution inside a bar, after a given chord, keeps it.
    let flat = vec![-(CHORD_CLASSES as f32).ln(); 2 * CHORD_CLASSES];
    let mid = BeatPlaces {
        in_bar: vec![1, 3],
        bar_beats: vec![4, 4],
    };
    assert_eq!(viterbi(&flat, &mid, &decode, Some(g)), vec![g, g]);
}

#[test]
fn viterbi_finds_the_best_path_of_all() {
    // Three beats with random log-probabilities: Viterbi's path scores as well as any of the
    // 169³ paths, checked by brute force over the likely ones.
    use rand::{RngExt, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let logits: Vec<f32> = (0..3 * CHORD_CLASSES)
        .map(|_| rng.random::<f32>() * 6.0)
        .collect();
    let lp = log_softmax_rows(&logits);
    let decode = HarmonyDecode {
        weight: 1.3,
        ..HarmonyDecode::default()
    };
    let p = BeatPlaces {
        in_bar: vec![3, 0, 1],
        bar_beats: vec![4; 3],
    };
    let emitted = decode.emissions(&lp);
    let score = |path: &[usize]| -> f32 {
        let mut s = 0.0;
        for (b, &c) in path.iter().enumerate() {
            s += emitted[b * CHORD_CLASSES + c];
            if b > 0 {
                let q = decode.rhythm.change[p.slot(b)].min(0.5);
                s += if path[b - 1] == c {
                    (1.0 - q).ln()
                } else {
                    q.ln()
                };
            }
        }
        s
    };
    let best = viterbi(&lp, &p, &decode, None);
    let mut brute = f32::NEG_INFINITY;
    for a in 0..CHORD_CLASSES {
        for b in 0..CHORD_CLASSES {
            for c in 0..CHORD_CLASSES {
                brute = brute.max(score(&[a, b, c]));
            }
        }
    }
    assert!(
        (score(&best) - brute).abs() < 1e-3,
        "{} vs {brute}",
        score(&best)
    );
    // path_score is that score, and with a chord before, its change or stay at the first beat.
    for path in [best.clone(), vec![0, 5, 5], vec![7, 7, 9]] {
        assert!((path_score(&lp, &p, &decode, None, &path) - score(&path)).abs() < 1e-4);
    }
    let stay = (1.0 - decode.rhythm.change[p.slot(0)].min(0.5)).ln();
    let with = path_score(&lp, &p, &decode, Some(best[0]), &best);
    assert!((with - score(&best) - stay).abs() < 1e-4);
}

/// Alternatives: the best progression first, then others that each differ from the rest on a
/// bar line or half bar in root or family; one seed, one list; a sure model has none.
#[test]
fn alternatives_start_with_the_best_and_differ_where_it_matters() {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    // Sixteen beats where a few chords are likely on each, so there are several good paths.
    let mut logits = vec![0f32; 16 * CHORD_CLASSES];
    for row in logits.chunks_mut(CHORD_CLASSES) {
        for _ in 0..4 {
            row[rng.random_range(1..CHORD_CLASSES)] = 4.0 + rng.random::<f32>() * 2.0;
        }
    }
    let lp = log_softmax_rows(&logits);
    let (p, decode) = (places(16), HarmonyDecode::default());
    let draws = |count, seed| Draws {
        count,
        temperature: 1.0,
        seed,
    };
    let alts = alternatives(&lp, &p, &decode, None, draws(6, 3));
    assert_eq!(alts.len(), 6);
    assert_eq!(alts[0].classes, viterbi(&lp, &p, &decode, None));
    let mut mass = 0f32;
    for a in &alts {
        assert_eq!(a.score, path_score(&lp, &p, &decode, None, &a.classes));
        assert!(a.score <= alts[0].score + 1e-4, "the best is best");
        // Log-probabilities under the decode: the same offset from every score, below 0.
        assert!((a.score - a.log_prob - (alts[0].score - alts[0].log_prob)).abs() < 1e-3);
        mass += a.log_prob.exp();
    }
    assert!(mass > 0.0 && mass < 1.0, "{mass}");
    let gist = |c: &[usize]| -> Vec<(u8, u8)> {
        (0..16)
            .filter(|&b| p.slot(b) < 2)
            .map(|b| class_chord(c[b]).map_or((99, 99), |ch| (ch.root, ch.quality.family() as u8)))
            .collect()
    };
    for i in 0..alts.len() {
        for j in 0..i {
            assert_ne!(
                gist(&alts[i].classes),
                gist(&alts[j].classes),
                "{i} and {j}"
            );
        }
    }
    assert_eq!(alts, alternatives(&lp, &p, &decode, None, draws(6, 3)));
    assert_eq!(alternatives(&lp, &p, &decode, None, draws(1, 3)), alts[..1]);
    // Chosen to cover: the first three of six are the three asked for alone.
    assert_eq!(alternatives(&lp, &p, &decode, None, draws(3, 3)), alts[..3]);
    // A model sure of one chord on every beat has no alternative to give.
    let sure = log_softmax_rows(
        &(0..8 * CHORD_CLASSES)
            .map(|i| if i % CHORD_CLASSES == 1 { 60.0 } else { 0.0 })
            .collect::<Vec<_>>(),
    );
    assert_eq!(
        alternatives(&sure, &places(8), &decode, None, draws(4, 0)).len(),
        1
    );
}

#[test]
fn the_causal_decision_reads_nothing_later() {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let mut logits: Vec<f32> = (0..12 * CHORD_CLASSES)
        .map(|_| rng.random::<f32>() * 5.0)
        .collect();
    let (p, decode) = (places(12), HarmonyDecode::default());
    let before = causal(&log_softmax_rows(&logits), &p, &decode);
    for x in &mut logits[8 * CHORD_CLASSES..] {
        *x = rng.random::<f32>() * 5.0;
    }
    let after = causal(&log_softmax_rows(&logits), &p, &decode);
    assert_eq!(before[..8], after[..8]);
}

#[test]
fn accuracy_and_measures_on_a_small_example() {
    let c = chord(0, Quality::Maj);
    let am = chord(9, Quality::Min);
    let a7 = chord(9, Quality::Min7);
    let reference = [c, c, am, None];
    let predicted = [c, am, a7, c];
    let acc = Accuracy::of(&predicted, &reference, 0..4);
    assert_eq!((acc.beats, acc.root, acc.family, acc.exact), (3, 2, 2, 1));

    // C E D G over C major, three sixteenths on each beat.
    let grid = Grid::quarters(480, 4 * 480, 4);
    let melody = PianoRoll::from_notes(
        &[
            note(72, 0, 360),
            note(76, 480, 840),
            note(74, 960, 1320),
            note(79, 1440, 1800),
        ],
        &grid,
    );
    let m = measures(&melody, &[c; 4], 4, 0..4).unwrap();
    // D is a non-chord tone, but G after it is five semitones away: not passing.
    assert!((m.ctnctr - 3.0 / 4.0).abs() < 1e-9);
    // PCS: per step, the mean over C, E and G of each interval's score.
    let per = |p: i32| {
        [0, 4, 7]
            .iter()
            .map(|q| match (p - q).rem_euclid(12) {
                0 | 3 | 4 | 7 | 8 | 9 => 1.0,
                5 => 0.0,
                _ => -1.0,
            })
            .sum::<f64>()
            / 3.0
    };
    let want = (per(0) + per(4) + per(2) + per(7)) / 4.0;
    assert!((m.pcs - want).abs() < 1e-9, "{} vs {want}", m.pcs);
    assert_eq!((m.cc, m.che, m.ctd, m.sus), (1.0, 0.0, 0.0, 0.0));
    let two = measures(&melody, &[c, c, am, am], 4, 0..4).unwrap();
    assert!((two.che - 2f64.ln()).abs() < 1e-9);
    assert!(two.ctd > 0.0);
    assert!(measures(&PianoRoll::new(16), &[c; 4], 4, 0..4).is_none());
    assert_eq!(agreement(&[c, am, c, am], 0, 2, 2), Some(1.0));
    assert_eq!(agreement(&[c, am, c, c], 0, 2, 2), Some(0.5));
    assert_eq!(agreement(&[None, None], 0, 1, 1), None);
}

#[test]
fn emissions_weigh_root_and_family_and_keep_the_quality() {
    // C, C7 and Cmaj7 share 0.6; Am alone has 0.4: at weight 1 the emissions are the
    // log-probabilities, at weight 2 C's family gains on Am while the qualities keep their
    // order within it.
    let class = |root, q| chord_class(chord(root, q));
    let (c, c7, cmaj7, am) = (
        class(0, Quality::Maj),
        class(0, Quality::Dom7),
        class(0, Quality::Maj7),
        class(9, Quality::Min),
    );
    let mut p = vec![1e-9f32; CHORD_CLASSES];
    p[c] = 0.25;
    p[c7] = 0.2;
    p[cmaj7] = 0.15;
    p[am] = 0.4;
    let lp: Vec<f32> = p.iter().map(|x| x.ln()).collect();
    let one = HarmonyDecode {
        weight: 1.0,
        ..HarmonyDecode::default()
    }
    .emissions(&lp);
    for (a, b) in one.iter().zip(&lp) {
        assert!((a - b).abs() < 1e-4);
    }
    let two = HarmonyDecode {
        weight: 2.0,
        ..HarmonyDecode::default()
    }
    .emissions(&lp);
    assert!(two[c] > two[c7] && two[c7] > two[cmaj7]);
    assert!((two[c] - two[c7] - (0.25f32 / 0.2).ln()).abs() < 1e-4);
    assert!((two[am] - 2.0 * 0.4f32.ln()).abs() < 1e-4);
    assert!((two[c] - (2.0 * 0.6f32.ln() + (0.25f32 / 0.6).ln())).abs() < 1e-4);
}

#[test]
fn tone_gains_choose_the_chord_whose_tones_are_surest() {
    // G 0.4, C 0.3, Am 0.3: G is the likeliest label, but C's tones (C and E in C and Am, G in
    // G and C) are the likeliest to be in the real chord. The tones objective picks C.
    let class = |root, q| chord_class(chord(root, q));
    let (g, c, am, em) = (
        class(7, Quality::Maj),
        class(0, Quality::Maj),
        class(9, Quality::Min),
        class(4, Quality::Min),
    );
    let mut p = vec![0f32; CHORD_CLASSES];
    p[g] = 0.4;
    p[c] = 0.3;
    p[am] = 0.3;
    let lp: Vec<f32> = p.iter().map(|x| x.max(1e-12).ln()).collect();
    let gains = tone_gains(&lp);
    assert!((gains[g] - 0.5).abs() < 1e-4, "G: {}", gains[g]);
    assert!((gains[c] - 1.9 / 3.0).abs() < 1e-4, "C: {}", gains[c]);
    assert!((gains[am] - 0.5).abs() < 1e-4, "Am: {}", gains[am]);
    assert!((gains[em] - 1.7 / 3.0).abs() < 1e-4, "Em: {}", gains[em]);
    assert!(gains[0] < 1e-6, "no chord gains its probability");
    let places = BeatPlaces {
        in_bar: vec![0],
        bar_beats: vec![4],
    };
    let likely = HarmonyDecode::default();
    assert_eq!(viterbi(&lp, &places, &likely, None), vec![g]);
    let tones = HarmonyDecode {
        tones: Some(4.0),
        ..likely
    };
    assert!(tones.check().is_ok());
    assert_eq!(viterbi(&lp, &places, &tones, None), vec![c]);
    // Draws keep the model's probabilities: over many seeds G is drawn most.
    let drawn: Vec<usize> = (0..200)
        .map(|s| sample(&lp, &places, &tones, None, 1.0, s)[0])
        .collect();
    let count = |x| drawn.iter().filter(|&&d| d == x).count();
    assert!(count(g) > count(c) && count(g) > count(am), "{drawn:?}");
    let bad = HarmonyDecode {
        tones: Some(0.0),
        ..likely
    };
    assert!(bad.check().unwrap_err().contains("tone weight"));
    // Scored against Am, C gets two of its three tones right.
    let a = Accuracy::of(&[chord(0, Quality::Maj)], &[chord(9, Quality::Min)], 0..1);
    assert!((a.tone_share() - 2.0 / 3.0).abs() < 1e-9 && a.root == 0);
}

/// An alternative's log-probability is its share of the decode's distribution: over every
/// progression of two beats, the shares sum to one.
#[test]
fn alternatives_log_probabilities_are_normalised() {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let logits: Vec<f32> = (0..2 * CHORD_CLASSES)
        .map(|_| rng.random::<f32>() * 5.0)
        .collect();
    let lp = log_softmax_rows(&logits);
    let (p, decode) = (places(2), HarmonyDecode::default());
    let draws = Draws {
        count: 1,
        temperature: 1.0,
        seed: 0,
    };
    let best = &alternatives(&lp, &p, &decode, Some(7), draws)[0];
    let log_z = best.score - best.log_prob;
    let mut total = 0f64;
    for a in 0..CHORD_CLASSES {
        for b in 0..CHORD_CLASSES {
            total += f64::from(path_score(&lp, &p, &decode, Some(7), &[a, b]) - log_z).exp();
        }
    }
    assert!((total - 1.0).abs() < 1e-3, "{total}");
}

/// The colourful end keeps the plain progression's harmonic rhythm and draws each stretch's
/// chord again from the chords that fit the whole stretch: draws change chord only where the
/// plain one does, leave its silent stretches silent, pick the chords that fit, and a cold
/// one gives the plain progression back.
#[test]
fn a_recoloured_progression_keeps_the_plain_one_s_rhythm() {
    let (c, am) = (
        chord_class(chord(0, Quality::Maj)),
        chord_class(chord(9, Quality::Min)),
    );
    let (f, g) = (
        chord_class(chord(5, Quality::Maj)),
        chord_class(chord(7, Quality::Maj)),
    );
    // Two bars: C (or Am) for a bar, F (or G) for a bar, then a bar with no chord; the two
    // likeliest chords of each hold 0.9 of it, the rest share 0.1.
    let mut rows = Vec::new();
    for _ in 0..4 {
        rows.extend(row2(c, 0.5, am, 0.4));
    }
    for _ in 0..4 {
        rows.extend(row2(f, 0.5, g, 0.4));
    }
    for _ in 0..4 {
        rows.extend(row2(0, 0.9, c, 0.05));
    }
    let p = places(12);
    let decode = HarmonyDecode::default();
    let plain = viterbi(&rows, &p, &decode, None);
    assert_eq!(plain, [[c; 4], [f; 4], [0; 4]].concat());
    let mut seen = std::collections::HashSet::new();
    for seed in 0..60 {
        let drawn = recolour(&rows, &decode, &plain, 0.5, seed);
        let (first, second) = (drawn[0], drawn[4]);
        assert!(
            drawn[..4].iter().all(|&k| k == first),
            "seed {seed}: {drawn:?}"
        );
        assert!(
            drawn[4..8].iter().all(|&k| k == second),
            "seed {seed}: {drawn:?}"
        );
        assert_eq!(drawn[8..], [0; 4], "silence stays silent");
        assert!(
            [c, am].contains(&first) && [f, g].contains(&second),
            "{drawn:?}"
        );
        seen.insert((first, second));
    }
    assert_eq!(
        seen.len(),
        4,
        "every pair of the likely chords is drawn: {seen:?}"
    );
    assert_eq!(recolour(&rows, &decode, &plain, 0.01, 3), plain);
    // Hot, the long tail of unlikely chords (0.1 shared by 167) takes over.
    let wild = (0..20).filter(|&seed| {
        let d = recolour(&rows, &decode, &plain, 3.0, seed);
        ![c, am].contains(&d[0])
    });
    assert!(wild.count() > 10);
}
