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
use super::super::roll::PianoRoll;
use super::down_spans;

mod steps;
use steps::chord_changes;
pub use steps::{Steps, width};

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
    /// Fitted on causal steps ([`Steps::causal`]) and played causally (each press decided at
    /// its step, from the steps up to it): the pedal of a live take, played as it goes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub causal: bool,
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
    causal: bool,
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
    /// A fit reading `context` steps around each step (before it only, and the steps read
    /// causally, where `causal`).
    pub fn new(context: usize, link: Link, causal: bool) -> Self {
        let k = D * width(context, causal);
        Self {
            context,
            causal,
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

    /// The rows kept (each `FEATURES.len() ×` [`width`] values) and their answers
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
        assert_eq!(
            steps.is_causal(),
            self.causal,
            "a fit reads the steps as its model will"
        );
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
            causal: self.causal,
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
        let inputs = D * width(m.context, m.causal);
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

    /// The two scores of every step (zeros before the first step read).
    pub fn scores(&self, steps: &Steps) -> Vec<(f64, f64)> {
        self.scores_in(steps, 0..steps.len())
    }

    /// The two scores of the steps `range` (index `s` is step `s`; zeros before `range`).
    pub fn scores_in(&self, steps: &Steps, range: std::ops::Range<usize>) -> Vec<(f64, f64)> {
        let end = range.end.min(steps.len());
        let mut out = vec![(0.0, 0.0); range.start.min(end)];
        out.extend((range.start..end).map(|s| {
            let mut x = steps.row(s, self.context);
            if let Some(hidden) = &self.hidden {
                x = hidden.units(&x);
            }
            let dot = |w: &[f64]| w.iter().zip(&x).map(|(a, b)| a * b).sum::<f64>();
            (
                self.link.read(dot(&self.press)),
                self.link.read(dot(&self.down)),
            )
        }));
        out
    }

    /// Whether step `s` starts a press. Whole: its press score is at or above the threshold
    /// and the highest within [`PEAK`] steps either side (the earliest of equals). Causal:
    /// at or above the threshold, higher than the [`PEAK`] steps before it, and no press in
    /// them (`last`: the last press before `s`).
    fn presses_at(&self, scores: &[(f64, f64)], s: usize, last: Option<usize>) -> bool {
        let p = scores[s].0;
        let rises =
            p >= self.press_threshold && (s.saturating_sub(PEAK)..s).all(|t| scores[t].0 < p);
        if self.causal {
            rises && last.is_none_or(|l| s - l > PEAK)
        } else {
            rises && (s + 1..(s + 1 + PEAK).min(scores.len())).all(|t| scores[t].0 <= p)
        }
    }

    /// The steps of `range` where a press starts ([`PedalModel::presses_at`]).
    pub fn presses(&self, scores: &[(f64, f64)], range: std::ops::Range<usize>) -> Vec<usize> {
        let end = range.end.min(scores.len());
        let mut out: Vec<usize> = Vec::new();
        for s in range.start..end {
            if self.presses_at(scores, s, out.last().copied()) {
                out.push(s);
            }
        }
        out
    }

    /// The sustain pedal over the steps `range` of a part (`steps`, on `grid`), as pedal
    /// events (tick, 64, value): a change at each press, a lift where the down score fails
    /// after it, and at the range's end.
    pub fn pedal(
        &self,
        steps: &Steps,
        grid: &Grid,
        range: std::ops::Range<usize>,
    ) -> Vec<(u64, u8, u8)> {
        let scores = self.scores(steps);
        let end = range.end.min(scores.len());
        let mut state = Pedalling::default();
        let mut events = Vec::new();
        for s in range.start..end {
            self.decide(&scores, s, grid, &mut state, &mut events);
        }
        state.finish(grid, end, &mut events);
        events
    }

    /// Decides step `s` (`scores` reaching at least to it, and on past it for a whole model):
    /// a press (a change where the pedal is down), else a lift where the held pedal's down
    /// score fails.
    fn decide(
        &self,
        scores: &[(f64, f64)],
        s: usize,
        grid: &Grid,
        state: &mut Pedalling,
        events: &mut Vec<(u64, u8, u8)>,
    ) {
        if self.presses_at(scores, s, state.last_press) {
            press_at(events, grid, s, state.down);
            state.down = true;
            state.last_press = Some(s);
        } else if state.down && scores[s].1 < self.down_threshold {
            events.push((grid.tick_at(s), SUSTAIN, 0));
            state.down = false;
        }
    }
}

/// Where a pedalling stands: whether the pedal is down, and the last press.
#[derive(Clone, Copy, Debug, Default)]
struct Pedalling {
    down: bool,
    last_press: Option<usize>,
}

impl Pedalling {
    /// Lifts a pedal still down at step `end`.
    fn finish(&mut self, grid: &Grid, end: usize, events: &mut Vec<(u64, u8, u8)>) {
        if self.down {
            events.push((grid.tick_at(end), SUSTAIN, 0));
            self.down = false;
        }
    }
}

/// The learnt pedal of a live take, decided as it is played: a causal model
/// ([`PedalModel::causal`]) reads each step when the piano's notes for it are decided (from
/// the piano up to it, the melody heard before it and the chords as decided), and presses or
/// lifts there. What it plays is what [`PedalModel::pedal`] gives the whole take.
#[derive(Clone, Debug)]
pub struct PedalStream {
    model: PedalModel,
    state: Pedalling,
    /// The next step to decide.
    next: usize,
    events: Vec<(u64, u8, u8)>,
}

impl PedalStream {
    /// A stream from step `from` on, with a causal `model`.
    pub fn new(model: PedalModel, from: usize) -> Result<Self, String> {
        if !model.causal {
            return Err(
                "this pedal model reads each step's future; a live take needs one fitted \
                 causally (pianoformer pedal --causal)"
                    .into(),
            );
        }
        Ok(Self {
            model,
            state: Pedalling::default(),
            next: from,
            events: Vec::new(),
        })
    }

    /// Decides every step from the next one to `until` (exclusive) over the part as it stands
    /// (`piano` decided up to `until`, `melody` heard before it, `labels`' chords up to it),
    /// and returns the pedal's moves those steps start: `(step, tick, value)`.
    pub fn advance(
        &mut self,
        grid: &Grid,
        labels: &StepLabels,
        (piano, melody): (&PianoRoll, &PianoRoll),
        until: usize,
    ) -> Vec<(usize, u64, u8)> {
        if until <= self.next {
            return Vec::new();
        }
        // The steps a press looks back on, and those their context reads.
        let scored = self.next.saturating_sub(PEAK)..until;
        let read = scored.start.saturating_sub(self.model.context)..until;
        let steps = Steps::causal(grid, labels, (piano, melody), read);
        let scores = self.model.scores_in(&steps, scored);
        let mut moves = Vec::new();
        for s in self.next..until.min(scores.len()) {
            let first = self.events.len();
            self.model
                .decide(&scores, s, grid, &mut self.state, &mut self.events);
            moves.extend(
                self.events[first..]
                    .iter()
                    .map(|&(tick, _, v)| (s, tick, v)),
            );
        }
        self.next = until;
        moves
    }

    /// The pedal so far, lifted at step `end` if it is down.
    pub fn events(&self, grid: &Grid, end: usize) -> Vec<(u64, u8, u8)> {
        let mut events = self.events.clone();
        let mut state = self.state;
        state.finish(grid, end, &mut events);
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
