//! Reading tests (running status, note pairing, type 0 files, tempo maps, bad and hostile
//! input), and the SMF and note helpers other music modules' tests share.

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
        77, 84, 104, 100, 0, 0, 0, 64, 0, 0, 0, 0, 128, 0, 0, 0, 33, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
        255, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 77, 84, 104,
        100, 0, 0, 0, 64, 0, 0, 0, 0, 0, 255, 255, 255, 0, 0, 0, 0, 0, 0, 255,
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
        0x00, 0x80, 72, 0, 0x00, 0x81, 48, 0, 0x83, 0x60, 0x90, 74, 100, 0x83, 0x60, 0x80, 74, 0,
        0x00, 0xFF, 0x2F, 0x00,
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
        0x00, 0x91, 36, 90, 0x83, 0x60, 0x80, 60, 0, 0x00, 0x81, 36, 0, 0x83, 0x60, 0x90, 62, 80,
        0x60, 0x80, 62, 0, 0x00, 0xFF, 0x2F, 0x00,
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

/// A track's pedal (64, 66, 67; other controllers skipped) is kept with its values; a type 1
/// track of pedal alone gives it to the track playing on its channel; a type 0 file splits
/// its pedal by channel; more pedal events than the limit are refused in words.
#[test]
fn pedal_events_are_kept_with_their_track() {
    let notes: &[u8] = &[
        0x00, 0x90, 60, 100, // C4 on, channel 1
        0x00, 0xB0, 64, 127, // sustain down
        0x00, 0xB0, 7, 100, // volume: not a pedal
        0x83, 0x60, 0xB0, 64, 40, // 480: half pedal
        0x00, 0x80, 60, 0, // C4 off
        0x00, 0xB0, 67, 127, // soft pedal
        0x00, 0xFF, 0x2F, 0x00,
    ];
    let pedal_only: &[u8] = &[
        0x81, 0x70, 0xB0, 66, 127, // 240: sostenuto, channel 1
        0x00, 0xB1, 64, 127, // channel 2: no notes there
        0x00, 0xFF, 0x2F, 0x00,
    ];
    let song = read_midi(&smf_bytes(1, PPQ_480, &[notes, pedal_only])).unwrap();
    assert_eq!(song.tracks.len(), 1);
    let got: Vec<_> = song.tracks[0]
        .pedal
        .iter()
        .map(|p| (p.tick, p.controller, p.value))
        .collect();
    assert_eq!(
        got,
        [(0, 64, 127), (240, 66, 127), (480, 64, 40), (480, 67, 127)]
    );
    // Type 0: one track, two channels, each its pedal.
    let mixed: &[u8] = &[
        0x00, 0x90, 60, 100, 0x00, 0x91, 48, 100, // C4 on ch 1, C3 on ch 2
        0x00, 0xB1, 64, 127, // ch 2 pedal
        0x83, 0x60, 0x80, 60, 0, 0x00, 0x81, 48, 0, 0x00, 0xB1, 64, 0, //
        0x00, 0xFF, 0x2F, 0x00,
    ];
    let split = read_midi(&smf_bytes(0, PPQ_480, &[mixed])).unwrap();
    let counts: Vec<usize> = split.tracks.iter().map(|t| t.pedal.len()).collect();
    assert_eq!(counts, [0, 2]);
    // Hostile: a controller stream past the limit.
    let mut flood = vec![0x00, 0x90, 60, 100];
    for i in 0..=MAX_PEDAL_EVENTS {
        flood.extend([0x01, 0xB0, 64, (i % 128) as u8]);
    }
    flood.extend([0x00, 0x80, 60, 0, 0x00, 0xFF, 0x2F, 0x00]);
    let err = read_midi(&smf_bytes(1, PPQ_480, &[&flood])).unwrap_err();
    assert_eq!(err, MidiError::TooManyPedalEvents);
    assert!(err.to_string().contains("pedal events"), "{err}");
}
