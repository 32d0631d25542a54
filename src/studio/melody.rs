//! A melody for a piece's lanes, written into its melody track: for the bars asked (a region
//! keeps the melody around it and joins it: a note sounding into the region goes on while the
//! model holds it), for the planned bars past the music, or for the whole of a piece without a
//! melody (a song from a plan).

use burn::tensor::Device;

use super::family::{Generated, Run, Studio, Written};
use serde::{Deserialize, Serialize};

use super::{Asked, BadOption, Common, Progress, limits};
use crate::data::melody::{HOLD, MelodyStep, class_pitch, judged_chord, melody_steps};
use crate::data::sheet::Sheet;
use crate::generate::melody::{MelodySampling, melody_attention, melody_notes, write_melody};
use crate::generate::{GenerateError, MapFeatures, piece_input};
use crate::model::config::Task;
use crate::model::performer::Performer;
use crate::models::ModelDefaults;
use crate::music::grid::Grid;
use crate::music::piece::{Piece, PieceNote, PieceTrack, TrackRole};
use crate::music::roll::{PianoRoll, Role};

/// The velocity of a written melody's notes.
pub const MELODY_VELOCITY: u8 = 90;

/// Which bars a melody is written for: `options.common.region`, else the planned bars past the music
/// (from the first bar after its last note), else every bar of a piece without melody notes;
/// `None` when the piece has a melody and nothing is planned (there is nothing to write
/// without a region).
pub fn melody_bars(piece: &Piece, options: &MelodyOptions) -> Option<[usize; 2]> {
    if options.common.region.is_some() {
        return options.common.region;
    }
    let has_melody = piece
        .tracks
        .iter()
        .any(|t| t.role == TrackRole::Melody && !t.notes.is_empty());
    let has_notes = piece.tracks.iter().any(|t| !t.notes.is_empty());
    let music = if has_notes {
        piece.grid(|_| true).num_bars()
    } else {
        0
    };
    if piece.bars.len() > piece.prompt_bars && has_melody {
        Some([music, piece.bars.len()])
    } else if !has_melody {
        Some([0, piece.bars.len()])
    } else {
        None
    }
}

/// How a melody is drawn: `options`' temperatures and echo (else the model's own, chosen on
/// validation songs), top-p, seed and range; the accompaniment read when the piece has one.
pub fn melody_sampling(
    options: &MelodyOptions,
    model: &ModelDefaults,
    piece: &Piece,
) -> MelodySampling {
    let d = MelodySampling::default();
    let [low, high] = options.melody_range.unwrap_or([d.low, d.high]);
    MelodySampling {
        temperature: options
            .temperature
            .or(model.temperature)
            .unwrap_or(d.temperature),
        pitch_temperature: options.pitch_temperature.or(model.pitch_temperature),
        top_p: options.top_p,
        seed: options.common.seed,
        low,
        high,
        accompaniment: has_accompaniment(piece),
        echo: options.echo.or(model.echo).unwrap_or(d.echo),
    }
}

fn accompanies(role: TrackRole) -> bool {
    matches!(
        role,
        TrackRole::Piano | TrackRole::Generated | TrackRole::Bridge
    )
}

fn has_accompaniment(piece: &Piece) -> bool {
    piece
        .tracks
        .iter()
        .any(|t| accompanies(t.role) && !t.notes.is_empty())
}

/// How to write a melody, for the page and the CLI alike: both fill one of these,
/// [`Asked::check`] says in words what is wrong with it, and the model's own defaults (chosen
/// on validation songs) fill what is left `None`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MelodyOptions {
    /// The seed, the alternatives, the watched head, and the region: the bars sung (else those
    /// [`melody_bars`] finds).
    #[serde(flatten)]
    pub common: Common,
    /// The rhythm's temperature (else the model's; 1 where none was chosen).
    pub temperature: Option<f32>,
    /// The temperature of a new note's pitch (else the model's; the rhythm's where none).
    pub pitch_temperature: Option<f32>,
    pub top_p: f32,
    /// How strongly a bar the phrase lane repeats leans towards its first occurrence
    /// ([`MelodySampling::echo`]; `None`: the model's).
    pub echo: Option<f32>,
    /// The lowest and highest pitch it may sing (MIDI numbers; `None`: C3–C6).
    pub melody_range: Option<[u8; 2]>,
}

impl Default for MelodyOptions {
    fn default() -> Self {
        Self {
            common: Common::default(),
            temperature: None,
            pitch_temperature: None,
            top_p: limits::default("topP").unwrap_or(0.95) as f32,
            echo: None,
            melody_range: None,
        }
    }
}

impl Asked for MelodyOptions {
    fn common(&self) -> &Common {
        &self.common
    }

    fn common_mut(&mut self) -> &mut Common {
        &mut self.common
    }

    /// The settings the page's ranges hold (the sampling's own check, when it is drawn, says
    /// what the melody model allows).
    fn numbers(&self) -> Vec<(&'static str, Option<f64>)> {
        vec![
            ("temperature", self.temperature.map(f64::from)),
            ("topP", Some(f64::from(self.top_p))),
            ("echo", self.echo.map(f64::from)),
        ]
    }
}

/// The melody task: a tune for a piece's lanes (its chords and phrases), over a region, the
/// bars planned past the music, or the whole of a piece without one.
pub struct Melody;

impl Studio for Melody {
    const MODEL: Task = Task::Melody;
    type Options = MelodyOptions;
    type Cache = ();
    const VERB: &'static str = "sing over";
    const WRITES_FROM_A_PLAN: bool = true;

    fn check(options: &MelodyOptions) -> Result<(), BadOption> {
        Asked::check(options)
    }

    async fn generate<F, Fut>(
        run: &Run<'_>,
        piece: &Piece,
        options: &MelodyOptions,
        _: &mut (),
        on_progress: F,
    ) -> Result<Generated, GenerateError>
    where
        F: FnMut(Progress) -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let pieces = melody_pieces(
            run.model,
            run.defaults,
            piece,
            options,
            run.device,
            on_progress,
        )
        .await?;
        Ok(Generated::pieces(pieces))
    }

    async fn attention<F, Fut>(
        run: &Run<'_>,
        piece: &Piece,
        options: &MelodyOptions,
        map: &mut MapFeatures,
        on_progress: F,
    ) -> Option<Result<usize, GenerateError>>
    where
        F: FnMut(Progress) -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        Some(
            melody_attention_map(
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

    /// Where it sang, how many notes, their range, and the share of its onsets on chord changes
    /// and strong beats that are tones of the lane's chord there (as `eval --task melody`
    /// counts them, over the bars wholly written).
    fn describe(before: &Piece, written: &Written, options: &MelodyOptions) -> String {
        let out = &written.piece;
        let [from, to] = melody_bars(before, options).unwrap_or([0, out.bars.len()]);
        let to = to.min(out.bars.len());
        let ticks = out.bar_tick(from)..out.bar_tick(to);
        let notes: Vec<_> = out
            .tracks
            .iter()
            .filter(|t| t.role == TrackRole::Melody)
            .flat_map(|t| &t.notes)
            .filter(|n| ticks.contains(&n.1))
            .collect();
        let low = notes.iter().map(|n| n.0).min().unwrap_or(0);
        let high = notes.iter().map(|n| n.0).max().unwrap_or(0);
        let fit = piece_input(out, out.plan_grid(), false).ok().map(|input| {
            let sheet = &input.sheet;
            let steps = melody_steps(&sheet.rolls.melody, &sheet.labels.melody, 0);
            let grid = &sheet.grid;
            let n = steps.len().min(sheet.labels.len()).min(grid.num_steps());
            let region = grid.step_at(ticks.start).min(n)..grid.step_at(ticks.end).min(n);
            let spb = grid.steps_per_beat.max(1);
            let (mut judged, mut tones) = (0usize, 0usize);
            for bar in 0..grid.num_bars() {
                let span = grid.bar_steps(bar);
                if span.start < region.start || span.end > region.end {
                    continue;
                }
                let beats = span.len() / spb;
                for s in span.clone() {
                    let Some(p) = class_pitch(steps[s].class) else {
                        continue;
                    };
                    if let Some(chord) = judged_chord(&sheet.labels, s, s - span.start, beats, spb)
                    {
                        judged += 1;
                        tones += usize::from(chord.pitch_classes().any(|pc| pc == p % 12));
                    }
                }
            }
            if judged == 0 {
                0.0
            } else {
                tones as f64 / judged as f64
            }
        });
        format!(
            "bars {}-{to} sung: {} melody notes{}",
            from + 1,
            notes.len(),
            match fit {
                // Nothing sung there (the lanes read as an intro or a rest): no range, no fit.
                _ if notes.is_empty() => " (rests throughout)".to_string(),
                Some(f) => format!(
                    ", pitches {low}-{high}, {:.0} % of the notes on chord changes and strong \
                     beats chord tones",
                    100.0 * f
                ),
                None => format!(", pitches {low}-{high}"),
            }
        )
    }
}

/// The first of [`melody_pieces`].
pub async fn melody_piece<F, Fut>(
    model: &Performer,
    defaults: &ModelDefaults,
    piece: &Piece,
    options: &MelodyOptions,
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
    let mut pieces = melody_pieces(model, defaults, piece, &options, device, on_progress).await?;
    Ok(pieces.swap_remove(0))
}

/// [`Asked::count`] melodies for `piece`'s lanes, the k-th with seed `seed + k`, one after
/// another: each the piece with its melody track rewritten over the bars of `options.common.region`
/// (else [`melody_bars`]). Progress streams the melody being written.
pub async fn melody_pieces<F, Fut>(
    model: &Performer,
    defaults: &ModelDefaults,
    piece: &Piece,
    options: &MelodyOptions,
    device: &Device,
    mut on_progress: F,
) -> Result<Vec<Piece>, GenerateError>
where
    F: FnMut(Progress) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    options.check()?;
    piece.validate()?;
    let [from, to] = match melody_bars(piece, options) {
        Some(bars) => bars,
        None => {
            return Err(GenerateError::Read(
                "the piece has a melody already: choose the bars to write a new one for, or \
                 plan bars past its end"
                    .into(),
            ));
        }
    };
    let grid = piece.plan_grid();
    let bars = grid.num_bars();
    if from >= bars {
        return Err(GenerateError::Read(format!(
            "bar {} is past the end of the piece ({bars} bars)",
            from + 1
        )));
    }
    let region = grid.bar_steps(from).start..grid.bar_steps(to.min(bars) - 1).end;
    let sheet = melody_sheet(piece, grid)?;
    let k = options.count();
    let mut out = Vec::with_capacity(k);
    for i in 0..k {
        let o = options.alternative(i);
        let sampling = melody_sampling(&o, defaults, piece);
        let steps = write_melody(
            model,
            &sheet,
            region.clone(),
            &sampling,
            options.common.chunk_steps,
            device,
            |p| {
                let notes = written(p.steps, region.start, &sheet.grid);
                on_progress(Progress {
                    done: p.done,
                    total: p.total,
                    bars: None,
                    notes: Some(notes),
                    attention: None,
                    alternative: (k > 1).then_some([i + 1, k]),
                })
            },
        )
        .await?;
        let sounding = region
            .start
            .checked_sub(1)
            .map_or(0, |s| sheet.labels.melody[s]);
        out.push(with_melody(
            piece,
            &sheet.grid,
            region.clone(),
            sounding,
            &steps,
        ));
    }
    Ok(out)
}

/// The watched head's attention over `piece`'s melody as it stands (every bar with notes, the
/// accompaniment read when there is one): the map the page draws after a melody is written or
/// edited. Returns the steps mapped.
pub async fn melody_attention_map<F, Fut>(
    model: &Performer,
    piece: &Piece,
    options: &MelodyOptions,
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
    let sheet = melody_sheet(piece, piece.grid(|_| true))?;
    let len = sheet.labels.len().min(sheet.rolls.num_steps());
    let Some(watch) = options.common.watch() else {
        return Ok(len);
    };
    let accompaniment = has_accompaniment(piece);
    let rows = melody_attention(
        model,
        &sheet,
        accompaniment,
        options.common.seed,
        watch,
        device,
        cache,
    )
    .await?;
    on_progress(Progress::map(len, len, rows)).await;
    Ok(len)
}

/// The sheet a melody model reads: every bar (planned ones too), the lanes, the melody, and
/// the piano and bridge as its accompaniment.
fn melody_sheet(piece: &Piece, grid: Grid) -> Result<Sheet, GenerateError> {
    let input = piece_input(piece, grid, false)?;
    let mut sheet = input.sheet;
    let song = piece.to_song();
    let piano: Vec<_> = piece
        .tracks
        .iter()
        .zip(&song.tracks)
        .filter(|(t, _)| matches!(t.role, TrackRole::Piano | TrackRole::Generated))
        .flat_map(|(_, s)| s.notes.iter())
        .collect();
    sheet.rolls.piano = PianoRoll::from_notes(piano, &sheet.grid);
    Ok(sheet)
}

/// The notes of written steps from step `from`, in piece ticks.
fn written(steps: &[MelodyStep], from: usize, grid: &Grid) -> Vec<PieceNote> {
    melody_notes(steps, from)
        .into_iter()
        .map(|(p, s, e)| (p, grid.tick_at(s), grid.tick_at(e), MELODY_VELOCITY))
        .collect()
}

/// `piece` with `steps` written over `region` of its melody track (one made when it has none):
/// notes starting in the region go, notes sounding into it stop at its start, but for the
/// melody's note sounding just before it (`sounding`, 0 for none), which goes on while the
/// region's first steps hold it.
fn with_melody(
    piece: &Piece,
    grid: &Grid,
    region: std::ops::Range<usize>,
    sounding: u8,
    steps: &[MelodyStep],
) -> Piece {
    let held = steps.iter().take_while(|s| s.class == HOLD).count();
    let (start, end) = (grid.tick_at(region.start), grid.tick_at(region.end));
    let cut = grid.tick_at(region.start + held);
    let mut out = piece.clone();
    let index = match out.tracks.iter().position(|t| t.role == TrackRole::Melody) {
        Some(i) => i,
        None => {
            out.tracks.insert(
                0,
                PieceTrack {
                    pedal: Vec::new(),
                    name: Role::Melody.track_name().into(),
                    role: TrackRole::Melody,
                    program: 0,
                    channel: Some(Role::Melody.channel()),
                    notes: Vec::new(),
                },
            );
            0
        }
    };
    let track = &mut out.tracks[index];
    track.notes.retain(|n| !(start..end).contains(&n.1));
    for n in track
        .notes
        .iter_mut()
        .filter(|n| n.1 < start && n.2 >= start)
    {
        n.2 = if n.0 == sounding && held > 0 {
            cut
        } else {
            n.2.min(start)
        };
    }
    track.notes.extend(written(steps, region.start, grid));
    track.notes.sort_by_key(|n| (n.1, n.0));
    out.refresh();
    out
}
