//! REMI-style tokens for continuation (Huang & Yang's REMI, as in the SPE paper's pop-piano
//! experiment): bar, meter, position in bar, chord, tempo, and notes as pitch, velocity and
//! duration. A grammar says which tokens may come next, so sampling can be constrained to
//! sequences that decode.
//!
//! A bar is `Bar [Meter] (Position [Chord] [Tempo] (Pitch Velocity Duration)*)*`: positions
//! increase within a bar, notes at one position go up in pitch, and a `Meter` token follows
//! `Bar` only when the bar's length in beats changes (bars are 4 beats until told otherwise).
//!
//! The vocabulary (the [`Token`] type, ids and bins) is in `vocab`, the grammar in `grammar`,
//! and the two directions in `encode` and `decode`; everything is re-exported here.

mod decode;
mod encode;
mod grammar;
pub mod places;
mod vocab;

pub use decode::{Decoded, decode};
pub use encode::encode;
pub use grammar::{Grammar, TokenError, check_grammar};
pub use vocab::{
    DEFAULT_BAR_BEATS, MAX_BAR_BEATS, MAX_BPM, MAX_DURATION, MAX_POSITIONS, MIN_BPM,
    STEPS_PER_BEAT, TEMPO_BINS, Token, VELOCITY_BINS, VOCAB_SIZE, bin_bpm, bin_velocity, tempo_bin,
};

#[cfg(test)]
mod tests;
