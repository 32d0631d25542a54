//! What a MIDI file may hold: the limits that keep a hostile file from exhausting memory or
//! time, and [`MidiError`], each refusal as a sentence a person understands.

/// Largest file accepted (a long piano piece is well under 1 MB).
pub const MAX_FILE_BYTES: usize = 8 * 1024 * 1024;
/// Most notes accepted in one file.
pub const MAX_NOTES: usize = 200_000;
/// Longest piece accepted, in seconds.
pub const MAX_SECONDS: f64 = 2.0 * 60.0 * 60.0;
/// Most tracks accepted.
pub const MAX_TRACKS: usize = 256;
/// Longest piece accepted, in quarter notes (bounds every beat grid built on the song).
pub const MAX_QUARTERS: u64 = 20_000;
/// Most pedal events accepted in one file (a pianist pedalling a long piece sends a few
/// thousand; a keyboard's continuous half-pedal some tens of thousands).
pub const MAX_PEDAL_EVENTS: usize = 200_000;
/// Most tempo, time-signature and key-signature events accepted, together.
pub const MAX_MAP_EVENTS: usize = 10_000;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MidiError {
    #[error("this file is empty")]
    Empty,
    #[error("this file is {0} bytes; MIDI files over {MAX_FILE_BYTES} bytes are not accepted")]
    TooLarge(usize),
    #[error("this is not a MIDI file, or it is damaged: {0}")]
    Malformed(String),
    #[error("this MIDI file has no tracks")]
    NoTracks,
    #[error("this MIDI file has {0} tracks; at most {MAX_TRACKS} are accepted")]
    TooManyTracks(usize),
    #[error(
        "this MIDI file uses SMPTE timecode timing, which is not supported; save it with \
         metrical (beats) timing"
    )]
    SmpteTiming,
    #[error("this MIDI file says it has 0 ticks per quarter note, which is impossible")]
    ZeroPpq,
    #[error("this MIDI file has more than {MAX_NOTES} notes")]
    TooManyNotes,
    #[error("this MIDI file lasts {0:.0} minutes; at most {max} minutes are accepted", max = MAX_SECONDS / 60.0)]
    TooLong(f64),
    #[error(
        "this MIDI file has more than {MAX_PEDAL_EVENTS} pedal events; thin the pedal data \
         (for instance, quantize the controller) and open it again"
    )]
    TooManyPedalEvents,
    #[error("this MIDI file has no notes")]
    NoNotes,
    #[error("this MIDI file is {0} quarter notes long; at most {MAX_QUARTERS} are accepted")]
    TooManyBeats(u64),
    #[error("this MIDI file has more than {MAX_MAP_EVENTS} tempo, time or key signature changes")]
    TooManyMapEvents,
}
