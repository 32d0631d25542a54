//! How a harmonizer's probabilities become chords, on real songs without a model: the harmonic
//! rhythm counted in the annotations, and the validation choice of decoding fed probabilities
//! that lean towards the annotated chords (as a good model's would).

use pianoformer::data::sources::{self, Parts};
use pianoformer::eval::harmony::{HarmonySong, choose_decode, rhythm_of, score};
use pianoformer::generate::harmonize::Choice;
use pianoformer::music::harmony::{CHORD_CLASSES, chord_class};

#[test]
fn rhythm_and_the_decoding_choice_on_annotated_songs() {
    let Some(root) = super::data_root() else {
        return;
    };
    let parts = Parts {
        train: true,
        valid: true,
        test: false,
    };
    let data = sources::load(&root, parts, Some(8)).unwrap();
    let (rhythm, counted) = rhythm_of(&data.train).expect("training songs have chords");
    assert!(counted > 0);
    // Pop songs change chord mostly on bar lines, then half bars, seldom elsewhere.
    assert!(rhythm.change[0] > rhythm.change[1] && rhythm.change[1] > rhythm.change[2]);
    let songs: Vec<HarmonySong> = data
        .valid
        .pieces
        .iter()
        .filter(|p| p.has_harmony())
        .map(HarmonySong::new)
        .collect();
    assert!(!songs.is_empty());
    // Probabilities that give each annotated chord 0.5 and spread the rest evenly.
    let log_probs: Vec<Vec<f32>> = songs
        .iter()
        .map(|s| {
            let mut lp =
                vec![(0.5f32 / (CHORD_CLASSES - 1) as f32).ln(); s.reference.len() * CHORD_CLASSES];
            for (b, chord) in s.reference.iter().enumerate() {
                lp[b * CHORD_CLASSES + chord_class(*chord)] = 0.5f32.ln();
            }
            lp
        })
        .collect();
    let chosen = choose_decode(&songs, &log_probs, rhythm, Choice::Best);
    assert_eq!(
        chosen.weights.len(),
        pianoformer::eval::harmony::WEIGHTS.len()
    );
    assert_eq!(
        chosen.tones.len(),
        pianoformer::eval::harmony::TONE_WEIGHTS.len()
    );
    // The choice is the best of what was tried, by root + family.
    let key = |s: &pianoformer::eval::harmony::HarmonyScores| (s.accuracy[1], s.accuracy[0]);
    let best = chosen
        .weights
        .iter()
        .chain(&chosen.tones)
        .map(|(_, s)| key(s))
        .fold((0.0, 0.0), |a, b| if b > a { b } else { a });
    let decoded =
        pianoformer::eval::harmony::decode_all(&songs, &log_probs, &chosen.decode, Choice::Best);
    let s = score(&songs, &decoded);
    assert_eq!(key(&s), best);
    // Probabilities that favour the annotations decode to them nearly everywhere.
    assert!(s.accuracy[0] > 0.9, "root {}", s.accuracy[0]);
}
