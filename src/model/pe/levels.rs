//! The structure levels a model can read (F-StrIPE's structure-aware positions): the names a
//! config gives them and how many coordinates each takes. What the coordinates are made of
//! (a melody, chords, phrases) is the business of the layer that feeds models (the data
//! layer's features); the model knows only their count and names.

use serde::{Deserialize, Serialize};

/// A level of structure a model can condition on (F-StrIPE's structure-aware positions), as
/// numbers in which musically close labels are close.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StructureLevel {
    /// The melody's MIDI pitch (0 for a rest): one coordinate.
    Melody,
    /// The chord's tonal centroid (Harte, Sandler and Gasser 2006): the mean of its pitch
    /// classes on the circle of fifths and the circles of minor and major thirds, scaled by 12 so
    /// its differences span a range like the other levels'. C and Am, or C and G, are close; C
    /// and F# far apart. No chord is the origin. Six coordinates.
    Chord,
    /// The chord as an identity, the way the F-StrIPE paper indexes its labels: one number,
    /// `1 + 14 · root + quality` in the order of the fourteen chord qualities (C major 1, C minor 2, …,
    /// C# major 15, …), no chord 0. Equal chords give equal positions, but unlike the
    /// centroid the distance between two different chords means nothing musically: the
    /// kernel has to learn which differences matter (`train --chord-encoding id`).
    #[serde(rename = "chord_id")]
    ChordId,
    /// The phrase letter: A–Z as 1–26, lower-case letters (intro, outro, bridge) as 33–58, no
    /// phrase as 0. One coordinate: equal letters give equal positions.
    Phrase,
    /// The position in the bar, in sixteenths. One coordinate.
    Position,
    /// The bar's place in its phrase, from 0 at the phrase's first bar (0 outside phrases).
    /// With the letter and the position in the bar, a note of a repeated phrase gets the
    /// coordinates of the same note in the phrase's first occurrence. One coordinate.
    #[serde(rename = "phrase_bar")]
    PhraseBar,
    /// Musical time, in beats from the start of what the model reads: the step index of
    /// sineSPE, counted in beats, so that the encoding also knows what is near in time. One
    /// coordinate.
    Time,
}

impl StructureLevel {
    pub const ALL: [StructureLevel; 4] = [
        StructureLevel::Melody,
        StructureLevel::Chord,
        StructureLevel::Phrase,
        StructureLevel::Position,
    ];

    /// A continuation model's levels: what the tokens and the lanes say of each token.
    pub const CONTINUATION: [StructureLevel; 5] = [
        StructureLevel::Chord,
        StructureLevel::Phrase,
        StructureLevel::PhraseBar,
        StructureLevel::Position,
        StructureLevel::Time,
    ];

    /// A melody model's levels: the phrase, the bar's place in it and the position in the bar
    /// (the melody is what it writes, so it cannot read it).
    pub const MELODY: [StructureLevel; 3] = [
        StructureLevel::Phrase,
        StructureLevel::PhraseBar,
        StructureLevel::Position,
    ];

    /// Coordinates this level takes.
    pub fn dims(self) -> usize {
        match self {
            StructureLevel::Chord => 6,
            _ => 1,
        }
    }
}
