//! The MIDI importer on arbitrary bytes: it must return a song or an error, never panic, hang or
//! allocate without bound. A song it accepts must also survive everything the page does with a
//! fresh file: the summary (chords, melody, phrases), the piano roll, and export and re-import.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pianoformer::music::midi::{read_midi, write_midi};
use pianoformer::music::roll::{Grid, PianoRoll};
use pianoformer::music::summary::summarize;

fuzz_target!(|data: &[u8]| {
    let Ok(song) = read_midi(data) else { return };
    let _ = summarize(&song);
    let grid = Grid::for_song(&song, 4);
    for track in &song.tracks {
        let roll = PianoRoll::from_notes(&track.notes, &grid);
        let _ = roll.to_notes(&grid, 0, 64);
    }
    let bytes = write_midi(&song);
    let again = read_midi(&bytes).expect("a file we wrote must read back");
    assert_eq!(again.note_count(), song.note_count(), "export lost or invented notes");
});
