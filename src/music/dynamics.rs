//! Dynamics: a velocity for every onset of a written piano part, learnt from the POP909
//! pianists (issue 36). A small model — least squares over 27 features of each onset — reads
//! what a pianist's touch follows: the place in the bar (downbeats and half bars against
//! off-beats), the melody's loudness around the onset and over the song, the phrase (its first
//! and last bar, where in it, intro or outro), the onset's chord (how many notes strike with
//! it, top or bottom of them, register) and its length. The velocities it predicts vary as
//! much as the features explain; the rest of a pianist's spread is drawn — a song's as wide as
//! its melody's velocities suggest (fitted on the training songs), scaled by a share chosen on
//! validation so the songs' velocities spread as the pianists' do.
//!
//! Fitted by `pianoformer dynamics` (the fit and the choice here, the data and the command in
//! the CLI), shipped as JSON beside the models (`www/models/dynamics.json`), and applied to the
//! accompaniment the models write (the page and `generate`), which otherwise has one velocity.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use super::grid::Grid;
use super::labels::StepLabels;
use super::roll::{PITCHES, PianoRoll};

/// The features of an onset, in order (the fitted weights follow it).
pub const FEATURES: [&str; 27] = [
    "bias",
    "downbeat, off the beat by an eighth",
    "downbeat, off by a sixteenth",
    "half bar, on the beat",
    "half bar, off by an eighth",
    "half bar, off by a sixteenth",
    "other beat, on the beat",
    "other beat, off by an eighth",
    "other beat, off by a sixteenth",
    "melody loudness here against the song's (÷16)",
    "the song's melody loudness against 80 (÷16)",
    "no melody onset in the bar",
    "a melody onset on this step",
    "melody onsets in the bar (÷8)",
    "first bar of a phrase",
    "last bar of a phrase",
    "place in the phrase (0 to 1)",
    "intro, outro, bridge or transition",
    "no phrase",
    "notes struck together (−1, ÷3, at most 2)",
    "top note of those struck together",
    "bottom note of those struck together",
    "register ((pitch − 60) ÷ 12)",
    "length (log2 of sixteenths)",
    "the bar's piano onsets (÷16)",
    "place in the song (0 to 1)",
    "place in the song, squared",
];
const D: usize = FEATURES.len();

/// The fitted model, as shipped.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Dynamics {
    /// What each weight multiplies ([`FEATURES`]); checked on load.
    pub features: Vec<String>,
    pub weights: Vec<f64>,
    /// Root mean square of the training residuals, in velocity units.
    pub residual: f64,
    /// How much of the residual spread is drawn on top of the prediction (chosen on
    /// validation).
    pub noise: f64,
    /// The residual spread of a song as `a + b ×` its melody's velocity spread (fitted on the
    /// training songs: a pianist who plays evenly goes with an even melody), at least 1; `None`:
    /// `residual` for every song.
    #[serde(default)]
    pub spread: Option<[f64; 2]>,
}

/// One onset of a piano roll: its step, pitch and velocity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Onset {
    pub step: usize,
    pub pitch: usize,
    pub velocity: u8,
}

/// The onsets of `roll` in time order (then by pitch).
pub fn onsets(roll: &PianoRoll) -> Vec<Onset> {
    let mut out = Vec::new();
    for step in 0..roll.num_steps {
        for pitch in 0..PITCHES {
            if roll.onset(step, pitch) {
                out.push(Onset {
                    step,
                    pitch,
                    velocity: roll.velocity(step, pitch),
                });
            }
        }
    }
    out
}

/// What a piece offers every onset's features: the bar grid, the labels and the melody's
/// loudness by bar and over the song.
pub struct Context<'a> {
    grid: &'a Grid,
    labels: &'a StepLabels,
    melody: &'a PianoRoll,
    /// Mean melody onset velocity of each bar and its onset count.
    bar_melody: Vec<(Option<f64>, usize)>,
    song_melody: f64,
    /// The standard deviation of the melody's onset velocities over the song.
    song_melody_spread: f64,
}

impl<'a> Context<'a> {
    pub fn new(grid: &'a Grid, labels: &'a StepLabels, melody: &'a PianoRoll) -> Self {
        let bars = grid.num_bars();
        let mut sums = vec![(0.0, 0usize); bars];
        let (mut total, mut squares, mut count) = (0.0, 0.0, 0usize);
        for o in onsets(melody) {
            if o.step >= grid.num_steps() {
                continue;
            }
            let (bar, _) = grid.bar_of_step(o.step);
            sums[bar].0 += f64::from(o.velocity);
            sums[bar].1 += 1;
            total += f64::from(o.velocity);
            squares += f64::from(o.velocity).powi(2);
            count += 1;
        }
        let song_melody = if count > 0 {
            total / count as f64
        } else {
            80.0
        };
        let song_melody_spread = if count > 1 {
            (squares / count as f64 - song_melody * song_melody)
                .max(0.0)
                .sqrt()
        } else {
            0.0
        };
        let bar_melody = sums
            .iter()
            .map(|&(s, n)| ((n > 0).then(|| s / n as f64), n))
            .collect();
        Self {
            grid,
            labels,
            melody,
            bar_melody,
            song_melody,
            song_melody_spread,
        }
    }

    /// The melody's loudness around `bar`: its own onsets', else the nearest bar's within two.
    fn melody_near(&self, bar: usize) -> Option<f64> {
        let at = |b: usize| self.bar_melody.get(b).and_then(|x| x.0);
        at(bar).or_else(|| (1..=2).find_map(|d| at(bar.wrapping_sub(d)).or_else(|| at(bar + d))))
    }

    /// Where `step` falls in its bar: 3 × strength (downbeat, half bar, other beat) + offset
    /// (on the beat, an eighth off, a sixteenth off).
    pub fn place(&self, step: usize) -> usize {
        let (bar, _) = self.grid.bar_of_step(step);
        let spb = self.grid.steps_per_beat.max(1);
        let pos = self.labels.position.get(step).map_or(0, |&p| p as usize);
        let beats = self.grid.bar_beats(bar).len().max(1);
        let (beat, sub) = (pos / spb, pos % spb);
        let strength = if beat == 0 {
            0
        } else if beats >= 4 && beats.is_multiple_of(2) && beat == beats / 2 {
            1
        } else {
            2
        };
        let offset = if sub == 0 {
            0
        } else if spb.is_multiple_of(2) && sub == spb / 2 {
            1
        } else {
            2
        };
        strength * 3 + offset
    }

    /// A piano part's dynamics in this song: `played` holds its onsets with their velocities
    /// (the pianist's, or a model's for the same or other notes).
    pub fn measure(&self, played: &[(Onset, u8)]) -> Measure {
        let n = played.len();
        if n == 0 {
            return Measure::default();
        }
        let v = |i: usize| f64::from(played[i].1);
        let mean = (0..n).map(v).sum::<f64>() / n as f64;
        let std = ((0..n).map(|i| (v(i) - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        let last = self.grid.num_steps().max(1) - 1;
        let mut bars = vec![(0.0, 0usize); self.grid.num_bars()];
        let mut places = [(0.0, 0usize); 5];
        for (o, vel) in played {
            let step = o.step.min(last);
            let b = self.grid.bar_of_step(step).0;
            bars[b].0 += f64::from(*vel);
            bars[b].1 += 1;
            let class = self.place(step);
            let k = if class.is_multiple_of(3) {
                class / 3
            } else {
                2 + class % 3
            };
            places[k].0 += f64::from(*vel) - mean;
            places[k].1 += 1;
        }
        let pairs: Vec<(f64, f64)> = bars
            .iter()
            .enumerate()
            .filter_map(|(b, &(s, k))| {
                let m = self.bar_melody.get(b).and_then(|x| x.0)?;
                (k > 0).then(|| (m, s / k as f64))
            })
            .collect();
        Measure {
            onsets: n,
            mean,
            std,
            melody_corr: pearson(&pairs),
            accents: places.map(|(s, k)| (k > 0).then(|| s / k as f64)),
        }
    }

    /// The features of onset `o` of `piano` (whose onsets at `o.step` are `struck`, lowest
    /// first), with `bar_onsets` the piano's onsets in its bar.
    fn features(
        &self,
        piano: &PianoRoll,
        o: Onset,
        struck: &[usize],
        bar_onsets: usize,
    ) -> [f64; D] {
        let mut x = [0.0; D];
        x[0] = 1.0;
        let steps = self.grid.num_steps().max(1);
        let step = o.step.min(steps - 1);
        let (bar, _) = self.grid.bar_of_step(step);
        let class = self.place(step);
        if class > 0 {
            x[class] = 1.0;
        }
        match self.melody_near(bar) {
            Some(m) => x[9] = (m - self.song_melody) / 16.0,
            None => x[11] = 1.0,
        }
        if self.bar_melody.get(bar).is_none_or(|b| b.1 == 0) {
            x[11] = 1.0;
        }
        x[10] = (self.song_melody - 80.0) / 16.0;
        x[12] = f64::from((0..PITCHES).any(|p| self.melody.onset(step, p)) as u8);
        x[13] = self.bar_melody.get(bar).map_or(0, |b| b.1) as f64 / 8.0;
        match self.labels.phrase.get(step).copied().flatten() {
            Some(p) => {
                x[14] = f64::from((p.bar == 0) as u8);
                x[15] = f64::from((p.bar + 1 >= p.bars) as u8);
                x[16] = f64::from(p.bar) / f64::from(p.bars.max(1));
                x[17] = f64::from(p.letter.is_ascii_lowercase() as u8);
            }
            None => x[18] = 1.0,
        }
        x[19] = ((struck.len().max(1) - 1) as f64 / 3.0).min(2.0);
        x[20] = f64::from((struck.last() == Some(&o.pitch)) as u8);
        x[21] = f64::from((struck.first() == Some(&o.pitch) && struck.len() > 1) as u8);
        x[22] = (o.pitch as f64 - 60.0) / 12.0;
        let mut length = 1;
        while o.step + length < piano.num_steps
            && piano.sustain(o.step + length, o.pitch)
            && !piano.onset(o.step + length, o.pitch)
        {
            length += 1;
        }
        x[23] = (length as f64).log2();
        x[24] = bar_onsets as f64 / 16.0;
        let place = step as f64 / steps as f64;
        x[25] = place;
        x[26] = place * place;
        x
    }

    /// Every onset of `piano` (those at steps in `region`) with its features.
    pub fn rows(
        &self,
        piano: &PianoRoll,
        region: std::ops::Range<usize>,
    ) -> Vec<(Onset, [f64; D])> {
        let all = onsets(piano);
        let mut per_bar = vec![0usize; self.grid.num_bars() + 1];
        for o in &all {
            let bar = self
                .grid
                .bar_of_step(o.step.min(self.grid.num_steps().max(1) - 1))
                .0;
            per_bar[bar] += 1;
        }
        let mut out = Vec::with_capacity(all.len());
        let mut i = 0;
        while i < all.len() {
            let step = all[i].step;
            let mut j = i;
            while j < all.len() && all[j].step == step {
                j += 1;
            }
            if region.contains(&step) {
                let struck: Vec<usize> = all[i..j].iter().map(|o| o.pitch).collect();
                let bar = self
                    .grid
                    .bar_of_step(step.min(self.grid.num_steps().max(1) - 1))
                    .0;
                for &o in &all[i..j] {
                    out.push((o, self.features(piano, o, &struck, per_bar[bar])));
                }
            }
            i = j;
        }
        out
    }
}

/// A piano part's dynamics in one song ([`Context::measure`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Measure {
    pub onsets: usize,
    pub mean: f64,
    pub std: f64,
    /// Pearson's r between the melody's and the piano's mean velocity per bar (bars with both;
    /// none with fewer than 4 such bars or no variation).
    pub melody_corr: Option<f64>,
    /// Mean velocity against the part's mean by place in the bar: downbeats, half bars, other
    /// beats (on the beat), eighth and sixteenth off-beats.
    pub accents: [Option<f64>; 5],
}

/// The places of [`Measure::accents`], in words.
pub const PLACES: [&str; 5] = [
    "downbeat",
    "half bar",
    "other beats",
    "eighth off-beats",
    "sixteenth off-beats",
];

fn pearson(pairs: &[(f64, f64)]) -> Option<f64> {
    if pairs.len() < 4 {
        return None;
    }
    let n = pairs.len() as f64;
    let (mx, my) = pairs
        .iter()
        .fold((0.0, 0.0), |(a, b), &(x, y)| (a + x / n, b + y / n));
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for &(x, y) in pairs {
        sxy += (x - mx) * (y - my);
        sxx += (x - mx).powi(2);
        syy += (y - my).powi(2);
    }
    (sxx > 1e-9 && syy > 1e-9).then(|| sxy / (sxx * syy).sqrt())
}

/// Least squares with a small ridge, accumulated one onset at a time.
#[derive(Clone, Debug)]
pub struct Fit {
    xtx: Vec<f64>,
    xty: Vec<f64>,
    yy: f64,
    n: usize,
}

impl Default for Fit {
    fn default() -> Self {
        Self {
            xtx: vec![0.0; D * D],
            xty: vec![0.0; D],
            yy: 0.0,
            n: 0,
        }
    }
}

impl Fit {
    pub fn add(&mut self, x: &[f64; D], y: f64) {
        for i in 0..D {
            for j in 0..D {
                self.xtx[i * D + j] += x[i] * x[j];
            }
            self.xty[i] += x[i] * y;
        }
        self.yy += y * y;
        self.n += 1;
    }

    /// The weights (ridge `lambda` on every weight but the bias) and the residuals' RMS.
    pub fn solve(&self, lambda: f64) -> Result<Dynamics, String> {
        if self.n <= D {
            return Err(format!(
                "{} piano onsets are too few to learn dynamics from (at least {} are needed)",
                self.n,
                D + 1
            ));
        }
        let mut a = self.xtx.clone();
        for i in 1..D {
            a[i * D + i] += lambda;
        }
        let w = solve(a, self.xty.clone()).ok_or("the onsets' features are degenerate")?;
        // Σ(y − wx)² = yy − 2 w·xty + wᵀ XᵀX w
        let mut quad = 0.0;
        for i in 0..D {
            for j in 0..D {
                quad += w[i] * self.xtx[i * D + j] * w[j];
            }
        }
        let wy: f64 = w.iter().zip(&self.xty).map(|(a, b)| a * b).sum();
        let sse = (self.yy - 2.0 * wy + quad).max(0.0);
        Ok(Dynamics {
            features: FEATURES.iter().map(|s| s.to_string()).collect(),
            weights: w,
            residual: (sse / self.n as f64).sqrt(),
            noise: 1.0,
            spread: None,
        })
    }
}

/// Solves `a x = b` (a: n × n, row-major) by Gaussian elimination with partial pivoting.
pub(crate) fn solve(mut a: Vec<f64>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for col in 0..n {
        let pivot =
            (col..n).max_by(|&i, &j| a[i * n + col].abs().total_cmp(&a[j * n + col].abs()))?;
        if a[pivot * n + col].abs() < 1e-12 {
            return None;
        }
        for k in 0..n {
            a.swap(col * n + k, pivot * n + k);
        }
        b.swap(col, pivot);
        for row in col + 1..n {
            let f = a[row * n + col] / a[col * n + col];
            for k in col..n {
                a[row * n + k] -= f * a[col * n + k];
            }
            b[row] -= f * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let s: f64 = (row + 1..n).map(|k| a[row * n + k] * x[k]).sum();
        x[row] = (b[row] - s) / a[row * n + row];
    }
    Some(x)
}

impl Dynamics {
    /// Reads a shipped model, checking it was fitted on these features.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let d: Dynamics = serde_json::from_str(text)
            .map_err(|e| format!("the dynamics model is malformed: {e}"))?;
        if d.features.len() != D
            || d.weights.len() != D
            || d.features.iter().zip(FEATURES).any(|(a, b)| a != b)
        {
            return Err(
                "the dynamics model was fitted on other features than this pianoformer's".into(),
            );
        }
        if !d.residual.is_finite()
            || !d.noise.is_finite()
            || d.weights.iter().any(|w| !w.is_finite())
        {
            return Err("the dynamics model holds a number that is not finite".into());
        }
        Ok(d)
    }

    /// The spread of this song's velocities around the predictions (before `noise`).
    pub fn song_spread(&self, ctx: &Context) -> f64 {
        match self.spread {
            Some([a, b]) => (a + b * ctx.song_melody_spread).max(1.0),
            None => self.residual,
        }
    }

    /// Fits [`Dynamics::spread`] on `songs` (each a context and the onsets with the pianist's
    /// velocities): least squares of each song's residual RMS on its melody's velocity spread.
    pub fn fit_spread<'a>(
        &mut self,
        songs: impl IntoIterator<Item = (&'a Context<'a>, &'a PianoRoll)>,
    ) {
        let (mut n, mut sx, mut sy, mut sxx, mut sxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for (ctx, piano) in songs {
            let rows = ctx.rows(piano, 0..piano.num_steps);
            if rows.len() < 2 {
                continue;
            }
            let sse: f64 = rows
                .iter()
                .map(|(o, x)| (f64::from(o.velocity) - self.predict(x)).powi(2))
                .sum();
            let (x, y) = (ctx.song_melody_spread, (sse / rows.len() as f64).sqrt());
            n += 1.0;
            sx += x;
            sy += y;
            sxx += x * x;
            sxy += x * y;
        }
        let var = n * sxx - sx * sx;
        if n >= 3.0 && var > 1e-9 {
            let b = (n * sxy - sx * sy) / var;
            self.spread = Some([(sy - b * sx) / n, b]);
        }
    }

    /// The expected velocity of an onset with features `x`.
    pub fn predict(&self, x: &[f64; D]) -> f64 {
        self.weights.iter().zip(x).map(|(w, x)| w * x).sum()
    }

    /// Velocities for the onsets of `piano` at steps in `region`, drawn with `seed`: the
    /// prediction plus `noise ×` the song's spread ([`Dynamics::song_spread`]) of a standard
    /// normal, rounded into 1–127.
    pub fn velocities(
        &self,
        ctx: &Context,
        piano: &PianoRoll,
        region: std::ops::Range<usize>,
        seed: u64,
    ) -> Vec<(Onset, u8)> {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed_d1a3);
        let spread = self.noise * self.song_spread(ctx);
        ctx.rows(piano, region)
            .into_iter()
            .map(|(o, x)| {
                let v = self.predict(&x) + spread * normal(&mut rng);
                (o, v.round().clamp(1.0, 127.0) as u8)
            })
            .collect()
    }

    /// Writes [`Dynamics::velocities`] into `piano`.
    pub fn apply(
        &self,
        ctx: &Context,
        piano: &mut PianoRoll,
        region: std::ops::Range<usize>,
        seed: u64,
    ) {
        for (o, v) in self.velocities(ctx, piano, region, seed) {
            piano.set_velocity(o.step, o.pitch, v);
        }
    }
}

/// A standard normal draw (Box–Muller).
fn normal(rng: &mut StdRng) -> f64 {
    let u: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
    let v: f64 = rng.random::<f64>();
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

#[cfg(test)]
mod tests;
