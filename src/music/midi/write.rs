//! Writing a [`Song`] as a type 1 Standard MIDI File: a conductor track with the maps, then one
//! named track per part on its own channel, with its pedal.

use midly::num::{u4, u7, u15, u24, u28};
use midly::{Format, Header, MetaMessage, MidiMessage, Smf, Timing, TrackEvent, TrackEventKind};

use super::song::Song;

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
        for p in &track.pedal {
            events.push((
                p.tick,
                TrackEventKind::Midi {
                    channel,
                    message: MidiMessage::Controller {
                        controller: u7::new(p.controller & 0x7f),
                        value: u7::new(p.value & 0x7f),
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
/// (so a re-struck note is not cut by its own release) and pedal events between them (a lift
/// and a press at one tick keep their order), closed by an end-of-track.
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
        TrackEventKind::Midi {
            message: MidiMessage::Controller { .. },
            ..
        } => 3,
        _ => 4,
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
mod tests {
    use super::super::read::read_midi;
    use super::super::song::{KeySignature, Note, Pedal, Song, TempoChange, TimeSignature, Track};
    use super::write_midi;

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
                    pedal: Vec::new(),
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
                    // A press, a half-pedal value, a lift and a press at one tick, the soft
                    // pedal: kept in order, values as played.
                    pedal: [(0, 64, 127), (384, 64, 40), (768, 64, 0), (768, 64, 127)]
                        .into_iter()
                        .chain([(1000, 67, 100)])
                        .map(|(tick, controller, value)| Pedal {
                            tick,
                            controller,
                            value,
                            channel: 1,
                        })
                        .collect(),
                },
            ],
        };
        let back = read_midi(&write_midi(&song)).unwrap();
        assert_eq!(back, song);
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
                pedal: Vec::new(),
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
