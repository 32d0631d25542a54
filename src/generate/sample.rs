//! How a token is drawn from the model's logits: the grammar's mask, temperature and top-p.

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
}

/// The echo strength generation uses unless told otherwise, chosen on the validation songs
/// with the default continuation model at its temperature (reports/continuation.md, "Echo"):
/// of 0–5, the one whose planned repeats resemble their first occurrence most nearly as much
/// as the songs' own do (1.02× at 5; 0.56× without), the note rate and the planned chords'
/// tones kept.
pub const DEFAULT_ECHO: f32 = 5.0;

impl Default for Sampling {
    fn default() -> Self {
        Self {
            temperature: 1.0,
            top_p: 0.95,
            seed: 0,
            echo: DEFAULT_ECHO,
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

/// `log_softmax` of plain logits.
pub fn log_softmax_values(logits: &[f32]) -> Vec<f32> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let log_total = logits.iter().map(|l| (l - max).exp()).sum::<f32>().ln() + max;
    logits.iter().map(|l| l - log_total).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::piano::uniform;

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
}
