//! A live take for the page: the piano accompanies a melody while it is played (see
//! [`crate::generate::live`]). The take starts on a bar of the piece and may run past its end
//! (the grid goes on in the last bar's meter); the page sends the keys in ticks and asks for
//! each sixteenth shortly before it sounds; at the end the piano's notes and the chords
//! decided live go back into the piece.

use burn::tensor::Device;
use serde::{Deserialize, Serialize};

use super::PedalMode;
use super::accompany::{ModelPlay, kept_piano, roll_notes};
use crate::generate::live::{Live, LiveChords, LiveStep};
use crate::generate::piece_input_with;
use crate::generate::texture::TextureEcho;
use crate::generate::{GenerateError, PianoSampling};
use crate::model::performer::Performer;
use crate::music::pedal::model::{PedalModel, PedalStream, Steps};
use crate::music::piece::{Piece, PieceNote, PiecePedal, chord_cell};

/// How a take starts.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LiveOptions {
    /// The bar the take starts on (0-based).
    pub from_bar: usize,
    /// Bars of room after the piece's end (a take longer than that stops there; `null`: the
    /// default).
    #[serde(deserialize_with = "room_or_default")]
    pub bars: usize,
    pub seed: u64,
    /// The piano's temperatures (else the model's, chosen on validation songs).
    pub piano_temperature: Option<f32>,
    pub hold_temperature: Option<f32>,
    /// About this many times the onsets the model would play (the page's Density, as for a
    /// step-by-step accompaniment; `None`: as it plays).
    pub density: Option<f32>,
    /// How strongly a phrase the lane repeats plays like its first occurrence (the Generate
    /// panel's Texture echo; `None`: 1 where the model has a lean; 0: not at all).
    pub texture_echo: Option<f32>,
    /// The sustain pedal of the take's piano (the Generate panel's Pedal): learnt from its
    /// notes when the take ends, none, or the piano part's as it was.
    pub pedal: super::PedalMode,
}

/// A take's room after the piece, the default where none is given (`null`: the CLI's settings
/// carry a continuation's `bars` as null when only a token limit is asked).
fn room_or_default<'de, D: serde::Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    Ok(Option::<usize>::deserialize(d)?.unwrap_or(LiveOptions::default().bars))
}

impl Default for LiveOptions {
    fn default() -> Self {
        Self {
            from_bar: 0,
            bars: 200,
            seed: 0,
            piano_temperature: None,
            hold_temperature: None,
            density: None,
            texture_echo: None,
            pedal: super::PedalMode::Learnt,
        }
    }
}

/// Where the take's sixteenths fall, for the page to time them: step `s` starts at
/// `beat_ticks[s / steps_per_beat]` plus its share of that beat.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveGrid {
    pub from_step: usize,
    pub from_tick: u64,
    pub steps: usize,
    pub steps_per_beat: usize,
    pub beat_ticks: Vec<u64>,
    /// The first beat of every bar.
    pub bar_starts: Vec<usize>,
    /// Per bar from the take's: whether the chord lane planned it (else its chords are decided
    /// live, when a harmonizer is given).
    pub planned_bars: Vec<bool>,
}

/// What a take wrote: the piano's notes from its start (piece ticks) and, from `from_bar`, each
/// bar's chord cell where the chords were decided live (`None`: planned, kept).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveResult {
    pub from_tick: u64,
    pub end_tick: u64,
    pub piano: Vec<PieceNote>,
    pub from_bar: usize,
    pub cells: Vec<Option<String>>,
    /// The sustain pedal over the take's span (`from_tick` to `end_tick`; the rest of the
    /// piano part keeps its own): the learnt pedal of the piano it played, none (empty), or
    /// `None` to keep the part's pedal as it was.
    pub pedal: Option<Vec<PiecePedal>>,
}

/// Starts a take on `piece` with the step-by-step accompaniment `model` (its own sampling
/// unless the options say otherwise) and, for the bars the chord lane leaves empty, the causal
/// harmonizer `chords`. With the learnt pedal and a causal `pedal` model, the piano is
/// pedalled as it plays (each step's moves in its [`LiveStep`]); a whole-song model pedals
/// it when the take stops ([`live_result`]).
pub async fn live_start(
    model: &Performer,
    play: &ModelPlay,
    chords: Option<LiveChords<'_>>,
    piece: &Piece,
    options: &LiveOptions,
    pedal: Option<&PedalModel>,
    device: &Device,
) -> Result<(Live, LiveGrid), GenerateError> {
    piece.validate()?;
    for (key, value) in [
        ("pianoTemperature", options.piano_temperature),
        ("holdTemperature", options.hold_temperature),
        ("density", options.density),
        ("textureEcho", options.texture_echo),
    ] {
        if let Some(v) = value
            && let Err(message) = super::limits::limit(key).check(f64::from(v))
        {
            return Err(GenerateError::Read(message));
        }
    }
    if !(1..=2000).contains(&options.bars) {
        return Err(GenerateError::Read(
            "a live take has room for 1 to 2000 bars after the piece".into(),
        ));
    }
    let own = piece.grid(|_| true);
    let short = piece.bars.len().saturating_sub(own.num_bars());
    let grid = own.extended(short + options.bars);
    if options.from_bar >= grid.num_bars() {
        return Err(GenerateError::Read(format!(
            "bar {} is past the end of the piece",
            options.from_bar + 1
        )));
    }
    let mut cells = piece.bar_chords()?;
    cells.truncate(grid.num_bars());
    let planned_bar = |bar: usize| cells.get(bar).is_some_and(|c| !c.is_empty());
    let mut planned = vec![false; grid.num_beats()];
    for bar in 0..grid.num_bars() {
        for beat in grid.bar_beats(bar) {
            planned[beat] = planned_bar(bar);
        }
    }
    let from = grid.bar_steps(options.from_bar).start;
    let from_beat = from / grid.steps_per_beat;
    let harmonized = chords.is_some();
    let input = piece_input_with(piece, grid.clone(), false, |beats| {
        if harmonized {
            // Open bars from the take's start are decided live, not read from the old melody.
            for (beat, chord) in beats.iter_mut().enumerate().skip(from_beat) {
                if !planned[beat] {
                    *chord = None;
                }
            }
        }
    })?;
    let given = kept_piano(piece, &grid);
    let model_sampling = play.sampling;
    let sampling = PianoSampling {
        temperature: options
            .piano_temperature
            .unwrap_or(model_sampling.temperature),
        hold_temperature: options
            .hold_temperature
            .unwrap_or(model_sampling.hold_temperature),
        threshold: None,
        seed: options.seed,
        density: options.density.unwrap_or(1.0),
    };
    let view = LiveGrid {
        from_step: from,
        from_tick: grid.tick_at(from),
        steps: grid.num_steps(),
        steps_per_beat: grid.steps_per_beat,
        beat_ticks: grid.beat_ticks.clone(),
        bar_starts: grid.bar_starts.clone(),
        planned_bars: (options.from_bar..grid.num_bars())
            .map(planned_bar)
            .collect(),
    };
    let mut live = Live::start(
        model, chords, input, planned, &given, from, sampling, device,
    )
    .await?;
    // A returning phrase plays like its first occurrence, heard in the take or written before;
    // the melody of a bar is played as it goes, so the lean is the pooled one.
    let strength = options.texture_echo.unwrap_or(play.texture_strength);
    let echo = play
        .texture_echo
        .and_then(|lean| TextureEcho::repeats(lean, strength, &live.input.sheet.labels))
        .map(TextureEcho::unheard);
    live.set_texture(echo);
    if options.pedal == PedalMode::Learnt {
        live.pedal = pedal
            .filter(|m| m.causal)
            .map(|m| PedalStream::new(m.clone(), from))
            .transpose()
            .map_err(GenerateError::Read)?;
    }
    Ok((live, view))
}

/// A key event of the page: `[pitch, tick, on]` (`on` 1 for down, 0 for up).
pub type KeyEvent = (u8, f64, u8);

/// Hears `events` (in the order played) and decides every step up to `step`.
pub async fn live_step(
    live: &mut Live,
    model: &Performer,
    chords: Option<LiveChords<'_>>,
    events: &[KeyEvent],
    step: usize,
    device: &Device,
) -> Result<Vec<LiveStep>, GenerateError> {
    let grid = &live.input.sheet.grid;
    let spb = grid.steps_per_beat as f64;
    let at: Vec<f64> = events
        .iter()
        .map(|&(_, tick, _)| grid.beat_at(tick.max(0.0).round() as u64) * spb)
        .collect();
    for (&(pitch, _, on), at) in events.iter().zip(at) {
        if on != 0 {
            live.note_on(pitch, at);
        } else {
            live.note_off(pitch, at);
        }
    }
    live.decide(model, chords, step, device).await
}

/// The take's result so far: the piano from its start to the last step decided, the chords
/// decided live, and the sustain pedal over it as `pedal` says: learnt — as it was played
/// where the take was pedalled live (what was heard is what is kept), else by `model` from
/// the piano played, the melody heard and the chords as decided.
pub fn live_result(live: &Live, pedal: PedalMode, model: Option<&PedalModel>) -> LiveResult {
    let grid = &live.input.sheet.grid;
    let decided = live.decided();
    let from_tick = grid.tick_at(decided.start);
    let end_tick = grid.tick_at(decided.end);
    let mut roll = live.piano().clone();
    for t in decided.end..roll.num_steps {
        for p in 0..crate::music::roll::PITCHES {
            roll.set(t, p, false, false, 0);
        }
    }
    let pedal = match (pedal, model) {
        (PedalMode::Played, _) => None,
        (PedalMode::Learnt, _) if live.pedal.is_some() => {
            let stream = live.pedal.as_ref().expect("a live pedal");
            Some(stream.events(grid, decided.end))
        }
        (PedalMode::Learnt, Some(model)) if !decided.is_empty() => {
            let sheet = &live.input.sheet;
            let steps = Steps::for_model(model, grid, &sheet.labels, (&roll, &sheet.rolls.melody));
            Some(model.pedal(&steps, grid, decided.clone()))
        }
        _ => Some(Vec::new()),
    };
    // A note held into the take from before it is part of what the take played from its
    // start; the rest before the take stays the piece's.
    let piano = roll_notes(&roll, grid)
        .into_iter()
        .filter(|n| n.2 > from_tick)
        .map(|(p, s, e, v)| (p, s.max(from_tick), e, v))
        .collect();
    let spb = grid.steps_per_beat.max(1);
    let (from_bar, _) = grid.bar_of_step(decided.start);
    let last_bar = if decided.is_empty() {
        from_bar
    } else {
        grid.bar_of_step(decided.end - 1).0 + 1
    };
    let cells = (from_bar..last_bar)
        .map(|bar| {
            let beats = grid.bar_beats(bar);
            let open = live.decides_chords() && beats.clone().all(|b| !live.planned(b));
            let heard: Vec<_> = beats
                .clone()
                .filter(|&b| b * spb < decided.end)
                .map(|b| live.chords()[b])
                .collect();
            (open && !heard.is_empty()).then(|| {
                // A bar the take ended in: its last chord heard goes on to the bar's end (a
                // cell is spread over the whole bar).
                let mut chords = heard.clone();
                chords.resize(beats.len(), *heard.last().expect("not empty"));
                chord_cell(&chords)
            })
        })
        .collect();
    LiveResult {
        from_tick,
        end_tick,
        piano,
        from_bar,
        cells,
        pedal,
    }
}
