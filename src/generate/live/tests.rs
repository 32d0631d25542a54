//! Live accompaniment on songs made here: a model that reads the melody a step late plays, live,
//! exactly what it plays offline; keys held and released are heard as they are; chords the
//! lane leaves open are decided beat by beat; what cannot play live says so.

use burn::tensor::Device;
use pollster::block_on;

use super::*;
use crate::generate::harmonize::tests::tiny;
use crate::generate::{Given, Reports, accompaniment_input, accompany_steps, input_example};
use crate::model::config::{Conditioning, Direction, PerformerConfig};
use crate::model::pe::{PeConfig, PeKind};
use crate::music::fixtures::song;

fn accompanist(conditioning: Conditioning) -> Performer {
    let config = PerformerConfig::tiny(Task::Accompaniment, 0, PeConfig::new(PeKind::SineSpe))
        .with_inputs(Some(conditioning));
    Performer::new(&config, 3, &Device::flex()).unwrap()
}

fn harmonizer(direction: Direction) -> Performer {
    Performer::new(
        &tiny(PeConfig::new(PeKind::SineSpe), direction),
        4,
        &Device::flex(),
    )
    .unwrap()
}

/// The notes of `roll` as (pitch, first step, end step).
fn notes_of(roll: &PianoRoll) -> Vec<(u8, usize, usize)> {
    let mut out = Vec::new();
    for p in 0..PITCHES {
        for s in 0..roll.num_steps {
            if roll.onset(s, p) {
                let mut e = s + 1;
                while e < roll.num_steps && roll.sustain(e, p) && !roll.onset(e, p) {
                    e += 1;
                }
                out.push((p as u8, s, e));
            }
        }
    }
    out
}

/// Plays `notes` into `live` exactly in time: the keys pressed and released at step `t − 1`
/// reach it before step `t` is decided (a note played at `t` itself is heard after).
fn play(
    live: &mut Live,
    model: &Performer,
    chords: Option<LiveChords<'_>>,
    notes: &[(u8, usize, usize)],
) -> Vec<LiveStep> {
    let mut out = Vec::new();
    for t in live.from..live.len() {
        if t > 0 {
            for &(p, _, e) in notes.iter().filter(|n| n.2 == t - 1) {
                live.note_off(p, e as f64);
            }
            for &(p, s, _) in notes.iter().filter(|n| n.1 == t - 1) {
                live.note_on(p, s as f64);
            }
        }
        out.extend(block_on(live.decide(model, chords, t, &Device::flex())).unwrap());
    }
    out
}

fn threshold() -> PianoSampling {
    PianoSampling {
        threshold: Some(0.4),
        seed: 7,
        ..Default::default()
    }
}

#[test]
fn a_model_that_hears_the_melody_a_step_late_plays_live_what_it_plays_offline() {
    let device = Device::flex();
    let m = accompanist(Conditioning::lagged(1));
    let input = accompaniment_input(&song(2, 3), None, None).unwrap();
    let e = input_example(&m, &input);
    let from = 16; // the second bar: the first is known, its piano read in one pass
    let mut given = PianoRoll::new(e.len);
    for t in 0..from {
        given.set(t, 50, t == 0, true, 0);
    }
    let offline = block_on(accompany_steps(
        &m,
        &e,
        Given::plain(Some(&given), from..e.len),
        threshold(),
        Reports::at_end(),
        &device,
        |_| async { true },
    ))
    .unwrap();
    let melody = notes_of(&input.sheet.rolls.melody);
    let planned = vec![true; input.sheet.grid.num_beats()];
    let mut live = block_on(Live::start(
        &m,
        None,
        input.clone(),
        planned,
        &given,
        from,
        threshold(),
        &device,
    ))
    .unwrap();
    let steps = play(&mut live, &m, None, &melody);
    assert_eq!(steps.len(), e.len - from);
    assert!(steps.iter().any(|s| !s.onsets.is_empty()), "it plays");
    for t in 0..e.len {
        for p in 0..PITCHES {
            assert_eq!(
                (live.piano().onset(t, p), live.piano().sustain(t, p)),
                (offline.onset(t, p), offline.sustain(t, p)),
                "step {t}, pitch {p}"
            );
        }
    }
    // Each step's report says what starts and what stops, as the roll has it.
    for s in &steps {
        for &p in &s.onsets {
            assert!(offline.onset(s.step, p as usize));
        }
        for &p in &s.ends {
            let p = p as usize;
            assert!(offline.sustain(s.step - 1, p));
            assert!(offline.onset(s.step, p) || !offline.sustain(s.step, p));
        }
    }
    // The melody as heard is the melody played.
    assert_eq!(notes_of(&live.input.sheet.rolls.melody), melody);
    // Asking again for a step already decided decides nothing.
    assert!(
        block_on(live.decide(&m, None, from, &device))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn keys_are_heard_as_held_until_they_come_up() {
    let device = Device::flex();
    let m = accompanist(Conditioning::AUTOREGRESSIVE);
    let input = accompaniment_input(&song(0, 2), None, None).unwrap();
    let planned = vec![true; input.sheet.grid.num_beats()];
    let given = PianoRoll::new(input.sheet.grid.num_steps());
    let mut live = block_on(Live::start(
        &m,
        None,
        input,
        planned,
        &given,
        0,
        threshold(),
        &device,
    ))
    .unwrap();
    // Played a little early for step 2: heard there, and at step 2 itself.
    live.note_on(64, 1.8);
    block_on(live.decide(&m, None, 2, &device)).unwrap();
    let melody = &live.input.sheet.rolls.melody;
    assert!(melody.onset(2, 64) && melody.sustain(2, 64));
    assert!(melody.sustain(3, 64), "held on: taken to last its beat");
    assert!(!melody.sustain(1, 64));
    // Still down at step 6: sounding through the beat that step 4 starts.
    block_on(live.decide(&m, None, 6, &device)).unwrap();
    assert!((2..8).all(|s| live.input.sheet.rolls.melody.sustain(s, 64)));
    // Up at 6.2: it ends there, and what was taken to sound on is taken back.
    live.note_off(64, 6.2);
    let melody = &live.input.sheet.rolls.melody;
    assert!((2..6).all(|s| melody.sustain(s, 64)));
    assert!(!melody.sustain(6, 64) && !melody.sustain(7, 64));
    assert_eq!(notes_of(melody), vec![(64, 2, 6)]);
    // A key pressed again while down ends the first note.
    live.note_on(60, 8.0);
    live.note_on(60, 9.0);
    live.note_off(60, 10.0);
    let pitch60: Vec<_> = notes_of(&live.input.sheet.rolls.melody)
        .into_iter()
        .filter(|n| n.0 == 60)
        .collect();
    assert_eq!(pitch60, vec![(60, 8, 9), (60, 9, 10)]);
}

#[test]
fn open_chords_are_decided_beat_by_beat_and_planned_ones_kept() {
    let device = Device::flex();
    let m = accompanist(Conditioning::lagged(1));
    let h = harmonizer(Direction::Causal);
    let decode = HarmonyDecode::default();
    let chords = LiveChords::new(&h, &decode);
    let input = accompaniment_input(&song(2, 3), None, None).unwrap();
    let beats = input.sheet.grid.num_beats();
    let given_chords = input.chords.clone();
    // The first two bars planned, the third left open.
    let planned: Vec<bool> = (0..beats).map(|b| b < 8).collect();
    let melody = notes_of(&input.sheet.rolls.melody);
    let given = PianoRoll::new(input.sheet.grid.num_steps());
    let mut live = block_on(Live::start(
        &m,
        Some(chords),
        input,
        planned,
        &given,
        4, // from the second beat
        threshold(),
        &device,
    ))
    .unwrap();
    let steps = play(&mut live, &m, Some(chords), &melody);
    let decided: Vec<usize> = steps
        .iter()
        .filter(|s| s.chord.is_some())
        .map(|s| s.step / 4)
        .collect();
    assert_eq!(decided, (8..beats).collect::<Vec<_>>(), "open beats only");
    for s in steps.iter().filter(|s| s.chord.is_some()) {
        let beat = s.step / 4;
        assert_eq!(live.chords()[beat], s.chord.unwrap());
        for t in s.step..s.step + 4 {
            assert_eq!(
                live.input.sheet.labels.chord[t],
                s.chord.unwrap(),
                "the lane as played"
            );
        }
    }
    assert_eq!(
        live.chords()[..8],
        given_chords[..8],
        "planned chords are played"
    );
}

#[test]
fn what_cannot_play_live_says_so() {
    let device = Device::flex();
    let input = accompaniment_input(&song(0, 1), None, None).unwrap();
    let given = PianoRoll::new(input.sheet.grid.num_steps());
    let at_once = accompanist(Conditioning {
        labels: true,
        piano: false,
        melody_lag: 0,
        reference: false,
    });
    let err = |r: Result<Live, GenerateError>| r.err().expect("an error").to_string();
    let start = |m: &Performer, chords: Option<LiveChords<'_>>, from: usize| {
        block_on(Live::start(
            m,
            chords,
            input.clone(),
            vec![],
            &given,
            from,
            threshold(),
            &device,
        ))
    };
    assert!(err(start(&at_once, None, 0)).contains("step by step"));
    let m = accompanist(Conditioning::AUTOREGRESSIVE);
    let whole = harmonizer(Direction::Bidirectional);
    let decode = HarmonyDecode::default();
    let chords = LiveChords::new(&whole, &decode);
    assert!(err(start(&m, Some(chords), 0)).contains("causal harmonizer"));
    assert!(err(start(&m, None, 2)).contains("starts on a beat"));
    assert!(err(start(&m, None, 10_000)).contains("no room"));
}

#[test]
/// What a live structural harmonizer reads at a beat (its first step's coordinates) is what it
/// was trained on (`beat_labels`).
fn a_beat_s_coordinates_are_its_first_step_s() {
    use crate::data::beats::beat_labels;
    use crate::data::features::LabelFeatures;
    use crate::model::pe::StructureLevel;
    use crate::music::grid::Grid;
    use crate::music::labels::StepLabels;
    let grid = Grid::regular((0..=12).map(|b| b * 480).collect(), 4, 3, 1);
    let labels = StepLabels::new(&grid, &PianoRoll::new(grid.num_steps()), &[], &[]);
    let levels = [
        StructureLevel::Phrase,
        StructureLevel::Position,
        StructureLevel::Time,
    ];
    let beats = beat_labels(&labels);
    let per_beat = beats.coordinates(&levels);
    for beat in 0..beats.len() {
        let mut at_step = Vec::new();
        labels.write_coordinates(beat * 4, &levels, &mut at_step);
        assert_eq!(at_step, per_beat[beat * 3..beat * 3 + 3], "beat {beat}");
    }
}
