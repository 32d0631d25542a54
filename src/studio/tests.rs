use burn::tensor::Device;

use super::*;
use crate::generate::{Length, PianoSampling, Sampling, continue_tokens, prompt_tokens};
use crate::model::config::PerformerConfig;
use crate::model::config::Task;
use crate::model::pe::{PeConfig, PeKind};
use crate::model::performer::Performer;
use crate::music::chords::Chord;
use crate::music::fixtures;
use crate::music::grid::Grid;
use crate::music::piece::{Piece, TrackRole};
use crate::music::tokens::VOCAB_SIZE;
use crate::music::tokens::{self, Token};

fn piece() -> Piece {
    Piece::from_song(&fixtures::song(0, 8), "fixture.mid").unwrap()
}

#[test]
fn accompaniment_streams_and_replaces_the_piano() {
    let device = Device::flex();
    let model = tiny(Task::Accompaniment, 1, &device);
    let piece = piece();
    let options = AccompanyOptions {
        common: Common {
            chunk_steps: 32,
            watch: Some(WatchOptions { layer: 1, head: 0 }),
            ..Common::default()
        },
        threshold: Some(0.45),
        ..AccompanyOptions::default()
    };
    let mut reports = Vec::new();
    let out = pollster::block_on(accompany_piece(
        &model,
        &ModelPlay::default(),
        &piece,
        &options,
        &device,
        |p| {
            reports.push((p.done, p.total, p.notes.map(|n| n.len()), p.attention));
            async { true }
        },
    ))
    .unwrap();
    let steps = 8 * 16;
    assert_eq!(reports.len(), steps / 32);
    assert_eq!(reports.last().unwrap().0, steps);
    // Each report's attention holds its chunk's rows over every key so far.
    for (i, r) in reports.iter().enumerate() {
        let rows = r.3.as_ref().unwrap();
        assert_eq!(rows.start, i * 32);
        assert_eq!(rows.keys, (i + 1) * 32);
        assert_eq!(rows.values.len(), 32 * rows.keys);
    }
    let names: Vec<_> = out.tracks.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["MELODY", "PIANO"]);
    assert_eq!(out.tracks[1].role, TrackRole::Generated);
    assert_eq!(
        out.tracks[1].notes.len(),
        reports.last().unwrap().2.unwrap()
    );
    assert_eq!(
        out.tracks[0], piece.tracks[0],
        "the melody is kept as it was"
    );
    // Streaming in chunks gives the one-pass result.
    let whole = AccompanyOptions {
        common: Common {
            chunk_steps: steps,
            watch: None,
            ..options.clone().common.clone()
        },
        ..options.clone()
    };
    let again = pollster::block_on(accompany_piece(
        &model,
        &ModelPlay::default(),
        &piece,
        &whole,
        &device,
        |_| async { true },
    ))
    .unwrap();
    assert_eq!(again.tracks, out.tracks);
}

#[test]
fn regenerating_bars_rewrites_them_and_keeps_the_rest() {
    use crate::model::config::Conditioning;
    let device = Device::flex();
    let piece = piece();
    let grid = Grid::for_song(&piece.to_song(), tokens::STEPS_PER_BEAT);
    let (from, to) = (grid.bar_ticks()[2], grid.bar_ticks()[4]);
    for conditioning in [None, Some(Conditioning::AUTOREGRESSIVE)] {
        let config = PerformerConfig::tiny(
            Task::Accompaniment,
            VOCAB_SIZE,
            PeConfig::new(PeKind::SineSpe),
        )
        .with_inputs(conditioning);
        let model = Performer::new(&config, 1, &device).unwrap();
        let run = |piece: &Piece, options: &AccompanyOptions| {
            pollster::block_on(accompany_piece(
                &model,
                &ModelPlay::default(),
                piece,
                options,
                &device,
                |_| async { true },
            ))
            .unwrap()
        };
        let options = AccompanyOptions {
            threshold: conditioning.is_none().then_some(0.5),
            ..AccompanyOptions::default()
        };
        let first = run(&piece, &options);
        let again = AccompanyOptions {
            common: Common {
                seed: 7,
                region: Some([2, 4]),
                ..options.clone().common.clone()
            },
            ..options.clone()
        };
        let second = run(&first, &again);
        let piano = |p: &Piece| {
            p.tracks
                .iter()
                .find(|t| t.role == TrackRole::Generated)
                .unwrap()
                .notes
                .clone()
        };
        let (a, b) = (piano(&first), piano(&second));
        // Notes before the bars keep their start (one held into them may now end at
        // their start); those after them stay whole (one at their very end may be
        // struck again to join what comes before).
        let outside = |notes: &[PieceNote]| {
            let mut kept: Vec<(u8, u64, u64)> = notes
                .iter()
                .filter(|n| n.1 < from)
                .map(|n| (n.0, n.1, 0))
                .chain(notes.iter().filter(|n| n.1 > to).map(|n| (n.0, n.1, n.2)))
                .collect();
            kept.sort();
            kept
        };
        let (ka, kb) = (outside(&a), outside(&b));
        let only = |x: &[(u8, u64, u64)], y: &[(u8, u64, u64)]| -> Vec<(u8, u64, u64)> {
            x.iter().filter(|n| !y.contains(n)).copied().collect()
        };
        assert!(
            ka == kb,
            "{conditioning:?}: the other bars are kept; only before {:?}, only after {:?}",
            only(&ka, &kb),
            only(&kb, &ka)
        );
        assert_eq!(second.tracks[0], piece.tracks[0], "the melody is kept");
        if conditioning.is_some() {
            let inside = |notes: &[PieceNote]| -> Vec<PieceNote> {
                notes
                    .iter()
                    .filter(|n| n.1 >= from && n.1 < to)
                    .copied()
                    .collect()
            };
            assert_ne!(inside(&a), inside(&b), "another seed rewrites the bars");
        }
    }
    let bad = AccompanyOptions {
        common: Common {
            region: Some([3, 3]),
            ..Common::default()
        },
        ..AccompanyOptions::default()
    };
    let err = pollster::block_on(accompany_piece(
        &model_for_errors(&device),
        &ModelPlay::default(),
        &piece,
        &bad,
        &device,
        |_| async { true },
    ))
    .unwrap_err();
    assert!(err.to_string().contains("at least one bar"), "{err}");
}

#[test]
fn a_continuation_rewrites_only_the_chosen_bars() {
    let device = Device::flex();
    let model = tiny(Task::Continuation, 3, &device);
    let piece = piece();
    let (from, to) = (piece.bars[4], piece.bars[6]);
    for seed in [0, 1] {
        let options = ContinueOptions {
            common: Common {
                seed,
                region: Some([4, 6]),
                ..Common::default()
            },
            ..ContinueOptions::default()
        };
        let mut streamed = 0;
        let out = pollster::block_on(continue_piece(&model, &piece, &options, &device, |p| {
            if let Some(notes) = p.notes {
                assert!(notes.iter().all(|n| n.1 >= from && n.1 < to));
                streamed += 1;
            }
            async { true }
        }))
        .unwrap();
        assert!(streamed > 0, "notes stream in as bars complete");
        assert_eq!(out.bars, piece.bars, "no bar added or lost");
        for (before, after) in piece.tracks.iter().zip(&out.tracks) {
            let outside: Vec<PieceNote> = before
                .notes
                .iter()
                .filter(|n| n.1 < from || n.1 >= to)
                .copied()
                .collect();
            assert_eq!(
                after.notes, outside,
                "{}: kept outside, cleared inside",
                before.name
            );
        }
        let new = &out.tracks.last().unwrap();
        assert_eq!(new.name, CONTINUATION_TRACK);
        assert!(!new.notes.is_empty(), "seed {seed}: the bars are written");
        assert!(new.notes.iter().all(|n| n.1 >= from && n.1 < to));
    }
    let rewrite = |region: [usize; 2], seed: u64| {
        let options = ContinueOptions {
            common: Common {
                region: Some(region),
                seed,
                ..Common::default()
            },
            ..ContinueOptions::default()
        };
        pollster::block_on(continue_piece(
            &model,
            &piece,
            &options,
            &device,
            |_| async { true },
        ))
    };
    // From the first bar: no music before it to read.
    let out = rewrite([0, 2], 0).unwrap();
    let new = &out.tracks.last().unwrap().notes;
    assert!(new.iter().all(|n| n.1 < piece.bars[2]), "{new:?}");
    // To the end: the last entry of `bars` ends the music, and a region from it writes
    // the bar after it.
    let n = piece.bars.len();
    let out = rewrite([n - 2, n], 4).unwrap();
    let (start, end) = (piece.bar_tick(n - 2), piece.bar_tick(n));
    assert!(end > piece.bars[n - 1], "the region reaches past the end");
    let new = &out.tracks.last().unwrap().notes;
    assert!(!new.is_empty(), "the last bars are written");
    assert!(
        new.iter().all(|n| n.1 >= start && n.1 < end && n.2 <= end),
        "{new:?}"
    );
    let err = rewrite([40, 42], 0).unwrap_err();
    assert!(
        err.to_string().contains("past the end of the piece"),
        "{err}"
    );
}

/// An untrained tiny sineSPE model for `task`.
fn tiny(task: Task, seed: u64, device: &Device) -> Performer {
    let config = PerformerConfig::tiny(task, VOCAB_SIZE, PeConfig::new(PeKind::SineSpe));
    Performer::new(&config, seed, device).unwrap()
}

fn model_for_errors(device: &Device) -> Performer {
    tiny(Task::Accompaniment, 1, device)
}

#[test]
fn attention_over_a_piece_covers_every_token() {
    let device = Device::flex();
    let model = tiny(Task::Continuation, 2, &device);
    let options = ContinueOptions {
        common: Common {
            watch: Some(WatchOptions { layer: 1, head: 1 }),
            ..Common::default()
        },
        ..ContinueOptions::default()
    };
    let mut rows = 0;
    let total = pollster::block_on(continuation_attention(
        &model,
        &piece(),
        &options,
        &device,
        None,
        |p| {
            let a = p.attention.unwrap();
            assert_eq!(a.start, rows);
            rows += a.values.len() / a.keys;
            async { true }
        },
    ))
    .unwrap();
    assert_eq!(rows, total);
}

#[test]
fn cancelling_stops_and_says_so() {
    let device = Device::flex();
    let config =
        PerformerConfig::tiny(Task::Accompaniment, VOCAB_SIZE, PeConfig::new(PeKind::None));
    let model = Performer::new(&config, 1, &device).unwrap();
    let options = AccompanyOptions {
        common: Common {
            chunk_steps: 16,
            ..Common::default()
        },
        ..AccompanyOptions::default()
    };
    let mut calls = 0;
    let r = pollster::block_on(accompany_piece(
        &model,
        &ModelPlay::default(),
        &piece(),
        &options,
        &device,
        |_| {
            calls += 1;
            async move { calls < 2 }
        },
    ));
    assert_eq!(r.unwrap_err(), GenerateError::Cancelled);
    assert_eq!(calls, 2);
}

#[test]
fn continuation_follows_the_plan_and_lands_after_the_music() {
    let device = Device::flex();
    let model = tiny(Task::Continuation, 2, &device);
    let mut piece = piece();
    let bars = piece.bars.len();
    let end = piece.end_tick;
    let len = piece.bars[1] - piece.bars[0];
    for k in 0..2 {
        piece.bars.push(piece.bars[bars - 1] + len * (k + 1));
        piece.chords.push("Dm".into());
    }
    let options = ContinueOptions {
        common: Common {
            seed: 5,
            watch: Some(WatchOptions { layer: 0, head: 1 }),
            ..Common::default()
        },
        tokens: Some(120),
        bars: Some(2),
        ..ContinueOptions::default()
    };
    let mut rows = 0;
    let out = pollster::block_on(continue_piece(&model, &piece, &options, &device, |p| {
        if let Some(a) = &p.attention {
            rows += a.values.len() / a.keys;
        }
        async { true }
    }))
    .unwrap();
    let generated = out.tracks.last().unwrap();
    assert_eq!(generated.name, CONTINUATION_TRACK);
    assert!(
        !generated.notes.is_empty(),
        "an untrained model still writes notes"
    );
    // New notes come after the prompt's last onset (possibly still in its last bar).
    let last_onset = piece
        .tracks
        .iter()
        .flat_map(|t| &t.notes)
        .map(|n| n.1)
        .max()
        .unwrap();
    assert!(
        generated.notes.iter().all(|n| n.1 >= last_onset),
        "{:?}",
        generated.notes
    );
    assert!(
        generated.notes.iter().all(|n| n.1 < end + 3 * len),
        "{end} {len} {:?} {:?}",
        piece.bars,
        generated.notes
    );
    assert!(rows > 0);
    assert_eq!(out.chords[bars], "Dm", "the planned chord stays on its bar");
    // The token stream itself: the first new bar starts with the planned chord.
    let prompt = prompt_tokens(&piece.to_song()).unwrap();
    let dm = Chord::parse_any("Dm").unwrap();
    let length = Length {
        bars: Some(1),
        ..Length::tokens(400)
    };
    let added = pollster::block_on(continue_tokens(
        &model,
        &prompt,
        length,
        Sampling::default(),
        &[vec![dm]],
        &[],
        None,
        &device,
        |_| async { true },
    ))
    .unwrap();
    let at = added
        .iter()
        .position(|&id| id == Token::Bar.id())
        .expect("a new bar within 400 tokens");
    assert_eq!(
        added[at + 1..at + 3],
        [Token::Position(0).id(), Token::Chord(dm).id()]
    );
}

/// The chord lane as the person sees it over the music is what a continuation reads: an
/// edited chord, and both chords of a two-chord cell where they fall.
#[test]
fn the_prompt_reads_the_chord_lane_as_edited() {
    let mut piece = piece();
    let before = continuation::lane_prompt(&piece).unwrap();
    let id = |s: &str| Token::Chord(Chord::parse_any(s).unwrap()).id();
    let (edited, first, second) = (id("F#dim"), id("Ebaug"), id("Db7"));
    assert!(!before.contains(&edited) && !before.contains(&first) && !before.contains(&second));
    piece.chords[0] = "F#dim".into();
    piece.chords[1] = "Ebaug Db7".into();
    let after = continuation::lane_prompt(&piece).unwrap();
    let bar = Token::Bar.id();
    let bar_starts: Vec<usize> = (0..after.len()).filter(|&i| after[i] == bar).collect();
    let bar_one = &after[bar_starts[0]..bar_starts[1]];
    let bar_two = &after[bar_starts[1]..bar_starts[2]];
    assert_eq!(
        bar_one[1..3],
        [Token::Position(0).id(), edited],
        "{bar_one:?}"
    );
    let at = |ids: &[u32], chord: u32| ids.iter().position(|&x| x == chord).unwrap();
    assert_eq!(bar_two[at(bar_two, first) - 1], Token::Position(0).id());
    let half = (tokens::STEPS_PER_BEAT * 2) as u8;
    assert_eq!(bar_two[at(bar_two, second) - 1], Token::Position(half).id());
    // Bars the lane leaves as they were read the same.
    let fourth = |ids: &[u32]| (0..ids.len()).filter(|&i| ids[i] == bar).nth(3).unwrap();
    assert_eq!(after[fourth(&after)..], before[fourth(&before)..]);
}

#[test]
fn a_live_take_on_a_piece_plays_into_room_after_it_and_writes_its_chords_back() {
    use crate::generate::harmonize::tests::tiny as tiny_harmonizer;
    use crate::generate::live::LiveChords;
    use crate::model::config::{Conditioning, Direction};
    use crate::music::harmony::decode::HarmonyDecode;
    let device = Device::flex();
    let config = PerformerConfig::tiny(Task::Accompaniment, 0, PeConfig::new(PeKind::SineSpe))
        .with_inputs(Some(Conditioning::lagged(1)));
    let model = Performer::new(&config, 1, &device).unwrap();
    let h = Performer::new(
        &tiny_harmonizer(PeConfig::new(PeKind::SineSpe), Direction::Causal),
        2,
        &device,
    )
    .unwrap();
    let decode = HarmonyDecode::default();
    let mut piece = piece();
    // Bar 8 (the last) open, the others planned; the take starts on bar 7 and runs past the
    // piece's end into the room after it.
    piece.chords[7] = String::new();
    let options = LiveOptions {
        from_bar: 6,
        bars: 4,
        ..LiveOptions::default()
    };
    let chords = Some(LiveChords::new(&h, &decode));
    let sampling = PianoSampling {
        temperature: 1.0,
        ..PianoSampling::default()
    };
    let (mut live, grid) = pollster::block_on(live_start(
        &model,
        &played(sampling),
        chords,
        &piece,
        &options,
        None,
        &device,
    ))
    .unwrap();
    assert_eq!(grid.from_step, 6 * 16);
    assert_eq!(grid.from_tick, piece.bars[6]);
    assert_eq!(grid.steps, (piece.bars.len() + 4) * 16, "four bars of room");
    assert_eq!(grid.planned_bars[..3], [true, false, false]);
    // Keys in ticks: a note at the take's start, one a beat later held, one in the count-in.
    let t0 = grid.from_tick as f64;
    let events = [
        (72, t0 - 1900.0, 1),
        (60, t0, 1),
        (60, t0 + 400.0, 0),
        (64, t0 + 480.0, 1),
    ];
    let steps = pollster::block_on(live_step(
        &mut live,
        &model,
        chords,
        &events,
        grid.from_step + 40,
        &device,
    ))
    .unwrap();
    assert_eq!(steps.len(), 41);
    assert_eq!(steps[0].step, grid.from_step);
    let melody = &live.input.sheet.rolls.melody;
    assert!(melody.onset(grid.from_step, 60) && melody.onset(grid.from_step + 4, 64));
    assert!(
        !melody.sustain(grid.from_step, 72),
        "the count-in's key is not the take's"
    );
    // Bar 8 is open: its beats' chords come back as they are decided; bar 7's are planned.
    let decided: Vec<usize> = steps
        .iter()
        .filter(|s| s.chord.is_some())
        .map(|s| s.step)
        .collect();
    assert_eq!(decided, vec![112, 116, 120, 124, 128, 132, 136]);
    let result = live_result(&live, PedalMode::Learnt, None);
    assert_eq!(
        result.pedal,
        Some(Vec::new()),
        "no pedal model: none over the take"
    );
    assert_eq!(
        live_result(&live, PedalMode::Played, None).pedal,
        None,
        "as it was"
    );
    let pedal = crate::music::pedal::model::PedalModel::from_json(include_str!(
        "../../www/models/pedal.json"
    ))
    .unwrap();
    let pedalled = live_result(&live, PedalMode::Learnt, Some(&pedal))
        .pedal
        .unwrap();
    assert!(
        pedalled
            .iter()
            .all(|e| (result.from_tick..=result.end_tick).contains(&e.0)),
        "the learnt pedal lies over the take: {pedalled:?}"
    );
    assert_eq!(result.from_tick, grid.from_tick);
    assert_eq!(result.from_bar, 6);
    assert!(
        result
            .piano
            .iter()
            .all(|n| n.1 >= result.from_tick && n.2 <= result.end_tick)
    );
    assert_eq!(
        result.cells.len(),
        3,
        "bars 7 to 9, the last one partly played"
    );
    assert_eq!(result.cells[0], None, "planned: kept");
    assert!(result.cells[1].as_ref().is_some_and(|c| !c.is_empty()));
    // The partly played bar (three beats heard): its last chord goes on to the bar's end.
    let c = |beat: usize| live.chords()[beat];
    let cell = crate::music::piece::chord_cell(&[c(32), c(33), c(34), c(34)]);
    assert_eq!(result.cells[2].as_deref(), Some(cell.as_str()));
    // Without a harmonizer nothing is decided, and the lane is left as it is.
    let (mut plain, grid) = pollster::block_on(live_start(
        &model,
        &played(sampling),
        None,
        &piece,
        &options,
        None,
        &device,
    ))
    .unwrap();
    pollster::block_on(live_step(
        &mut plain,
        &model,
        None,
        &[],
        grid.from_step + 40,
        &device,
    ))
    .unwrap();
    assert!(
        live_result(&plain, PedalMode::Off, None)
            .cells
            .iter()
            .all(Option::is_none)
    );
    // Out of range: said in words.
    let far = LiveOptions {
        from_bar: 40,
        ..options.clone()
    };
    let err = pollster::block_on(live_start(
        &model,
        &played(sampling),
        None,
        &piece,
        &far,
        None,
        &device,
    ));
    assert!(err.err().unwrap().to_string().contains("past the end"));
    let dense = LiveOptions {
        density: Some(-1.0),
        ..options.clone()
    };
    let err = pollster::block_on(live_start(
        &model,
        &played(sampling),
        None,
        &piece,
        &dense,
        None,
        &device,
    ));
    assert!(err.err().unwrap().to_string().contains("density"));
    // The Density field reaches the live piano: asked for 4 times its onsets, it strikes more
    // than asked for a quarter, on the same keys and seed.
    let onsets = |density: f32| {
        let options = LiveOptions {
            density: Some(density),
            ..options.clone()
        };
        let (mut take, grid) = pollster::block_on(live_start(
            &model,
            &played(sampling),
            None,
            &piece,
            &options,
            None,
            &device,
        ))
        .unwrap();
        pollster::block_on(live_step(
            &mut take,
            &model,
            None,
            &events,
            grid.from_step + 40,
            &device,
        ))
        .unwrap();
        live_result(&take, PedalMode::Off, None).piano.len()
    };
    let (sparse, busy) = (onsets(0.25), onsets(4.0));
    assert!(busy > sparse, "density 4: {busy} notes, 0.25: {sparse}");
}

#[test]
fn a_velocity_model_gives_the_written_piano_its_dynamics_and_a_region_only_its_bars() {
    use crate::music::dynamics::{Dynamics, FEATURES};
    let device = Device::flex();
    let model = tiny(Task::Accompaniment, 1, &device);
    let piece = piece();
    let flat = AccompanyOptions {
        threshold: Some(0.3),
        ..AccompanyOptions::default()
    };
    let run = |options: &AccompanyOptions, piece: &Piece| {
        pollster::block_on(accompany_piece(
            &model,
            &ModelPlay::default(),
            piece,
            options,
            &device,
            |_| async { true },
        ))
        .unwrap()
    };
    let plain = run(&flat, &piece);
    let written = |p: &Piece| {
        p.tracks
            .iter()
            .find(|t| t.role == TrackRole::Generated)
            .unwrap()
            .notes
            .clone()
    };
    assert!(!written(&plain).is_empty());
    assert!(
        written(&plain)
            .iter()
            .all(|n| n.3 == crate::music::roll::GENERATED_VELOCITY)
    );
    // Loud on the beat, softer off it, and a note's velocity follows its register.
    let mut weights = vec![0.0; FEATURES.len()];
    weights[0] = 90.0;
    weights[22] = 12.0;
    let dynamics = Dynamics {
        features: FEATURES.iter().map(|s| s.to_string()).collect(),
        weights,
        residual: 5.0,
        spread: None,
        noise: 0.0,
    };
    let shaped = AccompanyOptions {
        dynamics: Some(std::rc::Rc::new(dynamics)),
        ..flat.clone()
    };
    let out = run(&shaped, &piece);
    let notes = written(&out);
    assert_eq!(
        notes.iter().map(|n| (n.0, n.1, n.2)).collect::<Vec<_>>(),
        written(&plain)
            .iter()
            .map(|n| (n.0, n.1, n.2))
            .collect::<Vec<_>>(),
        "the same notes"
    );
    for n in &notes {
        let expected = (90.0 + 12.0 * (f64::from(n.0) - 60.0) / 12.0)
            .round()
            .clamp(1.0, 127.0) as u8;
        assert_eq!(n.3, expected, "{n:?}");
    }
    // Rewriting bars 3–4 of the shaped piece: the notes kept elsewhere keep their velocities.
    let region = AccompanyOptions {
        common: Common {
            region: Some([2, 4]),
            ..shaped.clone().common.clone()
        },
        dynamics: None,
        ..shaped.clone()
    };
    let again = written(&run(&region, &out));
    let (from, to) = (piece.bars[2], piece.bars[4]);
    // (Notes held into the region are cut where it starts: compare onsets and velocities.)
    let kept = |notes: &[crate::music::piece::PieceNote]| -> Vec<(u8, u64, u8)> {
        notes
            .iter()
            .filter(|n| n.1 < from || n.1 >= to)
            .map(|n| (n.0, n.1, n.3))
            .collect()
    };
    assert_eq!(kept(&again), kept(&notes));
    assert!(
        again
            .iter()
            .filter(|n| n.1 >= from && n.1 < to)
            .all(|n| n.3 == crate::music::roll::GENERATED_VELOCITY)
    );
}

/// What the model reads from a piece is the piece as the person set it: roles from the track
/// list (not from track names), the chord lane's cells as written (an empty cell reads no
/// chord; nothing is detected again), both chords of a two-chord bar, and the phrase lane.
#[test]
fn the_model_reads_the_lanes_and_roles_as_the_piece_holds_them() {
    use crate::generate::piece_input;
    let mut piece = piece();
    let grid = piece.grid(|_| true);
    let input = piece_input(&piece, grid.clone(), true).unwrap();
    let melody = input.sheet.rolls.melody.clone();
    assert!(melody.onset_plane().iter().sum::<f32>() > 0.0);
    // A bar emptied in the lane reads no chord, though its notes would give one.
    piece.chords[1] = String::new();
    piece.chords[2] = "F G7".into();
    piece.phrases = vec![('A', 4), ('B', 4)];
    let input = piece_input(&piece, grid.clone(), true).unwrap();
    let beats = |bar: usize| {
        grid.bar_beats(bar)
            .map(|b| input.chords[b])
            .collect::<Vec<_>>()
    };
    assert!(beats(1).iter().all(Option::is_none), "{:?}", beats(1));
    let f = Chord::parse_any("F").unwrap();
    let g7 = Chord::parse_any("G7").unwrap();
    assert_eq!(beats(2), vec![f, f, g7, g7]);
    assert_eq!(
        input.sheet.labels.phrase[grid.bar_steps(4).start]
            .unwrap()
            .letter,
        'B'
    );
    // The melody is the track marked melody, whatever its name; a track named MELODY that is
    // marked as another part is not read.
    piece.tracks[0].name = "MELODY".into();
    piece.tracks[0].role = TrackRole::Other;
    assert!(piece_input(&piece, grid.clone(), true).is_err());
    piece.tracks[0].name = "Lead synth".into();
    piece.tracks[0].role = TrackRole::Melody;
    let input = piece_input(&piece, grid, true).unwrap();
    assert_eq!(input.sheet.rolls.melody, melody);
}

/// The map of what is on screen: a step-by-step model's attention over a piece it accompanied,
/// computed again by one teacher-forced pass, is the map the generation drew; after a note
/// edit it is the map of the edited notes — the rows before the edit as they were, later ones
/// not. A model that does not read the piano draws the generation's map whatever the piano.
#[test]
fn the_attention_map_is_a_teacher_forced_pass_over_the_notes_shown() {
    use crate::model::config::Conditioning;
    let device = Device::flex();
    let config = PerformerConfig::tiny(Task::Accompaniment, 0, PeConfig::new(PeKind::SineSpe))
        .with_inputs(Some(Conditioning::AUTOREGRESSIVE));
    let stepwise = Performer::new(&config, 4, &device).unwrap();
    let options = AccompanyOptions {
        common: Common {
            chunk_steps: 16,
            watch: Some(WatchOptions { layer: 1, head: 1 }),
            ..Common::default()
        },
        ..AccompanyOptions::default()
    };
    // The watched rows, one per step, each over every key so far.
    let collect = |rows: &mut Vec<Vec<f32>>, a: Option<crate::generate::AttentionRows>| {
        let a = a.expect("attention rows");
        assert_eq!(a.start, rows.len());
        for row in a.values.chunks(a.keys) {
            rows.push(row.to_vec());
        }
    };
    let map_of = |model: &Performer, piece: &Piece| {
        let mut rows = Vec::new();
        let steps = pollster::block_on(accompaniment_attention(
            model,
            piece,
            &options,
            &device,
            None,
            |p| {
                collect(&mut rows, p.attention);
                async { true }
            },
        ))
        .unwrap();
        assert_eq!(rows.len(), steps);
        rows
    };
    // Rows are over the keys of their chunk so far (a later key of the chunk weighs 0).
    let close = |a: &[Vec<f32>], b: &[Vec<f32>]| {
        let at = |row: &[f32], k: usize| row.get(k).copied().unwrap_or(0.0);
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(x, y)| (0..x.len().max(y.len())).all(|k| (at(x, k) - at(y, k)).abs() < 1e-4))
    };
    for model in [&stepwise, &tiny(Task::Accompaniment, 5, &device)] {
        let mut drawn = Vec::new();
        let out = pollster::block_on(accompany_piece(
            model,
            &ModelPlay::default(),
            &piece(),
            &options,
            &device,
            |p| {
                if p.attention.is_some() {
                    collect(&mut drawn, p.attention);
                }
                async { true }
            },
        ))
        .unwrap();
        let again = map_of(model, &out);
        assert!(close(&drawn, &again), "the generation's map, again");
        // A note of the written piano moved in bar 5.
        let mut edited = out.clone();
        let piano = edited
            .tracks
            .iter_mut()
            .find(|t| t.role == TrackRole::Generated)
            .unwrap();
        let bar5 = out.bars[4];
        piano.notes.retain(|n| n.1 < bar5 || n.1 >= out.bars[5]);
        piano.notes.push((40, bar5, bar5 + 240, 80));
        let after = map_of(model, &edited);
        let step = 4 * 16;
        assert!(
            close(&drawn[..=step], &after[..=step]),
            "rows up to the edit"
        );
        assert_eq!(
            close(&drawn, &after),
            !model.config.is_autoregressive(),
            "rows after the edit change only for a model that reads the piano"
        );
    }
}

/// A continuation model's map of a piece, drawn by one pass of the watched layer and head, is
/// the map the whole model computes over the same tokens (reading them as a generation's
/// prompt does), with sineSPE and with F-StrIPE's phrase coordinates.
#[test]
fn a_continuation_map_is_the_prompts_attention() {
    let device = Device::flex();
    let piece = piece();
    let options = ContinueOptions {
        common: Common {
            watch: Some(WatchOptions { layer: 1, head: 1 }),
            ..Common::default()
        },
        ..ContinueOptions::default()
    };
    let prompt = lane_prompt_for_tests(&piece);
    for pe in [
        PeConfig::new(PeKind::SineSpe),
        PeConfig::new(PeKind::Fstripe),
    ] {
        let config = PerformerConfig::tiny(Task::Continuation, VOCAB_SIZE, pe);
        let model = Performer::new(&config, 6, &device).unwrap();
        let mut whole = Vec::new();
        pollster::block_on(continue_tokens(
            &model,
            &prompt,
            Length::tokens(0),
            Sampling {
                temperature: 1.0,
                top_p: 1.0,
                seed: options.common.seed,
                echo: 0.0,
                density: None,
                density_on_plan: true,
                key: 0.0,
            },
            &[],
            &piece.bar_phrases(),
            Some(crate::generate::Watch { layer: 1, head: 1 }),
            &device,
            |p| {
                if let Some(a) = p.attention {
                    whole.extend(a.values.chunks(a.keys).map(<[f32]>::to_vec));
                }
                async { true }
            },
        ))
        .unwrap();
        let mut shown = Vec::new();
        pollster::block_on(continuation_attention(
            &model,
            &piece,
            &options,
            &device,
            None,
            |p| {
                let a = p.attention.unwrap();
                shown.extend(a.values.chunks(a.keys).map(<[f32]>::to_vec));
                async { true }
            },
        ))
        .unwrap();
        assert_eq!(whole.len(), prompt.len());
        assert_eq!(shown.len(), whole.len());
        for (a, b) in whole.iter().zip(&shown) {
            let at = |r: &[f32], k: usize| r.get(k).copied().unwrap_or(0.0);
            assert!((0..a.len().max(b.len())).all(|k| (at(a, k) - at(b, k)).abs() < 1e-4));
        }
    }
}

fn lane_prompt_for_tests(piece: &Piece) -> Vec<u32> {
    super::continuation::lane_prompt(piece).unwrap()
}

/// Another head, or a layer no deeper, over the same notes is drawn from the features the last
/// map's pass kept, and is the map a fresh pass draws; other notes, or a deeper layer, run the
/// model again (and are right too).
#[test]
fn a_map_of_another_head_is_drawn_from_the_last_pass_features() {
    use crate::generate::MapFeatures;
    use crate::model::config::Conditioning;
    let device = Device::flex();
    let accompaniment = Performer::new(
        &PerformerConfig::tiny(Task::Accompaniment, 0, PeConfig::new(PeKind::SineSpe))
            .with_inputs(Some(Conditioning::AUTOREGRESSIVE)),
        4,
        &device,
    )
    .unwrap();
    let continuation = Performer::new(
        &PerformerConfig::tiny(
            Task::Continuation,
            VOCAB_SIZE,
            PeConfig::new(PeKind::Fstripe),
        ),
        5,
        &device,
    )
    .unwrap();
    let map = |model: &Performer, piece: &Piece, layer, head, cache: Option<&mut MapFeatures>| {
        let options = AccompanyOptions {
            common: Common {
                watch: Some(WatchOptions { layer, head }),
                ..Common::default()
            },
            ..AccompanyOptions::default()
        };
        let continuing = ContinueOptions {
            common: options.common.clone(),
            ..ContinueOptions::default()
        };
        let mut values = Vec::new();
        let on = |p: Progress| {
            values.extend(p.attention.unwrap().values);
            async { true }
        };
        let run = match model.config.task {
            Task::Continuation => pollster::block_on(continuation_attention(
                model,
                piece,
                &continuing,
                &device,
                cache,
                on,
            )),
            _ => pollster::block_on(accompaniment_attention(
                model, piece, &options, &device, cache, on,
            )),
        };
        run.unwrap();
        values
    };
    let same = |a: &[f32], b: &[f32]| {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6)
    };
    let original = piece();
    let mut edited = piece();
    let melody = edited
        .tracks
        .iter_mut()
        .find(|t| t.role == TrackRole::Melody)
        .unwrap();
    melody.notes[0].0 += 2;
    let others = [
        Performer::new(&accompaniment.config, 14, &device).unwrap(),
        Performer::new(&continuation.config, 15, &device).unwrap(),
    ];
    for (model, other) in [&accompaniment, &continuation].into_iter().zip(&others) {
        let mut cache = MapFeatures::default();
        let first = map(model, &original, 1, 0, Some(&mut cache));
        assert!(same(&first, &map(model, &original, 1, 0, None)));
        // A hit runs no model: another model's weights given the same cache draw this one's
        // map (the page keeps a cache per model, dropped when the model is replaced).
        let hit = map(other, &original, 0, 1, Some(&mut cache.clone()));
        assert!(same(&hit, &map(model, &original, 0, 1, None)));
        assert!(!same(&hit, &map(other, &original, 0, 1, None)));
        for (layer, head) in [(1, 1), (0, 1), (0, 0)] {
            let cached = map(model, &original, layer, head, Some(&mut cache));
            let fresh = map(model, &original, layer, head, None);
            assert!(same(&cached, &fresh), "layer {layer} head {head}");
        }
        // Other notes: the cache is not read for them.
        let after = map(model, &edited, 1, 1, Some(&mut cache));
        assert!(same(&after, &map(model, &edited, 1, 1, None)));
        assert!(!same(&after, &map(model, &original, 1, 1, None)));
    }
}

/// Alternatives (`Options::alternatives`): K pieces, the k-th the piece seed `seed + k` writes
/// alone, for the step-by-step accompaniment (written together), one written at once, a
/// region rewrite and a continuation (one after another); progress says which alternative it
/// is about; more than 8 is refused in words.
#[test]
fn alternatives_are_each_their_seed_alone() {
    use crate::model::config::Conditioning;
    let device = Device::flex();
    let piece = piece();
    for conditioning in [Some(Conditioning::AUTOREGRESSIVE), None] {
        let config = PerformerConfig::tiny(
            Task::Accompaniment,
            VOCAB_SIZE,
            PeConfig::new(PeKind::SineSpe),
        )
        .with_inputs(conditioning);
        let model = Performer::new(&config, 1, &device).unwrap();
        for region in [None, Some([2, 4])] {
            let options = AccompanyOptions {
                common: Common {
                    seed: 5,
                    region,
                    alternatives: Some(3),
                    ..Common::default()
                },
                ..AccompanyOptions::default()
            };
            let mut which = Vec::new();
            let pieces = pollster::block_on(accompany_pieces(
                &model,
                &ModelPlay::default(),
                &piece,
                &options,
                &device,
                |p| {
                    which.push(p.alternative);
                    async { true }
                },
            ))
            .unwrap();
            assert_eq!(pieces.len(), 3);
            let together = conditioning.is_some();
            assert!(
                which
                    .iter()
                    .all(|w| w.is_some_and(|[i, k]| k == 3 && (i == 0) == together))
            );
            for (k, p) in pieces.iter().enumerate() {
                let alone = pollster::block_on(accompany_piece(
                    &model,
                    &ModelPlay::default(),
                    &piece,
                    &options.alternative(k),
                    &device,
                    |_| async { true },
                ))
                .unwrap();
                assert_eq!(
                    p.tracks, alone.tracks,
                    "{conditioning:?} {region:?} alternative {k}"
                );
            }
            if together {
                assert_ne!(pieces[0].tracks, pieces[1].tracks);
            }
        }
    }
    let model = tiny(Task::Continuation, 2, &device);
    let options = ContinueOptions {
        common: Common {
            seed: 8,
            alternatives: Some(2),
            ..Common::default()
        },
        bars: Some(2),
        ..ContinueOptions::default()
    };
    let mut which = Vec::new();
    let pieces = pollster::block_on(continue_pieces(&model, &piece, &options, &device, |p| {
        which.push(p.alternative);
        async { true }
    }))
    .unwrap();
    assert_eq!(which.first(), Some(&Some([1, 2])));
    assert_eq!(which.last(), Some(&Some([2, 2])));
    for (k, p) in pieces.iter().enumerate() {
        let alone = pollster::block_on(continue_piece(
            &model,
            &piece,
            &options.alternative(k),
            &device,
            |_| async { true },
        ))
        .unwrap();
        assert_eq!(p.piece.tracks, alone.tracks, "continuation alternative {k}");
    }
    let nine = AccompanyOptions {
        common: Common {
            alternatives: Some(9),
            ..Common::default()
        },
        ..AccompanyOptions::default()
    };
    let err = nine.check().unwrap_err();
    assert_eq!(err.field, "alternatives");
    assert!(err.message.contains('8'), "{}", err.message);
    assert_eq!(options.alternative(3).common.seed, 11);
    let last = AccompanyOptions {
        common: Common {
            seed: u32::MAX as u64,
            ..Common::default()
        },
        ..AccompanyOptions::default()
    };
    assert_eq!(last.alternative(1).common.seed, 0);
}

/// How a model with `sampling` and no texture echo plays.
fn played(sampling: PianoSampling) -> ModelPlay {
    ModelPlay {
        sampling,
        ..ModelPlay::default()
    }
}

/// A continuation's new bars get the learnt sustain pedal by default (the shipped model),
/// none with the pedal off, and the prompt's bars keep what they had.
#[test]
fn a_continuations_new_bars_are_pedalled_as_asked() {
    let device = Device::flex();
    let model = tiny(Task::Continuation, 2, &device);
    let pedal = crate::music::pedal::model::PedalModel::from_json(include_str!(
        "../../www/models/pedal.json"
    ))
    .unwrap();
    let mut piece = piece();
    let bars = piece.bars.len();
    let len = piece.bars[1] - piece.bars[0];
    for k in 0..4 {
        piece.bars.push(piece.bars[bars - 1] + len * (k + 1));
        piece.chords.push(["C", "Am", "F", "G"][k as usize].into());
    }
    let run = |mode: PedalMode| {
        let options = ContinueOptions {
            common: Common {
                seed: 3,
                ..Common::default()
            },
            tokens: Some(240),
            bars: Some(4),
            pedal: mode,
            pedal_model: Some(std::rc::Rc::new(pedal.clone())),
            ..ContinueOptions::default()
        };
        pollster::block_on(continue_piece(
            &model,
            &piece,
            &options,
            &device,
            |_| async { true },
        ))
        .unwrap()
    };
    let learnt = run(PedalMode::Learnt);
    let track = learnt.tracks.last().unwrap();
    assert_eq!(track.name, CONTINUATION_TRACK);
    let first = track.notes.iter().map(|n| n.1).min().unwrap();
    let bar = learnt.bars.partition_point(|&t| t <= first) - 1;
    // The pedal is the learnt one of the notes written, over their bars ("Pedal these bars"
    // on them gives the same), and nothing before them.
    let mut dry = learnt.clone();
    dry.tracks.last_mut().unwrap().pedal.clear();
    let index = dry.tracks.len() - 1;
    let again = accompany::pedal_track(&dry, index, [bar, usize::MAX], &pedal).unwrap();
    assert_eq!(track.pedal, again.tracks[index].pedal);
    assert!(
        track.pedal.iter().all(|e| e.0 >= learnt.bars[bar]),
        "only the bars written: {:?} from bar {bar}",
        track.pedal
    );
    // A pianist's part over the same bars is pedalled (the untrained model's notes may give
    // the pedal no reason to go down).
    let played: Vec<_> = piece
        .tracks
        .iter()
        .find(|t| t.role == TrackRole::Piano)
        .unwrap()
        .notes
        .clone();
    dry.tracks[index].notes = played;
    let pianist = accompany::pedal_track(&dry, index, [0, usize::MAX], &pedal).unwrap();
    assert!(!pianist.tracks[index].pedal.is_empty());
    assert!(
        piece
            .tracks
            .iter()
            .zip(&learnt.tracks)
            .all(|(a, b)| a.pedal == b.pedal),
        "the prompt's tracks keep their pedal"
    );
    let off = run(PedalMode::Off);
    assert!(off.tracks.last().unwrap().pedal.is_empty());
    assert_eq!(
        off.tracks.last().unwrap().notes,
        track.notes,
        "the same notes either way"
    );
}

/// A causal pedal model pedals a live take's piano as it plays: each step's moves come back
/// with its notes, what was heard is what the take keeps, and it is the model's pedal of the
/// piano played, read whole; Pedal off plays none.
#[test]
fn a_live_take_is_pedalled_as_it_plays_and_keeps_the_pedal_heard() {
    use crate::model::config::Conditioning;
    use crate::music::pedal::model::tests::{fixture, fixture_pianist};
    use crate::music::pedal::model::{Fit, Link, PedalModel, Steps, pianist_steps};
    let device = Device::flex();
    let config = PerformerConfig::tiny(Task::Accompaniment, 0, PeConfig::new(PeKind::SineSpe))
        .with_inputs(Some(Conditioning::lagged(1)));
    let model = Performer::new(&config, 1, &device).unwrap();
    // A causal pedal fitted on the fixture's pianist (a change at every bar's chord).
    let (g, labels, piano, melody) = fixture();
    let n = g.num_steps();
    let (press, down) = pianist_steps(&g, &fixture_pianist(&g, &labels), g.tick_at(n));
    let mut fit = Fit::new(1, Link::Linear, true);
    fit.add(
        &Steps::causal(&g, &labels, (&piano, &melody), 0..n),
        0..n,
        &press,
        &down,
    );
    let causal: PedalModel = fit.solve(1e-3).unwrap();
    let piece = piece();
    let options = LiveOptions {
        from_bar: 2,
        bars: 2,
        ..LiveOptions::default()
    };
    let sampling = PianoSampling {
        temperature: 1.0,
        ..PianoSampling::default()
    };
    let take = |options: &LiveOptions| {
        let (mut live, grid) = pollster::block_on(live_start(
            &model,
            &played(sampling),
            None,
            &piece,
            options,
            Some(&causal),
            &device,
        ))
        .unwrap();
        let mut steps = Vec::new();
        for ahead in [0, 3, 17, 40, 70] {
            steps.extend(
                pollster::block_on(live_step(
                    &mut live,
                    &model,
                    None,
                    &[],
                    grid.from_step + ahead,
                    &device,
                ))
                .unwrap(),
            );
        }
        (live, grid, steps)
    };
    let (live, grid, steps) = take(&options);
    let heard: Vec<(u64, u8, u8)> = steps
        .iter()
        .flat_map(|s| s.pedal.iter().map(|&(tick, v)| (tick, 64, v)))
        .collect();
    let sheet = &live.input.sheet;
    for s in &steps {
        for &(tick, _) in &s.pedal {
            assert!(tick >= sheet.grid.tick_at(s.step) && tick < sheet.grid.tick_at(s.step + 1));
        }
    }
    assert!(
        heard.iter().filter(|e| e.2 >= 64).count() >= 3,
        "presses at the bars' chords: {heard:?}"
    );
    let kept = live_result(&live, PedalMode::Learnt, None).pedal.unwrap();
    assert_eq!(kept[..heard.len()], heard[..], "what was heard is kept");
    assert!(
        kept.len() <= heard.len() + 1,
        "and at most a lift at the end"
    );
    let decided = live.decided();
    let read = Steps::for_model(
        &causal,
        &sheet.grid,
        &sheet.labels,
        (live.piano(), &sheet.rolls.melody),
    );
    assert_eq!(causal.pedal(&read, &sheet.grid, decided), kept);
    assert_eq!(grid.from_step, 32);
    let off = LiveOptions {
        pedal: PedalMode::Off,
        ..options
    };
    let (live, _, steps) = take(&off);
    assert!(steps.iter().all(|s| s.pedal.is_empty()));
    assert_eq!(
        live_result(&live, PedalMode::Off, None).pedal,
        Some(Vec::new())
    );
}
