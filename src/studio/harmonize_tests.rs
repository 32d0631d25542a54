//! "Suggest chords" and the lane of a melody-only piece, with a tiny untrained harmonizer:
//! cells for exactly the bars asked for, the same for the same seed, refusals in words.

use burn::tensor::Device;
use pollster::block_on;

use crate::generate::harmonize::tests::{melody_only, tiny};
use crate::model::config::Direction;
use crate::model::pe::{PeConfig, PeKind};
use crate::model::performer::Performer;
use crate::music::chords::Chord;
use crate::music::fixtures;
use crate::music::harmony::decode::HarmonyDecode;
use crate::music::piece::{Piece, TrackRole};
use crate::studio::{HarmonizeOptions, HarmonyCache, harmonize_piece, needs_harmonizer};

/// An untrained tiny bidirectional harmonizer.
fn harmonizer(device: &Device) -> Performer {
    let config = tiny(PeConfig::new(PeKind::SineSpe), Direction::Bidirectional);
    Performer::new(&config, 1, device).unwrap()
}

#[test]
fn suggested_chords_fill_the_bars_asked_for() {
    let device = Device::flex();
    let model = harmonizer(&device);
    let decode = HarmonyDecode::default();
    let full = Piece::from_song(&fixtures::song(0, 8), "full.mid").unwrap();
    assert!(
        !needs_harmonizer(&full),
        "a piano plays: the detector's lane stands"
    );
    let piece = Piece::from_song(&melody_only(0, 8), "tune.mid").unwrap();
    assert!(needs_harmonizer(&piece));
    let mut cache = HarmonyCache::default();
    let all = block_on(harmonize_piece(
        &model,
        &decode,
        &piece,
        &HarmonizeOptions::default(),
        &mut cache,
    ))
    .unwrap();
    assert_eq!((all.from, all.cells.len()), (0, 8));
    assert!(
        all.cells
            .iter()
            .all(|c| Chord::parse_any(c.split_whitespace().next().unwrap_or("N")).is_ok())
    );
    let some = HarmonizeOptions {
        bars: Some([2, 5]),
        seed: Some(4),
        ..Default::default()
    };
    let part = block_on(harmonize_piece(&model, &decode, &piece, &some, &mut cache)).unwrap();
    assert_eq!((part.from, part.cells.len()), (2, 3));
    let again = block_on(harmonize_piece(&model, &decode, &piece, &some, &mut cache)).unwrap();
    assert_eq!(part, again, "one seed, one progression");
    // The kept probabilities decode as a fresh read does; another melody is read afresh.
    let fresh = block_on(harmonize_piece(
        &model,
        &decode,
        &piece,
        &some,
        &mut HarmonyCache::default(),
    ))
    .unwrap();
    assert_eq!(part, fresh, "kept probabilities, the same progression");
    let other = Piece::from_song(&melody_only(5, 8), "other.mid").unwrap();
    let moved = block_on(harmonize_piece(&model, &decode, &other, &some, &mut cache)).unwrap();
    let moved_fresh = block_on(harmonize_piece(
        &model,
        &decode,
        &other,
        &some,
        &mut HarmonyCache::default(),
    ))
    .unwrap();
    assert_eq!(
        moved, moved_fresh,
        "a new melody is not read from the old one's"
    );
    // Bars past the melody, or no melody at all, are refused in words.
    let far = HarmonizeOptions {
        bars: Some([40, 44]),
        seed: None,
        ..Default::default()
    };
    let err = block_on(harmonize_piece(&model, &decode, &piece, &far, &mut cache)).unwrap_err();
    assert!(err.to_string().contains("no bars of the melody"), "{err}");
    let mut silent = piece.clone();
    for t in silent.tracks.iter_mut() {
        t.role = TrackRole::Other;
    }
    let err = block_on(harmonize_piece(
        &model,
        &decode,
        &silent,
        &HarmonizeOptions::default(),
        &mut cache,
    ))
    .unwrap_err();
    assert!(
        err.to_string().contains("no track is marked as the melody"),
        "{err}"
    );
}

/// Alternatives for bars 3–6: the most likely first (the cells a single suggestion gives),
/// each with its log-probability and block chords on exactly those bars' beats to audition;
/// a count out of range is refused in words.
#[test]
fn suggested_alternatives_come_with_their_probability_and_voicing() {
    let device = Device::flex();
    let model = harmonizer(&device);
    let decode = HarmonyDecode::default();
    let piece = Piece::from_song(&melody_only(0, 8), "tune.mid").unwrap();
    let mut cache = HarmonyCache::default();
    let bars = Some([2, 6]);
    let one = block_on(harmonize_piece(
        &model,
        &decode,
        &piece,
        &HarmonizeOptions {
            bars,
            ..Default::default()
        },
        &mut cache,
    ))
    .unwrap();
    let four = block_on(harmonize_piece(
        &model,
        &decode,
        &piece,
        &HarmonizeOptions {
            bars,
            count: Some(4),
            ..Default::default()
        },
        &mut cache,
    ))
    .unwrap();
    assert!(!four.alternatives.is_empty() && four.alternatives.len() <= 4);
    assert_eq!(four.cells, one.cells, "the first is the most likely");
    assert_eq!(four.alternatives[0].cells, one.cells);
    let grid = piece.grid(|t| matches!(t.role, TrackRole::Melody | TrackRole::Bridge));
    let (start, end) = (
        grid.beat_ticks[grid.bar_beats(2).start],
        grid.beat_ticks[grid.bar_beats(5).end],
    );
    for (i, a) in four.alternatives.iter().enumerate() {
        assert_eq!(a.cells.len(), 4);
        assert!(a.log_prob < 0.0 && a.log_prob <= four.alternatives[0].log_prob);
        assert!(!a.voicing.is_empty(), "alternative {i} sounds");
        for &(pitch, on, off, _) in &a.voicing {
            assert!((48..72).contains(&pitch) && start <= on && on < off && off <= end);
        }
        if i > 0 {
            assert_ne!(a.cells, four.alternatives[0].cells);
        }
    }
    let err = block_on(harmonize_piece(
        &model,
        &decode,
        &piece,
        &HarmonizeOptions {
            count: Some(9),
            ..Default::default()
        },
        &mut cache,
    ))
    .unwrap_err();
    assert!(err.to_string().contains("1 to 8"), "{err}");
}

/// The chord colour: 0 is the most likely progression whatever the seed; out of 0–1 it is
/// refused in words.
#[test]
fn a_plain_colour_suggests_the_most_likely_progression() {
    let device = Device::flex();
    let model = harmonizer(&device);
    let decode = HarmonyDecode::default();
    let piece = Piece::from_song(&melody_only(0, 8), "tune.mid").unwrap();
    let mut cache = HarmonyCache::default();
    let mut ask = |seed, colour| {
        block_on(harmonize_piece(
            &model,
            &decode,
            &piece,
            &HarmonizeOptions {
                seed,
                colour,
                ..Default::default()
            },
            &mut cache,
        ))
    };
    let best = ask(None, None).unwrap();
    for seed in 1..4 {
        assert_eq!(ask(Some(seed), Some(0.0)).unwrap(), best, "seed {seed}");
    }
    let err = ask(Some(1), Some(1.5)).unwrap_err();
    assert!(err.to_string().contains("from 0 (plain) to 1"), "{err}");
}
