//! Accompaniment in one parallel pass: what the model reads from a song (its melody and
//! bridge rolls, chord and phrase labels given or detected), the pass itself with its progress,
//! and the song with the piano part written back.

use burn::tensor::Device;
use burn::tensor::activation::sigmoid;

use super::{AttentionRows, GenerateError, MapFeatures, Watch, read_f32, watched_rows};
use crate::data::Example;
use crate::data::corpus::WindowSpec;
use crate::data::sheet::Sheet;
use crate::data::stack;
use crate::model::config::Task;
use crate::model::performer::{Inputs, Performer};
use crate::music::chords::Chord;
use crate::music::grid::Grid;
use crate::music::labels::{StepLabels, detect_structure};
use crate::music::midi::{Note, Song};
use crate::music::phrases::Segment;
pub use crate::music::piece::spread;
use crate::music::piece::{Piece, TrackRole};
use crate::music::roll::{MultiRoll, PITCHES, PianoRoll, Role};
use crate::music::tokens::STEPS_PER_BEAT;

/// What the accompaniment model reads from a song.
#[derive(Clone, Debug)]
pub struct AccompanimentInput {
    /// The song's grid, melody and bridge rolls, and labels.
    pub sheet: Sheet,
    /// Chords per beat and phrases, as used (given or detected).
    pub chords: Vec<Option<Chord>>,
    pub phrases: Vec<Segment>,
    /// The tracks kept in the output (melody and bridge).
    pub kept: Vec<usize>,
}

impl AccompanimentInput {
    /// The input on `grid` from the melody's and the bridge's tracks and notes, with chords
    /// per beat and phrases: the labels put on the steps, the tracks kept.
    fn new(
        grid: Grid,
        [(melody, melody_notes), (bridge, bridge_notes)]: [(Vec<usize>, Vec<Note>); 2],
        chords: Vec<Option<Chord>>,
        phrases: Vec<Segment>,
    ) -> Self {
        let mut rolls = MultiRoll::new(grid.num_steps());
        rolls.melody = PianoRoll::from_notes(&melody_notes, &grid);
        rolls.bridge = PianoRoll::from_notes(&bridge_notes, &grid);
        let labels = StepLabels::new(&grid, &rolls.melody, &chords, &phrases);
        let mut kept = melody;
        kept.extend(bridge);
        Self {
            sheet: Sheet {
                grid,
                rolls,
                labels,
            },
            chords,
            phrases,
            kept,
        }
    }
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
    song_input_on(
        song,
        Grid::for_song(song, STEPS_PER_BEAT),
        bar_chords,
        phrases,
        need_melody,
    )
}

/// As [`song_input`], on `grid` (the song's own, or one with room after it).
pub fn song_input_on(
    song: &Song,
    grid: Grid,
    bar_chords: Option<&[Vec<Option<Chord>>]>,
    phrases: Option<Vec<Segment>>,
    need_melody: bool,
) -> Result<AccompanimentInput, GenerateError> {
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
    let (melody_notes, bridge_notes) = (notes(&melody), notes(&bridge));
    let mut chords = detected.chords;
    if let Some(given) = bar_chords {
        if given.len() > grid.num_bars() {
            return Err(GenerateError::TooManyChords {
                given: given.len(),
                bars: grid.num_bars(),
            });
        }
        lay_cells(&mut chords, &grid, given);
    }
    let phrases = phrases.unwrap_or(detected.phrases);
    let parts = [(melody, melody_notes), (bridge, bridge_notes)];
    Ok(AccompanimentInput::new(grid, parts, chords, phrases))
}

/// What the accompaniment model reads from `piece` as the person set it, on `grid`: the
/// tracks marked melody and bridge, and the chord and phrase lanes as they are. Nothing is
/// detected again and no role goes through a track name: a bar with an empty chord cell reads
/// no chord, and a piece with no track marked melody has no melody (a file gets its roles
/// when it is read, `Piece::from_song`; after that they are the person's). Without
/// `need_melody`, such a piece (a piano piece to continue) gets an empty melody roll instead
/// of an error. `kept` indexes the piece's tracks (as `Piece::to_song` orders them).
///
/// A chord edit reaches the model in four calls: [`Piece::bar_chords`] parses the lane,
/// [`lay_cells`] spreads it over the beats, [`StepLabels::new`] puts it on the steps, and
/// `write_features` (`crate::data::features`) makes the model's inputs.
pub fn piece_input(
    piece: &Piece,
    grid: Grid,
    need_melody: bool,
) -> Result<AccompanimentInput, GenerateError> {
    piece_input_with(piece, grid, need_melody, |_| {})
}

/// [`piece_input`] with the chord lane's beats changed by `edit` before the labels are made
/// from them (a live take leaves the open bars' chords to be decided as it plays): the labels
/// are built once, from the chords the model will read.
pub fn piece_input_with(
    piece: &Piece,
    grid: Grid,
    need_melody: bool,
    edit: impl FnOnce(&mut [Option<Chord>]),
) -> Result<AccompanimentInput, GenerateError> {
    if grid.num_steps() == 0 {
        return Err(GenerateError::EmptyPrompt);
    }
    let role = |role: TrackRole| -> Vec<usize> {
        (0..piece.tracks.len())
            .filter(|&i| piece.tracks[i].role == role)
            .collect()
    };
    let melody = role(TrackRole::Melody);
    if need_melody && melody.iter().all(|&i| piece.tracks[i].notes.is_empty()) {
        return Err(GenerateError::NoMelody);
    }
    let bridge = role(TrackRole::Bridge);
    // The song's tracks are the piece's, in order (notes as MIDI writes them).
    let song = piece.to_song();
    let notes = |ids: &[usize]| -> Vec<Note> {
        ids.iter()
            .flat_map(|&i| song.tracks[i].notes.iter().copied())
            .collect()
    };
    let (melody_notes, bridge_notes) = (notes(&melody), notes(&bridge));
    let mut cells = piece.bar_chords()?;
    cells.truncate(grid.num_bars());
    let mut chords = vec![None; grid.num_beats()];
    lay_cells(&mut chords, &grid, &cells);
    edit(&mut chords);
    let parts = [(melody, melody_notes), (bridge, bridge_notes)];
    Ok(AccompanimentInput::new(
        grid,
        parts,
        chords,
        piece.segments(),
    ))
}

/// Writes bar cells (from bar 0) over `chords`, one per beat of `grid`: each cell's chords
/// [`spread`] over its bar's beats. Cells past the grid's bars are left out.
pub fn lay_cells(chords: &mut [Option<Chord>], grid: &Grid, cells: &[Vec<Option<Chord>>]) {
    for (bar, cell) in cells.iter().enumerate().take(grid.num_bars()) {
        let beats = grid.bar_beats(bar);
        let n = beats.len();
        for (beat, chord) in beats.zip(spread(cell, n)) {
            if let Some(slot) = chords.get_mut(beat) {
                *slot = chord;
            }
        }
    }
}

/// The model's input for the whole of `input`.
pub fn input_example(model: &Performer, input: &AccompanimentInput) -> Example {
    let spec = WindowSpec::for_model(&model.config, input.sheet.grid.num_steps());
    input.sheet.example(&spec, 0, 0)
}

/// The watched head's attention rows over example `e` in one pass (noise seeded by `seed`, as a
/// generation's): the blocks up to the watched layer only, that head's rows only, no output
/// read — the map of `e`'s notes without anything the map does not show.
pub async fn watched_pass(
    model: &Performer,
    e: &Example,
    seed: u64,
    watch: Watch,
    device: &Device,
    cache: Option<&mut MapFeatures>,
) -> Result<AttentionRows, GenerateError> {
    let fingerprint = MapFeatures::fingerprint(&[&e.inputs, &e.coordinates], &[], seed);
    let build = || {
        let (inputs, _, coords) = stack(std::slice::from_ref(e), device);
        let coords = coords.filter(|_| model.config.pe.is_structural());
        (Inputs::Rolls(inputs), coords)
    };
    super::watched_forward(
        model,
        Task::Accompaniment,
        build,
        seed,
        watch,
        device,
        cache.map(|c| (c, fingerprint)),
    )
    .await
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
