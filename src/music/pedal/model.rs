//! The learnt pedal: where a pianist presses and lifts the sustain pedal over a written piano
//! part, learnt from the POP909 pianists (issue 70). Two scores (least squares, or a logistic
//! fit by Newton's method: [`Link`]) over the same features of each sixteenth step — one for "a press starts here", one for "the pedal is
//! down here" — read what pedalling follows: the chord lane's changes (and the steps around
//! them), bar lines and beats, the piano's onsets, its bass and whether its bass moves, what is
//! new in its pitch classes, rests of the piano and of the melody, the phrase's first step and
//! last bar, how long since the last chord change, and four products of those (a chord change
//! on a bar line or with a bass onset, a bass onset on a bar line, a moving bass on a beat). With `context` the features of the
//! steps around are read as well, and with a [`Hidden`] layer the two scores read a layer of
//! rectified units over them instead (a small network, fitted by `train::pedal`): the bigger
//! models, each chosen only where it pays on validation songs.
//!
//! Played back ([`PedalModel::pedal`]): a press at each step whose press score is the peak
//! within an eighth either side and above its threshold (the pedal lifted there first, then pressed a 64th later, as
//! pianists change it); between presses the pedal stays down while the down score holds
//! above its threshold, and lifts at the first step it does not. Both thresholds are chosen
//! on validation songs (`pianoformer pedal`), not here.

use serde::{Deserialize, Serialize};

use super::super::grid::Grid;
use super::super::labels::StepLabels;
use super::super::midi::SUSTAIN;
use super::super::roll::{PITCHES, PianoRoll};
use super::down_spans;

/// The features of a step, in order (the fitted weights follow it, per context step).
pub const FEATURES: [&str; 27] = [
    "bias",
    "the chord changes here",
    "the chord changes a step later",
    "the chord changes a step earlier",
    "the chord changes two steps later",
    "a bar line",
    "the half bar",
    "another beat",
    "piano onsets here (÷4, at most 2)",
    "a bass onset here (the lowest note struck, below 55)",
    "the bass pitch changes here",
    "nothing of the piano sounds here",
    "nothing of the piano starts in the next beat",
    "a melody onset here",
    "no melody sounds here",
    "the first step of a phrase",
    "the last bar of a phrase",
    "intro, outro, bridge or transition, or no phrase",
    "share of the pitch classes struck here not sounding in the beat before",
    "steps since the chord changed (÷16, at most 1)",
    "steps since the last bass onset (÷16, at most 1)",
    "the bar's piano onsets (÷16)",
    "share of the sounding piano notes that are tones of the chord",
    "the chord changes here, on a bar line",
    "the chord changes here, with a bass onset",
    "a bass onset on a bar line",
    "the bass pitch changes here, on a beat",
];
const D: usize = FEATURES.len();

/// The fitted pedal, as shipped (`www/models/pedal.json`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PedalModel {
    /// What each weight multiplies ([`FEATURES`]); checked on load.
    pub features: Vec<String>,
    /// Steps read on either side of the step (0: the step alone).
    pub context: usize,
    /// The press score's weights and the down score's: `FEATURES.len() × (2 context + 1)` each,
    /// step −context first.
    pub press: Vec<f64>,
    pub down: Vec<f64>,
    /// The press score from which a local peak is a press, and the down score below which a
    /// held pedal lifts (chosen on validation).
    pub press_threshold: f64,
    pub down_threshold: f64,
    /// How a score is read from its weights: their sum over the features as it stands (a
    /// least-squares fit) or through the logistic function (a logistic fit).
    #[serde(default, skip_serializing_if = "Link::is_linear")]
    pub link: Link,
    /// A hidden layer both scores read in place of the features (a small network, fitted by
    /// `train::pedal`; its scores are logistic): `press` and `down` then weigh its units, the
    /// bias first. `None`: the scores read the features themselves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<Hidden>,
}

/// A layer of rectified units over a step's features (with its context): unit `u` is
/// `max(0, bias[u] + Σ_i weights[u · inputs + i] · x[i])`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Hidden {
    pub units: usize,
    pub weights: Vec<f64>,
    pub bias: Vec<f64>,
}

impl Hidden {
    /// The units of the layer over `x`, after a 1 (the scores' bias).
    pub fn units(&self, x: &[f64]) -> Vec<f64> {
        let mut out = Vec::with_capacity(self.units + 1);
        out.push(1.0);
        out.extend(
            self.weights
                .chunks_exact(x.len())
                .zip(&self.bias)
                .map(|(w, b)| (b + w.iter().zip(x).map(|(w, x)| w * x).sum::<f64>()).max(0.0)),
        );
        out
    }
}

/// How the two scores were fitted, and so how they are read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Link {
    /// Least squares on the 0/1 answer: the score is the weighted sum.
    #[default]
    Linear,
    /// Maximum likelihood of a logistic model: the score is a probability.
    Logistic,
}

impl Link {
    fn is_linear(&self) -> bool {
        *self == Link::Linear
    }

    /// A score from its weighted sum.
    fn read(self, x: f64) -> f64 {
        match self {
            Link::Linear => x,
            Link::Logistic => 1.0 / (1.0 + (-x).exp()),
        }
    }
}

impl std::str::FromStr for Link {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "linear" => Ok(Link::Linear),
            "logistic" => Ok(Link::Logistic),
            other => Err(format!("a fit is linear or logistic, not {other:?}")),
        }
    }
}

/// A song's steps as the pedal reads them: the piano part, the melody and the lanes on a grid.
pub struct Steps {
    rows: Vec<[f64; D]>,
}

fn chord_changes(labels: &StepLabels, s: usize) -> bool {
    s > 0
        && s < labels.chord.len()
        && labels.chord[s].is_some()
        && labels.chord[s] != labels.chord[s - 1]
}

/// Per step: the pitches struck and sounding (onset or held) in `roll`.
fn struck(roll: &PianoRoll, s: usize) -> impl Iterator<Item = usize> + '_ {
    (0..PITCHES).filter(move |&p| roll.onset(s, p))
}

fn sounding(roll: &PianoRoll, s: usize) -> impl Iterator<Item = usize> + '_ {
    (0..PITCHES).filter(move |&p| roll.onset(s, p) || roll.sustain(s, p))
}

impl Steps {
    /// The features of every step of `grid` for the `piano` part under `melody` and `labels`.
    pub fn new(grid: &Grid, labels: &StepLabels, piano: &PianoRoll, melody: &PianoRoll) -> Self {
        let n = grid.num_steps().min(piano.num_steps);
        let spb = grid.steps_per_beat.max(1);
        let bass: Vec<Option<usize>> = (0..n).map(|s| struck(piano, s).next()).collect();
        let onsets: Vec<usize> = (0..n).map(|s| struck(piano, s).count()).collect();
        let mut bar_onsets = vec![0usize; grid.num_bars()];
        for (s, &o) in onsets.iter().enumerate() {
            bar_onsets[grid.bar_of_step(s).0] += o;
        }
        let mut rows = Vec::with_capacity(n);
        let (mut last_change, mut last_bass, mut previous_bass) = (0usize, 0usize, None);
        for s in 0..n {
            let (bar, at) = grid.bar_of_step(s);
            let bar_len = grid.bar_steps(bar).len().max(1);
            let changes = |d: isize| {
                let t = s as isize + d;
                t >= 0 && chord_changes(labels, t as usize)
            };
            if changes(0) {
                last_change = s;
            }
            let bass_here = bass[s].filter(|&p| p < 55);
            let bass_moves =
                bass_here.is_some() && previous_bass.is_some() && bass_here != previous_bass;
            if bass_here.is_some() {
                last_bass = s;
                previous_bass = bass_here;
            }
            let before: Vec<bool> = {
                let mut classes = vec![false; 12];
                for t in s.saturating_sub(spb)..s {
                    for p in sounding(piano, t) {
                        classes[p % 12] = true;
                    }
                }
                classes
            };
            let struck_classes: Vec<usize> = struck(piano, s).map(|p| p % 12).collect();
            let novelty = if struck_classes.is_empty() {
                0.0
            } else {
                struck_classes.iter().filter(|&&c| !before[c]).count() as f64
                    / struck_classes.len() as f64
            };
            let chord = labels.chord.get(s).copied().flatten();
            let sounding_now: Vec<usize> = sounding(piano, s).collect();
            let tones = match chord {
                Some(c) if !sounding_now.is_empty() => {
                    let classes: Vec<u8> = c.pitch_classes().collect();
                    sounding_now
                        .iter()
                        .filter(|&&p| classes.contains(&((p % 12) as u8)))
                        .count() as f64
                        / sounding_now.len() as f64
                }
                _ => 0.0,
            };
            let phrase = labels.phrase.get(s).copied().flatten();
            let flag = |b: bool| f64::from(u8::from(b));
            let on_beat = at % spb == 0;
            rows.push([
                1.0,
                flag(changes(0)),
                flag(changes(1)),
                flag(changes(-1)),
                flag(changes(2)),
                flag(at == 0),
                flag(at != 0 && bar_len.is_multiple_of(2) && at == bar_len / 2 && at % spb == 0),
                flag(at != 0 && at % spb == 0 && at != bar_len / 2),
                (onsets[s] as f64 / 4.0).min(2.0),
                flag(bass_here.is_some()),
                flag(bass_moves),
                flag(sounding_now.is_empty()),
                flag((s + 1..(s + 1 + spb).min(n)).all(|t| onsets[t] == 0)),
                flag(melody.num_steps > s && struck(melody, s).next().is_some()),
                flag(melody.num_steps <= s || sounding(melody, s).next().is_none()),
                flag(phrase.is_some_and(|p| p.bar == 0 && at == 0)),
                flag(phrase.is_some_and(|p| p.bar + 1 == p.bars)),
                flag(phrase.is_none_or(|p| !p.letter.is_ascii_uppercase())),
                novelty,
                ((s - last_change) as f64 / 16.0).min(1.0),
                ((s - last_bass) as f64 / 16.0).min(1.0),
                bar_onsets[bar] as f64 / 16.0,
                tones,
                flag(changes(0) && at == 0),
                flag(changes(0) && bass_here.is_some()),
                flag(bass_here.is_some() && at == 0),
                flag(bass_moves && on_beat),
            ]);
        }
        Self { rows }
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The features of step `s` with `context` steps either side (zeros past the ends).
    pub fn row(&self, s: usize, context: usize) -> Vec<f64> {
        let mut out = Vec::with_capacity(D * (2 * context + 1));
        for d in 0..=2 * context {
            let t = (s + d)
                .checked_sub(context)
                .filter(|&t| t < self.rows.len());
            match t {
                Some(t) => out.extend_from_slice(&self.rows[t]),
                None => out.extend(std::iter::repeat_n(0.0, D)),
            }
        }
        out
    }
}

/// What a pianist did at each step of `grid`: whether a press of the sustain pedal starts in
/// the step, and whether it is down at the step's middle.
pub fn pianist_steps(grid: &Grid, pedal: &[(u64, u8, u8)], end: u64) -> (Vec<bool>, Vec<bool>) {
    let n = grid.num_steps();
    let spans = down_spans(pedal, end);
    let mut press = vec![false; n];
    for &(from, _) in &spans {
        let s = grid.step_at(from);
        if s < n {
            press[s] = true;
        }
    }
    let down = (0..n)
        .map(|s| {
            let mid = (grid.tick_at(s) + grid.tick_at(s + 1)) / 2;
            let at = spans.partition_point(|sp| sp.1 <= mid);
            spans.get(at).is_some_and(|sp| sp.0 <= mid)
        })
        .collect();
    (press, down)
}

/// Sums for the two least-squares fits (press and down) over the same rows; for a logistic
/// fit, the rows and answers themselves (it reads them once a round).
pub struct Fit {
    context: usize,
    link: Link,
    xtx: Vec<f64>,
    xty: [Vec<f64>; 2],
    n: usize,
    rows: Vec<f32>,
    answers: Vec<[bool; 2]>,
    /// Keep every row and answer (a logistic fit reads them; so does a network's).
    keep: bool,
}

/// Rounds of Newton's method a logistic fit takes at most (it stops sooner once no weight
/// moves by 1e-6).
const NEWTON_ROUNDS: usize = 25;

/// The largest change of any weight in one Newton round (in log odds).
const MAX_STEP: f64 = 4.0;

impl Fit {
    pub fn new(context: usize, link: Link) -> Self {
        let k = D * (2 * context + 1);
        Self {
            context,
            link,
            xtx: vec![0.0; k * k],
            xty: [vec![0.0; k], vec![0.0; k]],
            n: 0,
            rows: Vec::new(),
            answers: Vec::new(),
            keep: link == Link::Logistic,
        }
    }

    /// Keeps every row added and its answers, for a fit that reads them ([`Fit::rows`]).
    pub fn keeping_rows(mut self) -> Self {
        self.keep = true;
        self
    }

    /// The rows kept (each `FEATURES.len() × (2 context + 1)` values) and their answers
    /// (press, down); empty unless kept.
    pub fn rows(&self) -> (&[f32], &[[bool; 2]]) {
        (&self.rows, &self.answers)
    }

    /// Adds the steps `range` of a song with the pianist's press and down at each.
    pub fn add(
        &mut self,
        steps: &Steps,
        range: std::ops::Range<usize>,
        press: &[bool],
        down: &[bool],
    ) {
        let k = self.xty[0].len();
        for s in range.start..range.end.min(steps.len()).min(press.len()) {
            let x = steps.row(s, self.context);
            if self.keep {
                self.rows.extend(x.iter().map(|&v| v as f32));
                self.answers.push([press[s], down[s]]);
            }
            for i in 0..k {
                if x[i] == 0.0 {
                    continue;
                }
                for j in 0..k {
                    self.xtx[i * k + j] += x[i] * x[j];
                }
                self.xty[0][i] += x[i] * f64::from(u8::from(press[s]));
                self.xty[1][i] += x[i] * f64::from(u8::from(down[s]));
            }
            self.n += 1;
        }
    }

    /// The two scores' weights (ridge `lambda` on every weight but the bias), thresholds at
    /// 0.5 until chosen.
    pub fn solve(&self, lambda: f64) -> Result<PedalModel, String> {
        let k = self.xty[0].len();
        if self.n <= k {
            return Err(format!(
                "{} steps are too few to learn the pedal from (at least {} are needed)",
                self.n,
                k + 1
            ));
        }
        let mut a = self.xtx.clone();
        for i in 0..k {
            // The bias of the step itself is not shrunk.
            if i != self.context * D {
                a[i * k + i] += lambda;
            }
        }
        let solve = |b: &Vec<f64>| {
            super::super::dynamics::solve(a.clone(), b.clone())
                .ok_or("the steps' features are degenerate")
        };
        let (press, down) = match self.link {
            Link::Linear => (solve(&self.xty[0])?, solve(&self.xty[1])?),
            Link::Logistic => (self.logistic(0, lambda)?, self.logistic(1, lambda)?),
        };
        Ok(PedalModel {
            features: FEATURES.iter().map(|s| s.to_string()).collect(),
            context: self.context,
            press,
            down,
            press_threshold: 0.5,
            down_threshold: 0.5,
            link: self.link,
            hidden: None,
        })
    }

    /// The weights of answer `which` (0: press, 1: down) that maximise the logistic
    /// likelihood less `lambda / 2` times their squares (the bias not shrunk), by Newton's
    /// method from all zeros but the bias (the log odds of the answer over every row).
    fn logistic(&self, which: usize, lambda: f64) -> Result<Vec<f64>, String> {
        let k = self.xty[0].len();
        let bias = self.context * D;
        let yes = self.answers.iter().filter(|a| a[which]).count() as f64;
        let n = self.answers.len() as f64;
        let mut w = vec![0.0; k];
        w[bias] = ((yes + 0.5) / (n - yes + 0.5)).ln();
        for _ in 0..NEWTON_ROUNDS {
            // The gradient and the Hessian of the penalised log likelihood.
            let mut h = vec![0.0; k * k];
            let mut g = vec![0.0; k];
            let mut nz: Vec<(usize, f64)> = Vec::with_capacity(k);
            for (x, a) in self.rows.chunks_exact(k).zip(&self.answers) {
                let z: f64 = x.iter().zip(&w).map(|(&x, w)| f64::from(x) * w).sum();
                let p = Link::Logistic.read(z);
                let (r, v) = (f64::from(u8::from(a[which])) - p, p * (1.0 - p));
                nz.clear();
                nz.extend(
                    (0..k)
                        .filter(|&i| x[i] != 0.0)
                        .map(|i| (i, f64::from(x[i]))),
                );
                for (a, &(i, xi)) in nz.iter().enumerate() {
                    g[i] += xi * r;
                    // One triangle; the other is copied below.
                    for &(j, xj) in &nz[a..] {
                        h[i * k + j] += v * xi * xj;
                    }
                }
            }
            for i in 0..k {
                for j in 0..i {
                    h[i * k + j] = h[j * k + i];
                }
            }
            for i in 0..k {
                // The bias is all but unshrunk: enough to keep the Hessian invertible where
                // every step's probability saturates.
                let l = if i == bias { 1e-6 * lambda } else { lambda };
                g[i] -= l * w[i];
                h[i * k + i] += l;
            }
            let step =
                super::super::dynamics::solve(h, g).ok_or("the steps' features are degenerate")?;
            let moved = step.iter().fold(0f64, |m, d| m.max(d.abs()));
            // A damped step: far from the optimum a full Newton step can overshoot into
            // saturation, where the curvature vanishes.
            let damp = (MAX_STEP / moved).min(1.0);
            for (w, d) in w.iter_mut().zip(step) {
                *w += damp * d;
            }
            if moved < 1e-6 {
                break;
            }
        }
        Ok(w)
    }
}

/// A press at step `s`: when the pedal is `down`, a change (lifted at the step, pressed again a
/// 64th later), else a press at the step.
fn press_at(events: &mut Vec<(u64, u8, u8)>, grid: &Grid, s: usize, down: bool) {
    let tick = grid.tick_at(s);
    if down {
        events.push((tick, SUSTAIN, 0));
        events.push((tick + change_lag(grid, s), SUSTAIN, 127));
    } else {
        events.push((tick, SUSTAIN, 127));
    }
}

/// A press is the highest press score within this many steps either side: an eighth at
/// sixteenth steps (pianists do not change the pedal twice within one).
pub const PEAK: usize = 2;

/// Ticks between the lift and the new press of a change: a quarter of a step (a 64th note at
/// sixteenth steps), so that the press stays on its step.
fn change_lag(grid: &Grid, s: usize) -> u64 {
    (grid.tick_at(s + 1).saturating_sub(grid.tick_at(s)) / 4).max(1)
}

impl PedalModel {
    /// Reads a shipped model, checking it was fitted on these features.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let m: PedalModel = serde_json::from_str(text)
            .map_err(|e| format!("the pedal model is not readable: {e}"))?;
        let inputs = D * (2 * m.context + 1);
        let k = m.hidden.as_ref().map_or(inputs, |h| h.units + 1);
        let hidden_fits = m.hidden.as_ref().is_none_or(|h| {
            (1..=1024).contains(&h.units)
                && h.weights.len() == h.units * inputs
                && h.bias.len() == h.units
                && m.link == Link::Logistic
        });
        if m.features != FEATURES
            || m.press.len() != k
            || m.down.len() != k
            || m.context > 8
            || !hidden_fits
        {
            return Err(
                "the pedal model was fitted on other features than this pianoformer reads; \
                 fit it again (pianoformer pedal)"
                    .into(),
            );
        }
        Ok(m)
    }

    /// The two scores of every step.
    pub fn scores(&self, steps: &Steps) -> Vec<(f64, f64)> {
        (0..steps.len())
            .map(|s| {
                let mut x = steps.row(s, self.context);
                if let Some(hidden) = &self.hidden {
                    x = hidden.units(&x);
                }
                let dot = |w: &[f64]| w.iter().zip(&x).map(|(a, b)| a * b).sum::<f64>();
                (
                    self.link.read(dot(&self.press)),
                    self.link.read(dot(&self.down)),
                )
            })
            .collect()
    }

    /// The steps of `range` where a press starts: peaks of the press score at or above its
    /// threshold, each the highest within [`PEAK`] steps either side (the earliest of equals).
    pub fn presses(&self, scores: &[(f64, f64)], range: std::ops::Range<usize>) -> Vec<usize> {
        let end = range.end.min(scores.len());
        (range.start..end)
            .filter(|&s| {
                let p = scores[s].0;
                p >= self.press_threshold
                    && (s.saturating_sub(PEAK)..s).all(|t| scores[t].0 < p)
                    && (s + 1..(s + 1 + PEAK).min(scores.len())).all(|t| scores[t].0 <= p)
            })
            .collect()
    }

    /// The sustain pedal over the steps `range` of a part (`steps`, on `grid`), as pedal
    /// events (tick, 64, value): a change at each press, a lift where the down score fails
    /// and at the range's end.
    pub fn pedal(
        &self,
        steps: &Steps,
        grid: &Grid,
        range: std::ops::Range<usize>,
    ) -> Vec<(u64, u8, u8)> {
        let scores = self.scores(steps);
        let end = range.end.min(scores.len());
        let presses = self.presses(&scores, range.start..end);
        let mut events = Vec::new();
        let mut down = false;
        for (i, &s) in presses.iter().enumerate() {
            press_at(&mut events, grid, s, down);
            down = true;
            let next = presses.get(i + 1).copied().unwrap_or(end);
            if let Some(t) = (s + 1..next).find(|&t| scores[t].1 < self.down_threshold) {
                events.push((grid.tick_at(t), SUSTAIN, 0));
                down = false;
            }
        }
        if down {
            events.push((grid.tick_at(end), SUSTAIN, 0));
        }
        events
    }
}

/// The rule the learnt pedal is scored against: a change (lift, then press a 64th later) at
/// every step of `range` where the chord lane changes, the pedal held to the next, lifted at
/// the range's end.
pub fn chord_change_rule(
    grid: &Grid,
    labels: &StepLabels,
    range: std::ops::Range<usize>,
) -> Vec<(u64, u8, u8)> {
    let end = range.end.min(labels.chord.len());
    let mut events = Vec::new();
    let mut down = false;
    for s in range.start..end {
        let first = s == range.start && labels.chord[s].is_some();
        if first || chord_changes(labels, s) {
            press_at(&mut events, grid, s, down);
            down = true;
        }
    }
    if down {
        events.push((grid.tick_at(end), SUSTAIN, 0));
    }
    events
}

/// Presses found within `tolerance` steps of the pianist's (each matched once, nearest first):
/// (precision, recall, F1); `None` when neither side presses.
pub fn press_f1(found: &[usize], pianist: &[usize], tolerance: usize) -> Option<(f64, f64, f64)> {
    if found.is_empty() && pianist.is_empty() {
        return None;
    }
    let mut taken = vec![false; pianist.len()];
    let mut hits = 0usize;
    for &f in found {
        let from = pianist.partition_point(|&p| p + tolerance < f);
        let best = (from..pianist.len())
            .take_while(|&i| pianist[i] <= f + tolerance)
            .filter(|&i| !taken[i])
            .min_by_key(|&i| pianist[i].abs_diff(f));
        if let Some(i) = best {
            taken[i] = true;
            hits += 1;
        }
    }
    let precision = if found.is_empty() {
        0.0
    } else {
        hits as f64 / found.len() as f64
    };
    let recall = if pianist.is_empty() {
        0.0
    } else {
        hits as f64 / pianist.len() as f64
    };
    let f1 = if hits == 0 {
        0.0
    } else {
        2.0 * precision * recall / (precision + recall)
    };
    Some((precision, recall, f1))
}

/// The press steps of pedal events on `grid`.
pub fn press_steps(grid: &Grid, pedal: &[(u64, u8, u8)], end: u64) -> Vec<usize> {
    down_spans(pedal, end)
        .iter()
        .map(|&(from, _)| grid.step_at(from))
        .collect()
}

#[cfg(test)]
pub(crate) mod tests;
