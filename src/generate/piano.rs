//! Accompaniment one step at a time: the piano part is written a sixteenth at a time through
//! the recurrent form of the Performer (constant cost per step), each step reading the melody,
//! the lanes and the piano step just written, so the model knows what it played: it holds a
//! chord instead of striking it again, and follows the chords it is given.
//!
//! Each step's 128 onset and 128 sustain probabilities become notes by drawing, per pitch, an
//! onset, and for a pitch that was sounding and is not struck again, whether it is held: the
//! model's sustain probability counts both, so the hold probability is
//! `P(sustain ∧ ¬onset) / P(¬onset) = (p_sus − p_on) / (1 − p_on)`. A sustain for a pitch that
//! was not sounding is nothing (a note starts with an onset).

use std::ops::Range;

use burn::tensor::activation::sigmoid;
use burn::tensor::{Device, Tensor, TensorData};

#[cfg(feature = "gpu")]
use super::fused;
pub use super::sample::{PianoSampling, uniform};
use super::steer::{Steer, lean_all};
use super::texture::{Answers, PianoNow, TextureEcho, TextureSteer};
use super::{AttentionRows, GenerateError, Watch, read_f32, watched_rows};
use crate::data::Example;
use crate::data::example::REFERENCE_INPUTS;
use crate::data::features::LABEL_FEATURES;
use crate::model::config::{ACCOMPANIMENT_INPUTS, Conditioning, Task};
#[cfg(feature = "gpu")]
use crate::model::performer::captured_row;
use crate::model::performer::{Inputs, Performer, State, StepInput};
use crate::music::roll::{PIANO_KEYS, PITCHES, PianoRoll};

fn sigmoid_t(logit: f32, temperature: f32) -> f32 {
    1.0 / (1.0 + (-logit / temperature).exp())
}

/// `p` at temperature `t`: `sigmoid(logit(p) / t)`, exact at 0 and 1.
fn sharpen(p: f32, t: f32) -> f32 {
    if t == 1.0 {
        return p;
    }
    let (a, b) = (p.powf(1.0 / t), (1.0 - p).powf(1.0 / t));
    if a + b > 0.0 { a / (a + b) } else { 0.5 }
}

/// Step `step` of `roll` drawn from its onset and sustain logits (128 each), given which
/// pitches sound at the step before (`roll`'s step `step − 1`); `uniform(pitch, kind)` gives
/// the uniform number of a pitch's onset (kind 0) or hold (kind 1) draw; `lean` (128 values,
/// a steering part's, e.g. the texture echo's) is added to each onset's log odds after the
/// temperature.
pub fn draw_step(
    roll: &mut PianoRoll,
    step: usize,
    onset_logits: &[f32],
    sustain_logits: &[f32],
    s: &PianoSampling,
    lean: Option<&[f32]>,
    uniform: &mut impl FnMut(usize, u32) -> f32,
) {
    let t = s.temperature.max(1e-4);
    // Added to every onset's log odds (0 at density 1: the plain sigmoid).
    let bias = s.onset_bias();
    for p in 0..PITCHES {
        let lean = lean.map_or(0.0, |l| l[p]);
        let p_on = 1.0 / (1.0 + (-(onset_logits[p] / t + bias + lean)).exp());
        // Drawn for every pitch (a live take's draws come one after another), struck only on
        // a piano's keys.
        let strike = match s.threshold {
            Some(th) => p_on > th,
            None => uniform(p, 0) < p_on,
        } && PIANO_KEYS.contains(&p);
        if strike {
            roll.set(step, p, true, true, 0);
            continue;
        }
        if step == 0 || !roll.sustain(step - 1, p) {
            continue;
        }
        let p_sus = sigmoid_t(sustain_logits[p], t);
        let hold = ((p_sus - p_on) / (1.0 - p_on).max(1e-6)).clamp(0.0, 1.0);
        let held = match s.threshold {
            Some(_) => hold > 0.5,
            None => uniform(p, 1) < sharpen(hold, s.hold_temperature),
        };
        if held {
            roll.set(step, p, false, true, 0);
        }
    }
}

/// How far a step-by-step accompaniment has come: the piano written up to step `done`.
pub struct PianoProgress<'a> {
    pub done: usize,
    pub total: usize,
    pub roll: &'a PianoRoll,
    /// The last step's onset and sustain logits (128 each).
    pub logits: &'a [f32],
    pub attention: Option<AttentionRows>,
}

/// Where the previous piano step goes in a row of the model's input.
fn piano_offset(model: &Performer) -> Result<usize, GenerateError> {
    let c = &model.config;
    match c.conditioning {
        Some(cond) if c.task == Task::Accompaniment && cond.piano => {
            Ok(ACCOMPANIMENT_INPUTS + cond.labels as usize * LABEL_FEATURES)
        }
        _ => Err(GenerateError::Read(
            "this model writes the whole accompaniment at once, not step by step".into(),
        )),
    }
}

/// How far alternatives written together have come: each one's piano up to step `done` of
/// `total` (the same step for all: they advance together).
pub struct BatchProgress<'a> {
    pub done: usize,
    pub total: usize,
    pub rolls: &'a [PianoRoll],
    /// Each one's last step's onset and sustain logits (128 each).
    pub logits: &'a [Vec<f32>],
    /// The first alternative's watched attention rows.
    pub attention: Option<AttentionRows>,
}

/// What every step-by-step accompaniment of an example reads: where the previous piano step
/// goes in a row, the rows' and coordinates' widths, the region and the piano around it.
struct Steps<'a> {
    e: &'a Example,
    offset: usize,
    width: usize,
    coords_width: usize,
    structural: bool,
    region: Range<usize>,
    /// The given piano with the region cleared.
    roll: PianoRoll,
    /// The texture echo, if any (drawn on the CPU: the fused steps take none).
    texture: Option<&'a TextureEcho>,
    /// Where the reference lane goes in a row, for a model that reads one, and what each step
    /// answers (`None`: nothing, the lane stays silent).
    reference_at: Option<usize>,
    answers: Option<&'a Answers>,
}

impl<'a> Steps<'a> {
    fn new(
        model: &Performer,
        e: &'a Example,
        given: Option<&PianoRoll>,
        region: Range<usize>,
    ) -> Result<Self, GenerateError> {
        let offset = piano_offset(model)?;
        let len = e.len;
        let width = e.inputs.len() / len.max(1);
        if width != model.config.input_dim {
            return Err(GenerateError::Read(format!(
                "the example has {width} inputs per step, the model reads {}",
                model.config.input_dim
            )));
        }
        let region = region.start.min(len)..region.end.min(len);
        let mut roll = given.cloned().unwrap_or_else(|| PianoRoll::new(len));
        if roll.num_steps != len {
            return Err(GenerateError::Read(format!(
                "the piano part has {} steps and the melody {len}",
                roll.num_steps
            )));
        }
        for t in region.clone() {
            for p in 0..PITCHES {
                roll.set(t, p, false, false, 0);
            }
        }
        Ok(Self {
            e,
            offset,
            width,
            coords_width: e.coordinates.len() / len.max(1),
            structural: model.config.pe.is_structural(),
            region,
            roll,
            texture: None,
            reference_at: model
                .config
                .conditioning
                .and_then(Conditioning::reference_offset),
            answers: None,
        })
    }

    /// `given`'s steps for `model` over `region`, with its echo and what its steps answer.
    fn of(model: &Performer, e: &'a Example, given: &Given<'a>) -> Result<Self, GenerateError> {
        let mut steps = Self::new(model, e, given.roll, given.region.clone())?;
        steps.texture = given.texture;
        steps.answers = given.reference;
        Ok(steps)
    }

    /// Whether the model reads, in `region`, a reference lane that answers something (each
    /// alternative's own piano, so the fused steps of several cannot share rows).
    #[cfg(feature = "gpu")]
    fn references(&self) -> bool {
        self.reference_at.is_some()
            && self
                .answers
                .is_some_and(|a| a.answers_in(self.region.clone()))
    }

    /// Where a fused chunk from `t` to `end` must stop so that every step in it reads a
    /// reference lane already written when the chunk starts.
    #[cfg(feature = "gpu")]
    fn fused_end(&self, t: usize, end: usize) -> usize {
        match (self.reference_at, self.answers) {
            (Some(_), Some(a)) => (t + 1..end).find(|&u| a.reads_from(u, t)).unwrap_or(end),
            _ => end,
        }
    }

    /// Inputs of steps `range` [len, width], with the previous piano step taken from `roll`,
    /// and their structure coordinates when the encoding reads them.
    fn values(&self, range: Range<usize>, roll: &PianoRoll) -> (Vec<f32>, Option<Vec<f32>>) {
        let (e, width, offset) = (self.e, self.width, self.offset);
        let mut x = e.inputs[range.start * width..range.end * width].to_vec();
        for (i, t) in range.clone().enumerate() {
            let row = &mut x[i * width + offset..i * width + offset + 2 * PITCHES];
            row.fill(0.0);
            if t > 0 {
                for p in 0..PITCHES {
                    row[p] = roll.onset(t - 1, p) as u8 as f32;
                    row[PITCHES + p] = roll.sustain(t - 1, p) as u8 as f32;
                }
            }
            if let Some(at) = self.reference_at {
                let out = &mut x[i * width + at..i * width + at + REFERENCE_INPUTS];
                match self.answers {
                    Some(a) => a.write_reference(roll, t, out),
                    None => out.fill(0.0),
                }
            }
        }
        let cw = self.coords_width;
        let coords = (self.structural && cw > 0)
            .then(|| e.coordinates[range.start * cw..range.end * cw].to_vec());
        (x, coords)
    }

    /// A sequence seeded by `seed` with what comes before the region in its attention state
    /// (one parallel pass: it is known).
    fn prefilled(
        &self,
        model: &Performer,
        seed: u64,
        watch: Option<Watch>,
        stepping: &crate::model::performer::Stepping,
        device: &Device,
    ) -> Result<State, GenerateError> {
        let mut state = model
            .start(seed, watch.is_some(), device)
            .stepping(stepping);
        state.capture_layer = watch.map(|w| w.layer);
        if self.region.start > 0 {
            let range = 0..self.region.start;
            let n = range.len();
            let (x, coords) = self.values(range, &self.roll);
            let inputs = Tensor::<3>::from_data(TensorData::new(x, vec![1, n, self.width]), device);
            let coords = coords.map(|c| {
                Tensor::<3>::from_data(TensorData::new(c, vec![1, n, self.coords_width]), device)
            });
            model.forward(Inputs::Rolls(inputs), coords, &mut state, None)?;
        }
        Ok(state)
    }
}

/// How a writing reports as it goes: every `every` steps (and at the end), with the
/// attention row of the `watch`ed head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reports {
    pub every: usize,
    pub watch: Option<Watch>,
}

impl Reports {
    /// Once, at the end, no head watched.
    pub fn at_end() -> Self {
        Self {
            every: usize::MAX,
            watch: None,
        }
    }
}

/// Writes the piano part of example `e` (its inputs: melody, bridge and lanes; the piano
/// planes in it are ignored) a step at a time over `given.region`; the steps before the
/// region keep `given`'s piano (teacher-forced in one parallel pass, so the region continues
/// from it), and so do the steps after it. At each of `reports`, `on_progress` sees the
/// piano so far and the watched head's attention row, and returns whether to go on.
pub async fn accompany_steps<F, Fut>(
    model: &Performer,
    e: &Example,
    given: Given<'_>,
    sampling: PianoSampling,
    reports: Reports,
    device: &Device,
    on_progress: F,
) -> Result<PianoRoll, GenerateError>
where
    F: FnMut(PianoProgress<'_>) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let steps = Steps::of(model, e, &given)?;
    one_sequence(model, steps, sampling, reports, device, on_progress).await
}

/// [`accompany_steps`] over prepared steps (a texture echo in them drawn on the CPU).
async fn one_sequence<F, Fut>(
    model: &Performer,
    steps: Steps<'_>,
    sampling: PianoSampling,
    reports: Reports,
    device: &Device,
    on_progress: F,
) -> Result<PianoRoll, GenerateError>
where
    F: FnMut(PianoProgress<'_>) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    sampling.check()?;
    if let Some(w) = reports.watch {
        w.check(model)?;
    }
    let stepping = model.stepping(device).await?;
    let state = steps.prefilled(model, sampling.seed, reports.watch, &stepping, device)?;
    // The fused GPU steps where they run; the steps one by one where they do not (or gave
    // the sequence back unwritten).
    #[cfg(feature = "gpu")]
    let (state, on_progress) = if fused::enabled() && steps.texture.is_none() {
        let mut on_progress = on_progress;
        let run = (std::slice::from_ref(&sampling), reports);
        let mut report = |p: BatchProgress<'_>| {
            on_progress(PianoProgress {
                done: p.done,
                total: p.total,
                roll: &p.rolls[0],
                logits: &p.logits[0],
                attention: p.attention,
            })
        };
        let fused = fused_batch(model, &steps, vec![state], run, device, &mut report).await?;
        match fused {
            Ok(mut rolls) => return Ok(rolls.pop().expect("one roll")),
            Err(mut states) => (states.pop().expect("one state"), on_progress),
        }
    } else {
        (state, on_progress)
    };
    one_roll(
        model,
        steps,
        state,
        (sampling, reports),
        device,
        on_progress,
    )
    .await
}

/// [`batch_steps`] for one sequence with its sampling, steps between reports and watched
/// head, reporting as [`accompany_steps`] does.
async fn one_roll<F, Fut>(
    model: &Performer,
    steps: Steps<'_>,
    state: State,
    (sampling, reports): (PianoSampling, Reports),
    device: &Device,
    mut on_progress: F,
) -> Result<PianoRoll, GenerateError>
where
    F: FnMut(PianoProgress<'_>) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut rolls = batch_steps(
        model,
        &steps,
        vec![state],
        &[sampling],
        reports,
        device,
        |p| {
            on_progress(PianoProgress {
                done: p.done,
                total: p.total,
                roll: &p.rolls[0],
                logits: &p.logits[0],
                attention: p.attention,
            })
        },
    )
    .await?;
    Ok(rolls.pop().expect("one roll"))
}

/// The piano an accompaniment starts from: the part given (`None`: silence), the region to
/// write, and the texture echo steering it.
#[derive(Clone)]
pub struct Given<'a> {
    pub roll: Option<&'a PianoRoll>,
    pub region: Range<usize>,
    pub texture: Option<&'a TextureEcho>,
    /// What each step answers, for a model that reads the reference lane (others ignore it).
    pub reference: Option<&'a Answers>,
}

impl<'a> Given<'a> {
    /// `region` of `roll` (`None`: silence) with no echo and no reference.
    pub fn plain(roll: Option<&'a PianoRoll>, region: Range<usize>) -> Self {
        Self {
            roll,
            region,
            texture: None,
            reference: None,
        }
    }
}

/// Writes the piano part of example `e` over `given.region` as [`accompany_steps`] does,
/// once for each of `samplings` (alternatives, each with its own seed), all advancing a step
/// at a time together: on the CPU one batched step for all ([`Performer::step_batch`]), on a
/// GPU with fused steps one workgroup each in the same dispatches; each roll is the one
/// `accompany_steps` writes with that sampling alone. Where steps go through tensor ops (a
/// GPU where the kernel declines) the alternatives are written one after the other (progress
/// counts them all). The first alternative's attention is watched. The texture echo leans
/// every alternative's steps towards what each one wrote (or the donor held) at the steps
/// they answer; with an echo the notes are drawn on the CPU (the fused GPU steps take no lean
/// yet).
pub async fn accompany_batch<F, Fut>(
    model: &Performer,
    e: &Example,
    given: Given<'_>,
    samplings: &[PianoSampling],
    reports: Reports,
    device: &Device,
    mut on_progress: F,
) -> Result<Vec<PianoRoll>, GenerateError>
where
    F: FnMut(BatchProgress<'_>) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    if samplings.is_empty() {
        return Ok(Vec::new());
    }
    // An echo whose answering steps all lie outside the region leans nothing: left out, so
    // the region is written as without it (fused on a GPU).
    let given = Given {
        texture: given.texture.filter(|x| x.answers_in(given.region.clone())),
        ..given
    };
    let steps_of = || Steps::of(model, e, &given);
    if let [one] = samplings {
        // One sequence: as `accompany_steps` writes it (fused on a GPU).
        let roll = one_sequence(model, steps_of()?, *one, reports, device, |p| {
            let logits = [p.logits.to_vec()];
            on_progress(BatchProgress {
                done: p.done,
                total: p.total,
                rolls: std::slice::from_ref(p.roll),
                logits: &logits,
                attention: p.attention,
            })
        })
        .await?;
        return Ok(vec![roll]);
    }
    for s in samplings {
        s.check()?;
    }
    let watch = reports.watch;
    if let Some(w) = watch {
        w.check(model)?;
    }
    let stepping = model.stepping(device).await?;
    #[cfg(feature = "gpu")]
    if stepping.decoder.is_none()
        && samplings.len() > 1
        && fused::enabled()
        && given.texture.is_none()
        && !steps_of()?.references()
    {
        // On a GPU: every alternative in the same fused dispatches, one workgroup each.
        let steps = steps_of()?;
        let mut states = Vec::with_capacity(samplings.len());
        for (k, s) in samplings.iter().enumerate() {
            let watch = watch.filter(|_| k == 0);
            states.push(steps.prefilled(model, s.seed, watch, &stepping, device)?);
        }
        let run = (samplings, reports);
        let fused = fused_batch(model, &steps, states, run, device, &mut on_progress);
        if let Ok(rolls) = fused.await? {
            return Ok(rolls);
        }
    }
    if stepping.decoder.is_none() && samplings.len() > 1 {
        // Steps through tensors one alternative at a time (a GPU where the kernel declines).
        return one_after_another(model, e, given, samplings, reports, device, on_progress).await;
    }
    let steps = steps_of()?;
    let mut states = Vec::with_capacity(samplings.len());
    for (k, s) in samplings.iter().enumerate() {
        let watch = watch.filter(|_| k == 0);
        states.push(steps.prefilled(model, s.seed, watch, &stepping, device)?);
    }
    batch_steps(
        model,
        &steps,
        states,
        samplings,
        reports,
        device,
        &mut on_progress,
    )
    .await
}

/// The alternatives one after the other through [`accompany_steps`] (fused on a GPU), with
/// progress counting every alternative's steps.
async fn one_after_another<F, Fut>(
    model: &Performer,
    e: &Example,
    given: Given<'_>,
    samplings: &[PianoSampling],
    reports: Reports,
    device: &Device,
    mut on_progress: F,
) -> Result<Vec<PianoRoll>, GenerateError>
where
    F: FnMut(BatchProgress<'_>) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let k = samplings.len();
    let mut rolls: Vec<PianoRoll> = Vec::with_capacity(k);
    let mut logits = vec![Vec::new(); k];
    for (i, s) in samplings.iter().enumerate() {
        let reports = Reports {
            watch: reports.watch.filter(|_| i == 0),
            ..reports
        };
        let steps = Steps::of(model, e, &given)?;
        let roll = one_sequence(model, steps, *s, reports, device, |p| {
            let mut so_far = rolls.clone();
            so_far.push(p.roll.clone());
            logits[i] = p.logits.to_vec();
            let done = i * p.total + p.done;
            on_progress(BatchProgress {
                done,
                total: k * p.total,
                rolls: &so_far,
                logits: &logits,
                attention: p.attention,
            })
        })
        .await?;
        rolls.push(roll);
    }
    Ok(rolls)
}

/// The region's steps for every state in `states` (one per sampling), a batched step each.
async fn batch_steps<F, Fut>(
    model: &Performer,
    steps: &Steps<'_>,
    mut states: Vec<State>,
    samplings: &[PianoSampling],
    Reports {
        every: report_every,
        watch,
    }: Reports,
    device: &Device,
    mut on_progress: F,
) -> Result<Vec<PianoRoll>, GenerateError>
where
    F: FnMut(BatchProgress<'_>) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let region = steps.region.clone();
    let mut rolls = vec![steps.roll.clone(); samplings.len()];
    let report_every = report_every.max(1);
    let total = region.len();
    // The watched head's row of every step since the last report (each over its own keys).
    let mut watched: Vec<Vec<f32>> = Vec::new();
    let mut logits: Vec<Vec<f32>>;
    // Each writing's steering parts (the texture echo, where one leans).
    let mut textures: Vec<_> = samplings
        .iter()
        .map(|_| steps.texture.map(TextureSteer::new))
        .collect();
    for t in region.clone() {
        let values: Vec<_> = rolls.iter().map(|r| steps.values(t..t + 1, r)).collect();
        let inputs: Vec<StepInput<'_>> = values.iter().map(|(x, _)| StepInput::Roll(x)).collect();
        let labels: Vec<Option<&[f32]>> = values.iter().map(|(_, c)| c.as_deref()).collect();
        logits = model
            .step_batch(&inputs, &labels, &mut states, device)
            .await?;
        let writings = rolls.iter_mut().zip(&logits).zip(samplings);
        for (((roll, out), s), texture) in writings.zip(&mut textures) {
            let (on, sus) = out.split_at(PITCHES);
            let mut draw = |p: usize, kind: u32| uniform(s.seed, t, p, kind);
            let now = PianoNow {
                written: roll,
                chords: None,
                step: t,
                sampling: s,
                onsets: on,
            };
            let mut parts: Vec<&mut dyn Steer<PianoNow>> = Vec::new();
            if let Some(x) = texture.as_mut() {
                parts.push(x);
            }
            let lean = lean_all(&mut parts, &now, &[0.0; PITCHES]);
            draw_step(roll, t, on, sus, s, lean.as_deref(), &mut draw);
        }
        if let Some(row) = watched_rows(&states[0], watch, t).await? {
            watched.push(row.values);
        }
        let done = t + 1 - region.start;
        if done.is_multiple_of(report_every) || done == total {
            let attention = rows_so_far(&mut watched, t + 1);
            let go_on = on_progress(BatchProgress {
                done,
                total,
                rolls: &rolls,
                logits: &logits,
                attention,
            })
            .await;
            if !go_on {
                return Err(GenerateError::Cancelled);
            }
        }
    }
    for roll in &mut rolls {
        join_after(roll, region.clone());
    }
    Ok(rolls)
}

/// The region of every state's sequence written by fused dispatches that advance them all
/// together ([`fused::FusedSteps::run_batch`]; one workgroup each, one dispatch a step), the
/// first one's head watched; where the kernel declines (another device, an encoding it does
/// not take), the states back, untouched.
#[cfg(feature = "gpu")]
async fn fused_batch<F, Fut>(
    model: &Performer,
    steps: &Steps<'_>,
    mut states: Vec<State>,
    (
        samplings,
        Reports {
            every: report_every,
            watch,
        },
    ): (&[PianoSampling], Reports),
    device: &Device,
    on_progress: &mut F,
) -> Result<Result<Vec<PianoRoll>, Vec<State>>, GenerateError>
where
    F: FnMut(BatchProgress<'_>) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let region = steps.region.clone();
    let k = samplings.len();
    let mut rolls = vec![steps.roll.clone(); k];
    let mut previous = vec![0f32; 2 * PITCHES];
    if region.start > 0 {
        for p in 0..PITCHES {
            previous[p] = steps.roll.onset(region.start - 1, p) as u8 as f32;
            previous[PITCHES + p] = steps.roll.sustain(region.start - 1, p) as u8 as f32;
        }
    }
    let previous = previous.repeat(k);
    let rows = fused::Steps::Rows {
        piano: steps.offset,
        previous: &previous,
    };
    let Some(mut f) = fused::FusedSteps::prepare_batch(model, &states, rows, device).await? else {
        return Ok(Err(states));
    };
    let report_every = report_every.max(1);
    let total = region.len();
    let m = f.features();
    let mut keys = Vec::new();
    if let Some(w) = watch
        && let Some(key) = states[0].captured_keys(w.layer, m, device)
    {
        keys = read_f32(key.narrow(0, 0, 1).narrow(1, w.head, 1)).await?;
    }
    let mut watched: Vec<Vec<f32>> = Vec::new();
    let mut logits = vec![Vec::new(); k];
    let mut t = region.start;
    while t < region.end {
        let due = region.start + ((t - region.start) / report_every + 1) * report_every;
        let end = steps.fused_end(t, (t + fused::CHUNK).min(due).min(region.end));
        // Every stream's rows are the same but for the piano planes, which the kernel fills.
        let (x, _) = steps.values(t..end, &rolls[0]);
        let xs = vec![x.as_slice(); k];
        let w = watch.map(|w| (w.layer, w.head));
        let outs = f.run_batch(&xs, t, samplings, w, &mut states).await?;
        let per = f.step_out();
        for (stream, (roll, out)) in rolls.iter_mut().zip(&outs).enumerate() {
            for (i, step) in (t..end).enumerate() {
                let o = &out[i * per..(i + 1) * per];
                let drawn = &o[2 * PITCHES..4 * PITCHES];
                for p in 0..PITCHES {
                    if drawn[PITCHES + p] != 0.0 {
                        roll.set(step, p, drawn[p] != 0.0, true, 0);
                    }
                }
                if stream == 0 && watch.is_some() {
                    let (phi_q, phi_k) = o[4 * PITCHES..].split_at(m);
                    let mut row = Vec::new();
                    captured_row(&mut keys, phi_k, phi_q, &mut row);
                    watched.push(row);
                }
            }
            logits[stream] = out[out.len() - per..out.len() - per + 2 * PITCHES].to_vec();
        }
        t = end;
        let done = t - region.start;
        if done.is_multiple_of(report_every) || done == total {
            let go_on = on_progress(BatchProgress {
                done,
                total,
                rolls: &rolls,
                logits: &logits,
                attention: rows_so_far(&mut watched, t),
            })
            .await;
            if !go_on {
                return Err(GenerateError::Cancelled);
            }
        }
    }
    for roll in &mut rolls {
        join_after(roll, region.clone());
    }
    Ok(Ok(rolls))
}

/// The piano part of the whole of `e`, sampled step by step with no progress reports, its
/// reference lane (for a model that reads one) answering `reference`.
pub async fn sample_whole(
    model: &Performer,
    e: &Example,
    reference: Option<&Answers>,
    sampling: PianoSampling,
    device: &Device,
) -> Result<PianoRoll, GenerateError> {
    let quiet = |_: PianoProgress<'_>| async { true };
    let given = Given {
        reference,
        ..Given::plain(None, 0..e.len)
    };
    let steps = Steps::of(model, e, &given)?;
    one_sequence(model, steps, sampling, Reports::at_end(), device, quiet).await
}

/// The watched head's rows of the steps since the last report (taken out of `watched`), each
/// padded to `keys` (the last one's step + 1: the keys after a row's own step are zero, as
/// attention is causal); `None` when no row was watched.
fn rows_so_far(watched: &mut Vec<Vec<f32>>, keys: usize) -> Option<AttentionRows> {
    if watched.is_empty() {
        return None;
    }
    let mut values = Vec::with_capacity(watched.len() * keys);
    for row in watched.drain(..) {
        let n = row.len();
        values.extend(row);
        values.resize(values.len() + keys - n, 0.0);
    }
    Some(AttentionRows {
        start: keys - values.len() / keys,
        keys,
        values,
    })
}

/// The kept piano after a rewritten `region`: a note of it that was sounding into the region
/// now starts where the region ends (struck again there), unless the region holds that pitch
/// into it, in which case the two join.
fn join_after(roll: &mut PianoRoll, region: Range<usize>) {
    if region.end < roll.num_steps && !region.is_empty() {
        let (t, before) = (region.end, region.end - 1);
        for p in 0..PITCHES {
            if roll.sustain(t, p) && !roll.onset(t, p) && !roll.sustain(before, p) {
                roll.set(t, p, true, true, 0);
            }
        }
    }
}

/// `given` with the steps of `region` taken from `new` (both as long): what a model that
/// writes every step at once gives for "regenerate these bars". A note of `given` sounding
/// into the region is cut where it starts; one sounding out of it is struck again after it.
pub fn splice(given: &PianoRoll, new: &PianoRoll, region: Range<usize>) -> PianoRoll {
    let mut roll = given.clone();
    let region = region.start.min(roll.num_steps)..region.end.min(roll.num_steps);
    for t in region.clone() {
        for p in 0..PITCHES {
            let (on, sus) = (new.onset(t, p), new.sustain(t, p));
            // A note of `new` held into the region from before it starts again at its start.
            let on = on || (sus && t == region.start);
            roll.set(t, p, on, sus, 0);
        }
    }
    join_after(&mut roll, region);
    roll
}

/// Onset and sustain probabilities `[len, 128]` of `e` with its piano planes as given
/// (teacher forcing), the whole window in one parallel pass: what training sees, and what
/// the step-by-step generator must agree with.
pub async fn teacher_forced_probs(
    model: &Performer,
    e: &Example,
    seed: u64,
    device: &Device,
) -> Result<Vec<f32>, GenerateError> {
    let width = e.inputs.len() / e.len.max(1);
    let inputs = Tensor::<3>::from_data(
        TensorData::new(e.inputs.clone(), vec![1, e.len, width]),
        device,
    );
    let coords_width = e.coordinates.len() / e.len.max(1);
    let coords = (model.config.pe.is_structural() && coords_width > 0).then(|| {
        Tensor::<3>::from_data(
            TensorData::new(e.coordinates.clone(), vec![1, e.len, coords_width]),
            device,
        )
    });
    let mut state = model.start(seed, false, device);
    let logits = model.forward(Inputs::Rolls(inputs), coords, &mut state, None)?;
    read_f32(sigmoid(logits)).await
}

#[cfg(all(test, feature = "gpu", not(target_arch = "wasm32")))]
mod fused_tests;
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;
