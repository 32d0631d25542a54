//! Reading a Standard MIDI File (type 0, 1 or 2) into a [`Song`]: note pairing, type 0 files
//! split by channel, the maps collected, and every limit in `error` enforced.

use std::collections::VecDeque;

use midly::{Format, MetaMessage, MidiMessage, Smf, Timing, TrackEvent, TrackEventKind};

use super::error::{
    MAX_FILE_BYTES, MAX_MAP_EVENTS, MAX_NOTES, MAX_PEDAL_EVENTS, MAX_QUARTERS, MAX_SECONDS,
    MAX_TRACKS, MidiError,
};
use super::song::{KeySignature, Note, PEDALS, Pedal, Song, TempoChange, TimeSignature, Track};

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
/// first-in first-out; a note still sounding at the end of its track ends there. Pedal events
/// (controllers 64, 66, 67) stay with their track; a track of pedal alone gives its events to
/// the first track with notes on the same channel.
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
    let mut seen = Seen::default();
    let mut orphans: Vec<Pedal> = Vec::new();
    for events in &smf.tracks {
        let mut parsed = read_track(events, offset, &mut song, &mut seen)?;
        if sequential {
            offset = parsed.end_tick;
        }
        if smf.header.format == Format::SingleTrack {
            song.tracks
                .extend(split_by_channel(parsed.track, &parsed.programs));
        } else if !parsed.track.notes.is_empty() {
            song.tracks.push(parsed.track);
        } else {
            orphans.append(&mut parsed.track.pedal);
        }
    }
    adopt_pedal(&mut song.tracks, orphans);
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

/// What the file has given so far, against the limits.
#[derive(Default)]
struct Seen {
    notes: usize,
    pedal: usize,
}

/// Pedal events from tracks without notes, to the first track with a note on their channel
/// (kept in tick order there).
fn adopt_pedal(tracks: &mut [Track], orphans: Vec<Pedal>) {
    if orphans.is_empty() {
        return;
    }
    for event in orphans {
        let home = tracks
            .iter()
            .position(|t| t.notes.iter().any(|n| n.channel == event.channel));
        if let Some(home) = home {
            tracks[home].pedal.push(event);
        }
    }
    for track in tracks {
        track.pedal.sort_by_key(|p| p.tick);
    }
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
    seen: &mut Seen,
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
                        seen.notes += 1;
                        if seen.notes > MAX_NOTES {
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
                    MidiMessage::Controller { controller, value }
                        if PEDALS.contains(&controller.as_int()) =>
                    {
                        seen.pedal += 1;
                        if seen.pedal > MAX_PEDAL_EVENTS {
                            return Err(MidiError::TooManyPedalEvents);
                        }
                        track.pedal.push(Pedal {
                            tick,
                            controller: controller.as_int(),
                            value: value.as_int(),
                            channel: ch,
                        });
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
            pedal: track
                .pedal
                .iter()
                .copied()
                .filter(|p| p.channel == ch)
                .collect(),
            notes: track
                .notes
                .iter()
                .copied()
                .filter(|n| n.channel == ch)
                .collect(),
        })
        .collect()
}
