//! What a continuation model plays when sampled: the SPE paper's Figure 5 setting on POP909.
//! From the first bars of a held-out song (from its first bar with a note), the model samples
//! until prompt and continuation hold a given number of tokens (4× the training window by
//! default), and the new part is scored in four quarters of equal duration:
//!
//! - **style similarity** against the song the prompt came from, with Cífka et al.'s
//!   onset–duration and time–pitch profiles (the SPE paper's appendix C; cosine similarity of
//!   2-D histograms, [`crate::music::metrics::style_similarity`]), per quarter, so a drift
//!   away from the song along time shows;
//! - **key consistency**: cosine similarity of the pitch-class histograms (onsets) of the new
//!   part and of the prompt;
//! - **density**: new notes per beat over the prompt's notes per beat;
//! - **longest silence**, in bars: the longest span of the new part where nothing sounds
//!   (notes held over from the prompt count as sounding);
//! - **grammatical bars**: sampling is masked by the REMI grammar, so every bar decodes; what
//!   tells whether the model learnt the grammar is the probability it puts on tokens the
//!   grammar forbids. A new bar's score is the probability that it would have been drawn
//!   without any forbidden token had the mask been off, `Π (1 − p_forbidden)` over its draws;
//!   the share is its mean over complete new bars (the mean forbidden probability per draw is
//!   kept beside it). Forbidden means against the grammar: `Eos` and `Meter`, which the
//!   sampler leaves out by choice (a continuation runs its full length in the prompt's meter),
//!   count as grammatical.
//!
//! Key consistency and density have no ideal value of 1: a song's chorus is denser than its
//! intro, and a bridge may modulate. So each sample also scores the song's own continuation
//! (the same number of tokens after the prompt) the same way, as the human reference
//! (`song_key_consistency`, `song_density_ratio`).

use burn::tensor::Device;
use serde::{Deserialize, Serialize};

use crate::generate::{GenerateError, Length, Sampling, continue_tokens, cut_prompt};
use crate::model::performer::Performer;
use crate::music::labels::PhraseLabel;
use crate::music::metrics::{BeatNote, beat_notes, cosine, mean_std, style_similarity};
use crate::music::tokens::{self, Token};

/// Quarters the new part is scored in.
pub const QUARTERS: usize = 4;
/// A sample keeps its key when its pitch classes are at least this close to the prompt's.
pub const KEY_CONSISTENT: f64 = 0.8;
/// A sample has no gap when nothing in it is silent for longer than this many bars.
pub const LONGEST_GAP_BARS: f64 = 2.0;

/// A prompt from a song's REMI ids (as [`super::corpus::Piece::tokens`] holds them, from
/// `Bos`): `bars` bars from the first bar that holds a note, with `Bos` and the meter in force
/// in front. `None` when the song does not have `bars` bars and one more after them.
pub fn song_prompt(song: &[u32], bars: usize) -> Option<Vec<u32>> {
    song_prompt_at(song, bars).map(|(prompt, ..)| prompt)
}

/// [`song_prompt`], where in `song` the music after the prompt starts, and the prompt's first
/// bar (counting `Bar` tokens).
pub(crate) fn song_prompt_at(song: &[u32], bars: usize) -> Option<(Vec<u32>, usize, usize)> {
    let bar = Token::Bar.id();
    let starts: Vec<usize> = (0..song.len()).filter(|&i| song[i] == bar).collect();
    let has_note = |k: usize| {
        let end = starts.get(k + 1).copied().unwrap_or(song.len());
        song[starts[k]..end]
            .iter()
            .any(|&id| matches!(Token::from_id(id), Some(Token::Pitch(_))))
    };
    let first = (0..starts.len()).find(|&k| has_note(k))?;
    let end = *starts.get(first + bars)?;
    let (prompt, _) = cut_prompt(&song[..end], end - starts[first]);
    Some((prompt, end, first))
}

/// One sample's scores (the module's documentation says what each one is).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SampleScores {
    pub song: String,
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
    /// Complete new bars (the bar the token budget cut short is left out).
    pub bars: usize,
    /// Notes starting in the complete new bars.
    pub notes: usize,
    /// Onset–duration similarity to the song, per quarter of the new part (`None`: no note).
    pub onset_duration: Vec<Option<f64>>,
    /// Time–pitch similarity to the song, per quarter.
    pub time_pitch: Vec<Option<f64>>,
    pub key_consistency: Option<f64>,
    pub density_ratio: Option<f64>,
    pub longest_silence_bars: f64,
    pub grammatical_bars: Option<f64>,
    /// Mean probability on forbidden tokens per draw.
    pub forbidden_mass: Option<f64>,
    /// The same two figures for the song's own continuation (as many tokens after the prompt),
    /// the human reference; `None` in [`score`], filled by [`sample_song`].
    #[serde(default)]
    pub song_key_consistency: Option<f64>,
    #[serde(default)]
    pub song_density_ratio: Option<f64>,
}

/// Scores `generated` (ids after `prompt`; `forbidden[i]` is the probability the model put on
/// tokens the grammar forbade when drawing `generated[i]`) against `song`'s ids.
pub fn score(
    name: &str,
    song: &[u32],
    prompt: &[u32],
    generated: &[u32],
    forbidden: &[f32],
) -> Result<SampleScores, String> {
    let decode = |ids: &[u32]| {
        let tokens: Vec<Token> = ids.iter().filter_map(|&id| Token::from_id(id)).collect();
        tokens::decode(&tokens, 480, 0).map_err(|e| format!("{name}: {e}"))
    };
    let source = decode(song)?;
    let source_notes = beat_notes(&source.notes, &source.grid);
    let whole_ids: Vec<u32> = prompt.iter().chain(generated).copied().collect();
    let whole = decode(&whole_ids)?;
    let notes = beat_notes(&whole.notes, &whole.grid);
    let bar = Token::Bar.id();
    let prompt_bars = prompt.iter().filter(|&&id| id == bar).count();
    let starts: Vec<f64> = whole.grid.bar_starts.iter().map(|&b| b as f64).collect();
    let ended = generated.last() == Some(&Token::Eos.id());
    // Complete new bars: those another bar follows, and the last one when the piece ended.
    let last_complete = if ended {
        starts.len()
    } else {
        starts.len().saturating_sub(1)
    };
    let complete = last_complete.saturating_sub(prompt_bars);
    let empty = SampleScores {
        song: name.to_string(),
        prompt_tokens: prompt.len(),
        generated_tokens: generated.len(),
        bars: 0,
        notes: 0,
        onset_duration: vec![None; QUARTERS],
        time_pitch: vec![None; QUARTERS],
        key_consistency: None,
        density_ratio: None,
        longest_silence_bars: 0.0,
        grammatical_bars: None,
        forbidden_mass: (!forbidden.is_empty())
            .then(|| forbidden.iter().map(|&p| p as f64).sum::<f64>() / forbidden.len() as f64),
        song_key_consistency: None,
        song_density_ratio: None,
    };
    if complete == 0 || prompt_bars == 0 {
        return Ok(empty);
    }
    let bar_end = |k: usize| -> f64 {
        starts
            .get(k + 1)
            .copied()
            .unwrap_or(whole.grid.num_beats() as f64)
    };
    let from = starts[prompt_bars];
    let to = bar_end(last_complete - 1);
    let span = to - from;
    let new: Vec<BeatNote> = notes
        .iter()
        .copied()
        .filter(|n| n.start >= from - 1e-9 && n.start < to - 1e-9)
        .collect();
    let old: Vec<BeatNote> = notes
        .iter()
        .copied()
        .filter(|n| n.start < from - 1e-9)
        .collect();
    let mut onset_duration = Vec::with_capacity(QUARTERS);
    let mut time_pitch = Vec::with_capacity(QUARTERS);
    for q in 0..QUARTERS {
        let lo = from + span * q as f64 / QUARTERS as f64;
        let hi = from + span * (q + 1) as f64 / QUARTERS as f64;
        let part: Vec<BeatNote> = new
            .iter()
            .copied()
            .filter(|n| n.start >= lo - 1e-9 && n.start < hi - 1e-9)
            .collect();
        let (od, tp) = style_similarity(&part, &source_notes);
        onset_duration.push(od);
        time_pitch.push(tp);
    }
    let pitch_classes = |ns: &[BeatNote]| {
        let mut h = [0.0; 12];
        for n in ns {
            h[n.pitch as usize % 12] += 1.0;
        }
        h
    };
    let key_consistency = (!new.is_empty() && !old.is_empty())
        .then(|| cosine(&pitch_classes(&new), &pitch_classes(&old)));
    let prompt_beats = from - starts[0];
    let density_ratio = (!old.is_empty() && prompt_beats > 0.0 && span > 0.0)
        .then(|| (new.len() as f64 / span) / (old.len() as f64 / prompt_beats));
    let longest_silence_bars = longest_silence(&notes, from, to) / (span / complete as f64);
    Ok(SampleScores {
        bars: complete,
        notes: new.len(),
        onset_duration,
        time_pitch,
        key_consistency,
        density_ratio,
        longest_silence_bars,
        grammatical_bars: grammatical_bars(generated, forbidden, complete),
        ..empty
    })
}

/// The longest span of `[from, to)` (beats) in which none of `notes` sounds.
fn longest_silence(notes: &[BeatNote], from: f64, to: f64) -> f64 {
    let mut spans: Vec<(f64, f64)> = notes
        .iter()
        .map(|n| (n.start.max(from), (n.start + n.duration).min(to)))
        .filter(|(a, b)| b > a)
        .collect();
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut longest = 0.0f64;
    let mut covered = from;
    for (a, b) in spans {
        longest = longest.max(a - covered);
        covered = covered.max(b);
    }
    longest.max(to - covered)
}

/// The mean over the first `complete` new bars of `Π (1 − forbidden)` over the draws that
/// wrote each bar (its `Bar` token and what follows it).
fn grammatical_bars(generated: &[u32], forbidden: &[f32], complete: usize) -> Option<f64> {
    let mut bars: Vec<f64> = Vec::new();
    for (&id, &p) in generated.iter().zip(forbidden) {
        if id == Token::Bar.id() {
            bars.push(1.0);
        }
        if let Some(b) = bars.last_mut() {
            *b *= 1.0 - p.clamp(0.0, 1.0) as f64;
        }
    }
    bars.truncate(complete);
    (!bars.is_empty()).then(|| bars.iter().sum::<f64>() / bars.len() as f64)
}

/// Samples a continuation of `song`'s first `prompt_bars` bars (from its first bar with a
/// note) until prompt and continuation hold `total` tokens, and scores it. `None` when the
/// song is too short for the prompt. `context`: see [`Length::context`].
#[allow(clippy::too_many_arguments)]
pub async fn sample_song(
    model: &Performer,
    name: &str,
    song: &[u32],
    phrases: &[Option<PhraseLabel>],
    prompt_bars: usize,
    total: usize,
    context: Option<usize>,
    sampling: Sampling,
    device: &Device,
) -> Result<Option<SampleScores>, GenerateError> {
    let Some((prompt, end, first)) = song_prompt_at(song, prompt_bars) else {
        return Ok(None);
    };
    if prompt.len() >= total {
        return Ok(None);
    }
    let mut forbidden = Vec::new();
    let length = Length {
        context,
        ..Length::tokens(total - prompt.len())
    };
    // The song's phrase lane from the prompt's first bar on, as a person would have set it.
    let phrases = phrases.get(first..).unwrap_or(&[]);
    let generated = continue_tokens(
        model,
        &prompt,
        length,
        sampling,
        &[],
        phrases,
        None,
        device,
        |p| {
            if p.token.is_some() {
                forbidden.push(p.forbidden);
            }
            std::future::ready(true)
        },
    )
    .await?;
    let mut scores =
        score(name, song, &prompt, &generated, &forbidden).map_err(GenerateError::Tokens)?;
    // The song's own continuation, as long (an `Eos` ends it early).
    let own = &song[end..(end + generated.len()).min(song.len())];
    if let Ok(reference) = score(name, song, &prompt, own, &[]) {
        scores.song_key_consistency = reference.key_consistency;
        scores.song_density_ratio = reference.density_ratio;
    }
    Ok(Some(scores))
}

/// Mean and spread of samples' scores, with the figures the SPE paper's Figure 5 reads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SampledSummary {
    pub samples: usize,
    /// Mean onset–duration similarity per quarter (over the samples with notes there).
    pub onset_duration: Vec<f64>,
    pub onset_duration_std: Vec<f64>,
    pub time_pitch: Vec<f64>,
    pub time_pitch_std: Vec<f64>,
    /// Last quarter over first: 1 keeps the style to the end.
    pub onset_duration_kept: f64,
    pub time_pitch_kept: f64,
    pub key_consistency: f64,
    /// Share of samples whose key consistency is at least [`KEY_CONSISTENT`].
    pub key_consistent_share: f64,
    pub density_ratio: f64,
    /// The songs' own continuations (see the module's documentation).
    #[serde(default)]
    pub song_key_consistency: f64,
    #[serde(default)]
    pub song_density_ratio: f64,
    pub longest_silence_bars: f64,
    /// Share of samples with no silence longer than [`LONGEST_GAP_BARS`] bars.
    pub no_long_silence_share: f64,
    pub grammatical_bars: f64,
    pub forbidden_mass: f64,
    pub bars: f64,
}

impl SampledSummary {
    pub fn of(samples: &[SampleScores]) -> Self {
        let stat = |f: &dyn Fn(&SampleScores) -> Option<f64>| {
            let v: Vec<f64> = samples.iter().filter_map(f).collect();
            if v.is_empty() {
                (f64::NAN, f64::NAN)
            } else {
                mean_std(&v)
            }
        };
        let quarter = |f: fn(&SampleScores) -> &Vec<Option<f64>>| -> (Vec<f64>, Vec<f64>) {
            (0..QUARTERS)
                .map(|q| stat(&|s| f(s).get(q).copied().flatten()))
                .unzip()
        };
        let (onset_duration, onset_duration_std) = quarter(|s| &s.onset_duration);
        let (time_pitch, time_pitch_std) = quarter(|s| &s.time_pitch);
        let share = |f: &dyn Fn(&SampleScores) -> bool| {
            samples.iter().filter(|s| f(s)).count() as f64 / samples.len().max(1) as f64
        };
        Self {
            samples: samples.len(),
            onset_duration_kept: onset_duration[QUARTERS - 1] / onset_duration[0],
            time_pitch_kept: time_pitch[QUARTERS - 1] / time_pitch[0],
            onset_duration,
            onset_duration_std,
            time_pitch,
            time_pitch_std,
            key_consistency: stat(&|s| s.key_consistency).0,
            key_consistent_share: share(&|s| {
                s.key_consistency.is_some_and(|k| k >= KEY_CONSISTENT)
            }),
            density_ratio: stat(&|s| s.density_ratio).0,
            song_key_consistency: stat(&|s| s.song_key_consistency).0,
            song_density_ratio: stat(&|s| s.song_density_ratio).0,
            longest_silence_bars: stat(&|s| (s.bars > 0).then_some(s.longest_silence_bars)).0,
            no_long_silence_share: share(&|s| {
                s.bars > 0 && s.longest_silence_bars <= LONGEST_GAP_BARS
            }),
            grammatical_bars: stat(&|s| s.grammatical_bars).0,
            forbidden_mass: stat(&|s| s.forbidden_mass).0,
            bars: stat(&|s| Some(s.bars as f64)).0,
        }
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;
