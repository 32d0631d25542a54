//! Pieces of music ready for training, and the batches drawn from them: windows of rolls and
//! labels for accompaniment, windows of REMI tokens for continuation, each with random crops
//! on bar lines and random transposition. Nothing here touches files or tensors, so the page
//! builds the same batches from the user's own MIDI files.

use std::ops::Range;

use rand::RngExt;
use rand::rngs::StdRng;

use super::example::Example;
pub use super::example::WindowSpec;
use super::features::token_coordinates;
use super::harmony::harmony_example;
use super::melody::melody_example;
use super::sheet::Sheet;
use crate::model::config::Task;
use crate::music::grid::Grid;
use crate::music::labels::{PhraseLabel, StepLabels};
use crate::music::midi::{Note, Song};
use crate::music::roll::{MultiRoll, PianoRoll, Role};
use crate::music::tokens::places::{TokenPlace, bar_token_steps, places};
use crate::music::tokens::{self, STEPS_PER_BEAT, Token};

/// The REMI token ids of every pitched track of `song` on `grid`, with `chords` per beat and
/// the song's tempo map (from `Bos` to `Eos`).
pub fn song_tokens(
    song: &Song,
    grid: &Grid,
    chords: &[Option<crate::music::chords::Chord>],
) -> Result<Vec<u32>, tokens::TokenError> {
    let notes: Vec<Note> = song
        .tracks
        .iter()
        .filter(|t| !t.is_drums())
        .flat_map(|t| t.notes.iter().copied())
        .collect();
    Ok(tokens::encode(&notes, grid, chords, &song.tempos)?
        .into_iter()
        .map(Token::id)
        .collect())
}

/// One song as training reads it.
#[derive(Clone, Debug)]
pub struct Piece {
    pub name: String,
    /// Its grid, rolls and labels.
    pub sheet: Sheet,
    /// Steps whose labels are trustworthy (POP909: the annotated span); crops stay inside.
    pub range: Range<usize>,
    /// The whole song as REMI token ids (every track merged, chords and tempo included).
    pub tokens: Vec<u32>,
    /// Indices of the `Bar` tokens: where token windows may start.
    pub token_bars: Vec<usize>,
    /// Where each token sits (bar, time, position, chord in force).
    pub token_places: Vec<TokenPlace>,
    /// The phrase of each bar of the tokens (one per `Bar` token).
    pub bar_phrases: Vec<Option<PhraseLabel>>,
}

impl Piece {
    /// A piece from rolls and labels already placed on `grid`; the tokens encode `notes`
    /// (every track) with the labels' chords and `song`'s tempo map.
    pub fn new(
        name: String,
        song: &Song,
        grid: Grid,
        rolls: MultiRoll,
        labels: StepLabels,
        range: Range<usize>,
    ) -> Result<Self, String> {
        let tokens =
            song_tokens(song, &grid, &labels.beat_chords()).map_err(|e| format!("{name}: {e}"))?;
        let token_bars = tokens
            .iter()
            .enumerate()
            .filter(|(_, t)| **t == Token::Bar.id())
            .map(|(i, _)| i)
            .collect();
        let bar_phrases = bar_token_steps(&grid)
            .into_iter()
            .map(|s| labels.phrase.get(s).copied().flatten())
            .collect();
        let token_places = places(&tokens);
        Ok(Self {
            name,
            sheet: Sheet {
                grid,
                rolls,
                labels,
            },
            range,
            tokens,
            token_bars,
            token_places,
            bar_phrases,
        })
    }

    /// The token window `start ..= start + spec.len` transposed by `transpose` semitones (left
    /// as it is when a pitch would leave the keyboard), and its inputs' structure coordinates
    /// when `spec` has levels.
    pub fn token_window(
        &self,
        spec: &WindowSpec,
        start: usize,
        transpose: i32,
    ) -> (Vec<u32>, Option<Vec<f32>>) {
        let window = &self.tokens[start..start + spec.len + 1];
        let (ids, shift) = match transpose_tokens(window, transpose) {
            Some(ids) => (ids, transpose),
            None => (window.to_vec(), 0),
        };
        let coordinates = (!spec.levels.is_empty()).then(|| {
            token_coordinates(
                &self.token_places[start..start + spec.len],
                &self.bar_phrases,
                &spec.levels,
                shift,
            )
        });
        (ids, coordinates)
    }

    /// A piece from any MIDI file: tracks named MELODY / BRIDGE / PIANO (as POP909 and this
    /// project's own files name them) keep their roles; otherwise the track that looks like a
    /// melody is the melody and every other pitched track is the accompaniment. Chords and
    /// phrases are detected.
    pub fn from_song(name: String, song: &Song) -> Result<Self, String> {
        let grid = Grid::for_song(song, STEPS_PER_BEAT);
        if grid.num_steps() == 0 {
            return Err(format!("{name}: the file holds no notes"));
        }
        let (labels, melody_track) = StepLabels::detect(song, &grid);
        let named: Vec<(Role, &[Note])> = song
            .tracks
            .iter()
            .filter_map(|t| Role::from_track_name(&t.name).map(|r| (r, &t.notes[..])))
            .collect();
        let rolls = if named.iter().any(|(r, _)| *r == Role::Melody) {
            MultiRoll::from_tracks(named, &grid)
        } else {
            let mut rolls = MultiRoll::new(grid.num_steps());
            let mut piano: Vec<Note> = Vec::new();
            for (i, t) in song.tracks.iter().enumerate() {
                if t.is_drums() {
                    continue;
                }
                if Some(i) == melody_track {
                    rolls.melody = PianoRoll::from_notes(&t.notes, &grid);
                } else {
                    piano.extend(t.notes.iter().copied());
                }
            }
            rolls.piano = PianoRoll::from_notes(&piano, &grid);
            rolls
        };
        let range = 0..grid.num_steps();
        Self::new(name, song, grid, rolls, labels, range)
    }

    /// Where windows of `len` steps may start: the grid's bar lines inside the usable range
    /// that leave a whole window in it (the range's start when it is shorter than a window).
    pub fn crop_starts(&self, len: usize) -> Vec<usize> {
        bar_crop_starts(&self.sheet.grid, &self.range, len)
    }

    /// Whether the piece has an accompaniment to learn from and a melody to learn it from.
    pub fn has_accompaniment(&self) -> bool {
        has_notes(&self.sheet.rolls.melody) && has_notes(&self.sheet.rolls.piano)
    }

    /// Whether the piece has a melody to harmonize and chords to learn from within its range.
    pub fn has_harmony(&self) -> bool {
        has_notes(&self.sheet.rolls.melody)
            && self.sheet.labels.chord[self.range.start.min(self.sheet.labels.len())
                ..self.range.end.min(self.sheet.labels.len())]
                .iter()
                .any(Option::is_some)
    }

    /// The melody model's window of `spec.len` steps from step `start`, transposed, reading
    /// the accompaniment when `accompaniment`.
    pub fn melody_example(
        &self,
        spec: &WindowSpec,
        start: usize,
        transpose: i32,
        accompaniment: bool,
    ) -> Example {
        let s = &self.sheet;
        melody_example(
            &s.rolls,
            &s.labels,
            &self.range,
            spec,
            start,
            transpose,
            accompaniment,
        )
    }

    /// The harmonizer's window of `spec.len` beats from beat `start`, transposed.
    pub fn harmony_example(&self, spec: &WindowSpec, start: usize, transpose: i32) -> Example {
        harmony_example(
            &self.sheet.rolls,
            &self.sheet.labels,
            &self.range,
            spec,
            start,
            transpose,
        )
    }
}

fn has_notes(r: &PianoRoll) -> bool {
    (0..r.num_steps).any(|s| (0..128).any(|p| r.onset(s, p)))
}

/// The bar lines of `grid` inside `range` that leave a whole window of `len` steps in it, or
/// the range's start when none does.
pub fn bar_crop_starts(grid: &Grid, range: &Range<usize>, len: usize) -> Vec<usize> {
    let last = range.end.saturating_sub(len).max(range.start);
    let starts: Vec<usize> = (0..grid.num_bars())
        .map(|b| grid.bar_steps(b).start)
        .filter(|s| (range.start..=last).contains(s))
        .collect();
    if starts.is_empty() {
        vec![range.start]
    } else {
        starts
    }
}

/// A batch's worth of windows, for either task.
#[derive(Clone, Debug)]
pub enum Batch {
    /// Accompaniment windows (all of one length).
    Rolls(Vec<Example>),
    /// Token windows of `len + 1` ids: inputs are the first `len`, targets the last `len`;
    /// with F-StrIPE, each window's structure coordinates of its inputs (`len` rows), else
    /// none.
    Tokens {
        ids: Vec<Vec<u32>>,
        coordinates: Vec<Vec<f32>>,
    },
}

impl Batch {
    pub fn len(&self) -> usize {
        match self {
            Batch::Rolls(e) => e.len(),
            Batch::Tokens { ids, .. } => ids.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Token ids transposed by `semitones` (pitches and chord roots), or `None` when a pitch would
/// leave the keyboard.
pub fn transpose_tokens(ids: &[u32], semitones: i32) -> Option<Vec<u32>> {
    ids.iter()
        .map(|&id| match Token::from_id(id) {
            Some(Token::Pitch(p)) => {
                let q = p as i32 + semitones;
                (0..128).contains(&q).then(|| Token::Pitch(q as u8).id())
            }
            Some(Token::Chord(Some(mut c))) => {
                c.root = (c.root as i32 + semitones).rem_euclid(12) as u8;
                Some(Token::Chord(Some(c)).id())
            }
            _ => Some(id),
        })
        .collect()
}

/// The pieces a run trains or validates on.
#[derive(Clone, Debug, Default)]
pub struct Corpus {
    pub pieces: Vec<Piece>,
}

impl Corpus {
    /// The pieces that give `task` windows of `len` to learn from.
    fn learning(&self, task: Task, len: usize) -> Vec<&Piece> {
        self.pieces
            .iter()
            .filter(|p| task.learns_from(p, len))
            .collect()
    }

    /// Checks that batches can be drawn for `task` windows of `spec.len`, in words.
    pub fn check(&self, task: Task, spec: &WindowSpec) -> Result<(), String> {
        if self.pieces.is_empty() {
            return Err("no pieces to train on".into());
        }
        if self.learning(task, spec.len).is_empty() {
            return Err(task.none_to_learn(self, spec.len));
        }
        Ok(())
    }

    /// `batch` random windows: a random piece, a crop starting on a bar line, a transposition
    /// (and what the kind's windows vary besides, [`Task::window`]).
    pub fn sample(&self, task: Task, spec: &WindowSpec, batch: usize, rng: &mut StdRng) -> Batch {
        let pieces = self.learning(task, spec.len);
        let windows: Vec<Batch> = (0..batch)
            .map(|_| {
                let p = pieces[rng.random_range(0..pieces.len())];
                let starts = task.starts(p, spec.len);
                let start = starts[rng.random_range(0..starts.len())];
                let shift = if spec.max_shift > 0 {
                    rng.random_range(-spec.max_shift..=spec.max_shift)
                } else {
                    0
                };
                task.window(p, spec, start, shift, Some(rng))
            })
            .collect();
        grouped(windows, batch)
            .pop()
            .unwrap_or(Batch::Rolls(Vec::new()))
    }

    /// Fixed held-out windows, untransposed: from each piece, windows every `stride` of its
    /// starts (bars, or bar lines of tokens), at most `limit` in all, taken round-robin over
    /// the pieces so every piece counts. Returned in batches of `batch`.
    pub fn fixed_windows(
        &self,
        task: Task,
        spec: &WindowSpec,
        stride: usize,
        limit: usize,
        batch: usize,
    ) -> Vec<Batch> {
        let stride = stride.max(1);
        let per_piece: Vec<Vec<Batch>> = self
            .learning(task, spec.len)
            .into_iter()
            .map(|p| {
                let starts = task.starts(p, spec.len).into_iter().step_by(stride);
                starts.map(|s| task.window(p, spec, s, 0, None)).collect()
            })
            .collect();
        let mut chosen: Vec<Batch> = Vec::new();
        let mut round = 0;
        while chosen.len() < limit && per_piece.iter().any(|w| w.len() > round) {
            for w in &per_piece {
                if let Some(b) = w.get(round)
                    && chosen.len() < limit
                {
                    chosen.push(b.clone());
                }
            }
            round += 1;
        }
        grouped(chosen, batch)
    }
}

/// Single windows grouped into batches of `batch`, in order.
fn grouped(windows: Vec<Batch>, batch: usize) -> Vec<Batch> {
    let mut out: Vec<Batch> = Vec::new();
    for b in windows {
        match (out.last_mut(), b) {
            (Some(Batch::Rolls(v)), Batch::Rolls(mut e)) if v.len() < batch => v.append(&mut e),
            (
                Some(Batch::Tokens { ids, coordinates }),
                Batch::Tokens {
                    ids: mut more,
                    coordinates: mut more_coordinates,
                },
            ) if ids.len() < batch => {
                ids.append(&mut more);
                coordinates.append(&mut more_coordinates);
            }
            (_, b) => out.push(b),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::music::chords::{Chord, Quality};

    #[test]
    fn crops_start_on_bar_lines_after_a_pickup() {
        // A one-beat pickup, then 4/4 bars: bar lines at steps 0, 4, 20, 36, 52.
        let beats: Vec<u64> = (0..17).map(|b| b * 480).collect();
        let grid = Grid::new(beats, 4, vec![0, 1, 5, 9, 13]);
        assert_eq!(bar_crop_starts(&grid, &(4..68), 32), vec![4, 20, 36]);
        assert_eq!(
            bar_crop_starts(&grid, &(4..30), 32),
            vec![4],
            "short range: its start"
        );
    }

    #[test]
    fn transposed_tokens_move_pitches_and_roots_and_refuse_to_leave_the_keyboard() {
        let c = Chord {
            root: 11,
            quality: Quality::Maj,
        };
        let ids = [
            Token::Bar.id(),
            Token::Chord(Some(c)).id(),
            Token::Pitch(60).id(),
            Token::Duration(4).id(),
        ];
        let up = transpose_tokens(&ids, 2).unwrap();
        assert_eq!(Token::from_id(up[2]), Some(Token::Pitch(62)));
        assert_eq!(
            Token::from_id(up[1]),
            Some(Token::Chord(Some(Chord {
                root: 1,
                quality: Quality::Maj
            })))
        );
        assert_eq!(up[3], ids[3]);
        assert_eq!(transpose_tokens(&[Token::Pitch(126).id()], 3), None);
    }

    #[test]
    fn token_windows_carry_each_tokens_place_for_fstripe() {
        use crate::model::pe::StructureLevel;
        use crate::music::phrases::Segment;
        let song = crate::music::fixtures::song(0, 16);
        let found = Piece::from_song("loop".into(), &song).unwrap();
        let segment = |start_bar, letter| Segment {
            start_bar,
            bars: 4,
            letter,
        };
        let phrases = [segment(0, 'A'), segment(4, 'B'), segment(8, 'A')];
        let labels = StepLabels::new(
            &found.sheet.grid,
            &found.sheet.rolls.melody,
            &found.sheet.labels.beat_chords(),
            &phrases,
        );
        let p = Piece::new(
            "loop".into(),
            &song,
            found.sheet.grid.clone(),
            found.sheet.rolls.clone(),
            labels,
            found.range.clone(),
        )
        .unwrap();
        let start = p.token_bars[0];
        let spec = WindowSpec {
            len: p.tokens.len() - start - 1,
            max_shift: 0,
            levels: StructureLevel::CONTINUATION.to_vec(),
            conditioning: None,
            beats: Default::default(),
            chord_noise: 0.0,
        };
        let (ids, coordinates) = p.token_window(&spec, start, 0);
        let coordinates = coordinates.expect("F-StrIPE levels");
        let c = 6 + 4;
        assert_eq!(coordinates.len(), spec.len * c);
        let row = |k: usize| &coordinates[k * c..(k + 1) * c];
        // The first note of bars 0, 4 and 8 (window positions).
        let first_note = |bar: usize| {
            let from = p.token_bars[bar] - start;
            (from..ids.len())
                .find(|&k| matches!(Token::from_id(ids[k]), Some(Token::Pitch(_))))
                .unwrap()
        };
        let (a, b, again) = (first_note(0), first_note(4), first_note(8));
        // The repeat sits where the first A does: chord, letter, bar in the phrase, position;
        // only time tells them apart (32 beats).
        assert_eq!(row(a)[..c - 1], row(again)[..c - 1]);
        assert_eq!(row(again)[c - 1] - row(a)[c - 1], 32.0);
        assert_ne!(row(a)[6], row(b)[6], "A and B are different phrases");
        // Transposed: the tokens and the chord move, nothing else.
        let (up, moved) = p.token_window(&spec, start, 2);
        let moved = moved.unwrap();
        assert_ne!(up, ids);
        assert_ne!(moved[a * c..a * c + 6], row(a)[..6]);
        assert_eq!(moved[a * c + 6..(a + 1) * c], row(a)[6..]);
        // Without levels: no coordinates.
        let plain = WindowSpec {
            levels: Vec::new(),
            ..spec
        };
        assert_eq!(p.token_window(&plain, start, 0), (ids, None));
    }
}
