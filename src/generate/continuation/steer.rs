//! A continuation's steering, as parts ([`Steer`], shared by every task that samples). The
//! model proposes every token; each part that leans the next one — the prompt's key held on
//! unplanned bars ([`Key`]), the density asked ([`Density`]), the echo of a bar the phrase lane
//! repeats ([`Echo`]) — is a small type behind [`Steer`], and [`Steering`] composes them in one
//! order. The chords planned for the new bars
//! ([`Plan`]) do not lean: they mask the model's own chords on a planned bar and write the
//! planned changes where they fall. `continue_tokens` asks the plan for a forced token, else
//! the steering for its lean, draws, and tells both what was written.

use std::collections::VecDeque;

use super::density::Density;
use super::echo::Echo;
use super::key::Key;
use crate::generate::sample::Sampling;
use crate::generate::spread;
use crate::generate::steer::{Steer, lean_all};
use crate::music::chords::Chord;
use crate::music::labels::PhraseLabel;
use crate::music::tokens::places::TokenPlace;
use crate::music::tokens::{self, Token};

/// Where a continuation stands when its next token is drawn.
pub(super) struct Now<'a> {
    /// The chord in force (the last `Chord` token's).
    pub chord: Option<Chord>,
    /// Whether the new bar's chords are planned (given in the lane, or a repeat's borrowed).
    pub planned_bar: bool,
    /// The last token written, and its place.
    pub last: Option<Token>,
    pub place: Option<&'a TokenPlace>,
    /// The beats of a bar in the meter in force.
    pub bar_beats: usize,
    /// The sampling temperature (a lean keeps its effect on probabilities the same at any).
    pub temperature: f32,
    /// The tokens the grammar (and the plan) allow next: a part leans only these.
    pub allowed: &'a [bool],
}

// Each part below adds its lean to the logits before the temperature divides them.

/// The prompt's key, held at `strength` on bars whose chords nobody planned
/// ([`Sampling::key`]).
struct KeyHold {
    key: Key,
    strength: f32,
}

impl Steer<Now<'_>> for KeyHold {
    fn lean(&mut self, now: &Now, logits: &mut [f32]) -> bool {
        if now.planned_bar {
            return false;
        }
        let (chord, allowed) = (now.chord, now.allowed);
        self.key
            .tilt(self.strength, chord, allowed, logits, now.temperature);
        true
    }
}

impl Steer<Now<'_>> for Density {
    fn lean(&mut self, now: &Now, logits: &mut [f32]) -> bool {
        let Some(place) = now.place.filter(|_| self.counting()) else {
            return false;
        };
        self.tilt(
            place,
            now.last,
            now.bar_beats,
            now.allowed,
            logits,
            now.temperature,
        );
        true
    }
}

/// The echo of the bar a repeat's first occurrence played there, at `strength`
/// ([`Sampling::echo`]).
struct Echoing {
    echo: Echo,
    strength: f32,
}

impl Echoing {
    /// The token the echo leans towards, if it is allowed.
    fn expected(&self, now: &Now) -> Option<usize> {
        self.echo
            .expected(now.chord)
            .map(|t| t.id() as usize)
            .filter(|&e| now.allowed[e])
    }
}

impl Steer<Now<'_>> for Echoing {
    fn lean(&mut self, now: &Now, logits: &mut [f32]) -> bool {
        let Some(e) = self.expected(now) else {
            return false;
        };
        // e^strength times the probability, whatever the temperature.
        logits[e] += self.strength * now.temperature.max(1e-4);
        true
    }
}

/// The parts a continuation's sampling leans with, composed in one order (the key, the
/// density, the echo: their leans add up in that order).
pub(super) struct Steering<'a> {
    key: Option<KeyHold>,
    density: Option<Density>,
    /// Whether the density steers planned bars too (asked for), or only the model's own.
    density_on_plan: bool,
    echo: Option<Echoing>,
    phrases: &'a [Option<PhraseLabel>],
}

impl<'a> Steering<'a> {
    /// The parts `sampling` asks for, measured on the prompt (`prompt`'s ids, `places` one
    /// per id, `bar_beats` the meter in force at its end); `phrases` is the phrase lane by bar
    /// of the music, which the echo follows.
    pub(super) fn new(
        sampling: &Sampling,
        prompt: &[u32],
        places: &[TokenPlace],
        bar_beats: usize,
        phrases: &'a [Option<PhraseLabel>],
    ) -> Self {
        Self {
            key: (sampling.key > 0.0)
                .then(|| Key::new(prompt, places, bar_beats))
                .flatten()
                .map(|key| KeyHold {
                    key,
                    strength: sampling.key,
                }),
            density: sampling
                .density
                .and_then(|f| Density::new(f, prompt, places, bar_beats)),
            density_on_plan: sampling.density_on_plan,
            echo: (sampling.echo > 0.0).then(|| Echoing {
                echo: Echo::default(),
                strength: sampling.echo,
            }),
            phrases,
        }
    }

    /// The next token's logits leaned by every part that leans it, or `None` when none does.
    pub(super) fn lean(&mut self, now: &Now, logits: &[f32]) -> Option<Vec<f32>> {
        type Part<'p, 'n> = &'p mut dyn Steer<Now<'n>>;
        let parts: [Option<Part>; 3] = [
            self.key.as_mut().map(|p| p as Part),
            self.density.as_mut().map(|p| p as Part),
            self.echo.as_mut().map(|p| p as Part),
        ];
        let mut parts: Vec<Part> = parts.into_iter().flatten().collect();
        lean_all(&mut parts, now, logits)
    }

    /// Hears `token` as it is written (before the grammar moves past it).
    pub(super) fn written(&mut self, token: Token) {
        if let Some(d) = self.density.as_mut() {
            d.advance(token);
        }
    }

    /// Hears `token` placed at `place` (the last of `history`, `places` one per token): at a
    /// bar line the echo finds the bar it repeats and, where nobody planned the bar's chords,
    /// lends `plan` the first occurrence's (`chord` the one in force); the density then knows
    /// whether it counts the bar.
    pub(super) fn placed(
        &mut self,
        token: Token,
        place: TokenPlace,
        history: &[u32],
        places: &[TokenPlace],
        plan: &mut Plan,
        chord: Option<Option<Chord>>,
    ) {
        if let Some(e) = self.echo.as_mut() {
            match (token, place.bar) {
                (Token::Bar, Some(bar)) => {
                    e.echo = Echo::of_bar(bar as usize, self.phrases, history, places);
                    plan.borrow(e.echo.chord_changes(), chord);
                }
                _ => e.echo.advance(token),
            }
        }
        // The default density leaves planned bars (chords given, or a repeat's borrowed) to
        // the model and the plan.
        if let (Token::Bar, Some(d)) = (token, self.density.as_mut()) {
            d.count(self.density_on_plan || !plan.planned_bar, place.beat);
        }
    }
}

/// The chords planned for the new bars: `cells[k]`, where given and not empty, is new bar
/// `k`'s chord cell (its chords share the bar's beats evenly, as [`spread`] lays them out). On
/// a planned bar the model writes no chord of its own, and every change of chord the plan
/// holds is written where it falls (`Position p, Chord c`), before the token that would step
/// past it.
pub(super) struct Plan<'a> {
    cells: &'a [Vec<Option<Chord>>],
    /// The changes the current new bar still has to write: (step in the bar, chord).
    changes: VecDeque<(u8, Option<Chord>)>,
    /// Tokens to write before the model draws again.
    forced: VecDeque<Token>,
    /// Whether the current new bar's chords are planned.
    pub planned_bar: bool,
}

impl<'a> Plan<'a> {
    pub(super) fn new(cells: &'a [Vec<Option<Chord>>]) -> Self {
        Self {
            cells,
            changes: VecDeque::new(),
            forced: VecDeque::new(),
            planned_bar: false,
        }
    }

    /// The next token the plan writes, if the grammar allows it (one it does not drops what
    /// the plan was writing).
    pub(super) fn forced(&mut self, allowed: &[bool]) -> Option<Token> {
        match self.forced.pop_front() {
            Some(t) if allowed[t.id() as usize] => Some(t),
            _ => {
                self.forced.clear();
                None
            }
        }
    }

    /// Takes the model's own chords away on a planned bar.
    pub(super) fn mask(&self, allowed: &mut [bool]) {
        if self.planned_bar {
            for id in Token::Chord(None).id()..Token::Tempo(0).id() {
                allowed[id as usize] = false;
            }
        }
    }

    /// Whether a planned change is due before the drawn `token`: then the change is written
    /// first, and the token after it (unless it is the change's own position), and the model
    /// does not write `token` now.
    pub(super) fn due_before(&mut self, token: Token) -> bool {
        let Some(written) = planned_changes(&mut self.changes, token) else {
            return false;
        };
        let last = written.iter().rev().find_map(|t| match t {
            Token::Position(p) => Some(*p),
            _ => None,
        });
        self.forced.extend(written);
        if !matches!(token, Token::Position(p) if Some(p) == last) {
            self.forced.push_back(token);
        }
        true
    }

    /// New bar `k` begins (`bar_beats` long, `chord` in force before it): its planned changes.
    pub(super) fn start_bar(&mut self, k: usize, bar_beats: usize, chord: Option<Option<Chord>>) {
        let cell = self.cells.get(k).map_or(&[][..], |c| &c[..]);
        self.planned_bar = !cell.is_empty();
        self.changes.clear();
        let mut before = chord;
        for (beat, c) in spread(cell, bar_beats).into_iter().enumerate() {
            let step = beat * tokens::STEPS_PER_BEAT;
            if self.planned_bar && before != Some(c) && step < tokens::MAX_POSITIONS {
                self.changes.push_back((step as u8, c));
                before = Some(c);
            }
        }
    }

    /// A repeat's first occurrence's chord changes (step, chord), taken where nobody planned
    /// the bar's chords (`chord` in force before them).
    fn borrow(&mut self, changes: Vec<(u8, Option<Chord>)>, chord: Option<Option<Chord>>) {
        if self.planned_bar {
            return;
        }
        let mut before = chord;
        for (at, c) in changes {
            if before != Some(c) {
                self.changes.push_back((at, c));
                before = Some(c);
            }
        }
        self.planned_bar = !self.changes.is_empty();
    }
}

/// The planned changes (`Position, Chord` pairs) due before `token` is written: those at or
/// before its position, or all that are left when it ends the bar. `None` when none is due.
fn planned_changes(
    changes: &mut VecDeque<(u8, Option<Chord>)>,
    token: Token,
) -> Option<Vec<Token>> {
    let due = |at: u8| match token {
        Token::Position(p) => at <= p,
        Token::Bar | Token::Eos => true,
        _ => false,
    };
    let mut written = Vec::new();
    while let Some(&(at, chord)) = changes.front()
        && due(at)
    {
        changes.pop_front();
        written.extend([Token::Position(at), Token::Chord(chord)]);
    }
    (!written.is_empty()).then_some(written)
}
