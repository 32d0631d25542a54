//! Piano rolls: notes quantised onto a [`Grid`] as separate onset and sustain planes, several
//! tracks side by side, and back to notes.

pub use super::grid::Grid;
use super::midi::{Note, Track};

/// The velocity of a generated piano note (the models write no velocities): the page and the
/// CLI write the same.
pub const GENERATED_VELOCITY: u8 = 72;

/// Number of MIDI pitches.
pub const PITCHES: usize = 128;

/// The keys a piano has, A0 to C8: the only pitches a written piano part strikes (the rolls
/// keep all 128 MIDI pitches, and a model's odds for the others are small but not nothing).
pub const PIANO_KEYS: std::ops::RangeInclusive<usize> = 21..=108;

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

    /// The velocity of the onset at (`step`, `pitch`), 0 where none.
    pub fn velocity(&self, step: usize, pitch: usize) -> u8 {
        self.velocity[step * PITCHES + pitch]
    }

    /// Sets the velocity of the onset at (`step`, `pitch`) (nothing where there is none).
    pub fn set_velocity(&mut self, step: usize, pitch: usize, velocity: u8) {
        let i = step * PITCHES + pitch;
        if self.onset[i] {
            self.velocity[i] = velocity.max(1);
        }
    }

    /// Keeps the first `steps` steps only.
    pub fn truncate(&mut self, steps: usize) {
        self.num_steps = self.num_steps.min(steps);
        for plane in [&mut self.onset, &mut self.sustain] {
            plane.truncate(self.num_steps * PITCHES);
        }
        self.velocity.truncate(self.num_steps * PITCHES);
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

/// The part a track plays, as POP909 names them: the models take melody (and bridge) and
/// write the piano.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Melody,
    Bridge,
    Piano,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Melody, Role::Bridge, Role::Piano];

    /// Track name on export (POP909's names).
    pub fn track_name(self) -> &'static str {
        match self {
            Role::Melody => "MELODY",
            Role::Bridge => "BRIDGE",
            Role::Piano => "PIANO",
        }
    }

    /// The role of a track named like POP909's tracks (any case), if it is one of them.
    pub fn from_track_name(name: &str) -> Option<Role> {
        Role::ALL
            .into_iter()
            .find(|r| r.track_name().eq_ignore_ascii_case(name.trim()))
    }

    /// MIDI channel (0-based) on export: one per role, never the drum channel.
    pub fn channel(self) -> u8 {
        self as u8
    }
}

/// One piano roll per role, all on the same grid.
#[derive(Clone, Debug, PartialEq)]
pub struct MultiRoll {
    pub melody: PianoRoll,
    pub bridge: PianoRoll,
    pub piano: PianoRoll,
}

impl MultiRoll {
    pub fn new(num_steps: usize) -> Self {
        Self {
            melody: PianoRoll::new(num_steps),
            bridge: PianoRoll::new(num_steps),
            piano: PianoRoll::new(num_steps),
        }
    }

    /// Quantises the tracks given with their roles onto `grid`; several tracks may share a role.
    pub fn from_tracks<'a>(
        tracks: impl IntoIterator<Item = (Role, &'a [Note])>,
        grid: &Grid,
    ) -> Self {
        let mut notes: [Vec<&Note>; 3] = Default::default();
        for (role, track) in tracks {
            notes[role as usize].extend(track);
        }
        let [melody, bridge, piano] = notes.map(|n| PianoRoll::from_notes(n, grid));
        Self {
            melody,
            bridge,
            piano,
        }
    }

    pub fn num_steps(&self) -> usize {
        self.melody.num_steps
    }

    /// Keeps the first `steps` steps of every roll.
    pub fn truncate(&mut self, steps: usize) {
        for roll in [&mut self.melody, &mut self.bridge, &mut self.piano] {
            roll.truncate(steps);
        }
    }

    pub fn get(&self, role: Role) -> &PianoRoll {
        match role {
            Role::Melody => &self.melody,
            Role::Bridge => &self.bridge,
            Role::Piano => &self.piano,
        }
    }

    pub fn get_mut(&mut self, role: Role) -> &mut PianoRoll {
        match role {
            Role::Melody => &mut self.melody,
            Role::Bridge => &mut self.bridge,
            Role::Piano => &mut self.piano,
        }
    }

    /// Back to one named MIDI track per role that holds notes (program 0, the role's channel).
    pub fn to_tracks(&self, grid: &Grid, default_velocity: u8) -> Vec<Track> {
        Role::ALL
            .into_iter()
            .map(|role| Track {
                pedal: Vec::new(),
                name: role.track_name().to_string(),
                instrument: String::new(),
                program: Some(0),
                notes: self
                    .get(role)
                    .to_notes(grid, role.channel(), default_velocity),
            })
            .filter(|t| !t.notes.is_empty())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::music::midi::tests::note;

    #[test]
    fn multi_track_rolls_keep_their_roles_and_export_as_named_tracks() {
        let g = Grid::quarters(480, 1920, 4);
        let melody = [note(72, 0, 480)];
        let piano = [note(48, 0, 960), note(55, 480, 960)];
        let rolls =
            MultiRoll::from_tracks([(Role::Melody, &melody[..]), (Role::Piano, &piano[..])], &g);
        assert!(rolls.melody.onset(0, 72) && !rolls.piano.sustain(0, 72));
        assert!(rolls.get(Role::Piano).onset(4, 55));
        let tracks = rolls.to_tracks(&g, 64);
        let names: Vec<&str> = tracks.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["MELODY", "PIANO"], "empty roles are left out");
        assert_eq!(tracks[1].notes.len(), 2);
        assert!(tracks[1].notes.iter().all(|n| n.channel == 2));
        assert_eq!(Role::from_track_name(" piano"), Some(Role::Piano));
        assert_eq!(Role::from_track_name("Lead"), None);
    }

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
