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
use super::{AttentionRows, GenerateError, Watch, read_f32, watched_rows};
use crate::data::Example;
use crate::data::features::LABEL_FEATURES;
use crate::model::config::{ACCOMPANIMENT_INPUTS, Task};
#[cfg(feature = "gpu")]
use crate::model::performer::captured_row;
use crate::model::performer::{Inputs, Performer, StepInput};
use crate::music::roll::{PITCHES, PianoRoll};

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
/// the uniform number of a pitch's onset (kind 0) or hold (kind 1) draw.
pub fn draw_step(
    roll: &mut PianoRoll,
    step: usize,
    onset_logits: &[f32],
    sustain_logits: &[f32],
    s: &PianoSampling,
    uniform: &mut impl FnMut(usize, u32) -> f32,
) {
    let t = s.temperature.max(1e-4);
    // Added to every onset's log odds (0 at density 1: the plain sigmoid).
    let bias = s.onset_bias();
    for p in 0..PITCHES {
        let p_on = 1.0 / (1.0 + (-(onset_logits[p] / t + bias)).exp());
        let strike = match s.threshold {
            Some(th) => p_on > th,
            None => uniform(p, 0) < p_on,
        };
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

/// Writes the piano part of example `e` (its inputs: melody, bridge and lanes; the piano
/// planes in it are ignored) a step at a time over `region`; the steps before the region
/// keep `given`'s piano (teacher-forced in one parallel pass, so the region continues from
/// it), and so do the steps after it. `report_every` steps, `on_progress` sees the piano so
/// far and the watched head's attention row, and returns whether to go on.
#[allow(clippy::too_many_arguments)]
pub async fn accompany_steps<F, Fut>(
    model: &Performer,
    e: &Example,
    given: Option<&PianoRoll>,
    region: Range<usize>,
    sampling: PianoSampling,
    report_every: usize,
    watch: Option<Watch>,
    device: &Device,
    mut on_progress: F,
) -> Result<PianoRoll, GenerateError>
where
    F: FnMut(PianoProgress<'_>) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    sampling.check()?;
    let offset = piano_offset(model)?;
    if let Some(w) = watch {
        w.check(model)?;
    }
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
    let coords_width = e.coordinates.len() / len.max(1);
    let structural = model.config.pe.is_structural();
    // Inputs of steps `range` [len, width], with the previous piano step taken from `roll`,
    // and their structure coordinates when the encoding reads them.
    let values = |range: Range<usize>, roll: &PianoRoll| -> (Vec<f32>, Option<Vec<f32>>) {
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
        }
        let coords = (structural && coords_width > 0)
            .then(|| e.coordinates[range.start * coords_width..range.end * coords_width].to_vec());
        (x, coords)
    };
    let rows = |range: Range<usize>, roll: &PianoRoll| -> (Tensor<3>, Option<Tensor<3>>) {
        let n = range.len();
        let (x, coords) = values(range, roll);
        let inputs = Tensor::<3>::from_data(TensorData::new(x, vec![1, n, width]), device);
        let coords = coords
            .map(|c| Tensor::<3>::from_data(TensorData::new(c, vec![1, n, coords_width]), device));
        (inputs, coords)
    };
    let stepping = model.stepping(device).await?;
    let mut state = model
        .start(sampling.seed, watch.is_some(), device)
        .stepping(&stepping);
    state.capture_layer = watch.map(|w| w.layer);
    // What comes before the region is known: one parallel pass fills the attention state.
    if region.start > 0 {
        let (inputs, coords) = rows(0..region.start, &roll);
        model.forward(Inputs::Rolls(inputs), coords, &mut state, None)?;
    }
    let report_every = report_every.max(1);
    let total = region.len();
    #[cfg(feature = "gpu")]
    if fused::enabled() {
        let mut previous = vec![0f32; 2 * PITCHES];
        if region.start > 0 {
            for p in 0..PITCHES {
                previous[p] = roll.onset(region.start - 1, p) as u8 as f32;
                previous[PITCHES + p] = roll.sustain(region.start - 1, p) as u8 as f32;
            }
        }
        let steps = fused::Steps::Rows {
            piano: offset,
            previous: &previous,
        };
        let prepared = fused::FusedSteps::prepare(model, &state, steps, device).await?;
        if let Some(mut f) = prepared {
            let m = f.features();
            // The watched head's keys so far (the prefill's, captured), m floats each.
            let mut keys = Vec::new();
            if let Some(w) = watch
                && let Some(k) = state.captured_keys(w.layer, m, device)
            {
                keys = read_f32(k.narrow(0, 0, 1).narrow(1, w.head, 1)).await?;
            }
            let mut watched: Vec<Vec<f32>> = Vec::new();
            let mut t = region.start;
            while t < region.end {
                // Chunks end where a report is due, so progress comes as often as asked.
                let due = region.start + ((t - region.start) / report_every + 1) * report_every;
                let end = (t + fused::CHUNK).min(due).min(region.end);
                let (x, _) = values(t..end, &roll);
                let w = watch.map(|w| (w.layer, w.head));
                let out = f.run(&x, t, &sampling, w, &mut state).await?;
                let per = f.step_out();
                for (i, step) in (t..end).enumerate() {
                    let o = &out[i * per..(i + 1) * per];
                    let drawn = &o[2 * PITCHES..4 * PITCHES];
                    for p in 0..PITCHES {
                        if drawn[PITCHES + p] != 0.0 {
                            roll.set(step, p, drawn[p] != 0.0, true, 0);
                        }
                    }
                    if watch.is_some() {
                        let (phi_q, phi_k) = o[4 * PITCHES..].split_at(m);
                        let mut row = Vec::new();
                        captured_row(&mut keys, phi_k, phi_q, &mut row);
                        watched.push(row);
                    }
                }
                t = end;
                let done = t - region.start;
                if done % report_every == 0 || done == total {
                    let last = &out[out.len() - per..out.len() - per + 2 * PITCHES];
                    let go_on = on_progress(PianoProgress {
                        done,
                        total,
                        roll: &roll,
                        logits: last,
                        attention: rows_so_far(&mut watched, t),
                    })
                    .await;
                    if !go_on {
                        return Err(GenerateError::Cancelled);
                    }
                }
            }
            join_after(&mut roll, region);
            return Ok(roll);
        }
    }
    // The watched head's row of every step since the last report (each over its own keys).
    let mut watched: Vec<Vec<f32>> = Vec::new();
    for t in region.clone() {
        let (x, coords) = values(t..t + 1, &roll);
        let values = model
            .step(StepInput::Roll(&x), coords.as_deref(), &mut state, device)
            .await?;
        let (on, sus) = values.split_at(PITCHES);
        let mut draw = |p: usize, kind: u32| uniform(sampling.seed, t, p, kind);
        draw_step(&mut roll, t, on, sus, &sampling, &mut draw);
        if let Some(row) = watched_rows(&state, watch, t).await? {
            watched.push(row.values);
        }
        let done = t + 1 - region.start;
        if done % report_every == 0 || done == total {
            let attention = rows_so_far(&mut watched, t + 1);
            let go_on = on_progress(PianoProgress {
                done,
                total,
                roll: &roll,
                logits: &values,
                attention,
            })
            .await;
            if !go_on {
                return Err(GenerateError::Cancelled);
            }
        }
    }
    join_after(&mut roll, region);
    Ok(roll)
}

/// The piano part of the whole of `e`, sampled step by step with no progress reports.
pub async fn sample_whole(
    model: &Performer,
    e: &Example,
    sampling: PianoSampling,
    device: &Device,
) -> Result<PianoRoll, GenerateError> {
    let quiet = |_: PianoProgress<'_>| async { true };
    accompany_steps(
        model,
        e,
        None,
        0..e.len,
        sampling,
        e.len,
        None,
        device,
        quiet,
    )
    .await
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
