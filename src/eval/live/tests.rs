//! The live panel on a song made here: a model that reads the melody a step late plays live what
//! it plays offline given the same lanes; open lanes get chords decided live.

use burn::tensor::Device;
use pollster::block_on;

use super::*;
use crate::generate::harmonize::tests::tiny;
use crate::model::config::{Conditioning, Direction, PerformerConfig, Task};
use crate::model::pe::{PeConfig, PeKind};
use crate::music::fixtures::song;
use crate::music::harmony::decode::HarmonyDecode;

fn piece() -> Piece {
    Piece::from_song("fixture".into(), &song(5, 4)).unwrap()
}

#[test]
fn a_take_played_in_time_is_the_offline_piano_for_a_model_that_hears_late() {
    let device = Device::flex();
    let config = PerformerConfig::tiny(Task::Accompaniment, 0, PeConfig::new(PeKind::SineSpe))
        .with_inputs(Some(Conditioning::lagged(1)));
    let m = Performer::new(&config, 2, &device).unwrap();
    let p = piece();
    let span = take_span(&p);
    assert!(span.len() >= 32, "{span:?}");
    let sampling = PianoSampling {
        threshold: Some(0.45),
        seed: 3,
        ..Default::default()
    };
    let (live, chords) = block_on(live_take(
        &m,
        None,
        &p,
        &p.sheet.labels,
        true,
        sampling,
        &device,
    ))
    .unwrap();
    assert_eq!(live.num_steps, span.len());
    // Offline: the panel's window over the same span, each step hearing its own melody.
    assert_eq!(
        span.start, 0,
        "the fixture's annotations start at its first step"
    );
    let offline = block_on(offline_take(&m, &p, &p.sheet.labels, sampling, &device)).unwrap();
    assert_eq!(live, offline);
    assert!(
        (0..live.num_steps).any(|t| (0..PITCHES).any(|q| live.onset(t, q))),
        "it plays"
    );
    assert_eq!(chords, p.sheet.labels.slice(span.clone()).beat_chords());
    let played = score(&p, &live, span);
    assert!(played.density.is_some());
}

#[test]
fn open_lanes_are_filled_live_and_the_take_is_scored() {
    let device = Device::flex();
    let config = PerformerConfig::tiny(Task::Accompaniment, 0, PeConfig::new(PeKind::SineSpe))
        .with_inputs(Some(Conditioning::AUTOREGRESSIVE));
    let m = Performer::new(&config, 2, &device).unwrap();
    let h = Performer::new(
        &tiny(PeConfig::new(PeKind::SineSpe), Direction::Causal),
        1,
        &device,
    )
    .unwrap();
    let decode = HarmonyDecode::default();
    let chords = LiveChords::new(&h, &decode);
    let p = piece();
    let sampling = PianoSampling::default();
    let (live, played) = block_on(live_take(
        &m,
        Some(chords),
        &p,
        &p.sheet.labels,
        false,
        sampling,
        &device,
    ))
    .unwrap();
    let span = take_span(&p);
    assert_eq!(played.len(), span.len() / 4);
    assert!(
        played.iter().any(Option::is_some),
        "chords decided: {played:?}"
    );
    let s = score(&p, &live, span);
    assert!(s.chord_tones.is_none_or(|c| (0.0..=1.0).contains(&c)));
}
