//! Making music with a trained model, for the CLI and the page alike (tensors are read
//! asynchronously, nothing native-only).
//!
//! Accompaniment: a song's melody (and bridge) with its chord and phrase labels, given or
//! detected, in one parallel pass of any length; the probabilities become a piano part.
//! Continuation: the prompt's REMI tokens prefill the model, then tokens are sampled one at a
//! time through the recurrent form (constant cost per token, any length), masked by the REMI
//! grammar so what comes out always decodes.

use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Int, Tensor, TensorData};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::model::config::Task;
use crate::model::performer::{Inputs, ModelError, Performer, State};
use crate::music::chords::Chord;
use crate::music::grid::Grid;
use crate::music::labels::{StepLabels, detect_structure};
use crate::music::midi::{Note, Song, Track};
use crate::music::phrases::Segment;
use crate::music::roll::{MultiRoll, PITCHES, PianoRoll, Role};
use crate::music::tokens::{self, Grammar, STEPS_PER_BEAT, Token};
use crate::train::corpus::song_tokens;
use crate::train::data::example;
use crate::train::eval::{Binarize, accompany, binarize};
use crate::train::step::TrainError;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GenerateError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error("{0}")]
    Read(String),
    #[error("this is a {model:?} model; it cannot do {wanted:?}")]
    WrongTask { model: Task, wanted: Task },
    #[error(
        "no melody found: name the melody track MELODY, or give a file whose melody is a mostly \
         one-note-at-a-time track"
    )]
    NoMelody,
    #[error("the prompt holds no notes")]
    EmptyPrompt,
    #[error("the prompt could not be read as tokens: {0}")]
    Tokens(String),
    #[error("{given} chord labels for {bars} bars: give one per bar, or fewer to label the start")]
    TooManyChords { given: usize, bars: usize },
}

impl From<TrainError> for GenerateError {
    fn from(e: TrainError) -> Self {
        match e {
            TrainError::Model(m) => GenerateError::Model(m),
            other => GenerateError::Read(other.to_string()),
        }
    }
}

/// What the accompaniment model reads from a song.
#[derive(Clone, Debug)]
pub struct AccompanimentInput {
    pub grid: Grid,
    pub rolls: MultiRoll,
    pub labels: StepLabels,
    /// Chords per beat and phrases, as used (given or detected).
    pub chords: Vec<Option<Chord>>,
    pub phrases: Vec<Segment>,
    /// The tracks kept in the output (melody and bridge).
    pub kept: Vec<usize>,
}

/// The melody (tracks named MELODY, else the detected melody track), the bridge (tracks named
/// BRIDGE) and the labels of `song`. `chords` (one per bar, from the first bar) and `phrases`
/// replace the detected ones where given.
pub fn accompaniment_input(
    song: &Song,
    chords_per_bar: Option<&[Option<Chord>]>,
    phrases: Option<Vec<Segment>>,
) -> Result<AccompanimentInput, GenerateError> {
    let grid = Grid::for_song(song, STEPS_PER_BEAT);
    if grid.num_steps() == 0 {
        return Err(GenerateError::EmptyPrompt);
    }
    let detected = detect_structure(song, &grid);
    let named = |role: Role| -> Vec<usize> {
        (0..song.tracks.len())
            .filter(|&i| Role::from_track_name(&song.tracks[i].name) == Some(role))
            .collect()
    };
    let mut melody = named(Role::Melody);
    if melody.is_empty() {
        melody.extend(detected.melody_track);
    }
    if melody.is_empty() {
        return Err(GenerateError::NoMelody);
    }
    let bridge = named(Role::Bridge);
    let notes = |ids: &[usize]| -> Vec<Note> {
        ids.iter()
            .flat_map(|&i| song.tracks[i].notes.iter().copied())
            .collect()
    };
    let mut rolls = MultiRoll::new(grid.num_steps());
    rolls.melody = PianoRoll::from_notes(&notes(&melody), &grid);
    rolls.bridge = PianoRoll::from_notes(&notes(&bridge), &grid);
    let mut chords = detected.chords;
    if let Some(given) = chords_per_bar {
        if given.len() > grid.num_bars() {
            return Err(GenerateError::TooManyChords {
                given: given.len(),
                bars: grid.num_bars(),
            });
        }
        for (bar, chord) in given.iter().enumerate() {
            for beat in grid.bar_beats(bar) {
                if let Some(slot) = chords.get_mut(beat) {
                    *slot = *chord;
                }
            }
        }
    }
    let phrases = phrases.unwrap_or(detected.phrases);
    let labels = StepLabels::new(&grid, &rolls.melody, &chords, &phrases);
    let mut kept = melody;
    kept.extend(bridge);
    Ok(AccompanimentInput {
        grid,
        rolls,
        labels,
        chords,
        phrases,
        kept,
    })
}

/// The piano part for `input`, the whole song in one pass.
pub async fn accompany_song(
    model: &Performer,
    input: &AccompanimentInput,
    b: Binarize,
    seed: u64,
    device: &Device,
) -> Result<PianoRoll, GenerateError> {
    if model.config.task != Task::Accompaniment {
        return Err(GenerateError::WrongTask {
            model: model.config.task,
            wanted: Task::Accompaniment,
        });
    }
    let len = input.grid.num_steps();
    let e = example(
        &input.rolls,
        &input.labels,
        model.config.pe.structure_levels(),
        0,
        len,
        0,
    );
    let (onset, sustain) = accompany(model, &e, seed, device).await?;
    Ok(binarize(&onset, &sustain, len, b))
}

/// `song` with its melody and bridge tracks and `piano` as a new track named PIANO.
pub fn with_piano(song: &Song, input: &AccompanimentInput, piano: &PianoRoll) -> Song {
    let mut out = song.clone();
    out.tracks = input.kept.iter().map(|&i| song.tracks[i].clone()).collect();
    out.tracks.push(Track {
        name: Role::Piano.track_name().to_string(),
        instrument: String::new(),
        program: Some(0),
        notes: piano.to_notes(&input.grid, Role::Piano.channel(), 64),
    });
    out
}

/// Of the piano's onsets on beats that have a chord, the share whose pitch class is a chord
/// tone (`None` when there are none): how well an accompaniment follows the chords.
pub fn chord_tone_ratio(
    piano: &PianoRoll,
    chords: &[Option<Chord>],
    steps_per_beat: usize,
) -> Option<f64> {
    let (mut tones, mut all) = (0usize, 0usize);
    for s in 0..piano.num_steps {
        let Some(Some(chord)) = chords.get(s / steps_per_beat.max(1)) else {
            continue;
        };
        for p in 0..PITCHES {
            if piano.onset(s, p) {
                all += 1;
                if chord.pitch_classes().any(|pc| pc as usize == p % 12) {
                    tones += 1;
                }
            }
        }
    }
    (all > 0).then(|| tones as f64 / all as f64)
}

/// How tokens are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampling {
    pub temperature: f32,
    /// Nucleus sampling: draw from the smallest set of tokens holding this much probability.
    pub top_p: f32,
    pub seed: u64,
}

impl Default for Sampling {
    fn default() -> Self {
        Self {
            temperature: 1.0,
            top_p: 0.95,
            seed: 0,
        }
    }
}

/// The REMI tokens of `song` (every pitched track; chords detected), without the final `Eos`.
pub fn prompt_tokens(song: &Song) -> Result<Vec<u32>, GenerateError> {
    let grid = Grid::for_song(song, STEPS_PER_BEAT);
    if song.note_count() == 0 || grid.num_steps() == 0 {
        return Err(GenerateError::EmptyPrompt);
    }
    let chords = detect_structure(song, &grid).chords;
    let mut ids =
        song_tokens(song, &grid, &chords).map_err(|e| GenerateError::Tokens(e.to_string()))?;
    if ids.last() == Some(&Token::Eos.id()) {
        ids.pop();
    }
    Ok(ids)
}

/// Picks a token from `logits` under the grammar's mask, with temperature and top-p.
pub fn sample_token(logits: &[f32], allowed: &[bool], s: Sampling, rng: &mut StdRng) -> u32 {
    let t = s.temperature.max(1e-4);
    let mut cands: Vec<(u32, f32)> = logits
        .iter()
        .enumerate()
        .filter(|(i, _)| allowed.get(*i).copied().unwrap_or(false))
        .map(|(i, &l)| (i as u32, l / t))
        .collect();
    if cands.is_empty() {
        return Token::Eos.id();
    }
    let max = cands.iter().map(|c| c.1).fold(f32::NEG_INFINITY, f32::max);
    for c in cands.iter_mut() {
        c.1 = (c.1 - max).exp();
    }
    cands.sort_by(|a, b| b.1.total_cmp(&a.1));
    let total: f32 = cands.iter().map(|c| c.1).sum();
    let mut kept = 0.0;
    let mut cut = cands.len();
    for (i, c) in cands.iter().enumerate() {
        kept += c.1 / total;
        if kept >= s.top_p {
            cut = i + 1;
            break;
        }
    }
    cands.truncate(cut);
    let mass: f32 = cands.iter().map(|c| c.1).sum();
    let mut x = rng.random::<f32>() * mass;
    for c in &cands {
        x -= c.1;
        if x <= 0.0 {
            return c.0;
        }
    }
    cands[cands.len() - 1].0
}

/// How long a continuation runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Length {
    /// Tokens to add at most.
    pub tokens: usize,
    /// Stop before the bar after this many new bars.
    pub bars: Option<usize>,
    /// Let the model end the piece (`Eos`) before that.
    pub may_end: bool,
}

/// Token-by-token continuation of `prompt` (ids, grammatical) for `length`; the model's noise
/// is drawn once from `sampling.seed`. `on_token` sees each new token (the page streams them).
pub async fn continue_tokens(
    model: &Performer,
    prompt: &[u32],
    length: Length,
    sampling: Sampling,
    device: &Device,
    mut on_token: impl FnMut(u32),
) -> Result<Vec<u32>, GenerateError> {
    if model.config.task != Task::Continuation {
        return Err(GenerateError::WrongTask {
            model: model.config.task,
            wanted: Task::Continuation,
        });
    }
    let mut prompt = prompt.to_vec();
    if prompt.is_empty() {
        prompt.push(Token::Bos.id());
    }
    let mut grammar = Grammar::new();
    for &id in &prompt {
        let token = Token::from_id(id)
            .ok_or_else(|| GenerateError::Tokens(format!("token id {id} is out of range")))?;
        grammar
            .advance(token)
            .map_err(|e| GenerateError::Tokens(e.to_string()))?;
    }
    let mut state = model.start(sampling.seed, false, device);
    let mut logits = prefill(model, &mut state, &prompt, device).await?;
    let mut rng = StdRng::seed_from_u64(sampling.seed ^ 0x5A17);
    let mut out = Vec::new();
    let mut new_bars = 0;
    while out.len() < length.tokens {
        let mut allowed = grammar.allowed();
        allowed[Token::Pad.id() as usize] = false;
        allowed[Token::Bos.id() as usize] = false;
        allowed[Token::Eos.id() as usize] &= length.may_end;
        let id = sample_token(&logits, &allowed, sampling, &mut rng);
        let token = Token::from_id(id).unwrap_or(Token::Eos);
        if token == Token::Bar {
            new_bars += 1;
            if length.bars.is_some_and(|b| new_bars > b) {
                break;
            }
        }
        grammar
            .advance(token)
            .map_err(|e| GenerateError::Tokens(e.to_string()))?;
        out.push(id);
        on_token(id);
        if token == Token::Eos {
            break;
        }
        logits = step_logits(model, &mut state, &[id], device).await?;
    }
    Ok(out)
}

/// Runs `ids` through the model in chunks and returns the last position's logits.
async fn prefill(
    model: &Performer,
    state: &mut State,
    ids: &[u32],
    device: &Device,
) -> Result<Vec<f32>, GenerateError> {
    let mut last = Vec::new();
    for chunk in ids.chunks(512) {
        last = step_logits(model, state, chunk, device).await?;
    }
    Ok(last)
}

async fn step_logits(
    model: &Performer,
    state: &mut State,
    ids: &[u32],
    device: &Device,
) -> Result<Vec<f32>, GenerateError> {
    let len = ids.len();
    let data: Vec<i64> = ids.iter().map(|&t| t as i64).collect();
    let input = Tensor::<2, Int>::from_data(TensorData::new(data, vec![1, len]), device);
    let logits = model.forward(Inputs::Tokens(input), None, state, None)?;
    let last = log_softmax(logits.narrow(1, len - 1, 1), 2);
    last.into_data_async()
        .await
        .map_err(|e| GenerateError::Read(format!("{e:?}")))?
        .convert::<f32>()
        .try_into_vec::<f32>()
        .map_err(|e| GenerateError::Read(format!("{e:?}")))
}

/// A song from token ids (prompt and continuation together), one piano track.
pub fn song_from_tokens(ids: &[u32]) -> Result<Song, GenerateError> {
    let tokens: Vec<Token> = ids.iter().filter_map(|&id| Token::from_id(id)).collect();
    let decoded =
        tokens::decode(&tokens, 480, 0).map_err(|e| GenerateError::Tokens(e.to_string()))?;
    Ok(Song {
        ppq: 480,
        tempos: decoded.tempos,
        time_signatures: decoded.time_signatures,
        key_signatures: Vec::new(),
        tracks: vec![Track {
            name: Role::Piano.track_name().to_string(),
            instrument: String::new(),
            program: Some(0),
            notes: decoded.notes,
        }],
    })
}
