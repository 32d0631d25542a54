//! What the page does with a piece and a model, written once for the Worker and for native
//! tests: an accompaniment for the piece's melody, or a continuation after its end, streamed
//! (notes and attention as they are computed, cancellable) and put back into the piece.

use std::collections::HashMap;

use burn::tensor::Device;
use serde::{Deserialize, Serialize};

use crate::generate::binarize::{Binarize, binarize};
use crate::generate::{
    AttentionRows, GenerateError, Length, PianoSampling, Sampling, Watch, accompaniment_input,
    accompany_probs, accompany_steps, continue_tokens, cut_prompt, input_example, prompt_tokens,
    splice,
};
use crate::model::config::Task;
use crate::model::performer::Performer;
use crate::music::chords::Chord;
use crate::music::grid::Grid;
use crate::music::midi::Note;
use crate::music::piece::{Piece, PieceNote, PieceTrack, TrackRole};
use crate::music::roll::{PianoRoll, Role};
use crate::music::tokens::{self, Token};

/// Name of the track an accompaniment is written to.
pub const ACCOMPANIMENT_TRACK: &str = "PIANO";
/// Name of the track a continuation is written to.
pub const CONTINUATION_TRACK: &str = "CONTINUATION";

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Options {
    pub seed: u64,
    /// Accompaniment: note threshold (else the model's, chosen on validation data). A model
    /// that writes step by step draws its notes unless one is given.
    pub threshold: Option<f32>,
    /// Step-by-step accompaniment: the sampling temperature (else the model's).
    pub piano_temperature: Option<f32>,
    /// Accompaniment: steps computed between two progress reports.
    pub chunk_steps: usize,
    /// Rewrite bars `from .. to` only (0-based, `to` excluded). Accompaniment: the piano
    /// there, keeping it elsewhere (the generated track, else the pianist's) and the melody
    /// everywhere; a model that writes step by step continues from the piano before the first
    /// of them. Continuation: every note starting in them, written anew into the
    /// CONTINUATION track from the music before them; the model writes exactly these bars
    /// (stopping where the kept music resumes) with the chords planned in their lanes, but,
    /// reading left to right, it cannot hear the bars after them.
    pub region: Option<[usize; 2]>,
    /// Continuation.
    pub temperature: f32,
    pub top_p: f32,
    /// Continuation: tokens to add at most, and new bars at most.
    pub tokens: usize,
    pub bars: Option<usize>,
    pub may_end: bool,
    /// Continuation: the prompt's last this-many tokens are read (trained on 256-token windows,
    /// the shipped models stay flat to about 4 times that).
    pub max_prompt_tokens: usize,
    /// Continuation: the most tokens the model reads at once (see [`Length::context`]; `None`:
    /// all of them).
    pub context: Option<usize>,
    /// The attention to capture while generating.
    pub watch: Option<WatchOptions>,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct WatchOptions {
    pub layer: usize,
    pub head: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            seed: 0,
            threshold: None,
            piano_temperature: None,
            chunk_steps: 64,
            region: None,
            temperature: 1.0,
            top_p: 0.95,
            tokens: 512,
            bars: None,
            may_end: false,
            max_prompt_tokens: 1024,
            context: None,
            watch: None,
        }
    }
}

impl Options {
    fn watch(&self) -> Option<Watch> {
        self.watch.map(|w| Watch {
            layer: w.layer,
            head: w.head,
        })
    }

    fn check(&self) -> Result<(), GenerateError> {
        let bad = |s: &str| Err(GenerateError::Read(s.to_string()));
        if !(self.temperature > 0.0 && self.temperature <= 10.0) {
            return bad("the temperature must be above 0 and at most 10");
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad("top-p must be above 0 and at most 1");
        }
        if self.threshold.is_some_and(|t| !(t > 0.0 && t < 1.0)) {
            return bad("the note threshold must be between 0 and 1");
        }
        if self
            .piano_temperature
            .is_some_and(|t| !(t > 0.0 && t <= 10.0))
        {
            return bad("the temperature must be above 0 and at most 10");
        }
        if let Some([from, to]) = self.region
            && from >= to
        {
            return bad("choose at least one bar to regenerate");
        }
        if self.tokens == 0 || self.tokens > 20_000 {
            return bad("the length must be between 1 and 20 000 tokens");
        }
        if self.context.is_some_and(|c| c < 32) {
            return bad("the model must read at least 32 tokens at once");
        }
        Ok(())
    }
}

/// A progress report: how far (`done` of `total`, in steps or tokens), every note written so
/// far (piece ticks), and the watched attention rows just computed.
pub struct Progress {
    pub done: usize,
    pub total: usize,
    pub notes: Option<Vec<PieceNote>>,
    pub attention: Option<AttentionRows>,
}

/// An accompaniment for the melody (and bridge) of `piece` with its chord and phrase lanes as
/// labels; the result replaces the piece's piano and generated tracks.
pub async fn accompany_piece<F, Fut>(
    model: &Performer,
    model_binarize: Option<Binarize>,
    model_sampling: PianoSampling,
    piece: &Piece,
    options: &Options,
    device: &Device,
    mut on_progress: F,
) -> Result<Piece, GenerateError>
where
    F: FnMut(Progress) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    options.check()?;
    piece
        .validate()
        .map_err(|e| GenerateError::Read(e.to_string()))?;
    if !piece
        .tracks
        .iter()
        .any(|t| t.role == TrackRole::Melody && !t.notes.is_empty())
    {
        return Err(GenerateError::Read(
            "no track is marked as the melody: choose the melody track in the track list".into(),
        ));
    }
    // Every track counts for the grid's extent (a kept piano may outlast the melody); the
    // model reads the melody and bridge only.
    let song = piece.model_song(|_| true);
    let grid = Grid::for_song(&song, tokens::STEPS_PER_BEAT);
    let mut chords = piece
        .bar_chords()
        .map_err(|e| GenerateError::Read(e.to_string()))?;
    chords.truncate(grid.num_bars());
    let input = accompaniment_input(&song, Some(&chords), Some(piece.segments()))?;
    let mut b = model_binarize.unwrap_or_default();
    if let Some(t) = options.threshold {
        b.threshold = t;
    }
    let e = input_example(model, &input);
    let (region, given) = match options.region {
        None => (0..e.len, None),
        Some([from, to]) => {
            let bars = input.grid.num_bars();
            if from >= bars {
                return Err(GenerateError::Read(format!(
                    "bar {} is past the end of the piece ({bars} bars)",
                    from + 1
                )));
            }
            let steps =
                input.grid.bar_steps(from).start..input.grid.bar_steps(to.min(bars) - 1).end;
            (steps, Some(kept_piano(piece, &input.grid)))
        }
    };
    let roll = if model.config.is_autoregressive() {
        let sampling = PianoSampling {
            temperature: options
                .piano_temperature
                .unwrap_or(model_sampling.temperature),
            threshold: options.threshold,
            hold_temperature: model_sampling.hold_temperature,
            seed: options.seed,
        };
        accompany_steps(
            model,
            &e,
            given.as_ref(),
            region,
            sampling,
            options.chunk_steps,
            options.watch(),
            device,
            |p| {
                let notes = roll_notes(p.roll, &input.grid);
                on_progress(Progress {
                    done: p.done,
                    total: p.total,
                    notes: Some(notes),
                    attention: p.attention,
                })
            },
        )
        .await?
    } else {
        let (onset, sustain) = accompany_probs(
            model,
            &e,
            options.seed,
            options.chunk_steps,
            options.watch(),
            device,
            |p| {
                let roll = binarize(p.onset, p.sustain, p.done, b);
                let notes = roll_notes(&roll, &input.grid);
                on_progress(Progress {
                    done: p.done,
                    total: p.total,
                    notes: Some(notes),
                    attention: p.attention,
                })
            },
        )
        .await?;
        let roll = binarize(&onset, &sustain, e.len, b);
        match given {
            Some(given) => splice(&given, &roll, region),
            None => roll,
        }
    };
    let mut out = piece.clone();
    out.tracks
        .retain(|t| !matches!(t.role, TrackRole::Piano | TrackRole::Generated));
    out.tracks.push(PieceTrack {
        name: ACCOMPANIMENT_TRACK.into(),
        role: TrackRole::Generated,
        program: 0,
        channel: Some(Role::Piano.channel()),
        notes: roll_notes(&roll, &input.grid),
    });
    out.refresh();
    Ok(out)
}

/// The piano a "regenerate these bars" keeps: the generated track's, else the pianist's.
fn kept_piano(piece: &Piece, grid: &Grid) -> PianoRoll {
    let of = |role: TrackRole| {
        piece
            .tracks
            .iter()
            .filter(move |t| t.role == role)
            .flat_map(|t| t.notes.iter())
            .map(|&(pitch, start, end, velocity)| Note {
                pitch: pitch.min(127),
                velocity: velocity.clamp(1, 127),
                start,
                end: end.max(start + 1),
                channel: Role::Piano.channel(),
            })
            .collect::<Vec<_>>()
    };
    let generated = of(TrackRole::Generated);
    let notes = if generated.is_empty() {
        of(TrackRole::Piano)
    } else {
        generated
    };
    PianoRoll::from_notes(&notes, grid)
}

fn roll_notes(roll: &PianoRoll, grid: &Grid) -> Vec<PieceNote> {
    roll.to_notes(grid, Role::Piano.channel(), 72)
        .into_iter()
        .map(|n| (n.pitch, n.start, n.end, n.velocity))
        .collect()
}

/// A continuation of `piece` after its last bar, written to the CONTINUATION track. Chords
/// planned in the chord lane past the music start the new bars they fall on.
pub async fn continue_piece<F, Fut>(
    model: &Performer,
    piece: &Piece,
    options: &Options,
    device: &Device,
    mut on_progress: F,
) -> Result<Piece, GenerateError>
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
    piece
        .validate()
        .map_err(|e| GenerateError::Read(e.to_string()))?;
    let bar = Token::Bar.id();
    // A region: the music before it is the prompt, and the model writes exactly its bars.
    let region = match options.region {
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
            let whole = prompt_tokens(&piece.to_song())?;
            let bars = whole.iter().filter(|&&id| id == bar).count();
            (whole, bars)
        }
        Some((from, ..)) => {
            // The whole piece on its own bars (so a rest before the region keeps the bar's
            // length and meter), cut at the region's first bar line: the notes before it,
            // held on as they are.
            let whole = match prompt_tokens(&piece.to_song()) {
                Ok(ids) => ids,
                Err(GenerateError::EmptyPrompt) => vec![Token::Bos.id()],
                Err(e) => return Err(e),
            };
            (with_bars(whole, *from), *from)
        }
    };
    let (prompt, first_bar) = cut_prompt(&whole, options.max_prompt_tokens.max(16));
    let cells = piece
        .bar_chords()
        .map_err(|e| GenerateError::Read(e.to_string()))?;
    let planned_to = region
        .as_ref()
        .map_or(cells.len(), |r| r.1.min(cells.len()));
    let plan: Vec<Option<Chord>> = (prompt_bars..planned_to)
        .map(|b| cells[b].first().copied().flatten())
        .collect();
    let prompt_notes = decode(&prompt)?.notes;
    let length = match &region {
        None => Length {
            tokens: options.tokens,
            bars: options.bars,
            may_end: options.may_end,
            context: options.context,
        },
        Some((from, to, _)) => Length {
            tokens: options.tokens.max(256 * (to - from)).min(20_000),
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
    let sampling = Sampling {
        temperature: options.temperature,
        top_p: options.top_p,
        seed: options.seed,
    };
    let mut ids = prompt.clone();
    let mut since = 0;
    let total = length.tokens;
    let added = continue_tokens(
        model,
        &prompt,
        length,
        sampling,
        &plan,
        options.watch(),
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
            on_progress(Progress {
                done: p.added,
                total,
                notes,
                attention: p.attention,
            })
        },
    )
    .await?;
    let mut all = prompt;
    all.extend(added);
    let notes = keep(place(piece, &all, first_bar, &prompt_notes)?);
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
            name: CONTINUATION_TRACK.into(),
            role: TrackRole::Generated,
            program: 0,
            channel: Some(3),
            notes,
        }),
    }
    out.refresh();
    Ok(out)
}

/// The watched head's attention over the whole piece as a continuation model reads it (its
/// tokens, the last `max_prompt_tokens` of them), reported as rows: the map a user asks for
/// after generating, or for any piece.
pub async fn continuation_attention<F, Fut>(
    model: &Performer,
    piece: &Piece,
    options: &Options,
    device: &Device,
    mut on_progress: F,
) -> Result<usize, GenerateError>
where
    F: FnMut(Progress) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    piece
        .validate()
        .map_err(|e| GenerateError::Read(e.to_string()))?;
    let whole = prompt_tokens(&piece.to_song())?;
    let (prompt, _) = cut_prompt(&whole, options.max_prompt_tokens.max(16));
    let length = Length::tokens(0);
    let sampling = Sampling {
        temperature: 1.0,
        top_p: 1.0,
        seed: options.seed,
    };
    let total = prompt.len();
    continue_tokens(
        model,
        &prompt,
        length,
        sampling,
        &[],
        options.watch(),
        device,
        |p| {
            on_progress(Progress {
                done: p.attention.as_ref().map_or(0, |a| a.keys),
                total,
                notes: None,
                attention: p.attention,
            })
        },
    )
    .await?;
    Ok(total)
}

/// `ids` (a prompt from [`prompt_tokens`]) cut or padded with empty bars to hold exactly
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

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;
