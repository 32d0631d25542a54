//! Chords for a piece's melody, for the page: the harmonizer reads the melody and bridge
//! tracks and the phrase lane, and writes chord cells for a range of bars (the whole piece when
//! a file without an accompaniment is opened; the selected bars for "Suggest chords"), going on
//! from the chord the lane holds before the range.

use serde::{Deserialize, Serialize};

use super::Progress;
use super::family::{Generated, Run, Studio, Written};
use crate::generate::GenerateError;
use crate::generate::harmonize::{
    ALTERNATIVES_TEMPERATURE, COLOURFUL_TEMPERATURE, Choice, chord_log_probs, progression,
    progressions,
};
use crate::generate::piece_input;
use crate::model::config::Task;
use crate::model::performer::Performer;
use crate::music::harmony::BeatPlaces;
use crate::music::harmony::decode::{Draws, HarmonyDecode};
use crate::music::piece::{Piece, PieceTrack, TrackRole, chord_cell};

/// What to harmonize and how.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HarmonizeOptions {
    /// Bars `from .. to` (0-based, `to` excluded); `None`: every bar of the music.
    pub bars: Option<[usize; 2]>,
    /// `None`: the most likely progression. `Some(seed)`: one drawn with that seed (another
    /// seed, another alternative) at the `colour` asked. With `count`, the seed of the
    /// alternatives' draws.
    pub seed: Option<u64>,
    /// How colourful a drawn progression is, 0 to 1: 0 plain (the most likely progression
    /// whatever the seed), 1 (the default) as varied as songwriters' chords (drawn at
    /// [`COLOURFUL_TEMPERATURE`]), between them drawn at that share of it.
    pub colour: Option<f32>,
    /// `Some(K)`: K alternatives to audition (1 to [`MAX_ALTERNATIVES`]), the most likely
    /// first, then those that most add to the chance that one is right
    /// ([`crate::generate::harmonize::progressions`]); `cells` is the first's.
    pub count: Option<usize>,
}

/// The harmonization task: chord cells for the chord lane from a piece's melody (the page's
/// "Suggest chords", and the lane of a melody-only file).
pub struct Harmonize;

impl Studio for Harmonize {
    const MODEL: Task = Task::Harmonization;
    type Options = HarmonizeOptions;
    type Cache = HarmonyCache;
    const SETTINGS: &'static str = "the chord settings";
    const VERB: &'static str = "harmonize";

    async fn generate<F, Fut>(
        run: &Run<'_>,
        piece: &Piece,
        options: &HarmonizeOptions,
        cache: &mut HarmonyCache,
        _on_progress: F,
    ) -> Result<Generated, GenerateError>
    where
        F: FnMut(Progress) -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let decode = run.defaults.harmony();
        let chords = harmonize_piece(run.model, &decode, piece, options, cache).await?;
        Ok(Generated::Chords(chords))
    }

    fn describe(_before: &Piece, _written: &Written, _options: &HarmonizeOptions) -> String {
        "chord cells for the chord lane".into()
    }
}

/// The most alternatives one call gives.
pub const MAX_ALTERNATIVES: usize = 8;

/// The harmonizer's chord cells for the bars asked for, and the first of them; with a count,
/// the alternatives.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Harmonized {
    pub from: usize,
    pub cells: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<ChordAlternative>,
}

/// One alternative progression: its cells, its log-probability under the decode, and its
/// chords as block chords to audition with the melody (`[pitch, start tick, end tick,
/// velocity]`, as the piece's notes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChordAlternative {
    pub cells: Vec<String>,
    pub log_prob: f32,
    pub voicing: Vec<(u8, u64, u64, u8)>,
}

/// The velocity of an audition's block chords (below a melody's usual loudness).
const VOICING_VELOCITY: u8 = 64;

/// `chords` (one per beat from `start`) as block chords on `grid`'s beats: each run of one
/// chord held as its tones, the root from C3 up and the others above it.
fn voicing(
    grid: &crate::music::grid::Grid,
    start: usize,
    chords: &[Option<crate::music::chords::Chord>],
) -> Vec<(u8, u64, u64, u8)> {
    let tick = |b: usize| {
        let t = &grid.beat_ticks;
        t.get(b).or(t.last()).copied().unwrap_or(0)
    };
    let mut out = Vec::new();
    let mut k = 0;
    while k < chords.len() {
        let mut end = k + 1;
        while end < chords.len() && chords[end] == chords[k] {
            end += 1;
        }
        if let Some(chord) = chords[k] {
            let root = 48 + chord.root;
            for pc in chord.pitch_classes() {
                let pitch = root + (pc + 12 - chord.root) % 12;
                out.push((pitch, tick(start + k), tick(start + end), VOICING_VELOCITY));
            }
        }
        k = end;
    }
    out
}

/// Whether a piece's notes carry no harmony: no track the models read as an accompaniment
/// (piano or generated) holds notes, so the chord lane comes from the harmonizer.
pub fn needs_harmonizer(piece: &Piece) -> bool {
    let has = |role: TrackRole| {
        piece
            .tracks
            .iter()
            .any(|t| t.role == role && !t.notes.is_empty())
    };
    has(TrackRole::Melody) && !has(TrackRole::Piano) && !has(TrackRole::Generated)
}

/// The harmonizer's chord probabilities for the last melody it read, kept so that another
/// "Suggest chords" on the same melody (another range of bars, another alternative) only
/// decodes. They depend on the melody and bridge notes, the bars and the phrase lane, never on
/// the chord lane.
#[derive(Clone, Debug, Default)]
pub struct HarmonyCache {
    key: Option<u64>,
    log_probs: Vec<f32>,
}

impl HarmonyCache {
    /// What the probabilities of `piece` depend on, hashed.
    fn key(piece: &Piece) -> u64 {
        use std::hash::{Hash, Hasher};
        let read: Vec<&PieceTrack> = piece
            .tracks
            .iter()
            .filter(|t| matches!(t.role, TrackRole::Melody | TrackRole::Bridge))
            .collect();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (
            piece.ppq,
            &piece.time_signatures,
            &piece.bars,
            &piece.phrases,
        )
            .hash(&mut h);
        for t in read {
            (t.role == TrackRole::Melody, &t.notes).hash(&mut h);
        }
        h.finish()
    }
}

/// Chord cells for `options.bars` of `piece` from the harmonizer `model` (decoded with
/// `decode`). `cache` keeps the model's probabilities between calls on the same melody (pass
/// a fresh one, or one kept for this model only).
pub async fn harmonize_piece(
    model: &Performer,
    decode: &HarmonyDecode,
    piece: &Piece,
    options: &HarmonizeOptions,
    cache: &mut HarmonyCache,
) -> Result<Harmonized, GenerateError> {
    piece.validate()?;
    decode.check().map_err(GenerateError::Read)?;
    if !piece
        .tracks
        .iter()
        .any(|t| t.role == TrackRole::Melody && !t.notes.is_empty())
    {
        return Err(GenerateError::NoMelodyTrack);
    }
    let grid = piece.grid(|t| matches!(t.role, TrackRole::Melody | TrackRole::Bridge));
    let bars = grid.num_bars();
    let [from, to] = options.bars.unwrap_or([0, bars]);
    if from >= to || from >= bars {
        return Err(GenerateError::Read(format!(
            "no bars of the melody to harmonize there (it has {bars})"
        )));
    }
    let to = to.min(bars);
    if let Some(c) = options.colour
        && !(0.0..=1.0).contains(&c)
    {
        return Err(GenerateError::Read(format!(
            "the chord colour is from 0 (plain) to 1 (colourful), not {c}"
        )));
    }
    if let Some(k) = options.count
        && !(1..=MAX_ALTERNATIVES).contains(&k)
    {
        return Err(GenerateError::Read(format!(
            "ask for 1 to {MAX_ALTERNATIVES} chord alternatives, not {k}"
        )));
    }
    let input = piece_input(piece, grid.clone(), true)?;
    // One draw of the model's noise for every call: alternatives differ by the sampling.
    let key = HarmonyCache::key(piece);
    if cache.key != Some(key) {
        cache.log_probs = chord_log_probs(
            model,
            &input.sheet.rolls.melody,
            &input.sheet.rolls.bridge,
            &input.sheet.labels,
            0,
        )
        .await?;
        cache.key = Some(key);
    }
    let lp = &cache.log_probs;
    let places = BeatPlaces::from_labels(&input.sheet.labels);
    let beats = grid.bar_beats(from).start..grid.bar_beats(to - 1).end;
    let before = (beats.start > 0).then(|| input.chords.get(beats.start - 1).copied().flatten());
    let cells_of = |chords: &[Option<crate::music::chords::Chord>]| -> Vec<String> {
        (from..to)
            .map(|bar| {
                let b = grid.bar_beats(bar);
                chord_cell(&chords[b.start - beats.start..b.end - beats.start])
            })
            .collect()
    };
    if let Some(count) = options.count {
        let found = if model.config.is_causal() {
            // Decided beat by beat from the past: one progression, no alternatives.
            let chords = progression(lp, &places, decode, beats.clone(), before, Choice::Causal);
            vec![(chords, 0.0)]
        } else {
            let draws = Draws {
                count,
                temperature: decode.alternatives.unwrap_or(ALTERNATIVES_TEMPERATURE),
                seed: options.seed.unwrap_or(0),
            };
            progressions(lp, &places, decode, beats.clone(), before, draws)
        };
        let alternatives: Vec<ChordAlternative> = found
            .iter()
            .map(|(chords, log_prob)| ChordAlternative {
                cells: cells_of(chords),
                log_prob: *log_prob,
                voicing: voicing(&grid, beats.start, chords),
            })
            .collect();
        return Ok(Harmonized {
            from,
            cells: alternatives[0].cells.clone(),
            alternatives,
        });
    }
    let colour = options.colour.unwrap_or(1.0);
    let choice = match options.seed {
        Some(seed) if colour > 0.0 => Choice::Drawn {
            seed,
            temperature: colour * decode.colourful.unwrap_or(COLOURFUL_TEMPERATURE),
        },
        _ => Choice::Best,
    }
    .for_model(model);
    let chords = progression(lp, &places, decode, beats.clone(), before, choice);
    Ok(Harmonized {
        from,
        cells: cells_of(&chords),
        alternatives: Vec::new(),
    })
}
