//! The token grammar: [`Grammar`], where a sequence stands and which tokens may come next (to
//! check a sequence or mask a model's logits), and [`TokenError`].

use super::vocab::{
    DEFAULT_BAR_BEATS, MAX_BAR_BEATS, MAX_DURATION, STEPS_PER_BEAT, TEMPO_BINS, Token,
    VELOCITY_BINS, VOCAB_SIZE,
};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TokenError {
    #[error("tokens need a grid of {STEPS_PER_BEAT} steps per beat, not {0}")]
    StepsPerBeat(usize),
    #[error("token {index} ({token}) cannot come here: {reason}")]
    Grammar {
        index: usize,
        token: String,
        reason: &'static str,
    },
}

/// Where a token sequence stands, for checking it and for constraining sampling.
#[derive(Clone, Debug, PartialEq)]
pub struct Grammar {
    state: State,
    /// Length of the current bar in beats.
    bar_beats: usize,
    /// Position of the current event and pitch of the last note there.
    position: Option<u8>,
    last_pitch: Option<u8>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Before anything: `Bos` or `Bar`.
    Start,
    /// After `Bos`: a `Bar` must come.
    Begun,
    AfterBar,
    AfterMeter,
    AfterPosition,
    AfterChord,
    AfterTempo,
    AfterPitch,
    AfterVelocity,
    AfterNote,
    Ended,
}

impl Default for Grammar {
    fn default() -> Self {
        Self::new()
    }
}

impl Grammar {
    pub fn new() -> Self {
        Self {
            state: State::Start,
            bar_beats: DEFAULT_BAR_BEATS,
            position: None,
            last_pitch: None,
        }
    }

    /// Why `token` may not come next, or `None` when it may.
    pub fn check(&self, token: Token) -> Option<&'static str> {
        use State::*;
        let positions = self.bar_beats * STEPS_PER_BEAT;
        let position_ok = |p: u8| {
            if (p as usize) >= positions {
                Some("the position is past the end of the bar")
            } else if self.position.is_some_and(|q| p <= q) {
                Some("positions must increase within a bar")
            } else {
                None
            }
        };
        let s = self.state;
        match token {
            Token::Pad => (s != Ended).then_some("padding only after the end"),
            Token::Bos => (s != Start).then_some("BOS only at the start"),
            Token::Eos => matches!(
                s,
                Start | Begun | AfterPitch | AfterVelocity | AfterPosition | Ended
            )
            .then_some("EOS only between events"),
            Token::Bar => matches!(s, AfterPosition | AfterPitch | AfterVelocity | Ended)
                .then_some("a bar cannot start inside an event"),
            Token::Meter(b) => {
                if s != AfterBar {
                    Some("a meter only right after a bar")
                } else if b == 0 || b as usize > MAX_BAR_BEATS {
                    Some("meters are 1 to 16 beats")
                } else {
                    None
                }
            }
            Token::Position(p) => match s {
                AfterBar | AfterMeter | AfterChord | AfterTempo | AfterNote => position_ok(p),
                _ => Some("a position only between events"),
            },
            Token::Chord(_) => {
                (s != AfterPosition).then_some("a chord only right after a position")
            }
            Token::Tempo(t) => {
                if !matches!(s, AfterPosition | AfterChord) {
                    Some("a tempo only after a position or a chord")
                } else if t as usize >= TEMPO_BINS {
                    Some("no such tempo bin")
                } else {
                    None
                }
            }
            Token::Pitch(p) => match s {
                AfterPosition | AfterChord | AfterTempo => (p >= 128).then_some("no such pitch"),
                AfterNote if self.last_pitch.is_some_and(|q| p <= q) => {
                    Some("notes at one position go up in pitch")
                }
                AfterNote => (p >= 128).then_some("no such pitch"),
                _ => Some("a pitch only after a position, chord, tempo or note"),
            },
            Token::Velocity(v) => {
                if s != AfterPitch {
                    Some("a velocity only after a pitch")
                } else if v as usize >= VELOCITY_BINS {
                    Some("no such velocity bin")
                } else {
                    None
                }
            }
            Token::Duration(d) => {
                if s != AfterVelocity {
                    Some("a duration only after a velocity")
                } else if d == 0 || d as usize > MAX_DURATION {
                    Some("durations are 1 to 64 steps")
                } else {
                    None
                }
            }
        }
    }

    /// The grammar as four numbers, as the fused continuation steps hold it on the GPU
    /// (`shaders/continuation_steps.wgsl`): the state's index, the bar's beats, the position
    /// and the last pitch (`u32::MAX` for none).
    pub fn packed(&self) -> [u32; 4] {
        [
            self.state as u32,
            self.bar_beats as u32,
            self.position.map_or(u32::MAX, u32::from),
            self.last_pitch.map_or(u32::MAX, u32::from),
        ]
    }

    /// Takes `token`, or says why it cannot come here (the state is then unchanged).
    pub fn advance(&mut self, token: Token) -> Result<(), &'static str> {
        if let Some(reason) = self.check(token) {
            return Err(reason);
        }
        use State::*;
        self.state = match token {
            Token::Pad | Token::Eos => Ended,
            Token::Bos => Begun,
            Token::Bar => {
                self.position = None;
                self.last_pitch = None;
                AfterBar
            }
            Token::Meter(b) => {
                self.bar_beats = b as usize;
                AfterMeter
            }
            Token::Position(p) => {
                self.position = Some(p);
                self.last_pitch = None;
                AfterPosition
            }
            Token::Chord(_) => AfterChord,
            Token::Tempo(_) => AfterTempo,
            Token::Pitch(p) => {
                self.last_pitch = Some(p);
                AfterPitch
            }
            Token::Velocity(_) => AfterVelocity,
            Token::Duration(_) => AfterNote,
        };
        Ok(())
    }

    /// Which token ids may come next (`VOCAB_SIZE` entries), to mask a model's logits.
    pub fn allowed(&self) -> Vec<bool> {
        (0..VOCAB_SIZE as u32)
            .map(|id| Token::from_id(id).is_some_and(|t| self.check(t).is_none()))
            .collect()
    }

    /// Length in beats of the bar in force.
    pub fn bar_beats(&self) -> usize {
        self.bar_beats
    }

    /// True once `Eos` (or padding) has been taken.
    pub fn is_ended(&self) -> bool {
        self.state == State::Ended
    }
}

/// Checks a whole sequence.
pub fn check_grammar(tokens: &[Token]) -> Result<(), TokenError> {
    let mut g = Grammar::new();
    for (index, &t) in tokens.iter().enumerate() {
        g.advance(t).map_err(|reason| TokenError::Grammar {
            index,
            token: t.to_string(),
            reason,
        })?;
    }
    Ok(())
}
