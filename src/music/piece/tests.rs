use super::*;
use crate::music::fixtures;

mod fixture {
    use super::*;
    pub fn song() -> Song {
        fixtures::song(0, 8)
    }
    pub fn piece() -> Piece {
        Piece::from_song(&song(), "fixture.mid").unwrap()
    }
}

fn chord(s: &str) -> Option<Chord> {
    Chord::parse_any(s).unwrap()
}

#[test]
fn chord_cells_take_the_fewest_equal_parts() {
    assert_eq!(chord_cell(&[chord("C"); 4]), "C");
    assert_eq!(
        chord_cell(&[chord("C"), chord("C"), chord("G"), chord("G")]),
        "C G"
    );
    assert_eq!(
        chord_cell(&[chord("C"), chord("Am"), chord("Am")]),
        "C Am Am"
    );
    assert_eq!(chord_cell(&[None, None, chord("F"), chord("F")]), "N F");
    assert_eq!(chord_cell(&[None; 4]), "");
}

#[test]
fn cells_parse_back_to_the_beats_they_came_from() {
    let piece = Piece {
        chords: vec!["C G".into(), "Am7".into(), "".into(), "N F".into()],
        ..fixture::piece()
    };
    let cells = piece.bar_chords().unwrap();
    assert_eq!(cells[0], vec![chord("C"), chord("G")]);
    assert_eq!(cells[2], Vec::<Option<Chord>>::new());
    assert_eq!(cells[3], vec![None, chord("F")]);
    let bad = Piece {
        chords: vec!["C".into(), "Hm".into()],
        ..fixture::piece()
    };
    let err = bad.bar_chords().unwrap_err().to_string();
    assert!(err.starts_with("bar 2:"), "{err}");
}

#[test]
fn midi_round_trip_keeps_roles_notes_and_labels() {
    let song = fixture::song();
    let bytes = write_midi(&song);
    let piece = Piece::from_midi(&bytes, "test.mid").unwrap();
    assert_eq!(piece.tracks[0].role, TrackRole::Melody);
    assert_eq!(piece.tracks[1].role, TrackRole::Piano);
    assert_eq!(piece.bars.len(), piece.chords.len());
    assert_eq!(
        piece.phrases.iter().map(|p| p.1).sum::<usize>(),
        piece.bars.len()
    );
    assert_eq!(piece.prompt_bars, piece.bars.len());
    // The detected chords follow the fixture's I–V–vi–IV progression.
    assert_eq!(&piece.chords[..4], &["C", "G", "Am", "F"]);
    let json = serde_json::to_string(&piece).unwrap();
    let back: Piece = serde_json::from_str(&json).unwrap();
    assert_eq!(back, piece);
    let again = Piece::from_midi(&back.to_midi().unwrap(), "test.mid").unwrap();
    assert_eq!(again.tracks, piece.tracks);
    assert_eq!(again.chords, piece.chords);
}

#[test]
fn bad_pieces_are_refused_in_words() {
    assert_eq!(
        Piece::from_song(
            &Song {
                tracks: vec![],
                ..fixture::song()
            },
            "x"
        ),
        Err(PieceError::Empty)
    );
    let mut p = fixture::piece();
    p.tracks[0].notes.push((200, 0, 10, 64));
    assert!(p.validate().unwrap_err().to_string().contains("pitch 200"));
    let mut p = fixture::piece();
    p.time_signatures = vec![(0, 3, 5)];
    assert!(p.to_midi().unwrap_err().to_string().contains("3/5"));
    let mut p = fixture::piece();
    p.version = 9;
    assert!(p.validate().unwrap_err().to_string().contains("version 9"));
    // Pedal a page or a link could have got wrong.
    let mut p = fixture::piece();
    p.tracks[1].pedal = vec![(0, 7, 127)];
    assert!(
        p.validate()
            .unwrap_err()
            .to_string()
            .contains("controller 7")
    );
    p.tracks[1].pedal = vec![(0, 64, 200)];
    assert!(p.validate().unwrap_err().to_string().contains("value 200"));
    p.tracks[1].pedal = vec![(10, 64, 127), (5, 64, 0)];
    assert!(
        p.validate()
            .unwrap_err()
            .to_string()
            .contains("out of order")
    );
    p.tracks[1].pedal = vec![(0, 64, 0); MAX_PEDAL_EVENTS + 1];
    assert!(
        p.to_midi()
            .unwrap_err()
            .to_string()
            .contains("pedal events")
    );
}

/// The piano's pedal travels through the piece JSON and back out as MIDI; a piece saved before
/// pedals were kept (no `pedal` field) still reads, as unpedalled, and writes no field.
#[test]
fn the_pedal_is_kept_through_json_and_midi() {
    let mut p = fixture::piece();
    p.tracks[1].pedal = vec![
        (0, 64, 127),
        (480, 64, 50),
        (960, 64, 0),
        (960, 64, 127),
        (1200, 66, 127),
    ];
    let json = serde_json::to_string(&p).unwrap();
    assert!(json.contains("\"pedal\":[[0,64,127]"), "{json}");
    let back: Piece = serde_json::from_str(&json).unwrap();
    assert_eq!(back, p);
    let again = Piece::from_midi(&back.to_midi().unwrap(), "x.mid").unwrap();
    assert_eq!(again.tracks[1].pedal, p.tracks[1].pedal);
    assert!(again.tracks[0].pedal.is_empty());
    let old = json.replace(
        ",\"pedal\":[[0,64,127],[480,64,50],[960,64,0],[960,64,127],[1200,66,127]]",
        "",
    );
    assert!(!old.contains("pedal"));
    let read: Piece = serde_json::from_str(&old).unwrap();
    assert!(read.tracks.iter().all(|t| t.pedal.is_empty()));
    assert!(!serde_json::to_string(&read).unwrap().contains("pedal"));
}

#[test]
fn refresh_keeps_planned_bars_and_labels_new_ones() {
    let mut p = fixture::piece();
    let bars = p.bars.len();
    // Plan four more bars, then let a model fill two of them.
    let len = p.bars[1] - p.bars[0];
    for k in 0..4 {
        p.bars.push(p.bars[bars - 1] + len * (k + 1));
        p.chords
            .push(if k == 0 { "Dm".into() } else { String::new() });
    }
    p.refresh();
    assert_eq!(p.bars.len(), bars + 4, "planned bars stay");
    assert_eq!(p.prompt_bars, bars);
    let start = p.bars[bars];
    p.tracks.push(PieceTrack {
        pedal: Vec::new(),
        name: "CONTINUATION".into(),
        role: TrackRole::Generated,
        program: 0,
        channel: None,
        notes: vec![(62, start, start + 2 * len - 10, 80)],
    });
    p.refresh();
    // The grid ends with the bar line after the last note (an empty bar starts there).
    assert!(
        p.prompt_bars > bars && p.prompt_bars <= bars + 3,
        "{}",
        p.prompt_bars
    );
    assert_eq!(p.chords[bars], "Dm", "a planned chord is kept");
    assert_eq!(p.bars.len(), bars + 4);
    assert_eq!(p.phrases.iter().map(|x| x.1).sum::<usize>(), bars + 4);
}

/// The cases the page's dialog is checked against too (tests/js/labels.test.mjs).
#[test]
fn chord_charts_read_as_the_page_reads_them() {
    let cases: serde_json::Value =
        serde_json::from_str(include_str!("../../../tests/chord-charts.json")).unwrap();
    for case in cases["cases"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        match (chord_chart(text), case["refused"].as_str()) {
            (Ok(cells), None) => assert_eq!(serde_json::json!(cells), case["cells"], "{text:?}"),
            (Err(e), Some(bad)) => assert!(e.contains(bad), "{text:?}: {e}"),
            (got, _) => panic!("{text:?}: {got:?}, expected {case}"),
        }
    }
}

#[test]
fn planned_bars_are_added_and_taken_away_as_on_the_page() {
    let mut p = fixture::piece();
    let bars = p.bars.len();
    let len = p.bars[bars - 1] - p.bars[bars - 2];
    p.set_bar_count(bars + 3);
    assert_eq!(p.bars.len(), bars + 3);
    assert_eq!(p.bars[bars + 2], p.bars[bars - 1] + 3 * len);
    assert_eq!(p.chords.len(), bars + 3);
    assert_eq!(p.chords[bars + 1], "");
    assert_eq!(p.phrases.iter().map(|x| x.1).sum::<usize>(), bars + 3);
    assert_eq!(p.prompt_bars, bars, "the music is as it was");
    // Never fewer bars than the music's.
    p.set_bar_count(1);
    assert_eq!(p.bars.len(), bars);
    assert_eq!(p.phrases.iter().map(|x| x.1).sum::<usize>(), bars);
}
