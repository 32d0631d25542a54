//! Music data without tensors: MIDI and MusicXML in and out, piano rolls, structure labels, tokens, metrics.

pub mod chords;
pub mod dynamics;
pub mod fixtures;
pub mod grid;
pub mod harmony;
pub mod labels;
pub mod melody;
pub mod metrics;
pub mod midi;
pub mod musicxml;
pub mod pedal;
pub mod phrases;
pub mod piece;
pub mod playing;
pub mod pop909;
pub mod roll;
pub mod summary;
pub mod texture;
pub mod tokens;
