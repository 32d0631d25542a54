//! A continuation after a piece's last bar (or of a region's bars), streamed and written back
//! as its continuation track, and the attention of a continuation model over a piece.

use std::collections::HashMap;

use burn::tensor::Device;

use super::family::{Generated, Run, Studio, Tokens, Written};
use std::rc::Rc;

use serde::{Deserialize, Serialize};

use super::{
    Asked, BadOption, CONTINUATION_TRACK, Common, MAX_TOKENS, PedalMode, Progress, TOKENS_A_BAR,
    limits,
};
use crate::generate::{
    GenerateError, Length, MapFeatures, Sampling, continue_tokens, cut_prompt, prompt_tokens_with,
    watched_token_pass,
};
use crate::model::config::Task;
use crate::model::performer::Performer;
use crate::music::chords::Chord;
use crate::music::midi::Note;
use crate::music::pedal;
use crate::music::pedal::model::PedalModel;
use crate::music::piece::{Piece, PieceNote, PieceTrack, TrackRole};
use crate::music::tokens::{self, Token};

/// The piece's REMI tokens (without `Eos`) as the model reads them: its notes, and the chord
/// lane as the person sees it over the music, edited or not (the lane past the music plans).
pub fn lane_prompt(piece: &Piece) -> Result<Vec<u32>, GenerateError> {
    prompt_tokens_with(&piece.to_song(), Some(&lane_cells(piece)?))
}

/// The chord lane's cells, bar by bar (planned bars past the music included), read once.
fn lane_cells(piece: &Piece) -> Result<Vec<Vec<Option<Chord>>>, GenerateError> {
    Ok(piece.bar_chords()?)
}

/// A continuation of `piece` after its last bar, written to the CONTINUATION track. Chords
/// planned in the chord lane past the music are the new bars' harmony: every chord of a cell
/// is written where it falls, and the model writes no chord of its own on a planned bar.
pub async fn continue_piece<F, Fut>(
    model: &Performer,
    piece: &Piece,
    options: &ContinueOptions,
    device: &Device,
    on_progress: F,
) -> Result<Piece, GenerateError>
where
    F: FnMut(Progress) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    Ok(
        continue_piece_ids(model, piece, options, device, on_progress)
            .await?
            .piece,
    )
}

/// How to continue, for the page and the CLI alike: both fill one of these, [`Asked::check`]
/// says in words what is wrong with it, and the model's own defaults (chosen on validation
/// songs) fill what is left `None`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ContinueOptions {
    /// The seed, the alternatives, the watched head, and the region: every note starting in
    /// its bars is written anew into the CONTINUATION track from the music before them; the
    /// model writes exactly these bars (stopping where the kept music resumes) with the chords
    /// planned in their lanes, but, reading left to right, it cannot hear the bars after them.
    #[serde(flatten)]
    pub common: Common,
    /// The sampling temperature (else the model's, chosen on validation songs by the
    /// plan-following panel; 1 where none was chosen).
    pub temperature: Option<f32>,
    pub top_p: f32,
    /// How strongly a bar the phrase lane marks as a repeat leans towards its phrase's first
    /// occurrence (see [`Sampling::echo`]; `None`: the default, chosen on validation songs; 0:
    /// not at all).
    pub echo: Option<f32>,
    /// How busy the new notes are: notes a beat as a multiple of the music before them, on
    /// every new bar ([`Sampling::density`]; `None`: [`crate::generate::DEFAULT_DENSITY`], the
    /// prompt's pace, on bars whose chords nobody planned).
    pub density: Option<f32>,
    /// How strongly unplanned new bars keep the pitch classes of the music before them
    /// ([`Sampling::key`]; `None`: [`crate::generate::DEFAULT_KEY`]; 0: as the model plays).
    /// Planned bars follow their chords.
    pub key: Option<f32>,
    /// New bars (`None`: as many as `tokens` holds), and the most tokens to add, a safety
    /// limit (`None`: [`TOKENS_A_BAR`] a bar asked, [`MAX_TOKENS`] at most; 512 without bars).
    pub tokens: Option<usize>,
    pub bars: Option<usize>,
    pub may_end: bool,
    /// The prompt's last this-many tokens are read (trained on 256-token windows, the shipped
    /// models stay flat to about 4 times that).
    pub max_prompt_tokens: usize,
    /// The most tokens the model reads at once (see [`Length::context`]; `None`: all of them).
    pub context: Option<usize>,
    /// The sustain pedal of the bars written ([`PedalMode`]; learnt by default).
    pub pedal: PedalMode,
    /// The learnt pedal (the Session's or the CLI's, never read from JSON); without one a
    /// learnt pedal writes none.
    #[serde(skip)]
    pub pedal_model: Option<Rc<PedalModel>>,
}

impl Default for ContinueOptions {
    fn default() -> Self {
        Self {
            common: Common::default(),
            temperature: None,
            top_p: limits::default("topP").unwrap_or(0.95) as f32,
            echo: None,
            density: None,
            key: None,
            tokens: limits::default("tokens").map(|t| t as usize),
            bars: limits::default("bars").map(|b| b as usize),
            may_end: false,
            max_prompt_tokens: 1024,
            context: None,
            pedal: PedalMode::Learnt,
            pedal_model: None,
        }
    }
}

impl Asked for ContinueOptions {
    fn common(&self) -> &Common {
        &self.common
    }

    fn common_mut(&mut self) -> &mut Common {
        &mut self.common
    }

    fn numbers(&self) -> Vec<(&'static str, Option<f64>)> {
        vec![
            ("temperature", self.temperature.map(f64::from)),
            ("topP", Some(f64::from(self.top_p))),
            ("echo", self.echo.map(f64::from)),
            ("density", self.density.map(f64::from)),
            ("key", self.key.map(f64::from)),
            ("tokens", self.tokens.map(|t| t as f64)),
            ("bars", self.bars.map(|b| b as f64)),
            ("context", self.context.map(|c| c as f64)),
        ]
    }
}

impl ContinueOptions {
    /// How a continuation draws its tokens.
    pub fn sampling(&self) -> Sampling {
        Sampling {
            temperature: self.temperature.unwrap_or(1.0),
            top_p: self.top_p,
            seed: self.common.seed,
            echo: self.echo.unwrap_or(crate::generate::DEFAULT_ECHO),
            // The prompt's pace on unplanned bars unless asked otherwise, then on every bar
            // (chosen on validation songs).
            density: Some(self.density.unwrap_or(crate::generate::DEFAULT_DENSITY)),
            density_on_plan: self.density.is_some(),
            // The prompt's key held on unplanned bars unless asked otherwise (validation).
            key: self.key.unwrap_or(crate::generate::DEFAULT_KEY),
        }
    }

    /// The most tokens a continuation adds: `tokens`, else [`TOKENS_A_BAR`] for each bar asked
    /// (512 when no bars are).
    pub fn token_limit(&self) -> usize {
        self.tokens
            .unwrap_or_else(|| self.bars.map_or(512, |b| b.saturating_mul(TOKENS_A_BAR)))
            .min(MAX_TOKENS)
    }

    /// How long a continuation of the whole piece goes on.
    pub fn length(&self) -> Length {
        Length {
            tokens: self.token_limit(),
            bars: self.bars,
            may_end: self.may_end,
            context: self.context,
        }
    }
}

/// The continuation task: new bars after a piece's music (or a region's bars written anew
/// from the music before them), following the lanes planned for them.
pub struct Continue;

impl Studio for Continue {
    const MODEL: Task = Task::Continuation;
    type Options = ContinueOptions;
    type Cache = ();
    const VERB: &'static str = "continue";

    fn check(options: &ContinueOptions) -> Result<(), BadOption> {
        Asked::check(options)
    }

    /// The model's own temperature unless one is given (chosen on validation songs).
    async fn generate<F, Fut>(
        run: &Run<'_>,
        piece: &Piece,
        options: &ContinueOptions,
        _: &mut (),
        on_progress: F,
    ) -> Result<Generated, GenerateError>
    where
        F: FnMut(Progress) -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let options = ContinueOptions {
            temperature: options.temperature.or(run.defaults.temperature),
            pedal_model: run.pedal.cloned(),
            ..options.clone()
        };
        let written = continue_pieces(run.model, piece, &options, run.device, on_progress).await?;
        Ok(Generated::Pieces(
            written
                .into_iter()
                .map(|c| Written {
                    piece: c.piece,
                    tokens: Some(Tokens {
                        prompt: c.prompt,
                        added: c.added,
                    }),
                })
                .collect(),
        ))
    }

    async fn attention<F, Fut>(
        run: &Run<'_>,
        piece: &Piece,
        options: &ContinueOptions,
        map: &mut MapFeatures,
        on_progress: F,
    ) -> Option<Result<usize, GenerateError>>
    where
        F: FnMut(Progress) -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        Some(
            continuation_attention(
                run.model,
                piece,
                options,
                run.device,
                Some(map),
                on_progress,
            )
            .await,
        )
    }

    /// How many tokens it read and added, and whether it stopped at its safety limit.
    fn describe(_before: &Piece, written: &Written, options: &ContinueOptions) -> String {
        let tokens = written.tokens.clone().unwrap_or_default();
        let new_bars = tokens
            .added
            .iter()
            .filter(|&&id| id == Token::Bar.id())
            .count();
        if let Some([from, to]) = options.common.region {
            return format!(
                "bars {}-{to} rewritten, the rest of the piece kept: {} new tokens",
                from + 1,
                tokens.added.len()
            );
        }
        let stopped = match options.bars {
            Some(asked) if tokens.added.len() >= options.token_limit() => format!(
                " (stopped at the safety limit of {} tokens after {} of the {asked} bars asked: \
                 --tokens raises it)",
                options.token_limit(),
                new_bars.saturating_sub(1),
            ),
            _ => String::new(),
        };
        format!(
            "{} prompt tokens, {} new tokens ({new_bars} new bars){stopped}",
            tokens.prompt.len(),
            tokens.added.len(),
        )
    }
}

/// [`Asked::count`] continuations, one after another, the k-th with seed `seed + k` (each
/// the piece that seed writes alone); progress says which one it is about, and the first one's
/// attention is watched.
pub async fn continue_pieces<F, Fut>(
    model: &Performer,
    piece: &Piece,
    options: &ContinueOptions,
    device: &Device,
    mut on_progress: F,
) -> Result<Vec<Continued>, GenerateError>
where
    F: FnMut(Progress) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    // The count here; the rest once, by each alternative's own continuation.
    options.common.check()?;
    let k = options.count();
    let mut pieces = Vec::with_capacity(k);
    for i in 0..k {
        let mut o = options.alternative(i);
        if i > 0 {
            o.common.watch = None;
        }
        let written = continue_piece_ids(model, piece, &o, device, |mut p| {
            p.alternative = (k > 1).then_some([i + 1, k]);
            on_progress(p)
        })
        .await?;
        pieces.push(written);
    }
    Ok(pieces)
}

/// What [`continue_piece_ids`] wrote, as the piece and as the tokens it came from.
pub struct Continued {
    pub piece: Piece,
    /// The tokens the model read first (the piece's, cut to `max_prompt_tokens` at a bar line).
    pub prompt: Vec<u32>,
    /// The tokens it added.
    pub added: Vec<u32>,
}

/// [`continue_piece`], with the tokens: what `eval --openings` measures the page's path by.
pub async fn continue_piece_ids<F, Fut>(
    model: &Performer,
    piece: &Piece,
    options: &ContinueOptions,
    device: &Device,
    mut on_progress: F,
) -> Result<Continued, GenerateError>
where
    F: FnMut(Progress) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    options.check()?;
    if model.config.task != Task::Continuation {
        return Err(GenerateError::WrongTask {
            model: model.config.task,
            wanted: Task::Continuation,
        });
    }
    piece.validate()?;
    let bar = Token::Bar.id();
    let cells = lane_cells(piece)?;
    let song = piece.to_song();
    // A region: the music before it is the prompt, and the model writes exactly its bars.
    let region = match options.common.region {
        None => None,
        Some([from, to]) => {
            let bars = piece.bars.len();
            if from >= bars {
                return Err(GenerateError::Read(format!(
                    "bar {} is past the end of the piece ({bars} bars)",
                    from + 1
                )));
            }
            // The last entry of `bars` ends the music: a region from it writes a new bar.
            let to = to.min(bars);
            Some((from, to, piece.bar_tick(from)..piece.bar_tick(to)))
        }
    };
    let (whole, prompt_bars) = match &region {
        None => {
            let whole = prompt_tokens_with(&song, Some(&cells))?;
            let bars = whole.iter().filter(|&&id| id == bar).count();
            (whole, bars)
        }
        Some((from, ..)) => {
            // The whole piece on its own bars (so a rest before the region keeps the bar's
            // length and meter), cut at the region's first bar line: the notes before it,
            // held on as they are.
            let whole = match prompt_tokens_with(&song, Some(&cells)) {
                Ok(ids) => ids,
                Err(GenerateError::EmptyPrompt) => vec![Token::Bos.id()],
                Err(e) => return Err(e),
            };
            (with_bars(whole, *from), *from)
        }
    };
    let (prompt, first_bar) = cut_prompt(&whole, options.max_prompt_tokens.max(16));
    let planned_to = region
        .as_ref()
        .map_or(cells.len(), |r| r.1.min(cells.len()));
    let plan: Vec<Vec<Option<Chord>>> = (prompt_bars..planned_to)
        .map(|b| cells[b].clone())
        .collect();
    let prompt_notes = decode(&prompt)?.notes;
    let length = match &region {
        None => options.length(),
        Some((from, to, _)) => Length {
            tokens: options
                .tokens
                .unwrap_or(0)
                .max(super::TOKENS_A_BAR * (to - from))
                .min(super::MAX_TOKENS),
            bars: Some(to - from),
            may_end: false,
            context: options.context,
        },
    };
    // Notes the model adds to the bar before a region are not kept, and notes in it end
    // where the kept music resumes.
    let ticks = region.as_ref().map(|r| r.2.clone());
    let keep = |notes: Vec<PieceNote>| -> Vec<PieceNote> {
        match &ticks {
            Some(t) => notes
                .into_iter()
                .filter(|n| t.contains(&n.1))
                .map(|(pitch, start, end, velocity)| (pitch, start, end.min(t.end), velocity))
                .collect(),
            None => notes,
        }
    };
    let sampling = options.sampling();
    let mut ids = prompt.clone();
    let mut since = 0;
    let total = length.tokens;
    // New bars begun so far (the prompt may end in the middle of its last bar).
    let mut bars_begun = 0;
    let phrases = piece.bar_phrases();
    let added = continue_tokens(
        model,
        &prompt,
        length,
        sampling,
        &plan,
        phrases.get(first_bar..).unwrap_or(&[]),
        options.common.watch(),
        device,
        |p| {
            let mut notes = None;
            if let Some(id) = p.token {
                ids.push(id);
                // Placing decodes the whole sequence: do it when a bar is complete (or every
                // 64 tokens in a long bar), not per note, so streaming stays linear-ish.
                since += 1;
                if id == bar || since >= 64 {
                    since = 0;
                    notes = place(piece, &ids, first_bar, &prompt_notes).ok().map(keep);
                }
            }
            if p.token == Some(bar) {
                bars_begun += 1;
            }
            on_progress(Progress {
                done: p.added,
                total,
                bars: length.bars.map(|b| [bars_begun.min(b), b]),
                notes,
                attention: p.attention,
                alternative: None,
            })
        },
    )
    .await?;
    let mut all = prompt.clone();
    all.extend_from_slice(&added);
    let notes = keep(place(piece, &all, first_bar, &prompt_notes)?);
    let notes_from = notes.iter().map(|n| n.1).min();
    let mut out = piece.clone();
    if let Some(t) = &ticks {
        for track in &mut out.tracks {
            track.notes.retain(|n| !t.contains(&n.1));
        }
    }
    match out
        .tracks
        .iter_mut()
        .find(|t| t.role == TrackRole::Generated && t.name == CONTINUATION_TRACK)
    {
        Some(t) => {
            t.notes.extend(notes);
            t.notes.sort_by_key(|n| (n.1, n.0));
        }
        None => out.tracks.push(PieceTrack {
            pedal: Vec::new(),
            name: CONTINUATION_TRACK.into(),
            role: TrackRole::Generated,
            program: 0,
            channel: Some(3),
            notes,
        }),
    }
    out.refresh();
    let first_new = match &region {
        Some((from, ..)) => Some(*from),
        None => notes_from.map(|tick| out.bars.partition_point(|&t| t <= tick).saturating_sub(1)),
    };
    if let Some(from) = first_new {
        out = pedal_written(out, from, options)?;
    }
    Ok(Continued {
        piece: out,
        prompt,
        added,
    })
}

/// The continuation track's sustain pedal from bar `from` (from 0) to the end, as
/// [`ContinueOptions::pedal`] says: the learnt pedal of the notes written, none, or (as played) what
/// the track had.
fn pedal_written(
    out: Piece,
    from: usize,
    options: &ContinueOptions,
) -> Result<Piece, GenerateError> {
    let Some(index) = out
        .tracks
        .iter()
        .position(|t| t.role == TrackRole::Generated && t.name == CONTINUATION_TRACK)
    else {
        return Ok(out);
    };
    match (options.pedal, &options.pedal_model) {
        (PedalMode::Learnt, Some(model)) if from + 1 < out.bars.len() => {
            super::accompany::pedal_track(&out, index, [from, usize::MAX], model)
        }
        (PedalMode::Off, _) => {
            let mut out = out;
            let at = out.bar_tick(from);
            let track = &mut out.tracks[index];
            track.pedal = pedal::splice(&track.pedal, &[], at, u64::MAX);
            Ok(out)
        }
        _ => Ok(out),
    }
}

/// The watched head's attention over the whole piece as a continuation model reads it (its
/// tokens, the last `max_prompt_tokens` of them), reported as rows: the map a user asks for
/// after generating, or for any piece. `cache`: as [`super::accompaniment_attention`]'s.
pub async fn continuation_attention<F, Fut>(
    model: &Performer,
    piece: &Piece,
    options: &ContinueOptions,
    device: &Device,
    cache: Option<&mut MapFeatures>,
    mut on_progress: F,
) -> Result<usize, GenerateError>
where
    F: FnMut(Progress) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    options.check()?;
    piece.validate()?;
    let whole = lane_prompt(piece)?;
    let (prompt, first_bar) = cut_prompt(&whole, options.max_prompt_tokens.max(16));
    let phrases = piece.bar_phrases();
    let total = prompt.len();
    let Some(watch) = options.common.watch() else {
        return Ok(total);
    };
    let rows = watched_token_pass(
        model,
        &prompt,
        phrases.get(first_bar..).unwrap_or(&[]),
        options.common.seed,
        watch,
        device,
        cache,
    )
    .await?;
    on_progress(Progress::map(rows.keys, total, rows)).await;
    Ok(total)
}

/// `ids` (a prompt from [`lane_prompt`]) cut or padded with empty bars to hold exactly
/// `bars` bars, so that what follows starts at bar `bars`.
fn with_bars(mut ids: Vec<u32>, bars: usize) -> Vec<u32> {
    let bar = Token::Bar.id();
    match ids
        .iter()
        .enumerate()
        .filter(|(_, id)| **id == bar)
        .nth(bars)
    {
        Some((i, _)) => ids.truncate(i),
        None => {
            let have = ids.iter().filter(|&&id| id == bar).count();
            ids.extend(std::iter::repeat_n(bar, bars - have));
        }
    }
    ids
}

fn decode(ids: &[u32]) -> Result<tokens::Decoded, GenerateError> {
    let tokens: Vec<Token> = ids.iter().filter_map(|&id| Token::from_id(id)).collect();
    tokens::decode(&tokens, 480, 0).map_err(|e| GenerateError::Tokens(e.to_string()))
}

/// The notes `ids` holds beyond those of `prompt` (decoded), in the piece's ticks: each keeps
/// its place in its bar, and token bar `k` is the piece's bar `first_bar + k` (bars past the
/// piece's continue at its last bar length).
fn place(
    piece: &Piece,
    ids: &[u32],
    first_bar: usize,
    prompt: &[Note],
) -> Result<Vec<PieceNote>, GenerateError> {
    let decoded = decode(ids)?;
    let token_bars = decoded.grid.bar_ticks();
    let scale = piece.ppq as f64 / 480.0;
    // Decoding sorts notes by time, so the prompt's notes are taken out by value.
    let mut left: HashMap<Note, usize> = HashMap::new();
    for n in prompt {
        *left.entry(*n).or_default() += 1;
    }
    Ok(decoded
        .notes
        .iter()
        .filter(|n| match left.get_mut(n) {
            Some(count) if *count > 0 => {
                *count -= 1;
                false
            }
            _ => true,
        })
        .map(|n| {
            let k = token_bars
                .partition_point(|&t| t <= n.start)
                .saturating_sub(1);
            let base = token_bars.get(k).copied().unwrap_or(0);
            let start =
                piece.bar_tick(first_bar + k) + ((n.start - base) as f64 * scale).round() as u64;
            let length = (((n.end - n.start) as f64 * scale).round() as u64).max(1);
            (n.pitch, start, start + length, n.velocity)
        })
        .collect())
}
