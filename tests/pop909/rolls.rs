//! Piano rolls on real songs: notes to a roll and back, and the three rolls of a song through
//! a written MIDI file, and the pianist's pedal through a piece and back.

use pianoformer::music::midi::read_midi;
use pianoformer::music::pop909;
use pianoformer::music::roll::{Grid, PianoRoll};

use super::{data_root, song_ids};

#[test]
fn piano_roll_round_trip_keeps_every_note_within_the_grid() {
    let Some(root) = data_root() else { return };
    for id in song_ids(&root).into_iter().step_by(43) {
        let path = pop909::song_dir(&root, id).join(format!("{id:03}.mid"));
        let song = read_midi(&std::fs::read(path).unwrap()).unwrap();
        let grid = Grid::for_song(&song, 4);
        let half_step = song.ppq as u64 / 8;
        for track in &song.tracks {
            let roll = PianoRoll::from_notes(&track.notes, &grid);
            let back = roll.to_notes(&grid, 0, 64);
            // Every original onset has a note of the same pitch starting within half a step.
            for n in &track.notes {
                let hit = back
                    .iter()
                    .any(|b| b.pitch == n.pitch && b.start.abs_diff(n.start) <= half_step);
                assert!(hit, "song {id} {}: note {n:?} lost", track.name);
            }
            assert!(back.len() <= track.notes.len(), "song {id}: notes invented");
        }
    }
}

/// The three rolls of a song back to a type-1 MIDI file (tempo map and PPQ kept, one named
/// track per role on its own channel) and read again: the same notes.
#[test]
fn multi_track_rolls_round_trip_through_midi() {
    use pianoformer::music::midi::{Song, write_midi};
    use pianoformer::music::pop909::Pop909;
    let Some(root) = data_root() else { return };
    let data = Pop909::open(&root).unwrap();
    for id in data.song_ids().unwrap().into_iter().step_by(43) {
        let s = data.load(id, 4).unwrap();
        let tracks = s.rolls.to_tracks(&s.grid, 64);
        let out = Song {
            ppq: s.song.ppq,
            tempos: s.song.tempos.clone(),
            time_signatures: vec![],
            key_signatures: vec![],
            tracks: tracks.clone(),
        };
        let back = read_midi(&write_midi(&out)).unwrap();
        assert_eq!(back.ppq, s.song.ppq);
        assert_eq!(back.tempos, s.song.tempos, "song {id}");
        let names: Vec<&str> = back.tracks.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["MELODY", "BRIDGE", "PIANO"], "song {id}");
        for (a, b) in tracks.iter().zip(&back.tracks) {
            assert_eq!(a.notes, b.notes, "song {id} {}", a.name);
            assert_eq!(b.program, Some(0));
        }
    }
}

/// An imported POP909 file keeps its pianist's pedal (controller 64, half-pedal values as they
/// are) through the piece and back out as MIDI: the same controller events, tick for tick.
#[test]
fn a_pianist_s_pedal_survives_the_piece_and_export() {
    use pianoformer::music::piece::Piece;
    let Some(root) = data_root() else { return };
    let mut pedalled = 0;
    let ids = super::song_ids(&root);
    for &id in ids.iter().step_by(61) {
        let path = root.join(format!("songs/{id:03}/{id:03}.mid"));
        let bytes = std::fs::read(&path).unwrap();
        let song = read_midi(&bytes).unwrap();
        let piece = Piece::from_midi(&bytes, "song.mid").unwrap();
        let back = read_midi(&piece.to_midi().unwrap()).unwrap();
        let events = |s: &pianoformer::music::midi::Song, name: &str| -> Vec<(u64, u8, u8)> {
            s.tracks
                .iter()
                .filter(|t| t.name == name)
                .flat_map(|t| t.pedal.iter().map(|p| (p.tick, p.controller, p.value)))
                .collect()
        };
        for name in ["MELODY", "BRIDGE", "PIANO"] {
            assert_eq!(events(&back, name), events(&song, name), "song {id} {name}");
        }
        let piano = events(&song, "PIANO");
        if !piano.is_empty() {
            pedalled += 1;
            assert!(
                piano.iter().all(|e| e.1 == 64),
                "song {id}: only the sustain pedal"
            );
        }
    }
    // POP909's pianists pedal most songs (35 of 40 test songs).
    assert!(
        pedalled * 2 > ids.iter().step_by(61).count(),
        "{pedalled} pedalled"
    );
}
