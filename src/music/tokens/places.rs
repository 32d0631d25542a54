//! Where each token of a sequence sits in the music: its bar, its time in beats, its position
//! in the bar and the chord in force, read from the tokens themselves (`Bar`, `Meter`,
//! `Position`, `Chord`). This is what F-StrIPE reads as a continuation token's structure: the
//! same walk serves training (a song's tokens) and generation (one token at a time), so the two
//! never disagree.

use super::vocab::{DEFAULT_BAR_BEATS, MAX_BAR_BEATS, STEPS_PER_BEAT, Token};
use crate::music::chords::Chord;
use crate::music::grid::Grid;

/// A token's place in the music.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenPlace {
    /// The bar (counting `Bar` tokens from 0); `None` before the first.
    pub bar: Option<u32>,
    /// Time in beats from the sequence's first bar line.
    pub beat: f32,
    /// Position in the bar, in steps (sixteenths).
    pub position: u8,
    /// The chord in force (the last `Chord` token's).
    pub chord: Option<Chord>,
}

/// The walk over a token sequence that gives each token its [`TokenPlace`].
#[derive(Clone, Debug)]
pub struct Places {
    bars: u32,
    bar_start: f32,
    bar_beats: usize,
    position: u8,
    chord: Option<Chord>,
}

impl Default for Places {
    fn default() -> Self {
        Self {
            bars: 0,
            bar_start: 0.0,
            bar_beats: DEFAULT_BAR_BEATS,
            position: 0,
            chord: None,
        }
    }
}

impl Places {
    /// Reads token `id` and returns its place.
    pub fn push(&mut self, id: u32) -> TokenPlace {
        match Token::from_id(id) {
            Some(Token::Bar) => {
                if self.bars > 0 {
                    self.bar_start += self.bar_beats as f32;
                }
                self.bars += 1;
                self.position = 0;
            }
            Some(Token::Meter(n)) => self.bar_beats = (n as usize).clamp(1, MAX_BAR_BEATS),
            Some(Token::Position(p)) => self.position = p,
            Some(Token::Chord(c)) => self.chord = c,
            _ => {}
        }
        TokenPlace {
            bar: self.bars.checked_sub(1),
            beat: self.bar_start + self.position as f32 / STEPS_PER_BEAT as f32,
            position: self.position,
            chord: self.chord,
        }
    }
}

/// The place of every token of `ids`.
pub fn places(ids: &[u32]) -> Vec<TokenPlace> {
    let mut walk = Places::default();
    ids.iter().map(|&id| walk.push(id)).collect()
}

/// The grid step at which each `Bar` token of [`super::encode`]'s output on `grid` starts
/// (bars longer than [`MAX_BAR_BEATS`] give several), in order.
pub fn bar_token_steps(grid: &Grid) -> Vec<usize> {
    let mut out = Vec::new();
    for bar in 0..grid.num_bars() {
        for sub in grid.bar_beats(bar).step_by(MAX_BAR_BEATS) {
            out.push(sub * grid.steps_per_beat);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::music::chords::Quality;

    #[test]
    fn places_follow_bars_meters_positions_and_chords() {
        let c = Chord {
            root: 0,
            quality: Quality::Maj,
        };
        let ids: Vec<u32> = [
            Token::Bos,
            Token::Bar,
            Token::Position(0),
            Token::Chord(Some(c)),
            Token::Pitch(60),
            Token::Bar,
            Token::Meter(3),
            Token::Position(6),
            Token::Pitch(62),
            Token::Bar,
            Token::Position(2),
        ]
        .iter()
        .map(|t| t.id())
        .collect();
        let p = places(&ids);
        assert_eq!(p[0].bar, None);
        assert_eq!((p[4].bar, p[4].beat, p[4].chord), (Some(0), 0.0, Some(c)));
        assert_eq!((p[5].bar, p[5].beat, p[5].position), (Some(1), 4.0, 0));
        assert_eq!(
            (p[8].beat, p[8].position),
            (5.5, 6),
            "a 3/4 bar from beat 4"
        );
        assert_eq!(p[10].beat, 7.5, "after the 3-beat bar");
        assert_eq!(p[10].chord, Some(c), "the chord stays in force");
    }
}
