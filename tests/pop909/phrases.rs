//! Phrase segmentation against POP909's human phrase annotations: the validation figure, and a
//! sweep (ignored) to tune the defaults on the training songs.

use pianoformer::music::midi::read_midi;
use pianoformer::music::pop909::{self, Split};
use pianoformer::music::roll::Grid;

use pianoformer::eval::texture::{Agreement, bar_agreement};
use pianoformer::music::labels::bar_phrases;
use pianoformer::music::phrases::{PhraseOptions, Segment, segment_phrases};

use super::{data_root, song_ids};

/// One validation song prepared for phrase evaluation: bars from `beat_midi.txt`'s downbeats,
/// chords recognised per beat, the melody track, and the human boundaries as bar indices.
struct PhraseCase {
    melody: Vec<pianoformer::music::midi::Note>,
    /// Beats of `beat_midi.txt`, bars from its downbeats (a pickup bar first when the first
    /// downbeat is not the first beat).
    grid: Grid,
    /// Index of the bar of the first downbeat.
    first_downbeat_bar: usize,
    chords: Vec<Option<pianoformer::music::chords::Chord>>,
    /// Chords recognised from the melody alone (what a melody-only file's lanes start from).
    melody_chords: Vec<Option<pianoformer::music::chords::Chord>>,
    /// The human phrases placed on the bars.
    human: Vec<Segment>,
    /// Bar where the annotations start (placed with `startpos.csv`) and where they end.
    start: usize,
    end: usize,
    reference: Vec<usize>,
}

fn phrase_cases(root: &std::path::Path, split: Split) -> Vec<PhraseCase> {
    use pianoformer::music::chords::{RecognizeOptions, recognize};
    let offsets: std::collections::HashMap<u32, f64> =
        pop909::parse_startpos(&pop909::read_text(&root.join("startpos.csv")).unwrap())
            .unwrap()
            .into_iter()
            .collect();
    let mut cases = Vec::new();
    for id in song_ids(root)
        .into_iter()
        .filter(|&id| Split::of(id) == split)
    {
        let Some(&offset) = offsets.get(&id) else {
            continue;
        };
        let dir = pop909::song_dir(root, id);
        let song = read_midi(&std::fs::read(dir.join(format!("{id:03}.mid"))).unwrap()).unwrap();
        let beats =
            pop909::parse_beats(&pop909::read_text(&dir.join("beat_midi.txt")).unwrap()).unwrap();
        let phrases = pop909::parse_phrases(
            &pop909::read_text(&dir.join("structure_human_label1.txt")).unwrap(),
        )
        .unwrap();
        let beat_ticks: Vec<u64> = beats
            .iter()
            .map(|b| song.tick_at_seconds(b.seconds))
            .collect();
        let downbeats: Vec<usize> = (0..beats.len()).filter(|&i| beats[i].bar_start).collect();
        if downbeats.len() < 8 {
            continue;
        }
        let mut ticks = beat_ticks.clone();
        ticks.push(beat_ticks.last().unwrap() + song.ppq as u64);
        let grid = Grid::new(ticks, 1, downbeats.clone());
        let first_downbeat_bar = (downbeats[0] > 0) as usize;
        let bar_ticks = grid.bar_ticks();
        let all: Vec<_> = song
            .tracks
            .iter()
            .flat_map(|t| t.notes.iter().map(|n| (n, 1.0)))
            .collect();
        let chords = recognize(&all, &grid.beat_ticks, RecognizeOptions::default());
        let melody: Vec<_> = song
            .tracks
            .iter()
            .filter(|t| t.name == "MELODY")
            .flat_map(|t| t.notes.clone())
            .collect();
        let alone: Vec<_> = melody.iter().map(|n| (n, 1.0)).collect();
        let melody_chords = recognize(&alone, &grid.beat_ticks, RecognizeOptions::default());
        // Where the annotations start, as a bar index.
        let first_note = song
            .tracks
            .iter()
            .flat_map(|t| t.notes.iter().map(|n| n.start))
            .min()
            .unwrap();
        let start_tick = first_note as f64 + offset * song.ppq as f64;
        let start = (0..grid.num_bars())
            .min_by_key(|&k| (bar_ticks[k] as f64 - start_tick).abs() as u64)
            .unwrap();
        let mut reference = Vec::new();
        let mut human = Vec::new();
        let mut at = start;
        for p in &phrases {
            human.push(Segment {
                start_bar: at,
                bars: p.bars as usize,
                letter: p.letter,
            });
            at += p.bars as usize;
            reference.push(at);
        }
        reference.pop();
        let end = at;
        if end > grid.num_bars() {
            continue;
        }
        cases.push(PhraseCase {
            melody,
            grid,
            first_downbeat_bar,
            chords,
            melody_chords,
            human,
            start,
            end,
            reference,
        });
    }
    cases
}

/// Mean boundary F1 (±1 bar) of the segmentation, of a boundary every 4 bars from the first
/// downbeat (what a tool without annotations could do), and of one every 4 bars from the
/// annotated start (which a segmentation of a user's file does not know).
fn phrase_f1(cases: &[PhraseCase], options: PhraseOptions) -> (f64, f64, f64) {
    use pianoformer::music::phrases::boundary_f1;
    let mut sums = (0.0, 0.0, 0.0);
    for c in cases {
        let segments = segment_phrases(&c.melody, &c.grid, &c.chords, options);
        let inside = |b: &usize| *b > c.start && *b < c.end;
        let predicted: Vec<usize> = segments
            .iter()
            .map(|s| s.start_bar)
            .filter(inside)
            .collect();
        let every4: Vec<usize> = (c.first_downbeat_bar + 4..c.end)
            .step_by(4)
            .filter(inside)
            .collect();
        let oracle: Vec<usize> = (c.start + 4..c.end).step_by(4).collect();
        sums.0 += boundary_f1(&predicted, &c.reference, 1).2;
        sums.1 += boundary_f1(&every4, &c.reference, 1).2;
        sums.2 += boundary_f1(&oracle, &c.reference, 1).2;
    }
    let n = cases.len().max(1) as f64;
    (sums.0 / n, sums.1 / n, sums.2 / n)
}

/// Phrase segmentation against `structure_human_label1.txt` on the validation songs: boundary
/// F1 at ±1 bar (songs without a `startpos.csv` offset are left out).
#[test]
fn phrase_boundary_f1_on_validation_songs() {
    let Some(root) = data_root() else { return };
    let cases = phrase_cases(&root, Split::Validation);
    let (f1, baseline, oracle) = phrase_f1(&cases, Default::default());
    eprintln!(
        "phrase boundaries on {} validation songs, F1 at ±1 bar: {f1:.3} \
         (every 4 bars from the first downbeat {baseline:.3}; from the annotated start {oracle:.3})",
        cases.len()
    );
    assert!(cases.len() >= 70);
    assert!(
        f1 > baseline,
        "segmentation no better than a boundary every 4 bars"
    );
}

/// Tuning aid, not a check, on the training songs (the defaults were chosen with it; the
/// validation figure above is reported, not tuned on):
/// `cargo test --test pop909 phrase_sweep -- --ignored --nocapture`.
#[test]
#[ignore]
fn phrase_sweep() {
    let Some(root) = data_root() else { return };
    let cases = phrase_cases(&root, Split::Train);
    for boundary_cost in [0.15, 0.3, 0.4, 0.5, 0.6, 0.8] {
        let options = PhraseOptions {
            boundary_cost,
            ..Default::default()
        };
        let (f1, baseline, _) = phrase_f1(&cases, options);
        eprintln!("boundary_cost {boundary_cost:.2}: F1 {f1:.3} (baseline {baseline:.3})");
    }
}

/// The detector's agreement with the human phrases over their bars, as `eval --texture` scores
/// it (boundaries and same-letter bar pairs, precision and recall, each a mean over songs),
/// from the melody with the chords it implies alone (`melody_only`) or with the whole
/// arrangement's chords.
fn detector_agreement(cases: &[PhraseCase], options: PhraseOptions, melody_only: bool) -> [f64; 6] {
    let mut sums = [0.0f64; 6];
    let mut counts = [0usize; 6];
    for c in cases {
        let chords = if melody_only {
            &c.melody_chords
        } else {
            &c.chords
        };
        let found = bar_phrases(&segment_phrases(&c.melody, &c.grid, chords, options));
        let human = bar_phrases(&c.human);
        let span = c.start..c.end.min(found.len());
        let a: Agreement = bar_agreement(&human[span.clone()], &found[span]);
        let values = [
            a.boundary_precision,
            a.boundary_recall,
            a.pair_precision,
            a.pair_recall,
            a.answer_precision,
            a.answer_recall,
        ];
        for (k, v) in values.iter().enumerate() {
            if let Some(v) = v {
                sums[k] += v;
                counts[k] += 1;
            }
        }
    }
    std::array::from_fn(|k| sums[k] / counts[k].max(1) as f64)
}

fn agreement_line(a: [f64; 6]) -> String {
    format!(
        "boundaries P {:.3} R {:.3}; same-letter pairs P {:.3} R {:.3}; answers P {:.3} R {:.3} \
         (F1 {:.3})",
        a[0],
        a[1],
        a[2],
        a[3],
        a[4],
        a[5],
        2.0 * a[4] * a[5] / (a[4] + a[5]).max(1e-9)
    )
}

/// The detector's same-letter pairs and answers (what the texture echo joins) and boundaries
/// against the human labels on the validation and test songs, from the melody alone and with
/// the arrangement's chords (the options were chosen on the training songs, `detector_sweep`).
/// The detector must join more of the human repeats than it did before it read the repeats'
/// fitness and the length prior (answers recall 0.391, same-letter pairs recall 0.416 from the
/// melody alone on validation), and a boundary every 4 bars (answers none).
#[test]
fn detector_agreement_on_validation_and_test_songs() {
    let Some(root) = data_root() else { return };
    for split in [Split::Validation, Split::Test] {
        let cases = phrase_cases(&root, split);
        let alone = detector_agreement(&cases, Default::default(), true);
        let full = detector_agreement(&cases, Default::default(), false);
        eprintln!(
            "detector on {} {split:?} songs, melody alone: {}\n  with the arrangement's chords: {}",
            cases.len(),
            agreement_line(alone),
            agreement_line(full)
        );
        assert!(cases.len() >= 70);
        if split == Split::Validation {
            assert!(alone[5] > 0.41 && alone[3] > 0.5, "{alone:?}");
        }
    }
}

/// Tuning aid for the letters and boundaries on the training songs (validation is reported,
/// not tuned on): `cargo test --test pop909 detector_sweep -- --ignored --nocapture`;
/// `PHRASES_SHOW=N` prints the first N songs' human and detected lanes.
#[test]
#[ignore]
fn detector_sweep() {
    use pianoformer::music::phrases::label_string;
    let Some(root) = data_root() else { return };
    let cases = phrase_cases(&root, Split::Train);
    let show: usize = std::env::var("PHRASES_SHOW")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    for c in cases.iter().take(show) {
        let found = segment_phrases(&c.melody, &c.grid, &c.melody_chords, Default::default());
        eprintln!(
            "bars {}..{}: human {} | found {}",
            c.start,
            c.end,
            label_string(&c.human),
            label_string(&found)
        );
    }
    eprintln!(
        "{} training songs, defaults, melody alone: {}",
        cases.len(),
        agreement_line(detector_agreement(&cases, Default::default(), true))
    );
    let grid: Vec<PhraseOptions> = sweep_grid();
    for options in grid {
        eprintln!(
            "same_letter {:.2} boundary_cost {:.2} repeat {:.2} prior {:.2}: {}",
            options.same_letter,
            options.boundary_cost,
            options.repeat_weight,
            options.length_prior,
            agreement_line(detector_agreement(&cases, options, true))
        );
    }
}

/// The options the sweep tries (`PHRASES_SWEEP=letter,cost,repeat,prior;…`).
fn sweep_grid() -> Vec<PhraseOptions> {
    let given = std::env::var("PHRASES_SWEEP").unwrap_or_default();
    let mut out = Vec::new();
    for item in given.split(';').filter(|s| !s.is_empty()) {
        let v: Vec<f32> = item.split(',').map(|x| x.trim().parse().unwrap()).collect();
        out.push(PhraseOptions {
            same_letter: v[0],
            boundary_cost: v[1],
            repeat_weight: v[2],
            length_prior: v[3],
            ..Default::default()
        });
    }
    out
}

/// What bounds the detector's letters, on the training songs: the bar similarity it reads
/// between the bars the human labels join (a repeat's bar and its first occurrence's) against
/// bars 8 back that they do not join, and the same with each bar's melody compared at its best
/// transposition. `cargo test --test pop909 similarity_of_human_links -- --ignored --nocapture`.
#[test]
#[ignore]
fn similarity_of_human_links() {
    use pianoformer::music::labels::first_occurrence;
    use pianoformer::music::phrases::{bar_similarity, melody_samples};
    let Some(root) = data_root() else { return };
    let cases = phrase_cases(&root, Split::Train);
    // [joined, not joined] × [bar similarity, transposed melody].
    let mut figures: [[Vec<f32>; 2]; 2] = Default::default();
    for c in &cases {
        let s = bar_similarity(&c.melody, &c.grid, &c.melody_chords);
        let m = melody_samples(&c.melody, &c.grid.bar_ticks());
        let transposed = |i: usize, j: usize| {
            let (a, b) = (&m[i], &m[j]);
            let voiced = a.iter().zip(b).filter(|(x, y)| **x > 0 || **y > 0).count();
            let best = (-12i32..=12)
                .map(|d| {
                    let same = |(x, y): (&u8, &u8)| *x > 0 && *x as i32 == *y as i32 + d;
                    a.iter().zip(b).filter(|&p| same(p)).count()
                })
                .max()
                .unwrap_or(0);
            best as f32 / voiced.max(1) as f32
        };
        let human = bar_phrases(&c.human);
        for k in c.start..c.end.min(human.len()) {
            let melodic = human[k].is_some_and(|p| p.letter.is_ascii_uppercase());
            let (kind, f) = match first_occurrence(&human, k) {
                Some(f) => (0, f),
                None if k >= 8 && melodic => (1, k - 8),
                None => continue,
            };
            figures[kind][0].push(s[k][f]);
            figures[kind][1].push(transposed(k, f));
        }
    }
    for (kind, name) in ["joined", "not joined, 8 bars back"].iter().enumerate() {
        for (how, what) in ["bar similarity", "transposed melody"].iter().enumerate() {
            let v = &mut figures[kind][how];
            v.sort_by(f32::total_cmp);
            let q = |x: f64| v[((v.len() - 1) as f64 * x) as usize];
            eprintln!(
                "{name}, {what}: {} bars, quantiles 10/25/50/75/90 %: {:.2} {:.2} {:.2} {:.2} {:.2}",
                v.len(),
                q(0.1),
                q(0.25),
                q(0.5),
                q(0.75),
                q(0.9)
            );
        }
    }
}

/// `PHRASE_LENGTHS` is the count of the training songs' human phrases by length.
#[test]
fn the_length_prior_is_the_training_songs_count() {
    use pianoformer::music::phrases::PHRASE_LENGTHS;
    let Some(root) = data_root() else { return };
    let mut counts = [0u32; 16];
    for id in song_ids(&root)
        .into_iter()
        .filter(|&id| Split::of(id) == Split::Train)
    {
        let path = pop909::song_dir(&root, id).join("structure_human_label1.txt");
        let Ok(text) = pop909::read_text(&path) else {
            continue;
        };
        for p in pop909::parse_phrases(&text).unwrap() {
            if let Some(c) = counts.get_mut(p.bars as usize - 1) {
                *c += 1;
            }
        }
    }
    assert_eq!(counts, PHRASE_LENGTHS);
}
