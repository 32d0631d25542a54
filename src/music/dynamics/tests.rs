use super::*;
use crate::music::midi::Note;
use crate::music::phrases::Segment;

/// Four bars of 4/4 at 480 ticks a quarter, four steps a beat, with the melody and piano given
/// as (pitch, start step, steps, velocity).
fn song(
    melody: &[(u8, u64, u64, u8)],
    piano: &[(u8, u64, u64, u8)],
) -> (Grid, StepLabels, PianoRoll, PianoRoll) {
    let grid = Grid::quarters(480, 16 * 480, 4);
    let notes = |list: &[(u8, u64, u64, u8)]| -> Vec<Note> {
        list.iter()
            .map(|&(pitch, start, steps, velocity)| Note {
                pitch,
                velocity,
                start: start * 120,
                end: (start + steps) * 120,
                channel: 0,
            })
            .collect()
    };
    let melody = PianoRoll::from_notes(&notes(melody), &grid);
    let piano = PianoRoll::from_notes(&notes(piano), &grid);
    let phrases = [
        Segment {
            start_bar: 0,
            bars: 2,
            letter: 'A',
        },
        Segment {
            start_bar: 2,
            bars: 2,
            letter: 'o',
        },
    ];
    let labels = StepLabels::new(&grid, &melody, &[], &phrases);
    (grid, labels, melody, piano)
}

#[test]
fn places_in_the_bar() {
    let (grid, labels, melody, _) = song(&[], &[]);
    let ctx = Context::new(&grid, &labels, &melody);
    // downbeat on, eighth off, sixteenth off; beat 3 of 4 (half bar); beats 2 and 4.
    for (step, place) in [
        (0, 0),
        (2, 1),
        (1, 2),
        (3, 2),
        (8, 3),
        (10, 4),
        (9, 5),
        (4, 6),
        (14, 7),
        (13, 8),
        (16, 0),
    ] {
        assert_eq!(ctx.place(step), place, "step {step}");
    }
}

#[test]
fn features_read_the_melody_phrase_and_chord() {
    // The melody is loud in bar 0 (100), soft in bar 1 (60): the song's mean is 80.
    let (grid, labels, melody, piano) = song(
        &[
            (72, 0, 4, 100),
            (74, 4, 4, 100),
            (72, 16, 4, 60),
            (71, 20, 4, 60),
        ],
        &[
            (48, 0, 8, 70),
            (55, 0, 8, 70),
            (60, 0, 8, 70),
            (52, 18, 1, 70),
            (50, 40, 4, 70),
        ],
    );
    let ctx = Context::new(&grid, &labels, &melody);
    let rows = ctx.rows(&piano, 0..grid.num_steps());
    assert_eq!(rows.len(), 5);
    let (o, x) = &rows[2];
    assert_eq!((o.step, o.pitch), (0, 60));
    assert_eq!(x[0], 1.0);
    assert!(
        x[1..9].iter().all(|&f| f == 0.0),
        "a downbeat is the baseline place"
    );
    assert_eq!(x[9], (100.0 - 80.0) / 16.0, "the melody is loud here");
    assert_eq!(x[10], 0.0);
    assert_eq!(x[12], 1.0, "a melody onset on this step");
    assert_eq!(
        (x[14], x[15], x[17], x[18]),
        (1.0, 0.0, 0.0, 0.0),
        "first bar of an A phrase"
    );
    assert_eq!(x[19], 2.0 / 3.0, "three notes struck together");
    assert_eq!((x[20], x[21]), (1.0, 0.0), "the top of them");
    assert_eq!(x[22], 0.0);
    assert_eq!(x[23], 3.0, "eight sixteenths long");
    assert_eq!(rows[0].1[21], 1.0, "the bottom of them");
    let (o, x) = &rows[3];
    assert_eq!(o.step, 18);
    assert_eq!(x[1], 1.0, "an eighth off the downbeat");
    assert_eq!(x[9], (60.0 - 80.0) / 16.0, "the melody is soft here");
    assert_eq!(
        (x[15], x[16]),
        (1.0, 0.5),
        "last bar of the phrase, half way"
    );
    assert_eq!(x[23], 0.0, "a sixteenth long");
    let (_, x) = &rows[4];
    assert_eq!(x[17], 1.0, "an outro");
    assert_eq!(x[11], 1.0, "no melody in bar 2");
    assert_eq!(x[9], (60.0 - 80.0) / 16.0, "the melody near it: bar 1's");
    assert_eq!(
        ctx.rows(&piano, 1..grid.num_steps()).len(),
        2,
        "only onsets in the region"
    );
}

#[test]
fn least_squares_recovers_the_weights_it_was_made_with() {
    let mut rng = StdRng::seed_from_u64(1);
    let truth: Vec<f64> = (0..D).map(|i| (i as f64 * 0.37).sin() * 10.0).collect();
    let mut fit = Fit::default();
    for _ in 0..2000 {
        let mut x = [0.0; D];
        x[0] = 1.0;
        for f in x.iter_mut().skip(1) {
            *f = rng.random::<f64>() * 2.0 - 1.0;
        }
        let y: f64 = truth.iter().zip(&x).map(|(w, x)| w * x).sum();
        fit.add(&x, y + 0.5 * normal(&mut rng));
    }
    let d = fit.solve(1e-6).unwrap();
    for (w, t) in d.weights.iter().zip(&truth) {
        assert!((w - t).abs() < 0.1, "{w} against {t}");
    }
    assert!((d.residual - 0.5).abs() < 0.05, "residual {}", d.residual);
    let few = Fit::default();
    assert!(few.solve(1.0).unwrap_err().contains("too few"));
}

#[test]
fn velocities_follow_the_model_in_the_region_only_and_the_seed() {
    let (grid, labels, melody, mut piano) = song(
        &[(72, 0, 4, 90)],
        &[(48, 0, 4, 70), (52, 4, 4, 70), (55, 32, 4, 70)],
    );
    let ctx = Context::new(&grid, &labels, &melody);
    let mut weights = vec![0.0; D];
    weights[0] = 64.0;
    weights[6] = 10.0; // other beats, on the beat
    let mut d = Dynamics {
        features: FEATURES.iter().map(|s| s.to_string()).collect(),
        weights,
        residual: 8.0,
        spread: None,
        noise: 0.0,
    };
    d.apply(&ctx, &mut piano, 0..16, 3);
    assert_eq!(piano.velocity(0, 48), 64);
    assert_eq!(piano.velocity(4, 52), 74, "beat 2 of the bar");
    assert_eq!(piano.velocity(32, 55), 70, "outside the region: as it was");
    assert_eq!(piano.velocity(1, 48), 0, "no onset, no velocity");
    d.noise = 1.0;
    let a = d.velocities(&ctx, &piano, 0..64, 7);
    assert_eq!(a, d.velocities(&ctx, &piano, 0..64, 7));
    assert_ne!(a, d.velocities(&ctx, &piano, 0..64, 8));
    let json = serde_json::to_string(&d).unwrap();
    assert_eq!(Dynamics::from_json(&json).unwrap(), d);
    let mut other = d.clone();
    other.features[3] = "something else".into();
    let err = Dynamics::from_json(&serde_json::to_string(&other).unwrap()).unwrap_err();
    assert!(err.contains("other features"), "{err}");
    assert!(Dynamics::from_json("{").unwrap_err().contains("malformed"));
}

#[test]
fn measures_spread_accents_and_following_the_melody() {
    // The piano plays each beat; downbeats 20 louder; the melody's loudness per bar rises and
    // the piano's with it.
    let mut melody = Vec::new();
    let mut piano = Vec::new();
    for bar in 0..4u64 {
        melody.push((72, bar * 16, 16, 60 + 10 * bar as u8));
        for beat in 0..4u64 {
            piano.push((
                48,
                bar * 16 + beat * 4,
                4,
                50 + 5 * bar as u8 + if beat == 0 { 20 } else { 0 },
            ));
        }
    }
    let (grid, labels, melody, piano) = song(&melody, &piano);
    let ctx = Context::new(&grid, &labels, &melody);
    let played: Vec<(Onset, u8)> = onsets(&piano)
        .into_iter()
        .map(|o| (o, o.velocity))
        .collect();
    let m = ctx.measure(&played);
    assert_eq!(m.onsets, 16);
    assert!((m.mean - (50.0 + 7.5 + 5.0)).abs() < 1e-9, "{}", m.mean);
    assert!(m.melody_corr.unwrap() > 0.99);
    let [down, half, other, eighth, sixteenth] = m.accents;
    assert!((down.unwrap() - 15.0).abs() < 1e-9, "{down:?}");
    assert!((half.unwrap() + 5.0).abs() < 1e-9 && (other.unwrap() + 5.0).abs() < 1e-9);
    assert_eq!((eighth, sixteenth), (None, None));
    assert_eq!(ctx.measure(&[]), Measure::default());
}

#[test]
fn a_song_spreads_as_its_melody_does() {
    // One melody even (every onset 90), one wide (60 and 100 in turn).
    let even: Vec<_> = (0..8u64).map(|i| (72u8, i * 8, 4, 90u8)).collect();
    let wide: Vec<_> = (0..8u64)
        .map(|i| (72u8, i * 8, 4, if i % 2 == 0 { 60 } else { 100 }))
        .collect();
    let (grid, labels, melody_even, _) = song(&even, &[]);
    let (_, labels_wide, melody_wide, _) = song(&wide, &[]);
    let even_ctx = Context::new(&grid, &labels, &melody_even);
    let wide_ctx = Context::new(&grid, &labels_wide, &melody_wide);
    let mut d = Dynamics {
        features: FEATURES.iter().map(|s| s.to_string()).collect(),
        weights: vec![0.0; D],
        residual: 8.0,
        noise: 1.0,
        spread: None,
    };
    assert_eq!(d.song_spread(&even_ctx), 8.0);
    d.spread = Some([2.0, 0.5]);
    assert_eq!(d.song_spread(&even_ctx), 2.0);
    assert_eq!(d.song_spread(&wide_ctx), 2.0 + 0.5 * 20.0);
    // Fitted: pianos whose residual follows the melodies' spread exactly (velocities 64 ± k
    // against a model predicting 64) give the line through them.
    d.weights[0] = 64.0;
    let pianos: Vec<PianoRoll> = [4u8, 14]
        .iter()
        .map(|&k| {
            let notes: Vec<_> = (0..8u64)
                .map(|i| (48u8, i * 8, 4, if i % 2 == 0 { 64 - k } else { 64 + k }))
                .collect();
            song(&[], &notes).3
        })
        .collect();
    let third: Vec<_> = (0..8u64)
        .map(|i| (72u8, i * 8, 4, if i % 2 == 0 { 70 } else { 90 }))
        .collect();
    let (_, labels_third, melody_third, _) = song(&third, &[]);
    let third_ctx = Context::new(&grid, &labels_third, &melody_third);
    let notes: Vec<_> = (0..8u64)
        .map(|i| (48u8, i * 8, 4, if i % 2 == 0 { 55 } else { 73 }))
        .collect();
    let third_piano = song(&[], &notes).3;
    d.fit_spread([
        (&even_ctx, &pianos[0]),
        (&wide_ctx, &pianos[1]),
        (&third_ctx, &third_piano),
    ]);
    let [a, b] = d.spread.unwrap();
    // Melody spreads 0, 20, 10 against residuals 4, 14, 9: the line 4 + 0.5 × spread.
    assert!((a - 4.0).abs() < 1e-9 && (b - 0.5).abs() < 1e-9, "{a} {b}");
}
