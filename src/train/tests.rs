//! A short real training run: the loss must fall.

use burn::tensor::Device;
use pollster::block_on;
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::step::{Schedule, Trainer, bce_per_step};
use crate::data::corpus::{Batch, WindowSpec};
use crate::data::example::{crop_starts, random_example};
use crate::model::config::{Conditioning, PerformerConfig, Task};
use crate::model::pe::{Kernel, PeConfig, PeKind, StructureLevel};
use crate::model::performer::Performer;
use crate::music::chords::{Chord, Quality};
use crate::music::grid::Grid;
use crate::music::labels::StepLabels;
use crate::music::midi::Note;
use crate::music::phrases::Segment;
use crate::music::roll::{MultiRoll, Role};

/// A small song made here: a I–V–vi–IV progression, a melody on the chord tones, the piano
/// holding each chord for a bar. `key` transposes it.
pub(crate) fn song(key: u8, bars: u64) -> (Grid, MultiRoll, StepLabels) {
    let ppq = 480u64;
    let progression = [
        (0u8, Quality::Maj),
        (7, Quality::Maj),
        (9, Quality::Min),
        (5, Quality::Maj),
    ];
    let (mut melody, mut piano, mut chords) = (Vec::new(), Vec::new(), Vec::new());
    let note = |pitch: u8, start: u64, end: u64| Note {
        pitch,
        velocity: 80,
        start,
        end,
        channel: 0,
    };
    for bar in 0..bars {
        let (root, quality) = progression[bar as usize % 4];
        let chord = Chord {
            root: (root + key) % 12,
            quality,
        };
        let start = bar * 4 * ppq;
        for (k, pc) in chord.pitch_classes().enumerate() {
            piano.push(note(48 + pc, start, start + 4 * ppq));
            melody.push(note(
                72 + pc,
                start + k as u64 * ppq,
                start + (k as u64 + 1) * ppq,
            ));
        }
        chords.extend([Some(chord); 4]);
    }
    let grid = Grid::quarters(480, bars * 4 * ppq, 4);
    let rolls = MultiRoll::from_tracks(
        [(Role::Melody, &melody[..]), (Role::Piano, &piano[..])],
        &grid,
    );
    let phrases = [Segment {
        start_bar: 0,
        bars: bars as usize,
        letter: 'A',
    }];
    let labels = StepLabels::new(&grid, &rolls.melody, &chords, &phrases);
    (grid, rolls, labels)
}

#[test]
fn bce_matches_the_formula_stays_finite_and_weights_sounding_notes() {
    let device = Device::flex();
    let xs = [0.0f32, 2.0, -3.0, 80.0, -80.0];
    let ys = [1.0f32, 0.0, 1.0, 1.0, 0.0];
    let t = |v: [f32; 5]| {
        burn::tensor::Tensor::<3>::from_data(
            burn::tensor::TensorData::new(v.to_vec(), vec![1, 1, 5]),
            &device,
        )
    };
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    for w in [1.0f32, 3.0] {
        let got = bce_per_step(t(xs), t(ys), w).into_scalar_async();
        let got: f32 = block_on(got).unwrap();
        let expected =
            (-(w as f64) * sig(0.0).ln() - (1.0 - sig(2.0)).ln() - (w as f64) * sig(-3.0).ln())
                / 5.0;
        assert!(
            (got as f64 - expected).abs() < 1e-5,
            "w {w}: {got} {expected}"
        );
    }
}

#[test]
fn schedule_warms_up_then_decays() {
    let s = Schedule {
        peak_lr: 1e-3,
        warmup: 10,
        total: 110,
        final_ratio: 0.1,
    };
    assert!((s.lr(0) - 1e-4).abs() < 1e-12);
    assert!((s.lr(9) - 1e-3).abs() < 1e-12);
    assert!((s.lr(60) - 0.55e-3).abs() < 1e-9);
    assert!((s.lr(110) - 1e-4).abs() < 1e-12);
    assert!(s.lr(500) >= 1e-4 - 1e-12);
}

/// 40 steps on two small songs made here lower the loss by a clear margin, for an
/// autoregressive model that reads the lanes and for a structure-aware one in the paper's
/// setting (rolls only).
#[test]
fn a_short_training_run_lowers_the_loss() {
    let device = Device::flex().autodiff();
    let songs = [song(0, 8), song(5, 8)];
    for (pe, conditioning) in [
        (
            PeConfig::new(PeKind::SineSpe).with_gate(true),
            Some(Conditioning::AUTOREGRESSIVE),
        ),
        (
            PeConfig::new(PeKind::Fstripe).with_levels(&[StructureLevel::Chord]),
            None,
        ),
    ] {
        let config =
            PerformerConfig::tiny(Task::Accompaniment, 0, pe.clone()).with_inputs(conditioning);
        let spec = WindowSpec {
            len: 32,
            max_shift: 3,
            ..WindowSpec::for_model(&config, 32)
        };
        let model = Performer::new(&config, 1, &device).unwrap();
        let schedule = Schedule {
            peak_lr: 3e-3,
            warmup: 5,
            total: 40,
            final_ratio: 0.1,
        };
        let mut trainer = Trainer::new(model, schedule, 1.0, 7);
        let mut rng = StdRng::seed_from_u64(3);
        let mut losses = Vec::new();
        for _ in 0..40 {
            let batch: Vec<_> = (0..4)
                .map(|i| {
                    let (_, rolls, labels) = &songs[i % 2];
                    let starts = crop_starts(0..rolls.num_steps(), 32, 16);
                    random_example(rolls, labels, &spec, &starts, &mut rng)
                })
                .collect();
            losses.push(block_on(trainer.train_step(&Batch::Rolls(batch))).unwrap());
        }
        let first: f32 = losses[..5].iter().sum::<f32>() / 5.0;
        let last: f32 = losses[35..].iter().sum::<f32>() / 5.0;
        assert!(
            last < 0.5 * first,
            "{:?}: {first} -> {last}: {losses:?}",
            pe.kind
        );
    }
}

/// `pe_lr_scale` moves the positional encoding's parameters at its multiple of the learning
/// rate and leaves every other parameter's step as it was: Adam's first step is about the
/// learning rate per parameter, so ten times the rate is about ten times the step. The chord
/// level enters as chord identities here, one number per step.
#[test]
fn the_positional_encoding_learns_at_its_own_rate() {
    let device = Device::flex().autodiff();
    let songs = [song(0, 4)];
    let pe = PeConfig::new(PeKind::Fstripe).with_levels(&[StructureLevel::ChordId]);
    let config = PerformerConfig::tiny(Task::Accompaniment, 0, pe);
    let spec = WindowSpec {
        len: 32,
        max_shift: 0,
        ..WindowSpec::for_model(&config, 32)
    };
    let (_, rolls, labels) = &songs[0];
    let example = random_example(rolls, labels, &spec, &[0], &mut StdRng::seed_from_u64(0));
    assert_eq!(example.coordinates.len(), 32, "one chord id per step");
    let schedule = Schedule {
        peak_lr: 1e-3,
        warmup: 0,
        total: 10,
        final_ratio: 1.0,
    };
    let start = Performer::new(&config, 1, &device).unwrap();
    let moved = |scale: f64| {
        let mut trainer = Trainer::new(start.clone(), schedule.clone(), 1.0, 7);
        trainer.pe_lr_scale = scale;
        block_on(trainer.train_step(&Batch::Rolls(vec![example.clone()]))).unwrap();
        let delta = |a: burn::tensor::Tensor<2>, b: burn::tensor::Tensor<2>| -> f32 {
            block_on((a - b).abs().mean().into_scalar_async()).unwrap()
        };
        let f = |m: &Performer| match &m.pe.kernel {
            Some(Kernel::Fstripe(f)) => f.freqs.val().flatten::<2>(0, 2),
            other => panic!("an F-StrIPE kernel, not {other:?}"),
        };
        (
            delta(f(&trainer.model), f(&start)),
            delta(trainer.model.head.weight.val(), start.head.weight.val()),
        )
    };
    let (pe1, head1) = moved(1.0);
    let (pe10, head10) = moved(10.0);
    assert!(pe1 > 0.0 && head1 > 0.0);
    let ratio = pe10 / pe1;
    assert!((7.0..=10.5).contains(&ratio), "F-StrIPE moved {ratio}x");
    assert!(
        (head10 - head1).abs() <= 1e-6 * head1.max(1e-12) + 1e-9,
        "the head moved {head1} then {head10}"
    );
}

/// A trained model given the reference lane (`Performer::with_more_inputs`) trains on: its
/// loss stays finite step after step and the new inputs' weights, zero at first, move.
#[test]
fn a_model_given_the_reference_lane_trains_on() {
    let device = Device::flex().autodiff();
    let (grid, rolls, labels) = song(0, 8);
    let beats: Vec<_> = (0..grid.num_beats())
        .map(|b| labels.chord[b * grid.steps_per_beat])
        .collect();
    let phrases = [0, 4].map(|start_bar| Segment {
        start_bar,
        bars: 4,
        letter: 'A',
    });
    let labels = StepLabels::new(&grid, &rolls.melody, &beats, &phrases);
    let pe = PeConfig::new(PeKind::SineSpe).with_gate(true);
    let config = PerformerConfig::tiny(Task::Accompaniment, 0, pe)
        .with_inputs(Some(Conditioning::AUTOREGRESSIVE));
    let old = Performer::new(&config, 1, &device).unwrap();
    let wide = old
        .with_more_inputs(&config.clone().with_inputs(Some(Conditioning::REFERENCE)))
        .unwrap();
    let spec = WindowSpec {
        len: 64,
        max_shift: 0,
        ..WindowSpec::for_model(&wide.config, 64)
    };
    let trained_on = config.input_dim;
    let rows = |m: &Performer| -> f32 {
        let w = m.input.as_ref().unwrap().weight.val();
        let [n, _] = w.dims();
        let added = w.narrow(0, trained_on, n - trained_on);
        block_on(added.abs().sum().into_scalar_async()).unwrap()
    };
    assert_eq!(rows(&wide), 0.0);
    let schedule = Schedule {
        peak_lr: 3e-3,
        warmup: 2,
        total: 10,
        final_ratio: 0.1,
    };
    let mut trainer = Trainer::new(wide, schedule, 1.0, 7);
    let starts = crop_starts(64..rolls.num_steps(), 64, 16);
    let mut rng = StdRng::seed_from_u64(3);
    for _ in 0..10 {
        let batch = (0..2)
            .map(|_| random_example(&rolls, &labels, &spec, &starts, &mut rng))
            .collect();
        let loss = block_on(trainer.train_step(&Batch::Rolls(batch))).unwrap();
        assert!(loss.is_finite());
    }
    assert!(
        rows(&trainer.model) > 0.0,
        "the reference lane's weights learn"
    );
}
