use burn::tensor::Device;

use super::*;
use crate::model::config::{PerformerConfig, Task};
use crate::model::pe::{PeConfig, PeKind};
use crate::model::performer::Performer;
use crate::music::fixtures;
use crate::music::piece::{Piece, PieceNote, TrackRole};

fn model() -> Performer {
    let config = PerformerConfig::tiny(Task::Melody, 0, PeConfig::new(PeKind::SineSpe));
    Performer::new(&config, 3, &Device::flex()).unwrap()
}

fn melody(piece: &Piece) -> Vec<PieceNote> {
    piece
        .tracks
        .iter()
        .filter(|t| t.role == TrackRole::Melody)
        .flat_map(|t| t.notes.iter().copied())
        .collect()
}

fn sing(
    piece: &Piece,
    options: &MelodyOptions,
) -> Result<(Piece, Vec<(usize, usize)>), GenerateError> {
    let mut reports = Vec::new();
    let out = pollster::block_on(melody_piece(
        &model(),
        &crate::models::ModelDefaults::default(),
        piece,
        options,
        &Device::flex(),
        |p| {
            reports.push((p.done, p.total));
            async { true }
        },
    ))?;
    Ok((out, reports))
}

#[test]
fn a_song_starts_from_a_plan() {
    let mut plan = Piece::from_plan("plan", 8, 4, 4, 96.0).unwrap();
    for (cell, chord) in plan
        .chords
        .iter_mut()
        .zip(["C", "G", "Am", "F", "C", "G", "F G", "C"])
    {
        *cell = chord.into();
    }
    plan.phrases = vec![('A', 4), ('A', 4)];
    let options = MelodyOptions {
        common: Common {
            chunk_steps: 32,
            ..Common::default()
        },
        ..MelodyOptions::default()
    };
    let (out, reports) = sing(&plan, &options).unwrap();
    assert_eq!(
        reports.last(),
        Some(&(128, 128)),
        "every sixteenth of 8 bars"
    );
    let notes = melody(&out);
    assert!(!notes.is_empty());
    let end = plan.bar_tick(8);
    assert!(
        notes.iter().all(|n| n.2 <= end && (48..=84).contains(&n.0)),
        "{notes:?}"
    );
    // The lanes are the plan's (the piece now ends, as a file does, with a bar after its
    // music).
    assert_eq!(out.chords[..8], plan.chords[..]);
    assert_eq!(out.phrases[0], plan.phrases[0]);
    // Its seed writes it again; the plan alone is not enough for a piece with a melody.
    assert_eq!(melody(&sing(&plan, &options).unwrap().0), notes);
    let err = sing(&out, &MelodyOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("has a melody already"), "{err}");
}

#[test]
fn a_region_is_rewritten_and_planned_bars_are_sung() {
    let piece = Piece::from_song(&fixtures::song(0, 8), "fixture.mid").unwrap();
    let before = melody(&piece);
    let bar = |b: usize| piece.bar_tick(b);
    // Bars 3–4 rewritten: the melody elsewhere is kept.
    let options = MelodyOptions {
        common: Common {
            region: Some([2, 4]),
            ..Common::default()
        },
        ..MelodyOptions::default()
    };
    let (out, reports) = sing(&piece, &options).unwrap();
    assert_eq!(reports.last().map(|r| r.1), Some(32));
    let outside = |notes: &[PieceNote]| -> Vec<PieceNote> {
        notes
            .iter()
            .copied()
            .filter(|n| n.1 < bar(2) || n.1 >= bar(4))
            .collect()
    };
    let kept = outside(&before);
    let now = outside(&melody(&out));
    // A note sounding into the region may be cut at its start (or held on); nothing else moves.
    assert_eq!(now.len(), kept.len());
    for (a, b) in now.iter().zip(&kept) {
        assert_eq!((a.0, a.1), (b.0, b.1));
        assert!(a.2 == b.2 || (a.1 < bar(2) && a.2 <= bar(4)));
    }
    // Four planned bars past the music's eight: only they are sung.
    let mut longer = piece.clone();
    longer.set_bar_count(12);
    let (out, reports) = sing(&longer, &MelodyOptions::default()).unwrap();
    assert_eq!(reports.last().map(|r| r.1), Some(64));
    let notes = melody(&out);
    assert_eq!(
        notes.iter().filter(|n| n.1 < bar(8)).count(),
        before.len(),
        "the music's melody stays"
    );
    assert!(
        notes.iter().any(|n| n.1 >= bar(8)),
        "the planned bars are sung"
    );
    assert!(out.prompt_bars > 8);
}

/// The map of a melody: one row a sixteenth over the keys up to it, each a distribution; after
/// a note of bar 5 is moved, the rows up to its onset are as they were (a step reads the
/// melody before it) and later ones are not.
#[test]
fn a_melody_map_is_the_attention_over_the_melody_shown() {
    let device = Device::flex();
    let model = model();
    let piece = Piece::from_song(&fixtures::song(0, 8), "fixture.mid").unwrap();
    let options = MelodyOptions {
        common: Common {
            watch: Some(WatchOptions { layer: 1, head: 1 }),
            ..Common::default()
        },
        ..MelodyOptions::default()
    };
    let map_of = |piece: &Piece| {
        let mut rows: Vec<Vec<f32>> = Vec::new();
        let steps = pollster::block_on(melody_attention_map(
            &model,
            piece,
            &options,
            &device,
            None,
            |p| {
                let a = p.attention.expect("attention rows");
                assert_eq!(a.start, 0);
                rows.extend(a.values.chunks(a.keys).map(<[f32]>::to_vec));
                async { true }
            },
        ))
        .unwrap();
        assert_eq!(rows.len(), steps);
        rows
    };
    let rows = map_of(&piece);
    assert_eq!(rows.len(), piece.grid(|_| true).num_steps());
    for (i, row) in rows.iter().enumerate() {
        assert!(
            row[i + 1..].iter().all(|&v| v == 0.0),
            "row {i} reads no later step"
        );
        let sum: f32 = row.iter().sum();
        assert!((sum - 1.0).abs() < 1e-3, "row {i} sums to {sum}");
    }
    let mut edited = piece.clone();
    let bar5 = piece.bars[4];
    let track = edited
        .tracks
        .iter_mut()
        .find(|t| t.role == TrackRole::Melody)
        .unwrap();
    let note = track.notes.iter_mut().find(|n| n.1 >= bar5).unwrap();
    let at = piece.grid(|_| true).step_at(note.1);
    note.0 += 2;
    let after = map_of(&edited);
    assert_eq!(rows[..=at], after[..=at], "rows up to the edit");
    assert_ne!(rows[at + 1..], after[at + 1..], "rows after it");
    // No watched head: nothing drawn.
    let none = MelodyOptions::default();
    let steps = pollster::block_on(melody_attention_map(
        &model,
        &piece,
        &none,
        &device,
        None,
        |_| async { panic!("no map without a watched head") },
    ));
    assert_eq!(steps.unwrap(), rows.len());
}
