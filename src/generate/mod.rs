//! Making music with a trained model, for the CLI and the page alike (tensors are read
//! asynchronously, nothing native-only).
//!
//! Accompaniment: a song's melody (and bridge) with its chord and phrase labels, given or
//! detected. Models that read the piano they wrote go a step at a time (`piano.rs`); the
//! paper's setting computes every step in one parallel pass of any length and thresholds the
//! probabilities into a piano part.
//! Continuation: the prompt's REMI tokens prefill the model, then tokens are sampled one at a
//! time through the recurrent form (constant cost per token, any length), masked by the REMI
//! grammar so what comes out always decodes.

use burn::tensor::activation::{log_softmax, sigmoid};
use burn::tensor::{Device, Int, Tensor, TensorData};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::model::config::Task;
use crate::model::performer::{Inputs, ModelError, Performer, State, StepInput};
use crate::music::chords::Chord;
use crate::music::grid::Grid;
use crate::music::labels::{StepLabels, detect_structure};
use crate::music::midi::{Note, Song, Track};
use crate::music::phrases::Segment;
use crate::music::roll::{MultiRoll, PITCHES, PianoRoll, Role};
use crate::music::tokens::{self, Grammar, STEPS_PER_BEAT, Token};
use crate::train::corpus::{WindowSpec, song_tokens};
use crate::train::data::{Example, example};
use crate::train::eval::{Binarize, binarize};

pub mod piano;
use crate::train::step::{TrainError, read_vec, stack};
pub use piano::{PianoSampling, accompany_steps, splice};

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
    #[error("generation was cancelled")]
    Cancelled,
    #[error(
        "layer {layer}, head {head} does not exist in this model ({layers} layers, {heads} heads)"
    )]
    NoSuchHead {
        layer: usize,
        head: usize,
        layers: usize,
        heads: usize,
    },
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
/// BRIDGE) and the labels of `song`. `bar_chords` (per bar from the first bar: one chord, or
/// several that share the bar's beats evenly, as the page's chord lane writes `C G`) and
/// `phrases` replace the detected ones where given.
pub fn accompaniment_input(
    song: &Song,
    bar_chords: Option<&[Vec<Option<Chord>>]>,
    phrases: Option<Vec<Segment>>,
) -> Result<AccompanimentInput, GenerateError> {
    song_input(song, bar_chords, phrases, true)
}

/// As [`accompaniment_input`]; without `need_melody`, a song with no melody track (a piano
/// piece to continue) gets an empty melody roll instead of an error.
pub fn song_input(
    song: &Song,
    bar_chords: Option<&[Vec<Option<Chord>>]>,
    phrases: Option<Vec<Segment>>,
    need_melody: bool,
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
    if melody.is_empty() && need_melody {
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
    if let Some(given) = bar_chords {
        if given.len() > grid.num_bars() {
            return Err(GenerateError::TooManyChords {
                given: given.len(),
                bars: grid.num_bars(),
            });
        }
        for (bar, cell) in given.iter().enumerate() {
            for (beat, chord) in grid
                .bar_beats(bar)
                .zip(spread(cell, grid.bar_beats(bar).len()))
            {
                if let Some(slot) = chords.get_mut(beat) {
                    *slot = chord;
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

/// The chords of one bar cell over its `beats`: `n` chords take `beats / n` beats each (the
/// last one what is left); an empty cell is "no chord".
pub fn spread(cell: &[Option<Chord>], beats: usize) -> Vec<Option<Chord>> {
    if cell.is_empty() {
        return vec![None; beats];
    }
    let each = (beats / cell.len()).max(1);
    (0..beats)
        .map(|b| cell[(b / each).min(cell.len() - 1)])
        .collect()
}

/// The piano part for `input`: step by step with `sampling` for a model that reads the piano
/// it wrote, else the whole song in one pass thresholded by `b` (noise seeded by
/// `sampling.seed` either way).
pub async fn accompany_song(
    model: &Performer,
    input: &AccompanimentInput,
    b: Binarize,
    sampling: PianoSampling,
    device: &Device,
) -> Result<PianoRoll, GenerateError> {
    let len = input.grid.num_steps();
    let e = input_example(model, input);
    if model.config.is_autoregressive() {
        let done = |_: piano::PianoProgress<'_>| async { true };
        return accompany_steps(model, &e, None, 0..len, sampling, len, None, device, done).await;
    }
    let (onset, sustain) =
        accompany_probs(model, &e, sampling.seed, len, None, device, |_| async {
            true
        })
        .await?;
    Ok(binarize(&onset, &sustain, len, b))
}

/// The model's input for the whole of `input`.
pub fn input_example(model: &Performer, input: &AccompanimentInput) -> Example {
    let spec = WindowSpec::for_model(&model.config, input.grid.num_steps());
    example(&input.rolls, &input.labels, &spec, 0, 0)
}

/// Which attention to watch while generating: one layer and head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Watch {
    pub layer: usize,
    pub head: usize,
}

impl Watch {
    fn check(self, model: &Performer) -> Result<(), GenerateError> {
        let c = &model.config;
        if self.layer >= c.layers || self.head >= c.heads {
            return Err(GenerateError::NoSuchHead {
                layer: self.layer,
                head: self.head,
                layers: c.layers,
                heads: c.heads,
            });
        }
        Ok(())
    }
}

/// Attention rows of the watched head: queries `start .. start + rows`, each over `keys`
/// keys (`values` is rows × keys, zero past each query's own position).
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionRows {
    pub start: usize,
    pub keys: usize,
    pub values: Vec<f32>,
}

/// Reads the watched head's rows from a state that captured them.
async fn watched_rows(
    state: &State,
    watch: Option<Watch>,
    start: usize,
) -> Result<Option<AttentionRows>, GenerateError> {
    let Some(w) = watch else { return Ok(None) };
    let Some(Some(rows)) = state.rows.get(w.layer) else {
        return Ok(None);
    };
    let [_, _, _, keys] = rows.dims();
    let values = read_f32(rows.clone().narrow(0, 0, 1).narrow(1, w.head, 1)).await?;
    Ok(Some(AttentionRows {
        start,
        keys,
        values,
    }))
}

async fn read_f32<const D: usize>(t: Tensor<D>) -> Result<Vec<f32>, GenerateError> {
    Ok(read_vec(t).await?)
}

/// How far an accompaniment has come: probabilities for steps `0 .. done` (onset and sustain,
/// `done × 128` each), and the watched attention rows of the chunk just computed.
pub struct AccompanimentProgress<'a> {
    pub done: usize,
    pub total: usize,
    pub onset: &'a [f32],
    pub sustain: &'a [f32],
    pub attention: Option<AttentionRows>,
}

/// Onset and sustain probabilities `[len, 128]` for example `e`, computed `chunk` steps at a time
/// (each chunk continues the previous one's attention state, so the result is the one-pass
/// result). `on_chunk` sees every chunk and returns whether to go on: the page streams notes
/// and attention from it and cancels through it.
pub async fn accompany_probs<F, Fut>(
    model: &Performer,
    e: &Example,
    seed: u64,
    chunk: usize,
    watch: Option<Watch>,
    device: &Device,
    mut on_chunk: F,
) -> Result<(Vec<f32>, Vec<f32>), GenerateError>
where
    F: FnMut(AccompanimentProgress<'_>) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    if model.config.task != Task::Accompaniment {
        return Err(GenerateError::WrongTask {
            model: model.config.task,
            wanted: Task::Accompaniment,
        });
    }
    if let Some(w) = watch {
        w.check(model)?;
    }
    let len = e.len;
    let (inputs, _, coords) = stack(std::slice::from_ref(e), device);
    let coords = coords.filter(|_| model.config.pe.is_structural());
    let mut state = model.start(seed, watch.is_some(), device);
    state.capture_layer = watch.map(|w| w.layer);
    let (mut onset, mut sustain) = (Vec::with_capacity(len * PITCHES), Vec::new());
    sustain.reserve(len * PITCHES);
    let chunk = chunk.max(1);
    let mut start = 0;
    while start < len {
        let n = chunk.min(len - start);
        let logits = model.forward(
            Inputs::Rolls(inputs.clone().narrow(1, start, n)),
            coords.clone().map(|c| c.narrow(1, start, n)),
            &mut state,
            None,
        )?;
        let probs = read_f32(sigmoid(logits)).await?;
        for row in probs.chunks(2 * PITCHES) {
            onset.extend_from_slice(&row[..PITCHES]);
            sustain.extend_from_slice(&row[PITCHES..]);
        }
        let attention = watched_rows(&state, watch, start).await?;
        start += n;
        let go_on = on_chunk(AccompanimentProgress {
            done: start,
            total: len,
            onset: &onset,
            sustain: &sustain,
            attention,
        })
        .await;
        if !go_on {
            return Err(GenerateError::Cancelled);
        }
    }
    Ok((onset, sustain))
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

pub use crate::music::playing::chord_tone_ratio;

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
    /// The most tokens the model reads at once (`None`: all of them). When its context would
    /// pass this, it starts again from the music's first bars and its last ones
    /// ([`View::of`]): a model trained on windows of N tokens then never reads past N, at the
    /// price of one prefill every N/4 or so new tokens. What it forgets is the music between.
    pub context: Option<usize>,
}

impl Length {
    /// `tokens` new tokens, no bar limit, no end, every token read.
    pub fn tokens(tokens: usize) -> Self {
        Self {
            tokens,
            bars: None,
            may_end: false,
            context: None,
        }
    }
}

/// What a model reads of a longer sequence: its first `anchor` tokens, then (after `gap`
/// skipped ones) its end. Both parts meet at a bar line. Like a training window, the end part
/// starts at a bar line without restating the meter or tempo in force there (the sampler's
/// grammar follows the whole sequence).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    pub ids: Vec<u32>,
    pub anchor: usize,
    pub gap: usize,
}

impl View {
    /// The whole of `ids`.
    pub fn all(ids: &[u32]) -> Self {
        Self {
            ids: ids.to_vec(),
            anchor: ids.len(),
            gap: 0,
        }
    }

    /// The view of `ids` for a model that reads `context` tokens at most: the whole bars within
    /// its first `context / 4` tokens (the prompt's start: its meter, tempo and key, which the
    /// model would otherwise lose; only `Bos` when the first bar is longer), then the music
    /// from the first bar line among its last `context / 2`. Everything when that leaves
    /// nothing out.
    pub fn of(ids: &[u32], context: usize) -> Self {
        let bar = Token::Bar.id();
        let from = ids.len().saturating_sub(context / 2);
        let Some(recent) = ids[from..]
            .iter()
            .position(|&id| id == bar)
            .map(|i| from + i)
        else {
            return Self::all(ids);
        };
        let anchor = ids[..(context / 4).min(recent) + 1]
            .iter()
            .rposition(|&id| id == bar)
            .unwrap_or(0);
        if anchor >= recent {
            return Self::all(ids);
        }
        let mut view = ids[..anchor].to_vec();
        view.extend_from_slice(&ids[recent..]);
        Self {
            ids: view,
            anchor,
            gap: recent - anchor,
        }
    }

    /// Attention rows over the view's positions, placed over the whole sequence: zeros for
    /// the keys in the gap. Rows of queries in the anchor are left out when the block
    /// reaches past it (a block is one run of positions).
    fn place(&self, rows: Option<AttentionRows>) -> Option<AttentionRows> {
        let rows = rows?;
        if self.gap == 0 || rows.keys == 0 {
            return Some(rows);
        }
        let count = rows.values.len() / rows.keys;
        let skip = self.anchor.saturating_sub(rows.start).min(count);
        if skip == count {
            return Some(rows);
        }
        let keys = rows.keys + self.gap;
        let mut values = Vec::with_capacity((count - skip) * keys);
        for row in rows.values.chunks(rows.keys).skip(skip) {
            values.extend_from_slice(&row[..self.anchor.min(rows.keys)]);
            values.extend(std::iter::repeat_n(0.0, self.gap));
            values.extend_from_slice(&row[self.anchor.min(rows.keys)..]);
        }
        Some(AttentionRows {
            start: rows.start + skip + self.gap,
            keys,
            values,
        })
    }
}

/// What a continuation reports: the prompt's attention once prefilled (`token` is `None`),
/// then every new token with its attention row.
pub struct TokenProgress {
    pub token: Option<u32>,
    /// Tokens added so far.
    pub added: usize,
    pub attention: Option<AttentionRows>,
    /// The probability the model put on tokens the grammar forbids when this token was drawn
    /// (the mask takes it away; 0 for the prompt).
    pub forbidden: f32,
}

/// Token-by-token continuation of `prompt` (ids, grammatical) for `length`, in the meter in
/// force at its end; the model's noise is drawn once from `sampling.seed`. `plan[k]`, where given, is the chord that new bar `k`
/// starts with (forced as `Position 0, Chord`, so the labels a user planned past the prompt
/// steer what is written). `on_token` sees the prompt's attention, then each new token, and
/// returns whether to go on (the page streams notes from it and cancels through it).
#[allow(clippy::too_many_arguments)]
pub async fn continue_tokens<F, Fut>(
    model: &Performer,
    prompt: &[u32],
    length: Length,
    sampling: Sampling,
    plan: &[Option<Chord>],
    watch: Option<Watch>,
    device: &Device,
    mut on_token: F,
) -> Result<Vec<u32>, GenerateError>
where
    F: FnMut(TokenProgress) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    if model.config.task != Task::Continuation {
        return Err(GenerateError::WrongTask {
            model: model.config.task,
            wanted: Task::Continuation,
        });
    }
    if let Some(w) = watch {
        w.check(model)?;
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
    // What the model reads (`view`) may leave out part of the music (`history`): see
    // `Length::context`.
    let context = length.context.map(|c| c.max(32));
    let stepping = model.stepping(device).await?;
    let start = |device: &Device| {
        let mut state = model
            .start(sampling.seed, watch.is_some(), device)
            .stepping(&stepping);
        state.capture_layer = watch.map(|w| w.layer);
        state
    };
    let mut history = prompt.clone();
    let mut view = match context {
        Some(c) if prompt.len() > c => View::of(&prompt, c),
        _ => View::all(&prompt),
    };
    let mut state = start(device);
    let mut logits = prefill(model, &mut state, &view, watch, device, &mut on_token).await?;
    // The state after the view's anchor (the music's first bars), with the anchor's tokens.
    let mut anchored: Option<(Vec<u32>, State)> = None;
    let mut rng = StdRng::seed_from_u64(sampling.seed ^ 0x5A17);
    let mut out = Vec::new();
    let mut new_bars = 0;
    let mut forced: std::collections::VecDeque<Token> = Default::default();
    while out.len() < length.tokens {
        let mut allowed = grammar.allowed();
        let forbidden: f32 = logits
            .iter()
            .zip(&allowed)
            .filter(|(_, ok)| !**ok)
            .map(|(l, _)| l.exp())
            .sum();
        allowed[Token::Pad.id() as usize] = false;
        allowed[Token::Bos.id() as usize] = false;
        allowed[Token::Eos.id() as usize] &= length.may_end;
        // New bars keep the meter in force: the piece's bars (planned ones included) are laid
        // out with it.
        for beats in 1..=tokens::MAX_BAR_BEATS {
            allowed[Token::Meter(beats as u8).id() as usize] = false;
        }
        let id = match forced.pop_front() {
            Some(t) if allowed[t.id() as usize] => t.id(),
            _ => {
                forced.clear();
                sample_token(&logits, &allowed, sampling, &mut rng)
            }
        };
        let token = Token::from_id(id).unwrap_or(Token::Eos);
        if token == Token::Bar {
            new_bars += 1;
            if length.bars.is_some_and(|b| new_bars > b) {
                break;
            }
            if let Some(Some(chord)) = plan.get(new_bars - 1) {
                forced.extend([Token::Position(0), Token::Chord(Some(*chord))]);
            }
        }
        grammar
            .advance(token)
            .map_err(|e| GenerateError::Tokens(e.to_string()))?;
        out.push(id);
        if token == Token::Eos {
            on_token(TokenProgress {
                token: Some(id),
                added: out.len(),
                attention: None,
                forbidden,
            })
            .await;
            break;
        }
        history.push(id);
        let position = state.position;
        // Starting again: only when bar lines leave something out.
        let again = context
            .filter(|&c| position >= c)
            .map(|c| View::of(&history, c))
            .filter(|v| v.gap > 0);
        let attention = match again {
            Some(next) => {
                view = next;
                (state, logits) = restart(model, &view, &mut anchored, &start, device).await?;
                None
            }
            None => {
                logits = step_logits(model, &mut state, &[id], device).await?;
                view.place(watched_rows(&state, watch, position).await?)
            }
        };
        let go_on = on_token(TokenProgress {
            token: Some(id),
            added: out.len(),
            attention,
            forbidden,
        })
        .await;
        if !go_on {
            return Err(GenerateError::Cancelled);
        }
    }
    Ok(out)
}

/// The last `max_tokens` of `prompt` (ids from [`prompt_tokens`]) cut at a bar line so they
/// stay grammatical, with the bar length in force there restated, and the index of the first
/// bar kept (the tempo falls back to 120 bpm until the next tempo token).
pub fn cut_prompt(prompt: &[u32], max_tokens: usize) -> (Vec<u32>, usize) {
    if prompt.len() <= max_tokens {
        return (prompt.to_vec(), 0);
    }
    let bar = Token::Bar.id();
    let cut = prompt.len().saturating_sub(max_tokens);
    let start = (cut..prompt.len())
        .find(|&i| prompt[i] == bar)
        .unwrap_or(prompt.len());
    let bars_before = prompt[..start].iter().filter(|&&id| id == bar).count();
    let mut kept = vec![Token::Bos.id()];
    kept.extend_from_slice(&prompt[start..]);
    let meter = prompt[..start]
        .iter()
        .rev()
        .find_map(|&id| match Token::from_id(id) {
            Some(Token::Meter(m)) => Some(m),
            _ => None,
        });
    let restated = kept
        .get(2)
        .is_some_and(|&id| matches!(Token::from_id(id), Some(Token::Meter(_))));
    if let Some(m) = meter
        && m as usize != tokens::DEFAULT_BAR_BEATS
        && kept.len() > 1
        && !restated
    {
        kept.insert(2, Token::Meter(m).id());
    }
    (kept, bars_before)
}

/// Runs `view` through the model in chunks and returns the last position's logits; attention
/// rows are reported placed over the whole sequence.
async fn prefill<F, Fut>(
    model: &Performer,
    state: &mut State,
    view: &View,
    watch: Option<Watch>,
    device: &Device,
    on_token: &mut F,
) -> Result<Vec<f32>, GenerateError>
where
    F: FnMut(TokenProgress) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut last = Vec::new();
    for chunk in view.ids.chunks(512) {
        let position = state.position;
        last = step_logits(model, state, chunk, device).await?;
        let attention = view.place(watched_rows(state, watch, position).await?);
        let go_on = on_token(TokenProgress {
            token: None,
            added: 0,
            attention,
            forbidden: 0.0,
        })
        .await;
        if !go_on {
            return Err(GenerateError::Cancelled);
        }
    }
    Ok(last)
}

/// A fresh state (from `start`) that has read `view`, and its last logits. The anchor is the
/// same tokens at the same positions at every restart, so the state after it is too: it is
/// read once, kept in `anchored` with its tokens, and copied at the next restarts.
async fn restart(
    model: &Performer,
    view: &View,
    anchored: &mut Option<(Vec<u32>, State)>,
    start: &impl Fn(&Device) -> State,
    device: &Device,
) -> Result<(State, Vec<f32>), GenerateError> {
    let anchor = &view.ids[..view.anchor];
    let mut state = match anchored.as_ref() {
        Some((ids, after)) if ids == anchor => after.clone(),
        _ => {
            let mut after = start(device);
            quiet_prefill(model, &mut after, anchor, device).await?;
            *anchored = Some((anchor.to_vec(), after.clone()));
            after
        }
    };
    let logits = quiet_prefill(model, &mut state, &view.ids[view.anchor..], device).await?;
    Ok((state, logits))
}

/// Runs `ids` through the model in chunks, reporting nothing, and returns the last position's
/// logits (none for no ids).
async fn quiet_prefill(
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
    if let [id] = ids {
        let logits = model
            .step(StepInput::Token(*id), None, state, device)
            .await?;
        return Ok(log_softmax_values(&logits));
    }
    let data: Vec<i64> = ids.iter().map(|&t| t as i64).collect();
    let input = Tensor::<2, Int>::from_data(TensorData::new(data, vec![1, len]), device);
    let logits = model.forward(Inputs::Tokens(input), None, state, None)?;
    read_f32(log_softmax(logits.narrow(1, len - 1, 1), 2)).await
}

/// `log_softmax` of plain logits.
pub fn log_softmax_values(logits: &[f32]) -> Vec<f32> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let log_total = logits.iter().map(|l| (l - max).exp()).sum::<f32>().ln() + max;
    logits.iter().map(|l| l - log_total).collect()
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

// Native only: the browser tests build the library's tests for wasm, without pollster.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::model::config::PerformerConfig;
    use crate::model::pe::{PeConfig, PeKind};
    use Token as T;

    /// `Bos`, then `bars` bars of `per_bar` notes each (4 tokens a note plus `Bar`).
    fn bars(bars: usize, per_bar: usize) -> Vec<u32> {
        let mut ids = vec![T::Bos.id()];
        for b in 0..bars {
            ids.push(T::Bar.id());
            for k in 0..per_bar {
                ids.extend([
                    T::Position(k as u8).id(),
                    T::Pitch(60 + (b % 12) as u8).id(),
                    T::Velocity(4).id(),
                    T::Duration(1).id(),
                ]);
            }
        }
        ids
    }

    #[test]
    fn a_view_keeps_the_first_bars_and_the_last_ones_from_bar_lines() {
        let ids = bars(40, 3); // 13 tokens a bar
        let view = View::of(&ids, 128);
        // The anchor: the whole bars within the first 32 tokens (Bos and two bars).
        assert_eq!(view.anchor, 27);
        assert_eq!(view.ids[..view.anchor], ids[..27]);
        // The end: from the first bar line among the last 64 tokens.
        let recent = view.anchor + view.gap;
        assert_eq!(ids[recent], T::Bar.id());
        assert!(ids.len() - recent <= 64 && ids.len() - recent > 64 - 13);
        assert_eq!(view.ids[view.anchor..], ids[recent..]);
        assert!(view.ids.len() <= 128 / 4 + 128 / 2 + 1);
        // Short music: all of it.
        assert_eq!(View::of(&ids[..60], 128), View::all(&ids[..60]));
        // No bar line among the last tokens: all of it, whatever the length.
        let mut long_bar = vec![T::Bos.id(), T::Bar.id()];
        long_bar.extend(std::iter::repeat_n(T::Position(0).id(), 300));
        assert_eq!(View::of(&long_bar, 128).gap, 0);
    }

    #[test]
    fn attention_rows_of_a_view_are_placed_over_the_whole_sequence() {
        let view = View {
            ids: vec![],
            anchor: 2,
            gap: 3,
        };
        // Two rows (view queries 3 and 4) over 5 keys: keys 0–1 stay, then 3 zeros, then 2–4.
        let rows = AttentionRows {
            start: 3,
            keys: 5,
            values: (0..10).map(|v| v as f32).collect(),
        };
        let placed = view.place(Some(rows)).unwrap();
        assert_eq!(placed.start, 6);
        assert_eq!(placed.keys, 8);
        assert_eq!(
            placed.values,
            [
                0., 1., 0., 0., 0., 2., 3., 4., 5., 6., 0., 0., 0., 7., 8., 9.
            ]
        );
        // A block that starts in the anchor: its rows there are left out.
        let rows = AttentionRows {
            start: 1,
            keys: 3,
            values: (0..6).map(|v| v as f32).collect(),
        };
        let placed = view.place(Some(rows)).unwrap();
        assert_eq!((placed.start, placed.keys), (5, 6));
        assert_eq!(placed.values, [3., 4., 0., 0., 0., 5.]);
        assert_eq!(View::all(&[1, 2]).place(None), None);
    }

    /// With a context, the model starts again (its positions never pass the context), the
    /// grammar still holds, and the watched rows stay placed in order over the whole music.
    #[test]
    fn a_continuation_with_a_context_never_reads_past_it() {
        let device = Device::flex();
        let config = PerformerConfig::tiny(
            Task::Continuation,
            tokens::VOCAB_SIZE,
            PeConfig::new(PeKind::SineSpe),
        );
        let model = Performer::new(&config, 4, &device).unwrap();
        let prompt = bars(8, 4);
        let length = Length {
            context: Some(64),
            ..Length::tokens(300)
        };
        let watch = Some(Watch { layer: 0, head: 0 });
        let mut last_row = 0;
        let mut starts = Vec::new();
        let added = pollster::block_on(continue_tokens(
            &model,
            &prompt,
            length,
            Sampling {
                seed: 5,
                ..Sampling::default()
            },
            &[],
            watch,
            &device,
            |p| {
                if let (Some(_), Some(rows)) = (p.token, &p.attention) {
                    assert_eq!(rows.values.len(), rows.keys, "one row a token");
                    assert!(rows.start >= last_row, "rows move forward");
                    assert!(rows.keys <= rows.start + 1);
                    last_row = rows.start;
                    starts.push(rows.start);
                }
                std::future::ready(true)
            },
        ))
        .unwrap();
        assert_eq!(added.len(), 300);
        let mut grammar = Grammar::new();
        for &id in prompt.iter().chain(&added) {
            grammar.advance(Token::from_id(id).unwrap()).unwrap();
        }
        // Rows went missing where the model started again, and reached past the context.
        assert!(starts.len() < 300, "some restarts");
        assert!(last_row > 64 + prompt.len());
    }

    /// A restart reads the anchor once: later restarts copy the state after it, and their
    /// logits and state match reading the whole view afresh (plain steps after each too).
    #[test]
    fn a_restart_reuses_the_anchor_and_matches_a_fresh_read() {
        let device = Device::flex();
        for kind in [PeKind::SineSpe, PeKind::Ape] {
            let config =
                PerformerConfig::tiny(Task::Continuation, tokens::VOCAB_SIZE, PeConfig::new(kind));
            let model = Performer::new(&config, 4, &device).unwrap();
            let stepping = pollster::block_on(model.stepping(&device)).unwrap();
            let start = |device: &Device| model.start(9, false, device).stepping(&stepping);
            let music = bars(30, 4);
            let mut anchored = None;
            for end in [200, 240, 300] {
                let view = View::of(&music[..end], 128);
                assert!(view.anchor > 0 && view.gap > 0);
                let (mut state, logits) =
                    pollster::block_on(restart(&model, &view, &mut anchored, &start, &device))
                        .unwrap();
                let mut fresh = start(&device);
                let expected =
                    pollster::block_on(quiet_prefill(&model, &mut fresh, &view.ids, &device))
                        .unwrap();
                let close = |a: &[f32], b: &[f32]| {
                    a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-4) && a.len() == b.len()
                };
                assert!(close(&logits, &expected), "{kind:?} logits at {end}");
                assert_eq!(state.position, fresh.position);
                let id = T::Bar.id();
                let a =
                    pollster::block_on(step_logits(&model, &mut state, &[id], &device)).unwrap();
                let b =
                    pollster::block_on(step_logits(&model, &mut fresh, &[id], &device)).unwrap();
                assert!(close(&a, &b), "{kind:?} a step after the restart at {end}");
                let kept = anchored.as_ref().map(|(ids, _)| ids.clone());
                assert_eq!(kept.as_deref(), Some(&view.ids[..view.anchor]));
            }
        }
    }
}
