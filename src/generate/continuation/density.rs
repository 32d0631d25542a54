//! Density: a continuation as busy as the person asks, as a multiple of the music before it
//! ([`super::Sampling::density`]: 0.5 half as many notes a beat as the prompt's last bars, 2
//! twice as many). The model proposes every token; where its choice decides how many notes
//! come — another note at this position, or the next event sooner or later — sampling tilts
//! it, by how far the new part's note rate so far is from the target:
//!
//! - each further note at a position (a `Pitch` after a note) gets `e^β` times its
//!   probability;
//! - the next event's position, or the next bar line, `e^(−β·gap)`, the gap in beats from
//!   where the music stands.
//!
//! `β` grows with the log of target rate over the rate so far (a proportional controller on
//! the running count, which holds the rate over the whole new part, not each bar). So the
//! model still chooses where the notes go, which pitches and how long: only how many is
//! steered. Without a target (`None`), or over a prompt without notes, nothing is tilted.

use crate::music::tokens::places::TokenPlace;
use crate::music::tokens::{STEPS_PER_BEAT, Token};

/// The prompt's last bars with notes whose rate the target multiplies.
const PROMPT_BARS: usize = 8;
/// Nats of tilt per unit of log rate off the target.
const GAIN: f64 = 4.0;
/// Nats of tilt gathered per beat per unit of log rate off the target (the integral part,
/// which finds the lasting tilt a model needs to play at another rate than its own).
const GAIN_PER_BEAT: f64 = 0.25;
/// The largest `β`, and the largest tilt of one token, in nats.
const MAX_BETA: f64 = 3.0;
const MAX_TILT: f64 = 8.0;
/// Beats at the target rate the running count starts with, so the first notes of the new
/// part do not swing the tilt.
const PRIOR_BEATS: f64 = 4.0;

/// The running count of a continuation's notes against its target rate.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Density {
    /// Onsets per beat wanted.
    target: f64,
    /// Onsets written since the prompt.
    onsets: usize,
    /// The beat where the new part starts.
    start: f32,
    /// The integral part of `β`, and the beat up to which it is gathered.
    integral: f64,
    gathered: f32,
    /// Beats of bars left out of the count ([`Density::count`]), and where the span left out
    /// now started, while one is.
    skipped: f32,
    paused: Option<f32>,
}

impl Density {
    /// The controller for `factor` times the note rate of the prompt's last bars with notes
    /// (`prompt`'s ids, `places` one per id, `bar_beats` the meter in force at its end);
    /// `None` when the prompt has no note to measure.
    pub(super) fn new(
        factor: f32,
        prompt: &[u32],
        places: &[TokenPlace],
        bar_beats: usize,
    ) -> Option<Self> {
        let rate = prompt_rate(prompt, places, bar_beats)?;
        let start = places.last().map_or(0.0, |p| p.beat);
        Some(Self {
            target: rate * f64::from(factor),
            onsets: 0,
            start,
            integral: 0.0,
            gathered: start,
            skipped: 0.0,
            paused: None,
        })
    }

    /// Whether the bars from `beat` on are steered and counted (`false`: the controller
    /// neither tilts them nor counts their notes and beats, as if they were not there, until
    /// told `true` again).
    pub(super) fn count(&mut self, counting: bool, beat: f32) {
        match (counting, self.paused) {
            (false, None) => self.paused = Some(beat),
            (true, Some(from)) => {
                self.skipped += (beat - from).max(0.0);
                self.paused = None;
                self.gathered = self.gathered.max(beat);
            }
            _ => {}
        }
    }

    /// Whether the controller steers the bar it is in.
    pub(super) fn counting(&self) -> bool {
        self.paused.is_none()
    }

    /// Onsets per beat wanted.
    #[cfg(test)]
    pub(super) fn target(&self) -> f64 {
        self.target
    }

    /// `β` where the music stands (`now`: the place of the last token): positive when the new
    /// part is sparser than the target. Gathers the integral part up to `now`.
    fn beta(&mut self, now: &TokenPlace) -> f64 {
        let beats = f64::from((now.beat - self.start - self.skipped).max(0.0));
        let prior = self.target * PRIOR_BEATS;
        let off = ((self.onsets as f64 + prior) / (self.target * beats + prior)).ln();
        let step = f64::from((now.beat - self.gathered).max(0.0));
        self.gathered = self.gathered.max(now.beat);
        self.integral = (self.integral - GAIN_PER_BEAT * off * step).clamp(-MAX_BETA, MAX_BETA);
        (self.integral - GAIN * off).clamp(-MAX_BETA, MAX_BETA)
    }

    /// Tilts `logits` (before the temperature divides them; `temperature` keeps the tilt's
    /// effect on probabilities the same at any) for the token after `last`, at `now` in a
    /// bar of `bar_beats`. Only tokens `allowed` are touched.
    pub(super) fn tilt(
        &mut self,
        now: &TokenPlace,
        last: Option<Token>,
        bar_beats: usize,
        allowed: &[bool],
        logits: &mut [f32],
        temperature: f32,
    ) {
        let beta = self.beta(now);
        let scale = f64::from(temperature.max(1e-4));
        // Where the music stands in the bar: a bar line just written starts it.
        let here = match last {
            Some(Token::Bar | Token::Meter(_)) => 0.0,
            _ => f64::from(now.position) / STEPS_PER_BEAT as f64,
        };
        let mut add = |token: Token, nats: f64| {
            let id = token.id() as usize;
            if allowed.get(id).copied().unwrap_or(false) {
                logits[id] += (nats.clamp(-MAX_TILT, MAX_TILT) * scale) as f32;
            }
        };
        if matches!(last, Some(Token::Duration(_))) {
            for pitch in 0..128u8 {
                add(Token::Pitch(pitch), beta);
            }
        }
        for step in 0..(bar_beats * STEPS_PER_BEAT).min(u8::MAX as usize) {
            let gap = (step as f64 / STEPS_PER_BEAT as f64 - here).max(0.0);
            add(Token::Position(step as u8), -beta * gap);
        }
        add(Token::Bar, -beta * (bar_beats as f64 - here).max(0.0));
    }

    /// Counts `token` once it is written.
    pub(super) fn advance(&mut self, token: Token) {
        if matches!(token, Token::Pitch(_)) && self.counting() {
            self.onsets += 1;
        }
    }
}

/// One of the prompt's bars: its length in beats and the pitches of its onsets.
pub(super) struct PromptBar {
    pub beats: f64,
    pub pitches: Vec<u8>,
}

/// The last [`PROMPT_BARS`] bars of `prompt` (`places` one per id, `bar_beats` the meter in
/// force at its end) from its first bar with a note; a bar still open at the prompt's end
/// counts only if it holds a note. What both the Density controller and the Key measure.
pub(super) fn recent_bars(
    prompt: &[u32],
    places: &[TokenPlace],
    bar_beats: usize,
) -> Vec<PromptBar> {
    // (start beat, pitches) per bar, in order.
    let mut bars: Vec<(f32, Vec<u8>)> = Vec::new();
    for (&id, place) in prompt.iter().zip(places) {
        match Token::from_id(id) {
            Some(Token::Bar) => bars.push((place.beat, Vec::new())),
            Some(Token::Pitch(p)) => {
                if let Some(bar) = bars.last_mut() {
                    bar.1.push(p);
                }
            }
            _ => {}
        }
    }
    let ends: Vec<Option<f32>> = (0..bars.len())
        .map(|k| bars.get(k + 1).map(|b| b.0))
        .collect();
    let mut measured: Vec<PromptBar> = Vec::new();
    for ((start, pitches), end) in bars.into_iter().zip(ends) {
        let beats = match end {
            Some(next) => f64::from(next - start),
            None if !pitches.is_empty() => bar_beats as f64,
            None => continue,
        };
        measured.push(PromptBar { beats, pitches });
    }
    let Some(first) = measured.iter().position(|b| !b.pitches.is_empty()) else {
        return Vec::new();
    };
    let from = first.max(measured.len().saturating_sub(PROMPT_BARS));
    measured.split_off(from)
}

/// Onsets per beat over the prompt's [`recent_bars`].
fn prompt_rate(prompt: &[u32], places: &[TokenPlace], bar_beats: usize) -> Option<f64> {
    let recent = recent_bars(prompt, places, bar_beats);
    let beats: f64 = recent.iter().map(|b| b.beats).sum();
    let onsets: usize = recent.iter().map(|b| b.pitches.len()).sum();
    (beats > 0.0 && onsets > 0).then(|| onsets as f64 / beats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::music::tokens::VOCAB_SIZE;
    use crate::music::tokens::places::places;

    fn ids(tokens: &[Token]) -> Vec<u32> {
        tokens.iter().map(|t| t.id()).collect()
    }

    /// Two 4/4 bars: four quarter notes, then two; the prompt's rate is 6 / 8 beats.
    fn prompt() -> Vec<u32> {
        let mut t = vec![Token::Bos];
        for notes in [4u8, 2] {
            t.push(Token::Bar);
            for k in 0..notes {
                t.extend([
                    Token::Position(k * 4),
                    Token::Pitch(60 + k),
                    Token::Velocity(20),
                    Token::Duration(4),
                ]);
            }
        }
        t.push(Token::Bar);
        ids(&t)
    }

    #[test]
    fn the_target_is_the_prompts_rate_times_the_factor() {
        let p = prompt();
        let d = Density::new(2.0, &p, &places(&p), 4).unwrap();
        assert!((d.target() - 1.5).abs() < 1e-9, "{}", d.target());
        // Empty bars before the first note are not counted; a prompt without notes has no
        // rate.
        let mut lead = ids(&[Token::Bos, Token::Bar, Token::Bar]);
        lead.extend_from_slice(&p[1..]);
        let d = Density::new(1.0, &lead, &places(&lead), 4).unwrap();
        assert!((d.target() - 0.75).abs() < 1e-9, "{}", d.target());
        let silent = ids(&[Token::Bos, Token::Bar, Token::Bar]);
        assert_eq!(Density::new(1.0, &silent, &places(&silent), 4), None);
    }

    /// After a note at step 4 of a bar, the tilts a sparser-than-asked new part and a busier
    /// one get.
    fn tilts(onsets: usize) -> Vec<f32> {
        let p = prompt();
        let mut walk = places(&p);
        let mut d = Density::new(1.0, &p, &walk, 4).unwrap();
        let mut rest = p.clone();
        let mut written = vec![Token::Position(4), Token::Pitch(60)];
        written.extend((1..onsets).map(|k| Token::Pitch(60 + k as u8)));
        written.extend([Token::Velocity(20), Token::Duration(2)]);
        for t in &written {
            d.advance(*t);
            rest.push(t.id());
        }
        walk = places(&rest);
        let mut logits = vec![0.0f32; VOCAB_SIZE];
        d.tilt(
            walk.last().unwrap(),
            written.last().copied(),
            4,
            &[true; VOCAB_SIZE],
            &mut logits,
            0.5,
        );
        logits
    }

    #[test]
    fn a_part_behind_its_target_leans_to_more_notes_sooner_and_ahead_to_fewer_later() {
        let at = |l: &[f32], t: Token| l[t.id() as usize];
        // Eight notes one beat into the new part, against 0.75 a beat: far ahead.
        let busy = tilts(8);
        assert!(at(&busy, Token::Pitch(80)) < 0.0, "no more notes here");
        assert!(at(&busy, Token::Position(12)) > at(&busy, Token::Position(5)));
        assert!(at(&busy, Token::Bar) > at(&busy, Token::Position(12)));
        // Positions already passed are not allowed anyway; none is tilted past the bar.
        assert!(
            busy.iter()
                .all(|x| x.abs() <= (MAX_TILT * 0.5) as f32 + 1e-6)
        );
        let mut p = prompt();
        let walk = places(&p);
        let mut d = Density::new(1.0, &p, &walk, 4).unwrap();
        // Two bars later with no note: behind, so sooner and more.
        p.extend(ids(&[Token::Bar, Token::Bar]));
        let walk = places(&p);
        let mut logits = vec![0.0f32; VOCAB_SIZE];
        d.tilt(
            walk.last().unwrap(),
            Some(Token::Bar),
            4,
            &[true; VOCAB_SIZE],
            &mut logits,
            1.0,
        );
        assert!(at(&logits, Token::Position(0)) > at(&logits, Token::Position(8)));
        assert!(at(&logits, Token::Bar) < at(&logits, Token::Position(8)));
        // Only allowed tokens move.
        let mut none = vec![0.0f32; VOCAB_SIZE];
        d.tilt(
            walk.last().unwrap(),
            Some(Token::Bar),
            4,
            &[false; VOCAB_SIZE],
            &mut none,
            1.0,
        );
        assert!(none.iter().all(|&x| x == 0.0));
    }

    /// Bars left out of the count (`count(false, …)`, planned bars under the default density)
    /// are as if they were not there: their notes and beats do not move the tilt after them.
    #[test]
    fn a_span_left_out_is_neither_counted_nor_gathered() {
        let tilt_at_end = |d: &mut Density, ids: &[u32]| {
            let mut logits = vec![0.0f32; VOCAB_SIZE];
            let walk = places(ids);
            let last = Token::from_id(*ids.last().unwrap());
            d.tilt(
                walk.last().unwrap(),
                last,
                4,
                &[true; VOCAB_SIZE],
                &mut logits,
                1.0,
            );
            logits
        };
        // Two empty bars after the prompt (which ends on the bar line at beat 8).
        let p = prompt();
        let mut plain = Density::new(1.0, &p, &places(&p), 4).unwrap();
        let mut two = p.clone();
        two.extend(ids(&[Token::Bar, Token::Bar]));
        let want = tilt_at_end(&mut plain, &two);
        // A bar of eight notes left out, then the same two empty bars.
        let mut d = Density::new(1.0, &p, &places(&p), 4).unwrap();
        d.count(false, 8.0);
        assert!(!d.counting());
        let mut ids_left_out = p.clone();
        let mut bar = vec![Token::Position(0)];
        bar.extend((0..8).map(|k| Token::Pitch(60 + k)));
        bar.extend([Token::Velocity(20), Token::Duration(2)]);
        for t in &bar {
            d.advance(*t);
            ids_left_out.push(t.id());
        }
        ids_left_out.push(Token::Bar.id());
        d.count(true, 12.0);
        assert!(d.counting());
        ids_left_out.extend(ids(&[Token::Bar, Token::Bar]));
        assert_eq!(tilt_at_end(&mut d, &ids_left_out), want);
        let at = |t: Token| want[t.id() as usize];
        assert!(
            at(Token::Position(8)) < at(Token::Position(0)),
            "behind: sooner"
        );
    }
}
