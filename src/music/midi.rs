//! Standard MIDI Files in and out (with midly), as a [`Song`]: notes in ticks plus the tempo,
//! time-signature and key-signature maps. Bad input becomes a [`MidiError`] with a sentence a
//! person understands; limits keep a hostile file from exhausting memory or time.
//!
//! The types and the tempo map's maths are in `song`, the limits and errors in `error`,
//! reading in `read` and writing in `write`; everything is re-exported here.

mod error;
mod read;
mod song;
mod write;

pub use error::{
    MAX_FILE_BYTES, MAX_MAP_EVENTS, MAX_NOTES, MAX_PEDAL_EVENTS, MAX_QUARTERS, MAX_SECONDS,
    MAX_TRACKS, MidiError,
};
pub use read::read_midi;
pub use song::{
    DEFAULT_MICROS_PER_QUARTER, KeySignature, Note, PEDALS, Pedal, SOFT, SOSTENUTO, SUSTAIN, Song,
    TempoChange, TimeSignature, Track,
};
pub use write::write_midi;

#[cfg(test)]
pub(crate) mod tests;
