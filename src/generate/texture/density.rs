//! The density of the steps a texture echo leans on, kept for each song as it is written
//! ([`crate::music::texture::echo::EchoLean::song_density`]).
//!
//! The echo's lean is a ratio counted in the pianists; added to a model that already follows
//! its chords it counts that evidence twice and plays more onsets than the model would. One
//! density for every song (`EchoLean::density`, measured on the training songs) takes that
//! back on POP909, but a song unlike them (a lead sheet's long melody notes, where the model
//! alone thins out) keeps the busier texture the lean holds. So the song's own: the one
//! constant shift of the leaned steps' log odds that gives the leaned steps written so far the
//! count of onsets the model's own odds expect there. It starts at the measured density, which
//! a bar's worth of leaned steps outweighs; the lean still says where on those steps the onsets
//! fall, only their number over the song is the model's.

use crate::generate::sample::PianoSampling;
use crate::music::roll::PITCHES;

/// The lowest leaned log odds counted (an onset this unlikely adds nothing to a count).
const LOWEST: f32 = -24.0;
/// Bins a logit wide.
const PER_LOGIT: f32 = 32.0;
/// Log odds from [`LOWEST`] to its opposite, a 32nd of a logit a bin.
const BINS: usize = (2.0 * -LOWEST * PER_LOGIT) as usize;
/// The widest the shift goes either way, in log odds.
const REACH: f32 = 8.0;
/// How many leaned steps the measured density weighs as: a bar of sixteenths.
const PRIOR_STEPS: f32 = 16.0;

/// A song's density of the leaned steps, as far as it is written.
#[derive(Clone, Debug, PartialEq)]
pub struct SongDensity {
    /// The shift the measured density gives (its log odds at the echo's strength).
    prior: f32,
    /// Whether the song's shift stays at or under the prior (`SongDensityRule::Capped`).
    capped: bool,
    /// The shift the next leaned step gets.
    shift: f32,
    /// The onsets the model's own odds expect on the leaned steps so far.
    own: f64,
    /// The leaned steps' log odds before the shift, binned ([`PER_LOGIT`] a logit from
    /// [`LOWEST`]): how many fell in each bin and their sum; and the lowest and highest bin
    /// holding any.
    binned: Vec<(u32, f64)>,
    occupied: Option<(usize, usize)>,
    steps: usize,
}

impl SongDensity {
    /// Before any step is written: the shift `prior` (log odds; the measured density's), never
    /// exceeded when `capped`.
    pub fn new(prior: f32, capped: bool) -> Self {
        Self {
            prior,
            capped,
            shift: prior,
            own: 0.0,
            binned: vec![(0, 0.0); BINS],
            occupied: None,
            steps: 0,
        }
    }

    /// The shift the next leaned step gets.
    pub fn shift(&self) -> f32 {
        self.shift
    }

    /// Shifts a leaned step's `lean` (added to the onsets' log odds, as `draw_step` adds it)
    /// by the song's density so far, then counts the step: what the model's `onset_logits` at
    /// `s` expect there without the lean, and what the lean makes of them.
    pub fn settle(&mut self, lean: &mut [f32], onset_logits: &[f32], s: &PianoSampling) {
        let t = s.temperature.max(1e-4);
        let bias = s.onset_bias();
        for (l, &z) in lean.iter_mut().zip(onset_logits).take(PITCHES) {
            let odds = z / t + bias;
            self.own += f64::from(sigmoid(odds));
            let leaned = odds + *l;
            if leaned >= LOWEST {
                let bin = (((leaned - LOWEST) * PER_LOGIT) as usize).min(BINS - 1);
                self.binned[bin].0 += 1;
                self.binned[bin].1 += f64::from(leaned);
                self.occupied = Some(match self.occupied {
                    Some((lo, hi)) => (lo.min(bin), hi.max(bin)),
                    None => (bin, bin),
                });
            }
            *l += self.shift;
        }
        self.steps += 1;
        let n = self.steps as f32;
        let fitted = match self.capped {
            true => self.fitted().min(self.prior),
            false => self.fitted(),
        };
        self.shift = (n * fitted + PRIOR_STEPS * self.prior) / (n + PRIOR_STEPS);
    }

    /// The shift that gives the leaned steps so far the model's own count (within
    /// [`REACH`]): the count rises with it, so the bracket is halved to a thousandth.
    fn fitted(&self) -> f32 {
        let Some((lo, hi)) = self.occupied else {
            return -REACH;
        };
        let count = |c: f32| -> f64 {
            // Each bin's steps at their mean, which is within the bin.
            self.binned[lo..=hi]
                .iter()
                .filter(|&&(n, _)| n > 0)
                .map(|&(n, sum)| {
                    let n = f64::from(n);
                    n * f64::from(sigmoid((sum / n) as f32 + c))
                })
                .sum()
        };
        let (mut low, mut high) = (-REACH, REACH);
        while high - low > 1e-3 {
            let mid = 0.5 * (low + high);
            if count(mid) < self.own {
                low = mid;
            } else {
                high = mid;
            }
        }
        0.5 * (low + high)
    }
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// Shifts `lean` (128 values added to the onsets' log odds, as `generate::piano::draw_step` adds them) by the
/// one constant that leaves the step's expected count of onsets what `onset_logits` give at
/// `s` without it: the lean then moves the step's onsets between pitches and leaves their
/// number to the model and the density asked (`EchoLean::keeps_count`).
pub fn keep_count(lean: &mut [f32], onset_logits: &[f32], s: &PianoSampling) {
    let t = s.temperature.max(1e-4);
    let bias = s.onset_bias();
    let odds: Vec<f32> = onset_logits.iter().map(|z| z / t + bias).collect();
    let sigmoid = |x: f32| 1.0 / (1.0 + (-x).exp());
    let want: f32 = odds.iter().map(|&x| sigmoid(x)).sum();
    let count = |c: f32| -> f32 {
        odds.iter()
            .zip(lean.iter())
            .map(|(&x, &l)| sigmoid(x + l + c))
            .sum()
    };
    // The count rises with the shift: halve the bracket until it is a thousandth of a logit.
    let (mut lo, mut hi) = (-40f32, 40f32);
    while hi - lo > 1e-3 {
        let mid = 0.5 * (lo + hi);
        if count(mid) < want {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let c = 0.5 * (lo + hi);
    lean.iter_mut().for_each(|l| *l += c);
}
