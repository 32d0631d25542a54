//! Standard MIDI Files in and out (with midly), as a [`Song`]: notes in ticks plus the tempo,
//! time-signature and key-signature maps. Bad input becomes a [`MidiError`] with a sentence a
//! person understands; limits keep a hostile file from exhausting memory or time.

use std::collections::VecDeque;

use midly::num::{u4, u7, u15, u24, u28};
use midly::{Format, Header, MetaMessage, MidiMessage, Smf, Timing, TrackEvent, TrackEventKind};

/// Largest file accepted (a long piano piece is well under 1 MB).
pub const MAX_FILE_BYTES: usize = 8 * 1024 * 1024;
/// Most notes accepted in one file.
pub const MAX_NOTES: usize = 200_000;
/// Longest piece accepted, in seconds.
pub const MAX_SECONDS: f64 = 2.0 * 60.0 * 60.0;
/// Most tracks accepted.
pub const MAX_TRACKS: usize = 256;
/// Longest piece accepted, in quarter notes (bounds every beat grid built on the song).
pub const MAX_QUARTERS: u64 = 20_000;
/// Most tempo, time-signature and key-signature events accepted, together.
pub const MAX_MAP_EVENTS: usize = 10_000;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MidiError {
    #[error("this file is empty")]
    Empty,
    #[error("this file is {0} bytes; MIDI files over {MAX_FILE_BYTES} bytes are not accepted")]
    TooLarge(usize),
    #[error("this is not a MIDI file, or it is damaged: {0}")]
    Malformed(String),
    #[error("this MIDI file has no tracks")]
    NoTracks,
    #[error("this MIDI file has {0} tracks; at most {MAX_TRACKS} are accepted")]
    TooManyTracks(usize),
    #[error(
        "this MIDI file uses SMPTE timecode timing, which is not supported; save it with \
         metrical (beats) timing"
    )]
    SmpteTiming,
    #[error("this MIDI file says it has 0 ticks per quarter note, which is impossible")]
    ZeroPpq,
    #[error("this MIDI file has more than {MAX_NOTES} notes")]
    TooManyNotes,
    #[error("this MIDI file lasts {0:.0} minutes; at most {max} minutes are accepted", max = MAX_SECONDS / 60.0)]
    TooLong(f64),
    #[error("this MIDI file has no notes")]
    NoNotes,
    #[error("this MIDI file is {0} quarter notes long; at most {MAX_QUARTERS} are accepted")]
    TooManyBeats(u64),
    #[error("this MIDI file has more than {MAX_MAP_EVENTS} tempo, time or key signature changes")]
    TooManyMapEvents,
}

/// One note. Times are absolute ticks at the song's `ppq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Note {
    pub pitch: u8,
    pub velocity: u8,
    pub start: u64,
    pub end: u64,
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

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).trim().to_string()
}

/// Whether any `MThd` in the file gives the SMPTE frame-rate byte 0x80 (-128). midly 0.5
/// negates that byte as an `i8`, which overflows (a panic wherever overflow checks are on), and
/// it reads every `MThd` chunk, not only the first: found twice by the `read_midi` fuzz target.
/// Any such file is SMPTE-timed, which is refused anyway.
fn smpte_overflow(bytes: &[u8]) -> bool {
    bytes
        .windows(4)
        .enumerate()
        .any(|(at, w)| w == b"MThd" && bytes.get(at + 12) == Some(&0x80))
}

/// Reads a Standard MIDI File of type 0, 1 or 2 (type 2's independent patterns are laid one
/// after another, as they would play). Overlapping notes of one pitch on one channel are paired
/// first-in first-out; a note still sounding at the end of its track ends there.
pub fn read_midi(bytes: &[u8]) -> Result<Song, MidiError> {
    if bytes.is_empty() {
        return Err(MidiError::Empty);
    }
    if bytes.len() > MAX_FILE_BYTES {
        return Err(MidiError::TooLarge(bytes.len()));
    }
    if smpte_overflow(bytes) {
        return Err(MidiError::SmpteTiming);
    }
    let smf = Smf::parse(bytes).map_err(|e| MidiError::Malformed(e.to_string()))?;
    let ppq = match smf.header.timing {
        Timing::Metrical(t) if t.as_int() == 0 => return Err(MidiError::ZeroPpq),
        Timing::Metrical(t) => t.as_int(),
        Timing::Timecode(..) => return Err(MidiError::SmpteTiming),
    };
    if smf.tracks.is_empty() {
        return Err(MidiError::NoTracks);
    }
    if smf.tracks.len() > MAX_TRACKS {
        return Err(MidiError::TooManyTracks(smf.tracks.len()));
    }

    let mut song = Song {
        ppq,
        tempos: Vec::new(),
        time_signatures: Vec::new(),
        key_signatures: Vec::new(),
        tracks: Vec::new(),
    };
    let sequential = smf.header.format == Format::Sequential;
    let mut offset = 0u64; // type 2: each pattern starts where the previous one ended
    let mut notes_seen = 0usize;
    for events in &smf.tracks {
        let parsed = read_track(events, offset, &mut song, &mut notes_seen)?;
        if sequential {
            offset = parsed.end_tick;
        }
        if smf.header.format == Format::SingleTrack {
            song.tracks
                .extend(split_by_channel(parsed.track, &parsed.programs));
        } else if !parsed.track.notes.is_empty() {
            song.tracks.push(parsed.track);
        }
    }
    song.tempos.sort_by_key(|t| t.tick);
    song.time_signatures.sort_by_key(|t| t.tick);
    song.key_signatures.sort_by_key(|t| t.tick);
    if song.note_count() == 0 {
        return Err(MidiError::NoNotes);
    }
    let quarters = song.end_tick() / song.ppq as u64;
    if quarters > MAX_QUARTERS {
        return Err(MidiError::TooManyBeats(quarters));
    }
    let seconds = song.seconds_at(song.end_tick());
    if seconds > MAX_SECONDS {
        return Err(MidiError::TooLong(seconds / 60.0));
    }
    Ok(song)
}

struct ParsedTrack {
    track: Track,
    end_tick: u64,
    /// First program change per channel (a type 0 file plays several instruments).
    programs: [Option<u8>; 16],
}

fn read_track(
    events: &[TrackEvent],
    offset: u64,
    song: &mut Song,
    notes_seen: &mut usize,
) -> Result<ParsedTrack, MidiError> {
    let mut track = Track::default();
    let mut programs = [None; 16];
    // Sounding notes per (channel, pitch): start tick and velocity, oldest first.
    let mut sounding: Vec<VecDeque<(u64, u8)>> = vec![VecDeque::new(); 16 * 128];
    let mut tick = offset;
    for event in events {
        tick += event.delta.as_int() as u64;
        let map_events = song.tempos.len() + song.time_signatures.len() + song.key_signatures.len();
        if map_events > MAX_MAP_EVENTS {
            return Err(MidiError::TooManyMapEvents);
        }
        match event.kind {
            TrackEventKind::Midi { channel, message } => {
                let ch = channel.as_int();
                match message {
                    MidiMessage::NoteOn { key, vel } if vel.as_int() > 0 => {
                        let slot = &mut sounding[ch as usize * 128 + key.as_int() as usize];
                        // A doubled note-on (same key, same tick) is one note, not a stuck one.
                        if slot.back().is_some_and(|&(start, _)| start == tick) {
                            continue;
                        }
                        *notes_seen += 1;
                        if *notes_seen > MAX_NOTES {
                            return Err(MidiError::TooManyNotes);
                        }
                        slot.push_back((tick, vel.as_int()));
                    }
                    MidiMessage::NoteOn { key, .. } | MidiMessage::NoteOff { key, .. } => {
                        let slot = &mut sounding[ch as usize * 128 + key.as_int() as usize];
                        if let Some((start, velocity)) = slot.pop_front() {
                            push_note(&mut track, key.as_int(), velocity, start, tick, ch);
                        }
                    }
                    MidiMessage::ProgramChange { program } => {
                        track.program.get_or_insert(program.as_int());
                        programs[ch as usize].get_or_insert(program.as_int());
                    }
                    _ => {}
                }
            }
            TrackEventKind::Meta(meta) => match meta {
                MetaMessage::TrackName(name) if track.name.is_empty() => track.name = text(name),
                MetaMessage::InstrumentName(name) if track.instrument.is_empty() => {
                    track.instrument = text(name)
                }
                MetaMessage::Tempo(t) if t.as_int() > 0 => song.tempos.push(TempoChange {
                    tick,
                    micros_per_quarter: t.as_int(),
                }),
                MetaMessage::TimeSignature(num, denom_pow, ..) if num > 0 && denom_pow < 16 => {
                    song.time_signatures.push(TimeSignature {
                        tick,
                        numerator: num,
                        denominator: 1u16 << denom_pow,
                    })
                }
                MetaMessage::KeySignature(fifths, minor) if (-7..=7).contains(&fifths) => {
                    song.key_signatures.push(KeySignature {
                        tick,
                        fifths,
                        minor,
                    })
                }
                _ => {}
            },
            _ => {}
        }
    }
    // Notes never released end with their track.
    for (index, slot) in sounding.iter().enumerate() {
        for &(start, velocity) in slot {
            let (ch, pitch) = ((index / 128) as u8, (index % 128) as u8);
            push_note(&mut track, pitch, velocity, start, tick.max(start + 1), ch);
        }
    }
    track
        .notes
        .sort_by_key(|n| (n.start, n.pitch, n.channel, n.end));
    Ok(ParsedTrack {
        track,
        end_tick: tick,
        programs,
    })
}

fn push_note(track: &mut Track, pitch: u8, velocity: u8, start: u64, end: u64, channel: u8) {
    if end > start {
        track.notes.push(Note {
            pitch,
            velocity,
            start,
            end,
            channel,
        });
    }
}

/// A type 0 file keeps all parts on one track; one track per channel is what the rest of the
/// code expects.
fn split_by_channel(track: Track, programs: &[Option<u8>; 16]) -> Vec<Track> {
    let mut channels: Vec<u8> = track.notes.iter().map(|n| n.channel).collect();
    channels.sort_unstable();
    channels.dedup();
    if channels.len() <= 1 {
        return if track.notes.is_empty() {
            vec![]
        } else {
            vec![track]
        };
    }
    channels
        .into_iter()
        .map(|ch| Track {
            name: if track.name.is_empty() {
                format!("Channel {}", ch + 1)
            } else {
                format!("{} (channel {})", track.name, ch + 1)
            },
            instrument: track.instrument.clone(),
            program: programs[ch as usize].or(track.program),
            notes: track
                .notes
                .iter()
                .copied()
                .filter(|n| n.channel == ch)
                .collect(),
        })
        .collect()
}

/// Writes a type 1 file: a conductor track with the tempo, time- and key-signature maps, then
/// one named track per [`Track`], each on its own non-percussion channel with its program
/// (General MIDI 0, piano, by default). The song's `ppq` is kept.
pub fn write_midi(song: &Song) -> Vec<u8> {
    let mut conductor: Vec<(u64, TrackEventKind)> = Vec::new();
    for t in &song.tempos {
        conductor.push((
            t.tick,
            TrackEventKind::Meta(MetaMessage::Tempo(u24::new(t.micros_per_quarter))),
        ));
    }
    for ts in &song.time_signatures {
        let pow = ts.denominator.max(1).trailing_zeros() as u8;
        conductor.push((
            ts.tick,
            TrackEventKind::Meta(MetaMessage::TimeSignature(ts.numerator, pow, 24, 8)),
        ));
    }
    for ks in &song.key_signatures {
        conductor.push((
            ks.tick,
            TrackEventKind::Meta(MetaMessage::KeySignature(ks.fifths, ks.minor)),
        ));
    }
    let mut tracks = vec![to_events(conductor)];

    let names: Vec<Vec<u8>> = song
        .tracks
        .iter()
        .map(|t| t.name.as_bytes().to_vec())
        .collect();
    for (i, track) in song.tracks.iter().enumerate() {
        // Channels 0..15 skipping 9 (drums), reused round-robin beyond 15 tracks.
        let ch = [0u8, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15][i % 15];
        let channel = u4::new(if track.is_drums() { 9 } else { ch });
        let mut events: Vec<(u64, TrackEventKind)> = vec![
            (0, TrackEventKind::Meta(MetaMessage::TrackName(&names[i]))),
            (
                0,
                TrackEventKind::Midi {
                    channel,
                    message: MidiMessage::ProgramChange {
                        program: u7::new(track.program.unwrap_or(0) & 0x7f),
                    },
                },
            ),
        ];
        for n in &track.notes {
            let key = u7::new(n.pitch & 0x7f);
            events.push((
                n.start,
                TrackEventKind::Midi {
                    channel,
                    message: MidiMessage::NoteOn {
                        key,
                        vel: u7::new(n.velocity.clamp(1, 127)),
                    },
                },
            ));
            events.push((
                n.end.max(n.start + 1), // a zero-length note would sort its release first
                TrackEventKind::Midi {
                    channel,
                    message: MidiMessage::NoteOff {
                        key,
                        vel: u7::new(0),
                    },
                },
            ));
        }
        tracks.push(to_events(events));
    }
    let mut smf = Smf::new(Header::new(
        Format::Parallel,
        Timing::Metrical(u15::new(song.ppq)),
    ));
    smf.tracks = tracks;
    let mut out = Vec::new();
    smf.write_std(&mut out)
        .expect("writing to a Vec cannot fail");
    out
}

/// Absolute-tick events to delta-timed track events, note-offs before note-ons at equal ticks
/// (so a re-struck note is not cut by its own release), closed by an end-of-track.
fn to_events(mut events: Vec<(u64, TrackEventKind)>) -> Vec<TrackEvent> {
    let order = |kind: &TrackEventKind| match kind {
        TrackEventKind::Meta(_) => 0,
        TrackEventKind::Midi {
            message: MidiMessage::ProgramChange { .. },
            ..
        } => 1,
        TrackEventKind::Midi {
            message: MidiMessage::NoteOff { .. },
            ..
        } => 2,
        _ => 3,
    };
    events.sort_by_key(|(tick, kind)| (*tick, order(kind)));
    let mut out = Vec::with_capacity(events.len() + 1);
    let mut last = 0u64;
    const MAX_DELTA: u64 = (1 << 28) - 1;
    for (tick, kind) in events {
        let mut delta = tick - last;
        // A gap longer than a delta can hold is bridged with empty markers.
        while delta > MAX_DELTA {
            let kind = TrackEventKind::Meta(MetaMessage::Marker(b""));
            out.push(TrackEvent {
                delta: u28::new(MAX_DELTA as u32),
                kind,
            });
            delta -= MAX_DELTA;
        }
        out.push(TrackEvent {
            delta: u28::new(delta as u32),
            kind,
        });
        last = tick;
    }
    out.push(TrackEvent {
        delta: u28::new(0),
        kind: TrackEventKind::Meta(MetaMessage::EndOfTrack),
    });
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Raw SMF bytes: a header chunk and one `MTrk` chunk per body (lengths computed).
    pub(crate) fn smf_bytes(format: u16, division: [u8; 2], tracks: &[&[u8]]) -> Vec<u8> {
        let mut out = b"MThd\0\0\0\x06".to_vec();
        out.extend(format.to_be_bytes());
        out.extend((tracks.len() as u16).to_be_bytes());
        out.extend(division);
        for body in tracks {
            out.extend(b"MTrk");
            out.extend((body.len() as u32).to_be_bytes());
            out.extend(*body);
        }
        out
    }

    /// A note on channel 1 with velocity 80, for tests across the music modules.
    pub(crate) fn note(pitch: u8, start: u64, end: u64) -> Note {
        Note {
            pitch,
            velocity: 80,
            start,
            end,
            channel: 0,
        }
    }

    const PPQ_480: [u8; 2] = [0x01, 0xE0];
    /// Two notes with running status (the second and third events omit the 0x90 status byte),
    /// one released by a note-on with velocity 0, one by a real note-off.
    const RUNNING_STATUS: &[u8] = &[
        0x00, 0xFF, 0x03, 0x05, b'P', b'i', b'a', b'n', b'o', // track name
        0x00, 0xC0, 0x00, // program 0
        0x00, 0x90, 60, 100, // C4 on
        0x83, 0x60, 60, 0, // 480 ticks later, running status: C4 off (vel 0)
        0x00, 64, 90, // E4 on, running status
        0x83, 0x60, 0x80, 64, 0, // E4 off
        0x00, 0xFF, 0x2F, 0x00,
    ];

    /// Found by the `read_midi` fuzz target: a header whose division is 0x80xx made midly
    /// negate -128 as an `i8` (a panic where overflow checks are on), in the first header or a
    /// later one. Refused in words now, bare or wrapped in RIFF.
    #[test]
    fn an_smpte_division_of_0x80_is_refused_not_a_panic() {
        let crash: &[u8] = &[
            77, 84, 104, 100, 0, 0, 0, 64, 0, 0, 0, 0, 128, 0, 0, 0, 33, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0, 0, 0, 0, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
            255, 255, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 77,
            84, 104, 100, 0, 0, 0, 64, 0, 0, 0, 0, 0, 255, 255, 255, 0, 0, 0, 0, 0, 0, 255,
        ];
        assert!(matches!(read_midi(crash), Err(MidiError::SmpteTiming)));
        // The second find: a first header with a good division, a second one with 0x80.
        let mut second = crash.to_vec();
        second[12] = 0;
        second.extend_from_slice(b"MThd\0\0\0\x06\0\0\0\x01\x80\0");
        assert!(matches!(read_midi(&second), Err(MidiError::SmpteTiming)));
        let mut riff = b"RIFF\0\0\0\0RMIDdata\0\0\0\0".to_vec();
        riff.extend_from_slice(&smf_bytes(0, [0x80, 0x28], &[RUNNING_STATUS]));
        assert!(matches!(read_midi(&riff), Err(MidiError::SmpteTiming)));
        // 25 fps (0xE7), which midly reads: refused the same way.
        let smpte = smf_bytes(0, [0xE7, 0x28], &[RUNNING_STATUS]);
        assert!(matches!(read_midi(&smpte), Err(MidiError::SmpteTiming)));
    }

    #[test]
    fn reads_running_status_and_both_kinds_of_release() {
        let song = read_midi(&smf_bytes(0, PPQ_480, &[RUNNING_STATUS])).unwrap();
        assert_eq!(song.ppq, 480);
        assert_eq!(song.tracks.len(), 1);
        let t = &song.tracks[0];
        assert_eq!(t.name, "Piano");
        assert_eq!(t.program, Some(0));
        let got: Vec<_> = t
            .notes
            .iter()
            .map(|n| (n.pitch, n.start, n.end, n.velocity))
            .collect();
        assert_eq!(got, vec![(60, 0, 480, 100), (64, 480, 960, 90)]);
        assert!((song.seconds_at(960) - 1.0).abs() < 1e-9, "120 bpm default");
    }

    #[test]
    fn overlapping_notes_of_one_pitch_pair_first_in_first_out() {
        let body: &[u8] = &[
            0x00, 0x90, 60, 80, // on A
            0x60, 0x90, 60, 90, // on B while A sounds
            0x60, 0x80, 60, 0, // off -> ends A
            0x60, 0x80, 60, 0, // off -> ends B
            0x00, 0xFF, 0x2F, 0x00,
        ];
        let song = read_midi(&smf_bytes(0, PPQ_480, &[body])).unwrap();
        let got: Vec<_> = song.tracks[0]
            .notes
            .iter()
            .map(|n| (n.start, n.end, n.velocity))
            .collect();
        assert_eq!(got, vec![(0, 192, 80), (96, 288, 90)]);
    }

    #[test]
    fn type_0_files_are_split_by_channel_and_tempo_changes_are_followed() {
        let body: &[u8] = &[
            0x00, 0xFF, 0x51, 0x03, 0x07, 0xA1, 0x20, // 500000 us/quarter
            0x00, 0x90, 72, 100, // channel 1 melody
            0x00, 0x91, 48, 70, // channel 2 bass
            0x83, 0x60, 0xFF, 0x51, 0x03, 0x0F, 0x42, 0x40, // at 480: 1000000 us/quarter
            0x00, 0x80, 72, 0, 0x00, 0x81, 48, 0, 0x83, 0x60, 0x90, 74, 100, 0x83, 0x60, 0x80, 74,
            0, 0x00, 0xFF, 0x2F, 0x00,
        ];
        let song = read_midi(&smf_bytes(0, PPQ_480, &[body])).unwrap();
        assert_eq!(song.tracks.len(), 2);
        assert_eq!(song.tracks[0].name, "Channel 1");
        assert_eq!(song.tracks[0].notes.len(), 2);
        assert_eq!(song.tracks[1].notes[0].pitch, 48);
        assert_eq!(song.tempos.len(), 2);
        // 480 ticks at 0.5 s/quarter, then 960 ticks at 1 s/quarter.
        assert!((song.seconds_at(1440) - 2.5).abs() < 1e-9);
        for tick in [0, 100, 480, 481, 1000, 1440, 5000] {
            assert_eq!(song.tick_at_seconds(song.seconds_at(tick)), tick);
        }
    }

    #[test]
    fn write_then_read_keeps_everything() {
        let song = Song {
            ppq: 384,
            tempos: vec![
                TempoChange {
                    tick: 0,
                    micros_per_quarter: 600_000,
                },
                TempoChange {
                    tick: 1536,
                    micros_per_quarter: 450_000,
                },
            ],
            time_signatures: vec![TimeSignature {
                tick: 0,
                numerator: 3,
                denominator: 4,
            }],
            key_signatures: vec![KeySignature {
                tick: 0,
                fifths: -3,
                minor: true,
            }],
            tracks: vec![
                Track {
                    name: "MELODY".into(),
                    instrument: String::new(),
                    program: Some(0),
                    notes: vec![
                        Note {
                            pitch: 67,
                            velocity: 90,
                            start: 0,
                            end: 384,
                            channel: 0,
                        },
                        // Re-struck at the tick the previous one ends.
                        Note {
                            pitch: 67,
                            velocity: 70,
                            start: 384,
                            end: 500,
                            channel: 0,
                        },
                    ],
                },
                Track {
                    name: "PIANO".into(),
                    instrument: String::new(),
                    program: Some(0),
                    notes: vec![Note {
                        pitch: 48,
                        velocity: 60,
                        start: 0,
                        end: 1536,
                        channel: 1,
                    }],
                },
            ],
        };
        let back = read_midi(&write_midi(&song)).unwrap();
        assert_eq!(back, song);
    }

    #[test]
    fn bad_input_is_a_sentence_not_a_panic() {
        let good = smf_bytes(1, PPQ_480, &[RUNNING_STATUS]);
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("empty", vec![]),
            (
                "not midi",
                b"RIFF....WAVEfmt this is a wave file, not midi".to_vec(),
            ),
            ("truncated header", good[..10].to_vec()),
            ("truncated track", good[..good.len() - 9].to_vec()),
            ("zero tracks", smf_bytes(1, PPQ_480, &[])),
            ("smpte", smf_bytes(1, [0xE7, 0x28], &[RUNNING_STATUS])),
            ("zero ppq", smf_bytes(1, [0, 0], &[RUNNING_STATUS])),
            (
                "no notes",
                smf_bytes(1, PPQ_480, &[&[0x00, 0xFF, 0x2F, 0x00]]),
            ),
            ("50 MB", vec![0u8; 50 * 1024 * 1024]),
        ];
        for (name, bytes) in cases {
            match read_midi(&bytes) {
                Ok(song) => assert!(
                    name == "truncated track" && song.note_count() > 0,
                    "{name}: accepted"
                ),
                Err(e) => {
                    let msg = e.to_string();
                    assert!(msg.starts_with("this"), "{name}: {msg}");
                }
            }
        }
        assert_eq!(
            read_midi(&smf_bytes(1, PPQ_480, &[])),
            Err(MidiError::NoTracks)
        );
        assert_eq!(
            read_midi(&[0u8; 50 << 20]),
            Err(MidiError::TooLarge(50 << 20))
        );
    }

    #[test]
    fn absurd_delta_times_are_refused_quickly() {
        // Notes held for the largest delta a file can hold, over and over: years of music.
        let mut body = Vec::new();
        for _ in 0..40 {
            body.extend([0x00, 0x90, 60, 100, 0xFF, 0xFF, 0xFF, 0x7F, 0x80, 60, 0]);
        }
        body.extend([0x00, 0xFF, 0x2F, 0x00]);
        match read_midi(&smf_bytes(1, [0x00, 0x01], &[&body])) {
            Err(MidiError::TooLong(minutes)) => assert!(minutes > 120.0),
            Err(MidiError::TooManyBeats(quarters)) => assert!(quarters > MAX_QUARTERS),
            other => panic!("expected TooLong or TooManyBeats, got {other:?}"),
        }
    }

    #[test]
    fn doubled_note_ons_do_not_hang_notes_and_type_0_keeps_programs() {
        let body: &[u8] = &[
            0x00, 0xC0, 0, // channel 1: piano
            0x00, 0xC1, 33, // channel 2: electric bass
            0x00, 0x90, 60, 90, 0x00, 0x90, 60, 90, // C4 struck twice at once
            0x00, 0x91, 36, 90, 0x83, 0x60, 0x80, 60, 0, 0x00, 0x81, 36, 0, 0x83, 0x60, 0x90, 62,
            80, 0x60, 0x80, 62, 0, 0x00, 0xFF, 0x2F, 0x00,
        ];
        let song = read_midi(&smf_bytes(0, PPQ_480, &[body])).unwrap();
        let c4: Vec<_> = song.tracks[0]
            .notes
            .iter()
            .filter(|n| n.pitch == 60)
            .collect();
        assert_eq!(c4.len(), 1);
        assert_eq!(
            c4[0].end, 480,
            "the doubled note-on must not sound to the end"
        );
        assert_eq!(song.tracks[0].program, Some(0));
        assert_eq!(song.tracks[1].program, Some(33));
    }

    #[test]
    fn many_quarters_or_map_events_are_refused() {
        // One note lasting 30 000 quarters at an absurd tempo: short in seconds, huge in beats.
        let mut body = vec![0x00, 0xFF, 0x51, 0x03, 0x00, 0x00, 0x01, 0x00, 0x90, 60, 90];
        body.extend([0x81, 0xAF, 0xE4, 0x00, 0x80, 60, 0, 0x00, 0xFF, 0x2F, 0x00]); // 30000 * 96 ticks
        let err = read_midi(&smf_bytes(1, [0, 96], &[&body])).unwrap_err();
        assert!(
            matches!(err, MidiError::TooManyBeats(q) if q >= 29_000),
            "{err:?}"
        );
        let mut body = Vec::new();
        for _ in 0..=MAX_MAP_EVENTS + 1 {
            body.extend([0x00, 0xFF, 0x51, 0x03, 0x07, 0xA1, 0x20]);
        }
        body.extend([
            0x00, 0x90, 60, 90, 0x10, 0x80, 60, 0, 0x00, 0xFF, 0x2F, 0x00,
        ]);
        assert_eq!(
            read_midi(&smf_bytes(1, PPQ_480, &[&body])),
            Err(MidiError::TooManyMapEvents)
        );
    }

    #[test]
    fn long_gaps_survive_writing() {
        let song = Song {
            ppq: 30_000, // 10 000 quarters, in more ticks than one delta can hold
            tempos: vec![TempoChange {
                tick: 0,
                micros_per_quarter: 1,
            }],
            time_signatures: vec![],
            key_signatures: vec![],
            tracks: vec![Track {
                name: "gap".into(),
                instrument: String::new(),
                program: Some(0),
                notes: vec![Note {
                    pitch: 60,
                    velocity: 64,
                    start: 300_000_000,
                    end: 300_000_001,
                    channel: 0,
                }],
            }],
        };
        assert_eq!(
            read_midi(&write_midi(&song)).unwrap().tracks[0].notes,
            song.tracks[0].notes
        );
    }
}
