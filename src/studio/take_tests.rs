//! The live take as a row of the task table: a piece's melody played as a take (what the live
//! accompanist plays over it) through the Session's path and the CLI's, and the take's piano
//! put into the piece as the page puts it.

use burn::tensor::Device;

use super::family::{Family, Kept, Run, generate_json};
use super::*;
use crate::model::config::{Conditioning, PerformerConfig, Task};
use crate::model::pe::{PeConfig, PeKind};
use crate::model::performer::Performer;
use crate::models::ModelDefaults;
use crate::music::fixtures;
use crate::music::piece::{Piece, PieceTrack, TrackRole};

fn piece() -> Piece {
    Piece::from_song(&fixtures::song(0, 8), "fixture.mid").unwrap()
}

/// A step-by-step accompaniment made for live playing (it reads the melody a step late).
fn late_model(device: &Device) -> Performer {
    let config = PerformerConfig::tiny(Task::Accompaniment, 0, PeConfig::new(PeKind::SineSpe))
        .with_inputs(Some(Conditioning::lagged(1)));
    Performer::new(&config, 1, device).unwrap()
}

fn onsets_before(piece: &Piece, tick: u64) -> Vec<(u8, u64)> {
    let mut out: Vec<(u8, u64)> = piece
        .tracks
        .iter()
        .filter(|t| t.role == TrackRole::Generated)
        .flat_map(|t| &t.notes)
        .filter(|n| n.1 < tick)
        .map(|n| (n.0, n.1))
        .collect();
    out.sort_unstable();
    out
}

#[test]
fn a_take_over_a_melody_hears_only_what_was_played_before_each_step() {
    let device = Device::flex();
    let model = late_model(&device);
    let defaults = ModelDefaults::default();
    let run = Run {
        model: &model,
        defaults: &defaults,
        device: &device,
        dynamics: None,
        pedal: None,
    };
    let piece = piece();
    let take = |piece: &Piece, json: &str| {
        let mut reports = Vec::new();
        let out = pollster::block_on(generate_json::<TaskKind, _, _>(
            "live",
            &run,
            piece,
            json,
            &mut Kept::default(),
            |p| {
                reports.push((p.done, p.total));
                async { true }
            },
        ))
        .unwrap();
        (serde_json::from_str::<Piece>(&out).unwrap(), reports)
    };
    // From bar 3 to the end: the piano before the take is the pianist's, cut where it starts,
    // and the take's is written from there, reported as it goes.
    let (played, reports) = take(&piece, r#"{"seed": 4, "fromBar": 2, "toBar": 8}"#);
    let from = piece.bars[2];
    assert_eq!(
        onsets_before(&played, from),
        onsets_before(
            &with_take(
                &piece,
                &LiveResult {
                    from_tick: from,
                    end_tick: from,
                    piano: Vec::new(),
                    from_bar: 2,
                    cells: Vec::new(),
                    pedal: None,
                }
            ),
            from
        ),
        "the piano before the take is kept"
    );
    let written =
        onsets_before(&played, piece.bar_tick(8)).len() - onsets_before(&played, from).len();
    assert!(written > 0, "the take plays");
    assert_eq!(reports.last(), Some(&(6 * 16, 6 * 16)));
    assert!(!played.tracks.iter().any(|t| t.role == TrackRole::Piano));
    // The melody of the last bar played otherwise: nothing before it changes (a take hears a
    // key when it is played), and the melody is the piece's own.
    let mut other = piece.clone();
    let last = piece.bars[7];
    for t in other
        .tracks
        .iter_mut()
        .filter(|t| t.role == TrackRole::Melody)
    {
        for n in t.notes.iter_mut().filter(|n| n.1 >= last) {
            n.0 += 7;
        }
    }
    let (again, _) = take(&other, r#"{"seed": 4, "fromBar": 2, "toBar": 8}"#);
    assert_eq!(onsets_before(&again, last), onsets_before(&played, last));
    let melody = |p: &Piece| -> Vec<_> {
        p.tracks
            .iter()
            .filter(|t| t.role == TrackRole::Melody)
            .flat_map(|t| t.notes.clone())
            .collect()
    };
    assert_eq!(melody(&again), melody(&other));
    // The CLI's path: the same take, described in words.
    let options = serde_json::json!({ "seed": 4, "region": [2, 8] });
    let out = pollster::block_on(TaskKind::Live.generate(
        &run,
        &piece,
        &options,
        &mut Kept::default(),
        |_| async { true },
    ))
    .unwrap()
    .into_pieces();
    assert_eq!(
        out[0].piece, played,
        "the Session's and the CLI's take agree"
    );
    let said = TaskKind::Live.describe(&piece, &out[0], &options);
    assert!(said.starts_with("a live take over bars 3-8: "), "{said}");
    // A take that would start past the music is refused in words (the grid has a bar of room
    // after it).
    let late = pollster::block_on(generate_json::<TaskKind, _, _>(
        "live",
        &run,
        &piece,
        r#"{"fromBar": 8}"#,
        &mut Kept::default(),
        |_| async { true },
    ))
    .unwrap_err();
    assert!(
        late.to_string().contains("the music ends in bar 8"),
        "{late}"
    );
    // A model that writes the whole piece at once cannot play live, in words.
    let whole = PerformerConfig::tiny(Task::Accompaniment, 0, PeConfig::new(PeKind::SineSpe));
    let whole = Performer::new(&whole, 1, &device).unwrap();
    let run = Run {
        model: &whole,
        ..run
    };
    let refused = pollster::block_on(TaskKind::Live.generate(
        &run,
        &piece,
        &options,
        &mut Kept::default(),
        |_| async { true },
    ))
    .unwrap_err();
    assert!(
        refused.to_string().contains("writes step by step"),
        "{refused}"
    );
}

#[test]
fn a_takes_piano_goes_into_the_piece_as_the_page_puts_it() {
    let mut piece = piece();
    piece.tracks.retain(|t| t.role != TrackRole::Piano);
    piece.tracks.push(PieceTrack {
        name: "PIANIST".into(),
        role: TrackRole::Piano,
        program: 0,
        channel: None,
        // One note before the take held into it, one inside it, one held past its end.
        notes: vec![
            (48, 0, 2000, 70),
            (50, 2000, 2100, 70),
            (52, 2200, 4200, 70),
        ],
        pedal: vec![(0, 64, 127), (3000, 64, 0)],
    });
    let result = LiveResult {
        from_tick: 1920,
        end_tick: 3840,
        piano: vec![(60, 1920, 2400, 90)],
        from_bar: 1,
        cells: vec![Some("Am".into()), None],
        pedal: Some(vec![(1920, 64, 127), (2880, 64, 0)]),
    };
    let before = piece.chords[2].clone();
    let out = with_take(&piece, &result);
    let track = out
        .tracks
        .iter()
        .find(|t| t.role == TrackRole::Generated)
        .expect("the take's piano takes the pianist's place");
    assert!(!out.tracks.iter().any(|t| t.role == TrackRole::Piano));
    assert_eq!(
        track.notes,
        vec![
            (48, 0, 1920, 70),
            (60, 1920, 2400, 90),
            (52, 3840, 4200, 70)
        ],
        "cut at the take's start, the take's, and what sounds past its end"
    );
    assert_eq!(out.chords[1], "Am");
    assert_eq!(out.chords[2], before, "a planned bar keeps its chord");
    // Down before the take: lifted at its start, its own pedal, then as it was after it.
    assert_eq!(
        track.pedal,
        vec![(0, 64, 127), (1920, 64, 0), (1920, 64, 127), (2880, 64, 0)]
    );
}
