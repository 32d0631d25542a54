//! The live take as a row of the task table: the piece's melody played as a take, each
//! sixteenth of the piano decided from what was heard before it, as the page's live
//! play-along decides it while a person plays ([`super::live`]). The page streams a take
//! (`liveStart`, `liveStep`, `liveStop`: a take is heard as it is played); this row plays a
//! written melody through the same calls at once, so the Session's `generate("live")` and the
//! CLI's `generate --task live` give what the live accompanist would play over it, and the
//! piece gets the take's piano as the page puts a take into it ([`with_take`]).

use super::accompany::{ModelPlay, accompanied};
use super::family::{Generated, Run, Studio, Written};
use super::live::{KeyEvent, LiveOptions, LiveResult, live_result, live_start, live_step};
use super::{ACCOMPANIMENT_TRACK, BadOption, Progress, check_numbers};
use crate::generate::GenerateError;
use crate::model::config::Task;
use crate::music::pedal;
use crate::music::piece::{Piece, PieceTrack, TrackRole};
use crate::music::roll::Role;

/// Steps decided between two progress reports.
const REPORT_EVERY: usize = 64;

/// The live take over a piece's melody (its melody tracks' notes, played from the region's
/// first bar, else the first, to the region's end, else the music's).
pub struct Take;

/// A take's settings (the page's live settings: `fromBar`, `seed`, `pedal`, …; its room
/// after the piece is not read, the take stops with the music) and where it stops, `toBar`
/// (`None`: the end of the music; the page's take stops when the person does). A `region`
/// (the bars every task is asked for, the CLI's `--bars A-B`) is the take's bars.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TakeOptions {
    #[serde(flatten)]
    pub live: LiveOptions,
    pub to_bar: Option<usize>,
    pub region: Option<[usize; 2]>,
    /// What every task is asked; a take writes one piece.
    pub alternatives: Option<usize>,
}

impl TakeOptions {
    /// The bar the take starts on, and where it stops (`None`: with the music).
    fn bars(&self) -> (usize, Option<usize>) {
        match self.region {
            Some([from, to]) => (from, Some(to)),
            None => (self.live.from_bar, self.to_bar),
        }
    }
}

impl Studio for Take {
    const MODEL: Task = Task::Accompaniment;
    type Options = TakeOptions;
    const SETTINGS: &'static str = "the live settings";
    const VERB: &'static str = "play along with";

    /// The page's ranges for the piano's settings, and bars in order (a take writes one
    /// piece: the number of alternatives is checked, as every task's, and not read).
    fn check(options: &TakeOptions) -> Result<(), BadOption> {
        let live = &options.live;
        check_numbers(&[
            ("seed", Some(live.seed as f64)),
            ("alternatives", options.alternatives.map(|k| k as f64)),
            ("pianoTemperature", live.piano_temperature.map(f64::from)),
            ("holdTemperature", live.hold_temperature.map(f64::from)),
            ("density", live.density.map(f64::from)),
            ("textureEcho", live.texture_echo.map(f64::from)),
        ])?;
        match options.bars() {
            (from, Some(to)) if from >= to => Err(BadOption {
                field: "region",
                message: "choose at least one bar to play over".into(),
            }),
            _ => Ok(()),
        }
    }
    type Cache = ();

    async fn generate<F, Fut>(
        run: &Run<'_>,
        piece: &Piece,
        options: &TakeOptions,
        _: &mut (),
        mut on_progress: F,
    ) -> Result<Generated, GenerateError>
    where
        F: FnMut(Progress) -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        // The take ends with the music (or the region's last bar).
        let music = piece.grid(|_| true);
        let bars = music.num_bars().min(piece.bars.len().max(1));
        let (from_bar, to_bar) = options.bars();
        if from_bar >= bars {
            return Err(GenerateError::Read(format!(
                "the music ends in bar {bars}: a take over it starts before that, not on bar {}",
                from_bar + 1
            )));
        }
        let to_bar = to_bar.unwrap_or(bars).clamp(from_bar + 1, bars);
        let play = ModelPlay::of(run.defaults);
        let pedal = run.pedal.map(|p| &**p);
        // The take stops with the music: a bar of room after it is all the grid needs.
        let settings = LiveOptions {
            from_bar,
            bars: 1,
            ..options.live.clone()
        };
        let (mut live, grid) =
            live_start(run.model, &play, None, piece, &settings, pedal, run.device).await?;
        let end = music.bar_steps(to_bar - 1).end;
        let ticks = &live.input.sheet.grid;
        let step_ticks: Vec<u64> = (0..=end).map(|t| ticks.tick_at(t)).collect();
        let keys = key_events(piece, step_ticks[grid.from_step], step_ticks[end]);
        let mut heard = 0;
        for (t, &tick) in step_ticks.iter().enumerate().take(end).skip(grid.from_step) {
            // What was played before the step sounds is heard when it is decided.
            let now = keys[heard..]
                .iter()
                .take_while(|k| k.1 < tick as f64)
                .count();
            let events = &keys[heard..heard + now];
            heard += now;
            live_step(&mut live, run.model, None, events, t, run.device).await?;
            let done = t + 1 - grid.from_step;
            if done.is_multiple_of(REPORT_EVERY) || t + 1 == end {
                let progress = Progress {
                    done,
                    total: end - grid.from_step,
                    bars: None,
                    notes: None,
                    attention: None,
                    alternative: None,
                };
                if !on_progress(progress).await {
                    return Err(GenerateError::Cancelled);
                }
            }
        }
        let result = live_result(&live, options.live.pedal, pedal);
        Ok(Generated::pieces(vec![with_take(piece, &result)]))
    }

    fn describe(_before: &Piece, written: &Written, options: &TakeOptions) -> String {
        let (from, to) = options.bars();
        let to = to.unwrap_or(written.piece.bars.len());
        let to = to.min(written.piece.bars.len());
        let said = format!("a live take over bars {}-{to}", from + 1);
        accompanied(&written.piece, Some(([from, to], said)))
    }
}

/// The key events of `piece`'s melody from tick `from` to `to` (its melody tracks' notes, as
/// a person would play them: down at a note's start, up at its end), in the order played.
fn key_events(piece: &Piece, from: u64, to: u64) -> Vec<KeyEvent> {
    let mut keys: Vec<KeyEvent> = piece
        .tracks
        .iter()
        .filter(|t| t.role == TrackRole::Melody)
        .flat_map(|t| &t.notes)
        .filter(|n| n.1 >= from && n.1 < to)
        .flat_map(|&(pitch, start, end, _)| {
            [
                (pitch, start as f64, 1),
                (pitch, end.max(start + 1) as f64, 0),
            ]
        })
        .collect();
    // A key comes up before another goes down at the same tick (legato into the same key).
    keys.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.2.cmp(&b.2)));
    keys
}

/// `piece` with a take's piano, chords and pedal put in as the page puts them
/// (`withLivePiano` in `www/live-plan.js`): the piano's notes from the take's start replace the
/// generated track's there (a new one in place of the pianist's, whose notes before the take
/// it keeps), each bar whose chords were decided live gets them, and the take's pedal is
/// spliced over its span.
pub fn with_take(piece: &Piece, result: &LiveResult) -> Piece {
    let mut next = piece.clone();
    if !next.tracks.iter().any(|t| t.role == TrackRole::Generated) {
        let pianist: Vec<&PieceTrack> = next
            .tracks
            .iter()
            .filter(|t| t.role == TrackRole::Piano)
            .collect();
        let notes = pianist.iter().flat_map(|t| t.notes.clone()).collect();
        let pedal = pianist
            .iter()
            .find(|t| !t.pedal.is_empty())
            .map(|t| t.pedal.clone())
            .unwrap_or_default();
        next.tracks.retain(|t| t.role != TrackRole::Piano);
        next.tracks.push(PieceTrack {
            name: ACCOMPANIMENT_TRACK.into(),
            role: TrackRole::Generated,
            program: 0,
            channel: Some(Role::Piano.channel()),
            notes,
            pedal,
        });
    }
    let (from, end) = (result.from_tick, result.end_tick);
    let track = next
        .tracks
        .iter_mut()
        .find(|t| t.role == TrackRole::Generated)
        .expect("a generated track");
    let before = track
        .notes
        .iter()
        .filter(|n| n.1 < from)
        .map(|&(p, s, e, v)| (p, s, e.min((s + 1).max(from)), v));
    let after = track
        .notes
        .iter()
        .filter(|n| n.1 >= from && n.2 > end)
        .map(|&(p, s, e, v)| (p, s.max(end), e, v));
    let mut notes: Vec<_> = before
        .chain(after)
        .chain(result.piano.iter().copied())
        .collect();
    notes.sort_by_key(|n| (n.1, n.0));
    track.notes = notes;
    if let Some(new) = &result.pedal {
        track.pedal = pedal::splice(&track.pedal, new, from, end);
    }
    let last = result.piano.iter().map(|n| n.2).max().unwrap_or(0);
    while next.bars.len() < 2000 && next.bar_tick(next.bars.len()) < last {
        next.set_bar_count(next.bars.len() + 1);
    }
    for (i, cell) in result.cells.iter().enumerate() {
        let bar = result.from_bar + i;
        if let (Some(cell), Some(slot)) = (cell, next.chords.get_mut(bar)) {
            slot.clone_from(cell);
        }
    }
    next.end_tick = next.end_tick.max(last);
    next.refresh();
    next
}
