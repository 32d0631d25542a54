//! The texture echo as a steering part of the step-by-step accompaniment: at a step that
//! answers an earlier one — the same place of the first occurrence of a phrase the lane
//! repeats, or of a donor's bars the person chose — every pitch's onset log odds get the
//! [`EchoLean`] measured on the training songs' pianists (`music::texture::echo`): more where
//! the answered step started that pitch or something in its register, less where it was
//! silent there, re-voiced where the chord under the two differs (the lean trusts the register
//! then, not the pitch). A donor comes from another song, in another key: its notes are
//! re-voiced to the target's chords before anything reads them (`music::texture::donor::revoice`),
//! so the lean trusts their pitches as it does a repeat's over the same chord. The model still
//! chooses the notes; the lean is added after the
//! temperature, so its effect on the odds is the same at any.

use super::sample::PianoSampling;
use super::sample::uniform;
use super::steer::Steer;
use crate::data::example::{answers, reference_row};
use crate::music::chords::Chord;
use crate::music::labels::StepLabels;
use crate::music::roll::{PITCHES, PianoRoll};
use crate::music::texture::REGISTERS;
use crate::music::texture::donor::{Donor, revoice};
use crate::music::texture::echo::{
    EchoLean, PasteMix, SongDensityRule, bars, kept_bars, latest_sources, melody_alike,
};
use crate::music::texture::{onset_bits, register_mask};
use std::borrow::Borrow;

mod density;
pub use density::{SongDensity, keep_count};

/// Where a step-by-step accompaniment stands when step `step` is drawn: the piano written so
/// far, the chords as they stand now where they move while it plays (a live take's; `None`:
/// the lanes'), its sampling and the model's onset logits there.
pub struct PianoNow<'a> {
    pub written: &'a PianoRoll,
    pub chords: Option<&'a [Option<Chord>]>,
    pub step: usize,
    pub sampling: &'a PianoSampling,
    pub onsets: &'a [f32],
}

/// The texture echo as a steering part of one writing (each alternative and each live take has
/// its own): the lean of each step as [`TextureEcho::lean_with`] gives it, its count settled
/// from the model's onset logits at the sampling — the step's own count where the lean keeps
/// it ([`EchoLean::keeps_count`]), else the density of the leaned steps so far where it is kept
/// per song ([`TextureEcho::song_density`], from the writing's start).
pub struct TextureSteer<E: Borrow<TextureEcho>> {
    echo: E,
    density: Option<SongDensity>,
}

impl<E: Borrow<TextureEcho>> TextureSteer<E> {
    /// A writing steered by `echo` from its first step.
    pub fn new(echo: E) -> Self {
        let density = echo.borrow().song_density();
        Self { echo, density }
    }

    /// The density of the steps it has leaned, where it is kept per song.
    pub fn song_density(&self) -> Option<&SongDensity> {
        self.density.as_ref()
    }
}

impl<E: Borrow<TextureEcho>> Steer<PianoNow<'_>> for TextureSteer<E> {
    fn lean(&mut self, now: &PianoNow, logits: &mut [f32]) -> bool {
        let echo = self.echo.borrow();
        let mut lean = [0f32; PITCHES];
        let (t, s) = (now.step, now.sampling);
        if !echo.lean_with(now.written, now.chords, (t, s.seed), &mut lean) {
            return false;
        }
        if echo.lean.keeps_count {
            keep_count(&mut lean, now.onsets, s);
        } else if let Some(d) = self.density.as_mut() {
            d.settle(&mut lean, now.onsets, s);
        }
        logits.iter_mut().zip(lean).for_each(|(l, by)| *l += by);
        true
    }
}

/// The "pitch" of the draw that says whether a bar's register `r` is pasted
/// (`uniform(seed, bar, PASTE_DRAW + r, 0)`): past every pitch's onset and hold draws.
const PASTE_DRAW: usize = 2 * PITCHES;

/// Where the answered steps are read.
#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)]
enum Source {
    /// The piano being written (a repeat answers its phrase's first occurrence, written or
    /// given before it).
    Own,
    /// A donor's piano part (the bars a person chose as the texture), laid over the steps
    /// that answer it and re-voiced to their chords.
    Donor(PianoRoll),
}

/// What each step of an accompaniment answers: the step of a phrase's first occurrence (in
/// the piano being written) or of a donor's bars, and whether the chord under the two
/// differs. The texture echo leans by it; a model with the reference lane reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct Answers {
    /// Per step of the example: the step it answers and whether the chord there differs.
    answers: Vec<Option<(usize, bool)>>,
    /// Per step, how alike its bar sings to the answered bar (`music::texture::echo::melody_bin`);
    /// empty where that is not known (a donor from another song, a live take not yet heard).
    melody: Vec<Option<usize>>,
    /// Per step of a repeat with a latest earlier occurrence besides the first (a third A),
    /// the same place of that one (`music::texture::echo::latest_sources`); empty for a donor.
    latest: Vec<Option<usize>>,
    /// Per step, its bar's first step and length (a bar is drawn pasted or played anew
    /// once); empty for a donor.
    bar: Vec<(usize, usize)>,
    /// Per step of a bar of a phrase that answers no earlier phrase, the same place of the bar
    /// before it in the phrase and whether the chord there differs
    /// (`music::texture::echo::kept_bars`); empty for a donor.
    kept: Vec<Option<(usize, bool)>>,
    /// Per such step, how alike its bar sings to the bar before (empty where not known).
    kept_melody: Vec<Option<usize>>,
    /// Per step, the chord under it (empty for a donor, laid over them re-voiced already).
    chords: Vec<Option<Chord>>,
    source: Source,
}

/// The octaves a donor's note at `pitch` drops to sit under a melody sounding `melody` (0: a
/// rest) rather than on or over it, as a pianist voices a borrowed figure under the tune (the
/// pianists double or cross the melody on about one onset in twenty; a figure laid over a low
/// melody would on most): none where it already sits under, or nothing lower is left.
fn under(pitch: u8, melody: u8) -> u8 {
    if melody == 0 || pitch < melody {
        return 0;
    }
    let drops = (pitch - melody) / 12 + 1;
    drops.min(pitch / 12)
}

impl Answers {
    /// The phrase lane's repeats of `labels` (one per step of the example) answering their
    /// first occurrences; `None` where no letter returns.
    pub fn repeats(labels: &StepLabels) -> Option<Self> {
        let answers = answers(labels);
        let bar = bars(labels)
            .into_iter()
            .flat_map(|(start, len, _)| std::iter::repeat_n((start, len), len))
            .collect();
        let (mut kept, mut kept_melody) = (vec![None; labels.len()], vec![None; labels.len()]);
        for (start, len, from, bin) in kept_bars(labels) {
            for i in 0..len {
                let (t, s) = (start + i, from + i);
                kept[t] = Some((s, labels.chord[t] != labels.chord[s]));
                kept_melody[t] = Some(bin);
            }
        }
        let any = answers.iter().chain(&kept).any(Option::is_some);
        any.then_some(Self {
            answers,
            melody: melody_alike(labels),
            latest: latest_sources(labels),
            bar,
            kept,
            kept_melody,
            chords: labels.chord.clone(),
            source: Source::Own,
        })
    }

    /// The bars of `labels` (one label per step of the example) that overlap `targets`
    /// answering `donor`'s bars, cycled from its first: step `i` of a target bar answers step
    /// `i` of its donor bar (none past the donor bar's end: a bar of another meter answers as
    /// far as the two line up). The donor's notes are laid over the targets re-voiced to the
    /// chords under them ([`revoice`]: its rhythm and registers, their harmony), so a step
    /// answers the same chord where both steps have one; where either has none the donor's
    /// pitches stay as they were, and the chords count as differing. `None` for a donor
    /// without steps or targets without bars.
    pub fn donor(
        labels: &StepLabels,
        targets: std::ops::Range<usize>,
        donor: &Donor,
    ) -> Option<Self> {
        let roll = donor.roll();
        let chords = donor.step_chords().unwrap_or_default();
        let starts = donor.bar_starts();
        let mut answers = vec![None; labels.len()];
        let mut laid = PianoRoll::new(labels.len());
        let target_bars = bars(labels)
            .into_iter()
            .filter(|&(start, len, _)| start < targets.end && start + len > targets.start);
        // Per donor pitch: the octaves its note is dropped by, decided where it is struck.
        let mut drops = [0u8; PITCHES];
        for (k, (start, len, _)) in target_bars.enumerate() {
            let b = k % starts.len().max(1);
            let (Some(&from), Some(&d_len)) = (starts.get(b), donor.bars.get(b)) else {
                break;
            };
            for i in 0..len.min(d_len) {
                let (t, s) = (start + i, from + i);
                if !targets.contains(&t) {
                    continue;
                }
                let here = labels.chord.get(t).copied().flatten();
                let there = chords.get(s).copied().flatten();
                let melody = labels.melody.get(t).copied().unwrap_or(0);
                for p in (0..PITCHES).filter(|&p| roll.sustain(s, p) || roll.onset(s, p)) {
                    let q = revoice(p as u8, there, here);
                    if roll.onset(s, p) {
                        drops[p] = under(q, melody);
                    }
                    let q = q.saturating_sub(12 * drops[p]) as usize;
                    laid.set(t, q, laid.onset(t, q) || roll.onset(s, p), true, 0);
                }
                let revoiced = here.is_some() && there.is_some();
                answers[t] = Some((t, !revoiced && here != there));
            }
        }
        answers.iter().any(Option::is_some).then_some(Self {
            answers,
            melody: Vec::new(),
            latest: Vec::new(),
            bar: Vec::new(),
            kept: Vec::new(),
            kept_melody: Vec::new(),
            chords: Vec::new(),
            source: Source::Donor(laid),
        })
    }

    /// The same answers with the melody's likeness forgotten: for a take whose melody is
    /// played as it goes, so that a bar's is not known when its first steps are decided.
    pub fn unheard(self) -> Self {
        Self {
            melody: Vec::new(),
            kept_melody: Vec::new(),
            ..self
        }
    }

    /// Step `t`'s answer: the roll it reads (`written`, or the donor), the step there and
    /// whether the chord differs (read from `chords` as they stand now when given and the
    /// answer is in the piano being written); `None` where it answers nothing, or a step not
    /// yet written.
    fn at<'r>(
        &'r self,
        written: &'r PianoRoll,
        chords: Option<&[Option<Chord>]>,
        t: usize,
    ) -> Option<(&'r PianoRoll, usize, bool)> {
        let (s, mut changed) = self.answers.get(t).copied().flatten()?;
        match &self.source {
            Source::Own if s < t && s < written.num_steps => {
                if let Some(chords) = chords {
                    changed = chords.get(t) != chords.get(s);
                }
                Some((written, s, changed))
            }
            Source::Donor(d) if s < d.num_steps => Some((d, s, changed)),
            _ => None,
        }
    }

    /// Step `t`'s step in the bar before it, in a phrase heard for the first time (`kept`), and
    /// whether the chord differs (read from `chords` when given); `None` where it keeps
    /// nothing or that step is not yet written.
    fn kept_at(
        &self,
        written: &PianoRoll,
        chords: Option<&[Option<Chord>]>,
        t: usize,
    ) -> Option<(usize, bool)> {
        let (s, changed) = self.kept.get(t).copied().flatten()?;
        let changed = chords.map_or(changed, |chords| chords.get(t) != chords.get(s));
        (s < t && s < written.num_steps).then_some((s, changed))
    }

    /// Writes step `t`'s reference lane into `out` ([`crate::data::example::REFERENCE_INPUTS`] values) given the
    /// piano written so far (zeros where it answers nothing yet).
    pub fn write_reference(&self, written: &PianoRoll, t: usize, out: &mut [f32]) {
        match self.at(written, None, t) {
            Some((roll, s, changed)) => reference_row(roll, Some((s, changed)), 0, out),
            None => reference_row(written, None, 0, out),
        }
    }

    /// Whether step `t` reads its answer from the piano being written at or after `from`
    /// (a step the model has not written when `t`'s chunk starts at `from`).
    pub fn reads_from(&self, t: usize, from: usize) -> bool {
        matches!(
            (&self.source, self.answers.get(t).copied().flatten()),
            (Source::Own, Some((s, _))) if s >= from
        )
    }

    /// The steps that answer another.
    pub fn answering(&self) -> usize {
        self.answers.iter().filter(|a| a.is_some()).count()
    }

    /// A donor laid over the example, re-voiced to its chords (nothing where no step answers
    /// it); `None` for the phrase lane's repeats.
    pub fn laid(&self) -> Option<&PianoRoll> {
        match &self.source {
            Source::Donor(laid) => Some(laid),
            Source::Own => None,
        }
    }

    /// Whether any step of `steps` answers another.
    pub fn answers_in(&self, steps: std::ops::Range<usize>) -> bool {
        steps
            .into_iter()
            .any(|t| matches!(self.answers.get(t), Some(Some(_))))
    }
}

/// The texture echo of one accompaniment: what each step answers, and how strongly.
#[derive(Clone, Debug, PartialEq)]
pub struct TextureEcho {
    lean: EchoLean,
    strength: f32,
    answers: Answers,
}

impl TextureEcho {
    /// The echo of `answers` at `strength` times `lean` (1: as measured); `None` at strength 0
    /// or where it would lean nowhere.
    pub fn new(lean: EchoLean, strength: f32, answers: Answers) -> Option<Self> {
        let keeps = lean.kept.is_some() && answers.kept.iter().any(Option::is_some);
        (strength > 0.0 && (answers.answering() > 0 || keeps)).then_some(Self {
            lean,
            strength,
            answers,
        })
    }

    /// The phrase lane's repeats of `labels` (one per step of the example) answering their
    /// first occurrences, at `strength` times `lean` (1: as measured); `None` where no letter
    /// returns or the strength is 0.
    pub fn repeats(lean: EchoLean, strength: f32, labels: &StepLabels) -> Option<Self> {
        Self::new(lean, strength, Answers::repeats(labels)?)
    }

    /// The same echo with the melody's likeness forgotten ([`Answers::unheard`]): every
    /// step leans by the pooled lean.
    pub fn unheard(self) -> Self {
        Self {
            answers: self.answers.unheard(),
            ..self
        }
    }

    /// What it answers.
    pub fn answers(&self) -> &Answers {
        &self.answers
    }

    /// Writes the lean of step `t` into `out` (128 values) given the piano written so far,
    /// and says whether there is one (a step that answers nothing, or answers a step not yet
    /// written, has none). `seed` is the sampling's: where the lean mixes pasted and new bars
    /// ([`crate::music::texture::echo::PasteMix`]), it draws which each bar's register is.
    pub fn lean_at(&self, written: &PianoRoll, t: usize, seed: u64, out: &mut [f32]) -> bool {
        self.lean_with(written, None, (t, seed), out)
    }

    /// [`Self::lean_at`] with the chords as they stand now (one per step; a live take decides
    /// its open beats' chords as it goes, after the echo was set up): whether the chord under
    /// a repeat differs from its first occurrence's is read from them.
    pub fn lean_with(
        &self,
        written: &PianoRoll,
        chords: Option<&[Option<Chord>]>,
        (t, seed): (usize, u64),
        out: &mut [f32],
    ) -> bool {
        let leans = self.lean_here(written, chords, (t, seed), out);
        let own = matches!(self.answers.source, Source::Own);
        let density = self
            .lean
            .density
            .filter(|_| self.lean.song_density.is_off());
        if let (true, true, Some(d)) = (leans, own, density) {
            // Measured at strength 1; the lean it answers scales with the strength, and so
            // does it (0: the model's own odds, as with no echo).
            let bias = self.strength * super::sample::onset_bias(d);
            out[..PITCHES].iter_mut().for_each(|l| *l += bias);
        }
        leans
    }

    /// Where the density of the steps it leans is the song's own ([`EchoLean::song_density`])
    /// and it leans on the song's own bars: the keeper a writing starts with (at the measured
    /// density, at this strength); `None` elsewhere (a donor's bars play at the model's own).
    pub fn song_density(&self) -> Option<SongDensity> {
        let own = matches!(self.answers.source, Source::Own);
        let capped = match self.lean.song_density {
            SongDensityRule::Off => return None,
            rule => rule == SongDensityRule::Capped,
        };
        own.then(|| {
            let prior = self.lean.density.map_or(0.0, super::sample::onset_bias);
            SongDensity::new(self.strength * prior, capped)
        })
    }

    /// [`Self::lean_with`] before the density of the steps it leans ([`EchoLean::density`],
    /// measured where a song answers itself, and so not applied to a donor's bars).
    fn lean_here(
        &self,
        written: &PianoRoll,
        chords: Option<&[Option<Chord>]>,
        (t, seed): (usize, u64),
        out: &mut [f32],
    ) -> bool {
        let Some((roll, s, changed)) = self.answers.at(written, chords, t) else {
            // A bar of a phrase heard for the first time keeps the bar before, where the lean
            // keeps textures so ([`EchoLean::kept`]).
            let kept = self.answers.kept_at(written, chords, t);
            let (Some(mix), Some((s, changed))) = (&self.lean.kept, kept) else {
                return false;
            };
            let melody = self.answers.kept_melody.get(t).copied().flatten();
            let draw = (seed, PASTE_DRAW + REGISTERS);
            let keep = self.kept_pitches(chords, t, changed);
            return self.mixed(mix, (written, s, t), (changed, melody, keep), draw, out);
        };
        let melody = self.answers.melody.get(t).copied().flatten();
        let keep = self.kept_pitches(chords, t, changed);
        // A donor's bars are the person's choice, not a repeat a pianist may play anew: the
        // pooled lean follows them at every step.
        let mix = self.lean.paste.as_ref();
        if let Some(mix) = mix.filter(|_| matches!(self.answers.source, Source::Own)) {
            let draw = (seed, PASTE_DRAW);
            return self.mixed(mix, (roll, s, t), (changed, melody, keep), draw, out);
        }
        let latest = self.answers.latest.get(t).copied().flatten();
        let latest = latest
            .filter(|&l| l < t && l < written.num_steps)
            .map(|l| onset_bits(written, l));
        self.lean.of(
            (onset_bits(roll, s), keep),
            (changed, melody, latest),
            self.strength,
            &mut out[..PITCHES],
        );
        true
    }

    /// The lean of `mix` at step `t` answering step `s` of `roll`: each register of `t`'s bar
    /// drawn pasted or played anew once for the bar (`draw`: the seed and the draws' first
    /// "pitch"); a register the answered bar leaves quiet is played anew.
    fn mixed(
        &self,
        mix: &PasteMix,
        (roll, s, t): (&PianoRoll, usize, usize),
        (changed, melody, keep): (bool, Option<usize>, u128),
        (seed, first): (u64, usize),
        out: &mut [f32],
    ) -> bool {
        let Some(&(start, len)) = self.answers.bar.get(t) else {
            return false;
        };
        let from = s - (t - start).min(s);
        let bar: Vec<u128> = (from..(from + len).min(t))
            .map(|u| onset_bits(roll, u))
            .collect();
        let pasted = std::array::from_fn(|r| {
            let m = register_mask(r);
            bar.iter().any(|b| b & m != 0)
                && uniform(seed, start, first + r, 0) < mix.share_of(melody, r)
        });
        mix.of(
            (onset_bits(roll, s), keep),
            (changed, melody),
            pasted,
            self.strength,
            &mut out[..PITCHES],
        );
        true
    }

    /// The keys whose onset at the answered step counts as that pitch's at step `t` (the
    /// rest of what started there counts as another key of its register): where the lean
    /// re-voices ([`EchoLean::revoices`]) and the chord has changed, the tones of the chord now
    /// (`chords` as they stand now when given, else the lanes'); every key elsewhere.
    fn kept_pitches(&self, chords: Option<&[Option<Chord>]>, t: usize, changed: bool) -> u128 {
        let now = chords
            .unwrap_or(&self.answers.chords)
            .get(t)
            .copied()
            .flatten();
        match now {
            Some(chord) if changed && self.lean.revoices => {
                let classes: u16 = chord.pitch_classes().fold(0, |m, c| m | 1 << c);
                (0..PITCHES)
                    .filter(|p| classes & (1 << (p % 12)) != 0)
                    .fold(0, |m, p| m | 1 << p)
            }
            _ => u128::MAX,
        }
    }

    /// The steps that answer another.
    pub fn answering(&self) -> usize {
        self.answers.answering()
    }

    /// Whether it leans at step `t` once what `t` answers is written: a step that answers
    /// another, or keeps the bar before where the lean keeps textures.
    pub fn leans_on(&self, t: usize) -> bool {
        let kept = || self.lean.kept.is_some() && matches!(self.answers.kept.get(t), Some(Some(_)));
        matches!(self.answers.answers.get(t), Some(Some(_))) || kept()
    }

    /// Whether its lean leaves a step's count of onsets to the model ([`EchoLean::keeps_count`]).
    pub fn keeps_count(&self) -> bool {
        self.lean.keeps_count
    }

    /// Whether any step of `steps` answers another, or keeps the texture of the bar before
    /// where the lean keeps textures (elsewhere the echo leans nothing).
    pub fn answers_in(&self, steps: std::ops::Range<usize>) -> bool {
        let keeps = || {
            self.lean.kept.is_some()
                && steps
                    .clone()
                    .any(|t| matches!(self.answers.kept.get(t), Some(Some(_))))
        };
        self.answers.answers_in(steps.clone()) || keeps()
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;
