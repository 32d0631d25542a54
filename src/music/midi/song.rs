//! A parsed MIDI file as plain data: [`Song`] with its [`Track`]s of [`Note`]s in ticks, the
//! tempo, time-signature and key-signature maps, and the tempo map's ticks-to-seconds maths.

/// One note. Times are absolute ticks at the song's `ppq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Note {
    pub pitch: u8,
    pub velocity: u8,
    pub start: u64,
    pub end: u64,
    pub channel: u8,
}

/// The sustain pedal's MIDI controller (the damper: 64 and up is down, values between 1 and 63
/// are kept as played, a half pedal).
pub const SUSTAIN: u8 = 64;
/// The sostenuto pedal's controller.
pub const SOSTENUTO: u8 = 66;
/// The soft pedal's (una corda) controller.
pub const SOFT: u8 = 67;
/// The pedals a track keeps.
pub const PEDALS: [u8; 3] = [SUSTAIN, SOSTENUTO, SOFT];

/// One pedal event: `controller` (one of [`PEDALS`]) set to `value` (0–127) at absolute `tick`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pedal {
    pub tick: u64,
    pub controller: u8,
    pub value: u8,
    pub channel: u8,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Track {
    pub name: String,
    pub instrument: String,
    /// The first program change on the track (General MIDI, 0 = acoustic grand piano).
    pub program: Option<u8>,
    /// Notes sorted by start, then pitch.
    pub notes: Vec<Note>,
    /// Pedal events in the order played (sorted by tick; equal ticks as in the file).
    pub pedal: Vec<Pedal>,
}

impl Track {
    /// True when every note is on channel 10 (index 9), the General MIDI drum channel.
    pub fn is_drums(&self) -> bool {
        !self.notes.is_empty() && self.notes.iter().all(|n| n.channel == 9)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TempoChange {
    pub tick: u64,
    /// Microseconds per quarter note.
    pub micros_per_quarter: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeSignature {
    pub tick: u64,
    pub numerator: u8,
    /// The denominator itself (4 for x/4), not its power of two.
    pub denominator: u16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySignature {
    pub tick: u64,
    /// Sharps (positive) or flats (negative), −7..=7.
    pub fifths: i8,
    pub minor: bool,
}

/// A parsed MIDI file. Maps are sorted by tick and start with an entry at tick 0 when the file
/// gives one (the tempo map always does: 120 bpm is MIDI's default).
#[derive(Clone, Debug, PartialEq)]
pub struct Song {
    /// Ticks per quarter note.
    pub ppq: u16,
    pub tempos: Vec<TempoChange>,
    pub time_signatures: Vec<TimeSignature>,
    pub key_signatures: Vec<KeySignature>,
    /// Tracks that hold notes, in file order (type 0 files are split by channel).
    pub tracks: Vec<Track>,
}

/// MIDI's default tempo: 120 quarter notes per minute.
pub const DEFAULT_MICROS_PER_QUARTER: u32 = 500_000;

impl Song {
    /// Seconds at `tick`, following the tempo map.
    pub fn seconds_at(&self, tick: u64) -> f64 {
        let mut seconds = 0.0;
        let mut last_tick = 0u64;
        let mut tempo = DEFAULT_MICROS_PER_QUARTER;
        for change in &self.tempos {
            if change.tick >= tick {
                break;
            }
            seconds += (change.tick - last_tick) as f64 * tempo as f64 / 1e6 / self.ppq as f64;
            last_tick = change.tick;
            tempo = change.micros_per_quarter;
        }
        seconds + (tick - last_tick) as f64 * tempo as f64 / 1e6 / self.ppq as f64
    }

    /// Tick at `seconds`, following the tempo map (the inverse of [`Song::seconds_at`]).
    pub fn tick_at_seconds(&self, seconds: f64) -> u64 {
        let mut elapsed = 0.0;
        let mut last_tick = 0u64;
        let mut tempo = DEFAULT_MICROS_PER_QUARTER;
        let ticks_per_second = |tempo: u32| self.ppq as f64 * 1e6 / tempo as f64;
        for change in &self.tempos {
            let span = (change.tick - last_tick) as f64 / ticks_per_second(tempo);
            if elapsed + span > seconds {
                break;
            }
            elapsed += span;
            last_tick = change.tick;
            tempo = change.micros_per_quarter;
        }
        let rest = (seconds - elapsed).max(0.0) * ticks_per_second(tempo);
        last_tick + rest.round() as u64
    }

    /// Tick just after the last note ends.
    pub fn end_tick(&self) -> u64 {
        self.tracks
            .iter()
            .flat_map(|t| t.notes.iter().map(|n| n.end))
            .max()
            .unwrap_or(0)
    }

    pub fn note_count(&self) -> usize {
        self.tracks.iter().map(|t| t.notes.len()).sum()
    }
}
