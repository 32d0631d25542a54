//! REMI-style tokens for continuation (Huang & Yang's REMI, as in the SPE paper's pop-piano
//! experiment): bar, meter, position in bar, chord, tempo, and notes as pitch, velocity and
//! duration. A grammar says which tokens may come next, so sampling can be constrained to
//! sequences that decode.
//!
//! A bar is `Bar [Meter] (Position [Chord] [Tempo] (Pitch Velocity Duration)*)*`: positions
//! increase within a bar, notes at one position go up in pitch, and a `Meter` token follows
//! `Bar` only when the bar's length in beats changes (bars are 4 beats until told otherwise).

use std::fmt;

use super::chords::{Chord, PITCH_CLASS_NAMES, Quality};
use super::grid::Grid;
use super::midi::{Note, TempoChange, TimeSignature};

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

fn velocity_bin(v: u8) -> u8 {
    (v as usize * VELOCITY_BINS / 128).min(VELOCITY_BINS - 1) as u8
}

/// The velocity a bin stands for (the middle of the bin, at least 1).
pub fn bin_velocity(bin: u8) -> u8 {
    ((bin as usize * 128 / VELOCITY_BINS) + 64 / VELOCITY_BINS).clamp(1, 127) as u8
}

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

/// Encodes `notes` on `grid` (4 steps per beat; bars from the grid, cut to 16 beats at most),
/// with chords per beat of the grid (a `Chord` token where the chord changes) and the tempo map
/// (a `Tempo` token at the start and where the tempo bin changes). Notes at the same step and
/// pitch are merged (the longest kept); durations are at least one step and at most
/// [`MAX_DURATION`]. The sequence starts with `Bos` and ends with `Eos`.
pub fn encode(
    notes: &[Note],
    grid: &Grid,
    beat_chords: &[Option<Chord>],
    tempos: &[TempoChange],
) -> Result<Vec<Token>, TokenError> {
    if grid.steps_per_beat != STEPS_PER_BEAT {
        return Err(TokenError::StepsPerBeat(grid.steps_per_beat));
    }
    let n = grid.num_steps();
    // Notes by start step: (pitch, duration, velocity), longest kept per pitch.
    let mut by_step: Vec<Vec<(u8, u8, u8)>> = vec![Vec::new(); n];
    for note in notes {
        let start = grid.step_at(note.start);
        if start >= n {
            continue;
        }
        let end = grid.step_at(note.end).max(start + 1);
        let duration = (end - start).min(MAX_DURATION) as u8;
        let at = &mut by_step[start];
        match at.iter_mut().find(|x| x.0 == note.pitch) {
            Some(x) if x.1 < duration => *x = (note.pitch, duration, velocity_bin(note.velocity)),
            Some(_) => {}
            None => at.push((note.pitch, duration, velocity_bin(note.velocity))),
        }
    }
    // Tempo bin in force at each step where it may change.
    let mut tempo_at: Vec<Option<u8>> = vec![None; n];
    let mut current = tempo_bin(60e6 / crate::music::midi::DEFAULT_MICROS_PER_QUARTER as f64);
    let mut changes = tempos.iter().peekable();
    for (step, slot) in tempo_at.iter_mut().enumerate() {
        let tick = grid.tick_at(step);
        while let Some(t) = changes.next_if(|t| t.tick <= tick) {
            current = tempo_bin(60e6 / t.micros_per_quarter.max(1) as f64);
        }
        *slot = Some(current);
    }
    let mut out = vec![Token::Bos];
    let mut bar_beats = DEFAULT_BAR_BEATS;
    let mut chord: Option<Option<Chord>> = None;
    let mut tempo: Option<u8> = None;
    for bar in 0..grid.num_bars() {
        let beats = grid.bar_beats(bar);
        // Bars longer than MAX_BAR_BEATS are cut.
        for sub in beats.clone().step_by(MAX_BAR_BEATS) {
            let len = (beats.end - sub).min(MAX_BAR_BEATS);
            out.push(Token::Bar);
            if len != bar_beats {
                out.push(Token::Meter(len as u8));
                bar_beats = len;
            }
            for pos in 0..len * STEPS_PER_BEAT {
                let step = sub * STEPS_PER_BEAT + pos;
                let mut events = Vec::new();
                if pos % STEPS_PER_BEAT == 0 {
                    let c = beat_chords.get(step / STEPS_PER_BEAT).copied().flatten();
                    if chord != Some(c) {
                        events.push(Token::Chord(c));
                        chord = Some(c);
                    }
                }
                if tempo != tempo_at[step] {
                    tempo = tempo_at[step];
                    events.push(Token::Tempo(tempo.unwrap_or(0)));
                }
                let mut at = std::mem::take(&mut by_step[step]);
                at.sort_unstable();
                for (pitch, duration, velocity) in at {
                    events.extend([
                        Token::Pitch(pitch),
                        Token::Velocity(velocity),
                        Token::Duration(duration),
                    ]);
                }
                if !events.is_empty() {
                    out.push(Token::Position(pos as u8));
                    out.extend(events);
                }
            }
        }
    }
    out.push(Token::Eos);
    Ok(out)
}

/// What a token sequence holds, on a quarter-note grid at `ppq`.
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded {
    pub notes: Vec<Note>,
    pub tempos: Vec<TempoChange>,
    /// Where the bar length changes, as n/4.
    pub time_signatures: Vec<TimeSignature>,
    /// Chord per beat, as the `Chord` tokens set them.
    pub beat_chords: Vec<Option<Chord>>,
    /// The grid the tokens were on: one beat per quarter note, bars as the tokens say.
    pub grid: Grid,
}

/// Decodes a sequence (checking its grammar first; a sequence may stop anywhere, as a
/// generated one does, but what it holds must be grammatical). Notes go on `channel`.
pub fn decode(tokens: &[Token], ppq: u16, channel: u8) -> Result<Decoded, TokenError> {
    check_grammar(tokens)?;
    let ppq = ppq.max(1);
    let step_ticks = ppq as f64 / STEPS_PER_BEAT as f64;
    let tick = |step: usize| (step as f64 * step_ticks).round() as u64;
    let mut notes = Vec::new();
    let mut tempos = Vec::new();
    let mut time_signatures = Vec::new();
    let mut chord_changes: Vec<(usize, Option<Chord>)> = Vec::new();
    let mut bar_starts = Vec::new();
    let mut bar_beats = DEFAULT_BAR_BEATS;
    let mut bar_start: Option<usize> = None; // first beat of the current bar
    let mut next_beat = 0; // first beat after the current bar
    let mut step = 0;
    let mut pending: Option<(u8, u8)> = None;
    for &t in tokens {
        match t {
            Token::Bar => {
                let start = next_beat;
                bar_start = Some(start);
                bar_starts.push(start);
                next_beat = start + bar_beats;
            }
            Token::Meter(b) => {
                bar_beats = b as usize;
                let start = bar_start.unwrap_or(0);
                next_beat = start + bar_beats;
                time_signatures.push(TimeSignature {
                    tick: tick(start * STEPS_PER_BEAT),
                    numerator: b,
                    denominator: 4,
                });
            }
            Token::Position(p) => step = bar_start.unwrap_or(0) * STEPS_PER_BEAT + p as usize,
            Token::Chord(c) => chord_changes.push((step / STEPS_PER_BEAT, c)),
            Token::Tempo(b) => tempos.push(TempoChange {
                tick: tick(step),
                micros_per_quarter: (60e6 / bin_bpm(b)).round() as u32,
            }),
            Token::Pitch(p) => pending = Some((p, 0)),
            Token::Velocity(v) => pending = pending.map(|(p, _)| (p, v)),
            Token::Duration(d) => {
                if let Some((pitch, v)) = pending.take() {
                    notes.push(Note {
                        pitch,
                        velocity: bin_velocity(v),
                        start: tick(step),
                        end: tick(step + d as usize),
                        channel,
                    });
                }
            }
            Token::Pad | Token::Bos | Token::Eos => {}
        }
    }
    let beats = next_beat.max(
        notes
            .iter()
            .map(|n| n.end.div_ceil(ppq as u64) as usize)
            .max()
            .unwrap_or(0),
    );
    let grid = Grid::new(
        (0..=beats.max(1)).map(|b| b as u64 * ppq as u64).collect(),
        STEPS_PER_BEAT,
        bar_starts,
    );
    let mut beat_chords = vec![None; grid.num_beats()];
    for (i, &(beat, c)) in chord_changes.iter().enumerate() {
        let until = chord_changes.get(i + 1).map_or(beat_chords.len(), |x| x.0);
        for slot in beat_chords.iter_mut().take(until).skip(beat) {
            *slot = c;
        }
    }
    notes.sort_by_key(|n| (n.start, n.pitch));
    Ok(Decoded {
        notes,
        tempos,
        time_signatures,
        beat_chords,
        grid,
    })
}

#[cfg(test)]
mod tests;
