use super::*;
use crate::music::tokens::Token as T;

/// REMI ids: `Bos`, then bars of notes (position in steps, pitch, duration in steps).
fn ids(bars: &[&[(u8, u8, u8)]]) -> Vec<u32> {
    let mut out = vec![T::Bos.id()];
    out.extend(bars_ids(bars));
    out
}

fn bars_ids(bars: &[&[(u8, u8, u8)]]) -> Vec<u32> {
    let mut out = Vec::new();
    for notes in bars {
        out.push(T::Bar.id());
        let mut last = None;
        for &(pos, pitch, dur) in notes.iter() {
            if last != Some(pos) {
                out.push(T::Position(pos).id());
                last = Some(pos);
            }
            out.extend([
                T::Pitch(pitch).id(),
                T::Velocity(20).id(),
                T::Duration(dur).id(),
            ]);
        }
    }
    out
}

const GROOVE: &[(u8, u8, u8)] = &[
    (0, 48, 8),
    (0, 60, 4),
    (4, 64, 4),
    (8, 55, 8),
    (8, 67, 4),
    (12, 64, 4),
];
const OTHER: &[(u8, u8, u8)] = &[(2, 61, 1), (3, 66, 1), (7, 70, 1), (11, 73, 1)];

#[test]
fn a_prompt_starts_at_the_first_bar_with_a_note() {
    let song = ids(&[&[], &[], GROOVE, GROOVE, GROOVE]);
    let prompt = song_prompt(&song, 2).expect("long enough");
    assert_eq!(prompt, ids(&[GROOVE, GROOVE]));
    assert_eq!(song_prompt(&song, 3), None, "no bar after the prompt");
    assert_eq!(song_prompt(&ids(&[&[], &[]]), 1), None);
}

#[test]
fn the_song_itself_scores_one_in_every_quarter_and_another_style_less() {
    let song = ids(&[GROOVE; 12]);
    let prompt = ids(&[GROOVE; 4]);
    // Eight new bars and the start of a ninth, which is not scored.
    let mut generated = bars_ids(&[GROOVE; 9]);
    generated.truncate(generated.len() - 3);
    let forbidden = vec![0.0; generated.len()];
    let s = score("same", &song, &prompt, &generated, &forbidden).unwrap();
    assert_eq!(s.bars, 8);
    assert_eq!(s.notes, 8 * GROOVE.len());
    for q in 0..QUARTERS {
        assert!((s.onset_duration[q].unwrap() - 1.0).abs() < 1e-9, "{s:?}");
        // Time–pitch pairs across bar lines are fewer in two bars than in the song.
        assert!(s.time_pitch[q].unwrap() > 0.95, "{s:?}");
    }
    assert!((s.key_consistency.unwrap() - 1.0).abs() < 1e-9);
    assert!((s.density_ratio.unwrap() - 1.0).abs() < 1e-9);
    assert_eq!(s.longest_silence_bars, 0.0);
    assert_eq!(s.grammatical_bars, Some(1.0));

    // The style drifts: the last quarter is another groove in another key.
    let drift = bars_ids(&[
        GROOVE,
        GROOVE,
        GROOVE,
        GROOVE,
        GROOVE,
        GROOVE,
        OTHER,
        OTHER,
        &[],
    ]);
    let s = score("drift", &song, &prompt, &drift, &vec![0.0; drift.len()]).unwrap();
    assert!((s.onset_duration[0].unwrap() - 1.0).abs() < 1e-9);
    assert!(s.onset_duration[3].unwrap() < 0.3, "{s:?}");
    assert!(s.time_pitch[3].unwrap() < 0.5, "{s:?}");
    assert!(s.key_consistency.unwrap() < 1.0);
    let summary = SampledSummary::of(&[s]);
    assert!(summary.onset_duration_kept < 0.3 && summary.time_pitch_kept < 0.5);
}

#[test]
fn silences_density_and_forbidden_draws_are_measured() {
    let song = ids(&[GROOVE; 12]);
    let prompt = ids(&[GROOVE; 4]);
    // Two silent bars and a half-empty one (the groove's last note ends at beat 4), then
    // the groove at half density; one draw in the second bar had a fifth of its mass on
    // forbidden tokens.
    let half: &[(u8, u8, u8)] = &[(0, 48, 8), (8, 55, 8), (8, 67, 4)];
    let generated = bars_ids(&[&[], &[], half, half, &[]]);
    let mut forbidden = vec![0.0; generated.len()];
    forbidden[1] = 0.2;
    let s = score("gaps", &song, &prompt, &generated, &forbidden).unwrap();
    assert_eq!(s.bars, 4);
    assert!((s.longest_silence_bars - 2.0).abs() < 1e-9, "{s:?}");
    let expected_density = (6.0 / 16.0) / (24.0 / 16.0);
    assert!(
        (s.density_ratio.unwrap() - expected_density).abs() < 1e-9,
        "{s:?}"
    );
    assert_eq!(
        s.onset_duration[0], None,
        "nothing plays in the first quarter"
    );
    assert!((s.grammatical_bars.unwrap() - (1.0 + 0.8 + 1.0 + 1.0) / 4.0).abs() < 1e-6);
    let mass = 0.2 / generated.len() as f64;
    assert!((s.forbidden_mass.unwrap() - mass).abs() < 1e-6);
    // C and G without the prompt's E: 0.77, just short of a kept key.
    assert!((s.key_consistency.unwrap() - 48.0 / (20f64.sqrt() * 192f64.sqrt())).abs() < 1e-9);
    let summary = SampledSummary::of(&[s.clone(), s]);
    assert_eq!(
        summary.no_long_silence_share, 1.0,
        "2 bars is not longer than 2"
    );
    assert_eq!(summary.key_consistent_share, 0.0);
}

#[test]
fn a_continuation_that_adds_no_whole_bar_scores_nothing() {
    let song = ids(&[GROOVE; 6]);
    let prompt = ids(&[GROOVE; 4]);
    let generated = bars_ids(&[GROOVE]);
    let s = score("short", &song, &prompt, &generated, &[0.0; 64]).unwrap();
    assert_eq!((s.bars, s.notes, s.key_consistency), (0, 0, None));
}

#[test]
fn a_sampled_continuation_is_scored_end_to_end() {
    use crate::model::config::{PerformerConfig, Task};
    use crate::model::pe::{PeConfig, PeKind};
    let device = burn::tensor::Device::default();
    let config = PerformerConfig::tiny(
        Task::Continuation,
        tokens::VOCAB_SIZE,
        PeConfig::new(PeKind::SineSpe),
    );
    let model = Performer::new(&config, 0, &device).unwrap();
    let song = ids(&[GROOVE; 8]);
    let sampling = Sampling {
        seed: 3,
        ..Sampling::default()
    };
    let s = pollster::block_on(sample_song(
        &model,
        "tiny",
        &song,
        &[],
        2,
        200,
        None,
        sampling,
        &device,
    ))
    .unwrap()
    .expect("the song holds the prompt");
    assert_eq!(s.prompt_tokens + s.generated_tokens, 200);
    assert_eq!(s.onset_duration.len(), QUARTERS);
    let too_long = sample_song(&model, "tiny", &song, &[], 8, 200, None, sampling, &device);
    assert!(pollster::block_on(too_long).unwrap().is_none());

    // An untrained model puts some of its mass on tokens the grammar forbids, and the
    // progress says how much at every draw.
    let prompt = song_prompt(&song, 2).unwrap();
    let mut seen = Vec::new();
    let length = Length::tokens(40);
    pollster::block_on(continue_tokens(
        &model,
        &prompt,
        length,
        sampling,
        &[],
        &[],
        None,
        &device,
        |p| {
            if p.token.is_some() {
                seen.push(p.forbidden);
            }
            std::future::ready(true)
        },
    ))
    .unwrap();
    assert_eq!(seen.len(), 40);
    assert!(seen.iter().all(|&p| p > 0.0 && p < 1.0), "{seen:?}");
}
