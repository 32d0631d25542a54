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

#[test]
fn suggested_chords_fill_the_bars_asked_for() {
    let device = Device::flex();
    let model = Performer::new(
        &tiny(PeConfig::new(PeKind::SineSpe), Direction::Bidirectional),
        1,
        &device,
    )
    .unwrap();
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
