//! Piano rolls: notes quantised onto a [`Grid`] as separate onset and sustain planes, several
//! tracks side by side, and back to notes.

pub use super::grid::Grid;
use super::midi::Note;

/// Number of MIDI pitches.
pub const PITCHES: usize = 128;

/// A piano roll on a grid: `onset[step][pitch]` is true where a note starts, `sustain[step][pitch]`
/// where one sounds (onsets included). Velocity is kept per onset for the way back to notes.
#[derive(Clone, Debug, PartialEq)]
pub struct PianoRoll {
    pub num_steps: usize,
    onset: Vec<bool>,
    sustain: Vec<bool>,
    velocity: Vec<u8>,
}

impl PianoRoll {
    pub fn new(num_steps: usize) -> Self {
        Self {
            num_steps,
            onset: vec![false; num_steps * PITCHES],
            sustain: vec![false; num_steps * PITCHES],
            velocity: vec![0; num_steps * PITCHES],
        }
    }

    /// Quantises `notes` onto `grid`. A note shorter than a step still lasts one step; a note
    /// re-struck while it sounds gets a fresh onset.
    pub fn from_notes<'a>(notes: impl IntoIterator<Item = &'a Note>, grid: &Grid) -> Self {
        let mut roll = Self::new(grid.num_steps());
        for n in notes {
            let start = grid.step_at(n.start);
            if start >= roll.num_steps {
                continue;
            }
            let end = grid.step_at(n.end).max(start + 1).min(roll.num_steps);
            let p = n.pitch as usize;
            roll.onset[start * PITCHES + p] = true;
            roll.velocity[start * PITCHES + p] = roll.velocity[start * PITCHES + p].max(n.velocity);
            for s in start..end {
                roll.sustain[s * PITCHES + p] = true;
            }
        }
        roll
    }

    pub fn onset(&self, step: usize, pitch: usize) -> bool {
        self.onset[step * PITCHES + pitch]
    }

    pub fn sustain(&self, step: usize, pitch: usize) -> bool {
        self.sustain[step * PITCHES + pitch]
    }

    /// Sets a cell: an onset implies sustain.
    pub fn set(&mut self, step: usize, pitch: usize, onset: bool, sustain: bool, velocity: u8) {
        let i = step * PITCHES + pitch;
        self.onset[i] = onset;
        self.sustain[i] = sustain || onset;
        self.velocity[i] = if onset { velocity } else { 0 };
    }

    /// Onset plane, row-major `[num_steps, 128]`, as 0/1 floats for a model.
    pub fn onset_plane(&self) -> Vec<f32> {
        self.onset.iter().map(|&b| b as u8 as f32).collect()
    }

    /// Sustain plane, row-major `[num_steps, 128]`, as 0/1 floats for a model.
    pub fn sustain_plane(&self) -> Vec<f32> {
        self.sustain.iter().map(|&b| b as u8 as f32).collect()
    }

    /// Back to notes on `grid`: a note starts at an onset (or where sustain begins after
    /// silence) and lasts while sustain continues without a new onset. Notes without a recorded
    /// velocity get `default_velocity`.
    pub fn to_notes(&self, grid: &Grid, channel: u8, default_velocity: u8) -> Vec<Note> {
        let mut notes = Vec::new();
        for p in 0..PITCHES {
            let mut open: Option<(usize, u8)> = None;
            for s in 0..=self.num_steps {
                let (on, held) = if s < self.num_steps {
                    (self.onset(s, p), self.sustain(s, p))
                } else {
                    (false, false)
                };
                let starts = on || (held && open.is_none());
                if let Some((start, vel)) = open
                    && (starts || !held)
                {
                    notes.push(Note {
                        pitch: p as u8,
                        velocity: vel,
                        start: grid.tick_at(start),
                        end: grid.tick_at(s),
                        channel,
                    });
                    open = None;
                }
                if starts {
                    let v = self.velocity[s * PITCHES + p];
                    open = Some((s, if v > 0 { v } else { default_velocity }));
                }
            }
        }
        notes.sort_by_key(|n| (n.start, n.pitch));
        notes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::music::midi::tests::note;

    #[test]
    fn on_grid_notes_survive_the_round_trip() {
        let g = Grid::quarters(480, 1920, 4);
        let notes = vec![
            note(60, 0, 480),
            note(60, 480, 600),
            note(64, 120, 1920),
            note(67, 240, 360),
        ];
        let roll = PianoRoll::from_notes(&notes, &g);
        assert!(
            roll.onset(4, 60) && roll.sustain(4, 60),
            "re-struck note keeps its onset"
        );
        assert!(roll.sustain(15, 64) && !roll.onset(15, 64));
        let mut expected = notes.clone();
        expected.sort_by_key(|n| (n.start, n.pitch));
        assert_eq!(roll.to_notes(&g, 0, 64), expected);
    }

    #[test]
    fn off_grid_notes_move_to_the_nearest_step_and_never_vanish() {
        let g = Grid::quarters(480, 960, 4);
        let roll = PianoRoll::from_notes(&[note(50, 130, 140)], &g);
        let back = roll.to_notes(&g, 0, 64);
        assert_eq!(back.len(), 1);
        assert_eq!(
            (back[0].start, back[0].end),
            (120, 240),
            "at least one step long"
        );
    }

    #[test]
    fn sustain_without_onset_still_makes_a_note() {
        let g = Grid::quarters(480, 960, 4);
        let mut roll = PianoRoll::new(g.num_steps());
        for s in 2..5 {
            roll.set(s, 70, false, true, 0);
        }
        let back = roll.to_notes(&g, 3, 77);
        assert_eq!(
            back,
            vec![Note {
                pitch: 70,
                velocity: 77,
                start: 240,
                end: 600,
                channel: 3
            }]
        );
    }
}
