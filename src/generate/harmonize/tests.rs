//! The harmonizer end to end on songs made here: it learns the chords of a melody, and its
//! causal form reads nothing after the current beat.

use burn::tensor::Device;
use pollster::block_on;
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::*;
use crate::data::corpus::{Corpus, Piece as TrainPiece, WindowSpec};
use crate::model::config::{Direction, PerformerConfig};
use crate::model::pe::{PeConfig, PeKind};
use crate::music::chords::Quality;
use crate::music::fixtures;
use crate::music::harmony::decode::HarmonyDecode;
use crate::music::midi::Song;
use crate::train::step::{Schedule, Trainer};

/// A tiny harmonizer's config.
pub(crate) fn tiny(pe: PeConfig, direction: Direction) -> PerformerConfig {
    PerformerConfig::tiny(Task::Harmonization, 0, pe).with_direction(Some(direction))
}

/// The fixture song without its piano: a melody on the chord tones of I–V–vi–IV in `key`.
pub(crate) fn melody_only(key: u8, bars: u64) -> Song {
    let mut song = fixtures::song(key, bars);
    song.tracks.retain(|t| t.name == "MELODY");
    song
}

/// The fixture's progression, one chord per beat.
fn progression(key: u8, bars: usize) -> Vec<Option<Chord>> {
    let bar = [
        (0u8, Quality::Maj),
        (7, Quality::Maj),
        (9, Quality::Min),
        (5, Quality::Maj),
    ];
    (0..bars * 4)
        .map(|b| {
            let (root, quality) = bar[(b / 4) % 4];
            Some(Chord {
                root: (root + key) % 12,
                quality,
            })
        })
        .collect()
}

#[test]
fn a_harmonizer_learns_the_chords_of_a_melody() {
    let device = Device::flex().autodiff();
    // Training pieces in four keys: chords detected from melody and piano together.
    let corpus = Corpus {
        pieces: [0u8, 2, 5, 7]
            .iter()
            .map(|&k| TrainPiece::from_song(format!("key {k}"), &fixtures::song(k, 8)).unwrap())
            .collect(),
    };
    // Relative positions: a beat can find the others of its bar.
    let config = tiny(PeConfig::new(PeKind::SineSpe), Direction::Bidirectional);
    let spec = WindowSpec {
        len: 16,
        max_shift: 2,
        ..WindowSpec::for_model(&config, 16)
    };
    let model = Performer::new(&config, 1, &device).unwrap();
    let schedule = Schedule {
        peak_lr: 1e-2,
        warmup: 5,
        total: 150,
        final_ratio: 0.1,
    };
    let mut trainer = Trainer::new(model, schedule, 1.0, 7);
    let mut rng = StdRng::seed_from_u64(3);
    let mut losses = Vec::new();
    for _ in 0..150 {
        let batch = corpus.sample(Task::Harmonization, &spec, 8, &mut rng);
        losses.push(block_on(trainer.train_step(&batch)).unwrap());
    }
    let first: f32 = losses[..5].iter().sum::<f32>() / 5.0;
    let last: f32 = losses[145..].iter().sum::<f32>() / 5.0;
    assert!(last < 0.5 * first, "{first} -> {last}: {losses:?}");
    // The melody alone of a key it trained on: its progression comes back, in bars.
    let model = trainer.model.clone();
    let mut input = crate::generate::accompaniment_input(&melody_only(5, 8), None, None).unwrap();
    let song = melody_only(5, 8);
    assert!(!has_accompaniment(&song, &input));
    block_on(harmonize_input(
        &model,
        &HarmonyDecode::default(),
        &mut input,
        Choice::Best,
        0,
    ))
    .unwrap();
    let want = progression(5, 8);
    let right = input
        .chords
        .iter()
        .zip(&want)
        .filter(|(a, b)| a.map(|c| c.root) == b.map(|c| c.root))
        .count();
    assert!(
        right * 4 >= want.len() * 3,
        "{right} of {} roots: {:?}",
        want.len(),
        input.chords
    );
    assert_eq!(
        input.sheet.labels.chord[0], input.chords[0],
        "the labels follow the new chords"
    );
}

#[test]
fn the_causal_form_reads_nothing_after_the_current_beat() {
    let device = Device::flex();
    let song = melody_only(0, 8);
    let input = crate::generate::accompaniment_input(&song, None, None).unwrap();
    let mut changed = input.sheet.rolls.melody.clone();
    // Every note from beat 20 on moves up a tone.
    let from = 20 * input.sheet.grid.steps_per_beat;
    for s in from..changed.num_steps {
        for p in (0..126).rev() {
            if input.sheet.rolls.melody.sustain(s, p) {
                changed.set(s, p, false, false, 0);
                changed.set(s, p + 2, input.sheet.rolls.melody.onset(s, p), true, 80);
            }
        }
    }
    for (direction, later_matters) in [(Direction::Causal, false), (Direction::Bidirectional, true)]
    {
        let model =
            Performer::new(&tiny(PeConfig::new(PeKind::SineSpe), direction), 3, &device).unwrap();
        let read = |melody| {
            block_on(chord_log_probs(
                &model,
                melody,
                &input.sheet.rolls.bridge,
                &input.sheet.labels,
                5,
            ))
            .unwrap()
        };
        let (a, b) = (read(&input.sheet.rolls.melody), read(&changed));
        let earlier = 20 * CHORD_CLASSES;
        let moved = a[..earlier]
            .iter()
            .zip(&b[..earlier])
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        if later_matters {
            assert!(moved > 1e-4, "the whole-melody form hears later notes");
        } else {
            assert!(moved < 1e-5, "the causal form moved by {moved}");
            assert_ne!(a[earlier..], b[earlier..], "it does hear the changed beats");
        }
    }
    // A continuation of a bidirectional sequence is refused in words.
    let model = Performer::new(
        &tiny(PeConfig::new(PeKind::None), Direction::Bidirectional),
        3,
        &device,
    )
    .unwrap();
    let e = crate::data::Example {
        len: 2,
        inputs: vec![0.0; 2 * model.config.input_dim],
        targets: vec![0.0; 2],
        coordinates: Vec::new(),
    };
    let (x, _, _) = stack(std::slice::from_ref(&e), &device);
    let mut state = model.start(0, false, &device);
    model
        .forward(Inputs::Rolls(x.clone()), None, &mut state, None)
        .unwrap();
    let err = model
        .forward(Inputs::Rolls(x), None, &mut state, None)
        .unwrap_err();
    assert!(
        err.to_string().contains("whole sequence in one call"),
        "{err}"
    );
}
