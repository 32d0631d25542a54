//! Decoding a token sequence back into notes, tempo and meter changes, chords per beat and the
//! grid they were on.

use super::grammar::{TokenError, check_grammar};
use super::vocab::{DEFAULT_BAR_BEATS, STEPS_PER_BEAT, Token, bin_bpm, bin_velocity};
use crate::music::chords::Chord;
use crate::music::grid::Grid;
use crate::music::midi::{Note, TempoChange, TimeSignature};

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
