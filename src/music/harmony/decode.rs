//! From the harmonizer's per-beat chord probabilities to a progression with a pianist's
//! harmonic rhythm. A progression scores the model's own log-probabilities of its chords
//! (weighted, the weight chosen on validation) plus, at every beat, the log of how often the
//! chord changes (or stays) at that kind of beat — the bar line, the half bar, another beat —
//! in the training songs' annotations. Where the chord goes is the model's to say; the rhythm
//! says only when it moves. Viterbi gives the best progression; forward filtering, backward
//! sampling draws alternatives from the distribution the scores define, with a seed; the
//! causal form decides each beat from the past alone (live playing).
//!
//! Every transition is "stay" or "change", so each beat costs O(classes), not O(classes²).

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use super::{BeatPlaces, CHORD_CLASSES};
use crate::music::chords::Chord;

/// How often the chord changes at each kind of beat: the bar line, the half bar, any other.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rhythm {
    pub change: [f32; 3],
}

impl Rhythm {
    /// Counts chord changes by kind of beat over annotated progressions: `(chords per beat,
    /// the beats' places)`, beats with no chord left out (a change into or out of "no chord"
    /// counts). Each rate is kept within [0.001, 0.999] so no change is impossible.
    pub fn fit<'a>(songs: impl IntoIterator<Item = (&'a [Option<Chord>], &'a BeatPlaces)>) -> Self {
        let mut counts = [[0u64; 2]; 3];
        for (chords, places) in songs {
            for b in 1..chords.len().min(places.len()) {
                if chords[b].is_none() && chords[b - 1].is_none() {
                    continue;
                }
                let changed = chords[b] != chords[b - 1];
                counts[places.slot(b)][changed as usize] += 1;
            }
        }
        let change = counts.map(|[same, changed]| {
            let n = (same + changed).max(1) as f32;
            (changed as f32 / n).clamp(0.001, 0.999)
        });
        Self { change }
    }
}

/// How the harmonizer's probabilities become chords (kept in the model's manifest entry).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct HarmonyDecode {
    pub rhythm: Rhythm,
    /// The emissions' weight: the log-probability of each chord's root and family (the sum over
    /// its family's qualities) is multiplied by it before the transitions are added (below 1
    /// trusts the rhythm more, above 1 the model more); the quality within the family keeps
    /// its own log-probability, so a root whose probability is split between C, C7 and Cmaj7
    /// is not outweighed by a single less likely chord.
    pub weight: f32,
    /// When set, the best progression ([`viterbi`]) weighs each chord by the share of its
    /// tones the model expects in the song's real chord ([`tone_gains`]) times this weight,
    /// instead of by its probability: between C and Am, both likely, the chord whose tones
    /// are most surely right. Draws and the causal form keep the probabilities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tones: Option<f32>,
    /// The temperature alternatives are drawn at, and the one of the colourful end of chord
    /// choice, each chosen on validation songs for this model by `eval --task harmonization`
    /// (`None`: `generate::harmonize`'s defaults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alternatives: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub colourful: Option<f32>,
}

impl Default for HarmonyDecode {
    /// Changes mostly on bar lines and half bars (about POP909's rates), the model's
    /// probabilities as they are.
    fn default() -> Self {
        Self {
            rhythm: Rhythm {
                change: [0.6, 0.3, 0.05],
            },
            weight: 1.0,
            tones: None,
            alternatives: None,
            colourful: None,
        }
    }
}

impl HarmonyDecode {
    /// What staying and what changing chord cost at `slot`: the log of the rhythm's rates.
    /// A change to a given chord costs `log p(change)`, not `log(p(change) / 168)`: where the
    /// chord goes is the model's to say (its emissions), the rhythm says only when it moves.
    /// The rate is capped at one half: where chords change more often than not (bar lines),
    /// the rhythm lets the model decide rather than preferring a change for its own sake.
    fn transition(&self, slot: usize) -> (f32, f32) {
        let p = self.rhythm.change[slot.min(2)].clamp(1e-6, 0.5);
        ((1.0 - p).ln(), p.ln())
    }

    /// Checks the settings, in words.
    pub fn check(&self) -> Result<(), String> {
        if !(self.weight > 0.0 && self.weight <= 100.0) {
            return Err(format!(
                "the harmonizer's emission weight must be above 0 and at most 100, not {}",
                self.weight
            ));
        }
        if let Some(w) = self.tones
            && !(w > 0.0 && w <= 1000.0)
        {
            return Err(format!(
                "the harmonizer's tone weight must be above 0 and at most 1000, not {w}"
            ));
        }
        for (what, t) in [
            ("alternatives'", self.alternatives),
            ("colourful end's", self.colourful),
        ] {
            if let Some(t) = t
                && !(t > 0.0 && t <= 10.0)
            {
                return Err(format!(
                    "the harmonizer's {what} temperature must be above 0 and at most 10, not {t}"
                ));
            }
        }
        if self.rhythm.change.iter().any(|p| !(*p > 0.0 && *p < 1.0)) {
            return Err(
                "the harmonic rhythm's change rates must lie strictly between 0 and 1".into(),
            );
        }
        Ok(())
    }
}

/// Log-softmax of each row of `logits` ([beats, CHORD_CLASSES]).
pub fn log_softmax_rows(logits: &[f32]) -> Vec<f32> {
    let mut out = logits.to_vec();
    for row in out.chunks_mut(CHORD_CLASSES) {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let sum: f32 = row.iter().map(|x| (x - max).exp()).sum();
        let log_z = max + sum.ln();
        row.iter_mut().for_each(|x| *x -= log_z);
    }
    out
}

impl HarmonyDecode {
    /// What each beat's classes emit ([beats, CHORD_CLASSES]) from the model's
    /// log-probabilities: `weight · log p(root, family) + log p(quality | root, family)`.
    pub fn emissions(&self, log_probs: &[f32]) -> Vec<f32> {
        let family = family_index();
        let mut out = Vec::with_capacity(log_probs.len());
        for row in log_probs.chunks(CHORD_CLASSES) {
            let mut sums = [f32::NEG_INFINITY; FAMILY_SLOTS];
            for (c, &lp) in row.iter().enumerate() {
                let f = family[c];
                sums[f] = log_add(sums[f], lp);
            }
            out.extend(
                row.iter()
                    .enumerate()
                    .map(|(c, &lp)| self.weight * sums[family[c]] + (lp - sums[family[c]])),
            );
        }
        out
    }
}

/// Every class's pitch classes as a 12-bit mask (no chord: none).
fn tone_masks() -> [u16; CHORD_CLASSES] {
    let mut out = [0u16; CHORD_CLASSES];
    for (c, mask) in out.iter_mut().enumerate() {
        if let Some(chord) = super::class_chord(c) {
            *mask = chord.pitch_classes().fold(0, |m, pc| m | 1 << pc);
        }
    }
    out
}

/// For every beat and class ([beats, CHORD_CLASSES], from the model's log-probabilities),
/// the share of the chord's tones that the model expects in the real chord: with `q(pc)` the
/// probability that pitch class `pc` belongs to it (the summed probability of every chord
/// that holds it), a chord's gain is the mean of `q` over its tones; "no chord" gains its own
/// probability. The chord with the largest gain is the one whose tones are most surely right
/// (a minimum-risk choice for what a piano plays from the lane), not the single most likely
/// label.
pub fn tone_gains(log_probs: &[f32]) -> Vec<f32> {
    let masks = tone_masks();
    let mut out = Vec::with_capacity(log_probs.len());
    for row in log_probs.chunks(CHORD_CLASSES) {
        let mut q = [0f32; 12];
        for (c, &lp) in row.iter().enumerate() {
            let p = lp.exp();
            let mut m = masks[c];
            while m != 0 {
                q[m.trailing_zeros() as usize] += p;
                m &= m - 1;
            }
        }
        out.extend(row.iter().enumerate().map(|(c, &lp)| {
            let m = masks[c];
            if m == 0 {
                return lp.exp();
            }
            let (mut sum, mut bits) = (0f32, m);
            while bits != 0 {
                sum += q[bits.trailing_zeros() as usize];
                bits &= bits - 1;
            }
            sum / m.count_ones() as f32
        }));
    }
    out
}

/// Root × family slots, and no chord.
const FAMILY_SLOTS: usize = 1 + 12 * 5;

/// The root-and-family slot of every class.
fn family_index() -> [usize; CHORD_CLASSES] {
    use crate::music::chords::Family;
    let mut out = [0; CHORD_CLASSES];
    for (c, slot) in out.iter_mut().enumerate() {
        *slot = super::class_chord(c).map_or(0, |chord| {
            let f = match chord.quality.family() {
                Family::Major => 0,
                Family::Minor => 1,
                Family::Diminished => 2,
                Family::Augmented => 3,
                Family::Suspended => 4,
            };
            1 + 5 * chord.root as usize + f
        });
    }
    out
}

/// `log(exp(a) + exp(b))`.
fn log_add(a: f32, b: f32) -> f32 {
    let (hi, lo) = if a > b { (a, b) } else { (b, a) };
    if lo == f32::NEG_INFINITY {
        hi
    } else {
        hi + (lo - hi).exp().ln_1p()
    }
}

/// The best and second-best classes of `row` with their values.
fn top_two(row: &[f32]) -> ((usize, f32), (usize, f32)) {
    let mut best = (0, f32::NEG_INFINITY);
    let mut second = (0, f32::NEG_INFINITY);
    for (c, &v) in row.iter().enumerate() {
        if v > best.1 {
            second = best;
            best = (c, v);
        } else if v > second.1 {
            second = (c, v);
        }
    }
    (best, second)
}

/// The most likely progression (one class per beat) given `log_probs` ([beats,
/// CHORD_CLASSES], the model's log-probabilities) and the beats' places; `before` is the
/// class of the beat before the first, when the progression continues one.
pub fn viterbi(
    log_probs: &[f32],
    places: &BeatPlaces,
    decode: &HarmonyDecode,
    before: Option<usize>,
) -> Vec<usize> {
    let k = CHORD_CLASSES;
    let beats = log_probs.len() / k;
    if beats == 0 {
        return Vec::new();
    }
    let slot = |b: usize| if b < places.len() { places.slot(b) } else { 2 };
    let emitted = match decode.tones {
        Some(w) => tone_gains(log_probs).into_iter().map(|g| w * g).collect(),
        None => decode.emissions(log_probs),
    };
    let mut score: Vec<f32> = emitted[..k].to_vec();
    if let Some(prev) = before {
        let (stay, change) = decode.transition(slot(0));
        for (c, s) in score.iter_mut().enumerate() {
            *s += if c == prev { stay } else { change };
        }
    }
    // back[b][c]: the class at beat b − 1 on the best path into class c at beat b.
    let mut back = vec![0u16; beats * k];
    let mut next = vec![0f32; k];
    for b in 1..beats {
        let (stay, change) = decode.transition(slot(b));
        let ((best, best_v), (second, second_v)) = top_two(&score);
        let row = &emitted[b * k..(b + 1) * k];
        for c in 0..k {
            let (other, other_v) = if c == best {
                (second, second_v)
            } else {
                (best, best_v)
            };
            let (from, v) = if score[c] + stay >= other_v + change {
                (c, score[c] + stay)
            } else {
                (other, other_v + change)
            };
            back[b * k + c] = from as u16;
            next[c] = v + row[c];
        }
        std::mem::swap(&mut score, &mut next);
    }
    let mut path = vec![0usize; beats];
    path[beats - 1] = top_two(&score).0.0;
    for b in (1..beats).rev() {
        path[b - 1] = back[b * k + path[b]] as usize;
    }
    path
}

/// `log(Σ exp(row))`.
fn log_sum_exp(row: &[f32]) -> f32 {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if max == f32::NEG_INFINITY {
        return max;
    }
    max + row.iter().map(|x| (x - max).exp()).sum::<f32>().ln()
}

/// Draws `i` with probability proportional to `exp(logits[i])`.
fn draw(logits: &[f32], rng: &mut StdRng) -> usize {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let weights: Vec<f64> = logits.iter().map(|x| ((x - max) as f64).exp()).collect();
    let total: f64 = weights.iter().sum();
    let mut u = rng.random::<f64>() * total;
    for (i, w) in weights.iter().enumerate() {
        if u < *w {
            return i;
        }
        u -= w;
    }
    weights.len() - 1
}

/// A progression drawn from the same model as [`viterbi`]'s (forward filtering, backward
/// sampling), with `seed`: another seed, another plausible progression. `temperature` divides
/// the emissions and transitions (1: the model's own distribution; lower is closer to
/// Viterbi's).
pub fn sample(
    log_probs: &[f32],
    places: &BeatPlaces,
    decode: &HarmonyDecode,
    before: Option<usize>,
    temperature: f32,
    seed: u64,
) -> Vec<usize> {
    Forward::new(log_probs, places, decode, before, temperature).draw(seed)
}

/// A colourful version of the `plain` progression (one class per beat, [`viterbi`]'s): its
/// harmonic rhythm kept — each stretch of one chord stays one stretch — and each stretch's
/// chord drawn again, with `seed`, at `temperature` from how well every chord fits the whole
/// stretch (the mean of its emissions over the stretch's beats). Colour, not restlessness: a
/// drawn progression changes chord where the plain one does (or less, where two stretches
/// draw the same), never more often; stretches with no chord stay silent.
pub fn recolour(
    log_probs: &[f32],
    decode: &HarmonyDecode,
    plain: &[usize],
    temperature: f32,
    seed: u64,
) -> Vec<usize> {
    let k = CHORD_CLASSES;
    let emitted = decode.emissions(log_probs);
    let beats = plain.len().min(emitted.len() / k);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = plain.to_vec();
    let t = temperature.max(1e-3);
    let mut start = 0;
    while start < beats {
        let class = plain[start];
        let end = (start..beats).find(|&b| plain[b] != class).unwrap_or(beats);
        if class != 0 {
            let mut mean = vec![0f32; k];
            for row in emitted[start * k..end * k].chunks(k) {
                for (m, e) in mean.iter_mut().zip(row) {
                    *m += e / (end - start) as f32;
                }
            }
            let heated: Vec<f32> = mean.iter().map(|m| m / t).collect();
            out[start..end].fill(draw(&heated, &mut rng));
        }
        start = end;
    }
    out
}

/// Forward filtering's sums over a progression's beats, from which any number of progressions
/// are drawn backwards ([`sample`], [`alternatives`]).
struct Forward<'a> {
    places: &'a BeatPlaces,
    decode: &'a HarmonyDecode,
    temperature: f32,
    beats: usize,
    /// forward[b][c] = log Σ over paths into c at beat b.
    forward: Vec<f32>,
}

impl<'a> Forward<'a> {
    fn new(
        log_probs: &[f32],
        places: &'a BeatPlaces,
        decode: &'a HarmonyDecode,
        before: Option<usize>,
        temperature: f32,
    ) -> Self {
        let k = CHORD_CLASSES;
        let beats = log_probs.len() / k;
        let t = temperature.max(1e-3);
        let emitted = decode.emissions(log_probs);
        let mut me = Self {
            places,
            decode,
            temperature: t,
            beats,
            forward: vec![0f32; beats * k],
        };
        if beats == 0 {
            return me;
        }
        for (f, e) in me.forward.iter_mut().zip(&emitted[..k]) {
            *f = e / t;
        }
        if let Some(prev) = before {
            let (stay, change) = me.trans(0);
            for (c, f) in me.forward[..k].iter_mut().enumerate() {
                *f += if c == prev { stay } else { change };
            }
        }
        for b in 1..beats {
            let (stay, change) = me.trans(b);
            let (done, rest) = me.forward.split_at_mut(b * k);
            let prev = &done[(b - 1) * k..];
            let total = log_sum_exp(prev);
            for c in 0..k {
                // log Σ_{c' ≠ c} exp(prev[c']), kept finite when c holds nearly all the mass.
                let others = total + (-(prev[c] - total).exp()).ln_1p().max(-80.0);
                let into = log_sum_exp(&[prev[c] + stay, others + change]);
                rest[c] = into + emitted[b * k + c] / t;
            }
        }
        me
    }

    /// Staying and changing at beat `b`, at the temperature.
    fn trans(&self, b: usize) -> (f32, f32) {
        let slot = if b < self.places.len() {
            self.places.slot(b)
        } else {
            2
        };
        let (stay, change) = self.decode.transition(slot);
        (stay / self.temperature, change / self.temperature)
    }

    /// The log of every progression's summed `exp(score / temperature)`.
    fn log_partition(&self) -> f32 {
        let k = CHORD_CLASSES;
        if self.beats == 0 {
            return 0.0;
        }
        log_sum_exp(&self.forward[(self.beats - 1) * k..])
    }

    /// One progression drawn backwards with `seed`.
    fn draw(&self, seed: u64) -> Vec<usize> {
        let (k, beats) = (CHORD_CLASSES, self.beats);
        if beats == 0 {
            return Vec::new();
        }
        let mut rng = StdRng::seed_from_u64(seed);
        let mut path = vec![0usize; beats];
        path[beats - 1] = draw(&self.forward[(beats - 1) * k..], &mut rng);
        for b in (1..beats).rev() {
            let (stay, change) = self.trans(b);
            let to = path[b];
            let row: Vec<f32> = self.forward[(b - 1) * k..b * k]
                .iter()
                .enumerate()
                .map(|(c, f)| f + if c == to { stay } else { change })
                .collect();
            path[b - 1] = draw(&row, &mut rng);
        }
        path
    }
}

/// What a progression scores under `decode`: each beat's emission (the model's weighted
/// log-probability, [`HarmonyDecode::emissions`]) plus the rhythm's cost of staying or
/// changing there (from `before` at the first beat, when given) — the log of the
/// unnormalised probability that [`viterbi`] maximises and [`sample`] draws from.
pub fn path_score(
    log_probs: &[f32],
    places: &BeatPlaces,
    decode: &HarmonyDecode,
    before: Option<usize>,
    path: &[usize],
) -> f32 {
    let k = CHORD_CLASSES;
    let emitted = decode.emissions(log_probs);
    let slot = |b: usize| if b < places.len() { places.slot(b) } else { 2 };
    let mut previous = before;
    let mut total = 0f32;
    for (b, &c) in path.iter().enumerate() {
        total += emitted.get(b * k + c).copied().unwrap_or(f32::NEG_INFINITY);
        if let Some(p) = previous {
            let (stay, change) = decode.transition(slot(b));
            total += if p == c { stay } else { change };
        }
        previous = Some(c);
    }
    total
}

/// One of [`alternatives`]: a class per beat, its [`path_score`], and its log-probability
/// under the decode's distribution (the score less the log of every progression's summed
/// `exp(score)`).
#[derive(Clone, Debug, PartialEq)]
pub struct Alternative {
    pub classes: Vec<usize>,
    pub score: f32,
    pub log_prob: f32,
}

/// What two progressions must differ in to count as two: the root and family (major, minor,
/// diminished, augmented, suspended) of the chord on every bar line and half bar. Two that
/// differ only on passing beats, or only in a chord's colour (C against Cmaj7), are one.
fn gist(classes: &[usize], places: &BeatPlaces) -> Vec<usize> {
    let family = family_index();
    classes
        .iter()
        .enumerate()
        .filter(|&(b, _)| b >= places.len() || places.slot(b) < 2)
        .map(|(_, &c)| family[c])
        .collect()
}

/// How [`alternatives`] looks for progressions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Draws {
    /// Progressions wanted (the best one included).
    pub count: usize,
    /// The draws' temperature (1: the decode's own distribution).
    pub temperature: f32,
    pub seed: u64,
}

/// Progressions drawn: the candidates, and the sample of the distribution that judges them
/// (the same whatever the count asked, so asking for more keeps the first ones).
const DRAWS: usize = 128;

/// Up to `draws.count` progressions of the beats for a person to audition, so that one of
/// them is likely right: the best one ([`viterbi`], what a single suggestion gives) first,
/// then, one at a time, the progression that most raises the chance that one of those kept
/// names each beat's root, as judged on progressions drawn from the decode's distribution
/// (128 of them, at `draws.temperature`, seeds from `draws.seed` on; the
/// candidates are the same draws). Two that differ only on passing beats, or only in a
/// chord's colour, add nothing to each other, so every one kept differs from the others
/// where it matters ([`gist`]). Fewer come back when the model is so sure that nothing
/// would add to its best.
pub fn alternatives(
    log_probs: &[f32],
    places: &BeatPlaces,
    decode: &HarmonyDecode,
    before: Option<usize>,
    draws: Draws,
) -> Vec<Alternative> {
    let count = draws.count;
    if count == 0 || log_probs.len() < CHORD_CLASSES {
        return Vec::new();
    }
    let own = Forward::new(log_probs, places, decode, before, 1.0);
    let log_z = own.log_partition();
    let alternative = |classes: Vec<usize>| {
        let score = path_score(log_probs, places, decode, before, &classes);
        Alternative {
            classes,
            score,
            log_prob: score - log_z,
        }
    };
    let mut out = vec![alternative(viterbi(log_probs, places, decode, before))];
    if count == 1 {
        return out;
    }
    let forward = if draws.temperature == 1.0 {
        own
    } else {
        Forward::new(log_probs, places, decode, before, draws.temperature)
    };
    let sampled: Vec<Vec<usize>> = (0..DRAWS as u64)
        .map(|i| forward.draw(draws.seed.wrapping_add(i)))
        .collect();
    // Each beat's root (no chord: its own), and the share of beats two progressions agree on.
    let roots = |c: &[usize]| -> Vec<u8> {
        c.iter()
            .map(|&k| super::class_chord(k).map_or(12, |ch| ch.root))
            .collect()
    };
    let judged: Vec<Vec<u8>> = sampled.iter().map(|c| roots(c)).collect();
    let agree = |a: &[u8], b: &[u8]| a.iter().zip(b).filter(|(x, y)| x == y).count();
    // How well the kept ones cover each judging draw so far.
    let mut covered: Vec<usize> = judged
        .iter()
        .map(|j| agree(&roots(&out[0].classes), j))
        .collect();
    let mut kinds = vec![gist(&out[0].classes, places)];
    while out.len() < count {
        let mut pick: Option<(usize, usize)> = None;
        for (c, candidate) in judged.iter().enumerate() {
            let gain: usize = judged
                .iter()
                .zip(&covered)
                .map(|(j, &now)| agree(candidate, j).saturating_sub(now))
                .sum();
            if gain > 0 && pick.is_none_or(|(_, g)| gain > g) {
                pick = Some((c, gain));
            }
        }
        let Some((c, _)) = pick else { break };
        let classes = sampled[c].clone();
        let kind = gist(&classes, places);
        for (now, j) in covered.iter_mut().zip(&judged) {
            *now = (*now).max(agree(&judged[c], j));
        }
        // A root-for-root repeat of one kept (other colours) adds no gain; a new kind does.
        if kinds.contains(&kind) {
            continue;
        }
        kinds.push(kind);
        out.push(alternative(classes));
    }
    out
}

/// The causal decision at one beat: the class that is best given this beat's
/// log-probabilities (from a model that read nothing after it) and the class before it.
pub fn causal_step(
    log_probs: &[f32],
    slot: usize,
    decode: &HarmonyDecode,
    before: Option<usize>,
) -> usize {
    let (stay, change) = decode.transition(slot);
    let emitted = decode.emissions(&log_probs[..CHORD_CLASSES]);
    let mut best = (0, f32::NEG_INFINITY);
    for (c, &lp) in emitted.iter().enumerate() {
        let move_cost = match before {
            Some(p) if p == c => stay,
            Some(_) => change,
            None => 0.0,
        };
        let v = lp + move_cost;
        if v > best.1 {
            best = (c, v);
        }
    }
    best.0
}

/// [`causal_step`] over every beat in turn: what live playing would have written.
pub fn causal(log_probs: &[f32], places: &BeatPlaces, decode: &HarmonyDecode) -> Vec<usize> {
    let mut before = None;
    log_probs
        .chunks(CHORD_CLASSES)
        .enumerate()
        .map(|(b, row)| {
            let slot = if b < places.len() { places.slot(b) } else { 2 };
            let c = causal_step(row, slot, decode, before);
            before = Some(c);
            c
        })
        .collect()
}
