//! How a token is drawn from the model's logits (the grammar's mask, temperature and top-p),
//! how the piano's notes are drawn ([`PianoSampling`]), and the counter-based uniform numbers
//! both draw with ([`uniform`]), the same on the CPU and in the fused WebGPU steps.

use serde::{Deserialize, Serialize};

use super::GenerateError;

use crate::music::tokens::Token;

/// How tokens are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampling {
    pub temperature: f32,
    /// Nucleus sampling: draw from the smallest set of tokens holding this much probability.
    pub top_p: f32,
    pub seed: u64,
    /// Continuation: how strongly a bar the phrase lane marks as a repeat leans towards the
    /// same bar of the phrase's first occurrence (its next token gets `e^echo` times its
    /// probability); 0 leaves the model alone.
    pub echo: f32,
    /// Continuation: the new part's notes a beat as a multiple of the prompt's last bars'
    /// (0.5: half as busy, 2: twice); sampling tilts the model's choice of how many notes
    /// come, not which (the `density` module). `None` leaves the model alone.
    pub density: Option<f32>,
    /// Continuation: whether `density` also steers bars whose chords are planned (the
    /// person's, or those a repeat copies from its first occurrence). An asked density does;
    /// the default one ([`DEFAULT_DENSITY`]) steers only bars nobody planned: a plan says
    /// where the music changes section, and the model follows it there.
    pub density_on_plan: bool,
    /// Continuation: how strongly bars whose harmony is not planned keep the pitch classes of
    /// the prompt's last bars: the model's chords lean towards them and pitches outside them
    /// (not of the chord in force) lose odds, each by its share's ratio to one in twelve to
    /// this power (the `key` module); 0 leaves the model alone.
    pub key: f32,
}

/// The echo strength generation uses unless told otherwise, chosen on the validation songs
/// with the default continuation model at its temperature (reports/continuation.md, "Echo"):
/// of 0–5, the one whose planned repeats resemble their first occurrence most nearly as much
/// as the songs' own do (1.02× at 5; 0.56× without), the note rate and the planned chords'
/// tones kept.
pub const DEFAULT_ECHO: f32 = 5.0;

/// The continuation's density where none is asked: the prompt's notes a beat held (the
/// Density controller at 1) on bars nobody planned ([`Sampling::density_on_plan`] false).
/// Chosen on the validation songs' openings and mid-song prompts with `eval --openings`
/// (reports/continuation.md, "The path a person takes"): without it the default model played
/// an opening's 8 new bars at a median 1.22× the prompt's notes a beat, 64 % of them within
/// 0.75–1.33×; with it 1.04× and 100 %, with key and register no worse. On planned bars the
/// validation plan panel preferred the model's own pace (0.95× the real next bars' notes a
/// beat against 0.81× held; "Planned bars keep their own pace").
pub const DEFAULT_DENSITY: f32 = 1.0;

/// The continuation's key hold where none is asked ([`Sampling::key`]). Chosen on the
/// validation songs' openings and mid-song prompts with `eval --openings` (reports/
/// continuation.md, "The key"): of 0–4, the smallest whose new bars' pitch classes come as
/// close to the prompt's as the songs' own next bars do (key cosine 0.925 / 0.923 against the
/// songs' 0.942 / 0.948; 0.837 / 0.860 without), their notes on tones of their chords more
/// often (0.891 / 0.867 against 0.854 / 0.839), pace and register kept.
pub const DEFAULT_KEY: f32 = 2.0;

impl Default for Sampling {
    fn default() -> Self {
        Self {
            temperature: 1.0,
            top_p: 0.95,
            seed: 0,
            echo: DEFAULT_ECHO,
            density: None,
            density_on_plan: true,
            key: 0.0,
        }
    }
}

/// Picks a token from `logits` under the grammar's mask, with temperature and top-p, by `u`, a
/// uniform number in [0, 1): the allowed tokens' weights sorted largest first (ties by id), cut
/// to the smallest set holding `top_p` of the probability, then the first whose running sum
/// reaches `u` times the set's. `shaders/continuation_steps.wgsl` does the same, in the same
/// order of operations.
pub fn sample_token(logits: &[f32], allowed: &[bool], s: Sampling, u: f32) -> u32 {
    let t = s.temperature.max(1e-4);
    let mut cands: Vec<(u32, f32)> = logits
        .iter()
        .enumerate()
        .filter(|(i, _)| allowed.get(*i).copied().unwrap_or(false))
        .map(|(i, &l)| (i as u32, l / t))
        .collect();
    if cands.is_empty() {
        return Token::Eos.id();
    }
    let max = cands.iter().map(|c| c.1).fold(f32::NEG_INFINITY, f32::max);
    for c in cands.iter_mut() {
        c.1 = (c.1 - max).exp();
    }
    cands.sort_by(|a, b| b.1.total_cmp(&a.1));
    let total: f32 = cands.iter().map(|c| c.1).sum();
    let mut kept = 0.0;
    let mut cut = cands.len();
    for (i, c) in cands.iter().enumerate() {
        kept += c.1 / total;
        if kept >= s.top_p {
            cut = i + 1;
            break;
        }
    }
    cands.truncate(cut);
    let mass: f32 = cands.iter().map(|c| c.1).sum();
    let mut x = u * mass;
    for c in &cands {
        x -= c.1;
        if x <= 0.0 {
            return c.0;
        }
    }
    cands[cands.len() - 1].0
}

/// How the piano's next step is drawn from the model's probabilities.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PianoSampling {
    /// Divides the logits: below 1 plays the likeliest notes more surely, above 1 more freely.
    pub temperature: f32,
    /// Instead of drawing: a note starts where its onset probability is above this, and is
    /// held while its hold probability is above one half (the same every time).
    pub threshold: Option<f32>,
    /// Where notes are drawn, the temperature of the hold draws alone, on top of
    /// `temperature`: below 1 a note goes on more surely while the model thinks it more likely
    /// held than not, and ends more surely otherwise (towards 0, held exactly while its hold
    /// probability is above one half). Drawing a hold every sixteenth at 1 ends long notes
    /// early: a note held with probability 0.9 a step ends within 3 steps one time in four.
    #[serde(default = "one")]
    pub hold_temperature: f32,
    pub seed: u64,
    /// Where notes are drawn, about this many times the onsets the model would play: below 1 a
    /// sparser piano, above 1 a busier one, the model still choosing which notes (1: as it
    /// plays). See [`PianoSampling::onset_bias`].
    #[serde(default = "one")]
    pub density: f32,
}

fn one() -> f32 {
    1.0
}

/// What a density adds to every onset's log odds ([`PianoSampling::onset_bias`]).
pub fn onset_bias(density: f32) -> f32 {
    0.5 * density.max(1e-6).ln()
}

impl Default for PianoSampling {
    fn default() -> Self {
        Self {
            temperature: 1.0,
            threshold: None,
            hold_temperature: 1.0,
            seed: 0,
            density: 1.0,
        }
    }
}

impl PianoSampling {
    /// How a model plays unless told otherwise: the temperatures chosen for it on validation
    /// data (1 where none was chosen).
    pub fn of_model(temperature: Option<f32>, hold_temperature: Option<f32>) -> Self {
        Self {
            temperature: temperature.unwrap_or(1.0),
            hold_temperature: hold_temperature.unwrap_or(1.0),
            ..Self::default()
        }
    }

    /// What [`Self::density`] adds to every onset's log odds: half the log of the density. The
    /// piano reads the step it drew before, so its onsets follow the odds' factor about
    /// squared (scaling the odds by 0.5 and 2 gave 0.28× and 4.5× the onsets on 12 validation
    /// excerpts of `accompaniment-ar`): by the square root, the density asked is about the
    /// density played (reports/accompaniment.md, "A density a person asks for").
    pub fn onset_bias(&self) -> f32 {
        onset_bias(self.density)
    }

    /// Checks the settings, in words.
    pub fn check(&self) -> Result<(), GenerateError> {
        let given = [
            ("pianoTemperature", Some(self.temperature)),
            ("threshold", self.threshold),
            ("holdTemperature", Some(self.hold_temperature)),
            ("density", Some(self.density)),
        ];
        for (key, value) in given {
            if let Some(v) = value {
                super::limits::limit(key)
                    .check(f64::from(v))
                    .map_err(GenerateError::Read)?;
            }
        }
        Ok(())
    }
}

/// The uniform number in [0, 1) that draw `kind` (0: the onset, 1: the hold) of `pitch` at step
/// `step` takes under `seed`: PCG hashes of the four (Jarzynski & Olano, "Hash functions for GPU
/// rendering", 2020), 24 bits. A counter, not a stream: the fused WebGPU steps
/// (`shaders/accompaniment_steps.wgsl`, the same function) and the CPU draw the same numbers,
/// so a seed gives the same piece on either backend, and a draw does not depend on how many
/// came before it.
pub fn uniform(seed: u64, step: usize, pitch: usize, kind: u32) -> f32 {
    fn pcg(v: u32) -> u32 {
        let s = v.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
        let w = ((s >> ((s >> 28) + 4)) ^ s).wrapping_mul(277_803_737);
        (w >> 22) ^ w
    }
    let a = pcg(seed as u32 ^ pcg((seed >> 32) as u32));
    let b = pcg(a ^ step as u32);
    let c = pcg(b ^ (pitch as u32 * 2 + kind));
    (c >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// `log_softmax` of plain logits.
pub fn log_softmax_values(logits: &[f32]) -> Vec<f32> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let log_total = logits.iter().map(|l| (l - max).exp()).sum::<f32>().ln() + max;
    logits.iter().map(|l| l - log_total).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draws(logits: &[f32], allowed: &[bool], s: Sampling, n: usize) -> Vec<u32> {
        (0..n)
            .map(|i| sample_token(logits, allowed, s, uniform(s.seed, i, 0, 0)))
            .collect()
    }

    #[test]
    fn only_allowed_tokens_are_drawn_and_none_allowed_ends_the_piece() {
        let logits = [5.0, 0.0, 1.0, 4.0];
        let allowed = [false, true, true, false];
        let s = Sampling {
            top_p: 1.0,
            ..Sampling::default()
        };
        let got = draws(&logits, &allowed, s, 500);
        assert!(got.iter().all(|&t| t == 1 || t == 2), "{got:?}");
        assert!(got.contains(&1) && got.contains(&2));
        assert_eq!(sample_token(&logits, &[false; 4], s, 0.5), Token::Eos.id());
    }

    #[test]
    fn top_p_keeps_the_smallest_set_holding_that_much_probability() {
        // Probabilities about 0.66, 0.24, 0.09, 0.01.
        let logits = [3.0, 2.0, 1.0, -1.0];
        let all = [true; 4];
        let kept = |top_p: f32| {
            let mut got = draws(
                &logits,
                &all,
                Sampling {
                    top_p,
                    ..Sampling::default()
                },
                2000,
            );
            got.sort();
            got.dedup();
            got
        };
        assert_eq!(kept(0.5), [0]);
        assert_eq!(kept(0.8), [0, 1]);
        assert_eq!(kept(0.95), [0, 1, 2]);
        assert_eq!(kept(1.0), [0, 1, 2, 3]);
    }

    #[test]
    fn draws_follow_the_softmax_at_the_temperature() {
        let logits = [1.0f32.ln(), 3.0f32.ln()];
        let all = [true; 2];
        let share = |temperature: f32| {
            let s = Sampling {
                temperature,
                top_p: 1.0,
                seed: 7,
                ..Default::default()
            };
            let got = draws(&logits, &all, s, 20_000);
            got.iter().filter(|&&t| t == 1).count() as f64 / got.len() as f64
        };
        // p(1) = 3/4 at temperature 1; 9/10 at 1/2 (odds squared); 1 near 0.
        assert!((share(1.0) - 0.75).abs() < 0.02, "{}", share(1.0));
        assert!((share(0.5) - 0.9).abs() < 0.02, "{}", share(0.5));
        assert_eq!(share(0.0), 1.0);
        // The same seed draws the same tokens.
        let s = Sampling::default();
        assert_eq!(draws(&logits, &all, s, 50), draws(&logits, &all, s, 50));
    }

    #[test]
    fn log_softmax_values_sum_to_one_and_keep_the_order() {
        let out = log_softmax_values(&[1.0, 2.0, 1000.0, -5.0]);
        let total: f32 = out.iter().map(|l| l.exp()).sum();
        assert!((total - 1.0).abs() < 1e-5);
        assert!(out[2] > out[1] && out[1] > out[0] && out[0] > out[3]);
        assert!(out.iter().all(|l| l.is_finite()));
    }

    /// The counter-based uniforms look uniform and independent: mean, variance and the
    /// correlation of neighbouring pitches' and steps' draws over 60 000 draws.
    #[test]
    fn the_counter_uniforms_are_uniform_and_independent() {
        let mut values = Vec::new();
        for step in 0..300 {
            for pitch in 0..crate::music::roll::PITCHES {
                values.push((
                    uniform(7, step, pitch, 0),
                    uniform(7, step, pitch, 1),
                    uniform(7, step + 1, pitch, 0),
                    uniform(8, step, pitch, 0),
                ));
            }
        }
        let n = values.len() as f64;
        let mean = values.iter().map(|v| v.0 as f64).sum::<f64>() / n;
        let var = values
            .iter()
            .map(|v| (v.0 as f64 - mean).powi(2))
            .sum::<f64>()
            / n;
        assert!((mean - 0.5).abs() < 0.005, "{mean}");
        assert!((var - 1.0 / 12.0).abs() < 0.002, "{var}");
        assert!(values.iter().all(|v| (0.0..1.0).contains(&v.0)));
        type Draws = (f32, f32, f32, f32);
        let corr = |f: &dyn Fn(&Draws) -> f32| {
            values
                .iter()
                .map(|v| (v.0 as f64 - 0.5) * (f(v) as f64 - 0.5))
                .sum::<f64>()
                / n
                * 12.0
        };
        for (what, c) in [
            ("kinds", corr(&|v| v.1)),
            ("steps", corr(&|v| v.2)),
            ("seeds", corr(&|v| v.3)),
        ] {
            assert!(c.abs() < 0.02, "{what}: correlation {c}");
        }
    }
}
