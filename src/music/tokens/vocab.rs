//! The vocabulary: the [`Token`] type, its ids (specials, bar, meters, positions, chords,
//! tempos, pitches, velocities, durations, in that order) and names, the grid and bin sizes,
//! and the tempo and velocity bins.

use std::fmt;

use crate::music::chords::{Chord, PITCH_CLASS_NAMES, Quality};

/// Positions per beat: tokens are on a sixteenth-note grid.
pub const STEPS_PER_BEAT: usize = 4;
/// Longest bar in beats; longer bars are cut into bars of this length.
pub const MAX_BAR_BEATS: usize = 16;
/// Positions in the longest bar.
pub const MAX_POSITIONS: usize = MAX_BAR_BEATS * STEPS_PER_BEAT;
/// Longest note in steps (4 bars of 4/4); longer notes are shortened to it.
pub const MAX_DURATION: usize = 64;
pub const VELOCITY_BINS: usize = 32;
pub const TEMPO_BINS: usize = 32;
/// Tempo bins are spaced evenly in log tempo between these.
pub const MIN_BPM: f64 = 40.0;
pub const MAX_BPM: f64 = 240.0;
const CHORDS: usize = 12 * Quality::ALL.len();
/// Bars assumed before the first `Meter` token.
pub const DEFAULT_BAR_BEATS: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Token {
    Pad,
    Bos,
    Eos,
    Bar,
    /// The bar lasts this many beats (1..=16).
    Meter(u8),
    /// Step within the bar (0..64).
    Position(u8),
    /// A chord from here on; `None` is "no chord".
    Chord(Option<Chord>),
    /// Tempo bin (0..32), see [`tempo_bin`].
    Tempo(u8),
    Pitch(u8),
    /// Velocity bin (0..32): velocity / 4.
    Velocity(u8),
    /// Length in steps (1..=64).
    Duration(u8),
}

// Token id layout: specials, bar, meters, positions, chords (N first), tempos, pitches,
// velocities, durations.
const BAR: u32 = 3;
const METER: u32 = 4;
const POSITION: u32 = METER + MAX_BAR_BEATS as u32;
const CHORD: u32 = POSITION + MAX_POSITIONS as u32;
const TEMPO: u32 = CHORD + 1 + CHORDS as u32;
const PITCH: u32 = TEMPO + TEMPO_BINS as u32;
const VELOCITY: u32 = PITCH + 128;
const DURATION: u32 = VELOCITY + VELOCITY_BINS as u32;
/// Number of distinct tokens.
pub const VOCAB_SIZE: usize = (DURATION + MAX_DURATION as u32) as usize;

fn quality_index(q: Quality) -> usize {
    Quality::ALL.iter().position(|&x| x == q).unwrap_or(0)
}

impl Token {
    pub fn id(self) -> u32 {
        match self {
            Token::Pad => 0,
            Token::Bos => 1,
            Token::Eos => 2,
            Token::Bar => BAR,
            Token::Meter(b) => METER + b as u32 - 1,
            Token::Position(p) => POSITION + p as u32,
            Token::Chord(None) => CHORD,
            Token::Chord(Some(c)) => {
                CHORD + 1 + (c.root as usize * Quality::ALL.len() + quality_index(c.quality)) as u32
            }
            Token::Tempo(t) => TEMPO + t as u32,
            Token::Pitch(p) => PITCH + p as u32,
            Token::Velocity(v) => VELOCITY + v as u32,
            Token::Duration(d) => DURATION + d as u32 - 1,
        }
    }

    pub fn from_id(id: u32) -> Option<Token> {
        Some(match id {
            0 => Token::Pad,
            1 => Token::Bos,
            2 => Token::Eos,
            BAR => Token::Bar,
            _ if id < POSITION => Token::Meter((id - METER + 1) as u8),
            _ if id < CHORD => Token::Position((id - POSITION) as u8),
            CHORD => Token::Chord(None),
            _ if id < TEMPO => {
                let k = (id - CHORD - 1) as usize;
                Token::Chord(Some(Chord {
                    root: (k / Quality::ALL.len()) as u8,
                    quality: Quality::ALL[k % Quality::ALL.len()],
                }))
            }
            _ if id < PITCH => Token::Tempo((id - TEMPO) as u8),
            _ if id < VELOCITY => Token::Pitch((id - PITCH) as u8),
            _ if id < DURATION => Token::Velocity((id - VELOCITY) as u8),
            _ if (id as usize) < VOCAB_SIZE => Token::Duration((id - DURATION + 1) as u8),
            _ => return None,
        })
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Pad => write!(f, "PAD"),
            Token::Bos => write!(f, "BOS"),
            Token::Eos => write!(f, "EOS"),
            Token::Bar => write!(f, "Bar"),
            Token::Meter(b) => write!(f, "Meter_{b}"),
            Token::Position(p) => write!(f, "Position_{p}"),
            Token::Chord(None) => write!(f, "Chord_N"),
            Token::Chord(Some(c)) => write!(
                f,
                "Chord_{}:{}",
                PITCH_CLASS_NAMES[c.root as usize % 12],
                c.quality.symbol()
            ),
            Token::Tempo(t) => write!(f, "Tempo_{:.0}", bin_bpm(*t)),
            Token::Pitch(p) => write!(f, "Pitch_{p}"),
            Token::Velocity(v) => write!(f, "Velocity_{}", bin_velocity(*v)),
            Token::Duration(d) => write!(f, "Duration_{d}"),
        }
    }
}

/// The tempo bin of `bpm` (clamped to 40–240 bpm).
pub fn tempo_bin(bpm: f64) -> u8 {
    let x = (bpm.clamp(MIN_BPM, MAX_BPM) / MIN_BPM).ln() / (MAX_BPM / MIN_BPM).ln();
    (x * (TEMPO_BINS - 1) as f64).round() as u8
}

/// The tempo a bin stands for.
pub fn bin_bpm(bin: u8) -> f64 {
    MIN_BPM * (MAX_BPM / MIN_BPM).powf(bin as f64 / (TEMPO_BINS - 1) as f64)
}

pub(super) fn velocity_bin(v: u8) -> u8 {
    (v as usize * VELOCITY_BINS / 128).min(VELOCITY_BINS - 1) as u8
}

/// The velocity a bin stands for (the middle of the bin, at least 1).
pub fn bin_velocity(bin: u8) -> u8 {
    ((bin as usize * 128 / VELOCITY_BINS) + 64 / VELOCITY_BINS).clamp(1, 127) as u8
}
