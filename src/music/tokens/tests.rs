use super::vocab::velocity_bin;
use super::*;
use crate::music::chords::{Chord, Quality};
use crate::music::grid::Grid;
use crate::music::midi::TempoChange;
use crate::music::midi::tests::note;

#[test]
fn every_id_maps_to_one_token_and_back() {
    for id in 0..VOCAB_SIZE as u32 {
        let t = Token::from_id(id).unwrap();
        assert_eq!(t.id(), id, "{t}");
    }
    assert_eq!(Token::from_id(VOCAB_SIZE as u32), None);
    assert_eq!(VOCAB_SIZE, 3 + 1 + 16 + 64 + 169 + 32 + 128 + 32 + 64);
    assert_eq!(Token::Meter(16).id() + 1, Token::Position(0).id());
}

#[test]
fn tempo_and_velocity_bins() {
    assert_eq!(tempo_bin(40.0), 0);
    assert_eq!(tempo_bin(500.0), 31);
    for bin in 0..TEMPO_BINS as u8 {
        assert_eq!(tempo_bin(bin_bpm(bin)), bin);
    }
    assert!((bin_bpm(tempo_bin(120.0)) - 120.0).abs() / 120.0 < 0.03);
    for v in 1..128u8 {
        assert!(
            (bin_velocity(velocity_bin(v)) as i32 - v as i32).abs() <= 2,
            "{v}"
        );
    }
}

fn c_major() -> Option<Chord> {
    Some(Chord {
        root: 0,
        quality: Quality::Maj,
    })
}

#[test]
fn a_small_piece_encodes_as_expected_and_decodes_back() {
    // One bar of 4/4, then one of 3/4; 480 ticks a beat.
    let grid = Grid::new((0..=7).map(|b| b * 480).collect(), 4, vec![0, 4]);
    let notes = [
        note(64, 0, 480),
        note(60, 0, 960),
        note(67, 1920 + 240, 2400),
    ];
    let chords = [c_major(), c_major(), None, None, None];
    let tempos = [TempoChange {
        tick: 0,
        micros_per_quarter: 500_000,
    }];
    let tokens = encode(&notes, &grid, &chords, &tempos).unwrap();
    let text: Vec<String> = tokens.iter().map(|t| t.to_string()).collect();
    assert_eq!(
        text.join(" "),
        "BOS Bar Position_0 Chord_C:maj Tempo_120 Pitch_60 Velocity_82 Duration_8 \
         Pitch_64 Velocity_82 Duration_4 Position_8 Chord_N \
         Bar Meter_3 Position_2 Pitch_67 Velocity_82 Duration_2 EOS"
    );
    check_grammar(&tokens).unwrap();
    let d = decode(&tokens, 480, 0).unwrap();
    let got: Vec<(u8, u64, u64)> = d.notes.iter().map(|n| (n.pitch, n.start, n.end)).collect();
    assert_eq!(got, vec![(60, 0, 960), (64, 0, 480), (67, 2160, 2400)]);
    assert_eq!(d.grid.bar_starts, vec![0, 4]);
    assert_eq!(d.grid.num_beats(), 7);
    assert_eq!(
        d.beat_chords,
        vec![c_major(), c_major(), None, None, None, None, None]
    );
    assert_eq!(d.time_signatures[0].tick, 1920);
    assert_eq!(d.tempos.len(), 1);
}

#[test]
fn the_grammar_rejects_what_cannot_decode() {
    use Token::*;
    let bad: [(&[Token], usize); 7] = [
        (&[Bos, Position(0)], 1),
        (&[Bar, Position(4), Position(2)], 2),
        (&[Bar, Position(16)], 1),
        (&[Bar, Position(0), Pitch(60), Duration(4)], 3),
        (
            &[
                Bar,
                Position(0),
                Pitch(60),
                Velocity(3),
                Duration(4),
                Pitch(59),
            ],
            5,
        ),
        (&[Bar, Position(0), Bar], 2),
        (&[Bar, Position(0), Chord(None), Position(0)], 3),
    ];
    for (tokens, at) in bad {
        match check_grammar(tokens) {
            Err(TokenError::Grammar { index, .. }) => assert_eq!(index, at, "{tokens:?}"),
            other => panic!("{tokens:?}: {other:?}"),
        }
    }
    // A Meter makes longer bars possible.
    check_grammar(&[
        Bar,
        Meter(6),
        Position(20),
        Pitch(60),
        Velocity(3),
        Duration(1),
    ])
    .unwrap();
}

#[test]
fn allowed_tokens_are_exactly_those_the_grammar_takes() {
    let mut g = Grammar::new();
    for t in [Token::Bos, Token::Bar, Token::Position(3), Token::Pitch(60)] {
        g.advance(t).unwrap();
    }
    let allowed = g.allowed();
    let ids: Vec<u32> = (0..VOCAB_SIZE as u32)
        .filter(|&i| allowed[i as usize])
        .collect();
    assert_eq!(ids.len(), VELOCITY_BINS, "only velocities after a pitch");
    g.advance(Token::Velocity(10)).unwrap();
    g.advance(Token::Duration(3)).unwrap();
    let allowed = g.allowed();
    assert!(!allowed[Token::Pitch(60).id() as usize]);
    assert!(allowed[Token::Pitch(61).id() as usize]);
    assert!(!allowed[Token::Position(3).id() as usize]);
    assert!(allowed[Token::Position(15).id() as usize]);
    assert!(!allowed[Token::Position(16).id() as usize]);
    assert!(allowed[Token::Eos.id() as usize] && allowed[Token::Bar.id() as usize]);
}

#[test]
fn long_bars_and_long_notes_are_cut() {
    let grid = Grid::new((0..=20).map(|b| b * 4).collect(), 4, vec![0]);
    let notes = [note(60, 0, 80)]; // 20 beats = 80 steps at 1 tick a step
    let tokens = encode(&notes, &grid, &[], &[]).unwrap();
    check_grammar(&tokens).unwrap();
    assert!(tokens.contains(&Token::Meter(16)) && tokens.contains(&Token::Meter(4)));
    assert!(tokens.contains(&Token::Duration(64)));
    let d = decode(&tokens, 4, 0).unwrap();
    assert_eq!(d.grid.bar_starts, vec![0, 16]);
    assert!(encode(&notes, &Grid::new(vec![0, 4], 2, vec![0]), &[], &[]).is_err());
}
