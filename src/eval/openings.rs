//! The path a person takes: "continue it" on a song's first bars, or on the bars before a
//! phrase boundary mid-song, given as a MIDI file of their own (dragged into the page) and
//! continued with the page's default settings. Where the plan panel (`plan`) measures
//! planned chords on mid-song spans, this measures what a person meets first: whether the
//! new part has the bars asked, in the prompt's meter, at the prompt's pace and in its
//! register and key.
//!
//! An excerpt is cut from a POP909 song on its annotated beats and bars (the MIDI files' own
//! time signatures are unreliable, see the data's README): each beat becomes a quarter note
//! of a clean 4/4 file at the excerpt's mean tempo, so the prompt reads as a musician's
//! export would. An opening's pickup (a short first bar) ends the file's first bar of 4/4. Notes keep their whole length, also those ringing past the prompt's last bar
//! (as an export of "the first 8 bars" keeps them). The song's next bars, cut the same way,
//! are the human reference.

use burn::tensor::Device;
use serde::{Deserialize, Serialize};

use crate::generate::GenerateError;
use crate::model::performer::Performer;
use crate::music::grid::Grid;
use crate::music::metrics::cosine;
use crate::music::midi::{Note, Song, TempoChange, TimeSignature, Track, write_midi};
use crate::music::piece::Piece;
use crate::music::pop909::Pop909Song;
use crate::music::tokens::places::places;
use crate::music::tokens::{self, Grammar, Token};
use crate::studio::{ContinueOptions, continue_piece_ids};

/// Where in a song the prompt is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Place {
    /// From the first bar that starts a note (the intro, as a song's file begins).
    Opening,
    /// The bars that end where a phrase of the annotations starts, at least two prompts'
    /// length after the opening.
    MidSong,
}

impl Place {
    pub fn name(self) -> &'static str {
        match self {
            Place::Opening => "opening",
            Place::MidSong => "mid-song",
        }
    }
}

/// A prompt file and the song's own next bars (the same length), both from tick 0 of the
/// prompt, at 480 ticks a beat.
#[derive(Clone, Debug)]
pub struct Excerpt {
    pub song: String,
    pub place: Place,
    /// The song's bar where the prompt starts (from 0, on the annotated bars).
    pub from_bar: usize,
    pub bars: usize,
    pub prompt: Song,
    pub next: Song,
}

/// Ticks a beat of the excerpts' files.
const PPQ: u16 = 480;

/// The excerpt of `song` at `place`: `bars` bars of prompt with `bars` more after them. `None`
/// when the song has no such span.
pub fn excerpt(song: &Pop909Song, place: Place, bars: usize) -> Option<Excerpt> {
    let grid = &song.grid;
    let onsets: Vec<usize> = song
        .song
        .tracks
        .iter()
        .flat_map(|t| &t.notes)
        .map(|n| grid.bar_of_beat(grid.beat_at(n.start) as usize).0)
        .collect();
    let first = onsets.iter().copied().min()?;
    let bar_has_note = |b: usize| onsets.contains(&b);
    let from = match place {
        Place::Opening => first,
        Place::MidSong => (first + 2 * bars..grid.num_bars().saturating_sub(bars))
            .find(|&b| {
                let step = grid.bar_steps(b).start;
                song.labels
                    .phrase
                    .get(step)
                    .copied()
                    .flatten()
                    .is_some_and(|p| p.bar == 0)
            })?
            .checked_sub(bars)?,
    };
    // A song that starts with a pickup: its first bar, short, is the end of a bar of 4/4 in
    // the file, as a score writes an anacrusis (the beats before it are rests).
    let first_len = grid
        .bar_beats(from.min(grid.num_bars().saturating_sub(1)))
        .len();
    let pad = if place == Place::Opening && first_len < 4 {
        4 - first_len
    } else {
        0
    };
    // Whole bars of four beats (the annotations' meter) for the prompt and the next bars.
    let whole = |b: usize| grid.bar_beats(b).len() == 4;
    if from + 2 * bars > grid.num_bars()
        || !(from + usize::from(pad > 0)..from + 2 * bars).all(whole)
        || !(from + bars..from + 2 * bars).any(bar_has_note)
    {
        return None;
    }
    let beat0 = grid.bar_starts[from];
    // The annotated beats the excerpt covers.
    let beats = 8 * bars - pad;
    // The excerpt's tempo: its beats' mean length.
    let seconds = |b: usize| {
        song.song
            .seconds_at(grid.beat_ticks[(beat0 + b).min(grid.num_beats())])
    };
    let beat_seconds = (seconds(beats) - seconds(0)) / beats as f64;
    let micros = (beat_seconds * 1e6).round().clamp(1.0, 16_777_215.0) as u32;
    // Each annotated beat becomes a quarter note.
    let place_tick = |tick: u64| -> u64 {
        let beat = grid.beat_at(tick) - beat0 as f64;
        ((beat.max(0.0) + pad as f64) * PPQ as f64).round() as u64
    };
    let span = |lo: usize, hi: usize| -> Song {
        let (lo, hi) = (
            grid.beat_ticks[beat0 + lo],
            grid.beat_ticks[(beat0 + hi).min(grid.num_beats())],
        );
        let tracks = song
            .song
            .tracks
            .iter()
            .map(|t| Track {
                pedal: Vec::new(),
                notes: t
                    .notes
                    .iter()
                    .filter(|n| n.start >= lo && n.start < hi)
                    .map(|n| {
                        let start = place_tick(n.start);
                        Note {
                            start,
                            end: place_tick(n.end).max(start + 1),
                            ..*n
                        }
                    })
                    .collect(),
                ..t.clone()
            })
            .filter(|t| !t.notes.is_empty())
            .collect();
        Song {
            ppq: PPQ,
            tempos: vec![TempoChange {
                tick: 0,
                micros_per_quarter: micros,
            }],
            time_signatures: vec![TimeSignature {
                tick: 0,
                numerator: 4,
                denominator: 4,
            }],
            key_signatures: Vec::new(),
            tracks,
        }
    };
    Some(Excerpt {
        song: format!("pop909/{:03}", song.id),
        place,
        from_bar: from,
        bars,
        prompt: span(0, 4 * bars - pad),
        next: span(4 * bars - pad, beats),
    })
}

/// What one continuation of an excerpt did (the module's documentation says why).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpeningScores {
    pub song: String,
    pub place: Place,
    pub from_bar: usize,
    pub bars_asked: usize,
    /// Whole new bars written.
    pub bars_written: usize,
    /// Their beats, and the new bars whose length is not the prompt's meter.
    pub beats_written: usize,
    pub meter_changes: usize,
    /// Whether the safety limit on tokens stopped it before the bars asked.
    pub token_limit: bool,
    pub tokens: usize,
    /// Notes a beat of the new bars, of the prompt and of the song's own next bars.
    pub notes_per_beat: f64,
    pub prompt_notes_per_beat: f64,
    pub next_notes_per_beat: f64,
    /// The prompt's lowest and highest pitch; the new bars' 1st and 99th percentiles and
    /// highest; the song's next bars' 99th percentile.
    pub prompt_low: u8,
    pub prompt_high: u8,
    pub low: Option<u8>,
    pub high99: Option<u8>,
    pub highest: Option<u8>,
    pub next_high99: Option<u8>,
    /// Cosine of the pitch-class histograms (onsets) of the new bars and of the song's next
    /// bars with the prompt's.
    pub key_cosine: Option<f64>,
    pub next_key_cosine: Option<f64>,
    /// Share of the new bars' onsets on a tone of the chord in force (the chords the
    /// continuation wrote or was given); `None` without a new onset under a chord.
    #[serde(default)]
    pub chord_tones: Option<f64>,
}

impl OpeningScores {
    /// New notes a beat over the prompt's.
    pub fn rate(&self) -> Option<f64> {
        (self.prompt_notes_per_beat > 0.0 && self.beats_written > 0)
            .then(|| self.notes_per_beat / self.prompt_notes_per_beat)
    }

    /// New notes a beat over the song's next bars'.
    pub fn rate_vs_next(&self) -> Option<f64> {
        (self.next_notes_per_beat > 0.0 && self.beats_written > 0)
            .then(|| self.notes_per_beat / self.next_notes_per_beat)
    }

    /// Semitones the new bars' 99th percentile lies above the prompt's highest note.
    pub fn above(&self) -> Option<i32> {
        self.high99.map(|h| h as i32 - self.prompt_high as i32)
    }
}

/// The `q` quantile of sorted `values` (nearest rank).
fn quantile(sorted: &[u8], q: f64) -> Option<u8> {
    let n = sorted.len();
    (n > 0).then(|| sorted[((q * n as f64).ceil() as usize).clamp(1, n) - 1])
}

fn pitch_classes<'a>(notes: impl Iterator<Item = &'a Note>) -> [f64; 12] {
    let mut h = [0.0; 12];
    for n in notes {
        h[n.pitch as usize % 12] += 1.0;
    }
    h
}

fn all_notes(song: &Song) -> Vec<Note> {
    song.tracks.iter().flat_map(|t| t.notes.clone()).collect()
}

/// Scores a continuation: `prompt` and `added` as [`continue_piece_ids`] returns them.
pub fn score(
    excerpt: &Excerpt,
    prompt: &[u32],
    added: &[u32],
    token_limit: usize,
) -> Result<OpeningScores, GenerateError> {
    let ids: Vec<u32> = prompt.iter().chain(added).copied().collect();
    let tokens: Vec<Token> = ids.iter().filter_map(|&id| Token::from_id(id)).collect();
    let decoded =
        tokens::decode(&tokens, PPQ, 0).map_err(|e| GenerateError::Tokens(e.to_string()))?;
    let mut grammar = Grammar::new();
    for &t in &tokens {
        grammar
            .advance(t)
            .map_err(|e| GenerateError::Tokens(e.to_string()))?;
    }
    let bar = Token::Bar.id();
    let prompt_bars = prompt.iter().filter(|&&id| id == bar).count();
    let new_bars = added.iter().filter(|&&id| id == bar).count();
    let cut = added.len() >= token_limit;
    // A bar is whole when another follows it or when the bar limit ended the continuation.
    let written = if cut {
        new_bars.saturating_sub(1)
    } else {
        new_bars
    };
    let starts = &decoded.grid.bar_starts;
    let length = |k: usize| match starts.get(k + 1) {
        Some(&next) => next - starts[k],
        None => grammar.bar_beats(),
    };
    let meter = 4;
    let new_range = prompt_bars..prompt_bars + written;
    let beats_written: usize = new_range.clone().map(length).sum();
    let meter_changes = new_range.clone().filter(|&k| length(k) != meter).count();
    let (from, to) = match (starts.get(prompt_bars), written) {
        (Some(&b), w) if w > 0 => (
            b as u64 * PPQ as u64,
            (b + beats_written) as u64 * PPQ as u64,
        ),
        _ => (0, 0),
    };
    let new: Vec<&Note> = decoded
        .notes
        .iter()
        .filter(|n| n.start >= from && n.start < to)
        .collect();
    let old = all_notes(&excerpt.prompt);
    let next = all_notes(&excerpt.next);
    let beats = 4.0 * excerpt.bars as f64;
    let sorted = |ns: &mut dyn Iterator<Item = u8>| {
        let mut v: Vec<u8> = ns.collect();
        v.sort_unstable();
        v
    };
    let new_pitches = sorted(&mut new.iter().map(|n| n.pitch));
    let next_pitches = sorted(&mut next.iter().map(|n| n.pitch));
    let prompt_pc = pitch_classes(old.iter());
    let (mut on_tones, mut under_chords) = (0usize, 0usize);
    for (t, place) in tokens[prompt.len().min(tokens.len())..]
        .iter()
        .zip(&places(&ids)[prompt.len().min(ids.len())..])
    {
        if let (Token::Pitch(p), Some(chord)) = (t, place.chord) {
            under_chords += 1;
            on_tones += usize::from(chord.pitch_classes().any(|pc| pc == p % 12));
        }
    }
    Ok(OpeningScores {
        song: excerpt.song.clone(),
        place: excerpt.place,
        from_bar: excerpt.from_bar,
        bars_asked: excerpt.bars,
        bars_written: written,
        beats_written,
        meter_changes,
        token_limit: cut,
        tokens: added.len(),
        notes_per_beat: new.len() as f64 / beats_written.max(1) as f64,
        prompt_notes_per_beat: old.len() as f64 / beats,
        next_notes_per_beat: next.len() as f64 / beats,
        prompt_low: old.iter().map(|n| n.pitch).min().unwrap_or(0),
        prompt_high: old.iter().map(|n| n.pitch).max().unwrap_or(0),
        low: quantile(&new_pitches, 0.01),
        high99: quantile(&new_pitches, 0.99),
        highest: new_pitches.last().copied(),
        next_high99: quantile(&next_pitches, 0.99),
        key_cosine: (!new.is_empty()).then(|| cosine(&pitch_classes(new.into_iter()), &prompt_pc)),
        next_key_cosine: (!next.is_empty())
            .then(|| cosine(&pitch_classes(next.iter()), &prompt_pc)),
        chord_tones: (under_chords > 0).then(|| on_tones as f64 / under_chords as f64),
    })
}

/// Continues `excerpt` the way the page does: its prompt file read as a dragged-in piece,
/// `options` (the page's defaults for the model, `bars` new bars) through
/// [`continue_piece_ids`].
pub async fn continue_excerpt(
    model: &Performer,
    excerpt: &Excerpt,
    options: &ContinueOptions,
    device: &Device,
) -> Result<OpeningScores, GenerateError> {
    let bytes = write_midi(&excerpt.prompt);
    let piece = Piece::from_midi(&bytes, &format!("{}.mid", excerpt.song.replace('/', "-")))?;
    let options = ContinueOptions {
        bars: Some(excerpt.bars),
        ..options.clone()
    };
    let out = continue_piece_ids(model, &piece, &options, device, |_| async { true }).await?;
    score(excerpt, &out.prompt, &out.added, options.token_limit())
}

/// The figures the "done when" reads, over excerpts' scores.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpeningSummary {
    pub place: Place,
    pub songs: usize,
    /// Share with the bars asked written and no change of meter.
    pub bars_and_meter: f64,
    /// Share stopped by the token limit.
    pub token_limit: f64,
    /// Share whose notes a beat are 0.75–1.33× the prompt's; the median ratio; the same for the
    /// songs' own next bars (the human reference).
    pub rate_in_band: f64,
    pub rate_median: f64,
    pub next_rate_in_band: f64,
    pub next_rate_median: f64,
    /// New notes a beat over the real next bars', median.
    pub rate_vs_next_median: f64,
    /// Share whose 99th-percentile pitch is at most 7 semitones above the prompt's highest
    /// note; the same for the real next bars.
    pub register_kept: f64,
    pub next_register_kept: f64,
    /// Mean key cosine to the prompt of the new bars and of the real next bars, and their
    /// ratio.
    pub key_cosine: f64,
    pub next_key_cosine: f64,
    pub key_ratio: f64,
    /// Mean share of the new bars' onsets on tones of the chord in force.
    #[serde(default)]
    pub chord_tones: f64,
}

/// Notes a beat against the prompt's within this band count as the prompt's pace.
pub const RATE_BAND: (f64, f64) = (0.75, 1.33);
/// Semitones above the prompt's highest note the new bars' 99th percentile may reach.
pub const REGISTER_MARGIN: i32 = 7;

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

impl OpeningSummary {
    pub fn of(place: Place, scores: &[OpeningScores]) -> Self {
        let s: Vec<&OpeningScores> = scores.iter().filter(|s| s.place == place).collect();
        let n = s.len().max(1) as f64;
        let share =
            |f: &dyn Fn(&OpeningScores) -> bool| s.iter().filter(|x| f(x)).count() as f64 / n;
        let in_band = |r: Option<f64>| r.is_some_and(|r| (RATE_BAND.0..=RATE_BAND.1).contains(&r));
        let next_rate = |x: &OpeningScores| {
            (x.prompt_notes_per_beat > 0.0).then(|| x.next_notes_per_beat / x.prompt_notes_per_beat)
        };
        let mean = |f: &dyn Fn(&OpeningScores) -> Option<f64>| {
            let v: Vec<f64> = s.iter().filter_map(|x| f(x)).collect();
            if v.is_empty() {
                f64::NAN
            } else {
                v.iter().sum::<f64>() / v.len() as f64
            }
        };
        let key_cosine = mean(&|x| x.key_cosine);
        let next_key_cosine = mean(&|x| x.next_key_cosine);
        Self {
            place,
            songs: s.len(),
            bars_and_meter: share(&|x| x.bars_written == x.bars_asked && x.meter_changes == 0),
            token_limit: share(&|x| x.token_limit),
            rate_in_band: share(&|x| in_band(x.rate())),
            rate_median: median(s.iter().filter_map(|x| x.rate()).collect()),
            next_rate_in_band: share(&|x| in_band(next_rate(x))),
            next_rate_median: median(s.iter().filter_map(|x| next_rate(x)).collect()),
            rate_vs_next_median: median(s.iter().filter_map(|x| x.rate_vs_next()).collect()),
            register_kept: share(&|x| x.above().is_some_and(|a| a <= REGISTER_MARGIN)),
            next_register_kept: share(&|x| {
                x.next_high99
                    .is_some_and(|h| h as i32 - x.prompt_high as i32 <= REGISTER_MARGIN)
            }),
            key_cosine,
            next_key_cosine,
            key_ratio: key_cosine / next_key_cosine,
            chord_tones: mean(&|x| x.chord_tones),
        }
    }
}

/// A grid check for tests: the prompt file of an excerpt reads as `bars` whole bars of 4/4.
pub fn prompt_grid(excerpt: &Excerpt) -> Grid {
    Grid::for_song(&excerpt.prompt, tokens::STEPS_PER_BEAT)
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;
