use super::*;
use crate::music::fixtures;

fn piece() -> Piece {
    Piece::from_song(&fixtures::song(0, 8), "fixture").unwrap()
}

#[test]
fn bars_of_a_piano_part_become_a_donor_that_plays_them_back() {
    let piece = piece();
    let grid = piece.grid(|_| true);
    let donor = Donor::from_piece(&piece, 2..4).unwrap();
    donor.check().unwrap();
    assert_eq!(donor.name, "bars 3-4 of fixture");
    assert_eq!(donor.bars, vec![16, 16]);
    assert_eq!(donor.chords, piece.chords[2..4].to_vec());
    // The donor's roll is the piano's bars 3-4, onset for onset and held as long.
    let roll = piece.piano_roll(&grid);
    let from = grid.bar_steps(2).start;
    let own = donor.roll();
    assert_eq!(own.num_steps, 32);
    for t in 0..32 {
        for p in 0..PITCHES {
            assert_eq!(
                own.onset(t, p),
                roll.onset(from + t, p),
                "step {t} pitch {p}"
            );
            assert_eq!(
                own.sustain(t, p),
                roll.sustain(from + t, p),
                "step {t} pitch {p}"
            );
        }
    }
    // Its chords lie on its steps as the chord lane lays them.
    let chords = donor.step_chords().unwrap();
    assert_eq!(chords.len(), 32);
    let first = Chord::parse_any(piece.chords[2].split_whitespace().next().unwrap()).unwrap();
    assert_eq!(chords[0], first);
    // As JSON and back.
    let json = serde_json::to_string(&donor).unwrap();
    assert_eq!(serde_json::from_str::<Donor>(&json).unwrap(), donor);
}

#[test]
fn a_donor_that_cannot_be_is_refused_in_words() {
    let piece = piece();
    let err = Donor::from_piece(&piece, 6..12).unwrap_err();
    assert!(err.contains("not in the piece (8 bars)"), "{err}");
    let mut melody_only = piece.clone();
    melody_only
        .tracks
        .retain(|t| t.role == crate::music::piece::TrackRole::Melody);
    let err = Donor::from_piece(&melody_only, 0..2).unwrap_err();
    assert!(err.contains("hold no piano notes"), "{err}");

    let good = Donor::from_piece(&piece, 0..2).unwrap();
    let bad = |edit: &dyn Fn(&mut Donor), says: &str| {
        let mut d = good.clone();
        edit(&mut d);
        let err = d.check().unwrap_err();
        assert!(err.contains(says), "{says}: {err}");
    };
    bad(&|d| d.bars.clear(), "has 0 bars");
    bad(&|d| d.bars[1] = 0, "bar 2 of the texture");
    bad(&|d| d.notes.clear(), "has 0 notes");
    bad(&|d| d.notes[0].1 = 999, "a note out of its bars");
    bad(&|d| d.notes[0].0 = 200, "a note out of its bars");
    bad(&|d| d.chords[0] = "Xq#9".into(), "bar 1 of the texture");
    bad(
        &|d| d.chords.extend(["C".into(), "G".into()]),
        "chord cells for 2 bars",
    );
}

#[test]
fn the_gallery_holds_its_named_textures_each_usable() {
    let names: Vec<&str> = gallery().iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        ["ballad", "arpeggio", "block", "stride", "syncopated"],
        "settings/textures.json (made by `pianoformer textures`)"
    );
    for d in gallery() {
        d.check().unwrap();
        assert!(d.source.is_some(), "{}: where it is from", d.name);
    }
    assert_eq!(named("Arpeggio").unwrap().name, "arpeggio");
    let err = named("waltz").unwrap_err();
    assert!(err.contains("ballad, arpeggio"), "{err}");
}

#[test]
fn a_figure_is_re_voiced_degree_for_degree_to_the_chord_under_it() {
    let c = |s: &str| Chord::parse_any(s).unwrap();
    let (cmaj, am, g7, f) = (c("C"), c("Am"), c("G7"), c("F"));
    // C E G over C, carried to Am: A C E, each to the nearest.
    assert_eq!(revoice(60, cmaj, am), 57, "root to root, down a third");
    assert_eq!(revoice(64, cmaj, am), 60, "third to third");
    assert_eq!(revoice(67, cmaj, am), 64, "fifth to fifth");
    // A seventh over G7 to F (no seventh): its last tone, the fifth C.
    assert_eq!(revoice(65, g7, f), 65 - 5, "F (the seventh of G7) to C");
    // A passing tone (D over C) moves with the roots: to G over F? F is a fourth above C: G.
    assert_eq!(revoice(62, cmaj, f), 67, "D moves up a fourth to G");
    // The same chord, or a chord missing: as it was.
    assert_eq!(revoice(61, cmaj, cmaj), 61);
    assert_eq!(revoice(61, None, am), 61);
    assert_eq!(revoice(61, cmaj, None), 61);
    // Within a tritone, and within MIDI.
    for p in [0u8, 5, 60, 122, 127] {
        for (a, b) in [(cmaj, am), (g7, f), (am, g7)] {
            let q = revoice(p, a, b);
            assert!(q < 128 && (q as i32 - p as i32).abs() <= 12, "{p} -> {q}");
        }
    }
}
