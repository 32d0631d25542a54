//! Key: a continuation that stays in the key of the music before it unless the plan moves it
//! ([`super::Sampling::key`]). The prompt's last bars give a pitch-class profile (the share of
//! its onsets on each of the 12 pitch classes, smoothed); on a bar whose harmony nobody
//! planned, sampling tilts
//!
//! - each `Chord` the model writes by `strength` times the mean over the chord's tones of
//!   `ln(12 · share of the tone's pitch class)`: chords of the prompt's pitch classes gain,
//!   others lose, so the model's own harmony stays in the prompt's key;
//! - each `Pitch` whose class the prompt plays less often than one in twelve by the same
//!   (negative) amount, unless it is a tone of the chord in force: the notes keep to their
//!   chord, the chords to the key, and among the prompt's own pitch classes the model's
//!   choice is left as it is.
//!
//! A planned bar (the person's chords, or a repeat's copied ones) is left alone: the plan may
//! change key. The model still chooses every token; the tilt only weighs which pitch classes
//! it draws from, and is scaled by the temperature so its effect on the probabilities is the
//! same at any.

use super::density::recent_bars;
use crate::music::chords::Chord;
use crate::music::tokens::Token;
use crate::music::tokens::places::TokenPlace;

/// Onsets added to every pitch class of the prompt's profile, so that a class it never plays
/// loses a bounded amount.
const SMOOTHING: f64 = 1.0;
/// The largest tilt of one token, in nats.
const MAX_TILT: f64 = 4.0;

/// The prompt's pitch-class profile, as the tilt a pitch class gets at strength 1.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Key {
    /// `ln(12 · share)` per pitch class.
    weight: [f64; 12],
    /// Each chord token's id and the mean weight of its tones (worked out once, not per token).
    chords: Vec<(usize, f64)>,
}

impl Key {
    /// The profile of the onsets of the prompt's last bars with notes (the bars the Density
    /// controller measures); `None` when the prompt has no note.
    pub(super) fn new(prompt: &[u32], places: &[TokenPlace], bar_beats: usize) -> Option<Self> {
        let mut counts = [SMOOTHING; 12];
        let mut onsets = 0usize;
        for bar in recent_bars(prompt, places, bar_beats) {
            for &pitch in &bar.pitches {
                counts[pitch as usize % 12] += 1.0;
                onsets += 1;
            }
        }
        if onsets == 0 {
            return None;
        }
        let total: f64 = counts.iter().sum();
        let weight = counts.map(|c| (12.0 * c / total).ln());
        let chords = (Token::Chord(None).id()..Token::Tempo(0).id())
            .filter_map(|id| match Token::from_id(id) {
                Some(Token::Chord(Some(chord))) => {
                    let tones: Vec<f64> = chord
                        .pitch_classes()
                        .map(|pc| weight[pc as usize])
                        .collect();
                    let mean = tones.iter().sum::<f64>() / tones.len().max(1) as f64;
                    Some((id as usize, mean))
                }
                _ => None,
            })
            .collect();
        Some(Self { weight, chords })
    }

    /// The tilt of pitch class `pc` at strength 1.
    #[cfg(test)]
    pub(super) fn weight(&self, pc: u8) -> f64 {
        self.weight[pc as usize % 12]
    }

    /// Tilts `logits` (before the temperature divides them) at `strength`, `chord` in force;
    /// only tokens `allowed` are touched. Pitches are only ever tilted down, and a tone of the
    /// chord in force not at all.
    pub(super) fn tilt(
        &self,
        strength: f32,
        chord: Option<Chord>,
        allowed: &[bool],
        logits: &mut [f32],
        temperature: f32,
    ) {
        let strength = f64::from(strength);
        let scale = f64::from(temperature.max(1e-4));
        let mut add = |id: usize, weight: f64| {
            if allowed.get(id).copied().unwrap_or(false) {
                logits[id] += ((strength * weight).clamp(-MAX_TILT, MAX_TILT) * scale) as f32;
            }
        };
        let mut pitch_weight = self.weight.map(|w| w.min(0.0));
        for pc in chord.iter().flat_map(|c| c.pitch_classes()) {
            pitch_weight[pc as usize] = 0.0;
        }
        for pitch in 0..128u8 {
            add(
                Token::Pitch(pitch).id() as usize,
                pitch_weight[pitch as usize % 12],
            );
        }
        for &(id, weight) in &self.chords {
            add(id, weight);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::music::tokens::VOCAB_SIZE;
    use crate::music::tokens::places::places;

    /// Two 4/4 bars of C major's C, E and G (C twice), then a bar line.
    fn prompt() -> Vec<u32> {
        let mut t = vec![Token::Bos];
        for _ in 0..2 {
            t.push(Token::Bar);
            for (k, p) in [60u8, 64, 67, 72].into_iter().enumerate() {
                t.extend([
                    Token::Position(4 * k as u8),
                    Token::Pitch(p),
                    Token::Velocity(20),
                    Token::Duration(4),
                ]);
            }
        }
        t.iter().map(|t| t.id()).collect()
    }

    #[test]
    fn the_profile_is_the_prompts_pitch_classes_smoothed() {
        let p = prompt();
        let key = Key::new(&p, &places(&p), 4).unwrap();
        // 4 Cs, 2 Es, 2 Gs and one of smoothing each: 20 in all.
        let w = |count: f64| (12.0 * count / 20.0).ln();
        for (pc, count) in [(0, 5.0), (4, 3.0), (7, 3.0), (1, 1.0), (11, 1.0)] {
            assert!((key.weight(pc) - w(count)).abs() < 1e-9, "pitch class {pc}");
        }
        assert!(key.weight(0) > key.weight(4) && key.weight(4) > 0.0 && key.weight(6) < 0.0);
        let silent: Vec<u32> = [Token::Bos, Token::Bar, Token::Bar]
            .iter()
            .map(|t| t.id())
            .collect();
        assert_eq!(Key::new(&silent, &places(&silent), 4), None);
    }

    #[test]
    fn pitches_and_chords_of_the_prompts_key_gain_and_others_lose() {
        let p = prompt();
        let key = Key::new(&p, &places(&p), 4).unwrap();
        let at = |l: &[f32], t: Token| l[t.id() as usize];
        let chord = |s: &str| Token::Chord(Chord::parse_any(s).unwrap());
        let mut logits = vec![0.0f32; VOCAB_SIZE];
        key.tilt(1.0, None, &[true; VOCAB_SIZE], &mut logits, 0.5);
        // Pitch classes the prompt plays keep their odds; the others lose, every octave alike,
        // scaled by the temperature.
        for pitch in [48u8, 60, 64, 84] {
            assert_eq!(at(&logits, Token::Pitch(pitch)), 0.0);
        }
        for pitch in [49u8, 61, 85] {
            let c = at(&logits, Token::Pitch(pitch));
            assert!((f64::from(c) - 0.5 * key.weight(1)).abs() < 1e-6, "{c}");
        }
        assert!(
            at(&logits, chord("C")) > 0.0 && at(&logits, chord("C")) > at(&logits, chord("Am"))
        );
        assert!(at(&logits, chord("F#")) < 0.0);
        // No chord, positions, bar lines and the rest keep their odds.
        for t in [
            Token::Chord(None),
            Token::Bar,
            Token::Position(3),
            Token::Duration(2),
        ] {
            assert_eq!(at(&logits, t), 0.0, "{t:?}");
        }
        // A strong hold is capped; only allowed tokens move.
        let mut strong = vec![0.0f32; VOCAB_SIZE];
        key.tilt(100.0, None, &[true; VOCAB_SIZE], &mut strong, 1.0);
        assert!(strong.iter().all(|x| x.abs() <= MAX_TILT as f32 + 1e-6));
        let mut none = vec![0.0f32; VOCAB_SIZE];
        key.tilt(1.0, None, &[false; VOCAB_SIZE], &mut none, 1.0);
        assert!(none.iter().all(|&x| x == 0.0));
        // Under an F# chord its tones are not tilted down; the others as before.
        let mut under = vec![0.0f32; VOCAB_SIZE];
        let f_sharp = Chord::parse_any("F#").unwrap();
        key.tilt(1.0, f_sharp, &[true; VOCAB_SIZE], &mut under, 0.5);
        assert_eq!(at(&under, Token::Pitch(66)), 0.0);
        assert_eq!(at(&under, Token::Pitch(60)), 0.0);
        assert_eq!(at(&under, Token::Pitch(61)), 0.0, "C# is F#'s fifth");
        assert!(at(&under, Token::Pitch(62)) < 0.0);
    }
}
