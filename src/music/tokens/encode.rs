//! Encoding notes, chords and the tempo map on a sixteenth-note grid as a token sequence.

use super::grammar::TokenError;
use super::vocab::{
    DEFAULT_BAR_BEATS, MAX_BAR_BEATS, MAX_DURATION, STEPS_PER_BEAT, Token, tempo_bin, velocity_bin,
};
use crate::music::chords::Chord;
use crate::music::grid::Grid;
use crate::music::midi::{Note, TempoChange};

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
