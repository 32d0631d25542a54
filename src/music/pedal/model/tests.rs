use super::*;
use crate::music::chords::Chord;
use crate::music::fixtures;
use crate::music::phrases::Segment;

/// The fixture song (I–V–vi–IV a bar, block chords twice a bar) on its grid: the grid, the
/// lanes (the progression, one 8-bar phrase) and the piano and melody rolls.
pub(crate) fn fixture() -> (Grid, StepLabels, PianoRoll, PianoRoll) {
    let song = fixtures::song(0, 8);
    let grid = Grid::for_song(&song, 4);
    let roll = |i: usize| PianoRoll::from_notes(&song.tracks[i].notes, &grid);
    let (melody, piano) = (roll(0), roll(1));
    let names = ["C", "G", "Am", "F"];
    let beats: Vec<Option<Chord>> = (0..grid.num_beats())
        .map(|b| Chord::parse_any(names[(b / 4) % 4]).unwrap())
        .collect();
    let phrases = [Segment {
        start_bar: 0,
        bars: 8,
        letter: 'A',
    }];
    let labels = StepLabels::new(&grid, &melody, &beats, &phrases);
    (grid, labels, piano, melody)
}

#[test]
fn presses_are_matched_once_within_the_tolerance() {
    assert_eq!(press_f1(&[], &[], 2), None);
    let (p, r, f) = press_f1(&[0, 10, 21, 40], &[1, 11, 12, 24], 2).unwrap();
    // 0↔1, 10↔11; 21 is 3 from 24 (too far) and 12 is taken by nobody.
    assert!((p - 0.5).abs() < 1e-9 && (r - 0.5).abs() < 1e-9 && (f - 0.5).abs() < 1e-9);
    // One press cannot answer two of the pianist's.
    let (_, r, _) = press_f1(&[5], &[4, 6], 2).unwrap();
    assert!((r - 0.5).abs() < 1e-9);
    assert_eq!(press_f1(&[3], &[], 2).unwrap().2, 0.0);
}

#[test]
fn the_rule_changes_the_pedal_at_every_chord_change() {
    let (grid, labels, ..) = fixture();
    let events = chord_change_rule(&grid, &labels, 0..grid.num_steps());
    let presses = press_steps(&grid, &events, u64::MAX);
    assert_eq!(presses, (0..8).map(|b| b * 16).collect::<Vec<_>>());
    // Lifted at the change, pressed a 64th later; lifted at the end.
    assert_eq!(
        &events[..4],
        &[(0, 64, 127), (1920, 64, 0), (1950, 64, 127), (3840, 64, 0)]
    );
    assert_eq!(
        events.last(),
        Some(&(grid.tick_at(grid.num_steps()), 64, 0))
    );
}

/// A pianist who changes the pedal at every bar's chord and lifts in the last bar: the fit
/// learns to press where the pianist did, and holds the pedal down as long.
/// The fixture's pianist: a change at every bar's chord, lifted over the last bar.
pub(crate) fn fixture_pianist(grid: &Grid, labels: &StepLabels) -> Vec<(u64, u8, u8)> {
    let mut pianist = chord_change_rule(grid, labels, 0..7 * 16);
    pianist.retain(|e| e.0 < grid.tick_at(7 * 16)); // up over the last bar
    pianist.push((grid.tick_at(7 * 16), 64, 0));
    pianist
}

#[test]
fn a_fitted_pedal_presses_where_the_pianist_did() {
    let (grid, labels, piano, melody) = fixture();
    let n = grid.num_steps();
    let pianist = fixture_pianist(&grid, &labels);
    let (press, down) = pianist_steps(&grid, &pianist, grid.tick_at(n));
    assert_eq!(press.iter().filter(|&&p| p).count(), 7);
    let steps = Steps::new(&grid, &labels, &piano, &melody);
    assert_eq!(steps.len(), n);
    for (context, link) in [(0, Link::Linear), (1, Link::Linear), (0, Link::Logistic)] {
        let mut fit = Fit::new(context, link, false);
        fit.add(&steps, 0..n, &press, &down);
        let model = fit.solve(1e-3).unwrap();
        let back = PedalModel::from_json(&serde_json::to_string(&model).unwrap()).unwrap();
        let events = model.pedal(&steps, &grid, 0..n);
        assert_eq!(
            back.pedal(&steps, &grid, 0..n),
            events,
            "the shipped JSON plays the same"
        );
        let found = press_steps(&grid, &events, grid.tick_at(n));
        let wanted = press_steps(&grid, &pianist, grid.tick_at(n));
        let (_, _, f1) = press_f1(&found, &wanted, 2).unwrap();
        assert!(
            f1 > 0.9,
            "context {context}, {link:?}: F1 {f1}, {found:?} against {wanted:?}"
        );
    }
    let bad = r#"{"features":["bias"],"context":0,"press":[1],"down":[1],"press_threshold":0.5,"down_threshold":0.5}"#;
    assert!(
        PedalModel::from_json(bad)
            .unwrap_err()
            .contains("fit it again")
    );
}

/// A hidden layer is read as its units after a 1, rectified; a shipped one must fit the
/// features it reads and be read by logistic scores.
#[test]
fn a_hidden_layer_is_checked_and_read_as_rectified_units() {
    let hidden = Hidden {
        units: 2,
        weights: vec![1.0, -1.0, 0.5, 0.5],
        bias: vec![0.0, -1.0],
    };
    assert_eq!(hidden.units(&[2.0, 1.0]), vec![1.0, 1.0, 0.5]);
    assert_eq!(hidden.units(&[0.0, 1.0]), vec![1.0, 0.0, 0.0]);
    let k = FEATURES.len();
    let model = PedalModel {
        features: FEATURES.iter().map(|s| s.to_string()).collect(),
        context: 0,
        press: vec![0.0; 4],
        down: vec![0.0; 4],
        press_threshold: 0.5,
        down_threshold: 0.5,
        link: Link::Logistic,
        hidden: Some(Hidden {
            units: 3,
            weights: vec![0.1; 3 * k],
            bias: vec![0.0; 3],
        }),
        causal: false,
    };
    let text = serde_json::to_string(&model).unwrap();
    assert_eq!(PedalModel::from_json(&text).unwrap(), model);
    for broken in [
        PedalModel {
            link: Link::Linear,
            ..model.clone()
        },
        PedalModel {
            press: vec![0.0; 3],
            ..model.clone()
        },
        PedalModel {
            hidden: Some(Hidden {
                units: 3,
                weights: vec![0.1; 3 * k - 1],
                bias: vec![0.0; 3],
            }),
            ..model.clone()
        },
    ] {
        let text = serde_json::to_string(&broken).unwrap();
        assert!(
            PedalModel::from_json(&text)
                .unwrap_err()
                .contains("fit it again")
        );
    }
    // Without a hidden layer the field is not written: shipped models read as before.
    let plain = PedalModel {
        hidden: None,
        link: Link::Linear,
        press: vec![0.0; k],
        down: vec![0.0; k],
        ..model
    };
    assert!(!serde_json::to_string(&plain).unwrap().contains("hidden"));
}

/// A causal reading gives a step only what a live take knows when it decides it: nothing of
/// later chords or of the piano's next beat, the melody of the step before; and any stretch
/// read alone gives its steps the features the whole song's causal reading gives them.
#[test]
fn a_causal_reading_knows_only_the_past_and_any_stretch_reads_as_the_whole() {
    let (grid, labels, piano, melody) = fixture();
    let n = grid.num_steps();
    let whole = Steps::causal(&grid, &labels, (&piano, &melody), 0..n);
    assert!(whole.is_causal() && whole.len() == n);
    let later = [
        "the chord changes a step later",
        "the chord changes two steps later",
    ];
    for (i, name) in FEATURES.iter().enumerate() {
        let looks_ahead =
            later.contains(name) || *name == "nothing of the piano starts in the next beat";
        if looks_ahead {
            assert!(
                (0..n).all(|s| whole.row(s, 0)[i] == 0.0),
                "{name} reads nothing"
            );
        }
    }
    // The melody's onset is read a step late.
    let onset = FEATURES
        .iter()
        .position(|f| *f == "a melody onset here")
        .unwrap();
    let read = Steps::new(&grid, &labels, &piano, &melody);
    for s in 1..n {
        assert_eq!(
            whole.row(s, 0)[onset],
            read.row(s - 1, 0)[onset],
            "step {s}"
        );
    }
    // The context reaches back only: step s's row with context 2 is steps s-2, s-1, s.
    let row = whole.row(40, 2);
    assert_eq!(row.len(), 3 * FEATURES.len());
    assert_eq!(&row[2 * FEATURES.len()..], &whole.row(40, 0)[..]);
    assert_eq!(&row[..FEATURES.len()], &whole.row(38, 0)[..]);
    for (a, b) in [(0, 5), (17, 18), (40, 77), (61, n)] {
        let part = Steps::causal(&grid, &labels, (&piano, &melody), a..b);
        for s in a..b {
            assert_eq!(
                part.row(s, 0),
                whole.row(s, 0),
                "stretch {a}..{b}, step {s}"
            );
        }
        assert!(part.row(a.saturating_sub(1), 0).iter().all(|&v| v == 0.0) || a == 0);
    }
}

/// A causal model learns the fixture's pianist as well (its changes fall on the chord lane's,
/// known at the step), and played a few steps at a time as a live take asks, it pedals as it
/// pedals the whole part; a whole-song model is refused for a live take in words.
#[test]
fn a_causal_pedal_presses_where_the_pianist_did_and_streams_as_the_whole() {
    let (grid, labels, piano, melody) = fixture();
    let n = grid.num_steps();
    let pianist = fixture_pianist(&grid, &labels);
    let (press, down) = pianist_steps(&grid, &pianist, grid.tick_at(n));
    let steps = Steps::causal(&grid, &labels, (&piano, &melody), 0..n);
    let mut fit = Fit::new(1, Link::Linear, true);
    fit.add(&steps, 0..n, &press, &down);
    let model = fit.solve(1e-3).unwrap();
    assert!(model.causal && model.press.len() == 2 * FEATURES.len());
    let back = PedalModel::from_json(&serde_json::to_string(&model).unwrap()).unwrap();
    assert!(back.causal, "read back as causal");
    let from = 5;
    let events = model.pedal(
        &Steps::for_model(&model, &grid, &labels, (&piano, &melody)),
        &grid,
        from..n,
    );
    let found = press_steps(&grid, &events, grid.tick_at(n));
    let wanted: Vec<usize> = press_steps(&grid, &pianist, grid.tick_at(n))
        .into_iter()
        .filter(|&s| s >= from)
        .collect();
    let (_, _, f1) = press_f1(&found, &wanted, 2).unwrap();
    assert!(f1 > 0.9, "F1 {f1}, {found:?} against {wanted:?}");
    let read = Steps::for_model(&back, &grid, &labels, (&piano, &melody));
    assert_eq!(back.pedal(&read, &grid, from..n), events);
    for chunk in [1, 3, 7] {
        let mut stream = PedalStream::new(model.clone(), from).unwrap();
        let mut moves = Vec::new();
        let mut at = from;
        while at < n {
            at = (at + chunk).min(n);
            moves.extend(stream.advance(&grid, &labels, (&piano, &melody), at));
        }
        assert!(moves.iter().all(|&(s, tick, _)| grid.step_at(tick) == s));
        assert_eq!(stream.events(&grid, n), events, "{chunk} steps at a time");
    }
    let whole = Fit::new(0, Link::Linear, false);
    let mut whole = whole;
    whole.add(
        &Steps::new(&grid, &labels, &piano, &melody),
        0..n,
        &press,
        &down,
    );
    let err = PedalStream::new(whole.solve(1e-3).unwrap(), 0).unwrap_err();
    assert!(err.contains("--causal"), "{err}");
}
