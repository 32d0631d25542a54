//! An accompaniment for a piece's melody and lanes, streamed and written back as its piano
//! track; a region rewrites only its bars.

use burn::tensor::Device;

use super::family::{Generated, Run, Studio, Written};
use std::rc::Rc;

use serde::{Deserialize, Serialize};

use super::{ACCOMPANIMENT_TRACK, Asked, BadOption, Common, PedalMode, Progress};
use crate::generate::binarize::{Binarize, binarize};
use crate::generate::texture::{Answers, TextureEcho};
use crate::generate::{
    AccompanimentInput, GenerateError, Given, MapFeatures, PianoSampling, Reports, accompany_batch,
    accompany_probs, input_example, piece_input, splice, watched_pass,
};
use crate::model::config::Task;
use crate::model::performer::Performer;
use crate::models::ModelDefaults;
use crate::music::dynamics::{Context, Dynamics};
use crate::music::grid::Grid;
use crate::music::midi::Note;
use crate::music::pedal;
use crate::music::pedal::model::{PedalModel, Steps};
use crate::music::piece::{Piece, PieceNote, PieceTrack, TrackRole};
use crate::music::playing::chord_tone_ratio;
use crate::music::roll::{GENERATED_VELOCITY, PianoRoll, Role};
use crate::music::texture::donor::Donor;
use crate::music::texture::echo::EchoLean;

/// How a model plays unless told otherwise: its defaults from the manifest that the
/// accompaniment reads.
#[derive(Clone, Copy, Debug)]
pub struct ModelPlay {
    pub binarize: Option<Binarize>,
    pub sampling: PianoSampling,
    pub texture_echo: Option<EchoLean>,
    /// The echo's strength when the options ask for none (the model's, chosen on validation).
    pub texture_strength: f32,
}

impl Default for ModelPlay {
    fn default() -> Self {
        Self {
            binarize: None,
            sampling: PianoSampling::default(),
            texture_echo: None,
            texture_strength: 1.0,
        }
    }
}

impl ModelPlay {
    pub fn of(defaults: &ModelDefaults) -> Self {
        Self {
            binarize: defaults.binarize,
            sampling: defaults.piano_sampling(),
            texture_echo: defaults.texture_echo,
            texture_strength: defaults.texture_strength.unwrap_or(1.0),
        }
    }
}

/// How to accompany, for the page and the CLI alike: both fill one of these (the page's JSON,
/// the CLI's flags), [`Asked::check`] says in words what is wrong with it, and the model's own
/// defaults (chosen on validation data) fill what is left `None`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AccompanyOptions {
    /// The seed, the alternatives, the watched head, and the region: the piano there is
    /// rewritten, kept elsewhere (the generated track, else the pianist's) with the melody
    /// everywhere; a model that writes step by step continues from the piano before its first
    /// bar.
    #[serde(flatten)]
    pub common: Common,
    /// The note threshold (else the model's, chosen on validation data). A model that writes
    /// step by step draws its notes unless one is given.
    pub threshold: Option<f32>,
    /// Step by step: the sampling temperature (else the model's).
    pub piano_temperature: Option<f32>,
    /// Step by step: the temperature of the draws that decide whether a sounding note is held
    /// (else the model's).
    pub hold_temperature: Option<f32>,
    /// Step by step: about this many times the onsets the model would play
    /// ([`PianoSampling::density`]; `None`: as the model plays).
    pub density: Option<f32>,
    /// Step by step: how strongly a phrase the lane repeats plays like its first occurrence
    /// (the texture echo: its rhythm in each register, re-voiced to the chords under it), as a
    /// multiple of the lean the training songs' pianists justify (`None`: 1 where the model
    /// has one; 0: not at all).
    pub texture_echo: Option<f32>,
    /// Step by step: a texture to play like, a gallery texture or bars a person chose
    /// ([`Donor`]): the bars written (the region's, else every bar) cycle through its bars,
    /// its rhythm in its registers over their own chords and melody, at the texture echo's
    /// strength. `None`: a phrase the lane repeats plays like its first occurrence.
    pub texture: Option<Donor>,
    /// The velocity model that gives the written piano its dynamics (the Session's or the
    /// CLI's, never read from JSON); without one every note has one velocity.
    #[serde(skip)]
    pub dynamics: Option<Rc<Dynamics>>,
    /// The sustain pedal of the bars written ([`PedalMode`]; learnt by default).
    pub pedal: PedalMode,
    /// The learnt pedal (the Session's or the CLI's, never read from JSON); without one a
    /// learnt pedal writes none.
    #[serde(skip)]
    pub pedal_model: Option<Rc<PedalModel>>,
}

impl Default for AccompanyOptions {
    fn default() -> Self {
        Self {
            common: Common::default(),
            threshold: None,
            piano_temperature: None,
            hold_temperature: None,
            density: None,
            texture_echo: None,
            texture: None,
            dynamics: None,
            pedal: PedalMode::Learnt,
            pedal_model: None,
        }
    }
}

impl Asked for AccompanyOptions {
    fn common(&self) -> &Common {
        &self.common
    }

    fn common_mut(&mut self) -> &mut Common {
        &mut self.common
    }

    fn numbers(&self) -> Vec<(&'static str, Option<f64>)> {
        vec![
            ("threshold", self.threshold.map(f64::from)),
            ("pianoTemperature", self.piano_temperature.map(f64::from)),
            ("holdTemperature", self.hold_temperature.map(f64::from)),
            ("density", self.density.map(f64::from)),
            ("textureEcho", self.texture_echo.map(f64::from)),
        ]
    }

    fn check_rest(&self) -> Result<(), BadOption> {
        if let Some(Err(message)) = self.texture.as_ref().map(Donor::check) {
            return Err(BadOption {
                field: "texture",
                message,
            });
        }
        Ok(())
    }
}

impl AccompanyOptions {
    /// How the probabilities of a model that writes at once become notes: the model's rule
    /// (`model`, chosen on validation data), with the threshold given here if any.
    pub fn binarize(&self, model: Option<Binarize>) -> Binarize {
        let mut b = model.unwrap_or_default();
        if let Some(t) = self.threshold {
            b.threshold = t;
        }
        b
    }

    /// How a step-by-step accompaniment draws its notes: the temperatures given here, else the
    /// model's (`model`), and the threshold when one is given.
    pub fn piano_sampling(&self, model: PianoSampling) -> PianoSampling {
        PianoSampling {
            temperature: self.piano_temperature.unwrap_or(model.temperature),
            threshold: self.threshold,
            hold_temperature: self.hold_temperature.unwrap_or(model.hold_temperature),
            seed: self.common.seed,
            density: self.density.unwrap_or(1.0),
        }
    }
}

/// The accompaniment task: a piano part for a piece's melody (and bridge) and lanes, the whole
/// piece or a region's bars.
pub struct Accompany;

impl Studio for Accompany {
    const MODEL: Task = Task::Accompaniment;
    type Options = AccompanyOptions;
    type Cache = ();
    const VERB: &'static str = "accompany";

    fn check(options: &AccompanyOptions) -> Result<(), BadOption> {
        Asked::check(options)
    }

    async fn generate<F, Fut>(
        run: &Run<'_>,
        piece: &Piece,
        options: &AccompanyOptions,
        _: &mut (),
        on_progress: F,
    ) -> Result<Generated, GenerateError>
    where
        F: FnMut(Progress) -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let options = AccompanyOptions {
            dynamics: run.dynamics.cloned(),
            pedal_model: run.pedal.cloned(),
            ..options.clone()
        };
        let pieces = accompany_pieces(
            run.model,
            &ModelPlay::of(run.defaults),
            piece,
            &options,
            run.device,
            on_progress,
        )
        .await?;
        Ok(Generated::pieces(pieces))
    }

    async fn attention<F, Fut>(
        run: &Run<'_>,
        piece: &Piece,
        options: &AccompanyOptions,
        map: &mut MapFeatures,
        on_progress: F,
    ) -> Option<Result<usize, GenerateError>>
    where
        F: FnMut(Progress) -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        Some(
            accompaniment_attention(
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

    /// Where it wrote, how many piano notes, and the share of them on tones of the chord lane's
    /// chords.
    fn describe(_before: &Piece, written: &Written, options: &AccompanyOptions) -> String {
        let region = options.common.region.map(|[from, to]| {
            let to = to.min(written.piece.bars.len());
            (
                [from, to],
                format!(
                    "bars {}-{to} rewritten, the rest of the piece kept",
                    from + 1
                ),
            )
        });
        accompanied(&written.piece, region)
    }
}

/// What an accompaniment wrote, in words: where (the whole piece, else the bars of `region`
/// as its words say), how many piano notes, and the share of them on tones of the chord
/// lane's chords.
pub(super) fn accompanied(out: &Piece, region: Option<([usize; 2], String)>) -> String {
    let grid = out.grid(|_| true);
    let input = match piece_input(out, grid, true) {
        Ok(input) => input,
        Err(e) => return format!("an accompaniment that cannot be read back ({e})"),
    };
    let grid = &input.sheet.grid;
    let notes: Vec<Note> = out
        .tracks
        .iter()
        .filter(|t| t.role == TrackRole::Generated)
        .flat_map(|t| &t.notes)
        .map(|&(pitch, start, end, velocity)| Note {
            pitch,
            velocity,
            start,
            end: end.max(start + 1),
            channel: 0,
        })
        .collect();
    let (where_, notes) = match region {
        None => (format!("{} bars accompanied", grid.num_bars()), notes),
        Some(([from, to], said)) => {
            let ticks = out.bar_tick(from)..out.bar_tick(to);
            let inside = notes.into_iter().filter(|n| ticks.contains(&n.start));
            (said, inside.collect())
        }
    };
    let roll = PianoRoll::from_notes(&notes, grid);
    let ratio = chord_tone_ratio(&roll, &input.chords, grid.steps_per_beat);
    format!(
        "{where_}: {} piano notes there{}",
        notes.len(),
        ratio.map_or(String::new(), |r| format!(
            ", {:.0} % of them chord tones",
            100.0 * r
        ))
    )
}

/// An accompaniment for the melody (and bridge) of `piece` with its chord and phrase lanes as
/// labels; the result replaces the piece's piano and generated tracks. The first of
/// [`accompany_pieces`] (one alternative, whatever `options` asks).
pub async fn accompany_piece<F, Fut>(
    model: &Performer,
    play: &ModelPlay,
    piece: &Piece,
    options: &AccompanyOptions,
    device: &Device,
    on_progress: F,
) -> Result<Piece, GenerateError>
where
    F: FnMut(Progress) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    // One piece: the options as given (their seed checked, not wrapped), no alternatives.
    let mut options = options.clone();
    options.common.alternatives = None;
    let mut pieces = accompany_pieces(model, play, piece, &options, device, on_progress).await?;
    Ok(pieces.swap_remove(0))
}

/// [`Asked::count`] accompaniments, the k-th with seed `seed + k` (each the piece that seed
/// writes alone): a model that writes step by step writes them together
/// ([`accompany_batch`]), one that writes at once one after another. Progress counts every
/// alternative and streams the first one's notes.
pub async fn accompany_pieces<F, Fut>(
    model: &Performer,
    play: &ModelPlay,
    piece: &Piece,
    options: &AccompanyOptions,
    device: &Device,
    mut on_progress: F,
) -> Result<Vec<Piece>, GenerateError>
where
    F: FnMut(Progress) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    options.check()?;
    piece.validate()?;
    if !piece
        .tracks
        .iter()
        .any(|t| t.role == TrackRole::Melody && !t.notes.is_empty())
    {
        return Err(GenerateError::NoMelodyTrack);
    }
    // Every track counts for the grid's extent (a kept piano may outlast the melody); the
    // model reads the melody and bridge only.
    let input = piece_input(piece, piece.grid(|_| true), true)?;
    let e = input_example(model, &input);
    let grid = &input.sheet.grid;
    let (region, given) = match options.common.region {
        None => (0..e.len, None),
        Some([from, to]) => {
            let bars = grid.num_bars();
            if from >= bars {
                return Err(GenerateError::Read(format!(
                    "bar {} is past the end of the piece ({bars} bars)",
                    from + 1
                )));
            }
            let steps = grid.bar_steps(from).start..grid.bar_steps(to.min(bars) - 1).end;
            (steps, Some(kept_piano(piece, grid)))
        }
    };
    let each: Vec<AccompanyOptions> = (0..options.count())
        .map(|k| options.alternative(k))
        .collect();
    let rolls = if model.config.is_autoregressive() {
        let samplings: Vec<PianoSampling> = each
            .iter()
            .map(|o| o.piano_sampling(play.sampling))
            .collect();
        let strength = options.texture_echo.unwrap_or(play.texture_strength);
        let answers = answers_for(model, play, &input, region.clone(), options)?;
        let texture = play
            .texture_echo
            .zip(answers.clone())
            .and_then(|(lean, a)| TextureEcho::new(lean, strength, a));
        let given = Given {
            roll: given.as_ref(),
            region: region.clone(),
            texture: texture.as_ref(),
            reference: answers.as_ref(),
        };
        accompany_batch(
            model,
            &e,
            given,
            &samplings,
            Reports {
                every: options.common.chunk_steps,
                watch: options.common.watch(),
            },
            device,
            |p| {
                let notes = roll_notes(&p.rolls[0], grid);
                on_progress(Progress {
                    done: p.done,
                    total: p.total,
                    bars: None,
                    notes: Some(notes),
                    attention: p.attention,
                    alternative: (samplings.len() > 1).then_some([0, samplings.len()]),
                })
            },
        )
        .await?
    } else {
        if options.texture.is_some() {
            return Err(no_texture());
        }
        let b = options.binarize(play.binarize);
        let k = each.len();
        let mut rolls = Vec::with_capacity(k);
        for (i, o) in each.iter().enumerate() {
            let watch = options.common.watch().filter(|_| i == 0);
            let (onset, sustain) = accompany_probs(
                model,
                &e,
                o.common.seed,
                options.common.chunk_steps,
                watch,
                device,
                |p| {
                    let notes = roll_notes(&binarize(p.onset, p.sustain, p.done, b), grid);
                    on_progress(Progress {
                        done: p.done,
                        total: p.total,
                        bars: None,
                        notes: Some(notes),
                        attention: p.attention,
                        alternative: (k > 1).then_some([i + 1, k]),
                    })
                },
            )
            .await?;
            let roll = binarize(&onset, &sustain, e.len, b);
            rolls.push(match &given {
                Some(given) => splice(given, &roll, region.clone()),
                None => roll,
            });
        }
        rolls
    };
    Ok(rolls
        .into_iter()
        .zip(&each)
        .map(|(roll, o)| with_piano(piece, &input, roll, region.clone(), o))
        .collect())
}

/// What each step of an accompaniment of `input` answers: the donor's bars over `region` when
/// `options` chose a texture, else the phrase lane's repeats.
fn answers_for(
    model: &Performer,
    play: &ModelPlay,
    input: &AccompanimentInput,
    region: std::ops::Range<usize>,
    options: &AccompanyOptions,
) -> Result<Option<Answers>, GenerateError> {
    let labels = &input.sheet.labels;
    let Some(donor) = &options.texture else {
        return Ok(Answers::repeats(labels));
    };
    if play.texture_echo.is_none() && !model.config.conditioning.is_some_and(|c| c.reference) {
        return Err(no_texture());
    }
    Answers::donor(labels, region, donor)
        .map(Some)
        .ok_or_else(|| {
            GenerateError::Read(format!(
                "the texture \"{}\" has no bar to lend the bars asked for",
                donor.name
            ))
        })
}

/// A texture asked of a model that cannot follow one, in words.
fn no_texture() -> GenerateError {
    GenerateError::Read(
        "this model cannot play like a texture: choose a model that writes step by step (the default does)".into(),
    )
}

/// "Pedal these bars": the piano part's sustain pedal (the generated track's, else the
/// pianist's) over bars `[from, to)` (from 0) pedalled again by `model` from its notes and the
/// lanes, the rest of its pedal kept as it was. Refused in words when there is no piano part
/// or no bar to pedal.
pub fn repedal(
    piece: &Piece,
    [from, to]: [usize; 2],
    model: &crate::music::pedal::model::PedalModel,
) -> Result<Piece, GenerateError> {
    let index = [TrackRole::Generated, TrackRole::Piano]
        .iter()
        .find_map(|&role| {
            piece
                .tracks
                .iter()
                .position(|t| t.role == role && !t.notes.is_empty())
        })
        .ok_or_else(|| {
            GenerateError::Read(
                "there is no piano part to pedal: accompany the melody first".into(),
            )
        })?;
    pedal_track(piece, index, [from, to], model)
}

/// `piece` with track `index`'s sustain pedal over bars `[from, to)` (from 0; `to` past the
/// end stops at it) written by `model` from the track's notes and the lanes, the rest of its
/// pedal kept.
pub fn pedal_track(
    piece: &Piece,
    index: usize,
    [from, to]: [usize; 2],
    model: &crate::music::pedal::model::PedalModel,
) -> Result<Piece, GenerateError> {
    let input = piece_input(piece, piece.grid(|_| true), false)?;
    let grid = &input.sheet.grid;
    let bars = grid.num_bars();
    if from >= to || from >= bars {
        return Err(GenerateError::Read(format!(
            "bars {}–{} are not bars of the piece ({bars} bars)",
            from + 1,
            to
        )));
    }
    let region = grid.bar_steps(from).start..grid.bar_steps(to.min(bars) - 1).end;
    let notes: Vec<Note> = piece.tracks[index].midi_notes(0).collect();
    let roll = PianoRoll::from_notes(&notes, grid);
    let steps = Steps::for_model(
        model,
        grid,
        &input.sheet.labels,
        (&roll, &input.sheet.rolls.melody),
    );
    let new = model.pedal(&steps, grid, region.clone());
    let mut out = piece.clone();
    let old = std::mem::take(&mut out.tracks[index].pedal);
    out.tracks[index].pedal = pedal::splice(
        &old,
        &new,
        grid.tick_at(region.start),
        grid.tick_at(region.end),
    );
    Ok(out)
}

/// The sustain pedal of the written piano `roll`: the replaced piano's (the generated track's,
/// else the pianist's) outside `region`, and over it as [`AccompanyOptions::pedal`] says — the learnt
/// pedal of the notes written, the pedal as it was, or none.
fn written_pedal(
    piece: &Piece,
    input: &AccompanimentInput,
    roll: &PianoRoll,
    region: std::ops::Range<usize>,
    options: &AccompanyOptions,
) -> Vec<crate::music::piece::PiecePedal> {
    let of = |role: TrackRole| {
        piece
            .tracks
            .iter()
            .find(|t| t.role == role && !t.notes.is_empty())
    };
    let old = of(TrackRole::Generated)
        .or_else(|| of(TrackRole::Piano))
        .map(|t| t.pedal.clone())
        .unwrap_or_default();
    let grid = &input.sheet.grid;
    let new = match (options.pedal, &options.pedal_model) {
        (super::PedalMode::Played, _) => return old,
        (super::PedalMode::Learnt, Some(model)) => {
            let sheet = &input.sheet;
            let steps = Steps::for_model(model, grid, &sheet.labels, (roll, &sheet.rolls.melody));
            model.pedal(&steps, grid, region.clone())
        }
        _ => Vec::new(),
    };
    pedal::splice(
        &old,
        &new,
        grid.tick_at(region.start),
        grid.tick_at(region.end),
    )
}

/// `piece` with `roll` as its piano (replacing its piano and generated tracks), the steps of
/// `region` given the velocity model's dynamics (a kept piano keeps its own).
fn with_piano(
    piece: &Piece,
    input: &AccompanimentInput,
    mut roll: PianoRoll,
    region: std::ops::Range<usize>,
    options: &AccompanyOptions,
) -> Piece {
    let grid = &input.sheet.grid;
    if let Some(dynamics) = &options.dynamics {
        let ctx = Context::new(grid, &input.sheet.labels, &input.sheet.rolls.melody);
        dynamics.apply(&ctx, &mut roll, region.clone(), options.common.seed);
    }
    let pedal = written_pedal(piece, input, &roll, region, options);
    let mut out = piece.clone();
    out.tracks
        .retain(|t| !matches!(t.role, TrackRole::Piano | TrackRole::Generated));
    out.tracks.push(PieceTrack {
        pedal,
        name: ACCOMPANIMENT_TRACK.into(),
        role: TrackRole::Generated,
        program: 0,
        channel: Some(Role::Piano.channel()),
        notes: roll_notes(&roll, grid),
    });
    out.refresh();
    out
}

/// The watched head's attention of an accompaniment model over the piece as it stands, sent as
/// rows through `on_progress`: one teacher-forced pass, nothing sampled. A model that writes
/// step by step reads the piano on screen (the generated track, else the pianist's) as the
/// piano it wrote, so after a generation the map is the one the generation drew, and after an
/// edit, a rewrite or a live take it is the map of the notes shown. With `cache` (one per
/// model), another head or a layer no deeper over the same notes is drawn from the features
/// the last pass kept. Returns the steps.
pub async fn accompaniment_attention<F, Fut>(
    model: &Performer,
    piece: &Piece,
    options: &AccompanyOptions,
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
    let mut input = piece_input(piece, piece.grid(|_| true), true)?;
    if model.config.is_autoregressive() {
        input.sheet.rolls.piano = kept_piano(piece, &input.sheet.grid);
    }
    let e = input_example(model, &input);
    let Some(watch) = options.common.watch() else {
        return Ok(e.len);
    };
    let rows = watched_pass(model, &e, options.common.seed, watch, device, cache).await?;
    on_progress(Progress::map(e.len, e.len, rows)).await;
    Ok(e.len)
}

/// The piano a "regenerate these bars" keeps: the generated track's, else the pianist's.
pub(super) fn kept_piano(piece: &Piece, grid: &Grid) -> PianoRoll {
    piece.piano_roll(grid)
}

pub(super) fn roll_notes(roll: &PianoRoll, grid: &Grid) -> Vec<PieceNote> {
    roll.to_notes(grid, Role::Piano.channel(), GENERATED_VELOCITY)
        .into_iter()
        .map(|n| (n.pitch, n.start, n.end, n.velocity))
        .collect()
}
