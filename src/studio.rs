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
mod tests {
    use super::*;
    use crate::model::config::PerformerConfig;
    use crate::model::pe::{PeConfig, PeKind};
    use crate::music::fixtures;
    use crate::music::tokens::VOCAB_SIZE;

    fn piece() -> Piece {
        Piece::from_song(&fixtures::song(0, 8), "fixture.mid").unwrap()
    }

    #[test]
    fn accompaniment_streams_and_replaces_the_piano() {
        let device = Device::flex();
        let model = tiny(Task::Accompaniment, 1, &device);
        let piece = piece();
        let options = Options {
            threshold: Some(0.45),
            chunk_steps: 32,
            watch: Some(WatchOptions { layer: 1, head: 0 }),
            ..Options::default()
        };
        let mut reports = Vec::new();
        let out = pollster::block_on(accompany_piece(
            &model,
            None,
            PianoSampling::default(),
            &piece,
            &options,
            &device,
            |p| {
                reports.push((p.done, p.total, p.notes.map(|n| n.len()), p.attention));
                async { true }
            },
        ))
        .unwrap();
        let steps = 8 * 16;
        assert_eq!(reports.len(), steps / 32);
        assert_eq!(reports.last().unwrap().0, steps);
        // Each report's attention holds its chunk's rows over every key so far.
        for (i, r) in reports.iter().enumerate() {
            let rows = r.3.as_ref().unwrap();
            assert_eq!(rows.start, i * 32);
            assert_eq!(rows.keys, (i + 1) * 32);
            assert_eq!(rows.values.len(), 32 * rows.keys);
        }
        let names: Vec<_> = out.tracks.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["MELODY", "PIANO"]);
        assert_eq!(out.tracks[1].role, TrackRole::Generated);
        assert_eq!(
            out.tracks[1].notes.len(),
            reports.last().unwrap().2.unwrap()
        );
        assert_eq!(
            out.tracks[0], piece.tracks[0],
            "the melody is kept as it was"
        );
        // Streaming in chunks gives the one-pass result.
        let whole = Options {
            chunk_steps: steps,
            watch: None,
            ..options.clone()
        };
        let again = pollster::block_on(accompany_piece(
            &model,
            None,
            PianoSampling::default(),
            &piece,
            &whole,
            &device,
            |_| async { true },
        ))
        .unwrap();
        assert_eq!(again.tracks, out.tracks);
    }

    #[test]
    fn regenerating_bars_rewrites_them_and_keeps_the_rest() {
        use crate::model::config::Conditioning;
        let device = Device::flex();
        let piece = piece();
        let grid = Grid::for_song(&piece.to_song(), tokens::STEPS_PER_BEAT);
        let (from, to) = (grid.bar_ticks()[2], grid.bar_ticks()[4]);
        for conditioning in [None, Some(Conditioning::AUTOREGRESSIVE)] {
            let config = PerformerConfig::tiny(
                Task::Accompaniment,
                VOCAB_SIZE,
                PeConfig::new(PeKind::SineSpe),
            )
            .with_inputs(conditioning);
            let model = Performer::new(&config, 1, &device).unwrap();
            let run = |piece: &Piece, options: &Options| {
                pollster::block_on(accompany_piece(
                    &model,
                    None,
                    PianoSampling::default(),
                    piece,
                    options,
                    &device,
                    |_| async { true },
                ))
                .unwrap()
            };
            let options = Options {
                threshold: conditioning.is_none().then_some(0.5),
                ..Options::default()
            };
            let first = run(&piece, &options);
            let again = Options {
                seed: 7,
                region: Some([2, 4]),
                ..options.clone()
            };
            let second = run(&first, &again);
            let piano = |p: &Piece| {
                p.tracks
                    .iter()
                    .find(|t| t.role == TrackRole::Generated)
                    .unwrap()
                    .notes
                    .clone()
            };
            let (a, b) = (piano(&first), piano(&second));
            // Notes before the bars keep their start (one held into them may now end at
            // their start); those after them stay whole (one at their very end may be
            // struck again to join what comes before).
            let outside = |notes: &[PieceNote]| {
                let mut kept: Vec<(u8, u64, u64)> = notes
                    .iter()
                    .filter(|n| n.1 < from)
                    .map(|n| (n.0, n.1, 0))
                    .chain(notes.iter().filter(|n| n.1 > to).map(|n| (n.0, n.1, n.2)))
                    .collect();
                kept.sort();
                kept
            };
            let (ka, kb) = (outside(&a), outside(&b));
            let only = |x: &[(u8, u64, u64)], y: &[(u8, u64, u64)]| -> Vec<(u8, u64, u64)> {
                x.iter().filter(|n| !y.contains(n)).copied().collect()
            };
            assert!(
                ka == kb,
                "{conditioning:?}: the other bars are kept; only before {:?}, only after {:?}",
                only(&ka, &kb),
                only(&kb, &ka)
            );
            assert_eq!(second.tracks[0], piece.tracks[0], "the melody is kept");
            if conditioning.is_some() {
                let inside = |notes: &[PieceNote]| -> Vec<PieceNote> {
                    notes
                        .iter()
                        .filter(|n| n.1 >= from && n.1 < to)
                        .copied()
                        .collect()
                };
                assert_ne!(inside(&a), inside(&b), "another seed rewrites the bars");
            }
        }
        let bad = Options {
            region: Some([3, 3]),
            ..Options::default()
        };
        let err = pollster::block_on(accompany_piece(
            &model_for_errors(&device),
            None,
            PianoSampling::default(),
            &piece,
            &bad,
            &device,
            |_| async { true },
        ))
        .unwrap_err();
        assert!(err.to_string().contains("at least one bar"), "{err}");
    }

    #[test]
    fn a_continuation_rewrites_only_the_chosen_bars() {
        let device = Device::flex();
        let model = tiny(Task::Continuation, 3, &device);
        let piece = piece();
        let (from, to) = (piece.bars[4], piece.bars[6]);
        for seed in [0, 1] {
            let options = Options {
                seed,
                region: Some([4, 6]),
                ..Options::default()
            };
            let mut streamed = 0;
            let out = pollster::block_on(continue_piece(&model, &piece, &options, &device, |p| {
                if let Some(notes) = p.notes {
                    assert!(notes.iter().all(|n| n.1 >= from && n.1 < to));
                    streamed += 1;
                }
                async { true }
            }))
            .unwrap();
            assert!(streamed > 0, "notes stream in as bars complete");
            assert_eq!(out.bars, piece.bars, "no bar added or lost");
            for (before, after) in piece.tracks.iter().zip(&out.tracks) {
                let outside: Vec<PieceNote> = before
                    .notes
                    .iter()
                    .filter(|n| n.1 < from || n.1 >= to)
                    .copied()
                    .collect();
                assert_eq!(
                    after.notes, outside,
                    "{}: kept outside, cleared inside",
                    before.name
                );
            }
            let new = &out.tracks.last().unwrap();
            assert_eq!(new.name, CONTINUATION_TRACK);
            assert!(!new.notes.is_empty(), "seed {seed}: the bars are written");
            assert!(new.notes.iter().all(|n| n.1 >= from && n.1 < to));
        }
        let rewrite = |region: [usize; 2], seed: u64| {
            let options = Options {
                region: Some(region),
                seed,
                ..Options::default()
            };
            pollster::block_on(continue_piece(
                &model,
                &piece,
                &options,
                &device,
                |_| async { true },
            ))
        };
        // From the first bar: no music before it to read.
        let out = rewrite([0, 2], 0).unwrap();
        let new = &out.tracks.last().unwrap().notes;
        assert!(new.iter().all(|n| n.1 < piece.bars[2]), "{new:?}");
        // To the end: the last entry of `bars` ends the music, and a region from it writes
        // the bar after it.
        let n = piece.bars.len();
        let out = rewrite([n - 2, n], 4).unwrap();
        let (start, end) = (piece.bar_tick(n - 2), piece.bar_tick(n));
        assert!(end > piece.bars[n - 1], "the region reaches past the end");
        let new = &out.tracks.last().unwrap().notes;
        assert!(!new.is_empty(), "the last bars are written");
        assert!(
            new.iter().all(|n| n.1 >= start && n.1 < end && n.2 <= end),
            "{new:?}"
        );
        let err = rewrite([40, 42], 0).unwrap_err();
        assert!(
            err.to_string().contains("past the end of the piece"),
            "{err}"
        );
    }

    /// An untrained tiny sineSPE model for `task`.
    fn tiny(task: Task, seed: u64, device: &Device) -> Performer {
        let config = PerformerConfig::tiny(task, VOCAB_SIZE, PeConfig::new(PeKind::SineSpe));
        Performer::new(&config, seed, device).unwrap()
    }

    fn model_for_errors(device: &Device) -> Performer {
        tiny(Task::Accompaniment, 1, device)
    }

    #[test]
    fn attention_over_a_piece_covers_every_token() {
        let device = Device::flex();
        let model = tiny(Task::Continuation, 2, &device);
        let options = Options {
            watch: Some(WatchOptions { layer: 1, head: 1 }),
            ..Options::default()
        };
        let mut rows = 0;
        let total = pollster::block_on(continuation_attention(
            &model,
            &piece(),
            &options,
            &device,
            |p| {
                let a = p.attention.unwrap();
                assert_eq!(a.start, rows);
                rows += a.values.len() / a.keys;
                async { true }
            },
        ))
        .unwrap();
        assert_eq!(rows, total);
    }

    #[test]
    fn cancelling_stops_and_says_so() {
        let device = Device::flex();
        let config =
            PerformerConfig::tiny(Task::Accompaniment, VOCAB_SIZE, PeConfig::new(PeKind::None));
        let model = Performer::new(&config, 1, &device).unwrap();
        let options = Options {
            chunk_steps: 16,
            ..Options::default()
        };
        let mut calls = 0;
        let r = pollster::block_on(accompany_piece(
            &model,
            None,
            PianoSampling::default(),
            &piece(),
            &options,
            &device,
            |_| {
                calls += 1;
                async move { calls < 2 }
            },
        ));
        assert_eq!(r.unwrap_err(), GenerateError::Cancelled);
        assert_eq!(calls, 2);
    }

    #[test]
    fn continuation_follows_the_plan_and_lands_after_the_music() {
        let device = Device::flex();
        let model = tiny(Task::Continuation, 2, &device);
        let mut piece = piece();
        let bars = piece.bars.len();
        let end = piece.end_tick;
        let len = piece.bars[1] - piece.bars[0];
        for k in 0..2 {
            piece.bars.push(piece.bars[bars - 1] + len * (k + 1));
            piece.chords.push("Dm".into());
        }
        let options = Options {
            tokens: 120,
            bars: Some(2),
            seed: 5,
            watch: Some(WatchOptions { layer: 0, head: 1 }),
            ..Options::default()
        };
        let mut rows = 0;
        let out = pollster::block_on(continue_piece(&model, &piece, &options, &device, |p| {
            if let Some(a) = &p.attention {
                rows += a.values.len() / a.keys;
            }
            async { true }
        }))
        .unwrap();
        let generated = out.tracks.last().unwrap();
        assert_eq!(generated.name, CONTINUATION_TRACK);
        assert!(
            !generated.notes.is_empty(),
            "an untrained model still writes notes"
        );
        // New notes come after the prompt's last onset (possibly still in its last bar).
        let last_onset = piece
            .tracks
            .iter()
            .flat_map(|t| &t.notes)
            .map(|n| n.1)
            .max()
            .unwrap();
        assert!(
            generated.notes.iter().all(|n| n.1 >= last_onset),
            "{:?}",
            generated.notes
        );
        assert!(
            generated.notes.iter().all(|n| n.1 < end + 3 * len),
            "{end} {len} {:?} {:?}",
            piece.bars,
            generated.notes
        );
        assert!(rows > 0);
        assert_eq!(out.chords[bars], "Dm", "the planned chord stays on its bar");
        // The token stream itself: the first new bar starts with the planned chord.
        let prompt = prompt_tokens(&piece.to_song()).unwrap();
        let dm = Chord::parse_any("Dm").unwrap();
        let length = Length {
            bars: Some(1),
            ..Length::tokens(400)
        };
        let added = pollster::block_on(continue_tokens(
            &model,
            &prompt,
            length,
            Sampling::default(),
            &[dm],
            None,
            &device,
            |_| async { true },
        ))
        .unwrap();
        let at = added
            .iter()
            .position(|&id| id == Token::Bar.id())
            .expect("a new bar within 400 tokens");
        assert_eq!(
            added[at + 1..at + 3],
            [Token::Position(0).id(), Token::Chord(dm).id()]
        );
    }
}
