//! Echo: where the phrase lane says a new bar repeats a phrase heard before (`A8 B8 A8`: the
//! second `A`), sampling leans towards what the same bar of the phrase's first occurrence
//! played. The model proposes every token; the reference's next token — the onset, chord,
//! pitch, velocity and length it had there — gets `e^β` times its probability before top-p
//! ([`super::Sampling::echo`]), so a repeat comes back recognisably but varied, the way the
//! songs' own do (their repeated bars share about three quarters of their onsets with the
//! first time). A repeat whose chords are not planned takes the first occurrence's. Planned
//! chords still win: a chord change is written where the plan puts it,
//! and where the chord in force is not the one the first occurrence had there (a repeat over
//! a new progression), only its rhythm is echoed — positions, velocities and lengths, not
//! pitches.

use crate::music::chords::Chord;
use crate::music::labels::{PhraseLabel, first_occurrence};
use crate::music::tokens::Token;
use crate::music::tokens::places::TokenPlace;

/// The bar being echoed, as tokens (positions, chords, pitches, velocities, lengths; tempos
/// and meters left out), and how far the new bar has followed them.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Echo {
    reference: Vec<Token>,
    /// The chord in force at each reference token.
    chords: Vec<Option<Chord>>,
    next: usize,
}

impl Echo {
    /// The echo for music bar `bar` (its `Bar` token just written): the tokens of the bar it
    /// repeats among `history` (`places`: one per token), or nothing to echo.
    pub(super) fn of_bar(
        bar: usize,
        phrases: &[Option<PhraseLabel>],
        history: &[u32],
        places: &[TokenPlace],
    ) -> Self {
        let Some(source) = first_occurrence(phrases, bar) else {
            return Self::default();
        };
        let (reference, chords) = history
            .iter()
            .zip(places)
            .filter(|(_, p)| p.bar.is_some_and(|b| b as usize == source))
            .filter_map(|(&id, p)| match Token::from_id(id)? {
                t @ (Token::Position(_)
                | Token::Chord(_)
                | Token::Pitch(_)
                | Token::Velocity(_)
                | Token::Duration(_)) => Some((t, p.chord)),
                _ => None,
            })
            .unzip();
        Self {
            reference,
            chords,
            next: 0,
        }
    }

    /// The token that goes on echoing the reference (the bar line once all its notes are
    /// written); `None` when there is nothing to echo, or when it is a pitch and the chord in
    /// force (`chord`) is not the one the reference had there.
    pub(super) fn expected(&self, chord: Option<Chord>) -> Option<Token> {
        if self.reference.is_empty() {
            return None;
        }
        match self.reference.get(self.next) {
            Some(Token::Pitch(_)) if self.chords[self.next] != chord => None,
            Some(&t) => Some(t),
            None => Some(Token::Bar),
        }
    }

    /// The chord changes of the reference bar, (step, chord) in order: what a repeat plays
    /// when its own chords are not planned.
    pub(super) fn chord_changes(&self) -> Vec<(u8, Option<Chord>)> {
        let mut at = 0;
        let mut out = Vec::new();
        for t in &self.reference {
            match *t {
                Token::Position(p) => at = p,
                Token::Chord(c) => out.push((at, c)),
                _ => {}
            }
        }
        out
    }

    /// Follows the token just written: on with the reference where it agrees; at a position,
    /// to the reference's onset there (or its next one); at another pitch, to that pitch in
    /// the same onset of the reference, or on to its next onset.
    pub(super) fn advance(&mut self, token: Token) {
        let r = &self.reference;
        let next = self.next.min(r.len());
        self.next = match token {
            Token::Position(p) => r
                .iter()
                .position(|t| *t == Token::Position(p))
                .map(|i| i + 1)
                .or_else(|| {
                    r.iter()
                        .position(|t| matches!(t, Token::Position(q) if *q > p))
                })
                .unwrap_or(r.len()),
            Token::Pitch(_) => {
                let end = r[next..]
                    .iter()
                    .position(|t| matches!(t, Token::Position(_)))
                    .map_or(r.len(), |i| next + i);
                r[next..end]
                    .iter()
                    .position(|t| *t == token)
                    .map_or(end, |i| next + i + 1)
            }
            Token::Chord(_) if matches!(r.get(next), Some(Token::Chord(_))) => next + 1,
            Token::Velocity(_) if matches!(r.get(next), Some(Token::Velocity(_))) => next + 1,
            Token::Duration(_) if matches!(r.get(next), Some(Token::Duration(_))) => next + 1,
            _ => next,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::music::tokens::places::Places;

    fn label(letter: char, index: u16, bar: u16) -> Option<PhraseLabel> {
        Some(PhraseLabel {
            letter,
            index,
            bar,
            bars: 1,
        })
    }

    /// A one-bar phrase `A`, then `B`, then `A` again: the third bar echoes the first; a
    /// written token that agrees moves on, another position or pitch finds its place.
    #[test]
    fn a_repeated_bar_echoes_its_first_occurrence() {
        use Token::*;
        let bars: [&[Token]; 2] = [
            &[
                Position(0),
                Pitch(60),
                Velocity(20),
                Duration(4),
                Pitch(64),
                Velocity(20),
                Duration(4),
                Position(8),
                Pitch(67),
                Velocity(18),
                Duration(8),
            ],
            &[Position(4), Pitch(62), Velocity(20), Duration(4)],
        ];
        let mut history = vec![Bos.id()];
        for bar in bars {
            history.push(Bar.id());
            history.extend(bar.iter().map(|t| t.id()));
        }
        history.push(Bar.id());
        let mut walk = Places::default();
        let places: Vec<TokenPlace> = history.iter().map(|&id| walk.push(id)).collect();
        let phrases = [label('A', 0, 0), label('B', 1, 0), label('A', 2, 0)];
        let mut echo = Echo::of_bar(2, &phrases, &history, &places);
        assert_eq!(echo.expected(None), Some(Position(0)));
        for t in [Position(0), Pitch(60), Velocity(25)] {
            echo.advance(t);
        }
        assert_eq!(
            echo.expected(None),
            Some(Duration(4)),
            "a velocity of its own still follows"
        );
        echo.advance(Duration(2));
        assert_eq!(echo.expected(None), Some(Pitch(64)));
        echo.advance(Pitch(72));
        assert_eq!(
            echo.expected(None),
            Some(Position(8)),
            "a pitch it did not play: on to the next onset"
        );
        echo.advance(Position(3));
        assert_eq!(echo.expected(None), Some(Position(8)));
        echo.advance(Position(8));
        for t in [Pitch(67), Velocity(18), Duration(8)] {
            assert_eq!(echo.expected(None), Some(t));
            echo.advance(t);
        }
        assert_eq!(echo.expected(None), Some(Bar), "then the bar ends");
        // Over another chord than the first time, the rhythm is echoed, not the pitches.
        let mut echo = Echo::of_bar(2, &phrases, &history, &places);
        let f = crate::music::chords::Chord::parse("F").unwrap();
        echo.advance(Position(0));
        assert_eq!(echo.expected(f), None);
        echo.advance(Pitch(65));
        assert_eq!(echo.expected(f), Some(Position(8)));
        assert_eq!(echo.chord_changes(), [], "the first A had no chord token");
        // A first occurrence's chord changes are what an unplanned repeat plays.
        let c = crate::music::chords::Chord::parse("C").unwrap();
        let g = crate::music::chords::Chord::parse("G").unwrap();
        let with_chords = [
            Bos,
            Bar,
            Position(0),
            Chord(c),
            Pitch(60),
            Velocity(20),
            Duration(8),
            Position(8),
            Chord(g),
            Pitch(67),
            Velocity(20),
            Duration(8),
            Bar,
            Bar,
        ]
        .map(|t| t.id());
        let mut walk = Places::default();
        let at: Vec<TokenPlace> = with_chords.iter().map(|&id| walk.push(id)).collect();
        let repeat = [label('A', 0, 0), label('A', 1, 0)];
        let echo = Echo::of_bar(1, &repeat, &with_chords, &at);
        assert_eq!(echo.chord_changes(), [(0, c), (8, g)]);
        assert_eq!(echo.expected(None), Some(Position(0)));
        // B is no repeat, nor is the first A.
        assert_eq!(
            Echo::of_bar(1, &phrases, &history, &places).expected(None),
            None
        );
        assert_eq!(
            Echo::of_bar(0, &phrases, &history, &places).expected(None),
            None
        );
    }
}
