//! A person's files as fine-tuning pieces: what each holds for the task (melody and
//! accompaniment notes, tokens), the bars trained on and held out, and why a file cannot be
//! used, in words.

use serde::Serialize;

use crate::data::corpus::Piece as TrainPiece;
use crate::generate::piece_input;
use crate::model::config::Task;
use crate::music::midi::Note;
use crate::music::piece::{Piece, TrackRole};
use crate::music::roll::PianoRoll;
use crate::music::tokens::MAX_BAR_BEATS;

/// What was understood of one file, for the panel's list.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileReport {
    pub name: String,
    pub bars: usize,
    /// Notes the model reads as melody (and bridge), and as accompaniment.
    pub melody_notes: usize,
    pub accompaniment_notes: usize,
    /// REMI tokens of the file (what continuation trains on).
    pub tokens: usize,
    /// Bars trained on and held out.
    pub train_bars: usize,
    pub held_out_bars: usize,
    /// Why the file cannot be used for this task, in words (`None`: usable).
    pub problem: Option<String>,
}

/// One file as training pieces: the bars trained on and the held-out bars at its end.
pub(super) struct Prepared {
    pub(super) train: TrainPiece,
    pub(super) held_out: Option<TrainPiece>,
    pub(super) report: FileReport,
}

fn count_notes(piece: &Piece, roles: &[TrackRole]) -> usize {
    piece
        .tracks
        .iter()
        .filter(|t| roles.contains(&t.role))
        .map(|t| t.notes.len())
        .sum()
}

/// `piece` as training reads it for `task`, with the labels of its lanes.
pub(super) fn training_piece(piece: &Piece, task: Task) -> Result<TrainPiece, String> {
    piece.validate().map_err(|e| e.to_string())?;
    let used = |t: &crate::music::piece::PieceTrack| {
        matches!(
            t.role,
            TrackRole::Melody | TrackRole::Bridge | TrackRole::Piano
        )
    };
    let grid = piece.grid(used);
    if grid.num_steps() == 0 {
        return Err("it holds no notes in its melody or accompaniment tracks".into());
    }
    // The kinds that learn the piano under the melody read a file only with its melody.
    let need_melody = task.needs() == crate::data::kinds::Needs::MelodyAndPiano;
    let input = piece_input(piece, grid, need_melody).map_err(|e| e.to_string())?;
    // The piece's tracks in order; the tokens read the tracks training uses.
    let all = piece.to_song();
    let mut rolls = input.sheet.rolls;
    let piano: Vec<&Note> = (0..piece.tracks.len())
        .filter(|&i| piece.tracks[i].role == TrackRole::Piano)
        .flat_map(|i| all.tracks[i].notes.iter())
        .collect();
    rolls.piano = PianoRoll::from_notes(piano, &input.sheet.grid);
    let song = piece.model_song(used);
    let steps = input.sheet.grid.num_steps();
    TrainPiece::new(
        piece.name.clone(),
        &song,
        input.sheet.grid,
        rolls,
        input.sheet.labels,
        0..steps,
    )
}

/// Splits `p` at a bar line so that about `holdout` of its bars are held out: the training
/// part keeps nothing of the held-out bars (rolls, labels and tokens end at the cut).
fn split(p: TrainPiece, holdout: f64) -> (TrainPiece, Option<TrainPiece>) {
    let bars = p.sheet.grid.num_bars();
    let held = ((bars as f64) * holdout).round() as usize;
    if bars < 2 || held == 0 {
        return (p, None);
    }
    let cut_bar = bars - held.min(bars - 1);
    let cut = p.sheet.grid.bar_steps(cut_bar).start;
    // A bar of more than MAX_BAR_BEATS beats is several `Bar` tokens.
    let bar_tokens: usize = (0..cut_bar)
        .map(|b| {
            p.sheet
                .grid
                .bar_beats(b)
                .len()
                .div_ceil(MAX_BAR_BEATS)
                .max(1)
        })
        .sum();
    let token_cut = p
        .token_bars
        .get(bar_tokens)
        .copied()
        .unwrap_or(p.tokens.len());
    let mut held_out = p.clone();
    held_out.range = cut..p.range.end;
    held_out.tokens = p.tokens[token_cut..].to_vec();
    held_out.token_bars = p
        .token_bars
        .iter()
        .filter(|&&i| i >= token_cut)
        .map(|&i| i - token_cut)
        .collect();
    let mut train = p;
    train.range = 0..cut;
    train.sheet.rolls.truncate(cut);
    train.sheet.labels = train.sheet.labels.slice(0..cut);
    train.tokens.truncate(token_cut);
    train.token_bars.retain(|&i| i < token_cut);
    (train, Some(held_out))
}

pub(super) fn prepare(piece: &Piece, task: Task, holdout: f64) -> Result<Prepared, FileReport> {
    let melody_notes = count_notes(piece, &[TrackRole::Melody, TrackRole::Bridge]);
    let accompaniment_notes = count_notes(piece, &[TrackRole::Piano]);
    let mut report = FileReport {
        name: piece.name.clone(),
        bars: piece.prompt_bars,
        melody_notes,
        accompaniment_notes,
        tokens: 0,
        train_bars: 0,
        held_out_bars: 0,
        problem: None,
    };
    let problem = task.needs().lacking(melody_notes, accompaniment_notes);
    if problem.is_some() {
        report.problem = problem;
        return Err(report);
    }
    let whole = match training_piece(piece, task) {
        Ok(p) => p,
        Err(e) => {
            report.problem = Some(e);
            return Err(report);
        }
    };
    report.tokens = whole.tokens.len();
    let bars = whole.sheet.grid.num_bars();
    let (train, held_out) = split(whole, holdout);
    report.train_bars = train
        .sheet
        .grid
        .bar_of_step(train.range.end.saturating_sub(1))
        .0
        + 1;
    report.held_out_bars = bars - report.train_bars.min(bars);
    if held_out.is_none() {
        report.train_bars = bars;
    }
    Ok(Prepared {
        train,
        held_out,
        report,
    })
}

/// What was understood of each file for `task` (the panel shows it before a run starts).
pub fn inspect(pieces: &[Piece], task: Task, holdout: f64) -> Vec<FileReport> {
    pieces
        .iter()
        .map(|p| match prepare(p, task, holdout) {
            Ok(prepared) => prepared.report,
            Err(report) => report,
        })
        .collect()
}
