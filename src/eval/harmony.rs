//! How a harmonizer is judged, on songs whose chords are annotated: each song is reduced to
//! what a person with a tune would bring (the melody and bridge, no piano; phrases detected from
//! them, or the annotated ones), harmonized, and the result is scored per annotated beat
//! (root, root + family, exact), by the reference-free measures of Yeh et al.
//! ([`crate::music::harmony::measures`]), by its harmonic rhythm (changes per bar, the share on
//! bar lines and half bars) and by whether a repeated phrase gets the chords of its first
//! occurrence. The rule-based detector and the annotations themselves are scored the same way.

use std::ops::Range;

use serde::Serialize;

use crate::data::corpus::{Corpus, Piece};
use crate::generate::harmonize::{Choice, progression};
use crate::music::chords::{Chord, Quality};
use crate::music::grid::Grid;
use crate::music::harmony::decode::{Draws, HarmonyDecode, Rhythm};
use crate::music::harmony::measures::{Accuracy, Measures, agreement, mean_measures, measures};
use crate::music::harmony::{BeatPlaces, CHORD_CLASSES, class_chord};
use crate::music::labels::{StepLabels, detect_structure};
use crate::music::midi::Note;
use crate::music::midi::Song;
use crate::music::phrases::Segment;
use crate::music::phrases::{boundary_f1, segment_phrases};
use crate::music::roll::{GENERATED_VELOCITY, MultiRoll, PianoRoll, Role};

/// One annotated song as the harmonizer meets it.
#[derive(Clone, Debug)]
pub struct HarmonySong {
    pub name: String,
    pub places: BeatPlaces,
    pub steps_per_beat: usize,
    pub melody: PianoRoll,
    pub bridge: PianoRoll,
    /// Labels with the phrases detected from the melody and bridge alone (what a dropped
    /// melody-only file gets).
    pub detected_labels: StepLabels,
    /// Labels with the annotated phrases (what a person who set the phrase lane gets).
    pub annotated_labels: StepLabels,
    /// The annotated chord of every beat, and the beats the annotations cover.
    pub reference: Vec<Option<Chord>>,
    pub beats: Range<usize>,
    /// The rule-based detector's chords from the melody and bridge alone, and from the full
    /// arrangement (piano included).
    pub detector: Vec<Option<Chord>>,
    pub full_mix: Vec<Option<Chord>>,
    /// The grid, the melody's notes (quantised to it) and the annotated phrase boundaries (bars
    /// strictly inside the annotated span): what phrase segmentation is scored on.
    pub grid: Grid,
    pub melody_notes: Vec<Note>,
    pub boundaries: Vec<usize>,
    /// The annotated phrases' first and last bar lines.
    pub phrase_span: (usize, usize),
    /// Annotated repetitions: (first occurrence's beat, repetition's beat, beats) for every
    /// later phrase with the letter and length of an earlier one.
    pub repeats: Vec<(usize, usize, usize)>,
}

/// A song of `piece`'s rolls (MELODY, BRIDGE, and PIANO when `piano`), quantised to its grid.
pub(crate) fn song_of(piece: &Piece, piano: bool) -> Song {
    let mut rolls = piece.sheet.rolls.clone();
    if !piano {
        rolls.piano = PianoRoll::new(rolls.num_steps());
    }
    Song {
        ppq: 480,
        tempos: Vec::new(),
        time_signatures: Vec::new(),
        key_signatures: Vec::new(),
        tracks: rolls
            .to_tracks(&piece.sheet.grid, GENERATED_VELOCITY)
            .into_iter()
            .filter(|t| !t.notes.is_empty())
            .collect(),
    }
}

/// Phrases of per-step labels as segments of bars.
fn segments(labels: &StepLabels) -> Vec<(Segment, usize)> {
    let mut out: Vec<(Segment, usize)> = Vec::new();
    let spb = labels.steps_per_beat.max(1);
    for (s, p) in labels.phrase.iter().enumerate().step_by(spb) {
        let Some(p) = p else { continue };
        if out.last().is_none_or(|(_, i)| *i != p.index as usize) {
            out.push((
                Segment {
                    start_bar: labels.bar[s] as usize,
                    bars: p.bars as usize,
                    letter: p.letter,
                },
                p.index as usize,
            ));
        }
    }
    out
}

/// `labels` with `chords` (one per beat) in the chord lane.
pub fn with_chords(labels: &StepLabels, chords: &[Option<Chord>]) -> StepLabels {
    let spb = labels.steps_per_beat.max(1);
    let mut out = labels.clone();
    for (s, c) in out.chord.iter_mut().enumerate() {
        *c = chords.get(s / spb).copied().flatten();
    }
    out
}

impl HarmonySong {
    /// The song of an annotated piece (POP909: its labels' chords and phrases are the
    /// annotations, `range` their span).
    pub fn new(piece: &Piece) -> Self {
        let grid = &piece.sheet.grid;
        let spb = grid.steps_per_beat.max(1);
        let melody_only = song_of(piece, false);
        let found = detect_structure(&melody_only, grid);
        let full = detect_structure(&song_of(piece, true), grid);
        let rolls: &MultiRoll = &piece.sheet.rolls;
        let annotated = &piece.sheet.labels;
        let detected_labels = StepLabels::new(
            grid,
            &rolls.melody,
            &annotated.beat_chords(),
            &found.phrases,
        );
        let reference = annotated.beat_chords();
        let beats = piece.range.start.div_ceil(spb)..piece.range.end / spb;
        let bar_beat = |bar: usize| grid.bar_beats(bar).start;
        let mut repeats = Vec::new();
        let phrases = segments(annotated);
        for (i, (later, _)) in phrases.iter().enumerate() {
            if !later.letter.is_ascii_uppercase() {
                continue;
            }
            if let Some((first, _)) = phrases[..i]
                .iter()
                .find(|(p, _)| p.letter == later.letter && p.bars == later.bars)
                && later.start_bar + later.bars <= grid.num_bars()
            {
                let len = bar_beat(later.start_bar + later.bars) - bar_beat(later.start_bar);
                repeats.push((bar_beat(first.start_bar), bar_beat(later.start_bar), len));
            }
        }
        let first = phrases.first().map_or(0, |(p, _)| p.start_bar);
        let last = phrases.last().map_or(0, |(p, _)| p.start_bar + p.bars);
        let boundaries = phrases
            .iter()
            .map(|(p, _)| p.start_bar)
            .filter(|&b| b > first && b < last)
            .collect();
        let melody_notes = melody_only
            .tracks
            .iter()
            .filter(|t| t.name == Role::Melody.track_name())
            .flat_map(|t| t.notes.iter().copied())
            .collect();
        Self {
            grid: grid.clone(),
            melody_notes,
            boundaries,
            phrase_span: (first, last),
            name: piece.name.clone(),
            places: BeatPlaces::from_labels(annotated),
            steps_per_beat: spb,
            melody: rolls.melody.clone(),
            bridge: rolls.bridge.clone(),
            detected_labels,
            annotated_labels: annotated.clone(),
            reference,
            beats,
            detector: found.chords,
            full_mix: full.chords,
            repeats,
        }
    }
}

/// Mean and spread of a share over songs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Rhythmic {
    /// Chord changes per bar.
    pub changes_per_bar: f64,
    /// Share of the changes on a bar line or a half bar.
    pub on_grid: f64,
}

/// Everything measured of one way of filling the chord lane over a set of songs.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HarmonyScores {
    pub songs: usize,
    /// Per annotated beat with a chord: root, root + family, exact.
    pub accuracy: [f64; 3],
    /// Per annotated beat with a chord: the share of the chord's tones that are the
    /// annotated chord's ([`Accuracy::tone_share`]).
    pub tones: f64,
    pub beats: usize,
    /// Means over songs of the reference-free measures.
    pub measures: Measures,
    pub rhythm: Rhythmic,
    /// Over annotated repetitions of a phrase: the share of beats whose chord (root and
    /// family) is the one of the first occurrence.
    pub repetition_agreement: Option<f64>,
}

/// Scores `chords` (one progression per song, per beat) over `songs`.
pub fn score(songs: &[HarmonySong], chords: &[Vec<Option<Chord>>]) -> HarmonyScores {
    let mut accuracy = Accuracy::default();
    let mut all = Vec::new();
    let (mut changes, mut on_grid, mut bars) = (0usize, 0usize, 0usize);
    let (mut agree, mut agree_n) = (0.0f64, 0usize);
    for (song, chords) in songs.iter().zip(chords) {
        accuracy.add(Accuracy::of(chords, &song.reference, song.beats.clone()));
        if let Some(m) = measures(
            &song.melody,
            chords,
            song.steps_per_beat,
            song.beats.clone(),
        ) {
            all.push(m);
        }
        for b in song.beats.clone().skip(1) {
            if b < chords.len() && chords[b] != chords[b - 1] {
                changes += 1;
                on_grid += (song.places.slot(b) < 2) as usize;
            }
            bars += (b < song.places.len() && song.places.in_bar[b] == 0) as usize;
        }
        for &(a, b, len) in &song.repeats {
            if let Some(x) = agreement(chords, a, b, len) {
                agree += x;
                agree_n += 1;
            }
        }
    }
    HarmonyScores {
        songs: songs.len(),
        accuracy: accuracy.rates(),
        tones: accuracy.tone_share(),
        beats: accuracy.beats,
        measures: mean_measures(&all),
        rhythm: Rhythmic {
            changes_per_bar: changes as f64 / bars.max(1) as f64,
            on_grid: on_grid as f64 / changes.max(1) as f64,
        },
        repetition_agreement: (agree_n > 0).then(|| agree / agree_n as f64),
    }
}

/// The share of sus chords among `chords`' beats with a chord.
pub fn sus_share(chords: &[Vec<Option<Chord>>]) -> f64 {
    let all: Vec<Chord> = chords.iter().flatten().flatten().copied().collect();
    all.iter()
        .filter(|c| matches!(c.quality, Quality::Sus2 | Quality::Sus4))
        .count() as f64
        / all.len().max(1) as f64
}

/// Mean phrase-boundary F1 (±1 bar, boundaries inside the annotated phrases) of the melody's
/// segmentation when it reads `chords` (one progression per song): the same segmentation the
/// page runs, fed the chords of the detector, the harmonizer or the annotations.
pub fn phrase_f1(songs: &[HarmonySong], chords: &[Vec<Option<Chord>>]) -> f64 {
    let mut sum = 0.0;
    let mut n = 0usize;
    for (song, chords) in songs.iter().zip(chords) {
        if song.boundaries.is_empty() {
            continue;
        }
        let (first, last) = song.phrase_span;
        let predicted: Vec<usize> =
            segment_phrases(&song.melody_notes, &song.grid, chords, Default::default())
                .iter()
                .map(|s| s.start_bar)
                .filter(|&b| b > first && b < last)
                .collect();
        sum += boundary_f1(&predicted, &song.boundaries, 1).2;
        n += 1;
    }
    sum / n.max(1) as f64
}

/// The harmonic rhythm of `corpus`'s annotated songs (each song's annotated span only), and
/// how many songs it was counted in; `None` when none has chords.
pub fn rhythm_of(corpus: &Corpus) -> Option<(Rhythm, usize)> {
    let places: Vec<(Vec<Option<Chord>>, BeatPlaces)> = corpus
        .pieces
        .iter()
        .filter(|p| p.has_harmony())
        .map(|p| {
            let spb = p.sheet.grid.steps_per_beat.max(1);
            let mut chords = p.sheet.labels.beat_chords();
            // Only the annotated span's changes count.
            let span = p.range.start.div_ceil(spb)..p.range.end / spb;
            for (b, c) in chords.iter_mut().enumerate() {
                if !span.contains(&b) {
                    *c = None;
                }
            }
            (chords, BeatPlaces::from_labels(&p.sheet.labels))
        })
        .collect();
    (!places.is_empty()).then(|| {
        (
            Rhythm::fit(places.iter().map(|(c, p)| (&c[..], p))),
            places.len(),
        )
    })
}

/// Every song's progression from its log-probabilities under `decode`.
pub fn decode_all(
    songs: &[HarmonySong],
    log_probs: &[Vec<f32>],
    decode: &HarmonyDecode,
    choice: Choice,
) -> Vec<Vec<Option<Chord>>> {
    songs
        .iter()
        .zip(log_probs)
        .map(|(s, lp)| progression(lp, &s.places, decode, 0..usize::MAX, None, choice))
        .collect()
}

/// Each beat's most likely chord on its own, with no harmonic rhythm: what decoding adds to.
pub fn each_beat_alone(log_probs: &[Vec<f32>]) -> Vec<Vec<Option<Chord>>> {
    log_probs
        .iter()
        .map(|lp| {
            lp.chunks(CHORD_CLASSES)
                .map(|row| {
                    let best = (0..row.len()).max_by(|&a, &b| row[a].total_cmp(&row[b]));
                    class_chord(best.unwrap_or(0))
                })
                .collect()
        })
        .collect()
}

/// The emission weights tried on validation.
pub const WEIGHTS: [f32; 9] = [0.25, 0.35, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 4.0];
/// The tone weights tried on validation (the best progression by its chords' expected tones;
/// reports/harmonizer.md, "Choosing chords by their tones").
pub const TONE_WEIGHTS: [f32; 7] = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0];

/// The decoding chosen on validation songs, and every setting tried with its scores.
pub struct DecodeChoice {
    pub decode: HarmonyDecode,
    /// (emission weight, scores) of the likeliest progression.
    pub weights: Vec<(f32, HarmonyScores)>,
    /// (tone weight, scores) of the progression by expected tones, at the chosen weight.
    pub tones: Vec<(f32, HarmonyScores)>,
}

/// Chooses how the harmonizer's probabilities become chords on `valid` (their `log_probs`):
/// every setting by the same key, root + family accuracy, then root. First the emission
/// weight of the likeliest progression, then whether a tone weight beats it.
pub fn choose_decode(
    valid: &[HarmonySong],
    log_probs: &[Vec<f32>],
    rhythm: Rhythm,
    choice: Choice,
) -> DecodeChoice {
    let key = |s: &HarmonyScores| (s.accuracy[1], s.accuracy[0]);
    let scores =
        |decode: &HarmonyDecode| score(valid, &decode_all(valid, log_probs, decode, choice));
    let mut weights = Vec::new();
    let mut best: Option<(HarmonyDecode, HarmonyScores)> = None;
    for weight in WEIGHTS {
        let decode = HarmonyDecode {
            rhythm,
            weight,
            tones: None,
            alternatives: None,
            colourful: None,
        };
        let s = scores(&decode);
        if best.as_ref().is_none_or(|(_, b)| key(&s) > key(b)) {
            best = Some((decode, s.clone()));
        }
        weights.push((weight, s));
    }
    let (mut decode, mut chosen) = best.expect("weights were tried");
    let likeliest = decode;
    let mut tones = Vec::new();
    for w in TONE_WEIGHTS {
        let s = scores(&HarmonyDecode {
            tones: Some(w),
            ..likeliest
        });
        if key(&s) > key(&chosen) {
            decode.tones = Some(w);
            chosen = s.clone();
        }
        tones.push((w, s));
    }
    DecodeChoice {
        decode,
        weights,
        tones,
    }
}

/// Best of K chord alternatives per section (issue 55): what a person auditioning K
/// suggestions for each stretch of a song and keeping the best would get.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BestOf {
    /// For K = 1, 2, …: the share of annotated beats whose root the best of the first K
    /// alternatives of their section names (the best chosen per section by the most roots
    /// right), pooled over beats.
    pub root: Vec<f64>,
    /// The same for root and family.
    pub family: Vec<f64>,
    /// Sections, and the mean number of distinct alternatives found for one (at most K).
    pub sections: usize,
    pub found: f64,
}

/// The beat ranges of `song`'s annotated beats cut every `bars` bar lines.
pub fn sections(song: &HarmonySong, bars: usize) -> Vec<Range<usize>> {
    let mut cuts = vec![song.beats.start];
    let mut lines = 0;
    for b in song.beats.clone() {
        if b < song.places.len() && song.places.in_bar[b] == 0 && b > song.beats.start {
            lines += 1;
            if lines % bars.max(1) == 0 {
                cuts.push(b);
            }
        }
    }
    cuts.push(song.beats.end);
    cuts.windows(2)
        .filter(|w| w[1] > w[0])
        .map(|w| w[0]..w[1])
        .collect()
}

/// [`BestOf`] for K up to `draws.count` over sections of `bars` bars, scored against `references`
/// (a progression per song, per beat: POP909's annotations or another set). Each section's
/// alternatives continue from the chord `lane` (one progression per song: the one-guess
/// harmonization) holds on the beat before it.
pub fn best_of(
    songs: &[HarmonySong],
    log_probs: &[Vec<f32>],
    lane: &[Vec<Option<Chord>>],
    references: &[Vec<Option<Chord>>],
    decode: &HarmonyDecode,
    draws: Draws,
    bars: usize,
) -> BestOf {
    let max = draws.count;
    let (mut root, mut family) = (vec![0usize; max], vec![0usize; max]);
    let (mut beats, mut sections_n, mut found) = (0usize, 0usize, 0usize);
    for (i, song) in songs.iter().enumerate() {
        let reference = &references[i];
        for (j, section) in sections(song, bars).into_iter().enumerate() {
            let before = section
                .start
                .checked_sub(1)
                .map(|b| lane[i].get(b).copied().flatten());
            let draws = Draws {
                seed: draws.seed ^ ((i as u64) << 20) ^ ((j as u64) << 8),
                ..draws
            };
            let alts = crate::generate::harmonize::progressions(
                &log_probs[i],
                &song.places,
                decode,
                section.clone(),
                before,
                draws,
            );
            let mut full = vec![None; section.end];
            let rights: Vec<(usize, usize)> = alts
                .iter()
                .map(|(chords, _)| {
                    let n = chords.len().min(section.len());
                    full[section.clone()].fill(None);
                    full[section.start..section.start + n].copy_from_slice(&chords[..n]);
                    let a = Accuracy::of(&full, reference, section.clone());
                    (a.root, a.family)
                })
                .collect();
            let annotated = Accuracy::of(&[], reference, section.clone()).beats;
            beats += annotated;
            sections_n += 1;
            found += alts.len();
            for k in 0..max {
                let upto = &rights[..(k + 1).min(rights.len())];
                root[k] += upto.iter().map(|r| r.0).max().unwrap_or(0);
                family[k] += upto.iter().map(|r| r.1).max().unwrap_or(0);
            }
        }
    }
    let share = |x: Vec<usize>| x.iter().map(|&n| n as f64 / beats.max(1) as f64).collect();
    BestOf {
        root: share(root),
        family: share(family),
        sections: sections_n,
        found: found as f64 / sections_n.max(1) as f64,
    }
}
