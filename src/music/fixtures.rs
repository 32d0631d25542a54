//! Small songs written by the project's own code: test data, the page's bundled example and
//! the end-to-end test's dropped file (no copy of any real data set).

use super::chords::{Chord, Quality};
use super::midi::{Note, Song, TempoChange, Track};

/// A song in `key`: a I–V–vi–IV progression for `bars` bars, a MELODY track on chord tones
/// and a PIANO track holding each chord as a block and a bass note.
pub fn song(key: u8, bars: u64) -> Song {
    let ppq = 480u64;
    let progression = [
        (0u8, Quality::Maj),
        (7, Quality::Maj),
        (9, Quality::Min),
        (5, Quality::Maj),
    ];
    let note = |pitch: u8, start: u64, end: u64| Note {
        pitch,
        velocity: 80,
        start,
        end,
        channel: 0,
    };
    let (mut melody, mut piano) = (Vec::new(), Vec::new());
    for bar in 0..bars {
        let (root, quality) = progression[bar as usize % 4];
        let chord = Chord {
            root: (root + key) % 12,
            quality,
        };
        let start = bar * 4 * ppq;
        piano.push(note(36 + chord.root, start, start + 4 * ppq));
        for pc in chord.pitch_classes() {
            piano.push(note(48 + pc, start, start + 2 * ppq));
            piano.push(note(48 + pc, start + 2 * ppq, start + 4 * ppq));
        }
        for (k, pc) in chord.pitch_classes().enumerate() {
            melody.push(note(
                72 + pc,
                start + k as u64 * ppq,
                start + (k as u64 + 1) * ppq,
            ));
        }
    }
    let track = |name: &str, notes: Vec<Note>| Track {
        name: name.into(),
        program: Some(0),
        notes,
        ..Default::default()
    };
    Song {
        ppq: ppq as u16,
        tempos: vec![TempoChange {
            tick: 0,
            micros_per_quarter: 500_000,
        }],
        time_signatures: vec![],
        key_signatures: vec![],
        tracks: vec![track("MELODY", melody), track("PIANO", piano)],
    }
}
