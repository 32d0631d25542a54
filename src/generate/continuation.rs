//! Continuation: the prompt's tokens prefill the model, then tokens are sampled one at a time
//! through the recurrent form, masked by the REMI grammar. A model trained on windows of N
//! tokens reads at most N: past that it starts again from the music's first bars and its last
//! ones (`View`), reusing the state after the first bars.

use super::sample::uniform;
use super::sample::{Sampling, log_softmax_values, sample_token};
use super::{AttentionRows, GenerateError, Watch, read_f32, watched_rows};
use crate::data::features::token_coordinates;
use crate::model::config::Task;
use crate::model::pe::StructureLevel;
use crate::model::performer::{Inputs, Performer, State, StepInput};
use crate::music::chords::Chord;
use crate::music::labels::PhraseLabel;
use crate::music::tokens::places::{Places, TokenPlace};
use crate::music::tokens::{self, Grammar, Token};
use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Int, Tensor, TensorData};

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
/// force at its end; the model's noise is drawn once from `sampling.seed`. `plan[k]`, where
/// given and not empty, is new bar `k`'s chord cell (its chords share the bar's beats evenly,
/// as [`crate::generate::spread`] lays them out): the planned harmony is the bar's, so every
/// change of chord it holds is written where it falls (`Position p, Chord c`, on the bar line
/// and mid-bar alike) and the model writes no chord of its own there; unplanned bars are the
/// model's. `phrases[b]` is the phrase lane at bar `b` of the music (`prompt`'s bars, then
/// the new ones): a model with F-StrIPE reads it with the chord in force, the position and
/// the time of every token ([`crate::data::features::token_coordinates`]); the others do not.
/// Every model echoes with it: a new bar that the lane says repeats an earlier phrase leans
/// towards that phrase's same bar ([`Sampling::echo`], the `echo` module), and takes that
/// bar's chords when none are planned.
/// `on_token` sees the prompt's attention, then each new token, and returns whether to go on
/// (the page streams notes from it and cancels through it).
#[allow(clippy::too_many_arguments)]
pub async fn continue_tokens<F, Fut>(
    model: &Performer,
    prompt: &[u32],
    length: Length,
    sampling: Sampling,
    plan: &[Vec<Option<Chord>>],
    phrases: &[Option<PhraseLabel>],
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
    // Where each token of the history sits, for F-StrIPE.
    let structure = Structure {
        levels: model.config.pe.structure_levels(),
        phrases,
    };
    let mut walk = Places::default();
    let mut places: Vec<TokenPlace> = prompt.iter().map(|&id| walk.push(id)).collect();
    let mut view = match context {
        Some(c) if prompt.len() > c => View::of(&prompt, c),
        _ => View::all(&prompt),
    };
    let mut state = start(device);
    let mut logits = prefill(
        model,
        &mut state,
        &view,
        &structure.view(&view, &places),
        watch,
        device,
        &mut on_token,
    )
    .await?;
    // The state after the view's anchor (the music's first bars), with the anchor's tokens.
    let mut anchored: Option<(Vec<u32>, State)> = None;
    // The tokens run ahead on the GPU where the fused steps apply (`ahead`).
    let mut ahead = Ahead::prepare(model, &state, watch, device).await?;
    let mut out = Vec::new();
    let mut new_bars = 0;
    // The chord in force (the last `Chord` token).
    let mut chord_now = prompt
        .iter()
        .rev()
        .find_map(|&id| match Token::from_id(id) {
            Some(Token::Chord(c)) => Some(c),
            _ => None,
        });
    // The chords planned for the new bars, and the parts that lean the model's draws.
    let mut plan = Plan::new(plan);
    let mut steering = Steering::new(&sampling, &prompt, &places, grammar.bar_beats(), phrases);
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
        let (id, drawn) = match plan.forced(&allowed) {
            Some(t) => (t.id(), false),
            None => {
                plan.mask(&mut allowed);
                let now = Now {
                    chord: chord_now.flatten(),
                    planned_bar: plan.planned_bar,
                    last: history.last().and_then(|&id| Token::from_id(id)),
                    place: places.last(),
                    bar_beats: grammar.bar_beats(),
                    temperature: sampling.temperature,
                    allowed: &allowed,
                };
                // A counter, not a stream: the GPU's draw of this token takes the same number.
                let u = uniform(sampling.seed, out.len(), 0, 0);
                let leaned = steering.lean(&now, &logits);
                (
                    sample_token(
                        leaned.as_deref().unwrap_or(&logits[..]),
                        &allowed,
                        sampling,
                        u,
                    ),
                    true,
                )
            }
        };
        let token = Token::from_id(id).unwrap_or(Token::Eos);
        // A planned change the drawn token would step past is written first.
        if drawn && plan.due_before(token) {
            continue;
        }
        if token == Token::Bar {
            new_bars += 1;
            if length.bars.is_some_and(|b| new_bars > b) {
                break;
            }
            plan.start_bar(new_bars - 1, grammar.bar_beats(), chord_now);
        }
        if let Token::Chord(c) = token {
            chord_now = Some(c);
        }
        steering.written(token);
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
        let place = walk.push(id);
        places.push(place);
        steering.placed(token, place, &history, &places, &mut plan, chord_now);
        let position = state.position;
        // Starting again: only when bar lines leave something out.
        let again = context
            .filter(|&c| position >= c)
            .map(|c| View::of(&history, c))
            .filter(|v| v.gap > 0);
        let attention = match again {
            Some(next) => {
                view = next;
                let coordinates = structure.view(&view, &places);
                (state, logits) =
                    restart(model, &view, &coordinates, &mut anchored, &start, device).await?;
                if let Some(a) = ahead.as_mut() {
                    a.reload(&state, device).await?;
                }
                None
            }
            None => match ahead.as_mut() {
                Some(a) => {
                    let next = ahead::Next {
                        grammar: &grammar,
                        may_end: length.may_end,
                        index: out.len(),
                        // The steps before a restart, and the tokens still to write.
                        most: context
                            .map_or(usize::MAX, |c| c.saturating_sub(position))
                            .min(length.tokens - out.len() + 1),
                    };
                    let row;
                    (logits, row) = a.feed(id, next, &sampling, &mut state).await?;
                    view.place(row.map(|values| AttentionRows {
                        start: position,
                        keys: values.len(),
                        values,
                    }))
                }
                None => {
                    let coordinates = structure.of(&[place]);
                    logits = step_logits(model, &mut state, &[id], &coordinates, device).await?;
                    view.place(watched_rows(&state, watch, position).await?)
                }
            },
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

/// What an F-StrIPE model reads of each token besides the token: its levels (none for the
/// other encodings) and the phrase lane by bar.
struct Structure<'a> {
    levels: &'a [StructureLevel],
    phrases: &'a [Option<PhraseLabel>],
}

impl Structure<'_> {
    /// The coordinates of tokens at `places`, flat `[len, c]`; empty without levels.
    fn of(&self, places: &[TokenPlace]) -> Vec<f32> {
        if self.levels.is_empty() {
            return Vec::new();
        }
        token_coordinates(places, self.phrases, self.levels, 0)
    }

    /// The coordinates of `view`'s tokens, each at its place in the whole music (`places`,
    /// one per token of the history): the anchor's bars stay where they are in time.
    fn view(&self, view: &View, places: &[TokenPlace]) -> Vec<f32> {
        if self.levels.is_empty() {
            return Vec::new();
        }
        let mut at: Vec<TokenPlace> = places[..view.anchor].to_vec();
        at.extend_from_slice(&places[view.anchor + view.gap..]);
        self.of(&at)
    }
}

/// The watched head's attention rows over `ids` (a prompt, `phrases` its phrase lane for
/// F-StrIPE) in one pass, noise seeded by `seed` as a generation's: the blocks up to the
/// watched layer only and that head's rows only, no output read — the map of the tokens there
/// without what it does not show (`continue_tokens` with nothing to add computes all of it).
pub async fn watched_token_pass(
    model: &Performer,
    ids: &[u32],
    phrases: &[Option<PhraseLabel>],
    seed: u64,
    watch: Watch,
    device: &Device,
    cache: Option<&mut super::MapFeatures>,
) -> Result<AttentionRows, GenerateError> {
    if ids.is_empty() {
        return Err(GenerateError::EmptyPrompt);
    }
    let mut walk = Places::default();
    let places: Vec<TokenPlace> = ids.iter().map(|&id| walk.push(id)).collect();
    let structure = Structure {
        levels: model.config.pe.structure_levels(),
        phrases,
    };
    let coordinates = structure.of(&places);
    let fingerprint = super::MapFeatures::fingerprint(&[&coordinates], ids, seed);
    let build = || {
        let len = ids.len();
        let data: Vec<i64> = ids.iter().map(|&t| t as i64).collect();
        let input = Tensor::<2, Int>::from_data(TensorData::new(data, vec![1, len]), device);
        let labels = (!coordinates.is_empty()).then(|| {
            let c = coordinates.len() / len;
            Tensor::<3>::from_data(TensorData::new(coordinates, vec![1, len, c]), device)
        });
        (Inputs::Tokens(input), labels)
    };
    super::watched_forward(
        model,
        Task::Continuation,
        build,
        seed,
        watch,
        device,
        cache.map(|c| (c, fingerprint)),
    )
    .await
}

/// Rows `range` of flat coordinates `[len, c]` for `len` tokens (empty stays empty).
fn rows(coordinates: &[f32], len: usize, range: std::ops::Range<usize>) -> &[f32] {
    if coordinates.is_empty() {
        return coordinates;
    }
    let c = coordinates.len() / len.max(1);
    &coordinates[range.start * c..range.end * c]
}

/// Runs `view` through the model in chunks and returns the last position's logits; attention
/// rows are reported placed over the whole sequence. `coordinates`: the view's structure
/// coordinates (empty without F-StrIPE).
async fn prefill<F, Fut>(
    model: &Performer,
    state: &mut State,
    view: &View,
    coordinates: &[f32],
    watch: Option<Watch>,
    device: &Device,
    on_token: &mut F,
) -> Result<Vec<f32>, GenerateError>
where
    F: FnMut(TokenProgress) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut last = Vec::new();
    let len = view.ids.len();
    for (k, chunk) in view.ids.chunks(512).enumerate() {
        let position = state.position;
        let at = k * 512..k * 512 + chunk.len();
        last = step_logits(model, state, chunk, rows(coordinates, len, at), device).await?;
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
    coordinates: &[f32],
    anchored: &mut Option<(Vec<u32>, State)>,
    start: &impl Fn(&Device) -> State,
    device: &Device,
) -> Result<(State, Vec<f32>), GenerateError> {
    let anchor = &view.ids[..view.anchor];
    let len = view.ids.len();
    let mut state = match anchored.as_ref() {
        Some((ids, after)) if ids == anchor => after.clone(),
        _ => {
            let mut after = start(device);
            let at = rows(coordinates, len, 0..view.anchor);
            quiet_prefill(model, &mut after, anchor, at, device).await?;
            *anchored = Some((anchor.to_vec(), after.clone()));
            after
        }
    };
    let at = rows(coordinates, len, view.anchor..len);
    let logits = quiet_prefill(model, &mut state, &view.ids[view.anchor..], at, device).await?;
    Ok((state, logits))
}

/// Runs `ids` through the model in chunks, reporting nothing, and returns the last position's
/// logits (none for no ids).
async fn quiet_prefill(
    model: &Performer,
    state: &mut State,
    ids: &[u32],
    coordinates: &[f32],
    device: &Device,
) -> Result<Vec<f32>, GenerateError> {
    let mut last = Vec::new();
    for (k, chunk) in ids.chunks(512).enumerate() {
        let at = rows(coordinates, ids.len(), k * 512..k * 512 + chunk.len());
        last = step_logits(model, state, chunk, at, device).await?;
    }
    Ok(last)
}

/// The log-probabilities after `ids` (with their structure coordinates, flat `[len, c]`, when
/// the model reads them).
async fn step_logits(
    model: &Performer,
    state: &mut State,
    ids: &[u32],
    coordinates: &[f32],
    device: &Device,
) -> Result<Vec<f32>, GenerateError> {
    let len = ids.len();
    let labels = (!coordinates.is_empty()).then_some(coordinates);
    if let [id] = ids {
        let logits = model
            .step(StepInput::Token(*id), labels, state, device)
            .await?;
        return Ok(log_softmax_values(&logits));
    }
    let data: Vec<i64> = ids.iter().map(|&t| t as i64).collect();
    let input = Tensor::<2, Int>::from_data(TensorData::new(data, vec![1, len]), device);
    let labels = labels.map(|l| {
        let c = l.len() / len.max(1);
        Tensor::<3>::from_data(TensorData::new(l.to_vec(), vec![1, len, c]), device)
    });
    let logits = model.forward(Inputs::Tokens(input), labels, state, None)?;
    read_f32(log_softmax(logits.narrow(1, len - 1, 1), 2)).await
}

// Native only: the browser tests build the library's tests for wasm, without pollster.
mod density;
mod echo;
mod key;
mod steer;
use steer::{Now, Plan, Steering};

#[cfg(feature = "gpu")]
pub mod ahead;
#[cfg(feature = "gpu")]
use ahead::Ahead;

/// Without the GPU kernels nothing runs ahead: the tokens step through the model one by one.
#[cfg(not(feature = "gpu"))]
mod ahead {
    use super::*;

    #[allow(dead_code)] // built for the GPU's steps, read by none here
    pub(super) struct Next<'a> {
        pub grammar: &'a Grammar,
        pub may_end: bool,
        pub index: usize,
        pub most: usize,
    }

    pub(super) enum Ahead {}

    impl Ahead {
        pub async fn prepare(
            _: &Performer,
            _: &State,
            _: Option<Watch>,
            _: &Device,
        ) -> Result<Option<Self>, GenerateError> {
            Ok(None)
        }

        pub async fn reload(&mut self, _: &State, _: &Device) -> Result<(), GenerateError> {
            match *self {}
        }

        pub async fn feed(
            &mut self,
            _: u32,
            _: Next<'_>,
            _: &Sampling,
            _: &mut State,
        ) -> Result<(Vec<f32>, Option<Vec<f32>>), GenerateError> {
            match *self {}
        }
    }
}
#[cfg(not(feature = "gpu"))]
use ahead::Ahead;

#[cfg(all(test, feature = "gpu", not(target_arch = "wasm32")))]
mod fused_tests;
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;
