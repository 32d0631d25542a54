use super::*;

/// Four bars of `bar`'s notes (pitch, sixteenth, steps), repeated.
fn four(bar: &[(usize, usize, usize)]) -> PianoRoll {
    let mut roll = PianoRoll::new(BARS * BAR);
    for k in 0..BARS {
        for &(p, i, len) in bar {
            let t = k * BAR + i;
            roll.set(t, p, true, true, 0);
            for s in t + 1..(t + len).min(roll.num_steps) {
                roll.set(s, p, false, true, 0);
            }
        }
    }
    roll
}

fn textures() -> Vec<(Kind, PianoRoll)> {
    let chord = |i: usize, len: usize| [(60, i, len), (64, i, len), (67, i, len)];
    let ballad = four(&[(36, 0, 16), (60, 0, 8), (64, 0, 8), (67, 8, 8)]);
    let arpeggio = four(
        &[36, 43, 48, 52, 55, 60, 64, 60, 55, 52, 48, 43]
            .iter()
            .enumerate()
            .map(|(k, &p)| (p, k, 1))
            .collect::<Vec<_>>(),
    );
    let mut block = vec![(36, 0, 8)];
    for i in [0, 4, 8, 12] {
        block.extend(chord(i, 4));
    }
    let mut stride = vec![(36, 0, 4), (43, 8, 4)];
    stride.extend(chord(4, 4));
    stride.extend(chord(12, 4));
    let mut syncopated = vec![(36, 0, 6)];
    for i in [6, 10, 14] {
        syncopated.extend(chord(i, 2));
    }
    vec![
        (Kind::Ballad, ballad),
        (Kind::Arpeggio, arpeggio),
        (Kind::Block, four(&block)),
        (Kind::Stride, four(&stride)),
        (Kind::Syncopated, four(&syncopated)),
    ]
}

#[test]
fn each_texture_fits_its_own_rule_best() {
    for (kind, roll) in textures() {
        let fits: Vec<(Kind, f64)> = Kind::ALL
            .iter()
            .map(|&k| (k, window_fit(&roll, 0, k)))
            .collect();
        let own = window_fit(&roll, 0, kind);
        assert!(own > 0.5, "{kind:?} fits its rule: {fits:?}");
        for (k, f) in &fits {
            if *k != kind {
                assert!(*f < own, "{kind:?} fits {k:?} less than its own: {fits:?}");
            }
        }
    }
}

#[test]
fn a_window_that_changes_from_bar_to_bar_is_no_texture() {
    let (_, block) = &textures()[2];
    let (_, arpeggio) = &textures()[1];
    // Block, arpeggio, block, arpeggio: each bar fits one rule, the four are not one pattern.
    let mut roll = PianoRoll::new(BARS * BAR);
    for k in 0..BARS {
        let from = if k % 2 == 0 { block } else { arpeggio };
        for i in 0..BAR {
            for p in 0..PITCHES {
                roll.set(k * BAR + i, p, from.onset(i, p), from.sustain(i, p), 0);
            }
        }
    }
    assert!(steadiness(&roll, 0) < STEADY, "{}", steadiness(&roll, 0));
    for kind in Kind::ALL {
        assert_eq!(window_fit(&roll, 0, kind), 0.0, "{kind:?}");
    }
}
