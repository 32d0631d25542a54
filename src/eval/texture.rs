//! The texture panel (issue 69): whether an accompaniment shows the song's form. Every song is
//! accompanied with its annotated lanes without and with the texture echo
//! ([`crate::generate::texture`]), and with the phrases the detector finds in its melody alone
//! (what a file without labels gets: the default path), and each is scored by ILS
//! ([`crate::music::texture::ils`]) against the *annotated* phrases, beside the pianist's, with
//! its chord tones and density. The echo's lean is counted in the training songs' pianists
//! ([`training_counts`]), never on the songs scored.

use burn::tensor::Device;
use serde::Serialize;

use super::harmony::{HarmonySong, song_of};
use super::target_roll;
use crate::data::corpus::{Corpus, Piece, WindowSpec};
use crate::data::example;
use crate::generate::texture::{Answers, TextureEcho};
use crate::generate::{
    BatchProgress, GenerateError, Given, PianoSampling, Reports, accompany_batch,
};
use crate::model::performer::Performer;
use crate::music::labels::{PhraseLabel, StepLabels, detect_structure, first_occurrence};
use crate::music::playing::{chord_tone_ratio, onsets_per_beat};
use crate::music::roll::PianoRoll;
use crate::music::texture::echo::{EchoCounts, EchoLean, Pasted, bars, pasted};
use crate::music::texture::{Ils, ils};

/// The echo counts of the pianists of `train`'s songs that have an accompaniment, over their
/// annotated spans.
pub fn training_counts(train: &Corpus) -> EchoCounts {
    let mut counts = EchoCounts::default();
    for p in train.pieces.iter().filter(|p| p.has_accompaniment()) {
        let labels = p.sheet.labels.slice(p.range.clone());
        let roll = steps_of(&p.sheet.rolls.piano, p.range.clone());
        counts.add(&roll, &labels);
    }
    counts
}

/// The pianists of `corpus`'s songs that have an accompaniment, over their annotated spans (as
/// [`training_counts`] reads them): the ILS of each song where a letter returns, and their
/// pasted bars together. What a split's pianists are measured against.
pub fn pianists(corpus: &Corpus) -> (Vec<f64>, Pasted) {
    let mut all = Pasted::default();
    let ratios = corpus
        .pieces
        .iter()
        .filter(|p| p.has_accompaniment())
        .filter_map(|p| {
            let labels = p.sheet.labels.slice(p.range.clone());
            let roll = steps_of(&p.sheet.rolls.piano, p.range.clone());
            all.add(&pasted(&roll, &labels));
            ils(&roll, &labels).map(|i| i.ratio())
        })
        .collect();
    (ratios, all)
}

/// How typical a split's mean `target` is of songs like `pool`'s: the share of `draws` draws of
/// `n` songs from `pool` (with replacement, seeded) whose mean reaches `target` (`>=` when
/// `target` is above the pool's mean, else `<=`). `None` without songs.
pub fn share_of_draws_reaching(
    pool: &[f64],
    n: usize,
    target: f64,
    draws: usize,
    seed: u64,
) -> Option<f64> {
    use rand::{RngExt, SeedableRng};
    if pool.is_empty() || n == 0 || draws == 0 {
        return None;
    }
    let mean = pool.iter().sum::<f64>() / pool.len() as f64;
    let above = target >= mean;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let reached = (0..draws)
        .filter(|_| {
            let m = (0..n)
                .map(|_| pool[rng.random_range(0..pool.len())])
                .sum::<f64>()
                / n as f64;
            if above { m >= target } else { m <= target }
        })
        .count();
    Some(reached as f64 / draws as f64)
}

/// Steps `range` of `roll`.
pub fn steps_of(roll: &PianoRoll, range: std::ops::Range<usize>) -> PianoRoll {
    let mut out = PianoRoll::new(range.len());
    for (i, t) in range.enumerate() {
        for p in 0..crate::music::roll::PITCHES {
            let (on, sus) = (roll.onset(t, p), roll.sustain(t, p));
            if on || sus {
                out.set(i, p, on, sus, roll.velocity(t, p));
            }
        }
    }
    out
}

/// One way of accompanying a song, scored.
#[derive(Clone, Debug, Serialize)]
pub struct Played {
    /// ILS against the annotated phrases.
    pub ils: Option<Ils>,
    pub chord_tones: Option<f64>,
    /// Onsets a beat over the pianist's.
    pub density: Option<f64>,
    /// Repeated bars that return their answered bar's rhythm exactly, against the annotated
    /// phrases.
    pub pasted: Pasted,
}

/// How far a detected phrase lane agrees with the annotated one, bar by bar: phrase
/// boundaries (a bar that starts a phrase in both) and same-letter pairs (two bars of two
/// different melodic phrases with one letter: what the echo joins), each as precision and
/// recall of the detected against the annotated.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Agreement {
    pub boundary_precision: Option<f64>,
    pub boundary_recall: Option<f64>,
    pub pair_precision: Option<f64>,
    pub pair_recall: Option<f64>,
    /// The bars that answer an earlier bar (the same bar of the first phrase with their
    /// letter, [`first_occurrence`]: the very link the echo and the reference lane follow):
    /// of the detected links, the share the annotations make too, and of the annotated ones,
    /// the share detected. A lane that splits an 8-bar `A8A8` into `A4B4A4B4` joins the same
    /// bars (answers precision and recall 1) though it has half the same-letter pairs.
    pub answer_precision: Option<f64>,
    pub answer_recall: Option<f64>,
}

/// The agreement of `detected` with `annotated` (one label per step of the same steps).
pub fn agreement(annotated: &StepLabels, detected: &StepLabels) -> Agreement {
    let lane =
        |l: &StepLabels| -> Vec<Option<PhraseLabel>> { bars(l).into_iter().map(|b| b.2).collect() };
    bar_agreement(&lane(annotated), &lane(detected))
}

/// [`agreement`] of two phrase lanes given bar by bar (one label per bar of the same bars).
pub fn bar_agreement(a: &[Option<PhraseLabel>], d: &[Option<PhraseLabel>]) -> Agreement {
    let n = a.len().min(d.len());
    let starts = |l: &[Option<PhraseLabel>], k: usize| {
        k > 0 && matches!((l[k - 1], l[k]), (Some(x), Some(y)) if x.index != y.index)
    };
    let ratio = |hit: usize, of: usize| (of > 0).then(|| hit as f64 / of as f64);
    let (mut both, mut in_a, mut in_d) = (0, 0, 0);
    for k in 0..n {
        let (x, y) = (starts(a, k), starts(d, k));
        both += (x && y) as usize;
        in_a += x as usize;
        in_d += y as usize;
    }
    let melodic = |p: Option<PhraseLabel>| p.filter(|p| p.letter.is_ascii_uppercase());
    let same = |l: &[Option<PhraseLabel>], i: usize, j: usize| matches!((melodic(l[i]), melodic(l[j])), (Some(x), Some(y)) if x.index != y.index && x.letter == y.letter);
    let (mut pairs_both, mut pairs_a, mut pairs_d) = (0, 0, 0);
    for i in 0..n {
        for j in i + 1..n {
            let (x, y) = (same(a, i, j), same(d, i, j));
            pairs_both += (x && y) as usize;
            pairs_a += x as usize;
            pairs_d += y as usize;
        }
    }
    let (mut links_both, mut links_a, mut links_d) = (0, 0, 0);
    for k in 0..n {
        let (x, y) = (first_occurrence(&a[..n], k), first_occurrence(&d[..n], k));
        links_both += (x.is_some() && x == y) as usize;
        links_a += x.is_some() as usize;
        links_d += y.is_some() as usize;
    }
    Agreement {
        boundary_precision: ratio(both, in_d),
        boundary_recall: ratio(both, in_a),
        pair_precision: ratio(pairs_both, pairs_d),
        pair_recall: ratio(pairs_both, pairs_a),
        answer_precision: ratio(links_both, links_d),
        answer_recall: ratio(links_both, links_a),
    }
}

/// A song's texture figures.
#[derive(Clone, Debug, Serialize)]
pub struct TextureSong {
    pub name: String,
    /// The detector's phrases against the annotated ones: from the melody alone (what a
    /// dropped melody-only file gets) and from the whole arrangement.
    pub detector_melody: Agreement,
    pub detector_full: Agreement,
    pub pianist: Played,
    /// The annotated lanes, each echo strength tried (0: no echo).
    pub annotated: Vec<(f32, Played)>,
    /// The detected phrases (annotated chords), the echo at the model's strength.
    pub detected: Played,
}

/// Accompanies steps `piece.range` under `lanes` (one label per step of the range), the echo
/// at `strength` times `lean` over their repeats.
pub async fn accompany_with_echo(
    model: &Performer,
    piece: &Piece,
    lanes: &StepLabels,
    sampling: PianoSampling,
    lean: EchoLean,
    strength: f32,
    device: &Device,
) -> Result<PianoRoll, GenerateError> {
    let answers = Answers::repeats(lanes);
    let echo = Some((lean, strength));
    accompany_answering(
        model,
        piece,
        lanes,
        answers.as_ref(),
        echo,
        sampling,
        device,
    )
    .await
}

/// Accompanies steps `piece.range` under `lanes` (one label per step of the range), each step
/// answering what `answers` says (the model's reference lane reads it), the echo `echo`
/// (lean, strength) leaning towards it.
pub async fn accompany_answering(
    model: &Performer,
    piece: &Piece,
    lanes: &StepLabels,
    answers: Option<&Answers>,
    echo: Option<(EchoLean, f32)>,
    sampling: PianoSampling,
    device: &Device,
) -> Result<PianoRoll, GenerateError> {
    let range = piece.range.clone();
    let spec = WindowSpec::for_model(&model.config, range.len());
    let mut full = piece.sheet.labels.clone();
    for (i, t) in range.clone().enumerate() {
        full.chord[t] = lanes.chord[i];
        full.phrase[t] = lanes.phrase[i];
    }
    let e = example(&piece.sheet.rolls, &full, &spec, range.start, 0);
    let texture = echo
        .zip(answers.cloned())
        .and_then(|((lean, strength), a)| TextureEcho::new(lean, strength, a));
    let given = Given {
        roll: None,
        region: 0..e.len,
        texture: texture.as_ref(),
        reference: answers,
    };
    let quiet = |_: BatchProgress<'_>| async { true };
    let mut rolls = accompany_batch(
        model,
        &e,
        given,
        &[sampling],
        Reports::at_end(),
        device,
        quiet,
    )
    .await?;
    Ok(rolls.pop().expect("one roll"))
}

/// The panel's figures for one song.
pub async fn texture_song(
    model: &Performer,
    piece: &Piece,
    sampling: PianoSampling,
    lean: EchoLean,
    strengths: &[f32],
    detected_strength: f32,
    device: &Device,
) -> Result<TextureSong, GenerateError> {
    let range = piece.range.clone();
    let annotated = piece.sheet.labels.slice(range.clone());
    let spb = annotated.steps_per_beat.max(1);
    let chords = annotated.beat_chords();
    let real = target_roll(&example(
        &piece.sheet.rolls,
        &piece.sheet.labels,
        &WindowSpec::for_model(&model.config, range.len()),
        range.start,
        0,
    ));
    let real_density = onsets_per_beat(&real, 0..real.num_steps, spb);
    let score = |roll: &PianoRoll| Played {
        ils: ils(roll, &annotated),
        chord_tones: chord_tone_ratio(roll, &chords, spb),
        density: (real_density > 0.0)
            .then(|| onsets_per_beat(roll, 0..roll.num_steps, spb) / real_density),
        pasted: pasted(roll, &annotated),
    };
    let mut tried = Vec::new();
    for &s in strengths {
        let roll = accompany_with_echo(model, piece, &annotated, sampling, lean, s, device).await?;
        tried.push((s, score(&roll)));
    }
    let detected = HarmonySong::new(piece).detected_labels.slice(range.clone());
    let roll = accompany_with_echo(
        model,
        piece,
        &detected,
        sampling,
        lean,
        detected_strength,
        device,
    )
    .await?;
    let grid = &piece.sheet.grid;
    let full = detect_structure(&song_of(piece, true), grid);
    let full = StepLabels::new(
        grid,
        &piece.sheet.rolls.melody,
        &piece.sheet.labels.beat_chords(),
        &full.phrases,
    )
    .slice(range);
    Ok(TextureSong {
        name: piece.name.clone(),
        detector_melody: agreement(&annotated, &detected),
        detector_full: agreement(&annotated, &full),
        pianist: score(&real),
        annotated: tried,
        detected: score(&roll),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Labels of phrases `letters`, each `bars` bars of 4 steps.
    fn lane(letters: &str, bars: u16) -> StepLabels {
        let mut l = StepLabels {
            steps_per_beat: 1,
            melody: Vec::new(),
            chord: Vec::new(),
            phrase: Vec::new(),
            bar: Vec::new(),
            position: Vec::new(),
        };
        for (index, letter) in letters.chars().enumerate() {
            for b in 0..bars {
                for i in 0..4 {
                    l.melody.push(0);
                    l.chord.push(None);
                    let (index, bar) = (index as u16, b);
                    l.phrase.push(Some(PhraseLabel {
                        letter,
                        index,
                        bar,
                        bars,
                    }));
                    l.bar.push((index * bars + b) as u32);
                    l.position.push(i);
                }
            }
        }
        l
    }

    #[test]
    fn a_split_is_typical_where_draws_of_the_pool_reach_its_mean() {
        let pool: Vec<f64> = (0..100).map(|i| 1.0 + f64::from(i) / 1000.0).collect();
        // The pool's mean (1.0495) is reached by about half the draws either way.
        let half = share_of_draws_reaching(&pool, 20, 1.0495, 2000, 0).unwrap();
        assert!((0.4..0.6).contains(&half), "{half}");
        // Far above or far below the pool's every song: no draw goes as far.
        assert_eq!(share_of_draws_reaching(&pool, 20, 1.2, 500, 0), Some(0.0));
        assert_eq!(share_of_draws_reaching(&pool, 20, 0.9, 500, 0), Some(0.0));
        // Below the mean, the share of draws as low.
        let low = share_of_draws_reaching(&pool, 20, 1.04, 2000, 0).unwrap();
        assert!((0.05..0.45).contains(&low), "{low}");
        // A mean a little above is rarer with more songs drawn.
        let few = share_of_draws_reaching(&pool, 5, 1.065, 4000, 1).unwrap();
        let many = share_of_draws_reaching(&pool, 80, 1.065, 4000, 1).unwrap();
        assert!(many < few, "{many} against {few}");
        assert_eq!(share_of_draws_reaching(&[], 5, 1.0, 10, 0), None);
    }

    #[test]
    fn the_detector_is_scored_on_boundaries_and_same_letter_pairs() {
        let human = lane("AABA", 2);
        let same = agreement(&human, &human);
        assert_eq!(same.boundary_precision, Some(1.0));
        assert_eq!(same.pair_recall, Some(1.0));
        // Twice as many phrases, each a letter of its own: every boundary found (and as many
        // more), no pair the echo would join.
        let split = agreement(&human, &lane("ABCDEFGH", 1));
        assert_eq!(split.boundary_recall, Some(1.0));
        assert!((split.boundary_precision.unwrap() - 3.0 / 7.0).abs() < 1e-9);
        assert_eq!(split.pair_precision, None, "no pair detected");
        assert_eq!(split.pair_recall, Some(0.0));
        assert_eq!(split.answer_recall, Some(0.0));
        // Each phrase split in two, the halves' letters repeating as the phrases do: half
        // the same-letter pairs, every answer.
        let halves = agreement(&human, &lane("ABABCDAB", 1));
        assert_eq!(halves.answer_recall, Some(1.0));
        assert_eq!(halves.answer_precision, Some(1.0));
        assert!(halves.pair_recall.unwrap() < 0.6);
        // One phrase over everything: no boundary, no pair.
        let one = agreement(&human, &lane("A", 8));
        assert_eq!(
            (one.boundary_recall, one.pair_recall),
            (Some(0.0), Some(0.0))
        );
    }
}
