//! The plan-following panel (issue 32): does a continuation play what the lanes plan? From a
//! held-out song's first bars (from its first bar with a note), the model writes the next
//! [`PLAN_BARS`] bars with their chords planned — the song's own progression, or another
//! song's moved to this one's key (a substituted plan) — and what it writes is set against
//! what the song really does in those bars:
//!
//! - **note rate**: onsets per beat over the real next bars' (1: as busy as the song);
//! - **key**: cosine of the new part's pitch classes (onsets) to the prompt's, beside the real
//!   continuation's (a song may modulate: the real one is the reference, not 1);
//! - **chord tones**: the share of the new part's onsets whose pitch class belongs to the
//!   planned chord of its beat (beats planned as "no chord" left out); the real continuation's
//!   share against its own chords is the reference;
//! - **phrase echo**: where the song's phrase lane repeats a melodic phrase (same letter, a
//!   later phrase) in the new bars, the similarity of each repeated bar to the same bar of the
//!   phrase's first occurrence — F1 of their onsets as (step in the bar, pitch class) — beside
//!   the real song's own echo of the same bars.
//!
//! Everything is read off REMI tokens, so the prompt's and the plan's bars are the token bars
//! (a bar longer than 16 beats is several).

use std::collections::HashSet;

use burn::tensor::Device;
use serde::{Deserialize, Serialize};

use super::sampled::song_prompt_at;
use crate::generate::{GenerateError, Length, Sampling, continue_tokens};
use crate::model::performer::Performer;
use crate::music::chords::Chord;
use crate::music::labels::{PhraseLabel, first_occurrence};
use crate::music::metrics::{cosine, mean_std};
use crate::music::tokens::{DEFAULT_BAR_BEATS, STEPS_PER_BEAT, Token};

/// A plan: each new bar's chords, one per beat.
pub type Plan = Vec<Vec<Option<Chord>>>;

/// Bars a plan covers.
pub const PLAN_BARS: usize = 16;
/// No song's note rate should pass this many times the real one.
pub const MAX_NOTE_RATE: f64 = 1.6;

/// One bar of a token sequence: its length in beats, its onsets (step in the bar, pitch) and
/// the chord in force on each beat (`None` outside: before any chord token).
#[derive(Clone, Debug, PartialEq)]
pub struct TokenBar {
    pub beats: usize,
    pub onsets: Vec<(u8, u8)>,
    pub chords: Vec<Option<Option<Chord>>>,
}

/// The bars of `ids` (from `Bos`), chords carried over bar lines.
pub fn token_bars(ids: &[u32]) -> Vec<TokenBar> {
    let mut bars: Vec<TokenBar> = Vec::new();
    let mut beats = DEFAULT_BAR_BEATS;
    let mut position = 0u8;
    let mut chord: Option<Option<Chord>> = None;
    // Chord changes of the current bar: (step, chord).
    let mut changes: Vec<(u8, Option<Chord>)> = Vec::new();
    let close = |bar: &mut TokenBar,
                 changes: &mut Vec<(u8, Option<Chord>)>,
                 at: &mut Option<Option<Chord>>| {
        let mut now = *at;
        let mut next = changes.iter().peekable();
        bar.chords = (0..bar.beats)
            .map(|b| {
                while let Some(&&(step, c)) = next.peek() {
                    if step as usize > b * STEPS_PER_BEAT {
                        break;
                    }
                    now = Some(c);
                    next.next();
                }
                now
            })
            .collect();
        if let Some(&(_, c)) = changes.last() {
            *at = Some(c);
        }
        changes.clear();
    };
    for token in ids.iter().filter_map(|&id| Token::from_id(id)) {
        match token {
            Token::Bar => {
                if let Some(last) = bars.last_mut() {
                    close(last, &mut changes, &mut chord);
                }
                bars.push(TokenBar {
                    beats,
                    onsets: Vec::new(),
                    chords: Vec::new(),
                });
                position = 0;
            }
            Token::Meter(m) => {
                beats = m as usize;
                if let Some(last) = bars.last_mut() {
                    last.beats = beats;
                }
            }
            Token::Position(p) => position = p,
            Token::Chord(c) => changes.push((position, c)),
            Token::Pitch(p) => {
                if let Some(last) = bars.last_mut() {
                    last.onsets.push((position, p));
                }
            }
            _ => {}
        }
    }
    if let Some(last) = bars.last_mut() {
        close(last, &mut changes, &mut chord);
    }
    bars
}

/// A bar's phrase label as the echo measure reads it: intros, outros, bridges and transitions
/// count as none.
fn melodic(label: Option<PhraseLabel>) -> Option<PhraseLabel> {
    label.filter(|p| p.letter.is_ascii_uppercase())
}

/// One song's prompt and what it really does after it.
#[derive(Clone, Debug)]
pub struct PlanCase {
    pub song: String,
    pub prompt: Vec<u32>,
    /// The prompt's bars, then the real next [`PLAN_BARS`] bars.
    pub real: Vec<TokenBar>,
    /// The melodic phrase of each of those bars (`None`: none, or not a melodic phrase).
    pub phrases: Vec<Option<PhraseLabel>>,
    /// The phrase lane over the prompt's bars and the new ones, as a person planning them
    /// would set it: what a model with F-StrIPE reads.
    pub lane: Vec<Option<PhraseLabel>>,
    pub prompt_bars: usize,
}

impl PlanCase {
    /// `song`'s case from its REMI ids and its phrase labels per token bar (as
    /// [`crate::data::corpus::Piece::bar_phrases`]); `None` when the song has no
    /// `prompt_bars + PLAN_BARS` bars from its first bar with a note, and one after them.
    pub fn of(
        song: &str,
        ids: &[u32],
        phrases: &[Option<PhraseLabel>],
        prompt_bars: usize,
    ) -> Option<Self> {
        let (prompt, ..) = song_prompt_at(ids, prompt_bars)?;
        let bars = token_bars(ids);
        let first = (0..bars.len()).find(|&k| !bars[k].onsets.is_empty())?;
        let end = first + prompt_bars + PLAN_BARS;
        if bars.len() <= end {
            return None;
        }
        Some(Self {
            song: song.to_string(),
            prompt,
            real: bars[first..end].to_vec(),
            phrases: (first..end)
                .map(|b| melodic(phrases.get(b).copied().flatten()))
                .collect(),
            lane: (first..end)
                .map(|b| phrases.get(b).copied().flatten())
                .collect(),
            prompt_bars,
        })
    }

    /// The song's own progression over the new bars: each bar's chords per beat (a beat
    /// before any chord: no chord).
    pub fn own_plan(&self) -> Plan {
        self.real[self.prompt_bars..]
            .iter()
            .map(|b| b.chords.iter().map(|c| c.flatten()).collect())
            .collect()
    }

    /// Pitch classes of the prompt's onsets.
    fn prompt_classes(&self) -> [f64; 12] {
        classes(&self.real[..self.prompt_bars])
    }

    /// `other`'s own progression moved to this prompt's key (the shift whose pitch classes
    /// match best), when its bars have this song's lengths and its roots differ on at least
    /// half of the planned beats; `None` otherwise.
    pub fn substituted_plan(&self, other: &PlanCase) -> Option<Plan> {
        let (mine, theirs) = (self.prompt_classes(), other.prompt_classes());
        let shift = (0..12u8).max_by(|&a, &b| {
            let rot = |s: u8| -> Vec<f64> {
                (0..12)
                    .map(|k| theirs[(k + 12 - s as usize) % 12])
                    .collect()
            };
            cosine(&mine, &rot(a)).total_cmp(&cosine(&mine, &rot(b)))
        })?;
        let plan: Plan = other
            .own_plan()
            .into_iter()
            .map(|bar| {
                bar.into_iter()
                    .map(|c| {
                        c.map(|c| Chord {
                            root: (c.root + shift) % 12,
                            ..c
                        })
                    })
                    .collect()
            })
            .collect();
        let own = self.own_plan();
        if own.iter().zip(&plan).any(|(a, b)| a.len() != b.len()) {
            return None;
        }
        let beats: usize = own.iter().map(Vec::len).sum();
        let differ = own
            .iter()
            .flatten()
            .zip(plan.iter().flatten())
            .filter(|(a, b)| a.map(|c| c.root) != b.map(|c| c.root))
            .count();
        (2 * differ >= beats).then_some(plan)
    }
}

/// Pitch-class histogram of the onsets of `bars`.
fn classes(bars: &[TokenBar]) -> [f64; 12] {
    let mut h = [0.0; 12];
    for (_, p) in bars.iter().flat_map(|b| &b.onsets) {
        h[*p as usize % 12] += 1.0;
    }
    h
}

/// Onsets per beat of `bars`.
fn rate(bars: &[TokenBar]) -> f64 {
    let beats: usize = bars.iter().map(|b| b.beats).sum();
    let onsets: usize = bars.iter().map(|b| b.onsets.len()).sum();
    onsets as f64 / beats.max(1) as f64
}

/// The share of `bars`' onsets that are tones of `plan`'s chord on their beat (beats planned
/// as no chord, or past the plan, left out); `None` without such an onset.
pub fn chord_tones(bars: &[TokenBar], plan: &[Vec<Option<Chord>>]) -> Option<f64> {
    let (mut tones, mut all) = (0usize, 0usize);
    for (bar, chords) in bars.iter().zip(plan) {
        for &(step, pitch) in &bar.onsets {
            let Some(Some(chord)) = chords.get(step as usize / STEPS_PER_BEAT) else {
                continue;
            };
            all += 1;
            tones += chord.pitch_classes().any(|pc| pc == pitch % 12) as usize;
        }
    }
    (all > 0).then(|| tones as f64 / all as f64)
}

/// F1 of two bars' onsets as sets of (step, pitch class); `None` when both are empty.
fn bar_similarity(a: &TokenBar, b: &TokenBar) -> Option<f64> {
    let set = |bar: &TokenBar| -> HashSet<(u8, u8)> {
        bar.onsets.iter().map(|&(s, p)| (s, p % 12)).collect()
    };
    let (a, b) = (set(a), set(b));
    let total = a.len() + b.len();
    (total > 0).then(|| 2.0 * a.intersection(&b).count() as f64 / total as f64)
}

/// The planned repetitions among the new bars: (earlier bar, new bar) pairs, indices into
/// the case's bars, where a new bar repeats the same bar of its phrase's first occurrence.
pub fn echo_pairs(phrases: &[Option<PhraseLabel>], prompt_bars: usize) -> Vec<(usize, usize)> {
    (prompt_bars..phrases.len())
        .filter_map(|k| Some((first_occurrence(phrases, k)?, k)))
        .collect()
}

/// Mean similarity of the pairs' bars in `bars` (`None` without a pair with notes).
fn echo(bars: &[TokenBar], pairs: &[(usize, usize)]) -> Option<f64> {
    let sims: Vec<f64> = pairs
        .iter()
        .filter_map(|&(a, b)| bar_similarity(bars.get(a)?, bars.get(b)?))
        .collect();
    (!sims.is_empty()).then(|| sims.iter().sum::<f64>() / sims.len() as f64)
}

/// One continuation of a case under a plan, and the song's own figures beside it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanScores {
    pub song: String,
    /// "own" or "substituted".
    pub plan: String,
    /// New bars written in full.
    pub bars: usize,
    pub note_rate: Option<f64>,
    /// The new part's note rate over the prompt's (what `Sampling::density` asks for).
    #[serde(default)]
    pub prompt_ratio: Option<f64>,
    pub key: Option<f64>,
    pub song_key: Option<f64>,
    pub chord_tones: Option<f64>,
    /// The real continuation's tones of its own chords (the same for either plan).
    pub song_chord_tones: Option<f64>,
    pub echo: Option<f64>,
    pub song_echo: Option<f64>,
    /// The echo split by where the first occurrence lies: in the prompt (the song's own bars
    /// come back) or among the new bars (the continuation repeats itself); the song's beside.
    #[serde(default)]
    pub echo_of_prompt: Option<f64>,
    #[serde(default)]
    pub song_echo_of_prompt: Option<f64>,
    #[serde(default)]
    pub echo_of_new: Option<f64>,
    #[serde(default)]
    pub song_echo_of_new: Option<f64>,
}

/// Scores `generated` (ids after the case's prompt, written under `plan`).
pub fn score_plan(
    case: &PlanCase,
    which: &str,
    plan: &[Vec<Option<Chord>>],
    generated: &[u32],
    complete: bool,
) -> PlanScores {
    let whole: Vec<u32> = case.prompt.iter().chain(generated).copied().collect();
    let mut bars = token_bars(&whole);
    let p = case.prompt_bars;
    // The bar the token budget cut short is left out.
    if !complete && bars.len() > p {
        bars.pop();
    }
    bars.truncate(p + PLAN_BARS);
    let new = &bars[p.min(bars.len())..];
    let real_new = &case.real[p..];
    let real_rate = rate(&real_new[..new.len().min(real_new.len())]);
    let prompt_classes = case.prompt_classes();
    let pairs: Vec<(usize, usize)> = echo_pairs(&case.phrases, p)
        .into_iter()
        .filter(|&(_, b)| b < bars.len())
        .collect();
    let (of_prompt, of_new): (Vec<_>, Vec<_>) = pairs.iter().partition(|&&(a, _)| a < p);
    PlanScores {
        song: case.song.clone(),
        plan: which.to_string(),
        bars: new.len(),
        note_rate: (!new.is_empty() && real_rate > 0.0).then(|| rate(new) / real_rate),
        prompt_ratio: {
            let prompt_rate = rate(&bars[..p.min(bars.len())]);
            (!new.is_empty() && prompt_rate > 0.0).then(|| rate(new) / prompt_rate)
        },
        key: new
            .iter()
            .any(|b| !b.onsets.is_empty())
            .then(|| cosine(&classes(new), &prompt_classes)),
        song_key: Some(cosine(&classes(real_new), &prompt_classes)),
        chord_tones: chord_tones(new, plan),
        song_chord_tones: chord_tones(real_new, &case.own_plan()),
        echo: echo(&bars, &pairs),
        song_echo: echo(&case.real, &pairs),
        echo_of_prompt: echo(&bars, &of_prompt),
        song_echo_of_prompt: echo(&case.real, &of_prompt),
        echo_of_new: echo(&bars, &of_new),
        song_echo_of_new: echo(&case.real, &of_new),
    }
}

/// Writes the next [`PLAN_BARS`] bars of `case` under `plan` with `sampling`, and scores them.
pub async fn sample_plan(
    model: &Performer,
    case: &PlanCase,
    which: &str,
    plan: &[Vec<Option<Chord>>],
    context: Option<usize>,
    sampling: Sampling,
    device: &Device,
) -> Result<PlanScores, GenerateError> {
    let length = Length {
        tokens: 256 * PLAN_BARS,
        bars: Some(PLAN_BARS),
        may_end: false,
        context,
    };
    let generated = continue_tokens(
        model,
        &case.prompt,
        length,
        sampling,
        plan,
        &case.lane,
        None,
        device,
        |_| std::future::ready(true),
    )
    .await?;
    let complete = generated.len() < length.tokens;
    Ok(score_plan(case, which, plan, &generated, complete))
}

/// The panel's figures over samples of one kind of plan (means over the songs that have each).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanSummary {
    pub plan: String,
    pub samples: usize,
    pub note_rate: f64,
    pub note_rate_max: f64,
    /// Songs above [`MAX_NOTE_RATE`].
    pub note_rate_over: usize,
    /// The new part's note rate over the prompt's: mean, and the 10th and 90th percentiles
    /// over the songs (how closely a `--density` is followed).
    #[serde(default)]
    pub prompt_ratio: f64,
    #[serde(default)]
    pub prompt_ratio_low: f64,
    #[serde(default)]
    pub prompt_ratio_high: f64,
    pub key: f64,
    pub song_key: f64,
    /// `key / song_key`.
    pub key_ratio: f64,
    pub chord_tones: f64,
    pub song_chord_tones: f64,
    pub echo: f64,
    pub song_echo: f64,
    /// `echo / song_echo`, over the samples with both.
    pub echo_ratio: f64,
    pub echo_samples: usize,
    /// The echo ratio of phrases first heard in the prompt, and of phrases first heard in the
    /// new bars (the samples with each).
    #[serde(default)]
    pub echo_ratio_of_prompt: f64,
    #[serde(default)]
    pub echo_samples_of_prompt: usize,
    #[serde(default)]
    pub echo_ratio_of_new: f64,
    #[serde(default)]
    pub echo_samples_of_new: usize,
}

impl PlanSummary {
    pub fn of(plan: &str, samples: &[PlanScores]) -> Self {
        let s: Vec<&PlanScores> = samples.iter().filter(|s| s.plan == plan).collect();
        let mean = |f: &dyn Fn(&PlanScores) -> Option<f64>| {
            mean_std(&s.iter().filter_map(|x| f(x)).collect::<Vec<_>>()).0
        };
        let rates: Vec<f64> = s.iter().filter_map(|x| x.note_rate).collect();
        // `ours / the song's` over the samples with both, and their count.
        let ratio = |ours: fn(&PlanScores) -> Option<f64>, song: fn(&PlanScores) -> Option<f64>| {
            let both: Vec<(f64, f64)> = s
                .iter()
                .filter_map(|x| Some((ours(x)?, song(x)?)))
                .collect();
            let sum = |f: fn(&(f64, f64)) -> f64| both.iter().map(f).sum::<f64>();
            (sum(|b| b.0) / sum(|b| b.1), both.len())
        };
        let (echo_ratio, echo_samples) = ratio(|x| x.echo, |x| x.song_echo);
        let (echo_ratio_of_prompt, echo_samples_of_prompt) =
            ratio(|x| x.echo_of_prompt, |x| x.song_echo_of_prompt);
        let (echo_ratio_of_new, echo_samples_of_new) =
            ratio(|x| x.echo_of_new, |x| x.song_echo_of_new);
        let (key, song_key) = (mean(&|x| x.key), mean(&|x| x.song_key));
        let mut ratios: Vec<f64> = s.iter().filter_map(|x| x.prompt_ratio).collect();
        ratios.sort_by(f64::total_cmp);
        let at = |q: f64| {
            ratios
                .get(((ratios.len() as f64 - 1.0) * q).round() as usize)
                .copied()
                .unwrap_or(f64::NAN)
        };
        Self {
            plan: plan.to_string(),
            samples: s.len(),
            note_rate: mean_std(&rates).0,
            note_rate_max: rates.iter().copied().fold(f64::NAN, f64::max),
            note_rate_over: rates.iter().filter(|&&r| r > MAX_NOTE_RATE).count(),
            prompt_ratio: mean_std(&ratios).0,
            prompt_ratio_low: at(0.1),
            prompt_ratio_high: at(0.9),
            key,
            song_key,
            key_ratio: key / song_key,
            chord_tones: mean(&|x| x.chord_tones),
            song_chord_tones: mean(&|x| x.song_chord_tones),
            echo: mean(&|x| x.echo),
            song_echo: mean(&|x| x.song_echo),
            echo_ratio,
            echo_samples,
            echo_ratio_of_prompt,
            echo_samples_of_prompt,
            echo_ratio_of_new,
            echo_samples_of_new,
        }
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;
