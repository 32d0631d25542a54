//! The papers' objective metrics, in beats, on piano rolls and notes. They are how models get
//! compared (`reports/`), so each is pinned by small hand-computed tests.
//!
//! F-StrIPE (Agarwal, Wang, Richard, ICASSP 2025, section IV-C) compares a predicted
//! accompaniment with the target one, in percent:
//! - **CS**, chroma similarity (higher is better): onsets per pitch class in every
//!   half-measure (2 beats), the mean cosine similarity of prediction and target vectors.
//! - **SSMD**, self-similarity matrix distance (lower is better): the matrix of cosine
//!   similarities between all half-measure chroma vectors of a piece, the mean absolute
//!   difference between the target's and the prediction's matrices (diagonal included).
//! - **GS**, grooving-pattern similarity (higher is better): 1 for every quarter note holding an
//!   onset, 0 otherwise; the share of quarter notes where prediction and target agree.
//! - **NDD**, note density distance (lower is better): sounding pitches in every sixteenth;
//!   the mean share of the target's pitches missing from the prediction. Choices the paper
//!   leaves open, made here: the shortfall is one-sided (`max(target − predicted, 0) / target`),
//!   averaged per sixteenth, and sixteenths where the target is silent count as 0.
//!
//! A zero vector has cosine similarity 0 with anything, itself included (as `torch`'s
//! `CosineSimilarity` with its epsilon, which the reference code uses). Onsets are the rolls'
//! own onset planes, so a re-struck note counts twice.
//!
//! The SPE paper (Liutkus et al., ICML 2021, appendix C.2, after Cífka et al.) compares the
//! style of two pieces by the cosine similarity of flattened 2-D histograms ("style profiles"):
//! - **onset–duration**: (onset position in the bar mod 4 beats, duration) in [0, 4) × [0, 2]
//!   beats, 24 × 12 bins of 1/6 beat; longer notes are left out.
//! - **time–pitch**: for every ordered pair of different notes a, b with
//!   0 ≤ start(b) − start(a) < 4 beats and |pitch(b) − pitch(a)| ≤ 20, (time lag, interval) in
//!   24 × 41 bins.

use super::roll::{PITCHES, PianoRoll};

/// Beats per half-measure (the papers' data are in 4/4).
pub const HALF_MEASURE_BEATS: usize = 2;

/// Cosine similarity, 0 when either vector is zero.
pub fn cosine(u: &[f64], v: &[f64]) -> f64 {
    let dot: f64 = u.iter().zip(v).map(|(a, b)| a * b).sum();
    let nu = u.iter().map(|a| a * a).sum::<f64>().sqrt();
    let nv = v.iter().map(|a| a * a).sum::<f64>().sqrt();
    if nu == 0.0 || nv == 0.0 {
        0.0
    } else {
        dot / (nu * nv)
    }
}

/// Onsets per pitch class in each span of `beats` beats (the last span may be short).
pub fn chroma(roll: &PianoRoll, steps_per_beat: usize, beats: usize) -> Vec<[f64; 12]> {
    let span = (steps_per_beat * beats).max(1);
    (0..roll.num_steps.div_ceil(span))
        .map(|h| {
            let mut c = [0.0; 12];
            for s in h * span..((h + 1) * span).min(roll.num_steps) {
                for p in 0..PITCHES {
                    if roll.onset(s, p) {
                        c[p % 12] += 1.0;
                    }
                }
            }
            c
        })
        .collect()
}

/// F-StrIPE's four scores for one piece, in percent.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AccompanimentScores {
    pub cs: f64,
    pub ssmd: f64,
    pub gs: f64,
    pub ndd: f64,
}

/// CS: mean cosine similarity of half-measure chroma vectors.
pub fn chroma_similarity(predicted: &[[f64; 12]], target: &[[f64; 12]]) -> f64 {
    let n = predicted.len().min(target.len());
    if n == 0 {
        return 0.0;
    }
    100.0
        * (0..n)
            .map(|h| cosine(&predicted[h], &target[h]))
            .sum::<f64>()
        / n as f64
}

fn self_similarity(chroma: &[[f64; 12]]) -> Vec<f64> {
    chroma
        .iter()
        .flat_map(|a| chroma.iter().map(move |b| cosine(a, b)))
        .collect()
}

/// SSMD: mean absolute difference of the self-similarity matrices.
pub fn ssm_distance(predicted: &[[f64; 12]], target: &[[f64; 12]]) -> f64 {
    let n = predicted.len().min(target.len());
    if n == 0 {
        return 0.0;
    }
    let p = self_similarity(&predicted[..n]);
    let t = self_similarity(&target[..n]);
    100.0 * p.iter().zip(&t).map(|(a, b)| (a - b).abs()).sum::<f64>() / (n * n) as f64
}

/// Whether each beat holds an onset.
pub fn grooving_pattern(roll: &PianoRoll, steps_per_beat: usize) -> Vec<bool> {
    let spb = steps_per_beat.max(1);
    (0..roll.num_steps.div_ceil(spb))
        .map(|q| {
            (q * spb..((q + 1) * spb).min(roll.num_steps))
                .any(|s| (0..PITCHES).any(|p| roll.onset(s, p)))
        })
        .collect()
}

/// GS: share of beats whose grooving patterns agree.
pub fn groove_similarity(predicted: &[bool], target: &[bool]) -> f64 {
    let n = predicted.len().min(target.len());
    if n == 0 {
        return 0.0;
    }
    100.0 * (0..n).filter(|&q| predicted[q] == target[q]).count() as f64 / n as f64
}

/// Sounding pitches in each sixteenth note (the union over the steps inside it when the grid
/// is finer than sixteenths; the step's own count when it is coarser).
pub fn note_density(roll: &PianoRoll, steps_per_beat: usize) -> Vec<usize> {
    let per = (steps_per_beat / 4).max(1);
    (0..roll.num_steps.div_ceil(per))
        .map(|k| {
            (0..PITCHES)
                .filter(|&p| {
                    (k * per..((k + 1) * per).min(roll.num_steps)).any(|s| roll.sustain(s, p))
                })
                .count()
        })
        .collect()
}

/// NDD: mean share of the target's sounding pitches missing from the prediction.
pub fn note_density_distance(predicted: &[usize], target: &[usize]) -> f64 {
    let n = predicted.len().min(target.len());
    if n == 0 {
        return 0.0;
    }
    let missing: f64 = (0..n)
        .filter(|&s| target[s] > 0)
        .map(|s| target[s].saturating_sub(predicted[s]) as f64 / target[s] as f64)
        .sum();
    100.0 * missing / n as f64
}

/// All four F-StrIPE scores of a predicted accompaniment against the target, both on the same
/// grid of `steps_per_beat` steps per beat.
pub fn accompaniment_scores(
    predicted: &PianoRoll,
    target: &PianoRoll,
    steps_per_beat: usize,
) -> AccompanimentScores {
    let (cp, ct) = (
        chroma(predicted, steps_per_beat, HALF_MEASURE_BEATS),
        chroma(target, steps_per_beat, HALF_MEASURE_BEATS),
    );
    AccompanimentScores {
        cs: chroma_similarity(&cp, &ct),
        ssmd: ssm_distance(&cp, &ct),
        gs: groove_similarity(
            &grooving_pattern(predicted, steps_per_beat),
            &grooving_pattern(target, steps_per_beat),
        ),
        ndd: note_density_distance(
            &note_density(predicted, steps_per_beat),
            &note_density(target, steps_per_beat),
        ),
    }
}

/// Mean and (population) standard deviation.
pub fn mean_std(values: &[f64]) -> (f64, f64) {
    if values.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// A note in beats, for the style profiles: onset, length, pitch, and the onset's position in
/// its bar (in beats).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BeatNote {
    pub start: f64,
    pub duration: f64,
    pub pitch: u8,
    pub position_in_bar: f64,
}

/// `notes` in beats of `grid`, with their positions in their bars.
pub fn beat_notes(notes: &[super::midi::Note], grid: &super::grid::Grid) -> Vec<BeatNote> {
    notes
        .iter()
        .map(|n| {
            let start = grid.beat_at(n.start);
            let (bar, _) = grid.bar_of_beat(start as usize);
            let bar_start = grid.bar_starts.get(bar).copied().unwrap_or(0) as f64;
            BeatNote {
                start,
                duration: grid.beat_at(n.end) - start,
                pitch: n.pitch,
                position_in_bar: start - bar_start,
            }
        })
        .collect()
}

const PROFILE_BIN: f64 = 1.0 / 6.0;
const OD_ONSET_BINS: usize = 24;
const OD_DURATION_BINS: usize = 12;
const TP_TIME_BINS: usize = 24;
const TP_MAX_INTERVAL: i32 = 20;

/// Bin of `x` among `bins` bins of 1/6 beat from 0; `x` equal to the upper edge goes in the
/// last bin (as numpy's histograms do).
fn bin_of(x: f64, bins: usize) -> Option<usize> {
    let upper = bins as f64 * PROFILE_BIN;
    if !(0.0..=upper + 1e-9).contains(&x) {
        return None;
    }
    Some(((x / PROFILE_BIN + 1e-9).floor() as usize).min(bins - 1))
}

/// The onset–duration style profile (24 × 12 bins, flattened).
pub fn onset_duration_profile(notes: &[BeatNote]) -> Vec<f64> {
    let mut h = vec![0.0; OD_ONSET_BINS * OD_DURATION_BINS];
    for n in notes {
        let onset = n.position_in_bar.rem_euclid(4.0);
        if let (Some(o), Some(d)) = (
            bin_of(onset, OD_ONSET_BINS),
            bin_of(n.duration, OD_DURATION_BINS),
        ) {
            h[o * OD_DURATION_BINS + d] += 1.0;
        }
    }
    h
}

/// The time–pitch style profile (24 × 41 bins, flattened). Quadratic in the notes within 4
/// beats of each other, which is what a piece holds.
pub fn time_pitch_profile(notes: &[BeatNote]) -> Vec<f64> {
    let width = (2 * TP_MAX_INTERVAL + 1) as usize;
    let mut h = vec![0.0; TP_TIME_BINS * width];
    let mut sorted: Vec<&BeatNote> = notes.iter().collect();
    sorted.sort_by(|a, b| a.start.total_cmp(&b.start));
    let max_lag = TP_TIME_BINS as f64 * PROFILE_BIN;
    for (i, a) in sorted.iter().enumerate() {
        // Notes starting with a (before it in this order) pair with it in both directions.
        let mut j = i;
        while j > 0 && sorted[j - 1].start == a.start {
            j -= 1;
        }
        for (k, b) in sorted.iter().enumerate().skip(j) {
            let lag = b.start - a.start;
            if lag >= max_lag - 1e-9 {
                break;
            }
            if k == i {
                continue;
            }
            let interval = b.pitch as i32 - a.pitch as i32;
            if interval.abs() > TP_MAX_INTERVAL {
                continue;
            }
            if let Some(t) = bin_of(lag, TP_TIME_BINS) {
                h[t * width + (interval + TP_MAX_INTERVAL) as usize] += 1.0;
            }
        }
    }
    h
}

/// Style similarity of two pieces: (onset–duration, time–pitch) cosine similarities, `None`
/// where a profile is empty.
pub fn style_similarity(a: &[BeatNote], b: &[BeatNote]) -> (Option<f64>, Option<f64>) {
    let sim = |pa: Vec<f64>, pb: Vec<f64>| {
        let empty = |p: &[f64]| p.iter().all(|&x| x == 0.0);
        (!empty(&pa) && !empty(&pb)).then(|| cosine(&pa, &pb))
    };
    (
        sim(onset_duration_profile(a), onset_duration_profile(b)),
        sim(time_pitch_profile(a), time_pitch_profile(b)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A roll of `beats` beats at 4 steps a beat with notes (step, pitch, length in steps).
    fn roll(beats: usize, notes: &[(usize, usize, usize)]) -> PianoRoll {
        let mut r = PianoRoll::new(beats * 4);
        for &(s, p, len) in notes {
            r.set(s, p, true, true, 80);
            for k in 1..len {
                r.set(s + k, p, false, true, 0);
            }
        }
        r
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn chroma_similarity_by_hand() {
        // Half-measures of 2 beats = 8 steps. Target: C in the first; prediction: C (an octave
        // up) in the first and G in the second.
        let target = roll(4, &[(0, 60, 1)]);
        let predicted = roll(4, &[(2, 72, 1), (8, 67, 1)]);
        let (cp, ct) = (chroma(&predicted, 4, 2), chroma(&target, 4, 2));
        assert_eq!(ct[0][0], 1.0);
        assert_eq!(cp[1][7], 1.0);
        assert!(close(chroma_similarity(&cp, &ct), 50.0));
        // Counts, not presence: C,C,E against C,E is cos = (2+1)/(sqrt5 sqrt2).
        let a = roll(2, &[(0, 60, 1), (1, 60, 1), (2, 64, 1)]);
        let b = roll(2, &[(0, 60, 1), (2, 64, 1)]);
        let cs = chroma_similarity(&chroma(&a, 4, 2), &chroma(&b, 4, 2));
        assert!(close(cs, 100.0 * 3.0 / (5f64.sqrt() * 2f64.sqrt())));
    }

    #[test]
    fn ssm_distance_by_hand() {
        // Target C | C: every pair similar (all ones). Prediction C | G: identity.
        let target = roll(4, &[(0, 60, 1), (8, 60, 1)]);
        let predicted = roll(4, &[(0, 60, 1), (8, 67, 1)]);
        let d = ssm_distance(&chroma(&predicted, 4, 2), &chroma(&target, 4, 2));
        assert!(close(d, 50.0));
        // An empty prediction: its matrix is all zeros, so SSMD is the mean of the target's.
        let empty = PianoRoll::new(16);
        assert!(close(
            ssm_distance(&chroma(&empty, 4, 2), &chroma(&target, 4, 2)),
            100.0
        ));
    }

    #[test]
    fn groove_similarity_by_hand() {
        // Onsets: target in beats 0 and 2, prediction in beats 0 and 1 (of 4): 0 and 3 agree.
        let target = roll(4, &[(0, 60, 1), (9, 64, 1)]);
        let predicted = roll(4, &[(3, 60, 1), (4, 62, 8)]);
        let (gp, gt) = (
            grooving_pattern(&predicted, 4),
            grooving_pattern(&target, 4),
        );
        assert_eq!(gt, vec![true, false, true, false]);
        assert_eq!(
            gp,
            vec![true, true, false, false],
            "sustain is not an onset"
        );
        assert!(close(groove_similarity(&gp, &gt), 50.0));
    }

    #[test]
    fn note_density_distance_by_hand() {
        // Sixteenths: target sounds 2, 1, 0, 0 pitches; prediction 1, 1, 1, 0.
        let target = roll(1, &[(0, 60, 1), (0, 64, 2)]);
        let predicted = roll(1, &[(0, 60, 3)]);
        let (dp, dt) = (note_density(&predicted, 4), note_density(&target, 4));
        assert_eq!(dt, vec![2, 1, 0, 0]);
        assert_eq!(dp, vec![1, 1, 1, 0]);
        // Missing shares 1/2, 0, 0, 0 (the extra predicted note costs nothing).
        assert!(close(note_density_distance(&dp, &dt), 12.5));
        // At 8 steps a beat a sixteenth is two steps, counted as a union.
        let fine = roll(1, &[(0, 60, 1), (1, 60, 1)]);
        assert_eq!(note_density(&fine, 8)[0], 1);
    }

    #[test]
    fn perfect_and_empty_predictions() {
        let mut notes = vec![(0, 60, 4), (4, 64, 4), (8, 67, 2), (16, 60, 8), (20, 72, 1)];
        let target = roll(8, &notes);
        // The last half-measure is silent in both: a zero chroma vector scores 0 even against
        // itself, so even a perfect prediction has CS 75 here.
        let perfect = accompaniment_scores(&target, &target, 4);
        assert!(close(perfect.cs, 75.0) && close(perfect.gs, 100.0));
        assert!(close(perfect.ssmd, 0.0) && close(perfect.ndd, 0.0));
        notes.push((24, 60, 1));
        let target = roll(8, &notes);
        assert!(close(accompaniment_scores(&target, &target, 4).cs, 100.0));
        let empty = accompaniment_scores(&PianoRoll::new(32), &target, 4);
        assert!(close(empty.cs, 0.0));
        // Onsets in beats 0, 1, 2, 4, 5, 6 of 8: the 2 silent beats agree.
        assert!(close(empty.gs, 100.0 * 2.0 / 8.0));
        // Sounding in 19 of 32 sixteenths: all missing there.
        assert!(close(empty.ndd, 100.0 * 19.0 / 32.0));
    }

    fn bn(start: f64, duration: f64, pitch: u8) -> BeatNote {
        BeatNote {
            start,
            duration,
            pitch,
            position_in_bar: start % 4.0,
        }
    }

    #[test]
    fn onset_duration_profile_by_hand() {
        let a = [
            bn(0.0, 1.0, 60),
            bn(1.0 / 12.0, 1.05, 62),
            bn(4.0, 2.0, 64),
            bn(1.0, 2.5, 65),
        ];
        let p = onset_duration_profile(&a);
        // Onset bin 0 and duration bin 6 for the first two; the third is at position 0 of its
        // bar with a duration of exactly 2 beats (the closed last bin, 11); the fourth is too
        // long to count.
        assert_eq!(p[6], 2.0);
        assert_eq!(p[11], 1.0);
        assert_eq!(p.iter().sum::<f64>(), 3.0);
        let (od, _) = style_similarity(&a, &[bn(8.0, 1.0, 40)]);
        assert!(close(od.unwrap(), 2.0 / 5f64.sqrt()));
        assert_eq!(style_similarity(&a, &[bn(0.0, 3.0, 40)]).0, None);
    }

    #[test]
    fn time_pitch_profile_by_hand() {
        // C then E a beat later: one pair (lag 1 beat = bin 6, +4 semitones); the reverse pair
        // has a negative lag and is left out.
        let a = [bn(0.0, 1.0, 60), bn(1.0, 1.0, 64)];
        let p = time_pitch_profile(&a);
        assert_eq!(p.iter().sum::<f64>(), 1.0);
        assert_eq!(p[6 * 41 + 24], 1.0);
        // Transposed, the same profile; simultaneous notes pair both ways at lag 0.
        let (_, tp) = style_similarity(&a, &[bn(8.0, 1.0, 62), bn(9.0, 1.0, 66)]);
        assert!(close(tp.unwrap(), 1.0));
        let chord = time_pitch_profile(&[bn(0.0, 1.0, 60), bn(0.0, 1.0, 67), bn(5.0, 1.0, 99)]);
        assert_eq!((chord[20 + 7], chord[20 - 7]), (1.0, 1.0));
        assert_eq!(
            chord.iter().sum::<f64>(),
            2.0,
            "more than 4 beats apart: no pair"
        );
    }

    #[test]
    fn mean_and_std() {
        let (m, s) = mean_std(&[1.0, 2.0, 3.0, 4.0]);
        assert!(close(m, 2.5) && close(s, 1.25f64.sqrt()));
    }
}
