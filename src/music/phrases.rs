//! Phrase segmentation of a song without annotations: bar-level self-similarity (melody and
//! chords), boundary cues (novelty, the start of a repeat, a melodic rest), and a segmentation
//! by dynamic programming with a prior for 4- and 8-bar phrases. Segments that repeat share a
//! letter, as in POP909's human labels (`A4B8A4…`; lower case for bars without melody).

use super::chords::Chord;
use super::grid::Grid;
use super::midi::Note;

/// Melody samples per bar (sixteenths in 4/4; bars of other lengths are sampled as finely).
const SAMPLES_PER_BAR: usize = 16;
/// Longest song segmented by similarity, in bars (a 4-minute song has about 100).
pub const MAX_BARS: usize = 2000;

/// A phrase: `bars` bars from `start_bar`, with its letter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Segment {
    pub start_bar: usize,
    pub bars: usize,
    pub letter: char,
}

/// The label string, e.g. `i4A8B8o2`.
pub fn label_string(segments: &[Segment]) -> String {
    segments
        .iter()
        .map(|s| format!("{}{}", s.letter, s.bars))
        .collect()
}

#[derive(Clone, Copy, Debug)]
pub struct PhraseOptions {
    /// Longest phrase considered, in bars.
    pub max_bars: usize,
    /// Cost of each boundary: higher gives fewer, longer phrases.
    pub boundary_cost: f32,
    /// Two segments whose bars match at least this well share a letter.
    pub same_letter: f32,
    /// Weight of a segment's repeat fitness: how well its bars match, bar for bar, the
    /// best-matching other stretch of the song of its length (above `repeat_floor`), per bar.
    /// It draws the boundaries to where phrases repeat whole.
    pub repeat_weight: f32,
    /// Weight of the phrase-length prior counted in POP909's training songs
    /// ([`PHRASE_LENGTHS`]: the cost of a length is its log rarity against 8 bars); 0 uses the
    /// older hand-set costs (4 and 8 free, 2, 6, 12 and 16 a little, the rest more).
    pub length_prior: f32,
}

/// How many of POP909's training songs' human phrases (`structure_human_label1.txt`, every
/// letter) are 1, 2, …, 16 bars long (`tests/pop909/phrases.rs` counts them again).
pub const PHRASE_LENGTHS: [u32; 16] = [
    470, 315, 337, 2911, 287, 214, 185, 3008, 440, 139, 51, 106, 53, 36, 33, 294,
];

impl Default for PhraseOptions {
    fn default() -> Self {
        Self {
            max_bars: 16,
            boundary_cost: 0.8,
            same_letter: 0.4,
            repeat_weight: 0.3,
            length_prior: 0.1,
        }
    }
}

/// The melody pitch sounding at each sample of each bar (0 = rest): the latest-starting note
/// that still sounds. `bar_ticks` has one more entry than there are bars.
pub fn melody_samples(melody: &[Note], bar_ticks: &[u64]) -> Vec<Vec<u8>> {
    let steps = SAMPLES_PER_BAR;
    let mut notes: Vec<&Note> = melody.iter().collect();
    notes.sort_by_key(|n| n.start);
    let mut started = 0; // notes[..started] start at or before the current sample
    bar_ticks
        .windows(2)
        .map(|w| {
            (0..steps)
                .map(|s| {
                    // Bar ticks should increase; a bar of zero length (bad input) samples rests.
                    let t = w[0] + w[1].saturating_sub(w[0]) * s as u64 / steps as u64;
                    while started < notes.len() && notes[started].start <= t {
                        started += 1;
                    }
                    // A melody is nearly monophonic: the few latest onsets are enough to look at.
                    notes[started.saturating_sub(8)..started]
                        .iter()
                        .rev()
                        .find(|n| t < n.end)
                        .map_or(0, |n| n.pitch)
                })
                .collect()
        })
        .collect()
}

/// Bar-by-bar similarity in [0, 1]: melody (same pitch at the same place) and chords.
fn similarity(samples: &[Vec<u8>], chords: &[&[Option<Chord>]]) -> Vec<Vec<f32>> {
    let n = samples.len();
    let mut s = vec![vec![0f32; n]; n];
    for i in 0..n {
        for j in i..n {
            let (a, b) = (&samples[i], &samples[j]);
            let voiced = a.iter().zip(b).filter(|(x, y)| **x > 0 || **y > 0).count();
            let same = a.iter().zip(b).filter(|(x, y)| **x > 0 && x == y).count();
            let mel = if voiced == 0 {
                1.0
            } else {
                same as f32 / voiced as f32
            };
            // Chords count where either bar has one: two bars without chords are alike in
            // their melody alone.
            let (ca, cb) = (chords[i], chords[j]);
            let heard = ca
                .iter()
                .zip(cb)
                .filter(|(x, y)| x.is_some() || y.is_some());
            let (same_chord, with_chord) = heard.fold((0usize, 0usize), |(s, n), (x, y)| {
                (s + (x == y) as usize, n + 1)
            });
            s[i][j] = if with_chord == 0 {
                mel
            } else {
                0.6 * mel + 0.4 * same_chord as f32 / with_chord as f32
            };
            s[j][i] = s[i][j];
        }
    }
    s
}

fn mean(values: impl Iterator<Item = f32>) -> f32 {
    let (sum, count) = values.fold((0f32, 0usize), |(s, c), v| (s + v, c + 1));
    if count == 0 { 0.0 } else { sum / count as f32 }
}

/// How much a phrase boundary before bar `b` is suggested by the similarity matrix and the
/// melody.
fn boundary_score(s: &[Vec<f32>], samples: &[Vec<u8>], b: usize) -> f32 {
    let n = s.len();
    let k = 4;
    let before = b.saturating_sub(k)..b;
    let after = b..(b + k).min(n);
    let within = |r: std::ops::Range<usize>| {
        mean(
            r.clone()
                .flat_map(|i| r.clone().map(move |j| (i, j)))
                .map(|(i, j)| s[i][j]),
        )
    };
    let cross = mean(
        before
            .clone()
            .flat_map(|i| after.clone().map(move |j| s[i][j])),
    );
    let novelty = 0.5 * (within(before.clone()) + within(after.clone())) - cross;
    // A repeat starts here: bars b.. match bars j.. for a while, but the bars before do not.
    let run = (n - b).min(k);
    let mut repeat = 0f32;
    for j in 1..n {
        if j == b || j + run > n {
            continue;
        }
        let here = mean((0..run).map(|t| s[b + t][j + t]));
        let prev = s[b - 1][j - 1];
        repeat = repeat.max(here - prev);
    }
    // The melody rests at the end of the previous bar.
    let tail = &samples[b - 1];
    let quarter = tail.len() / 4;
    let rest = tail[tail.len() - quarter..]
        .iter()
        .filter(|&&p| p == 0)
        .count() as f32
        / quarter.max(1) as f32;
    novelty + 0.5 * repeat.max(0.0) + 0.3 * rest
}

/// How well a stretch of bars matches, bar for bar, another stretch of the song as long that
/// it does not overlap: sums of the similarity matrix along its diagonals, where a pair of
/// bars counts only when both have melody (a melodic phrase repeats; two silent bars are
/// alike without saying so).
struct RepeatFitness {
    /// `diag[i][j]`: the sum of `s[i - k][j - k]` for k = 0..=min(i, j).
    diag: Vec<Vec<f32>>,
}

impl RepeatFitness {
    fn new(s: &[Vec<f32>], samples: &[Vec<u8>]) -> Self {
        let n = s.len();
        let voiced: Vec<bool> = samples.iter().map(|b| b.iter().any(|&p| p > 0)).collect();
        let mut diag = vec![vec![0f32; n]; n];
        for i in 0..n {
            for j in 0..n {
                let before = if i > 0 && j > 0 {
                    diag[i - 1][j - 1]
                } else {
                    0.0
                };
                let here = if voiced[i] && voiced[j] { s[i][j] } else { 0.0 };
                diag[i][j] = here + before;
            }
        }
        Self { diag }
    }

    /// The mean similarity of bars `start..start + len` to their best match elsewhere (0
    /// when the song has no room for one).
    fn best(&self, start: usize, len: usize) -> f32 {
        let n = self.diag.len();
        if len == 0 || start + len > n {
            return 0.0;
        }
        let sum = |i: usize, j: usize| {
            let end = self.diag[i + len - 1][j + len - 1];
            let before = if i > 0 && j > 0 {
                self.diag[i - 1][j - 1]
            } else {
                0.0
            };
            end - before
        };
        (0..=n - len)
            .filter(|&j| j.abs_diff(start) >= len)
            .map(|j| sum(start, j))
            .fold(0f32, f32::max)
            / len as f32
    }
}

/// Prior over phrase lengths: pop phrases are mostly 4 or 8 bars. With a `weight`, the log
/// rarity of the length in the training songs against 8 bars, times it (lengths past 16 as
/// rare as the rarest).
fn length_cost(bars: usize, weight: f32) -> f32 {
    if weight > 0.0 {
        let eight = PHRASE_LENGTHS[7] as f32;
        let count = PHRASE_LENGTHS
            .get(bars.wrapping_sub(1))
            .copied()
            .unwrap_or(*PHRASE_LENGTHS.iter().min().expect("not empty"));
        return weight * (eight / count.max(1) as f32).ln();
    }
    match bars {
        4 | 8 => 0.0,
        2 | 6 | 12 | 16 => 0.3,
        _ => 0.6,
    }
}

/// The bar-by-bar similarity (in [0, 1]) the segmentation reads: melody and chords.
pub fn bar_similarity(melody: &[Note], grid: &Grid, chords: &[Option<Chord>]) -> Vec<Vec<f32>> {
    let samples = melody_samples(melody, &grid.bar_ticks());
    let n = grid.num_bars();
    let bar_chords: Vec<&[Option<Chord>]> = (0..n)
        .map(|b| {
            let beats = grid.bar_beats(b);
            &chords[beats.start.min(chords.len())..beats.end.min(chords.len())]
        })
        .collect();
    similarity(&samples, &bar_chords)
}

/// Segments a song into phrases of the bars of `grid`; `chords` has one entry per beat of the
/// grid.
pub fn segment_phrases(
    melody: &[Note],
    grid: &Grid,
    chords: &[Option<Chord>],
    options: PhraseOptions,
) -> Vec<Segment> {
    let bar_ticks = grid.bar_ticks();
    let n = grid.num_bars();
    if n == 0 {
        return Vec::new();
    }
    if n > MAX_BARS {
        // The similarity matrix grows as bars²: past this, plain 4-bar units.
        return (0..n)
            .step_by(4)
            .map(|start| Segment {
                start_bar: start,
                bars: 4.min(n - start),
                letter: 'X',
            })
            .collect();
    }
    let samples = melody_samples(melody, &bar_ticks);
    let bar_chords: Vec<&[Option<Chord>]> = (0..n)
        .map(|b| {
            let beats = grid.bar_beats(b);
            &chords[beats.start.min(chords.len())..beats.end.min(chords.len())]
        })
        .collect();
    let s = similarity(&samples, &bar_chords);
    let scores: Vec<f32> = (0..n)
        .map(|b| {
            // Between two bars without melody (an intro, a break) nothing marks a phrase.
            let silent = |k: usize| samples[k].iter().all(|&p| p == 0);
            if b == 0 || (silent(b - 1) && silent(b)) {
                0.0
            } else {
                boundary_score(&s, &samples, b)
            }
        })
        .collect();

    let fitness = RepeatFitness::new(&s, &samples);
    // best[b]: best total for a segmentation of bars 0..b ending with a boundary at b.
    let mut best = vec![f32::NEG_INFINITY; n + 1];
    let mut from = vec![0usize; n + 1];
    best[0] = 0.0;
    for b in 1..=n {
        let reward = if b < n {
            scores[b] - options.boundary_cost
        } else {
            0.0
        };
        for len in 1..=options.max_bars.min(b) {
            let fit = if options.repeat_weight > 0.0 {
                options.repeat_weight * len as f32 * fitness.best(b - len, len)
            } else {
                0.0
            };
            let v = best[b - len] + reward - length_cost(len, options.length_prior) + fit;
            if v > best[b] {
                best[b] = v;
                from[b] = b - len;
            }
        }
    }
    let mut bounds = vec![n];
    while let Some(&b) = bounds.last() {
        if b == 0 {
            break;
        }
        bounds.push(from[b]);
    }
    bounds.reverse();
    name_segments(&bounds, &s, &samples, options)
}

/// Letters: melodic segments that match an earlier one take its letter, others the next free
/// one; segments with (almost) no melody are `i` (intro), `o` (outro) or `x`.
fn name_segments(
    bounds: &[usize],
    s: &[Vec<f32>],
    samples: &[Vec<u8>],
    options: PhraseOptions,
) -> Vec<Segment> {
    let mut segments: Vec<Segment> = Vec::new();
    let mut next_letter = b'A';
    let last = bounds.len().saturating_sub(2);
    for (k, w) in bounds.windows(2).enumerate() {
        let (start, end) = (w[0], w[1]);
        let voiced = (start..end)
            .flat_map(|b| samples[b].iter())
            .filter(|&&p| p > 0)
            .count();
        let total: usize = (start..end).map(|b| samples[b].len()).sum();
        let letter = if (voiced as f32) < 0.1 * total as f32 {
            match k {
                0 => 'i',
                _ if k == last => 'o',
                _ => 'x',
            }
        } else {
            let matched = segments
                .iter()
                .filter(|p| p.letter.is_ascii_uppercase())
                .map(|p| {
                    let len = p.bars.min(end - start);
                    (
                        p.letter,
                        mean((0..len).map(|t| s[p.start_bar + t][start + t])),
                    )
                })
                .filter(|&(_, sim)| sim >= options.same_letter)
                .max_by(|a, b| a.1.total_cmp(&b.1));
            match matched {
                Some((letter, _)) => letter,
                None => {
                    let l = next_letter as char;
                    next_letter = (next_letter + 1).min(b'Z');
                    l
                }
            }
        };
        segments.push(Segment {
            start_bar: start,
            bars: end - start,
            letter,
        });
    }
    segments
}

/// Boundary precision, recall and F1 with a tolerance of `tolerance` bars; the song's start and
/// end are not boundaries.
pub fn boundary_f1(predicted: &[usize], reference: &[usize], tolerance: usize) -> (f64, f64, f64) {
    let mut used = vec![false; reference.len()];
    let mut hits = 0usize;
    for &p in predicted {
        if let Some(i) = (0..reference.len())
            .filter(|&i| !used[i] && reference[i].abs_diff(p) <= tolerance)
            .min_by_key(|&i| reference[i].abs_diff(p))
        {
            used[i] = true;
            hits += 1;
        }
    }
    let precision = if predicted.is_empty() {
        0.0
    } else {
        hits as f64 / predicted.len() as f64
    };
    let recall = if reference.is_empty() {
        0.0
    } else {
        hits as f64 / reference.len() as f64
    };
    let f1 = if hits == 0 {
        0.0
    } else {
        2.0 * precision * recall / (precision + recall)
    };
    (precision, recall, f1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 4-bar melodic phrase (one note per beat) starting at `bar`, transposed by `shift`.
    fn phrase(bar: u64, shift: u8, shape: &[u8; 16]) -> Vec<Note> {
        shape
            .iter()
            .enumerate()
            .filter(|(_, p)| **p > 0)
            .map(|(i, p)| {
                let start = (bar * 4 + i as u64) * 480;
                Note {
                    pitch: p + shift,
                    velocity: 80,
                    start,
                    end: start + 400,
                    channel: 0,
                }
            })
            .collect()
    }

    const A: [u8; 16] = [60, 62, 64, 65, 67, 67, 65, 64, 62, 64, 60, 0, 60, 62, 60, 0];
    const B: [u8; 16] = [69, 69, 71, 72, 74, 72, 71, 69, 67, 69, 71, 0, 72, 72, 0, 0];

    #[test]
    fn repeated_phrases_get_boundaries_and_letters() {
        use crate::music::chords::Quality;
        // 2 bars of intro (chords, no melody), then A A B A, 4 bars each. A is sung over
        // | C | G | Am | F |, B over | F | G | Em | Am |.
        let chord = |root: u8, quality| Some(Chord { root, quality });
        let (maj, min) = (Quality::Maj, Quality::Min);
        let a_chords = [chord(0, maj), chord(7, maj), chord(9, min), chord(5, maj)];
        let b_chords = [chord(5, maj), chord(7, maj), chord(4, min), chord(9, min)];
        let mut melody = Vec::new();
        let mut chords: Vec<Option<Chord>> = [a_chords[0], a_chords[3]]
            .iter()
            .flat_map(|c| [*c; 4])
            .collect();
        for (k, (shape, progression)) in
            [(A, a_chords), (A, a_chords), (B, b_chords), (A, a_chords)]
                .iter()
                .enumerate()
        {
            melody.extend(phrase(2 + 4 * k as u64, 0, shape));
            chords.extend(progression.iter().flat_map(|c| [*c; 4]));
        }
        let bars = 18;
        let grid = Grid::quarters(480, bars * 4 * 480, 1);
        let segs = segment_phrases(&melody, &grid, &chords, PhraseOptions::default());
        assert_eq!(label_string(&segs), "i2A4A4B4A4");
    }

    /// A short lead sheet without chords (13 bars: A A B and a last note) gets its phrases and
    /// its repeat, not one phrase over every bar.
    #[test]
    fn a_short_lead_sheet_gets_its_repeat() {
        let mut melody = Vec::new();
        for (k, shape) in [A, A, B].iter().enumerate() {
            melody.extend(phrase(4 * k as u64, 0, shape));
        }
        melody.push(Note {
            pitch: 60,
            velocity: 80,
            start: 48 * 480,
            end: 51 * 480,
            channel: 0,
        });
        let bars = 13;
        let grid = Grid::quarters(480, bars * 4 * 480, 1);
        let chords = vec![None; bars as usize * 4];
        let segs = segment_phrases(&melody, &grid, &chords, PhraseOptions::default());
        let lane = label_string(&segs);
        assert!(lane.starts_with("A4A4B"), "{lane}");
    }

    #[test]
    fn f1_with_tolerance() {
        let (p, r, f) = boundary_f1(&[4, 9, 16], &[4, 8, 12, 16], 1);
        assert_eq!((p, r), (1.0, 0.75));
        assert!((f - 2.0 * 0.75 / 1.75).abs() < 1e-12);
        assert_eq!(boundary_f1(&[], &[4], 1).2, 0.0);
    }
}
